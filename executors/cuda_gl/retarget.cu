/* retarget.cu - the CUDA-GL executor's retarget (vm.h): the loaded program replaced by one that
 * differs only in the sizes of input slots and in operand values (pxvm_check_retarget), without a
 * load; an input's storage only grows and what the operands decide is cached per configuration,
 * so that a new size within the largest seen allocates no texture and a size seen before
 * allocates nothing.
 * One thing in 1,600 lines, kept in one file on purpose: the configuration cache (its entries,
 * key, eviction, the making of a new one) and the switch that uses it share one private state
 * (px_gpu_retarget) and no kernel (with resolution, the one size-change mechanism:
 * docs/design/size-change.md).
 *
 *   inputs    per input slot one GL texture per item with its mip chain, registered and mapped,
 *             its CUDA arrays and texture and surface objects, made at a capacity (w, h, levels):
 *             the loaded size, then the largest of each seen. A size that fits (w, h, levels each
 *             <= the capacity's) reuses it: only the slot table's per-level sizes change (the
 *             kernels, copies and clears address an input through px_gpu_slot's w/h, clamp to
 *             them (isa/px_sem.h), and never read or write the texels beyond them); its levels
 *             >= 1 then hold the last size's and are zeroed before a run or a read sees them,
 *             unless the run rebuilds them first (pxvm_upper_rebuilt: its budget reaches the
 *             PYRAMID), and level 0 of an item not bound since is zeroed before a read sees it
 *             (as the CPU executor does both). A size that does not
 *             fit makes textures of max(w, cap w) x max(h, cap h), max(levels) (every level
 *             zeroed, as a load makes them; a stream of sizes settles on the largest after a few
 *             growths), and the replaced ones go, with every configuration that names them, once
 *             the stream has drained (the switch waits for it). Not grown to the any-size slot's
 *             declared bound at once: that bound may be far above the sizes used, and the memory
 *             is held per item.
 *   RESIZE    per instruction, source size and operands: its device tables and pass 1's buffer.
 *   configs   per set of (textures, sizes, RESIZE tables, operands) in use: the device slot
 *             table, the fetch records, each step's y blocks, the per-run reset records, the
 *             records of what that reset leaves of the switch's wipe, the program image's level 0
 *             of program and data slots (on the device, with a host copy of the image to check it
 *             against) and the captured graphs (a graph bakes launch dimensions, which depend on
 *             the sizes: PYRAMID grids, RESIZE passes, and the slot table's address), so a graph
 *             is only ever replayed for the sizes it was captured at. At most PX_RT_CONFIGS of
 *             them; one whose textures are replaced or whose tables are evicted is dropped with
 *             them. A new configuration's first run launches its work directly; its second run
 *             captures the graph (a size run once never pays a capture). Its device tables are
 *             one block from the executor's stream-ordered pool, staged in reused pinned memory
 *             and uploaded with one asynchronous copy (px__config_make); a count eviction frees
 *             such a block on the stream, without waiting, and a configuration that goes leaves
 *             its block and record to the next new ones (at most PX_RT_CONFIGS of each kept). A
 *             resolution of the any-size program whose sibling made a configuration copies that
 *             one's records (px_rt_family) and rewrites only what the rescaled operands decide;
 *             its key is the sizes' (a resolution's operands follow from them).
 * A switch back to a cached configuration is host work only (lookups, the key, pointer swaps)
 * and a device-to-device copy of the program image's level 0 when it differs from the loaded
 * one's: no upload, no allocation, no synchronisation, no kernel; the wipe is left to the next
 * run (px__retarget_run_start) or read (px__retarget_flush).
 * The bound: cached RESIZE tables beyond those in use take at most
 * PXVM_CUDA_RETARGET_CACHE_MIB MiB (environment, read at the first retarget; default 256; 0:
 * nothing is kept, every switch makes the next size's tables). Inputs' textures are outside it:
 * one set per input slot, as large as the largest size seen in each side (the bounding box of
 * the sizes seen, made for the largest of each, so that those sizes never allocate again; a
 * wide and a tall size take more than either). A configuration's own records, slot table and
 * image (small: a few records per slot, the program image) are outside the bound, held by at most
 * PX_RT_CONFIGS configurations. An input's linear buffers
 * (d_staging, staging, d_upload) only grow, to the largest size seen; the ones they replace, and
 * every cached entry, are freed at unload (after the stream drains: nothing here synchronises
 * the device but a growth of an input's textures, and an eviction, which wait for the
 * executor's stream before they free what the queued work may still read).
 * Measured on an H100 (tests/bench/results/retarget-h100-grow.json, foveate273_any at 50 sizes,
 * one run 39-42 us): a switch to a new size within the largest seen 0.15-0.18 ms (a texture per
 * size made it 1.69-1.70 ms: GL registration, mapping, the views' check, the clear), most of it
 * the new configuration's records (five allocations and pageable uploads, and their host loops);
 * to a size seen before 3.4-3.5 us. With one block, one pinned upload and a sibling's records
 * (tests/bench/results/retarget-h100-config.json, one run 37-41 us): retarget_new 0.12-0.13 ->
 * 0.040-0.041 ms, a new size (resolution + retarget) 0.15-0.16 -> 0.063-0.066 ms. With a key of
 * the sizes alone, the cached configurations in one array, and blocks and records reused from
 * those that went (tests/bench/results/retarget-h100-newsize.md, one session, one run 34-39 us):
 * a new size's retarget 35-50 -> 20-23 us, resolution + retarget 47-71 -> 32-42 us.
 * Slots that are neither inputs nor persistent start again from their initial state, as after a
 * load; other inputs, registers and persistent slots stay. A retarget that fails after it began
 * to switch (a CUDA error) leaves no program loaded. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "executor.cuh"

#define PX_RT_CONFIGS 64
#define PX_RT_DEFAULT_MIB 256

struct px_rt_tex { /* one input slot's storage at one capacity, every item */
    px_rt_tex *next;
    uint64_t serial;
    int slot, w, h, levels, mapped;
    GLuint *gl_tex;              /* [batch] */
    cudaGraphicsResource_t *res; /* [batch] */
    px_gpu_slot *g;              /* [batch] */
    cudaArray_t *arrays;         /* [batch * PXVM_MAX_LEVELS] */
};

struct px_rt_resize { /* one RESIZE's tables for one source size and operands */
    px_rt_resize *next;
    uint64_t serial, stamp, bytes;
    uint32_t insn;
    int sw, sh;
    int32_t a[PXI_MAX_FIELDS];
    px_gpu_resize *r;
};

struct px_rt_image { /* a program image and, on the device, the level 0 it gives each program
                      * and data slot that is not persistent (in slot order: their sizes never
                      * change), so that a switch to it copies on the device, from nothing on the host */
    uint8_t *px;      /* a copy of the image, w*h*4 bytes: what a cached one is checked against */
    int w, h;
    uint8_t *d_level0;
    uint64_t serial;  /* the program it was made from (pxvm_program.serial; 0: none): a program
                       * of that serial has this image, with no comparison */
    uint64_t id;      /* unique in the executor (never 0): which image's level 0 the slots hold */
    int in_block;     /* d_level0 lies in a configuration's block (px_rt_config.block): freed with
                       * it, never alone */
};

/* What a configuration's program does to slots, from its operands (px__facts_make): what a
 * switch to it must restore, and what it may leave for later. */
struct px_rt_facts {
    uint8_t *writes;   /* [nslots] PXVM_RESET_* parts its runs may change */
    uint8_t *rest;     /* [nslots] the parts d_rest clears */
    int touches_image; /* an operand names a program or data slot (or DOT_RGB's program rows) */
    int writes_image;  /* its runs may write one's level 0 */
    int incremental;   /* a fetch with a tile mask */
};

struct px_rt_config { /* what runs launch with for one set of textures, tables and operands */
    px_rt_config *next;
    uint64_t hash, stamp;
    uint64_t *key; /* key_n words (key_cap allocated): memcmp'd on a hash match */
    size_t key_n;
    uint64_t prog_serial; /* the program it was made for (0: none): a program of that serial has
                           * this key (same sizes and operands, so the same cached textures and
                           * tables, which live as long as a configuration that names them) */
    px_gpu_slot *d_slots; /* the device's slot table with these textures: a switch back to this
                           * configuration points ex->d_slots here and uploads nothing */
    px_gpu_fetch *d_fetch;
    unsigned *step_blocks;
    px_gpu_rect *d_clear;
    int nclear, max_clear_px;
    px_gpu_rect *d_rest; /* px_gpu_retarget's d_rest, for this configuration's program */
    int nrest, rest_px;
    px_rt_image img;     /* px_gpu_retarget's img, ... */
    px_rt_facts facts;   /* ... and facts, for this configuration's program */
    cudaGraphExec_t graph[2];
    cudaGraph_t graph_def[2];
    px_gpu_frame_nodes *frame_nodes[2];
    int have_graph[2];
    void *block; /* d_slots, d_fetch, d_clear, d_rest (and img's level 0 when made with them) in one
                  * allocation from px_gpu_retarget.pool; NULL: separate ones (the loaded program's) */
    size_t block_bytes;
};

/* What the resolutions of one any-size program (pxvm_program.resolved_from) share: they differ
 * only in the sizes of input slots and in SAMPLE/ANISO's rescaled operands (SPEC V-ANY-6; vm.h),
 * so a new configuration of one copies a sibling's records and rewrites only what those decide. */
struct px_rt_family {
    uint64_t from;       /* their resolved_from (0: none held) */
    uint32_t *fetch_at;  /* the SAMPLE and ANISO instructions, then the RESIZEs, then the
                          * fetches with a tile mask (their footprint boxes) */
    uint32_t nfetch_at, nresize_at, nbox_at;
    int reusable;        /* no input is a tile mask or has per-run reset records: what is copied
                          * below depends on no input's size */
    int have;            /* the records below were made for one of them */
    px_gpu_fetch *fetch; /* [ninsns] */
    unsigned *step_blocks;
    px_gpu_rect *clear, *rest;
    int nclear, clear_px, nrest, rest_px;
    uint8_t *facts;      /* [2 * nslots]: px_rt_facts' writes then rest */
    int touches_image, writes_image, incremental;
};

struct px_gpu_retarget {
    uint64_t bound, cached_bytes, clock, serial;
    /* Inputs' storage only grows: per input slot the textures in use (ex->gl_tex, res, arrays)
     * were made at a capacity cap_w x cap_h, cap_levels (the loaded size, or larger after a
     * switch grew them) and serve every size that fits; cap_g holds their views of every level
     * at that capacity ([item * nslots + slot]; ex->slots holds the same views with the logical
     * sizes of the size in use, and only its levels). */
    int *cap_w, *cap_h, *cap_levels; /* [nslots] */
    px_gpu_slot *cap_g;
    px_rt_tex *retired; /* textures a growth replaced: freed once the stream has drained */
    uint64_t tex_made;  /* textures (one input slot, every item) made by switches since the load */
    uint64_t configs_made; /* configurations made by switches since the load (px__config_make) */
    px_rt_resize *resize;
    /* the cached configurations, with the fields their lookups and the eviction compare held
     * here, in one array (a switch to a size never seen scans them all: by serial, by key, for
     * the oldest; through a list of records, cold in the cache after a run, that was 3 us) */
    struct {
        px_rt_config *c;
        uint64_t hash, prog_serial, stamp;
    } cached[PX_RT_CONFIGS + 2];
    int nconfigs; /* <= PX_RT_CONFIGS after a switch, + 1 while one is made */
    uint64_t *tex_serial;    /* [nslots]: the serial of each input's textures in use */
    uint64_t *resize_serial; /* [ninsns]: ... of each RESIZE's tables in use */
    size_t *lin_cap;         /* [nslots]: bytes per item of an input's linear buffers */
    px_gpu_rect *d_wipe;     /* what a switch zeroes: every level of every item's slots that are
                              * neither inputs nor persistent (level 0 of program and data slots
                              * excepted); their surfaces never change */
    int nwipe, wipe_px;
    px_gpu_rect *d_rest; /* the part of d_wipe the loaded program's per-run reset leaves: what the
                          * run after a switch clears first (the configuration in use's) */
    int nrest, rest_px;
    int wipe_pending;    /* a switch happened: d_wipe (or d_rest, by the next run) is due */
    px_rt_image img;     /* the image of the program in use */
    px_rt_facts facts;   /* what the program in use does to slots */
    /* What is known of the slots' contents, so that a switch leaves nothing to clear or copy
     * when there is nothing to: dirty[k], the parts of slot k (PXVM_RESET_*) that some run since
     * the load may have changed from zero (every part a loaded program's runs may write, kept
     * until a clear covers it); img_id, the image (px_rt_image.id) whose level 0 the program and
     * data slots hold (0: not known, e.g. a run wrote one); prog_id, the image whose slot 0
     * d_prog holds (what a run's reset restores slot 0 from); img_stale, a switch left those
     * slots holding another image than the program's: copied before a run that touches them, or
     * a read, sees them. */
    uint8_t *dirty;
    uint64_t img_id, prog_id;
    int img_stale;
    uint8_t *input_upper; /* [nslots] an input switched to cached textures: their levels >= 1 hold
                           * that size's last pyramid; zeroed by the next run unless it rebuilds them
                           * (as the CPU executor zeroes a switched input's levels >= 1) */
    uint8_t *input_level0; /* [batch][nslots] an input item switched to another size within its
                            * textures: level 0 holds the last size's image until a bind; a read
                            * before that zeroes it first (unbound, it reads as after a load) */
    int ctx_set; /* this retarget made the executor's device and GL context current (px__context) */
    uint64_t *key, *next_key; /* the configuration in use, and the one being looked up */
    size_t key_n, key_cap;
    uint64_t key_hash;
    /* the serials (pxvm_program.serial) of programs switched to since the load: each passed
     * pxvm_check_retarget against the loaded one, an equivalence, so a switch to one again skips
     * it (round robin over PX_RT_CONFIGS) */
    uint64_t checked[PX_RT_CONFIGS];
    int checked_at;
    void *block;           /* the configuration in use's block (px_rt_config.block) */
    cudaStream_t free_stream; /* the executor's own stream: blocks go back to the pool on it */
    cudaMemPool_t pool;    /* where blocks come from: stream-ordered, kept reserved (no release) */
    int have_pool;
    size_t block_bytes;    /* ... and its size */
    /* A configuration that goes (px__config_free_on) leaves its block and its record (with its
     * key's buffer) to the next new ones, rather than to the pool and the heap: a stream of sizes
     * never seen makes one and evicts one per switch (or drops all at a growth), and a family's
     * blocks are all of one size. A spare block is written next by an upload on the stream, after
     * the runs queued with the one that went (as a block freed on the stream would be given
     * again); at most PX_RT_CONFIGS of each are kept, all freed at unload. */
    void *spare_block[PX_RT_CONFIGS];
    size_t spare_bytes[PX_RT_CONFIGS];
    int nspare_block;
    px_rt_config *spare; /* linked by next; each key buffer holds key_cap words */
    int nspare;
    uint8_t *stage[2];     /* pinned host staging of a new configuration's block, used in turn ... */
    size_t stage_cap[2];
    cudaEvent_t stage_done[2]; /* ... once its last upload is done */
    int stage_turn;
    /* the family records (fam_gen: which making of rt->fam) that stage[t]'s fetch, clear and rest
     * records hold at the family's layout (0: none), but for the rescaled operands and boxes,
     * which every sibling rewrites: a sibling then copies none of them again */
    uint64_t stage_fam[2], fam_gen;
    px_rt_family fam;
    void **deferred; /* replaced linear buffers, freed at unload */
    uint8_t *deferred_host;
    int ndeferred, deferred_cap;
};

size_t px__lin_bytes(const pxvm_executor *ex, int slot)
{
    size_t now = (size_t)ex->prog->slots[slot].w * (size_t)ex->prog->slots[slot].h * 4u;
    size_t cap = ex->rt ? ex->rt->lin_cap[slot] : 0;
    return cap > now ? cap : now;
}

/* ---- entries -------------------------------------------------------------------------------- */

static void px__tex_free(px_rt_tex *t, int batch, cudaStream_t stream)
{
    for (int b = 0; t->g && b < batch; b++)
        for (int l = 0; l < t->g[b].levels; l++) {
            if (t->g[b].tex[l])
                cudaDestroyTextureObject(t->g[b].tex[l]);
            if (t->g[b].surf[l])
                cudaDestroySurfaceObject(t->g[b].surf[l]);
        }
    if (t->mapped)
        cudaGraphicsUnmapResources(batch, t->res, stream);
    for (int b = 0; t->res && b < batch; b++)
        if (t->res[b])
            cudaGraphicsUnregisterResource(t->res[b]);
    if (t->gl_tex)
        glDeleteTextures(batch, t->gl_tex);
    free(t->gl_tex);
    free(t->res);
    free(t->g);
    free(t->arrays);
    free(t);
}

static px_rt_tex *px__tex_shell(int batch)
{
    px_rt_tex *t = (px_rt_tex *)calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->gl_tex = (GLuint *)calloc((size_t)batch, sizeof(GLuint));
    t->res = (cudaGraphicsResource_t *)calloc((size_t)batch, sizeof(cudaGraphicsResource_t));
    t->g = (px_gpu_slot *)calloc((size_t)batch, sizeof(px_gpu_slot));
    t->arrays = (cudaArray_t *)calloc((size_t)batch * PXVM_MAX_LEVELS, sizeof(cudaArray_t));
    if (!t->gl_tex || !t->res || !t->g || !t->arrays) {
        free(t->gl_tex), free(t->res), free(t->g), free(t->arrays), free(t);
        return NULL;
    }
    return t;
}

/* Input slot `slot` at size s for every item, as load makes it: GL textures with the mip chain,
 * registered, mapped, texture and surface objects per level, every level zeroed (on the stream). */
static int px__tex_make(pxvm_executor *ex, int slot, const pxvm_slot *s, px_rt_tex **out, pxvm_error *err)
{
    int batch = ex->batch;
    px_rt_tex *t = *out = px__tex_shell(batch);
    if (!t)
        return pxvm_fail(err, PXE_NOMEM, -1, -1, 0ull);
    t->slot = slot, t->w = s->w, t->h = s->h, t->levels = s->levels;
    glGenTextures(batch, t->gl_tex);
    for (int b = 0; b < batch; b++)
        if (px__slot_texture(t->gl_tex[b], &t->res[b], s, slot, b, err) < 0)
            return -1;
    PX__CK(cudaGraphicsMapResources(batch, t->res, ex->stream));
    t->mapped = 1;
    px_gpu_rect rects[PXVM_MAX_LEVELS];
    for (int b = 0; b < batch; b++) {
        px_gpu_slot *g = &t->g[b];
        if (px__slot_views(t->res[b], s, g, &t->arrays[(size_t)b * PXVM_MAX_LEVELS], ex->stream, slot, err) < 0)
            return -1;
        /* zeroed as load zeroes every level; the records live until the clear has run */
        int max_px = 0;
        for (int l = 0; l < s->levels; l++) {
            rects[l].surf = g->surf[l], rects[l].w = g->w[l], rects[l].h = g->h[l], rects[l].slot = slot, rects[l].level = l;
            max_px = g->w[l] * g->h[l] > max_px ? g->w[l] * g->h[l] : max_px;
        }
        px_gpu_rect *d = NULL;
        PX__CK(cudaMallocAsync((void **)&d, sizeof(px_gpu_rect) * (size_t)s->levels, ex->stream));
        cudaError_t e = cudaMemcpyAsync(d, rects, sizeof(px_gpu_rect) * (size_t)s->levels, cudaMemcpyHostToDevice, ex->stream);
        int rc = e == cudaSuccess ? px__launch_clear(ex, d, s->levels, max_px, err)
                                  : px__cuda_fail(err, "uploading clear records", e, __FILE__, __LINE__);
        cudaFreeAsync(d, ex->stream);
        if (rc < 0)
            return -1;
    }
    return 0;
}

/* Exchanges a new storage's textures (of its slot, made at a larger capacity) with those in use
 * (table entries item * nslots + slot, their views at capacity in rt->cap_g): t then holds the
 * replaced ones, under their serial, to be freed once the stream has drained. */
static void px__tex_exchange(pxvm_executor *ex, px_rt_tex *t)
{
    px_gpu_retarget *rt = ex->rt;
    int n = ex->nslots, k = t->slot;
    for (int b = 0; b < ex->batch; b++) {
        size_t i = (size_t)b * (size_t)n + (size_t)k;
        GLuint gl = ex->gl_tex[i];
        cudaGraphicsResource_t res = ex->res[i];
        px_gpu_slot g = rt->cap_g[i];
        cudaArray_t arr[PXVM_MAX_LEVELS];
        memcpy(arr, ex->arrays + i * PXVM_MAX_LEVELS, sizeof arr);
        ex->gl_tex[i] = t->gl_tex[b], ex->res[i] = t->res[b], rt->cap_g[i] = t->g[b];
        memcpy(ex->arrays + i * PXVM_MAX_LEVELS, t->arrays + (size_t)b * PXVM_MAX_LEVELS, sizeof arr);
        t->gl_tex[b] = gl, t->res[b] = res, t->g[b] = g;
        memcpy(t->arrays + (size_t)b * PXVM_MAX_LEVELS, arr, sizeof arr);
    }
    int w = t->w, h = t->h, levels = t->levels;
    t->w = rt->cap_w[k], t->h = rt->cap_h[k], t->levels = rt->cap_levels[k], t->mapped = 1;
    rt->cap_w[k] = w, rt->cap_h[k] = h, rt->cap_levels[k] = levels;
    uint64_t serial = t->serial;
    t->serial = rt->tex_serial[k];
    rt->tex_serial[k] = serial;
}

/* The kernels' view of input slot k at size s (which fits its capacity), every item: the views
 * at capacity of levels 0 .. s->levels - 1 with that size's level sizes. Every kernel, copy and
 * clear addresses the slot through these sizes, never the texture's own, so the texels beyond
 * them are never read or written. */
static void px__logical_views(pxvm_executor *ex, int k, const pxvm_slot *s)
{
    for (int b = 0; b < ex->batch; b++) {
        size_t i = (size_t)b * (size_t)ex->nslots + (size_t)k;
        px_gpu_slot g = ex->rt->cap_g[i];
        for (int l = 0; l < PXVM_MAX_LEVELS; l++) {
            g.w[l] = l < s->levels ? px_mip_dim(s->w, l) : 0;
            g.h[l] = l < s->levels ? px_mip_dim(s->h, l) : 0;
            if (l >= s->levels)
                g.tex[l] = 0, g.surf[l] = 0;
        }
        g.levels = s->levels;
        ex->slots[i] = g;
    }
}

static void px__config_drop_graphs(px_rt_config *c)
{
    px__graphs_drop(c->graph, c->graph_def, c->frame_nodes, c->have_graph);
}

/* Does c own device memory but its block (the loaded program's tables, an image made apart)? */
static int px__config_apart(const px_rt_config *c)
{
    return !c->block || (c->img.d_level0 && !c->img.in_block);
}

/* c goes: its block to rt's spares (or back to the pool on `stream`, after what is queued there:
 * a graph in flight is freed on its completion); what it owns apart (px__config_apart) only once
 * the stream has drained (cudaFree); its record and key buffer to rt's spares (or freed). */
static void px__config_free_on(px_gpu_retarget *rt, px_rt_config *c, cudaStream_t stream)
{
    px__config_drop_graphs(c);
    free(c->facts.writes);
    if (c->block && rt->nspare_block < PX_RT_CONFIGS) {
        rt->spare_block[rt->nspare_block] = c->block, rt->spare_bytes[rt->nspare_block++] = c->block_bytes;
    } else if (c->block) {
        cudaFreeAsync(c->block, stream);
    } else {
        cudaFree(c->d_slots);
        cudaFree(c->d_rest);
        cudaFree(c->d_fetch);
        cudaFree(c->d_clear);
    }
    if (!c->img.in_block)
        cudaFree(c->img.d_level0);
    free(c->img.px);
    free(c->step_blocks);
    if (rt->nspare < PX_RT_CONFIGS) {
        c->next = rt->spare, rt->spare = c, rt->nspare++;
        return;
    }
    free(c->key);
    free(c);
}

/* (The stream has drained: nothing queued reads what goes.) */
static void px__config_free(px_gpu_retarget *rt, px_rt_config *c)
{
    px__config_free_on(rt, c, rt->free_stream);
}

/* Does configuration c use the textures or tables of serial s? (Serials sit at known places of
 * the key: px__key.) */
static int px__config_uses(const px_rt_config *c, uint64_t s)
{
    for (size_t i = 0; i < c->key_n; i++)
        if (c->key[i] == (s | (1ull << 63)))
            return 1;
    return 0;
}

/* c into the cache (it holds at most PX_RT_CONFIGS + 1 while a switch is made: px__evict brings
 * it back to PX_RT_CONFIGS at its end). */
static void px__cached_add(px_gpu_retarget *rt, px_rt_config *c)
{
    int i = rt->nconfigs++;
    rt->cached[i].c = c, rt->cached[i].hash = c->hash, rt->cached[i].prog_serial = c->prog_serial;
    rt->cached[i].stamp = c->stamp;
}

/* Cached configuration i out of the cache (the last one takes its place). */
static px_rt_config *px__cached_take(px_gpu_retarget *rt, int i)
{
    px_rt_config *c = rt->cached[i].c;
    rt->cached[i] = rt->cached[--rt->nconfigs];
    return c;
}

/* ---- the configuration key ------------------------------------------------------------------ */

static void px__family_drop(px_rt_family *f)
{
    free(f->fetch_at);
    free(f->fetch);
    free(f->step_blocks);
    free(f->clear);
    free(f->rest);
    free(f->facts);
    memset(f, 0, sizeof *f);
}

/* rt->fam for prog's any-size program (made when it holds another's, without records): 0, or -1
 * with *err. Nothing when prog is no resolution (resolved_from 0). */
static int px__family(px_gpu_retarget *rt, const pxvm_program *prog, pxvm_error *err)
{
    px_rt_family *f = &rt->fam;
    if (!prog->resolved_from || f->from == prog->resolved_from)
        return 0;
    px__family_drop(f);
    if (!(f->fetch_at = (uint32_t *)malloc(sizeof(uint32_t) * (2u * (size_t)prog->ninsns + 1u))))
        return pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)prog->ninsns * 2u * sizeof(uint32_t));
    f->reusable = 1;
    for (uint32_t i = 0; i < prog->ninsns; i++) {
        const pxi_insn *in = &prog->insns[i];
        if (in->op == PX_OP_SAMPLE || in->op == PX_OP_ANISO) {
            f->fetch_at[f->nfetch_at++] = i;
            int m = pxvm_fetch_mask(in);
            if (m && prog->slots[m].role == PXI_ROLE_INPUT) /* its record holds the mask's width */
                f->reusable = 0;
        }
    }
    for (uint32_t i = 0; i < prog->ninsns; i++)
        if (prog->insns[i].op == PX_OP_RESIZE)
            f->fetch_at[f->nfetch_at + f->nresize_at++] = i;
    for (uint32_t i = 0; i < prog->ninsns; i++) {
        const pxi_insn *in = &prog->insns[i];
        int fetch = in->op == PX_OP_SAMPLE || in->op == PX_OP_ANISO || in->op == PX_OP_GATHER;
        if (fetch && pxvm_fetch_mask(in))
            f->fetch_at[f->nfetch_at + f->nresize_at + f->nbox_at++] = i;
    }
    for (int k = 0; k < prog->nslots; k++) /* reset records hold the surfaces and sizes of what they clear */
        if (prog->slots[k].role == PXI_ROLE_INPUT && prog->reset[k])
            f->reusable = 0;
    f->from = prog->resolved_from;
    return 0;
}

#define PX_RT_FAMILY_KEY 0x7F5E1B0000000000ull /* a short key's first word: no full key's (sizes < 2^53) */

/* Sizes of the inputs, the serials of the textures and RESIZE tables in use (marked by bit 63,
 * which no size or operand word has), and every operand: what the fetch and reset records and the
 * graphs are made from. For a resolution of an any-size program, the short form: its
 * resolved_from, then the same for inputs and RESIZEs, and no operand: a resolution is a function
 * of its any-size program and its inputs' sizes (vm/resolve.c: the rescaled operands are computed
 * from the sizes alone; the rest is the any-size program's), both of which the key holds, so
 * hashing the 7 rescaled words of every fetch (most of a new size's key time) told nothing more. */
static int px__key(pxvm_executor *ex, const pxvm_program *prog, uint64_t **key, size_t *key_n, uint64_t *hash,
                   pxvm_error *err)
{
    px_gpu_retarget *rt = ex->rt;
    if (px__family(rt, prog, err) < 0)
        return -1;
    size_t need = 2u * (size_t)prog->nslots + (size_t)prog->ninsns * (1u + PXI_MAX_FIELDS + 12u) + 2u;
    if (need > rt->key_cap) {
        uint64_t *a = (uint64_t *)realloc(rt->key, sizeof(uint64_t) * need);
        if (a)
            rt->key = a;
        uint64_t *b = (uint64_t *)realloc(rt->next_key, sizeof(uint64_t) * need);
        if (b)
            rt->next_key = b;
        if (!a || !b)
            return pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)(sizeof(uint64_t) * need));
        rt->key_cap = need;
    }
    uint64_t *w = *key == NULL ? rt->next_key : *key;
    size_t n = 0;
    if (prog->resolved_from)
        w[n++] = PX_RT_FAMILY_KEY, w[n++] = prog->resolved_from & ~(1ull << 63);
    for (int k = 0; k < prog->nslots; k++)
        if (prog->slots[k].role == PXI_ROLE_INPUT) {
            const pxvm_slot *s = &prog->slots[k];
            w[n++] = (uint64_t)(uint32_t)s->w | (uint64_t)(uint32_t)s->h << 24 | (uint64_t)(uint32_t)s->levels << 48;
            w[n++] = rt->tex_serial[k] | (1ull << 63);
        }
    const px_rt_family *fam = &rt->fam;
    for (uint32_t j = 0; prog->resolved_from && j < fam->nresize_at; j++)
        w[n++] = rt->resize_serial[fam->fetch_at[fam->nfetch_at + j]] | (1ull << 63);
    for (uint32_t i = 0; !prog->resolved_from && i < prog->ninsns; i++) {
        const pxi_insn *in = &prog->insns[i];
        if (in->op == PX_OP_RESIZE)
            w[n++] = rt->resize_serial[i] | (1ull << 63);
        for (int f = 0; f < in->nfields; f++)
            w[n++] = (uint32_t)in->a[f];
        /* an incremental GATHER's box comes from its table's entries, pixels of the program
         * image that no operand names (two programs equal in operands may differ there): its
         * box too, each value as two 32-bit words (bit 63 stays the serials') */
        if (in->op == PX_OP_GATHER && pxvm_fetch_mask(in) && prog->insn_box) {
            const pxvm_fetch_box *b = &prog->insn_box[i];
            int64_t v[6] = {b->u_lo, b->u_hi, b->v_lo, b->v_hi, b->lmin, b->lmax};
            for (int j = 0; j < 6; j++)
                w[n++] = (uint32_t)(uint64_t)v[j], w[n++] = (uint32_t)((uint64_t)v[j] >> 32);
        }
    }
    uint64_t h = 0x9E3779B97F4A7C15ull;
    for (size_t i = 0; i < n; i++) {
        h ^= w[i];
        h *= 0xBF58476D1CE4E5B9ull;
        h ^= h >> 31;
    }
    *key = w, *key_n = n, *hash = h;
    return 0;
}

/* ---- the cache ------------------------------------------------------------------------------ */

static int px__image_slot(const pxvm_slot *s)
{
    return (s->role == PXI_ROLE_PROGRAM || s->role == PXI_ROLE_DATA) && !(s->flags & PXI_SLOT_PERSIST);
}

static int px__image_same(const px_rt_image *a, const pxvm_image *b)
{
    return a->px && a->w == b->w && a->h == b->h && !memcmp(a->px, b->px, (size_t)b->w * (size_t)b->h * 4u);
}

/* The bytes of level 0 of prog's program and data slots that are not persistent. */
static size_t px__image_bytes(const pxvm_program *prog)
{
    size_t total = 0;
    for (int k = 0; k < prog->nslots; k++)
        if (px__image_slot(&prog->slots[k]))
            total += (size_t)prog->slots[k].w * (size_t)prog->slots[k].h * 4u;
    return total;
}

/* *img's host part for prog (its copy of an image is freed; d_level0 NULL): the copy of prog's
 * image, and the level 0 of its program and data slots into level0 (px__image_bytes of them). */
static int px__image_fill(pxvm_executor *ex, const pxvm_program *prog, px_rt_image *img, uint8_t *level0, pxvm_error *err)
{
    free(img->px);
    memset(img, 0, sizeof *img);
    size_t ibytes = (size_t)prog->image.w * (size_t)prog->image.h * 4u;
    if (!(img->px = (uint8_t *)malloc(ibytes ? ibytes : 1)))
        return pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)ibytes);
    memcpy(img->px, prog->image.px, ibytes);
    img->w = prog->image.w, img->h = prog->image.h;
    img->serial = prog->serial;
    img->id = ++ex->rt->serial;
    size_t at = 0;
    for (int k = 0; k < prog->nslots; k++)
        if (px__image_slot(&prog->slots[k])) {
            pxvm_slot_initial(prog, k, level0 + at);
            at += (size_t)prog->slots[k].w * (size_t)prog->slots[k].h * 4u;
        }
    return 0;
}

/* *img for prog, its level 0 in its own allocation (pageable upload: staged before the call
 * returns): at the first retarget, and for a cached configuration switched to with other data. */
static int px__image_make(pxvm_executor *ex, const pxvm_program *prog, px_rt_image *img, pxvm_error *err)
{
    size_t total = px__image_bytes(prog);
    uint8_t *level0 = (uint8_t *)malloc(total ? total : 1);
    if (!level0)
        return pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)total);
    if (px__image_fill(ex, prog, img, level0, err) < 0) {
        free(level0);
        return -1;
    }
    cudaError_t e = total ? cudaMalloc(&img->d_level0, total) : cudaSuccess;
    if (e == cudaSuccess && total)
        e = cudaMemcpyAsync(img->d_level0, level0, total, cudaMemcpyHostToDevice, ex->stream);
    free(level0);
    if (e != cudaSuccess)
        return px__cuda_fail(err, "uploading the program image", e, __FILE__, __LINE__);
    return 0;
}

/* Level 0 of every program and data slot of every item from the image in use (device to
 * device, on the stream: nothing staged, nothing waited for). */
static int px__image_to_slots(pxvm_executor *ex, pxvm_error *err)
{
    px_gpu_retarget *rt = ex->rt;
    const pxvm_program *prog = ex->prog;
    size_t at = 0;
    for (int k = 0; k < prog->nslots; k++) {
        const pxvm_slot *s = &prog->slots[k];
        if (!px__image_slot(s))
            continue;
        size_t pitch = (size_t)s->w * 4u;
        for (int b = 0; b < ex->batch; b++)
            PX__CK(cudaMemcpy2DToArrayAsync(px__array(ex, b, k, 0), 0, 0, rt->img.d_level0 + at, pitch, pitch, (size_t)s->h,
                                            cudaMemcpyDeviceToDevice, ex->stream));
        at += pitch * (size_t)s->h;
    }
    rt->img_id = rt->img.id;
    rt->img_stale = 0;
    return 0;
}

/* The loaded program's facts (px_rt_facts; its rest filled by px__rest_fill): one block of
 * 2 * nslots bytes, writes then rest. Conservative: an operand naming a slot, of an opcode not
 * listed, may change every level of it. */
static int px__facts_make(const pxvm_program *prog, px_rt_facts *f, pxvm_error *err)
{
    int n = prog->nslots;
    memset(f, 0, sizeof *f);
    if (!(f->writes = (uint8_t *)calloc(2u * (size_t)n, 1)))
        return pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)(2u * (size_t)n));
    f->rest = f->writes + n;
    const unsigned all = PXVM_RESET_LEVEL0 | PXVM_RESET_UPPER;
    uint8_t touched[PXVM_MAX_SLOTS + 1] = {0};
    for (uint32_t i = 0; i < prog->ninsns; i++) {
        const pxi_insn *in = &prog->insns[i];
        const pxi_op_info *op = pxi_op(in->op);
        int dst = -1; /* the one slot it writes, level 0 only; -2: none; -1: see above */
        switch (in->op) {
        case PX_OP_HALT: dst = -2; break;
        case PX_OP_DOT_RGB: dst = 0, touched[0] = 1; break;
        case PX_OP_SAMPLE:
        case PX_OP_ANISO:
        case PX_OP_GATHER:
            dst = in->a[PX_FI(SAMPLE, dst)];
            f->incremental |= pxvm_fetch_mask(in) != 0;
            break;
        case PX_OP_RESIZE: dst = PX_ARG(in, RESIZE, dst); break;
        case PX_OP_ARGMAX: dst = -2; break; /* registers only */
        default: break;
        }
        for (int j = 0; j < in->nfields && j < op->nfields; j++) {
            enum pxi_kind kind = op->fields[j].kind;
            int v = in->a[j];
            if (kind == PXK_ROW)
                touched[0] = 1;
            if ((kind != PXK_SLOT && kind != PXK_MASK) || (kind == PXK_MASK && v == 0) || v < 0 || v >= n)
                continue;
            touched[v] = 1;
            if (dst == -1)
                f->writes[v] |= (uint8_t)all;
        }
        if (dst >= 0 && dst < n)
            f->writes[dst] |= PXVM_RESET_LEVEL0;
    }
    for (int k = 0; k < n; k++)
        if (px__image_slot(&prog->slots[k])) {
            f->touches_image |= touched[k];
            f->writes_image |= (f->writes[k] & PXVM_RESET_LEVEL0) != 0;
        }
    return 0;
}

/* The wipe records (d_wipe: every level of every slot that is neither an input nor persistent,
 * level 0 of program and data slots excepted) less what the loaded program's per-run reset
 * restores (prog->reset; px__reset_records), into rects (room for every level of every table
 * entry), their parts marked in rest: host work only. */
static void px__rest_fill(pxvm_executor *ex, px_gpu_rect *rects, int *n, int *max_px, uint8_t *rest)
{
    const pxvm_program *prog = ex->prog;
    int all = ex->nslots * ex->batch;
    /* levels >= 1 that a PYRAMID writes while the run's reset leaves them (so it rebuilds them
     * whole before anything reads them: vm/launch_plan.c) are never seen by the run: not cleared
     * (as on the CPU executor; a read before the run clears them, with d_wipe) */
    uint8_t pyramid[PXVM_MAX_SLOTS + 1] = {0};
    for (uint32_t j = 0; j < prog->ninsns; j++)
        if (prog->insns[j].op == PX_OP_PYRAMID)
            pyramid[PX_ARG(&prog->insns[j], PYRAMID, slot)] = 1;
    int keep_n = ex->nclear, keep_px = ex->max_clear_px; /* px__add_clear counts into these */
    ex->nclear = ex->max_clear_px = 0;
    for (int i = 0; i < all; i++) {
        int k = i % ex->nslots;
        const pxvm_slot *s = &prog->slots[k];
        if (s->role == PXI_ROLE_INPUT || (s->flags & PXI_SLOT_PERSIST))
            continue;
        int image = s->role == PXI_ROLE_PROGRAM || s->role == PXI_ROLE_DATA; /* level 0: the image's */
        if (!image && !(prog->reset[k] & PXVM_RESET_LEVEL0)) {
            px__add_clear(ex, rects, i, 0, 1);
            rest[k] |= PXVM_RESET_LEVEL0;
        }
        if (!(prog->reset[k] & PXVM_RESET_UPPER) && !pyramid[k] && ex->slots[i].levels > 1) {
            px__add_clear(ex, rects, i, 1, ex->slots[i].levels);
            rest[k] |= PXVM_RESET_UPPER;
        }
    }
    *n = ex->nclear, *max_px = ex->max_clear_px;
    ex->nclear = keep_n, ex->max_clear_px = keep_px;
}

static void px__rest_fill_records(pxvm_executor *ex, px_gpu_rect *rects, int *n, int *max_px, void *rest)
{
    px__rest_fill(ex, rects, n, max_px, (uint8_t *)rest);
}

/* What a switch zeroes (d_wipe: every level of every slot that is neither an input nor persistent,
 * level 0 of program and data slots excepted) into rects: host work only. */
static void px__wipe_fill(pxvm_executor *ex, px_gpu_rect *rects, int *n, int *max_px, void *arg)
{
    (void)arg;
    const pxvm_program *prog = ex->prog;
    int all = ex->nslots * ex->batch;
    int keep_n = ex->nclear, keep_px = ex->max_clear_px; /* px__add_clear counts into these */
    ex->nclear = ex->max_clear_px = 0;
    for (int i = 0; i < all; i++) {
        const pxvm_slot *s = &prog->slots[i % ex->nslots];
        if (s->role == PXI_ROLE_INPUT || (s->flags & PXI_SLOT_PERSIST))
            continue;
        px__add_clear(ex, rects, i, s->role == PXI_ROLE_PROGRAM || s->role == PXI_ROLE_DATA ? 1 : 0, ex->slots[i].levels);
    }
    *n = ex->nclear, *max_px = ex->max_clear_px;
    ex->nclear = keep_n, ex->max_clear_px = keep_px;
}

static int px__rt_open(pxvm_executor *ex, pxvm_error *err)
{
    const pxvm_program *prog = ex->prog;
    uint64_t mib = PX_RT_DEFAULT_MIB;
    const char *env = getenv("PXVM_CUDA_RETARGET_CACHE_MIB");
    if (env && *env) {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(env, &end, 10);
        if (*end || errno || env[0] == '-' || v > (1ull << 40)) {
            return pxvm_fail(err, PXE_RETARGET_CACHE_ENV, -1, -1, env);
        }
        mib = v;
    }
    px_gpu_retarget *rt = (px_gpu_retarget *)calloc(1, sizeof *rt);
    if (!rt)
        return pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)sizeof *rt);
    rt->bound = mib << 20;
    rt->free_stream = ex->own_stream;
    rt->tex_serial = (uint64_t *)calloc((size_t)prog->nslots, sizeof(uint64_t));
    rt->resize_serial = (uint64_t *)calloc(prog->ninsns ? prog->ninsns : 1, sizeof(uint64_t));
    rt->lin_cap = (size_t *)calloc((size_t)prog->nslots, sizeof(size_t));
    rt->cap_w = (int *)calloc(3u * (size_t)prog->nslots, sizeof(int));
    rt->cap_g = (px_gpu_slot *)malloc(sizeof(px_gpu_slot) * (size_t)ex->nslots * (size_t)ex->batch);
    if (rt->cap_g) /* before anything can fail: px__retarget_free puts these back into ex->slots */
        memcpy(rt->cap_g, ex->slots, sizeof(px_gpu_slot) * (size_t)ex->nslots * (size_t)ex->batch);
    ex->rt = rt, ex->rt_free = px__retarget_free;
    if (!rt->tex_serial || !rt->resize_serial || !rt->lin_cap || !rt->cap_w || !rt->cap_g)
        return pxvm_fail(err, PXE_NOMEM, -1, -1, 0ull);
    rt->cap_h = rt->cap_w + prog->nslots, rt->cap_levels = rt->cap_w + 2 * prog->nslots;
    for (int k = 0; k < prog->nslots; k++) {
        rt->tex_serial[k] = ++rt->serial; /* the loaded textures */
        if (prog->slots[k].role == PXI_ROLE_INPUT) {
            rt->lin_cap[k] = (size_t)prog->slots[k].w * (size_t)prog->slots[k].h * 4u;
            rt->cap_w[k] = prog->slots[k].w, rt->cap_h[k] = prog->slots[k].h, rt->cap_levels[k] = prog->slots[k].levels;
        }
    }
    for (uint32_t i = 0; i < prog->ninsns; i++)
        rt->resize_serial[i] = ++rt->serial;
    if (px__rect_records(ex, px__wipe_fill, NULL, &rt->d_wipe, &rt->nwipe, &rt->wipe_px, "uploading retarget records",
                         err) < 0)
        return -1;
    if (!(rt->dirty = (uint8_t *)calloc((size_t)prog->nslots, 1)) ||
        !(rt->input_upper = (uint8_t *)calloc((size_t)prog->nslots, 1)) ||
        !(rt->input_level0 = (uint8_t *)calloc((size_t)prog->nslots * (size_t)ex->batch, 1)))
        return pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)prog->nslots * (size_t)ex->batch);
    if (px__facts_make(prog, &rt->facts, err) < 0 ||
        px__rect_records(ex, px__rest_fill_records, rt->facts.rest, &rt->d_rest, &rt->nrest, &rt->rest_px,
                         "uploading retarget records", err) < 0 ||
        px__image_make(ex, prog, &rt->img, err) < 0)
        return -1;
    /* what the loaded program's runs so far may have left: load made the rest initial */
    memcpy(rt->dirty, rt->facts.writes, (size_t)prog->nslots);
    rt->img_id = rt->facts.writes_image ? 0 : rt->img.id;
    rt->prog_id = ex->d_prog ? rt->img.id : 0;
    uint64_t *key = NULL;
    if (px__key(ex, prog, &key, &rt->key_n, &rt->key_hash, err) < 0)
        return -1;
    uint64_t *t = rt->key; /* the key in use is rt->key */
    rt->key = rt->next_key;
    rt->next_key = t;
    return 0;
}

void px__retarget_free(pxvm_executor *ex)
{
    px_gpu_retarget *rt = ex->rt;
    if (!rt)
        return;
    while (rt->retired) {
        px_rt_tex *t = rt->retired;
        rt->retired = t->next;
        px__tex_free(t, ex->batch, ex->stream);
    }
    /* the inputs' views of every level at capacity, so that unload destroys them all */
    for (int i = 0; rt->cap_g && ex->prog && ex->slots && i < ex->nslots * ex->batch; i++)
        if (ex->prog->slots[i % ex->nslots].role == PXI_ROLE_INPUT)
            ex->slots[i] = rt->cap_g[i];
    while (rt->resize) {
        px_rt_resize *r = rt->resize;
        rt->resize = r->next;
        px_gpu_resize_free(r->r);
        free(r);
    }
    while (rt->nconfigs > 0)
        px__config_free(rt, px__cached_take(rt, rt->nconfigs - 1));
    while (rt->nspare_block > 0) /* (after the configurations: they leave theirs here) */
        cudaFreeAsync(rt->spare_block[--rt->nspare_block], rt->free_stream);
    while (rt->spare) {
        px_rt_config *c = rt->spare;
        rt->spare = c->next;
        free(c->key), free(c);
    }
    if (rt->block) { /* the configuration in use's tables: not unload's to free one by one */
        cudaFreeAsync(rt->block, rt->free_stream);
        ex->d_slots = NULL, ex->d_fetch = NULL, ex->d_clear = NULL;
        rt->d_rest = NULL;
        rt->block = NULL;
    }
    if (!rt->img.in_block)
        cudaFree(rt->img.d_level0);
    rt->img.d_level0 = NULL;
    if (rt->have_pool) /* its memory is released once the frees above are done */
        cudaMemPoolDestroy(rt->pool);
    for (int t = 0; t < 2; t++) {
        if (rt->stage_done[t])
            cudaEventSynchronize(rt->stage_done[t]), cudaEventDestroy(rt->stage_done[t]);
        if (rt->stage[t])
            cudaFreeHost(rt->stage[t]);
    }
    px__family_drop(&rt->fam);
    for (int i = 0; i < rt->ndeferred; i++)
        if (rt->deferred_host[i])
            cudaFreeHost(rt->deferred[i]);
        else
            cudaFree(rt->deferred[i]);
    free(rt->deferred);
    free(rt->deferred_host);
    free(rt->tex_serial);
    free(rt->resize_serial);
    free(rt->lin_cap);
    free(rt->cap_w);
    free(rt->cap_g);
    cudaFree(rt->d_wipe);
    cudaFree(rt->d_rest);
    free(rt->img.px);
    free(rt->facts.writes);
    free(rt->dirty);
    free(rt->input_upper);
    free(rt->input_level0);
    free(rt->key);
    free(rt->next_key);
    free(rt);
    ex->rt = NULL;
}

static int px__defer(px_gpu_retarget *rt, void *p, int host, pxvm_error *err)
{
    if (!p)
        return 0;
    if (rt->ndeferred == rt->deferred_cap) {
        int cap = rt->deferred_cap ? 2 * rt->deferred_cap : 16;
        void **d = (void **)realloc(rt->deferred, sizeof(void *) * (size_t)cap);
        if (d)
            rt->deferred = d;
        uint8_t *h = (uint8_t *)realloc(rt->deferred_host, (size_t)cap);
        if (h)
            rt->deferred_host = h;
        if (!d || !h)
            return pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)cap * sizeof(void *));
        rt->deferred_cap = cap;
    }
    rt->deferred[rt->ndeferred] = p;
    rt->deferred_host[rt->ndeferred++] = (uint8_t)host;
    return 0;
}

/* Cached textures and RESIZE tables beyond the bound go, least recently used first; then the
 * configurations that used them, and the oldest beyond PX_RT_CONFIGS. Freed after the stream has
 * drained (queued work may still read them). */
/* The executor's CUDA device and GL context made current for this thread, once per retarget,
 * before its first CUDA or GL call: a switch to a cached size makes none, so it makes none of
 * these either. */
static int px__context(pxvm_executor *ex, pxvm_error *err)
{
    if (ex->rt && ex->rt->ctx_set)
        return 0;
    PX__CK(cudaSetDevice(ex->device));
    px__make_current(ex);
    if (ex->rt)
        ex->rt->ctx_set = 1;
    return 0;
}

/* The cached configurations that name serial s (textures or RESIZE tables) go (the stream has
 * drained: queued work may read their records and graphs). */
static void px__drop_configs_using(px_gpu_retarget *rt, uint64_t s)
{
    for (int i = 0; i < rt->nconfigs;)
        if (px__config_uses(rt->cached[i].c, s))
            px__config_free(rt, px__cached_take(rt, i));
        else
            i++;
}

/* Textures a growth replaced go, with the configurations that name them, once the stream has
 * drained (queued work may still read them). */
/* Their serials go into gone[*ngone] (at most one per slot): the configuration in use names them
 * too, and goes when the switch has put it into the cache. */
static void px__free_retired(pxvm_executor *ex, uint64_t *gone, int *ngone)
{
    px_gpu_retarget *rt = ex->rt;
    *ngone = 0;
    if (!rt->retired)
        return;
    px__context(ex, NULL), cudaStreamSynchronize(ex->stream);
    while (rt->retired) {
        px_rt_tex *t = rt->retired;
        rt->retired = t->next;
        px__drop_configs_using(rt, t->serial);
        gone[(*ngone)++] = t->serial;
        px__tex_free(t, ex->batch, ex->stream);
    }
}

static void px__evict(pxvm_executor *ex)
{
    px_gpu_retarget *rt = ex->rt;
    int synced = 0;
    while (rt->cached_bytes > rt->bound && rt->resize) {
        px_rt_resize **orz = &rt->resize;
        for (px_rt_resize **p = &rt->resize; *p; p = &(*p)->next)
            if ((*p)->stamp < (*orz)->stamp)
                orz = p;
        if (!synced)
            px__context(ex, NULL), cudaStreamSynchronize(ex->stream), synced = 1;
        px_rt_resize *r = *orz;
        *orz = r->next;
        uint64_t serial = r->serial;
        rt->cached_bytes -= r->bytes;
        px_gpu_resize_free(r->r);
        free(r);
        px__drop_configs_using(rt, serial);
    }
    while (rt->nconfigs > PX_RT_CONFIGS) {
        int oldest = 0;
        for (int i = 1; i < rt->nconfigs; i++)
            if (rt->cached[i].stamp < rt->cached[oldest].stamp)
                oldest = i;
        px_rt_config *c = rt->cached[oldest].c;
        /* a configuration in one block goes without a wait: freed on the stream, after the runs
         * queued with it (every run is on ex->stream, ordered after a previous stream's work) */
        if (!synced && px__config_apart(c))
            px__context(ex, NULL), cudaStreamSynchronize(ex->stream), synced = 1;
        px__cached_take(rt, oldest);
        px__context(ex, NULL);
        px__config_free_on(rt, c, synced ? rt->free_stream : ex->stream);
    }
}

/* ---- a new configuration -------------------------------------------------------------------- */

static size_t px__align(size_t n)
{
    return (n + 255u) & ~(size_t)255u;
}

/* Pinned staging of at least `bytes`, not read by an upload still queued (the one before last
 * from it: normally long done). */
static int px__stage(pxvm_executor *ex, size_t bytes, uint8_t **out, pxvm_error *err)
{
    px_gpu_retarget *rt = ex->rt;
    int t = rt->stage_turn;
    if (rt->stage_done[t])
        PX__CK(cudaEventSynchronize(rt->stage_done[t]));
    else
        PX__CK(cudaEventCreateWithFlags(&rt->stage_done[t], cudaEventDisableTiming));
    if (rt->stage_cap[t] < bytes) {
        if (rt->stage[t])
            cudaFreeHost(rt->stage[t]);
        rt->stage[t] = NULL, rt->stage_cap[t] = 0, rt->stage_fam[t] = 0;
        size_t cap = bytes + bytes / 4u;
        PX__CK(cudaHostAlloc((void **)&rt->stage[t], cap, cudaHostAllocDefault));
        rt->stage_cap[t] = cap;
    }
    *out = rt->stage[t];
    return 0;
}

/* The loaded program's (ex->prog's) configuration for the slot table in use: its slot table,
 * fetch records and step blocks, reset and rest records, facts and image, staged in one pinned
 * block and uploaded with one copy into one allocation from the pool, on the stream (nothing
 * waits for it). A resolution of the any-size program whose records rt->fam holds copies them
 * and rewrites only the rescaled operands' fields (what depends on inputs' sizes is elsewhere:
 * the slot table, textures and RESIZE tables). */
static int px__config_make(pxvm_executor *ex, pxvm_error *err)
{
    px_gpu_retarget *rt = ex->rt;
    const pxvm_program *prog = ex->prog;
    int n = ex->nslots, all = n * ex->batch, total_levels = 0;
    if (px__family(rt, prog, err) < 0)
        return -1;
    px_rt_family *fam = &rt->fam;
    int sib = prog->resolved_from && fam->reusable && fam->have;
    if (!sib && px__alloc_masks(ex, err) < 0)
        return -1;
    for (int i = 0; i < all; i++)
        total_levels += ex->slots[i].levels;
    size_t slots_b = sizeof(px_gpu_slot) * (size_t)all, fetch_b = sizeof(px_gpu_fetch) * prog->ninsns;
    size_t rects_b = sizeof(px_gpu_rect) * (size_t)total_levels, img_b = px__image_bytes(prog);
    size_t bound = px__align(slots_b) + px__align(fetch_b) + 2u * px__align(rects_b) + img_b;
    uint8_t *stage = NULL;
    if (px__stage(ex, bound, &stage, err) < 0)
        return -1;
    unsigned *step_blocks = (unsigned *)malloc(sizeof(unsigned) * (prog->nsteps ? prog->nsteps : 1));
    if (!step_blocks)
        return pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)prog->nsteps * sizeof(unsigned));
    free(ex->step_blocks); /* NULL: the one in use went with its configuration */
    ex->step_blocks = step_blocks;
    size_t o_fetch = px__align(slots_b), o_clear = o_fetch + px__align(fetch_b);
    memcpy(stage, ex->slots, slots_b);
    px_gpu_fetch *fetch = (px_gpu_fetch *)(stage + o_fetch);
    px_gpu_rect *clear = (px_gpu_rect *)(stage + o_clear);
    int nclear, clear_px, nrest, rest_px;
    px_rt_facts *facts = &rt->facts;
    int staged = sib && rt->stage_fam[rt->stage_turn] == rt->fam_gen; /* the family's records are there */
    rt->stage_fam[rt->stage_turn] = 0;
    if (sib) {
        if (!staged)
            memcpy(fetch, fam->fetch, fetch_b);
        for (uint32_t j = 0; j < fam->nfetch_at; j++)
            px__fetch_rescaled(prog, fam->fetch_at[j], &fetch[fam->fetch_at[j]]);
        for (uint32_t j = fam->nfetch_at + fam->nresize_at; j < fam->nfetch_at + fam->nresize_at + fam->nbox_at; j++)
            px__fetch_box(prog, fam->fetch_at[j], &fetch[fam->fetch_at[j]]);
        memcpy(step_blocks, fam->step_blocks, sizeof(unsigned) * prog->nsteps);
        nclear = fam->nclear, clear_px = fam->clear_px;
        if (!staged)
            memcpy(clear, fam->clear, sizeof(px_gpu_rect) * (size_t)nclear);
        memset(facts, 0, sizeof *facts);
        if (!(facts->writes = (uint8_t *)malloc(2u * (size_t)n)))
            return pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)(2u * (size_t)n));
        facts->rest = facts->writes + n;
        memcpy(facts->writes, fam->facts, 2u * (size_t)n);
        facts->touches_image = fam->touches_image, facts->writes_image = fam->writes_image;
        facts->incremental = fam->incremental;
    } else {
        memset(fetch, 0, fetch_b);
        px__fetch_fill(ex, fetch, step_blocks);
        px__reset_fill(ex, clear, &nclear, &clear_px);
        if (px__facts_make(prog, facts, err) < 0)
            return -1;
    }
    size_t o_rest = o_clear + px__align(sizeof(px_gpu_rect) * (size_t)nclear);
    px_gpu_rect *rest = (px_gpu_rect *)(stage + o_rest);
    if (sib) {
        nrest = fam->nrest, rest_px = fam->rest_px;
        if (!staged)
            memcpy(rest, fam->rest, sizeof(px_gpu_rect) * (size_t)nrest);
    } else {
        px__rest_fill(ex, rest, &nrest, &rest_px, facts->rest);
    }
    size_t o_img = o_rest + px__align(sizeof(px_gpu_rect) * (size_t)nrest), size = o_img + img_b;
    if (px__image_fill(ex, prog, &rt->img, stage + o_img, err) < 0)
        return -1;
    if (!sib && prog->resolved_from && fam->reusable) { /* the family's records, for its next sizes */
        size_t cb = sizeof(px_gpu_rect) * (size_t)nclear, rb = sizeof(px_gpu_rect) * (size_t)nrest;
        fam->fetch = (px_gpu_fetch *)malloc(fetch_b ? fetch_b : 1);
        fam->step_blocks = (unsigned *)malloc(sizeof(unsigned) * (prog->nsteps ? prog->nsteps : 1));
        fam->clear = (px_gpu_rect *)malloc(cb ? cb : 1), fam->rest = (px_gpu_rect *)malloc(rb ? rb : 1);
        fam->facts = (uint8_t *)malloc(2u * (size_t)n);
        if (fam->fetch && fam->step_blocks && fam->clear && fam->rest && fam->facts) {
            memcpy(fam->fetch, fetch, fetch_b);
            memcpy(fam->step_blocks, step_blocks, sizeof(unsigned) * prog->nsteps);
            memcpy(fam->clear, clear, cb), memcpy(fam->rest, rest, rb);
            memcpy(fam->facts, facts->writes, 2u * (size_t)n);
            fam->nclear = nclear, fam->clear_px = clear_px, fam->nrest = nrest, fam->rest_px = rest_px;
            fam->touches_image = facts->touches_image, fam->writes_image = facts->writes_image;
            fam->incremental = facts->incremental;
            fam->have = 1;
            rt->fam_gen++;
        } else { /* not kept: the next size makes them again */
            free(fam->fetch), free(fam->step_blocks), free(fam->clear), free(fam->rest), free(fam->facts);
            fam->fetch = NULL, fam->step_blocks = NULL, fam->clear = fam->rest = NULL, fam->facts = NULL;
        }
    }
    if (!rt->have_pool) {
        cudaMemPoolProps props;
        memset(&props, 0, sizeof props);
        props.allocType = cudaMemAllocationTypePinned;
        props.location.type = cudaMemLocationTypeDevice;
        props.location.id = ex->device;
        PX__CK(cudaMemPoolCreate(&rt->pool, &props));
        rt->have_pool = 1;
        /* what blocks freed back keeps its reservation: the next configuration allocates from it */
        uint64_t keep = UINT64_MAX;
        PX__CK(cudaMemPoolSetAttribute(rt->pool, cudaMemPoolAttrReleaseThreshold, &keep));
    }
    if (prog->resolved_from && fam->have) /* these records are the family's (copied from them, or they from these) */
        rt->stage_fam[rt->stage_turn] = rt->fam_gen;
    uint8_t *block = NULL;
    int spare = rt->nspare_block - 1; /* the last one left: a spare of this family's size */
    if (spare >= 0 && rt->spare_bytes[spare] >= size && rt->spare_bytes[spare] <= 2u * size) {
        block = (uint8_t *)rt->spare_block[spare];
        rt->block_bytes = rt->spare_bytes[spare];
        rt->nspare_block--;
    } else {
        PX__CK(cudaMallocFromPoolAsync((void **)&block, size, rt->pool, ex->stream));
        rt->block_bytes = size;
    }
    rt->block = block; /* what the configuration in use owns from here on (unload frees it) */
    PX__CK(cudaMemcpyAsync(block, stage, size, cudaMemcpyHostToDevice, ex->stream));
    PX__CK(cudaEventRecord(rt->stage_done[rt->stage_turn], ex->stream));
    rt->stage_turn ^= 1;
    ex->d_slots = (px_gpu_slot *)block;
    ex->d_fetch = fetch_b ? (px_gpu_fetch *)(block + o_fetch) : NULL;
    ex->d_clear = nclear ? (px_gpu_rect *)(block + o_clear) : NULL;
    ex->nclear = nclear, ex->max_clear_px = clear_px;
    rt->d_rest = nrest ? (px_gpu_rect *)(block + o_rest) : NULL;
    rt->nrest = nrest, rt->rest_px = rest_px;
    rt->img.d_level0 = img_b ? block + o_img : NULL;
    rt->img.in_block = 1;
    return 0;
}

/* ---- retarget ------------------------------------------------------------------------------- */

void px__retarget_drop_graphs(pxvm_executor *ex)
{
    for (int i = 0; ex->rt && i < ex->rt->nconfigs; i++)
        px__config_drop_graphs(ex->rt->cached[i].c);
    px__graphs_drop(ex->graph, ex->graph_def, ex->frame_nodes, ex->have_graph);
}

static int px__same_size(const pxvm_slot *a, const pxvm_slot *b)
{
    return a->w == b->w && a->h == b->h && a->levels == b->levels;
}

/* Does RESIZE instruction i need other tables in `next` than in `old`? */
static int px__resize_changes(const pxvm_program *old, const pxvm_program *next, uint32_t i)
{
    const pxi_insn *a = &old->insns[i], *b = &next->insns[i];
    const pxvm_slot *sa = &old->slots[PX_ARG(a, RESIZE, src)], *sb = &next->slots[PX_ARG(b, RESIZE, src)];
    return sa->w != sb->w || sa->h != sb->h || memcmp(a->a, b->a, sizeof(int32_t) * b->nfields) != 0;
}

/* The switch itself, after the check: see the file's comment. */
static int px__switch(pxvm_executor *ex, const pxvm_program *next, pxvm_error *err)
{
    px_gpu_retarget *rt = ex->rt;
    const pxvm_program *old = ex->prog;
    int n = ex->nslots, batch = ex->batch;
    /* 1. every input whose size changes: its storage when the size fits (nothing allocated, the
     * views' sizes changed; levels >= 1 hold the last size's, zeroed before anything reads them
     * unless a run rebuilds them first, as the CPU executor does), or storage grown to hold both
     * (every level zeroed; the replaced textures freed at the end of the switch) */
    for (int k = 0; k < n; k++) {
        const pxvm_slot *s = &next->slots[k];
        if (s->role != PXI_ROLE_INPUT || px__same_size(&old->slots[k], s))
            continue;
        if (s->w <= rt->cap_w[k] && s->h <= rt->cap_h[k] && s->levels <= rt->cap_levels[k]) {
            rt->input_upper[k] = s->levels > 1;
            for (int b = 0; b < batch; b++)
                rt->input_level0[(size_t)b * (size_t)n + (size_t)k] = 1;
        } else {
            /* grown to the larger of each side (a stream of sizes settles on the largest seen);
             * level sizes are monotonic in the side (px_mip_dim), so every level of both fits */
            pxvm_slot cap = *s;
            cap.w = s->w > rt->cap_w[k] ? s->w : rt->cap_w[k];
            cap.h = s->h > rt->cap_h[k] ? s->h : rt->cap_h[k];
            cap.levels = s->levels > rt->cap_levels[k] ? s->levels : rt->cap_levels[k];
            px_rt_tex *made = NULL;
            if (px__context(ex, err) < 0 || px__tex_make(ex, k, &cap, &made, err) < 0) {
                if (made) { /* its items' clears may be queued: they finish before it goes */
                    cudaStreamSynchronize(ex->stream);
                    px__tex_free(made, batch, ex->stream);
                }
                return -1;
            }
            made->serial = ++rt->serial;
            rt->tex_made++;
            px__tex_exchange(ex, made); /* made now holds the replaced textures */
            made->next = rt->retired;
            rt->retired = made;
            rt->input_upper[k] = 0;
            for (int b = 0; b < batch; b++) /* every level of the new textures zeroed */
                rt->input_level0[(size_t)b * (size_t)n + (size_t)k] = 0;
        }
        px__logical_views(ex, k, s);
        for (int b = 0; b < batch; b++)
            ex->bound[(size_t)b * (size_t)n + (size_t)k] = 0;
        ex->frame_src[k] = NULL;
        /* 2. its linear buffers, when the next size needs more (the old ones freed at unload; a
         * captured graph holds d_staging's address: every cached graph goes) */
        size_t lin = (size_t)s->w * (size_t)s->h * 4u;
        if (lin > rt->lin_cap[k]) {
            uint8_t *d = NULL;
            if (px__context(ex, err) < 0)
                return -1;
            PX__CK(cudaMalloc(&d, lin * (size_t)batch));
            PX__CK(cudaMemsetAsync(d, 0, lin * (size_t)batch, ex->stream));
            if (px__defer(rt, ex->d_staging[k], 0, err) < 0 || px__defer(rt, ex->staging[k], 1, err) < 0) {
                cudaFree(d);
                return -1;
            }
            ex->d_staging[k] = d;
            ex->staging[k] = NULL; /* bind makes it again, px__lin_bytes large */
            for (int t = 0; ex->d_upload && t < 2; t++) {
                if (px__defer(rt, ex->d_upload[k][t], 0, err) < 0)
                    return -1;
                if (ex->d_upload[k][t])
                    cudaEventDestroy(ex->up_done[k][t]), cudaEventDestroy(ex->up_free[k][t]);
                ex->d_upload[k][t] = NULL;
                ex->up_done[k][t] = ex->up_free[k][t] = NULL;
            }
            rt->lin_cap[k] = lin;
            for (int i = 0; i < rt->nconfigs; i++)
                px__config_drop_graphs(rt->cached[i].c);
            px__graphs_drop(ex->graph, ex->graph_def, ex->frame_nodes, ex->have_graph);
        }
    }
    /* 3. RESIZE tables whose source size or operands change: cached, or made */
    for (uint32_t i = 0; ex->resize && i < next->ninsns; i++) {
        if (next->insns[i].op != PX_OP_RESIZE || !px__resize_changes(old, next, i))
            continue;
        const pxi_insn *in = &next->insns[i];
        const pxvm_slot *src = &next->slots[PX_ARG(in, RESIZE, src)];
        px_rt_resize *take = NULL;
        for (px_rt_resize **p = &rt->resize; *p; p = &(*p)->next)
            if ((*p)->insn == i && (*p)->sw == src->w && (*p)->sh == src->h && !memcmp((*p)->a, in->a, sizeof(int32_t) * in->nfields)) {
                take = *p;
                *p = take->next;
                rt->cached_bytes -= take->bytes;
                break;
            }
        /* a cached record is reused for the tables in use: a switch to cached tables allocates none */
        px_rt_resize *used = take ? take : (px_rt_resize *)calloc(1, sizeof *used);
        if (!used)
            return pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)sizeof *used);
        px_gpu_resize *r = take ? take->r : NULL;
        uint64_t take_serial = take ? take->serial : 0;
        if (!take && (px__context(ex, err) < 0 || px_gpu_resize_make(next, in, batch, ex->stream, &r, err) < 0)) {
            px_gpu_resize_free(r);
            free(used);
            return -1;
        }
        const pxi_insn *oin = &old->insns[i];
        const pxvm_slot *osrc = &old->slots[PX_ARG(oin, RESIZE, src)];
        used->insn = i, used->sw = osrc->w, used->sh = osrc->h, used->r = ex->resize[i];
        memcpy(used->a, oin->a, sizeof(int32_t) * oin->nfields);
        used->serial = rt->resize_serial[i];
        used->bytes = px_gpu_resize_bytes(used->r, batch);
        used->stamp = ++rt->clock;
        used->next = rt->resize;
        rt->resize = used;
        rt->cached_bytes += used->bytes;
        ex->resize[i] = r;
        rt->resize_serial[i] = take ? take_serial : ++rt->serial;
    }
    /* EMBED's packed weights follow the next program (its data pixels may differ); records made
     * anew leave every captured graph naming freed buffers */
    int embed_remade = 0;
    if (px__context(ex, err) < 0 || px_gpu_embed_follow(ex, next, &embed_remade, err) < 0)
        return -1;
    if (embed_remade)
        px__retarget_drop_graphs(ex);
    /* textures a growth replaced go now, with every configuration that names them: found by the
     * program's serial below, one would hold their views */
    uint64_t gone[PXVM_MAX_SLOTS + 1];
    int ngone = 0;
    px__free_retired(ex, gone, &ngone);
    /* 4. the configuration in use goes into the cache; the next one comes out of it, or is made.
     * Found by the program's serial first (O(configurations), no key made or compared) and then
     * its record is reused for the one in use (nothing allocated); else by the key (serial 0, or
     * a program not switched to before) */
    px_rt_config *found = NULL;
    for (int i = 0; next->serial && i < rt->nconfigs; i++)
        if (rt->cached[i].prog_serial == next->serial) {
            found = px__cached_take(rt, i);
            break;
        }
    px_rt_config *cur = found;
    px_rt_config saved;
    uint64_t *cur_key = NULL;
    if (found) {
        saved = *found;
        cur_key = rt->key; /* the record takes the key in use; rt->key becomes the found one */
    } else if (rt->spare) { /* a record and key buffer that went (key_cap words: every program
                             * retarget accepts has the loaded one's slot and instruction counts,
                             * so px__key's need never changes) */
        cur = rt->spare, cur_key = rt->spare->key;
        rt->spare = cur->next, rt->nspare--;
        memcpy(cur_key, rt->key, sizeof(uint64_t) * rt->key_n);
    } else {
        cur = (px_rt_config *)calloc(1, sizeof *cur);
        cur_key = (uint64_t *)malloc(sizeof(uint64_t) * (rt->key_cap ? rt->key_cap : 1));
        if (!cur || !cur_key) {
            free(cur), free(cur_key);
            return pxvm_fail(err, PXE_NOMEM, -1, -1, 0ull);
        }
        memcpy(cur_key, rt->key, sizeof(uint64_t) * rt->key_n);
    }
    memset(cur, 0, sizeof *cur);
    cur->key = cur_key, cur->key_n = rt->key_n, cur->hash = rt->key_hash, cur->stamp = ++rt->clock;
    cur->prog_serial = old->serial;
    cur->d_slots = ex->d_slots, cur->d_fetch = ex->d_fetch, cur->step_blocks = ex->step_blocks;
    cur->d_clear = ex->d_clear, cur->nclear = ex->nclear, cur->max_clear_px = ex->max_clear_px;
    cur->d_rest = rt->d_rest, cur->nrest = rt->nrest, cur->rest_px = rt->rest_px;
    rt->d_rest = NULL, rt->nrest = rt->rest_px = 0;
    cur->block = rt->block, cur->block_bytes = rt->block_bytes;
    rt->block = NULL, rt->block_bytes = 0;
    cur->img = rt->img;
    memset(&rt->img, 0, sizeof rt->img);
    cur->facts = rt->facts;
    memset(&rt->facts, 0, sizeof rt->facts);
    for (int g = 0; g < 2; g++) {
        cur->graph[g] = ex->graph[g], cur->graph_def[g] = ex->graph_def[g];
        cur->frame_nodes[g] = ex->frame_nodes[g], cur->have_graph[g] = ex->have_graph[g];
        ex->frame_nodes[g] = NULL, ex->have_graph[g] = 0;
    }
    ex->d_slots = NULL, ex->d_fetch = NULL, ex->step_blocks = NULL, ex->d_clear = NULL, ex->nclear = ex->max_clear_px = 0;
    px__cached_add(rt, cur);
    for (int i = 0; i < ngone; i++) /* the one in use named a replaced texture: it goes (the stream has drained) */
        px__drop_configs_using(rt, gone[i]);
    ex->prog = next;
    if (found) { /* its key is what px__key would make now */
        found = &saved;
        rt->key = saved.key, rt->key_n = saved.key_n, rt->key_hash = saved.hash;
    } else {
        uint64_t *key = NULL, hash;
        size_t key_n;
        if (px__key(ex, next, &key, &key_n, &hash, err) < 0)
            return -1;
        rt->next_key = rt->key; /* the key in use is rt->key */
        rt->key = key, rt->key_n = key_n, rt->key_hash = hash;
        for (int i = 0; i < rt->nconfigs; i++)
            if (rt->cached[i].hash == hash && rt->cached[i].c->key_n == key_n &&
                !memcmp(rt->cached[i].c->key, key, sizeof(uint64_t) * key_n)) {
                found = px__cached_take(rt, i);
                break;
            }
    }
    int made = 0; /* a new configuration */
    if (found) {
        ex->d_slots = found->d_slots, ex->d_fetch = found->d_fetch, ex->step_blocks = found->step_blocks;
        ex->d_clear = found->d_clear, ex->nclear = found->nclear, ex->max_clear_px = found->max_clear_px;
        rt->d_rest = found->d_rest, rt->nrest = found->nrest, rt->rest_px = found->rest_px;
        rt->block = found->block, rt->block_bytes = found->block_bytes;
        rt->img = found->img;
        rt->facts = found->facts;
        for (int g = 0; g < 2; g++) {
            ex->graph[g] = found->graph[g], ex->graph_def[g] = found->graph_def[g];
            ex->frame_nodes[g] = found->frame_nodes[g], ex->have_graph[g] = found->have_graph[g];
        }
        if (found != &saved) { /* found by its key: its record and key buffer (key_cap words) to the spares */
            if (rt->nspare < PX_RT_CONFIGS) {
                found->next = rt->spare, rt->spare = found, rt->nspare++;
            } else {
                free(found->key);
                free(found);
            }
        }
    } else {
        made = 1;
        rt->configs_made++;
        /* 5. its records, image and own device slot table, in one block (one upload, ordered
         * after the work already queued on the stream); the table of a cached configuration
         * already holds its textures (the configuration's key names them), so a switch back
         * uploads nothing and its captured graphs, which hold that table's address, stay valid */
        if (px__context(ex, err) < 0 || px__config_make(ex, err) < 0)
            return -1;
    }
    /* a new configuration's first run launches directly: a size run once never pays a capture */
    ex->capture_later = made;
    /* 6. every slot but inputs and persistent ones back to its initial state: a run restores only
     * what the next program's own runs change (prog->reset), not what the loaded one wrote (an
     * output it wrote whole, that the next one writes in part). Left pending, and done only where
     * it changes something: the next run clears what of d_rest is dirty, before its reset
     * (px__retarget_run_start), so a switch launches nothing and what the run restores anyway is
     * cleared once; a read before that run clears d_wipe (px__retarget_flush). The program image
     * holds the operands: slot 0 and the data slots start as the next one's, copied by the run
     * that reads them (or by such a read), from the image's level 0 on the device */
    rt->wipe_pending = 1;
    /* the configuration's key holds no image bytes (data slots, GATHER tables; for a resolution
     * not even the operands, which follow from its program and sizes): the image is checked here, by
     * the serial of the program it was made from when there is one (a cached configuration
     * switched back to for the same program: no comparison of the image) */
    int img_same = next->serial && rt->img.serial == next->serial;
    if (!img_same && !px__image_same(&rt->img, &next->image)) {
        if (rt->img.d_level0 && !rt->img.in_block) { /* a cached one that queued work may still read: freed at unload */
            if (px__defer(rt, rt->img.d_level0, 0, err) < 0)
                return -1;
        } /* (one in a block goes with its configuration's block) */
        rt->img.d_level0 = NULL;
        if (px__context(ex, err) < 0 || px__image_make(ex, next, &rt->img, err) < 0)
            return -1;
    }
    rt->img_stale = rt->img_id != rt->img.id;
    if (!ex->d_prog && (next->reset[0] & PXVM_RESET_LEVEL0)) {
        size_t bytes = (size_t)next->slots[0].w * 4u * (size_t)next->slots[0].h;
        if (px__context(ex, err) < 0)
            return -1;
        PX__CK(cudaMalloc(&ex->d_prog, bytes));
        rt->prog_id = 0;
    }
    /* 7. an incremental fetch whose operands (or GATHER table entries) changed has no last output
     * to build on */
    for (uint32_t i = 0; rt->facts.incremental && i < next->ninsns; i++) {
        const pxi_insn *in = &next->insns[i];
        int fetch = in->op == PX_OP_SAMPLE || in->op == PX_OP_ANISO || in->op == PX_OP_GATHER;
        if (fetch && pxvm_fetch_mask(in) && pxvm_fetch_differs(old, next, i)) {
            if (px__context(ex, err) < 0)
                return -1;
            PX__CK(cudaMemsetAsync(ex->d_primed, 0, (size_t)batch, ex->stream));
            if (ex->h_primed)
                memset(ex->h_primed, 0, (size_t)batch);
            break;
        }
    }
    ex->out_valid = 0;
    px__evict(ex);
    return 0;
}

/* Levels >= 1 of input slot k of every item zeroed (level0: level 0 instead, of the items marked
 * in it, [batch][nslots]), on the stream (records made here: a rare path, a switch with a program
 * that reads them unbuilt, or a read of an input not bound since a switch). */
static int px__clear_input(pxvm_executor *ex, int k, const uint8_t *level0, pxvm_error *err)
{
    px_gpu_rect rects[PXVM_MAX_LEVELS * 8];
    int keep_n = ex->nclear, keep_px = ex->max_clear_px; /* px__add_clear counts into these */
    int rc = 0;
    for (int b0 = 0; rc == 0 && b0 < ex->batch; b0 += 8) {
        ex->nclear = ex->max_clear_px = 0;
        for (int b = b0; b < ex->batch && b < b0 + 8; b++) {
            int i = b * ex->nslots + k;
            if (!level0)
                px__add_clear(ex, rects, i, 1, ex->slots[i].levels);
            else if (level0[i])
                px__add_clear(ex, rects, i, 0, 1);
        }
        int n = ex->nclear, px = ex->max_clear_px;
        px_gpu_rect *d = NULL;
        cudaError_t e = n ? cudaMallocAsync((void **)&d, sizeof(px_gpu_rect) * (size_t)n, ex->stream) : cudaSuccess;
        if (e == cudaSuccess && n)
            e = cudaMemcpyAsync(d, rects, sizeof(px_gpu_rect) * (size_t)n, cudaMemcpyHostToDevice, ex->stream);
        rc = e != cudaSuccess ? px__cuda_fail(err, "clearing an input's levels", e, __FILE__, __LINE__)
                              : px__launch_clear(ex, d, n, px, err);
        if (d) /* rects: pageable, staged before the copy call returned */
            cudaFreeAsync(d, ex->stream);
    }
    ex->nclear = keep_n, ex->max_clear_px = keep_px;
    return rc;
}

/* Is any part of `parts` (per slot) in `dirty`? */
static int px__any_dirty(const uint8_t *dirty, const uint8_t *parts, int n)
{
    for (int k = 0; k < n; k++)
        if (dirty[k] & parts[k])
            return 1;
    return 0;
}

int px__retarget_run_start(pxvm_executor *ex, uint64_t budget, pxvm_error *err)
{
    px_gpu_retarget *rt = ex->rt;
    if (!rt)
        return 0;
    int n = ex->nslots;
    if (rt->wipe_pending) {
        rt->wipe_pending = 0;
        if (px__any_dirty(rt->dirty, rt->facts.rest, n) && px__launch_clear(ex, rt->d_rest, rt->nrest, rt->rest_px, err) < 0)
            return -1;
        for (int k = 0; k < n; k++)
            rt->dirty[k] &= (uint8_t)~rt->facts.rest[k];
    }
    if (rt->img_stale && rt->facts.touches_image && px__image_to_slots(ex, err) < 0)
        return -1;
    for (int k = 0; k < n; k++) /* zero, unless this run rebuilds them before anything reads them */
        if (rt->input_upper[k]) {
            if (!pxvm_upper_rebuilt(ex->prog, k, budget) && px__clear_input(ex, k, NULL, err) < 0)
                return -1;
            rt->input_upper[k] = 0;
        }
    /* what a run restores slot 0 from (px__enqueue restores it whenever d_prog exists: made for a
     * program that writes slot 0, it may outlive it across switches): always the program's own */
    if (ex->d_prog && rt->prog_id != rt->img.id) {
        PX__CK(cudaMemcpyAsync(ex->d_prog, rt->img.d_level0, (size_t)ex->prog->slots[0].w * 4u * (size_t)ex->prog->slots[0].h,
                               cudaMemcpyDeviceToDevice, ex->stream));
        rt->prog_id = rt->img.id;
    }
    for (int k = 0; k < n; k++)
        rt->dirty[k] |= rt->facts.writes[k];
    if (rt->facts.writes_image)
        rt->img_id = 0;
    return 0;
}

int px__retarget_flush(pxvm_executor *ex, pxvm_error *err)
{
    px_gpu_retarget *rt = ex->rt;
    if (!rt)
        return 0;
    for (int k = 0; k < ex->nslots; k++) /* a switched input's levels >= 1 read as zero, as after a load */
        if (rt->input_upper[k]) {
            if (px__clear_input(ex, k, NULL, err) < 0)
                return -1;
            rt->input_upper[k] = 0;
        }
    size_t all = (size_t)ex->nslots * (size_t)ex->batch;
    for (size_t i = 0; i < all; i++) /* ... and its level 0 until bound (a bound item's is its image) */
        rt->input_level0[i] &= (uint8_t)!ex->bound[i];
    for (int k = 0; k < ex->nslots; k++) {
        int some = 0;
        for (int b = 0; b < ex->batch; b++)
            some |= rt->input_level0[(size_t)b * (size_t)ex->nslots + (size_t)k];
        if (!some)
            continue;
        if (px__clear_input(ex, k, rt->input_level0, err) < 0)
            return -1;
        for (int b = 0; b < ex->batch; b++)
            rt->input_level0[(size_t)b * (size_t)ex->nslots + (size_t)k] = 0;
    }
    if (rt->img_stale && px__image_to_slots(ex, err) < 0)
        return -1;
    if (!rt->wipe_pending)
        return 0;
    rt->wipe_pending = 0;
    int dirty = 0;
    for (int k = 0; k < ex->nslots; k++) {
        const pxvm_slot *s = &ex->prog->slots[k];
        if (s->role == PXI_ROLE_INPUT || (s->flags & PXI_SLOT_PERSIST))
            continue;
        dirty |= rt->dirty[k] & (px__image_slot(s) ? PXVM_RESET_UPPER : PXVM_RESET_LEVEL0 | PXVM_RESET_UPPER);
        rt->dirty[k] = 0;
    }
    if (dirty && px__launch_clear(ex, rt->d_wipe, rt->nwipe, rt->wipe_px, err) < 0)
        return -1;
    return 0;
}

/* Was a program of this serial switched to since the load (so it passed the check)? */
static int px__checked(const px_gpu_retarget *rt, uint64_t serial)
{
    for (int i = 0; rt && serial && i < PX_RT_CONFIGS; i++)
        if (rt->checked[i] == serial)
            return 1;
    return 0;
}

int px__gl_retarget(pxvm_executor *ex, const pxvm_program *next, pxvm_error *err)
{
    if (px__need_program(ex, "retarget", err) < 0)
        return -1;
    int known = next && next->serial && (next->serial == ex->prog->serial || px__checked(ex->rt, next->serial));
    if (!known && pxvm_check_retarget(ex->prog, next, err) < 0)
        return -1;
    if (ex->rt)
        ex->rt->ctx_set = 0;
    else if (px__context(ex, err) < 0 || px__rt_open(ex, err) < 0) {
        px__retarget_free(ex);
        return -1;
    } else {
        ex->rt->ctx_set = 1; /* made current above, before rt existed */
    }
    if (px__switch(ex, next, err) < 0) {
        px__context(ex, NULL);
        px__gl_unload(ex); /* part switched: nothing is left that a run could trust */
        return -1;
    }
    if (!known && next->serial) {
        ex->rt->checked[ex->rt->checked_at] = next->serial;
        ex->rt->checked_at = (ex->rt->checked_at + 1) % PX_RT_CONFIGS;
    }
    return 0;
}

extern "C" uint64_t px_gpu_retarget_textures_made(const pxvm_executor *ex)
{
    return ex && ex->rt ? ex->rt->tex_made : 0;
}

extern "C" uint64_t px_gpu_retarget_configs_made(const pxvm_executor *ex)
{
    return ex && ex->rt ? ex->rt->configs_made : 0;
}
