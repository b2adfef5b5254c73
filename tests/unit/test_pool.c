/* test_pool.c - the CPU executor's thread pool: every index of every loop runs exactly once,
 * whether the workers are spinning, asleep (a pause longer than the spin between loops) or never
 * spin (more threads than cores); loops follow each other with no lost wake-up. A pool inherited
 * through fork is closed, or made again and run, in the child, without waiting on the parent's
 * threads. */
#define _POSIX_C_SOURCE 200809L
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

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

/* The child's status, or -1 when it has not ended within 20 s (then it is killed): a hang fails
 * the test instead of hanging the suite. */
static int px__wait_child(pid_t pid)
{
    for (int i = 0; i < 2000; i++) {
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid)
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
        struct timespec t = {0, 10000000};
        nanosleep(&t, NULL);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return -1;
}

/* A pool whose workers sleep on its condition variable (the case that hung: glibc's
 * pthread_cond_destroy waits for the parent's sleepers), then fork; the child closes it (run = 0)
 * or first runs loops on it (run = 1: every index once, on threads of its own). */
static void px__pool_fork(int run)
{
    px_pool *pool = px_pool_create(4);
    CHECK(pool != NULL);
    atomic_int hits[300];
    for (int i = 0; i < 300; i++)
        atomic_store(&hits[i], 0);
    px__pool_probe probe = {hits, 0};
    px_pool_for(pool, 300, 1, px__pool_mark, &probe);
    struct timespec t = {0, 50000000}; /* far longer than the spin: the workers are asleep */
    nanosleep(&t, NULL);
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        int bad = 0;
        for (int loop = 0; run && loop < 200; loop++) {
            for (int i = 0; i < 300; i++)
                atomic_store(&hits[i], 0);
            px__pool_probe cp = {hits, 0};
            px_pool_for(pool, 300, 1 + loop % 7, px__pool_mark, &cp);
            for (int i = 0; i < 300; i++)
                bad |= atomic_load(&hits[i]) != 1;
        }
        bad |= run && px_pool_threads(pool) != 4; /* made again with the parent's threads */
        px_pool_destroy(pool);
        _exit(bad ? 3 : 0);
    }
    CHECK_EQ(px__wait_child(pid), 0);
    for (int i = 0; i < 300; i++) /* the parent's pool still works */
        atomic_store(&hits[i], 0);
    px_pool_for(pool, 300, 3, px__pool_mark, &probe);
    int bad = 0;
    for (int i = 0; i < 300; i++)
        bad |= atomic_load(&hits[i]) != 1;
    CHECK(!bad);
    px_pool_destroy(pool);
}

TEST(pool_fork_child_closes_inherited_pool)
{
    px__pool_fork(0);
}

TEST(pool_fork_child_runs_on_a_pool_made_again)
{
    px__pool_fork(1);
}
