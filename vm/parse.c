/* program.c - .pxi parsing and validation (everything is checked here, once, before any run),
 * the launch plan, and the table-driven instruction printer. */
#include "loader.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "../isa/px_sem.h"

static uint32_t px__u32(const pxvm_image *img, uint32_t index) { return pxi_read_le(PX_VM_PIX(img, index), 0, 0, 4); }

/* Stream pixel coordinates for error messages, before prog->image is set. */
#define PX__AT(img, i) (int)((i) % (uint32_t)(img)->w), (int)((i) / (uint32_t)(img)->w)

void pxvm_insn_decode(const uint8_t *pixels, uint32_t pc, const pxi_op_info *op, pxi_insn *out)
{
    memset(out, 0, sizeof *out);
    out->op = op->value;
    out->npix = op->pixels;
    out->nfields = op->nfields;
    out->pc = pc;
    for (int f = 0; f < op->nfields; f++) {
        const pxi_field_info *fi = &op->fields[f];
        uint32_t raw = pxi_read_le(pixels, fi->pixel, fi->channel, fi->bytes);
        out->a[f] = fi->kind == PXK_Q16 ? px_entry_q16(raw) : (int32_t)raw;
    }
}

static int px__name_char(int c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'; }

static int px__parse_slot(const pxvm_image *img, int k, const pxvm_limits *lim, pxvm_program *prog, pxvm_error *err)
{
    pxvm_slot *s = &prog->slots[k];
    uint32_t d = (uint32_t)(PXI_HEADER_PIXELS + PXI_SLOT_PIXELS * (k - 1));
    const uint8_t *p0 = PX_VM_PIX(img, d);
    s->desc_pixel = (int)d;
    s->role = p0[0];
    if (s->role < PXI_ROLE_INPUT || s->role > PXI_ROLE_LAST)
        return pxvm_fail(err, PXE_SLOT_ROLE, PX__AT(img, d), k, s->role);

    /* name first, so that later messages can use it */
    const uint8_t *nm = PX_VM_PIX(img, d + 6);
    int len = 0;
    while (len < PXI_NAME_MAX && nm[len])
        len++;
    for (int i = len; i < PXI_NAME_MAX; i++)
        if (nm[i])
            return pxvm_fail(err, PXE_SLOT_NAME, PX__AT(img, d + 6), k, "has bytes after its NUL terminator");
    for (int i = 0; i < len; i++)
        if (!px__name_char(nm[i]))
            return pxvm_fail(err, PXE_SLOT_NAME, PX__AT(img, d + 6), k, "may only use a-z, 0-9 and _");
    if (len && nm[0] >= '0' && nm[0] <= '9')
        return pxvm_fail(err, PXE_SLOT_NAME, PX__AT(img, d + 6), k, "must not start with a digit (numbers name slots)");
    memcpy(s->name, nm, (size_t)len);
    s->name[len] = 0;
    if (!strcmp(s->name, "prog"))
        return pxvm_fail(err, PXE_SLOT_NAME, PX__AT(img, d + 6), k, "'prog' is the program image's own name");
    for (int j = 1; j < k; j++)
        if (len && !strcmp(prog->slots[j].name, s->name))
            return pxvm_fail(err, PXE_SLOT_NAME, PX__AT(img, d + 6), k, "repeats the name of an earlier slot");

    if ((p0[1] & ~PXI_SLOT_FLAGS) || p0[2] || p0[3])
        return pxvm_fail(err, PXE_SLOT_FIELD, PX__AT(img, d), k, s->name,
                         "flags other than 1 (persistent) and the reserved bytes must be 0");
    s->flags = p0[1];
    if ((s->flags & PXI_SLOT_PERSIST) && s->role != PXI_ROLE_OUTPUT && s->role != PXI_ROLE_SCRATCH)
        return pxvm_fail(err, PXE_SLOT_FIELD, PX__AT(img, d), k, s->name,
                         "only output and scratch slots can be persistent (inputs are bound, data is constant)");
    uint32_t w = px__u32(img, d + 1), h = px__u32(img, d + 2);
    if (w < 1 || h < 1 || w > lim->max_side || h > lim->max_side)
        return pxvm_fail(err, PXE_SLOT_SIDE, PX__AT(img, d + 1), k, s->name, w, h, lim->max_side);
    s->w = (int)w;
    s->h = (int)h;

    const uint8_t *po = PX_VM_PIX(img, d + 3);
    uint32_t dx = pxi_read_le(po, 0, 0, 2), dy = pxi_read_le(po, 0, 2, 2);
    if (s->role == PXI_ROLE_DATA) {
        if ((uint64_t)dx + w > (uint64_t)img->w || (uint64_t)dy + h > (uint64_t)img->h)
            return pxvm_fail(err, PXE_SLOT_FIELD, PX__AT(img, d + 3), k, s->name,
                             "its data rectangle does not lie inside the program image");
        s->data_x = (int)dx;
        s->data_y = (int)dy;
    } else if (dx || dy) {
        return pxvm_fail(err, PXE_SLOT_FIELD, PX__AT(img, d + 3), k, s->name, "only data slots have a data origin");
    }

    const uint8_t *pp = PX_VM_PIX(img, d + 4);
    uint32_t pw = pxi_read_le(pp, 0, 0, 2), ph = pxi_read_le(pp, 0, 2, 2), pc = px__u32(img, d + 5);
    if (pw || ph || pc) {
        if (!pw || !ph || !pc || pw > w || ph > h)
            return pxvm_fail(err, PXE_SLOT_FIELD, PX__AT(img, d + 4), k, s->name,
                             "patch size and count must all be >= 1 and the patch must fit the slot");
        if ((uint64_t)pc > (uint64_t)(w / pw) * (h / ph))
            return pxvm_fail(err, PXE_SLOT_FIELD, PX__AT(img, d + 5), k, s->name,
                             "patch count exceeds the patches that fit in the slot");
    }
    s->patch_w = (int)pw;
    s->patch_h = (int)ph;
    s->patch_count = (int)pc;
    return 0;
}

void px_vm_slot_geometry(pxvm_slot *s)
{
    s->levels = px_mip_levels(s->w, s->h);
    uint64_t off = 0;
    for (int l = 0; l < s->levels; l++) {
        s->level_offset[l] = off;
        off += (uint64_t)px_mip_dim(s->w, l) * (uint64_t)px_mip_dim(s->h, l) * 4u;
    }
    s->bytes = off;
}

/* ---- launch plan ---------------------------------------------------------------------------- */

#define PX__BATCH_MAX 1024 /* bounds the pairwise rectangle checks below */

static int px__rects_overlap(const pxi_insn *a, const pxi_insn *b)
{
    int ax = a->a[PX_FI(SAMPLE, dst_x)], ay = a->a[PX_FI(SAMPLE, dst_y)];
    int bx = b->a[PX_FI(SAMPLE, dst_x)], by = b->a[PX_FI(SAMPLE, dst_y)];
    return ax < bx + b->a[PX_FI(SAMPLE, w)] && bx < ax + a->a[PX_FI(SAMPLE, w)] && ay < by + b->a[PX_FI(SAMPLE, h)] &&
           by < ay + a->a[PX_FI(SAMPLE, h)];
}

int px_vm_build_plan(pxvm_program *prog, pxvm_error *err)
{
    prog->steps = malloc(sizeof(pxvm_step) * prog->ninsns);
    if (!prog->steps)
        return pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)(sizeof(pxvm_step) * prog->ninsns));
    uint8_t reads[PXVM_MAX_SLOTS + 1], writes[PXVM_MAX_SLOTS + 1];
    uint32_t i = 0;
    prog->nsteps = 0;
    while (i < prog->ninsns) {
        pxvm_step *st = &prog->steps[prog->nsteps++];
        st->first = i;
        st->count = 1;
        st->kind = PXVM_STEP_ONE;
        st->tiles_fuse = 0;
        if (!px_vm_is_fetch(&prog->insns[i])) {
            i++;
            continue;
        }
        memset(reads, 0, sizeof reads);
        memset(writes, 0, sizeof writes);
        uint32_t j = i;
        for (; j < prog->ninsns && j - i < PX__BATCH_MAX; j++) {
            const pxi_insn *in = &prog->insns[j];
            if (!px_vm_is_fetch(in))
                break;
            int src = in->a[PX_FI(SAMPLE, src)], dst = in->a[PX_FI(SAMPLE, dst)];
            int tab = in->op == PX_OP_GATHER ? PX_ARG(in, GATHER, table) : src, mask = pxvm_fetch_mask(in);
            if (reads[dst] || writes[src] || writes[tab] || writes[mask])
                break;
            int overlap = 0;
            if (writes[dst])
                for (uint32_t k = i; k < j && !overlap; k++)
                    overlap = prog->insns[k].a[PX_FI(SAMPLE, dst)] == dst && px__rects_overlap(&prog->insns[k], in);
            if (overlap)
                break;
            reads[src] = reads[tab] = reads[mask] = writes[dst] = 1;
        }
        st->count = j - i;
        st->kind = st->count > 1 ? PXVM_STEP_BATCH : PXVM_STEP_ONE;
        i = j;
    }
    for (uint32_t s = 0; s + 1 < prog->nsteps; s++) { /* DIFF, UPDATE (, PYRAMID) of the same slots */
        const pxi_insn *d = &prog->insns[prog->steps[s].first], *u = &prog->insns[prog->steps[s + 1].first];
        if (d->op != PX_OP_DIFF || u->op != PX_OP_UPDATE || PX_ARG(u, UPDATE, frame) != PX_ARG(d, DIFF, frame) ||
            PX_ARG(u, UPDATE, cur) != PX_ARG(d, DIFF, cur) || PX_ARG(u, UPDATE, mask) != PX_ARG(d, DIFF, mask))
            continue;
        const pxi_insn *p = s + 2 < prog->nsteps ? &prog->insns[prog->steps[s + 2].first] : NULL;
        prog->steps[s].tiles_fuse = p && p->op == PX_OP_PYRAMID && PX_ARG(p, PYRAMID, slot) == PX_ARG(d, DIFF, cur) &&
                                            PX_ARG(p, PYRAMID, mask) == PX_ARG(d, DIFF, mask)
                                        ? 3
                                        : 2;
    }
    return 0;
}

/* What each run must restore (see PXVM_RESET_*). */
int px_vm_build_reset(pxvm_program *prog, pxvm_error *err)
{
    prog->reset = calloc((size_t)prog->nslots, 1);
    if (!prog->reset)
        return pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)prog->nslots);
    uint8_t *read_upper = calloc((size_t)prog->nslots, 1), *rebuilt = calloc((size_t)prog->nslots, 1);
    if (!read_upper || !rebuilt) {
        free(read_upper);
        free(rebuilt);
        return pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)prog->nslots);
    }
    /* a DIFF writes every texel of its mask's level 0: when nothing reads the mask before, the
     * run need not clear it first (a video frame's only per-run reset) */
    uint8_t read[PXVM_MAX_SLOTS + 1] = {0}, written_whole[PXVM_MAX_SLOTS + 1] = {0};
    uint8_t upper_written[PXVM_MAX_SLOTS + 1] = {0}; /* only PYRAMID writes levels >= 1 */
    for (uint32_t i = 0; i < prog->ninsns; i++) {
        const pxi_insn *in = &prog->insns[i];
        if (in->op == PX_OP_DIFF && !read[PX_ARG(in, DIFF, mask)])
            written_whole[PX_ARG(in, DIFF, mask)] = 1;
        uint8_t r[PXVM_MAX_SLOTS + 1] = {0};
        pxvm_insn_reads(in, r);
        for (int k = 0; k < prog->nslots; k++)
            read[k] |= r[k];
        if (in->op == PX_OP_PYRAMID)
            upper_written[PX_ARG(in, PYRAMID, slot)] = 1;
        if (in->op == PX_OP_PYRAMID && !PX_ARG(in, PYRAMID, mask) && !read_upper[PX_ARG(in, PYRAMID, slot)])
            rebuilt[PX_ARG(in, PYRAMID, slot)] = 1; /* levels >= 1 fully rewritten before any read */
        if (px_vm_is_fetch(in))
            read_upper[in->a[PX_FI(SAMPLE, src)]] = 1;
        if (in->op == PX_OP_SALIENCY)
            read_upper[PX_ARG(in, SALIENCY, src)] = 1;
        if (in->op == PX_OP_ARGMAX && PX_ARG(in, ARGMAX, level) > 0)
            read_upper[PX_ARG(in, ARGMAX, src)] = 1;
        if (in->op == PX_OP_DOT_RGB || (px_vm_is_fetch(in) && in->a[PX_FI(SAMPLE, dst)] == 0))
            prog->reset[0] |= PXVM_RESET_LEVEL0; /* the program image is written */
        if (in->op == PX_OP_HALT)
            break;
    }
    for (int k = 0; k < prog->nslots; k++) {
        uint8_t role = prog->slots[k].role;
        if ((role == PXI_ROLE_OUTPUT || role == PXI_ROLE_SCRATCH) && !written_whole[k])
            prog->reset[k] |= PXVM_RESET_LEVEL0;
        if (upper_written[k] && !rebuilt[k]) /* levels nothing writes stay as loaded: zero */
            prog->reset[k] |= PXVM_RESET_UPPER;
        if (prog->slots[k].flags & PXI_SLOT_PERSIST)
            prog->reset[k] = 0; /* what a run leaves, the next one starts from */
    }
    free(read_upper);
    free(rebuilt);
    return 0;
}

/* The positions and levels an incremental instruction reads, before a fixation offset, decided
 * once here for both executors: SAMPLE and ANISO from their operands (px_patch_span,
 * px_lod_levels); GATHER from every entry of its table region (constant data). */
int px_vm_fetch_box(pxvm_program *prog, const pxi_insn *in, uint32_t i, pxvm_error *err)
{
    if (!prog->insn_box) {
        prog->insn_box = calloc(prog->ninsns, sizeof(pxvm_fetch_box));
        if (!prog->insn_box)
            return pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)prog->ninsns);
    }
    if (in->op != PX_OP_GATHER) {
        pxvm_fetch_box *b = &prog->insn_box[i];
        int taps = in->op == PX_OP_ANISO ? PX_ARG(in, ANISO, taps) : 1;
        px_patch_span(PX_ARG(in, SAMPLE, cu), PX_ARG(in, SAMPLE, du), PX_ARG(in, SAMPLE, w), taps,
                      in->op == PX_OP_ANISO ? PX_ARG(in, ANISO, tdu) : 0, &b->u_lo, &b->u_hi);
        px_patch_span(PX_ARG(in, SAMPLE, cv), PX_ARG(in, SAMPLE, dv), PX_ARG(in, SAMPLE, h), taps,
                      in->op == PX_OP_ANISO ? PX_ARG(in, ANISO, tdv) : 0, &b->v_lo, &b->v_hi);
        px_lod_levels((uint32_t)PX_ARG(in, SAMPLE, lod), px_mode_filter(PX_ARG(in, SAMPLE, mode)),
                      prog->slots[PX_ARG(in, SAMPLE, src)].levels, &b->lmin, &b->lmax);
        return 0;
    }
    int t = PX_ARG(in, GATHER, table), tx = PX_ARG(in, GATHER, table_x), ty = PX_ARG(in, GATHER, table_y);
    int w = PX_ARG(in, GATHER, w), h = PX_ARG(in, GATHER, h), filter = px_mode_filter(PX_ARG(in, GATHER, mode));
    const pxvm_slot *ts = &prog->slots[t], *ss = &prog->slots[PX_ARG(in, GATHER, src)];
    pxvm_fetch_box b = {INT64_MAX, INT64_MIN, INT64_MAX, INT64_MIN, 1 << 30, -1, 0};
    for (int j = 0; j < h; j++)
        for (int e = 0; e < w; e++) {
            const uint8_t *p = PX_VM_PIX(&prog->image, (size_t)(ts->data_y + ty + j) * (size_t)prog->image.w +
                                                         (size_t)(ts->data_x + tx + 3 * e));
            int64_t u = px_entry_q16(pxi_read_le(p, 0, 0, 4)), v = px_entry_q16(pxi_read_le(p, 1, 0, 4));
            int l0, l1;
            px_lod_levels(px_entry_lod(pxi_read_le(p, 2, 0, 4)), filter, ss->levels, &l0, &l1);
            b.u_lo = u < b.u_lo ? u : b.u_lo, b.u_hi = u > b.u_hi ? u : b.u_hi;
            b.v_lo = v < b.v_lo ? v : b.v_lo, b.v_hi = v > b.v_hi ? v : b.v_hi;
            b.lmin = l0 < b.lmin ? l0 : b.lmin, b.lmax = l1 > b.lmax ? l1 : b.lmax;
        }
    prog->insn_box[i] = b;
    return 0;
}

/* Which incremental fetches own their destination rectangle (pxvm_fetch_box.sole): no other
 * instruction writes level 0 of their destination there. Writers of a level 0: fetches (their
 * rectangle), SALIENCY (its map), DIFF (its mask), UPDATE (cur), DOT_RGB (the program image);
 * PYRAMID writes only levels >= 1. Fetch pairs are compared in order of (destination, top row),
 * each against those starting above its bottom; past a budget of comparisons (rows packed with
 * fetches), the rest count as not owning theirs: exact either way, only less work saved. */
typedef struct {
    int dst, top;
    uint32_t insn;
} px__fetch_key;

static int px__by_dst_row(const void *pa, const void *pb)
{
    const px__fetch_key *a = pa, *b = pb;
    return a->dst != b->dst ? (a->dst > b->dst) - (a->dst < b->dst) : (a->top > b->top) - (a->top < b->top);
}

int px_vm_fetch_sole(pxvm_program *prog, pxvm_error *err)
{
    uint8_t other[PXVM_MAX_SLOTS + 1] = {0}; /* level 0 written by something other than a fetch */
    uint32_t n = 0;
    for (uint32_t i = 0; i < prog->ninsns; i++) {
        const pxi_insn *o = &prog->insns[i];
        n += px_vm_is_fetch(o);
        if (o->op == PX_OP_SALIENCY)
            other[PX_ARG(o, SALIENCY, dst)] = 1;
        if (o->op == PX_OP_DIFF)
            other[PX_ARG(o, DIFF, mask)] = 1;
        if (o->op == PX_OP_UPDATE)
            other[PX_ARG(o, UPDATE, cur)] = 1;
        if (o->op == PX_OP_DOT_RGB)
            other[0] = 1;
    }
    px__fetch_key *order = malloc(sizeof *order * (n ? n : 1));
    uint8_t *shared = calloc(prog->ninsns, 1);
    if (!order || !shared) {
        free(order), free(shared);
        return pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)prog->ninsns * 13u);
    }
    n = 0;
    for (uint32_t i = 0; i < prog->ninsns; i++)
        if (px_vm_is_fetch(&prog->insns[i])) {
            px__fetch_key key = {prog->insns[i].a[PX_FI(SAMPLE, dst)], prog->insns[i].a[PX_FI(SAMPLE, dst_y)], i};
            order[n++] = key;
        }
    qsort(order, n, sizeof *order, px__by_dst_row);
    uint64_t budget = 16u * (uint64_t)n + 4096u;
    int gave_up = 0;
    for (uint32_t k = 0; k < n && !gave_up; k++) {
        const pxi_insn *a = &prog->insns[order[k].insn];
        int bottom = order[k].top + a->a[PX_FI(SAMPLE, h)];
        for (uint32_t m = k + 1; m < n && order[m].dst == order[k].dst && order[m].top < bottom; m++) {
            if (budget-- == 0) {
                gave_up = 1;
                break;
            }
            if (px__rects_overlap(a, &prog->insns[order[m].insn]))
                shared[order[k].insn] = shared[order[m].insn] = 1;
        }
    }
    for (uint32_t i = 0; i < prog->ninsns; i++)
        if (px_vm_is_fetch(&prog->insns[i]) && pxvm_fetch_mask(&prog->insns[i]))
            prog->insn_box[i].sole = !gave_up && !shared[i] && !other[prog->insns[i].a[PX_FI(SAMPLE, dst)]];
    free(order), free(shared);
    return 0;
}

/* Token geometry: which atlas token each sampling instruction writes (its rectangle is exactly
 * one tile of an atlas slot), and where each atlas slot's tokens start in the geometry table;
 * with it the per-instruction video facts (frame-only inputs, incremental fetch boxes). */
int px_vm_build_geometry(pxvm_program *prog, pxvm_error *err)
{
    prog->geom_base = malloc(sizeof(int) * (size_t)prog->nslots);
    prog->insn_token = malloc(sizeof(int32_t) * (size_t)prog->ninsns);
    if (!prog->geom_base || !prog->insn_token)
        return pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)prog->ninsns);
    prog->ngeom = 0;
    for (int k = 0; k < prog->nslots; k++) {
        prog->geom_base[k] = prog->slots[k].patch_count ? prog->ngeom : -1;
        prog->ngeom += prog->slots[k].patch_count;
    }
    prog->uses_fixation = prog->writes_fixation = 0;
    for (int k = 0; k < prog->nslots; k++)
        prog->uses_video |= (prog->slots[k].flags & PXI_SLOT_PERSIST) != 0;
    prog->frame_only = calloc((size_t)prog->nslots, 1);
    if (!prog->frame_only)
        return pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)prog->nslots);
    { /* inputs read as DIFF/UPDATE frames and by nothing else */
        uint8_t as_frame[PXVM_MAX_SLOTS + 1] = {0}, other[PXVM_MAX_SLOTS + 1] = {0};
        for (uint32_t i = 0; i < prog->ninsns; i++) {
            const pxi_insn *in = &prog->insns[i];
            uint8_t reads[PXVM_MAX_SLOTS + 1] = {0};
            pxvm_insn_reads(in, reads);
            int frame = in->op == PX_OP_DIFF || in->op == PX_OP_UPDATE ? in->a[PX_FI(DIFF, frame)] : -1;
            for (int k = 0; k < prog->nslots; k++)
                if (reads[k])
                    (k == frame ? as_frame : other)[k] = 1;
        }
        for (int k = 0; k < prog->nslots; k++)
            prog->frame_only[k] = prog->slots[k].role == PXI_ROLE_INPUT && as_frame[k] && !other[k];
    }
    for (uint32_t i = 0; i < prog->ninsns; i++) {
        const pxi_insn *in = &prog->insns[i];
        prog->insn_token[i] = -1;
        prog->uses_video |= in->op == PX_OP_DIFF || in->op == PX_OP_UPDATE ||
                            (in->op == PX_OP_PYRAMID && PX_ARG(in, PYRAMID, mask)) || (px_vm_is_fetch(in) && pxvm_fetch_mask(in));
        if (px_vm_is_fetch(in) && pxvm_fetch_mask(in) && px_vm_fetch_box(prog, in, i, err) < 0)
            return -1;
        prog->writes_fixation |= in->op == PX_OP_ARGMAX;
        prog->uses_fixation |= in->op == PX_OP_ARGMAX || in->op == PX_OP_SALIENCY;
        if (!px_vm_is_fetch(in))
            continue;
        prog->uses_fixation |= px_mode_reg(in->a[PX_FI(SAMPLE, mode)]) >= 0;
        const pxvm_slot *d = &prog->slots[in->a[PX_FI(SAMPLE, dst)]];
        int x = in->a[PX_FI(SAMPLE, dst_x)], y = in->a[PX_FI(SAMPLE, dst_y)];
        if (!d->patch_count || in->a[PX_FI(SAMPLE, w)] != d->patch_w || in->a[PX_FI(SAMPLE, h)] != d->patch_h ||
            x % d->patch_w || y % d->patch_h)
            continue;
        int t = (y / d->patch_h) * (d->w / d->patch_w) + x / d->patch_w;
        if (t < d->patch_count)
            prog->insn_token[i] = prog->geom_base[in->a[PX_FI(SAMPLE, dst)]] + t;
    }
    return 0;
}

/* ---- load ----------------------------------------------------------------------------------- */

int pxvm_program_from_image(pxvm_image *image, const pxvm_limits *lim, pxvm_program *prog, pxvm_error *err)
{
    memset(prog, 0, sizeof *prog);
    prog->image = *image;
    image->px = NULL;
    const pxvm_image *img = &prog->image;
    uint64_t total = (uint64_t)img->w * (uint64_t)img->h;
    if (total < PXI_HEADER_PIXELS) {
        pxvm_fail(err, PXE_HEADER_SHORT, -1, -1, (unsigned long long)PXI_HEADER_PIXELS, (unsigned long long)total);
        goto fail;
    }
    const uint8_t *p0 = PX_VM_PIX(img, 0), *p1 = PX_VM_PIX(img, 1);
    if (p0[0] != PXI_MAGIC_R || p0[1] != PXI_MAGIC_G || p0[2] != PXI_MAGIC_B || p0[3] != PXI_MAGIC_A) {
        pxvm_fail(err, PXE_BAD_MAGIC, PX__AT(img, 0), p0[0], p0[1], p0[2], p0[3]);
        goto fail;
    }
    if (p1[0] != PXI_VERSION_MAJOR || p1[1] > PXI_VERSION_MINOR) {
        pxvm_fail(err, PXE_BAD_VERSION, PX__AT(img, 1), p1[0], p1[1], PXI_VERSION_MAJOR, PXI_VERSION_MAJOR,
                  PXI_VERSION_MINOR);
        goto fail;
    }
    if (p1[3]) {
        pxvm_fail(err, PXE_HEADER_RESERVED, PX__AT(img, 1), "flags", p1[3]);
        goto fail;
    }
    int nslots = p1[2];
    uint64_t header_end = PXI_HEADER_PIXELS + (uint64_t)PXI_SLOT_PIXELS * (uint64_t)nslots;
    if (header_end > total) {
        pxvm_fail(err, PXE_HEADER_SHORT, PX__AT(img, 1), (unsigned long long)header_end, (unsigned long long)total);
        goto fail;
    }
    uint32_t code_start = px__u32(img, 2), ninsns = px__u32(img, 3), reserved = px__u32(img, 4);
    if (reserved) {
        pxvm_fail(err, PXE_HEADER_RESERVED, PX__AT(img, 4), "word 4", reserved);
        goto fail;
    }
    if (code_start < header_end) {
        pxvm_fail(err, PXE_CODE_START, PX__AT(img, 2), code_start, (unsigned)header_end);
        goto fail;
    }
    if (ninsns == 0) {
        pxvm_fail(err, PXE_NO_CODE, PX__AT(img, 3));
        goto fail;
    }
    if (ninsns > lim->max_insns) {
        pxvm_fail(err, PXE_TOO_MANY_INSNS, PX__AT(img, 3), ninsns, lim->max_insns);
        goto fail;
    }
    /* the program image itself must respect the limits a slot does */
    if ((uint32_t)img->w > lim->max_side || (uint32_t)img->h > lim->max_side) {
        pxvm_fail(err, PXE_SLOT_SIDE, -1, -1, 0, "prog", img->w, img->h, lim->max_side);
        goto fail;
    }

    prog->nslots = nslots + 1;
    prog->slots = calloc((size_t)prog->nslots, sizeof(pxvm_slot));
    if (!prog->slots) {
        pxvm_fail(err, PXE_NOMEM, -1, -1, 0ull);
        goto fail;
    }
    pxvm_slot *s0 = &prog->slots[0];
    s0->role = PXI_ROLE_PROGRAM;
    strcpy(s0->name, "prog");
    s0->w = img->w;
    s0->h = img->h;
    s0->desc_pixel = -1;
    for (int k = 1; k <= nslots; k++)
        if (px__parse_slot(img, k, lim, prog, err) < 0)
            goto fail;
    prog->memory = 0;
    for (int k = 0; k <= nslots; k++) {
        px_vm_slot_geometry(&prog->slots[k]);
        prog->memory += prog->slots[k].bytes;
    }
    if (prog->memory > lim->max_memory) {
        pxvm_fail(err, PXE_SLOT_MEMORY, -1, -1, (unsigned long long)prog->memory,
                  (unsigned long long)lim->max_memory);
        goto fail;
    }

    /* decode every instruction once, checking each operand against its kind */
    prog->insns = malloc(sizeof(pxi_insn) * ninsns);
    if (!prog->insns) {
        pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)(sizeof(pxi_insn) * ninsns));
        goto fail;
    }
    prog->code_start = code_start;
    uint64_t pc = code_start;
    for (uint32_t i = 0; i < ninsns; i++) {
        if (pc >= total) {
            pxvm_fail(err, PXE_CODE_SHORT, -1, -1, i, "?", 1u, (unsigned long long)total);
            goto fail;
        }
        unsigned value = PX_VM_PIX(img, pc)[0];
        const pxi_op_info *op = pxi_op(value);
        if (!op->name) {
            if (op->reserved_for && strcmp(op->reserved_for, "unassigned"))
                pxvm_fail(err, PXE_OPCODE_RESERVED, PX__AT(img, pc), i, value, op->reserved_for);
            else
                pxvm_fail(err, PXE_OPCODE_UNKNOWN, PX__AT(img, pc), i, value);
            goto fail;
        }
        if (pc + op->pixels > total) {
            pxvm_fail(err, PXE_CODE_SHORT, PX__AT(img, pc), i, op->name, (unsigned)op->pixels,
                      (unsigned long long)total);
            goto fail;
        }
        pxi_insn *in = &prog->insns[i];
        pxvm_insn_decode(PX_VM_PIX(img, pc), (uint32_t)pc, op, in);
        prog->ninsns = i + 1;
        for (int f = 0; f < op->nfields; f++)
            if (px_vm_check_field(prog, in, i, &op->fields[f], in->a[f], err) < 0)
                goto fail;
        pc += op->pixels;
    }
    prog->code_end = (uint32_t)pc;
    const pxi_insn *last = &prog->insns[ninsns - 1];
    if (last->op != PX_OP_HALT) {
        pxvm_fail(err, PXE_NO_HALT, PX__AT(img, last->pc), ninsns - 1, pxi_op(last->op)->name);
        goto fail;
    }
    /* rules that need the whole header and code: regions against slot sizes */
    for (uint32_t i = 0; i < ninsns; i++)
        if (px_vm_check_insn(prog, &prog->insns[i], i, err) < 0)
            goto fail;
    if (px_vm_build_plan(prog, err) < 0 || px_vm_build_reset(prog, err) < 0 || px_vm_build_geometry(prog, err) < 0 ||
        (prog->insn_box && px_vm_fetch_sole(prog, err) < 0))
        goto fail;
    return 0;
fail:
    pxvm_program_free(prog);
    return -1;
}

int pxvm_program_from_copy(const pxvm_image *image, const pxvm_limits *lim, pxvm_program *prog, pxvm_error *err)
{
    pxvm_image copy;
    memset(prog, 0, sizeof *prog);
    if (pxvm_image_alloc(&copy, image->w, image->h, err) < 0)
        return -1;
    memcpy(copy.px, image->px, (size_t)image->w * (size_t)image->h * 4u);
    return pxvm_program_from_image(&copy, lim, prog, err);
}

int pxvm_program_load(const char *path, const pxvm_limits *lim, pxvm_program *prog, pxvm_error *err)
{
    pxvm_image img;
    memset(prog, 0, sizeof *prog);
    if (pxvm_png_load(path, lim, &img, err) < 0)
        return -1;
    return pxvm_program_from_image(&img, lim, prog, err);
}

void pxvm_program_free(pxvm_program *prog)
{
    pxvm_image_free(&prog->image);
    free(prog->slots);
    free(prog->insns);
    free(prog->steps);
    free(prog->reset);
    free(prog->geom_base);
    free(prog->insn_box);
    free(prog->frame_only);
    free(prog->insn_token);
    memset(prog, 0, sizeof *prog);
}

/* ---- names and printing --------------------------------------------------------------------- */

/* Exact decimal of v / 2^frac (every such value has a finite decimal expansion). */
static void px__fmt_fixed(int64_t v, int frac, char *buf, size_t len)
{
    uint64_t m = v < 0 ? (uint64_t)(-(v + 1)) + 1 : (uint64_t)v;
    uint64_t ip = m >> frac, fp = m & ((1ull << frac) - 1);
    int n = snprintf(buf, len, "%s%" PRIu64, v < 0 ? "-" : "", ip);
    if (fp && n > 0 && (size_t)n + 2 < len) {
        buf[n++] = '.';
        while (fp && (size_t)n + 1 < len) {
            fp *= 10;
            buf[n++] = (char)('0' + (fp >> frac));
            fp &= (1ull << frac) - 1;
        }
        buf[n] = 0;
    }
}

void pxvm_insn_format(const pxvm_program *prog, const pxi_insn *in, char *buf, size_t len)
{
    const pxi_op_info *op = pxi_op(in->op);
    size_t n = (size_t)snprintf(buf, len, "%s", op->name ? op->name : "?");
    for (int f = 0; f < op->nfields && n < len; f++) {
        const pxi_field_info *fi = &op->fields[f];
        char val[48], lb[16];
        int32_t v = in->a[f];
        switch (fi->kind) {
        case PXK_ZERO: continue;
        case PXK_MASK:
            if (!v)
                continue; /* none: the default */
            /* fall through */
        case PXK_SLOT: snprintf(val, sizeof val, "%s", prog ? pxvm_slot_label(prog, v, lb) : "?"); break;
        case PXK_MODE:
            if (px_mode_reg(v) >= 0)
                snprintf(val, sizeof val, "%s@f%d", px_mode_filter(v) == PX_MODE_NEAREST ? "nearest" : "linear",
                         px_mode_reg(v));
            else
                snprintf(val, sizeof val, "%s", px_mode_filter(v) == PX_MODE_NEAREST ? "nearest" : "linear");
            break;
        case PXK_Q16: px__fmt_fixed(v, 16, val, sizeof val); break;
        case PXK_LOD: px__fmt_fixed(v, 8, val, sizeof val); break;
        case PXK_U8:
        case PXK_FLAG:
        case PXK_REG:
        case PXK_LEVEL:
        case PXK_ROW:
        case PXK_U16:
        case PXK_DIM:
        case PXK_TAPS: snprintf(val, sizeof val, "%d", (int)v); break;
        }
        n += (size_t)snprintf(buf + n, len - n, " %s=%s", fi->name, val);
    }
}

/* ---- executor helpers ----------------------------------------------------------------------- */

void pxvm_slot_initial(const pxvm_program *prog, int slot, uint8_t *dst)
{
    const pxvm_slot *s = &prog->slots[slot];
    size_t row = (size_t)s->w * 4u;
    if (s->role == PXI_ROLE_PROGRAM) {
        memcpy(dst, prog->image.px, row * (size_t)s->h);
    } else if (s->role == PXI_ROLE_DATA) {
        for (int y = 0; y < s->h; y++)
            memcpy(dst + row * (size_t)y,
                   prog->image.px + ((size_t)(s->data_y + y) * (size_t)prog->image.w + (size_t)s->data_x) * 4u, row);
    } else {
        memset(dst, 0, row * (size_t)s->h);
    }
}

int pxvm_hash_report(const pxvm_executor_ops *ops, pxvm_executor *ex, const pxvm_program *prog, FILE *out,
                     pxvm_error *err)
{
    char lb[16];
    for (int k = 0; k < prog->nslots; k++)
        for (int l = 0; l < prog->slots[k].levels; l++) {
            pxvm_image img;
            if (pxvm_read_image(ops, ex, prog, k, l, 0, &img, err) < 0)
                return -1;
            fprintf(out, "%s L%d %dx%d %016" PRIx64 "\n", pxvm_slot_label(prog, k, lb), l, img.w, img.h,
                    pxvm_hash64(img.px, (size_t)img.w * (size_t)img.h * 4u));
            pxvm_image_free(&img);
        }
    return 0;
}

#ifdef PXVM_HAVE_CUDA_GL
extern const pxvm_executor_ops pxvm_cuda_gl_executor;
#endif

int pxvm_executor_open_named(const char *name, const pxvm_open_options *opt, const pxvm_executor_ops **ops,
                             pxvm_executor **ex, pxvm_error *cuda_why, pxvm_error *err)
{
    int automatic = !strcmp(name, "auto");
    *ex = NULL;
    *ops = pxvm_executor_find(automatic ? "cuda" : name, err);
    if (*ops && (*ops)->open(ex, opt, err) == 0)
        return 0;
    if (*ex) { /* a failed open may leave a half-made executor */
        (*ops)->close(*ex);
        *ex = NULL;
    }
    if (!automatic)
        return -1;
    if (cuda_why)
        *cuda_why = *err;
    *ops = &pxvm_cpu_executor;
    return (*ops)->open(ex, opt, err);
}

const pxvm_executor_ops *pxvm_executor_find(const char *name, pxvm_error *err)
{
    if (!strcmp(name, "cpu"))
        return &pxvm_cpu_executor;
    if (!strcmp(name, "cuda")) {
#ifdef PXVM_HAVE_CUDA_GL
        return &pxvm_cuda_gl_executor;
#else
        pxvm_fail(err, PXE_UNAVAILABLE, -1, -1,
                  "the CUDA-GL executor is not built into this binary (it needs nvcc, EGL and GLEW "
                  "headers at build time: run 'make deps && make')");
        return NULL;
#endif
    }
    char msg[128];
    snprintf(msg, sizeof msg, "no executor named '%s' (cpu, cuda)", name);
    pxvm_fail(err, PXE_USAGE, -1, -1, msg);
    return NULL;
}
