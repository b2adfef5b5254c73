/* test_resize_op.c - the RESIZE instruction on the CPU executor: its bytes are those of the host
 * reference px_resize_rgba8 (itself Pillow's, tests/python/test_resize_pillow.py) for stretch and
 * fit, every filter, wide, tall and equal aspects, 1-texel results, the pad and what is outside the
 * rectangle; the fit rule at its edges; the write rules it shares with SAMPLE. Its own refusals'
 * edge pairs ([V-RESIZE-n]) are built here by px_resize_rule_case for tests/unit/test_rules.c. */
#include <stdlib.h>

#include "../../isa/px_resize.h"
#include "../../vm/resize.h"
#include "test.h"

static uint32_t px__resize(pxvm_builder *b, int src, int dst, int filter, int x, int y, int w, int h, int fit, uint32_t pad)
{
    int32_t f[PXI_MAX_FIELDS] = {0};
    f[PX_FI(RESIZE, src)] = src, f[PX_FI(RESIZE, dst)] = dst, f[PX_FI(RESIZE, filter)] = filter;
    f[PX_FI(RESIZE, dst_x)] = x, f[PX_FI(RESIZE, dst_y)] = y, f[PX_FI(RESIZE, w)] = w, f[PX_FI(RESIZE, h)] = h;
    f[PX_FI(RESIZE, fit)] = fit;
    f[PX_FI(RESIZE, pad_r)] = (int32_t)(pad & 255u), f[PX_FI(RESIZE, pad_g)] = (int32_t)((pad >> 8) & 255u);
    f[PX_FI(RESIZE, pad_b)] = (int32_t)((pad >> 16) & 255u), f[PX_FI(RESIZE, pad_a)] = (int32_t)(pad >> 24);
    return pxvm_build_insn(b, PX_OP_RESIZE, f);
}

/* The expected dst level 0 (dw x dh, zero outside the rectangle): px_resize_rgba8 of src into
 * the content rectangle of the fit rule, pad around it. */
static pxvm_image px__expected(const pxvm_image *src, int dw, int dh, int filter, int x, int y, int w, int h, int fit,
                               uint32_t pad)
{
    pxvm_image e = {dw, dh, calloc((size_t)dw * (size_t)dh, 4)};
    int nw, nh, ox, oy;
    px_resize_fit(src->w, src->h, w, h, fit, &nw, &nh, &ox, &oy);
    for (int j = 0; j < h; j++)
        for (int i = 0; i < w; i++)
            px_set(&e, x + i, y + j, pad);
    uint8_t *tmp = malloc((size_t)nw * (size_t)nh * 4u);
    pxvm_error err;
    if (px_resize_rgba8(src->px, src->w, src->h, (int64_t)src->w * 4, tmp, nw, nh, (int64_t)nw * 4, filter, 4, &err) < 0)
        px_test_fail(__FILE__, __LINE__, "px_resize_rgba8: %s", err.msg);
    for (int j = 0; j < nh; j++)
        memcpy(e.px + ((size_t)(y + oy + j) * (size_t)dw + (size_t)(x + ox)) * 4u, tmp + (size_t)j * (size_t)nw * 4u,
               (size_t)nw * 4u);
    free(tmp);
    return e;
}

/* One RESIZE of a random sw x sh input into a dw x dh output slot; 0 when the bytes agree. */
static int px__check_one(int sw, int sh, int dw, int dh, int filter, int x, int y, int w, int h, int fit, uint32_t pad,
                         uint64_t *rng)
{
    pxvm_image src = px_random_image(sw, sh, rng);
    pxvm_builder b;
    pxvm_build_init(&b, 32);
    pxvm_build_slot(&b, PXI_ROLE_INPUT, "src", sw, sh);
    pxvm_build_slot(&b, PXI_ROLE_OUTPUT, "out", dw, dh);
    px__resize(&b, 1, 2, filter, x, y, w, h, fit, pad);
    pxvm_build_insn(&b, PX_OP_HALT, NULL);
    pxvm_program prog;
    pxvm_executor *ex = NULL;
    pxvm_error err;
    const pxvm_image *in[1] = {&src};
    int bad = 0;
    if (px_run_builder(&b, in, 1, &prog, &ex, &err) < 0) {
        px_test_fail(__FILE__, __LINE__, "%dx%d -> %dx%d filter %d fit %d: %s", sw, sh, w, h, filter, fit, err.msg);
        pxvm_image_free(&src);
        return 1;
    }
    pxvm_image got = px_read(&prog, ex, 2, 0), want = px__expected(&src, dw, dh, filter, x, y, w, h, fit, pad);
    if (!got.px || memcmp(got.px, want.px, (size_t)dw * (size_t)dh * 4u)) {
        px_test_fail(__FILE__, __LINE__, "%dx%d -> %dx%d at %d,%d of %dx%d, filter %d fit %d: bytes differ", sw, sh, w, h, x,
                     y, dw, dh, filter, fit);
        bad = 1;
    }
    pxvm_image_free(&got);
    pxvm_image_free(&want);
    pxvm_image_free(&src);
    px_close(&prog, ex);
    return bad;
}

TEST(resize_op_stretch_equals_the_reference_every_filter)
{
    uint64_t rng = 23;
    static const int sizes[][4] = {{37, 23, 16, 16}, {16, 16, 37, 23}, {40, 30, 40, 11}, {40, 30, 13, 30}, {9, 9, 9, 9},
                                   {1, 1, 5, 3},     {5, 3, 1, 1},     {64, 48, 200, 7}, {3, 50, 60, 2}};
    int n = 0;
    for (int filter = 0; filter < 6; filter++)
        for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++, n++)
            px__check_one(sizes[k][0], sizes[k][1], sizes[k][2] + 3, sizes[k][3] + 2, filter, 2, 1, sizes[k][2], sizes[k][3],
                          0, 0, &rng);
    printf("  %d stretches\n", n);
}

TEST(resize_op_fit_equals_the_reference_wide_tall_equal_and_one_texel)
{
    uint64_t rng = 7;
    static const int sizes[][4] = {
        {451, 300, 64, 64}, /* wide: letterbox above and below */
        {300, 451, 64, 64}, /* tall: bars left and right */
        {40, 20, 20, 10},   /* equal aspect: the whole rectangle */
        {45, 30, 20, 20},   /* 20 x 13.33 -> 13, odd leftover */
        {300, 2, 10, 10},   /* nh rounds to 0: at least 1 */
        {2, 300, 10, 10},   /* nw likewise */
        {7, 5, 1, 1},       /* a 1x1 rectangle */
        {3, 2, 17, 9},      /* upscaling into a wide rectangle */
    };
    int n = 0;
    for (int filter = 0; filter < 6; filter++)
        for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++, n++)
            px__check_one(sizes[k][0], sizes[k][1], sizes[k][2] + 5, sizes[k][3] + 4, filter, 3, 2, sizes[k][2],
                          sizes[k][3], 1, 0xFF808080u - (uint32_t)filter, &rng);
    printf("  %d fits\n", n);
}

TEST(resize_op_fit_rule_at_its_edges)
{
    int nw, nh, ox, oy;
    px_resize_fit(451, 300, 448, 448, 1, &nw, &nh, &ox, &oy); /* 448 * 300 / 451 = 298.0 */
    CHECK_EQ(nw, 448); CHECK_EQ(nh, 298); CHECK_EQ(ox, 0); CHECK_EQ(oy, 75);
    px_resize_fit(3, 2, 5, 5, 1, &nw, &nh, &ox, &oy); /* 10/3 = 3.33 -> 3 */
    CHECK_EQ(nw, 5); CHECK_EQ(nh, 3); CHECK_EQ(oy, 1);
    px_resize_fit(4, 2, 5, 5, 1, &nw, &nh, &ox, &oy); /* 2.5: half rounds up */
    CHECK_EQ(nh, 3); CHECK_EQ(oy, 1);
    px_resize_fit(2, 4, 5, 5, 1, &nw, &nh, &ox, &oy);
    CHECK_EQ(nw, 3); CHECK_EQ(nh, 5); CHECK_EQ(ox, 1); CHECK_EQ(oy, 0);
    px_resize_fit(1000, 1, 8, 8, 1, &nw, &nh, &ox, &oy); /* 0.008 -> at least 1 */
    CHECK_EQ(nh, 1); CHECK_EQ(oy, 3);
    px_resize_fit(6, 4, 9, 6, 1, &nw, &nh, &ox, &oy); /* equal aspect */
    CHECK_EQ(nw, 9); CHECK_EQ(nh, 6); CHECK_EQ(ox, 0); CHECK_EQ(oy, 0);
    px_resize_fit(451, 300, 20, 30, 0, &nw, &nh, &ox, &oy); /* stretch */
    CHECK_EQ(nw, 20); CHECK_EQ(nh, 30); CHECK_EQ(ox, 0); CHECK_EQ(oy, 0);
    px_resize_fit(16384, 16384 - 1, 16384, 16384, 1, &nw, &nh, &ox, &oy); /* 16383 exactly */
    CHECK_EQ(nh, 16383); CHECK_EQ(oy, 0);
}

/* The write rules RESIZE shares with SAMPLE (V-WRITE-1..3), naming the rectangle's pixel. */
TEST(resize_op_write_rules)
{
    for (int rule = 0; rule < 3; rule++)
        for (int refuse = 0; refuse < 2; refuse++) {
            pxvm_builder b;
            pxvm_build_init(&b, 16);
            pxvm_build_slot(&b, PXI_ROLE_INPUT, "src", 8, 8);
            pxvm_build_slot(&b, PXI_ROLE_OUTPUT, "out", 4, 4);
            pxvm_build_slot(&b, PXI_ROLE_INPUT, "in2", 4, 4);
            int dst = rule == 0 && refuse ? 3 : rule == 2 ? 0 : 2;
            int x = rule == 1 ? (refuse ? 1 : 0) : rule == 2 ? 0 : 0, y = rule == 2 ? (refuse ? 2 : 3) : 0; /* the code ends at stream 35 */
            int w = rule == 2 ? 2 : 4;
            px__resize(&b, 1, dst, 3, x, y, w, rule == 2 ? 1 : 4, 0, 0);
            pxvm_build_insn(&b, PX_OP_HALT, NULL);
            uint8_t row[64] = {0};
            pxvm_build_row(&b, row, 16); /* a fourth row of the program image, after the code */
            pxvm_error err = px_load_error(&b);
            if (!refuse) {
                if ((int)err.code != 0)
                    px_test_fail(__FILE__, __LINE__, "write rule %d: the accepted case fails: %s", rule, err.msg);
                continue;
            }
            CHECK_EQ(err.code, rule == 0 ? PXE_WRITE_READ_ONLY : rule == 1 ? PXE_WRITE_OUTSIDE : PXE_WRITE_CODE);
            CHECK_STR(err.msg, rule == 0 ? "writes slot in2, a read-only input slot"
                               : rule == 1 ? "destination 1,0 4x4 does not fit slot out (4x4)"
                                           : "of the program image overlaps its header and code");
        }
}

/* The edge pairs of [V-RESIZE-1..4] for test_rules.c: an input 'src' 8x6, an output 'out'
 * 16x16, RESIZE src -> out (instruction 0), HALT; the program image 16 wide. */
void px_resize_rule_case(int rule, int refuse, int variant, pxvm_image *prog, int *x, int *y, char *msg, size_t n);
void px_resize_rule_case(int rule, int refuse, int variant, pxvm_image *prog, int *x, int *y, char *msg, size_t n)
{
    pxvm_builder b;
    pxvm_build_init(&b, 16);
    pxvm_build_slot(&b, PXI_ROLE_INPUT, "src", 8, 6);
    pxvm_build_slot(&b, PXI_ROLE_OUTPUT, "out", 16, 16);
    int filter = 3, fit = 0, src = 1, pixel = 0;
    uint32_t pad = 0;
    switch (rule) {
    case 1: /* filter 0..5 */
        filter = refuse ? 6 + 249 * variant : 5;
        snprintf(msg, n, "instruction 0 (RESIZE): operand filter = %d (filters are 0 nearest", filter);
        break;
    case 2: /* fit 0..1 */
        fit = refuse ? 2 + 253 * variant : 1;
        pad = 0xFF808080u;
        pixel = 3;
        snprintf(msg, n, "instruction 0 (RESIZE): operand fit = %d (fit is 0 = stretch or 1 = fit)", fit);
        break;
    case 3: /* with fit 0, the pad is 0 */
        pad = refuse ? (variant ? 0x01000000u : 0x00000001u) : 0;
        pixel = 4;
        snprintf(msg, n, "instruction 0 (RESIZE): operand %s = 1 (the pad is used only with fit = 1", variant ? "pad_a" : "pad_r");
        break;
    default: /* src != dst */
        src = refuse ? 2 : 1;
        snprintf(msg, n, "instruction 0 (RESIZE): reads and writes the same slot out");
        break;
    }
    uint32_t i = px__resize(&b, src, 2, filter, 0, 0, 16, 16, fit, pad);
    pxvm_build_insn(&b, PX_OP_HALT, NULL);
    uint32_t code0 = (uint32_t)(PXI_HEADER_PIXELS + PXI_SLOT_PIXELS * b.nslots);
    uint32_t pc = code0 + b.insn_pc[i] + (uint32_t)pixel;
    *x = (int)(pc % (uint32_t)b.width), *y = (int)(pc / (uint32_t)b.width);
    pxvm_error err;
    if (pxvm_build_finish(&b, prog, &err) < 0)
        px_test_fail(__FILE__, __LINE__, "build: %s", err.msg);
    pxvm_build_free(&b);
}

/* The edge pair of [V-RESIZE-5] for test_rules.c: an input 'src' (8x6, or 1x6 for variant 1),
 * an output 'out' 16x16, RESIZE src -> out bicubic (instruction 0), HALT; *lim's max_memory is
 * what the program needs (accepted) or one byte less (refused). What RESIZE needs, by hand:
 *   variant 0  8x6 -> 16x16: tables 4 * (16 * (2 + 5) + 16 * (2 + 5)) = 896 (ksize 5 both ways,
 *              upscaling), intermediate 4 * 16 * 6 = 384 (the runs of 6 -> 16 read rows 0..5): 1280
 *   variant 1  1x6 -> 16x16: the horizontal pass copies the one column: tables 4 * (16 * (2 + 5
 *              + 1) + 16 * (2 + 5)) = 960 (sel[] the + 1), no intermediate */
void px_resize_memory_case(int refuse, int variant, pxvm_image *prog, pxvm_limits *lim, int *x, int *y, char *msg, size_t n);
void px_resize_memory_case(int refuse, int variant, pxvm_image *prog, pxvm_limits *lim, int *x, int *y, char *msg, size_t n)
{
    int sw = variant ? 1 : 8;
    uint64_t resize = variant ? 960 : 1280;
    pxvm_builder b;
    pxvm_build_init(&b, 16);
    pxvm_build_slot(&b, PXI_ROLE_INPUT, "src", sw, 6);
    pxvm_build_slot(&b, PXI_ROLE_OUTPUT, "out", 16, 16);
    uint32_t i = px__resize(&b, 1, 2, PX_RESIZE_BICUBIC, 0, 0, 16, 16, 0, 0);
    pxvm_build_insn(&b, PX_OP_HALT, NULL);
    uint32_t pc = (uint32_t)(PXI_HEADER_PIXELS + PXI_SLOT_PIXELS * b.nslots) + b.insn_pc[i];
    *x = (int)(pc % (uint32_t)b.width), *y = (int)(pc / (uint32_t)b.width);
    pxvm_error err;
    if (pxvm_build_finish(&b, prog, &err) < 0)
        px_test_fail(__FILE__, __LINE__, "build: %s", err.msg);
    pxvm_build_free(&b);
    int cw, ch, rows;
    CHECK_EQ(px_resize_need(sw, 6, 16, 16, 0, PX_RESIZE_BICUBIC, &cw, &ch, &rows), resize);
    CHECK_EQ(rows, variant ? 0 : 6);
    pxvm_program p; /* the slots' bytes: the program loaded without the RESIZE's part counted */
    pxvm_limits_default(lim);
    if (pxvm_program_from_copy(prog, lim, &p, &err) < 0) {
        px_test_fail(__FILE__, __LINE__, "load: %s", err.msg);
        return;
    }
    uint64_t total = p.memory, slots = 0;
    for (int k = 0; k < p.nslots; k++)
        slots += p.slots[k].bytes;
    pxvm_program_free(&p);
    CHECK_EQ(total, slots + resize);
    lim->max_memory = total - (uint64_t)refuse;
    snprintf(msg, n, "instruction 0 (RESIZE): %dx6 -> 16x16 bicubic needs %llu bytes (its tables and a 16x%d intermediate); "
             "with the slots and the RESIZEs and EMBEDs before it that is %llu bytes; the limit is %llu", sw,
             (unsigned long long)resize, rows, (unsigned long long)total, (unsigned long long)total - 1u);
}

/* A RESIZE of an any-size source needs what its resolved sizes need: each resolution is checked
 * again (V-RESIZE-5 through U-BIND-6), before anything is allocated. The pair sits at 2x7 (a
 * horizontal pass from two columns keeps its 16 x 7 intermediate): the resolution's total is
 * accepted as the limit, one byte less is refused naming the RESIZE; a one-column source (no
 * intermediate) stays within that limit. */
TEST(resize_memory_follows_an_any_size_source)
{
    pxvm_builder b;
    pxvm_build_init(&b, 16);
    pxvm_build_slot(&b, PXI_ROLE_INPUT, "src", 8, 6);
    pxvm_build_any_size(&b, 1, 0, 0, 0);
    pxvm_build_slot(&b, PXI_ROLE_OUTPUT, "out", 16, 16);
    px__resize(&b, 1, 2, PX_RESIZE_BICUBIC, 0, 0, 16, 16, 0, 0);
    pxvm_build_insn(&b, PX_OP_HALT, NULL);
    pxvm_image img;
    pxvm_error err;
    CHECK_EQ(pxvm_build_finish(&b, &img, &err), 0);
    pxvm_build_free(&b);
    pxvm_limits lim;
    pxvm_limits_default(&lim);
    pxvm_program poly, res;
    CHECK_EQ(pxvm_program_from_copy(&img, &lim, &poly, &err), 0);
    int wh[6] = {0, 0, 2, 7, 0, 0};
    CHECK_EQ(pxvm_program_resolve(&poly, wh, &lim, &res, &err), 0);
    uint64_t slots = 0, total = res.memory;
    for (int k = 0; k < res.nslots; k++)
        slots += res.slots[k].bytes;
    pxvm_program_free(&res);
    /* 2x7 -> 16x16: tables 4 * (16 * 7 + 16 * 7) = 896, intermediate 4 * 16 * 7 = 448 */
    CHECK_EQ(total, slots + 896 + 448);
    lim.max_memory = total;
    CHECK_EQ(pxvm_program_resolve(&poly, wh, &lim, &res, &err), 0);
    pxvm_program_free(&res);
    wh[2] = 1; /* 1x7: tables 4 * (16 * 8 + 16 * 7) = 960, no intermediate, fewer slot bytes */
    CHECK_EQ(pxvm_program_resolve(&poly, wh, &lim, &res, &err), 0);
    pxvm_program_free(&res);
    wh[2] = 2;
    lim.max_memory = total - 1;
    CHECK_EQ(pxvm_program_resolve(&poly, wh, &lim, &res, &err), -1);
    CHECK_EQ(err.cls, PXVM_UNLINKABLE);
    char want[200];
    snprintf(want, sizeof want, "instruction 0 (RESIZE): 2x7 -> 16x16 bicubic needs 1344 bytes (its tables and a 16x7 "
             "intermediate); with the slots and the RESIZEs and EMBEDs before it that is %llu bytes; the limit is %llu",
             (unsigned long long)total, (unsigned long long)total - 1u);
    CHECK_STR(err.msg, want);
    pxvm_program_free(&poly);
    pxvm_image_free(&img);
}
