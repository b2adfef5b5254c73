/* program.c - program handles (pxvm_prog): loaded, decoded, assembled or planned, then validated;
 * their slots, their resolution at other sizes, their text and PNG. */
#define _GNU_SOURCE /* open_memstream */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../assembler/plan.h"
#include "../assembler/pxasm.h"
#include "../vm/loader.h"
#include "internal.h"

/* ---- programs ------------------------------------------------------------------------------- */

/* A new handle called `name` with the caller's limits, its program not made yet (NULL: out of
 * memory, in err). */
static pxvm_prog *px__prog_new(const pxvm_limits *lim, const char *name, pxvm_error *err)
{
    pxvm_prog *p = calloc(1, sizeof *p);
    if (!p) {
        pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)sizeof *p);
        return NULL;
    }
    pxvm_limits def;
    p->lim = *px__limits(lim, &def);
    snprintf(p->name, sizeof p->name, "%s", name);
    return p;
}

/* Takes ownership of *img, validates it into a new handle called `name`. */
static int px__prog_from(pxvm_image *img, const pxvm_limits *lim, const char *name, pxvm_prog **out)
{
    pxvm_error err;
    pxvm_prog *p = px__prog_new(lim, name, &err);
    if (!p) {
        pxvm_image_free(img);
        return px__fail(&err);
    }
    if (pxvm_program_from_image(img, &p->lim, &p->p, &err) < 0) {
        free(p);
        return px__fail(&err);
    }
    *out = p;
    return 0;
}

int pxvm_prog_load(const char *path, const pxvm_limits *lim, pxvm_prog **out)
{
    pxvm_error err;
    if (!path || !out)
        return px__refuse(PXE_NULL_ARGUMENT, "pxvm_prog_load");
    int bad_limits = px__check_limits(lim, "pxvm_prog_load");
    if (bad_limits)
        return bad_limits;
    *out = NULL;
    pxvm_prog *p = px__prog_new(lim, path, &err); /* read as pxrun reads it (pxvm_program_load) */
    if (!p)
        return px__fail(&err);
    if (pxvm_program_load(path, &p->lim, &p->p, &err) < 0) {
        free(p);
        return px__fail(&err);
    }
    *out = p;
    return 0;
}

int pxvm_prog_from_png(const void *data, size_t len, const char *name, const pxvm_limits *lim, pxvm_prog **out)
{
    pxvm_limits def;
    pxvm_error err;
    pxvm_image img;
    if (!data || !out)
        return px__refuse(PXE_NULL_ARGUMENT, "pxvm_prog_from_png");
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
        return px__refuse(PXE_NULL_ARGUMENT, "pxvm_prog_assemble");
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
        return px__refuse(PXE_NULL_ARGUMENT, "pxvm_prog_from_plan");
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
        return px__refuse(PXE_NULL_ARGUMENT, "pxvm_prog_disassemble");
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
        return px__refuse(PXE_PROG_ENCODE_NULL);
    return pxvm_image_encode_png(prog->p.image.px, prog->p.image.w, prog->p.image.h, png, len);
}

int pxvm_prog_slot_count(const pxvm_prog *prog) { return prog ? prog->p.nslots : 0; }

int pxvm_prog_slot(const pxvm_prog *prog, int k, pxvm_slot_info *info)
{
    if (!prog || !info || k < 0 || k >= prog->p.nslots)
        return px__refuse(PXE_PROG_SLOT_NONE);
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
        return px__refuse(PXE_NULL_ARGUMENT, "pxvm_prog_resolve");
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
