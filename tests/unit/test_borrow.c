/* test_borrow.c - the lifetime of a borrow (pxvm_runner_borrow, pxvm_runner_exec): it ends when
 * the run that reads it returns, or when exec returns, whatever either returns; after that the
 * runner never reads the caller's memory: a run or a read of level 0 is refused as unbound. Each
 * case frees the caller's memory where a caller would, so a read of it is a use after free under
 * ASan and the wrong answer in a release build. */
#include <stdlib.h>
#include <string.h>

#include "../../include/pxvm.h"
#include "test.h"

/* PXVM_TEST_EXECUTOR=cuda runs these on the CUDA-GL executor (the GPU check) */
static const char *px__executor(void)
{
    const char *e = getenv("PXVM_TEST_EXECUTOR");
    return e && *e ? e : "cpu";
}

/* A fixation-relative plan: its runs need fixation register 0 set. */
static pxvm_runner *px__open_relative(pxvm_prog **prog, int batch)
{
    const char *plan = "{\"image\": [64, 48], \"fixation\": \"relative\", \"budget\": 8, \"scheme\": \"logpolar\","
                       " \"levels\": 3}";
    pxvm_runner *run = NULL;
    if (pxvm_prog_from_plan(plan, "relative.json", NULL, prog) || pxvm_runner_open(*prog, px__executor(), 0, 1, batch, &run))
        return NULL;
    return run;
}

static uint8_t *px__frame(int w, int h, unsigned seed)
{
    uint8_t *p = malloc((size_t)w * (size_t)h * 4);
    for (size_t i = 0; p && i < (size_t)w * (size_t)h * 4; i++)
        p[i] = (uint8_t)((i * 2654435761u + seed) >> 7);
    return p;
}

TEST(borrow_a_failed_exec_leaves_its_input_unbound)
{
    pxvm_prog *prog = NULL;
    pxvm_runner *run = px__open_relative(&prog, 1);
    CHECK(run != NULL);
    int image = pxvm_prog_slot_find(prog, "image");
    uint8_t *px = px__frame(64, 48, 1);
    pxvm_view in = pxvm_view_host(px, 64, 48, 4);
    /* no fixation set: the run inside exec is refused after the bind */
    CHECK_EQ(pxvm_runner_exec(run, 1, &image, NULL, &in, 0, NULL, NULL, NULL), PXVM_UNLINKABLE);
    CHECK_STR(pxvm_errmsg(), "fixation");
    free(px);
    double xy[2] = {0.5, 0.5};
    CHECK_EQ(pxvm_runner_set_fixations_normalized(run, 0, 1, 0, 1, xy), 0);
    CHECK_EQ(pxvm_runner_run(run), PXVM_UNLINKABLE); /* was: a run over the freed frame */
    CHECK_STR(pxvm_errmsg(), "input slot 1 ('image') is not bound");
    uint8_t lv0[64 * 48 * 4];
    pxvm_view rv = pxvm_view_host(lv0, 64, 48, 4);
    CHECK_EQ(pxvm_runner_read(run, image, 0, 0, &rv), PXVM_UNLINKABLE);
    /* bound again, it runs */
    uint8_t *px2 = px__frame(64, 48, 2);
    pxvm_view in2 = pxvm_view_host(px2, 64, 48, 4);
    CHECK_EQ(pxvm_runner_bind(run, image, 0, &in2), 0);
    CHECK_EQ(pxvm_runner_run(run), 0);
    free(px2);
    pxvm_runner_close(run);
    pxvm_prog_free(prog);
}

TEST(borrow_ends_when_exec_returns)
{
    pxvm_prog *prog = NULL;
    pxvm_runner *run = px__open_relative(&prog, 1);
    CHECK(run != NULL);
    int image = pxvm_prog_slot_find(prog, "image"), atlas = pxvm_prog_slot_find(prog, "atlas");
    double xy[2] = {0.25, 0.75};
    CHECK_EQ(pxvm_runner_set_fixations_normalized(run, 0, 1, 0, 1, xy), 0);
    pxvm_slot_info si;
    CHECK_EQ(pxvm_prog_slot(prog, atlas, &si), 0);
    int pw = si.patch_w, ph = si.patch_h, n = si.patch_count;
    size_t pbytes = (size_t)pw * (size_t)ph * (size_t)n * 4;
    uint8_t *a = malloc(pbytes), *b = malloc(pbytes);
    pxvm_view out = pxvm_view_host(a, pw, ph * n, 4);
    int kind = 1;
    uint8_t *px = px__frame(64, 48, 3);
    pxvm_view in = pxvm_view_host(px, 64, 48, 4);
    CHECK_EQ(pxvm_runner_exec(run, 1, &image, NULL, &in, 1, &atlas, &kind, &out), 0);
    free(px);
    CHECK_EQ(pxvm_runner_run(run), PXVM_UNLINKABLE); /* was: a run over the freed frame */
    CHECK_STR(pxvm_errmsg(), "is not bound");
    /* the same frame copied by a bind gives the same patches as the borrow did */
    px = px__frame(64, 48, 3);
    in.data = px;
    CHECK_EQ(pxvm_runner_bind(run, image, 0, &in), 0);
    memset(px, 0, 64 * 48 * 4);
    out.data = b;
    CHECK_EQ(pxvm_runner_run(run), 0);
    CHECK_EQ(pxvm_runner_read_patches(run, atlas, 0, &out), 0);
    CHECK(!memcmp(a, b, pbytes));
    free(px), free(a), free(b);
    pxvm_runner_close(run);
    pxvm_prog_free(prog);
}

TEST(borrow_ends_with_the_run_that_reads_it_even_a_failed_one)
{
    pxvm_prog *prog = NULL;
    pxvm_runner *run = px__open_relative(&prog, 2);
    CHECK(run != NULL);
    int image = pxvm_prog_slot_find(prog, "image");
    uint8_t *px = px__frame(64, 48, 4);
    pxvm_view in = pxvm_view_host(px, 64, 48, 4);
    in.items = 2, in.item_stride = 0;
    CHECK_EQ(pxvm_runner_borrow(run, image, 0, &in), 0);
    CHECK_EQ(pxvm_runner_run(run), PXVM_UNLINKABLE); /* no fixations: refused, and the borrow ends */
    free(px);
    double xy[4] = {0.5, 0.5, 0.5, 0.5};
    CHECK_EQ(pxvm_runner_set_fixations_normalized(run, 0, 2, 0, 1, xy), 0);
    CHECK_EQ(pxvm_runner_run(run), PXVM_UNLINKABLE);
    CHECK_STR(pxvm_errmsg(), "is not bound");
    /* a bind of item 0 after a borrow of both leaves item 1 unbound, never a copy of the borrow */
    px = px__frame(64, 48, 5);
    in.data = px, in.items = 1;
    CHECK_EQ(pxvm_runner_borrow(run, image, 0, &in), 0);
    CHECK_EQ(pxvm_runner_borrow(run, image, 1, &in), 0);
    CHECK_EQ(pxvm_runner_run(run), 0);
    CHECK_EQ(pxvm_runner_bind(run, image, 0, &in), 0);
    free(px);
    CHECK_EQ(pxvm_runner_run(run), PXVM_UNLINKABLE);
    pxvm_runner_close(run);
    pxvm_prog_free(prog);
}

TEST(borrow_kept_lasts_until_the_next_bind_and_a_failed_exec_still_ends_it)
{
    pxvm_prog *prog = NULL;
    pxvm_runner *run = px__open_relative(&prog, 1);
    CHECK(run != NULL);
    CHECK_EQ(pxvm_runner_keep_borrows(run, 2), PXVM_USAGE);
    CHECK_EQ(pxvm_runner_keep_borrows(run, 1), 0);
    int image = pxvm_prog_slot_find(prog, "image");
    uint8_t *px = px__frame(64, 48, 6), lv0[64 * 48 * 4];
    pxvm_view in = pxvm_view_host(px, 64, 48, 4), rv = pxvm_view_host(lv0, 64, 48, 4);
    /* refused (no fixation): ended all the same */
    CHECK_EQ(pxvm_runner_exec(run, 1, &image, NULL, &in, 0, NULL, NULL, NULL), PXVM_UNLINKABLE);
    CHECK_EQ(pxvm_runner_read(run, image, 0, 0, &rv), PXVM_UNLINKABLE);
    double xy[2] = {0.5, 0.5};
    CHECK_EQ(pxvm_runner_set_fixations_normalized(run, 0, 1, 0, 1, xy), 0);
    CHECK_EQ(pxvm_runner_run(run), PXVM_UNLINKABLE);
    /* succeeded: kept, so a run and a read of level 0 read the image again (the memory itself where
     * the executor reads it in place: the CPU; a copy of it on the GPU) */
    CHECK_EQ(pxvm_runner_exec(run, 1, &image, NULL, &in, 0, NULL, NULL, NULL), 0);
    CHECK_EQ(pxvm_runner_run(run), 0);
    CHECK_EQ(pxvm_runner_read(run, image, 0, 0, &rv), 0);
    CHECK(!memcmp(lv0, px, sizeof lv0));
    free(px);
    pxvm_runner_close(run);
    pxvm_prog_free(prog);
}

TEST(borrow_kept_ones_end_when_keep_goes_back_to_0_and_a_failed_exec_ends_only_its_own)
{
    pxvm_prog *prog = NULL;
    pxvm_runner *run = px__open_relative(&prog, 2);
    CHECK(run != NULL);
    int image = pxvm_prog_slot_find(prog, "image"), atlas = pxvm_prog_slot_find(prog, "atlas");
    double xy[4] = {0.5, 0.5, 0.25, 0.25};
    CHECK_EQ(pxvm_runner_set_fixations_normalized(run, 0, 2, 0, 1, xy), 0);
    uint8_t *px = px__frame(64, 48, 7);
    pxvm_view in = pxvm_view_host(px, 64, 48, 4);
    /* borrowed while keep is 0, kept through a run once keep is 1, ended when keep goes back to 0 */
    CHECK_EQ(pxvm_runner_borrow(run, image, 0, &in), 0);
    CHECK_EQ(pxvm_runner_borrow(run, image, 1, &in), 0);
    CHECK_EQ(pxvm_runner_keep_borrows(run, 1), 0);
    CHECK_EQ(pxvm_runner_run(run), 0);
    CHECK_EQ(pxvm_runner_keep_borrows(run, 0), 0);
    CHECK_EQ(pxvm_runner_run(run), PXVM_UNLINKABLE); /* was: a run over the memory kept */
    CHECK_STR(pxvm_errmsg(), "is not bound");
    /* kept: an exec of both items, then a failed exec of item 0 alone: item 1 stays bound */
    CHECK_EQ(pxvm_runner_keep_borrows(run, 1), 0);
    int slots[2] = {image, image}, items[2] = {0, 1};
    pxvm_view ins[2] = {in, in};
    CHECK_EQ(pxvm_runner_exec(run, 2, slots, items, ins, 0, NULL, NULL, NULL), 0);
    uint8_t small[16 * 16 * 4];
    pxvm_view bad = pxvm_view_host(small, 16, 16, 4); /* not the atlas's patches: the read fails */
    int kind = 1;
    CHECK_EQ(pxvm_runner_exec(run, 1, slots, items, ins, 1, &atlas, &kind, &bad), PXVM_USAGE);
    uint8_t lv0[64 * 48 * 4];
    pxvm_view rv = pxvm_view_host(lv0, 64, 48, 4);
    CHECK_EQ(pxvm_runner_read(run, image, 0, 0, &rv), PXVM_UNLINKABLE); /* its own borrow ended */
    CHECK_EQ(pxvm_runner_read(run, image, 0, 1, &rv), 0);               /* the kept one did not */
    CHECK(!memcmp(lv0, px, sizeof lv0));
    free(px);
    pxvm_runner_close(run);
    pxvm_prog_free(prog);
}
