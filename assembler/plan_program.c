/* plan_program.c - a placed plan as a pixel program: its slots, the video stage (DIFF, UPDATE),
 * PYRAMID, the scanpath's saliency and ARGMAX fixations, one SAMPLE or ANISO per token, HALT
 * (positions quantized to Q16 here); the program image, validated against limits. */
#include <math.h>
#include <string.h>

#include "../isa/px_sem.h"
#include "plan_internal.h"

static int32_t px__q16(double v)
{
    double q = v * 65536.0;
    if (q != q) /* NaN: never from a checked plan; 0 rather than an undefined conversion */
        return 0;
    if (q > 2147483647.0)
        return INT32_MAX;
    if (q < -2147483648.0)
        return INT32_MIN;
    return (int32_t)llround(q);
}

/* ---- the program ---------------------------------------------------------------------------- */

/* The saliency stage of a scanpath plan (after Itti, Koch and Niebur 1998): centre levels
 * c = m-2 .. m against surrounds c+3 and c+4, maps at level m = min(4, levels-1), the six maps
 * added with equal weights; pairs beyond the pyramid are left out (small images get
 * c = 0 against the last level). Returns the map slot. */
static int px__saliency_level(const pxvm_plan *p)
{
    int levels = px_mip_levels(p->w, p->h);
    return levels - 1 < 4 ? levels - 1 : 4;
}

static void px__build_saliency(const pxvm_plan *p, pxvm_builder *b, int img, int map)
{
    int levels = px_mip_levels(p->w, p->h), m = px__saliency_level(p);
    int32_t f[PXI_MAX_FIELDS];
    int n = 0;
    for (int c = m - 2 < 0 ? 0 : m - 2; c <= m; c++)
        for (int d = 3; d <= 4; d++) {
            if (c + d >= levels)
                continue;
            memset(f, 0, sizeof f);
            f[PX_FI(SALIENCY, src)] = img, f[PX_FI(SALIENCY, dst)] = map, f[PX_FI(SALIENCY, accumulate)] = n > 0;
            f[PX_FI(SALIENCY, centre)] = c, f[PX_FI(SALIENCY, surround)] = c + d, f[PX_FI(SALIENCY, map)] = m;
            f[PX_FI(SALIENCY, shift)] = 3;
            f[PX_FI(SALIENCY, w_lum)] = f[PX_FI(SALIENCY, w_rg)] = f[PX_FI(SALIENCY, w_by)] = 1;
            pxvm_build_insn(b, PX_OP_SALIENCY, f);
            n++;
        }
    if (n == 0) { /* a pyramid too short for Itti's pairs */
        memset(f, 0, sizeof f);
        f[PX_FI(SALIENCY, src)] = img, f[PX_FI(SALIENCY, dst)] = map, f[PX_FI(SALIENCY, surround)] = levels - 1;
        f[PX_FI(SALIENCY, map)] = m, f[PX_FI(SALIENCY, shift)] = 3;
        f[PX_FI(SALIENCY, w_lum)] = f[PX_FI(SALIENCY, w_rg)] = f[PX_FI(SALIENCY, w_by)] = 1;
        pxvm_build_insn(b, PX_OP_SALIENCY, f);
    }
}

void pxvm_plan_build(const pxvm_plan *p, pxvm_builder *b)
{
    int copies = p->scanpath ? p->scanpath : 1;
    int img = pxvm_build_slot(b, PXI_ROLE_INPUT, "image", p->w, p->h);
    int atlas = pxvm_build_slot(b, PXI_ROLE_OUTPUT, "atlas", p->cols * p->patch, p->rows * p->patch);
    if (p->any_size)
        pxvm_build_any_size(b, img, p->any_min, p->any_max, p->any_pixels);
    pxvm_build_patches(b, atlas, p->patch, p->patch, p->ntokens * copies);
    /* video: the frame is compared with the current image `cur` tile by tile, the changed tiles
     * copied, and the pyramid and tokens of cur recomputed where they changed */
    int frame = img, dirty = 0;
    if (p->video >= 0) {
        img = pxvm_build_slot(b, PXI_ROLE_SCRATCH, "cur", p->w, p->h);
        dirty = pxvm_build_slot(b, PXI_ROLE_SCRATCH, "dirty", px_tiles(p->w), px_tiles(p->h));
        pxvm_build_persist(b, img);
        pxvm_build_persist(b, atlas);
    }
    int map = p->scanpath ? pxvm_build_slot(b, PXI_ROLE_SCRATCH, "saliency", px_mip_dim(p->w, px__saliency_level(p)),
                                            px_mip_dim(p->h, px__saliency_level(p)))
                          : 0;
    int32_t f[PXI_MAX_FIELDS] = {0};
    if (p->video >= 0) {
        f[PX_FI(DIFF, frame)] = frame, f[PX_FI(DIFF, cur)] = img, f[PX_FI(DIFF, mask)] = dirty;
        f[PX_FI(DIFF, threshold)] = p->video;
        pxvm_build_insn(b, PX_OP_DIFF, f);
        memset(f, 0, sizeof f);
        f[PX_FI(UPDATE, frame)] = frame, f[PX_FI(UPDATE, cur)] = img, f[PX_FI(UPDATE, mask)] = dirty;
        pxvm_build_insn(b, PX_OP_UPDATE, f);
        memset(f, 0, sizeof f);
    }
    f[PX_FI(PYRAMID, slot)] = img;
    f[PX_FI(PYRAMID, mask)] = dirty;
    pxvm_build_insn(b, PX_OP_PYRAMID, f);
    if (p->scanpath) { /* saliency, then K fixations, each inhibiting around the earlier ones */
        px__build_saliency(p, b, img, map);
        for (int k = 0; k < p->scanpath; k++) {
            memset(f, 0, sizeof f);
            f[PX_FI(ARGMAX, src)] = map, f[PX_FI(ARGMAX, reg)] = k, f[PX_FI(ARGMAX, w_r)] = 1;
            f[PX_FI(ARGMAX, space)] = img, f[PX_FI(ARGMAX, ior_count)] = k, f[PX_FI(ARGMAX, radius)] = p->ior_radius;
            pxvm_build_insn(b, PX_OP_ARGMAX, f);
        }
    }
    for (int a = 0; a < p->ntokens * copies; a++) {
        int i = a % p->ntokens, k = a / p->ntokens; /* token i around fixation k */
        const pxvm_plan_token *t = &p->tokens[i];
        memset(f, 0, sizeof f);
        /* SAMPLE and ANISO share these operands (tested in tests/unit/test_isa.c) */
        f[PX_FI(SAMPLE, src)] = img;
        f[PX_FI(SAMPLE, dst)] = atlas;
        f[PX_FI(SAMPLE, mode)] = p->relative ? PX_MODE_REL(PX_MODE_LINEAR, k) : PX_MODE_LINEAR;
        f[PX_FI(SAMPLE, dst_x)] = (a % p->cols) * p->patch;
        f[PX_FI(SAMPLE, dst_y)] = (a / p->cols) * p->patch;
        f[PX_FI(SAMPLE, w)] = f[PX_FI(SAMPLE, h)] = p->patch;
        f[PX_FI(SAMPLE, cu)] = px__q16(t->cx);
        f[PX_FI(SAMPLE, cv)] = px__q16(t->cy);
        f[PX_FI(SAMPLE, du)] = px__q16(t->du);
        f[PX_FI(SAMPLE, dv)] = px__q16(t->dv);
        f[PX_FI(SAMPLE, lod)] = (int32_t)t->lod_q8;
        if (t->taps > 1) {
            f[PX_FI(ANISO, taps)] = t->taps;
            f[PX_FI(ANISO, tdu)] = px__q16(t->tdu);
            f[PX_FI(ANISO, tdv)] = px__q16(t->tdv);
            f[PX_FI(ANISO, mask)] = dirty;
        } else {
            f[PX_FI(SAMPLE, mask)] = dirty;
        }
        pxvm_build_insn(b, t->taps > 1 ? PX_OP_ANISO : PX_OP_SAMPLE, f);
    }
    pxvm_build_insn(b, PX_OP_HALT, NULL);
}

/* The program image of a parsed plan, not validated. */
static int px__plan_pixels(const pxvm_plan *p, pxvm_image *out, pxvm_error *err)
{
    pxvm_builder b;
    pxvm_build_init(&b, p->width);
    pxvm_plan_build(p, &b);
    int rc = pxvm_build_finish(&b, out, err);
    pxvm_build_free(&b);
    return rc;
}

int pxvm_plan_image(const char *json, size_t len, const char *name, int scanpath, pxvm_image *out, pxvm_error *err)
{
    pxvm_plan p;
    if (pxvm_plan_parse_scanpath(json, len, name, scanpath, &p, err) < 0)
        return -1;
    int rc = px__plan_pixels(&p, out, err);
    pxvm_plan_free(&p);
    return rc;
}

int pxvm_plan_compile_limits(const pxvm_plan *p, const pxvm_limits *lim, pxvm_image *out, pxvm_error *err)
{
    if (px__plan_pixels(p, out, err) < 0)
        return -1;
    pxvm_program prog;
    pxvm_error e;
    if (pxvm_program_from_copy(out, lim, &prog, &e) < 0) {
        pxvm_image_free(out);
        if (e.cls != PXVM_MALFORMED && e.cls != PXVM_INVALID) { /* memory */
            if (err)
                *err = e;
            return -1;
        }
        char msg[400];
        pxvm_error_format(&e, msg, sizeof msg);
        return px_plan_fail(err, p, "its program breaks a limit or a rule: %s", msg);
    }
    pxvm_program_free(&prog);
    return 0;
}

int pxvm_plan_compile(const pxvm_plan *p, pxvm_image *out, pxvm_error *err)
{
    pxvm_limits lim;
    pxvm_limits_default(&lim);
    return pxvm_plan_compile_limits(p, &lim, out, err);
}

void pxvm_plan_foveate273(pxvm_builder *b, int w, int h)
{
    pxvm_plan p;
    char json[160];
    pxvm_error err;
    snprintf(json, sizeof json,
             "{\"image\": [%d, %d], \"budget\": 273, \"scheme\": \"grid\", \"m0\": 1, \"e0\": 0.5, \"scale\": 1, \"levels\": %d}", w,
             h, px_mip_levels(w, h) < 5 ? px_mip_levels(w, h) : 5);
    if (pxvm_plan_parse(json, strlen(json), "foveate273", &p, &err) == 0) {
        pxvm_plan_build(&p, b);
        pxvm_plan_free(&p);
    }
}
