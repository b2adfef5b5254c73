/* bench_cpu - CPU executor speed against baselines measured in the same run (never a test).
 *
 * 1. PYRAMID of a 4096x4096 RGBA8 slot (all 13 levels) beside a memcpy of level 0 (64 MiB):
 *    the ratio says how many level-0 copies one pyramid costs.
 * 2. foveate273 (PYRAMID + 273 SAMPLE 16x16 patches) on a 4096x4096 input.
 * Prints medians of repeated runs; `make bench`.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../../vm/pxi_build.h"

static double px__ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static int px__cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double px__median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, px__cmp);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* A program: input 'image' W x H; PYRAMID; optionally the 273-patch grid; HALT. */
static int px__program(int w, int h, int patches, pxvm_program *prog)
{
    pxvm_builder b;
    pxvm_build_init(&b, 64);
    int img = pxvm_build_slot(&b, PXI_ROLE_INPUT, "image", w, h);
    int atlas = patches ? pxvm_build_slot(&b, PXI_ROLE_OUTPUT, "atlas", 17 * 16, 17 * 16) : 0;
    int32_t f[PXI_MAX_FIELDS] = {0};
    f[PX_FI(PYRAMID, slot)] = img;
    pxvm_build_insn(&b, PX_OP_PYRAMID, f);
    for (int p = 0; p < patches; p++) {
        memset(f, 0, sizeof f);
        f[PX_FI(SAMPLE, src)] = img, f[PX_FI(SAMPLE, dst)] = atlas;
        f[PX_FI(SAMPLE, dst_x)] = (p % 17) * 16, f[PX_FI(SAMPLE, dst_y)] = (p / 17) * 16;
        f[PX_FI(SAMPLE, w)] = f[PX_FI(SAMPLE, h)] = 16;
        f[PX_FI(SAMPLE, cu)] = (int32_t)((p % 17 * 2 + 1) * (int64_t)w * 65536 / 34);
        f[PX_FI(SAMPLE, cv)] = (int32_t)((p / 17 * 2 + 1) * (int64_t)h * 65536 / 34);
        f[PX_FI(SAMPLE, du)] = f[PX_FI(SAMPLE, dv)] = 65536 + 9000;
        f[PX_FI(SAMPLE, lod)] = 40 + p % 200; /* fractional: two levels, bilinear each */
        pxvm_build_insn(&b, PX_OP_SAMPLE, f);
    }
    pxvm_build_insn(&b, PX_OP_HALT, NULL);
    pxvm_image pi;
    pxvm_error err;
    pxvm_limits lim;
    pxvm_limits_default(&lim);
    if (pxvm_build_finish(&b, &pi, &err) < 0 || pxvm_program_from_image(&pi, &lim, prog, &err) < 0) {
        fprintf(stderr, "bench: %s\n", err.msg);
        return -1;
    }
    pxvm_build_free(&b);
    return 0;
}

int main(int argc, char **argv)
{
    const int W = 4096, H = 4096, reps = argc > 1 ? atoi(argv[1]) : 15;
    const size_t bytes = (size_t)W * H * 4;
    uint8_t *a = malloc(bytes), *c = malloc(bytes);
    if (!a || !c || reps < 1)
        return 1;
    for (size_t i = 0; i < bytes; i++)
        a[i] = (uint8_t)(i * 2654435761u >> 13);
    memset(c, 0, bytes);
    pxvm_image in = {W, H, a};
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    printf("pxvm CPU benchmark: %dx%d RGBA8, %d runs each, median; %ld cores\n", W, H, reps, cores);

    double *t = malloc(sizeof(double) * (size_t)reps);
    for (int r = 0; r < reps; r++) {
        double s = px__ms();
        memcpy(c, a, bytes);
        t[r] = px__ms() - s;
    }
    double t_copy = px__median(t, reps);
    printf("  memcpy of level 0 (64 MiB)             %8.3f ms  %6.2f GB/s\n", t_copy, 2.0 * (double)bytes / t_copy / 1e6);

    const char *names[] = {"PYRAMID (13 levels)", "PYRAMID + 273 SAMPLE 16x16 (linear)"};
    double results[2] = {0, 0};
    for (int which = 0; which < 2; which++) {
        pxvm_program prog;
        pxvm_executor *ex;
        pxvm_error err;
        pxvm_open_options oo = {0, 0};
        pxvm_run_options ro = {.max_steps = 1000};
        if (px__program(W, H, which ? 273 : 0, &prog) < 0 || pxvm_cpu_executor.open(&ex, &oo, &err) < 0 ||
            pxvm_cpu_executor.load(ex, &prog, &err) < 0 || pxvm_cpu_executor.bind(ex, 1, &in, &err) < 0)
            return 1;
        pxvm_cpu_executor.run(ex, &ro, &err); /* warm up */
        for (int r = 0; r < reps; r++) {
            double s = px__ms();
            if (pxvm_cpu_executor.run(ex, &ro, &err) < 0) {
                fprintf(stderr, "bench: %s\n", err.msg);
                return 1;
            }
            t[r] = px__ms() - s;
        }
        results[which] = px__median(t, reps);
        printf("  %-38s %8.3f ms  = %.2f x memcpy of level 0\n", names[which], results[which],
               results[which] / t_copy);
        pxvm_cpu_executor.close(ex);
        pxvm_program_free(&prog);
    }
    printf("  (a run includes restoring what the plan marks for reset: here nothing, PYRAMID rebuilds every level)\n");
    printf("pyramid/memcpy ratio: %.2f\n", results[0] / t_copy);
    free(t);
    free(a);
    free(c);
    return 0;
}
