/* test_resize_kernels.c - RESIZE's hot loops (vm/resize_kernels.c): the AVX2 kernels and the
 * portable ones give the bytes of isa/px_resize.h's rule, sample by sample, at the vector's edges
 * (widths around multiples of 8 and 16, one tap, one texel, sums that clamp either side and
 * wrap), and px_resize_rgba8 gives the same bytes with either, for every filter and 1..4
 * channels. On a CPU without AVX2 the portable kernels are checked alone (the test says so). */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../../isa/px_resize.h"
#include "../../vm/resize.h"
#include "test.h"

static uint32_t px__next(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(*s >> 33);
}

/* Both kernel sets, portable first; n = 1 without AVX2. */
static int px__kernel_sets(const px_resize_kernels *set[2])
{
    CHECK_EQ(px_resize_isa(PX_RESIZE_ISA_PORTABLE), 0);
    set[0] = px_resize_kernels_get();
    CHECK_STR(set[0]->name, "portable");
    int n = 1;
    if (px_resize_isa(PX_RESIZE_ISA_AVX2) == 0) {
        set[1] = px_resize_kernels_get();
        CHECK_STR(set[1]->name, "avx2");
        n = 2;
    } else {
        fprintf(stderr, "note: no AVX2 on this CPU, the portable kernels checked alone\n");
    }
    CHECK_EQ(px_resize_isa(PX_RESIZE_ISA_AUTO), 0);
    return n;
}

/* vrow, vmac and vclamp against px_resize_tap, px_resize_mac and px_resize_clamp, for every
 * width 0..70 and 1..9 taps; coefficients random over +-2^23 (sums past 255 and below 0, and
 * products that wrap the 32 bits), and, in every third case, sums at exactly 255 << 22 (and 255
 * less, for more than one tap) and one of half less 255. */
TEST(resize_kernels_vertical_equal_the_rule_at_every_width)
{
    const px_resize_kernels *set[2];
    int sets = px__kernel_sets(set);
    uint64_t rng = 7;
    enum { W = 70, T = 9, STRIDE = 83 };
    uint8_t rows[T * STRIDE], want[W], got[W];
    int32_t k[T];
    uint32_t acc0[W], want_acc[W], acc[W];
    for (int taps = 1; taps <= T; taps++)
        for (int n = 0; n <= W; n++) {
            for (size_t i = 0; i < sizeof rows; i++)
                rows[i] = (uint8_t)px__next(&rng);
            for (int j = 0; j < taps; j++)
                k[j] = (int32_t)(px__next(&rng) % (1u << 24)) - (1 << 23);
            if (n % 3 == 0) { /* 255s at 1.0 (exactly 255 after the shift), column 0 at 0 less 255 * 1 */
                memset(rows, 255, sizeof rows);
                rows[0] = 0;
                for (int j = 0; j < taps; j++)
                    k[j] = j == 0 ? 1 << PX_RESIZE_PREC : j == taps - 1 ? -1 : 0;
            }
            for (int i = 0; i < n; i++) {
                want[i] = (uint8_t)px_resize_tap(rows + i, STRIDE, 0, taps, k);
                acc0[i] = px__next(&rng);
                want_acc[i] = px_resize_mac(acc0[i], rows[i], (uint32_t)k[0]);
            }
            for (int s = 0; s < sets; s++) {
                memset(got, 0xA5, sizeof got);
                set[s]->vrow(rows, STRIDE, taps, k, got, (size_t)n);
                if (memcmp(got, want, (size_t)n) || (n < W && got[n] != 0xA5))
                    px_test_fail(__FILE__, __LINE__, "%s vrow: %d wide, %d taps", set[s]->name, n, taps);
                memcpy(acc, acc0, sizeof acc);
                set[s]->vmac(acc, rows, (uint32_t)k[0], (size_t)n);
                if (memcmp(acc, want_acc, (size_t)n * 4u))
                    px_test_fail(__FILE__, __LINE__, "%s vmac: %d wide", set[s]->name, n);
                memset(got, 0xA5, sizeof got);
                set[s]->vclamp(acc0, got, (size_t)n);
                for (int i = 0; i < n; i++)
                    if (got[i] != px_resize_clamp(acc0[i]))
                        px_test_fail(__FILE__, __LINE__, "%s vclamp: %d wide, at %d", set[s]->name, n, i);
                if (n < W && got[n] != 0xA5)
                    px_test_fail(__FILE__, __LINE__, "%s vclamp wrote past %d", set[s]->name, n);
            }
        }
}

/* hrow4 and hrow3 against px_resize_tap per channel, on the tables of every filter (runs of 1
 * tap, of 4k and 4k + 1..3 taps, a 1-texel source, runs that end at the row's last texel), and
 * on tables whose coefficients drive the sums past both clamps. The row ends where an unreadable
 * page begins, so that a read past it stops the test (the kernels read 16 bytes at a time). */
TEST(resize_kernels_horizontal_equal_the_rule_on_every_filter)
{
    const px_resize_kernels *set[2];
    int sets = px__kernel_sets(set);
    static const int sizes[][2] = {{1, 1}, {1, 9}, {2, 1}, {3, 17}, {17, 3}, {40, 7}, {7, 40}, {64, 13}, {100, 99}, {9, 1}, {6, 5}};
    uint64_t rng = 11;
    uint8_t want[100 * 4], got[100 * 4];
    pxvm_error err;
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    uint8_t *pages = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(pages != MAP_FAILED);
    CHECK_EQ(mprotect(pages + page, page, PROT_NONE), 0);
    for (int filter = 1; filter < PX_RESIZE__FILTERS; filter++)
        for (size_t c = 0; c < sizeof sizes / sizeof sizes[0]; c++)
            for (int ch = 3; ch <= 4; ch++) {
                int in = sizes[c][0], out = sizes[c][1];
                px_resize_table t;
                CHECK_EQ(px_resize_coeffs(in, out, filter, &t, &err), 0);
                uint8_t *src = pages + page - (size_t)in * (size_t)ch;
                for (int pass = 0; pass < 2; pass++) {
                    for (int i = 0; i < in * ch; i++)
                        src[i] = (uint8_t)px__next(&rng);
                    if (pass) /* wild coefficients: sums below 0, past 255, wrapped */
                        for (int i = 0; i < out * t.ksize; i++)
                            t.k[i] = (int32_t)px__next(&rng);
                    for (int x = 0; x < out; x++)
                        for (int i = 0; i < ch; i++)
                            want[x * ch + i] = (uint8_t)px_resize_tap(src + i, ch, t.first[x], t.count[x],
                                                                      t.k + (size_t)x * (size_t)t.ksize);
                    for (int s = 0; s < sets; s++)
                        for (int x0 = 0; x0 < out && x0 < 3; x0++) {
                            memset(got, 0xA5, sizeof got);
                            (ch == 4 ? set[s]->hrow4 : set[s]->hrow3)(src, &t, x0, out, got);
                            size_t n = (size_t)(out - x0) * (size_t)ch;
                            if (memcmp(got, want + x0 * ch, n) || (n < sizeof got && got[n] != 0xA5))
                                px_test_fail(__FILE__, __LINE__, "%s hrow%d: %s %d -> %d from %d%s", set[s]->name, ch,
                                             px_resize_filter_name(filter), in, out, x0, pass ? ", wild coefficients" : "");
                        }
                }
                px_resize_table_free(&t);
            }
    munmap(pages, 2 * page);
}

/* px_resize_rgba8 with the AVX2 kernels equals it with the portable ones: every filter, sides of
 * 1 and around the vector widths, up and down, 1..4 channels (each way px_resize_tile streams is
 * met: test_resize.c's sweep checks the portable bytes against the two passes and Pillow). */
TEST(resize_kernels_both_give_the_same_image)
{
    const px_resize_kernels *set[2];
    int sets = px__kernel_sets(set);
    if (sets < 2)
        return;
    static const int sides[] = {1, 2, 5, 8, 15, 16, 17, 33, 61};
    uint64_t rng = 5;
    pxvm_error err;
    uint8_t *src = malloc(61u * 61u * 4u), *a = malloc(61u * 61u * 4u), *b = malloc(61u * 61u * 4u);
    for (size_t i = 0; i < 61u * 61u * 4u; i++)
        src[i] = (uint8_t)px__next(&rng);
    int cases = 0;
    for (int filter = 0; filter < PX_RESIZE__FILTERS; filter++)
        for (int channels = 1; channels <= 4; channels++)
            for (size_t i = 0; i < 9; i++)
                for (size_t j = 0; j < 9; j++) {
                    int sw = sides[i], sh = sides[(i + j) % 9], dw = sides[j], dh = sides[(i * 2 + j) % 9];
                    size_t bytes = (size_t)dw * (size_t)dh * (size_t)channels;
                    CHECK_EQ(px_resize_isa(PX_RESIZE_ISA_PORTABLE), 0);
                    CHECK_EQ(px_resize_rgba8(src, sw, sh, (int64_t)sw * channels, a, dw, dh, (int64_t)dw * channels,
                                             filter, channels, &err), 0);
                    CHECK_EQ(px_resize_isa(PX_RESIZE_ISA_AVX2), 0);
                    CHECK_EQ(px_resize_rgba8(src, sw, sh, (int64_t)sw * channels, b, dw, dh, (int64_t)dw * channels,
                                             filter, channels, &err), 0);
                    if (memcmp(a, b, bytes))
                        px_test_fail(__FILE__, __LINE__, "%s, %d channels: %dx%d -> %dx%d differ between the kernels",
                                     px_resize_filter_name(filter), channels, sw, sh, dw, dh);
                    cases++;
                }
    CHECK_EQ(px_resize_isa(PX_RESIZE_ISA_AUTO), 0);
    CHECK_EQ(cases, 6 * 4 * 81);
    free(src), free(a), free(b);
}

/* px_resize_rgba8_threads gives px_resize_rgba8's bytes in any number of bands: images large
 * enough to be split (a downscale through the open sums, an upscale through the ring, the height
 * alone, the width alone, a copy of columns), every filter, 1..4 channels, 2..7 threads (more
 * threads than rows too), and px_resize_policy with threads set. */
TEST(resize_threads_give_the_bytes_of_one_thread)
{
    static const int sizes[][4] = {{1000, 700, 301, 211}, {150, 97, 640, 480}, {500, 800, 500, 131},
                                   {900, 300, 97, 300},   {1, 900, 700, 3},    {700, 900, 3, 2}};
    uint64_t rng = 3;
    pxvm_error err;
    size_t most = 1000u * 900u * 4u;
    uint8_t *src = malloc(most), *one = malloc(most), *many = malloc(most);
    for (size_t i = 0; i < most; i++)
        src[i] = (uint8_t)px__next(&rng);
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
        for (int filter = 0; filter < PX_RESIZE__FILTERS; filter++) {
            int sw = sizes[s][0], sh = sizes[s][1], dw = sizes[s][2], dh = sizes[s][3], channels = 1 + (int)(s + (size_t)filter) % 4;
            size_t bytes = (size_t)dw * (size_t)dh * (size_t)channels;
            CHECK_EQ(px_resize_rgba8(src, sw, sh, (int64_t)sw * channels, one, dw, dh, (int64_t)dw * channels, filter,
                                     channels, &err), 0);
            for (int threads = 2; threads <= 7; threads += 5 - (int)s % 3) {
                memset(many, 0xA5, bytes);
                CHECK_EQ(px_resize_rgba8_threads(src, sw, sh, (int64_t)sw * channels, many, dw, dh, (int64_t)dw * channels,
                                                 filter, channels, threads, &err), 0);
                if (memcmp(one, many, bytes))
                    px_test_fail(__FILE__, __LINE__, "%s, %d channels, %d threads: %dx%d -> %dx%d differs from one thread",
                                 px_resize_filter_name(filter), channels, threads, sw, sh, dw, dh);
            }
        }
    pxvm_image img = {1000, 700, src}, a, b;
    px_policy p;
    CHECK_EQ(px_policy_parse("fit:lanczos", &p, &err), 0);
    CHECK_EQ(px_resize_policy(&img, 333, 333, &p, &a, &err), 0);
    p.threads = 3;
    CHECK_EQ(px_resize_policy(&img, 333, 333, &p, &b, &err), 0);
    CHECK(!memcmp(a.px, b.px, 333u * 333u * 4u));
    pxvm_image_free(&a), pxvm_image_free(&b);
    free(src), free(one), free(many);
}
