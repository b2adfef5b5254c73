/* golden.h - running programs to hash reports and checking them against golden files.
 * A golden file is a list of sections "== NAME" followed by the report of NAME: one line per
 * level of every slot ("SLOT Llevel WxH hash", see pxvm_hash_report), or one "error: ..." line
 * when the run fails (a trap is an expected result too). */
#ifndef PX_GOLDEN_H
#define PX_GOLDEN_H

#include <stdio.h>

#include "../../vm/vm.h"
#include "../../executors/registry.h"

typedef struct px_golden_stats {
    long programs, outputs, differences, sections;
    unsigned long long bytes;
} px_golden_stats;

/* Runs a loaded program on an open executor with the given inputs bound and fixation registers
 * set (fix: [8][2], or NULL); returns its report (malloc'ed) and adds its outputs and bytes to
 * stats. Programs that use fixations also report "FIX hash" (the registers after the run) and
 * "GEOM slot hash" per atlas slot (the token geometry). */
char *px_golden_run(const pxvm_executor_ops *ops, pxvm_executor *ex, const pxvm_program *prog, const int *slots,
                    const pxvm_image *const *inputs, int ninputs, const int32_t *fix, px_golden_stats *stats);
/* The "FIX" and "GEOM" lines of a run (nothing for a program that uses no fixation). */
int px_golden_state_report(const pxvm_executor_ops *ops, pxvm_executor *ex, const pxvm_program *prog, FILE *out,
                           pxvm_error *err);
/* "PROGRAM [--in SLOT=IMAGE]..." (a line of tests/golden/programs.txt) -> report. */
char *px_golden_run_line(const pxvm_executor_ops *ops, pxvm_executor *ex, const char *line, px_golden_stats *stats);

/* Produces the report of one section, or NULL when the name is unknown. */
typedef char *(*px_golden_producer)(const char *name, void *ctx, px_golden_stats *stats);
/* Checks every section of a golden file; differences are counted in stats and described on log
 * (if not NULL). Returns -1 if the file cannot be read. */
int px_golden_check(const char *path, px_golden_producer produce, void *ctx, px_golden_stats *stats, FILE *log);

#endif
