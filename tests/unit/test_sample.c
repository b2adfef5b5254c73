/* test_sample.c - SAMPLE and GATHER against a reference sampler written from the spec text
 * (section 4), on edge positions, steps, LODs and sizes, and a seeded sweep of random operands. */
#include <stdlib.h>

#include "test.h"

/* ---- the reference: spec section 4, in plain 64-bit integer code ---- */

static int64_t px__fdiv(int64_t a, int64_t b) /* floor(a / b), b > 0 */
{
    int64_t q = a / b;
    return (a % b != 0 && a < 0) ? q - 1 : q;
}
static int64_t px__clamp(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : v > hi ? hi : v; }

typedef struct {
    pxvm_image lv[PXVM_MAX_LEVELS];
    int n;
} px__chain;

static int px__t(const px__chain *c, int l, int64_t x, int64_t y, int ch)
{
    const pxvm_image *im = &c->lv[l];
    return im->px[((size_t)y * (size_t)im->w + (size_t)x) * 4u + (size_t)ch];
}

/* One sample before its rounding: per channel, the value times 2^24. */
static void px__ref_acc(const px__chain *c, int64_t u, int64_t v, uint32_t lod, int mode, int64_t acc[4])
{
    if (mode == 1) {
        int64_t l = (lod + 128) / 256;
        if (l > c->n - 1)
            l = c->n - 1;
        int64_t x = px__clamp(px__fdiv(px__fdiv(u, (int64_t)1 << l), 65536), 0, c->lv[l].w - 1);
        int64_t y = px__clamp(px__fdiv(px__fdiv(v, (int64_t)1 << l), 65536), 0, c->lv[l].h - 1);
        for (int ch = 0; ch < 4; ch++)
            acc[ch] = (int64_t)px__t(c, (int)l, x, y, ch) << 24;
        return;
    }
    int l0 = (int)(lod / 256), l1 = l0 + 1;
    int64_t f = lod % 256;
    if (l0 >= c->n - 1)
        l0 = l1 = c->n - 1, f = 0;
    for (int ch = 0; ch < 4; ch++) {
        int64_t B[2];
        for (int k = 0; k < 2; k++) {
            int l = k ? l1 : l0;
            int64_t px = px__fdiv(u, (int64_t)1 << l) - 32768, py = px__fdiv(v, (int64_t)1 << l) - 32768;
            int64_t ix = px__fdiv(px, 65536), iy = px__fdiv(py, 65536);
            int64_t fx = (px - ix * 65536) / 256, fy = (py - iy * 65536) / 256;
            int64_t x0 = px__clamp(ix, 0, c->lv[l].w - 1), x1 = px__clamp(ix + 1, 0, c->lv[l].w - 1);
            int64_t y0 = px__clamp(iy, 0, c->lv[l].h - 1), y1 = px__clamp(iy + 1, 0, c->lv[l].h - 1);
            int64_t top = px__t(c, l, x0, y0, ch) * (256 - fx) + px__t(c, l, x1, y0, ch) * fx;
            int64_t bot = px__t(c, l, x0, y1, ch) * (256 - fx) + px__t(c, l, x1, y1, ch) * fx;
            B[k] = top * (256 - fy) + bot * fy;
        }
        acc[ch] = B[0] * (256 - f) + B[1] * f;
    }
}

static uint32_t px__ref_sample(const px__chain *c, int64_t u, int64_t v, uint32_t lod, int mode)
{
    int64_t acc[4];
    uint32_t out = 0;
    px__ref_acc(c, u, v, lod, mode, acc);
    for (int ch = 0; ch < 4; ch++)
        out |= (uint32_t)((acc[ch] + ((int64_t)1 << 23)) >> 24) << (8 * ch);
    return out;
}

/* ANISO: the mean of n unrounded taps at offsets floor((2k-(n-1)) * td / 2), rounded half up. */
static uint32_t px__ref_aniso(const px__chain *c, int64_t u, int64_t v, uint32_t lod, int mode, int n, int32_t tdu,
                              int32_t tdv)
{
    int64_t sum[4] = {0, 0, 0, 0}, acc[4];
    for (int k = 0; k < n; k++) {
        px__ref_acc(c, u + px__fdiv((int64_t)(2 * k - (n - 1)) * tdu, 2), v + px__fdiv((int64_t)(2 * k - (n - 1)) * tdv, 2),
                    lod, mode, acc);
        for (int ch = 0; ch < 4; ch++)
            sum[ch] += acc[ch];
    }
    uint32_t out = 0;
    for (int ch = 0; ch < 4; ch++)
        out |= (uint32_t)((sum[ch] + ((int64_t)n << 23)) / ((int64_t)n << 24)) << (8 * ch);
    return out;
}

static int64_t px__ref_pos(int32_t c, int32_t d, int i, int n)
{
    return (int64_t)c + px__fdiv((int64_t)(2 * i - (n - 1)) * d, 2);
}

/* ---- a program: PYRAMID src; SAMPLE src -> out; HALT ---- */

typedef struct {
    int w, h;                  /* source */
    int ow, oh, dx, dy;        /* output slot size and patch origin */
    int pw, ph, mode;
    int32_t cu, cv, du, dv;
    uint32_t lod;
    int taps;                  /* > 0: ANISO with these taps and steps */
    int32_t tdu, tdv;
} px__case;

static void px__run_case(const px__case *k, const pxvm_image *src, const char *what)
{
    pxvm_builder b;
    pxvm_build_init(&b, 16);
    int s = pxvm_build_slot(&b, PXI_ROLE_INPUT, "src", k->w, k->h);
    int o = pxvm_build_slot(&b, PXI_ROLE_OUTPUT, "out", k->ow, k->oh);
    int32_t f[PXI_MAX_FIELDS] = {0};
    f[PX_FI(PYRAMID, slot)] = s;
    pxvm_build_insn(&b, PX_OP_PYRAMID, f);
    memset(f, 0, sizeof f);
    f[PX_FI(SAMPLE, src)] = s;
    f[PX_FI(SAMPLE, dst)] = o;
    f[PX_FI(SAMPLE, mode)] = k->mode;
    f[PX_FI(SAMPLE, dst_x)] = k->dx;
    f[PX_FI(SAMPLE, dst_y)] = k->dy;
    f[PX_FI(SAMPLE, w)] = k->pw;
    f[PX_FI(SAMPLE, h)] = k->ph;
    f[PX_FI(SAMPLE, cu)] = k->cu;
    f[PX_FI(SAMPLE, cv)] = k->cv;
    f[PX_FI(SAMPLE, du)] = k->du;
    f[PX_FI(SAMPLE, dv)] = k->dv;
    f[PX_FI(SAMPLE, lod)] = (int32_t)k->lod;
    if (k->taps) {
        f[PX_FI(ANISO, taps)] = k->taps;
        f[PX_FI(ANISO, tdu)] = k->tdu;
        f[PX_FI(ANISO, tdv)] = k->tdv;
    }
    pxvm_build_insn(&b, k->taps ? PX_OP_ANISO : PX_OP_SAMPLE, f);
    pxvm_build_insn(&b, PX_OP_HALT, NULL);
    pxvm_program prog;
    pxvm_executor *ex;
    pxvm_error err;
    const pxvm_image *in[] = {src};
    if (px_run_builder(&b, in, 1, &prog, &ex, &err) < 0) {
        px_test_fail(__FILE__, __LINE__, "%s: %s", what, err.msg);
        return;
    }
    px__chain c;
    c.n = prog.slots[s].levels;
    for (int l = 0; l < c.n; l++)
        c.lv[l] = px_read(&prog, ex, s, l);
    pxvm_image out = px_read(&prog, ex, o, 0);
    int bad = 0;
    for (int y = 0; y < k->oh && !bad; y++)
        for (int x = 0; x < k->ow && !bad; x++) {
            uint32_t want = 0;
            int i = x - k->dx, j = y - k->dy;
            if (i >= 0 && j >= 0 && i < k->pw && j < k->ph) {
                int64_t u = px__ref_pos(k->cu, k->du, i, k->pw), v = px__ref_pos(k->cv, k->dv, j, k->ph);
                want = k->taps ? px__ref_aniso(&c, u, v, k->lod, k->mode, k->taps, k->tdu, k->tdv)
                               : px__ref_sample(&c, u, v, k->lod, k->mode);
            }
            if (px_px(&out, x, y) != want) {
                px_test_fail(__FILE__, __LINE__, "%s: out(%d,%d) = %08x, reference %08x", what, x, y, px_px(&out, x, y),
                             want);
                bad = 1;
            }
        }
    for (int l = 0; l < c.n; l++)
        pxvm_image_free(&c.lv[l]);
    pxvm_image_free(&out);
    px_close(&prog, ex);
}

TEST(aniso_random_operands_match_reference)
{
    uint64_t st = 777;
    for (int round = 0; round < 120; round++) {
        int w = 1 + (int)(px_rand(&st) % 60), h = 1 + (int)(px_rand(&st) % 60);
        pxvm_image src = px_random_image(w, h, &st);
        px__case k;
        memset(&k, 0, sizeof k);
        k.w = w, k.h = h, k.pw = 1 + (int)(px_rand(&st) % 6), k.ph = 1 + (int)(px_rand(&st) % 6);
        k.ow = k.pw, k.oh = k.ph, k.mode = (int)(px_rand(&st) & 1);
        k.cu = (int32_t)(px_rand(&st) % (uint64_t)((w + 8) << 16)) - (4 << 16);
        k.cv = (int32_t)(px_rand(&st) % (uint64_t)((h + 8) << 16)) - (4 << 16);
        k.du = (int32_t)(px_rand(&st) % (6u << 16)) - (3 << 16);
        k.dv = (int32_t)(px_rand(&st) % (6u << 16)) - (3 << 16);
        k.lod = (uint32_t)(px_rand(&st) % (7 * 256));
        k.taps = 1 + (int)(px_rand(&st) % PX_MAX_TAPS);
        k.tdu = (int32_t)(px_rand(&st) % (8u << 16)) - (4 << 16);
        k.tdv = (int32_t)(px_rand(&st) % (8u << 16)) - (4 << 16);
        if (round % 10 == 0) /* extremes */
            k.taps = PX_MAX_TAPS, k.tdu = INT32_MAX, k.tdv = INT32_MIN, k.lod = 65535, k.cu = INT32_MIN;
        char what[64];
        snprintf(what, sizeof what, "aniso round %d", round);
        px__run_case(&k, &src, what);
        pxvm_image_free(&src);
    }
}

TEST(aniso_one_tap_is_sample)
{
    uint64_t st = 8;
    pxvm_image src = px_random_image(50, 40, &st);
    for (int mode = 0; mode < 2; mode++) {
        px__case a = {50, 40, 9, 9, 0, 0, 9, 9, mode, 1234567, 987654, 77777, -55555, 300, 1, 999999, -12345};
        px__case s1 = a;
        s1.taps = 0; /* the same operands as a SAMPLE */
        px__run_case(&a, &src, "aniso 1 tap");
        px__run_case(&s1, &src, "sample");
    }
    /* and the same images: both checked against the reference, whose 1-tap mean is the sample */
    pxvm_image_free(&src);
}

TEST(sample_unit_step_at_lod0_copies_texels)
{
    uint64_t st = 3;
    pxvm_image src = px_random_image(37, 21, &st);
    /* a 16x8 patch centred on (20.0, 10.0): positions 12.5 .. 27.5, 6.5 .. 13.5 are texel centres */
    for (int mode = 0; mode < 2; mode++) {
        px__case k = {37, 21, 16, 8, 0, 0, 16, 8, mode, 20 << 16, 10 << 16, 1 << 16, 1 << 16, 0, 0, 0, 0};
        px__run_case(&k, &src, "unit step");
    }
    pxvm_builder b;
    pxvm_build_init(&b, 16);
    int s = pxvm_build_slot(&b, PXI_ROLE_INPUT, "src", 37, 21);
    int o = pxvm_build_slot(&b, PXI_ROLE_OUTPUT, "out", 16, 8);
    int32_t f[PXI_MAX_FIELDS] = {0};
    f[PX_FI(SAMPLE, src)] = s, f[PX_FI(SAMPLE, dst)] = o, f[PX_FI(SAMPLE, w)] = 16, f[PX_FI(SAMPLE, h)] = 8;
    f[PX_FI(SAMPLE, cu)] = 20 << 16, f[PX_FI(SAMPLE, cv)] = 10 << 16, f[PX_FI(SAMPLE, du)] = f[PX_FI(SAMPLE, dv)] = 1 << 16;
    pxvm_build_insn(&b, PX_OP_SAMPLE, f);
    pxvm_build_insn(&b, PX_OP_HALT, NULL);
    pxvm_program prog;
    pxvm_executor *ex;
    pxvm_error err;
    const pxvm_image *in[] = {&src};
    CHECK(px_run_builder(&b, in, 1, &prog, &ex, &err) == 0);
    pxvm_image out = px_read(&prog, ex, o, 0);
    for (int y = 0; y < 8; y++)
        for (int x = 0; x < 16; x++)
            CHECK_EQ(px_px(&out, x, y), px_px(&src, 12 + x, 6 + y));
    pxvm_image_free(&out);
    px_close(&prog, ex);
    pxvm_image_free(&src);
}

TEST(sample_edges_lods_and_sizes)
{
    uint64_t st = 11;
    const int sizes[][2] = {{1, 1}, {1, 9}, {9, 1}, {5, 3}, {64, 64}, {33, 17}};
    const uint32_t lods[] = {0, 1, 128, 255, 256, 256 + 77, 3 * 256, 4 * 256 + 255, 6 * 256, 65535};
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
        int w = sizes[si][0], h = sizes[si][1];
        pxvm_image src = px_random_image(w, h, &st);
        for (size_t li = 0; li < sizeof lods / sizeof lods[0]; li++)
            for (int mode = 0; mode < 2; mode++) {
                char what[96];
                snprintf(what, sizeof what, "%dx%d lod %u mode %d", w, h, lods[li], mode);
                /* a patch hanging off the top-left corner, with a non-integer step */
                px__case k = {w, h, 12, 10, 1, 2, 9, 7, mode, -3 * 65536 + 1234, -2 * 65536 - 99, 93000, 70000, lods[li], 0, 0, 0};
                px__run_case(&k, &src, what);
                /* off the bottom-right corner, negative steps (a mirrored patch) */
                px__case m = {w, h, 8, 8, 0, 0, 8, 8, mode, (w + 2) << 16, (h + 1) << 16, -65536 - 3, -2 * 65536, lods[li], 0, 0, 0};
                px__run_case(&m, &src, what);
            }
        pxvm_image_free(&src);
    }
}

TEST(sample_constant_image_any_lod_gives_the_constant)
{
    pxvm_image src;
    pxvm_image_alloc(&src, 20, 12, NULL);
    for (int i = 0; i < 20 * 12; i++)
        px_set(&src, i % 20, i / 20, 0x807F01FFu);
    px__case k = {20, 12, 4, 4, 0, 0, 4, 4, 0, 777777, 333333, 150000, 99999, 2 * 256 + 100, 0, 0, 0};
    px__run_case(&k, &src, "constant");
    pxvm_image_free(&src);
}

TEST(sample_random_operands_match_reference)
{
    uint64_t st = 2026;
    for (int round = 0; round < 150; round++) {
        int w = 1 + (int)(px_rand(&st) % 70), h = 1 + (int)(px_rand(&st) % 70);
        pxvm_image src = px_random_image(w, h, &st);
        px__case k;
        memset(&k, 0, sizeof k);
        k.w = w, k.h = h;
        k.pw = 1 + (int)(px_rand(&st) % 9), k.ph = 1 + (int)(px_rand(&st) % 9);
        k.ow = k.pw + (int)(px_rand(&st) % 3), k.oh = k.ph + (int)(px_rand(&st) % 3);
        k.dx = (int)(px_rand(&st) % (uint64_t)(k.ow - k.pw + 1)), k.dy = (int)(px_rand(&st) % (uint64_t)(k.oh - k.ph + 1));
        k.mode = (int)(px_rand(&st) & 1);
        k.cu = (int32_t)(px_rand(&st) % (uint64_t)((w + 8) << 16)) - (4 << 16);
        k.cv = (int32_t)(px_rand(&st) % (uint64_t)((h + 8) << 16)) - (4 << 16);
        k.du = (int32_t)(px_rand(&st) % (8u << 16)) - (4 << 16);
        k.dv = (int32_t)(px_rand(&st) % (8u << 16)) - (4 << 16);
        k.lod = (uint32_t)(px_rand(&st) % (9 * 256));
        if (round % 10 == 0) { /* extremes */
            k.cu = round % 20 ? INT32_MAX : INT32_MIN;
            k.du = round % 40 ? INT32_MIN : INT32_MAX;
            k.lod = 65535;
        }
        char what[64];
        snprintf(what, sizeof what, "random round %d", round);
        px__run_case(&k, &src, what);
        pxvm_image_free(&src);
    }
}

/* GATHER with a table holding exactly SAMPLE's positions gives SAMPLE's output; the table can
 * be embedded in the program image (a data slot) or be part of the program image itself. */
TEST(gather_equals_sample_with_same_positions)
{
    uint64_t st = 99;
    pxvm_image src = px_random_image(45, 30, &st);
    const int pw = 5, ph = 4;
    const int32_t cu = 20 * 65536 + 12345, cv = 14 * 65536 - 777, du = 90000, dv = -70000;
    const uint32_t lod = 256 + 100;
    pxvm_image table;
    pxvm_image_alloc(&table, 3 * pw, ph, NULL);
    for (int j = 0; j < ph; j++)
        for (int i = 0; i < pw; i++) {
            px_set(&table, 3 * i, j, (uint32_t)px__ref_pos(cu, du, i, pw));
            px_set(&table, 3 * i + 1, j, (uint32_t)px__ref_pos(cv, dv, j, ph));
            px_set(&table, 3 * i + 2, j, lod | 0xAB000000u); /* B, A of the LOD pixel are ignored */
        }
    for (int variant = 0; variant < 2; variant++) {
        pxvm_builder b;
        pxvm_build_init(&b, 32);
        int s = pxvm_build_slot(&b, PXI_ROLE_INPUT, "src", 45, 30);
        int o = pxvm_build_slot(&b, PXI_ROLE_OUTPUT, "out", 2 * pw, ph);
        int t = variant == 0 ? pxvm_build_data_slot(&b, "table", &table) : 0;
        int32_t f[PXI_MAX_FIELDS] = {0};
        f[PX_FI(PYRAMID, slot)] = s;
        pxvm_build_insn(&b, PX_OP_PYRAMID, f);
        memset(f, 0, sizeof f);
        f[PX_FI(SAMPLE, src)] = s, f[PX_FI(SAMPLE, dst)] = o, f[PX_FI(SAMPLE, w)] = pw, f[PX_FI(SAMPLE, h)] = ph;
        f[PX_FI(SAMPLE, cu)] = cu, f[PX_FI(SAMPLE, cv)] = cv, f[PX_FI(SAMPLE, du)] = du, f[PX_FI(SAMPLE, dv)] = dv;
        f[PX_FI(SAMPLE, lod)] = (int32_t)lod;
        pxvm_build_insn(&b, PX_OP_SAMPLE, f);
        memset(f, 0, sizeof f);
        f[PX_FI(GATHER, src)] = s, f[PX_FI(GATHER, dst)] = o, f[PX_FI(GATHER, dst_x)] = pw;
        f[PX_FI(GATHER, w)] = pw, f[PX_FI(GATHER, h)] = ph, f[PX_FI(GATHER, table)] = t;
        uint32_t g = pxvm_build_insn(&b, PX_OP_GATHER, f);
        pxvm_build_insn(&b, PX_OP_HALT, NULL);
        if (variant == 1) { /* the table as raw rows of the program image */
            int row0 = -1;
            for (int j = 0; j < ph; j++) {
                int r = pxvm_build_row(&b, table.px + (size_t)j * (size_t)table.w * 4u, table.w);
                if (row0 < 0)
                    row0 = r;
            }
            pxvm_build_patch(&b, g, PX_FI(GATHER, table_y), row0);
        }
        pxvm_program prog;
        pxvm_executor *ex;
        pxvm_error err;
        const pxvm_image *in[] = {&src};
        CHECK(px_run_builder(&b, in, 1, &prog, &ex, &err) == 0);
        if (!ex) {
            px_test_fail(__FILE__, __LINE__, "%s", err.msg);
            continue;
        }
        pxvm_image out = px_read(&prog, ex, o, 0);
        for (int j = 0; j < ph; j++)
            for (int i = 0; i < pw; i++)
                CHECK_EQ(px_px(&out, i, j), px_px(&out, pw + i, j));
        /* and both halves are not trivially zero */
        int nonzero = 0;
        for (int i = 0; i < pw * ph; i++)
            nonzero |= px_px(&out, i % pw, i / pw) != 0;
        CHECK(nonzero);
        pxvm_image_free(&out);
        px_close(&prog, ex);
    }
    pxvm_image_free(&table);
    pxvm_image_free(&src);
}

TEST(fused_batch_equals_sequential_order)
{
    /* 300 patches into disjoint tiles form one batch; the result must equal running them one by
     * one, which a second program forces by alternating destination slots' reads. */
    uint64_t st = 4242;
    pxvm_image src = px_random_image(200, 120, &st);
    pxvm_builder b;
    pxvm_build_init(&b, 64);
    int s = pxvm_build_slot(&b, PXI_ROLE_INPUT, "src", 200, 120);
    int o = pxvm_build_slot(&b, PXI_ROLE_OUTPUT, "out", 20 * 8, 15 * 8);
    int32_t f[PXI_MAX_FIELDS] = {0};
    f[PX_FI(PYRAMID, slot)] = s;
    pxvm_build_insn(&b, PX_OP_PYRAMID, f);
    for (int p = 0; p < 300; p++) {
        memset(f, 0, sizeof f);
        f[PX_FI(SAMPLE, src)] = s, f[PX_FI(SAMPLE, dst)] = o, f[PX_FI(SAMPLE, mode)] = p % 7 == 0;
        f[PX_FI(SAMPLE, dst_x)] = (p % 20) * 8, f[PX_FI(SAMPLE, dst_y)] = (p / 20) * 8;
        f[PX_FI(SAMPLE, w)] = f[PX_FI(SAMPLE, h)] = 8;
        f[PX_FI(SAMPLE, cu)] = (int32_t)(px_rand(&st) % (200u << 16));
        f[PX_FI(SAMPLE, cv)] = (int32_t)(px_rand(&st) % (120u << 16));
        f[PX_FI(SAMPLE, du)] = f[PX_FI(SAMPLE, dv)] = (int32_t)(65536 + px_rand(&st) % 200000);
        f[PX_FI(SAMPLE, lod)] = (int32_t)(px_rand(&st) % 1200);
        pxvm_build_insn(&b, PX_OP_SAMPLE, f);
    }
    pxvm_build_insn(&b, PX_OP_HALT, NULL);
    pxvm_image img;
    CHECK(pxvm_build_finish(&b, &img, NULL) == 0);
    pxvm_build_free(&b);
    pxvm_program prog;
    pxvm_executor *ex;
    pxvm_error err;
    const pxvm_image *in[] = {&src};
    CHECK(px_run_image(&img, in, 1, &prog, &ex, &err) == 0);
    CHECK_EQ(prog.nsteps, 3u); /* PYRAMID, one batch of 300, HALT */
    CHECK(prog.nsteps > 1 && prog.steps[1].kind == PXVM_STEP_BATCH && prog.steps[1].count == 300);
    pxvm_image fused = px_read(&prog, ex, o, 0);
    px_close(&prog, ex);
    /* the same program on a single thread, instruction by instruction */
    pxvm_limits lim;
    pxvm_limits_default(&lim);
    CHECK(pxvm_program_from_copy(&img, &lim, &prog, &err) == 0);
    for (uint32_t i = 0; i < prog.ninsns; i++)
        prog.steps[i] = (pxvm_step){PXVM_STEP_ONE, i, 1, 0};
    prog.nsteps = prog.ninsns;
    pxvm_open_options one = {1, 0};
    pxvm_run_options ro = {.max_steps = 1000};
    CHECK(pxvm_cpu_executor.open(&ex, &one, &err) == 0);
    CHECK(pxvm_cpu_executor.load(ex, &prog, 1, &err) == 0);
    CHECK(pxvm_bind_image(&pxvm_cpu_executor, ex, s, &src, &err) == 0);
    CHECK(pxvm_cpu_executor.run(ex, &ro, &err) == 0);
    pxvm_image seq = px_read(&prog, ex, o, 0);
    CHECK(!memcmp(fused.px, seq.px, (size_t)seq.w * (size_t)seq.h * 4u));
    pxvm_image_free(&fused);
    pxvm_image_free(&seq);
    px_close(&prog, ex);
    pxvm_image_free(&img);
    pxvm_image_free(&src);
}
