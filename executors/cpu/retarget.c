/* retarget.c - the CPU executor's retarget (vm.h): the loaded program replaced by one that differs
 * only in the sizes of input slots and in operand values (checked by pxvm_check_retarget), without
 * a load. An input whose size changed keeps its storage when the new mip chain fits (storage only
 * grows: a stream of sizes settles on the largest, with no allocation after it) and is unbound;
 * what the operands decide (plan_load: masks, spans, RESIZE tables) is made again; slots that are
 * neither inputs nor persistent start again from their initial state (as after a load); the rest
 * stays: other bound or borrowed inputs, registers, persistent slots. */
#include <stdlib.h>
#include <string.h>

#include "cpu_executor.h"

static int px__same_size(const pxvm_slot *a, const pxvm_slot *b)
{
    return a->w == b->w && a->h == b->h && a->levels == b->levels;
}

/* Do two SAMPLE/ANISO/GATHER instructions differ in an operand? */
static int px__operands_differ(const pxi_insn *a, const pxi_insn *b)
{
    return a->nfields != b->nfields || memcmp(a->a, b->a, sizeof(int32_t) * a->nfields) != 0;
}

int px_cpu_retarget(pxvm_executor *ex, const pxvm_program *next, pxvm_error *err)
{
    const pxvm_program *old = ex->prog;
    if (pxvm_check_retarget(old, next, err) < 0)
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
    /* what the operands decide, for the next program (on failure, made again for the loaded one) */
    px_cpu_plan_unload(ex);
    ex->prog = next;
    if (px_cpu_plan_load(ex, err) < 0) {
        pxvm_error ignored;
        px_cpu_plan_unload(ex);
        ex->prog = old;
        px_cpu_plan_load(ex, &ignored); /* what the loaded program had a moment ago */
        for (size_t i = 0; grows && i < all; i++)
            free(grown[i]);
        free(grown);
        return -1;
    }
    for (size_t i = 0; i < all; i++) {
        int k = (int)(i % (size_t)n);
        const pxvm_slot *s = &next->slots[k];
        if (s->role != PXI_ROLE_INPUT || px__same_size(&old->slots[k], s))
            continue;
        if (grows && grown[i]) {
            free(ex->all_store[i]);
            ex->all_store[i] = grown[i];
            ex->store_cap[i] = s->bytes;
        } else if (s->levels > 1) { /* levels >= 1 start zeroed (the old level 0 lay there) */
            memset(ex->all_store[i] + s->level_offset[1], 0, (size_t)(s->bytes - s->level_offset[1]));
        }
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
    for (uint32_t i = 0; i < next->ninsns; i++) {
        const pxi_insn *in = &next->insns[i];
        int fetch = in->op == PX_OP_SAMPLE || in->op == PX_OP_ANISO || in->op == PX_OP_GATHER;
        if (fetch && pxvm_fetch_mask(in) && px__operands_differ(&old->insns[i], in)) {
            memset(ex->primed, 0, (size_t)ex->batch);
            break;
        }
    }
    return 0;
}
