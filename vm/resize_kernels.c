/* resize_kernels.c - the hot loops of RESIZE on the host (px_resize_tile, vm/resize.c), twice:
 * portable C, and AVX2 intrinsics chosen at run time where the CPU has them (resize.h:
 * px_resize_isa). Both compute every sample with the integer rule of isa/px_resize.h: products
 * and sums modulo 2^32 (vpmulld and vpaddd are exactly that, and such a sum does not depend on the
 * order of its terms), then the clamp: an arithmetic shift by 22 and two saturating packs (int32
 * -> int16 -> uint8) are px_resize_clamp (a negative sum gives 0, a sum past 255 << 22 gives 255).
 * So the two give the same bytes; tests/unit/test_resize_kernels.c runs both over edge widths. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "../isa/px_resize.h"
#include "resize.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define PX__HAVE_AVX2 1
#include <immintrin.h>
#endif

/* ---- portable --------------------------------------------------------------------------------- */

/* Output texels x0 .. x1-1 of one row of 4-channel texels s (tx: the horizontal table), into t:
 * the four channels of a texel summed together, one coefficient read per tap. */
static void px__hrow4_c(const uint8_t *s, const px_resize_table *tx, int x0, int x1, uint8_t *t)
{
    for (int x = x0; x < x1; x++, t += 4) {
        const uint8_t *p = s + (int64_t)tx->first[x] * 4;
        const int32_t *k = tx->k + (size_t)x * (size_t)tx->ksize;
        uint32_t a0 = PX_RESIZE_HALF, a1 = PX_RESIZE_HALF, a2 = PX_RESIZE_HALF, a3 = PX_RESIZE_HALF;
        for (int32_t j = 0, n = tx->count[x]; j < n; j++, p += 4) {
            uint32_t kj = (uint32_t)k[j];
            a0 = px_resize_mac(a0, p[0], kj), a1 = px_resize_mac(a1, p[1], kj);
            a2 = px_resize_mac(a2, p[2], kj), a3 = px_resize_mac(a3, p[3], kj);
        }
        t[0] = (uint8_t)px_resize_clamp(a0), t[1] = (uint8_t)px_resize_clamp(a1);
        t[2] = (uint8_t)px_resize_clamp(a2), t[3] = (uint8_t)px_resize_clamp(a3);
    }
}

/* The same for 3-channel texels (RGB). */
static void px__hrow3_c(const uint8_t *s, const px_resize_table *tx, int x0, int x1, uint8_t *t)
{
    for (int x = x0; x < x1; x++, t += 3) {
        const uint8_t *p = s + (int64_t)tx->first[x] * 3;
        const int32_t *k = tx->k + (size_t)x * (size_t)tx->ksize;
        uint32_t a0 = PX_RESIZE_HALF, a1 = PX_RESIZE_HALF, a2 = PX_RESIZE_HALF;
        for (int32_t j = 0, n = tx->count[x]; j < n; j++, p += 3) {
            uint32_t kj = (uint32_t)k[j];
            a0 = px_resize_mac(a0, p[0], kj), a1 = px_resize_mac(a1, p[1], kj), a2 = px_resize_mac(a2, p[2], kj);
        }
        t[0] = (uint8_t)px_resize_clamp(a0), t[1] = (uint8_t)px_resize_clamp(a1), t[2] = (uint8_t)px_resize_clamp(a2);
    }
}

/* d[i] for i < n: the sample of the column at t + i over count rows `stride` bytes apart. Sixteen
 * columns at a time, row by row (the form the vectorizer takes), the rest one by one. */
static void px__vrow_c(const uint8_t *t, int64_t stride, int count, const int32_t *k, uint8_t *d, size_t n)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        uint32_t acc[16];
        for (int b = 0; b < 16; b++)
            acc[b] = PX_RESIZE_HALF;
        const uint8_t *r = t + i;
        for (int j = 0; j < count; j++, r += stride)
            for (int b = 0; b < 16; b++)
                acc[b] = px_resize_mac(acc[b], r[b], (uint32_t)k[j]);
        for (int b = 0; b < 16; b++)
            d[i + (size_t)b] = (uint8_t)px_resize_clamp(acc[b]);
    }
    for (; i < n; i++)
        d[i] = (uint8_t)px_resize_tap(t + i, stride, 0, count, k);
}

static void px__vmac_c(uint32_t *a, const uint8_t *t, uint32_t k, size_t n)
{
    for (size_t i = 0; i < n; i++)
        a[i] = px_resize_mac(a[i], t[i], k);
}

static void px__vclamp_c(const uint32_t *a, uint8_t *d, size_t n)
{
    for (size_t i = 0; i < n; i++)
        d[i] = (uint8_t)px_resize_clamp(a[i]);
}

static const px_resize_kernels px__portable = {"portable", px__hrow4_c, px__hrow3_c, px__vrow_c, px__vmac_c, px__vclamp_c};

/* ---- AVX2 ------------------------------------------------------------------------------------- */

#ifdef PX__HAVE_AVX2
#define PX__AVX2 __attribute__((target("avx2")))

/* px_resize_clamp of four sums, as four bytes in the low 32 bits. */
PX__AVX2 static inline __m128i px__clamp4(__m128i a)
{
    a = _mm_srai_epi32(a, PX_RESIZE_PREC);
    a = _mm_packs_epi32(a, a);
    return _mm_packus_epi16(a, a);
}

PX__AVX2 static inline __m128i px__load4(const uint8_t *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return _mm_cvtsi32_si128(v);
}

/* Four texels of a run (v: their 16 bytes, RGBA or RGB spread to RGB0) times their four
 * coefficients (kk), two texels into each accumulator. */
PX__AVX2 static inline void px__taps4(__m128i v, __m128i k4, __m256i *acc0, __m256i *acc1)
{
    const __m256i lo = _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1), hi = _mm256_setr_epi32(2, 2, 2, 2, 3, 3, 3, 3);
    __m256i kk = _mm256_castsi128_si256(k4);
    *acc0 = _mm256_add_epi32(*acc0, _mm256_mullo_epi32(_mm256_cvtepu8_epi32(v), _mm256_permutevar8x32_epi32(kk, lo)));
    *acc1 = _mm256_add_epi32(*acc1, _mm256_mullo_epi32(_mm256_cvtepu8_epi32(_mm_srli_si128(v, 8)),
                                                       _mm256_permutevar8x32_epi32(kk, hi)));
}

/* Two texels (v: their 8 bytes in the low half, RGBA or RGB0) times their two coefficients. */
PX__AVX2 static inline __m256i px__taps2(__m128i v, const int32_t *k, __m256i acc)
{
    const __m256i lo = _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1);
    __m256i kk = _mm256_castsi128_si256(_mm_loadl_epi64((const __m128i *)(const void *)k));
    return _mm256_add_epi32(acc, _mm256_mullo_epi32(_mm256_cvtepu8_epi32(v), _mm256_permutevar8x32_epi32(kk, lo)));
}

/* A run's taps four at a time, then two, then the last one alone (padding them to four with zero
 * coefficients measured slower: runs are short). */
PX__AVX2 static void px__hrow4_avx2(const uint8_t *s, const px_resize_table *tx, int x0, int x1, uint8_t *t)
{
    for (int x = x0; x < x1; x++, t += 4) {
        const uint8_t *p = s + (int64_t)tx->first[x] * 4;
        const int32_t *k = tx->k + (size_t)x * (size_t)tx->ksize;
        int n = tx->count[x], j = 0;
        __m256i acc0 = _mm256_setzero_si256(), acc1 = _mm256_setzero_si256();
        for (; j + 4 <= n; j += 4)
            px__taps4(_mm_loadu_si128((const __m128i *)(const void *)(p + 4 * j)),
                      _mm_loadu_si128((const __m128i *)(const void *)(k + j)), &acc0, &acc1);
        if (j + 2 <= n) {
            acc1 = px__taps2(_mm_loadl_epi64((const __m128i *)(const void *)(p + 4 * j)), k + j, acc1);
            j += 2;
        }
        acc0 = _mm256_add_epi32(acc0, acc1);
        __m128i a = _mm_add_epi32(_mm256_castsi256_si128(acc0), _mm256_extracti128_si256(acc0, 1));
        a = _mm_add_epi32(a, _mm_set1_epi32((int)PX_RESIZE_HALF));
        for (; j < n; j++)
            a = _mm_add_epi32(a, _mm_mullo_epi32(_mm_cvtepu8_epi32(px__load4(p + 4 * j)), _mm_set1_epi32(k[j])));
        int32_t o = _mm_cvtsi128_si32(px__clamp4(a));
        memcpy(t, &o, 4);
    }
}

/* RGB: four texels (12 bytes) spread to the lanes of four RGBA ones with 0 in A, read 16 bytes at
 * a time only while those 16 lie inside the row (tx->in_size texels); the other taps one by one. */
PX__AVX2 static void px__hrow3_avx2(const uint8_t *s, const px_resize_table *tx, int x0, int x1, uint8_t *t)
{
    const __m128i spread = _mm_setr_epi8(0, 1, 2, -1, 3, 4, 5, -1, 6, 7, 8, -1, 9, 10, 11, -1);
    const int64_t row = (int64_t)tx->in_size * 3;
    for (int x = x0; x < x1; x++, t += 3) {
        const int64_t at = (int64_t)tx->first[x] * 3;
        const uint8_t *p = s + at;
        const int32_t *k = tx->k + (size_t)x * (size_t)tx->ksize;
        int n = tx->count[x], j = 0;
        __m256i acc0 = _mm256_setzero_si256(), acc1 = _mm256_setzero_si256();
        for (; j + 4 <= n && at + 3 * j + 16 <= row; j += 4)
            px__taps4(_mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(const void *)(p + 3 * j)), spread),
                      _mm_loadu_si128((const __m128i *)(const void *)(k + j)), &acc0, &acc1);
        if (j + 2 <= n && at + 3 * j + 8 <= row) {
            acc1 = px__taps2(_mm_shuffle_epi8(_mm_loadl_epi64((const __m128i *)(const void *)(p + 3 * j)), spread), k + j, acc1);
            j += 2;
        }
        acc0 = _mm256_add_epi32(acc0, acc1);
        __m128i a = _mm_add_epi32(_mm256_castsi256_si128(acc0), _mm256_extracti128_si256(acc0, 1));
        a = _mm_add_epi32(a, _mm_set1_epi32((int)PX_RESIZE_HALF));
        for (; j < n; j++) { /* RGB of one texel, in the low 24 bits (its three bytes alone: no 4-byte read past the row) */
            const uint8_t *q = p + 3 * j;
            int32_t v = (int32_t)((uint32_t)q[0] | (uint32_t)q[1] << 8 | (uint32_t)q[2] << 16);
            a = _mm_add_epi32(a, _mm_mullo_epi32(_mm_cvtepu8_epi32(_mm_cvtsi32_si128(v)), _mm_set1_epi32(k[j])));
        }
        int32_t o = _mm_cvtsi128_si32(px__clamp4(a));
        memcpy(t, &o, 3);
    }
}

PX__AVX2 static void px__vrow_avx2(const uint8_t *t, int64_t stride, int count, const int32_t *k, uint8_t *d, size_t n)
{
    const __m256i half = _mm256_set1_epi32((int)PX_RESIZE_HALF);
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256i a0 = half, a1 = half;
        const uint8_t *r = t + i;
        for (int j = 0; j < count; j++, r += stride) {
            __m128i v = _mm_loadu_si128((const __m128i *)(const void *)r);
            __m256i kk = _mm256_set1_epi32(k[j]);
            a0 = _mm256_add_epi32(a0, _mm256_mullo_epi32(_mm256_cvtepu8_epi32(v), kk));
            a1 = _mm256_add_epi32(a1, _mm256_mullo_epi32(_mm256_cvtepu8_epi32(_mm_srli_si128(v, 8)), kk));
        }
        a0 = _mm256_srai_epi32(a0, PX_RESIZE_PREC), a1 = _mm256_srai_epi32(a1, PX_RESIZE_PREC);
        __m128i w0 = _mm_packs_epi32(_mm256_castsi256_si128(a0), _mm256_extracti128_si256(a0, 1));
        __m128i w1 = _mm_packs_epi32(_mm256_castsi256_si128(a1), _mm256_extracti128_si256(a1, 1));
        _mm_storeu_si128((__m128i *)(void *)(d + i), _mm_packus_epi16(w0, w1));
    }
    for (; i < n; i++)
        d[i] = (uint8_t)px_resize_tap(t + i, stride, 0, count, k);
}

PX__AVX2 static void px__vmac_avx2(uint32_t *a, const uint8_t *t, uint32_t k, size_t n)
{
    const __m256i kk = _mm256_set1_epi32((int)k);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i v = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)(t + i)));
        __m256i s = _mm256_loadu_si256((const __m256i *)(const void *)(a + i));
        _mm256_storeu_si256((__m256i *)(void *)(a + i), _mm256_add_epi32(s, _mm256_mullo_epi32(v, kk)));
    }
    for (; i < n; i++)
        a[i] = px_resize_mac(a[i], t[i], k);
}

PX__AVX2 static void px__vclamp_avx2(const uint32_t *a, uint8_t *d, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i s = _mm256_srai_epi32(_mm256_loadu_si256((const __m256i *)(const void *)(a + i)), PX_RESIZE_PREC);
        __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
        _mm_storel_epi64((__m128i *)(void *)(d + i), _mm_packus_epi16(w, w));
    }
    for (; i < n; i++)
        d[i] = (uint8_t)px_resize_clamp(a[i]);
}

static const px_resize_kernels px__avx2 = {"avx2", px__hrow4_avx2, px__hrow3_avx2, px__vrow_avx2, px__vmac_avx2,
                                           px__vclamp_avx2};
#endif

/* ---- the choice ------------------------------------------------------------------------------- */

static _Atomic(const px_resize_kernels *) px__chosen;

static const px_resize_kernels *px__best(void)
{
    const char *e = getenv("PXVM_RESIZE_PORTABLE"); /* a non-empty value other than "0" forces portable C */
    if (e && *e && strcmp(e, "0"))
        return &px__portable;
#ifdef PX__HAVE_AVX2
    if (__builtin_cpu_supports("avx2"))
        return &px__avx2;
#endif
    return &px__portable;
}

const px_resize_kernels *px_resize_kernels_get(void)
{
    const px_resize_kernels *k = atomic_load_explicit(&px__chosen, memory_order_acquire);
    if (!k) {
        k = px__best();
        atomic_store_explicit(&px__chosen, k, memory_order_release);
    }
    return k;
}

int px_resize_isa(int isa)
{
    const px_resize_kernels *k = isa == PX_RESIZE_ISA_AUTO ? px__best() : isa == PX_RESIZE_ISA_PORTABLE ? &px__portable : NULL;
#ifdef PX__HAVE_AVX2
    if (isa == PX_RESIZE_ISA_AVX2 && __builtin_cpu_supports("avx2"))
        k = &px__avx2;
#endif
    if (!k)
        return -1;
    atomic_store_explicit(&px__chosen, k, memory_order_release);
    return 0;
}
