/* image.c - RGBA8 images (allocation, hash), the size check every decoder makes from a header,
 * files read whole or from pipes within a limit, and the dispatch of PNG and JPEG by signature.
 * The codecs are png.c and jpeg.c; outputs (all-or-nothing files, .npy) are outputs.c. */
#define _POSIX_C_SOURCE 200809L
#include "image_codec.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <png.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int pxvm_image_alloc(pxvm_image *img, int w, int h, pxvm_error *err)
{
    size_t bytes = (size_t)w * (size_t)h * 4u;
    img->w = w;
    img->h = h;
    img->px = calloc(bytes ? bytes : 1, 1);
    if (!img->px)
        return pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)bytes);
    return 0;
}

void pxvm_image_free(pxvm_image *img)
{
    free(img->px);
    img->px = NULL;
    img->w = img->h = 0;
}

uint64_t pxvm_hash64(const void *data, size_t len)
{
    const uint8_t *p = data;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

/* The pixels plus the buffers a decoder needs besides them, against max_memory; then the size the
 * caller wants. From the header, before anything is decoded. */
int px_image_check_size(const char *name, const pxvm_limits *lim, const pxvm_image_want *want, unsigned long w,
                        unsigned long h, unsigned long long work, pxvm_error *err)
{
    if (w < 1 || h < 1 || w > lim->max_side || h > lim->max_side)
        return pxvm_fail(err, PXE_IMAGE_SIDE, -1, -1, name, w, h, lim->max_side);
    unsigned long long bytes = (unsigned long long)w * h * 4u;
    if (bytes > lim->max_memory)
        return pxvm_fail(err, PXE_IMAGE_MEMORY, -1, -1, name, w, h, bytes, (unsigned long long)lim->max_memory);
    /* the words of a bind of another size (pxrun and the API say the same) */
    if (want && (want->w || want->h) && (w != (unsigned long)want->w || h != (unsigned long)want->h))
        return pxvm_fail(err, PXE_INPUT_SIZE, -1, -1, (int)w, (int)h, (unsigned)want->slot,
                         want->slot_name ? want->slot_name : "", want->w, want->h);
    if (bytes + work > lim->max_memory)
        return pxvm_fail(err, PXE_IMAGE_WORK, -1, -1, name, w, h, bytes + work, bytes, work,
                         (unsigned long long)lim->max_memory);
    return 0;
}

int px_image_damaged(pxvm_error *err, pxvm_code code, const char *name, const char *why)
{
    pxvm_fail(err, code, -1, -1, name, why);
    return PX_IMAGE_DAMAGED;
}

int px_image_decode_with(px_image_codec codec, const uint8_t *data, size_t len, const char *name,
                         const pxvm_limits *lim, const pxvm_image_want *want, pxvm_image *img, pxvm_error *err)
{
    int rc = codec(data, len, name, lim, want, img, err);
    if (rc != PX_IMAGE_DAMAGED)
        return rc;
    pxvm_limits lenient = *lim;
    lenient.flags |= PXVM_DECODE_LENIENT;
    pxvm_image scratch;
    pxvm_error ignored;
    if (err && codec(data, len, name, &lenient, want, &scratch, &ignored) == 0) {
        pxvm_image_free(&scratch);
        size_t at = strlen(err->msg);
        snprintf(err->msg + at, sizeof err->msg - at, "; --lenient (Python: lenient=True) decodes what is left of it");
    }
    return -1;
}

static int px__read_stream(int fd, const char *name, uint64_t max_bytes, uint8_t **data, size_t *len, pxvm_error *err)
{
    size_t cap = 1 << 16, n = 0;
    uint8_t *buf = malloc(cap);
    if (!buf)
        return pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)cap);
    for (;;) {
        if (n == cap) {
            if ((uint64_t)cap > max_bytes) {
                free(buf);
                return pxvm_fail(err, PXE_IO_READ, -1, -1, name, "the stream is longer than the memory limit (see --max-memory)");
            }
            uint8_t *more = realloc(buf, cap * 2);
            if (!more) {
                free(buf);
                return pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)(cap * 2));
            }
            buf = more, cap *= 2;
        }
        ssize_t k = read(fd, buf + n, cap - n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0) {
            int e = errno;
            free(buf);
            return pxvm_fail(err, PXE_IO_READ, -1, -1, name, strerror(e));
        }
        if (k == 0)
            break;
        n += (size_t)k;
        if ((uint64_t)n > max_bytes) {
            free(buf);
            return pxvm_fail(err, PXE_IO_READ, -1, -1, name, "the stream is longer than the memory limit (see --max-memory)");
        }
    }
    *data = buf;
    *len = n;
    return 0;
}

int pxvm_read_file(const char *path, uint64_t max_bytes, uint8_t **data, size_t *len, pxvm_error *err)
{
    *data = NULL;
    *len = 0;
    int from_stdin = !strcmp(path, "-");
    const char *name = from_stdin ? "<stdin>" : path;
    int fd = from_stdin ? 0 : open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return pxvm_fail(err, PXE_IO_READ, -1, -1, name, strerror(errno));
    struct stat st;
    int rc;
    if (fstat(fd, &st) != 0) {
        rc = pxvm_fail(err, PXE_IO_READ, -1, -1, name, strerror(errno));
    } else if (S_ISDIR(st.st_mode)) {
        rc = pxvm_fail(err, PXE_IO_READ, -1, -1, name, "is a directory");
    } else if (!S_ISREG(st.st_mode)) { /* a pipe, FIFO, /dev/fd/N, terminal or device: streamed */
        rc = px__read_stream(fd, name, max_bytes, data, len, err);
    } else if ((uint64_t)st.st_size > max_bytes) {
        rc = pxvm_fail(err, PXE_IO_READ, -1, -1, name, "file larger than the memory limit");
    } else {
        rc = px__read_stream(fd, name, max_bytes, data, len, err); /* st_size may change under us */
    }
    if (!from_stdin)
        close(fd);
    return rc;
}


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
    return pxvm_fail(err, PXE_IMAGE_SIGNATURE, -1, -1, name,
                     len ? "neither a PNG nor a JPEG file (unknown signature)" : "empty (0 bytes): neither a PNG nor a JPEG file");
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

