/* error.c - error records, their classes and messages (defined once in errors.def). */
#include "vm.h"

#include <stdarg.h>
#include <string.h>

static const struct {
    pxvm_class cls;
    const char *fmt;
} px__errors[PXE__count] = {
    [PXE_NONE] = {PXVM_OK, "no error"},
#define PXE(code, cls, fmt) [PXE_##code] = {PXVM_##cls, fmt},
#include "errors.def"
};

int pxvm_failv(pxvm_error *err, pxvm_code code, int x, int y, va_list ap)
{
    if (!err)
        return -1;
    err->code = code;
    err->cls = px__errors[code].cls;
    err->x = x;
    err->y = y;
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
    vsnprintf(err->msg, sizeof err->msg, px__errors[code].fmt, ap);
#pragma GCC diagnostic pop
    return -1;
}

int (pxvm_fail)(pxvm_error *err, pxvm_code code, int x, int y, ...)
{
    va_list ap;
    va_start(ap, y);
    pxvm_failv(err, code, x, y, ap);
    va_end(ap);
    return -1;
}

/* The calling thread's last failure's fields (pxvm_last_error_info): set by the API's calls as
 * they fail, after the message (px__fail clears them first). */
static _Thread_local struct {
    int item, slot;
    char file[1024];
} px__where = {-1, -1, ""};

int pxvm_error_at(int rc, int slot, int item, const char *file)
{
    px__where.item = item;
    px__where.slot = slot;
    snprintf(px__where.file, sizeof px__where.file, "%s", file ? file : "");
    return rc;
}

int pxvm_last_error_info(pxvm_error_info *info)
{
    if (!info)
        return PXVM_USAGE;
    info->item = px__where.item;
    info->slot = px__where.slot;
    info->file = px__where.file;
    return 0;
}

const char *pxvm_class_name(pxvm_class cls)
{
    switch (cls) {
    case PXVM_OK: return "ok";
    case PXVM_MALFORMED: return "malformed";
    case PXVM_INVALID: return "invalid";
    case PXVM_UNLINKABLE: return "unlinkable";
    case PXVM_TRAP: return "trap";
    case PXVM_IO: return "i/o error";
    case PXVM_USAGE: return "usage";
    case PXVM_UNAVAILABLE: return "unavailable";
    case PXVM_ASSEMBLY: return "assembly error";
    case PXVM_PLAN: return "plan error";
    }
    return "?";
}

void pxvm_error_format(const pxvm_error *err, char *buf, size_t len)
{
    if (err->x >= 0)
        snprintf(buf, len, "%s: pixel (%d,%d): %s", pxvm_class_name(err->cls), err->x, err->y, err->msg);
    else
        snprintf(buf, len, "%s: %s", pxvm_class_name(err->cls), err->msg);
}

void pxvm_limits_default(pxvm_limits *lim)
{
    lim->max_side = 16384;
    lim->max_memory = 1ull << 30;
    lim->max_insns = 1u << 20;
    lim->max_steps = 1ull << 24;
    lim->flags = 0; /* strict decoders */
}

int pxvm_exit_status(pxvm_class cls)
{
    switch (cls) {
    case PXVM_OK: return 0;
    case PXVM_USAGE: return 2;
    case PXVM_MALFORMED: return 3;
    case PXVM_INVALID: return 4;
    case PXVM_UNLINKABLE: return 5;
    case PXVM_TRAP: return 6;
    case PXVM_UNAVAILABLE: return 7;
    case PXVM_ASSEMBLY: /* a source or plan the tools compile: pxasm's 8 (not i/o) in every tool */
    case PXVM_PLAN: return 8;
    default: return 1;
    }
}
