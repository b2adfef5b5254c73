/* fixation.cu - SALIENCY and ARGMAX on the CUDA-GL executor; the CPU reference is
 * executors/cpu/fixation.c. Both compute isa/px_sem.h's px_saliency_at, px_saliency_pixel,
 * px_argmax_value, px_argmax_better, px_inhibited and px_texel_centre_q16. */
#include "gpu_slot.cuh"

/* One thread per map texel, blockIdx.z the item. */
__global__ void px__k_saliency(const px_gpu_slot *all_slots, int nslots, int src, int dst, int accumulate, int c,
                               int s, int map, int shift, uint32_t w_lum, uint32_t w_rg, uint32_t w_by)
{
    const px_gpu_slot *slots = all_slots + (size_t)blockIdx.z * (size_t)nslots;
    const px_gpu_slot *d = &slots[dst];
    int w = d->w[0], p = blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= w * d->h[0])
        return;
    int x = p % w, y = p / w;
    uint32_t v = px_saliency_at(&slots[src], c, s, map, x, y, w_lum, w_rg, w_by, shift);
    uint32_t old = accumulate ? px__texel(d->tex[0], x, y) : 0u;
    px__store(d->surf[0], x, y, px_saliency_pixel(v, accumulate, old));
}

cudaError_t px_gpu_saliency(const px_gpu_slot *d_slots, int nslots, const pxi_insn *in, int map_w, int map_h, int items,
                            cudaStream_t stream)
{
    unsigned blocks = (unsigned)(((long long)map_w * map_h + 255) / 256);
    px__k_saliency<<<dim3(blocks, 1, (unsigned)items), 256, 0, stream>>>(
        d_slots, nslots, PX_ARG(in, SALIENCY, src), PX_ARG(in, SALIENCY, dst), PX_ARG(in, SALIENCY, accumulate),
        PX_ARG(in, SALIENCY, centre), PX_ARG(in, SALIENCY, surround), PX_ARG(in, SALIENCY, map),
        PX_ARG(in, SALIENCY, shift), (uint32_t)PX_ARG(in, SALIENCY, w_lum), (uint32_t)PX_ARG(in, SALIENCY, w_rg),
        (uint32_t)PX_ARG(in, SALIENCY, w_by));
    return cudaGetLastError();
}

#define PX_ARGMAX_THREADS 1024

struct px__argmax_args {
    int src, level, reg, space, ior_first, ior_count, radius;
    uint32_t wr, wg, wb, wa;
};

/* One block per item: every thread scans texels tid, tid + 1024, ... in row-major order keeping
 * the first largest uninhibited texel and the first largest of all; a tree reduction with the
 * same rule (px_argmax_better) gives the result the CPU's single scan gives. */
__global__ void __launch_bounds__(PX_ARGMAX_THREADS) px__k_argmax(const px_gpu_slot *all_slots, int nslots,
                                                                  px__argmax_args a, int32_t *fix_run)
{
    const px_gpu_slot *slots = all_slots + (size_t)blockIdx.x * (size_t)nslots;
    int32_t *fix = fix_run + (size_t)blockIdx.x * PX_FIX_REGS * 2u;
    const px_gpu_slot *sv = &slots[a.src];
    int w = sv->w[a.level], h = sv->h[a.level], sw = slots[a.space].w[0], sh = slots[a.space].h[0];
    __shared__ int32_t ior[2 * PX_FIX_REGS];
    __shared__ uint32_t best_v[PX_ARGMAX_THREADS], any_v[PX_ARGMAX_THREADS];
    __shared__ long long best_i[PX_ARGMAX_THREADS], any_i[PX_ARGMAX_THREADS];
    if (threadIdx.x < 2u * (unsigned)a.ior_count)
        ior[threadIdx.x] = fix[2 * a.ior_first + (int)threadIdx.x];
    __syncthreads();
    uint32_t bv = 0, av = 0;
    long long bi = -1, ai = -1;
    long long n = (long long)w * h;
    for (long long i = threadIdx.x; i < n; i += blockDim.x) {
        int x = (int)(i % w), y = (int)(i / w);
        uint32_t v = px_argmax_value(px__texel(sv->tex[a.level], x, y), a.wr, a.wg, a.wb, a.wa);
        if (px_argmax_better(v, i, av, ai))
            av = v, ai = i;
        if (!px_argmax_better(v, i, bv, bi))
            continue;
        int32_t X = px_texel_centre_q16(x, w, sw), Y = px_texel_centre_q16(y, h, sh);
        int inhibited = 0;
        for (int k = 0; k < a.ior_count && !inhibited; k++)
            inhibited = px_inhibited(X, Y, ior[2 * k], ior[2 * k + 1], a.radius);
        if (!inhibited)
            bv = v, bi = i;
    }
    best_v[threadIdx.x] = bv, best_i[threadIdx.x] = bi, any_v[threadIdx.x] = av, any_i[threadIdx.x] = ai;
    __syncthreads();
    for (unsigned k = blockDim.x / 2; k > 0; k >>= 1) {
        if (threadIdx.x < k) {
            unsigned o = threadIdx.x + k;
            if (best_i[o] >= 0 && px_argmax_better(best_v[o], best_i[o], best_v[threadIdx.x], best_i[threadIdx.x]))
                best_v[threadIdx.x] = best_v[o], best_i[threadIdx.x] = best_i[o];
            if (any_i[o] >= 0 && px_argmax_better(any_v[o], any_i[o], any_v[threadIdx.x], any_i[threadIdx.x]))
                any_v[threadIdx.x] = any_v[o], any_i[threadIdx.x] = any_i[o];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        long long at = best_i[0] >= 0 ? best_i[0] : any_i[0];
        fix[2 * a.reg] = px_texel_centre_q16((int)(at % w), w, sw);
        fix[2 * a.reg + 1] = px_texel_centre_q16((int)(at / w), h, sh);
    }
}

cudaError_t px_gpu_argmax(const px_gpu_slot *d_slots, int nslots, const pxi_insn *in, int32_t *fix_run, int items,
                          cudaStream_t stream)
{
    px__argmax_args a;
    a.src = PX_ARG(in, ARGMAX, src), a.level = PX_ARG(in, ARGMAX, level), a.reg = PX_ARG(in, ARGMAX, reg);
    a.space = PX_ARG(in, ARGMAX, space), a.ior_first = PX_ARG(in, ARGMAX, ior_first);
    a.ior_count = PX_ARG(in, ARGMAX, ior_count), a.radius = PX_ARG(in, ARGMAX, radius);
    a.wr = (uint32_t)PX_ARG(in, ARGMAX, w_r), a.wg = (uint32_t)PX_ARG(in, ARGMAX, w_g);
    a.wb = (uint32_t)PX_ARG(in, ARGMAX, w_b), a.wa = (uint32_t)PX_ARG(in, ARGMAX, w_a);
    px__k_argmax<<<(unsigned)items, PX_ARGMAX_THREADS, 0, stream>>>(d_slots, nslots, a, fix_run);
    return cudaGetLastError();
}
