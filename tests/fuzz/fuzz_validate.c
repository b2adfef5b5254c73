/* fuzz_validate: bytes as the pixels of a program image (no PNG in the way): the validator, the
 * launch plan, the reset analysis and the instruction printer. */
#include <stdio.h>

#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pxvm_limits lim = px_fuzz_limits();
    pxvm_image img;
    pxvm_error err;
    pxvm_program prog;
    if (px_fuzz_raw_image(data, size, &img) < 0)
        return 0;
    if (pxvm_program_from_image(&img, &lim, &prog, &err) == 0) {
        char buf[1024];
        for (uint32_t i = 0; i < prog.ninsns; i++)
            pxvm_insn_format(&prog, &prog.insns[i], buf, sizeof buf);
        pxvm_program_free(&prog);
    } else {
        char buf[1024];
        pxvm_error_format(&err, buf, sizeof buf);
    }
    return 0;
}
