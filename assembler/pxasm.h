/* pxasm.h - the assembler (text -> .pxi), the disassembler (.pxi -> text that reassembles to the
 * same bytes) and the allocation-plan compiler (JSON -> .pxi). The language is in
 * assembler/README.md; instructions and operands come from isa/opcodes.def. */
#ifndef PXASM_H
#define PXASM_H

#include <stdio.h>

#include "../vm/vm.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Assembles source text (path: for messages and for .data files, relative to its folder).
 * The result is validated like any loaded program before it is returned. */
int pxasm_assemble(const char *text, size_t len, const char *path, const pxvm_limits *lim, pxvm_image *out,
                   pxvm_error *err);
int pxasm_assemble_file(const char *path, const pxvm_limits *lim, pxvm_image *out, pxvm_error *err);

/* Writes a validated program as source that pxasm_assemble turns back into the same pixels:
 * every instruction with its pixel and its opcode's synopsis as a comment, and every pixel
 * outside the header and code (data, vectors) as .pixels blocks. */
void pxasm_disassemble(const pxvm_program *prog, const char *name, FILE *out);

#ifdef __cplusplus
}
#endif
#endif
