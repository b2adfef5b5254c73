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

/* Pillow's two passes as SPEC states them, written apart from vm/resize.c: the horizontal pass
 * into a whole dw x rows 8-bit intermediate, then the vertical pass over it. */
static void px__two_pass(const uint8_t *src, int sw, int sh, uint8_t *dst, int dw, int dh, int filter)
{
    pxvm_error err;
    px_resize_table tx, ty;
    CHECK_EQ(px_resize_coeffs(sw, dw, filter, &tx, &err), 0);
    CHECK_EQ(px_resize_coeffs(sh, dh, filter, &ty, &err), 0);
    int r0 = dh == sh ? 0 : ty.first[0], r1 = dh == sh ? sh : ty.first[dh - 1] + ty.count[dh - 1];
    uint8_t *tmp = malloc((size_t)dw * (size_t)(r1 - r0) * 4u);
    for (int r = r0; r < r1; r++)
        for (int x = 0; x < dw; x++)
            for (int c = 0; c < 4; c++)
                tmp[((size_t)(r - r0) * (size_t)dw + (size_t)x) * 4u + (size_t)c] =
                    dw == sw ? src[((size_t)r * (size_t)sw + (size_t)x) * 4u + (size_t)c]
                             : (uint8_t)px_resize_tap(src + (size_t)r * (size_t)sw * 4u + (size_t)c, 4, tx.first[x],
                                                      tx.count[x], tx.k + (size_t)x * (size_t)tx.ksize);
    for (int y = 0; y < dh; y++)
        for (int x = 0; x < dw; x++)
            for (int c = 0; c < 4; c++)
                dst[((size_t)y * (size_t)dw + (size_t)x) * 4u + (size_t)c] =
                    dh == sh ? tmp[((size_t)y * (size_t)dw + (size_t)x) * 4u + (size_t)c]
                             : (uint8_t)px_resize_tap(tmp + (size_t)x * 4u + (size_t)c, (int64_t)dw * 4, ty.first[y] - r0,
                                                      ty.count[y], ty.k + (size_t)y * (size_t)ty.ksize);
    free(tmp);
    px_resize_table_free(&tx);
    px_resize_table_free(&ty);
}

/* Every way px_resize_tile streams (columns copied, a ring with and without wrapping, sums kept
 * open), whole and split into tiles of columns and bands of rows, gives the two passes' bytes;
 * each way is met at least once. */
TEST(resize_streamed_equals_two_passes_every_way_and_tile)
{
    static const int sizes[][4] = {{1, 300, 300, 1}, {300, 1, 1, 300}, {7, 1, 1, 9}, {1, 7, 9, 1}, {2, 300, 300, 1},
                                   {3, 200, 150, 2}, {13, 11, 29, 40}, {13, 40, 29, 11}, {5, 3, 40, 17}, {40, 30, 41, 31},
                                   {64, 6, 7, 64},   {6, 64, 64, 7},   {1, 1, 5, 3},  {50, 2, 50, 9}, {9, 50, 9, 2}};
    uint64_t rng = 41;
    int ways[5] = {0}, n = 0; /* sel, ring, ring wrapped, open sums, none */
    for (int filter = 1; filter < PX_RESIZE__FILTERS; filter++)
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
            int sw = sizes[s][0], sh = sizes[s][1], dw = sizes[s][2], dh = sizes[s][3];
            pxvm_image src = px_random_image(sw, sh, &rng);
            uint8_t *want = malloc((size_t)dw * (size_t)dh * 4u), *got = malloc((size_t)dw * (size_t)dh * 4u);
            px__two_pass(src.px, sw, sh, want, dw, dh, filter);
            px_resize_op op;
            memset(&op, 0, sizeof op);
            pxvm_error err;
            CHECK_EQ(px_resize_rgba8(src.px, sw, sh, (int64_t)sw * 4, got, dw, dh, (int64_t)dw * 4, filter, 4, &err), 0);
            if (memcmp(got, want, (size_t)dw * (size_t)dh * 4u))
                px_test_fail(__FILE__, __LINE__, "%dx%d -> %dx%d filter %d: px_resize_rgba8 differs", sw, sh, dw, dh, filter);
            pxi_insn in;
            memset(&in, 0, sizeof in);
            in.op = PX_OP_RESIZE;
            in.a[PX_FI(RESIZE, filter)] = filter, in.a[PX_FI(RESIZE, w)] = dw, in.a[PX_FI(RESIZE, h)] = dh;
            CHECK_EQ(px_resize_op_make(&in, sw, sh, &op, &err), 0);
            ways[op.sel ? 0 : !op.vunits ? 4 : op.vopen ? 3 : op.vwrap ? 2 : 1]++;
            for (int split = 1; split <= 4; split++) { /* split x split tiles, each with its own scratch */
                memset(got, 0xA5, (size_t)dw * (size_t)dh * 4u);
                for (int by = 0; by < split; by++)
                    for (int bx = 0; bx < split; bx++) {
                        int x0 = dw * bx / split, x1 = dw * (bx + 1) / split, y0 = dh * by / split, y1 = dh * (by + 1) / split;
                        if (x0 == x1 || y0 == y1)
                            continue;
                        size_t bytes = px_resize_tile_bytes(&op, x1 - x0, 4);
                        uint8_t *scratch = bytes ? malloc(bytes) : NULL;
                        px_resize_tile(&op, src.px, (int64_t)sw * 4, got, (int64_t)dw * 4, 4, x0, x1, y0, y1, scratch);
                        free(scratch);
                    }
                if (memcmp(got, want, (size_t)dw * (size_t)dh * 4u))
                    px_test_fail(__FILE__, __LINE__, "%dx%d -> %dx%d filter %d in %dx%d tiles: bytes differ", sw, sh, dw, dh,
                                 filter, split, split);
                n++;
            }
            /* what the CPU holds is at most what the rule counts (the intermediate, tables apart) */
            int cw, ch, rows;
            uint64_t need = px_resize_need(sw, sh, dw, dh, 0, filter, &cw, &ch, &rows);
            CHECK(px_resize_tile_bytes(&op, dw, 4) <= 4u * (uint64_t)dw * (uint64_t)op.rows + 4u);
            CHECK(need >= 4u * ((uint64_t)dw * (2u + (uint64_t)op.tx.ksize + (op.sel ? 1u : 0u)) +
                                (uint64_t)dh * (2u + (uint64_t)op.ty.ksize)) + 4u * (uint64_t)dw * (uint64_t)(op.sel ? 0 : op.rows));
            CHECK_EQ(rows, op.sel && (sw == 1 || filter == PX_RESIZE_BOX) ? 0 : op.rows);
            px_resize_op_free(&op);
            free(want);
            free(got);
            pxvm_image_free(&src);
        }
    for (int w = 0; w < 4; w++)
        if (!ways[w])
            px_test_fail(__FILE__, __LINE__, "way %d (sel, ring, wrapped ring, open sums) never met", w);
    printf("  %d tilings; sel %d, ring %d, wrapped %d, open %d, direct %d\n", n, ways[0], ways[1], ways[2], ways[3], ways[4]);
}

/* px_resize_need counts exactly what the tables hold, and no intermediate where the horizontal
 * pass is a copy of columns (sw = 1, or BOX upscaling: SPEC V-RESIZE-5), over a sweep of sizes. */
TEST(resize_need_counts_the_tables_and_the_intermediate)
{
    pxvm_error err;
    int n = 0;
    for (int filter = 0; filter < PX_RESIZE__FILTERS; filter++)
        for (int sw = 1; sw <= 40; sw += 3)
            for (int sh = 1; sh <= 40; sh += 7)
                for (int w = 1; w <= 90; w += 11)
                    for (int h = 1; h <= 90; h += 13)
                        for (int fit = 0; fit < 2; fit++, n++) {
                            pxi_insn in;
                            memset(&in, 0, sizeof in);
                            in.op = PX_OP_RESIZE;
                            in.a[PX_FI(RESIZE, filter)] = filter, in.a[PX_FI(RESIZE, w)] = w, in.a[PX_FI(RESIZE, h)] = h;
                            in.a[PX_FI(RESIZE, fit)] = fit;
                            px_resize_op op;
                            CHECK_EQ(px_resize_op_make(&in, sw, sh, &op, &err), 0);
                            int cw, ch, rows, copies = !op.copy && op.filter && op.hpass &&
                                                          (sw == 1 || (filter == PX_RESIZE_BOX && op.cw > sw));
                            uint64_t need = px_resize_need(sw, sh, w, h, fit, filter, &cw, &ch, &rows);
                            CHECK_EQ(cw, op.cw);
                            CHECK_EQ(ch, op.ch);
                            if (copies)
                                CHECK(op.sel != NULL);
                            CHECK_EQ(rows, copies ? 0 : op.rows);
                            uint64_t tables = 4u * ((uint64_t)op.cw * (2u + (uint64_t)op.tx.ksize + (op.sel && copies ? 1u : 0u)) +
                                                    (uint64_t)op.ch * (2u + (uint64_t)op.ty.ksize));
                            CHECK_EQ(need, tables + 4u * (uint64_t)op.cw * (uint64_t)rows);
                            px_resize_op_free(&op);
                        }
    printf("  %d RESIZEs\n", n);
}
