/* policy.c - resolution policies (resize.h, "resolution policies"; docs/policies.md): how an image
 * of any size meets an input slot: parsed from their text, the geometry each gives (fit, crop),
 * Qwen2-VL's dynamic size rule, and an image resized by one. The RESIZE rule itself (filter tables,
 * passes) is resize.c's; this file calls it and is called by the front doors and vm/ragged.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../isa/px_resize.h"
#include "resize.h"

/* Python's floor division by 2 (towards minus infinity) */
static int px__half_floor(int v) { return v >= 0 ? v / 2 : -((-v + 1) / 2); }

int px_policy_geometry(const px_policy *p, int sw, int sh, int w, int h, px_policy_geom *g, pxvm_error *err)
{
    memset(g, 0, sizeof *g);
    g->w = g->cw = g->rw = w, g->h = g->ch = g->rh = h;
    if (p->kind == PX_POLICY_FIT && (sw != w || sh != h)) {
        px_resize_fit(sw, sh, w, h, 1, &g->cw, &g->ch, &g->cx, &g->cy);
        g->rw = g->cw, g->rh = g->ch;
    }
    if (p->kind != PX_POLICY_CROP)
        return 0;
    /* transformers 4.x get_resize_output_image_size(default_to_square=False): short side S, long
     * int(S * long / short), S * long exact in a double (both <= 2^24), one rounded division */
    int S = p->short_side ? p->short_side : (w > h ? w : h), shortest = sw <= sh ? sw : sh, longest = sw <= sh ? sh : sw;
    double lo = floor((double)S * (double)longest / (double)shortest);
    if (lo > (double)PX_RESIZE_MAX_SIDE)
        return pxvm_fail(err, PXE_POLICY_CROP_LONG, -1, -1, sw, sh, S, lo);
    if (sw <= sh)
        g->rw = S, g->rh = (int)lo;
    else
        g->rh = S, g->rw = (int)lo;
    /* transformers 4.x center_crop: top = (h' - h) // 2; a side under the crop's is padded with
     * zeros centred at ceil((h - h') / 2) = -top (the same floor) */
    int t = px__half_floor(g->rw - w);
    g->sx = t >= 0 ? t : 0, g->cx = t >= 0 ? 0 : -t, g->cw = t >= 0 ? w : g->rw;
    t = px__half_floor(g->rh - h);
    g->sy = t >= 0 ? t : 0, g->cy = t >= 0 ? 0 : -t, g->ch = t >= 0 ? h : g->rh;
    return 0;
}

/* ---- resolution policies ---------------------------------------------------------------------- */

static int px__policy_fail(pxvm_error *err, const char *text, const char *why)
{
    return pxvm_fail(err, PXE_POLICY_SYNTAX, -1, -1, text, why); /* 200 of the text, 160 of why: they fit the message */
}

static int px__hexval(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* R,G,B[,A] (decimal 0..255, no signs or spaces) or RRGGBB[AA]; 0, or -1. */
static int px__pad_parse(const char *s, size_t n, uint8_t pad[4])
{
    pad[3] = 255;
    if (memchr(s, ',', n)) {
        int k = 0;
        size_t i = 0;
        while (k < 4) {
            int v = 0, d = 0;
            while (i < n && s[i] >= '0' && s[i] <= '9') {
                v = v * 10 + (s[i++] - '0');
                if (++d > 3 || v > 255)
                    return -1;
            }
            if (!d)
                return -1;
            pad[k++] = (uint8_t)v;
            if (i == n)
                break;
            if (s[i++] != ',')
                return -1;
        }
        return i == n && (k == 3 || k == 4) ? 0 : -1;
    }
    if (n != 6 && n != 8)
        return -1;
    for (size_t i = 0; i < n; i += 2) {
        int a = px__hexval(s[i]), b = px__hexval(s[i + 1]);
        if (a < 0 || b < 0)
            return -1;
        pad[i / 2] = (uint8_t)(a * 16 + b);
    }
    return 0;
}

/* A field that is meant as a pad, not a filter: it has a comma, or is 6 or 8 hex digits. */
static int px__pad_like(const char *s)
{
    size_t n = strlen(s);
    if (strchr(s, ','))
        return 1;
    if (n != 6 && n != 8)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (px__hexval(s[i]) < 0)
            return 0;
    return 1;
}

/* One decimal number lo..hi written with digits only; 0, or -1. */
static int px__num(const char *s, size_t n, int64_t lo, int64_t hi, int64_t *v)
{
    int64_t x = 0;
    if (n == 0 || n > 15)
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        x = x * 10 + (s[i] - '0');
    }
    if (x < lo || x > hi)
        return -1;
    *v = x;
    return 0;
}

/* dynamic's fields after the kind: at most one list of KEY=VALUE (patch, merge, min, max; each
 * at most once) and at most one FILTER, in either order. */
static int px__dynamic_parse(const char *text, char field[][64], int nf, px_policy *p, pxvm_error *err)
{
    p->kind = PX_POLICY_DYNAMIC;
    p->merge = PX_DYNAMIC_MERGE;
    p->min_pixels = PX_DYNAMIC_MIN_PIXELS;
    p->max_pixels = PX_DYNAMIC_MAX_PIXELS;
    int have_keys = 0, have_filter = 0;
    char why[200];
    for (int i = 1; i < nf; i++) {
        if (!strchr(field[i], '=')) {
            int f = px_resize_filter_parse(field[i]);
            if (f < 0 || have_filter) {
                snprintf(why, sizeof why, f < 0 ? "unknown filter '%s'" : "a second filter '%s'", field[i]);
                return px__policy_fail(err, text, why);
            }
            p->filter = f, have_filter = 1;
            continue;
        }
        if (have_keys)
            return px__policy_fail(err, text, "a second list of KEY=VALUE (give them in one field, comma-separated)");
        have_keys = 1;
        unsigned seen = 0;
        for (const char *s = field[i]; *s;) {
            const char *end = strchr(s, ','), *eq = strchr(s, '=');
            size_t n = end ? (size_t)(end - s) : strlen(s);
            static const struct {
                const char *key;
                int64_t lo, hi;
            } keys[] = {{"patch", 1, 256}, {"merge", 1, 64}, {"min", 1, PX_DYNAMIC_PIXELS_MAX}, {"max", 1, PX_DYNAMIC_PIXELS_MAX}};
            size_t k = 0;
            while (k < 4 && !(eq && eq < s + n && (size_t)(eq - s) == strlen(keys[k].key) &&
                              !strncmp(s, keys[k].key, (size_t)(eq - s))))
                k++;
            if (k == 4) {
                snprintf(why, sizeof why, "unknown key in '%.*s' (patch, merge, min or max)", (int)n, s);
                return px__policy_fail(err, text, why);
            }
            if (seen & (1u << k)) {
                snprintf(why, sizeof why, "'%s' given twice", keys[k].key);
                return px__policy_fail(err, text, why);
            }
            seen |= 1u << k;
            int64_t v;
            if (px__num(eq + 1, n - (size_t)(eq + 1 - s), keys[k].lo, keys[k].hi, &v) < 0) {
                snprintf(why, sizeof why, "%s takes a whole number %lld..%lld, not '%.*s'", keys[k].key,
                         (long long)keys[k].lo, (long long)keys[k].hi, (int)(n - (size_t)(eq + 1 - s)), eq + 1);
                return px__policy_fail(err, text, why);
            }
            if (k == 0)
                p->patch = (int)v;
            else if (k == 1)
                p->merge = (int)v;
            else if (k == 2)
                p->min_pixels = v;
            else
                p->max_pixels = v;
            if (!end)
                break;
            s = end + 1;
            if (!*s)
                return px__policy_fail(err, text, "an empty KEY=VALUE after ','");
        }
    }
    if (p->min_pixels > p->max_pixels) {
        snprintf(why, sizeof why, "min %lld is larger than max %lld", (long long)p->min_pixels,
                 (long long)p->max_pixels);
        return px__policy_fail(err, text, why);
    }
    return 0;
}

/* crop's fields after the kind: at most one short=S (1..2^24) and at most one FILTER, in either
 * order. */
static int px__crop_parse(const char *text, char field[][64], int nf, px_policy *p, pxvm_error *err)
{
    p->kind = PX_POLICY_CROP;
    int have_filter = 0;
    char why[200];
    for (int i = 1; i < nf; i++) {
        if (!strncmp(field[i], "short=", 6)) {
            int64_t v;
            if (p->short_side)
                return px__policy_fail(err, text, "'short' given twice");
            if (px__num(field[i] + 6, strlen(field[i] + 6), 1, PX_RESIZE_MAX_SIDE, &v) < 0) {
                snprintf(why, sizeof why, "short takes a whole number 1..%d, not '%s'", PX_RESIZE_MAX_SIDE, field[i] + 6);
                return px__policy_fail(err, text, why);
            }
            p->short_side = (int)v;
            continue;
        }
        int f = px_resize_filter_parse(field[i]);
        if (f < 0 || have_filter) {
            snprintf(why, sizeof why, f < 0 ? "unknown filter '%s' (crop takes short=S and a FILTER)"
                                            : "a second filter '%s'", field[i]);
            return px__policy_fail(err, text, why);
        }
        p->filter = f, have_filter = 1;
    }
    return 0;
}

int px_policy_parse(const char *text, px_policy *p, pxvm_error *err)
{
    memset(p, 0, sizeof *p);
    p->filter = PX_RESIZE_BICUBIC;
    p->pad[3] = 255;
    if (!text) /* none given: exact */
        return 0;
    if (!*text)
        return px__policy_fail(err, text, "an empty policy");
    char field[3][64];
    int nf = 0;
    const char *s = text;
    for (;;) {
        const char *e = strchr(s, ':');
        size_t n = e ? (size_t)(e - s) : strlen(s);
        if (nf == 3)
            return px__policy_fail(err, text, "too many ':' fields");
        if (n == 0)
            return px__policy_fail(err, text, "an empty field");
        if (n >= sizeof field[0])
            return px__policy_fail(err, text, "a field is too long");
        memcpy(field[nf], s, n);
        field[nf++][n] = 0;
        if (!e)
            break;
        s = e + 1;
    }
    if (!strcmp(field[0], "native")) {
        if (nf > 1)
            return px__policy_fail(err, text, "native takes no filter or pad");
        p->kind = PX_POLICY_NATIVE;
        return 0;
    }
    if (!strcmp(field[0], "exact")) {
        if (nf > 1)
            return px__policy_fail(err, text, "exact takes no filter or pad");
        return 0;
    }
    if (!strcmp(field[0], "dynamic"))
        return px__dynamic_parse(text, field, nf, p, err);
    if (!strcmp(field[0], "crop"))
        return px__crop_parse(text, field, nf, p, err);
    int fit = !strcmp(field[0], "fit");
    if (!fit && strcmp(field[0], "stretch"))
        return px__policy_fail(err, text, "unknown kind (not native, exact, stretch, fit, crop or dynamic)");
    p->kind = fit ? PX_POLICY_FIT : PX_POLICY_STRETCH;
    int i = 1;
    if (i < nf) {
        int f = px_resize_filter_parse(field[i]);
        if (f >= 0)
            p->filter = f, i++;
        else if (!fit || i + 1 < nf || !px__pad_like(field[i])) {
            char why[160]; /* a field is at most 127 characters */
            snprintf(why, sizeof why, "unknown filter '%s'", field[i]);
            return px__policy_fail(err, text, why);
        }
    }
    if (i < nf) {
        if (!fit)
            return px__policy_fail(err, text, "stretch takes no pad");
        if (px__pad_parse(field[i], strlen(field[i]), p->pad) < 0) {
            char why[160]; /* a field is at most 127 characters */
            snprintf(why, sizeof why, "bad pad '%s'", field[i]);
            return px__policy_fail(err, text, why);
        }
        i++;
    }
    if (i < nf)
        return px__policy_fail(err, text, "too many fields");
    return 0;
}

void px_policy_format(const px_policy *p, char *buf, size_t len)
{
    if (p->kind == PX_POLICY_STRETCH)
        snprintf(buf, len, "stretch:%s", px_resize_filter_name(p->filter));
    else if (p->kind == PX_POLICY_FIT)
        snprintf(buf, len, "fit:%s:%u,%u,%u,%u", px_resize_filter_name(p->filter), p->pad[0], p->pad[1], p->pad[2],
                 p->pad[3]);
    else if (p->kind == PX_POLICY_CROP) {
        char side[24] = "";
        if (p->short_side)
            snprintf(side, sizeof side, "short=%d:", p->short_side);
        snprintf(buf, len, "crop:%s%s", side, px_resize_filter_name(p->filter));
    } else if (p->kind == PX_POLICY_DYNAMIC) {
        char patch[24] = "";
        if (p->patch)
            snprintf(patch, sizeof patch, "patch=%d,", p->patch);
        snprintf(buf, len, "dynamic:%smerge=%d,min=%lld,max=%lld:%s", patch, p->merge, (long long)p->min_pixels,
                 (long long)p->max_pixels, px_resize_filter_name(p->filter));
    } else
        snprintf(buf, len, p->kind == PX_POLICY_NATIVE ? "native" : "exact");
}

int px_policy_dynamic_patch(px_policy *p, int patch, pxvm_error *err)
{
    if (p->kind != PX_POLICY_DYNAMIC)
        return 0;
    if (p->patch && p->patch != patch)
        return pxvm_fail(err, PXE_POLICY_PATCH, -1, -1, p->patch, patch);
    p->patch = patch;
    return 0;
}

/* Qwen2-VL's smart_resize, transcribed (docs/policies.md): the
 * rounding to a multiple of f in integers (Python's round of h / f is half to even, and the
 * quotient of two integers below 2^53 never rounds onto a half it is not), the clamps in IEEE
 * double, one correctly rounded operation at a time, as CPython computes them. */
int px_dynamic_size(const px_policy *p, int w, int h, int *ow, int *oh, pxvm_error *err)
{
    if (p->kind != PX_POLICY_DYNAMIC || p->patch < 1 || p->merge < 1 || w < 1 || h < 1)
        return pxvm_fail(err, PXE_DYNAMIC_ARGS, -1, -1);
    int64_t f = (int64_t)p->patch * p->merge, lo = w < h ? w : h, hi = w < h ? h : w;
    if ((double)hi / (double)lo > 200.0)
        return pxvm_fail(err, PXE_DYNAMIC_ASPECT, -1, -1, w, h, (double)hi / (double)lo);
    int64_t side[2] = {h, w}, bar[2];
    for (int i = 0; i < 2; i++) { /* round(side / f) * f, half to even */
        int64_t q = side[i] / f, r = side[i] % f;
        bar[i] = (2 * r > f || (2 * r == f && (q & 1)) ? q + 1 : q) * f;
    }
    double area = (double)((int64_t)h * w);
    if (bar[0] * bar[1] > p->max_pixels) {
        double beta = sqrt(area / (double)p->max_pixels);
        for (int i = 0; i < 2; i++) {
            double v = floor((double)side[i] / beta / (double)f) * (double)f;
            bar[i] = v < (double)f ? f : (int64_t)v;
        }
    } else if (bar[0] * bar[1] < p->min_pixels) {
        double beta = sqrt((double)p->min_pixels / area);
        for (int i = 0; i < 2; i++)
            bar[i] = (int64_t)(ceil((double)side[i] * beta / (double)f) * (double)f);
    }
    if (bar[0] > PX_RESIZE_MAX_SIDE || bar[1] > PX_RESIZE_MAX_SIDE)
        return pxvm_fail(err, PXE_DYNAMIC_SIDE, -1, -1, w, h, (long long)bar[1], (long long)bar[0], PX_RESIZE_MAX_SIDE);
    *oh = (int)bar[0], *ow = (int)bar[1];
    return 0;
}

int px_resize_policy_px(const uint8_t *px, int sw, int sh, int channels, int w, int h, const px_policy *p,
                        pxvm_image *dst, pxvm_error *err)
{
    memset(dst, 0, sizeof *dst);
    if (!px || sw < 1 || sh < 1 || w < 1 || h < 1 || !p || (channels != 1 && channels != 3 && channels != 4))
        return pxvm_fail(err, PXE_POLICY_IMAGE_ARGS, -1, -1);
    if (p->kind == PX_POLICY_DYNAMIC && (sw != w || sh != h)) { /* the size px_dynamic_size gave */
        px_policy stretch = *p;
        stretch.kind = PX_POLICY_STRETCH;
        return px_resize_policy_px(px, sw, sh, channels, w, h, &stretch, dst, err);
    }
    if ((p->kind == PX_POLICY_EXACT || p->kind == PX_POLICY_NATIVE) && (sw != w || sh != h))
        return pxvm_fail(err, PXE_POLICY_SIZE, -1, -1, p->kind == PX_POLICY_NATIVE ? "native" : "exact", sw, sh, w, h);
    px_policy_geom g;
    px_resize_op op;
    if (px_policy_geometry(p, sw, sh, w, h, &g, err) < 0 || px_resize_op_window(sw, sh, &g, p->filter, 0, &op, err) < 0)
        return -1;
    if (pxvm_image_alloc(dst, w, h, err) < 0) {
        px_resize_op_free(&op);
        return -1;
    }
    int nw = g.cw, nh = g.ch, ox = g.cx, oy = g.cy;
    if (nw != w || nh != h) {
        uint8_t *q = dst->px;
        for (size_t i = 0; i < (size_t)w * (size_t)h; i++, q += 4)
            memcpy(q, p->pad, 4);
    }
    int64_t ds = (int64_t)w * 4;
    /* grey or RGB: its own channels resized, then widened to RGBA with A = 255, which is the A a
     * resize of a constant 255 gives (a run's coefficients sum to 2^22 up to a few units, so the
     * sum is 255 and a fraction, which the clamp takes to 255); each channel is resized on its
     * own, so a grey value resized once is each of R, G and B resized */
    uint8_t *tmp = channels == 4 ? NULL : malloc((size_t)nw * (size_t)nh * (size_t)channels);
    if (channels != 4 && !tmp) {
        px_resize_op_free(&op);
        pxvm_image_free(dst);
        return pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)nw * (unsigned long long)nh * (unsigned long long)channels);
    }
    uint8_t *at = dst->px + oy * ds + (int64_t)ox * 4;
    int64_t ss = (int64_t)sw * channels;
    const uint8_t *from = px + (int64_t)op.src_y * ss + (int64_t)op.src_x * channels; /* crop's window, unresized */
    int rc = px_resize_op_threads(&op, from, ss, tmp ? tmp : at, tmp ? (int64_t)nw * channels : ds, channels,
                                  p->threads ? p->threads : 1, err);
    px_resize_op_free(&op);
    if (rc < 0) {
        free(tmp);
        pxvm_image_free(dst);
        return -1;
    }
    if (tmp) {
        for (int y = 0; y < nh; y++) {
            const uint8_t *s = tmp + (size_t)y * (size_t)nw * (size_t)channels;
            uint8_t *d = at + y * ds;
            if (channels == 3)
                for (int x = 0; x < nw; x++, s += 3, d += 4)
                    d[0] = s[0], d[1] = s[1], d[2] = s[2], d[3] = 255;
            else
                for (int x = 0; x < nw; x++, s++, d += 4)
                    d[0] = d[1] = d[2] = s[0], d[3] = 255;
        }
        free(tmp);
    }
    return 0;
}

int px_resize_policy(const pxvm_image *src, int w, int h, const px_policy *p, pxvm_image *dst, pxvm_error *err)
{
    if (!src || !src->px) {
        memset(dst, 0, sizeof *dst);
        return pxvm_fail(err, PXE_POLICY_IMAGE_ARGS, -1, -1);
    }
    return px_resize_policy_px(src->px, src->w, src->h, 4, w, h, p, dst, err);
}
