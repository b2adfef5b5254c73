/* test_plan_hostile.c - every numeric field of a plan at the edges of its range: the last value
 * accepted at each end, the first one refused beyond it (the next double, or the next integer),
 * integers written as decimals, integers past 2^31 and 2^32 (that wrapped once), values of the
 * wrong type; each refusal is a plan error naming the field and the value as written. Accepted
 * edges are placed, compiled, summarized and drawn (the sanitizer build checks every conversion). */
#define _GNU_SOURCE /* open_memstream */
#include <math.h>
#include <stdlib.h>
#include <time.h>

#include "../../assembler/plan.h"
#include "test.h"

/* The shortest decimal that reads back as v (what the plan compiler prints in its messages). */
static void px__dec(double v, char *buf, size_t n)
{
    snprintf(buf, n, "%.15g", v);
    if (strtod(buf, NULL) != v)
        snprintf(buf, n, "%.17g", v);
}

/* The plan `tmpl` with '@' replaced by `val`. */
static void px__fill(const char *tmpl, const char *val, char *json, size_t n)
{
    const char *at = strchr(tmpl, '@');
    snprintf(json, n, "%.*s%s%s", (int)(at - tmpl), tmpl, val, at + 1);
}

static void px__accepted(const char *tmpl, const char *val, int line)
{
    char json[512];
    px__fill(tmpl, val, json, sizeof json);
    pxvm_plan p;
    pxvm_error err;
    memset(&err, 0, sizeof err);
    if (pxvm_plan_parse(json, strlen(json), "p.json", &p, &err) < 0) {
        px_test_fail(__FILE__, line, "%s: refused: %s", json, err.msg);
        return;
    }
    pxvm_image prog, photo, ov;
    if (pxvm_plan_compile(&p, &prog, &err) == 0) /* a 16384-wide image's slots exceed the default memory limit */
        pxvm_image_free(&prog);
    FILE *null = fopen("/dev/null", "w");
    if (null) {
        pxvm_plan_summary(&p, null);
        fclose(null);
    }
    if (pxvm_image_alloc(&photo, 64, 48, &err) == 0) {
        if (pxvm_plan_overlay(&p, &photo, &ov, &err) == 0)
            pxvm_image_free(&ov);
        pxvm_image_free(&photo);
    }
    pxvm_plan_free(&p);
}

/* Refused with a plan error containing "'field' = val" (field NULL: containing msg only). */
static void px__refused(const char *tmpl, const char *val, const char *field, const char *msg, int line)
{
    char json[512], want[160];
    px__fill(tmpl, val, json, sizeof json);
    pxvm_plan p;
    pxvm_error err;
    memset(&err, 0, sizeof err);
    if (pxvm_plan_parse(json, strlen(json), "p.json", &p, &err) == 0) {
        px_test_fail(__FILE__, line, "%s: accepted", json);
        pxvm_plan_free(&p);
        return;
    }
    if (field)
        snprintf(want, sizeof want, "'%s' = %s", field, val);
    else
        snprintf(want, sizeof want, "%s", msg);
    if (err.cls != PXVM_PLAN || !strstr(err.msg, "p.json: ") || !strstr(err.msg, want) || (msg && !strstr(err.msg, msg)))
        px_test_fail(__FILE__, line, "%s: '%s' does not say '%s'%s%s", json, err.msg, want, msg ? " and " : "", msg ? msg : "");
}

typedef struct {
    const char *field, *tmpl; /* '@': the value */
    int integer;
    double lo, hi;
} px__field;

static const px__field px__fields[] = {
    {"image[0]", "{\"image\": [@, 64], \"budget\": 1, \"scheme\": \"grid\"}", 1, 1, 16384},
    {"image[1]", "{\"image\": [64, @], \"budget\": 1, \"scheme\": \"grid\"}", 1, 1, 16384},
    {"fixation[0]", "{\"image\": [256, 256], \"budget\": 16, \"scheme\": \"grid\", \"fixation\": [@, 0.5]}", 0, 0, 1},
    {"fixation[1]", "{\"image\": [256, 256], \"budget\": 16, \"scheme\": \"logpolar\", \"fixation\": [0.5, @]}", 0, 0, 1},
    {"budget", "{\"image\": [16384, 16384], \"budget\": @, \"scheme\": \"grid\"}", 1, 1, PXVM_PLAN_MAX_TOKENS},
    {"patch", "{\"image\": [256, 256], \"budget\": 1, \"scheme\": \"grid\", \"patch\": @}", 1, 1, 256},
    {"levels", "{\"image\": [256, 256], \"budget\": 16, \"scheme\": \"grid\", \"levels\": @}", 1, 1, 9},
    {"width", "{\"image\": [256, 256], \"budget\": 16, \"scheme\": \"grid\", \"width\": @}", 1, 16, 4096},
    {"m0", "{\"image\": [256, 256], \"budget\": 16, \"scheme\": \"grid\", \"m0\": @}", 0, 1e-6, 1e6},
    {"e0", "{\"image\": [256, 256], \"budget\": 16, \"scheme\": \"grid\", \"e0\": @}", 0, 1e-6, 1e6},
    {"scale", "{\"image\": [256, 256], \"budget\": 16, \"scheme\": \"grid\", \"scale\": @}", 0, 1e-6, 1e6},
    {"a", "{\"image\": [256, 256], \"budget\": 16, \"scheme\": \"logpolar\", \"a\": @}", 0, 1e-3, 1e6},
    {"fovea_share", "{\"image\": [256, 256], \"budget\": 64, \"scheme\": \"v1\", \"fovea_share\": @}", 0, 0, 1},
    {"k", "{\"image\": [256, 256], \"budget\": 64, \"scheme\": \"v1\", \"k\": @}", 0, 1e-6, 100},
    {"e0_deg", "{\"image\": [256, 256], \"budget\": 64, \"scheme\": \"v1\", \"e0_deg\": @}", 0, 0, 1000},
    {"deg_per_image", "{\"image\": [256, 256], \"budget\": 64, \"scheme\": \"v1\", \"deg_per_image\": @}", 0, 1e-3, 1000},
    {"angle", "{\"image\": [256, 256], \"budget\": 16, \"scheme\": \"aniso\", \"angle\": @}", 0, -3600, 3600},
    {"elongation", "{\"image\": [256, 256], \"budget\": 16, \"scheme\": \"aniso\", \"elongation\": @}", 0, 1, 64},
    {"taps", "{\"image\": [256, 256], \"budget\": 16, \"scheme\": \"aniso\", \"taps\": @}", 1, 1, 16},
    {"regions[0].box[0]", "{\"image\": [256, 256], \"budget\": 16, \"scheme\": \"aniso\", \"regions\": [{\"box\": [@, 0, 1, 1], \"angle\": 30}]}", 0, 0, 1},
    {"regions[0].box[1]", "{\"image\": [256, 256], \"budget\": 16, \"scheme\": \"aniso\", \"regions\": [{\"box\": [0, @, 1, 1], \"angle\": 30}]}", 0, 0, 1},
    {"regions[0].box[2]", "{\"image\": [256, 256], \"budget\": 16, \"scheme\": \"aniso\", \"regions\": [{\"box\": [0, 0, @, 1], \"angle\": 30}]}", 0, 0, 1},
    {"regions[1].box[3]", "{\"image\": [256, 256], \"budget\": 16, \"scheme\": \"aniso\", \"regions\": [{\"box\": [0, 0, 1, 1], \"angle\": 0}, {\"box\": [0, 0, 1, @], \"angle\": 30}]}", 0, 0, 1},
    {"regions[0].angle", "{\"image\": [256, 256], \"budget\": 16, \"scheme\": \"aniso\", \"regions\": [{\"box\": [0, 0, 0.5, 1], \"angle\": @}]}", 0, -3600, 3600},
    {"scanpath", "{\"image\": [256, 256], \"budget\": 16, \"scheme\": \"logpolar\", \"scanpath\": @}", 1, 1, 8},
    {"inhibition", "{\"image\": [256, 256], \"budget\": 16, \"scheme\": \"v1\", \"scanpath\": 2, \"inhibition\": @}", 1, 0, 16384},
    {"video", "{\"image\": [256, 256], \"budget\": 16, \"scheme\": \"grid\", \"video\": @}", 1, 0, 255},
};

TEST(plan_every_numeric_field_at_its_edges)
{
    for (size_t i = 0; i < sizeof px__fields / sizeof px__fields[0]; i++) {
        const px__field *f = &px__fields[i];
        char v[64];
        if (f->integer) {
            long long lo = (long long)f->lo, hi = (long long)f->hi;
            snprintf(v, sizeof v, "%lld", lo);
            px__accepted(f->tmpl, v, __LINE__);
            snprintf(v, sizeof v, "%lld", hi);
            px__accepted(f->tmpl, v, __LINE__);
            snprintf(v, sizeof v, "%lld", lo - 1);
            px__refused(f->tmpl, v, f->field, NULL, __LINE__);
            snprintf(v, sizeof v, "%lld", hi + 1);
            px__refused(f->tmpl, v, f->field, NULL, __LINE__);
            snprintf(v, sizeof v, "%lld.0", lo); /* an integer written as a decimal */
            px__refused(f->tmpl, v, f->field, NULL, __LINE__);
            snprintf(v, sizeof v, "%lld", lo + (1ll << 32)); /* the same low 32 bits */
            px__refused(f->tmpl, v, f->field, NULL, __LINE__);
            snprintf(v, sizeof v, "%lld", lo + (1ll << 31));
            px__refused(f->tmpl, v, f->field, NULL, __LINE__);
            px__refused(f->tmpl, "-2147483648", f->field, NULL, __LINE__);
            px__refused(f->tmpl, "9223372036854775807", f->field, NULL, __LINE__);
        } else {
            px__dec(f->lo, v, sizeof v);
            px__accepted(f->tmpl, v, __LINE__);
            px__dec(f->hi, v, sizeof v);
            px__accepted(f->tmpl, v, __LINE__);
            px__dec(nextafter(f->lo, -INFINITY), v, sizeof v);
            px__refused(f->tmpl, v, f->field, "is outside", __LINE__);
            px__dec(nextafter(f->hi, INFINITY), v, sizeof v);
            px__refused(f->tmpl, v, f->field, "is outside", __LINE__);
            px__refused(f->tmpl, "1e+300", f->field, "is outside", __LINE__);
            px__refused(f->tmpl, "-1e+300", f->field, "is outside", __LINE__);
            px__refused(f->tmpl, "9223372036854775807", f->field, "is outside", __LINE__);
        }
        px__refused(f->tmpl, "\"1\"", f->field, "must be", __LINE__);
        px__refused(f->tmpl, "null", f->field, "must be", __LINE__);
        px__refused(f->tmpl, "true", f->field, "must be", __LINE__);
        char list[96];
        snprintf(list, sizeof list, "'%s' = a list: must be", f->field);
        px__refused(f->tmpl, "[1]", NULL, list, __LINE__);
        /* JSON has no NaN or infinity, and numbers beyond the doubles are malformed */
        px__refused(f->tmpl, "NaN", NULL, "malformed JSON", __LINE__);
        px__refused(f->tmpl, "1e400", NULL, "malformed JSON", __LINE__);
        px__refused(f->tmpl, "99999999999999999999", NULL, "malformed JSON", __LINE__);
    }
}

TEST(plan_hostile_values_found_by_the_red_team)
{
    /* 4294967360 = 2^32 + 64 wrapped to 64 tokens; a region's angle of 1e300 gave NaN footprints */
    px__refused("{\"image\": [1000, 1000], \"budget\": @, \"scheme\": \"grid\"}", "4294967360", "budget",
                "a plan has at most 65536 tokens", __LINE__);
    px__refused("{\"image\": [100, 100], \"budget\": 10, \"scheme\": \"aniso\", \"angle\": @}", "1e+300", "angle",
                "is outside -3600..3600", __LINE__);
    px__refused("{\"image\": [100, 100], \"budget\": 10, \"scheme\": \"aniso\", \"regions\": [{\"box\": [0, 0, 1, 1], \"angle\": @}]}",
                "1e+300", "regions[0].angle", "is outside -3600..3600", __LINE__);
    px__refused("{\"image\": [100, 100], \"budget\": @, \"scheme\": \"grid\"}", "-4294967295", "budget",
                "a plan needs at least one token", __LINE__);
    px__refused("{\"image\": [100, 100], \"budget\": 10, \"scheme\": \"grid\", \"patch\": @}", "4294967312", "patch",
                "must be an integer in 1..256", __LINE__);
    px__refused("{\"image\": [@, 100], \"budget\": 1, \"scheme\": \"grid\"}", "-100", "image[0]",
                "must be an integer in 1..16384", __LINE__);
    px__refused("{\"image\": [100, 100], \"budget\": 10, \"scheme\": \"aniso\", \"regions\": [{\"box\": [0.6, 0, @, 1], \"angle\": 0}]}",
                "0.5", NULL, "'regions[0].box' = [0.6, 0, 0.5, 1]: must be [x0, y0, x1, y1] with x0 <= x1, y0 <= y1", __LINE__);
    px__refused("{\"image\": [100, 100], \"budget\": 10, \"scheme\": \"grid\", \"budget\": @}", "4294967360", NULL,
                "duplicate object key", __LINE__);
    px__refused("{\"image\": [100, 100], \"budget\": 10, \"scheme\": \"grid\", \"scale\": @}", "\"fast\"", "scale",
                "must be \"auto\" or a number in 1e-06..1e+06", __LINE__);
    px__refused("{\"image\": [100, 100], \"scheme\": \"grid\", \"budget\": @}", "1.6e1", NULL,
                "'budget' = 16.0: must be an integer in 1..65536", __LINE__);
}

TEST(plan_summary_and_overlay_of_huge_footprints_are_quick)
{
    /* 65536 tokens whose footprints each span the image 64 times over (LOD 14, the scale's
     * extremes), drawn over a 16384-wide strip: the coverage took minutes cell by cell and the
     * overlay seconds point by point; now tokens plus cells, and only the points near the photo */
    static const char *const plans[] = {
        "{\"image\": [16384, 16384], \"budget\": 65536, \"patch\": 64, \"scheme\": \"grid\", \"m0\": 1e-6, \"e0\": 1e6, \"scale\": 1e-6}",
        "{\"image\": [16384, 1], \"budget\": 1, \"scheme\": \"aniso\", \"patch\": 256, \"m0\": 1e-6, \"e0\": 1e6, \"scale\": 1e-6, "
        "\"elongation\": 64, \"taps\": 16, \"regions\": [{\"box\": [0, 0, 1, 1], \"angle\": 3600}]}",
    };
    for (int i = 0; i < 2; i++) {
        pxvm_plan p;
        pxvm_error err;
        if (pxvm_plan_parse(plans[i], strlen(plans[i]), "huge.json", &p, &err) < 0) {
            px_test_fail(__FILE__, __LINE__, "%s", err.msg);
            continue;
        }
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        char *text = NULL;
        size_t len = 0;
        FILE *mem = open_memstream(&text, &len);
        pxvm_plan_summary(&p, mem);
        fclose(mem);
        CHECK_STR(text, "covered: 100.0% of the image");
        free(text);
        pxvm_image photo = {0, 0, NULL}, ov = {0, 0, NULL};
        CHECK(pxvm_image_alloc(&photo, 640, 480, &err) == 0 && pxvm_plan_overlay(&p, &photo, &ov, &err) == 0);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
        if (s > 20)
            px_test_fail(__FILE__, __LINE__, "%s: summary and overlay took %.1f s", plans[i], s);
        pxvm_image_free(&photo);
        pxvm_image_free(&ov);
        pxvm_plan_free(&p);
    }
}
