/* embed_tile.h - one block of the CUDA-GL executor's EMBED kernel (embed.cu), written so that gcc
 * compiles it too: tests/unit/test_embed.c runs these very functions on the host, block by block
 * and thread by thread (the CPU twin), and compares them with the CPU executor byte for byte.
 *
 * A block computes TT tokens x TD output channels; a patch's pixels are consumed in chunks of PX
 * texels staged in shared memory (px_emb_smem says in which order). Each of the 256 threads keeps
 * 4 tokens x 4 channels of int32 accumulators, summed by dp4a (u8 x s8, exact: no rounding, no
 * saturation, and the bound of SPEC V-EMBED-9 keeps every partial sum inside int32), and the
 * weights' row sums, for the zero point: acc = bias + sum u*w - zero_point * sum w.
 *
 * The includer defines PX_SEM (isa/px_sem.h), PX_EMB_CTX (the type reaching the slots) and
 * PX_EMB_TEXEL(ctx, which, x, y) (texel (x, y) of level 0 of slot PX_EMB_SRC, _W or _P, as a
 * little-endian u32) and PX_EMB_STORE(ctx, x, y, v) (texel (x, y) of dst's level 0). */
#ifndef PX_EMBED_TILE_H
#define PX_EMBED_TILE_H

#include <stdint.h>

#define PX_EMB_TT 64       /* tokens per block */
#define PX_EMB_TD 64       /* output channels per block */
#define PX_EMB_PX 16       /* patch pixels (texels: one 32-bit word each) per shared-memory chunk */
#define PX_EMB_ROW (PX_EMB_PX + 1) /* words per staged row, padded against bank conflicts */
#define PX_EMB_THREADS 256 /* (TT / 4) x (TD / 4): each thread 4 tokens x 4 channels */

enum { PX_EMB_SRC = 0, PX_EMB_W = 1, PX_EMB_P = 2 };

typedef struct px_emb_geom {
    int c, pw, ph, cols, ntok; /* channels, patch size, atlas columns, tokens */
    int k, wtex, d;            /* K, the weight slot's width ceil(K/4), D */
    int mode, zero_point, out_zero;
} px_emb_geom;

/* The sum over k is taken pixel by pixel: a token's word for pixel `pix` is its atlas texel as it
 * is (R, G, B, A bytes), the weights' word for it holds w[j][c * area + pix] in byte c for c < C
 * and 0 above; dp4a of the two is that pixel's part of the sum (alpha times 0 when C < 4). The
 * order of an exact integer sum does not change it. */
typedef struct px_emb_smem {
    uint32_t tok[PX_EMB_TT][PX_EMB_ROW];
    uint32_t w[PX_EMB_TD][PX_EMB_ROW];
} px_emb_smem;

/* c + the four products of a's unsigned bytes with b's signed bytes. */
PX_SEM int32_t px_emb_dp4a(uint32_t a, uint32_t b, int32_t c)
{
#if defined(__CUDA_ARCH__)
    int32_t d;
    asm("dp4a.u32.s32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
    return d;
#else
    for (int i = 0; i < 4; i++)
        c += (int32_t)(a >> (8 * i) & 255u) * (int32_t)(int8_t)(uint8_t)(b >> (8 * i));
    return c;
#endif
}

/* Weight byte k of row o (0 past K: the row's padding bytes are not weights). */
PX_SEM uint32_t px_emb_wbyte(PX_EMB_CTX ctx, const px_emb_geom *g, int o, int k)
{
    return k < g->k ? PX_EMB_TEXEL(ctx, PX_EMB_W, k / 4, o) >> (8 * (k % 4)) & 255u : 0u;
}

/* Pixels p0 .. p0 + PX - 1 of tokens t0.. and weight rows o0.. into shared memory (thread tid). */
PX_SEM void px_emb_load(PX_EMB_CTX ctx, const px_emb_geom *g, px_emb_smem *sm, int tid, int t0, int o0, int p0)
{
    int area = g->pw * g->ph;
    for (int i = tid; i < PX_EMB_TT * PX_EMB_PX; i += PX_EMB_THREADS) {
        int t = i / PX_EMB_PX, pix = p0 + i % PX_EMB_PX, tok = t0 + t;
        sm->tok[t][i % PX_EMB_PX] = tok < g->ntok && pix < area
                                        ? PX_EMB_TEXEL(ctx, PX_EMB_SRC, (tok % g->cols) * g->pw + pix % g->pw,
                                                       (tok / g->cols) * g->ph + pix / g->pw)
                                        : 0u;
    }
    /* each task: a weight row and 4 pixels; with area % 4 = 0 (16x16 patches...) a channel's 4
     * weights of them are one texel, fetched once and transposed into the 4 pixels' words */
    for (int i = tid; i < PX_EMB_TD * (PX_EMB_PX / 4); i += PX_EMB_THREADS) {
        int r = i / (PX_EMB_PX / 4), q = 4 * (i % (PX_EMB_PX / 4)), o = o0 + r, pix = p0 + q;
        uint32_t word[4] = {0u, 0u, 0u, 0u};
        for (int ch = 0; ch < g->c && o < g->d; ch++) {
            int k = ch * area + pix;
            if (area % 4 == 0 && pix + 3 < area) {
                uint32_t texel = PX_EMB_TEXEL(ctx, PX_EMB_W, k / 4, o);
                for (int j = 0; j < 4; j++)
                    word[j] |= (texel >> (8 * j) & 255u) << (8 * ch);
            } else {
                for (int j = 0; j < 4 && pix + j < area; j++)
                    word[j] |= px_emb_wbyte(ctx, g, o, k + j) << (8 * ch);
            }
        }
        for (int j = 0; j < 4; j++)
            sm->w[r][q + j] = word[j];
    }
}

/* Thread tid's accumulators over one staged chunk: tokens tid/16 + 16 i of the block (i < 4),
 * channels 4 * (tid % 16) + j (j < 4); wsum: the channels' weight sums, for the zero point. */
PX_SEM void px_emb_compute(const px_emb_smem *sm, int tid, int32_t acc[4][4], int32_t wsum[4])
{
    int tt = tid / 16, dq = tid % 16;
    for (int kw = 0; kw < PX_EMB_PX; kw++) {
        uint32_t a[4], w[4];
        for (int i = 0; i < 4; i++)
            a[i] = sm->tok[tt + 16 * i][kw];
        for (int j = 0; j < 4; j++) {
            w[j] = sm->w[dq * 4 + j][kw];
            wsum[j] = px_emb_dp4a(0x01010101u, w[j], wsum[j]);
        }
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 4; j++)
                acc[i][j] = px_emb_dp4a(a[i], w[j], acc[i][j]);
    }
}

PX_SEM int32_t px_emb_le32(uint32_t v) { return (int32_t)v; }

/* The texels of one token's channels ob .. ob + 3 (px_embed_out of the sums a[j] = bias + acc -
 * zero_point * wsum; bytes past d zero): 4 int32 texels (those below d), 1 int8 texel or 1 or 2
 * bf16 texels, the first at column *x0 of the token's dst row; returns how many. */
PX_SEM int px_emb_group_texels(const px_emb_geom *g, int ob, const int64_t a[4], const int32_t mult[4],
                               const int32_t shift[4], uint32_t t[4], int *x0)
{
    uint32_t v[4];
    for (int j = 0; j < 4; j++)
        v[j] = ob + j < g->d ? px_embed_out(g->mode, (int32_t)a[j], mult[j], (int)shift[j], g->out_zero) : 0u;
    if (g->mode == PX_EMBED_MODE_I32) {
        for (int j = 0; j < 4; j++)
            t[j] = v[j];
        *x0 = ob;
        return g->d - ob < 4 ? g->d - ob : 4;
    }
    if (g->mode == PX_EMBED_MODE_I8) {
        t[0] = v[0] | v[1] << 8 | v[2] << 16 | v[3] << 24;
        *x0 = ob / 4;
        return 1;
    }
    t[0] = v[0] | v[1] << 16, t[1] = v[2] | v[3] << 16;
    *x0 = ob / 2;
    return ob + 2 < g->d ? 2 : 1;
}

/* What the epilogues keep per channel: bias - zero_point * weight sum, multiplier, shift. The
 * base is kept modulo 2^32: SPEC's output rule takes the sum as int32 (V-EMBED-9 keeps it in
 * range), so a wrapping 32-bit add gives its bits, and the product after it is 32 x 32 bits. */
typedef struct px_emb_chan {
    uint32_t base;
    int32_t mult, shift;
} px_emb_chan;

PX_SEM px_emb_chan px_emb_chan_make(int32_t bias, int32_t wsum, int32_t mult, int32_t shift, int zero_point)
{
    px_emb_chan ch;
    ch.base = (uint32_t)(uint64_t)((int64_t)bias - (int64_t)zero_point * wsum), ch.mult = mult, ch.shift = shift;
    return ch;
}

/* The texels of a token's channels ob .. ob + 3 from their accumulators (px_emb_group_texels). */
PX_SEM int px_emb_group_out(const px_emb_geom *g, const px_emb_chan ch[4], int ob, const int32_t acc[4], uint32_t t[4],
                            int *x0)
{
    int64_t a[4];
    int32_t mult[4], shift[4];
    for (int j = 0; j < 4; j++)
        a[j] = (int32_t)(ch[j].base + (uint32_t)acc[j]), mult[j] = ch[j].mult, shift[j] = ch[j].shift;
    return px_emb_group_texels(g, ob, a, mult, shift, t, x0);
}

/* One value of channel c (its px_emb_chan ch) from its accumulator: px_embed_out of base + acc,
 * 0 past d. In bf16 no test is needed there: a channel past d has multiplier 0 (px_emb_chan_of),
 * and bf16 of a zero product is 0. */
PX_SEM uint32_t px_emb_value(const px_emb_geom *g, px_emb_chan ch, int c, int32_t acc)
{
    uint32_t v = px_embed_out(g->mode, (int32_t)(ch.base + (uint32_t)acc), ch.mult, (int)ch.shift, g->out_zero);
    return g->mode == PX_EMBED_MODE_BF16 || c < g->d ? v : 0u;
}

/* A token's channels c, c + 1 (c even) as the wgmma epilogue stores them straight from a thread's
 * accumulator pair: int32, the texels of those below d at x, x + 1 (returns how many); bf16, one
 * texel at x = c / 2 (1 if c < d); int8, half a texel, the two bytes in the half that c % 4 says,
 * at x = c / 4 (1 if c < d): the caller ORs it with the other half, channels c ^ 2, c ^ 2 + 1,
 * which the neighbouring lane holds, and one of the two stores it. */
PX_SEM int px_emb_pair_out(const px_emb_geom *g, const px_emb_chan ch[2], int c, int32_t a0, int32_t a1, uint32_t t[2],
                           int *x)
{
    uint32_t v0 = px_emb_value(g, ch[0], c, a0), v1 = px_emb_value(g, ch[1], c + 1, a1);
    if (g->mode == PX_EMBED_MODE_I32) {
        t[0] = v0, t[1] = v1, *x = c;
        return c >= g->d ? 0 : (c + 1 < g->d ? 2 : 1);
    }
    if (g->mode == PX_EMBED_MODE_I8) {
        t[0] = (v0 | v1 << 8) << (16 * (c >> 1 & 1)), *x = c >> 2;
        return c < g->d;
    }
    t[0] = v0 | v1 << 16, *x = c >> 1;
    return c < g->d;
}

/* Thread tid's outputs: tokens tid/16 + 16 i of the block, channels 4 * (tid % 16) + j. */
PX_SEM void px_emb_epilogue(PX_EMB_CTX ctx, const px_emb_geom *g, int tid, int t0, int o0, int32_t acc[4][4],
                            const int32_t wsum[4])
{
    int tt = tid / 16, ob = o0 + 4 * (tid % 16);
    if (ob >= g->d)
        return;
    px_emb_chan ch[4];
    for (int j = 0; j < 4; j++) {
        int o = ob + j < g->d ? ob + j : g->d - 1;
        ch[j] = px_emb_chan_make(px_emb_le32(PX_EMB_TEXEL(ctx, PX_EMB_P, o, 0)), wsum[j],
                                 g->mode ? px_emb_le32(PX_EMB_TEXEL(ctx, PX_EMB_P, o, 1)) : 0,
                                 g->mode ? px_emb_le32(PX_EMB_TEXEL(ctx, PX_EMB_P, o, 2)) : 0, g->zero_point);
    }
    for (int i = 0; i < 4; i++) {
        int tok = t0 + tt + 16 * i;
        if (tok >= g->ntok)
            continue;
        uint32_t t[4];
        int x0;
        for (int n = px_emb_group_out(g, ch, ob, acc[i], t, &x0), j = 0; j < n; j++)
            PX_EMB_STORE(ctx, x0 + j, tok, t[j]);
    }
}

/* ---- the int8 tensor-core kernel (embed.cu's px__k_embed_gemm) ---------------------------------
 * A GEMM over linear memory. The tokens of every item are staged as rows of K bytes in SPEC's
 * order (token m = item * ntok + t; byte k = channel c, row y, column x of the patch, k = (c *
 * patch_h + y) * patch_w + x: px_emb_stage_row), and the weights packed at load as rows of the
 * same K bytes (they are the weights slot's rows: px_emb_pack); both rows are padded with zeros to
 * KB = K rounded up to PX_EMB_BK. A block computes BM tokens x BN channels with 8 warps (warp w:
 * tokens 64 (w % 2).., channels 32 (w / 2)..; 4 x 4 m16n8k32 tiles each), K in stages of BK bytes
 * copied by cp.async into shared memory, a 16-byte chunk ch of row r at r * BK + 16 (ch ^ r % 8)
 * (an XOR swizzle: the 8 rows an ldmatrix phase reads lie in 8 different bank groups). Fragments
 * as the PTX ISA lays them out for m16n8k32 with 8-bit types (g = lane / 4, t = lane % 4):
 * ldmatrix.x4 gives lane l word l % 4 of row l / 4 of matrix i in register i, the rows of matrix
 * i at the addresses of lanes 8i .. 8i + 7. A's registers are rows g, g + 8 of k bytes 0..15,
 * then 16..31; B's, for two n8 tiles, channel g of k bytes 0..15 and 16..31 of the first tile,
 * then of the second. Accumulator r is token row g + 8 (r / 2), channel 2t + r % 2. The products
 * are exact and no sum wraps (V-EMBED-9): the integers of the dp4a kernel and of the CPU
 * executor, in another order. The epilogue passes the accumulators through a table in shared
 * memory, so that a warp writes one token's row of texels at a time, each thread the same 4
 * channels of its rows (whose bias, multiplier and shift it reads once). */
#define PX_EMB_BM 128
#define PX_EMB_BN 128
#define PX_EMB_BK 128 /* bytes of K per stage: 8 chunks of 16 */
#define PX_EMB_STAGES 3
#define PX_EMB_GEMM_THREADS 256
#define PX_EMB_KB(k) (((k) + PX_EMB_BK - 1) / PX_EMB_BK * PX_EMB_BK)
#define PX_EMB_OUT_ROW (PX_EMB_BN + 8) /* int32 per row of the accumulator table (+ 8: no bank conflicts) */

/* Byte offset of 16-byte chunk ch of row `row` in a stage's A or B tile. */
PX_SEM int px_emb_swizzle(int row, int ch) { return row * PX_EMB_BK + ((ch ^ (row & 7)) << 4); }

/* ldmatrix.x4 addresses of lane `lane`: A's m16 tile at rows r0.., k step ks (32 bytes); B's two
 * n8 tiles at channel rows n0.. */
PX_SEM int px_emb_ldm_a(int r0, int ks, int lane)
{
    return px_emb_swizzle(r0 + (lane & 7) + 8 * ((lane >> 3) & 1), 2 * ks + (lane >> 4));
}

PX_SEM int px_emb_ldm_b(int n0, int ks, int lane)
{
    return px_emb_swizzle(n0 + (lane & 7) + 8 * (lane >> 4), 2 * ks + ((lane >> 3) & 1));
}

/* The row and column in the block of accumulator r of tile (mt, nt) of (warp, lane). */
PX_SEM void px_emb_acc_at(int warp, int lane, int mt, int nt, int r, int *row, int *col)
{
    *row = 64 * (warp & 1) + 16 * mt + lane / 4 + 8 * (r / 2);
    *col = 32 * (warp >> 1) + 8 * nt + 2 * (lane % 4) + r % 2;
}

/* The Hopper path (sm_90a) of the same kernel, same stages: each warpgroup (4 warps) computes its
 * 64 token rows x BN channels by wgmma.mma_async m64n128k32 (u8 x s8 -> s32), reading A and B from
 * the stage through descriptors: the start address of the k step's first row, a stride of 1024
 * bytes between groups of 8 rows (8 rows of BK = 128 bytes), the 128-byte swizzle (chunk ^ row % 8
 * on the address bits, which is px_emb_swizzle's layout when the stage is 1024-byte aligned).
 * Accumulator i of a thread (warp w = warp % 4 of the warpgroup) is row 16 w + lane / 4 + 8 (i % 4
 * / 2), column 8 (i / 4) + 2 (lane % 4) + i % 2 of the warpgroup's tile. */
PX_SEM uint64_t px_emb_wg_desc(uint32_t smem_addr)
{
    return (uint64_t)((smem_addr & 0x3FFFFu) >> 4) | (uint64_t)1u << 16 | (uint64_t)(1024u >> 4) << 32 | (uint64_t)1u << 62;
}

/* Byte offset in a stage's A or B tile where the k step ks of rows r0.. starts (before swizzle). */
PX_SEM int px_emb_wg_start(int r0, int ks) { return r0 * PX_EMB_BK + 32 * ks; }

PX_SEM void px_emb_wg_acc_at(int warp, int lane, int i, int *row, int *col)
{
    *row = 64 * (warp / 4) + 16 * (warp % 4) + lane / 4 + 8 * (i % 4 / 2);
    *col = 8 * (i / 4) + 2 * (lane % 4) + i % 2;
}

/* Four texels x .. x + 3 of row y of the atlas (x a multiple of 4): PX_EMB_TEXEL4 where the
 * includer reads them at once (embed.cu: one 16-byte surface load), else texel by texel. */
#ifndef PX_EMB_TEXEL4
#define PX_EMB_TEXEL4(ctx, x, y, v)                                                                                  \
    do {                                                                                                             \
        for (int px__i = 0; px__i < 4; px__i++)                                                                      \
            (v)[px__i] = PX_EMB_TEXEL((ctx), PX_EMB_SRC, (x) + px__i, (y));                                          \
    } while (0)
#endif

/* Row y of token tok's patch into its staged row (K bytes, 4-byte aligned): byte c of the patch's
 * texel (x, y) is byte c * area + y * patch_w + x, in runs of 4 texels (whole words where they
 * are aligned, as with 16x16 patches). */
PX_SEM void px_emb_stage_row(PX_EMB_CTX ctx, const px_emb_geom *g, int tok, int y, uint8_t *row)
{
    int area = g->pw * g->ph, x0 = (tok % g->cols) * g->pw, ay = (tok / g->cols) * g->ph + y;
    for (int x = 0; x < g->pw; x += 4) {
        int n = g->pw - x < 4 ? g->pw - x : 4;
        uint32_t v[4] = {0u, 0u, 0u, 0u};
        if (n == 4 && ((x0 + x) & 3) == 0) {
            PX_EMB_TEXEL4(ctx, x0 + x, ay, v);
        } else {
            for (int i = 0; i < n; i++)
                v[i] = PX_EMB_TEXEL(ctx, PX_EMB_SRC, x0 + x + i, ay);
        }
        for (int c = 0; c < g->c; c++) {
            int k = c * area + y * g->pw + x;
            if (n == 4 && (k & 3) == 0) {
                *(uint32_t *)(row + k) = (v[0] >> (8 * c) & 255u) | (v[1] >> (8 * c) & 255u) << 8 |
                                         (v[2] >> (8 * c) & 255u) << 16 | (v[3] >> (8 * c) & 255u) << 24;
            } else {
                for (int i = 0; i < n; i++)
                    row[k + i] = (uint8_t)(v[i] >> (8 * c));
            }
        }
    }
}

/* The weights packed (rows 0 .. d - 1 of w, kb bytes each, zeroed by the caller: the weights
 * slot's K bytes of a row) and par = [4][d]: bias, multiplier, shift (0 in mode 0), weight sum. */
PX_SEM void px_emb_pack(PX_EMB_CTX ctx, const px_emb_geom *g, int kb, uint8_t *w, int32_t *par)
{
    for (int o = 0; o < g->d; o++) {
        int32_t sum = 0;
        for (int k = 0; k < g->k; k++) {
            uint32_t b = px_emb_wbyte(ctx, g, o, k);
            w[(size_t)o * (size_t)kb + (size_t)k] = (uint8_t)b;
            sum += (int32_t)(int8_t)(uint8_t)b;
        }
        par[3 * g->d + o] = sum;
        par[o] = px_emb_le32(PX_EMB_TEXEL(ctx, PX_EMB_P, o, 0));
        par[g->d + o] = g->mode ? px_emb_le32(PX_EMB_TEXEL(ctx, PX_EMB_P, o, 1)) : 0;
        par[2 * g->d + o] = g->mode ? px_emb_le32(PX_EMB_TEXEL(ctx, PX_EMB_P, o, 2)) : 0;
    }
}

/* Channel o's (< d) from the packed parameters (px_emb_pack); zeros past d. */
PX_SEM px_emb_chan px_emb_chan_of(const px_emb_geom *g, const int32_t *par, int o)
{
    px_emb_chan ch = {0u, 0, 0};
    if (o < g->d)
        ch = px_emb_chan_make(par[o], par[3 * g->d + o], par[g->d + o], par[2 * g->d + o], g->zero_point);
    return ch;
}

#endif
