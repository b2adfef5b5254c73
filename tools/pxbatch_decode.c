/* pxbatch_decode.c - a shard's inputs, read (regular files only, within --max-memory) and decoded
 * by host threads in the background under the process's gate of decodes at once; the shard's
 * start, join and free, and its files' paths. pxbatch_shard.c runs and writes it. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
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

/* px__load_input, and the damage a lenient decode went past in *warning (NULL: none; a note of
 * bytes after the image's end is none: they are no damage). */
static int px__load_input_warned(const char *path, const pxvm_limits *lim, pxvm_image *img, char **warning,
                                 pxvm_error *err)
{
    int rc = px__load_input(path, lim, img, err);
    if (rc == 0 && err->code != PXE_NONE && !pxvm_decode_note(err)) {
        char buf[1024];
        pxvm_error_format(err, buf, sizeof buf);
        *warning = strdup(buf);
    }
    return rc;
}

/* ---- one shard: decoded in the background, run as one batch, written all-or-nothing ---------- */

/* The decoded bytes of image i (what --max-memory / 4 counts while it waits to be run). */
uint64_t px__bytes(const pxvm_image *img) { return (uint64_t)img->w * (uint64_t)img->h * 4u; }

/* Input i decoded (and, dynamic, sized) into s->img[i]; its error or warning into s->why[i]. */
static void px__decode_one(px_batch_shard *s, int i)
{
    pxvm_error err;
    char *warning = NULL;
    const char *path = s->job->in.v[s->first + i];
    if (s->job->policy.kind == PX_POLICY_DYNAMIC) { /* resized later, by the executor, in a ragged batch */
        if (px__load_input_warned(path, &s->job->lim, &s->img[i], &warning, &err) == 0) {
            s->orig[i][0] = s->img[i].w, s->orig[i][1] = s->img[i].h;
            if (px_dynamic_size(&s->job->policy, s->img[i].w, s->img[i].h, &s->rsz[i][0], &s->rsz[i][1], &err) < 0) {
                char msg[sizeof err.msg];
                snprintf(msg, sizeof msg, "%.400s (file '%.300s')", err.msg, path);
                memcpy(err.msg, msg, sizeof msg);
                pxvm_image_free(&s->img[i]);
            }
        }
    } else if (s->job->native) { /* at its own size: only the input's bounds are checked here */
        if (px__load_input_warned(path, &s->job->lim, &s->img[i], &warning, &err) == 0 &&
            pxvm_anysize_check(s->prog, s->input, s->img[i].w, s->img[i].h, &err) < 0) {
            char msg[sizeof err.msg];
            snprintf(msg, sizeof msg, "%.400s (file '%.300s')", err.msg, path);
            memcpy(err.msg, msg, sizeof msg);
            pxvm_image_free(&s->img[i]);
        }
    } else if (px__load_input_warned(path, &s->job->lim, &s->img[i], &warning, &err) == 0 &&
               (s->img[i].w != s->w || s->img[i].h != s->h)) {
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
        free(warning);
    } else {
        s->why[i] = warning; /* decoded: why, if any, is the lenient decode's warning */
    }
}

void px_batch_gate_take(px_batch_gate *g)
{
    if (!g)
        return;
    pthread_mutex_lock(&g->mu);
    while (g->free <= 0)
        pthread_cond_wait(&g->cv, &g->mu);
    g->free--;
    pthread_mutex_unlock(&g->mu);
}

void px_batch_gate_give(px_batch_gate *g)
{
    if (!g)
        return;
    pthread_mutex_lock(&g->mu);
    g->free++;
    pthread_cond_signal(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

/* A decoding thread: takes the shard's inputs in order, one at a time, so that they are ready in
 * about the order they are run; with the dynamic policy it waits while the decoded inputs not yet
 * run hold more than hold_max bytes (an input once taken is decoded: the runner waits for it). */
static void *px__decode(void *arg)
{
    px_batch_shard *s = arg;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        if (s->claimed < s->count && s->held > s->hold_max) {
            double t0 = px_batch_now();
            while (s->claimed < s->count && s->held > s->hold_max)
                pthread_cond_wait(&s->cv, &s->mu);
            s->times.memory_wait += px_batch_now() - t0;
        }
        if (s->claimed >= s->count)
            break;
        int i = s->claimed++;
        pthread_mutex_unlock(&s->mu);
        double t0 = px_batch_now();
        px_batch_gate_take(s->job->gate);
        double t1 = px_batch_now();
        px__decode_one(s, i);
        double t2 = px_batch_now();
        px_batch_gate_give(s->job->gate);
        pthread_mutex_lock(&s->mu);
        s->times.gate_wait += t1 - t0, s->times.decode += t2 - t1, s->times.decoded++;
        s->good[i] = s->img[i].px != NULL;
        s->ready[i] = 1;
        if (s->good[i] && s->job->policy.kind == PX_POLICY_DYNAMIC)
            s->held += px__bytes(&s->img[i]);
        pthread_cond_broadcast(&s->cv);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

int px_batch_shard_start(px_batch_shard *s, const px_batch_job *j, const pxvm_program *prog, int input, int shard)
{
    memset(s, 0, sizeof *s);
    s->job = j, s->prog = prog, s->shard = shard, s->input = input;
    s->first = shard * j->shard_size;
    s->count = (int)j->in.n - s->first < j->shard_size ? (int)j->in.n - s->first : j->shard_size;
    s->w = prog->slots[input].w, s->h = prog->slots[input].h;
    size_t count = (size_t)(unsigned)s->count;
    s->img = calloc(count, sizeof(pxvm_image));
    s->why = calloc(count, sizeof(char *));
    s->orig = calloc(count, sizeof *s->orig);
    s->rsz = calloc(count, sizeof *s->rsz);
    s->good = calloc(count, 1);
    s->ready = calloc(count, 1);
    /* dynamic: PX_BATCH_AHEAD shards in flight, together holding at most half of --max-memory of
     * decoded inputs that wait for the executor (and one input a decoder more each) */
    s->hold_max = j->policy.kind == PX_POLICY_DYNAMIC ? j->lim.max_memory / (2u * PX_BATCH_AHEAD) : UINT64_MAX;
    if (!s->img || !s->why || !s->orig || !s->rsz || !s->good || !s->ready)
        return -1;
    if (pthread_mutex_init(&s->mu, NULL) != 0)
        return -1;
    if (pthread_cond_init(&s->cv, NULL) != 0) {
        pthread_mutex_destroy(&s->mu);
        return -1;
    }
    s->sync_made = 1;
    /* the images of a shard are decoded by several host threads, so that decoding keeps up with
     * the executor where the cores allow (JPEG decoding is the slow part of a pipeline) */
    int n = j->decoders < s->count ? j->decoders : s->count;
    for (int t = 0; t < n; t++)
        if (pthread_create(&s->thread[s->started], NULL, px__decode, s) == 0)
            s->started++;
    if (!s->started) { /* no thread: decoded here, all of it (no runner frees bytes meanwhile) */
        s->hold_max = UINT64_MAX;
        px__decode(s);
    }
    return 0;
}

/* Waits for the decoding threads; with `stop`, they take no more inputs first (a shard freed
 * before it ran, or whose run failed: no decoder waits for bytes that are never freed). */
void px__shard_join(px_batch_shard *s, int stop)
{
    if (stop && s->sync_made && s->started) {
        pthread_mutex_lock(&s->mu);
        s->claimed = s->count;
        pthread_cond_broadcast(&s->cv);
        pthread_mutex_unlock(&s->mu);
    }
    for (int t = 0; t < s->started; t++)
        pthread_join(s->thread[t], NULL);
    s->started = 0;
}

/* the monotonic clock, in seconds */
double px_batch_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

void px_batch_times_add(px_batch_times *into, const px_batch_times *t)
{
    into->wall += t->wall, into->open += t->open, into->decode += t->decode, into->gate_wait += t->gate_wait;
    into->memory_wait += t->memory_wait, into->input_wait += t->input_wait, into->executor += t->executor;
    into->write += t->write, into->write_wait += t->write_wait, into->decoded += t->decoded;
}

void px_batch_shard_free(px_batch_shard *s, px_batch_times *times)
{
    px__shard_join(s, 1);
    if (times)
        px_batch_times_add(times, &s->times);
    for (int i = 0; s->img && s->why && i < s->count; i++) {
        pxvm_image_free(&s->img[i]);
        free(s->why[i]);
    }
    free(s->img);
    free(s->why);
    free(s->orig);
    free(s->rsz);
    free(s->good);
    free(s->ready);
    if (s->sync_made) {
        pthread_mutex_destroy(&s->mu);
        pthread_cond_destroy(&s->cv);
    }
    memset(s, 0, sizeof *s);
}

char *px_batch_shard_path(const px_batch_job *j, int shard, const char *ext)
{
    char *p;
    return asprintf(&p, "%s/shard-%05d.%s", j->out_dir, shard, ext) < 0 ? NULL : p;
}
