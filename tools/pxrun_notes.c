/* pxrun_notes.c - what pxrun's files share below main: the clock of --time, and the warnings and
 * --verbose notes a decode that succeeded leaves. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "pxrun.h"

double px_run_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* What a decode that succeeded left in err (vm.h): the damage a lenient decoder went past, a
 * warning; bytes after an image's end, a note printed with --verbose. Then cleared. */
void px_run_warn(pxvm_error *err)
{
    if (err->code == PXE_NONE)
        return;
    if (pxvm_decode_note(err)) {
        if (px__verbose)
            fprintf(stderr, "pxrun: note: %s\n", err->msg);
    } else {
        char buf[1024];
        pxvm_error_format(err, buf, sizeof buf);
        fprintf(stderr, "pxrun: warning (--lenient): %s\n", buf);
    }
    memset(err, 0, sizeof *err);
}
