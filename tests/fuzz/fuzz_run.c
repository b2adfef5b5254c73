/* fuzz_run: bytes as a program image; a valid program runs on the CPU executor (one thread, a
 * step budget of 64) with every input bound to an image made from the same bytes, and every
 * slot level is read back. */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pxvm_limits lim = px_fuzz_limits();
    pxvm_image img;
    pxvm_error err;
    pxvm_program prog;
    if (px_fuzz_raw_image(data, size, &img) < 0 || pxvm_program_from_image(&img, &lim, &prog, &err) < 0)
        return 0;
    pxvm_executor *ex;
    pxvm_open_options one = {1, 0};
    if (pxvm_cpu_executor.open(&ex, &one, &err) == 0) {
        if (pxvm_cpu_executor.load(ex, &prog, 1, &err) == 0) {
            for (int k = 1; k < prog.nslots; k++)
                if (prog.slots[k].role == PXI_ROLE_INPUT) {
                    pxvm_image in;
                    if (pxvm_image_alloc(&in, prog.slots[k].w, prog.slots[k].h, NULL) == 0) {
                        for (size_t i = 0; i < (size_t)in.w * (size_t)in.h * 4u; i++)
                            in.px[i] = data[i % size];
                        pxvm_bind_image(&pxvm_cpu_executor, ex, k, &in, &err);
                        pxvm_image_free(&in);
                    }
                }
            pxvm_run_options ro = {.max_steps = lim.max_steps};
            if (pxvm_cpu_executor.run(ex, &ro, &err) == 0)
                for (int k = 0; k < prog.nslots; k++)
                    for (int l = 0; l < prog.slots[k].levels; l++) {
                        pxvm_image out;
                        if (pxvm_read_image(&pxvm_cpu_executor, ex, &prog, k, l, 0, &out, &err) == 0)
                            pxvm_image_free(&out);
                    }
        }
        pxvm_cpu_executor.close(ex);
    }
    pxvm_program_free(&prog);
    return 0;
}
