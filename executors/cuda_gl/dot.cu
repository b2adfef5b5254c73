/* dot.cu - DOT_RGB on the CUDA-GL executor: a block per item sums the products of two rows of the
 * program image (their first channel, up to the first zero), as the CPU executor does, and writes
 * isa/px_sem.h's px_dot_result or records the item's first trap, which run.cu reads back. */
#include "gpu_slot.cuh"

/* DOT_RGB over rows of the program image (one block). */
__global__ void px__k_dot(const px_gpu_slot *all_slots, int nslots, int row_a, int row_b, int row_out, uint32_t insn,
                          px_gpu_status *all_status)
{
    const px_gpu_slot *slots = all_slots + (size_t)blockIdx.x * (size_t)nslots; /* block b: item b */
    px_gpu_status *status = all_status + blockIdx.x;
    __shared__ int first;
    __shared__ unsigned long long part[256];
    const px_gpu_slot *p = &slots[0];
    int w = p->w[0];
    if (threadIdx.x == 0)
        first = w;
    __syncthreads();
    for (int x = threadIdx.x; x < w; x += blockDim.x)
        if (!(px__texel(p->tex[0], x, row_a) & 255u) || !(px__texel(p->tex[0], x, row_b) & 255u))
            atomicMin(&first, x);
    __syncthreads();
    unsigned long long sum = 0;
    for (int x = threadIdx.x; x < first; x += blockDim.x)
        sum += (unsigned long long)(px__texel(p->tex[0], x, row_a) & 255u) * (px__texel(p->tex[0], x, row_b) & 255u);
    part[threadIdx.x] = sum;
    __syncthreads();
    for (int k = blockDim.x / 2; k > 0; k >>= 1) {
        if ((int)threadIdx.x < k)
            part[threadIdx.x] += part[threadIdx.x + k];
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        unsigned long long total = part[0];
        if (total <= PX_DOT_MAX)
            px__store(p->surf[0], 0, row_out, px_dot_result((uint32_t)total));
        else if (status->trap_insn == 0xFFFFFFFFu) { /* launches are ordered: the first trap wins */
            status->trap_insn = insn;
            status->trap_sum = (uint32_t)total;
        }
    }
}

cudaError_t px_gpu_dot(const px_gpu_slot *d_slots, int nslots, const pxi_insn *in, uint32_t insn, px_gpu_status *status,
                       int items, cudaStream_t stream)
{
    px__k_dot<<<(unsigned)items, 256, 0, stream>>>(d_slots, nslots, PX_ARG(in, DOT_RGB, row_a), PX_ARG(in, DOT_RGB, row_b),
                                                   PX_ARG(in, DOT_RGB, row_out), insn, status);
    return cudaGetLastError();
}
