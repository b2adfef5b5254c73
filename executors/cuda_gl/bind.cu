/* bind.cu - the CUDA-GL executor's binds: a frame into an input's level 0 and its linear copy
 * (the bind kernel), from device memory, from pinned host frames on a pipelined copy stream, only
 * the dirty rectangles' tiles, or borrowed in place; and the check of a caller's device pointer. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "executor.cuh"

/* A caller's view on the device, as the bind kernel reads it. */
struct px_gpu_view {
    const uint8_t *data;
    int w, h, channels;
    long long item_stride, row_stride, px_stride, ch_stride;
};

/* Level 0 of input `slot` of items item0.. from a view (device memory: the caller's, or our linear
 * upload buffer holding RGBA8 rows): each pixel through px_expand, the rule the CPU's
 * pxvm_view_to_rgba applies. `lin`, when not NULL, also receives the RGBA8 rows (the pyramid
 * reads an input's level 0 from there). Packed RGBA8 rows go 4 texels a thread, 16-byte loads and
 * one 16-byte surface store (a 2D copy into the array on the copy engine measured slower).
 * `to_array` 0: the linear copy only (a frame-only input, read by DIFF and UPDATE from there). */
__global__ void px__k_bind(px_gpu_view v, uint32_t *lin_all, size_t lin_item, const px_gpu_slot *slots, int nslots,
                           int slot, int item0, int ox, int oy, /* (ox, oy): where the view's (0, 0) goes */
                           int to_array)
{
    int item = blockIdx.y;
    cudaSurfaceObject_t dst = slots[(size_t)(item0 + item) * (size_t)nslots + (size_t)slot].surf[0];
    const uint8_t *base = v.data + (long long)item * v.item_stride;
    uint32_t *lin = lin_all ? lin_all + (size_t)item * lin_item : NULL;
    int w = v.w, h = v.h;
    bool quads = v.channels == 4 && v.px_stride == 4 && v.ch_stride == 1 && (w & 3) == 0 && (v.row_stride & 15) == 0 &&
                 (((uintptr_t)base) & 15) == 0;
    if (quads) {
        int per_row = w / 4;
        for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < per_row * h; i += gridDim.x * blockDim.x) {
            int x = 4 * (i % per_row), y = i / per_row;
            uint4 q = *(const uint4 *)(base + (long long)y * v.row_stride + 4LL * x);
            if (lin)
                *(uint4 *)(lin + (size_t)y * (size_t)w + (size_t)x) = q;
            if (to_array)
                surf2Dwrite(q, dst, (ox + x) * 4, oy + y);
        }
        return;
    }
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < w * h; i += gridDim.x * blockDim.x) {
        int x = i % w, y = i / w;
        uint32_t p = px_expand(base + (long long)y * v.row_stride + (long long)x * v.px_stride, v.channels, v.ch_stride);
        if (lin)
            lin[(size_t)y * (size_t)w + (size_t)x] = p;
        if (to_array)
            px__store(dst, ox + x, oy + y, p);
    }
}

/* A device pointer of ours: memory of the executor's CUDA device (or managed memory). */
int px__check_device_ptr(const pxvm_executor *ex, const void *p, const char *what, pxvm_error *err)
{
    cudaPointerAttributes attr;
    if (cudaPointerGetAttributes(&attr, p) != cudaSuccess) {
        cudaGetLastError();
        return pxvm_fail(err, PXE_DEVICE_NOT_CUDA, -1, -1, what);
    }
    if ((attr.type != cudaMemoryTypeDevice && attr.type != cudaMemoryTypeManaged) || attr.device != ex->device)
        return pxvm_fail(err, PXE_DEVICE_OTHER, -1, -1, what,
                         attr.type == cudaMemoryTypeHost ? "the host, pinned for device" : "CUDA device", attr.device,
                         ex->device);
    return 0;
}

static int px__launch_bind(pxvm_executor *ex, const pxvm_view *v, const uint8_t *data, uint32_t *lin, int slot,
                           int item0, pxvm_error *err)
{
    px_gpu_view gv = {data, v->w, v->h, v->channels, (long long)v->item_stride, (long long)v->row_stride,
                      (long long)v->px_stride, (long long)v->ch_stride};
    int quads = (v->w + 3) / 4 * v->h, blocks = (quads + 255) / 256;
    dim3 grid((unsigned)(blocks < 2048 ? blocks : 2048), (unsigned)v->items);
    px__k_bind<<<grid, 256, 0, ex->stream>>>(gv, lin, (size_t)v->w * (size_t)v->h, ex->d_slots, ex->nslots, slot, item0,
                                             0, 0, !ex->prog->frame_only[slot]);
    PX__CK(cudaGetLastError());
    return 0;
}

/* A page-locked, packed RGBA frame: the H2D copy goes on the copy stream into one of two upload
 * buffers (waiting until the bind kernel that last read that buffer has run), and the bind kernel
 * on the run's stream waits for it and converts it into the slot and its linear copy. So the
 * upload of the next frame overlaps the current frame's run; the caller's stream waits for the
 * upload (then its memory may be reused). */
static int px__bind_pipelined(pxvm_executor *ex, int slot, int item0, const pxvm_view *v, pxvm_error *err)
{
    size_t pitch = (size_t)v->w * 4u, bytes = pitch * (size_t)v->h;
    int n = ex->nslots;
    if (!ex->copy_stream)
        PX__CK(cudaStreamCreateWithFlags(&ex->copy_stream, cudaStreamNonBlocking));
    if (!ex->d_upload) {
        ex->d_upload = (uint8_t *(*)[2])calloc((size_t)n, sizeof *ex->d_upload);
        ex->up_done = (cudaEvent_t(*)[2])calloc((size_t)n, sizeof *ex->up_done);
        ex->up_free = (cudaEvent_t(*)[2])calloc((size_t)n, sizeof *ex->up_free);
        ex->up_turn = (int *)calloc((size_t)n, sizeof(int));
        if (!ex->d_upload || !ex->up_done || !ex->up_free || !ex->up_turn)
            return pxvm_fail(err, PXE_NOMEM, -1, -1, 0ull);
    }
    int t = ex->up_turn[slot];
    ex->up_turn[slot] ^= 1;
    if (!ex->d_upload[slot][t]) { /* as large as the slot's linear buffers (retarget: maybe larger) */
        PX__CK(cudaMalloc(&ex->d_upload[slot][t], px__lin_bytes(ex, slot) * (size_t)ex->batch));
        PX__CK(cudaEventCreateWithFlags(&ex->up_done[slot][t], cudaEventDisableTiming));
        PX__CK(cudaEventCreateWithFlags(&ex->up_free[slot][t], cudaEventDisableTiming));
        PX__CK(cudaEventRecord(ex->up_free[slot][t], ex->stream));
    }
    uint8_t *buf = ex->d_upload[slot][t] + bytes * (size_t)item0;
    /* not ordered after the caller's stream: that stream waits for our last run, and the upload
     * must not (include/pxvm.h: page-locked frames are read when the copy engine gets to them) */
    PX__CK(cudaStreamWaitEvent(ex->copy_stream, ex->up_free[slot][t], 0));
    PX__CK(cudaMemcpyAsync(buf, v->data, bytes * (size_t)v->items, cudaMemcpyHostToDevice, ex->copy_stream));
    PX__CK(cudaEventRecord(ex->up_done[slot][t], ex->copy_stream));
    PX__CK(cudaStreamWaitEvent(ex->stream, ex->up_done[slot][t], 0));
    pxvm_view packed = *v;
    packed.item_stride = (int64_t)bytes;
    if (px__launch_bind(ex, &packed, buf, (uint32_t *)(ex->d_staging[slot] + bytes * (size_t)item0), slot, item0, err) < 0)
        return -1;
    PX__CK(cudaEventRecord(ex->up_free[slot][t], ex->stream));
    for (int i = 0; i < v->items; i++)
        ex->bound[(size_t)(item0 + i) * (size_t)n + (size_t)slot] = 1;
    ex->out_valid = 0;
    if (!ex->user_stream) /* the caller's memory is free once the copy is done (on its stream: there) */
        PX__CK(cudaEventSynchronize(ex->up_done[slot][t]));
    return 0;
}

/* A packed RGBA host frame of an input only DIFF/UPDATE read, with dirty rectangles given for the
 * item's next run: only the tiles they touch are read by anything, so only those cross the link
 * (one 2D copy per rectangle, widened to whole tiles, into the linear buffer where such an input's
 * level 0 lives). */
static int px__bind_rects(pxvm_executor *ex, int slot, int item, const pxvm_view *v, pxvm_error *err)
{
    size_t pitch = (size_t)v->w * 4u, bytes = pitch * (size_t)v->h;
    uint8_t *d_lin = ex->d_staging[slot] + bytes * (size_t)item;
    for (int i = 0; i < ex->h_nrects[item]; i++) {
        const pxvm_rect *r = &ex->h_rects[(size_t)item * PXVM_MAX_RECTS + (size_t)i];
        long long x0 = r->x < 0 ? 0 : r->x, y0 = r->y < 0 ? 0 : r->y;
        long long x1 = (long long)r->x + r->w, y1 = (long long)r->y + r->h;
        x1 = x1 > v->w ? v->w : x1, y1 = y1 > v->h ? v->h : y1;
        if (r->w <= 0 || r->h <= 0 || x0 >= x1 || y0 >= y1)
            continue;
        x0 = x0 / PX_TILE * PX_TILE, y0 = y0 / PX_TILE * PX_TILE; /* whole tiles: UPDATE copies tiles */
        x1 = (x1 + PX_TILE - 1) / PX_TILE * PX_TILE, y1 = (y1 + PX_TILE - 1) / PX_TILE * PX_TILE;
        x1 = x1 > v->w ? v->w : x1, y1 = y1 > v->h ? v->h : y1;
        size_t off = (size_t)y0 * pitch + (size_t)x0 * 4u;
        PX__CK(cudaMemcpy2DAsync(d_lin + off, pitch, (const uint8_t *)v->data + (size_t)y0 * (size_t)v->row_stride + (size_t)x0 * 4u,
                                 (size_t)v->row_stride, (size_t)(x1 - x0) * 4u, (size_t)(y1 - y0), cudaMemcpyHostToDevice,
                                 ex->stream));
    }
    ex->bound[(size_t)item * (size_t)ex->nslots + (size_t)slot] = 1;
    ex->out_valid = 0;
    return px__join_out(ex, err); /* pageable sources are staged; the caller may reuse them */
}

int px__gl_bind(pxvm_executor *ex, int slot, int item0, const pxvm_view *v, pxvm_error *err)
{
    if (px__need_program(ex, "bind", err) < 0)
        return -1;
    if (pxvm_check_bind(ex->prog, ex->batch, slot, item0, v, err) < 0)
        return -1;
    PX__CK(cudaSetDevice(ex->device));
    if (ex->frame_src[slot]) { /* a borrowed frame: the items this bind leaves out keep it, copied */
        if (item0 > 0 || v->items < ex->batch) {
            size_t bytes = (size_t)ex->prog->slots[slot].w * 4u * (size_t)ex->prog->slots[slot].h * (size_t)ex->batch;
            PX__CK(cudaMemcpyAsync(ex->d_staging[slot], ex->frame_src[slot], bytes, cudaMemcpyDeviceToDevice, ex->stream));
        }
        ex->frame_src[slot] = NULL;
    }
    /* primed: an unprimed DIFF marks every tile, so the whole frame must be there */
    if (v->device < 0 && v->items == 1 && ex->prog->frame_only[slot] && ex->h_nrects && ex->h_nrects[item0] >= 0 &&
        v->channels == 4 && v->px_stride == 4 && v->ch_stride == 1 && ex->h_primed && ex->h_primed[item0] &&
        ex->bound[(size_t)item0 * (size_t)ex->nslots + (size_t)slot])
        return px__bind_rects(ex, slot, item0, v, err);
    size_t pitch = (size_t)v->w * 4u, bytes = pitch * (size_t)v->h;
    uint8_t *d_lin = ex->d_staging[slot] + bytes * (size_t)item0;
    if (v->device >= 0) { /* on the device: converted straight into the slot and its linear copy */
        if (px__check_device_ptr(ex, v->data, "input", err) < 0)
            return -1;
        if (px__launch_bind(ex, v, (const uint8_t *)v->data, (uint32_t *)d_lin, slot, item0, err) < 0)
            return -1;
    } else {
        const void *src = v->data;
        cudaPointerAttributes attr;
        int pinned = cudaPointerGetAttributes(&attr, v->data) == cudaSuccess && attr.type == cudaMemoryTypeHost;
        cudaGetLastError();
        int contiguous = pxvm_view_is_packed_rgba(v) && (v->items == 1 || v->item_stride == (int64_t)bytes);
        if (!(pinned && contiguous)) { /* converted into our pinned staging buffer first */
            if (!ex->staging[slot])
                PX__CK(cudaHostAlloc(&ex->staging[slot], px__lin_bytes(ex, slot) * (size_t)ex->batch,
                                     cudaHostAllocWriteCombined));
            PX__CK(cudaStreamSynchronize(ex->stream)); /* the staging buffer may still feed an upload */
            for (int i = 0; i < v->items; i++)
                pxvm_view_to_rgba(v, i, ex->staging[slot] + bytes * (size_t)(item0 + i));
            src = ex->staging[slot] + bytes * (size_t)item0;
        }
        if (src == v->data) /* the caller's page-locked frame: pipelined on the copy stream */
            return px__bind_pipelined(ex, slot, item0, v, err);
        /* a linear H2D copy runs at the link's speed; the copy into the array then runs on the SMs */
        PX__CK(cudaMemcpyAsync(d_lin, src, bytes * (size_t)v->items, cudaMemcpyHostToDevice, ex->stream));
        pxvm_view packed = *v;
        packed.channels = 4, packed.px_stride = 4, packed.ch_stride = 1;
        packed.row_stride = (int64_t)pitch, packed.item_stride = (int64_t)bytes;
        if (!ex->prog->frame_only[slot] && px__launch_bind(ex, &packed, d_lin, NULL, slot, item0, err) < 0)
            return -1;
    }
    for (int i = 0; i < v->items; i++)
        ex->bound[(size_t)(item0 + i) * (size_t)ex->nslots + (size_t)slot] = 1;
    ex->out_valid = 0;
    return 0; /* with a caller's stream, its memory may be reused once the stream gets here */
}

/* pxvm_runner_borrow: a packed RGBA8 frame of every item, in this device's memory, for an input
 * that only DIFF and UPDATE read is read in place by the tile kernel (as it reads d_staging):
 * no copy. Anything else is bound (copied). */
int px__gl_borrow(pxvm_executor *ex, int slot, int item0, const pxvm_view *v, pxvm_error *err)
{
    if (px__need_program(ex, "borrow", err) < 0)
        return -1;
    /* a borrow the tile kernel cannot read in place is a bind, which checks the arguments (here
     * they are only compared, never used); one that it can is checked first */
    if (!v || slot < 0 || slot >= ex->nslots || !ex->prog->frame_only[slot] || v->device != ex->device || item0 != 0 ||
        v->items != ex->batch || !pxvm_view_is_packed_rgba(v) ||
        (v->items > 1 && v->item_stride != (int64_t)((size_t)v->w * 4u * (size_t)v->h)) || ((uintptr_t)v->data & 15u))
        return px__gl_bind(ex, slot, item0, v, err);
    if (pxvm_check_bind(ex->prog, ex->batch, slot, item0, v, err) < 0)
        return -1;
    PX__CK(cudaSetDevice(ex->device));
    if (px__check_device_ptr(ex, v->data, "input", err) < 0)
        return -1;
    ex->frame_src[slot] = (const uint8_t *)v->data;
    for (int i = 0; i < v->items; i++)
        ex->bound[(size_t)i * (size_t)ex->nslots + (size_t)slot] = 1;
    ex->out_valid = 0;
    return 0;
}

/* The end of a borrow: a frame read in place is forgotten (runs already enqueued keep the address
 * they were launched with), and the items are unbound, so no later bind copies from it. */
void px__gl_release(pxvm_executor *ex, int slot, int item0, int items)
{
    if (!ex->prog)
        return;
    ex->frame_src[slot] = NULL;
    for (int i = item0; i < item0 + items; i++)
        ex->bound[(size_t)i * (size_t)ex->nslots + (size_t)slot] = 0;
}
