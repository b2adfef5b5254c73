/* resize.cu - RESIZE on the CUDA-GL executor; the CPU reference is executors/cpu/resize.c. The
 * tables are built on the host at load (vm/resize.c: px_resize_op_make, the same call the CPU
 * makes) and uploaded then, with pass 1's buffer for every item: a run only launches.
 *   pass 1  one thread per texel of the cw x rows buffer: source row row0 + r read through the
 *           texture object of src level 0, resized horizontally (the four channels summed at
 *           once, each ended with px_resize_clamp: px_resize_tap's rule) or copied;
 *   pass 2  one thread per texel of the rectangle: pad outside the content; inside it, the
 *           buffer's column resized vertically with px_resize_tap itself (or copied), or for
 *           NEAREST the source texel px_resize_nearest names; written through the surface.
 * When the horizontal pass only copies columns (px_resize_op's sel) there is no pass 1 and no
 * buffer: pass 2 sums source column xsel[x] (the copy commutes with the vertical pass exactly),
 * as the CPU does, so that both hold what the memory rule counts (px_resize_need). */
#include <stdlib.h>
#include <string.h>

#include "executor.cuh"

#include "../../isa/px_resize.h"
#include "../../vm/resize.h"

struct px_gpu_resize {
    int src, dst, x, y, w, h, cx, cy, cw, ch;
    int row0, rows, hpass, vpass, nearest;
    uint32_t pad;
    int ksx, ksy;
    int32_t *xfirst, *xcount, *xk, *yfirst, *ycount, *yk; /* device tables */
    int32_t *xsel; /* the horizontal pass copies source column xsel[x] (px_resize_op's sel): no pass 1 */
    uint8_t *tmp;                                          /* pass 1's buffer, every item */
    size_t tmp_item;                                       /* its bytes per item */
};

/* The arguments the kernels take by value (device pointers, sizes): nothing is read from host
 * memory, so a captured graph replays them. */
__global__ void px__k_resize_h(const px_gpu_slot *all_slots, int nslots, px_gpu_resize r)
{
    const px_gpu_slot *s = &all_slots[(size_t)blockIdx.z * (size_t)nslots + (size_t)r.src];
    long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= (long long)r.cw * r.rows)
        return;
    int x = (int)(p % r.cw), row = r.row0 + (int)(p / r.cw);
    uint32_t v;
    if (!r.hpass) {
        v = px__texel(s->tex[0], x, row);
    } else {
        int32_t first = r.xfirst[x], count = r.xcount[x];
        const int32_t *k = r.xk + (size_t)x * (size_t)r.ksx;
        uint32_t a0 = PX_RESIZE_HALF, a1 = PX_RESIZE_HALF, a2 = PX_RESIZE_HALF, a3 = PX_RESIZE_HALF;
        for (int32_t j = 0; j < count; j++) {
            uint32_t t = px__texel(s->tex[0], first + j, row), kj = (uint32_t)k[j];
            a0 += (t & 255u) * kj, a1 += ((t >> 8) & 255u) * kj, a2 += ((t >> 16) & 255u) * kj, a3 += (t >> 24) * kj;
        }
        v = px_resize_clamp(a0) | px_resize_clamp(a1) << 8 | px_resize_clamp(a2) << 16 | px_resize_clamp(a3) << 24;
    }
    uint8_t *d = r.tmp + (size_t)blockIdx.z * r.tmp_item + (size_t)p * 4u;
    d[0] = (uint8_t)v, d[1] = (uint8_t)(v >> 8), d[2] = (uint8_t)(v >> 16), d[3] = (uint8_t)(v >> 24);
}

__global__ void px__k_resize_v(const px_gpu_slot *all_slots, int nslots, px_gpu_resize r)
{
    const px_gpu_slot *slots = all_slots + (size_t)blockIdx.z * (size_t)nslots;
    long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= (long long)r.w * r.h)
        return;
    int x = r.x + (int)(p % r.w), y = r.y + (int)(p / r.w), i = x - r.cx, j = y - r.cy;
    uint32_t v = r.pad;
    if (i >= 0 && i < r.cw && j >= 0 && j < r.ch) {
        const uint8_t *t = r.tmp + (size_t)blockIdx.z * r.tmp_item;
        size_t trow = (size_t)r.cw * 4u;
        if (r.nearest) {
            int xi = r.xfirst[i], yi = r.yfirst[j];
            v = xi < 0 || yi < 0 ? 0u : px__texel(slots[r.src].tex[0], xi, yi);
        } else if (r.xsel && !r.vpass) {
            v = px__texel(slots[r.src].tex[0], r.xsel[i], j);
        } else if (r.xsel) { /* px_resize_tap down source column xsel[i], the four channels at once */
            const int32_t *k = r.yk + (size_t)j * (size_t)r.ksy;
            int32_t first = r.yfirst[j], count = r.ycount[j];
            uint32_t a0 = PX_RESIZE_HALF, a1 = PX_RESIZE_HALF, a2 = PX_RESIZE_HALF, a3 = PX_RESIZE_HALF;
            for (int32_t n = 0; n < count; n++) {
                uint32_t t = px__texel(slots[r.src].tex[0], r.xsel[i], first + n), kn = (uint32_t)k[n];
                a0 = px_resize_mac(a0, t & 255u, kn), a1 = px_resize_mac(a1, (t >> 8) & 255u, kn);
                a2 = px_resize_mac(a2, (t >> 16) & 255u, kn), a3 = px_resize_mac(a3, t >> 24, kn);
            }
            v = px_resize_clamp(a0) | px_resize_clamp(a1) << 8 | px_resize_clamp(a2) << 16 | px_resize_clamp(a3) << 24;
        } else if (!r.vpass) {
            const uint8_t *q = t + (size_t)j * trow + (size_t)i * 4u;
            v = (uint32_t)q[0] | (uint32_t)q[1] << 8 | (uint32_t)q[2] << 16 | (uint32_t)q[3] << 24;
        } else {
            const int32_t *k = r.yk + (size_t)j * (size_t)r.ksy;
            v = 0;
            for (int c = 0; c < 4; c++)
                v |= px_resize_tap(t + (size_t)i * 4u + (size_t)c, (int64_t)trow, r.yfirst[j] - r.row0, r.ycount[j], k)
                     << (8 * c);
        }
    }
    px__store(slots[r.dst].surf[0], x, y, v);
}

/* On the executor's stream: a cudaMemcpy from pageable memory may return before its DMA ends,
 * and the legacy stream is not ordered with the executor's non-blocking one. The host table may
 * be freed on return (a pageable source is staged before cudaMemcpyAsync returns). */
static cudaError_t px__upload(int32_t **d, const int32_t *h, size_t n, cudaStream_t stream)
{
    *d = NULL;
    if (!n || !h)
        return cudaSuccess;
    cudaError_t e = cudaMalloc(d, n * sizeof(int32_t));
    return e == cudaSuccess ? cudaMemcpyAsync(*d, h, n * sizeof(int32_t), cudaMemcpyHostToDevice, stream) : e;
}

int px_gpu_resize_make(const pxvm_program *prog, const pxi_insn *in, int items, cudaStream_t stream, px_gpu_resize **out,
                       pxvm_error *err)
{
    *out = NULL;
    const pxvm_slot *s = &prog->slots[PX_ARG(in, RESIZE, src)];
    px_resize_op op;
    if (px_resize_op_make(in, s->w, s->h, &op, err) < 0)
        return -1;
    px_gpu_resize *r = (px_gpu_resize *)calloc(1, sizeof *r);
    if (!r) {
        px_resize_op_free(&op);
        return pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)sizeof *r);
    }
    r->src = op.src, r->dst = op.dst, r->x = op.x, r->y = op.y, r->w = op.w, r->h = op.h;
    r->cx = op.cx, r->cy = op.cy, r->cw = op.cw, r->ch = op.ch;
    r->row0 = op.row0, r->rows = op.sel ? 0 : op.rows, r->hpass = op.hpass, r->vpass = op.vpass;
    r->nearest = op.filter == PX_RESIZE_NEAREST && !op.copy;
    r->pad = op.pad, r->ksx = op.tx.ksize, r->ksy = op.ty.ksize;
    r->tmp_item = (size_t)r->rows * (size_t)op.cw * 4u;
    cudaError_t e = px__upload(&r->xfirst, op.tx.first, (size_t)op.cw, stream);
    if (e == cudaSuccess)
        e = px__upload(&r->xsel, op.sel, op.sel ? (size_t)op.cw : 0u, stream);
    if (e == cudaSuccess)
        e = px__upload(&r->xcount, op.tx.count, (size_t)op.cw, stream);
    if (e == cudaSuccess)
        e = px__upload(&r->xk, op.tx.k, (size_t)op.cw * (size_t)op.tx.ksize, stream);
    if (e == cudaSuccess)
        e = px__upload(&r->yfirst, op.ty.first, (size_t)op.ch, stream);
    if (e == cudaSuccess)
        e = px__upload(&r->ycount, op.ty.count, (size_t)op.ch, stream);
    if (e == cudaSuccess)
        e = px__upload(&r->yk, op.ty.k, (size_t)op.ch * (size_t)op.ty.ksize, stream);
    if (e == cudaSuccess && r->tmp_item)
        e = cudaMalloc(&r->tmp, r->tmp_item * (size_t)items);
    px_resize_op_free(&op);
    *out = r;
    if (e != cudaSuccess)
        return px__cuda_fail(err, "uploading RESIZE tables", e, __FILE__, __LINE__);
    return 0;
}

void px_gpu_resize_free(px_gpu_resize *r)
{
    if (!r)
        return;
    cudaFree(r->xfirst), cudaFree(r->xcount), cudaFree(r->xk);
    cudaFree(r->yfirst), cudaFree(r->ycount), cudaFree(r->yk);
    cudaFree(r->xsel), cudaFree(r->tmp);
    free(r);
}

size_t px_gpu_resize_bytes(const px_gpu_resize *r, int items)
{
    return sizeof(int32_t) * ((size_t)r->cw * (2u + (size_t)r->ksx + (r->xsel ? 1u : 0u)) + (size_t)r->ch * (2u + (size_t)r->ksy)) +
           r->tmp_item * (size_t)items;
}

cudaError_t px_gpu_resize_run(const px_gpu_slot *d_slots, int nslots, const px_gpu_resize *r, int items, cudaStream_t stream)
{
    if (r->rows) {
        long long n = (long long)r->cw * r->rows;
        px__k_resize_h<<<dim3((unsigned)((n + 255) / 256), 1, (unsigned)items), 256, 0, stream>>>(d_slots, nslots, *r);
        cudaError_t e = cudaGetLastError();
        if (e != cudaSuccess)
            return e;
    }
    long long n = (long long)r->w * r->h;
    px__k_resize_v<<<dim3((unsigned)((n + 255) / 256), 1, (unsigned)items), 256, 0, stream>>>(d_slots, nslots, *r);
    return cudaGetLastError();
}
