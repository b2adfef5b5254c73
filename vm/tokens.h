/* tokens.h - tokens for models (isa/SPEC.md, "Tokens for models"): a token format (dtype,
 * layout, alpha, rescale, mean/std; include/pxvm.h) checked and turned, once per call on the
 * host, into a 256-entry table per channel of the output values' bits. Both executors only look
 * values up in that table, so their outputs are the same bits by construction. */
#ifndef PX_TOKENS_H
#define PX_TOKENS_H

#include <stddef.h>
#include <stdint.h>

#include "vm.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A checked format as the executors use it. value[c][u]: the bits of channel c's output for
 * byte u (float32 bits, or float16/bfloat16 bits in the low 16); `elem` the bytes of one value. */
typedef struct pxvm_token_table {
    int dtype;    /* PXVM_TOKENS_FLOAT32, _FLOAT16, _BFLOAT16 */
    int layout;   /* PXVM_TOKENS_NCHW, _NHWC, _FLAT */
    int channels; /* 3 (R, G, B) or 4 (R, G, B, A) */
    int elem;     /* 4 or 2 */
    uint32_t value[4][256];
} pxvm_token_table;

/* Fills *fmt with preset `name` (include/pxvm.h: pxvm_token_format_preset; [A-TOKENS-9]). */
int pxvm_token_preset(const char *name, pxvm_token_format *fmt, pxvm_error *err);
/* Checks fmt (the rules [A-TOKENS-1..6] of the SPEC; a usage error naming the value) and builds
 * its table. */
int pxvm_token_table_build(const pxvm_token_format *fmt, pxvm_token_table *t, pxvm_error *err);
/* Checks a read's arguments for any executor: `slot` an atlas slot of prog, items 1.. within the
 * batch, dst not NULL ([A-TOKENS-7..9]). */
int pxvm_check_tokens(const pxvm_program *prog, int batch, int slot, int item0, int items, const void *dst,
                      pxvm_error *err);
/* Bytes one item's tokens of atlas slot s take: patch_count * channels * patch_h * patch_w * elem. */
size_t pxvm_tokens_item_bytes(const pxvm_slot *s, const pxvm_token_table *t);
/* Tokens p0 .. p1-1 of one item from its atlas level 0 (RGBA8 rows, level_w texels wide) into
 * `dst`, that item's tokens (pxvm_tokens_item_bytes of them), in the table's layout. */
void pxvm_tokens_convert(const pxvm_token_table *t, const pxvm_slot *s, const uint8_t *level0, int level_w, void *dst,
                         int p0, int p1);

/* The exact conversions (round to nearest, ties to even), for the table and the tests. */
uint16_t pxvm_f32_to_f16(uint32_t f32_bits);
uint16_t pxvm_f32_to_bf16(uint32_t f32_bits);

#ifdef __cplusplus
}
#endif
#endif
