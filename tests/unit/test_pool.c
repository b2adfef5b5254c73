/* test_pool.c - the CPU executor's thread pool: every index of every loop runs exactly once,
 * whether the workers are spinning, asleep (a pause longer than the spin between loops) or never
 * spin (more threads than cores); loops follow each other with no lost wake-up. */
#define _POSIX_C_SOURCE 200809L
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "../../executors/cpu/threadpool.h"
#include "test.h"

typedef struct {
    atomic_int *hits;
    atomic_int calls;
} px__pool_probe;

static void px__pool_mark(void *ctx, int b, int e)
{
    px__pool_probe *p = ctx;
    for (int i = b; i < e; i++)
        atomic_fetch_add(&p->hits[i], 1);
    atomic_fetch_add(&p->calls, 1);
}

static void px__pool_loops(int threads, int loops)
{
    px_pool *pool = px_pool_create(threads);
    CHECK(pool != NULL);
    atomic_int hits[300];
    uint32_t s = 5;
    int bad = 0;
    for (int loop = 0; loop < loops && !bad; loop++) {
        s = s * 1664525u + 1013904223u;
        int n = 1 + (int)((s >> 8) % 300), grain = 1 + (int)((s >> 20) % 8);
        for (int i = 0; i < n; i++)
            atomic_store(&hits[i], 0);
        px__pool_probe probe = {hits, 0};
        px_pool_for(pool, n, grain, px__pool_mark, &probe);
        for (int i = 0; i < n; i++)
            bad |= atomic_load(&hits[i]) != 1;
        if (loop % 97 == 0) { /* longer than the workers spin: they sleep, the next loop wakes them */
            struct timespec t = {0, 400000};
            nanosleep(&t, NULL);
        }
    }
    CHECK(!bad);
    px_pool_destroy(pool);
}

TEST(pool_every_index_once_spinning_and_sleeping)
{
    px__pool_loops(2, 3000);
}

TEST(pool_every_index_once_with_more_threads_than_cores)
{
    px__pool_loops(64, 500); /* more than the machine's cores: no spinning */
}
