/* pxbatch_shard.c - one shard of a pxbatch job: its inputs read (regular files only, within
 * --max-memory) and decoded by host threads in the background, then run as one batch and
 * written all-or-nothing (the .npy, then its marker .json). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pxbatch_internal.h"

static const char *px__kind(mode_t m)
{
    return S_ISDIR(m) ? "not a regular file (a directory)" : S_ISFIFO(m) ? "not a regular file (a FIFO)"
           : S_ISCHR(m)  ? "not a regular file (a character device)"
           : S_ISBLK(m)  ? "not a regular file (a block device)"
           : S_ISSOCK(m) ? "not a regular file (a socket)"
                         : "not a regular file";
}

/* Decodes an input: a regular file only (checked before it is opened, and again on the open
 * descriptor: a FIFO or a device is never read), at most --max-memory bytes. */
static int px__load_input(const char *path, const pxvm_limits *lim, pxvm_image *img, pxvm_error *err)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return pxvm_fail(err, PXE_IO_READ, -1, -1, path, strerror(errno));
    if (!S_ISREG(st.st_mode))
        return pxvm_fail(err, PXE_IO_READ, -1, -1, path, px__kind(st.st_mode));
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return pxvm_fail(err, PXE_IO_READ, -1, -1, path, strerror(errno));
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return pxvm_fail(err, PXE_IO_READ, -1, -1, path, px__kind(st.st_mode));
    }
    char why[128];
    if ((uint64_t)st.st_size > lim->max_memory) {
        close(fd);
        snprintf(why, sizeof why, "%lld bytes, over the limit of %llu (see --max-memory)", (long long)st.st_size,
                 (unsigned long long)lim->max_memory);
        return pxvm_fail(err, PXE_IO_READ, -1, -1, path, why);
    }
    size_t cap = (size_t)st.st_size + 1, len = 0; /* one more: a file that grew is read to its end */
    uint8_t *data = malloc(cap);
    ssize_t k = 0;
    while (data && (k = read(fd, data + len, cap - len)) > 0) {
        len += (size_t)k;
        if (len == cap) {
            if (cap > lim->max_memory) {
                snprintf(why, sizeof why, "over the limit of %llu bytes (see --max-memory)",
                         (unsigned long long)lim->max_memory);
                break;
            }
            uint8_t *more = realloc(data, cap * 2);
            if (!more) {
                free(data), data = NULL;
                break;
            }
            data = more, cap *= 2;
        }
    }
    int e = errno;
    close(fd);
    if (!data)
        return pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)cap);
    if (k != 0) {
        free(data);
        return pxvm_fail(err, PXE_IO_READ, -1, -1, path, k < 0 ? strerror(e) : why);
    }
    int rc = pxvm_image_decode_any(data, len, path, lim, img, err);
    free(data);
    return rc;
}

/* ---- one shard: decoded in the background, run as one batch, written all-or-nothing ---------- */

static void *px__decode(void *arg)
{
    px_batch_decoder *d = arg;
    px_batch_shard *s = d->s;
    for (int i = d->t; i < s->count; i += d->n) {
        pxvm_error err;
        const char *path = s->job->in.v[s->first + i];
        if (px__load_input(path, &s->job->lim, &s->img[i], &err) == 0 && (s->img[i].w != s->w || s->img[i].h != s->h)) {
            if (s->job->policy.kind == PX_POLICY_EXACT) { /* the file, its size and the slot's */
                char lb[16], msg[sizeof err.msg];
                pxvm_fail(&err, PXE_INPUT_SIZE, -1, -1, s->img[i].w, s->img[i].h, (unsigned)s->input,
                          pxvm_slot_label(s->prog, s->input, lb), s->w, s->h);
                snprintf(msg, sizeof msg, "%.400s (file '%.300s'; --policy stretch or fit resizes it)", err.msg, path);
                memcpy(err.msg, msg, sizeof msg);
                pxvm_image_free(&s->img[i]);
            } else { /* --policy: resized here, on the decoding thread, before the batch */
                pxvm_image fitted = {0};
                int r = px_resize_policy(&s->img[i], s->w, s->h, &s->job->policy, &fitted, &err);
                pxvm_image_free(&s->img[i]);
                if (r == 0)
                    s->img[i] = fitted;
            }
        }
        if (!s->img[i].px) {
            char buf[1024];
            pxvm_error_format(&err, buf, sizeof buf);
            s->why[i] = strdup(buf);
        }
    }
    return NULL;
}

int px_batch_shard_start(px_batch_shard *s, const px_batch_job *j, const pxvm_program *prog, int input, int shard)
{
    memset(s, 0, sizeof *s);
    s->job = j, s->prog = prog, s->shard = shard, s->input = input;
    s->first = shard * j->shard_size;
    s->count = (int)j->in.n - s->first < j->shard_size ? (int)j->in.n - s->first : j->shard_size;
    s->w = prog->slots[input].w, s->h = prog->slots[input].h;
    s->img = calloc((size_t)s->count, sizeof(pxvm_image));
    s->why = calloc((size_t)s->count, sizeof(char *));
    /* the images of a shard are decoded by several host threads, so that decoding keeps up with
     * the GPU where the cores allow (JPEG decoding is the slow part of a pipeline) */
    int n = j->decoders < s->count ? j->decoders : s->count;
    s->dec = calloc((size_t)(n > 0 ? n : 1), sizeof(px_batch_decoder));
    if (!s->img || !s->why || !s->dec)
        return -1;
    for (int t = 0; t < n; t++) {
        s->dec[t] = (px_batch_decoder){s, t, n};
        if (pthread_create(&s->thread[s->started], NULL, px__decode, &s->dec[t]) == 0)
            s->started++;
        else
            px__decode(&s->dec[t]);
    }
    return 0;
}

static void px__shard_join(px_batch_shard *s)
{
    for (int t = 0; t < s->started; t++)
        pthread_join(s->thread[t], NULL);
    s->started = 0;
}

void px_batch_shard_free(px_batch_shard *s)
{
    px__shard_join(s);
    free(s->dec);
    for (int i = 0; s->img && s->why && i < s->count; i++) {
        pxvm_image_free(&s->img[i]);
        free(s->why[i]);
    }
    free(s->img);
    free(s->why);
    memset(s, 0, sizeof *s);
}

char *px_batch_shard_path(const px_batch_job *j, int shard, const char *ext)
{
    char *p;
    return asprintf(&p, "%s/shard-%05d.%s", j->out_dir, shard, ext) < 0 ? NULL : p;
}

/* The marker: the job, the .npy's shape, size and SHA-256, the rows and the errors. */
static int px__marker(const px_batch_shard *s, const int shape[5], const uint8_t *npy, size_t npy_len, char **text,
                      size_t *len)
{
    char sha[65];
    pxb_sha256_of(npy, npy_len, sha);
    FILE *f = open_memstream(text, len);
    if (!f)
        return -1;
    fprintf(f, "{\"pxbatch\": %d, \"shard\": %d, ", PXB_FORMAT, s->shard);
    pxb_json_name(f, "program", s->job->prog_path);
    fprintf(f, ",\n \"job\": %s,\n", s->job->job_text);
    fprintf(f, " \"shape\": [%d, %d, %d, %d, 4], \"npy_bytes\": %zu, \"npy_sha256\": \"%s\",\n \"rows\": [", shape[0],
            shape[1], shape[2], shape[3], npy_len, sha);
    int r = 0, first = 1;
    for (int i = 0; i < s->count; i++)
        if (s->img[i].px) {
            fprintf(f, "%s\n  {\"row\": %d, \"input\": %d, ", first ? "" : ",", r++, s->first + i);
            pxb_json_name(f, "file", s->job->in.v[s->first + i]);
            fputc('}', f);
            first = 0;
        }
    fprintf(f, "],\n \"errors\": [");
    first = 1;
    for (int i = 0; i < s->count; i++)
        if (!s->img[i].px) {
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

/* Runs a decoded shard and writes it; returns the pxvm class of a failure of the program, the
 * executor or the writing (0: written, bad inputs listed). */
int px_batch_shard_run(px_batch_worker_state *w, px_batch_shard *s, int input, int out_slot, pxvm_error *err)
{
    const pxvm_program *prog = s->prog;
    const pxvm_slot *o = &prog->slots[out_slot];
    px__shard_join(s);
    int rows = 0, dummy = -1, failed = 0;
    uint64_t bytes_in = 0;
    for (int i = 0; i < s->count; i++)
        if (s->img[i].px) {
            dummy = dummy < 0 ? i : dummy;
            pxvm_view v = pxvm_image_view(&s->img[i]);
            if (w->ops->bind(w->ex, input, rows++, &v, err) < 0)
                return err->cls;
            bytes_in += (uint64_t)s->img[i].w * (uint64_t)s->img[i].h * 4u;
        } else
            failed++;
    size_t per = o->patch_count ? (size_t)o->patch_w * o->patch_h * o->patch_count * 4u : (size_t)o->w * o->h * 4u;
    uint8_t *out = NULL;
    if (rows) {
        for (int b = rows; b < w->batch; b++) { /* the unused items of a short shard: any valid image */
            pxvm_view v = pxvm_image_view(&s->img[dummy]);
            if (w->ops->bind(w->ex, input, b, &v, err) < 0)
                return err->cls;
        }
        pxvm_run_options ro = {s->job->lim.max_steps, NULL, NULL, NULL, NULL};
        if (w->ops->run(w->ex, &ro, err) < 0)
            return err->cls;
        out = malloc(per * (size_t)rows);
        if (!out)
            return pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)(per * (size_t)rows)), PXVM_IO;
        pxvm_view v = o->patch_count ? pxvm_view_host(out, o->patch_w, o->patch_h * o->patch_count, 4)
                                     : pxvm_view_host(out, o->w, o->h, 4);
        v.items = rows;
        v.item_stride = (int64_t)per;
        if (w->ops->read(w->ex, out_slot, 0, 0, &v, o->patch_count > 0, err) < 0) {
            free(out);
            return err->cls;
        }
    }
    uint8_t *npy = NULL;
    char *index = NULL;
    size_t npy_len = 0, index_len = 0;
    int pn = o->patch_count ? o->patch_count : 1, ph = o->patch_count ? o->patch_h : o->h, pw = o->patch_count ? o->patch_w : o->w;
    const int shape[5] = {rows, pn, ph, pw, 4};
    int rc = pxvm_npy_encode_shape(out, 5, shape, &npy, &npy_len, err);
    free(out);
    if (rc < 0)
        return err->cls;
    if (px__marker(s, shape, npy, npy_len, &index, &index_len) < 0) {
        free(npy);
        free(index);
        return pxvm_fail(err, PXE_NOMEM, -1, -1, 0ull), PXVM_IO;
    }
    /* the marker, written last, marks the shard finished */
    char *pn_path = px_batch_shard_path(s->job, s->shard, "npy"), *pi_path = px_batch_shard_path(s->job, s->shard, "json");
    pxvm_outputs files = {0};
    rc = pn_path && pi_path && pxvm_outputs_add(&files, pn_path, npy, npy_len, err) == 0 &&
                 pxvm_outputs_commit(&files, err) == 0 && pxvm_outputs_add(&files, pi_path, index, index_len, err) == 0 &&
                 pxvm_outputs_commit(&files, err) == 0
             ? 0
             : (pn_path && pi_path ? err->cls : (pxvm_fail(err, PXE_NOMEM, -1, -1, 0ull), PXVM_IO));
    if (rc)
        pxvm_outputs_abort(&files);
    else { /* only what was written is counted */
        w->images += (uint64_t)rows, w->failed += (uint64_t)failed, w->bytes_in += bytes_in;
        w->bytes_out += npy_len + index_len, w->written++;
    }
    free(pn_path);
    free(pi_path);
    free(npy);
    free(index);
    return rc;
}
