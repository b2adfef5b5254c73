/* image_codec.h - what vm/'s image files share, privately: the size and memory check every
 * decoder makes from a file's header (image.c), the warning a lenient decoder keeps and the note
 * of bytes after a complete image (vm.h's pxvm_error), the strict refusal of damage a lenient
 * decode goes past, and the decoders the format dispatch (decode.c) calls with the size it wants. */
#ifndef PX_VM_IMAGE_CODEC_H
#define PX_VM_IMAGE_CODEC_H

#include "vm.h"


/* Keeps the first problem a lenient decoder went past in *err, for the caller to report as a
 * warning (vm.h): pxvm_fail's arguments. */
#define PX__WENT_PAST(err, ...)                                                                                      \
    do {                                                                                                            \
        pxvm_error px_w_;                                                                                           \
        (pxvm_fail)(&px_w_, __VA_ARGS__); /* a code that may be a variable's */                                     \
        if ((err) && (err)->code == PXE_NONE)                                                                       \
            *(err) = px_w_;                                                                                         \
    } while (0)

/* Bytes after a complete image (`end`: the byte after a PNG's IEND chunk or a JPEG's EOI): not
 * damage, so accepted in both modes and noted in *err (vm.h, pxvm_decode_note) unless a lenient
 * decoder keeps a warning there already. Called once the image decoded whole. */
#define PX__NOTE_TRAILING(err, name, len, end, marker)                                                              \
    PX__WENT_PAST(err, PXE_IMAGE_TRAILING, -1, -1, name, (unsigned long long)((len) - (end)), marker,              \
                  (unsigned long long)(end))

/* The strict refusal of damage that PXVM_DECODE_LENIENT decodes around (a truncated JPEG, a
 * libjpeg or libpng warning): error `code` with the decoder's `why`; returns PX_IMAGE_DAMAGED,
 * which px_image_decode_with turns into -1. */
#define PX_IMAGE_DAMAGED (-2)
int px_image_damaged(pxvm_error *err, pxvm_code code, const char *name, const char *why);

typedef int (*px_image_codec)(const uint8_t *data, size_t len, const char *name, const pxvm_limits *lim,
                              const pxvm_image_want *want, pxvm_image *img, pxvm_error *err);
/* Decodes with `codec` (px_png_decode_want, px_jpeg_decode_want): 0 or -1. A strict refusal of
 * damage says how to accept the file ("; --lenient (Python: load_image(..., lenient=True))
 * decodes what is left of it") only when a lenient decode of the same bytes succeeds (tried
 * then, on the refusal's path only): the hint never leads to a second refusal (damage past
 * which lenient finds worse). */
int px_image_decode_with(px_image_codec codec, const uint8_t *data, size_t len, const char *name,
                         const pxvm_limits *lim, const pxvm_image_want *want, pxvm_image *img, pxvm_error *err);

/* The pixels plus the buffers a decoder needs besides them, against max_memory; then the size the
 * caller wants. From the header, before anything is decoded. */
int px_image_check_size(const char *name, const pxvm_limits *lim, const pxvm_image_want *want, unsigned long w,
                        unsigned long h, unsigned long long work, pxvm_error *err);

/* The EXIF orientation (TIFF tag 0x0112) of a TIFF block (a JPEG's first APP1 "Exif\0\0" segment
 * after those 6 bytes, a PNG's eXIf chunk): 2..8 when it asks for a transpose as Pillow's
 * ImageOps.exif_transpose reads it, else 1 (none, 1, a value Pillow maps to nothing, or a block
 * that is malformed: ignored, never read outside [t, t + len)). */
int px_exif_orientation(const uint8_t *t, size_t len);
/* With PXVM_DECODE_EXIF_TRANSPOSE in lim->flags and `orientation` 2..8: the image's size once
 * oriented (w and h swapped for 5..8) and the bytes the turn needs besides the decoded pixels
 * (a second w x h RGBA8 buffer), for the header's size check; else as they are and 0. */
unsigned long long px_image_orient_plan(const pxvm_limits *lim, int orientation, unsigned long *w, unsigned long *h);
/* Turns a decoded image by `orientation` (1: nothing), as Pillow's exif_transpose: 2 mirror
 * left-right, 3 rotate 180, 4 mirror top-bottom, 5 transpose, 6 rotate 90 clockwise, 7
 * transverse, 8 rotate 90 counter-clockwise. On failure (memory) the image is released. */
int px_image_orient(pxvm_image *img, int orientation, pxvm_error *err);

/* The decoders behind pxvm_png_decode / pxvm_jpeg_decode, refusing another size than `want`
 * (NULL: any) from the header: 0, -1 or PX_IMAGE_DAMAGED (called through px_image_decode_with). */
int px_png_decode_want(const uint8_t *data, size_t len, const char *name, const pxvm_limits *lim,
                       const pxvm_image_want *want, pxvm_image *img, pxvm_error *err);
int px_jpeg_decode_want(const uint8_t *data, size_t len, const char *name, const pxvm_limits *lim,
                        const pxvm_image_want *want, pxvm_image *img, pxvm_error *err);

#endif
