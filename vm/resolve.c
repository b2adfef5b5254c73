/* resolve.c - any-size inputs: a program written for a reference size, resolved at the size of
 * the image bound (SPEC "Any-size inputs"). The resolution is an ordinary fixed program: the
 * same image with the any-size descriptors holding the bound sizes and the SAMPLE/ANISO operands
 * that read them rescaled by exact integer rules (isa/px_sem.h), then validated as any program.
 * Executors never see a program with an any-size slot. */
#include <stdio.h>
#include <string.h>

#include "loader.h"
#include "../isa/px_sem.h"

int pxvm_anysize_check(const pxvm_program *poly, int slot, int w, int h, pxvm_error *err)
{
    const pxvm_slot *s = &poly->slots[slot];
    if (w >= s->min_side && h >= s->min_side && w <= s->max_side && h <= s->max_side &&
        (!s->max_pixels || (uint64_t)w * (uint64_t)h <= s->max_pixels))
        return 0;
    char lb[16], most[48] = "";
    if (s->max_pixels)
        snprintf(most, sizeof most, ", at most %llu pixels", (unsigned long long)s->max_pixels);
    return pxvm_fail(err, PXE_INPUT_BOUNDS, -1, -1, w, h, (unsigned)slot, pxvm_slot_label(poly, slot, lb), s->min_side,
                     s->min_side, s->max_side, s->max_side, most);
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
    char msg[200], lb[16];
    snprintf(msg, sizeof msg, "slot %d ('%s') is %dx%d and not any-size: it cannot be resolved at %dx%d", k,
             pxvm_slot_label(poly, k, lb), s->w, s->h, tw, th);
    return pxvm_fail(err, PXE_USAGE, -1, -1, msg);
}

/* Writes operand f of instruction `in` into the program image. */
static void px__put(pxvm_image *img, const pxi_insn *in, int f, int32_t v)
{
    const pxi_field_info *fi = &pxi_op(in->op)->fields[f];
    pxi_write_le(img->px + 4u * (size_t)in->pc, fi->pixel, fi->channel, fi->bytes, (uint32_t)v);
}

/* A Q16 operand rescaled from n0 to n (U-BIND-5 when it leaves int32). */
static int px__scale(const pxvm_program *poly, pxvm_image *img, const pxi_insn *in, uint32_t index, int f, int n, int n0,
                     int slot, int w, int h, pxvm_error *err)
{
    int64_t v = px_scale_q16(in->a[f], n, n0);
    if (v >= INT32_MIN && v <= INT32_MAX) {
        px__put(img, in, f, (int32_t)v);
        return 0;
    }
    const pxi_op_info *op = pxi_op(in->op);
    char lb[16];
    int x, y;
    pxvm_stream_xy(poly, in->pc + op->fields[f].pixel, &x, &y);
    return pxvm_fail(err, PXE_RESOLVE_RANGE, x, y, w, h, (unsigned)slot, pxvm_slot_label(poly, slot, lb), index,
                     op->name, op->fields[f].name, (long)in->a[f], (long long)v);
}

int pxvm_program_resolve_image(const pxvm_program *poly, const int *wh, const pxvm_limits *lim, pxvm_image *out,
                               pxvm_error *err)
{
    (void)lim;
    int size[2 * (PXVM_MAX_SLOTS + 1)];
    memset(out, 0, sizeof *out);
    if (wh && (wh[0] || wh[1]))
        return pxvm_fail(err, PXE_USAGE, -1, -1, "slot 0 (the program image) has no size to resolve: give 0,0");
    for (int k = 1; k < poly->nslots; k++)
        if (px__target(poly, wh, k, &size[2 * k], &size[2 * k + 1], err) < 0)
            return -1;
    if (pxvm_image_alloc(out, poly->image.w, poly->image.h, err) < 0)
        return -1;
    memcpy(out->px, poly->image.px, (size_t)poly->image.w * (size_t)poly->image.h * 4u);
    if (!poly->any_size)
        return 0;
    out->px[5] = 0; /* format 1.0: the resolution has no any-size slot left */
    for (int k = 1; k < poly->nslots; k++) {
        const pxvm_slot *s = &poly->slots[k];
        if (!(s->flags & PXI_SLOT_ANYSIZE))
            continue;
        uint8_t *desc = out->px + 4u * (size_t)s->desc_pixel;
        desc[1] = (uint8_t)(s->flags & ~PXI_SLOT_ANYSIZE);
        pxi_write_le(desc, 1, 0, 4, (uint32_t)size[2 * k]);
        pxi_write_le(desc, 2, 0, 4, (uint32_t)size[2 * k + 1]);
        pxi_write_le(desc, 3, 0, 4, 0);
        pxi_write_le(desc, 4, 0, 4, 0);
    }
    for (uint32_t i = 0; i < poly->ninsns; i++) {
        const pxi_insn *in = &poly->insns[i];
        if (in->op != PX_OP_SAMPLE && in->op != PX_OP_ANISO)
            continue;
        int src = in->a[PX_FI(SAMPLE, src)];
        const pxvm_slot *s = &poly->slots[src];
        if (!(s->flags & PXI_SLOT_ANYSIZE))
            continue;
        int w = size[2 * src], h = size[2 * src + 1];
        /* SAMPLE and ANISO share the layout of src .. dv (loader.h); ANISO adds tdu, tdv */
        int fu[3] = {PX_FI(SAMPLE, cu), PX_FI(SAMPLE, du), in->op == PX_OP_ANISO ? PX_FI(ANISO, tdu) : -1};
        int fv[3] = {PX_FI(SAMPLE, cv), PX_FI(SAMPLE, dv), in->op == PX_OP_ANISO ? PX_FI(ANISO, tdv) : -1};
        for (int j = 0; j < 3; j++)
            if (fu[j] >= 0 && (px__scale(poly, out, in, i, fu[j], w, s->w, src, w, h, err) < 0 ||
                               px__scale(poly, out, in, i, fv[j], h, s->h, src, w, h, err) < 0))
                goto fail;
        int lod_f = in->op == PX_OP_SAMPLE ? PX_FI(SAMPLE, lod) : PX_FI(ANISO, lod);
        int lod = in->a[lod_f] + px_lod_shift(w, h, s->w, s->h);
        px__put(out, in, lod_f, lod < 0 ? 0 : lod > 65535 ? 65535 : lod);
    }
    return 0;
fail:
    pxvm_image_free(out);
    return -1;
}

int pxvm_program_resolve(const pxvm_program *poly, const int *wh, const pxvm_limits *lim, pxvm_program *out,
                         pxvm_error *err)
{
    pxvm_image img;
    memset(out, 0, sizeof *out);
    if (pxvm_program_resolve_image(poly, wh, lim, &img, err) < 0)
        return -1;
    pxvm_error why;
    if (pxvm_program_from_image(&img, lim, out, &why) == 0)
        return 0;
    /* name the size: the first any-size slot */
    int k = 1;
    while (k < poly->nslots && !(poly->slots[k].flags & PXI_SLOT_ANYSIZE))
        k++;
    if (k == poly->nslots)
        return *err = why, -1;
    int w = wh && (wh[2 * k] || wh[2 * k + 1]) ? wh[2 * k] : poly->slots[k].w;
    int h = wh && (wh[2 * k] || wh[2 * k + 1]) ? wh[2 * k + 1] : poly->slots[k].h;
    char lb[16], text[700];
    pxvm_error_format(&why, text, sizeof text);
    return pxvm_fail(err, PXE_RESOLVE_INVALID, why.x, why.y, w, h, (unsigned)k, pxvm_slot_label(poly, k, lb), text);
}
