/* image_codec.h - what vm/'s image files share, privately: the size and memory check every
 * decoder makes from a file's header (image.c), the warning a lenient decoder keeps (vm.h's
 * pxvm_error), and the decoders the format dispatch (image.c) calls with the size it wants. */
#ifndef PX_VM_IMAGE_CODEC_H
#define PX_VM_IMAGE_CODEC_H

#include "vm.h"


/* Keeps the first problem a lenient decoder went past in *err, for the caller to report as a
 * warning (vm.h): pxvm_fail's arguments. */
#define PX__WENT_PAST(err, ...)                                                                                      \
    do {                                                                                                            \
        pxvm_error px_w_;                                                                                           \
        pxvm_fail(&px_w_, __VA_ARGS__);                                                                             \
        if ((err) && (err)->code == PXE_NONE)                                                                       \
            *(err) = px_w_;                                                                                         \
    } while (0)

/* The pixels plus the buffers a decoder needs besides them, against max_memory; then the size the
 * caller wants. From the header, before anything is decoded. */
int px_image_check_size(const char *name, const pxvm_limits *lim, const pxvm_image_want *want, unsigned long w,
                        unsigned long h, unsigned long long work, pxvm_error *err);

/* The decoders behind pxvm_png_decode / pxvm_jpeg_decode, refusing another size than `want`
 * (NULL: any) from the header. */
int px_png_decode_want(const uint8_t *data, size_t len, const char *name, const pxvm_limits *lim,
                       const pxvm_image_want *want, pxvm_image *img, pxvm_error *err);
int px_jpeg_decode_want(const uint8_t *data, size_t len, const char *name, const pxvm_limits *lim,
                        const pxvm_image_want *want, pxvm_image *img, pxvm_error *err);

#endif
