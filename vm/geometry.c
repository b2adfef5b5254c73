/* geometry.c - where things lie in a loaded program's slots: a slot's levels and their byte
 * offsets, what its level 0 starts as (pxvm_slot_initial: the program image, its data or zeros),
 * and token geometry (which atlas token each fetch writes) with the per-instruction video facts. */
#include <stdlib.h>
#include <string.h>

#include "loader.h"
#include "../isa/px_sem.h"

PXVM_HOT void px_vm_slot_geometry(pxvm_slot *s)
{
    s->levels = px_mip_levels(s->w, s->h);
    uint64_t off = 0;
    for (int l = 0; l < s->levels; l++) {
        s->level_offset[l] = off;
        off += (uint64_t)px_mip_dim(s->w, l) * (uint64_t)px_mip_dim(s->h, l) * 4u;
    }
    s->bytes = off;
}

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
            int plan = pxi_facts(in->op)->plan;
            int frame = plan == PXP_DIFF || plan == PXP_UPDATE ? in->a[PX_FI(DIFF, frame)] : -1;
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
        const pxi_op_facts *f = pxi_facts(in->op);
        prog->uses_video |= (f->flags & PXA_VIDEO) || pxi_mask_of(in); /* DIFF, UPDATE, any tile mask */
        if (px_vm_is_fetch(in) && pxvm_fetch_mask(in) && px_vm_fetch_box(prog, in, i, err) < 0)
            return -1;
        prog->writes_fixation |= (f->flags & PXA_FIX_WRITE) != 0;
        prog->uses_fixation |= (f->flags & PXA_FIX_USE) != 0;
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
