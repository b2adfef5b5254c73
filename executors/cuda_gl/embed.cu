/* embed.cu - EMBED on the CUDA-GL executor. The kernel: the tokens of every item staged once into
 * linear memory (px__k_embed_stage), then an int8 tensor-core GEMM (u8 tokens x s8 weights -> s32:
 * Hopper's wgmma.mma_async in the sm_90a machine code, mma.sync m16n8k32 in the PTX that other
 * GPUs compile) over the weights packed at load, whose epilogue applies SPEC's output rule and
 * writes dst through its surface (px__k_embed_gemm; the tile math in embed_tile.h, which
 * tests/unit/test_embed.c runs on the host too). PXVM_CUDA_EMBED=dp4a picks the other kernel, a
 * dp4a one reading the slots' textures directly. Integer only, so the bytes are those of the CPU
 * executor (tests/conformance/gpu-check checks both kernels). */
#include <stdlib.h>
#include <string.h>

#include "executor.cuh"

/* What the tile functions reach: the level-0 textures of the atlas, weights and params and dst's
 * surface on the device; on the host (packing at load) the weights' and params' level 0. */
struct px_emb_dev {
    cudaTextureObject_t tex[3]; /* PX_EMB_SRC, PX_EMB_W, PX_EMB_P */
    cudaSurfaceObject_t dst, src; /* src: the atlas's surface, read 4 texels at a time by staging */
    const uint8_t *host[3];
    int host_w[3];
};

static __host__ __device__ inline uint32_t px__emb_texel(const px_emb_dev *c, int which, int x, int y)
{
#ifdef __CUDA_ARCH__
    return px__texel(c->tex[which], x, y);
#else
    const uint8_t *p = c->host[which] + ((size_t)y * (size_t)c->host_w[which] + (size_t)x) * 4u;
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
#endif
}

/* px__store is device code; the tile functions are __host__ __device__ (the CPU twin's too) */
static __host__ __device__ inline void px__emb_store(cudaSurfaceObject_t s, int x, int y, uint32_t v)
{
#ifdef __CUDA_ARCH__
    px__store(s, x, y, v);
#else
    (void)s, (void)x, (void)y, (void)v;
#endif
}

/* 4 texels of the atlas in one 16-byte load (an unformatted surface read of whole texels) */
static __host__ __device__ inline void px__emb_texel4(const px_emb_dev *c, int x, int y, uint32_t v[4])
{
#ifdef __CUDA_ARCH__
    uint4 q = surf2Dread<uint4>(c->src, x * 4, y);
    v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
#else
    for (int i = 0; i < 4; i++)
        v[i] = px__emb_texel(c, 0, x + i, y);
#endif
}

#define PX_EMB_CTX const px_emb_dev *
#define PX_EMB_TEXEL4(ctx, x, y, v) px__emb_texel4((ctx), (x), (y), (v))
#define PX_EMB_TEXEL(ctx, which, x, y) px__emb_texel((ctx), (which), (x), (y))
#define PX_EMB_STORE(ctx, x, y, v) px__emb_store((ctx)->dst, (x), (y), (v))
#include "embed_tile.h"

__global__ void __launch_bounds__(PX_EMB_THREADS) px__k_embed_dp4a(const px_gpu_slot *all_slots, int nslots, int src,
                                                                   int wk, int pk, int dst, px_emb_geom g)
{
    const px_gpu_slot *slots = all_slots + (size_t)blockIdx.z * (size_t)nslots; /* z: the item */
    px_emb_dev dev = {{slots[src].tex[0], slots[wk].tex[0], slots[pk].tex[0]}, slots[dst].surf[0], 0, {NULL, NULL, NULL}, {0, 0, 0}};
    __shared__ px_emb_smem sm;
    int tid = (int)threadIdx.x, t0 = (int)blockIdx.x * PX_EMB_TT, o0 = (int)blockIdx.y * PX_EMB_TD;
    int32_t acc[4][4] = {{0, 0, 0, 0}, {0, 0, 0, 0}, {0, 0, 0, 0}, {0, 0, 0, 0}}, wsum[4] = {0, 0, 0, 0};
    for (int p0 = 0, area = g.pw * g.ph; p0 < area; p0 += PX_EMB_PX) {
        px_emb_load(&dev, &g, &sm, tid, t0, o0, p0);
        __syncthreads();
        px_emb_compute(&sm, tid, acc, wsum);
        __syncthreads();
    }
    px_emb_epilogue(&dev, &g, tid, t0, o0, acc, wsum);
}

/* ---- the tensor-core kernel ------------------------------------------------------------------- */

/* A row of a token's patch per thread, into its staged row (row m = item * ntok + token). */
__global__ void __launch_bounds__(256) px__k_embed_stage(const px_gpu_slot *all_slots, int nslots, int src, px_emb_geom g,
                                                         int rows, int kb, uint8_t *tok)
{
    /* 32-bit indices (the launch checks rows * patch_h < 2^31): 64-bit division is slow here */
    unsigned ph = (unsigned)g.ph, n = (unsigned)rows * ph;
    for (unsigned q = blockIdx.x * blockDim.x + threadIdx.x; q < n; q += gridDim.x * blockDim.x) {
        unsigned m = q / ph, y = q % ph, item = m / (unsigned)g.ntok, t = m % (unsigned)g.ntok;
        const px_gpu_slot *s = &all_slots[(size_t)item * (size_t)nslots + (size_t)src];
        px_emb_dev dev = {{s->tex[0], 0, 0}, 0, s->surf[0], {NULL, NULL, NULL}, {0, 0, 0}};
        px_emb_stage_row(&dev, &g, (int)t, (int)y, tok + (size_t)m * (size_t)kb);
    }
}

static __device__ inline void px__cp16(uint32_t dst, const void *src, int bytes)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(bytes));
}

#if !defined(__CUDA_ARCH_FEAT_SM90_ALL) /* the mma.sync path: GPUs other than sm_90a */
static __device__ inline void px__ldm4(uint32_t addr, uint32_t r[4])
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

/* c += A * B for one warp's m16n8k32 tile (u8 x s8 -> s32, exact). */
static __device__ inline void px__mma(int32_t c[4], const uint32_t a[4], uint32_t b0, uint32_t b1)
{
    asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.u8.s8.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                 "{%0, %1, %2, %3};"
                 : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
#endif

#define PX_EMB_TILE_BYTES (PX_EMB_BM * PX_EMB_BK) /* one stage's A (and B: BN == BM) */
/* + 1024: the stages start 1024-aligned, as wgmma's 128-byte swizzle reads addresses */
#define PX_EMB_SMEM (PX_EMB_STAGES * 2 * PX_EMB_TILE_BYTES + 1024)

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
/* Hopper's warpgroup MMA (sm_90a): a warpgroup's 64 token rows x 128 channels of one K step of 32
 * bytes, both operands read from the swizzled stage by descriptor (px_emb_wg_desc). Asynchronous:
 * committed as a group and waited for; its accumulators are the registers d (layout:
 * px_emb_wg_acc_at). */
static __device__ inline void px__wgmma(int32_t d[64], uint64_t a, uint64_t b)
{
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k32.s32.u8.s8 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, "
                 "%22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, "
                 "%42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, "
                 "%62, %63}, %64, %65, p;\n}\n"
                 : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]), "+r"(d[7]),
                   "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]), "+r"(d[13]), "+r"(d[14]),
                   "+r"(d[15]), "+r"(d[16]), "+r"(d[17]), "+r"(d[18]), "+r"(d[19]), "+r"(d[20]), "+r"(d[21]),
                   "+r"(d[22]), "+r"(d[23]), "+r"(d[24]), "+r"(d[25]), "+r"(d[26]), "+r"(d[27]), "+r"(d[28]),
                   "+r"(d[29]), "+r"(d[30]), "+r"(d[31]), "+r"(d[32]), "+r"(d[33]), "+r"(d[34]), "+r"(d[35]),
                   "+r"(d[36]), "+r"(d[37]), "+r"(d[38]), "+r"(d[39]), "+r"(d[40]), "+r"(d[41]), "+r"(d[42]),
                   "+r"(d[43]), "+r"(d[44]), "+r"(d[45]), "+r"(d[46]), "+r"(d[47]), "+r"(d[48]), "+r"(d[49]),
                   "+r"(d[50]), "+r"(d[51]), "+r"(d[52]), "+r"(d[53]), "+r"(d[54]), "+r"(d[55]), "+r"(d[56]),
                   "+r"(d[57]), "+r"(d[58]), "+r"(d[59]), "+r"(d[60]), "+r"(d[61]), "+r"(d[62]), "+r"(d[63])
                 : "l"(a), "l"(b));
}

/* the accumulators stay where the asynchronous MMA left them: no access moves across this */
static __device__ inline void px__wg_fence_regs(int32_t d[64])
{
#pragma unroll
    for (int i = 0; i < 64; i++)
        asm volatile("" : "+r"(d[i])::"memory");
}
#endif

template <int MODE>
__global__ void __launch_bounds__(PX_EMB_GEMM_THREADS, 2)
    px__k_embed_gemm(const px_gpu_slot *all_slots, int nslots, int dst, px_emb_geom g, int rows, int kb,
                     const uint8_t *tok, const uint8_t *w, const int32_t *par)
{
    extern __shared__ __align__(128) uint8_t sm_raw[];
    uint8_t *sm = sm_raw + ((1024u - ((uint32_t)__cvta_generic_to_shared(sm_raw) & 1023u)) & 1023u);
    int tid = (int)threadIdx.x, warp = tid / 32, lane = tid % 32;
    int m0 = (int)blockIdx.x * PX_EMB_BM, n0 = (int)blockIdx.y * PX_EMB_BN;
    int ktiles = kb / PX_EMB_BK;
    uint32_t base = (uint32_t)__cvta_generic_to_shared(sm);

    /* rows past the tokens read as zeros (cp.async's source size 0); the weights have dpad rows */
    auto load = [&](int stage, int kt) {
        uint32_t as = base + (uint32_t)(stage * 2 * PX_EMB_TILE_BYTES), bs = as + PX_EMB_TILE_BYTES;
        for (int i = tid; i < PX_EMB_BM * (PX_EMB_BK / 16); i += PX_EMB_GEMM_THREADS) {
            int row = i / (PX_EMB_BK / 16), ch = i % (PX_EMB_BK / 16), m = m0 + row;
            size_t off = (size_t)kt * PX_EMB_BK + (size_t)ch * 16u;
            px__cp16(as + (uint32_t)px_emb_swizzle(row, ch), tok + (size_t)(m < rows ? m : 0) * (size_t)kb + off, m < rows ? 16 : 0);
            px__cp16(bs + (uint32_t)px_emb_swizzle(row, ch), w + (size_t)(n0 + row) * (size_t)kb + off, 16);
        }
    };
    for (int s = 0; s < PX_EMB_STAGES - 1; s++) {
        if (s < ktiles)
            load(s, s);
        asm volatile("cp.async.commit_group;");
    }
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    /* warpgroup wg: token rows 64 wg .. 64 wg + 63 of the block, all BN channels */
    int32_t d[64];
#pragma unroll
    for (int i = 0; i < 64; i++)
        d[i] = 0;
    int wg = warp / 4;
    for (int kt = 0; kt < ktiles; kt++) {
        asm volatile("cp.async.wait_group %0;" ::"n"(PX_EMB_STAGES - 2));
        /* this thread's copies, written by the generic proxy, made visible to wgmma's reads */
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        __syncthreads(); /* stage kt is here, and every warpgroup is done with the stage loaded next */
        if (kt + PX_EMB_STAGES - 1 < ktiles)
            load((kt + PX_EMB_STAGES - 1) % PX_EMB_STAGES, kt + PX_EMB_STAGES - 1);
        asm volatile("cp.async.commit_group;");
        uint32_t as = base + (uint32_t)((kt % PX_EMB_STAGES) * 2 * PX_EMB_TILE_BYTES), bs = as + PX_EMB_TILE_BYTES;
        px__wg_fence_regs(d);
        asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
        for (int ks = 0; ks < PX_EMB_BK / 32; ks++)
            px__wgmma(d, px_emb_wg_desc(as + (uint32_t)px_emb_wg_start(64 * wg, ks)),
                      px_emb_wg_desc(bs + (uint32_t)px_emb_wg_start(0, ks)));
        asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
        asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
        px__wg_fence_regs(d);
    }
    asm volatile("cp.async.wait_group 0;");
    __syncthreads(); /* every warpgroup is past its last wgmma: the stages are free */
    /* The block's channels' bias, multiplier and shift, once, into shared memory; then each thread
     * stores its accumulators straight from its registers (no table of them): pair i, i + 1 (i = 4
     * j + 2 h) is token row 64 wg + 16 (warp % 4) + lane / 4 + 8 h of the block, channels n0 + 8 j
     * + 2 (lane % 4) + {0, 1} (px_emb_wg_acc_at): a quad of lanes writes 4 texels side by side,
     * a warp 8 rows of them */
    px_emb_chan *chans = (px_emb_chan *)sm;
    px_emb_geom gm = g;
    gm.mode = MODE;
    if (tid < PX_EMB_BN)
        chans[tid] = px_emb_chan_of(&g, par, n0 + tid);
    __syncthreads();
    cudaSurfaceObject_t srf[2];
    int trow[2], ok[2];
#pragma unroll
    for (int h = 0; h < 2; h++) {
        int row, col;
        px_emb_wg_acc_at(warp, lane, 2 * h, &row, &col);
        int m = m0 + row;
        ok[h] = m < rows, trow[h] = m % g.ntok;
        srf[h] = ok[h] ? all_slots[(size_t)(m / g.ntok) * (size_t)nslots + (size_t)dst].surf[0] : 0;
    }
#pragma unroll
    for (int i = 0; i < 64; i += 2) {
        int row, col;
        px_emb_wg_acc_at(warp, lane, i, &row, &col);
        int h = i % 4 / 2, x;
        px_emb_chan ch[2] = {chans[col], chans[col + 1]};
        uint32_t tx[2];
        int n = px_emb_pair_out(&gm, ch, n0 + col, d[i], d[i + 1], tx, &x);
        if (MODE == PX_EMBED_MODE_I8) /* the texel's other half, from the neighbouring lane (all lanes) */
            tx[0] |= __shfl_xor_sync(0xFFFFFFFFu, tx[0], 1);
        if (!ok[h] || !n || (MODE == PX_EMBED_MODE_I8 && (lane & 1)))
            continue;
        if (MODE == PX_EMBED_MODE_I32 && n == 2)
            surf2Dwrite(make_uint2(tx[0], tx[1]), srf[h], x * 4, trow[h]);
        else
            surf2Dwrite(tx[0], srf[h], x * 4, trow[h]);
    }
#else
    int32_t c[4][4][4];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++)
            c[i][j][0] = c[i][j][1] = c[i][j][2] = c[i][j][3] = 0;
    int wm = 64 * (warp & 1), wn = 32 * (warp >> 1);
    for (int kt = 0; kt < ktiles; kt++) {
        asm volatile("cp.async.wait_group %0;" ::"n"(PX_EMB_STAGES - 2));
        __syncthreads(); /* stage kt is here, and every warp is done with the stage loaded next */
        if (kt + PX_EMB_STAGES - 1 < ktiles)
            load((kt + PX_EMB_STAGES - 1) % PX_EMB_STAGES, kt + PX_EMB_STAGES - 1);
        asm volatile("cp.async.commit_group;");
        uint32_t as = base + (uint32_t)((kt % PX_EMB_STAGES) * 2 * PX_EMB_TILE_BYTES), bs = as + PX_EMB_TILE_BYTES;
#pragma unroll
        for (int ks = 0; ks < PX_EMB_BK / 32; ks++) {
            uint32_t a[4][4], b[2][4];
#pragma unroll
            for (int mt = 0; mt < 4; mt++)
                px__ldm4(as + (uint32_t)px_emb_ldm_a(wm + 16 * mt, ks, lane), a[mt]);
#pragma unroll
            for (int np = 0; np < 2; np++)
                px__ldm4(bs + (uint32_t)px_emb_ldm_b(wn + 16 * np, ks, lane), b[np]);
#pragma unroll
            for (int mt = 0; mt < 4; mt++)
#pragma unroll
                for (int nt = 0; nt < 4; nt++)
                    px__mma(c[mt][nt], a[mt], b[nt / 2][2 * (nt % 2)], b[nt / 2][2 * (nt % 2) + 1]);
        }
    }
    asm volatile("cp.async.wait_group 0;");

    __syncthreads();
    int32_t *tab = (int32_t *)sm;
#pragma unroll
    for (int mt = 0; mt < 4; mt++)
#pragma unroll
        for (int nt = 0; nt < 4; nt++)
#pragma unroll
            for (int r = 0; r < 4; r += 2) {
                int row, col;
                px_emb_acc_at(warp, lane, mt, nt, r, &row, &col);
                *(int2 *)&tab[row * PX_EMB_OUT_ROW + col] = make_int2(c[mt][nt][r], c[mt][nt][r + 1]);
            }
    /* the accumulators went through shared memory (above); now thread tid takes channels ob .. ob + 3
     * of rows tid / 32 + 8 i, so that a warp writes a row's texels side by side (MODE: no branch) */
    __syncthreads();
    px_emb_geom gm = g;
    gm.mode = MODE;
    int ob = n0 + 4 * (tid % 32);
    if (ob >= g.d)
        return;
    px_emb_chan ch[4];
#pragma unroll
    for (int j = 0; j < 4; j++)
        ch[j] = px_emb_chan_of(&g, par, ob + j);
    /* rows step by 8: the token and item follow without a division, the surface is read anew
     * only when the item changes; a thread's texels of a row are side by side, stored at once
     * (8 bytes for bf16, 16 for int32: unformatted surface stores of whole texels) */
    int row = tid / 32, m = m0 + row, item = m / g.ntok, t = m % g.ntok, cur = -1;
    int last = rows - m0 < PX_EMB_BM ? rows - m0 : PX_EMB_BM;
    cudaSurfaceObject_t s = 0;
#pragma unroll 4
    for (; row < last; row += PX_EMB_GEMM_THREADS / 32, t += PX_EMB_GEMM_THREADS / 32) {
        while (t >= g.ntok)
            t -= g.ntok, item++;
        if (item != cur)
            s = all_slots[(size_t)item * (size_t)nslots + (size_t)dst].surf[0], cur = item;
        int4 a4 = *(const int4 *)&tab[row * PX_EMB_OUT_ROW + (ob - n0)];
        int32_t acc[4] = {a4.x, a4.y, a4.z, a4.w};
        uint32_t tx[4];
        int x0, n = px_emb_group_out(&gm, ch, ob, acc, tx, &x0);
        if (MODE == PX_EMBED_MODE_BF16 && n == 2)
            surf2Dwrite(make_uint2(tx[0], tx[1]), s, x0 * 4, t);
        else if (MODE == PX_EMBED_MODE_I32 && n == 4)
            surf2Dwrite(make_uint4(tx[0], tx[1], tx[2], tx[3]), s, x0 * 4, t);
        else
#pragma unroll
            for (int j = 0; j < 4; j++)
                if (j < n)
                    surf2Dwrite(tx[j], s, (x0 + j) * 4, t);
    }
#endif
}

/* What one EMBED instruction's launches need, made at load (px_gpu_embed_make): the packed
 * weights and parameters never change (weights and params are read-only data slots whose values
 * the validator checked), the staging buffer holds the tokens of every item. The operands it was
 * made for are kept, and a run checks them (a retargeted program keeps its EMBED operands). */
struct px_gpu_embed {
    int src, dst, wk, pk; /* ... and g's operands: the key */
    px_emb_geom g;
    int kb;         /* bytes per staged row: K rounded up to PX_EMB_BK */
    int dpad;       /* weight rows: d rounded up to PX_EMB_BN (the rows past d are zero) */
    int rows;       /* token rows the staging buffer holds: batch * ntok */
    uint8_t *d_tok; /* [rows][kb], its padding zeroed once */
    uint8_t *d_w;   /* [dpad][kb] */
    int32_t *d_par;  /* [4][d]: bias, multiplier, shift, weight sum */
    uint8_t *packed_from; /* the weights' and params' level 0 it was packed from (a retarget compares) */
    size_t packed_bytes;
    int covered; /* fused: the fetches write every token byte each run (1), not all (0), not known (-1) */
};

static void px__embed_geom(const pxvm_program *prog, const pxi_insn *in, px_emb_geom *g)
{
    const pxvm_slot *ss = &prog->slots[PX_ARG(in, EMBED, src)];
    g->c = PX_ARG(in, EMBED, channels), g->pw = ss->patch_w, g->ph = ss->patch_h, g->cols = ss->w / ss->patch_w;
    g->ntok = ss->patch_count, g->k = g->c * g->pw * g->ph, g->wtex = (g->k + 3) / 4, g->d = PX_ARG(in, EMBED, d);
    g->mode = PX_ARG(in, EMBED, mode), g->zero_point = PX_ARG(in, EMBED, zero_point);
    g->out_zero = (int8_t)PX_ARG(in, EMBED, out_zero);
}

static int px__embed_same(const px_gpu_embed *e, const pxvm_program *prog, const pxi_insn *in)
{
    px_emb_geom g;
    px__embed_geom(prog, in, &g);
    return e->src == PX_ARG(in, EMBED, src) && e->dst == PX_ARG(in, EMBED, dst) && e->wk == PX_ARG(in, EMBED, weights) &&
           e->pk == PX_ARG(in, EMBED, params) && !memcmp(&e->g, &g, sizeof g);
}

void px_gpu_embed_free(px_gpu_embed *e)
{
    if (!e)
        return;
    cudaFree(e->d_tok);
    cudaFree(e->d_w);
    cudaFree(e->d_par);
    free(e->packed_from);
    free(e);
}

/* The weights' and params' level 0 of EMBED record e's slots in prog (malloc'd; NULL: none). */
static uint8_t *px__embed_pixels(const px_gpu_embed *e, const pxvm_program *prog, size_t *bytes)
{
    const pxvm_slot *ws = &prog->slots[e->wk], *ps = &prog->slots[e->pk];
    size_t wbytes = (size_t)ws->w * (size_t)ws->h * 4u, pbytes = (size_t)ps->w * (size_t)ps->h * 4u;
    uint8_t *px = (uint8_t *)malloc(wbytes + pbytes);
    if (px) {
        pxvm_slot_initial(prog, e->wk, px);
        pxvm_slot_initial(prog, e->pk, px + wbytes);
    }
    *bytes = wbytes + pbytes;
    return px;
}

/* Packs the weights and params of EMBED record e from their slots' level-0 pixels px (as
 * px__embed_pixels returns them) into e's device buffers, on stream, which it synchronises (the
 * host pack is freed on return). what names the step in an error. */
static int px__embed_pack_upload(px_gpu_embed *e, const pxvm_program *prog, const uint8_t *px, cudaStream_t stream,
                                 const char *what, pxvm_error *err)
{
    const pxvm_slot *ws = &prog->slots[e->wk], *ps = &prog->slots[e->pk];
    size_t wbytes = (size_t)ws->w * (size_t)ws->h * 4u;
    size_t packed = (size_t)e->dpad * (size_t)e->kb, par = 4u * (size_t)e->g.d * sizeof(int32_t);
    uint8_t *host = (uint8_t *)calloc(1, packed + par);
    if (!host)
        return pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)(packed + par));
    px_emb_dev ctx = {{0, 0, 0}, 0, 0, {NULL, px, px + wbytes}, {0, ws->w, ps->w}};
    px_emb_pack(&ctx, &e->g, e->kb, host, (int32_t *)(host + packed));
    cudaError_t ce = cudaMemcpyAsync(e->d_w, host, packed, cudaMemcpyHostToDevice, stream);
    if (ce == cudaSuccess)
        ce = cudaMemcpyAsync(e->d_par, host + packed, par, cudaMemcpyHostToDevice, stream);
    if (ce == cudaSuccess)
        ce = cudaStreamSynchronize(stream); /* host is freed next */
    free(host);
    return ce == cudaSuccess ? 0 : px__cuda_fail(err, what, ce, __FILE__, __LINE__);
}

int px_gpu_embed_make(const pxvm_program *prog, const pxi_insn *in, int batch, cudaStream_t stream, px_gpu_embed **out,
                      pxvm_error *err)
{
    px_gpu_embed *e = (px_gpu_embed *)calloc(1, sizeof *e);
    if (!e)
        return pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)sizeof *e);
    *out = e;
    e->src = PX_ARG(in, EMBED, src), e->dst = PX_ARG(in, EMBED, dst);
    e->wk = PX_ARG(in, EMBED, weights), e->pk = PX_ARG(in, EMBED, params);
    px__embed_geom(prog, in, &e->g);
    const px_emb_geom *g = &e->g;
    e->kb = PX_EMB_KB(g->k);
    e->dpad = (g->d + PX_EMB_BN - 1) / PX_EMB_BN * PX_EMB_BN;
    e->rows = batch * g->ntok;
    e->covered = -1;
    e->packed_from = px__embed_pixels(e, prog, &e->packed_bytes);
    if (!e->packed_from)
        return pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)e->packed_bytes);
    /* The device buffers, within SPEC V-EMBED-13's need per item, px_embed_need = (dp + 3 * c6)
     * * kb' + 20 * dp with dp = d and kb' = K each rounded up to 128, c6 = count rounded up to 6:
     * d_w is dpad * kb = dp * kb' (PX_EMB_BN = PX_EMB_BK = 128), d_par 16 * d <= 20 * dp, and
     * d_tok batch * count * kb <= batch * 3 * c6 * kb'; so their sum <= batch * need, what
     * prog->memory counts for it and px__gl_load multiplies by the batch (the pack is one per
     * batch: counted per item, it is over-counted by batch - 1 packs, never under). E.g. d = 768,
     * K = 588, 196 tokens: 768 * 640 + 12288 + 196 * 640 = 629248 <= (768 + 594) * 640 + 15360
     * = 887040. The host copies of the weights' and params' pixels (packed_from, and the pack while
     * it is uploaded) are the two data slots' bytes again, not counted. */
    size_t staged = (size_t)e->rows * (size_t)e->kb;
    size_t packed = (size_t)e->dpad * (size_t)e->kb, par = 4u * (size_t)g->d * sizeof(int32_t);
    cudaError_t ce = cudaMalloc(&e->d_tok, staged);
    if (ce == cudaSuccess)
        ce = cudaMemsetAsync(e->d_tok, 0, staged, stream); /* the executor's stream: see px__upload */
    if (ce == cudaSuccess)
        ce = cudaMalloc(&e->d_w, packed);
    if (ce == cudaSuccess)
        ce = cudaMalloc(&e->d_par, par);
    if (ce == cudaSuccess && px__embed_pack_upload(e, prog, e->packed_from, stream,
                                                   "making EMBED's packed weights and staging buffer", err) < 0)
        return -1;
    if (ce == cudaSuccess)
        ce = cudaFuncSetAttribute(px__k_embed_gemm<PX_EMBED_MODE_I32>, cudaFuncAttributeMaxDynamicSharedMemorySize, PX_EMB_SMEM);
    if (ce == cudaSuccess)
        ce = cudaFuncSetAttribute(px__k_embed_gemm<PX_EMBED_MODE_I8>, cudaFuncAttributeMaxDynamicSharedMemorySize, PX_EMB_SMEM);
    if (ce == cudaSuccess)
        ce = cudaFuncSetAttribute(px__k_embed_gemm<PX_EMBED_MODE_BF16>, cudaFuncAttributeMaxDynamicSharedMemorySize, PX_EMB_SMEM);
    if (ce != cudaSuccess)
        return px__cuda_fail(err, "making EMBED's packed weights and staging buffer", ce, __FILE__, __LINE__);
    return 0;
}

/* The kernel: int8 tensor cores, or PXVM_CUDA_EMBED=dp4a for the dp4a one (the same bytes: both
 * are checked against the CPU executor by tests/conformance/gpu-check). */
static int px__embed_use_dp4a(void)
{
    const char *v = getenv("PXVM_CUDA_EMBED");
    return v && !strcmp(v, "dp4a");
}

/* ---- fused EMBED -------------------------------------------------------------------------------- */

/* Is EMBED instruction `index` fused now (its atlas unwritten, its rows staged by the fetches)? */
static int px__embed_fused(const pxvm_executor *ex, uint32_t index)
{
    return ex->fused && !ex->fuse_dp4a && index < ex->prog->ninsns && ex->fused[index] && index < ex->embed_n &&
           ex->embed[index];
}

/* The fetch kernel's table from the fusion set and the EMBED records, uploaded after the work
 * queued before (which may read the old one). */
static int px__fuse_table(pxvm_executor *ex, pxvm_error *err)
{
    memset(ex->h_fuse, 0, sizeof(px_emb_fuse) * (size_t)ex->nslots);
    for (uint32_t i = 0; i < ex->prog->ninsns; i++) {
        if (!px__embed_fused(ex, i))
            continue;
        const px_gpu_embed *e = ex->embed[i];
        px_emb_fuse f = {e->d_tok, e->kb, e->g.c, e->g.pw, e->g.ph, e->g.cols, e->g.ntok};
        ex->h_fuse[e->src] = f;
    }
    PX__CK(cudaMemcpyAsync(ex->d_fuse, ex->h_fuse, sizeof(px_emb_fuse) * (size_t)ex->nslots, cudaMemcpyHostToDevice,
                           ex->stream));
    PX__CK(cudaStreamSynchronize(ex->stream)); /* h_fuse may change at the next call */
    return 0;
}

int px_gpu_embed_fuse(pxvm_executor *ex, const uint8_t *fused, pxvm_error *err)
{
    uint8_t *keep = NULL;
    if (fused) {
        keep = (uint8_t *)malloc(ex->prog->ninsns ? ex->prog->ninsns : 1);
        if (!keep)
            return pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)ex->prog->ninsns);
        memcpy(keep, fused, ex->prog->ninsns);
    }
    uint8_t *old = ex->fused;
    int old_dp4a = ex->fuse_dp4a;
    ex->fused = keep;
    /* dp4a reads the atlas's texture: with it, the atlas stays written (the same bytes either way) */
    ex->fuse_dp4a = px__embed_use_dp4a();
    if (px__fuse_table(ex, err) == 0) {
        free(old);
        return 0;
    }
    /* the runner keeps its set when the call fails: so does the executor, and its device table
     * goes back to it where the device still takes a copy (else the next run fails too) */
    free(keep);
    ex->fused = old, ex->fuse_dp4a = old_dp4a;
    pxvm_error again;
    px__fuse_table(ex, &again);
    return -1;
}

/* A fused EMBED's staged rows start each run as its atlas does, cleared, unless its fetches
 * write every token byte (the rows' padding stays zero from the allocation: nothing writes it). */
int px_gpu_embed_fused_clear(pxvm_executor *ex, pxvm_error *err)
{
    for (uint32_t i = 0; ex->fused && i < ex->prog->ninsns; i++) {
        if (!px__embed_fused(ex, i))
            continue;
        px_gpu_embed *e = ex->embed[i];
        if (e->covered < 0)
            e->covered = pxvm_embed_tokens_covered(ex->prog, i);
        if (!e->covered)
            PX__CK(cudaMemsetAsync(e->d_tok, 0, (size_t)e->rows * (size_t)e->kb, ex->stream));
    }
    return 0;
}

int px_gpu_embed_follow(pxvm_executor *ex, const pxvm_program *next, int *remade, pxvm_error *err)
{
    *remade = 0;
    for (uint32_t i = 0; i < next->ninsns; i++) {
        if (next->insns[i].op != PX_OP_EMBED)
            continue;
        px_gpu_embed *e = i < ex->embed_n ? ex->embed[i] : NULL;
        if (e && px__embed_same(e, next, &next->insns[i])) {
            /* the same operands and shapes: the buffers stay (captured graphs name them), and
             * the pack is redone in place only where the weights' or params' pixels differ */
            size_t bytes;
            e->covered = -1; /* the fetches that write its atlas may differ in the next program */
            uint8_t *px = px__embed_pixels(e, next, &bytes);
            if (!px)
                return pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)bytes);
            if (bytes == e->packed_bytes && !memcmp(px, e->packed_from, bytes)) {
                free(px);
                continue;
            }
            int rc = px__embed_pack_upload(e, next, px, ex->stream, "packing EMBED's weights again", err);
            free(e->packed_from);
            e->packed_from = px, e->packed_bytes = bytes;
            if (rc < 0)
                return -1;
            continue;
        }
        if (i >= ex->embed_n) { /* not an EMBED in the program loaded (a retarget keeps opcodes: defensive) */
            px_gpu_embed **grown = (px_gpu_embed **)calloc(next->ninsns, sizeof(px_gpu_embed *));
            if (!grown)
                return pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)next->ninsns * sizeof(px_gpu_embed *));
            if (ex->embed)
                memcpy(grown, ex->embed, sizeof(px_gpu_embed *) * ex->embed_n);
            free(ex->embed);
            ex->embed = grown, ex->embed_n = next->ninsns;
        }
        px_gpu_embed *made = NULL;
        if (px_gpu_embed_make(next, &next->insns[i], ex->batch, ex->stream, &made, err) < 0) {
            px_gpu_embed_free(made);
            return -1;
        }
        cudaStreamSynchronize(ex->stream); /* queued work may still read the record it replaces */
        px_gpu_embed_free(ex->embed[i]);
        ex->embed[i] = made;
        *remade = 1;
    }
    /* a record made anew has other staged rows: the fetches of a fused atlas follow them */
    return *remade && ex->fused ? px__fuse_table(ex, err) : 0;
}

int px_gl_run_embed(px_gl_step *c, pxvm_error *err)
{
    pxvm_executor *ex = c->ex;
    const pxvm_program *prog = ex->prog;
    const pxi_insn *in = c->in;
    int src = PX_ARG(in, EMBED, src), dst = PX_ARG(in, EMBED, dst);
    px_emb_geom g;
    px__embed_geom(prog, in, &g);
    c->fresh[dst] = 0;
    uint32_t index = (uint32_t)(in - prog->insns);
    int fused = px__embed_fused(ex, index); /* its rows were written by the fetches: no staging */
    if (!fused && px__embed_use_dp4a()) {
        dim3 grid((unsigned)((g.ntok + PX_EMB_TT - 1) / PX_EMB_TT), (unsigned)((g.d + PX_EMB_TD - 1) / PX_EMB_TD), c->items);
        px__k_embed_dp4a<<<grid, PX_EMB_THREADS, 0, ex->stream>>>(ex->d_slots, ex->nslots, src, PX_ARG(in, EMBED, weights),
                                                                   PX_ARG(in, EMBED, params), dst, g);
        PX__CK(cudaGetLastError());
        return 0;
    }
    const px_gpu_embed *e = index < ex->embed_n ? ex->embed[index] : NULL;
    int rows = (int)c->items * g.ntok;
    if (!e || !px__embed_same(e, prog, in) || rows > e->rows ||
        (int64_t)rows * g.ph >= INT32_MAX)
        return pxvm_fail(err, PXE_CUDA_EMBED_RECORD, -1, -1, index, (int)c->items, e ? e->rows : 0, g.ntok);
    unsigned blocks = (unsigned)(((size_t)rows * (size_t)g.ph + 255u) / 256u);
    if (!fused)
        px__k_embed_stage<<<blocks < 65535u ? blocks : 65535u, 256, 0, ex->stream>>>(ex->d_slots, ex->nslots, src, g,
                                                                                       rows, e->kb, e->d_tok);
    dim3 grid((unsigned)((rows + PX_EMB_BM - 1) / PX_EMB_BM), (unsigned)(e->dpad / PX_EMB_BN));
    void (*kernel)(const px_gpu_slot *, int, int, px_emb_geom, int, int, const uint8_t *, const uint8_t *, const int32_t *) =
        g.mode == PX_EMBED_MODE_I32 ? px__k_embed_gemm<PX_EMBED_MODE_I32>
        : g.mode == PX_EMBED_MODE_I8 ? px__k_embed_gemm<PX_EMBED_MODE_I8>
                                     : px__k_embed_gemm<PX_EMBED_MODE_BF16>;
    kernel<<<grid, PX_EMB_GEMM_THREADS, PX_EMB_SMEM, ex->stream>>>(ex->d_slots, ex->nslots, dst, g, rows, e->kb, e->d_tok,
                                                                    e->d_w, e->d_par);
    PX__CK(cudaGetLastError());
    return 0;
}
