/* launch_plan.c - what the loader decides once for every executor, on a validated program: the
 * launch plan (single instructions, batches of independent fetches, a DIFF and UPDATE, and maybe
 * PYRAMID, that one pass over tiles may run), what each run restores, and for each incremental
 * fetch its position box and whether it owns its destination rectangle. */
#include <stdlib.h>
#include <string.h>

#include "loader.h"
#include "../isa/px_sem.h"

#define PX__BATCH_MAX 1024 /* bounds the pairwise rectangle checks below */

static int px__rects_overlap(const pxi_insn *a, const pxi_insn *b)
{
    int ax = a->a[PX_FI(SAMPLE, dst_x)], ay = a->a[PX_FI(SAMPLE, dst_y)];
    int bx = b->a[PX_FI(SAMPLE, dst_x)], by = b->a[PX_FI(SAMPLE, dst_y)];
    return ax < bx + b->a[PX_FI(SAMPLE, w)] && bx < ax + a->a[PX_FI(SAMPLE, w)] && ay < by + b->a[PX_FI(SAMPLE, h)] &&
           by < ay + a->a[PX_FI(SAMPLE, h)];
}

int px_vm_build_plan(pxvm_program *prog, pxvm_error *err)
{
    prog->steps = malloc(sizeof(pxvm_step) * prog->ninsns);
    if (!prog->steps)
        return pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)(sizeof(pxvm_step) * prog->ninsns));
    uint8_t reads[PXVM_MAX_SLOTS + 1], writes[PXVM_MAX_SLOTS + 1];
    uint32_t i = 0;
    prog->nsteps = 0;
    while (i < prog->ninsns) {
        pxvm_step *st = &prog->steps[prog->nsteps++];
        st->first = i;
        st->count = 1;
        st->kind = PXVM_STEP_ONE;
        st->tiles_fuse = 0;
        if (!px_vm_is_fetch(&prog->insns[i])) {
            i++;
            continue;
        }
        memset(reads, 0, sizeof reads);
        memset(writes, 0, sizeof writes);
        uint32_t j = i;
        for (; j < prog->ninsns && j - i < PX__BATCH_MAX; j++) {
            const pxi_insn *in = &prog->insns[j];
            if (!px_vm_is_fetch(in))
                break;
            int dst = in->a[PX_FI(SAMPLE, dst)], r[PXI_MAX_FIELDS + 1]; /* src, mask, a GATHER's table */
            int nr = pxvm_insn_slots(in, pxi_facts(in->op)->reads, r), clash = reads[dst];
            for (int k = 0; k < nr; k++)
                clash |= writes[r[k]];
            if (clash)
                break;
            int overlap = 0;
            if (writes[dst])
                for (uint32_t k = i; k < j && !overlap; k++)
                    overlap = prog->insns[k].a[PX_FI(SAMPLE, dst)] == dst && px__rects_overlap(&prog->insns[k], in);
            if (overlap)
                break;
            for (int k = 0; k < nr; k++)
                reads[r[k]] = 1;
            writes[dst] = 1;
        }
        st->count = j - i;
        st->kind = st->count > 1 ? PXVM_STEP_BATCH : PXVM_STEP_ONE;
        i = j;
    }
    for (uint32_t s = 0; s + 1 < prog->nsteps; s++) { /* DIFF, UPDATE (, PYRAMID) of the same slots */
        const pxi_insn *d = &prog->insns[prog->steps[s].first], *u = &prog->insns[prog->steps[s + 1].first];
        if (pxi_facts(d->op)->plan != PXP_DIFF || pxi_facts(u->op)->plan != PXP_UPDATE ||
            PX_ARG(u, UPDATE, frame) != PX_ARG(d, DIFF, frame) || PX_ARG(u, UPDATE, cur) != PX_ARG(d, DIFF, cur) ||
            PX_ARG(u, UPDATE, mask) != PX_ARG(d, DIFF, mask))
            continue;
        const pxi_insn *p = s + 2 < prog->nsteps ? &prog->insns[prog->steps[s + 2].first] : NULL;
        int pyramid = p && pxi_facts(p->op)->plan == PXP_PYRAMID && PX_ARG(p, PYRAMID, slot) == PX_ARG(d, DIFF, cur) &&
                      PX_ARG(p, PYRAMID, mask) == PX_ARG(d, DIFF, mask);
        prog->steps[s].tiles_fuse = pyramid ? 3 : 2;
    }
    return 0;
}

/* What each run must restore (see PXVM_RESET_*). */
int px_vm_build_reset(pxvm_program *prog, pxvm_error *err)
{
    prog->reset = calloc((size_t)prog->nslots, 1);
    prog->rebuild_upper = calloc((size_t)prog->nslots, sizeof(uint32_t));
    if (!prog->reset || !prog->rebuild_upper)
        return pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)prog->nslots);
    uint8_t *read_upper = calloc((size_t)prog->nslots, 1), *rebuilt = calloc((size_t)prog->nslots, 1);
    if (!read_upper || !rebuilt) {
        free(read_upper);
        free(rebuilt);
        return pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)prog->nslots);
    }
    /* a DIFF writes every texel of its mask's level 0: when nothing reads the mask before, the
     * run need not clear it first (a video frame's only per-run reset) */
    uint8_t read[PXVM_MAX_SLOTS + 1] = {0}, written_whole[PXVM_MAX_SLOTS + 1] = {0};
    uint8_t upper_written[PXVM_MAX_SLOTS + 1] = {0}; /* only PYRAMID writes levels >= 1 */
    int may_trap = 0; /* a DOT_RGB came before: a run may stop there */
    for (uint32_t i = 0, s = 0; i < prog->ninsns; i++) {
        while (s + 1 < prog->nsteps && prog->steps[s].first + prog->steps[s].count <= i)
            s++; /* the step of instruction i */
        const pxi_insn *in = &prog->insns[i];
        int plan = pxi_facts(in->op)->plan;
        if (plan == PXP_DIFF && !read[PX_ARG(in, DIFF, mask)])
            written_whole[PX_ARG(in, DIFF, mask)] = 1;
        uint8_t r[PXVM_MAX_SLOTS + 1] = {0};
        pxvm_insn_reads(in, r);
        for (int k = 0; k < prog->nslots; k++)
            read[k] |= r[k];
        if (plan == PXP_PYRAMID)
            upper_written[PX_ARG(in, PYRAMID, slot)] = 1;
        if (plan == PXP_PYRAMID && !PX_ARG(in, PYRAMID, mask) && !read_upper[PX_ARG(in, PYRAMID, slot)]) {
            int k = PX_ARG(in, PYRAMID, slot); /* levels >= 1 fully rewritten before any read */
            if (!rebuilt[k] && !may_trap && s < prog->nsteps)
                prog->rebuild_upper[k] = prog->steps[s].first + prog->steps[s].count;
            rebuilt[k] = 1;
        }
        may_trap |= plan == PXP_TRAP;
        pxvm_insn_reads_upper(in, read_upper);
        uint8_t w[PXVM_MAX_SLOTS + 1] = {0};
        pxvm_insn_writes(in, w);
        /* a slot written whole before anything reads it, in every run (no trap can stop one
         * before): its level 0 needs no clear at the start of a run */
        for (int k = 1; (pxi_facts(in->op)->flags & PXA_WRITES_WHOLE) && !may_trap && k < prog->nslots; k++)
            if (w[k] && !read[k])
                written_whole[k] = 1;
        if (w[0])
            prog->reset[0] |= PXVM_RESET_LEVEL0; /* the program image is written */
        if (plan == PXP_HALT)
            break;
    }
    for (int k = 0; k < prog->nslots; k++) {
        uint8_t role = prog->slots[k].role;
        if ((role == PXI_ROLE_OUTPUT || role == PXI_ROLE_SCRATCH) && !written_whole[k])
            prog->reset[k] |= PXVM_RESET_LEVEL0;
        if (upper_written[k] && !rebuilt[k]) /* levels nothing writes stay as loaded: zero */
            prog->reset[k] |= PXVM_RESET_UPPER;
        if (prog->slots[k].flags & PXI_SLOT_PERSIST)
            prog->reset[k] = 0, prog->rebuild_upper[k] = 0; /* what a run leaves, the next one starts from */
    }
    free(read_upper);
    free(rebuilt);
    return 0;
}

/* The positions and levels an incremental instruction reads, before a fixation offset, decided
 * once here for both executors: SAMPLE and ANISO from their operands (px_patch_span,
 * px_lod_levels); GATHER from every entry of its table region (constant data). */
int px_vm_fetch_box(pxvm_program *prog, const pxi_insn *in, uint32_t i, pxvm_error *err)
{
    if (!prog->insn_box) {
        prog->insn_box = calloc(prog->ninsns, sizeof(pxvm_fetch_box));
        if (!prog->insn_box)
            return pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)prog->ninsns);
    }
    if (in->op != PX_OP_GATHER) {
        pxvm_fetch_box *b = &prog->insn_box[i];
        int taps = in->op == PX_OP_ANISO ? PX_ARG(in, ANISO, taps) : 1;
        px_patch_span(PX_ARG(in, SAMPLE, cu), PX_ARG(in, SAMPLE, du), PX_ARG(in, SAMPLE, w), taps,
                      in->op == PX_OP_ANISO ? PX_ARG(in, ANISO, tdu) : 0, &b->u_lo, &b->u_hi);
        px_patch_span(PX_ARG(in, SAMPLE, cv), PX_ARG(in, SAMPLE, dv), PX_ARG(in, SAMPLE, h), taps,
                      in->op == PX_OP_ANISO ? PX_ARG(in, ANISO, tdv) : 0, &b->v_lo, &b->v_hi);
        px_lod_levels((uint32_t)PX_ARG(in, SAMPLE, lod), px_mode_filter(PX_ARG(in, SAMPLE, mode)),
                      prog->slots[PX_ARG(in, SAMPLE, src)].levels, &b->lmin, &b->lmax);
        return 0;
    }
    int t = PX_ARG(in, GATHER, table), tx = PX_ARG(in, GATHER, table_x), ty = PX_ARG(in, GATHER, table_y);
    int w = PX_ARG(in, GATHER, w), h = PX_ARG(in, GATHER, h), filter = px_mode_filter(PX_ARG(in, GATHER, mode));
    const pxvm_slot *ts = &prog->slots[t], *ss = &prog->slots[PX_ARG(in, GATHER, src)];
    pxvm_fetch_box b = {INT64_MAX, INT64_MIN, INT64_MAX, INT64_MIN, 1 << 30, -1, 0};
    for (int j = 0; j < h; j++)
        for (int e = 0; e < w; e++) {
            const uint8_t *p = PX_VM_PIX(&prog->image, (size_t)(ts->data_y + ty + j) * (size_t)prog->image.w +
                                                         (size_t)(ts->data_x + tx + 3 * e));
            int64_t u = px_entry_q16(pxi_read_le(p, 0, 0, 4)), v = px_entry_q16(pxi_read_le(p, 1, 0, 4));
            int l0, l1;
            px_lod_levels(px_entry_lod(pxi_read_le(p, 2, 0, 4)), filter, ss->levels, &l0, &l1);
            b.u_lo = u < b.u_lo ? u : b.u_lo, b.u_hi = u > b.u_hi ? u : b.u_hi;
            b.v_lo = v < b.v_lo ? v : b.v_lo, b.v_hi = v > b.v_hi ? v : b.v_hi;
            b.lmin = l0 < b.lmin ? l0 : b.lmin, b.lmax = l1 > b.lmax ? l1 : b.lmax;
        }
    prog->insn_box[i] = b;
    return 0;
}

/* Which incremental fetches own their destination rectangle (pxvm_fetch_box.sole): no other
 * instruction writes level 0 of their destination there. Writers of a level 0: opcodes.def's
 * writes (fetches their rectangle, SALIENCY its map, DIFF its mask, UPDATE cur, DOT_RGB the
 * program image, RESIZE its rectangle); PYRAMID writes only levels >= 1. Fetch pairs are
 * compared in order of (destination, top row), each against those starting above its bottom;
 * past a budget of comparisons (rows packed with fetches), the rest count as not owning theirs:
 * exact either way, only less work saved. */
typedef struct {
    int dst, top;
    uint32_t insn;
} px__fetch_key;

static int px__by_dst_row(const void *pa, const void *pb)
{
    const px__fetch_key *a = pa, *b = pb;
    return a->dst != b->dst ? (a->dst > b->dst) - (a->dst < b->dst) : (a->top > b->top) - (a->top < b->top);
}

int px_vm_fetch_sole(pxvm_program *prog, pxvm_error *err)
{
    uint8_t other[PXVM_MAX_SLOTS + 1] = {0}; /* level 0 written by something other than a fetch */
    uint32_t n = 0;
    for (uint32_t i = 0; i < prog->ninsns; i++) {
        const pxi_insn *o = &prog->insns[i];
        n += px_vm_is_fetch(o);
        if (!px_vm_is_fetch(o))
            pxvm_insn_writes(o, other);
    }
    px__fetch_key *order = malloc(sizeof *order * (n ? n : 1));
    uint8_t *shared = calloc(prog->ninsns, 1);
    if (!order || !shared) {
        free(order), free(shared);
        return pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)prog->ninsns * 13u);
    }
    n = 0;
    for (uint32_t i = 0; i < prog->ninsns; i++)
        if (px_vm_is_fetch(&prog->insns[i])) {
            px__fetch_key key = {prog->insns[i].a[PX_FI(SAMPLE, dst)], prog->insns[i].a[PX_FI(SAMPLE, dst_y)], i};
            order[n++] = key;
        }
    qsort(order, n, sizeof *order, px__by_dst_row);
    uint64_t budget = 16u * (uint64_t)n + 4096u;
    int gave_up = 0;
    for (uint32_t k = 0; k < n && !gave_up; k++) {
        const pxi_insn *a = &prog->insns[order[k].insn];
        int bottom = order[k].top + a->a[PX_FI(SAMPLE, h)];
        for (uint32_t m = k + 1; m < n && order[m].dst == order[k].dst && order[m].top < bottom; m++) {
            if (budget-- == 0) {
                gave_up = 1;
                break;
            }
            if (px__rects_overlap(a, &prog->insns[order[m].insn]))
                shared[order[k].insn] = shared[order[m].insn] = 1;
        }
    }
    for (uint32_t i = 0; i < prog->ninsns; i++)
        if (px_vm_is_fetch(&prog->insns[i]) && pxvm_fetch_mask(&prog->insns[i]))
            prog->insn_box[i].sole = !gave_up && !shared[i] && !other[prog->insns[i].a[PX_FI(SAMPLE, dst)]];
    free(order), free(shared);
    return 0;
}
