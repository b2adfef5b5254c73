/* test_decode.c - the image decoders are strict: a truncated or corrupt PNG or JPEG, or bytes
 * after its end, is refused as malformed (naming the file); PXVM_DECODE_LENIENT decodes what it
 * can and says what it went past. Decode bombs (a tiny progressive JPEG declaring 16384x16384, a
 * JPEG of hundreds of scans, a PNG of another size than its slot) are refused from the header,
 * quickly and without allocating what they declare. */
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <turbojpeg.h>
#include <unistd.h>
#include <zlib.h>

#include "test.h"

static pxvm_limits px__lim(uint32_t flags)
{
    pxvm_limits lim;
    pxvm_limits_default(&lim);
    lim.flags = flags;
    return lim;
}

/* The bundled photo as a JPEG (libjpeg-turbo, quality 90): 4:2:0 sequential or progressive. */
static uint8_t *px__photo_jpeg(int progressive, size_t *len)
{
    pxvm_limits lim = px__lim(0);
    pxvm_image photo;
    pxvm_error err;
    *len = 0;
    if (pxvm_png_load("programs/data/chelsea.png", &lim, &photo, &err) < 0)
        return NULL;
    tjhandle tj = tjInitCompress();
    unsigned char *jpeg = NULL;
    unsigned long n = 0;
    int rc = tj ? tjCompress2(tj, photo.px, photo.w, photo.w * 4, photo.h, TJPF_RGBA, &jpeg, &n, TJSAMP_420, 90,
                              progressive ? TJFLAG_PROGRESSIVE : 0)
                : -1;
    uint8_t *out = rc == 0 ? malloc(n) : NULL;
    if (out) {
        memcpy(out, jpeg, n);
        *len = n;
    }
    tjFree(jpeg);
    if (tj)
        tjDestroy(tj);
    pxvm_image_free(&photo);
    return out;
}

/* A grey vertical gradient compressed by libjpeg-turbo (64x64 progressive: 654 bytes). */
static uint8_t *px__small_jpeg(int w, int h, int progressive, size_t *len)
{
    uint8_t *px = malloc((size_t)w * (size_t)h * 4u);
    for (int i = 0; px && i < w * h * 4; i++)
        px[i] = (uint8_t)(i / (4 * w) * 4);
    tjhandle tj = tjInitCompress();
    unsigned char *jpeg = NULL;
    unsigned long n = 0;
    int rc = px && tj ? tjCompress2(tj, px, w, w * 4, h, TJPF_RGBA, &jpeg, &n, TJSAMP_420, 75,
                                    progressive ? TJFLAG_PROGRESSIVE : 0)
                      : -1;
    uint8_t *out = rc == 0 ? malloc(n) : NULL;
    if (out)
        memcpy(out, jpeg, n);
    *len = out ? n : 0;
    tjFree(jpeg);
    if (tj)
        tjDestroy(tj);
    free(px);
    return out;
}

/* The offset of the first marker `m` (FF m) outside entropy-coded data, or 0. */
static size_t px__find_marker(const uint8_t *d, size_t len, int m)
{
    for (size_t pos = 2; pos + 4 <= len;) {
        if (d[pos] != 0xFF)
            return 0;
        if (d[pos + 1] == m)
            return pos;
        pos += 2 + (size_t)(d[pos + 2] << 8 | d[pos + 3]);
    }
    return 0;
}

/* Decodes in strict and lenient mode: strict must fail as malformed (with `code` unless 0);
 * lenient must fail too (lenient_ok 0) or succeed with a warning recorded. */
static void px__strict_lenient(const uint8_t *d, size_t len, const char *name, pxvm_code code, int lenient_ok,
                               const char *what)
{
    pxvm_limits strict = px__lim(0), lenient = px__lim(PXVM_DECODE_LENIENT);
    pxvm_image img;
    pxvm_error err;
    memset(&err, 0, sizeof err);
    if (pxvm_image_decode_any(d, len, name, &strict, &img, &err) == 0) {
        px_test_fail(__FILE__, __LINE__, "%s (%zu bytes): strict decode succeeded", what, len);
        pxvm_image_free(&img);
    } else {
        if (err.cls != PXVM_MALFORMED || (code && err.code != code))
            px_test_fail(__FILE__, __LINE__, "%s (%zu bytes): strict: %s", what, len, err.msg);
        if (!strstr(err.msg, name))
            px_test_fail(__FILE__, __LINE__, "%s: the message does not name the file: %s", what, err.msg);
    }
    int rc = pxvm_image_decode_any(d, len, name, &lenient, &img, &err);
    if (rc == 0) {
        if (!lenient_ok)
            px_test_fail(__FILE__, __LINE__, "%s (%zu bytes): lenient decode succeeded", what, len);
        if (err.code == PXE_NONE || err.cls != PXVM_MALFORMED || !strstr(err.msg, name))
            px_test_fail(__FILE__, __LINE__, "%s (%zu bytes): lenient: no warning recorded (%s)", what, len, err.msg);
        pxvm_image_free(&img);
    } else if (lenient_ok) {
        px_test_fail(__FILE__, __LINE__, "%s (%zu bytes): lenient: %s", what, len, err.msg);
    } else if (err.cls != PXVM_MALFORMED) {
        px_test_fail(__FILE__, __LINE__, "%s (%zu bytes): lenient: %s", what, len, err.msg);
    }
}

/* A whole file decodes in both modes, with no warning. */
static void px__clean(const uint8_t *d, size_t len, const char *what)
{
    for (uint32_t flags = 0; flags <= PXVM_DECODE_LENIENT; flags++) {
        pxvm_limits lim = px__lim(flags);
        pxvm_image img;
        pxvm_error err;
        if (pxvm_image_decode_any(d, len, what, &lim, &img, &err) < 0) {
            px_test_fail(__FILE__, __LINE__, "%s: %s", what, err.msg);
            continue;
        }
        CHECK_EQ(err.code, PXE_NONE);
        pxvm_image_free(&img);
    }
}

TEST(decode_limits_default_is_strict)
{
    pxvm_limits lim;
    memset(&lim, 0xff, sizeof lim);
    pxvm_limits_default(&lim);
    CHECK_EQ(lim.flags, 0);
}

TEST(decode_jpeg_truncated_anywhere_is_malformed)
{
    for (int progressive = 0; progressive < 2; progressive++) {
        size_t len;
        uint8_t *d = px__photo_jpeg(progressive, &len);
        CHECK(d != NULL);
        if (!d)
            return;
        px__clean(d, len, "photo.jpg");
        size_t sos = px__find_marker(d, len, 0xDA);
        CHECK(sos > 0);
        /* 30 cuts spread over the file, and the last byte or two (EOI) missing */
        for (int i = 1; i <= 32; i++) {
            size_t cut = i <= 30 ? len * (size_t)i / 31 : len - (size_t)(i - 30);
            /* lenient decodes what came before the cut once the first scan has begun (the
             * rest grey, as libjpeg does); a cut in the headers leaves nothing to decode */
            px__strict_lenient(d, cut, "photo.jpg", PXE_JPEG_CORRUPT, cut > sos + 20,
                               progressive ? "progressive JPEG cut" : "JPEG cut");
        }
        /* the message says truncated, and where */
        pxvm_limits lim = px__lim(0);
        pxvm_image img;
        pxvm_error err;
        CHECK(pxvm_image_decode_any(d, len / 2, "half.jpg", &lim, &img, &err) < 0);
        CHECK_STR(err.msg, "'half.jpg': corrupt or unsupported JPEG (truncated: the data ends at byte");
        /* lenient: the rows the data reached are the strict decode's; the missing ones are grey */
        if (!progressive) {
            pxvm_image full, part;
            pxvm_limits len_lim = px__lim(PXVM_DECODE_LENIENT);
            CHECK(pxvm_image_decode_any(d, len, "full.jpg", &lim, &full, &err) == 0);
            CHECK(pxvm_image_decode_any(d, len / 2, "half.jpg", &len_lim, &part, &err) == 0);
            CHECK_EQ(err.code, PXE_JPEG_CORRUPT);
            if (full.px && part.px) {
                CHECK(memcmp(full.px, part.px, (size_t)full.w * 4u * 16u) == 0);
                CHECK_EQ(px_px(&part, full.w - 1, full.h - 1), 0xff808080u);
            }
            pxvm_image_free(&full);
            pxvm_image_free(&part);
        }
        free(d);
    }
}

TEST(decode_jpeg_soi_alone_is_a_truncated_jpeg)
{
    const uint8_t soi[] = {0xFF, 0xD8, 0xFF};
    px__strict_lenient(soi, sizeof soi, "three.jpg", PXE_JPEG_CORRUPT, 0, "FF D8 FF");
    pxvm_limits lim = px__lim(PXVM_DECODE_LENIENT);
    pxvm_image img;
    pxvm_error err;
    CHECK(pxvm_image_decode_any(soi, sizeof soi, "three.jpg", &lim, &img, &err) < 0);
    CHECK_STR(err.msg, "'three.jpg': corrupt or unsupported JPEG (truncated: the data ends at byte 3, before the frame header");
    const uint8_t empty[] = {0xFF, 0xD8, 0xFF, 0xD9};
    px__strict_lenient(empty, sizeof empty, "empty.jpg", PXE_JPEG_CORRUPT, 0, "SOI EOI");
}

TEST(decode_jpeg_trailing_bytes_are_malformed)
{
    size_t len;
    uint8_t *d = px__photo_jpeg(0, &len);
    CHECK(d != NULL);
    if (!d)
        return;
    uint8_t *more = malloc(len + 64);
    memcpy(more, d, len);
    memcpy(more + len, "garbage after the end-of-image marker, 64 bytes of it..........", 64);
    px__strict_lenient(more, len + 64, "trailing.jpg", PXE_IMAGE_TRAILING, 1, "JPEG + garbage");
    pxvm_limits strict = px__lim(0), lenient = px__lim(PXVM_DECODE_LENIENT);
    pxvm_image a, b;
    pxvm_error err;
    CHECK(pxvm_image_decode_any(more, len + 1, "one.jpg", &strict, &a, &err) < 0);
    CHECK_STR(err.msg, "'one.jpg': 1 bytes after the JPEG's end-of-image marker, which ends at byte");
    /* lenient: the same pixels as the file without them */
    CHECK(pxvm_image_decode_any(d, len, "a.jpg", &strict, &a, &err) == 0);
    CHECK(pxvm_image_decode_any(more, len + 64, "b.jpg", &lenient, &b, &err) == 0);
    CHECK_EQ(err.code, PXE_IMAGE_TRAILING);
    CHECK(a.px && b.px && !memcmp(a.px, b.px, (size_t)a.w * (size_t)a.h * 4u));
    pxvm_image_free(&a);
    pxvm_image_free(&b);
    /* corrupt entropy-coded data (a libjpeg warning) */
    size_t sos = px__find_marker(d, len, 0xDA);
    for (size_t i = sos + 200; i < sos + 260; i++)
        more[i] = (uint8_t)(more[i] == 0xFF ? 0xFE : more[i] ^ 0x5A);
    px__strict_lenient(more, len, "corrupt.jpg", PXE_JPEG_CORRUPT, 1, "JPEG with corrupt data");
    free(more);
    free(d);
}

/* ---- PNG ------------------------------------------------------------------------------------ */

static void px__put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8), p[3] = (uint8_t)v;
}

TEST(decode_png_truncated_corrupt_or_trailing_is_malformed)
{
    uint8_t *d;
    size_t len;
    pxvm_error err;
    CHECK(pxvm_read_file("programs/data/chelsea.png", 1 << 24, &d, &len, &err) == 0);
    if (!d)
        return;
    px__clean(d, len, "chelsea.png");
    for (int i = 1; i <= 32; i++) {
        size_t cut = i <= 30 ? len * (size_t)i / 31 : len - (size_t)(i - 30);
        px__strict_lenient(d, cut, "chelsea.png", PXE_PNG_CORRUPT, 0, "PNG cut"); /* libpng cannot go on */
    }
    uint8_t *more = malloc(len + 100);
    memcpy(more, d, len);
    memset(more + len, 0, 100);
    px__strict_lenient(more, len + 100, "trailing.png", PXE_IMAGE_TRAILING, 1, "PNG + zeros");
    pxvm_limits strict = px__lim(0);
    pxvm_image img;
    CHECK(pxvm_png_decode(more, len + 3, "t.pxi", &strict, &img, &err) < 0); /* programs too */
    CHECK_STR(err.msg, "'t.pxi': 3 bytes after the PNG's IEND chunk, which ends at byte");
    /* the CRC of the first IDAT: a critical chunk, refused in both modes */
    memcpy(more, d, len);
    size_t idat = 8;
    while (idat + 12 <= len && memcmp(more + idat + 4, "IDAT", 4))
        idat += 12 + ((size_t)more[idat] << 24 | (size_t)more[idat + 1] << 16 | (size_t)more[idat + 2] << 8 | more[idat + 3]);
    CHECK(idat + 12 <= len);
    size_t crc_at = idat + 8 + ((size_t)more[idat] << 24 | (size_t)more[idat + 1] << 16 | (size_t)more[idat + 2] << 8 | more[idat + 3]);
    more[crc_at] ^= 0x01;
    px__strict_lenient(more, len, "crc.png", PXE_PNG_CORRUPT, 0, "IDAT CRC");
    /* an ancillary chunk with a bad CRC: libpng warns; strict refuses, lenient goes on */
    static const uint8_t text[] = "tEXtComment\0a comment whose CRC is wrong";
    uint32_t n = (uint32_t)sizeof text - 1 - 4;
    memcpy(more, d, 33); /* signature + IHDR */
    px__put32(more + 33, n);
    memcpy(more + 37, text, n + 4);
    px__put32(more + 41 + n, (uint32_t)crc32(0, text, n + 4) ^ 1u);
    size_t extra = 12 + n;
    uint8_t *big = malloc(len + extra);
    memcpy(big, more, 33 + extra);
    memcpy(big + 33 + extra, d + 33, len - 33);
    px__strict_lenient(big, len + extra, "text.png", PXE_PNG_CORRUPT, 1, "tEXt CRC");
    CHECK(pxvm_png_decode(big, len + extra, "text.png", &strict, &img, &err) < 0);
    CHECK_STR(err.msg, "'text.png': corrupt or truncated PNG (tEXt: CRC error)");
    /* with its CRC right, the chunk is skipped and the file is clean */
    px__put32(big + 41 + n, (uint32_t)crc32(0, text, n + 4));
    px__clean(big, len + extra, "text-ok.png");
    free(big);
    free(more);
    free(d);
}

/* ---- decode bombs, refused from the header ---------------------------------------------------- */

static double px__now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Decodes in a forked child whose address space is capped 256 MiB above what it has (not under
 * AddressSanitizer, which reserves terabytes): returns the error code the child saw (0: it
 * decoded; -1: it crashed or ran out of memory), and how long it took. */
static int px__decode_capped(const uint8_t *d, size_t len, const pxvm_limits *lim, const pxvm_image_want *want,
                             double *seconds)
{
    double t0 = px__now_s();
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
#ifndef __SANITIZE_ADDRESS__
        long pages = 0, page = sysconf(_SC_PAGESIZE);
        FILE *f = fopen("/proc/self/statm", "r");
        if (f && fscanf(f, "%ld", &pages) == 1) {
            struct rlimit rl = {(rlim_t)pages * (rlim_t)page + (256u << 20), (rlim_t)pages * (rlim_t)page + (256u << 20)};
            setrlimit(RLIMIT_AS, &rl);
        }
        if (f)
            fclose(f);
#endif
        alarm(20);
        pxvm_image img;
        pxvm_error err;
        memset(&err, 0, sizeof err);
        int rc = pxvm_image_decode_want(d, len, "bomb.jpg", lim, want, &img, &err);
        _exit(rc == 0 ? 0 : (int)err.code);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    *seconds = px__now_s() - t0;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* A small progressive (or sequential) JPEG whose frame header is patched to declare w x h. */
static uint8_t *px__jpeg_declaring(int w, int h, int progressive, size_t *len)
{
    uint8_t *d = px__small_jpeg(64, 64, progressive, len);
    size_t sof = d ? px__find_marker(d, *len, progressive ? 0xC2 : 0xC0) : 0;
    if (!sof) {
        free(d);
        return NULL;
    }
    d[sof + 5] = (uint8_t)(h >> 8), d[sof + 6] = (uint8_t)h;
    d[sof + 7] = (uint8_t)(w >> 8), d[sof + 8] = (uint8_t)w;
    return d;
}

TEST(decode_jpeg_bombs_refused_from_the_header)
{
    size_t len;
    uint8_t *d = px__jpeg_declaring(16384, 16384, 1, &len);
    CHECK(d != NULL && len < 1024);
    if (!d)
        return;
    for (uint32_t flags = 0; flags <= PXVM_DECODE_LENIENT; flags++) {
        pxvm_limits lim = px__lim(flags);
        double s;
        /* 1 GiB of pixels is within the default limit; with its 768 MiB of coefficients (4:2:0,
         * 2 bytes a sample) it is not */
        CHECK_EQ(px__decode_capped(d, len, &lim, NULL, &s), PXE_IMAGE_WORK);
        CHECK(s < 3.0);
    }
    pxvm_limits lim = px__lim(0);
    pxvm_image img;
    pxvm_error err;
    CHECK(pxvm_image_decode_any(d, len, "bomb.jpg", &lim, &img, &err) < 0);
    CHECK_EQ(err.cls, PXVM_INVALID);
    CHECK_STR(err.msg, "'bomb.jpg' is 16384x16384: decoding it needs ");
    CHECK_STR(err.msg, "(1073741824 of pixels, ");
    CHECK_STR(err.msg, "the limit is 1073741824 (see --max-memory)");
    free(d);
    d = px__jpeg_declaring(8192, 8192, 1, &len);
    lim.max_memory = 400u << 20; /* 256 MiB of pixels, 192 MiB of coefficients */
    CHECK(pxvm_image_decode_any(d, len, "p.jpg", &lim, &img, &err) < 0);
    CHECK_EQ(err.code, PXE_IMAGE_WORK);
    free(d);
    /* declared sequential, a picture needs no coefficient buffer: it passes the header and is
     * decoded until its data runs out (strict: an error), within the address-space cap */
    d = px__jpeg_declaring(4096, 4096, 0, &len);
    double s;
    CHECK_EQ(px__decode_capped(d, len, &lim, NULL, &s), PXE_JPEG_CORRUPT);
    free(d);
}

TEST(decode_jpeg_many_scans_refused_before_decoding)
{
    size_t len;
    uint8_t *d = px__small_jpeg(1024, 1024, 1, &len);
    CHECK(d != NULL);
    if (!d)
        return;
    /* the last scan (an AC refinement) repeated: 400 scans in total */
    size_t last = 0;
    for (size_t i = 0; i + 1 < len; i++)
        if (d[i] == 0xFF && d[i + 1] == 0xDA)
            last = i; /* FF DA cannot occur in entropy-coded data (FF is stuffed) */
    size_t scan = len - 2 - last, n = 0;
    uint8_t *many = malloc(len + 400 * scan);
    memcpy(many, d, len - 2);
    n = len - 2;
    for (int i = 0; i < 400; i++, n += scan)
        memcpy(many + n, d + last, scan);
    many[n++] = 0xFF, many[n++] = 0xD9;
    for (uint32_t flags = 0; flags <= PXVM_DECODE_LENIENT; flags++) {
        pxvm_limits lim = px__lim(flags);
        double s;
        CHECK_EQ(px__decode_capped(many, n, &lim, NULL, &s), PXE_JPEG_SCANS);
        CHECK(s < 3.0);
    }
    pxvm_limits lim = px__lim(0);
    pxvm_image img;
    pxvm_error err;
    CHECK(pxvm_image_decode_any(many, n, "scans.jpg", &lim, &img, &err) < 0);
    CHECK_EQ(err.cls, PXVM_INVALID);
    CHECK_STR(err.msg, "'scans.jpg' has more than 100 scans");
    free(many);
    free(d);
}

TEST(decode_want_refuses_another_size_from_the_header)
{
    /* a 1 MiB-ish PNG of 16384 x 16384 (one IDAT of compressed zeros) and a JPEG declaring it,
     * bound where a 451x300 image goes */
    uint8_t png[4096], *p = png;
    memcpy(p, "\x89PNG\r\n\x1a\n", 8);
    p += 8;
    uint8_t ihdr[4 + 4 + 13 + 4] = {0, 0, 0, 13, 'I', 'H', 'D', 'R'};
    px__put32(ihdr + 8, 16384), px__put32(ihdr + 12, 16384);
    ihdr[16] = 8, ihdr[17] = 2;
    px__put32(ihdr + 21, (uint32_t)crc32(0, ihdr + 4, 17));
    memcpy(p, ihdr, sizeof ihdr);
    p += sizeof ihdr;
    static uint8_t zeros[1 << 20];
    uint8_t z[2048];
    uLongf zl = sizeof z;
    compress2(z, &zl, zeros, sizeof zeros, 9);
    px__put32(p, (uint32_t)zl), memcpy(p + 4, "IDAT", 4), memcpy(p + 8, z, zl);
    px__put32(p + 8 + zl, (uint32_t)crc32(0, p + 4, (uInt)zl + 4));
    p += 12 + zl;
    memcpy(p, "\0\0\0\0IEND\xae\x42\x60\x82", 12);
    p += 12;
    pxvm_image_want want = {451, 300, 1, "image"};
    pxvm_limits lim = px__lim(0);
    double s;
    CHECK_EQ(px__decode_capped(png, (size_t)(p - png), &lim, &want, &s), PXE_INPUT_SIZE);
    CHECK(s < 3.0);
    pxvm_image img;
    pxvm_error err;
    CHECK(pxvm_image_decode_want(png, (size_t)(p - png), "big.png", &lim, &want, &img, &err) < 0);
    CHECK_EQ(err.cls, PXVM_UNLINKABLE);
    CHECK_STR(err.msg, "a 16384x16384 image cannot be bound to slot 1 ('image'), which is 451x300");
    size_t len;
    uint8_t *d = px__jpeg_declaring(16384, 16384, 0, &len);
    CHECK_EQ(px__decode_capped(d, len, &lim, &want, &s), PXE_INPUT_SIZE);
    free(d);
    /* the right size decodes as without a want */
    d = px__photo_jpeg(0, &len);
    CHECK(pxvm_image_decode_want(d, len, "photo.jpg", &lim, &want, &img, &err) == 0);
    CHECK(img.w == 451 && img.h == 300);
    pxvm_image_free(&img);
    free(d);
    CHECK(pxvm_image_load_want("programs/data/chelsea.png", &lim, &want, &img, &err) == 0);
    pxvm_image_free(&img);
    want.w = 452;
    CHECK(pxvm_image_load_want("programs/data/chelsea.png", &lim, &want, &img, &err) < 0);
    CHECK_STR(err.msg, "a 451x300 image cannot be bound to slot 1 ('image'), which is 452x300");
}
