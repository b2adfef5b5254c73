/* cpu_slot.h - what the CPU executor's files share: a slot's levels as the shared semantics
 * (isa/px_sem.h) read them, and the little-endian pixel loads and stores. Included by
 * cpu_executor.h (the executor's files), video.c (DIFF, UPDATE, incremental PYRAMID) and
 * fixation.c (SALIENCY, ARGMAX). */
#ifndef PX_CPU_SLOT_H
#define PX_CPU_SLOT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "../../vm/vm.h"

/* How the shared sampler reads texels here: straight from the slot's level arrays. */
typedef struct px_cpu_src {
    const uint8_t *level[PXVM_MAX_LEVELS];
    int w[PXVM_MAX_LEVELS], h[PXVM_MAX_LEVELS];
    int levels;
} px_cpu_src;

static inline uint32_t px__load(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}
static inline void px__store(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

#define PX_SRC_T const px_cpu_src *
#define PX_FETCH(s, l, x, y) px__load((s)->level[l] + ((size_t)(y) * (size_t)(s)->w[l] + (size_t)(x)) * 4u)
#define PX_LEVEL_W(s, l) ((s)->w[l])
#define PX_LEVEL_H(s, l) ((s)->h[l])
#define PX_LEVELS(s) ((s)->levels)
#include "../../isa/px_sem.h"

/* Texels x0..x1-1 of row y of level l from level l-1 (the PYRAMID rule), for the full pyramid
 * (whole rows, in vector variants) and the incremental one (spans of dirty tiles). With sw >= 2,
 * 2x+1 < sw for every texel of the row: no clamping, one 8-byte load per source row and texel,
 * and the loop vectorizes. */
static inline void px_cpu_pyr_span(const px_cpu_src *v, int l, int y, int x0, int x1)
{
    int sw = v->w[l - 1], sh = v->h[l - 1], dw = v->w[l];
    const uint8_t *r0 = v->level[l - 1] + (size_t)px_pyr_src0(y) * (size_t)sw * 4u;
    const uint8_t *r1 = v->level[l - 1] + (size_t)px_pyr_src1(y, sh) * (size_t)sw * 4u;
    uint8_t *d = (uint8_t *)v->level[l] + (size_t)y * (size_t)dw * 4u;
    if (sw >= 2)
        for (int x = x0; x < x1; x++) {
            uint64_t top, bottom;
            memcpy(&top, r0 + 8 * x, 8);
            memcpy(&bottom, r1 + 8 * x, 8);
            px__store(d + 4 * x, px_box2x2(top, bottom));
        }
    else
        for (int x = x0; x < x1; x++) {
            int a = px_pyr_src0(x) * 4, b = px_pyr_src1(x, sw) * 4;
            px__store(d + 4 * x, px_box4(px__load(r0 + a), px__load(r0 + b), px__load(r1 + a), px__load(r1 + b)));
        }
}

/* Hot loops get wider vector variants where the CPU has them, chosen when the program loads
 * (gcc function multiversioning); the portable build is the default. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__)
#define PX_VECTOR_CLONES __attribute__((target_clones("arch=x86-64-v4", "avx2", "default")))
#else
#define PX_VECTOR_CLONES
#endif

/* fixation.c: SALIENCY rows y0..y1-1 of its map (dst level 0, dst_w wide), and ARGMAX into the
 * run's registers fix[8][2] (space_w x space_h: the `space` slot's level 0). */
void px_cpu_saliency_rows(const px_cpu_src *src, uint8_t *dst, int dst_w, const pxi_insn *in, int y0, int y1);
void px_cpu_argmax(const px_cpu_src *src, int space_w, int space_h, const pxi_insn *in, int32_t *fix);

/* video.c: DIFF mask rows, UPDATE rows, incremental PYRAMID (levels 1-4 by tile rows, then the
 * rest), the mask's counts, and whether a tile box or a patch's pixels reach a dirty tile. */
void px_cpu_diff_rows(const px_cpu_src *frame, const px_cpu_src *cur, uint8_t *mask, int mask_w, const pxi_insn *in,
                      int primed, const pxvm_rect *rects, int nrects, int y0, int y1);
void px_cpu_update_rows(const px_cpu_src *frame, uint8_t *cur, const uint8_t *mask, int mask_w, int y0, int y1);
void px_cpu_pyramid_tile_rows(const px_cpu_src *v, const uint8_t *mask, int mask_w, int ty0, int ty1);
void px_cpu_pyramid_upper(const px_cpu_src *v, const uint8_t *mask, int mask_w, uint8_t *flags);
/* The dirty tiles of a mask (mask_w x mask_h, one pixel per tile) as a summed-area table:
 * counts[y * (mask_w + 1) + x] = dirty tiles in rows < y and columns < x ((mask_w + 1) x
 * (mask_h + 1) entries), so that any box's count is four reads. */
void px_cpu_mask_counts(const uint8_t *mask, int mask_w, int mask_h, int32_t *counts);
/* Whether tile box b (inside the mask, or empty) holds a dirty tile. */
int px_cpu_box_dirty(const int32_t *counts, int mask_w, px_tilebox b);
/* Patches up to this side are sampled again pixel by pixel; larger ones whole. */
#define PX_PATCH_MAX_SIDE 64
/* The tiles each pixel of an incremental SAMPLE/ANISO patch (w, h <= 64) reaches, as separable
 * spans: pixel (i, j) reads positions [ulo[i], uhi[i]] x [vlo[j], vhi[j]] at levels
 * lmin..lmax of a sw x sh source, so its tiles are columns spans[i] .. spans[w + i] and rows
 * spans[2w + j] .. spans[2w + h + j] (px_footprint_axis). They change only with the fixation. */
void px_cpu_patch_spans(const int64_t *ulo, const int64_t *uhi, int w, const int64_t *vlo, const int64_t *vhi, int h, int lmin,
                        int lmax, int filter, int sw, int sh, int16_t *spans);
/* The pixels of such a patch whose spans hold a dirty tile: bit i of row_bits[j]. */
void px_cpu_patch_dirty_pixels(const int32_t *counts, int mask_w, const int16_t *spans, int w, int h, uint64_t *row_bits);

#endif
