/* runner.c - the runner of the public API (include/pxvm.h, "runners"): open, bind and borrow, run,
 * read, exec, and its video calls, with the checks a caller's arguments need before they reach an
 * executor. The API's other jobs have their own files in api/: errors.c, images.c, policy.c,
 * program.c, sizes.c (an any-size input's change of size), fixation.c and tokens.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../isa/px_sem.h"
#include "../vm/vm.h"
#include "../executors/registry.h"
#include "fixation.h"
#include "runner_hooks.h"
#include "internal.h"

/* ---- runners -------------------------------------------------------------------------------- */

int pxvm_runner_open(const pxvm_prog *prog, const char *executor, int device, int threads, int batch,
                     pxvm_runner **out)
{
    pxvm_error err;
    if (!prog || !out)
        return px__refuse(PXE_NULL_ARGUMENT, "pxvm_runner_open");
    *out = NULL;
    if (batch < 1 || batch > 65535)
        return px__refuse(PXE_RUNNER_BATCH);
    if (threads < 0 || device < 0)
        return px__refuse(PXE_RUNNER_NEGATIVE);
    if (!executor)
        executor = "cpu";
    pxvm_open_options oo = {threads, device};
    const pxvm_executor_ops *ops;
    pxvm_executor *ex;
    if (pxvm_executor_open_named(executor, &oo, &ops, &ex, NULL, &err) < 0)
        return px__fail(&err);
    pxvm_runner *r = calloc(1, sizeof *r);
    size_t regs = (size_t)batch * PX_FIX_REGS;
    if (r) {
        r->prog = prog, r->ops = ops, r->ex = ex, r->batch = batch, r->cur = &prog->p;
        r->fix_set = calloc((size_t)batch, 1);
        r->bound = calloc((size_t)prog->p.nslots * (size_t)batch, 1);
        r->borrowed = calloc((size_t)prog->p.nslots * (size_t)batch, 1);
        r->fix_kind = calloc(regs, 1);
        r->fix_q = calloc(regs * 2u, sizeof(int32_t));
        r->fix_n = calloc(regs * 2u, sizeof(double));
    }
    if (!r || !r->fix_set || !r->bound || !r->borrowed || !r->fix_kind || !r->fix_q || !r->fix_n) {
        pxvm_fail(&err, PXE_NOMEM, -1, -1, (unsigned long long)(sizeof *r + regs * 21u));
        pxvm_runner_close(r);
        if (!r)
            ops->close(ex);
        return px__fail(&err);
    }
    /* an any-size program runs its resolution at the reference size until another size is bound */
    if (prog->p.any_size && px__resolved(r, NULL, &r->cur, &err) < 0) {
        pxvm_runner_close(r);
        return px__fail(&err);
    }
    if (ops->load(ex, r->cur, batch, &err) < 0) {
        pxvm_runner_close(r);
        return px__fail(&err);
    }
    r->fix_inputs = pxvm_fixation_inputs(&prog->p, NULL);
    *out = r;
    return 0;
}

void pxvm_runner_close(pxvm_runner *run)
{
    if (!run)
        return;
    run->ops->close(run->ex);
    for (int i = 0; i < PXVM_RESOLVE_CACHE; i++)
        if (run->cache[i].wh) {
            free(run->cache[i].wh);
            pxvm_program_free(&run->cache[i].prog);
        }
    free(run->fix_set);
    free(run->bound);
    free(run->borrowed);
    free(run->fix_kind);
    free(run->fix_q);
    free(run->fix_n);
    free(run->fused);
    free(run);
}

const char *pxvm_runner_executor(const pxvm_runner *run) { return run ? run->ops->name : NULL; }
int pxvm_runner_batch(const pxvm_runner *run) { return run ? run->batch : 0; }

int pxvm_runner_set_stream(pxvm_runner *run, void *cuda_stream)
{
    pxvm_error err;
    if (!run || run->lost)
        return px__unusable(run, "pxvm_runner_set_stream");
    if (!run->ops->set_stream) {
        if (!cuda_stream)
            return 0;
        return px__refuse(PXE_RUNNER_STREAM);
    }
    return run->ops->set_stream(run->ex, cuda_stream, &err) < 0 ? px__fail(&err) : 0;
}

/* Does a bind of view to slot change the size of an any-size slot? */
PXVM_HOT static int px__needs_switch(const pxvm_runner *run, int slot, const pxvm_view *view)
{
    return run->prog->p.any_size && slot >= 1 && slot < run->cur->nslots && view &&
           (run->prog->p.slots[slot].flags & PXI_SLOT_ANYSIZE) &&
           (view->w != run->cur->slots[slot].w || view->h != run->cur->slots[slot].h);
}

/* Binds (borrow: borrows) a view, first switching an any-size slot to the view's size (after
 * every other check of the view: a refused bind leaves the runner as it was). */
PXVM_HOT int px__bind(pxvm_runner *run, int slot, int first_item, const pxvm_view *view, int borrow)
{
    pxvm_error err;
    int (*op)(pxvm_executor *, int, int, const pxvm_view *, pxvm_error *) =
        borrow && run->ops->borrow ? run->ops->borrow : run->ops->bind;
    if (px__needs_switch(run, slot, view)) {
        if (px__check_view_any_size(run, slot, first_item, view, &err) < 0 ||
            px__switch_size(run, slot, first_item, view->items, view->w, view->h, &err) < 0)
            return pxvm_error_at(px__fail(&err), slot, first_item, NULL);
    }
    if (op(run->ex, slot, first_item, view, &err) < 0)
        return pxvm_error_at(px__fail(&err), slot, first_item, NULL);
    for (int b = first_item; b < first_item + view->items && b < run->batch; b++) {
        size_t at = (size_t)slot * (size_t)run->batch + (size_t)b;
        run->bound[at] = 1;
        run->borrowed[at] = !borrow ? PX_NOT_BORROWED : run->in_exec ? PX_BORROWED_NOW : PX_BORROWED;
    }
    run->any_borrowed |= borrow;
    return 0;
}

/* Ends the borrows (pxvm_runner_borrow) of the kind `which` (PX_BORROWED_NOW: those of the exec
 * under way; PX_BORROWED: every one): the items are unbound and the executor forgets the caller's
 * memory, so nothing reads it once the call that ends the borrow returns. The exec's others become
 * borrows like any other. */
static void px__end_borrows(pxvm_runner *run, int which)
{
    if (!run->any_borrowed)
        return;
    int left = 0;
    for (int k = 0; k < run->cur->nslots; k++)
        for (int b = 0; b < run->batch; b++) {
            size_t at = (size_t)k * (size_t)run->batch + (size_t)b;
            if (run->borrowed[at] == PX_NOT_BORROWED)
                continue;
            if (which == PX_BORROWED_NOW && run->borrowed[at] != PX_BORROWED_NOW) {
                left = 1;
                continue;
            }
            run->borrowed[at] = PX_NOT_BORROWED;
            run->bound[at] = 0;
            if (!run->lost)
                run->ops->release(run->ex, k, b, 1);
        }
    run->any_borrowed = left;
}

PXVM_HOT int pxvm_runner_bind(pxvm_runner *run, int slot, int first_item, const pxvm_view *view)
{
    if (!run || run->lost)
        return px__unusable(run, "pxvm_runner_bind");
    return px__bind(run, slot, first_item, view, 0);
}

int pxvm_runner_borrow(pxvm_runner *run, int slot, int first_item, const pxvm_view *view)
{
    if (!run || run->lost)
        return px__unusable(run, "pxvm_runner_borrow");
    return px__bind(run, slot, first_item, view, 1);
}

int pxvm_runner_slot_size(const pxvm_runner *run, int slot, int *w, int *h)
{
    if (!run || !w || !h || slot < 0 || slot >= run->cur->nslots)
        return px__refuse(PXE_RUNNER_SLOT_SIZE);
    *w = run->cur->slots[slot].w, *h = run->cur->slots[slot].h;
    return 0;
}

static int px__run(pxvm_runner *run)
{
    pxvm_error err;
    for (int b = 0; run->fix_inputs && b < run->batch; b++)
        if ((run->fix_inputs & ~(unsigned)run->fix_set[b]) &&
            pxvm_fixation_check_set(&run->prog->p, run->prog->name, run->fix_set[b], run->batch > 1 ? b : -1, NULL,
                                    &err) < 0)
            return px__fail(&err);
    /* texel fixations keep their Q16 value across a change of size: checked against the size bound now */
    for (int b = 0; run->prog->p.any_size && b < run->batch; b++)
        for (int r = 0; r < PX_FIX_REGS; r++) {
            size_t at = (size_t)b * PX_FIX_REGS + (size_t)r;
            if (run->fix_kind[at] == PX_FIX_Q16 &&
                pxvm_fixation_check_q16(run->cur, run->fix_q + 2 * at, 1, b, r, 1, &err) < 0) {
                size_t n = strlen(err.msg);
                snprintf(err.msg + n, sizeof err.msg - n, "; it was set in texels at another size: set it again");
                return px__fail(&err);
            }
        }
    pxvm_run_options ro = {run->prog->lim.max_steps, NULL, NULL, NULL, NULL};
    /* what this run leaves unwritten; a run that fails may write nothing, so the atlases a run
     * before left unwritten stay unkept until a run succeeds */
    for (int k = 0; k <= PXVM_MAX_SLOTS; k++)
        run->ran_fused[k] |= run->fused_slot[k];
    if (run->ops->run(run->ex, &ro, &err) < 0)
        return px__fail(&err);
    memcpy(run->ran_fused, run->fused_slot, sizeof run->ran_fused);
    return 0;
}

int pxvm_runner_run(pxvm_runner *run)
{
    if (!run || run->lost)
        return px__unusable(run, "pxvm_runner_run");
    int rc = px__run(run);
    if (!run->keep_borrows)
        px__end_borrows(run, PX_BORROWED);
    return rc;
}

int pxvm_runner_keep_borrows(pxvm_runner *run, int keep)
{
    if (!run || (keep != 0 && keep != 1))
        return px__refuse(PXE_RUNNER_KEEP_BORROWS);
    if (run->keep_borrows && !keep) /* the promise that kept them is withdrawn: they end now */
        px__end_borrows(run, PX_BORROWED);
    run->keep_borrows = keep;
    return 0;
}

int pxvm_runner_read(pxvm_runner *run, int slot, int level, int first_item, const pxvm_view *dst)
{
    pxvm_error err;
    char lb[16];
    if (!run || run->lost)
        return px__unusable(run, "pxvm_runner_read");
    if (px__fused_read(run, slot, level, "pxvm_runner_read", &err) < 0)
        return px__fail(&err);
    /* an input's level 0 is the image bound, or nothing: never what a borrow or a size change left */
    if (level == 0 && slot >= 0 && slot < run->cur->nslots && run->cur->slots[slot].role == PXI_ROLE_INPUT && dst &&
        first_item >= 0 && dst->items >= 1 && first_item <= run->batch - dst->items)
        for (int b = first_item; b < first_item + dst->items; b++)
            if (!run->bound[(size_t)slot * (size_t)run->batch + (size_t)b])
                return pxvm_fail(&err, PXE_UNBOUND_INPUT, -1, -1, slot, pxvm_slot_label(run->cur, slot, lb),
                                 pxvm_slot_label(run->cur, slot, lb)),
                       px__fail(&err);
    return run->ops->read(run->ex, slot, level, first_item, dst, 0, &err) < 0 ? px__fail(&err) : 0;
}

int pxvm_runner_read_patches(pxvm_runner *run, int slot, int first_item, const pxvm_view *dst)
{
    pxvm_error err;
    if (!run || run->lost)
        return px__unusable(run, "pxvm_runner_read_patches");
    if (px__fused_read(run, slot, 0, "pxvm_runner_read_patches", &err) < 0)
        return px__fail(&err);
    return run->ops->read(run->ex, slot, 0, first_item, dst, 1, &err) < 0 ? px__fail(&err) : 0;
}

int pxvm_runner_sync(pxvm_runner *run)
{
    pxvm_error err;
    if (!run || run->lost)
        return px__unusable(run, "pxvm_runner_sync");
    if (!run->ops->sync)
        return 0;
    return run->ops->sync(run->ex, &err) < 0 ? px__fail(&err) : 0;
}

/* ---- fused EMBED ------------------------------------------------------------------------------ */

int px__fused_read(const pxvm_runner *run, int slot, int level, const char *call, pxvm_error *err)
{
    char lb[16];
    if (level != 0 || slot < 0 || slot >= run->cur->nslots || !(run->fused_slot[slot] || run->ran_fused[slot]))
        return 0;
    return pxvm_fail(err, PXE_FUSED_READ, -1, -1, call, (unsigned)slot, pxvm_slot_label(run->cur, slot, lb));
}

int pxvm_runner_fuse_embed(pxvm_runner *run, int on)
{
    pxvm_error err;
    if (!run || run->lost)
        return px__unusable(run, "pxvm_runner_fuse_embed");
    if (on != 0 && on != 1)
        return px__refuse(PXE_RUNNER_FUSE_ON, on);
    uint8_t *fused = NULL;
    if (on) {
        /* the rule reads slot roles and operands that no resolution changes: the program in use decides */
        fused = calloc(run->cur->ninsns ? run->cur->ninsns : 1, 1);
        if (!fused) {
            pxvm_fail(&err, PXE_NOMEM, -1, -1, (unsigned long long)run->cur->ninsns);
            return px__fail(&err);
        }
        if (pxvm_embed_fusion(run->cur, fused, &err) < 0) {
            free(fused);
            return px__fail(&err);
        }
    }
    if (run->ops->fuse_embed && run->ops->fuse_embed(run->ex, fused, &err) < 0) {
        free(fused);
        return px__fail(&err);
    }
    free(run->fused);
    run->fused = fused;
    memset(run->fused_slot, 0, sizeof run->fused_slot);
    for (uint32_t i = 0; fused && i < run->cur->ninsns; i++)
        if (fused[i])
            run->fused_slot[PX_ARG(&run->cur->insns[i], EMBED, src)] = 1;
    return 0;
}

/* pxvm_runner_exec's binds of one any-size slot are taken together: when they give every item of
 * the batch one new size (a batch given image by image), the runner switches once, before the
 * binds, instead of refusing the first one because the other items are bound at the old size. */
static int px__exec_switch(pxvm_runner *run, int nin, const int *in_slots, const int *in_items, const pxvm_view *ins)
{
    pxvm_error err;
    for (int i = 0; i < nin; i++) {
        int slot = in_slots[i], first = 1;
        for (int j = 0; j < i && first; j++)
            first = in_slots[j] != slot;
        if (!first || !px__needs_switch(run, slot, &ins[i]))
            continue;
        uint8_t *covered = calloc((size_t)run->batch, 1);
        if (!covered) {
            pxvm_fail(&err, PXE_NOMEM, -1, -1, (unsigned long long)run->batch);
            return px__fail(&err);
        }
        int one_size = 1, all = 1;
        for (int j = i; j < nin && one_size; j++) {
            if (in_slots[j] != slot)
                continue;
            int item = in_items ? in_items[j] : 0;
            if (ins[j].w != ins[i].w || ins[j].h != ins[i].h) {
                one_size = 0;
                break;
            }
            if (px__check_view_any_size(run, slot, item, &ins[j], &err) < 0) {
                free(covered);
                return pxvm_error_at(px__fail(&err), slot, item, NULL);
            }
            memset(covered + item, 1, (size_t)ins[j].items);
        }
        for (int b = 0; b < run->batch; b++)
            all &= covered[b];
        free(covered);
        /* otherwise the binds one by one say what is wrong (a mixed batch is refused there) */
        if (one_size && all && px__switch_size(run, slot, 0, run->batch, ins[i].w, ins[i].h, &err) < 0)
            return pxvm_error_at(px__fail(&err), slot, in_items ? in_items[i] : 0, NULL);
    }
    return 0;
}

int pxvm_runner_exec(pxvm_runner *run, int nin, const int *in_slots, const int *in_items, const pxvm_view *ins,
                     int nout, const int *out_slots, const int *out_kinds, const pxvm_view *outs)
{
    if (!run || nin < 0 || nout < 0 || (nin && (!in_slots || !ins)) || (nout && (!out_slots || !out_kinds || !outs)))
        return px__refuse(PXE_NULL_ARGUMENT, "pxvm_runner_exec");
    if (run->lost)
        return px__unusable(run, "pxvm_runner_exec");
    /* the borrows end when the call returns (kept borrows: when it fails): a failed call leaves
     * its inputs unbound, and none is read after it */
    int rc = px__exec_switch(run, nin, in_slots, in_items, ins);
    run->in_exec = 1;
    for (int i = 0; rc == 0 && i < nin; i++)
        rc = pxvm_runner_borrow(run, in_slots[i], in_items ? in_items[i] : 0, &ins[i]);
    run->in_exec = 0;
    if (rc == 0)
        rc = run->lost ? px__unusable(run, "pxvm_runner_exec") : px__run(run);
    for (int i = 0; rc == 0 && i < nout; i++)
        rc = out_kinds[i] ? pxvm_runner_read_patches(run, out_slots[i], 0, &outs[i])
                          : pxvm_runner_read(run, out_slots[i], 0, 0, &outs[i]);
    /* failed: its own borrows end (those kept from earlier calls stay); done: every borrow ends
     * unless kept, and the exec's become kept ones */
    if (rc || !run->keep_borrows)
        px__end_borrows(run, rc ? PX_BORROWED_NOW : PX_BORROWED);
    for (size_t at = 0; rc == 0 && run->keep_borrows && at < (size_t)run->cur->nslots * (size_t)run->batch; at++)
        if (run->borrowed[at] == PX_BORROWED_NOW)
            run->borrowed[at] = PX_BORROWED;
    return rc;
}

/* ---- video ----------------------------------------------------------------------------------- */

int pxvm_runner_set_dirty(pxvm_runner *run, int item, const pxvm_rect *rects, int n)
{
    pxvm_error err;
    if (!run || run->lost)
        return px__unusable(run, "pxvm_runner_set_dirty");
    return run->ops->set_dirty(run->ex, item, rects, n, &err) < 0 ? px__fail(&err) : 0;
}

int pxvm_runner_restart(pxvm_runner *run)
{
    pxvm_error err;
    if (!run || run->lost)
        return px__unusable(run, "pxvm_runner_restart");
    return run->ops->reset(run->ex, &err) < 0 ? px__fail(&err) : 0;
}

int pxvm_runner_read_changed(pxvm_runner *run, int slot, int first_item, int items, uint8_t *dst, int device)
{
    pxvm_error err;
    if (!run || run->lost)
        return px__unusable(run, "pxvm_runner_read_changed");
    return run->ops->read_state(run->ex, PXVM_STATE_CHANGED, slot, first_item, items, dst, device, &err) < 0
               ? px__fail(&err)
               : 0;
}

_Static_assert(PXVM_FIX_REGS == PX_FIX_REGS, "public and ISA register counts agree");
_Static_assert(PXVM_GEOM_INTS == PX_GEOM_INTS, "public and ISA geometry sizes agree");

void pxvm_runner_test_set_ops(pxvm_runner *run, const pxvm_executor_ops *ops) { run->ops = ops; }

int pxvm_runner_test_resolutions(const pxvm_runner *run, uint64_t *bytes)
{
    int n = 0;
    *bytes = 0;
    for (int i = 0; i < PXVM_RESOLVE_CACHE; i++)
        if (run->cache[i].wh)
            n++, *bytes += px__resolution_bytes(&run->cache[i].prog);
    return n;
}
