/* test_semantics.c - the integer arithmetic of px_sem.h, edge values written out. */
#include "test.h"

#include "../../isa/px_sem.h"

TEST(sem_floor_shift)
{
    CHECK_EQ(px_floor_shift(0, 16), 0);
    CHECK_EQ(px_floor_shift(65535, 16), 0);
    CHECK_EQ(px_floor_shift(65536, 16), 1);
    CHECK_EQ(px_floor_shift(-1, 16), -1);
    CHECK_EQ(px_floor_shift(-65536, 16), -1);
    CHECK_EQ(px_floor_shift(-65537, 16), -2);
    CHECK_EQ(px_floor_shift(-3, 1), -2);
    CHECK_EQ(px_floor_shift(INT64_MIN, 1), INT64_MIN / 2);
    CHECK_EQ(px_floor_shift(7, 0), 7);
}

TEST(sem_mip_chain_sizes)
{
    CHECK_EQ(px_mip_levels(1, 1), 1);
    CHECK_EQ(px_mip_levels(2, 1), 2);
    CHECK_EQ(px_mip_levels(3, 1), 2);
    CHECK_EQ(px_mip_levels(451, 300), 9);
    CHECK_EQ(px_mip_levels(16384, 1), 15);
    CHECK_EQ(px_mip_levels(4096, 4096), 13);
    CHECK_EQ(px_mip_dim(451, 1), 225);
    CHECK_EQ(px_mip_dim(451, 8), 1);
    CHECK_EQ(px_mip_dim(1, 5), 1);
}

TEST(sem_box_rounding_edges)
{
    CHECK_EQ(px_box1(0, 0, 0, 0), 0);
    CHECK_EQ(px_box1(255, 255, 255, 255), 255);
    CHECK_EQ(px_box1(0, 0, 0, 1), 0);   /* 3/4 -> 0 */
    CHECK_EQ(px_box1(0, 0, 1, 1), 1);   /* 0.5 rounds up */
    CHECK_EQ(px_box1(127, 128, 127, 128), 128); /* 127.5 rounds up */
    CHECK_EQ(px_box1(0, 0, 0, 255), 64);        /* 63.75 */
    CHECK_EQ(px_box1(1, 0, 0, 0), 0);
    CHECK_EQ(px_box4(0x00010203u, 0x00010203u, 0xFF000000u, 0x01000000u), px_pack(2, 1, 1, 64)); /* A: (0+0+255+1+2)>>2 */
    CHECK_EQ(px_pyr_src1(0, 1), 0); /* size-1 source: the texel counts twice */
    CHECK_EQ(px_pyr_src1(1, 5), 3);
    CHECK_EQ(px_pyr_src1(0, 2), 1);
}

TEST(sem_box2x2_is_box4)
{
    uint64_t st = 99;
    for (int i = 0; i < 100000; i++) {
        uint64_t top = px_rand(&st), bottom = px_rand(&st);
        if (i < 4) /* the extremes */
            top = bottom = i < 2 ? 0 : ~0ull, bottom ^= (uint64_t)(i & 1) * 0xFF00FF00FF00FF00ull;
        px_rgba want = px_box4((uint32_t)top, (uint32_t)(top >> 32), (uint32_t)bottom, (uint32_t)(bottom >> 32));
        if (px_box2x2(top, bottom) != want) {
            px_test_fail(__FILE__, __LINE__, "%016llx %016llx", (unsigned long long)top, (unsigned long long)bottom);
            return;
        }
    }
}

TEST(sem_box4_is_box1_per_channel)
{
    uint64_t st = 5;
    for (int i = 0; i < 100000; i++) {
        uint32_t a = (uint32_t)px_rand(&st), b = (uint32_t)px_rand(&st), c = (uint32_t)px_rand(&st), d = (uint32_t)px_rand(&st);
        px_rgba v = px_box4(a, b, c, d);
        for (int ch = 0; ch < 4; ch++)
            if (px_ch(v, ch) != px_box1(px_ch(a, ch), px_ch(b, ch), px_ch(c, ch), px_ch(d, ch))) {
                px_test_fail(__FILE__, __LINE__, "%08x %08x %08x %08x channel %d", a, b, c, d, ch);
                return;
            }
    }
}

TEST(sem_linear_axis_weights)
{
    int i0, i1;
    uint32_t w;
    /* texel centre 2.5 at level 0: exactly texel 2, weight 0 */
    px_linear_axis(2 * 65536 + 32768, 0, 8, &i0, &i1, &w);
    CHECK(i0 == 2 && i1 == 3 && w == 0);
    /* 3.0: halfway between texels 2 and 3 */
    px_linear_axis(3 * 65536, 0, 8, &i0, &i1, &w);
    CHECK(i0 == 2 && i1 == 3 && w == 128);
    /* weights keep bits 15..8 of the fraction: 1/256 - 1/65536 truncates to 0 */
    px_linear_axis(2 * 65536 + 32768 + 255, 0, 8, &i0, &i1, &w);
    CHECK(i0 == 2 && w == 0);
    px_linear_axis(2 * 65536 + 32768 + 256, 0, 8, &i0, &i1, &w);
    CHECK(i0 == 2 && w == 1);
    /* left of the image: both clamp to 0 */
    px_linear_axis(-5 * 65536, 0, 8, &i0, &i1, &w);
    CHECK(i0 == 0 && i1 == 0);
    /* 0.25: between texel -1 (clamped to 0) and 0, weight 0.75 */
    px_linear_axis(16384, 0, 8, &i0, &i1, &w);
    CHECK(i0 == 0 && i1 == 0 && w == 192);
    /* right edge */
    px_linear_axis(8 * 65536, 0, 8, &i0, &i1, &w);
    CHECK(i0 == 7 && i1 == 7);
    /* level 1 halves the coordinate: 5.0 at level 0 is 2.5 at level 1, a texel centre */
    px_linear_axis(5 * 65536, 1, 4, &i0, &i1, &w);
    CHECK(i0 == 2 && i1 == 3 && w == 0);
    /* huge coordinates stay in range */
    px_linear_axis(INT64_C(1) << 50, 0, 8, &i0, &i1, &w);
    CHECK(i0 == 7 && i1 == 7);
    px_linear_axis(-(INT64_C(1) << 50), 3, 8, &i0, &i1, &w);
    CHECK(i0 == 0 && i1 == 0);
}

TEST(sem_nearest_axis)
{
    CHECK_EQ(px_nearest_axis(0, 0, 4), 0);
    CHECK_EQ(px_nearest_axis(65535, 0, 4), 0);
    CHECK_EQ(px_nearest_axis(65536, 0, 4), 1);
    CHECK_EQ(px_nearest_axis(-1, 0, 4), 0);
    CHECK_EQ(px_nearest_axis(100 * 65536, 0, 4), 3);
    CHECK_EQ(px_nearest_axis(3 * 65536, 1, 4), 1);
    CHECK_EQ(px_lod_nearest(127, 5), 0);
    CHECK_EQ(px_lod_nearest(128, 5), 1); /* half rounds up */
    CHECK_EQ(px_lod_nearest(65535, 5), 4);
}

TEST(sem_bilerp_and_round_edges)
{
    const uint32_t v[] = {0, 1, 127, 128, 255};
    for (int a = 0; a < 5; a++)
        for (int b = 0; b < 5; b++) {
            px_rgba ta = px_pack(v[a], v[a], v[a], v[a]), tb = px_pack(v[b], v[b], v[b], v[b]);
            /* weight 0 and full weight reproduce the texel exactly */
            px_acc4 z = px_bilerp(ta, tb, ta, tb, 0, 0);
            CHECK_EQ(px_ch(px_round24(px_lerp(z, z, 0)), 0), v[a]);
            /* halfway: (a + b) / 2 rounded half up */
            px_acc4 h = px_bilerp(ta, tb, ta, tb, 128, 0);
            CHECK_EQ(px_ch(px_round24(px_lerp(h, h, 0)), 2), (v[a] + v[b] + 1) / 2);
            /* between levels: level a and level b with f = 64 -> (3a + b)/4 rounded half up */
            CHECK_EQ(px_ch(px_round24(px_lerp(z, px_bilerp(tb, tb, tb, tb, 0, 0), 64)), 1), (3 * v[a] + v[b] + 2) / 4);
        }
    /* the extreme accumulator value does not overflow */
    px_acc4 m = px_bilerp(0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu, 255, 255);
    CHECK_EQ(m.c[3], 255u * 65536u);
    CHECK_EQ(px_round24(px_lerp(m, m, 255)), 0xFFFFFFFFu);
}

TEST(sem_lod_split)
{
    int l0, l1;
    uint32_t f;
    px_lod_split(0, 5, &l0, &l1, &f);
    CHECK(l0 == 0 && l1 == 1 && f == 0);
    px_lod_split(2 * 256 + 64, 5, &l0, &l1, &f);
    CHECK(l0 == 2 && l1 == 3 && f == 64);
    px_lod_split(3 * 256 + 255, 5, &l0, &l1, &f);
    CHECK(l0 == 3 && l1 == 4 && f == 255);
    px_lod_split(4 * 256 + 200, 5, &l0, &l1, &f); /* at or past the last level: clamped */
    CHECK(l0 == 4 && l1 == 4 && f == 0);
    px_lod_split(65535, 1, &l0, &l1, &f);
    CHECK(l0 == 0 && l1 == 0 && f == 0);
}

TEST(sem_patch_positions)
{
    /* 16 pixels, step 1 texel, centre 8.0: positions 0.5, 1.5, ..., 15.5 (texel centres) */
    CHECK_EQ(px_patch_pos(8 * 65536, 65536, 0, 16), 32768);
    CHECK_EQ(px_patch_pos(8 * 65536, 65536, 15, 16), 15 * 65536 + 32768);
    /* odd width: the middle pixel sits on the centre */
    CHECK_EQ(px_patch_pos(1000, 777, 2, 5), 1000);
    /* odd product: floor of the half */
    CHECK_EQ(px_patch_pos(0, 1, 0, 2), -1);
    CHECK_EQ(px_patch_pos(0, 1, 1, 2), 0);
    /* extremes do not overflow 64 bits */
    CHECK_EQ(px_patch_pos(INT32_MAX, INT32_MAX, 65534, 65535), (int64_t)INT32_MAX + (int64_t)32767 * INT32_MAX);
    CHECK_EQ(px_entry_q16(0xFFFFFFFFu), -1);
    CHECK_EQ(px_entry_q16(0x80000000u), INT32_MIN);
    CHECK_EQ(px_entry_q16(0x7FFFFFFFu), INT32_MAX);
}
