/* retarget_check.c - what both executors check before retarget (vm.h: pxvm_check_retarget): the
 * next program must differ from the loaded one only in the sizes (and levels) of input slots and
 * in operand values, so that everything an executor keeps across the switch (other inputs,
 * outputs, persistent slots, registers, token geometry) still fits it. */
#include <stdio.h>
#include <string.h>

#include "vm.h"

static int px__differs(pxvm_error *err, const char *what)
{
    return pxvm_fail(err, PXE_RETARGET_DIFFERS, -1, -1, what);
}

int pxvm_check_retarget(const pxvm_program *loaded, const pxvm_program *next, pxvm_error *err)
{
    char what[200], lb[16];
    if (!loaded)
        return pxvm_fail(err, PXE_RETARGET_NOT_LOADED, -1, -1);
    if (!next)
        return pxvm_fail(err, PXE_RETARGET_NO_NEXT, -1, -1);
    if (loaded->resolved_from && loaded->resolved_from == next->resolved_from)
        return 0; /* two resolutions of one program: they differ as retarget allows, by construction */
    if (loaded->nslots != next->nslots) {
        snprintf(what, sizeof what, "its slot count (%d, loaded %d)", next->nslots, loaded->nslots);
        return px__differs(err, what);
    }
    for (int k = 0; k < next->nslots; k++) {
        const pxvm_slot *a = &loaded->slots[k], *b = &next->slots[k];
        const char *label = pxvm_slot_label(loaded, k, lb);
        if (a->role != b->role)
            snprintf(what, sizeof what, "the role of slot %d ('%s'): %u, loaded %u", k, label, b->role, a->role);
        else if (a->flags != b->flags)
            snprintf(what, sizeof what, "the flags of slot %d ('%s'): %u, loaded %u", k, label, b->flags, a->flags);
        else if (strcmp(a->name, b->name))
            snprintf(what, sizeof what, "the name of slot %d ('%s'): '%s'", k, label, b->name);
        else if (a->role != PXI_ROLE_INPUT && (a->w != b->w || a->h != b->h || a->levels != b->levels))
            snprintf(what, sizeof what, "the size of slot %d ('%s'), not an input: %dx%d with %d levels, loaded %dx%d with %d", k,
                     label, b->w, b->h, b->levels, a->w, a->h, a->levels);
        else if (a->patch_w != b->patch_w || a->patch_h != b->patch_h || a->patch_count != b->patch_count)
            snprintf(what, sizeof what, "the patches of slot %d ('%s'): %d of %dx%d, loaded %d of %dx%d", k, label, b->patch_count,
                     b->patch_w, b->patch_h, a->patch_count, a->patch_w, a->patch_h);
        else if (a->role == PXI_ROLE_DATA && (a->data_x != b->data_x || a->data_y != b->data_y))
            snprintf(what, sizeof what, "where data slot %d ('%s') starts in the program image", k, label);
        else if (loaded->frame_only[k] != next->frame_only[k])
            snprintf(what, sizeof what, "whether input slot %d ('%s') is read only as a frame", k, label);
        else
            continue;
        return px__differs(err, what);
    }
    if (loaded->ngeom != next->ngeom) {
        snprintf(what, sizeof what, "its token count (%d, loaded %d)", next->ngeom, loaded->ngeom);
        return px__differs(err, what);
    }
    if (loaded->ninsns != next->ninsns) {
        snprintf(what, sizeof what, "its instruction count (%u, loaded %u)", next->ninsns, loaded->ninsns);
        return px__differs(err, what);
    }
    for (uint32_t i = 0; i < next->ninsns; i++)
        if (loaded->insns[i].op != next->insns[i].op) {
            snprintf(what, sizeof what, "the opcode of instruction %u (%s, loaded %s)", i, pxi_op(next->insns[i].op)->name,
                     pxi_op(loaded->insns[i].op)->name);
            return px__differs(err, what);
        }
    return 0;
}
