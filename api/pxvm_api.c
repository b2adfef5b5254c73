/* pxvm_api.c - the public API (include/pxvm.h) over the library's internals: handles, the
 * thread's last error, and the checks a caller's arguments need before they reach an executor. */
#define _GNU_SOURCE /* open_memstream */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../assembler/plan.h"
#include "../assembler/pxasm.h"
#include "../vm/vm.h"
#include "../vm/resize.h"
#include "../isa/px_sem.h"
#include "fixation.h"

struct pxvm_prog {
    pxvm_program p;
    pxvm_limits lim;
    char name[256]; /* the file or the name given: what messages call the program */
};

struct pxvm_runner {
    const pxvm_prog *prog;
    const pxvm_executor_ops *ops;
    pxvm_executor *ex;
    int batch;
    unsigned fix_inputs; /* the program's input registers (bit k: register k) */
    uint8_t *fix_set;    /* [batch]: the registers given a value since the runner opened */
};

/* ---- errors: the last failure of this thread ------------------------------------------------ */

static _Thread_local pxvm_class px__last_class;
static _Thread_local char px__last_msg[1024];
static _Thread_local char px__last_warning[1024];

/* Records err as the thread's last error; returns its class (the API's return value). */
static int px__fail(const pxvm_error *err)
{
    px__last_class = err->cls;
    pxvm_error_format(err, px__last_msg, sizeof px__last_msg);
    return (int)err->cls;
}

static int px__usage(const char *msg)
{
    pxvm_error err;
    pxvm_fail(&err, PXE_USAGE, -1, -1, msg);
    return px__fail(&err);
}

const char *pxvm_errmsg(void) { return px__last_msg; }
const char *pxvm_warning(void) { return px__last_warning; }

/* After a successful decode: what a lenient decoder went past (err holds it), or nothing. */
static void px__keep_warning(const pxvm_error *err)
{
    px__last_warning[0] = 0;
    if (err->code != PXE_NONE)
        pxvm_error_format(err, px__last_warning, sizeof px__last_warning);
}
pxvm_class pxvm_errclass(void) { return px__last_class; }
void pxvm_free(void *p) { free(p); }
const char *pxvm_version(void) { return PXVM_VERSION; }

static const pxvm_limits *px__limits(const pxvm_limits *lim, pxvm_limits *def)
{
    if (lim)
        return lim;
    pxvm_limits_default(def);
    return def;
}

/* ---- images --------------------------------------------------------------------------------- */

int pxvm_image_decode(const void *data, size_t len, const char *name, const pxvm_limits *lim, uint8_t **rgba,
                      int *w, int *h)
{
    pxvm_limits def;
    pxvm_error err;
    pxvm_image img;
    if (!data || !rgba || !w || !h)
        return px__usage("pxvm_image_decode: NULL argument");
    px__last_warning[0] = 0;
    if (pxvm_image_decode_any(data, len, name ? name : "image", px__limits(lim, &def), &img, &err) < 0)
        return px__fail(&err);
    px__keep_warning(&err);
    *rgba = img.px, *w = img.w, *h = img.h;
    return 0;
}

int pxvm_image_load(const char *path, const pxvm_limits *lim, uint8_t **rgba, int *w, int *h)
{
    pxvm_limits def;
    pxvm_error err;
    pxvm_image img;
    if (!path || !rgba || !w || !h)
        return px__usage("pxvm_image_load: NULL argument");
    px__last_warning[0] = 0;
    if (pxvm_image_load_any(path, px__limits(lim, &def), &img, &err) < 0)
        return px__fail(&err);
    px__keep_warning(&err);
    *rgba = img.px, *w = img.w, *h = img.h;
    return 0;
}

int pxvm_image_encode_png(const uint8_t *rgba, int w, int h, void **png, size_t *len)
{
    pxvm_error err;
    if (!rgba || !png || !len || w < 1 || h < 1)
        return px__usage("pxvm_image_encode_png: NULL argument or empty image");
    pxvm_image img = {w, h, (uint8_t *)rgba};
    uint8_t *out;
    if (pxvm_png_encode(&img, &out, len, &err) < 0)
        return px__fail(&err);
    *png = out;
    return 0;
}

int pxvm_image_fit(const uint8_t *rgba, int w, int h, int out_w, int out_h, const char *policy, uint8_t **out)
{
    pxvm_error err;
    px_policy pol;
    if (!rgba || !out || w < 1 || h < 1 || out_w < 1 || out_h < 1)
        return px__usage("pxvm_image_fit: NULL argument or empty image");
    if (px_policy_parse(policy, &pol, &err) < 0)
        return px__fail(&err);
    pxvm_image src = {w, h, (uint8_t *)rgba}, dst;
    if (px_resize_policy(&src, out_w, out_h, &pol, &dst, &err) < 0)
        return px__fail(&err);
    *out = dst.px;
    return 0;
}

int pxvm_policy_dynamic_size(const char *policy, int patch, int w, int h, int *out_w, int *out_h)
{
    pxvm_error err;
    px_policy pol;
    if (!out_w || !out_h || w < 1 || h < 1 || patch < 1 || patch > 256)
        return px__usage("pxvm_policy_dynamic_size: NULL argument, an empty image or a patch outside 1..256");
    if (px_policy_parse(policy, &pol, &err) < 0)
        return px__fail(&err);
    if (pol.kind != PX_POLICY_DYNAMIC)
        return px__usage("pxvm_policy_dynamic_size: the policy is not dynamic");
    if (px_policy_dynamic_patch(&pol, patch, &err) < 0 || px_dynamic_size(&pol, w, h, out_w, out_h, &err) < 0)
        return px__fail(&err);
    return 0;
}

int pxvm_policy_canonical(const char *policy, char *buf, size_t len)
{
    pxvm_error err;
    px_policy pol;
    char tmp[160];
    if (!buf)
        return px__usage("pxvm_policy_canonical: NULL buffer");
    if (px_policy_parse(policy, &pol, &err) < 0)
        return px__fail(&err);
    px_policy_format(&pol, tmp, sizeof tmp);
    if (strlen(tmp) >= len)
        return px__usage("pxvm_policy_canonical: the buffer is too small");
    memcpy(buf, tmp, strlen(tmp) + 1);
    return 0;
}

/* ---- programs ------------------------------------------------------------------------------- */

/* Takes ownership of *img, validates it into a new handle called `name`. */
static int px__prog_from(pxvm_image *img, const pxvm_limits *lim, const char *name, pxvm_prog **out)
{
    pxvm_error err;
    pxvm_prog *p = calloc(1, sizeof *p);
    if (!p) {
        pxvm_image_free(img);
        pxvm_fail(&err, PXE_NOMEM, -1, -1, (unsigned long long)sizeof *p);
        return px__fail(&err);
    }
    pxvm_limits def;
    p->lim = *px__limits(lim, &def);
    snprintf(p->name, sizeof p->name, "%s", name);
    if (pxvm_program_from_image(img, &p->lim, &p->p, &err) < 0) {
        free(p);
        return px__fail(&err);
    }
    *out = p;
    return 0;
}

int pxvm_prog_load(const char *path, const pxvm_limits *lim, pxvm_prog **out)
{
    pxvm_limits def;
    pxvm_error err;
    pxvm_image img;
    if (!path || !out)
        return px__usage("pxvm_prog_load: NULL argument");
    *out = NULL;
    if (pxvm_png_load(path, px__limits(lim, &def), &img, &err) < 0)
        return px__fail(&err);
    return px__prog_from(&img, lim, path, out);
}

int pxvm_prog_from_png(const void *data, size_t len, const char *name, const pxvm_limits *lim, pxvm_prog **out)
{
    pxvm_limits def;
    pxvm_error err;
    pxvm_image img;
    if (!data || !out)
        return px__usage("pxvm_prog_from_png: NULL argument");
    *out = NULL;
    if (pxvm_png_decode(data, len, name ? name : "program", px__limits(lim, &def), &img, &err) < 0)
        return px__fail(&err);
    return px__prog_from(&img, lim, name ? name : "program", out);
}

int pxvm_prog_assemble(const char *text, const char *name, const pxvm_limits *lim, pxvm_prog **out)
{
    pxvm_limits def;
    pxvm_error err;
    pxvm_image img;
    if (!text || !out)
        return px__usage("pxvm_prog_assemble: NULL argument");
    *out = NULL;
    if (pxasm_assemble(text, strlen(text), name ? name : "<text>", px__limits(lim, &def), &img, &err) < 0)
        return px__fail(&err);
    return px__prog_from(&img, lim, name ? name : "<text>", out);
}

int pxvm_prog_from_plan(const char *json, const char *name, const pxvm_limits *lim, pxvm_prog **out)
{
    pxvm_error err;
    pxvm_image img;
    if (!json || !out)
        return px__usage("pxvm_prog_from_plan: NULL argument");
    *out = NULL;
    if (pxvm_plan_image(json, strlen(json), name ? name : "<plan>", 0, &img, &err) < 0)
        return px__fail(&err);
    return px__prog_from(&img, lim, name ? name : "<plan>", out); /* validated here, once, with the caller's limits */
}

void pxvm_prog_free(pxvm_prog *prog)
{
    if (!prog)
        return;
    pxvm_program_free(&prog->p);
    free(prog);
}

int pxvm_prog_disassemble(const pxvm_prog *prog, char **text)
{
    pxvm_error err;
    if (!prog || !text)
        return px__usage("pxvm_prog_disassemble: NULL argument");
    size_t len = 0;
    FILE *mem = open_memstream(text, &len);
    if (!mem) {
        pxvm_fail(&err, PXE_NOMEM, -1, -1, 0ull);
        return px__fail(&err);
    }
    pxasm_disassemble(&prog->p, "program", mem);
    fclose(mem);
    return 0;
}

int pxvm_prog_encode(const pxvm_prog *prog, void **png, size_t *len)
{
    if (!prog)
        return px__usage("pxvm_prog_encode: NULL program");
    return pxvm_image_encode_png(prog->p.image.px, prog->p.image.w, prog->p.image.h, png, len);
}

int pxvm_prog_slot_count(const pxvm_prog *prog) { return prog ? prog->p.nslots : 0; }

int pxvm_prog_slot(const pxvm_prog *prog, int k, pxvm_slot_info *info)
{
    if (!prog || !info || k < 0 || k >= prog->p.nslots)
        return px__usage("pxvm_prog_slot: no such slot");
    const pxvm_slot *s = &prog->p.slots[k];
    char lb[16];
    snprintf(info->name, sizeof info->name, "%s", s->name[0] ? s->name : pxvm_slot_label(&prog->p, k, lb));
    info->role = pxi_role_name(s->role);
    info->w = s->w, info->h = s->h, info->levels = s->levels;
    info->patch_w = s->patch_w, info->patch_h = s->patch_h, info->patch_count = s->patch_count;
    return 0;
}

int pxvm_prog_slot_find(const pxvm_prog *prog, const char *name)
{
    return prog && name ? pxvm_slot_lookup(&prog->p, name) : -1;
}

/* ---- runners -------------------------------------------------------------------------------- */

int pxvm_runner_open(const pxvm_prog *prog, const char *executor, int device, int threads, int batch,
                     pxvm_runner **out)
{
    pxvm_error err;
    if (!prog || !out)
        return px__usage("pxvm_runner_open: NULL argument");
    *out = NULL;
    if (batch < 1 || batch > 65535)
        return px__usage("pxvm_runner_open: batch must be 1..65535");
    if (threads < 0 || device < 0)
        return px__usage("pxvm_runner_open: threads and device must be >= 0");
    if (!executor)
        executor = "cpu";
    pxvm_open_options oo = {threads, device};
    const pxvm_executor_ops *ops;
    pxvm_executor *ex;
    if (pxvm_executor_open_named(executor, &oo, &ops, &ex, NULL, &err) < 0)
        return px__fail(&err);
    pxvm_runner *r = calloc(1, sizeof *r);
    uint8_t *fix_set = calloc((size_t)batch, 1);
    if (!r || !fix_set || ops->load(ex, &prog->p, batch, &err) < 0) {
        if (!r || !fix_set)
            pxvm_fail(&err, PXE_NOMEM, -1, -1, (unsigned long long)sizeof *r + (unsigned long long)batch);
        ops->close(ex);
        free(r);
        free(fix_set);
        return px__fail(&err);
    }
    r->prog = prog, r->ops = ops, r->ex = ex, r->batch = batch;
    r->fix_inputs = pxvm_fixation_inputs(&prog->p, NULL), r->fix_set = fix_set;
    *out = r;
    return 0;
}

void pxvm_runner_close(pxvm_runner *run)
{
    if (!run)
        return;
    run->ops->close(run->ex);
    free(run->fix_set);
    free(run);
}

const char *pxvm_runner_executor(const pxvm_runner *run) { return run ? run->ops->name : NULL; }
int pxvm_runner_batch(const pxvm_runner *run) { return run ? run->batch : 0; }

int pxvm_runner_set_stream(pxvm_runner *run, void *cuda_stream)
{
    pxvm_error err;
    if (!run)
        return px__usage("pxvm_runner_set_stream: NULL runner");
    if (!run->ops->set_stream) {
        if (!cuda_stream)
            return 0;
        return px__usage("pxvm_runner_set_stream: only the cuda executor takes a CUDA stream");
    }
    return run->ops->set_stream(run->ex, cuda_stream, &err) < 0 ? px__fail(&err) : 0;
}

int pxvm_runner_bind(pxvm_runner *run, int slot, int first_item, const pxvm_view *view)
{
    pxvm_error err;
    if (!run)
        return px__usage("pxvm_runner_bind: NULL runner");
    return run->ops->bind(run->ex, slot, first_item, view, &err) < 0 ? px__fail(&err) : 0;
}

int pxvm_runner_borrow(pxvm_runner *run, int slot, int first_item, const pxvm_view *view)
{
    pxvm_error err;
    if (!run)
        return px__usage("pxvm_runner_borrow: NULL runner");
    int (*op)(pxvm_executor *, int, int, const pxvm_view *, pxvm_error *) = run->ops->borrow ? run->ops->borrow : run->ops->bind;
    return op(run->ex, slot, first_item, view, &err) < 0 ? px__fail(&err) : 0;
}

int pxvm_runner_run(pxvm_runner *run)
{
    pxvm_error err;
    if (!run)
        return px__usage("pxvm_runner_run: NULL runner");
    for (int b = 0; run->fix_inputs && b < run->batch; b++)
        if ((run->fix_inputs & ~(unsigned)run->fix_set[b]) &&
            pxvm_fixation_check_set(&run->prog->p, run->prog->name, run->fix_set[b], run->batch > 1 ? b : -1, NULL,
                                    &err) < 0)
            return px__fail(&err);
    pxvm_run_options ro = {run->prog->lim.max_steps, NULL, NULL, NULL, NULL};
    return run->ops->run(run->ex, &ro, &err) < 0 ? px__fail(&err) : 0;
}

int pxvm_runner_read(pxvm_runner *run, int slot, int level, int first_item, const pxvm_view *dst)
{
    pxvm_error err;
    if (!run)
        return px__usage("pxvm_runner_read: NULL runner");
    return run->ops->read(run->ex, slot, level, first_item, dst, 0, &err) < 0 ? px__fail(&err) : 0;
}

int pxvm_runner_read_patches(pxvm_runner *run, int slot, int first_item, const pxvm_view *dst)
{
    pxvm_error err;
    if (!run)
        return px__usage("pxvm_runner_read_patches: NULL runner");
    return run->ops->read(run->ex, slot, 0, first_item, dst, 1, &err) < 0 ? px__fail(&err) : 0;
}

int pxvm_runner_sync(pxvm_runner *run)
{
    pxvm_error err;
    if (!run)
        return px__usage("pxvm_runner_sync: NULL runner");
    if (!run->ops->sync)
        return 0;
    return run->ops->sync(run->ex, &err) < 0 ? px__fail(&err) : 0;
}

int pxvm_runner_exec(pxvm_runner *run, int nin, const int *in_slots, const int *in_items, const pxvm_view *ins,
                     int nout, const int *out_slots, const int *out_kinds, const pxvm_view *outs)
{
    if (!run || nin < 0 || nout < 0 || (nin && (!in_slots || !ins)) || (nout && (!out_slots || !out_kinds || !outs)))
        return px__usage("pxvm_runner_exec: NULL argument");
    for (int i = 0; i < nin; i++) {
        int rc = pxvm_runner_borrow(run, in_slots[i], in_items ? in_items[i] : 0, &ins[i]);
        if (rc)
            return rc;
    }
    int rc = pxvm_runner_run(run);
    for (int i = 0; rc == 0 && i < nout; i++)
        rc = out_kinds[i] ? pxvm_runner_read_patches(run, out_slots[i], 0, &outs[i])
                          : pxvm_runner_read(run, out_slots[i], 0, 0, &outs[i]);
    return rc;
}

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
    char ref[96], msg[700], val[40];
    px__ref_text(prog, ref, sizeof ref);
    if (!texels && pxvm_fixation_ref_slot(prog) < 0) {
        snprintf(msg, sizeof msg, "%s: a normalized fixation needs an input slot to scale to (%s)%s", what, ref,
                 hint ? hint : "");
        return pxvm_fail(err, PXE_USAGE, -1, -1, msg);
    }
    for (int i = 0; i < 2; i++) {
        int side = px__fix_side(prog, i);
        double hi = texels ? side : 1.0;
        if (xy[i] >= 0.0 && xy[i] <= hi)
            continue;
        px__dtoa(xy[i], val, sizeof val);
        if (texels)
            snprintf(msg, sizeof msg, "%s: %c = %s texels is not in [0, %d] (%s)%s", what, i ? 'y' : 'x', val, side, ref,
                     hint ? hint : "");
        else
            snprintf(msg, sizeof msg, "%s: %c = %s is not in [0, 1] (normalized coordinates of %s)%s", what,
                     i ? 'y' : 'x', val, ref, hint ? hint : "");
        return pxvm_fail(err, PXE_USAGE, -1, -1, msg);
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
                char ref[96], msg[700];
                px__ref_text(prog, ref, sizeof ref);
                snprintf(msg, sizeof msg,
                         "fixation (item %d, register %d): %c = %ld (Q16, %.4f texels) is not in [0, %lld] (0 to %d "
                         "texels of %s)",
                         first_item + i, first_reg + r, c ? 'y' : 'x', (long)v, v / 65536.0, (long long)side * 65536,
                         side, ref);
                return pxvm_fail(err, PXE_USAGE, -1, -1, msg);
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
        char msg[700], list[64] = "";
        size_t n = 0;
        for (int j = 0; j < PX_FIX_REGS; j++)
            if (inputs >> j & 1)
                n += (size_t)snprintf(list + n, sizeof list - n, "%s%d", n ? ", " : "", j);
        if (inputs)
            snprintf(msg, sizeof msg, "%s: program '%s' takes no fixation in register %d (its input register%s: %s)",
                     what, name, k, strchr(list, ',') ? "s" : "", list);
        else if (prog->writes_fixation)
            snprintf(msg, sizeof msg, "%s: program '%s' takes no fixations: it finds its own (ARGMAX) before it "
                     "samples relative to them", what, name);
        else
            snprintf(msg, sizeof msg, "%s: program '%s' takes no fixations: it samples no position relative to a "
                     "fixation register", what, name);
        return pxvm_fail(err, PXE_USAGE, -1, -1, msg);
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
        char of_item[32] = "";
        if (item >= 0)
            snprintf(of_item, sizeof of_item, " for batch item %d", item);
        int x, y;
        pxvm_stream_xy(prog, in->pc, &x, &y);
        return pxvm_fail(err, PXE_FIX_UNSET, x, y, name,
                         in->op == PX_OP_ARGMAX ? "inhibits ARGMAX around" : "samples relative to", k, of_item,
                         hint ? hint : "");
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
    if (pxvm_check_fixations(&run->prog->p, run->batch, first_item, items, first_reg, nregs, xy, err) < 0)
        return -1;
    return pxvm_fixation_check_regs(&run->prog->p, run->prog->name, first_reg, nregs, "fixation", err);
}

static void px__fix_mark(pxvm_runner *run, int first_item, int items, int first_reg, int nregs)
{
    for (int i = first_item; i < first_item + items; i++)
        run->fix_set[i] |= (uint8_t)(((1u << nregs) - 1u) << first_reg);
}

int pxvm_runner_set_fixations(pxvm_runner *run, int first_item, int items, int first_reg, int nregs,
                              const int32_t *xy, int device)
{
    pxvm_error err;
    if (!run)
        return px__usage("pxvm_runner_set_fixations: NULL runner");
    if (px__fix_args(run, first_item, items, first_reg, nregs, xy, &err) < 0 ||
        (device < 0 && pxvm_fixation_check_q16(&run->prog->p, xy, items, first_item, first_reg, nregs, &err) < 0) ||
        run->ops->set_fixations(run->ex, first_item, items, first_reg, nregs, xy, device, &err) < 0)
        return px__fail(&err);
    px__fix_mark(run, first_item, items, first_reg, nregs);
    return 0;
}

int pxvm_runner_set_fixations_normalized(pxvm_runner *run, int first_item, int items, int first_reg, int nregs,
                                         const double *xy)
{
    pxvm_error err;
    if (!run)
        return px__usage("pxvm_runner_set_fixations_normalized: NULL runner");
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
        rc = pxvm_fixation_convert(&run->prog->p, xy + 2 * i, 0, q + 2 * i, what, NULL, &err);
    }
    if (rc == 0)
        rc = run->ops->set_fixations(run->ex, first_item, items, first_reg, nregs, q, -1, &err);
    free(q);
    if (rc < 0)
        return px__fail(&err);
    px__fix_mark(run, first_item, items, first_reg, nregs);
    return 0;
}

int pxvm_runner_read_fixations(pxvm_runner *run, int first_item, int items, int32_t *xy, int device)
{
    pxvm_error err;
    if (!run)
        return px__usage("pxvm_runner_read_fixations: NULL runner");
    return run->ops->read_state(run->ex, PXVM_STATE_FIXATIONS, 0, first_item, items, xy, device, &err) < 0
               ? px__fail(&err)
               : 0;
}

int pxvm_runner_read_geometry(pxvm_runner *run, int slot, int first_item, int items, int32_t *dst, int device)
{
    pxvm_error err;
    if (!run)
        return px__usage("pxvm_runner_read_geometry: NULL runner");
    return run->ops->read_state(run->ex, PXVM_STATE_GEOMETRY, slot, first_item, items, dst, device, &err) < 0
               ? px__fail(&err)
               : 0;
}

/* ---- video ----------------------------------------------------------------------------------- */

int pxvm_runner_set_dirty(pxvm_runner *run, int item, const pxvm_rect *rects, int n)
{
    pxvm_error err;
    if (!run)
        return px__usage("pxvm_runner_set_dirty: NULL runner");
    return run->ops->set_dirty(run->ex, item, rects, n, &err) < 0 ? px__fail(&err) : 0;
}

int pxvm_runner_restart(pxvm_runner *run)
{
    pxvm_error err;
    if (!run)
        return px__usage("pxvm_runner_restart: NULL runner");
    return run->ops->reset(run->ex, &err) < 0 ? px__fail(&err) : 0;
}

int pxvm_runner_read_changed(pxvm_runner *run, int slot, int first_item, int items, uint8_t *dst, int device)
{
    pxvm_error err;
    if (!run)
        return px__usage("pxvm_runner_read_changed: NULL runner");
    return run->ops->read_state(run->ex, PXVM_STATE_CHANGED, slot, first_item, items, dst, device, &err) < 0
               ? px__fail(&err)
               : 0;
}

_Static_assert(PXVM_FIX_REGS == PX_FIX_REGS, "public and ISA register counts agree");
_Static_assert(PXVM_GEOM_INTS == PX_GEOM_INTS, "public and ISA geometry sizes agree");
