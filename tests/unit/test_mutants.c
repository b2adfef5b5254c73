/* test_mutants.c - checks that `make coverage` and `make mutate` asked for: branches of
 * vm/parse.c and isa/ that no other test reached (tests/coverage-notes.md lists the rest, with
 * why they cannot be reached), and the edges that let a mutant of tests/mutate/mutants.txt
 * survive the rest of the suite (each test names the mutants it kills). */
#define _POSIX_C_SOURCE 200809L /* open_memstream */
#include <stdlib.h>

#include "test.h"
#include <turbojpeg.h>

#include "../../isa/px_sem.h"
#include "../../assembler/pxasm.h"
#include "../../assembler/plan.h"

/* ---- coverage: branches nothing else reached ------------------------------------------------ */

/* px_expand's 4-channel case: a strided (CHW) RGBA view is expanded pixel by pixel, alpha kept
 * (a packed HWC RGBA view is copied whole and never reaches it). */
TEST(mutants_view_to_rgba_chw_four_channels)
{
    uint8_t chw[4 * 3 * 2], out[3 * 2 * 4];
    for (int i = 0; i < (int)sizeof chw; i++)
        chw[i] = (uint8_t)(7 * i + 1);
    pxvm_view v = {chw, -1, 1, 3, 2, 4, 24, 3, 1, 6};
    CHECK(!pxvm_view_is_packed_rgba(&v));
    pxvm_view_to_rgba(&v, 0, out);
    for (int y = 0; y < 2; y++)
        for (int x = 0; x < 3; x++)
            for (int c = 0; c < 4; c++)
                CHECK_EQ(out[(y * 3 + x) * 4 + c], chw[c * 6 + y * 3 + x]);
}

/* The names of a role and an operand kind past the table: "?" (and the last ones named). */
TEST(mutants_isa_names_past_the_tables)
{
    CHECK(!strcmp(pxi_role_name(PXI_ROLE_DATA), "data"));
    CHECK(!strcmp(pxi_role_name(PXI_ROLE_LAST + 1), "?"));
    CHECK(!strcmp(pxi_kind_name(PXK_MASK), "mask"));
    CHECK(!strcmp(pxi_kind_name((enum pxi_kind)99), "?"));
}

/* A valid one-slot program (an output slot 8x4 and HALT), its image in *img. */
static void px__one_slot(pxvm_image *img)
{
    pxvm_builder b;
    pxvm_error err;
    pxvm_build_init(&b, 16);
    pxvm_build_slot(&b, PXI_ROLE_OUTPUT, "out", 8, 4);
    pxvm_build_insn(&b, PX_OP_HALT, NULL);
    if (pxvm_build_finish(&b, img, &err) < 0)
        px_test_fail(__FILE__, __LINE__, "build: %s", err.msg);
    pxvm_build_free(&b);
}

static void px__put_u32(pxvm_image *img, uint32_t index, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        img->px[4u * index + (uint32_t)i] = (uint8_t)(v >> (8 * i));
}

static pxvm_error px__load(const pxvm_image *img, const pxvm_limits *lim)
{
    pxvm_error err;
    memset(&err, 0, sizeof err);
    pxvm_program prog;
    if (pxvm_program_from_copy(img, lim, &prog, &err) == 0)
        pxvm_program_free(&prog);
    return err;
}

/* A slot 0 texels wide is refused like one 0 tall (V-SLOT side rule), naming the width pixel. */
TEST(mutants_slot_of_width_zero)
{
    pxvm_image img;
    px__one_slot(&img);
    pxvm_limits lim;
    pxvm_limits_default(&lim);
    CHECK_EQ(px__load(&img, &lim).code, 0);
    uint32_t d = PXI_HEADER_PIXELS; /* slot 1's descriptor; +1 width, +2 height */
    px__put_u32(&img, d + 1, 0);
    pxvm_error err = px__load(&img, &lim);
    CHECK_EQ(err.code, PXE_SLOT_SIDE);
    CHECK_EQ(err.x, (int)((d + 1) % (uint32_t)img.w));
    px__put_u32(&img, d + 1, 8);
    px__put_u32(&img, d + 2, lim.max_side + 1u);
    CHECK_EQ(px__load(&img, &lim).code, PXE_SLOT_SIDE);
    pxvm_image_free(&img);
}

/* A program image taller than max_side (its width within it) is refused as the slot 'prog'. */
TEST(mutants_program_image_taller_than_max_side)
{
    pxvm_image img, tall;
    px__one_slot(&img);
    pxvm_image_alloc(&tall, img.w, 40, NULL);
    memset(tall.px, 0, (size_t)tall.w * 40u * 4u);
    memcpy(tall.px, img.px, (size_t)img.w * (size_t)img.h * 4u);
    pxvm_limits lim;
    pxvm_limits_default(&lim);
    lim.max_side = 39;
    CHECK(img.w <= 39);
    pxvm_error err = px__load(&tall, &lim);
    CHECK_EQ(err.code, PXE_SLOT_SIDE);
    CHECK_STR(err.msg, "prog");
    lim.max_side = 40;
    CHECK_EQ(px__load(&tall, &lim).code, 0);
    pxvm_image_free(&img);
    pxvm_image_free(&tall);
}

/* ---- mutants: edges no other test held (tests/mutate/mutants.txt) ---------------------------- */

#define ONE 65536

/* sem-rect-empty: an empty dirty rectangle touches nothing, inside a tile too (not only on a
 * boundary); a 1x1 one touches exactly its tile. */
TEST(mutants_empty_rectangle_inside_a_tile_touches_nothing)
{
    CHECK(!px_rect_touches_tile(5, 5, 0, 4, 0, 0));
    CHECK(!px_rect_touches_tile(5, 5, 4, 0, 0, 0));
    CHECK(px_rect_touches_tile(5, 5, 1, 1, 0, 0));
    pxvm_rect r = {21, 3, 0, 9};
    CHECK(!pxvm_rects_touch_tile(&r, 1, 1, 0));
}

/* sem-mask-dirty: any R != 0 reads as dirty (R = 1 too); only R decides. */
TEST(mutants_mask_pixel_with_r_1_is_dirty)
{
    CHECK(px_mask_dirty(px_pack(1, 0, 0, 255)));
    CHECK(px_mask_dirty(px_pack(128, 0, 0, 0)));
    CHECK(!px_mask_dirty(px_pack(0, 255, 255, 255)));
    CHECK(px_mask_dirty(px_mask_pixel(1)) && !px_mask_dirty(px_mask_pixel(0)));
}

/* sem-mask-dirty through a run: UPDATE copies the tiles a host-bound mask marks with R = 1. */
TEST(mutants_update_reads_r_1_as_dirty)
{
    pxvm_builder b;
    pxvm_build_init(&b, 16);
    int frame = pxvm_build_slot(&b, PXI_ROLE_INPUT, "frame", 32, 16);
    int cur = pxvm_build_slot(&b, PXI_ROLE_OUTPUT, "cur", 32, 16);
    int mask = pxvm_build_slot(&b, PXI_ROLE_INPUT, "mask", 2, 1);
    pxvm_build_persist(&b, cur);
    int32_t f[PXI_MAX_FIELDS] = {0};
    f[PX_FI(UPDATE, frame)] = frame, f[PX_FI(UPDATE, cur)] = cur, f[PX_FI(UPDATE, mask)] = mask;
    pxvm_build_insn(&b, PX_OP_UPDATE, f);
    pxvm_build_insn(&b, PX_OP_HALT, NULL);
    uint64_t st = 3;
    pxvm_image fr = px_random_image(32, 16, &st), m;
    pxvm_image_alloc(&m, 2, 1, NULL);
    px_set(&m, 0, 0, px_pack(1, 0, 0, 255)); /* tile 0: R = 1, dirty */
    px_set(&m, 1, 0, px_pack(0, 9, 9, 255)); /* tile 1: clean */
    const pxvm_image *ins[] = {&fr, &m};
    pxvm_program prog;
    pxvm_executor *ex;
    pxvm_error err;
    if (px_run_builder(&b, ins, 2, &prog, &ex, &err) < 0) {
        px_test_fail(__FILE__, __LINE__, "%s", err.msg);
    } else {
        pxvm_image c = px_read(&prog, ex, cur, 0);
        for (int y = 0; y < 16; y++)
            for (int x = 0; x < 32; x++)
                if (px_px(&c, x, y) != (x < 16 ? px_px(&fr, x, y) : 0u)) {
                    px_test_fail(__FILE__, __LINE__, "cur (%d, %d) is %08x", x, y, px_px(&c, x, y));
                    y = 16;
                    break;
                }
        pxvm_image_free(&c);
        px_close(&prog, ex);
    }
    pxvm_image_free(&fr), pxvm_image_free(&m);
}

/* sem-texel-tiles-edge: a texel's tile box stops at the image's last texel, also at a level whose
 * size is clamped to 1 (level 5 of a 16-wide slot covers 32 texels, of which 16 exist: tile 0). */
TEST(mutants_texel_tiles_stop_at_the_image)
{
    px_tilebox b = px_texel_tiles(0, 0, 5, 16, 64);
    CHECK_EQ(b.x0, 0);
    CHECK_EQ(b.x1, 0);
    CHECK_EQ(b.y0, 0);
    CHECK_EQ(b.y1, 1);
    b = px_texel_tiles(0, 1, 6, 48, 128);
    CHECK_EQ(b.x1, 2);
    CHECK_EQ(b.y0, 4);
    CHECK_EQ(b.y1, 7);
}

/* parse-name-digit: a slot name may not start with any digit, '0' included. */
TEST(mutants_slot_name_starting_with_0)
{
    pxvm_image img;
    px__one_slot(&img);
    pxvm_limits lim;
    pxvm_limits_default(&lim);
    uint32_t name = PXI_HEADER_PIXELS + 6;
    for (char c = '0'; c <= '9'; c += 9) {
        img.px[4u * name] = (uint8_t)c;
        pxvm_error err = px__load(&img, &lim);
        CHECK_EQ(err.code, PXE_SLOT_NAME_DIGIT);
        CHECK_STR(err.msg, "must not start with a digit");
    }
    img.px[4u * name] = '_';
    CHECK_EQ(px__load(&img, &lim).code, 0);
    pxvm_image_free(&img);
}

/* parse-halt-single: a program of one instruction must be HALT too. */
TEST(mutants_one_instruction_that_is_not_halt)
{
    pxvm_builder b;
    pxvm_build_init(&b, 16);
    int in = pxvm_build_slot(&b, PXI_ROLE_INPUT, "image", 8, 8);
    int32_t f[PXI_MAX_FIELDS] = {0};
    f[PX_FI(PYRAMID, slot)] = in;
    pxvm_build_insn(&b, PX_OP_PYRAMID, f);
    pxvm_error err = px_load_error(&b);
    CHECK_EQ(err.code, PXE_NO_HALT);
    CHECK_STR(err.msg, "PYRAMID");
}

/* geometry-token-count: a fetch into an atlas cell past its last patch has no token. */
TEST(mutants_fetch_past_the_last_patch_has_no_token)
{
    pxvm_builder b;
    pxvm_build_init(&b, 16);
    int in = pxvm_build_slot(&b, PXI_ROLE_INPUT, "image", 16, 16);
    int a = pxvm_build_slot(&b, PXI_ROLE_OUTPUT, "a", 48, 16);
    int c = pxvm_build_slot(&b, PXI_ROLE_OUTPUT, "c", 16, 16);
    pxvm_build_patches(&b, a, 16, 16, 2); /* cells 0, 1 are patches; cell 2 is not */
    pxvm_build_patches(&b, c, 16, 16, 1);
    for (int k = 0; k < 4; k++) {
        int32_t f[PXI_MAX_FIELDS] = {0};
        f[PX_FI(SAMPLE, src)] = in, f[PX_FI(SAMPLE, dst)] = k < 3 ? a : c, f[PX_FI(SAMPLE, dst_x)] = k < 3 ? 16 * k : 0;
        f[PX_FI(SAMPLE, w)] = f[PX_FI(SAMPLE, h)] = 16;
        f[PX_FI(SAMPLE, cu)] = f[PX_FI(SAMPLE, cv)] = 8 * ONE, f[PX_FI(SAMPLE, du)] = f[PX_FI(SAMPLE, dv)] = ONE;
        pxvm_build_insn(&b, PX_OP_SAMPLE, f);
    }
    pxvm_build_insn(&b, PX_OP_HALT, NULL);
    pxvm_image img;
    pxvm_error err;
    pxvm_limits lim;
    pxvm_limits_default(&lim);
    pxvm_program prog;
    CHECK(pxvm_build_finish(&b, &img, &err) == 0);
    pxvm_build_free(&b);
    CHECK(pxvm_program_from_image(&img, &lim, &prog, &err) == 0);
    CHECK_EQ(prog.ngeom, 3);
    CHECK_EQ(prog.insn_token[0], 0);
    CHECK_EQ(prog.insn_token[1], 1);
    CHECK_EQ(prog.insn_token[2], -1); /* not c's token 0 */
    CHECK_EQ(prog.insn_token[3], 2);
    pxvm_program_free(&prog);
}

/* A 16x16 input, 16x16 output sampled from it; loaded on the CPU executor (run once). */
static int px__small_run(pxvm_program *prog, pxvm_executor **ex)
{
    pxvm_builder b;
    pxvm_build_init(&b, 16);
    int in = pxvm_build_slot(&b, PXI_ROLE_INPUT, "image", 16, 16);
    int out = pxvm_build_slot(&b, PXI_ROLE_OUTPUT, "out", 16, 16);
    int32_t f[PXI_MAX_FIELDS] = {0};
    f[PX_FI(SAMPLE, src)] = in, f[PX_FI(SAMPLE, dst)] = out, f[PX_FI(SAMPLE, w)] = f[PX_FI(SAMPLE, h)] = 16;
    f[PX_FI(SAMPLE, cu)] = f[PX_FI(SAMPLE, cv)] = 8 * ONE, f[PX_FI(SAMPLE, du)] = f[PX_FI(SAMPLE, dv)] = ONE;
    pxvm_build_insn(&b, PX_OP_SAMPLE, f);
    pxvm_build_insn(&b, PX_OP_HALT, NULL);
    uint64_t st = 1;
    pxvm_image im = px_random_image(16, 16, &st);
    const pxvm_image *ins[] = {&im};
    pxvm_error err;
    int rc = px_run_builder(&b, ins, 1, prog, ex, &err);
    if (rc < 0)
        px_test_fail(__FILE__, __LINE__, "%s", err.msg);
    pxvm_image_free(&im);
    return rc;
}

/* view-fix-regs, view-level-read: registers 0..7 and levels 0..levels-1, no further. */
TEST(mutants_registers_and_levels_end_where_they_end)
{
    pxvm_program prog;
    pxvm_executor *ex;
    if (px__small_run(&prog, &ex) < 0)
        return;
    pxvm_error err;
    int32_t fix[2 * PX_FIX_REGS] = {0};
    CHECK_EQ(pxvm_cpu_executor.set_fixations(ex, 0, 1, 6, 2, fix, -1, &err), 0);
    CHECK(pxvm_cpu_executor.set_fixations(ex, 0, 1, 7, 2, fix, -1, &err) < 0);
    CHECK(pxvm_cpu_executor.set_fixations(ex, 0, 1, 0, PX_FIX_REGS + 1, fix, -1, &err) < 0);
    pxvm_image img = {0, 0, NULL};
    int levels = prog.slots[2].levels;
    CHECK_EQ(levels, 5);
    CHECK_EQ(pxvm_read_image(&pxvm_cpu_executor, ex, &prog, 2, levels - 1, 0, &img, &err), 0);
    pxvm_image_free(&img);
    CHECK(pxvm_read_image(&pxvm_cpu_executor, ex, &prog, 2, levels, 0, &img, &err) < 0);
    CHECK_STR(err.msg, "level");
    px_close(&prog, ex);
}

/* plan-batch-table: a GATHER whose table an earlier fetch writes starts a new step (a batch runs
 * its fetches at once); two fetches of other slots share one. */
TEST(mutants_gather_after_its_table_is_written_is_a_new_step)
{
    pxvm_builder b;
    pxvm_build_init(&b, 16);
    int in = pxvm_build_slot(&b, PXI_ROLE_INPUT, "image", 16, 16);
    int tab = pxvm_build_slot(&b, PXI_ROLE_SCRATCH, "tab", 3, 1);
    int out = pxvm_build_slot(&b, PXI_ROLE_OUTPUT, "out", 1, 1);
    int out2 = pxvm_build_slot(&b, PXI_ROLE_OUTPUT, "out2", 1, 1);
    int32_t f[PXI_MAX_FIELDS] = {0};
    f[PX_FI(SAMPLE, src)] = in, f[PX_FI(SAMPLE, dst)] = out2, f[PX_FI(SAMPLE, w)] = f[PX_FI(SAMPLE, h)] = 1;
    pxvm_build_insn(&b, PX_OP_SAMPLE, f);
    f[PX_FI(SAMPLE, dst)] = tab, f[PX_FI(SAMPLE, w)] = 3;
    pxvm_build_insn(&b, PX_OP_SAMPLE, f);
    memset(f, 0, sizeof f);
    f[PX_FI(GATHER, src)] = in, f[PX_FI(GATHER, dst)] = out, f[PX_FI(GATHER, w)] = f[PX_FI(GATHER, h)] = 1;
    f[PX_FI(GATHER, table)] = tab;
    pxvm_build_insn(&b, PX_OP_GATHER, f);
    pxvm_build_insn(&b, PX_OP_HALT, NULL);
    pxvm_image img;
    pxvm_error err;
    pxvm_limits lim;
    pxvm_limits_default(&lim);
    pxvm_program prog;
    CHECK(pxvm_build_finish(&b, &img, &err) == 0);
    pxvm_build_free(&b);
    if (pxvm_program_from_image(&img, &lim, &prog, &err) < 0) {
        px_test_fail(__FILE__, __LINE__, "%s", err.msg);
        return;
    }
    CHECK_EQ(prog.nsteps, 3);
    CHECK(prog.steps[0].first == 0 && prog.steps[0].count == 2 && prog.steps[0].kind == PXVM_STEP_BATCH);
    CHECK(prog.steps[1].first == 2 && prog.steps[1].count == 1);
    pxvm_program_free(&prog);
}

/* image-png-trailing: one byte after IEND is noted (it is read, not refused); none is clean. */
TEST(mutants_png_one_byte_after_iend)
{
    pxvm_image a, back = {0, 0, NULL};
    pxvm_image_alloc(&a, 3, 2, NULL);
    uint8_t *png = NULL;
    size_t n = 0;
    pxvm_error err;
    CHECK(pxvm_png_encode(&a, &png, &n, &err) == 0);
    uint8_t *more = malloc(n + 1);
    memcpy(more, png, n);
    more[n] = 0;
    pxvm_limits lim;
    pxvm_limits_default(&lim);
    CHECK_EQ(pxvm_png_decode(more, n, "a.png", &lim, &back, &err), 0);
    CHECK_EQ(err.code, PXE_NONE);
    pxvm_image_free(&back);
    CHECK_EQ(pxvm_png_decode(more, n + 1, "a.png", &lim, &back, &err), 0);
    CHECK_EQ(err.code, PXE_IMAGE_TRAILING);
    pxvm_image_free(&back);
    free(more), free(png);
    pxvm_image_free(&a);
}

/* image-jpeg-second-soi: FF D8 again is named as a second start-of-image marker. */
TEST(mutants_jpeg_second_start_of_image)
{
    pxvm_image a, back = {0, 0, NULL};
    pxvm_image_alloc(&a, 16, 8, NULL);
    tjhandle tj = tjInitCompress();
    unsigned char *jpeg = NULL;
    unsigned long n = 0;
    CHECK(tj && tjCompress2(tj, a.px, 16, 64, 8, TJPF_RGBA, &jpeg, &n, TJSAMP_420, 75, 0) == 0);
    uint8_t *twice = malloc(n + 2);
    twice[0] = 0xFF, twice[1] = 0xD8;
    memcpy(twice + 2, jpeg, n);
    pxvm_limits lim;
    pxvm_limits_default(&lim);
    pxvm_error err;
    CHECK_EQ(pxvm_jpeg_decode(twice + 2, n, "a.jpg", &lim, &back, &err), 0);
    pxvm_image_free(&back);
    CHECK(pxvm_jpeg_decode(twice, n + 2, "a.jpg", &lim, &back, &err) < 0);
    CHECK_EQ(err.code, PXE_JPEG_CORRUPT);
    CHECK_STR(err.msg, "a second start-of-image marker at byte 2");
    pxvm_image_free(&back);
    free(twice);
    tjFree(jpeg);
    tjDestroy(tj);
    pxvm_image_free(&a);
}

/* cpu-fetch-moved-y: an incremental, fixation-relative SAMPLE samples again when its register
 * moved only vertically (the frame unchanged), giving what a full run at the new fixation gives. */
static int px__relative_video(pxvm_program *prog)
{
    pxvm_builder b;
    pxvm_build_init(&b, 16);
    int frame = pxvm_build_slot(&b, PXI_ROLE_INPUT, "frame", 32, 32);
    int cur = pxvm_build_slot(&b, PXI_ROLE_SCRATCH, "cur", 32, 32);
    int dirty = pxvm_build_slot(&b, PXI_ROLE_SCRATCH, "dirty", 2, 2);
    int atlas = pxvm_build_slot(&b, PXI_ROLE_OUTPUT, "atlas", 4, 4);
    pxvm_build_patches(&b, atlas, 4, 4, 1);
    pxvm_build_persist(&b, cur);
    pxvm_build_persist(&b, atlas);
    int32_t f[PXI_MAX_FIELDS] = {0};
    f[PX_FI(DIFF, frame)] = frame, f[PX_FI(DIFF, cur)] = cur, f[PX_FI(DIFF, mask)] = dirty;
    pxvm_build_insn(&b, PX_OP_DIFF, f);
    pxvm_build_insn(&b, PX_OP_UPDATE, f);
    memset(f, 0, sizeof f);
    f[PX_FI(PYRAMID, slot)] = cur, f[PX_FI(PYRAMID, mask)] = dirty;
    pxvm_build_insn(&b, PX_OP_PYRAMID, f);
    memset(f, 0, sizeof f);
    f[PX_FI(SAMPLE, src)] = cur, f[PX_FI(SAMPLE, dst)] = atlas, f[PX_FI(SAMPLE, mode)] = PX_MODE_REL(PX_MODE_LINEAR, 0);
    f[PX_FI(SAMPLE, w)] = f[PX_FI(SAMPLE, h)] = 4, f[PX_FI(SAMPLE, mask)] = dirty;
    f[PX_FI(SAMPLE, cu)] = f[PX_FI(SAMPLE, cv)] = 8 * ONE, f[PX_FI(SAMPLE, du)] = f[PX_FI(SAMPLE, dv)] = ONE;
    pxvm_build_insn(&b, PX_OP_SAMPLE, f);
    pxvm_build_insn(&b, PX_OP_HALT, NULL);
    return px_build_program(&b, prog);
}

TEST(mutants_fixation_moved_only_vertically_samples_again)
{
    pxvm_program prog;
    if (px__relative_video(&prog) < 0)
        return;
    uint64_t st = 11;
    pxvm_image fr = px_random_image(32, 32, &st);
    pxvm_run_options ro = {.max_steps = 100};
    pxvm_error err;
    pxvm_executor *ex, *ref;
    CHECK(pxvm_cpu_executor.open(&ex, NULL, &err) == 0 && pxvm_cpu_executor.load(ex, &prog, 1, &err) == 0);
    CHECK(pxvm_cpu_executor.open(&ref, NULL, &err) == 0 && pxvm_cpu_executor.load(ref, &prog, 1, &err) == 0);
    int32_t fix[2 * PX_FIX_REGS] = {0};
    for (int k = 0; k < 3; k++) { /* (0, 0), then (0, 5), then (3, 5): y alone, then x alone */
        fix[0] = k == 2 ? 3 * ONE : 0, fix[1] = k ? 5 * ONE : 0;
        CHECK(pxvm_bind_image(&pxvm_cpu_executor, ex, 1, &fr, &err) == 0);
        CHECK(pxvm_cpu_executor.set_fixations(ex, 0, 1, 0, 1, fix, -1, &err) == 0);
        CHECK(pxvm_cpu_executor.run(ex, &ro, &err) == 0);
        uint8_t changed = 9;
        CHECK(pxvm_cpu_executor.read_state(ex, PXVM_STATE_CHANGED, 4, 0, 1, &changed, -1, &err) == 0);
        CHECK_EQ(changed, 1);
        CHECK(pxvm_cpu_executor.reset(ref, &err) == 0 && pxvm_bind_image(&pxvm_cpu_executor, ref, 1, &fr, &err) == 0);
        CHECK(pxvm_cpu_executor.set_fixations(ref, 0, 1, 0, 1, fix, -1, &err) == 0);
        CHECK(pxvm_cpu_executor.run(ref, &ro, &err) == 0);
        pxvm_image a = px_read(&prog, ex, 4, 0), r = px_read(&prog, ref, 4, 0);
        CHECK(!memcmp(a.px, r.px, 4 * 4 * 4));
        pxvm_image_free(&a), pxvm_image_free(&r);
    }
    fix[0] = 3 * ONE, fix[1] = 5 * ONE; /* not moved: nothing sampled */
    CHECK(pxvm_cpu_executor.set_fixations(ex, 0, 1, 0, 1, fix, -1, &err) == 0 && pxvm_cpu_executor.run(ex, &ro, &err) == 0);
    uint8_t changed = 9;
    CHECK(pxvm_cpu_executor.read_state(ex, PXVM_STATE_CHANGED, 4, 0, 1, &changed, -1, &err) == 0);
    CHECK_EQ(changed, 0);
    pxvm_cpu_executor.close(ex), pxvm_cpu_executor.close(ref);
    pxvm_image_free(&fr);
    pxvm_program_free(&prog);
}

/* cpu-argmax-texel0: the best uninhibited texel is texel 0 while a larger one is inhibited. */
TEST(mutants_argmax_best_at_texel_0)
{
    pxvm_builder b;
    pxvm_build_init(&b, 16);
    int map = pxvm_build_slot(&b, PXI_ROLE_INPUT, "map", 8, 1);
    int32_t f[PXI_MAX_FIELDS] = {0};
    f[PX_FI(ARGMAX, src)] = map, f[PX_FI(ARGMAX, reg)] = 0, f[PX_FI(ARGMAX, w_r)] = 1, f[PX_FI(ARGMAX, space)] = map;
    f[PX_FI(ARGMAX, ior_first)] = 1, f[PX_FI(ARGMAX, ior_count)] = 1, f[PX_FI(ARGMAX, radius)] = 0;
    pxvm_build_insn(&b, PX_OP_ARGMAX, f);
    pxvm_build_insn(&b, PX_OP_HALT, NULL);
    pxvm_image img, m;
    pxvm_error err;
    pxvm_limits lim;
    pxvm_limits_default(&lim);
    pxvm_program prog;
    CHECK(pxvm_build_finish(&b, &img, &err) == 0);
    pxvm_build_free(&b);
    if (pxvm_program_from_image(&img, &lim, &prog, &err) < 0) {
        px_test_fail(__FILE__, __LINE__, "%s", err.msg);
        return;
    }
    pxvm_image_alloc(&m, 8, 1, NULL);
    px_set(&m, 0, 0, px_pack(100, 0, 0, 255));
    px_set(&m, 5, 0, px_pack(200, 0, 0, 255));
    pxvm_executor *ex;
    pxvm_run_options ro = {.max_steps = 100};
    int32_t fix[2 * PX_FIX_REGS] = {0}, out[2 * PX_FIX_REGS];
    fix[2] = 5 * ONE + ONE / 2, fix[3] = ONE / 2; /* register 1: the centre of texel 5 */
    CHECK(pxvm_cpu_executor.open(&ex, NULL, &err) == 0 && pxvm_cpu_executor.load(ex, &prog, 1, &err) == 0);
    CHECK(pxvm_bind_image(&pxvm_cpu_executor, ex, map, &m, &err) == 0);
    CHECK(pxvm_cpu_executor.set_fixations(ex, 0, 1, 0, PX_FIX_REGS, fix, -1, &err) == 0);
    CHECK(pxvm_cpu_executor.run(ex, &ro, &err) == 0);
    CHECK(pxvm_cpu_executor.read_state(ex, PXVM_STATE_FIXATIONS, 0, 0, 1, out, -1, &err) == 0);
    CHECK_EQ(out[0], ONE / 2); /* texel 0, not the inhibited texel 5 */
    CHECK_EQ(out[1], ONE / 2);
    pxvm_cpu_executor.close(ex);
    pxvm_image_free(&m);
    pxvm_program_free(&prog);
}

/* asm-fixed-round: exact decimals round to the nearest (halves away from zero), never truncate. */
TEST(mutants_asm_decimals_round_to_nearest)
{
    const char *src = ".slot image input 16x16\n.slot out output 8x8\n"
                      "SAMPLE src=image dst=out size=(8,8) center=(0.00001, -0.00001) step=(0.99999, 1) lod=0.002\n"
                      "HALT\n";
    pxvm_limits lim;
    pxvm_limits_default(&lim);
    pxvm_image img;
    pxvm_error err;
    pxvm_program prog;
    if (pxasm_assemble(src, strlen(src), "r.pxs", &lim, &img, &err) < 0 || pxvm_program_from_image(&img, &lim, &prog, &err) < 0) {
        px_test_fail(__FILE__, __LINE__, "%s", err.msg);
        return;
    }
    const pxi_insn *in = &prog.insns[0];
    CHECK_EQ(PX_ARG(in, SAMPLE, cu), 1);        /* 0.655 */
    CHECK_EQ(PX_ARG(in, SAMPLE, cv), -1);       /* -0.655 */
    CHECK_EQ(PX_ARG(in, SAMPLE, du), ONE - 1);  /* 65535.34 */
    CHECK_EQ(PX_ARG(in, SAMPLE, lod), 1);       /* 0.512 */
    pxvm_program_free(&prog);
}

/* asm-size-parse: a side of 65536 is not a size (named so by the assembler, at its token). */
TEST(mutants_asm_size_of_65536)
{
    pxvm_limits lim;
    pxvm_limits_default(&lim);
    pxvm_image img = {0, 0, NULL};
    pxvm_error err;
    const char *src = ".slot image input 65536x1\nHALT\n";
    CHECK(pxasm_assemble(src, strlen(src), "s.pxs", &lim, &img, &err) < 0);
    CHECK_STR(err.msg, "'65536x1' is not a size");
    src = ".slot image input 3x65536\nHALT\n";
    CHECK(pxasm_assemble(src, strlen(src), "s.pxs", &lim, &img, &err) < 0);
    CHECK_STR(err.msg, "'3x65536' is not a size");
}

/* plan-lod-clamp: a plan's tokens store LODs clamped to its levels (levels - 1 at most). */
TEST(mutants_plan_lods_clamped_to_its_levels)
{
    const char *plan = "{\"image\": [451, 300], \"fixation\": [0.5, 0.5], \"budget\": 9, \"scheme\": \"grid\", \"levels\": 2, \"scale\": 20}";
    pxvm_image img;
    pxvm_error err;
    pxvm_limits lim;
    pxvm_limits_default(&lim);
    pxvm_program prog;
    if (pxvm_plan_image(plan, strlen(plan), "p.json", 0, &img, &err) < 0 || pxvm_program_from_image(&img, &lim, &prog, &err) < 0) {
        px_test_fail(__FILE__, __LINE__, "%s", err.msg);
        return;
    }
    int top = 0, n = 0;
    for (uint32_t i = 0; i < prog.ninsns; i++)
        if (prog.insns[i].op == PX_OP_SAMPLE || prog.insns[i].op == PX_OP_ANISO) {
            int lod = PX_ARG(&prog.insns[i], SAMPLE, lod);
            CHECK(lod <= 256);
            top += lod == 256, n++;
        }
    CHECK_EQ(n, 9);
    CHECK(top > 0); /* the plan asked for more */
    pxvm_program_free(&prog);
}

/* disasm-code-end: the code is printed as instructions only, never again as .pixels. */
TEST(mutants_disassembly_prints_no_code_pixels)
{
    pxvm_image img;
    px__one_slot(&img);
    pxvm_limits lim;
    pxvm_limits_default(&lim);
    pxvm_program prog;
    pxvm_error err;
    CHECK(pxvm_program_from_copy(&img, &lim, &prog, &err) == 0);
    char *text = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&text, &n);
    pxasm_disassemble(&prog, "one.pxi", f);
    fclose(f);
    CHECK_STR(text, "HALT");
    CHECK(!strstr(text, ".pixels"));
    free(text);
    pxvm_program_free(&prog);
    pxvm_image_free(&img);
}

/* build-rows-limit: the builder makes program images of up to 65535 rows, no more. */
TEST(mutants_builder_rows_end_at_65535)
{
    for (int extra = 0; extra <= 1; extra++) {
        pxvm_builder b;
        pxvm_build_init(&b, 16);
        pxvm_image d;
        pxvm_image_alloc(&d, 1, 65534 + extra, NULL);
        pxvm_build_data_slot(&b, "d", &d);
        pxvm_image_free(&d);
        pxvm_build_insn(&b, PX_OP_HALT, NULL);
        pxvm_image img = {0, 0, NULL};
        pxvm_error err;
        int rc = pxvm_build_finish(&b, &img, &err);
        pxvm_build_free(&b);
        if (extra) {
            CHECK(rc < 0);
            CHECK_STR(err.msg, "65535");
        } else {
            CHECK_EQ(rc, 0);
            CHECK_EQ(img.h, 65535);
        }
        pxvm_image_free(&img);
    }
}

/* api-batch-max, api-slot-info: a runner holds 1..65535 items; slots are 0..count-1. */
TEST(mutants_api_batch_and_slot_edges)
{
    pxvm_prog *p = NULL;
    CHECK(pxvm_prog_assemble(".slot out output 1x1\nHALT\n", "e.pxs", NULL, &p) == 0);
    if (!p)
        return;
    pxvm_slot_info info;
    int n = pxvm_prog_slot_count(p);
    CHECK_EQ(n, 2);
    CHECK(pxvm_prog_slot(p, n - 1, &info) == 0 && !strcmp(info.name, "out"));
    CHECK(pxvm_prog_slot(p, n, &info) != 0);
    CHECK(pxvm_errclass() == PXVM_USAGE);
    pxvm_runner *r = NULL;
    CHECK(pxvm_runner_open(p, "cpu", 0, 1, 65536, &r) != 0 && !r);
    CHECK_STR(pxvm_errmsg(), "65535");
    CHECK(pxvm_runner_open(p, "cpu", 0, 1, 65535, &r) == 0 && r);
    if (r)
        CHECK_EQ(pxvm_runner_batch(r), 65535);
    pxvm_runner_close(r);
    pxvm_prog_free(p);
}

/* disasm-persistent: a program with persistent slots disassembles to source that reassembles to
 * the same pixels (the flag printed). */
TEST(mutants_disassembly_of_persistent_slots_roundtrips)
{
    pxvm_program prog;
    if (px__relative_video(&prog) < 0)
        return;
    char *text = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&text, &n);
    pxasm_disassemble(&prog, "video.pxi", f);
    fclose(f);
    CHECK_STR(text, "persistent");
    pxvm_limits lim;
    pxvm_limits_default(&lim);
    pxvm_image again = {0, 0, NULL};
    pxvm_error err;
    if (pxasm_assemble(text, n, "video.pxs", &lim, &again, &err) < 0) {
        px_test_fail(__FILE__, __LINE__, "%s", err.msg);
    } else {
        CHECK(again.w == prog.image.w && again.h == prog.image.h);
        CHECK(again.w == prog.image.w && !memcmp(again.px, prog.image.px, (size_t)again.w * (size_t)again.h * 4u));
    }
    pxvm_image_free(&again);
    free(text);
    pxvm_program_free(&prog);
}
