/* fixation.h - the front doors' fixation rule (isa/SPEC.md section 6, "Fixations from the host"),
 * written once in api/fixation.c and used by the C API (pxvm_runner_*) and pxrun: a program's
 * input registers, the conversion of normalized and texel fixations to Q16 registers, and the
 * checks (range, registers the program does not read, input registers left unset). */
#ifndef PXVM_API_FIXATION_H
#define PXVM_API_FIXATION_H

#include "../vm/vm.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The program's input registers, bit k for register k: read before any instruction writes it,
 * in program order up to the first HALT (a relative SAMPLE, ANISO or GATHER reads its register;
 * ARGMAX reads ior_first .. ior_first+ior_count-1, then writes reg). first_reader (NULL: not
 * wanted) gets, per input register, the index of the first instruction that reads it. */
unsigned pxvm_fixation_inputs(const pxvm_program *prog, uint32_t first_reader[PX_FIX_REGS]);

/* The reference slot of host fixations: the first input slot, or -1 if the program has none. */
int pxvm_fixation_ref_slot(const pxvm_program *prog);

/* The one conversion of a fixation coordinate to its Q16 register value:
 * floor(v * side * 65536 + 0.5), each operation one IEEE-754 double operation in that order (a
 * texel coordinate is the same with side 1). Only for values the range checks accepted. */
int32_t pxvm_fixation_q16(double v, double side);

/* Converts one fixation (x, y) to Q16 registers after checking its range: normalized (texels 0)
 * x, y in [0, 1] of the reference slot (a usage error without one), or texels in [0, W] x [0, H]
 * ([0, 32767] without a reference slot). A value outside (or NaN) is a usage error naming it,
 * prefixed by `what` ("--fixation '1.5,0.5'"); `hint` (NULL: none) is appended to it. */
int pxvm_fixation_convert(const pxvm_program *prog, const double xy[2], int texels, int32_t q[2], const char *what,
                          const char *hint, pxvm_error *err);

/* The range check of Q16 register values given directly (the texel door): items x nregs pairs. */
int pxvm_fixation_check_q16(const pxvm_program *prog, const int32_t *xy, int items, int first_item, int first_reg,
                            int nregs, pxvm_error *err);

/* Registers first_reg .. first_reg+nregs-1 are all input registers of the program (program
 * `name`), or a usage error prefixed by `what`. */
int pxvm_fixation_check_regs(const pxvm_program *prog, const char *name, int first_reg, int nregs, const char *what,
                             pxvm_error *err);

/* `set`: the registers given a value. An unlinkable error naming the first input register not in
 * it (item >= 0: of that batch item), the instruction reading it and `hint` (NULL: none). */
int pxvm_fixation_check_set(const pxvm_program *prog, const char *name, unsigned set, int item, const char *hint,
                            pxvm_error *err);

#ifdef __cplusplus
}
#endif
#endif
