/* pxrun_args.c - pxrun's command line: its --help text and the parser that checks every option
 * (one value each, numbers strict, no two outputs to one file) into px_run_args (pxrun.h). */
#define _POSIX_C_SOURCE 200809L
#define _XOPEN_SOURCE 700 /* realpath */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "../vm/vm.h"
#include "args.h"
#include "pxrun.h"

static const char px__usage[] =
    "usage: pxrun PROGRAM.pxi|PLAN.json [options]\n"
    "       pxrun --version           the version and the executors built in\n"
    "  (a plan, JSON as for pxasm --plan, is compiled first)\n"
    "  --in SLOT=FILE            bind an input slot to an image: any PNG or JPEG (baseline or\n"
    "                            progressive, grey or colour; decoded to RGBA8 on the host)\n"
    "  --policy POLICY           how an --in image of another size meets its input slot: native\n"
    "                            (an any-size input takes it at its own size, within its bounds:\n"
    "                            the default for any-size inputs; an error for fixed ones), exact\n"
    "                            (default: another size is an error), stretch[:FILTER] (resized to\n"
    "                            the slot's size) or fit[:FILTER][:PAD] (aspect kept, centred, bars\n"
    "                            PAD: R,G,B[,A] or hex RRGGBB[AA], default 0,0,0,255) or\n"
    "                            crop[:short=S][:FILTER] (the short side to S, default the slot's\n"
    "                            larger side, then the centre cut: CLIP's, docs/policies.md); FILTER\n"
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
    "  --exif-transpose          decode each --in image (and --frames file) with its EXIF orientation\n"
    "                            applied, as Pillow's ImageOps.exif_transpose (Python:\n"
    "                            exif_transpose=True); without it the pixels as stored\n"
    "  --lenient                 decode damaged inputs as far as the decoder can (a truncated JPEG's\n"
    "                            missing rows grey, a truncated PNG's rows that arrived (the rest\n"
    "                            zero, as Pillow's LOAD_TRUNCATED_IMAGES), corrupt data, a video\n"
    "                            frame with errors\n"
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

int px__verbose; /* --verbose: notes are printed */

/* The one-line error and where the options are (as pxbatch): the ~90 lines of --help after it
 * would bury it. */
int px__bad_usage(const char *what)
{
    fprintf(stderr, "pxrun: usage: %s\n(pxrun --help lists the options)\n", what);
    return 2;
}

/* The extension of a file name (as written) that says another format than the PNG --out writes
 * (a .jpg holding PNG bytes would be silently wrong), or NULL. */
static const char *px__other_format(const char *path)
{
    static const char *const other[] = {".jpg", ".jpeg", ".npy", ".webp", ".bmp", ".gif", ".tif", ".tiff"};
    const char *dot = strrchr(path, '.'), *slash = strrchr(path, '/');
    if (!dot || (slash && slash > dot))
        return NULL;
    for (size_t i = 0; i < sizeof other / sizeof other[0]; i++)
        if (!strcasecmp(dot, other[i]))
            return dot;
    return NULL;
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
int px__parse_args(int argc, char **argv, px_run_args *a, int *rc)
{
    int device_given = 0;
    int seen[64], nseen = 0; /* argv index of each single-valued option given (fewer than 64 kinds) */
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
        uint64_t n;
        static const char *const run_only[] = {"--policy", "--size", "--repeat", "--profile", "--png", "--threads",
                                               "--device", "--executor", "--lenient", "--max-steps",
                                               "--exif-transpose"};
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
        } else if (!strcmp(o, "--version")) {
            px_print_version("pxrun");
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
        } else if (!strcmp(o, "--exif-transpose")) {
            a->lim.flags |= PXVM_DECODE_EXIF_TRANSPOSE;
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
                const char *ext;
                if (px__parse_binding(argv[i + 1], 1, &a->outs[a->nout++]) < 0)
                    bad = "--out takes SLOT=FILE.png or SLOT@LEVEL=FILE.png";
                else if ((ext = px__other_format(a->outs[a->nout - 1].path))) {
                    snprintf(missing, sizeof missing, "--out writes PNG, and %.200s ends in %s: name it .png%s",
                             a->outs[a->nout - 1].path, ext, strcasecmp(ext, ".npy") ? "" : " (--npy writes .npy)");
                    bad = missing;
                }
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
            } else if (!strcmp(o, "--scanpath") && !px_parse_u64(val, &n) && n >= 1 && n <= PX_FIX_REGS) {
                a->scanpath = (int)n;
            } else if (!strcmp(o, "--overlay")) {
                a->overlay_path = val;
            } else if (!strcmp(o, "--frames")) {
                a->frames = val;
            } else if (!strcmp(o, "--max-frames") && !px_parse_u64(val, &n) && n >= 1) {
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
            } else if (!strcmp(o, "--threads") && !px_parse_u64(val, &n) && n <= 1024) {
                a->oo.threads = (int)n;
            } else if (!strcmp(o, "--device") && !px_parse_u64(val, &n) && n < 1024) {
                a->oo.device = (int)n, device_given = 1;
            } else if (!strcmp(o, "--repeat") && !px_parse_u64(val, &n) && n >= 1) {
                a->repeat = n;
            } else if (!strcmp(o, "--max-side") && !px_parse_u64(val, &n) && n >= 1 && n <= 65535) {
                a->lim.max_side = (uint32_t)n;
            } else if (!strcmp(o, "--max-memory") && !px_parse_u64(val, &n)) {
                a->lim.max_memory = n;
            } else if (!strcmp(o, "--max-insns") && !px_parse_u64(val, &n) && n >= 1 && n <= UINT32_MAX) {
                a->lim.max_insns = (uint32_t)n;
            } else if (!strcmp(o, "--max-steps") && !px_parse_u64(val, &n)) {
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
