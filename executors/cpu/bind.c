/* bind.c - inputs into the CPU executor's slots: bind converts and copies the caller's images
 * (host memory only), borrow reads a packed RGBA8 host image in place until the borrow ends. */
#include "cpu_executor.h"

int px_cpu_bind(pxvm_executor *ex, int slot, int item0, const pxvm_view *v, pxvm_error *err)
{
    if (pxvm_check_bind(ex->prog, ex->batch, slot, item0, v, err) < 0)
        return -1;
    if (v->device >= 0)
        return pxvm_fail(err, PXE_HOST_ONLY_BIND, -1, -1, "input");
    for (int i = 0; i < v->items; i++) {
        size_t at = (size_t)(item0 + i) * (size_t)ex->nslots + (size_t)slot;
        pxvm_view_to_rgba(v, i, ex->all_store[at]);
        ex->all_view[at].level[0] = ex->all_store[at] + ex->prog->slots[slot].level_offset[0]; /* not borrowed now */
        ex->bound[at] = 1;
        if (ex->wipe_pending) /* level 0 written whole: a retarget's pending zeroing of it is moot */
            ex->wipe_pending[at] &= (uint8_t)~PXVM_RESET_LEVEL0;
    }
    return 0;
}

/* pxvm_runner_borrow: nothing writes an input's level 0, so a packed RGBA8 host image is read in
 * place (the slot's level 0 is the caller's memory until the next bind); anything else is bound. */
int px_cpu_borrow(pxvm_executor *ex, int slot, int item0, const pxvm_view *v, pxvm_error *err)
{
    if (!v || v->device >= 0 || !pxvm_view_is_packed_rgba(v)) /* bind checks the arguments */
        return px_cpu_bind(ex, slot, item0, v, err);
    if (pxvm_check_bind(ex->prog, ex->batch, slot, item0, v, err) < 0)
        return -1;
    for (int i = 0; i < v->items; i++) {
        size_t at = (size_t)(item0 + i) * (size_t)ex->nslots + (size_t)slot;
        ex->all_view[at].level[0] = (const uint8_t *)v->data + (size_t)i * (size_t)v->item_stride;
        ex->bound[at] = 1;
        if (ex->wipe_pending)
            ex->wipe_pending[at] &= (uint8_t)~PXVM_RESET_LEVEL0;
    }
    return 0;
}

/* The end of a borrow: the items read the slot's own storage again (as after a bind, but holding
 * nothing bound), so nothing keeps the caller's address. */
void px_cpu_release(pxvm_executor *ex, int slot, int item0, int items)
{
    if (!ex->prog)
        return;
    for (int i = item0; i < item0 + items; i++) {
        size_t at = (size_t)i * (size_t)ex->nslots + (size_t)slot;
        ex->all_view[at].level[0] = ex->all_store[at] + ex->prog->slots[slot].level_offset[0];
        ex->bound[at] = 0;
    }
}
