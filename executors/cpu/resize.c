/* resize.c - RESIZE on the CPU: Pillow's Image.resize of a slot's level 0 into a rectangle of
 * another (stretched or fitted on a pad). The tables are built once at load (vm/resize.c:
 * px_resize_op_make); a run does what px_resize_rgba8 does with them, pass by pass, rows spread
 * over the pool, every sample through isa/px_resize.h. The CUDA-GL twin is
 * executors/cuda_gl/resize.cu. */
#include <stdlib.h>

#include "../../isa/px_resize.h"
#include "../../vm/resize.h"
#include "cpu_executor.h"

int px_cpu_resize_load(pxvm_executor *ex, pxvm_error *err)
{
    const pxvm_program *prog = ex->prog;
    size_t tmp = 0;
    for (uint32_t i = 0; i < prog->ninsns; i++) {
        const pxi_insn *in = &prog->insns[i];
        if (in->op != PX_OP_RESIZE)
            continue;
        if (!ex->resize && !(ex->resize = calloc(prog->ninsns, sizeof *ex->resize)))
            return pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)prog->ninsns * sizeof *ex->resize);
        const pxvm_slot *s = &prog->slots[PX_ARG(in, RESIZE, src)];
        px_resize_op *op = calloc(1, sizeof *op);
        if (!op)
            return pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)sizeof *op);
        if (px_resize_op_make(in, s->w, s->h, op, err) < 0) {
            free(op);
            return -1;
        }
        ex->resize[i] = op;
        size_t need = (size_t)op->rows * (size_t)op->cw * 4u;
        tmp = need > tmp ? need : tmp;
    }
    if (tmp && !(ex->resize_tmp = malloc(tmp)))
        return pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)tmp);
    return 0;
}

void px_cpu_resize_unload(pxvm_executor *ex)
{
    for (uint32_t i = 0; ex->resize && i < ex->ninsns; i++)
        if (ex->resize[i]) {
            px_resize_op_free(ex->resize[i]);
            free(ex->resize[i]);
        }
    free(ex->resize);
    free(ex->resize_tmp);
    ex->resize = NULL;
    ex->resize_tmp = NULL;
}

typedef struct {
    const px_resize_op *op;
    const uint8_t *src; /* level 0, sw x sh RGBA */
    uint8_t *dst;       /* level 0 of dst */
    int dst_w;
    uint8_t *tmp;       /* pass 1's rows: cw x rows RGBA */
} px__resize_job;

/* Pass 1: buffer rows r0..r1-1 = source rows row0 + r, resized horizontally (or copied). */
static void px__resize_h(void *ctx, int r0, int r1)
{
    const px__resize_job *j = ctx;
    const px_resize_op *op = j->op;
    size_t srow = (size_t)op->sw * 4u, trow = (size_t)op->cw * 4u;
    for (int r = r0; r < r1; r++) {
        const uint8_t *s = j->src + (size_t)(op->row0 + r) * srow;
        uint8_t *t = j->tmp + (size_t)r * trow;
        if (!op->hpass) {
            memcpy(t, s, trow);
            continue;
        }
        for (int x = 0; x < op->cw; x++)
            for (int c = 0; c < 4; c++)
                t[4 * x + c] = (uint8_t)px_resize_tap(s + c, 4, op->tx.first[x], op->tx.count[x],
                                                      op->tx.k + (size_t)x * (size_t)op->tx.ksize);
    }
}

/* Pass 2 (or NEAREST): rows y0..y1-1 of the rectangle, content and pad. */
static void px__resize_v(void *ctx, int y0, int y1)
{
    const px__resize_job *j = ctx;
    const px_resize_op *op = j->op;
    size_t drow = (size_t)j->dst_w * 4u, trow = (size_t)op->cw * 4u;
    for (int yy = y0; yy < y1; yy++) {
        int y = op->y + yy, cy = y - op->cy;
        uint8_t *d = j->dst + (size_t)y * drow;
        int in = cy >= 0 && cy < op->ch;
        for (int x = op->x; x < op->x + op->w; x++)
            if (!in || x < op->cx || x >= op->cx + op->cw)
                px__store(d + 4 * x, op->pad);
        if (!in)
            continue;
        d += 4 * (size_t)op->cx;
        if (op->filter == PX_RESIZE_NEAREST && !op->copy) {
            for (int x = 0; x < op->cw; x++)
                for (int c = 0; c < 4; c++)
                    d[4 * x + c] = (uint8_t)px_resize_nearest(j->src + c, 4, (int64_t)op->sw * 4, op->tx.first[x],
                                                              op->ty.first[cy]);
        } else if (!op->vpass) {
            memcpy(d, j->tmp + (size_t)cy * trow, trow);
        } else {
            for (int x = 0; x < op->cw; x++)
                for (int c = 0; c < 4; c++)
                    d[4 * x + c] = (uint8_t)px_resize_tap(j->tmp + 4 * x + c, (int64_t)trow, op->ty.first[cy] - op->row0,
                                                          op->ty.count[cy], op->ty.k + (size_t)cy * (size_t)op->ty.ksize);
        }
    }
}

void px_cpu_resize(pxvm_executor *ex, uint32_t index)
{
    const px_resize_op *op = ex->resize[index];
    px__resize_job job = {op, ex->view[op->src].level[0], ex->store[op->dst], ex->prog->slots[op->dst].w, ex->resize_tmp};
    if (op->rows) /* copy, or a filter's pass 1 */
        px_pool_for(ex->pool, op->rows, 1 + 4096 / (op->cw + 1), px__resize_h, &job);
    px_pool_for(ex->pool, op->h, 1 + 4096 / (op->w + 1), px__resize_v, &job);
}
