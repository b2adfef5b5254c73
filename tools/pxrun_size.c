/* pxrun_size.c - --size WxH for pxrun and pxbatch (pxrun_size.h). */
#include <stdio.h>
#include <string.h>

#include "pxrun_size.h"

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
    if (s->text)
        return pxvm_fail(err, PXE_SIZE_TWICE, -1, -1, s->text, text);
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
    if (i < 2 || *p)
        return pxvm_fail(err, PXE_SIZE_SYNTAX, -1, -1, text);
    s->text = text, s->w = v[0], s->h = v[1];
    return 0;
}

int px_size_policy(const px_size_opt *s, const char *policy_text, int native, px_policy *p, pxvm_error *err)
{
    if (!s->text)
        return 0;
    if (!policy_text)
        return px_policy_parse("stretch", p, err);
    if (native || p->kind == PX_POLICY_EXACT || p->kind == PX_POLICY_DYNAMIC)
        return pxvm_fail(err, PXE_SIZE_POLICY, -1, -1, s->text, policy_text);
    return 0;
}

int px_size_slots(const pxvm_program *prog, const char *prog_path, const px_size_opt *s, int *wh, pxvm_error *err)
{
    char lb[16];
    if (!s->text)
        return 0;
    if (!prog->any_size) {
        int k = 1;
        while (k < prog->nslots && prog->slots[k].role != PXI_ROLE_INPUT)
            k++;
        if (k == prog->nslots)
            return pxvm_fail(err, PXE_SIZE_NO_INPUT, -1, -1, s->text, prog_path);
        return pxvm_fail(err, PXE_SIZE_FIXED, -1, -1, s->text, prog_path, k, pxvm_slot_label(prog, k, lb),
                         prog->slots[k].w, prog->slots[k].h);
    }
    for (int k = 1; k < prog->nslots; k++) {
        if (prog->slots[k].role != PXI_ROLE_INPUT || !(prog->slots[k].flags & PXI_SLOT_ANYSIZE))
            continue;
        if (pxvm_anysize_check(prog, k, s->w, s->h, err) < 0) {
            char why[sizeof err->msg]; /* the library's words, copied: err->msg is rewritten */
            memcpy(why, err->msg, sizeof why);
            return pxvm_fail(err, PXE_SIZE_BOUNDS, -1, -1, s->text, prog_path, why);
        }
        wh[2 * k] = s->w, wh[2 * k + 1] = s->h;
    }
    return 0;
}
