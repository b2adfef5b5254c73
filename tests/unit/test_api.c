/* test_api.c - the public API (include/pxvm.h) and batches: batch == loop of single runs on
 * random programs and the edge cases, every view layout gives the bytes of its RGBA8 conversion,
 * patches are the atlas's tiles, and bad arguments are classified errors. */
#include <stdlib.h>

#include "../conformance/cases.h"
#include "test.h"

/* Runs c on the CPU executor with `batch` items, item b's inputs being c's inputs with every
 * byte XORed with b (so that items differ); compares every level of every slot of item b with a
 * single run on those inputs. */
static void px__batch_vs_loop(const px_case *c, int batch)
{
    pxvm_limits lim;
    pxvm_limits_default(&lim);
    pxvm_program prog;
    pxvm_error err;
    if (pxvm_program_from_copy(&c->program, &lim, &prog, &err) < 0) {
        px_test_fail(__FILE__, __LINE__, "%s: %s", c->name, err.msg);
        return;
    }
    const pxvm_executor_ops *ops = &pxvm_cpu_executor;
    pxvm_executor *many, *one;
    pxvm_open_options oo = {2, 0};
    pxvm_run_options ro = {lim.max_steps, NULL, NULL, NULL, NULL};
    CHECK(ops->open(&many, &oo, &err) == 0 && ops->open(&one, &oo, &err) == 0);
    CHECK(ops->load(many, &prog, batch, &err) == 0);
    pxvm_image in[PX_CASE_MAX_INPUTS];
    for (int b = 0; b < batch; b++)
        for (int i = 0; i < c->ninputs; i++) {
            const pxvm_image *src = &c->inputs[i];
            CHECK(pxvm_image_alloc(&in[i], src->w, src->h, &err) == 0);
            for (size_t k = 0; k < (size_t)src->w * (size_t)src->h * 4u; k++)
                in[i].px[k] = (uint8_t)(src->px[k] ^ (b * 37));
            pxvm_view v = pxvm_image_view(&in[i]);
            CHECK(ops->bind(many, c->input_slot[i], b, &v, &err) == 0);
            pxvm_image_free(&in[i]);
        }
    int rc_many = ops->run(many, &ro, &err), trapped = 0;
    pxvm_error err_many = err;
    for (int b = 0; b < batch; b++) {
        CHECK(ops->load(one, &prog, 1, &err) == 0);
        for (int i = 0; i < c->ninputs; i++) {
            const pxvm_image *src = &c->inputs[i];
            CHECK(pxvm_image_alloc(&in[i], src->w, src->h, &err) == 0);
            for (size_t k = 0; k < (size_t)src->w * (size_t)src->h * 4u; k++)
                in[i].px[k] = (uint8_t)(src->px[k] ^ (b * 37));
            CHECK(pxvm_bind_image(ops, one, c->input_slot[i], &in[i], &err) == 0);
            pxvm_image_free(&in[i]);
        }
        int rc_one = ops->run(one, &ro, &err);
        if (rc_one < 0 && !trapped) { /* the batch fails with the first failing item's error */
            trapped = 1;
            CHECK(rc_many < 0 && err_many.code == err.code && !strcmp(err_many.msg, err.msg));
        }
        if (rc_many < 0)
            continue; /* no outputs to compare */
        for (int k = 0; k < prog.nslots; k++)
            for (int l = 0; l < prog.slots[k].levels; l++) {
                pxvm_image a, e;
                CHECK(pxvm_read_image(ops, many, &prog, k, l, b, &a, &err) == 0);
                CHECK(pxvm_read_image(ops, one, &prog, k, l, 0, &e, &err) == 0);
                if (a.px && e.px && memcmp(a.px, e.px, (size_t)a.w * (size_t)a.h * 4u))
                    px_test_fail(__FILE__, __LINE__, "%s: item %d slot %d level %d differs", c->name, b, k, l);
                pxvm_image_free(&a);
                pxvm_image_free(&e);
            }
    }
    CHECK(trapped == (rc_many < 0));
    ops->close(many);
    ops->close(one);
    pxvm_program_free(&prog);
}

TEST(api_batch_equals_loop_on_random_programs_and_edge_cases)
{
    px_case c;
    for (uint64_t seed = 1; seed <= 60; seed++) {
        CHECK(px_case_random(seed, &c) == 1);
        px__batch_vs_loop(&c, 1 + (int)(seed % 4));
        px_case_free(&c);
    }
    for (int i = 0; px_case_edge(i, &c) == 1; i++) {
        px__batch_vs_loop(&c, 3);
        px_case_free(&c);
    }
}

/* An image of w x h, its RGBA8 version, and the same pixels in other layouts. */
TEST(api_every_view_layout_converts_by_the_binding_rule)
{
    uint64_t st = 7;
    int w = 37, h = 23;
    pxvm_image rgba = px_random_image(w, h, &st);
    uint8_t *rgb = malloc((size_t)w * h * 3), *chw = malloc((size_t)w * h * 3), *grey = malloc((size_t)w * h);
    uint8_t *want_rgb = malloc((size_t)w * h * 4), *want_grey = malloc((size_t)w * h * 4);
    for (int i = 0; i < w * h; i++) {
        for (int c = 0; c < 3; c++) {
            rgb[3 * i + c] = rgba.px[4 * i + c];
            chw[c * w * h + i] = rgba.px[4 * i + c];
            want_rgb[4 * i + c] = rgba.px[4 * i + c];
            want_grey[4 * i + c] = rgba.px[4 * i + 1];
        }
        grey[i] = rgba.px[4 * i + 1];
        want_rgb[4 * i + 3] = want_grey[4 * i + 3] = 255;
    }
    struct {
        pxvm_view v;
        const uint8_t *want;
    } cases[] = {
        {pxvm_view_host(rgba.px, w, h, 4), rgba.px},
        {pxvm_view_host(rgb, w, h, 3), want_rgb},
        {{chw, -1, 1, w, h, 3, 0, w, 1, (int64_t)w * h}, want_rgb},
        {pxvm_view_host(grey, w, h, 1), want_grey},
        {{rgba.px + 1, -1, 1, w, h, 1, 0, (int64_t)w * 4, 4, 0}, want_grey}, /* the G channel of RGBA */
    };
    uint8_t *got = malloc((size_t)w * h * 4);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pxvm_view_to_rgba(&cases[i].v, 0, got);
        if (memcmp(got, cases[i].want, (size_t)w * h * 4))
            px_test_fail(__FILE__, __LINE__, "layout %zu converts wrongly", i);
    }
    free(rgb), free(chw), free(grey), free(want_rgb), free(want_grey), free(got);
    pxvm_image_free(&rgba);
}

TEST(api_public_calls_run_foveate273_and_classify_errors)
{
    pxvm_prog *prog = NULL;
    pxvm_runner *run = NULL;
    CHECK(pxvm_prog_load("programs/foveate273.pxi", NULL, &prog) == 0);
    CHECK(pxvm_runner_open(prog, "cpu", 0, 2, 2, &run) == 0);
    CHECK(!strcmp(pxvm_runner_executor(run), "cpu") && pxvm_runner_batch(run) == 2);
    uint8_t *px;
    int w, h;
    CHECK(pxvm_image_load("programs/data/chelsea.png", NULL, &px, &w, &h) == 0);
    int image = pxvm_prog_slot_find(prog, "image"), atlas = pxvm_prog_slot_find(prog, "atlas");
    CHECK(image == 1 && atlas == 2 && pxvm_prog_slot_find(prog, "nope") == -1);
    pxvm_view in = pxvm_view_host(px, w, h, 4);
    /* unbound item 1: unlinkable, naming the slot */
    CHECK(pxvm_runner_bind(run, image, 0, &in) == 0);
    CHECK(pxvm_runner_run(run) == PXVM_UNLINKABLE);
    CHECK_STR(pxvm_errmsg(), "input slot 1 ('image') is not bound");
    CHECK(pxvm_errclass() == PXVM_UNLINKABLE);
    CHECK(pxvm_runner_bind(run, image, 1, &in) == 0);
    CHECK(pxvm_runner_run(run) == 0);
    /* patches of both items equal the atlas's tiles */
    size_t pbytes = 273u * 16 * 16 * 4;
    uint8_t *pt = malloc(2 * pbytes), *at = malloc(272u * 272 * 4);
    pxvm_view pv = pxvm_view_host(pt, 16, 16 * 273, 4);
    pv.items = 2, pv.item_stride = (int64_t)pbytes;
    CHECK(pxvm_runner_read_patches(run, atlas, 0, &pv) == 0);
    pxvm_view av = pxvm_view_host(at, 272, 272, 4);
    CHECK(pxvm_runner_read(run, atlas, 0, 1, &av) == 0);
    int tiles_ok = 1;
    for (int p = 0; p < 273; p++)
        for (int y = 0; y < 16; y++)
            tiles_ok &= !memcmp(pt + pbytes + ((size_t)p * 16 + y) * 64, at + (((size_t)(p / 17) * 16 + y) * 272 + (size_t)(p % 17) * 16) * 4, 64);
    CHECK(tiles_ok);
    CHECK(!memcmp(pt, pt + pbytes, pbytes)); /* the same image in both items */
    /* pxvm_runner_borrow: the CPU reads a packed RGBA image in place for one run (the borrow ends
     * when that run returns); other layouts are copied as bind copies them */
    uint8_t *copy = malloc((size_t)w * h * 4), *pt2 = malloc(2 * pbytes), *pt3 = malloc(2 * pbytes);
    memcpy(copy, px, (size_t)w * h * 4);
    pxvm_view cv = pxvm_view_host(copy, w, h, 4);
    CHECK(pxvm_runner_borrow(run, image, 0, &cv) == 0 && pxvm_runner_borrow(run, image, 1, &cv) == 0);
    pxvm_view pv2 = pv, pv3 = pv;
    pv2.data = pt2, pv3.data = pt3;
    CHECK(pxvm_runner_run(run) == 0 && pxvm_runner_read_patches(run, atlas, 0, &pv2) == 0);
    CHECK(!memcmp(pt, pt2, 2 * pbytes)); /* the same bytes as bound */
    /* the borrow has ended: a run without a new bind is refused, and so is a read of level 0 */
    CHECK(pxvm_runner_run(run) == PXVM_UNLINKABLE && strstr(pxvm_errmsg(), "('image') is not bound"));
    uint8_t *lv0 = malloc((size_t)w * h * 4);
    pxvm_view iv = pxvm_view_host(lv0, w, h, 4);
    CHECK(pxvm_runner_read(run, image, 0, 0, &iv) == PXVM_UNLINKABLE && strstr(pxvm_errmsg(), "is not bound"));
    free(lv0);
    memset(copy, 0, (size_t)w * h * 4); /* in place: the run of a new borrow sees the change */
    CHECK(pxvm_runner_borrow(run, image, 0, &cv) == 0 && pxvm_runner_borrow(run, image, 1, &cv) == 0);
    CHECK(pxvm_runner_run(run) == 0 && pxvm_runner_read_patches(run, atlas, 0, &pv2) == 0);
    uint8_t *zero = calloc((size_t)w * h * 4, 1);
    pxvm_view zv = pxvm_view_host(zero, w, h, 4);
    CHECK(pxvm_runner_bind(run, image, 0, &zv) == 0 && pxvm_runner_bind(run, image, 1, &zv) == 0);
    CHECK(pxvm_runner_run(run) == 0 && pxvm_runner_read_patches(run, atlas, 0, &pv3) == 0);
    CHECK(!memcmp(pt2, pt3, 2 * pbytes) && memcmp(pt, pt3, 2 * pbytes));
    memcpy(copy, px, (size_t)w * h * 4); /* bound, not borrowed, now: the change is not seen */
    CHECK(pxvm_runner_run(run) == 0 && pxvm_runner_read_patches(run, atlas, 0, &pv2) == 0);
    CHECK(!memcmp(pt2, pt3, 2 * pbytes));
    pxvm_view rgb = pxvm_view_host(px, w, h, 4); /* a layout read through a conversion: copied */
    rgb.channels = 3, rgb.px_stride = 4;
    CHECK(pxvm_runner_borrow(run, image, 0, &rgb) == 0 && pxvm_runner_borrow(run, image, 1, &rgb) == 0);
    memset(px, 0, (size_t)w * h * 4);
    CHECK(pxvm_runner_run(run) == 0 && pxvm_runner_read_patches(run, atlas, 0, &pv2) == 0);
    CHECK(!memcmp(pt, pt2, 2 * pbytes)); /* chelsea.png is opaque: RGB + 255 is the RGBA image */
    free(zero), free(pt3);
    cv.channels = 2;
    CHECK(pxvm_runner_borrow(run, image, 0, &cv) == PXVM_USAGE);
    CHECK_STR(pxvm_errmsg(), "channels must be 1 (grey), 3 (RGB) or 4 (RGBA), not 2");
    CHECK(pxvm_runner_borrow(NULL, image, 0, &in) == PXVM_USAGE);
    CHECK_STR(pxvm_errmsg(), "pxvm_runner_borrow: NULL runner");
    CHECK(pxvm_runner_borrow(run, image, 0, NULL) == pxvm_runner_bind(run, image, 0, NULL)); /* no crash: bind's error */
    CHECK(pxvm_runner_borrow(run, image, 0, NULL) != 0);
    free(copy), free(pt2);
    /* classified argument errors, nothing written */
    pxvm_view bad = in;
    bad.channels = 2;
    CHECK(pxvm_runner_bind(run, image, 0, &bad) == PXVM_USAGE);
    CHECK_STR(pxvm_errmsg(), "channels must be 1 (grey), 3 (RGB) or 4 (RGBA), not 2");
    CHECK(pxvm_runner_bind(run, image, 2, &in) == PXVM_USAGE);
    CHECK_STR(pxvm_errmsg(), "items 2..2 are outside the batch of 2 (items 0..1)");
    bad = in;
    bad.device = 0;
    CHECK(pxvm_runner_bind(run, image, 0, &bad) == PXVM_USAGE);
    CHECK_STR(pxvm_errmsg(), "CUDA device memory can be bound only on the CUDA-GL executor");
    CHECK(pxvm_runner_bind(run, atlas, 0, &in) == PXVM_UNLINKABLE);
    CHECK(pxvm_runner_read(run, atlas, 0, 0, &in) == PXVM_USAGE); /* 451x300 is not the atlas's size */
    CHECK_STR(pxvm_errmsg(), "slot 2 ('atlas') at that level is 272x272, the view 451x300");
    CHECK(pxvm_runner_read_patches(run, image, 0, &pv) == PXVM_USAGE);
    CHECK_STR(pxvm_errmsg(), "is no patch atlas");
    CHECK(pxvm_runner_set_stream(run, (void *)1) == PXVM_USAGE);
    CHECK(pxvm_runner_set_stream(run, NULL) == 0 && pxvm_runner_sync(run) == 0);
    pxvm_runner *r2 = NULL;
    CHECK(pxvm_runner_open(prog, "tpu", 0, 0, 1, &r2) == PXVM_USAGE && !r2);
    CHECK(pxvm_runner_open(prog, "cpu", 0, 0, 0, &r2) == PXVM_USAGE && !r2);
    pxvm_prog *p2 = NULL;
    CHECK(pxvm_prog_assemble("HALT\nBOGUS\n", "t.pxs", NULL, &p2) == PXVM_ASSEMBLY && !p2);
    CHECK_STR(pxvm_errmsg(), "t.pxs:2:1: unknown mnemonic 'BOGUS'");
    CHECK(pxvm_prog_from_plan("{\"image\": [10, 10]", "p.json", NULL, &p2) == PXVM_PLAN && !p2);
    CHECK(pxvm_prog_from_png("\x89PNG\r\n\x1a\nxx", 10, "x.pxi", NULL, &p2) == PXVM_MALFORMED && !p2);
    CHECK(pxvm_prog_load("no/such.pxi", NULL, &p2) == PXVM_IO && !p2);
    CHECK(pxvm_image_load("no/such.jpg", NULL, &px, &w, &h) == PXVM_IO);
    char *text = NULL;
    CHECK(pxvm_prog_disassemble(prog, &text) == 0 && text && strstr(text, "SAMPLE"));
    CHECK(pxvm_prog_assemble(text, "round.pxs", NULL, &p2) == 0);
    void *a = NULL, *b = NULL;
    size_t la = 0, lb = 0;
    CHECK(pxvm_prog_encode(prog, &a, &la) == 0 && pxvm_prog_encode(p2, &b, &lb) == 0);
    CHECK(la == lb && a && b && !memcmp(a, b, la));
    pxvm_free(a), pxvm_free(b), pxvm_free(text);
    pxvm_prog_free(p2);
    free(pt), free(at), pxvm_free(px);
    pxvm_runner_close(run);
    pxvm_prog_free(prog);
}

/* Issue 42: what a failure is about comes as fields (pxvm_last_error_info), not only as words:
 * the item and slot of the bind that failed (alone or inside pxvm_runner_exec), the file of a
 * decode; cleared by the next failure that is about none. */
TEST(api_last_error_info_names_the_item_slot_and_file)
{
    pxvm_prog *prog = NULL;
    pxvm_runner *run = NULL;
    CHECK(pxvm_prog_load("programs/foveate273.pxi", NULL, &prog) == 0);
    CHECK(pxvm_runner_open(prog, "cpu", 0, 1, 3, &run) == 0);
    uint8_t *px;
    int w, h;
    CHECK(pxvm_image_load("programs/data/chelsea.png", NULL, &px, &w, &h) == 0);
    int image = pxvm_prog_slot_find(prog, "image");
    pxvm_view in = pxvm_view_host(px, w, h, 4), small = pxvm_view_host(px, w, 10, 4);
    pxvm_error_info info;
    CHECK(pxvm_last_error_info(NULL) == PXVM_USAGE);
    CHECK(pxvm_runner_bind(run, image, 2, &small) == PXVM_UNLINKABLE);
    CHECK(pxvm_last_error_info(&info) == 0);
    CHECK(info.item == 2 && info.slot == image && !strcmp(info.file, ""));
    int slots[3] = {image, image, image}, items[3] = {0, 1, 2};
    pxvm_view views[3] = {in, small, in};
    CHECK(pxvm_runner_exec(run, 3, slots, items, views, 0, NULL, NULL, NULL) == PXVM_UNLINKABLE);
    CHECK(pxvm_last_error_info(&info) == 0 && info.item == 1 && info.slot == image);
    CHECK(pxvm_image_load("no/such.jpg", NULL, &px, &w, &h) == PXVM_IO);
    CHECK(pxvm_last_error_info(&info) == 0 && info.item == -1 && info.slot == -1 && !strcmp(info.file, "no/such.jpg"));
    pxvm_runner *r2 = NULL;
    CHECK(pxvm_runner_open(prog, "tpu", 0, 0, 1, &r2) == PXVM_USAGE); /* about no item, slot or file */
    CHECK(pxvm_last_error_info(&info) == 0 && info.item == -1 && info.slot == -1 && !strcmp(info.file, ""));
    pxvm_free(px);
    pxvm_runner_close(run);
    pxvm_prog_free(prog);
}
