/* test_anysize.c - any-size inputs (SPEC "Any-size inputs"): the integer rules of the
 * resolution (px_log2_q8 against its definition, px_scale_q16 at its edges), the identity at the
 * reference size for every shipped program made any-size, what a resolution rewrites, and the
 * runner: bound at W x H it gives the bytes of a fresh runner of the resolution (every output
 * slot, the geometry) over many sizes. */
#include <stdlib.h>

#include "../../isa/px_sem.h"
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
            CHECK_EQ(err.code, PXE_REGION); /* V-ANY-6: a reader that cannot be rescaled */
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

/* 'image' 64x48 any-size, 'out' 16x8: PYRAMID; SAMPLE (absolute) and ANISO (relative to register 0). */
static void px__sampler(pxvm_image *out)
{
    pxvm_builder b;
    pxvm_error err;
    pxvm_build_init(&b, 32);
    pxvm_build_slot(&b, PXI_ROLE_INPUT, "image", 64, 48);
    pxvm_build_slot(&b, PXI_ROLE_OUTPUT, "out", 16, 8);
    pxvm_build_any_size(&b, 1, 0, 0, 0);
    int32_t f[PXI_MAX_FIELDS] = {0};
    f[PX_FI(PYRAMID, slot)] = 1;
    pxvm_build_insn(&b, PX_OP_PYRAMID, f);
    memset(f, 0, sizeof f);
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
    CHECK_EQ(err.code, PXE_USAGE);
    CHECK_STR(err.msg, "not any-size");
    pxvm_program_free(&poly);
}
