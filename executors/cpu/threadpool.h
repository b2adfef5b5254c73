/* threadpool.h - a persistent pool of worker threads running parallel loops (CPU executor). */
#ifndef PX_THREADPOOL_H
#define PX_THREADPOOL_H

typedef struct px_pool px_pool;
typedef void (*px_pool_fn)(void *ctx, int begin, int end);

/* threads = total participants including the caller; 0 = the number of online cores. */
px_pool *px_pool_create(int threads);
int px_pool_threads(const px_pool *pool);
/* Calls fn over [0, n) in chunks of `grain`, spread over the pool; returns when all are done. */
void px_pool_for(px_pool *pool, int n, int grain, px_pool_fn fn, void *ctx);
void px_pool_destroy(px_pool *pool);

#endif
