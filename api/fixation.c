/* fixation.c - fixations from the host (SPEC 6): the one rule every front door uses (fixation.h),
 * and the runner's calls that set and read them. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../isa/px_sem.h"
#include "fixation.h"
#include "internal.h"

/* ---- fixations from the host: one rule for every front door (SPEC 6) -------------------------- */

unsigned pxvm_fixation_inputs(const pxvm_program *prog, uint32_t first_reader[PX_FIX_REGS])
{
    unsigned written = 0, inputs = 0;
    for (uint32_t i = 0; i < prog->ninsns && prog->insns[i].op != PX_OP_HALT; i++) {
        const pxi_insn *in = &prog->insns[i];
        unsigned reads = 0;
        if (in->op == PX_OP_SAMPLE || in->op == PX_OP_ANISO || in->op == PX_OP_GATHER) {
            int k = px_mode_reg(in->a[PX_FI(SAMPLE, mode)]);
            reads = k >= 0 ? 1u << k : 0;
        } else if (in->op == PX_OP_ARGMAX) {
            for (int k = PX_ARG(in, ARGMAX, ior_first); k < PX_ARG(in, ARGMAX, ior_first) + PX_ARG(in, ARGMAX, ior_count); k++)
                reads |= 1u << k;
        }
        for (int k = 0; k < PX_FIX_REGS; k++)
            if ((reads & ~written & ~inputs) >> k & 1) {
                inputs |= 1u << k;
                if (first_reader)
                    first_reader[k] = i;
            }
        if (in->op == PX_OP_ARGMAX)
            written |= 1u << PX_ARG(in, ARGMAX, reg);
    }
    return inputs;
}

int pxvm_fixation_ref_slot(const pxvm_program *prog)
{
    for (int k = 1; k < prog->nslots; k++)
        if (prog->slots[k].role == PXI_ROLE_INPUT)
            return k;
    return -1;
}

int32_t pxvm_fixation_q16(double v, double side)
{
    double t = v * side; /* one rounding (the side is an integer); the compiler contracts nothing: -ffp-contract=off */
    t = t * 65536.0;     /* exact */
    t = t + 0.5;         /* one rounding */
    return (int32_t)floor(t);
}

/* A double as the shortest text that reads back as it ("1.5", "0.1", "nan"). */
static void px__dtoa(double v, char *buf, size_t n)
{
    for (int digits = 15; digits <= 17; digits++) {
        snprintf(buf, n, "%.*g", digits, v);
        if (isnan(v) || strtod(buf, NULL) == v)
            return;
    }
}

/* The largest texel coordinate of axis 0 (x) or 1 (y): the reference slot's side, or 32767. */
static int px__fix_side(const pxvm_program *prog, int axis)
{
    int ref = pxvm_fixation_ref_slot(prog);
    return ref < 0 ? 32767 : axis ? prog->slots[ref].h : prog->slots[ref].w;
}

/* "input slot 'image', 451x300", or "no input slot" */
static void px__ref_text(const pxvm_program *prog, char *buf, size_t n)
{
    int ref = pxvm_fixation_ref_slot(prog);
    char lb[16];
    if (ref < 0)
        snprintf(buf, n, "the program has no input slot");
    else
        snprintf(buf, n, "input slot '%s', %dx%d", pxvm_slot_label(prog, ref, lb), prog->slots[ref].w,
                 prog->slots[ref].h);
}

int pxvm_fixation_convert(const pxvm_program *prog, const double xy[2], int texels, int32_t q[2], const char *what,
                          const char *hint, pxvm_error *err)
{
    char ref[96], val[40];
    px__ref_text(prog, ref, sizeof ref);
    if (!texels && pxvm_fixation_ref_slot(prog) < 0)
        return pxvm_fail(err, PXE_FIX_NO_REFERENCE, -1, -1, what, ref, hint ? hint : "");
    for (int i = 0; i < 2; i++) {
        int side = px__fix_side(prog, i);
        double hi = texels ? side : 1.0;
        if (xy[i] >= 0.0 && xy[i] <= hi)
            continue;
        px__dtoa(xy[i], val, sizeof val);
        if (texels)
            return pxvm_fail(err, PXE_FIX_TEXELS, -1, -1, what, i ? 'y' : 'x', val, side, ref, hint ? hint : "");
        return pxvm_fail(err, PXE_FIX_NORMALIZED, -1, -1, what, i ? 'y' : 'x', val, ref, hint ? hint : "");
    }
    for (int i = 0; i < 2; i++)
        q[i] = pxvm_fixation_q16(xy[i], texels ? 1.0 : (double)px__fix_side(prog, i));
    return 0;
}

int pxvm_fixation_check_q16(const pxvm_program *prog, const int32_t *xy, int items, int first_item, int first_reg,
                            int nregs, pxvm_error *err)
{
    for (int i = 0; i < items; i++)
        for (int r = 0; r < nregs; r++)
            for (int c = 0; c < 2; c++) {
                int32_t v = xy[((size_t)i * (size_t)nregs + (size_t)r) * 2u + (size_t)c];
                int side = px__fix_side(prog, c);
                if (v >= 0 && (int64_t)v <= (int64_t)side * 65536)
                    continue;
                char ref[96];
                px__ref_text(prog, ref, sizeof ref);
                return pxvm_fail(err, PXE_FIX_Q16, -1, -1, first_item + i, first_reg + r, c ? 'y' : 'x', (long)v,
                                 v / 65536.0, (long long)side * 65536, side, ref);
            }
    return 0;
}

int pxvm_fixation_check_regs(const pxvm_program *prog, const char *name, int first_reg, int nregs, const char *what,
                             pxvm_error *err)
{
    unsigned inputs = pxvm_fixation_inputs(prog, NULL);
    for (int k = first_reg; k < first_reg + nregs; k++) {
        if (inputs >> k & 1)
            continue;
        char list[64] = "";
        size_t n = 0;
        for (int j = 0; j < PX_FIX_REGS; j++)
            if (inputs >> j & 1)
                n += (size_t)snprintf(list + n, sizeof list - n, "%s%d", n ? ", " : "", j);
        if (inputs)
            return pxvm_fail(err, PXE_FIX_NO_REGISTER, -1, -1, what, name, k, strchr(list, ',') ? "s" : "", list);
        return prog->writes_fixation ? pxvm_fail(err, PXE_FIX_FINDS_OWN, -1, -1, what, name)
                                     : pxvm_fail(err, PXE_FIX_TAKES_NONE, -1, -1, what, name);
    }
    return 0;
}

int pxvm_fixation_check_set(const pxvm_program *prog, const char *name, unsigned set, int item, const char *hint,
                            pxvm_error *err)
{
    uint32_t reader[PX_FIX_REGS];
    unsigned missing = pxvm_fixation_inputs(prog, reader) & ~set;
    for (int k = 0; k < PX_FIX_REGS; k++) {
        if (!(missing >> k & 1))
            continue;
        const pxi_insn *in = &prog->insns[reader[k]];
        int x, y;
        pxvm_stream_xy(prog, in->pc, &x, &y);
        const char *verb = in->op == PX_OP_ARGMAX ? "inhibits ARGMAX around" : "samples relative to";
        if (item >= 0)
            return pxvm_fail(err, PXE_FIX_UNSET_ITEM, x, y, name, verb, k, item, hint ? hint : "");
        return pxvm_fail(err, PXE_FIX_UNSET, x, y, name, verb, k, hint ? hint : "");
    }
    return 0;
}

/* ---- fixations and token geometry ------------------------------------------------------------ */

int pxvm_prog_fixation_use(const pxvm_prog *prog)
{
    return !prog ? 0 : prog->p.writes_fixation ? 2 : prog->p.uses_fixation ? 1 : 0;
}

int pxvm_prog_fixation_inputs(const pxvm_prog *prog)
{
    return prog ? (int)pxvm_fixation_inputs(&prog->p, NULL) : 0;
}

/* What both doors check before they set anything: items and registers, and that every register
 * is an input register of the program. */
static int px__fix_args(pxvm_runner *run, int first_item, int items, int first_reg, int nregs, const void *xy,
                        pxvm_error *err)
{
    if (pxvm_check_fixations(run->cur, run->batch, first_item, items, first_reg, nregs, xy, err) < 0)
        return -1;
    return pxvm_fixation_check_regs(run->cur, run->prog->name, first_reg, nregs, "fixation", err);
}

/* Records what was set (kind PX_FIX_*; q, n: [items][nregs][2] or NULL) to give it again after a
 * change of size. */
static void px__fix_mark(pxvm_runner *run, int first_item, int items, int first_reg, int nregs, int kind,
                         const int32_t *q, const double *n)
{
    if (kind == PX_FIX_NORMALIZED)
        run->fix_normalized_ever = 1;
    for (int i = first_item; i < first_item + items; i++) {
        run->fix_set[i] |= (uint8_t)(((1u << nregs) - 1u) << first_reg);
        for (int r = first_reg; r < first_reg + nregs; r++) {
            size_t at = (size_t)i * PX_FIX_REGS + (size_t)r, from = ((size_t)(i - first_item) * (size_t)nregs + (size_t)(r - first_reg)) * 2u;
            run->fix_kind[at] = (uint8_t)kind;
            for (int c = 0; c < 2; c++) {
                run->fix_q[2 * at + (size_t)c] = q ? q[from + (size_t)c] : 0;
                run->fix_n[2 * at + (size_t)c] = n ? n[from + (size_t)c] : 0.0;
            }
        }
    }
}

int pxvm_runner_set_fixations(pxvm_runner *run, int first_item, int items, int first_reg, int nregs,
                              const int32_t *xy, int device)
{
    pxvm_error err;
    if (!run || run->lost)
        return px__unusable(run, "pxvm_runner_set_fixations");
    if (px__fix_args(run, first_item, items, first_reg, nregs, xy, &err) < 0 ||
        (device < 0 && pxvm_fixation_check_q16(run->cur, xy, items, first_item, first_reg, nregs, &err) < 0) ||
        run->ops->set_fixations(run->ex, first_item, items, first_reg, nregs, xy, device, &err) < 0)
        return px__fail(&err);
    px__fix_mark(run, first_item, items, first_reg, nregs, device < 0 ? PX_FIX_Q16 : PX_FIX_DEVICE,
                 device < 0 ? xy : NULL, NULL);
    return 0;
}

int pxvm_runner_set_fixations_normalized(pxvm_runner *run, int first_item, int items, int first_reg, int nregs,
                                         const double *xy)
{
    pxvm_error err;
    if (!run || run->lost)
        return px__unusable(run, "pxvm_runner_set_fixations_normalized");
    if (px__fix_args(run, first_item, items, first_reg, nregs, xy, &err) < 0)
        return px__fail(&err);
    size_t n = (size_t)items * (size_t)nregs;
    int32_t *q = malloc(sizeof(int32_t) * 2u * n);
    if (!q) {
        pxvm_fail(&err, PXE_NOMEM, -1, -1, (unsigned long long)(sizeof(int32_t) * 2u * n));
        return px__fail(&err);
    }
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        char what[64];
        snprintf(what, sizeof what, "fixation (item %d, register %d)", first_item + (int)(i / (size_t)nregs),
                 first_reg + (int)(i % (size_t)nregs));
        rc = pxvm_fixation_convert(run->cur, xy + 2 * i, 0, q + 2 * i, what, NULL, &err);
    }
    if (rc == 0)
        rc = run->ops->set_fixations(run->ex, first_item, items, first_reg, nregs, q, -1, &err);
    if (rc == 0)
        px__fix_mark(run, first_item, items, first_reg, nregs, PX_FIX_NORMALIZED, q, xy);
    free(q);
    if (rc < 0)
        return px__fail(&err);
    return 0;
}

int pxvm_runner_read_fixations(pxvm_runner *run, int first_item, int items, int32_t *xy, int device)
{
    pxvm_error err;
    if (!run || run->lost)
        return px__unusable(run, "pxvm_runner_read_fixations");
    return run->ops->read_state(run->ex, PXVM_STATE_FIXATIONS, 0, first_item, items, xy, device, &err) < 0
               ? px__fail(&err)
               : 0;
}

int pxvm_runner_read_geometry(pxvm_runner *run, int slot, int first_item, int items, int32_t *dst, int device)
{
    pxvm_error err;
    if (!run || run->lost)
        return px__unusable(run, "pxvm_runner_read_geometry");
    return run->ops->read_state(run->ex, PXVM_STATE_GEOMETRY, slot, first_item, items, dst, device, &err) < 0
               ? px__fail(&err)
               : 0;
}
