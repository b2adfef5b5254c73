/* resize.c - RESIZE's filter tables and the host reference (resize.h; the rule: isa/SPEC.md, RESIZE).
 *
 * This is the one place where floating point runs when a program is bound: the table of each axis
 * is computed here, on the host, in IEEE double, with Pillow 9.4's formulas in Pillow's order of
 * operations (libImaging/Resample.c: precompute_coeffs, then normalize_coeffs_8bpc to Q22). The
 * Makefile's -ffp-contract=off -fno-fast-math keep every operation a separately rounded double
 * operation in the order written, so the tables are deterministic and equal to Pillow's (Pillow
 * built without FMA contraction, as Debian's amd64 build is). Both executors then run the same
 * integer tables through isa/px_resize.h: no float math happens per frame.
 * sin and cos (HAMMING, LANCZOS) are the host libm's, as Pillow's are.
 * Which size and window a policy resizes to is vm/policy.c's; this file is the rule it applies.
 */
#define _POSIX_C_SOURCE 200809L /* sysconf */
#include "resize.h"

#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../isa/px_resize.h"

#define PX__PI 3.14159265358979323846 /* M_PI (not declared by <math.h> under -std=c11) */

/* ---- the filters (Pillow's kernels, argument in source texels at scale 1) -------------------- */

static double px__box(double x) { return x > -0.5 && x <= 0.5 ? 1.0 : 0.0; }

static double px__bilinear(double x)
{
    x = x < 0.0 ? -x : x;
    return x < 1.0 ? 1.0 - x : 0.0;
}

/* sinc times a Hamming window; Pillow writes the window's constants as floats (0.54f, 0.46f), so
 * their float values, widened to double, are what enters the sum. */
static double px__hamming(double x)
{
    x = x < 0.0 ? -x : x;
    if (x == 0.0)
        return 1.0;
    if (x >= 1.0)
        return 0.0;
    x = x * PX__PI;
    return sin(x) / x * ((double)0.54f + (double)0.46f * cos(x));
}

/* Keys' cubic convolution with a = -0.5, evaluated in Pillow's nesting. */
static double px__bicubic(double x)
{
    const double a = -0.5;
    x = x < 0.0 ? -x : x;
    if (x < 1.0)
        return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
    if (x < 2.0)
        return (((x - 5.0) * x + 8.0) * x - 4.0) * a;
    return 0.0;
}

static double px__sinc(double x)
{
    if (x == 0.0)
        return 1.0;
    x = x * PX__PI;
    return sin(x) / x;
}

/* sinc windowed by sinc(x / 3) on [-3, 3) */
static double px__lanczos(double x) { return -3.0 <= x && x < 3.0 ? px__sinc(x) * px__sinc(x / 3.0) : 0.0; }

static const struct {
    double (*fn)(double);
    double support; /* half-width of the kernel at scale 1 */
} px__filters[PX_RESIZE__FILTERS] = {
    [PX_RESIZE_NEAREST] = {NULL, 0.0},           [PX_RESIZE_LANCZOS] = {px__lanczos, 3.0},
    [PX_RESIZE_BILINEAR] = {px__bilinear, 1.0},  [PX_RESIZE_BICUBIC] = {px__bicubic, 2.0},
    [PX_RESIZE_BOX] = {px__box, 0.5},            [PX_RESIZE_HAMMING] = {px__hamming, 1.0},
};

static const char *const px__filter_names[PX_RESIZE__FILTERS] = {
#define PX__RESIZE_FILTER_NAME(NAME, value, name, sep) [value] = name,
    PX_RESIZE_FILTERS(PX__RESIZE_FILTER_NAME)
#undef PX__RESIZE_FILTER_NAME
};

int px_resize_filter_parse(const char *name)
{
    for (int f = 0; f < PX_RESIZE__FILTERS; f++) {
        const char *a = name, *b = px__filter_names[f];
        while (*a && (*a | 0x20) == *b) /* the names are lower-case letters */
            a++, b++;
        if (!*a && !*b)
            return f;
    }
    return -1;
}

const char *px_resize_filter_name(int filter)
{
    return filter >= 0 && filter < PX_RESIZE__FILTERS ? px__filter_names[filter] : "?";
}

/* ---- tables ----------------------------------------------------------------------------------- */

void px_resize_table_free(px_resize_table *t)
{
    free(t->first);
    free(t->count);
    free(t->k);
    memset(t, 0, sizeof *t);
}

/* Q22 of a normalized coefficient: Pillow's normalize_coeffs_8bpc, rounding half away from zero
 * by adding -0.5 or 0.5 to the scaled value and truncating toward zero. */
static int32_t px__q22(double v)
{
    const double one = (double)(1 << PX_RESIZE_PREC);
    return (int32_t)(v < 0.0 ? -0.5 + v * one : 0.5 + v * one);
}

/* The kernel's reach along one axis: Pillow's support (the filter's half-width, widened by a
 * downscale) and its ksize, the longest run. */
static double px__support(int in_size, int out_size, int filter, double *scale, double *ss)
{
    *scale = (double)in_size / out_size; /* Pillow: (in1 - in0) / out_size with the box (0, in_size) */
    double filterscale = *scale < 1.0 ? 1.0 : *scale;
    *ss = 1.0 / filterscale;
    return px__filters[filter].support * filterscale;
}

/* Output index i's run lo .. lo + n - 1 (precompute_coeffs: truncation toward zero, then clamped;
 * n is 1..ksize, the window always holds the texel under the centre). Shared by the tables and by
 * px_resize_need, which reads the first and last run without building a table. */
static void px__window(int in_size, double scale, double support, int i, double *center, int *lo, int *n)
{
    *center = (i + 0.5) * scale;
    int a = (int)(*center - support + 0.5), b = (int)(*center + support + 0.5);
    a = a < 0 ? 0 : a;
    b = b > in_size ? in_size : b;
    *lo = a, *n = b - a;
}

int px_resize_coeffs(int in_size, int out_size, int filter, px_resize_table *t, pxvm_error *err)
{
    memset(t, 0, sizeof *t);
    if (in_size < 1 || in_size > PX_RESIZE_MAX_SIDE || out_size < 1 || out_size > PX_RESIZE_MAX_SIDE)
        return pxvm_fail(err, PXE_RESIZE_SIDES, -1, -1);
    if (filter < 0 || filter >= PX_RESIZE__FILTERS)
        return pxvm_fail(err, PXE_RESIZE_FILTER, -1, -1);
    t->in_size = in_size;
    t->out_size = out_size;
    t->filter = filter;
    t->first = malloc((size_t)out_size * sizeof *t->first);
    t->count = malloc((size_t)out_size * sizeof *t->count);
    if (!t->first || !t->count) {
        px_resize_table_free(t);
        return pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)out_size * 8ull);
    }
    if (filter == PX_RESIZE_NEAREST) {
        /* The affine scale (Geometry.c, ImagingScaleAffine): position 0.5 * scale, then scale
         * added once per texel (a running sum, not i * scale), truncated to an index. */
        double scale = (double)in_size / out_size;
        double pos = scale * 0.5;
        for (int i = 0; i < out_size; i++, pos += scale) {
            int idx = pos < 0.0 ? -1 : (int)pos;
            t->first[i] = idx < in_size ? idx : -1;
            t->count[i] = t->first[i] >= 0;
        }
        return 0;
    }

    /* precompute_coeffs: a downscale widens the kernel by the scale (filterscale), an upscale
     * keeps it at scale 1. */
    double scale, ss, support = px__support(in_size, out_size, filter, &scale, &ss);
    int ksize = (int)ceil(support) * 2 + 1;
    double *w = malloc((size_t)ksize * sizeof *w);
    t->ksize = ksize;
    t->k = calloc((size_t)out_size * (size_t)ksize, sizeof *t->k);
    if (!w || !t->k) {
        free(w);
        px_resize_table_free(t);
        return pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)out_size * (unsigned long long)ksize * 4ull);
    }
    for (int i = 0; i < out_size; i++) {
        double center;
        int lo, n;
        px__window(in_size, scale, support, i, &center, &lo, &n);
        double ww = 0.0;
        for (int j = 0; j < n; j++) {
            w[j] = px__filters[filter].fn((j + lo - center + 0.5) * ss); /* (int j + lo) - center */
            ww += w[j];
        }
        int32_t *k = t->k + (size_t)i * (size_t)ksize;
        for (int j = 0; j < n; j++)
            k[j] = px__q22(ww != 0.0 ? w[j] / ww : w[j]);
        t->first[i] = lo;
        t->count[i] = n;
    }
    free(w);
    return 0;
}

/* ---- one resize: its passes, streamed ---------------------------------------------------------- */

/* The source rows Pillow's horizontal pass covers (op->row0, op->rows: what the CUDA-GL executor
 * keeps whole, per item, and what px_resize_need counts): all of them when the height does not
 * change or the content is a copy; the rows the vertical pass reads otherwise; none for NEAREST. */
static void px__pass1_rows(int sh, int ch, int copy, int filter, int first0, int end_last, int *row0, int *rows)
{
    if (copy || (filter != PX_RESIZE_NEAREST && ch == sh))
        *row0 = 0, *rows = sh;
    else if (filter == PX_RESIZE_NEAREST)
        *row0 = 0, *rows = 0;
    else
        *row0 = first0, *rows = end_last - first0;
}

/* Is every run of the table one coefficient of exactly 1.0 (2^22) and zeros? Then the pass only
 * copies texels (sel[i] is the source index of output i): px_resize_tap gives (2^21 + v * 2^22)
 * >> 22 = v. A copy commutes with the other pass exactly, so that pass can run first on the
 * source columns and the copy after it, with no 8-bit intermediate and the same bytes. */
static int px__selection(const px_resize_table *t, int32_t *sel)
{
    for (int i = 0; i < t->out_size; i++) {
        const int32_t *k = t->k + (size_t)i * (size_t)t->ksize;
        int at = -1;
        for (int j = 0; j < t->count[i]; j++)
            if (k[j] == (1 << PX_RESIZE_PREC) && at < 0)
                at = j;
            else if (k[j] != 0)
                return 0;
        if (at < 0)
            return 0;
        sel[i] = t->first[i] + at;
    }
    return 1;
}

/* Outputs s0 .. s0 + n - 1 of a table as its outputs 0 .. n - 1 (each output's run and
 * coefficients depend on its own index only, so a slice is exactly those outputs). */
static void px__slice(px_resize_table *t, int s0, int n)
{
    if (s0 == 0 && n == t->out_size)
        return;
    memmove(t->first, t->first + s0, (size_t)n * sizeof *t->first);
    memmove(t->count, t->count + s0, (size_t)n * sizeof *t->count);
    if (t->k)
        memmove(t->k, t->k + (size_t)s0 * (size_t)t->ksize, (size_t)n * (size_t)t->ksize * sizeof *t->k);
    t->out_size = n;
}

/* Fills op from its sizes (sw x sh resized to rx x ry, of which the cw x ch content is the window
 * from (sx0, sy0); filter; the rest of op set by the caller): the tables, which passes run, and
 * how the vertical pass is streamed (resize.h). Without a crop rx, ry = cw, ch and sx0, sy0 = 0. */
static int px__plan(px_resize_op *op, int rx, int ry, int sx0, int sy0, pxvm_error *err)
{
    if (px_resize_coeffs(op->sw, rx, op->filter, &op->tx, err) < 0)
        return -1;
    if (px_resize_coeffs(op->sh, ry, op->filter, &op->ty, err) < 0) {
        px_resize_table_free(&op->tx);
        return -1;
    }
    px__slice(&op->tx, sx0, op->cw);
    px__slice(&op->ty, sy0, op->ch);
    op->hpass = rx != op->sw;
    op->vpass = ry != op->sh;
    op->copy = !op->hpass && !op->vpass;
    px__pass1_rows(op->sh, op->ch, op->copy, op->filter, op->ty.first[0],
                   op->ty.first[op->ch - 1] + op->ty.count[op->ch - 1], &op->row0, &op->rows);
    if (op->filter == PX_RESIZE_NEAREST || op->copy || !op->hpass)
        return 0;
    if (!(op->sel = malloc((size_t)op->cw * sizeof *op->sel))) {
        px_resize_op_free(op);
        return pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)op->cw * 4ull);
    }
    if (!px__selection(&op->tx, op->sel)) {
        free(op->sel);
        op->sel = NULL;
    }
    if (op->sel || !op->vpass)
        return 0;
    /* Pass 2 over computed rows: a ring of the rows a run reads (the longest run, twice, so that
     * every run lies contiguous in it), or, when fewer, sums kept open per output row (uint32,
     * added row by row: a sum modulo 2^32 does not depend on the order of its terms). */
    int longest = 0, open = 0;
    for (int y = 0, z = 0; y < op->ch; y++) {
        int end = op->ty.first[y] + op->ty.count[y];
        longest = op->ty.count[y] > longest ? op->ty.count[y] : longest;
        while (z < op->ch && op->ty.first[z] < end) /* rows y .. z-1 are open at source row end - 1 */
            z++;
        open = z - y > open ? z - y : open;
    }
    op->vwrap = 2 * longest < op->rows;
    int ring = op->vwrap ? 2 * longest : op->rows;
    op->vopen = 4 * open + 1 < ring ? open : 0;
    op->vunits = op->vopen ? 4 * open + 1 : ring;
    op->vring = op->vwrap ? longest : ring;
    return 0;
}

size_t px_resize_tile_bytes(const px_resize_op *op, int tw, int channels)
{
    size_t units = (size_t)op->vunits * (size_t)tw * (size_t)channels;
    return units ? units + (op->vopen ? 4u : 0u) : 0u; /* + 4: the open sums start 4-byte aligned */
}

/* Row r of the horizontal pass, columns x0 .. x1-1, into t. */
static void px__hrow(const px_resize_op *op, const uint8_t *src, int64_t sstride, int channels, int r, int x0, int x1,
                     uint8_t *t)
{
    const uint8_t *s = src + (int64_t)r * sstride;
    if (channels == 4 || channels == 3) {
        const px_resize_kernels *kern = px_resize_kernels_get();
        (channels == 4 ? kern->hrow4 : kern->hrow3)(s, &op->tx, x0, x1, t);
        return;
    }
    for (int x = x0; x < x1; x++, t += channels)
        for (int c = 0; c < channels; c++)
            t[c] = (uint8_t)px_resize_tap(s + c, channels, op->tx.first[x], op->tx.count[x],
                                          op->tx.k + (size_t)x * (size_t)op->tx.ksize);
}

/* Pass 2 from rows that are computed (a horizontal pass that is not a copy): see px__plan. */
static void px__vstream(const px_resize_op *op, const uint8_t *src, int64_t sstride, uint8_t *dst, int64_t dstride,
                        int channels, int x0, int x1, int y0, int y1, uint8_t *scratch)
{
    size_t trow = (size_t)(x1 - x0) * (size_t)channels;
    const px_resize_table *ty = &op->ty;
    const px_resize_kernels *kern = px_resize_kernels_get();
    if (!op->vopen) { /* the ring */
        int cap = op->vring, base = ty->first[y0], next = base;
        for (int y = y0; y < y1; y++) {
            int end = ty->first[y] + ty->count[y];
            for (int r = next > ty->first[y] ? next : ty->first[y]; r < end; r++) {
                uint8_t *t = scratch + (size_t)(op->vwrap ? r % cap : r - base) * trow;
                px__hrow(op, src, sstride, channels, r, x0, x1, t);
                if (op->vwrap)
                    memcpy(t + (size_t)cap * trow, t, trow);
            }
            next = end;
            const uint8_t *t = scratch + (size_t)(op->vwrap ? ty->first[y] % cap : ty->first[y] - base) * trow;
            uint8_t *d = dst + (int64_t)y * dstride + (int64_t)x0 * channels;
            kern->vrow(t, (int64_t)trow, ty->count[y], ty->k + (size_t)y * (size_t)ty->ksize, d, trow);
        }
        return;
    }
    /* open sums: output rows lo .. hi-1 are open (slot y % open), each closed at its last row */
    uint8_t *t = scratch;
    uint32_t *acc = (uint32_t *)(void *)(((uintptr_t)(scratch + trow) + 3u) & ~(uintptr_t)3u);
    int lo = y0, hi = y0, open = op->vopen;
    for (int r = ty->first[y0]; lo < y1; r++) {
        if (lo == hi && ty->first[hi] > r) /* rows between runs: none read */
            r = ty->first[hi];
        for (; hi < y1 && ty->first[hi] <= r; hi++)
            for (size_t i = 0, o = (size_t)(hi % open) * trow; i < trow; i++)
                acc[o + i] = PX_RESIZE_HALF;
        px__hrow(op, src, sstride, channels, r, x0, x1, t);
        for (int y = lo; y < hi; y++) {
            uint32_t k = (uint32_t)ty->k[(size_t)y * (size_t)ty->ksize + (size_t)(r - ty->first[y])];
            kern->vmac(acc + (size_t)(y % open) * trow, t, k, trow);
        }
        for (; lo < hi && ty->first[lo] + ty->count[lo] == r + 1; lo++) {
            kern->vclamp(acc + (size_t)(lo % open) * trow, dst + (int64_t)lo * dstride + (int64_t)x0 * channels, trow);
        }
    }
}

void px_resize_tile(const px_resize_op *op, const uint8_t *src, int64_t sstride, uint8_t *dst, int64_t dstride,
                    int channels, int x0, int x1, int y0, int y1, uint8_t *scratch)
{
    size_t trow = (size_t)(x1 - x0) * (size_t)channels;
    const px_resize_table *tx = &op->tx, *ty = &op->ty;
    if (op->copy) {
        for (int y = y0; y < y1; y++)
            memcpy(dst + (int64_t)y * dstride + (int64_t)x0 * channels, src + (int64_t)y * sstride + (int64_t)x0 * channels,
                   trow);
    } else if (op->filter == PX_RESIZE_NEAREST) {
        for (int y = y0; y < y1; y++)
            for (int x = x0; x < x1; x++)
                for (int c = 0; c < channels; c++)
                    dst[(int64_t)y * dstride + (int64_t)x * channels + c] =
                        (uint8_t)px_resize_nearest(src + c, channels, sstride, tx->first[x], ty->first[y]);
    } else if (!op->vpass) { /* the width alone changes: row y is source row y resized */
        for (int y = y0; y < y1; y++) {
            uint8_t *d = dst + (int64_t)y * dstride + (int64_t)x0 * channels;
            if (!op->sel) {
                px__hrow(op, src, sstride, channels, y, x0, x1, d);
                continue;
            }
            for (int x = x0; x < x1; x++, d += channels)
                memcpy(d, src + (int64_t)y * sstride + (int64_t)op->sel[x] * channels, (size_t)channels);
        }
    } else if (!op->hpass) { /* the vertical pass alone: rows of source texels */
        const px_resize_kernels *kern = px_resize_kernels_get();
        for (int y = y0; y < y1; y++)
            kern->vrow(src + (int64_t)ty->first[y] * sstride + (int64_t)x0 * channels, sstride, ty->count[y],
                       ty->k + (size_t)y * (size_t)ty->ksize, dst + (int64_t)y * dstride + (int64_t)x0 * channels, trow);
    } else if (op->sel) { /* the vertical pass reads the source columns the copy picks */
        for (int y = y0; y < y1; y++) {
            uint8_t *d = dst + (int64_t)y * dstride + (int64_t)x0 * channels;
            const int32_t *k = ty->k + (size_t)y * (size_t)ty->ksize;
            for (int x = x0; x < x1; x++, d += channels) {
                if (x > x0 && op->sel[x] == op->sel[x - 1]) { /* the column just summed */
                    memcpy(d, d - channels, (size_t)channels);
                    continue;
                }
                int sx = op->sel[x];
                for (int c = 0; c < channels; c++)
                    d[c] = (uint8_t)px_resize_tap(src + (int64_t)sx * channels + c, sstride, ty->first[y], ty->count[y], k);
            }
        }
    } else {
        px__vstream(op, src, sstride, dst, dstride, channels, x0, x1, y0, y1, scratch);
    }
}

uint64_t px_resize_need(int sw, int sh, int w, int h, int fit, int filter, int *cw, int *ch, int *rows)
{
    int ox, oy, row0, first0 = 0, end_last = 0;
    px_resize_fit(sw, sh, w, h, fit, cw, ch, &ox, &oy);
    uint64_t kx = 0, ky = 0;
    if (filter != PX_RESIZE_NEAREST) {
        double scale, ss, center;
        int n;
        kx = 2u * (uint64_t)ceil(px__support(sw, *cw, filter, &scale, &ss)) + 1u;
        double support = px__support(sh, *ch, filter, &scale, &ss);
        ky = 2u * (uint64_t)ceil(support) + 1u;
        px__window(sh, scale, support, 0, &center, &first0, &n);
        px__window(sh, scale, support, *ch - 1, &center, &end_last, &n);
        end_last += n;
    }
    int copy = sw == *cw && sh == *ch;
    px__pass1_rows(sh, *ch, copy, filter, first0, end_last, &row0, rows);
    if (!copy && filter != PX_RESIZE_NEAREST && *cw != sw && (sw == 1 || (filter == PX_RESIZE_BOX && *cw > sw))) {
        /* the horizontal pass is a copy of columns (px__selection; from one column, or BOX
         * upscaling, always): sel[] instead of an intermediate */
        *rows = 0;
        kx += 1u;
    }
    return 4u * ((uint64_t)*cw * (2u + kx) + (uint64_t)*ch * (2u + ky)) + 4u * (uint64_t)*cw * (uint64_t)*rows;
}

/* ---- the host reference ----------------------------------------------------------------------- */

int px_resize_threads(void)
{
    const char *e = getenv("PXVM_RESIZE_THREADS");
    long n = e && *e ? strtol(e, NULL, 10) : sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > 64 ? 64 : (int)n;
}

/* One band of output rows of a host resize, on its own thread. */
typedef struct {
    const px_resize_op *op;
    const uint8_t *src;
    int64_t sstride, dstride;
    uint8_t *dst, *scratch;
    int channels, y0, y1;
} px__band;

static void *px__band_run(void *arg)
{
    const px__band *b = arg;
    px_resize_tile(b->op, b->src, b->sstride, b->dst, b->dstride, b->channels, 0, b->op->cw, b->y0, b->y1, b->scratch);
    return NULL;
}

/* A band sums at least this many samples (output texels times taps, both passes; about 5 ms of
 * AVX2 work): on a host whose cores are busy a second thread may wait its turn for longer than a
 * smaller band takes (measured on a loaded 2-core host: 741x500 -> 736x512 in 1.5 ms on one
 * thread, 2-6 ms in two bands of 2^20). */
#define PX__BAND_WORK (1u << 23)

int px_resize_rgba8_threads(const uint8_t *src, int sw, int sh, int64_t sstride, uint8_t *dst, int dw, int dh,
                            int64_t dstride, int filter, int channels, int threads, pxvm_error *err)
{
    if (!src || !dst || channels < 1 || channels > 4 || sw < 1 || sh < 1 || dw < 1 || dh < 1 ||
        sstride < (int64_t)sw * channels || dstride < (int64_t)dw * channels)
        return pxvm_fail(err, PXE_RESIZE_ARGS, -1, -1);
    px_resize_op op;
    memset(&op, 0, sizeof op);
    op.filter = filter, op.sw = sw, op.sh = sh, op.w = op.cw = dw, op.h = op.ch = dh;
    if (px__plan(&op, dw, dh, 0, 0, err) < 0)
        return -1;
    int rc = px_resize_op_threads(&op, src, sstride, dst, dstride, channels, threads, err);
    px_resize_op_free(&op);
    return rc;
}

int px_resize_op_threads(const px_resize_op *opp, const uint8_t *src, int64_t sstride, uint8_t *dst, int64_t dstride,
                         int channels, int threads, pxvm_error *err)
{
    const px_resize_op op = *opp; /* the bands read their own copy's fields */
    int dw = op.cw, dh = op.ch;
    /* the bands: as many as asked, or (threads <= 0) as many as the work pays for within the
     * cores; at most one per output row */
    int bands = threads > 0 ? threads : px_resize_threads();
    if (threads <= 0) {
        uint64_t work = (uint64_t)dw * (uint64_t)(op.rows > dh ? op.rows : dh) * (uint64_t)(op.tx.ksize + op.ty.ksize + 1);
        uint64_t most = work / PX__BAND_WORK;
        bands = (uint64_t)bands > most ? (int)(most ? most : 1) : bands;
    }
    bands = bands > dh ? dh : bands > 64 ? 64 : bands;
    size_t bytes = (px_resize_tile_bytes(&op, dw, channels) + 7u) & ~(size_t)7u;
    /* the scratch of all bands stays within Pillow's intermediate (dw x rows), as the CPU
     * executor's split does (docs/design/resize-memory.md): one band always fits */
    while (bands > 1 && (uint64_t)bytes * (uint64_t)bands > (uint64_t)dw * (uint64_t)channels * (uint64_t)op.rows)
        bands--;
    uint8_t *scratch = bytes ? malloc(bytes * (size_t)bands) : NULL;
    if (bytes && !scratch)
        return pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)bytes * (unsigned long long)bands);
    px__band band[64];
    pthread_t th[64];
    int started[64] = {0};
    for (int b = 0; b < bands; b++) {
        band[b] = (px__band){&op, src, sstride, dstride, dst, scratch ? scratch + bytes * (size_t)b : NULL, channels,
                             (int)((int64_t)dh * b / bands), (int)((int64_t)dh * (b + 1) / bands)};
        if (b > 0) /* a thread that does not start leaves its band to the caller */
            started[b] = pthread_create(&th[b], NULL, px__band_run, &band[b]) == 0;
    }
    px__band_run(&band[0]);
    for (int b = 1; b < bands; b++)
        if (started[b])
            pthread_join(th[b], NULL);
        else
            px__band_run(&band[b]);
    free(scratch);
    return 0;
}

int px_resize_rgba8(const uint8_t *src, int sw, int sh, int64_t sstride, uint8_t *dst, int dw, int dh,
                    int64_t dstride, int filter, int channels, pxvm_error *err)
{
    return px_resize_rgba8_threads(src, sw, sh, sstride, dst, dw, dh, dstride, filter, channels, 1, err);
}

/* ---- one RESIZE instruction ------------------------------------------------------------------- */

int px_resize_op_make(const pxi_insn *in, int sw, int sh, px_resize_op *op, pxvm_error *err)
{
    uint32_t pad = (uint32_t)PX_ARG(in, RESIZE, pad_r) | (uint32_t)PX_ARG(in, RESIZE, pad_g) << 8 |
                   (uint32_t)PX_ARG(in, RESIZE, pad_b) << 16 | (uint32_t)PX_ARG(in, RESIZE, pad_a) << 24;
    int rc = px_resize_op_sizes(sw, sh, PX_ARG(in, RESIZE, w), PX_ARG(in, RESIZE, h), PX_ARG(in, RESIZE, fit),
                                PX_ARG(in, RESIZE, filter), pad, op, err);
    /* the rectangle at (dst_x, dst_y) of dst: the content moves with it */
    op->src = PX_ARG(in, RESIZE, src), op->dst = PX_ARG(in, RESIZE, dst);
    op->x = PX_ARG(in, RESIZE, dst_x), op->y = PX_ARG(in, RESIZE, dst_y);
    op->cx += op->x, op->cy += op->y;
    return rc;
}

int px_resize_op_sizes(int sw, int sh, int w, int h, int fit, int filter, uint32_t pad, px_resize_op *op, pxvm_error *err)
{
    memset(op, 0, sizeof *op);
    op->filter = filter, op->sw = sw, op->sh = sh, op->w = w, op->h = h, op->pad = pad;
    int ox, oy;
    px_resize_fit(sw, sh, w, h, fit, &op->cw, &op->ch, &ox, &oy);
    op->cx = ox, op->cy = oy;
    return px__plan(op, op->cw, op->ch, 0, 0, err);
}

int px_resize_op_window(int sw, int sh, const px_policy_geom *g, int filter, uint32_t pad, px_resize_op *op,
                        pxvm_error *err)
{
    memset(op, 0, sizeof *op);
    op->filter = filter, op->w = g->w, op->h = g->h, op->pad = pad;
    op->cx = g->cx, op->cy = g->cy, op->cw = g->cw, op->ch = g->ch;
    int rx = g->rw, ry = g->rh, sx0 = g->sx, sy0 = g->sy;
    op->sw = sw, op->sh = sh;
    if (rx == sw) /* not resized across: the source's window, copied (or resized down only) */
        op->src_x = sx0, op->sw = rx = g->cw, sx0 = 0;
    if (ry == sh)
        op->src_y = sy0, op->sh = ry = g->ch, sy0 = 0;
    return px__plan(op, rx, ry, sx0, sy0, err);
}

void px_resize_op_free(px_resize_op *op)
{
    px_resize_table_free(&op->tx);
    px_resize_table_free(&op->ty);
    free(op->sel);
    op->sel = NULL;
}
