/* gpu_slot.cuh - what the CUDA-GL executor's translation units share: how a slot is seen on the
 * device (texture objects to read, surface objects to write, per level), how the shared integer
 * semantics of isa/px_sem.h read texels here, and the kernel families' records and launches
 * (pyramid.cu, fetch.cu, dot.cu, video.cu, fixation.cu), which run.cu enqueues. */
#ifndef PX_GPU_SLOT_CUH
#define PX_GPU_SLOT_CUH

#include <cuda_runtime.h>
#include <stdint.h>

#include "../../vm/vm.h"

/* ---- how the shared semantics read texels here ---------------------------------------------- */

struct px_gpu_slot {
    cudaTextureObject_t tex[PXVM_MAX_LEVELS];
    cudaSurfaceObject_t surf[PXVM_MAX_LEVELS];
    int w[PXVM_MAX_LEVELS], h[PXVM_MAX_LEVELS];
    int levels;
};

static __host__ __device__ inline uint32_t px__texel(cudaTextureObject_t t, int x, int y)
{
#ifdef __CUDA_ARCH__
    uchar4 v = tex2D<uchar4>(t, (float)x + 0.5f, (float)y + 0.5f); /* point filter: texel (x, y) */
    return (uint32_t)v.x | ((uint32_t)v.y << 8) | ((uint32_t)v.z << 16) | ((uint32_t)v.w << 24);
#else
    (void)t, (void)x, (void)y;
    return 0; /* the sampler is only called on the device */
#endif
}

#define PX_SRC_T const px_gpu_slot *
#define PX_FETCH(s, l, x, y) px__texel((s)->tex[l], (x), (y))
#define PX_LEVEL_W(s, l) ((s)->w[l])
#define PX_LEVEL_H(s, l) ((s)->h[l])
#define PX_LEVELS(s) ((s)->levels)
#include "../../isa/px_sem.h"
#include "embed_fuse.h"

static __device__ inline void px__store(cudaSurfaceObject_t s, int x, int y, uint32_t v)
{
    surf2Dwrite(make_uchar4((unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16),
                            (unsigned char)(v >> 24)),
                s, x * 4, y);
}

/* Programmatic dependent launch (sm_90): a kernel launched with px_gpu_early_config may start
 * while the launch before it finishes, once every block of that one has called
 * px_gpu_let_next_start (or ended). Before px_gpu_wait_previous it may read only what the launch
 * before it does not write; after it, all of that launch's writes are visible. Both are no-ops
 * for a kernel launched normally. */
static __device__ inline void px_gpu_wait_previous(void) { asm volatile("griddepcontrol.wait;" ::: "memory"); }
static __device__ inline void px_gpu_let_next_start(void) { asm volatile("griddepcontrol.launch_dependents;" ::: "memory"); }
/* The launch attribute behind it (one, for cudaLaunchKernelEx). */
static inline cudaLaunchConfig_t px_gpu_early_config(dim3 grid, dim3 block, cudaStream_t stream, cudaLaunchAttribute *attr)
{
    attr->id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr->val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t c = {};
    c.gridDim = grid, c.blockDim = block, c.dynamicSmemBytes = 0, c.stream = stream, c.attrs = attr, c.numAttrs = 1;
    return c;
}

/* Dirty rectangles given by the host for an item's next run (n = -1: none), as DIFF reads them. */
struct px_gpu_dirty {
    int n, pad[3];
    pxvm_rect r[PXVM_MAX_RECTS];
};

/* pxvm_rects_touch_tile (vm/view.c) on the device: the same rule, px_rect_touches_tile. */
static __device__ inline int px_gpu_rects_touch_tile(const pxvm_rect *rects, int n, int tx, int ty)
{
    for (int i = 0; i < n; i++)
        if (px_rect_touches_tile(rects[i].x, rects[i].y, rects[i].w, rects[i].h, tx, ty))
            return 1;
    return 0;
}

/* What video.cu's tile kernel reads and writes besides the slots, every item. */
struct px_gpu_tiles_state {
    const uint8_t *primed;      /* [items] a run has completed since load or restart */
    const px_gpu_dirty *dirty;  /* [items] the caller's dirty rectangles */
    const uint32_t *frame_lin;  /* the frame's level 0 as RGBA rows (an input's upload buffer or a
                                 * borrowed frame), or NULL */
    uint32_t *bits;             /* the mask's row bitmaps, or NULL */
    unsigned *sync;             /* [items] the groups' arrival counter, zero between launches */
    uint8_t *maps;              /* [items][maps_item] the groups' dirty maps */
    size_t maps_item;
};

/* video.cu: DIFF, UPDATE and incremental PYRAMID (each NULL when not in the launch; the ones given
 * share frame, cur and mask), one launch for every item; `early`: the group kernel may start
 * early (px_gpu_early_config); *groups: whether the last launch was the group kernel (which lets
 * the next launch start early once the tile kernel has ended). */
cudaError_t px_gpu_tiles(const px_gpu_slot *d_slots, int nslots, const pxvm_program *prog, const pxi_insn *diff,
                         const pxi_insn *update, const pxi_insn *pyramid, int items, const px_gpu_tiles_state *st,
                         cudaStream_t stream, int early, int *groups);
/* The tile-kernel launches of a captured graph that read an input's linear level 0, found once
 * after the capture (node and arguments; free() it), so that a run only points those of frame
 * slot `frame` at its level 0 in `frame_lin` (a borrowed frame, or the upload buffer) when it
 * moved: a host-side parameter update of the instantiated graph `exec`. */
typedef struct px_gpu_frame_nodes px_gpu_frame_nodes;
cudaError_t px_gpu_frame_nodes_find(cudaGraph_t def, px_gpu_frame_nodes **out);
cudaError_t px_gpu_frame_nodes_point(px_gpu_frame_nodes *f, cudaGraphExec_t exec, int frame, const uint32_t *frame_lin);
/* Bytes of dirty maps per item (maps) the tile kernel needs for a tw x th tile mask. */
size_t px_gpu_tiles_scratch(int tw, int th);

/* A tile mask's dirty tiles as row bitmaps (th rows of px_gpu_words(tw) uint32 per item). */
static __host__ __device__ inline int px_gpu_words(int tw) { return (tw + 31) >> 5; }
cudaError_t px_gpu_mask_bits(const px_gpu_slot *d_slots, int nslots, int mask, int tw, int th, uint32_t *bits, int items,
                             cudaStream_t stream);

/* Is a dirty tile among tiles x0..x1 of one bitmap row? (Set by an earlier launch.) */
static __device__ inline int px_gpu_row_dirty(const uint32_t *row, int x0, int x1)
{
    for (int w = x0 >> 5; w <= (x1 >> 5); w++) {
        uint32_t m = __ldg(row + w);
        if (w == (x0 >> 5))
            m &= ~0u << (x0 & 31);
        if (w == (x1 >> 5) && (x1 & 31) != 31)
            m &= (1u << ((x1 & 31) + 1)) - 1u;
        if (m)
            return 1;
    }
    return 0;
}

/* fixation.cu: one launch each, covering every item (grid z / blocks per item). fix_run holds
 * [items][8][2] int32 registers. */
cudaError_t px_gpu_saliency(const px_gpu_slot *d_slots, int nslots, const pxi_insn *in, int map_w, int map_h, int items,
                            cudaStream_t stream);
cudaError_t px_gpu_argmax(const px_gpu_slot *d_slots, int nslots, const pxi_insn *in, int32_t *fix_run, int items,
                          cudaStream_t stream);

/* pyramid.cu: a full PYRAMID of slot k (g: its table entry, item 0's, on the host), every item;
 * lin0: the slot's level 0 as linear RGBA rows (an input's upload buffer) or NULL; counters: per
 * item, the last block's counter (zero between launches). */
cudaError_t px_gpu_pyramid(const px_gpu_slot *d_slots, int nslots, const px_gpu_slot *g, int k, const uint32_t *lin0,
                           unsigned *counters, int items, cudaStream_t stream);

/* fetch.cu: the fetch kernel's records, one per instruction, built at load. */
struct px_gpu_fetch { /* one SAMPLE, ANISO or GATHER */
    int op, src, dst, mode, x, y, w, h; /* mode: the filter only */
    int reg;                            /* fixation register of a relative instruction, or -1 */
    int token;                          /* the token whose geometry it writes, or -1 */
    int mask;                           /* incremental: the tile mask slot of src, else 0 */
    int index;                          /* instruction index (its last registers) */
    long long u_lo, u_hi, v_lo, v_hi;   /* incremental: positions read before the fixation offset */
    int lmin, lmax;                     /* ... and levels */
    uint32_t *bits;                     /* incremental: the mask's row bitmaps (item 0) */
    size_t bits_item;                   /* ... their uint32 per item */
    int wpr;                            /* ... per row */
    int32_t cu, cv, du, dv;
    uint32_t lod;
    int table, tx, ty;
    int taps;
    int32_t tdu, tdv;
};

/* Per item video state the fetch kernel reads and writes. */
struct px_gpu_video {
    const uint8_t *primed; /* [items] */
    int32_t *last_reg;     /* [items][ninsns][2] */
    uint8_t *changed;      /* [items][ngeom] */
    int ninsns;
};

/* One launch of the fetch kernel for a plan step's batch (grid: instructions, blocks per
 * instruction, items); early: it may start before the launch ahead of it ends. fix:
 * [items][8][2] registers of the run; geom: [items][ngeom][PX_GEOM_INTS] token geometry; fuse:
 * [nslots], where the fetches into each slot write instead of it (a fused EMBED's staged rows,
 * embed_fuse.h; tok NULL: the slot itself), read when the kernel runs (graphs name the table). */
cudaError_t px_gpu_fetch_step(const px_gpu_slot *d_slots, int nslots, const px_gpu_fetch *batch, dim3 grid, const int32_t *fix,
                              int32_t *geom, int ngeom, px_gpu_video vid, const px_emb_fuse *fuse, cudaStream_t stream,
                              int early);

/* dot.cu: DOT_RGB (instruction index insn) for every item, a block each; status: per item, its
 * first trap (trap_insn 0xFFFFFFFF before it). */
struct px_gpu_status {
    uint32_t trap_insn; /* 0xFFFFFFFF: no trap */
    uint32_t trap_sum;
};

cudaError_t px_gpu_dot(const px_gpu_slot *d_slots, int nslots, const pxi_insn *in, uint32_t insn, px_gpu_status *status,
                       int items, cudaStream_t stream);

#endif
