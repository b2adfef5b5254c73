/* fuzz_load: any bytes as a .pxi file: the PNG decoder, then the whole validator. */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pxvm_limits lim = px_fuzz_limits();
    pxvm_image img;
    pxvm_error err;
    pxvm_program prog;
    if (pxvm_png_decode(data, size, "fuzz.pxi", &lim, &img, &err) < 0)
        return 0;
    if (pxvm_program_from_image(&img, &lim, &prog, &err) == 0)
        pxvm_program_free(&prog);
    return 0;
}
