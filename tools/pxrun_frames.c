/* pxrun_frames.c - the frame loop of pxrun --frames: each frame of a folder, glob, raw stream
 * or video bound and run, progress and --time per frame, --npy stacked over the frames and
 * --changed collected; into an any-size slot, the executor retargeted to the program resolved at
 * each frame's size (a stream restarted at a change of size when the program keeps state). */
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

/* Appends frame n's bytes (an item of w x h texels: a slot's, or the tokens' flags) to a stack of
 * --npy or --changed; past the memory limit, an error naming the output, the frames stacked and
 * the item's real size. */
static int px__append(px__buf *b, const void *p, size_t n, uint64_t limit, const char *what, long frame, int w, int h,
                      const px_run_args *a, pxvm_error *err)
{
    if (b->len + n > limit) {
        char name[600];
        snprintf(name, sizeof name, "%.300s: frames 0..%ld of %.200s stacked, each", what, frame, a->frames);
        return pxvm_fail(err, PXE_IMAGE_MEMORY, -1, -1, name, (unsigned long)w, (unsigned long)h,
                         (unsigned long long)(b->len + n), (unsigned long long)limit);
    }
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

void px_run_sizes_free(px_run_sizes *s)
{
    if (!s)
        return;
    for (int i = 0; i < PX_RUN_SIZES_KEPT; i++)
        pxvm_program_free(&s->kept[i].prog);
    pxvm_program_free(&s->poly);
    free(s);
}

/* "file 'F'" for a frame of a folder or glob, else "frame N of 'SOURCE'" (0-based, as --time). */
static void px__frame_name(const px_frames *src, const px_run_args *a, long n, char *out, size_t cap)
{
    const char *file = src ? px_frames_file(src) : NULL;
    if (file)
        snprintf(out, cap, "file '%.300s'", file);
    else
        snprintf(out, cap, "frame %ld of '%.300s'", n, a->frames);
}

int px_run_frame_bounds(const pxvm_program *poly, int slot, const px_run_args *a, const px_frames *src, long n, int w,
                        int h, pxvm_error *err)
{
    if (pxvm_anysize_check(poly, slot, w, h, err) == 0)
        return 0;
    char msg[sizeof err->msg], name[400];
    px__frame_name(src, a, n, name, sizeof name);
    snprintf(msg, sizeof msg, "%.400s (%.340s)", err->msg, name);
    memcpy(err->msg, msg, sizeof msg);
    return -1;
}

/* Opens the source; an any-size frame slot (want_any) takes frames of every size, a fixed one
 * only its own, refused from a file's header. */
static int px__frames_open(const px_run_args *a, const pxvm_program *prog, int fslot, px_frames **src, pxvm_error *err)
{
    char lb[16];
    int any = !prog;
    int rc = px_frames_open(a->frames, a->frame_w, a->frame_h, a->frame_channels ? a->frame_channels : 3, &a->lim, src,
                            err);
    if (rc == 0 && px_frames_want(*src, any ? 0 : prog->slots[fslot].w, any ? 0 : prog->slots[fslot].h, fslot,
                                  any ? "" : pxvm_slot_label(prog, fslot, lb)) < 0)
        rc = pxvm_fail(err, PXE_NOMEM, -1, -1, 0ull);
    if (rc < 0) {
        px_frames_close(*src);
        *src = NULL;
    }
    return rc;
}

/* The next frame: 1, 0 at the end (an error if there was no frame at all), -1. */
static int px__next(px_frames *src, const px_run_args *a, long n, pxvm_image *img, pxvm_error *err)
{
    int got = px_frames_next(src, img, err);
    if (got >= 0)
        px_run_warn(err);
    if (got == 0 && n == 0) /* an empty source is no video: never an empty array and exit 0 */
        return pxvm_fail(err, PXE_IO_READ, -1, -1, a->frames, "no frame: the source is empty");
    return got;
}

int px_run_frames_first(const px_run_args *a, px_frames **src, pxvm_image *first, pxvm_error *err)
{
    memset(first, 0, sizeof *first);
    if (px__frames_open(a, NULL, 0, src, err) < 0)
        return -1;
    return px__next(*src, a, 0, first, err) < 0 ? -1 : 0;
}

/* The program resolved with the frame slot at w x h: main's (the first frame's size), a kept one,
 * or a new resolution in the place of the least recently used one that is not `loaded`. */
static int px__resolution(px_run_sizes *s, const pxvm_program *base, const pxvm_program *loaded, int w, int h,
                          const pxvm_limits *lim, const pxvm_program **out, pxvm_error *err)
{
    int k = s->slot, pick = -1;
    ++s->clock;
    if (base->slots[k].w == w && base->slots[k].h == h) {
        *out = base;
        return 0;
    }
    for (int i = 0; i < PX_RUN_SIZES_KEPT; i++) {
        pxvm_program *p = &s->kept[i].prog;
        if (p->nslots && p->slots[k].w == w && p->slots[k].h == h) {
            s->kept[i].used = s->clock;
            *out = p;
            return 0;
        }
        if (p != loaded && (pick < 0 || s->kept[i].used < s->kept[pick].used))
            pick = i; /* an empty entry has used 0: taken first */
    }
    s->wh[2 * k] = w, s->wh[2 * k + 1] = h;
    pxvm_program next;
    if (pxvm_program_resolve(&s->poly, s->wh, lim, &next, err) < 0)
        return -1;
    pxvm_program_free(&s->kept[pick].prog); /* not loaded: the executor holds no pointer into it */
    s->kept[pick].prog = next, s->kept[pick].used = s->clock;
    *out = &s->kept[pick].prog;
    return 0;
}

/* Frame n (w x h) differs in size from the program loaded (*cur): the executor switched to the
 * program resolved at its size (retarget: the frame slot unbound, the rest kept), the stream
 * restarted if the program keeps state from frame to frame (its DIFF would compare frames of two
 * sizes' resolutions), the --fixation registers set again (normalized ones are fractions of the
 * frame). A --npy slot whose size changes with the frames cannot be stacked: an error. */
static int px__switch_size(const pxvm_executor_ops *ops, pxvm_executor *ex, const pxvm_program *base,
                           px_run_sizes *s, const px_frames *src, const px_run_args *a, long n, int w, int h,
                           const pxvm_program **cur, pxvm_error *err)
{
    const pxvm_program *next;
    int k = s->slot, pw = (*cur)->slots[k].w, ph = (*cur)->slots[k].h;
    char name[400], msg[sizeof err->msg], lb[16];
    px__frame_name(src, a, n, name, sizeof name);
    if (px_run_frame_bounds(&s->poly, k, a, src, n, w, h, err) < 0)
        return -1;
    if (px__resolution(s, base, *cur, w, h, &a->lim, &next, err) < 0) { /* a limit at that size, say */
        snprintf(msg, sizeof msg, "%.400s (%.340s)", err->msg, name);
        memcpy(err->msg, msg, sizeof err->msg);
        return -1;
    }
    for (int i = 0; i < a->nnpy; i++) {
        const pxvm_slot *was = &(*cur)->slots[a->slot_of[2][i]], *now = &next->slots[a->slot_of[2][i]];
        if (was->w != now->w || was->h != now->h) {
            return pxvm_fail(err, PXE_FRAMES_NPY_SIZE, -1, -1, a->npys[i].slot, n, name, w, h, pw, ph, a->slot_of[2][i],
                             pxvm_slot_label(next, a->slot_of[2][i], lb));
        }
    }
    if (!ops->retarget)
        return pxvm_fail(err, PXE_FRAMES_NO_RETARGET, -1, -1);
    if (ops->retarget(ex, next, err) < 0)
        return -1;
    *cur = next;
    if (s->poly.uses_video && ops->reset(ex, err) < 0)
        return -1;
    int32_t q[PX_FIX_REGS][2];
    if (px_run_fixations(next, a, q, err) < 0) { /* a texel one outside this frame */
        snprintf(msg, sizeof msg, "%.400s: frame %ld (%.300s)", err->msg, n, name);
        memcpy(err->msg, msg, sizeof err->msg);
        return -1;
    }
    for (int r = 0; r < a->nfix; r++)
        if (ops->set_fixations(ex, 0, 1, px_run_fix_reg(next, r), 1, q[r], -1, err) < 0)
            return -1;
    if (s->poly.uses_video) /* said once the switch has gone through */
        fprintf(stderr,
                "%spxrun: --frames: frame %ld (%s) is %dx%d, the previous ones %dx%d: program '%s' keeps state from "
                "frame to frame (DIFF, UPDATE, persistent slots), so its stream restarts at the new size\n",
                px__isatty2 && !a->do_time ? "\n" : "", n, name, w, h, pw, ph, a->prog_path);
    return 0;
}

/* Runs once per frame; --npy outputs and --changed collect every frame. Returns frames run or -1. */
long px_run_frames(const pxvm_executor_ops *ops, pxvm_executor *ex, const pxvm_program *prog, px_run_sizes *sizes,
                   px_frames *src, pxvm_image *first, const px_run_args *a, const pxvm_run_options *ro,
                   pxvm_outputs *files, const pxvm_program **cur, pxvm_error *err)
{
    int fslot = px_run_frame_slot(prog, a), atlas = -1, mask = -1;
    *cur = prog;
    if (fslot < 0)
        return pxvm_fail(err, PXE_FRAMES_NO_SLOT, -1, -1);
    for (int k = 0; k < prog->nslots && atlas < 0; k++)
        atlas = prog->geom_base[k] >= 0 ? k : -1;
    for (uint32_t i = 0; i < prog->ninsns && mask < 0; i++)
        mask = prog->insns[i].op == PX_OP_DIFF ? PX_ARG(&prog->insns[i], DIFF, mask) : -1;
    if (a->changed_path && atlas < 0)
        return pxvm_fail(err, PXE_CHANGED_NO_ATLAS, -1, -1);
    px_frames *opened = NULL;
    if (!src && px__frames_open(a, prog, fslot, &opened, err) < 0)
        return -1;
    if (!src)
        src = opened;
    px__buf *npy = calloc((size_t)(a->nnpy + 1), sizeof(px__buf)), changed = {0};
    long n = 0, total = px_frames_count(src);
    int rc = npy ? 0 : pxvm_fail(err, PXE_NOMEM, -1, -1, 0ull);
    if (px__isatty2 < 0)
        px__isatty2 = isatty(2);
    if (rc == 0 && a->fixfile.path && total >= 0 && a->fixfile.n < (a->max_frames && a->max_frames < total ? a->max_frames : total)) {
        int32_t q[2]; /* frames counted in advance (files): too few lines is an error before any run */
        rc = px_run_fixfile_frame(prog, a, a->fixfile.n, q, err);
    }
    double t_start = px_run_now();
    for (; rc == 0 && (!a->max_frames || n < a->max_frames); n++) {
        pxvm_image img;
        int got = 1;
        if (n == 0 && first && first->px)
            img = *first, memset(first, 0, sizeof *first); /* decoded ahead: its size resolved the program */
        else
            got = px__next(src, a, n, &img, err);
        if (got <= 0) {
            rc = got;
            break;
        }
        if (sizes && (img.w != (*cur)->slots[fslot].w || img.h != (*cur)->slots[fslot].h) &&
            px__switch_size(ops, ex, prog, sizes, src, a, n, img.w, img.h, cur, err) < 0) {
            pxvm_image_free(&img);
            rc = -1;
            break;
        }
        if (a->fixfile.path) { /* --fixations: this frame's, converted at its size */
            int32_t q[2];
            if (px_run_fixfile_frame(*cur, a, n, q, err) < 0 ||
                ops->set_fixations(ex, 0, 1, px_run_fix_reg(*cur, 0), 1, q, -1, err) < 0) {
                pxvm_image_free(&img);
                rc = -1;
                break;
            }
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
            rc = px_run_npy_array(ops, ex, *cur, a->slot_of[2][i], &arr, shape, err);
            if (rc == 0) {
                char what[400];
                snprintf(what, sizeof what, "--npy %.100s=%.280s", a->npys[i].slot, a->npys[i].path);
                const pxvm_slot *s = &(*cur)->slots[a->slot_of[2][i]];
                rc = px__append(&npy[i], arr.px, (size_t)arr.w * (size_t)arr.h * 4u, a->lim.max_memory, what, n, s->w,
                                s->h, a, err);
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
                rc = px__append(&changed, c, (size_t)tokens, a->lim.max_memory, "--changed", n, tokens, 1, a, err);
            free(c);
        }
        if (rc == 0 && a->do_time && mask >= 0) {
            pxvm_image m;
            rc = pxvm_read_image(ops, ex, *cur, mask, 0, 0, &m, err);
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
    if (rc == 0 && a->fixfile.path && n < a->fixfile.n && !a->max_frames) /* the file or the video cut short? */
        fprintf(stderr, "pxrun: warning: --fixations '%s' has %ld %s, '%s' ended after %ld frames: the last %ld unused\n",
                a->fixfile.path, a->fixfile.n, a->fixfile.npy ? "rows" : "lines", a->frames, n, a->fixfile.n - n);
    px_frames_close(opened); /* a source given is the caller's */
    for (int i = 0; rc == 0 && i <= a->nnpy; i++) { /* the stacks, then the changed masks */
        int k = i < a->nnpy ? a->slot_of[2][i] : atlas;
        if (i == a->nnpy && !a->changed_path)
            break;
        const pxvm_slot *s = &(*cur)->slots[k];
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
