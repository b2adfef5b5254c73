/* jpeg.c - JPEG decode through libjpeg-turbo: the markers walked first (structure, scan count,
 * the decoder's memory, all from the header), then strict decoding (any libjpeg warning is
 * malformed; PXVM_DECODE_LENIENT keeps it as a warning); bytes after EOI (a motion photo's video,
 * an MPF file's second image, padding) accepted and noted once the image decoded whole. */
#include "image_codec.h"
#include "../isa/px_sem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <turbojpeg.h>

/* ---- JPEG decode (libjpeg-turbo) ---------------------------------------------------------------- */

/* What a JPEG's markers say, read before libjpeg-turbo sees the data: the frame header (sides,
 * components, sampling), the scans (SOS markers, counted past their entropy-coded data the way
 * libjpeg finds markers), where the end-of-image marker is. `fatal`: no image can come out of it
 * (libjpeg would stop too); `problem`: damage a lenient decode goes past (the data ends early,
 * bytes between markers). What follows EOI is not walked: it is no part of the image. */
typedef struct px__jpeg_info {
    int sof, progressive, w, h, ncomp, hs[4], vs[4], hmax, vmax;
    int scans, first_scan_comps;
    size_t end; /* just past EOI; 0: no EOI */
    size_t exif, exif_len; /* the first APP1 "Exif\0\0" segment's TIFF block (Pillow reads the first) */
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
        if (m == 0xE1 && !ji->exif_len && n > 6 && !memcmp(p, "Exif\0\0", 6)) { /* APP1 Exif */
            ji->exif = (size_t)(p - d) + 6;
            ji->exif_len = (size_t)n - 6;
        }
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

int px_jpeg_decode_want(const uint8_t *data, size_t len, const char *name, const pxvm_limits *lim,
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
        return (pxvm_fail)(err, ji.fatal, -1, -1, name, ji.why); /* a code kept by the walk */
    if (ji.scans > PXVM_JPEG_MAX_SCANS)
        return pxvm_fail(err, PXE_JPEG_SCANS, -1, -1, name, (unsigned)PXVM_JPEG_MAX_SCANS);
    /* sides and memory from the frame header, before libjpeg-turbo allocates anything (the size
     * checked is the oriented one, with the turn's buffer, when the EXIF orientation is applied) */
    int orientation = (lim->flags & PXVM_DECODE_EXIF_TRANSPOSE) ? px_exif_orientation(data + ji.exif, ji.exif_len) : 1;
    unsigned long ow = (unsigned long)ji.w, oh = (unsigned long)ji.h;
    unsigned long long turn = px_image_orient_plan(lim, orientation, &ow, &oh);
    if (px_image_check_size(name, lim, want, ow, oh, px__jpeg_work(&ji) + turn, err) < 0)
        return -1;
    if (ji.problem && strict)
        return px_image_damaged(err, ji.problem, name, ji.problem_why);
    if (ji.problem)
        PX__WENT_PAST(err, ji.problem, -1, -1, name, ji.problem_why);
    tjhandle tj = tjInitDecompress();
    if (!tj)
        return pxvm_fail(err, PXE_NOMEM, -1, -1, 0ull);
    int w = 0, h = 0, subsamp = 0, colorspace = 0;
    char why[200];
    /* A warning while reading the header (junk between its segments) fails the call but leaves
     * the header read (the sides are the walk's): damage, which lenient goes past as it does
     * while decoding. */
    int header = tjDecompressHeader3(tj, data, (unsigned long)len, &w, &h, &subsamp, &colorspace);
    /* Sampling factors that no TJSAMP_* names (Pillow's 4:2:0 CMYK: C 2x2, M, Y and K 1x1) fail
     * the call after the whole header is read: the sides and colour space are set, and
     * tjDecompress2 decodes any factors the walk allows (as libjpeg does for Pillow). */
    if (header != 0 && subsamp < 0 && w == ji.w && h == ji.h)
        header = 0;
    int sides = w == ji.w && h == ji.h, warned = header != 0 && sides && tjGetErrorCode(tj) == TJERR_WARNING;
    if (header != 0 || !sides) {
        snprintf(why, sizeof why, "%s", header != 0 ? tjGetErrorStr2(tj) : "the header does not decode");
        if (strict || !warned) {
            tjDestroy(tj);
            return warned ? px_image_damaged(err, PXE_JPEG_CORRUPT, name, why)
                          : pxvm_fail(err, PXE_JPEG_CORRUPT, -1, -1, name, why);
        }
        PX__WENT_PAST(err, PXE_JPEG_CORRUPT, -1, -1, name, why);
    }
    int cmyk = colorspace == TJCS_CMYK || colorspace == TJCS_YCCK; /* to RGB by Pillow's rule, below */
    if (pxvm_image_alloc(img, w, h, err) < 0) {
        tjDestroy(tj);
        return -1;
    }
    /* the library's default, accurate integer IDCT and fancy upsampling: one decoder on the host
     * for both executors, so the same file gives the same pixels everywhere pxvm runs. Strict: any
     * warning of libjpeg's (corrupt data, premature end of data) stops the decode. */
    int flags = TJFLAG_LIMITSCANS | (strict ? TJFLAG_STOPONWARNING : 0);
    if (tjDecompress2(tj, data, (unsigned long)len, img->px, w, w * 4, h, cmyk ? TJPF_CMYK : TJPF_RGBA, flags) != 0) {
        snprintf(why, sizeof why, "%s", tjGetErrorStr2(tj));
        int fatal = tjGetErrorCode(tj) == TJERR_FATAL;
        if (strict || fatal) {
            tjDestroy(tj);
            pxvm_image_free(img);
            return fatal ? pxvm_fail(err, PXE_JPEG_CORRUPT, -1, -1, name, why)
                         : px_image_damaged(err, PXE_JPEG_CORRUPT, name, why);
        }
        PX__WENT_PAST(err, PXE_JPEG_CORRUPT, -1, -1, name, why);
    }
    tjDestroy(tj);
    if (cmyk) /* in place: each pixel's 4 CMYK bytes become its RGBA */
        for (size_t i = 0, n = (size_t)w * (size_t)h * 4u; i < n; i += 4) {
            uint32_t k = img->px[i + 3];
            img->px[i] = (uint8_t)px_cmyk_channel(img->px[i], k);
            img->px[i + 1] = (uint8_t)px_cmyk_channel(img->px[i + 1], k);
            img->px[i + 2] = (uint8_t)px_cmyk_channel(img->px[i + 2], k);
            img->px[i + 3] = 255;
        }
    if (px_image_orient(img, orientation, err) < 0)
        return -1;
    if (ji.end && ji.end < len) /* libjpeg-turbo stopped at EOI: what follows is no part of the image */
        PX__NOTE_TRAILING(err, name, len, ji.end, "JPEG's end-of-image marker");
    return 0;
}

int pxvm_jpeg_decode(const uint8_t *data, size_t len, const char *name, const pxvm_limits *lim, pxvm_image *img,
                     pxvm_error *err)
{
    return px_image_decode_with(px_jpeg_decode_want, data, len, name, lim, NULL, img, err);
}

