/* video.cu - DIFF, UPDATE and incremental PYRAMID on the CUDA-GL executor; the CPU reference is
 * executors/cpu/video.c. Both compute isa/px_sem.h's px_maxdiff, px_mask_pixel, px_texel_tiles
 * and px_box4. The incremental-sampling decision lives in the fetch kernel (cuda_gl_executor.cu). */
#include "gpu_slot.cuh"

static __device__ inline uint32_t px__sread(cudaSurfaceObject_t s, int x, int y) { return surf2Dread<uint32_t>(s, x * 4, y); }

/* One block per tile (blockIdx.x, .y), blockIdx.z the item: a thread per texel. */
__global__ void px__k_diff(const px_gpu_slot *all_slots, int nslots, int frame, int cur, int mask, uint32_t threshold,
                           const uint8_t *primed, const px_gpu_dirty *dirty)
{
    const px_gpu_slot *slots = all_slots + (size_t)blockIdx.z * (size_t)nslots;
    const px_gpu_slot *f = &slots[frame], *c = &slots[cur];
    const px_gpu_dirty *d = &dirty[blockIdx.z];
    int tx = blockIdx.x, ty = blockIdx.y, x = tx * PX_TILE + (int)threadIdx.x % PX_TILE, y = ty * PX_TILE + (int)threadIdx.x / PX_TILE;
    int on = 0;
    if (!primed[blockIdx.z]) {
        on = 1;
    } else if (d->n >= 0) {
        on = threadIdx.x == 0 && px_gpu_rects_touch_tile(d->r, d->n, tx, ty);
    } else if (x < f->w[0] && y < f->h[0]) {
        on = px_maxdiff(px__texel(f->tex[0], x, y), px__texel(c->tex[0], x, y)) > threshold;
    }
    int dirty_tile = __syncthreads_or(on);
    if (threadIdx.x == 0)
        px__store(slots[mask].surf[0], tx, ty, px_mask_pixel(dirty_tile));
}

/* A thread per texel of cur level 0. */
__global__ void px__k_update(const px_gpu_slot *all_slots, int nslots, int frame, int cur, int mask)
{
    const px_gpu_slot *slots = all_slots + (size_t)blockIdx.z * (size_t)nslots;
    const px_gpu_slot *c = &slots[cur];
    int p = blockIdx.x * blockDim.x + threadIdx.x, w = c->w[0];
    if (p >= w * c->h[0])
        return;
    int x = p % w, y = p / w;
    if (px_mask_dirty(px__texel(slots[mask].tex[0], x >> PX_TILE_SHIFT, y >> PX_TILE_SHIFT)))
        px__store(c->surf[0], x, y, px__texel(slots[frame].tex[0], x, y));
}

/* Levels 1 .. min(4, levels-1) of tile (tx, ty) of slot s, by a 256-thread block whose thread
 * i holds the tile's level-0 texel (i % 16, i / 16) in `level0` (0 outside the slot): a level-l
 * texel (l <= 4) lies in one tile, so the tile's texels of every such level depend only on its
 * own level-0 texels; the block rebuilds them all in shared memory, exactly the texels the rule
 * rebuilds. */
static __device__ void px__tile_levels(const px_gpu_slot *s, int tx, int ty, uint32_t level0)
{
    __shared__ uint32_t t[2][PX_TILE * PX_TILE];
    int lx = (int)threadIdx.x % PX_TILE, ly = (int)threadIdx.x / PX_TILE;
    t[0][threadIdx.x] = level0;
    __syncthreads();
    int top = s->levels - 1 < 4 ? s->levels - 1 : 4;
    for (int l = 1; l <= top; l++) {
        int side = PX_TILE >> l, prev = PX_TILE >> (l - 1), ox = (tx * PX_TILE) >> l, oy = (ty * PX_TILE) >> l;
        int pox = (tx * PX_TILE) >> (l - 1), poy = (ty * PX_TILE) >> (l - 1);
        const uint32_t *src = t[(l - 1) & 1];
        uint32_t *dst = t[l & 1];
        if (lx < side && ly < side) {
            int gx = ox + lx, gy = oy + ly;
            if (gx < s->w[l] && gy < s->h[l]) {
                int sw = s->w[l - 1], sh = s->h[l - 1];
                int a = px_pyr_src0(gx) - pox, b = px_pyr_src1(gx, sw) - pox;
                int c = px_pyr_src0(gy) - poy, d = px_pyr_src1(gy, sh) - poy;
                uint32_t v = px_box4(src[c * prev + a], src[c * prev + b], src[d * prev + a], src[d * prev + b]);
                dst[ly * side + lx] = v;
                px__store(s->surf[l], gx, gy, v);
            }
        }
        __syncthreads();
    }
}

/* Incremental PYRAMID, levels 1-4: one block per tile, dirty tiles only. */
__global__ void px__k_pyr_tiles(const px_gpu_slot *all_slots, int nslots, int slot, int mask)
{
    const px_gpu_slot *slots = all_slots + (size_t)blockIdx.z * (size_t)nslots;
    const px_gpu_slot *s = &slots[slot];
    int tx = blockIdx.x, ty = blockIdx.y;
    if (!px_mask_dirty(px__texel(slots[mask].tex[0], tx, ty)))
        return;
    int x = tx * PX_TILE + (int)threadIdx.x % PX_TILE, y = ty * PX_TILE + (int)threadIdx.x / PX_TILE;
    px__tile_levels(s, tx, ty, x < s->w[0] && y < s->h[0] ? px__sread(s->surf[0], x, y) : 0u);
}

/* The dirty tiles of a mask as row bitmaps, th rows of px_gpu_words(tw) uint32 per item (zeroed
 * before): a thread per tile sets its bit, so "is a dirty tile in this box" reads a few words per
 * row (px_gpu_row_dirty). */
__global__ void px__k_mask_bits(const px_gpu_slot *all_slots, int nslots, int mask, uint32_t *bits_all)
{
    const px_gpu_slot *m = &all_slots[(size_t)blockIdx.z * (size_t)nslots + (size_t)mask];
    int tw = m->w[0], th = m->h[0], p = blockIdx.x * blockDim.x + threadIdx.x, wpr = px_gpu_words(tw);
    if (p >= tw * th)
        return;
    int x = p % tw, y = p / tw;
    if (px_mask_dirty(px__texel(m->tex[0], x, y)))
        atomicOr(bits_all + (size_t)blockIdx.z * (size_t)th * (size_t)wpr + (size_t)y * (size_t)wpr + (size_t)(x >> 5),
                 1u << (x & 31));
}

cudaError_t px_gpu_mask_bits(const px_gpu_slot *d_slots, int nslots, int mask, int tw, int th, uint32_t *bits, int items,
                             cudaStream_t stream)
{
    cudaError_t e = cudaMemsetAsync(bits, 0, sizeof(uint32_t) * (size_t)px_gpu_words(tw) * (size_t)th * (size_t)items, stream);
    if (e != cudaSuccess)
        return e;
    px__k_mask_bits<<<dim3((unsigned)((tw * th + 255) / 256), 1, (unsigned)items), 256, 0, stream>>>(d_slots, nslots, mask, bits);
    return cudaGetLastError();
}

/* Levels 5 .. of the slot for one item (blockIdx.x): each level after the one below, each texel
 * rebuilt when a dirty tile lies under its footprint. Whether one does is a dirty map per level,
 * built by OR-ing 2x2 cells of the level below (level 4's map is the tiles: a level-l texel's
 * footprint is 2^(l-4) x 2^(l-4) tiles, clipped), in `scratch` (px_gpu_dirty_scratch bytes). */
__global__ void __launch_bounds__(1024) px__k_pyr_upper(const px_gpu_slot *all_slots, int nslots, int slot, int mask,
                                                        const uint32_t *bits_all, uint8_t *scratch_all, size_t scratch_item)
{
    const px_gpu_slot *slots = all_slots + (size_t)blockIdx.x * (size_t)nslots;
    const px_gpu_slot *s = &slots[slot];
    int tw = slots[mask].w[0], th = slots[mask].h[0], wpr = px_gpu_words(tw);
    const uint32_t *bits = bits_all + (size_t)blockIdx.x * (size_t)th * (size_t)wpr;
    uint8_t *map = scratch_all + (size_t)blockIdx.x * scratch_item, *prev = NULL;
    int pw = tw, ph = th;
    for (int l = PX_TILE_SHIFT + 1; l < s->levels; l++) {
        int gw = (pw + 1) >> 1, gh = (ph + 1) >> 1; /* this level's map: ceil of the one below */
        for (int p = threadIdx.x; p < gw * gh; p += blockDim.x) {
            int x = p % gw, y = p / gw, any = 0;
            for (int dy = 0; dy < 2; dy++)
                for (int dx = 0; dx < 2; dx++) {
                    int cx = 2 * x + dx, cy = 2 * y + dy;
                    if (cx < pw && cy < ph)
                        any |= prev ? prev[cy * pw + cx] : (int)((bits[(size_t)cy * wpr + (cx >> 5)] >> (cx & 31)) & 1u);
                }
            map[p] = (uint8_t)any;
        }
        __syncthreads();
        int w = s->w[l], sw = s->w[l - 1], sh = s->h[l - 1];
        for (int p = threadIdx.x; p < w * s->h[l]; p += blockDim.x) {
            int x = p % w, y = p / w;
            if (!map[y * gw + x])
                continue;
            int a = px_pyr_src0(x), bb = px_pyr_src1(x, sw), c = px_pyr_src0(y), d = px_pyr_src1(y, sh);
            px__store(s->surf[l], x, y,
                      px_box4(px__sread(s->surf[l - 1], a, c), px__sread(s->surf[l - 1], bb, c),
                              px__sread(s->surf[l - 1], a, d), px__sread(s->surf[l - 1], bb, d)));
        }
        __threadfence_block();
        __syncthreads();
        prev = map, map += gw * gh, pw = gw, ph = gh;
    }
}

size_t px_gpu_dirty_scratch(int tw, int th)
{
    size_t n = 0;
    for (int w = tw, h = th; w > 1 || h > 1;) {
        w = (w + 1) >> 1, h = (h + 1) >> 1;
        n += (size_t)w * (size_t)h;
    }
    return n + 16;
}

/* DIFF + UPDATE + PYRAMID (levels 1-4) of one tile, fused (the launch plan's choice when the
 * three follow each other on the same slots, outside profiling): the same rules, one block per
 * tile, the tile's texels read once; the mask's row bitmaps are set on the way (zeroed before). */
__global__ void px__k_frame_tiles(const px_gpu_slot *all_slots, int nslots, int frame, int cur, int mask,
                                  uint32_t threshold, const uint8_t *primed, const px_gpu_dirty *dirty, uint32_t *bits_all,
                                  int pyramid)
{
    const px_gpu_slot *slots = all_slots + (size_t)blockIdx.z * (size_t)nslots;
    const px_gpu_slot *f = &slots[frame], *c = &slots[cur];
    const px_gpu_dirty *d = &dirty[blockIdx.z];
    int tx = blockIdx.x, ty = blockIdx.y, lx = (int)threadIdx.x % PX_TILE, ly = (int)threadIdx.x / PX_TILE;
    int x = tx * PX_TILE + lx, y = ty * PX_TILE + ly, in = x < c->w[0] && y < c->h[0];
    uint32_t fv = in ? px__sread(f->surf[0], x, y) : 0u;
    int on;
    if (!primed[blockIdx.z])
        on = 1;
    else if (d->n >= 0)
        on = threadIdx.x == 0 && px_gpu_rects_touch_tile(d->r, d->n, tx, ty);
    else
        on = in && px_maxdiff(fv, px__sread(c->surf[0], x, y)) > threshold;
    int dirty_tile = __syncthreads_or(on);
    if (threadIdx.x == 0) {
        px__store(slots[mask].surf[0], tx, ty, px_mask_pixel(dirty_tile));
        if (dirty_tile && bits_all)
            atomicOr(bits_all + (size_t)blockIdx.z * (size_t)gridDim.y * (size_t)px_gpu_words(gridDim.x) +
                         (size_t)ty * (size_t)px_gpu_words(gridDim.x) + (size_t)(tx >> 5),
                     1u << (tx & 31));
    }
    if (!dirty_tile)
        return;
    if (in)
        px__store(c->surf[0], x, y, fv);
    if (pyramid)
        px__tile_levels(c, tx, ty, fv);
}

cudaError_t px_gpu_frame_tiles(const px_gpu_slot *d_slots, int nslots, const pxvm_program *prog, const pxi_insn *diff,
                               const pxi_insn *pyramid, int items, const uint8_t *primed, const px_gpu_dirty *dirty,
                               uint32_t *bits, uint8_t *scratch, cudaStream_t stream)
{
    int mask = PX_ARG(diff, DIFF, mask), cur = PX_ARG(diff, DIFF, cur);
    const pxvm_slot *m = &prog->slots[mask], *c = &prog->slots[cur];
    cudaError_t e = bits ? cudaMemsetAsync(bits, 0, sizeof(uint32_t) * (size_t)px_gpu_words(m->w) * (size_t)m->h * (size_t)items,
                                           stream)
                         : cudaSuccess;
    if (e != cudaSuccess)
        return e;
    px__k_frame_tiles<<<dim3((unsigned)m->w, (unsigned)m->h, (unsigned)items), PX_TILE * PX_TILE, 0, stream>>>(
        d_slots, nslots, PX_ARG(diff, DIFF, frame), cur, mask, (uint32_t)PX_ARG(diff, DIFF, threshold), primed, dirty, bits,
        pyramid != NULL);
    e = cudaGetLastError();
    if (e == cudaSuccess && pyramid && c->levels > PX_TILE_SHIFT + 1) {
        px__k_pyr_upper<<<(unsigned)items, 1024, 0, stream>>>(d_slots, nslots, cur, mask, bits, scratch,
                                                              px_gpu_dirty_scratch(m->w, m->h));
        e = cudaGetLastError();
    }
    return e;
}

cudaError_t px_gpu_diff(const px_gpu_slot *d_slots, int nslots, const pxvm_program *prog, const pxi_insn *in, int items,
                        const uint8_t *primed, const px_gpu_dirty *dirty, cudaStream_t stream)
{
    const pxvm_slot *m = &prog->slots[PX_ARG(in, DIFF, mask)];
    px__k_diff<<<dim3((unsigned)m->w, (unsigned)m->h, (unsigned)items), PX_TILE * PX_TILE, 0, stream>>>(
        d_slots, nslots, PX_ARG(in, DIFF, frame), PX_ARG(in, DIFF, cur), PX_ARG(in, DIFF, mask),
        (uint32_t)PX_ARG(in, DIFF, threshold), primed, dirty);
    return cudaGetLastError();
}

cudaError_t px_gpu_update(const px_gpu_slot *d_slots, int nslots, const pxvm_program *prog, const pxi_insn *in, int items,
                          cudaStream_t stream)
{
    const pxvm_slot *c = &prog->slots[PX_ARG(in, UPDATE, cur)];
    unsigned blocks = (unsigned)(((long long)c->w * c->h + 255) / 256);
    px__k_update<<<dim3(blocks, 1, (unsigned)items), 256, 0, stream>>>(d_slots, nslots, PX_ARG(in, UPDATE, frame),
                                                                       PX_ARG(in, UPDATE, cur), PX_ARG(in, UPDATE, mask));
    return cudaGetLastError();
}

cudaError_t px_gpu_pyramid_incremental(const px_gpu_slot *d_slots, int nslots, const pxvm_program *prog,
                                       const pxi_insn *in, int items, uint32_t *bits, uint8_t *scratch, cudaStream_t stream)
{
    int slot = PX_ARG(in, PYRAMID, slot), mask = PX_ARG(in, PYRAMID, mask);
    const pxvm_slot *s = &prog->slots[slot], *m = &prog->slots[mask];
    if (s->levels < 2)
        return cudaSuccess;
    px__k_pyr_tiles<<<dim3((unsigned)m->w, (unsigned)m->h, (unsigned)items), PX_TILE * PX_TILE, 0, stream>>>(d_slots, nslots,
                                                                                                            slot, mask);
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess && s->levels > PX_TILE_SHIFT + 1) {
        e = px_gpu_mask_bits(d_slots, nslots, mask, m->w, m->h, bits, items, stream);
        if (e == cudaSuccess) {
            px__k_pyr_upper<<<(unsigned)items, 1024, 0, stream>>>(d_slots, nslots, slot, mask, bits, scratch,
                                                                  px_gpu_dirty_scratch(m->w, m->h));
            e = cudaGetLastError();
        }
    }
    return e;
}
