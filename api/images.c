/* images.c - images in and out of the API: decoded from memory or a file, encoded as PNG. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* ---- images --------------------------------------------------------------------------------- */

int pxvm_image_decode(const void *data, size_t len, const char *name, const pxvm_limits *lim, uint8_t **rgba,
                      int *w, int *h)
{
    pxvm_limits def;
    pxvm_error err;
    pxvm_image img;
    if (!data || !rgba || !w || !h)
        return px__refuse(PXE_NULL_ARGUMENT, "pxvm_image_decode");
    int bad_limits = px__check_limits(lim, "pxvm_image_decode");
    if (bad_limits)
        return bad_limits;
    px__last_warning[0] = 0;
    if (pxvm_image_decode_any(data, len, name ? name : "image", px__limits(lim, &def), &img, &err) < 0)
        return pxvm_error_at(px__fail(&err), -1, -1, name ? name : "image");
    px__keep_warning(&err);
    *rgba = img.px, *w = img.w, *h = img.h;
    return 0;
}

int pxvm_image_load(const char *path, const pxvm_limits *lim, uint8_t **rgba, int *w, int *h)
{
    pxvm_limits def;
    pxvm_error err;
    pxvm_image img;
    if (!path || !rgba || !w || !h)
        return px__refuse(PXE_NULL_ARGUMENT, "pxvm_image_load");
    int bad_limits = px__check_limits(lim, "pxvm_image_load");
    if (bad_limits)
        return bad_limits;
    px__last_warning[0] = 0;
    if (pxvm_image_load_any(path, px__limits(lim, &def), &img, &err) < 0)
        return pxvm_error_at(px__fail(&err), -1, -1, path);
    px__keep_warning(&err);
    *rgba = img.px, *w = img.w, *h = img.h;
    return 0;
}

int pxvm_image_encode_png(const uint8_t *rgba, int w, int h, void **png, size_t *len)
{
    pxvm_error err;
    if (!rgba || !png || !len || w < 1 || h < 1)
        return px__refuse(PXE_ENCODE_ARGS);
    pxvm_image img = {w, h, (uint8_t *)rgba};
    uint8_t *out;
    if (pxvm_png_encode(&img, &out, len, &err) < 0)
        return px__fail(&err);
    *png = out;
    return 0;
}
