/* dmath.h - deterministic elementary functions for the plan compiler.
 *
 * Plans must compile to byte-identical programs on any x86-64 or ARM machine. libm's log2, exp2,
 * sin and cos promise no particular last bit, so these are written with IEEE-754 basic
 * operations only (+ - * / and sqrt, all correctly rounded by the standard) in a fixed order,
 * compiled with -ffp-contract=off (no fused multiply-add) and without -ffast-math. The same
 * inputs then give the same bits everywhere. Accuracy is about 1e-15 relative, far below the
 * 2^-16 and 2^-8 steps the results are quantized to. */
#ifndef PX_DMATH_H
#define PX_DMATH_H

double dm_exp2(double x);
double dm_log2(double x); /* x > 0 */
double dm_sin(double x);
double dm_cos(double x);
double dm_pi(void);

#endif
