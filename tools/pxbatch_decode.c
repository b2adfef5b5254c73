/* pxbatch_decode.c - the inputs, read (regular files only, within --max-memory) and decoded in the
 * background by the process's decode pool, in the order the workers run them; a shard made, taken,
 * released and freed, and its files' paths. pxbatch_shard.c runs and writes it. */
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
static void px__decode_one(const px_batch_pool *p, px_batch_shard *s, int i)
{
    pxvm_error err;
    char *warning = NULL;
    const char *path = s->job->in.v[s->first + i];
    if (s->first + i == p->delay_input) /* a test's hook: later inputs ready before it */
        nanosleep(&(struct timespec){p->delay_ms / 1000, (long)(p->delay_ms % 1000) * 1000000L}, NULL);
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
            snprintf(msg, sizeof msg, "%.350s (file '%.300s'; --policy stretch or fit resizes it%s)", err.msg, path,
                     s->job->uniform_plan ? ", --policy dynamic takes it at a size of its own" : "");
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

/* ---- the process's decode pool -------------------------------------------------------------- */

/* The pool's figures brought up to now (under mu, before any of busy, held_back, idle, waiting
 * changes): the seconds since the last change, by what the decoders and the workers were doing. */
static void px__tick(px_batch_pool *p)
{
    double now = px_batch_now(), dt = now - p->last;
    p->last = now;
    p->stats.memory_wait += dt * p->held_back, p->stats.idle += dt * p->idle;
    if (p->waiting)
        *(p->held_back ? &p->stats.wait_memory
          : p->busy == p->started ? &p->stats.wait_all_busy
                                  : &p->stats.wait_decoding) += dt;
}

int px_batch_next(const px_batch_worker *w, int s)
{
    while (s < w->job->nshards && w->job->done[s])
        s += w->nslots_total;
    return s;
}

/* The next shard in the order the workers run them, made (its arrays; under mu) and put last in
 * the queue and in its worker's list: the workers' next shards in turn (each worker's k-th after
 * every worker's (k-1)-th). NULL: none left, or out of memory (the worker's take says so). */
static px_batch_shard *px__make_next(px_batch_pool *p)
{
    const px_batch_job *j = p->job;
    int w = -1;
    for (int k = 0; k < p->nworkers && w < 0; k++) {
        int c = (p->turn + k) % p->nworkers;
        if (p->upcoming[c] < j->nshards)
            w = c;
    }
    if (w < 0)
        return NULL;
    px_batch_shard *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->job = j, s->prog = p->prog, s->shard = p->upcoming[w], s->input = p->input, s->pool = p, s->owner = w;
    s->first = s->shard * j->shard_size;
    s->count = (int)j->in.n - s->first < j->shard_size ? (int)j->in.n - s->first : j->shard_size;
    s->w = p->prog->slots[p->input].w, s->h = p->prog->slots[p->input].h;
    size_t count = (size_t)(unsigned)s->count;
    s->img = calloc(count, sizeof(pxvm_image));
    s->why = calloc(count, sizeof(char *));
    s->orig = calloc(count, sizeof *s->orig);
    s->rsz = calloc(count, sizeof *s->rsz);
    s->good = calloc(count, 1);
    s->ready = calloc(count, 1);
    if (!s->img || !s->why || !s->orig || !s->rsz || !s->good || !s->ready) {
        px_batch_shard_free(s, NULL);
        free(s);
        return NULL;
    }
    p->upcoming[w] = px_batch_next(&p->ws[w], s->shard + p->ws[w].nslots_total);
    p->turn = (w + 1) % p->nworkers;
    *(p->head ? &p->tail->queued : &p->head) = s; /* last, in O(1): thousands may be ahead */
    p->tail = s;
    *(p->mine[w] ? &p->mine_last[w]->mine : &p->mine[w]) = s;
    p->mine_last[w] = s;
    return s;
}

/* s out of the queue (its inputs all taken, or it stopped) */
static void px__unqueue(px_batch_pool *p, px_batch_shard *s)
{
    px_batch_shard *prev = NULL;
    for (px_batch_shard **at = &p->head; *at; prev = *at, at = &(*at)->queued)
        if (*at == s) {
            *at = s->queued;
            if (p->tail == s)
                p->tail = prev;
            break;
        }
    s->queued = NULL;
}

/* The shard whose input a decoder takes next (under mu): the oldest with inputs to take while the
 * decoded inputs waiting are within the bound (the next shard made when the queue has none); over
 * it, only a shard its worker took whose run needs it whole (fixed, native: else its worker would
 * wait for ever). NULL: nothing to take; *held_back 1 when the bound is why. */
static px_batch_shard *px__to_take(px_batch_pool *p, int *held_back)
{
    int over = p->held > p->bound, whole = p->job->policy.kind != PX_POLICY_DYNAMIC;
    *held_back = over && p->head;
    for (px_batch_shard *s = p->head; s && (!over || whole); s = s->queued)
        if (!over || s->taken)
            return s;
    if (over) {
        for (int w = 0; w < p->nworkers && !*held_back; w++)
            *held_back = p->upcoming[w] < p->job->nshards;
        return NULL;
    }
    return px__make_next(p);
}

/* A decoder: takes the inputs in the order they run (px__to_take), one at a time; an input once
 * taken is decoded (a worker may wait for it), also after its shard stopped. */
static void *px__decoder(void *arg)
{
    px_batch_pool *p = arg;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        int held_back = 0;
        px_batch_shard *s = p->stop ? NULL : px__to_take(p, &held_back);
        if (s) {
            int i = s->claimed++;
            if (s->claimed == s->count)
                px__unqueue(p, s);
            s->inflight++;
            px__tick(p);
            p->busy++;
            pthread_mutex_unlock(&p->mu);
            double t0 = px_batch_now();
            px__decode_one(p, s, i);
            double secs = px_batch_now() - t0;
            pthread_mutex_lock(&p->mu);
            px__tick(p);
            p->busy--;
            s->times.decode += secs, s->times.decoded++;
            p->stats.decode += secs, p->stats.decoded++;
            s->good[i] = s->img[i].px != NULL;
            s->ready[i] = 1;
            s->decoded++, s->inflight--;
            if (s->good[i]) {
                s->held += px__bytes(&s->img[i]);
                p->held += px__bytes(&s->img[i]);
            }
            pthread_cond_broadcast(&p->done);
            continue;
        }
        if (p->stop)
            break;
        int *state = held_back ? &p->held_back : &p->idle;
        px__tick(p);
        (*state)++;
        pthread_cond_wait(&p->work, &p->mu);
        px__tick(p);
        (*state)--;
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

int px_batch_pool_start(px_batch_pool *p, const px_batch_job *j, const pxvm_program *prog, int input,
                        px_batch_worker *ws, int nworkers, int threads)
{
    memset(p, 0, sizeof *p);
    p->job = j, p->prog = prog, p->input = input, p->ws = ws, p->nworkers = nworkers;
    /* decoded inputs wait within half of --max-memory (one at least: only held over it stops) */
    p->bound = j->lim.max_memory / 2u;
    const char *delay = getenv("PXVM_TEST_DECODE_DELAY");
    if (!delay || sscanf(delay, "%d:%d", &p->delay_input, &p->delay_ms) != 2 || p->delay_ms < 0)
        p->delay_input = -1, p->delay_ms = 0;
    p->mine = calloc((size_t)nworkers, sizeof *p->mine);
    p->mine_last = calloc((size_t)nworkers, sizeof *p->mine_last);
    p->upcoming = calloc((size_t)nworkers, sizeof *p->upcoming);
    p->thread = calloc((size_t)threads, sizeof *p->thread);
    if (!p->mine || !p->mine_last || !p->upcoming || !p->thread || pthread_mutex_init(&p->mu, NULL) != 0) {
        free(p->mine), free(p->mine_last), free(p->upcoming), free(p->thread);
        p->mine = NULL, p->mine_last = NULL, p->upcoming = NULL, p->thread = NULL;
        return 0;
    }
    p->made = 1;
    pthread_cond_init(&p->work, NULL);
    pthread_cond_init(&p->done, NULL);
    for (int w = 0; w < nworkers; w++)
        p->upcoming[w] = px_batch_next(&ws[w], ws[w].slot_id);
    pthread_mutex_lock(&p->mu); /* the threads take inputs once all are counted (busy == started) */
    p->last = p->stats.wall = px_batch_now();
    for (int t = 0; t < threads; t++)
        if (pthread_create(&p->thread[p->started], NULL, px__decoder, p) == 0)
            p->started++;
    p->stats.decoders = p->started;
    pthread_mutex_unlock(&p->mu);
    return p->started;
}

/* The shards of `list` (through mine) stopped (under mu): no input more taken, those decoding
 * finished, their bytes no longer the pool's. */
static void px__stop_all(px_batch_pool *p, px_batch_shard *list)
{
    for (px_batch_shard *s = list; s; s = s->mine) {
        px__unqueue(p, s);
        s->claimed = s->count;
    }
    for (px_batch_shard *s = list; s; s = s->mine)
        while (s->inflight)
            pthread_cond_wait(&p->done, &p->mu);
    for (px_batch_shard *s = list; s; s = s->mine)
        p->held -= s->held, s->held = 0, s->pool = NULL;
    pthread_cond_broadcast(&p->work);
}

static void px__free_list(px_batch_shard *s, px_batch_times *times)
{
    while (s) {
        px_batch_shard *next = s->mine;
        px_batch_shard_free(s, times);
        free(s);
        s = next;
    }
}

void px_batch_pool_leave(px_batch_pool *p, int w, px_batch_times *times)
{
    if (!p->made)
        return;
    pthread_mutex_lock(&p->mu);
    p->upcoming[w] = p->job->nshards;
    px_batch_shard *list = p->mine[w];
    p->mine[w] = NULL;
    px__stop_all(p, list);
    pthread_mutex_unlock(&p->mu);
    px__free_list(list, times);
}

void px_batch_pool_end(px_batch_pool *p)
{
    if (!p->made)
        return;
    pthread_mutex_lock(&p->mu);
    px__tick(p);
    p->stop = 1;
    pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&p->mu);
    for (int t = 0; t < p->started; t++)
        pthread_join(p->thread[t], NULL);
    px__tick(p);
    p->stats.wall = px_batch_now() - p->stats.wall;
    for (int w = 0; w < p->nworkers; w++) { /* a worker that never started: its shards */
        pthread_mutex_lock(&p->mu);
        px__stop_all(p, p->mine[w]);
        pthread_mutex_unlock(&p->mu);
        px__free_list(p->mine[w], NULL);
        p->mine[w] = NULL;
    }
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->work);
    pthread_cond_destroy(&p->done);
    free(p->mine), free(p->mine_last), free(p->upcoming), free(p->thread);
    p->mine = NULL, p->mine_last = NULL, p->upcoming = NULL, p->thread = NULL, p->made = 0;
}

int px_batch_pool_take(px_batch_pool *p, int w, px_batch_shard **out, pxvm_error *err)
{
    pthread_mutex_lock(&p->mu);
    while (!p->mine[w] && p->upcoming[w] < p->job->nshards && px__make_next(p))
        ; /* the shards before it in the order they run are made first */
    px_batch_shard *s = p->mine[w];
    int rc = 0;
    if (s) {
        p->mine[w] = s->mine, s->mine = NULL;
        s->taken = 1;
        pthread_cond_broadcast(&p->work); /* made; or (fixed, native) it now decodes past the bound */
    } else if (p->upcoming[w] < p->job->nshards)
        rc = pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)sizeof *s);
    pthread_mutex_unlock(&p->mu);
    *out = s;
    return rc < 0 ? -1 : 0;
}

void px_batch_pool_lock(px_batch_shard *s) { pthread_mutex_lock(&s->pool->mu); }
void px_batch_pool_unlock(px_batch_shard *s) { pthread_mutex_unlock(&s->pool->mu); }

void px_batch_pool_wait(px_batch_shard *s, px_batch_times *times)
{
    px_batch_pool *p = s->pool;
    double t0 = px_batch_now();
    px__tick(p);
    p->waiting++;
    pthread_cond_wait(&p->done, &p->mu);
    px__tick(p);
    p->waiting--;
    times->input_wait += px_batch_now() - t0;
}

void px_batch_pool_freed(px_batch_shard *s, uint64_t bytes)
{
    s->held -= bytes, s->pool->held -= bytes;
    pthread_cond_broadcast(&s->pool->work);
}

void px_batch_pool_wait_all(px_batch_shard *s, px_batch_times *times)
{
    px_batch_pool_lock(s);
    while (s->decoded < s->count)
        px_batch_pool_wait(s, times);
    px_batch_pool_unlock(s);
}

int px_batch_pool_filling(const px_batch_shard *s)
{
    return s->claimed < s->count && s->pool->held <= s->pool->bound;
}

void px_batch_pool_release(px_batch_shard *s)
{
    px_batch_pool *p = s->pool;
    pthread_mutex_lock(&p->mu);
    px__stop_all(p, s); /* s->mine is NULL once taken: s alone */
    pthread_mutex_unlock(&p->mu);
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
    into->wall += t->wall, into->open += t->open, into->decode += t->decode;
    into->input_wait += t->input_wait, into->executor += t->executor;
    into->write += t->write, into->write_wait += t->write_wait, into->decoded += t->decoded;
    into->calls += t->calls, into->moved += t->moved;
}

void px_batch_shard_free(px_batch_shard *s, px_batch_times *times)
{
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
    memset(s, 0, sizeof *s);
}

char *px_batch_shard_path(const px_batch_job *j, int shard, const char *ext)
{
    char *p;
    return asprintf(&p, "%s/shard-%05d.%s", j->out_dir, shard, ext) < 0 ? NULL : p;
}
