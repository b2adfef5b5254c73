/* pxasm - assemble, disassemble, and compile allocation plans into pixel programs. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../assembler/plan.h"
#include "../assembler/pxasm.h"
#include "args.h"
#include "outputs.h"

static const char px__usage[] =
    "usage: pxasm SOURCE.pxs -o PROGRAM.pxi              assemble\n"
    "       pxasm -d PROGRAM.pxi [-o SOURCE.pxs]         disassemble (to stdout without -o)\n"
    "       pxasm --plan PLAN.json -o PROGRAM.pxi [--overlay PHOTO OVERLAY.png]\n"
    "                                                    compile an allocation plan, print its summary\n"
    "       pxasm --resolve WxH PROGRAM.pxi -o FIXED.pxi   resolve an any-size program at WxH: the\n"
    "                                                    program for exactly that input size\n"
    "                                                    (--resolve SLOT=WxH for one of several)\n"
    "       pxasm --plan PLAN.json --overlay PHOTO -o OVERLAY.png\n"
    "                                                    only draw the plan's footprints over a photo\n"
    "       pxasm --version                              the version and the executors built in\n"
    "options: --max-side N --max-memory BYTES --max-insns N   the limits a program (and a .data\n"
    "         file, a photo) is checked against, as pxrun's (default 16384, 1 GiB, 1048576)\n"
    "PHOTO is any image pxrun --in reads (PNG, JPEG). '-' is standard input (the source, the plan\n"
    "or the photo: one of them) or standard output.\n"
    "Nothing is written when there is an error. Exit status: 0 ok, 1 i/o, 2 usage, 3 malformed and\n"
    "4 invalid (a program given to -d, a photo), 5 unlinkable (a size --resolve refuses), 8 assembly or\n"
    "plan error.\n";

/* Every assembly error and every plan error (a plan whose program the validator refuses
 * included) exits 8; the other classes as pxrun's. */
static int px__die(const pxvm_error *err)
{
    char buf[1200];
    pxvm_error_format(err, buf, sizeof buf);
    fprintf(stderr, "pxasm: %s\n", buf);
    return err->cls == PXVM_ASSEMBLY || err->cls == PXVM_PLAN ? 8 : pxvm_exit_status(err->cls);
}

/* One output, all or nothing (a failed add is aborted: it frees what it holds). */
static int px__write(const char *path, const void *data, size_t len, pxvm_error *err)
{
    pxvm_outputs o = {0};
    if (pxvm_outputs_add(&o, path, data, len, err) < 0) {
        pxvm_outputs_abort(&o);
        return -1;
    }
    return pxvm_outputs_commit(&o, err);
}

static int px__write_png(const char *path, const pxvm_image *img, pxvm_error *err)
{
    uint8_t *png;
    size_t len;
    if (pxvm_png_encode(img, &png, &len, err) < 0)
        return -1;
    int rc = px__write(path, png, len, err);
    free(png);
    return rc;
}

/* A plan: compiled, written to out (unless overlay_only: the overlay alone), its overlay drawn,
 * and summarized once every file is written (a failed write prints no summary of a success). */
static int px__plan(const char *path, const pxvm_limits *lim, const char *overlay_in, const char *overlay_out,
                    int overlay_only, const char *out, pxvm_image *img, pxvm_error *err)
{
    pxvm_plan p;
    if (pxvm_plan_load(path, &p, err) < 0)
        return -1;
    int rc = pxvm_plan_compile_limits(&p, lim, img, err);
    if (rc == 0 && !overlay_only)
        rc = px__write_png(out, img, err);
    if (rc == 0 && overlay_in) {
        pxvm_image photo = {0, 0, NULL}, ov = {0, 0, NULL};
        rc = pxvm_image_load_any(overlay_in, lim, &photo, err);
        if (rc == 0)
            rc = pxvm_plan_overlay(&p, &photo, &ov, err);
        if (rc == 0)
            rc = px__write_png(overlay_out, &ov, err);
        pxvm_image_free(&photo);
        pxvm_image_free(&ov);
    }
    if (rc == 0)
        pxvm_plan_summary(&p, stdout);
    if (rc < 0 || overlay_only)
        pxvm_image_free(img);
    pxvm_plan_free(&p);
    return rc;
}

/* One side of WxH: decimal digits only, 1 .. 65535 (the largest max side); *end past them. */
static int px__parse_side(const char *s, const char **end)
{
    long v = 0;
    const char *p = s;
    while (*p >= '0' && *p <= '9' && v <= 65535)
        v = v * 10 + (*p++ - '0');
    *end = p;
    return p == s || v < 1 || v > 65535 || (*p >= '0' && *p <= '9') ? -1 : (int)v;
}

/* "WxH" with both sides in 1 .. 65535 and nothing after: 0, else -1 (no overflow, no sign, no
 * spaces: sscanf's %d took "99999999999" as some other number). */
static int px__parse_size(const char *s, int *w, int *h)
{
    const char *p;
    *w = px__parse_side(s, &p);
    if (*w < 0 || *p != 'x')
        return -1;
    *h = px__parse_side(p + 1, &p);
    return *h < 0 || *p ? -1 : 0;
}

/* --resolve: the any-size program `in` resolved at the sizes given ("WxH": its first any-size
 * slot; "SLOT=WxH" each), written to `out`. */
static int px__resolve(const char *in, char **sizes, int nsizes, const pxvm_limits *lim, const char *out, pxvm_error *err)
{
    pxvm_program prog;
    if (pxvm_program_load(in, lim, &prog, err) < 0)
        return -1;
    int wh[2 * (PXVM_MAX_SLOTS + 1)] = {0}, rc = 0;
    if (!prog.any_size)
        rc = pxvm_fail(err, PXE_RESOLVE_NOT_ANY, -1, -1, in);
    for (int i = 0; i < nsizes && rc == 0; i++) {
        const char *eq = strchr(sizes[i], '='), *size = eq ? eq + 1 : sizes[i];
        int k = 1, w = 0, h = 0;
        if (eq) {
            char name[64];
            snprintf(name, sizeof name, "%.*s", (int)(eq - sizes[i]), sizes[i]);
            k = pxvm_slot_lookup(&prog, name);
        } else {
            while (k < prog.nslots && !(prog.slots[k].flags & PXI_SLOT_ANYSIZE))
                k++;
        }
        if (px__parse_size(size, &w, &h) < 0)
            rc = pxvm_fail(err, PXE_RESOLVE_SYNTAX, -1, -1, sizes[i]);
        else if (k < 1 || k >= prog.nslots || !(prog.slots[k].flags & PXI_SLOT_ANYSIZE))
            rc = pxvm_fail(err, PXE_RESOLVE_NO_SLOT, -1, -1, sizes[i], in);
        else if (wh[2 * k]) /* the same slot twice: which size was meant? */
            rc = pxvm_fail(err, PXE_RESOLVE_TWICE, -1, -1, sizes[i], k, wh[2 * k], wh[2 * k + 1]);
        else
            wh[2 * k] = w, wh[2 * k + 1] = h;
    }
    pxvm_program res;
    if (rc == 0 && (rc = pxvm_program_resolve(&prog, wh, lim, &res, err)) == 0) {
        rc = px__write_png(out, &res.image, err);
        pxvm_program_free(&res);
    }
    pxvm_program_free(&prog);
    return rc;
}

int main(int argc, char **argv)
{
    char *sizes[PXVM_MAX_SLOTS];
    int nsizes = 0;
    const char *in = NULL, *out = NULL, *plan = NULL, *overlay_in = NULL, *overlay_out = NULL;
    int dis = 0;
    pxvm_limits lim;
    pxvm_limits_default(&lim);
    for (int i = 1; i < argc; i++) {
        uint64_t n;
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            fputs(px__usage, stdout);
            return 0;
        } else if (!strcmp(argv[i], "--version")) {
            px_print_version("pxasm");
            return 0;
        } else if (!strcmp(argv[i], "-d") && i + 1 < argc) {
            dis = 1;
            in = argv[++i];
        } else if (!strcmp(argv[i], "-o") && i + 1 < argc) {
            out = argv[++i];
        } else if (!strcmp(argv[i], "--resolve") && i + 1 < argc && nsizes < PXVM_MAX_SLOTS) {
            sizes[nsizes++] = argv[++i];
        } else if (!strcmp(argv[i], "--plan") && i + 1 < argc) {
            plan = argv[++i];
        } else if (!strcmp(argv[i], "--overlay") && i + 1 < argc) {
            overlay_in = argv[++i];
            if (i + 1 < argc && argv[i + 1][0] != '-') /* --overlay PHOTO OUT; else -o names the overlay */
                overlay_out = argv[++i];
        } else if (!strcmp(argv[i], "--max-side") && i + 1 < argc && !px_parse_u64(argv[i + 1], &n) && n >= 1 && n <= 65535) {
            lim.max_side = (uint32_t)n;
            i++;
        } else if (!strcmp(argv[i], "--max-memory") && i + 1 < argc && !px_parse_u64(argv[i + 1], &n)) {
            lim.max_memory = n;
            i++;
        } else if (!strcmp(argv[i], "--max-insns") && i + 1 < argc && !px_parse_u64(argv[i + 1], &n) && n >= 1 &&
                   n <= UINT32_MAX) {
            lim.max_insns = (uint32_t)n;
            i++;
        } else if ((argv[i][0] != '-' || !strcmp(argv[i], "-")) && !in) {
            in = argv[i];
        } else {
            if (!strncmp(argv[i], "--max-", 6) && i + 1 < argc)
                fprintf(stderr, "pxasm: bad option or value: %s %s\n%s", argv[i], argv[i + 1], px__usage);
            else
                fprintf(stderr, "pxasm: bad argument '%s'\n%s", argv[i], px__usage);
            return 2;
        }
    }
    if ((in && !strcmp(in, "-")) + (plan && !strcmp(plan, "-")) + (overlay_in && !strcmp(overlay_in, "-")) > 1) {
        fprintf(stderr, "pxasm: '-' (standard input) names at most one input\n%s", px__usage);
        return 2;
    }
    pxvm_error err = {0};
    pxvm_image img = {0, 0, NULL};
    if (dis) {
        pxvm_program prog;
        if (pxvm_program_load(in, &lim, &prog, &err) < 0)
            return px__die(&err);
        const char *base = strrchr(in, '/') ? strrchr(in, '/') + 1 : in;
        int rc = 0;
        if (!out) {
            pxasm_disassemble(&prog, base, stdout);
        } else {
            char *text = NULL;
            size_t len = 0;
            FILE *mem = open_memstream(&text, &len);
            pxasm_disassemble(&prog, base, mem);
            fclose(mem);
            rc = px__write(out, text, len, &err);
            free(text);
        }
        pxvm_program_free(&prog);
        return rc < 0 ? px__die(&err) : 0;
    }
    if (nsizes) {
        if (!in || plan || !out) {
            fprintf(stderr, "pxasm: --resolve needs one PROGRAM.pxi and -o OUTPUT\n%s", px__usage);
            return 2;
        }
        return px__resolve(in, sizes, nsizes, &lim, out, &err) < 0 ? px__die(&err) : 0;
    }
    int overlay_only = overlay_in && !overlay_out;
    if (overlay_only)
        overlay_out = out;
    if ((!in && !plan) || (in && plan) || !out || (overlay_in && !plan)) {
        fprintf(stderr, "pxasm: %s\n%s", !out ? "-o OUTPUT is needed" : "give one source or one --plan", px__usage);
        return 2;
    }
    if (plan ? px__plan(plan, &lim, overlay_in, overlay_out, overlay_only, out, &img, &err) < 0
             : pxasm_assemble_file(in, &lim, &img, &err) < 0)
        return px__die(&err);
    int rc = !plan && px__write_png(out, &img, &err) < 0 ? px__die(&err) : 0;
    pxvm_image_free(&img);
    return rc;
}
