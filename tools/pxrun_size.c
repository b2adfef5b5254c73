/* pxrun_size.c - --size WxH for pxrun and pxbatch (pxrun_size.h). */
#include <stdio.h>
#include <string.h>

#include "pxrun_size.h"

static int px__size_fail(pxvm_error *err, const char *msg)
{
    return pxvm_fail(err, PXE_USAGE, -1, -1, msg);
}

int px_policy_option(const char *text, px_policy *p, int *native, pxvm_error *err)
{
    if (px_policy_parse(text, p, err) < 0) /* the library's words: every kind, native among them */
        return -1;
    *native = p->kind == PX_POLICY_NATIVE;
    if (*native) /* the tools' native: no policy applied, the image bound as it is */
        memset(p, 0, sizeof *p);
    return 0;
}

int px_size_parse(const char *text, px_size_opt *s, pxvm_error *err)
{
    char msg[300];
    if (s->text) {
        snprintf(msg, sizeof msg, "--size given twice ('%.100s', then '%.100s'): give it once", s->text, text);
        return px__size_fail(err, msg);
    }
    int v[2] = {0, 0}, i = 0;
    const char *p = text;
    for (; i < 2; i++) {
        long x = 0;
        if (*p < '0' || *p > '9')
            break;
        while (*p >= '0' && *p <= '9' && x <= 65535)
            x = x * 10 + (*p++ - '0');
        if (x < 1 || x > 65535 || (i == 0 && *p++ != 'x'))
            break;
        v[i] = (int)x;
    }
    if (i < 2 || *p) {
        snprintf(msg, sizeof msg, "--size takes WxH, the width and height 1..65535 (e.g. 320x240), not '%.200s'", text);
        return px__size_fail(err, msg);
    }
    s->text = text, s->w = v[0], s->h = v[1];
    return 0;
}

int px_size_policy(const px_size_opt *s, const char *policy_text, int native, px_policy *p, pxvm_error *err)
{
    if (!s->text)
        return 0;
    if (!policy_text)
        return px_policy_parse("stretch", p, err);
    if (native || p->kind == PX_POLICY_EXACT || p->kind == PX_POLICY_DYNAMIC) {
        char msg[400];
        snprintf(msg, sizeof msg, "--size %.40s: --policy '%.100s' decides the size itself (native and exact bind each "
                 "image at its own size, dynamic at its rule's); --size takes stretch[:FILTER] or fit[:FILTER[:PAD]]",
                 s->text, policy_text);
        return px__size_fail(err, msg);
    }
    return 0;
}

int px_size_slots(const pxvm_program *prog, const char *prog_path, const px_size_opt *s, int *wh, pxvm_error *err)
{
    char msg[700], lb[16];
    if (!s->text)
        return 0;
    if (!prog->any_size) {
        int k = 1;
        while (k < prog->nslots && prog->slots[k].role != PXI_ROLE_INPUT)
            k++;
        if (k == prog->nslots)
            snprintf(msg, sizeof msg, "--size %.40s: program '%.300s' has no input slot", s->text, prog_path);
        else
            snprintf(msg, sizeof msg, "--size %.40s: program '%.300s' is not any-size: its input slot %d ('%s') is "
                     "%dx%d, the only size it takes (--policy stretch or fit resizes images to it)", s->text, prog_path,
                     k, pxvm_slot_label(prog, k, lb), prog->slots[k].w, prog->slots[k].h);
        return px__size_fail(err, msg);
    }
    for (int k = 1; k < prog->nslots; k++) {
        if (prog->slots[k].role != PXI_ROLE_INPUT || !(prog->slots[k].flags & PXI_SLOT_ANYSIZE))
            continue;
        if (pxvm_anysize_check(prog, k, s->w, s->h, err) < 0) {
            snprintf(msg, sizeof msg, "--size %.40s is outside the bounds of program '%.200s': %.400s", s->text,
                     prog_path, err->msg);
            return px__size_fail(err, msg);
        }
        wh[2 * k] = s->w, wh[2 * k + 1] = s->h;
    }
    return 0;
}
