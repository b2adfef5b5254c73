/* pxbatch_stats.c - pxbatch --stats FILE: where each worker's time went (decoding, waiting for
 * decoded images, the executor, writing) and each process's decode pool's (decoding, idle, held
 * back by memory; what it did while a worker waited), every rank's gathered on rank 0 under MPI
 * and written there as JSON (docs/datasets.md lists the fields). */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef PXVM_HAVE_MPI
#include <mpi.h>
#endif
#include <jansson.h>

#include "pxbatch_internal.h"

/* A worker's times and figures as --stats writes them (names: the order of its fields; the
 * first five and the last two are counts). */
#define PX_STAT_FIELDS 14
#define PX__COUNT(f) ((f) < 5 || (f) >= 12)
static void px__stat_row(const px_batch_worker *w, int rank, int i, double row[PX_STAT_FIELDS])
{
    const px_batch_times *t = &w->st.times;
    double v[PX_STAT_FIELDS] = {rank,          i,         w->device, (double)w->st.images, (double)t->decoded,
                                t->wall,       t->decode, t->input_wait, t->executor, t->write, t->write_wait, t->open,
                                (double)t->calls, (double)t->moved};
    memcpy(row, v, sizeof v);
}

/* A process's decode pool as --stats writes it (pool_names: the order of its fields). */
#define PX_POOL_FIELDS 10
static void px__pool_row(const px_batch_pool_stats *p, int rank, double row[PX_POOL_FIELDS])
{
    double v[PX_POOL_FIELDS] = {rank,   p->decoders,      (double)p->decoded, p->wall,        p->decode,
                                p->idle, p->memory_wait, p->wait_all_busy,   p->wait_memory, p->wait_decoding};
    memcpy(row, v, sizeof v);
}

long px_batch_cores(void)
{
    cpu_set_t set;
    long n = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? n : 1;
}

const char *px_batch_executor_used(const px_batch_job *j, const px_batch_worker *ws, int started)
{
    const char *exec = j->exec_name;
    for (int i = 0; i < started; i++)
        if (ws[i].st.ops)
            exec = ws[i].st.ops->name;
    return exec;
}

/* --stats FILE: every rank's workers' times (gathered on rank 0 under MPI), per worker and in
 * total, written by rank 0 as JSON. 0, or -1 (rank 0 could not write it: said on stderr). */
int px_batch_write_stats(const px_batch_job *j, const px_batch_worker *ws, int started, int nworkers,
                         const px_batch_pool_stats *pool, int rank, int size, int gpus, double setup, double secs,
                         uint64_t images)
{
    static const char *names[PX_STAT_FIELDS] = {"rank", "worker", "device", "images", "decoded", "wall_s", "decode_s",
                                                "input_wait_s", "executor_s", "write_s", "write_wait_s", "open_s",
                                                "executor_calls", "rows_moved"};
    static const char *pool_names[PX_POOL_FIELDS] = {"rank", "decoders", "decoded", "wall_s", "decode_s",
                                                     "decode_idle_s", "decode_memory_wait_s", "wait_all_busy_s",
                                                     "wait_memory_bound_s", "wait_decoding_s"};
    double *mine = calloc((size_t)started + 1, sizeof(double) * PX_STAT_FIELDS), *all = mine;
    double pool_mine[PX_POOL_FIELDS], *pools = pool_mine;
    int nrows = started, rc = 0;
    px__pool_row(pool, rank, pool_mine);
    if (!mine) {
        fprintf(stderr, "pxbatch: --stats: out of memory\n");
        return -1;
    }
    for (int i = 0; i < started; i++)
        px__stat_row(&ws[i], rank, i, mine + (size_t)i * PX_STAT_FIELDS);
#ifdef PXVM_HAVE_MPI
    if (px_batch_mpi) { /* every rank's rows to rank 0 */
        int n = started * PX_STAT_FIELDS, *counts = calloc((size_t)size, sizeof(int)),
            *displs = calloc((size_t)size, sizeof(int));
        MPI_Gather(&n, 1, MPI_INT, counts, 1, MPI_INT, 0, MPI_COMM_WORLD);
        int total = 0;
        for (int r = 0; rank == 0 && counts && displs && r < size; r++)
            displs[r] = total, total += counts[r];
        all = rank == 0 ? calloc((size_t)total + 1, sizeof(double)) : NULL;
        if (rank == 0 && (!all || !counts || !displs)) { /* the others still take part, then rank 0 says so */
            fprintf(stderr, "pxbatch: --stats: out of memory\n");
            rc = -1;
        }
        MPI_Gatherv(mine, n, MPI_DOUBLE, all, counts, displs, MPI_DOUBLE, 0, MPI_COMM_WORLD);
        nrows = total / PX_STAT_FIELDS;
        pools = rank == 0 ? calloc((size_t)size, sizeof(double) * PX_POOL_FIELDS) : NULL;
        if (rank == 0 && !pools && rc == 0) {
            fprintf(stderr, "pxbatch: --stats: out of memory\n");
            rc = -1;
        }
        MPI_Gather(pool_mine, PX_POOL_FIELDS, MPI_DOUBLE, pools, pools ? PX_POOL_FIELDS : 0, MPI_DOUBLE, 0,
                   MPI_COMM_WORLD);
        free(counts);
        free(displs);
        free(mine);
        mine = NULL;
    }
#endif
    if (rank != 0 || rc < 0) {
        free(all == mine ? NULL : all);
        free(mine);
        free(pools == pool_mine ? NULL : pools);
        return rc;
    }
    json_t *rows = json_array(), *sum = json_object(), *doc = json_object();
    double tot[PX_STAT_FIELDS] = {0};
    for (int r = 0; r < nrows; r++) {
        const double *row = all + (size_t)r * PX_STAT_FIELDS;
        json_t *o = json_object();
        for (int f = 0; f < PX_STAT_FIELDS; f++) {
            json_object_set_new(o, names[f], PX__COUNT(f) ? json_integer((json_int_t)row[f]) : json_real(row[f]));
            tot[f] += row[f];
        }
        /* the pool's decoders busy on its inputs on average over the worker's life: the decode
         * seconds of its shards / wall */
        json_object_set_new(o, "decoders_busy", json_real(row[5] > 0 ? row[6] / row[5] : 0));
        json_array_append_new(rows, o);
    }
    for (int f = 3; f < PX_STAT_FIELDS; f++)
        if (f != 5)
            json_object_set_new(sum, names[f], PX__COUNT(f) ? json_integer((json_int_t)tot[f]) : json_real(tot[f]));
    json_object_set_new(sum, "wall_s", json_real(secs));
    /* the decode pools (one a process): busy = their decode seconds / the run's wall, on average
     * the decoders at work of those the pools have (and as a fraction of them); the seconds a
     * worker waited for a decoded input by the bound then (every decoder decoding, one held back
     * by --max-memory / 2, or one with nothing to take while what was awaited decoded) */
    json_t *prows = json_array();
    double ptot[PX_POOL_FIELDS] = {0};
    int npools = px_batch_mpi ? size : 1;
    for (int r = 0; r < npools; r++) {
        const double *row = pools + (size_t)r * PX_POOL_FIELDS;
        json_t *o = json_object();
        for (int f = 0; f < PX_POOL_FIELDS; f++) {
            json_object_set_new(o, pool_names[f], f < 3 ? json_integer((json_int_t)row[f]) : json_real(row[f]));
            ptot[f] += row[f];
        }
        json_object_set_new(o, "decoders_busy", json_real(row[3] > 0 ? row[4] / row[3] : 0));
        json_object_set_new(o, "decoders_busy_fraction", json_real(row[3] > 0 && row[1] > 0 ? row[4] / row[3] / row[1] : 0));
        json_array_append_new(prows, o);
    }
    for (int f = 5; f < PX_POOL_FIELDS; f++)
        json_object_set_new(sum, pool_names[f], json_real(ptot[f]));
    json_object_set_new(sum, "decoders", json_integer((json_int_t)ptot[1]));
    json_object_set_new(sum, "decoders_busy", json_real(secs > 0 ? ptot[4] / secs : 0));
    json_object_set_new(sum, "decoders_busy_fraction", json_real(secs > 0 && ptot[1] > 0 ? ptot[4] / secs / ptot[1] : 0));
    json_object_set_new(doc, "images", json_integer((json_int_t)images));
    json_object_set_new(doc, "wall_s", json_real(secs));
    json_object_set_new(doc, "setup_s", json_real(setup));
    json_object_set_new(doc, "images_per_s", json_real(secs > 0 ? (double)images / secs : 0));
    json_object_set_new(doc, "processes", json_integer(size));
    json_object_set_new(doc, "workers_per_process", json_integer(nworkers));
    json_object_set_new(doc, "devices", json_integer(gpus));
    json_object_set_new(doc, "decoders_per_worker", json_integer(j->decoders));
    json_object_set_new(doc, "cores", json_integer(px_batch_cores()));
    json_object_set_new(doc, "executor", json_string(px_batch_executor_used(j, ws, started)));
    json_object_set_new(doc, "total", sum);
    json_object_set_new(doc, "workers", rows);
    json_object_set_new(doc, "pools", prows);
    free(all);
    free(pools == pool_mine ? NULL : pools);
    if (json_dump_file(doc, j->stats_path, JSON_INDENT(1)) != 0) {
        fprintf(stderr, "pxbatch: i/o error: --stats '%s': cannot write it (%s)\n", j->stats_path, strerror(errno));
        rc = -1;
    }
    json_decref(doc);
    return rc;
}

