/* ragged.cu - the CUDA-GL executor's ragged batches (vm/ragged.h; public pxvm_runner_ragged): a batch of
 * images of many sizes resized by the RESIZE rule and written as tiles, in two launches per part
 * of the batch, whatever the number of sizes. The CPU reference is vm/ragged.c
 * (px_ragged_image_host); both read the same tables (vm/resize.c, built on the host per image:
 * O(w + h)) and sum with isa/px_resize.h's rule, so the bytes agree.
 *
 *   part      images taken in order while their staged bytes, tables and pass-1 buffers fit the
 *             part's budget (a quarter of the runner's max_memory, at most 64 MiB, at least one
 *             image): one pinned block on the host [records | tables | token values | pixels of
 *             host images] filled by a few copy threads, one asynchronous copy into its device
 *             twin on the copy stream, two kernels on the executor's stream. Two parts are in
 *             flight: the host fills one block while the device uploads and computes the other.
 *   pass 1    one thread per texel of each image's cw x rows buffer: a source row resized
 *             horizontally (Pillow's order), the channels widened to RGBA as px_expand does.
 *   pass 2    one thread per texel of each image's canvas: the pad outside the content (fit),
 *             else the buffer's column resized vertically, or the source read directly when a
 *             pass is not needed; then the tile's texel, or the token values of its channels,
 *             written where the image's tiles start in dst.
 * A block finds its image by a binary search of the images' first blocks: one launch serves
 * every size. Host views are read through their strides while staged; device views are read in
 * place (CUDA memory of the executor's device). */
#include <stdlib.h>
#include <string.h>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <new>
#include <thread>
#include <vector>

#include "executor.cuh"

#include "../../isa/px_resize.h"
#include "../../vm/ragged.h"

struct px_tile_rec {
    const uint8_t *src;
    long long rs, ps, cs; /* row, pixel and channel strides of the source, in bytes */
    int C, sw, sh, w, h, cx, cy, cw, ch;
    unsigned pad;
    int hpass, vpass, nearest, row0, rows, ksx, ksy;
    const int *xf, *xc, *xk, *yf, *yc, *yk;
    uint32_t *tmp; /* cw x rows RGBA texels */
    long long tile0; /* the first token of the image's item */
    int frame;       /* its frame in those tokens */
    long long hb0, vb0; /* the first block of the image in pass 1 and pass 2 */
};

struct px_ragged_part { /* one block of a part, host and device twins; when its upload is done
                         * (on the copy stream) and when the kernels that read it are (on the stream) */
    uint8_t *h, *d;
    size_t cap_h, cap_d;
    cudaEvent_t copied, done;
    int have_event, used;
};

struct px__copy_pool;

#define PX_TILES_THREADS 256

__device__ static int px__find(const px_tile_rec *r, int n, long long b, int second)
{
    int lo = 0, hi = n - 1;
    while (lo < hi) { /* the last image whose first block is <= b */
        int mid = (lo + hi + 1) >> 1;
        long long first = second ? r[mid].vb0 : r[mid].hb0;
        if (first <= b)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

/* Source texel (x, y) as RGBA, widened as the host widens (grey v -> v, v, v, 255; RGB -> A 255). */
__device__ static inline uint32_t px__src(const px_tile_rec &r, int x, int y)
{
    const uint8_t *p = r.src + (long long)y * r.rs + (long long)x * r.ps;
    if (r.C == 1)
        return (uint32_t)p[0] * 0x010101u | 0xFF000000u;
    uint32_t v = (uint32_t)p[0] | (uint32_t)p[r.cs] << 8 | (uint32_t)p[2 * r.cs] << 16;
    return v | (r.C == 4 ? (uint32_t)p[3 * r.cs] << 24 : 0xFF000000u);
}

/* The four sums of a run of texels ending in px_resize_clamp; channels the source lacks are
 * widened afterwards (their own sums would give the same: a constant 255 resizes to 255, and a
 * grey channel resized is each of R, G and B resized). */
__device__ static inline uint32_t px__ends(uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, int C)
{
    uint32_t r = px_resize_clamp(a0);
    if (C == 1)
        return r * 0x010101u | 0xFF000000u;
    uint32_t v = r | px_resize_clamp(a1) << 8 | px_resize_clamp(a2) << 16;
    return v | (C == 4 ? px_resize_clamp(a3) << 24 : 0xFF000000u);
}

__global__ void px__k_tiles_h(const px_tile_rec *recs, int n)
{
    int i = px__find(recs, n, blockIdx.x, 0);
    const px_tile_rec &r = recs[i];
    long long p = (long long)(blockIdx.x - r.hb0) * PX_TILES_THREADS + threadIdx.x;
    if (p >= (long long)r.cw * r.rows)
        return;
    int x = (int)(p % r.cw), row = r.row0 + (int)(p / r.cw);
    int first = r.xf[x], count = r.xc[x];
    const int *k = r.xk + (size_t)x * (size_t)r.ksx;
    uint32_t a0 = PX_RESIZE_HALF, a1 = PX_RESIZE_HALF, a2 = PX_RESIZE_HALF, a3 = PX_RESIZE_HALF;
    const uint8_t *s = r.src + (long long)row * r.rs + (long long)first * r.ps;
    for (int j = 0; j < count; j++, s += r.ps) {
        uint32_t kj = (uint32_t)k[j];
        a0 = px_resize_mac(a0, s[0], kj);
        if (r.C > 1) {
            a1 = px_resize_mac(a1, s[r.cs], kj), a2 = px_resize_mac(a2, s[2 * r.cs], kj);
            if (r.C == 4)
                a3 = px_resize_mac(a3, s[3 * r.cs], kj);
        }
    }
    r.tmp[p] = px__ends(a0, a1, a2, a3, r.C);
}

struct px__tiles_out {
    uint8_t *dst;
    const uint32_t *table; /* [4][256], or NULL: RGBA8 tiles */
    int patch, channels, elem, nhwc;
    int merge, temporal; /* the job's tile order and frames per token (vm/ragged_index.h) */
    int bytewise; /* RGBA8 tiles into a dst not 4-aligned (the API lets it be any): byte stores */
    size_t tile_bytes;
};

__global__ void px__k_tiles_v(const px_tile_rec *recs, int n, px__tiles_out o)
{
    int i = px__find(recs, n, blockIdx.x, 1);
    const px_tile_rec &r = recs[i];
    long long p = (long long)(blockIdx.x - r.vb0) * PX_TILES_THREADS + threadIdx.x;
    if (p >= (long long)r.w * r.h)
        return;
    int x = (int)(p % r.w), y = (int)(p / r.w), ci = x - r.cx, cj = y - r.cy;
    uint32_t v = r.pad;
    if (ci >= 0 && ci < r.cw && cj >= 0 && cj < r.ch) {
        if (r.nearest) {
            int xi = r.xf[ci], yi = r.yf[cj];
            v = xi < 0 || yi < 0 ? (r.C == 4 ? 0u : 0xFF000000u) : px__src(r, xi, yi); /* Pillow's fill 0, widened */
        } else if (!r.hpass && !r.vpass) {
            v = px__src(r, ci, cj);
        } else if (!r.vpass) {
            v = r.tmp[(size_t)(cj - r.row0) * (size_t)r.cw + (size_t)ci];
        } else {
            const int *k = r.yk + (size_t)cj * (size_t)r.ksy;
            int first = r.yf[cj], count = r.yc[cj];
            uint32_t a0 = PX_RESIZE_HALF, a1 = PX_RESIZE_HALF, a2 = PX_RESIZE_HALF, a3 = PX_RESIZE_HALF;
            if (r.hpass) {
                const uint32_t *t = r.tmp + (size_t)(first - r.row0) * (size_t)r.cw + (size_t)ci;
                for (int j = 0; j < count; j++, t += r.cw) {
                    uint32_t q = *t, kj = (uint32_t)k[j];
                    a0 = px_resize_mac(a0, q & 255u, kj), a1 = px_resize_mac(a1, (q >> 8) & 255u, kj);
                    a2 = px_resize_mac(a2, (q >> 16) & 255u, kj), a3 = px_resize_mac(a3, q >> 24, kj);
                }
                v = px__ends(a0, a1, a2, a3, 4);
            } else {
                const uint8_t *s = r.src + (long long)first * r.rs + (long long)ci * r.ps;
                for (int j = 0; j < count; j++, s += r.rs) {
                    uint32_t kj = (uint32_t)k[j];
                    a0 = px_resize_mac(a0, s[0], kj);
                    if (r.C > 1) {
                        a1 = px_resize_mac(a1, s[r.cs], kj), a2 = px_resize_mac(a2, s[2 * r.cs], kj);
                        if (r.C == 4)
                            a3 = px_resize_mac(a3, s[3 * r.cs], kj);
                    }
                }
                v = px__ends(a0, a1, a2, a3, r.C);
            }
        }
    }
    int P = o.patch, gw = r.w / P, q = x % P, row = y % P;
    long long t = r.tile0 + (long long)px_ragged_token(x / P, y / P, gw, o.merge);
    uint8_t *out = o.dst + (size_t)t * o.tile_bytes;
    if (!o.table) {
        size_t at = px_ragged_value(0, r.frame, q, row, P, o.temporal, 4, 0); /* in bytes: 4 a texel */
        if (o.bytewise) {
            uint8_t *b = out + at;
            b[0] = (uint8_t)v, b[1] = (uint8_t)(v >> 8), b[2] = (uint8_t)(v >> 16), b[3] = (uint8_t)(v >> 24);
        } else {
            ((uint32_t *)out)[at / 4u] = v;
        }
        return;
    }
    for (int c = 0; c < o.channels; c++) {
        uint32_t value = __ldg(&o.table[c * 256 + ((v >> (8 * c)) & 255u)]);
        size_t at = px_ragged_value(c, r.frame, q, row, P, o.temporal, o.channels, !o.nhwc);
        if (o.elem == 4)
            ((uint32_t *)out)[at] = value;
        else
            ((uint16_t *)out)[at] = (uint16_t)value;
    }
}

/* ---- the host side ---------------------------------------------------------------------------- */

static size_t px__al(size_t n) { return (n + 255u) & ~(size_t)255u; }

/* One image's part of a block: its tables' ints, its staged pixels, its pass-1 buffer. */
typedef struct px__img_need {
    size_t ints, pixels, tmp;
} px__img_need;

static px__img_need px__need(const px_ragged_job *job, int i, const px_resize_op *op)
{
    const pxvm_view *v = &job->img[i].v;
    px__img_need k;
    k.ints = (size_t)op->cw * (2u + (size_t)op->tx.ksize) + (size_t)op->ch * (2u + (size_t)op->ty.ksize);
    k.pixels = v->device >= 0 ? 0u : px__al((size_t)v->w * (size_t)v->h * (size_t)v->channels);
    int nearest = op->filter == PX_RESIZE_NEAREST && !op->copy;
    k.tmp = nearest || !op->hpass ? 0u : px__al((size_t)op->cw * (size_t)op->rows * 4u);
    return k;
}

/* What image i holds on the device while its part runs (the part's budget counts these). */
static uint64_t px__image_bytes(const px_ragged_job *job, int i, const px_resize_op *op)
{
    px__img_need k = px__need(job, i, op);
    return k.ints * 4u + k.pixels + k.tmp + sizeof(px_tile_rec);
}

/* Host images are copied into the pinned block by a few threads of the executor's own (the
 * link is faster than one core's memcpy: 140 MB of photos take 15 ms on one core of an H200 host,
 * a third of that on four). Work comes as chunks of at most 1 MiB; the caller's thread takes
 * chunks too and returns when all are copied. */
struct px__chunk {
    uint8_t *dst;
    const uint8_t *src;
    size_t n;
};

struct px__copy_pool {
    std::vector<std::thread> th;
    std::mutex m;
    std::condition_variable wake, idle;
    std::vector<px__chunk> work;
    std::atomic<size_t> next{0};
    unsigned gen = 0;
    int active = 0;
    bool stop = false;

    void take()
    {
        for (size_t i; (i = next.fetch_add(1)) < work.size();)
            memcpy(work[i].dst, work[i].src, work[i].n);
    }
    void main_loop()
    {
        unsigned seen = 0;
        for (;;) {
            {
                std::unique_lock<std::mutex> lk(m);
                wake.wait(lk, [&] { return stop || gen != seen; });
                if (stop)
                    return;
                seen = gen;
            }
            take();
            std::lock_guard<std::mutex> lk(m);
            if (--active == 0)
                idle.notify_one();
        }
    }
    void run()
    {
        if (work.empty())
            return;
        if (th.empty() && work.size() > 1) {
            unsigned cores = std::thread::hardware_concurrency(), want = cores / 4 > 1 ? cores / 4 : 1;
            for (unsigned k = 0; k < (want > 6 ? 6u : want) && cores > 2; k++)
                th.emplace_back(&px__copy_pool::main_loop, this);
        }
        {
            std::lock_guard<std::mutex> lk(m);
            next = 0, active = (int)th.size(), gen++;
        }
        wake.notify_all();
        take();
        std::unique_lock<std::mutex> lk(m);
        idle.wait(lk, [&] { return active == 0; });
        work.clear();
    }
    ~px__copy_pool()
    {
        {
            std::lock_guard<std::mutex> lk(m);
            stop = true;
        }
        wake.notify_all();
        for (auto &t : th)
            t.join();
    }
};

struct px_gpu_ragged {
    px_ragged_part part[2];
    int turn;
    px__copy_pool copy;
    uint8_t *scratch; /* the scratch op's device memory */
    size_t scratch_cap;
};

static void px__copy_add(px__copy_pool *pool, uint8_t *dst, const uint8_t *src, size_t n)
{
    for (size_t at = 0; at < n; at += 1u << 20)
        pool->work.push_back({dst + at, src + at, n - at < (1u << 20) ? n - at : (size_t)1u << 20});
}

/* A host view's pixels packed as interleaved rows into dst (w * h * C bytes). */
static void px__stage_view(px__copy_pool *pool, const pxvm_view *v, uint8_t *dst)
{
    size_t row = (size_t)v->w * (size_t)v->channels;
    if (v->ch_stride == 1 && v->px_stride == v->channels && v->row_stride == (int64_t)row) {
        px__copy_add(pool, dst, (const uint8_t *)v->data, row * (size_t)v->h);
        return;
    }
    for (int y = 0; y < v->h; y++)
        for (int x = 0; x < v->w; x++)
            for (int c = 0; c < v->channels; c++)
                dst[(size_t)y * row + (size_t)x * (size_t)v->channels + (size_t)c] =
                    ((const uint8_t *)v->data)[(int64_t)y * v->row_stride + (int64_t)x * v->px_stride +
                                               (int64_t)c * v->ch_stride];
}

static int px__part_room(px_ragged_part *pt, size_t h, size_t d, pxvm_error *err)
{
    if (pt->have_event)
        PX__CK(cudaEventSynchronize(pt->copied)); /* the block's last copy has left it */
    if (h > pt->cap_h) {
        if (pt->h)
            cudaFreeHost(pt->h);
        pt->h = NULL, pt->cap_h = 0;
        PX__CK(cudaHostAlloc((void **)&pt->h, h, cudaHostAllocDefault));
        pt->cap_h = h;
    }
    if (d > pt->cap_d) {
        if (pt->d) {
            PX__CK(cudaEventSynchronize(pt->done)); /* the kernels that read it are done */
            cudaFree(pt->d);
        }
        pt->d = NULL, pt->cap_d = 0;
        PX__CK(cudaMalloc((void **)&pt->d, d));
        pt->cap_d = d;
    }
    if (!pt->have_event) {
        PX__CK(cudaEventCreateWithFlags(&pt->copied, cudaEventDisableTiming));
        PX__CK(cudaEventCreateWithFlags(&pt->done, cudaEventDisableTiming));
        pt->have_event = 1;
    }
    return 0;
}

void px__ragged_free(pxvm_executor *ex)
{
    px_gpu_ragged *g = ex->ragged;
    if (!g)
        return;
    for (int k = 0; k < 2; k++) {
        px_ragged_part *pt = &g->part[k];
        if (pt->have_event)
            cudaEventSynchronize(pt->done), cudaEventDestroy(pt->copied), cudaEventDestroy(pt->done);
        cudaFreeHost(pt->h), cudaFree(pt->d);
    }
    cudaFree(g->scratch);
    delete g;
    ex->ragged = NULL;
}

/* Images [a, b) as one part: the block filled, copied, the two kernels launched. */
static int px__part_run(pxvm_executor *ex, const px_ragged_job *job, int a, int b, const px_resize_op *ops,
                        uint8_t *d_out, pxvm_error *err)
{
    px_gpu_ragged *g = ex->ragged;
    px_ragged_part *pt = &g->part[g->turn];
    g->turn ^= 1;
    int n = b - a;
    size_t recs = px__al(sizeof(px_tile_rec) * (size_t)n), ints = 0, pixels = 0, tmp = 0;
    size_t vals = job->table ? px__al(sizeof(uint32_t) * 4u * 256u) : 0u;
    for (int i = a; i < b; i++) {
        px__img_need k = px__need(job, i, &ops[i - a]);
        ints += k.ints, pixels += k.pixels, tmp += k.tmp;
    }
    size_t ints_bytes = px__al(ints * sizeof(int32_t));
    size_t h_bytes = recs + ints_bytes + vals + pixels;
    if (px__part_room(pt, h_bytes, h_bytes + tmp, err) < 0)
        return -1;
    px_tile_rec *rec = (px_tile_rec *)(void *)pt->h;
    int32_t *hi = (int32_t *)(void *)(pt->h + recs), *di = (int32_t *)(void *)(pt->d + recs);
    uint8_t *hp = pt->h + recs + ints_bytes + vals, *dp = pt->d + recs + ints_bytes + vals;
    uint8_t *dt = pt->d + h_bytes;
    if (job->table)
        memcpy(pt->h + recs + ints_bytes, job->table->value, sizeof(uint32_t) * 4u * 256u);
    long long hb = 0, vb = 0;
    size_t io = 0, po = 0, to = 0;
    for (int i = a; i < b; i++) {
        const px_resize_op *op = &ops[i - a];
        const px_ragged_image *im = &job->img[i];
        const pxvm_view *v = &im->v;
        px_tile_rec *r = &rec[i - a];
        memset(r, 0, sizeof *r);
        r->C = v->channels, r->sw = v->w, r->sh = v->h, r->w = im->w, r->h = im->h;
        r->cx = op->cx, r->cy = op->cy, r->cw = op->cw, r->ch = op->ch, r->pad = op->pad;
        r->nearest = op->filter == PX_RESIZE_NEAREST && !op->copy;
        r->hpass = op->hpass && !r->nearest, r->vpass = op->vpass && !r->nearest;
        r->row0 = op->row0, r->rows = r->hpass ? op->rows : 0;
        r->ksx = op->tx.ksize, r->ksy = op->ty.ksize;
        r->tile0 = im->tile0, r->frame = im->frame;
        if (v->device >= 0) {
            r->src = (const uint8_t *)v->data, r->rs = v->row_stride, r->ps = v->px_stride, r->cs = v->ch_stride;
        } else {
            px__stage_view(&g->copy, v, hp + po);
            r->src = dp + po, r->ps = v->channels, r->cs = 1, r->rs = (long long)v->w * v->channels;
            po += px__al((size_t)v->w * (size_t)v->h * (size_t)v->channels);
        }
        r->src += (long long)op->src_y * r->rs + (long long)op->src_x * r->ps; /* a crop's window, not resized */
        r->sw = op->sw, r->sh = op->sh;
        const int32_t *parts[6] = {op->tx.first, op->tx.count, op->tx.k, op->ty.first, op->ty.count, op->ty.k};
        size_t lens[6] = {(size_t)op->cw, (size_t)op->cw, (size_t)op->cw * (size_t)op->tx.ksize, (size_t)op->ch,
                          (size_t)op->ch, (size_t)op->ch * (size_t)op->ty.ksize};
        const int **dev[6] = {&r->xf, &r->xc, &r->xk, &r->yf, &r->yc, &r->yk};
        for (int k = 0; k < 6; k++) {
            if (lens[k])
                memcpy(hi + io, parts[k], lens[k] * sizeof(int32_t));
            *dev[k] = di + io;
            io += lens[k];
        }
        if (r->rows) {
            r->tmp = (uint32_t *)(void *)(dt + to);
            to += px__al((size_t)op->cw * (size_t)op->rows * 4u);
        }
        r->hb0 = hb, r->vb0 = vb;
        hb += ((long long)r->cw * r->rows + PX_TILES_THREADS - 1) / PX_TILES_THREADS;
        vb += ((long long)r->w * r->h + PX_TILES_THREADS - 1) / PX_TILES_THREADS;
    }
    g->copy.run();
    /* the upload on the copy stream, after the kernels that last read this block: it overlaps the
     * kernels of the other part */
    if (!ex->copy_stream)
        PX__CK(cudaStreamCreateWithFlags(&ex->copy_stream, cudaStreamNonBlocking));
    if (pt->used)
        PX__CK(cudaStreamWaitEvent(ex->copy_stream, pt->done, 0));
    PX__CK(cudaMemcpyAsync(pt->d, pt->h, h_bytes, cudaMemcpyHostToDevice, ex->copy_stream));
    PX__CK(cudaEventRecord(pt->copied, ex->copy_stream));
    PX__CK(cudaStreamWaitEvent(ex->stream, pt->copied, 0));
    pt->used = 1;
    if (hb > 0) {
        px__k_tiles_h<<<(unsigned)hb, PX_TILES_THREADS, 0, ex->stream>>>((const px_tile_rec *)(void *)pt->d, n);
        PX__CK(cudaGetLastError());
    }
    px__tiles_out o;
    o.dst = d_out, o.table = job->table ? (const uint32_t *)(void *)(pt->d + recs + ints_bytes) : NULL;
    o.patch = job->patch, o.channels = job->table ? job->table->channels : 4, o.elem = job->table ? job->table->elem : 1;
    o.nhwc = job->table && job->table->layout == PXVM_TOKENS_NHWC, o.tile_bytes = job->tile_bytes;
    o.merge = job->merge, o.temporal = job->temporal;
    o.bytewise = (uintptr_t)d_out % 4u != 0; /* tokens: dst aligned to their dtype (px_ragged_prepare) */
    px__k_tiles_v<<<(unsigned)vb, PX_TILES_THREADS, 0, ex->stream>>>((const px_tile_rec *)(void *)pt->d, n, o);
    PX__CK(cudaGetLastError());
    PX__CK(cudaEventRecord(pt->done, ex->stream));
    return 0;
}

static int px__state(pxvm_executor *ex, pxvm_error *err)
{
    if (!ex->ragged && !(ex->ragged = new (std::nothrow) px_gpu_ragged()))
        return pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)sizeof *ex->ragged);
    return 0;
}

int px__gl_scratch(pxvm_executor *ex, size_t bytes, void **ptr, int *device, pxvm_error *err)
{
    PX__CK(cudaSetDevice(ex->device));
    if (px__state(ex, err) < 0)
        return -1;
    px_gpu_ragged *g = ex->ragged;
    if (bytes > g->scratch_cap) {
        uint8_t *p = NULL;
        PX__CK(cudaMallocAsync((void **)&p, bytes, ex->stream));
        if (g->scratch)
            PX__CK(cudaFreeAsync(g->scratch, ex->stream)); /* after the work queued that reads it */
        g->scratch = p, g->scratch_cap = bytes;
    }
    *ptr = g->scratch, *device = ex->device;
    return 0;
}

int px__gl_ragged(pxvm_executor *ex, const px_ragged_job *job, pxvm_error *err)
{
    PX__CK(cudaSetDevice(ex->device));
    if (job->dst_device >= 0) {
        if (px__check_device_ptr(ex, job->dst, "tiles", err) < 0)
            return -1;
    }
    for (int i = 0; i < job->n; i++) {
        char what[24];
        snprintf(what, sizeof what, "image %d", i);
        if (job->img[i].v.device >= 0 && px__check_device_ptr(ex, job->img[i].v.data, what, err) < 0) {
            *job->failed = i;
            return -1;
        }
    }
    if (px__state(ex, err) < 0)
        return -1;
    /* parts of 64 MiB: on an H200 host 35 photos (140 MB) took 7.2 ms in parts of 64 MiB, 7.8 of
     * 32, 10.6 of 256 (one part: nothing overlaps) and 10.4 of 4 (per-part costs) */
    uint64_t budget = job->max_memory / 4u, cap = 64ull << 20;
    if (budget > cap)
        budget = cap;
    /* every image's bytes checked before any part runs: a refusal writes nothing to dst (the
     * tables are built again below, one part at a time, to hold only a part's) */
    for (int i = 0; i < job->n; i++) {
        /* first an O(1) bound (px_resize_need, plus pass 1's rows where it counts a copy of columns
         * that this executor still runs): the tables are built only for an image near the limit */
        const px_ragged_image *im = &job->img[i];
        int cw, ch, rows;
        uint64_t need = px_resize_need(im->v.w, im->v.h, im->w, im->h, job->fit, job->policy.filter, &cw, &ch, &rows);
        need += (rows ? 0u : 4u * (uint64_t)cw * (uint64_t)im->v.h) + sizeof(px_tile_rec) + 256u /* pass 1's alignment */ +
                        (im->v.device >= 0 ? 0u : px__al((size_t)im->v.w * (size_t)im->v.h * (size_t)im->v.channels));
        if (need > job->max_memory || job->policy.kind == PX_POLICY_CROP) { /* crop: the O(1) bound is fit's */
            px_resize_op op;
            if (px_ragged_op(job, i, &op, err) < 0)
                return -1;
            need = px__image_bytes(job, i, &op);
            px_resize_op_free(&op);
        }
        if (need > job->max_memory) {
            *job->failed = i;
            return pxvm_fail(err, PXE_TILES_DEVICE_MEMORY, -1, -1, i, job->img[i].v.w, job->img[i].v.h, job->img[i].w,
                             job->img[i].h, (unsigned long long)need, (unsigned long long)job->max_memory);
        }
    }
    px_resize_op *ops = (px_resize_op *)calloc((size_t)job->n, sizeof *ops);
    if (!ops)
        return pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)job->n * sizeof *ops);
    /* a host dst: the tiles on the device, then one copy back */
    uint8_t *d_out = (uint8_t *)job->dst;
    size_t out_bytes = (size_t)job->tiles * job->tile_bytes;
    int rc = 0;
    if (job->dst_device < 0) {
        cudaError_t e = cudaMallocAsync((void **)&d_out, out_bytes ? out_bytes : 1u, ex->stream);
        if (e != cudaSuccess)
            rc = px__cuda_fail(err, "allocating the tiles", e, __FILE__, __LINE__);
    }
    int a = 0;
    uint64_t held = 0;
    for (int i = 0; i < job->n && !rc; i++) {
        if (px_ragged_op(job, i, &ops[i], err) < 0) {
            rc = -1;
            break;
        }
        uint64_t need = px__image_bytes(job, i, &ops[i]);
        if (i > a && held + need > budget) { /* images a .. i-1 go as a part */
            rc = px__part_run(ex, job, a, i, ops + a, d_out, err);
            for (int j = a; j < i; j++)
                px_resize_op_free(&ops[j]);
            a = i, held = 0;
        }
        held += need;
    }
    if (!rc && a < job->n)
        rc = px__part_run(ex, job, a, job->n, ops + a, d_out, err);
    for (int j = 0; j < job->n; j++)
        px_resize_op_free(&ops[j]);
    free(ops);
    if (job->dst_device < 0 && d_out) {
        cudaError_t e = rc ? cudaSuccess : cudaMemcpyAsync(job->dst, d_out, out_bytes, cudaMemcpyDeviceToHost, ex->stream);
        cudaError_t f = cudaFreeAsync(d_out, ex->stream);
        if (e == cudaSuccess)
            e = f;
        if (e == cudaSuccess)
            e = cudaStreamSynchronize(ex->stream);
        if (!rc && e != cudaSuccess)
            rc = px__cuda_fail(err, "reading tiles to the host", e, __FILE__, __LINE__);
        return rc;
    }
    if (rc)
        return rc;
    return px__join_out(ex, err);
}
