/* pxisa.h - the .pxi encoding: header layout, instruction layout, opcodes and operand kinds.
 *
 * A .pxi program is an RGBA8 image. Its pixels, read in row-major order, form a pixel stream:
 *
 *   stream index   what
 *   0              magic 'P','X','V','M'
 *   1              R = format major (1), G = format minor (0, or 1 with an any-size slot),
 *                  B = slot count, A = flags (0)
 *   2              code start: stream index of the first instruction      (u32, see below)
 *   3              instruction count                                       (u32)
 *   4              reserved, must be 0                                     (u32)
 *   5 + 8*k ...    slot descriptor k (k = 0 .. slot count-1), 8 pixels:
 *                    +0  R = role (PXI_ROLE_*), G = flags (PXI_SLOT_*), B = A = 0
 *                    +1  width  (u32)        +2  height (u32)
 *                    +3  data origin in the program image: x (u16 in R,G), y (u16 in B,A);
 *                        only for role DATA; an ANY-SIZE input: min side (u16 R,G), max
 *                        side (u16 B,A); 0 otherwise
 *                    +4  patch width (u16 R,G), patch height (u16 B,A); 0,0 = not a patch atlas;
 *                        an ANY-SIZE input: max pixels (u32, 0 = no bound but the limits)
 *                    +5  patch count (u32); 0 for an ANY-SIZE input
 *                    +6,+7  name: 8 bytes of [a-z0-9_], NUL-padded ("" = unnamed)
 *   code start ...  instructions, each an opcode pixel followed by its operand pixels
 *
 * A u32 pixel is R | G<<8 | B<<16 | A<<24 (little-endian, the same bytes as in memory).
 *
 * Instruction layout (operands are drawn per opcode in opcodes.def):
 *
 *        R        G        B        A
 *   +--------+--------+--------+--------+
 *   | opcode | small operands (u8 each) |   pixel 0
 *   +--------+--------+--------+--------+
 *   | wider operands: u16 in R,G / B,A; |   pixels 1 .. n-1
 *   | u32 or Q16 in R,G,B,A             |
 *   +-----------------------------------+
 *
 * Slots are numbered from 1 in the order of their descriptors; slot 0 is the program image itself
 * ("prog"), so programs can read data embedded in themselves and write results into it.
 */
#ifndef PXISA_H
#define PXISA_H

#include <stdint.h>

#define PXI_MAGIC_R 'P'
#define PXI_MAGIC_G 'X'
#define PXI_MAGIC_B 'V'
#define PXI_MAGIC_A 'M'
#define PXI_VERSION_MAJOR 1
#define PXI_VERSION_MINOR 1 /* the latest minor read; programs without any-size slots are written as 1.0 */
#define PXI_MINOR_ANYSIZE 1 /* the first minor with any-size input slots */
#define PXI_HEADER_PIXELS 5   /* stream pixels before the first slot descriptor */
#define PXI_SLOT_PIXELS 8     /* stream pixels per slot descriptor */
#define PXI_NAME_MAX 8        /* bytes of a slot name */
#define PXI_MAX_FIELDS 16     /* most operands of one instruction */
#define PXI_MAX_PIXELS 16     /* most pixels of one instruction */

/* Slot roles. Slot 0 (the program image) has role PROGRAM; declared slots have the others. */
enum pxi_role {
    PXI_ROLE_PROGRAM = 0, /* the program image: level 0 starts as the .pxi pixels */
    PXI_ROLE_INPUT = 1,   /* level 0 must be bound to an image of exactly the declared size */
    PXI_ROLE_OUTPUT = 2,  /* starts zeroed; what a run produces */
    PXI_ROLE_SCRATCH = 3, /* starts zeroed; intermediate results */
    PXI_ROLE_DATA = 4     /* level 0 starts as a rectangle copied from the program image */
};
#define PXI_ROLE_LAST PXI_ROLE_DATA

/* Slot flags (descriptor pixel +0, G). PERSIST: the slot (output or scratch) is not restored
 * between runs: it starts from its initial state when the program is loaded (or the runner
 * reset) and keeps what each run leaves, so video programs update it frame by frame. */
#define PXI_SLOT_PERSIST 1u
/* ANYSIZE (format 1.1): an input slot whose declared size is a REFERENCE size: images of any
 * size within the bounds of descriptor +3, +4 may be bound; the program is resolved at the bound
 * size (vm/resolve.c, SPEC "Any-size inputs") and executors only ever run resolutions. */
#define PXI_SLOT_ANYSIZE 2u
#define PXI_SLOT_FLAGS 3u /* the flags defined so far */

/* Video: tiles of DIFF, UPDATE and incremental PYRAMID/sampling are PX_TILE x PX_TILE texels of
 * level 0; a tile mask has one pixel per tile, R != 0 meaning dirty. */
#define PX_TILE 16
#define PX_TILE_SHIFT 4

/* Opcodes, from the table. */
enum pxi_opcode {
#define PX_OP(name, value, pixels, synopsis) PX_OP_##name = value,
#include "opcodes.def"
};

/* Operand kinds: how a field is read and what the validator demands of it. */
enum pxi_kind {
    PXK_ZERO, /* reserved bits: must be 0 */
    PXK_ROW,  /* u8 row of the program image: must be < its height */
    PXK_SLOT, /* u8 slot number: must be <= the slot count (0 = the program image) */
    PXK_MODE, /* u8 sampling mode: PX_MODE_LINEAR or PX_MODE_NEAREST */
    PXK_U16,  /* u16, any value (regions are checked per opcode) */
    PXK_DIM,  /* u16 size: must be >= 1 */
    PXK_Q16,  /* s32 fixed point, 16 fractional bits, any value */
    PXK_LOD,  /* u16 fixed point, 8 fractional bits, any value (clamped to the last level) */
    PXK_TAPS, /* u8 tap count: 1 .. PX_MAX_TAPS */
    PXK_U8,   /* u8, any value (ranges are checked per opcode) */
    PXK_FLAG, /* u8: 0 or 1 */
    PXK_REG,  /* u8 fixation register: < PX_FIX_REGS */
    PXK_LEVEL, /* u8 mip level: < PXVM_MAX_LEVELS (checked against its slot per opcode) */
    PXK_MASK   /* u8 slot of a tile mask, or 0 = none (optional in assembly) */
};
#define PX_MAX_TAPS 16

/* The mode operand of SAMPLE, GATHER and ANISO: bit 0 the filter; bit 1 set: positions are
 * relative to fixation register (mode >> 2) & 7 (bits 2-4); bits 5-7 must be 0, and so must the
 * register bits of an absolute mode. */
enum pxi_mode { PX_MODE_LINEAR = 0, PX_MODE_NEAREST = 1 };
#define PX_MODE_FILTER 1u
#define PX_MODE_RELATIVE 2u
#define PX_MODE_REG_SHIFT 2
#define PX_MODE_VALID_BITS 0x1Fu
#define PX_MODE_REL(filter, reg) ((int)((filter) | PX_MODE_RELATIVE | ((unsigned)(reg) << PX_MODE_REG_SHIFT)))

/* The filter operand of RESIZE: Pillow's filters by their numbers (PIL.Image.Resampling), the
 * one list: vm/resize.h's enum, the names the API parses, the validator's and SPEC's text come
 * from it. X(NAME, value, name, separator before it in PX_RESIZE_FILTER_TEXT). */
#define PX_RESIZE_FILTERS(X)                                                                        \
    X(NEAREST, 0, "nearest", "") X(LANCZOS, 1, "lanczos", ", ") X(BILINEAR, 2, "bilinear", ", ")    \
    X(BICUBIC, 3, "bicubic", ", ") X(BOX, 4, "box", ", ") X(HAMMING, 5, "hamming", ", ")
#define PX__RESIZE_FILTER_TEXT(NAME, value, name, sep) sep #value " " name
/* "0 nearest, 1 lanczos, 2 bilinear, 3 bicubic, 4 box, 5 hamming" */
#define PX_RESIZE_FILTER_TEXT PX_RESIZE_FILTERS(PX__RESIZE_FILTER_TEXT)

/* Fixation registers: per run and per batch item, each an (x, y) pair of signed Q16 level-0
 * texel coordinates. A run starts with the values the host set (0, 0 until set). */
#define PX_FIX_REGS 8

/* Global field ordinals. The table lists each opcode's fields right after its PX_OP line, so a
 * field's index inside its instruction is its ordinal minus its opcode's marker minus one. */
enum pxi_field_ordinal {
#define PX_OP(name, value, pixels, synopsis) PXG_##name##__op,
#define PX_FIELD(op, field, kind, pixel, channel, bytes, doc) PXG_##op##_##field,
#include "opcodes.def"
    PXG__count
};
#define PX_FI(op, field) ((int)(PXG_##op##_##field - PXG_##op##__op - 1))

/* One instruction, decoded once at load (vm/parse.c). a[] holds the operands in table order. */
typedef struct pxi_insn {
    uint8_t op;       /* opcode value */
    uint8_t npix;     /* pixels it occupies */
    uint16_t nfields; /* operands in a[] */
    uint32_t pc;      /* stream index of its opcode pixel */
    int32_t a[PXI_MAX_FIELDS];
} pxi_insn;

/* Operand accessor: PX_ARG(insn, SAMPLE, cu). */
#define PX_ARG(insn, op, field) ((insn)->a[PX_FI(op, field)])

/* The facts of opcodes.def's PX_FACTS lines: operand sets are bit masks of field indices. */
#define PXF(op, field) (1u << PX_FI(op, field))
#define PXF_PROG (1u << 31) /* the program image (slot 0), used without an operand */
enum pxi_plan {
    PXP_NONE = 0, /* not an implemented opcode */
    PXP_ONE,      /* one instruction, one launch */
    PXP_HALT,     /* ends the run */
    PXP_TRAP,     /* may stop the run (an error of the run, not of the program) */
    PXP_FETCH,    /* SAMPLE's leading layout; fetches in a row may run as one batch */
    PXP_DIFF,     /* DIFF, UPDATE (and PYRAMID) of the same slots fuse into one pass over tiles */
    PXP_UPDATE,
    PXP_PYRAMID   /* rebuilds levels >= 1 of its slot */
};
#define PXA_TABLES 1u       /* host tables built at load, counted against the memory limit */
#define PXA_VIDEO 2u        /* a video instruction whatever its mask */
#define PXA_FIX_USE 4u      /* uses fixation registers */
#define PXA_FIX_WRITE 8u    /* writes fixation registers */
#define PXA_ANY_UNMASKED 16u /* its anysize operands may be any-size only when its MASK operand is 0 */
#define PXA_WRITES_WHOLE 32u /* every slot it writes, it writes whole (level 0): no reset needed before it */

typedef struct pxi_op_facts {
    uint8_t plan;     /* enum pxi_plan */
    int8_t mask;      /* index of its MASK operand (a tile mask, 0 = none), or -1 */
    uint8_t levels;   /* it has LEVEL operands */
    uint32_t reads, writes, upper, anysize, flags;
} pxi_op_facts;

/* Read one little-endian little field from an instruction's pixels (4 bytes per pixel). */
static inline uint32_t pxi_read_le(const uint8_t *pixels, int pixel, int channel, int bytes)
{
    const uint8_t *p = pixels + 4 * pixel + channel;
    uint32_t v = 0;
    for (int i = bytes - 1; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}
static inline void pxi_write_le(uint8_t *pixels, int pixel, int channel, int bytes, uint32_t v)
{
    uint8_t *p = pixels + 4 * pixel + channel;
    for (int i = 0; i < bytes; i++, v >>= 8)
        p[i] = (uint8_t)(v & 255u);
}

/* Table views, for the validator, the disassembler, the assembler and the spec generator. */
typedef struct pxi_field_info {
    const char *name;
    enum pxi_kind kind;
    uint8_t pixel, channel, bytes;
    const char *doc;
} pxi_field_info;

typedef struct pxi_op_info {
    const char *name; /* NULL for values that are not implemented opcodes */
    uint8_t value, pixels, nfields;
    const pxi_field_info *fields;
    const char *synopsis;
    const char *reserved_for; /* family name for a reserved value, else NULL */
    pxi_op_facts facts;       /* all 0 (plan PXP_NONE) for values that are not opcodes */
} pxi_op_info;

#ifdef __cplusplus
extern "C" { /* the CUDA executor reads the table too */
#endif
const pxi_op_info *pxi_op(unsigned value); /* always non-NULL for value < 256 */
const char *pxi_kind_name(enum pxi_kind kind);
const char *pxi_role_name(unsigned role);
static inline const pxi_op_facts *pxi_facts(unsigned value) { return &pxi_op(value)->facts; }
/* The value of the instruction's MASK operand (its tile mask), 0 when it has none. */
static inline int pxi_mask_of(const pxi_insn *in)
{
    int f = pxi_facts(in->op)->mask;
    return f < 0 ? 0 : in->a[f];
}
#ifdef __cplusplus
}
#endif

#endif
