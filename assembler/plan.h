/* plan.h - allocation plans: where the vision tokens go, compiled into pixel programs.
 *
 * A plan is JSON (assembler/README.md lists every field):
 *   {"image": [451, 300], "fixation": [0.5, 0.4], "budget": 273, "scheme": "grid"}
 * Schemes: grid (cortical magnification over a patch grid), logpolar, v1, aniso, uniform.
 * The compiler does all floating-point and transcendental math here, with assembler/dmath.c, so
 * that a plan gives byte-identical programs everywhere; programs hold fixed-point operands only.
 * The program: input slot "image", output slot "atlas" (one patch x patch tile per token, in
 * token order), PYRAMID image, one SAMPLE (or ANISO) per token, HALT. */
#ifndef PX_PLAN_H
#define PX_PLAN_H

#include "../vm/pxi_build.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pxvm_plan_token {
    double cx, cy;   /* centre, level-0 texels */
    double step;     /* texels per output pixel along the minor axis (2^lod) */
    double du, dv;   /* output pixel steps, texels */
    uint32_t lod_q8; /* the LOD as stored (the step follows it) */
    int taps;        /* 1: SAMPLE; more: ANISO along `angle` */
    double angle;    /* major axis, radians (aniso) */
    double tdu, tdv; /* tap step, texels (aniso) */
} pxvm_plan_token;

#define PXVM_PLAN_MAX_REGIONS 16
#define PXVM_PLAN_MAX_TOKENS 65536 /* the atlas then fits the maximum side at patch 64 */

typedef struct pxvm_plan {
    char name[256];
    int w, h;                        /* image */
    double fx, fy;                   /* fixation, normalized [0, 1] */
    int budget, patch, levels, width; /* tokens, token side, pyramid levels used, program width */
    char scheme[16];
    double m0, e0, scale;            /* grid, aniso: M(e) = m0 / (scale * e + e0) */
    int scale_auto;
    double ring_a;                   /* logpolar: radius offset a, pixels */
    double fovea_share, k, e0_deg, deg_per_image; /* v1 */
    double angle_deg, elongation;    /* aniso: text direction, major/minor ratio */
    int taps;
    int nregions;                    /* aniso: per-region angles (normalized boxes) */
    double region[PXVM_PLAN_MAX_REGIONS][5];
    int relative;                    /* "fixation": "relative": token centres are offsets from fixation
                                        register k, valid for every fixation (logpolar, v1) */
    int scanpath;                    /* K >= 1: saliency, K ARGMAX fixations, the tokens around each
                                        (implies relative); 0: none */
    int ior_radius;                  /* scanpath: inhibition-of-return radius, texels */
    int video;                       /* "video": T >= 0: a frame-by-frame program (DIFF threshold T,
                                        incremental pyramid and tokens); -1: a still image */
    int any_size;                    /* "size": "any": the image input is any-size, "image" its
                                        reference size; "bounds" min, max side and pixels (0: none) */
    int any_min, any_max;
    uint32_t any_pixels;
    int ntokens, cols, rows;         /* computed; the atlas holds ntokens * max(1, scanpath) tokens */
    pxvm_plan_token *tokens;
} pxvm_plan;

/* Reads and checks a plan (name is used in messages), and places its tokens. */
int pxvm_plan_parse(const char *json, size_t len, const char *name, pxvm_plan *plan, pxvm_error *err);
int pxvm_plan_load(const char *path, pxvm_plan *plan, pxvm_error *err);
/* The program image of a plan given as JSON text (scanpath as for pxvm_plan_parse_scanpath, 0:
 * as written), not validated: for callers that load it next (with their own limits), so it is
 * validated once. */
int pxvm_plan_image(const char *json, size_t len, const char *name, int scanpath, pxvm_image *out, pxvm_error *err);
/* pxvm_plan_parse with "scanpath": K and "fixation": "relative" set (K > 0; pxrun --scanpath). */
int pxvm_plan_parse_scanpath(const char *json, size_t len, const char *name, int scanpath, pxvm_plan *plan,
                             pxvm_error *err);
/* The program of a placed plan, into a builder (slots image and atlas, then code) or an image. */
void pxvm_plan_build(const pxvm_plan *plan, pxvm_builder *b);
/* The program image, validated against the limits (pxvm_plan_compile: the default ones); a
 * program the validator refuses (a slot beyond max_side, slots beyond max_memory) is a plan error
 * that gives the validator's words. */
int pxvm_plan_compile(const pxvm_plan *plan, pxvm_image *out, pxvm_error *err);
int pxvm_plan_compile_limits(const pxvm_plan *plan, const pxvm_limits *lim, pxvm_image *out, pxvm_error *err);
/* Tokens per LOD, pixels sampled against the full-resolution grid, covered fraction. */
void pxvm_plan_summary(const pxvm_plan *plan, FILE *out);
/* The photo with every token's footprint drawn on it, coloured by LOD (a relative plan: around
 * the image centre). */
int pxvm_plan_overlay(const pxvm_plan *plan, const pxvm_image *photo, pxvm_image *out, pxvm_error *err);
/* The photo with the footprints of a run's token geometry (ntokens x PX_GEOM_INTS int32, as
 * pxvm_runner_read_geometry gives it; patches patch_w x patch_h) and its fixations (nfix
 * registers, Q16) drawn on it: the scanpath as numbered discs joined in order. */
int pxvm_geometry_overlay(const pxvm_image *photo, const int32_t *geom, int ntokens, int patch_w, int patch_h,
                          const int32_t *fix, int nfix, pxvm_image *out, pxvm_error *err);
void pxvm_plan_free(pxvm_plan *plan);

/* foveate273 (the compatibility setting of the grid scheme: M0 = 1, e0 = 0.5, eccentricity in
 * normalized image units, LOD clamped to 4) for a w x h input, into a builder. */
void pxvm_plan_foveate273(pxvm_builder *b, int w, int h);

#ifdef __cplusplus
}
#endif
#endif
