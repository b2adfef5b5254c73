/* fixation.c - SALIENCY and ARGMAX on the CPU reference executor; the CUDA-GL twin is
 * executors/cuda_gl/fixation.cu. Both compute isa/px_sem.h's px_saliency_at,
 * px_saliency_pixel, px_argmax_value, px_argmax_better, px_inhibited and px_texel_centre_q16. */
#include <string.h>

#include "cpu_executor.h"

void px_cpu_saliency_rows(const px_cpu_src *src, uint8_t *dst, int dst_w, const pxi_insn *in, int y0, int y1)
{
    int acc = PX_ARG(in, SALIENCY, accumulate), shift = PX_ARG(in, SALIENCY, shift);
    int c = PX_ARG(in, SALIENCY, centre), sl = PX_ARG(in, SALIENCY, surround), m = PX_ARG(in, SALIENCY, map);
    uint32_t wl = (uint32_t)PX_ARG(in, SALIENCY, w_lum), wrg = (uint32_t)PX_ARG(in, SALIENCY, w_rg);
    uint32_t wby = (uint32_t)PX_ARG(in, SALIENCY, w_by);
    for (int y = y0; y < y1; y++) {
        uint8_t *row = dst + (size_t)y * (size_t)dst_w * 4u;
        for (int x = 0; x < dst_w; x++)
            px__store(row + 4 * x, px_saliency_pixel(px_saliency_at(src, c, sl, m, x, y, wl, wrg, wby, shift), acc,
                                                     px__load(row + 4 * x)));
    }
}

/* One scan in row-major order keeps the first largest uninhibited texel and the first largest of
 * all (used only when inhibition covers every texel). */
void px_cpu_argmax(const px_cpu_src *src, int space_w, int space_h, const pxi_insn *in, int32_t *fix)
{
    int level = PX_ARG(in, ARGMAX, level), w = src->w[level], h = src->h[level];
    int first = PX_ARG(in, ARGMAX, ior_first), count = PX_ARG(in, ARGMAX, ior_count), radius = PX_ARG(in, ARGMAX, radius);
    uint32_t wr = (uint32_t)PX_ARG(in, ARGMAX, w_r), wg = (uint32_t)PX_ARG(in, ARGMAX, w_g);
    uint32_t wb = (uint32_t)PX_ARG(in, ARGMAX, w_b), wa = (uint32_t)PX_ARG(in, ARGMAX, w_a);
    int32_t ior[2 * PX_FIX_REGS];
    memcpy(ior, fix + 2 * first, sizeof(int32_t) * 2u * (size_t)count);
    uint32_t best_v = 0, any_v = 0;
    int64_t best_i = -1, any_i = -1;
    for (int y = 0; y < h; y++) {
        const uint8_t *row = src->level[level] + (size_t)y * (size_t)w * 4u;
        int32_t Y = px_texel_centre_q16(y, h, space_h);
        for (int x = 0; x < w; x++) {
            uint32_t v = px_argmax_value(px__load(row + 4 * x), wr, wg, wb, wa);
            int64_t i = (int64_t)y * w + x;
            if (px_argmax_better(v, i, any_v, any_i))
                any_v = v, any_i = i;
            if (!px_argmax_better(v, i, best_v, best_i))
                continue;
            int32_t X = px_texel_centre_q16(x, w, space_w);
            int inhibited = 0;
            for (int k = 0; k < count && !inhibited; k++)
                inhibited = px_inhibited(X, Y, ior[2 * k], ior[2 * k + 1], radius);
            if (!inhibited)
                best_v = v, best_i = i;
        }
    }
    int64_t at = best_i >= 0 ? best_i : any_i;
    int reg = PX_ARG(in, ARGMAX, reg);
    fix[2 * reg] = px_texel_centre_q16((int)(at % w), w, space_w);
    fix[2 * reg + 1] = px_texel_centre_q16((int)(at / w), h, space_h);
}

/* ---- the plan steps (the executor's dispatch: run.c) ------------------------------------------ */

static void px__saliency_rows(void *ctx, int y0, int y1)
{
    const px_cpu_insn_job *j = ctx;
    int src = PX_ARG(j->in, SALIENCY, src), dst = PX_ARG(j->in, SALIENCY, dst);
    px_cpu_saliency_rows(&j->ex->view[src], j->ex->store[dst], j->ex->prog->slots[dst].w, j->in, y0, y1);
}

int px_cpu_run_saliency(pxvm_executor *ex, uint32_t s, pxvm_error *err)
{
    (void)err;
    const pxvm_program *prog = ex->prog;
    const pxi_insn *first = &prog->insns[prog->steps[s].first];
    px_cpu_insn_job job = {ex, first};
    px_pool_for(ex->pool, prog->slots[PX_ARG(first, SALIENCY, dst)].h, 8, px__saliency_rows, &job);
    return 0;
}

int px_cpu_run_argmax(pxvm_executor *ex, uint32_t s, pxvm_error *err)
{
    (void)err;
    const pxvm_program *prog = ex->prog;
    const pxi_insn *first = &prog->insns[prog->steps[s].first];
    const pxvm_slot *space = &prog->slots[PX_ARG(first, ARGMAX, space)];
    px_cpu_argmax(&ex->view[PX_ARG(first, ARGMAX, src)], space->w, space->h, first, ex->fix);
    return 0;
}
