/* video.c - DIFF, UPDATE, incremental PYRAMID and the incremental-sampling decision on the CPU
 * reference executor; the CUDA-GL twin is executors/cuda_gl/video.cu. Both compute the rules of
 * isa/px_sem.h (px_maxdiff, px_mask_pixel, px_texel_tiles, px_footprint_tiles, ...). */
#include <string.h>

#include "cpu_slot.h"

/* Mask rows y0..y1-1 (one pixel per 16x16 tile). */
void px_cpu_diff_rows(const px_cpu_src *frame, const px_cpu_src *cur, uint8_t *mask, int mask_w, const pxi_insn *in,
                      int primed, const pxvm_rect *rects, int nrects, int y0, int y1)
{
    int w = frame->w[0], h = frame->h[0];
    uint32_t threshold = (uint32_t)PX_ARG(in, DIFF, threshold);
    for (int ty = y0; ty < y1; ty++)
        for (int tx = 0; tx < mask_w; tx++) {
            int dirty = !primed;
            if (!dirty && nrects >= 0) {
                dirty = pxvm_rects_touch_tile(rects, nrects, tx, ty);
            } else if (!dirty) {
                int x1 = (tx + 1) * PX_TILE < w ? (tx + 1) * PX_TILE : w, yy1 = (ty + 1) * PX_TILE < h ? (ty + 1) * PX_TILE : h;
                for (int y = ty * PX_TILE; y < yy1 && !dirty; y++) {
                    const uint8_t *a = frame->level[0] + ((size_t)y * (size_t)w + (size_t)tx * PX_TILE) * 4u;
                    const uint8_t *b = cur->level[0] + ((size_t)y * (size_t)w + (size_t)tx * PX_TILE) * 4u;
                    for (int x = tx * PX_TILE; x < x1 && !dirty; x++, a += 4, b += 4)
                        dirty = px_maxdiff(px__load(a), px__load(b)) > threshold;
                }
            }
            px__store(mask + ((size_t)ty * (size_t)mask_w + (size_t)tx) * 4u, px_mask_pixel(dirty));
        }
}

/* cur level 0 rows y0..y1-1 = frame where the mask says dirty. */
void px_cpu_update_rows(const px_cpu_src *frame, uint8_t *cur, const uint8_t *mask, int mask_w, int y0, int y1)
{
    int w = frame->w[0];
    for (int y = y0; y < y1; y++)
        for (int tx = 0; tx < mask_w; tx++) {
            if (!px_mask_dirty(px__load(mask + ((size_t)(y >> PX_TILE_SHIFT) * (size_t)mask_w + (size_t)tx) * 4u)))
                continue;
            int x0 = tx * PX_TILE, n = (tx + 1) * PX_TILE < w ? PX_TILE : w - x0;
            memcpy(cur + ((size_t)y * (size_t)w + (size_t)x0) * 4u, frame->level[0] + ((size_t)y * (size_t)w + (size_t)x0) * 4u,
                   (size_t)n * 4u);
        }
}

int px_cpu_box_dirty(const uint8_t *mask, int mask_w, px_tilebox b)
{
    for (int ty = b.y0; ty <= b.y1; ty++)
        for (int tx = b.x0; tx <= b.x1; tx++)
            if (px_mask_dirty(px__load(mask + ((size_t)ty * (size_t)mask_w + (size_t)tx) * 4u)))
                return 1;
    return 0;
}

/* Level `level` (>= 1) rows y0..y1-1 of an incremental PYRAMID: a texel is rebuilt from level-1
 * exactly when its footprint touches a dirty tile. */
void px_cpu_pyramid_rows(const px_cpu_src *v, const uint8_t *mask, int mask_w, int level, int y0, int y1)
{
    int sw = v->w[level - 1], sh = v->h[level - 1], dw = v->w[level];
    const uint8_t *src = v->level[level - 1];
    uint8_t *dst = (uint8_t *)v->level[level];
    for (int y = y0; y < y1; y++) {
        const uint8_t *r0 = src + (size_t)px_pyr_src0(y) * (size_t)sw * 4u;
        const uint8_t *r1 = src + (size_t)px_pyr_src1(y, sh) * (size_t)sw * 4u;
        for (int x = 0; x < dw; x++) {
            if (!px_cpu_box_dirty(mask, mask_w, px_texel_tiles(x, y, level, v->w[0], v->h[0])))
                continue;
            int a = px_pyr_src0(x) * 4, b = px_pyr_src1(x, sw) * 4;
            px__store(dst + ((size_t)y * (size_t)dw + (size_t)x) * 4u,
                      px_box4(px__load(r0 + a), px__load(r0 + b), px__load(r1 + a), px__load(r1 + b)));
        }
    }
}
