/* resources.c - the CPU executor's storage: open, load (every item's slots, each a whole mip
 * chain in host memory filled as a run starts, and the per-item state runs keep), unload, and
 * select (the item a run works on). */
#include <stdlib.h>
#include <string.h>

#include "cpu_executor.h"

int px_cpu_open(pxvm_executor **out, const pxvm_open_options *opt, pxvm_error *err)
{
    pxvm_executor *ex = calloc(1, sizeof *ex);
    if (!ex)
        return pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)sizeof *ex);
    ex->pool = px_pool_create(opt ? opt->threads : 0);
    *out = ex;
    return 0;
}

#define PX__DROP(p) (free(p), (p) = NULL)
void px_cpu_plan_unload(pxvm_executor *ex)
{
    for (int k = 0; ex->mask_counts && k < ex->nslots; k++)
        free(ex->mask_counts[k]);
    PX__DROP(ex->plan_mem); /* every array below lies in it */
    ex->level_flags = NULL, ex->mask_counts = NULL, ex->step_masks = NULL;
    ex->step_mask_at = NULL, ex->spans_all = NULL, ex->span_at = NULL, ex->box_all = NULL, ex->geom_known = NULL;
    px_cpu_resize_unload(ex);
}

/* Frees what load allocated and leaves every pointer NULL (load may fail part way; unload runs
 * again before the next load and at close). */
void px_cpu_unload(pxvm_executor *ex)
{
    for (int k = 0; ex->all_store && k < ex->nslots * ex->batch; k++)
        free(ex->all_store[k]);
    PX__DROP(ex->all_store);
    PX__DROP(ex->all_view);
    PX__DROP(ex->bound);
    PX__DROP(ex->fix_set);
    PX__DROP(ex->fix_all);
    PX__DROP(ex->geom_all);
    PX__DROP(ex->primed);
    PX__DROP(ex->changed_all);
    PX__DROP(ex->last_reg);
    PX__DROP(ex->rects);
    PX__DROP(ex->nrects);
    PX__DROP(ex->store_cap);
    PX__DROP(ex->wipe_pending);
    px_cpu_retarget_forget_plans(ex);
    px_cpu_plan_unload(ex);
    ex->store = NULL; /* an item's parts of the arrays above */
    ex->view = NULL;
    ex->prog = NULL;
}
#undef PX__DROP

void px_cpu_select(pxvm_executor *ex, int item)
{
    ex->store = ex->all_store + (size_t)item * (size_t)ex->nslots;
    ex->view = ex->all_view + (size_t)item * (size_t)ex->nslots;
    ex->fix = ex->fix_all + (size_t)item * PX_FIX_REGS * 2u;
    ex->geom = ex->geom_all + (size_t)item * pxvm_state_ints(ex->prog, PXVM_STATE_GEOMETRY);
    ex->changed = ex->changed_all + (size_t)item * (size_t)ex->prog->ngeom;
    ex->item = item;
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
        return px_cpu_resize_load(ex, err);
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
    return px_cpu_resize_load(ex, err);
}

int px_cpu_load(pxvm_executor *ex, const pxvm_program *prog, int batch, pxvm_error *err)
{
    if (ex->prog)
        px_cpu_unload(ex);
    ex->prog = prog;
    ex->nslots = prog->nslots;
    ex->ninsns = prog->ninsns;
    ex->batch = batch;
    size_t n = (size_t)prog->nslots * (size_t)batch;
    ex->all_store = calloc(n, sizeof(uint8_t *));
    ex->all_view = calloc(n, sizeof(px_cpu_src));
    ex->bound = calloc(n, 1);
    size_t nfix = (size_t)batch * PX_FIX_REGS * 2u, ngeom = (size_t)batch * (size_t)prog->ngeom;
    ex->fix_set = calloc(nfix, sizeof(int32_t));
    ex->fix_all = calloc(nfix, sizeof(int32_t));
    ex->geom_all = malloc((ngeom ? ngeom : 1) * PX_GEOM_INTS * sizeof(int32_t));
    if (ex->geom_all)
        pxvm_geometry_clear(ex->geom_all, ngeom);
    ex->primed = calloc((size_t)batch, 1);
    ex->changed_all = calloc(ngeom ? ngeom : 1, 1);
    ex->last_reg = calloc((size_t)batch * prog->ninsns * 2u, sizeof(int32_t));
    ex->rects = calloc((size_t)batch * PXVM_MAX_RECTS, sizeof(pxvm_rect));
    ex->nrects = malloc(sizeof(int) * (size_t)batch);
    for (int b = 0; ex->nrects && b < batch; b++)
        ex->nrects[b] = -1;
    if (!ex->all_store || !ex->all_view || !ex->bound || !ex->fix_set || !ex->fix_all || !ex->geom_all || !ex->primed ||
        !ex->changed_all || !ex->last_reg || !ex->rects || !ex->nrects) {
        px_cpu_unload(ex);
        return pxvm_fail(err, PXE_NOMEM, -1, -1, 0ull);
    }
    if (px_cpu_plan_load(ex, NULL, err) < 0) {
        px_cpu_unload(ex);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        int k = (int)(i % (size_t)prog->nslots);
        const pxvm_slot *s = &prog->slots[k];
        ex->all_store[i] = calloc((size_t)s->bytes, 1);
        if (!ex->all_store[i]) {
            unsigned long long b = (unsigned long long)s->bytes;
            px_cpu_unload(ex);
            return pxvm_fail(err, PXE_NOMEM, -1, -1, b);
        }
        if (s->role != PXI_ROLE_INPUT)
            pxvm_slot_initial(prog, k, ex->all_store[i]); /* the rest starts zeroed (calloc) */
        px_cpu_src *v = &ex->all_view[i];
        v->levels = s->levels;
        for (int l = 0; l < s->levels; l++) {
            v->level[l] = ex->all_store[i] + s->level_offset[l];
            v->w[l] = px_mip_dim(s->w, l);
            v->h[l] = px_mip_dim(s->h, l);
        }
    }
    return 0;
}
