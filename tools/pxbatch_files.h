/* pxbatch_files.h - what pxbatch's file-handling files share (private to the tools/pxbatch_*.c
 * behind pxbatch.h: SHA-256, names, markers, .npy, --verify): the reason a parser gives. */
#ifndef PXBATCH_FILES_H
#define PXBATCH_FILES_H

#include <stdarg.h>
#include <stdio.h>

#include "pxbatch.h"

/* Writes the reason for a refusal into why[0..n) (nothing when why is NULL or n is 0). */
static inline void pxb_why(char *why, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static inline void pxb_why(char *why, size_t n, const char *fmt, ...)
{
    if (!why || !n)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, n, fmt, ap);
    va_end(ap);
}

#endif
