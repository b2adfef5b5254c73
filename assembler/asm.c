/* asm.c - the pxasm assembler: source text -> program image.
 *
 * Two passes. The first reads every line into declarations (slots, data, rows, pixels) and
 * instructions whose operands are still text; the second lays the image out (header, code, rows,
 * data), resolves names and encodes every instruction from the opcode table through the program
 * builder. Nothing is written anywhere: the caller gets an image, validated, or an error naming
 * file:line:column and what was expected. Here: instructions and their operands, the reading
 * loop, pass 2 and the entry points; the lexer and numbers are in asm_lex.c, the directives in
 * asm_directives.c (asm_internal.h: what they share).
 */
#define _GNU_SOURCE /* strcasecmp */
#include "pxasm.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "../vm/pxi_build.h"
#include "asm_internal.h"

/* ---- the program as read ------------------------------------------------------------------- */

static void px__prog_free(px_asm_prog *p)
{
    for (int k = 0; k < p->nslots; k++)
        pxvm_image_free(&p->slots[k].data);
    for (int i = 0; i < p->npixels; i++)
        free(p->pixels[i].px);
    free(p->insns);
    free(p->rowpx);
}

/* ---- pass 1: reading ------------------------------------------------------------------------ */

static const pxi_op_info *px__mnemonic(const char *w)
{
    for (unsigned v = 0; v < 256; v++)
        if (pxi_op(v)->name && !strcasecmp(pxi_op(v)->name, w))
            return pxi_op(v);
    return NULL;
}

/* Operand name aliases that set two fields at once: center=(u, v) and the like. */
static const struct {
    const char *alias, *a, *b;
} px__pairs[] = {
    {"center", "cu", "cv"}, {"step", "du", "dv"}, {"at", "dst_x", "dst_y"}, {"size", "w", "h"},
    {"table_at", "table_x", "table_y"},
};

static int px__field_index(const pxi_op_info *op, const char *name)
{
    for (int f = 0; f < op->nfields; f++)
        if (op->fields[f].kind != PXK_ZERO && !strcmp(op->fields[f].name, name))
            return f;
    return -1;
}

static int px__add_operand(px_asm_src *s, px_asm_insn *in, const pxi_op_info *op, int field, const px_asm_tok *v)
{
    for (int i = 0; i < in->nops; i++)
        if (in->ops[i].field == field)
            return px_asm_fail_at(s, v->line, v->col, "operand %s is given twice", op->fields[field].name);
    px_asm_operand *o = &in->ops[in->nops++];
    o->field = field;
    snprintf(o->text, sizeof o->text, "%s", v->text);
    o->line = v->line;
    o->col = v->col;
    return 0;
}

static int px__instruction(px_asm_src *s, px_asm_prog *p, const px_asm_tok *mn)
{
    const pxi_op_info *op = px__mnemonic(mn->text);
    if (!op) {
        char list[256] = "";
        for (unsigned v = 0; v < 256; v++)
            if (pxi_op(v)->name)
                snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", list[0] ? ", " : "", pxi_op(v)->name);
        return px_asm_fail_at(s, mn->line, mn->col, "unknown mnemonic '%s' (expected a directive or one of %s)", mn->text, list);
    }
    if (p->ninsns == p->cap) {
        p->cap = p->cap ? 2 * p->cap : 64;
        px_asm_insn *q = realloc(p->insns, sizeof(px_asm_insn) * (size_t)p->cap);
        if (!q)
            return px_asm_fail_at(s, mn->line, mn->col, "out of memory");
        p->insns = q;
    }
    px_asm_insn *in = &p->insns[p->ninsns];
    memset(in, 0, sizeof *in);
    in->op = op->value;
    in->line = mn->line;
    in->col = mn->col;
    int positional = 0; /* the next field a positional operand fills */
    for (;;) {
        px_asm_tok t, eq;
        if (px_asm_next(s, &t) < 0)
            return -1;
        if (t.kind == T_EOL || t.kind == T_EOF)
            break;
        if (t.kind == T_COMMA)
            continue;
        if (t.kind != T_WORD)
            return px_asm_fail_at(s, t.line, t.col, "unexpected '%s' (expected an operand)", px_asm_tok_name(&t));
        const char *save_p = s->p, *save_ls = s->line_start;
        int save_line = s->line;
        if (px_asm_next(s, &eq) < 0)
            return -1;
        if (eq.kind == T_EQ) { /* name=value or alias=(a, b) */
            int f = px__field_index(op, t.text);
            if (f >= 0) {
                px_asm_tok v;
                if (px_asm_word(s, &v, "a value") < 0 || px__add_operand(s, in, op, f, &v) < 0)
                    return -1;
                continue;
            }
            for (size_t a = 0; a < sizeof px__pairs / sizeof px__pairs[0]; a++) {
                if (strcmp(px__pairs[a].alias, t.text) || px__field_index(op, px__pairs[a].a) < 0)
                    continue;
                px_asm_tok lp, va, c, vb, rp;
                if (px_asm_next(s, &lp) < 0)
                    return -1;
                if (lp.kind == T_WORD) { /* step=2: both the same */
                    if (px__add_operand(s, in, op, px__field_index(op, px__pairs[a].a), &lp) < 0 ||
                        px__add_operand(s, in, op, px__field_index(op, px__pairs[a].b), &lp) < 0)
                        return -1;
                    f = 0;
                    break;
                }
                if (lp.kind != T_LP || px_asm_word(s, &va, "a value") < 0 || px_asm_next(s, &c) < 0 || c.kind != T_COMMA ||
                    px_asm_word(s, &vb, "a value") < 0 || px_asm_next(s, &rp) < 0 || rp.kind != T_RP)
                    return px_asm_fail_at(s, t.line, t.col, "expected %s=(%s, %s)", t.text, px__pairs[a].a, px__pairs[a].b);
                if (px__add_operand(s, in, op, px__field_index(op, px__pairs[a].a), &va) < 0 ||
                    px__add_operand(s, in, op, px__field_index(op, px__pairs[a].b), &vb) < 0)
                    return -1;
                f = 0;
                break;
            }
            if (f < 0) {
                char list[256] = "";
                for (int k = 0; k < op->nfields; k++)
                    if (op->fields[k].kind != PXK_ZERO)
                        snprintf(list + strlen(list), sizeof list - strlen(list), " %s", op->fields[k].name);
                return px_asm_fail_at(s, t.line, t.col, "%s has no operand '%s' (its operands:%s)", op->name, t.text, list);
            }
            continue;
        }
        /* positional: fills the next operand in table order */
        s->p = save_p, s->line_start = save_ls, s->line = save_line;
        while (positional < op->nfields && op->fields[positional].kind == PXK_ZERO)
            positional++;
        if (positional >= op->nfields)
            return px_asm_fail_at(s, t.line, t.col, "too many operands for %s", op->name);
        if (px__add_operand(s, in, op, positional++, &t) < 0)
            return -1;
    }
    p->ninsns++;
    return 0;
}

static int px__read(px_asm_src *s, px_asm_prog *p, const pxvm_limits *lim)
{
    px_asm_tok t;
    for (;;) {
        if (px_asm_next(s, &t) < 0)
            return -1;
        if (t.kind == T_EOF)
            return 0;
        if (t.kind == T_EOL)
            continue;
        if (t.kind != T_WORD)
            return px_asm_fail_at(s, t.line, t.col, "unexpected '%s' (expected a directive or an instruction)", px_asm_tok_name(&t));
        if (t.text[0] != '.') {
            if (px__instruction(s, p, &t) < 0)
                return -1;
            continue;
        }
        int needs_width = !strcmp(t.text, ".rows");
        if (needs_width && !p->width)
            p->width = 64;
        long long v;
        px_asm_tok a;
        if (!strcmp(t.text, ".width") || !strcmp(t.text, ".height") || !strcmp(t.text, ".code_start")) {
            if (px_asm_word(s, &a, "a number") < 0)
                return -1;
            int is_w = t.text[1] == 'w', is_h = t.text[1] == 'h';
            if (px_asm_parse_int(a.text, 1, is_w || is_h ? 65535 : INT_MAX, &v) < 0)
                return px_asm_fail_at(s, a.line, a.col, "'%s' is out of range for %s", a.text, t.text);
            if (is_w && (p->ninsns || p->nrows))
                return px_asm_fail_at(s, t.line, t.col, ".width must come before instructions and rows");
            if (is_w)
                p->width = (int)v;
            else if (is_h)
                p->height = (int)v;
            else
                p->code_start = (int)v;
            if (px_asm_expect_eol(s) < 0)
                return -1;
        } else if (!strcmp(t.text, ".slot")) {
            if (px_asm_dir_slot(s, p, &t) < 0)
                return -1;
        } else if (!strcmp(t.text, ".data")) {
            if (px_asm_dir_data(s, p, &t, lim) < 0)
                return -1;
        } else if (!strcmp(t.text, ".table")) {
            if (px_asm_dir_table(s, p, &t) < 0)
                return -1;
        } else if (!strcmp(t.text, ".rows")) {
            if (px_asm_dir_rows(s, p, &t) < 0)
                return -1;
        } else if (!strcmp(t.text, ".pixels")) {
            if (px_asm_dir_pixels(s, p, &t) < 0)
                return -1;
        } else {
            return px_asm_fail_at(s, t.line, t.col,
                               "unknown directive '%s' (expected .width .height .code_start .slot .data .table .rows .pixels)",
                               t.text);
        }
    }
}

/* ---- pass 2: layout and encoding ------------------------------------------------------------ */

static int px__slot_value(px_asm_src *s, const px_asm_prog *p, const px_asm_operand *o, long long *v)
{
    if (!strcmp(o->text, "prog")) {
        *v = 0;
        return 0;
    }
    if (o->text[0] == '#' && px_asm_parse_int(o->text + 1, 0, 255, v) == 0)
        return 0;
    if (px_asm_parse_int(o->text, 0, 255, v) == 0)
        return 0;
    int k = px_asm_find_slot(p, o->text);
    if (k < 0)
        return px_asm_fail_at(s, o->line, o->col, "undefined slot '%s' (declare it with .slot, .data or .table)", o->text);
    *v = k + 1;
    return 0;
}

static int px__row_value(px_asm_src *s, const px_asm_prog *p, const px_asm_operand *o, int rows_base, long long *v)
{
    if (px_asm_parse_int(o->text, 0, 255, v) == 0)
        return 0;
    char name[256];
    long long off = 0;
    snprintf(name, sizeof name, "%s", o->text);
    char *plus = strchr(name, '+');
    if (plus) {
        *plus = 0;
        if (px_asm_parse_int(plus + 1, 0, 65535, &off) < 0)
            return px_asm_fail_at(s, o->line, o->col, "'%s' is not NAME+N", o->text);
    }
    for (int i = 0; i < p->nrows_blocks; i++)
        if (!strcmp(p->rows[i].name, name)) {
            if (off >= p->rows[i].count)
                return px_asm_fail_at(s, o->line, o->col, "'%s' has only %d rows", name, p->rows[i].count);
            *v = rows_base + p->rows[i].first + off;
            if (*v > 255)
                return px_asm_fail_at(s, o->line, o->col, "row %lld of '%s' is past row 255, out of range for a row operand", *v, o->text);
            return 0;
        }
    return px_asm_fail_at(s, o->line, o->col, "undefined row name '%s' (declare it with .rows)", name);
}

static int px__encode_operand(px_asm_src *s, const px_asm_prog *p, const pxi_op_info *op, const px_asm_operand *o, int rows_base,
                              int32_t *out)
{
    const pxi_field_info *fi = &op->fields[o->field];
    long long v = 0;
    int rc = 0;
    switch (fi->kind) {
    case PXK_SLOT: rc = px__slot_value(s, p, o, &v); break;
    case PXK_MASK: rc = strcmp(o->text, "none") ? px__slot_value(s, p, o, &v) : 0; break;
    case PXK_ROW: rc = px__row_value(s, p, o, rows_base, &v); break;
    case PXK_MODE: {
        /* linear | nearest, optionally @fN: positions relative to fixation register N */
        const char *at = strchr(o->text, '@');
        size_t n = at ? (size_t)(at - o->text) : strlen(o->text);
        long long reg = -1;
        if (!strncmp(o->text, "linear", n) && n == 6)
            v = PX_MODE_LINEAR;
        else if (!strncmp(o->text, "nearest", n) && n == 7)
            v = PX_MODE_NEAREST;
        else if (n == 1 && (o->text[0] == '0' || o->text[0] == '1'))
            v = o->text[0] - '0';
        else
            v = -1;
        if (v >= 0 && at && (at[1] != 'f' || px_asm_parse_int(at + 2, 0, PX_FIX_REGS - 1, &reg) < 0))
            v = -1;
        if (v < 0)
            rc = px_asm_fail_at(s, o->line, o->col,
                             "operand %s: '%s' is not a mode (expected linear or nearest, optionally @f0..@f7 for "
                             "positions relative to that fixation register)",
                             fi->name, o->text);
        else if (reg >= 0)
            v = PX_MODE_REL(v, reg);
        break;
    }
    case PXK_U8:
    case PXK_FLAG:
    case PXK_REG:
    case PXK_LEVEL: {
        int hi = fi->kind == PXK_FLAG ? 1 : fi->kind == PXK_REG ? PX_FIX_REGS - 1 : fi->kind == PXK_LEVEL ? PXVM_MAX_LEVELS - 1 : 255;
        if (px_asm_parse_int(o->text, 0, hi, &v) < 0)
            rc = px_asm_fail_at(s, o->line, o->col, "operand %s: '%s' is out of range (expected an integer in 0..%d)", fi->name,
                             o->text, hi);
        break;
    }
    case PXK_U16:
    case PXK_DIM:
        if (px_asm_parse_int(o->text, fi->kind == PXK_DIM ? 1 : 0, 65535, &v) < 0)
            rc = px_asm_fail_at(s, o->line, o->col, "operand %s: '%s' is out of range (expected an integer in %d..65535)", fi->name,
                             o->text, fi->kind == PXK_DIM ? 1 : 0);
        break;
    case PXK_Q16:
        if (px_asm_parse_fixed(o->text, 16, INT32_MIN, INT32_MAX, &v) < 0)
            rc = px_asm_fail_at(s, o->line, o->col,
                             "operand %s: '%s' is out of range (expected a decimal in -32768..32767.99998, texels)", fi->name, o->text);
        break;
    case PXK_TAPS:
        if (px_asm_parse_int(o->text, 1, PX_MAX_TAPS, &v) < 0)
            rc = px_asm_fail_at(s, o->line, o->col, "operand %s: '%s' is out of range (expected 1..%d taps)", fi->name, o->text,
                             PX_MAX_TAPS);
        break;
    case PXK_LOD:
        if (px_asm_parse_fixed(o->text, 8, 0, 65535, &v) < 0)
            rc = px_asm_fail_at(s, o->line, o->col, "operand %s: '%s' is out of range (expected a decimal LOD in 0..255.996)",
                             fi->name, o->text);
        break;
    case PXK_ZERO: break;
    }
    *out = (int32_t)v;
    return rc;
}

static int px__layout(px_asm_src *s, px_asm_prog *p, const pxvm_limits *lim, pxvm_image *out)
{
    pxvm_builder b;
    pxvm_build_init(&b, p->width ? p->width : 64);
    b.code_start = p->code_start;
    for (int k = 0; k < p->nslots; k++) {
        const px_asm_slot *sl = &p->slots[k];
        int n = sl->has_at ? pxvm_build_data_at(&b, sl->name, sl->w, sl->h, sl->at_x, sl->at_y)
                : sl->data.px ? pxvm_build_data_slot(&b, sl->name, &sl->data)
                              : pxvm_build_slot(&b, sl->role, sl->name, sl->w, sl->h);
        if (n >= 0 && sl->persist)
            pxvm_build_persist(&b, n);
        if (n >= 0 && sl->any)
            pxvm_build_any_size(&b, n, (int)sl->any_min, (int)sl->any_max, (uint32_t)sl->any_pixels);
        if (n < 0) {
            pxvm_error why;
            pxvm_build_error(&b, &why);
            int rc = px_asm_fail_at(s, sl->line, 1, "%s", why.msg);
            pxvm_build_free(&b);
            return rc;
        }
        if (sl->pn)
            pxvm_build_patches(&b, n, sl->pw, sl->ph, sl->pn);
    }
    /* where the raw rows will go: the first row after the code */
    size_t code_pixels = 0;
    for (int i = 0; i < p->ninsns; i++)
        code_pixels += pxi_op((unsigned)p->insns[i].op)->pixels;
    size_t code0 = p->code_start ? (size_t)p->code_start : PXI_HEADER_PIXELS + (size_t)PXI_SLOT_PIXELS * (size_t)p->nslots;
    int rows_base = (int)((code0 + code_pixels + (size_t)b.width - 1) / (size_t)b.width);
    for (int i = 0; i < p->ninsns; i++) {
        const px_asm_insn *in = &p->insns[i];
        const pxi_op_info *op = pxi_op((unsigned)in->op);
        int32_t f[PXI_MAX_FIELDS] = {0};
        for (int k = 0; k < op->nfields; k++) {
            const pxi_field_info *fi = &op->fields[k];
            int given = 0;
            for (int j = 0; j < in->nops; j++)
                if (in->ops[j].field == k) {
                    given = 1;
                    if (px__encode_operand(s, p, op, &in->ops[j], rows_base, &f[k]) < 0) {
                        pxvm_build_free(&b);
                        return -1;
                    }
                }
            /* slots, rows, sizes and coordinates must be given; offsets, modes and LODs default to 0 */
            if (!given && (fi->kind == PXK_SLOT || fi->kind == PXK_ROW || fi->kind == PXK_DIM || fi->kind == PXK_Q16)) {
                pxvm_build_free(&b);
                return px_asm_fail_at(s, in->line, in->col, "%s needs operand %s (%s)", op->name, fi->name, fi->doc);
            }
        }
        pxvm_build_insn(&b, in->op, f);
    }
    for (int r = 0; r < p->nrows; r++)
        pxvm_build_row(&b, p->rowpx + (size_t)r * (size_t)b.width * 4u, b.width);
    pxvm_error e;
    if (pxvm_build_finish(&b, out, &e) < 0) {
        pxvm_build_free(&b);
        return px_asm_fail_at(s, 1, 1, "%s", e.msg);
    }
    pxvm_build_free(&b);
    /* an explicit height pads; the .pixels blocks go in last */
    if (p->height) {
        if (p->height < out->h)
            return px_asm_fail_at(s, 1, 1, ".height %d is less than the %d rows the program needs", p->height, out->h);
        pxvm_image tall;
        if (pxvm_image_alloc(&tall, out->w, p->height, &e) < 0)
            return px_asm_fail_at(s, 1, 1, "%s", e.msg);
        memcpy(tall.px, out->px, (size_t)out->w * (size_t)out->h * 4u);
        pxvm_image_free(out);
        *out = tall;
    }
    size_t code_end = code0 + code_pixels, total = (size_t)out->w * (size_t)out->h;
    for (int i = 0; i < p->npixels; i++) {
        const px_asm_pixels *pb = &p->pixels[i];
        size_t at = (size_t)pb->y * (size_t)out->w + (size_t)pb->x;
        if (pb->x >= out->w || at + (size_t)pb->n > total)
            return px_asm_fail_at(s, pb->line, 1, ".pixels %d %d: %d pixels run past the %dx%d image (give .height)", pb->x,
                               pb->y, pb->n, out->w, out->h);
        if (at < code_end)
            return px_asm_fail_at(s, pb->line, 1, ".pixels %d %d overlaps the header and code (stream 0..%zu)", pb->x, pb->y,
                               code_end - 1);
        if (pb->n) /* an empty block has no buffer */
            memcpy(out->px + 4 * at, pb->px, 4u * (size_t)pb->n);
    }
    (void)lim;
    return 0;
}

int pxasm_assemble(const char *text, size_t len, const char *path, const pxvm_limits *lim, pxvm_image *out,
                   pxvm_error *err)
{
    px_asm_src s = {path, text, text + len, text, 1, err};
    px_asm_prog *p = calloc(1, sizeof *p);
    out->px = NULL;
    out->w = out->h = 0;
    if (!p)
        return pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)sizeof *p);
    int rc = px__read(&s, p, lim);
    if (rc == 0 && !p->ninsns)
        rc = px_asm_fail_at(&s, s.line, 1, "no instructions (a program needs at least HALT)");
    if (rc == 0)
        rc = px__layout(&s, p, lim, out);
    if (rc == 0) { /* the result must load like any program; name the source line of a bad instruction */
        pxvm_program prog;
        pxvm_error e;
        if (pxvm_program_from_copy(out, lim, &prog, &e) == 0) {
            pxvm_program_free(&prog);
        } else {
            int line = 1, col = 1;
            unsigned idx;
            if (sscanf(e.msg, "instruction %u", &idx) == 1 && idx < (unsigned)p->ninsns)
                line = p->insns[idx].line, col = p->insns[idx].col;
            char msg[900];
            pxvm_error_format(&e, msg, sizeof msg);
            rc = px_asm_fail_at(&s, line, col, "%s", msg);
        }
    }
    if (rc < 0)
        pxvm_image_free(out); /* never a partial image */
    px__prog_free(p);
    free(p);
    return rc;
}

int pxasm_assemble_file(const char *path, const pxvm_limits *lim, pxvm_image *out, pxvm_error *err)
{
    uint8_t *data;
    size_t len;
    if (pxvm_read_file(path, 1u << 28, &data, &len, err) < 0)
        return -1;
    int rc = pxasm_assemble((const char *)data, len, path, lim, out, err);
    free(data);
    return rc;
}
