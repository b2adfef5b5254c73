/* cases.h - conformance programs: edge-value cases per opcode family, and random valid programs. */
#ifndef PX_CASES_H
#define PX_CASES_H

#include "../../vm/pxi_build.h"
#include "../golden/golden.h"

#define PX_CASE_MAX_INPUTS 4

/* The generators' random numbers (splitmix64), one definition for cases.c and video.c. */
static inline uint64_t px_case_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static inline int px_case_below(uint64_t *s, int n) { return n <= 1 ? 0 : (int)(px_case_next(s) % (uint64_t)n); }

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

/* ---- video (video.c) ---- */

#define PX_VIDEO_MAX_FRAMES 8
#define PX_VIDEO_MAX_RECTS 4

/* A random frame sequence with its incremental program and its full-recompute twin. */
typedef struct px_video_case {
    char name[64];
    int w, h, threshold, nframes;
    pxvm_image incremental, full;
    pxvm_image frames[PX_VIDEO_MAX_FRAMES];
    int nrects[PX_VIDEO_MAX_FRAMES]; /* -1: DIFF compares; else the rectangles given for that frame */
    pxvm_rect rects[PX_VIDEO_MAX_FRAMES][PX_VIDEO_MAX_RECTS];
    int restart[PX_VIDEO_MAX_FRAMES], moved[PX_VIDEO_MAX_FRAMES];
    int32_t fix[PX_VIDEO_MAX_FRAMES][PX_FIX_REGS * 2];
} px_video_case;

int px_video_make(uint64_t seed, px_video_case *v); /* 1, or -1 on a build error */
void px_video_case_free(px_video_case *v);
/* Runs the sequence on `ops` (incremental and full programs) and, when ref is given, the
 * incremental program on ref too; counts into st and describes the first failure in why.
 * Returns 0 (st->differences counts failures), -1 if an executor broke. */
extern long px_video_tokens, px_video_sampled; /* tokens after each first frame, and those sampled */
int px_video_check(const pxvm_executor_ops *ops, const pxvm_executor_ops *ref, const px_video_case *v,
                   px_golden_stats *st, char *why, size_t len);

#endif
