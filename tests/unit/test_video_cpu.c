/* test_video_cpu.c - the CPU executor's bookkeeping for incremental sampling checked against the
 * plain rule it stands for: the mask's summed-area table against a scan of the tiles, and a
 * patch's selected pixels against each pixel's own tile box. (Whether the outputs stay exact is
 * the random frame sequences' job: incremental == full recompute.) */
#include <stdlib.h>

#include "../../executors/cpu/cpu_slot.h"
#include "test.h"

static uint32_t px__rand(uint32_t *s)
{
    *s = *s * 1664525u + 1013904223u;
    return *s >> 8;
}

/* A random mask of w x h tiles (RGBA8 pixels as DIFF writes them), dirty with probability
 * 1/odds. */
static void px__random_mask(uint8_t *mask, int w, int h, int odds, uint32_t *s)
{
    for (int i = 0; i < w * h; i++) {
        uint32_t p = px_mask_pixel(px__rand(s) % (uint32_t)odds == 0);
        memcpy(mask + 4 * i, &p, 4);
    }
}

static int px__scan(const uint8_t *mask, int mw, int x0, int y0, int x1, int y1)
{
    for (int y = y0; y <= y1; y++)
        for (int x = x0; x <= x1; x++) {
            uint32_t p;
            memcpy(&p, mask + 4 * (y * mw + x), 4);
            if (px_mask_dirty(p))
                return 1;
        }
    return 0;
}

TEST(video_cpu_mask_counts_answer_boxes_as_a_scan_does)
{
    uint32_t s = 7;
    for (int round = 0; round < 200; round++) {
        int mw = 1 + (int)(px__rand(&s) % 40), mh = 1 + (int)(px__rand(&s) % 30), odds = 1 + (int)(px__rand(&s) % 60);
        uint8_t *mask = malloc((size_t)mw * mh * 4);
        int32_t *counts = malloc(sizeof(int32_t) * (size_t)(mw + 1) * (mh + 1));
        px__random_mask(mask, mw, mh, odds, &s);
        px_cpu_mask_counts(mask, mw, mh, counts);
        for (int k = 0; k < 50; k++) {
            px_tilebox b = {(int)(px__rand(&s) % (uint32_t)mw), (int)(px__rand(&s) % (uint32_t)mh), 0, 0};
            b.x1 = b.x0 + (int)(px__rand(&s) % (uint32_t)(mw - b.x0 + 1)) - 1; /* x1 = x0 - 1: empty */
            b.y1 = b.y0 + (int)(px__rand(&s) % (uint32_t)(mh - b.y0));
            CHECK_EQ(px_cpu_box_dirty(counts, mw, b), px__scan(mask, mw, b.x0, b.y0, b.x1, b.y1));
        }
        free(mask);
        free(counts);
    }
}

TEST(video_cpu_selected_pixels_are_those_whose_tile_box_is_dirty)
{
    uint32_t s = 11;
    for (int round = 0; round < 300; round++) {
        int mw = 1 + (int)(px__rand(&s) % 24), mh = 1 + (int)(px__rand(&s) % 24), odds = 1 + (int)(px__rand(&s) % 30);
        int w = 1 + (int)(px__rand(&s) % 64), h = 1 + (int)(px__rand(&s) % 64);
        uint8_t *mask = malloc((size_t)mw * mh * 4);
        int32_t *counts = malloc(sizeof(int32_t) * (size_t)(mw + 1) * (mh + 1));
        px__random_mask(mask, mw, mh, odds, &s);
        px_cpu_mask_counts(mask, mw, mh, counts);
        /* spans as a patch's pixels have them: inclusive tile ranges inside the mask, rows often
         * repeating a span (any order along the patch: du may be negative) */
        int16_t spans[4 * 64];
        for (int i = 0; i < w; i++) {
            int a = (int)(px__rand(&s) % (uint32_t)mw), e = a + (int)(px__rand(&s) % (uint32_t)(mw - a));
            spans[i] = (int16_t)a, spans[w + i] = (int16_t)e;
        }
        for (int j = 0; j < h; j++) {
            if (j > 0 && px__rand(&s) % 3) {
                spans[2 * w + j] = spans[2 * w + j - 1], spans[2 * w + h + j] = spans[2 * w + h + j - 1];
                continue;
            }
            int a = (int)(px__rand(&s) % (uint32_t)mh), e = a + (int)(px__rand(&s) % (uint32_t)(mh - a));
            spans[2 * w + j] = (int16_t)a, spans[2 * w + h + j] = (int16_t)e;
        }
        uint64_t bits[64];
        px_cpu_patch_dirty_pixels(counts, mw, spans, w, h, bits);
        for (int j = 0; j < h; j++)
            for (int i = 0; i < w; i++)
                CHECK_EQ((bits[j] >> i) & 1u,
                         px__scan(mask, mw, spans[i], spans[2 * w + j], spans[w + i], spans[2 * w + h + j]));
        free(mask);
        free(counts);
    }
}
