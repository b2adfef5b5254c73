/* threadpool.c - a loop hands out chunks through one atomic counter, so uneven chunks balance
 * themselves. Between loops the workers, and the caller waiting for the last chunk, spin for a
 * short while before they sleep on a condition variable: a video frame is a few loops of tens of
 * microseconds each, and a sleeping thread takes about as long again to be woken (a futex wake,
 * an idle core, in a VM an interrupt to another virtual CPU) while the other waits. The spin is
 * bounded in time, and off when the pool has more threads than the machine has cores. */
#define _POSIX_C_SOURCE 200809L
#include "threadpool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* How long a thread spins before it sleeps: longer than the gap between a frame's loops (the
 * serial work between them), short enough to cost little when no loop follows; after the first
 * part it yields the core at each look at the clock, so that other processes' threads (or other
 * pools') on an oversubscribed machine still run. */
#define PX_POOL_SPIN_NS 200000L
#define PX_POOL_SPIN_ALONE_NS 50000L

struct px_pool {
    unsigned long forks; /* px__forks when the pool was made: another value, another process */
    int want;     /* participants asked for, caller included */
    int nthreads; /* participants, caller included */
    int spin;     /* whether waiting threads spin first */
    pthread_t *workers;
    pthread_mutex_t mu;
    pthread_cond_t wake, done;
    atomic_ulong generation; /* bumped for every loop */
    atomic_int busy;         /* workers still inside the current loop */
    atomic_int sleepers;     /* workers asleep (or about to be) on `wake` */
    atomic_int caller_waits; /* the caller asleep (or about to be) on `done` */
    atomic_int quit;
    /* the current loop, published before `generation` */
    px_pool_fn fn;
    void *ctx;
    int n, grain;
    atomic_int next;
};

/* Forks this process is from: its parent's count plus one in every child (the atfork handler runs
 * in the child only), so a pool inherited through fork never has the count of the process it is
 * in. */
static atomic_ulong px__forks;
static pthread_once_t px__atfork_once = PTHREAD_ONCE_INIT;

static void px__forked_child(void) { atomic_fetch_add(&px__forks, 1); }
static void px__register_atfork(void) { pthread_atfork(NULL, NULL, px__forked_child); }

static inline void px__relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static long px__ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000L + t.tv_nsec;
}

/* Spins until done(p, arg) or the spin time is over; returns whether done. */
static int px__spin_until(px_pool *p, int (*done)(px_pool *, unsigned long), unsigned long arg)
{
    if (!p->spin)
        return done(p, arg);
    long t0 = 0;
    for (unsigned i = 0;; i++) {
        if (done(p, arg))
            return 1;
        px__relax();
        if ((i & 255) == 255) { /* the clock now and then, not per iteration */
            long t = px__ns();
            if (!t0)
                t0 = t;
            else if (t - t0 > PX_POOL_SPIN_NS)
                return done(p, arg);
            else if (t - t0 > PX_POOL_SPIN_ALONE_NS)
                sched_yield();
        }
    }
}

static int px__new_loop(px_pool *p, unsigned long seen)
{
    return atomic_load(&p->generation) != seen || atomic_load(&p->quit);
}

static int px__loop_done(px_pool *p, unsigned long unused)
{
    (void)unused;
    return atomic_load(&p->busy) == 0;
}

static void px__pool_work(px_pool *p)
{
    for (;;) {
        int b = atomic_fetch_add(&p->next, p->grain);
        if (b >= p->n)
            return;
        int e = b + p->grain < p->n ? b + p->grain : p->n;
        p->fn(p->ctx, b, e);
    }
}

/* The sleeping sides announce themselves (sleepers, caller_waits) before they test the condition
 * under the mutex, and the waking sides change the condition before they read the announcement
 * (all sequentially consistent): either the sleeper sees the change or the waker sees the
 * sleeper and signals under the mutex, so no wake-up is lost. */
static void *px__pool_main(void *arg)
{
    px_pool *p = arg;
    unsigned long seen = 0;
    for (;;) {
        if (!px__spin_until(p, px__new_loop, seen)) {
            pthread_mutex_lock(&p->mu);
            atomic_fetch_add(&p->sleepers, 1);
            while (!px__new_loop(p, seen))
                pthread_cond_wait(&p->wake, &p->mu);
            atomic_fetch_sub(&p->sleepers, 1);
            pthread_mutex_unlock(&p->mu);
        }
        if (atomic_load(&p->quit))
            break;
        seen = atomic_load(&p->generation);
        px__pool_work(p);
        if (atomic_fetch_sub(&p->busy, 1) == 1 && atomic_load(&p->caller_waits)) {
            pthread_mutex_lock(&p->mu);
            pthread_cond_signal(&p->done);
            pthread_mutex_unlock(&p->mu);
        }
    }
    return NULL;
}

/* Makes p's synchronisation objects and starts its workers, in the calling process. */
static void px__pool_start(px_pool *p)
{
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    p->forks = atomic_load(&px__forks);
    p->nthreads = 1;
    p->spin = cores > 0 && p->want <= cores; /* never spin on a core another participant needs */
    atomic_store(&p->generation, 0);
    atomic_store(&p->busy, 0);
    atomic_store(&p->sleepers, 0);
    atomic_store(&p->caller_waits, 0);
    atomic_store(&p->quit, 0);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->wake, NULL);
    pthread_cond_init(&p->done, NULL);
    p->workers = calloc((size_t)p->want, sizeof(pthread_t));
    if (!p->workers)
        return; /* runs everything on the caller */
    for (int i = 0; i < p->want - 1; i++) {
        if (pthread_create(&p->workers[i], NULL, px__pool_main, p) != 0)
            break;
        p->nthreads++;
    }
}

/* A pool inherited through fork, made again in this process: the parent's workers are not here
 * and its mutex and condition variables may be held or waited on by them, so they are never used
 * or destroyed, only overwritten. */
static void px__pool_adopt(px_pool *p)
{
    free(p->workers);
    memset(&p->mu, 0, sizeof p->mu);
    memset(&p->wake, 0, sizeof p->wake);
    memset(&p->done, 0, sizeof p->done);
    px__pool_start(p);
}

px_pool *px_pool_create(int threads)
{
    pthread_once(&px__atfork_once, px__register_atfork);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (threads <= 0)
        threads = cores > 0 ? (int)cores : 1;
    if (threads > 256)
        threads = 256;
    px_pool *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->want = threads;
    px__pool_start(p);
    return p;
}

int px_pool_threads(const px_pool *pool) { return pool ? pool->nthreads : 1; }

void px_pool_for(px_pool *p, int n, int grain, px_pool_fn fn, void *ctx)
{
    if (n <= 0)
        return;
    if (grain < 1)
        grain = 1;
    if (p && p->forks != atomic_load_explicit(&px__forks, memory_order_relaxed))
        px__pool_adopt(p); /* inherited through fork: its workers are the parent's */
    if (!p || p->nthreads == 1 || n <= grain) {
        fn(ctx, 0, n);
        return;
    }
    p->fn = fn;
    p->ctx = ctx;
    p->n = n;
    p->grain = grain;
    atomic_store(&p->next, 0);
    atomic_store(&p->busy, p->nthreads - 1);
    atomic_fetch_add(&p->generation, 1);
    if (atomic_load(&p->sleepers)) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->wake);
        pthread_mutex_unlock(&p->mu);
    }
    px__pool_work(p);
    if (!px__spin_until(p, px__loop_done, 0)) {
        pthread_mutex_lock(&p->mu);
        atomic_store(&p->caller_waits, 1);
        while (atomic_load(&p->busy) > 0)
            pthread_cond_wait(&p->done, &p->mu);
        atomic_store(&p->caller_waits, 0);
        pthread_mutex_unlock(&p->mu);
    }
}

void px_pool_destroy(px_pool *p)
{
    if (!p)
        return;
    if (p->forks != atomic_load(&px__forks)) { /* inherited through fork, never made again here */
        free(p->workers);
        free(p);
        return;
    }
    atomic_store(&p->quit, 1);
    pthread_mutex_lock(&p->mu);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->nthreads - 1; i++)
        pthread_join(p->workers[i], NULL);
    free(p->workers);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->wake);
    pthread_cond_destroy(&p->done);
    free(p);
}
