/* executor.cuh - the CUDA-GL executor's state (struct pxvm_executor) and what its host files
 * (context.cu, resources.cu, slot_storage.cu, bind.cu, run.cu) share; the kernel families'
 * launches are declared in gpu_slot.cuh. */
#ifndef PX_EXECUTOR_CUH
#define PX_EXECUTOR_CUH

/* The CUDA-GL executor: GL textures are the storage, CUDA kernels do the work, and every result
 * comes from isa/px_sem.h, the same code the CPU executor runs.
 *
 * Context   EGL device platform, the EGL device whose EGL_CUDA_DEVICE_NV is the selected CUDA
 *           device, an OpenGL 4.5 core context without surfaces, GL entry points through GLEW.
 * Storage   each slot is a GL_RGBA8 texture with its full mip chain (glTexStorage2D), registered
 *           with CUDA once at load and kept mapped until close (GL never touches it meanwhile).
 *           Kernels read levels through texture objects (point filtering, element-type reads)
 *           and write them through surface objects. No GL filtering or glGenerateMipmap is used.
 * Plan      decoded on the host once (vm/launch_plan.c): a run enqueues the reset, one or two
 *           launches per PYRAMID (up to 6 levels each, tiles kept in shared memory), one launch
 *           per batch of independent SAMPLE/GATHER, one per DOT_RGB, all on one stream with a
 *           single synchronisation at the end. Repeated runs replay a captured CUDA graph.
 * Batches   a batch of B items is B copies of every slot (texture b*nslots + k is slot k of item
 *           b); every launch covers all items (blockIdx.z, or y for DOT), so a plan step is one
 *           launch whatever B is.
 * Streams   with a caller's stream set, work is ordered after that stream's earlier work and
 *           the stream after ours through events; nothing synchronises from the host except runs
 *           of programs with DOT_RGB (their trap is read back) and reads into host memory.
 */
#include <EGL/egl.h>
#include <EGL/eglext.h>
#include <GL/glew.h>
#include <cuda_gl_interop.h>
#include <cuda_runtime.h>

#include <stdint.h>

#include "../../vm/vm.h"

#include "gpu_slot.cuh"

/* ---- device records, built once at load ----------------------------------------------------- */

struct px_gpu_resize; /* resize.cu */
typedef struct px_gpu_resize px_gpu_resize;
struct px_gpu_embed; /* embed.cu */
typedef struct px_gpu_embed px_gpu_embed;

struct px_gpu_rect { /* a level to clear at the start of a run */
    cudaSurfaceObject_t surf;
    int w, h;
    int slot, level; /* what it is: a run's reset leaves level 0 of a fused EMBED's atlas (px__launch_reset) */
};

/* ---- the executor --------------------------------------------------------------------------- */

struct pxvm_executor {
    int device;
    EGLDisplay dpy;
    EGLContext ctx;
    cudaStream_t stream;      /* where the work goes: the caller's stream when one is set, else own_stream */
    cudaStream_t own_stream;  /* made at open; runs are captured on it (never on a caller's stream) */
    int capturing;            /* px__enqueue is capturing a graph */
    const pxvm_program *prog; /* alive from load until the next load or close */
    int nslots;               /* of the loaded program: unload must not read a freed program */
    int batch;                /* items: the per-item arrays below have batch * nslots entries */
    int has_dot;              /* the program can trap on the device (DOT_RGB) */
    cudaStream_t user_stream; /* the caller's stream, or NULL */
    cudaEvent_t ev_out;       /* a stream switch: the new stream waits for the old one's work */
    /* per item and slot: index item * nslots + slot */
    GLuint *gl_tex;
    cudaGraphicsResource_t *res;
    int mapped;
    px_gpu_slot *slots;   /* host copy of the device table */
    cudaArray_t *arrays;  /* [(item * nslots + slot) * PXVM_MAX_LEVELS + level], fixed while mapped */
    px_gpu_slot *d_slots; /* device table */
    uint8_t *bound;
    /* per slot, each holding all items back to back */
    uint8_t **staging;   /* pinned host staging for input uploads from pageable memory (made on first use) */
    uint8_t **d_staging; /* device linear buffer per input: H2D at full speed, then D2D into the array */
    /* a frame-only input's level 0 as the tile kernel reads it: a borrowed frame
     * (pxvm_runner_borrow, read in place), or NULL: its d_staging */
    const uint8_t **frame_src;
    /* plan records */
    px_gpu_fetch *d_fetch; /* one per instruction (unused for non-fetch ones), in program order */
    px_gpu_rect *d_clear;
    int nclear, max_clear_px;
    uint8_t *d_prog; /* the program image, to restore slot 0 */
    px_gpu_status *d_status, *h_status; /* per item */
    unsigned *d_counter; /* per item: the pyramid's last-block counter (it resets it) */
    uint8_t *h_read;     /* pinned readback buffer (pageable D2H copies measured 4x slower) */
    size_t h_read_cap;
    uint8_t **h_out;     /* per output slot: its level 0 of every item, downloaded after synchronous runs */
    int out_valid;       /* h_out holds the last successful run's outputs */
    unsigned *step_blocks; /* per plan step: y blocks of its fetch launch (from its largest patch) */
    cudaGraphExec_t graph[2]; /* the whole run, without [0] and with [1] the output downloads */
    int have_graph[2];
    cudaGraph_t graph_def[2];                /* ... as captured: the nodes below are its */
    int capture_later; /* the configuration in use is new (retarget.cu made it): its first run launches
                        * directly and its second captures, so a size run once never pays a capture */
    px_gpu_frame_nodes *frame_nodes[2];      /* ... its tile kernels that read a frame input */
    /* fixation registers, [batch][8][2] int32: what runs start with, and the run's own (the same
     * buffer unless the program writes registers); token geometry [batch][ngeom][5] */
    int32_t *d_fix_set, *d_fix_run, *d_geom;
    /* video, per item: primed, host dirty rectangles, registers of incremental instructions,
     * changed tokens */
    uint8_t *d_primed, *d_changed;
    px_gpu_dirty *d_dirty;
    int32_t *d_last_reg;
    uint32_t **d_bits; /* per slot used as a tile mask: its row bitmaps, every item */
    uint8_t **d_dmap;  /* ... the tile kernel's dirty maps of groups */
    unsigned **d_sync; /* ... and its arrival counters */
    /* pipelined uploads of page-locked host frames: a copy stream and, per input slot, two
     * device buffers used in turn, so frame N+1 crosses the link while frame N computes */
    cudaStream_t copy_stream;
    uint8_t *(*d_upload)[2];
    cudaEvent_t (*up_done)[2], (*up_free)[2];
    int *up_turn;
    /* per item: the dirty rectangles given for its next run (n = -1: none), for binds */
    pxvm_rect *h_rects;
    int *h_nrects;
    uint8_t *h_primed; /* per item: a run has been enqueued since load or restart (the host's view) */
    /* RESIZE: per instruction (resize_n of them), its device tables and buffer, else NULL */
    px_gpu_resize **resize;
    uint32_t resize_n;
    /* EMBED: per instruction (embed_n of them), its packed weights and staging buffer, else NULL */
    px_gpu_embed **embed;
    uint32_t embed_n;
    /* fused EMBED (pxvm_runner_fuse_embed): [ninsns] the EMBEDs fused, or NULL; per slot where the
     * fetches into it write instead (d_fuse, read by the fetch kernel; h_fuse its host copy), made
     * at load (zeros: every slot itself); fuse_dp4a: PXVM_CUDA_EMBED=dp4a when fusion was set, so
     * the atlases stay written and the dp4a kernel reads them */
    uint8_t *fused;
    px_emb_fuse *d_fuse, *h_fuse;
    int fuse_dp4a;
    /* retarget.cu: the per-size cache (NULL until the first retarget) */
    struct px_gpu_retarget *rt;
    /* ... and its destructor, set with rt: unload frees the cached sizes through it, so that the
     * storage's owner (resources.cu) does not call into the cache that builds on it */
    void (*rt_free)(pxvm_executor *ex);
    /* ragged.cu: its pinned and device blocks, kept between calls (NULL until the first) */
    struct px_gpu_ragged *ragged;
};

#define PX__CK(call)                                                                                   \
    do {                                                                                               \
        cudaError_t e_ = (call);                                                                       \
        if (e_ != cudaSuccess)                                                                         \
            return px__cuda_fail(err, #call, e_, __FILE__, __LINE__);                                  \
    } while (0)

/* The executor's dispatch (run.cu's px__enqueue): plan step si, whose first instruction is `in`,
 * enqueued for `items` items by the launch function of its opcode's family (opcodes.def), named
 * px_gl_run_<family>: 0 to go on, 1 at HALT, -1 with *err set. `fresh` marks the masks whose row
 * bitmaps hold their current level 0; groups_before: the launch before was the tile kernels'
 * group kernel; *after_groups: set when this one is; early: launches may overlap (captured). */
typedef struct px_gl_step {
    pxvm_executor *ex;
    uint32_t si;
    const pxi_insn *in;
    unsigned items;
    cudaEvent_t *events;
    uint8_t *fresh;
    int groups_before;
    int *after_groups;
    int early;
} px_gl_step;
#define PX_FACTS(name, family, plan, reads, writes, upper, anysize, flags) \
    int px_gl_run_##family(px_gl_step *c, pxvm_error *err);
#include "../../isa/opcodes.def"

/* A level's CUDA array (fixed while the textures are mapped). */
static inline cudaArray_t px__array(const pxvm_executor *ex, int item, int slot, int level)
{
    return ex->arrays[((size_t)item * (size_t)ex->nslots + (size_t)slot) * PXVM_MAX_LEVELS + (size_t)level];
}

/* ---- shared by the host files --------------------------------------------------------------- */

/* context.cu: a failed CUDA call as the error (PXE_CUDA_CALL, -1), the executor's GL context made
 * current on this thread, the ops' open, and the end of a call that enqueued work (px__join_out:
 * without a caller's stream, it waits for the work). run.cu: the ops' close. */
PXVM_COLD int px__cuda_fail(pxvm_error *err, const char *what, cudaError_t e, const char *file, int line);
void px__make_current(pxvm_executor *ex);
/* the references to an EGL display held by this process's executors, after adding delta (close: -1) */
int px__egl_hold(EGLDisplay dpy, int delta);
int px__gl_open(pxvm_executor **out, const pxvm_open_options *opt, pxvm_error *err);
void px__gl_close(pxvm_executor *ex);

/* resources.cu: the ops' load, and unload (close unloads); clear records for levels [l0, l1) of
 * table entry i (item * nslots + slot), added to rects (ex->nclear, ex->max_clear_px count them);
 * the clear kernel over n records on the stream. */
int px__gl_load(pxvm_executor *ex, const pxvm_program *prog, int batch, pxvm_error *err);
/* slot_storage.cu: a slot's texture for one item, and the kernels' per-level views of it (load and
 * retarget both make slot storage with these) */
int px__slot_texture(GLuint tex, cudaGraphicsResource_t *res, const pxvm_slot *s, int slot, int item, pxvm_error *err);
int px__slot_views(cudaGraphicsResource_t res, const pxvm_slot *s, px_gpu_slot *g, cudaArray_t *arrays, cudaStream_t stream,
                   int slot, pxvm_error *err);
void px__gl_unload(pxvm_executor *ex);
/* The guard of every op but load, close, set_stream and sync: -1 with an UNAVAILABLE error naming
 * `op` when no program is loaded (a failed load or retarget unloads: nothing is left to run). */
int px__need_program(const pxvm_executor *ex, const char *op, pxvm_error *err);
void px__add_clear(pxvm_executor *ex, px_gpu_rect *rects, int i, int l0, int l1);
int px__launch_clear(pxvm_executor *ex, const px_gpu_rect *d_rects, int n, int max_px, pxvm_error *err);
/* ... the per-run reset (ex->d_clear), but level 0 of the atlases the fetches do not write now
 * (ex->d_fuse, read when the kernel runs: a fused EMBED's atlas is never read, so never cleared) */
int px__launch_reset(pxvm_executor *ex, pxvm_error *err);
/* ... and what the loaded program's operands decide, shared with retarget.cu: the tile masks'
 * buffers (those missing), the fetch records and each step's y blocks (allocated here), the
 * per-run reset records of the slots' current surfaces (allocated here, NULL when none). */
int px__alloc_masks(pxvm_executor *ex, pxvm_error *err);
int px__fetch_records(pxvm_executor *ex, px_gpu_fetch **d_fetch, unsigned **step_blocks, pxvm_error *err);
int px__reset_records(pxvm_executor *ex, px_gpu_rect **d_clear, int *nclear, int *max_px, pxvm_error *err);
/* ... the same as host work only, into the caller's memory (retarget.cu stages a configuration's
 * records in one pinned block and uploads them at once): fetch zeroed, ninsns records; step_blocks
 * nsteps; rects room for every level of every table entry. px__fetch_rescaled: the part of SAMPLE
 * or ANISO instruction i's record that a resolution of an any-size program rescales;
 * px__fetch_box: an incremental fetch's footprint box (what rescaled operands and sizes decide). */
void px__fetch_fill(const pxvm_executor *ex, px_gpu_fetch *fetch, unsigned *step_blocks);
void px__fetch_rescaled(const pxvm_program *prog, uint32_t i, px_gpu_fetch *f);
void px__fetch_box(const pxvm_program *prog, uint32_t i, px_gpu_fetch *f);
void px__reset_fill(pxvm_executor *ex, px_gpu_rect *rects, int *nclear, int *max_px);
/* Clear records that fill makes (into room for every level of every table entry, counted into *n
 * and *max_px) uploaded into *d (allocated here, NULL when none), on the stream. */
typedef void (*px_rect_fill)(pxvm_executor *ex, px_gpu_rect *rects, int *n, int *max_px, void *arg);
int px__rect_records(pxvm_executor *ex, px_rect_fill fill, void *arg, px_gpu_rect **d, int *n, int *max_px,
                     const char *what, pxvm_error *err);
/* The two captured graphs of a run ([0] without, [1] with the output downloads) destroyed, with
 * their frame nodes: the executor's own (ex->graph...) or a cached configuration's. */
void px__graphs_drop(cudaGraphExec_t *graph, cudaGraph_t *graph_def, px_gpu_frame_nodes **frame_nodes, int *have_graph);

/* retarget.cu: the ops' retarget; what unload frees of its cache (after the stream has drained);
 * the bytes per item an input's linear buffers (staging, d_staging, d_upload) are made with (its
 * level 0, or more after a retarget to a larger size: they only grow). */
int px__gl_retarget(pxvm_executor *ex, const pxvm_program *prog, pxvm_error *err);
void px__retarget_free(pxvm_executor *ex);
/* Every captured graph dropped: the executor's and the cached configurations' (they name buffers
 * or launches that changed). */
void px__retarget_drop_graphs(pxvm_executor *ex);
/* retarget.cu: a switch leaves the slots it sends back to their initial state pending (no launch,
 * no upload on the switch): the run that follows restores what its own per-run reset does not
 * (px__retarget_run_start, before its reset), a read or tokens before it restores all of it
 * (px__retarget_flush). Both enqueue on the stream, or nothing when nothing is pending. A run
 * with step budget `budget` leaves a switched input's levels >= 1 to a PYRAMID only when the
 * budget reaches it (pxvm_upper_rebuilt); else they are zeroed first. */
int px__retarget_run_start(pxvm_executor *ex, uint64_t budget, pxvm_error *err);
int px__retarget_flush(pxvm_executor *ex, pxvm_error *err);
size_t px__lin_bytes(const pxvm_executor *ex, int slot);

/* bind.cu: the ops' bind and borrow; a caller's pointer checked to be memory of the executor's
 * CUDA device (what: the view's name in the error). */
int px__gl_bind(pxvm_executor *ex, int slot, int item0, const pxvm_view *v, pxvm_error *err);
int px__gl_borrow(pxvm_executor *ex, int slot, int item0, const pxvm_view *v, pxvm_error *err);
void px__gl_release(pxvm_executor *ex, int slot, int item0, int items);
int px__check_device_ptr(const pxvm_executor *ex, const void *p, const char *what, pxvm_error *err);

/* resize.cu: one RESIZE's tables and pass 1's buffer (every item) on the device, made at load
 * (0, or -1 with *err; *out is set even then, for px_gpu_resize_free), freed at unload; its two
 * launches, for every item. */
int px_gpu_resize_make(const pxvm_program *prog, const pxi_insn *in, int items, cudaStream_t stream, px_gpu_resize **out,
                       pxvm_error *err);
void px_gpu_resize_free(px_gpu_resize *r);
/* embed.cu: EMBED instruction `in`'s weights packed for the tensor-core kernel and a staging
 * buffer for `items` items (0, or -1 with *err; *out is set even then, for px_gpu_embed_free),
 * made at load and freed at unload. */
int px_gpu_embed_make(const pxvm_program *prog, const pxi_insn *in, int items, cudaStream_t stream, px_gpu_embed **out,
                      pxvm_error *err);
void px_gpu_embed_free(px_gpu_embed *e);
/* ... and, at a retarget, the records of the next program: packed again in place where only the
 * weights' or params' pixels differ (the buffers, which captured graphs name, stay), made again
 * where its operands differ (*remade = 1: the caller drops the graphs that name the old ones) */
int px_gpu_embed_follow(pxvm_executor *ex, const pxvm_program *next, int *remade, pxvm_error *err);
/* ... fused (the ops' fuse_embed, run.cu, which then drops every captured graph: a fused run
 * launches other work): the fusion set kept, the fetch kernel's table made from it and the
 * records (and again where follow makes a record anew); and, at the start of every run, the
 * staged rows of each fused EMBED zeroed (a scratch atlas starts at zero: a token no fetch writes
 * reads 0), on the stream (captured with the run) */
int px_gpu_embed_fuse(pxvm_executor *ex, const uint8_t *fused, pxvm_error *err);
int px_gpu_embed_fused_clear(pxvm_executor *ex, pxvm_error *err);
size_t px_gpu_resize_bytes(const px_gpu_resize *r, int items); /* its device memory */
cudaError_t px_gpu_resize_run(const px_gpu_slot *d_slots, int nslots, const px_gpu_resize *r, int items, cudaStream_t stream);

/* tokens.cu: the ops' read_tokens (vm/tokens.h). */
struct pxvm_token_table;
int px__gl_read_tokens(pxvm_executor *ex, int slot, int item0, int items, const struct pxvm_token_table *t, void *dst,
                       int device, pxvm_error *err);

/* ragged.cu: the ops' ragged (vm/ragged.h); what it keeps, freed at close. */
struct px_ragged_job;
int px__gl_ragged(pxvm_executor *ex, const struct px_ragged_job *job, pxvm_error *err);
void px__ragged_free(pxvm_executor *ex);
int px__gl_scratch(pxvm_executor *ex, size_t bytes, void **ptr, int *device, pxvm_error *err);

/* resources.cu: every item primed and its dirty rectangles used up (on the device), on the stream
 * (load, and run.cu at a run's end and a restart). context.cu: px__join_out (above). */
void px__video_end(pxvm_executor *ex);
int px__join_out(pxvm_executor *ex, pxvm_error *err);

#endif
