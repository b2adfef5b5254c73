/* bench_common.h - what the C benchmarks share: a monotonic clock in ms, the median of repeats,
 * and a check that stops a benchmark on the public API with the library's message. */
#ifndef PX_BENCH_COMMON_H
#define PX_BENCH_COMMON_H

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "../../include/pxvm.h"

static inline double px__now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* A cheaper clock for sub-microsecond intervals: the TSC on x86-64 (clock_gettime costs 50-100 ns
 * in some VMs, as much as what is measured), in ms by one calibration against CLOCK_MONOTONIC;
 * CLOCK_MONOTONIC elsewhere. */
#if defined(__x86_64__)
#include <x86intrin.h>
static inline double px__ticks(void) { return (double)__rdtsc(); }
static inline double px__ticks_per_ms(void)
{
    static double per_ms;
    if (per_ms == 0) {
        double t0 = px__now_ms(), c0 = px__ticks(), t1;
        while ((t1 = px__now_ms()) - t0 < 20)
            ;
        per_ms = (px__ticks() - c0) / (t1 - t0);
    }
    return per_ms;
}
#else
static inline double px__ticks(void) { return px__now_ms(); }
static inline double px__ticks_per_ms(void) { return 1; }
#endif

static inline int px__cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The median of v[0..n) (sorts v in place; the mean of the middle two for even n). */
static inline double px__median(double *v, int n)
{
    if (n <= 0)
        return 0;
    qsort(v, (size_t)n, sizeof *v, px__cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static inline void px__ck(int rc, const char *what)
{
    if (rc) {
        fprintf(stderr, "%s: %s\n", what, pxvm_errmsg());
        exit(1);
    }
}

#endif
