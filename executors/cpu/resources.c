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

void px_cpu_restore(pxvm_executor *ex, int k, uint8_t *store, unsigned parts)
{
    const pxvm_slot *s = &ex->prog->slots[k];
    size_t l0 = (size_t)s->w * (size_t)s->h * 4u;
    if (parts & PXVM_RESET_LEVEL0)
        pxvm_slot_initial(ex->prog, k, store);
    if ((parts & PXVM_RESET_UPPER) && s->bytes > l0)
        memset(store + l0, 0, (size_t)s->bytes - l0);
}

void px_cpu_wipe_flush(pxvm_executor *ex)
{
    if (!ex->wipe_pending)
        return;
    size_t all = (size_t)ex->nslots * (size_t)ex->batch;
    for (size_t i = 0; i < all; i++)
        if (ex->wipe_pending[i]) {
            px_cpu_restore(ex, (int)(i % (size_t)ex->nslots), ex->all_store[i], ex->wipe_pending[i]);
            ex->wipe_pending[i] = 0;
        }
}
