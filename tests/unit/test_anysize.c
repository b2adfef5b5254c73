/* test_anysize.c - any-size inputs (SPEC "Any-size inputs"): the integer rules of the
 * resolution (px_log2_q8 against its definition, px_scale_q16 at its edges), the identity at the
 * reference size for every shipped program made any-size, what a resolution rewrites, and the
 * runner: bound at W x H it gives the bytes of a fresh runner of the resolution (every output
 * slot, the geometry) over many sizes. */
#include <stdlib.h>

#include "../../isa/px_sem.h"
#include "../../api/runner_hooks.h"
#include "../../executors/cpu/cpu_executor.h"
#include "test.h"

/* ---- px_log2_q8 = floor(256 log2 n) = bit length of n^256, minus 1 --------------------------- */

/* The bit length of n^256, with a small big-integer square (8 squarings, at most 4096 bits). */
static int px__bits_pow256(uint32_t n)
{
    uint32_t a[130] = {n}, t[260];
    int len = 1;
    for (int s = 0; s < 8; s++) {
        memset(t, 0, sizeof(uint32_t) * (size_t)(2 * len));
        for (int i = 0; i < len; i++) {
            uint64_t carry = 0;
            for (int j = 0; j < len; j++) {
                uint64_t v = (uint64_t)a[i] * a[j] + t[i + j] + carry;
                t[i + j] = (uint32_t)v;
                carry = v >> 32;
            }
            t[i + len] = (uint32_t)carry;
        }
        len *= 2;
        while (len > 1 && !t[len - 1])
            len--;
        memcpy(a, t, sizeof(uint32_t) * (size_t)len);
    }
    int bits = 32 * (len - 1);
    for (uint32_t top = a[len - 1]; top; top >>= 1)
        bits++;
    return bits;
}

TEST(anysize_log2_q8_is_floor_256_log2)
{
    int n_checked = 0;
    uint64_t rng = 23;
    for (int n = 1; n <= 65535; n++) {
        int edge = n <= 1100 || (n & (n - 1)) == 0 || ((n + 1) & n) == 0 || (((n - 1) & (n - 2)) == 0) || n == 65535;
        if (!edge && px_rand(&rng) % 16)
            continue;
        int want = px__bits_pow256((uint32_t)n) - 1;
        if (px_log2_q8(n) != want)
            px_test_fail(__FILE__, __LINE__, "px_log2_q8(%d) = %d, floor(256 log2 n) = %d", n, px_log2_q8(n), want);
        n_checked++;
    }
    CHECK_EQ(px_log2_q8(1), 0);
    CHECK_EQ(px_log2_q8(2), 256);
    CHECK_EQ(px_log2_q8(3), 405); /* 256 * 1.58496 = 405.75 */
    CHECK_EQ(px_log2_q8(65535), 4095);
    CHECK_EQ(px_log2_q8(32768), 3840);
    CHECK_EQ(px_lod_shift(902, 600, 451, 300), 256);
    CHECK_EQ(px_lod_shift(451, 300, 451, 300), 0);
    printf("  %d sides checked against the bit length of n^256\n", n_checked);
}

TEST(anysize_scale_q16_rounds_half_up)
{
    CHECK_EQ(px_scale_q16(7, 3, 3), 7);         /* the reference size: identity */
    CHECK_EQ(px_scale_q16(-7, 5, 5), -7);
    CHECK_EQ(px_scale_q16(1, 1, 2), 1);         /* 0.5 -> 1 */
    CHECK_EQ(px_scale_q16(-1, 1, 2), 0);        /* -0.5 -> 0 (half up) */
    CHECK_EQ(px_scale_q16(-3, 1, 2), -1);       /* -1.5 -> -1 */
    CHECK_EQ(px_scale_q16(1, 1, 3), 0);         /* 0.333 -> 0 */
    CHECK_EQ(px_scale_q16(-1, 1, 3), 0);        /* -0.333 -> 0 */
    CHECK_EQ(px_scale_q16(-2, 1, 3), -1);       /* -0.667 -> -1 */
    CHECK_EQ(px_scale_q16(INT32_MAX, 65535, 1), (int64_t)INT32_MAX * 65535);
    CHECK_EQ(px_scale_q16(INT32_MIN, 65535, 1), (int64_t)INT32_MIN * 65535);
    CHECK_EQ(px_scale_q16(65536 * 225 + 32768, 902, 451), 65536 * 451); /* the centre 225.5 of 451 texels -> 451.0 of 902 */
}

/* ---- building any-size programs ------------------------------------------------------------- */

/* The program image `fixed` with its first input made any-size (bounds lo, hi, pixels): flag bit
 * 1, format 1.1; 0, or -1 when it has no input that can be one (an atlas). */
static int px__make_any(pxvm_image *img, int lo, int hi, uint32_t pixels)
{
    int nslots = img->px[6];
    for (int k = 1; k <= nslots; k++) {
        uint8_t *d = img->px + 4u * (size_t)(PXI_HEADER_PIXELS + PXI_SLOT_PIXELS * (k - 1));
        if (d[0] != PXI_ROLE_INPUT)
            continue;
        if (pxi_read_le(d, 4, 0, 4) || pxi_read_le(d, 5, 0, 4))
            return -1;
        d[1] |= PXI_SLOT_ANYSIZE;
        pxi_write_le(d, 3, 0, 2, (uint32_t)lo);
        pxi_write_le(d, 3, 2, 2, (uint32_t)hi);
        pxi_write_le(d, 4, 0, 4, pixels);
        img->px[5] = 1;
        return k;
    }
    return -1;
}

TEST(anysize_reference_size_resolves_to_the_fixed_program)
{
    static const char *const names[] = {"foveate273", "grid", "logpolar", "uniform", "v1", "aniso", "pyramid",
                                        "resize_fit", "dot_test"};
    pxvm_limits lim;
    pxvm_limits_default(&lim);
    int identical = 0, refused = 0;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char path[64];
        snprintf(path, sizeof path, "programs/%s.pxi", names[i]);
        pxvm_image fixed, any;
        pxvm_error err;
        if (pxvm_png_load(path, &lim, &fixed, &err) < 0) {
            px_test_fail(__FILE__, __LINE__, "%s", err.msg);
            continue;
        }
        pxvm_image_alloc(&any, fixed.w, fixed.h, &err);
        memcpy(any.px, fixed.px, (size_t)fixed.w * (size_t)fixed.h * 4u);
        pxvm_program poly, res;
        if (px__make_any(&any, 0, 0, 0) < 0) {
            pxvm_image_free(&any);
        } else if (pxvm_program_from_image(&any, &lim, &poly, &err) < 0) {
            CHECK(err.code == PXE_ANY_READER || err.code == PXE_ANY_INCREMENTAL); /* V-ANY-6: a reader that cannot be rescaled */
            CHECK_STR(err.msg, "any-size slot");
            refused++;
        } else {
            CHECK_EQ(poly.any_size, 1);
            if (pxvm_program_resolve(&poly, NULL, &lim, &res, &err) < 0) {
                px_test_fail(__FILE__, __LINE__, "%s: %s", names[i], err.msg);
            } else {
                size_t bytes = (size_t)fixed.w * (size_t)fixed.h * 4u;
                if (res.image.w != fixed.w || res.image.h != fixed.h || memcmp(res.image.px, fixed.px, bytes))
                    px_test_fail(__FILE__, __LINE__, "%s: the resolution at the reference size differs from the program",
                                 names[i]);
                else
                    identical++;
                CHECK_EQ(res.any_size, 0);
                CHECK_EQ(res.format_minor, 0);
                pxvm_program_free(&res);
            }
            pxvm_program_free(&poly);
        }
        pxvm_image_free(&fixed);
    }
    printf("  %d programs identical at their reference size, %d refused as any-size (V-ANY-6)\n", identical, refused);
    CHECK(identical >= 5);
}

/* A builder of 'image' 64x48 any-size (slot 1) and 'out' 16x8 (slot 2), then PYRAMID image. */
static void px__any_pyramid(pxvm_builder *b)
{
    pxvm_build_init(b, 32);
    pxvm_build_slot(b, PXI_ROLE_INPUT, "image", 64, 48);
    pxvm_build_slot(b, PXI_ROLE_OUTPUT, "out", 16, 8);
    pxvm_build_any_size(b, 1, 0, 0, 0);
    int32_t f[PXI_MAX_FIELDS] = {0};
    f[PX_FI(PYRAMID, slot)] = 1;
    pxvm_build_insn(b, PX_OP_PYRAMID, f);
}

/* 'image' 64x48 any-size, 'out' 16x8: PYRAMID; SAMPLE (absolute) and ANISO (relative to register 0). */
static void px__sampler(pxvm_image *out)
{
    pxvm_builder b;
    pxvm_error err;
    px__any_pyramid(&b);
    int32_t f[PXI_MAX_FIELDS] = {0};
    f[PX_FI(SAMPLE, src)] = 1, f[PX_FI(SAMPLE, dst)] = 2, f[PX_FI(SAMPLE, w)] = 8, f[PX_FI(SAMPLE, h)] = 8;
    f[PX_FI(SAMPLE, cu)] = 20 * 65536 + 77, f[PX_FI(SAMPLE, cv)] = 30 * 65536 - 5;
    f[PX_FI(SAMPLE, du)] = 2 * 65536 + 3, f[PX_FI(SAMPLE, dv)] = -3 * 65536, f[PX_FI(SAMPLE, lod)] = 300;
    pxvm_build_insn(&b, PX_OP_SAMPLE, f);
    memset(f, 0, sizeof f);
    f[PX_FI(ANISO, src)] = 1, f[PX_FI(ANISO, dst)] = 2, f[PX_FI(ANISO, mode)] = PX_MODE_REL(0, 0);
    f[PX_FI(ANISO, dst_x)] = 8, f[PX_FI(ANISO, w)] = 8, f[PX_FI(ANISO, h)] = 8;
    f[PX_FI(ANISO, cu)] = -5 * 65536, f[PX_FI(ANISO, cv)] = 7 * 65536 + 1;
    f[PX_FI(ANISO, du)] = 65536, f[PX_FI(ANISO, dv)] = 65536, f[PX_FI(ANISO, lod)] = 10, f[PX_FI(ANISO, taps)] = 4;
    f[PX_FI(ANISO, tdu)] = 32768, f[PX_FI(ANISO, tdv)] = -32769;
    pxvm_build_insn(&b, PX_OP_ANISO, f);
    pxvm_build_insn(&b, PX_OP_HALT, NULL);
    if (pxvm_build_finish(&b, out, &err) < 0)
        px_test_fail(__FILE__, __LINE__, "%s", err.msg);
    pxvm_build_free(&b);
}

TEST(anysize_resolution_rewrites_the_descriptor_and_the_operands)
{
    pxvm_image img;
    pxvm_limits lim;
    pxvm_error err;
    pxvm_limits_default(&lim);
    px__sampler(&img);
    CHECK_EQ(img.px[5], 1); /* written as format 1.1 */
    pxvm_program poly, res;
    if (pxvm_program_from_image(&img, &lim, &poly, &err) < 0) {
        px_test_fail(__FILE__, __LINE__, "%s", err.msg);
        return;
    }
    CHECK_EQ(poly.slots[1].min_side, 1);
    CHECK_EQ(poly.slots[1].max_side, 16384);
    int wh[6] = {0, 0, 129, 31, 0, 0};
    if (pxvm_program_resolve(&poly, wh, &lim, &res, &err) < 0) {
        px_test_fail(__FILE__, __LINE__, "%s", err.msg);
        pxvm_program_free(&poly);
        return;
    }
    CHECK_EQ(res.slots[1].w, 129);
    CHECK_EQ(res.slots[1].h, 31);
    CHECK_EQ(res.slots[1].flags, 0);
    CHECK_EQ(res.slots[1].levels, 8);
    const pxi_insn *s = &res.insns[1], *a = &res.insns[2], *s0 = &poly.insns[1], *a0 = &poly.insns[2];
    CHECK_EQ(PX_ARG(s, SAMPLE, cu), px_scale_q16(PX_ARG(s0, SAMPLE, cu), 129, 64));
    CHECK_EQ(PX_ARG(s, SAMPLE, cv), px_scale_q16(PX_ARG(s0, SAMPLE, cv), 31, 48));
    CHECK_EQ(PX_ARG(s, SAMPLE, du), px_scale_q16(PX_ARG(s0, SAMPLE, du), 129, 64));
    CHECK_EQ(PX_ARG(s, SAMPLE, dv), px_scale_q16(PX_ARG(s0, SAMPLE, dv), 31, 48));
    int d = px_lod_shift(129, 31, 64, 48);
    CHECK_EQ(d, px_log2_q8(129) - px_log2_q8(64)); /* the wider side's change */
    CHECK_EQ(PX_ARG(s, SAMPLE, lod), 300 + d);
    CHECK_EQ(PX_ARG(a, ANISO, tdu), px_scale_q16(32768, 129, 64));
    CHECK_EQ(PX_ARG(a, ANISO, tdv), px_scale_q16(-32769, 31, 48));
    CHECK_EQ(PX_ARG(a, ANISO, cu), px_scale_q16(-5 * 65536, 129, 64));
    CHECK_EQ(PX_ARG(a, ANISO, lod), 10 + d);
    CHECK_EQ(PX_ARG(a, ANISO, taps), PX_ARG(a0, ANISO, taps));
    pxvm_program_free(&res);
    /* smaller: the LOD falls, clamped at 0 */
    wh[2] = 16, wh[3] = 12;
    if (pxvm_program_resolve(&poly, wh, &lim, &res, &err) == 0) {
        CHECK_EQ(PX_ARG(&res.insns[1], SAMPLE, lod), 0);
        CHECK_EQ(PX_ARG(&res.insns[2], ANISO, lod), 0);
        pxvm_program_free(&res);
    } else {
        px_test_fail(__FILE__, __LINE__, "%s", err.msg);
    }
    /* a fixed slot asked for another size is a usage error */
    wh[2] = wh[3] = 0, wh[4] = 17, wh[5] = 8;
    CHECK(pxvm_program_resolve(&poly, wh, &lim, &res, &err) < 0);
    CHECK_EQ(err.code, PXE_RESOLVE_FIXED);
    CHECK_STR(err.msg, "not any-size");
    pxvm_program_free(&poly);
}

TEST(anysize_foveate273_any_resolves_to_foveate273)
{
    pxvm_limits lim;
    pxvm_limits_default(&lim);
    pxvm_program poly, fixed, res;
    pxvm_error err;
    if (pxvm_program_load("programs/foveate273_any.pxi", &lim, &poly, &err) < 0 ||
        pxvm_program_load("programs/foveate273.pxi", &lim, &fixed, &err) < 0) {
        px_test_fail(__FILE__, __LINE__, "%s", err.msg);
        return;
    }
    CHECK_EQ(poly.format_minor, 1);
    CHECK_EQ(poly.slots[1].min_side, 16);
    if (pxvm_program_resolve(&poly, NULL, &lim, &res, &err) < 0) {
        px_test_fail(__FILE__, __LINE__, "%s", err.msg);
    } else {
        CHECK(res.image.w == fixed.image.w && res.image.h == fixed.image.h &&
              !memcmp(res.image.px, fixed.image.px, (size_t)fixed.image.w * (size_t)fixed.image.h * 4u));
        pxvm_program_free(&res);
    }
    pxvm_program_free(&poly);
    pxvm_program_free(&fixed);
}

/* ---- the runner: bound at W x H == a fresh runner of the resolution at W x H ------------------ */

/* Every output slot's level 0 and every atlas's geometry after a run, in one buffer. */
static uint8_t *px__outputs(const pxvm_prog *prog, pxvm_runner *run, size_t *len)
{
    size_t n = 0;
    uint8_t *all = NULL;
    for (int k = 0; k < pxvm_prog_slot_count(prog); k++) {
        pxvm_slot_info si;
        pxvm_prog_slot(prog, k, &si);
        if (strcmp(si.role, "output"))
            continue;
        size_t bytes = (size_t)si.w * (size_t)si.h * 4u, geom = (size_t)si.patch_count * PXVM_GEOM_INTS * 4u;
        all = realloc(all, n + bytes + geom);
        pxvm_view v = {all + n, -1, 1, si.w, si.h, 4, (int64_t)bytes, (int64_t)si.w * 4, 4, 1};
        if (pxvm_runner_read(run, k, 0, 0, &v) ||
            (geom && pxvm_runner_read_geometry(run, k, 0, 1, (int32_t *)(void *)(all + n + bytes), -1)))
            px_test_fail(__FILE__, __LINE__, "read: %s", pxvm_errmsg());
        n += bytes + geom;
    }
    *len = n;
    return all;
}

/* Runs `run` (the polymorphic runner) on img bound to `slot`, and a fresh runner of the
 * resolution at img's size; 0 when every output byte agrees. rel: fixation register 0 is the
 * normalized (0.3, 0.6): set in the fresh runner here, in `run` once when it opened (so that the
 * runner converts it again at every size it switches to). */
static int px__same_as_fresh(const pxvm_prog *prog, pxvm_runner *run, int slot, const pxvm_image *img, int rel)
{
    double fx[2] = {0.3, 0.6};
    pxvm_view v = pxvm_view_host(img->px, img->w, img->h, 4);
    if (pxvm_runner_bind(run, slot, 0, &v) || pxvm_runner_run(run)) {
        px_test_fail(__FILE__, __LINE__, "%dx%d: %s", img->w, img->h, pxvm_errmsg());
        return -1;
    }
    int bw = 0, bh = 0;
    pxvm_runner_slot_size(run, slot, &bw, &bh);
    CHECK(bw == img->w && bh == img->h);
    int wh[2 * (PXVM_MAX_SLOTS + 1)] = {0};
    wh[2 * slot] = img->w, wh[2 * slot + 1] = img->h;
    pxvm_prog *res = NULL;
    pxvm_runner *fresh = NULL;
    if (pxvm_prog_resolve(prog, wh, &res) || pxvm_runner_open(res, "cpu", 0, 2, 1, &fresh) ||
        pxvm_runner_bind(fresh, slot, 0, &v) || (rel && pxvm_runner_set_fixations_normalized(fresh, 0, 1, 0, 1, fx)) ||
        pxvm_runner_run(fresh)) {
        px_test_fail(__FILE__, __LINE__, "%dx%d fresh: %s", img->w, img->h, pxvm_errmsg());
        pxvm_runner_close(fresh);
        pxvm_prog_free(res);
        return -1;
    }
    size_t na, nb;
    uint8_t *a = px__outputs(prog, run, &na), *b = px__outputs(res, fresh, &nb);
    int same = na == nb && !memcmp(a, b, na);
    if (!same)
        px_test_fail(__FILE__, __LINE__, "%dx%d: the polymorphic runner's outputs differ from the resolution's", img->w,
                     img->h);
    free(a);
    free(b);
    pxvm_runner_close(fresh);
    pxvm_prog_free(res);
    return same ? 0 : -1;
}

/* Sizes in order: fixed edges, then `nrandom` random ones within lo..hi. */
static int px__sizes(int lo, int big, int nrandom, uint64_t *rng, int (*wh)[2])
{
    static const int edge[][2] = {{1, 1}, {1, 37}, {53, 1}, {16, 16}, {17, 16}, {451, 300}, {997, 641}, {3, 2},
                                  {902, 600}, {225, 150}, {31, 500}, {1000, 17}, {4096, 2160}, {7680, 4320}};
    int n = 0;
    for (size_t i = 0; i < sizeof edge / sizeof edge[0]; i++) {
        if (edge[i][0] < lo || edge[i][1] < lo || (!big && (edge[i][0] > 2000 || edge[i][1] > 2000)))
            continue;
        wh[n][0] = edge[i][0], wh[n][1] = edge[i][1], n++;
    }
    for (int i = 0; i < nrandom; i++, n++) {
        wh[n][0] = lo + (int)(px_rand(rng) % (uint64_t)(1200 - lo));
        wh[n][1] = lo + (int)(px_rand(rng) % (uint64_t)(900 - lo));
    }
    return n;
}

/* The executor of the polymorphic runners: PXVM_TEST_EXECUTOR (default cpu); the fresh runner of each
 * resolution is always the CPU reference, so on cuda the property is polymorphic GPU == compiled CPU. */
static const char *px__executor(void)
{
    const char *name = getenv("PXVM_TEST_EXECUTOR");
    return name && *name ? name : "cpu";
}

static void px__property(const pxvm_prog *prog, const char *slot_name, int lo, int big, int nrandom, int rel,
                         uint64_t seed)
{
    pxvm_runner *run = NULL;
    if (pxvm_runner_open(prog, px__executor(), 0, 2, 1, &run)) {
        px_test_fail(__FILE__, __LINE__, "%s", pxvm_errmsg());
        return;
    }
    double fx[2] = {0.3, 0.6};
    if (rel && pxvm_runner_set_fixations_normalized(run, 0, 1, 0, 1, fx))
        px_test_fail(__FILE__, __LINE__, "%s", pxvm_errmsg());
    int slot = pxvm_prog_slot_find(prog, slot_name), wh[64][2];
    uint64_t rng = seed;
    int n = px__sizes(lo, big, nrandom, &rng, wh), ok = 0;
    for (int i = 0; i < n; i++) {
        pxvm_image img = px_random_image(wh[i][0], wh[i][1], &rng);
        ok += px__same_as_fresh(prog, run, slot, &img, rel) == 0;
        pxvm_image_free(&img);
    }
    /* back to the first size again: from the cache */
    pxvm_image img = px_random_image(wh[0][0], wh[0][1], &rng);
    ok += px__same_as_fresh(prog, run, slot, &img, rel) == 0;
    pxvm_image_free(&img);
    printf("  %d of %d sizes byte-identical to a fresh runner of the resolution (%s):", ok, n + 1, px__executor());
    for (int i = 0; i < n; i++)
        printf(" %dx%d", wh[i][0], wh[i][1]);
    printf(", %dx%d again\n", wh[0][0], wh[0][1]);
    pxvm_runner_close(run);
}

TEST(anysize_runner_foveate273_any_equals_the_resolution)
{
    pxvm_prog *prog;
    if (pxvm_prog_load("programs/foveate273_any.pxi", NULL, &prog)) {
        px_test_fail(__FILE__, __LINE__, "%s", pxvm_errmsg());
        return;
    }
    px__property(prog, "image", 16, 1, 12, 0, 273);
    pxvm_prog_free(prog);
}

TEST(anysize_runner_relative_and_aniso_equals_the_resolution)
{
    pxvm_image img;
    px__sampler(&img);
    void *png;
    size_t len;
    pxvm_prog *prog;
    if (pxvm_image_encode_png(img.px, img.w, img.h, &png, &len) || pxvm_prog_from_png(png, len, "sampler", NULL, &prog)) {
        px_test_fail(__FILE__, __LINE__, "%s", pxvm_errmsg());
        pxvm_image_free(&img);
        return;
    }
    px__property(prog, "image", 1, 0, 12, 1, 641);
    pxvm_free(png);
    pxvm_image_free(&img);
    pxvm_prog_free(prog);
}

TEST(anysize_runner_resize_equals_the_resolution)
{
    pxvm_builder b;
    pxvm_error err;
    pxvm_image img;
    pxvm_build_init(&b, 32);
    pxvm_build_slot(&b, PXI_ROLE_INPUT, "image", 40, 30);
    pxvm_build_slot(&b, PXI_ROLE_OUTPUT, "out", 24, 24);
    pxvm_build_any_size(&b, 1, 0, 2048, 0);
    int32_t f[PXI_MAX_FIELDS] = {0};
    f[PX_FI(RESIZE, src)] = 1, f[PX_FI(RESIZE, dst)] = 2, f[PX_FI(RESIZE, filter)] = 3;
    f[PX_FI(RESIZE, w)] = 24, f[PX_FI(RESIZE, h)] = 24, f[PX_FI(RESIZE, fit)] = 1, f[PX_FI(RESIZE, pad_a)] = 255;
    pxvm_build_insn(&b, PX_OP_RESIZE, f);
    pxvm_build_insn(&b, PX_OP_HALT, NULL);
    if (pxvm_build_finish(&b, &img, &err) < 0)
        px_test_fail(__FILE__, __LINE__, "%s", err.msg);
    pxvm_build_free(&b);
    void *png;
    size_t len;
    pxvm_prog *prog;
    if (pxvm_image_encode_png(img.px, img.w, img.h, &png, &len) || pxvm_prog_from_png(png, len, "resize", NULL, &prog)) {
        px_test_fail(__FILE__, __LINE__, "%s", pxvm_errmsg());
        pxvm_image_free(&img);
        return;
    }
    px__property(prog, "image", 1, 0, 8, 0, 997);
    pxvm_free(png);
    pxvm_image_free(&img);
    pxvm_prog_free(prog);
}

/* 'image' 64x48 any-size, 'out' 16x8: PYRAMID, then a SAMPLE whose cu and cv are near int32's
 * edges once rescaled (U-BIND-5 at some widths and heights, not at others); loaded under lim. */
static void px__range_image(int32_t q, pxvm_image *img)
{
    pxvm_builder b;
    pxvm_error err;
    px__any_pyramid(&b);
    int32_t f[PXI_MAX_FIELDS] = {0};
    f[PX_FI(SAMPLE, src)] = 1, f[PX_FI(SAMPLE, dst)] = 2, f[PX_FI(SAMPLE, w)] = 8, f[PX_FI(SAMPLE, h)] = 8;
    f[PX_FI(SAMPLE, cu)] = q, f[PX_FI(SAMPLE, cv)] = -q, f[PX_FI(SAMPLE, du)] = 65536, f[PX_FI(SAMPLE, dv)] = 65536;
    pxvm_build_insn(&b, PX_OP_SAMPLE, f);
    pxvm_build_insn(&b, PX_OP_HALT, NULL);
    if (pxvm_build_finish(&b, img, &err) < 0)
        px_test_fail(__FILE__, __LINE__, "%s", err.msg);
    pxvm_build_free(&b);
}
static pxvm_prog *px__range_prog(const pxvm_limits *lim, int32_t q)
{
    pxvm_image img;
    px__range_image(q, &img);
    void *png;
    size_t len;
    pxvm_prog *prog = NULL;
    if (pxvm_image_encode_png(img.px, img.w, img.h, &png, &len) || pxvm_prog_from_png(png, len, "range", lim, &prog))
        px_test_fail(__FILE__, __LINE__, "%s", pxvm_errmsg());
    else
        pxvm_free(png);
    pxvm_image_free(&img);
    return prog;
}

/* A bind of w x h to `run`'s slot 1: 0 when it is taken (then the outputs equal a fresh runner's)
 * or refused as `refused` says (then the runner keeps the size it had and still runs). */
static void px__bind_edge(const pxvm_prog *prog, pxvm_runner *run, int w, int h, const char *refused, uint64_t *rng)
{
    pxvm_image img = px_random_image(w, h, rng);
    if (!refused) {
        px__same_as_fresh(prog, run, 1, &img, 0);
    } else {
        int bw = 0, bh = 0, aw = 0, ah = 0;
        pxvm_runner_slot_size(run, 1, &bw, &bh);
        pxvm_view v = pxvm_view_host(img.px, w, h, 4);
        CHECK_EQ(pxvm_runner_bind(run, 1, 0, &v), PXVM_UNLINKABLE);
        if (!strstr(pxvm_errmsg(), refused))
            px_test_fail(__FILE__, __LINE__, "%dx%d: '%s' does not say '%s'", w, h, pxvm_errmsg(), refused);
        pxvm_runner_slot_size(run, 1, &aw, &ah);
        CHECK(aw == bw && ah == bh);
        CHECK_EQ(pxvm_runner_run(run), 0);
    }
    pxvm_image_free(&img);
}

/* The runner's size changes (a resolution at each size: U-BIND-5, the memory limit, the PYRAMID's
 * rules) keep every refusal at its edge: the last size accepted == a fresh runner, the first
 * refused says why and changes nothing, and sizes after a refusal still equal a fresh runner. */
TEST(anysize_runner_size_changes_refuse_at_the_edges)
{
    const int32_t q = (1 << 30) - 3; /* cu = q at 64 wide: 128 -> 2q fits, 129 does not; cv = -q at 48 high: 96, 97 */
    CHECK(px_scale_q16(q, 128, 64) <= INT32_MAX && px_scale_q16(q, 129, 64) > INT32_MAX);
    CHECK(px_scale_q16(-q, 96, 48) >= INT32_MIN && px_scale_q16(-q, 97, 48) < INT32_MIN);
    uint64_t rng = 23;
    pxvm_prog *prog = px__range_prog(NULL, q);
    static const struct { int w, h; const char *refused; } steps[] = {
        {100, 48, NULL}, {120, 40, NULL}, {128, 48, NULL}, {129, 48, "outside int32"}, {128, 96, NULL},
        {128, 97, "outside int32"}, {129, 30, "outside int32"}, {90, 40, NULL}, {128, 96, NULL}, {7, 5, NULL},
    };
    pxvm_runner *run = NULL;
    if (!prog || pxvm_runner_open(prog, px__executor(), 0, 1, 1, &run)) {
        px_test_fail(__FILE__, __LINE__, "%s", pxvm_errmsg());
    } else {
        for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++)
            px__bind_edge(prog, run, steps[i].w, steps[i].h, steps[i].refused, &rng);
        pxvm_runner_close(run);
    }
    pxvm_prog_free(prog);
    run = NULL;
    /* the memory limit: what the program needs at 240x200, so that 241x200 is over it (a limit above
     * what decoding the program needs; operands that fit at every size) */
    pxvm_limits lim;
    pxvm_limits_default(&lim);
    pxvm_prog *at = NULL, *res = NULL;
    int wh[6] = {0, 0, 240, 200, 0, 0};
    prog = px__range_prog(&lim, 65536);
    if (!prog || pxvm_prog_resolve(prog, wh, &res)) {
        px_test_fail(__FILE__, __LINE__, "%s", pxvm_errmsg());
        pxvm_prog_free(prog);
        return;
    }
    pxvm_prog_free(res);
    {
        pxvm_image img;
        pxvm_program poly, r;
        pxvm_error err;
        px__range_image(65536, &img);
        if (pxvm_program_from_image(&img, &lim, &poly, &err) < 0) {
            px_test_fail(__FILE__, __LINE__, "%s", err.msg);
        } else {
            if (pxvm_program_resolve(&poly, wh, &lim, &r, &err) < 0)
                px_test_fail(__FILE__, __LINE__, "%s", err.msg);
            else
                lim.max_memory = r.memory, pxvm_program_free(&r);
            pxvm_program_free(&poly);
        }
        pxvm_image_free(&img);
    }
    at = px__range_prog(&lim, 65536);
    if (!at || pxvm_runner_open(at, px__executor(), 0, 1, 1, &run)) {
        px_test_fail(__FILE__, __LINE__, "%s", pxvm_errmsg());
    } else {
        static const struct { int w, h; const char *refused; } mem[] = {
            {100, 48, NULL}, {240, 200, NULL}, {241, 200, "the slots need"}, {240, 201, "the slots need"},
            {200, 150, NULL}, {240, 200, NULL},
        };
        for (size_t i = 0; i < sizeof mem / sizeof mem[0]; i++)
            px__bind_edge(at, run, mem[i].w, mem[i].h, mem[i].refused, &rng);
        pxvm_runner_close(run);
    }
    pxvm_prog_free(at);
    pxvm_prog_free(prog);
}

/* U-BIND-4's pixel bound at its edge through the runner: 'image' (64x48) takes at most 4899
 * pixels; 69x71 and 71x69 are exactly 4899 (taken, and equal to a fresh runner at that size),
 * 70x70 is 4900, one more (refused, naming it, the runner unchanged): as the first size change
 * and as a later one, and again after the refusal. */
TEST(anysize_runner_takes_exactly_the_max_pixels)
{
    pxvm_builder b;
    pxvm_image img;
    pxvm_error err;
    px__any_pyramid(&b);
    pxvm_build_any_size(&b, 1, 0, 0, 4899);
    pxvm_build_insn(&b, PX_OP_HALT, NULL);
    if (pxvm_build_finish(&b, &img, &err) < 0) {
        px_test_fail(__FILE__, __LINE__, "%s", err.msg);
        pxvm_build_free(&b);
        return;
    }
    pxvm_build_free(&b);
    CHECK(69 * 71 == 4899 && 70 * 70 == 4899 + 1);
    void *png;
    size_t len;
    pxvm_prog *prog = NULL;
    pxvm_runner *run = NULL;
    if (pxvm_image_encode_png(img.px, img.w, img.h, &png, &len) || pxvm_prog_from_png(png, len, "pixels", NULL, &prog) ||
        pxvm_runner_open(prog, px__executor(), 0, 1, 1, &run)) {
        px_test_fail(__FILE__, __LINE__, "%s", pxvm_errmsg());
    } else {
        uint64_t rng = 41;
        const char *over = "a 70x70 image cannot be bound to slot 1 ('image'): it takes 1x1 .. 16384x16384, at most 4899 pixels";
        px__bind_edge(prog, run, 69, 71, NULL, &rng); /* the first change of size */
        px__bind_edge(prog, run, 71, 69, NULL, &rng); /* a later one */
        px__bind_edge(prog, run, 70, 70, over, &rng);
        px__bind_edge(prog, run, 69, 71, NULL, &rng);
        pxvm_prog *res = NULL;
        int wh[6] = {0, 0, 71, 69, 0, 0};
        CHECK_EQ(pxvm_prog_resolve(prog, wh, &res), 0);
        pxvm_prog_free(res);
        wh[2] = wh[3] = 70;
        CHECK_EQ(pxvm_prog_resolve(prog, wh, &res), PXVM_UNLINKABLE);
        CHECK_STR(pxvm_errmsg(), over);
        pxvm_free(png);
    }
    pxvm_runner_close(run);
    pxvm_prog_free(prog);
    pxvm_image_free(&img);
}

/* A bind at a new size is checked (the view, the bounds, the batch) before the size changes: every
 * refusal there says what the same view says at the size held and changes nothing; the next size
 * equals a fresh runner. */
TEST(anysize_runner_refuses_a_new_size_as_the_size_held)
{
    pxvm_prog *prog;
    pxvm_runner *run;
    if (pxvm_prog_load("programs/foveate273_any.pxi", NULL, &prog) || pxvm_runner_open(prog, px__executor(), 0, 1, 1, &run)) {
        px_test_fail(__FILE__, __LINE__, "%s", pxvm_errmsg());
        return;
    }
    uint64_t rng = 31;
    px__bind_edge(prog, run, 96, 64, NULL, &rng); /* a first change of size */
    px__bind_edge(prog, run, 80, 60, NULL, &rng); /* a later one */
    pxvm_image img = px_random_image(100, 70, &rng);
    pxvm_view v = pxvm_view_host(img.px, 100, 70, 4);
    /* each refusal: the class and words of the same view at the size held (no change of size) */
    for (int bad = 0; bad < 2; bad++) {
        char held[1024];
        pxvm_view same = v;
        same.w = 80, same.h = 60, same.channels = bad ? 4 : 2, v.channels = same.channels;
        int item = bad ? 1 : 0; /* bad 1: item 1 of a batch of 1 */
        int cls = pxvm_runner_bind(run, 1, item, &same);
        CHECK(cls != 0);
        snprintf(held, sizeof held, "%s", pxvm_errmsg());
        CHECK_EQ(pxvm_runner_bind(run, 1, item, &v), cls);
        CHECK_STR(pxvm_errmsg(), held);
    }
    v.channels = 4;
    int sw = 0, sh = 0;
    CHECK_EQ(pxvm_runner_slot_size(run, 1, &sw, &sh), 0);
    CHECK(sw == 80 && sh == 60);
    px__bind_edge(prog, run, 15, 40, "it takes 16x16 .. 16384x16384", &rng);
    px__bind_edge(prog, run, 16, 16, NULL, &rng);  /* the bounds' edge */
    px__bind_edge(prog, run, 100, 70, NULL, &rng);
    pxvm_image_free(&img);
    pxvm_runner_close(run);
    pxvm_prog_free(prog);
}

TEST(anysize_runner_refuses_sizes_outside_the_bounds_and_mixed_batches)
{
    pxvm_prog *prog;
    pxvm_runner *run;
    if (pxvm_prog_load("programs/foveate273_any.pxi", NULL, &prog) || pxvm_runner_open(prog, px__executor(), 0, 1, 2, &run)) {
        px_test_fail(__FILE__, __LINE__, "%s", pxvm_errmsg());
        return;
    }
    uint64_t rng = 5;
    pxvm_image small = px_random_image(15, 40, &rng), a = px_random_image(64, 48, &rng), two = px_random_image(80, 60 * 2, &rng);
    pxvm_view v = pxvm_view_host(small.px, small.w, small.h, 4);
    CHECK_EQ(pxvm_runner_bind(run, 1, 0, &v), PXVM_UNLINKABLE);
    CHECK_STR(pxvm_errmsg(), "a 15x40 image cannot be bound to slot 1 ('image'): it takes 16x16 .. 16384x16384");
    v = pxvm_view_host(a.px, a.w, a.h, 4);
    CHECK_EQ(pxvm_runner_bind(run, 1, 0, &v), 0);
    CHECK_EQ(pxvm_runner_bind(run, 1, 1, &v), 0); /* the same size: fine */
    pxvm_view w2 = pxvm_view_host(two.px, 80, 60, 4);
    CHECK_EQ(pxvm_runner_bind(run, 1, 1, &w2), PXVM_UNLINKABLE);
    CHECK_STR(pxvm_errmsg(), "item 0 is bound at 64x48, and the items of a batch share the size");
    w2.items = 2, w2.item_stride = 80 * 60 * 4;
    CHECK_EQ(pxvm_runner_bind(run, 1, 0, &w2), 0); /* every item at once */
    CHECK_EQ(pxvm_runner_run(run), 0);
    int sw, sh;
    CHECK_EQ(pxvm_runner_slot_size(run, 1, &sw, &sh), 0);
    CHECK(sw == 80 && sh == 60);
    pxvm_slot_info si;
    CHECK_EQ(pxvm_prog_slot(prog, 1, &si), 0);
    CHECK(si.any_size == 1 && si.min_side == 16 && si.max_side == 16384 && si.max_pixels == 0 && si.w == 451);
    pxvm_image_free(&small);
    pxvm_image_free(&a);
    pxvm_image_free(&two);
    pxvm_runner_close(run);
    pxvm_prog_free(prog);
}

/* A bind refused for a reason other than the size (here: items outside the batch, a NULL data
 * pointer) must not switch the runner: the old size and the bound images stay (review finding 10). */
TEST(anysize_refused_bind_leaves_the_size_and_the_images)
{
    pxvm_prog *prog;
    pxvm_runner *run;
    if (pxvm_prog_load("programs/foveate273_any.pxi", NULL, &prog) || pxvm_runner_open(prog, "cpu", 0, 1, 1, &run)) {
        px_test_fail(__FILE__, __LINE__, "%s", pxvm_errmsg());
        return;
    }
    uint64_t rng = 10;
    pxvm_image a = px_random_image(64, 48, &rng), b = px_random_image(100, 200, &rng);
    pxvm_view va = pxvm_view_host(a.px, a.w, a.h, 4), vb = pxvm_view_host(b.px, b.w, b.h, 4);
    CHECK_EQ(pxvm_runner_bind(run, 1, 0, &va), 0);
    CHECK_EQ(pxvm_runner_bind(run, 1, 1, &vb), PXVM_USAGE); /* item 1 of a batch of 1 */
    CHECK_STR(pxvm_errmsg(), "items 1..1 are outside the batch of 1");
    pxvm_view null_data = vb;
    null_data.data = NULL;
    CHECK_EQ(pxvm_runner_bind(run, 1, 0, &null_data), PXVM_USAGE);
    pxvm_view on_device = vb;
    on_device.device = 0;
    CHECK_EQ(pxvm_runner_bind(run, 1, 0, &on_device), PXVM_USAGE);
    CHECK_STR(pxvm_errmsg(), "CUDA device memory can be bound only on the CUDA-GL executor");
    int sw = 0, sh = 0;
    CHECK_EQ(pxvm_runner_slot_size(run, 1, &sw, &sh), 0);
    CHECK(sw == 64 && sh == 48);
    CHECK_EQ(pxvm_runner_run(run), 0); /* the 64x48 image is still bound */
    pxvm_image_free(&a);
    pxvm_image_free(&b);
    pxvm_runner_close(run);
    pxvm_prog_free(prog);
}

/* A size whose resolution is refused (U-BIND-5: a rescaled operand leaves int32) leaves the runner
 * as it was: the other input stays bound, the last image too, and a run runs (a review found a
 * size-change path that unbound every input and reloaded). */
TEST(anysize_refused_resolution_leaves_the_runner_as_it_was)
{
    static const char text[] = ".width 16\n.slot image input 64x48 any\n.slot b input 8x8\n.slot out output 24x16\n"
                               "SAMPLE src=image dst=out mode=linear at=(0,0) size=(8,8) center=(32000,10) step=(1,1) lod=0\n"
                               "SAMPLE src=b dst=out mode=linear at=(8,0) size=(8,8) center=(4,4) step=1 lod=0\nHALT\n";
    pxvm_prog *prog;
    pxvm_runner *run;
    if (pxvm_prog_assemble(text, "refused.pxs", NULL, &prog) || pxvm_runner_open(prog, "cpu", 0, 1, 1, &run)) {
        px_test_fail(__FILE__, __LINE__, "%s", pxvm_errmsg());
        return;
    }
    uint64_t rng = 11;
    pxvm_image a = px_random_image(64, 48, &rng), big = px_random_image(128, 48, &rng), b = px_random_image(8, 8, &rng);
    pxvm_view va = pxvm_view_host(a.px, a.w, a.h, 4), vbig = pxvm_view_host(big.px, big.w, big.h, 4),
              vb = pxvm_view_host(b.px, b.w, b.h, 4);
    CHECK_EQ(pxvm_runner_bind(run, 2, 0, &vb), 0);
    CHECK_EQ(pxvm_runner_bind(run, 1, 0, &va), 0);
    CHECK_EQ(pxvm_runner_run(run), 0);
    CHECK(pxvm_runner_bind(run, 1, 0, &vbig) != 0); /* 32000 at 128/64 leaves int32 in Q16 */
    CHECK_STR(pxvm_errmsg(), "128x48");
    int sw = 0, sh = 0;
    CHECK_EQ(pxvm_runner_slot_size(run, 1, &sw, &sh), 0);
    CHECK(sw == 64 && sh == 48);
    CHECK_EQ(pxvm_runner_run(run), 0); /* both inputs still bound */
    pxvm_image_free(&a);
    pxvm_image_free(&big);
    pxvm_image_free(&b);
    pxvm_runner_close(run);
    pxvm_prog_free(prog);
}

/* pxvm_runner_exec with a batch given image by image at a new size switches once, where binds one
 * by one would refuse the first (item 1 still bound at the old size; review finding 4); outputs
 * equal those of the same batch bound as one view. */
TEST(anysize_exec_batch_of_single_images_switches_once)
{
    pxvm_prog *prog;
    pxvm_runner *run, *ref;
    if (pxvm_prog_load("programs/foveate273_any.pxi", NULL, &prog) || pxvm_runner_open(prog, "cpu", 0, 1, 2, &run) ||
        pxvm_runner_open(prog, "cpu", 0, 1, 2, &ref)) {
        px_test_fail(__FILE__, __LINE__, "%s", pxvm_errmsg());
        return;
    }
    int out = pxvm_prog_slot_find(prog, "out");
    if (out < 0)
        for (int k = 0; k < pxvm_prog_slot_count(prog); k++) {
            pxvm_slot_info si;
            pxvm_prog_slot(prog, k, &si);
            if (!strcmp(si.role, "output"))
                out = k;
        }
    pxvm_slot_info so;
    CHECK_EQ(pxvm_prog_slot(prog, out, &so), 0);
    size_t obytes = (size_t)so.w * (size_t)so.h * 4u;
    uint8_t *o1 = malloc(2 * obytes), *o2 = malloc(2 * obytes);
    uint64_t rng = 4;
    int sizes[3][2] = {{451, 300}, {100, 200}, {37, 91}};
    for (int s = 0; s < 3; s++) {
        pxvm_image two = px_random_image(sizes[s][0], sizes[s][1] * 2, &rng);
        size_t item = (size_t)sizes[s][0] * (size_t)sizes[s][1] * 4u;
        pxvm_view one[2] = {pxvm_view_host(two.px, sizes[s][0], sizes[s][1], 4),
                            pxvm_view_host(two.px + item, sizes[s][0], sizes[s][1], 4)};
        int slots[2] = {1, 1}, items[2] = {0, 1}, kinds[1] = {0};
        pxvm_view ov = {o1, -1, 2, so.w, so.h, 4, (int64_t)obytes, (int64_t)so.w * 4, 4, 1};
        if (pxvm_runner_exec(run, 2, slots, items, one, 1, &out, kinds, &ov))
            px_test_fail(__FILE__, __LINE__, "%dx%d image by image: %s", sizes[s][0], sizes[s][1], pxvm_errmsg());
        pxvm_view both = one[0];
        both.items = 2, both.item_stride = (int64_t)item;
        pxvm_view ov2 = ov;
        ov2.data = o2;
        if (pxvm_runner_exec(ref, 1, slots, items, &both, 1, &out, kinds, &ov2))
            px_test_fail(__FILE__, __LINE__, "%dx%d as one view: %s", sizes[s][0], sizes[s][1], pxvm_errmsg());
        CHECK(!memcmp(o1, o2, 2 * obytes));
        pxvm_image_free(&two);
    }
    /* a mixed batch is still refused, naming the sizes */
    pxvm_image a = px_random_image(64, 48, &rng), b = px_random_image(80, 60, &rng);
    pxvm_view mixed[2] = {pxvm_view_host(a.px, a.w, a.h, 4), pxvm_view_host(b.px, b.w, b.h, 4)};
    int slots[2] = {1, 1}, items[2] = {0, 1};
    CHECK_EQ(pxvm_runner_exec(run, 2, slots, items, mixed, 0, NULL, NULL, NULL), PXVM_UNLINKABLE);
    CHECK_STR(pxvm_errmsg(), "the items of a batch share the size");
    free(o1);
    free(o2);
    pxvm_image_free(&a);
    pxvm_image_free(&b);
    pxvm_runner_close(run);
    pxvm_runner_close(ref);
    pxvm_prog_free(prog);
}

/* ---- a failed change of size (review finding 2): for any executor whose retarget fails ------- */

/* The CPU executor with a retarget that fails: mode 0 leaves the executor as it was; mode 1 first
 * switches (the executor then holds a program the runner does not believe it holds, as the
 * CUDA-GL executor does after a failure halfway); mode 2 as 0, and every later load fails too. */
static int px__fail_mode;
static pxvm_executor_ops px__failing_ops;

static int px__failing_retarget(pxvm_executor *ex, const pxvm_program *next, pxvm_error *err)
{
    if (px__fail_mode == 1 && pxvm_cpu_executor.retarget(ex, next, err) < 0)
        return -1;
    return pxvm_fail(err, PXE_CUDA_MEMORY, -1, -1, 1001ull, 1, "", 0, 1000ull, 1000ull); /* as a GPU short of memory */
}

static int px__failing_load(pxvm_executor *ex, const pxvm_program *prog, int batch, pxvm_error *err)
{
    if (px__fail_mode == 2)
        return pxvm_fail(err, PXE_CUDA_MEMORY, -1, -1, 1002ull, 1, "", 0, 1000ull, 1000ull);
    return pxvm_cpu_executor.load(ex, prog, batch, err);
}

TEST(anysize_failed_retarget_leaves_a_runner_that_runs_what_it_says)
{
    pxvm_prog *prog;
    if (pxvm_prog_load("programs/foveate273_any.pxi", NULL, &prog)) {
        px_test_fail(__FILE__, __LINE__, "%s", pxvm_errmsg());
        return;
    }
    px__failing_ops = pxvm_cpu_executor;
    px__failing_ops.retarget = px__failing_retarget;
    px__failing_ops.load = px__failing_load;
    uint64_t rng = 8;
    pxvm_image a = px_random_image(64, 48, &rng), b = px_random_image(100, 200, &rng);
    pxvm_view va = pxvm_view_host(a.px, a.w, a.h, 4), vb = pxvm_view_host(b.px, b.w, b.h, 4);
    for (int mode = 0; mode < 3; mode++) {
        pxvm_runner *run;
        if (pxvm_runner_open(prog, "cpu", 0, 1, 1, &run)) {
            px_test_fail(__FILE__, __LINE__, "%s", pxvm_errmsg());
            break;
        }
        CHECK_EQ(pxvm_runner_bind(run, 1, 0, &va), 0);
        CHECK_EQ(pxvm_runner_run(run), 0);
        px__fail_mode = mode;
        pxvm_runner_test_set_ops(run, &px__failing_ops);
        CHECK_EQ(pxvm_runner_bind(run, 1, 0, &vb), PXVM_UNAVAILABLE);
        CHECK_STR(pxvm_errmsg(), "the program needs 1001 bytes of GPU memory");
        int sw = 0, sh = 0;
        CHECK_EQ(pxvm_runner_slot_size(run, 1, &sw, &sh), 0);
        CHECK(sw == 64 && sh == 48);
        if (mode == 2) { /* lost: every call refuses cleanly */
            CHECK_STR(pxvm_errmsg(), "loading the program again failed too (the program needs 1002 bytes");
            CHECK_EQ(pxvm_runner_run(run), PXVM_UNAVAILABLE);
            CHECK_STR(pxvm_errmsg(), "pxvm_runner_run: this runner has no program since a change of input size failed");
            CHECK_EQ(pxvm_runner_bind(run, 1, 0, &va), PXVM_UNAVAILABLE);
            int32_t fx[2] = {0, 0};
            CHECK_EQ(pxvm_runner_read_fixations(run, 0, 1, fx, -1), PXVM_UNAVAILABLE);
            pxvm_runner_close(run);
            continue;
        }
        CHECK_STR(pxvm_errmsg(), "the runner stays at 64x48 with no input bound");
        CHECK_EQ(pxvm_runner_run(run), PXVM_UNLINKABLE); /* nothing bound: said, not run on stale bytes */
        CHECK_STR(pxvm_errmsg(), "is not bound to an image");
        /* at the old size it runs, and gives the bytes of a runner that never failed */
        pxvm_runner_test_set_ops(run, &pxvm_cpu_executor);
        CHECK_EQ(px__same_as_fresh(prog, run, 1, &a, 0), 0);
        CHECK_EQ(px__same_as_fresh(prog, run, 1, &b, 0), 0); /* and switches again */
        pxvm_runner_close(run);
    }
    pxvm_image_free(&a);
    pxvm_image_free(&b);
    pxvm_prog_free(prog);
}

/* The side limit is 1..65535 at every door that takes pxvm_limits (review finding 12): 65535
 * loads, 65536 and 2^32-1 are usage errors. */
TEST(anysize_max_side_limit_is_at_most_65535)
{
    pxvm_limits lim;
    pxvm_limits_default(&lim);
    pxvm_prog *prog = NULL;
    lim.max_side = 65535;
    CHECK_EQ(pxvm_prog_load("programs/foveate273_any.pxi", &lim, &prog), 0);
    pxvm_prog_free(prog);
    uint32_t bad[] = {0, 65536, UINT32_MAX};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        lim.max_side = bad[i];
        prog = NULL;
        CHECK_EQ(pxvm_prog_load("programs/foveate273_any.pxi", &lim, &prog), PXVM_USAGE);
        CHECK_STR(pxvm_errmsg(), "pxvm_prog_load: pxvm_limits.max_side must be 1..65535");
        CHECK(prog == NULL);
        CHECK_EQ(pxvm_prog_assemble(".width 16\nHALT\n", "t", &lim, &prog), PXVM_USAGE);
        CHECK_EQ(pxvm_prog_from_plan("{}", "t", &lim, &prog), PXVM_USAGE);
        uint8_t *rgba = NULL;
        int w, h;
        CHECK_EQ(pxvm_image_load("programs/data/chelsea.png", &lim, &rgba, &w, &h), PXVM_USAGE);
        CHECK_EQ(pxvm_image_decode("x", 1, "x", &lim, &rgba, &w, &h), PXVM_USAGE);
        CHECK(rgba == NULL);
    }
}

/* A texel (Q16) fixation set at one size is checked again against a smaller image bound later
 * (review finding 11): the last texel in range runs, one past it is a usage error naming it. */
TEST(anysize_q16_fixation_checked_against_the_bound_size)
{
    pxvm_image img;
    px__sampler(&img);
    void *png;
    size_t len;
    pxvm_prog *prog;
    pxvm_runner *run;
    if (pxvm_image_encode_png(img.px, img.w, img.h, &png, &len) || pxvm_prog_from_png(png, len, "sampler", NULL, &prog) ||
        pxvm_runner_open(prog, "cpu", 0, 1, 1, &run)) {
        px_test_fail(__FILE__, __LINE__, "%s", pxvm_errmsg());
        pxvm_image_free(&img);
        return;
    }
    uint64_t rng = 11;
    pxvm_image big = px_random_image(200, 150, &rng), small = px_random_image(40, 30, &rng);
    pxvm_view vbig = pxvm_view_host(big.px, big.w, big.h, 4), vsmall = pxvm_view_host(small.px, small.w, small.h, 4);
    CHECK_EQ(pxvm_runner_bind(run, 1, 0, &vbig), 0);
    int32_t at_edge[2] = {40 * 65536, 30 * 65536}, past[2] = {40 * 65536 + 1, 30 * 65536};
    CHECK_EQ(pxvm_runner_set_fixations(run, 0, 1, 0, 1, past, -1), 0); /* fine at 200x150 */
    CHECK_EQ(pxvm_runner_run(run), 0);
    CHECK_EQ(pxvm_runner_bind(run, 1, 0, &vsmall), 0);
    CHECK_EQ(pxvm_runner_run(run), PXVM_USAGE);
    CHECK_STR(pxvm_errmsg(), "fixation (item 0, register 0): x = 2621441");
    CHECK_STR(pxvm_errmsg(), "is not in [0, 2621440] (0 to 40 texels of input slot 'image', 40x30)");
    CHECK_STR(pxvm_errmsg(), "set it again");
    CHECK_EQ(pxvm_runner_set_fixations(run, 0, 1, 0, 1, at_edge, -1), 0);
    CHECK_EQ(pxvm_runner_run(run), 0);
    pxvm_image_free(&big);
    pxvm_image_free(&small);
    pxvm_image_free(&img);
    pxvm_free(png);
    pxvm_runner_close(run);
    pxvm_prog_free(prog);
}

/* ---- the rescaling's division at exact ties ------------------------------------------------- */

/* SPEC 2's scale(q, n, n0) = floor((2qn + n0) / (2n0)), written out here in plain integers (the
 * numerator stays below 2^49): a tie, q*n/n0 exactly k + 1/2, goes up. */
static int64_t px__scale_ref(int32_t q, int n, int n0)
{
    int64_t a = 2 * (int64_t)q * n + n0, d = 2 * (int64_t)n0;
    return a / d - (a % d != 0 && a < 0);
}

/* The derived resolution (pxvm_program_resolve: the division estimated through a double and
 * corrected in integers) and the parsed one (px_scale_q16) round every SAMPLE operand of an
 * any-size slot as SPEC 2 says, exact ties above all: reference 196x98 bound at 294x147 (3/2),
 * 98x49 (1/2) and 490x245 (5/2), where every odd q is a tie (q*n/n0 = k + 1/2), of either sign,
 * from 1 to near int32's edge; even q alongside. The divisors 2*n0 (392, 196) are no powers of
 * two and 1/196 rounds down in binary64: at most large ties a double quotient a * (1/d) falls
 * just below the integer it is, so a division that trusts it, or corrects it only past the
 * divisor, is one off there (counted: `low`). */
TEST(anysize_resolution_rounds_exact_ties_half_up)
{
    enum { NINSN = 240 };
    static const int sizes[3][2] = {{294, 147}, {98, 49}, {490, 245}};
    pxvm_builder b;
    pxvm_image img;
    pxvm_error err;
    pxvm_build_init(&b, 64);
    pxvm_build_slot(&b, PXI_ROLE_INPUT, "image", 196, 98);
    pxvm_build_slot(&b, PXI_ROLE_OUTPUT, "out", 4, 4);
    pxvm_build_any_size(&b, 1, 0, 0, 0);
    uint64_t rng = 97;
    int32_t q[NINSN][4];
    for (int i = 0; i < NINSN; i++) {
        for (int j = 0; j < 4; j++) {
            /* magnitudes up to 2^29 (x 5/2 stays inside int32): small ones, then spread over the
             * range; odd ones (ties) three times in four, and the sign alternating */
            uint32_t r = (uint32_t)(px_rand(&rng) >> 11);
            int64_t m = i < 16 ? i * 4 + j : (int64_t)(r % (1u << 29));
            if ((i + j) % 4 != 3)
                m |= 1;
            q[i][j] = (int32_t)((i + j) & 1 ? -m : m);
        }
        int32_t f[PXI_MAX_FIELDS] = {0};
        f[PX_FI(SAMPLE, src)] = 1, f[PX_FI(SAMPLE, dst)] = 2, f[PX_FI(SAMPLE, w)] = 4, f[PX_FI(SAMPLE, h)] = 4;
        f[PX_FI(SAMPLE, cu)] = q[i][0], f[PX_FI(SAMPLE, cv)] = q[i][1];
        f[PX_FI(SAMPLE, du)] = q[i][2], f[PX_FI(SAMPLE, dv)] = q[i][3];
        pxvm_build_insn(&b, PX_OP_SAMPLE, f);
    }
    pxvm_build_insn(&b, PX_OP_HALT, NULL);
    if (pxvm_build_finish(&b, &img, &err) < 0) {
        px_test_fail(__FILE__, __LINE__, "%s", err.msg);
        pxvm_build_free(&b);
        return;
    }
    pxvm_build_free(&b);
    pxvm_limits lim;
    pxvm_limits_default(&lim);
    pxvm_program poly;
    if (pxvm_program_from_copy(&img, &lim, &poly, &err) < 0) {
        px_test_fail(__FILE__, __LINE__, "%s", err.msg);
        pxvm_image_free(&img);
        return;
    }
    int ties = 0, low = 0, checked = 0;
    static const int fields[4] = {PX_FI(SAMPLE, cu), PX_FI(SAMPLE, cv), PX_FI(SAMPLE, du), PX_FI(SAMPLE, dv)};
    for (int z = 0; z < 3; z++) {
        int wh[6] = {0, 0, sizes[z][0], sizes[z][1], 0, 0};
        for (int way = 0; way < 2; way++) { /* derived, parsed */
            pxvm_program res;
            int rc = way ? pxvm_program_resolve_parsed(&poly, wh, &lim, &res, &err)
                         : pxvm_program_resolve(&poly, wh, &lim, &res, &err);
            if (rc < 0) {
                px_test_fail(__FILE__, __LINE__, "%dx%d: %s", wh[2], wh[3], err.msg);
                continue;
            }
            for (int i = 0; i < NINSN; i++)
                for (int j = 0; j < 4; j++) {
                    int n = j & 1 ? wh[3] : wh[2], n0 = j & 1 ? 98 : 196;
                    int64_t want = px__scale_ref(q[i][j], n, n0), got = res.insns[i].a[fields[j]];
                    int tie = (2 * (int64_t)q[i][j] * n + n0) % (2 * (int64_t)n0) == 0;
                    int64_t a = 2 * (int64_t)q[i][j] * n + n0;
                    ties += tie && !way;
                    low += tie && !way && (int64_t)((double)a * (1.0 / (2.0 * n0))) != want;
                    checked++;
                    if (got != want) {
                        px_test_fail(__FILE__, __LINE__, "%s resolution at %dx%d: instruction %d operand %d: q = %d scales "
                                     "to %lld, SPEC's rule gives %lld%s", way ? "parsed" : "derived", wh[2], wh[3], i, j,
                                     q[i][j], (long long)got, (long long)want, tie ? " (an exact tie: half up)" : "");
                        i = NINSN;
                        break;
                    }
                }
            pxvm_program_free(&res);
        }
    }
    CHECK(ties > 1000 && low > 100);
    printf("  %d operands checked, %d of them exact ties, %d where a double quotient is one off\n", checked, ties, low);
    pxvm_program_free(&poly);
    pxvm_image_free(&img);
}

/* ---- the derived resolution (pxvm_program_resolve) == the parsed one, program and error ------ */

/* Resolves poly at every size of wh[] both ways under lim; counts equal results and equal
 * refusals, and fails on any difference (a field, or an error's class or words). */
static void px__derived_vs_parsed(const char *name, const pxvm_program *poly, const pxvm_limits *lim, int (*wh)[2],
                                  int n, int *same, int *refused)
{
    int k = 1;
    while (k < poly->nslots && !(poly->slots[k].flags & PXI_SLOT_ANYSIZE))
        k++;
    pxvm_program prev = {0}; /* the last resolution made: retarget from it to the next skips its check */
    for (int i = 0; i < n; i++) {
        int sizes[2 * (PXVM_MAX_SLOTS + 1)] = {0};
        sizes[2 * k] = wh[i][0], sizes[2 * k + 1] = wh[i][1];
        pxvm_program a, b;
        pxvm_error ea, eb;
        int ra = pxvm_program_resolve(poly, sizes, lim, &a, &ea);
        int rb = pxvm_program_resolve_parsed(poly, sizes, lim, &b, &eb);
        char what[64];
        if (ra != rb) {
            px_test_fail(__FILE__, __LINE__, "%s at %dx%d: derived %d (%s), parsed %d (%s)", name, wh[i][0], wh[i][1],
                         ra, ra ? ea.msg : "", rb, rb ? eb.msg : "");
        } else if (ra < 0) {
            if (ea.code != eb.code || strcmp(ea.msg, eb.msg) || ea.x != eb.x || ea.y != eb.y)
                px_test_fail(__FILE__, __LINE__, "%s at %dx%d: errors differ:\n  derived %s\n  parsed  %s", name,
                             wh[i][0], wh[i][1], ea.msg, eb.msg);
            else
                (*refused)++;
        } else {
            if (pxvm_program_diff(&a, &b, what, sizeof what))
                px_test_fail(__FILE__, __LINE__, "%s at %dx%d: the resolutions differ in %s", name, wh[i][0], wh[i][1],
                             what);
            else
                (*same)++;
            CHECK(a.serial && a.serial != b.serial);
            CHECK(a.resolved_from == poly->serial && b.resolved_from == poly->serial);
            if (prev.serial) { /* ... which the check, asked without that shortcut, would pass */
                pxvm_program x = prev, y = a;
                pxvm_error e;
                x.resolved_from = y.resolved_from = 0;
                if (pxvm_check_retarget(&x, &y, &e) < 0)
                    px_test_fail(__FILE__, __LINE__, "%s: resolutions at two sizes fail the retarget check: %s", name,
                                 e.msg);
                pxvm_program_free(&prev);
            }
            prev = a;
            pxvm_program_free(&b);
        }
    }
    pxvm_program_free(&prev);
}

/* 'image' 64x48 any-size, PYRAMID over it with a tile mask of its reference size: every other
 * size is a resolution the validator refuses (the mask no longer matches: U-BIND-6 through an
 * instruction rule, not a descriptor's). */
static void px__masked_pyramid(pxvm_image *out)
{
    pxvm_builder b;
    pxvm_error err;
    pxvm_build_init(&b, 32);
    pxvm_build_slot(&b, PXI_ROLE_INPUT, "image", 64, 48);
    pxvm_build_slot(&b, PXI_ROLE_SCRATCH, "mask", px_tiles(64), px_tiles(48));
    pxvm_build_any_size(&b, 1, 0, 0, 0);
    int32_t f[PXI_MAX_FIELDS] = {0};
    f[PX_FI(PYRAMID, slot)] = 1, f[PX_FI(PYRAMID, mask)] = 2;
    pxvm_build_insn(&b, PX_OP_PYRAMID, f);
    pxvm_build_insn(&b, PX_OP_HALT, NULL);
    if (pxvm_build_finish(&b, out, &err) < 0)
        px_test_fail(__FILE__, __LINE__, "%s", err.msg);
    pxvm_build_free(&b);
}

/* An incremental GATHER whose table (a data rectangle of the program image) lies at stream pixel
 * `at`: over the header (0), or over a SAMPLE's rescaled operands, which the resolution rewrites
 * (found by review: its position box must be made again from the resolved image). */
static int px__gather_over(int at_sample, pxvm_image *out)
{
    for (int pass = 0; pass < 2; pass++) {
        int tx = 0, ty = 0;
        if (pass && at_sample) {
            pxvm_limits lim;
            pxvm_limits_default(&lim);
            pxvm_program p;
            pxvm_error err;
            if (pxvm_program_from_image(out, &lim, &p, &err) < 0)
                return -1;
            uint32_t pc = p.insns[0].pc + 3; /* cu, cv, du */
            tx = (int)(pc % (uint32_t)p.image.w), ty = (int)(pc / (uint32_t)p.image.w);
            pxvm_program_free(&p);
        }
        if (pass && !at_sample)
            return 0;
        pxvm_builder b;
        pxvm_error err;
        pxvm_build_init(&b, 64);
        int a = pxvm_build_slot(&b, PXI_ROLE_INPUT, "a", 16, 16);
        int src = pxvm_build_slot(&b, PXI_ROLE_INPUT, "b", 32, 32);
        int m = pxvm_build_slot(&b, PXI_ROLE_SCRATCH, "m", 2, 2);
        int o = pxvm_build_slot(&b, PXI_ROLE_OUTPUT, "o", 4, 4);
        int p = pxvm_build_slot(&b, PXI_ROLE_OUTPUT, "p", 4, 4);
        pxvm_build_persist(&b, o);
        int t = pxvm_build_data_at(&b, "t", 3, 1, tx, ty);
        pxvm_build_any_size(&b, a, 0, 0, 0);
        int32_t f[PXI_MAX_FIELDS] = {0};
        f[PX_FI(SAMPLE, src)] = a, f[PX_FI(SAMPLE, dst)] = p, f[PX_FI(SAMPLE, w)] = 1, f[PX_FI(SAMPLE, h)] = 1;
        f[PX_FI(SAMPLE, cu)] = 8 << 16, f[PX_FI(SAMPLE, cv)] = 8 << 16;
        f[PX_FI(SAMPLE, du)] = 1 << 16, f[PX_FI(SAMPLE, dv)] = 1 << 16;
        pxvm_build_insn(&b, PX_OP_SAMPLE, f);
        memset(f, 0, sizeof f);
        f[PX_FI(GATHER, src)] = src, f[PX_FI(GATHER, dst)] = o, f[PX_FI(GATHER, w)] = 1, f[PX_FI(GATHER, h)] = 1;
        f[PX_FI(GATHER, table)] = t, f[PX_FI(GATHER, mask)] = m;
        pxvm_build_insn(&b, PX_OP_GATHER, f);
        pxvm_build_insn(&b, PX_OP_HALT, NULL);
        if (pass)
            pxvm_image_free(out);
        int rc = pxvm_build_finish(&b, out, &err);
        pxvm_build_free(&b);
        if (rc < 0) {
            px_test_fail(__FILE__, __LINE__, "%s", err.msg);
            return -1;
        }
    }
    return 0;
}

TEST(anysize_derived_resolution_equals_the_parsed_one)
{
    static const char *const names[] = {"foveate273_any", "foveate273", "grid", "logpolar", "uniform", "v1", "aniso",
                                        "pyramid", "resize_fit", "sampler", "masked_pyramid", "gather_over_header",
                                        "gather_over_operands"};
    pxvm_limits lim;
    pxvm_limits_default(&lim);
    uint64_t rng = 2311;
    static int wh[200][2];
    int n = px__sizes(1, 1, 60, &rng, wh);
    static const int extra[][2] = {{65535, 1}, {1, 65535}, {16, 15}, {15, 16}, {16384, 16384}, {16385, 2}, {2, 9000}};
    for (size_t i = 0; i < sizeof extra / sizeof extra[0]; i++)
        wh[n][0] = extra[i][0], wh[n][1] = extra[i][1], n++;
    int same = 0, refused = 0, programs = 0;
    for (size_t p = 0; p < sizeof names / sizeof names[0]; p++) {
        pxvm_image img;
        pxvm_error err;
        char path[64];
        snprintf(path, sizeof path, "programs/%s.pxi", names[p]);
        if (!strcmp(names[p], "sampler")) {
            px__sampler(&img);
        } else if (!strcmp(names[p], "masked_pyramid")) {
            px__masked_pyramid(&img);
        } else if (!strncmp(names[p], "gather_over", 11)) {
            if (px__gather_over(!strcmp(names[p], "gather_over_operands"), &img) < 0)
                continue;
        } else if (pxvm_png_load(path, &lim, &img, &err) < 0) {
            px_test_fail(__FILE__, __LINE__, "%s", err.msg);
            continue;
        }
        if (img.px[5] == 0 && px__make_any(&img, 2, 0, 0) < 0) { /* a fixed program with an input made any-size */
            pxvm_image_free(&img);
            continue;
        }
        pxvm_program poly;
        if (pxvm_program_from_image(&img, &lim, &poly, &err) < 0) /* V-ANY-6 refuses some as any-size */
            continue;
        programs++;
        px__derived_vs_parsed(names[p], &poly, &lim, wh, n, &same, &refused);
        /* under tighter limits than poly was loaded with: the memory limit, the sides (the program
         * image's and every descriptor's), the instruction count */
        pxvm_limits tight = lim;
        tight.max_memory = poly.memory + 4096u;
        px__derived_vs_parsed(names[p], &poly, &tight, wh, n, &same, &refused);
        tight = lim;
        tight.max_side = (uint32_t)(poly.image.w > poly.image.h ? poly.image.w : poly.image.h) - 1u;
        px__derived_vs_parsed(names[p], &poly, &tight, wh, 4, &same, &refused);
        tight = lim;
        tight.max_insns = poly.ninsns - 1u;
        px__derived_vs_parsed(names[p], &poly, &tight, wh, 4, &same, &refused);
        pxvm_program_free(&poly);
    }
    printf("  %d programs x %d sizes x 2 limits (+ 4 sizes x 2 tighter ones): %d resolutions equal field for field, %d refusals equal\n", programs, n,
           same, refused);
    CHECK(programs >= 6);
    CHECK(same > 500 && refused > 100);
}

/* The CPU executor's plan for a resolution, made on a retarget from another resolution of the
 * same program by copying what no size decides (px_cpu_plan_load's `like`), equals the plan a
 * load makes from the instructions; programs of every family the derived resolution is tested on,
 * several sizes each, every switch between consecutive ones. */
TEST(anysize_cpu_plan_copied_from_a_sibling_equals_the_plan_made)
{
    static const char *const names[] = {"foveate273_any", "grid", "logpolar", "v1", "aniso", "pyramid", "resize_fit"};
    static const int sizes[][2] = {{451, 300}, {17, 1000}, {640, 480}, {1, 1}, {997, 641}};
    pxvm_limits lim;
    pxvm_limits_default(&lim);
    int compared = 0;
    for (size_t p = 0; p < sizeof names / sizeof names[0]; p++) {
        pxvm_image img;
        pxvm_error err;
        char path[64];
        snprintf(path, sizeof path, "programs/%s.pxi", names[p]);
        if (pxvm_png_load(path, &lim, &img, &err) < 0) {
            px_test_fail(__FILE__, __LINE__, "%s", err.msg);
            continue;
        }
        if (img.px[5] == 0 && px__make_any(&img, 2, 0, 0) < 0) {
            pxvm_image_free(&img);
            continue;
        }
        pxvm_program poly, res[5];
        if (pxvm_program_from_image(&img, &lim, &poly, &err) < 0)
            continue;
        int n = 0, a = 1;
        while (a < poly.nslots && !(poly.slots[a].flags & PXI_SLOT_ANYSIZE))
            a++;
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
            int wh[2 * (PXVM_MAX_SLOTS + 1)] = {0};
            wh[2 * a] = sizes[i][0], wh[2 * a + 1] = sizes[i][1];
            if (pxvm_program_resolve(&poly, wh, &lim, &res[n], &err) == 0)
                n++;
        }
        CHECK(n >= 2);
        pxvm_executor *ex = NULL, *fresh = NULL;
        CHECK(pxvm_cpu_executor.open(&ex, NULL, &err) == 0 && pxvm_cpu_executor.open(&fresh, NULL, &err) == 0);
        CHECK(pxvm_cpu_executor.load(ex, &res[0], 2, &err) == 0);
        for (int i = 1; i < n; i++) {
            CHECK(pxvm_cpu_executor.retarget(ex, &res[i], &err) == 0);
            CHECK(pxvm_cpu_executor.load(fresh, &res[i], 2, &err) == 0);
            const pxvm_program *q = &res[i];
            int same = ex->spans_per_item == fresh->spans_per_item &&
                       !memcmp(ex->step_mask_at, fresh->step_mask_at, sizeof(uint32_t) * q->nsteps) &&
                       !memcmp(ex->span_at, fresh->span_at, sizeof(int32_t) * q->ninsns);
            for (uint32_t s = 0; same && s < q->nsteps; s++) /* each step's masks, to its 0 */
                for (uint32_t k = ex->step_mask_at[s];; k++) {
                    same &= ex->step_masks[k] == fresh->step_masks[k];
                    if (!same || !fresh->step_masks[k])
                        break;
                }
            for (int k = 0; same && k < q->nslots; k++)
                same &= !ex->mask_counts[k] == !fresh->mask_counts[k];
            if (!same)
                px_test_fail(__FILE__, __LINE__, "%s: the plan copied at %dx%d differs from the plan made", names[p],
                             q->slots[a].w, q->slots[a].h);
            compared++;
        }
        pxvm_cpu_executor.close(ex);
        pxvm_cpu_executor.close(fresh);
        for (int i = 0; i < n; i++)
            pxvm_program_free(&res[i]);
        pxvm_program_free(&poly);
    }
    printf("  %d plans copied from a sibling equal the plans made\n", compared);
    CHECK(compared >= 20);
}

/* ---- two any-size inputs (SPEC 2) -------------------------------------------------------------- */

/* Patches of 'atlas' after a run of `run`, into out (2 tokens of 4x4). */
static int px__two_patches(const pxvm_prog *prog, pxvm_runner *run, uint8_t out[2][4][4][4])
{
    pxvm_view v = {out, -1, 1, 4, 8, 4, 2 * 4 * 4 * 4, 16, 4, 1};
    return pxvm_runner_read_patches(run, pxvm_prog_slot_find(prog, "atlas"), 0, &v);
}

/* Binds a random w x h image (seed) to `slot`. */
static int px__two_bind(pxvm_runner *run, int slot, int w, int h, uint64_t seed)
{
    pxvm_image img = px_random_image(w, h, &seed);
    pxvm_view v = pxvm_view_host(img.px, w, h, 4);
    int rc = pxvm_runner_bind(run, slot, 0, &v);
    pxvm_image_free(&img);
    return rc;
}

/* A program with two any-size inputs, a (reference 16x16, any size) and b (8x8, sides at most
 * 64): the resolution rescales each SAMPLE by its own src's bound size and rewrites each
 * descriptor with its own (the sizes independent); each slot is checked against its own bounds;
 * a runner changes one slot's size at a time, the other keeping its size and image, and every
 * run equals a fresh runner's with the same two images. */
TEST(anysize_two_inputs_resolve_each_at_its_own_size)
{
    static const char *src = ".width 16\n.slot a input 16x16 any\n.slot b input 8x8 any max=64\n"
                             ".slot atlas output 8x4 patches=4x4x2\nPYRAMID a\nPYRAMID b\n"
                             "SAMPLE src=a dst=atlas mode=linear dst_x=0 dst_y=0 w=4 h=4 cu=8 cv=8 du=1 dv=1 lod=0\n"
                             "SAMPLE src=b dst=atlas mode=linear dst_x=4 dst_y=0 w=4 h=4 cu=4 cv=4 du=1 dv=1 lod=0\n"
                             "HALT\n";
    pxvm_prog *prog = NULL, *res = NULL;
    pxvm_runner *run = NULL;
    if (pxvm_prog_assemble(src, "two.pxs", NULL, &prog)) {
        px_test_fail(__FILE__, __LINE__, "%s", pxvm_errmsg());
        return;
    }
    /* the resolution at a 40x30, b 20x10: each slot's size, each SAMPLE by its own src */
    int wh[8] = {0, 0, 40, 30, 20, 10, 0, 0};
    CHECK_EQ(pxvm_prog_resolve(prog, wh, &res), 0);
    void *png = NULL;
    size_t len = 0;
    pxvm_image img = {0, 0, NULL};
    pxvm_program p;
    pxvm_limits lim;
    pxvm_error err;
    pxvm_limits_default(&lim);
    if (!res || pxvm_prog_encode(res, &png, &len) || pxvm_png_decode(png, len, "two", &lim, &img, &err) < 0 ||
        pxvm_program_from_copy(&img, &lim, &p, &err) < 0) {
        px_test_fail(__FILE__, __LINE__, "the resolution at 40x30, 20x10: %s", res ? err.msg : pxvm_errmsg());
    } else {
        CHECK(p.slots[1].w == 40 && p.slots[1].h == 30 && p.slots[2].w == 20 && p.slots[2].h == 10);
        CHECK_EQ(PX_ARG(&p.insns[2], SAMPLE, cu), px_scale_q16(8 << 16, 40, 16));
        CHECK_EQ(PX_ARG(&p.insns[2], SAMPLE, cv), px_scale_q16(8 << 16, 30, 16));
        CHECK_EQ(PX_ARG(&p.insns[3], SAMPLE, cu), px_scale_q16(4 << 16, 20, 8));
        CHECK_EQ(PX_ARG(&p.insns[3], SAMPLE, cv), px_scale_q16(4 << 16, 10, 8));
        CHECK_EQ(PX_ARG(&p.insns[3], SAMPLE, lod), px_lod_shift(20, 10, 8, 8));
        pxvm_program_free(&p);
    }
    pxvm_free(png);
    pxvm_image_free(&img);
    pxvm_prog_free(res);
    /* b against its own bounds (a has none but the side limit): 64 taken, 65 refused */
    wh[4] = 64, wh[5] = 64;
    CHECK_EQ(pxvm_prog_resolve(prog, wh, &res), 0);
    pxvm_prog_free(res);
    wh[4] = 65;
    CHECK_EQ(pxvm_prog_resolve(prog, wh, &res), PXVM_UNLINKABLE);
    CHECK_STR(pxvm_errmsg(), "a 65x64 image cannot be bound to slot 2 ('b'): it takes 1x1 .. 64x64");
    /* a runner: one slot's size at a time */
    static const struct { int slot, w, h; } binds[] = {{1, 40, 30}, {2, 20, 10}, {2, 64, 33}, {1, 17, 50}, {1, 40, 30}};
    int size[3][2] = {{0, 0}, {16, 16}, {8, 8}};
    uint64_t seed[3] = {0, 0, 0};
    if (pxvm_runner_open(prog, px__executor(), 0, 1, 1, &run)) {
        px_test_fail(__FILE__, __LINE__, "%s", pxvm_errmsg());
    } else {
        for (size_t i = 0; i < sizeof binds / sizeof binds[0]; i++) {
            int k = binds[i].slot;
            size[k][0] = binds[i].w, size[k][1] = binds[i].h, seed[k] = 1000 + i;
            CHECK_EQ(px__two_bind(run, k, binds[i].w, binds[i].h, seed[k]), 0);
            if (i == 0) /* b still unbound */
                continue;
            CHECK_EQ(pxvm_runner_run(run), 0);
            for (int j = 1; j <= 2; j++) {
                int w = 0, h = 0;
                CHECK_EQ(pxvm_runner_slot_size(run, j, &w, &h), 0);
                CHECK(w == size[j][0] && h == size[j][1]);
            }
            pxvm_runner *fresh = NULL;
            uint8_t got[2][4][4][4], want[2][4][4][4];
            if (pxvm_runner_open(prog, "cpu", 0, 1, 1, &fresh) || px__two_bind(fresh, 1, size[1][0], size[1][1], seed[1]) ||
                px__two_bind(fresh, 2, size[2][0], size[2][1], seed[2]) || pxvm_runner_run(fresh) ||
                px__two_patches(prog, fresh, want) || px__two_patches(prog, run, got))
                px_test_fail(__FILE__, __LINE__, "%s", pxvm_errmsg());
            else if (memcmp(got, want, sizeof got))
                px_test_fail(__FILE__, __LINE__, "bind %zu (slot %d at %dx%d): the run differs from a fresh runner's", i, k,
                             binds[i].w, binds[i].h);
            pxvm_runner_close(fresh);
        }
        pxvm_runner_close(run);
    }
    pxvm_prog_free(prog);
}
