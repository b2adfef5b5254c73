/* pxbatch_shard.c - one shard of a pxbatch job run, then written: its inputs (decoded in the
 * background by pxbatch_decode.c) run as one batch, by one program (fixed size), one per size
 * (native) or as ragged batches (dynamic), and written all-or-nothing (the .npy, then its marker
 * .json). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../vm/ragged.h"
#include "outputs.h"
#include "pxbatch_internal.h"

/* The marker: the job, the .npy's shape, size and SHA-256, the rows and the errors. */
/* dynamic: the offsets and grid files, as the marker records them */
typedef struct {
    uint8_t *offsets, *grid;
    size_t offsets_len, grid_len;
} px__ragged_files;

static int px__marker(const px_batch_shard *s, const int shape[5], const uint8_t *npy, size_t npy_len,
                      const px__ragged_files *rg, char **text, size_t *len)
{
    char sha[65];
    pxb_sha256_of(npy, npy_len, sha);
    FILE *f = open_memstream(text, len);
    if (!f)
        return -1;
    fprintf(f, "{\"pxbatch\": %d, \"shard\": %d, ", PXB_FORMAT, s->shard);
    pxb_json_name(f, "program", s->job->prog_path);
    fprintf(f, ",\n \"job\": %s,\n", s->job->job_text);
    if (rg) { /* (tokens, p, p, 4), and the two index files */
        char so[65], sg[65];
        pxb_sha256_of(rg->offsets, rg->offsets_len, so);
        pxb_sha256_of(rg->grid, rg->grid_len, sg);
        fprintf(f, " \"shape\": [%d, %d, %d, 4], \"npy_bytes\": %zu, \"npy_sha256\": \"%s\",\n", shape[1], shape[2],
                shape[3], npy_len, sha);
        fprintf(f, " \"ragged\": {\"offsets_bytes\": %zu, \"offsets_sha256\": \"%s\", \"grid_bytes\": %zu, "
                   "\"grid_sha256\": \"%s\"},\n \"rows\": [",
                rg->offsets_len, so, rg->grid_len, sg);
    } else
        fprintf(f, " \"shape\": [%d, %d, %d, %d, 4], \"npy_bytes\": %zu, \"npy_sha256\": \"%s\",\n \"rows\": [",
                shape[0], shape[1], shape[2], shape[3], npy_len, sha);
    int r = 0, first = 1;
    for (int i = 0; i < s->count; i++)
        if (s->good[i]) {
            fprintf(f, "%s\n  {\"row\": %d, \"input\": %d, ", first ? "" : ",", r++, s->first + i);
            pxb_json_name(f, "file", s->job->in.v[s->first + i]);
            if (rg)
                fprintf(f, ", \"size\": [%d, %d], \"resized\": [%d, %d]", s->orig[i][0], s->orig[i][1], s->rsz[i][0],
                        s->rsz[i][1]);
            else if (s->job->native) /* the size it was bound at (kept in orig: the image is freed once run) */
                fprintf(f, ", \"size\": [%d, %d]", s->orig[i][0], s->orig[i][1]);
            if (s->why[i]) { /* --lenient decoded it past damage: what it went past, beside its row */
                fprintf(f, ", \"warning\": ");
                pxb_json_str(f, s->why[i]);
            }
            fputc('}', f);
            first = 0;
        }
    fprintf(f, "],\n \"errors\": [");
    first = 1;
    for (int i = 0; i < s->count; i++)
        if (!s->good[i]) {
            fprintf(f, "%s\n  {\"input\": %d, ", first ? "" : ",", s->first + i);
            pxb_json_name(f, "file", s->job->in.v[s->first + i]);
            fprintf(f, ", \"error\": ");
            pxb_json_str(f, s->why[i] ? s->why[i] : "?");
            fputc('}', f);
            first = 0;
        }
    fprintf(f, "]}\n");
    return fclose(f) == 0 ? 0 : -1;
}

/* ---- native: each size its own program ---------------------------------------------------------- */

void px_batch_sized_free(px_batch_worker_state *w)
{
    for (int k = 0; k < PX_BATCH_SIZES; k++)
        if (w->sized[k].have)
            pxvm_program_free(&w->sized[k].prog);
    memset(w->sized, 0, sizeof w->sized);
}

/* The any-size program `poly` resolved at w x h, from the worker's LRU cache. Never evicts `keep`
 * (the program the executor holds). */
static const pxvm_program *px__sized(px_batch_worker_state *ws, const px_batch_job *j, const pxvm_program *poly,
                                     int input, int w, int h, const pxvm_program *keep, pxvm_error *err)
{
    int slot = -1;
    for (int k = 0; k < PX_BATCH_SIZES; k++) {
        px_batch_sized *c = &ws->sized[k];
        if (c->have && c->w == w && c->h == h) {
            c->used = ++ws->clock;
            return &c->prog;
        }
        if (&c->prog == keep && c->have)
            continue;
        if (slot < 0 || !c->have || (ws->sized[slot].have && c->used < ws->sized[slot].used))
            slot = slot >= 0 && !ws->sized[slot].have ? slot : k;
    }
    px_batch_sized *c = &ws->sized[slot];
    if (c->have)
        pxvm_program_free(&c->prog);
    c->have = 0;
    int wh[2 * (PXVM_MAX_SLOTS + 1)] = {0};
    wh[2 * input] = w, wh[2 * input + 1] = h;
    if (pxvm_program_resolve(poly, wh, &j->lim, &c->prog, err) < 0)
        return NULL;
    c->have = 1, c->w = w, c->h = h, c->used = ++ws->clock;
    return &c->prog;
}

/* An error of image i of the shard, its file and sizes named; the image then fails. */
static void px__fail_image(px_batch_shard *s, int i, const pxvm_error *err)
{
    char buf[1024], named[1400];
    pxvm_error_format(err, buf, sizeof buf);
    if (s->job->policy.kind == PX_POLICY_DYNAMIC)
        snprintf(named, sizeof named, "%s (file '%.300s', %dx%d resized to %dx%d)", buf, s->job->in.v[s->first + i],
                 s->orig[i][0], s->orig[i][1], s->rsz[i][0], s->rsz[i][1]);
    else
        snprintf(named, sizeof named, "%s (file '%.300s', at its size, %dx%d)", buf, s->job->in.v[s->first + i],
                 s->img[i].w, s->img[i].h);
    free(s->why[i]);
    s->why[i] = strdup(named);
    pxvm_image_free(&s->img[i]);
    s->good[i] = 0;
}

/* The images of shard `s` of the size of image `first` (it and the later ones of that size), as one
 * batch: the program for that size (px__sized), loaded, every such image bound in order, run.
 * Returns the program (its outputs are then read item by item, in the same order), or NULL with
 * *err set. *loaded: the program the executor holds (the last one this shard loaded). */
static const pxvm_program *px__run_size_group(px_batch_worker_state *w, px_batch_shard *s, int input, int first,
                                              const pxvm_program **loaded, pxvm_error *err)
{
    int gw = s->img[first].w, gh = s->img[first].h, n = 0;
    for (int k = first; k < s->count; k++)
        n += s->img[k].px && s->img[k].w == gw && s->img[k].h == gh;
    const pxvm_program *prog = px__sized(w, s->job, s->prog, input, gw, gh, *loaded ? *loaded : w->loaded_sized, err);
    if (!prog || w->ops->load(w->ex, prog, n, err) < 0)
        return NULL;
    *loaded = prog;
    int item = 0;
    for (int k = first; k < s->count; k++)
        if (s->img[k].px && s->img[k].w == gw && s->img[k].h == gh) {
            pxvm_view v = pxvm_image_view(&s->img[k]);
            if (w->ops->bind(w->ex, input, item++, &v, err) < 0)
                return NULL;
        }
    pxvm_run_options ro = {s->job->lim.max_steps, NULL, NULL, NULL, NULL};
    w->times.calls++;
    return w->ops->run(w->ex, &ro, err) < 0 ? NULL : prog;
}

uint8_t *px_batch_spare_take(px_batch_worker_state *w, size_t *cap)
{
    uint8_t *buf = NULL;
    *cap = 0;
    if (w->spare_ok) {
        pthread_mutex_lock(&w->spare_mu);
        buf = w->spare, *cap = w->spare_cap;
        w->spare = NULL, w->spare_cap = 0;
        pthread_mutex_unlock(&w->spare_mu);
    }
    return buf;
}

void px_batch_spare_give(px_batch_worker_state *w, uint8_t *buf, size_t cap)
{
    if (w->spare_ok && buf && cap) {
        pthread_mutex_lock(&w->spare_mu);
        if (cap > w->spare_cap) { /* the larger: fewer shards grow theirs */
            uint8_t *t = w->spare;
            w->spare = buf, w->spare_cap = cap, buf = t;
        }
        pthread_mutex_unlock(&w->spare_mu);
    }
    free(buf);
}

/* ---- dynamic: ragged batches while the rest decode ---------------------------------------------- */

/* The most images of one ragged batch (a batch also ends at --max-memory / 8 bytes of inputs). */
#define PX_RAGGED_IMAGES 64

/* One executor call: n images resized by the job's policy and cut into tiles at t->dst, as
 * pxvm_runner_ragged does it (the worker holds an executor, not a runner). */
static int px__ragged(px_batch_worker_state *w, const px_batch_job *j, int n, const pxvm_view *views, pxvm_ragged *t,
                      pxvm_error *err)
{
    t->failed = -1;
    if (!w->ops->ragged)
        return pxvm_fail(err, PXE_BATCH_NO_RAGGED, -1, -1);
    px_ragged_job job;
    if (px_ragged_prepare(&job, n, views, t, NULL, j->lim.max_memory, err) < 0)
        return -1;
    int rc = w->ops->ragged(w->ex, &job, err);
    px_ragged_job_free(&job);
    return rc;
}

/* The next batch of shard `s`: its decoded inputs not yet run (ran[i] 0), in any order as they
 * come, the lowest first, up to a full batch (PX_RAGGED_IMAGES images or --max-memory / 8 bytes),
 * into idx. It waits while fewer are ready and waiting can grow the batch: some of the shard still
 * to decode and the decoders free to take its inputs (else it runs what is ready: the worker would
 * idle, and running frees the memory bound); the shard's end flushes. Returns the images taken; 0
 * when none of the shard is left to run. *low: the lowest input not yet run (kept between calls). */
static int px__next_batch(px_batch_worker_state *w, px_batch_shard *s, const uint8_t *ran, int *low, int *idx)
{
    uint64_t cap = s->job->lim.max_memory / 8u > 0 ? s->job->lim.max_memory / 8u : 1; /* one image at least */
    px_batch_pool_lock(s);
    for (;;) {
        int n = 0, decoding = 0;
        uint64_t bytes = 0;
        while (*low < s->count && (ran[*low] || (s->ready[*low] && !s->good[*low])))
            ++*low; /* run, or failed: no row to run */
        for (int i = *low; i < s->count; i++)
            if (!s->ready[i])
                decoding = 1;
            else if (!ran[i] && s->good[i] && n < PX_RAGGED_IMAGES && bytes < cap)
                idx[n++] = i, bytes += px__bytes(&s->img[i]);
        if (!decoding || n >= PX_RAGGED_IMAGES || bytes >= cap || (n && !px_batch_pool_filling(s))) {
            px_batch_pool_unlock(s);
            return n;
        }
        px_batch_pool_wait(s, &w->times);
    }
}

/* The tokens of the rows from `first` on, at out, from where they ran (input i's tiles at token
 * at[i]) into row order (offsets off): the inputs before `first` ran in row order, already in
 * place; the rest copied out once (a buffer of their tokens) and back. 0, or -1 out of memory. */
static int px__rows_in_order(const px_batch_shard *s, uint8_t *out, size_t per_token, const int64_t *at,
                             const int64_t *off, int rows, int first)
{
    const size_t from = (size_t)off[first] * per_token, len = (size_t)off[rows] * per_token - from;
    uint8_t *moved = malloc(len ? len : 1);
    if (!moved)
        return -1;
    memcpy(moved, out + from, len);
    for (int i = 0, r = 0; i < s->count; i++)
        if (s->good[i]) {
            if (r >= first)
                memcpy(out + (size_t)off[r] * per_token, moved + (size_t)at[i] * per_token - from,
                       (size_t)(off[r + 1] - off[r]) * per_token);
            r++;
        }
    free(moved);
    return 0;
}

/* A dynamic shard: its inputs, as they are decoded, in any order (px__next_batch), in batches of
 * one executor call each; each batch's tiles after the ones before (at[i]: input i's first token),
 * put in row order once all ran (px__rows_in_order); the decoded inputs freed after their call
 * (their bytes given back to the decoders). An image the executor refuses (over --max-memory on
 * the device) fails alone, its file named; the batch goes again without it. 0, or the pxvm class
 * of a failure. */
static int px__run_dynamic(px_batch_worker_state *w, px_batch_shard *s, uint8_t **tokens, size_t *tokens_cap,
                           int *rows_out, int64_t **offsets_out, uint64_t *bytes_in, pxvm_error *err)
{
    const px_batch_job *j = s->job;
    const int p = j->policy.patch;
    const size_t per_token = (size_t)p * (size_t)p * 4u, count = (size_t)(unsigned)s->count;
    int64_t *off = calloc(count + 1, sizeof *off), *at = calloc(count + 1, sizeof *at);
    pxvm_view *views = calloc(count + 1, sizeof *views);
    int *idx = calloc(count + 1, sizeof *idx);
    uint8_t *ran = calloc(count + 1, 1);
    /* the tokens after PXB_NPY_HEAD_MAX bytes, where their .npy header goes once their count is
     * known: the file is written from this buffer, not a copy (never NULL: a shard whose every
     * input failed has no tokens); the worker's spare one when its writer has given one back */
    size_t cap = 0;
    uint8_t *out = px_batch_spare_take(w, &cap);
    if (out && cap >= PXB_NPY_HEAD_MAX + per_token)
        cap -= PXB_NPY_HEAD_MAX;
    else
        free(out), cap = per_token, out = malloc(PXB_NPY_HEAD_MAX + cap);
    int rows = 0, rc = 0, low = 0;
    int64_t made = 0; /* tokens run so far */
    if (!off || !at || !views || !idx || !ran || !out)
        rc = (pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)count * sizeof *views), PXVM_IO);
    while (!rc) {
        int n = px__next_batch(w, s, ran, &low, idx);
        if (!n)
            break;
        int64_t tiles = 0;
        uint64_t bytes = 0;
        for (int k = 0; k < n; k++) {
            int i = idx[k];
            views[k] = pxvm_image_view(&s->img[i]);
            tiles += (int64_t)(s->rsz[i][0] / p) * (s->rsz[i][1] / p);
            bytes += px__bytes(&s->img[i]);
        }
        size_t need = ((size_t)made + (size_t)tiles) * per_token;
        if (need > cap) { /* grown by halves: a shard's tokens are known only as its inputs decode */
            size_t more = need + need / 2 + per_token;
            uint8_t *grown = realloc(out, PXB_NPY_HEAD_MAX + more);
            if (!grown) {
                rc = (pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)more), PXVM_IO);
                break;
            }
            out = grown, cap = more;
        }
        pxvm_ragged t = {j->ragged_policy, p, 0, 0, NULL, out + PXB_NPY_HEAD_MAX + (size_t)made * per_token, -1,
                         (size_t)tiles * per_token, -1, 0, 0};
        double t0 = px_batch_now();
        int called = px__ragged(w, j, n, views, &t, err);
        w->times.executor += px_batch_now() - t0, w->times.calls++;
        if (called < 0) {
            if (t.failed < 0) {
                rc = err->cls;
                break;
            }
            char *m = strstr(err->msg, ": "); /* "image K: " counts within the batch: the file says which */
            if (!strncmp(err->msg, "image ", 6) && m)
                memmove(err->msg, m + 2, strlen(m + 2) + 1);
            px_batch_pool_lock(s);
            px_batch_pool_freed(s, px__bytes(&s->img[idx[t.failed]]));
            px__fail_image(s, idx[t.failed], err);
            px_batch_pool_unlock(s);
            continue; /* the ready inputs again, without it */
        }
        for (int k = 0; k < n; k++) {
            int i = idx[k];
            at[i] = made;
            made += (int64_t)(s->rsz[i][0] / p) * (s->rsz[i][1] / p);
            ran[i] = 1, rows++;
            pxvm_image_free(&s->img[i]);
        }
        *bytes_in += bytes;
        px_batch_pool_lock(s);
        px_batch_pool_freed(s, bytes);
        px_batch_pool_unlock(s);
    }
    if (!rc) { /* the offsets in row order; the rows from the first that ran out of its place moved */
        int r = 0, first = -1;
        for (int i = 0; i < s->count; i++)
            if (s->good[i]) {
                if (first < 0 && at[i] != off[r])
                    first = r;
                off[r + 1] = off[r] + (int64_t)(s->rsz[i][0] / p) * (s->rsz[i][1] / p);
                r++;
            }
        w->times.moved += first >= 0 ? (uint64_t)(rows - first) : 0;
        if (first >= 0 && px__rows_in_order(s, out + PXB_NPY_HEAD_MAX, per_token, at, off, rows, first) < 0)
            rc = (pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)((size_t)made * per_token)), PXVM_IO);
    }
    free(views);
    free(idx);
    free(ran);
    free(at);
    if (rc) {
        free(out), free(off);
        return rc;
    }
    *tokens = out, *tokens_cap = PXB_NPY_HEAD_MAX + cap, *rows_out = rows, *offsets_out = off;
    return 0;
}

/* The files of one shard, all-or-nothing, the marker last (it marks the shard finished). */
static int px__write_shard(px_batch_shard *s, const uint8_t *npy, size_t npy_len, const px__ragged_files *rg,
                           const char *index, size_t index_len, pxvm_error *err)
{
    char *path[4] = {px_batch_shard_path(s->job, s->shard, "npy"), px_batch_shard_path(s->job, s->shard, "json"),
                     rg ? px_batch_shard_path(s->job, s->shard, "offsets.npy") : NULL,
                     rg ? px_batch_shard_path(s->job, s->shard, "grid.npy") : NULL};
    int have = path[0] && path[1] && (!rg || (path[2] && path[3]));
    pxvm_outputs files = {0};
    int rc = have && pxvm_outputs_add(&files, path[0], npy, npy_len, err) == 0 &&
                     (!rg || (pxvm_outputs_add(&files, path[2], rg->offsets, rg->offsets_len, err) == 0 &&
                              pxvm_outputs_add(&files, path[3], rg->grid, rg->grid_len, err) == 0)) &&
                     pxvm_outputs_commit(&files, err) == 0 &&
                     pxvm_outputs_add(&files, path[1], index, index_len, err) == 0 && pxvm_outputs_commit(&files, err) == 0
                 ? 0
                 : (have ? err->cls : (pxvm_fail(err, PXE_NOMEM, -1, -1, 0ull), PXVM_IO));
    if (rc)
        pxvm_outputs_abort(&files);
    for (int k = 0; k < 4; k++)
        free(path[k]);
    return rc;
}

/* Each input of a written shard that failed, on stderr (the marker's errors list them too): the
 * classified error, which names the file (else the file first); and each that --lenient decoded
 * past damage, with what it went past. On a terminal the progress line is cleared first, so each
 * is a line of its own. */
static void px__tell_failures(const px_batch_shard *s)
{
    const char *clear = isatty(2) ? "\r\033[K" : "";
    for (int i = 0; i < s->count; i++)
        if (!s->good[i])
            px_batch_tell_input(clear, "failed", s->job->in.v[s->first + i], s->why[i] ? s->why[i] : "?");
        else if (s->why[i])
            px_batch_tell_input(clear, "warning (--lenient)", s->job->in.v[s->first + i], s->why[i]);
}

/* The rows of a fixed shard: every decoded image one item of the batch loaded at the start (the
 * unused items of a short shard bound to any valid image), one run, the outputs read into *out
 * after PXB_NPY_HEAD_MAX bytes for the .npy's header (per bytes a row, malloc'ed; NULL with no
 * rows); 0, or the pxvm class of a failure. */
static int px__run_fixed(px_batch_worker_state *w, px_batch_shard *s, int input, int out_slot, size_t per, uint8_t **out,
                         int *rows_out, pxvm_error *err)
{
    const pxvm_slot *o = &s->prog->slots[out_slot];
    int rows = 0, dummy = -1;
    for (int i = 0; i < s->count; i++)
        if (s->img[i].px) {
            dummy = dummy < 0 ? i : dummy;
            pxvm_view v = pxvm_image_view(&s->img[i]);
            if (w->ops->bind(w->ex, input, rows++, &v, err) < 0)
                return err->cls;
        }
    *rows_out = rows, *out = NULL;
    if (!rows)
        return 0;
    for (int b = rows; b < w->batch; b++) {
        pxvm_view v = pxvm_image_view(&s->img[dummy]);
        if (w->ops->bind(w->ex, input, b, &v, err) < 0)
            return err->cls;
    }
    pxvm_run_options ro = {s->job->lim.max_steps, NULL, NULL, NULL, NULL};
    w->times.calls++;
    if (w->ops->run(w->ex, &ro, err) < 0)
        return err->cls;
    uint8_t *buf = malloc(PXB_NPY_HEAD_MAX + per * (size_t)rows);
    if (!buf)
        return pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)(per * (size_t)rows)), PXVM_IO;
    pxvm_view v = o->patch_count ? pxvm_view_host(buf + PXB_NPY_HEAD_MAX, o->patch_w, o->patch_h * o->patch_count, 4)
                                 : pxvm_view_host(buf + PXB_NPY_HEAD_MAX, o->w, o->h, 4);
    v.items = rows;
    v.item_stride = (int64_t)per;
    if (w->ops->read(w->ex, out_slot, 0, 0, &v, o->patch_count > 0, err) < 0) {
        free(buf);
        return err->cls;
    }
    *out = buf;
    return 0;
}

/* The rows of a native shard: each image at its own size. The images of one size are one batch
 * of the program resolved at that size (one load, one run; sizes in order of first appearance),
 * each output read into its row; the output slot is not any-size, so every size's rows have the
 * program's shape (checked). An image whose resolution fails (an operand out of int32, a rule
 * broken, over --max-memory) fails alone, before the rows are numbered. 0, or the pxvm class of
 * a failure. */
static int px__run_native(px_batch_worker_state *w, px_batch_shard *s, int input, int out_slot, size_t per, uint8_t **out,
                          int *rows_out, pxvm_error *err)
{
    const pxvm_slot *o = &s->prog->slots[out_slot];
    const pxvm_program *loaded = NULL;
    for (int i = 0; i < s->count; i++)
        if (s->img[i].px && !px__sized(w, s->job, s->prog, input, s->img[i].w, s->img[i].h, w->loaded_sized, err))
            px__fail_image(s, i, err);
    size_t count = (size_t)(unsigned)s->count;
    int rows = 0, rc = 0;
    int *row_of = calloc(count + 1, sizeof *row_of);
    uint8_t *done = calloc(count + 1, 1);
    for (int i = 0; row_of && i < s->count; i++)
        if (s->img[i].px)
            row_of[i] = rows++;
    uint8_t *buf = rows ? malloc(PXB_NPY_HEAD_MAX + per * (size_t)rows) : NULL;
    if (!row_of || !done || (rows && !buf))
        rc = (pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)(per * (size_t)rows)), PXVM_IO);
    for (int i = 0; !rc && i < s->count; i++) {
        if (!s->img[i].px || done[i])
            continue;
        int gw = s->img[i].w, gh = s->img[i].h;
        const pxvm_program *prog = px__run_size_group(w, s, input, i, &loaded, err);
        if (!prog) {
            rc = err->cls;
            break;
        }
        const pxvm_slot *ro_slot = &prog->slots[out_slot];
        if (ro_slot->w != o->w || ro_slot->h != o->h || ro_slot->patch_count != o->patch_count ||
            ro_slot->patch_w != o->patch_w || ro_slot->patch_h != o->patch_h) {
            rc = (pxvm_fail(err, PXE_BATCH_OUTPUT_CHANGED, -1, -1),
                  PXVM_USAGE);
            break;
        }
        int item = 0;
        for (int k = i; !rc && k < s->count; k++)
            if (s->img[k].px && s->img[k].w == gw && s->img[k].h == gh) {
                uint8_t *row = buf + PXB_NPY_HEAD_MAX + (size_t)row_of[k] * per;
                pxvm_view v = o->patch_count ? pxvm_view_host(row, o->patch_w, o->patch_h * o->patch_count, 4)
                                             : pxvm_view_host(row, o->w, o->h, 4);
                if (w->ops->read(w->ex, out_slot, 0, item++, &v, o->patch_count > 0, err) < 0)
                    rc = err->cls;
                done[k] = 1;
            }
    }
    /* the executor holds the last size's program: px__sized never evicts it before the next load */
    if (loaded)
        w->loaded_sized = loaded;
    free(done);
    free(row_of);
    if (rc) {
        free(buf);
        return rc;
    }
    *out = buf, *rows_out = rows;
    return 0;
}

/* Runs a shard the worker took from the decode pool (then released: none of its inputs is
 * decoding, a failed run's not yet taken never will): its rows, or tokens and offsets, into *r;
 * fixed and native, the decoded images freed (their sizes kept in orig), so that a shard waiting
 * to be written holds only its output. 0, or the pxvm class of a failure of the program or the
 * executor. */
int px_batch_shard_run(px_batch_worker_state *w, px_batch_shard *s, int input, int out_slot, px_batch_result *r,
                       pxvm_error *err)
{
    memset(r, 0, sizeof *r);
    if (s->job->policy.kind == PX_POLICY_DYNAMIC) { /* run as its inputs decode */
        int rc = px__run_dynamic(w, s, &r->data, &r->cap, &r->rows, &r->off, &r->bytes_in, err);
        px_batch_pool_release(s); /* after a failure its decodes stop; else every input was taken */
        return rc;
    }
    const pxvm_slot *o = &s->prog->slots[out_slot];
    px_batch_pool_wait_all(s, &w->times);
    double t1 = px_batch_now();
    size_t per = o->patch_count ? (size_t)o->patch_w * o->patch_h * o->patch_count * 4u : (size_t)o->w * o->h * 4u;
    int rc = s->job->native ? px__run_native(w, s, input, out_slot, per, &r->data, &r->rows, err)
                            : px__run_fixed(w, s, input, out_slot, per, &r->data, &r->rows, err);
    w->times.executor += px_batch_now() - t1;
    for (int i = 0; i < s->count; i++) {
        if (s->good[i]) {
            r->bytes_in += (uint64_t)s->img[i].w * (uint64_t)s->img[i].h * 4u;
            s->orig[i][0] = s->img[i].w, s->orig[i][1] = s->img[i].h;
        }
        pxvm_image_free(&s->img[i]);
    }
    px_batch_pool_release(s); /* its decoded bytes run and freed */
    return rc;
}

/* Writes a shard that ran (r, freed here): its .npy (the header put before the rows, in the room
 * kept for it), a dynamic shard's offsets and grid, and the marker last, all-or-nothing; then the
 * failed inputs on stderr. *done: its figures, when written. 0, or the pxvm class of a failure. */
int px_batch_shard_write(px_batch_shard *s, int out_slot, px_batch_result *r, px_batch_written *done, pxvm_error *err)
{
    const px_batch_job *j = s->job;
    const int dynamic = j->policy.kind == PX_POLICY_DYNAMIC, rows = r->rows;
    const pxvm_slot *o = &s->prog->slots[out_slot];
    int shape[5];
    uint64_t nshape[5];
    int ndim = dynamic ? 4 : 5;
    if (dynamic) { /* (tokens, p, p, 4) */
        const int p = j->policy.patch;
        shape[0] = rows, shape[1] = (int)r->off[rows], shape[2] = p, shape[3] = p, shape[4] = 4;
        nshape[0] = (uint64_t)r->off[rows], nshape[1] = (uint64_t)p, nshape[2] = (uint64_t)p, nshape[3] = 4;
    } else { /* (rows, patches, h, w, 4) */
        shape[0] = rows, shape[1] = o->patch_count ? o->patch_count : 1, shape[2] = o->patch_count ? o->patch_h : o->h;
        shape[3] = o->patch_count ? o->patch_w : o->w, shape[4] = 4;
        for (int d = 0; d < 5; d++)
            nshape[d] = (uint64_t)shape[d];
    }
    uint64_t body = 1;
    for (int d = 0; d < ndim; d++)
        body *= nshape[d];
    int rc = 0, failed = 0;
    uint8_t *data = r->data, *alone = NULL;
    if (!data) /* no rows: an .npy of its header alone */
        data = alone = malloc(PXB_NPY_HEAD_MAX);
    uint8_t head[PXB_NPY_HEAD_MAX];
    size_t hl = pxb_npy_head("|u1", ndim, nshape, head);
    uint8_t *npy = data ? data + PXB_NPY_HEAD_MAX - hl : NULL;
    size_t npy_len = hl + (size_t)body;
    if (npy)
        memcpy(npy, head, hl);
    char *index = NULL;
    size_t index_len = 0;
    px__ragged_files rg = {0};
    int64_t *grid = NULL;
    if (dynamic) { /* (rows + 1) int64 and (rows, 3) int64, little-endian: .npy version 1.0 */
        const int p = j->policy.patch;
        uint64_t oshape[1] = {(uint64_t)rows + 1}, gshape[2] = {(uint64_t)rows, 3};
        grid = malloc(sizeof(int64_t) * 3u * (size_t)(unsigned)(rows > 0 ? rows : 1));
        for (int i = 0, k = 0; grid && i < s->count; i++)
            if (s->good[i]) {
                grid[3 * k] = 1, grid[3 * k + 1] = s->rsz[i][1] / p, grid[3 * k + 2] = s->rsz[i][0] / p;
                k++;
            }
        if (!grid || pxb_npy_i64(r->off, 1, oshape, &rg.offsets, &rg.offsets_len) != 0 ||
            pxb_npy_i64(grid, 2, gshape, &rg.grid, &rg.grid_len) != 0)
            rc = (pxvm_fail(err, PXE_NOMEM, -1, -1, 0ull), PXVM_IO);
    }
    for (int i = 0; i < s->count; i++)
        failed += !s->good[i];
    if (!rc && (!npy || px__marker(s, shape, npy, npy_len, dynamic ? &rg : NULL, &index, &index_len) < 0))
        rc = (pxvm_fail(err, PXE_NOMEM, -1, -1, 0ull), PXVM_IO);
    if (!rc)
        rc = px__write_shard(s, npy, npy_len, dynamic ? &rg : NULL, index, index_len, err);
    if (!rc) { /* only what was written is counted */
        done->images = (uint64_t)rows, done->failed = (uint64_t)failed, done->bytes_in = r->bytes_in;
        done->bytes_out = npy_len + rg.offsets_len + rg.grid_len + index_len;
        px__tell_failures(s);
    }
    free(alone);
    free(r->off);
    free(grid);
    free(index);
    free(rg.offsets);
    free(rg.grid);
    memset(r, 0, sizeof *r);
    return rc;
}
