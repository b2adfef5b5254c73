/* threadpool.h - a persistent pool of worker threads running parallel loops (CPU executor). */
#ifndef PX_THREADPOOL_H
#define PX_THREADPOOL_H

typedef struct px_pool px_pool;
typedef void (*px_pool_fn)(void *ctx, int begin, int end);

/* threads = total participants including the caller; 0 = the number of online cores.
 *
 * Fork: a forked child inherits the pool's memory but none of its threads, and its mutex and
 * condition variables in whatever state the parent's threads left them (glibc's
 * pthread_cond_destroy waits for the parent's sleeping workers, which never come: a hang). So the
 * pool records the process it was made in (a fork count bumped by a pthread_atfork child handler,
 * not getpid(): a load, not a system call, per loop). In another process px_pool_for first makes
 * the pool again there (new synchronisation objects, new workers: a DataLoader worker runs on as
 * many threads as its parent did; on failure to start threads it runs on the caller alone), and
 * px_pool_destroy of a pool not yet made again frees its memory only, never touching the parent's
 * threads or synchronisation objects. Only the thread that forked exists in the child, so the
 * child must not use a pool another parent thread was inside at the fork before it is made again
 * (px_pool_for does that first). */
px_pool *px_pool_create(int threads);
int px_pool_threads(const px_pool *pool);
/* Calls fn over [0, n) in chunks of `grain`, spread over the pool; returns when all are done. */
void px_pool_for(px_pool *pool, int n, int grain, px_pool_fn fn, void *ctx);
void px_pool_destroy(px_pool *pool);

#endif
