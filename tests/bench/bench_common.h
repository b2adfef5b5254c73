/* bench_common.h - what the C benchmarks on the public API share: a monotonic clock in ms and a
 * check that stops the benchmark with the library's message. */
#ifndef PX_BENCH_COMMON_H
#define PX_BENCH_COMMON_H

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "../../include/pxvm.h"

static double px__now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static void px__ck(int rc, const char *what)
{
    if (rc) {
        fprintf(stderr, "%s: %s\n", what, pxvm_errmsg());
        exit(1);
    }
}

#endif
