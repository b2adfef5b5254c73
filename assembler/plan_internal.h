/* plan_internal.h - what the plan compiler's files share (private to assembler/plan*.c): the
 * plan error, the clamp, and token placement, which plan.c calls once a plan is read. The
 * public functions are in plan.h. */
#ifndef PX_PLAN_INTERNAL_H
#define PX_PLAN_INTERNAL_H

#include "plan.h"

/* A plan error (PXE_PLAN) naming the plan: -1, with *err set. */
int px_plan_fail(pxvm_error *err, const pxvm_plan *p, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* NaN gives lo (never from a checked plan; no cast of a NaN to an integer follows a clamp). */
static inline double px_plan_clampd(double v, double lo, double hi) { return !(v >= lo) ? lo : (v > hi ? hi : v); }

/* plan_schemes.c: places the tokens of a checked plan by its scheme (p->tokens, ntokens) and
 * sizes the atlas (cols, rows). 0, or -1 with *err set. */
int px_plan_place(pxvm_plan *p, pxvm_error *err);

#endif
