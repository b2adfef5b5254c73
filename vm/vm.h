/* vm.h - the pxvm library: errors, images, programs (load + validate), launch plans, executors.
 *
 * Public names start with pxvm_; file-private helpers in the .c files start with px__; what the
 * program loader's files share among themselves (loader.h) starts with px_vm_.
 */
#ifndef PXVM_H
#define PXVM_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "../include/pxvm.h" /* the public API: classes, limits, views */
#include "../isa/pxisa.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The path of a bind (pxvm_runner's bind, the view's checks, a size change's checks): after a
 * run, the host's caches and TLBs hold the driver's lines, not these; hot functions are laid out
 * together (.text.hot), so that path meets fewer cold lines and pages, and at -O2 where a file is
 * built at -O3. */
#if defined(__GNUC__) && !defined(__clang__)
#define PXVM_HOT __attribute__((hot, optimize("O2")))
#elif defined(__GNUC__)
#define PXVM_HOT __attribute__((hot))
#else
#define PXVM_HOT
#endif
/* Functions that make an error: a call to one marks its branch unlikely, so that the compiler
 * moves the branch (its arguments' setup too) out of the hot code into .text.unlikely, and the
 * checks on a fast path take fewer lines of code. */
#if defined(__GNUC__)
#define PXVM_COLD __attribute__((cold))
#else
#define PXVM_COLD
#endif

/* ---- errors --------------------------------------------------------------------------------- */

typedef enum pxvm_code {
    PXE_NONE = 0,
#define PXE(code, cls, fmt) PXE_##code,
#include "errors.def"
    PXE__count
} pxvm_code;

typedef struct pxvm_error {
    pxvm_code code;
    pxvm_class cls;
    int x, y; /* the pixel of the program image the error is about, or -1, -1 */
    char msg[768];
} pxvm_error;

/* Records error `code` (message formatted from errors.def with the arguments) at pixel (x, y);
 * returns -1 so that callers can `return pxvm_fail(...)`. */
PXVM_COLD int pxvm_fail(pxvm_error *err, pxvm_code code, int x, int y, ...);
PXVM_COLD int pxvm_failv(pxvm_error *err, pxvm_code code, int x, int y, va_list ap);
/* Records where the API call that failed with return code rc (after px__fail recorded its
 * message) is about: its slot, batch item and file (-1, -1, NULL: none); returns rc. */
int pxvm_error_at(int rc, int slot, int item, const char *file);
/* The tools' exit status for a class: 0 ok, 1 i/o, 2 usage, 3 malformed, 4 invalid, 5 unlinkable,
 * 6 trap, 7 unavailable, 8 assembly or plan (a .pxs or PLAN.json that does not compile). */
int pxvm_exit_status(pxvm_class cls);
/* "invalid program: pixel (3,0): instruction 0 (SAMPLE): ..." */
void pxvm_error_format(const pxvm_error *err, char *buf, size_t len);

/* ---- limits --------------------------------------------------------------------------------- */

/* pxvm_limits and pxvm_limits_default are public (include/pxvm.h). */

/* ---- images --------------------------------------------------------------------------------- */

typedef struct pxvm_image {
    int w, h;
    uint8_t *px; /* w*h RGBA8 pixels, row-major, owned */
} pxvm_image;

int pxvm_image_alloc(pxvm_image *img, int w, int h, pxvm_error *err); /* zero-filled */
void pxvm_image_free(pxvm_image *img);
/* Decodes any PNG into RGBA8: palette -> RGB(A), grey -> RGB, 16-bit -> high byte, no alpha ->
 * A = 255, gamma and colour chunks ignored. Sides and decoded size are checked against the limits
 * from the header, before anything is allocated or inflated. `name` is used in messages. */
int pxvm_png_decode(const uint8_t *data, size_t len, const char *name, const pxvm_limits *lim,
                    pxvm_image *img, pxvm_error *err);
int pxvm_png_load(const char *path, const pxvm_limits *lim, pxvm_image *img, pxvm_error *err);
/* Decodes a JPEG through libjpeg-turbo into RGBA8 (grey and YCbCr to RGB, CMYK and YCCK to RGB
 * by Pillow's rule, A = 255), the limits checked from its header before decoding. */
int pxvm_jpeg_decode(const uint8_t *data, size_t len, const char *name, const pxvm_limits *lim, pxvm_image *img,
                     pxvm_error *err);
/* PNG or JPEG by signature: what pxrun --in and the API read. */
int pxvm_image_decode_any(const uint8_t *data, size_t len, const char *name, const pxvm_limits *lim, pxvm_image *img,
                          pxvm_error *err);
int pxvm_image_load_any(const char *path, const pxvm_limits *lim, pxvm_image *img, pxvm_error *err);
/* Strictness (lim->flags, PXVM_DECODE_LENIENT in include/pxvm.h): every decoder here is strict
 * unless told otherwise: damage (a truncated JPEG, a libpng or libjpeg warning) is an error whose
 * message names --lenient. Bytes after a complete image (after a PNG's IEND, a JPEG's EOI) are no
 * damage: accepted in both modes. On success err->code is PXE_NONE; or, lenient, the code and
 * message of the first damage the decoder went past: the caller reports it as a warning; or else
 * PXE_IMAGE_TRAILING, the note of bytes after the end (pxvm_decode_note): pxrun --verbose prints
 * it, Python warns. Before any pixel is decoded, from the header:
 * sides against max_side; the pixels plus the decoder's own buffers (for a progressive or
 * multi-scan JPEG its whole coefficient buffer, 2 bytes per sample of every component on the MCU
 * grid) against max_memory; a JPEG's scans against PXVM_JPEG_MAX_SCANS (counted in the stream). */
#define PXVM_JPEG_MAX_SCANS 100
/* After a successful decode: err holds the note of bytes after the image's end (1), not a warning
 * of damage a lenient decoder went past (0; err->code PXE_NONE: neither). */
static inline int pxvm_decode_note(const pxvm_error *err) { return err->code == PXE_IMAGE_TRAILING; }
/* The size an image must have (the slot it will be bound to), known before decoding. */
typedef struct pxvm_image_want {
    int w, h; /* 0, 0: any size */
    int slot;
    const char *slot_name;
} pxvm_image_want;
/* As _any, but an image of another size than want's (NULL: any) is refused from its header,
 * before anything is decoded or inflated, with the words of a bind of that size (PXE_INPUT_SIZE,
 * unlinkable). */
int pxvm_image_decode_want(const uint8_t *data, size_t len, const char *name, const pxvm_limits *lim,
                           const pxvm_image_want *want, pxvm_image *img, pxvm_error *err);
int pxvm_image_load_want(const char *path, const pxvm_limits *lim, const pxvm_image_want *want, pxvm_image *img,
                         pxvm_error *err);
/* Encodes RGBA8 deterministically (fixed zlib settings, no time chunk). *out is malloc'ed.
 * FAST (the default): zlib level 1, the Up filter on every row; BEST: level 6, libpng's adaptive
 * filter choice (smaller, about 3x slower). */
typedef enum pxvm_png_mode { PXVM_PNG_FAST, PXVM_PNG_BEST } pxvm_png_mode;
int pxvm_png_encode(const pxvm_image *img, uint8_t **out, size_t *len, pxvm_error *err);
int pxvm_png_encode_ex(const pxvm_image *img, pxvm_png_mode mode, uint8_t **out, size_t *len, pxvm_error *err);

/* Reads a whole file (at most max_bytes): a regular file, or "-" (standard input), a pipe, FIFO,
 * /dev/fd/N or character device, read in chunks and cut at max_bytes with an error. */
int pxvm_read_file(const char *path, uint64_t max_bytes, uint8_t **data, size_t *len, pxvm_error *err);

uint64_t pxvm_hash64(const void *data, size_t len); /* FNV-1a, 64 bits */

/* ---- programs ------------------------------------------------------------------------------- */

#define PXVM_MAX_SLOTS 255 /* slot numbers are u8 operands; slot 0 is the program image */
#define PXVM_MAX_LEVELS 16 /* 16384 = 2^14 -> 15 levels */

typedef struct pxvm_slot {
    uint8_t role;
    uint8_t flags;                    /* PXI_SLOT_* */
    char name[PXI_NAME_MAX + 1];
    int w, h, levels;
    int data_x, data_y;               /* role DATA: origin of its pixels in the program image */
    int patch_w, patch_h, patch_count; /* patch atlas geometry, or 0 */
    uint64_t level_offset[PXVM_MAX_LEVELS]; /* byte offset of each level in the slot's storage */
    uint64_t bytes;                   /* storage of the whole mip chain */
    int desc_pixel;                   /* stream index of its descriptor (-1 for slot 0) */
    /* an any-size input (flags & PXI_SLOT_ANYSIZE): w, h are its reference size; the sizes it
     * takes, the descriptor's 0s replaced by their meaning (1, the limits' max side, no bound) */
    int min_side, max_side;
    uint64_t max_pixels;              /* 0: no bound beyond the limits */
} pxvm_slot;

typedef enum pxvm_step_kind { PXVM_STEP_ONE, PXVM_STEP_BATCH } pxvm_step_kind;

/* A launch plan step: one instruction, or a run of SAMPLE/GATHER instructions that neither read
 * what another writes nor write overlapping rectangles, so they may execute in any order or all
 * at once (one kernel launch, one parallel loop). */
typedef struct pxvm_step {
    pxvm_step_kind kind;
    uint32_t first, count;
    /* 2 or 3 on a DIFF step followed by UPDATE (then PYRAMID cur mask=mask) of the same slots:
     * how many steps an executor may run as one pass over tiles (each tile's mask, copy and levels
     * 1-4 depend on that tile alone); else 0 */
    uint32_t tiles_fuse;
} pxvm_step;

typedef struct pxvm_program {
    pxvm_image image;  /* the .pxi pixels as loaded (slot 0 starts as this) */
    int nslots;        /* including slot 0 */
    pxvm_slot *slots;  /* [nslots] */
    uint32_t code_start, code_end; /* stream indices; [0, code_end) is never written */
    uint32_t ninsns;
    pxi_insn *insns;   /* decoded and validated */
    uint32_t nsteps;
    pxvm_step *steps;  /* the launch plan */
    uint64_t memory;   /* slot bytes, plus what RESIZEs and EMBEDs need (px_vm_check_insn_memory): against max_memory */
    uint8_t *reset;    /* [nslots] PXVM_RESET_* bits: what a run must restore before it starts */
    /* [nslots]: where a PYRAMID of the whole slot rewrites its levels >= 1 before any instruction
     * reads them (before the first HALT, after no DOT_RGB, which may trap), the step budget a run
     * needs for that PYRAMID to have run (the instructions up to the end of its step); 0: none,
     * and for persistent slots. A retarget's pending zeroing of a resized input's levels >= 1 is
     * skipped by a run only when its budget reaches it (pxvm_upper_rebuilt). */
    uint32_t *rebuild_upper;
    /* token geometry (spec "Fixation"): tokens of every atlas slot in slot order; geom_base[k] is
     * slot k's first token (-1: not an atlas); insn_token[i] the token instruction i writes, -1 */
    int ngeom;
    int *geom_base;
    int32_t *insn_token;
    /* video: the position box of each incremental SAMPLE/ANISO/GATHER (a GATHER's table is
     * constant data), computed at load; NULL when there is none */
    struct pxvm_fetch_box *insn_box;
    int uses_video;      /* DIFF, UPDATE, persistent slots or incremental instructions */
    /* [nslots]: the input slot is read only as the frame of DIFF and UPDATE, so (with dirty
     * rectangles given) only the tiles they touch are ever read: an executor may bind just those */
    uint8_t *frame_only;
    int uses_fixation;   /* relative sampling, SALIENCY or ARGMAX */
    int writes_fixation; /* ARGMAX: registers change during a run */
    int format_minor;    /* the header's format minor (0, or 1: any-size inputs allowed) */
    int any_size;        /* the number of any-size input slots: executors never load such a
                          * program, only its resolutions (pxvm_program_resolve) */
    /* Set when the program is made (pxvm_program_from_image, so also load and resolve): unique
     * in the process, never 0, so an executor may key what it keeps per program (retarget's
     * per-size caches) by it in O(1) without comparing programs; 0 (a program put together by
     * hand, or freed) has no identity and is never cached. */
    uint64_t serial;
    /* A resolution's (pxvm_program_resolve*): the serial of the program it resolves; 0 for any
     * other. Two resolutions of one program differ only in the sizes of its any-size slots and
     * the operands rescaled for them (SPEC V-ANY-6), so retarget between them needs no check.
     * The executors rely on it (the CPU plan and the GPU records of a sibling are copied, and
     * only SAMPLE/ANISO's cu, cv, du, dv, tdu, tdv, lod rewritten): rescaling any other operand
     * in vm/resolve.c means changing them too. */
    uint64_t resolved_from;
} pxvm_program;

/* The positions (Q16, before a fixation offset) and levels an incremental instruction reads. */
typedef struct pxvm_fetch_box {
    int64_t u_lo, u_hi, v_lo, v_hi;
    int lmin, lmax;
    /* no other instruction writes level 0 of its destination where it does: the bytes there are
     * its own last output, so an executor may sample again only the pixels that can change */
    int sole;
} pxvm_fetch_box;

/* Does a run with step budget `budget` rewrite slot k's levels >= 1 before anything reads them? */
static inline int pxvm_upper_rebuilt(const pxvm_program *prog, int k, uint64_t budget)
{
    return prog->rebuild_upper[k] && budget >= prog->rebuild_upper[k];
}

/* What a run restores so that every run starts from the initial state (spec section 2). Slots
 * not marked are never changed by a run: inputs and data are read-only, and levels >= 1 that a
 * PYRAMID rebuilds before anything reads them cannot be observed. */
#define PXVM_RESET_LEVEL0 1u /* level 0 back to its initial contents (program image or zeros) */
#define PXVM_RESET_UPPER 2u  /* levels >= 1 back to zero */

/* Parses and validates a whole program (takes ownership of *image on success and failure). */
int pxvm_program_from_image(pxvm_image *image, const pxvm_limits *lim, pxvm_program *prog, pxvm_error *err);
/* The same for a caller that keeps its image: validates a copy of it. */
int pxvm_program_from_copy(const pxvm_image *image, const pxvm_limits *lim, pxvm_program *prog, pxvm_error *err);
int pxvm_program_load(const char *path, const pxvm_limits *lim, pxvm_program *prog, pxvm_error *err);
void pxvm_program_free(pxvm_program *prog);

/* ---- any-size inputs (vm/resolve.c; SPEC "Any-size inputs") ---- */

/* Can a w x h image be bound to any-size slot `slot`? 0, or -1 with PXE_INPUT_BOUNDS (U-BIND-4)
 * naming the size and the bounds. */
int pxvm_anysize_check(const pxvm_program *poly, int slot, int w, int h, pxvm_error *err);
/* The resolution of `poly` at the sizes wh ([nslots][2]: for each any-size slot the bound
 * width and height, 0,0 meaning its reference size; 0,0 or the slot's own size for every other
 * slot): a fixed program (no any-size slot, format 1.0) whose any-size descriptors hold the
 * bound sizes and whose SAMPLE/ANISO operands reading them are rescaled by SPEC's integer rule,
 * validated as any program with `lim`. Bounds (U-BIND-4), an operand outside int32 (U-BIND-5)
 * and a resolution that breaks a load rule (U-BIND-6) are unlinkable errors naming the size. A
 * program without any-size slots resolves to a copy of itself. *out is freed by the caller. */
int pxvm_program_resolve(const pxvm_program *poly, const int *wh, const pxvm_limits *lim, pxvm_program *out,
                         pxvm_error *err);
/* The same, made the long way: the resolved image parsed and validated as any program.
 * pxvm_program_resolve derives its result from `poly` instead (no parse: a few microseconds
 * where this takes about a hundred); both give equal programs (but the serial) and equal errors,
 * which the tests check over many sizes. */
int pxvm_program_resolve_parsed(const pxvm_program *poly, const int *wh, const pxvm_limits *lim, pxvm_program *out,
                                pxvm_error *err);
/* 0 when a and b are the same program (every field and array but the serial), else 1 with the
 * first field that differs named in what (for tests). */
int pxvm_program_diff(const pxvm_program *a, const pxvm_program *b, char *what, size_t len);
/* The same, giving the resolved program image only (what pxasm --resolve writes). */
int pxvm_program_resolve_image(const pxvm_program *poly, const int *wh, const pxvm_limits *lim, pxvm_image *out,
                               pxvm_error *err);

/* A slot by name ("image", "prog") or number ("2"); -1 if none. */
int pxvm_slot_lookup(const pxvm_program *prog, const char *name);
/* The name to print for a slot: its name, or "#n". */
const char *pxvm_slot_label(const pxvm_program *prog, int slot, char buf[16]);
/* Pixel (x, y) of stream index `index` in the program image. */
void pxvm_stream_xy(const pxvm_program *prog, uint32_t index, int *x, int *y);

/* The slots an instruction reads (any level), writes (level 0) and whose levels >= 1 it may read,
 * into the array (set to 1): opcodes.def's reads, writes and upper. */
void pxvm_insn_reads(const pxi_insn *in, uint8_t *reads);
void pxvm_insn_writes(const pxi_insn *in, uint8_t *writes);
void pxvm_insn_reads_upper(const pxi_insn *in, uint8_t *reads);
/* The slots named by the operands of `set` (opcodes.def's notation: PXF bits, PXF_PROG for slot
 * 0) into slots[] (PXI_MAX_FIELDS + 1 of them; a slot may repeat); returns how many. */
int pxvm_insn_slots(const pxi_insn *in, uint32_t set, int *slots);
/* The tile mask operand of a SAMPLE, ANISO or GATHER (0: not incremental). */
int pxvm_fetch_mask(const pxi_insn *in);
/* Does incremental fetch i of program b read anything that of program a (equal opcodes) does
 * not: another operand or, for a GATHER, other table entries (data in the program image)? A
 * retarget from a to b then leaves it no last output to build on. */
int pxvm_fetch_differs(const pxvm_program *a, const pxvm_program *b, uint32_t i);

/* Fused EMBED (SPEC "Fused EMBED", A-FUSE-*): may EMBED instruction `index` take its tokens from
 * the sampler, its atlas never written? 0, or -1 with the rule its atlas breaks (naming the
 * EMBED and the instruction that breaks it). pxvm_embed_fusion: every EMBED that may, marked in
 * fused[ninsns]; their count, or -1 with the first EMBED's reason (PXE_FUSE_NO_EMBED: none). */
int pxvm_embed_fusable(const pxvm_program *prog, uint32_t index, pxvm_error *err);
int pxvm_embed_fusion(const pxvm_program *prog, uint8_t *fused, pxvm_error *err);
/* Whether the fetches that write fusable EMBED `index`'s atlas cover every texel of its tokens:
 * 1, so every token byte is written each run (each such fetch writes its whole rectangle, a fused
 * atlas being a scratch slot), and a fused run need not clear the staged rows first; 0 when not,
 * or when it cannot tell (out of memory). */
int pxvm_embed_tokens_covered(const pxvm_program *prog, uint32_t index);
/* "SAMPLE src=1 dst=2 mode=0 dst_x=0 dst_y=0 w=16 h=16 cu=225.5 ..." (table-driven) */
void pxvm_insn_format(const pxvm_program *prog, const pxi_insn *in, char *buf, size_t len);
/* Decodes the instruction at stream index `pc` from raw pixels (no validation beyond layout). */
void pxvm_insn_decode(const uint8_t *pixels, uint32_t pc, const pxi_op_info *op, pxi_insn *out);

/* ---- executors ------------------------------------------------------------------------------ */

typedef struct pxvm_executor pxvm_executor; /* one executor instance (opaque) */
struct pxvm_token_table;                    /* vm/tokens.h */
struct px_ragged_job;                        /* vm/ragged.h */

typedef struct pxvm_open_options {
    int threads; /* CPU: worker threads, 0 = all cores */
    int device;  /* CUDA: device number */
} pxvm_open_options;

typedef struct pxvm_run_options {
    uint64_t max_steps; /* step budget: instructions executed, HALT included */
    /* called for every instruction before it executes (in program order), or NULL */
    void (*trace)(void *ctx, const pxvm_program *prog, const pxi_insn *insn);
    void *trace_ctx;
    /* called after the run with the time of each plan step (device time on a GPU, measured with
     * events around the step's launches), or NULL; profiling runs the plan without graph replay */
    void (*profile)(void *ctx, const pxvm_program *prog, uint32_t step, double ms);
    void *profile_ctx;
} pxvm_run_options;

/* The executor interface. Every executor runs the same validated program with the same result.
 * Life cycle: open -> load(program, batch) -> bind(input slots of every item) -> run (any number
 * of times: each run runs the program on every item, each starting from the initial state of
 * every slot but the bound inputs) -> read -> close. A loaded program must stay alive until the
 * next load or close; load may be called again for another. A batch of B items is B
 * independent copies of every slot; item b of a run gives the bytes a run of item b alone gives.
 * Functions return 0 or -1 with *err set. */
typedef struct pxvm_executor_ops {
    const char *name;
    int (*open)(pxvm_executor **ex, const pxvm_open_options *opt, pxvm_error *err);
    int (*load)(pxvm_executor *ex, const pxvm_program *prog, int batch, pxvm_error *err);
    /* Converts and copies v->items images into an input slot of items item0.. (checked with
     * pxvm_check_bind). A view may be reused as soon as bind returns, except that the
     * CUDA-GL executor uploads page-locked (cudaHostAlloc) RGBA8 memory asynchronously: such an
     * image must stay unchanged until the next run returns. Device views: CUDA-GL only. */
    int (*bind)(pxvm_executor *ex, int slot, int item0, const pxvm_view *v, pxvm_error *err);
    /* As bind, but the executor may instead keep v->data and read it when the next run executes
     * (public pxvm_runner_borrow); NULL: bind is used. */
    int (*borrow)(pxvm_executor *ex, int slot, int item0, const pxvm_view *v, pxvm_error *err);
    /* Ends a borrow (public: when the run that reads it returns): items item0 .. item0+items-1 of
     * input `slot` become unbound, and memory a borrow read in place is never read again (a later
     * read of their level 0 reads the executor's own storage). Arguments are the caller's, valid. */
    void (*release)(pxvm_executor *ex, int slot, int item0, int items);
    int (*run)(pxvm_executor *ex, const pxvm_run_options *opt, pxvm_error *err);
    /* Copies level `level` of `slot` of items item0.. into dst (RGBA8, checked by
     * pxvm_check_read_view); `patches`: the atlas as its patches (public pxvm_runner_read_patches). */
    int (*read)(pxvm_executor *ex, int slot, int level, int item0, const pxvm_view *dst, int patches,
                pxvm_error *err);
    /* CUDA-GL: order later work on this cudaStream_t (NULL: none); NULL op on the CPU. */
    int (*set_stream)(pxvm_executor *ex, void *stream, pxvm_error *err);
    /* Waits for enqueued work and reports an asynchronous run's trap; NULL op on the CPU. */
    int (*sync)(pxvm_executor *ex, pxvm_error *err);
    void (*close)(pxvm_executor *ex);
    /* Sets fixation registers reg0 .. reg0+nregs-1 of items item0 .. item0+items-1 from xy
     * ([items][nregs][2] int32, Q16 level-0 texels; checked with pxvm_check_fixations): every
     * later run starts with them. xy is host memory (device < 0), or CUDA memory of the
     * executor's device (CUDA-GL only); it may be reused when the call returns. */
    int (*set_fixations)(pxvm_executor *ex, int item0, int items, int reg0, int nregs, const int32_t *xy, int device,
                         pxvm_error *err);
    /* After a run, copies state of items item0.. into dst (host, or CUDA memory on CUDA-GL):
     * PXVM_STATE_FIXATIONS: the registers as the run left them, [items][8][2] int32 (slot is
     * ignored); PXVM_STATE_GEOMETRY: the token geometry of atlas slot `slot`,
     * [items][patch_count][PX_GEOM_INTS] int32. */
    int (*read_state)(pxvm_executor *ex, int what, int slot, int item0, int items, void *dst, int device,
                      pxvm_error *err);
    /* Video. Dirty rectangles (level-0 texels of the frame DIFF compares) for item `item`'s next
     * run: its DIFF then marks the tiles they touch instead of comparing (n = 0: nothing
     * changed). Checked with pxvm_check_dirty; host memory, copied before the call returns. */
    int (*set_dirty)(pxvm_executor *ex, int item, const pxvm_rect *rects, int n, pxvm_error *err);
    /* Restarts a stream: persistent slots back to their initial state and every item unprimed
     * (its next DIFF marks every tile dirty, its incremental instructions all sample). */
    int (*reset)(pxvm_executor *ex, pxvm_error *err);
    /* Tokens for models (vm/tokens.h): after a run, atlas slot `slot` of items item0 .. item0+items-1
     * through the table t (checked with pxvm_check_tokens) into dst, contiguous, host memory
     * (device < 0) or CUDA memory (CUDA-GL only, on the stream). NULL: not implemented. */
    int (*read_tokens)(pxvm_executor *ex, int slot, int item0, int items, const struct pxvm_token_table *t, void *dst,
                       int device, pxvm_error *err);
    /* Switches the loaded program to `prog`: a program with the same slots as the loaded one except the sizes (and
     * levels) of input slots, and the same instructions except operand values (vm/resolve.c makes such programs).
     * Inputs whose size changed are unbound; everything else stays as it was (other bound inputs, fixation
     * registers, persistent slots, the stream). `prog` must stay alive until the next load, retarget or close.
     * The one way an any-size input's size changes: pxvm_runner resolves at the new size and retargets. */
    int (*retarget)(pxvm_executor *ex, const pxvm_program *prog, pxvm_error *err);
    /* A batch of images resized by a policy and cut into tiles (vm/ragged.h: the job is checked
     * and planned; public pxvm_runner_ragged). Touches nothing of the loaded program. */
    int (*ragged)(pxvm_executor *ex, const struct px_ragged_job *job, pxvm_error *err);
    /* Memory of at least `bytes` the executor owns where it keeps its data (*device -1: host; else
     * CUDA memory of that device), valid until the next scratch call or close, and usable by work
     * the executor enqueues before then (a later call frees the old memory in stream order). */
    int (*scratch)(pxvm_executor *ex, size_t bytes, void **ptr, int *device, pxvm_error *err);
    /* What the executor can take, asked by the front doors instead of which executor it is:
     * device_views 1: bind and borrow take views of CUDA memory (view->device >= 0); 0: host
     * memory only (such a view is refused, PXE_HOST_ONLY_BIND and its kin). */
    int device_views;
    /* Fused EMBED (public pxvm_runner_fuse_embed): fused[ninsns] marks the EMBED instructions of
     * the loaded program that pxvm_embed_fusion accepts, whose atlas the fetches need not write
     * (they may hand the EMBED its tokens directly); NULL: none (the default after every load).
     * Kept across retarget. NULL op: the executor writes every atlas (the CPU executor: the
     * runner refuses the reads either way, so the executors agree). */
    int (*fuse_embed)(pxvm_executor *ex, const uint8_t *fused, pxvm_error *err);
} pxvm_executor_ops;

/* PXVM_STATE_CHANGED: per token of an atlas slot, one byte: 1 if the last run sampled it. */
enum { PXVM_STATE_FIXATIONS = 0, PXVM_STATE_GEOMETRY = 1, PXVM_STATE_CHANGED = 2 };
#define PXVM_MAX_RECTS 256 /* dirty rectangles per item and run */
int pxvm_check_dirty(const pxvm_program *prog, int batch, int item, const pxvm_rect *rects, int n, pxvm_error *err);
/* Does a dirty rectangle list mark tile (tx, ty)? */
int pxvm_rects_touch_tile(const pxvm_rect *rects, int n, int tx, int ty);
/* The int32 values per item of a state (PXVM_STATE_*) as the executors store it (geometry: of
 * every atlas slot). */
size_t pxvm_state_ints(const pxvm_program *prog, int what);
/* The bytes of one value of a state (int32 for fixations and geometry, uint8 for changed). */
size_t pxvm_state_elem(int what);
/* Checks set_fixations' and read_state's arguments for any executor. */
int pxvm_check_fixations(const pxvm_program *prog, int batch, int item0, int items, int reg0, int nregs, const void *xy,
                         pxvm_error *err);
int pxvm_check_state(const pxvm_program *prog, int batch, int what, int slot, int item0, int items, const void *dst,
                     pxvm_error *err);
/* The geometry table's value before any run: every token (0, 0, 0, 0, -1). */
void pxvm_geometry_clear(int32_t *g, size_t tokens);

/* Prints "SLOT Llevel WxH hash" for every level of every slot of item 0, the format of the
 * goldens in tests/golden/ and of `pxrun --hash`. */
int pxvm_hash_report(const pxvm_executor_ops *ops, pxvm_executor *ex, const pxvm_program *prog, FILE *out,
                     pxvm_error *err);

/* Checks that `next` may replace `loaded` by an executor's retarget (vm/retarget_check.c): the same
 * slot count, and per slot the same role, flags, name, patch geometry and, except for input
 * slots, size and levels; the same token geometry; the same instruction count and opcodes; the
 * same frame-only inputs. Anything else is a usage error naming what differs. */
int pxvm_check_retarget(const pxvm_program *loaded, const pxvm_program *next, pxvm_error *err);

/* Checks the common preconditions of read (the slot and level exist) for any executor. */
int pxvm_check_read(const pxvm_program *prog, int slot, int level, pxvm_error *err);
/* ... and of a read into dst: items within the batch, an RGBA8 view of the level's size (or, with
 * `patches`, of an atlas slot's patches: w = patch_w, h = patch_h * patch_count). */
int pxvm_check_read_view(const pxvm_program *prog, int batch, int slot, int level, int item0, const pxvm_view *dst,
                         int patches, pxvm_error *err);
/* Checks the common preconditions of bind (role, size, items within the batch, the view's
 * channels and sizes) for any executor. */
int pxvm_check_bind(const pxvm_program *prog, int batch, int slot, int item0, const pxvm_view *v, pxvm_error *err);
/* ... those of them that read the view alone (its shape, items within the batch), in that order */
int pxvm_check_input_view(int batch, int item0, const pxvm_view *v, pxvm_error *err);

/* ---- views ---------------------------------------------------------------------------------- */

/* The view of a whole image (one item, RGBA8, host). */
pxvm_view pxvm_image_view(const pxvm_image *img);
/* Item `item` of a host view converted to RGBA8 (the rule in include/pxvm.h) into dst, w*4 bytes a
 * row. The CUDA-GL executor's kernel for device views computes the same (px_view_texel). */
void pxvm_view_to_rgba(const pxvm_view *v, int item, uint8_t *dst);
/* A view is plain RGBA8 rows: channels 4, px_stride 4, ch_stride 1, row_stride w*4. */
int pxvm_view_is_packed_rgba(const pxvm_view *v);
/* Copies a level of a slot (w x h RGBA8, contiguous at src) into item `item` of dst, as rows or,
 * with `patches`, as the atlas's patches. Host memory on both sides. */
void pxvm_copy_out(const pxvm_slot *s, int level_w, int level_h, const uint8_t *src, const pxvm_view *dst, int item,
                   int patches);
/* Patches p0 .. p1-1 of that copy (level 0 of an atlas slot), so that a caller may spread them. */
void pxvm_copy_out_patches(const pxvm_slot *s, int level_w, const uint8_t *src, const pxvm_view *dst, int item, int p0,
                           int p1);
/* Binds a whole image (host RGBA8) to item 0 of an input slot. */
int pxvm_bind_image(const pxvm_executor_ops *ops, pxvm_executor *ex, int slot, const pxvm_image *img, pxvm_error *err);
/* Reads a level of one item into a new image (allocated here). */
int pxvm_read_image(const pxvm_executor_ops *ops, pxvm_executor *ex, const pxvm_program *prog, int slot, int level,
                    int item, pxvm_image *img, pxvm_error *err);
/* Initial level-0 contents of a non-input slot (program image, data copy, or zeros): writes
 * w*h*4 bytes into dst. Executors fill every slot this way at load, then apply prog->reset at
 * the start of every run. */
void pxvm_slot_initial(const pxvm_program *prog, int slot, uint8_t *dst);

#ifdef __cplusplus
}
#endif
/* tests/check-errors compiles the sources with PXVM_CHECK_FORMATS naming a header that turns each
 * pxvm_fail(err, PXE_NAME, x, y, values...) into a printf of the entry's format, so that the compiler
 * checks the values' types against errors.def (a code known only at run time is called as
 * (pxvm_fail)(...), which no macro touches). */
#ifdef PXVM_CHECK_FORMATS
#include PXVM_CHECK_FORMATS
#endif
#endif
