/* mkprog - writes the example programs in programs/ until pxasm replaces it.
 *
 *   mkprog DIR                      dot_test.pxi, pyramid.pxi and foveate273.pxi for the bundled
 *                                   photo (DIR/data/chelsea.png gives the input size)
 *   mkprog foveate273 W H OUT.pxi   foveate273 for a W x H input
 *   mkprog pyramid W H OUT.pxi
 *
 * All floating-point and transcendental math (log2 of the magnification, 2^LOD steps) happens
 * here, compiled with -ffp-contract=off; the program only holds the fixed-point results.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plans.h"

static int px__write(const char *path, pxvm_builder *b)
{
    pxvm_error err = {0};
    pxvm_image img;
    uint8_t *bytes = NULL;
    size_t len = 0;
    pxvm_outputs out = {0};
    int rc = pxvm_build_finish(b, &img, &err);
    if (rc == 0) {
        rc = pxvm_png_encode(&img, &bytes, &len, &err);
        pxvm_image_free(&img);
    }
    if (rc == 0)
        rc = pxvm_outputs_add(&out, path, bytes, len, &err);
    if (rc == 0)
        rc = pxvm_outputs_commit(&out, &err);
    else
        pxvm_outputs_abort(&out);
    free(bytes);
    pxvm_build_free(b);
    if (rc < 0) {
        fprintf(stderr, "mkprog: %s: %s\n", path, err.msg);
        return 1;
    }
    return 0;
}

/* The original pixel protocol's test: vectors (10, 20) and (10, 10) give 300 = 0x012C, so pixel
 * (0, row_out) becomes R = 44, G = 1. */
static int px__dot_test(const char *path)
{
    pxvm_builder b;
    pxvm_build_init(&b, 16);
    uint32_t dot = pxvm_build_insn(&b, PX_OP_DOT_RGB, NULL);
    pxvm_build_insn(&b, PX_OP_HALT, NULL);
    const uint8_t a[] = {10, 0, 0, 255, 20, 0, 0, 255}, v[] = {10, 0, 0, 255, 10, 0, 0, 255};
    const uint8_t zero[4] = {0, 0, 0, 0};
    int ra = pxvm_build_row(&b, a, 2), rb = pxvm_build_row(&b, v, 2), ro = pxvm_build_row(&b, zero, 1);
    pxvm_build_patch(&b, dot, PX_FI(DOT_RGB, row_a), ra);
    pxvm_build_patch(&b, dot, PX_FI(DOT_RGB, row_b), rb);
    pxvm_build_patch(&b, dot, PX_FI(DOT_RGB, row_out), ro);
    return px__write(path, &b);
}

static int px__pyramid(const char *path, int w, int h)
{
    pxvm_builder b;
    pxvm_build_init(&b, 16);
    int img = pxvm_build_slot(&b, PXI_ROLE_INPUT, "image", w, h);
    int32_t f[PXI_MAX_FIELDS] = {0};
    f[PX_FI(PYRAMID, slot)] = img;
    pxvm_build_insn(&b, PX_OP_PYRAMID, f);
    pxvm_build_insn(&b, PX_OP_HALT, NULL);
    return px__write(path, &b);
}

static int px__foveate273(const char *path, int w, int h)
{
    pxvm_builder b;
    pxvm_build_init(&b, 64);
    pxvm_plan_foveate273(&b, w, h);
    return px__write(path, &b);
}

int main(int argc, char **argv)
{
    if (argc == 2) {
        char photo[4096], path[4096];
        snprintf(photo, sizeof photo, "%s/data/chelsea.png", argv[1]);
        pxvm_limits lim;
        pxvm_limits_default(&lim);
        pxvm_image img;
        pxvm_error err = {0};
        if (pxvm_png_load(photo, &lim, &img, &err) < 0) {
            fprintf(stderr, "mkprog: %s\n", err.msg);
            return 1;
        }
        int w = img.w, h = img.h, rc = 0;
        pxvm_image_free(&img);
        snprintf(path, sizeof path, "%s/dot_test.pxi", argv[1]);
        rc |= px__dot_test(path);
        snprintf(path, sizeof path, "%s/pyramid.pxi", argv[1]);
        rc |= px__pyramid(path, w, h);
        snprintf(path, sizeof path, "%s/foveate273.pxi", argv[1]);
        rc |= px__foveate273(path, w, h);
        return rc;
    }
    if (argc == 5) {
        int w = atoi(argv[2]), h = atoi(argv[3]);
        if (w < 1 || h < 1 || w > 16384 || h > 16384) {
            fprintf(stderr, "mkprog: sizes must be 1..16384\n");
            return 2;
        }
        if (!strcmp(argv[1], "foveate273"))
            return px__foveate273(argv[4], w, h);
        if (!strcmp(argv[1], "pyramid"))
            return px__pyramid(argv[4], w, h);
    }
    fprintf(stderr, "usage: mkprog DIR | mkprog foveate273|pyramid W H OUT.pxi\n");
    return 2;
}
