/* outputs.c - what the tools write: all-or-nothing files (a temporary beside the target, renamed
 * when every output succeeded; removed on SIGINT/SIGTERM), streamed pipes and devices, and .npy
 * arrays. */
#define _POSIX_C_SOURCE 200809L
#include "../vm/vm.h"
#include "outputs.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- outputs: all-or-nothing files, streamed pipes and devices --------------------------------- */

/* The outputs whose temporary files exist right now, for pxvm_outputs_remove_temporaries (a
 * signal handler's call, on whichever thread the signal reached: pxrun's CPU executor has worker
 * threads that do not block signals). */
static pxvm_outputs *volatile px__tracked;

/* Who may touch the tracked outputs' temporary files and their names: 0 nobody, 1 a thread that
 * creates, registers, renames or forgets one (with every signal blocked on it, so that a handler
 * never interrupts it halfway), 2 a signal handler removing them before the process ends (for
 * good: the outputs then take no new file). A file is created and registered in one such step,
 * so a handler sees it registered or not created yet. */
static atomic_int px__owner;

void pxvm_outputs_track(pxvm_outputs *o) { px__tracked = o; }

/* Blocks every signal on this thread and, for the tracked outputs, takes them (waits while
 * another thread has them). 0, or -1 when a signal handler has removed the temporary files: the
 * process is ending, nothing more may be created or renamed. */
static int px__enter(const pxvm_outputs *o, sigset_t *old)
{
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, old);
    if (o != px__tracked)
        return 0;
    for (;;) {
        int was = 0;
        if (atomic_compare_exchange_weak(&px__owner, &was, 1))
            return 0;
        if (was == 2)
            return -1;
    }
}

static void px__leave(const pxvm_outputs *o, const sigset_t *old)
{
    int was = 1;
    if (o == px__tracked)
        atomic_compare_exchange_strong(&px__owner, &was, 0); /* stays 2 after a handler */
    pthread_sigmask(SIG_SETMASK, old, NULL);
}

void pxvm_outputs_remove_temporaries(void)
{
    /* wait for a thread that is between creating a file and registering it (never this thread:
     * it blocks signals meanwhile); nanosleep and the atomics are async-signal-safe */
    int saved = errno;
    for (;;) {
        int was = 0;
        if (atomic_compare_exchange_weak(&px__owner, &was, 2) || was == 2)
            break;
        struct timespec nap = {0, 100000};
        nanosleep(&nap, NULL);
    }
    pxvm_outputs *o = px__tracked;
    for (int i = 0; o && i < o->n; i++)
        if (o->tmp_path[i])
            unlink(o->tmp_path[i]); /* async-signal-safe */
    errno = saved;
}

/* Follows symbolic links (up to 40) to the path they name, which may not exist yet. */
static int px__follow_links(const char *path, char *out, size_t cap, pxvm_error *err)
{
    snprintf(out, cap, "%s", path);
    for (int hops = 0;; hops++) {
        struct stat st;
        if (lstat(out, &st) != 0 || !S_ISLNK(st.st_mode))
            return 0;
        if (hops == 40)
            return pxvm_fail(err, PXE_IO_WRITE, -1, -1, path, strerror(ELOOP));
        char target[PATH_MAX];
        ssize_t k = readlink(out, target, sizeof target - 1);
        if (k < 0)
            return pxvm_fail(err, PXE_IO_WRITE, -1, -1, path, strerror(errno));
        target[k] = 0;
        if (target[0] == '/') {
            snprintf(out, cap, "%s", target);
        } else { /* relative to the link's folder */
            char *slash = strrchr(out, '/');
            char dir[PATH_MAX];
            snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - out) : 1, slash ? out : ".");
            if ((size_t)snprintf(out, cap, "%s/%s", dir, target) >= cap)
                return pxvm_fail(err, PXE_IO_WRITE, -1, -1, path, strerror(ENAMETOOLONG));
        }
    }
}

static int px__outputs_grow(pxvm_outputs *o, pxvm_error *err)
{
    if (o->n < o->cap)
        return 0;
    int cap = o->cap ? 2 * o->cap : 8;
    char **a = calloc((size_t)cap, sizeof(char *)), **b = calloc((size_t)cap, sizeof(char *));
    uint8_t **c = calloc((size_t)cap, sizeof(uint8_t *));
    size_t *d = calloc((size_t)cap, sizeof(size_t));
    if (!a || !b || !c || !d) {
        free(a), free(b), free(c), free(d);
        return pxvm_fail(err, PXE_NOMEM, -1, -1, 0ull);
    }
    if (o->n) {
        memcpy(a, o->final_path, sizeof(char *) * (size_t)o->n);
        memcpy(b, o->tmp_path, sizeof(char *) * (size_t)o->n);
        memcpy(c, o->stream_data, sizeof(uint8_t *) * (size_t)o->n);
        memcpy(d, o->stream_len, sizeof(size_t) * (size_t)o->n);
    }
    /* the signal handler may read tmp_path at any time: swap whole arrays while it cannot */
    sigset_t old;
    if (px__enter(o, &old) < 0) {
        px__leave(o, &old);
        free(a), free(b), free(c), free(d);
        return pxvm_fail(err, PXE_IO_WRITE, -1, -1, "(outputs)", "interrupted by a signal");
    }
    char **fa = o->final_path, **fb = o->tmp_path;
    uint8_t **fc = o->stream_data;
    size_t *fd = o->stream_len;
    o->final_path = a, o->tmp_path = b, o->stream_data = c, o->stream_len = d, o->cap = cap;
    px__leave(o, &old);
    free(fa), free(fb), free(fc), free(fd);
    return 0;
}

int pxvm_outputs_add(pxvm_outputs *o, const char *path, const void *data, size_t len, pxvm_error *err)
{
    if (px__outputs_grow(o, err) < 0)
        return -1;
    int to_stdout = !strcmp(path, "-");
    struct stat st;
    /* stat follows every link, /proc's magic ones too (/dev/stdout -> /proc/self/fd/1 -> a pipe) */
    int exists = !to_stdout && stat(path, &st) == 0;
    if (to_stdout || (exists && (S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode)))) {
        /* a stream: written as it is at commit, after every file was written */
        uint8_t *copy = malloc(len ? len : 1);
        char *fin = strdup(path);
        if (!copy || !fin) {
            free(copy), free(fin);
            return pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)len);
        }
        if (len)
            memcpy(copy, data, len);
        sigset_t old;
        if (px__enter(o, &old) < 0) {
            px__leave(o, &old);
            free(copy), free(fin);
            return pxvm_fail(err, PXE_IO_WRITE, -1, -1, path, "interrupted by a signal");
        }
        o->final_path[o->n] = fin, o->tmp_path[o->n] = NULL;
        o->stream_data[o->n] = copy, o->stream_len[o->n] = len;
        o->n++;
        px__leave(o, &old);
        return 0;
    }
    char target[PATH_MAX]; /* a regular file or a new path: the file a symlink names is replaced */
    if (px__follow_links(path, target, sizeof target, err) < 0)
        return -1;
    if (exists && !S_ISREG(st.st_mode))
        return pxvm_fail(err, PXE_IO_WRITE, -1, -1, path,
                         S_ISDIR(st.st_mode) ? "is a directory"
                                             : "not a regular file, FIFO or character device: pxvm does not replace it");
    size_t n = strlen(target);
    char *tmp = malloc(n + 16), *fin = strdup(target);
    if (!tmp || !fin) {
        free(tmp);
        free(fin);
        return pxvm_fail(err, PXE_NOMEM, -1, -1, 0ull);
    }
    /* same folder as the final file (the link's target), so that rename() is atomic */
    snprintf(tmp, n + 16, "%s.tmp-XXXXXX", target);
    /* created and registered in one step, which a signal handler (on any thread) cannot cut: it
     * runs before the file exists or after it is registered, and then removes it */
    sigset_t old;
    int fd = -1, interrupted = px__enter(o, &old) < 0, made_errno = 0;
    if (!interrupted) {
        fd = mkstemp(tmp);
        made_errno = errno;
        if (fd >= 0) {
            o->final_path[o->n] = fin, o->tmp_path[o->n] = tmp, o->stream_data[o->n] = NULL, o->stream_len[o->n] = 0;
            o->n++;
        }
    }
    px__leave(o, &old);
    if (fd < 0) {
        free(tmp);
        free(fin);
        return pxvm_fail(err, PXE_IO_WRITE, -1, -1, path, interrupted ? "interrupted by a signal" : strerror(made_errno));
    }
    fchmod(fd, 0644);
    const uint8_t *p = data;
    size_t done = 0;
    while (done < len) {
        ssize_t k = write(fd, p + done, len - done);
        if (k <= 0) {
            int e = k < 0 ? errno : EIO;
            close(fd);
            return pxvm_fail(err, PXE_IO_WRITE, -1, -1, path, strerror(e)); /* abort removes tmp */
        }
        done += (size_t)k;
    }
    if (close(fd) != 0)
        return pxvm_fail(err, PXE_IO_WRITE, -1, -1, path, strerror(errno));
    return 0;
}

static void px__outputs_free(pxvm_outputs *o)
{
    sigset_t old;
    if (px__enter(o, &old) < 0) { /* a handler may be reading the arrays: the process is ending */
        px__leave(o, &old);
        return;
    }
    int n = o->n;
    o->n = 0; /* nothing left for a signal handler */
    px__leave(o, &old);
    for (int i = 0; i < n; i++) {
        free(o->final_path[i]);
        free(o->tmp_path[i]);
        free(o->stream_data[i]);
    }
    free(o->final_path);
    free(o->tmp_path);
    free(o->stream_data);
    free(o->stream_len);
    memset(o, 0, sizeof *o);
}

/* Writes a stream output: standard output, a FIFO or a character device, directly. */
static int px__write_stream(const char *path, const uint8_t *data, size_t len, pxvm_error *err)
{
    int to_stdout = !strcmp(path, "-");
    int fd = to_stdout ? 1 : open(path, O_WRONLY | O_CLOEXEC);
    const char *name = to_stdout ? "<stdout>" : path;
    if (fd < 0)
        return pxvm_fail(err, PXE_IO_WRITE, -1, -1, name, strerror(errno));
    size_t done = 0;
    int e = 0;
    while (done < len) {
        ssize_t k = write(fd, data + done, len - done);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            e = k < 0 ? errno : EIO;
            break;
        }
        done += (size_t)k;
    }
    if (!to_stdout && close(fd) != 0 && !e)
        e = errno;
    return e ? pxvm_fail(err, PXE_IO_WRITE, -1, -1, name, strerror(e)) : 0;
}

int pxvm_outputs_commit(pxvm_outputs *o, pxvm_error *err)
{
    int rc = 0;
    for (int i = 0; i < o->n && rc == 0; i++) /* streams first: if one fails, no file is replaced */
        if (!o->tmp_path[i])
            rc = px__write_stream(o->final_path[i], o->stream_data[i], o->stream_len[i], err);
    for (int i = 0; i < o->n && rc == 0; i++)
        if (o->tmp_path[i]) {
            /* renamed and forgotten in one step: a handler never reads a freed name */
            sigset_t old;
            char *done = NULL;
            if (px__enter(o, &old) < 0)
                rc = pxvm_fail(err, PXE_IO_WRITE, -1, -1, o->final_path[i], "interrupted by a signal");
            else if (rename(o->tmp_path[i], o->final_path[i]) != 0)
                rc = pxvm_fail(err, PXE_IO_WRITE, -1, -1, o->final_path[i], strerror(errno));
            else
                done = o->tmp_path[i], o->tmp_path[i] = NULL;
            px__leave(o, &old);
            free(done);
        }
    if (rc < 0)
        pxvm_outputs_abort(o);
    else
        px__outputs_free(o);
    return rc;
}

void pxvm_outputs_abort(pxvm_outputs *o)
{
    for (int i = 0; i < o->n; i++)
        if (o->tmp_path[i])
            unlink(o->tmp_path[i]);
    px__outputs_free(o);
}

/* ---- .npy ----------------------------------------------------------------------------------- */

int pxvm_npy_encode(const uint8_t *data, int n, int h, int w, uint8_t **out, size_t *len, pxvm_error *err)
{
    const int shape[4] = {n, h, w, 4};
    return pxvm_npy_encode_shape(data, 4, shape, out, len, err);
}

int pxvm_npy_encode_shape(const uint8_t *data, int ndim, const int *shape, uint8_t **out, size_t *len, pxvm_error *err)
{
    return pxvm_npy_encode_typed(data, "|u1", 1, ndim, shape, out, len, err);
}

int pxvm_npy_encode_typed(const void *data, const char *descr, size_t elem, int ndim, const int *shape, uint8_t **out,
                          size_t *len, pxvm_error *err)
{
    char dims[160] = "", dict[256];
    size_t body = elem;
    for (int i = 0; i < ndim && i < 8; i++) {
        size_t at = strlen(dims);
        snprintf(dims + at, sizeof dims - at, "%d, ", shape[i]);
        body *= (size_t)shape[i];
    }
    int dl = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (%.*s), }", descr,
                      ndim == 1 ? (int)strlen(dims) - 1 : (int)strlen(dims) - 2, dims);
    /* magic(6) + version(2) + header length(2) + dict + padding + '\n', a multiple of 64 */
    size_t hdr = 10 + (size_t)dl + 1;
    size_t padded = (hdr + 63) / 64 * 64;
    uint8_t *buf = malloc(padded + body);
    if (!buf)
        return pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)(padded + body));
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    size_t hlen = padded - 10;
    buf[8] = (uint8_t)(hlen & 255u);
    buf[9] = (uint8_t)(hlen >> 8);
    memcpy(buf + 10, dict, (size_t)dl);
    memset(buf + 10 + dl, ' ', padded - 10 - (size_t)dl - 1);
    buf[padded - 1] = '\n';
    if (body)
        memcpy(buf + padded, data, body);
    *out = buf;
    *len = padded + body;
    return 0;
}

