/* fuzz_frames: the frame reader of tools/frames.c without FFmpeg: byte 0 picks the raw frames'
 * size and format (1..16 x 1..8, RGB or RGBA), the rest are the frames as on pxrun's standard
 * input (a partial last frame is an error); and the bytes up to the first NUL as --frame-size. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>

#include "../../tools/frames.h"
#include "fuzz_common.h"

static void px__size_text(const uint8_t *data, size_t size)
{
    char text[32];
    size_t n = 0;
    while (n < size && n < sizeof text - 1 && data[n])
        n++;
    memcpy(text, data, n);
    text[n] = 0;
    int w = -1, h = -1;
    if (px_frames_parse_size(text, &w, &h) < 0) {
        if (w != -1 || h != -1)
            abort();
        return;
    }
    int xs = 0;
    for (size_t i = 0; i < n; i++) {
        xs += text[i] == 'x';
        if (text[i] != 'x' && (text[i] < '0' || text[i] > '9'))
            abort();
    }
    if (xs != 1 || w < 1 || w > 65535 || h < 1 || h > 65535)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    px__size_text(data, size);
    if (size < 1)
        return 0;
    int w = (data[0] & 15) + 1, h = ((data[0] >> 4) & 7) + 1, channels = data[0] & 128 ? 4 : 3;
    pxvm_limits lim = px_fuzz_limits();
    static uint8_t none[1];
    FILE *in = size > 1 ? fmemopen((void *)(data + 1), size - 1, "rb") : fmemopen(none, 1, "rb");
    if (!in)
        return 0;
    if (size == 1)
        fgetc(in); /* an empty stream (fmemopen needs a size >= 1) */
    px_frames *f = NULL;
    pxvm_error err;
    if (px_frames_open_raw(in, "fuzz", w, h, channels, &lim, &f, &err) == 0) {
        size_t frame = (size_t)w * (size_t)h * (size_t)channels, frames = (size - 1) / frame;
        long got = 0;
        pxvm_image img;
        int rc;
        while ((rc = px_frames_next(f, &img, &err)) == 1) {
            const uint8_t *p = data + 1 + (size_t)got * frame;
            for (int i = 0; i < w * h; i++)
                if (img.px[4 * i] != p[i * channels] || img.px[4 * i + 3] != (channels == 4 ? p[i * channels + 3] : 255))
                    abort();
            pxvm_image_free(&img);
            got++;
        }
        /* every whole frame comes out; a partial one is an error, no bytes: the end */
        if ((size_t)got != frames || (rc == 0) != ((size - 1) % frame == 0))
            abort();
    }
    px_frames_close(f);
    fclose(in);
    return 0;
}
