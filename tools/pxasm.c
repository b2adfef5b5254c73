/* pxasm - assemble, disassemble, and compile allocation plans into pixel programs. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../assembler/plan.h"
#include "../assembler/pxasm.h"

static const char px__usage[] =
    "usage: pxasm SOURCE.pxs -o PROGRAM.pxi              assemble\n"
    "       pxasm -d PROGRAM.pxi [-o SOURCE.pxs]         disassemble (to stdout without -o)\n"
    "       pxasm --plan PLAN.json -o PROGRAM.pxi [--overlay PHOTO.png OVERLAY.png]\n"
    "                                                    compile an allocation plan, print its summary\n"
    "       pxasm --plan PLAN.json --overlay PHOTO.png -o OVERLAY.png\n"
    "                                                    only draw the plan's footprints over a photo\n"
    "'-' is standard input (the source, the plan or the photo: one of them) or standard output.\n"
    "Nothing is written when there is an error. Exit status: 0 ok, 1 i/o, 2 usage, 8 assembly or plan error.\n";

static int px__die(const pxvm_error *err)
{
    char buf[1200];
    pxvm_error_format(err, buf, sizeof buf);
    fprintf(stderr, "pxasm: %s\n", buf);
    return err->cls == PXVM_ASSEMBLY || err->cls == PXVM_PLAN ? 8 : err->cls == PXVM_USAGE ? 2 : 1;
}

static int px__write_png(const char *path, const pxvm_image *img, pxvm_error *err)
{
    uint8_t *png;
    size_t len;
    pxvm_outputs o = {0};
    if (pxvm_png_encode(img, &png, &len, err) < 0)
        return -1;
    int rc = pxvm_outputs_add(&o, path, png, len, err);
    free(png);
    if (rc == 0)
        rc = pxvm_outputs_commit(&o, err);
    return rc;
}

int main(int argc, char **argv)
{
    const char *in = NULL, *out = NULL, *plan = NULL, *overlay_in = NULL, *overlay_out = NULL;
    int dis = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            fputs(px__usage, stdout);
            return 0;
        } else if (!strcmp(argv[i], "-d") && i + 1 < argc) {
            dis = 1;
            in = argv[++i];
        } else if (!strcmp(argv[i], "-o") && i + 1 < argc) {
            out = argv[++i];
        } else if (!strcmp(argv[i], "--plan") && i + 1 < argc) {
            plan = argv[++i];
        } else if (!strcmp(argv[i], "--overlay") && i + 1 < argc) {
            overlay_in = argv[++i];
            if (i + 1 < argc && argv[i + 1][0] != '-') /* --overlay PHOTO OUT; else -o names the overlay */
                overlay_out = argv[++i];
        } else if ((argv[i][0] != '-' || !strcmp(argv[i], "-")) && !in) {
            in = argv[i];
        } else {
            fprintf(stderr, "pxasm: bad argument '%s'\n%s", argv[i], px__usage);
            return 2;
        }
    }
    if ((in && !strcmp(in, "-")) + (plan && !strcmp(plan, "-")) + (overlay_in && !strcmp(overlay_in, "-")) > 1) {
        fprintf(stderr, "pxasm: '-' (standard input) names at most one input\n%s", px__usage);
        return 2;
    }
    pxvm_limits lim;
    pxvm_limits_default(&lim);
    pxvm_error err = {0};
    pxvm_image img = {0, 0, NULL};
    if (dis) {
        pxvm_program prog;
        if (pxvm_program_load(in, &lim, &prog, &err) < 0)
            return px__die(&err);
        const char *base = strrchr(in, '/') ? strrchr(in, '/') + 1 : in;
        if (!out) {
            pxasm_disassemble(&prog, base, stdout);
        } else {
            char *text = NULL;
            size_t len = 0;
            FILE *mem = open_memstream(&text, &len);
            pxasm_disassemble(&prog, base, mem);
            fclose(mem);
            pxvm_outputs o = {0};
            int rc = pxvm_outputs_add(&o, out, text, len, &err) == 0 ? pxvm_outputs_commit(&o, &err) : -1;
            free(text);
            if (rc < 0)
                return px__die(&err);
        }
        pxvm_program_free(&prog);
        return 0;
    }
    int overlay_only = overlay_in && !overlay_out;
    if (overlay_only)
        overlay_out = out;
    if ((!in && !plan) || (in && plan) || !out || (overlay_in && !plan)) {
        fprintf(stderr, "pxasm: %s\n%s", !out ? "-o OUTPUT is needed" : "give one source or one --plan", px__usage);
        return 2;
    }
    if (plan) {
        pxvm_plan p;
        if (pxvm_plan_load(plan, &p, &err) < 0 || pxvm_plan_compile(&p, &img, &err) < 0)
            return px__die(&err);
        pxvm_plan_summary(&p, stdout);
        if (overlay_in) {
            pxvm_image photo, ov;
            if (pxvm_png_load(overlay_in, &lim, &photo, &err) < 0 || pxvm_plan_overlay(&p, &photo, &ov, &err) < 0 ||
                px__write_png(overlay_out, &ov, &err) < 0)
                return px__die(&err);
            pxvm_image_free(&photo);
            pxvm_image_free(&ov);
        }
        pxvm_plan_free(&p);
    } else if (pxasm_assemble_file(in, &lim, &img, &err) < 0) {
        return px__die(&err);
    }
    if (!overlay_only && px__write_png(out, &img, &err) < 0)
        return px__die(&err);
    pxvm_image_free(&img);
    return 0;
}
