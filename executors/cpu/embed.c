/* embed.c - EMBED on the CPU: each token of an atlas (its patch's K = C * patch_w * patch_h bytes)
 * dotted with every weight row in exact integer arithmetic, then isa/px_sem.h's px_embed_out.
 *
 * The weights and parameters are data slots, read-only and fixed by the program image (SPEC
 * V-EMBED-5, V-WRITE-1; only input slots are bound), so they are packed once per program, when
 * the plan is made (load, and retarget for the next program, whose data slots may hold other
 * pixels), never per run: px_cpu_embed_load reads them from the program image as the slots'
 * initial state (pxvm_slot_initial, the bytes every run reads). The pack: weight rows in groups
 * of 16 output channels, for each 4 bytes of K the 16 rows' 4 bytes (64 bytes: one AVX-512
 * vector, two AVX2 vectors), and per channel the bias with the zero point folded in,
 * bias - zero_point * sum(w), which stays within the V-EMBED-9 bound, so the accumulators start
 * from it and end as SPEC's acc.
 *
 * A run spreads blocks of PX_EMBED_TB tokens over the pool: each block gathers its tokens from the
 * atlas, runs the micro-kernel over 64 channels at a time and writes its own dst rows, so the
 * bytes do not depend on the threads. Three kernels give the same bits, since each sums the same
 * integer products in int32 with no rounding and no saturation (every partial sum is within the
 * V-EMBED-9 bound, and int32 sums are exact modulo 2^32 anyway): portable C; AVX2, vpmaddubsw on
 * the token's bytes halved (u = 2 (u >> 1) + (u & 1): 127 * 128 * 2 fits int16, so the pairs never
 * saturate) then vpmaddwd into int32; AVX-512 VNNI, vpdpbusd (u8 x s8, 4 products a lane); AMX,
 * tdpbusd on 16 x 64-byte tiles (the same products and sums, 16 tokens x 16 channels a tile). The
 * AVX-512 and AVX2 paths also requantize in vectors (px_embed_out's three modes: the same integer
 * steps in 32-bit lanes, and bf16 through a double rounded to odd, which rounds the exact product
 * once); the portable path calls px_sem.h's functions per value.
 * The path is chosen by CPUID (AMX also needs the kernel's leave), or PXVM_CPU_EMBED;
 * px_cpu_embed_path forces one (tests). */
#define _GNU_SOURCE /* syscall(2), for the AMX permission */
#include <stdlib.h>
#include <string.h>

#include "cpu_executor.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>
#define PX_EMBED_X86 1
#else
#define PX_EMBED_X86 0
#endif

/* Tokens a block of work, a multiple of every kernel's tokens (VNNI 6, AVX2 3, portable 6): 273
 * tokens make 46 blocks, which 16 threads share to within 4%. */
#define PX_EMBED_TB 6
/* Channels a kernel call: 4 groups of 16 (the VNNI kernel's 6 x 4 accumulators, 24 of 32 zmm). */
#define PX_EMBED_NC 64

enum { PX_EMBED_AUTO, PX_EMBED_PORTABLE, PX_EMBED_AVX2, PX_EMBED_VNNI, PX_EMBED_AMX };

/* One EMBED instruction's pack (made at plan load, freed at plan unload). */
struct px_cpu_embed {
    int k, kq, d, ng;       /* K, ceil(K/4), channels, groups of 16 */
    int mode, nbytes, out_zero;
    int8_t *w;              /* [ng][kq][16][4] */
    int32_t *bias;          /* [ng * 16]: bias - zero_point * sum(w), 0 past d */
    int32_t *mult, *shift;  /* [ng * 16] (0 for mode 0 and past d) */
    double *multd;          /* [ng * 16]: mult, for the AVX-512 bf16 rounding */
};

/* ---- kernels: out[i][c] = bias[c] + sum over k of tok[i][k] * w[c][k], for ng groups ---------- */

static void px__kernel_portable(const uint8_t *tok, size_t tstride, int nt, const int8_t *w, int kq, int ng,
                                const int32_t *bias, int32_t out[PX_EMBED_TB][PX_EMBED_NC])
{
    for (int i = 0; i < nt; i++)
        for (int g = 0; g < ng; g++) {
            const int8_t *wg = w + (size_t)g * (size_t)kq * 64u;
            uint32_t acc[16]; /* unsigned: the sums wrap without UB; the bound keeps them exact */
            for (int l = 0; l < 16; l++)
                acc[l] = (uint32_t)bias[16 * g + l];
            for (int q = 0; q < kq; q++) {
                const uint8_t *t4 = tok + (size_t)i * tstride + 4u * (size_t)q;
                const int8_t *w4 = wg + 64u * (size_t)q;
                for (int l = 0; l < 16; l++)
                    for (int b = 0; b < 4; b++)
                        acc[l] += (uint32_t)((int32_t)t4[b] * (int32_t)w4[4 * l + b]);
            }
            for (int l = 0; l < 16; l++)
                out[i][16 * g + l] = (int32_t)acc[l];
        }
}

#if PX_EMBED_X86
/* 3 tokens x 16 channels; the tokens as their halves th = u >> 1 and tl = u & 1 (bytes). */
__attribute__((target("avx2"))) static inline void px__avx2_3x16(const uint8_t *th, const uint8_t *tl, size_t tstride,
                                                                 const int8_t *wg, int kq, const int32_t *bias,
                                                                 int32_t out[PX_EMBED_TB][PX_EMBED_NC], int i0, int c0)
{
    const __m256i ones = _mm256_set1_epi16(1), twos = _mm256_set1_epi16(2);
    __m256i acc[3][2];
    for (int i = 0; i < 3; i++) {
        acc[i][0] = _mm256_loadu_si256((const __m256i *)(bias + c0));
        acc[i][1] = _mm256_loadu_si256((const __m256i *)(bias + c0 + 8));
    }
    for (int q = 0; q < kq; q++) {
        __m256i w0 = _mm256_loadu_si256((const __m256i *)(wg + 64 * (size_t)q));
        __m256i w1 = _mm256_loadu_si256((const __m256i *)(wg + 64 * (size_t)q + 32));
        for (int i = 0; i < 3; i++) {
            int32_t hw, lw;
            memcpy(&hw, th + (size_t)i * tstride + 4u * (size_t)q, 4);
            memcpy(&lw, tl + (size_t)i * tstride + 4u * (size_t)q, 4);
            __m256i h = _mm256_set1_epi32(hw), l = _mm256_set1_epi32(lw);
            /* |h * w + h * w| <= 127 * 128 * 2 and |l * w + l * w| <= 256: vpmaddubsw never saturates */
            acc[i][0] = _mm256_add_epi32(acc[i][0], _mm256_add_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(h, w0), twos),
                                                                     _mm256_madd_epi16(_mm256_maddubs_epi16(l, w0), ones)));
            acc[i][1] = _mm256_add_epi32(acc[i][1], _mm256_add_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(h, w1), twos),
                                                                     _mm256_madd_epi16(_mm256_maddubs_epi16(l, w1), ones)));
        }
    }
    for (int i = 0; i < 3; i++) {
        _mm256_storeu_si256((__m256i *)(out[i0 + i] + c0), acc[i][0]);
        _mm256_storeu_si256((__m256i *)(out[i0 + i] + c0 + 8), acc[i][1]);
    }
}

__attribute__((target("avx2"))) static void px__kernel_avx2(const uint8_t *tok, size_t tstride, int nt, const int8_t *w,
                                                            int kq, int ng, const int32_t *bias,
                                                            int32_t out[PX_EMBED_TB][PX_EMBED_NC])
{
    /* the block's halves lie after its tokens (px__embed_blocks), nt rounded up to 3 rows */
    size_t n = (size_t)PX_EMBED_TB * tstride;
    const uint8_t *th = tok + n, *tl = th + n;
    for (int i0 = 0; i0 < nt; i0 += 3)
        for (int g = 0; g < ng; g++)
            px__avx2_3x16(th + (size_t)i0 * tstride, tl + (size_t)i0 * tstride, tstride, w + (size_t)g * (size_t)kq * 64u,
                          kq, bias, out, i0, 16 * g);
}

/* 6 tokens x NG groups of 16 channels. The 24 accumulators are named variables, not an array:
 * GCC keeps an array of vectors in memory and stores it back at every step. */
#define PX__V_ROW(i)                                                                                                   \
    do {                                                                                                               \
        int32_t word_;                                                                                                 \
        memcpy(&word_, tok + (size_t)(i) * tstride + 4u * (size_t)q, 4);                                              \
        __m512i a_ = _mm512_set1_epi32(word_);                                                                         \
        c##i##0 = _mm512_dpbusd_epi32(c##i##0, a_, w0); /* u8 x s8, 4 products a lane into int32 */                    \
        if (ngc > 1)                                                                                                    \
            c##i##1 = _mm512_dpbusd_epi32(c##i##1, a_, w1);                                                            \
        if (ngc > 2)                                                                                                    \
            c##i##2 = _mm512_dpbusd_epi32(c##i##2, a_, w2);                                                            \
        if (ngc > 3)                                                                                                    \
            c##i##3 = _mm512_dpbusd_epi32(c##i##3, a_, w3);                                                            \
    } while (0)
#define PX__V_STORE(i)                                                                                                 \
    do {                                                                                                               \
        _mm512_storeu_si512((void *)(out[i]), c##i##0);                                                                \
        if (ngc > 1)                                                                                                    \
            _mm512_storeu_si512((void *)(out[i] + 16), c##i##1);                                                       \
        if (ngc > 2)                                                                                                    \
            _mm512_storeu_si512((void *)(out[i] + 32), c##i##2);                                                       \
        if (ngc > 3)                                                                                                    \
            _mm512_storeu_si512((void *)(out[i] + 48), c##i##3);                                                       \
    } while (0)
#define PX__VNNI_KERNEL(NG)                                                                                            \
    __attribute__((target("avx512f,avx512bw,avx512vnni"))) static void px__vnni_6x##NG(                               \
        const uint8_t *tok, size_t tstride, const int8_t *w, int kq, const int32_t *bias,                              \
        int32_t out[PX_EMBED_TB][PX_EMBED_NC])                                                                         \
    {                                                                                                                  \
        const int ngc = NG; /* PX__V_ROW's groups */                                                                   \
        __m512i b0 = _mm512_loadu_si512((const void *)bias);                                                           \
        __m512i b1 = NG > 1 ? _mm512_loadu_si512((const void *)(bias + 16)) : b0;                                      \
        __m512i b2 = NG > 2 ? _mm512_loadu_si512((const void *)(bias + 32)) : b0;                                      \
        __m512i b3 = NG > 3 ? _mm512_loadu_si512((const void *)(bias + 48)) : b0;                                      \
        __m512i c00 = b0, c01 = b1, c02 = b2, c03 = b3, c10 = b0, c11 = b1, c12 = b2, c13 = b3;                        \
        __m512i c20 = b0, c21 = b1, c22 = b2, c23 = b3, c30 = b0, c31 = b1, c32 = b2, c33 = b3;                        \
        __m512i c40 = b0, c41 = b1, c42 = b2, c43 = b3, c50 = b0, c51 = b1, c52 = b2, c53 = b3;                        \
        size_t gs = (size_t)kq * 64u;                                                                                  \
        const int8_t *wq = w;                                                                                          \
        for (int q = 0; q < kq; q++, wq += 64) {                                                                       \
            __m512i w0 = _mm512_loadu_si512((const void *)wq);                                                         \
            __m512i w1 = NG > 1 ? _mm512_loadu_si512((const void *)(wq + gs)) : w0;                                    \
            __m512i w2 = NG > 2 ? _mm512_loadu_si512((const void *)(wq + 2 * gs)) : w0;                                \
            __m512i w3 = NG > 3 ? _mm512_loadu_si512((const void *)(wq + 3 * gs)) : w0;                                \
            PX__V_ROW(0);                                                                                              \
            PX__V_ROW(1);                                                                                              \
            PX__V_ROW(2);                                                                                              \
            PX__V_ROW(3);                                                                                              \
            PX__V_ROW(4);                                                                                              \
            PX__V_ROW(5);                                                                                              \
        }                                                                                                              \
        PX__V_STORE(0);                                                                                                \
        PX__V_STORE(1);                                                                                                \
        PX__V_STORE(2);                                                                                                \
        PX__V_STORE(3);                                                                                                \
        PX__V_STORE(4);                                                                                                \
        PX__V_STORE(5);                                                                                                \
    }
PX__VNNI_KERNEL(1)
PX__VNNI_KERNEL(2)
PX__VNNI_KERNEL(3)
PX__VNNI_KERNEL(4)

static void px__kernel_vnni(const uint8_t *tok, size_t tstride, int nt, const int8_t *w, int kq, int ng,
                            const int32_t *bias, int32_t out[PX_EMBED_TB][PX_EMBED_NC])
{
    (void)nt; /* always 6 rows: those after nt are zeros, never written out */
    switch (ng) {
    case 1: px__vnni_6x1(tok, tstride, w, kq, bias, out); break;
    case 2: px__vnni_6x2(tok, tstride, w, kq, bias, out); break;
    case 3: px__vnni_6x3(tok, tstride, w, kq, bias, out); break;
    default: px__vnni_6x4(tok, tstride, w, kq, bias, out); break;
    }
}

/* px_embed_out of 16 channels' accumulators, written as nbytes-byte values at row (only the
 * first n lanes). The steps of isa/px_sem.h in lanes: mode 1 is TFLite's srdhm, whose nudge
 * and truncation toward zero come to floor((a * M + 2^30) / 2^31) for either sign of a * M (for
 * x < 0, trunc(x / 2^31) = floor((x + 2^31 - 1) / 2^31)), then rdbpot in 32-bit lanes; mode 2
 * rounds acc * M to 8 significant bits through a double rounded to odd (below). */
__attribute__((target("avx512f,avx512bw"), always_inline)) static inline void px__out16_avx512(const struct px_cpu_embed *e, int c0,
                                                                                  const int32_t *acc16, uint8_t *row, int n)
{
    __m512i acc = _mm512_loadu_si512((const void *)acc16);
    __mmask16 keep = (__mmask16)(n >= 16 ? 0xFFFFu : (1u << n) - 1u);
    if (e->mode == PX_EMBED_MODE_I32) {
        _mm512_mask_storeu_epi32(row + 4 * c0, keep, acc);
        return;
    }
    __m512i m = _mm512_loadu_si512((const void *)(e->mult + c0)), s = _mm512_loadu_si512((const void *)(e->shift + c0));
    const __m512i lo32 = _mm512_set1_epi64(0xFFFFFFFFll);
    if (e->mode == PX_EMBED_MODE_I8) {
        __m512i zero = _mm512_setzero_si512();
        __m512i left = _mm512_max_epi32(s, zero), right = _mm512_max_epi32(_mm512_sub_epi32(zero, s), zero);
        __m512i a = _mm512_sllv_epi32(acc, left); /* exact: V-EMBED-12 */
        __m512i nudge = _mm512_set1_epi64(1ll << 30);
        __m512i pe = _mm512_add_epi64(_mm512_mul_epi32(a, m), nudge);
        __m512i po = _mm512_add_epi64(_mm512_mul_epi32(_mm512_srli_epi64(a, 32), _mm512_srli_epi64(m, 32)), nudge);
        /* the quotient fits int32: its low 32 bits are bits 31..62 of the sum, either shift */
        __m512i x = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi64(pe, 31), lo32),
                                    _mm512_andnot_si512(lo32, _mm512_slli_epi64(po, 1)));
        __m512i mask = _mm512_sub_epi32(_mm512_sllv_epi32(_mm512_set1_epi32(1), right), _mm512_set1_epi32(1));
        __m512i rem = _mm512_and_si512(x, mask);
        __m512i thr = _mm512_sub_epi32(_mm512_srai_epi32(mask, 1), _mm512_srai_epi32(x, 31)); /* + 1 when x < 0 */
        __m512i v = _mm512_srav_epi32(x, right);
        v = _mm512_mask_add_epi32(v, _mm512_cmpgt_epi32_mask(rem, thr), v, _mm512_set1_epi32(1));
        v = _mm512_add_epi32(v, _mm512_set1_epi32(e->out_zero));
        v = _mm512_min_epi32(_mm512_max_epi32(v, _mm512_set1_epi32(-128)), _mm512_set1_epi32(127));
        _mm512_mask_cvtepi32_storeu_epi8(row + c0, keep, v);
        return;
    }
    /* bf16: 8 lanes at a time as doubles. acc and M are exact in a double, their product (up
     * to 62 bits) is rounded to odd: toward zero, then the last bit set where the product was
     * inexact (the FMA gives the product's remainder exactly), which rounds once more to 8 bits,
     * to nearest even, as the exact product would (53 >= 8 + 2 bits). That rounding is done on
     * the double's bits: add 2^44 - 1 and bit 45, drop 45 bits (a carry goes into the exponent);
     * the exponent n + 1023 becomes n + shift - 31 + 127. */
    for (int h = 0; h < 2; h++) {
        __m256i acc8 = h ? _mm512_extracti64x4_epi64(acc, 1) : _mm512_castsi512_si256(acc);
        __m256i s8 = h ? _mm512_extracti64x4_epi64(s, 1) : _mm512_castsi512_si256(s);
        __m512d a = _mm512_cvtepi32_pd(acc8), md = _mm512_loadu_pd(e->multd + c0 + 8 * h);
        __m512d p = _mm512_mul_round_pd(a, md, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
        __mmask8 inexact = _mm512_cmp_pd_mask(_mm512_fmsub_pd(a, md, p), _mm512_setzero_pd(), _CMP_NEQ_OQ);
        __m512i bits = _mm512_castpd_si512(p);
        __mmask8 nz = _mm512_test_epi64_mask(bits, _mm512_set1_epi64(0x7FFFFFFFFFFFFFFFll)); /* -0.0 is 0 */
        bits = _mm512_mask_or_epi64(bits, inexact, bits, _mm512_set1_epi64(1));
        __m512i sign = _mm512_and_si512(_mm512_srli_epi64(bits, 48), _mm512_set1_epi64(0x8000));
        __m512i mag = _mm512_and_si512(bits, _mm512_set1_epi64(0x7FFFFFFFFFFFFFFFll));
        mag = _mm512_add_epi64(mag, _mm512_add_epi64(_mm512_set1_epi64((1ll << 44) - 1),
                                                     _mm512_and_si512(_mm512_srli_epi64(mag, 45), _mm512_set1_epi64(1))));
        __m512i v = _mm512_srli_epi64(mag, 45); /* exponent + 1023, then 7 bits */
        __m512i adj = _mm512_slli_epi64(_mm512_sub_epi64(_mm512_cvtepi32_epi64(s8), _mm512_set1_epi64(1023 + 31 - 127)), 7);
        v = _mm512_maskz_or_epi64(nz, _mm512_add_epi64(v, adj), sign);
        __mmask8 part = (__mmask8)(keep >> (8 * h));
        if (part)
            _mm512_mask_cvtepi64_storeu_epi16(row + 2 * c0 + 16 * h, part, v);
    }
}

/* px__out16_avx512 over channels c0 .. c0 + n - 1 of one token (acc from its channel c0). */
__attribute__((target("avx512f,avx512bw"))) static void px__out_avx512(const struct px_cpu_embed *e, int c0,
                                                                       const int32_t *acc, uint8_t *row, int n)
{
    for (int g = 0; g < n; g += 16)
        px__out16_avx512(e, c0 + g, acc + g, row, n - g);
}

/* The AVX2 twin of px__out_avx512, 8 channels a step. Mode 1: the same 32-bit steps. Mode 2: 4
 * lanes of doubles, without AVX-512's round-toward-zero product: the product p rounded to
 * nearest and its remainder r = acc * M - p (exact, by FMA) give the product rounded to odd: p,
 * or, when r's sign is not p's (p is past the exact product), the double before p toward zero
 * (its bits less 1), with the last bit set when r != 0; then the same 8-bit rounding. */
__attribute__((target("avx2,fma"))) static void px__out_avx2(const struct px_cpu_embed *e, int c0, const int32_t *acc,
                                                             uint8_t *row, int n)
{
    if (e->mode == PX_EMBED_MODE_I32) { /* the accumulators themselves, little-endian */
        for (int c = 0; c < n; c++) {
            uint32_t v = (uint32_t)acc[c];
            uint8_t *at = row + 4 * (size_t)(c0 + c);
            at[0] = (uint8_t)v, at[1] = (uint8_t)(v >> 8), at[2] = (uint8_t)(v >> 16), at[3] = (uint8_t)(v >> 24);
        }
        return;
    }
    const __m256i lo32 = _mm256_set1_epi64x(0xFFFFFFFFll), zero = _mm256_setzero_si256();
    for (int g = 0; g < n; g += 8) {
        int m8 = n - g < 8 ? n - g : 8, c = c0 + g;
        __m256i a32 = _mm256_loadu_si256((const __m256i *)(acc + g));
        __m256i s = _mm256_loadu_si256((const __m256i *)(e->shift + c));
        if (e->mode == PX_EMBED_MODE_I8) {
            __m256i m = _mm256_loadu_si256((const __m256i *)(e->mult + c));
            __m256i left = _mm256_max_epi32(s, zero), right = _mm256_max_epi32(_mm256_sub_epi32(zero, s), zero);
            __m256i a = _mm256_sllv_epi32(a32, left); /* exact: V-EMBED-12 */
            __m256i nudge = _mm256_set1_epi64x(1ll << 30);
            __m256i pe = _mm256_add_epi64(_mm256_mul_epi32(a, m), nudge);
            __m256i po = _mm256_add_epi64(_mm256_mul_epi32(_mm256_srli_epi64(a, 32), _mm256_srli_epi64(m, 32)), nudge);
            __m256i x = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi64(pe, 31), lo32),
                                        _mm256_andnot_si256(lo32, _mm256_slli_epi64(po, 1)));
            __m256i mask = _mm256_sub_epi32(_mm256_sllv_epi32(_mm256_set1_epi32(1), right), _mm256_set1_epi32(1));
            __m256i thr = _mm256_sub_epi32(_mm256_srai_epi32(mask, 1), _mm256_srai_epi32(x, 31)); /* + 1 when x < 0 */
            __m256i v = _mm256_sub_epi32(_mm256_srav_epi32(x, right), _mm256_cmpgt_epi32(_mm256_and_si256(x, mask), thr));
            v = _mm256_add_epi32(v, _mm256_set1_epi32(e->out_zero));
            v = _mm256_min_epi32(_mm256_max_epi32(v, _mm256_set1_epi32(-128)), _mm256_set1_epi32(127));
            int32_t out[8];
            _mm256_storeu_si256((__m256i *)out, v);
            for (int q = 0; q < m8; q++)
                row[c + q] = (uint8_t)out[q];
            continue;
        }
        for (int h = 0; h < 2 && 4 * h < m8; h++) {
            __m128i a4 = h ? _mm256_extracti128_si256(a32, 1) : _mm256_castsi256_si128(a32);
            __m128i s4 = h ? _mm256_extracti128_si256(s, 1) : _mm256_castsi256_si128(s);
            __m256d a = _mm256_cvtepi32_pd(a4), md = _mm256_loadu_pd(e->multd + c + 4 * h);
            __m256d p = _mm256_mul_pd(a, md);
            __m256d r = _mm256_fmsub_pd(a, md, p);
            __m256i bits = _mm256_castpd_si256(p), rbits = _mm256_castpd_si256(r);
            __m256i inexact = _mm256_castpd_si256(_mm256_cmp_pd(r, _mm256_setzero_pd(), _CMP_NEQ_OQ));
            __m256i past = _mm256_and_si256(inexact, _mm256_xor_si256(bits, rbits)); /* sign bits differ */
            past = _mm256_cmpgt_epi64(zero, past); /* all ones where the sign bit of past is set */
            bits = _mm256_add_epi64(bits, past);   /* less 1: the double before p, toward zero */
            bits = _mm256_or_si256(bits, _mm256_and_si256(inexact, _mm256_set1_epi64x(1)));
            __m256i magmask = _mm256_set1_epi64x(0x7FFFFFFFFFFFFFFFll);
            __m256i nz = _mm256_xor_si256(_mm256_cmpeq_epi64(_mm256_and_si256(_mm256_castpd_si256(p), magmask), zero),
                                          _mm256_set1_epi64x(-1)); /* -0.0 is 0 */
            __m256i sign = _mm256_and_si256(_mm256_srli_epi64(bits, 48), _mm256_set1_epi64x(0x8000));
            __m256i mag = _mm256_and_si256(bits, magmask);
            mag = _mm256_add_epi64(mag, _mm256_add_epi64(_mm256_set1_epi64x((1ll << 44) - 1),
                                                         _mm256_and_si256(_mm256_srli_epi64(mag, 45), _mm256_set1_epi64x(1))));
            __m256i adj = _mm256_slli_epi64(_mm256_sub_epi64(_mm256_cvtepi32_epi64(s4), _mm256_set1_epi64x(1023 + 31 - 127)), 7);
            __m256i v = _mm256_and_si256(_mm256_or_si256(_mm256_add_epi64(_mm256_srli_epi64(mag, 45), adj), sign), nz);
            int64_t out[4];
            _mm256_storeu_si256((__m256i *)out, v);
            for (int q = 0; q < 4 && 4 * h + q < m8; q++) {
                uint8_t *at = row + 2 * (size_t)(c + 4 * h + q);
                at[0] = (uint8_t)out[q], at[1] = (uint8_t)(out[q] >> 8);
            }
        }
    }
}
#endif

/* The value bytes of channels c0 .. c0 + n - 1 for one token, px_embed_out per value (a loop per
 * mode: the byte count is a constant in each). */
static void px__out_scalar(const struct px_cpu_embed *e, int c0, const int32_t *acc, uint8_t *row, int n)
{
    const int32_t *m = e->mult + c0, *sh = e->shift + c0;
    if (e->mode == PX_EMBED_MODE_I32) {
        uint8_t *at = row + 4 * (size_t)c0;
        for (int c = 0; c < n; c++, at += 4) {
            uint32_t v = (uint32_t)acc[c];
            at[0] = (uint8_t)v, at[1] = (uint8_t)(v >> 8), at[2] = (uint8_t)(v >> 16), at[3] = (uint8_t)(v >> 24);
        }
    } else if (e->mode == PX_EMBED_MODE_I8) {
        for (int c = 0; c < n; c++)
            row[c0 + c] = (uint8_t)px_embed_requant_i8(acc[c], m[c], sh[c], e->out_zero);
    } else {
        uint8_t *at = row + 2 * (size_t)c0;
        for (int c = 0; c < n; c++, at += 2) {
            uint32_t v = px_embed_bf16(acc[c], m[c], sh[c]);
            at[0] = (uint8_t)v, at[1] = (uint8_t)(v >> 8);
        }
    }
}

typedef void (*px_embed_kernel_fn)(const uint8_t *tok, size_t tstride, int nt, const int8_t *w, int kq, int ng,
                                   const int32_t *bias, int32_t out[PX_EMBED_TB][PX_EMBED_NC]);

#if PX_EMBED_X86
/* AMX-INT8 and AMX-TILE (CPUID 7.0 EDX bits 25, 24), with the kernel's leave to use the tile
 * state (Linux asks a process to request it: arch_prctl ARCH_REQ_XCOMP_PERM, XTILEDATA), asked
 * once; threads that ask at once make the same idempotent request and store the same answer. */
static int px__amx_usable(void)
{
#if defined(__x86_64__)
    static int have = -1;
    int h = __atomic_load_n(&have, __ATOMIC_RELAXED);
    if (h < 0) {
        unsigned a, b, c, d;
        int cpu = __get_cpuid_count(7, 0, &a, &b, &c, &d) && (d >> 24 & 1u) && (d >> 25 & 1u);
        h = cpu && syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XTILEDATA */) == 0;
        __atomic_store_n(&have, h, __ATOMIC_RELAXED);
    }
    return h;
#else
    return 0; /* AMX's intrinsics are x86-64's */
#endif
}
#endif

static int px__path_supported(int path)
{
#if PX_EMBED_X86
    if (path == PX_EMBED_AMX) /* and AVX-512's requantization */
        return px__path_supported(PX_EMBED_VNNI) && px__amx_usable();
    if (path == PX_EMBED_AVX2)
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    if (path == PX_EMBED_VNNI)
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512vnni");
#endif
    return path == PX_EMBED_PORTABLE;
}

static int px__embed_forced = PX_EMBED_AUTO;

/* The path runs take: forced (tests), else PXVM_CPU_EMBED=portable|avx2|vnni|amx where this CPU
 * has it (benchmarks: the same bytes, another speed), else the widest the CPU has. */
static int px__embed_path(void)
{
    if (px__embed_forced != PX_EMBED_AUTO)
        return px__embed_forced;
    static const char *const names[] = {"", "portable", "avx2", "vnni", "amx"};
    const char *v = getenv("PXVM_CPU_EMBED");
    for (int p = PX_EMBED_PORTABLE; v && p <= PX_EMBED_AMX; p++)
        if (!strcmp(v, names[p]) && px__path_supported(p))
            return p;
    for (int p = PX_EMBED_AMX; p > PX_EMBED_PORTABLE; p--)
        if (px__path_supported(p))
            return p;
    return PX_EMBED_PORTABLE;
}

/* Tests: force path 1 (portable), 2 (AVX2), 3 (AVX-512 VNNI) or 4 (AMX), or 0 (CPUID's choice).
 * Returns the path runs now take, or -1 (nothing changed) when this CPU lacks the one asked for. */
int px_cpu_embed_path(int path)
{
    if (path < PX_EMBED_AUTO || path > PX_EMBED_AMX || (path != PX_EMBED_AUTO && !px__path_supported(path)))
        return -1;
    px__embed_forced = path;
    return px__embed_path();
}

/* ---- the pack ---------------------------------------------------------------------------------- */

static int32_t px__le32(const uint8_t *p)
{
    return (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
}

/* What this executor holds for one EMBED of K = k, d channels and count tokens, the sizes that
 * px__embed_pack and px_cpu_run_embed allocate: the pack, weights [lanes][4 kq] with bias,
 * multiplier, shift (int32) and the multiplier as a double per lane; and a run's token blocks,
 * `parts` copies (the AVX2 kernel's tokens and their halves: 3) of PX_EMBED_TB tokens of 4 kq
 * bytes per block. SPEC V-EMBED-13 bounds pack plus blocks (px_embed_need; px_cpu_embed_bytes). */
static size_t px__pack_bytes(int k, int d)
{
    size_t lanes = ((size_t)d + 15u) / 16u * 16u, row = ((size_t)k + 3u) / 4u * 4u;
    return lanes * (row + 3u * sizeof(int32_t) + sizeof(double));
}

static size_t px__block_bytes(int k, int parts)
{
    return (size_t)parts * PX_EMBED_TB * (((size_t)k + 3u) / 4u * 4u);
}

static size_t px__blocks_bytes(int k, int count, int parts)
{
    return ((size_t)count + PX_EMBED_TB - 1u) / PX_EMBED_TB * px__block_bytes(k, parts);
}

/* The AMX path's tokens: tiles of 16 rows of K rounded up to 64 bytes (a tile row), zeros after K
 * and after the last token. */
#define PX_EMBED_TT 16
static size_t px__tile_stride(int k) { return ((size_t)k + 63u) / 64u * 64u; }
static size_t px__tiles_bytes(int k, int count)
{
    return ((size_t)count + PX_EMBED_TT - 1u) / PX_EMBED_TT * PX_EMBED_TT * px__tile_stride(k);
}

/* Tests: the most this executor holds at once for one EMBED (its pack and a run's tokens on the
 * widest path: AVX2's three parts, or AMX's tiles), to compare with SPEC's bound, px_embed_need. */
uint64_t px_cpu_embed_bytes(int k, int d, int count);
uint64_t px_cpu_embed_bytes(int k, int d, int count)
{
    size_t blocks = px__blocks_bytes(k, count, 3), tiles = px__tiles_bytes(k, count);
    return (uint64_t)px__pack_bytes(k, d) + (uint64_t)(blocks > tiles ? blocks : tiles);
}

static void px__embed_free(struct px_cpu_embed *e)
{
    if (e) {
        free(e->w);
        free(e->bias);
        free(e->multd);
        free(e);
    }
}

/* The pack of EMBED instruction `in` of prog, from its data slots' initial state; NULL when out of
 * memory. */
static struct px_cpu_embed *px__embed_pack(const pxvm_program *prog, const pxi_insn *in)
{
    int wk = PX_ARG(in, EMBED, weights), pk = PX_ARG(in, EMBED, params), c = PX_ARG(in, EMBED, channels);
    const pxvm_slot *ss = &prog->slots[PX_ARG(in, EMBED, src)], *ws = &prog->slots[wk], *ps = &prog->slots[pk];
    struct px_cpu_embed *e = calloc(1, sizeof *e);
    if (!e)
        return NULL;
    e->d = PX_ARG(in, EMBED, d);
    e->k = c * ss->patch_w * ss->patch_h;
    e->kq = (e->k + 3) / 4;
    e->ng = (e->d + 15) / 16;
    e->mode = PX_ARG(in, EMBED, mode);
    e->nbytes = px_embed_out_bytes(e->mode);
    e->out_zero = (int8_t)PX_ARG(in, EMBED, out_zero);
    size_t lanes = (size_t)e->ng * 16u, wbytes = lanes * (size_t)e->kq * 4u;
    size_t wslot = (size_t)ws->w * (size_t)ws->h * 4u, pslot = (size_t)ps->w * (size_t)ps->h * 4u;
    uint8_t *wp = malloc(wslot), *pp = malloc(pslot);
    e->w = calloc(wbytes, 1);
    e->bias = calloc(lanes * 3u, sizeof(int32_t));
    e->multd = calloc(lanes, sizeof(double));
    if (!wp || !pp || !e->w || !e->bias || !e->multd) {
        free(wp);
        free(pp);
        px__embed_free(e);
        return NULL;
    }
    e->mult = e->bias + lanes, e->shift = e->mult + lanes;
    pxvm_slot_initial(prog, wk, wp); /* what every run's store of the slot holds */
    pxvm_slot_initial(prog, pk, pp);
    int zp = PX_ARG(in, EMBED, zero_point), three = e->mode != PX_EMBED_MODE_I32;
    for (int o = 0; o < e->d; o++) {
        const int8_t *row = (const int8_t *)(wp + (size_t)o * (size_t)ws->w * 4u);
        int8_t *dst = e->w + (size_t)(o / 16) * (size_t)e->kq * 64u + 4u * (size_t)(o % 16);
        int32_t sum = 0; /* |sum| <= K * 128 */
        for (int k = 0; k < e->k; k++) {
            dst[(size_t)(k / 4) * 64u + (size_t)(k % 4)] = row[k];
            sum += row[k];
        }
        /* sum (u - zp) * w = sum u * w - zp * sum w: the accumulators start at the bias less the
         * second sum, whose magnitude with the bias's is within the V-EMBED-9 bound */
        e->bias[o] = (int32_t)((int64_t)px__le32(pp + 4u * (size_t)o) - (int64_t)zp * sum);
        e->mult[o] = three ? px__le32(pp + 4u * ((size_t)ps->w + (size_t)o)) : 0;
        e->shift[o] = three ? px__le32(pp + 4u * (2u * (size_t)ps->w + (size_t)o)) : 0;
        e->multd[o] = (double)e->mult[o];
    }
    free(wp);
    free(pp);
    return e;
}

int px_cpu_embed_load(pxvm_executor *ex, pxvm_error *err)
{
    const pxvm_program *prog = ex->prog;
    for (uint32_t i = 0; i < prog->ninsns; i++) {
        const pxi_insn *in = &prog->insns[i];
        if (in->op != PX_OP_EMBED)
            continue;
        if (!ex->embed && !(ex->embed = calloc(prog->ninsns, sizeof *ex->embed)))
            return pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)prog->ninsns * sizeof *ex->embed);
        if (!(ex->embed[i] = px__embed_pack(prog, in))) { /* the pack: weights, 3 int32 and a double per lane */
            const pxvm_slot *ss = &prog->slots[PX_ARG(in, EMBED, src)];
            int k = PX_ARG(in, EMBED, channels) * ss->patch_w * ss->patch_h; /* <= 65793: V-EMBED-9 */
            return pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)px__pack_bytes(k, PX_ARG(in, EMBED, d)));
        }
    }
    return 0;
}

void px_cpu_embed_unload(pxvm_executor *ex)
{
    for (uint32_t i = 0; ex->embed && i < ex->ninsns; i++)
        px__embed_free(ex->embed[i]);
    free(ex->embed);
    ex->embed = NULL;
}

/* ---- a run ------------------------------------------------------------------------------------- */

typedef struct {
    const struct px_cpu_embed *e;
    const uint8_t *src; /* the atlas's level 0 */
    int src_w, c, pw, ph, cols, ntok;
    uint8_t *dst;
    size_t dst_stride;
    px_embed_kernel_fn kernel;
    int vector_out; /* the requantization in vectors: 1 AVX2, 2 AVX-512 */
    int halves;     /* the AVX2 kernel's token halves */
    int gather4;    /* px__gather4 (AVX2 or VNNI, patch width a multiple of 4) */
    uint8_t *scratch;   /* per block, block_bytes: its tokens (and the AVX2 kernel's halves) */
    size_t block_bytes;
} px_embed_job;

/* Token t's K bytes in (c, y, x) order, the order of a ViT Conv2d weight reshaped [D, K]. */
static void px__gather(const px_embed_job *j, int t, uint8_t *tok)
{
    int x0 = (t % j->cols) * j->pw, y0 = (t / j->cols) * j->ph, plane = j->pw * j->ph;
    for (int y = 0; y < j->ph; y++) {
        const uint8_t *px = j->src + ((size_t)(y0 + y) * (size_t)j->src_w + (size_t)x0) * 4u;
        uint8_t *at = tok + (size_t)y * (size_t)j->pw;
        for (int x = 0; x < j->pw; x++, px += 4)
            for (int ch = 0; ch < j->c; ch++)
                at[(size_t)ch * (size_t)plane + (size_t)x] = px[ch];
    }
}

#if PX_EMBED_X86
/* px__gather for a patch width that is a multiple of 4: 4 texels a step, their channels parted
 * by one byte shuffle (RGBA RGBA .. to RRRR GGGG BBBB AAAA), 4 bytes stored per channel. */
__attribute__((target("avx2"))) static void px__gather4(const px_embed_job *j, int t, uint8_t *tok)
{
    const __m128i part = _mm_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    int x0 = (t % j->cols) * j->pw, y0 = (t / j->cols) * j->ph, plane = j->pw * j->ph;
    for (int y = 0; y < j->ph; y++) {
        const uint8_t *px = j->src + ((size_t)(y0 + y) * (size_t)j->src_w + (size_t)x0) * 4u;
        uint8_t *at = tok + (size_t)y * (size_t)j->pw;
        for (int x = 0; x < j->pw; x += 4) {
            __m128i v = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(px + 4 * x)), part);
            int32_t lane[4];
            _mm_storeu_si128((__m128i *)lane, v);
            for (int ch = 0; ch < j->c; ch++)
                memcpy(at + (size_t)ch * (size_t)plane + (size_t)x, &lane[ch], 4);
        }
    }
}
#endif

/* Token t's K bytes into row (px__gather4 where it applies, else px__gather), and the bytes of
 * its dst row after its d values zeroed: each path's first step for a token. */
static void px__token_in(const px_embed_job *j, int t, uint8_t *row)
{
#if PX_EMBED_X86
    if (j->gather4)
        px__gather4(j, t, row);
    else
#endif
        px__gather(j, t, row);
    size_t used = (size_t)j->e->d * (size_t)j->e->nbytes;
    memset(j->dst + (size_t)t * j->dst_stride + used, 0, j->dst_stride - used);
}

/* Token blocks b0 .. b1 - 1, PX_EMBED_TB tokens each. */
static void px__embed_blocks(void *ctx, int b0, int b1)
{
    const px_embed_job *j = ctx;
    const struct px_cpu_embed *e = j->e;
    size_t tstride = (size_t)e->kq * 4u;
    int32_t out[PX_EMBED_TB][PX_EMBED_NC];
    for (int b = b0; b < b1; b++) {
        uint8_t *tok = j->scratch + (size_t)b * j->block_bytes;
        int t0 = PX_EMBED_TB * b, nt = j->ntok - t0 < PX_EMBED_TB ? j->ntok - t0 : PX_EMBED_TB;
        memset(tok, 0, (size_t)PX_EMBED_TB * tstride); /* K's tail and the rows after nt */
        for (int i = 0; i < nt; i++)
            px__token_in(j, t0 + i, tok + (size_t)i * tstride);
        int rows = (nt + 2) / 3 * 3; /* the AVX2 kernel's unit; the others take PX_EMBED_TB */
        if (j->halves) { /* the AVX2 kernel's operands: u >> 1 and u & 1 after the tokens */
            size_t n = (size_t)PX_EMBED_TB * tstride;
            for (size_t q = 0; q < n; q++)
                tok[n + q] = (uint8_t)(tok[q] >> 1), tok[2 * n + q] = (uint8_t)(tok[q] & 1u);
        }
        for (int c0 = 0; c0 < e->d; c0 += PX_EMBED_NC) {
            int n = e->d - c0 < PX_EMBED_NC ? e->d - c0 : PX_EMBED_NC;
            j->kernel(tok, tstride, rows, e->w + (size_t)(c0 / 16) * (size_t)e->kq * 64u, e->kq, (n + 15) / 16,
                      e->bias + c0, out);
            for (int i = 0; i < nt; i++) {
                uint8_t *row = j->dst + (size_t)(t0 + i) * j->dst_stride;
#if PX_EMBED_X86
                if (j->vector_out == 2) {
                    px__out_avx512(e, c0, out[i], row, n);
                    continue;
                }
                if (j->vector_out == 1) {
                    px__out_avx2(e, c0, out[i], row, n);
                    continue;
                }
#endif
                px__out_scalar(e, c0, out[i], row, n);
            }
        }
    }
}

#if PX_EMBED_X86 && defined(__x86_64__) /* AMX's intrinsics are x86-64's */
/* ---- the AMX path: 16 tokens x 64 channels a unit, Intel's tile multiply ------------------------
 * The pack is already AMX's B layout: a group's rows of 4 K bytes for 16 channels (64 bytes) are
 * a tile's rows, 16 of them a K step of 64 bytes. TDPBUSD sums u8 x s8 products into int32 as the
 * other kernels do (exact, no saturation): the same bits. A unit: tile 0..3 = 16 tokens x 16
 * channels each, started from the bias (a tile load of stride 0: each row the same 16 values),
 * tile 4 the tokens' K step, 5 and 6 the groups' (alternating); the 16 x 64 sums then go through
 * the AVX-512 requantization. The tokens are gathered first, a tile at a time (their rows past K,
 * and past the last token, zero), so that the units (token tile x 64 channels) share them. */
typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} px_amx_config;

static void px__amx_gather(void *ctx, int t0, int t1)
{
    const px_embed_job *j = ctx;
    size_t ts = px__tile_stride(j->e->k);
    for (int tile = t0; tile < t1; tile++) {
        uint8_t *tok = j->scratch + (size_t)tile * PX_EMBED_TT * ts;
        memset(tok, 0, PX_EMBED_TT * ts);
        for (int i = 0; i < PX_EMBED_TT && tile * PX_EMBED_TT + i < j->ntok; i++)
            px__token_in(j, tile * PX_EMBED_TT + i, tok + (size_t)i * ts);
    }
}

/* Group g0 + J's rows q0 .. q0 + 15 into tile BT, then C_J += tokens x them. Rows past the group's
 * kq meet zero token bytes (past K), so any bytes do there, but a tile that would read past the
 * pack's end (its last group, or any group when the whole pack is under 16 rows from it: K <= 28)
 * reads a zeroed copy of the rows that are there. */
#define PX__AMX_GROUP(J, BT)                                                                                         \
    if (ngc > (J)) {                                                                                                 \
        size_t row = (size_t)(g0 + (J)) * (size_t)e->kq + (size_t)q0;                                              \
        const int8_t *b = e->w + row * 64u;                                                                          \
        if (row + 16u > pack_rows) {                                                                                 \
            memset(tail, 0, sizeof tail);                                                                            \
            memcpy(tail, b, (pack_rows - row) * 64u);                                                                \
            b = (const int8_t *)tail;                                                                                \
        }                                                                                                            \
        _tile_loadd(BT, b, 64);                                                                                      \
        _tile_dpbusd(J, 4, BT);                                                                                      \
    }

__attribute__((target("amx-tile,amx-int8,avx512f,avx512bw"))) static void px__amx_units(void *ctx, int u0, int u1)
{
    const px_embed_job *j = ctx;
    const struct px_cpu_embed *e = j->e;
    size_t ts = px__tile_stride(e->k);
    int chunks = (e->d + PX_EMBED_NC - 1) / PX_EMBED_NC, ksteps = (int)(ts / 64u);
    size_t pack_rows = (size_t)e->ng * (size_t)e->kq;
    px_amx_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int t = 0; t < 7; t++)
        cfg.rows[t] = 16, cfg.colsb[t] = 64;
    _tile_loadconfig(&cfg);
    int32_t out[PX_EMBED_TT][PX_EMBED_NC];
    int8_t tail[16][64];
    for (int u = u0; u < u1; u++) {
        int tile = u / chunks, c0 = (u % chunks) * PX_EMBED_NC, g0 = c0 / 16;
        int n = e->d - c0 < PX_EMBED_NC ? e->d - c0 : PX_EMBED_NC, ngc = (n + 15) / 16;
        int t0 = tile * PX_EMBED_TT, nt = j->ntok - t0 < PX_EMBED_TT ? j->ntok - t0 : PX_EMBED_TT;
        const uint8_t *tok = j->scratch + (size_t)t0 * ts;
        _tile_loadd(0, e->bias + c0, 0);
        _tile_loadd(1, e->bias + c0 + (ngc > 1 ? 16 : 0), 0);
        _tile_loadd(2, e->bias + c0 + (ngc > 2 ? 32 : 0), 0);
        _tile_loadd(3, e->bias + c0 + (ngc > 3 ? 48 : 0), 0);
        for (int s = 0, q0 = 0; s < ksteps; s++, q0 += 16) {
            _tile_loadd(4, tok + (size_t)s * 64u, (long)ts);
            PX__AMX_GROUP(0, 5)
            PX__AMX_GROUP(1, 6)
            PX__AMX_GROUP(2, 5)
            PX__AMX_GROUP(3, 6)
        }
        _tile_stored(0, &out[0][0], PX_EMBED_NC * 4);
        _tile_stored(1, &out[0][16], PX_EMBED_NC * 4);
        _tile_stored(2, &out[0][32], PX_EMBED_NC * 4);
        _tile_stored(3, &out[0][48], PX_EMBED_NC * 4);
        for (int i = 0; i < nt; i++)
            px__out_avx512(e, c0, out[i], j->dst + (size_t)(t0 + i) * j->dst_stride, n);
    }
    _tile_release();
}
#endif

int px_cpu_run_embed(pxvm_executor *ex, uint32_t s, pxvm_error *err)
{
    const pxvm_program *prog = ex->prog;
    uint32_t at = prog->steps[s].first;
    const pxi_insn *in = &prog->insns[at];
    int src = PX_ARG(in, EMBED, src), dst = PX_ARG(in, EMBED, dst);
    const pxvm_slot *ss = &prog->slots[src];
    px_embed_job job = {ex->embed[at], ex->view[src].level[0], ss->w, PX_ARG(in, EMBED, channels), ss->patch_w,
                        ss->patch_h, ss->w / ss->patch_w, ss->patch_count, ex->store[dst],
                        (size_t)prog->slots[dst].w * 4u, px__kernel_portable, 0, 0, 0, NULL, 0};
    int parts = 1; /* the tokens; the AVX2 kernel's halves too */
#if PX_EMBED_X86
    int path = px__embed_path();
    if (path == PX_EMBED_AVX2)
        job.kernel = px__kernel_avx2, job.halves = 1, job.vector_out = 1, parts = 3;
    if (path == PX_EMBED_VNNI)
        job.kernel = px__kernel_vnni, job.vector_out = 2;
    job.gather4 = path != PX_EMBED_PORTABLE && job.pw % 4 == 0;
#if defined(__x86_64__)
    if (path == PX_EMBED_AMX) { /* tiles of tokens, then units of 16 tokens x 64 channels */
        int tiles = (job.ntok + PX_EMBED_TT - 1) / PX_EMBED_TT, chunks = (job.e->d + PX_EMBED_NC - 1) / PX_EMBED_NC;
        size_t bytes = px__tiles_bytes(job.e->k, job.ntok);
        if (!(job.scratch = malloc(bytes)))
            return pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)bytes);
        px_pool_for(ex->pool, tiles, 1, px__amx_gather, &job);
        px_pool_for(ex->pool, tiles * chunks, 1, px__amx_units, &job);
        free(job.scratch);
        return 0;
    }
#endif
#endif
    /* K is bounded by V-EMBED-9 (at most 65793), not by a stack's size: the blocks' tokens are
     * allocated here, once per run */
    int blocks = (job.ntok + PX_EMBED_TB - 1) / PX_EMBED_TB;
    job.block_bytes = px__block_bytes(job.e->k, parts);
    size_t bytes = px__blocks_bytes(job.e->k, job.ntok, parts);
    if (!(job.scratch = malloc(bytes)))
        return pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)bytes);
    /* an input may be borrowed: view[src] holds the caller's bytes */
    px_pool_for(ex->pool, blocks, 1, px__embed_blocks, &job);
    free(job.scratch);
    return 0;
}
