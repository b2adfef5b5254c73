/* tokens.c - tokens for models: a runner's atlas read as float tokens, ragged batches (images of
 * any size resized by a policy and cut into tiles) and a bind resized by a policy. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../vm/resize.h"
#include "../vm/tokens.h"
#include "../vm/ragged.h"
#include "internal.h"

/* ---- tokens for models ----------------------------------------------------------------------- */

int pxvm_token_format_preset(const char *name, pxvm_token_format *fmt)
{
    pxvm_error err;
    if (!name || !fmt)
        return px__refuse(PXE_NULL_ARGUMENT, "pxvm_token_format_preset");
    return pxvm_token_preset(name, fmt, &err) < 0 ? px__fail(&err) : 0;
}

int pxvm_runner_read_tokens(pxvm_runner *run, int slot, int first_item, int items, const pxvm_token_format *fmt,
                            void *dst, int dst_device)
{
    pxvm_error err;
    if (!run || run->lost)
        return px__unusable(run, "pxvm_runner_read_tokens");
    if (!fmt)
        return px__refuse(PXE_NULL_ARGUMENT, "pxvm_runner_read_tokens");
    if (!run->ops->read_tokens)
        return px__refuse(PXE_EXECUTOR_NO_TOKENS);
    if (px__fused_read(run, slot, 0, "pxvm_runner_read_tokens", &err) < 0)
        return px__fail(&err);
    pxvm_token_table *t = malloc(sizeof *t); /* 4 KiB of values: not on the caller's stack */
    if (!t) {
        pxvm_fail(&err, PXE_NOMEM, -1, -1, (unsigned long long)sizeof *t);
        return px__fail(&err);
    }
    int rc = pxvm_token_table_build(fmt, t, &err) < 0 ||
                     run->ops->read_tokens(run->ex, slot, first_item, items, t, dst, dst_device, &err) < 0
                 ? px__fail(&err)
                 : 0;
    free(t);
    return rc;
}

int pxvm_ragged_plan(const char *policy, int patch, int out_w, int out_h, int n, const int *wh, int *out_wh,
                    int64_t *offsets, int *failed)
{
    pxvm_error err;
    px_policy pol;
    return px_ragged_sizes(policy, patch, out_w, out_h, n, wh, &pol, out_wh, offsets, failed, &err) < 0 ? px__fail(&err)
                                                                                                      : 0;
}

int pxvm_runner_ragged(pxvm_runner *run, int n, const pxvm_view *images, pxvm_ragged *t)
{
    pxvm_error err;
    if (t)
        t->failed = -1;
    if (!run || run->lost)
        return px__unusable(run, "pxvm_runner_ragged");
    if (!run->ops->ragged)
        return px__refuse(PXE_EXECUTOR_NO_RAGGED);
    pxvm_token_table *table = t && t->fmt ? malloc(sizeof *table) : NULL; /* 4 KiB: not on the stack */
    if (t && t->fmt && !table) {
        pxvm_fail(&err, PXE_NOMEM, -1, -1, (unsigned long long)sizeof *table);
        return px__fail(&err);
    }
    px_ragged_job job;
    int rc = px_ragged_prepare(&job, n, images, t, table, run->prog->lim.max_memory, &err) < 0 ||
                     run->ops->ragged(run->ex, &job, &err) < 0
                 ? px__fail(&err)
                 : 0;
    px_ragged_job_free(&job);
    free(table);
    return rc;
}

int pxvm_runner_bind_resized(pxvm_runner *run, int slot, int first_item, const pxvm_view *view, const char *policy,
                             int out_w, int out_h)
{
    pxvm_error err;
    if (!run || run->lost)
        return px__unusable(run, "pxvm_runner_bind_resized");
    if (!view || !policy)
        return px__refuse(PXE_NULL_ARGUMENT, "pxvm_runner_bind_resized");
    if (!run->ops->ragged || !run->ops->scratch)
        return px__refuse(PXE_EXECUTOR_NO_RESIZE);
    if (slot < 1 || slot >= run->cur->nslots || run->cur->slots[slot].role != PXI_ROLE_INPUT)
        return px__refuse(PXE_BIND_RESIZED_SLOT);
    px_policy pol;
    if (px_policy_parse(policy, &pol, &err) < 0)
        return px__fail(&err);
    if (pol.kind == PX_POLICY_NATIVE || pol.kind == PX_POLICY_DYNAMIC)
        return px__refuse(PXE_BIND_RESIZED_POLICY);
    int any = (run->prog->p.slots[slot].flags & PXI_SLOT_ANYSIZE) != 0;
    if (!out_w && !out_h) {
        if (any)
            return px__refuse(PXE_BIND_RESIZED_ANY);
        out_w = run->cur->slots[slot].w, out_h = run->cur->slots[slot].h;
    } else if (!any && (out_w != run->cur->slots[slot].w || out_h != run->cur->slots[slot].h)) {
        return pxvm_error_at(px__refuse(PXE_BIND_RESIZED_SIZE, slot, run->cur->slots[slot].w, run->cur->slots[slot].h,
                                        out_w, out_h),
                             slot, first_item, NULL); /* the bind's fields, as px__bind's failures */
    }
    if (pxvm_check_input_view(run->batch, first_item, view, &err) < 0 ||
        (any && (out_w != run->cur->slots[slot].w || out_h != run->cur->slots[slot].h) &&
         px__size_allowed(run, slot, first_item, view->items, out_w, out_h, &err) < 0))
        return pxvm_error_at(px__fail(&err), slot, first_item, NULL);
    int n = view->items;
    pxvm_view *one = malloc(sizeof *one * (size_t)n);
    if (!one) {
        pxvm_fail(&err, PXE_NOMEM, -1, -1, (unsigned long long)n * sizeof *one);
        return px__fail(&err);
    }
    for (int b = 0; b < n; b++) /* the items as images of one item each */
        one[b] = *view, one[b].items = 1, one[b].data = (uint8_t *)view->data + (int64_t)b * view->item_stride;
    size_t bytes = (size_t)out_w * (size_t)out_h * 4u * (size_t)n; /* sides <= 2^24 checked by the plan below */
    pxvm_ragged t = {policy, 1, out_w, out_h, NULL, NULL, -1, 0, -1, 0, 0};
    px_ragged_job job;
    int64_t off[2];
    int wh[2] = {view->w, view->h}, rc;
    if (px_ragged_sizes(policy, 1, out_w, out_h, 1, wh, &pol, NULL, off, NULL, &err) < 0 ||
        run->ops->scratch(run->ex, bytes, &t.dst, &t.dst_device, &err) < 0) {
        free(one);
        return px__fail(&err);
    }
    t.dst_bytes = bytes; /* patch 1: each tile is one texel, the tiles in row-major order: the image */
    rc = px_ragged_prepare(&job, n, one, &t, NULL, run->prog->lim.max_memory, &err) < 0 ||
                 run->ops->ragged(run->ex, &job, &err) < 0
             ? px__fail(&err)
             : 0;
    px_ragged_job_free(&job);
    free(one);
    if (rc)
        return rc;
    pxvm_view sized = {t.dst, t.dst_device, n, out_w, out_h, 4, (int64_t)out_w * out_h * 4, (int64_t)out_w * 4, 4, 1};
    return px__bind(run, slot, first_item, &sized, 0);
}
