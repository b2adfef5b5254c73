/* test_decode.c - the image decoders are strict: a truncated or corrupt PNG or JPEG is refused
 * as malformed (naming the file, and --lenient where that would decode it); PXVM_DECODE_LENIENT
 * decodes what it can and says what it went past. Bytes after a whole image (a JPEG's EOI, a
 * PNG's IEND: padding, a motion photo's MP4, an MPF second image, a newline) are read in both
 * modes and noted, and cannot hide a truncated image before them. Decode bombs (a tiny
 * progressive JPEG declaring 16384x16384, a JPEG of hundreds of scans, a PNG of another size than its slot) are refused from the header,
 * quickly and without allocating what they declare. */
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <turbojpeg.h>
#include <unistd.h>
#include <zlib.h>

#include "../../isa/px_sem.h"
#include "test.h"

static pxvm_limits px__lim(uint32_t flags)
{
    pxvm_limits lim;
    pxvm_limits_default(&lim);
    lim.flags = flags;
    return lim;
}

/* w x h pixels of 4 bytes (format pf: TJPF_RGBA, TJPF_CMYK...) compressed by libjpeg-turbo, as
 * malloc'd bytes (*len), or NULL (px NULL too). */
static uint8_t *px__tj_compress(const uint8_t *px, int w, int h, int pf, int samp, int quality, int flags, size_t *len)
{
    tjhandle tj = tjInitCompress();
    unsigned char *jpeg = NULL;
    unsigned long n = 0;
    int rc = px && tj ? tjCompress2(tj, px, w, w * 4, h, pf, &jpeg, &n, samp, quality, flags) : -1;
    uint8_t *out = rc == 0 ? malloc(n) : NULL;
    if (out)
        memcpy(out, jpeg, n);
    *len = out ? n : 0;
    tjFree(jpeg);
    if (tj)
        tjDestroy(tj);
    return out;
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
    uint8_t *out = px__tj_compress(photo.px, photo.w, photo.h, TJPF_RGBA, TJSAMP_420, 90,
                                   progressive ? TJFLAG_PROGRESSIVE : 0, len);
    pxvm_image_free(&photo);
    return out;
}

/* A grey vertical gradient compressed by libjpeg-turbo (64x64 progressive: 654 bytes). */
static uint8_t *px__small_jpeg(int w, int h, int progressive, size_t *len)
{
    uint8_t *px = malloc((size_t)w * (size_t)h * 4u);
    for (int i = 0; px && i < w * h * 4; i++)
        px[i] = (uint8_t)(i / (4 * w) * 4);
    uint8_t *out = px__tj_compress(px, w, h, TJPF_RGBA, TJSAMP_420, 75, progressive ? TJFLAG_PROGRESSIVE : 0, len);
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

/* What a strict refusal adds when PXVM_DECODE_LENIENT would decode the file (image.c). */
#define PX__LENIENT_HINT "; --lenient (Python: load_image(..., lenient=True)) decodes what is left of it"

/* Decodes in strict and lenient mode: strict must fail as malformed (with `code` unless 0),
 * naming --lenient exactly when lenient decodes it; lenient must fail too (lenient_ok 0) or
 * succeed with a warning of damage recorded (not the note of bytes after the end). */
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
        if (!strstr(err.msg, PX__LENIENT_HINT) != !lenient_ok)
            px_test_fail(__FILE__, __LINE__, "%s (%zu bytes): lenient %s, but the refusal %s --lenient: %s", what, len,
                         lenient_ok ? "decodes it" : "refuses it too", lenient_ok ? "does not name" : "names", err.msg);
    }
    int rc = pxvm_image_decode_any(d, len, name, &lenient, &img, &err);
    if (rc == 0) {
        if (!lenient_ok)
            px_test_fail(__FILE__, __LINE__, "%s (%zu bytes): lenient decode succeeded", what, len);
        if (err.code == PXE_NONE || pxvm_decode_note(&err) || err.cls != PXVM_MALFORMED || !strstr(err.msg, name))
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

/* What phones and cameras put after an image's end: a trailer made in the test (no download). */
typedef enum { PX_TAIL_ZEROS, PX_TAIL_MP4, PX_TAIL_JPEG, PX_TAIL_NEWLINE, PX_TAIL_FAKE_EOI, PX_TAILS } px_tail;
static const char *const px__tail_names[PX_TAILS] = {"23299 zero bytes (Debian's Wood.jpg)", "an MP4 (motion photo)",
                                                     "a second JPEG (MPF)", "a newline", "zeros, FF D9, zeros"};

/* Trailer `t` (malloc'ed, its length in *n). */
static uint8_t *px__tail(px_tail t, size_t *n)
{
    uint8_t *b = NULL;
    *n = 0;
    if (t == PX_TAIL_ZEROS || t == PX_TAIL_FAKE_EOI) {
        *n = 23299;
        b = calloc(*n, 1);
        if (b && t == PX_TAIL_FAKE_EOI)
            b[1000] = 0xFF, b[1001] = 0xD9;
    } else if (t == PX_TAIL_MP4) { /* an 'ftyp' box, then an 'mdat' box of 4000 bytes of (fake) video */
        static const uint8_t ftyp[] = {0, 0, 0, 0x18, 'f', 't', 'y', 'p', 'm', 'p', '4', '2', 0, 0, 0, 0,
                                       'm', 'p', '4', '2', 'i', 's', 'o', 'm', 0, 0, 0x0f, 0xa8, 'm', 'd', 'a', 't'};
        *n = sizeof ftyp + 4000 - 8;
        b = malloc(*n);
        if (b) {
            memcpy(b, ftyp, sizeof ftyp);
            for (size_t i = sizeof ftyp; i < *n; i++)
                b[i] = (uint8_t)(i * 2654435761u >> 13); /* every byte value, FF D8 and FF D9 among them */
        }
    } else if (t == PX_TAIL_JPEG) {
        b = px__small_jpeg(64, 48, 0, n);
    } else if (t == PX_TAIL_NEWLINE) {
        *n = 1;
        b = malloc(1);
        if (b)
            b[0] = '\n';
    }
    return b;
}

/* a + b, malloc'ed */
static uint8_t *px__cat(const uint8_t *a, size_t na, const uint8_t *b, size_t nb)
{
    uint8_t *c = malloc(na + nb + 1);
    if (c) {
        memcpy(c, a, na);
        memcpy(c + na, b, nb);
    }
    return c;
}

/* The whole image `d` followed by `tail`: read in both modes to the pixels of `d` alone, with
 * the note (not a warning) that names the file, the bytes and where the image ends. */
static void px__reads_past_the_end(const uint8_t *d, size_t len, const uint8_t *tail, size_t n, const char *name,
                                   const char *marker, const char *what)
{
    pxvm_limits strict = px__lim(0);
    pxvm_image whole, img;
    pxvm_error err;
    if (pxvm_image_decode_any(d, len, name, &strict, &whole, &err) < 0) {
        px_test_fail(__FILE__, __LINE__, "%s: %s", what, err.msg);
        return;
    }
    CHECK_EQ(err.code, PXE_NONE);
    uint8_t *more = px__cat(d, len, tail, n);
    char note[300];
    snprintf(note, sizeof note, "'%s': %zu bytes after the %s (which ends at byte %zu) ignored", name, n, marker, len);
    for (uint32_t flags = 0; more && flags <= PXVM_DECODE_LENIENT; flags++) {
        pxvm_limits lim = px__lim(flags);
        if (pxvm_image_decode_any(more, len + n, name, &lim, &img, &err) < 0) {
            px_test_fail(__FILE__, __LINE__, "%s + %s (%s): refused: %s", name, what, flags ? "lenient" : "strict",
                         err.msg);
            continue;
        }
        CHECK_EQ(err.code, PXE_IMAGE_TRAILING);
        CHECK(pxvm_decode_note(&err));
        CHECK_STR(err.msg, note);
        CHECK(img.w == whole.w && img.h == whole.h && !memcmp(img.px, whole.px, (size_t)img.w * (size_t)img.h * 4u));
        pxvm_image_free(&img);
    }
    free(more);
    pxvm_image_free(&whole);
}

TEST(decode_jpeg_bytes_after_eoi_are_read_and_noted)
{
    for (int progressive = 0; progressive < 2; progressive++) {
        size_t len;
        uint8_t *d = px__photo_jpeg(progressive, &len);
        CHECK(d != NULL);
        for (int t = 0; d && t < PX_TAILS; t++) {
            size_t n;
            uint8_t *tail = px__tail((px_tail)t, &n);
            CHECK(tail != NULL);
            if (tail)
                px__reads_past_the_end(d, len, tail, n, "photo.jpg", "JPEG's end-of-image marker", px__tail_names[t]);
            free(tail);
        }
        /* the edge: the file ending at EOI is clean, one byte more is noted (above: a newline) */
        if (d)
            px__clean(d, len, "photo.jpg");
        free(d);
    }
}

/* A JPEG cut inside its entropy-coded data, then a trailer: still truncated, refused. */
TEST(decode_jpeg_bytes_after_the_cut_cannot_hide_truncation)
{
    for (int progressive = 0; progressive < 2; progressive++) {
        size_t len;
        uint8_t *d = px__photo_jpeg(progressive, &len);
        CHECK(d != NULL);
        if (!d)
            return;
        size_t sos = px__find_marker(d, len, 0xDA);
        const size_t cuts[] = {sos + 300, len / 2, len * 9 / 10, len - 3};
        for (size_t c = 0; c < sizeof cuts / sizeof cuts[0]; c++)
            for (int t = 0; t < PX_TAILS; t++) {
                size_t n;
                uint8_t *tail = px__tail((px_tail)t, &n), *cut = tail ? px__cat(d, cuts[c], tail, n) : NULL;
                pxvm_limits strict = px__lim(0), lenient = px__lim(PXVM_DECODE_LENIENT);
                pxvm_image img;
                pxvm_error err;
                if (cut && pxvm_image_decode_any(cut, cuts[c] + n, "cut.jpg", &strict, &img, &err) == 0) {
                    px_test_fail(__FILE__, __LINE__, "%s JPEG cut at %zu of %zu + %s: decoded",
                                 progressive ? "progressive" : "sequential", cuts[c], len, px__tail_names[t]);
                    pxvm_image_free(&img);
                } else if (cut && (err.code != PXE_JPEG_CORRUPT || !strstr(err.msg, "'cut.jpg'"))) {
                    px_test_fail(__FILE__, __LINE__, "cut at %zu + %s: %s", cuts[c], px__tail_names[t], err.msg);
                }
                /* lenient: decoded as damage (a warning), never as a whole image with a trailer */
                if (cut && pxvm_image_decode_any(cut, cuts[c] + n, "cut.jpg", &lenient, &img, &err) == 0) {
                    if (err.code != PXE_JPEG_CORRUPT)
                        px_test_fail(__FILE__, __LINE__, "cut at %zu + %s: lenient: %s", cuts[c], px__tail_names[t],
                                     err.code == PXE_NONE ? "no warning" : err.msg);
                    pxvm_image_free(&img);
                }
                free(cut);
                free(tail);
            }
        /* cut alone: says truncated, and how to decode it anyway */
        pxvm_limits strict = px__lim(0);
        pxvm_image img;
        pxvm_error err;
        CHECK(pxvm_image_decode_any(d, len / 2, "half.jpg", &strict, &img, &err) < 0);
        CHECK_STR(err.msg, "'half.jpg': corrupt or unsupported JPEG (truncated: the data ends at byte");
        CHECK_STR(err.msg, PX__LENIENT_HINT);
        free(d);
    }
}

/* Damage inside the image and bytes after it: strict refuses the damage (naming --lenient);
 * lenient warns of the damage, not the note. */
TEST(decode_jpeg_corrupt_data_then_a_trailer_is_damage)
{
    size_t len, n;
    uint8_t *d = px__photo_jpeg(0, &len), *tail = px__tail(PX_TAIL_MP4, &n);
    uint8_t *more = d && tail ? px__cat(d, len, tail, n) : NULL;
    CHECK(more != NULL);
    if (more) {
        size_t sos = px__find_marker(d, len, 0xDA);
        for (size_t i = sos + 200; i < sos + 260; i++)
            more[i] = (uint8_t)(more[i] == 0xFF ? 0xFE : more[i] ^ 0x5A);
        px__strict_lenient(more, len, "corrupt.jpg", PXE_JPEG_CORRUPT, 1, "JPEG with corrupt data");
        px__strict_lenient(more, len + n, "corrupt.jpg", PXE_JPEG_CORRUPT, 1, "JPEG with corrupt data + an MP4");
        pxvm_limits lenient = px__lim(PXVM_DECODE_LENIENT);
        pxvm_image img;
        pxvm_error err;
        CHECK(pxvm_image_decode_any(more, len + n, "corrupt.jpg", &lenient, &img, &err) == 0);
        CHECK_EQ(err.code, PXE_JPEG_CORRUPT);
        CHECK_STR(err.msg, "'corrupt.jpg': corrupt or unsupported JPEG (Corrupt JPEG data");
        pxvm_image_free(&img);
    }
    free(more);
    free(tail);
    free(d);
}

/* Junk between the header's segments: libjpeg-turbo warns while reading the header. Strict
 * refuses it naming --lenient, so lenient decodes it (fuzz_jpeg, 2026-11-28: lenient refused it
 * too, as the header call fails on a warning; the fuzzer's input is in tests/fuzz/regressions/). */
TEST(decode_jpeg_junk_between_header_segments_is_damage_lenient_decodes)
{
    size_t len;
    uint8_t *d = px__photo_jpeg(0, &len);
    CHECK(d != NULL);
    if (!d)
        return;
    size_t sof = px__find_marker(d, len, 0xC0), junk = 160;
    CHECK(sof > 0);
    uint8_t *more = malloc(len + junk);
    memcpy(more, d, sof);
    memset(more + sof, 0x32, junk);
    memcpy(more + sof + junk, d + sof, len - sof);
    px__strict_lenient(more, len + junk, "junk.jpg", PXE_JPEG_CORRUPT, 1, "junk before SOF");
    pxvm_limits strict = px__lim(0), lenient = px__lim(PXVM_DECODE_LENIENT);
    pxvm_image a, b;
    pxvm_error err;
    CHECK(pxvm_image_decode_any(more, len + junk, "junk.jpg", &strict, &a, &err) < 0);
    CHECK_STR(err.msg, "'junk.jpg': corrupt or unsupported JPEG (160 bytes that are no marker at byte");
    CHECK(pxvm_image_decode_any(d, len, "whole.jpg", &strict, &a, &err) == 0);
    CHECK(pxvm_image_decode_any(more, len + junk, "junk.jpg", &lenient, &b, &err) == 0);
    CHECK(a.px && b.px && !memcmp(a.px, b.px, (size_t)a.w * (size_t)a.h * 4u)); /* the junk skipped */
    pxvm_image_free(&a);
    pxvm_image_free(&b);
    free(more);
    uint8_t *f;
    size_t n;
    CHECK(pxvm_read_file("tests/fuzz/regressions/jpeg-junk-between-header-segments.jpg", 1 << 20, &f, &n, &err) == 0);
    if (f) {
        pxvm_limits small = px__lim(PXVM_DECODE_LENIENT);
        small.max_side = 1024, small.max_memory = 16u << 20; /* fuzz_jpeg's limits */
        CHECK(pxvm_image_decode_any(f, n, "fuzz.jpg", &small, &b, &err) == 0);
        CHECK_EQ(err.code, PXE_JPEG_CORRUPT);
        pxvm_image_free(&b);
    }
    free(f);
    free(d);
}

/* The same junk, and a Huffman table libjpeg-turbo cannot use (a fatal error, after it): strict
 * refuses at the junk, but lenient would refuse too, so the refusal does not name --lenient
 * (fuzz_jpeg, 2026-11-28: it did; the fuzzer's input is in tests/fuzz/regressions/). */
TEST(decode_jpeg_refusal_names_lenient_only_when_lenient_decodes)
{
    size_t len;
    uint8_t *d = px__photo_jpeg(0, &len);
    CHECK(d != NULL);
    if (!d)
        return;
    size_t sof = px__find_marker(d, len, 0xC0), dht = px__find_marker(d, len, 0xC4), junk = 34;
    CHECK(sof > 0 && dht > sof);
    uint8_t *more = malloc(len + junk);
    memcpy(more, d, sof);
    memset(more + sof, 0x32, junk);
    memcpy(more + sof + junk, d + sof, len - sof);
    memset(more + dht + junk + 5, 0xFF, 16); /* its 16 code counts: 4080 codes */
    px__strict_lenient(more, len + junk, "bogus.jpg", PXE_JPEG_CORRUPT, 0, "junk, then a bogus DHT");
    pxvm_limits lenient = px__lim(PXVM_DECODE_LENIENT);
    pxvm_image img;
    pxvm_error err;
    CHECK(pxvm_image_decode_any(more, len + junk, "bogus.jpg", &lenient, &img, &err) < 0);
    CHECK_STR(err.msg, "'bogus.jpg': corrupt or unsupported JPEG (Bogus Huffman table definition)");
    free(more);
    uint8_t *f;
    size_t n;
    CHECK(pxvm_read_file("tests/fuzz/regressions/jpeg-junk-then-bogus-huffman-table.jpg", 1 << 20, &f, &n, &err) == 0);
    if (f)
        px__strict_lenient(f, n, "fuzz.jpg", PXE_JPEG_CORRUPT, 0, "the fuzzer's input");
    free(f);
    free(d);
}

/* ---- PNG ------------------------------------------------------------------------------------ */

static void px__put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8), p[3] = (uint8_t)v;
}

TEST(decode_png_truncated_or_corrupt_is_malformed)
{
    uint8_t *d;
    size_t len;
    pxvm_error err;
    CHECK(pxvm_read_file("programs/data/chelsea.png", 1 << 24, &d, &len, &err) == 0);
    if (!d)
        return;
    px__clean(d, len, "chelsea.png");
    /* a cut inside the image data: lenient keeps the rows that arrived (tests/python/
     * test_png_truncated.py: == Pillow's LOAD_TRUNCATED_IMAGES); inside IEND: the image is whole */
    for (int i = 1; i <= 32; i++) {
        size_t cut = i <= 30 ? len * (size_t)i / 31 : len - (size_t)(i - 30);
        px__strict_lenient(d, cut, "chelsea.png", PXE_PNG_CORRUPT, 1, "PNG cut");
    }
    /* the edge: the first IDAT chunk's length and type whole (its rows zero), or one byte short
     * (no image data begun: refused in both modes) */
    size_t first = 8;
    while (first + 12 <= len && memcmp(d + first + 4, "IDAT", 4))
        first += 12 + ((size_t)d[first] << 24 | (size_t)d[first + 1] << 16 | (size_t)d[first + 2] << 8 | d[first + 3]);
    CHECK(first + 12 <= len);
    px__strict_lenient(d, first + 7, "chelsea.png", PXE_PNG_CORRUPT, 0, "PNG cut in the first IDAT's header");
    px__strict_lenient(d, first + 8, "chelsea.png", PXE_PNG_CORRUPT, 1, "PNG cut after the first IDAT's header");
    uint8_t *more = malloc(len + 100);
    pxvm_limits strict = px__lim(0);
    pxvm_image img;
    CHECK(pxvm_png_decode(d, len - 1, "cut.png", &strict, &img, &err) < 0); /* the last byte of IEND's CRC */
    CHECK_STR(err.msg, "'cut.png': corrupt or truncated PNG (truncated: the data ends at byte");
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
    CHECK_STR(err.msg, "'text.png': corrupt or truncated PNG (tEXt: CRC error)" PX__LENIENT_HINT);
    /* with its CRC right, the chunk is skipped and the file is clean */
    px__put32(big + 41 + n, (uint32_t)crc32(0, text, n + 4));
    px__clean(big, len + extra, "text-ok.png");
    free(big);
    free(more);
    free(d);
}

/* A PNG chunk at p: length, type, data, CRC; returns the bytes written. */
static size_t px__chunk(uint8_t *p, const char *type, const uint8_t *data, size_t n)
{
    px__put32(p, (uint32_t)n);
    memcpy(p + 4, type, 4);
    if (n)
        memcpy(p + 8, data, n);
    px__put32(p + 8 + n, (uint32_t)crc32(0, p + 4, (uInt)(n + 4)));
    return 12 + n;
}

/* chelsea.png with its image data cut to `keep` of its bytes, in one IDAT whose length and CRC are
 * right, then IEND: every chunk whole, the image short. */
static uint8_t *px__png_short_idat(const uint8_t *d, size_t len, double keep, size_t *out_len)
{
    uint8_t *idat = malloc(len), *out = malloc(len + 64);
    size_t n = 0, pos = 8;
    while (idat && pos + 12 <= len) {
        size_t k = (size_t)d[pos] << 24 | (size_t)d[pos + 1] << 16 | (size_t)d[pos + 2] << 8 | d[pos + 3];
        if (!memcmp(d + pos + 4, "IDAT", 4))
            memcpy(idat + n, d + pos + 8, k), n += k;
        pos += 12 + k;
    }
    *out_len = 0;
    if (idat && out) {
        memcpy(out, d, 33); /* signature + IHDR */
        *out_len = 33 + px__chunk(out + 33, "IDAT", idat, (size_t)((double)n * keep));
        *out_len += px__chunk(out + *out_len, "IEND", NULL, 0);
    }
    free(idat);
    return out;
}

TEST(decode_png_bytes_after_iend_are_read_and_noted)
{
    uint8_t *d, *second;
    size_t len, len2;
    pxvm_error err;
    CHECK(pxvm_read_file("programs/data/chelsea.png", 1 << 24, &d, &len, &err) == 0);
    CHECK(pxvm_read_file("programs/pyramid.pxi", 1 << 24, &second, &len2, &err) == 0);
    if (!d || !second)
        return;
    for (int t = 0; t < PX_TAILS; t++) {
        size_t n;
        uint8_t *tail = px__tail((px_tail)t, &n);
        if (tail)
            px__reads_past_the_end(d, len, tail, n, "chelsea.png", "PNG's IEND chunk", px__tail_names[t]);
        free(tail);
    }
    px__reads_past_the_end(d, len, second, len2, "chelsea.png", "PNG's IEND chunk", "a second PNG");
    px__clean(d, len, "chelsea.png"); /* the edge: ending at IEND is clean, a newline more noted (above) */
    /* a program (.pxi) with a newline after IEND loads: the note, then the same program */
    uint8_t *nl = px__cat(second, len2, (const uint8_t *)"\n", 1);
    pxvm_limits lim = px__lim(0);
    pxvm_image img;
    pxvm_program prog;
    CHECK(nl && pxvm_png_decode(nl, len2 + 1, "pyramid.pxi", &lim, &img, &err) == 0);
    CHECK_EQ(err.code, PXE_IMAGE_TRAILING);
    CHECK_STR(err.msg, "'pyramid.pxi': 1 bytes after the PNG's IEND chunk");
    if (nl && err.code == PXE_IMAGE_TRAILING) {
        CHECK(pxvm_program_from_image(&img, &lim, &prog, &err) == 0);
        pxvm_program_free(&prog);
    }
    free(nl);
    free(second);
    free(d);
}

/* An IDAT cut short (every chunk whole), IEND, then bytes: the image is short, refused in both
 * modes (libpng cannot go on), whatever follows IEND. */
TEST(decode_png_short_idat_then_iend_then_bytes_is_malformed)
{
    uint8_t *d;
    size_t len;
    pxvm_error err;
    CHECK(pxvm_read_file("programs/data/chelsea.png", 1 << 24, &d, &len, &err) == 0);
    if (!d)
        return;
    size_t slen;
    uint8_t *shortened = px__png_short_idat(d, len, 0.5, &slen);
    CHECK(shortened && slen > 100);
    for (int t = 0; shortened && t < PX_TAILS; t++) {
        size_t n;
        uint8_t *tail = px__tail((px_tail)t, &n), *more = tail ? px__cat(shortened, slen, tail, n) : NULL;
        if (more)
            px__strict_lenient(more, slen + n, "short.png", PXE_PNG_CORRUPT, 0, px__tail_names[t]);
        free(more);
        free(tail);
    }
    /* the same construction keeping every byte is a whole image: its trailer is noted */
    size_t wlen, n;
    uint8_t *whole = px__png_short_idat(d, len, 1.0, &wlen), *tail = px__tail(PX_TAIL_MP4, &n);
    if (whole && tail)
        px__reads_past_the_end(whole, wlen, tail, n, "whole.png", "PNG's IEND chunk", "an MP4");
    pxvm_limits strict = px__lim(0);
    pxvm_image img;
    CHECK(shortened && pxvm_image_decode_any(shortened, slen, "short.png", &strict, &img, &err) < 0);
    CHECK_STR(err.msg, "'short.png': corrupt or truncated PNG (Not enough image data)");
    free(tail);
    free(whole);
    free(shortened);
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

/* A PNG whose image data is whole but whose IEND is missing or damaged (Pillow opens it): strict
 * refuses it saying --lenient decodes it, and lenient gives the whole image with a warning; an
 * IDAT cut short is still refused in both modes (the test above). */
TEST(decode_png_whole_image_without_a_good_iend_is_lenient_only)
{
    uint8_t *d;
    size_t len;
    pxvm_error err;
    CHECK(pxvm_read_file("programs/data/chelsea.png", 1 << 24, &d, &len, &err) == 0);
    if (!d)
        return;
    pxvm_limits strict = px__lim(0), lenient = px__lim(PXVM_DECODE_LENIENT);
    pxvm_image full, img;
    CHECK(pxvm_png_decode(d, len, "chelsea.png", &strict, &full, &err) == 0);
    uint8_t *bad_crc = px__cat(d, len - 4, (const uint8_t *)"\0\0\0\0", 4);
    const struct {
        const uint8_t *data;
        size_t len;
        const char *what;
    } cases[] = {{d, len - 12, "no IEND"}, {bad_crc, len, "IEND's CRC"}};
    for (int c = 0; c < 2; c++) {
        CHECK(pxvm_png_decode(cases[c].data, cases[c].len, "chelsea.png", &strict, &img, &err) < 0);
        CHECK_STR(err.msg, "--lenient (Python: load_image(..., lenient=True)) decodes what is left of it");
        CHECK(pxvm_png_decode(cases[c].data, cases[c].len, "chelsea.png", &lenient, &img, &err) == 0);
        CHECK_EQ(err.code, PXE_PNG_CORRUPT);
        CHECK_STR(err.msg, "after the whole image data");
        CHECK(img.w == full.w && img.h == full.h && !memcmp(img.px, full.px, (size_t)full.w * full.h * 4));
        if (err.code != PXE_PNG_CORRUPT)
            printf("  %s: %s\n", cases[c].what, err.msg);
        pxvm_image_free(&img);
    }
    pxvm_image_free(&full);
    free(bad_crc);
    free(d);
}

/* ---- four-component JPEGs: CMYK and YCCK to RGB by Pillow's rule ---------------------------- */

/* Pillow's own form of the rule (src/libImaging/Convert.c, cmyk2rgb, after its "CMYK;I" unpacker
 * inverts libjpeg's samples): nk - MULDIV255(C, nk), clipped, C = 255 - v, nk = 255 - (255 - k). */
static uint32_t px__pillow_cmyk(uint32_t v, uint32_t k)
{
    int nk = 255 - (255 - (int)k), c = 255 - (int)v, tmp = c * nk + 128;
    int r = nk - (((tmp >> 8) + tmp) >> 8);
    return (uint32_t)(r < 0 ? 0 : r > 255 ? 255 : r);
}

/* SPEC's integer division equals Pillow's MULDIV255 for every sample and black, and rounds each
 * way at its edge: ink 1 of black 127 is 127/255 = 0.498 (rounds down: 127 stays) and of black
 * 128 is 0.502 (rounds up: 128 - 1 = 127). */
TEST(decode_cmyk_channel_is_pillows_rule_for_every_pair)
{
    int differ = 0;
    for (uint32_t v = 0; v < 256; v++)
        for (uint32_t k = 0; k < 256; k++)
            differ += px_cmyk_channel(v, k) != px__pillow_cmyk(v, k);
    CHECK_EQ(differ, 0);
    CHECK_EQ(px_cmyk_channel(254, 127), 127u);
    CHECK_EQ(px_cmyk_channel(254, 128), 127u);
    CHECK_EQ(px_cmyk_channel(255, 200), 200u); /* no ink: black alone */
    CHECK_EQ(px_cmyk_channel(0, 255), 0u);     /* full ink */
}

/* A w x h four-component JPEG from libjpeg-turbo (a YCCK one: what tjCompress2 writes from CMYK
 * pixels) of a smooth pattern, and the CMYK samples libjpeg-turbo decodes from it. */
static uint8_t *px__ycck_jpeg(int w, int h, int samp, int flags, size_t *len, uint8_t **cmyk)
{
    uint8_t *px = malloc((size_t)w * (size_t)h * 4u);
    for (int y = 0; px && y < h; y++)
        for (int x = 0; x < w; x++) {
            uint8_t *p = px + ((size_t)y * (size_t)w + (size_t)x) * 4u;
            p[0] = (uint8_t)(x * 255 / (w > 1 ? w - 1 : 1)), p[1] = (uint8_t)(y * 255 / (h > 1 ? h - 1 : 1));
            p[2] = (uint8_t)((x + y) * 3), p[3] = (uint8_t)(255 - (x * y) % 256);
        }
    uint8_t *out = px__tj_compress(px, w, h, TJPF_CMYK, samp, 90, flags, len);
    free(px);
    tjhandle td = tjInitDecompress();
    *cmyk = malloc((size_t)w * (size_t)h * 4u);
    if (!out || !td || !*cmyk || tjDecompress2(td, out, (unsigned long)*len, *cmyk, w, w * 4, h, TJPF_CMYK, 0) != 0) {
        free(out);
        out = NULL;
        *len = 0;
    }
    if (td)
        tjDestroy(td);
    return out;
}

/* A YCCK JPEG (baseline 4:4:4, 4:2:0, progressive; 1x1 and odd sides) decodes, strict, to the rule
 * applied to libjpeg-turbo's CMYK samples, A = 255 (it used to be refused: Pillow and browsers
 * open such files); its EXIF-free orientation and its sides are the file's. */
TEST(decode_jpeg_ycck_becomes_rgb_by_pillows_rule)
{
    static const struct { int w, h, samp, flags; } cases[] = {
        {32, 24, TJSAMP_444, 0}, {33, 17, TJSAMP_420, 0}, {45, 31, TJSAMP_420, TJFLAG_PROGRESSIVE}, {1, 1, TJSAMP_444, 0}};
    pxvm_limits lim = px__lim(0);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        size_t len;
        uint8_t *cmyk = NULL;
        uint8_t *jpeg = px__ycck_jpeg(cases[c].w, cases[c].h, cases[c].samp, cases[c].flags, &len, &cmyk);
        CHECK(jpeg != NULL);
        pxvm_image img;
        pxvm_error err;
        if (jpeg && pxvm_jpeg_decode(jpeg, len, "ycck.jpg", &lim, &img, &err) == 0) {
            CHECK_EQ(img.w, cases[c].w);
            CHECK_EQ(img.h, cases[c].h);
            int differ = 0, kvaries = 0;
            for (size_t i = 0; img.w == cases[c].w && img.h == cases[c].h && i < (size_t)img.w * (size_t)img.h * 4u; i += 4) {
                for (int ch = 0; ch < 3; ch++)
                    differ += img.px[i + (size_t)ch] != px__pillow_cmyk(cmyk[i + (size_t)ch], cmyk[i + 3]);
                differ += img.px[i + 3] != 255;
                kvaries += cmyk[i + 3] != cmyk[3];
            }
            CHECK_EQ(differ, 0);
            CHECK(cases[c].w * cases[c].h == 1 || kvaries > 0); /* black matters in these pixels */
            pxvm_image_free(&img);
        } else if (jpeg) {
            px_test_fail(__FILE__, __LINE__, "case %zu: %s", c, err.msg);
        }
        free(jpeg);
        free(cmyk);
    }
}
