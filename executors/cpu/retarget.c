/* retarget.c - the CPU executor's retarget (vm.h): the loaded program replaced by one that differs
 * only in the sizes of input slots and in operand values (checked by pxvm_check_retarget), without
 * a load. An input whose size changed keeps its storage when the new mip chain fits (storage only
 * grows: a stream of sizes settles on the largest, with no allocation after it) and is unbound;
 * what the operands decide (plan_load: masks, spans, RESIZE tables, EMBED packs) is made again; slots that are
 * neither inputs nor persistent start again from their initial state (as after a load); the rest
 * stays: other bound or borrowed inputs, registers, persistent slots. */
#include <stdlib.h>
#include <string.h>

#include "cpu_executor.h"

static int px__same_size(const pxvm_slot *a, const pxvm_slot *b)
{
    return a->w == b->w && a->h == b->h && a->levels == b->levels;
}

/* Exchanges the executor's plan fields with a kept entry's (the serial stays with the entry). */
static void px__plan_swap(pxvm_executor *ex, px_cpu_plan_kept *k)
{
#define PX__SWAP(f)                                                                                                    \
    do {                                                                                                               \
        __typeof__(k->f) t_ = k->f;                                                                                    \
        k->f = ex->f;                                                                                                  \
        ex->f = t_;                                                                                                    \
    } while (0)
    PX__SWAP(plan_mem);
    PX__SWAP(level_flags);
    PX__SWAP(mask_counts);
    PX__SWAP(step_masks);
    PX__SWAP(step_mask_at);
    PX__SWAP(box_all);
    PX__SWAP(geom_known);
    PX__SWAP(spans_all);
    PX__SWAP(span_at);
    PX__SWAP(spans_per_item);
    PX__SWAP(resize);
    PX__SWAP(resize_tmp);
    PX__SWAP(embed);
#undef PX__SWAP
}

/* Frees a kept entry's plan (px_cpu_plan_unload on it) and empties it. */
static void px__plan_drop(pxvm_executor *ex, px_cpu_plan_kept *k)
{
    px__plan_swap(ex, k);
    px_cpu_plan_unload(ex);
    px__plan_swap(ex, k); /* the executor's own plan back; the entry all NULL */
    k->serial = 0;
}

void px_cpu_retarget_forget_plans(pxvm_executor *ex)
{
    for (int i = 0; ex->plans_kept && i < PX_CPU_PLANS_KEPT; i++)
        if (ex->plans_kept[i].serial)
            px__plan_drop(ex, &ex->plans_kept[i]);
    free(ex->plans_kept);
    ex->plans_kept = NULL;
    ex->plan_evict = 0;
}

/* The kept plan of program serial `serial` (0: none), or NULL. */
static px_cpu_plan_kept *px__plan_find(pxvm_executor *ex, uint64_t serial)
{
    for (int i = 0; serial && ex->plans_kept && i < PX_CPU_PLANS_KEPT; i++)
        if (ex->plans_kept[i].serial == serial)
            return &ex->plans_kept[i];
    return NULL;
}

/* The plan of `next` (checked already) in the executor, the loaded one's kept (when it has a
 * serial). Taking a kept one allocates nothing. 0, or -1 with *err and the executor's plan as it
 * was. */
static int px__plan_switch(pxvm_executor *ex, const pxvm_program *old, const pxvm_program *next, pxvm_error *err)
{
    if (next->serial && next->serial == old->serial) { /* the same program: the same plan */
        memset(ex->geom_known, 0, (size_t)ex->batch * next->ninsns + 1u);
        return 0;
    }
    if (!ex->plans_kept && !(ex->plans_kept = calloc(PX_CPU_PLANS_KEPT, sizeof *ex->plans_kept)))
        return pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)(PX_CPU_PLANS_KEPT * sizeof *ex->plans_kept));
    px_cpu_plan_kept *hit = px__plan_find(ex, next->serial), *empty = NULL;
    for (int i = 0; !hit && !empty && i < PX_CPU_PLANS_KEPT; i++)
        if (!ex->plans_kept[i].serial)
            empty = &ex->plans_kept[i];
    if (hit) { /* the entry takes the loaded plan: it kept next's, now old's */
        px__plan_swap(ex, hit);
        hit->serial = old->serial;
        if (!old->serial)
            px__plan_drop(ex, hit);
        /* the incremental fetches' boxes and spans were for positions of another program */
        memset(ex->geom_known, 0, (size_t)ex->batch * next->ninsns + 1u);
        return 0;
    }
    if (!empty) { /* full: the next entry in turn makes room */
        empty = &ex->plans_kept[ex->plan_evict];
        ex->plan_evict = (ex->plan_evict + 1) % PX_CPU_PLANS_KEPT;
        px__plan_drop(ex, empty);
    }
    px__plan_swap(ex, empty); /* the loaded plan kept; the executor's fields all NULL */
    empty->serial = old->serial;
    const pxvm_program *loaded = ex->prog;
    int sibling = old->resolved_from && old->resolved_from == next->resolved_from; /* empty holds old's plan */
    ex->prog = next;
    if (px_cpu_plan_load(ex, sibling ? empty : NULL, err) < 0) {
        px_cpu_plan_unload(ex);
        ex->prog = loaded;
        px__plan_swap(ex, empty); /* what the loaded program had a moment ago */
        empty->serial = 0;
        return -1;
    }
    ex->prog = loaded; /* retarget sets it once the rest is made */
    if (!old->serial)
        px__plan_drop(ex, empty);
    return 0;
}

int px_cpu_retarget(pxvm_executor *ex, const pxvm_program *next, pxvm_error *err)
{
    const pxvm_program *old = ex->prog;
    /* A program whose plan is kept passed this check against the loaded program when it was
     * switched to (and the loaded one itself, the same program again, trivially): the check is an
     * equivalence (equal counts, roles, names, non-input sizes, opcodes), so each passes it
     * against the other. */
    int known = old && next && next->serial && (next->serial == old->serial || px__plan_find(ex, next->serial));
    if (!known && pxvm_check_retarget(old, next, err) < 0)
        return -1;
    int n = ex->nslots;
    size_t all = (size_t)n * (size_t)ex->batch;
    if (!ex->store_cap) { /* first retarget: every slot holds exactly its bytes */
        if (!(ex->store_cap = malloc(sizeof(uint64_t) * all)))
            return pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)(sizeof(uint64_t) * all));
        for (size_t i = 0; i < all; i++)
            ex->store_cap[i] = old->slots[i % (size_t)n].bytes;
    }
    if (!ex->wipe_pending && !(ex->wipe_pending = calloc(all, 1)))
        return pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)all);
    /* the larger storage every changed input needs, all made before anything changes (a failure
     * leaves the executor as it was) */
    int grows = 0; /* a switch to sizes seen before allocates nothing */
    for (size_t i = 0; i < all; i++)
        grows |= next->slots[i % (size_t)n].role == PXI_ROLE_INPUT && next->slots[i % (size_t)n].bytes > ex->store_cap[i];
    uint8_t **grown = grows ? calloc(all, sizeof(uint8_t *)) : NULL;
    if (grows && !grown)
        return pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)(all * sizeof(uint8_t *)));
    for (size_t i = 0; grows && i < all; i++) {
        const pxvm_slot *s = &next->slots[i % (size_t)n];
        if (s->role != PXI_ROLE_INPUT || s->bytes <= ex->store_cap[i])
            continue;
        if (!(grown[i] = calloc((size_t)s->bytes, 1))) {
            for (size_t j = 0; j < i; j++)
                free(grown[j]);
            free(grown);
            return pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)s->bytes);
        }
    }
    /* what the operands decide, for the next program (kept from before, or made) */
    if (px__plan_switch(ex, old, next, err) < 0) {
        for (size_t i = 0; grows && i < all; i++)
            free(grown[i]);
        free(grown);
        return -1;
    }
    ex->prog = next;
    for (size_t i = 0; i < all; i++) {
        int k = (int)(i % (size_t)n);
        const pxvm_slot *s = &next->slots[k];
        if (s->role != PXI_ROLE_INPUT || px__same_size(&old->slots[k], s))
            continue;
        if (grows && grown[i]) {
            free(ex->all_store[i]);
            ex->all_store[i] = grown[i];
            ex->store_cap[i] = s->bytes;
        } else if (s->levels > 1) { /* levels >= 1 start zeroed (the old level 0 lay there): left
                                      * pending, and a run that rebuilds them first skips it */
            ex->wipe_pending[i] |= PXVM_RESET_UPPER;
        }
        ex->wipe_pending[i] |= PXVM_RESET_LEVEL0; /* unbound, it reads as zero as after a load (a bind
                                                 * writes it whole: px_cpu_bind drops this) */
        px_cpu_src *v = &ex->all_view[i];
        memset(v, 0, sizeof *v);
        v->levels = s->levels;
        for (int l = 0; l < s->levels; l++) {
            v->level[l] = ex->all_store[i] + s->level_offset[l];
            v->w[l] = px_mip_dim(s->w, l);
            v->h[l] = px_mip_dim(s->h, l);
        }
        ex->bound[i] = 0; /* a borrowed image is forgotten with it */
    }
    free(grown);
    /* every other slot but persistent ones back to its initial state: a run restores only what
     * the next program's own runs change (prog->reset), not what the loaded one wrote (an output
     * it wrote whole, that the next one writes in part); and the program image holds the
     * operands: slot 0 and data slots start as the next one's. Left pending (wipe_pending): the
     * next run restores it as it starts, with its own reset, so a switch touches no slot's
     * bytes and a part the run restores anyway is written once; a read or tokens before that
     * run restores it first (px_cpu_wipe_flush) */
    for (size_t i = 0; i < all; i++) {
        const pxvm_slot *s = &next->slots[i % (size_t)n];
        if (s->role != PXI_ROLE_INPUT && !(s->flags & PXI_SLOT_PERSIST))
            ex->wipe_pending[i] = (uint8_t)(PXVM_RESET_LEVEL0 | (s->levels > 1 ? PXVM_RESET_UPPER : 0u));
    }
    /* an incremental fetch whose operands changed has no last output to build on: every item
     * samples it whole next time, as after a load */
    for (uint32_t i = 0; next->insn_box && i < next->ninsns; i++) { /* none without (vm.h) */
        const pxi_insn *in = &next->insns[i];
        int fetch = in->op == PX_OP_SAMPLE || in->op == PX_OP_ANISO || in->op == PX_OP_GATHER;
        if (fetch && pxvm_fetch_mask(in) && pxvm_fetch_differs(old, next, i)) {
            memset(ex->primed, 0, (size_t)ex->batch);
            break;
        }
    }
    return 0;
}
