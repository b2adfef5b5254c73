/* pyramid.c - the full PYRAMID on the CPU: every level of a slot from the one below (the
 * px_cpu_pyr_span rule of cpu_slot.h), rows spread over the pool, two levels per pass. The
 * incremental PYRAMID (a tile mask) is in video.c. */
#include "cpu_executor.h"

typedef struct {
    const px_cpu_src *v;
    int level; /* the first level built */
} px__pyr_job;

/* Row y of level l from level l-1 (vector variants of the whole row). */
PX_VECTOR_CLONES static void px__pyr_row(const px_cpu_src *v, int l, int y) { px_cpu_pyr_span(v, l, y, 0, v->w[l]); }

/* Items p of level l+1 (= job level): rows 2p and 2p+1 of level l, then, while they are in cache,
 * row p of level l+1 from them (it reads exactly those two rows, or row 2p twice at height 1). */
static void px__pyr_pairs(void *ctx, int p0, int p1)
{
    const px__pyr_job *j = ctx;
    int l = j->level, h = j->v->h[l], h2 = j->v->h[l + 1];
    for (int p = p0; p < p1; p++) {
        px__pyr_row(j->v, l, 2 * p);
        if (2 * p + 1 < h)
            px__pyr_row(j->v, l, 2 * p + 1);
        if (p < h2)
            px__pyr_row(j->v, l + 1, p);
    }
}

static void px__pyr_rows(void *ctx, int y0, int y1)
{
    const px__pyr_job *j = ctx;
    for (int y = y0; y < y1; y++)
        px__pyr_row(j->v, j->level, y);
}

void px_cpu_pyramid(pxvm_executor *ex, int slot)
{
    const px_cpu_src *v = &ex->view[slot];
    for (int l = 1; l < v->levels;) {
        px__pyr_job job = {v, l};
        /* about 64 KiB of output per chunk */
        int grain = 1 + (16384 / (v->w[l] > 0 ? v->w[l] : 1));
        if (l + 1 < v->levels) { /* two levels in one pass */
            px_pool_for(ex->pool, (v->h[l] + 1) / 2, (grain + 1) / 2, px__pyr_pairs, &job);
            l += 2;
        } else {
            px_pool_for(ex->pool, v->h[l], grain, px__pyr_rows, &job);
            l += 1;
        }
    }
}

static void px__video_pyramid_rows(void *ctx, int y0, int y1)
{
    const px_cpu_insn_job *j = ctx;
    int mask = PX_ARG(j->in, PYRAMID, mask);
    px_cpu_pyramid_tile_rows(&j->ex->view[PX_ARG(j->in, PYRAMID, slot)], j->ex->store[mask], j->ex->prog->slots[mask].w,
                             y0, y1);
}

/* PYRAMID as plan step s: incremental (its tile mask's dirty tiles, video.c's rows) or whole. */
int px_cpu_run_pyramid(pxvm_executor *ex, uint32_t s, pxvm_error *err)
{
    (void)err;
    const pxvm_program *prog = ex->prog;
    const pxi_insn *first = &prog->insns[prog->steps[s].first];
    if (PX_ARG(first, PYRAMID, mask)) {
        px_cpu_insn_job job = {ex, first};
        int mask = PX_ARG(first, PYRAMID, mask);
        px_pool_for(ex->pool, prog->slots[mask].h, 2, px__video_pyramid_rows, &job);
        px_cpu_pyramid_upper(&ex->view[PX_ARG(first, PYRAMID, slot)], ex->store[mask], prog->slots[mask].w,
                             ex->level_flags);
    } else {
        px_cpu_pyramid(ex, PX_ARG(first, PYRAMID, slot));
    }
    return 0;
}
