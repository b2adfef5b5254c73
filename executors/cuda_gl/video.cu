/* video.cu - DIFF, UPDATE and incremental PYRAMID on the CUDA-GL executor; the CPU reference is
 * executors/cpu/video.c. Both compute isa/px_sem.h's px_maxdiff, px_mask_pixel, px_texel_tiles
 * and px_box4. The incremental-sampling decision lives in the fetch kernel (fetch.cu).
 *
 * One kernel does the three, alone or fused when they follow each other on the same slots (the
 * launch plan's choice): a block per 16x16 tile decides whether the tile is dirty (DIFF) or reads
 * the mask, copies it (UPDATE) and rebuilds its pyramid levels 1-4. A second launch, started while
 * the first ends (programmatic dependent launch), gives each group of 16x16 tiles a block that
 * rebuilds the group's levels 5-8; the last group of an item builds the levels above. So a whole
 * incremental frame's pyramid is two launches, with no per-level launches and no host decisions. */
#include "gpu_slot.cuh"

static __device__ inline uint32_t px__sread(cudaSurfaceObject_t s, int x, int y) { return surf2Dread<uint32_t>(s, x * 4, y); }
/* A texel through L2 only (suld .cg): the group kernel reads texels that other blocks, or the
 * tile kernel it overlaps (programmatic launch), write, and must leave no line of them in its SM's
 * L1, where a block of the fetch kernel, started early beside it, could find it stale. */
static __device__ inline uint32_t px__sread_l2(cudaSurfaceObject_t s, int x, int y)
{
    uint32_t v;
    asm volatile("suld.b.2d.cg.b32.trap {%0}, [%1, {%2, %3}];" : "=r"(v) : "l"(s), "r"(x * 4), "r"(y) : "memory");
    return v;
}

/* A group is PX_GROUP x PX_GROUP tiles: its level-4 texels are one 16x16 region, so its levels
 * 5-8 depend on nothing outside it (as a tile's levels 1-4 on the tile). */
#define PX_GROUP 16
#define PX_GROUP_LEVEL (PX_TILE_SHIFT + 4) /* the top level a group builds */

static __host__ __device__ inline int px__groups(int n) { return (n + PX_GROUP - 1) / PX_GROUP; }

/* Is a dirty tile in box b (inside the group whose first tile is (gx0, gy0)), from the group's
 * rows of tile bits (bit i: tile gx0 + i)? */
static __device__ inline int px__group_box_dirty(const uint32_t *gbits, int gx0, int gy0, px_tilebox b)
{
    uint32_t cols = ((1u << (b.x1 - b.x0 + 1)) - 1u) << (b.x0 - gx0);
    for (int r = b.y0; r <= b.y1; r++)
        if (gbits[r - gy0] & cols)
            return 1;
    return 0;
}

/* Levels L+1 .. top (top <= L+4) of the 16x16 region of level L at (ox, oy) (multiples of 16),
 * whose level-L texels are in `base` (0 outside the level). A level L+m texel of the region
 * depends only on the region's level-L texels (px_pyr_src1 clamps inside [2x, 2x+1]), so the
 * block builds them in shared memory, in `lv` (the region's texels of levels L+1.., 64 + 16 + 4
 * + 1, at px__region_at). With `gbits` (a group: L = 4, (ox, oy) its first tile), only the texels
 * with a dirty tile under their footprint (px_texel_tiles) are rebuilt, the others keep the value
 * `lv` holds on entry; without, all of them (a dirty tile's). px__region_store then stores them. */
#define PX_REGION_UP (64 + 16 + 4 + 1)
static __device__ inline int px__region_at(int m) { return m == 1 ? 0 : m == 2 ? 64 : m == 3 ? 80 : 84; }

static __device__ void px__region_levels(const px_gpu_slot *s, int L, int top, int ox, int oy, const uint32_t *base,
                                         uint32_t *lv, uint8_t *rebuilt, const uint32_t *gbits)
{
    for (int l = L + 1; l <= top; l++) {
        int m = l - L, side = PX_TILE >> m, prev = PX_TILE >> (m - 1);
        int lox = ox >> m, loy = oy >> m, pox = ox >> (m - 1), poy = oy >> (m - 1);
        const uint32_t *src = m == 1 ? base : lv + px__region_at(m - 1);
        for (int i = (int)threadIdx.x; i < side * side; i += (int)blockDim.x) {
            int gx = lox + i % side, gy = loy + i / side, k = px__region_at(m) + i, r = 0;
            if (gx < s->w[l] && gy < s->h[l] &&
                (!gbits || px__group_box_dirty(gbits, ox, oy, px_texel_tiles(gx, gy, l, s->w[0], s->h[0])))) {
                int sw = s->w[l - 1], sh = s->h[l - 1];
                int a = px_pyr_src0(gx) - pox, b = px_pyr_src1(gx, sw) - pox;
                int c = px_pyr_src0(gy) - poy, d = px_pyr_src1(gy, sh) - poy;
                lv[k] = px_box4(src[c * prev + a], src[c * prev + b], src[d * prev + a], src[d * prev + b]);
                r = 1;
            } else if (!gbits) {
                lv[k] = 0;
            }
            rebuilt[k] = (uint8_t)r;
        }
        __syncthreads();
    }
}

/* The texels px__region_levels rebuilt, all at once. */
static __device__ void px__region_store(const px_gpu_slot *s, int L, int top, int ox, int oy, const uint32_t *lv,
                                        const uint8_t *rebuilt)
{
    for (int k = (int)threadIdx.x; k < PX_REGION_UP; k += (int)blockDim.x) {
        int m = k < 64 ? 1 : k < 80 ? 2 : k < 84 ? 3 : 4, i = k - px__region_at(m), side = PX_TILE >> m;
        if (L + m <= top && rebuilt[k])
            px__store(s->surf[L + m], (ox >> m) + i % side, (oy >> m) + i / side, lv[k]);
    }
}

/* Levels l0 .. of slot s by one block: each texel rebuilt when its cell of a dirty map is set.
 * map (mw x mh) covers level l0-1 (a cell per texel); each level's map ORs 2x2 cells of the one
 * below (a ceiling), in `scratch`. Reads the level below through L2 (other blocks of this launch
 * wrote it). */
static __device__ void px__levels_from_map(const px_gpu_slot *s, int l0, const uint8_t *map, int mw, int mh, uint8_t *scratch)
{
    const uint8_t *prev = map;
    int pw = mw, ph = mh;
    for (int l = l0; l < s->levels; l++) {
        int gw = (pw + 1) >> 1, gh = (ph + 1) >> 1;
        for (int p = (int)threadIdx.x; p < gw * gh; p += (int)blockDim.x) {
            int x = p % gw, y = p / gw, any = 0;
            for (int dy = 0; dy < 2; dy++)
                for (int dx = 0; dx < 2; dx++)
                    if (2 * x + dx < pw && 2 * y + dy < ph)
                        any |= __ldcg(prev + (2 * y + dy) * pw + 2 * x + dx); /* other blocks wrote map */
            scratch[p] = (uint8_t)any;
        }
        __syncthreads();
        int w = s->w[l], sw = s->w[l - 1], sh = s->h[l - 1];
        for (int p = (int)threadIdx.x; p < w * s->h[l]; p += (int)blockDim.x) {
            int x = p % w, y = p / w;
            if (!scratch[y * gw + x])
                continue;
            int a = px_pyr_src0(x), b = px_pyr_src1(x, sw), c = px_pyr_src0(y), d = px_pyr_src1(y, sh);
            px__store(s->surf[l], x, y,
                      px_box4(px__sread_l2(s->surf[l - 1], a, c), px__sread_l2(s->surf[l - 1], b, c),
                              px__sread_l2(s->surf[l - 1], a, d), px__sread_l2(s->surf[l - 1], b, d)));
        }
        __threadfence_block();
        __syncthreads();
        prev = scratch, scratch += gw * gh, pw = gw, ph = gh;
    }
}

size_t px_gpu_tiles_scratch(int tw, int th)
{
    size_t n = 0;
    int gw = px__groups(tw), gh = px__groups(th);
    for (int w = gw, h = gh; w > 1 || h > 1;) {
        w = (w + 1) >> 1, h = (h + 1) >> 1;
        n += (size_t)w * (size_t)h;
    }
    return (size_t)gw * (size_t)gh + n + 16;
}


struct px__tiles_args {
    int frame, cur, mask, diff, update, pyramid;
    uint32_t threshold;
    px_gpu_tiles_state st;
};

/* A block of 64 threads per tile (blockIdx.x, .y) of item blockIdx.z; thread i holds texels
 * 4*(i%4) .. +3 of row i/4 of the tile (16-byte loads and stores inside the slot). 32 blocks an
 * SM (32 registers): a 1024^2 frame's 4,096 tiles in one wave (at 40 registers, 1.3 waves). */
__global__ void __launch_bounds__(64, 32) px__k_tiles(const px_gpu_slot *all_slots, int nslots, px__tiles_args a)
{
    __shared__ uint32_t base[PX_TILE * PX_TILE], lv[PX_REGION_UP];
    __shared__ uint8_t rebuilt[PX_REGION_UP];
    px_gpu_let_next_start(); /* the group kernel's blocks wait (px_gpu_wait_previous) for all of this */
    const px_gpu_slot *slots = all_slots + (size_t)blockIdx.z * (size_t)nslots;
    const px_gpu_slot *c = &slots[a.cur];
    int tx = (int)blockIdx.x, ty = (int)blockIdx.y, tw = (int)gridDim.x, th = (int)gridDim.y, wpr = px_gpu_words(tw);
    int w = c->w[0], h = c->h[0], lx = 4 * ((int)threadIdx.x & 3), ly = (int)threadIdx.x >> 2;
    int x = tx * PX_TILE + lx, y = ty * PX_TILE + ly, n = y < h ? min(4, w - x) : 0; /* texels inside the slot */
    uint32_t *bits = a.st.bits ? a.st.bits + (size_t)blockIdx.z * (size_t)th * (size_t)wpr : NULL;
    uint32_t fv[4] = {0, 0, 0, 0};
    if (a.diff || a.update) { /* the frame's texels */
        const uint32_t *lin = a.st.frame_lin ? a.st.frame_lin + (size_t)blockIdx.z * (size_t)w * (size_t)h : NULL;
        if (n == 4 && lin && (w & 3) == 0) {
            uint4 q = __ldg((const uint4 *)(lin + (size_t)y * (size_t)w + (size_t)x));
            fv[0] = q.x, fv[1] = q.y, fv[2] = q.z, fv[3] = q.w;
        } else {
            for (int k = 0; k < n; k++)
                fv[k] = lin ? lin[(size_t)y * (size_t)w + (size_t)(x + k)] : px__texel(slots[a.frame].tex[0], x + k, y);
        }
    }
    int dirty_tile;
    if (a.diff) {
        const px_gpu_dirty *d = &a.st.dirty[blockIdx.z];
        int on = 0;
        if (!a.st.primed[blockIdx.z]) {
            on = 1;
        } else if (d->n >= 0) {
            on = threadIdx.x == 0 && px_gpu_rects_touch_tile(d->r, d->n, tx, ty);
        } else if (n > 0) {
            uint32_t cv[4] = {0, 0, 0, 0};
            if (n == 4) {
                uint4 q = surf2Dread<uint4>(c->surf[0], x * 4, y);
                cv[0] = q.x, cv[1] = q.y, cv[2] = q.z, cv[3] = q.w;
            } else {
                for (int k = 0; k < n; k++)
                    cv[k] = px__sread(c->surf[0], x + k, y);
            }
            for (int k = 0; k < n; k++)
                on |= px_maxdiff(fv[k], cv[k]) > a.threshold;
        }
        dirty_tile = __syncthreads_or(on);
        if (threadIdx.x == 0)
            px__store(slots[a.mask].surf[0], tx, ty, px_mask_pixel(dirty_tile));
    } else {
        dirty_tile = px_mask_dirty(px__texel(slots[a.mask].tex[0], tx, ty));
    }
    if (threadIdx.x == 0 && bits) { /* every bit written: no clearing launch */
        uint32_t *word = bits + (size_t)ty * (size_t)wpr + (size_t)(tx >> 5), bit = 1u << (tx & 31);
        if (dirty_tile)
            atomicOr(word, bit);
        else
            atomicAnd(word, ~bit);
    }
    int top = c->levels - 1;
    if (dirty_tile) {
        if (a.update && n == 4)
            surf2Dwrite(make_uint4(fv[0], fv[1], fv[2], fv[3]), c->surf[0], x * 4, y);
        else if (a.update)
            for (int k = 0; k < n; k++)
                px__store(c->surf[0], x + k, y, fv[k]);
        if (a.pyramid && top >= 1) {
            for (int k = 0; k < 4; k++)
                base[ly * PX_TILE + lx + k] =
                    k >= n ? 0u : a.update ? fv[k] : px__sread(c->surf[0], x + k, y);
            __syncthreads();
            px__region_levels(c, 0, min(top, PX_TILE_SHIFT), tx * PX_TILE, ty * PX_TILE, base, lv, rebuilt, NULL);
            px__region_store(c, 0, min(top, PX_TILE_SHIFT), tx * PX_TILE, ty * PX_TILE, lv, rebuilt);
        }
    }
}

/* Levels 5-8 of group (blockIdx.x, .y) of item blockIdx.z, after the tile kernel, from its level-4
 * texels: only over dirty tiles (the mask's row bitmaps); then the item's last group builds the
 * levels above, each texel over a dirty group (one counter per item, zero between launches). A
 * launch of its own: a group's last tile block building them in the tile kernel needed every
 * block to fence and count its arrival (ncu, 1024^2: 31 us for that kernel; 10 + 12 split). */
__global__ void __launch_bounds__(256) px__k_groups(const px_gpu_slot *all_slots, int nslots, px__tiles_args a, int tw, int th)
{
    __shared__ uint32_t base[PX_TILE * PX_TILE], lv[PX_REGION_UP], gbits[PX_GROUP];
    __shared__ uint8_t rebuilt[PX_REGION_UP];
    __shared__ int last;
    /* the slot's record in shared memory, in one round of loads: every level reads its sizes and
     * objects, and global loads of them per level were a serial chain of round trips */
    __shared__ px_gpu_slot cs;
    {
        const uint32_t *from = (const uint32_t *)&all_slots[(size_t)blockIdx.z * (size_t)nslots + (size_t)a.cur];
        for (int i = (int)threadIdx.x; i < (int)(sizeof cs / 4); i += (int)blockDim.x)
            ((uint32_t *)&cs)[i] = from[i];
        __syncthreads();
    }
    /* started early (px_gpu_tiles): the slot record is no kernel's output; the rest is the tile
     * kernel's. Once past the wait, the tile kernel has ended, so what follows may start: its
     * reads of the tile kernel's output are safe (the fetch kernel's decision, px__k_fetch). */
    px_gpu_wait_previous();
    px_gpu_let_next_start();
    const px_gpu_slot *c = &cs;
    int gx = (int)blockIdx.x, gy = (int)blockIdx.y, gw = (int)gridDim.x, gh = (int)gridDim.y, wpr = px_gpu_words(tw);
    int top = c->levels - 1, ox = gx * PX_GROUP, oy = gy * PX_GROUP; /* the group's first tile: its origin at level 4 */
    const uint32_t *bits = a.st.bits + (size_t)blockIdx.z * (size_t)th * (size_t)wpr;
    uint8_t *maps = a.st.maps + (size_t)blockIdx.z * a.st.maps_item;
    /* one round of loads: the tile bits, level 4, the texels of levels 5-8 as they are */
    uint32_t row_bits = 0;
    if (threadIdx.x < PX_GROUP) {
        int r = oy + (int)threadIdx.x;
        row_bits = r < th ? (bits[(size_t)r * (size_t)wpr + (size_t)(ox >> 5)] >> (ox & 31)) & 0xFFFFu : 0u;
        gbits[threadIdx.x] = row_bits;
    }
    for (int i = (int)threadIdx.x; i < PX_TILE * PX_TILE; i += (int)blockDim.x) {
        int px = ox + i % PX_TILE, py = oy + i / PX_TILE;
        base[i] = px < c->w[PX_TILE_SHIFT] && py < c->h[PX_TILE_SHIFT] ? px__sread_l2(c->surf[PX_TILE_SHIFT], px, py) : 0u;
    }
    for (int i = (int)threadIdx.x; i < PX_REGION_UP; i += (int)blockDim.x) {
        int m = i < 64 ? 1 : i < 80 ? 2 : i < 84 ? 3 : 4, j = i - px__region_at(m), side = PX_TILE >> m, l = PX_TILE_SHIFT + m;
        int px = (ox >> m) + j % side, py = (oy >> m) + j / side;
        lv[i] = l <= top && px < c->w[l] && py < c->h[l] ? px__sread_l2(c->surf[l], px, py) : 0u;
    }
    int group_dirty = __syncthreads_or(row_bits != 0);
    if (group_dirty) {
        px__region_levels(c, PX_TILE_SHIFT, min(top, PX_GROUP_LEVEL), ox, oy, base, lv, rebuilt, gbits);
        px__region_store(c, PX_TILE_SHIFT, min(top, PX_GROUP_LEVEL), ox, oy, lv, rebuilt);
    }
    if (top <= PX_GROUP_LEVEL)
        return;
    /* the item's last group builds the levels above, each texel over a dirty group */
    unsigned *count = a.st.sync + blockIdx.z;
    if (threadIdx.x == 0)
        maps[gy * gw + gx] = (uint8_t)group_dirty;
    __threadfence(); /* this group's texels and map cell, before its arrival */
    __syncthreads();
    if (threadIdx.x == 0)
        last = atomicAdd(count, 1u) == (unsigned)(gw * gh) - 1u;
    __syncthreads();
    if (!last)
        return;
    __threadfence();
    if (threadIdx.x == 0)
        *count = 0; /* ready for the next launch */
    px__levels_from_map(c, PX_GROUP_LEVEL + 1, maps, gw, gh, maps + gw * gh);
}

cudaError_t px_gpu_tiles(const px_gpu_slot *d_slots, int nslots, const pxvm_program *prog, const pxi_insn *diff,
                         const pxi_insn *update, const pxi_insn *pyramid, int items, const px_gpu_tiles_state *st,
                         cudaStream_t stream, int early, int *groups)
{
    *groups = 0;
    px__tiles_args a;
    memset(&a, 0, sizeof a);
    a.diff = diff != NULL, a.update = update != NULL, a.pyramid = pyramid != NULL;
    if (diff) {
        a.frame = PX_ARG(diff, DIFF, frame), a.cur = PX_ARG(diff, DIFF, cur), a.mask = PX_ARG(diff, DIFF, mask);
        a.threshold = (uint32_t)PX_ARG(diff, DIFF, threshold);
    } else if (update) {
        a.frame = PX_ARG(update, UPDATE, frame), a.cur = PX_ARG(update, UPDATE, cur), a.mask = PX_ARG(update, UPDATE, mask);
    } else {
        a.cur = PX_ARG(pyramid, PYRAMID, slot), a.mask = PX_ARG(pyramid, PYRAMID, mask);
    }
    a.st = *st;
    const pxvm_slot *m = &prog->slots[a.mask];
    px__k_tiles<<<dim3((unsigned)m->w, (unsigned)m->h, (unsigned)items), 64, 0, stream>>>(d_slots, nslots, a);
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess && pyramid && prog->slots[a.cur].levels > PX_TILE_SHIFT + 1) {
        cudaLaunchAttribute attr;
        cudaLaunchConfig_t cfg =
            px_gpu_early_config(dim3((unsigned)px__groups(m->w), (unsigned)px__groups(m->h), (unsigned)items), dim3(256), stream, &attr);
        cfg.numAttrs = early ? 1 : 0;
        e = cudaLaunchKernelEx(&cfg, px__k_groups, d_slots, nslots, a, m->w, m->h);
        *groups = e == cudaSuccess;
    }
    return e;
}

struct px_gpu_frame_nodes {
    int n;
    struct {
        cudaGraphNode_t node;
        cudaKernelNodeParams p; /* its launch, kernelParams aside */
        const px_gpu_slot *slots;
        int nslots;
        px__tiles_args a; /* as the graph runs it now */
    } rec[1];
};

cudaError_t px_gpu_frame_nodes_find(cudaGraph_t def, px_gpu_frame_nodes **out)
{
    *out = NULL;
    size_t n = 0;
    cudaError_t e = cudaGraphGetNodes(def, NULL, &n);
    cudaGraphNode_t *all = e == cudaSuccess ? (cudaGraphNode_t *)malloc((n ? n : 1) * sizeof *all) : NULL;
    px_gpu_frame_nodes *f = all ? (px_gpu_frame_nodes *)calloc(1, sizeof *f + (n ? n : 1) * sizeof f->rec[0]) : NULL;
    if (e == cudaSuccess && !f) {
        free(all);
        return cudaErrorMemoryAllocation;
    }
    if (e == cudaSuccess && n > 0) /* an empty graph (nothing to run) has no nodes to list */
        e = cudaGraphGetNodes(def, all, &n);
    for (size_t i = 0; f && e == cudaSuccess && i < n; i++) {
        cudaGraphNodeType t;
        cudaKernelNodeParams p;
        if (cudaGraphNodeGetType(all[i], &t) != cudaSuccess || t != cudaGraphNodeTypeKernel ||
            cudaGraphKernelNodeGetParams(all[i], &p) != cudaSuccess || p.func != (void *)px__k_tiles)
            continue;
        px__tiles_args a = *(const px__tiles_args *)p.kernelParams[2];
        if (!(a.diff || a.update) || !a.st.frame_lin) /* reads no input's linear level 0 */
            continue;
        f->rec[f->n].node = all[i], f->rec[f->n].p = p, f->rec[f->n].a = a;
        f->rec[f->n].slots = *(const px_gpu_slot *const *)p.kernelParams[0];
        f->rec[f->n].nslots = *(const int *)p.kernelParams[1];
        f->n++;
    }
    free(all);
    cudaGetLastError(); /* a node that is no kernel, skipped */
    if (e != cudaSuccess)
        free(f);
    else
        *out = f;
    return e;
}

cudaError_t px_gpu_frame_nodes_point(px_gpu_frame_nodes *f, cudaGraphExec_t exec, int frame, const uint32_t *frame_lin)
{
    cudaError_t e = cudaSuccess;
    for (int i = 0; f && e == cudaSuccess && i < f->n; i++) {
        if (f->rec[i].a.frame != frame || f->rec[i].a.st.frame_lin == frame_lin)
            continue;
        f->rec[i].a.st.frame_lin = frame_lin;
        void *args[3] = {&f->rec[i].slots, &f->rec[i].nslots, &f->rec[i].a};
        cudaKernelNodeParams p = f->rec[i].p;
        p.kernelParams = args, p.extra = NULL;
        e = cudaGraphExecKernelNodeSetParams(exec, f->rec[i].node, &p);
    }
    return e;
}

/* The dirty tiles of a mask as row bitmaps, th rows of px_gpu_words(tw) uint32 per item (zeroed
 * before): a thread per tile sets its bit, so "is a dirty tile in this box" reads a few words per
 * row (px_gpu_row_dirty). For masks written by something else than the tile kernel. */
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
