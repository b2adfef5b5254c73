/* bench_cpu - the CPU executor's speed, with its baselines measured in the same run (`make bench`
 * runs this, then tests/bench/bench_opencv.py, then report.py).
 *
 * For 1024x1024, 3840x2160 and 4096x4096 RGBA8: PYRAMID (the full chain) beside a memcpy of level
 * 0, and the foveate273 program (PYRAMID + 273 trilinear 16x16 patches). Medians of repeated
 * runs; prints JSON. Timing is never asserted anywhere.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../../assembler/plan.h"
#include "../../executors/registry.h"
#include "bench_common.h"

static int px__load(pxvm_builder *b, pxvm_program *prog)
{
    pxvm_image pi;
    pxvm_error err;
    pxvm_limits lim;
    pxvm_limits_default(&lim);
    int rc = pxvm_build_finish(b, &pi, &err);
    pxvm_build_free(b);
    if (rc < 0 || pxvm_program_from_image(&pi, &lim, prog, &err) < 0) {
        fprintf(stderr, "bench_cpu: %s\n", err.msg);
        return -1;
    }
    return 0;
}

/* Median time of one run of prog with `in` bound to slot 1. */
static double px__time_program(pxvm_program *prog, const pxvm_image *in, int reps)
{
    pxvm_executor *ex;
    pxvm_error err;
    pxvm_run_options ro = {.max_steps = 1000};
    double *t = malloc(sizeof(double) * (size_t)reps), m = -1;
    if (t && pxvm_cpu_executor.open(&ex, NULL, &err) == 0) {
        if (pxvm_cpu_executor.load(ex, prog, 1, &err) == 0 && pxvm_bind_image(&pxvm_cpu_executor, ex, 1, in, &err) == 0 &&
            pxvm_cpu_executor.run(ex, &ro, &err) == 0) { /* the first run warms up */
            for (int r = 0; r < reps; r++) {
                double s = px__now_ms();
                pxvm_cpu_executor.run(ex, &ro, &err);
                t[r] = px__now_ms() - s;
            }
            m = px__median(t, reps);
        }
        pxvm_cpu_executor.close(ex);
    }
    free(t);
    return m;
}

int main(int argc, char **argv)
{
    const int reps = argc > 1 ? atoi(argv[1]) : 15;
    const int sizes[][2] = {{1024, 1024}, {3840, 2160}, {4096, 4096}};
    if (reps < 1)
        return 2;
    printf("{\n  \"cores\": %ld, \"reps\": %d,\n  \"sizes\": [", sysconf(_SC_NPROCESSORS_ONLN), reps);
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
        int W = sizes[si][0], H = sizes[si][1];
        size_t bytes = (size_t)W * (size_t)H * 4u;
        uint8_t *a = malloc(bytes), *c = malloc(bytes);
        double *t = malloc(sizeof(double) * (size_t)reps);
        if (!a || !c || !t)
            return 1;
        for (size_t i = 0; i < bytes; i++)
            a[i] = (uint8_t)((i * 2654435761u) >> 13);
        memset(c, 0, bytes);
        for (int r = 0; r < reps; r++) {
            double s = px__now_ms();
            memcpy(c, a, bytes);
            t[r] = px__now_ms() - s;
        }
        double t_copy = px__median(t, reps);
        pxvm_image in = {W, H, a};
        pxvm_builder b;
        pxvm_program pyr, fov;
        pxvm_build_init(&b, 16);
        int32_t f[PXI_MAX_FIELDS] = {0};
        f[PX_FI(PYRAMID, slot)] = pxvm_build_slot(&b, PXI_ROLE_INPUT, "image", W, H);
        pxvm_build_insn(&b, PX_OP_PYRAMID, f);
        pxvm_build_insn(&b, PX_OP_HALT, NULL);
        if (px__load(&b, &pyr) < 0)
            return 1;
        pxvm_build_init(&b, 64);
        pxvm_plan_foveate273(&b, W, H);
        if (px__load(&b, &fov) < 0)
            return 1;
        double t_pyr = px__time_program(&pyr, &in, reps), t_fov = px__time_program(&fov, &in, reps);
        /* PNG output of a W x H image (pxrun --out): the default fast setting and --png best, on a
         * photo-like picture (smooth gradients with a little noise) */
        for (size_t i = 0; i < bytes; i++) {
            size_t x = (i / 4) % (size_t)W, y = (i / 4) / (size_t)W;
            c[i] = (uint8_t)((x / 8 + y / 5 + (i % 4) * 60 + ((i * 2654435761u) >> 29)) & 255);
        }
        pxvm_image pic = {W, H, c};
        double t_png[2];
        size_t png_len[2];
        for (int m = 0; m < 2; m++) {
            int n = reps < 3 ? reps : 3;
            for (int r = 0; r < n; r++) {
                uint8_t *png;
                double s0 = px__now_ms();
                if (pxvm_png_encode_ex(&pic, m ? PXVM_PNG_BEST : PXVM_PNG_FAST, &png, &png_len[m], NULL) < 0)
                    return 1;
                t[r] = px__now_ms() - s0;
                free(png);
            }
            t_png[m] = px__median(t, n);
        }
        printf("%s\n    {\"w\": %d, \"h\": %d, \"levels\": %d, \"memcpy_ms\": %.4f, \"pyramid_ms\": %.4f, "
               "\"foveate273_ms\": %.4f, \"png_fast_ms\": %.3f, \"png_fast_bytes\": %zu, \"png_best_ms\": %.3f, "
               "\"png_best_bytes\": %zu}",
               si ? "," : "", W, H, pyr.slots[1].levels, t_copy, t_pyr, t_fov, t_png[0], png_len[0], t_png[1], png_len[1]);
        fflush(stdout);
        pxvm_program_free(&pyr);
        pxvm_program_free(&fov);
        free(a);
        free(c);
        free(t);
    }
    printf("\n  ]\n}\n");
    return 0;
}
