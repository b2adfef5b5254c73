/* asm_lex.c - the assembler's lexer: tokens (words, strings, punctuation, comments), the error
 * that names file:line:column, and the numbers of the language (integers, exact decimals as
 * fixed point, sizes WxH, RRGGBBAA pixels). */
#include <ctype.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "asm_internal.h"

/* ---- errors and the lexer ------------------------------------------------------------------- */

int px_asm_fail_at(px_asm_src *s, int line, int col, const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return pxvm_fail(s->err, PXE_ASM, -1, -1, s->path, line, col, msg);
}

static void px__skip_space(px_asm_src *s)
{
    for (;;) {
        while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\r'))
            s->p++;
        if (s->p < s->end && (*s->p == ';' || *s->p == '#') && !(s->p[0] == '#' && s->p + 1 < s->end && isdigit((unsigned char)s->p[1]))) {
            while (s->p < s->end && *s->p != '\n')
                s->p++;
            continue;
        }
        return;
    }
}

/* Words are runs of [A-Za-z0-9_.+-#@]: names, mnemonics, numbers, sizes (451x300), directives,
 * relative modes (linear@f3). */
static int px__is_word(int c) { return isalnum(c) || c == '_' || c == '.' || c == '+' || c == '-' || c == '#' || c == '@'; }

int px_asm_next(px_asm_src *s, px_asm_tok *t)
{
    px__skip_space(s);
    t->line = s->line;
    t->col = (int)(s->p - s->line_start) + 1;
    t->text[0] = 0;
    if (s->p >= s->end) {
        t->kind = T_EOF;
        return 0;
    }
    char c = *s->p;
    if (c == '\n') {
        s->p++;
        s->line++;
        s->line_start = s->p;
        t->kind = T_EOL;
        return 0;
    }
    if (c == '=' || c == '(' || c == ')' || c == ',') {
        s->p++;
        t->kind = c == '=' ? T_EQ : c == '(' ? T_LP : c == ')' ? T_RP : T_COMMA;
        t->text[0] = c;
        t->text[1] = 0;
        return 0;
    }
    if (c == '"') {
        const char *q = ++s->p;
        while (s->p < s->end && *s->p != '"' && *s->p != '\n')
            s->p++;
        if (s->p >= s->end || *s->p != '"')
            return px_asm_fail_at(s, t->line, t->col, "unterminated string (expected a closing '\"')");
        size_t n = (size_t)(s->p - q);
        if (n >= sizeof t->text)
            return px_asm_fail_at(s, t->line, t->col, "string longer than %zu characters", sizeof t->text - 1);
        memcpy(t->text, q, n);
        t->text[n] = 0;
        s->p++;
        t->kind = T_STR;
        return 0;
    }
    if (!px__is_word((unsigned char)c))
        return px_asm_fail_at(s, t->line, t->col, "unexpected character '%c'", c);
    size_t n = 0;
    while (s->p < s->end && px__is_word((unsigned char)*s->p)) {
        if (n + 1 >= sizeof t->text)
            return px_asm_fail_at(s, t->line, t->col, "word longer than %zu characters", sizeof t->text - 1);
        t->text[n++] = *s->p++;
    }
    t->text[n] = 0;
    t->kind = T_WORD;
    return 0;
}

const char *px_asm_tok_name(const px_asm_tok *t)
{
    switch (t->kind) {
    case T_EOL: return "the end of the line";
    case T_EOF: return "the end of the file";
    default: return t->text;
    }
}

int px_asm_expect_eol(px_asm_src *s)
{
    px_asm_tok t;
    if (px_asm_next(s, &t) < 0)
        return -1;
    if (t.kind != T_EOL && t.kind != T_EOF)
        return px_asm_fail_at(s, t.line, t.col, "unexpected '%s' (expected the end of the line)", px_asm_tok_name(&t));
    return 0;
}

int px_asm_word(px_asm_src *s, px_asm_tok *t, const char *what)
{
    if (px_asm_next(s, t) < 0)
        return -1;
    if (t->kind != T_WORD && t->kind != T_STR)
        return px_asm_fail_at(s, t->line, t->col, "expected %s, found %s", what, px_asm_tok_name(t));
    return 0;
}

/* ---- numbers -------------------------------------------------------------------------------- */

int px_asm_parse_int(const char *s, long long lo, long long hi, long long *v)
{
    char *end;
    if (!*s)
        return -1;
    long long x = strtoll(s, &end, 10);
    if (*end || x < lo || x > hi)
        return -1;
    *v = x;
    return 0;
}

/* An exact decimal ("-12.375") as a fixed-point integer with `frac` fractional bits, rounded to the
 * nearest, halves away from zero. Range checked against [lo, hi]. */
int px_asm_parse_fixed(const char *s, int frac, long long lo, long long hi, long long *v)
{
    int neg = *s == '-';
    if (*s == '-' || *s == '+')
        s++;
    if (!isdigit((unsigned char)*s))
        return -1;
    unsigned __int128 ip = 0, fp = 0, scale = 1;
    for (; isdigit((unsigned char)*s); s++) {
        ip = ip * 10 + (unsigned)(*s - '0');
        if (ip > ((unsigned __int128)1 << 40))
            return -1;
    }
    if (*s == '.') {
        s++;
        if (!isdigit((unsigned char)*s))
            return -1;
        for (; isdigit((unsigned char)*s); s++)
            if (scale < (unsigned __int128)1000000000000000000ull * 1000) {
                fp = fp * 10 + (unsigned)(*s - '0');
                scale *= 10;
            }
    }
    if (*s)
        return -1;
    unsigned __int128 f = (fp << frac) * 2 + scale; /* round half away from zero */
    unsigned __int128 mag = (ip << frac) + f / (2 * scale);
    if (mag > ((unsigned __int128)1 << 62))
        return -1;
    long long x = neg ? -(long long)mag : (long long)mag;
    if (x < lo || x > hi)
        return -1;
    *v = x;
    return 0;
}

/* "451x300" */
int px_asm_parse_size(const char *s, int *w, int *h)
{
    char *x = strchr(s, 'x');
    if (!x || x == s)
        return -1;
    char buf[64];
    snprintf(buf, sizeof buf, "%.*s", (int)(x - s), s);
    long long a, b;
    if (px_asm_parse_int(buf, 1, 65535, &a) < 0 || px_asm_parse_int(x + 1, 1, 65535, &b) < 0)
        return -1;
    *w = (int)a;
    *h = (int)b;
    return 0;
}

int px_asm_hex_pixel(const char *s, uint8_t out[4])
{
    if (strlen(s) != 8)
        return -1;
    for (int i = 0; i < 8; i++)
        if (!isxdigit((unsigned char)s[i]))
            return -1;
    for (int i = 0; i < 4; i++) {
        char b[3] = {s[2 * i], s[2 * i + 1], 0};
        out[i] = (uint8_t)strtoul(b, NULL, 16);
    }
    return 0;
}
