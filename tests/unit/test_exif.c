/* test_exif.c - EXIF orientation (PXVM_DECODE_EXIF_TRANSPOSE): the TIFF block read with strict
 * bounds (every prefix and random garbage in a buffer of exactly its size: ASan sees any read
 * past it), the bound of an IFD entry that ends at the block's end, the eight turns of a JPEG
 * and a PNG against the same file decoded as stored, and the oriented size as the one checked.
 * Pillow is the reference of the turns (tests/python/test_exif.py, byte for byte). */
#define _POSIX_C_SOURCE 200809L /* mkstemp */
#include <stdlib.h>
#include <unistd.h>
#include <string.h>
#include <turbojpeg.h>
#include <zlib.h>

#include "../../vm/image_codec.h"
#include "test.h"

/* A TIFF block: header (II or MM), IFD0 at 8 with one entry (tag, type, count, value). */
static size_t px__tiff(uint8_t *t, int be, unsigned tag, unsigned type, uint32_t count, uint32_t value)
{
    memset(t, 0, 26);
    memcpy(t, be ? "MM\0*" : "II*\0", 4);
    uint8_t *p = t + 4;
#define PUT16(q, v) (be ? ((q)[0] = (uint8_t)((v) >> 8), (q)[1] = (uint8_t)(v)) : ((q)[1] = (uint8_t)((v) >> 8), (q)[0] = (uint8_t)(v)))
#define PUT32(q, v) (be ? (PUT16(q, (v) >> 16), PUT16((q) + 2, (v) & 0xFFFF)) : (PUT16((q) + 2, (v) >> 16), PUT16(q, (v) & 0xFFFF)))
    PUT32(p, 8u);
    PUT16(t + 8, 1u);
    PUT16(t + 10, tag);
    PUT16(t + 12, type);
    PUT32(t + 14, count);
    if (type == 3 || type == 8)
        PUT16(t + 18, value);
    else if (type == 1 || type == 6)
        t[18] = (uint8_t)value;
    else
        PUT32(t + 18, value);
#undef PUT16
#undef PUT32
    return 22; /* 8 + 2 + 12 */
}

/* px_exif_orientation of t[0..n) copied into a heap buffer of exactly n bytes. */
static int px__orientation(const uint8_t *t, size_t n)
{
    uint8_t *exact = malloc(n ? n : 1);
    if (!exact)
        return -1;
    memcpy(exact, t, n);
    int o = px_exif_orientation(exact, n);
    free(exact);
    return o;
}

TEST(exif_orientation_read_in_both_byte_orders_and_types)
{
    uint8_t t[32];
    for (int be = 0; be < 2; be++)
        for (unsigned v = 0; v <= 9; v++) {
            size_t n = px__tiff(t, be, 0x0112, 3, 1, v);
            CHECK_EQ(px__orientation(t, n), v >= 1 && v <= 8 ? (int)v : 1); /* 0 and 9: nothing */
            n = px__tiff(t, be, 0x0112, 4, 1, v);                           /* LONG, as Pillow reads it */
            CHECK_EQ(px__orientation(t, n), v >= 1 && v <= 8 ? (int)v : 1);
        }
    size_t n = px__tiff(t, 0, 0x0112, 3, 2, 6); /* two values: a tuple to Pillow, no turn */
    CHECK_EQ(px__orientation(t, n), 1);
    n = px__tiff(t, 0, 0x0112, 2, 2, '6'); /* text "6": no turn */
    CHECK_EQ(px__orientation(t, n), 1);
    n = px__tiff(t, 0, 0x0110, 3, 1, 6); /* another tag */
    CHECK_EQ(px__orientation(t, n), 1);
    n = px__tiff(t, 0, 0x0112, 0, 1, 6); /* a type Pillow skips */
    CHECK_EQ(px__orientation(t, n), 1);
}

/* The bound: an entry that ends exactly at the block's end is read; one byte less and it is not
 * there (the IFD is truncated: the entries before the cut count). */
TEST(exif_orientation_entry_ending_at_the_end_is_read_one_byte_less_is_not)
{
    uint8_t t[32];
    for (int be = 0; be < 2; be++) {
        size_t n = px__tiff(t, be, 0x0112, 3, 1, 6);
        CHECK_EQ(px__orientation(t, n), 6);
        CHECK_EQ(px__orientation(t, n - 1), 1);
    }
}

TEST(exif_orientation_of_every_prefix_and_of_garbage_stays_in_bounds)
{
    uint8_t t[32];
    size_t n = px__tiff(t, 1, 0x0112, 3, 1, 8);
    for (size_t k = 0; k <= n; k++) {
        int o = px__orientation(t, k);
        CHECK(o == (k == n ? 8 : 1));
    }
    CHECK_EQ(px_exif_orientation(NULL, 0), 1);
    /* random blocks, some with a valid header and offsets pointing anywhere (large counts, values
     * stored elsewhere, offsets past the end): always 1..8, never a read outside (ASan) */
    uint32_t s = 12345;
    uint8_t buf[96];
    for (int i = 0; i < 20000; i++) {
        size_t len = (size_t)(i % 96);
        for (size_t j = 0; j < len; j++) {
            s = s * 1103515245u + 12345u;
            buf[j] = (uint8_t)(s >> 16);
        }
        if (len >= 8 && i % 3) {
            memcpy(buf, i % 2 ? "MM\0*" : "II*\0", 4);
            buf[i % 2 ? 7 : 4] = (uint8_t)(i % 2 ? (s >> 8) % 96 : (s >> 8) % 96); /* a near IFD offset */
            if (i % 2)
                buf[4] = buf[5] = buf[6] = 0;
            else
                buf[5] = buf[6] = buf[7] = 0;
            if (len >= 12 && i % 5 == 0) { /* an orientation entry with a count and type at random */
                size_t at = (size_t)(i % 2 ? buf[7] : buf[4]);
                if (at + 2 + 4 <= len) {
                    buf[at + 2 + (i % 2)] = 0x12;
                    buf[at + 3 - (i % 2)] = 0x01;
                }
            }
        }
        int o = px__orientation(buf, len);
        CHECK(o >= 1 && o <= 8);
    }
}

/* A 5x3 image of distinct pixels. */
static void px__distinct(pxvm_image *img)
{
    pxvm_image_alloc(img, 5, 3, NULL);
    for (int y = 0; y < 3; y++)
        for (int x = 0; x < 5; x++)
            px_set(img, x, y, (uint32_t)(40 * x) | (uint32_t)(80 * y) << 8 | 0x40u << 16 | 0xFFu << 24);
}

/* The source pixel of output (x, y) of a w x h image turned by orientation o (Pillow's). */
static uint32_t px__turned(const pxvm_image *src, int o, int x, int y)
{
    int w = src->w, h = src->h;
    switch (o) {
    case 2: return px_px(src, w - 1 - x, y);
    case 3: return px_px(src, w - 1 - x, h - 1 - y);
    case 4: return px_px(src, x, h - 1 - y);
    case 5: return px_px(src, y, x);
    case 6: return px_px(src, y, h - 1 - x);
    case 7: return px_px(src, w - 1 - y, h - 1 - x);
    case 8: return px_px(src, w - 1 - y, x);
    default: return px_px(src, x, y);
    }
}

static uint32_t px__crc(const uint8_t *p, size_t n) { return (uint32_t)crc32(crc32(0L, Z_NULL, 0), p, (uInt)n); }

/* png with an eXIf chunk of orientation o inserted before IEND (the last 12 bytes). */
static uint8_t *px__png_with_exif(const uint8_t *png, size_t len, int o, size_t *out_len)
{
    uint8_t t[32];
    size_t n = px__tiff(t, 1, 0x0112, 3, 1, (uint32_t)o);
    uint8_t *d = malloc(len + 12 + n);
    if (!d)
        return NULL;
    memcpy(d, png, len - 12);
    uint8_t *c = d + len - 12;
    c[0] = 0, c[1] = 0, c[2] = 0, c[3] = (uint8_t)n;
    memcpy(c + 4, "eXIf", 4);
    memcpy(c + 8, t, n);
    uint32_t crc = px__crc(c + 4, 4 + n);
    c[8 + n] = (uint8_t)(crc >> 24), c[9 + n] = (uint8_t)(crc >> 16), c[10 + n] = (uint8_t)(crc >> 8), c[11 + n] = (uint8_t)crc;
    memcpy(c + 12 + n, png + len - 12, 12);
    *out_len = len + 12 + n;
    return d;
}

/* jpeg with an APP1 Exif segment of orientation o right after SOI. */
static uint8_t *px__jpeg_with_exif(const uint8_t *jpeg, size_t len, int o, size_t *out_len)
{
    uint8_t t[32];
    size_t n = px__tiff(t, 0, 0x0112, 3, 1, (uint32_t)o), seg = 2 + 6 + n;
    uint8_t *d = malloc(len + 2 + seg);
    if (!d)
        return NULL;
    memcpy(d, jpeg, 2);
    d[2] = 0xFF, d[3] = 0xE1, d[4] = (uint8_t)(seg >> 8), d[5] = (uint8_t)seg;
    memcpy(d + 6, "Exif\0\0", 6);
    memcpy(d + 12, t, n);
    memcpy(d + 12 + n, jpeg + 2, len - 2);
    *out_len = len + 2 + seg;
    return d;
}

static void px__check_turns(const uint8_t *file, size_t len, int is_png, int o)
{
    pxvm_limits lim;
    pxvm_limits_default(&lim);
    pxvm_image stored, turned;
    pxvm_error err;
    size_t n = 0;
    uint8_t *d = is_png ? px__png_with_exif(file, len, o, &n) : px__jpeg_with_exif(file, len, o, &n);
    CHECK(d != NULL);
    if (!d)
        return;
    CHECK_EQ(pxvm_image_decode_any(d, n, "x", &lim, &stored, &err), 0); /* off: the pixels as stored */
    lim.flags = PXVM_DECODE_EXIF_TRANSPOSE;
    CHECK_EQ(pxvm_image_decode_any(d, n, "x", &lim, &turned, &err), 0);
    CHECK_EQ(turned.w, o >= 5 ? stored.h : stored.w);
    CHECK_EQ(turned.h, o >= 5 ? stored.w : stored.h);
    for (int y = 0; y < turned.h; y++)
        for (int x = 0; x < turned.w; x++)
            if (px_px(&turned, x, y) != px__turned(&stored, o, x, y))
                px_test_fail(__FILE__, __LINE__, "%s orientation %d: pixel (%d, %d)", is_png ? "png" : "jpeg", o, x, y);
    /* the oriented size is the size a slot is asked for: the turned one binds, the stored one not */
    pxvm_image_want want = {turned.w, turned.h, 1, "image"};
    pxvm_image again;
    CHECK_EQ(pxvm_image_decode_want(d, n, "x", &lim, &want, &again, &err), 0);
    pxvm_image_free(&again);
    if (o >= 5) {
        pxvm_image_want stored_size = {stored.w, stored.h, 1, "image"};
        CHECK(pxvm_image_decode_want(d, n, "x", &lim, &stored_size, &again, &err) < 0);
        CHECK_EQ(err.code, PXE_INPUT_SIZE);
    }
    pxvm_image_free(&stored);
    pxvm_image_free(&turned);
    free(d);
}

TEST(exif_transpose_turns_png_and_jpeg_in_the_eight_ways)
{
    pxvm_image img;
    pxvm_error err;
    px__distinct(&img);
    uint8_t *png = NULL;
    size_t png_len = 0;
    CHECK_EQ(pxvm_png_encode(&img, &png, &png_len, &err), 0);
    tjhandle tj = tjInitCompress();
    unsigned char *jpeg = NULL;
    unsigned long jpeg_len = 0;
    CHECK(tj && tjCompress2(tj, img.px, img.w, img.w * 4, img.h, TJPF_RGBA, &jpeg, &jpeg_len, TJSAMP_444, 95, 0) == 0);
    for (int o = 1; o <= 8; o++) {
        if (png)
            px__check_turns(png, png_len, 1, o);
        if (jpeg)
            px__check_turns(jpeg, jpeg_len, 0, o);
    }
    tjFree(jpeg);
    if (tj)
        tjDestroy(tj);
    free(png);
    pxvm_image_free(&img);
}

/* EXIF orientation turns images given as inputs, never a program: a .pxi that carries an eXIf
 * chunk (orientation 6, a quarter turn) loads with PXVM_DECODE_EXIF_TRANSPOSE set (pxrun and
 * pxbatch --exif-transpose set it for all their decodes) as the same program, pixel for pixel,
 * through the loader the tools use and through the C API's. */
TEST(exif_transpose_never_turns_a_program)
{
    pxvm_error err;
    uint8_t *png;
    size_t len, elen;
    if (pxvm_read_file("programs/foveate273.pxi", 1u << 24, &png, &len, &err) < 0) {
        px_test_fail(__FILE__, __LINE__, "%s", err.msg);
        return;
    }
    uint8_t *turned = px__png_with_exif(png, len, 6, &elen);
    char path[] = "/tmp/pxvm-exif-program-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0 && turned && write(fd, turned, elen) == (ssize_t)elen);
    if (fd >= 0)
        close(fd);
    pxvm_limits lim;
    pxvm_limits_default(&lim);
    pxvm_program plain, with;
    CHECK_EQ(pxvm_program_load("programs/foveate273.pxi", &lim, &plain, &err), 0);
    lim.flags |= PXVM_DECODE_EXIF_TRANSPOSE;
    int rc = pxvm_program_load(path, &lim, &with, &err);
    CHECK_EQ(rc, 0);
    if (rc == 0) {
        CHECK(with.image.w == plain.image.w && with.image.h == plain.image.h &&
              !memcmp(with.image.px, plain.image.px, (size_t)plain.image.w * (size_t)plain.image.h * 4u));
        pxvm_program_free(&with);
    }
    pxvm_prog *handle = NULL;
    CHECK_EQ(pxvm_prog_load(path, &lim, &handle), 0);
    pxvm_prog_free(handle);
    pxvm_program_free(&plain);
    unlink(path);
    free(turned);
    free(png);
}
