/* cpu_executor.c - the reference executor. Every result comes from isa/px_sem.h; this file only
 * decides which pixels to compute and spreads the work over threads: PYRAMID over rows of each
 * level, a plan batch of SAMPLE/GATHER instructions over its instructions. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cpu_executor.h"

/* ---- SAMPLE / GATHER ------------------------------------------------------------------------ */

/* Whether an incremental instruction samples (SPEC 7: on an unprimed item, when its fixation
 * register moved since it last sampled, or when its footprint box, px_footprint_tiles, holds a
 * dirty tile): 0 no, PX__ALL every pixel, PX__DIRTY the box holds a dirty tile. */
enum { PX__ALL = 1, PX__DIRTY = 2 };
static int px__cpu_fetch_needed(const pxvm_executor *ex, const pxi_insn *in, uint32_t index, int64_t fx, int64_t fy,
                                int mask)
{
    const pxvm_program *prog = ex->prog;
    int reg = px_mode_reg(in->a[PX_FI(SAMPLE, mode)]), filter = px_mode_filter(in->a[PX_FI(SAMPLE, mode)]);
    int need = !ex->primed[ex->item];
    if (reg >= 0) {
        int32_t *last = ex->last_reg + ((size_t)ex->item * prog->ninsns + index) * 2u;
        need |= last[0] != (int32_t)fx || last[1] != (int32_t)fy;
        last[0] = (int32_t)fx, last[1] = (int32_t)fy;
    }
    size_t at = (size_t)ex->item * prog->ninsns + index;
    if (need) {
        ex->geom_known[at] = 0; /* the box and spans of another position */
        return PX__ALL;
    }
    if (!(ex->geom_known[at] & 1u)) {
        const px_cpu_src *sv = &ex->view[in->a[PX_FI(SAMPLE, src)]];
        const pxvm_fetch_box *b = &prog->insn_box[index]; /* decided at load */
        ex->box_all[at] = px_footprint_tiles(b->u_lo + fx, b->u_hi + fx, b->v_lo + fy, b->v_hi + fy, b->lmin, b->lmax, filter,
                                             sv->w[0], sv->h[0]);
        ex->geom_known[at] |= 1u;
    }
    return px_cpu_box_dirty(ex->mask_counts[mask], prog->slots[mask].w, ex->box_all[at]) ? PX__DIRTY : 0;
}

void px_cpu_fetch_insn(const pxvm_executor *ex, const pxi_insn *in)
{
    const pxvm_program *prog = ex->prog;
    int src = in->a[PX_FI(SAMPLE, src)], dst = in->a[PX_FI(SAMPLE, dst)], mode_op = in->a[PX_FI(SAMPLE, mode)];
    int x0 = in->a[PX_FI(SAMPLE, dst_x)], y0 = in->a[PX_FI(SAMPLE, dst_y)];
    int w = in->a[PX_FI(SAMPLE, w)], h = in->a[PX_FI(SAMPLE, h)];
    int mode = px_mode_filter(mode_op), reg = px_mode_reg(mode_op);
    int64_t fx = reg >= 0 ? ex->fix[2 * reg] : 0, fy = reg >= 0 ? ex->fix[2 * reg + 1] : 0; /* fixation offset */
    uint32_t index = (uint32_t)(in - prog->insns);
    int32_t token = prog->insn_token[index];
    const px_cpu_src *sv = &ex->view[src];
    int mask = pxvm_fetch_mask(in), need = mask ? px__cpu_fetch_needed(ex, in, index, fx, fy, mask) : PX__ALL;
    if (!need) {
        if (token >= 0)
            ex->changed[token] = 0; /* its patch keeps its bytes (the slot is persistent) */
        return;
    }
    if (token >= 0)
        ex->changed[token] = 1;
    size_t dw = (size_t)prog->slots[dst].w;
    uint8_t *out = ex->store[dst];
    if (in->op == PX_OP_SAMPLE || in->op == PX_OP_ANISO) { /* ANISO shares SAMPLE's layout up to lod */
        int64_t cu = PX_ARG(in, SAMPLE, cu) + fx, cv = PX_ARG(in, SAMPLE, cv) + fy;
        int32_t du = PX_ARG(in, SAMPLE, du), dv = PX_ARG(in, SAMPLE, dv);
        uint32_t lod = (uint32_t)PX_ARG(in, SAMPLE, lod);
        int taps = in->op == PX_OP_ANISO ? PX_ARG(in, ANISO, taps) : 1;
        int32_t tdu = in->op == PX_OP_ANISO ? PX_ARG(in, ANISO, tdu) : 0;
        int32_t tdv = in->op == PX_OP_ANISO ? PX_ARG(in, ANISO, tdv) : 0;
        if (token >= 0)
            px_geom_write(ex->geom + (size_t)token * PX_GEOM_INTS, cu, cv, du, dv, px_lod_used(lod, mode, sv->levels));
        /* a dirty box, but the same registers on a primed item, and a destination nothing else
         * writes: only the pixels whose taps reach a dirty tile can change (the token counts as
         * sampled: the rule decides `changed`, this only saves work; the other pixels hold what
         * sampling them gives, the instruction's own last output) */
        uint64_t sel[PX_PATCH_MAX_SIDE];
        int some = need == PX__DIRTY && ex->span_at[index] >= 0;
        if (some) {
            int16_t *spans = ex->spans_all + ex->spans_per_item * (size_t)ex->item + (size_t)ex->span_at[index];
            uint8_t *known = ex->geom_known + (size_t)ex->item * prog->ninsns + index;
            if (!(*known & 2u)) { /* spans for this fixation */
                int64_t ulo[PX_PATCH_MAX_SIDE], uhi[PX_PATCH_MAX_SIDE], vlo[PX_PATCH_MAX_SIDE], vhi[PX_PATCH_MAX_SIDE], a, b;
                const pxvm_fetch_box *box = &prog->insn_box[index];
                px_patch_span(0, 0, 1, taps, tdu, &a, &b); /* the taps' offsets around a pixel */
                for (int i = 0; i < w; i++)
                    ulo[i] = cu + px_patch_pos(0, du, i, w) + a, uhi[i] = cu + px_patch_pos(0, du, i, w) + b;
                px_patch_span(0, 0, 1, taps, tdv, &a, &b);
                for (int j = 0; j < h; j++)
                    vlo[j] = cv + px_patch_pos(0, dv, j, h) + a, vhi[j] = cv + px_patch_pos(0, dv, j, h) + b;
                px_cpu_patch_spans(ulo, uhi, w, vlo, vhi, h, box->lmin, box->lmax, mode, sv->w[0], sv->h[0], spans);
                *known |= 2u;
            }
            px_cpu_patch_dirty_pixels(ex->mask_counts[mask], prog->slots[mask].w, spans, w, h, sel);
        }
        for (int j = 0; j < h; j++) {
            int64_t v = cv + px_patch_pos(0, dv, j, h);
            uint8_t *row = out + ((size_t)(y0 + j) * dw + (size_t)x0) * 4u;
            /* runs of selected pixels (w <= 64), or the whole row as one run (any w), each
             * sampled by one plain loop */
            uint64_t bits = some ? sel[j] : 0;
            for (int i0 = 0, i1 = w, more = 1; more;) {
                if (some) {
                    if (!bits)
                        break;
                    i0 = __builtin_ctzll(bits);
                    for (i1 = i0; i1 < 64 && (bits >> i1) & 1u; i1++)
                        ;
                    bits = i1 < 64 ? bits & (~0ull << i1) : 0;
                } else {
                    more = 0;
                }
                for (int i = i0; i < i1; i++) {
                    int64_t u = cu + px_patch_pos(0, du, i, w);
                    px__store(row + 4 * i, in->op == PX_OP_SAMPLE ? px_sample(sv, u, v, lod, mode)
                                                                  : px_sample_aniso(sv, u, v, lod, mode, taps, tdu, tdv));
                }
            }
        }
    } else {
        int t = PX_ARG(in, GATHER, table), tx = PX_ARG(in, GATHER, table_x), ty = PX_ARG(in, GATHER, table_y);
        size_t tw = (size_t)prog->slots[t].w;
        const uint8_t *tab = ex->store[t];
        if (token >= 0) { /* a GATHER token's geometry: its centre entry's position and LOD */
            const uint8_t *e = tab + ((size_t)(ty + h / 2) * tw + (size_t)(tx + 3 * (w / 2))) * 4u;
            px_geom_write(ex->geom + (size_t)token * PX_GEOM_INTS, px_entry_q16(px__load(e)) + fx,
                          px_entry_q16(px__load(e + 4)) + fy, 0, 0, px_lod_used(px_entry_lod(px__load(e + 8)), mode, sv->levels));
        }
        for (int j = 0; j < h; j++) {
            const uint8_t *e = tab + ((size_t)(ty + j) * tw + (size_t)tx) * 4u;
            uint8_t *row = out + ((size_t)(y0 + j) * dw + (size_t)x0) * 4u;
            for (int i = 0; i < w; i++, e += 12)
                px__store(row + 4 * i, px_sample(sv, px_entry_q16(px__load(e)) + fx, px_entry_q16(px__load(e + 4)) + fy,
                                                 px_entry_lod(px__load(e + 8)), mode));
        }
    }
}

void px_cpu_batch_part(void *ctx, int b, int e)
{
    const px_cpu_insn_job *j = ctx;
    for (int i = b; i < e; i++)
        px_cpu_fetch_insn(j->ex, j->in + i);
}

/* ---- SALIENCY and ARGMAX (fixation) --------------------------------------------------------- */

static void px__saliency_rows(void *ctx, int y0, int y1)
{
    const px_cpu_insn_job *j = ctx;
    int src = PX_ARG(j->in, SALIENCY, src), dst = PX_ARG(j->in, SALIENCY, dst);
    px_cpu_saliency_rows(&j->ex->view[src], j->ex->store[dst], j->ex->prog->slots[dst].w, j->in, y0, y1);
}

/* ---- DIFF, UPDATE, incremental PYRAMID (video) ----------------------------------------------- */

static void px__video_diff_rows(void *ctx, int y0, int y1)
{
    const px_cpu_insn_job *j = ctx;
    const pxvm_executor *ex = j->ex;
    int mask = PX_ARG(j->in, DIFF, mask);
    px_cpu_diff_rows(&ex->view[PX_ARG(j->in, DIFF, frame)], &ex->view[PX_ARG(j->in, DIFF, cur)], ex->store[mask],
                     ex->prog->slots[mask].w, j->in, ex->primed[ex->item], ex->rects + (size_t)ex->item * PXVM_MAX_RECTS,
                     ex->nrects[ex->item], y0, y1);
}

static void px__video_update_rows(void *ctx, int y0, int y1)
{
    const px_cpu_insn_job *j = ctx;
    const pxvm_executor *ex = j->ex;
    int mask = PX_ARG(j->in, UPDATE, mask);
    px_cpu_update_rows(&ex->view[PX_ARG(j->in, UPDATE, frame)], ex->store[PX_ARG(j->in, UPDATE, cur)], ex->store[mask],
                       ex->prog->slots[mask].w, y0, y1);
}

static void px__video_pyramid_rows(void *ctx, int y0, int y1)
{
    const px_cpu_insn_job *j = ctx;
    int mask = PX_ARG(j->in, PYRAMID, mask);
    px_cpu_pyramid_tile_rows(&j->ex->view[PX_ARG(j->in, PYRAMID, slot)], j->ex->store[mask], j->ex->prog->slots[mask].w,
                             y0, y1);
}

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

/* ---- DOT_RGB -------------------------------------------------------------------------------- */

uint64_t px_cpu_dot(pxvm_executor *ex, const pxi_insn *in)
{
    int w = ex->prog->slots[0].w;
    uint8_t *img = ex->store[0];
    const uint8_t *ra = img + (size_t)PX_ARG(in, DOT_RGB, row_a) * (size_t)w * 4u;
    const uint8_t *rb = img + (size_t)PX_ARG(in, DOT_RGB, row_b) * (size_t)w * 4u;
    uint64_t sum = 0;
    for (int x = 0; x < w && ra[4 * x] && rb[4 * x]; x++)
        sum += (uint64_t)ra[4 * x] * rb[4 * x];
    if (sum <= PX_DOT_MAX)
        px__store(img + (size_t)PX_ARG(in, DOT_RGB, row_out) * (size_t)w * 4u, px_dot_result((uint32_t)sum));
    return sum;
}

/* ---- run ------------------------------------------------------------------------------------ */

/* The start of every run: inputs must be bound; then what the plan marks is restored. */
static int px__cpu_reset(pxvm_executor *ex, int item, pxvm_error *err)
{
    const pxvm_program *prog = ex->prog;
    char lb[16];
    for (int k = 0; k < prog->nslots; k++) {
        const pxvm_slot *s = &prog->slots[k];
        if (s->role == PXI_ROLE_INPUT && !ex->bound[(size_t)item * (size_t)ex->nslots + (size_t)k])
            return pxvm_fail(err, PXE_UNBOUND_INPUT, -1, -1, k, pxvm_slot_label(prog, k, lb),
                             pxvm_slot_label(prog, k, lb));
        size_t l0 = (size_t)s->w * (size_t)s->h * 4u;
        if (prog->reset[k] & PXVM_RESET_LEVEL0)
            pxvm_slot_initial(prog, k, ex->store[k]);
        if (prog->reset[k] & PXVM_RESET_UPPER)
            memset(ex->store[k] + l0, 0, (size_t)s->bytes - l0);
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
    if (px__cpu_reset(ex, item, err) < 0)
        return -1;
    memcpy(ex->fix, ex->fix_set + (size_t)item * PX_FIX_REGS * 2u, sizeof(int32_t) * PX_FIX_REGS * 2u);
    uint64_t steps = 0, budget = opt ? opt->max_steps : UINT64_MAX;
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

/* The counts of the masks that fetch step s reads, from the masks as they are now (nothing in a
 * step writes what the step reads); none on an unprimed item, whose fetches sample whole. */
void px_cpu_count_masks(pxvm_executor *ex, uint32_t s)
{
    if (!ex->primed[ex->item])
        return;
    for (const uint8_t *m = ex->step_masks + ex->step_mask_at[s]; *m; m++)
        px_cpu_mask_counts(ex->store[*m], ex->prog->slots[*m].w, ex->prog->slots[*m].h, ex->mask_counts[*m]);
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
    switch (first->op) {
    case PX_OP_HALT: return 1;
    case PX_OP_DOT_RGB: {
        uint64_t sum = px_cpu_dot(ex, first);
        if (sum > PX_DOT_MAX) {
            int x, y;
            pxvm_stream_xy(prog, first->pc, &x, &y);
            return pxvm_fail(err, PXE_TRAP_DOT_OVERFLOW, x, y, st->first, (unsigned long)sum);
        }
        return 0;
    }
    case PX_OP_PYRAMID:
        if (PX_ARG(first, PYRAMID, mask)) {
            px_cpu_insn_job job = {ex, first};
            int mask = PX_ARG(first, PYRAMID, mask);
            px_pool_for(ex->pool, prog->slots[mask].h, 2, px__video_pyramid_rows, &job);
            px_cpu_pyramid_upper(&ex->view[PX_ARG(first, PYRAMID, slot)], ex->store[mask], prog->slots[mask].w,
                                 ex->level_flags);
        } else {
            px_cpu_pyramid(ex, PX_ARG(first, PYRAMID, slot));
        }
        return 0;
    case PX_OP_DIFF: {
        px_cpu_insn_job job = {ex, first};
        px_pool_for(ex->pool, prog->slots[PX_ARG(first, DIFF, mask)].h, 2, px__video_diff_rows, &job);
        return 0;
    }
    case PX_OP_UPDATE: {
        px_cpu_insn_job job = {ex, first};
        px_pool_for(ex->pool, prog->slots[PX_ARG(first, UPDATE, cur)].h, 16, px__video_update_rows, &job);
        return 0;
    }
    case PX_OP_SALIENCY: {
        px_cpu_insn_job job = {ex, first};
        px_pool_for(ex->pool, prog->slots[PX_ARG(first, SALIENCY, dst)].h, 8, px__saliency_rows, &job);
        return 0;
    }
    case PX_OP_ARGMAX: {
        const pxvm_slot *space = &prog->slots[PX_ARG(first, ARGMAX, space)];
        px_cpu_argmax(&ex->view[PX_ARG(first, ARGMAX, src)], space->w, space->h, first, ex->fix);
        return 0;
    }
    case PX_OP_SAMPLE:
    case PX_OP_ANISO:
    case PX_OP_GATHER:
        px_cpu_count_masks(ex, s);
        px_cpu_fetch_insn(ex, first);
        return 0;
    default: return 0; /* unreachable: the validator admits only the opcodes above */
    }
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
        return pxvm_fail(err, PXE_BAD_VIEW, -1, -1, "output",
                         "CUDA device memory can be written only by the CUDA-GL executor (executor cuda)");
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
        return pxvm_fail(err, PXE_BAD_VIEW, -1, -1, "fixations",
                         "CUDA device memory can be read only by the CUDA-GL executor (executor cuda)");
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
        return pxvm_fail(err, PXE_BAD_VIEW, -1, -1, "output",
                         "CUDA device memory can be written only by the CUDA-GL executor (executor cuda)");
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
    free(ex);
}

const pxvm_executor_ops pxvm_cpu_executor = {
    "cpu", px_cpu_open, px_cpu_load, px_cpu_bind, px_cpu_borrow, px__cpu_run, px__cpu_read, NULL, NULL, px__cpu_close,
    px__cpu_set_fixations, px__cpu_read_state, px__cpu_set_dirty, px__cpu_restart,
};
