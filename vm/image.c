/* image.c - RGBA8 images (allocation, hash), the size check every decoder makes from a header,
 * EXIF orientation, and files read whole or from pipes within a limit. The codecs are png.c and
 * jpeg.c, the dispatch of PNG and JPEG by signature decode.c; outputs are tools/outputs.c. */
#define _POSIX_C_SOURCE 200809L
#include "image_codec.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
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
    (pxvm_fail)(err, code, -1, -1, name, why); /* the caller's code (vm.h: PXVM_CHECK_FORMATS) */
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
        snprintf(err->msg + at, sizeof err->msg - at, "; --lenient (Python: load_image(..., lenient=True)) decodes what is left of it");
    }
    return -1;
}

/* ---- EXIF orientation ------------------------------------------------------------------------ */

static uint32_t px__tiff16(const uint8_t *p, int be) { return be ? (uint32_t)p[0] << 8 | p[1] : (uint32_t)p[1] << 8 | p[0]; }
static uint32_t px__tiff32(const uint8_t *p, int be)
{
    return be ? (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]
              : (uint32_t)p[3] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[1] << 8 | p[0];
}

int px_exif_orientation(const uint8_t *t, size_t len)
{
    /* bytes a value of each TIFF type takes (0: a type Pillow does not read: the entry is skipped) */
    static const unsigned unit[14] = {0, 1, 1, 2, 4, 8, 1, 1, 2, 4, 8, 4, 8, 4};
    if (!t || len < 8)
        return 1;
    int be;
    if (t[0] == 'I' && t[1] == 'I' && t[2] == 42 && t[3] == 0)
        be = 0;
    else if (t[0] == 'M' && t[1] == 'M' && t[2] == 0 && t[3] == 42)
        be = 1;
    else
        return 1;
    uint32_t ifd = px__tiff32(t + 4, be);
    if (ifd > len || len - ifd < 2)
        return 1;
    size_t n = px__tiff16(t + ifd, be), room = (len - ifd - 2) / 12;
    if (n > room) /* a truncated IFD: the entries before its end count, as Pillow reads them */
        n = room;
    int orientation = 1;
    for (size_t i = 0; i < n; i++) {
        const uint8_t *e = t + ifd + 2 + 12 * i;
        uint32_t type = px__tiff16(e + 2, be), count = px__tiff32(e + 4, be);
        if (px__tiff16(e, be) != 0x0112 || type >= 14 || !unit[type] || count == 0)
            continue; /* another tag, a type Pillow skips, no value */
        uint64_t size = (uint64_t)count * unit[type];
        if (size > 4) { /* the values elsewhere in the block: where they are not, Pillow skips the entry */
            uint32_t at = px__tiff32(e + 8, be);
            if (at > len || size > len - at)
                continue;
        }
        long v = 0;
        if (count == 1 && type == 1)
            v = e[8];
        else if (count == 1 && type == 3)
            v = (long)px__tiff16(e + 8, be);
        else if (count == 1 && type == 4)
            v = (long)px__tiff32(e + 8, be);
        else if (count == 1 && type == 6)
            v = (int8_t)e[8];
        else if (count == 1 && type == 8)
            v = (int16_t)px__tiff16(e + 8, be);
        else if (count == 1 && type == 9)
            v = (int32_t)px__tiff32(e + 8, be);
        /* a later entry replaces an earlier one; several values, text, fractions: no turn */
        orientation = v >= 1 && v <= 8 ? (int)v : 1;
    }
    return orientation;
}

unsigned long long px_image_orient_plan(const pxvm_limits *lim, int orientation, unsigned long *w, unsigned long *h)
{
    if (!(lim->flags & PXVM_DECODE_EXIF_TRANSPOSE) || orientation < 2 || orientation > 8)
        return 0;
    unsigned long long bytes = (unsigned long long)*w * *h * 4u;
    if (orientation >= 5) {
        unsigned long t = *w;
        *w = *h, *h = t;
    }
    return bytes;
}

int px_image_orient(pxvm_image *img, int orientation, pxvm_error *err)
{
    if (orientation < 2 || orientation > 8)
        return 0;
    int w = img->w, h = img->h, ow = orientation >= 5 ? h : w, oh = orientation >= 5 ? w : h;
    pxvm_image out;
    if (pxvm_image_alloc(&out, ow, oh, err) < 0) {
        pxvm_image_free(img);
        return -1;
    }
    const uint32_t *src = (const uint32_t *)(const void *)img->px;
    uint32_t *dst = (uint32_t *)(void *)out.px;
    for (int y = 0; y < oh; y++)
        for (int x = 0; x < ow; x++) {
            int sx, sy; /* the source pixel of output (x, y) */
            switch (orientation) {
            case 2: sx = w - 1 - x, sy = y; break;
            case 3: sx = w - 1 - x, sy = h - 1 - y; break;
            case 4: sx = x, sy = h - 1 - y; break;
            case 5: sx = y, sy = x; break;
            case 6: sx = y, sy = h - 1 - x; break;
            case 7: sx = w - 1 - y, sy = h - 1 - x; break;
            default: sx = w - 1 - y, sy = x; break; /* 8 */
            }
            dst[(size_t)y * (size_t)ow + (size_t)x] = src[(size_t)sy * (size_t)w + (size_t)sx];
        }
    pxvm_image_free(img);
    *img = out;
    return 0;
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
    } else if ((uint64_t)st.st_size > max_bytes) { /* the sizes, so that the limit to raise is found */
        rc = pxvm_fail(err, PXE_IO_FILE_SIZE, -1, -1, name, (long long)st.st_size, (unsigned long long)max_bytes);
    } else {
        rc = px__read_stream(fd, name, max_bytes, data, len, err); /* st_size may change under us */
    }
    if (!from_stdin)
        close(fd);
    return rc;
}
