/* ragged.c - the CPU executor's ragged batches (vm/ragged.h): each image resized and written by
 * px_ragged_image_host, the images spread over the pool (largest first, so that no large one
 * starts last), a lone image's rows over the cores instead. */
#define _GNU_SOURCE /* qsort_r */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_executor.h"
#include "../../vm/ragged.h"

typedef struct px__tiles_ctx {
    const px_ragged_job *job;
    const int *order;
    pxvm_error *errs; /* [n], one per image: workers never share one */
    uint8_t *failed;  /* [n] */
} px__tiles_ctx;

static void px__tiles_part(void *arg, int begin, int end)
{
    px__tiles_ctx *c = arg;
    for (int k = begin; k < end; k++) {
        int i = c->order[k];
        if (px_ragged_image_host(c->job, i, 1, &c->errs[i]) < 0)
            c->failed[i] = 1;
    }
}

static int px__larger_first(const void *a, const void *b, void *arg)
{
    const px_ragged_job *job = arg;
    const px_ragged_image *x = &job->img[*(const int *)a], *y = &job->img[*(const int *)b];
    uint64_t px = (uint64_t)x->v.w * (uint64_t)x->v.h + (uint64_t)x->w * (uint64_t)x->h;
    uint64_t py = (uint64_t)y->v.w * (uint64_t)y->v.h + (uint64_t)y->w * (uint64_t)y->h;
    return px > py ? -1 : px < py ? 1 : *(const int *)a - *(const int *)b;
}

int px_cpu_scratch(pxvm_executor *ex, size_t bytes, void **ptr, int *device, pxvm_error *err)
{
    if (bytes > ex->scratch_cap) {
        uint8_t *p = realloc(ex->scratch, bytes);
        if (!p)
            return pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)bytes);
        ex->scratch = p, ex->scratch_cap = bytes;
    }
    *ptr = ex->scratch, *device = -1;
    return 0;
}

int px_cpu_ragged(pxvm_executor *ex, const px_ragged_job *job, pxvm_error *err)
{
    if (job->dst_device >= 0)
        return pxvm_fail(err, PXE_TILES_HOST_DST, -1, -1);
    for (int i = 0; i < job->n; i++)
        if (job->img[i].v.device >= 0) {
            pxvm_fail(err, PXE_TILES_HOST_IMAGE, -1, -1, i);
            *job->failed = i;
            return -1;
        }
    int threads = px_pool_threads(ex->pool);
    if (job->n == 1 || threads <= 1) { /* one image: its rows over the cores */
        for (int i = 0; i < job->n; i++)
            if (px_ragged_image_host(job, i, job->n == 1 ? threads : 1, err) < 0) {
                *job->failed = i;
                return -1;
            }
        return 0;
    }
    px__tiles_ctx c = {job, NULL, NULL, NULL};
    int *order = malloc(sizeof(int) * (size_t)job->n);
    c.errs = malloc(sizeof(pxvm_error) * (size_t)job->n);
    c.failed = calloc((size_t)job->n, 1);
    if (!order || !c.errs || !c.failed) {
        free(order), free(c.errs), free(c.failed);
        return pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)job->n * sizeof(pxvm_error));
    }
    for (int i = 0; i < job->n; i++)
        order[i] = i;
    qsort_r(order, (size_t)job->n, sizeof *order, px__larger_first, (void *)job);
    c.order = order;
    px_pool_for(ex->pool, job->n, 1, px__tiles_part, &c);
    int rc = 0;
    for (int i = 0; i < job->n; i++) /* the first image in the batch's order that failed */
        if (c.failed[i]) {
            *err = c.errs[i];
            *job->failed = i;
            rc = -1;
            break;
        }
    free(order), free(c.errs), free(c.failed);
    return rc;
}
