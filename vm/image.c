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
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <time.h>
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
    int strict;    /* decode: a warning is an error */
    char msg[256];
    char warn[256]; /* decode, lenient: the first warning */
} px__png_io;

static void px__png_error(png_structp png, png_const_charp msg)
{
    px__png_io *io = png_get_error_ptr(png);
    snprintf(io->msg, sizeof io->msg, "%s", msg);
    png_longjmp(png, 1);
}

/* Decoding, the ancillary chunks that could warn are skipped unread (px__png_skip), so what warns
 * is damage: a CRC error, extra or missing image data. Strict: an error; lenient: the first one is
 * kept for the caller. Encoding: none is expected. */
static void px__png_warning(png_structp png, png_const_charp msg)
{
    px__png_io *io = png_get_error_ptr(png);
    if (io->strict) {
        snprintf(io->msg, sizeof io->msg, "%s", msg);
        png_longjmp(png, 1);
    }
    if (!io->warn[0])
        snprintf(io->warn, sizeof io->warn, "%s", msg);
}

/* Ancillary chunks whose contents change nothing we decode (colour, text, time, layout): skipped
 * with their CRC checked, never parsed or inflated. tRNS is read (it gives alpha). */
static const png_byte px__png_skip[] = "bKGD\0cHRM\0eXIf\0gAMA\0hIST\0iCCP\0iTXt\0oFFs\0pCAL\0pHYs\0sBIT\0sCAL\0sPLT\0"
                                       "sRGB\0tEXt\0tIME\0zTXt";

/* Keeps the first problem a lenient decoder went past in *err, for the caller to report as a
 * warning (vm.h): pxvm_fail's arguments. */
#define PX__WENT_PAST(err, ...)                                                                                      \
    do {                                                                                                            \
        pxvm_error px_w_;                                                                                           \
        pxvm_fail(&px_w_, __VA_ARGS__);                                                                             \
        if ((err) && (err)->code == PXE_NONE)                                                                       \
            *(err) = px_w_;                                                                                         \
    } while (0)

static void px__png_read(png_structp png, png_bytep dst, size_t n)
{
    px__png_io *io = png_get_io_ptr(png);
    if (n > io->len - io->pos)
        png_error(png, "unexpected end of file");
    memcpy(dst, io->data + io->pos, n);
    io->pos += n;
}

/* The pixels plus the buffers a decoder needs besides them, against max_memory; then the size the
 * caller wants. From the header, before anything is decoded. */
static int px__check_size(const char *name, const pxvm_limits *lim, const pxvm_image_want *want, unsigned long w,
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

static int px__png_decode(const uint8_t *data, size_t len, const char *name, const pxvm_limits *lim,
                          const pxvm_image_want *want, pxvm_image *img, pxvm_error *err)
{
    img->px = NULL;
    img->w = img->h = 0;
    if (err)
        err->code = PXE_NONE;
    if (len < 8 || png_sig_cmp(data, 0, 8))
        return pxvm_fail(err, PXE_PNG_SIGNATURE, -1, -1, name);
    px__png_io io = {.data = data, .len = len, .pos = 0, .strict = !(lim->flags & PXVM_DECODE_LENIENT)};
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
    png_set_keep_unknown_chunks(png, PNG_HANDLE_CHUNK_NEVER, px__png_skip, (int)(sizeof px__png_skip / 5));
    png_read_info(png, info);

    png_uint_32 w, h;
    int depth, color, interlace;
    png_get_IHDR(png, info, &w, &h, &depth, &color, &interlace, NULL, NULL);
    /* libpng's buffers: two rows of up to 8 bytes a pixel, the row pointers, zlib's window */
    unsigned long long work = 2ull * ((unsigned long long)w * 8u + 64u) + (unsigned long long)h * sizeof(png_bytep) + (64u << 10);
    if (px__check_size(name, lim, want, (unsigned long)w, (unsigned long)h, work, err) < 0) {
        png_destroy_read_struct(&png, &info, NULL);
        return -1;
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
    png_read_end(png, NULL); /* the chunks after the image data, to IEND, CRCs checked */
    free(rows);
    png_destroy_read_struct(&png, &info, NULL);
    if (io.warn[0])
        PX__WENT_PAST(err, PXE_PNG_CORRUPT, -1, -1, name, io.warn);
    if (io.pos < len) { /* bytes after IEND: strict, an error */
        if (io.strict) {
            pxvm_image_free(img);
            return pxvm_fail(err, PXE_IMAGE_TRAILING, -1, -1, name, (unsigned long long)(len - io.pos), "PNG's IEND chunk",
                             (unsigned long long)io.pos);
        }
        PX__WENT_PAST(err, PXE_IMAGE_TRAILING, -1, -1, name, (unsigned long long)(len - io.pos), "PNG's IEND chunk",
                      (unsigned long long)io.pos);
    }
    return 0;
}

int pxvm_png_decode(const uint8_t *data, size_t len, const char *name, const pxvm_limits *lim, pxvm_image *img,
                    pxvm_error *err)
{
    return px__png_decode(data, len, name, lim, NULL, img, err);
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
 * signal handler's call, on whichever thread the signal reached: pxrun's CPU executor has worker
 * threads that do not block signals). */
static pxvm_outputs *volatile px__tracked;

/* Who may touch the tracked outputs' temporary files and their names: 0 nobody, 1 a thread that
 * creates, registers, renames or forgets one (with every signal blocked on it, so that a handler
 * never interrupts it halfway), 2 a signal handler removing them before the process ends (for
 * good: the outputs then take no new file). A file is created and registered in one such step,
 * so a handler sees it registered or not created yet. */
static atomic_int px__owner;

void pxvm_outputs_track(pxvm_outputs *o) { px__tracked = o; }

/* Blocks every signal on this thread and, for the tracked outputs, takes them (waits while
 * another thread has them). 0, or -1 when a signal handler has removed the temporary files: the
 * process is ending, nothing more may be created or renamed. */
static int px__enter(const pxvm_outputs *o, sigset_t *old)
{
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, old);
    if (o != px__tracked)
        return 0;
    for (;;) {
        int was = 0;
        if (atomic_compare_exchange_weak(&px__owner, &was, 1))
            return 0;
        if (was == 2)
            return -1;
    }
}

static void px__leave(const pxvm_outputs *o, const sigset_t *old)
{
    int was = 1;
    if (o == px__tracked)
        atomic_compare_exchange_strong(&px__owner, &was, 0); /* stays 2 after a handler */
    pthread_sigmask(SIG_SETMASK, old, NULL);
}

void pxvm_outputs_remove_temporaries(void)
{
    /* wait for a thread that is between creating a file and registering it (never this thread:
     * it blocks signals meanwhile); nanosleep and the atomics are async-signal-safe */
    int saved = errno;
    for (;;) {
        int was = 0;
        if (atomic_compare_exchange_weak(&px__owner, &was, 2) || was == 2)
            break;
        struct timespec nap = {0, 100000};
        nanosleep(&nap, NULL);
    }
    pxvm_outputs *o = px__tracked;
    for (int i = 0; o && i < o->n; i++)
        if (o->tmp_path[i])
            unlink(o->tmp_path[i]); /* async-signal-safe */
    errno = saved;
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
    /* the signal handler may read tmp_path at any time: swap whole arrays while it cannot */
    sigset_t old;
    if (px__enter(o, &old) < 0) {
        px__leave(o, &old);
        free(a), free(b), free(c), free(d);
        return pxvm_fail(err, PXE_IO_WRITE, -1, -1, "(outputs)", "interrupted by a signal");
    }
    char **fa = o->final_path, **fb = o->tmp_path;
    uint8_t **fc = o->stream_data;
    size_t *fd = o->stream_len;
    o->final_path = a, o->tmp_path = b, o->stream_data = c, o->stream_len = d, o->cap = cap;
    px__leave(o, &old);
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
        sigset_t old;
        if (px__enter(o, &old) < 0) {
            px__leave(o, &old);
            free(copy), free(fin);
            return pxvm_fail(err, PXE_IO_WRITE, -1, -1, path, "interrupted by a signal");
        }
        o->final_path[o->n] = fin, o->tmp_path[o->n] = NULL;
        o->stream_data[o->n] = copy, o->stream_len[o->n] = len;
        o->n++;
        px__leave(o, &old);
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
    /* created and registered in one step, which a signal handler (on any thread) cannot cut: it
     * runs before the file exists or after it is registered, and then removes it */
    sigset_t old;
    int fd = -1, interrupted = px__enter(o, &old) < 0, made_errno = 0;
    if (!interrupted) {
        fd = mkstemp(tmp);
        made_errno = errno;
        if (fd >= 0) {
            o->final_path[o->n] = fin, o->tmp_path[o->n] = tmp, o->stream_data[o->n] = NULL, o->stream_len[o->n] = 0;
            o->n++;
        }
    }
    px__leave(o, &old);
    if (fd < 0) {
        free(tmp);
        free(fin);
        return pxvm_fail(err, PXE_IO_WRITE, -1, -1, path, interrupted ? "interrupted by a signal" : strerror(made_errno));
    }
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
    sigset_t old;
    if (px__enter(o, &old) < 0) { /* a handler may be reading the arrays: the process is ending */
        px__leave(o, &old);
        return;
    }
    int n = o->n;
    o->n = 0; /* nothing left for a signal handler */
    px__leave(o, &old);
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
            /* renamed and forgotten in one step: a handler never reads a freed name */
            sigset_t old;
            char *done = NULL;
            if (px__enter(o, &old) < 0)
                rc = pxvm_fail(err, PXE_IO_WRITE, -1, -1, o->final_path[i], "interrupted by a signal");
            else if (rename(o->tmp_path[i], o->final_path[i]) != 0)
                rc = pxvm_fail(err, PXE_IO_WRITE, -1, -1, o->final_path[i], strerror(errno));
            else
                done = o->tmp_path[i], o->tmp_path[i] = NULL;
            px__leave(o, &old);
            free(done);
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

/* What a JPEG's markers say, read before libjpeg-turbo sees the data: the frame header (sides,
 * components, sampling), the scans (SOS markers, counted past their entropy-coded data the way
 * libjpeg finds markers), where the end-of-image marker is. `fatal`: no image can come out of it
 * (libjpeg would stop too); `problem`: damage a lenient decode goes past (the data ends early,
 * bytes between markers or after EOI). */
typedef struct px__jpeg_info {
    int sof, progressive, w, h, ncomp, hs[4], vs[4], hmax, vmax;
    int scans, first_scan_comps;
    size_t end; /* just past EOI; 0: no EOI */
    pxvm_code fatal, problem;
    char why[160], problem_why[160];
} px__jpeg_info;

static int px__be16(const uint8_t *p) { return p[0] << 8 | p[1]; }

#define PX__JPEG_FATAL(ji, code, ...)                                                                               \
    do {                                                                                                            \
        (ji)->fatal = (code);                                                                                       \
        snprintf((ji)->why, sizeof (ji)->why, __VA_ARGS__);                                                         \
        return;                                                                                                     \
    } while (0)
#define PX__JPEG_PROBLEM(ji, code, ...)                                                                             \
    do {                                                                                                            \
        if (!(ji)->problem) {                                                                                       \
            (ji)->problem = (code);                                                                                 \
            snprintf((ji)->problem_why, sizeof (ji)->problem_why, __VA_ARGS__);                                     \
        }                                                                                                           \
    } while (0)

static void px__jpeg_walk(const uint8_t *d, size_t len, px__jpeg_info *ji)
{
    memset(ji, 0, sizeof *ji);
    if (len < 2 || d[0] != 0xFF || d[1] != 0xD8)
        PX__JPEG_FATAL(ji, PXE_JPEG_CORRUPT, "no start-of-image marker");
    size_t pos = 2; /* after SOI */
    for (;;) {
        if (pos >= len) {
            if (!ji->sof || !ji->scans)
                PX__JPEG_FATAL(ji, PXE_JPEG_CORRUPT, "truncated: the data ends at byte %zu, before %s", len,
                               ji->sof ? "the first scan" : "the frame header (SOF)");
            PX__JPEG_PROBLEM(ji, PXE_JPEG_CORRUPT, "truncated: the data ends at byte %zu, after scan %d, before the end-of-image marker",
                             len, ji->scans);
            return;
        }
        if (d[pos] != 0xFF) { /* libjpeg skips to the next marker with a warning */
            size_t at = pos;
            const uint8_t *ff = memchr(d + pos, 0xFF, len - pos);
            pos = ff ? (size_t)(ff - d) : len;
            PX__JPEG_PROBLEM(ji, PXE_JPEG_CORRUPT, "%zu bytes that are no marker at byte %zu", pos - at, at);
            continue;
        }
        while (pos < len && d[pos] == 0xFF) /* fill bytes */
            pos++;
        if (pos >= len)
            continue;
        int m = d[pos++];
        if (m == 0xD9) { /* EOI */
            if (!ji->scans)
                PX__JPEG_FATAL(ji, PXE_JPEG_CORRUPT, "no image before the end-of-image marker at byte %zu", pos - 2);
            ji->end = pos;
            return;
        }
        if (m == 0x00) {
            PX__JPEG_PROBLEM(ji, PXE_JPEG_CORRUPT, "a stuffed zero between markers at byte %zu", pos - 2);
            continue;
        }
        if (m == 0xD8)
            PX__JPEG_FATAL(ji, PXE_JPEG_CORRUPT, "a second start-of-image marker at byte %zu", pos - 2);
        if (m == 0x01 || (m >= 0xD0 && m <= 0xD7)) /* TEM, RSTn: no parameters */
            continue;
        if (len - pos < 2 || (size_t)px__be16(d + pos) > len - pos) {
            if (!ji->sof || !ji->scans)
                PX__JPEG_FATAL(ji, PXE_JPEG_CORRUPT, "truncated: the data ends at byte %zu, inside marker 0x%02X at byte %zu (before %s)",
                               len, m, pos - 2, ji->sof ? "the first scan" : "the frame header (SOF)");
            PX__JPEG_PROBLEM(ji, PXE_JPEG_CORRUPT, "truncated: the data ends at byte %zu, inside marker 0x%02X at byte %zu", len, m,
                             pos - 2);
            return;
        }
        int seg = px__be16(d + pos);
        if (seg < 2)
            PX__JPEG_FATAL(ji, PXE_JPEG_CORRUPT, "marker 0x%02X at byte %zu has length %d", m, pos - 2, seg);
        const uint8_t *p = d + pos + 2;
        int n = seg - 2;
        if (m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC) { /* SOFn */
            if (ji->sof)
                PX__JPEG_FATAL(ji, PXE_JPEG_CORRUPT, "a second frame header (SOF) at byte %zu", pos - 2);
            if (n < 6 || p[5] < 1 || p[5] > 4 || n != 6 + 3 * p[5])
                PX__JPEG_FATAL(ji, PXE_JPEG_CORRUPT, "a bad frame header (SOF) at byte %zu", pos - 2);
            ji->sof = m;
            ji->progressive = m == 0xC2 || m == 0xC6 || m == 0xCA || m == 0xCE;
            ji->h = px__be16(p + 1), ji->w = px__be16(p + 3), ji->ncomp = p[5];
            for (int c = 0; c < ji->ncomp; c++) {
                ji->hs[c] = p[7 + 3 * c] >> 4, ji->vs[c] = p[7 + 3 * c] & 15;
                if (ji->hs[c] < 1 || ji->hs[c] > 4 || ji->vs[c] < 1 || ji->vs[c] > 4)
                    PX__JPEG_FATAL(ji, PXE_JPEG_CORRUPT, "component %d has sampling factors %dx%d", c, ji->hs[c], ji->vs[c]);
                ji->hmax = ji->hs[c] > ji->hmax ? ji->hs[c] : ji->hmax;
                ji->vmax = ji->vs[c] > ji->vmax ? ji->vs[c] : ji->vmax;
            }
            if (ji->w < 1 || ji->h < 1)
                PX__JPEG_FATAL(ji, PXE_JPEG_CORRUPT, "the frame header declares a %dx%d image", ji->w, ji->h);
        } else if (m == 0xDA) { /* SOS, then its entropy-coded data up to the next marker */
            if (!ji->sof)
                PX__JPEG_FATAL(ji, PXE_JPEG_CORRUPT, "a scan before the frame header (SOF), at byte %zu", pos - 2);
            if (n < 1)
                PX__JPEG_FATAL(ji, PXE_JPEG_CORRUPT, "a bad scan header (SOS) at byte %zu", pos - 2);
            if (++ji->scans == 1)
                ji->first_scan_comps = p[0];
            if (ji->scans > PXVM_JPEG_MAX_SCANS)
                return; /* the caller refuses it */
            pos += (size_t)seg;
            for (;;) {
                const uint8_t *ff = pos < len ? memchr(d + pos, 0xFF, len - pos) : NULL;
                if (!ff || (size_t)(ff - d) + 1 >= len) {
                    PX__JPEG_PROBLEM(ji, PXE_JPEG_CORRUPT, "truncated: the data ends at byte %zu, inside scan %d", len, ji->scans);
                    return;
                }
                pos = (size_t)(ff - d);
                int next = d[pos + 1];
                if (next == 0x00 || (next >= 0xD0 && next <= 0xD7)) /* a stuffed FF, a restart marker */
                    pos += 2;
                else if (next == 0xFF) /* fill */
                    pos++;
                else
                    break; /* a marker */
            }
            continue;
        }
        pos += (size_t)seg;
    }
}

/* Bytes libjpeg-turbo allocates besides the output to decode `ji` (the RGBA rows and tj's row
 * pointers): a progressive or multi-scan image keeps every component's DCT coefficients (2 bytes
 * a sample, the blocks padded to whole MCUs), a sequential one an MCU row of them; plus its
 * upsampling and colour-conversion rows. */
static unsigned long long px__jpeg_work(const px__jpeg_info *ji)
{
    int multi = ji->progressive || ji->first_scan_comps < ji->ncomp;
    unsigned long long work = (unsigned long long)ji->h * sizeof(void *) + (256u << 10);
    for (int c = 0; c < ji->ncomp; c++) {
        int hs = ji->ncomp == 1 ? 1 : ji->hs[c], vs = ji->ncomp == 1 ? 1 : ji->vs[c];
        int hmax = ji->ncomp == 1 ? 1 : ji->hmax, vmax = ji->ncomp == 1 ? 1 : ji->vmax;
        unsigned long long bw = ((unsigned long long)ji->w * (unsigned)hs + 8u * (unsigned)hmax - 1) / (8u * (unsigned)hmax);
        unsigned long long bh = ((unsigned long long)ji->h * (unsigned)vs + 8u * (unsigned)vmax - 1) / (8u * (unsigned)vmax);
        bw = (bw + (unsigned)hs - 1) / (unsigned)hs * (unsigned)hs;
        bh = (bh + (unsigned)vs - 1) / (unsigned)vs * (unsigned)vs;
        work += multi ? bw * bh * 128u : bw * (unsigned)vs * 128u;
        work += bw * 8u * 8u * (unsigned)vmax * 3u; /* sample rows: MCU, context, upsampled */
    }
    return work;
}

static int px__jpeg_decode(const uint8_t *data, size_t len, const char *name, const pxvm_limits *lim,
                           const pxvm_image_want *want, pxvm_image *img, pxvm_error *err)
{
    img->px = NULL;
    img->w = img->h = 0;
    if (err)
        err->code = PXE_NONE;
    int strict = !(lim->flags & PXVM_DECODE_LENIENT);
    px__jpeg_info ji;
    px__jpeg_walk(data, len, &ji);
    if (ji.fatal)
        return pxvm_fail(err, ji.fatal, -1, -1, name, ji.why);
    if (ji.scans > PXVM_JPEG_MAX_SCANS)
        return pxvm_fail(err, PXE_JPEG_SCANS, -1, -1, name, (unsigned)PXVM_JPEG_MAX_SCANS);
    /* sides and memory from the frame header, before libjpeg-turbo allocates anything */
    if (px__check_size(name, lim, want, (unsigned long)ji.w, (unsigned long)ji.h, px__jpeg_work(&ji), err) < 0)
        return -1;
    if (ji.problem && strict)
        return pxvm_fail(err, ji.problem, -1, -1, name, ji.problem_why);
    if (ji.problem)
        PX__WENT_PAST(err, ji.problem, -1, -1, name, ji.problem_why);
    if (ji.end && ji.end < len) {
        if (strict)
            return pxvm_fail(err, PXE_IMAGE_TRAILING, -1, -1, name, (unsigned long long)(len - ji.end),
                             "JPEG's end-of-image marker", (unsigned long long)ji.end);
        PX__WENT_PAST(err, PXE_IMAGE_TRAILING, -1, -1, name, (unsigned long long)(len - ji.end), "JPEG's end-of-image marker",
                      (unsigned long long)ji.end);
    }
    tjhandle tj = tjInitDecompress();
    if (!tj)
        return pxvm_fail(err, PXE_NOMEM, -1, -1, 0ull);
    int w = 0, h = 0, subsamp = 0, colorspace = 0;
    char why[200];
    if (tjDecompressHeader3(tj, data, (unsigned long)len, &w, &h, &subsamp, &colorspace) != 0 || w != ji.w || h != ji.h) {
        snprintf(why, sizeof why, "%s", w != ji.w || h != ji.h ? "the header does not decode" : tjGetErrorStr2(tj));
        tjDestroy(tj);
        return pxvm_fail(err, PXE_JPEG_CORRUPT, -1, -1, name, why);
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
     * for both executors, so the same file gives the same pixels everywhere pxvm runs. Strict: any
     * warning of libjpeg's (corrupt data, premature end of data) stops the decode. */
    int flags = TJFLAG_LIMITSCANS | (strict ? TJFLAG_STOPONWARNING : 0);
    if (tjDecompress2(tj, data, (unsigned long)len, img->px, w, w * 4, h, TJPF_RGBA, flags) != 0) {
        snprintf(why, sizeof why, "%s", tjGetErrorStr2(tj));
        if (strict || tjGetErrorCode(tj) == TJERR_FATAL) {
            tjDestroy(tj);
            pxvm_image_free(img);
            return pxvm_fail(err, PXE_JPEG_CORRUPT, -1, -1, name, why);
        }
        PX__WENT_PAST(err, PXE_JPEG_CORRUPT, -1, -1, name, why);
    }
    tjDestroy(tj);
    return 0;
}

int pxvm_jpeg_decode(const uint8_t *data, size_t len, const char *name, const pxvm_limits *lim, pxvm_image *img,
                     pxvm_error *err)
{
    return px__jpeg_decode(data, len, name, lim, NULL, img, err);
}

int pxvm_image_decode_want(const uint8_t *data, size_t len, const char *name, const pxvm_limits *lim,
                           const pxvm_image_want *want, pxvm_image *img, pxvm_error *err)
{
    if (len >= 3 && data[0] == 0xFF && data[1] == 0xD8 && data[2] == 0xFF)
        return px__jpeg_decode(data, len, name, lim, want, img, err);
    if (len >= 8 && !png_sig_cmp(data, 0, 8))
        return px__png_decode(data, len, name, lim, want, img, err);
    img->px = NULL;
    img->w = img->h = 0;
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
