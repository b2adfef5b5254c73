/* resize.h - RESIZE's filter tables (computed on the host) and its host reference.
 *
 * RESIZE gives the bytes of Pillow's Image.resize((w, h), filter) on 8-bit channels, each
 * channel resampled on its own (Pillow's L, RGB, RGBX; not its RGBA, which Image.resize
 * premultiplies first). isa/SPEC.md (RESIZE) states the rule; isa/px_resize.h holds the per-sample
 * integer arithmetic that both executors run.
 */
#ifndef PX_RESIZE_TABLES_H
#define PX_RESIZE_TABLES_H

#include <stdint.h>

#include "vm.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Filters, numbered as Pillow numbers them (PIL.Image.Resampling). */
typedef enum px_resize_filter {
#define PX__RESIZE_FILTER_ENUM(NAME, value, name, sep) PX_RESIZE_##NAME = value,
    PX_RESIZE_FILTERS(PX__RESIZE_FILTER_ENUM)
#undef PX__RESIZE_FILTER_ENUM
    PX_RESIZE__FILTERS /* the count: the list's values are 0, 1, ... in order */
} px_resize_filter;

/* Sides from 1 to 2^24: Pillow passes the source side to its tables as a float, exact up to 2^24. */
#define PX_RESIZE_MAX_SIDE (1 << 24)

/* The table of one axis, in_size -> out_size. Output index i reads source indices
 * first[i] .. first[i] + count[i] - 1 with the Q22 coefficients k[i * ksize + j], j < count[i]
 * (the rest of the row of ksize is 0). NEAREST has no coefficients (ksize 0, k NULL): first[i]
 * is the one source index, or -1 for Pillow's fill value 0, and count[i] is 1 (0 for -1). */
typedef struct px_resize_table {
    int in_size, out_size, filter;
    int ksize;      /* Pillow's ksize: 2 * ceil(support) + 1; 0 for NEAREST */
    int32_t *first; /* [out_size] */
    int32_t *count; /* [out_size] */
    int32_t *k;     /* [out_size * ksize] */
} px_resize_table;

/* Computes the table of one axis exactly as Pillow 9.4 does (precompute_coeffs in IEEE double,
 * then normalize_coeffs_8bpc to Q22; NEAREST: the affine scale's positions). Returns 0, or -1
 * with *err set (sizes outside 1..PX_RESIZE_MAX_SIDE, an unknown filter, no memory). */
int px_resize_coeffs(int in_size, int out_size, int filter, px_resize_table *t, pxvm_error *err);
void px_resize_table_free(px_resize_table *t);

/* "nearest", "box", "bilinear", "hamming", "bicubic", "lanczos" (any case) -> filter, or -1. */
int px_resize_filter_parse(const char *name);
const char *px_resize_filter_name(int filter); /* "?" for an unknown one */

/* The host reference: resizes sw x sh pixels of `channels` (1..4) interleaved uint8 channels,
 * rows `sstride` bytes apart, to dw x dh pixels at dst (rows `dstride` bytes apart), as Pillow:
 * equal sizes copy; NEAREST picks source pixels; any other filter runs the horizontal pass (when
 * the width changes) into 8-bit pixels, then the vertical pass (when the height changes), streamed
 * as px_resize_tile does: besides the tables it holds at most a few rows of dw (resize.h,
 * px_resize_op), never Pillow's dw x sh intermediate. Returns 0, or -1 with *err set. */
int px_resize_rgba8(const uint8_t *src, int sw, int sh, int64_t sstride, uint8_t *dst, int dw, int dh,
                    int64_t dstride, int filter, int channels, pxvm_error *err);

/* px_resize_rgba8 in bands of output rows, each on its own thread with its own scratch: `threads`
 * bands (at most one per row), or, for threads <= 0, up to px_resize_threads() as the work pays
 * for (a small image stays on the caller's thread). The same bytes: a band is px_resize_tile of
 * its rows. */
int px_resize_rgba8_threads(const uint8_t *src, int sw, int sh, int64_t sstride, uint8_t *dst, int dw, int dh,
                            int64_t dstride, int filter, int channels, int threads, pxvm_error *err);

/* The threads a host resize takes by default: PXVM_RESIZE_THREADS (1..64) when set, else the
 * online cores (at most 64). */
int px_resize_threads(void);

/* One RESIZE instruction as both executors run it, decided when a program is bound (its sizes
 * are fixed then): the content rectangle inside dst (the fit rule, px_resize_fit), the tables of
 * both axes, and which passes run, with px_resize_rgba8's bytes:
 *   copy      the content has the source's size: texels copied;
 *   NEAREST   content texel (x, y) = source texel (tx.first[x], ty.first[y]);
 *   else      Pillow's order: the horizontal pass (when hpass) into 8-bit rows, then the vertical
 *             pass (when vpass) over them. row0, rows: the source rows Pillow's horizontal pass
 *             covers (all when the height does not change), the cw x rows buffer the CUDA-GL
 *             executor keeps whole (px_resize_need counts it).
 * The CPU (px_resize_tile) streams the vertical pass instead of keeping that buffer:
 *   sel       the horizontal pass only copies source columns (sel[x], px__selection in
 *             resize.c): the vertical pass reads the source columns and the copy follows (exact:
 *             a copy commutes with it), no buffer, and a column is summed once however often it
 *             repeats;
 *   vopen     > 0: source rows are resized horizontally one at a time and added to the uint32
 *             sums of the (at most vopen) output rows whose runs hold them; 0: a ring of vring
 *             rows (stored twice when vwrap, so every run is contiguous), each row computed once.
 *   vunits    the scratch of a tile, in rows of its width (px_resize_tile_bytes); 0: none.
 * Texels of the rectangle outside the content are pad (R | G << 8 | B << 16 | A << 24). */
typedef struct px_resize_op {
    int src, dst, filter;
    int sw, sh;           /* src level 0 */
    int x, y, w, h;       /* the rectangle of dst level 0 */
    int cx, cy, cw, ch;   /* the content, inside dst level 0 (absolute) */
    uint32_t pad;
    int copy, hpass, vpass;
    int row0, rows;       /* the source rows Pillow's horizontal pass covers */
    px_resize_table tx, ty; /* sw -> cw, sh -> ch */
    int32_t *sel;         /* [cw] when the horizontal pass is a copy of columns, else NULL */
    int vopen, vring, vwrap, vunits;
    int tiles_x, tiles_y; /* the CPU executor's split of the content (set at its load) */
    int src_x, src_y;     /* where the op's sw x sh source starts in the caller's image: a crop's
                           * window on an axis that is not resized (px_resize_op_window); else 0 */
} px_resize_op;

/* Content rows y0..y1-1, columns x0..x1-1 (of the cw x ch content) of op, from src (sw x sh
 * texels of `channels` interleaved bytes, rows sstride apart) into dst (the content's first
 * texel, rows dstride apart); scratch: px_resize_tile_bytes(op, x1 - x0, channels) bytes, its own
 * (tiles run in parallel). Every byte is px_resize_rgba8's (Pillow's). */
void px_resize_tile(const px_resize_op *op, const uint8_t *src, int64_t sstride, uint8_t *dst, int64_t dstride,
                    int channels, int x0, int x1, int y0, int y1, uint8_t *scratch);
size_t px_resize_tile_bytes(const px_resize_op *op, int tw, int channels);

/* px_resize_rgba8_threads's bands for a built op: its cw x ch content from src (the op's source,
 * src_x / src_y already applied by the caller) into dst. 0, or -1 with *err set. */
int px_resize_op_threads(const px_resize_op *op, const uint8_t *src, int64_t sstride, uint8_t *dst, int64_t dstride,
                         int channels, int threads, pxvm_error *err);

/* The hot loops of px_resize_tile (vm/resize_kernels.c), in portable C and in AVX2, the same
 * bytes either way: hrow4, columns x0 .. x1-1 of the horizontal pass of one row of 4-channel
 * texels (hrow3: 3-channel, never reading past the row's tx->in_size texels); vrow, d[i] = the sample of the column at t + i over count rows stride bytes apart
 * (coefficients k), i < n; vmac, a[i] += t[i] * k (mod 2^32); vclamp, d[i] = px_resize_clamp(a[i]). */
typedef struct px_resize_kernels {
    const char *name; /* "portable" or "avx2" */
    void (*hrow4)(const uint8_t *s, const px_resize_table *tx, int x0, int x1, uint8_t *t);
    void (*hrow3)(const uint8_t *s, const px_resize_table *tx, int x0, int x1, uint8_t *t); /* RGB texels */
    void (*vrow)(const uint8_t *t, int64_t stride, int count, const int32_t *k, uint8_t *d, size_t n);
    void (*vmac)(uint32_t *a, const uint8_t *t, uint32_t k, size_t n);
    void (*vclamp)(const uint32_t *a, uint8_t *d, size_t n);
} px_resize_kernels;

/* The kernels in use: AVX2 where the CPU has it, unless PXVM_RESIZE_PORTABLE is set (non-empty,
 * not "0"), chosen at the first call. */
const px_resize_kernels *px_resize_kernels_get(void);

/* Chooses the kernels (tests compare the two): PX_RESIZE_ISA_AUTO as at the first call, or one
 * by name. 0, or -1 when this CPU (or build) lacks it. Not to be called while a resize runs. */
enum { PX_RESIZE_ISA_AUTO, PX_RESIZE_ISA_PORTABLE, PX_RESIZE_ISA_AVX2 };
int px_resize_isa(int isa);

/* The memory rule of RESIZE (isa/SPEC.md, RESIZE, V-RESIZE-5): the bytes one RESIZE of a sw x sh
 * source into a w x h rectangle (fit, filter) needs besides the slots: its two tables (first and
 * count per output index, and ksize coefficients each: 4 * (cw * (2 + ksx) + ch * (2 + ksy))) and
 * the 8-bit intermediate of Pillow's order (4 * cw * rows, rows as px_resize_op's), except when
 * the horizontal pass is a copy of columns (sw = 1, or BOX upscaling: rows 0, and 4 * cw for
 * sel[]). Computed from the sizes alone, in O(1), before anything is built; what each executor
 * holds is at most this. Sets the content size and the rows counted. */
uint64_t px_resize_need(int sw, int sh, int w, int h, int fit, int filter, int *cw, int *ch, int *rows);

/* ---- resolution policies: how an image of any size meets an input slot of a fixed size --------
 *
 *   native                 the image bound at its own size (an any-size input takes it as it is;
 *                          the tools and bindings refuse it for a fixed-size one): nothing resized
 *   exact                  the image must have the slot's size (another size is unlinkable)
 *   stretch[:FILTER]       resized to the slot's size (RESIZE with fit 0)
 *   fit[:FILTER][:PAD]     letterboxed: px_resize_fit's content size and offset, the bars PAD
 *                          (RESIZE with fit 1); PAD is R,G,B[,A] in decimal or hex RRGGBB[AA]
 *   crop[:short=S][:FILTER] CLIP's: the short side resized to S (default max(W, H)), the long
 *                          side to int(S * long / short) (a double division, truncated), then the
 *                          centre W x H of it; a side under the crop's is centred on pad 0,0,0,255
 *                          (px_policy_geometry; docs/policies.md)
 *   dynamic[:KEYS][:FILTER] the slot follows the image: px_dynamic_size's w' x h' (Qwen2-VL's
 *                          smart_resize), the program compiled for that size (a uniform plan);
 *                          KEYS: patch=P,merge=M,min=PIXELS,max=PIXELS, any of them, any order
 * FILTER: one of px_resize_filter_parse's names (default bicubic); PAD default 0,0,0,255. */
typedef enum px_policy_kind {
    PX_POLICY_EXACT = 0,
    PX_POLICY_STRETCH = 1,
    PX_POLICY_FIT = 2,
    PX_POLICY_DYNAMIC = 3,
    PX_POLICY_NATIVE = 4,
    PX_POLICY_CROP = 5
} px_policy_kind;

/* dynamic's defaults: Qwen2-VL's image processor (merge 2, min 56*56, max 28*28*1280 pixels);
 * the patch defaults to the plan's. */
#define PX_DYNAMIC_MERGE 2
#define PX_DYNAMIC_MIN_PIXELS 3136
#define PX_DYNAMIC_MAX_PIXELS 1003520
#define PX_DYNAMIC_PIXELS_MAX (1ll << 40) /* the largest min= or max= */

typedef struct px_policy {
    int kind;       /* px_policy_kind */
    int filter;     /* px_resize_filter */
    uint8_t pad[4]; /* R, G, B, A (fit) */
    int patch;      /* dynamic: the token side (0: not given, the plan's) */
    int merge;      /* dynamic: sides are multiples of patch * merge */
    int64_t min_pixels, max_pixels; /* dynamic: the area's bounds */
    int threads;    /* px_resize_policy's bands: 0 (as parsed) one, -1 as the work pays for (px_resize_rgba8_threads) */
    int short_side; /* crop: short=S, 0 when not given (max(W, H)) */
} px_policy;

/* Where a policy puts a sw x sh image on a w x h canvas: resized to rw x rh, of which the canvas
 * shows the cw x ch window from (sx, sy), at (cx, cy); the rest of the canvas is pad. stretch,
 * dynamic, exact: all of a w x h resize; fit: px_resize_fit's; crop: per axis, with
 * t = floor((r - w) / 2) (transformers' center_crop): t >= 0 shows r's [t, t + w) at 0, t < 0
 * all of r at -t (its zero padding centred, the same floor). */
typedef struct px_policy_geom {
    int w, h, rw, rh, sx, sy, cx, cy, cw, ch;
} px_policy_geom;
/* 0, or -1 with a usage error: crop's long side past PX_RESIZE_MAX_SIDE (naming both sizes). */
int px_policy_geometry(const px_policy *p, int sw, int sh, int w, int h, px_policy_geom *g, pxvm_error *err);
/* The RESIZE of a geometry: tables of sw -> rw (sh -> rh) sliced to the window's columns (rows),
 * so that only the shown texels are computed; an axis that is not resized (rw == sw) reads the
 * window of the source instead (op->src_x / src_y, op->sw / sh the window's side). */
int px_resize_op_window(int sw, int sh, const px_policy_geom *g, int filter, uint32_t pad, px_resize_op *op,
                        pxvm_error *err);

/* Parses a policy text (NULL: none given, exact; "" is refused). 0, or -1 with a usage error naming
 * the text and listing every kind (native among them). */
int px_policy_parse(const char *text, px_policy *p, pxvm_error *err);
/* "exact", "stretch:bicubic", "fit:bicubic:0,0,0,255", "dynamic:patch=16,merge=2,min=3136,
 * max=1003520:bicubic" (patch= left out while it is 0): the canonical text of a policy. */
void px_policy_format(const px_policy *p, char *buf, size_t len);
/* Applies a policy to an RGBA8 image for a w x h slot: *dst (allocated here, free with
 * pxvm_image_free) is a copy when src is already w x h (any policy); otherwise, stretch: src
 * resized to w x h (dynamic: the same, w x h being px_dynamic_size's), fit: a w x h canvas of pad with src resized to px_resize_fit's nw x nh at
 * (ox, oy); byte for byte what RESIZE writes with the same filter, fit and pad. exact with
 * another size: -1 with a usage error (callers bind the image as it is to get the slot's
 * unlinkable error instead). 0, or -1 with *err set. */
int px_resize_policy(const pxvm_image *src, int w, int h, const px_policy *p, pxvm_image *dst, pxvm_error *err);
/* The same from sw x sh pixels of 1 (grey), 3 (RGB) or 4 (RGBA) interleaved channels, rows of
 * sw * channels bytes: px_resize_policy of the image widened to RGBA (grey v -> (v, v, v, 255),
 * RGB -> (r, g, b, 255)), the widening done here. */
int px_resize_policy_px(const uint8_t *px, int sw, int sh, int channels, int w, int h, const px_policy *p,
                        pxvm_image *dst, pxvm_error *err);

/* dynamic: sets p->patch to the plan's patch, or checks that a patch= given is it (a usage error
 * naming both); other kinds: nothing. 0, or -1. */
int px_policy_dynamic_patch(px_policy *p, int patch, pxvm_error *err);
/* dynamic: the size a w x h image is resized to (p->patch must be set), as docs/policies.md states it
 * (Qwen2-VL's smart_resize with f = patch * merge). 0, or -1: an aspect
 * ratio over 200:1, or a side past PX_RESIZE_MAX_SIDE (PXE_DYNAMIC_ASPECT, PXE_DYNAMIC_SIDE: unlinkable). */
int px_dynamic_size(const px_policy *p, int w, int h, int *ow, int *oh, pxvm_error *err);

/* Builds one RESIZE (operands as decoded, src level 0 sw x sh). 0, or -1 with *err set. */
int px_resize_op_make(const pxi_insn *in, int sw, int sh, px_resize_op *op, pxvm_error *err);
void px_resize_op_free(px_resize_op *op);
/* The same for a sw x sh source resized into a w x h rectangle at (0, 0) (fit 0 stretch, 1 fit:
 * px_resize_fit; pad R | G << 8 | B << 16 | A << 24): the RESIZE a policy applies. */
int px_resize_op_sizes(int sw, int sh, int w, int h, int fit, int filter, uint32_t pad, px_resize_op *op, pxvm_error *err);

#ifdef __cplusplus
}
#endif

#endif
