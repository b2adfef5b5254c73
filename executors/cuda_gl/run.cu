/* run.cu - the CUDA-GL executor's runs: the plan enqueued on one stream (or captured once into a
 * graph and replayed), traps read back, outputs downloaded; reads, fixations, dirty rectangles,
 * restart, the stream, close, and the executor's table of operations (ops). One file (about 700
 * lines) because every op but load, bind and retarget ends here and shares the run's helpers. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "executor.cuh"

/* ---- kernels -------------------------------------------------------------------------------- */

/* An atlas slot's patches of items item0.. into linear device memory (patch p's rows back to back,
 * patches back to back, items item_stride bytes apart): block (p, item). */
__global__ void px__k_patches(const px_gpu_slot *slots, int nslots, int slot, int item0, int cols, int pw, int ph,
                              uint8_t *dst, long long row_stride, long long item_stride)
{
    int p = blockIdx.x, item = blockIdx.y;
    cudaTextureObject_t t = slots[(size_t)(item0 + item) * (size_t)nslots + (size_t)slot].tex[0];
    int tx = (p % cols) * pw, ty = (p / cols) * ph;
    uint8_t *out = dst + (long long)item * item_stride + (long long)p * ph * row_stride;
    for (int i = threadIdx.x; i < pw * ph; i += blockDim.x) {
        int x = i % pw, y = i / pw;
        *(uint32_t *)(out + (long long)y * row_stride + 4LL * x) = px__texel(t, tx + x, ty + y);
    }
}

/* Level `level` of a slot of items item0.. into rows of dst (4-byte aligned: data, row_stride,
 * item_stride), blockIdx.y the item: 4 texels per 16-byte surface load (a whole group inside the
 * row; the row's last texels one by one), stored 16 bytes at once where dst is 16-byte aligned.
 * One launch for every item: a copy per item from its array took 74 us for 32 items of 384 x 273
 * texels on an H200, the kernel about a fifth (tests/bench/results/embed-floor-h200.md). */
__global__ void px__k_read_level(const px_gpu_slot *slots, int nslots, int slot, int level, int item0, uint8_t *dst,
                                 long long row_stride, long long item_stride, int wide)
{
    const px_gpu_slot *g = &slots[(size_t)(item0 + (int)blockIdx.y) * (size_t)nslots + (size_t)slot];
    cudaSurfaceObject_t s = g->surf[level];
    int w = g->w[level], h = g->h[level], groups = (w + 3) / 4;
    uint8_t *out = dst + (long long)blockIdx.y * item_stride;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < groups * h; i += gridDim.x * blockDim.x) {
        int y = i / groups, x = 4 * (i % groups);
        uint8_t *o = out + (long long)y * row_stride + 4LL * x;
        if (x + 4 <= w) {
            uint4 v = surf2Dread<uint4>(s, x * 4, y);
            if (wide) {
                *(uint4 *)o = v;
            } else {
                uint32_t *o4 = (uint32_t *)o;
                o4[0] = v.x, o4[1] = v.y, o4[2] = v.z, o4[3] = v.w;
            }
        } else {
            for (int k = x; k < w; k++)
                *(uint32_t *)(o + 4 * (k - x)) = surf2Dread<uint32_t>(s, k * 4, y);
        }
    }
}

/* Profiling only: keeps the GPU busy while the host enqueues a run, so that the steps then run
 * back to back and their event times hold no host launch gaps. */
__global__ void px__k_spin(long long ns)
{
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    while ((long long)(t - t0) < ns);
}

/* Fixation registers set by the host: a copy-engine transfer between two graph launches costs a
 * switch of engines (measured: +27 us a frame on an H100), a small kernel costs none. Values
 * come from device memory, or, for up to PX_FIX_ARG_PAIRS pairs, as kernel arguments. */
#define PX_FIX_ARG_PAIRS 256
struct px_fix_args {
    int32_t v[2 * PX_FIX_ARG_PAIRS];
};

__global__ void px__k_set_fix(int32_t *dst, const int32_t *src, px_fix_args args, int item0, int items, int reg0,
                              int nregs)
{
    for (int p = blockIdx.x * blockDim.x + threadIdx.x; p < items * nregs * 2; p += gridDim.x * blockDim.x) {
        int item = p / (nregs * 2), r = (p / 2) % nregs, c = p & 1;
        dst[((size_t)(item0 + item) * PX_FIX_REGS + (size_t)(reg0 + r)) * 2u + (size_t)c] = src ? src[p] : args.v[p];
    }
}

/* Where a frame-only input's level 0 is: a borrowed frame, or its linear upload buffer. */
static const uint8_t *px__frame_src(const pxvm_executor *ex, int slot)
{
    return ex->frame_src[slot] ? ex->frame_src[slot] : ex->d_staging[slot];
}

/* The tile kernel's state for mask `mask` (frame: the DIFF/UPDATE frame slot, or -1). An input's
 * level 0 is also in its linear upload buffer (a frame-only input's only there). */
static px_gpu_tiles_state px__tiles_state(const pxvm_executor *ex, int frame, int mask)
{
    const pxvm_slot *m = &ex->prog->slots[mask];
    px_gpu_tiles_state st;
    st.primed = ex->d_primed, st.dirty = ex->d_dirty;
    st.frame_lin = frame >= 0 && ex->prog->slots[frame].role == PXI_ROLE_INPUT ? (const uint32_t *)px__frame_src(ex, frame) : NULL;
    st.bits = ex->d_bits[mask], st.sync = ex->d_sync[mask], st.maps = ex->d_dmap[mask];
    st.maps_item = px_gpu_tiles_scratch(m->w, m->h);
    return st;
}

/* ---- the executor's dispatch: one launch function per family of opcodes.def ------------------ */
/* Each enqueues plan step c->si (its first instruction c->in) for every item: 0 to go on, 1 at
 * HALT, -1 with *err set. */

int px_gl_run_halt(px_gl_step *c, pxvm_error *err)
{
    if (c->events)
        PX__CK(cudaEventRecord(c->events[c->si + 1], c->ex->stream));
    return 1;
}

int px_gl_run_pyramid(px_gl_step *c, pxvm_error *err)
{
    pxvm_executor *ex = c->ex;
    const pxvm_program *prog = ex->prog;
    const pxi_insn *in = c->in;
    if (PX_ARG(in, PYRAMID, mask)) {
        px_gpu_tiles_state ts = px__tiles_state(ex, -1, PX_ARG(in, PYRAMID, mask));
        PX__CK(px_gpu_tiles(ex->d_slots, ex->nslots, prog, NULL, NULL, in, (int)c->items, &ts, ex->stream, c->early,
                            c->after_groups));
        c->fresh[PX_ARG(in, PYRAMID, mask)] = 1;
        return 0;
    }
    int k = PX_ARG(in, PYRAMID, slot);
    PX__CK(px_gpu_pyramid(ex->d_slots, ex->nslots, &ex->slots[k], k, (const uint32_t *)ex->d_staging[k], ex->d_counter,
                          (int)c->items, ex->stream));
    return 0;
}

int px_gl_run_fetch(px_gl_step *c, pxvm_error *err)
{
    pxvm_executor *ex = c->ex;
    const pxvm_program *prog = ex->prog;
    const pxvm_step *st = &prog->steps[c->si];
    uint8_t *fresh = c->fresh;
    int groups_before = c->groups_before;
    dim3 grid(st->count, ex->step_blocks[c->si], c->items);
    px_gpu_video vid = {ex->d_primed, ex->d_last_reg, ex->d_changed, (int)prog->ninsns};
    { /* the row bitmaps of the masks this step's incremental instructions read */
        int done[8], nd = 0;
        for (uint32_t i = st->first; i < st->first + st->count; i++) {
            int m = pxvm_fetch_mask(&prog->insns[i]), seen = 0;
            for (int d = 0; d < nd; d++)
                seen |= done[d] == m;
            if (!m || seen || fresh[m])
                continue;
            PX__CK(px_gpu_mask_bits(ex->d_slots, ex->nslots, m, prog->slots[m].w, prog->slots[m].h, ex->d_bits[m],
                                    (int)c->items, ex->stream));
            groups_before = 0;
            fresh[m] = 1;
            if (nd < 8)
                done[nd++] = m;
        }
        for (uint32_t i = st->first; i < st->first + st->count; i++)
            fresh[prog->insns[i].a[PX_FI(SAMPLE, dst)]] = 0;
    }
    /* right after the group kernel: started early, it decides while the levels 5.. are built
     * (its decision reads the tile kernel's output only: px__k_fetch, px__k_groups) */
    PX__CK(px_gpu_fetch_step(ex->d_slots, ex->nslots, ex->d_fetch + st->first, grid, ex->d_fix_run, ex->d_geom,
                             (int)prog->ngeom, vid, ex->d_fuse, ex->stream, groups_before && c->early));
    return 0;
}

int px_gl_run_video(px_gl_step *c, pxvm_error *err)
{
    pxvm_executor *ex = c->ex;
    const pxi_insn *in = c->in;
    int diff = pxi_facts(in->op)->plan == PXP_DIFF, mask = in->a[PX_FI(DIFF, mask)];
    px_gpu_tiles_state ts = px__tiles_state(ex, in->a[PX_FI(DIFF, frame)], mask);
    PX__CK(px_gpu_tiles(ex->d_slots, ex->nslots, ex->prog, diff ? in : NULL, diff ? NULL : in, NULL, (int)c->items, &ts,
                        ex->stream, c->early, c->after_groups));
    c->fresh[mask] = 1; /* the kernel writes every bit of the mask's bitmaps */
    c->fresh[in->a[PX_FI(DIFF, cur)]] = 0;
    return 0;
}

int px_gl_run_saliency(px_gl_step *c, pxvm_error *err)
{
    pxvm_executor *ex = c->ex;
    const pxvm_slot *d = &ex->prog->slots[PX_ARG(c->in, SALIENCY, dst)];
    c->fresh[PX_ARG(c->in, SALIENCY, dst)] = 0;
    PX__CK(px_gpu_saliency(ex->d_slots, ex->nslots, c->in, d->w, d->h, (int)c->items, ex->stream));
    return 0;
}

int px_gl_run_resize(px_gl_step *c, pxvm_error *err)
{
    pxvm_executor *ex = c->ex;
    c->fresh[PX_ARG(c->in, RESIZE, dst)] = 0;
    uint32_t first = ex->prog->steps[c->si].first;
    PX__CK(px_gpu_resize_run(ex->d_slots, ex->nslots, ex->resize[first], (int)c->items, ex->stream));
    return 0;
}

int px_gl_run_argmax(px_gl_step *c, pxvm_error *err)
{
    pxvm_executor *ex = c->ex;
    PX__CK(px_gpu_argmax(ex->d_slots, ex->nslots, c->in, ex->d_fix_run, (int)c->items, ex->stream));
    return 0;
}

int px_gl_run_dot(px_gl_step *c, pxvm_error *err)
{
    pxvm_executor *ex = c->ex;
    c->fresh[0] = 0;
    uint32_t first = ex->prog->steps[c->si].first;
    PX__CK(px_gpu_dot(ex->d_slots, ex->nslots, c->in, first, ex->d_status, (int)c->items, ex->stream));
    return 0;
}

/* Enqueues the plan's steps [0, nsteps) with no synchronisation; with `events` (nsteps + 1 of
 * them), event s is recorded before step s and event s+1 after it. Every launch covers all items. */
static int px__enqueue(pxvm_executor *ex, uint32_t nsteps, const pxvm_run_options *opt, cudaEvent_t *events,
                       pxvm_error *err)
{
    const pxvm_program *prog = ex->prog;
    unsigned items = (unsigned)ex->batch;
    if (ex->has_dot) /* only DOT_RGB traps; otherwise the status stays as loaded (no trap) */
        PX__CK(cudaMemsetAsync(ex->d_status, 0xFF, sizeof(px_gpu_status) * items, ex->stream));
    if (ex->d_fix_run != ex->d_fix_set) /* ARGMAX writes registers: each run starts from the set ones */
        PX__CK(cudaMemcpyAsync(ex->d_fix_run, ex->d_fix_set, sizeof(int32_t) * PX_FIX_REGS * 2u * items,
                               cudaMemcpyDeviceToDevice, ex->stream));
    if (ex->d_prog) {
        const pxvm_slot *s = &prog->slots[0];
        size_t pitch = (size_t)s->w * 4u;
        for (int b = 0; b < ex->batch; b++)
            PX__CK(cudaMemcpy2DToArrayAsync(px__array(ex, b, 0, 0), 0, 0, ex->d_prog, pitch, pitch, (size_t)s->h,
                                            cudaMemcpyDeviceToDevice, ex->stream));
    }
    if (px__launch_reset(ex, err) < 0 || px_gpu_embed_fused_clear(ex, err) < 0)
        return -1;
    /* masks whose row bitmaps hold their current level 0 (cleared when the slot is written) */
    uint8_t fresh[PXVM_MAX_SLOTS + 1];
    memset(fresh, 0, sizeof fresh);
    int fuse = !opt || (!opt->trace && !opt->profile); /* per-step timing and tracing see every step */
    int after_groups = 0; /* the last launch was the tile kernels' group kernel */
    int early = ex->capturing; /* launches overlap (programmatic dependent launch) in captured graphs only */
    for (uint32_t si = 0; si < nsteps; si++) {
        const pxvm_step *st = &prog->steps[si];
        const pxi_insn *in = &prog->insns[st->first];
        int groups_before = after_groups;
        after_groups = 0;
        /* DIFF, UPDATE (, PYRAMID cur) in one launch (the plan's tiles_fuse; as many as the budget runs) */
        uint32_t n = st->tiles_fuse < nsteps - si ? st->tiles_fuse : nsteps - si;
        if (fuse && n >= 2) {
            const pxi_insn *u = &prog->insns[prog->steps[si + 1].first];
            const pxi_insn *py = n == 3 ? &prog->insns[prog->steps[si + 2].first] : NULL;
            int frame = PX_ARG(in, DIFF, frame), cur = PX_ARG(in, DIFF, cur), mask = PX_ARG(in, DIFF, mask);
            px_gpu_tiles_state ts = px__tiles_state(ex, frame, mask);
            PX__CK(px_gpu_tiles(ex->d_slots, ex->nslots, prog, in, u, py, (int)items, &ts, ex->stream, early, &after_groups));
            fresh[mask] = 1;
            fresh[cur] = 0;
            si += n - 1;
            continue;
        }
        if (opt && opt->trace)
            for (uint32_t i = 0; i < st->count; i++)
                opt->trace(opt->trace_ctx, prog, in + i);
        if (events)
            PX__CK(cudaEventRecord(events[si], ex->stream));
        px_gl_step c = {ex, si, in, items, events, fresh, groups_before, &after_groups, early};
        int rc = 0;
        switch (in->op) { /* px_gl_run_<family> of opcodes.def */
#define PX_FACTS(name, family, plan, reads, writes, upper, anysize, flags) \
    case PX_OP_##name: rc = px_gl_run_##family(&c, err); break;
#include "../../isa/opcodes.def"
        default: break; /* the validator admits no other opcode */
        }
        if (rc < 0)
            return -1;
        if (rc > 0) /* HALT: the video bookkeeping follows the run when needed (px__gl_run) */
            return 0;
        PX__CK(cudaGetLastError());
        if (events)
            PX__CK(cudaEventRecord(events[si + 1], ex->stream));
    }
    return 0;
}

/* Downloads level 0 of every output slot of every item into its pinned buffer, after the steps:
 * for a synchronous run, outputs are downloaded once, at its end, and host reads only copy memory. */
static int px__enqueue_outputs(pxvm_executor *ex, pxvm_error *err)
{
    const pxvm_program *prog = ex->prog;
    for (int k = 0; k < prog->nslots; k++)
        if (ex->h_out[k]) {
            size_t pitch = (size_t)prog->slots[k].w * 4u, bytes = pitch * (size_t)prog->slots[k].h;
            for (int b = 0; b < ex->batch; b++)
                PX__CK(cudaMemcpy2DFromArrayAsync(ex->h_out[k] + bytes * (size_t)b, pitch, px__array(ex, b, k, 0), 0, 0,
                                                  pitch, (size_t)prog->slots[k].h, cudaMemcpyDeviceToHost, ex->stream));
        }
    return 0;
}

/* Captures the plan's first nsteps steps into graph g, with (g = 1) or without (0) the output
 * downloads. The captured graph is kept: its tile-kernel nodes are pointed at borrowed frames. */
static int px__capture(pxvm_executor *ex, uint32_t nsteps, int g, pxvm_error *err)
{
    cudaGraph_t graph;
    cudaStream_t work = ex->stream; /* captured on our own stream: a caller's may be fed by other threads */
    ex->stream = ex->own_stream;
    cudaError_t e = cudaStreamBeginCapture(ex->stream, cudaStreamCaptureModeThreadLocal);
    ex->capturing = 1;
    int rc = e == cudaSuccess ? px__enqueue(ex, nsteps, NULL, NULL, err)
                              : px__cuda_fail(err, "cudaStreamBeginCapture", e, __FILE__, __LINE__);
    ex->capturing = 0;
    if (rc == 0 && g)
        rc = px__enqueue_outputs(ex, err);
    if (e == cudaSuccess)
        e = cudaStreamEndCapture(ex->stream, &graph);
    ex->stream = work;
    if (e == cudaSuccess && rc < 0)
        cudaGraphDestroy(graph);
    if (rc < 0)
        return -1;
    if (e != cudaSuccess)
        return px__cuda_fail(err, "cudaStreamEndCapture", e, __FILE__, __LINE__);
    e = cudaGraphInstantiate(&ex->graph[g], graph, 0);
    if (e != cudaSuccess) {
        cudaGraphDestroy(graph);
        return px__cuda_fail(err, "cudaGraphInstantiate", e, __FILE__, __LINE__);
    }
    if ((e = px_gpu_frame_nodes_find(graph, &ex->frame_nodes[g])) != cudaSuccess) {
        cudaGraphExecDestroy(ex->graph[g]);
        cudaGraphDestroy(graph);
        return px__cuda_fail(err, "finding the graph's tile kernels", e, __FILE__, __LINE__);
    }
    ex->graph_def[g] = graph;
    ex->have_graph[g] = 1;
    return 0;
}

/* The first trap of the run, in item order (the CPU executor runs the items in that order). */
static int px__check_traps(pxvm_executor *ex, pxvm_error *err)
{
    for (int b = 0; b < ex->batch; b++)
        if (ex->h_status[b].trap_insn != 0xFFFFFFFFu) {
            int x, y;
            uint32_t i = ex->h_status[b].trap_insn;
            pxvm_stream_xy(ex->prog, ex->prog->insns[i].pc, &x, &y);
            return pxvm_fail(err, PXE_TRAP_DOT_OVERFLOW, x, y, i, (unsigned long)ex->h_status[b].trap_sum);
        }
    return 0;
}

static int px__gl_run(pxvm_executor *ex, const pxvm_run_options *opt, pxvm_error *err)
{
    if (px__need_program(ex, "run", err) < 0)
        return -1;
    const pxvm_program *prog = ex->prog;
    char lb[16];
    for (int i = 0; i < ex->nslots * ex->batch; i++) {
        int k = i % ex->nslots;
        if (prog->slots[k].role == PXI_ROLE_INPUT && !ex->bound[i])
            return pxvm_fail(err, PXE_UNBOUND_INPUT, -1, -1, k, pxvm_slot_label(prog, k, lb),
                             pxvm_slot_label(prog, k, lb));
    }
    PX__CK(cudaSetDevice(ex->device));
    /* the step budget is known before anything runs: execute the steps that fit, exactly as the
     * CPU executor does, and report the budget trap after any earlier trap */
    uint64_t budget = opt ? opt->max_steps : UINT64_MAX, steps = 0;
    uint32_t nsteps = 0, budget_trap = UINT32_MAX;
    for (; nsteps < prog->nsteps; nsteps++) {
        const pxvm_step *st = &prog->steps[nsteps];
        if (steps + st->count > budget) {
            budget_trap = st->first + (uint32_t)(budget - steps);
            break;
        }
        steps += st->count;
        if (pxi_facts(prog->insns[st->first].op)->plan == PXP_HALT) {
            nsteps++;
            break;
        }
    }
    int full = budget_trap == UINT32_MAX;
    /* a video run that completes leaves every item primed and its rectangles used up: the host
     * knows when that changes anything (the first run after load or restart, a run with
     * rectangles), so the steady state's graph holds no bookkeeping launch */
    int video_end = 0;
    for (int b = 0; full && prog->uses_video && b < ex->batch; b++)
        video_end |= !ex->h_primed || !ex->h_primed[b] || (ex->h_nrects && ex->h_nrects[b] >= 0);
    for (int b = 0; ex->h_nrects && b < ex->batch; b++) /* this run uses the rectangles up */
        ex->h_nrects[b] = -1;
    if (full && !ex->h_primed)
        ex->h_primed = (uint8_t *)calloc((size_t)ex->batch, 1);
    if (full && ex->h_primed) /* as the device's px__k_video_end will leave it */
        memset(ex->h_primed, 1, (size_t)ex->batch);
    /* with a caller's stream the run is asynchronous and leaves outputs on the device, unless a
     * trap must be read back first */
    int async = ex->user_stream && full && !ex->has_dot && !(opt && (opt->trace || opt->profile));
    ex->out_valid = 0;
    cudaEvent_t *events = NULL;
    if (opt && opt->profile) {
        events = (cudaEvent_t *)calloc(nsteps + 1, sizeof(cudaEvent_t));
        if (!events)
            return pxvm_fail(err, PXE_NOMEM, -1, -1, 0ull);
        for (uint32_t i = 0; i <= nsteps; i++)
            PX__CK(cudaEventCreate(&events[i]));
    }
    if (full && !(opt && (opt->trace || opt->profile))) {
        int g = async ? 0 : 1;
        if (!ex->have_graph[g] && ex->capture_later) {
            /* the first run of a configuration a retarget made: the same launches, enqueued
             * directly (no capture, no instantiation); its next run captures */
            ex->capture_later = 0;
            if (px__retarget_run_start(ex, budget, err) < 0 || px__enqueue(ex, nsteps, NULL, NULL, err) < 0 ||
                (g && px__enqueue_outputs(ex, err) < 0))
                return -1;
        } else {
            if (!ex->have_graph[g] && px__capture(ex, nsteps, g, err) < 0) /* captured once, then replayed */
                return -1;
            if (px__retarget_run_start(ex, budget, err) < 0) /* after the capture: never part of a graph */
                return -1;
            /* a borrowed frame moves from run to run: the graph's tile kernels are pointed at it (a
             * parameter update on the host; the GPU sees nothing but the new address) */
            for (int k = 0; k < ex->nslots; k++)
                if (ex->prog->frame_only[k])
                    PX__CK(px_gpu_frame_nodes_point(ex->frame_nodes[g], ex->graph[g], k, (const uint32_t *)px__frame_src(ex, k)));
            PX__CK(cudaGraphLaunch(ex->graph[g], ex->stream));
        }
    } else {
        if (px__retarget_run_start(ex, budget, err) < 0) {
            free(events);
            return -1;
        }
        if (events && !opt->trace)
            px__k_spin<<<1, 1, 0, ex->stream>>>(100000 + 10000 * (long long)nsteps);
        if (px__enqueue(ex, nsteps, opt, events, err) < 0 || px__enqueue_outputs(ex, err) < 0) {
            free(events);
            return -1;
        }
    }
    if (video_end) {
        px__video_end(ex);
        PX__CK(cudaGetLastError());
    }
    if (async)
        return px__join_out(ex, err);
    PX__CK(cudaMemcpyAsync(ex->h_status, ex->d_status, sizeof(px_gpu_status) * (size_t)ex->batch,
                           cudaMemcpyDeviceToHost, ex->stream));
    PX__CK(cudaStreamSynchronize(ex->stream));
    if (events) {
        for (uint32_t i = 0; i < nsteps; i++) {
            float ms = 0;
            cudaError_t e = cudaEventElapsedTime(&ms, events[i], events[i + 1]);
            if (e != cudaSuccess) {
                free(events);
                return px__cuda_fail(err, "cudaEventElapsedTime", e, __FILE__, __LINE__);
            }
            opt->profile(opt->profile_ctx, prog, i, ms);
        }
        for (uint32_t i = 0; i <= nsteps; i++)
            cudaEventDestroy(events[i]);
        free(events);
    }
    if (px__check_traps(ex, err) < 0)
        return -1;
    if (!full) {
        int x, y;
        pxvm_stream_xy(prog, prog->insns[budget_trap].pc, &x, &y);
        return pxvm_fail(err, PXE_TRAP_STEPS, x, y, (unsigned long long)budget, budget_trap);
    }
    ex->out_valid = 1;
    return 0;
}

/* Level `level` of a slot of one item into packed rows at dst, on the stream: from its array, or,
 * for a frame-only input's level 0, from the linear buffer where it lives. */
static int px__copy_level(pxvm_executor *ex, int item, int slot, int level, uint8_t *dst, size_t dpitch,
                          cudaMemcpyKind kind, pxvm_error *err)
{
    const px_gpu_slot *g = &ex->slots[slot];
    size_t pitch = (size_t)g->w[level] * 4u;
    if (level == 0 && ex->prog->frame_only[slot])
        PX__CK(cudaMemcpy2DAsync(dst, dpitch, px__frame_src(ex, slot) + pitch * (size_t)g->h[0] * (size_t)item, pitch, pitch,
                                 (size_t)g->h[0], kind, ex->stream));
    else
        PX__CK(cudaMemcpy2DFromArrayAsync(dst, dpitch, px__array(ex, item, slot, level), 0, 0, pitch, (size_t)g->h[level],
                                          kind, ex->stream));
    return 0;
}

static int px__gl_read(pxvm_executor *ex, int slot, int level, int item0, const pxvm_view *dst, int patches,
                       pxvm_error *err)
{
    if (px__need_program(ex, "read", err) < 0)
        return -1;
    if (pxvm_check_read_view(ex->prog, ex->batch, slot, level, item0, dst, patches, err) < 0)
        return -1;
    PX__CK(cudaSetDevice(ex->device));
    if (px__retarget_flush(ex, err) < 0) /* a read between a retarget and a run: the initial state */
        return -1;
    const pxvm_slot *s = &ex->prog->slots[slot];
    const px_gpu_slot *g = &ex->slots[slot];
    size_t pitch = (size_t)g->w[level] * 4u, bytes = pitch * (size_t)g->h[level];
    if (dst->device >= 0) { /* device to device, on the stream */
        if (px__check_device_ptr(ex, dst->data, "output", err) < 0)
            return -1;
        if (patches) {
            if (((uintptr_t)dst->data & 3) || (dst->row_stride & 3) || (dst->item_stride & 3))
                return pxvm_fail(err, PXE_DEVICE_PATCH_ALIGN, -1, -1);
            dim3 grid((unsigned)s->patch_count, (unsigned)dst->items);
            px__k_patches<<<grid, 256, 0, ex->stream>>>(ex->d_slots, ex->nslots, slot, item0, s->w / s->patch_w,
                                                        s->patch_w, s->patch_h, (uint8_t *)dst->data,
                                                        (long long)dst->row_stride, (long long)dst->item_stride);
            PX__CK(cudaGetLastError());
        } else if (!(level == 0 && ex->prog->frame_only[slot]) &&
                   !(((uintptr_t)dst->data | (uintptr_t)dst->row_stride | (uintptr_t)dst->item_stride) & 3)) {
            /* one kernel for every item through the slot's surfaces (an array copy per item is
             * slow); 16-byte stores where dst allows them */
            int wide = !(((uintptr_t)dst->data | (uintptr_t)dst->row_stride | (uintptr_t)dst->item_stride) & 15);
            size_t groups = ((size_t)g->w[level] + 3u) / 4u * (size_t)g->h[level];
            unsigned bx = (unsigned)((groups + 255u) / 256u);
            dim3 grid(bx < 4096u ? bx : 4096u, (unsigned)dst->items);
            px__k_read_level<<<grid, 256, 0, ex->stream>>>(ex->d_slots, ex->nslots, slot, level, item0, (uint8_t *)dst->data,
                                                           (long long)dst->row_stride, (long long)dst->item_stride, wide);
            PX__CK(cudaGetLastError());
        } else {
            for (int i = 0; i < dst->items; i++)
                if (px__copy_level(ex, item0 + i, slot, level, (uint8_t *)dst->data + (int64_t)i * dst->item_stride,
                                   (size_t)dst->row_stride, cudaMemcpyDeviceToDevice, err) < 0)
                    return -1;
        }
        return px__join_out(ex, err);
    }
    if (level == 0 && ex->h_out[slot] && ex->out_valid) { /* downloaded at the end of the run */
        for (int i = 0; i < dst->items; i++)
            pxvm_copy_out(s, g->w[0], g->h[0], ex->h_out[slot] + bytes * (size_t)(item0 + i), dst, i, patches);
        return 0;
    }
    if (bytes > ex->h_read_cap) {
        if (ex->h_read)
            cudaFreeHost(ex->h_read);
        ex->h_read = NULL;
        ex->h_read_cap = 0;
        PX__CK(cudaHostAlloc(&ex->h_read, bytes, cudaHostAllocDefault));
        ex->h_read_cap = bytes;
    }
    for (int i = 0; i < dst->items; i++) {
        if (px__copy_level(ex, item0 + i, slot, level, ex->h_read, pitch, cudaMemcpyDeviceToHost, err) < 0)
            return -1;
        PX__CK(cudaStreamSynchronize(ex->stream));
        pxvm_copy_out(s, g->w[level], g->h[level], ex->h_read, dst, i, patches);
    }
    return 0;
}

static int px__gl_set_fixations(pxvm_executor *ex, int item0, int items, int reg0, int nregs, const int32_t *xy,
                                int device, pxvm_error *err)
{
    if (px__need_program(ex, "set_fixations", err) < 0)
        return -1;
    if (pxvm_check_fixations(ex->prog, ex->batch, item0, items, reg0, nregs, xy, err) < 0)
        return -1;
    PX__CK(cudaSetDevice(ex->device));
    if (device >= 0 && px__check_device_ptr(ex, xy, "fixations", err) < 0)
        return -1;
    /* one kernel writes [item][8][2]: from device memory (the caller's stream then waits for it,
     * join_out, so the caller may overwrite xy at once), or from its arguments (host values) */
    int n = items * nregs;
    if (device < 0 && n > PX_FIX_ARG_PAIRS) { /* many host values: a staged copy (pageable source) */
        size_t row = sizeof(int32_t) * 2u * (size_t)nregs;
        PX__CK(cudaMemcpy2DAsync(ex->d_fix_set + ((size_t)item0 * PX_FIX_REGS + (size_t)reg0) * 2u,
                                 sizeof(int32_t) * 2u * PX_FIX_REGS, xy, row, row, (size_t)items, cudaMemcpyHostToDevice,
                                 ex->stream));
        return 0;
    }
    px_fix_args args;
    if (device < 0)
        memcpy(args.v, xy, sizeof(int32_t) * 2u * (size_t)n);
    px__k_set_fix<<<(unsigned)((2 * n + 255) / 256), 256, 0, ex->stream>>>(ex->d_fix_set, device >= 0 ? xy : NULL, args,
                                                                         item0, items, reg0, nregs);
    PX__CK(cudaGetLastError());
    return 0;
}

static int px__gl_set_dirty(pxvm_executor *ex, int item, const pxvm_rect *rects, int n, pxvm_error *err)
{
    if (px__need_program(ex, "set_dirty", err) < 0)
        return -1;
    if (pxvm_check_dirty(ex->prog, ex->batch, item, rects, n, err) < 0)
        return -1;
    PX__CK(cudaSetDevice(ex->device));
    if (!ex->h_rects) { /* kept for binds that upload only what the rectangles touch */
        ex->h_rects = (pxvm_rect *)calloc((size_t)ex->batch * PXVM_MAX_RECTS, sizeof(pxvm_rect));
        ex->h_nrects = (int *)malloc(sizeof(int) * (size_t)ex->batch);
        if (!ex->h_rects || !ex->h_nrects)
            return pxvm_fail(err, PXE_NOMEM, -1, -1, 0ull);
        for (int b = 0; b < ex->batch; b++)
            ex->h_nrects[b] = -1;
    }
    if (n)
        memcpy(ex->h_rects + (size_t)item * PXVM_MAX_RECTS, rects, sizeof(pxvm_rect) * (size_t)n);
    ex->h_nrects[item] = n;
    px_gpu_dirty d; /* count and rectangles, one staged copy (pageable: read before the call returns) */
    memset(&d, 0, offsetof(px_gpu_dirty, r));
    d.n = n;
    if (n)
        memcpy(d.r, rects, sizeof(pxvm_rect) * (size_t)n);
    PX__CK(cudaMemcpyAsync(ex->d_dirty + item, &d, offsetof(px_gpu_dirty, r) + sizeof(pxvm_rect) * (size_t)n,
                           cudaMemcpyHostToDevice, ex->stream));
    return 0;
}

/* Every level of every persistent slot (their initial state is zero): restart's clear records. */
static void px__persist_fill(pxvm_executor *ex, px_gpu_rect *rects, int *n, int *max_px, void *arg)
{
    (void)arg;
    int all = ex->nslots * ex->batch;
    int keep_n = ex->nclear, keep_px = ex->max_clear_px; /* px__add_clear counts into these */
    ex->nclear = ex->max_clear_px = 0;
    for (int i = 0; i < all; i++)
        if (ex->prog->slots[i % ex->nslots].flags & PXI_SLOT_PERSIST)
            px__add_clear(ex, rects, i, 0, ex->slots[i].levels);
    *n = ex->nclear, *max_px = ex->max_clear_px;
    ex->nclear = keep_n, ex->max_clear_px = keep_px;
}

static int px__gl_restart(pxvm_executor *ex, pxvm_error *err)
{
    if (px__need_program(ex, "restart", err) < 0)
        return -1;
    PX__CK(cudaSetDevice(ex->device));
    px_gpu_rect *d = NULL;
    int n = 0, px = 0;
    int rc = px__rect_records(ex, px__persist_fill, NULL, &d, &n, &px, "clearing persistent slots", err);
    if (rc == 0 && n)
        rc = px__launch_clear(ex, d, n, px, err);
    if (ex->h_primed)
        memset(ex->h_primed, 0, (size_t)ex->batch);
    for (int b = 0; ex->h_nrects && b < ex->batch; b++)
        ex->h_nrects[b] = -1;
    if (rc == 0) {
        px__video_end(ex);
        PX__CK(cudaMemsetAsync(ex->d_primed, 0, (size_t)ex->batch, ex->stream));
        PX__CK(cudaStreamSynchronize(ex->stream)); /* the clear records are freed next */
    }
    cudaFree(d);
    return rc;
}

static int px__gl_read_state(pxvm_executor *ex, int what, int slot, int item0, int items, void *dst, int device,
                             pxvm_error *err)
{
    if (px__need_program(ex, "read_state", err) < 0)
        return -1;
    if (pxvm_check_state(ex->prog, ex->batch, what, slot, item0, items, dst, err) < 0)
        return -1;
    PX__CK(cudaSetDevice(ex->device));
    if (device >= 0 && px__check_device_ptr(ex, dst, "output", err) < 0)
        return -1;
    size_t n = pxvm_state_ints(ex->prog, what), part = n, at = 0, e = pxvm_state_elem(what);
    if (what != PXVM_STATE_FIXATIONS) {
        size_t per = what == PXVM_STATE_GEOMETRY ? PX_GEOM_INTS : 1;
        part = (size_t)ex->prog->slots[slot].patch_count * per;
        at = (size_t)ex->prog->geom_base[slot] * per;
    }
    const uint8_t *base = what == PXVM_STATE_FIXATIONS  ? (const uint8_t *)ex->d_fix_run
                          : what == PXVM_STATE_GEOMETRY ? (const uint8_t *)ex->d_geom
                                                        : ex->d_changed;
    PX__CK(cudaMemcpy2DAsync(dst, e * part, base + ((size_t)item0 * n + at) * e, e * n, e * part, (size_t)items,
                             device >= 0 ? cudaMemcpyDeviceToDevice : cudaMemcpyDeviceToHost, ex->stream));
    if (device < 0) {
        PX__CK(cudaStreamSynchronize(ex->stream));
        return 0;
    }
    return px__join_out(ex, err);
}

/* The work goes straight onto the caller's stream (no events between two streams per call: each
 * cross-stream wait cost the GPU time per frame); work enqueued before the switch stays first. */
static int px__gl_set_stream(pxvm_executor *ex, void *stream, pxvm_error *err)
{
    cudaStream_t next = stream ? (cudaStream_t)stream : ex->own_stream;
    PX__CK(cudaSetDevice(ex->device));
    if (next != ex->stream) {
        PX__CK(cudaEventRecord(ex->ev_out, ex->stream));
        PX__CK(cudaStreamWaitEvent(next, ex->ev_out, 0));
    }
    ex->user_stream = (cudaStream_t)stream;
    ex->stream = next;
    return 0;
}

static int px__gl_sync(pxvm_executor *ex, pxvm_error *err)
{
    PX__CK(cudaStreamSynchronize(ex->stream));
    return 0;
}

/* Fused EMBED: the set given to embed.cu's records; every captured graph goes (a fused EMBED
 * launches no staging, a run zeroes its rows first). */
static int px__gl_fuse_embed(pxvm_executor *ex, const uint8_t *fused, pxvm_error *err)
{
    if (px__need_program(ex, "fuse_embed", err) < 0)
        return -1;
    PX__CK(cudaSetDevice(ex->device));
    px__make_current(ex);
    int rc = px_gpu_embed_fuse(ex, fused, err);
    px__retarget_drop_graphs(ex); /* whatever happened, captured graphs may name the table's old rows */
    return rc;
}

extern "C" const pxvm_executor_ops pxvm_cuda_gl_executor = {
    "cuda", px__gl_open, px__gl_load, px__gl_bind, px__gl_borrow, px__gl_release, px__gl_run, px__gl_read, px__gl_set_stream, px__gl_sync, px__gl_close,
    px__gl_set_fixations, px__gl_read_state, px__gl_set_dirty, px__gl_restart, px__gl_read_tokens,
        px__gl_retarget, px__gl_ragged, px__gl_scratch,
    1, /* device_views */
    px__gl_fuse_embed,
};

void px__gl_close(pxvm_executor *ex)
{
    if (!ex)
        return;
    px__gl_unload(ex);
    px__make_current(ex);
    px__ragged_free(ex);
    if (ex->h_read)
        cudaFreeHost(ex->h_read);
    if (ex->ev_out)
        cudaEventDestroy(ex->ev_out);
    if (ex->own_stream)
        cudaStreamDestroy(ex->own_stream);
    if (ex->copy_stream)
        cudaStreamDestroy(ex->copy_stream);
    if (ex->dpy != EGL_NO_DISPLAY) {
        eglMakeCurrent(ex->dpy, EGL_NO_SURFACE, EGL_NO_SURFACE, EGL_NO_CONTEXT);
        if (ex->ctx != EGL_NO_CONTEXT)
            eglDestroyContext(ex->dpy, ex->ctx);
        if (px__egl_hold(ex->dpy, -1) == 0)
            eglTerminate(ex->dpy);
    }
    free(ex);
}
