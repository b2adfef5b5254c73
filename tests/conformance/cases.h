/* cases.h - conformance programs: edge-value cases per opcode family, and random valid programs. */
#ifndef PX_CASES_H
#define PX_CASES_H

#include "../../vm/pxi_build.h"
#include "../golden/golden.h"

#define PX_CASE_MAX_INPUTS 4

typedef struct px_case {
    char name[64];
    pxvm_image program;
    int ninputs;
    int input_slot[PX_CASE_MAX_INPUTS];
    pxvm_image inputs[PX_CASE_MAX_INPUTS];
    int has_fix;                    /* fixation registers to set before the run */
    int32_t fix[PX_FIX_REGS * 2];
} px_case;

/* Edge case number `index` (0, 1, ...): 1 when built, 0 past the last, -1 on a build error. */
int px_case_edge(int index, px_case *c);
/* A random valid program (and its input images) from a seed: 1, or -1 on a build error. */
int px_case_random(uint64_t seed, px_case *c);
void px_case_free(px_case *c);

/* Every edge case run once on an executor: names and reports (see golden.h), in case order. */
typedef struct px_case_reports {
    int n;
    char **names, **reports;
} px_case_reports;
int px_case_run_all(const pxvm_executor_ops *ops, pxvm_executor *ex, px_golden_stats *stats, px_case_reports *r);
char *px_case_report(const px_case_reports *r, const char *name); /* a copy, or NULL */
void px_case_reports_free(px_case_reports *r);

#endif
