/* pxresize - resize an image as Pillow's Image.resize does (the RESIZE rule, isa/SPEC.md) with
 * the host reference of vm/resize.c: the four RGBA8 channels each on their own (so a grey or RGB
 * image gives Pillow's L or RGB result in its colour channels, A staying 255). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../vm/resize.h"
#include "../vm/vm.h"
#include "outputs.h"

static int px__usage(FILE *f, int status)
{
    fprintf(f, "usage: pxresize IN.png|IN.jpg WxH FILTER OUT.png\n"
                    "  FILTER: nearest, box, bilinear, hamming, bicubic or lanczos (Pillow's filters)\n");
    return status;
}

int main(int argc, char **argv)
{
    if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")))
        return px__usage(stdout, 0);
    if (argc != 5)
        return px__usage(stderr, 2);
    pxvm_limits lim;
    pxvm_limits_default(&lim);
    int w = 0, h = 0, filter = px_resize_filter_parse(argv[3]);
    char end = 0;
    if (sscanf(argv[2], "%dx%d%c", &w, &h, &end) != 2 || w < 1 || h < 1 || (uint32_t)w > lim.max_side ||
        (uint32_t)h > lim.max_side || filter < 0)
        return px__usage(stderr, 2);
    pxvm_error err = {0};
    pxvm_image in = {0}, out = {0};
    pxvm_outputs o = {0};
    uint8_t *png = NULL;
    size_t len = 0;
    int rc = 0;
    if (pxvm_image_load_any(argv[1], &lim, &in, &err) < 0 || pxvm_image_alloc(&out, w, h, &err) < 0 ||
        px_resize_rgba8_threads(in.px, in.w, in.h, (int64_t)in.w * 4, out.px, w, h, (int64_t)w * 4, filter, 4, 0, &err) < 0 ||
        pxvm_png_encode(&out, &png, &len, &err) < 0 || pxvm_outputs_add(&o, argv[4], png, len, &err) < 0 ||
        pxvm_outputs_commit(&o, &err) < 0) {
        fprintf(stderr, "pxresize: %s\n", err.msg);
        rc = pxvm_exit_status(err.cls);
    }
    free(png);
    pxvm_image_free(&in);
    pxvm_image_free(&out);
    return rc;
}
