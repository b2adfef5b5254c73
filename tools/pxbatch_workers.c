/* pxbatch_workers.c - who runs which shard: a process's workers (threads, one per GPU without
 * MPI or --workers, each with its own executor, its next shards decoded by the process's decode
 * pool while it runs one and its writer thread writes the one before) and, under a launcher, the
 * ranks' agreement through MPI. */
#define _GNU_SOURCE
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef PXVM_HAVE_MPI
#include <mpi.h>
#endif

#include "../executors/registry.h"
#include "pxbatch_internal.h"

/* ---- workers -------------------------------------------------------------------------------- */

/* A worker's writer: a thread that writes the shards the worker has run, in the order run, while
 * the worker runs the next one: a shard's .npy hashed (SHA-256) and written with its index files
 * and marker no longer stops its executor. One shard at a time: the worker hands over the next
 * only once the writer is idle (write_wait), so that a worker holds two shards' outputs at most,
 * as --max-memory counts them. Without the thread (it could not start) the worker writes. */
typedef struct {
    px_batch_worker *w;
    pthread_t thread;
    int started;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    px_batch_shard *shard; /* handed over, not yet taken (NULL: none) */
    px_batch_result res;
    int busy, stop, rc;
    pxvm_error err;
    double write, t0; /* seconds writing; when the worker began (the progress line) */
    int tty;
} px__writer;

/* Writes shard `sh` (freed here) and counts it (only this thread changes the worker's counts); its
 * token buffer goes back to the worker. */
static void px__write_one(px__writer *wr, px_batch_shard *sh, px_batch_result *res)
{
    px_batch_worker *w = wr->w;
    const px_batch_job *j = w->job;
    double t0 = px_batch_now();
    px_batch_written done = {0};
    pxvm_error err = {0};
    uint8_t *data = res->data;
    size_t cap = res->cap;
    int rc = px_batch_shard_write(sh, w->out_slot, res, &done, &err), shard = sh->shard;
    px_batch_spare_give(&w->st, data, cap);
    px_batch_shard_free(sh, NULL);
    free(sh);
    wr->write += px_batch_now() - t0;
    if (rc) {
        if (wr->started) /* else its mutex was never made, or destroyed: the worker writes alone */
            pthread_mutex_lock(&wr->mu);
        if (!wr->rc)
            wr->rc = rc, wr->err = err;
        if (wr->started)
            pthread_mutex_unlock(&wr->mu);
        return;
    }
    w->st.images += done.images, w->st.failed += done.failed, w->st.bytes_in += done.bytes_in;
    w->st.bytes_out += done.bytes_out, w->st.written++;
    if (wr->tty)
        fprintf(stderr, "\rpxbatch: shard %d of %d, %" PRIu64 " images, %.0f images/s   ", shard + 1, j->nshards,
                w->st.images, (double)w->st.images / (px_batch_now() - wr->t0));
}

static void *px__writer_main(void *arg)
{
    px__writer *wr = arg;
    pthread_mutex_lock(&wr->mu);
    for (;;) {
        while (!wr->shard && !wr->stop)
            pthread_cond_wait(&wr->cv, &wr->mu);
        if (!wr->shard)
            break;
        px_batch_shard *sh = wr->shard;
        px_batch_result res = wr->res;
        wr->shard = NULL, wr->busy = 1;
        pthread_mutex_unlock(&wr->mu);
        px__write_one(wr, sh, &res);
        pthread_mutex_lock(&wr->mu);
        wr->busy = 0;
        pthread_cond_broadcast(&wr->cv);
    }
    pthread_mutex_unlock(&wr->mu);
    return NULL;
}

/* Hands a shard that ran to the writer, once it is idle; 0, or the class of an earlier shard's
 * failed write (then `sh` is freed unwritten: the worker stops). */
static int px__hand_over(px__writer *wr, px_batch_shard *sh, px_batch_result *res)
{
    if (!wr->started) {
        px__write_one(wr, sh, res);
        return wr->rc;
    }
    pthread_mutex_lock(&wr->mu);
    double t0 = px_batch_now();
    while (wr->busy || wr->shard)
        pthread_cond_wait(&wr->cv, &wr->mu);
    wr->w->st.times.write_wait += px_batch_now() - t0;
    int rc = wr->rc;
    if (!rc) {
        wr->shard = sh, wr->res = *res;
        pthread_cond_broadcast(&wr->cv);
    }
    pthread_mutex_unlock(&wr->mu);
    if (rc) {
        px_batch_shard_free(sh, NULL);
        free(sh);
        free(res->data);
        free(res->off);
    }
    return rc;
}

static void px__work(px_batch_worker *w)
{
    const px_batch_job *j = w->job;
    int nshards = j->nshards;
    if (px_batch_next(w, w->slot_id) >= nshards)
        return; /* nothing left: no executor opened */
    pxvm_open_options oo = {j->threads, w->device};
    const pxvm_executor_ops *ops;
    double opened = px_batch_now();
    if (pxvm_executor_open_named(w->exec, &oo, &ops, &w->st.ex, NULL, &w->err) < 0) {
        w->rc = w->err.cls;
        return;
    }
    w->st.ops = ops;
    w->st.batch = j->shard_size;
    /* native: the any-size program is never loaded, only its resolutions, per size in a shard;
     * dynamic: nothing is loaded, the executor's ragged batches take no program */
    if (!j->native && j->policy.kind != PX_POLICY_DYNAMIC && ops->load(w->st.ex, w->prog, j->shard_size, &w->err) < 0) {
        w->rc = w->err.cls;
        ops->close(w->st.ex);
        return;
    }
    w->st.times.open = px_batch_now() - opened;
    w->st.spare_ok = pthread_mutex_init(&w->st.spare_mu, NULL) == 0;
    px__writer wr;
    memset(&wr, 0, sizeof wr);
    wr.w = w, wr.t0 = px_batch_now(), wr.tty = w->is_rank0_first && isatty(2);
    if (pthread_mutex_init(&wr.mu, NULL) == 0) {
        if (pthread_cond_init(&wr.cv, NULL) == 0) {
            wr.started = pthread_create(&wr.thread, NULL, px__writer_main, &wr) == 0;
            if (!wr.started)
                pthread_cond_destroy(&wr.cv);
        }
        if (!wr.started)
            pthread_mutex_destroy(&wr.mu);
    }
    /* the shards in the order the pool made them for this worker (decoding ahead, within the
     * process's --max-memory / 2, while this one runs and the writer writes the one before) */
    for (;;) {
        px_batch_shard *cur;
        if (px_batch_pool_take(w->pool, w->index, &cur, &w->err) < 0) {
            w->rc = PXVM_IO;
            break;
        }
        if (!cur)
            break;
        px_batch_result res;
        int rc = px_batch_shard_run(&w->st, cur, w->input, w->out_slot, &res, &w->err);
        px_batch_times_add(&w->st.times, &cur->times); /* released by the run: no decode is left */
        memset(&cur->times, 0, sizeof cur->times);
        if (rc) {
            px_batch_shard_free(cur, NULL);
            free(cur);
            w->rc = rc;
            break;
        }
        if ((rc = px__hand_over(&wr, cur, &res)) != 0) { /* the writer is idle: its error is read here */
            w->rc = rc, w->err = wr.err;
            break;
        }
    }
    px_batch_pool_leave(w->pool, w->index, &w->st.times); /* after a failure: its shards stop decoding */
    if (wr.started) { /* the shards that ran are written, also after a failure */
        pthread_mutex_lock(&wr.mu);
        wr.stop = 1;
        pthread_cond_broadcast(&wr.cv);
        pthread_mutex_unlock(&wr.mu);
        pthread_join(wr.thread, NULL);
        pthread_mutex_destroy(&wr.mu);
        pthread_cond_destroy(&wr.cv);
    }
    w->st.times.write += wr.write;
    if (wr.rc && !w->rc) /* a write failed (the worker stops at its next hand-over, or had ended) */
        w->rc = wr.rc, w->err = wr.err;
    if (wr.tty && w->st.written)
        fputc('\n', stderr);
    ops->close(w->st.ex);
    px_batch_sized_free(&w->st); /* after the executor that may hold one of them */
    if (w->st.spare_ok) {
        free(w->st.spare);
        w->st.spare = NULL, w->st.spare_cap = 0, w->st.spare_ok = 0;
        pthread_mutex_destroy(&w->st.spare_mu);
    }
}

void *px_batch_work(void *arg)
{
    px_batch_worker *w = arg;
    double started = px_batch_now();
    px__work(w);
    px_batch_pool_leave(w->pool, w->index, &w->st.times); /* (again: also when it never ran a shard) */
    w->st.times.wall = px_batch_now() - started;
    return NULL;
}

/* MPI is started only under a launcher (mpirun, srun: its variables are set): Open MPI's
 * singleton start costs about half a second for nothing. */
int px_batch_mpi;

int px_batch_launched(void)
{
    static const char *vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        if (getenv(vars[i]))
            return 1;
    return 0;
}

/* The largest of every rank's value (MPI), so that all ranks take the same way. */
int px_batch_agree(int v)
{
#ifdef PXVM_HAVE_MPI
    if (!px_batch_mpi)
        return v;
    int all = v;
    MPI_Allreduce(&v, &all, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    return all;
#else
    return v;
#endif
}

/* rank 0's value, on every rank */
int px_batch_from_root(int v)
{
#ifdef PXVM_HAVE_MPI
    if (px_batch_mpi)
        MPI_Bcast(&v, 1, MPI_INT, 0, MPI_COMM_WORLD);
#endif
    return v;
}

/* Does every rank have rank 0's job (the same program and inputs)? 1 or 0, on every rank. */
int px_batch_same_job(const char *text)
{
#ifdef PXVM_HAVE_MPI
    if (!px_batch_mpi)
        return 1;
    int rank, len = (int)strlen(text);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int len0 = px_batch_from_root(len);
    char *root = malloc((size_t)len0 + 1);
    if (!root) {
        fprintf(stderr, "pxbatch: i/o error: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (rank == 0)
        memcpy(root, text, (size_t)len0);
    MPI_Bcast(root, len0, MPI_CHAR, 0, MPI_COMM_WORLD);
    int ok = len == len0 && !memcmp(root, text, (size_t)len);
    free(root);
    return !px_batch_agree(!ok);
#else
    (void)text;
    return 1;
#endif
}
