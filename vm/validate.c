/* validate.c - the rules a program must follow beyond its layout (SPEC's validation): each
 * operand by its kind as it is decoded, then each instruction against the header and its slots
 * (regions, masks, levels, read-only slots, the header and code never written); and which slots
 * an instruction reads, and its tile mask, for the plan and the executors. */
#include <stdlib.h>
#include <string.h>

#include "loader.h"
#include "resize.h"
#include "../isa/px_sem.h"

int px_vm_kind_has_rule(enum pxi_kind kind)
{
    return kind != PXK_U8 && kind != PXK_U16 && kind != PXK_Q16 && kind != PXK_LOD;
}

/* The pixel (x, y) of an instruction's pixel +pixel, for its refusals. */
static int px__insn_x(const pxvm_program *prog, const pxi_insn *in, int pixel)
{
    int x, y;
    pxvm_stream_xy(prog, in->pc + (uint32_t)pixel, &x, &y);
    return x;
}

static int px__insn_y(const pxvm_program *prog, const pxi_insn *in, int pixel)
{
    int x, y;
    pxvm_stream_xy(prog, in->pc + (uint32_t)pixel, &x, &y);
    return y;
}

/* The values every instruction rule's entry of errors.def starts with ("instruction %u (%s): "),
 * after the pixel it names: the instruction's pixel +pixel, its index, its opcode's name. */
#define PX__INSN_AT(prog, in, index, pixel) \
    px__insn_x(prog, in, pixel), px__insn_y(prog, in, pixel), (index), pxi_op((in)->op)->name
/* ... and an operand rule's ("operand %s = %ld"): operand fi's pixel, its name and its value v */
#define PX__OPERAND_AT(prog, in, index, fi, v) PX__INSN_AT(prog, in, index, (fi)->pixel), (fi)->name, (long)(v)
/* field f of the instruction's opcode */
#define PX__FIELD(in, f) (&pxi_op((in)->op)->fields[f])

/* Operand rules that follow from an operand's kind alone (none for the kinds above). */
int px_vm_check_field(const pxvm_program *prog, const pxi_insn *in, uint32_t index, const pxi_field_info *fi, int32_t v,
                      pxvm_error *err)
{
#define PX__REFUSE(code) pxvm_fail(err, code, PX__OPERAND_AT(prog, in, index, fi, v))
    switch (fi->kind) {
    case PXK_ZERO: return v ? PX__REFUSE(PXE_OPERAND_ZERO) : 0;
    case PXK_ROW: return v >= prog->image.h ? PX__REFUSE(PXE_OPERAND_ROW) : 0;
    case PXK_SLOT: return v >= prog->nslots ? PX__REFUSE(PXE_OPERAND_SLOT) : 0;
    case PXK_MASK: return v >= prog->nslots ? PX__REFUSE(PXE_OPERAND_MASK) : 0;
    case PXK_MODE:
        return (v & ~(int32_t)PX_MODE_VALID_BITS) || (!(v & (int32_t)PX_MODE_RELATIVE) && (v >> PX_MODE_REG_SHIFT))
                   ? PX__REFUSE(PXE_OPERAND_MODE)
                   : 0;
    case PXK_FLAG: return v > 1 ? PX__REFUSE(PXE_OPERAND_FLAG) : 0;
    case PXK_REG: return v >= PX_FIX_REGS ? PX__REFUSE(PXE_OPERAND_REG) : 0;
    case PXK_LEVEL: return v >= PXVM_MAX_LEVELS ? PX__REFUSE(PXE_OPERAND_LEVEL) : 0;
    case PXK_DIM: return v < 1 ? PX__REFUSE(PXE_OPERAND_DIM) : 0;
    case PXK_TAPS: return v < 1 || v > PX_MAX_TAPS ? PX__REFUSE(PXE_OPERAND_TAPS) : 0;
    case PXK_U8:
    case PXK_U16:
    case PXK_Q16:
    case PXK_LOD: break;
    }
#undef PX__REFUSE
    return 0;
}

/* A w x h rectangle at (x, y) of slot s, written by an instruction. */
static int px__check_write(const pxvm_program *prog, const pxi_insn *in, uint32_t index, int pixel, int slot, int x,
                           int y, int w, int h, pxvm_error *err)
{
    char lb[16];
    const pxvm_slot *s = &prog->slots[slot];
    if (s->role == PXI_ROLE_INPUT || s->role == PXI_ROLE_DATA)
        return pxvm_fail(err, PXE_WRITE_READ_ONLY, PX__INSN_AT(prog, in, index, pixel),
                         pxvm_slot_label(prog, slot, lb), pxi_role_name(s->role));
    if (x + w > s->w || y + h > s->h)
        return pxvm_fail(err, PXE_WRITE_OUTSIDE, PX__INSN_AT(prog, in, index, pixel), x, y, w, h,
                         pxvm_slot_label(prog, slot, lb), s->w, s->h);
    /* The header and code are never written: the program decoded at load stays the program. */
    if (slot == 0 && (uint64_t)y * (uint64_t)prog->image.w + (uint64_t)x < prog->code_end)
        return pxvm_fail(err, PXE_WRITE_CODE, PX__INSN_AT(prog, in, index, pixel), x, y, w, h, prog->code_end - 1);
    return 0;
}

/* The tile mask of an incremental SAMPLE/ANISO/GATHER (0: none): its MASK operand. */
static int px__fetch_mask(const pxi_insn *in) { return pxi_mask_of(in); }

int pxvm_fetch_mask(const pxi_insn *in) { return px__fetch_mask(in); }

int pxvm_fetch_differs(const pxvm_program *a, const pxvm_program *b, uint32_t i)
{
    const pxi_insn *x = &a->insns[i], *y = &b->insns[i];
    if (x->nfields != y->nfields || memcmp(x->a, y->a, sizeof(int32_t) * x->nfields))
        return 1;
    if (y->op != PX_OP_GATHER || !px__fetch_mask(y))
        return 0;
    /* an incremental GATHER's table lies in a data slot (V rule): entry (i, j) is the 3 pixels at
     * (data_x + table_x + 3i, data_y + table_y + j) of the program image */
    const pxvm_slot *ta = &a->slots[PX_ARG(x, GATHER, table)], *tb = &b->slots[PX_ARG(y, GATHER, table)];
    int tx = PX_ARG(y, GATHER, table_x), ty = PX_ARG(y, GATHER, table_y), w = PX_ARG(y, GATHER, w), h = PX_ARG(y, GATHER, h);
    size_t row = (size_t)w * 3u * 4u;
    for (int j = 0; j < h; j++) {
        const uint8_t *pa = a->image.px + (((size_t)ta->data_y + (size_t)ty + (size_t)j) * (size_t)a->image.w + (size_t)ta->data_x + (size_t)tx) * 4u;
        const uint8_t *pb = b->image.px + (((size_t)tb->data_y + (size_t)ty + (size_t)j) * (size_t)b->image.w + (size_t)tb->data_x + (size_t)tx) * 4u;
        if (memcmp(pa, pb, row))
            return 1;
    }
    return 0;
}

int pxvm_insn_slots(const pxi_insn *in, uint32_t set, int *slots)
{
    int n = 0;
    if (set & PXF_PROG)
        slots[n++] = 0;
    for (int f = 0, nf = pxi_op(in->op)->nfields; f < nf; f++)
        if (set >> f & 1u)
            slots[n++] = in->a[f];
    return n;
}

/* Marks the slots named by the operands of `set`. */
static void px__mark_slots(const pxi_insn *in, uint32_t set, uint8_t *slots)
{
    int list[PXI_MAX_FIELDS + 1];
    for (int i = 0, n = pxvm_insn_slots(in, set, list); i < n; i++)
        slots[list[i]] = 1;
}

void pxvm_insn_reads(const pxi_insn *in, uint8_t *reads) { px__mark_slots(in, pxi_facts(in->op)->reads, reads); }

void pxvm_insn_writes(const pxi_insn *in, uint8_t *writes) { px__mark_slots(in, pxi_facts(in->op)->writes, writes); }

void pxvm_insn_reads_upper(const pxi_insn *in, uint8_t *reads)
{
    const pxi_op_info *op = pxi_op(in->op);
    int level_above_0 = !op->facts.levels;
    for (int f = 0; f < op->nfields; f++)
        level_above_0 |= op->fields[f].kind == PXK_LEVEL && in->a[f] > 0;
    if (level_above_0)
        px__mark_slots(in, op->facts.upper, reads);
}

/* A tile mask of slot `of`: level 0 is ceil(w/16) x ceil(h/16). */
static int px__check_mask(const pxvm_program *prog, const pxi_insn *in, uint32_t index, int mask, int of,
                          pxvm_error *err)
{
    char la[16], lb[16];
    const pxvm_slot *m = &prog->slots[mask], *s = &prog->slots[of];
    if (m->w != px_tiles(s->w) || m->h != px_tiles(s->h))
        return pxvm_fail(err, PXE_MASK_TILES, PX__INSN_AT(prog, in, index, 0),
                         pxvm_slot_label(prog, mask, la), m->w, m->h, pxvm_slot_label(prog, of, lb), s->w, s->h,
                         px_tiles(s->w), px_tiles(s->h));
    return 0;
}

/* Any-size slots are read only where the resolution can rescale what the reader assumes of
 * their size (SPEC V-ANY-6): the anysize operands of opcodes.def (PYRAMID's slot, a
 * non-incremental SAMPLE's or ANISO's src, RESIZE's src). Every other operand naming one
 * (GATHER's table positions, DIFF, UPDATE, SALIENCY, ARGMAX, a tile mask) would be written for
 * the reference size only. */
static int px__check_any_readers(const pxvm_program *prog, const pxi_insn *in, uint32_t index, pxvm_error *err)
{
    const pxi_op_info *op = pxi_op(in->op);
    char la[16];
    for (int f = 0; f < op->nfields; f++) {
        int v = in->a[f];
        if ((op->fields[f].kind != PXK_SLOT && op->fields[f].kind != PXK_MASK) || v < 1 ||
            !(prog->slots[v].flags & PXI_SLOT_ANYSIZE))
            continue;
        int reader = op->facts.anysize >> f & 1u;
        if (reader && (op->facts.flags & PXA_ANY_UNMASKED) && pxi_mask_of(in))
            return pxvm_fail(err, PXE_ANY_INCREMENTAL, PX__INSN_AT(prog, in, index, 0), pxvm_slot_label(prog, v, la),
                             pxi_mask_of(in));
        if (reader)
            continue;
        return pxvm_fail(err, PXE_ANY_READER, PX__INSN_AT(prog, in, index, 0), op->fields[f].name,
                         pxvm_slot_label(prog, v, la));
    }
    return 0;
}

/* Whether px_vm_check_insn's verdict on `in`, in a program that passed it, can change when the
 * slots marked in `resized` change their size (and levels) and nothing else: a resolution
 * re-checks only those instructions. An instruction that may read an any-size slot (opcodes.def
 * anysize: SAMPLE and ANISO without a tile mask, RESIZE, PYRAMID) reads of its source its
 * identity and role, never its size (a tile mask, which would, is refused for an any-size source:
 * px__check_any_readers; one present counts as read); its destination is never an input. Keep
 * in step with the family rules below: when unsure, 1. */
int px_vm_insn_rules_read_size(const pxi_insn *in, const uint8_t *resized)
{
    const pxi_op_facts *f = pxi_facts(in->op);
    if (!f->anysize || pxi_mask_of(in))
        return 1;
    uint8_t written[PXVM_MAX_SLOTS + 1] = {0};
    pxvm_insn_writes(in, written);
    for (int k = 0; k <= PXVM_MAX_SLOTS; k++)
        if (written[k] && resized[k])
            return 1;
    return 0;
}

/* The rules of each family (SPEC V-*), one function each, named after the family of
 * opcodes.def; px_vm_check_insn's switch is generated from the table. */
static int px_vm_check_halt(const pxvm_program *prog, const pxi_insn *in, uint32_t index, pxvm_error *err)
{
    (void)prog, (void)in, (void)index, (void)err;
    return 0;
}

static int px_vm_check_dot(const pxvm_program *prog, const pxi_insn *in, uint32_t index, pxvm_error *err)
{
    int row = PX_ARG(in, DOT_RGB, row_out);
    return px__check_write(prog, in, index, 0, 0, 0, row, 1, 1, err);
}

static int px_vm_check_fetch(const pxvm_program *prog, const pxi_insn *in, uint32_t index, pxvm_error *err)
{
    char la[16], lb[16];
    int src = in->a[PX_FI(SAMPLE, src)], dst = in->a[PX_FI(SAMPLE, dst)];
    int x = in->a[PX_FI(SAMPLE, dst_x)], y = in->a[PX_FI(SAMPLE, dst_y)];
    int w = in->a[PX_FI(SAMPLE, w)], h = in->a[PX_FI(SAMPLE, h)];
    int mask = px__fetch_mask(in);
    if (src == dst)
        return pxvm_fail(err, PXE_FETCH_SAME_SLOT, PX__INSN_AT(prog, in, index, 0), pxvm_slot_label(prog, src, la));
    if (mask) {
        if (px__check_mask(prog, in, index, mask, src, err) < 0)
            return -1;
        if (!(prog->slots[dst].flags & PXI_SLOT_PERSIST))
            return pxvm_fail(err, PXE_FETCH_NOT_PERSISTENT, PX__INSN_AT(prog, in, index, 0),
                             pxvm_slot_label(prog, mask, la), pxvm_slot_label(prog, dst, lb));
        if (in->op == PX_OP_GATHER && prog->slots[PX_ARG(in, GATHER, table)].role != PXI_ROLE_DATA)
            return pxvm_fail(err, PXE_FETCH_TABLE_DATA, PX__INSN_AT(prog, in, index, 3),
                             pxvm_slot_label(prog, PX_ARG(in, GATHER, table), la));
    }
    if (px__check_write(prog, in, index, 1, dst, x, y, w, h, err) < 0)
        return -1;
    if (in->op == PX_OP_GATHER) {
        int t = PX_ARG(in, GATHER, table);
        int tx = PX_ARG(in, GATHER, table_x), ty = PX_ARG(in, GATHER, table_y);
        const pxvm_slot *ts = &prog->slots[t];
        if (t == dst)
            return pxvm_fail(err, PXE_GATHER_OWN_TABLE, PX__INSN_AT(prog, in, index, 3), pxvm_slot_label(prog, t, la));
        if ((int64_t)tx + 3 * (int64_t)w > ts->w || (int64_t)ty + h > ts->h)
            return pxvm_fail(err, PXE_GATHER_TABLE_OUTSIDE, PX__INSN_AT(prog, in, index, 4), tx, ty, 3 * w, h,
                             pxvm_slot_label(prog, t, lb), ts->w, ts->h);
    }
    return 0;
}

static int px_vm_check_pyramid(const pxvm_program *prog, const pxi_insn *in, uint32_t index, pxvm_error *err)
{
return PX_ARG(in, PYRAMID, mask) ? px__check_mask(prog, in, index, PX_ARG(in, PYRAMID, mask),
                                                      PX_ARG(in, PYRAMID, slot), err)
                                     : 0;
}

static int px_vm_check_video(const pxvm_program *prog, const pxi_insn *in, uint32_t index, pxvm_error *err)
{
    char la[16], lb[16];
    int frame = in->a[PX_FI(DIFF, frame)], cur = in->a[PX_FI(DIFF, cur)], mask = in->a[PX_FI(DIFF, mask)];
    const pxvm_slot *fs = &prog->slots[frame], *cs = &prog->slots[cur];
    if (frame == cur)
        return pxvm_fail(err, PXE_VIDEO_SAME_SLOT, PX__INSN_AT(prog, in, index, 0), pxvm_slot_label(prog, cur, la));
    if (fs->w != cs->w || fs->h != cs->h)
        return pxvm_fail(err, PXE_VIDEO_SIZES, PX__INSN_AT(prog, in, index, 0),
                         pxvm_slot_label(prog, frame, la), fs->w, fs->h, pxvm_slot_label(prog, cur, lb), cs->w, cs->h);
    if (mask == frame || mask == cur)
        return pxvm_fail(err, PXE_VIDEO_MASK_OWN, PX__INSN_AT(prog, in, index, 0));
    if (px__check_mask(prog, in, index, mask, cur, err) < 0)
        return -1;
    if (pxi_facts(in->op)->plan == PXP_DIFF)
        return px__check_write(prog, in, index, 0, mask, 0, 0, prog->slots[mask].w, prog->slots[mask].h, err);
    if (px__check_write(prog, in, index, 0, cur, 0, 0, cs->w, cs->h, err) < 0)
        return -1;
    if (!(cs->flags & PXI_SLOT_PERSIST))
        return pxvm_fail(err, PXE_UPDATE_NOT_PERSISTENT, PX__INSN_AT(prog, in, index, 0), pxvm_slot_label(prog, cur, la));
    return 0;
}

static int px_vm_check_saliency(const pxvm_program *prog, const pxi_insn *in, uint32_t index, pxvm_error *err)
{
    char la[16], lb[16];
    int src = PX_ARG(in, SALIENCY, src), dst = PX_ARG(in, SALIENCY, dst);
    int c = PX_ARG(in, SALIENCY, centre), sl = PX_ARG(in, SALIENCY, surround), m = PX_ARG(in, SALIENCY, map);
    const pxvm_slot *ss = &prog->slots[src], *ds = &prog->slots[dst];
    if (src == dst)
        return pxvm_fail(err, PXE_SALIENCY_SAME_SLOT, PX__INSN_AT(prog, in, index, 0), pxvm_slot_label(prog, src, la));
    if (!(c < sl))
        return pxvm_fail(err, PXE_SALIENCY_ORDER, PX__INSN_AT(prog, in, index, 1), c, sl);
    if (sl >= ss->levels || m >= ss->levels)
        return pxvm_fail(err, PXE_SALIENCY_LEVELS, PX__INSN_AT(prog, in, index, 1), sl > m ? sl : m, ss->levels,
                         pxvm_slot_label(prog, src, la));
    if (m < c)
        return pxvm_fail(err, PXE_SALIENCY_MAP_LEVEL, PX__INSN_AT(prog, in, index, 1), m, c);
    if (PX_ARG(in, SALIENCY, shift) > 20)
        return pxvm_fail(err, PXE_SALIENCY_SHIFT, PX__INSN_AT(prog, in, index, 1), PX_ARG(in, SALIENCY, shift));
    int mw = px_mip_dim(ss->w, m), mh = px_mip_dim(ss->h, m);
    if (ds->w != mw || ds->h != mh)
        return pxvm_fail(err, PXE_SALIENCY_MAP_SIZE, PX__INSN_AT(prog, in, index, 0),
                         pxvm_slot_label(prog, dst, la), ds->w, ds->h, m, pxvm_slot_label(prog, src, lb), mw, mh);
    return px__check_write(prog, in, index, 0, dst, 0, 0, ds->w, ds->h, err);
}

static int px_vm_check_resize(const pxvm_program *prog, const pxi_insn *in, uint32_t index, pxvm_error *err)
{
    char la[16];
    int src = PX_ARG(in, RESIZE, src), dst = PX_ARG(in, RESIZE, dst), fit = PX_ARG(in, RESIZE, fit);
    if (PX_ARG(in, RESIZE, filter) >= PX_RESIZE__FILTERS)
        return pxvm_fail(err, PXE_RESIZE_FILTER_OPERAND,
                         PX__OPERAND_AT(prog, in, index, PX__FIELD(in, PX_FI(RESIZE, filter)), PX_ARG(in, RESIZE, filter)),
                         PX_RESIZE_FILTER_TEXT);
    if (fit > 1)
        return pxvm_fail(err, PXE_RESIZE_FIT_OPERAND, PX__OPERAND_AT(prog, in, index, PX__FIELD(in, PX_FI(RESIZE, fit)), fit));
    for (int f = PX_FI(RESIZE, pad_r); !fit && f <= PX_FI(RESIZE, pad_a); f++)
        if (in->a[f])
            return pxvm_fail(err, PXE_RESIZE_PAD_OPERAND, PX__OPERAND_AT(prog, in, index, PX__FIELD(in, f), in->a[f]));
    if (src == dst)
        return pxvm_fail(err, PXE_RESIZE_SAME_SLOT, PX__INSN_AT(prog, in, index, 0), pxvm_slot_label(prog, src, la));
    return px__check_write(prog, in, index, 1, dst, PX_ARG(in, RESIZE, dst_x), PX_ARG(in, RESIZE, dst_y),
                           PX_ARG(in, RESIZE, w), PX_ARG(in, RESIZE, h), err);
}

static int px_vm_check_argmax(const pxvm_program *prog, const pxi_insn *in, uint32_t index, pxvm_error *err)
{
    char la[16];
    int src = PX_ARG(in, ARGMAX, src), level = PX_ARG(in, ARGMAX, level);
    if (level >= prog->slots[src].levels)
        return pxvm_fail(err, PXE_ARGMAX_LEVEL, PX__INSN_AT(prog, in, index, 0), level, prog->slots[src].levels,
                         pxvm_slot_label(prog, src, la));
    if (PX_ARG(in, ARGMAX, ior_first) + PX_ARG(in, ARGMAX, ior_count) > PX_FIX_REGS)
        return pxvm_fail(err, PXE_ARGMAX_REGISTERS, PX__INSN_AT(prog, in, index, 2), PX_ARG(in, ARGMAX, ior_first),
                         PX_ARG(in, ARGMAX, ior_first) + PX_ARG(in, ARGMAX, ior_count) - 1);
    if (PX_ARG(in, ARGMAX, radius) > 16384)
        return pxvm_fail(err, PXE_ARGMAX_RADIUS, PX__INSN_AT(prog, in, index, 3), PX_ARG(in, ARGMAX, radius));
    return 0;
}

/* EMBED: texel (i, j) of data slot k as a little-endian u32, and the pixel of the program image
 * holding it (what a refusal names). */
static uint32_t px__data_u32(const pxvm_program *prog, int k, int i, int j, int *x, int *y)
{
    const pxvm_slot *s = &prog->slots[k];
    *x = s->data_x + i, *y = s->data_y + j;
    const uint8_t *p = prog->image.px + ((size_t)*y * (size_t)prog->image.w + (size_t)*x) * 4u;
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* EMBED (SPEC V-EMBED-*): the shapes follow from the atlas and d; the weights and parameters are
 * data slots, so every bound on the values they hold is checked here, at load. */
static int px_vm_check_embed(const pxvm_program *prog, const pxi_insn *in, uint32_t index, pxvm_error *err)
{
    char la[16], lb[16];
    int src = PX_ARG(in, EMBED, src), dst = PX_ARG(in, EMBED, dst), mode = PX_ARG(in, EMBED, mode);
    int wk = PX_ARG(in, EMBED, weights), pk = PX_ARG(in, EMBED, params), c = PX_ARG(in, EMBED, channels);
    int d = PX_ARG(in, EMBED, d), out_zero = PX_ARG(in, EMBED, out_zero);
    if (mode > PX_EMBED_MODE_BF16)
        return pxvm_fail(err, PXE_EMBED_MODE, PX__OPERAND_AT(prog, in, index, PX__FIELD(in, PX_FI(EMBED, mode)), mode));
    if (c != 1 && c != 3 && c != 4)
        return pxvm_fail(err, PXE_EMBED_CHANNELS, PX__OPERAND_AT(prog, in, index, PX__FIELD(in, PX_FI(EMBED, channels)), c));
    if (mode != PX_EMBED_MODE_I8 && out_zero)
        return pxvm_fail(err, PXE_EMBED_OUT_ZERO,
                         PX__OPERAND_AT(prog, in, index, PX__FIELD(in, PX_FI(EMBED, out_zero)), out_zero));
    const pxvm_slot *ss = &prog->slots[src], *ws = &prog->slots[wk], *ps = &prog->slots[pk], *ds = &prog->slots[dst];
    if (src == dst)
        return pxvm_fail(err, PXE_EMBED_SAME_SLOT, PX__INSN_AT(prog, in, index, 0), pxvm_slot_label(prog, src, la));
    if (!ss->patch_w)
        return pxvm_fail(err, PXE_EMBED_NOT_ATLAS, PX__INSN_AT(prog, in, index, 0), pxvm_slot_label(prog, src, la));
    if (ws->role != PXI_ROLE_DATA || ps->role != PXI_ROLE_DATA)
        return pxvm_fail(err, PXE_EMBED_DATA_SLOTS, PX__INSN_AT(prog, in, index, 1), pxvm_slot_label(prog, wk, la),
                         pxvm_slot_label(prog, pk, lb));
    int64_t k = (int64_t)c * ss->patch_w * ss->patch_h;
    int rows = mode == PX_EMBED_MODE_I32 ? 1 : 3;
    if (ws->w != (k + 3) / 4 || ws->h != d)
        return pxvm_fail(err, PXE_EMBED_WEIGHTS_SIZE, PX__INSN_AT(prog, in, index, 1),
                         pxvm_slot_label(prog, wk, la), ws->w, ws->h, c, ss->patch_w, ss->patch_h, (long long)k, d,
                         (long long)(k + 3) / 4, d);
    if (ps->w != d || ps->h < rows)
        return pxvm_fail(err, PXE_EMBED_PARAMS_SIZE, PX__INSN_AT(prog, in, index, 1),
                         pxvm_slot_label(prog, pk, la), ps->w, ps->h, mode, d, d, rows);
    int64_t row_texels = ((int64_t)d * px_embed_out_bytes(mode) + 3) / 4;
    if (ds->w != row_texels || ds->h != ss->patch_count)
        return pxvm_fail(err, PXE_EMBED_DST_SIZE, PX__INSN_AT(prog, in, index, 0),
                         pxvm_slot_label(prog, dst, la), ds->w, ds->h, ss->patch_count, d, mode,
                         (long long)row_texels, ss->patch_count);
    if (px__check_write(prog, in, index, 0, dst, 0, 0, ds->w, ds->h, err) < 0)
        return -1;
    /* every accumulator fits int32: |acc| <= K * 255 * 128 + |bias| (V-EMBED-9); an int8 output
     * shifted left keeps it so (V-EMBED-12) */
    int64_t terms = k * PX_EMBED_TERM_MAX;
    const char *op = pxi_op(in->op)->name; /* the refusals below name the parameter's pixel, not the opcode's */
    for (int j = 0; j < d; j++) {
        int x, y;
        int32_t bias = (int32_t)px__data_u32(prog, pk, j, 0, &x, &y);
        int64_t bound = terms + (bias < 0 ? -(int64_t)bias : bias);
        if (bound > INT32_MAX)
            return pxvm_fail(err, PXE_EMBED_BIAS, x, y, index, op, j, (long long)k,
                             (long long)(bias < 0 ? -(int64_t)bias : bias), (long long)bound);
        if (rows == 1)
            continue;
        uint32_t m = px__data_u32(prog, pk, j, 1, &x, &y);
        if (m > (uint32_t)INT32_MAX)
            return pxvm_fail(err, PXE_EMBED_MULTIPLIER, x, y, index, op, j, (unsigned long)m);
        int32_t shift = (int32_t)px__data_u32(prog, pk, j, 2, &x, &y);
        if (shift < PX_EMBED_SHIFT_MIN || shift > PX_EMBED_SHIFT_MAX)
            return pxvm_fail(err, PXE_EMBED_SHIFT, x, y, index, op, j, (long)shift);
        if (mode == PX_EMBED_MODE_I8 && shift > 0 && (bound << shift) > INT32_MAX)
            return pxvm_fail(err, PXE_EMBED_SHIFT_BOUND, x, y, index, op, j, (long)shift,
                             (long long)bound);
    }
    return 0;
}

/* A fused EMBED (SPEC A-FUSE-2..6): its atlas is a scratch slot, not persistent, written only by
 * SAMPLE, ANISO and GATHER before it, and read by it alone; so the atlas's level 0 is seen by
 * nothing but that EMBED, and the sampler may hand it the tokens directly. (A fetch with a tile
 * mask writes a persistent slot only, V-FETCH-2: the atlas is never an incremental one's.) */
int pxvm_embed_fusable(const pxvm_program *prog, uint32_t index, pxvm_error *err)
{
    const pxi_insn *e = &prog->insns[index];
    int src = PX_ARG(e, EMBED, src);
    const pxvm_slot *s = &prog->slots[src];
    char la[16];
    pxvm_slot_label(prog, src, la);
    if (s->role != PXI_ROLE_SCRATCH)
        return pxvm_fail(err, PXE_FUSE_ATLAS_ROLE, PX__INSN_AT(prog, e, index, 0), la, pxi_role_name(s->role));
    if (s->flags & PXI_SLOT_PERSIST)
        return pxvm_fail(err, PXE_FUSE_ATLAS_PERSISTENT, PX__INSN_AT(prog, e, index, 0), la);
    for (uint32_t i = 0; i < prog->ninsns; i++) {
        const pxi_insn *in = &prog->insns[i];
        uint8_t reads[PXVM_MAX_SLOTS + 1] = {0}, writes[PXVM_MAX_SLOTS + 1] = {0};
        pxvm_insn_reads(in, reads);
        pxvm_insn_writes(in, writes);
        const char *op = pxi_op(in->op)->name;
        if (writes[src] && !px_vm_is_fetch(in))
            return pxvm_fail(err, PXE_FUSE_WRITER, PX__INSN_AT(prog, e, index, 0), la, i, op);
        if (writes[src] && i > index)
            return pxvm_fail(err, PXE_FUSE_WRITER_AFTER, PX__INSN_AT(prog, e, index, 0), la, i, op);
        if (reads[src] && i != index)
            return pxvm_fail(err, PXE_FUSE_READER, PX__INSN_AT(prog, e, index, 0), la, i, op);
    }
    return 0;
}

int pxvm_embed_fusion(const pxvm_program *prog, uint8_t *fused, pxvm_error *err)
{
    int n = 0, first = -1;
    pxvm_error why;
    memset(fused, 0, prog->ninsns);
    for (uint32_t i = 0; i < prog->ninsns; i++) {
        if (prog->insns[i].op != PX_OP_EMBED)
            continue;
        if (pxvm_embed_fusable(prog, i, first < 0 ? &why : err) == 0)
            fused[i] = 1, n++;
        if (first < 0)
            first = (int)i;
    }
    if (n)
        return n;
    if (first < 0)
        return pxvm_fail(err, PXE_FUSE_NO_EMBED, -1, -1);
    *err = why;
    return -1;
}

int pxvm_embed_tokens_covered(const pxvm_program *prog, uint32_t index)
{
    int src = PX_ARG(&prog->insns[index], EMBED, src);
    const pxvm_slot *a = &prog->slots[src];
    size_t n = (size_t)a->w * (size_t)a->h;
    uint8_t *hit = calloc(n ? n : 1, 1);
    if (!hit)
        return 0;
    for (uint32_t i = 0; i < prog->ninsns; i++) { /* fetches share SAMPLE's leading layout */
        const pxi_insn *in = &prog->insns[i];
        if (!px_vm_is_fetch(in) || in->a[PX_FI(SAMPLE, dst)] != src)
            continue;
        int x0 = in->a[PX_FI(SAMPLE, dst_x)], y0 = in->a[PX_FI(SAMPLE, dst_y)];
        int w = in->a[PX_FI(SAMPLE, w)], h = in->a[PX_FI(SAMPLE, h)];
        for (int y = y0 < 0 ? 0 : y0; y < y0 + h && y < a->h; y++)
            for (int x = x0 < 0 ? 0 : x0; x < x0 + w && x < a->w; x++)
                hit[(size_t)y * (size_t)a->w + (size_t)x] = 1;
    }
    int all = a->patch_w > 0 && a->patch_h > 0, cols = all ? a->w / a->patch_w : 1;
    for (int t = 0; t < a->patch_count && all; t++) { /* token t: patch (t % cols, t / cols) */
        int px0 = (t % cols) * a->patch_w, py0 = (t / cols) * a->patch_h;
        for (int y = py0; y < py0 + a->patch_h && all; y++)
            for (int x = px0; x < px0 + a->patch_w && all; x++)
                all = x < a->w && y < a->h && hit[(size_t)y * (size_t)a->w + (size_t)x];
    }
    free(hit);
    return all;
}

int px_vm_check_insn(const pxvm_program *prog, const pxi_insn *in, uint32_t index, pxvm_error *err)
{
    if (prog->any_size && px__check_any_readers(prog, in, index, err) < 0)
        return -1;
    switch (in->op) {
#define PX_FACTS(name, family, plan, reads, writes, upper, anysize, flags) \
    case PX_OP_##name: return px_vm_check_##family(prog, in, index, err);
#include "../isa/opcodes.def"
    default: return 0;
    }
}

int px_vm_check_insn_memory(pxvm_program *prog, const pxvm_limits *lim, pxvm_error *err)
{
    for (uint32_t i = 0; i < prog->ninsns; i++) {
        const pxi_insn *in = &prog->insns[i];
        const pxvm_slot *s;
        int cw = 0, ch = 0, rows = 0, filter = 0;
        int64_t k = 0;
        uint64_t need;
        if (in->op == PX_OP_RESIZE) {
            s = &prog->slots[PX_ARG(in, RESIZE, src)], filter = PX_ARG(in, RESIZE, filter);
            need = px_resize_need(s->w, s->h, PX_ARG(in, RESIZE, w), PX_ARG(in, RESIZE, h), PX_ARG(in, RESIZE, fit),
                                  filter, &cw, &ch, &rows);
        } else if (in->op == PX_OP_EMBED) {
            s = &prog->slots[PX_ARG(in, EMBED, src)];
            k = (int64_t)PX_ARG(in, EMBED, channels) * s->patch_w * s->patch_h;
            need = px_embed_need(k, PX_ARG(in, EMBED, d), s->patch_count);
        } else {
            continue;
        }
        prog->memory += need; /* one running total: the slots', then every RESIZE's and EMBED's */
        if (prog->memory <= lim->max_memory)
            continue;
        int x, y;
        pxvm_stream_xy(prog, in->pc, &x, &y);
        if (in->op == PX_OP_RESIZE)
            return pxvm_fail(err, PXE_RESIZE_MEMORY, x, y, i, s->w, s->h, cw, ch, px_resize_filter_name(filter),
                             (unsigned long long)need, cw, rows, (unsigned long long)prog->memory,
                             (unsigned long long)lim->max_memory);
        return pxvm_fail(err, PXE_EMBED_MEMORY, x, y, i, (long long)k, PX_ARG(in, EMBED, d), s->patch_count,
                         (unsigned long long)need, (unsigned long long)prog->memory, (unsigned long long)lim->max_memory);
    }
    return 0;
}
