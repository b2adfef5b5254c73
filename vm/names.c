/* names.c - how messages and tools name a loaded program's parts: a slot by name or number
 * (pxvm_slot_lookup), the name to print for one (pxvm_slot_label), and the pixel of a stream
 * index (pxvm_stream_xy). Calls nothing else of the library: every other file may call it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vm.h"

int pxvm_slot_lookup(const pxvm_program *prog, const char *name)
{
    if (!name || !*name)
        return -1;
    if (name[0] >= '0' && name[0] <= '9') {
        char *end;
        long v = strtol(name, &end, 10);
        return *end || v < 0 || v >= prog->nslots ? -1 : (int)v;
    }
    for (int k = 0; k < prog->nslots; k++)
        if (!strcmp(prog->slots[k].name, name))
            return k;
    return -1;
}

const char *pxvm_slot_label(const pxvm_program *prog, int slot, char buf[16])
{
    if (slot >= 0 && slot < prog->nslots && prog->slots[slot].name[0])
        snprintf(buf, 16, "%s", prog->slots[slot].name);
    else
        snprintf(buf, 16, "#%d", slot);
    return buf;
}

void pxvm_stream_xy(const pxvm_program *prog, uint32_t index, int *x, int *y)
{
    *x = (int)(index % (uint32_t)prog->image.w);
    *y = (int)(index / (uint32_t)prog->image.w);
}
