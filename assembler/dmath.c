/* dmath.c - see dmath.h. Series evaluated in a fixed order; only + - * / and frexp/ldexp (exact). */
#include "dmath.h"

#include <math.h>

static const double px__ln2 = 0.6931471805599453094172321214581766;
static const double px__pi = 3.1415926535897932384626433832795029;

double dm_pi(void) { return px__pi; }

/* e^y for |y| <= ln 2, Taylor series to 24 terms. */
static double px__expm(double y)
{
    double term = 1.0, sum = 1.0;
    for (int k = 1; k <= 24; k++) {
        term = term * y / (double)k;
        sum = sum + term;
    }
    return sum;
}

double dm_exp2(double x)
{
    if (x > 1000.0)
        return HUGE_VAL;
    if (x < -1000.0)
        return 0.0;
    double n = floor(x); /* exact */
    return ldexp(px__expm((x - n) * px__ln2), (int)n);
}

double dm_log2(double x)
{
    int e;
    double m = frexp(x, &e); /* x = m * 2^e, m in [0.5, 1): exact */
    /* ln m = 2 atanh(s), s = (m - 1) / (m + 1), |s| <= 1/3 */
    double s = (m - 1.0) / (m + 1.0), s2 = s * s, term = s, sum = 0.0;
    for (int k = 0; k < 40; k++) {
        sum = sum + term / (double)(2 * k + 1);
        term = term * s2;
    }
    return (double)e + 2.0 * sum / px__ln2;
}

/* sin on [-pi, pi] after reduction, Taylor series to 30 terms. */
double dm_sin(double x)
{
    double t = x - 2.0 * px__pi * floor(x / (2.0 * px__pi) + 0.5);
    double term = t, sum = t, t2 = t * t;
    for (int k = 1; k <= 30; k++) {
        term = -term * t2 / (double)((2 * k) * (2 * k + 1));
        sum = sum + term;
    }
    return sum;
}

double dm_cos(double x) { return dm_sin(x + 0.5 * px__pi); }
