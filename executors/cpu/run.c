/* run.c - the CPU reference executor's runs and its ops table (pxvm_cpu_executor). Every result
 * comes from isa/px_sem.h; the executor's files only decide which pixels to compute and spread the
 * work over threads. Here: each item's plan step by step (DIFF, UPDATE and the incremental PYRAMID
 * fused per tile row), and read, read_state, fixations, dirty rectangles, restart and close. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cpu_executor.h"
#include "../registry.h"

/* ---- DIFF, UPDATE, incremental PYRAMID (video) ----------------------------------------------- */

/* DIFF, UPDATE (and the incremental PYRAMID) of the same slots in one pass over tile rows, as the
 * GPU's tile kernel fuses them per tile: a tile row's mask, its copy and its levels 1-4 depend on
 * that tile row alone, and its pixels are still in cache from one to the next (one wake-up of the
 * threads, not three). */
typedef struct {
    const pxvm_executor *ex;
    const pxi_insn *diff, *pyramid; /* pyramid may be NULL */
} px__tiles_job;

static void px__video_tile_rows(void *ctx, int ty0, int ty1)
{
    const px__tiles_job *j = ctx;
    const pxvm_executor *ex = j->ex;
    int frame = PX_ARG(j->diff, DIFF, frame), cur = PX_ARG(j->diff, DIFF, cur), mask = PX_ARG(j->diff, DIFF, mask);
    int mw = ex->prog->slots[mask].w, h = ex->prog->slots[cur].h;
    px_cpu_diff_rows(&ex->view[frame], &ex->view[cur], ex->store[mask], mw, j->diff, ex->primed[ex->item],
                     ex->rects + (size_t)ex->item * PXVM_MAX_RECTS, ex->nrects[ex->item], ty0, ty1);
    px_cpu_update_rows(&ex->view[frame], ex->store[cur], ex->store[mask], mw, ty0 * PX_TILE,
                       ty1 * PX_TILE < h ? ty1 * PX_TILE : h);
    if (j->pyramid)
        px_cpu_pyramid_tile_rows(&ex->view[cur], ex->store[mask], mw, ty0, ty1);
}

static void px__cpu_tiles(pxvm_executor *ex, uint32_t s, int n)
{
    const pxvm_program *prog = ex->prog;
    px__tiles_job job = {ex, &prog->insns[prog->steps[s].first], n == 3 ? &prog->insns[prog->steps[s + 2].first] : NULL};
    int mask = PX_ARG(job.diff, DIFF, mask);
    px_pool_for(ex->pool, prog->slots[mask].h, 1, px__video_tile_rows, &job);
    if (job.pyramid)
        px_cpu_pyramid_upper(&ex->view[PX_ARG(job.diff, DIFF, cur)], ex->store[mask], prog->slots[mask].w, ex->level_flags);
}

/* ---- run ------------------------------------------------------------------------------------ */

/* The start of every run: inputs must be bound; then what the plan marks is restored. */
static int px__cpu_reset(pxvm_executor *ex, int item, uint64_t budget, pxvm_error *err)
{
    const pxvm_program *prog = ex->prog;
    char lb[16];
    for (int k = 0; k < prog->nslots; k++) {
        const pxvm_slot *s = &prog->slots[k];
        if (s->role == PXI_ROLE_INPUT && !ex->bound[(size_t)item * (size_t)ex->nslots + (size_t)k])
            return pxvm_fail(err, PXE_UNBOUND_INPUT, -1, -1, k, pxvm_slot_label(prog, k, lb),
                             pxvm_slot_label(prog, k, lb));
        uint8_t *pending = ex->wipe_pending ? &ex->wipe_pending[(size_t)item * (size_t)ex->nslots + (size_t)k] : NULL;
        unsigned parts = prog->reset[k] | (pending ? *pending : 0u);
        if (pxvm_upper_rebuilt(prog, k, budget)) /* this run rebuilds them before anything reads them */
            parts &= ~PXVM_RESET_UPPER;          /* (a retarget's pending zeroing) */
        px_cpu_restore(ex, k, ex->store[k], parts);
        if (pending)
            *pending = 0;
    }
    return 0;
}

static double px__ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static int px__cpu_step(pxvm_executor *ex, uint32_t s, pxvm_error *err);

/* One item: the plan from the start. `trace` and `profile` are those of the run (item 0 only). */
static int px__cpu_run_item(pxvm_executor *ex, int item, const pxvm_run_options *opt, pxvm_error *err)
{
    const pxvm_program *prog = ex->prog;
    px_cpu_select(ex, item);
    uint64_t steps = 0, budget = opt ? opt->max_steps : UINT64_MAX;
    if (px__cpu_reset(ex, item, budget, err) < 0)
        return -1;
    memcpy(ex->fix, ex->fix_set + (size_t)item * PX_FIX_REGS * 2u, sizeof(int32_t) * PX_FIX_REGS * 2u);
    for (uint32_t s = 0; s < prog->nsteps; s++) {
        const pxvm_step *st = &prog->steps[s];
        const pxi_insn *first = &prog->insns[st->first];
        if (steps + st->count > budget) {
            int x, y;
            uint32_t at = st->first + (uint32_t)(budget - steps);
            pxvm_stream_xy(prog, prog->insns[at].pc, &x, &y);
            return pxvm_fail(err, PXE_TRAP_STEPS, x, y, (unsigned long long)budget, at);
        }
        /* tracing and per-step timing see every step; so does a budget that ends among them */
        int fuse = opt && (opt->trace || opt->profile) ? 0 : (int)st->tiles_fuse;
        if (fuse && steps + (uint64_t)fuse <= budget) { /* each a single instruction */
            px__cpu_tiles(ex, s, fuse);
            steps += (uint64_t)fuse;
            s += (uint32_t)fuse - 1;
            continue;
        }
        steps += st->count;
        if (opt && opt->trace)
            for (uint32_t i = 0; i < st->count; i++)
                opt->trace(opt->trace_ctx, prog, first + i);
        double t0 = opt && opt->profile ? px__ms() : 0;
        int rc = px__cpu_step(ex, s, err);
        if (opt && opt->profile)
            opt->profile(opt->profile_ctx, prog, s, px__ms() - t0);
        if (rc < 0)
            return -1;
        if (rc > 0) { /* HALT: the item has run; its dirty rectangles are used up */
            ex->primed[item] = 1;
            ex->nrects[item] = -1;
            return 0;
        }
    }
    return 0; /* unreachable for a validated program: its last instruction is HALT */
}

/* The items one after the other (each spreads over the threads): the first trap stops the run. */
static int px__cpu_run(pxvm_executor *ex, const pxvm_run_options *opt, pxvm_error *err)
{
    pxvm_run_options quiet;
    if (opt) {
        quiet = *opt;
        quiet.trace = NULL;
        quiet.profile = NULL;
    }
    for (int b = 0; b < ex->batch; b++)
        if (px__cpu_run_item(ex, b, b == 0 || !opt ? opt : &quiet, err) < 0)
            return -1;
    return 0;
}

/* Executes plan step s: 0 to go on, 1 at HALT, -1 on a trap. */
static int px__cpu_step(pxvm_executor *ex, uint32_t s, pxvm_error *err)
{
    const pxvm_program *prog = ex->prog;
    const pxvm_step *st = &prog->steps[s];
    const pxi_insn *first = &prog->insns[st->first];
    if (st->kind == PXVM_STEP_BATCH) {
        px_cpu_count_masks(ex, s);
        px_cpu_insn_job job = {ex, first};
        px_pool_for(ex->pool, (int)st->count, 1, px_cpu_batch_part, &job);
        return 0;
    }
    switch (first->op) { /* px_cpu_run_<family> of opcodes.def */
#define PX_FACTS(name, family, plan, reads, writes, upper, anysize, flags) \
    case PX_OP_##name: return px_cpu_run_##family(ex, s, err);
#include "../../isa/opcodes.def"
    default: return 0; /* unreachable: the validator admits only the table's opcodes */
    }
}

/* HALT: the run of the item ends (1). */
int px_cpu_run_halt(pxvm_executor *ex, uint32_t s, pxvm_error *err)
{
    (void)ex, (void)s, (void)err;
    return 1;
}

typedef struct {
    const pxvm_slot *s;
    const uint8_t *src;
    int src_w;
    const pxvm_view *dst;
    int item;
} px__copy_job;

static void px__copy_patches(void *ctx, int p0, int p1)
{
    const px__copy_job *j = ctx;
    pxvm_copy_out_patches(j->s, j->src_w, j->src, j->dst, j->item, p0, p1);
}

static int px__cpu_read(pxvm_executor *ex, int slot, int level, int item0, const pxvm_view *dst, int patches,
                        pxvm_error *err)
{
    if (pxvm_check_read_view(ex->prog, ex->batch, slot, level, item0, dst, patches, err) < 0)
        return -1;
    if (dst->device >= 0)
        return pxvm_fail(err, PXE_HOST_ONLY_WRITE, -1, -1, "output");
    px_cpu_wipe_flush(ex); /* a read between a retarget and a run sees the initial state */
    for (int i = 0; i < dst->items; i++) {
        const px_cpu_src *v = &ex->all_view[(size_t)(item0 + i) * (size_t)ex->nslots + (size_t)slot];
        if (patches) { /* spread over the threads: a frame's patches are read after every run */
            px__copy_job job = {&ex->prog->slots[slot], v->level[level], v->w[level], dst, i};
            px_pool_for(ex->pool, ex->prog->slots[slot].patch_count, 32, px__copy_patches, &job);
        } else {
            pxvm_copy_out(&ex->prog->slots[slot], v->w[level], v->h[level], v->level[level], dst, i, patches);
        }
    }
    return 0;
}

static int px__cpu_set_fixations(pxvm_executor *ex, int item0, int items, int reg0, int nregs, const int32_t *xy,
                                 int device, pxvm_error *err)
{
    if (pxvm_check_fixations(ex->prog, ex->batch, item0, items, reg0, nregs, xy, err) < 0)
        return -1;
    if (device >= 0)
        return pxvm_fail(err, PXE_HOST_ONLY_READ, -1, -1, "fixations");
    for (int i = 0; i < items; i++)
        memcpy(ex->fix_set + ((size_t)(item0 + i) * PX_FIX_REGS + (size_t)reg0) * 2u, xy + (size_t)i * (size_t)nregs * 2u,
               sizeof(int32_t) * 2u * (size_t)nregs);
    return 0;
}

static int px__cpu_set_dirty(pxvm_executor *ex, int item, const pxvm_rect *rects, int n, pxvm_error *err)
{
    if (pxvm_check_dirty(ex->prog, ex->batch, item, rects, n, err) < 0)
        return -1;
    if (n)
        memcpy(ex->rects + (size_t)item * PXVM_MAX_RECTS, rects, sizeof(pxvm_rect) * (size_t)n);
    ex->nrects[item] = n;
    return 0;
}

static int px__cpu_restart(pxvm_executor *ex, pxvm_error *err)
{
    (void)err;
    const pxvm_program *prog = ex->prog;
    for (int b = 0; b < ex->batch; b++) {
        ex->primed[b] = 0;
        ex->nrects[b] = -1;
        for (int k = 0; k < prog->nslots; k++) {
            const pxvm_slot *s = &prog->slots[k];
            if (!(s->flags & PXI_SLOT_PERSIST))
                continue;
            uint8_t *st = ex->all_store[(size_t)b * (size_t)prog->nslots + (size_t)k];
            memset(st, 0, (size_t)s->bytes);
            pxvm_slot_initial(prog, k, st);
        }
    }
    return 0;
}

static int px__cpu_read_state(pxvm_executor *ex, int what, int slot, int item0, int items, void *dst, int device,
                              pxvm_error *err)
{
    if (pxvm_check_state(ex->prog, ex->batch, what, slot, item0, items, dst, err) < 0)
        return -1;
    if (device >= 0)
        return pxvm_fail(err, PXE_HOST_ONLY_WRITE, -1, -1, "output");
    size_t n = pxvm_state_ints(ex->prog, what), part = n, at = 0, e = pxvm_state_elem(what);
    const uint8_t *src = what == PXVM_STATE_FIXATIONS  ? (const uint8_t *)ex->fix_all
                         : what == PXVM_STATE_GEOMETRY ? (const uint8_t *)ex->geom_all
                                                       : ex->changed_all;
    if (what != PXVM_STATE_FIXATIONS) {
        size_t per = what == PXVM_STATE_GEOMETRY ? PX_GEOM_INTS : 1;
        part = (size_t)ex->prog->slots[slot].patch_count * per;
        at = (size_t)ex->prog->geom_base[slot] * per;
    }
    for (int i = 0; i < items; i++)
        memcpy((uint8_t *)dst + (size_t)i * part * e, src + ((size_t)(item0 + i) * n + at) * e, e * part);
    return 0;
}

static void px__cpu_close(pxvm_executor *ex)
{
    if (!ex)
        return;
    if (ex->prog)
        px_cpu_unload(ex);
    px_pool_destroy(ex->pool);
    free(ex->scratch);
    free(ex);
}

const pxvm_executor_ops pxvm_cpu_executor = {
    "cpu", px_cpu_open, px_cpu_load, px_cpu_bind, px_cpu_borrow, px_cpu_release, px__cpu_run, px__cpu_read, NULL, NULL, px__cpu_close,
    px__cpu_set_fixations, px__cpu_read_state, px__cpu_set_dirty, px__cpu_restart, px_cpu_read_tokens,
        px_cpu_retarget, px_cpu_ragged, px_cpu_scratch,
    0, /* device_views: host memory only */
    NULL, /* fuse_embed: the atlas is written (the runner refuses its reads on both executors) */
};
