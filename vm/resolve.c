/* resolve.c - any-size inputs: a program written for a reference size, resolved at the size of
 * the image bound (SPEC "Any-size inputs"). The resolution is an ordinary fixed program: the
 * same image with the any-size descriptors holding the bound sizes and the SAMPLE/ANISO operands
 * that read them rescaled by exact integer rules (isa/px_sem.h), then validated as any program.
 * Executors never see a program with an any-size slot. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loader.h"
#include "../isa/px_sem.h"

int pxvm_anysize_check(const pxvm_program *poly, int slot, int w, int h, pxvm_error *err)
{
    const pxvm_slot *s = &poly->slots[slot];
    if (w >= s->min_side && h >= s->min_side && w <= s->max_side && h <= s->max_side &&
        (!s->max_pixels || (uint64_t)w * (uint64_t)h <= s->max_pixels))
        return 0;
    char lb[16];
    if (s->max_pixels)
        return pxvm_fail(err, PXE_INPUT_BOUNDS_PIXELS, -1, -1, w, h, (unsigned)slot, pxvm_slot_label(poly, slot, lb),
                         s->min_side, s->min_side, s->max_side, s->max_side, (unsigned long long)s->max_pixels);
    return pxvm_fail(err, PXE_INPUT_BOUNDS, -1, -1, w, h, (unsigned)slot, pxvm_slot_label(poly, slot, lb), s->min_side,
                     s->min_side, s->max_side, s->max_side);
}

/* The size slot k resolves to: wh's, or its own (0, 0); -1 when wh asks another size of a fixed
 * slot. */
static int px__target(const pxvm_program *poly, const int *wh, int k, int *w, int *h, pxvm_error *err)
{
    const pxvm_slot *s = &poly->slots[k];
    int tw = wh ? wh[2 * k] : 0, th = wh ? wh[2 * k + 1] : 0;
    if (tw == 0 && th == 0)
        tw = s->w, th = s->h;
    *w = tw, *h = th;
    if (s->flags & PXI_SLOT_ANYSIZE)
        return pxvm_anysize_check(poly, k, tw, th, err);
    if (tw == s->w && th == s->h)
        return 0;
    char lb[16];
    return pxvm_fail(err, PXE_RESOLVE_FIXED, -1, -1, k, pxvm_slot_label(poly, k, lb), s->w, s->h, tw, th);
}

/* Writes operand f of instruction `in` (op: its opcode's table row) into the program image and,
 * when `to` is given, into to->a[f] as the loader decodes it from those pixels. */
static inline void px__put(pxvm_image *img, const pxi_op_info *op, const pxi_insn *in, int f, int32_t v, pxi_insn *to)
{
    const pxi_field_info *fi = &op->fields[f];
    uint8_t *px = img->px + 4u * (size_t)in->pc;
    pxi_write_le(px, fi->pixel, fi->channel, fi->bytes, (uint32_t)v);
    if (to) {
        uint32_t raw = pxi_read_le(px, fi->pixel, fi->channel, fi->bytes);
        to->a[f] = fi->kind == PXK_Q16 ? px_entry_q16(raw) : (int32_t)raw;
    }
}

/* px_scale_q16(q, n, n0) for every q of one side: when `fast` (the derived resolution), the same
 * floor division with its quotient first estimated through a double reciprocal and then
 * corrected in integers, so exact whatever the estimate (|2qn + n0| < 2^49: the double holds it
 * exactly and the estimate is off by at most one); an int64 division was most of a
 * resolution's time. The parsed resolution keeps px_scale_q16 itself, so the tests that hold
 * the two resolutions equal check this against SPEC's rule. */
typedef struct px__scaler {
    int64_t n, d; /* d = 2 * n0 */
    double inv;   /* 1 / d */
    int fast;
} px__scaler;

static px__scaler px__scaler_make(int n, int n0, int fast)
{
    px__scaler s = {n, 2 * (int64_t)n0, 1.0 / (2.0 * (double)n0), fast};
    return s;
}

static inline int64_t px__scaled(const px__scaler *s, int32_t q)
{
    if (!s->fast)
        return px_scale_q16(q, (int)s->n, (int)(s->d / 2));
    int64_t a = 2 * (int64_t)q * s->n + s->d / 2;
    int64_t quo = (int64_t)((double)a * s->inv), rem = a - quo * s->d;
    while (rem < 0)
        quo--, rem += s->d;
    while (rem >= s->d)
        quo++, rem -= s->d;
    return quo;
}

/* The fields a resolution rewrites: the Q16 positions and steps, u then v (SAMPLE has the first
 * 4: SAMPLE and ANISO share the layout of src .. dv, loader.h; ANISO adds tdu, tdv), and the LOD. */
static const int px__q16_fields[6] = {PX_FI(SAMPLE, cu), PX_FI(SAMPLE, cv), PX_FI(SAMPLE, du),
                                      PX_FI(SAMPLE, dv), PX_FI(ANISO, tdu), PX_FI(ANISO, tdv)};
static const int px__q16_count[2] = {4, 6}; /* SAMPLE, ANISO */

static int px__lod_field(int aniso) { return aniso ? PX_FI(ANISO, lod) : PX_FI(SAMPLE, lod); }

/* Is field f of SAMPLE (aniso 0) or ANISO (1) one that a resolution rewrites? */
static int px__rescaled_field(int aniso, int f)
{
    for (int j = 0; j < px__q16_count[aniso]; j++)
        if (f == px__q16_fields[j])
            return 1;
    return f == px__lod_field(aniso);
}

/* A Q16 operand rescaled to v that leaves int32 (U-BIND-5); out of the hot loop. */
static __attribute__((cold, noinline)) int px__scale_fail(const pxvm_program *poly, const pxi_op_info *op,
                                                          const pxi_insn *in, uint32_t index, int f, int64_t v,
                                                          int slot, int w, int h, pxvm_error *err)
{
    char lb[16];
    int x, y;
    pxvm_stream_xy(poly, in->pc + op->fields[f].pixel, &x, &y);
    return pxvm_fail(err, PXE_RESOLVE_RANGE, x, y, w, h, (unsigned)slot, pxvm_slot_label(poly, slot, lb), index,
                     op->name, op->fields[f].name, (long)in->a[f], (long long)v);
}

/* The resolved image into *out and, when insns is given (room for poly's), poly's instructions
 * into it with the rescaled operands as the loader would decode them; any[k] set for each
 * any-size slot. */
static int px__resolve(const pxvm_program *poly, const int *wh, pxvm_image *out, pxi_insn *insns, uint8_t *any,
                       pxvm_error *err)
{
    int size[2 * (PXVM_MAX_SLOTS + 1)];
    memset(out, 0, sizeof *out);
    if (wh && (wh[0] || wh[1]))
        return pxvm_fail(err, PXE_RESOLVE_SLOT0, -1, -1);
    for (int k = 1; k < poly->nslots; k++)
        if (px__target(poly, wh, k, &size[2 * k], &size[2 * k + 1], err) < 0)
            return -1;
    size_t bytes = (size_t)poly->image.w * (size_t)poly->image.h * 4u;
    if (!(out->px = malloc(bytes ? bytes : 1))) /* not zeroed: every byte is copied next */
        return pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)bytes);
    out->w = poly->image.w, out->h = poly->image.h;
    memcpy(out->px, poly->image.px, bytes);
    if (!poly->any_size)
        return 0;
    out->px[5] = 0; /* format 1.0: the resolution has no any-size slot left */
    int shift[PXVM_MAX_SLOTS + 1]; /* each any-size slot's LOD shift, once (px_log2_q8 searches a table) */
    px__scaler su[PXVM_MAX_SLOTS + 1], sv[PXVM_MAX_SLOTS + 1];
    for (int k = 1; k < poly->nslots; k++) {
        const pxvm_slot *s = &poly->slots[k];
        if (!(s->flags & PXI_SLOT_ANYSIZE))
            continue;
        any[k] = 1;
        shift[k] = px_lod_shift(size[2 * k], size[2 * k + 1], s->w, s->h);
        su[k] = px__scaler_make(size[2 * k], s->w, insns != NULL);
        sv[k] = px__scaler_make(size[2 * k + 1], s->h, insns != NULL);
        uint8_t *desc = out->px + 4u * (size_t)s->desc_pixel;
        desc[1] = (uint8_t)(s->flags & ~PXI_SLOT_ANYSIZE);
        pxi_write_le(desc, 1, 0, 4, (uint32_t)size[2 * k]);
        pxi_write_le(desc, 2, 0, 4, (uint32_t)size[2 * k + 1]);
        pxi_write_le(desc, 3, 0, 4, 0);
        pxi_write_le(desc, 4, 0, 4, 0);
    }
    /* per SAMPLE (0) and ANISO (1), hoisted out of the loop: the Q16 fields rescaled (SAMPLE and
     * ANISO share the layout of src .. dv, loader.h; ANISO adds tdu, tdv), each one's axis and
     * byte offset in its instruction's pixels, and whether all are 4 bytes whole (then what the
     * loader decodes is the value itself, written directly) */
    const pxi_op_info *ops[2] = {pxi_op(PX_OP_SAMPLE), pxi_op(PX_OP_ANISO)};
    const int *nq = px__q16_count, *fq = px__q16_fields; /* field j's axis: j & 1 (u, v) */
    int whole[2];
    uint32_t at[2][6];
    for (int a = 0; a < 2; a++) {
        whole[a] = insns != NULL;
        for (int j = 0; j < nq[a]; j++) {
            const pxi_field_info *fi = &ops[a]->fields[fq[j]];
            at[a][j] = 4u * fi->pixel + fi->channel;
            whole[a] &= fi->kind == PXK_Q16 && fi->bytes == 4;
        }
    }
    for (uint32_t i = 0; i < poly->ninsns; i++) {
        const pxi_insn *in = &poly->insns[i];
        if (insns) /* copied here, in the one pass over them */
            insns[i] = *in;
        if (in->op != PX_OP_SAMPLE && in->op != PX_OP_ANISO)
            continue;
        int src = in->a[PX_FI(SAMPLE, src)];
        if (!(poly->slots[src].flags & PXI_SLOT_ANYSIZE))
            continue;
        int a = in->op == PX_OP_ANISO;
        pxi_insn *to = insns ? &insns[i] : NULL;
        uint8_t *px = out->px + 4u * (size_t)in->pc;
        const px__scaler *sc[2] = {&su[src], &sv[src]};
        for (int j = 0; j < nq[a]; j++) {
            int f = fq[j];
            int64_t v = px__scaled(sc[j & 1], in->a[f]);
            if (v < INT32_MIN || v > INT32_MAX) {
                px__scale_fail(poly, ops[a], in, i, f, v, src, size[2 * src], size[2 * src + 1], err);
                goto fail;
            }
            if (whole[a]) {
                uint32_t u = (uint32_t)(int32_t)v;
                uint8_t *p = px + at[a][j];
                p[0] = (uint8_t)u, p[1] = (uint8_t)(u >> 8), p[2] = (uint8_t)(u >> 16), p[3] = (uint8_t)(u >> 24);
                to->a[f] = (int32_t)v;
            } else
                px__put(out, ops[a], in, f, (int32_t)v, to);
        }
        int lod_f = px__lod_field(a);
        int lod = in->a[lod_f] + shift[src];
        px__put(out, ops[a], in, lod_f, lod < 0 ? 0 : lod > 65535 ? 65535 : lod, to);
    }
    return 0;
fail:
    pxvm_image_free(out);
    return -1;
}

int pxvm_program_resolve_image(const pxvm_program *poly, const int *wh, const pxvm_limits *lim, pxvm_image *out,
                               pxvm_error *err)
{
    (void)lim;
    uint8_t any[PXVM_MAX_SLOTS + 1] = {0};
    return px__resolve(poly, wh, out, NULL, any, err);
}

/* A resolution that breaks a load rule (U-BIND-6), named by the first any-size slot's size. */
static int px__invalid(const pxvm_program *poly, const int *wh, const pxvm_error *why, pxvm_error *err)
{
    int k = 1;
    while (k < poly->nslots && !(poly->slots[k].flags & PXI_SLOT_ANYSIZE))
        k++;
    if (k == poly->nslots)
        return *err = *why, -1;
    int w = wh && (wh[2 * k] || wh[2 * k + 1]) ? wh[2 * k] : poly->slots[k].w;
    int h = wh && (wh[2 * k] || wh[2 * k + 1]) ? wh[2 * k + 1] : poly->slots[k].h;
    char lb[16], text[700];
    pxvm_error_format(why, text, sizeof text);
    return pxvm_fail(err, PXE_RESOLVE_INVALID, why->x, why->y, w, h, (unsigned)k, pxvm_slot_label(poly, k, lb), text);
}

int pxvm_program_resolve_parsed(const pxvm_program *poly, const int *wh, const pxvm_limits *lim, pxvm_program *out,
                                pxvm_error *err)
{
    pxvm_image img;
    memset(out, 0, sizeof *out);
    if (pxvm_program_resolve_image(poly, wh, lim, &img, err) < 0)
        return -1;
    pxvm_error why;
    if (pxvm_program_from_image(&img, lim, out, &why) == 0) {
        out->resolved_from = poly->serial;
        return 0;
    }
    return px__invalid(poly, wh, &why, err);
}

/* A copy of n elements of size `size` (NULL for NULL); -1 when out of memory. */
static int px__dup(void **dst, const void *src, size_t n, size_t size)
{
    *dst = NULL;
    if (!src)
        return 0;
    if (!(*dst = malloc(n * size > 0 ? n * size : 1)))
        return -1;
    memcpy(*dst, src, n * size);
    return 0;
}

/* Does instruction `in` name slot k in an operand that is a slot or a mask? */
static int px__names_slot(const pxi_insn *in, const uint8_t *any)
{
    const pxi_op_info *op = pxi_op(in->op);
    for (int f = 0; f < op->nfields; f++)
        if ((op->fields[f].kind == PXK_SLOT || op->fields[f].kind == PXK_MASK) && in->a[f] > 0 &&
            in->a[f] < PXVM_MAX_SLOTS + 1 && any[in->a[f]])
            return 1;
    return 0;
}

/* The resolution derived from the parsed any-size program rather than parsed again: what differs
 * between a program and its resolution is known (the any-size descriptors, the operands of the
 * SAMPLE/ANISO that read those slots, the format minor), and so is every load rule that can
 * read it: a descriptor's own rules, the memory limit, the changed operands' kind rules, and the
 * instruction rules of every instruction that names a resized slot, and the boxes of incremental
 * GATHERs (their tables are pixels of the image). The rest of the program (other
 * instructions, the launch plan, resets, token geometry, the other video facts: none of them
 * depends on an any-size slot's size or those operands, SPEC V-ANY-6) is copied. The
 * result, and the first error, equal pxvm_program_resolve_parsed's (tested field for field). */
static int px__derive(const pxvm_program *poly, const int *wh, const pxvm_limits *lim, pxvm_program *out,
                      pxvm_error *err, pxvm_error *why)
{
    *out = *poly;
    memset(&out->image, 0, sizeof out->image);
    out->slots = NULL, out->insns = NULL, out->steps = NULL, out->reset = NULL, out->rebuild_upper = NULL;
    out->geom_base = NULL;
    out->insn_token = NULL, out->insn_box = NULL, out->frame_only = NULL;
    out->serial = 0;
    if (px__dup((void **)&out->slots, poly->slots, (size_t)poly->nslots, sizeof(pxvm_slot)) < 0 ||
        !(out->insns = malloc(poly->ninsns ? poly->ninsns * sizeof(pxi_insn) : 1)) || /* px__resolve copies them */
        px__dup((void **)&out->steps, poly->steps, poly->nsteps, sizeof(pxvm_step)) < 0 ||
        px__dup((void **)&out->reset, poly->reset, (size_t)poly->nslots, 1) < 0 ||
        px__dup((void **)&out->rebuild_upper, poly->rebuild_upper, (size_t)poly->nslots, sizeof(uint32_t)) < 0 ||
        px__dup((void **)&out->geom_base, poly->geom_base, (size_t)poly->nslots, sizeof(int)) < 0 ||
        px__dup((void **)&out->insn_token, poly->insn_token, poly->ninsns, sizeof(int32_t)) < 0 ||
        px__dup((void **)&out->insn_box, poly->insn_box, poly->ninsns, sizeof(pxvm_fetch_box)) < 0 ||
        px__dup((void **)&out->frame_only, poly->frame_only, (size_t)poly->nslots, 1) < 0) {
        pxvm_program_free(out);
        return pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)poly->ninsns * sizeof(pxi_insn));
    }
    uint8_t any[PXVM_MAX_SLOTS + 1] = {0};
    if (px__resolve(poly, wh, &out->image, out->insns, any, err) < 0) { /* bounds, U-BIND-5: the caller's errors */
        pxvm_program_free(out);
        return -1;
    }
    /* from here on a failure is a load rule the resolution breaks (U-BIND-6): *why. The header's
     * limits and every descriptor again, in the parser's order (lim may be tighter than the one
     * poly was loaded with) */
    out->format_minor = out->image.px[5];
    out->any_size = 0;
    if (px_vm_check_header_limits(&out->image, out->ninsns, lim, why) < 0)
        goto invalid;
    out->memory = 0;
    for (int k = 0; k < poly->nslots; k++) {
        if (k) {
            memset(&out->slots[k], 0, sizeof out->slots[k]);
            if (px_vm_parse_slot(&out->image, k, lim, out, why) < 0)
                goto invalid;
            px_vm_slot_geometry(&out->slots[k]);
        }
        out->memory += out->slots[k].bytes;
    }
    if (out->memory > lim->max_memory) {
        pxvm_fail(why, PXE_SLOT_MEMORY, -1, -1, (unsigned long long)out->memory, (unsigned long long)lim->max_memory);
        goto invalid;
    }
    if (px_vm_check_insn_memory(out, lim, why) < 0) /* RESIZE's sizes follow its source's */
        goto invalid;
    /* the kind rules of the operands that changed, in the loader's order (one whose value is
     * unchanged passed its rule when poly loaded: a kind rule reads only the value, the image's
     * height and the slot count, which a resolution keeps; positions and LODs have none) */
    /* per SAMPLE, ANISO: the fields a resolution rewrites whose kind has a rule (none in today's
     * table: positions, steps and LODs have none; kept so that a new kind's rule is not skipped) */
    int ruled[2][PXI_MAX_FIELDS], nruled[2] = {0, 0};
    for (int a = 0; a < 2; a++) {
        const pxi_op_info *op = pxi_op(a ? PX_OP_ANISO : PX_OP_SAMPLE);
        for (int f = 0; f < op->nfields; f++)
            if (px__rescaled_field(a, f) && px_vm_kind_has_rule(op->fields[f].kind))
                ruled[a][nruled[a]++] = f;
    }
    for (uint32_t i = 0; (nruled[0] || nruled[1]) && i < out->ninsns; i++) {
        const pxi_insn *in = &out->insns[i], *was = &poly->insns[i];
        if ((in->op != PX_OP_SAMPLE && in->op != PX_OP_ANISO) || !any[in->a[PX_FI(SAMPLE, src)]])
            continue;
        int a = in->op == PX_OP_ANISO;
        const pxi_op_info *op = pxi_op(in->op);
        for (int j = 0; j < nruled[a]; j++) {
            int f = ruled[a][j];
            if (in->a[f] != was->a[f] && px_vm_check_field(out, in, i, &op->fields[f], in->a[f], why) < 0)
                goto invalid;
        }
    }
    for (uint32_t i = 0; i < out->ninsns; i++)
        if (px_vm_insn_rules_read_size(&out->insns[i], any) && px__names_slot(&out->insns[i], any) &&
            px_vm_check_insn(out, &out->insns[i], i, why) < 0)
            goto invalid;
    /* an incremental GATHER's box comes from its table's entries in the program image, which a
     * data rectangle may lay over pixels the resolution rewrote: made again (its `sole` stays) */
    for (uint32_t i = 0; out->insn_box && i < out->ninsns; i++) {
        const pxi_insn *in = &out->insns[i];
        if (in->op != PX_OP_GATHER || !pxvm_fetch_mask(in))
            continue;
        int sole = out->insn_box[i].sole;
        if (px_vm_fetch_box(out, in, i, why) < 0)
            goto invalid;
        out->insn_box[i].sole = sole;
    }
    out->serial = px_vm_new_serial();
    out->resolved_from = poly->serial;
    return 0;
invalid:
    pxvm_program_free(out);
    return 1;
}

int pxvm_program_resolve(const pxvm_program *poly, const int *wh, const pxvm_limits *lim, pxvm_program *out,
                         pxvm_error *err)
{
    if (!poly->any_size || !poly->insns) /* a copy of itself: parsed as loaded */
        return pxvm_program_resolve_parsed(poly, wh, lim, out, err);
    pxvm_error why;
    int rc = px__derive(poly, wh, lim, out, err, &why);
    if (rc <= 0)
        return rc;
    memset(out, 0, sizeof *out);
    return px__invalid(poly, wh, &why, err);
}

int pxvm_program_diff(const pxvm_program *a, const pxvm_program *b, char *what, size_t len)
{
#define PX__SAME(cond, name)                         \
    do {                                             \
        if (!(cond)) {                               \
            snprintf(what, len, "%s", name);         \
            return 1;                                \
        }                                            \
    } while (0)
#define PX__SAME_ARRAY(field, n)                                                                           \
    PX__SAME((!a->field && !b->field) || (a->field && b->field && !memcmp(a->field, b->field, (n) * sizeof *a->field)), \
             #field)
    PX__SAME(a->image.w == b->image.w && a->image.h == b->image.h, "image size");
    PX__SAME(!memcmp(a->image.px, b->image.px, (size_t)a->image.w * (size_t)a->image.h * 4u), "image pixels");
    PX__SAME(a->nslots == b->nslots && a->code_start == b->code_start && a->code_end == b->code_end &&
                 a->ninsns == b->ninsns && a->nsteps == b->nsteps && a->memory == b->memory && a->ngeom == b->ngeom &&
                 a->uses_video == b->uses_video && a->uses_fixation == b->uses_fixation &&
                 a->writes_fixation == b->writes_fixation && a->format_minor == b->format_minor &&
                 a->any_size == b->any_size && a->resolved_from == b->resolved_from,
             "counts and flags");
    for (int k = 0; k < a->nslots; k++) {
        const pxvm_slot *x = &a->slots[k], *y = &b->slots[k];
        PX__SAME(x->role == y->role && x->flags == y->flags && !strcmp(x->name, y->name) && x->w == y->w &&
                     x->h == y->h && x->levels == y->levels && x->data_x == y->data_x && x->data_y == y->data_y &&
                     x->patch_w == y->patch_w && x->patch_h == y->patch_h && x->patch_count == y->patch_count &&
                     !memcmp(x->level_offset, y->level_offset, sizeof x->level_offset) && x->bytes == y->bytes &&
                     x->desc_pixel == y->desc_pixel && x->min_side == y->min_side && x->max_side == y->max_side &&
                     x->max_pixels == y->max_pixels,
                 "slots");
    }
    for (uint32_t i = 0; i < a->ninsns; i++) {
        const pxi_insn *x = &a->insns[i], *y = &b->insns[i];
        PX__SAME(x->op == y->op && x->npix == y->npix && x->nfields == y->nfields && x->pc == y->pc &&
                     !memcmp(x->a, y->a, sizeof(int32_t) * x->nfields),
                 "instructions");
    }
    PX__SAME_ARRAY(steps, a->nsteps);
    PX__SAME_ARRAY(reset, (size_t)a->nslots);
    PX__SAME_ARRAY(rebuild_upper, (size_t)a->nslots);
    PX__SAME_ARRAY(geom_base, (size_t)a->nslots);
    PX__SAME_ARRAY(insn_token, a->ninsns);
    PX__SAME_ARRAY(frame_only, (size_t)a->nslots);
    PX__SAME((!a->insn_box && !b->insn_box) || (a->insn_box && b->insn_box), "insn_box");
    for (uint32_t i = 0; a->insn_box && i < a->ninsns; i++) {
        const pxvm_fetch_box *x = &a->insn_box[i], *y = &b->insn_box[i];
        PX__SAME(x->u_lo == y->u_lo && x->u_hi == y->u_hi && x->v_lo == y->v_lo && x->v_hi == y->v_hi &&
                     x->lmin == y->lmin && x->lmax == y->lmax && x->sole == y->sole,
                 "insn_box");
    }
    return 0;
#undef PX__SAME_ARRAY
#undef PX__SAME
}
