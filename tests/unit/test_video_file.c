/* test_video_file.c - the C API's video files (include/pxvm.h "video files", api/video.c) on
 * OpenCV's vtest.avi (build/data, `make video-data`; the tests skip without it): its size, count
 * and rate, RGB and RGBA frames equal to the reader pxrun --frames uses, frames dropped counted
 * as frames read, and errors naming the file. */
#include <stdlib.h>
#include <unistd.h>

#include "../../api/video.h"
#include "../../include/pxvm.h"
#include "test.h"

static const char *px__vtest(void)
{
    const char *path = "build/data/vtest.avi";
    if (access(path, R_OK) == 0)
        return path;
    printf("  (skipped: %s is missing: make video-data)\n", path);
    return NULL;
}

TEST(video_file_info_frames_equal_pxrun_reader)
{
    const char *path = px__vtest();
    if (!path)
        return;
    pxvm_video *v;
    int w = 0, h = 0, got = 0;
    long n = 0;
    double fps = 0;
    CHECK_EQ(pxvm_video_open(path, NULL, &v), PXVM_OK);
    CHECK_EQ(pxvm_video_info(v, &w, &h, &n, &fps), PXVM_OK);
    CHECK_EQ(w, 768);
    CHECK_EQ(h, 576);
    CHECK_EQ(n, 795);
    CHECK(fps == 10.0);
    px_video *ref;
    pxvm_limits lim;
    pxvm_limits_default(&lim);
    pxvm_error err;
    CHECK_EQ(px_video_open(path, &lim, &ref, &err), 0);
    uint8_t *rgb = malloc((size_t)w * (size_t)h * 3), *rgba = malloc((size_t)w * (size_t)h * 4);
    pxvm_view vrgb = pxvm_view_host(rgb, w, h, 3), vrgba = pxvm_view_host(rgba, w, h, 4);
    for (int k = 0; k < 6; k++) { /* frames 0, 1 read as RGB, 2, 3 as RGBA, 4, 5 dropped */
        pxvm_image want;
        CHECK_EQ(px_video_next(ref, &want, &err), 1);
        CHECK_EQ(pxvm_video_next(v, k < 2 ? &vrgb : k < 4 ? &vrgba : NULL, &got), PXVM_OK);
        CHECK_EQ(got, 1);
        size_t diff = 0;
        for (size_t i = 0; k < 4 && i < (size_t)w * (size_t)h; i++)
            for (size_t c = 0; c < (k < 2 ? 3u : 4u); c++)
                diff += (k < 2 ? rgb[3 * i + c] : rgba[4 * i + c]) != want.px[4 * i + c];
        CHECK_EQ(diff, 0);
        pxvm_image_free(&want);
    }
    long frames = 6;
    while (pxvm_video_next(v, NULL, &got) == PXVM_OK && got)
        frames++;
    CHECK_EQ(frames, 795);
    CHECK_EQ(got, 0);
    CHECK_EQ(pxvm_video_next(v, &vrgb, &got), PXVM_OK); /* past the end: still the end */
    CHECK_EQ(got, 0);
    px_video_close(ref);
    pxvm_video_close(v);
    free(rgb);
    free(rgba);
}

TEST(video_file_errors_name_the_file)
{
    pxvm_video *v = (pxvm_video *)1;
    CHECK_EQ(pxvm_video_open("no/such/clip.avi", NULL, &v), PXVM_IO);
    CHECK(v == NULL);
    CHECK_STR(pxvm_errmsg(), "no/such/clip.avi");
    CHECK_EQ(pxvm_video_open("Makefile", NULL, &v), PXVM_IO); /* text: no video */
    CHECK_STR(pxvm_errmsg(), "'Makefile'");
    pxvm_video_close(NULL);
    const char *path = px__vtest();
    if (!path)
        return;
    pxvm_limits lim;
    pxvm_limits_default(&lim);
    lim.max_side = 767; /* one below the width: refused, naming both */
    CHECK_EQ(pxvm_video_open(path, &lim, &v), PXVM_INVALID);
    CHECK_STR(pxvm_errmsg(), "'build/data/vtest.avi' is 768x576; sides must be 1..767");
    lim.max_side = 768;
    CHECK_EQ(pxvm_video_open(path, &lim, &v), PXVM_OK);
    uint8_t px[16 * 16 * 3];
    pxvm_view small = pxvm_view_host(px, 16, 16, 3);
    int got = 7;
    CHECK_EQ(pxvm_video_next(v, &small, &got), PXVM_USAGE);
    CHECK_STR(pxvm_errmsg(), "'build/data/vtest.avi' has frames of 768x576");
    CHECK_EQ(got, 0);
    pxvm_video_close(v);
}
