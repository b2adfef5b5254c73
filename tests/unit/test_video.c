/* test_video.c - DIFF, UPDATE, dirty rectangles and restarts with explicit values; validation of
 * the video operands; and random frame sequences where incremental == full recompute
 * (tests/conformance/video.c) on the CPU executor. */
#include <stdlib.h>

#include "../../isa/px_sem.h"
#include "../conformance/cases.h"
#include "test.h"

/* frame 40x20 -> cur (persistent) with a 3x2 tile mask: DIFF threshold T, UPDATE. */
static int px__diff_program(int threshold, pxvm_program *prog)
{
    pxvm_builder b;
    pxvm_build_init(&b, 32);
    int frame = pxvm_build_slot(&b, PXI_ROLE_INPUT, "frame", 40, 20);
    int cur = pxvm_build_slot(&b, PXI_ROLE_OUTPUT, "cur", 40, 20);
    int mask = pxvm_build_slot(&b, PXI_ROLE_OUTPUT, "mask", 3, 2);
    pxvm_build_persist(&b, cur);
    int32_t f[PXI_MAX_FIELDS] = {0};
    f[PX_FI(DIFF, frame)] = frame, f[PX_FI(DIFF, cur)] = cur, f[PX_FI(DIFF, mask)] = mask;
    f[PX_FI(DIFF, threshold)] = threshold;
    pxvm_build_insn(&b, PX_OP_DIFF, f);
    memset(f, 0, sizeof f);
    f[PX_FI(UPDATE, frame)] = frame, f[PX_FI(UPDATE, cur)] = cur, f[PX_FI(UPDATE, mask)] = mask;
    pxvm_build_insn(&b, PX_OP_UPDATE, f);
    pxvm_build_insn(&b, PX_OP_HALT, NULL);
    return px_build_program(&b, prog);
}

static uint32_t px__mask_bits(const pxvm_program *prog, pxvm_executor *ex)
{
    pxvm_image m = px_read(prog, ex, 3, 0);
    uint32_t bits = 0;
    for (int i = 0; i < 6; i++)
        bits |= (px_px(&m, i % 3, i / 3) == 0xFF0000FFu ? 1u : 0u) << i; /* (255, 0, 0, 255) */
    pxvm_image_free(&m);
    return bits;
}

TEST(video_diff_update_threshold_rectangles_and_restart)
{
    for (int t = 4; t <= 5; t++) {
        pxvm_program prog;
        pxvm_executor *ex;
        pxvm_error err;
        pxvm_run_options ro = {.max_steps = 1000};
        CHECK(px__diff_program(t, &prog) == 0);
        /* DIFF and UPDATE of the same slots: one pass over tiles for the executors */
        CHECK_EQ(prog.steps[0].tiles_fuse, 2);
        CHECK_EQ(prog.steps[1].tiles_fuse, 0);
        /* the mask is written whole by DIFF before anything reads it: no per-run clear; cur persists */
        CHECK_EQ(prog.reset[3], 0);
        CHECK_EQ(prog.reset[2], 0);
        CHECK(pxvm_cpu_executor.open(&ex, NULL, &err) == 0 && pxvm_cpu_executor.load(ex, &prog, 1, &err) == 0);
        uint64_t st = 9;
        pxvm_image a = px_random_image(40, 20, &st);
        CHECK(pxvm_bind_image(&pxvm_cpu_executor, ex, 1, &a, &err) == 0 && pxvm_cpu_executor.run(ex, &ro, &err) == 0);
        CHECK_EQ(px__mask_bits(&prog, ex), 0x3F); /* the first run: every tile */
        pxvm_image c = px_read(&prog, ex, 2, 0);
        CHECK(!memcmp(c.px, a.px, 40 * 20 * 4));
        pxvm_image_free(&c);
        /* a change of 5 in one channel of pixel (17, 3): tile (1, 0) */
        uint8_t *p = a.px + (3 * 40 + 17) * 4 + 2;
        *p = (uint8_t)(*p >= 5 ? *p - 5 : *p + 5);
        CHECK(pxvm_bind_image(&pxvm_cpu_executor, ex, 1, &a, &err) == 0 && pxvm_cpu_executor.run(ex, &ro, &err) == 0);
        CHECK_EQ(px__mask_bits(&prog, ex), t == 4 ? 0x02u : 0x00u);
        c = px_read(&prog, ex, 2, 0);
        CHECK_EQ(c.px[(3 * 40 + 17) * 4 + 2] == *p, t == 4); /* threshold 5: the old pixel stays */
        pxvm_image_free(&c);
        /* dirty rectangles instead of the comparison: (30, 15) 2x2 touches tiles (1, 0) and (1, 1) */
        pxvm_rect r = {30, 15, 2, 2};
        CHECK(pxvm_cpu_executor.set_dirty(ex, 0, &r, 1, &err) == 0 && pxvm_cpu_executor.run(ex, &ro, &err) == 0);
        CHECK_EQ(px__mask_bits(&prog, ex), 0x12u);
        CHECK(pxvm_cpu_executor.run(ex, &ro, &err) == 0); /* the rectangles were for one run, and */
        CHECK_EQ(px__mask_bits(&prog, ex), 0x00u); /* tile (1, 0) was copied whole: cur == frame */
        CHECK(pxvm_cpu_executor.set_dirty(ex, 0, &r, 0, &err) == 0 && pxvm_cpu_executor.run(ex, &ro, &err) == 0);
        CHECK_EQ(px__mask_bits(&prog, ex), 0x00u); /* "nothing changed" */
        CHECK(pxvm_cpu_executor.reset(ex, &err) == 0 && pxvm_cpu_executor.run(ex, &ro, &err) == 0);
        CHECK_EQ(px__mask_bits(&prog, ex), 0x3F); /* restarted: every tile again */
        pxvm_rect many[PXVM_MAX_RECTS + 1];
        memset(many, 0, sizeof many);
        CHECK(pxvm_cpu_executor.set_dirty(ex, 0, many, PXVM_MAX_RECTS + 1, &err) < 0);
        CHECK_STR(err.msg, "a run takes 0..256");
        pxvm_image_free(&a);
        pxvm_cpu_executor.close(ex);
        pxvm_program_free(&prog);
    }
}

TEST(video_validation_names_the_rule)
{
    static const char *const bad[] = {
        ".slot frame input 40x20\n.slot cur scratch 40x20 persistent\n.slot mask scratch 3x1\nDIFF frame cur mask 0\nHALT\n",
        ".slot frame input 40x20 persistent\nHALT\n",
        ".slot frame input 40x20\n.slot mask scratch 3x2\n.slot a output 4x4 patches=4x4x1\n"
        "SAMPLE frame a mask=mask w=4 h=4 cu=0 cv=0 du=1 dv=1\nHALT\n",
        ".slot frame input 40x20\n.slot mask scratch 3x2\n.slot t scratch 3x1\n.slot a output 1x1 persistent\n"
        "GATHER frame a mask=mask w=1 h=1 table=t\nHALT\n",
        ".slot frame input 40x20\n.slot cur scratch 40x20 persistent\nDIFF frame cur cur 0\nHALT\n",
        ".slot frame input 40x20\n.slot cur scratch 40x20\n.slot mask scratch 3x2\nUPDATE frame cur mask\nHALT\n",
    };
    static const char *const want[] = {"tile mask mask is 3x1; slot cur (40x20) has 3x2 tiles of 16x16",
                                       "only output and scratch slots can be persistent",
                                       "which is not persistent: the patches it skips would not keep their bytes",
                                       "an incremental GATHER needs its table in a data slot", "the mask must be a slot of its own",
                                       "(UPDATE): updates slot cur, which is not persistent"};
    pxvm_limits lim;
    pxvm_limits_default(&lim);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char src[600];
        snprintf(src, sizeof src, ".width 16\n%s", bad[i]);
        pxvm_image img;
        pxvm_error err;
        memset(&err, 0, sizeof err);
        extern int pxasm_assemble(const char *, size_t, const char *, const pxvm_limits *, pxvm_image *, pxvm_error *);
        if (pxasm_assemble(src, strlen(src), "v.pxs", &lim, &img, &err) == 0)
            pxvm_image_free(&img);
        if (!strstr(err.msg, want[i]))
            px_test_fail(__FILE__, __LINE__, "case %zu: '%s' lacks '%s'", i, err.msg, want[i]);
    }
}

TEST(video_random_sequences_incremental_equals_full_recompute)
{
    px_golden_stats st = {0};
    long t0 = px_video_tokens, s0 = px_video_sampled;
    for (uint64_t seed = 1; seed <= 120; seed++) {
        px_video_case v;
        char why[1024] = "";
        CHECK(px_video_make(seed, &v) == 1);
        CHECK(px_video_check(&pxvm_cpu_executor, NULL, &v, &st, why, sizeof why) == 0);
        if (st.differences)
            px_test_fail(__FILE__, __LINE__, "%s", why);
        px_video_case_free(&v);
        if (st.differences)
            break;
    }
    /* the property is about skipping: a good share of the tokens must have been skipped */
    long tokens = px_video_tokens - t0, sampled = px_video_sampled - s0;
    CHECK(tokens > 1000 && sampled < tokens * 9 / 10 && sampled > tokens / 10);
}

/* A masked SAMPLE whose destination another SAMPLE also writes: when its footprint holds a dirty
 * tile it samples (SPEC 7) every pixel, so its patch equals the one an unmasked SAMPLE writes,
 * even where the other instruction wrote last (an executor that samples again only the pixels
 * reaching a dirty tile may do so only for a destination nothing else writes: `sole`). */
static int px__overlap_program(int masked, int overlap, pxvm_program *prog)
{
    char src[900];
    snprintf(src, sizeof src,
             ".width 16\n.slot frame input 64x32\n.slot cur scratch 64x32 persistent\n.slot mask scratch 4x2\n"
             ".slot a output 40x16 persistent\nDIFF frame cur mask 0\nUPDATE frame cur mask\n"
             "SAMPLE src=cur dst=a dst_x=0 dst_y=0 w=16 h=16 cu=40 cv=8 du=1 dv=1\n"
             "SAMPLE src=cur dst=a dst_x=%d dst_y=0 w=16 h=16 cu=16 cv=8 du=1 dv=1%s\nHALT\n",
             overlap ? 8 : 24, masked ? " mask=mask" : "");
    pxvm_limits lim;
    pxvm_limits_default(&lim);
    pxvm_image img;
    pxvm_error err;
    extern int pxasm_assemble(const char *, size_t, const char *, const pxvm_limits *, pxvm_image *, pxvm_error *);
    if (pxasm_assemble(src, strlen(src), "o.pxs", &lim, &img, &err) < 0)
        return -1;
    return pxvm_program_from_image(&img, &lim, prog, &err);
}

TEST(video_masked_sample_over_another_writer_samples_every_pixel)
{
    pxvm_program inc, ref, alone;
    CHECK(px__overlap_program(1, 1, &inc) == 0 && px__overlap_program(0, 1, &ref) == 0 && px__overlap_program(1, 0, &alone) == 0);
    CHECK(inc.insn_box[3].sole == 0 && alone.insn_box[3].sole == 1); /* instruction 3: the masked SAMPLE */
    pxvm_executor *ei, *er;
    pxvm_error err;
    pxvm_run_options ro = {.max_steps = 1000};
    CHECK(pxvm_cpu_executor.open(&ei, NULL, &err) == 0 && pxvm_cpu_executor.load(ei, &inc, 1, &err) == 0);
    CHECK(pxvm_cpu_executor.open(&er, NULL, &err) == 0 && pxvm_cpu_executor.load(er, &ref, 1, &err) == 0);
    uint64_t st = 5;
    pxvm_image f = px_random_image(64, 32, &st);
    for (int frame = 0; frame < 2; frame++) {
        if (frame == 1) /* one texel of tile (1, 0): in the masked patch's box, but its left half reads tile 0 only */
            f.px[(4 * 64 + 20) * 4] ^= 0x40;
        CHECK(pxvm_bind_image(&pxvm_cpu_executor, ei, 1, &f, &err) == 0 && pxvm_cpu_executor.run(ei, &ro, &err) == 0);
        CHECK(pxvm_bind_image(&pxvm_cpu_executor, er, 1, &f, &err) == 0 && pxvm_cpu_executor.run(er, &ro, &err) == 0);
        pxvm_image a = px_read(&inc, ei, 4, 0), b = px_read(&ref, er, 4, 0);
        CHECK(!memcmp(a.px, b.px, 40u * 16u * 4u));
        pxvm_image_free(&a), pxvm_image_free(&b);
    }
    pxvm_image_free(&f);
    pxvm_cpu_executor.close(ei), pxvm_cpu_executor.close(er);
    pxvm_program_free(&inc), pxvm_program_free(&ref), pxvm_program_free(&alone);
}

/* Ownership is decided in about n log n: fetches packed into one destination row past the budget
 * of comparisons all count as sharing (exact either way: they are then sampled whole). */
TEST(video_sole_destinations_packed_rows_give_up_conservatively)
{
    enum { N = 3000 };
    size_t cap = 300 + (size_t)N * 90;
    char *src = malloc(cap);
    CHECK(src != NULL);
    int at = snprintf(src, cap, ".width 64\n.slot frame input 64x32\n.slot cur scratch 64x32 persistent\n"
                                ".slot mask scratch 4x2\n.slot a output %dx1 persistent\nDIFF frame cur mask 0\n"
                                "UPDATE frame cur mask\n", N);
    for (int i = 0; i < N; i++)
        at += snprintf(src + at, cap - (size_t)at, "SAMPLE src=cur dst=a dst_x=%d dst_y=0 w=1 h=1 cu=8 cv=8 du=1 dv=1 mask=mask\n", i);
    snprintf(src + at, cap - (size_t)at, "HALT\n");
    pxvm_limits lim;
    pxvm_limits_default(&lim);
    pxvm_image img;
    pxvm_error err;
    pxvm_program prog;
    extern int pxasm_assemble(const char *, size_t, const char *, const pxvm_limits *, pxvm_image *, pxvm_error *);
    CHECK(pxasm_assemble(src, strlen(src), "packed.pxs", &lim, &img, &err) == 0);
    CHECK(pxvm_program_from_image(&img, &lim, &prog, &err) == 0);
    int sole = 0;
    for (uint32_t i = 2; i < 2 + N; i++)
        sole += prog.insn_box[i].sole;
    CHECK_EQ(sole, 0);
    pxvm_program_free(&prog);
    free(src);
}

/* SPEC 7, DIFF: a tile's texels are all of it, its last pixel row and column included, and those
 * of the partial tiles at the right and bottom edges (40x20: tiles 16, 16, 8 wide, 16, 4 high).
 * One byte changes at a time; the mask must name exactly its tile. */
TEST(video_diff_sees_the_last_row_and_column_of_every_tile)
{
    static const struct {
        int x, y, ch, bits;
    } change[] = {
        {5, 15, 0, 0x01},  /* the last pixel row of tile row 0 */
        {15, 15, 3, 0x01}, /* the last row and column of tile (0, 0), in A */
        {31, 3, 1, 0x02},  /* the last column of tile (1, 0) */
        {39, 7, 2, 0x04},  /* the image's last column: partial tile (2, 0) */
        {39, 19, 0, 0x20}, /* the last column and row: tile (2, 1) */
        {20, 19, 1, 0x10}, /* the image's last row: partial tile row 1 */
        {16, 16, 0, 0x10}, /* the first texel of tile (1, 1) */
    };
    pxvm_program prog;
    pxvm_executor *ex;
    pxvm_error err;
    pxvm_run_options ro = {.max_steps = 1000};
    CHECK(px__diff_program(0, &prog) == 0);
    CHECK(pxvm_cpu_executor.open(&ex, NULL, &err) == 0 && pxvm_cpu_executor.load(ex, &prog, 1, &err) == 0);
    uint64_t st = 21;
    pxvm_image a = px_random_image(40, 20, &st);
    CHECK(pxvm_bind_image(&pxvm_cpu_executor, ex, 1, &a, &err) == 0 && pxvm_cpu_executor.run(ex, &ro, &err) == 0);
    for (size_t k = 0; k < sizeof change / sizeof change[0]; k++) {
        a.px[((size_t)change[k].y * 40 + (size_t)change[k].x) * 4 + (size_t)change[k].ch] ^= 1;
        CHECK(pxvm_bind_image(&pxvm_cpu_executor, ex, 1, &a, &err) == 0 && pxvm_cpu_executor.run(ex, &ro, &err) == 0);
        uint32_t bits = px__mask_bits(&prog, ex);
        if (bits != (uint32_t)change[k].bits)
            px_test_fail(__FILE__, __LINE__, "a change at (%d, %d) marks tiles 0x%02x, not 0x%02x", change[k].x, change[k].y,
                         bits, change[k].bits);
        pxvm_image c = px_read(&prog, ex, 2, 0); /* and UPDATE copied the tile: cur == frame */
        CHECK(!memcmp(c.px, a.px, 40 * 20 * 4));
        pxvm_image_free(&c);
    }
    pxvm_image_free(&a);
    pxvm_cpu_executor.close(ex);
    pxvm_program_free(&prog);
}

/* SPEC 7, DIFF with rectangles: (x, y, w, h) touches tile t exactly when x < 16tx + 16,
 * 16tx < x + w (likewise y) and w, h >= 1: a rectangle starting at 16k marks tile k and not
 * k - 1, one ending at 16k marks tile k - 1 and not k. */
TEST(video_dirty_rectangles_at_tile_boundaries)
{
    static const struct {
        pxvm_rect r;
        int bits;
    } cases[] = {
        {{16, 0, 1, 1}, 0x02},  /* starts at x = 16: tile 1 only */
        {{0, 0, 16, 1}, 0x01},  /* ends at x = 16: tile 0 only */
        {{32, 0, 8, 1}, 0x04},  /* starts at x = 32: the partial tile 2 */
        {{15, 0, 2, 1}, 0x03},  /* 15 and 16: tiles 0 and 1 */
        {{0, 16, 1, 1}, 0x08},  /* starts at y = 16: tile row 1 only */
        {{0, 0, 1, 16}, 0x01},  /* ends at y = 16: tile row 0 only */
        {{31, 15, 2, 2}, 0x36}, /* the corner of four tiles: (1, 0), (2, 0), (1, 1), (2, 1) */
        {{16, 16, 0, 4}, 0x00}, /* empty: nothing */
        {{16, 16, 4, 0}, 0x00},
    };
    pxvm_program prog;
    pxvm_executor *ex;
    pxvm_error err;
    pxvm_run_options ro = {.max_steps = 1000};
    CHECK(px__diff_program(0, &prog) == 0);
    CHECK(pxvm_cpu_executor.open(&ex, NULL, &err) == 0 && pxvm_cpu_executor.load(ex, &prog, 1, &err) == 0);
    uint64_t st = 23;
    pxvm_image a = px_random_image(40, 20, &st);
    CHECK(pxvm_bind_image(&pxvm_cpu_executor, ex, 1, &a, &err) == 0 && pxvm_cpu_executor.run(ex, &ro, &err) == 0);
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        CHECK(pxvm_cpu_executor.set_dirty(ex, 0, &cases[k].r, 1, &err) == 0 && pxvm_cpu_executor.run(ex, &ro, &err) == 0);
        uint32_t bits = px__mask_bits(&prog, ex);
        if (bits != (uint32_t)cases[k].bits)
            px_test_fail(__FILE__, __LINE__, "rectangle %d,%d %dx%d marks tiles 0x%02x, not 0x%02x", cases[k].r.x, cases[k].r.y,
                         cases[k].r.w, cases[k].r.h, bits, cases[k].bits);
    }
    pxvm_image_free(&a);
    pxvm_cpu_executor.close(ex);
    pxvm_program_free(&prog);
}

/* SPEC 7: an incremental GATHER's footprint spans the levels of all its entries, not only its
 * token's (the centre entry's). Entry 1, the centre, reads level 0 at (4.5, 4.5), tile (0, 0);
 * entry 0 reads there too, but at level 6 (1x1: the whole 64x64 frame). A change in tile (3, 3)
 * alone must make the GATHER sample again, giving the bytes a full recompute gives. */
TEST(video_gather_footprint_spans_the_levels_of_every_entry)
{
    pxvm_program inc, full;
    pxvm_executor *ei, *ef;
    pxvm_error err;
    pxvm_run_options ro = {.max_steps = 100};
    CHECK(px_gather_video_program(1, 4, 6u * 256u, &inc) == 0 && px_gather_video_program(0, 4, 6u * 256u, &full) == 0);
    CHECK(pxvm_cpu_executor.open(&ei, NULL, &err) == 0 && pxvm_cpu_executor.load(ei, &inc, 1, &err) == 0);
    CHECK(pxvm_cpu_executor.open(&ef, NULL, &err) == 0 && pxvm_cpu_executor.load(ef, &full, 1, &err) == 0);
    uint64_t st = 31;
    pxvm_image fr = px_random_image(64, 64, &st);
    for (int n = 0; n < 3; n++) {
        if (n == 1) /* tile (3, 3) white: only level 6 of entry 0 reaches it */
            for (int y = 48; y < 64; y++)
                memset(fr.px + ((size_t)y * 64 + 48) * 4u, 255, 16 * 4);
        CHECK(pxvm_bind_image(&pxvm_cpu_executor, ei, 1, &fr, &err) == 0 && pxvm_cpu_executor.run(ei, &ro, &err) == 0);
        CHECK(pxvm_bind_image(&pxvm_cpu_executor, ef, 1, &fr, &err) == 0 && pxvm_cpu_executor.run(ef, &ro, &err) == 0);
        uint8_t changed = 9;
        CHECK(pxvm_cpu_executor.read_state(ei, PXVM_STATE_CHANGED, 4, 0, 1, &changed, -1, &err) == 0);
        CHECK_EQ(changed, n < 2); /* sampled on the first frame and on the change; then kept */
        pxvm_image a = px_read(&inc, ei, 4, 0), b = px_read(&full, ef, 4, 0);
        CHECK(!memcmp(a.px, b.px, 2 * 4));
        pxvm_image_free(&a), pxvm_image_free(&b);
    }
    pxvm_image_free(&fr);
    pxvm_cpu_executor.close(ei), pxvm_cpu_executor.close(ef);
    pxvm_program_free(&inc), pxvm_program_free(&full);
}
