/* pxvm.h - the public C API of libpxvm: pixel programs (foveated image pyramids) run on a CPU
 * reference executor or a CUDA-GL executor, with bit-identical results.
 *
 *   pxvm_prog *prog;  pxvm_runner *run;
 *   if (pxvm_prog_load("foveate273.pxi", NULL, &prog) ||
 *       pxvm_runner_open(prog, "auto", 0, 0, 1, &run))
 *       fprintf(stderr, "%s\n", pxvm_errmsg());
 *   pxvm_view in = pxvm_view_host(rgb, w, h, 3);            // an RGB8 frame in host memory
 *   pxvm_runner_bind(run, pxvm_prog_slot_find(prog, "image"), 0, &in);
 *   pxvm_runner_run(run);
 *   pxvm_runner_read_patches(run, pxvm_prog_slot_find(prog, "atlas"), 0, &out);
 *
 * Conventions (in the manner of zlib and SQLite):
 * - Handles are opaque. What a call allocates, the matching _free/_close releases; strings and
 *   buffers returned through pointers are released with pxvm_free.
 * - Every call that can fail returns 0 on success or a positive pxvm_class; the message of the
 *   last failure on the calling thread is pxvm_errmsg() (the words pxrun prints), its class
 *   pxvm_errclass(). A failed call changes nothing the caller can observe (no output is written),
 *   except where its comment says what it leaves (pxvm_runner_exec's inputs, a failed change of size).
 * - Memory the caller lends is lent for as long as the call's comment says and never read after:
 *   pxvm_runner_borrow until the next run returns, pxvm_runner_exec until it returns, page-locked
 *   images given to pxvm_runner_bind on the cuda executor until the next run returns.
 * - Thread safety: distinct handles may be used from distinct threads at once; one handle must
 *   not be used by two threads at once. A pxvm_prog may be shared read-only by many runners.
 * - Blocking: only pxvm_runner_run (without a stream), reads into host memory and
 *   pxvm_runner_sync wait for the device; with a stream set (pxvm_runner_set_stream) binds,
 *   runs and device reads are enqueued and return at once.
 */
#ifndef PXVM_PUBLIC_H
#define PXVM_PUBLIC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PXVM_VERSION_MAJOR 1
#define PXVM_VERSION_MINOR 0
#define PXVM_VERSION_PATCH 0
#define PXVM_VERSION "1.0.0"
/* The library's version as "1.0.0" (may differ from the header the caller was built with). */
const char *pxvm_version(void);

/* ---- errors --------------------------------------------------------------------------------- */

/* The class of a failure: what pxrun's exit status and the Python exception say. */
typedef enum pxvm_class {
    PXVM_OK = 0,
    PXVM_MALFORMED,   /* a file is not a .pxi / PNG / JPEG at all */
    PXVM_INVALID,     /* it decodes but breaks a rule of the format or a limit */
    PXVM_UNLINKABLE,  /* the images bound do not fit the program's slots */
    PXVM_TRAP,        /* a valid, linked program failed while running */
    PXVM_IO,          /* files, memory */
    PXVM_USAGE,       /* arguments: names, sizes, layouts */
    PXVM_UNAVAILABLE, /* an executor that cannot run here */
    PXVM_ASSEMBLY,    /* pxasm source */
    PXVM_PLAN         /* allocation plans */
} pxvm_class;

/* The message of the calling thread's last failure ("" if none): the same text pxrun prints,
 * e.g. "invalid program: pixel (5,0): instruction 0 (SAMPLE): ...". Valid until the thread's
 * next failing call. */
const char *pxvm_errmsg(void);
pxvm_class pxvm_errclass(void);
/* After a successful pxvm_image_load / pxvm_image_decode on this thread: with
 * PXVM_DECODE_LENIENT, the damage the decoder went past (a truncated or corrupt file), in pxrun's
 * words ("malformed: ..."); in both modes, else, the note of bytes after the image's end marker
 * ("'x.jpg': 1234 bytes after the JPEG's end-of-image marker (which ends at byte 56789)
 * ignored"); "" when the file decoded cleanly. Strict decodes (the default) refuse damage. */
const char *pxvm_warning(void);
/* "malformed", "invalid", "unlinkable", "trap", "i/o error", "usage", "unavailable", "assembly error",
 * "plan error": the words before the colon in pxvm_errmsg(). */
const char *pxvm_class_name(pxvm_class cls);
/* What the calling thread's last failure is about, as fields (no need to read pxvm_errmsg()):
 * item: the batch item of the bind that failed (the first item of its view), in a
 * pxvm_runner_bind, _borrow or _exec; slot: that bind's slot; file: the file of a failed
 * pxvm_image_load or the name given to a failed pxvm_image_decode. -1, -1 and "" when the failure
 * is about no one item, slot or file; file is valid until the thread's next failing call. A
 * ragged batch names its image in pxvm_ragged.failed. NULL: PXVM_USAGE (nothing is recorded). */
typedef struct pxvm_error_info {
    int item;
    int slot;
    const char *file;
} pxvm_error_info;
int pxvm_last_error_info(pxvm_error_info *info);
/* Releases what a pxvm_ call returned through a pointer (text, encoded images). NULL is fine. */
void pxvm_free(void *p);

/* ---- limits --------------------------------------------------------------------------------- */

typedef struct pxvm_limits {
    uint32_t max_side;   /* largest image or slot side, 1..65535 (default 16384; PXVM_USAGE otherwise) */
    uint64_t max_memory; /* bytes of all slots with mip chains, or of one decoded image with the
                          * decoder's own buffers (1 GiB) */
    uint32_t max_insns;  /* instructions in one program (1<<20) */
    uint64_t max_steps;  /* instructions executed by one run (1<<24) */
    uint32_t flags;      /* PXVM_DECODE_* (default 0: strict) */
} pxvm_limits;

/* Decoders are strict by default: a truncated or corrupt PNG or JPEG (a libpng or libjpeg-turbo
 * warning, a CRC or zlib error, data missing before the end marker) is an error (PXVM_MALFORMED)
 * naming the file (and, where this flag would decode it, --lenient). PXVM_DECODE_LENIENT means
 * "recover a damaged image" and only that: the decoder decodes what it can (a truncated JPEG's
 * missing rows are grey) and pxvm_warning() says what it went past (pxrun --lenient prints it).
 * Bytes after a complete image (after the PNG's IEND chunk or the JPEG's end-of-image marker: a
 * phone's motion-photo video, an MPF file's second image, padding) are no damage: accepted in
 * both modes, and noted in pxvm_warning(). Limits apply in both modes. */
#define PXVM_DECODE_LENIENT 1u
/* Applies the image's EXIF orientation (tag 0x0112, 1..8) as Pillow's ImageOps.exif_transpose
 * does (Hugging Face's load_image calls it): the pixels turned into the upright image, w and h
 * swapped for 5..8, the oriented size the one checked against the limits and a slot's size.
 * Read from a JPEG's first APP1 "Exif" segment or a PNG's eXIf chunk; an absent or malformed
 * EXIF block (truncated, garbage, an offset outside it, a value outside 1..8) changes nothing,
 * as Pillow ignores it. Off by default: the pixels as stored, as pxrun --in reads them. */
#define PXVM_DECODE_EXIF_TRANSPOSE 2u

void pxvm_limits_default(pxvm_limits *lim);

/* ---- image views: caller memory the library reads or writes ---------------------------------- */

/* `items` images of w x h pixels of `channels` uint8 each, at any byte strides: pixel (x, y) of
 * item i, channel c is at data + i*item_stride + y*row_stride + x*px_stride + c*ch_stride.
 * HWC is (row_stride = w*C, px_stride = C, ch_stride = 1), CHW is (w, 1, w*h), and any view of
 * NumPy or PyTorch (sliced, transposed) is a view too. `device` < 0: host memory; >= 0: memory of
 * that CUDA device (the CUDA-GL executor only; never copied through the host).
 *
 * Binding converts to the VM's RGBA8 exactly: 4 channels as they are, 3 channels (R, G, B, 255),
 * 1 channel (v, v, v, 255) - the rule pxvm applies to grey PNGs. Reads write RGBA8 only
 * (channels 4, px_stride 4, ch_stride 1). Strides are not checked against the memory behind
 * `data`: a view must describe memory that exists. */
typedef struct pxvm_view {
    void *data;
    int device;
    int items, w, h, channels;
    int64_t item_stride, row_stride, px_stride, ch_stride;
} pxvm_view;

/* A single contiguous HWC host image (channels 1, 3 or 4). */
pxvm_view pxvm_view_host(const void *data, int w, int h, int channels);

/* Decodes a PNG or a JPEG file (told apart by their signatures) into RGBA8, exactly as pxrun
 * reads --in files: PNG through libpng (palette, grey, 16-bit converted, see the spec), JPEG
 * through libjpeg-turbo (grey and YCbCr to RGB, A = 255). Sides and decoded size are checked
 * against `lim` (NULL: defaults) from the header, before anything is decoded. *rgba is released
 * with pxvm_free. */
int pxvm_image_load(const char *path, const pxvm_limits *lim, uint8_t **rgba, int *w, int *h);
/* The same from bytes in memory; `name` is used in messages. */
int pxvm_image_decode(const void *data, size_t len, const char *name, const pxvm_limits *lim, uint8_t **rgba,
                      int *w, int *h);
/* Encodes w x h RGBA8 pixels (contiguous) as PNG, deterministically. *png is released with pxvm_free. */
int pxvm_image_encode_png(const uint8_t *rgba, int w, int h, void **png, size_t *len);

/* Applies a resolution policy to w x h RGBA8 pixels (contiguous) for an out_w x out_h input slot,
 * on the host: *out (out_w x out_h RGBA8, released with pxvm_free) is a copy when the sizes are
 * equal (any policy but crop, which always applies its rule); otherwise policy is
 *   "exact"               (or NULL; "" is a bad text): another size is a usage error;
 *   "native"              as exact here (the image is bound as it is: an any-size input takes
 *                         any size, which pxvm_runner_bind does without this call);
 *   "stretch[:FILTER]"    resized to out_w x out_h, aspect not kept;
 *   "fit[:FILTER][:PAD]"  letterboxed: resized with its aspect kept and centred, the bars PAD
 *                         ("R,G,B[,A]" or hex "RRGGBB[AA]", default 0,0,0,255);
 *   "crop[:short=S][:FILTER]"  CLIP/LLaVA's (transformers 4.x get_resize_output_image_size
 *                         with default_to_square=False, then center_crop): the short side
 *                         resized to S (1..2^24, default max(out_w, out_h)), the long side to
 *                         int(S * long / short) (one double division, truncated; short == S
 *                         keeps the size), then the centre out_w x out_h of it, top =
 *                         floor((h' - out_h) / 2), left likewise; a resized side under the
 *                         crop's is centred on pad (0, 0, 0, 255) at -floor((h' - out_h) / 2) =
 *                         ceil((out_h - h') / 2), as transformers pads with zeros. Only the kept
 *                         texels are computed. A long side past 2^24 is a usage error naming it;
 *   "dynamic[:KEYS][:FILTER]"  resized to out_w x out_h as stretch does: pass the size
 *                         pxvm_policy_dynamic_size gives (the slot follows the image);
 * FILTER nearest, box, bilinear, hamming, bicubic (default) or lanczos. The bytes are those of
 * the RESIZE instruction (isa/SPEC.md, RESIZE): Pillow's Image.resize (stretch), or Pillow's
 * resize to the fit size pasted at the fit offset on a pad canvas (fit). A bad policy text is a
 * usage error naming it. */
int pxvm_image_fit(const uint8_t *rgba, int w, int h, int out_w, int out_h, const char *policy, uint8_t **out);
/* The same from w x h pixels of `channels` interleaved bytes (contiguous): 1 grey, 3 RGB, 4 RGBA.
 * *out is RGBA8, byte for byte pxvm_image_fit's of the image widened to RGBA (grey v -> (v, v,
 * v, 255), RGB -> (r, g, b, 255)), widened inside the call. Both calls spread one large image
 * over the host's cores (PXVM_RESIZE_THREADS caps them). */
int pxvm_image_fit_channels(const uint8_t *px, int w, int h, int channels, int out_w, int out_h, const char *policy,
                            uint8_t **out);

/* The policy "dynamic[:KEYS][:FILTER]", KEYS a comma-separated list of patch=P (1..256; default:
 * the plan's), merge=M (1..64, default 2), min=PIXELS and max=PIXELS (1..2^40, min <= max; default
 * 3136 and 1003520: Qwen2-VL's image processor). With f = patch * merge, a w x h image becomes
 * w' x h' (docs/policies.md, the exact rule: Qwen2-VL's smart_resize):
 *   h' = round(h / f) * f, w' = round(w / f) * f        (round half to even; may be 0 here)
 *   if h' * w' > max: beta = sqrt(h * w / max), h' = max(f, floor(h / beta / f) * f), w' likewise
 *   else if h' * w' < min: beta = sqrt(min / (h * w)), h' = ceil(h * beta / f) * f, w' likewise
 * in IEEE double, one correctly rounded operation at a time; an aspect ratio max(w, h) / min(w, h)
 * over 200 is unlinkable (naming the size). Its tokens are the patch x patch tiles of the resized
 * image at LOD 0 in row-major order (the program of a "uniform" plan compiled for w' x h'): a
 * (1, h' / patch, w' / patch) grid. The area is not checked again after a clamp (as Qwen2-VL):
 * max(f, ...) can exceed max, and the ceil branch can too when min is close to max.
 * pxvm_policy_dynamic_size gives w' x h' for the plan's `patch` (a patch= that differs from it is
 * a usage error naming both); a policy that is not dynamic is a usage error. */
int pxvm_policy_dynamic_size(const char *policy, int patch, int w, int h, int *out_w, int *out_h);
/* Checks a policy text and writes its canonical form into buf[0..len) ("native" as it is, "fit" ->
 * "fit:bicubic:0,0,0,255", "dynamic" -> "dynamic:merge=2,min=3136,max=1003520:bicubic"); a bad
 * text is a usage error naming it; so is a buffer under the text's length + 1 (128 bytes always do). */
int pxvm_policy_canonical(const char *policy, char *buf, size_t len);

/* ---- programs ------------------------------------------------------------------------------- */

typedef struct pxvm_prog pxvm_prog; /* a loaded, validated program; immutable */

/* From a .pxi file, PNG bytes in memory, pxasm source text, or an allocation plan (JSON text;
 * the plan fields are in assembler/README.md). `lim` NULL: defaults. `name` is used in messages. */
int pxvm_prog_load(const char *path, const pxvm_limits *lim, pxvm_prog **out);
int pxvm_prog_from_png(const void *data, size_t len, const char *name, const pxvm_limits *lim, pxvm_prog **out);
int pxvm_prog_assemble(const char *text, const char *name, const pxvm_limits *lim, pxvm_prog **out);
int pxvm_prog_from_plan(const char *json, const char *name, const pxvm_limits *lim, pxvm_prog **out);
void pxvm_prog_free(pxvm_prog *prog);

/* pxasm source that assembles back to the same pixels; *text released with pxvm_free. */
int pxvm_prog_disassemble(const pxvm_prog *prog, char **text);
/* The program image as PNG bytes (a .pxi); *png released with pxvm_free. */
int pxvm_prog_encode(const pxvm_prog *prog, void **png, size_t *len);

/* What a caller needs to know of a slot. role: "program", "input", "output", "data", "scratch". */
typedef struct pxvm_slot_info {
    char name[16];
    const char *role;
    int w, h, levels;
    int patch_w, patch_h, patch_count; /* a patch atlas, or 0 */
    /* An any-size input (format 1.1): w x h is its reference size, and images of any size within
     * min_side .. max_side (both sides) and at most max_pixels pixels (0: no bound but the
     * limits) may be bound to it; 0 for every other slot. */
    int any_size, min_side, max_side;
    uint64_t max_pixels;
} pxvm_slot_info;

int pxvm_prog_slot_count(const pxvm_prog *prog);
/* Slot k (0 .. count-1); PXVM_USAGE when there is none. */
int pxvm_prog_slot(const pxvm_prog *prog, int k, pxvm_slot_info *info);
/* A slot by name or number ("image", "2"); -1 if none (no error is recorded). */
int pxvm_prog_slot_find(const pxvm_prog *prog, const char *name);

/* Any-size programs (isa/SPEC.md, "Any-size inputs"): the resolution of `prog` at the sizes
 * wh ([slot count][2]; for each any-size slot the width and height of the image it will take,
 * 0,0 for its reference size; 0,0 for every other slot): the program with exactly those input
 * sizes, what a runner of `prog` runs once images of those sizes are bound (pxasm --resolve
 * writes it). PXVM_UNLINKABLE naming the size for a size outside the slot's bounds, an operand
 * that would leave int32, or a resolution that breaks a rule (the memory limit); PXVM_USAGE
 * for a size given to a slot that is not any-size. */
int pxvm_prog_resolve(const pxvm_prog *prog, const int *wh, pxvm_prog **out);

/* ---- runners: a program loaded on an executor ------------------------------------------------ */

typedef struct pxvm_runner pxvm_runner;

/* Loads `prog` (which must outlive the runner) on an executor: "cpu", "cuda", or "auto" (cuda
 * when it opens here, else cpu). `device`: the CUDA device. `threads`: CPU worker threads
 * (0 = all cores; between a run's parallel loops they spin for up to 0.2 ms, yielding the
 * core after the first 0.05 ms, before they sleep; with more threads than cores they never
 * spin). `batch` >= 1: the runner holds that many independent copies of every slot (items), and
 * one run runs the program on all of them (on the GPU, one launch per plan step for the whole
 * batch). PXVM_UNAVAILABLE names why "cuda" cannot open. */
int pxvm_runner_open(const pxvm_prog *prog, const char *executor, int device, int threads, int batch,
                     pxvm_runner **out);
void pxvm_runner_close(pxvm_runner *run);
/* "cpu" or "cuda": the executor in use (after "auto", the one chosen). */
const char *pxvm_runner_executor(const pxvm_runner *run);
int pxvm_runner_batch(const pxvm_runner *run);

/* CUDA-GL only: enqueues all later work of the runner on the caller's CUDA stream (a cudaStream_t;
 * NULL: none, the default: the runner's own stream, each call returning when its work is done).
 * Work then runs after what was enqueued on the stream before the call that enqueues it, and
 * before what comes after (no device or stream is synchronised from the host; work enqueued
 * before the switch still runs first). With a stream set, pxvm_runner_run returns once the run
 * is enqueued, except for programs with DOT_RGB, whose traps are known only on the host. The
 * stream must stay valid while the runner may use it: until the next pxvm_runner_set_stream or
 * pxvm_runner_close (which waits for it). */
int pxvm_runner_set_stream(pxvm_runner *run, void *cuda_stream);

/* The resolutions of an any-size program a runner keeps: switching back to one of the last 64
 * sizes bound costs no resolution, and finds what the executor keeps for that resolution (the
 * CPU executor's plans and the CUDA-GL executor's configurations and graphs, 64 each, keyed by
 * the resolution). Each holds a copy of the program image: together they hold at most the
 * program's max_memory bytes (older sizes are dropped first; the one running is always kept). */
#define PXVM_RESOLVE_CACHE 64

/* Binds view->items images to input slot `slot`, items first_item .. first_item+items-1. The
 * images are copied (converted to RGBA8) into the runner before the call returns, or, with a
 * stream set, before the stream's later work: the caller may then reuse its memory. On the cuda
 * executor, packed RGBA8 in page-locked host memory (cudaHostAlloc, torch pin_memory) is
 * uploaded by the copy engine while the previous run computes: it is read as soon as the engine
 * gets to it, not after the caller's stream's earlier work, so write it from the CPU (a decoder)
 * or synchronise a device-to-host copy into it first.
 * PXVM_UNLINKABLE if the slot is no input or the size differs; PXVM_USAGE for a bad view.
 * An any-size input takes any size within its bounds (PXVM_UNLINKABLE naming them otherwise):
 * the runner switches to the program's resolution at that size (resolved once, then cached),
 * keeping the other bound inputs and the fixations; normalized fixations are fractions of the
 * bound image, converted again at its size. The items of a batch share one size: binding a new
 * size to some items while another item is bound at the current size is PXVM_UNLINKABLE (bind
 * every item at once, or group the images by size); the items not rebound are unbound. A bind
 * refused for any reason (a bad view, items outside the batch, a size outside the bounds) changes
 * nothing: the runner keeps its size and its bound images. If the executor fails to switch (out
 * of memory, say), the runner loads its program at the old size again: the call's error says so,
 * no input is left bound and fixations given in device memory are unset (bind and set them
 * again); if even that load fails, every later call on the runner but close is PXVM_UNAVAILABLE. */
int pxvm_runner_bind(pxvm_runner *run, int slot, int first_item, const pxvm_view *view);
/* The size slot `slot` has in the program the runner runs now: an any-size input's bound size
 * (its reference size until another is bound), any other slot's own. */
int pxvm_runner_slot_size(const pxvm_runner *run, int slot, int *w, int *h);
/* As pxvm_runner_bind, but the runner may read the memory in place when the next run executes
 * instead of copying it now (zero-copy). A borrow binds for one run: it ends when the next
 * pxvm_runner_run returns, whatever that returns (a refused run ends it too), or at the next bind
 * or borrow of the same items. Until then the memory must hold the frame: with a stream set, until
 * the stream gets past the run (work the caller enqueues after pxvm_runner_run may change it);
 * without one, whole when this call is made and unchanged until the run returns. Once the borrow
 * has ended the runner never reads the memory again: its items are unbound (a run without a new
 * bind is PXVM_UNLINKABLE, and so is reading their level 0), and the caller may free it. Where it
 * cannot be read in place it is copied as by pxvm_runner_bind, and still binds for one run. In place today: on the cpu executor any packed RGBA8 host
 * image; on the cuda executor a packed RGBA8 frame in its device's memory (16-byte aligned, items
 * back to back) bound for all items to an input that only DIFF and UPDATE read (a video frame). */
int pxvm_runner_borrow(pxvm_runner *run, int slot, int first_item, const pxvm_view *view);
/* keep = 1: the runner's borrows (pxvm_runner_borrow, and pxvm_runner_exec's when the call
 * succeeds) last until the next bind or borrow of the same items, a change of their size or
 * close, not until the next run: runs and reads of level 0 read the memory again. For a caller
 * that keeps every image it lends alive and unchanged that long (the Python package does: it
 * holds the last array given to each input). A failed exec still ends the borrows it made (those
 * kept from earlier calls stay). keep = 0, the default: as written above; setting it back to 0
 * ends every borrow kept meanwhile at once (their items unbound). PXVM_USAGE for another value. */
int pxvm_runner_keep_borrows(pxvm_runner *run, int keep);

/* Runs the program on every item. Each run starts from the initial state of every slot but the
 * bound inputs, which stay bound. PXVM_UNLINKABLE if an input of some item is unbound, or an
 * input fixation register of some item was never set (see "fixations" below). */
int pxvm_runner_run(pxvm_runner *run);

/* Copies level `level` of `slot` of items first_item.. into `dst` (RGBA8: channels 4,
 * px_stride 4, ch_stride 1, w x h the level's size), host or device memory. On the GPU a device
 * destination is written device-to-device on the runner's stream. Level 0 of an input is the
 * image bound to it: PXVM_UNLINKABLE for an item that is not bound (never, or no longer: a borrow
 * that ended, a change of size). */
int pxvm_runner_read(pxvm_runner *run, int slot, int level, int first_item, const pxvm_view *dst);
/* Copies the patches of an atlas slot as (items, patch_count, patch_h, patch_w, 4): `dst` has
 * w = patch_w, h = patch_h * patch_count, row_stride = patch_w*4 (the patches back to back, in
 * atlas order: left to right, top to bottom), item_stride >= the size of that. */
int pxvm_runner_read_patches(pxvm_runner *run, int slot, int first_item, const pxvm_view *dst);

/* Fused EMBED, an option (off by default; docs/embed.md). on = 1: every EMBED whose atlas only
 * feeds it (isa/SPEC.md, "Fused EMBED": a scratch atlas, not persistent, written only by SAMPLE,
 * ANISO and GATHER without a tile mask before the EMBED, read by nothing else) takes its tokens
 * from the sampler: on the cuda executor the fetches write each token's bytes straight into the
 * EMBED's staged rows, and the atlas is neither written nor staged again. EMBED's bytes are those
 * of an unfused run, on either executor. While it is on, and after a run made with it until the
 * next run that succeeds (or, once off, a change of size, after which it reads as zeros), a read
 * of such an atlas's level 0 (pxvm_runner_read, _read_patches, _read_tokens, and
 * pxvm_runner_exec's outputs) is PXVM_USAGE naming the slot, on both executors (the cpu one
 * still writes it; the runner refuses the same reads); its token geometry and levels >= 1 stay
 * readable. PXVM_USAGE naming the first EMBED
 * and the rule its atlas breaks when no EMBED qualifies (the option stays as it was), or for on
 * other than 0 or 1. on = 0 turns it off (always accepted). It lasts until changed or close,
 * across changes of size of an any-size input. */
int pxvm_runner_fuse_embed(pxvm_runner *run, int on);

/* Waits until the runner's enqueued work is done (CUDA: the stream it is on, the caller's when
 * set, never the device), and reports a trap of an asynchronous run. Returns at once on the CPU. */
int pxvm_runner_sync(pxvm_runner *run);

/* ---- fixations and token geometry ------------------------------------------------------------ */

/* Every runner item has PXVM_FIX_REGS fixation registers, each an (x, y) pair of int32: level-0
 * texel coordinates of the image in Q16 (x * 65536; the centre of texel (i, j) is
 * ((2i+1) << 15, (2j+1) << 15)). Relative SAMPLE/GATHER/ANISO add a register to their
 * positions; ARGMAX writes one. Every run starts with the values set here: changing them changes
 * nothing else (no reload; on the GPU the same graph is replayed).
 *
 * A program's input registers (pxvm_prog_fixation_inputs) are those it reads before it writes
 * them: it takes a fixation in each (isa/SPEC.md section 6). Setting a register that is not one
 * is PXVM_USAGE; pxvm_runner_run is PXVM_UNLINKABLE while an input register of some item has not
 * been set since the runner opened (pxvm_runner_restart keeps what was set). Fixations are given
 * in normalized coordinates of the program's first input slot (W x H), as pxrun --fixation and
 * the Python package take them; Q16 texels only through pxvm_runner_set_fixations. */
#define PXVM_FIX_REGS 8
/* Sets registers first_reg .. first_reg+nregs-1 of items first_item .. first_item+items-1 from
 * xy, laid out [items][nregs][2] double in host memory: normalized (x, y) in [0, 1] of the first
 * input slot ((0, 0) its top-left corner, (1, 1) its bottom-right one), each register becoming
 * floor(x * W * 65536 + 0.5), floor(y * H * 65536 + 0.5) in IEEE double, one operation at a time
 * in that order. PXVM_USAGE naming the value if one is outside [0, 1] or NaN (nothing is set). */
int pxvm_runner_set_fixations_normalized(pxvm_runner *run, int first_item, int items, int first_reg, int nregs,
                                         const double *xy);
/* The texel door: the same from Q16 level-0 texels of the first input slot, int32, the registers'
 * own unit, in host memory (device < 0; each value in [0, W * 65536] x [0, H * 65536], else
 * PXVM_USAGE) or in CUDA memory of the runner's device (cuda executor; copied device to device
 * on the runner's stream, the values not checked). xy may be reused when the call returns.
 * An any-size input: host values are checked against the size bound when set, and again by every
 * pxvm_runner_run (PXVM_USAGE once a smaller image is bound: set them again for that size). */
int pxvm_runner_set_fixations(pxvm_runner *run, int first_item, int items, int first_reg, int nregs,
                              const int32_t *xy, int device);
/* After a run: the registers as it left them (ARGMAX results), [items][PXVM_FIX_REGS][2] int32,
 * into host memory (device < 0; waits for the run) or CUDA memory (on the runner's stream). */
int pxvm_runner_read_fixations(pxvm_runner *run, int first_item, int items, int32_t *xy, int device);
/* After a run: the geometry of every token of atlas slot `slot`, as its sampling instruction
 * used it, [items][patch_count][PXVM_GEOM_INTS] int32: centre x, y (Q16 level-0 texels, after
 * the fixation offset), steps du, dv (Q16; 0, 0 for GATHER, whose centre is its middle table
 * entry) and the LOD used (Q8.8, clamped to the last level; nearest: the rounded level). A token
 * that no instruction writes as one whole tile reads (0, 0, 0, 0, -1). Host or CUDA memory as
 * for pxvm_runner_read_fixations. */
#define PXVM_GEOM_INTS 5
int pxvm_runner_read_geometry(pxvm_runner *run, int slot, int first_item, int items, int32_t *dst, int device);
/* A rectangle of level-0 texels (video: what changed in a frame). */
typedef struct pxvm_rect {
    int32_t x, y, w, h;
} pxvm_rect;

/* Does the program use fixation registers (1: relative sampling or ARGMAX; 2: it also writes
 * them, with ARGMAX), or not (0)? */
int pxvm_prog_fixation_use(const pxvm_prog *prog);
/* The program's input registers, bit k for register k: those a relative SAMPLE, ANISO or GATHER,
 * or an ARGMAX's inhibition, reads before an ARGMAX writes them (in program order up to the first
 * HALT). 0: it takes no fixations (an absolute program, or a scanpath that finds its own). */
int pxvm_prog_fixation_inputs(const pxvm_prog *prog);

/* ---- video: incremental frames ------------------------------------------------------------- */

/* Programs with persistent slots (`.slot ... persistent`) keep them from one run to the next, so
 * a run per frame can update them incrementally: DIFF marks the 16x16 tiles of a frame that
 * changed, UPDATE copies them, PYRAMID and SAMPLE/ANISO/GATHER with a tile mask recompute only
 * what those tiles reach, with the bytes a full recompute gives (isa/SPEC.md, "Video"). */

/* Dirty rectangles for item `item`'s next run, in level-0 texels of its frame: DIFF then marks
 * the tiles they touch instead of comparing the frame with the current image (screen capture and
 * some decoders know them for free; pixels outside them are taken as unchanged). n = 0: nothing
 * changed; at most 256. Copied before the call returns. On the cuda executor, a packed RGBA host
 * frame bound after this call (and after the stream's first run) to an input that only DIFF and
 * UPDATE read is uploaded only in the 16x16 tiles the rectangles touch: nothing else reads the
 * rest (reading that input back shows older frames' pixels there). */
int pxvm_runner_set_dirty(pxvm_runner *run, int item, const pxvm_rect *rects, int n);
/* Starts the stream again: persistent slots back to their initial state; the next run of every
 * item treats every tile as dirty (as the first run after opening does). The fixations set stay. */
int pxvm_runner_restart(pxvm_runner *run);
/* After a run: one byte per token of atlas slot `slot`, [items][patch_count]: 1 if the run
 * sampled it (its bytes may have changed), 0 if an incremental instruction kept its bytes (a
 * model may reuse the token's cached embedding). Host memory (device < 0) or CUDA memory. */
int pxvm_runner_read_changed(pxvm_runner *run, int slot, int first_item, int items, uint8_t *dst, int device);

/* One call for a whole step of a pipeline (the Python layer's hot path): binds nin views (view i
 * to slot in_slots[i] from item in_items[i]; in_items NULL: item 0), runs, then reads nout views
 * from item 0 (kind 0: level 0 as pxvm_runner_read; kind 1: patches). The inputs are borrowed
 * (pxvm_runner_borrow) for this call alone: the borrows end when it returns, whether it succeeds
 * or fails at any step (a failed call leaves unbound the inputs it had bound when it failed: bind
 * them again, or call exec again, before a run; items it bound nothing to keep their binding), so
 * the caller may free its memory as soon as the call returns (on a stream: once the stream gets
 * past the run).
 * The views of one any-size slot are taken together: when they give every item of the batch one
 * size (a batch given image by image), the runner switches to it once, before the binds. */
int pxvm_runner_exec(pxvm_runner *run, int nin, const int *in_slots, const int *in_items, const pxvm_view *ins,
                     int nout, const int *out_slots, const int *out_kinds, const pxvm_view *outs);

/* ---- video files ---------------------------------------------------------------------------- */

/* The frames of a video file, decoded in order through FFmpeg's libraries (libavformat,
 * libavcodec, libswscale), which the library opens at run time: nothing links them, and where
 * they are missing pxvm_video_open fails PXVM_UNAVAILABLE (so does a library built without their
 * headers). The frames are those pxrun --frames reads (RGBA8 by swscale's exact point conversion
 * of the decoder's output). Errors name the file, and the frame (0-based) where one is damaged.
 *
 *   pxvm_video *v;  int w, h, got;  long n;  double fps;
 *   if (pxvm_video_open("clip.avi", NULL, &v) || pxvm_video_info(v, &w, &h, &n, &fps))
 *       fprintf(stderr, "%s\n", pxvm_errmsg());
 *   uint8_t *rgb = malloc((size_t)w * h * 3);
 *   pxvm_view frame = pxvm_view_host(rgb, w, h, 3);
 *   while (pxvm_video_next(v, &frame, &got) == 0 && got) { ... }
 *   pxvm_video_close(v);
 */
typedef struct pxvm_video pxvm_video;
/* Opens a video file (its best video stream) and its decoder; sides checked against lim->max_side
 * (NULL: defaults). lim->flags PXVM_DECODE_LENIENT: damage is decoded past (pxvm_warning() says
 * what was, after each pxvm_video_next); strict (the default): damage is PXVM_MALFORMED naming
 * the file and the frame. Release *out with pxvm_video_close. */
int pxvm_video_open(const char *path, const pxvm_limits *lim, pxvm_video **out);
/* The frame size (every frame is w x h); the number of frames the container declares (-1: it
 * declares none; the frames decoded may differ from a declared count in a damaged file); the
 * average frame rate (0: unknown). */
int pxvm_video_info(const pxvm_video *v, int *w, int *h, long *frames, double *fps);
/* Decodes the next frame into dst (one host image of w x h, 3 channels (RGB) or 4 (RGBA), any
 * strides), *got = 1; at the end *got = 0 and dst is not written. dst NULL: the frame is decoded
 * and dropped (no conversion: how a sampler skips frames exactly). */
int pxvm_video_next(pxvm_video *v, const pxvm_view *dst, int *got);
/* NULL is fine. */
void pxvm_video_close(pxvm_video *v);

/* ---- tokens for models ----------------------------------------------------------------------- */

/* An atlas slot's patches as a model's input tensor, float values computed from each texel's
 * bytes by the exact rule of isa/SPEC.md ("Tokens for models"): for channel c and byte u,
 *   x = fl32(fl32(u) * r),  y = fl32(fl32(x - m_c) / s_c)
 * in IEEE-754 binary32 (r = fl32(rescale), m_c = fl32(mean[c]), s_c = fl32(std[c]); each operation
 * rounded to nearest even, no fused multiply-add), then float16 / bfloat16 rounded to nearest
 * even from y. Both executors look the values up in one 256-entry table per channel built on the
 * host, so cpu and cuda give the same bits. */
typedef enum pxvm_token_dtype { PXVM_TOKENS_FLOAT32 = 0, PXVM_TOKENS_FLOAT16 = 1, PXVM_TOKENS_BFLOAT16 = 2 } pxvm_token_dtype;
/* N = the atlas's patch_count tokens (in atlas order), C = 3 or 4 channels, p x p = patch_h x
 * patch_w: NCHW [N, C, ph, pw]; NHWC [N, ph, pw, C]; FLAT [N, C*ph*pw] in (C, ph, pw) order, the
 * order of a ViT patch embedding's Conv2d weight.reshape(D, -1) (the same bytes as NCHW). */
typedef enum pxvm_token_layout { PXVM_TOKENS_NCHW = 0, PXVM_TOKENS_NHWC = 1, PXVM_TOKENS_FLAT = 2 } pxvm_token_layout;
typedef struct pxvm_token_format {
    int dtype;      /* pxvm_token_dtype */
    int layout;     /* pxvm_token_layout */
    int alpha;      /* 0: R, G, B (alpha dropped); 1: R, G, B, A */
    int nvalues;    /* values given in mean[] and std[]: 3, or with alpha 3 (A: mean 0, std 1) or 4 */
    double rescale; /* r, a positive finite float32 once rounded (presets: 1/255) */
    double mean[4], std[4]; /* finite float32 once rounded; std not 0 */
    int rule;       /* pxvm_token_rule: how x is computed (0, the rule above, for old callers) */
} pxvm_token_format;
/* The float rule of a token format (isa/SPEC.md, "Tokens for models"):
 *   PXVM_TOKENS_RULE_FLOAT32            x = fl32(fl32(u) * r), r = fl32(rescale) (the rule above);
 *   PXVM_TOKENS_RULE_RESCALE_FLOAT64    x = fl32(u * rescale) in IEEE double, rescale NOT rounded
 *                                       to float32 first: transformers 4.x's Pillow-based image
 *                                       processors (image_transforms.rescale);
 * then y = fl32(fl32(x - m_c) / s_c) in binary32 for both (image_transforms.normalize). */
typedef enum pxvm_token_rule { PXVM_TOKENS_RULE_FLOAT32 = 0, PXVM_TOKENS_RULE_RESCALE_FLOAT64 = 1 } pxvm_token_rule;
/* Fills *fmt with preset `name`: "clip" (mean 0.48145466, 0.4578275, 0.40821073, std
 * 0.26862954, 0.26130258, 0.27577711), "siglip" (0.5 x3, 0.5 x3), "imagenet" (0.485, 0.456,
 * 0.406 / 0.229, 0.224, 0.225) or "none" (mean 0, std 1: rescale only); rescale 1/255, float32,
 * NCHW, no alpha, rule PXVM_TOKENS_RULE_FLOAT32 (set rule to 1 for transformers 4.x's values). PXVM_USAGE naming the name if there is no such preset. */
int pxvm_token_format_preset(const char *name, pxvm_token_format *fmt);
/* After a run: the tokens of atlas slot `slot` of items first_item .. first_item+items-1 into
 * dst, contiguous [items][N]... in fmt's layout and dtype (items * N * C * ph * pw values).
 * dst is host memory (dst_device < 0) or, on the cuda executor, CUDA memory of the runner's
 * device (dst_device >= 0), written by one kernel on the runner's stream (the caller's when set;
 * no device-wide synchronisation). PXVM_USAGE naming the value for a bad format, a slot that is
 * no atlas, items outside the batch; nothing is written then. */
int pxvm_runner_read_tokens(pxvm_runner *run, int slot, int first_item, int items, const pxvm_token_format *fmt,
                            void *dst, int dst_device);

/* ---- ragged batches: images of many sizes in one call ----------------------------------- */

/* Images of any sizes, each resized by a resolution policy where the executor keeps its data (the
 * cuda executor on its GPU, from host memory or CUDA memory of its device) and cut into
 * patch x patch tiles, row-major, written one image after the other into one packed buffer: the
 * tokens a "uniform" plan gives at LOD 0 when compiled for each resized size (the dynamic
 * policy's ragged batch, docs/policies.md), without a program, a run or a size change per image.
 * Every byte is the RESIZE rule's (Pillow's Image.resize: isa/SPEC.md, RESIZE), then, with a
 * token format, the table rule of pxvm_runner_read_tokens; both executors give the same bits.
 *   policy   "dynamic[:KEYS][:FILTER]": image i becomes pxvm_policy_dynamic_size's w_i' x h_i'
 *            (out_w, out_h 0); "stretch[:FILTER]", "fit[:FILTER][:PAD]", "crop[:short=S][:FILTER]"
 *            or "exact": every image becomes out_w x out_h (multiples of patch), as
 *            pxvm_image_fit gives it.
 * Image i gives N_i = (w_i' / patch) * (h_i' / patch) tiles; pxvm_ragged_plan gives the sizes and
 * offsets before any pixel is read, to size dst. */
typedef struct pxvm_ragged {
    const char *policy;
    int patch;               /* the tile side, 1..256 */
    int out_w, out_h;        /* the size of every image for stretch, fit, exact; 0 for dynamic */
    /* NULL: the tiles' RGBA8 bytes, dst is [sum N_i][patch][patch][4] uint8 (grey v is (v, v, v,
     * 255), RGB (r, g, b, 255)); else float tokens by fmt, [sum N_i] tokens in fmt's layout */
    const pxvm_token_format *fmt;
    void *dst;               /* host memory (dst_device < 0) or, on cuda, CUDA memory of its device */
    int dst_device;
    size_t dst_bytes;        /* dst's size: at least what the tiles take (checked, never overrun) */
    int failed;              /* out: after an error about one image, its index; -1 otherwise */
    /* The order of an image's tiles. 0 or 1: row-major. m >= 2: m x m windows, windows row-major,
     * the m * m tiles row-major inside a window (Qwen2-VL's processor order: its reshape to
     * (gh/m, m, gw/m, m) and transpose); each image's grid sides must be multiples of m, else
     * PXVM_USAGE naming the image and its grid (policy dynamic with merge=m always gives such). */
    int merge;
    /* Frames per token. 0 or 1: one image per item, as above. T >= 2: images come in groups of T
     * consecutive images (n a multiple of T) of one resized size (else PXVM_USAGE naming the
     * image); group g is item g, whose N tokens each hold T frames: with fmt NCHW or FLAT a token
     * is [C][T][ph][pw] (Qwen2-VL's flattening of (C, T, p, p)), NHWC [T][ph][pw][C], RGBA8 tiles
     * (fmt NULL) [T][p][p][4]. dst takes the same bytes as with T = 1 (offsets[n] tiles of one
     * frame each); pxvm_ragged_plan's per-image offsets still hold: item g's tokens start at
     * offsets[g * T] / T, and there are offsets[n] / T tokens in all. */
    int temporal;
} pxvm_ragged;
/* Sizes only: for n images of sizes wh[2i], wh[2i+1], their resized sizes into out_wh[2i..] (may
 * be NULL) and the tile offsets into offsets[0..n] (offsets[0] = 0, offsets[n] = sum N_i: the
 * cu_seqlens of the batch); *failed as pxvm_ragged's (NULL allowed). PXVM_USAGE for a bad policy,
 * patch or size; PXVM_UNLINKABLE for an image the dynamic rule refuses (aspect over 200:1). */
int pxvm_ragged_plan(const char *policy, int patch, int out_w, int out_h, int n, const int *wh, int *out_wh,
                    int64_t *offsets, int *failed);
/* The tiles of n images (views of one item each: host memory, or CUDA memory of the runner's
 * device on the cuda executor; channels 1, 3 or 4; any strides) into t->dst. Independent of the
 * runner's program and its bound inputs (they stay as they were). On cuda the work is ordered on
 * the runner's stream (the caller's when set): a device dst is ready when that stream gets past
 * the call, host memory when it returns; the views may be reused when it returns. Memory besides
 * dst: cuda holds the images it stages, their tables and pass-1 buffers within min(max_memory / 4,
 * 64 MiB) at a time (parts; an image needing more than max_memory alone is refused, naming it);
 * cpu holds, per thread of its pool, one image's resized pixels (and a packed copy of a view
 * that is not interleaved rows). dst may not overlap an image's bytes (PXVM_USAGE naming the
 * image: tiles are written while other images are read). Nothing is written to dst on an
 * argument error. */
int pxvm_runner_ragged(pxvm_runner *run, int n, const pxvm_view *images, pxvm_ragged *t);

/* pxvm_runner_bind of the view's items resized by `policy` ("stretch[:FILTER]", "fit[:FILTER][:PAD]",
 * "crop[:short=S][:FILTER]" or "exact") to out_w x out_h (0, 0: the slot's size; an any-size input needs them) where the
 * executor keeps its data (cuda: on its GPU, from host memory or CUDA memory of its device): the
 * bytes pxvm_image_fit gives, bound as pxvm_runner_bind binds them. The view may be reused when
 * the call returns. A bad policy, native or dynamic (the slot takes one size here: dynamic tokens
 * are pxvm_runner_ragged's), or a size that is not the slot's: PXVM_USAGE naming it. */
int pxvm_runner_bind_resized(pxvm_runner *run, int slot, int first_item, const pxvm_view *view, const char *policy,
                             int out_w, int out_h);

#ifdef __cplusplus
}
#endif
#endif
