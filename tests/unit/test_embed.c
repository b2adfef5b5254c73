/* test_embed.c - EMBED: the requantization rules of isa/px_sem.h at their edges (gemmlowp's
 * SaturatingRoundingDoublingHighMul and RoundingDivideByPOT, the bf16 rounding); random programs
 * (modes, channels, zero points, patch sizes whose K is not a multiple of 4, D and token counts
 * that fill no tile) on the CPU executor's every dot-product path against an int64 reference and
 * against the CUDA kernel's own tile functions run on the host (the CPU twin of embed.cu); and
 * the edge pairs of SPEC's V-EMBED-* rules, built by px_embed_rule_case for test_rules.c. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <fenv.h>
#include <stdlib.h>
#include <string.h>

#include "../../executors/registry.h"
#include "../../isa/px_sem.h"
#include "../../vm/resize.h"
#include "test.h"

/* executors/cpu/embed.c: force a dot-product path (1 portable, 2 AVX2, 3 AVX-512 VNNI, 0 auto) */
int px_cpu_embed_path(int path);

/* ---- the rules ------------------------------------------------------------------------------ */

TEST(embed_gemmlowp_rules)
{
    /* SRDHM(a, b) = round(a * b / 2^31), halves up (toward +infinity: gemmlowp's nudge 1 - 2^30
     * for a negative product, then C's truncation); saturates INT32_MIN^2 only */
    CHECK_EQ(px_srdhm(INT32_MIN, INT32_MIN), INT32_MAX);
    CHECK_EQ(px_srdhm(INT32_MAX, INT32_MAX), INT32_MAX - 1);
    CHECK_EQ(px_srdhm(1 << 30, 3), 2);   /* 1.5 -> 2 */
    CHECK_EQ(px_srdhm(1 << 30, -3), -1); /* -1.5 -> -1 */
    CHECK_EQ(px_srdhm(1 << 30, 1), 1);   /* 0.5 -> 1 */
    CHECK_EQ(px_srdhm(1 << 30, -1), 0);  /* -0.5 -> 0 */
    CHECK_EQ(px_srdhm(3 << 29, -1), -1); /* -0.75 -> -1 */
    CHECK_EQ(px_srdhm(100, 1 << 30), 50);
    /* RDBPOT(x, e) = x / 2^e, halves away from zero */
    CHECK_EQ(px_rdbpot(5, 1), 3);
    CHECK_EQ(px_rdbpot(-5, 1), -3);
    CHECK_EQ(px_rdbpot(4, 3), 1);  /* 0.5 */
    CHECK_EQ(px_rdbpot(3, 3), 0);  /* 0.375 */
    CHECK_EQ(px_rdbpot(-4, 3), -1);
    CHECK_EQ(px_rdbpot(-3, 3), 0);
    CHECK_EQ(px_rdbpot(INT32_MIN, 31), -1);
    CHECK_EQ(px_rdbpot(INT32_MAX, 31), 1);
    CHECK_EQ(px_rdbpot(7, 0), 7);
    /* requant: multiplier 2^30 is 0.5, shift -1 halves again; out_zero then int8's range */
    CHECK_EQ(px_embed_requant_i8(100, 1 << 30, -1, 0), 25);
    CHECK_EQ(px_embed_requant_i8(-102, 1 << 30, -1, 0), -26); /* -25.5 away from zero */
    CHECK_EQ(px_embed_requant_i8(1000, 1 << 30, 0, 0), 127);
    CHECK_EQ(px_embed_requant_i8(-1000, 1 << 30, 0, 0), -128);
    CHECK_EQ(px_embed_requant_i8(254, 1 << 30, 0, 1), 127);  /* 127 + 1 clamps */
    CHECK_EQ(px_embed_requant_i8(3, 1 << 30, 2, -10), -4);   /* 3 * 4 * 0.5 - 10 */
}

TEST(embed_bf16_rounds_once_to_nearest_even)
{
    /* multiplier 2^30, shift 1: the scale is exactly 1, the value acc itself */
    CHECK_EQ(px_embed_bf16(0, 1 << 30, 1), 0);
    CHECK_EQ(px_embed_bf16(1, 1 << 30, 1), 0x3F80u);
    CHECK_EQ(px_embed_bf16(-1, 1 << 30, 1), 0xBF80u);
    CHECK_EQ(px_embed_bf16(256, 1 << 30, 1), 0x4380u);
    CHECK_EQ(px_embed_bf16(257, 1 << 30, 1), 0x4380u); /* tie: to 256, even */
    CHECK_EQ(px_embed_bf16(259, 1 << 30, 1), 0x4382u); /* tie: to 260, even */
    CHECK_EQ(px_embed_bf16(258, 1 << 30, 1), 0x4381u);
    CHECK_EQ(px_embed_bf16(511, 1 << 30, 1), 0x4400u); /* rounds up into the next binade: 512 */
    /* the largest magnitude: (2^31 - 1)^2 * 2^-1 rounds up to 2^61, exponent 61 + 127 = 188 */
    CHECK_EQ(px_embed_bf16(INT32_MAX, INT32_MAX, 30), 188u << 7);
    /* the smallest magnitude: 1 * 1 * 2^-62, still normal in bf16 */
    CHECK_EQ(px_embed_bf16(1, 1, -31), (uint32_t)(-62 + 127) << 7);
}

/* PXVM_CPU_EMBED picks a path this CPU has (benchmarks), a name it does not know or a path the CPU
 * lacks leaves CPUID's choice; a forced path (tests) comes first. */
TEST(embed_cpu_path_from_the_environment)
{
    int cpuid = px_cpu_embed_path(0);
    setenv("PXVM_CPU_EMBED", "portable", 1);
    CHECK_EQ(px_cpu_embed_path(0), 1);
    if (px_cpu_embed_path(2) == 2) { /* forced beats the environment */
        setenv("PXVM_CPU_EMBED", "avx2", 1);
        CHECK_EQ(px_cpu_embed_path(0), 2);
        setenv("PXVM_CPU_EMBED", "portable", 1);
        CHECK_EQ(px_cpu_embed_path(2), 2);
    }
    setenv("PXVM_CPU_EMBED", "avx-512", 1);
    CHECK_EQ(px_cpu_embed_path(0), cpuid);
    unsetenv("PXVM_CPU_EMBED");
    CHECK_EQ(px_cpu_embed_path(0), cpuid);
}

/* ---- random programs ------------------------------------------------------------------------ */

typedef struct {
    int c, pw, ph, cols, prow, count, d, mode, zp, out_zero;
    int dot_first;                    /* a DOT_RGB before EMBED: a run may stop before it */
    pxvm_image atlas;                 /* the input: cols x prow patches */
    int8_t *w;                        /* [d][k] */
    int32_t *bias, *mult, *shift;     /* [d] */
} px_emb_case;

static uint32_t px__rand(uint32_t *s)
{
    *s ^= *s << 13, *s ^= *s >> 17, *s ^= *s << 5;
    return *s;
}

/* The CUDA branch of px_embed_bf16 (isa/px_sem.h: binary32 toward zero with a sticky last bit,
 * i.e. rounding to odd, then to nearest even at 8 bits), transcribed with the host's conversion
 * toward zero: it must give the integer loop's bits for every input, ties above all. */
static uint32_t px__bf16_by_round_to_odd(int32_t acc, int32_t mult, int shift)
{
    int64_t v = (int64_t)acc * (int64_t)mult;
    int mode = fegetround();
    fesetround(FE_TOWARDZERO);
    volatile int64_t vv = v;
    volatile float f = (float)vv;
    fesetround(mode);
    float ff = f;
    uint32_t b;
    memcpy(&b, &ff, sizeof b);
    b |= (int64_t)ff != v ? 1u : 0u;
    b = (b + 0x7FFFu + (b >> 16 & 1u)) >> 16;
    return ff != 0.0f ? (uint32_t)((int32_t)b + (shift - 31) * 128) : 0u;
}

TEST(embed_bf16_gpu_rounding_equals_the_integer_rule)
{
    long checked = 0, bad = 0;
    uint32_t s = 12345u;
    for (int r = 1; r <= 30; r++) /* exact ties at every position, their neighbours, and both signs */
        for (int32_t q = 128; q < 256; q++)
            for (int d = -1; d <= 1; d++)
                for (int sign = -1; sign <= 1; sign += 2) {
                    int64_t a = ((int64_t)q << r) + (r ? (int64_t)1 << (r - 1) : 0) + d;
                    if (a > INT32_MAX)
                        continue;
                    for (int m = 0; m < 5; m++) {
                        int32_t mult = m == 0 ? 1 : (m == 1 ? 1 << 30 : (m == 2 ? INT32_MAX : (m == 3 ? -3 : INT32_MIN + 1)));
                        int shift = (int)(px__rand(&s) % 62u) - 31;
                        shift = shift > 30 ? 30 : shift;
                        uint32_t want = px_embed_bf16((int32_t)(sign * a), mult, shift);
                        bad += px__bf16_by_round_to_odd((int32_t)(sign * a), mult, shift) != want;
                        checked++;
                    }
                }
    /* ties and near-ties of the product itself: odd m, and acc = c + 2^R j with acc * m = T (mod
     * 2^R), T = 2^(R - 1) + delta, its leading bit at R + 7 (R bits dropped): with small m and large
     * acc the deciding bits lie far below the leading one (the sticky bit of the conversion) */
    for (int32_t m = 1; m < 128; m += 2)
        for (int R = 1; R <= 30; R++)
            for (int delta = -2; delta <= 2; delta++) {
                uint64_t mod = 1ull << R, minv = 1u; /* m^-1 mod 2^R by Newton's iteration */
                for (int it = 0; it < 6; it++)
                    minv = minv * (2u - (uint64_t)m * minv) & (mod - 1u);
                uint64_t c = (uint64_t)(((int64_t)1 << (R - 1)) + delta) * minv & (mod - 1u);
                uint64_t lo = ((1ull << (R + 7)) + (uint64_t)m - 1u) / (uint64_t)m;
                uint64_t acc = c + (lo > c ? (lo - c + mod - 1u) / mod * mod : 0u);
                if (acc > INT32_MAX || (acc * (uint64_t)m) >> (R + 8))
                    continue;
                for (int sign = -1; sign <= 1; sign += 2)
                    for (int shift = -3; shift <= 3; shift += 3) {
                        int32_t a32 = (int32_t)(sign * (int64_t)acc), m32 = sign * (int32_t)m;
                        bad += px__bf16_by_round_to_odd(a32, m, shift) != px_embed_bf16(a32, m, shift);
                        bad += px__bf16_by_round_to_odd((int32_t)acc, m32, shift) != px_embed_bf16((int32_t)acc, m32, shift);
                        checked += 2;
                    }
            }
    for (int i = 0; i < 2000000; i++) {
        int32_t acc = (int32_t)px__rand(&s) >> (px__rand(&s) % 32u);
        int32_t mult = (int32_t)(px__rand(&s) & 0x7FFFFFFFu) >> (px__rand(&s) % 31u);
        mult = px__rand(&s) & 1u ? -mult : mult;
        int shift = (int)(px__rand(&s) % 62u) - 31;
        shift = shift > 30 ? 30 : shift;
        bad += px__bf16_by_round_to_odd(acc, mult, shift) != px_embed_bf16(acc, mult, shift);
        checked++;
    }
    CHECK_EQ(bad, 0);
    CHECK(checked > 2000000);
}

static int px__k(const px_emb_case *e) { return e->c * e->pw * e->ph; }
static int px__dst_w(const px_emb_case *e) { return (e->d * px_embed_out_bytes(e->mode) + 3) / 4; }

/* The case's atlas, weights and parameters, random from s, for the shape and modes already in e. */
static void px__case_fill(px_emb_case *e, uint32_t s)
{
    int k = px__k(e);
    pxvm_image_alloc(&e->atlas, e->cols * e->pw, e->prow * e->ph, NULL);
    for (size_t i = 0; i < (size_t)e->atlas.w * (size_t)e->atlas.h * 4u; i++)
        e->atlas.px[i] = (uint8_t)px__rand(&s);
    e->w = malloc((size_t)e->d * (size_t)k);
    e->bias = malloc(sizeof(int32_t) * 3u * (size_t)e->d);
    e->mult = e->bias + e->d, e->shift = e->mult + e->d;
    for (size_t i = 0; i < (size_t)e->d * (size_t)k; i++)
        e->w[i] = (int8_t)(uint8_t)px__rand(&s);
    int64_t terms = (int64_t)k * PX_EMBED_TERM_MAX;
    for (int o = 0; o < e->d; o++) {
        int32_t b = (int32_t)(px__rand(&s) % 2000001u) - 1000000;
        if (o == 0) /* the bound itself */
            b = (int32_t)(INT32_MAX - terms) * (px__rand(&s) % 2 ? 1 : -1);
        e->bias[o] = b;
        e->mult[o] = (int32_t)((1u << 30) + px__rand(&s) % (1u << 30));
        int sh = -(int)(px__rand(&s) % 24);
        int64_t bound = terms + (b < 0 ? -(int64_t)b : b);
        while (e->mode == PX_EMBED_MODE_BF16 && sh < 30 && px__rand(&s) % 3 == 0)
            sh += 7;
        if (e->mode == PX_EMBED_MODE_I8 && o % 5 == 1)
            for (sh = 0; sh < 30 && (bound << (sh + 1)) <= INT32_MAX;)
                sh++; /* the largest left shift the rule admits */
        e->shift[o] = sh > 30 ? 30 : sh;
    }
}

static void px__case_make(px_emb_case *e, uint32_t seed)
{
    uint32_t s = seed * 2654435761u + 1u;
    static const int chans[] = {1, 3, 4};
    e->c = chans[px__rand(&s) % 3];
    e->pw = 1 + (int)(px__rand(&s) % 9), e->ph = 1 + (int)(px__rand(&s) % 9);
    e->cols = 1 + (int)(px__rand(&s) % 6), e->prow = 1 + (int)(px__rand(&s) % 12);
    e->count = e->cols * e->prow - (int)(px__rand(&s) % (unsigned)e->cols); /* a last row part full */
    e->d = 1 + (int)(px__rand(&s) % 150);
    e->mode = (int)(px__rand(&s) % 3);
    e->zp = px__rand(&s) % 2 ? 0 : (int)(px__rand(&s) % 256);
    e->out_zero = e->mode == PX_EMBED_MODE_I8 ? (int)(px__rand(&s) % 256) - 128 : 0;
    px__case_fill(e, s);
}

static void px__case_free(px_emb_case *e)
{
    pxvm_image_free(&e->atlas);
    free(e->w);
    free(e->bias);
}

static void px__put32(pxvm_image *img, int x, int y, int32_t v) { px_set(img, x, y, (uint32_t)v); }

/* The program: slot 1 the input atlas, 2 the weights, 3 the params, 4 the output. */
static int px__case_program(const px_emb_case *e, pxvm_image *out, pxvm_error *err)
{
    int k = px__k(e), wt = (k + 3) / 4, rows = e->mode == PX_EMBED_MODE_I32 ? 1 : 3;
    int width = e->d > wt ? e->d : wt;
    pxvm_builder b;
    pxvm_build_init(&b, width < 16 ? 16 : width);
    int src = pxvm_build_slot(&b, PXI_ROLE_INPUT, "img", e->atlas.w, e->atlas.h);
    pxvm_build_patches(&b, src, e->pw, e->ph, e->count);
    pxvm_image wi, pi;
    pxvm_image_alloc(&wi, wt, e->d, NULL);
    pxvm_image_alloc(&pi, e->d, rows, NULL);
    for (int o = 0; o < e->d; o++) {
        memcpy(wi.px + (size_t)o * (size_t)wt * 4u, e->w + (size_t)o * (size_t)k, (size_t)k);
        for (int pad = k; pad < 4 * wt; pad++) /* padding bytes are ignored: make them loud */
            wi.px[(size_t)o * (size_t)wt * 4u + (size_t)pad] = 0xA5;
        px__put32(&pi, o, 0, e->bias[o]);
        if (rows == 3)
            px__put32(&pi, o, 1, e->mult[o]), px__put32(&pi, o, 2, e->shift[o]);
    }
    int wk = pxvm_build_data_slot(&b, "w", &wi), pk = pxvm_build_data_slot(&b, "p", &pi);
    int dst = pxvm_build_slot(&b, PXI_ROLE_OUTPUT, "emb", px__dst_w(e), e->count);
    uint32_t dot = e->dot_first ? pxvm_build_insn(&b, PX_OP_DOT_RGB, NULL) : 0;
    int32_t f[PXI_MAX_FIELDS] = {0};
    f[PX_FI(EMBED, src)] = src, f[PX_FI(EMBED, dst)] = dst, f[PX_FI(EMBED, mode)] = e->mode;
    f[PX_FI(EMBED, weights)] = wk, f[PX_FI(EMBED, params)] = pk, f[PX_FI(EMBED, channels)] = e->c;
    f[PX_FI(EMBED, zero_point)] = e->zp, f[PX_FI(EMBED, d)] = e->d, f[PX_FI(EMBED, out_zero)] = e->out_zero & 255;
    pxvm_build_insn(&b, PX_OP_EMBED, f);
    pxvm_build_insn(&b, PX_OP_HALT, NULL);
    if (e->dot_first) { /* zero rows: the sum is 0, no trap; what matters is that one could come */
        uint8_t zeros[4 * 4] = {0};
        int r0 = pxvm_build_row(&b, zeros, 4), r1 = pxvm_build_row(&b, zeros, 1);
        pxvm_build_patch(&b, dot, PX_FI(DOT_RGB, row_a), r0);
        pxvm_build_patch(&b, dot, PX_FI(DOT_RGB, row_b), r0);
        pxvm_build_patch(&b, dot, PX_FI(DOT_RGB, row_out), r1);
    }
    pxvm_image_free(&wi);
    pxvm_image_free(&pi);
    int rc = pxvm_build_finish(&b, out, err);
    pxvm_build_free(&b);
    return rc;
}

/* SPEC's rule transcribed: int64 sums of (token - zero_point) * weight, bias, px_embed_out. */
static pxvm_image px__case_reference(const px_emb_case *e)
{
    int k = px__k(e), nb = px_embed_out_bytes(e->mode);
    pxvm_image r;
    pxvm_image_alloc(&r, px__dst_w(e), e->count, NULL);
    for (int t = 0; t < e->count; t++)
        for (int o = 0; o < e->d; o++) {
            int64_t acc = e->bias[o];
            for (int kk = 0; kk < k; kk++) {
                int ch = kk / (e->pw * e->ph), y = kk / e->pw % e->ph, x = kk % e->pw;
                int ax = (t % e->cols) * e->pw + x, ay = (t / e->cols) * e->ph + y;
                int u = e->atlas.px[((size_t)ay * (size_t)e->atlas.w + (size_t)ax) * 4u + (size_t)ch];
                acc += (int64_t)(u - e->zp) * e->w[(size_t)o * (size_t)k + (size_t)kk];
            }
            CHECK(acc >= INT32_MIN && acc <= INT32_MAX);
            uint32_t v = px_embed_out(e->mode, (int32_t)acc, e->mult[o], e->shift[o], e->out_zero);
            for (int b = 0; b < nb; b++)
                r.px[(size_t)t * (size_t)r.w * 4u + (size_t)(o * nb + b)] = (uint8_t)(v >> (8 * b));
        }
    return r;
}

/* ---- the CPU twins of embed.cu's kernels: its tile functions, block by block, thread by thread -- */
typedef struct {
    const pxvm_image *img[3]; /* atlas, weights, params */
    pxvm_image *dst;
} px_emb_twin;
#define PX_EMB_CTX const px_emb_twin *
#define PX_EMB_TEXEL(ctx, which, x, y) px_px((ctx)->img[which], (x), (y))
#define PX_EMB_STORE(ctx, x, y, v) px_set((ctx)->dst, (x), (y), (v))
#include "../../executors/cuda_gl/embed_tile.h"

static void px__twin(const px_emb_case *e, const pxvm_image *weights, const pxvm_image *params, pxvm_image *dst)
{
    px_emb_twin tw = {{&e->atlas, weights, params}, dst};
    px_emb_geom g = {e->c, e->pw, e->ph, e->cols, e->count, px__k(e), (px__k(e) + 3) / 4, e->d, e->mode, e->zp, e->out_zero};
    static px_emb_smem sm;
    static int32_t acc[PX_EMB_THREADS][4][4], wsum[PX_EMB_THREADS][4];
    for (int t0 = 0; t0 < g.ntok; t0 += PX_EMB_TT)
        for (int o0 = 0; o0 < g.d; o0 += PX_EMB_TD) {
            memset(acc, 0, sizeof acc);
            memset(wsum, 0, sizeof wsum);
            for (int p0 = 0; p0 < g.pw * g.ph; p0 += PX_EMB_PX) {
                for (int tid = 0; tid < PX_EMB_THREADS; tid++) /* __syncthreads() between the loops */
                    px_emb_load(&tw, &g, &sm, tid, t0, o0, p0);
                for (int tid = 0; tid < PX_EMB_THREADS; tid++)
                    px_emb_compute(&sm, tid, acc[tid], wsum[tid]);
            }
            for (int tid = 0; tid < PX_EMB_THREADS; tid++)
                px_emb_epilogue(&tw, &g, tid, t0, o0, acc[tid], wsum[tid]);
        }
}

/* One warp's mma.sync.m16n8k32.row.col.s32.u8.s8.s32 as the PTX ISA defines it ("Matrix
 * Fragments for mma.m16n8k32", 8-bit types): the 32 lanes' registers give A (16 x 32 u8), B
 * (32 x 8 s8) and C (16 x 8 s32) by the documented fragment layout, D = A B + C goes back the
 * same way. (g = lane / 4, t = lane % 4; A element i of a lane: row g + 8 for i in 4..7 and
 * 12..15, column 4t + i % 4, + 16 for i >= 8; B element i: row 4t + i % 4, + 16 for i >= 4,
 * column g; C element i: row g + 8 for i >= 2, column 2t + i % 2.) */
static void px__mma_warp(uint32_t a[32][4], uint32_t b[32][2], int32_t c[32][4])
{
    int A[16][32], B[32][8];
    int64_t C[16][8];
    for (int lane = 0; lane < 32; lane++) {
        int g = lane / 4, t = lane % 4;
        for (int i = 0; i < 16; i++) {
            int row = g + ((i >= 4 && i < 8) || i >= 12 ? 8 : 0), col = 4 * t + i % 4 + (i >= 8 ? 16 : 0);
            A[row][col] = (int)(a[lane][i / 4] >> (8 * (i % 4)) & 255u);
        }
        for (int i = 0; i < 8; i++)
            B[4 * t + i % 4 + (i >= 4 ? 16 : 0)][g] = (int)(int8_t)(uint8_t)(b[lane][i / 4] >> (8 * (i % 4)));
        for (int i = 0; i < 4; i++)
            C[g + (i >= 2 ? 8 : 0)][2 * t + i % 2] = c[lane][i];
    }
    for (int lane = 0; lane < 32; lane++) {
        int g = lane / 4, t = lane % 4;
        for (int i = 0; i < 4; i++) {
            int row = g + (i >= 2 ? 8 : 0), col = 2 * t + i % 2;
            int64_t sum = C[row][col];
            for (int k = 0; k < 32; k++)
                sum += (int64_t)A[row][k] * B[k][col];
            c[lane][i] = (int32_t)sum;
        }
    }
}

/* ldmatrix.sync.aligned.m8n8.x4.b16 as the PTX ISA defines it: the rows of matrix i (8 rows of
 * 16 bytes) at the addresses lanes 8i .. 8i + 7 give; lane l receives in register i the 32-bit
 * word l % 4 of row l / 4 of matrix i. */
static void px__ldmatrix_x4(const uint8_t *smem, const int addr[32], uint32_t r[32][4])
{
    for (int lane = 0; lane < 32; lane++)
        for (int i = 0; i < 4; i++) {
            const uint8_t *p = smem + addr[8 * i + lane / 4] + 4 * (lane % 4);
            r[lane][i] = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
        }
}

/* px__k_embed_stage and px__k_embed_gemm of embed.cu on the host: the staged token rows and the
 * packed weights, each stage's tiles copied to their swizzled places, the warps' fragments by the
 * emulated ldmatrix, the documented mma, the accumulator table and the epilogue. One item: the kernels index items as rows
 * item * ntok + token, which the GPU check covers with batches. */
/* wgmma's read of operand element (row r, byte k < 32) of a K-major tile with the 128-byte swizzle,
 * from its descriptor as the PTX ISA defines the fields (start address >> 4 in bits 0-13, the
 * stride between 8-row groups >> 4 in bits 32-45, swizzle mode 1 = 128 bytes in bits 62-63): the
 * row's address start + (r / 8) stride + (r % 8) 128 + k, whose 16-byte chunk bits 4-6 are XORed
 * with bits 7-9. smem: the 1024-aligned stage, at shared address 0. */
static uint8_t px__wg_read(const uint8_t *smem, uint64_t desc, int r, int k)
{
    uint32_t start = (uint32_t)(desc & 0x3FFFu) << 4, stride = (uint32_t)(desc >> 32 & 0x3FFFu) << 4;
    if (desc >> 62 != 1u || stride != 1024u)
        return 0xEE; /* not the layout the kernel writes: the comparison fails */
    uint32_t a = start + (uint32_t)(r / 8) * stride + (uint32_t)(r % 8) * 128u + (uint32_t)k;
    return smem[a ^ ((a >> 7 & 7u) << 4)];
}

/* Where the PTX ISA puts element (row, col) of wgmma's m64nN s32 accumulators: thread t of the
 * warpgroup (warp t / 32 holds rows 16 (t / 32)..) register i: row 16 (t / 32) + (t % 32) / 4 + 8
 * (i % 4 / 2), column 8 (i / 4) + 2 (t % 4) + i % 2. Written here apart from px_emb_wg_acc_at,
 * which the kernel's epilogue uses, so that a wrong epilogue map fails the comparison. */
static void px__wg_frag(int t, int i, int *row, int *col)
{
    *row = 16 * (t / 32) + t % 32 / 4 + 8 * (i % 4 / 2);
    *col = 8 * (i / 4) + 2 * (t % 4) + i % 2;
}

/* One k tile of the sm_90a path: each warpgroup's 4 wgmma (k steps of 32 bytes) of its 64 rows x
 * 128 channels, into its threads' accumulators d[thread][i] (px__wg_frag). */
static void px__twin_wgmma_tile(const uint8_t *as, const uint8_t *bs, int32_t d[PX_EMB_GEMM_THREADS][64])
{
    static int64_t D[64][128];
    for (int wg = 0; wg < PX_EMB_GEMM_THREADS / 128; wg++) {
        for (int t = 0; t < 128; t++) /* the threads' accumulators, as wgmma's D operand */
            for (int i = 0; i < 64; i++) {
                int row, col;
                px__wg_frag(t, i, &row, &col);
                D[row][col] = d[128 * wg + t][i];
            }
        for (int ks = 0; ks < PX_EMB_BK / 32; ks++) {
            uint64_t da = px_emb_wg_desc((uint32_t)px_emb_wg_start(64 * wg, ks));
            uint64_t db = px_emb_wg_desc((uint32_t)px_emb_wg_start(0, ks));
            for (int r = 0; r < 64; r++)
                for (int n = 0; n < 128; n++) {
                    int64_t sum = D[r][n];
                    for (int k = 0; k < 32; k++)
                        sum += (int64_t)px__wg_read(as, da, r, k) * (int8_t)px__wg_read(bs, db, n, k);
                    D[r][n] = (int32_t)sum;
                }
        }
        for (int t = 0; t < 128; t++)
            for (int i = 0; i < 64; i++) {
                int row, col;
                px__wg_frag(t, i, &row, &col);
                d[128 * wg + t][i] = (int32_t)D[row][col];
            }
    }
}

static void px__twin_gemm(const px_emb_case *e, const pxvm_image *weights, const pxvm_image *params, pxvm_image *dst,
                          int wgmma)
{
    px_emb_twin tw = {{&e->atlas, weights, params}, dst};
    px_emb_geom g = {e->c, e->pw, e->ph, e->cols, e->count, px__k(e), (px__k(e) + 3) / 4, e->d, e->mode, e->zp, e->out_zero};
    int kb = PX_EMB_KB(g.k), dpad = (g.d + PX_EMB_BN - 1) / PX_EMB_BN * PX_EMB_BN, rows = g.ntok;
    uint8_t *tok = calloc((size_t)rows * (size_t)kb, 1u), *w = calloc((size_t)dpad * (size_t)kb, 1u);
    int32_t *par = calloc(4u * (size_t)g.d, sizeof(int32_t));
    for (int m = 0; m < rows; m++)
        for (int y = 0; y < g.ph; y++)
            px_emb_stage_row(&tw, &g, m, y, tok + (size_t)m * (size_t)kb);
    px_emb_pack(&tw, &g, kb, w, par);
    static uint8_t as[PX_EMB_BM * PX_EMB_BK], bs[PX_EMB_BN * PX_EMB_BK];
    static int32_t c[8][4][4][32][4], tab[PX_EMB_BM * PX_EMB_OUT_ROW];
    static uint32_t a[4][32][4], b[2][32][4], bb[32][2];
    static int32_t wd[PX_EMB_GEMM_THREADS][64];
    for (int m0 = 0; m0 < rows; m0 += PX_EMB_BM)
        for (int n0 = 0; n0 < dpad; n0 += PX_EMB_BN) {
            memset(c, 0, sizeof c);
            memset(wd, 0, sizeof wd);
            for (int kt = 0; kt < kb / PX_EMB_BK; kt++) {
                for (int row = 0; row < PX_EMB_BM; row++)
                    for (int ch = 0; ch < PX_EMB_BK / 16; ch++) {
                        size_t off = (size_t)kt * PX_EMB_BK + (size_t)ch * 16u;
                        if (m0 + row < rows)
                            memcpy(as + px_emb_swizzle(row, ch), tok + (size_t)(m0 + row) * (size_t)kb + off, 16);
                        else
                            memset(as + px_emb_swizzle(row, ch), 0, 16);
                        memcpy(bs + px_emb_swizzle(row, ch), w + (size_t)(n0 + row) * (size_t)kb + off, 16);
                    }
                if (wgmma) {
                    px__twin_wgmma_tile(as, bs, wd);
                    continue;
                }
                for (int warp = 0; warp < PX_EMB_GEMM_THREADS / 32; warp++)
                    for (int ks = 0; ks < PX_EMB_BK / 32; ks++) {
                        int wm = 64 * (warp & 1), wn = 32 * (warp >> 1), addr[32];
                        for (int mt = 0; mt < 4; mt++) {
                            for (int lane = 0; lane < 32; lane++)
                                addr[lane] = px_emb_ldm_a(wm + 16 * mt, ks, lane);
                            px__ldmatrix_x4(as, addr, a[mt]);
                        }
                        for (int np = 0; np < 2; np++) {
                            for (int lane = 0; lane < 32; lane++)
                                addr[lane] = px_emb_ldm_b(wn + 16 * np, ks, lane);
                            px__ldmatrix_x4(bs, addr, b[np]);
                        }
                        for (int mt = 0; mt < 4; mt++)
                            for (int nt = 0; nt < 4; nt++) {
                                for (int lane = 0; lane < 32; lane++)
                                    bb[lane][0] = b[nt / 2][lane][2 * (nt % 2)], bb[lane][1] = b[nt / 2][lane][2 * (nt % 2) + 1];
                                px__mma_warp(a[mt], bb, c[warp][mt][nt]);
                            }
                    }
            }
            if (wgmma) { /* the sm_90a epilogue: each thread's pairs stored from its registers */
                for (int t = 0; t < PX_EMB_GEMM_THREADS; t++)
                    for (int i = 0; i < 64; i += 2) {
                        uint32_t tx[2], other[2];
                        int row, col, x, xo, lane = t % 32;
                        px_emb_wg_acc_at(t / 32, lane, i, &row, &col);
                        px_emb_chan ch[2] = {px_emb_chan_of(&g, par, n0 + col), px_emb_chan_of(&g, par, n0 + col + 1)};
                        int n = px_emb_pair_out(&g, ch, n0 + col, wd[t][i], wd[t][i + 1], tx, &x);
                        if (g.mode == PX_EMBED_MODE_I8) { /* the shuffle: lane ^ 1's half of the texel */
                            int prow, pcol;
                            px_emb_wg_acc_at(t / 32, lane ^ 1, i, &prow, &pcol);
                            px_emb_chan pch[2] = {px_emb_chan_of(&g, par, n0 + pcol), px_emb_chan_of(&g, par, n0 + pcol + 1)};
                            px_emb_pair_out(&g, pch, n0 + pcol, wd[t ^ 1][i], wd[t ^ 1][i + 1], other, &xo);
                            tx[0] |= other[0];
                            if (lane & 1)
                                n = 0;
                        }
                        for (int j = 0; j < n && m0 + row < rows; j++)
                            px_set(dst, x + j, m0 + row, tx[j]);
                    }
                continue;
            }
            for (int warp = 0; warp < 8; warp++)
                for (int lane = 0; lane < 32; lane++)
                    for (int mt = 0; mt < 4; mt++)
                        for (int nt = 0; nt < 4; nt++)
                            for (int r = 0; r < 4; r++) {
                                int row, col;
                                px_emb_acc_at(warp, lane, mt, nt, r, &row, &col);
                                tab[row * PX_EMB_OUT_ROW + col] = c[warp][mt][nt][lane][r];
                            }
            for (int grp = 0; grp < PX_EMB_BN / 4; grp++) {
                int ob = n0 + 4 * grp, x0;
                px_emb_chan ch[4];
                for (int j = 0; j < 4; j++)
                    ch[j] = px_emb_chan_of(&g, par, ob + j);
                for (int row = 0; row < PX_EMB_BM && m0 + row < rows && ob < g.d; row++) {
                    uint32_t tx[4];
                    for (int n = px_emb_group_out(&g, ch, ob, &tab[row * PX_EMB_OUT_ROW + 4 * grp], tx, &x0), j = 0; j < n; j++)
                        px_set(dst, x0 + j, m0 + row, tx[j]);
                }
            }
        }
    free(tok);
    free(w);
    free(par);
}

/* A data slot's pixels, read back from the loaded program image. */
static pxvm_image px__data_of(const pxvm_program *prog, int k)
{
    const pxvm_slot *s = &prog->slots[k];
    pxvm_image r;
    pxvm_image_alloc(&r, s->w, s->h, NULL);
    for (int y = 0; y < s->h; y++)
        memcpy(r.px + (size_t)y * (size_t)s->w * 4u,
               prog->image.px + ((size_t)(s->data_y + y) * (size_t)prog->image.w + (size_t)s->data_x) * 4u, (size_t)s->w * 4u);
    return r;
}

static int px__compare(const char *what, uint32_t seed, const px_emb_case *e, const pxvm_image *got, const pxvm_image *want)
{
    size_t n = (size_t)want->w * (size_t)want->h * 4u;
    for (size_t i = 0; i < n; i++)
        if (got->px[i] != want->px[i]) {
            px_test_fail(__FILE__, __LINE__,
                         "%s, seed %u (C %d, %dx%d patches, %d tokens, d %d, mode %d, zp %d): byte %zu is %u, want %u", what,
                         seed, e->c, e->pw, e->ph, e->count, e->d, e->mode, e->zp, i, got->px[i], want->px[i]);
            return 1;
        }
    return 0;
}

TEST(embed_random_programs_every_path_and_the_gpu_twin)
{
    int paths = 0;
    for (uint32_t seed = 1; seed <= 40; seed++) {
        px_emb_case e;
        px__case_make(&e, seed);
        pxvm_image img, want = px__case_reference(&e);
        pxvm_error err;
        if (px__case_program(&e, &img, &err) < 0) {
            px_test_fail(__FILE__, __LINE__, "seed %u: build: %s", seed, err.msg);
            continue;
        }
        for (int path = 1; path <= 4; path++) {
            if (px_cpu_embed_path(path) < 0)
                continue;
            paths |= 1 << path;
            pxvm_program prog;
            pxvm_executor *ex;
            const pxvm_image *in[] = {&e.atlas};
            if (px_run_image(&img, in, 1, &prog, &ex, &err) < 0) {
                px_test_fail(__FILE__, __LINE__, "seed %u path %d: %s", seed, path, err.msg);
                continue;
            }
            pxvm_image got = px_read(&prog, ex, 4, 0);
            char what[32];
            snprintf(what, sizeof what, "CPU path %d", path);
            px__compare(what, seed, &e, &got, &want);
            pxvm_image_free(&got);
            if (path == 1) { /* the GPU kernel's tiles, on the host */
                pxvm_image wi = px__data_of(&prog, 2), pi = px__data_of(&prog, 3), twin;
                pxvm_image_alloc(&twin, want.w, want.h, NULL);
                px__twin(&e, &wi, &pi, &twin);
                px__compare("CUDA twin (dp4a)", seed, &e, &twin, &want);
                memset(twin.px, 0, (size_t)twin.w * (size_t)twin.h * 4u);
                px__twin_gemm(&e, &wi, &pi, &twin, 0);
                px__compare("CUDA twin (tensor cores, mma.sync)", seed, &e, &twin, &want);
                memset(twin.px, 0, (size_t)twin.w * (size_t)twin.h * 4u);
                px__twin_gemm(&e, &wi, &pi, &twin, 1);
                px__compare("CUDA twin (tensor cores, wgmma)", seed, &e, &twin, &want);
                pxvm_image_free(&wi);
                pxvm_image_free(&pi);
                pxvm_image_free(&twin);
            }
            px_close(&prog, ex);
        }
        px_cpu_embed_path(0);
        pxvm_image_free(&img);
        pxvm_image_free(&want);
        px__case_free(&e);
    }
    CHECK(paths & 2); /* the portable path always runs; AVX2, VNNI and AMX where the CPU has them */
    printf("  paths run: portable%s%s%s\n", paths & 4 ? ", AVX2" : "", paths & 8 ? ", AVX-512 VNNI" : "",
           paths & 16 ? ", AMX" : "");
}

/* Runs program image img on a CPU executor of `threads` threads over `batch` items, item b's
 * atlas atlases[b]; returns the executor (or NULL, the failure reported) with *prog loaded. */
static pxvm_executor *px__open_run(const pxvm_executor_ops *ops, const pxvm_image *img, int threads, int batch,
                                   const pxvm_image *const *atlases, pxvm_program *prog)
{
    pxvm_limits lim;
    pxvm_limits_default(&lim);
    pxvm_error err;
    pxvm_executor *ex = NULL;
    pxvm_open_options oo = {threads, 0};
    if (pxvm_program_from_copy(img, &lim, prog, &err) < 0) {
        px_test_fail(__FILE__, __LINE__, "load: %s", err.msg);
        return NULL;
    }
    int ok = ops->open(&ex, &oo, &err) == 0 && ops->load(ex, prog, batch, &err) == 0;
    for (int b = 0; ok && b < batch; b++) {
        pxvm_view v = pxvm_image_view(atlases[b]);
        ok = ops->bind(ex, 1, b, &v, &err) == 0;
    }
    if (ok && ops->run(ex, NULL, &err) == 0)
        return ex;
    px_test_fail(__FILE__, __LINE__, "run: %s", err.msg);
    if (ex)
        ops->close(ex);
    pxvm_program_free(prog);
    return NULL;
}

/* Item b's output against want: 0 when equal (a difference is reported). */
static int px__check_item(const pxvm_executor_ops *ops, const char *what, const px_emb_case *e, const pxvm_program *prog,
                          pxvm_executor *ex, int b, const pxvm_image *want)
{
    pxvm_image got;
    pxvm_error err;
    if (pxvm_read_image(ops, ex, prog, 4, 0, b, &got, &err) < 0) {
        px_test_fail(__FILE__, __LINE__, "%s: read: %s", what, err.msg);
        return 1;
    }
    int rc = px__compare(what, (uint32_t)b, e, &got, want);
    pxvm_image_free(&got);
    return rc;
}

/* The run's blocks (6 tokens, 64 channels a kernel call, 16 a vector) at their edges, each path,
 * 1 and 3 threads, two items of different atlases sharing the pack: token counts that fill no
 * block, D that fills no vector (1, 17, 33: a last group of one valid channel) or exactly some
 * (16, 48, 64), K tails (K % 4 = 1, 2, 3), patch widths the 4-texel gather takes and not, every
 * mode; the bytes equal the int64 reference. */
TEST(embed_blocks_tails_threads_and_items_every_path)
{
    static const struct {
        int c, pw, ph, cols, prow, count, d, mode, zp;
    } shape[] = {
        {3, 16, 16, 3, 3, 7, 200, 2, 0},  /* K 768 (a ViT's), D 200 = 3 x 64 + 8 */
        {3, 4, 4, 5, 5, 23, 48, 1, 17},   /* D 48: three whole groups */
        {4, 8, 4, 4, 4, 13, 33, 0, 0},    /* D 33: one channel in the last group */
        {1, 5, 3, 4, 4, 16, 65, 1, 255},  /* K 15 (tail 3), D 64 + 1 */
        {3, 12, 12, 4, 4, 15, 130, 2, 128},
        {3, 3, 3, 6, 2, 11, 16, 0, 9},    /* K 27 (tail 3), one group */
        {1, 1, 1, 8, 8, 61, 1, 1, 0},     /* K 1, D 1 */
        {4, 2, 7, 3, 3, 6, 17, 2, 3},     /* K 56, one block exactly */
        {3, 7, 1, 2, 4, 5, 64, 0, 200},   /* K 21 (tail 1), D 64 exactly */
        {1, 3, 3, 4, 2, 8, 31, 1, 1},     /* K 9 (tail 1) */
        {1, 2, 3, 4, 3, 9, 47, 0, 0},     /* K 6 (tail 2) */
        {3, 16, 16, 2, 3, 5, 37, 1, 128}, /* int8, 5 channels in the last group */
    };
    int runs = 0;
    for (int n = 0; n < (int)(sizeof shape / sizeof shape[0]); n++) {
        px_emb_case e = {0}, other = {0};
        e.c = shape[n].c, e.pw = shape[n].pw, e.ph = shape[n].ph, e.cols = shape[n].cols, e.prow = shape[n].prow;
        e.count = shape[n].count, e.d = shape[n].d, e.mode = shape[n].mode, e.zp = shape[n].zp;
        e.out_zero = e.mode == PX_EMBED_MODE_I8 ? -7 : 0;
        other = e;
        px__case_fill(&e, 1000u + (uint32_t)n);
        px__case_fill(&other, 2000u + (uint32_t)n); /* its atlas is item 1's */
        pxvm_image img, want[2];
        pxvm_error err;
        if (px__case_program(&e, &img, &err) < 0) {
            px_test_fail(__FILE__, __LINE__, "shape %d: build: %s", n, err.msg);
            px__case_free(&e);
            px__case_free(&other);
            continue;
        }
        want[0] = px__case_reference(&e);
        pxvm_image keep = e.atlas;
        e.atlas = other.atlas;
        want[1] = px__case_reference(&e);
        e.atlas = keep;
        const pxvm_image *atlases[2] = {&e.atlas, &other.atlas};
        for (int path = 1; path <= 4; path++) {
            if (px_cpu_embed_path(path) < 0)
                continue;
            for (int threads = 1; threads <= 3; threads += 2) {
                pxvm_program prog;
                pxvm_executor *ex = px__open_run(&pxvm_cpu_executor, &img, threads, 2, atlases, &prog);
                if (!ex)
                    continue;
                char what[64];
                snprintf(what, sizeof what, "shape %d, path %d, %d threads, item", n, path, threads);
                for (int b = 0; b < 2; b++)
                    if (px__check_item(&pxvm_cpu_executor, what, &e, &prog, ex, b, &want[b]) == 0)
                        runs++;
                pxvm_cpu_executor.close(ex);
                pxvm_program_free(&prog);
            }
        }
        px_cpu_embed_path(0);
        pxvm_image_free(&img);
        pxvm_image_free(&want[0]);
        pxvm_image_free(&want[1]);
        px__case_free(&e);
        px__case_free(&other);
    }
    CHECK(runs >= 12 * 2 * 2); /* the portable path at least, everywhere */
}

/* The requantization at its edges on every path (the AVX-512 path rounds in vectors): with
 * 1x1 patches of 0 and zero point 0 the accumulator is the bias, so each channel holds one
 * chosen (acc, multiplier, shift). bf16: ties to even, a carry into the exponent, 0 from a 0
 * multiplier and from a negative acc (+0, never -0), the largest and smallest magnitudes, and
 * 274598127 * 2037786127, a tie plus 1 in the 59th bit, and 94623265 * 877533851, a tie less 5
 * in the 57th (found by search): rounding the product to a double first would make each a tie
 * and round the first down to even, the second up (the AVX2 path's product is rounded to
 * nearest, then to odd from its remainder: the second is the case where it must step back). int8: halves either way,
 * both shifts, the clamps. */
TEST(embed_requantization_edges_every_path)
{
    static const int32_t bf[][3] = {
        {274598127, 2037786127, 0}, {-274598127, 2037786127, 0}, {2037786127, 274598127, 5}, {257, 1 << 30, 1},
        {259, 1 << 30, 1}, {258, 1 << 30, 1}, {511, 1 << 30, 1}, {0, 12345, 3}, {-5, 0, 2}, {-1, 1 << 30, 1},
        {INT32_MAX - 32640, INT32_MAX, 30}, {1, 1, -31}, {-(INT32_MAX - 32640), INT32_MAX, -31}, {(1 << 30) + (1 << 22), 1 << 30, 1},
        {(1 << 30) + (3 << 22), 1 << 30, 1}, {(1 << 30) + (1 << 22) + 1, 1 << 30, 1}, {-((1 << 30) + (1 << 22)), 1 << 30, 1},
        {94623265, 877533851, 0}, {-94623265, 1755067702, -3}};
    static const int32_t i8[][3] = {
        {100, 1 << 30, -1}, {-102, 1 << 30, -1}, {1000, 1 << 30, 0}, {-1000, 1 << 30, 0}, {3, 1 << 30, 2}, {-3, 1 << 30, 2},
        {5, 1 << 30, 0}, {-5, 1 << 30, 0}, {INT32_MAX - 32640, INT32_MAX, -31}, {-(INT32_MAX - 32640), INT32_MAX, -31},
        {-(INT32_MAX - 32640), 1, 0}, {6, 3 << 29, -2}, {-6, 3 << 29, -2}, {7, 0, 0}, {-(1 << 20), INT32_MAX, -8},
        {(1 << 20) + 1, (1 << 30) + 1, -12}, {40, 1 << 30, 2}, {-40, 1 << 30, 2}, {1 << 24, (1 << 30) + 12345, -20}};
    int compared = 0;
    CHECK_EQ(sizeof bf / sizeof bf[0], 19);
    CHECK_EQ(sizeof i8 / sizeof i8[0], 19);
    for (int mode = PX_EMBED_MODE_I8; mode <= PX_EMBED_MODE_BF16; mode++) {
        const int32_t(*v)[3] = mode == PX_EMBED_MODE_BF16 ? bf : i8;
        px_emb_case e = {0};
        e.c = 1, e.pw = 1, e.ph = 1, e.cols = 4, e.prow = 1, e.count = 3, e.d = 19, e.mode = mode;
        e.out_zero = mode == PX_EMBED_MODE_I8 ? 5 : 0;
        px__case_fill(&e, 77u);
        memset(e.atlas.px, 0, (size_t)e.atlas.w * 4u);
        for (int o = 0; o < e.d; o++)
            e.bias[o] = v[o][0], e.mult[o] = v[o][1], e.shift[o] = v[o][2];
        pxvm_image img, want = px__case_reference(&e);
        pxvm_error err;
        if (px__case_program(&e, &img, &err) < 0) {
            px_test_fail(__FILE__, __LINE__, "mode %d: build: %s", mode, err.msg);
        } else {
            for (int path = 1; path <= 4; path++) {
                pxvm_program prog;
                pxvm_executor *ex;
                const pxvm_image *in[] = {&e.atlas};
                if (px_cpu_embed_path(path) < 0)
                    continue;
                if (px_run_image(&img, in, 1, &prog, &ex, &err) < 0) {
                    px_test_fail(__FILE__, __LINE__, "mode %d path %d: %s", mode, path, err.msg);
                    continue;
                }
                pxvm_image got = px_read(&prog, ex, 4, 0);
                char what[48];
                snprintf(what, sizeof what, "mode %d, path %d", mode, path);
                compared += px__compare(what, 0, &e, &got, &want) == 0;
                pxvm_image_free(&got);
                px_close(&prog, ex);
            }
            px_cpu_embed_path(0);
            pxvm_image_free(&img);
        }
        if (mode == PX_EMBED_MODE_BF16) { /* the search's case by hand: 248 * 2^51 + 2^50 + 1, a tie
                                           * plus 1, rounds up to 249 * 2^51 (0x4D79), not to 0x4D78 */
            CHECK_EQ((int64_t)274598127 * 2037786127, 248ll * (1ll << 51) + (1ll << 50) + 1);
            CHECK_EQ(want.px[0], 0x79);
            CHECK_EQ(want.px[1], 0x4D);
        }
        pxvm_image_free(&want);
        px__case_free(&e);
    }
    CHECK(compared >= 2);
}

/* The weights are packed when the plan is made, not per run: a retarget to a program that
 * differs only in its weights' and parameters' pixels (retarget allows that: operand values)
 * runs with the new ones, and a switch back (whose plan retarget kept) with the first ones
 * again; a fresh load of the second on the same executor too. */
TEST(embed_weights_follow_the_program_across_retarget_and_load)
{
    /* PXVM_TEST_EXECUTOR=cuda runs it on the CUDA-GL executor (the GPU check): its packed weights
     * must follow the program too */
    const pxvm_executor_ops *ops = px_test_executor();
    if (!ops)
        return;
    px_emb_case a = {0}, b = {0};
    a.c = 3, a.pw = 8, a.ph = 8, a.cols = 3, a.prow = 3, a.count = 9, a.d = 40, a.mode = PX_EMBED_MODE_I32;
    b = a;
    px__case_fill(&a, 11u);
    px__case_fill(&b, 12u);
    memcpy(b.atlas.px, a.atlas.px, (size_t)a.atlas.w * (size_t)a.atlas.h * 4u); /* only the weights differ */
    pxvm_image img[2], want[2];
    pxvm_error err;
    pxvm_program prog[2];
    pxvm_limits lim;
    pxvm_limits_default(&lim);
    int ok = px__case_program(&a, &img[0], &err) == 0 && px__case_program(&b, &img[1], &err) == 0 &&
             pxvm_program_from_copy(&img[1], &lim, &prog[1], &err) == 0;
    if (!ok) {
        px_test_fail(__FILE__, __LINE__, "build: %s", err.msg);
        return;
    }
    want[0] = px__case_reference(&a);
    want[1] = px__case_reference(&b);
    CHECK(memcmp(want[0].px, want[1].px, (size_t)want[0].w * (size_t)want[0].h * 4u) != 0);
    const pxvm_image *atlases[1] = {&a.atlas};
    pxvm_executor *ex = px__open_run(ops, &img[0], 2, 1, atlases, &prog[0]);
    int checked = 0;
    if (ex) {
        checked += px__check_item(ops, "loaded A", &a, &prog[0], ex, 0, &want[0]) == 0;
        static const int to[] = {1, 0, 1};
        for (int n = 0; n < 3; n++) {
            pxvm_view v = pxvm_image_view(&a.atlas);
            if (ops->retarget(ex, &prog[to[n]], &err) < 0 || ops->bind(ex, 1, 0, &v, &err) < 0 ||
                ops->run(ex, NULL, &err) < 0) {
                px_test_fail(__FILE__, __LINE__, "switch %d: %s", n, err.msg);
                break;
            }
            char what[48];
            snprintf(what, sizeof what, "switch %d to %s", n, to[n] ? "B" : "A");
            checked += px__check_item(ops, what, to[n] ? &b : &a, &prog[to[n]], ex, 0, &want[to[n]]) == 0;
        }
        pxvm_view v = pxvm_image_view(&a.atlas);
        if (ops->load(ex, &prog[1], 1, &err) == 0 && ops->bind(ex, 1, 0, &v, &err) == 0 &&
            ops->run(ex, NULL, &err) == 0)
            checked += px__check_item(ops, "loaded B", &b, &prog[1], ex, 0, &want[1]) == 0;
        else
            px_test_fail(__FILE__, __LINE__, "load B: %s", err.msg);
        ops->close(ex);
        pxvm_program_free(&prog[0]);
    }
    CHECK_EQ(checked, 5);
    pxvm_program_free(&prog[1]);
    for (int i = 0; i < 2; i++) {
        pxvm_image_free(&img[i]);
        pxvm_image_free(&want[i]);
    }
    px__case_free(&a);
    px__case_free(&b);
}

TEST(embed_output_is_not_cleared_per_run_when_nothing_can_stop_it)
{
    /* EMBED writes every texel of dst (V-EMBED-8), so a run need not clear it first (11 us of
     * a 32-item batch on an H200); unless a DOT_RGB before it may end the run, leaving dst as
     * the run before left it instead of zero. Runs on PXVM_TEST_EXECUTOR (cpu by default). */
    const pxvm_executor_ops *ops = px_test_executor();
    if (!ops)
        return;
    pxvm_error err;
    px_emb_case a = {0}, b;
    a.c = 3, a.pw = 4, a.ph = 4, a.cols = 3, a.prow = 2, a.count = 5, a.d = 13, a.mode = PX_EMBED_MODE_BF16;
    px__case_fill(&a, 21u);
    b = a;
    b.dot_first = 1;
    pxvm_image img[2];
    pxvm_program trap;
    pxvm_limits lim;
    pxvm_limits_default(&lim);
    if (px__case_program(&a, &img[0], &err) < 0 || px__case_program(&b, &img[1], &err) < 0 ||
        pxvm_program_from_copy(&img[1], &lim, &trap, &err) < 0) {
        px_test_fail(__FILE__, __LINE__, "build: %s", err.msg);
        px__case_free(&a);
        return;
    }
    CHECK_EQ(trap.reset[4], PXVM_RESET_LEVEL0); /* the pair's other side: a trap may come first */
    pxvm_program_free(&trap);
    /* two inputs in turn: each run's bytes are its own input's, none left from the run before */
    px_emb_case other = a;
    pxvm_image_alloc(&other.atlas, a.atlas.w, a.atlas.h, NULL);
    for (size_t i = 0; i < (size_t)a.atlas.w * (size_t)a.atlas.h * 4u; i++)
        other.atlas.px[i] = (uint8_t)(255u - a.atlas.px[i]);
    pxvm_image want[2] = {px__case_reference(&a), px__case_reference(&other)};
    pxvm_program prog;
    const pxvm_image *first[1] = {&a.atlas};
    pxvm_executor *ex = px__open_run(ops, &img[0], 2, 1, first, &prog);
    if (ex) {
        CHECK_EQ(prog.reset[4], 0);
        CHECK(px__check_item(ops, "first input", &a, &prog, ex, 0, &want[0]) == 0);
        for (int r = 0; r < 2; r++) {
            const px_emb_case *e = r ? &a : &other;
            pxvm_view v = pxvm_image_view(&e->atlas);
            if (ops->bind(ex, 1, 0, &v, &err) < 0 || ops->run(ex, NULL, &err) < 0) {
                px_test_fail(__FILE__, __LINE__, "run %d: %s", r, err.msg);
                break;
            }
            CHECK(px__check_item(ops, r ? "first input again" : "the other input", e, &prog, ex, 0, &want[r ? 0 : 1]) == 0);
        }
        ops->close(ex);
        pxvm_program_free(&prog);
    }
    for (int i = 0; i < 2; i++) {
        pxvm_image_free(&img[i]);
        pxvm_image_free(&want[i]);
    }
    pxvm_image_free(&other.atlas);
    px__case_free(&a);
}

/* ---- SPEC's V-EMBED-* pairs, for test_rules.c -------------------------------------------------- */

/* Stream index i of a program image as its pixel. */
static void px__stream_xy(const pxvm_image *img, uint32_t i, int *x, int *y)
{
    *x = (int)(i % (uint32_t)img->w), *y = (int)(i / (uint32_t)img->w);
}

/* Rule `rule` (V-EMBED-rule): the last case accepted (refuse 0) or the first refused (1), as a
 * program image, with the pixel and a fragment of the refusal's message. The base: 3 channels of
 * 4x4 patches (K = 48), 4 tokens, d = 8, int8 out. `before`: 1 puts a RESIZE of 'img' (8x8) into
 * an output 'r' (16x16, bicubic) before the EMBED, 2 one of an any-size input 'any' (8x6). */
static void px__embed_case(int rule, int refuse, int variant, int before, pxvm_image *prog, int *x, int *y, char *msg,
                           size_t n)
{
    int c = 3, p = 4, count = 4, d = 8, mode = 1, out_zero = 0, patches = 1, same = 0, w_role = PXI_ROLE_DATA;
    int wt_extra = 0, wh_extra = 0, pw_extra = 0, rows = 3, dst_extra = 0, pixel = 0, param_row = -1, param_ch = 3;
    int32_t bias = 0, mult = 1 << 30, shift = -1;
    uint32_t mult_u = 0;
    int64_t terms = 48 * (int64_t)PX_EMBED_TERM_MAX; /* K = 48 */
    msg[0] = 0;
    switch (rule) {
    case 1: /* mode <= 2 */
        mode = refuse ? 3 : 2;
        snprintf(msg, n, "operand mode = 3");
        break;
    case 2: /* channels 1, 3, 4: 4 accepted, 5 refused; 1 accepted, 2 refused */
        c = variant ? (refuse ? 2 : 1) : (refuse ? 5 : 4), pixel = 1;
        snprintf(msg, n, "operand channels = %d", c);
        break;
    case 3: /* out_zero 0 unless mode 1 */
        mode = 0, rows = 1, out_zero = refuse ? 1 : 0, pixel = 2;
        snprintf(msg, n, "operand out_zero = 1");
        break;
    case 4: /* an atlas; src != dst */
        if (variant)
            same = refuse;
        else
            patches = !refuse;
        snprintf(msg, n, variant ? "reads and writes the same slot" : "is not a patch atlas");
        break;
    case 5: /* data slots */
        w_role = refuse ? PXI_ROLE_SCRATCH : PXI_ROLE_DATA, pixel = 1;
        snprintf(msg, n, "must be data slots");
        break;
    case 6: /* weights ceil(K/4) x d */
        *(variant ? &wt_extra : &wh_extra) = refuse, pixel = 1;
        snprintf(msg, n, "need 12x8");
        break;
    case 7: /* params d wide, 3 rows for mode 1 (1 for mode 0) */
        if (variant)
            pw_extra = refuse;
        else
            rows = refuse ? 2 : 3;
        pixel = 1;
        snprintf(msg, n, "needs 8 wide, at least 3 rows");
        break;
    case 8: /* dst ceil(d * b / 4) x count */
        dst_extra = refuse;
        snprintf(msg, n, "need 2x4");
        break;
    case 9: /* K * 32640 + |bias| <= 2^31 - 1, either sign */
        mode = 0, rows = 1, param_row = 0;
        bias = (int32_t)(INT32_MAX - terms + refuse);
        if (variant)
            bias = -bias;
        snprintf(msg, n, "channel 3: K * 255 * 128 + |bias| = 48 * 32640 + %lld", (long long)(bias < 0 ? -(int64_t)bias : bias));
        break;
    case 10: /* multiplier <= 2^31 - 1 */
        param_row = 1, mult_u = refuse ? 0x80000000u : 0x7FFFFFFFu;
        snprintf(msg, n, "channel 3: multiplier 2147483648 is not in 0..2^31-1");
        break;
    case 11: /* shift -31 .. 30 (bf16: no left-shift rule) */
        mode = 2, param_row = 2;
        shift = variant ? (refuse ? -32 : -31) : (refuse ? 31 : 30);
        snprintf(msg, n, "channel 3: shift %d is not in -31..30", shift);
        break;
    case 12: /* int8: (K * 32640 + |bias|) * 2^shift <= 2^31 - 1 */
        param_row = 2, shift = 1;
        bias = (int32_t)((INT32_MAX >> 1) - terms + refuse);
        snprintf(msg, n, "channel 3: shift 1 left of an accumulator bound of %lld", (long long)(terms + bias));
        break;
    }
    int k = c * p * p, wt = (k + 3) / 4;
    pxvm_builder b;
    pxvm_build_init(&b, 32);
    int src = pxvm_build_slot(&b, PXI_ROLE_INPUT, "img", 2 * p, 2 * p);
    if (patches)
        pxvm_build_patches(&b, src, p, p, count);
    int32_t r[PXI_MAX_FIELDS] = {0}; /* the RESIZE before the EMBED (slots come first) */
    if (before) {
        int from = src;
        if (before == 2) {
            from = pxvm_build_slot(&b, PXI_ROLE_INPUT, "any", 8, 6);
            pxvm_build_any_size(&b, from, 0, 0, 0);
        }
        r[PX_FI(RESIZE, src)] = from, r[PX_FI(RESIZE, dst)] = pxvm_build_slot(&b, PXI_ROLE_OUTPUT, "r", 16, 16);
        r[PX_FI(RESIZE, filter)] = PX_RESIZE_BICUBIC, r[PX_FI(RESIZE, w)] = 16, r[PX_FI(RESIZE, h)] = 16;
    }
    pxvm_image wi, pi;
    pxvm_image_alloc(&wi, wt + wt_extra, d + wh_extra, NULL);
    pxvm_image_alloc(&pi, d + pw_extra, rows, NULL);
    for (int o = 0; o < d; o++) {
        px__put32(&pi, o, 0, o == param_ch && param_row == 0 ? bias : 7);
        if (rows > 1)
            px__put32(&pi, o, 1, o == param_ch && param_row == 1 ? (int32_t)mult_u : mult);
        if (rows > 2)
            px__put32(&pi, o, 2, o == param_ch && param_row == 2 ? shift : -1);
    }
    if (param_row == 2 && rule == 12)
        px__put32(&pi, param_ch, 0, bias);
    int wk = w_role == PXI_ROLE_DATA ? pxvm_build_data_slot(&b, "w", &wi)
                                     : pxvm_build_slot(&b, w_role, "w", wi.w, wi.h);
    int pk = pxvm_build_data_slot(&b, "p", &pi);
    int dst = pxvm_build_slot(&b, PXI_ROLE_OUTPUT, "emb", (d * px_embed_out_bytes(mode > 2 ? 0 : mode) + 3) / 4,
                              count + dst_extra);
    int32_t f[PXI_MAX_FIELDS] = {0};
    f[PX_FI(EMBED, src)] = src, f[PX_FI(EMBED, dst)] = same ? src : dst, f[PX_FI(EMBED, mode)] = mode;
    f[PX_FI(EMBED, weights)] = wk, f[PX_FI(EMBED, params)] = pk, f[PX_FI(EMBED, channels)] = c;
    f[PX_FI(EMBED, d)] = d, f[PX_FI(EMBED, out_zero)] = out_zero;
    if (before) {
        pxvm_build_insn(&b, PX_OP_RESIZE, r);
        pixel += pxi_op(PX_OP_RESIZE)->pixels; /* the EMBED's pixel in the code */
    }
    pxvm_build_insn(&b, PX_OP_EMBED, f);
    pxvm_build_insn(&b, PX_OP_HALT, NULL);
    pxvm_image_free(&wi);
    pxvm_image_free(&pi);
    pxvm_error err;
    if (pxvm_build_finish(&b, prog, &err) < 0)
        px_test_fail(__FILE__, __LINE__, "V-EMBED-%d: build: %s", rule, err.msg);
    pxvm_build_free(&b);
    if (param_row >= 0) { /* the parameter's pixel: params' data origin, descriptor +3 */
        int dx, dy;
        px__stream_xy(prog, (uint32_t)(PXI_HEADER_PIXELS + PXI_SLOT_PIXELS * (pk - 1) + 3), &dx, &dy);
        uint32_t origin = px_px(prog, dx, dy);
        *x = (int)(origin & 0xFFFFu) + param_ch, *y = (int)(origin >> 16) + param_row;
    } else {
        int hx, hy;
        px__stream_xy(prog, 2, &hx, &hy);
        px__stream_xy(prog, px_px(prog, hx, hy) + (uint32_t)pixel, x, y);
    }
}

void px_embed_rule_case(int rule, int refuse, int variant, pxvm_image *prog, int *x, int *y, char *msg, size_t n);
void px_embed_rule_case(int rule, int refuse, int variant, pxvm_image *prog, int *x, int *y, char *msg, size_t n)
{
    px__embed_case(rule, refuse, variant, 0, prog, x, y, msg, n);
}

/* The slots' bytes of prog loaded with the default limits, and its whole memory (theirs and what
 * the RESIZEs and EMBEDs need). */
static void px__embed_memory(const pxvm_image *prog, uint64_t *slots, uint64_t *total)
{
    pxvm_limits lim;
    pxvm_limits_default(&lim);
    pxvm_program p;
    pxvm_error err;
    *slots = *total = 0;
    if (pxvm_program_from_copy(prog, &lim, &p, &err) < 0) {
        px_test_fail(__FILE__, __LINE__, "load: %s", err.msg);
        return;
    }
    for (int k = 0; k < p.nslots; k++)
        *slots += p.slots[k].bytes;
    *total = p.memory;
    pxvm_program_free(&p);
}

/* The edge pair of [V-EMBED-13] for test_rules.c: the base program of px_embed_rule_case (K = 48,
 * d = 8, 4 tokens; variant 1 with a RESIZE 8x8 -> 16x16 bicubic before it, in the same total),
 * *lim's max_memory what it needs (accepted) or one byte less (refused, naming the EMBED). What
 * the EMBED needs, by hand: kb = 128, dp = 128, c6 = 6: (128 + 3 * 6) * 128 + 20 * 128 = 21248;
 * the RESIZE: tables 4 * (16 * (2 + 5) + 16 * (2 + 5)) = 896, intermediate 4 * 16 * 8 = 512. */
void px_embed_memory_case(int refuse, int variant, pxvm_image *prog, pxvm_limits *lim, int *x, int *y, char *msg, size_t n);
void px_embed_memory_case(int refuse, int variant, pxvm_image *prog, pxvm_limits *lim, int *x, int *y, char *msg, size_t n)
{
    px__embed_case(0, 0, 0, variant, prog, x, y, msg, n);
    uint64_t slots, total, resize = variant ? 896 + 512 : 0;
    int cw, ch, rows;
    CHECK_EQ(px_embed_need(48, 8, 4), 21248);
    CHECK_EQ(px_resize_need(8, 8, 16, 16, 0, PX_RESIZE_BICUBIC, &cw, &ch, &rows), 896 + 512);
    px__embed_memory(prog, &slots, &total);
    CHECK_EQ(total, slots + resize + 21248);
    pxvm_limits_default(lim);
    lim->max_memory = total - (uint64_t)refuse;
    snprintf(msg, n, "instruction %d (EMBED): K = 48 into d = 8 for 4 tokens needs 21248 bytes (its packed weights and "
             "parameters, its staged tokens); with the slots and the RESIZEs and EMBEDs before it that is %llu bytes; "
             "the limit is %llu", variant, (unsigned long long)total, (unsigned long long)total - 1u);
}

/* An EMBED's need is counted again in every resolution of an any-size input (U-BIND-6), in the
 * one total with the RESIZE of that input before it: the resolution's total is accepted as the
 * limit, one byte less is refused naming the EMBED (the instruction that crosses it). */
TEST(embed_memory_counted_in_a_resolution)
{
    pxvm_image img;
    int x, y;
    char msg[400];
    px__embed_case(0, 0, 0, 2, &img, &x, &y, msg, sizeof msg);
    pxvm_limits lim;
    pxvm_limits_default(&lim);
    pxvm_program poly, res;
    pxvm_error err;
    CHECK_EQ(pxvm_program_from_copy(&img, &lim, &poly, &err), 0);
    int wh[2 * (PXVM_MAX_SLOTS + 1)] = {0};
    wh[2 * 2] = 2, wh[2 * 2 + 1] = 7; /* 'any' (slot 2) at 2x7 */
    CHECK_EQ(pxvm_program_resolve(&poly, wh, &lim, &res, &err), 0);
    uint64_t slots = 0, total = res.memory;
    for (int k = 0; k < res.nslots; k++)
        slots += res.slots[k].bytes;
    pxvm_program_free(&res);
    /* 2x7 -> 16x16: tables 896, intermediate 4 * 16 * 7 = 448; the EMBED 21248 */
    CHECK_EQ(total, slots + 896 + 448 + 21248);
    lim.max_memory = total;
    CHECK_EQ(pxvm_program_resolve(&poly, wh, &lim, &res, &err), 0);
    pxvm_program_free(&res);
    lim.max_memory = total - 1;
    CHECK_EQ(pxvm_program_resolve(&poly, wh, &lim, &res, &err), -1);
    CHECK_EQ(err.cls, PXVM_UNLINKABLE);
    CHECK(strstr(err.msg, "instruction 1 (EMBED): K = 48 into d = 8 for 4 tokens needs 21248 bytes") != NULL);
    pxvm_program_free(&poly);
    pxvm_image_free(&img);
}

/* executors/cpu/embed.c: the most the CPU holds for one EMBED (its pack and a run's blocks) */
uint64_t px_cpu_embed_bytes(int k, int d, int count);

/* SPEC V-EMBED-13's need bounds what both executors hold for an EMBED: the CPU's pack and token
 * blocks (px_cpu_embed_bytes, the sizes it allocates), and the CUDA-GL executor's device buffers
 * for one item (embed.cu px_gpu_embed_make: dpad x kb weights, 4 int32 per channel, count rows of
 * kb staged), over K, d and counts on and off every rounding step; the CPU reaches the bound when
 * K and d are multiples of 128 and the count of 6. */
TEST(embed_memory_need_bounds_both_executors)
{
    static const int ks[] = {1, 3, 4, 5, 48, 127, 128, 129, 588, 768, 3 * 16 * 16 + 1, 65793};
    static const int ds[] = {1, 15, 16, 17, 127, 128, 129, 768, 1024, 1153, 65535};
    static const int counts[] = {1, 5, 6, 7, 196, 577, 4096, 65535};
    for (size_t a = 0; a < sizeof ks / sizeof ks[0]; a++)
        for (size_t b = 0; b < sizeof ds / sizeof ds[0]; b++)
            for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
                int k = ks[a], d = ds[b], count = counts[c];
                uint64_t need = px_embed_need(k, d, count), cpu = px_cpu_embed_bytes(k, d, count);
                uint64_t kb = (uint64_t)PX_EMB_KB(k), dpad = ((uint64_t)d + PX_EMB_BN - 1) / PX_EMB_BN * PX_EMB_BN;
                uint64_t gpu = dpad * kb + 4u * (uint64_t)d * sizeof(int32_t) + (uint64_t)count * kb;
                if (cpu > need || gpu > need)
                    px_test_fail(__FILE__, __LINE__, "K = %d, d = %d, %d tokens: need %llu, the CPU holds %llu, CUDA %llu",
                                 k, d, count, (unsigned long long)need, (unsigned long long)cpu, (unsigned long long)gpu);
            }
    CHECK_EQ(px_cpu_embed_bytes(768, 1024, 198), px_embed_need(768, 1024, 198));
    CHECK_EQ(px_embed_need(768, 1024, 198), (1024 + 3 * 198) * 768 + 20 * 1024);
}
