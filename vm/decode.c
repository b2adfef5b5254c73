/* decode.c - the format dispatch of the image decoders: PNG or JPEG by signature, from memory or a
 * file, at the size the caller wants. It calls the codecs (png.c, jpeg.c), which call image.c's
 * shared checks; image.c calls neither. */
#include <png.h>
#include <stdlib.h>
#include <string.h>

#include "image_codec.h"

/* ---- format dispatch ------------------------------------------------------------------------ */

/* A format pxvm does not decode, by its signature (a .png that is a WebP: a download renamed), or
 * NULL: the error then names it, so the fix (convert it) is plain. */
static const char *px__other_format(const uint8_t *d, size_t n)
{
    if (n >= 6 && (!memcmp(d, "GIF87a", 6) || !memcmp(d, "GIF89a", 6)))
        return "GIF";
    if (n >= 12 && !memcmp(d, "RIFF", 4) && !memcmp(d + 8, "WEBP", 4))
        return "WebP";
    if (n >= 4 && (!memcmp(d, "II*\0", 4) || !memcmp(d, "MM\0*", 4)))
        return "TIFF";
    if (n >= 12 && !memcmp(d + 4, "ftyp", 4) && (!memcmp(d + 8, "avif", 4) || !memcmp(d + 8, "avis", 4)))
        return "AVIF";
    if (n >= 12 && !memcmp(d + 4, "ftyp", 4) && (!memcmp(d + 8, "heic", 4) || !memcmp(d + 8, "heix", 4) ||
                                                 !memcmp(d + 8, "mif1", 4)))
        return "HEIF";
    if (n >= 12 && !memcmp(d, "\0\0\0\x0CjP  \r\n\x87\n", 12))
        return "JPEG 2000";
    if (n >= 18 && d[0] == 'B' && d[1] == 'M') { /* and a DIB header's size: not any text starting "BM" */
        uint32_t dib = (uint32_t)d[14] | (uint32_t)d[15] << 8 | (uint32_t)d[16] << 16 | (uint32_t)d[17] << 24;
        if (dib == 12 || dib == 40 || dib == 52 || dib == 56 || dib == 64 || dib == 108 || dib == 124)
            return "BMP";
    }
    return NULL;
}

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
    const char *other = px__other_format(data, len);
    if (other)
        return pxvm_fail(err, PXE_IMAGE_OTHER_FORMAT, -1, -1, name, other);
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
