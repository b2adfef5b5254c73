/* embed_tile.h - one block of the CUDA-GL executor's EMBED kernel (embed.cu), written so that gcc
 * compiles it too: tests/unit/test_embed.c runs these very functions on the host, block by block
 * and thread by thread (the CPU twin), and compares them with the CPU executor byte for byte.
 *
 * A block computes TT tokens x TD output channels; the K bytes of a token are consumed in chunks
 * of KC bytes staged in shared memory (tokens gathered from the atlas in (c, y, x) order, weight
 * rows read 4 int8 a texel, the bytes past K zeroed). Each of the 256 threads keeps 2 tokens x 4
 * channels of int32 accumulators, summed by dp4a (u8 x s8, exact: no rounding, no saturation, and
 * the bound of SPEC V-EMBED-9 keeps every partial sum inside int32), and the weights' row sums,
 * for the zero point: acc = bias + sum u*w - zero_point * sum w.
 *
 * The includer defines PX_SEM (isa/px_sem.h), PX_EMB_CTX (the type reaching the slots) and
 * PX_EMB_TEXEL(ctx, which, x, y) (texel (x, y) of level 0 of slot PX_EMB_SRC, _W or _P, as a
 * little-endian u32) and PX_EMB_STORE(ctx, x, y, v) (texel (x, y) of dst's level 0). */
#ifndef PX_EMBED_TILE_H
#define PX_EMBED_TILE_H

#include <stdint.h>

#define PX_EMB_TT 32      /* tokens per block */
#define PX_EMB_TD 64      /* output channels per block */
#define PX_EMB_KC 64      /* token bytes per shared-memory chunk */
#define PX_EMB_KW (PX_EMB_KC / 4)
#define PX_EMB_THREADS 256 /* (TT / 2) x (TD / 4) */

enum { PX_EMB_SRC = 0, PX_EMB_W = 1, PX_EMB_P = 2 };

typedef struct px_emb_geom {
    int c, pw, ph, cols, ntok; /* channels, patch size, atlas columns, tokens */
    int k, wtex, d;            /* K, the weight slot's width ceil(K/4), D */
    int mode, zero_point, out_zero;
} px_emb_geom;

typedef struct px_emb_smem {
    uint32_t tok[PX_EMB_TT][PX_EMB_KW];
    uint32_t w[PX_EMB_TD][PX_EMB_KW];
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

/* Chunk k0 .. k0 + KC - 1 of tokens t0.. and weight rows o0.. into shared memory (thread tid). */
PX_SEM void px_emb_load(PX_EMB_CTX ctx, const px_emb_geom *g, px_emb_smem *sm, int tid, int t0, int o0, int k0)
{
    int area = g->pw * g->ph;
    for (int i = tid; i < PX_EMB_TT * PX_EMB_KW; i += PX_EMB_THREADS) {
        int t = i / PX_EMB_KW, kw = i % PX_EMB_KW, tok = t0 + t;
        uint32_t word = 0;
        for (int b = 0; b < 4 && tok < g->ntok; b++) {
            int kk = k0 + 4 * kw + b;
            if (kk >= g->k)
                break;
            int ch = kk / area, r = kk % area, y = r / g->pw, x = r % g->pw;
            uint32_t texel = PX_EMB_TEXEL(ctx, PX_EMB_SRC, (tok % g->cols) * g->pw + x, (tok / g->cols) * g->ph + y);
            word |= (texel >> (8 * ch) & 255u) << (8 * b);
        }
        sm->tok[t][kw] = word;
    }
    for (int i = tid; i < PX_EMB_TD * PX_EMB_KW; i += PX_EMB_THREADS) {
        int o = o0 + i / PX_EMB_KW, tx = k0 / 4 + i % PX_EMB_KW;
        uint32_t word = 0;
        if (o < g->d && tx < g->wtex) {
            word = PX_EMB_TEXEL(ctx, PX_EMB_W, tx, o);
            int valid = g->k - 4 * tx; /* the row's padding bytes are not weights */
            if (valid < 4)
                word &= (1u << (8 * valid)) - 1u;
        }
        sm->w[i / PX_EMB_KW][i % PX_EMB_KW] = word;
    }
}

/* Thread tid's accumulators over one staged chunk: tokens tid/16 and tid/16 + 16 of the block,
 * channels 4 * (tid % 16) .. + 3. */
PX_SEM void px_emb_compute(const px_emb_smem *sm, int tid, int32_t acc[2][4], int32_t wsum[4])
{
    int tt = tid / 16, dq = tid % 16;
    for (int kw = 0; kw < PX_EMB_KW; kw++) {
        uint32_t a0 = sm->tok[tt][kw], a1 = sm->tok[tt + 16][kw];
        for (int j = 0; j < 4; j++) {
            uint32_t w = sm->w[dq * 4 + j][kw];
            acc[0][j] = px_emb_dp4a(a0, w, acc[0][j]);
            acc[1][j] = px_emb_dp4a(a1, w, acc[1][j]);
            wsum[j] = px_emb_dp4a(0x01010101u, w, wsum[j]);
        }
    }
}

PX_SEM int32_t px_emb_le32(uint32_t v) { return (int32_t)v; }

/* Thread tid's outputs (px_embed_out), written as whole texels of dst: 4 int32 texels, 1 int8
 * texel or 2 bf16 texels per token (the bytes past d zero). */
PX_SEM void px_emb_epilogue(PX_EMB_CTX ctx, const px_emb_geom *g, int tid, int t0, int o0, int32_t acc[2][4],
                            const int32_t wsum[4])
{
    int tt = tid / 16, ob = o0 + 4 * (tid % 16);
    if (ob >= g->d)
        return;
    for (int i = 0; i < 2; i++) {
        int tok = t0 + tt + 16 * i;
        if (tok >= g->ntok)
            continue;
        uint32_t v[4];
        for (int j = 0; j < 4; j++) {
            int o = ob + j;
            v[j] = 0;
            if (o >= g->d)
                continue;
            int32_t bias = px_emb_le32(PX_EMB_TEXEL(ctx, PX_EMB_P, o, 0));
            int32_t mult = g->mode ? px_emb_le32(PX_EMB_TEXEL(ctx, PX_EMB_P, o, 1)) : 0;
            int shift = g->mode ? (int)px_emb_le32(PX_EMB_TEXEL(ctx, PX_EMB_P, o, 2)) : 0;
            int64_t a = (int64_t)bias + acc[i][j] - (int64_t)g->zero_point * wsum[j];
            v[j] = px_embed_out(g->mode, (int32_t)a, mult, shift, g->out_zero);
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

#endif
