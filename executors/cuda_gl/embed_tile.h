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

/* Thread tid's outputs (px_embed_out), written as whole texels of dst: 4 int32 texels, 1 int8
 * texel or 2 bf16 texels per token (the bytes past d zero). */
PX_SEM void px_emb_epilogue(PX_EMB_CTX ctx, const px_emb_geom *g, int tid, int t0, int o0, int32_t acc[4][4],
                            const int32_t wsum[4])
{
    int tt = tid / 16, ob = o0 + 4 * (tid % 16);
    if (ob >= g->d)
        return;
    int32_t bias[4], mult[4], shift[4];
    for (int j = 0; j < 4; j++) {
        int o = ob + j < g->d ? ob + j : g->d - 1;
        bias[j] = px_emb_le32(PX_EMB_TEXEL(ctx, PX_EMB_P, o, 0));
        mult[j] = g->mode ? px_emb_le32(PX_EMB_TEXEL(ctx, PX_EMB_P, o, 1)) : 0;
        shift[j] = g->mode ? px_emb_le32(PX_EMB_TEXEL(ctx, PX_EMB_P, o, 2)) : 0;
    }
    for (int i = 0; i < 4; i++) {
        int tok = t0 + tt + 16 * i;
        if (tok >= g->ntok)
            continue;
        uint32_t v[4];
        for (int j = 0; j < 4; j++) {
            int64_t a = (int64_t)bias[j] + acc[i][j] - (int64_t)g->zero_point * wsum[j];
            v[j] = ob + j < g->d ? px_embed_out(g->mode, (int32_t)a, mult[j], (int)shift[j], g->out_zero) : 0u;
        }
        if (g->mode == PX_EMBED_MODE_I32) {
            for (int j = 0; j < 4 && ob + j < g->d; j++)
                PX_EMB_STORE(ctx, ob + j, tok, v[j]);
        } else if (g->mode == PX_EMBED_MODE_I8) {
            PX_EMB_STORE(ctx, ob / 4, tok, v[0] | v[1] << 8 | v[2] << 16 | v[3] << 24);
        } else {
            PX_EMB_STORE(ctx, ob / 2, tok, v[0] | v[1] << 16);
            if (ob + 2 < g->d)
                PX_EMB_STORE(ctx, ob / 2 + 1, tok, v[2] | v[3] << 16);
        }
    }
}

/* ---- the int8 tensor-core variant: mma.sync m16n8k32, u8 tokens x s8 weights -> s32 ------------
 * The same staged chunks (px_emb_load); the block's 8 warps each own 16 tokens x 32 channels
 * (warp w: tokens 16 (w % 4).., channels 32 (w / 4)..), 4 tiles of 16 x 8 accumulators. A chunk
 * of 16 pixel words is 2 steps of k = 32 bytes (8 words). Fragments as the PTX ISA lays them out
 * for m16n8k32 with 8-bit types (g = lane / 4, t = lane % 4): A register r holds token row
 * g + 8 (r % 2), bytes 4t + 16 (r / 2) .. + 3, i.e. word t + 4 (r / 2) of the step; B register r
 * holds channel column g, bytes 4t + 16 r .. + 3, word t + 4 r; accumulator r is token row
 * g + 8 (r / 2), channel column 2t + r % 2. The products are exact and the sum wraps nowhere
 * (V-EMBED-9): the same integers as dp4a's, in another order. */
#define PX_EMB_OUT_ROW (PX_EMB_TD + 1)

PX_SEM void px_emb_frag_a(const px_emb_smem *sm, int warp, int lane, int ks, uint32_t a[4])
{
    int row = 16 * (warp % 4) + lane / 4, word = 8 * ks + lane % 4;
    a[0] = sm->tok[row][word];
    a[1] = sm->tok[row + 8][word];
    a[2] = sm->tok[row][word + 4];
    a[3] = sm->tok[row + 8][word + 4];
}

PX_SEM void px_emb_frag_b(const px_emb_smem *sm, int warp, int lane, int ks, int nt, uint32_t b[2])
{
    int col = 32 * (warp / 4) + 8 * nt + lane / 4, word = 8 * ks + lane % 4;
    b[0] = sm->w[col][word];
    b[1] = sm->w[col][word + 4];
}

/* Accumulator tile nt of (warp, lane) into the block's [token][channel] table. */
PX_SEM void px_emb_frag_store(int32_t (*out)[PX_EMB_OUT_ROW], int warp, int lane, int nt, const int32_t c[4])
{
    int row = 16 * (warp % 4) + lane / 4, col = 32 * (warp / 4) + 8 * nt + 2 * (lane % 4);
    out[row][col] = c[0];
    out[row][col + 1] = c[1];
    out[row + 8][col] = c[2];
    out[row + 8][col + 1] = c[3];
}

/* The weight sums of the block's channel rows over one staged chunk (threads 0 .. TD - 1). */
PX_SEM int32_t px_emb_wsum_chunk(const px_emb_smem *sm, int tid, int32_t wsum)
{
    for (int kw = 0; kw < PX_EMB_PX; kw++)
        wsum = px_emb_dp4a(0x01010101u, sm->w[tid][kw], wsum);
    return wsum;
}

/* Thread tid's 4 x 4 accumulators and weight sums (px_emb_epilogue's) from the block's tables. */
PX_SEM void px_emb_from_table(int32_t (*out)[PX_EMB_OUT_ROW], const int32_t *wsum_all, int tid, int32_t acc[4][4],
                              int32_t wsum[4])
{
    int tt = tid / 16, dq = tid % 16;
    for (int j = 0; j < 4; j++) {
        wsum[j] = wsum_all[4 * dq + j];
        for (int i = 0; i < 4; i++)
            acc[i][j] = out[tt + 16 * i][4 * dq + j];
    }
}

#endif
