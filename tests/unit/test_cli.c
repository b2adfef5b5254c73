/* test_cli.c - pxrun as a user meets it: usage and exit codes, outputs that are all-or-nothing,
 * the .npy tensor, the final program image, tracing, a missing executor. */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../tools/outputs.h"
#include "test.h"

/* The folder of the binaries under test (`make asan` points it at the sanitized build). */
static const char *px__bin(void)
{
    const char *b = getenv("PXVM_BIN");
    return b && *b ? b : "bin";
}

/* Runs a shell command, with "bin/" replaced by px__bin(); returns its exit status and its output
 * (stdout + stderr) in out. */
static int px__sh(char *out, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int px__sh(char *out, size_t cap, const char *fmt, ...)
{
    char cmd[2048];
    va_list ap;
    va_start(ap, fmt);
    char raw[2048];
    vsnprintf(raw, sizeof raw, fmt, ap);
    va_end(ap);
    size_t n = 0;
    for (const char *p = raw; *p && n + 64 < sizeof cmd;) {
        if (!strncmp(p, "bin/", 4) && (p == raw || p[-1] == ' ')) {
            n += (size_t)snprintf(cmd + n, sizeof cmd - n, "%s/", px__bin());
            p += 4;
        } else {
            cmd[n++] = *p++;
        }
    }
    cmd[n] = 0;
    strncat(cmd, " 2>&1", sizeof cmd - strlen(cmd) - 1);
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    n = fread(out, 1, cap - 1, p);
    out[n] = 0;
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int px__exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

static const char *px__tmpdir(void)
{
    static char dir[64];
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "/tmp/pxvm-test-XXXXXX");
        if (!mkdtemp(dir))
            dir[0] = 0;
    }
    return dir;
}

/* Writes a program that traps (DOT_RGB overflow) after declaring an output slot. */
static void px__write_trap_program(const char *path)
{
    pxvm_builder b;
    pxvm_build_init(&b, 16);
    pxvm_build_slot(&b, PXI_ROLE_OUTPUT, "out", 4, 4);
    uint32_t dot = pxvm_build_insn(&b, PX_OP_DOT_RGB, NULL);
    pxvm_build_insn(&b, PX_OP_HALT, NULL);
    uint8_t row[16 * 4];
    memset(row, 255, sizeof row);
    int r = pxvm_build_row(&b, row, 16);
    int o = pxvm_build_row(&b, row, 0);
    pxvm_build_patch(&b, dot, PX_FI(DOT_RGB, row_a), r);
    pxvm_build_patch(&b, dot, PX_FI(DOT_RGB, row_b), r);
    pxvm_build_patch(&b, dot, PX_FI(DOT_RGB, row_out), o);
    pxvm_image img;
    uint8_t *png;
    size_t len;
    pxvm_outputs out = {0};
    CHECK(pxvm_build_finish(&b, &img, NULL) == 0);
    CHECK(pxvm_png_encode(&img, &png, &len, NULL) == 0);
    CHECK(pxvm_outputs_add(&out, path, png, len, NULL) == 0 && pxvm_outputs_commit(&out, NULL) == 0);
    free(png);
    pxvm_image_free(&img);
    pxvm_build_free(&b);
}

TEST(cli_usage_errors_exit_2)
{
    char out[8192];
    CHECK_EQ(px__sh(out, sizeof out, "bin/pxrun"), 2);
    CHECK_STR(out, "usage: pxrun PROGRAM.pxi");
    CHECK_EQ(px__sh(out, sizeof out, "bin/pxrun programs/dot_test.pxi --bogus 1"), 2);
    CHECK_STR(out, "unknown option '--bogus'");
    CHECK_EQ(px__sh(out, sizeof out, "bin/pxrun programs/dot_test.pxi --out atlas"), 2);
    CHECK_EQ(px__sh(out, sizeof out, "bin/pxrun programs/dot_test.pxi --threads -3"), 2);
    CHECK_EQ(px__sh(out, sizeof out, "bin/pxrun programs/dot_test.pxi --executor gpu"), 2);
    CHECK_STR(out, "no executor named 'gpu'");
    CHECK_EQ(px__sh(out, sizeof out, "bin/pxrun programs/dot_test.pxi --out nosuch=/tmp/x.png"), 2);
    CHECK_STR(out, "the program has no slot 'nosuch'");
    CHECK_EQ(px__sh(out, sizeof out, "bin/pxrun programs/foveate273.pxi --in image=programs/data/chelsea.png --out atlas@9=/tmp/x.png"), 2);
    CHECK_STR(out, "has levels 0..8; level 9 asked for");
    /* --out writes PNG: a name that says another format would hold the wrong bytes, and nothing
     * is written (a .PNG in capitals, or no extension, are PNG names) */
    char jpg[256];
    snprintf(jpg, sizeof jpg, "%s/atlas.JPG", px__tmpdir());
    CHECK_EQ(px__sh(out, sizeof out, "bin/pxrun programs/foveate273.pxi --in image=programs/data/chelsea.png --out atlas=%s", jpg), 2);
    CHECK_STR(out, "--out writes PNG, and ");
    CHECK_STR(out, "atlas.JPG ends in .JPG: name it .png");
    CHECK(!px__exists(jpg));
    CHECK_EQ(px__sh(out, sizeof out, "bin/pxrun programs/foveate273.pxi --in image=programs/data/chelsea.png --out atlas=/tmp/x.npy"), 2);
    CHECK_STR(out, "name it .png (--npy writes .npy)");
    CHECK_EQ(px__sh(out, sizeof out, "bin/pxrun --help"), 0);
}

/* An option that would do nothing is an error (exit 2), not a run that ignores it: a resize
 * policy with --frames (each frame is bound at its own size), --max-frames without --frames,
 * --frame-size or --frame-format but for raw frames on standard input, --device on the CPU
 * executor; pxbatch: --devices on the CPU executor, --verify with any other option. The policies
 * that resize nothing still go with --frames. */
TEST(cli_options_that_would_do_nothing_exit_2)
{
    char out[8192];
    const char *any = "bin/pxrun programs/foveate273_any.pxi";
    static const struct { const char *args, *says; } pxrun[] = {
        {"--frames programs/data --policy fit --npy atlas=/tmp/pxvm-x.npy", "--policy resizes --in images only"},
        {"--frames programs/data --policy stretch:bicubic --npy atlas=/tmp/pxvm-x.npy", "--policy resizes --in images only"},
        {"--in image=programs/data/chelsea.png --max-frames 3", "--max-frames needs --frames"},
        {"--frames programs/data --frame-size 10x10", "raw frames on standard input (--frames -)"},
        {"--in image=programs/data/chelsea.png --frame-format rgb", "raw frames on standard input (--frames -)"},
        {"--in image=programs/data/chelsea.png --executor cpu --device 5", "a CUDA device, but --executor is cpu"},
    };
    for (size_t i = 0; i < sizeof pxrun / sizeof pxrun[0]; i++) {
        char cmd[512];
        snprintf(cmd, sizeof cmd, "%s %s", any, pxrun[i].args);
        CHECK_EQ(px__sh(out, sizeof out, "%s", cmd), 2);
        CHECK_STR(out, pxrun[i].says);
    }
    CHECK_EQ(px__sh(out, sizeof out, "bin/pxrun programs/foveate273_any.pxi --frames programs/data --policy exact --hash"), 0);
    CHECK_EQ(px__sh(out, sizeof out, "bin/pxrun programs/foveate273_any.pxi --frames programs/data --policy native --hash"), 0);
    CHECK_EQ(px__sh(out, sizeof out, "bin/pxbatch programs/foveate273_any.pxi --in-dir programs/data --out /tmp/pxvm-nodir "
                                     "--executor cpu --devices 4"), 2);
    CHECK_STR(out, "--devices 4: CUDA devices, but --executor is cpu");
    CHECK_EQ(px__sh(out, sizeof out, "bin/pxbatch --verify /tmp/pxvm-nodir --shard-size 3"), 2);
    CHECK_STR(out, "--verify DIR takes no program, --out, inputs, --policy or --shard-size");
}

TEST(cli_error_classes_have_exit_codes)
{
    char out[8192], path[256];
    const char *dir = px__tmpdir();
    snprintf(path, sizeof path, "%s/random.pxi", dir);
    FILE *f = fopen(path, "wb");
    for (int i = 0; f && i < 1000; i++)
        fputc((i * 7919) & 255, f);
    if (f)
        fclose(f);
    CHECK_EQ(px__sh(out, sizeof out, "bin/pxrun %s", path), 3);
    CHECK_STR(out, "pxrun: malformed: ");
    CHECK_EQ(px__sh(out, sizeof out, "bin/pxrun programs/data/chelsea.png"), 3); /* a photo is no program */
    CHECK_STR(out, "malformed: pixel (0,0): bad magic");
    CHECK_STR(out, "not a pxvm program (expected 'PXVM') (file 'programs/data/chelsea.png')"); /* which file */
    CHECK_EQ(px__sh(out, sizeof out, "bin/pxrun programs/foveate273.pxi --max-insns 10"), 4);
    CHECK_STR(out, "invalid: pixel (3,0): 275 instructions exceed the limit of 10");
    CHECK_EQ(px__sh(out, sizeof out, "bin/pxrun programs/foveate273.pxi"), 5);
    CHECK_STR(out, "unlinkable: input slot 1 ('image') is not bound");
    CHECK_EQ(px__sh(out, sizeof out, "bin/pxrun programs/foveate273.pxi --in image=programs/data/chelsea.png --max-steps 5"), 6);
    CHECK_STR(out, "trap: pixel (");
    CHECK_EQ(px__sh(out, sizeof out, "bin/pxrun /nonexistent.pxi"), 1);
    CHECK_STR(out, "cannot read '/nonexistent.pxi'");
}

TEST(cli_cuda_executor_missing_is_a_clear_error)
{
    /* Here (no GPU, or a build without the CUDA-GL executor) --executor cuda must fail clearly,
     * with no silent CPU fallback and no output. */
    char out[8192], path[256];
    snprintf(path, sizeof path, "%s/cuda.pxi", px__tmpdir());
    int rc = px__sh(out, sizeof out, "bin/pxrun programs/dot_test.pxi --executor cuda -o %s", path);
    if (rc == 0) {
        printf("  (skipped: a working CUDA-GL executor is present)\n");
        return;
    }
    CHECK_EQ(rc, 7);
    CHECK_STR(out, "pxrun: unavailable: ");
    CHECK(!px__exists(path));
#ifdef PXVM_HAVE_CUDA_GL
    /* with no driver at all, that is what it says (the CUDA runtime's own words are "driver
     * version is insufficient", which sends a user looking for a driver upgrade) */
    void *driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (!driver)
        CHECK_STR(out, "no NVIDIA driver: the CUDA driver library (libcuda.so.1) is not installed");
    else
        dlclose(driver);
#endif
}

TEST(cli_failed_run_writes_nothing_and_keeps_old_outputs)
{
    char out[8192], prog[256], png[256], keep[256], cmd_out[256];
    const char *dir = px__tmpdir();
    snprintf(prog, sizeof prog, "%s/trap.pxi", dir);
    snprintf(png, sizeof png, "%s/out.png", dir);
    snprintf(keep, sizeof keep, "%s/keep.png", dir);
    snprintf(cmd_out, sizeof cmd_out, "%s/final.pxi", dir);
    px__write_trap_program(prog);
    CHECK_EQ(px__sh(out, sizeof out, "bin/pxrun %s --out out=%s -o %s", prog, png, cmd_out), 6);
    CHECK_STR(out, "trap: pixel (13,0): instruction 0 (DOT_RGB): sum 1040400 does not fit in 16 bits");
    CHECK(!px__exists(png));
    CHECK(!px__exists(cmd_out));
    /* an existing output file is left exactly as it was */
    FILE *f = fopen(keep, "wb");
    if (f) {
        fputs("old contents", f);
        fclose(f);
    }
    CHECK_EQ(px__sh(out, sizeof out, "bin/pxrun %s --out out=%s", prog, keep), 6);
    char buf[64] = {0};
    f = fopen(keep, "rb");
    if (f) {
        CHECK(fread(buf, 1, sizeof buf - 1, f) == 12);
        fclose(f);
    }
    CHECK(!strcmp(buf, "old contents"));
    /* and no temporary file is left behind */
    CHECK_EQ(px__sh(out, sizeof out, "ls %s | grep -c tmp-", dir), 1);
    /* an unwritable second output also leaves the first unwritten */
    CHECK_EQ(px__sh(out, sizeof out, "bin/pxrun programs/dot_test.pxi -o %s --out prog=/nonexistent/dir/x.png", png), 1);
    CHECK(!px__exists(png));
}

TEST(cli_dot_test_final_program_has_44_1)
{
    char out[8192], path[256];
    snprintf(path, sizeof path, "%s/dot_final.pxi", px__tmpdir());
    CHECK_EQ(px__sh(out, sizeof out, "bin/pxrun programs/dot_test.pxi -o %s --trace", path), 0);
    CHECK_STR(out, "trace: [0] pixel (5,0) DOT_RGB row_a=1 row_b=2 row_out=3");
    CHECK_STR(out, "trace: [1] pixel (6,0) HALT");
    pxvm_limits lim;
    pxvm_limits_default(&lim);
    pxvm_image img;
    pxvm_error err;
    CHECK(pxvm_png_load(path, &lim, &img, &err) == 0);
    if (img.px) {
        CHECK_EQ(px_px(&img, 0, 3), 44u | (1u << 8));
        pxvm_image_free(&img);
    }
}

TEST(cli_foveate273_atlas_and_npy)
{
    char out[8192], png[256], npy[256];
    const char *dir = px__tmpdir();
    snprintf(png, sizeof png, "%s/atlas.png", dir);
    snprintf(npy, sizeof npy, "%s/patches.npy", dir);
    CHECK_EQ(px__sh(out, sizeof out,
                    "bin/pxrun programs/foveate273.pxi --in image=programs/data/chelsea.png --out atlas=%s --npy atlas=%s",
                    png, npy),
             0);
    pxvm_limits lim;
    pxvm_limits_default(&lim);
    pxvm_image atlas;
    pxvm_error err;
    CHECK(pxvm_png_load(png, &lim, &atlas, &err) == 0);
    uint8_t *data = NULL;
    size_t len = 0;
    CHECK(pxvm_read_file(npy, 1 << 24, &data, &len, &err) == 0);
    if (!atlas.px || !data)
        return;
    CHECK(atlas.w == 272 && atlas.h == 272);
    CHECK(!memcmp(data, "\x93NUMPY\x01\x00", 8));
    size_t hlen = (size_t)data[8] | ((size_t)data[9] << 8);
    CHECK((10 + hlen) % 64 == 0);
    CHECK(strstr((const char *)data + 10, "'shape': (273, 16, 16, 4)") != NULL);
    CHECK_EQ(len, 10 + hlen + 273u * 16 * 16 * 4);
    /* patch 18 (tile 1, 1) equals the atlas rectangle at (16, 16) */
    const uint8_t *p18 = data + 10 + hlen + 18u * 16 * 16 * 4;
    for (int y = 0; y < 16; y++)
        CHECK(!memcmp(p18 + y * 64, atlas.px + ((size_t)(16 + y) * 272 + 16) * 4, 64));
    free(data);
    pxvm_image_free(&atlas);
    /* numpy reads it as the shape and type users expect, where Debian's numpy is installed */
    if (px__sh(out, sizeof out, "/usr/bin/python3 -c 'import numpy'") == 0) {
        CHECK_EQ(px__sh(out, sizeof out,
                        "/usr/bin/python3 -c \"import numpy as n; a = n.load('%s'); print(a.shape, a.dtype, int(a[18].sum()))\"",
                        npy),
                 0);
        CHECK_STR(out, "(273, 16, 16, 4) uint8");
    } else {
        printf("  (numpy not installed: the .npy header was checked in C only)\n");
    }
}

TEST(cli_executor_auto_says_which_it_used)
{
    char out[8192], path[256];
    snprintf(path, sizeof path, "%s/auto.pxi", px__tmpdir());
    CHECK_EQ(px__sh(out, sizeof out, "bin/pxrun programs/dot_test.pxi --executor auto -o %s", path), 0);
    CHECK(strstr(out, "pxrun: executor auto: using cuda") || strstr(out, "; using cpu"));
    pxvm_limits lim;
    pxvm_limits_default(&lim);
    pxvm_image img;
    pxvm_error err;
    CHECK(pxvm_png_load(path, &lim, &img, &err) == 0);
    if (img.px) {
        CHECK_EQ(px_px(&img, 0, 3), 44u | (1u << 8));
        pxvm_image_free(&img);
    }
}

/* docs/cli.md, pxrun's outputs: a stream output (standard output, a FIFO, a character device) is written
 * at commit, after every file was written and before any rename, so a stream that fails (here
 * /dev/full: ENOSPC) replaces no file: a new output is not created, an old one keeps its bytes,
 * and no temporary file is left. */
TEST(cli_a_failed_stream_output_renames_no_file)
{
    char out[8192], fresh[256], keep[256];
    const char *dir = px__tmpdir();
    if (!px__exists("/dev/full")) {
        printf("  (skipped: no /dev/full here)\n");
        return;
    }
    snprintf(fresh, sizeof fresh, "%s/stream-new.pxi", dir);
    snprintf(keep, sizeof keep, "%s/stream-keep.png", dir);
    FILE *f = fopen(keep, "wb");
    if (f) {
        fputs("old contents", f);
        fclose(f);
    }
    CHECK_EQ(px__sh(out, sizeof out, "bin/pxrun programs/dot_test.pxi -o %s --out prog=%s --npy prog=/dev/full", fresh, keep), 1);
    CHECK_STR(out, "cannot write '/dev/full': No space left on device");
    CHECK(!px__exists(fresh));
    char buf[64] = {0};
    f = fopen(keep, "rb");
    if (f) {
        CHECK(fread(buf, 1, sizeof buf - 1, f) == 12);
        fclose(f);
    }
    CHECK(!strcmp(buf, "old contents"));
    CHECK_EQ(px__sh(out, sizeof out, "ls %s | grep -c 'stream-.*tmp-'", dir), 1); /* grep -c: 0 lines, exit 1 */
    CHECK_STR(out, "0");
    /* the same outputs with a stream that works: every file is written */
    CHECK_EQ(px__sh(out, sizeof out, "bin/pxrun programs/dot_test.pxi -o %s --out prog=%s --npy prog=/dev/null", fresh, keep), 0);
    CHECK(px__exists(fresh));
    f = fopen(keep, "rb");
    if (f) {
        CHECK(fread(buf, 1, 8, f) == 8 && !memcmp(buf, "\x89PNG", 4));
        fclose(f);
    }
}

/* Assembles a program with one relative SAMPLE (register 0) of a 4x4 atlas token over an input
 * "image" of w x h into dir/rel-WxH.pxi (path out). */
static int px__rel_program(const char *dir, int w, int h, char *pxi, size_t n)
{
    char pxs[256], out[4096];
    snprintf(pxs, sizeof pxs, "%s/rel-%dx%d.pxs", dir, w, h);
    snprintf(pxi, n, "%s/rel-%dx%d.pxi", dir, w, h);
    FILE *f = fopen(pxs, "w");
    if (!f)
        return -1;
    fprintf(f, ".width 16\n.slot image input %dx%d\n.slot atlas output 4x4 patches=4x4x1\nPYRAMID image\n"
               "SAMPLE src=image dst=atlas mode=linear@f0 dst_x=0 dst_y=0 w=4 h=4 cu=0 cv=0 du=1 dv=1 lod=0\nHALT\n",
            w, h);
    fclose(f);
    return px__sh(out, sizeof out, "bin/pxasm %s -o %s", pxs, pxi) == 0 ? 0 : -1;
}

/* The token's centre (the fixation register) after pxrun PROGRAM --fixation ARG; -1 on failure. */
static int px__fixation_register(const char *pxi, const char *image, const char *arg, int32_t g[2])
{
    char out[8192], npy[256];
    snprintf(npy, sizeof npy, "%s/rel-geometry.npy", px__tmpdir());
    int rc = px__sh(out, sizeof out, "bin/pxrun %s --in image=%s --fixation %s --geometry atlas=%s", pxi, image, arg, npy);
    if (rc != 0) {
        px_test_fail(__FILE__, __LINE__, "--fixation %s: exit %d: %s", arg, rc, out);
        return -1;
    }
    uint8_t *data = NULL;
    size_t len = 0;
    pxvm_error err;
    if (pxvm_read_file(npy, 1 << 16, &data, &len, &err) < 0 || len < 10 + 5 * 4) {
        free(data);
        return -1;
    }
    memcpy(g, data + len - 5 * 4, 2 * sizeof(int32_t)); /* (1, 5) little-endian int32 at the end */
    free(data);
    return 0;
}

/* SPEC 6, Fixations from the host: a fixation (x, y) is normalized to the first input (W x H)
 * and becomes Fx = floor(x * W * 2^16 + 0.5), one IEEE double operation at a time; with px after
 * both values it is in texels, floor(X * 2^16 + 0.5). Read back exactly as the token geometry of
 * a relative SAMPLE centred on the fixation. */
TEST(cli_fixation_units_become_q16_as_the_spec_says)
{
    char pxi[256];
    const char *dir = px__tmpdir();
    if (px__rel_program(dir, 451, 300, pxi, sizeof pxi) < 0) {
        px_test_fail(__FILE__, __LINE__, "cannot assemble the relative program");
        return;
    }
    static const struct {
        const char *arg;
        int32_t fx, fy;
    } cases[] = {
        {"0.5,0.5", 14778368, 9830400},    /* 225.5 and 150 texels: exact */
        {"0.1,0.7", 2955674, 13762560},    /* 45.1 texels: 2955673.6 rounds up; 0.7 * 300 is 210.0 in doubles */
        {"0,1", 0, 19660800},              /* the corners: no decimal point needed */
        {"0.0,1.0", 0, 19660800},
        {"100.5px,7px", 6586368, 458752},  /* texels, by the suffix */
        {"451px,0px", 29556736, 0},        /* the image's edges */
        /* ties: x * 451 * 65536 = 1000028.5 and y * 300 * 65536 = 100000.5 in doubles round up */
        {"0.033834199419042754,0.005086288452148437", 1000029, 100001},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        int32_t g[2];
        if (px__fixation_register(pxi, "programs/data/chelsea.png", cases[k].arg, g) < 0)
            continue;
        if (g[0] != cases[k].fx || g[1] != cases[k].fy)
            px_test_fail(__FILE__, __LINE__, "--fixation %s: (%d, %d), not (%d, %d)", cases[k].arg, g[0], g[1], cases[k].fx,
                         cases[k].fy);
    }
    /* a rounding tie: 24689 / 2^26 (exact in decimal) of 512 texels is 12344.5 / 65536 texels,
     * which rounds up to 12345 (half to even would give 12344) */
    char png[256];
    snprintf(png, sizeof png, "%s/grey-512x300.png", dir);
    uint8_t *px = calloc(512 * 300 * 4, 1);
    void *bytes = NULL;
    size_t len = 0;
    CHECK(px && pxvm_image_encode_png(px, 512, 300, &bytes, &len) == 0);
    FILE *f = fopen(png, "wb");
    if (f) {
        fwrite(bytes, 1, len, f);
        fclose(f);
    }
    pxvm_free(bytes);
    free(px);
    int32_t g[2];
    if (px__rel_program(dir, 512, 300, pxi, sizeof pxi) == 0 &&
        px__fixation_register(pxi, png, "0.00036789476871490478515625,0.5", g) == 0) {
        CHECK_EQ(g[0], 12345);
        CHECK_EQ(g[1], 150 * 65536);
    }
}

/* --fixation's errors: a value out of range (normalized or texels) or NaN names the value (exit 2);
 * units mixed in one fixation; a fixation for a program that takes none, or for a register it
 * does not read (exit 2); a relative program run without one (exit 5), checked before it runs. */
TEST(cli_fixation_errors)
{
    char pxi[256], out[8192];
    if (px__rel_program(px__tmpdir(), 451, 300, pxi, sizeof pxi) < 0) {
        px_test_fail(__FILE__, __LINE__, "cannot assemble the relative program");
        return;
    }
    static const struct {
        const char *args;
        int status;
        const char *msg;
    } cases[] = {
        {"--fixation 2000,2000", 2,
         "usage: --fixation '2000,2000': x = 2000 is not in [0, 1] (normalized coordinates of input slot 'image', "
         "451x300); texels are written with px: --fixation 2000px,2000px"},
        {"--fixation 0.5,1.0000001", 2, "y = 1.0000001 is not in [0, 1]"},
        {"--fixation -0.1,0.5", 2, "x = -0.1 is not in [0, 1]"},
        {"--fixation nan,0.5", 2, "x = nan is not in [0, 1]"},
        {"--fixation 452px,3px", 2, "x = 452 texels is not in [0, 451] (input slot 'image', 451x300)"},
        {"--fixation 3px,-1px", 2, "y = -1 texels is not in [0, 300]"},
        {"--fixation 100px,0.5", 2, "--fixation '100px,0.5': give both values normalized (0.5,0.4) or both in texels"},
        {"--fixation 1,2,3", 2, "--fixation '1,2,3': expected X,Y"},
        {"--fixation 0.5,0.5 --fixation 0.5,0.5", 2,
         "takes 1 fixation, one per input register in register order (its input register: 0): this is fixation 2"},
        {"", 5, "unlinkable: pixel ("},
        {"", 5, "samples relative to fixation register 0, which is not set: give a fixation (--fixation X,Y, "
                "normalized to the first input)"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        int rc = px__sh(out, sizeof out, "bin/pxrun %s --in image=programs/data/chelsea.png --npy atlas=/dev/null %s", pxi,
                        cases[k].args);
        if (rc != cases[k].status || !strstr(out, cases[k].msg))
            px_test_fail(__FILE__, __LINE__, "pxrun %s: exit %d (not %d): %s (expected '%s')", cases[k].args, rc,
                         cases[k].status, out, cases[k].msg);
    }
    /* a program without fixation registers, and a scanpath that finds its own */
    CHECK_EQ(px__sh(out, sizeof out, "bin/pxrun programs/foveate273.pxi --in image=programs/data/chelsea.png --fixation "
                                     "0.5,0.4"),
             2);
    CHECK_STR(out, "usage: --fixation '0.5,0.4': program 'programs/foveate273.pxi' takes no fixations: it samples no "
                   "position relative to a fixation register");
    CHECK_EQ(px__sh(out, sizeof out, "bin/pxrun docs/plans/scanpath-logpolar.json --in image=programs/data/chelsea.png "
                                     "--fixation 0.5,0.4"),
             2);
    CHECK_STR(out, "takes no fixations: it finds its own (ARGMAX)");
}

TEST(cli_info_alone_describes_the_program_without_running_it)
{
    /* --info with nothing bound prints the program and says on stderr that it did not run (exit
     * 0); asked for a run's output as well (--hash), a usage error that it needs --in (trial 3) */
    char out[65536];
    int rc = px__sh(out, sizeof out, "bin/pxrun programs/foveate273.pxi --info");
    CHECK_EQ(rc, 0);
    CHECK_STR(out, "slot 1 image    input     451x300");
    CHECK_STR(out, "pxrun: --info: not run (input slot 1 is not bound");
    rc = px__sh(out, sizeof out, "bin/pxrun programs/foveate273.pxi --info --hash");
    CHECK_EQ(rc, 2);
    CHECK_STR(out, "pxrun: usage: --hash needs a run, and input slot 1 is not bound: give --in SLOT=FILE");
}

/* pxasm --resolve: a side that overflows int is refused, not read as another number; a slot
 * given twice is refused, not the last one taken silently (review finding 9). */
TEST(cli_pxasm_a_failed_write_prints_no_summary)
{
    /* the plan's summary says it was compiled and written: not when the write failed */
    char out[8192], ok[256];
    CHECK_EQ(px__sh(out, sizeof out, "bin/pxasm --plan programs/uniform.json -o /nonexistent/dir/p.pxi"), 1);
    CHECK_STR(out, "cannot write '/nonexistent/dir/p.pxi'");
    CHECK(!strstr(out, "scheme uniform"));
    snprintf(ok, sizeof ok, "%s/u.pxi", px__tmpdir());
    CHECK_EQ(px__sh(out, sizeof out, "bin/pxasm --plan programs/uniform.json -o %s", ok), 0);
    CHECK_STR(out, "plan programs/uniform.json: scheme uniform");
    CHECK(px__exists(ok));
}

TEST(cli_pxasm_resolve_refuses_overflow_and_a_slot_twice)
{
    char out[8192], pxi[256];
    snprintf(pxi, sizeof pxi, "%s/resolved.pxi", px__tmpdir());
    CHECK_EQ(px__sh(out, sizeof out, "bin/pxasm programs/foveate273_any.pxi --resolve 99999999999x1 -o %s", pxi), 2);
    CHECK_STR(out, "--resolve '99999999999x1': expected WxH or SLOT=WxH with sides 1..65535");
    CHECK_EQ(px__sh(out, sizeof out, "bin/pxasm programs/foveate273_any.pxi --resolve 65536x300 -o %s", pxi), 2);
    CHECK_EQ(px__sh(out, sizeof out, "bin/pxasm programs/foveate273_any.pxi --resolve -5x300 -o %s", pxi), 2);
    CHECK_EQ(px__sh(out, sizeof out,
                    "bin/pxasm programs/foveate273_any.pxi --resolve 100x200 --resolve image=120x200 -o %s", pxi), 2);
    CHECK_STR(out, "--resolve 'image=120x200': slot 1 was given a size already (100x200): give each slot once");
    CHECK(!px__exists(pxi));
    CHECK_EQ(px__sh(out, sizeof out, "bin/pxasm programs/foveate273_any.pxi --resolve image=100x200 -o %s", pxi), 0);
    CHECK(px__exists(pxi));
}

/* Writes a random w x h PNG (seeded) to path. */
static void px__random_png(const char *path, int w, int h, uint64_t seed)
{
    pxvm_image img = px_random_image(w, h, &seed);
    void *png;
    size_t len;
    CHECK_EQ(pxvm_image_encode_png(img.px, img.w, img.h, &png, &len), 0);
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(png, 1, len, f) == len);
    if (f)
        fclose(f);
    pxvm_free(png);
    pxvm_image_free(&img);
}

/* pxrun --frames into an any-size frame slot resolves the program at the frames' size (once
 * refused: review finding 8, a 91x37 frame failed at the reference size): the bytes of the
 * program resolved by pxasm --resolve; a frame outside the bounds is refused naming the file, its
 * size and the bounds (exit 5, unlinkable, as --in), nothing written. */
TEST(cli_frames_any_size_resolved_at_the_frames_size)
{
    char out[8192], dir[256], frame[300], fixed[300], npy[300], npy_fixed[300];
    snprintf(dir, sizeof dir, "%s/frames_any", px__tmpdir());
    mkdir(dir, 0700);
    snprintf(fixed, sizeof fixed, "%s/fixed_91x37.pxi", px__tmpdir());
    snprintf(npy, sizeof npy, "%s/frames_any.npy", px__tmpdir());
    snprintf(npy_fixed, sizeof npy_fixed, "%s/frames_fixed.npy", px__tmpdir());
    for (int i = 0; i < 2; i++) {
        snprintf(frame, sizeof frame, "%s/f%d.png", dir, i);
        px__random_png(frame, 91, 37, 91u + (uint64_t)i);
    }
    remove(npy);
    CHECK_EQ(px__sh(out, sizeof out, "bin/pxrun programs/foveate273_any.pxi --frames %s --npy atlas=%s", dir, npy), 0);
    CHECK_EQ(px__sh(out, sizeof out, "bin/pxasm programs/foveate273_any.pxi --resolve 91x37 -o %s", fixed), 0);
    CHECK_EQ(px__sh(out, sizeof out, "bin/pxrun %s --frames %s --npy atlas=%s", fixed, dir, npy_fixed), 0);
    CHECK_EQ(px__sh(out, sizeof out, "cmp %s %s", npy, npy_fixed), 0);
    /* out of bounds (16x16 .. 16384x16384): a 91x15 frame after the good ones */
    snprintf(frame, sizeof frame, "%s/f2.png", dir);
    px__random_png(frame, 91, 15, 7);
    remove(npy);
    CHECK_EQ(px__sh(out, sizeof out, "bin/pxrun programs/foveate273_any.pxi --frames %s --npy atlas=%s", dir, npy), 5);
    CHECK_STR(out, "unlinkable: a 91x15 image cannot be bound to slot 1 ('image'): it takes 16x16 .. 16384x16384 "
                   "(file '");
    CHECK_STR(out, "frames_any/f2.png')");
    CHECK(!px__exists(npy));
    /* ... and as the first frame, where it would size the program */
    snprintf(frame, sizeof frame, "%s/a.png", dir);
    px__random_png(frame, 15, 37, 8);
    CHECK_EQ(px__sh(out, sizeof out, "bin/pxrun programs/foveate273_any.pxi --frames %s --npy atlas=%s", dir, npy), 5);
    CHECK_STR(out, "a 15x37 image cannot be bound to slot 1 ('image')");
    CHECK_STR(out, "frames_any/a.png')");
    CHECK(!px__exists(npy));
}
