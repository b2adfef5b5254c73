/* image.c - RGBA8 images, PNG decode/encode (libpng), files, all-or-nothing outputs, .npy. */
#define _POSIX_C_SOURCE 200809L
#include "vm.h"

#include <errno.h>
#include <png.h>
#include <turbojpeg.h>
#include <setjmp.h>
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

/* ---- PNG decode ----------------------------------------------------------------------------- */

typedef struct px__png_io {
    const uint8_t *data;
    size_t len, pos;
    uint8_t *out; /* encode: growing buffer */
    size_t out_len, out_cap;
    int out_failed;
    char msg[256];
} px__png_io;

static void px__png_error(png_structp png, png_const_charp msg)
{
    px__png_io *io = png_get_error_ptr(png);
    snprintf(io->msg, sizeof io->msg, "%s", msg);
    png_longjmp(png, 1);
}

static void px__png_warning(png_structp png, png_const_charp msg)
{
    (void)png;
    (void)msg; /* warnings (bad gamma chunk, ...) do not change the pixels we keep */
}

static void px__png_read(png_structp png, png_bytep dst, size_t n)
{
    px__png_io *io = png_get_io_ptr(png);
    if (n > io->len - io->pos)
        png_error(png, "unexpected end of file");
    memcpy(dst, io->data + io->pos, n);
    io->pos += n;
}

int pxvm_png_decode(const uint8_t *data, size_t len, const char *name, const pxvm_limits *lim,
                    pxvm_image *img, pxvm_error *err)
{
    img->px = NULL;
    img->w = img->h = 0;
    if (len < 8 || png_sig_cmp(data, 0, 8))
        return pxvm_fail(err, PXE_PNG_SIGNATURE, -1, -1, name);
    px__png_io io = {.data = data, .len = len, .pos = 0};
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &io, px__png_error, px__png_warning);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    if (!info) {
        png_destroy_read_struct(&png, NULL, NULL);
        return pxvm_fail(err, PXE_NOMEM, -1, -1, 0ull);
    }
    /* Everything that must survive a longjmp lives in `io` or in heap memory reached from it. */
    png_bytep *volatile rows = NULL;
    pxvm_image *volatile out = img;
    if (setjmp(png_jmpbuf(png))) {
        free(rows);
        pxvm_image_free(out);
        png_destroy_read_struct(&png, &info, NULL);
        return pxvm_fail(err, PXE_PNG_CORRUPT, -1, -1, name, io.msg);
    }
    png_set_read_fn(png, &io, px__png_read);
    /* Ancillary chunks cannot make us allocate or inflate much (zTXt/iCCP bombs). */
    png_set_chunk_malloc_max(png, 1u << 22);
    png_set_chunk_cache_max(png, 64);
    png_set_keep_unknown_chunks(png, PNG_HANDLE_CHUNK_NEVER, NULL, 0);
    png_read_info(png, info);

    png_uint_32 w, h;
    int depth, color, interlace;
    png_get_IHDR(png, info, &w, &h, &depth, &color, &interlace, NULL, NULL);
    if (w < 1 || h < 1 || w > lim->max_side || h > lim->max_side) {
        png_destroy_read_struct(&png, &info, NULL);
        return pxvm_fail(err, PXE_IMAGE_SIDE, -1, -1, name, (unsigned long)w, (unsigned long)h, lim->max_side);
    }
    unsigned long long bytes = (unsigned long long)w * h * 4u;
    if (bytes > lim->max_memory) {
        png_destroy_read_struct(&png, &info, NULL);
        return pxvm_fail(err, PXE_IMAGE_MEMORY, -1, -1, name, (unsigned long)w, (unsigned long)h, bytes,
                         (unsigned long long)lim->max_memory);
    }
    if (color == PNG_COLOR_TYPE_PALETTE)
        png_set_palette_to_rgb(png);
    if (color == PNG_COLOR_TYPE_GRAY && depth < 8)
        png_set_expand_gray_1_2_4_to_8(png);
    if (png_get_valid(png, info, PNG_INFO_tRNS))
        png_set_tRNS_to_alpha(png);
    if (depth == 16)
        png_set_strip_16(png); /* keeps the high byte */
    if (color == PNG_COLOR_TYPE_GRAY || color == PNG_COLOR_TYPE_GRAY_ALPHA)
        png_set_gray_to_rgb(png);
    if (!(color & PNG_COLOR_MASK_ALPHA) && !png_get_valid(png, info, PNG_INFO_tRNS))
        png_set_filler(png, 0xff, PNG_FILLER_AFTER);
    png_set_interlace_handling(png);
    png_read_update_info(png, info);
    if (png_get_rowbytes(png, info) != (size_t)w * 4u)
        png_error(png, "unsupported pixel layout");

    if (pxvm_image_alloc(img, (int)w, (int)h, err) < 0) {
        png_destroy_read_struct(&png, &info, NULL);
        return -1;
    }
    rows = malloc(sizeof(png_bytep) * h);
    if (!rows)
        png_error(png, "out of memory");
    for (png_uint_32 y = 0; y < h; y++)
        rows[y] = img->px + (size_t)y * w * 4u;
    png_read_image(png, rows);
    png_read_end(png, NULL);
    free(rows);
    png_destroy_read_struct(&png, &info, NULL);
    return 0;
}

int pxvm_read_file(const char *path, uint64_t max_bytes, uint8_t **data, size_t *len, pxvm_error *err)
{
    *data = NULL;
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return pxvm_fail(err, PXE_IO_READ, -1, -1, path, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        fclose(f);
        return pxvm_fail(err, PXE_IO_READ, -1, -1, path, "not a regular file");
    }
    if ((uint64_t)st.st_size > max_bytes) {
        fclose(f);
        return pxvm_fail(err, PXE_IO_READ, -1, -1, path, "file larger than the memory limit");
    }
    size_t n = (size_t)st.st_size;
    uint8_t *buf = malloc(n ? n : 1);
    if (!buf) {
        fclose(f);
        return pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)n);
    }
    if (fread(buf, 1, n, f) != n) {
        free(buf);
        fclose(f);
        return pxvm_fail(err, PXE_IO_READ, -1, -1, path, "short read");
    }
    fclose(f);
    *data = buf;
    *len = n;
    return 0;
}

int pxvm_png_load(const char *path, const pxvm_limits *lim, pxvm_image *img, pxvm_error *err)
{
    uint8_t *data;
    size_t len;
    if (pxvm_read_file(path, lim->max_memory, &data, &len, err) < 0)
        return -1;
    int rc = pxvm_png_decode(data, len, path, lim, img, err);
    free(data);
    return rc;
}

/* ---- PNG encode ----------------------------------------------------------------------------- */

static void px__png_write(png_structp png, png_bytep src, size_t n)
{
    px__png_io *io = png_get_io_ptr(png);
    if (io->out_len + n > io->out_cap) {
        size_t cap = io->out_cap ? io->out_cap : 4096;
        while (cap < io->out_len + n)
            cap *= 2;
        uint8_t *p = realloc(io->out, cap);
        if (!p)
            png_error(png, "out of memory");
        io->out = p;
        io->out_cap = cap;
    }
    memcpy(io->out + io->out_len, src, n);
    io->out_len += n;
}

static void px__png_flush(png_structp png) { (void)png; }

int pxvm_png_encode(const pxvm_image *img, uint8_t **out, size_t *len, pxvm_error *err)
{
    px__png_io io;
    memset(&io, 0, sizeof io);
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &io, px__png_error, px__png_warning);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    if (!info) {
        png_destroy_write_struct(&png, NULL);
        return pxvm_fail(err, PXE_NOMEM, -1, -1, 0ull);
    }
    png_bytep *volatile rows = NULL;
    if (setjmp(png_jmpbuf(png))) {
        free(rows);
        free(io.out);
        png_destroy_write_struct(&png, &info);
        return pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)io.out_cap);
    }
    png_set_write_fn(png, &io, px__png_write, px__png_flush);
    png_set_compression_level(png, 6);
    png_set_IHDR(png, info, (png_uint_32)img->w, (png_uint_32)img->h, 8, PNG_COLOR_TYPE_RGBA,
                 PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_write_info(png, info);
    rows = malloc(sizeof(png_bytep) * (size_t)img->h);
    if (!rows)
        png_error(png, "out of memory");
    for (int y = 0; y < img->h; y++)
        rows[y] = img->px + (size_t)y * (size_t)img->w * 4u;
    png_write_image(png, rows);
    png_write_end(png, NULL);
    free(rows);
    png_destroy_write_struct(&png, &info);
    *out = io.out;
    *len = io.out_len;
    return 0;
}

/* ---- all-or-nothing outputs ----------------------------------------------------------------- */

int pxvm_outputs_add(pxvm_outputs *o, const char *path, const void *data, size_t len, pxvm_error *err)
{
    if (o->n == o->cap) {
        int cap = o->cap ? 2 * o->cap : 8;
        char **a = realloc(o->final_path, sizeof(char *) * (size_t)cap);
        if (!a)
            return pxvm_fail(err, PXE_NOMEM, -1, -1, 0ull);
        o->final_path = a;
        char **b = realloc(o->tmp_path, sizeof(char *) * (size_t)cap);
        if (!b)
            return pxvm_fail(err, PXE_NOMEM, -1, -1, 0ull);
        o->tmp_path = b;
        o->cap = cap;
    }
    size_t n = strlen(path);
    char *tmp = malloc(n + 16), *fin = strdup(path);
    if (!tmp || !fin) {
        free(tmp);
        free(fin);
        return pxvm_fail(err, PXE_NOMEM, -1, -1, 0ull);
    }
    /* same folder as the final file, so that rename() is atomic */
    snprintf(tmp, n + 16, "%s.tmp-XXXXXX", path);
    int fd = mkstemp(tmp);
    if (fd < 0) {
        int e = errno;
        free(tmp);
        free(fin);
        return pxvm_fail(err, PXE_IO_WRITE, -1, -1, path, strerror(e));
    }
    fchmod(fd, 0644);
    const uint8_t *p = data;
    size_t done = 0;
    while (done < len) {
        ssize_t k = write(fd, p + done, len - done);
        if (k <= 0) {
            int e = errno;
            close(fd);
            unlink(tmp);
            free(tmp);
            free(fin);
            return pxvm_fail(err, PXE_IO_WRITE, -1, -1, path, strerror(e));
        }
        done += (size_t)k;
    }
    if (close(fd) != 0) {
        int e = errno;
        unlink(tmp);
        free(tmp);
        free(fin);
        return pxvm_fail(err, PXE_IO_WRITE, -1, -1, path, strerror(e));
    }
    o->final_path[o->n] = fin;
    o->tmp_path[o->n] = tmp;
    o->n++;
    return 0;
}

static void px__outputs_free(pxvm_outputs *o)
{
    for (int i = 0; i < o->n; i++) {
        free(o->final_path[i]);
        free(o->tmp_path[i]);
    }
    free(o->final_path);
    free(o->tmp_path);
    memset(o, 0, sizeof *o);
}

int pxvm_outputs_commit(pxvm_outputs *o, pxvm_error *err)
{
    for (int i = 0; i < o->n; i++) {
        if (rename(o->tmp_path[i], o->final_path[i]) != 0) {
            int e = errno;
            pxvm_fail(err, PXE_IO_WRITE, -1, -1, o->final_path[i], strerror(e));
            for (int j = i; j < o->n; j++)
                unlink(o->tmp_path[j]);
            px__outputs_free(o);
            return -1;
        }
    }
    px__outputs_free(o);
    return 0;
}

void pxvm_outputs_abort(pxvm_outputs *o)
{
    for (int i = 0; i < o->n; i++)
        unlink(o->tmp_path[i]);
    px__outputs_free(o);
}

/* ---- .npy ----------------------------------------------------------------------------------- */

int pxvm_npy_encode(const uint8_t *data, int n, int h, int w, uint8_t **out, size_t *len, pxvm_error *err)
{
    char dict[128];
    int dl = snprintf(dict, sizeof dict, "{'descr': '|u1', 'fortran_order': False, 'shape': (%d, %d, %d, 4), }", n, h,
                      w);
    /* magic(6) + version(2) + header length(2) + dict + padding + '\n', a multiple of 64 */
    size_t hdr = 10 + (size_t)dl + 1;
    size_t padded = (hdr + 63) / 64 * 64;
    size_t body = (size_t)n * (size_t)h * (size_t)w * 4u;
    uint8_t *buf = malloc(padded + body);
    if (!buf)
        return pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)(padded + body));
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    size_t hlen = padded - 10;
    buf[8] = (uint8_t)(hlen & 255u);
    buf[9] = (uint8_t)(hlen >> 8);
    memcpy(buf + 10, dict, (size_t)dl);
    memset(buf + 10 + dl, ' ', padded - 10 - (size_t)dl - 1);
    buf[padded - 1] = '\n';
    memcpy(buf + padded, data, body);
    *out = buf;
    *len = padded + body;
    return 0;
}

/* ---- JPEG decode (libjpeg-turbo) and format dispatch ----------------------------------------- */

int pxvm_jpeg_decode(const uint8_t *data, size_t len, const char *name, const pxvm_limits *lim, pxvm_image *img,
                     pxvm_error *err)
{
    img->px = NULL;
    img->w = img->h = 0;
    tjhandle tj = tjInitDecompress();
    if (!tj)
        return pxvm_fail(err, PXE_NOMEM, -1, -1, 0ull);
    int w = 0, h = 0, subsamp = 0, colorspace = 0;
    /* the header first: sides and size are checked before any pixel is decoded */
    if (tjDecompressHeader3(tj, data, (unsigned long)len, &w, &h, &subsamp, &colorspace) != 0) {
        char why[200];
        snprintf(why, sizeof why, "%s", tjGetErrorStr2(tj));
        tjDestroy(tj);
        return pxvm_fail(err, PXE_JPEG_CORRUPT, -1, -1, name, why);
    }
    if (w < 1 || h < 1 || (uint32_t)w > lim->max_side || (uint32_t)h > lim->max_side) {
        tjDestroy(tj);
        return pxvm_fail(err, PXE_IMAGE_SIDE, -1, -1, name, (unsigned long)w, (unsigned long)h, lim->max_side);
    }
    unsigned long long bytes = (unsigned long long)w * (unsigned long long)h * 4u;
    if (bytes > lim->max_memory) {
        tjDestroy(tj);
        return pxvm_fail(err, PXE_IMAGE_MEMORY, -1, -1, name, (unsigned long)w, (unsigned long)h, bytes,
                         (unsigned long long)lim->max_memory);
    }
    if (colorspace == TJCS_CMYK || colorspace == TJCS_YCCK) {
        tjDestroy(tj);
        return pxvm_fail(err, PXE_JPEG_CORRUPT, -1, -1, name, "CMYK/YCCK JPEGs are not supported");
    }
    if (pxvm_image_alloc(img, w, h, err) < 0) {
        tjDestroy(tj);
        return -1;
    }
    /* the library's default, accurate integer IDCT and fancy upsampling: one decoder on the host
     * for both executors, so the same file gives the same pixels everywhere pxvm runs */
    if (tjDecompress2(tj, data, (unsigned long)len, img->px, w, w * 4, h, TJPF_RGBA, 0) != 0 &&
        tjGetErrorCode(tj) == TJERR_FATAL) {
        char why[200];
        snprintf(why, sizeof why, "%s", tjGetErrorStr2(tj));
        tjDestroy(tj);
        pxvm_image_free(img);
        return pxvm_fail(err, PXE_JPEG_CORRUPT, -1, -1, name, why);
    }
    tjDestroy(tj);
    return 0;
}

int pxvm_image_decode_any(const uint8_t *data, size_t len, const char *name, const pxvm_limits *lim, pxvm_image *img,
                          pxvm_error *err)
{
    if (len >= 3 && data[0] == 0xFF && data[1] == 0xD8 && data[2] == 0xFF)
        return pxvm_jpeg_decode(data, len, name, lim, img, err);
    if (len >= 8 && !png_sig_cmp(data, 0, 8))
        return pxvm_png_decode(data, len, name, lim, img, err);
    img->px = NULL;
    img->w = img->h = 0;
    return pxvm_fail(err, PXE_IMAGE_SIGNATURE, -1, -1, name);
}

int pxvm_image_load_any(const char *path, const pxvm_limits *lim, pxvm_image *img, pxvm_error *err)
{
    uint8_t *data;
    size_t len;
    if (pxvm_read_file(path, lim->max_memory, &data, &len, err) < 0)
        return -1;
    int rc = pxvm_image_decode_any(data, len, path, lim, img, err);
    free(data);
    return rc;
}
