/* embed.cu - EMBED on the CUDA-GL executor: a grid of blocks of TT tokens x TD output channels per
 * item (embed_tile.h, the functions the CPU twin test runs too), reading the atlas, the weights and
 * the parameters through their level-0 textures and writing dst through its surface. Integer
 * only (dp4a), so the bytes are those of the CPU executor (tests/conformance/gpu-check). */
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

__global__ void __launch_bounds__(PX_EMB_THREADS) px__k_embed(const px_gpu_slot *all_slots, int nslots, int src, int wk,
                                                              int pk, int dst, px_emb_geom g)
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
    px__k_embed<<<grid, PX_EMB_THREADS, 0, ex->stream>>>(ex->d_slots, ex->nslots, src, PX_ARG(in, EMBED, weights),
                                                          PX_ARG(in, EMBED, params), dst, g);
    PX__CK(cudaGetLastError());
    return 0;
}
