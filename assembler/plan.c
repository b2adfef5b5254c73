/* plan.c - allocation plans: JSON (jansson) -> token placement -> pixel program.
 * Floating point happens only in the plan compiler, in a fixed order, with dmath's deterministic
 * functions; every result is quantized (Q16 positions and steps, Q8.8 LODs) before it reaches a
 * program. Here: reading and checking a plan's JSON, its defaults and the entry points that parse
 * and load a plan; placement is in plan_schemes.c, the program in plan_program.c, the summary
 * and overlays in plan_overlay.c (plan_internal.h: what they share). */
#include "plan_internal.h"

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "../isa/px_sem.h"

/* ---- JSON ----------------------------------------------------------------------------------- */

static const char *const px__keys[] = {"image", "fixation", "budget", "patch", "levels", "scheme", "width",
                                       "m0", "e0", "scale", "a", "fovea_share", "k", "e0_deg",
                                       "deg_per_image", "angle", "elongation", "taps", "regions", "scanpath", "inhibition", "video", "comment",
                                       "size", "bounds"};

/* A JSON value as the plan wrote it, for messages: 4294967360, 1e+300, "fast", a list... */
static const char *px__jdesc(json_t *j, char *buf, size_t n)
{
    if (json_is_integer(j)) {
        snprintf(buf, n, "%lld", (long long)json_integer_value(j));
    } else if (json_is_real(j)) {
        snprintf(buf, n, "%.15g", json_real_value(j));
        if (strtod(buf, NULL) != json_real_value(j))
            snprintf(buf, n, "%.17g", json_real_value(j));
        if (!strpbrk(buf, ".eEn")) /* 16.0 is written as a decimal: it is not an integer */
            snprintf(buf + strlen(buf), n - strlen(buf), ".0");
    } else if (json_is_string(j)) {
        snprintf(buf, n, "\"%.40s\"%s", json_string_value(j), strlen(json_string_value(j)) > 40 ? "..." : "");
    } else {
        snprintf(buf, n, "%s", json_is_true(j) ? "true" : json_is_false(j) ? "false" : json_is_null(j) ? "null"
                               : json_is_array(j) ? "a list" : "an object");
    }
    return buf;
}

/* A number in lo..hi, checked as a double before anything else is done with it (finite: the
 * JSON reader gives no NaN or infinity and refuses numbers beyond the doubles, but the check
 * does not rely on that). `field` names it in messages. */
static int px__num_at(json_t *j, const char *field, double lo, double hi, double *v, const pxvm_plan *p, pxvm_error *err)
{
    char d[96];
    if (!json_is_number(j))
        return px_plan_fail(err, p, "'%s' = %s: must be a number in %g..%g", field, px__jdesc(j, d, sizeof d), lo, hi);
    double x = json_number_value(j);
    if (!isfinite(x) || !(x >= lo && x <= hi))
        return px_plan_fail(err, p, "'%s' = %s is outside %g..%g", field, px__jdesc(j, d, sizeof d), lo, hi);
    *v = x;
    return 0;
}

/* An integer in lo..hi: a JSON integer (16, not 16.0 or 1.6e1), compared as the reader's 64-bit
 * integer before it becomes an int. */
static int px__int_at(json_t *j, const char *field, int lo, int hi, int *v, const pxvm_plan *p, pxvm_error *err)
{
    char d[96];
    if (!json_is_integer(j) || json_integer_value(j) < lo || json_integer_value(j) > hi)
        return px_plan_fail(err, p, "'%s' = %s: must be an integer in %d..%d", field, px__jdesc(j, d, sizeof d), lo, hi);
    *v = (int)json_integer_value(j);
    return 0;
}

/* An optional field of the plan object: left as it is when absent. */
static int px__num(json_t *o, const char *key, double lo, double hi, double *v, const pxvm_plan *p, pxvm_error *err)
{
    json_t *j = json_object_get(o, key);
    return j ? px__num_at(j, key, lo, hi, v, p, err) : 0;
}

static int px__int(json_t *o, const char *key, int lo, int hi, int *v, const pxvm_plan *p, pxvm_error *err)
{
    json_t *j = json_object_get(o, key);
    return j ? px__int_at(j, key, lo, hi, v, p, err) : 0;
}

static int px__parse_fields(json_t *root, pxvm_plan *p, pxvm_error *err)
{
    const char *key;
    json_t *val;
    json_object_foreach(root, key, val)
    {
        size_t k = 0;
        while (k < sizeof px__keys / sizeof px__keys[0] && strcmp(px__keys[k], key))
            k++;
        if (k == sizeof px__keys / sizeof px__keys[0])
            return px_plan_fail(err, p, "unknown field '%s'", key);
    }
    json_t *img = json_object_get(root, "image");
    if (!json_is_array(img) || json_array_size(img) != 2)
        return px_plan_fail(err, p, "'image' must be [width, height] with sides 1..16384");
    if (px__int_at(json_array_get(img, 0), "image[0]", 1, 16384, &p->w, p, err) < 0 ||
        px__int_at(json_array_get(img, 1), "image[1]", 1, 16384, &p->h, p, err) < 0)
        return -1;
    json_t *size = json_object_get(root, "size"), *bounds = json_object_get(root, "bounds");
    if (size) {
        if (!json_is_string(size) || strcmp(json_string_value(size), "any"))
            return px_plan_fail(err, p, "'size' must be \"any\" (an any-size image input; absent: the image's size only)");
        p->any_size = 1;
    }
    if (bounds) {
        if (!p->any_size)
            return px_plan_fail(err, p, "'bounds' needs \"size\": \"any\"");
        if (!json_is_object(bounds))
            return px_plan_fail(err, p, "'bounds' must be {\"min\": side, \"max\": side, \"pixels\": count}");
        const char *bk;
        json_t *bv;
        json_object_foreach(bounds, bk, bv)
        {
            if (strcmp(bk, "min") && strcmp(bk, "max") && strcmp(bk, "pixels"))
                return px_plan_fail(err, p, "unknown field 'bounds.%s' (min, max, pixels)", bk);
        }
        int px = 0;
        if (px__int(bounds, "min", 1, 65535, &p->any_min, p, err) < 0 ||
            px__int(bounds, "max", 1, 65535, &p->any_max, p, err) < 0 ||
            px__int(bounds, "pixels", 1, 2147483647, &px, p, err) < 0)
            return -1;
        p->any_pixels = (uint32_t)px;
    }
    json_t *fix = json_object_get(root, "fixation");
    if (json_is_string(fix) && !strcmp(json_string_value(fix), "relative")) {
        p->relative = 1;
        p->fx = p->fy = 0; /* token centres are offsets from the fixation */
    } else if (fix) {
        if (!json_is_array(fix) || json_array_size(fix) != 2)
            return px_plan_fail(err, p, "'fixation' must be [x, y], normalized, or \"relative\"");
        if (px__num_at(json_array_get(fix, 0), "fixation[0]", 0, 1, &p->fx, p, err) < 0 ||
            px__num_at(json_array_get(fix, 1), "fixation[1]", 0, 1, &p->fy, p, err) < 0)
            return -1;
    }
    json_t *scheme = json_object_get(root, "scheme");
    if (!json_is_string(scheme))
        return px_plan_fail(err, p, "'scheme' is missing (grid, logpolar, v1, aniso or uniform)");
    const char *sn = json_string_value(scheme);
    if (strcmp(sn, "grid") && strcmp(sn, "logpolar") && strcmp(sn, "v1") && strcmp(sn, "aniso") && strcmp(sn, "uniform"))
        return px_plan_fail(err, p, "unknown scheme '%s' (expected grid, logpolar, v1, aniso or uniform)", sn);
    snprintf(p->scheme, sizeof p->scheme, "%s", sn);
    int full = px_mip_levels(p->w, p->h);
    p->levels = full;
    if (px__int(root, "patch", 1, 256, &p->patch, p, err) < 0 || px__int(root, "levels", 1, full, &p->levels, p, err) < 0 ||
        px__int(root, "width", 16, 4096, &p->width, p, err) < 0 || px__num(root, "m0", 1e-6, 1e6, &p->m0, p, err) < 0 ||
        px__num(root, "e0", 1e-6, 1e6, &p->e0, p, err) < 0 || px__num(root, "a", 1e-3, 1e6, &p->ring_a, p, err) < 0 ||
        px__num(root, "fovea_share", 0, 1, &p->fovea_share, p, err) < 0 || px__num(root, "k", 1e-6, 100, &p->k, p, err) < 0 ||
        px__num(root, "e0_deg", 0, 1000, &p->e0_deg, p, err) < 0 ||
        px__num(root, "deg_per_image", 1e-3, 1000, &p->deg_per_image, p, err) < 0 ||
        px__num(root, "angle", -3600, 3600, &p->angle_deg, p, err) < 0 ||
        px__num(root, "elongation", 1, 64, &p->elongation, p, err) < 0 || px__int(root, "taps", 1, PX_MAX_TAPS, &p->taps, p, err) < 0)
        return -1;
    if (px__int(root, "scanpath", 1, PX_FIX_REGS, &p->scanpath, p, err) < 0 || px__int(root, "video", 0, 255, &p->video, p, err) < 0)
        return -1;
    if (p->scanpath) {
        if (fix && !p->relative)
            return px_plan_fail(err, p, "a scanpath samples around fixations found at run time: 'fixation' must be "
                                     "\"relative\" (or left out)");
        p->relative = 1;
        p->fx = p->fy = 0;
    }
    p->ior_radius = (p->w > p->h ? p->w : p->h) / 8;
    if (px__int(root, "inhibition", 0, 16384, &p->ior_radius, p, err) < 0)
        return -1;
    if (p->relative && strcmp(p->scheme, "logpolar") && strcmp(p->scheme, "v1"))
        return px_plan_fail(err, p,
                         "scheme %s places its tokens on the image, not around the gaze: fixation-relative plans "
                         "are logpolar or v1",
                         p->scheme);
    if (p->relative && px_mip_levels(p->w, p->h) < 2 && p->scanpath)
        return px_plan_fail(err, p, "a scanpath needs saliency, which needs an image of at least 2x1");
    json_t *scale = json_object_get(root, "scale");
    if (scale && !(json_is_string(scale) && !strcmp(json_string_value(scale), "auto"))) {
        char d[96];
        if (!json_is_number(scale))
            return px_plan_fail(err, p, "'scale' = %s: must be \"auto\" or a number in 1e-06..1e+06", px__jdesc(scale, d, sizeof d));
        p->scale_auto = 0;
        if (px__num(root, "scale", 1e-6, 1e6, &p->scale, p, err) < 0)
            return -1;
    }
    json_t *regions = json_object_get(root, "regions");
    if (regions) {
        if (!json_is_array(regions) || json_array_size(regions) > PXVM_PLAN_MAX_REGIONS)
            return px_plan_fail(err, p, "'regions' must be a list of at most %d {\"box\": [x0, y0, x1, y1], \"angle\": deg}", PXVM_PLAN_MAX_REGIONS);
        size_t i;
        json_t *r;
        json_array_foreach(regions, i, r)
        {
            json_t *box = json_object_get(r, "box"), *ang = json_object_get(r, "angle");
            if (!json_is_array(box) || json_array_size(box) != 4 || !ang)
                return px_plan_fail(err, p, "region %zu must be {\"box\": [x0, y0, x1, y1], \"angle\": deg}", i);
            char field[48];
            for (int c = 0; c < 4; c++) {
                snprintf(field, sizeof field, "regions[%zu].box[%d]", i, c);
                if (px__num_at(json_array_get(box, (size_t)c), field, 0, 1, &p->region[i][c], p, err) < 0)
                    return -1;
            }
            if (p->region[i][0] > p->region[i][2] || p->region[i][1] > p->region[i][3])
                return px_plan_fail(err, p, "'regions[%zu].box' = [%g, %g, %g, %g]: must be [x0, y0, x1, y1] with x0 <= x1, y0 <= y1",
                                 i, p->region[i][0], p->region[i][1], p->region[i][2], p->region[i][3]);
            snprintf(field, sizeof field, "regions[%zu].angle", i);
            if (px__num_at(ang, field, -3600, 3600, &p->region[i][4], p, err) < 0)
                return -1;
        }
        p->nregions = (int)json_array_size(regions);
    }
    int tx = (p->w + p->patch - 1) / p->patch, ty = (p->h + p->patch - 1) / p->patch, fullres = tx * ty;
    json_t *budget = json_object_get(root, "budget");
    char d[96];
    if (!budget && !strcmp(p->scheme, "uniform"))
        p->budget = fullres;
    else if (!budget)
        return px_plan_fail(err, p, "'budget' (the number of tokens) is missing");
    else if (json_is_integer(budget) && json_integer_value(budget) < 1)
        return px_plan_fail(err, p, "'budget' = %s: a plan needs at least one token", px__jdesc(budget, d, sizeof d));
    else if (json_is_integer(budget) && json_integer_value(budget) > PXVM_PLAN_MAX_TOKENS)
        return px_plan_fail(err, p, "'budget' = %s: a plan has at most %d tokens", px__jdesc(budget, d, sizeof d),
                         PXVM_PLAN_MAX_TOKENS);
    else if (px__int_at(budget, "budget", 1, PXVM_PLAN_MAX_TOKENS, &p->budget, p, err) < 0)
        return -1;
    if (!strcmp(p->scheme, "uniform") && fullres > PXVM_PLAN_MAX_TOKENS)
        return px_plan_fail(err, p, "%d tokens: a plan has at most %d", fullres, PXVM_PLAN_MAX_TOKENS);
    if (p->budget > fullres)
        return px_plan_fail(err, p,
                         "budget %d is larger than the image allows: %dx%d in %dx%d patches is %d tokens at full resolution",
                         p->budget, p->w, p->h, p->patch, p->patch, fullres);
    if (!strcmp(p->scheme, "uniform") && p->budget < fullres)
        return px_plan_fail(err, p, "budget %d: the uniform scheme needs %d tokens for %dx%d at %dx%d", p->budget, fullres, p->w,
                         p->h, p->patch, p->patch);
    /* an any-size input is read only by PYRAMID and SAMPLE/ANISO (SPEC V-ANY-6): no DIFF, no SALIENCY */
    if (p->any_size && (p->video >= 0 || p->scanpath))
        return px_plan_fail(err, p, "\"size\": \"any\" is for still images without a scanpath (%s reads the image "
                                    "at its reference size only)", p->video >= 0 ? "video" : "scanpath");
    return 0;
}

static void px__defaults(pxvm_plan *p, const char *name)
{
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "%s", name);
    p->fx = p->fy = 0.5;
    p->patch = 16;
    p->width = 64;
    p->m0 = 1.0, p->e0 = 0.5, p->scale = 1.0, p->scale_auto = 1;
    p->ring_a = 8.0;
    p->fovea_share = 0.2, p->k = 0.14, p->e0_deg = 0.75, p->deg_per_image = 40.0;
    p->angle_deg = 0, p->elongation = 4.0, p->taps = 4;
    p->video = -1;
}

int pxvm_plan_parse(const char *text, size_t len, const char *name, pxvm_plan *p, pxvm_error *err)
{
    return pxvm_plan_parse_scanpath(text, len, name, 0, p, err);
}

int pxvm_plan_parse_scanpath(const char *text, size_t len, const char *name, int scanpath, pxvm_plan *p,
                             pxvm_error *err)
{
    px__defaults(p, name);
    json_error_t jerr;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root)
        return px_plan_fail(err, p, "malformed JSON at line %d, column %d: %s", jerr.line, jerr.column, jerr.text);
    if (scanpath && json_is_object(root)) { /* the plan, made relative, around K fixations found at run time */
        json_object_set_new(root, "scanpath", json_integer(scanpath));
        json_object_set_new(root, "fixation", json_string("relative"));
    }
    int rc = json_is_object(root) ? px__parse_fields(root, p, err) : px_plan_fail(err, p, "a plan is a JSON object {...}");
    json_decref(root);
    if (rc == 0)
        rc = px_plan_place(p, err);
    if (rc < 0)
        pxvm_plan_free(p);
    return rc;
}

int pxvm_plan_load(const char *path, pxvm_plan *p, pxvm_error *err)
{
    uint8_t *data;
    size_t len;
    if (pxvm_read_file(path, 1u << 24, &data, &len, err) < 0)
        return -1;
    int rc = pxvm_plan_parse((const char *)data, len, path, p, err);
    free(data);
    return rc;
}

void pxvm_plan_free(pxvm_plan *p)
{
    free(p->tokens);
    p->tokens = NULL;
    p->ntokens = 0;
}
