/* fuzz_asm: bytes as pxasm source; what assembles is disassembled and must reassemble to the
 * same pixels (a crash or a difference is a finding). */
#define _GNU_SOURCE
#include <stdio.h>

#include "../../assembler/pxasm.h"
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pxvm_limits lim = px_fuzz_limits();
    pxvm_image img, again;
    pxvm_error err;
    /* a path with no folder: .data files resolve to the current folder or absolute paths */
    if (pxasm_assemble((const char *)data, size, "fuzz.pxs", &lim, &img, &err) < 0)
        return 0;
    pxvm_program prog;
    if (pxvm_program_from_copy(&img, &lim, &prog, &err) == 0) {
        char *text = NULL;
        size_t len = 0;
        FILE *mem = open_memstream(&text, &len);
        if (mem) {
            pxasm_disassemble(&prog, "fuzz", mem);
            fclose(mem);
            if (pxasm_assemble(text, len, "fuzz.pxs", &lim, &again, &err) != 0 || again.w != img.w ||
                again.h != img.h || memcmp(again.px, img.px, (size_t)img.w * (size_t)img.h * 4u))
                abort(); /* the round trip must hold for every program */
            pxvm_image_free(&again);
            free(text);
        }
        pxvm_program_free(&prog);
    }
    pxvm_image_free(&img);
    return 0;
}
