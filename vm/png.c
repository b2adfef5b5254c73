/* png.c - PNG decode and encode through libpng: strict by default (a CRC or zlib error, a
 * truncated stream are malformed; PXVM_DECODE_LENIENT keeps libpng's warnings as a warning),
 * bytes after IEND accepted and noted, sizes judged from the header before anything is inflated;
 * encoding deterministic. */
#include "image_codec.h"

#include <png.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

/* ---- PNG decode ----------------------------------------------------------------------------- */

typedef struct px__png_io {
    const uint8_t *data;
    size_t len, pos;
    uint8_t *out; /* encode: growing buffer */
    size_t out_len, out_cap;
    int out_failed;
    int strict;    /* decode: a warning is an error */
    int refused_warning; /* decode, strict: the error is a warning (lenient would go past it) */
    int image_done;      /* decode: every row was read; what fails after is in the chunks to IEND */
    int truncated;       /* decode: the data ended before IEND (px__png_read) */
    int in_image;        /* decode: the rows are being read */
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
        io->refused_warning = 1;
        png_longjmp(png, 1);
    }
    if (!io->warn[0])
        snprintf(io->warn, sizeof io->warn, "%s", msg);
}

/* Ancillary chunks whose contents change nothing we decode (colour, text, time, layout): skipped
 * with their CRC checked, never parsed or inflated. tRNS is read (it gives alpha). */
static const png_byte px__png_skip[] = "bKGD\0cHRM\0eXIf\0gAMA\0hIST\0iCCP\0iTXt\0oFFs\0pCAL\0pHYs\0sBIT\0sCAL\0sPLT\0"
                                       "sRGB\0tEXt\0tIME\0zTXt";

static void px__png_read(png_structp png, png_bytep dst, size_t n)
{
    px__png_io *io = png_get_io_ptr(png);
    if (n > io->len - io->pos) {
        char msg[96];
        snprintf(msg, sizeof msg, "truncated: the data ends at byte %zu, before the IEND chunk", io->len);
        io->truncated = 1;
        png_error(png, msg);
    }
    memcpy(dst, io->data + io->pos, n);
    io->pos += n;
}

/* Ancillary chunks cannot make us allocate or inflate much (zTXt/iCCP bombs), and those that
 * change nothing we decode are skipped unread: the same for a whole decode and a partial one. */
static void px__png_read_limits(png_structp png)
{
    png_set_chunk_malloc_max(png, 1u << 22);
    png_set_chunk_cache_max(png, 64);
    png_set_keep_unknown_chunks(png, PNG_HANDLE_CHUNK_NEVER, NULL, 0);
    png_set_keep_unknown_chunks(png, PNG_HANDLE_CHUNK_NEVER, px__png_skip, (int)(sizeof px__png_skip / 5));
}

/* The size a decode will have, checked from the header before anything is inflated: sides and
 * memory once oriented (px_image_check_size), with libpng's buffers (two rows of up to 8 bytes
 * a pixel, the row pointers, zlib's window). 0, or -1 with *err set. */
static int px__png_check_size(const char *name, const pxvm_limits *lim, const pxvm_image_want *want, png_uint_32 w,
                              png_uint_32 h, int orientation, pxvm_error *err)
{
    unsigned long long work = 2ull * ((unsigned long long)w * 8u + 64u) + (unsigned long long)h * sizeof(png_bytep) + (64u << 10);
    unsigned long ow = (unsigned long)w, oh = (unsigned long)h;
    work += px_image_orient_plan(lim, orientation, &ow, &oh);
    return px_image_check_size(name, lim, want, ow, oh, work, err);
}

/* libpng's transforms to RGBA8 (SPEC "PNG"), the same for a whole decode and a partial one. */
static void px__png_transforms(png_structp png, png_infop info, int color, int depth)
{
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
    if (png_get_rowbytes(png, info) != (size_t)png_get_image_width(png, info) * 4u)
        png_error(png, "unsupported pixel layout");
}

/* The RGBA8 of a pixel whose samples are all 0 (what a truncated PNG's rows that never arrived
 * hold: Pillow's zeroed image): (0, 0, 0) or palette entry 0, its alpha by the rules of tRNS. */
static uint32_t px__png_zero_pixel(png_structp png, png_infop info, int color)
{
    uint32_t rgb = 0, a = (color & PNG_COLOR_MASK_ALPHA) ? 0u : 255u;
    png_bytep trns = NULL;
    int ntrns = 0;
    png_color_16p key = NULL;
    int has_trns = png_get_tRNS(png, info, &trns, &ntrns, &key) != 0;
    if (color == PNG_COLOR_TYPE_PALETTE) {
        png_colorp pal = NULL;
        int npal = 0;
        if (png_get_PLTE(png, info, &pal, &npal) && npal > 0)
            rgb = (uint32_t)pal[0].red | (uint32_t)pal[0].green << 8 | (uint32_t)pal[0].blue << 16;
        a = has_trns && ntrns > 0 ? trns[0] : 255u;
    } else if (has_trns && key && (color == PNG_COLOR_TYPE_GRAY ? key->gray == 0
                                                                 : key->red == 0 && key->green == 0 && key->blue == 0)) {
        a = 0; /* the key is the raw zero sample */
    }
    return rgb | a << 24;
}

/* ---- a truncated PNG, lenient: the rows that arrived ------------------------------------------ */

/* Adam7: each pass's first column and row and its steps. */
static const int px__adam7[7][4] = {{0, 0, 8, 8}, {4, 0, 8, 8}, {0, 4, 4, 8}, {2, 0, 4, 4}, {0, 2, 2, 4}, {1, 0, 2, 2},
                                    {0, 1, 1, 2}};

typedef struct {
    const char *name;
    const pxvm_limits *lim;
    const pxvm_image_want *want;
    pxvm_image *img;
    pxvm_error *err;
    int orientation;        /* EXIF's, applied after: the size checked is the oriented one */
    int interlaced;
    unsigned long long raw; /* the image data's bytes once inflated: every row, a filter byte each */
} px__png_partial_state;

static void px__png_partial_info(png_structp png, png_infop info)
{
    px__png_partial_state *st = png_get_progressive_ptr(png);
    png_uint_32 w, h;
    int depth, color, interlace;
    png_get_IHDR(png, info, &w, &h, &depth, &color, &interlace, NULL, NULL);
    st->interlaced = interlace != PNG_INTERLACE_NONE;
    unsigned long long bits = (unsigned long long)png_get_channels(png, info) * (unsigned)depth;
    for (int p = 0; p < (st->interlaced ? 7 : 1); p++) {
        int x0 = st->interlaced ? px__adam7[p][0] : 0, y0 = st->interlaced ? px__adam7[p][1] : 0;
        int dx = st->interlaced ? px__adam7[p][2] : 1, dy = st->interlaced ? px__adam7[p][3] : 1;
        unsigned long long pw = w > (png_uint_32)x0 ? (w - (png_uint_32)x0 + (png_uint_32)dx - 1) / (png_uint_32)dx : 0;
        unsigned long long ph = h > (png_uint_32)y0 ? (h - (png_uint_32)y0 + (png_uint_32)dy - 1) / (png_uint_32)dy : 0;
        if (pw && ph)
            st->raw += ph * (1u + (pw * bits + 7u) / 8u);
    }
    if (px__png_check_size(st->name, st->lim, st->want, w, h, st->orientation, st->err) < 0)
        png_error(png, "size"); /* refused, in *err */
    uint32_t zero = px__png_zero_pixel(png, info, color);
    px__png_transforms(png, info, color, depth);
    if (pxvm_image_alloc(st->img, (int)w, (int)h, st->err) < 0)
        png_error(png, "out of memory");
    for (size_t i = 0, n = (size_t)w * (size_t)h; i < n; i++) {
        uint8_t *p = st->img->px + i * 4u;
        p[0] = (uint8_t)zero, p[1] = (uint8_t)(zero >> 8), p[2] = (uint8_t)(zero >> 16), p[3] = (uint8_t)(zero >> 24);
    }
}

/* A whole row of the image, or a pass's row of an interlaced one, which libpng spreads to the
 * image's width (its pixel for column x at x) and hands again for each row of the pass's block
 * (drawing it blocky): only the pass's own rows and columns are written, the others stay. */
static void px__png_partial_row(png_structp png, png_bytep row, png_uint_32 y, int pass)
{
    px__png_partial_state *st = png_get_progressive_ptr(png);
    if (!row || !st->img->px || y >= (png_uint_32)st->img->h)
        return;
    int x0 = 0, dx = 1;
    if (st->interlaced && pass >= 0 && pass < 7) { /* libpng repeats a pass's row down its block */
        int y0 = px__adam7[pass][1], dy = px__adam7[pass][3];
        if ((int)y < y0 || ((int)y - y0) % dy)
            return;
        x0 = px__adam7[pass][0], dx = px__adam7[pass][2];
    }
    uint8_t *dst = st->img->px + (size_t)y * (size_t)st->img->w * 4u;
    for (int x = x0; x < st->img->w; x += dx)
        memcpy(dst + (size_t)x * 4u, row + (size_t)x * 4u, 4);
}

/* Whether the IDAT chunks' compressed stream, as far as the data goes, ends (zlib's end of stream)
 * before `raw` bytes: image data short of its last row, which the cut only hides (refused as a
 * whole file's "Not enough image data" is). Corrupt data is not judged here. */
static int px__png_stream_short(const uint8_t *d, size_t len, unsigned long long raw)
{
    z_stream z;
    memset(&z, 0, sizeof z);
    if (inflateInit(&z) != Z_OK)
        return 0;
    unsigned char out[16384];
    unsigned long long total = 0;
    int ret = Z_OK;
    for (size_t pos = 8; ret == Z_OK && total < raw && pos + 8 <= len;) {
        size_t n = (size_t)d[pos] << 24 | (size_t)d[pos + 1] << 16 | (size_t)d[pos + 2] << 8 | d[pos + 3];
        size_t at = pos + 8, have = n < len - at ? n : len - at;
        if (!memcmp(d + pos + 4, "IDAT", 4)) {
            z.next_in = (Bytef *)(uintptr_t)(d + at);
            z.avail_in = (uInt)have;
            while (ret == Z_OK && z.avail_in && total < raw) { /* never past the rows: no bomb */
                z.next_out = out;
                z.avail_out = sizeof out;
                ret = inflate(&z, Z_NO_FLUSH);
                total += sizeof out - z.avail_out;
                if (ret == Z_BUF_ERROR)
                    ret = Z_OK; /* no progress possible: more input needed */
            }
        }
        if (have < n || n > len)
            break;
        pos = at + n + 4;
    }
    inflateEnd(&z);
    return ret == Z_STREAM_END && total < raw;
}

/* Lenient, a PNG whose data ends inside its image data: every row that arrived whole (from all
 * the compressed bytes there are), the rest as Pillow leaves them (px__png_zero_pixel): 0, with
 * the truncation as the problem gone past; -1 when it ends before its image data, or with the
 * damage libpng finds in the compressed bytes the strict pass did not reach (in `why`). */
static int px__png_partial(const uint8_t *data, size_t len, const char *name, const pxvm_limits *lim,
                           const pxvm_image_want *want, int orientation, pxvm_image *img, pxvm_error *err,
                           char *why, size_t why_n)
{
    px__png_io io = {.data = data, .len = len, .pos = 0, .strict = 0};
    px__png_partial_state st = {name, lim, want, img, err, orientation, 0, 0};
    img->px = NULL;
    img->w = img->h = 0;
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &io, px__png_error, px__png_warning);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    if (!info) {
        png_destroy_read_struct(&png, NULL, NULL);
        return -1;
    }
    if (setjmp(png_jmpbuf(png))) {
        png_destroy_read_struct(&png, &info, NULL);
        pxvm_image_free(img);
        snprintf(why, why_n, "%s", io.msg); /* the damage found past the strict pass's end */
        return -1;
    }
    px__png_read_limits(png);
    /* the progressive reader calls corrupt compressed data (a bad Adler-32, a stream that ends
     * before the last row) a benign error, a warning on read: here it is damage, refused as the
     * whole decode refuses it */
    png_set_benign_errors(png, 0);
    png_set_progressive_read_fn(png, &st, px__png_partial_info, px__png_partial_row, NULL);
    png_process_data(png, info, (png_bytep)(uintptr_t)data, len);
    png_destroy_read_struct(&png, &info, NULL);
    if (img->px && px__png_stream_short(data, len, st.raw)) {
        snprintf(why, why_n, "Not enough image data");
        pxvm_image_free(img);
    }
    return img->px ? 0 : -1;
}

/* The TIFF block of the last eXIf chunk before IEND (Pillow keeps the last), found by walking the
 * chunks' lengths within the data (libpng skips eXIf unread: px__png_skip); the orientation it
 * gives (1 when there is none). A chunk list that leaves the data ends the walk. */
static int px__png_orientation(const uint8_t *d, size_t len)
{
    size_t pos = 8, at = 0, n = 0;
    while (len - pos >= 12) {
        uint32_t clen = (uint32_t)d[pos] << 24 | (uint32_t)d[pos + 1] << 16 | (uint32_t)d[pos + 2] << 8 | d[pos + 3];
        const uint8_t *type = d + pos + 4;
        if (clen > len - pos - 12)
            break;
        if (!memcmp(type, "eXIf", 4))
            at = pos + 8, n = clen;
        if (!memcmp(type, "IEND", 4))
            break;
        pos += 12 + (size_t)clen;
    }
    return n ? px_exif_orientation(d + at, n) : 1;
}

int px_png_decode_want(const uint8_t *data, size_t len, const char *name, const pxvm_limits *lim,
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
    const int orientation = (lim->flags & PXVM_DECODE_EXIF_TRANSPOSE) ? px__png_orientation(data, len) : 1;
    /* Everything that must survive a longjmp lives in `io` or in heap memory reached from it. */
    png_bytep *volatile rows = NULL;
    pxvm_image *volatile out = img;
    if (setjmp(png_jmpbuf(png))) {
        free(rows);
        png_destroy_read_struct(&png, &info, NULL);
        if (io.image_done && !io.strict) { /* a missing or damaged IEND after whole image data: kept, warned */
            char why[400];
            snprintf(why, sizeof why, "after the whole image data: %s", io.msg);
            PX__WENT_PAST(err, PXE_PNG_CORRUPT, -1, -1, name, why);
            return 0;
        }
        pxvm_image_free(out);
        if (io.truncated && io.in_image && !io.strict) { /* lenient: the rows that arrived */
            int r = px__png_partial(data, len, name, lim, want, orientation, out, err, io.msg, sizeof io.msg);
            if (r == 0 && px_image_orient(out, orientation, err) < 0)
                return -1;
            if (r == 0) {
                PX__WENT_PAST(err, PXE_PNG_CORRUPT, -1, -1, name, io.warn[0] ? io.warn : io.msg);
                return 0;
            }
            if (err && err->code != PXE_NONE) /* its size check refused */
                return -1;
            return pxvm_fail(err, PXE_PNG_CORRUPT, -1, -1, name, io.msg); /* damage past the cut's rows */
        }
        if (io.refused_warning || io.image_done || (io.truncated && io.in_image))
            return px_image_damaged(err, PXE_PNG_CORRUPT, name, io.msg);
        return pxvm_fail(err, PXE_PNG_CORRUPT, -1, -1, name, io.msg);
    }
    png_set_read_fn(png, &io, px__png_read);
    px__png_read_limits(png);
    png_read_info(png, info);

    png_uint_32 w, h;
    int depth, color, interlace;
    png_get_IHDR(png, info, &w, &h, &depth, &color, &interlace, NULL, NULL);
    if (px__png_check_size(name, lim, want, w, h, orientation, err) < 0) {
        png_destroy_read_struct(&png, &info, NULL);
        return -1;
    }
    px__png_transforms(png, info, color, depth);

    if (pxvm_image_alloc(img, (int)w, (int)h, err) < 0) {
        png_destroy_read_struct(&png, &info, NULL);
        return -1;
    }
    rows = malloc(sizeof(png_bytep) * h);
    if (!rows)
        png_error(png, "out of memory");
    for (png_uint_32 y = 0; y < h; y++)
        rows[y] = img->px + (size_t)y * w * 4u;
    io.in_image = 1;
    png_read_image(png, rows);
    io.image_done = 1;
    png_read_end(png, NULL); /* the chunks after the image data, to IEND, CRCs checked */
    free(rows);
    png_destroy_read_struct(&png, &info, NULL);
    if (px_image_orient(out, orientation, err) < 0)
        return -1;
    if (io.warn[0])
        PX__WENT_PAST(err, PXE_PNG_CORRUPT, -1, -1, name, io.warn);
    if (io.pos < len) /* bytes after IEND: the image is whole, noted */
        PX__NOTE_TRAILING(err, name, len, io.pos, "PNG's IEND chunk");
    return 0;
}

int pxvm_png_decode(const uint8_t *data, size_t len, const char *name, const pxvm_limits *lim, pxvm_image *img,
                    pxvm_error *err)
{
    return px_image_decode_with(px_png_decode_want, data, len, name, lim, NULL, img, err);
}

/* Reads what `fd` has left, in chunks, stopping with an error past max_bytes: a pipe or a device
 * of any length is cut at the limit, never buffered whole. */

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

