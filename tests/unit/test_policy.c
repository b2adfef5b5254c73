/* test_policy.c - resolution policies (vm/policy.c: px_policy_parse, px_resize_policy; the public
 * pxvm_image_fit): the parser's good and bad texts, and a policy's bytes == those of the RESIZE
 * instruction run on the CPU executor with the same filter, fit and pad, for stretch and fit,
 * wide, tall and equal aspects, up and down, every filter; an image of the slot's size is a copy. */
#include <stdlib.h>

#include "../../vm/resize.h"
#include "test.h"

TEST(policy_parse_good_texts)
{
    static const struct {
        const char *text;
        int kind, filter;
        uint8_t pad[4];
    } good[] = {
        {"exact", PX_POLICY_EXACT, PX_RESIZE_BICUBIC, {0, 0, 0, 255}},
        {"native", PX_POLICY_NATIVE, PX_RESIZE_BICUBIC, {0, 0, 0, 255}},
        {"stretch", PX_POLICY_STRETCH, PX_RESIZE_BICUBIC, {0, 0, 0, 255}},
        {"stretch:nearest", PX_POLICY_STRETCH, PX_RESIZE_NEAREST, {0, 0, 0, 255}},
        {"stretch:LANCZOS", PX_POLICY_STRETCH, PX_RESIZE_LANCZOS, {0, 0, 0, 255}},
        {"fit", PX_POLICY_FIT, PX_RESIZE_BICUBIC, {0, 0, 0, 255}},
        {"fit:box", PX_POLICY_FIT, PX_RESIZE_BOX, {0, 0, 0, 255}},
        {"fit:hamming:1,2,3", PX_POLICY_FIT, PX_RESIZE_HAMMING, {1, 2, 3, 255}},
        {"fit:bilinear:255,0,128,7", PX_POLICY_FIT, PX_RESIZE_BILINEAR, {255, 0, 128, 7}},
        {"fit:bicubic:808080", PX_POLICY_FIT, PX_RESIZE_BICUBIC, {128, 128, 128, 255}},
        {"fit:nearest:FFfe0010", PX_POLICY_FIT, PX_RESIZE_NEAREST, {255, 254, 0, 16}},
        {"fit:10,20,30", PX_POLICY_FIT, PX_RESIZE_BICUBIC, {10, 20, 30, 255}},
        {"fit:c0ffee", PX_POLICY_FIT, PX_RESIZE_BICUBIC, {0xc0, 0xff, 0xee, 255}},
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        px_policy p;
        pxvm_error err;
        memset(&err, 0, sizeof err);
        int rc = px_policy_parse(good[i].text, &p, &err);
        if (rc != 0)
            px_test_fail(__FILE__, __LINE__, "'%s': %s", good[i].text, err.msg);
        CHECK_EQ(p.kind, good[i].kind);
        CHECK_EQ(p.filter, good[i].filter);
        CHECK(!memcmp(p.pad, good[i].pad, 4));
    }
    px_policy p;
    pxvm_error err;
    CHECK_EQ(px_policy_parse(NULL, &p, &err), 0);
    CHECK_EQ(p.kind, PX_POLICY_EXACT);
    char buf[64];
    CHECK_EQ(px_policy_parse("fit:lanczos:1,2,3", &p, &err), 0);
    px_policy_format(&p, buf, sizeof buf);
    CHECK(!strcmp(buf, "fit:lanczos:1,2,3,255"));
    CHECK_EQ(px_policy_parse("stretch", &p, &err), 0);
    px_policy_format(&p, buf, sizeof buf);
    CHECK(!strcmp(buf, "stretch:bicubic"));
    CHECK_EQ(px_policy_parse("native", &p, &err), 0);
    px_policy_format(&p, buf, sizeof buf);
    CHECK(!strcmp(buf, "native"));
}

/* Every text of bad[] is a usage error whose message quotes it. */
static void px__all_refused(const char *const *bad, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        px_policy p;
        pxvm_error err;
        memset(&err, 0, sizeof err);
        if (px_policy_parse(bad[i], &p, &err) == 0) {
            px_test_fail(__FILE__, __LINE__, "'%s' was accepted", bad[i]);
            continue;
        }
        CHECK_EQ(err.cls, PXVM_USAGE);
        char quoted[80];
        snprintf(quoted, sizeof quoted, "'%s'", bad[i]);
        CHECK_STR(err.msg, quoted);
    }
}

TEST(policy_parse_bad_texts_are_usage_errors_naming_them)
{
    static const char *bad[] = {
        "fill",           "Fit",          "exact:bicubic", "stretch:bicubc", "stretch:bicubic:0,0,0", "stretch:",
        "fit:",           "fit::0,0,0",   "fit:bicubic:",  "fit:bicubc",     "fit:bicubic:256,0,0",   "fit:bicubic:1,2",
        "fit:bicubic:1,2,3,4,5", "fit:bicubic:-1,0,0", "fit:bicubic:1, 2,3", "fit:bicubic:80808", "fit:bicubic:80808g",
        "fit:bicubic:0,0,0:x", "fit:0,0,0:bicubic", "fit:bicubic:1,,3", "fit:bicubic:0001,0,0", " fit",
        "", "native:bicubic", "native:", "Native",
    };
    px__all_refused(bad, sizeof bad / sizeof bad[0]);
}

/* The policy's image vs RESIZE of the same source into a w x h output slot on the CPU executor. */
static int px__same_as_op(const pxvm_image *src, int w, int h, const px_policy *p)
{
    pxvm_image got;
    pxvm_error err;
    if (px_resize_policy(src, w, h, p, &got, &err) < 0) {
        px_test_fail(__FILE__, __LINE__, "px_resize_policy: %s", err.msg);
        return -1;
    }
    pxvm_builder b;
    pxvm_build_init(&b, 32);
    pxvm_build_slot(&b, PXI_ROLE_INPUT, "src", src->w, src->h);
    pxvm_build_slot(&b, PXI_ROLE_OUTPUT, "out", w, h);
    int32_t f[PXI_MAX_FIELDS] = {0};
    int fit = p->kind == PX_POLICY_FIT;
    f[PX_FI(RESIZE, src)] = 1, f[PX_FI(RESIZE, dst)] = 2, f[PX_FI(RESIZE, filter)] = p->filter;
    f[PX_FI(RESIZE, w)] = w, f[PX_FI(RESIZE, h)] = h, f[PX_FI(RESIZE, fit)] = fit;
    if (fit)
        f[PX_FI(RESIZE, pad_r)] = p->pad[0], f[PX_FI(RESIZE, pad_g)] = p->pad[1], f[PX_FI(RESIZE, pad_b)] = p->pad[2],
        f[PX_FI(RESIZE, pad_a)] = p->pad[3];
    pxvm_build_insn(&b, PX_OP_RESIZE, f);
    pxvm_build_insn(&b, PX_OP_HALT, NULL);
    pxvm_program prog;
    pxvm_executor *ex = NULL;
    const pxvm_image *in[1] = {src};
    int bad = 0;
    if (px_run_builder(&b, in, 1, &prog, &ex, &err) < 0) {
        px_test_fail(__FILE__, __LINE__, "RESIZE run: %s", err.msg);
        bad = 1;
    } else {
        pxvm_image op = px_read(&prog, ex, 2, 0);
        bad = op.w != w || op.h != h || memcmp(op.px, got.px, (size_t)w * (size_t)h * 4u) != 0;
        if (bad)
            px_test_fail(__FILE__, __LINE__, "%dx%d -> %dx%d kind %d filter %s: policy != RESIZE", src->w, src->h, w, h,
                         p->kind, px_resize_filter_name(p->filter));
        pxvm_image_free(&op);
        px_close(&prog, ex);
    }
    pxvm_image_free(&got);
    return bad;
}

TEST(policy_equals_the_resize_op_stretch_and_fit_every_filter)
{
    static const int sizes[][4] = {
        {60, 40, 45, 30},  /* wide into a slot of the same aspect, down */
        {60, 40, 32, 32},  /* wide into a square: bars above and below */
        {30, 50, 40, 24},  /* tall into a wide slot: bars left and right, up in height */
        {17, 9, 40, 41},   /* up both ways, odd leftovers */
        {33, 33, 20, 21},  /* square, almost equal aspect */
        {64, 3, 10, 10},   /* very wide: a content 1 or 2 texels high */
    };
    uint64_t rng = 0x9011c1e5;
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        pxvm_image src = px_random_image(sizes[s][0], sizes[s][1], &rng);
        for (int filter = 0; filter < PX_RESIZE__FILTERS; filter++)
            for (int kind = PX_POLICY_STRETCH; kind <= PX_POLICY_FIT; kind++) {
                px_policy p = {kind, filter, {(uint8_t)(10 * filter), 200, 3, (uint8_t)(255 - filter)}, 0, 0, 0, 0, 0, 0};
                px__same_as_op(&src, sizes[s][2], sizes[s][3], &p);
            }
        pxvm_image_free(&src);
    }
}

TEST(policy_of_an_image_of_the_slot_size_is_a_copy_and_exact_refuses_others)
{
    uint64_t rng = 7;
    pxvm_image src = px_random_image(23, 11, &rng), out;
    pxvm_error err;
    for (int kind = PX_POLICY_EXACT; kind <= PX_POLICY_FIT; kind++)
        for (int filter = 0; filter < PX_RESIZE__FILTERS; filter++) {
            px_policy p = {kind, filter, {1, 2, 3, 4}, 0, 0, 0, 0, 0, 0};
            CHECK_EQ(px_resize_policy(&src, 23, 11, &p, &out, &err), 0);
            CHECK(out.px != src.px && !memcmp(out.px, src.px, 23 * 11 * 4));
            pxvm_image_free(&out);
        }
    px_policy exact = {PX_POLICY_EXACT, PX_RESIZE_BICUBIC, {0, 0, 0, 255}, 0, 0, 0, 0, 0, 0};
    CHECK_EQ(px_resize_policy(&src, 24, 11, &exact, &out, &err), -1);
    CHECK_STR(err.msg, "23x11");
    CHECK_STR(err.msg, "24x11");
    pxvm_image_free(&src);
}

TEST(policy_public_call_pxvm_image_fit)
{
    uint64_t rng = 11;
    pxvm_image src = px_random_image(40, 20, &rng), want;
    pxvm_error err;
    px_policy p;
    CHECK_EQ(px_policy_parse("fit:lanczos:9,8,7", &p, &err), 0);
    CHECK_EQ(px_resize_policy(&src, 16, 16, &p, &want, &err), 0);
    uint8_t *out = NULL;
    CHECK_EQ(pxvm_image_fit(src.px, 40, 20, 16, 16, "fit:lanczos:9,8,7", &out), 0);
    CHECK(out && !memcmp(out, want.px, 16 * 16 * 4));
    pxvm_free(out);
    out = NULL;
    CHECK_EQ(pxvm_image_fit(src.px, 40, 20, 16, 16, "fit:lanczo", &out), PXVM_USAGE);
    CHECK(!out);
    CHECK_STR(pxvm_errmsg(), "'fit:lanczo'");
    CHECK_EQ(pxvm_image_fit(src.px, 40, 20, 16, 16, "exact", &out), PXVM_USAGE);
    CHECK_EQ(pxvm_image_fit(NULL, 40, 20, 16, 16, "fit", &out), PXVM_USAGE);
    pxvm_image_free(&want);
    pxvm_image_free(&src);
}

/* ---- dynamic ------------------------------------------------------------------------------- */

TEST(policy_dynamic_parse_defaults_keys_filter_and_canonical_text)
{
    static const struct {
        const char *text, *canon;
    } good[] = {
        {"dynamic", "dynamic:merge=2,min=3136,max=1003520:bicubic"},
        {"dynamic:bilinear", "dynamic:merge=2,min=3136,max=1003520:bilinear"},
        {"dynamic:patch=14,merge=2,min=3136,max=1003520", "dynamic:patch=14,merge=2,min=3136,max=1003520:bicubic"},
        {"dynamic:max=50000,patch=16", "dynamic:patch=16,merge=2,min=3136,max=50000:bicubic"},
        {"dynamic:lanczos:merge=1", "dynamic:merge=1,min=3136,max=1003520:lanczos"},
        {"dynamic:min=1,max=1", "dynamic:merge=2,min=1,max=1:bicubic"},
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        px_policy p, q;
        pxvm_error err;
        char buf[160], again[160];
        if (px_policy_parse(good[i].text, &p, &err) != 0) {
            px_test_fail(__FILE__, __LINE__, "'%s': %s", good[i].text, err.msg);
            continue;
        }
        CHECK_EQ(p.kind, PX_POLICY_DYNAMIC);
        px_policy_format(&p, buf, sizeof buf);
        CHECK(!strcmp(buf, good[i].canon));
        CHECK_EQ(px_policy_parse(buf, &q, &err), 0); /* the canonical text reads back as itself */
        px_policy_format(&q, again, sizeof again);
        CHECK(!strcmp(again, buf));
    }
    static const char *bad[] = {
        "dynamic:",          "dynamic:patch=0",        "dynamic:patch=257",     "dynamic:merge=65",
        "dynamic:min=0",     "dynamic:max=1099511627777", "dynamic:min=10,max=9", "dynamic:size=3",
        "dynamic:patch=14,", "dynamic:patch=14,patch=14", "dynamic:patch=x",    "dynamic:patch=+14",
        "dynamic:bicubc",    "dynamic:box:box",        "dynamic:min=1:max=2",   "dynamic:0,0,0",
        "dynamic:patch=",    "Dynamic",
    };
    px__all_refused(bad, sizeof bad / sizeof bad[0]);
}

static void px__dyn(const char *text, int patch, int w, int h, int want_w, int want_h)
{
    px_policy p;
    pxvm_error err;
    int ow = -1, oh = -1;
    if (px_policy_parse(text, &p, &err) < 0 || px_policy_dynamic_patch(&p, patch, &err) < 0 ||
        px_dynamic_size(&p, w, h, &ow, &oh, &err) < 0) {
        px_test_fail(__FILE__, __LINE__, "%s patch %d %dx%d: %s", text, patch, w, h, err.msg);
        return;
    }
    if (ow != want_w || oh != want_h)
        px_test_fail(__FILE__, __LINE__, "%s patch %d %dx%d -> %dx%d, expected %dx%d", text, patch, w, h, ow, oh, want_w,
                     want_h);
}

/* Values worked by hand from the rule (docs/policies.md); the Python transcription checks many
 * more sizes (tests/python/test_ragged.py). */
TEST(policy_dynamic_size_rule_by_hand)
{
    /* f = 28: 640 / 28 = 22.857 -> 23 * 28 = 644; 427 / 28 = 15.25 -> 15 * 28 = 420 */
    px__dyn("dynamic", 14, 640, 427, 644, 420);
    /* ties go to even: 42 / 28 = 1.5 -> 2 (56); 70 / 28 = 2.5 -> 2 (56); 98 / 28 = 3.5 -> 4 (112) */
    px__dyn("dynamic:min=1", 14, 42, 70, 56, 56);
    px__dyn("dynamic:min=1", 14, 98, 98, 112, 112);
    /* too small: 20x20 rounds to 28x28 = 784 < 3136: beta = sqrt(3136 / 400) = 2.8, ceil(56 / 28) = 2 -> 56 */
    px__dyn("dynamic", 14, 20, 20, 56, 56);
    /* 13x14 rounds to 0x0 (13 / 28 < 0.5; 14 / 28 = 0.5, a tie, to even 0): the min branch, beta =
     * sqrt(3136 / 182): 13 * beta = 53.96 -> ceil(1.93) * 28 = 56; 14 * beta = 58.11 -> ceil(2.08) * 28 = 84 */
    px__dyn("dynamic", 14, 13, 14, 56, 84);
    /* 13x13: 13 * sqrt(3136 / 169) is 56.0 exactly in double: ceil(2.0) * 28 = 56 */
    px__dyn("dynamic", 14, 13, 13, 56, 56);
    /* too large: 4000x3000 -> 4004x3004 > max: beta = sqrt(12e6 / 1003520) = 3.458, 4000 / beta / 28 = 41.3 -> 1148;
     * 3000 / beta / 28 = 30.98 -> 840 */
    px__dyn("dynamic", 14, 4000, 3000, 1148, 840);
    /* max below f * f: each side at least f */
    px__dyn("dynamic:min=1,max=100", 16, 500, 400, 32, 32);
    /* patch 16, merge 1 */
    px__dyn("dynamic:merge=1", 16, 240, 400, 240, 400);
}

TEST(policy_dynamic_aspect_edge_and_patch_mismatch)
{
    px_policy p;
    pxvm_error err;
    int ow, oh;
    CHECK_EQ(px_policy_parse("dynamic:min=1", &p, &err), 0);
    CHECK_EQ(px_policy_dynamic_patch(&p, 14, &err), 0);
    CHECK_EQ(p.patch, 14);
    CHECK_EQ(px_dynamic_size(&p, 2000, 10, &ow, &oh, &err), 0); /* 200:1, the last accepted */
    CHECK_EQ(px_dynamic_size(&p, 10, 2000, &ow, &oh, &err), 0);
    CHECK_EQ(px_dynamic_size(&p, 2001, 10, &ow, &oh, &err), -1); /* 200.1:1, the first refused */
    CHECK_EQ(err.cls, PXVM_UNLINKABLE);
    CHECK_STR(err.msg, "a 2001x10 image: policy dynamic takes aspect ratios up to 200:1; this one is 200.10:1");
    CHECK_EQ(px_dynamic_size(&p, 10, 2001, &ow, &oh, &err), -1);
    CHECK_EQ(px_policy_parse("dynamic:patch=14", &p, &err), 0);
    CHECK_EQ(px_policy_dynamic_patch(&p, 16, &err), -1);
    CHECK_EQ(err.cls, PXVM_USAGE);
    CHECK_STR(err.msg, "patch=14, but the plan's patch is 16");
    CHECK_EQ(px_policy_dynamic_patch(&p, 14, &err), 0);
}

TEST(policy_dynamic_public_calls)
{
    int w = 0, h = 0;
    CHECK_EQ(pxvm_policy_dynamic_size("dynamic", 14, 640, 427, &w, &h), 0);
    CHECK_EQ(w, 644);
    CHECK_EQ(h, 420);
    CHECK_EQ(pxvm_policy_dynamic_size("fit", 14, 640, 427, &w, &h), PXVM_USAGE);
    CHECK_EQ(pxvm_policy_dynamic_size("dynamic:patch=14", 16, 640, 427, &w, &h), PXVM_USAGE);
    CHECK_STR(pxvm_errmsg(), "the plan's patch is 16");
    CHECK_EQ(pxvm_policy_dynamic_size("dynamic", 14, 3000, 10, &w, &h), PXVM_UNLINKABLE);
    CHECK_STR(pxvm_errmsg(), "3000x10");
    char buf[128];
    CHECK_EQ(pxvm_policy_canonical("dynamic:patch=14:box", buf, sizeof buf), 0);
    CHECK(!strcmp(buf, "dynamic:patch=14,merge=2,min=3136,max=1003520:box"));
    CHECK_EQ(pxvm_policy_canonical("fit", buf, sizeof buf), 0);
    CHECK(!strcmp(buf, "fit:bicubic:0,0,0,255"));
    CHECK_EQ(pxvm_policy_canonical("fit", buf, 5), PXVM_USAGE);
    CHECK_EQ(pxvm_policy_canonical("dynamic:x", buf, sizeof buf), PXVM_USAGE);
    CHECK_STR(pxvm_errmsg(), "'dynamic:x'");
    /* pxvm_image_fit with dynamic resizes to the size given, as stretch does */
    uint64_t rng = 5;
    pxvm_image src = px_random_image(40, 20, &rng);
    uint8_t *a = NULL, *b = NULL;
    CHECK_EQ(pxvm_image_fit(src.px, 40, 20, 56, 28, "dynamic:box", &a), 0);
    CHECK_EQ(pxvm_image_fit(src.px, 40, 20, 56, 28, "stretch:box", &b), 0);
    CHECK(a && b && !memcmp(a, b, 56 * 28 * 4));
    pxvm_free(a);
    pxvm_free(b);
    pxvm_image_free(&src);
}

/* pxvm_image_fit_channels of grey and RGB pixels == pxvm_image_fit of them widened to RGBA (grey
 * v -> (v, v, v, 255), RGB -> (r, g, b, 255)) for each kind of policy and every filter, large
 * enough to run in bands over threads; channels 1, 3, 4 taken, 2 and 5 refused naming them. */
TEST(policy_public_call_pxvm_image_fit_channels_equals_rgba)
{
    static const char *policies[] = {"stretch:nearest", "stretch:box", "fit:bilinear:9,8,7", "stretch:hamming",
                                     "dynamic", "fit:lanczos"};
    uint64_t rng = 99;
    pxvm_image src = px_random_image(613, 419, &rng);
    uint8_t *grey = malloc(613u * 419u), *rgb = malloc(613u * 419u * 3u), *wide = malloc(613u * 419u * 4u);
    for (size_t i = 0; i < 613u * 419u; i++) {
        grey[i] = src.px[4 * i];
        memcpy(rgb + 3 * i, src.px + 4 * i, 3);
    }
    for (size_t k = 0; k < sizeof policies / sizeof policies[0]; k++)
        for (int channels = 1; channels <= 3; channels += 2) {
            for (size_t i = 0; i < 613u * 419u; i++) {
                const uint8_t *s = channels == 1 ? grey + i : rgb + 3 * i;
                wide[4 * i] = s[0], wide[4 * i + 1] = s[channels == 3], wide[4 * i + 2] = s[channels == 3 ? 2 : 0];
                wide[4 * i + 3] = 255;
            }
            uint8_t *want = NULL, *got = NULL;
            int ow = 320 + (int)k, oh = 200 - (int)k;
            CHECK_EQ(pxvm_image_fit(wide, 613, 419, ow, oh, policies[k], &want), 0);
            CHECK_EQ(pxvm_image_fit_channels(channels == 1 ? grey : rgb, 613, 419, channels, ow, oh, policies[k], &got), 0);
            if (want && got && memcmp(want, got, (size_t)ow * (size_t)oh * 4u))
                px_test_fail(__FILE__, __LINE__, "%s, %d channels: differs from the RGBA image's", policies[k], channels);
            pxvm_free(want), pxvm_free(got);
        }
    uint8_t *out = NULL;
    CHECK_EQ(pxvm_image_fit_channels(src.px, 613, 419, 4, 10, 10, "stretch", &out), 0);
    pxvm_free(out);
    CHECK_EQ(pxvm_image_fit_channels(src.px, 613, 419, 2, 10, 10, "stretch", &out), PXVM_USAGE);
    CHECK_STR(pxvm_errmsg(), "channels 2: must be 1, 3 or 4");
    CHECK_EQ(pxvm_image_fit_channels(src.px, 613, 419, 5, 10, 10, "stretch", &out), PXVM_USAGE);
    CHECK_STR(pxvm_errmsg(), "channels 5: must be 1, 3 or 4");
    free(grey), free(rgb), free(wide);
    pxvm_image_free(&src);
}
