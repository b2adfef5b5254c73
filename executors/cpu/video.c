/* video.c - DIFF, UPDATE, incremental PYRAMID and the incremental-sampling decision on the CPU
 * reference executor; the CUDA-GL twin is executors/cuda_gl/video.cu. Both compute the rules of
 * isa/px_sem.h (px_maxdiff, px_mask_pixel, px_texel_tiles, px_footprint_tiles, ...). */
#include <string.h>

#include "cpu_executor.h"

/* Folds one pixel row (n bytes) into byte-wise maxima of the differences: element by element,
 * no reduction, so the compiler vectorizes it whole (saturated subtractions and pmaxub, wider in
 * the AVX2 and AVX-512 variants); a tile row's 16 rows are reduced per tile once, after. */
PX_VECTOR_CLONES static void px__row_maxdiff(const uint8_t *a, const uint8_t *b, size_t n, uint8_t *acc)
{
    for (size_t i = 0; i < n; i++) {
        uint8_t d = (uint8_t)(a[i] > b[i] ? a[i] - b[i] : b[i] - a[i]);
        acc[i] = d > acc[i] ? d : acc[i];
    }
}

/* The largest of each tile's PX_TILE * 4 bytes of acc (n bytes, the last tile maybe narrower). */
PX_VECTOR_CLONES static void px__tile_maxima(const uint8_t *acc, size_t n, uint8_t *tile_max)
{
    size_t a = 0;
    for (; a + PX_TILE * 4u <= n; a += PX_TILE * 4u) {
        uint8_t m = 0;
        for (size_t i = 0; i < PX_TILE * 4u; i++)
            m = acc[a + i] > m ? acc[a + i] : m;
        tile_max[a / (PX_TILE * 4u)] = m;
    }
    if (a < n) {
        uint8_t m = 0;
        for (size_t i = a; i < n; i++)
            m = acc[i] > m ? acc[i] : m;
        tile_max[a / (PX_TILE * 4u)] = m;
    }
}

/* Mask rows y0..y1-1 (one pixel per 16x16 tile): a tile is dirty when some byte of it differs
 * by more than the threshold (px_maxdiff > threshold), when the caller's rectangles touch it, or
 * on an unprimed run. */
void px_cpu_diff_rows(const px_cpu_src *frame, const px_cpu_src *cur, uint8_t *mask, int mask_w, const pxi_insn *in,
                      int primed, const pxvm_rect *rects, int nrects, int y0, int y1)
{
    int w = frame->w[0], h = frame->h[0];
    unsigned t = (unsigned)PX_ARG(in, DIFF, threshold);
    uint8_t tile_max[(1 << PXVM_MAX_LEVELS) / PX_TILE]; /* sides < 2^16: at most PXVM_MAX_LEVELS levels */
    size_t row = (size_t)w * 4u;
    uint8_t acc[64 * PX_TILE * 4]; /* 64 tiles of a tile row at a time */
    for (int ty = y0; ty < y1; ty++) {
        for (size_t c = 0; primed && nrects < 0 && c < row; c += sizeof acc) {
            size_t n = row - c < sizeof acc ? row - c : sizeof acc;
            memset(acc, 0, n);
            for (int y = ty * PX_TILE; y < (ty + 1) * PX_TILE && y < h; y++)
                px__row_maxdiff(frame->level[0] + (size_t)y * row + c, cur->level[0] + (size_t)y * row + c, n, acc);
            px__tile_maxima(acc, n, tile_max + c / (PX_TILE * 4u));
        }
        for (int tx = 0; tx < mask_w; tx++) {
            int dirty = !primed || (nrects >= 0 ? pxvm_rects_touch_tile(rects, nrects, tx, ty) : tile_max[tx] > t);
            px__store(mask + ((size_t)ty * (size_t)mask_w + (size_t)tx) * 4u, px_mask_pixel(dirty));
        }
    }
}

/* cur level 0 rows y0..y1-1 = frame where the mask says dirty: a tile row's dirty tiles listed
 * once, then each of its pixel rows copied tile by tile (a whole tile's row is one fixed-size,
 * inlined 64-byte copy). */
void px_cpu_update_rows(const px_cpu_src *frame, uint8_t *cur, const uint8_t *mask, int mask_w, int y0, int y1)
{
    int w = frame->w[0], dirty[(1 << PXVM_MAX_LEVELS) / PX_TILE], nd = 0, listed = -1;
    size_t row = (size_t)w * 4u;
    for (int y = y0; y < y1; y++) {
        if (y >> PX_TILE_SHIFT != listed) {
            listed = y >> PX_TILE_SHIFT, nd = 0;
            const uint8_t *m = mask + (size_t)listed * (size_t)mask_w * 4u;
            for (int tx = 0; tx < mask_w; tx++)
                if (px_mask_dirty(px__load(m + 4 * tx)))
                    dirty[nd++] = tx;
        }
        uint8_t *d = cur + (size_t)y * row;
        const uint8_t *s = frame->level[0] + (size_t)y * row;
        for (int k = 0; k < nd; k++) {
            size_t x0 = (size_t)dirty[k] * PX_TILE * 4u;
            if (x0 + PX_TILE * 4u <= row)
                memcpy(d + x0, s + x0, PX_TILE * 4u);
            else
                memcpy(d + x0, s + x0, row - x0);
        }
    }
}

void px_cpu_mask_counts(const uint8_t *mask, int mask_w, int mask_h, int32_t *counts)
{
    size_t cw = (size_t)mask_w + 1u;
    memset(counts, 0, cw * sizeof(int32_t));
    for (int ty = 0; ty < mask_h; ty++) {
        const uint8_t *m = mask + (size_t)ty * (size_t)mask_w * 4u;
        const int32_t *above = counts + (size_t)ty * cw;
        int32_t *c = counts + (size_t)(ty + 1) * cw, row = 0;
        c[0] = 0;
        for (int tx = 0; tx < mask_w; tx++) {
            row += px_mask_dirty(px__load(m + 4 * tx));
            c[tx + 1] = above[tx + 1] + row;
        }
    }
}

int px_cpu_box_dirty(const int32_t *counts, int mask_w, px_tilebox b)
{
    if (b.x0 > b.x1 || b.y0 > b.y1)
        return 0;
    size_t cw = (size_t)mask_w + 1u;
    const int32_t *top = counts + (size_t)b.y0 * cw, *bottom = counts + (size_t)(b.y1 + 1) * cw;
    return bottom[b.x1 + 1] - bottom[b.x0] - top[b.x1 + 1] + top[b.x0] > 0;
}

void px_cpu_patch_spans(const int64_t *ulo, const int64_t *uhi, int w, const int64_t *vlo, const int64_t *vhi, int h, int lmin,
                        int lmax, int filter, int sw, int sh, int16_t *spans)
{
    int t0, t1;
    px_footprint_levels(sw, sh, &lmin, &lmax); /* as px_footprint_tiles */
    for (int i = 0; i < w; i++) {
        px_footprint_axis(ulo[i], uhi[i], lmin, lmax, filter, sw, &t0, &t1);
        spans[i] = (int16_t)t0, spans[w + i] = (int16_t)t1;
    }
    for (int j = 0; j < h; j++) {
        px_footprint_axis(vlo[j], vhi[j], lmin, lmax, filter, sh, &t0, &t1);
        spans[2 * w + j] = (int16_t)t0, spans[2 * w + h + j] = (int16_t)t1;
    }
}

/* The tile box of a pixel is separable (px_footprint_tiles: its columns follow from the u span,
 * its rows from the v span): for each distinct row span, the dirty tiles of those rows left of a
 * column are one difference of two rows of the counts, and a pixel is then one difference of
 * two of those. A row's pixels come out as bits (w <= 64), so that the sampler visits them with
 * no branch per pixel to mispredict. */
void px_cpu_patch_dirty_pixels(const int32_t *counts, int mask_w, const int16_t *spans, int w, int h, uint64_t *row_bits)
{
    const int16_t *cx0 = spans, *cx1 = spans + w, *ry0 = spans + 2 * w, *ry1 = spans + 2 * w + h;
    size_t cw = (size_t)mask_w + 1u;
    uint64_t bits = 0;
    int lo = 1 << 30, hi = -1; /* the columns any pixel reaches (du may be negative) */
    for (int i = 0; i < w; i++) {
        lo = cx0[i] < lo ? cx0[i] : lo;
        hi = cx1[i] > hi ? cx1[i] : hi;
    }
    for (int j = 0; j < h; j++) {
        if (j == 0 || ry0[j] != ry0[j - 1] || ry1[j] != ry1[j - 1]) { /* a new row span: its pixels' bits */
            const int32_t *top = counts + (size_t)ry0[j] * cw, *bottom = counts + (size_t)(ry1[j] + 1) * cw;
            bits = 0;
            if (bottom[hi + 1] - top[hi + 1] - bottom[lo] + top[lo] > 0)
                for (int i = 0; i < w; i++)
                    bits |= (uint64_t)(bottom[cx1[i] + 1] - top[cx1[i] + 1] - bottom[cx0[i]] + top[cx0[i]] > 0) << i;
        }
        row_bits[j] = bits;
    }
}

/* Texels of level l (`per` a side) of tile (tx, ty) from level l-1: the texels of px_cpu_pyr_span,
 * with the trip counts known when inlined (per = 8, 4, 2, 1). */
static inline __attribute__((always_inline)) void px__pyr_tile_level(const px_cpu_src *v, int l, int per, int tx, int ty)
{
    size_t sw = (size_t)v->w[l - 1] * 4u, dw = (size_t)v->w[l] * 4u;
    for (int y = ty * per; y < (ty + 1) * per; y++) {
        /* local copies: the loop over them has no aliasing to rule out, so it vectorizes (the
         * 8-byte loads and 4-byte stores are the memory order px_box2x2 takes: little-endian) */
        uint64_t top[PX_TILE / 2], bottom[PX_TILE / 2];
        uint32_t out[PX_TILE / 2];
        const uint8_t *r0 = v->level[l - 1] + (size_t)(2 * y) * sw + (size_t)tx * (size_t)per * 8u;
        memcpy(top, r0, (size_t)per * 8u);
        memcpy(bottom, r0 + sw, (size_t)per * 8u);
        for (int x = 0; x < per; x++)
            out[x] = px_box2x2(top[x], bottom[x]);
        memcpy((uint8_t *)v->level[l] + (size_t)y * dw + (size_t)tx * (size_t)per * 4u, out, (size_t)per * 4u);
    }
}

/* Levels 1-4 of a tile whose 16x16 texels of level 0 all lie in the image: every source row and
 * column pair lies inside its level (no clamping), so each level is a fixed-size block. */
PX_VECTOR_CLONES static void px__pyr_whole_tile(const px_cpu_src *v, int tx, int ty)
{
    px__pyr_tile_level(v, 1, PX_TILE >> 1, tx, ty);
    px__pyr_tile_level(v, 2, PX_TILE >> 2, tx, ty);
    px__pyr_tile_level(v, 3, PX_TILE >> 3, tx, ty);
    px__pyr_tile_level(v, 4, PX_TILE >> 4, tx, ty);
}

/* Levels 1 .. min(4, levels-1) of the tile rows ty0..ty1-1: up to level 4 a texel lies in one
 * tile, whose texels of every such level depend on that tile's level-0 texels only, so tile rows
 * are independent; a row of a level is rebuilt in spans, one per dirty tile (px_texel_tiles). */
void px_cpu_pyramid_tile_rows(const px_cpu_src *v, const uint8_t *mask, int mask_w, int ty0, int ty1)
{
    int top = v->levels - 1 < PX_TILE_SHIFT ? v->levels - 1 : PX_TILE_SHIFT;
    int dirty[(1 << PXVM_MAX_LEVELS) / PX_TILE]; /* the tile row's dirty tiles, read once */
    for (int ty = ty0; ty < ty1; ty++) {
        const uint8_t *m = mask + (size_t)ty * (size_t)mask_w * 4u;
        int nd = 0, whole_row = top == PX_TILE_SHIFT && (ty + 1) * PX_TILE <= v->h[0];
        for (int tx = 0; tx < mask_w; tx++) {
            if (!px_mask_dirty(px__load(m + 4 * tx)))
                continue;
            if (whole_row && (tx + 1) * PX_TILE <= v->w[0])
                px__pyr_whole_tile(v, tx, ty);
            else
                dirty[nd++] = tx;
        }
        for (int l = 1; l <= top && nd > 0; l++) {
            int per = PX_TILE >> l, dw = v->w[l];
            for (int y = (ty * PX_TILE) >> l; y < ((ty + 1) * PX_TILE) >> l && y < v->h[l]; y++)
                for (int k = 0; k < nd && dirty[k] * per < dw; k++)
                    px_cpu_pyr_span(v, l, y, dirty[k] * per, (dirty[k] + 1) * per < dw ? (dirty[k] + 1) * per : dw);
        }
    }
}

/* Levels 5 .. : a texel is rebuilt when one of the texels it is built from was rebuilt. `flags`
 * holds one level's rebuilt flags at a time, each the OR of the texel's 2x2 sources (clamped as
 * PYRAMID clamps them), written over the level below in place (a texel's sources lie at or after
 * its own index). Level 4's texel (x, y) is built from level-0 texels of tile (x, y) alone, so
 * the mask gives its flags. The SPEC's rule (a dirty tile under the texel's footprint,
 * px_texel_tiles) rebuilds these texels and, where a partial last tile row or column lies under
 * a footprint but under no level-4 texel, a few more whose sources all kept their values: only
 * PYRAMID writes levels >= 1 and each level starts as the pyramid of the one below (zeros), so
 * such a texel already holds what rebuilding it gives. The bytes are the same; this skips a
 * scan of the mask per texel. `flags`: w[4] * h[4] bytes. */
void px_cpu_pyramid_upper(const px_cpu_src *v, const uint8_t *mask, int mask_w, uint8_t *flags)
{
    if (v->levels <= PX_TILE_SHIFT + 1)
        return;
    int fw = v->w[PX_TILE_SHIFT], fh = v->h[PX_TILE_SHIFT];
    for (int y = 0; y < fh; y++)
        for (int x = 0; x < fw; x++)
            flags[y * fw + x] = (uint8_t)px_mask_dirty(px__load(mask + ((size_t)y * (size_t)mask_w + (size_t)x) * 4u));
    for (int l = PX_TILE_SHIFT + 1; l < v->levels; l++) {
        int sw = v->w[l - 1], sh = v->h[l - 1];
        for (int y = 0; y < v->h[l]; y++) {
            const uint8_t *r0 = flags + px_pyr_src0(y) * sw, *r1 = flags + px_pyr_src1(y, sh) * sw;
            for (int x = 0; x < v->w[l]; x++) {
                int a = px_pyr_src0(x), b = px_pyr_src1(x, sw);
                uint8_t f = r0[a] | r0[b] | r1[a] | r1[b];
                flags[y * v->w[l] + x] = f;
                if (f)
                    px_cpu_pyr_span(v, l, y, x, x + 1);
            }
        }
    }
}

/* ---- the plan steps (the executor's dispatch: run.c; fused tile passes: run.c's px__cpu_tiles) -- */

static void px__video_diff_rows(void *ctx, int y0, int y1)
{
    const px_cpu_insn_job *j = ctx;
    const pxvm_executor *ex = j->ex;
    int mask = PX_ARG(j->in, DIFF, mask);
    px_cpu_diff_rows(&ex->view[PX_ARG(j->in, DIFF, frame)], &ex->view[PX_ARG(j->in, DIFF, cur)], ex->store[mask],
                     ex->prog->slots[mask].w, j->in, ex->primed[ex->item], ex->rects + (size_t)ex->item * PXVM_MAX_RECTS,
                     ex->nrects[ex->item], y0, y1);
}

static void px__video_update_rows(void *ctx, int y0, int y1)
{
    const px_cpu_insn_job *j = ctx;
    const pxvm_executor *ex = j->ex;
    int mask = PX_ARG(j->in, UPDATE, mask);
    px_cpu_update_rows(&ex->view[PX_ARG(j->in, UPDATE, frame)], ex->store[PX_ARG(j->in, UPDATE, cur)], ex->store[mask],
                       ex->prog->slots[mask].w, y0, y1);
}

/* DIFF or UPDATE (the plan kind tells which) as plan step s. */
int px_cpu_run_video(pxvm_executor *ex, uint32_t s, pxvm_error *err)
{
    (void)err;
    const pxvm_program *prog = ex->prog;
    const pxi_insn *first = &prog->insns[prog->steps[s].first];
    px_cpu_insn_job job = {ex, first};
    if (pxi_facts(first->op)->plan == PXP_DIFF)
        px_pool_for(ex->pool, prog->slots[PX_ARG(first, DIFF, mask)].h, 2, px__video_diff_rows, &job);
    else
        px_pool_for(ex->pool, prog->slots[PX_ARG(first, UPDATE, cur)].h, 16, px__video_update_rows, &job);
    return 0;
}
