/* embed.cu - EMBED on the CUDA-GL executor: a grid of blocks of TT tokens x TD output channels per
 * item (embed_tile.h, the functions the CPU twin test runs too), reading the atlas, the weights and
 * the parameters through their level-0 textures and writing dst through its surface. Integer
 * only (dp4a), so the bytes are those of the CPU executor (tests/conformance/gpu-check). */
#include <stdlib.h>
#include <string.h>

#include "executor.cuh"

struct px_emb_dev {
    cudaTextureObject_t tex[3]; /* PX_EMB_SRC, PX_EMB_W, PX_EMB_P */
    cudaSurfaceObject_t dst;
};

/* px__store is device code; the tile functions are __host__ __device__ (the CPU twin's too) */
static __host__ __device__ inline void px__emb_store(cudaSurfaceObject_t s, int x, int y, uint32_t v)
{
#ifdef __CUDA_ARCH__
    px__store(s, x, y, v);
#else
    (void)s, (void)x, (void)y, (void)v;
#endif
}

#define PX_EMB_CTX const px_emb_dev *
#define PX_EMB_TEXEL(ctx, which, x, y) px__texel((ctx)->tex[which], (x), (y))
#define PX_EMB_STORE(ctx, x, y, v) px__emb_store((ctx)->dst, (x), (y), (v))
#include "embed_tile.h"

__global__ void __launch_bounds__(PX_EMB_THREADS) px__k_embed_dp4a(const px_gpu_slot *all_slots, int nslots, int src,
                                                                   int wk, int pk, int dst, px_emb_geom g)
{
    const px_gpu_slot *slots = all_slots + (size_t)blockIdx.z * (size_t)nslots; /* z: the item */
    px_emb_dev dev = {{slots[src].tex[0], slots[wk].tex[0], slots[pk].tex[0]}, slots[dst].surf[0]};
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

/* c += A * B for one warp's m16n8k32 tile (u8 x s8 -> s32, exact). */
static __device__ inline void px__mma(int32_t c[4], const uint32_t a[4], const uint32_t b[2])
{
    asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.u8.s8.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                 "{%0, %1, %2, %3};"
                 : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

__global__ void __launch_bounds__(PX_EMB_THREADS) px__k_embed_mma(const px_gpu_slot *all_slots, int nslots, int src,
                                                                  int wk, int pk, int dst, px_emb_geom g)
{
    const px_gpu_slot *slots = all_slots + (size_t)blockIdx.z * (size_t)nslots;
    px_emb_dev dev = {{slots[src].tex[0], slots[wk].tex[0], slots[pk].tex[0]}, slots[dst].surf[0]};
    __shared__ px_emb_smem sm;
    __shared__ int32_t out[PX_EMB_TT][PX_EMB_OUT_ROW];
    __shared__ int32_t wsum_all[PX_EMB_TD];
    int tid = (int)threadIdx.x, warp = tid / 32, lane = tid % 32;
    int t0 = (int)blockIdx.x * PX_EMB_TT, o0 = (int)blockIdx.y * PX_EMB_TD;
    int32_t c[4][4] = {{0, 0, 0, 0}, {0, 0, 0, 0}, {0, 0, 0, 0}, {0, 0, 0, 0}}, ws = 0;
    for (int p0 = 0, area = g.pw * g.ph; p0 < area; p0 += PX_EMB_PX) {
        px_emb_load(&dev, &g, &sm, tid, t0, o0, p0);
        __syncthreads();
        for (int ks = 0; ks < PX_EMB_PX / 8; ks++) {
            uint32_t a[4];
            px_emb_frag_a(&sm, warp, lane, ks, a);
            for (int nt = 0; nt < 4; nt++) {
                uint32_t b[2];
                px_emb_frag_b(&sm, warp, lane, ks, nt, b);
                px__mma(c[nt], a, b);
            }
        }
        if (tid < PX_EMB_TD)
            ws = px_emb_wsum_chunk(&sm, tid, ws);
        __syncthreads();
    }
    for (int nt = 0; nt < 4; nt++)
        px_emb_frag_store(out, warp, lane, nt, c[nt]);
    if (tid < PX_EMB_TD)
        wsum_all[tid] = ws;
    __syncthreads();
    int32_t acc[4][4], wsum[4];
    px_emb_from_table(out, wsum_all, tid, acc, wsum);
    px_emb_epilogue(&dev, &g, tid, t0, o0, acc, wsum);
}

/* The kernel: int8 tensor cores (mma.sync), or PXVM_CUDA_EMBED=dp4a for the dp4a one (the same
 * bytes: both are checked against the CPU executor by tests/conformance/gpu-check). */
static int px__embed_use_dp4a(void)
{
    const char *v = getenv("PXVM_CUDA_EMBED");
    return v && !strcmp(v, "dp4a");
}

int px_gl_run_embed(px_gl_step *c, pxvm_error *err)
{
    pxvm_executor *ex = c->ex;
    const pxvm_program *prog = ex->prog;
    const pxi_insn *in = c->in;
    int src = PX_ARG(in, EMBED, src), dst = PX_ARG(in, EMBED, dst);
    const pxvm_slot *ss = &prog->slots[src];
    px_emb_geom g;
    g.c = PX_ARG(in, EMBED, channels), g.pw = ss->patch_w, g.ph = ss->patch_h, g.cols = ss->w / ss->patch_w;
    g.ntok = ss->patch_count, g.k = g.c * g.pw * g.ph, g.wtex = (g.k + 3) / 4, g.d = PX_ARG(in, EMBED, d);
    g.mode = PX_ARG(in, EMBED, mode), g.zero_point = PX_ARG(in, EMBED, zero_point);
    g.out_zero = (int8_t)PX_ARG(in, EMBED, out_zero);
    c->fresh[dst] = 0;
    dim3 grid((unsigned)((g.ntok + PX_EMB_TT - 1) / PX_EMB_TT), (unsigned)((g.d + PX_EMB_TD - 1) / PX_EMB_TD), c->items);
    if (px__embed_use_dp4a())
        px__k_embed_dp4a<<<grid, PX_EMB_THREADS, 0, ex->stream>>>(ex->d_slots, ex->nslots, src, PX_ARG(in, EMBED, weights),
                                                                   PX_ARG(in, EMBED, params), dst, g);
    else
        px__k_embed_mma<<<grid, PX_EMB_THREADS, 0, ex->stream>>>(ex->d_slots, ex->nslots, src, PX_ARG(in, EMBED, weights),
                                                                  PX_ARG(in, EMBED, params), dst, g);
    PX__CK(cudaGetLastError());
    return 0;
}
