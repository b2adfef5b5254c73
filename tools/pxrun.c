/* pxrun - run a pixel program on an executor and write its slots out as PNG or .npy: main and the
 * run. The command line is pxrun_args.c's, fixations pxrun_fixations.c's, --frames pxrun_frames.c's,
 * the outputs pxrun_outputs.c's, warnings and the clock pxrun_notes.c's (pxrun.h: what they share). */
#define _POSIX_C_SOURCE 200809L
#define _XOPEN_SOURCE 700 /* realpath */
#include <errno.h>
#include <signal.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <time.h>

#include <unistd.h>

#include <jansson.h>

#include "../api/fixation.h"
#include "../assembler/plan.h"
#include "frames.h"
#include "../isa/px_sem.h"
#include "../vm/resize.h"
#include "../vm/vm.h"
#include "../executors/registry.h"
#include "pxrun.h"

static int px__die(const pxvm_error *err)
{
    char buf[1024];
    pxvm_error_format(err, buf, sizeof buf);
    fprintf(stderr, "pxrun: %s\n%s", buf, err->cls == PXVM_USAGE ? "(pxrun --help lists the options)\n" : "");
    return pxvm_exit_status(err->cls);
}

static void px__trace(void *ctx, const pxvm_program *prog, const pxi_insn *in)
{
    (void)ctx;
    char buf[512];
    int x, y;
    pxvm_stream_xy(prog, in->pc, &x, &y);
    pxvm_insn_format(prog, in, buf, sizeof buf);
    fprintf(stderr, "trace: [%u] pixel (%d,%d) %s\n", (unsigned)(in - prog->insns), x, y, buf);
}

static void px__profile(void *ctx, const pxvm_program *prog, uint32_t step, double ms)
{
    (void)ctx;
    const pxvm_step *st = &prog->steps[step];
    char buf[512];
    pxvm_insn_format(prog, &prog->insns[st->first], buf, sizeof buf);
    buf[40] = 0; /* the mnemonic and the first operands are enough here */
    fprintf(stderr, "profile: step %u (%s, %u instruction%s: %s...) %.4f ms\n", step,
            st->kind == PXVM_STEP_BATCH ? "batch" : "single", st->count, st->count > 1 ? "s" : "", buf, ms);
}

/* The first input slot (every input is unbound before --in binds it), or 0 when there is none. */
static int px__first_unbound(const pxvm_program *prog)
{
    for (int k = 1; k < prog->nslots; k++)
        if (prog->slots[k].role == PXI_ROLE_INPUT)
            return k;
    return 0;
}

static void px__info(const pxvm_program *prog)
{
    char lb[16], buf[512];
    printf("program %dx%d, format %d.%d, %d slots, %u instructions (stream %u..%u), %" PRIu64 " bytes of slots\n",
           prog->image.w, prog->image.h, PXI_VERSION_MAJOR, prog->format_minor, prog->nslots, prog->ninsns,
           prog->code_start, prog->code_end - 1, prog->memory);
    for (int k = 0; k < prog->nslots; k++) {
        const pxvm_slot *s = &prog->slots[k];
        printf("  slot %d %-8s %-7s %5dx%-5d %2d levels", k, pxvm_slot_label(prog, k, lb), pxi_role_name(s->role),
               s->w, s->h, s->levels);
        if (s->patch_count)
            printf(", %d patches of %dx%d", s->patch_count, s->patch_w, s->patch_h);
        if (s->role == PXI_ROLE_DATA)
            printf(", data at (%d,%d)", s->data_x, s->data_y);
        if (s->flags & PXI_SLOT_ANYSIZE) {
            printf(", any size %dx%d .. %dx%d", s->min_side, s->min_side, s->max_side, s->max_side);
            if (s->max_pixels)
                printf(", at most %" PRIu64 " pixels", s->max_pixels);
            printf(" (reference %dx%d)", s->w, s->h);
        }
        printf("\n");
    }
    for (uint32_t i = 0; i < prog->ninsns; i++) {
        pxvm_insn_format(prog, &prog->insns[i], buf, sizeof buf);
        int x, y;
        pxvm_stream_xy(prog, prog->insns[i].pc, &x, &y);
        printf("  [%u] (%d,%d) %s\n", i, x, y, buf);
    }
    printf("launch plan: %u steps\n", prog->nsteps);
    for (uint32_t s = 0; s < prog->nsteps; s++)
        printf("  step %u: %s instructions %u..%u\n", s, prog->steps[s].kind == PXVM_STEP_BATCH ? "batch" : "single",
               prog->steps[s].first, prog->steps[s].first + prog->steps[s].count - 1);
}

/* Resolves every slot name and level before any work. */
static int px__resolve(const pxvm_program *prog, px_run_args *a, pxvm_error *err)
{
    px_run_binding *lists[3] = {a->ins, a->outs, a->npys};
    int counts[3] = {a->nin, a->nout, a->nnpy};
    for (int li = 0; li < 3; li++)
        for (int i = 0; i < counts[li]; i++) {
            int k = a->slot_of[li][i] = pxvm_slot_lookup(prog, lists[li][i].slot);
            if (k < 0)
                return pxvm_fail(err, PXE_NO_SLOT, -1, -1, lists[li][i].slot);
            for (int e = 0; li == 0 && e < i; e++)
                if (a->slot_of[0][e] == k) { /* never the last one silently */
                    char lb[16];
                    return pxvm_fail(err, PXE_IN_TWICE, -1, -1, k, pxvm_slot_label(prog, k, lb), a->ins[e].path,
                                     a->ins[i].path);
                }
            /* an any-size input's chain is its bound size's, known later (vm/view.c checks the level
             * there, before anything is written): here only a level no size within its bounds has */
            const pxvm_slot *s = &prog->slots[k];
            int levels = s->flags & PXI_SLOT_ANYSIZE ? px_mip_levels(s->max_side, s->max_side) : s->levels;
            if (lists[li][i].level >= levels) {
                char lb[16];
                return pxvm_fail(err, PXE_NO_LEVEL, -1, -1, k, pxvm_slot_label(prog, k, lb), levels - 1,
                                 lists[li][i].level);
            }
        }
    return 0;
}

/* ---- fixations, plans, geometry --------------------------------------------------------------- */

static int px__ends_with(const char *s, const char *tail)
{
    size_t n = strlen(s), m = strlen(tail);
    return n >= m && !strcmp(s + n - m, tail);
}

/* A .pxi, or a plan compiled here (.json, or any file with --scanpath). */
/* --policy dynamic: the uniform plan compiled for the size the rule gives the one --in image
 * (docs/policies.md); its "budget", the full grid's, is dropped. The image is bound resized to it. */
static int px__dynamic_program(px_run_args *a, const uint8_t *data, size_t len, pxvm_image *out, pxvm_error *err)
{
    pxvm_plan plan;
    if (a->nin != 1)
        return pxvm_fail(err, PXE_DYNAMIC_INPUTS, -1, -1, a->nin);
    if (pxvm_plan_parse((const char *)data, len, a->prog_path, &plan, err) < 0)
        return -1;
    int uniform = !strcmp(plan.scheme, "uniform"), patch = plan.patch;
    if (!uniform)
        pxvm_fail(err, PXE_DYNAMIC_SCHEME, -1, -1, a->prog_path, plan.scheme);
    pxvm_plan_free(&plan);
    if (!uniform)
        return -1;
    pxvm_image img;
    int w2, h2;
    if (px_policy_dynamic_patch(&a->policy, patch, err) < 0 || pxvm_image_load_want(a->ins[0].path, &a->lim, NULL, &img, err) < 0)
        return -1;
    int rc = px_dynamic_size(&a->policy, img.w, img.h, &w2, &h2, err);
    if (rc < 0) {
        char named[sizeof err->msg];
        snprintf(named, sizeof named, "%.400s (file '%.300s')", err->msg, a->ins[0].path);
        memcpy(err->msg, named, sizeof named);
    }
    pxvm_image_free(&img);
    if (rc < 0)
        return -1;
    json_error_t jerr;
    json_t *root = json_loadb((const char *)data, len, 0, &jerr);
    char *text = NULL;
    if (root && json_object_set_new(root, "image", json_pack("[i,i]", w2, h2)) == 0) {
        json_object_del(root, "budget");
        text = json_dumps(root, 0);
    }
    json_decref(root);
    if (!text)
        return pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)len);
    rc = pxvm_plan_image(text, strlen(text), a->prog_path, a->scanpath, out, err);
    free(text);
    return rc;
}

/* The first input slot: what --fixation is normalized to (pxvm_fixation_ref_slot) and --overlay
 * draws on; -1 if none. */
static int px__first_input(const pxvm_program *prog)
{
    for (int k = 1; k < prog->nslots; k++)
        if (prog->slots[k].role == PXI_ROLE_INPUT)
            return k;
    return -1;
}

/* A plan of "size": "any" that keeps state from frame to frame or finds its own fixations
 * ("video", "scanpath", --scanpath: the parser takes an any-size image for still images only)
 * run on --frames: compiled for the frame size of the source, known once its first frame is
 * decoded (*frames, *first: handed on to the frame loop), as the same plan with "image" at that
 * size; the size checked first against the plan's bounds by the any-size rule (a still plan
 * compiled from it). 1: not such a plan (nothing done), 0, or -1. */
static int px__frames_plan(px_run_args *a, const uint8_t *data, size_t len, px_frames **frames, pxvm_image *first,
                           pxvm_image *out, pxvm_error *err)
{
    json_error_t jerr;
    json_t *root = a->frames ? json_loadb((const char *)data, len, 0, &jerr) : NULL, *size;
    if (!root || !json_is_object(root) || !(size = json_object_get(root, "size")) || !json_is_string(size) ||
        strcmp(json_string_value(size), "any") ||
        !(json_object_get(root, "video") || json_object_get(root, "scanpath") || a->scanpath)) {
        json_decref(root);
        return 1; /* the parser's words for everything else */
    }
    char *text = NULL;
    int rc = px_run_frames_first(a, frames, first, err);
    if (rc == 0) { /* the bounds: the still any-size plan's slot, checked as --frames checks frames */
        json_t *still = json_deep_copy(root);
        json_object_del(still, "video"), json_object_del(still, "scanpath");
        char *t = still ? json_dumps(still, 0) : NULL;
        json_decref(still);
        pxvm_image img;
        pxvm_program poly;
        rc = !t ? pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)len)
                : pxvm_plan_image(t, strlen(t), a->prog_path, 0, &img, err);
        free(t);
        if (rc == 0 && (rc = pxvm_program_from_image(&img, &a->lim, &poly, err)) == 0) {
            rc = px_run_frame_bounds(&poly, px__first_input(&poly), a, *frames, 0, first->w, first->h, err);
            pxvm_program_free(&poly);
        }
    }
    if (rc == 0 && json_object_set_new(root, "image", json_pack("[i,i]", first->w, first->h)) == 0) {
        json_object_del(root, "size"), json_object_del(root, "bounds");
        if (!(text = json_dumps(root, 0)))
            rc = pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)len);
    }
    json_decref(root);
    if (rc == 0)
        rc = pxvm_plan_image(text, strlen(text), a->prog_path, a->scanpath, out, err);
    free(text);
    return rc;
}

static int px__load_program(px_run_args *a, pxvm_program *prog, px_frames **frames, pxvm_image *first,
                            pxvm_error *err)
{
    if (a->policy.kind == PX_POLICY_DYNAMIC && !px__ends_with(a->prog_path, ".json")) {
        return pxvm_fail(err, PXE_DYNAMIC_NOT_PLAN, -1, -1, a->prog_path);
    }
    if (!a->scanpath && !px__ends_with(a->prog_path, ".json"))
        return pxvm_program_load(a->prog_path, &a->lim, prog, err);
    uint8_t *data;
    size_t len;
    if (pxvm_read_file(a->prog_path, 1u << 24, &data, &len, err) < 0)
        return -1;
    if (a->scanpath && len >= 8 && !memcmp(data, "\x89PNG\r\n\x1a\n", 8)) { /* a .pxi: no plan to compile */
        free(data);
        return pxvm_fail(err, PXE_SCANPATH_NOT_PLAN, -1, -1, a->scanpath, a->prog_path);
    }
    pxvm_image img;
    int rc = a->policy.kind == PX_POLICY_DYNAMIC ? px__dynamic_program(a, data, len, &img, err)
                                                  : px__frames_plan(a, data, len, frames, first, &img, err);
    if (rc == 1)
        rc = pxvm_plan_image((const char *)data, len, a->prog_path, a->scanpath, &img, err);
    free(data);
    if (rc < 0 || pxvm_program_from_image(&img, &a->lim, prog, err) < 0)
        return -1;
    char lb[16]; /* compiled for the first frame's size: the frames that follow must have it */
    int k = *frames ? px_run_frame_slot(prog, a) : -1;
    if (k > 0 && px_frames_want(*frames, prog->slots[k].w, prog->slots[k].h, k, pxvm_slot_label(prog, k, lb)) < 0)
        return pxvm_fail(err, PXE_NOMEM, -1, -1, 0ull);
    return 0;
}

/* An any-size program replaced by its resolution: each --in of an any-size slot decoded into
 * pre[i] at its own size (checked against the slot's bounds) unless --policy fit or stretch
 * resizes it to the reference size, or to --size's W x H (every any-size input resolved at it). With `sizes` (--frames into an any-size slot), the frame slot
 * at the first frame's size (`first`), and the any-size program kept in sizes for the other
 * sizes the frames come in. */
static int px__anysize(pxvm_program *prog, const px_run_args *a, pxvm_image *pre, px_run_sizes *sizes,
                       const pxvm_image *first, pxvm_error *err)
{
    int wh[2 * (PXVM_MAX_SLOTS + 1)] = {0};
    for (int i = 0; i < a->nin && a->policy.kind == PX_POLICY_EXACT; i++) {
        int k = a->slot_of[0][i];
        if (!(prog->slots[k].flags & PXI_SLOT_ANYSIZE))
            continue;
        if (pxvm_image_load_any(a->ins[i].path, &a->lim, &pre[i], err) < 0)
            return -1;
        px_run_warn(err);
        if (pxvm_anysize_check(prog, k, pre[i].w, pre[i].h, err) < 0) {
            char msg[sizeof err->msg];
            snprintf(msg, sizeof msg, "%.500s (file '%.200s')", err->msg, a->ins[i].path);
            memcpy(err->msg, msg, sizeof msg);
            return -1;
        }
        wh[2 * k] = pre[i].w, wh[2 * k + 1] = pre[i].h;
    }
    if (px_size_slots(prog, a->prog_path, &a->size, wh, err) < 0)
        return -1;
    if (sizes)
        wh[2 * sizes->slot] = first->w, wh[2 * sizes->slot + 1] = first->h;
    pxvm_program res;
    if (pxvm_program_resolve(prog, wh, &a->lim, &res, err) < 0)
        return -1;
    if (sizes) {
        sizes->poly = *prog;
        memcpy(sizes->wh, wh, sizeof wh);
    } else
        pxvm_program_free(prog);
    *prog = res;
    return 0;
}

/* SIGINT, SIGTERM: no temporary output file stays behind; then the default action. */
static void px__on_signal(int sig)
{
    pxvm_outputs_remove_temporaries();
    signal(sig, SIG_DFL);
    raise(sig);
}

int main(int argc, char **argv)
{
    signal(SIGPIPE, SIG_IGN); /* a closed pipe is an i/o error (EPIPE), not a silent death */
    signal(SIGINT, px__on_signal);
    signal(SIGTERM, px__on_signal);
    px_run_args a;
    memset(&a, 0, sizeof a);
    a.exec_name = "cpu";
    a.repeat = 1;
    pxvm_limits_default(&a.lim);
    a.ins = calloc((size_t)argc, sizeof *a.ins);
    a.outs = calloc((size_t)argc, sizeof *a.outs);
    a.npys = calloc((size_t)argc, sizeof *a.npys);
    a.geoms = calloc((size_t)argc, sizeof *a.geoms);
    pxvm_image photo = {0, 0, NULL}, *pre = NULL; /* pre: any-size inputs decoded before the resolution */
    for (int li = 0; li < 3; li++)
        a.slot_of[li] = calloc((size_t)argc, sizeof(int));

    int rc = 0;
    pxvm_error err = {0};
    pxvm_program prog;
    memset(&prog, 0, sizeof prog);
    pxvm_executor *ex = NULL;
    const pxvm_executor_ops *ops = NULL;
    pxvm_outputs files = {0};
    pxvm_outputs_track(&files);
    px_run_sizes *sizes = NULL; /* --frames into an any-size slot: the resolutions at the frames' sizes */
    px_frames *frames = NULL;   /* ... its frames, opened before the resolution */
    pxvm_image first = {0, 0, NULL};
    const pxvm_program *loaded = &prog; /* after the frames: the resolution at the last frame's size */
    double t0 = 0, t_load = 0, t_open = 0, t_bind = 0, t_run = 0, t_out = 0;

    if (!a.ins || !a.outs || !a.npys || !a.geoms || !a.slot_of[0] || !a.slot_of[1] || !a.slot_of[2]) {
        rc = 1;
        goto done;
    }
    if (px__parse_args(argc, argv, &a, &rc) < 0)
        goto done;
    if (a.fixfile.path && px_run_fixfile_load(&a.fixfile, &a.lim, &err) < 0) {
        rc = err.cls == PXVM_USAGE ? px__bad_usage(err.msg) : px__die(&err);
        goto done;
    }
    int automatic = !strcmp(a.exec_name, "auto"); /* a bad name is a usage error before any work */
    if (!(ops = pxvm_executor_find(automatic ? "cuda" : a.exec_name, &err)) && !automatic)
        goto fail;
    t0 = px_run_now();
    if (px__load_program(&a, &prog, &frames, &first, &err) < 0)
        goto fail;
    px_run_warn(&err);
    /* --info alone describes the program: nothing bound, nothing asked of a run, nothing run
     * (said on stderr, so that exit 0 never hides a run that did not happen) */
    int info_alone = a.do_info && !a.nin && !a.nout && !a.nnpy && !a.ngeom && !a.nfix && !a.frames && !a.final_path &&
                     !a.overlay_path && !a.do_hash && !a.do_time && !a.do_trace && px__first_unbound(&prog) > 0;
    /* --info with an option that runs the program, but no input bound: say so (not a description
     * then "unlinkable: input not bound") */
    const char *runs = a.do_time ? "--time" : a.do_hash ? "--hash" : a.do_trace ? "--trace" : a.final_path ? "-o"
                       : a.overlay_path ? "--overlay" : a.nout ? "--out" : a.nnpy ? "--npy" : a.ngeom ? "--geometry"
                       : NULL;
    if (a.do_info && runs && !a.nin && !a.frames && px__first_unbound(&prog) > 0) {
        char msg[300];
        snprintf(msg, sizeof msg, "%s needs a run, and input slot %d is not bound: give --in SLOT=FILE (--info alone "
                 "describes the program)", runs, px__first_unbound(&prog));
        rc = px__bad_usage(msg);
        goto done;
    }
    if (info_alone && a.run_only) { /* an option for a run that does not happen: it would do nothing */
        char msg[300];
        snprintf(msg, sizeof msg, "--info alone runs nothing (input slot %d is not bound: --in SLOT=FILE runs it), "
                 "so %s would do nothing: give --in or leave %s out", px__first_unbound(&prog), a.run_only, a.run_only);
        rc = px__bad_usage(msg);
        goto done;
    }
    if (a.do_info)
        px__info(&prog);
    if (info_alone) {
        fprintf(stderr, "pxrun: --info: not run (input slot %d is not bound: --in SLOT=FILE runs it)\n",
                px__first_unbound(&prog));
        rc = 0;
        goto done;
    }
    t_load = px_run_now();
    if (px__resolve(&prog, &a, &err) < 0)
        goto fail;
    if (a.policy_text && px__first_input(&prog) < 0) {
        char msg[512];
        snprintf(msg, sizeof msg, "--policy '%.200s': the program has no input slot to resize images for", a.policy_text);
        rc = px__bad_usage(msg);
        goto done;
    }
    if (a.policy_native && !prog.any_size) {
        char msg[600];
        snprintf(msg, sizeof msg, "--policy native: program '%.300s' is not any-size; use fit or stretch", a.prog_path);
        rc = px__bad_usage(msg);
        goto done;
    }
    if (a.size.text && !prog.any_size) { /* its slot's size is the only size */
        px_size_slots(&prog, a.prog_path, &a.size, NULL, &err);
        rc = px__bad_usage(err.msg);
        goto done;
    }
    /* --frames into an any-size slot: the frames are opened and the first decoded now, the program
     * resolved at its size (a frame of another size later switches the executor to the
     * resolution at that size: px_run_frames) */
    int frame_slot = a.frames && prog.any_size ? px_run_frame_slot(&prog, &a) : -1;
    if (frame_slot > 0 && (prog.slots[frame_slot].flags & PXI_SLOT_ANYSIZE)) {
        if (!(sizes = calloc(1, sizeof *sizes))) {
            pxvm_fail(&err, PXE_NOMEM, -1, -1, (unsigned long long)sizeof *sizes);
            goto fail;
        }
        sizes->slot = frame_slot;
        if (px_run_frames_first(&a, &frames, &first, &err) < 0 ||
            px_run_frame_bounds(&prog, frame_slot, &a, frames, 0, first.w, first.h, &err) < 0)
            goto fail;
    }
    /* executors run only fixed programs: an any-size one is resolved here, at the sizes of its
     * --in files (decoded now, kept for the bind) or, with --policy fit or stretch, at its
     * reference size; before the fixations, which are fractions of the bound size */
    if (prog.any_size && !(pre = calloc((size_t)a.nin + 1u, sizeof *pre))) {
        pxvm_fail(&err, PXE_NOMEM, -1, -1, (unsigned long long)a.nin * sizeof *pre);
        goto fail;
    }
    if (prog.any_size && px__anysize(&prog, &a, pre, sizes, &first, &err) < 0)
        goto fail;
    int32_t fixq[PX_FIX_REGS][2];
    if (px_run_fixations(&prog, &a, fixq, &err) < 0)
        goto fail;
    pxvm_error cuda_why = {0};
    if (pxvm_executor_open_named(a.exec_name, &a.oo, &ops, &ex, &cuda_why, &err) < 0)
        goto fail;
    if (automatic) {
        char why[1024];
        pxvm_error_format(&cuda_why, why, sizeof why);
        if (ops != &pxvm_cpu_executor)
            fprintf(stderr, "pxrun: executor auto: using cuda (device %d)\n", a.oo.device);
        else
            fprintf(stderr, "pxrun: executor auto: cuda is %s; using cpu\n", why);
    }
    t_open = px_run_now();
    if (ops->load(ex, &prog, 1, &err) < 0)
        goto fail;
    for (int i = 0; i < a.nin; i++) {
        pxvm_image img;
        /* an input slot's size is known: a file of another size is refused from its header */
        int k = a.slot_of[0][i];
        char lb[16];
        pxvm_image_want want = {0, 0, k, pxvm_slot_label(&prog, k, lb)};
        int resize = prog.slots[k].role == PXI_ROLE_INPUT && a.policy.kind != PX_POLICY_EXACT;
        if (prog.slots[k].role == PXI_ROLE_INPUT && !resize)
            want.w = prog.slots[k].w, want.h = prog.slots[k].h;
        if (pre && pre[i].px) {
            img = pre[i], pre[i].px = NULL;
        } else if (pxvm_image_load_want(a.ins[i].path, &a.lim, &want, &img, &err) < 0) {
            if (err.code == PXE_INPUT_SIZE) { /* name the file too (--policy resizes it) */
                char msg[sizeof err.msg];
                snprintf(msg, sizeof msg, "%.400s (file '%.300s'; --policy stretch or fit resizes it)", err.msg,
                         a.ins[i].path);
                memcpy(err.msg, msg, sizeof msg);
            }
            goto fail;
        }
        px_run_warn(&err);
        if (resize && (img.w != prog.slots[k].w || img.h != prog.slots[k].h)) { /* --policy */
            pxvm_image fitted;
            int r = px_resize_policy(&img, prog.slots[k].w, prog.slots[k].h, &a.policy, &fitted, &err);
            pxvm_image_free(&img);
            if (r < 0)
                goto fail;
            img = fitted;
        }
        int r = pxvm_bind_image(ops, ex, a.slot_of[0][i], &img, &err);
        if (a.overlay_path && a.slot_of[0][i] == px__first_input(&prog) && !photo.px)
            photo = img; /* kept for the overlay */
        else
            pxvm_image_free(&img);
        if (r < 0)
            goto fail;
    }
    for (int k = 0; k < a.nfix; k++)
        if (ops->set_fixations(ex, 0, 1, px_run_fix_reg(&prog, k), 1, fixq[k], -1, &err) < 0)
            goto fail;
    t_bind = px_run_now();
    pxvm_run_options ro = {a.lim.max_steps, a.do_trace ? px__trace : NULL, NULL, NULL, NULL};
    long nframes = 0;
    if (a.frames) {
        if ((nframes = px_run_frames(ops, ex, &prog, sizes, frames, &first, &a, &ro, &files, &loaded, &err)) < 0)
            goto fail;
        a.repeat = (uint64_t)(nframes > 0 ? nframes : 1);
    } else
        for (uint64_t r = 0; r < a.repeat; r++) {
            if (a.do_profile && r + 1 == a.repeat)
                ro.profile = px__profile; /* the last run: the earlier ones warm up */
            if (ops->run(ex, &ro, &err) < 0)
                goto fail;
            ro.trace = NULL; /* trace the first run only */
        }
    t_run = px_run_now();
    /* outputs: all written to temporary files first, renamed only when every one succeeded */
    if (px_run_outputs(ops, ex, loaded, &a, &files, &err) < 0)
        goto fail;
    if ((loaded->uses_fixation || a.ngeom || a.overlay_path) &&
        px_run_fixation_outputs(ops, ex, loaded, &a, photo.px ? &photo : NULL, &files, &err) < 0)
        goto fail;
    if (a.do_hash && pxvm_hash_report(ops, ex, loaded, stdout, &err) < 0)
        goto fail;
    if (pxvm_outputs_commit(&files, &err) < 0)
        goto fail;
    t_out = px_run_now();
    if (a.do_time)
        fprintf(stderr,
                "time: load+validate %.3f ms, executor open %.3f ms, load+bind %.3f ms, run %.3f ms (%.3f ms x %" PRIu64
                "), outputs %.3f ms [%s]\n",
                t_load - t0, t_open - t_load, t_bind - t_open, t_run - t_bind, (t_run - t_bind) / (double)a.repeat,
                a.repeat, t_out - t_run, ops->name);
    goto done;
fail:
    pxvm_outputs_abort(&files);
    rc = px__die(&err);
done:
    if (ex)
        ops->close(ex);
    pxvm_program_free(&prog); /* the programs the executor was retargeted to: once it is closed */
    px_run_sizes_free(sizes);
    px_frames_close(frames);
    pxvm_image_free(&first);
    for (int i = 0; pre && i < a.nin; i++)
        pxvm_image_free(&pre[i]);
    free(pre);
    px_run_fixfile_free(&a.fixfile);
    for (int li = 0; li < 3; li++)
        free(a.slot_of[li]);
    free(a.ins);
    free(a.outs);
    free(a.npys);
    free(a.geoms);
    pxvm_image_free(&photo);
    return rc;
}
