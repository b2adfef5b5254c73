/* asm_internal.h - what the assembler's files share (private to assembler/asm*.c): the source
 * being read and its tokens, the program as pass 1 reads it, and the functions one file calls in
 * another. The language is in assembler/README.md; the entry points are in pxasm.h. */
#ifndef PX_ASM_INTERNAL_H
#define PX_ASM_INTERNAL_H

#include "pxasm.h"

/* The source being read: the position of the lexer, and where errors go. */
typedef struct {
    const char *path;
    const char *p, *end, *line_start;
    int line;
    pxvm_error *err;
} px_asm_src;

typedef enum { T_EOL, T_EOF, T_WORD, T_STR, T_EQ, T_LP, T_RP, T_COMMA } px_asm_tok_kind;

typedef struct {
    px_asm_tok_kind kind;
    char text[256];
    int line, col;
} px_asm_tok;

/* The program as pass 1 reads it: declarations, and instructions whose operands are still text. */

typedef struct {
    int field;      /* index in the opcode's fields */
    char text[256]; /* the value as written */
    int line, col;
} px_asm_operand;

typedef struct {
    int op, line, col;
    int nops;
    px_asm_operand ops[PXI_MAX_FIELDS];
} px_asm_insn;

typedef struct {
    char name[64];
    int first, count; /* raw rows */
    int line;
} px_asm_rows;

typedef struct {
    int x, y, n;
    uint8_t *px;
    int line;
} px_asm_pixels;

typedef struct {
    char name[PXI_NAME_MAX + 1];
    int role, w, h, pw, ph, pn;
    int persist;            /* the word `persistent` */
    int any;                /* the word `any`: an any-size input (format 1.1) */
    long long any_min, any_max, any_pixels; /* its min=, max=, pixels= (0: not given) */
    int at_x, at_y, has_at; /* data slot at a fixed origin */
    pxvm_image data;        /* data slot contents (.data / .table) */
    int line;
} px_asm_slot;

typedef struct {
    int width, height, code_start;
    px_asm_slot slots[PXVM_MAX_SLOTS + 1];
    int nslots;
    px_asm_insn *insns;
    int ninsns, cap;
    px_asm_rows rows[64];
    int nrows_blocks;
    uint8_t *rowpx; /* all raw rows, `width` pixels each (allocated once the width is known) */
    int nrows;
    px_asm_pixels pixels[256];
    int npixels;
} px_asm_prog;

/* An assembly error at line:col of the source: -1, with s->err set. */
int px_asm_fail_at(px_asm_src *s, int line, int col, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* The lexer: the next token (-1 with the error set), a token's name for messages, the end of
 * the line, a word or string (`what`: the message's "expected ..."). */
int px_asm_next(px_asm_src *s, px_asm_tok *t);
const char *px_asm_tok_name(const px_asm_tok *t);
int px_asm_expect_eol(px_asm_src *s);
int px_asm_word(px_asm_src *s, px_asm_tok *t, const char *what);

/* Numbers: a decimal integer in lo..hi, an exact decimal as fixed point with `frac` fractional
 * bits, a size "451x300", a pixel "RRGGBBAA". 0, or -1 (no message). */
int px_asm_parse_int(const char *s, long long lo, long long hi, long long *v);
int px_asm_parse_fixed(const char *s, int frac, long long lo, long long hi, long long *v);
int px_asm_parse_size(const char *s, int *w, int *h);
int px_asm_hex_pixel(const char *s, uint8_t out[4]);

/* The directives, each read from after its name (dir) to the end of its line or block, into p;
 * the slot a name declares (-1: none). */
int px_asm_find_slot(const px_asm_prog *p, const char *name);
int px_asm_dir_slot(px_asm_src *s, px_asm_prog *p, const px_asm_tok *dir);
int px_asm_dir_data(px_asm_src *s, px_asm_prog *p, const px_asm_tok *dir, const pxvm_limits *lim);
int px_asm_dir_table(px_asm_src *s, px_asm_prog *p, const px_asm_tok *dir);
int px_asm_dir_rows(px_asm_src *s, px_asm_prog *p, const px_asm_tok *dir);
int px_asm_dir_pixels(px_asm_src *s, px_asm_prog *p, const px_asm_tok *dir);

#endif
