/* make-corpus - writes the fuzzers' seed corpora from programs/ and the conformance generator:
 * .pxi files for fuzz_load, raw pixel images (width-1 byte + RGBA) for fuzz_validate and
 * fuzz_run, disassemblies for fuzz_asm. Run from the repository root: `make fuzz-corpus`. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../assembler/pxasm.h"
#include "../conformance/cases.h"

static void px__write(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (f) {
        fwrite(data, 1, len, f);
        fclose(f);
    }
}

static void px__emit(const pxvm_image *img, const char *name)
{
    char path[512];
    uint8_t *png;
    size_t len;
    if (img->w > 256 || (size_t)img->w * (size_t)img->h > 200000)
        return; /* small seeds only */
    if (pxvm_png_encode(img, &png, &len, NULL) == 0) {
        snprintf(path, sizeof path, "tests/fuzz/corpus/load/%s.pxi", name);
        px__write(path, png, len);
        free(png);
    }
    size_t raw_len = 1 + (size_t)img->w * (size_t)img->h * 4u;
    uint8_t *raw = malloc(raw_len);
    if (!raw)
        return;
    raw[0] = (uint8_t)(img->w - 1);
    memcpy(raw + 1, img->px, raw_len - 1);
    snprintf(path, sizeof path, "tests/fuzz/corpus/validate/%s.raw", name);
    px__write(path, raw, raw_len);
    snprintf(path, sizeof path, "tests/fuzz/corpus/run/%s.raw", name);
    px__write(path, raw, raw_len);
    free(raw);
    pxvm_limits lim;
    pxvm_limits_default(&lim);
    pxvm_program prog;
    pxvm_error err;
    if (pxvm_program_from_copy(img, &lim, &prog, &err) == 0) {
        snprintf(path, sizeof path, "tests/fuzz/corpus/asm/%s.pxs", name);
        FILE *f = fopen(path, "w");
        if (f) {
            pxasm_disassemble(&prog, name, f);
            fclose(f);
        }
        pxvm_program_free(&prog);
    }
}

int main(void)
{
    const char *progs[] = {"dot_test", "pyramid", "foveate273", "grid", "logpolar", "v1", "aniso", "uniform"};
    pxvm_limits lim;
    pxvm_limits_default(&lim);
    for (size_t i = 0; i < sizeof progs / sizeof progs[0]; i++) {
        char path[256];
        pxvm_image img;
        pxvm_error err;
        snprintf(path, sizeof path, "programs/%s.pxi", progs[i]);
        if (pxvm_png_load(path, &lim, &img, &err) == 0) {
            px__emit(&img, progs[i]);
            pxvm_image_free(&img);
        }
    }
    px_case c;
    for (int i = 0; px_case_edge(i, &c) > 0; i++) {
        char name[80];
        snprintf(name, sizeof name, "edge-%d", i);
        px__emit(&c.program, name);
        px_case_free(&c);
    }
    for (uint64_t s = 1; s <= 40; s++) {
        char name[80];
        if (px_case_random(s, &c) > 0) {
            snprintf(name, sizeof name, "random-%llu", (unsigned long long)s);
            px__emit(&c.program, name);
        }
        px_case_free(&c);
    }
    return 0;
}
