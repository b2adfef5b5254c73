/* px_sem.h - the exact integer semantics of every pxvm opcode, written once.
 *
 * Compiled by gcc for the CPU executor and by nvcc for the CUDA-GL kernels (every function is
 * `static inline`, and `__host__ __device__` under nvcc). No floating-point arithmetic appears
 * here: the two executors agree bit for bit because they run this very arithmetic. (One exact
 * conversion stands in for an integer loop on the GPU, in px_embed_bf16: it says why it gives
 * the loop's bits, and tests/unit/test_embed.c checks that on the host.)
 *
 * Conventions (isa/SPEC.md states them for users):
 * - A pixel is px_rgba: R | G<<8 | B<<16 | A<<24. Channels are treated independently.
 * - Mip level l of a w x h slot is max(1, w>>l) x max(1, h>>l); there are
 *   floor(log2(max(w, h))) + 1 levels (the OpenGL full chain, so GL storage matches exactly).
 * - Coordinates are level-0 texel units in Q.16; texel i covers [i, i+1), its centre is i + 0.5.
 *   At level l a coordinate is divided by 2^l by an arithmetic (flooring) shift.
 * - Weights are 8-bit (0..256); the only rounding is the last step of a sample (round half up).
 */
#ifndef PX_SEM_H
#define PX_SEM_H

#include <stdint.h>

#include "pxisa.h"

#if defined(__CUDACC__)
#define PX_SEM static inline __host__ __device__
#else
#define PX_SEM static inline
#endif

typedef uint32_t px_rgba;
typedef struct px_acc4 {
    uint32_t c[4];
} px_acc4; /* four channels of an unrounded bilinear value, Q.16 */

#define PX_Q16_ONE 65536
#define PX_LOD_ONE 256
#define PX_DOT_MAX 65535u /* largest DOT_RGB sum that fits its R,G result */

/* ---- small integer helpers ------------------------------------------------------------------ */

PX_SEM int px_clampi(int v, int lo, int hi) { return v < lo ? lo : (v > hi ? hi : v); }

/* floor(v / 2^s) for any sign, without relying on implementation-defined signed shifts. */
PX_SEM int64_t px_floor_shift(int64_t v, int s)
{
    return v >= 0 ? (int64_t)((uint64_t)v >> s) : -(int64_t)(((uint64_t)(-(v + 1)) >> s) + 1);
}

PX_SEM uint32_t px_ch(px_rgba p, int c) { return (p >> (8 * c)) & 255u; }

PX_SEM px_rgba px_pack(uint32_t r, uint32_t g, uint32_t b, uint32_t a)
{
    return r | (g << 8) | (b << 16) | (a << 24);
}

/* ---- binding images ------------------------------------------------------------------------ */

/* A pixel of 1, 3 or 4 uint8 channels `ch_stride` bytes apart, as the VM's RGBA8: grey v is
 * (v, v, v, 255), RGB is (r, g, b, 255), RGBA is itself (spec: "Binding images"). */
PX_SEM px_rgba px_expand(const uint8_t *p, int channels, int64_t ch_stride)
{
    if (channels == 1)
        return px_pack(p[0], p[0], p[0], 255u);
    return px_pack(p[0], p[ch_stride], p[2 * ch_stride], channels == 4 ? p[3 * ch_stride] : 255u);
}

/* A colour channel of a CMYK or YCCK JPEG's pixel from libjpeg-turbo's CMYK samples (ink `v` of
 * the channel, black `k`, both as decoded: Adobe's inverted convention, 255 = no ink), as Pillow
 * gives it (its "CMYK;I" unpacker, then convert("RGB"): nk - round(ink * nk / 255), ink = 255 - v,
 * nk = k); round() never meets a tie here, so it is an integer division (spec: "Binding images"). */
PX_SEM uint32_t px_cmyk_channel(uint32_t v, uint32_t k)
{
    return k - ((255u - v) * k + 127u) / 255u;
}

/* ---- mip chain ------------------------------------------------------------------------------ */

PX_SEM int px_mip_dim(int n, int level)
{
    int d = n >> level;
    return d > 0 ? d : 1;
}

PX_SEM int px_mip_levels(int w, int h)
{
    int m = w > h ? w : h, levels = 1;
    while (m > 1) {
        m >>= 1;
        levels++;
    }
    return levels;
}

/* PYRAMID: level l+1 texel (x, y) is the box average of level-l texels 2x, 2x+1 (columns) and
 * 2y, 2y+1 (rows), each clamped to the level-l size. With the floor sizes above the clamp only
 * acts where a level-l dimension is 1 (the texel is then counted twice); for an odd dimension
 * > 1 the last column (row) does not contribute to level l+1, as in OpenGL's sizes. */
PX_SEM int px_pyr_src0(int x) { return 2 * x; }
PX_SEM int px_pyr_src1(int x, int src_size) { return 2 * x + 1 < src_size ? 2 * x + 1 : src_size - 1; }

/* One channel of a 2x2 block: the mean, rounded half up. */
PX_SEM uint32_t px_box1(uint32_t a, uint32_t b, uint32_t c, uint32_t d) { return (a + b + c + d + 2u) >> 2; }

/* px_box1 on all four channels at once: R and B in the 16-bit lanes of one word, G and A in
 * another. A lane holds at most 4*255 + 2 = 1022, so lanes never carry into each other and the
 * result is exactly px_box1 per channel. */
PX_SEM px_rgba px_box4(px_rgba a, px_rgba b, px_rgba c, px_rgba d)
{
    const uint32_t m = 0x00FF00FFu;
    uint32_t rb = (a & m) + (b & m) + (c & m) + (d & m) + 0x00020002u;
    uint32_t ga = ((a >> 8) & m) + ((b >> 8) & m) + ((c >> 8) & m) + ((d >> 8) & m) + 0x00020002u;
    return ((rb >> 2) & m) | (((ga >> 2) & m) << 8);
}

/* The same 2x2 box for a block given as two 8-byte row loads (texel 2x in the low half, 2x+1 in
 * the high half: little-endian memory order): px_box4(lo(top), hi(top), lo(bottom), hi(bottom)),
 * in the same packed lanes, so a CPU loop over it vectorizes. */
PX_SEM px_rgba px_box2x2(uint64_t top, uint64_t bottom)
{
    const uint64_t m = 0x00FF00FF00FF00FFull;
    uint64_t rb = (top & m) + (bottom & m), ga = ((top >> 8) & m) + ((bottom >> 8) & m);
    uint32_t rb2 = (uint32_t)rb + (uint32_t)(rb >> 32) + 0x00020002u;
    uint32_t ga2 = (uint32_t)ga + (uint32_t)(ga >> 32) + 0x00020002u;
    return ((rb2 >> 2) & 0x00FF00FFu) | (((ga2 >> 2) & 0x00FF00FFu) << 8);
}

/* ---- DOT_RGB -------------------------------------------------------------------------------- */

/* The result pixel of a sum that fits (sum <= PX_DOT_MAX): R = low byte, G = high byte. */
PX_SEM px_rgba px_dot_result(uint32_t sum) { return px_pack(sum & 255u, (sum >> 8) & 255u, 0, 0); }

/* ---- sampling ------------------------------------------------------------------------------- */

/* Position of output pixel i of an n-pixel patch row centred at c with step d (all Q.16):
 * c + floor((2i - (n-1)) * d / 2). Exact in 64 bits for every operand the format allows. */
PX_SEM int64_t px_patch_pos(int32_t c, int32_t d, int i, int n)
{
    return (int64_t)c + px_floor_shift((int64_t)(2 * i - (n - 1)) * (int64_t)d, 1);
}

/* Linear filtering along one axis of level l (size texels): the two texels around the coordinate
 * and the 8-bit weight of the second. pos_l = u / 2^l - 0.5 (floored to Q.16);
 * i0 = floor(pos_l), weight = bits 15..8 of pos_l's fraction; both texels clamped to the edge. */
PX_SEM void px_linear_axis(int64_t u, int level, int size, int *i0, int *i1, uint32_t *weight)
{
    int64_t p = px_floor_shift(u, level) - PX_Q16_ONE / 2;
    int64_t i = px_floor_shift(p, 16);
    int64_t lo = i < 0 ? 0 : (i > size - 1 ? size - 1 : i);
    int64_t hi = i + 1 < 0 ? 0 : (i + 1 > size - 1 ? size - 1 : i + 1);
    *i0 = (int)lo;
    *i1 = (int)hi;
    *weight = (uint32_t)(((uint64_t)p & 0xFFFFu) >> 8);
}

/* Nearest texel along one axis of level l: floor(u / 2^l), clamped to the edge. */
PX_SEM int px_nearest_axis(int64_t u, int level, int size)
{
    int64_t i = px_floor_shift(px_floor_shift(u, level), 16);
    return (int)(i < 0 ? 0 : (i > size - 1 ? size - 1 : i));
}

/* Bilinear blend of four texels, unrounded: per channel
 * ((t00*(256-fx) + t10*fx) * (256-fy) + (t01*(256-fx) + t11*fx) * fy), in 0 .. 255*65536. */
PX_SEM px_acc4 px_bilerp(px_rgba t00, px_rgba t10, px_rgba t01, px_rgba t11, uint32_t fx, uint32_t fy)
{
    px_acc4 r;
    for (int ch = 0; ch < 4; ch++) {
        uint32_t top = px_ch(t00, ch) * (256u - fx) + px_ch(t10, ch) * fx;
        uint32_t bot = px_ch(t01, ch) * (256u - fx) + px_ch(t11, ch) * fx;
        r.c[ch] = top * (256u - fy) + bot * fy;
    }
    return r;
}

/* Blend two levels' bilinear values by the LOD fraction f (0..255), unrounded:
 * b0*(256-f) + b1*f per channel, in 0 .. 255*2^24 (fits in 32 bits). */
PX_SEM px_acc4 px_lerp(px_acc4 b0, px_acc4 b1, uint32_t f)
{
    px_acc4 r;
    for (int ch = 0; ch < 4; ch++)
        r.c[ch] = b0.c[ch] * (256u - f) + b1.c[ch] * f;
    return r;
}

/* The single rounding of a sample: (t + 2^23) >> 24 per channel, half up. */
PX_SEM px_rgba px_round24(px_acc4 t)
{
    px_rgba out = 0;
    for (int ch = 0; ch < 4; ch++)
        out |= ((t.c[ch] + (1u << 23)) >> 24) << (8 * ch);
    return out;
}


/* Level pair and fraction of a Q8.8 LOD for a chain of `levels` levels (linear mode). */
PX_SEM void px_lod_split(uint32_t lod, int levels, int *l0, int *l1, uint32_t *f)
{
    int base = (int)(lod >> 8);
    if (base >= levels - 1) {
        *l0 = *l1 = levels - 1;
        *f = 0;
    } else {
        *l0 = base;
        *l1 = base + 1;
        *f = lod & 255u;
    }
}

/* Level of a Q8.8 LOD in nearest mode: round half up, clamped to the last level. */
PX_SEM int px_lod_nearest(uint32_t lod, int levels)
{
    int l = (int)((lod + 128u) >> 8);
    return l < levels - 1 ? l : levels - 1;
}

/* The sampler, parameterised by how an executor reads texels. Define before including:
 *   PX_SRC_T                       the executor's source handle type
 *   PX_FETCH(src, level, x, y)     px_rgba of texel (x, y) of a level (coordinates in range)
 *   PX_LEVEL_W(src, level), PX_LEVEL_H(src, level), PX_LEVELS(src)
 */
#if defined(PX_FETCH)
PX_SEM px_acc4 px_bilinear_at(PX_SRC_T src, int level, int64_t u, int64_t v)
{
    int x0, x1, y0, y1;
    uint32_t fx, fy;
    px_linear_axis(u, level, PX_LEVEL_W(src, level), &x0, &x1, &fx);
    px_linear_axis(v, level, PX_LEVEL_H(src, level), &y0, &y1, &fy);
    return px_bilerp(PX_FETCH(src, level, x0, y0), PX_FETCH(src, level, x1, y0),
                     PX_FETCH(src, level, x0, y1), PX_FETCH(src, level, x1, y1), fx, fy);
}

/* One sample at level-0 position (u, v) (Q.16) and LOD (Q8.8), before its rounding: per channel
 * the value times 2^24 (nearest: the texel << 24, exact). */
PX_SEM px_acc4 px_sample_acc(PX_SRC_T src, int64_t u, int64_t v, uint32_t lod, int mode)
{
    int levels = PX_LEVELS(src);
    if (mode == PX_MODE_NEAREST) {
        int l = px_lod_nearest(lod, levels);
        px_rgba t = PX_FETCH(src, l, px_nearest_axis(u, l, PX_LEVEL_W(src, l)), px_nearest_axis(v, l, PX_LEVEL_H(src, l)));
        px_acc4 r;
        for (int ch = 0; ch < 4; ch++)
            r.c[ch] = px_ch(t, ch) << 24;
        return r;
    }
    int l0, l1;
    uint32_t f;
    px_lod_split(lod, levels, &l0, &l1, &f);
    px_acc4 b0 = px_bilinear_at(src, l0, u, v);
    px_acc4 b1 = f ? px_bilinear_at(src, l1, u, v) : b0;
    return px_lerp(b0, b1, f);
}

/* SAMPLE and GATHER for one output pixel: one sample, rounded once. */
PX_SEM px_rgba px_sample(PX_SRC_T src, int64_t u, int64_t v, uint32_t lod, int mode)
{
    return px_round24(px_sample_acc(src, u, v, lod, mode));
}

/* ANISO for one output pixel at (u, v): taps k = 0 .. n-1 at px_patch_pos(u, tdu, k, n),
 * px_patch_pos(v, tdv, k, n) (centred on the pixel), equal weights; the mean of the unrounded
 * samples is rounded once, half up: (sum + n*2^23) / (n*2^24), exact in 64 bits. n = 1 is SAMPLE. */
PX_SEM px_rgba px_sample_aniso(PX_SRC_T src, int64_t u, int64_t v, uint32_t lod, int mode, int n, int32_t tdu,
                               int32_t tdv)
{
    uint64_t sum[4] = {0, 0, 0, 0};
    for (int k = 0; k < n; k++) {
        int64_t du = px_floor_shift((int64_t)(2 * k - (n - 1)) * (int64_t)tdu, 1);
        int64_t dv = px_floor_shift((int64_t)(2 * k - (n - 1)) * (int64_t)tdv, 1);
        px_acc4 a = px_sample_acc(src, u + du, v + dv, lod, mode);
        for (int ch = 0; ch < 4; ch++)
            sum[ch] += a.c[ch];
    }
    px_rgba out = 0;
    uint64_t den = (uint64_t)n << 24;
    for (int ch = 0; ch < 4; ch++)
        out |= (uint32_t)((sum[ch] + den / 2) / den) << (8 * ch);
    return out;
}
#endif

/* ---- fixation: saliency, argmax, relative positions, token geometry ----------------------- */

/* A mode operand's filter (PX_MODE_LINEAR / PX_MODE_NEAREST) and its fixation register (-1:
 * absolute positions). */
PX_SEM int px_mode_filter(int mode) { return mode & (int)PX_MODE_FILTER; }
PX_SEM int px_mode_reg(int mode) { return (mode & (int)PX_MODE_RELATIVE) ? (mode >> PX_MODE_REG_SHIFT) & 7 : -1; }

PX_SEM int32_t px_sat32(int64_t v) { return v > INT32_MAX ? INT32_MAX : (v < INT32_MIN ? INT32_MIN : (int32_t)v); }
PX_SEM uint32_t px_absdiff(int a, int b) { return (uint32_t)(a > b ? a - b : b - a); }

/* SALIENCY's weighted centre-surround difference of two texels (after Itti, Koch and Niebur 1998):
 * luminance I = r+g+b, red-green RG = r-g, blue-yellow BY = 2b-r-g, each an absolute difference
 * between the centre and the surround texel; at most 255 * (765 + 510 + 1020) = 585,225. */
PX_SEM uint32_t px_centre_surround(px_rgba c, px_rgba s, uint32_t w_lum, uint32_t w_rg, uint32_t w_by)
{
    int cr = (int)px_ch(c, 0), cg = (int)px_ch(c, 1), cb = (int)px_ch(c, 2);
    int sr = (int)px_ch(s, 0), sg = (int)px_ch(s, 1), sb = (int)px_ch(s, 2);
    return w_lum * px_absdiff(cr + cg + cb, sr + sg + sb) + w_rg * px_absdiff(cr - cg, sr - sg) +
           w_by * px_absdiff(2 * cb - cr - cg, 2 * sb - sr - sg);
}

/* A saliency value v (0..255) written, or added to the old map pixel's R (saturating): the map
 * pixel is (v, v, v, 255). */
PX_SEM px_rgba px_saliency_pixel(uint32_t v, int accumulate, px_rgba old)
{
    if (accumulate) {
        v += px_ch(old, 0);
        v = v > 255u ? 255u : v;
    }
    return px_pack(v, v, v, 255u);
}

/* ARGMAX's value of a texel: wr*r + wg*g + wb*b + wa*a (at most 4 * 255 * 255). */
PX_SEM uint32_t px_argmax_value(px_rgba p, uint32_t wr, uint32_t wg, uint32_t wb, uint32_t wa)
{
    return wr * px_ch(p, 0) + wg * px_ch(p, 1) + wb * px_ch(p, 2) + wa * px_ch(p, 3);
}

/* The centre of texel x of a level `level_size` texels wide, in Q16 level-0 texel coordinates of
 * a slot `space_size` wide: floor((x + 1/2) * space_size / level_size * 2^16), exact. */
PX_SEM int32_t px_texel_centre_q16(int x, int level_size, int space_size)
{
    return (int32_t)((((int64_t)(2 * x + 1) * (int64_t)space_size) << 15) / (int64_t)level_size);
}

/* Inhibition of return: is the position (X, Y) (Q16) within `radius` texels of the fixation
 * (fx, fy)? Disc test (X-fx)^2 + (Y-fy)^2 <= (radius*2^16)^2 in 64 bits, after a box test that
 * keeps every square below 2^61 (radius <= 16384 is validated). */
PX_SEM int px_inhibited(int32_t X, int32_t Y, int32_t fx, int32_t fy, int radius)
{
    int64_t r = (int64_t)radius << 16, dx = (int64_t)X - fx, dy = (int64_t)Y - fy;
    if (dx > r || dx < -r || dy > r || dy < -r)
        return 0;
    return dx * dx + dy * dy <= r * r;
}

/* ARGMAX's choice between two candidates (value, row-major index): the larger value, and of
 * equal values the smaller index (the first in row-major order). */
PX_SEM int px_argmax_better(uint32_t v, int64_t i, uint32_t best_v, int64_t best_i)
{
    return best_i < 0 || v > best_v || (v == best_v && i < best_i);
}

/* The LOD a sample actually uses, Q8.8: linear clamps it to the last level; nearest rounds it to
 * a level (half up), then clamps. */
PX_SEM int32_t px_lod_used(uint32_t lod, int filter, int levels)
{
    if (filter == PX_MODE_NEAREST)
        return px_lod_nearest(lod, levels) * PX_LOD_ONE;
    uint32_t last = (uint32_t)(levels - 1) * PX_LOD_ONE;
    return (int32_t)(lod < last ? lod : last);
}

/* Token geometry, the 5 int32 a sampling instruction writes for its patch: centre x, y (Q16,
 * after the fixation offset, saturated to 32 bits), steps du, dv (Q16; 0, 0 for GATHER) and the
 * LOD used (Q8.8). A token no instruction writes reads (0, 0, 0, 0, -1). */
#define PX_GEOM_INTS 5
PX_SEM void px_geom_write(int32_t *g, int64_t cx, int64_t cy, int32_t du, int32_t dv, int32_t lod)
{
    g[0] = px_sat32(cx);
    g[1] = px_sat32(cy);
    g[2] = du;
    g[3] = dv;
    g[4] = lod;
}

#if defined(PX_FETCH)
/* SALIENCY at map texel (x, y): the largest px_centre_surround over the level-c texels of the
 * block [x << (map-c), (x+1) << (map-c)) x [y << (map-c), ...) (clipped to level c), each against
 * the level-s texel above it (coordinates >> (s-c), clamped to level s), shifted right by
 * `shift` and capped at 255. */
PX_SEM uint32_t px_saliency_at(PX_SRC_T src, int c, int s, int map, int x, int y, uint32_t w_lum, uint32_t w_rg,
                               uint32_t w_by, int shift)
{
    int k = map - c, d = s - c;
    int wc = PX_LEVEL_W(src, c), hc = PX_LEVEL_H(src, c), ws = PX_LEVEL_W(src, s), hs = PX_LEVEL_H(src, s);
    int x0 = x << k, y0 = y << k, x1 = (x + 1) << k, y1 = (y + 1) << k;
    x1 = x1 < wc ? x1 : wc;
    y1 = y1 < hc ? y1 : hc;
    uint32_t best = 0;
    for (int yc = y0; yc < y1; yc++) {
        int ys = yc >> d;
        ys = ys < hs - 1 ? ys : hs - 1;
        for (int xc = x0; xc < x1; xc++) {
            int xs = xc >> d;
            xs = xs < ws - 1 ? xs : ws - 1;
            uint32_t v = px_centre_surround(PX_FETCH(src, c, xc, yc), PX_FETCH(src, s, xs, ys), w_lum, w_rg, w_by);
            best = v > best ? v : best;
        }
    }
    best >>= shift;
    return best > 255u ? 255u : best;
}
#endif

/* ---- video: tiles, frame differences, footprints ------------------------------------------- */

PX_SEM int px_tiles(int n) { return (n + PX_TILE - 1) >> PX_TILE_SHIFT; }

/* DIFF: the largest per-channel absolute difference of two pixels. */
PX_SEM uint32_t px_maxdiff(px_rgba a, px_rgba b)
{
    uint32_t m = 0;
    for (int c = 0; c < 4; c++) {
        uint32_t d = px_absdiff((int)px_ch(a, c), (int)px_ch(b, c));
        m = d > m ? d : m;
    }
    return m;
}

/* A tile mask pixel: (255, 0, 0, 255) dirty, (0, 0, 0, 255) clean; any R != 0 reads as dirty. */
PX_SEM px_rgba px_mask_pixel(int dirty) { return px_pack(dirty ? 255u : 0u, 0, 0, 255u); }
PX_SEM int px_mask_dirty(px_rgba p) { return (p & 255u) != 0; }

/* DIFF with dirty rectangles: does the rectangle (x, y, w, h) of level-0 texels touch tile
 * (tx, ty)? Empty rectangles touch nothing. */
PX_SEM int px_rect_touches_tile(int32_t x, int32_t y, int32_t w, int32_t h, int tx, int ty)
{
    int64_t x0 = (int64_t)tx * PX_TILE, y0 = (int64_t)ty * PX_TILE;
    return w > 0 && h > 0 && x < x0 + PX_TILE && x0 < (int64_t)x + w && y < y0 + PX_TILE && y0 < (int64_t)y + h;
}

/* A rectangle of tiles, inclusive; empty when x0 > x1 or y0 > y1. */
typedef struct px_tilebox {
    int x0, y0, x1, y1;
} px_tilebox;

/* Incremental PYRAMID: the tiles under texel (x, y) of level l >= 1 of a w x h slot: its level-0
 * footprint [x << l, (x+1) << l) x [y << l, (y+1) << l), clipped to the slot. */
PX_SEM px_tilebox px_texel_tiles(int x, int y, int level, int w, int h)
{
    int64_t x1 = (((int64_t)x + 1) << level) - 1, y1 = (((int64_t)y + 1) << level) - 1;
    px_tilebox b;
    b.x0 = (int)(((int64_t)x << level) >> PX_TILE_SHIFT);
    b.y0 = (int)(((int64_t)y << level) >> PX_TILE_SHIFT);
    b.x1 = (int)((x1 < w - 1 ? x1 : w - 1) >> PX_TILE_SHIFT);
    b.y1 = (int)((y1 < h - 1 ? y1 : h - 1) >> PX_TILE_SHIFT);
    return b;
}

/* The texels of level `level` (size texels) that samples at positions lo..hi (Q16, lo <= hi) read,
 * [*t0, *t1]: linear reads i0 and i0 + 1 of px_linear_axis, nearest px_nearest_axis (both
 * monotonic in the position, so the ends of the range bound every position between). */
PX_SEM void px_texel_range(int64_t lo, int64_t hi, int level, int size, int filter, int *t0, int *t1)
{
    if (filter == PX_MODE_NEAREST) {
        *t0 = px_nearest_axis(lo, level, size);
        *t1 = px_nearest_axis(hi, level, size);
        return;
    }
    int a0, a1, b0, b1;
    uint32_t f;
    px_linear_axis(lo, level, size, &a0, &a1, &f);
    px_linear_axis(hi, level, size, &b0, &b1, &f);
    *t0 = a0;
    *t1 = b1;
}

/* One axis of px_footprint_tiles below (its box is separable): the tiles [*t0, *t1] along an
 * axis of `size` level-0 texels that positions lo..hi read at levels lmin..lmax (lmin <= lmax <
 * the chain's levels), each level's texels widened to their level-0 footprint as px_texel_tiles
 * does. */
PX_SEM void px_footprint_axis(int64_t lo, int64_t hi, int lmin, int lmax, int filter, int size, int *t0, int *t1)
{
    *t0 = 1 << 30, *t1 = -1;
    for (int l = lmin; l <= lmax; l++) {
        int a, b;
        px_texel_range(lo, hi, l, px_mip_dim(size, l), filter, &a, &b);
        int64_t e = (((int64_t)b + 1) << l) - 1;
        int ta = (int)(((int64_t)a << l) >> PX_TILE_SHIFT), tb = (int)((e < size - 1 ? e : size - 1) >> PX_TILE_SHIFT);
        *t0 = ta < *t0 ? ta : *t0;
        *t1 = tb > *t1 ? tb : *t1;
    }
}

/* The levels lmin..lmax a footprint reads, clamped to a w x h source's chain (lmax below its
 * levels, lmin <= lmax). */
PX_SEM void px_footprint_levels(int w, int h, int *lmin, int *lmax)
{
    int levels = px_mip_levels(w, h);
    *lmax = *lmax < levels - 1 ? *lmax : levels - 1;
    *lmin = *lmin < *lmax ? *lmin : *lmax;
}

/* Incremental sampling: the tiles of a w x h source (level 0) that samples at positions in
 * [u_lo, u_hi] x [v_lo, v_hi] read at levels lmin..lmax (clamped to the chain): per level the
 * texels read (px_texel_range), their level-0 footprints, the bounding box of all of them. A
 * conservative box: it holds every tile whose pixels can reach an output. */
PX_SEM px_tilebox px_footprint_tiles(int64_t u_lo, int64_t u_hi, int64_t v_lo, int64_t v_hi, int lmin, int lmax,
                                     int filter, int w, int h)
{
    px_footprint_levels(w, h, &lmin, &lmax);
    px_tilebox b;
    px_footprint_axis(u_lo, u_hi, lmin, lmax, filter, w, &b.x0, &b.x1);
    px_footprint_axis(v_lo, v_hi, lmin, lmax, filter, h, &b.y0, &b.y1);
    return b;
}

/* The levels a LOD reads: nearest its rounded level; linear l0, and l0 + 1 when the fraction is
 * not 0 (px_sample_acc reads only l0 then). */
PX_SEM void px_lod_levels(uint32_t lod, int filter, int levels, int *lmin, int *lmax)
{
    if (filter == PX_MODE_NEAREST) {
        *lmin = *lmax = px_lod_nearest(lod, levels);
        return;
    }
    int l0, l1;
    uint32_t f;
    px_lod_split(lod, levels, &l0, &l1, &f);
    *lmin = l0;
    *lmax = f ? l1 : l0;
}

/* The positions a SAMPLE or ANISO patch reads along one axis, before the fixation offset: the
 * patch's first and last output pixel, widened by the first and last tap. */
PX_SEM void px_patch_span(int32_t c, int32_t d, int n, int taps, int32_t td, int64_t *lo, int64_t *hi)
{
    int64_t a = c + px_patch_pos(0, d, 0, n), b = c + px_patch_pos(0, d, n - 1, n);
    int64_t ta = px_floor_shift((int64_t)(1 - taps) * (int64_t)td, 1), tb = px_floor_shift((int64_t)(taps - 1) * (int64_t)td, 1);
    *lo = (a < b ? a : b) + (ta < tb ? ta : tb);
    *hi = (a < b ? b : a) + (ta < tb ? tb : ta);
}

/* A GATHER table entry is 3 pixels: u (Q16, u32 pixel), v (Q16, u32 pixel), then LOD (u16 in
 * R,G; B = A = 0). These decode it from the three px_rgba values. */
PX_SEM int32_t px_entry_q16(px_rgba p) { return p < 0x80000000u ? (int32_t)p : -(int32_t)(~p) - 1; }
PX_SEM uint32_t px_entry_lod(px_rgba p) { return p & 0xFFFFu; }

/* ---- any-size inputs: resolution at a bound size (SPEC "Any-size inputs") ------------------- */

/* floor(a / b) for b > 0, exact for negative a. */
PX_SEM int64_t px_floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

/* A Q16 position or step written for a side of n0 texels, rescaled to a side of n:
 * floor((2*q*n + n0) / (2*n0)), q * n / n0 rounded half up (negative q too). |q| < 2^31 and
 * n, n0 <= 65535, so every term fits int64; the caller checks that the result fits int32. */
PX_SEM int64_t px_scale_q16(int32_t q, int n, int n0)
{
    return px_floor_div(2 * (int64_t)q * (int64_t)n + (int64_t)n0, 2 * (int64_t)n0);
}

/* floor(256 * log2(n)) for n in 1..65535, exactly: e = floor(log2 n), X = n << (32 - e) in
 * [2^32, 2^33), m the largest 0..255 with PX_LOG2_T[m] <= X, where PX_LOG2_T[m] =
 * ceil(2^(32 + m/256)) (isa/gen_log2_table.py writes and checks the table); 256*e + m. */
PX_SEM int px_log2_q8(int n)
{
    static const uint64_t PX_LOG2_T[256] = {
        0x100000000ull, 0x100b1afa6ull, 0x10163daa0ull, 0x102168144ull,
        0x102c9a3e8ull, 0x1037d42e2ull, 0x104315e87ull, 0x104e5f730ull,
        0x1059b0d32ull, 0x10650a0e4ull, 0x10706b29eull, 0x107bd42b8ull,
        0x108745188ull, 0x1092bdf67ull, 0x109e3ecadull, 0x10a9c79b2ull,
        0x10b5586d0ull, 0x10c0f145full, 0x10cc922b8ull, 0x10d83b234ull,
        0x10e3ec32eull, 0x10efa55feull, 0x10fb66b00ull, 0x11073028eull,
        0x111301d02ull, 0x111edbab6ull, 0x112abdc07ull, 0x1136a8150ull,
        0x11429aaebull, 0x114e95935ull, 0x115a98c8bull, 0x1166a4548ull,
        0x1172b83c8ull, 0x117ed486aull, 0x118af9389ull, 0x119726584ull,
        0x11a35beb7ull, 0x11af99f82ull, 0x11bbe0841ull, 0x11c82f953ull,
        0x11d487317ull, 0x11e0e75ecull, 0x11ed50230ull, 0x11f9c1844ull,
        0x12063b887ull, 0x1212be358ull, 0x121f49918ull, 0x122bdda28ull,
        0x12387a6e8ull, 0x12451ffb9ull, 0x1251ce4fcull, 0x125e85712ull,
        0x126b4565full, 0x12780e342ull, 0x1284dfe20ull, 0x1291ba75aull,
        0x129e9df52ull, 0x12ab8a66eull, 0x12b87fd0eull, 0x12c57e398ull,
        0x12d285a6full, 0x12df961f7ull, 0x12ecafa94ull, 0x12f9d24acull,
        0x1306fe0a4ull, 0x131432edfull, 0x132170fc5ull, 0x132eb83bbull,
        0x133c08b27ull, 0x13496266full, 0x1356c55faull, 0x136431a2eull,
        0x1371a7374ull, 0x137f26232ull, 0x138cae6d1ull, 0x139a401b8ull,
        0x13a7db34full, 0x13b57fbffull, 0x13c32dc32ull, 0x13d0e544full,
        0x13dea64c2ull, 0x13ec70df2ull, 0x13fa4504bull, 0x140822c37ull,
        0x14160a220ull, 0x1423fb271ull, 0x1431f5d96ull, 0x143ffa3f9ull,
        0x144e08607ull, 0x145c2042bull, 0x146a41ed2ull, 0x14786d669ull,
        0x1486a2b5dull, 0x1494e1e1aull, 0x14a32af0eull, 0x14b17dea7ull,
        0x14bfdad54ull, 0x14ce41b82ull, 0x14dcb29a0ull, 0x14eb2d81eull,
        0x14f9b276aull, 0x1508417f5ull, 0x1516daa2dull, 0x15257de84ull,
        0x15342b56aull, 0x1542e2f50ull, 0x1551a4ca6ull, 0x156070ddfull,
        0x156f4736cull, 0x157e27dbfull, 0x158d12d4aull, 0x159c08280ull,
        0x15ab07dd5ull, 0x15ba11fbbull, 0x15c9268a6ull, 0x15d84590aull,
        0x15e76f15bull, 0x15f6a320eull, 0x1605e1b98ull, 0x16152ae6dull,
        0x16247eb04ull, 0x1633dd1d2ull, 0x16434634dull, 0x1652b9fecull,
        0x166238826ull, 0x1671c1c71ull, 0x168155d45ull, 0x1690f4b1aull,
        0x16a09e668ull, 0x16b052fa8ull, 0x16c012751ull, 0x16cfdcddeull,
        0x16dfb23c7ull, 0x16ef92986ull, 0x16ff7df96ull, 0x170f74670ull,
        0x171f75e8full, 0x172f8286full, 0x173f9a48bull, 0x174fbd35eull,
        0x175feb565ull, 0x177024b1bull, 0x1780694feull, 0x1790b938bull,
        0x17a11473full, 0x17b17b098ull, 0x17c1ed014ull, 0x17d26a630ull,
        0x17e2f336dull, 0x17f38784aull, 0x180427544ull, 0x1814d2adeull,
        0x182589995ull, 0x18364c1ecull, 0x18471a463ull, 0x1857f417aull,
        0x1868d99b5ull, 0x1879cad94ull, 0x188ac7d99ull, 0x189bd0a48ull,
        0x18ace5423ull, 0x18be05baeull, 0x18cf3216cull, 0x18e06a5e1ull,
        0x18f1ae992ull, 0x1902fed03ull, 0x19145b0baull, 0x1925c353bull,
        0x193737b0dull, 0x1948b82b6ull, 0x195a44cbdull, 0x196bdd9a8ull,
        0x197d829feull, 0x198f33e48ull, 0x19a0f170dull, 0x19b2bb4d6ull,
        0x19c49182bull, 0x19d674195ull, 0x19e86319full, 0x19fa5e8d1ull,
        0x1a0c667b6ull, 0x1a1e7aed9ull, 0x1a309bec5ull, 0x1a42c9805ull,
        0x1a5503b24ull, 0x1a674a8b0ull, 0x1a799e134ull, 0x1a8bfe53dull,
        0x1a9e6b558ull, 0x1ab0e5214ull, 0x1ac36bbfeull, 0x1ad5ff3a4ull,
        0x1ae89f996ull, 0x1afb4ce63ull, 0x1b0e07299ull, 0x1b20ce6caull,
        0x1b33a2b85ull, 0x1b468415cull, 0x1b59728dfull, 0x1b6c6e2a0ull,
        0x1b7f76f30ull, 0x1b928cf23ull, 0x1ba5b030bull, 0x1bb8e0b7aull,
        0x1bcc1e905ull, 0x1bdf69c40ull, 0x1bf2c25beull, 0x1c0628615ull,
        0x1c199bdd9ull, 0x1c2d1cda0ull, 0x1c40ab600ull, 0x1c5447790ull,
        0x1c67f12e6ull, 0x1c7ba8899ull, 0x1c8f6d941ull, 0x1ca340576ull,
        0x1cb720dcfull, 0x1ccb0f2e7ull, 0x1cdf0b556ull, 0x1cf3155b6ull,
        0x1d072d4a1ull, 0x1d1b532b1ull, 0x1d2f87081ull, 0x1d43c8eadull,
        0x1d5818dd0ull, 0x1d6c76e87ull, 0x1d80e316dull, 0x1d955d720ull,
        0x1da9e603eull, 0x1dbe7cd64ull, 0x1dd321f31ull, 0x1de7d5642ull,
        0x1dfc97338ull, 0x1e11676b2ull, 0x1e2646150ull, 0x1e3b333b2ull,
        0x1e502ee79ull, 0x1e6539247ull, 0x1e7a51fbdull, 0x1e8f7977dull,
        0x1ea4afa2bull, 0x1eb9f4868ull, 0x1ecf482d9ull, 0x1ee4aaa22ull,
        0x1efa1bee7ull, 0x1f0f9c1ccull, 0x1f252b377ull, 0x1f3ac948eull,
        0x1f50765b7ull, 0x1f6632799ull, 0x1f7bfdadaull, 0x1f91d8023ull,
        0x1fa7c181aull, 0x1fbdba36aull, 0x1fd3c22b9ull, 0x1fe9d96b3ull,
    };
    int e = 0;
    while ((n >> (e + 1)) > 0)
        e++;
    uint64_t x = (uint64_t)(uint32_t)n << (32 - e);
    int lo = 0, hi = 255; /* PX_LOG2_T[0] = 2^32 <= x: the answer is in lo..hi */
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (PX_LOG2_T[mid] <= x)
            lo = mid;
        else
            hi = mid - 1;
    }
    return 256 * e + lo;
}

/* The LOD change of an any-size source bound at w x h, written for w0 x h0: the larger of the
 * two sides' changes of floor(256 log2 side), Q8.8 (negative when the image is smaller). */
PX_SEM int px_lod_shift(int w, int h, int w0, int h0)
{
    int dx = px_log2_q8(w) - px_log2_q8(w0), dy = px_log2_q8(h) - px_log2_q8(h0);
    return dx > dy ? dx : dy;
}

/* ---- EMBED: requantization of an int32 accumulator (SPEC "EMBED") ---------------------------- */
/* TFLite's per-channel rule (gemmlowp's fixedpoint.h), that of TFLite's int8 kernels:
 * real scale = multiplier * 2^(shift - 31), multiplier 0..2^31-1, shift -31..30. */
#define PX_EMBED_MODE_I32 0
#define PX_EMBED_MODE_I8 1
#define PX_EMBED_MODE_BF16 2
#define PX_EMBED_SHIFT_MIN (-31)
#define PX_EMBED_SHIFT_MAX 30
#define PX_EMBED_TERM_MAX (255 * 128) /* the largest |(token - zero_point) * weight| */

/* The bytes one output value takes in a row of dst, per mode. */
PX_SEM int px_embed_out_bytes(int mode) { return mode == PX_EMBED_MODE_I32 ? 4 : (mode == PX_EMBED_MODE_I8 ? 1 : 2); }

/* What one EMBED holds besides the slots, per item (SPEC V-EMBED-13), counted against max_memory
 * with the slots and every RESIZE's need: its weights padded to kb = K rounded up to 128 bytes a
 * row, dp = d rounded up to 128 rows, 20 bytes of parameters per row, and 3 copies of the count
 * rounded up to 6 of staged tokens of kb bytes. A bound on both executors' buffers (the CPU pack
 * and a run's token blocks, executors/cpu/embed.c; the CUDA-GL executor's, embed.cu), not their
 * exact sum, so that they accept and refuse the same programs. k, d, count >= 0. */
PX_SEM uint64_t px_embed_need(int64_t k, int64_t d, int64_t count)
{
    uint64_t kb = ((uint64_t)k + 127u) / 128u * 128u, dp = ((uint64_t)d + 127u) / 128u * 128u;
    uint64_t c6 = ((uint64_t)count + 5u) / 6u * 6u;
    return (dp + 3u * c6) * kb + 20u * dp;
}

/* gemmlowp SaturatingRoundingDoublingHighMul: round(a * b / 2^31), halves up (toward +inf),
 * saturating the one overflow (a = b = INT32_MIN). C's `/` truncates toward zero, as gemmlowp's. */
PX_SEM int32_t px_srdhm(int32_t a, int32_t b)
{
    if (a == INT32_MIN && b == INT32_MIN)
        return INT32_MAX;
    int64_t ab = (int64_t)a * (int64_t)b;
    int64_t nudge = ab >= 0 ? (1LL << 30) : 1 - (1LL << 30);
    return (int32_t)((ab + nudge) / (1LL << 31));
}

/* gemmlowp RoundingDivideByPOT: x / 2^e rounded to nearest, halves away from zero, e 0..31. */
PX_SEM int32_t px_rdbpot(int32_t x, int e)
{
    int64_t mask = (1LL << e) - 1, rem = (int64_t)x & mask;
    int64_t threshold = (mask >> 1) + (x < 0 ? 1 : 0);
    return (int32_t)(px_floor_shift(x, e) + (rem > threshold ? 1 : 0));
}

/* TFLite MultiplyByQuantizedMultiplier, then the output zero point and int8's range. The
 * validator guarantees acc * 2^max(shift, 0) fits int32 (SPEC V-EMBED-12). */
PX_SEM int32_t px_embed_requant_i8(int32_t acc, int32_t multiplier, int shift, int out_zero)
{
    int left = shift > 0 ? shift : 0, right = shift > 0 ? 0 : -shift;
    int32_t v = px_rdbpot(px_srdhm((int32_t)((int64_t)acc * (1LL << left)), multiplier), right) + out_zero;
    return v < -128 ? -128 : (v > 127 ? 127 : v);
}

/* bf16 bits of acc * multiplier * 2^(shift - 31), rounded once, to nearest even, in integers:
 * |acc * multiplier| < 2^62, so the exponent stays in bf16's normal range (no subnormal, no
 * infinity) for every shift -31..30. */
PX_SEM uint32_t px_embed_bf16(int32_t acc, int32_t multiplier, int shift)
{
    int64_t v = (int64_t)acc * (int64_t)multiplier;
#if defined(__CUDA_ARCH__)
    /* The same integer rounding, done by the conversion unit: v to binary32 toward zero, plus a
     * sticky 1 in its last bit when that dropped anything (rounding to odd), then to 8 significant
     * bits to nearest even. Rounding to odd at 24 >= 8 + 2 bits and then to nearest at 8 rounds
     * as once to nearest at 8 (Boldo and Melquiond, "When double rounding is odd", 2005), and
     * both conversions are exact IEEE operations: the bits of the loop below, in fewer steps. */
    float f = __ll2float_rz((long long)v);
    uint32_t b = __float_as_uint(f) | (__float2ll_rz(f) != (long long)v ? 1u : 0u);
    b = (b + 0x7FFFu + (b >> 16 & 1u)) >> 16;
    return f != 0.0f ? (uint32_t)((int32_t)b + (shift - 31) * 128) : 0u; /* v != 0: |v| >= 1 converts to >= 1 */
#else
    if (v == 0)
        return 0;
#endif
    uint32_t sign = v < 0 ? 0x8000u : 0u;
    uint64_t a = v < 0 ? (uint64_t)(-v) : (uint64_t)v, q;
    int n; /* the index of the highest set bit of a (a != 0) */
#if defined(__CUDA_ARCH__)
    n = 63 - __clzll((long long)a);
#elif defined(__GNUC__)
    n = 63 - __builtin_clzll(a);
#else
    for (n = 63; !(a >> n & 1u); n--)
        ;
#endif
    if (n > 7) { /* keep 8 significant bits, round the rest to nearest even */
        int r = n - 7; /* 1 .. 54: the dropped bits, moved to the top, against the half there */
        uint64_t rem = a << (64 - r), half = 1ull << 63;
        q = a >> r;
        if (rem > half || (rem == half && (q & 1u)))
            q++;
        if (q == 256u) {
            q = 128u;
            n++;
        }
    } else {
        q = a << (7 - n);
    }
    uint32_t biased = (uint32_t)(n + shift - 31 + 127);
    return sign | biased << 7 | (uint32_t)(q & 127u);
}

/* One output value of EMBED, as the little-endian bytes dst holds (mode's px_embed_out_bytes). */
PX_SEM uint32_t px_embed_out(int mode, int32_t acc, int32_t multiplier, int shift, int out_zero)
{
    if (mode == PX_EMBED_MODE_I32)
        return (uint32_t)acc;
    if (mode == PX_EMBED_MODE_I8)
        return (uint32_t)px_embed_requant_i8(acc, multiplier, shift, out_zero) & 255u;
    return px_embed_bf16(acc, multiplier, shift);
}

#endif
