/* fetch.c - SAMPLE, ANISO and GATHER on the CPU: the counts of the tile masks a fetch step reads,
 * whether an incremental fetch samples (and which of its pixels), the sampling loops of one
 * instruction, and a plan batch's instructions spread over the pool. */
#include "cpu_executor.h"

/* The counts of the masks that fetch step s reads, from the masks as they are now (nothing in a
 * step writes what the step reads); none on an unprimed item, whose fetches sample whole. */
void px_cpu_count_masks(pxvm_executor *ex, uint32_t s)
{
    if (!ex->primed[ex->item])
        return;
    for (const uint8_t *m = ex->step_masks + ex->step_mask_at[s]; *m; m++)
        px_cpu_mask_counts(ex->store[*m], ex->prog->slots[*m].w, ex->prog->slots[*m].h, ex->mask_counts[*m]);
}

/* Whether an incremental instruction samples (SPEC 7: on an unprimed item, when its fixation
 * register moved since it last sampled, or when its footprint box, px_footprint_tiles, holds a
 * dirty tile): 0 no, PX__ALL every pixel, PX__DIRTY the box holds a dirty tile. */
enum { PX__ALL = 1, PX__DIRTY = 2 };
static int px__cpu_fetch_needed(const pxvm_executor *ex, const pxi_insn *in, uint32_t index, int64_t fx, int64_t fy,
                                int mask)
{
    const pxvm_program *prog = ex->prog;
    int reg = px_mode_reg(in->a[PX_FI(SAMPLE, mode)]), filter = px_mode_filter(in->a[PX_FI(SAMPLE, mode)]);
    int need = !ex->primed[ex->item];
    if (reg >= 0) {
        int32_t *last = ex->last_reg + ((size_t)ex->item * prog->ninsns + index) * 2u;
        need |= last[0] != (int32_t)fx || last[1] != (int32_t)fy;
        last[0] = (int32_t)fx, last[1] = (int32_t)fy;
    }
    size_t at = (size_t)ex->item * prog->ninsns + index;
    if (need) {
        ex->geom_known[at] = 0; /* the box and spans of another position */
        return PX__ALL;
    }
    if (!(ex->geom_known[at] & 1u)) {
        const px_cpu_src *sv = &ex->view[in->a[PX_FI(SAMPLE, src)]];
        const pxvm_fetch_box *b = &prog->insn_box[index]; /* decided at load */
        ex->box_all[at] = px_footprint_tiles(b->u_lo + fx, b->u_hi + fx, b->v_lo + fy, b->v_hi + fy, b->lmin, b->lmax, filter,
                                             sv->w[0], sv->h[0]);
        ex->geom_known[at] |= 1u;
    }
    return px_cpu_box_dirty(ex->mask_counts[mask], prog->slots[mask].w, ex->box_all[at]) ? PX__DIRTY : 0;
}

void px_cpu_fetch_insn(const pxvm_executor *ex, const pxi_insn *in)
{
    const pxvm_program *prog = ex->prog;
    int src = in->a[PX_FI(SAMPLE, src)], dst = in->a[PX_FI(SAMPLE, dst)], mode_op = in->a[PX_FI(SAMPLE, mode)];
    int x0 = in->a[PX_FI(SAMPLE, dst_x)], y0 = in->a[PX_FI(SAMPLE, dst_y)];
    int w = in->a[PX_FI(SAMPLE, w)], h = in->a[PX_FI(SAMPLE, h)];
    int mode = px_mode_filter(mode_op), reg = px_mode_reg(mode_op);
    int64_t fx = reg >= 0 ? ex->fix[2 * reg] : 0, fy = reg >= 0 ? ex->fix[2 * reg + 1] : 0; /* fixation offset */
    uint32_t index = (uint32_t)(in - prog->insns);
    int32_t token = prog->insn_token[index];
    const px_cpu_src *sv = &ex->view[src];
    int mask = pxvm_fetch_mask(in), need = mask ? px__cpu_fetch_needed(ex, in, index, fx, fy, mask) : PX__ALL;
    if (!need) {
        if (token >= 0)
            ex->changed[token] = 0; /* its patch keeps its bytes (the slot is persistent) */
        return;
    }
    if (token >= 0)
        ex->changed[token] = 1;
    size_t dw = (size_t)prog->slots[dst].w;
    uint8_t *out = ex->store[dst];
    if (in->op == PX_OP_SAMPLE || in->op == PX_OP_ANISO) { /* ANISO shares SAMPLE's layout up to lod */
        int64_t cu = PX_ARG(in, SAMPLE, cu) + fx, cv = PX_ARG(in, SAMPLE, cv) + fy;
        int32_t du = PX_ARG(in, SAMPLE, du), dv = PX_ARG(in, SAMPLE, dv);
        uint32_t lod = (uint32_t)PX_ARG(in, SAMPLE, lod);
        int taps = in->op == PX_OP_ANISO ? PX_ARG(in, ANISO, taps) : 1;
        int32_t tdu = in->op == PX_OP_ANISO ? PX_ARG(in, ANISO, tdu) : 0;
        int32_t tdv = in->op == PX_OP_ANISO ? PX_ARG(in, ANISO, tdv) : 0;
        if (token >= 0)
            px_geom_write(ex->geom + (size_t)token * PX_GEOM_INTS, cu, cv, du, dv, px_lod_used(lod, mode, sv->levels));
        /* a dirty box, but the same registers on a primed item, and a destination nothing else
         * writes: only the pixels whose taps reach a dirty tile can change (the token counts as
         * sampled: the rule decides `changed`, this only saves work; the other pixels hold what
         * sampling them gives, the instruction's own last output) */
        uint64_t sel[PX_PATCH_MAX_SIDE];
        int some = need == PX__DIRTY && ex->span_at[index] >= 0;
        if (some) {
            int16_t *spans = ex->spans_all + ex->spans_per_item * (size_t)ex->item + (size_t)ex->span_at[index];
            uint8_t *known = ex->geom_known + (size_t)ex->item * prog->ninsns + index;
            if (!(*known & 2u)) { /* spans for this fixation */
                int64_t ulo[PX_PATCH_MAX_SIDE], uhi[PX_PATCH_MAX_SIDE], vlo[PX_PATCH_MAX_SIDE], vhi[PX_PATCH_MAX_SIDE], a, b;
                const pxvm_fetch_box *box = &prog->insn_box[index];
                px_patch_span(0, 0, 1, taps, tdu, &a, &b); /* the taps' offsets around a pixel */
                for (int i = 0; i < w; i++)
                    ulo[i] = cu + px_patch_pos(0, du, i, w) + a, uhi[i] = cu + px_patch_pos(0, du, i, w) + b;
                px_patch_span(0, 0, 1, taps, tdv, &a, &b);
                for (int j = 0; j < h; j++)
                    vlo[j] = cv + px_patch_pos(0, dv, j, h) + a, vhi[j] = cv + px_patch_pos(0, dv, j, h) + b;
                px_cpu_patch_spans(ulo, uhi, w, vlo, vhi, h, box->lmin, box->lmax, mode, sv->w[0], sv->h[0], spans);
                *known |= 2u;
            }
            px_cpu_patch_dirty_pixels(ex->mask_counts[mask], prog->slots[mask].w, spans, w, h, sel);
        }
        for (int j = 0; j < h; j++) {
            int64_t v = cv + px_patch_pos(0, dv, j, h);
            uint8_t *row = out + ((size_t)(y0 + j) * dw + (size_t)x0) * 4u;
            /* runs of selected pixels (w <= 64), or the whole row as one run (any w), each
             * sampled by one plain loop */
            uint64_t bits = some ? sel[j] : 0;
            for (int i0 = 0, i1 = w, more = 1; more;) {
                if (some) {
                    if (!bits)
                        break;
                    i0 = __builtin_ctzll(bits);
                    for (i1 = i0; i1 < 64 && (bits >> i1) & 1u; i1++)
                        ;
                    bits = i1 < 64 ? bits & (~0ull << i1) : 0;
                } else {
                    more = 0;
                }
                for (int i = i0; i < i1; i++) {
                    int64_t u = cu + px_patch_pos(0, du, i, w);
                    px__store(row + 4 * i, in->op == PX_OP_SAMPLE ? px_sample(sv, u, v, lod, mode)
                                                                  : px_sample_aniso(sv, u, v, lod, mode, taps, tdu, tdv));
                }
            }
        }
    } else {
        int t = PX_ARG(in, GATHER, table), tx = PX_ARG(in, GATHER, table_x), ty = PX_ARG(in, GATHER, table_y);
        size_t tw = (size_t)prog->slots[t].w;
        const uint8_t *tab = ex->store[t];
        if (token >= 0) { /* a GATHER token's geometry: its centre entry's position and LOD */
            const uint8_t *e = tab + ((size_t)(ty + h / 2) * tw + (size_t)(tx + 3 * (w / 2))) * 4u;
            px_geom_write(ex->geom + (size_t)token * PX_GEOM_INTS, px_entry_q16(px__load(e)) + fx,
                          px_entry_q16(px__load(e + 4)) + fy, 0, 0, px_lod_used(px_entry_lod(px__load(e + 8)), mode, sv->levels));
        }
        for (int j = 0; j < h; j++) {
            const uint8_t *e = tab + ((size_t)(ty + j) * tw + (size_t)tx) * 4u;
            uint8_t *row = out + ((size_t)(y0 + j) * dw + (size_t)x0) * 4u;
            for (int i = 0; i < w; i++, e += 12)
                px__store(row + 4 * i, px_sample(sv, px_entry_q16(px__load(e)) + fx, px_entry_q16(px__load(e + 4)) + fy,
                                                 px_entry_lod(px__load(e + 8)), mode));
        }
    }
}

void px_cpu_batch_part(void *ctx, int b, int e)
{
    const px_cpu_insn_job *j = ctx;
    for (int i = b; i < e; i++)
        px_cpu_fetch_insn(j->ex, j->in + i);
}

/* SAMPLE, ANISO or GATHER as a plan step of one instruction (a batch is px_cpu_batch_part's). */
int px_cpu_run_fetch(pxvm_executor *ex, uint32_t s, pxvm_error *err)
{
    (void)err;
    px_cpu_count_masks(ex, s);
    px_cpu_fetch_insn(ex, &ex->prog->insns[ex->prog->steps[s].first]);
    return 0;
}
