/* resize.c - RESIZE on the CPU: Pillow's Image.resize of a slot's level 0 into a rectangle of
 * another (stretched or fitted on a pad). The tables are built once at load (vm/resize.c:
 * px_resize_op_make); a run writes the pad, then the content through px_resize_tile (the host
 * reference's code, every sample through isa/px_resize.h): rows spread over the pool, or, when
 * the vertical pass streams computed rows, tiles of columns (and bands of rows) each with its own
 * scratch, whose sum is at most Pillow's intermediate (what the memory rule counts). The CUDA-GL
 * twin is executors/cuda_gl/resize.cu. */
#include <stdint.h>
#include <stdlib.h>

#include "../../isa/px_resize.h"
#include "../../vm/resize.h"
#include "cpu_executor.h"

/* The scratch of one tile of op split tiles_x by tiles_y ways, rounded to 8 bytes. */
static size_t px__tile_bytes(const px_resize_op *op)
{
    int tw = (op->cw + op->tiles_x - 1) / op->tiles_x;
    return (px_resize_tile_bytes(op, tw, 4) + 7u) & ~(size_t)7u;
}

/* How a streamed RESIZE splits over `threads`: column tiles (their scratch adds up to one tile of
 * the whole width: a column's rows do not depend on another's), then row bands while the scratch
 * of all tiles stays within Pillow's intermediate (a band reads its runs' rows again). */
static void px__split(px_resize_op *op, int threads)
{
    op->tiles_x = op->tiles_y = 1;
    if (!op->vunits)
        return;
    int nx = op->cw / 16;
    op->tiles_x = nx < 1 ? 1 : nx > threads ? threads : nx;
    uint64_t most = 4u * (uint64_t)op->cw * (uint64_t)op->rows;
    for (int ny = threads / op->tiles_x; ny > 1; ny--) {
        int b = ny > op->ch ? op->ch : ny;
        op->tiles_y = b;
        if ((uint64_t)px__tile_bytes(op) * (uint64_t)op->tiles_x * (uint64_t)b <= most)
            return;
    }
    op->tiles_y = 1;
}

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
        px__split(op, px_pool_threads(ex->pool));
        size_t need = px__tile_bytes(op) * (size_t)op->tiles_x * (size_t)op->tiles_y;
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
    uint8_t *tmp;       /* the tiles' scratch */
} px__resize_job;

/* Rows y0..y1-1 of the rectangle: the pad around the content. */
static void px__resize_pad(void *ctx, int y0, int y1)
{
    const px__resize_job *j = ctx;
    const px_resize_op *op = j->op;
    size_t drow = (size_t)j->dst_w * 4u;
    for (int yy = y0; yy < y1; yy++) {
        int y = op->y + yy, in = y >= op->cy && y < op->cy + op->ch;
        uint8_t *d = j->dst + (size_t)y * drow;
        for (int x = op->x; x < op->x + op->w; x++)
            if (!in || x < op->cx || x >= op->cx + op->cw)
                px__store(d + 4 * x, op->pad);
    }
}

static uint8_t *px__content(const px__resize_job *j)
{
    return j->dst + ((size_t)j->op->cy * (size_t)j->dst_w + (size_t)j->op->cx) * 4u;
}

/* Content rows y0..y1-1, whole (no scratch). */
static void px__resize_rows(void *ctx, int y0, int y1)
{
    const px__resize_job *j = ctx;
    const px_resize_op *op = j->op;
    px_resize_tile(op, j->src, (int64_t)op->sw * 4, px__content(j), (int64_t)j->dst_w * 4, 4, 0, op->cw, y0, y1, NULL);
}

/* Tiles t0..t1-1 of the tiles_x by tiles_y split, each with its part of the scratch. */
static void px__resize_tiles(void *ctx, int t0, int t1)
{
    const px__resize_job *j = ctx;
    const px_resize_op *op = j->op;
    size_t bytes = px__tile_bytes(op);
    for (int t = t0; t < t1; t++) {
        int bx = t % op->tiles_x, by = t / op->tiles_x;
        int x0 = (int)((int64_t)op->cw * bx / op->tiles_x), x1 = (int)((int64_t)op->cw * (bx + 1) / op->tiles_x);
        int y0 = (int)((int64_t)op->ch * by / op->tiles_y), y1 = (int)((int64_t)op->ch * (by + 1) / op->tiles_y);
        if (x0 < x1 && y0 < y1)
            px_resize_tile(op, j->src, (int64_t)op->sw * 4, px__content(j), (int64_t)j->dst_w * 4, 4, x0, x1, y0, y1,
                           j->tmp + (size_t)t * bytes);
    }
}

void px_cpu_resize(pxvm_executor *ex, uint32_t index)
{
    const px_resize_op *op = ex->resize[index];
    px__resize_job job = {op, ex->view[op->src].level[0], ex->store[op->dst], ex->prog->slots[op->dst].w, ex->resize_tmp};
    if (op->w != op->cw || op->h != op->ch)
        px_pool_for(ex->pool, op->h, 1 + 4096 / (op->w + 1), px__resize_pad, &job);
    if (op->vunits)
        px_pool_for(ex->pool, op->tiles_x * op->tiles_y, 1, px__resize_tiles, &job);
    else
        px_pool_for(ex->pool, op->ch, 1 + 4096 / (op->cw + 1), px__resize_rows, &job);
}

/* RESIZE as plan step s. */
int px_cpu_run_resize(pxvm_executor *ex, uint32_t s, pxvm_error *err)
{
    (void)err;
    px_cpu_resize(ex, ex->prog->steps[s].first);
    return 0;
}
