/* test_asm.c - pxasm: assembly, byte-identical disassembly round trips, every error class with
 * its file:line:column, allocation plans and their errors, random plans, deterministic math. */
#define _GNU_SOURCE
#include <math.h>
#include <stdlib.h>
#include <signal.h>
#include <turbojpeg.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../assembler/dmath.h"
#include "../../assembler/plan.h"
#include "../../assembler/pxasm.h"
#include "../conformance/cases.h"
#include "test.h"

static pxvm_limits px__lim(void)
{
    pxvm_limits l;
    pxvm_limits_default(&l);
    return l;
}

static int px__asm(const char *src, pxvm_image *out, pxvm_error *err)
{
    pxvm_limits lim = px__lim();
    memset(err, 0, sizeof *err);
    return pxasm_assemble(src, strlen(src), "t.pxs", &lim, out, err);
}

/* Disassembles prog and reassembles the text: the pixels must be the same. */
static void px__roundtrip(const pxvm_image *img, const char *what)
{
    pxvm_limits lim = px__lim();
    pxvm_image again;
    pxvm_program prog;
    pxvm_error err;
    if (pxvm_program_from_copy(img, &lim, &prog, &err) < 0) {
        px_test_fail(__FILE__, __LINE__, "%s: %s", what, err.msg);
        return;
    }
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    pxasm_disassemble(&prog, what, mem);
    fclose(mem);
    if (pxasm_assemble(text, len, what, &lim, &again, &err) < 0) {
        px_test_fail(__FILE__, __LINE__, "%s: reassembly failed: %s", what, err.msg);
    } else {
        if (again.w != img->w || again.h != img->h ||
            memcmp(again.px, img->px, (size_t)img->w * (size_t)img->h * 4u))
            px_test_fail(__FILE__, __LINE__, "%s: the round trip changed the pixels", what);
        pxvm_image_free(&again);
    }
    free(text);
    pxvm_program_free(&prog);
}

TEST(asm_programs_roundtrip_byte_identical)
{
    const char *names[] = {"dot_test", "pyramid", "foveate273", "grid", "logpolar", "v1", "aniso", "uniform"};
    pxvm_limits lim = px__lim();
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char path[256];
        snprintf(path, sizeof path, "programs/%s.pxi", names[i]);
        uint8_t *file;
        size_t flen;
        pxvm_image img;
        pxvm_error err;
        if (pxvm_read_file(path, 1 << 24, &file, &flen, &err) < 0 || pxvm_png_decode(file, flen, path, &lim, &img, &err) < 0) {
            px_test_fail(__FILE__, __LINE__, "%s", err.msg);
            continue;
        }
        px__roundtrip(&img, path);
        /* and the file itself: the reassembled image encodes to the same bytes */
        pxvm_program prog;
        CHECK(pxvm_program_from_copy(&img, &lim, &prog, &err) == 0);
        char *text = NULL;
        size_t len = 0;
        FILE *mem = open_memstream(&text, &len);
        pxasm_disassemble(&prog, path, mem);
        fclose(mem);
        pxvm_image again;
        uint8_t *png;
        size_t plen;
        if (pxasm_assemble(text, len, path, &lim, &again, &err) == 0 && pxvm_png_encode(&again, &png, &plen, &err) == 0) {
            CHECK(plen == flen && !memcmp(png, file, flen));
            free(png);
            pxvm_image_free(&again);
        }
        free(text);
        pxvm_program_free(&prog);
        pxvm_image_free(&img);
        free(file);
    }
}

TEST(asm_random_programs_roundtrip)
{
    for (uint64_t seed = 1; seed <= 300; seed++) {
        px_case c;
        if (px_case_random(seed, &c) > 0) {
            char what[64];
            snprintf(what, sizeof what, "random program %llu", (unsigned long long)seed);
            px__roundtrip(&c.program, what);
        }
        px_case_free(&c);
    }
    px_case c;
    for (int i = 0; px_case_edge(i, &c) > 0; i++) { /* edge cases too: tables in rows, extremes */
        if (c.program.w * c.program.h < 200000)
            px__roundtrip(&c.program, c.name);
        px_case_free(&c);
    }
}

TEST(asm_literals_and_operand_forms)
{
    pxvm_image img;
    pxvm_error err;
    const char *src = ".slot image input 100x80\n"
                      ".slot out output 32x16\n"
                      "PYRAMID image\n"
                      "SAMPLE src=image dst=out mode=nearest at=(16, 0) size=(8, 8) center=(512.5, 300.25) step=2 lod=2.25\n"
                      "SAMPLE image out linear 0 0 8 8 -1.5 0.0000152587890625 1 -0.5 0.5   ; positional, table order\n"
                      "ANISO src=#1 dst=2 size=(4,4) center=(10,10) step=(1,1) taps=16 tdu=0.25 tdv=-0.25\n"
                      "HALT\n";
    CHECK(px__asm(src, &img, &err) == 0);
    if (!img.px) {
        px_test_fail(__FILE__, __LINE__, "%s", err.msg);
        return;
    }
    pxvm_limits lim = px__lim();
    pxvm_program prog;
    CHECK(pxvm_program_from_image(&img, &lim, &prog, &err) == 0);
    const pxi_insn *a = &prog.insns[1], *b = &prog.insns[2], *c = &prog.insns[3];
    CHECK_EQ(PX_ARG(a, SAMPLE, mode), PX_MODE_NEAREST);
    CHECK(PX_ARG(a, SAMPLE, dst_x) == 16 && PX_ARG(a, SAMPLE, w) == 8 && PX_ARG(a, SAMPLE, h) == 8);
    CHECK_EQ(PX_ARG(a, SAMPLE, cu), 512 * 65536 + 32768);
    CHECK_EQ(PX_ARG(a, SAMPLE, cv), 300 * 65536 + 16384);
    CHECK(PX_ARG(a, SAMPLE, du) == 2 * 65536 && PX_ARG(a, SAMPLE, dv) == 2 * 65536);
    CHECK_EQ(PX_ARG(a, SAMPLE, lod), 576);
    CHECK_EQ(PX_ARG(b, SAMPLE, cu), -98304);
    CHECK_EQ(PX_ARG(b, SAMPLE, cv), 1);
    CHECK_EQ(PX_ARG(b, SAMPLE, dv), -32768);
    CHECK_EQ(PX_ARG(b, SAMPLE, lod), 128);
    CHECK(c->op == PX_OP_ANISO && PX_ARG(c, ANISO, taps) == 16 && PX_ARG(c, ANISO, tdv) == -16384);
    pxvm_program_free(&prog);
}

static void px__asm_error(const char *src, const char *where, const char *msg)
{
    pxvm_image img;
    pxvm_error err;
    if (px__asm(src, &img, &err) == 0) {
        px_test_fail(__FILE__, __LINE__, "assembled, expected '%s'", msg);
        pxvm_image_free(&img);
        return;
    }
    CHECK_EQ(err.cls, PXVM_ASSEMBLY);
    CHECK_STR(err.msg, where);
    CHECK_STR(err.msg, msg);
    CHECK(img.px == NULL); /* never a partial output */
}

TEST(asm_errors_name_file_line_column)
{
    px__asm_error("HALT\nSAMPEL src=a\n", "t.pxs:2:1:", "unknown mnemonic 'SAMPEL' (expected a directive or one of HALT");
    px__asm_error(".slot a input 8x8\n.slot b output 8x8\nSAMPLE src=a dst=b w=70000 h=1 cu=0 cv=0 du=1 dv=1\nHALT\n",
                  "t.pxs:3:22:", "operand w: '70000' is out of range (expected an integer in 1..65535)");
    px__asm_error(".slot a input 8x8\nSAMPLE src=a dst=b w=1 h=1 cu=0 cv=0 du=1 dv=1\nHALT\n", "t.pxs:2:18:",
                  "undefined slot 'b' (declare it with .slot, .data or .table)");
    px__asm_error("DOT_RGB row_a=vec row_b=1 row_out=2\nHALT\n", "t.pxs:1:15:", "undefined row name 'vec'");
    px__asm_error(".slot a input 8x8\n.slot b output 8x8\nSAMPLE src=a dst=b w=1 h=1 cu=0 cv=0 du=1\nHALT\n", "t.pxs:3:1:",
                  "SAMPLE needs operand dv");
    px__asm_error(".slot a input 8x8\n.slot b output 8x8\nSAMPLE src=a dst=b w=1 h=1 cu=40000 cv=0 du=1 dv=1\nHALT\n",
                  "t.pxs:3:31:", "operand cu: '40000' is out of range");
    px__asm_error(".slot a input 8x8\n.slot b output 8x8\nSAMPLE src=a dst=b w=1 h=1 cu=0 cv=0 du=1 dv=1 lod=-1\nHALT\n",
                  "t.pxs:3:52:", "operand lod: '-1' is out of range");
    px__asm_error(".slot a input 8x8\n.slot b output 8x8\nANISO src=a dst=b w=1 h=1 cu=0 cv=0 du=1 dv=1 taps=17\nHALT\n",
                  "t.pxs:3:52:", "operand taps: '17' is out of range (expected 1..16 taps)");
    px__asm_error(".slot a input 8x8\nPYRAMID slot=a bogus=1\nHALT\n", "t.pxs:2:16:", "PYRAMID has no operand 'bogus'");
    px__asm_error(".frobnicate 3\nHALT\n", "t.pxs:1:1:", "unknown directive '.frobnicate'");
    px__asm_error(".slot a input 8y8\nHALT\n", "t.pxs:1:15:", "'8y8' is not a size (expected WxH");
    px__asm_error(".slot a input 8x8\n.slot a output 8x8\nHALT\n", "t.pxs:2:7:", "slot 'a' is already declared");
    px__asm_error(".slot a bogus 8x8\nHALT\n", "t.pxs:1:9:", "unknown role 'bogus'");
    px__asm_error(".rows v\n01020304\nHALT\n", "t.pxs:3:1:", "'HALT' is not a pixel");
    px__asm_error(".rows v\n01020304\n", "t.pxs:3:1:", "missing .end");
    px__asm_error(".slot a input 8x8\n", "t.pxs:2:1:", "no instructions");
    px__asm_error("PYRAMID slot=0 (\nHALT\n", "t.pxs:1:16:", "unexpected '('");
    /* a region the validator rejects: the message names the source line of the instruction */
    px__asm_error(".slot a input 8x8\n.slot b output 4x4\nPYRAMID a\nSAMPLE src=a dst=b at=(2,0) size=(4,4) center=(4,4) step=1\nHALT\n",
                  "t.pxs:4:1:", "invalid: pixel (");
    px__asm_error(".slot a input 8x8\nHALT\n.pixels 0 0\n00000001\n.end\n", "t.pxs:3:1:", "overlaps the header and code");
    px__asm_error(".table t 2x1\n1 2 3\n.end\nHALT\n", "t.pxs:3:1:", "the table has 1 entries, 2x1 needs 2");
    px__asm_error(".data d \"nonexistent.png\"\nHALT\n", "t.pxs:1:9:", "cannot read 'nonexistent.png'");
}

/* ---- .data: regular files in the source's folder or below it ---------------------------------- */

static int px__write_file(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    int rc = fwrite(data, 1, len, f) == len ? 0 : -1;
    return fclose(f) == 0 ? rc : -1;
}

/* Assembles dir/s.pxs (holding `src`) in a child that an alarm kills after 5 s, so a read that
 * blocks (a FIFO) fails the test instead of hanging it. msg NULL: it must assemble; else it must
 * be refused at s.pxs:1:9 with msg. */
static void px__data_case(const char *dir, const char *src, const char *msg, int line)
{
    char path[256];
    snprintf(path, sizeof path, "%s/s.pxs", dir);
    if (px__write_file(path, src, strlen(src)) < 0) {
        px_test_fail(__FILE__, line, "cannot write %s", path);
        return;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        alarm(5);
        pxvm_limits lim = px__lim();
        pxvm_image img = {0, 0, NULL};
        pxvm_error err;
        memset(&err, 0, sizeof err);
        int rc = pxasm_assemble_file(path, &lim, &img, &err);
        int ok = msg ? rc < 0 && err.cls == PXVM_ASSEMBLY && strstr(err.msg, "s.pxs:1:9:") && strstr(err.msg, msg) : rc == 0;
        if (!ok)
            fprintf(stderr, "  %s-> %s\n", src, rc < 0 ? err.msg : "assembled");
        pxvm_image_free(&img);
        _exit(ok ? 0 : 1);
    }
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) != pid)
        px_test_fail(__FILE__, line, "fork/wait failed");
    else if (WIFSIGNALED(st))
        px_test_fail(__FILE__, line, "%s: killed by signal %d (%s)", src, WTERMSIG(st), WTERMSIG(st) == SIGALRM ? "it hung" : "crashed");
    else if (WEXITSTATUS(st) != 0)
        px_test_fail(__FILE__, line, "%s: expected %s%s", src, msg ? "the error " : "it to assemble", msg ? msg : "");
}

TEST(asm_data_reads_only_regular_files_below_the_source)
{
    char dir[] = "/tmp/pxasm-data-XXXXXX", path[256], cmd[300];
    if (!mkdtemp(dir)) {
        px_test_fail(__FILE__, __LINE__, "mkdtemp failed");
        return;
    }
    pxvm_image d;
    uint8_t *png = NULL;
    size_t len = 0;
    pxvm_error err;
    CHECK(pxvm_image_alloc(&d, 4, 2, &err) == 0 && pxvm_png_encode(&d, &png, &len, &err) == 0);
    pxvm_image_free(&d);
    snprintf(path, sizeof path, "%s/sub", dir);
    CHECK(mkdir(path, 0755) == 0);
    snprintf(path, sizeof path, "%s/d.png", dir);
    CHECK(png && px__write_file(path, png, len) == 0);
    snprintf(path, sizeof path, "%s/sub/d.png", dir);
    CHECK(png && px__write_file(path, png, len) == 0);
    free(png);
    snprintf(path, sizeof path, "%s/fifo", dir);
    CHECK(mkfifo(path, 0600) == 0);
    snprintf(path, sizeof path, "%s/zero", dir);
    CHECK(symlink("/dev/zero", path) == 0);
    snprintf(path, sizeof path, "%s/huge.png", dir); /* 2 GiB, sparse: refused from its size, never read */
    FILE *f = fopen(path, "wb");
    CHECK(f && ftruncate(fileno(f), 1ll << 31) == 0);
    if (f)
        fclose(f);

    px__data_case(dir, ".data d \"d.png\"\nHALT\n", NULL, __LINE__);
    px__data_case(dir, ".data d \"./sub/d.png\"\nHALT\n", NULL, __LINE__);
    px__data_case(dir, ".data d \"fifo\"\nHALT\n", "is not a regular file", __LINE__);
    px__data_case(dir, ".data d \"zero\"\nHALT\n", "is not a regular file", __LINE__);
    px__data_case(dir, ".data d \"sub\"\nHALT\n", "is not a regular file", __LINE__);
    px__data_case(dir, ".data d \"/dev/zero\"\nHALT\n", "'/dev/zero': an absolute path is refused", __LINE__);
    char src[400];
    snprintf(src, sizeof src, ".data d \"%s/d.png\"\nHALT\n", dir); /* absolute, even to a good file */
    px__data_case(dir, src, "an absolute path is refused", __LINE__);
    px__data_case(dir, ".data d \"../x.png\"\nHALT\n", "'../x.png': a '..' component is refused", __LINE__);
    px__data_case(dir, ".data d \"sub/../d.png\"\nHALT\n", "a '..' component is refused", __LINE__);
    px__data_case(dir, ".data d \"sub/..\"\nHALT\n", "a '..' component is refused", __LINE__);
    px__data_case(dir, ".data d \"huge.png\"\nHALT\n", "is 2147483648 bytes; the limit is 1073741824", __LINE__);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
}

TEST(asm_cli_writes_nothing_on_error)
{
    char dir[] = "/tmp/pxasm-test-XXXXXX";
    if (!mkdtemp(dir))
        return;
    char src[128], out[128], cmd[512];
    snprintf(src, sizeof src, "%s/bad.pxs", dir);
    snprintf(out, sizeof out, "%s/bad.pxi", dir);
    FILE *f = fopen(src, "w");
    if (!f)
        return;
    fputs("HALT\nNOPE\n", f);
    fclose(f);
    const char *bin = getenv("PXVM_BIN");
    snprintf(cmd, sizeof cmd, "%s/pxasm %s -o %s 2>/dev/null", bin && *bin ? bin : "bin", src, out);
    int st = system(cmd);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 8);
    struct stat sb;
    CHECK(stat(out, &sb) != 0);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
}

/* pxasm's exit status for `args` (run in dir, stderr to dir/err), or -1. */
static int px__pxasm(const char *dir, const char *args)
{
    const char *bin = getenv("PXVM_BIN");
    char cmd[1024], binpath[512];
    if (!realpath(bin && *bin ? bin : "bin", binpath))
        return -1;
    snprintf(cmd, sizeof cmd, "cd %s && %s/pxasm %s >/dev/null 2>err", dir, binpath, args);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* What pxasm printed on standard error last (px__pxasm). */
static void px__said_at(const char *dir, const char *what, int line)
{
    char path[256], buf[2048] = "";
    snprintf(path, sizeof path, "%s/err", dir);
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    buf[n] = 0;
    if (f)
        fclose(f);
    if (!strstr(buf, what))
        px_test_fail(__FILE__, line, "pxasm said '%s', not '%s'", buf, what);
}
#define px__pxasm_said(dir, what) px__said_at(dir, what, __LINE__)

TEST(asm_cli_exit_statuses_and_limits)
{
    char dir[] = "/tmp/pxasm-exit-XXXXXX", path[256], cmd[300];
    if (!mkdtemp(dir)) {
        px_test_fail(__FILE__, __LINE__, "mkdtemp failed");
        return;
    }
    static const char big[] = "{\"image\": [16384, 16384], \"budget\": 10, \"scheme\": \"grid\"}";
    static const char bad[] = "{\"image\": [100, 100], \"budget\": 0, \"scheme\": \"grid\"}";
    snprintf(path, sizeof path, "%s/big.json", dir);
    CHECK(px__write_file(path, big, strlen(big)) == 0);
    snprintf(path, sizeof path, "%s/bad.json", dir);
    CHECK(px__write_file(path, bad, strlen(bad)) == 0);
    snprintf(path, sizeof path, "%s/bad.pxs", dir);
    CHECK(px__write_file(path, "HALT\nNOPE\n", 10) == 0);
    struct stat sb;
    /* a plan whose program needs more than the memory limit: a plan error (it was "invalid",
     * exit 1, and leaked the plan), nothing written; with the limit raised it compiles */
    CHECK_EQ(px__pxasm(dir, "--plan big.json -o big.pxi"), 8);
    px__pxasm_said(dir, "plan error: big.json: its program breaks a limit or a rule: invalid: the slots need");
    px__pxasm_said(dir, "(see --max-memory)");
    snprintf(path, sizeof path, "%s/big.pxi", dir);
    CHECK(stat(path, &sb) != 0);
    CHECK_EQ(px__pxasm(dir, "--plan big.json -o big.pxi --max-memory 2000000000"), 0);
    CHECK(stat(path, &sb) == 0);
    CHECK_EQ(px__pxasm(dir, "--plan big.json -o side.pxi --max-side 100 --max-memory 2000000000"), 8);
    px__pxasm_said(dir, "sides must be 1..100 (see --max-side)");
    CHECK_EQ(px__pxasm(dir, "-d big.pxi --max-memory 2000000000 --max-insns 5"), 4);
    px__pxasm_said(dir, "(see --max-insns)");
    CHECK_EQ(px__pxasm(dir, "-d big.json"), 3);
    px__pxasm_said(dir, "malformed: 'big.json' is not a PNG file");
    CHECK_EQ(px__pxasm(dir, "--plan bad.json -o bad.pxi"), 8);
    px__pxasm_said(dir, "plan error: bad.json: 'budget' = 0");
    CHECK_EQ(px__pxasm(dir, "bad.pxs -o bad.pxi"), 8);
    px__pxasm_said(dir, "assembly error: bad.pxs:2:1:");
    CHECK_EQ(px__pxasm(dir, "--plan big.json -o big.pxi --max-memory 1G"), 2);
    px__pxasm_said(dir, "bad option or value: --max-memory 1G");
    CHECK_EQ(px__pxasm(dir, "--plan big.json -o /nonexistent/big.pxi --max-memory 2000000000"), 1);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
}

TEST(asm_cli_overlay_takes_a_jpeg_photo)
{
    /* any image pxrun reads: the overlay drawn on a JPEG is the one drawn on its decoded pixels */
    char dir[] = "/tmp/pxasm-jpeg-XXXXXX", plan[512], args[1200], cmd[300];
    if (!mkdtemp(dir) || !realpath("programs/grid.json", plan)) {
        px_test_fail(__FILE__, __LINE__, "mkdtemp or programs/grid.json failed");
        return;
    }
    uint64_t st = 7;
    pxvm_image photo = px_random_image(120, 80, &st), decoded = {0, 0, NULL}, a = {0, 0, NULL}, b = {0, 0, NULL};
    tjhandle tj = tjInitCompress();
    unsigned char *jpg = NULL;
    unsigned long jlen = 0;
    CHECK(tj && tjCompress2(tj, photo.px, 120, 0, 80, TJPF_RGBA, &jpg, &jlen, TJSAMP_420, 90, 0) == 0);
    char path[256];
    snprintf(path, sizeof path, "%s/photo.jpg", dir);
    CHECK(jpg && px__write_file(path, jpg, jlen) == 0);
    tjFree(jpg);
    if (tj)
        tjDestroy(tj);
    pxvm_limits lim = px__lim();
    pxvm_error err;
    uint8_t *png = NULL;
    size_t plen = 0;
    CHECK(pxvm_image_load_any(path, &lim, &decoded, &err) == 0 && pxvm_png_encode(&decoded, &png, &plen, &err) == 0);
    snprintf(path, sizeof path, "%s/photo.png", dir);
    CHECK(png && px__write_file(path, png, plen) == 0);
    free(png);
    snprintf(args, sizeof args, "--plan %s --overlay photo.jpg a.png -o grid.pxi", plan);
    CHECK_EQ(px__pxasm(dir, args), 0);
    snprintf(args, sizeof args, "--plan %s --overlay photo.png -o b.png", plan);
    CHECK_EQ(px__pxasm(dir, args), 0);
    snprintf(path, sizeof path, "%s/a.png", dir);
    CHECK(pxvm_png_load(path, &lim, &a, &err) == 0);
    snprintf(path, sizeof path, "%s/b.png", dir);
    CHECK(pxvm_png_load(path, &lim, &b, &err) == 0);
    CHECK(a.px && b.px && a.w == 120 && a.h == 80 && b.w == 120 && b.h == 80 && !memcmp(a.px, b.px, 120 * 80 * 4));
    snprintf(args, sizeof args, "--plan %s --overlay %s -o c.png", plan, plan); /* neither PNG nor JPEG */
    CHECK_EQ(px__pxasm(dir, args), 3);
    px__pxasm_said(dir, "is neither a PNG nor a JPEG file");
    pxvm_image_free(&photo);
    pxvm_image_free(&decoded);
    pxvm_image_free(&a);
    pxvm_image_free(&b);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
}

/* ---- plans ---------------------------------------------------------------------------------- */

static void px__plan_error(const char *json, const char *msg)
{
    pxvm_plan p;
    pxvm_error err;
    memset(&err, 0, sizeof err);
    if (pxvm_plan_parse(json, strlen(json), "p.json", &p, &err) == 0) {
        px_test_fail(__FILE__, __LINE__, "parsed, expected '%s'", msg);
        pxvm_plan_free(&p);
        return;
    }
    CHECK_EQ(err.cls, PXVM_PLAN);
    CHECK_STR(err.msg, "p.json: ");
    CHECK_STR(err.msg, msg);
}

TEST(plan_errors)
{
    px__plan_error("{\"image\": [100, 100], \"budget\": 10, \"scheme\": \"grid\"", "malformed JSON at line 1");
    px__plan_error("[1, 2]", "a plan is a JSON object");
    px__plan_error("{\"image\": [100, 100], \"budget\": 0, \"scheme\": \"grid\"}", "'budget' = 0: a plan needs at least one token");
    px__plan_error("{\"image\": [100, 100], \"budget\": 50, \"scheme\": \"grid\"}",
                   "budget 50 is larger than the image allows: 100x100 in 16x16 patches is 49 tokens at full resolution");
    px__plan_error("{\"image\": [100, 100], \"budget\": 5, \"scheme\": \"grid\", \"fixation\": [1.5, 0.5]}",
                   "'fixation[0]' = 1.5 is outside 0..1");
    px__plan_error("{\"image\": [100, 100], \"budget\": 5, \"scheme\": \"spiral\"}",
                   "unknown scheme 'spiral' (expected grid, logpolar, v1, aniso or uniform)");
    px__plan_error("{\"image\": [100, 100], \"budget\": 5, \"scheme\": \"grid\", \"fixaton\": [0.5, 0.5]}",
                   "unknown field 'fixaton'");
    px__plan_error("{\"image\": [100, 0], \"budget\": 5, \"scheme\": \"grid\"}", "'image[1]' = 0: must be an integer in 1..16384");
    px__plan_error("{\"image\": [100, 100], \"budget\": 5, \"scheme\": \"uniform\"}", "the uniform scheme needs 49 tokens");
    px__plan_error("{\"image\": [100, 100], \"budget\": 5, \"scheme\": \"aniso\", \"taps\": 40}", "'taps' = 40: must be an integer in 1..16");
    px__plan_error("{\"image\": [100, 100], \"scheme\": \"grid\"}", "'budget' (the number of tokens) is missing");
    px__plan_error("{\"image\": [16384, 16384], \"patch\": 1, \"budget\": 100000, \"scheme\": \"grid\"}",
                   "'budget' = 100000: a plan has at most 65536 tokens");
    px__plan_error("{\"image\": [4096, 4096], \"patch\": 8, \"scheme\": \"uniform\"}", "262144 tokens: a plan has at most 65536");
    px__plan_error("{\"image\": [16384, 16384], \"patch\": 200, \"budget\": 6724, \"scheme\": \"grid\"}",
                   "would be 16400 pixels wide; the limit is 16384");
}

TEST(plan_foveate273_is_the_compatibility_grid)
{
    /* the plan file and the library's foveate273 give the same program, with LODs below 0.27 */
    pxvm_plan p;
    pxvm_error err;
    CHECK(pxvm_plan_load("programs/foveate273.json", &p, &err) == 0);
    if (!p.tokens)
        return;
    uint32_t top = 0;
    for (int i = 0; i < p.ntokens; i++)
        top = p.tokens[i].lod_q8 > top ? p.tokens[i].lod_q8 : top;
    CHECK(p.ntokens == 273 && top < 70); /* 0.27 * 256 */
    pxvm_image a, b;
    CHECK(pxvm_plan_compile(&p, &a, &err) == 0);
    pxvm_builder bl;
    pxvm_build_init(&bl, 64);
    pxvm_plan_foveate273(&bl, 451, 300);
    CHECK(pxvm_build_finish(&bl, &b, &err) == 0);
    pxvm_build_free(&bl);
    CHECK(a.w == b.w && a.h == b.h && !memcmp(a.px, b.px, (size_t)a.w * (size_t)a.h * 4u));
    pxvm_image_free(&a);
    pxvm_image_free(&b);
    pxvm_plan_free(&p);
}

TEST(plan_random_plans_compile_validate_and_run)
{
    static const char *const schemes[] = {"grid", "logpolar", "v1", "aniso", "uniform"};
    uint64_t st = 2027;
    for (int i = 0; i < 100; i++) {
        int w = 1 + (int)(px_rand(&st) % 700), h = 1 + (int)(px_rand(&st) % 500), patch = 1 + (int)(px_rand(&st) % 24);
        int full = ((w + patch - 1) / patch) * ((h + patch - 1) / patch);
        int budget = 1 + (int)(px_rand(&st) % (uint64_t)(full < 400 ? full : 400));
        const char *scheme = schemes[i % 5];
        char json[512];
        snprintf(json, sizeof json,
                 "{\"image\": [%d, %d], \"patch\": %d, \"budget\": %d, \"scheme\": \"%s\", \"fixation\": [%.3f, %.3f],"
                 " \"taps\": %d, \"elongation\": %.2f, \"angle\": %d, \"fovea_share\": %.2f}",
                 w, h, patch, strcmp(scheme, "uniform") ? budget : full, scheme, (double)(px_rand(&st) % 1001) / 1000.0,
                 (double)(px_rand(&st) % 1001) / 1000.0, 1 + (int)(px_rand(&st) % 16), 1.0 + (double)(px_rand(&st) % 700) / 100.0,
                 (int)(px_rand(&st) % 360) - 180, (double)(px_rand(&st) % 101) / 100.0);
        pxvm_plan p;
        pxvm_error err;
        pxvm_image prog_img;
        if (pxvm_plan_parse(json, strlen(json), "random", &p, &err) < 0 || pxvm_plan_compile(&p, &prog_img, &err) < 0) {
            px_test_fail(__FILE__, __LINE__, "%s: %s", json, err.msg);
            continue;
        }
        CHECK(p.ntokens >= 1 && p.ntokens <= p.budget);
        pxvm_image in = px_random_image(w, h, &st);
        const pxvm_image *ins[] = {&in};
        pxvm_program prog;
        pxvm_executor *ex;
        if (px_run_image(&prog_img, ins, 1, &prog, &ex, &err) < 0)
            px_test_fail(__FILE__, __LINE__, "%s: %s", json, err.msg);
        else
            px_close(&prog, ex);
        px__roundtrip(&prog_img, "random plan");
        /* compiling again gives the same bytes */
        pxvm_image again;
        CHECK(pxvm_plan_compile(&p, &again, &err) == 0 && !memcmp(again.px, prog_img.px, (size_t)again.w * (size_t)again.h * 4u));
        pxvm_image_free(&again);
        pxvm_image_free(&in);
        pxvm_image_free(&prog_img);
        pxvm_plan_free(&p);
    }
}

TEST(dmath_is_accurate)
{
    double worst = 0;
    for (int i = -2000; i <= 2000; i++) {
        double x = i / 97.0;
        worst = fmax(worst, fabs(dm_exp2(x) - exp2(x)) / exp2(x));
        worst = fmax(worst, fabs(dm_sin(x) - sin(x)));
        worst = fmax(worst, fabs(dm_cos(x) - cos(x)));
        double y = exp2(x);
        worst = fmax(worst, fabs(dm_log2(y) - log2(y)));
    }
    CHECK(worst < 1e-12);
    CHECK_EQ(dm_log2(1024.0), 10.0);
    CHECK_EQ(dm_exp2(3.0), 8.0);
}
