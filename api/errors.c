/* errors.c - the API's errors: the last failure and warning of the calling thread, and the checks
 * of a caller's limits (include/pxvm.h, "errors"). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "video.h"

/* ---- errors: the last failure of this thread ------------------------------------------------ */

static _Thread_local pxvm_class px__last_class;
static _Thread_local char px__last_msg[1024];
_Thread_local char px__last_warning[1024];

/* Records err as the thread's last error; returns its class (the API's return value). */
PXVM_COLD int px__fail(const pxvm_error *err)
{
    px__last_class = err->cls;
    pxvm_error_format(err, px__last_msg, sizeof px__last_msg);
    pxvm_error_at(0, -1, -1, NULL);
    return (int)err->cls;
}

PXVM_COLD int (px__refuse)(pxvm_code code, ...)
{
    pxvm_error err;
    va_list ap;
    va_start(ap, code);
    pxvm_failv(&err, code, -1, -1, ap);
    va_end(ap);
    return px__fail(&err);
}

const char *pxvm_errmsg(void) { return px__last_msg; }
const char *pxvm_warning(void) { return px__last_warning; }

/* After a successful decode: what a lenient decoder went past ("malformed: ..."), the note of
 * bytes after the image's end (its message: it is no error), or nothing. */
void px__keep_warning(const pxvm_error *err)
{
    px__last_warning[0] = 0;
    if (pxvm_decode_note(err))
        snprintf(px__last_warning, sizeof px__last_warning, "%s", err->msg);
    else if (err->code != PXE_NONE)
        pxvm_error_format(err, px__last_warning, sizeof px__last_warning);
}
pxvm_class pxvm_errclass(void) { return px__last_class; }
void pxvm_free(void *p) { free(p); }
const char *pxvm_version(void) { return PXVM_VERSION; }

/* A caller's limits: 0, or the usage error of `call`. The side limit is 1 .. 65535: the any-size
 * rules (SPEC section 2) compute log2q8 of sides up to 65535, and px_scale_q16's 64-bit products
 * of sides near 2^31 would overflow. */
int px__check_limits(const pxvm_limits *lim, const char *call)
{
    if (!lim || (lim->max_side >= 1 && lim->max_side <= 65535))
        return 0;
    return px__refuse(PXE_LIMIT_SIDE, call, (unsigned long)lim->max_side);
}

/* For the API's other files (api/video.h): the same rules, written once here. */
int pxvm_api_fail(const pxvm_error *err) { return px__fail(err); }
void pxvm_api_warning(const pxvm_error *err) { px__keep_warning(err); }
int pxvm_api_check_limits(const pxvm_limits *lim, const char *call) { return px__check_limits(lim, call); }

const pxvm_limits *px__limits(const pxvm_limits *lim, pxvm_limits *def)
{
    if (lim)
        return lim;
    pxvm_limits_default(def);
    return def;
}

/* The error of a call on no runner, or on one a failed change of size left without a program. */
PXVM_COLD int px__unusable(const pxvm_runner *run, const char *call)
{
    return run ? px__refuse(PXE_RUNNER_LOST, call) : px__refuse(PXE_NULL_RUNNER, call);
}
