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
#include "../vm/loader.h"
#include "../vm/resize.h"
#include "../vm/tokens.h"
#include "../vm/ragged.h"
#include "../isa/px_sem.h"
#include "fixation.h"
#include "runner_hooks.h"
#include "video.h"

struct pxvm_prog {
    pxvm_program p;
    pxvm_limits lim;
    char name[256]; /* the file or the name given: what messages call the program */
};

/* One resolution of an any-size program (the runner's cache). */
typedef struct px_resolved {
    int *wh;            /* [nslots][2]: the size of every slot it was resolved at; NULL: empty */
    pxvm_program prog;
    uint64_t used;      /* the runner's clock when it was last switched to */
} px_resolved;

/* What a borrow of an item is: none, or made by an earlier call, or by the exec under way (which
 * ends those alone when it fails). */
enum { PX_NOT_BORROWED, PX_BORROWED, PX_BORROWED_NOW };

/* What the runner remembers of a fixation register, to give it again at another size. */
enum { PX_FIX_NONE, PX_FIX_Q16, PX_FIX_NORMALIZED, PX_FIX_DEVICE };

struct pxvm_runner {
    /* what every bind reads first (hot: keep together, at the start) */
    int lost;            /* a failed change of size left the executor without a program it could run */
    int batch;
    const pxvm_executor_ops *ops;
    pxvm_executor *ex;
    const pxvm_prog *prog;
    /* any-size programs: the executor runs `cur`, prog->p itself or one of the resolutions */
    const pxvm_program *cur;
    uint8_t *bound;      /* [nslots][batch]: the input items bound at cur's size */
    uint8_t *borrowed;   /* [nslots][batch]: PX_BORROWED, or PX_BORROWED_NOW by the exec under way */
    int any_borrowed;    /* some item is borrowed (0: nothing to end) */
    int in_exec;         /* pxvm_runner_exec is binding: its borrows are PX_BORROWED_NOW */
    int keep_borrows;    /* pxvm_runner_keep_borrows: successful borrows end at the next bind, not the next run */
    int fix_normalized_ever; /* a normalized fixation was set once (px__refix converts those anew) */
    unsigned fix_inputs; /* the program's input registers (bit k: register k) */
    uint8_t *fix_set;    /* [batch]: the registers given a value since the runner opened */
    uint8_t *fix_kind;   /* [batch][8] PX_FIX_* */
    int32_t *fix_q;      /* [batch][8][2] the Q16 values given (PX_FIX_Q16) */
    double *fix_n;       /* [batch][8][2] the normalized values given (PX_FIX_NORMALIZED) */
    uint64_t clock;
    px_resolved cache[PXVM_RESOLVE_CACHE];
};

/* ---- errors: the last failure of this thread ------------------------------------------------ */

static _Thread_local pxvm_class px__last_class;
static _Thread_local char px__last_msg[1024];
static _Thread_local char px__last_warning[1024];

/* Records err as the thread's last error; returns its class (the API's return value). */
PXVM_COLD static int px__fail(const pxvm_error *err)
{
    px__last_class = err->cls;
    pxvm_error_format(err, px__last_msg, sizeof px__last_msg);
    pxvm_error_at(0, -1, -1, NULL);
    return (int)err->cls;
}

PXVM_COLD static int px__usage(const char *msg)
{
    pxvm_error err;
    pxvm_fail(&err, PXE_USAGE, -1, -1, msg);
    return px__fail(&err);
}

const char *pxvm_errmsg(void) { return px__last_msg; }
const char *pxvm_warning(void) { return px__last_warning; }

/* After a successful decode: what a lenient decoder went past ("malformed: ..."), the note of
 * bytes after the image's end (its message: it is no error), or nothing. */
static void px__keep_warning(const pxvm_error *err)
{
    px__last_warning[0] = 0;
    if (pxvm_decode_note(err))
        snprintf(px__last_warning, sizeof px__last_warning, "%s", err->msg);
    else if (err->code != PXE_NONE)
        pxvm_error_format(err, px__last_warning, sizeof px__last_warning);
}
pxvm_class pxvm_errclass(void) { return px__last_class; }
void pxvm_free(void *p) { free(p); }
const char *pxvm_version(void) { return PXVM_VERSION; }

/* A caller's limits: 0, or the usage error of `call`. The side limit is 1 .. 65535: the any-size
 * rules (SPEC section 2) compute log2q8 of sides up to 65535, and px_scale_q16's 64-bit products
 * of sides near 2^31 would overflow. */
static int px__check_limits(const pxvm_limits *lim, const char *call)
{
    if (!lim || (lim->max_side >= 1 && lim->max_side <= 65535))
        return 0;
    char msg[200];
    snprintf(msg, sizeof msg, "%s: pxvm_limits.max_side must be 1..65535 (got %lu)", call, (unsigned long)lim->max_side);
    return px__usage(msg);
}

/* For the API's other files (api/video.h): the same rules, written once here. */
int pxvm_api_fail(const pxvm_error *err) { return px__fail(err); }
void pxvm_api_warning(const pxvm_error *err) { px__keep_warning(err); }
int pxvm_api_check_limits(const pxvm_limits *lim, const char *call) { return px__check_limits(lim, call); }

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
    int bad_limits = px__check_limits(lim, "pxvm_image_decode");
    if (bad_limits)
        return bad_limits;
    px__last_warning[0] = 0;
    if (pxvm_image_decode_any(data, len, name ? name : "image", px__limits(lim, &def), &img, &err) < 0)
        return pxvm_error_at(px__fail(&err), -1, -1, name ? name : "image");
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
    int bad_limits = px__check_limits(lim, "pxvm_image_load");
    if (bad_limits)
        return bad_limits;
    px__last_warning[0] = 0;
    if (pxvm_image_load_any(path, px__limits(lim, &def), &img, &err) < 0)
        return pxvm_error_at(px__fail(&err), -1, -1, path);
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

int pxvm_image_fit_channels(const uint8_t *px, int w, int h, int channels, int out_w, int out_h, const char *policy,
                            uint8_t **out)
{
    pxvm_error err;
    px_policy pol;
    if (!px || !out || w < 1 || h < 1 || out_w < 1 || out_h < 1)
        return px__usage("pxvm_image_fit: NULL argument or empty image");
    if (channels != 1 && channels != 3 && channels != 4) {
        char msg[96];
        snprintf(msg, sizeof msg, "pxvm_image_fit_channels: channels %d: must be 1, 3 or 4", channels);
        return px__usage(msg);
    }
    if (px_policy_parse(policy, &pol, &err) < 0)
        return px__fail(&err);
    pol.threads = -1; /* one image at a time from the caller: a large one's resize takes the cores */
    pxvm_image dst;
    if (px_resize_policy_px(px, w, h, channels, out_w, out_h, &pol, &dst, &err) < 0)
        return px__fail(&err);
    *out = dst.px;
    return 0;
}

int pxvm_image_fit(const uint8_t *rgba, int w, int h, int out_w, int out_h, const char *policy, uint8_t **out)
{
    return pxvm_image_fit_channels(rgba, w, h, 4, out_w, out_h, policy, out);
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
    int bad_limits = px__check_limits(lim, "pxvm_prog_load");
    if (bad_limits)
        return bad_limits;
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
    int bad_limits = px__check_limits(lim, "pxvm_prog_from_png");
    if (bad_limits)
        return bad_limits;
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
    int bad_limits = px__check_limits(lim, "pxvm_prog_assemble");
    if (bad_limits)
        return bad_limits;
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
    int bad_limits = px__check_limits(lim, "pxvm_prog_from_plan");
    if (bad_limits)
        return bad_limits;
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
    info->any_size = (s->flags & PXI_SLOT_ANYSIZE) != 0;
    info->min_side = info->any_size ? s->min_side : 0;
    info->max_side = info->any_size ? s->max_side : 0;
    info->max_pixels = info->any_size ? s->max_pixels : 0;
    return 0;
}

int pxvm_prog_resolve(const pxvm_prog *prog, const int *wh, pxvm_prog **out)
{
    pxvm_error err;
    if (!prog || !out)
        return px__usage("pxvm_prog_resolve: NULL argument");
    *out = NULL;
    pxvm_prog *p = calloc(1, sizeof *p);
    if (!p) {
        pxvm_fail(&err, PXE_NOMEM, -1, -1, (unsigned long long)sizeof *p);
        return px__fail(&err);
    }
    p->lim = prog->lim;
    if (pxvm_program_resolve(&prog->p, wh, &prog->lim, &p->p, &err) < 0) {
        free(p);
        return px__fail(&err);
    }
    snprintf(p->name, sizeof p->name, "%s", prog->name);
    *out = p;
    return 0;
}

int pxvm_prog_slot_find(const pxvm_prog *prog, const char *name)
{
    return prog && name ? pxvm_slot_lookup(&prog->p, name) : -1;
}

/* The error of a call on no runner, or on one a failed change of size left without a program. */
PXVM_COLD static int px__unusable(const pxvm_runner *run, const char *call)
{
    char msg[300];
    if (!run)
        snprintf(msg, sizeof msg, "%s: NULL runner", call);
    else
        snprintf(msg, sizeof msg,
                 "%s: this runner has no program since a change of input size failed and loading its program again "
                 "failed too (the errors of those calls said why): close it and open another", call);
    pxvm_error err;
    pxvm_fail(&err, run ? PXE_UNAVAILABLE : PXE_USAGE, -1, -1, msg);
    return px__fail(&err);
}

/* ---- runners: any-size programs --------------------------------------------------------------- */

/* What a kept resolution holds: its program image (a copy of the program's, operands rescaled) and
 * its tables, which grow with the image and the instructions. */
static uint64_t px__resolution_bytes(const pxvm_program *p)
{
    return (uint64_t)p->image.w * (uint64_t)p->image.h * 4u + (uint64_t)p->ninsns * (sizeof(pxi_insn) + 64u) +
           (uint64_t)p->nslots * sizeof(pxvm_slot);
}

/* The resolution of the runner's program at wh (NULL: every reference size), from the cache or
 * made now (replacing the least recently used entry that the executor does not run). The entries
 * kept hold at most the program's memory limit together (max_memory, the one budget): older ones
 * are dropped to make room, the one the executor runs never. */
static int px__resolved(pxvm_runner *run, const int *wh, const pxvm_program **out, pxvm_error *err)
{
    const pxvm_program *poly = &run->prog->p;
    size_t n = (size_t)poly->nslots * 2u;
    int want[2 * (PXVM_MAX_SLOTS + 1)];
    for (int k = 0; k < poly->nslots; k++) /* the full key: every slot's size */
        for (int c = 0; c < 2; c++)
            want[2 * k + c] = wh && (wh[2 * k] || wh[2 * k + 1]) ? wh[2 * k + c] : c ? poly->slots[k].h : poly->slots[k].w;
    want[0] = want[1] = 0;
    for (int i = 0; i < PXVM_RESOLVE_CACHE; i++) {
        px_resolved *e = &run->cache[i];
        if (e->wh && !memcmp(e->wh, want, n * sizeof(int))) {
            e->used = ++run->clock;
            *out = &e->prog;
            return 0;
        }
    }
    /* the least recently used entries the executor does not run are emptied until the new one has
     * an empty entry and, holding about what the program's image and tables take, fits the budget
     * with those kept; emptied first, so that it takes the memory they held (no page first touched) */
    uint64_t need = px__resolution_bytes(poly), kept = 0;
    for (int i = 0; i < PXVM_RESOLVE_CACHE; i++)
        kept += run->cache[i].wh ? px__resolution_bytes(&run->cache[i].prog) : 0;
    px_resolved *slot;
    for (;;) {
        px_resolved *old = NULL;
        slot = NULL;
        for (int i = 0; i < PXVM_RESOLVE_CACHE; i++) {
            px_resolved *e = &run->cache[i];
            if (!e->wh)
                slot = slot ? slot : e;
            else if (&e->prog != run->cur && (!old || e->used < old->used))
                old = e;
        }
        if (!old || (slot && kept + need <= run->prog->lim.max_memory))
            break;
        kept -= px__resolution_bytes(&old->prog);
        free(old->wh);
        old->wh = NULL;
        pxvm_program_free(&old->prog);
    }
    if (!slot) /* every entry is the one running: not with more than one entry */
        return pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)need);
    pxvm_program res;
    if (pxvm_program_resolve(poly, want, &run->prog->lim, &res, err) < 0)
        return -1;
    int *key = malloc(n * sizeof(int));
    if (!key) {
        pxvm_program_free(&res);
        return pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)(n * sizeof(int)));
    }
    memcpy(key, want, n * sizeof(int));
    slot->wh = key, slot->prog = res, slot->used = ++run->clock;
    *out = &slot->prog;
    return 0;
}

/* Gives the executor the fixations the host set again, at the size of run->cur: normalized ones
 * converted anew (they are fractions of the bound image), and, after a reload (`all`), Q16 ones. */
PXVM_HOT static int px__refix(pxvm_runner *run, int all, pxvm_error *err)
{
    if (!all && !run->fix_normalized_ever) /* nothing to convert anew: no pass over every register */
        return 0;
    for (int b = 0; b < run->batch; b++)
        for (int r = 0; r < PX_FIX_REGS; r++) {
            size_t at = (size_t)b * PX_FIX_REGS + (size_t)r;
            int32_t q[2] = {run->fix_q[2 * at], run->fix_q[2 * at + 1]};
            if (run->fix_kind[at] == PX_FIX_NORMALIZED) {
                if (pxvm_fixation_convert(run->cur, run->fix_n + 2 * at, 0, q, "fixation", NULL, err) < 0)
                    return -1;
                run->fix_q[2 * at] = q[0], run->fix_q[2 * at + 1] = q[1];
            } else if (run->fix_kind[at] != PX_FIX_Q16 || !all) {
                continue;
            }
            if (run->ops->set_fixations(run->ex, b, 1, r, 1, q, -1, err) < 0)
                return -1;
        }
    return 0;
}

/* After a failed retarget the executor may hold anything from the old program to part of the next
 * one to none (the CUDA-GL executor unloads on a failure halfway): the runner loads its current
 * program again, so that it runs what it believes, with no input bound and the fixations the host
 * gave set again (device ones forgotten: unset); if even that fails it is marked lost and refuses
 * every later call but close. Returns -1 (the retarget's error stays the caller's). */
static int px__retarget_failed(pxvm_runner *run, int slot, pxvm_error *err)
{
    pxvm_error again;
    memset(run->bound, 0, (size_t)run->prog->p.nslots * (size_t)run->batch);
    for (int b = 0; b < run->batch; b++)
        for (int r = 0; r < PX_FIX_REGS; r++)
            if (run->fix_kind[(size_t)b * PX_FIX_REGS + (size_t)r] == PX_FIX_DEVICE) {
                run->fix_kind[(size_t)b * PX_FIX_REGS + (size_t)r] = PX_FIX_NONE;
                run->fix_set[b] = (uint8_t)(run->fix_set[b] & ~(1u << r));
            }
    if (run->ops->load(run->ex, run->cur, run->batch, &again) < 0 || px__refix(run, 1, &again) < 0) {
        run->lost = 1;
        size_t n = strlen(err->msg);
        snprintf(err->msg + n, sizeof err->msg - n, "; loading the program again failed too (%s): the runner is lost",
                 again.msg);
    } else {
        size_t n = strlen(err->msg);
        snprintf(err->msg + n, sizeof err->msg - n, "; the runner stays at %dx%d with no input bound",
                 run->cur->slots[slot].w, run->cur->slots[slot].h);
    }
    return -1;
}

/* Every check an executor's bind makes of `view` (items first_item..) for slot `slot` but its size:
 * made before a change of size, so that a bind refused for any other reason changes nothing. */
PXVM_HOT static int px__check_view_any_size(const pxvm_runner *run, int slot, int first_item, const pxvm_view *view,
                                            pxvm_error *err)
{
    pxvm_view same = *view;
    same.w = run->cur->slots[slot].w, same.h = run->cur->slots[slot].h;
    if (pxvm_check_bind(run->cur, run->batch, slot, first_item, &same, err) < 0)
        return -1;
    if (view->device >= 0 && run->ops == &pxvm_cpu_executor) /* the CPU executor's one refusal after the check */
        return pxvm_fail(err, PXE_BAD_VIEW, -1, -1, "input",
                         "CUDA device memory can be bound only on the CUDA-GL executor (executor cuda)");
    return 0;
}

/* wh (pxvm_program_resolve's) for the runner's sizes with `slot` at w x h */
static void px__sizes_wanted(const pxvm_runner *run, int slot, int w, int h, int *wh)
{
    for (int k = 0; k < run->cur->nslots; k++)
        wh[2 * k] = run->cur->slots[k].w, wh[2 * k + 1] = run->cur->slots[k].h;
    wh[0] = wh[1] = 0;
    wh[2 * slot] = w, wh[2 * slot + 1] = h;
}

/* A bind of a w x h image to items first_item .. first_item+items-1 of any-size slot `slot`, at a
 * size other than the runner's: checks the bounds (U-BIND-4) and the batch (every other bound item
 * would keep the old size), then switches the executor to the resolution at the new size (which
 * checks U-BIND-5 and U-BIND-6): the one way a size changes, for every program. */
__attribute__((noinline)) static int px__switch_by_resolution(pxvm_runner *run, int slot, int w, int h,
                                                             pxvm_error *err);

/* Whether items first_item .. first_item+items-1 of any-size slot `slot` may take w x h: its
 * bounds (U-BIND-4), and no other item bound at the old size. pxvm_runner_bind_resized asks it
 * before its resize, so that a size refused costs no resize (nor its memory). */
static int px__size_allowed(const pxvm_runner *run, int slot, int first_item, int items, int w, int h,
                            pxvm_error *err)
{
    const pxvm_program *poly = &run->prog->p;
    char lb[16];
    if (pxvm_anysize_check(poly, slot, w, h, err) < 0)
        return -1;
    for (int b = 0; b < run->batch; b++)
        if ((b < first_item || b >= first_item + items) && run->bound[(size_t)slot * (size_t)run->batch + (size_t)b])
            return pxvm_fail(err, PXE_INPUT_BATCH_SIZE, -1, -1, w, h, first_item, first_item + items - 1,
                             (unsigned)slot, pxvm_slot_label(poly, slot, lb), b, run->cur->slots[slot].w,
                             run->cur->slots[slot].h);
    return 0;
}

PXVM_HOT static int px__switch_size(pxvm_runner *run, int slot, int first_item, int items, int w, int h,
                                    pxvm_error *err)
{
    if (px__size_allowed(run, slot, first_item, items, w, h, err) < 0)
        return -1;
    return px__switch_by_resolution(run, slot, w, h, err);
}

/* px__switch_size's change by a resolution of the program at the new size (kept: px__resolved),
 * switched to by the executor's retarget */
static int px__switch_by_resolution(pxvm_runner *run, int slot, int w, int h, pxvm_error *err)
{
    const pxvm_program *next;
    int wh[2 * (PXVM_MAX_SLOTS + 1)];
    px__sizes_wanted(run, slot, w, h, wh);
    if (px__resolved(run, wh, &next, err) < 0)
        return -1;
    if (!run->ops->retarget) /* both executors have it; an executor of a test may not */
        return pxvm_fail(err, PXE_UNAVAILABLE, -1, -1,
                         "this executor cannot change the size of an any-size input (it has no retarget op)");
    if (run->ops->retarget(run->ex, next, err) < 0)
        return px__retarget_failed(run, slot, err);
    run->cur = next;
    memset(run->bound + (size_t)slot * (size_t)run->batch, 0, (size_t)run->batch);
    return px__refix(run, 0, err);
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
    size_t regs = (size_t)batch * PX_FIX_REGS;
    if (r) {
        r->prog = prog, r->ops = ops, r->ex = ex, r->batch = batch, r->cur = &prog->p;
        r->fix_set = calloc((size_t)batch, 1);
        r->bound = calloc((size_t)prog->p.nslots * (size_t)batch, 1);
        r->borrowed = calloc((size_t)prog->p.nslots * (size_t)batch, 1);
        r->fix_kind = calloc(regs, 1);
        r->fix_q = calloc(regs * 2u, sizeof(int32_t));
        r->fix_n = calloc(regs * 2u, sizeof(double));
    }
    if (!r || !r->fix_set || !r->bound || !r->borrowed || !r->fix_kind || !r->fix_q || !r->fix_n) {
        pxvm_fail(&err, PXE_NOMEM, -1, -1, (unsigned long long)(sizeof *r + regs * 21u));
        pxvm_runner_close(r);
        if (!r)
            ops->close(ex);
        return px__fail(&err);
    }
    /* an any-size program runs its resolution at the reference size until another size is bound */
    if (prog->p.any_size && px__resolved(r, NULL, &r->cur, &err) < 0) {
        pxvm_runner_close(r);
        return px__fail(&err);
    }
    if (ops->load(ex, r->cur, batch, &err) < 0) {
        pxvm_runner_close(r);
        return px__fail(&err);
    }
    r->fix_inputs = pxvm_fixation_inputs(&prog->p, NULL);
    *out = r;
    return 0;
}

void pxvm_runner_close(pxvm_runner *run)
{
    if (!run)
        return;
    run->ops->close(run->ex);
    for (int i = 0; i < PXVM_RESOLVE_CACHE; i++)
        if (run->cache[i].wh) {
            free(run->cache[i].wh);
            pxvm_program_free(&run->cache[i].prog);
        }
    free(run->fix_set);
    free(run->bound);
    free(run->borrowed);
    free(run->fix_kind);
    free(run->fix_q);
    free(run->fix_n);
    free(run);
}

const char *pxvm_runner_executor(const pxvm_runner *run) { return run ? run->ops->name : NULL; }
int pxvm_runner_batch(const pxvm_runner *run) { return run ? run->batch : 0; }

int pxvm_runner_set_stream(pxvm_runner *run, void *cuda_stream)
{
    pxvm_error err;
    if (!run || run->lost)
        return px__unusable(run, "pxvm_runner_set_stream");
    if (!run->ops->set_stream) {
        if (!cuda_stream)
            return 0;
        return px__usage("pxvm_runner_set_stream: only the cuda executor takes a CUDA stream");
    }
    return run->ops->set_stream(run->ex, cuda_stream, &err) < 0 ? px__fail(&err) : 0;
}

/* Does a bind of view to slot change the size of an any-size slot? */
PXVM_HOT static int px__needs_switch(const pxvm_runner *run, int slot, const pxvm_view *view)
{
    return run->prog->p.any_size && slot >= 1 && slot < run->cur->nslots && view &&
           (run->prog->p.slots[slot].flags & PXI_SLOT_ANYSIZE) &&
           (view->w != run->cur->slots[slot].w || view->h != run->cur->slots[slot].h);
}

/* Binds (borrow: borrows) a view, first switching an any-size slot to the view's size (after
 * every other check of the view: a refused bind leaves the runner as it was). */
PXVM_HOT static int px__bind(pxvm_runner *run, int slot, int first_item, const pxvm_view *view, int borrow)
{
    pxvm_error err;
    int (*op)(pxvm_executor *, int, int, const pxvm_view *, pxvm_error *) =
        borrow && run->ops->borrow ? run->ops->borrow : run->ops->bind;
    if (px__needs_switch(run, slot, view)) {
        if (px__check_view_any_size(run, slot, first_item, view, &err) < 0 ||
            px__switch_size(run, slot, first_item, view->items, view->w, view->h, &err) < 0)
            return pxvm_error_at(px__fail(&err), slot, first_item, NULL);
    }
    if (op(run->ex, slot, first_item, view, &err) < 0)
        return pxvm_error_at(px__fail(&err), slot, first_item, NULL);
    for (int b = first_item; b < first_item + view->items && b < run->batch; b++) {
        size_t at = (size_t)slot * (size_t)run->batch + (size_t)b;
        run->bound[at] = 1;
        run->borrowed[at] = !borrow ? PX_NOT_BORROWED : run->in_exec ? PX_BORROWED_NOW : PX_BORROWED;
    }
    run->any_borrowed |= borrow;
    return 0;
}

/* Ends the borrows (pxvm_runner_borrow) of the kind `which` (PX_BORROWED_NOW: those of the exec
 * under way; PX_BORROWED: every one): the items are unbound and the executor forgets the caller's
 * memory, so nothing reads it once the call that ends the borrow returns. The exec's others become
 * borrows like any other. */
static void px__end_borrows(pxvm_runner *run, int which)
{
    if (!run->any_borrowed)
        return;
    int left = 0;
    for (int k = 0; k < run->cur->nslots; k++)
        for (int b = 0; b < run->batch; b++) {
            size_t at = (size_t)k * (size_t)run->batch + (size_t)b;
            if (run->borrowed[at] == PX_NOT_BORROWED)
                continue;
            if (which == PX_BORROWED_NOW && run->borrowed[at] != PX_BORROWED_NOW) {
                left = 1;
                continue;
            }
            run->borrowed[at] = PX_NOT_BORROWED;
            run->bound[at] = 0;
            if (!run->lost)
                run->ops->release(run->ex, k, b, 1);
        }
    run->any_borrowed = left;
}

PXVM_HOT int pxvm_runner_bind(pxvm_runner *run, int slot, int first_item, const pxvm_view *view)
{
    if (!run || run->lost)
        return px__unusable(run, "pxvm_runner_bind");
    return px__bind(run, slot, first_item, view, 0);
}

int pxvm_runner_borrow(pxvm_runner *run, int slot, int first_item, const pxvm_view *view)
{
    if (!run || run->lost)
        return px__unusable(run, "pxvm_runner_borrow");
    return px__bind(run, slot, first_item, view, 1);
}

int pxvm_runner_slot_size(const pxvm_runner *run, int slot, int *w, int *h)
{
    if (!run || !w || !h || slot < 0 || slot >= run->cur->nslots)
        return px__usage("pxvm_runner_slot_size: NULL argument or no such slot");
    *w = run->cur->slots[slot].w, *h = run->cur->slots[slot].h;
    return 0;
}

static int px__run(pxvm_runner *run)
{
    pxvm_error err;
    for (int b = 0; run->fix_inputs && b < run->batch; b++)
        if ((run->fix_inputs & ~(unsigned)run->fix_set[b]) &&
            pxvm_fixation_check_set(&run->prog->p, run->prog->name, run->fix_set[b], run->batch > 1 ? b : -1, NULL,
                                    &err) < 0)
            return px__fail(&err);
    /* texel fixations keep their Q16 value across a change of size: checked against the size bound now */
    for (int b = 0; run->prog->p.any_size && b < run->batch; b++)
        for (int r = 0; r < PX_FIX_REGS; r++) {
            size_t at = (size_t)b * PX_FIX_REGS + (size_t)r;
            if (run->fix_kind[at] == PX_FIX_Q16 &&
                pxvm_fixation_check_q16(run->cur, run->fix_q + 2 * at, 1, b, r, 1, &err) < 0) {
                size_t n = strlen(err.msg);
                snprintf(err.msg + n, sizeof err.msg - n, "; it was set in texels at another size: set it again");
                return px__fail(&err);
            }
        }
    pxvm_run_options ro = {run->prog->lim.max_steps, NULL, NULL, NULL, NULL};
    return run->ops->run(run->ex, &ro, &err) < 0 ? px__fail(&err) : 0;
}

int pxvm_runner_run(pxvm_runner *run)
{
    if (!run || run->lost)
        return px__unusable(run, "pxvm_runner_run");
    int rc = px__run(run);
    if (!run->keep_borrows)
        px__end_borrows(run, PX_BORROWED);
    return rc;
}

int pxvm_runner_keep_borrows(pxvm_runner *run, int keep)
{
    if (!run || (keep != 0 && keep != 1))
        return px__usage("pxvm_runner_keep_borrows: NULL runner, or keep not 0 or 1");
    if (run->keep_borrows && !keep) /* the promise that kept them is withdrawn: they end now */
        px__end_borrows(run, PX_BORROWED);
    run->keep_borrows = keep;
    return 0;
}

int pxvm_runner_read(pxvm_runner *run, int slot, int level, int first_item, const pxvm_view *dst)
{
    pxvm_error err;
    char lb[16];
    if (!run || run->lost)
        return px__unusable(run, "pxvm_runner_read");
    /* an input's level 0 is the image bound, or nothing: never what a borrow or a size change left */
    if (level == 0 && slot >= 0 && slot < run->cur->nslots && run->cur->slots[slot].role == PXI_ROLE_INPUT && dst &&
        first_item >= 0 && dst->items >= 1 && first_item <= run->batch - dst->items)
        for (int b = first_item; b < first_item + dst->items; b++)
            if (!run->bound[(size_t)slot * (size_t)run->batch + (size_t)b])
                return pxvm_fail(&err, PXE_UNBOUND_INPUT, -1, -1, slot, pxvm_slot_label(run->cur, slot, lb),
                                 pxvm_slot_label(run->cur, slot, lb)),
                       px__fail(&err);
    return run->ops->read(run->ex, slot, level, first_item, dst, 0, &err) < 0 ? px__fail(&err) : 0;
}

int pxvm_runner_read_patches(pxvm_runner *run, int slot, int first_item, const pxvm_view *dst)
{
    pxvm_error err;
    if (!run || run->lost)
        return px__unusable(run, "pxvm_runner_read_patches");
    return run->ops->read(run->ex, slot, 0, first_item, dst, 1, &err) < 0 ? px__fail(&err) : 0;
}

int pxvm_runner_sync(pxvm_runner *run)
{
    pxvm_error err;
    if (!run || run->lost)
        return px__unusable(run, "pxvm_runner_sync");
    if (!run->ops->sync)
        return 0;
    return run->ops->sync(run->ex, &err) < 0 ? px__fail(&err) : 0;
}

/* pxvm_runner_exec's binds of one any-size slot are taken together: when they give every item of
 * the batch one new size (a batch given image by image), the runner switches once, before the
 * binds, instead of refusing the first one because the other items are bound at the old size. */
static int px__exec_switch(pxvm_runner *run, int nin, const int *in_slots, const int *in_items, const pxvm_view *ins)
{
    pxvm_error err;
    for (int i = 0; i < nin; i++) {
        int slot = in_slots[i], first = 1;
        for (int j = 0; j < i && first; j++)
            first = in_slots[j] != slot;
        if (!first || !px__needs_switch(run, slot, &ins[i]))
            continue;
        uint8_t *covered = calloc((size_t)run->batch, 1);
        if (!covered) {
            pxvm_fail(&err, PXE_NOMEM, -1, -1, (unsigned long long)run->batch);
            return px__fail(&err);
        }
        int one_size = 1, all = 1;
        for (int j = i; j < nin && one_size; j++) {
            if (in_slots[j] != slot)
                continue;
            int item = in_items ? in_items[j] : 0;
            if (ins[j].w != ins[i].w || ins[j].h != ins[i].h) {
                one_size = 0;
                break;
            }
            if (px__check_view_any_size(run, slot, item, &ins[j], &err) < 0) {
                free(covered);
                return pxvm_error_at(px__fail(&err), slot, item, NULL);
            }
            memset(covered + item, 1, (size_t)ins[j].items);
        }
        for (int b = 0; b < run->batch; b++)
            all &= covered[b];
        free(covered);
        /* otherwise the binds one by one say what is wrong (a mixed batch is refused there) */
        if (one_size && all && px__switch_size(run, slot, 0, run->batch, ins[i].w, ins[i].h, &err) < 0)
            return pxvm_error_at(px__fail(&err), slot, in_items ? in_items[i] : 0, NULL);
    }
    return 0;
}

int pxvm_runner_exec(pxvm_runner *run, int nin, const int *in_slots, const int *in_items, const pxvm_view *ins,
                     int nout, const int *out_slots, const int *out_kinds, const pxvm_view *outs)
{
    if (!run || nin < 0 || nout < 0 || (nin && (!in_slots || !ins)) || (nout && (!out_slots || !out_kinds || !outs)))
        return px__usage("pxvm_runner_exec: NULL argument");
    if (run->lost)
        return px__unusable(run, "pxvm_runner_exec");
    /* the borrows end when the call returns (kept borrows: when it fails): a failed call leaves
     * its inputs unbound, and none is read after it */
    int rc = px__exec_switch(run, nin, in_slots, in_items, ins);
    run->in_exec = 1;
    for (int i = 0; rc == 0 && i < nin; i++)
        rc = pxvm_runner_borrow(run, in_slots[i], in_items ? in_items[i] : 0, &ins[i]);
    run->in_exec = 0;
    if (rc == 0)
        rc = run->lost ? px__unusable(run, "pxvm_runner_exec") : px__run(run);
    for (int i = 0; rc == 0 && i < nout; i++)
        rc = out_kinds[i] ? pxvm_runner_read_patches(run, out_slots[i], 0, &outs[i])
                          : pxvm_runner_read(run, out_slots[i], 0, 0, &outs[i]);
    /* failed: its own borrows end (those kept from earlier calls stay); done: every borrow ends
     * unless kept, and the exec's become kept ones */
    if (rc || !run->keep_borrows)
        px__end_borrows(run, rc ? PX_BORROWED_NOW : PX_BORROWED);
    for (size_t at = 0; rc == 0 && run->keep_borrows && at < (size_t)run->cur->nslots * (size_t)run->batch; at++)
        if (run->borrowed[at] == PX_BORROWED_NOW)
            run->borrowed[at] = PX_BORROWED;
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

/* ---- video ----------------------------------------------------------------------------------- */

int pxvm_runner_set_dirty(pxvm_runner *run, int item, const pxvm_rect *rects, int n)
{
    pxvm_error err;
    if (!run || run->lost)
        return px__unusable(run, "pxvm_runner_set_dirty");
    return run->ops->set_dirty(run->ex, item, rects, n, &err) < 0 ? px__fail(&err) : 0;
}

int pxvm_runner_restart(pxvm_runner *run)
{
    pxvm_error err;
    if (!run || run->lost)
        return px__unusable(run, "pxvm_runner_restart");
    return run->ops->reset(run->ex, &err) < 0 ? px__fail(&err) : 0;
}

int pxvm_runner_read_changed(pxvm_runner *run, int slot, int first_item, int items, uint8_t *dst, int device)
{
    pxvm_error err;
    if (!run || run->lost)
        return px__unusable(run, "pxvm_runner_read_changed");
    return run->ops->read_state(run->ex, PXVM_STATE_CHANGED, slot, first_item, items, dst, device, &err) < 0
               ? px__fail(&err)
               : 0;
}

/* ---- tokens for models ----------------------------------------------------------------------- */

int pxvm_token_format_preset(const char *name, pxvm_token_format *fmt)
{
    pxvm_error err;
    if (!name || !fmt)
        return px__usage("pxvm_token_format_preset: NULL argument");
    return pxvm_token_preset(name, fmt, &err) < 0 ? px__fail(&err) : 0;
}

int pxvm_runner_read_tokens(pxvm_runner *run, int slot, int first_item, int items, const pxvm_token_format *fmt,
                            void *dst, int dst_device)
{
    pxvm_error err;
    if (!run || run->lost)
        return px__unusable(run, "pxvm_runner_read_tokens");
    if (!fmt)
        return px__usage("pxvm_runner_read_tokens: NULL argument");
    if (!run->ops->read_tokens)
        return px__usage("pxvm_runner_read_tokens: this executor does not read tokens");
    pxvm_token_table *t = malloc(sizeof *t); /* 4 KiB of values: not on the caller's stack */
    if (!t) {
        pxvm_fail(&err, PXE_NOMEM, -1, -1, (unsigned long long)sizeof *t);
        return px__fail(&err);
    }
    int rc = pxvm_token_table_build(fmt, t, &err) < 0 ||
                     run->ops->read_tokens(run->ex, slot, first_item, items, t, dst, dst_device, &err) < 0
                 ? px__fail(&err)
                 : 0;
    free(t);
    return rc;
}

int pxvm_ragged_plan(const char *policy, int patch, int out_w, int out_h, int n, const int *wh, int *out_wh,
                    int64_t *offsets, int *failed)
{
    pxvm_error err;
    px_policy pol;
    return px_ragged_sizes(policy, patch, out_w, out_h, n, wh, &pol, out_wh, offsets, failed, &err) < 0 ? px__fail(&err)
                                                                                                      : 0;
}

int pxvm_runner_ragged(pxvm_runner *run, int n, const pxvm_view *images, pxvm_ragged *t)
{
    pxvm_error err;
    if (t)
        t->failed = -1;
    if (!run || run->lost)
        return px__unusable(run, "pxvm_runner_ragged");
    if (!run->ops->ragged)
        return px__usage("pxvm_runner_ragged: this executor does not make ragged batches");
    pxvm_token_table *table = t && t->fmt ? malloc(sizeof *table) : NULL; /* 4 KiB: not on the stack */
    if (t && t->fmt && !table) {
        pxvm_fail(&err, PXE_NOMEM, -1, -1, (unsigned long long)sizeof *table);
        return px__fail(&err);
    }
    px_ragged_job job;
    int rc = px_ragged_prepare(&job, n, images, t, table, run->prog->lim.max_memory, &err) < 0 ||
                     run->ops->ragged(run->ex, &job, &err) < 0
                 ? px__fail(&err)
                 : 0;
    px_ragged_job_free(&job);
    free(table);
    return rc;
}

int pxvm_runner_bind_resized(pxvm_runner *run, int slot, int first_item, const pxvm_view *view, const char *policy,
                             int out_w, int out_h)
{
    pxvm_error err;
    if (!run || run->lost)
        return px__unusable(run, "pxvm_runner_bind_resized");
    if (!view || !policy)
        return px__usage("pxvm_runner_bind_resized: NULL argument");
    if (!run->ops->ragged || !run->ops->scratch)
        return px__usage("pxvm_runner_bind_resized: this executor does not resize");
    if (slot < 1 || slot >= run->cur->nslots || run->cur->slots[slot].role != PXI_ROLE_INPUT)
        return px__usage("pxvm_runner_bind_resized: slot is not an input slot of the program");
    px_policy pol;
    if (px_policy_parse(policy, &pol, &err) < 0)
        return px__fail(&err);
    if (pol.kind == PX_POLICY_NATIVE || pol.kind == PX_POLICY_DYNAMIC)
        return px__usage("pxvm_runner_bind_resized: policy native or dynamic decides the size itself: bind the image "
                         "as it is (native), or make its tiles with pxvm_runner_ragged (dynamic)");
    int any = (run->prog->p.slots[slot].flags & PXI_SLOT_ANYSIZE) != 0;
    if (!out_w && !out_h) {
        if (any)
            return px__usage("pxvm_runner_bind_resized: an any-size input takes the size to resize to (out_w, out_h)");
        out_w = run->cur->slots[slot].w, out_h = run->cur->slots[slot].h;
    } else if (!any && (out_w != run->cur->slots[slot].w || out_h != run->cur->slots[slot].h)) {
        char m[200];
        snprintf(m, sizeof m, "pxvm_runner_bind_resized: slot %d is %dx%d, the only size it takes, not %dx%d", slot,
                 run->cur->slots[slot].w, run->cur->slots[slot].h, out_w, out_h);
        return px__usage(m);
    }
    if (pxvm_check_input_view(run->batch, first_item, view, &err) < 0 ||
        (any && (out_w != run->cur->slots[slot].w || out_h != run->cur->slots[slot].h) &&
         px__size_allowed(run, slot, first_item, view->items, out_w, out_h, &err) < 0))
        return px__fail(&err);
    int n = view->items;
    pxvm_view *one = malloc(sizeof *one * (size_t)n);
    if (!one) {
        pxvm_fail(&err, PXE_NOMEM, -1, -1, (unsigned long long)n * sizeof *one);
        return px__fail(&err);
    }
    for (int b = 0; b < n; b++) /* the items as images of one item each */
        one[b] = *view, one[b].items = 1, one[b].data = (uint8_t *)view->data + (int64_t)b * view->item_stride;
    size_t bytes = (size_t)out_w * (size_t)out_h * 4u * (size_t)n; /* sides <= 2^24 checked by the plan below */
    pxvm_ragged t = {policy, 1, out_w, out_h, NULL, NULL, -1, 0, -1, 0, 0};
    px_ragged_job job;
    int64_t off[2];
    int wh[2] = {view->w, view->h}, rc;
    if (px_ragged_sizes(policy, 1, out_w, out_h, 1, wh, &pol, NULL, off, NULL, &err) < 0 ||
        run->ops->scratch(run->ex, bytes, &t.dst, &t.dst_device, &err) < 0) {
        free(one);
        return px__fail(&err);
    }
    t.dst_bytes = bytes; /* patch 1: each tile is one texel, the tiles in row-major order: the image */
    rc = px_ragged_prepare(&job, n, one, &t, NULL, run->prog->lim.max_memory, &err) < 0 ||
                 run->ops->ragged(run->ex, &job, &err) < 0
             ? px__fail(&err)
             : 0;
    px_ragged_job_free(&job);
    free(one);
    if (rc)
        return rc;
    pxvm_view sized = {t.dst, t.dst_device, n, out_w, out_h, 4, (int64_t)out_w * out_h * 4, (int64_t)out_w * 4, 4, 1};
    return px__bind(run, slot, first_item, &sized, 0);
}

_Static_assert(PXVM_FIX_REGS == PX_FIX_REGS, "public and ISA register counts agree");
_Static_assert(PXVM_GEOM_INTS == PX_GEOM_INTS, "public and ISA geometry sizes agree");

void pxvm_runner_test_set_ops(pxvm_runner *run, const pxvm_executor_ops *ops) { run->ops = ops; }

int pxvm_runner_test_resolutions(const pxvm_runner *run, uint64_t *bytes)
{
    int n = 0;
    *bytes = 0;
    for (int i = 0; i < PXVM_RESOLVE_CACHE; i++)
        if (run->cache[i].wh)
            n++, *bytes += px__resolution_bytes(&run->cache[i].prog);
    return n;
}
