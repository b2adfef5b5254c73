/* pxbatch_internal.h - what the pxbatch command's files share (private to tools/pxbatch*.c that
 * run a job): the job, a shard, a worker, and the functions one file calls in another. File
 * handling (markers, the list, --verify) is apart, in pxbatch.h. */
#ifndef PXBATCH_INTERNAL_H
#define PXBATCH_INTERNAL_H

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "../vm/resize.h"
#include "../vm/vm.h"
#include "pxbatch.h"
#include "pxrun_size.h"

/* The exit status of a run that is done but whose inputs failed (each listed in its shard's
 * errors, this run's or an earlier one's): apart from 1 (i/o), so that a script tells a dataset's
 * bad files from a run that could not read its list or write its shards. */
enum { PX_BATCH_EXIT_INPUTS_FAILED = 9 };

/* What a worker's time went to (--stats), in seconds; decode summed over the decodes of its
 * shards' inputs (by the process's decode pool). */
typedef struct {
    double wall;        /* the worker's thread, start to end */
    double open;        /* opening its executor (and loading the program) */
    double decode;      /* reading and decoding inputs (and, fixed-size, resizing them) */
    double input_wait;  /* the worker waiting for decoded inputs */
    double executor;    /* bind, run and read (fixed, native), or the ragged calls (dynamic) */
    double write;       /* a shard's .npy, marker (SHA-256) and files written */
    double write_wait;  /* the worker waiting for its writer to take a shard */
    uint64_t decoded;   /* inputs decoded (or failed) */
    uint64_t calls;     /* executor runs (fixed: one a shard; native: one a size) or ragged calls */
    uint64_t moved;     /* dynamic: rows that ran before an earlier row of their shard, whose tokens
                         * were then moved into row order */
} px_batch_times;
void px_batch_times_add(px_batch_times *into, const px_batch_times *t);

/* The job: its options, inputs and the marker text every shard records. */
typedef struct {
    pxb_names in;                 /* the dataset, in order */
    size_t in_skipped;            /* --in-dir: entries not read (hidden, subfolders, other names) */
    const char *prog_path, *out_dir, *exec_name;
    int shard_size, devices, threads, decoders, overwrite;
    int retry_failed; /* --retry-failed: a finished shard with failed inputs is made again */
    int workers;                  /* --workers: per process (0: two per device without MPI, else one) */
    int uniform_plan;             /* the program is a "uniform" plan, which --policy dynamic takes */
    const char *stats_path;       /* --stats FILE: where the time went, JSON (rank 0 writes it) */
    int nshards;
    pxvm_limits lim;
    px_policy policy;             /* --policy: how an image of another size meets the input slot */
    int policy_given;             /* --policy was given */
    int native;                   /* --policy native (the default for an any-size program): each image
                                   * bound at its own size, within the input's bounds; the program
                                   * resolved per size (policy then stays exact) */
    px_size_opt size;             /* --size WxH: an any-size program resolved at it, every image
                                   * resized to it by policy (stretch by default) */
    char ragged_policy[96];       /* dynamic: the policy's canonical text, for the ragged batches */
    char *job_text;               /* the "job" object of every marker (json_dumps) */
    uint8_t *done;                /* [nshards]: finished by an earlier run (this process's share) */
} px_batch_job;

struct px_batch_pool;

/* One shard: its inputs decoded in the background by the process's decode pool (pxbatch_decode.c),
 * in the order they run; the dynamic policy runs them as they come (ragged batches while the rest
 * decode), fixed and native once all are. Made by the pool, taken by its worker, run, then (no
 * longer the pool's) written and freed by the worker's writer. */
typedef struct px_batch_shard {
    const px_batch_job *job;
    const pxvm_program *prog;
    int shard, first, count, input;
    int w, h;           /* the input slot's size */
    pxvm_image *img;    /* [count] decoded (px NULL: failed); dynamic: as decoded, freed once run */
    uint8_t *good;      /* [count] 1: a row of the shard (decoded, sized, run) */
    int (*orig)[2];     /* [count] dynamic: the size as decoded (w, h) */
    int (*rsz)[2];      /* [count] dynamic: the size the policy resizes it to */
    char **why;         /* [count] the error of a failed input; of a decoded one, what --lenient went past */
    /* under the pool's mu while the shard is the pool's (until px_batch_pool_release) */
    struct px_batch_pool *pool;
    int owner;          /* the worker (of this process) that runs it */
    int taken;          /* its worker took it (fixed, native: its inputs decode past the memory bound) */
    int claimed;        /* the next input a decoder takes */
    int inflight;       /* its inputs being decoded now */
    int decoded;        /* its inputs decoded or failed */
    uint8_t *ready;     /* [count] decoded or failed */
    uint64_t held;      /* bytes of its decoded inputs not yet run (the pool's held counts them) */
    struct px_batch_shard *queued; /* the next shard with inputs to take, in the order they run */
    struct px_batch_shard *mine;   /* its worker's next shard made, not yet taken */
    px_batch_times times; /* its decodes' */
} px_batch_shard;

/* native: the any-size program resolved at one size; in a worker's LRU cache */
#define PX_BATCH_SIZES 64
typedef struct {
    int w, h, have;
    uint64_t used;
    pxvm_program prog;
} px_batch_sized;

/* A worker's executor and what it has written. */
typedef struct {
    const pxvm_executor_ops *ops;
    pxvm_executor *ex;
    int batch;
    px_batch_sized sized[PX_BATCH_SIZES]; /* native: programs per size (least recently used goes) */
    uint64_t clock;
    const pxvm_program *loaded_sized; /* native: the cached program the executor holds, if any */
    uint64_t images, failed, bytes_in, bytes_out, written; /* of the shards written */
    px_batch_times times;
    /* the token buffer its writer is done with, which the next dynamic shard fills: memory already
     * touched, where a fresh one costs a page fault per 4 KiB in the executor's copy back on every
     * shard (under spare_mu, shared with the writer; spare_mu made when spare_ok) */
    pthread_mutex_t spare_mu;
    int spare_ok;
    uint8_t *spare;
    size_t spare_cap; /* its bytes, PXB_NPY_HEAD_MAX included */
} px_batch_worker_state;

/* A worker: a thread with its own executor, taking its share of the shards (pxbatch_workers.c). */
typedef struct {
    const px_batch_job *job;
    const pxvm_program *prog;
    int input, out_slot;
    int slot_id, nslots_total; /* this worker takes shards slot_id, slot_id + nslots_total, ... */
    int device, is_rank0_first;
    const char *exec;
    struct px_batch_pool *pool; /* the process's decoders */
    int index;                  /* of the process's workers */
    px_batch_worker_state st;
    pxvm_error err;
    int rc;
} px_batch_worker;

/* The decode pool's figures (--stats): the decoders' seconds (decoder-seconds: summed over its
 * threads) and the seconds while at least one worker waited for a decoded input, by what the
 * decoders were doing then (which says the bound). */
typedef struct {
    int decoders;         /* its threads */
    double wall;          /* started to stopped */
    double decode;        /* decoding (the sum of its decodes' seconds, as the workers' decode) */
    double memory_wait;   /* held back: an input to take, but the decoded inputs waiting to be run
                           * held --max-memory / 2 */
    double idle;          /* nothing to take (every input of the shards to come taken or none left) */
    double wait_all_busy; /* a worker waited and every decoder was decoding: decode-limited */
    double wait_memory;   /* a worker waited and a decoder was held back by the memory bound */
    double wait_decoding; /* a worker waited and a decoder had nothing to take: what it waited for
                           * was decoding (the tail: a large image decoding alone) */
    uint64_t decoded;
} px_batch_pool_stats;

/* One decode pool per process (pxbatch_decode.c): --decoders x workers threads, shared by the
 * process's workers, taking the inputs in the order they will be run: the shards made in rounds
 * (each worker's next one, in worker order: as the workers run them side by side), the oldest
 * shard's inputs first. Ahead of the shards the workers run, decoded inputs wait within
 * --max-memory / 2 (dynamic: every decoded input counts; fixed and native, whose shards run once
 * whole, a shard its worker took decodes past the bound). */
typedef struct px_batch_pool {
    const px_batch_job *job;
    const pxvm_program *prog;
    int input;
    px_batch_worker *ws;
    int nworkers;
    pthread_mutex_t mu;
    pthread_cond_t work; /* decoders: a shard made or taken, bytes freed, or stop */
    pthread_cond_t done; /* workers: an input decoded */
    pthread_t *thread;
    int made, started, stop;              /* made: mu, work, done and the arrays */
    uint64_t held, bound;                 /* decoded bytes not yet run; the bound of those ahead */
    px_batch_shard *head, *tail;          /* shards with inputs to take, oldest first */
    px_batch_shard **mine, **mine_last;   /* [nworkers] each worker's shards made, not taken, in order */
    int *upcoming;                        /* [nworkers] each worker's next shard to make */
    int turn;                             /* the worker whose shard is made next */
    int busy, held_back, idle, waiting;   /* decoders decoding, held back, idle; workers waiting */
    double last;                          /* when the figures were last brought up to date */
    px_batch_pool_stats stats;
    int delay_input, delay_ms;            /* tests only (PXVM_TEST_DECODE_DELAY=INPUT:MS): that input
                                           * decodes MS ms late (-1: none) */
} px_batch_pool;
/* Starts the pool's threads (ws: the process's workers, their slots set). The threads started (0:
 * none could, nothing to undo but px_batch_pool_end). */
int px_batch_pool_start(px_batch_pool *p, const px_batch_job *j, const pxvm_program *prog, int input,
                        px_batch_worker *ws, int nworkers, int threads);
/* Stops and joins the threads (after every worker left), frees what is left. */
void px_batch_pool_end(px_batch_pool *p);
/* Worker w's next shard (*s NULL: none left); 0, or -1 out of memory (err set). */
int px_batch_pool_take(px_batch_pool *p, int w, px_batch_shard **s, pxvm_error *err);
/* Worker w is done: its shards not taken stop decoding and are freed (their decodes' times into
 * *times); none more are made for it. */
void px_batch_pool_leave(px_batch_pool *p, int w, px_batch_times *times);
/* A shard's run: under the pool's lock (lock, unlock); wait for an input decoded (the worker's
 * input wait counted in *times); bytes of its inputs run and freed; all its inputs decoded; and
 * the shard no longer the pool's after its run (stop: its inputs not yet taken are not decoded;
 * waits for those decoding). */
void px_batch_pool_lock(px_batch_shard *s);
void px_batch_pool_unlock(px_batch_shard *s);
void px_batch_pool_wait(px_batch_shard *s, px_batch_times *times);
void px_batch_pool_freed(px_batch_shard *s, uint64_t bytes);
void px_batch_pool_wait_all(px_batch_shard *s, px_batch_times *times);
/* Under the lock: whether the decoders may still take inputs of s (some not yet taken, and the
 * decoded inputs waiting within the memory bound): waiting for them can grow a batch. */
int px_batch_pool_filling(const px_batch_shard *s);
void px_batch_pool_release(px_batch_shard *s);
/* The next shard of worker w from `s` on that an earlier run did not finish. */
int px_batch_next(const px_batch_worker *w, int s);

/* A shard that ran, to be written (px_batch_shard_run, then px_batch_shard_write, on the worker's
 * writer thread): what the .npy holds, and what was read. */
typedef struct {
    uint8_t *data;   /* PXB_NPY_HEAD_MAX bytes kept for the .npy's header, then the rows or tokens (or NULL) */
    size_t cap;      /* bytes allocated at data (0: not known; the writer frees it, else it may be kept) */
    int64_t *off;    /* dynamic: (rows + 1) token offsets */
    int rows;
    uint64_t bytes_in;
} px_batch_result;

/* A shard's figures once written. */
typedef struct {
    uint64_t images, failed, bytes_in, bytes_out;
} px_batch_written;

/* pxbatch_job.c: the dataset, in a fixed order (0, 1 i/o or 3 malformed list, with msg); --out
 * checked, created and locked, then cleaned (0, or an exit status with msg); this process's share
 * of the markers already in --out compared with this job; the job object every marker records. */
int px_batch_inputs(px_batch_job *j, const char *list, const char *dir, char *msg, size_t len);
int px_batch_out_prepare(const char *dir, int *lock_fd, int *created, char *msg, size_t len);
/* A run that fails before writing any shard leaves nothing of its own: the lock file and the --out
 * folder, each if this run created it (*created of px_batch_out_prepare: 1 the folder, 2 the lock;
 * the folder only when empty). */
void px_batch_out_unmake(const char *dir, int created);
int px_batch_out_clean(const px_batch_job *j, char *msg, size_t len);
int px_batch_scan(px_batch_job *j, json_t *job, int rank, int size, uint64_t *failed, uint64_t *skipped, char *msg,
                  size_t len);
json_t *px_batch_job_json(const px_batch_job *j, const pxvm_program *prog, int input, int out_slot);

/* pxbatch_decode.c (free, path) and pxbatch_shard.c (run): a shard freed (once no longer the
 * pool's), run and written (0, or the pxvm class of a failure); DIR/shard-NNNNN.ext, malloc'ed. */
/* px_batch_shard_free adds its decodes' times to *times (NULL: dropped) */
void px_batch_shard_free(px_batch_shard *s, px_batch_times *times);
int px_batch_shard_run(px_batch_worker_state *w, px_batch_shard *s, int input, int out_slot, px_batch_result *r,
                       pxvm_error *err);
/* px_batch_shard_write leaves r->data to its caller (freed, or kept by px_batch_spare_give) */
int px_batch_shard_write(px_batch_shard *s, int out_slot, px_batch_result *r, px_batch_written *done, pxvm_error *err);
/* pxbatch_shard.c: the worker's spare token buffer taken (NULL: none; *cap its bytes) or given
 * back (the larger kept, the other freed; without spare_mu every buffer is freed) */
uint8_t *px_batch_spare_take(px_batch_worker_state *w, size_t *cap);
void px_batch_spare_give(px_batch_worker_state *w, uint8_t *buf, size_t cap);
char *px_batch_shard_path(const px_batch_job *j, int shard, const char *ext);
/* An input's failure or warning on stderr: "pxbatch: HEAD: WHY" where WHY names the file (a
 * classified error does, as pxrun's lines), else "pxbatch: HEAD: 'FILE': WHY"; clear: what goes
 * first (a terminal's progress line cleared). */
static inline void px_batch_tell_input(const char *clear, const char *head, const char *file, const char *why)
{
    size_t n = strlen(file);
    const char *at = why;
    while ((at = strchr(at, '\'')) && !(!strncmp(at + 1, file, n) && at[1 + n] == '\''))
        at++;
    if (at)
        fprintf(stderr, "%spxbatch: %s: %s\n", clear, head, why);
    else
        fprintf(stderr, "%spxbatch: %s: '%s': %s\n", clear, head, file, why);
}

/* pxbatch_decode.c, for pxbatch_shard.c: an image's RGBA8 bytes; the monotonic clock in seconds */
uint64_t px__bytes(const pxvm_image *img);
double px_batch_now(void);
void px_batch_sized_free(px_batch_worker_state *w);

/* pxbatch_workers.c: a worker's thread (px_batch_worker *); under a launcher, MPI (px_batch_mpi
 * set): every rank's largest value, rank 0's value, whether every rank has rank 0's job. */
void *px_batch_work(void *arg);
extern int px_batch_mpi;
/* pxbatch_stats.c: the executor the workers opened ("cpu" or "cuda": which one --executor auto
 * took; --executor's word when no worker opened one) */
const char *px_batch_executor_used(const px_batch_job *j, const px_batch_worker *ws, int started);
/* The cores this process may run on (its affinity: a container's or taskset's share, not the
 * host's), at least 1: what sizes --decoders and --max-memory and what --stats reports. */
long px_batch_cores(void);
/* --stats FILE written by rank 0 (every rank calls it: under MPI it gathers); 0, or -1 when rank 0
 * could not write it (said on stderr) */
int px_batch_write_stats(const px_batch_job *j, const px_batch_worker *ws, int started, int nworkers,
                         const px_batch_pool_stats *pool, int rank, int size, int gpus, double setup, double secs,
                         uint64_t images);
int px_batch_launched(void);
int px_batch_agree(int v);
int px_batch_from_root(int v);
int px_batch_same_job(const char *text);

#endif
