/* plan_error.c - the error every part of the plan compiler reports (PXE_PLAN, naming the plan).
 * Apart from plan.c so that plan_schemes.c, which plan.c calls, does not call plan.c back. */
#include "plan_internal.h"

#include <stdarg.h>
#include <stdio.h>

int px_plan_fail(pxvm_error *err, const pxvm_plan *p, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return pxvm_fail(err, PXE_PLAN, -1, -1, p->name, msg);
}
