/* plan_schemes.c - where a plan's tokens go: the schemes (grid, aniso, uniform, logpolar, v1)
 * place each token (centre, LOD and the step that follows it, aniso's taps) with dmath's
 * deterministic functions, and the atlas is sized for them. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dmath.h"
#include "plan_internal.h"

/* A token at (cx, cy) texels with LOD `lod` (clamped to the plan's levels): the stored LOD and
 * the step 2^LOD that follows it exactly, so one output pixel covers one texel of that level. */
static pxvm_plan_token px__token(const pxvm_plan *p, double cx, double cy, double lod)
{
    pxvm_plan_token t;
    memset(&t, 0, sizeof t);
    t.cx = cx;
    t.cy = cy;
    t.lod_q8 = (uint32_t)llround(px_plan_clampd(lod, 0.0, (double)(p->levels - 1)) * 256.0);
    t.step = dm_exp2((double)t.lod_q8 / 256.0);
    t.du = t.dv = t.step;
    t.taps = 1;
    return t;
}

static int px__isqrt_ceil(int n)
{
    int g = 0;
    while (g * g < n)
        g++;
    return g;
}

/* ---- schemes -------------------------------------------------------------------------------- */

/* grid: cortical magnification M(e) = m0 / (scale * e + e0) over a g x g grid of patch centres
 * (the first `budget` in row order), e the distance from the fixation in normalized image units;
 * LOD = clamp(-log2 M, 0, levels-1). scale "auto" (the default) gives the farthest token the LOD
 * at which its footprint (or, for aniso, its major axis) spans one grid cell: the periphery is
 * tiled without gaps or overlap and the tokens grow finer towards the fixation. On large images
 * that reaches the last levels; scale 1 is the compatibility setting of foveate273. */
static void px__grid_lods(pxvm_plan *p, int n, const double *x, const double *y, double *lod)
{
    double emax = 0;
    for (int i = 0; i < n; i++) {
        double e = sqrt((x[i] - p->fx) * (x[i] - p->fx) + (y[i] - p->fy) * (y[i] - p->fy));
        emax = e > emax ? e : emax;
    }
    if (p->scale_auto) {
        int g = px__isqrt_ceil(p->budget);
        double cell = (p->w > p->h ? p->w : p->h) / (double)g;
        double span = cell / (p->patch * (!strcmp(p->scheme, "aniso") ? p->elongation : 1.0));
        double target = px_plan_clampd(span > 1 ? dm_log2(span) : 0.0, 0.0, (double)(p->levels - 1));
        double top = p->m0 * dm_exp2(target) - p->e0;
        p->scale = emax > 0 && top > 0 ? top / emax : 1.0;
    }
    for (int i = 0; i < n; i++) {
        double e = sqrt((x[i] - p->fx) * (x[i] - p->fx) + (y[i] - p->fy) * (y[i] - p->fy));
        lod[i] = -dm_log2(p->m0 / (p->scale * e + p->e0));
    }
}

static int px__grid_positions(pxvm_plan *p, double **xs, double **ys)
{
    int g = px__isqrt_ceil(p->budget), n = p->budget;
    *xs = malloc(sizeof(double) * (size_t)n);
    *ys = malloc(sizeof(double) * (size_t)n);
    if (!*xs || !*ys)
        return -1;
    for (int i = 0; i < n; i++) {
        (*xs)[i] = ((double)(i % g) + 0.5) / (double)g;
        (*ys)[i] = ((double)(i / g) + 0.5) / (double)g;
    }
    return n;
}

static int px__scheme_grid(pxvm_plan *p)
{
    double *x, *y;
    int n = px__grid_positions(p, &x, &y);
    double *lod = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    if (n < 0 || !lod) {
        free(x), free(y), free(lod);
        return -1;
    }
    px__grid_lods(p, n, x, y, lod);
    int aniso = !strcmp(p->scheme, "aniso");
    for (int i = 0; i < n; i++) {
        pxvm_plan_token t = px__token(p, x[i] * p->w, y[i] * p->h, lod[i]);
        if (aniso) {
            /* the footprint: minor axis = the grid's step, major = elongation x minor along the
             * text direction; the LOD follows the minor axis, taps cover the major one */
            double deg = p->angle_deg;
            for (int r = 0; r < p->nregions; r++)
                if (x[i] >= p->region[r][0] && x[i] < p->region[r][2] && y[i] >= p->region[r][1] && y[i] < p->region[r][3])
                    deg = p->region[r][4];
            double a = deg * dm_pi() / 180.0, c = dm_cos(a), s = dm_sin(a), major = p->elongation * t.step;
            t.angle = a;
            t.taps = p->taps;
            t.tdu = major * c / p->taps;
            t.tdv = major * s / p->taps;
            t.du = major * fabs(c) + t.step * fabs(s);
            t.dv = major * fabs(s) + t.step * fabs(c);
        }
        p->tokens[p->ntokens++] = t;
    }
    free(x), free(y), free(lod);
    return 0;
}

/* uniform: the full-resolution grid, every patch x patch tile at LOD 0. */
static int px__scheme_uniform(pxvm_plan *p)
{
    int tx = (p->w + p->patch - 1) / p->patch, ty = (p->h + p->patch - 1) / p->patch;
    for (int j = 0; j < ty; j++)
        for (int i = 0; i < tx; i++)
            p->tokens[p->ntokens++] = px__token(p, (double)(i * p->patch) + p->patch / 2.0, (double)(j * p->patch) + p->patch / 2.0, 0);
    return 0;
}

static double px__rmax(const pxvm_plan *p)
{
    if (p->relative) /* every fixation: the farthest corner is at most the diagonal away */
        return sqrt((double)p->w * p->w + (double)p->h * p->h);
    double fx = p->fx * p->w, fy = p->fy * p->h, r = 0;
    for (int c = 0; c < 4; c++) {
        double dx = (c & 1 ? p->w : 0) - fx, dy = (c & 2 ? p->h : 0) - fy, d = sqrt(dx * dx + dy * dy);
        r = d > r ? d : r;
    }
    return r;
}

/* logpolar: rings uniform in log(r + a) out to the farthest corner, wedges uniform in angle,
 * rings x wedges <= budget with cells about square; the LOD makes a token's patch span its cell. */
static int px__scheme_logpolar(pxvm_plan *p)
{
    const double ln2 = 0.6931471805599453094172321214581766, two_pi = 2.0 * dm_pi();
    double a = p->ring_a, rmax = px__rmax(p), span = (dm_log2(rmax + a) - dm_log2(a)) * ln2;
    int rings = (int)(sqrt((double)p->budget * span / two_pi) + 0.5);
    rings = rings < 1 ? 1 : (rings > p->budget ? p->budget : rings);
    int wedges = p->budget / rings;
    double drho = span / rings;
    for (int k = 0; k < rings; k++) {
        double rho = dm_log2(a) * ln2 + ((double)k + 0.5) * drho, r = dm_exp2(rho / ln2) - a;
        double dr = (r + a) * drho, arc = two_pi * r / wedges, cell = dr > arc ? dr : arc;
        double lod = cell > p->patch ? dm_log2(cell / p->patch) : 0.0;
        for (int j = 0; j < wedges; j++) {
            double th = two_pi * ((double)j + 0.5 + 0.5 * (k & 1)) / wedges;
            p->tokens[p->ntokens++] = px__token(p, p->fx * p->w + r * dm_cos(th), p->fy * p->h + r * dm_sin(th), lod);
        }
    }
    return 0;
}

/* v1: a fovea share of the budget on a square grid at LOD 0 around the fixation; the rest on rings
 * outward. A token's cell is its receptive field k (e + e0) degrees at eccentricity e
 * (deg_per_image degrees across the image width) times one packing factor, fitted (bisection)
 * so that the periphery's tokens just reach the farthest corner; the cell sets the ring spacing
 * and the token's LOD (its patch spans the cell). Returns the tokens the periphery needs at
 * packing `f`, placing them when `place` is set. */
static int px__v1_rings(pxvm_plan *p, double r0, double f, int place, int limit)
{
    const double two_pi = 2.0 * dm_pi(), ppd = p->w / p->deg_per_image, rmax = px__rmax(p);
    int n = 0;
    for (int ring = 0; r0 < rmax && n <= limit; ring++) {
        double rf = p->k * (r0 / ppd + p->e0_deg) * ppd; /* pixels */
        double cell = f * (rf > 1 ? rf : 1), rc = r0 + cell / 2;
        double lod = cell > p->patch ? dm_log2(cell / p->patch) : 0; /* the token spans its cell */
        int m = (int)(two_pi * rc / cell);
        m = m < 1 ? 1 : m;
        for (int j = 0; j < m && n <= limit; j++, n++)
            if (place && p->ntokens < p->budget) {
                double th = two_pi * ((double)j + 0.5 * (ring & 1)) / m;
                p->tokens[p->ntokens++] = px__token(p, p->fx * p->w + rc * dm_cos(th), p->fy * p->h + rc * dm_sin(th), lod);
            }
        r0 += cell;
    }
    return n;
}

static int px__scheme_v1(pxvm_plan *p)
{
    int nf = (int)llround(p->fovea_share * p->budget), g = px__isqrt_ceil(nf);
    for (int i = 0; i < nf; i++)
        p->tokens[p->ntokens++] = px__token(p, p->fx * p->w + ((double)(i % g) - (g - 1) / 2.0) * p->patch,
                                            p->fy * p->h + ((double)(i / g) - (g - 1) / 2.0) * p->patch, 0);
    int np = p->budget - nf;
    if (np <= 0)
        return 0;
    double r0 = g * p->patch / 2.0, lo = 1e-3, hi = 1e3; /* count(f) falls as f grows */
    for (int it = 0; it < 60; it++) {
        double mid = sqrt(lo * hi);
        if (px__v1_rings(p, r0, mid, 0, np) > np)
            lo = mid;
        else
            hi = mid;
    }
    px__v1_rings(p, r0, hi, 1, np);
    return 0;
}

int px_plan_place(pxvm_plan *p, pxvm_error *err)
{
    int cap = p->budget > 0 ? p->budget : 1;
    if (!strcmp(p->scheme, "uniform"))
        cap = ((p->w + p->patch - 1) / p->patch) * ((p->h + p->patch - 1) / p->patch);
    p->tokens = calloc((size_t)cap, sizeof(pxvm_plan_token));
    if (!p->tokens)
        return pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)cap);
    int rc = !strcmp(p->scheme, "logpolar") ? px__scheme_logpolar(p)
             : !strcmp(p->scheme, "v1")     ? px__scheme_v1(p)
             : !strcmp(p->scheme, "uniform") ? px__scheme_uniform(p)
                                             : px__scheme_grid(p); /* grid, aniso */
    if (rc < 0)
        return pxvm_fail(err, PXE_NOMEM, -1, -1, 0ull);
    int all = p->ntokens * (p->scanpath ? p->scanpath : 1);
    if (all > PXVM_PLAN_MAX_TOKENS)
        return px_plan_fail(err, p, "%d tokens x %d fixations: a plan has at most %d", p->ntokens, p->scanpath,
                         PXVM_PLAN_MAX_TOKENS);
    p->cols = px__isqrt_ceil(all);
    p->rows = (all + p->cols - 1) / p->cols;
    if ((long)p->cols * p->patch > 16384)
        return px_plan_fail(err, p, "the atlas of %d tokens of %dx%d would be %ld pixels wide; the limit is 16384", p->ntokens,
                         p->patch, p->patch, (long)p->cols * p->patch);
    return 0;
}
