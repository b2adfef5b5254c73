/* pxrun_frames.c - the frame loop of pxrun --frames: each frame of a folder, glob, raw stream
 * or video bound and run, progress and --time per frame, --npy stacked over the frames and
 * --changed collected. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <unistd.h>

#include "../isa/px_sem.h"
#include "frames.h"
#include "pxrun.h"

static int px__isatty2 = -1;

typedef struct {
    uint8_t *data;
    size_t len, cap;
} px__buf;

static int px__append(px__buf *b, const void *p, size_t n, uint64_t limit, pxvm_error *err)
{
    if (b->len + n > limit)
        return pxvm_fail(err, PXE_IMAGE_MEMORY, -1, -1, "--npy/--changed of the frames", 0ul, 0ul,
                         (unsigned long long)(b->len + n), (unsigned long long)limit);
    if (b->len + n > b->cap) {
        size_t cap = (b->cap ? b->cap * 2 : 1u << 20) + n;
        uint8_t *d = realloc(b->data, cap);
        if (!d)
            return pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)cap);
        b->data = d, b->cap = cap;
    }
    memcpy(b->data + b->len, p, n);
    b->len += n;
    return 0;
}

int px_run_frame_slot(const pxvm_program *prog, const px_run_args *a)
{
    for (int k = 1; k < prog->nslots; k++) {
        if (prog->slots[k].role != PXI_ROLE_INPUT)
            continue;
        int bound = 0;
        for (int i = 0; i < a->nin; i++)
            bound |= a->slot_of[0][i] == k;
        if (!bound)
            return k;
    }
    return -1;
}

/* Runs once per frame; --npy outputs and --changed collect every frame. Returns frames run or -1. */
long px_run_frames(const pxvm_executor_ops *ops, pxvm_executor *ex, const pxvm_program *prog, const px_run_args *a,
                   const pxvm_run_options *ro, pxvm_outputs *files, pxvm_error *err)
{
    int fslot = px_run_frame_slot(prog, a), atlas = -1, mask = -1;
    if (fslot < 0)
        return pxvm_fail(err, PXE_USAGE, -1, -1, "--frames: the program has no input slot left for the frames");
    for (int k = 0; k < prog->nslots && atlas < 0; k++)
        atlas = prog->geom_base[k] >= 0 ? k : -1;
    for (uint32_t i = 0; i < prog->ninsns && mask < 0; i++)
        mask = prog->insns[i].op == PX_OP_DIFF ? PX_ARG(&prog->insns[i], DIFF, mask) : -1;
    if (a->changed_path && atlas < 0)
        return pxvm_fail(err, PXE_USAGE, -1, -1, "--changed: the program has no patch atlas");
    px_frames *src;
    char lb[16];
    int opened = px_frames_open(a->frames, a->frame_w, a->frame_h, a->frame_channels ? a->frame_channels : 3, &a->lim, &src, err);
    if (opened == 0 && px_frames_want(src, prog->slots[fslot].w, prog->slots[fslot].h, fslot, pxvm_slot_label(prog, fslot, lb)) < 0)
        opened = pxvm_fail(err, PXE_NOMEM, -1, -1, 0ull);
    if (opened < 0) {
        px_frames_close(src);
        return -1;
    }
    px__buf *npy = calloc((size_t)(a->nnpy + 1), sizeof(px__buf)), changed = {0};
    long n = 0, total = px_frames_count(src);
    int rc = npy ? 0 : pxvm_fail(err, PXE_NOMEM, -1, -1, 0ull);
    if (px__isatty2 < 0)
        px__isatty2 = isatty(2);
    double t_start = px_run_now();
    for (; rc == 0 && (!a->max_frames || n < a->max_frames); n++) {
        pxvm_image img;
        int got = px_frames_next(src, &img, err);
        if (got >= 0)
            px_run_warn(err);
        if (got <= 0) {
            rc = got;
            if (got == 0 && n == 0) /* an empty source is no video: never an empty array and exit 0 */
                rc = pxvm_fail(err, PXE_IO_READ, -1, -1, a->frames, "no frame: the source is empty");
            break;
        }
        double t0 = px_run_now();
        rc = pxvm_bind_image(ops, ex, fslot, &img, err);
        pxvm_image_free(&img);
        if (rc == 0)
            rc = ops->run(ex, ro, err);
        double t1 = px_run_now();
        for (int i = 0; rc == 0 && i < a->nnpy; i++) { /* stacked: encoded once, at the end */
            pxvm_image arr;
            int shape[4];
            rc = px_run_npy_array(ops, ex, prog, a->slot_of[2][i], &arr, shape, err);
            if (rc == 0) {
                rc = px__append(&npy[i], arr.px, (size_t)arr.w * (size_t)arr.h * 4u, a->lim.max_memory, err);
                pxvm_image_free(&arr);
            }
        }
        int tokens = atlas >= 0 ? prog->slots[atlas].patch_count : 0, sampled = 0, dirty = 0, tiles = 0;
        if (rc == 0 && atlas >= 0 && (a->changed_path || a->do_time)) {
            uint8_t *c = malloc((size_t)tokens);
            rc = c ? ops->read_state(ex, PXVM_STATE_CHANGED, atlas, 0, 1, c, -1, err) : pxvm_fail(err, PXE_NOMEM, -1, -1, 0ull);
            for (int t = 0; rc == 0 && t < tokens; t++)
                sampled += c[t];
            if (rc == 0 && a->changed_path)
                rc = px__append(&changed, c, (size_t)tokens, a->lim.max_memory, err);
            free(c);
        }
        if (rc == 0 && a->do_time && mask >= 0) {
            pxvm_image m;
            rc = pxvm_read_image(ops, ex, prog, mask, 0, 0, &m, err);
            for (int i = 0; rc == 0 && i < m.w * m.h; i++)
                dirty += m.px[4 * i] != 0;
            tiles = m.w * m.h;
            pxvm_image_free(&m);
        }
        if (rc == 0 && a->do_time)
            fprintf(stderr, "frame %ld: bind+run %.3f ms, dirty tiles %d/%d, tokens sampled %d/%d\n", n, t1 - t0, dirty, tiles,
                    sampled, tokens);
        if (px__isatty2 && !a->do_time)
            fprintf(stderr, "\rframe %ld%s%.0ld (%.1f frames/s)   ", n + 1, total >= 0 ? "/" : "", total >= 0 ? total : 0,
                    (double)(n + 1) * 1e3 / (px_run_now() - t_start + 1e-9));
    }
    if (px__isatty2 && !a->do_time)
        fputc('\n', stderr);
    px_frames_close(src);
    for (int i = 0; rc == 0 && i <= a->nnpy; i++) { /* the stacks, then the changed masks */
        int k = i < a->nnpy ? a->slot_of[2][i] : atlas;
        if (i == a->nnpy && !a->changed_path)
            break;
        const pxvm_slot *s = &prog->slots[k];
        int shape[5] = {(int)n, s->patch_count ? s->patch_count : 1, s->patch_count ? s->patch_h : s->h,
                        s->patch_count ? s->patch_w : s->w, 4};
        uint8_t *bytes;
        size_t len;
        rc = i < a->nnpy ? pxvm_npy_encode_shape(npy[i].data, 5, shape, &bytes, &len, err)
                         : pxvm_npy_encode_shape(changed.data, 2, shape, &bytes, &len, err);
        if (rc == 0) {
            rc = pxvm_outputs_add(files, i < a->nnpy ? a->npys[i].path : a->changed_path, bytes, len, err);
            free(bytes);
        }
    }
    for (int i = 0; npy && i < a->nnpy; i++)
        free(npy[i].data);
    free(npy);
    free(changed.data);
    return rc < 0 ? -1 : n;
}
