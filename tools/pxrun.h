/* pxrun.h - what the pxrun command's files share (private to tools/pxrun*.c): the parsed
 * command line and the functions one file calls in another. */
#ifndef PXRUN_H
#define PXRUN_H

#include <stdint.h>

#include "../api/fixation.h"
#include "../vm/resize.h"
#include "../vm/vm.h"

typedef struct {
    char *slot;
    int level;
    char *path;
} px_run_binding;

typedef struct {
    px_run_binding *ins, *outs, *npys, *geoms;
    int nin, nout, nnpy, ngeom;
    int nfix, scanpath;
    const char *fix_text[PX_FIX_REGS];
    const char *overlay_path;
    const char *frames, *changed_path;
    int frame_w, frame_h, frame_channels;
    long max_frames;
    int *slot_of[3];
    const char *prog_path, *final_path, *exec_name;
    const char *policy_text; /* --policy, NULL when not given */
    px_policy policy;
    int policy_native;       /* --policy native: an any-size input takes the file at its own size */
    int do_time, do_trace, do_hash, do_info, do_profile;
    pxvm_png_mode png;
    uint64_t repeat;
    pxvm_limits lim;
    pxvm_open_options oo;
} px_run_args;

/* pxrun.c */
double px_run_now(void);
void px_run_warn(pxvm_error *err);

/* pxrun_outputs.c */
int px_run_npy_array(const pxvm_executor_ops *ops, pxvm_executor *ex, const pxvm_program *prog, int slot,
                     pxvm_image *img, int shape[4], pxvm_error *err);
int px_run_outputs(const pxvm_executor_ops *ops, pxvm_executor *ex, const pxvm_program *prog, const px_run_args *a,
                   pxvm_outputs *files, pxvm_error *err);
int px_run_fixation_outputs(const pxvm_executor_ops *ops, pxvm_executor *ex, const pxvm_program *prog,
                            const px_run_args *a, const pxvm_image *photo, pxvm_outputs *files, pxvm_error *err);

/* pxrun_frames.c */
/* The input the frames go to: the first input slot that no --in binds (-1: none). */
int px_run_frame_slot(const pxvm_program *prog, const px_run_args *a);
long px_run_frames(const pxvm_executor_ops *ops, pxvm_executor *ex, const pxvm_program *prog, const px_run_args *a,
                   const pxvm_run_options *ro, pxvm_outputs *files, pxvm_error *err);

#endif
