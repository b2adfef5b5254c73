/* decode.c - the format dispatch of the image decoders: PNG or JPEG by signature, from memory or a
 * file, at the size the caller wants. It calls the codecs (png.c, jpeg.c), which call image.c's
 * shared checks; image.c calls neither. */
#include <png.h>
#include <stdlib.h>
#include <string.h>

#include "image_codec.h"

/* ---- format dispatch ------------------------------------------------------------------------ */

int pxvm_image_decode_want(const uint8_t *data, size_t len, const char *name, const pxvm_limits *lim,
                           const pxvm_image_want *want, pxvm_image *img, pxvm_error *err)
{
    if (len >= 3 && data[0] == 0xFF && data[1] == 0xD8 && data[2] == 0xFF)
        return px_image_decode_with(px_jpeg_decode_want, data, len, name, lim, want, img, err);
    if (len >= 8 && !png_sig_cmp(data, 0, 8))
        return px_image_decode_with(px_png_decode_want, data, len, name, lim, want, img, err);
    img->px = NULL;
    img->w = img->h = 0;
    /* an empty file (a failed download, a touch) says so: it has no signature to be unknown */
    if (!len)
        return pxvm_fail(err, PXE_IMAGE_EMPTY, -1, -1, name);
    return pxvm_fail(err, PXE_IMAGE_SIGNATURE, -1, -1, name);
}

int pxvm_image_decode_any(const uint8_t *data, size_t len, const char *name, const pxvm_limits *lim, pxvm_image *img,
                          pxvm_error *err)
{
    return pxvm_image_decode_want(data, len, name, lim, NULL, img, err);
}

int pxvm_image_load_want(const char *path, const pxvm_limits *lim, const pxvm_image_want *want, pxvm_image *img,
                         pxvm_error *err)
{
    uint8_t *data;
    size_t len;
    img->px = NULL;
    img->w = img->h = 0;
    if (pxvm_read_file(path, lim->max_memory, &data, &len, err) < 0)
        return -1;
    int rc = pxvm_image_decode_want(data, len, path, lim, want, img, err);
    free(data);
    return rc;
}

int pxvm_image_load_any(const char *path, const pxvm_limits *lim, pxvm_image *img, pxvm_error *err)
{
    return pxvm_image_load_want(path, lim, NULL, img, err);
}
