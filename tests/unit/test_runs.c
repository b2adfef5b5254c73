/* test_runs.c - every run starts from the initial state: running twice gives the same slots,
 * whatever the first run wrote, and the reset plan skips only what cannot be observed. */
#include <stdlib.h>

#include "test.h"

static uint64_t px__all_hash(pxvm_executor *ex, const pxvm_program *prog)
{
    uint64_t h = 0;
    for (int k = 0; k < prog->nslots; k++)
        for (int l = 0; l < prog->slots[k].levels; l++) {
            pxvm_image img = px_read(prog, ex, k, l);
            h = h * 31 + pxvm_hash64(img.px, (size_t)img.w * (size_t)img.h * 4u);
            pxvm_image_free(&img);
        }
    return h;
}

TEST(runs_repeat_from_the_initial_state)
{
    uint64_t st = 31;
    pxvm_image src = px_random_image(40, 24, &st);
    pxvm_builder b;
    pxvm_build_init(&b, 32);
    int in = pxvm_build_slot(&b, PXI_ROLE_INPUT, "src", 40, 24);
    int out = pxvm_build_slot(&b, PXI_ROLE_OUTPUT, "out", 8, 8);
    int scr = pxvm_build_slot(&b, PXI_ROLE_SCRATCH, "tmp", 16, 16);
    int32_t f[PXI_MAX_FIELDS] = {0};
    /* read the scratch slot's levels before and after it is built, sample into the program
     * image, then DOT over rows the run wrote: everything a stale state would change */
    f[PX_FI(SAMPLE, src)] = scr, f[PX_FI(SAMPLE, dst)] = out, f[PX_FI(SAMPLE, w)] = 4, f[PX_FI(SAMPLE, h)] = 4;
    f[PX_FI(SAMPLE, cu)] = f[PX_FI(SAMPLE, cv)] = 8 << 16, f[PX_FI(SAMPLE, du)] = f[PX_FI(SAMPLE, dv)] = 3 << 16;
    f[PX_FI(SAMPLE, lod)] = 300;
    pxvm_build_insn(&b, PX_OP_SAMPLE, f);
    memset(f, 0, sizeof f);
    f[PX_FI(PYRAMID, slot)] = in;
    pxvm_build_insn(&b, PX_OP_PYRAMID, f);
    memset(f, 0, sizeof f);
    f[PX_FI(SAMPLE, src)] = in, f[PX_FI(SAMPLE, dst)] = scr, f[PX_FI(SAMPLE, w)] = 16, f[PX_FI(SAMPLE, h)] = 16;
    f[PX_FI(SAMPLE, cu)] = 20 << 16, f[PX_FI(SAMPLE, cv)] = 12 << 16, f[PX_FI(SAMPLE, du)] = f[PX_FI(SAMPLE, dv)] = 2 << 16;
    pxvm_build_insn(&b, PX_OP_SAMPLE, f);
    memset(f, 0, sizeof f);
    f[PX_FI(PYRAMID, slot)] = scr;
    pxvm_build_insn(&b, PX_OP_PYRAMID, f);
    memset(f, 0, sizeof f);
    f[PX_FI(SAMPLE, src)] = scr, f[PX_FI(SAMPLE, dst)] = out, f[PX_FI(SAMPLE, dst_x)] = 4, f[PX_FI(SAMPLE, w)] = 4;
    f[PX_FI(SAMPLE, h)] = 4, f[PX_FI(SAMPLE, cu)] = f[PX_FI(SAMPLE, cv)] = 8 << 16;
    f[PX_FI(SAMPLE, du)] = f[PX_FI(SAMPLE, dv)] = 3 << 16, f[PX_FI(SAMPLE, lod)] = 300;
    pxvm_build_insn(&b, PX_OP_SAMPLE, f);
    memset(f, 0, sizeof f);
    f[PX_FI(SAMPLE, src)] = in, f[PX_FI(SAMPLE, w)] = 32, f[PX_FI(SAMPLE, h)] = 1; /* into the program image */
    f[PX_FI(SAMPLE, cu)] = 20 << 16, f[PX_FI(SAMPLE, cv)] = 12 << 16, f[PX_FI(SAMPLE, du)] = 1 << 14;
    uint32_t into_prog = pxvm_build_insn(&b, PX_OP_SAMPLE, f);
    uint32_t dot = pxvm_build_insn(&b, PX_OP_DOT_RGB, NULL);
    pxvm_build_insn(&b, PX_OP_HALT, NULL);
    uint8_t row[32 * 4] = {0}, ones[32 * 4] = {0};
    for (int i = 0; i < 32; i++)
        ones[4 * i] = 1;
    int r0 = pxvm_build_row(&b, row, 32);
    pxvm_build_row(&b, ones, 32); /* DOT: the sum of the sampled row's R up to its first zero */
    int r2 = pxvm_build_row(&b, row, 1);
    pxvm_build_patch(&b, into_prog, PX_FI(SAMPLE, dst_y), r0);
    pxvm_build_patch(&b, dot, PX_FI(DOT_RGB, row_a), r0);
    pxvm_build_patch(&b, dot, PX_FI(DOT_RGB, row_b), r0 + 1);
    pxvm_build_patch(&b, dot, PX_FI(DOT_RGB, row_out), r2);
    pxvm_program prog;
    pxvm_executor *ex;
    pxvm_error err;
    const pxvm_image *ins[] = {&src};
    CHECK(px_run_builder(&b, ins, 1, &prog, &ex, &err) == 0);
    if (!ex) {
        px_test_fail(__FILE__, __LINE__, "%s", err.msg);
        return;
    }
    CHECK_EQ(prog.reset[0], PXVM_RESET_LEVEL0); /* written; no PYRAMID writes its upper levels */
    CHECK_EQ(prog.reset[in], 0);                /* rebuilt before any read */
    CHECK_EQ(prog.reset[out], PXVM_RESET_LEVEL0);
    CHECK_EQ(prog.reset[scr], PXVM_RESET_LEVEL0 | PXVM_RESET_UPPER); /* read before its PYRAMID */
    uint64_t first = px__all_hash(ex, &prog);
    pxvm_run_options ro = {.max_steps = 100};
    for (int r = 0; r < 3; r++) {
        CHECK(pxvm_cpu_executor.run(ex, &ro, &err) == 0);
        CHECK_EQ(px__all_hash(ex, &prog), first);
    }
    pxvm_image o = px_read(&prog, ex, out, 0);
    CHECK_EQ(px_px(&o, 0, 0), 0); /* the scratch slot was read while still zero */
    pxvm_image_free(&o);
    px_close(&prog, ex);
    pxvm_image_free(&src);
}
