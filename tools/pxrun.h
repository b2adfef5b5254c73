/* pxrun.h - what the pxrun command's files share (private to tools/pxrun*.c): the parsed
 * command line and the functions one file calls in another. */
#ifndef PXRUN_H
#define PXRUN_H

#include <stdint.h>

#include "../api/fixation.h"
#include "../vm/resize.h"
#include "../vm/vm.h"
#include "frames.h"
#include "outputs.h"
#include "pxrun_size.h"

typedef struct {
    char *slot;
    int level;
    char *path;
} px_run_binding;

/* --fixations FILE (tools/pxrun_fixations.c): fixation k for frame k of --frames. */
typedef struct {
    const char *path;        /* NULL: not given */
    long n;
    double (*v)[2];          /* as --fixation's values: normalized, or texels where texels[k] */
    unsigned char *texels;
    int npy;                 /* a .npy (rows, not lines, in messages) */
} px_run_fixfile;

typedef struct {
    px_run_binding *ins, *outs, *npys, *geoms;
    int nin, nout, nnpy, ngeom;
    int nfix, scanpath;
    const char *fix_text[PX_FIX_REGS];
    px_run_fixfile fixfile;  /* --fixations FILE: the first input register, frame by frame */
    const char *overlay_path;
    const char *frames, *changed_path;
    int frame_w, frame_h, frame_channels;
    long max_frames;
    int *slot_of[3];
    const char *prog_path, *final_path, *exec_name;
    const char *policy_text; /* --policy, NULL when not given */
    px_policy policy;
    int policy_native;       /* --policy native: an any-size input takes the file at its own size */
    const char *run_only;    /* the first option given that only a run uses (--policy, --size, --repeat,
                              * ...): with --info alone, which runs nothing, a usage error */
    px_size_opt size;        /* --size WxH: an any-size program resolved at it, every --in resized to it */
    int do_time, do_trace, do_hash, do_info, do_profile;
    pxvm_png_mode png;
    uint64_t repeat;
    pxvm_limits lim;
    pxvm_open_options oo;
} px_run_args;

/* pxrun_args.c */
extern int px__verbose; /* --verbose: notes are printed */
/* The one-line error and where the options are; returns the exit status (2). */
int px__bad_usage(const char *what);
/* Parses the command line; returns -1 (done: *rc is the exit status) or 0. */
int px__parse_args(int argc, char **argv, px_run_args *a, int *rc);

/* pxrun_notes.c: the clock of --time (ms); a decode's warning or --verbose note printed, then cleared */
double px_run_now(void);
void px_run_warn(pxvm_error *err);

/* pxrun_outputs.c */
int px_run_npy_array(const pxvm_executor_ops *ops, pxvm_executor *ex, const pxvm_program *prog, int slot,
                     pxvm_image *img, int shape[4], pxvm_error *err);
int px_run_outputs(const pxvm_executor_ops *ops, pxvm_executor *ex, const pxvm_program *prog, const px_run_args *a,
                   pxvm_outputs *files, pxvm_error *err);
int px_run_fixation_outputs(const pxvm_executor_ops *ops, pxvm_executor *ex, const pxvm_program *prog,
                            const px_run_args *a, const pxvm_image *photo, pxvm_outputs *files, pxvm_error *err);

/* pxrun_fixations.c */
/* Every --fixation checked against `prog` and converted to its Q16 registers (normalized ones are
 * fractions of the bound size: converted again at every change of size). */
int px_run_fixations(const pxvm_program *prog, const px_run_args *a, int32_t q[PX_FIX_REGS][2], pxvm_error *err);
/* The register the k-th --fixation sets: the program's k-th input register in register order
 * (SPEC 6); -1 past its last. q[k] of px_run_fixations is for it. */
int px_run_fix_reg(const pxvm_program *prog, int k);

/* "X,Y" as --fixation takes it: normalized, or texels when both numbers end in "px"; v[] out.
 * `what` names it in a usage error. */
int px_run_parse_fixation(const char *text, double v[2], int *texels, const char *what, pxvm_error *err);

/* Reads --fixations' file (f->path) whole: errors name it and the line (a usage error for a bad
 * line or array, i/o for the file). */
int px_run_fixfile_load(px_run_fixfile *f, const pxvm_limits *lim, pxvm_error *err);
/* Frame `frame`'s fixation converted for `prog` (the program at that frame's size) to the Q16 of
 * the first input register: a usage error naming the file, the line and the frame when the value
 * is out of range, or when the file has no line for that frame (naming both counts). */
int px_run_fixfile_frame(const pxvm_program *prog, const px_run_args *a, long frame, int32_t q[2], pxvm_error *err);
void px_run_fixfile_free(px_run_fixfile *f);

/* pxrun_frames.c */
#define PX_RUN_SIZES_KEPT 16
/* --frames into an any-size slot: the any-size program and its resolutions at the sizes the frames
 * came in other than the first (main's program is the first's). The executor is retargeted to
 * them, so each stays alive until the executor is closed: past PX_RUN_SIZES_KEPT the least
 * recently used one that is not loaded is dropped. */
typedef struct {
    pxvm_program poly;                 /* the any-size program */
    int slot;                          /* the frame slot */
    int wh[2 * (PXVM_MAX_SLOTS + 1)];  /* the sizes it is resolved at: the --in files', the frame's */
    struct {
        pxvm_program prog;             /* nslots 0: empty */
        uint64_t used;
    } kept[PX_RUN_SIZES_KEPT];
    uint64_t clock;
} px_run_sizes;
void px_run_sizes_free(px_run_sizes *s);

/* The input the frames go to: the first input slot that no --in binds (-1: none). */
int px_run_frame_slot(const pxvm_program *prog, const px_run_args *a);
/* Opens the frames of --frames and decodes the first into *first (before the program is resolved
 * at its size): an empty source is an error. */
int px_run_frames_first(const px_run_args *a, px_frames **src, pxvm_image *first, pxvm_error *err);
/* A frame of w x h against the bounds of any-size slot `slot` of `poly`: the words of --in, naming
 * the frame's file (or its number in the source). */
int px_run_frame_bounds(const pxvm_program *poly, int slot, const px_run_args *a, const px_frames *src, long n, int w,
                        int h, pxvm_error *err);
/* Runs once per frame; --npy outputs and --changed collect every frame. `src` and `first` from
 * px_run_frames_first, or NULL: opened here. With `sizes` (an any-size frame slot), a frame of
 * another size switches the executor to the program resolved at it; *cur is the program loaded at
 * the end (what the outputs are read with). Returns frames run or -1. */
long px_run_frames(const pxvm_executor_ops *ops, pxvm_executor *ex, const pxvm_program *prog, px_run_sizes *sizes,
                   px_frames *src, pxvm_image *first, const px_run_args *a, const pxvm_run_options *ro,
                   pxvm_outputs *files, const pxvm_program **cur, pxvm_error *err);

#endif
