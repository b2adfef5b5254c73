/* pxi_build.c - the writing side of the encoding in isa/pxisa.h. */
#include "pxi_build.h"

#include <stdlib.h>
#include <string.h>

/* Keeps the builder's first mistake (an error of errors.def without arguments) for pxvm_build_finish. */
static int px__bfail(pxvm_builder *b, pxvm_code why)
{
    if (!b->failed)
        b->why = why;
    b->failed = 1;
    return -1;
}

void pxvm_build_init(pxvm_builder *b, int width)
{
    memset(b, 0, sizeof *b);
    b->width = width;
    b->rows_base = -1;
}

void pxvm_build_free(pxvm_builder *b)
{
    for (int k = 1; k <= b->nslots; k++)
        pxvm_image_free(&b->slots[k].data);
    free(b->code);
    free(b->insn_pc);
    free(b->rows);
    memset(b, 0, sizeof *b);
}

int pxvm_build_slot(pxvm_builder *b, int role, const char *name, int w, int h)
{
    if (b->nslots >= PXVM_MAX_SLOTS || b->ninsns || b->nrows)
        return px__bfail(b, PXE_BUILD_SLOTS);
    pxvm_builder_slot *s = &b->slots[++b->nslots];
    memset(s, 0, sizeof *s);
    s->role = (uint8_t)role;
    snprintf(s->name, sizeof s->name, "%s", name ? name : "");
    s->w = w;
    s->h = h;
    return b->nslots;
}

void pxvm_build_patches(pxvm_builder *b, int slot, int patch_w, int patch_h, int count)
{
    if (slot < 1 || slot > b->nslots) {
        px__bfail(b, PXE_BUILD_NO_SLOT);
        return;
    }
    b->slots[slot].patch_w = patch_w;
    b->slots[slot].patch_h = patch_h;
    b->slots[slot].patch_count = count;
}

int pxvm_build_data_slot(pxvm_builder *b, const char *name, const pxvm_image *img)
{
    if (img->w > b->width)
        return px__bfail(b, PXE_BUILD_DATA_WIDE);
    int k = pxvm_build_slot(b, PXI_ROLE_DATA, name, img->w, img->h);
    if (k < 0)
        return -1;
    pxvm_image *d = &b->slots[k].data;
    if (pxvm_image_alloc(d, img->w, img->h, NULL) < 0)
        return px__bfail(b, PXE_BUILD_NOMEM);
    memcpy(d->px, img->px, (size_t)img->w * (size_t)img->h * 4u);
    return k;
}

int pxvm_build_data_at(pxvm_builder *b, const char *name, int w, int h, int x, int y)
{
    int k = pxvm_build_slot(b, PXI_ROLE_DATA, name, w, h);
    if (k > 0) {
        b->slots[k].data_fixed = 1;
        b->slots[k].data_x = x;
        b->slots[k].data_y = y;
    }
    return k;
}

uint32_t pxvm_build_insn(pxvm_builder *b, int op, const int32_t *fields)
{
    const pxi_op_info *info = pxi_op((unsigned)op);
    if (!info->name || b->nrows) {
        px__bfail(b, info->name ? PXE_BUILD_ORDER : PXE_BUILD_OPCODE);
        return 0;
    }
    if (b->code_pixels + info->pixels > b->code_cap) {
        size_t cap = b->code_cap ? 2 * b->code_cap : 256;
        while (cap < b->code_pixels + info->pixels)
            cap *= 2;
        uint8_t *c = realloc(b->code, cap * 4);
        uint32_t *p = realloc(b->insn_pc, cap * sizeof(uint32_t));
        if (c)
            b->code = c;
        if (p)
            b->insn_pc = p;
        if (!c || !p) {
            px__bfail(b, PXE_BUILD_NOMEM);
            return 0;
        }
        b->code_cap = cap;
    }
    uint8_t *px = b->code + 4 * b->code_pixels;
    memset(px, 0, 4u * info->pixels);
    px[0] = (uint8_t)op;
    for (int f = 0; f < info->nfields; f++) {
        const pxi_field_info *fi = &info->fields[f];
        pxi_write_le(px, fi->pixel, fi->channel, fi->bytes, (uint32_t)(fields ? fields[f] : 0));
    }
    b->insn_pc[b->ninsns] = (uint32_t)b->code_pixels;
    b->code_pixels += info->pixels;
    return b->ninsns++;
}

void pxvm_build_patch(pxvm_builder *b, uint32_t insn, int field, int32_t value)
{
    if (insn >= b->ninsns) {
        px__bfail(b, PXE_BUILD_NO_INSN);
        return;
    }
    uint8_t *px = b->code + 4 * b->insn_pc[insn];
    const pxi_field_info *fi = &pxi_op(px[0])->fields[field];
    pxi_write_le(px, fi->pixel, fi->channel, fi->bytes, (uint32_t)value);
}

static size_t px__header_pixels(const pxvm_builder *b)
{
    return PXI_HEADER_PIXELS + (size_t)PXI_SLOT_PIXELS * (size_t)b->nslots;
}

static size_t px__code_start(const pxvm_builder *b)
{
    return b->code_start > 0 ? (size_t)b->code_start : px__header_pixels(b);
}

int pxvm_build_row(pxvm_builder *b, const uint8_t *rgba, int n)
{
    if (b->rows_base < 0) {
        size_t end = px__code_start(b) + b->code_pixels;
        b->rows_base = (int)((end + (size_t)b->width - 1) / (size_t)b->width);
    }
    size_t rb = (size_t)b->width * 4u;
    uint8_t *r = realloc(b->rows, rb * (size_t)(b->nrows + 1));
    if (!r)
        return px__bfail(b, PXE_BUILD_NOMEM);
    b->rows = r;
    memset(r + rb * (size_t)b->nrows, 0, rb);
    memcpy(r + rb * (size_t)b->nrows, rgba, 4u * (size_t)(n < b->width ? n : b->width));
    return b->rows_base + b->nrows++;
}

int pxvm_build_error(const pxvm_builder *b, pxvm_error *err) { return (pxvm_fail)(err, b->why, -1, -1); }

int pxvm_build_finish(pxvm_builder *b, pxvm_image *out, pxvm_error *err)
{
    if (b->failed)
        return pxvm_build_error(b, err);
    size_t W = (size_t)b->width, hdr = px__header_pixels(b), code0 = px__code_start(b), code_end = code0 + b->code_pixels;
    if (code0 < hdr)
        return pxvm_fail(err, PXE_BUILD_CODE_START, -1, -1);
    size_t rows = (code_end + W - 1) / W;
    if (b->rows_base >= 0)
        rows = (size_t)b->rows_base + (size_t)b->nrows;
    size_t data_row = rows;
    for (int k = 1; k <= b->nslots; k++)
        if (b->slots[k].role == PXI_ROLE_DATA && !b->slots[k].data_fixed)
            rows += (size_t)b->slots[k].h;
    if (rows > 65535 || W > 65535)
        return pxvm_fail(err, PXE_BUILD_TOO_LARGE, -1, -1);
    if (pxvm_image_alloc(out, (int)W, (int)rows, err) < 0)
        return -1;
    uint8_t *px = out->px;
    px[0] = PXI_MAGIC_R, px[1] = PXI_MAGIC_G, px[2] = PXI_MAGIC_B, px[3] = PXI_MAGIC_A;
    int minor = 0; /* 1.1 only when it is needed, so that every other program keeps its 1.0 bytes */
    for (int k = 1; k <= b->nslots; k++)
        if (b->slots[k].flags & PXI_SLOT_ANYSIZE)
            minor = PXI_MINOR_ANYSIZE;
    px[4] = PXI_VERSION_MAJOR, px[5] = (uint8_t)minor, px[6] = (uint8_t)b->nslots, px[7] = 0;
    pxi_write_le(px, 2, 0, 4, (uint32_t)code0);
    pxi_write_le(px, 3, 0, 4, b->ninsns);
    for (int k = 1; k <= b->nslots; k++) {
        const pxvm_builder_slot *s = &b->slots[k];
        int d = PXI_HEADER_PIXELS + PXI_SLOT_PIXELS * (k - 1);
        px[4 * d] = s->role;
        px[4 * d + 1] = s->flags;
        pxi_write_le(px, d + 1, 0, 4, (uint32_t)s->w);
        pxi_write_le(px, d + 2, 0, 4, (uint32_t)s->h);
        if (s->role == PXI_ROLE_DATA && s->data_fixed) {
            pxi_write_le(px, d + 3, 0, 2, (uint32_t)s->data_x);
            pxi_write_le(px, d + 3, 2, 2, (uint32_t)s->data_y);
        } else if (s->role == PXI_ROLE_DATA) {
            pxi_write_le(px, d + 3, 0, 2, 0);
            pxi_write_le(px, d + 3, 2, 2, (uint32_t)data_row);
            for (int y = 0; y < s->h; y++)
                memcpy(px + ((data_row + (size_t)y) * W) * 4u, s->data.px + (size_t)y * (size_t)s->w * 4u,
                       (size_t)s->w * 4u);
            data_row += (size_t)s->h;
        }
        if (s->flags & PXI_SLOT_ANYSIZE) {
            pxi_write_le(px, d + 3, 0, 2, (uint32_t)s->min_side);
            pxi_write_le(px, d + 3, 2, 2, (uint32_t)s->max_side);
            pxi_write_le(px, d + 4, 0, 4, s->max_pixels);
        } else {
            pxi_write_le(px, d + 4, 0, 2, (uint32_t)s->patch_w);
            pxi_write_le(px, d + 4, 2, 2, (uint32_t)s->patch_h);
        }
        pxi_write_le(px, d + 5, 0, 4, (uint32_t)s->patch_count);
        memcpy(px + 4 * (d + 6), s->name, strlen(s->name));
    }
    memcpy(px + 4 * code0, b->code, 4 * b->code_pixels);
    if (b->nrows)
        memcpy(px + (size_t)b->rows_base * W * 4u, b->rows, (size_t)b->nrows * W * 4u);
    return 0;
}

void pxvm_build_persist(pxvm_builder *b, int slot)
{
    if (slot >= 1 && slot <= b->nslots)
        b->slots[slot].flags |= PXI_SLOT_PERSIST;
}

void pxvm_build_any_size(pxvm_builder *b, int slot, int min_side, int max_side, uint32_t max_pixels)
{
    if (slot < 1 || slot > b->nslots) {
        px__bfail(b, PXE_BUILD_NO_SLOT);
        return;
    }
    pxvm_builder_slot *s = &b->slots[slot];
    s->flags |= PXI_SLOT_ANYSIZE;
    s->min_side = min_side, s->max_side = max_side, s->max_pixels = max_pixels;
}
