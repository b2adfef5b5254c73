/* pxi_build.h - writes .pxi program images: slots, instructions (encoded from the opcode table),
 * raw program-image rows and embedded data. Used by the program generator, the tests and pxasm. */
#ifndef PXI_BUILD_H
#define PXI_BUILD_H

#include "vm.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pxvm_builder_slot {
    uint8_t role;
    uint8_t flags; /* PXI_SLOT_* (pxvm_build_persist) */
    char name[PXI_NAME_MAX + 1];
    int w, h;
    int patch_w, patch_h, patch_count;
    pxvm_image data; /* role DATA: the pixels embedded in the program image (auto-placed) */
    int data_fixed;  /* role DATA: placed at (data_x, data_y), pixels written by the caller */
    int data_x, data_y;
    int min_side, max_side; /* flags & PXI_SLOT_ANYSIZE: the bounds as written (0: the defaults) */
    uint32_t max_pixels;
} pxvm_builder_slot;

typedef struct pxvm_builder {
    int width;      /* program image width in pixels */
    int code_start; /* stream index of the first instruction; 0 = right after the header */
    int nslots;
    pxvm_builder_slot slots[PXVM_MAX_SLOTS + 1]; /* [1..nslots] */
    uint8_t *code;
    size_t code_pixels, code_cap;
    uint32_t ninsns;
    uint32_t *insn_pc; /* code-relative pixel of each instruction, for patching */
    uint8_t *rows;     /* raw program-image rows, width*4 bytes each */
    int nrows;
    int rows_base;     /* row index of the first raw row (fixed by the first pxvm_build_row) */
    int failed;
    pxvm_code why; /* the first mistake (errors.def), reported by pxvm_build_finish */
} pxvm_builder;

void pxvm_build_init(pxvm_builder *b, int width);
void pxvm_build_free(pxvm_builder *b);
/* Declares a slot; returns its number (1..), or -1. */
int pxvm_build_slot(pxvm_builder *b, int role, const char *name, int w, int h);
void pxvm_build_patches(pxvm_builder *b, int slot, int patch_w, int patch_h, int count);
/* Marks a slot persistent (PXI_SLOT_PERSIST: not restored between runs). */
void pxvm_build_persist(pxvm_builder *b, int slot);
/* Makes an input slot any-size (PXI_SLOT_ANYSIZE; its w x h the reference size) with these
 * bounds as the descriptor holds them (0: 1, the limits' max side, no pixel bound). A program
 * with an any-size slot is written as format 1.1, any other as 1.0. */
void pxvm_build_any_size(pxvm_builder *b, int slot, int min_side, int max_side, uint32_t max_pixels);
/* A DATA slot holding a copy of img, embedded below the code. */
int pxvm_build_data_slot(pxvm_builder *b, const char *name, const pxvm_image *img);
/* A DATA slot whose pixels the caller puts at (x, y) of the finished image. */
int pxvm_build_data_at(pxvm_builder *b, const char *name, int w, int h, int x, int y);
/* Appends an instruction; fields[] in table order (reserved fields included, normally 0).
 * Returns its index. No validation here: the loader validates. */
uint32_t pxvm_build_insn(pxvm_builder *b, int op, const int32_t *fields);
/* Rewrites one field of an emitted instruction. */
void pxvm_build_patch(pxvm_builder *b, uint32_t insn, int field, int32_t value);
/* Appends a raw program-image row (n pixels, padded with zeros); returns its row index. Call it
 * only after every slot and instruction, since rows follow the header and code. */
int pxvm_build_row(pxvm_builder *b, const uint8_t *rgba, int n);
/* The finished program image. The header's instruction count and code start are filled in. */
int pxvm_build_finish(pxvm_builder *b, pxvm_image *out, pxvm_error *err);
/* The builder's first mistake (b->failed) as an error; returns -1. */
int pxvm_build_error(const pxvm_builder *b, pxvm_error *err);

#ifdef __cplusplus
}
#endif
#endif
