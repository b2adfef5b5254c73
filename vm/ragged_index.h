/* ragged_index.h - where a ragged batch writes each value (include/pxvm.h, pxvm_ragged: merge and
 * temporal), the index maths both executors run: compiled by gcc for the CPU (vm/ragged.c) and by
 * nvcc for the CUDA-GL kernel (executors/cuda_gl/ragged.cu, `__host__ __device__` there), so the
 * two cannot disagree on an order. Plain C: no allocation, no error, every index fits int64. */
#ifndef PX_RAGGED_INDEX_H
#define PX_RAGGED_INDEX_H

#include <stddef.h>
#include <stdint.h>

#if defined(__CUDACC__)
#define PX_RAGGED_IX static inline __host__ __device__
#else
#define PX_RAGGED_IX static inline
#endif

/* The token of tile (tx, ty) of an image of gw tiles a row, within its item. merge <= 1:
 * row-major, ty * gw + tx. merge m >= 2 (gw a multiple of m): Qwen2-VL's order, windows of m x m
 * tiles row-major, the tiles of a window row-major: ((ty/m) * (gw/m) + tx/m) * m*m + (ty%m) * m + tx%m. */
PX_RAGGED_IX int64_t px_ragged_token(int tx, int ty, int gw, int merge)
{
    if (merge <= 1)
        return (int64_t)ty * gw + tx;
    int64_t m = merge, window = (int64_t)(ty / merge) * (gw / merge) + tx / merge;
    return window * m * m + (int64_t)(ty % merge) * m + tx % merge;
}

/* The value of channel c, frame f, texel (q, r) (column, row) inside a token of T frames of
 * p x p texels and C channels, counted in values from the token's first: planar (NCHW, FLAT)
 * [C][T][p][p] (Qwen2-VL's flattening of (C, T, p, p)), else interleaved (NHWC, and RGBA8 tiles
 * with C = 4 bytes) [T][p][p][C]. T = 1 gives the layouts of single frames. */
PX_RAGGED_IX size_t px_ragged_value(int c, int f, int q, int r, int p, int T, int C, int planar)
{
    size_t pp = (size_t)p * (size_t)p, k = (size_t)r * (size_t)p + (size_t)q;
    if (planar)
        return ((size_t)c * (size_t)T + (size_t)f) * pp + k;
    return ((size_t)f * pp + k) * (size_t)C + (size_t)c;
}

#endif
