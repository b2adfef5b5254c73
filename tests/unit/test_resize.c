/* test_resize.c - RESIZE's tables (vm/resize.c) and integer rule (isa/px_resize.h): invariants over
 * a sweep of sizes and filters, values computed by hand, and the host reference's passes.
 * tests/python/test_resize_pillow.py compares the bytes with Pillow itself. */
#include <stdlib.h>

#include "../../isa/px_resize.h"
#include "../../vm/resize.h"
#include "test.h"

#define PX__ONE (1 << PX_RESIZE_PREC)

/* One table's invariants: every run lies inside the source, holds 1..ksize taps, starts no
 * earlier than the previous one; its coefficients sum to 2^22 up to the rounding of each (at most
 * 1/2 apiece); the Q22 sum of 255 times its positive coefficients, plus one half, fits an int32
 * (so Pillow's int accumulator never wraps on these sizes). Returns the number of failures. */
static int px__check_table(int in, int out, int filter)
{
    px_resize_table t;
    pxvm_error err;
    if (px_resize_coeffs(in, out, filter, &t, &err) < 0) {
        px_test_fail(__FILE__, __LINE__, "%d -> %d %s: %s", in, out, px_resize_filter_name(filter), err.msg);
        return 1;
    }
    int bad = 0;
    for (int i = 0; i < out && !bad; i++) {
        int32_t f = t.first[i], n = t.count[i];
        if (filter == PX_RESIZE_NEAREST) {
            bad |= f < 0 || f >= in || n != 1 || (i > 0 && f < t.first[i - 1]);
            continue;
        }
        bad |= f < 0 || n < 1 || n > t.ksize || f + n > in || (i > 0 && f < t.first[i - 1]);
        int64_t sum = 0, pos = 0;
        for (int j = 0; j < t.ksize; j++) {
            int32_t k = t.k[(size_t)i * (size_t)t.ksize + (size_t)j];
            bad |= j >= n && k != 0; /* the rest of the row is 0 */
            sum += k;
            pos += k > 0 ? k : 0;
        }
        bad |= 2 * llabs(sum - PX__ONE) > n;
        bad |= 255 * pos + PX_RESIZE_HALF > INT32_MAX;
    }
    if (bad)
        px_test_fail(__FILE__, __LINE__, "%d -> %d %s: a table invariant fails", in, out, px_resize_filter_name(filter));
    px_resize_table_free(&t);
    return bad;
}

TEST(resize_table_invariants)
{
    int failures = 0;
    for (int f = 0; f < PX_RESIZE__FILTERS && failures < 5; f++) {
        for (int in = 1; in <= 48; in++)
            for (int out = 1; out <= 48; out++)
                failures += px__check_table(in, out, f);
        static const int big[][2] = {{512, 7}, {3, 500}, {1000, 1}, {1, 1000}, {4096, 3}, {7, 4093}, {600, 599}};
        for (size_t i = 0; i < sizeof big / sizeof big[0]; i++)
            failures += px__check_table(big[i][0], big[i][1], f);
    }
}

static void px__check_run(const px_resize_table *t, int i, int first, int count, const int32_t *k)
{
    CHECK_EQ(t->first[i], first);
    CHECK_EQ(t->count[i], count);
    for (int j = 0; j < count; j++)
        CHECK_EQ(t->k[(size_t)i * (size_t)t->ksize + (size_t)j], k[j]);
}

/* Worked by hand from the rule of isa/SPEC.md (RESIZE). */
TEST(resize_table_values)
{
    px_resize_table t;
    /* BILINEAR 4 -> 2: scale 2, support 2, centres 1 and 3; output 0 reads 0..2 with weights
     * 0.75, 0.75, 0.25 over 1.75 = 3/7, 3/7, 1/7 -> 4194304 * 3/7 = 1797558.86 -> 1797559,
     * 4194304 / 7 = 599186.29 -> 599186. */
    CHECK_EQ(px_resize_coeffs(4, 2, PX_RESIZE_BILINEAR, &t, NULL), 0);
    CHECK_EQ(t.ksize, 5);
    px__check_run(&t, 0, 0, 3, (const int32_t[]){1797559, 1797559, 599186});
    px__check_run(&t, 1, 1, 3, (const int32_t[]){599186, 1797559, 1797559});
    px_resize_table_free(&t);
    /* BOX 3 -> 1: three weights 1/3 -> 1398101.33 -> 1398101 (the sum is 2^22 - 1). */
    CHECK_EQ(px_resize_coeffs(3, 1, PX_RESIZE_BOX, &t, NULL), 0);
    px__check_run(&t, 0, 0, 3, (const int32_t[]){1398101, 1398101, 1398101});
    px_resize_table_free(&t);
    /* BICUBIC 2 -> 4: scale 1/2 (support 2, ksize 5), centre 0.25 reads 0..1 at distances 0.25 and
     * 1.25: 0.8671875 and -0.0703125, over their sum 0.796875: 37/34 and -3/34 ->
     * 4564389.65 -> 4564390 and -370085.65 -> -370086 (negative values round away from zero). */
    CHECK_EQ(px_resize_coeffs(2, 4, PX_RESIZE_BICUBIC, &t, NULL), 0);
    CHECK_EQ(t.ksize, 5);
    px__check_run(&t, 0, 0, 2, (const int32_t[]){4564390, -370086});
    px__check_run(&t, 3, 0, 2, (const int32_t[]){-370086, 4564390});
    px_resize_table_free(&t);
    /* NEAREST 2 -> 7: positions 1/7, 3/7, ... summed in double; the fourth is 0.999.. (not 1.0 as
     * 3.5 * 2/7 would give), so index 0, as Pillow gives. */
    CHECK_EQ(px_resize_coeffs(2, 7, PX_RESIZE_NEAREST, &t, NULL), 0);
    static const int nearest[7] = {0, 0, 0, 0, 1, 1, 1};
    for (int i = 0; i < 7; i++)
        CHECK_EQ(t.first[i], nearest[i]);
    px_resize_table_free(&t);
    /* errors */
    pxvm_error err;
    CHECK_EQ(px_resize_coeffs(0, 4, PX_RESIZE_BOX, &t, &err), -1);
    CHECK_EQ(px_resize_coeffs(4, PX_RESIZE_MAX_SIDE + 1, PX_RESIZE_BOX, &t, &err), -1);
    CHECK_EQ(px_resize_coeffs(4, 4, 6, &t, &err), -1);
    CHECK_EQ(px_resize_filter_parse("Lanczos"), PX_RESIZE_LANCZOS);
    CHECK_EQ(px_resize_filter_parse("box"), PX_RESIZE_BOX);
    CHECK_EQ(px_resize_filter_parse("boxx"), -1);
    CHECK_EQ(px_resize_filter_parse("bo"), -1);
}

TEST(resize_tap)
{
    static const uint8_t row[4] = {0, 255, 255, 0};
    /* the BILINEAR 4 -> 2 run above: 255 * (1797559 + 599186) + 2^21 = 613267127, >> 22 = 146 */
    CHECK_EQ(px_resize_tap(row, 1, 0, 3, (const int32_t[]){1797559, 1797559, 599186}), 146);
    /* strided: the same samples 3 bytes apart */
    static const uint8_t strided[10] = {0, 9, 9, 255, 9, 9, 255, 9, 9, 0};
    CHECK_EQ(px_resize_tap(strided, 3, 0, 3, (const int32_t[]){1797559, 1797559, 599186}), 146);
    CHECK_EQ(px_resize_tap(strided, 3, 1, 2, (const int32_t[]){PX__ONE / 2, PX__ONE / 2}), 255);
    /* rounding: half rounds up, just below half rounds down */
    CHECK_EQ(px_resize_tap((const uint8_t[]){1}, 1, 0, 1, (const int32_t[]){PX__ONE / 2}), 1);     /* 0.5 */
    CHECK_EQ(px_resize_tap((const uint8_t[]){1}, 1, 0, 1, (const int32_t[]){PX__ONE / 2 - 1}), 0); /* 0.49.. */
    CHECK_EQ(px_resize_tap(row, 1, 1, 1, (const int32_t[]){PX__ONE / 510}), 0);     /* 255 * 8224 + 2^21 < 2^22 */
    CHECK_EQ(px_resize_tap(row, 1, 1, 1, (const int32_t[]){PX__ONE / 510 + 1}), 1); /* 255 * 8225 + 2^21 >= 2^22 */
    /* clamping: negative sums give 0, sums past 255 give 255 */
    CHECK_EQ(px_resize_tap(row, 1, 0, 2, (const int32_t[]){PX__ONE, -PX__ONE}), 0);
    CHECK_EQ(px_resize_tap(row, 1, 1, 2, (const int32_t[]){PX__ONE, PX__ONE}), 255);
    /* a sum past INT32_MAX reads as Pillow's wrapped int does: negative, so 0 */
    CHECK_EQ(px_resize_tap(row, 1, 1, 2, (const int32_t[]){2 * PX__ONE, 2 * PX__ONE}), 0);
    /* nearest: -1 on either axis is the fill value 0 */
    static const uint8_t img[2][4] = {{1, 2, 3, 4}, {5, 6, 7, 8}};
    CHECK_EQ(px_resize_nearest(&img[0][1], 2, 4, 1, 1), 8);
    CHECK_EQ(px_resize_nearest(&img[0][0], 2, 4, 0, 1), 5);
    CHECK_EQ(px_resize_nearest(&img[0][0], 2, 4, -1, 1), 0);
    CHECK_EQ(px_resize_nearest(&img[0][0], 2, 4, 1, -1), 0);
}

/* The host reference: equal sizes copy; channels are independent (four channels give, channel by
 * channel, what one channel gives); a change of one side only runs one pass (the same result as
 * applying that axis's table by hand). */
TEST(resize_reference)
{
    uint64_t state = 23;
    pxvm_image img = px_random_image(37, 23, &state);
    size_t n = 64u * 64u * 4u;
    uint8_t *out4 = calloc(n, 1), *out1 = calloc(n, 1), *plane = calloc(37u * 23u, 1);
    pxvm_error err;
    CHECK_EQ(px_resize_rgba8(img.px, 37, 23, 37 * 4, out4, 37, 23, 37 * 4, PX_RESIZE_LANCZOS, 4, &err), 0);
    CHECK(!memcmp(out4, img.px, 37u * 23u * 4u));
    static const int sizes[][2] = {{11, 5}, {64, 64}, {1, 23}, {37, 1}, {37, 40}, {13, 23}};
    for (int f = 0; f < PX_RESIZE__FILTERS; f++)
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
            int dw = sizes[s][0], dh = sizes[s][1];
            CHECK_EQ(px_resize_rgba8(img.px, 37, 23, 37 * 4, out4, dw, dh, dw * 4, f, 4, &err), 0);
            for (int c = 0; c < 4; c++) {
                for (size_t i = 0; i < 37u * 23u; i++)
                    plane[i] = img.px[i * 4u + (size_t)c];
                CHECK_EQ(px_resize_rgba8(plane, 37, 23, 37, out1, dw, dh, dw, f, 1, &err), 0);
                int same = 1;
                for (size_t i = 0; i < (size_t)dw * (size_t)dh; i++)
                    same &= out1[i] == out4[i * 4u + (size_t)c];
                if (!same)
                    px_test_fail(__FILE__, __LINE__, "%s 37x23 -> %dx%d: channel %d differs alone",
                                 px_resize_filter_name(f), dw, dh, c);
            }
        }
    /* height only (BICUBIC 37x23 -> 37x40): each output texel is one vertical tap of the source */
    px_resize_table t;
    CHECK_EQ(px_resize_coeffs(23, 40, PX_RESIZE_BICUBIC, &t, NULL), 0);
    CHECK_EQ(px_resize_rgba8(img.px, 37, 23, 37 * 4, out4, 37, 40, 37 * 4, PX_RESIZE_BICUBIC, 4, &err), 0);
    int same = 1;
    for (int y = 0; y < 40; y++)
        for (int x = 0; x < 37 * 4; x++)
            same &= out4[y * 37 * 4 + x] ==
                    px_resize_tap(img.px + x, 37 * 4, t.first[y], t.count[y], t.k + (size_t)y * (size_t)t.ksize);
    CHECK(same);
    px_resize_table_free(&t);
    /* width only (HAMMING 37x23 -> 13x23): each output texel is one horizontal tap */
    CHECK_EQ(px_resize_coeffs(37, 13, PX_RESIZE_HAMMING, &t, NULL), 0);
    CHECK_EQ(px_resize_rgba8(img.px, 37, 23, 37 * 4, out4, 13, 23, 13 * 4, PX_RESIZE_HAMMING, 4, &err), 0);
    same = 1;
    for (int y = 0; y < 23; y++)
        for (int x = 0; x < 13; x++)
            for (int c = 0; c < 4; c++)
                same &= out4[(y * 13 + x) * 4 + c] == px_resize_tap(img.px + y * 37 * 4 + c, 4, t.first[x], t.count[x],
                                                                   t.k + (size_t)x * (size_t)t.ksize);
    CHECK(same);
    px_resize_table_free(&t);
    CHECK_EQ(px_resize_rgba8(img.px, 37, 23, 37 * 4, out4, 13, 23, 13 * 4, PX_RESIZE_HAMMING, 5, &err), -1);
    free(out4);
    free(out1);
    free(plane);
    pxvm_image_free(&img);
}
