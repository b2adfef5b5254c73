/* pxbatch_workers.c - who runs which shard: a process's workers (threads, one per GPU without
 * MPI, each with its own executor, decoding its next shard while it runs one) and, under a
 * launcher, the ranks' agreement through MPI. */
#define _GNU_SOURCE
#include <inttypes.h>
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

/* The next shard of this worker from `s` on that an earlier run did not finish. */
static int px__next(const px_batch_worker *w, int s)
{
    while (s < w->job->nshards && w->job->done[s])
        s += w->nslots_total;
    return s;
}

static void px__work(px_batch_worker *w)
{
    const px_batch_job *j = w->job;
    int nshards = j->nshards;
    int s = px__next(w, w->slot_id);
    if (s >= nshards)
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
    /* shards in flight: the one that runs and the next ones decoding (a ring: a decode thread
     * holds its shard's address, which never moves). With the dynamic policy PX_BATCH_AHEAD of
     * them, so that a shard's slowest image (a large PNG, a 20-megapixel JPEG) decodes while
     * earlier shards run: with two, every shard waited for its slowest decode (H200 host, 560
     * photos: 80-89 images/s, 34 with shards of 16). */
    px_batch_shard ring[PX_BATCH_AHEAD];
    int ahead = j->policy.kind == PX_POLICY_DYNAMIC ? PX_BATCH_AHEAD : 2, head = 0, live = 0;
    int upcoming = s; /* the next shard to start */
    double t0 = px_batch_now();
    int tty = w->is_rank0_first && isatty(2);
    for (;;) {
        while (!w->rc && live < ahead && upcoming < nshards) { /* decode while the others run */
            px_batch_shard *sh = &ring[(head + live) % ahead];
            if (px_batch_shard_start(sh, j, w->prog, w->input, upcoming) != 0) {
                px_batch_shard_free(sh, &w->st.times);
                w->rc = (pxvm_fail(&w->err, PXE_NOMEM, -1, -1, 0ull), PXVM_IO);
                break;
            }
            live++;
            upcoming = px__next(w, upcoming + w->nslots_total);
        }
        if (!live || w->rc)
            break;
        px_batch_shard *cur = &ring[head];
        int rc = px_batch_shard_run(&w->st, cur, w->input, w->out_slot, &w->err);
        int done_shard = cur->shard;
        px_batch_shard_free(cur, &w->st.times);
        head = (head + 1) % ahead, live--;
        if (rc) {
            w->rc = rc;
            break;
        }
        if (tty)
            fprintf(stderr, "\rpxbatch: shard %d of %d, %" PRIu64 " images, %.0f images/s   ", done_shard + 1, nshards,
                    w->st.images, (double)w->st.images / (px_batch_now() - t0));
    }
    for (; live > 0; live--, head = (head + 1) % ahead) /* after a failure: their decoders stop */
        px_batch_shard_free(&ring[head], &w->st.times);
    if (tty && w->st.written)
        fputc('\n', stderr);
    ops->close(w->st.ex);
    px_batch_sized_free(&w->st); /* after the executor that may hold one of them */
}

void *px_batch_work(void *arg)
{
    px_batch_worker *w = arg;
    double started = px_batch_now();
    px__work(w);
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
