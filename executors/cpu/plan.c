/* plan.c - the CPU executor's plan: what the instructions' operands decide for one program (the
 * pyramid's scratch flags, the masks each fetch step reads, the incremental fetches' spans and boxes,
 * the RESIZE tables, the EMBED packs), made at load and by retarget for the next program, and freed. */
#include <stdlib.h>
#include <string.h>

#include "cpu_executor.h"

#define PX__DROP(p) (free(p), (p) = NULL)
void px_cpu_plan_unload(pxvm_executor *ex)
{
    for (int k = 0; ex->mask_counts && k < ex->nslots; k++)
        free(ex->mask_counts[k]);
    PX__DROP(ex->plan_mem); /* every array below lies in it */
    ex->level_flags = NULL, ex->mask_counts = NULL, ex->step_masks = NULL;
    ex->step_mask_at = NULL, ex->spans_all = NULL, ex->span_at = NULL, ex->box_all = NULL, ex->geom_known = NULL;
    px_cpu_resize_unload(ex);
    px_cpu_embed_unload(ex);
}

/* The RESIZE tables and the EMBED packs of ex->prog. */
static int px__plan_tables(pxvm_executor *ex, pxvm_error *err)
{
    return px_cpu_resize_load(ex, err) < 0 ? -1 : px_cpu_embed_load(ex, err);
}

/* What the instructions' operands decide (retarget makes it again for the next program): the
 * pyramid's scratch flags, the masks each fetch step reads and their counts, the incremental
 * fetches' spans and boxes, the RESIZE tables. 0, or -1 with *err (px_cpu_plan_unload frees what
 * was made). */
int px_cpu_plan_load(pxvm_executor *ex, const px_cpu_plan_kept *like, pxvm_error *err)
{
    const pxvm_program *prog = ex->prog;
    int batch = ex->batch;
    size_t flags = 1;
    for (int k = 0; k < prog->nslots; k++) {
        size_t f = (size_t)px_mip_dim(prog->slots[k].w, PX_TILE_SHIFT) * (size_t)px_mip_dim(prog->slots[k].h, PX_TILE_SHIFT);
        flags = f > flags ? f : flags;
    }
    size_t spans = like ? like->spans_per_item : 0; /* per item: the incremental fetches' spans, 2 (w + h) each */
    for (uint32_t i = 0; !like && i < prog->ninsns; i++) {
        const pxi_insn *in = &prog->insns[i];
        int w = in->a[PX_FI(SAMPLE, w)], h = in->a[PX_FI(SAMPLE, h)];
        if ((in->op == PX_OP_SAMPLE || in->op == PX_OP_ANISO) && pxvm_fetch_mask(in) && prog->insn_box[i].sole &&
            w <= PX_PATCH_MAX_SIDE && h <= PX_PATCH_MAX_SIDE)
            spans += 2u * (size_t)(w + h);
    }
    /* every array of the plan in one block (one allocation, one free: a new size's retarget
     * makes a plan and drops the oldest kept one) */
    size_t n = (size_t)prog->nslots, bn = (size_t)batch * prog->ninsns + 1u;
    size_t part[8] = {flags, sizeof(int32_t *) * n, (size_t)prog->nsteps + prog->ninsns + 1u,
                      sizeof(uint32_t) * ((size_t)prog->nsteps + 1u), sizeof(int32_t) * (prog->ninsns ? prog->ninsns : 1),
                      sizeof(int16_t) * (spans * (size_t)batch + 1u), sizeof(px_tilebox) * bn, bn};
    size_t at[8], total = 0;
    for (int i = 0; i < 8; i++) {
        at[i] = total;
        total += (part[i] + 15u) & ~(size_t)15u;
    }
    uint8_t *mem = malloc(total);
    if (!mem)
        return pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)total);
    ex->plan_mem = mem;
    ex->level_flags = mem + at[0];
    ex->mask_counts = (int32_t **)memset(mem + at[1], 0, part[1]);
    ex->step_masks = mem + at[2];
    ex->step_mask_at = (uint32_t *)(void *)(mem + at[3]);
    ex->span_at = (int32_t *)(void *)(mem + at[4]);
    ex->spans_all = (int16_t *)(void *)(mem + at[5]);
    ex->box_all = (px_tilebox *)(void *)(mem + at[6]);
    ex->geom_known = memset(mem + at[7], 0, part[7]);
    if (like) { /* a sibling's plan: what the operands decide but the sizes, copied */
        memcpy(ex->step_masks, like->step_masks, part[2]);
        memcpy(ex->step_mask_at, like->step_mask_at, part[3]);
        memcpy(ex->span_at, like->span_at, part[4]);
        ex->spans_per_item = like->spans_per_item;
        for (int m = 0; m < prog->nslots; m++) { /* its masks' counts: their storage, built by the steps */
            size_t bytes = sizeof(int32_t) * ((size_t)prog->slots[m].w + 1u) * ((size_t)prog->slots[m].h + 1u);
            if (like->mask_counts[m] && !(ex->mask_counts[m] = malloc(bytes)))
                return pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)bytes);
        }
        return px__plan_tables(ex, err);
    }
    /* the masks each fetch step reads (a plan's batch reads one), listed once here rather than
     * found again every frame, and their counts' storage */
    for (uint32_t s = 0, at_mask = 0; s < prog->nsteps; s++) {
        const pxvm_step *st = &prog->steps[s];
        ex->step_mask_at[s] = at_mask;
        for (uint32_t i = st->first; i < st->first + st->count; i++) {
            const pxi_insn *in = &prog->insns[i];
            int fetch = pxi_facts(in->op)->plan == PXP_FETCH;
            int m = fetch ? pxvm_fetch_mask(in) : 0, listed = 0;
            for (uint32_t k = ex->step_mask_at[s]; k < at_mask; k++)
                listed |= ex->step_masks[k] == m;
            if (!m || listed)
                continue;
            ex->step_masks[at_mask++] = (uint8_t)m;
            if (!ex->mask_counts[m]) {
                size_t bytes = sizeof(int32_t) * ((size_t)prog->slots[m].w + 1u) * ((size_t)prog->slots[m].h + 1u);
                if (!(ex->mask_counts[m] = malloc(bytes)))
                    return pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)bytes);
            }
        }
        ex->step_masks[at_mask++] = 0;
    }
    ex->spans_per_item = 0;
    for (uint32_t i = 0; i < prog->ninsns; i++) {
        const pxi_insn *in = &prog->insns[i];
        int w = in->a[PX_FI(SAMPLE, w)], h = in->a[PX_FI(SAMPLE, h)];
        int some = (in->op == PX_OP_SAMPLE || in->op == PX_OP_ANISO) && pxvm_fetch_mask(in) && prog->insn_box[i].sole &&
                   w <= PX_PATCH_MAX_SIDE && h <= PX_PATCH_MAX_SIDE;
        ex->span_at[i] = some ? (int32_t)ex->spans_per_item : -1;
        ex->spans_per_item += some ? 2u * (size_t)(w + h) : 0;
    }
    return px__plan_tables(ex, err);
}
