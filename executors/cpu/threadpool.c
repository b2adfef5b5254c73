/* threadpool.c - workers sleep on a condition variable between loops; a loop hands out chunks
 * through one atomic counter, so uneven chunks balance themselves. */
#define _POSIX_C_SOURCE 200809L
#include "threadpool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

struct px_pool {
    int nthreads; /* participants, caller included */
    pthread_t *workers;
    pthread_mutex_t mu;
    pthread_cond_t wake, done;
    unsigned long generation; /* bumped for every loop */
    int busy;                 /* workers still inside the current loop */
    int quit;
    /* the current loop */
    px_pool_fn fn;
    void *ctx;
    int n, grain;
    atomic_int next;
};

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

static void *px__pool_main(void *arg)
{
    px_pool *p = arg;
    unsigned long seen = 0;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->quit && p->generation == seen)
            pthread_cond_wait(&p->wake, &p->mu);
        if (p->quit)
            break;
        seen = p->generation;
        pthread_mutex_unlock(&p->mu);
        px__pool_work(p);
        pthread_mutex_lock(&p->mu);
        if (--p->busy == 0)
            pthread_cond_signal(&p->done);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

px_pool *px_pool_create(int threads)
{
    if (threads <= 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        threads = n > 0 ? (int)n : 1;
    }
    if (threads > 256)
        threads = 256;
    px_pool *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->nthreads = 1;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->wake, NULL);
    pthread_cond_init(&p->done, NULL);
    p->workers = calloc((size_t)threads, sizeof(pthread_t));
    if (!p->workers)
        return p; /* runs everything on the caller */
    for (int i = 0; i < threads - 1; i++) {
        if (pthread_create(&p->workers[i], NULL, px__pool_main, p) != 0)
            break;
        p->nthreads++;
    }
    return p;
}

int px_pool_threads(const px_pool *pool) { return pool ? pool->nthreads : 1; }

void px_pool_for(px_pool *p, int n, int grain, px_pool_fn fn, void *ctx)
{
    if (n <= 0)
        return;
    if (grain < 1)
        grain = 1;
    if (!p || p->nthreads == 1 || n <= grain) {
        fn(ctx, 0, n);
        return;
    }
    pthread_mutex_lock(&p->mu);
    p->fn = fn;
    p->ctx = ctx;
    p->n = n;
    p->grain = grain;
    atomic_store(&p->next, 0);
    p->busy = p->nthreads - 1;
    p->generation++;
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    px__pool_work(p);
    pthread_mutex_lock(&p->mu);
    while (p->busy > 0)
        pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}

void px_pool_destroy(px_pool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->quit = 1;
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
