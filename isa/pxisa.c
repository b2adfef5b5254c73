/* pxisa.c - the opcode table as data, built from opcodes.def. */
#include "pxisa.h"

#include <pthread.h>
#include <stddef.h>

/* Every table row in file order, indexed by its PXG_ ordinal: an opcode's marker row (kind -1)
 * is followed by its field rows. */
typedef struct {
    int is_op;
    const char *name;
    int value, pixels;
    const char *text;
    pxi_field_info field;
} px__row;

static const px__row px__rows[PXG__count] = {
#define PX_OP(name, value, pixels, synopsis) {1, #name, value, pixels, synopsis, {0, PXK_ZERO, 0, 0, 0, 0}},
#define PX_FIELD(op, field, kind, pixel, channel, bytes, doc) \
    {0, #op, 0, 0, 0, {#field, PXK_##kind, pixel, channel, bytes, doc}},
#include "opcodes.def"
};

/* Every opcode has its facts: the executors' dispatch is generated from the PX_FACTS lines. */
enum {
#define PX_OP(name, value, pixels, synopsis) PX__OP_##name,
#include "opcodes.def"
    PX__NOPS
};
enum {
#define PX_FACTS(name, family, plan, reads, writes, upper, anysize, flags) PX__FACTS_##name,
#include "opcodes.def"
    PX__NFACTS
};
_Static_assert((int)PX__NOPS == (int)PX__NFACTS, "opcodes.def: one PX_FACTS line for every PX_OP");

static pxi_field_info px__fields[PXG__count];
static pxi_op_info px__ops[256];
static pthread_once_t px__once = PTHREAD_ONCE_INIT;
static int px__built; /* set (release) once px__build is done: the lookup's fast path */

static void px__build(void)
{
    for (int v = 0; v < 256; v++)
        px__ops[v].value = (uint8_t)v;
#define PX_RESERVED(first, last, family) \
    for (int v = first; v <= last; v++)  \
        px__ops[v].reserved_for = family;
#include "opcodes.def"
    for (int i = 0; i < PXG__count; i++) {
        px__fields[i] = px__rows[i].field;
        if (!px__rows[i].is_op)
            continue;
        pxi_op_info *op = &px__ops[px__rows[i].value];
        op->name = px__rows[i].name;
        op->pixels = (uint8_t)px__rows[i].pixels;
        op->synopsis = px__rows[i].text;
        op->fields = &px__fields[i + 1];
        op->reserved_for = NULL;
        int n = 0;
        while (i + 1 + n < PXG__count && !px__rows[i + 1 + n].is_op)
            n++;
        op->nfields = (uint8_t)n;
    }
#define PX_FACTS(name, family, plan_, reads_, writes_, upper_, anysize_, flags_) \
    {                                                                            \
        pxi_op_facts *f = &px__ops[PX_OP_##name].facts;                         \
        f->plan = PXP_##plan_;                                                   \
        f->reads = reads_, f->writes = writes_, f->upper = upper_;               \
        f->anysize = anysize_, f->flags = flags_;                                \
    }
#include "opcodes.def"
    for (int v = 0; v < 256; v++) {
        pxi_op_facts *f = &px__ops[v].facts;
        f->mask = -1;
        for (int k = 0; k < px__ops[v].nfields; k++) {
            if (px__ops[v].fields[k].kind == PXK_MASK && f->mask < 0)
                f->mask = (int8_t)k;
            f->levels |= px__ops[v].fields[k].kind == PXK_LEVEL;
        }
    }
    __atomic_store_n(&px__built, 1, __ATOMIC_RELEASE);
}

const pxi_op_info *pxi_op(unsigned value)
{
    if (!__atomic_load_n(&px__built, __ATOMIC_ACQUIRE)) /* the loader calls this per operand */
        pthread_once(&px__once, px__build);
    return &px__ops[value & 255u];
}

const char *pxi_kind_name(enum pxi_kind kind)
{
    static const char *const names[] = {"zero", "row", "slot", "mode", "u16", "dim", "q16", "lod", "taps", "u8", "flag", "reg", "level", "mask"};
    return (unsigned)kind < sizeof names / sizeof names[0] ? names[kind] : "?";
}

const char *pxi_role_name(unsigned role)
{
    static const char *const names[] = {"program", "input", "output", "scratch", "data"};
    return role <= PXI_ROLE_LAST ? names[role] : "?";
}
