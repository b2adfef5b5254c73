/* tokens.cu - tokens for models on the CUDA-GL executor: one kernel reads an atlas's level 0
 * through its texture and writes each texel's channels as the format's table gives them
 * (vm/tokens.c built the table on the host: the same bits as the CPU executor's, by
 * construction). Device destinations are written on the stream; host ones from the outputs a
 * synchronous run already downloaded, else through a device buffer and one copy. */
#include <stdint.h>

#include "../../vm/tokens.h"
#include "executor.cuh"

/* The table as a kernel argument: no copy-engine transfer per call (a switch of engines costs
 * more than the kernel, run.cu's fixations found), and a graph may capture the launch. 4 KiB
 * of parameters: CUDA 12.1+ on Volta and later. */
struct px__token_values {
    uint32_t v[4][256];
};

/* Block (patch p, item): thread i converts texels i, i + blockDim.x, ... of the patch; planar
 * (NCHW, FLAT) writes channel c of texel i at c * plane + i, else (NHWC) at i * C + c. */
__global__ void px__k_tokens(const px_gpu_slot *slots, int nslots, int slot, int item0, int cols, int pw, int ph, int C,
                             int elem, int planar, px__token_values tab, uint8_t *dst, long long item_bytes)
{
    __shared__ uint32_t table[4][256];
    for (int i = threadIdx.x; i < C * 256; i += blockDim.x)
        table[i >> 8][i & 255] = tab.v[i >> 8][i & 255];
    __syncthreads();
    int p = blockIdx.x, item = blockIdx.y;
    cudaTextureObject_t t = slots[(size_t)(item0 + item) * (size_t)nslots + (size_t)slot].tex[0];
    int tx = (p % cols) * pw, ty = (p / cols) * ph, plane = pw * ph;
    uint8_t *out = dst + (long long)item * item_bytes + (long long)p * plane * C * elem;
    for (int i = threadIdx.x; i < plane; i += blockDim.x) {
        uint32_t v = px__texel(t, tx + i % pw, ty + i / pw);
        for (int c = 0; c < C; c++) {
            uint32_t value = table[c][(v >> (8 * c)) & 255u];
            int o = planar ? c * plane + i : i * C + c;
            if (elem == 4)
                ((uint32_t *)out)[o] = value;
            else
                ((uint16_t *)out)[o] = (uint16_t)value;
        }
    }
}

int px__gl_read_tokens(pxvm_executor *ex, int slot, int item0, int items, const pxvm_token_table *t, void *dst,
                       int device, pxvm_error *err)
{
    if (px__need_program(ex, "read_tokens", err) < 0)
        return -1;
    if (pxvm_check_tokens(ex->prog, ex->batch, slot, item0, items, dst, err) < 0)
        return -1;
    PX__CK(cudaSetDevice(ex->device));
    if (px__retarget_flush(ex, err) < 0) /* tokens between a retarget and a run: the initial state's */
        return -1;
    const pxvm_slot *s = &ex->prog->slots[slot];
    const px_gpu_slot *g = &ex->slots[slot];
    size_t per = pxvm_tokens_item_bytes(s, t), total = per * (size_t)items;
    if (device < 0 && ex->h_out[slot] && ex->out_valid) { /* level 0 downloaded at the end of the run */
        size_t bytes = (size_t)g->w[0] * (size_t)g->h[0] * 4u;
        for (int i = 0; i < items; i++)
            pxvm_tokens_convert(t, s, ex->h_out[slot] + bytes * (size_t)(item0 + i), g->w[0], (uint8_t *)dst + per * (size_t)i,
                                0, s->patch_count);
        return 0;
    }
    uint8_t *d = (uint8_t *)dst;
    if (device >= 0) {
        if (px__check_device_ptr(ex, dst, "tokens", err) < 0)
            return -1;
        if ((uintptr_t)dst % (uintptr_t)t->elem)
            return pxvm_fail(err, PXE_DEVICE_TOKEN_ALIGN, -1, -1);
    } else {
        PX__CK(cudaMallocAsync((void **)&d, total, ex->stream));
    }
    px__token_values tab;
    memcpy(tab.v, t->value, sizeof tab.v);
    dim3 grid((unsigned)s->patch_count, (unsigned)items);
    px__k_tokens<<<grid, 256, 0, ex->stream>>>(ex->d_slots, ex->nslots, slot, item0, s->w / s->patch_w, s->patch_w,
                                                s->patch_h, t->channels, t->elem, t->layout != PXVM_TOKENS_NHWC, tab, d,
                                                (long long)per);
    cudaError_t e = cudaGetLastError();
    if (device >= 0) {
        if (e != cudaSuccess)
            return px__cuda_fail(err, "the tokens kernel", e, __FILE__, __LINE__);
        return px__join_out(ex, err);
    }
    if (e == cudaSuccess) /* pageable host memory: the copy returns when the bytes are there */
        e = cudaMemcpyAsync(dst, d, total, cudaMemcpyDeviceToHost, ex->stream);
    cudaError_t f = cudaFreeAsync(d, ex->stream);
    if (e == cudaSuccess)
        e = f;
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(ex->stream);
    return e == cudaSuccess ? 0 : px__cuda_fail(err, "reading tokens to the host", e, __FILE__, __LINE__);
}
