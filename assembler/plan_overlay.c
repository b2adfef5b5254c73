/* plan_overlay.c - what a plan and a run's tokens look like: the plan's summary (tokens per LOD,
 * pixels sampled, coverage) and the overlays that draw token footprints (and a scanpath) over a
 * photo, for pxasm --plan --overlay and pxrun --overlay. */
#include <math.h>
#include <stdlib.h>

#include "../isa/px_sem.h"
#include "plan_internal.h"

/* ---- summary and overlay -------------------------------------------------------------------- */

static void px__footprint(const pxvm_plan *p, const pxvm_plan_token *t, double *x0, double *y0, double *x1, double *y1)
{
    double hw = t->du * p->patch / 2, hh = t->dv * p->patch / 2;
    double ox = p->relative ? p->w / 2.0 : 0, oy = p->relative ? p->h / 2.0 : 0; /* relative: around the centre */
    *x0 = ox + t->cx - hw, *x1 = ox + t->cx + hw, *y0 = oy + t->cy - hh, *y1 = oy + t->cy + hh;
}

/* The first cell g in 0..n whose centre (g + 0.5) * cs is at or after v (n: none): the cells
 * whose centres lie in [v0, v1) are cells_from(v0) .. cells_from(v1) - 1. */
static int px__cells_from(double v, int cs, int n)
{
    int g = (int)px_plan_clampd(ceil(v / cs - 0.5), 0, n); /* an estimate, then exact */
    while (g > 0 && (g - 1 + 0.5) * cs >= v)
        g--;
    while (g < n && (g + 0.5) * cs < v)
        g++;
    return g;
}

void pxvm_plan_summary(const pxvm_plan *p, FILE *out)
{
    fprintf(out, "plan %s: scheme %s, %dx%d image, fixation (%.3f, %.3f), %d tokens of %dx%d (budget %d), atlas %dx%d\n",
            p->name, p->scheme, p->w, p->h, p->fx, p->fy, p->ntokens, p->patch, p->patch, p->budget, p->cols * p->patch,
            p->rows * p->patch);
    int per[PXVM_MAX_LEVELS] = {0};
    for (int i = 0; i < p->ntokens; i++)
        per[p->tokens[i].lod_q8 >> 8 < PXVM_MAX_LEVELS ? p->tokens[i].lod_q8 >> 8 : PXVM_MAX_LEVELS - 1]++;
    fprintf(out, "tokens per LOD:");
    for (int l = 0; l < p->levels; l++)
        if (per[l])
            fprintf(out, "  [%d,%d): %d", l, l + 1, per[l]);
    fprintf(out, "\n");
    double sampled = (double)p->ntokens * p->patch * p->patch, full = (double)p->w * p->h;
    fprintf(out, "pixels sampled: %.0f, against %.0f for the uniform grid at full resolution (%.3fx)\n", sampled, full,
            sampled / full);
    /* coverage on a grid of at most 1024x1024 cells: a cell is covered when its centre lies in a
     * footprint; each footprint adds its cells' rectangle to a difference table (time in tokens
     * plus cells, even when every footprint spans the image) */
    int cs = 1 + (p->w > p->h ? p->w : p->h) / 1024, gw = (p->w + cs - 1) / cs, gh = (p->h + cs - 1) / cs;
    int32_t *diff = calloc((size_t)(gw + 1) * (size_t)(gh + 1), sizeof(int32_t));
    long covered = 0;
    for (int i = 0; diff && i < p->ntokens; i++) {
        double x0, y0, x1, y1;
        px__footprint(p, &p->tokens[i], &x0, &y0, &x1, &y1);
        int a0 = px__cells_from(x0, cs, gw), a1 = px__cells_from(x1, cs, gw);
        int b0 = px__cells_from(y0, cs, gh), b1 = px__cells_from(y1, cs, gh);
        if (!(x0 < x1 && y0 < y1) || a0 >= a1 || b0 >= b1)
            continue;
        diff[(size_t)b0 * (size_t)(gw + 1) + (size_t)a0]++;
        diff[(size_t)b0 * (size_t)(gw + 1) + (size_t)a1]--;
        diff[(size_t)b1 * (size_t)(gw + 1) + (size_t)a0]--;
        diff[(size_t)b1 * (size_t)(gw + 1) + (size_t)a1]++;
    }
    for (int gy = 0; diff && gy < gh; gy++) /* summed in place: diff becomes the cover count */
        for (int gx = 0; gx < gw; gx++) {
            size_t k = (size_t)gy * (size_t)(gw + 1) + (size_t)gx;
            diff[k] += (gx > 0 ? diff[k - 1] : 0) + (gy > 0 ? diff[k - (size_t)(gw + 1)] : 0) -
                       (gx > 0 && gy > 0 ? diff[k - (size_t)(gw + 1) - 1] : 0);
            covered += diff[k] > 0;
        }
    free(diff);
    fprintf(out, "covered: %.1f%% of the image by token footprints\n", 100.0 * (double)covered / ((double)gw * gh));
}

static void px__plot(pxvm_image *img, int x, int y, const uint8_t c[3])
{
    if (x < 0 || y < 0 || x >= img->w || y >= img->h)
        return;
    uint8_t *p = img->px + ((size_t)y * (size_t)img->w + (size_t)x) * 4u;
    p[0] = c[0], p[1] = c[1], p[2] = c[2], p[3] = 255;
}

/* Liang-Barsky: narrows [t0, t1] to where p * t <= q; 0 when nothing is left. */
static int px__clip(double p, double q, double *t0, double *t1)
{
    if (p == 0)
        return q >= 0;
    double r = q / p;
    if (p < 0)
        *t0 = r > *t0 ? r : *t0;
    else
        *t1 = r < *t1 ? r : *t1;
    return *t0 <= *t1;
}

/* A line as n + 1 points (n = its longer side in pixels, rounded down, plus one), of which only
 * those near the image are visited: a footprint far larger than the photo costs no more than one
 * across it. */
static void px__line(pxvm_image *img, double x0, double y0, double x1, double y1, const uint8_t c[3])
{
    double dx = x1 - x0, dy = y1 - y0, len = fabs(dx) > fabs(dy) ? fabs(dx) : fabs(dy);
    if (!(len < 1e15) || !isfinite(x0) || !isfinite(y0))
        return; /* never from a checked plan */
    double t0 = 0, t1 = 1; /* the part within a pixel of the image */
    if (!px__clip(-dx, x0 + 1, &t0, &t1) || !px__clip(dx, img->w + 1 - x0, &t0, &t1) || !px__clip(-dy, y0 + 1, &t0, &t1) ||
        !px__clip(dy, img->h + 1 - y0, &t0, &t1))
        return;
    long long n = (long long)len + 1, lo = (long long)floor(t0 * (double)n) - 1, hi = (long long)ceil(t1 * (double)n) + 1;
    for (long long i = lo < 0 ? 0 : lo; i <= (hi < n ? hi : n); i++) {
        double t = (double)i / (double)n;
        px__plot(img, (int)floor(x0 + t * dx), (int)floor(y0 + t * dy), c);
    }
}

static const uint8_t pal[][3] = {{40, 255, 40}, {255, 255, 40}, {255, 150, 30}, {255, 50, 50}, {230, 60, 255}, {80, 160, 255}};

/* The photo, dimmed so that the footprints stand out. */
static int px__dimmed(const pxvm_image *photo, pxvm_image *out, pxvm_error *err)
{
    if (pxvm_image_alloc(out, photo->w, photo->h, err) < 0)
        return -1;
    for (size_t i = 0; i < (size_t)photo->w * (size_t)photo->h; i++) {
        for (int c = 0; c < 3; c++)
            out->px[4 * i + (size_t)c] = (uint8_t)(photo->px[4 * i + (size_t)c] * 3 / 5);
        out->px[4 * i + 3] = 255;
    }
    return 0;
}

int pxvm_geometry_overlay(const pxvm_image *photo, const int32_t *geom, int ntokens, int patch_w, int patch_h,
                          const int32_t *fix, int nfix, pxvm_image *out, pxvm_error *err)
{
    if (px__dimmed(photo, out, err) < 0)
        return -1;
    for (int i = 0; i < ntokens; i++) {
        const int32_t *g = geom + (size_t)i * PX_GEOM_INTS;
        if (g[4] < 0)
            continue; /* no instruction wrote this token */
        double cx = g[0] / 65536.0, cy = g[1] / 65536.0, hw = fabs(g[2] / 65536.0) * patch_w / 2;
        double hh = fabs(g[3] / 65536.0) * patch_h / 2;
        int l = (g[4] + 128) >> 8;
        const uint8_t *c = pal[l < 6 ? l : 5];
        if (hw == 0 && hh == 0) { /* GATHER: its centre entry */
            px__line(out, cx - 2, cy, cx + 2, cy, c);
            px__line(out, cx, cy - 2, cx, cy + 2, c);
            continue;
        }
        px__line(out, cx - hw, cy - hh, cx + hw, cy - hh, c);
        px__line(out, cx + hw, cy - hh, cx + hw, cy + hh, c);
        px__line(out, cx + hw, cy + hh, cx - hw, cy + hh, c);
        px__line(out, cx - hw, cy + hh, cx - hw, cy - hh, c);
    }
    /* the scanpath: discs at the fixations (the first one larger), joined in order */
    static const uint8_t white[3] = {255, 255, 255}, cyan[3] = {40, 230, 255};
    double r = (photo->w > photo->h ? photo->w : photo->h) / 80.0 + 3;
    for (int k = 0; k < nfix; k++) {
        double fx = fix[2 * k] / 65536.0, fy = fix[2 * k + 1] / 65536.0, rk = k == 0 ? 1.6 * r : r;
        if (k > 0)
            px__line(out, fix[2 * k - 2] / 65536.0, fix[2 * k - 1] / 65536.0, fx, fy, cyan);
        for (int a = 0; a < 64; a++) {
            double t0 = a * 2 * 3.14159265358979 / 64, t1 = (a + 1) * 2 * 3.14159265358979 / 64;
            for (double d = 0; d < 2; d += 1)
                px__line(out, fx + (rk - d) * cos(t0), fy + (rk - d) * sin(t0), fx + (rk - d) * cos(t1),
                         fy + (rk - d) * sin(t1), white);
        }
    }
    return 0;
}

int pxvm_plan_overlay(const pxvm_plan *p, const pxvm_image *photo, pxvm_image *out, pxvm_error *err)
{
    if (px__dimmed(photo, out, err) < 0)
        return -1;
    double sx = (double)photo->w / p->w, sy = (double)photo->h / p->h;
    for (int i = 0; i < p->ntokens; i++) {
        const pxvm_plan_token *t = &p->tokens[i];
        int l = (int)((t->lod_q8 + 128) >> 8);
        const uint8_t *c = pal[l < 6 ? l : 5];
        double x0, y0, x1, y1;
        px__footprint(p, t, &x0, &y0, &x1, &y1);
        x0 *= sx, x1 *= sx, y0 *= sy, y1 *= sy;
        px__line(out, x0, y0, x1, y0, c);
        px__line(out, x1, y0, x1, y1, c);
        px__line(out, x1, y1, x0, y1, c);
        px__line(out, x0, y1, x0, y0, c);
        if (t->taps > 1) { /* the major axis the taps follow */
            double hx = t->tdu * t->taps * p->patch / 2 * sx, hy = t->tdv * t->taps * p->patch / 2 * sy;
            px__line(out, t->cx * sx - hx, t->cy * sy - hy, t->cx * sx + hx, t->cy * sy + hy, c);
        }
    }
    return 0;
}
