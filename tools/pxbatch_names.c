/* pxbatch_names.c - the dataset's file names in pxbatch's files: strict numbers, the list file
 * (one name a line, any bytes but NUL), names written as JSON strings (with their bytes in hex
 * when they are not UTF-8) and read back, and the names of a shard's files ([SH-NAME]). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pxbatch_files.h"

/* ---- numbers, names, the list file ------------------------------------------------------------ */

int pxb_parse_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t *v)
{
    if (!s || !*s)
        return -1;
    uint64_t x = 0;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9' || x > (UINT64_MAX - (uint64_t)(*p - '0')) / 10)
            return -1;
        x = x * 10 + (uint64_t)(*p - '0');
    }
    if (x < lo || x > hi)
        return -1;
    *v = x;
    return 0;
}

int pxb_names_add(pxb_names *l, const char *s)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 256;
        char **v = realloc(l->v, sizeof(char *) * cap);
        if (!v)
            return -1;
        l->v = v, l->cap = cap;
    }
    return (l->v[l->n] = strdup(s)) ? (int)(++l->n, 0) : -1;
}

void pxb_names_free(pxb_names *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i]);
    free(l->v);
    memset(l, 0, sizeof *l);
}

int pxb_list_read(FILE *f, pxb_names *l, char *why, size_t why_len)
{
    char *line = NULL;
    size_t cap = 0, no = 0;
    ssize_t k;
    int rc = 0;
    errno = 0;
    while ((k = getline(&line, &cap, f)) >= 0) {
        size_t len = (size_t)k;
        no++;
        if (len && line[len - 1] == '\n')
            len--;
        if (len && line[len - 1] == '\r')
            len--;
        if (memchr(line, 0, len)) {
            pxb_why(why, why_len, "line %zu holds a NUL byte (no file name can)", no);
            rc = -1;
            break;
        }
        line[len] = 0;
        if (len && pxb_names_add(l, line) < 0) {
            pxb_why(why, why_len, "out of memory at line %zu", no);
            rc = -1;
            break;
        }
        errno = 0;
    }
    if (!rc && (ferror(f) || errno == ENOMEM)) {
        pxb_why(why, why_len, "%s", strerror(errno ? errno : EIO));
        rc = -1;
    }
    free(line);
    return rc;
}

/* ---- shard file names ([SH-NAME], pxbatch.h) ---------------------------------------------------- */

/* The extensions of PXB_JSON .. PXB_GRID. */
static const char *const px__shard_ext[] = {"json", "npy", "offsets.npy", "grid.npy"};

int pxb_shard_entry(const char *name, int *index)
{
    if (strncmp(name, "shard-", 6))
        return PXB_NOT_OURS;
    if (strstr(name + 6, ".tmp-"))
        return PXB_TEMP;
    const char *d = name + 6, *p = d;
    uint64_t v = 0;
    while (*p >= '0' && *p <= '9' && p - d < 11)
        v = v * 10 + (uint64_t)(*p++ - '0');
    size_t digits = (size_t)(p - d);
    /* as "%05d" writes K: five digits, or more without a leading zero */
    if (digits < 5 || (digits > 5 && *d == '0') || v > INT32_MAX || *p != '.')
        return PXB_STRAY;
    for (int k = PXB_JSON; k <= PXB_GRID; k++)
        if (!strcmp(p + 1, px__shard_ext[k])) {
            *index = (int)v;
            return k;
        }
    return PXB_STRAY;
}

int pxb_shard_name(const char *name, const char *ext)
{
    int index, k = pxb_shard_entry(name, &index);
    return k <= PXB_GRID && !strcmp(ext, px__shard_ext[k]) ? index : -1;
}

/* ---- JSON ----------------------------------------------------------------------------------- */

/* The length of the UTF-8 sequence at s (n bytes left), 0 when it is not one. */
static size_t px__utf8_len(const uint8_t *s, size_t n)
{
    uint8_t c = s[0];
    if (c < 0x80)
        return 1;
    size_t len;
    uint32_t cp, min;
    if (c >= 0xc2 && c <= 0xdf)
        len = 2, cp = c & 0x1fu, min = 0x80;
    else if (c >= 0xe0 && c <= 0xef)
        len = 3, cp = c & 0x0fu, min = 0x800;
    else if (c >= 0xf0 && c <= 0xf4)
        len = 4, cp = c & 0x07u, min = 0x10000;
    else
        return 0;
    if (n < len)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = cp << 6 | (s[i] & 0x3fu);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return len;
}

int pxb_utf8_valid(const char *s, size_t len)
{
    const uint8_t *p = (const uint8_t *)s;
    for (size_t i = 0; i < len;) {
        size_t k = px__utf8_len(p + i, len - i);
        if (!k)
            return 0;
        i += k;
    }
    return 1;
}

void pxb_json_str(FILE *f, const char *s)
{
    const uint8_t *p = (const uint8_t *)s;
    size_t n = strlen(s);
    fputc('"', f);
    for (size_t i = 0; i < n;) {
        uint8_t c = p[i];
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c), i++;
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c), i++;
        else {
            size_t k = px__utf8_len(p + i, n - i);
            if (k)
                fwrite(p + i, 1, k, f), i += k;
            else
                fputs("\xef\xbf\xbd", f), i++;
        }
    }
    fputc('"', f);
}

void pxb_json_name(FILE *f, const char *key, const char *s)
{
    fprintf(f, "\"%s\": ", key);
    pxb_json_str(f, s);
    size_t n = strlen(s);
    if (!pxb_utf8_valid(s, n)) {
        fprintf(f, ", \"%s_bytes\": \"", key);
        for (size_t i = 0; i < n; i++)
            fprintf(f, "%02x", (unsigned char)s[i]);
        fputc('"', f);
    }
}

static int px__hex(int c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

char *pxb_json_get_name(json_t *obj, const char *key)
{
    char bkey[64];
    snprintf(bkey, sizeof bkey, "%s_bytes", key);
    json_t *b = json_object_get(obj, bkey);
    if (b) {
        const char *h = json_string_value(b);
        size_t n = h ? strlen(h) : 0;
        if (!n || n % 2)
            return NULL;
        char *out = malloc(n / 2 + 1);
        for (size_t i = 0; out && i < n / 2; i++) {
            int hi = px__hex(h[2 * i]), lo = px__hex(h[2 * i + 1]);
            if (hi < 0 || lo < 0 || (hi | lo) == 0) { /* not hex, or a NUL byte */
                free(out);
                return NULL;
            }
            out[i] = (char)(hi << 4 | lo);
        }
        if (out)
            out[n / 2] = 0;
        return out;
    }
    const char *s = json_string_value(json_object_get(obj, key));
    return s && *s && strlen(s) == json_string_length(json_object_get(obj, key)) ? strdup(s) : NULL;
}
