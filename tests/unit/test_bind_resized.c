/* test_bind_resized.c - pxvm_runner_bind_resized: a policy's resize where the executor keeps its
 * data, then the bind. Its level 0 is byte for byte the host's pxvm_image_fit_channels of each
 * item (every policy kind it takes, channels 1, 3, 4, a planar view, a batch of two), and what it
 * refuses it names. PXVM_TEST_EXECUTOR=cuda runs it on the GPU (the GPU check). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../include/pxvm.h"
#include "test.h"

static const char *px__executor(void)
{
    const char *e = getenv("PXVM_TEST_EXECUTOR");
    return e && *e ? e : "cpu";
}

static void px__fill(uint8_t *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)(((i * 2654435761u + seed * 40503u) >> 9) ^ (i / 97));
}

/* Level 0 of slot `slot` of item `item` after bind_resized == the host's fit of that item. */
static void px__compare(pxvm_runner *run, int slot, int item, const uint8_t *px, int w, int h, int c, int ow, int oh,
                        const char *policy)
{
    uint8_t *want = NULL, *got = malloc((size_t)ow * (size_t)oh * 4);
    if (pxvm_image_fit_channels(px, w, h, c, ow, oh, policy, &want)) {
        px_test_fail(__FILE__, __LINE__, "host fit %s: %s", policy, pxvm_errmsg());
        free(got);
        return;
    }
    pxvm_view rv = pxvm_view_host(got, ow, oh, 4);
    int rc = pxvm_runner_read(run, slot, 0, item, &rv);
    CHECK_EQ(rc, 0);
    size_t n = (size_t)ow * (size_t)oh * 4, first = n;
    for (size_t i = 0; i < n && first == n; i++)
        if (got[i] != want[i])
            first = i;
    if (!rc && first != n)
        px_test_fail(__FILE__, __LINE__, "%s, %dx%d x%d -> %dx%d, item %d: byte %zu is %d, the host's %d", policy, w, h,
                     c, ow, oh, item, first, got[first], want[first]);
    pxvm_free(want);
    free(got);
}

TEST(bind_resized_equals_the_host_policy_on_every_kind)
{
    static const char *policies[] = {"stretch:bicubic", "stretch:lanczos", "fit:bilinear:10,20,30,40", "fit:nearest",
                                     "stretch:box", "fit:hamming:ff8000", "crop", "crop:short=40:bilinear",
                                     "crop:nearest:short=100"};
    static const int sizes[][2] = {{97, 61}, {13, 200}, {64, 48}, {1, 1}, {300, 7}};
    pxvm_prog *prog = NULL;
    pxvm_runner *run = NULL;
    const char *plan = "{\"image\": [64, 48], \"scheme\": \"uniform\", \"patch\": 16}";
    if (pxvm_prog_from_plan(plan, "u.json", NULL, &prog) || pxvm_runner_open(prog, px__executor(), 0, 1, 2, &run)) {
        px_test_fail(__FILE__, __LINE__, "%s", pxvm_errmsg());
        pxvm_prog_free(prog);
        return;
    }
    int slot = pxvm_prog_slot_find(prog, "image");
    for (size_t p = 0; p < sizeof policies / sizeof policies[0]; p++)
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
            for (int c = 1; c <= 4; c++) {
                if (c == 2)
                    continue;
                int w = sizes[s][0], h = sizes[s][1];
                size_t one = (size_t)w * (size_t)h * (size_t)c;
                uint8_t *px = malloc(one * 2);
                px__fill(px, one * 2, (unsigned)(p * 31 + s * 7 + (size_t)c));
                pxvm_view v = pxvm_view_host(px, w, h, c);
                v.items = 2, v.item_stride = (int64_t)one;
                CHECK_EQ(pxvm_runner_bind_resized(run, slot, 0, &v, policies[p], 0, 0), 0);
                px__compare(run, slot, 0, px, w, h, c, 64, 48, policies[p]);
                px__compare(run, slot, 1, px + one, w, h, c, 64, 48, policies[p]);
                /* the same image as planes (C, H, W): the same bytes */
                uint8_t *planar = malloc(one);
                for (int y = 0; y < h; y++)
                    for (int x = 0; x < w; x++)
                        for (int k = 0; k < c; k++)
                            planar[(size_t)k * (size_t)w * (size_t)h + (size_t)y * (size_t)w + (size_t)x] =
                                px[((size_t)y * (size_t)w + (size_t)x) * (size_t)c + (size_t)k];
                pxvm_view pv = pxvm_view_host(planar, w, h, c);
                pv.px_stride = 1, pv.row_stride = w, pv.ch_stride = (int64_t)w * h;
                CHECK_EQ(pxvm_runner_bind_resized(run, slot, 1, &pv, policies[p], 0, 0), 0);
                px__compare(run, slot, 1, px, w, h, c, 64, 48, policies[p]);
                free(planar);
                free(px);
            }
    /* exact: the slot's size passes (a copy), another is refused naming both */
    uint8_t img[64 * 48 * 3];
    px__fill(img, sizeof img, 5);
    pxvm_view v = pxvm_view_host(img, 64, 48, 3);
    CHECK_EQ(pxvm_runner_bind_resized(run, slot, 0, &v, "exact", 0, 0), 0);
    px__compare(run, slot, 0, img, 64, 48, 3, 64, 48, "exact");
    v = pxvm_view_host(img, 63, 48, 3);
    CHECK_EQ(pxvm_runner_bind_resized(run, slot, 0, &v, "exact", 0, 0), PXVM_USAGE);
    CHECK_STR(pxvm_errmsg(), "63x48");
    pxvm_runner_close(run);
    pxvm_prog_free(prog);
}

TEST(bind_resized_refuses_what_it_cannot_do)
{
    pxvm_prog *prog = NULL, *any = NULL;
    pxvm_runner *run = NULL, *arun = NULL;
    if (pxvm_prog_from_plan("{\"image\": [64, 48], \"scheme\": \"uniform\", \"patch\": 16}", "u.json", NULL, &prog) ||
        pxvm_runner_open(prog, px__executor(), 0, 1, 1, &run) ||
        pxvm_prog_load("programs/foveate273_any.pxi", NULL, &any) ||
        pxvm_runner_open(any, px__executor(), 0, 1, 1, &arun)) {
        px_test_fail(__FILE__, __LINE__, "%s", pxvm_errmsg());
        goto out;
    }
    uint8_t img[40 * 30 * 4];
    px__fill(img, sizeof img, 9);
    pxvm_view v = pxvm_view_host(img, 40, 30, 4);
    int slot = pxvm_prog_slot_find(prog, "image");
    CHECK_EQ(pxvm_runner_bind_resized(run, slot, 0, &v, "dynamic", 0, 0), PXVM_USAGE);
    CHECK_STR(pxvm_errmsg(), "pxvm_runner_ragged");
    CHECK_EQ(pxvm_runner_bind_resized(run, slot, 0, &v, "native", 0, 0), PXVM_USAGE);
    CHECK_EQ(pxvm_runner_bind_resized(run, slot, 0, &v, "fit:sharp", 0, 0), PXVM_USAGE);
    CHECK_STR(pxvm_errmsg(), "fit:sharp");
    CHECK_EQ(pxvm_runner_bind_resized(run, slot, 0, &v, "stretch", 64, 47), PXVM_USAGE); /* not the slot's */
    CHECK_STR(pxvm_errmsg(), "64x47");
    CHECK_EQ(pxvm_runner_bind_resized(run, slot, 0, &v, "stretch", 64, 48), 0); /* the slot's, given */
    CHECK_EQ(pxvm_runner_bind_resized(run, 0, 0, &v, "stretch", 0, 0), PXVM_USAGE); /* the program slot */
    CHECK_EQ(pxvm_runner_bind_resized(run, slot, 1, &v, "stretch", 0, 0), PXVM_USAGE); /* item 1 of a batch of 1 */
    CHECK_EQ(pxvm_runner_bind_resized(run, slot, 0, NULL, "stretch", 0, 0), PXVM_USAGE);
    /* an any-size input: the size is the caller's, and then it takes it */
    int aslot = pxvm_prog_slot_find(any, "image");
    CHECK_EQ(pxvm_runner_bind_resized(arun, aslot, 0, &v, "fit", 0, 0), PXVM_USAGE);
    CHECK_STR(pxvm_errmsg(), "any-size");
    CHECK_EQ(pxvm_runner_bind_resized(arun, aslot, 0, &v, "fit:bicubic:0,0,0,255", 80, 50), 0);
    int w = 0, h = 0;
    CHECK_EQ(pxvm_runner_slot_size(arun, aslot, &w, &h), 0);
    CHECK_EQ(w, 80);
    CHECK_EQ(h, 50);
    px__compare(arun, aslot, 0, img, 40, 30, 4, 80, 50, "fit:bicubic:0,0,0,255");
out:
    pxvm_runner_close(run);
    pxvm_runner_close(arun);
    pxvm_prog_free(prog);
    pxvm_prog_free(any);
}

/* A refused size names its bind as px__bind's failures do (pxvm_last_error_info: the slot and the
 * first item), whether the slot is fixed (the size is not its one) or any-size (outside its
 * bounds, or another size than the batch's other items). */
TEST(bind_resized_names_the_slot_and_item_it_refuses)
{
    pxvm_prog *prog = NULL, *any = NULL;
    pxvm_runner *run = NULL, *arun = NULL;
    if (pxvm_prog_from_plan("{\"image\": [64, 48], \"scheme\": \"uniform\", \"patch\": 16}", "u.json", NULL, &prog) ||
        pxvm_runner_open(prog, px__executor(), 0, 1, 2, &run) ||
        pxvm_prog_load("programs/foveate273_any.pxi", NULL, &any) ||
        pxvm_runner_open(any, px__executor(), 0, 1, 2, &arun)) {
        px_test_fail(__FILE__, __LINE__, "%s", pxvm_errmsg());
        goto out;
    }
    uint8_t img[40 * 30 * 4];
    px__fill(img, sizeof img, 5);
    pxvm_view v = pxvm_view_host(img, 40, 30, 4);
    pxvm_error_info info;
    int slot = pxvm_prog_slot_find(prog, "image"), aslot = pxvm_prog_slot_find(any, "image");
    CHECK_EQ(pxvm_runner_bind_resized(run, slot, 1, &v, "stretch", 64, 47), PXVM_USAGE); /* not the slot's size */
    CHECK(pxvm_last_error_info(&info) == 0 && info.slot == slot && info.item == 1);
    CHECK_EQ(pxvm_runner_bind_resized(arun, aslot, 1, &v, "stretch", 16385, 16), PXVM_UNLINKABLE); /* the bound + 1 */
    CHECK(pxvm_last_error_info(&info) == 0 && info.slot == aslot && info.item == 1);
    CHECK_EQ(pxvm_runner_bind_resized(arun, aslot, 0, &v, "stretch", 16384, 16), 0); /* the bound itself */
    CHECK_EQ(pxvm_runner_bind_resized(arun, aslot, 1, &v, "fit", 100, 100), PXVM_UNLINKABLE); /* item 0's size differs */
    CHECK(pxvm_last_error_info(&info) == 0 && info.slot == aslot && info.item == 1);
out:
    pxvm_runner_close(run);
    pxvm_runner_close(arun);
    pxvm_prog_free(prog);
    pxvm_prog_free(any);
}

/* An any-size input's bounds (16..16384 for foveate273_any) and the batch's one size are checked
 * before the resize: a size refused costs no resize and no scratch of its size (2^24 x 2^24 was
 * a 4 PiB scratch, refused as out of memory instead of naming the bounds), and changes nothing. */
TEST(bind_resized_checks_an_any_size_slots_bounds_before_the_resize)
{
    pxvm_prog *any = NULL;
    pxvm_runner *run = NULL;
    if (pxvm_prog_load("programs/foveate273_any.pxi", NULL, &any) ||
        pxvm_runner_open(any, px__executor(), 0, 1, 2, &run)) {
        px_test_fail(__FILE__, __LINE__, "%s", pxvm_errmsg());
        goto out;
    }
    uint8_t img[40 * 30 * 4];
    px__fill(img, sizeof img, 11);
    pxvm_view v = pxvm_view_host(img, 40, 30, 4);
    int slot = pxvm_prog_slot_find(any, "image"), w = 0, h = 0;
    CHECK_EQ(pxvm_runner_bind_resized(run, slot, 0, &v, "stretch", 1 << 24, 1 << 24), PXVM_UNLINKABLE);
    CHECK_STR(pxvm_errmsg(), "16777216x16777216");
    CHECK_STR(pxvm_errmsg(), "16384");
    CHECK_EQ(pxvm_runner_bind_resized(run, slot, 0, &v, "stretch", 16385, 16), PXVM_UNLINKABLE); /* the bound + 1 */
    CHECK_STR(pxvm_errmsg(), "16385x16");
    CHECK_EQ(pxvm_runner_bind_resized(run, slot, 0, &v, "stretch", 16, 15), PXVM_UNLINKABLE); /* under the min */
    CHECK_STR(pxvm_errmsg(), "16x15");
    CHECK_EQ(pxvm_runner_bind_resized(run, slot, 0, &v, "stretch", 16384, 16), 0); /* the bound itself */
    /* item 0 bound at 16384x16: item 1 alone at another size is refused naming item 0's */
    CHECK_EQ(pxvm_runner_bind_resized(run, slot, 1, &v, "fit", 100, 100), PXVM_UNLINKABLE);
    CHECK_STR(pxvm_errmsg(), "16384x16");
    CHECK_EQ(pxvm_runner_slot_size(run, slot, &w, &h), 0); /* the refusals changed nothing */
    CHECK_EQ(w, 16384);
    CHECK_EQ(h, 16);
out:
    pxvm_runner_close(run);
    pxvm_prog_free(any);
}
