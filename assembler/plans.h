/* plans.h - allocation plans compiled to pixel programs. All floating-point and transcendental
 * math happens here (compiled with -ffp-contract=off); programs hold only fixed-point operands. */
#ifndef PX_PLANS_H
#define PX_PLANS_H

#include "../vm/pxi_build.h"

#ifdef __cplusplus
extern "C" {
#endif

/* foveate273 for a w x h input: slots "image" (input) and "atlas" (output, 273 patches of
 * 16x16 in a 17-wide grid), then PYRAMID image, 273 SAMPLE, HALT. The plan: a 17x17 grid of
 * patch centres (the first 273 in row order), fixation at the image centre, M(e) = M0/(e+e0)
 * with M0 = 1, e0 = 0.5, e the distance from the fixation in normalized image units,
 * LOD = clamp(-log2 M, 0, 4), one output pixel per texel of the chosen level. */
void pxvm_plan_foveate273(pxvm_builder *b, int w, int h);

#ifdef __cplusplus
}
#endif
#endif
