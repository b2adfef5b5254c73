/* test_pyramid.c - PYRAMID against an independent derivation of every level, on edge sizes and
 * values and on the bundled photograph. */
#include <stdlib.h>

#include "test.h"

/* The reference, written from the spec text without px_sem.h: level l from level l-1 by
 * averaging the 2x2 block at (2x, 2y), clamping to the previous level's last column/row. */
static pxvm_image px__ref_level(const pxvm_image *prev)
{
    pxvm_image out;
    int w = prev->w / 2 > 0 ? prev->w / 2 : 1, h = prev->h / 2 > 0 ? prev->h / 2 : 1;
    pxvm_image_alloc(&out, w, h, NULL);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            for (int c = 0; c < 4; c++) {
                int xs[2] = {2 * x, 2 * x + 1 < prev->w ? 2 * x + 1 : prev->w - 1};
                int ys[2] = {2 * y, 2 * y + 1 < prev->h ? 2 * y + 1 : prev->h - 1};
                int sum = 0;
                for (int j = 0; j < 2; j++)
                    for (int i = 0; i < 2; i++)
                        sum += prev->px[((size_t)ys[j] * (size_t)prev->w + (size_t)xs[i]) * 4u + (size_t)c];
                out.px[((size_t)y * (size_t)w + (size_t)x) * 4u + (size_t)c] = (uint8_t)((sum + 2) / 4);
            }
    return out;
}

/* Builds PYRAMID over an input of img's size, runs it, and compares every level. */
static void px__check_pyramid(const pxvm_image *img, int max_levels_checked)
{
    pxvm_builder b;
    pxvm_build_init(&b, 16);
    int s = pxvm_build_slot(&b, PXI_ROLE_INPUT, "image", img->w, img->h);
    int32_t f[PXI_MAX_FIELDS] = {0};
    f[PX_FI(PYRAMID, slot)] = s;
    pxvm_build_insn(&b, PX_OP_PYRAMID, f);
    pxvm_build_insn(&b, PX_OP_HALT, NULL);
    pxvm_program prog;
    pxvm_executor *ex;
    pxvm_error err;
    const pxvm_image *in[] = {img};
    if (px_run_builder(&b, in, 1, &prog, &ex, &err) < 0) {
        px_test_fail(__FILE__, __LINE__, "%dx%d: %s", img->w, img->h, err.msg);
        return;
    }
    pxvm_image prev = px_read(&prog, ex, s, 0);
    CHECK(!memcmp(prev.px, img->px, (size_t)img->w * (size_t)img->h * 4u)); /* level 0 untouched */
    for (int l = 1; l < prog.slots[s].levels && l <= max_levels_checked; l++) {
        pxvm_image ref = px__ref_level(&prev), got = px_read(&prog, ex, s, l);
        CHECK_EQ(got.w, ref.w);
        CHECK_EQ(got.h, ref.h);
        if (got.w == ref.w && got.h == ref.h && memcmp(got.px, ref.px, (size_t)got.w * (size_t)got.h * 4u))
            px_test_fail(__FILE__, __LINE__, "%dx%d level %d differs from the reference", img->w, img->h, l);
        pxvm_image_free(&prev);
        pxvm_image_free(&ref);
        prev = got;
    }
    pxvm_image_free(&prev);
    px_close(&prog, ex);
}

TEST(pyramid_matches_reference_on_edge_sizes)
{
    const int sizes[][2] = {{1, 1}, {2, 1}, {1, 2}, {2, 2}, {3, 3}, {1, 7}, {7, 1}, {5, 3}, {3, 5},
                            {17, 9}, {64, 64}, {65, 33}, {100, 1}, {1, 100}, {255, 2}};
    uint64_t st = 1;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        pxvm_image img = px_random_image(sizes[i][0], sizes[i][1], &st);
        px__check_pyramid(&img, 99);
        pxvm_image_free(&img);
    }
}

TEST(pyramid_edge_values)
{
    const uint8_t vals[] = {0, 1, 127, 128, 255};
    pxvm_image img;
    pxvm_image_alloc(&img, 6, 4, NULL);
    for (size_t k = 0; k < sizeof vals; k++) {
        memset(img.px, vals[k], 6 * 4 * 4);
        px__check_pyramid(&img, 99);
    }
    /* alternating 0/1 columns: each 2x2 mean is 0.5, rounding up to 1; then 1s stay 1 */
    for (int y = 0; y < 4; y++)
        for (int x = 0; x < 6; x++)
            px_set(&img, x, y, (x & 1) ? 0x01010101u : 0);
    px__check_pyramid(&img, 99);
    pxvm_image_free(&img);
}

TEST(pyramid_level1_of_size1_axis_counts_twice)
{
    /* a 4x1 slot: level 1 is 2x1, each texel (a + b + a + b + 2) >> 2 of a horizontal pair */
    pxvm_image img;
    pxvm_image_alloc(&img, 4, 1, NULL);
    px_set(&img, 0, 0, 0x000000FFu);
    px_set(&img, 1, 0, 0x00000000u);
    px_set(&img, 2, 0, 0x00000001u);
    px_set(&img, 3, 0, 0x00000002u);
    pxvm_builder b;
    pxvm_build_init(&b, 16);
    int32_t f[PXI_MAX_FIELDS] = {0};
    f[PX_FI(PYRAMID, slot)] = pxvm_build_slot(&b, PXI_ROLE_INPUT, "image", 4, 1);
    pxvm_build_insn(&b, PX_OP_PYRAMID, f);
    pxvm_build_insn(&b, PX_OP_HALT, NULL);
    pxvm_program prog;
    pxvm_executor *ex;
    pxvm_error err;
    const pxvm_image *in[] = {&img};
    CHECK(px_run_builder(&b, in, 1, &prog, &ex, &err) == 0);
    pxvm_image l1 = px_read(&prog, ex, 1, 1), l2 = px_read(&prog, ex, 1, 2);
    CHECK_EQ(px_px(&l1, 0, 0) & 255, 128); /* (255+0+255+0+2)>>2 = 128 */
    CHECK_EQ(px_px(&l1, 1, 0) & 255, 2);   /* (1+2+1+2+2)>>2 = 2 */
    CHECK_EQ(px_px(&l2, 0, 0) & 255, 65);  /* (128+2+128+2+2)>>2 = 65 */
    pxvm_image_free(&l1);
    pxvm_image_free(&l2);
    px_close(&prog, ex);
    pxvm_image_free(&img);
}

TEST(pyramid_maximum_side)
{
    uint64_t st = 5;
    pxvm_image wide = px_random_image(16384, 1, &st), tall = px_random_image(3, 16384, &st);
    px__check_pyramid(&wide, 99);
    px__check_pyramid(&tall, 99);
    pxvm_image_free(&wide);
    pxvm_image_free(&tall);
}

TEST(pyramid_level1_of_the_photo_matches_independent_derivation)
{
    pxvm_limits lim;
    pxvm_limits_default(&lim);
    pxvm_image photo;
    pxvm_error err;
    CHECK(pxvm_png_load("programs/data/chelsea.png", &lim, &photo, &err) == 0);
    if (!photo.px)
        return;
    CHECK(photo.w == 451 && photo.h == 300);
    px__check_pyramid(&photo, 99);
    pxvm_image_free(&photo);
}
