/* embed.c - EMBED on the CPU: each token of an atlas (its patch's K = C * patch_w * patch_h bytes)
 * dotted with every weight row in exact integer arithmetic, then isa/px_sem.h's px_embed_out.
 * Three dot-product paths give the same bits, since each sums the same integer products with no
 * rounding and no saturation: portable C, AVX2 (bytes widened to int16, vpmaddwd) and AVX-512
 * VNNI (vpdpbusd, u8 x s8 into int32, wrapping, never reached by the bound of SPEC V-EMBED-9;
 * its weights packed 16 rows a group so that 16 outputs fill one register).
 * The path is chosen once by CPUID; px_cpu_embed_path forces one (tests). */
#include <stdlib.h>
#include <string.h>

#include "cpu_executor.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define PX_EMBED_X86 1
#else
#define PX_EMBED_X86 0
#endif

/* Token and weight rows are padded with zeros to a multiple of this many bytes (a VNNI vector). */
#define PX_EMBED_PAD 64
/* Tokens a block of work: the VNNI path's 8 x 32 accumulators, 16 of the 32 zmm registers. */
#define PX_EMBED_TB 8

enum { PX_EMBED_AUTO, PX_EMBED_PORTABLE, PX_EMBED_AVX2, PX_EMBED_VNNI };

/* out[i][j] = sum over k < kp of tok[i][k] * w[j][k]: 4 tokens x 4 weight rows at a time, each
 * token and weight row loaded once per step for the 16 sums. */
typedef void (*px_embed_dot_fn)(const uint8_t *const tok[4], const int8_t *const w[4], int kp, int32_t out[4][4]);

static void px__dot_portable(const uint8_t *const tok[4], const int8_t *const w[4], int kp, int32_t out[4][4])
{
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) {
            int32_t sum = 0; /* |sum| <= K * 255 * 128 < 2^31 (V-EMBED-9) */
            for (int k = 0; k < kp; k++)
                sum += (int32_t)tok[i][k] * (int32_t)w[j][k];
            out[i][j] = sum;
        }
}

#if PX_EMBED_X86
__attribute__((target("avx2"))) static int32_t px__hsum256(__m256i v)
{
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
    return _mm_cvtsi128_si32(s);
}

__attribute__((target("avx2"))) static void px__dot_avx2(const uint8_t *const tok[4], const int8_t *const w[4], int kp,
                                                         int32_t out[4][4])
{
    for (int i0 = 0; i0 < 4; i0 += 2) { /* 2 x 4 accumulators: the 16 ymm registers hold them and the operands */
        __m256i acc[2][4];
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 4; j++)
                acc[i][j] = _mm256_setzero_si256();
        for (int k = 0; k < kp; k += 16) {
            __m256i t0 = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(tok[i0] + k)));
            __m256i t1 = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(tok[i0 + 1] + k)));
            for (int j = 0; j < 4; j++) {
                __m256i v = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(w[j] + k)));
                /* vpmaddwd: pairs of int16 products into int32, |2 * 255 * 128| fits: exact */
                acc[0][j] = _mm256_add_epi32(acc[0][j], _mm256_madd_epi16(t0, v));
                acc[1][j] = _mm256_add_epi32(acc[1][j], _mm256_madd_epi16(t1, v));
            }
        }
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 4; j++)
                out[i0 + i][j] = px__hsum256(acc[i][j]);
    }
}

/* AVX-512 VNNI over weights packed 16 rows a group: for each 4 bytes k4 of K, 64 bytes holding
 * the 16 rows' bytes 4 k4 .. 4 k4 + 3 (px__pack16). A token's 4 bytes broadcast against them sum
 * into 16 output lanes at once, so no horizontal sum: out[i][16 g + lane] for PX_EMBED_TB tokens
 * and groups g < ng (1 or 2) starting at w16. */
__attribute__((target("avx512f,avx512bw,avx512vnni"))) static void px__tile_vnni(const uint8_t *const tok[PX_EMBED_TB],
                                                                                  const int8_t *w16, int kp, int ng,
                                                                                  int32_t out[PX_EMBED_TB][32])
{
    __m512i acc[PX_EMBED_TB][2];
    for (int i = 0; i < PX_EMBED_TB; i++)
        acc[i][0] = acc[i][1] = _mm512_setzero_si512();
    const int8_t *w1 = w16 + (size_t)16 * (size_t)kp;
    for (int k4 = 0; k4 < kp / 4; k4++) {
        __m512i b0 = _mm512_loadu_si512((const void *)(w16 + 64 * (size_t)k4));
        __m512i b1 = ng > 1 ? _mm512_loadu_si512((const void *)(w1 + 64 * (size_t)k4)) : _mm512_setzero_si512();
        for (int i = 0; i < PX_EMBED_TB; i++) {
            int32_t word;
            memcpy(&word, tok[i] + 4 * k4, 4);
            __m512i a = _mm512_set1_epi32(word);
            acc[i][0] = _mm512_dpbusd_epi32(acc[i][0], a, b0); /* u8 x s8, 4 products a lane, exact */
            acc[i][1] = _mm512_dpbusd_epi32(acc[i][1], a, b1);
        }
    }
    for (int i = 0; i < PX_EMBED_TB; i++) {
        _mm512_storeu_si512((void *)out[i], acc[i][0]);
        _mm512_storeu_si512((void *)(out[i] + 16), acc[i][1]);
    }
}
#endif

/* Weight rows [D][kp] as VNNI groups: group g, bytes 4 k4 .. + 3 of rows 16 g .. 16 g + 15 (0 past
 * D) at packed[(g * kp/4 + k4) * 64 + 4 * lane + b]. */
static void px__pack16(const int8_t *weights, int d, int kp, int8_t *packed)
{
    for (int g = 0; g < (d + 15) / 16; g++)
        for (int k4 = 0; k4 < kp / 4; k4++)
            for (int lane = 0; lane < 16; lane++)
                for (int b = 0; b < 4; b++) {
                    int o = 16 * g + lane;
                    packed[((size_t)g * (size_t)(kp / 4) + (size_t)k4) * 64u + 4u * (size_t)lane + (size_t)b] =
                        o < d ? weights[(size_t)o * (size_t)kp + 4u * (size_t)k4 + (size_t)b] : 0;
                }
}

static int px__path_supported(int path)
{
#if PX_EMBED_X86
    if (path == PX_EMBED_AVX2)
        return __builtin_cpu_supports("avx2");
    if (path == PX_EMBED_VNNI)
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512vnni");
#endif
    return path == PX_EMBED_PORTABLE;
}

static int px__embed_forced = PX_EMBED_AUTO;

/* The path runs take: forced, else the widest the CPU has. */
static int px__embed_path(void)
{
    if (px__embed_forced != PX_EMBED_AUTO)
        return px__embed_forced;
    return px__path_supported(PX_EMBED_VNNI) ? PX_EMBED_VNNI : px__path_supported(PX_EMBED_AVX2) ? PX_EMBED_AVX2
                                                                                               : PX_EMBED_PORTABLE;
}

/* Tests: force path 1 (portable), 2 (AVX2) or 3 (AVX-512 VNNI), or 0 (CPUID's choice). Returns
 * the path runs now take, or -1 (nothing changed) when this CPU lacks the one asked for. */
int px_cpu_embed_path(int path)
{
    if (path < PX_EMBED_AUTO || path > PX_EMBED_VNNI || (path != PX_EMBED_AUTO && !px__path_supported(path)))
        return -1;
    px__embed_forced = path;
    return px__embed_path();
}

typedef struct {
    const uint8_t *tokens; /* [T][kp] */
    const int8_t *weights; /* [D][kp] */
    const int32_t *bias, *mult, *shift, *wsum;
    uint8_t *dst;
    size_t dst_stride;
    int kp, d, mode, zero_point, out_zero, nbytes, ntok;
    px_embed_dot_fn dot;
    const int8_t *packed; /* the VNNI path: px__pack16 of weights (else NULL) */
} px_embed_job;

/* Token blocks b0..b1-1 (PX_EMBED_TB tokens each; the last block repeats its last token). */
static void px__embed_rows(void *ctx, int b0, int b1)
{
    const px_embed_job *j = ctx;
    for (int b = b0; b < b1; b++) {
        const uint8_t *tok[PX_EMBED_TB];
        int t0 = PX_EMBED_TB * b, nt = j->ntok - t0 < PX_EMBED_TB ? j->ntok - t0 : PX_EMBED_TB;
        for (int i = 0; i < PX_EMBED_TB; i++)
            tok[i] = j->tokens + (size_t)(t0 + (i < nt ? i : nt - 1)) * (size_t)j->kp;
        for (int i = 0; i < nt; i++) /* the padding after the last value */
            memset(j->dst + (size_t)(t0 + i) * j->dst_stride, 0, j->dst_stride);
        int step = j->packed ? 32 : 4;
        for (int o0 = 0; o0 < j->d; o0 += step) {
            int32_t dot[PX_EMBED_TB][32];
            int no = j->d - o0 < step ? j->d - o0 : step;
#if PX_EMBED_X86
            if (j->packed)
                px__tile_vnni(tok, j->packed + (size_t)o0 * (size_t)j->kp, j->kp, no > 16 ? 2 : 1, dot);
#endif
            if (!j->packed) {
                const int8_t *w[4];
                int32_t d4[4][4];
                for (int q = 0; q < 4; q++)
                    w[q] = j->weights + (size_t)(o0 + (q < no ? q : no - 1)) * (size_t)j->kp;
                for (int i0 = 0; i0 < PX_EMBED_TB; i0 += 4) {
                    j->dot(tok + i0, w, j->kp, d4);
                    for (int i = 0; i < 4; i++)
                        memcpy(dot[i0 + i], d4[i], sizeof d4[i]);
                }
            }
            for (int i = 0; i < nt; i++) {
                uint8_t *row = j->dst + (size_t)(t0 + i) * j->dst_stride;
                for (int q = 0; q < no; q++) {
                    int o = o0 + q;
                    /* sum (u - zp) * w = sum u * w - zp * sum w, each part within the V-EMBED-9 bound */
                    int64_t acc = (int64_t)j->bias[o] + dot[i][q] - (int64_t)j->zero_point * j->wsum[o];
                    uint32_t v = px_embed_out(j->mode, (int32_t)acc, j->mult[o], j->shift[o], j->out_zero);
                    for (int by = 0; by < j->nbytes; by++)
                        row[(size_t)o * (size_t)j->nbytes + (size_t)by] = (uint8_t)(v >> (8 * by));
                }
            }
        }
    }
}

static int32_t px__le32(const uint8_t *p)
{
    return (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
}

int px_cpu_run_embed(pxvm_executor *ex, uint32_t s, pxvm_error *err)
{
    const pxvm_program *prog = ex->prog;
    const pxi_insn *in = &prog->insns[prog->steps[s].first];
    int src = PX_ARG(in, EMBED, src), dst = PX_ARG(in, EMBED, dst), wk = PX_ARG(in, EMBED, weights);
    int pk = PX_ARG(in, EMBED, params), c = PX_ARG(in, EMBED, channels), d = PX_ARG(in, EMBED, d);
    const pxvm_slot *ss = &prog->slots[src], *ws = &prog->slots[wk], *ps = &prog->slots[pk], *ds = &prog->slots[dst];
    int pw = ss->patch_w, ph = ss->patch_h, cols = ss->w / pw, ntok = ss->patch_count;
    int k = c * pw * ph, kp = (k + PX_EMBED_PAD - 1) / PX_EMBED_PAD * PX_EMBED_PAD;
    size_t tok_bytes = (size_t)ntok * (size_t)kp, w_bytes = (size_t)d * (size_t)kp;
    size_t pack_bytes = (size_t)(d + 15) / 16u * 16u * (size_t)kp;
    size_t bytes = tok_bytes + w_bytes + (size_t)d * 4u * sizeof(int32_t) + pack_bytes;
    uint8_t *mem = malloc(bytes);
    if (!mem)
        return pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)bytes);
    uint8_t *tokens = mem;
    int8_t *weights = (int8_t *)(mem + tok_bytes);
    int32_t *bias = (int32_t *)(mem + tok_bytes + w_bytes), *mult = bias + d, *shift = mult + d, *wsum = shift + d;
    /* tokens in (c, y, x) order, the order of a ViT Conv2d weight reshaped [D, K] */
    const uint8_t *sp = ex->view[src].level[0]; /* an input may be borrowed: its bytes are the caller's */
    for (int t = 0; t < ntok; t++) {
        uint8_t *tok = tokens + (size_t)t * (size_t)kp;
        int x0 = (t % cols) * pw, y0 = (t / cols) * ph;
        for (int ch = 0; ch < c; ch++)
            for (int y = 0; y < ph; y++)
                for (int x = 0; x < pw; x++)
                    *tok++ = sp[(((size_t)(y0 + y)) * (size_t)ss->w + (size_t)(x0 + x)) * 4u + (size_t)ch];
        memset(tok, 0, (size_t)(kp - k));
    }
    const uint8_t *wp = ex->store[wk], *pp = ex->store[pk];
    for (int o = 0; o < d; o++) {
        int8_t *row = weights + (size_t)o * (size_t)kp;
        memcpy(row, wp + (size_t)o * (size_t)ws->w * 4u, (size_t)k);
        memset(row + k, 0, (size_t)(kp - k));
        int32_t sum = 0;
        for (int i = 0; i < k; i++)
            sum += row[i];
        wsum[o] = sum;
        bias[o] = px__le32(pp + 4u * (size_t)o);
        int three = ps->h >= 3 && PX_ARG(in, EMBED, mode) != PX_EMBED_MODE_I32;
        mult[o] = three ? px__le32(pp + 4u * ((size_t)ps->w + (size_t)o)) : 0;
        shift[o] = three ? px__le32(pp + 4u * (2u * (size_t)ps->w + (size_t)o)) : 0;
    }
    px_embed_job job = {tokens, weights, bias, mult, shift, wsum, ex->store[dst], (size_t)ds->w * 4u, kp, d,
                        PX_ARG(in, EMBED, mode), PX_ARG(in, EMBED, zero_point), (int8_t)PX_ARG(in, EMBED, out_zero),
                        px_embed_out_bytes(PX_ARG(in, EMBED, mode)), ntok, px__dot_portable, NULL};
#if PX_EMBED_X86
    int path = px__embed_path();
    job.dot = path == PX_EMBED_AVX2 ? px__dot_avx2 : px__dot_portable;
    if (path == PX_EMBED_VNNI) {
        int8_t *packed = (int8_t *)(mem + bytes - pack_bytes);
        px__pack16(weights, d, kp, packed);
        job.packed = packed;
    }
#endif
    px_pool_for(ex->pool, (ntok + PX_EMBED_TB - 1) / PX_EMBED_TB, 1, px__embed_rows, &job);
    free(mem);
    return 0;
}
