/* px_resize.h - the integer rule of RESIZE, one output sample at a time, written once.
 *
 * RESIZE is byte-identical to Pillow's Image.resize (libImaging/Resample.c, checked against
 * Pillow 9.4) on 8-bit channels, each channel on its own. Its floating-point part, the filter
 * tables, runs once on the host when a program is bound (vm/resize.c: px_resize_coeffs); what
 * runs per pixel is the integer arithmetic below, compiled by gcc for the CPU executor and by nvcc
 * for the CUDA-GL kernels (static inline, `__host__ __device__` under nvcc through PX_SEM), so both
 * executors give the same bytes from the same tables. isa/SPEC.md (RESIZE) states the rule for users.
 *
 * A table gives, for each output index i along one axis, a run of source indices
 * first[i] .. first[i] + count[i] - 1 and as many coefficients in Q22 (PX_RESIZE_PREC bits:
 * 32 - 8 - 2, Pillow's PRECISION_BITS), int32, summing to about 1 << 22.
 */
#ifndef PX_RESIZE_H
#define PX_RESIZE_H

#include <stdint.h>

#include "px_sem.h"

#define PX_RESIZE_PREC 22
#define PX_RESIZE_HALF (1u << (PX_RESIZE_PREC - 1)) /* Pillow's ss0 start value: rounds half up */

/* The end of one sample's sum: acc (started at PX_RESIZE_HALF, each tap added mod 2^32) read as
 * a signed int, shifted right by 22 (floor) and clamped to 0..255. The CUDA-GL pass that reads
 * its source through a texture sums the four channels of a texel at once and ends each with this. */
PX_SEM uint32_t px_resize_clamp(uint32_t acc)
{
    if (acc & 0x80000000u)
        return 0u;
    acc >>= PX_RESIZE_PREC;
    return acc > 255u ? 255u : acc;
}

/* One term of a sample's sum: acc + v * k modulo 2^32, the int product and sum of Pillow. A sum
 * modulo 2^32 does not depend on the order of its terms, so a pass may add them in any order
 * (the CPU's streamed vertical pass adds each source row to every output row open on it, then
 * ends each with px_resize_clamp) and still give px_resize_tap's bytes. */
PX_SEM uint32_t px_resize_mac(uint32_t acc, uint32_t v, uint32_t k)
{
    return acc + v * k;
}

/* One 8-bit output sample of a separable pass: sum of src[(first + j) * stride] * k[j] for
 * j < count, plus one half, divided by 2^22 rounding down, clamped to 0..255.
 *
 * Pillow accumulates in a 32-bit `int` (starting from 1 << 21) and clamps with a lookup of
 * sum >> 22 (an arithmetic shift, so floor) over -640..639. The accumulator here is uint32_t: it
 * wraps exactly as a two's-complement int does, without signed overflow, and a wrapped value is
 * read back as signed through its top bit: a sum with bit 31 set is negative and clamps to 0, any
 * other is sum >> 22 clamped to 255. With Pillow's tables the sum stays inside int32 (the
 * positive coefficients of a run add up to less than 2 x 2^22, tests/unit/test_resize.c checks
 * it over its sweep), so the wrap is only there to mirror Pillow if a table ever did overflow. */
PX_SEM uint32_t px_resize_tap(const uint8_t *src, int64_t stride, int32_t first, int32_t count, const int32_t *k)
{
    uint32_t acc = PX_RESIZE_HALF;
    const uint8_t *p = src + (int64_t)first * stride;
    for (int32_t j = 0; j < count; j++, p += stride)
        acc = px_resize_mac(acc, *p, (uint32_t)k[j]);
    return px_resize_clamp(acc);
}

/* NEAREST: output texel (x, y) copies source texel (xi[x], yi[y]) (vm/resize.c computes the
 * indices as Pillow's affine scale does, in double); an index of -1 stands for a texel Pillow
 * leaves at its fill value 0 (a source position outside the image, which does not happen for
 * sides up to 2^24 but is kept so that the rule is total). `src` is the channel's first byte,
 * `px_stride` and `row_stride` the distances of neighbouring texels and rows in bytes. */
PX_SEM uint32_t px_resize_nearest(const uint8_t *src, int64_t px_stride, int64_t row_stride, int32_t xi, int32_t yi)
{
    return xi < 0 || yi < 0 ? 0u : src[(int64_t)yi * row_stride + (int64_t)xi * px_stride];
}

/* RESIZE's fit rule: where the resized source goes inside a W x H rectangle. fit 0 (stretch):
 * all of it, nw x nh = W x H at (0, 0). fit 1: the largest nw x nh with the source's aspect
 * (sw x sh), rounded half up in exact integers, at least 1, centred (offsets rounded down):
 *   sw*H > sh*W (wider):  nw = W, nh = max(1, (2*sh*W + sw) div (2*sw))
 *   sw*H < sh*W (taller): nh = H, nw = max(1, (2*sw*H + sh) div (2*sh))
 *   otherwise:            nw = W, nh = H
 *   ox = (W - nw) div 2,  oy = (H - nh) div 2 */
PX_SEM void px_resize_fit(int sw, int sh, int W, int H, int fit, int *nw, int *nh, int *ox, int *oy)
{
    int64_t a = (int64_t)sw * H, b = (int64_t)sh * W;
    *nw = W, *nh = H;
    if (fit && a > b) {
        int64_t n = (2 * (int64_t)sh * W + sw) / (2 * (int64_t)sw);
        *nh = n < 1 ? 1 : (int)n;
    } else if (fit && a < b) {
        int64_t n = (2 * (int64_t)sw * H + sh) / (2 * (int64_t)sh);
        *nw = n < 1 ? 1 : (int)n;
    }
    *ox = (W - *nw) / 2;
    *oy = (H - *nh) / 2;
}

#endif
