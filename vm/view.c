/* view.c - images in caller memory (pxvm_view): checks, the RGBA8 conversion on the way in, and
 * the copies on the way out (rows or patches), shared by every executor on the host side. */
#include <stdlib.h>
#include <string.h>

#include "vm.h"
#include "../isa/px_sem.h"

pxvm_view pxvm_view_host(const void *data, int w, int h, int channels)
{
    pxvm_view v;
    memset(&v, 0, sizeof v);
    v.data = (void *)data;
    v.device = -1;
    v.items = 1;
    v.w = w, v.h = h, v.channels = channels;
    v.px_stride = channels;
    v.ch_stride = 1;
    v.row_stride = (int64_t)w * channels;
    v.item_stride = v.row_stride * h;
    return v;
}

pxvm_view pxvm_image_view(const pxvm_image *img)
{
    return pxvm_view_host(img->px, img->w, img->h, 4);
}

int pxvm_view_is_packed_rgba(const pxvm_view *v)
{
    return v->channels == 4 && v->px_stride == 4 && v->ch_stride == 1 && v->row_stride == (int64_t)v->w * 4;
}

/* Shapes every view must have; the memory behind it is the caller's promise. */
PXVM_HOT static int px__check_view(const pxvm_view *v, const char *what, pxvm_error *err)
{
    if (!v || !v->data)
        return pxvm_fail(err, PXE_VIEW_NULL, -1, -1, what);
    if (v->items < 1 || v->w < 1 || v->h < 1)
        return pxvm_fail(err, PXE_VIEW_EMPTY, -1, -1, what, v->items, v->w, v->h);
    if (v->channels != 1 && v->channels != 3 && v->channels != 4)
        return pxvm_fail(err, PXE_VIEW_CHANNELS, -1, -1, what, v->channels);
    /* the bytes the strides reach from data: no memory spans 2^48 bytes, and within that every
     * address computed from the view is an int64 that does not overflow */
    const int64_t st[4] = {v->item_stride, v->row_stride, v->px_stride, v->ch_stride};
    const int64_t n[4] = {v->items, v->h, v->w, v->channels};
    unsigned __int128 span = 0;
    for (int i = 0; i < 4; i++)
        span += (unsigned __int128)(st[i] < 0 ? -(unsigned __int128)st[i] : (unsigned __int128)st[i]) *
                (unsigned __int128)(n[i] - 1);
    if (span >= (unsigned __int128)1 << 48)
        return pxvm_fail(err, PXE_VIEW_SPAN, -1, -1, what, (long long)v->item_stride, (long long)v->row_stride,
                         (long long)v->px_stride, (long long)v->ch_stride);
    return 0;
}

PXVM_HOT static int px__check_items(int batch, int item0, int items, pxvm_error *err)
{
    if (item0 < 0 || items < 1 || item0 > batch - items)
        return pxvm_fail(err, PXE_ITEM_RANGE, -1, -1, (long long)item0, (long long)item0 + items - 1, batch, batch - 1);
    return 0;
}

PXVM_HOT int pxvm_check_input_view(int batch, int item0, const pxvm_view *v, pxvm_error *err)
{
    return px__check_view(v, "input", err) < 0 || px__check_items(batch, item0, v->items, err) < 0 ? -1 : 0;
}

int pxvm_check_bind(const pxvm_program *prog, int batch, int slot, int item0, const pxvm_view *v, pxvm_error *err)
{
    char lb[16];
    if (slot < 0 || slot >= prog->nslots)
        return pxvm_fail(err, PXE_NO_SLOT, -1, -1, "?");
    const pxvm_slot *s = &prog->slots[slot];
    if (s->role != PXI_ROLE_INPUT)
        return pxvm_fail(err, PXE_BIND_ROLE, -1, -1, slot, pxvm_slot_label(prog, slot, lb), pxi_role_name(s->role));
    if (pxvm_check_input_view(batch, item0, v, err) < 0)
        return -1;
    if (v->w != s->w || v->h != s->h)
        return pxvm_fail(err, PXE_INPUT_SIZE, -1, -1, v->w, v->h, slot, pxvm_slot_label(prog, slot, lb), s->w, s->h);
    return 0;
}

int pxvm_check_read(const pxvm_program *prog, int slot, int level, pxvm_error *err)
{
    char lb[16];
    if (slot < 0 || slot >= prog->nslots)
        return pxvm_fail(err, PXE_NO_SLOT, -1, -1, "?");
    if (level < 0 || level >= prog->slots[slot].levels)
        return pxvm_fail(err, PXE_NO_LEVEL, -1, -1, slot, pxvm_slot_label(prog, slot, lb), prog->slots[slot].levels - 1,
                         level);
    return 0;
}

int pxvm_check_read_view(const pxvm_program *prog, int batch, int slot, int level, int item0, const pxvm_view *dst,
                         int patches, pxvm_error *err)
{
    if (pxvm_check_read(prog, slot, level, err) < 0)
        return -1;
    if (px__check_view(dst, "output", err) < 0 || px__check_items(batch, item0, dst->items, err) < 0)
        return -1;
    const pxvm_slot *s = &prog->slots[slot];
    char lb[16];
    if (dst->channels != 4 || dst->px_stride != 4 || dst->ch_stride != 1)
        return pxvm_fail(err, PXE_OUTPUT_RGBA8, -1, -1, dst->channels, (long long)dst->px_stride,
                         (long long)dst->ch_stride);
    int w = px_mip_dim(s->w, level), h = px_mip_dim(s->h, level);
    if (patches) {
        if (!s->patch_count)
            return pxvm_fail(err, PXE_OUTPUT_NO_ATLAS, -1, -1, slot, pxvm_slot_label(prog, slot, lb));
        w = s->patch_w, h = s->patch_h * s->patch_count;
    }
    if (dst->w != w || dst->h != h)
        return pxvm_fail(err, PXE_OUTPUT_SIZE, -1, -1, slot, pxvm_slot_label(prog, slot, lb),
                         patches ? "as patches (patch_w x patch_h*count)" : "at that level", w, h, dst->w, dst->h);
    return 0;
}

void pxvm_view_to_rgba(const pxvm_view *v, int item, uint8_t *dst)
{
    const uint8_t *base = (const uint8_t *)v->data + (int64_t)item * v->item_stride;
    if (pxvm_view_is_packed_rgba(v)) {
        memcpy(dst, base, (size_t)v->w * (size_t)v->h * 4u);
        return;
    }
    for (int y = 0; y < v->h; y++) {
        const uint8_t *row = base + (int64_t)y * v->row_stride;
        uint8_t *d = dst + (size_t)y * (size_t)v->w * 4u;
        for (int x = 0; x < v->w; x++, d += 4) {
            px_rgba c = px_expand(row + (int64_t)x * v->px_stride, v->channels, v->ch_stride);
            d[0] = (uint8_t)c, d[1] = (uint8_t)(c >> 8), d[2] = (uint8_t)(c >> 16), d[3] = (uint8_t)(c >> 24);
        }
    }
}

void pxvm_copy_out(const pxvm_slot *s, int level_w, int level_h, const uint8_t *src, const pxvm_view *dst, int item,
                   int patches)
{
    uint8_t *base = (uint8_t *)dst->data + (int64_t)item * dst->item_stride;
    if (!patches) {
        for (int y = 0; y < level_h; y++)
            memcpy(base + (int64_t)y * dst->row_stride, src + (size_t)y * (size_t)level_w * 4u, (size_t)level_w * 4u);
        return;
    }
    pxvm_copy_out_patches(s, level_w, src, dst, item, 0, s->patch_count);
}

void pxvm_copy_out_patches(const pxvm_slot *s, int level_w, const uint8_t *src, const pxvm_view *dst, int item, int p0,
                           int p1)
{
    uint8_t *base = (uint8_t *)dst->data + (int64_t)item * dst->item_stride;
    /* patch p is tile (p % cols, p / cols) of the atlas; its rows go to rows p*patch_h .. */
    int cols = s->w / s->patch_w;
    size_t prow = (size_t)s->patch_w * 4u;
    for (int p = p0; p < p1; p++) {
        int tx = (p % cols) * s->patch_w, ty = (p / cols) * s->patch_h;
        const uint8_t *from = src + ((size_t)ty * (size_t)level_w + (size_t)tx) * 4u;
        uint8_t *to = base + (int64_t)p * s->patch_h * dst->row_stride;
        if (prow == 64) /* 16-texel patches, the common case: one inlined copy per row */
            for (int y = 0; y < s->patch_h; y++)
                memcpy(to + (int64_t)y * dst->row_stride, from + (size_t)y * (size_t)level_w * 4u, 64);
        else
            for (int y = 0; y < s->patch_h; y++)
                memcpy(to + (int64_t)y * dst->row_stride, from + (size_t)y * (size_t)level_w * 4u, prow);
    }
}

int pxvm_read_image(const pxvm_executor_ops *ops, pxvm_executor *ex, const pxvm_program *prog, int slot, int level,
                    int item, pxvm_image *img, pxvm_error *err)
{
    img->px = NULL;
    img->w = img->h = 0;
    if (pxvm_check_read(prog, slot, level, err) < 0)
        return -1;
    if (pxvm_image_alloc(img, px_mip_dim(prog->slots[slot].w, level), px_mip_dim(prog->slots[slot].h, level), err) < 0)
        return -1;
    pxvm_view v = pxvm_image_view(img);
    if (ops->read(ex, slot, level, item, &v, 0, err) < 0) {
        pxvm_image_free(img);
        return -1;
    }
    return 0;
}

int pxvm_bind_image(const pxvm_executor_ops *ops, pxvm_executor *ex, int slot, const pxvm_image *img, pxvm_error *err)
{
    pxvm_view v = pxvm_image_view(img);
    return ops->bind(ex, slot, 0, &v, err);
}

/* ---- fixation registers and token geometry -------------------------------------------------- */

size_t pxvm_state_ints(const pxvm_program *prog, int what)
{
    return what == PXVM_STATE_FIXATIONS  ? (size_t)PX_FIX_REGS * 2u
           : what == PXVM_STATE_GEOMETRY ? (size_t)prog->ngeom * PX_GEOM_INTS
                                         : (size_t)prog->ngeom;
}

size_t pxvm_state_elem(int what) { return what == PXVM_STATE_CHANGED ? 1u : 4u; }

int pxvm_check_dirty(const pxvm_program *prog, int batch, int item, const pxvm_rect *rects, int n, pxvm_error *err)
{
    (void)prog;
    if (n < 0 || n > PXVM_MAX_RECTS || (n && !rects))
        return pxvm_fail(err, PXE_DIRTY_RECTS, -1, -1, n, PXVM_MAX_RECTS);
    return px__check_items(batch, item, 1, err);
}

int pxvm_rects_touch_tile(const pxvm_rect *rects, int n, int tx, int ty)
{
    for (int i = 0; i < n; i++)
        if (px_rect_touches_tile(rects[i].x, rects[i].y, rects[i].w, rects[i].h, tx, ty))
            return 1;
    return 0;
}

int pxvm_check_fixations(const pxvm_program *prog, int batch, int item0, int items, int reg0, int nregs, const void *xy,
                         pxvm_error *err)
{
    (void)prog;
    if (!xy)
        return pxvm_fail(err, PXE_STATE_NULL, -1, -1, "fixations");
    if (reg0 < 0 || nregs < 1 || nregs > PX_FIX_REGS - reg0) /* (reg0 + nregs may overflow) */
        return pxvm_fail(err, PXE_STATE_REGISTERS, -1, -1, reg0, (long long)reg0 + nregs - 1, PX_FIX_REGS,
                         PX_FIX_REGS - 1);
    return px__check_items(batch, item0, items, err);
}

int pxvm_check_state(const pxvm_program *prog, int batch, int what, int slot, int item0, int items, const void *dst,
                     pxvm_error *err)
{
    if (what != PXVM_STATE_FIXATIONS && what != PXVM_STATE_GEOMETRY && what != PXVM_STATE_CHANGED)
        return pxvm_fail(err, PXE_STATE_KIND, -1, -1);
    if (!dst)
        return pxvm_fail(err, PXE_STATE_NULL, -1, -1, what == PXVM_STATE_FIXATIONS ? "fixations" : "geometry");
    if (what != PXVM_STATE_FIXATIONS && (slot < 0 || slot >= prog->nslots || prog->geom_base[slot] < 0)) {
        char lb[16];
        return pxvm_fail(err, PXE_GEOMETRY_NO_ATLAS, -1, -1,
                         slot >= 0 && slot < prog->nslots ? pxvm_slot_label(prog, slot, lb) : "?");
    }
    return px__check_items(batch, item0, items, err);
}

void pxvm_geometry_clear(int32_t *g, size_t tokens)
{
    for (size_t t = 0; t < tokens; t++)
        px_geom_write(g + t * PX_GEOM_INTS, 0, 0, 0, 0, -1);
}
