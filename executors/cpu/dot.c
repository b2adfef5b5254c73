/* dot.c - DOT_RGB on the CPU: the dot product of the red channels of two rows of the program
 * image, up to the first zero, written as a pixel when it fits (px_dot_result). */
#include "cpu_executor.h"

uint64_t px_cpu_dot(pxvm_executor *ex, const pxi_insn *in)
{
    int w = ex->prog->slots[0].w;
    uint8_t *img = ex->store[0];
    const uint8_t *ra = img + (size_t)PX_ARG(in, DOT_RGB, row_a) * (size_t)w * 4u;
    const uint8_t *rb = img + (size_t)PX_ARG(in, DOT_RGB, row_b) * (size_t)w * 4u;
    uint64_t sum = 0;
    for (int x = 0; x < w && ra[4 * x] && rb[4 * x]; x++)
        sum += (uint64_t)ra[4 * x] * rb[4 * x];
    if (sum <= PX_DOT_MAX)
        px__store(img + (size_t)PX_ARG(in, DOT_RGB, row_out) * (size_t)w * 4u, px_dot_result((uint32_t)sum));
    return sum;
}

/* DOT_RGB as plan step s: a sum over PX_DOT_MAX traps the run. */
int px_cpu_run_dot(pxvm_executor *ex, uint32_t s, pxvm_error *err)
{
    const pxvm_program *prog = ex->prog;
    const pxvm_step *st = &prog->steps[s];
    const pxi_insn *first = &prog->insns[st->first];
    uint64_t sum = px_cpu_dot(ex, first);
    if (sum > PX_DOT_MAX) {
        int x, y;
        pxvm_stream_xy(prog, first->pc, &x, &y);
        return pxvm_fail(err, PXE_TRAP_DOT_OVERFLOW, x, y, st->first, (unsigned long)sum);
    }
    return 0;
}
