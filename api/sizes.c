/* sizes.c - how a runner changes the size of an any-size input: the program resolved at the new
 * size (a cache under the program's memory budget), the executor retargeted to it, the host's
 * fixations given again, and the runner reloaded when a retarget fails. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixation.h"
#include "internal.h"

/* ---- runners: any-size programs --------------------------------------------------------------- */

/* What a kept resolution holds: its program image (a copy of the program's, operands rescaled) and
 * its tables, which grow with the image and the instructions. */
uint64_t px__resolution_bytes(const pxvm_program *p)
{
    return (uint64_t)p->image.w * (uint64_t)p->image.h * 4u + (uint64_t)p->ninsns * (sizeof(pxi_insn) + 64u) +
           (uint64_t)p->nslots * sizeof(pxvm_slot);
}

/* The resolution of the runner's program at wh (NULL: every reference size), from the cache or
 * made now (replacing the least recently used entry that the executor does not run). The entries
 * kept hold at most the program's memory limit together (max_memory, the one budget): older ones
 * are dropped to make room, the one the executor runs never. */
int px__resolved(pxvm_runner *run, const int *wh, const pxvm_program **out, pxvm_error *err)
{
    const pxvm_program *poly = &run->prog->p;
    size_t n = (size_t)poly->nslots * 2u;
    int want[2 * (PXVM_MAX_SLOTS + 1)];
    for (int k = 0; k < poly->nslots; k++) /* the full key: every slot's size */
        for (int c = 0; c < 2; c++)
            want[2 * k + c] = wh && (wh[2 * k] || wh[2 * k + 1]) ? wh[2 * k + c] : c ? poly->slots[k].h : poly->slots[k].w;
    want[0] = want[1] = 0;
    for (int i = 0; i < PXVM_RESOLVE_CACHE; i++) {
        px_resolved *e = &run->cache[i];
        if (e->wh && !memcmp(e->wh, want, n * sizeof(int))) {
            e->used = ++run->clock;
            *out = &e->prog;
            return 0;
        }
    }
    /* the least recently used entries the executor does not run are emptied until the new one has
     * an empty entry and, holding about what the program's image and tables take, fits the budget
     * with those kept; emptied first, so that it takes the memory they held (no page first touched) */
    uint64_t need = px__resolution_bytes(poly), kept = 0;
    for (int i = 0; i < PXVM_RESOLVE_CACHE; i++)
        kept += run->cache[i].wh ? px__resolution_bytes(&run->cache[i].prog) : 0;
    px_resolved *slot;
    for (;;) {
        px_resolved *old = NULL;
        slot = NULL;
        for (int i = 0; i < PXVM_RESOLVE_CACHE; i++) {
            px_resolved *e = &run->cache[i];
            if (!e->wh)
                slot = slot ? slot : e;
            else if (&e->prog != run->cur && (!old || e->used < old->used))
                old = e;
        }
        if (!old || (slot && kept + need <= run->prog->lim.max_memory))
            break;
        kept -= px__resolution_bytes(&old->prog);
        free(old->wh);
        old->wh = NULL;
        pxvm_program_free(&old->prog);
    }
    if (!slot) /* every entry is the one running: not with more than one entry */
        return pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)need);
    pxvm_program res;
    if (pxvm_program_resolve(poly, want, &run->prog->lim, &res, err) < 0)
        return -1;
    int *key = malloc(n * sizeof(int));
    if (!key) {
        pxvm_program_free(&res);
        return pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)(n * sizeof(int)));
    }
    memcpy(key, want, n * sizeof(int));
    slot->wh = key, slot->prog = res, slot->used = ++run->clock;
    *out = &slot->prog;
    return 0;
}

/* Gives the executor the fixations the host set again, at the size of run->cur: normalized ones
 * converted anew (they are fractions of the bound image), and, after a reload (`all`), Q16 ones. */
PXVM_HOT static int px__refix(pxvm_runner *run, int all, pxvm_error *err)
{
    if (!all && !run->fix_normalized_ever) /* nothing to convert anew: no pass over every register */
        return 0;
    for (int b = 0; b < run->batch; b++)
        for (int r = 0; r < PX_FIX_REGS; r++) {
            size_t at = (size_t)b * PX_FIX_REGS + (size_t)r;
            int32_t q[2] = {run->fix_q[2 * at], run->fix_q[2 * at + 1]};
            if (run->fix_kind[at] == PX_FIX_NORMALIZED) {
                if (pxvm_fixation_convert(run->cur, run->fix_n + 2 * at, 0, q, "fixation", NULL, err) < 0)
                    return -1;
                run->fix_q[2 * at] = q[0], run->fix_q[2 * at + 1] = q[1];
            } else if (run->fix_kind[at] != PX_FIX_Q16 || !all) {
                continue;
            }
            if (run->ops->set_fixations(run->ex, b, 1, r, 1, q, -1, err) < 0)
                return -1;
        }
    return 0;
}

/* The fusion set (pxvm_runner_fuse_embed) given again to an executor that loaded the program anew. */
static int px__fuse_again(pxvm_runner *run, pxvm_error *err)
{
    return run->fused && run->ops->fuse_embed ? run->ops->fuse_embed(run->ex, run->fused, err) : 0;
}

/* After a failed retarget the executor may hold anything from the old program to part of the next
 * one to none (the CUDA-GL executor unloads on a failure halfway): the runner loads its current
 * program again, so that it runs what it believes, with no input bound and the fixations the host
 * gave set again (device ones forgotten: unset); if even that fails it is marked lost and refuses
 * every later call but close. Returns -1 (the retarget's error stays the caller's). */
static int px__retarget_failed(pxvm_runner *run, int slot, pxvm_error *err)
{
    pxvm_error again;
    memset(run->bound, 0, (size_t)run->prog->p.nslots * (size_t)run->batch);
    for (int b = 0; b < run->batch; b++)
        for (int r = 0; r < PX_FIX_REGS; r++)
            if (run->fix_kind[(size_t)b * PX_FIX_REGS + (size_t)r] == PX_FIX_DEVICE) {
                run->fix_kind[(size_t)b * PX_FIX_REGS + (size_t)r] = PX_FIX_NONE;
                run->fix_set[b] = (uint8_t)(run->fix_set[b] & ~(1u << r));
            }
    if (run->ops->load(run->ex, run->cur, run->batch, &again) < 0 || px__refix(run, 1, &again) < 0 ||
        px__fuse_again(run, &again) < 0) {
        run->lost = 1;
        size_t n = strlen(err->msg);
        snprintf(err->msg + n, sizeof err->msg - n, "; loading the program again failed too (%s): the runner is lost",
                 again.msg);
    } else {
        memset(run->ran_fused, 0, sizeof run->ran_fused); /* loaded anew: every atlas zeros */
        size_t n = strlen(err->msg);
        snprintf(err->msg + n, sizeof err->msg - n, "; the runner stays at %dx%d with no input bound",
                 run->cur->slots[slot].w, run->cur->slots[slot].h);
    }
    return -1;
}

/* Every check an executor's bind makes of `view` (items first_item..) for slot `slot` but its size:
 * made before a change of size, so that a bind refused for any other reason changes nothing. */
PXVM_HOT int px__check_view_any_size(const pxvm_runner *run, int slot, int first_item, const pxvm_view *view,
                                            pxvm_error *err)
{
    pxvm_view same = *view;
    same.w = run->cur->slots[slot].w, same.h = run->cur->slots[slot].h;
    if (pxvm_check_bind(run->cur, run->batch, slot, first_item, &same, err) < 0)
        return -1;
    if (view->device >= 0 && !run->ops->device_views) /* the CPU executor's one refusal after the check */
        return pxvm_fail(err, PXE_HOST_ONLY_BIND, -1, -1, "input");
    return 0;
}

/* wh (pxvm_program_resolve's) for the runner's sizes with `slot` at w x h */
static void px__sizes_wanted(const pxvm_runner *run, int slot, int w, int h, int *wh)
{
    for (int k = 0; k < run->cur->nslots; k++)
        wh[2 * k] = run->cur->slots[k].w, wh[2 * k + 1] = run->cur->slots[k].h;
    wh[0] = wh[1] = 0;
    wh[2 * slot] = w, wh[2 * slot + 1] = h;
}

/* A bind of a w x h image to items first_item .. first_item+items-1 of any-size slot `slot`, at a
 * size other than the runner's: checks the bounds (U-BIND-4) and the batch (every other bound item
 * would keep the old size), then switches the executor to the resolution at the new size (which
 * checks U-BIND-5 and U-BIND-6): the one way a size changes, for every program. */
__attribute__((noinline)) static int px__switch_by_resolution(pxvm_runner *run, int slot, int w, int h,
                                                             pxvm_error *err);

/* Whether items first_item .. first_item+items-1 of any-size slot `slot` may take w x h: its
 * bounds (U-BIND-4), and no other item bound at the old size. pxvm_runner_bind_resized asks it
 * before its resize, so that a size refused costs no resize (nor its memory). */
int px__size_allowed(const pxvm_runner *run, int slot, int first_item, int items, int w, int h,
                            pxvm_error *err)
{
    const pxvm_program *poly = &run->prog->p;
    char lb[16];
    if (pxvm_anysize_check(poly, slot, w, h, err) < 0)
        return -1;
    for (int b = 0; b < run->batch; b++)
        if ((b < first_item || b >= first_item + items) && run->bound[(size_t)slot * (size_t)run->batch + (size_t)b])
            return pxvm_fail(err, PXE_INPUT_BATCH_SIZE, -1, -1, w, h, first_item, first_item + items - 1,
                             (unsigned)slot, pxvm_slot_label(poly, slot, lb), b, run->cur->slots[slot].w,
                             run->cur->slots[slot].h);
    return 0;
}

PXVM_HOT int px__switch_size(pxvm_runner *run, int slot, int first_item, int items, int w, int h,
                                    pxvm_error *err)
{
    if (px__size_allowed(run, slot, first_item, items, w, h, err) < 0)
        return -1;
    return px__switch_by_resolution(run, slot, w, h, err);
}

/* px__switch_size's change by a resolution of the program at the new size (kept: px__resolved),
 * switched to by the executor's retarget */
static int px__switch_by_resolution(pxvm_runner *run, int slot, int w, int h, pxvm_error *err)
{
    const pxvm_program *next;
    int wh[2 * (PXVM_MAX_SLOTS + 1)];
    px__sizes_wanted(run, slot, w, h, wh);
    if (px__resolved(run, wh, &next, err) < 0)
        return -1;
    if (!run->ops->retarget) /* both executors have it; an executor of a test may not */
        return pxvm_fail(err, PXE_RETARGET_NONE, -1, -1);
    if (run->ops->retarget(run->ex, next, err) < 0)
        return px__retarget_failed(run, slot, err);
    run->cur = next;
    memset(run->bound + (size_t)slot * (size_t)run->batch, 0, (size_t)run->batch);
    /* a switch zeroes every atlas a fused run left unwritten (it reads as after a load, SPEC 2) */
    memset(run->ran_fused, 0, sizeof run->ran_fused);
    return px__refix(run, 0, err);
}
