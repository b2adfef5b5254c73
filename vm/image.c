/* image.c - RGBA8 images, PNG decode/encode (libpng), files, all-or-nothing outputs, .npy. */
#define _POSIX_C_SOURCE 200809L
#include "vm.h"

#include <errno.h>
#include <png.h>
#include <turbojpeg.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
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

/* Reads what `fd` has left, in chunks, stopping with an error past max_bytes: a pipe or a device
 * of any length is cut at the limit, never buffered whole. */
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
    return pxvm_png_encode_ex(img, PXVM_PNG_FAST, out, len, err);
}

int pxvm_png_encode_ex(const pxvm_image *img, pxvm_png_mode mode, uint8_t **out, size_t *len, pxvm_error *err)
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
    /* both settings are fixed, so the bytes depend only on the pixels (and zlib's version) */
    if (mode == PXVM_PNG_BEST) {
        png_set_compression_level(png, 6);
    } else {
        png_set_compression_level(png, 1);
        png_set_filter(png, PNG_FILTER_TYPE_BASE, PNG_FILTER_UP);
    }
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

/* ---- outputs: all-or-nothing files, streamed pipes and devices --------------------------------- */

/* The outputs whose temporary files exist right now, for pxvm_outputs_remove_temporaries (a
 * signal handler's call). */
static pxvm_outputs *volatile px__tracked;

void pxvm_outputs_track(pxvm_outputs *o) { px__tracked = o; }

void pxvm_outputs_remove_temporaries(void)
{
    pxvm_outputs *o = px__tracked;
    if (!o)
        return;
    for (int i = 0; i < o->n; i++)
        if (o->tmp_path[i])
            unlink(o->tmp_path[i]); /* async-signal-safe */
}

/* Follows symbolic links (up to 40) to the path they name, which may not exist yet. */
static int px__follow_links(const char *path, char *out, size_t cap, pxvm_error *err)
{
    snprintf(out, cap, "%s", path);
    for (int hops = 0;; hops++) {
        struct stat st;
        if (lstat(out, &st) != 0 || !S_ISLNK(st.st_mode))
            return 0;
        if (hops == 40)
            return pxvm_fail(err, PXE_IO_WRITE, -1, -1, path, strerror(ELOOP));
        char target[PATH_MAX];
        ssize_t k = readlink(out, target, sizeof target - 1);
        if (k < 0)
            return pxvm_fail(err, PXE_IO_WRITE, -1, -1, path, strerror(errno));
        target[k] = 0;
        if (target[0] == '/') {
            snprintf(out, cap, "%s", target);
        } else { /* relative to the link's folder */
            char *slash = strrchr(out, '/');
            char dir[PATH_MAX];
            snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - out) : 1, slash ? out : ".");
            if ((size_t)snprintf(out, cap, "%s/%s", dir, target) >= cap)
                return pxvm_fail(err, PXE_IO_WRITE, -1, -1, path, strerror(ENAMETOOLONG));
        }
    }
}

static int px__outputs_grow(pxvm_outputs *o, pxvm_error *err)
{
    if (o->n < o->cap)
        return 0;
    int cap = o->cap ? 2 * o->cap : 8;
    char **a = calloc((size_t)cap, sizeof(char *)), **b = calloc((size_t)cap, sizeof(char *));
    uint8_t **c = calloc((size_t)cap, sizeof(uint8_t *));
    size_t *d = calloc((size_t)cap, sizeof(size_t));
    if (!a || !b || !c || !d) {
        free(a), free(b), free(c), free(d);
        return pxvm_fail(err, PXE_NOMEM, -1, -1, 0ull);
    }
    if (o->n) {
        memcpy(a, o->final_path, sizeof(char *) * (size_t)o->n);
        memcpy(b, o->tmp_path, sizeof(char *) * (size_t)o->n);
        memcpy(c, o->stream_data, sizeof(uint8_t *) * (size_t)o->n);
        memcpy(d, o->stream_len, sizeof(size_t) * (size_t)o->n);
    }
    /* the signal handler may read tmp_path at any time: swap whole arrays with signals blocked */
    sigset_t all, old;
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, &old);
    char **fa = o->final_path, **fb = o->tmp_path;
    uint8_t **fc = o->stream_data;
    size_t *fd = o->stream_len;
    o->final_path = a, o->tmp_path = b, o->stream_data = c, o->stream_len = d, o->cap = cap;
    sigprocmask(SIG_SETMASK, &old, NULL);
    free(fa), free(fb), free(fc), free(fd);
    return 0;
}

int pxvm_outputs_add(pxvm_outputs *o, const char *path, const void *data, size_t len, pxvm_error *err)
{
    if (px__outputs_grow(o, err) < 0)
        return -1;
    int to_stdout = !strcmp(path, "-");
    struct stat st;
    /* stat follows every link, /proc's magic ones too (/dev/stdout -> /proc/self/fd/1 -> a pipe) */
    int exists = !to_stdout && stat(path, &st) == 0;
    if (to_stdout || (exists && (S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode)))) {
        /* a stream: written as it is at commit, after every file was written */
        uint8_t *copy = malloc(len ? len : 1);
        char *fin = strdup(path);
        if (!copy || !fin) {
            free(copy), free(fin);
            return pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)len);
        }
        if (len)
            memcpy(copy, data, len);
        o->final_path[o->n] = fin, o->tmp_path[o->n] = NULL;
        o->stream_data[o->n] = copy, o->stream_len[o->n] = len;
        o->n++;
        return 0;
    }
    char target[PATH_MAX]; /* a regular file or a new path: the file a symlink names is replaced */
    if (px__follow_links(path, target, sizeof target, err) < 0)
        return -1;
    if (exists && !S_ISREG(st.st_mode))
        return pxvm_fail(err, PXE_IO_WRITE, -1, -1, path,
                         S_ISDIR(st.st_mode) ? "is a directory"
                                             : "not a regular file, FIFO or character device: pxvm does not replace it");
    size_t n = strlen(target);
    char *tmp = malloc(n + 16), *fin = strdup(target);
    if (!tmp || !fin) {
        free(tmp);
        free(fin);
        return pxvm_fail(err, PXE_NOMEM, -1, -1, 0ull);
    }
    /* same folder as the final file (the link's target), so that rename() is atomic */
    snprintf(tmp, n + 16, "%s.tmp-XXXXXX", target);
    int fd = mkstemp(tmp);
    if (fd < 0) {
        int e = errno;
        free(tmp);
        free(fin);
        return pxvm_fail(err, PXE_IO_WRITE, -1, -1, path, strerror(e));
    }
    o->final_path[o->n] = fin, o->tmp_path[o->n] = tmp, o->stream_data[o->n] = NULL, o->stream_len[o->n] = 0;
    o->n++; /* tracked from here: a signal now removes the temporary file */
    fchmod(fd, 0644);
    const uint8_t *p = data;
    size_t done = 0;
    while (done < len) {
        ssize_t k = write(fd, p + done, len - done);
        if (k <= 0) {
            int e = k < 0 ? errno : EIO;
            close(fd);
            return pxvm_fail(err, PXE_IO_WRITE, -1, -1, path, strerror(e)); /* abort removes tmp */
        }
        done += (size_t)k;
    }
    if (close(fd) != 0)
        return pxvm_fail(err, PXE_IO_WRITE, -1, -1, path, strerror(errno));
    return 0;
}

static void px__outputs_free(pxvm_outputs *o)
{
    sigset_t all, old;
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, &old);
    int n = o->n;
    o->n = 0; /* nothing left for a signal handler */
    sigprocmask(SIG_SETMASK, &old, NULL);
    for (int i = 0; i < n; i++) {
        free(o->final_path[i]);
        free(o->tmp_path[i]);
        free(o->stream_data[i]);
    }
    free(o->final_path);
    free(o->tmp_path);
    free(o->stream_data);
    free(o->stream_len);
    memset(o, 0, sizeof *o);
}

/* Writes a stream output: standard output, a FIFO or a character device, directly. */
static int px__write_stream(const char *path, const uint8_t *data, size_t len, pxvm_error *err)
{
    int to_stdout = !strcmp(path, "-");
    int fd = to_stdout ? 1 : open(path, O_WRONLY | O_CLOEXEC);
    const char *name = to_stdout ? "<stdout>" : path;
    if (fd < 0)
        return pxvm_fail(err, PXE_IO_WRITE, -1, -1, name, strerror(errno));
    size_t done = 0;
    int e = 0;
    while (done < len) {
        ssize_t k = write(fd, data + done, len - done);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            e = k < 0 ? errno : EIO;
            break;
        }
        done += (size_t)k;
    }
    if (!to_stdout && close(fd) != 0 && !e)
        e = errno;
    return e ? pxvm_fail(err, PXE_IO_WRITE, -1, -1, name, strerror(e)) : 0;
}

int pxvm_outputs_commit(pxvm_outputs *o, pxvm_error *err)
{
    int rc = 0;
    for (int i = 0; i < o->n && rc == 0; i++) /* streams first: if one fails, no file is replaced */
        if (!o->tmp_path[i])
            rc = px__write_stream(o->final_path[i], o->stream_data[i], o->stream_len[i], err);
    for (int i = 0; i < o->n && rc == 0; i++)
        if (o->tmp_path[i]) {
            if (rename(o->tmp_path[i], o->final_path[i]) != 0)
                rc = pxvm_fail(err, PXE_IO_WRITE, -1, -1, o->final_path[i], strerror(errno));
            else {
                free(o->tmp_path[i]);
                o->tmp_path[i] = NULL;
            }
        }
    if (rc < 0)
        pxvm_outputs_abort(o);
    else
        px__outputs_free(o);
    return rc;
}

void pxvm_outputs_abort(pxvm_outputs *o)
{
    for (int i = 0; i < o->n; i++)
        if (o->tmp_path[i])
            unlink(o->tmp_path[i]);
    px__outputs_free(o);
}

/* ---- .npy ----------------------------------------------------------------------------------- */

int pxvm_npy_encode(const uint8_t *data, int n, int h, int w, uint8_t **out, size_t *len, pxvm_error *err)
{
    const int shape[4] = {n, h, w, 4};
    return pxvm_npy_encode_shape(data, 4, shape, out, len, err);
}

int pxvm_npy_encode_shape(const uint8_t *data, int ndim, const int *shape, uint8_t **out, size_t *len, pxvm_error *err)
{
    return pxvm_npy_encode_typed(data, "|u1", 1, ndim, shape, out, len, err);
}

int pxvm_npy_encode_typed(const void *data, const char *descr, size_t elem, int ndim, const int *shape, uint8_t **out,
                          size_t *len, pxvm_error *err)
{
    char dims[160] = "", dict[256];
    size_t body = elem;
    for (int i = 0; i < ndim && i < 8; i++) {
        size_t at = strlen(dims);
        snprintf(dims + at, sizeof dims - at, "%d, ", shape[i]);
        body *= (size_t)shape[i];
    }
    int dl = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (%.*s), }", descr,
                      ndim == 1 ? (int)strlen(dims) - 1 : (int)strlen(dims) - 2, dims);
    /* magic(6) + version(2) + header length(2) + dict + padding + '\n', a multiple of 64 */
    size_t hdr = 10 + (size_t)dl + 1;
    size_t padded = (hdr + 63) / 64 * 64;
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
    if (body)
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
