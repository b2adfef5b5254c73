/* pxrun - run a pixel program on an executor and write its slots out as PNG or .npy. */
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
#include "pxrun.h"

static const char px__usage[] =
    "usage: pxrun PROGRAM.pxi|PLAN.json [options]\n"
    "  (a plan, JSON as for pxasm --plan, is compiled first)\n"
    "  --in SLOT=FILE            bind an input slot to an image: any PNG or JPEG (baseline or\n"
    "                            progressive, grey or colour; decoded to RGBA8 on the host)\n"
    "  --policy POLICY           how an --in image of another size meets its input slot: native\n"
    "                            (an any-size input takes it at its own size, within its bounds:\n"
    "                            the default for any-size inputs; an error for fixed ones), exact\n"
    "                            (default: another size is an error), stretch[:FILTER] (resized to\n"
    "                            the slot's size) or fit[:FILTER][:PAD] (aspect kept, centred, bars\n"
    "                            PAD: R,G,B[,A] or hex RRGGBB[AA], default 0,0,0,255); FILTER\n"
    "                            nearest, box, bilinear, hamming, bicubic (default) or lanczos;\n"
    "                            Pillow's bytes, as the RESIZE instruction; an image of the slot's\n"
    "                            size is bound as it is; or dynamic[:patch=P,merge=M,min=PIXELS,\n"
    "                            max=PIXELS][:FILTER] with a \"uniform\" plan: the plan is compiled\n"
    "                            for the size Qwen2-VL's rule gives the image (sides multiples of\n"
    "                            patch x merge, area in min..max) and the image resized to it\n"
    "  --size WxH                an any-size program: the size every --in image is bound at (within\n"
    "                            the input's bounds); each image is brought to W x H by --policy\n"
    "                            stretch[:FILTER] (the default with --size) or fit[:FILTER][:PAD]\n"
    "                            (into a W x H canvas), and the program runs its resolution at W x H.\n"
    "                            An error with a fixed-size program (its slot's size is the only\n"
    "                            size) and with native, exact or dynamic (they decide the size)\n"
    "  --out SLOT[@L]=FILE.png   write level L (default 0) of a slot as PNG after the run\n"
    "  --npy SLOT=FILE.npy       write a slot as uint8 (N, H, W, 4): its patches if it is a patch\n"
    "                            atlas, else the whole slot as N = 1\n"
    "  -o FILE.pxi               write the final program image (slot 'prog')\n"
    "  --png fast|best           PNG outputs: fast (default: zlib level 1, Up filter) or best\n"
    "                            (level 6, adaptive filters: smaller, about 3x slower); both\n"
    "                            deterministic\n"
    "  --executor cpu|cuda|auto  which executor runs the program (default cpu; auto = cuda when it\n"
    "                            works here, else cpu, and says which)\n"
    "  --threads N               CPU worker threads (default: all cores)\n"
    "  --device N                CUDA device (default 0)\n"
    "  --repeat N                run N times (timing; outputs are those of the last run)\n"
    "  --time                    print load, run and output times\n"
    "  --trace                   print each instruction as it executes\n"
    "  --profile                 print the time of each launch-plan step (last run)\n"
    "  --hash                    print a hash of every level of every slot after the run\n"
    "  --info                    print the program's slots, instructions and launch plan; alone\n"
    "                            (no input bound, no output asked) it runs nothing, and an option\n"
    "                            only a run uses (--policy, --size, --repeat, --profile, --png,\n"
    "                            --threads, --device, --executor, --lenient) is a usage error\n"
    "  --fixation X,Y            set the program's first input register (again: its second, third,\n"
    "                            ... in register order; 0, 1, ... when they are 0..K-1) before the\n"
    "                            run, for fixation-relative programs (each input register needs\n"
    "                            one): normalized coordinates of the first input, X and Y in [0, 1]\n"
    "                            (0.5,0.4 is its middle, left to right and top to bottom), or with\n"
    "                            px after both values level-0 texels of it (512px,300px)\n"
    "  --fixations FILE          with --frames: a fixation per frame for the first input register,\n"
    "                            frame k's from line k+1 of a text file, each X,Y as --fixation\n"
    "                            takes it (normalized to the frame, or texels with px), or from row\n"
    "                            k of a .npy (F, 2) (float32/64: normalized; int32/64: texels); a\n"
    "                            file with fewer lines than frames is a usage error at the first\n"
    "                            frame without one (--max-frames runs fewer)\n"
    "  --scanpath K              PLAN.json only: compile it relative to K fixations that the run\n"
    "                            finds itself (bottom-up saliency, ARGMAX with inhibition of return)\n"
    "                            and print them; logpolar and v1 plans\n"
    "  --geometry SLOT=FILE.npy  the token geometry of an atlas slot as int32 (N, 5): centre x, y\n"
    "                            (Q16 level-0 texels), du, dv (Q16), LOD used (Q8.8)\n"
    "  --overlay FILE.png        the first input with the first atlas's token footprints and the\n"
    "                            fixations drawn on it\n"
    "  --frames SOURCE           run once per frame, the frame bound to the first input not given\n"
    "                            by --in: a folder of images (name order), a glob ('f/*.png'), '-'\n"
    "                            (raw frames on standard input: --frame-size WxH, --frame-format\n"
    "                            rgb|rgba), or a video file (FFmpeg's libraries, when built with\n"
    "                            them). --npy writes every frame: (frames, N, H, W, 4); --out and -o\n"
    "                            the last frame; a progress line on a terminal. Into an any-size\n"
    "                            input, each frame is taken at its own size within the bounds (a\n"
    "                            frame outside them is an error naming it): the program is resolved\n"
    "                            at the first frame's size and switched at each change of size (the\n"
    "                            last 16 sizes kept); a program that keeps state from frame to frame\n"
    "                            (DIFF, UPDATE, persistent slots) restarts its stream there, as at\n"
    "                            its first frame, and says so; --fixation values are set again\n"
    "                            (normalized ones: fractions of each frame); --npy of the frame\n"
    "                            slot itself stacks frames of one size only. A PLAN.json of \"size\":\n"
    "                            \"any\" that keeps state (\"video\") or a scanpath is compiled at the\n"
    "                            first frame's size (within its bounds): one plan for every video\n"
    "  --max-frames N            with --frames: stop after N frames\n"
    "  --changed FILE.npy        with --frames: the changed-token masks of the first atlas, uint8\n"
    "                            (frames, N): 1 where the frame sampled the token again\n"
    "  --time                    with --frames: a line per frame (run time, dirty tiles, tokens)\n"
    "  --max-side N --max-memory BYTES --max-insns N --max-steps N   resource limits\n"
    "  --lenient                 decode damaged inputs as far as the decoder can (a truncated JPEG's\n"
    "                            missing rows grey, corrupt data, a video frame with errors\n"
    "                            concealed) and print what was wrong as a warning; without it any\n"
    "                            damage in a PNG, JPEG or video frame is an error (malformed) naming\n"
    "                            the file and the frame. Bytes after a complete image (after a PNG's\n"
    "                            IEND, a JPEG's end-of-image marker: a motion photo's video, an MPF\n"
    "                            file's second image, padding) are no damage: read in both modes\n"
    "  --verbose                 print notes: bytes after an input's end that were ignored\n"
    "SLOT is a slot name or number ('prog' or 0 is the program image).\n"
    "Files: '-' is standard input (for the program or one --in; at most one of them) and standard\n"
    "output. Inputs may be pipes, FIFOs and /dev/fd paths (read up to --max-memory bytes).\n"
    "Outputs are written only after the run succeeded. A regular file (or a new path) is written\n"
    "to a temporary file beside it and renamed into place when every output succeeded, so it is\n"
    "either the old or the complete new file; a symlink is followed and its target replaced that\n"
    "way. '-', a FIFO or a character device is written directly (before any rename), and cannot be\n"
    "taken back once written: a reader may see a partial stream if a later write fails. Directories,\n"
    "block devices and sockets are refused. SIGINT/SIGTERM remove the temporary files.\n"
    "Exit status: 0 ok, 1 i/o, 2 usage, 3 malformed, 4 invalid, 5 unlinkable, 6 trap, 7 unavailable,\n"
    "8 plan (a PLAN.json that does not compile, as pxasm).\n";

double px_run_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}


static int px__die(const pxvm_error *err)
{
    char buf[1024];
    pxvm_error_format(err, buf, sizeof buf);
    fprintf(stderr, "pxrun: %s\n%s", buf, err->cls == PXVM_USAGE ? "(pxrun --help lists the options)\n" : "");
    return pxvm_exit_status(err->cls);
}

static int px__verbose; /* --verbose: notes are printed */

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

/* The one-line error and where the options are (as pxbatch): the ~90 lines of --help after it
 * would bury it. */
static int px__bad_usage(const char *what)
{
    fprintf(stderr, "pxrun: usage: %s\n(pxrun --help lists the options)\n", what);
    return 2;
}

/* "SLOT=PATH" or "SLOT@L=PATH" */
static int px__parse_binding(char *arg, int allow_level, px_run_binding *b)
{
    char *eq = strchr(arg, '=');
    if (!eq || eq == arg || !eq[1])
        return -1;
    *eq = 0;
    b->slot = arg;
    b->path = eq + 1;
    b->level = 0;
    char *at = strchr(arg, '@');
    if (at) {
        if (!allow_level)
            return -1;
        *at = 0;
        char *end;
        long l = strtol(at + 1, &end, 10);
        if (!at[1] || *end || l < 0 || l >= PXVM_MAX_LEVELS)
            return -1;
        b->level = (int)l;
    }
    return 0;
}

static int px__parse_u64(const char *s, uint64_t *v)
{
    char *end;
    errno = 0;
    unsigned long long x = strtoull(s, &end, 10);
    if (!*s || *end || errno || s[0] == '-')
        return -1;
    *v = x;
    return 0;
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

/* The path an output names, for comparing two outputs: the real path of its folder + its name
 * (so ./x.npy, x.npy and dir/../x.npy are one file); the path itself when its folder does not
 * resolve (the write then fails and names it). */
static void px__output_key(const char *path, char *key, size_t size)
{
    const char *slash = strrchr(path, '/');
    char dir[4096], real[4096];
    if (!strcmp(path, "-")) { /* standard output */
        snprintf(key, size, "-");
        return;
    }
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else if (slash == path)
        snprintf(dir, sizeof dir, "/");
    else
        snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    if (realpath(dir, real))
        snprintf(key, size, "%.4000s/%.4000s", real, slash ? slash + 1 : path);
    else
        snprintf(key, size, "%s", path);
}

/* Two outputs written to one file: the last would replace the first, exit 0. A usage error naming
 * the file and both outputs. Returns 0, or the exit status (2). */
static int px__outputs_distinct(const px_run_args *a)
{
    int n = a->nout + a->nnpy + a->ngeom + 3;
    char(*keys)[8200] = calloc((size_t)n, sizeof *keys);
    char(*names)[300] = calloc((size_t)n, sizeof *names);
    const char **paths = calloc((size_t)n, sizeof *paths);
    int m = 0, rc = 0;
    if (!keys || !names || !paths) {
        rc = px__bad_usage("out of memory comparing the output files");
        goto done;
    }
    for (int i = 0; i < a->nout; i++, m++)
        snprintf(names[m], sizeof names[m], "--out %.200s", a->outs[i].slot), paths[m] = a->outs[i].path;
    for (int i = 0; i < a->nnpy; i++, m++)
        snprintf(names[m], sizeof names[m], "--npy %.200s", a->npys[i].slot), paths[m] = a->npys[i].path;
    for (int i = 0; i < a->ngeom; i++, m++)
        snprintf(names[m], sizeof names[m], "--geometry %.200s", a->geoms[i].slot), paths[m] = a->geoms[i].path;
    if (a->final_path)
        snprintf(names[m], sizeof names[m], "-o"), paths[m++] = a->final_path;
    if (a->overlay_path)
        snprintf(names[m], sizeof names[m], "--overlay"), paths[m++] = a->overlay_path;
    if (a->changed_path)
        snprintf(names[m], sizeof names[m], "--changed"), paths[m++] = a->changed_path;
    for (int i = 0; i < m && !rc; i++) {
        px__output_key(paths[i], keys[i], sizeof keys[i]);
        for (int e = 0; e < i && !rc; e++)
            if (!strcmp(keys[e], keys[i])) {
                char msg[1400];
                char alias[500] = "";
                if (strcmp(paths[e], paths[i]))
                    snprintf(alias, sizeof alias, " (%s as '%.400s')", names[i], paths[i]);
                snprintf(msg, sizeof msg, "%s and %s both write '%.400s'%s: one would replace the other; give each "
                         "output its own file", names[e], names[i], paths[e], alias);
                rc = px__bad_usage(msg);
            }
    }
done:
    free(keys);
    free(names);
    free(paths);
    return rc;
}

/* Parses the command line; returns -1 (done: *rc is the exit status) or 0. */
static int px__parse_args(int argc, char **argv, px_run_args *a, int *rc)
{
    int device_given = 0;
    int seen[64], nseen = 0; /* argv index of each single-valued option given (fewer than 64 kinds) */
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
        uint64_t n;
        static const char *const run_only[] = {"--policy", "--size", "--repeat", "--profile", "--png", "--threads",
                                               "--device", "--executor", "--lenient", "--max-steps"};
        static const char *const valued[] = {"--in", "--out", "--npy", "--geometry", "--policy", "--size", "--fixation",
                                             "--fixations", "--scanpath", "--overlay", "--frames", "--max-frames", "--changed",
                                             "--frame-size", "--frame-format", "-o", "--png", "--executor",
                                             "--threads", "--device", "--repeat", "--max-side", "--max-memory",
                                             "--max-insns", "--max-steps"};
        int known = 0;
        for (size_t k = 0; k < sizeof valued / sizeof valued[0]; k++)
            known |= !strcmp(o, valued[k]);
        for (size_t k = 0; !a->run_only && k < sizeof run_only / sizeof run_only[0]; k++)
            if (!strcmp(o, run_only[k]))
                a->run_only = run_only[k];
        if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
            fputs(px__usage, stdout);
            *rc = 0;
            return -1;
        } else if (!strcmp(o, "--time")) {
            a->do_time = 1;
        } else if (!strcmp(o, "--trace")) {
            a->do_trace = 1;
        } else if (!strcmp(o, "--hash")) {
            a->do_hash = 1;
        } else if (!strcmp(o, "--info")) {
            a->do_info = 1;
        } else if (!strcmp(o, "--profile")) {
            a->do_profile = 1;
        } else if (!strcmp(o, "--lenient")) {
            a->lim.flags |= PXVM_DECODE_LENIENT;
        } else if (!strcmp(o, "--verbose")) {
            px__verbose = 1;
        } else if (o[0] == '-' && o[1]) {
            const char *bad = NULL;
            if (!known) {
                char msg[300];
                snprintf(msg, sizeof msg, "unknown option '%.200s'", o);
                *rc = px__bad_usage(msg);
                return -1;
            }
            int multi = !strcmp(o, "--in") || !strcmp(o, "--out") || !strcmp(o, "--npy") || !strcmp(o, "--geometry") ||
                        !strcmp(o, "--fixation");
            for (int k = 0; val && !multi && k < nseen; k++) /* given twice: never the last one silently */
                if (!strcmp(argv[seen[k]], o)) {
                    char msg[400];
                    snprintf(msg, sizeof msg, "%s given twice ('%.150s', then '%.150s'): give it once", o,
                             argv[seen[k] + 1], val);
                    *rc = px__bad_usage(msg);
                    return -1;
                }
            if (val && !multi && nseen < 64)
                seen[nseen++] = i;
            char missing[300];
            if (!val) {
                snprintf(missing, sizeof missing, "%.200s is missing its value", o);
                bad = missing;
            }
            else if (!strcmp(o, "--in")) {
                if (px__parse_binding(argv[i + 1], 0, &a->ins[a->nin++]) < 0)
                    bad = "--in takes SLOT=FILE (PNG or JPEG)";
            } else if (!strcmp(o, "--out")) {
                if (px__parse_binding(argv[i + 1], 1, &a->outs[a->nout++]) < 0)
                    bad = "--out takes SLOT=FILE.png or SLOT@LEVEL=FILE.png";
            } else if (!strcmp(o, "--npy")) {
                if (px__parse_binding(argv[i + 1], 0, &a->npys[a->nnpy++]) < 0)
                    bad = "--npy takes SLOT=FILE.npy";
            } else if (!strcmp(o, "--geometry")) {
                if (px__parse_binding(argv[i + 1], 0, &a->geoms[a->ngeom++]) < 0)
                    bad = "--geometry takes SLOT=FILE.npy";
            } else if (!strcmp(o, "--policy")) {
                pxvm_error perr;
                if (px_policy_option(val, &a->policy, &a->policy_native, &perr) < 0) {
                    *rc = px__bad_usage(perr.msg);
                    return -1;
                }
                a->policy_text = val;
            } else if (!strcmp(o, "--size")) {
                pxvm_error serr;
                if (px_size_parse(val, &a->size, &serr) < 0) {
                    *rc = px__bad_usage(serr.msg);
                    return -1;
                }
            } else if (!strcmp(o, "--fixation")) {
                if (a->nfix >= PX_FIX_REGS)
                    bad = "at most 8 --fixation (registers 0..7)";
                else
                    a->fix_text[a->nfix++] = val;
            } else if (!strcmp(o, "--fixations")) {
                a->fixfile.path = val;
            } else if (!strcmp(o, "--scanpath") && !px__parse_u64(val, &n) && n >= 1 && n <= PX_FIX_REGS) {
                a->scanpath = (int)n;
            } else if (!strcmp(o, "--overlay")) {
                a->overlay_path = val;
            } else if (!strcmp(o, "--frames")) {
                a->frames = val;
            } else if (!strcmp(o, "--max-frames") && !px__parse_u64(val, &n) && n >= 1) {
                a->max_frames = (long)n;
            } else if (!strcmp(o, "--changed")) {
                a->changed_path = val;
            } else if (!strcmp(o, "--frame-size") && !px_frames_parse_size(val, &a->frame_w, &a->frame_h)) {
            } else if (!strcmp(o, "--frame-format") && (!strcmp(val, "rgb") || !strcmp(val, "rgba"))) {
                a->frame_channels = !strcmp(val, "rgb") ? 3 : 4;
            } else if (!strcmp(o, "-o")) {
                a->final_path = val;
            } else if (!strcmp(o, "--png") && (!strcmp(val, "fast") || !strcmp(val, "best"))) {
                a->png = !strcmp(val, "best") ? PXVM_PNG_BEST : PXVM_PNG_FAST;
            } else if (!strcmp(o, "--executor")) {
                a->exec_name = val;
            } else if (!strcmp(o, "--threads") && !px__parse_u64(val, &n) && n <= 1024) {
                a->oo.threads = (int)n;
            } else if (!strcmp(o, "--device") && !px__parse_u64(val, &n) && n < 1024) {
                a->oo.device = (int)n, device_given = 1;
            } else if (!strcmp(o, "--repeat") && !px__parse_u64(val, &n) && n >= 1) {
                a->repeat = n;
            } else if (!strcmp(o, "--max-side") && !px__parse_u64(val, &n) && n >= 1 && n <= 65535) {
                a->lim.max_side = (uint32_t)n;
            } else if (!strcmp(o, "--max-memory") && !px__parse_u64(val, &n)) {
                a->lim.max_memory = n;
            } else if (!strcmp(o, "--max-insns") && !px__parse_u64(val, &n) && n >= 1 && n <= UINT32_MAX) {
                a->lim.max_insns = (uint32_t)n;
            } else if (!strcmp(o, "--max-steps") && !px__parse_u64(val, &n)) {
                a->lim.max_steps = n;
            } else {
                char msg[256];
                snprintf(msg, sizeof msg, "bad option or value: %s %s", o, val);
                *rc = px__bad_usage(msg);
                return -1;
            }
            if (bad) {
                *rc = px__bad_usage(bad);
                return -1;
            }
            i++;
        } else if (!a->prog_path) {
            a->prog_path = o;
        } else {
            *rc = px__bad_usage("more than one program given");
            return -1;
        }
    }
    if (argc == 1) { /* pxrun alone: how to use it */
        fprintf(stderr, "%s", px__usage);
        *rc = 2;
        return -1;
    }
    if (!a->prog_path) {
        *rc = px__bad_usage("no program given");
        return -1;
    }
    if (a->changed_path && !a->frames) {
        *rc = px__bad_usage("--changed needs --frames");
        return -1;
    }
    /* options that would do nothing are errors */
    if (a->max_frames && !a->frames) {
        *rc = px__bad_usage("--max-frames needs --frames");
        return -1;
    }
    if (a->fixfile.path && !a->frames) {
        *rc = px__bad_usage("--fixations gives one fixation per frame: it needs --frames (--fixation X,Y sets one)");
        return -1;
    }
    if (a->fixfile.path && (a->nfix || a->scanpath)) {
        *rc = px__bad_usage(a->nfix ? "--fixations and --fixation both set the first input register: give one"
                                    : "--fixations sets the fixations, --scanpath has the run find them: give one");
        return -1;
    }
    if ((a->frame_w || a->frame_channels) && !(a->frames && !strcmp(a->frames, "-"))) {
        *rc = px__bad_usage("--frame-size and --frame-format describe raw frames on standard input (--frames -)");
        return -1;
    }
    if (a->frames && a->policy_text && !a->policy_native && a->policy.kind != PX_POLICY_EXACT) {
        *rc = px__bad_usage("--policy resizes --in images only: --frames binds each frame at its own size (use pxbatch "
                            "--policy for a folder of photos resized)");
        return -1;
    }
    if (a->size.text && a->frames) {
        *rc = px__bad_usage("--size binds the --in images: --frames binds each frame at its own size");
        return -1;
    }
    pxvm_error serr;
    if (px_size_policy(&a->size, a->policy_text, a->policy_native, &a->policy, &serr) < 0) {
        *rc = px__bad_usage(serr.msg);
        return -1;
    }
    if (device_given && a->exec_name && !strcmp(a->exec_name, "cpu")) {
        *rc = px__bad_usage("--device: a CUDA device, but --executor is cpu");
        return -1;
    }
    if ((*rc = px__outputs_distinct(a)) != 0)
        return -1;
    int from_stdin = !strcmp(a->prog_path, "-") + (a->frames && !strcmp(a->frames, "-"));
    for (int i = 0; i < a->nin; i++)
        from_stdin += !strcmp(a->ins[i].path, "-");
    if (from_stdin > 1) {
        *rc = px__bad_usage("'-' (standard input) names at most one of the program and the --in files");
        return -1;
    }
    return 0;
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
                    char msg[700], lb[16];
                    snprintf(msg, sizeof msg, "--in binds slot %d ('%s') twice ('%.250s', then '%.250s'): give it once",
                             k, pxvm_slot_label(prog, k, lb), a->ins[e].path, a->ins[i].path);
                    return pxvm_fail(err, PXE_USAGE, -1, -1, msg);
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
    char msg[512];
    pxvm_plan plan;
    if (a->nin != 1) {
        snprintf(msg, sizeof msg, "--policy dynamic: give the plan's one input image (--in image=FILE), not %d", a->nin);
        return pxvm_fail(err, PXE_USAGE, -1, -1, msg);
    }
    if (pxvm_plan_parse((const char *)data, len, a->prog_path, &plan, err) < 0)
        return -1;
    int uniform = !strcmp(plan.scheme, "uniform"), patch = plan.patch;
    snprintf(msg, sizeof msg, "--policy dynamic needs a \"uniform\" plan (compiled for each image's size); '%.200s' is "
             "a plan of scheme '%s'", a->prog_path, plan.scheme);
    pxvm_plan_free(&plan);
    if (!uniform)
        return pxvm_fail(err, PXE_USAGE, -1, -1, msg);
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
        char msg[400];
        snprintf(msg, sizeof msg, "--policy dynamic needs a \"uniform\" plan (.json), compiled for the image's size; "
                 "'%.200s' is a program of one size", a->prog_path);
        return pxvm_fail(err, PXE_USAGE, -1, -1, msg);
    }
    if (!a->scanpath && !px__ends_with(a->prog_path, ".json"))
        return pxvm_program_load(a->prog_path, &a->lim, prog, err);
    uint8_t *data;
    size_t len;
    if (pxvm_read_file(a->prog_path, 1u << 24, &data, &len, err) < 0)
        return -1;
    if (a->scanpath && len >= 8 && !memcmp(data, "\x89PNG\r\n\x1a\n", 8)) { /* a .pxi: no plan to compile */
        char msg[400];
        free(data);
        snprintf(msg, sizeof msg, "--scanpath %d needs a JSON plan (a logpolar or v1 plan, compiled here relative to the "
                 "fixations the run finds); '%.200s' is a program image (.pxi), already compiled", a->scanpath, a->prog_path);
        return pxvm_fail(err, PXE_USAGE, -1, -1, msg);
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

int px_run_parse_fixation(const char *text, double v[2], int *texels, const char *what, pxvm_error *err)
{
    int px[2] = {0, 0};
    const char *p = text;
    char msg[700];
    for (int i = 0; i < 2; i++) {
        char *end;
        v[i] = strtod(p, &end);
        if (end == p)
            goto bad;
        if (!strncmp(end, "px", 2))
            px[i] = 1, end += 2;
        if (i == 0 && *end != ',')
            goto bad;
        if (i == 1 && *end)
            goto bad;
        p = end + 1;
    }
    if (px[0] != px[1]) {
        snprintf(msg, sizeof msg, "%s: give both values normalized (0.5,0.4) or both in texels (512px,300px)", what);
        return pxvm_fail(err, PXE_USAGE, -1, -1, msg);
    }
    *texels = px[0];
    return 0;
bad:
    snprintf(msg, sizeof msg, "%s: expected X,Y: normalized coordinates of the first input in [0, 1] (0.5,0.4), or "
             "level-0 texels with px (512px,300px)", what);
    return pxvm_fail(err, PXE_USAGE, -1, -1, msg);
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

int px_run_fix_reg(const pxvm_program *prog, int k)
{
    unsigned inputs = pxvm_fixation_inputs(prog, NULL);
    for (int r = 0; r < PX_FIX_REGS; r++)
        if (inputs >> r & 1 && k-- == 0)
            return r;
    return -1;
}

/* Every --fixation parsed, checked (the k-th given is for the program's k-th input register, the
 * values in range) and converted to Q16 as the library converts them; then every input register
 * of the program must have one. Before anything is loaded on the executor. */
int px_run_fixations(const pxvm_program *prog, const px_run_args *a, int32_t q[PX_FIX_REGS][2], pxvm_error *err)
{
    unsigned given = 0;
    for (int k = 0; k < a->nfix; k++) {
        const char *t = a->fix_text[k], *comma = strchr(t, ',');
        char what[300], hint[300] = "";
        double v[2];
        int texels = 0, reg = px_run_fix_reg(prog, k);
        snprintf(what, sizeof what, "--fixation '%s'", t);
        if (px_run_parse_fixation(t, v, &texels, what, err) < 0)
            return -1;
        if (reg < 0 && k > 0) { /* (k = 0: the library's words for a program that takes none) */
            char msg[900], list[64] = "";
            for (int r = 0, n = 0; r < k; r++)
                n += snprintf(list + n, sizeof list - (size_t)n, "%s%d", r ? ", " : "", px_run_fix_reg(prog, r));
            snprintf(msg, sizeof msg, "%.300s: program '%.300s' takes %d fixation%s, one per input register in "
                     "register order (its input register%s: %s): this is fixation %d", what, a->prog_path, k,
                     k > 1 ? "s" : "", k > 1 ? "s" : "", list, k + 1);
            return pxvm_fail(err, PXE_USAGE, -1, -1, msg);
        }
        if (pxvm_fixation_check_regs(prog, a->prog_path, reg < 0 ? 0 : reg, 1, what, err) < 0)
            return -1;
        given |= 1u << reg;
        if (!texels && comma && v[0] >= 0 && v[1] >= 0 && (v[0] > 1 || v[1] > 1) && v[0] < 1e9 && v[1] < 1e9)
            /* a texel fixation written without px? */
            snprintf(hint, sizeof hint, "; texels are written with px: --fixation %.*spx,%spx", (int)(comma - t), t,
                     comma + 1);
        if (pxvm_fixation_convert(prog, v, texels, q[k], what, hint, err) < 0)
            return -1;
    }
    if (a->fixfile.path) { /* the first input register, set at each frame (px_run_fixfile_frame) */
        int reg = px_run_fix_reg(prog, 0);
        char what[400];
        snprintf(what, sizeof what, "--fixations '%.300s'", a->fixfile.path);
        if (pxvm_fixation_check_regs(prog, a->prog_path, reg < 0 ? 0 : reg, 1, what, err) < 0)
            return -1;
        given |= 1u << reg;
    }
    return pxvm_fixation_check_set(prog, a->prog_path, given, -1,
                                   " (--fixation X,Y, normalized to the first input)", err);
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
        rc = err.code == PXE_USAGE ? px__bad_usage(err.msg) : px__die(&err);
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
