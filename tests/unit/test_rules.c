/* test_rules.c - every rule of isa/SPEC.md that refuses something carries an ID ([V-SLOT-9]).
 * For each, the table below builds the last case the implementation accepts and the first it
 * refuses (one pair or more: `variants`), and checks the refused one's class, error, the pixel
 * its message names and a fragment of the message. rules_spec_ids_have_their_pairs reads
 * isa/SPEC.md and fails when an ID there has no pair here (or a pair here no ID there), or when
 * the SPEC's rule index gives another error than the pair shows. Then the rules of SPEC.md that
 * accept something a reader might doubt: an early HALT, PYRAMID on read-only slots, atlases of
 * any role, PNG sample scaling and tRNS keys. */
#include <ctype.h>
#include <png.h>
#include <stdarg.h>
#include <stdlib.h>
#include <turbojpeg.h>

#include "../../isa/px_sem.h"
#include "test.h"

/* ---- cases ---------------------------------------------------------------------------------- */

enum { PX_LOAD, PX_RUN, PX_PNG, PX_ANY, PX_RESOLVE }; /* what a case exercises */

typedef struct {
    int stage;
    pxvm_image prog;     /* PX_LOAD, PX_RUN: the program image */
    pxvm_limits lim;     /* the limits it is loaded (and decoded) with */
    uint8_t *file;       /* PX_PNG (pxvm_png_decode), PX_ANY (pxvm_image_decode_any): the bytes */
    size_t len;
    pxvm_image input;    /* PX_RUN: bound to bind_slot before the run (px NULL: nothing bound) */
    int bind_slot;
    uint64_t max_steps;  /* PX_RUN: the step budget (0: the default) */
    int rw, rh;          /* PX_RESOLVE: the program resolved with bind_slot at rw x rh */
    int x, y;            /* the refused case: the pixel its message names */
    char msg[256];       /* ... and a fragment of its message */
    pxvm_code code;      /* ... and its error, where the variant's words are an entry of their own
                            (0: the rule's, px_rule.code) */
} px_rcase;

/* Builds the accepted (refuse = 0) or the refused (refuse = 1) case of one variant. */
typedef void (*px_rmake)(int refuse, int variant, px_rcase *c);

/* The edge a pair names, measured on a built case: the quantity the rule bounds (`value`), read
 * from what the case holds (the program's bytes, the file, the bound size), and the bound itself
 * (`bound`), read from the rule's own limit (the slot's descriptor, the limits the case is loaded
 * with), never from the constants the case was built with. The rule accepts value <= bound
 * (dir +1) or value >= bound (dir -1); the pair sits on the edge when the accepted case has
 * value == bound and the refused one value == bound + dir. Where one unit of the case's
 * parameter moves the value by more than 1 (`step`: a rescaled operand moves by up to n/n0, a
 * resolution's memory by a row), the accepted value is within step of the bound, inside, and
 * the refused one within step of it, outside. */
typedef struct {
    int64_t value, bound, step; /* step 0 means 1 */
    int dir;
    const char *what;
} px_redge_at;

/* 0 and *e for variant `variant` of a built case; 1 when that variant names no number. */
typedef int (*px_redge)(const px_rcase *c, int variant, px_redge_at *e);

typedef struct {
    const char *id;
    pxvm_code code;
    px_rmake make;
    int variants;
    /* not NULL: the implementation does not refuse the case yet; the pair is kept, its refused
     * side expected to load, until the code change named here is made (then drop the mark) */
    const char *pending;
    /* not NULL: the edge each pair must sit on (rules_every_rule_has_its_edge_pair checks it) */
    px_redge edge;
} px_rule;

static void px__case_free(px_rcase *c)
{
    pxvm_image_free(&c->prog);
    pxvm_image_free(&c->input);
    free(c->file);
    memset(c, 0, sizeof *c);
}

static void px__expect(px_rcase *c, int x, int y, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void px__expect(px_rcase *c, int x, int y, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->msg, sizeof c->msg, fmt, ap);
    va_end(ap);
    c->x = x, c->y = y;
}

/* Loads (and for PX_RUN binds and runs) a case; 0 or -1 with *err. */
static int px__attempt(const px_rcase *c, pxvm_error *err)
{
    memset(err, 0, sizeof *err);
    pxvm_image img;
    if (c->stage == PX_PNG || c->stage == PX_ANY) {
        int rc = c->stage == PX_PNG ? pxvm_png_decode(c->file, c->len, "case.png", &c->lim, &img, err)
                                    : pxvm_image_decode_any(c->file, c->len, "case.img", &c->lim, &img, err);
        if (rc == 0)
            pxvm_image_free(&img);
        return rc;
    }
    pxvm_program prog;
    if (pxvm_program_from_copy(&c->prog, &c->lim, &prog, err) < 0)
        return -1;
    int rc = 0;
    if (c->stage == PX_RESOLVE) {
        int wh[2 * (PXVM_MAX_SLOTS + 1)] = {0};
        wh[2 * c->bind_slot] = c->rw, wh[2 * c->bind_slot + 1] = c->rh;
        pxvm_program res;
        rc = pxvm_program_resolve(&prog, wh, &c->lim, &res, err);
        if (rc == 0)
            pxvm_program_free(&res);
    }
    if (c->stage == PX_RUN) {
        pxvm_executor *ex = NULL;
        pxvm_run_options ro = {.max_steps = c->max_steps ? c->max_steps : c->lim.max_steps};
        rc = pxvm_cpu_executor.open(&ex, NULL, err) < 0 || pxvm_cpu_executor.load(ex, &prog, 1, err) < 0 ||
                     (c->input.px && pxvm_bind_image(&pxvm_cpu_executor, ex, c->bind_slot, &c->input, err) < 0) ||
                     pxvm_cpu_executor.run(ex, &ro, err) < 0
                 ? -1
                 : 0;
        if (ex)
            pxvm_cpu_executor.close(ex);
    }
    pxvm_program_free(&prog);
    return rc;
}

static pxvm_class px__class_of(const char *id)
{
    return id[0] == 'M' ? PXVM_MALFORMED : id[0] == 'V' ? PXVM_INVALID : id[0] == 'U' ? PXVM_UNLINKABLE : PXVM_TRAP;
}

/* ---- building programs ---------------------------------------------------------------------- */

/* Stream index of pixel `pixel` of instruction `insn` of a builder (code at its default start). */
static uint32_t px__pc(const pxvm_builder *b, uint32_t insn, int pixel)
{
    uint32_t code0 = b->code_start > 0 ? (uint32_t)b->code_start : (uint32_t)(PXI_HEADER_PIXELS + PXI_SLOT_PIXELS * b->nslots);
    return code0 + b->insn_pc[insn] + (uint32_t)pixel;
}

/* The pixel a message names: pixel `pixel` of instruction `insn`. */
#define INSN_XY(b, insn, pixel) (int)(px__pc(b, insn, pixel) % (uint32_t)(b)->width), (int)(px__pc(b, insn, pixel) / (uint32_t)(b)->width)
/* ... pixel `pixel` of slot k's descriptor, in an image `w` wide. */
#define DESC(k, pixel) (PXI_HEADER_PIXELS + PXI_SLOT_PIXELS * ((k) - 1) + (pixel))
#define DESC_XY(w, k, pixel) DESC(k, pixel) % (w), DESC(k, pixel) / (w)

static void px__finish(pxvm_builder *b, px_rcase *c)
{
    pxvm_error err;
    if (pxvm_build_finish(b, &c->prog, &err) < 0)
        px_test_fail(__FILE__, __LINE__, "build: %s", err.msg);
    pxvm_build_free(b);
}

/* Byte `ch` of stream pixel `i` of the case's program image. */
static uint8_t *px__byte(px_rcase *c, int i, int ch) { return c->prog.px + 4 * (size_t)i + (size_t)ch; }

/* The slots most cases use: 1 'src' input 8x8, 2 'out' output 4x4 (code at 21). */
static void px__base(pxvm_builder *b, int width)
{
    pxvm_build_init(b, width);
    pxvm_build_slot(b, PXI_ROLE_INPUT, "src", 8, 8);
    pxvm_build_slot(b, PXI_ROLE_OUTPUT, "out", 4, 4);
}

static uint32_t px__pyramid(pxvm_builder *b, int slot, int mask)
{
    int32_t f[PXI_MAX_FIELDS] = {0};
    f[PX_FI(PYRAMID, slot)] = slot, f[PX_FI(PYRAMID, mask)] = mask;
    return pxvm_build_insn(b, PX_OP_PYRAMID, f);
}

/* SAMPLE (or ANISO with 1 tap) src -> dst, the w x h rectangle at (x, y), unit steps. */
static uint32_t px__sample(pxvm_builder *b, int op, int src, int dst, int x, int y, int w, int h)
{
    int32_t f[PXI_MAX_FIELDS] = {0};
    f[PX_FI(SAMPLE, src)] = src, f[PX_FI(SAMPLE, dst)] = dst;
    f[PX_FI(SAMPLE, dst_x)] = x, f[PX_FI(SAMPLE, dst_y)] = y, f[PX_FI(SAMPLE, w)] = w, f[PX_FI(SAMPLE, h)] = h;
    f[PX_FI(SAMPLE, du)] = f[PX_FI(SAMPLE, dv)] = 65536;
    if (op == PX_OP_ANISO)
        f[PX_FI(ANISO, taps)] = 1;
    return pxvm_build_insn(b, op, f);
}

static uint32_t px__gather(pxvm_builder *b, int src, int dst, int w, int h, int table, int tx, int ty, int mask)
{
    int32_t f[PXI_MAX_FIELDS] = {0};
    f[PX_FI(GATHER, src)] = src, f[PX_FI(GATHER, dst)] = dst, f[PX_FI(GATHER, w)] = w, f[PX_FI(GATHER, h)] = h;
    f[PX_FI(GATHER, table)] = table, f[PX_FI(GATHER, table_x)] = tx, f[PX_FI(GATHER, table_y)] = ty;
    f[PX_FI(GATHER, mask)] = mask;
    return pxvm_build_insn(b, PX_OP_GATHER, f);
}

static uint32_t px__video(pxvm_builder *b, int op, int frame, int cur, int mask)
{
    int32_t f[PXI_MAX_FIELDS] = {0};
    f[PX_FI(DIFF, frame)] = frame, f[PX_FI(DIFF, cur)] = cur, f[PX_FI(DIFF, mask)] = mask;
    return pxvm_build_insn(b, op, f);
}

static uint32_t px__saliency(pxvm_builder *b, int src, int dst, int c, int s, int map, int shift, int acc)
{
    int32_t f[PXI_MAX_FIELDS] = {0};
    f[PX_FI(SALIENCY, src)] = src, f[PX_FI(SALIENCY, dst)] = dst, f[PX_FI(SALIENCY, accumulate)] = acc;
    f[PX_FI(SALIENCY, centre)] = c, f[PX_FI(SALIENCY, surround)] = s, f[PX_FI(SALIENCY, map)] = map;
    f[PX_FI(SALIENCY, shift)] = shift, f[PX_FI(SALIENCY, w_lum)] = 1;
    return pxvm_build_insn(b, PX_OP_SALIENCY, f);
}

static uint32_t px__argmax(pxvm_builder *b, int src, int level, int reg, int ior_first, int ior_count, int radius)
{
    int32_t f[PXI_MAX_FIELDS] = {0};
    f[PX_FI(ARGMAX, src)] = src, f[PX_FI(ARGMAX, level)] = level, f[PX_FI(ARGMAX, reg)] = reg;
    f[PX_FI(ARGMAX, w_r)] = 1, f[PX_FI(ARGMAX, space)] = src;
    f[PX_FI(ARGMAX, ior_first)] = ior_first, f[PX_FI(ARGMAX, ior_count)] = ior_count, f[PX_FI(ARGMAX, radius)] = radius;
    return pxvm_build_insn(b, PX_OP_ARGMAX, f);
}

static uint32_t px__halt(pxvm_builder *b) { return pxvm_build_insn(b, PX_OP_HALT, NULL); }

/* The base program: PYRAMID src, HALT (16 wide: 23 pixels in 16x2). */
static void px__base_program(px_rcase *c)
{
    pxvm_builder b;
    px__base(&b, 16);
    px__pyramid(&b, 1, 0);
    px__halt(&b);
    px__finish(&b, c);
}

/* ---- files ---------------------------------------------------------------------------------- */

static void px__png_of(px_rcase *c, int w, int h)
{
    pxvm_image img;
    pxvm_image_alloc(&img, w, h, NULL);
    for (size_t i = 0; i < (size_t)w * (size_t)h * 4u; i++)
        img.px[i] = (uint8_t)(i * 7u);
    if (pxvm_png_encode(&img, &c->file, &c->len, NULL) < 0)
        px_test_fail(__FILE__, __LINE__, "png encode");
    pxvm_image_free(&img);
}

/* A w x h JPEG from libjpeg-turbo: RGB pixels at the given subsampling; flags
 * TJFLAG_PROGRESSIVE for a progressive one. */
static void px__jpeg_make(px_rcase *c, int w, int h, int samp, int flags)
{
    uint8_t *px = malloc((size_t)w * (size_t)h * 4u);
    for (size_t i = 0; px && i < (size_t)w * (size_t)h * 4u; i++)
        px[i] = (uint8_t)(i * 7u);
    tjhandle tj = tjInitCompress();
    unsigned char *j = NULL;
    unsigned long n = 0;
    if (!px || !tj || tjCompress2(tj, px, w, 0, h, TJPF_RGBX, &j, &n, samp, 90, flags) != 0)
        px_test_fail(__FILE__, __LINE__, "jpeg encode");
    c->file = malloc(n ? n : 1);
    if (c->file && j)
        memcpy(c->file, j, n);
    c->len = n;
    tjFree(j);
    free(px);
    if (tj)
        tjDestroy(tj);
}

/* A 16x16 baseline JPEG: YCbCr 4:4:4 from RGB. */
static void px__jpeg_of(px_rcase *c) { px__jpeg_make(c, 16, 16, TJSAMP_444, 0); }

/* A progressive grey 8x8 JPEG of `scans` scans (64 .. 127), written by hand: one block, every
 * coefficient 0, Huffman tables of one code ('0'). A DC scan, then coefficient k = 1 .. 63 in a
 * scan of its own, in two (successive approximation: bit 1 up, then bit 0) for the first
 * scans - 64 of them. Every scan is valid: libjpeg-turbo decodes it without a warning. */
static void px__jpeg_scans(px_rcase *c, int scans)
{
    static const uint8_t head[] = {
        0xFF, 0xD8,                                                             /* SOI */
        0xFF, 0xC2, 0x00, 0x0B, 0x08, 0x00, 0x08, 0x00, 0x08, 0x01, 0x01, 0x11, 0x00, /* SOF2: 8x8, 1 component */
        0xFF, 0xC4, 0x00, 0x14, 0x00, 0x01, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x00, /* DC table 0: symbol 0 */
        0xFF, 0xC4, 0x00, 0x14, 0x10, 0x01, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x00, /* AC table 0: EOB */
    };
    size_t n = sizeof head + 2 + 69 + (size_t)scans * 11 + 2;
    uint8_t *d = malloc(n), *p = d;
    memcpy(p, head, sizeof head), p += sizeof head;
    *p++ = 0xFF, *p++ = 0xDB, *p++ = 0x00, *p++ = 0x43, *p++ = 0x00; /* DQT 0: every step 1 */
    memset(p, 1, 64), p += 64;
    int twice = scans - 64; /* coefficients 1 .. twice take two scans */
    for (int k = 0, done = 0; done < scans; k++) {
        for (int pass = 0; pass < (k >= 1 && k <= twice ? 2 : 1) && done < scans; pass++, done++) {
            int al = k >= 1 && k <= twice && pass == 0, ah = pass; /* Ah, Al: the approximation bits */
            const uint8_t sos[] = {0xFF, 0xDA, 0x00, 0x08, 0x01, 0x01, 0x00, (uint8_t)k, (uint8_t)k, (uint8_t)(ah << 4 | al), 0x7F};
            memcpy(p, sos, sizeof sos), p += sizeof sos; /* 0x7F: the code '0', padded with ones */
        }
    }
    *p++ = 0xFF, *p++ = 0xD9;
    c->file = d;
    c->len = (size_t)(p - d);
}
static void r_png_signature(int refuse, int variant, px_rcase *c)
{
    c->stage = PX_PNG;
    px__png_of(c, 4, 4);
    if (refuse && variant == 0)
        c->file[7] ^= 1; /* the last byte of the 8-byte signature */
    if (refuse && variant == 1)
        c->len = 7;      /* shorter than the signature */
    px__expect(c, -1, -1, "'case.png' is not a PNG file (bad signature)");
}

/* The PNG CRC of n bytes (the chunk's type and data). */
static uint32_t px__crc(const uint8_t *p, size_t n)
{
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++)
            c = c & 1 ? (c >> 1) ^ 0xEDB88320u : c >> 1;
    }
    return ~c;
}

static void r_png_corrupt(int refuse, int variant, px_rcase *c)
{
    c->stage = PX_PNG;
    px__png_of(c, 4, 4);
    if (refuse && variant == 0)
        c->len -= 1;      /* IEND's CRC cut */
    if (refuse && variant == 1)
        c->file[8 + 25 + 8] ^= 0x40; /* the first byte of IDAT's data: its CRC fails */
    if (variant == 2) { /* a tEXt chunk after IHDR: skipped, its CRC checked (libpng warns: strict, an error) */
        static const uint8_t text[] = "\0\0\0\6tEXtkey\0ab";
        uint8_t *more = malloc(c->len + 18);
        memcpy(more, c->file, 33);
        memcpy(more + 33, text, 14);
        uint32_t crc = px__crc(text + 4, 10) ^ (refuse ? 1u : 0u);
        more[47] = (uint8_t)(crc >> 24), more[48] = (uint8_t)(crc >> 16), more[49] = (uint8_t)(crc >> 8), more[50] = (uint8_t)crc;
        memcpy(more + 51, c->file + 33, c->len - 33);
        free(c->file);
        c->file = more;
        c->len += 18;
    }
    px__expect(c, -1, -1, variant == 2 ? "'case.png': corrupt or truncated PNG (tEXt: CRC error)" : "'case.png': corrupt or truncated PNG");
}

static void r_image_side(int refuse, int variant, px_rcase *c)
{
    c->stage = PX_PNG;
    int n = refuse ? 16385 : 16384;
    px__png_of(c, variant ? 1 : n, variant ? n : 1);
    px__expect(c, -1, -1, variant ? "'case.png' is 1x16385; sides must be 1..16384" : "'case.png' is 16385x1; sides must be 1..16384");
}

static void r_image_memory(int refuse, int variant, px_rcase *c)
{
    (void)variant;
    c->stage = PX_PNG;
    px__png_of(c, 100, 100);
    /* 40000 bytes of pixels; accepted, the memory holds libpng's 68064 bytes too (V-FILE-3, which
     * refuses the limits between) */
    c->lim.max_memory = refuse ? 39999 : 40000 + 68064;
    px__expect(c, -1, -1, "'case.png' is 100x100, 40000 bytes decoded; the limit is 39999");
}

/* The pixels and the decoder's buffers, by SPEC 5's estimates. */
static void r_image_work(int refuse, int variant, px_rcase *c)
{
    unsigned long long px = 0, work = 0;
    const char *what = "";
    c->stage = PX_ANY;
    if (variant == 0) { /* PNG 100x100: 2 * (8w + 64) + 8h + 65536 */
        c->stage = PX_PNG;
        px__png_of(c, 100, 100);
        px = 40000, work = 2 * (800 + 64) + 800 + 65536, what = "'case.png' is 100x100";
    } else if (variant == 1) { /* baseline 16x16 4:4:4: per component 2x2 blocks, one MCU row of them */
        px__jpeg_make(c, 16, 16, TJSAMP_444, 0);
        px = 1024, work = 8 * 16 + 262144 + 3 * (128 * 2 * 1 + 192 * 2 * 1), what = "'case.img' is 16x16";
    } else if (variant == 2) { /* progressive 20x12 4:2:0 (Y 2x2, h_max = v_max = 2): every coefficient */
        px__jpeg_make(c, 20, 12, TJSAMP_420, TJFLAG_PROGRESSIVE);
        /* Y: bw = ceil(40/16) = 3 -> 4, bh = ceil(24/16) = 2; Cb, Cr: bw = ceil(20/16) = 2, bh = ceil(12/16) = 1 */
        px = 960, work = 8 * 12 + 262144 + (128 * 4 * 2 + 192 * 4 * 2) + 2 * (128 * 2 * 1 + 192 * 2 * 2),
        what = "'case.img' is 20x12";
    } else { /* grey baseline 16x16: one component, 1x1 */
        px__jpeg_make(c, 16, 16, TJSAMP_GRAY, 0);
        px = 1024, work = 8 * 16 + 262144 + 128 * 2 * 1 + 192 * 2 * 1, what = "'case.img' is 16x16";
    }
    c->lim.max_memory = px + work - (refuse ? 1 : 0);
    px__expect(c, -1, -1, "%s: decoding it needs %llu bytes (%llu of pixels, %llu of decoder buffers); the limit is %llu", what,
               px + work, px, work, px + work - 1);
}

static void r_image_signature(int refuse, int variant, px_rcase *c)
{
    c->stage = PX_ANY;
    if (variant == 0) {
        px__jpeg_of(c);
        if (refuse)
            c->file[2] = 0xFE; /* FF D8 FE: no JPEG */
    } else {
        px__png_of(c, 4, 4);
        if (refuse)
            c->file[0] ^= 1;
    }
    px__expect(c, -1, -1, "'case.img' is neither a PNG nor a JPEG file");
}

/* Offset of the JPEG's first SOS marker (FF DA) and the end of its header segment. */
static size_t px__jpeg_sos(const px_rcase *c, size_t *end)
{
    for (size_t i = 2; i + 3 < c->len; i++)
        if (c->file[i] == 0xFF && c->file[i + 1] == 0xDA) {
            *end = i + 2 + (((size_t)c->file[i + 2] << 8) | c->file[i + 3]);
            return i;
        }
    return 0;
}

static void r_jpeg_corrupt(int refuse, int variant, px_rcase *c)
{
    (void)variant;
    c->stage = PX_ANY;
    px__jpeg_of(c);
    size_t end = 0, sos = px__jpeg_sos(c, &end);
    CHECK(sos > 0 && c->len >= 2 && c->file[c->len - 2] == 0xFF && c->file[c->len - 1] == 0xD9);
    /* the whole file decodes; cut by one byte (EOI's second), its data ends inside the scan */
    size_t len = c->len;
    if (refuse)
        c->len -= 1;
    px__expect(c, -1, -1, "'case.img': corrupt or unsupported JPEG (truncated: the data ends at byte %zu, inside scan 1)", len - 1);
}


static void r_jpeg_scans(int refuse, int variant, px_rcase *c)
{
    (void)variant;
    c->stage = PX_ANY;
    px__jpeg_scans(c, refuse ? PXVM_JPEG_MAX_SCANS + 1 : PXVM_JPEG_MAX_SCANS);
    px__expect(c, -1, -1, "'case.img' has more than 100 scans");
}

/* ---- header --------------------------------------------------------------------------------- */

static void r_header_short(int refuse, int variant, px_rcase *c)
{
    pxvm_builder b;
    if (variant == 0) {
        /* 2 slots: the header is 21 pixels; the smallest program is 22 (a HALT) */
        px__base(&b, refuse ? 20 : 22);
        px__halt(&b);
        px__finish(&b, c);
        if (refuse) { /* 20 pixels: cut the image to its first row */
            c->prog.h = 1;
        }
        px__expect(c, 1, 0, "the header needs 21 pixels but the image has 20");
    } else {
        pxvm_build_init(&b, 6); /* no slots: a HALT at 5 */
        px__halt(&b);
        px__finish(&b, c);
        if (refuse)
            c->prog.w = 4; /* 4 pixels: the header's 5 do not fit */
        px__expect(c, -1, -1, "the header needs 5 pixels but the image has 4");
    }
}

static void r_magic(int refuse, int variant, px_rcase *c)
{
    (void)variant;
    px__base_program(c);
    if (refuse)
        *px__byte(c, 0, 3) = 'N';
    px__expect(c, 0, 0, "bad magic 50 58 56 4e");
}

static void r_version(int refuse, int variant, px_rcase *c)
{
    px__base_program(c);
    if (variant == 0)
        *px__byte(c, 1, 1) = (uint8_t)(refuse ? 2 : 1); /* 1.1 is read (any-size inputs), 1.2 is not */
    if (refuse && variant == 1)
        *px__byte(c, 1, 0) = 2; /* 2.0 */
    if (refuse && variant == 2)
        *px__byte(c, 1, 0) = 0; /* 0.0 */
    px__expect(c, 1, 0, "format version %s is not supported", variant == 0 ? "1.2" : variant == 1 ? "2.0" : "0.0");
}

static void r_header_flags(int refuse, int variant, px_rcase *c)
{
    (void)variant;
    px__base_program(c);
    *px__byte(c, 1, 3) = (uint8_t)refuse;
    px__expect(c, 1, 0, "reserved header field flags is 1, must be 0");
}

static void r_header_word4(int refuse, int variant, px_rcase *c)
{
    px__base_program(c);
    if (refuse)
        *px__byte(c, 4, variant ? 3 : 0) = 1;
    px__expect(c, 4, 0, "reserved header field word 4 is %u, must be 0", variant ? 1u << 24 : 1u);
}

static void r_code_start(int refuse, int variant, px_rcase *c)
{
    (void)variant;
    px__base_program(c);
    if (refuse)
        *px__byte(c, 2, 0) = 20; /* the descriptors end at 21 */
    px__expect(c, 2, 0, "code start 20 lies inside the header, which ends at stream index 21");
}

static void r_no_code(int refuse, int variant, px_rcase *c)
{
    (void)variant;
    pxvm_builder b;
    pxvm_build_init(&b, 8);
    px__halt(&b);
    px__finish(&b, c);
    if (refuse)
        *px__byte(c, 3, 0) = 0;
    px__expect(c, 3, 0, "the program has no instructions");
}

static void r_max_insns(int refuse, int variant, px_rcase *c)
{
    (void)variant;
    px__base_program(c); /* 2 instructions */
    c->lim.max_insns = refuse ? 1 : 2;
    px__expect(c, 3, 0, "2 instructions exceed the limit of 1 (see --max-insns)");
}

static void r_prog_side(int refuse, int variant, px_rcase *c)
{
    (void)variant;
    px__base_program(c); /* 16x2 */
    c->lim.max_side = refuse ? 15 : 16;
    px__expect(c, -1, -1, "slot 0 ('prog') is 16x2; sides must be 1..15");
}

/* Bytes of a w x h slot with its whole chain, counted here as the SPEC says. */
static uint64_t px__chain_bytes(int w, int h)
{
    uint64_t n = 0;
    for (int l = 0;; l++) {
        int lw = w >> l > 0 ? w >> l : 1, lh = h >> l > 0 ? h >> l : 1;
        n += 4u * (uint64_t)lw * (uint64_t)lh;
        if (lw == 1 && lh == 1)
            return n;
    }
}

static void r_memory(int refuse, int variant, px_rcase *c)
{
    (void)variant;
    px__base_program(c);
    uint64_t need = px__chain_bytes(16, 2) + px__chain_bytes(8, 8) + px__chain_bytes(4, 4);
    CHECK_EQ(need, 612);
    c->lim.max_memory = refuse ? need - 1 : need;
    px__expect(c, -1, -1, "the slots need 612 bytes with their mip chains; the limit is 611");
}

/* ---- slots ---------------------------------------------------------------------------------- */

static void r_slot_role(int refuse, int variant, px_rcase *c)
{
    pxvm_builder b;
    pxvm_build_init(&b, 16);
    pxvm_build_slot(&b, PXI_ROLE_INPUT, "a", 2, 1);
    px__halt(&b);
    px__finish(&b, c); /* 14 pixels: 16x1 */
    /* variant 0: role 4 (a data slot, 2x1 at (0, 0)) and 5; variant 1: role 1 and 0 */
    *px__byte(c, DESC(1, 0), 0) = (uint8_t)(variant == 0 ? (refuse ? 5 : 4) : (refuse ? 0 : 1));
    px__expect(c, DESC_XY(16, 1, 0), "slot 1 has unknown role %d", variant == 0 ? 5 : 0);
}

/* The base program with slot 2's 8 name bytes replaced by `name` (NUL-padded, n bytes). */
static void px__named(px_rcase *c, const char *name, size_t n)
{
    px__base_program(c);
    memset(px__byte(c, DESC(2, 6), 0), 0, 8);
    memcpy(px__byte(c, DESC(2, 6), 0), name, n);
}

static void r_name_chars(int refuse, int variant, px_rcase *c)
{
    if (variant == 0) /* 'z' is the last letter, '{' follows it */
        px__named(c, refuse ? "a_9{" : "a_9z", 4);
    else if (variant == 1) /* '_' and '0'; '/' precedes '0' */
        px__named(c, refuse ? "a_/" : "a_0", 3);
    else /* a NUL ends the name: every byte after it is NUL */
        px__named(c, refuse ? "ab\0c" : "ab\0\0", 4);
    px__expect(c, DESC_XY(16, 2, 6), "slot 2: name %s",
               variant == 2 ? "has bytes after its NUL terminator" : "may only use a-z, 0-9 and _");
    c->code = variant == 2 ? PXE_SLOT_NAME_BYTES : PXE_SLOT_NAME_CHARS;
}

static void r_name_digit(int refuse, int variant, px_rcase *c)
{
    (void)variant;
    px__named(c, refuse ? "9a" : "a9", 2);
    px__expect(c, DESC_XY(16, 2, 6), "slot 2: name must not start with a digit");
}

static void r_name_prog(int refuse, int variant, px_rcase *c)
{
    (void)variant;
    px__named(c, refuse ? "prog" : "progs", refuse ? 4 : 5);
    px__expect(c, DESC_XY(16, 2, 6), "slot 2: name 'prog' is the program image's own name");
}

static void r_name_repeat(int refuse, int variant, px_rcase *c)
{
    if (variant == 0) {
        px__named(c, refuse ? "src" : "src0", refuse ? 3 : 4);
    } else { /* empty names may repeat; "a" may not */
        px__named(c, refuse ? "a" : "", refuse ? 1 : 0);
        memset(px__byte(c, DESC(1, 6), 0), 0, 8);
        if (refuse)
            *px__byte(c, DESC(1, 6), 0) = 'a';
    }
    px__expect(c, DESC_XY(16, 2, 6), "slot 2: name repeats the name of an earlier slot");
}

static void r_slot_flags(int refuse, int variant, px_rcase *c)
{
    px__base_program(c);
    *px__byte(c, DESC(2, 0), 1) = 1; /* persistent output: fine */
    if (refuse)
        *px__byte(c, DESC(2, 0), variant + 1) = (uint8_t)(variant == 0 ? 5 : 1); /* flag bit 2; byte B; byte A */
    px__expect(c, DESC_XY(16, 2, 0),
               "slot 2 ('out'): flags other than 1 (persistent) and 2 (any-size) and the reserved bytes must be 0");
}

static void r_slot_persist(int refuse, int variant, px_rcase *c)
{
    (void)variant;
    px__base_program(c);
    *px__byte(c, DESC(2, 0), 0) = PXI_ROLE_SCRATCH; /* a persistent scratch slot: fine */
    *px__byte(c, DESC(2, 0), 1) = 1;
    if (refuse)
        *px__byte(c, DESC(1, 0), 1) = 1; /* a persistent input */
    px__expect(c, DESC_XY(16, 1, 0), "slot 1 ('src'): only output and scratch slots can be persistent");
}

static void r_slot_side(int refuse, int variant, px_rcase *c)
{
    px__base_program(c);
    if (variant == 0)
        pxi_write_le(px__byte(c, DESC(2, 1), 0), 0, 0, 4, refuse ? 16385u : 16384u);
    else
        pxi_write_le(px__byte(c, DESC(2, 2), 0), 0, 0, 4, refuse ? 0u : 1u);
    px__expect(c, DESC_XY(16, 2, 1), "slot 2 ('out') is %s; sides must be 1..16384", variant == 0 ? "16385x4" : "4x0");
}

static void r_data_rect(int refuse, int variant, px_rcase *c)
{
    pxvm_builder b;
    px__base(&b, 16);
    pxvm_image d;
    pxvm_image_alloc(&d, 4, 2, NULL);
    int k = pxvm_build_data_slot(&b, "tab", &d);
    pxvm_image_free(&d);
    px__halt(&b);
    px__finish(&b, c); /* header 29, HALT, the data at rows 2..3: 16x4 */
    CHECK_EQ(c->prog.h, 4);
    uint8_t *o = px__byte(c, DESC(k, 3), 0);
    if (variant == 0) /* x + 4 = 16 fits; one column more sticks out */
        pxi_write_le(o, 0, 0, 2, refuse ? 13u : 12u);
    else /* y + 2 = 4 fits; one row more sticks out */
        pxi_write_le(o, 0, 2, 2, refuse ? 3u : 2u);
    px__expect(c, DESC_XY(16, k, 3), "slot 3 ('tab'): its data rectangle does not lie inside the program image");
}

static void r_origin(int refuse, int variant, px_rcase *c)
{
    px__base_program(c);
    if (refuse)
        *px__byte(c, DESC(2, 3), variant ? 2 : 0) = 1;
    px__expect(c, DESC_XY(16, 2, 3), "slot 2 ('out'): only data slots have a data origin");
}

static void r_patch_fit(int refuse, int variant, px_rcase *c)
{
    pxvm_builder b;
    px__base(&b, 16);
    b.slots[2].w = 5, b.slots[2].h = 3;
    if (variant == 0)
        pxvm_build_patches(&b, 2, refuse ? 6 : 5, 1, 1);
    else if (variant == 1)
        pxvm_build_patches(&b, 2, 1, refuse ? 4 : 3, 1);
    else
        pxvm_build_patches(&b, 2, refuse ? 1 : 0, refuse ? 1 : 0, 0); /* all zero, or a count of 0 */
    px__pyramid(&b, 1, 0);
    px__halt(&b);
    px__finish(&b, c);
    px__expect(c, DESC_XY(16, 2, 4), "slot 2 ('out'): patch size and count must all be >= 1 and the patch must fit the slot");
}

static void r_patch_count(int refuse, int variant, px_rcase *c)
{
    (void)variant;
    pxvm_builder b;
    px__base(&b, 16);
    b.slots[2].w = 5, b.slots[2].h = 5; /* 2 x 2 patches of 2x2 fit (not 3 x 3) */
    pxvm_build_patches(&b, 2, 2, 2, refuse ? 5 : 4);
    px__pyramid(&b, 1, 0);
    px__halt(&b);
    px__finish(&b, c);
    px__expect(c, DESC_XY(16, 2, 5), "slot 2 ('out'): patch count exceeds the patches that fit in the slot");
}

/* ---- code ----------------------------------------------------------------------------------- */

static void r_code_short(int refuse, int variant, px_rcase *c)
{
    (void)variant;
    pxvm_builder b;
    px__base(&b, 31); /* header 21: the image is one row of 31 pixels */
    px__pyramid(&b, 1, 0);
    if (!refuse) { /* a SAMPLE at 22..29 and the HALT at 30: the last pixel */
        px__sample(&b, PX_OP_SAMPLE, 1, 2, 0, 0, 4, 4);
        px__halt(&b);
    } else { /* a SAMPLE at 24..31: one pixel past the image */
        px__halt(&b);
        px__halt(&b);
        px__sample(&b, PX_OP_SAMPLE, 1, 2, 0, 0, 4, 4);
    }
    px__finish(&b, c);
    c->prog.h = 1; /* the builder rounds up to whole rows: cut to the first */
    px__expect(c, 24, 0, "instruction 3 (SAMPLE) needs 8 pixels but the image ends at stream index 31");
}

/* PYRAMID src, then an ARGMAX (variant 0) or an ANISO (variant 1) whose opcode is changed, HALT. */
static void px__opcode_case(int variant, uint8_t op, px_rcase *c)
{
    pxvm_builder b;
    px__base(&b, 16);
    px__pyramid(&b, 1, 0);
    uint32_t i = variant == 1 ? px__sample(&b, PX_OP_ANISO, 1, 2, 0, 0, 4, 4) : px__argmax(&b, 1, 0, 0, 0, 0, 0);
    px__halt(&b);
    uint32_t at = px__pc(&b, i, 0);
    c->x = (int)(at % 16), c->y = (int)(at / 16);
    px__finish(&b, c);
    if (op)
        *px__byte(c, (int)at, 0) = op;
}

static void r_opcode_reserved(int refuse, int variant, px_rcase *c)
{
    px__opcode_case(variant, refuse ? (variant ? 0x21 : 0x42) : 0, c);
    snprintf(c->msg, sizeof c->msg, "instruction 1: opcode 0x%02x is reserved for %s", variant ? 0x21 : 0x42,
             variant ? "anisotropic footprints" : "fixation: further saliency");
}

static void r_opcode_unknown(int refuse, int variant, px_rcase *c)
{
    px__opcode_case(0, refuse ? (variant ? 0xFF : 0x80) : 0, c);
    snprintf(c->msg, sizeof c->msg, "instruction 1: unknown opcode 0x%02x", variant ? 0xFF : 0x80);
}

static void r_no_halt(int refuse, int variant, px_rcase *c)
{
    pxvm_builder b;
    px__base(&b, 16);
    uint32_t last;
    if (variant == 0) { /* the last instruction: HALT, or a PYRAMID of the same length */
        px__pyramid(&b, 1, 0);
        last = refuse ? px__pyramid(&b, 1, 0) : px__halt(&b);
    } else { /* a HALT first and a HALT last, or a HALT first only */
        px__halt(&b);
        px__pyramid(&b, 1, 0);
        last = refuse ? px__pyramid(&b, 1, 0) : px__halt(&b);
    }
    px__expect(c, INSN_XY(&b, last, 0), "the last instruction (%d, PYRAMID) is not HALT", variant ? 2 : 1);
    px__finish(&b, c);
}

/* ---- operands ------------------------------------------------------------------------------- */

static void r_opnd_zero(int refuse, int variant, px_rcase *c)
{
    pxvm_builder b;
    px__base(&b, 16);
    uint32_t i;
    if (variant == 0) {
        i = px__pyramid(&b, 1, 0);
        pxvm_build_patch(&b, i, PX_FI(PYRAMID, reserved), refuse);
        px__expect(c, INSN_XY(&b, i, 0), "instruction 0 (PYRAMID): operand reserved = 1 (reserved, must be 0)");
    } else {
        px__pyramid(&b, 1, 0);
        i = px__sample(&b, PX_OP_SAMPLE, 1, 2, 0, 0, 4, 4);
        pxvm_build_patch(&b, i, PX_FI(SAMPLE, reserved), refuse);
        px__expect(c, INSN_XY(&b, i, 7), "instruction 1 (SAMPLE): operand reserved = 1 (reserved, must be 0)");
    }
    px__halt(&b);
    px__finish(&b, c);
}

static void r_opnd_row(int refuse, int variant, px_rcase *c)
{
    pxvm_builder b;
    pxvm_build_init(&b, 8); /* no slots: DOT_RGB at 5, HALT at 6; rows 1 and 2 after them */
    int32_t f[PXI_MAX_FIELDS] = {0};
    uint32_t i = pxvm_build_insn(&b, PX_OP_DOT_RGB, f);
    px__halt(&b);
    uint8_t zero[8 * 4] = {0};
    int r1 = pxvm_build_row(&b, zero, 8), r2 = pxvm_build_row(&b, zero, 8); /* H = 3 */
    CHECK(r1 == 1 && r2 == 2);
    int row = refuse ? 3 : 2;
    pxvm_build_patch(&b, i, PX_FI(DOT_RGB, row_a), variant == 0 ? row : 1);
    pxvm_build_patch(&b, i, PX_FI(DOT_RGB, row_b), 1);
    pxvm_build_patch(&b, i, PX_FI(DOT_RGB, row_out), variant == 1 ? row : 1);
    px__expect(c, INSN_XY(&b, i, 0), "instruction 0 (DOT_RGB): operand %s = 3 (no such row in the program image)",
               variant == 0 ? "row_a" : "row_out");
    px__finish(&b, c);
}

static void r_opnd_slot(int refuse, int variant, px_rcase *c)
{
    pxvm_builder b;
    px__base(&b, 16);
    px__pyramid(&b, 1, 0);
    uint32_t i;
    if (variant == 0) { /* dst = 2 = n, or 3 */
        i = px__sample(&b, PX_OP_SAMPLE, 1, refuse ? 3 : 2, 0, 0, 4, 4);
        px__expect(c, INSN_XY(&b, i, 0), "instruction 1 (SAMPLE): operand dst = 3 (no such slot)");
    } else { /* a GATHER table: slot 0 (the program image, 16x2: 4 entries of 1 row fit), or n + 1 */
        i = px__gather(&b, 1, 2, 4, 1, refuse ? 3 : 0, 0, 0, 0);
        px__expect(c, INSN_XY(&b, i, 3), "instruction 1 (GATHER): operand table = 3 (no such slot)");
    }
    px__halt(&b);
    px__finish(&b, c);
}

static void r_opnd_mask(int refuse, int variant, px_rcase *c)
{
    (void)variant;
    pxvm_builder b;
    px__base(&b, 16);
    pxvm_build_slot(&b, PXI_ROLE_SCRATCH, "m", 1, 1); /* the tile mask of src */
    uint32_t i = px__pyramid(&b, 1, refuse ? 4 : 3);
    px__halt(&b);
    px__expect(c, INSN_XY(&b, i, 0), "instruction 0 (PYRAMID): operand mask = 4 (no such slot)");
    px__finish(&b, c);
}

static void r_opnd_mode(int refuse, int variant, px_rcase *c)
{
    pxvm_builder b;
    px__base(&b, 16);
    px__pyramid(&b, 1, 0);
    uint32_t i = px__sample(&b, PX_OP_SAMPLE, 1, 2, 0, 0, 4, 4);
    /* variant 0: nearest@f7 (0x1F), bit 5 (0x20); variant 1: nearest (1), a register without the
     * relative bit (5) */
    int mode = variant == 0 ? (refuse ? 0x20 : 0x1F) : (refuse ? 5 : 1);
    pxvm_build_patch(&b, i, PX_FI(SAMPLE, mode), mode);
    px__halt(&b);
    px__expect(c, INSN_XY(&b, i, 0), "instruction 1 (SAMPLE): operand mode = %d (mode is bit 0", variant ? 5 : 32);
    px__finish(&b, c);
}

static void r_opnd_dim(int refuse, int variant, px_rcase *c)
{
    pxvm_builder b;
    px__base(&b, 16);
    px__pyramid(&b, 1, 0);
    int n = refuse ? 0 : 1;
    uint32_t i = px__sample(&b, PX_OP_SAMPLE, 1, 2, 0, 0, variant ? 1 : n, variant ? n : 1);
    px__halt(&b);
    px__expect(c, INSN_XY(&b, i, 2), "instruction 1 (SAMPLE): operand %s = 0 (a size must be at least 1)", variant ? "h" : "w");
    px__finish(&b, c);
}

static void r_opnd_taps(int refuse, int variant, px_rcase *c)
{
    pxvm_builder b;
    px__base(&b, 16);
    px__pyramid(&b, 1, 0);
    uint32_t i = px__sample(&b, PX_OP_ANISO, 1, 2, 0, 0, 4, 4);
    int taps = variant == 0 ? (refuse ? 17 : 16) : (refuse ? 0 : 1);
    pxvm_build_patch(&b, i, PX_FI(ANISO, taps), taps);
    px__halt(&b);
    px__expect(c, INSN_XY(&b, i, 7), "instruction 1 (ANISO): operand taps = %d (taps are 1..16)", variant ? 0 : 17);
    px__finish(&b, c);
}

/* src input 8x8 (4 levels), sal scratch 8x8: SALIENCY c=0 s=1 map=0, HALT. */
static uint32_t px__saliency_base(pxvm_builder *b, int acc)
{
    pxvm_build_init(b, 16);
    pxvm_build_slot(b, PXI_ROLE_INPUT, "src", 8, 8);
    pxvm_build_slot(b, PXI_ROLE_SCRATCH, "sal", 8, 8);
    uint32_t i = px__saliency(b, 1, 2, 0, 1, 0, 0, acc);
    px__halt(b);
    return i;
}

static void r_opnd_flag(int refuse, int variant, px_rcase *c)
{
    (void)variant;
    pxvm_builder b;
    uint32_t i = px__saliency_base(&b, refuse ? 2 : 1);
    px__expect(c, INSN_XY(&b, i, 0), "instruction 0 (SALIENCY): operand accumulate = 2 (a flag is 0 or 1)");
    px__finish(&b, c);
}

static void r_opnd_reg(int refuse, int variant, px_rcase *c)
{
    pxvm_builder b;
    px__base(&b, 16);
    uint32_t i = variant == 0 ? px__argmax(&b, 1, 0, refuse ? 8 : 7, 0, 0, 0) : px__argmax(&b, 1, 0, 0, refuse ? 8 : 7, refuse ? 0 : 1, 0);
    px__halt(&b);
    px__expect(c, INSN_XY(&b, i, variant ? 2 : 0), "instruction 0 (ARGMAX): operand %s = 8 (fixation registers are 0..7)",
               variant ? "ior_first" : "reg");
    px__finish(&b, c);
}

static void r_opnd_level(int refuse, int variant, px_rcase *c)
{
    (void)variant;
    pxvm_builder b;
    pxvm_build_init(&b, 16);
    /* 32768 wide (the side limit raised for it): 16 levels, 0..15, the most a slot has; so 15 is
     * a level of big and 16 no level at all */
    c->lim.max_side = 32768;
    pxvm_build_slot(&b, PXI_ROLE_INPUT, "big", 32768, 1);
    uint32_t i = px__argmax(&b, 1, refuse ? 16 : 15, 0, 0, 0, 0);
    px__halt(&b);
    px__expect(c, INSN_XY(&b, i, 0), "instruction 0 (ARGMAX): operand level = 16 (levels are 0..15)");
    px__finish(&b, c);
}

/* ---- writes --------------------------------------------------------------------------------- */

static void r_write_readonly(int refuse, int variant, px_rcase *c)
{
    pxvm_builder b;
    uint32_t i;
    int slot = 0;
    const char *role = "input";
    if (variant <= 1) { /* SAMPLE src -> out; refused: out -> src (an input) or src -> tab (data) */
        px__base(&b, 16);
        pxvm_image d;
        pxvm_image_alloc(&d, 4, 4, NULL);
        pxvm_build_data_slot(&b, "tab", &d);
        pxvm_image_free(&d);
        px__pyramid(&b, 1, 0);
        if (!refuse)
            i = px__sample(&b, PX_OP_SAMPLE, 1, 2, 0, 0, 4, 4);
        else
            i = variant ? px__sample(&b, PX_OP_SAMPLE, 1, 3, 0, 0, 4, 4) : px__sample(&b, PX_OP_SAMPLE, 2, 1, 0, 0, 4, 4);
        role = variant ? "data" : "input";
        px__expect(c, INSN_XY(&b, i, 1), "instruction 1 (SAMPLE): writes slot %s, a read-only %s slot", variant ? "tab" : "src", role);
        px__halt(&b);
        px__finish(&b, c);
        return;
    }
    if (variant == 2) { /* SALIENCY's map: scratch, or input */
        i = px__saliency_base(&b, 0);
        slot = 2;
    } else { /* DIFF's mask (3) or UPDATE's cur (4): scratch, or input */
        pxvm_build_init(&b, 16);
        pxvm_build_slot(&b, PXI_ROLE_INPUT, "frame", 40, 20);
        int cur = pxvm_build_slot(&b, PXI_ROLE_SCRATCH, "cur", 40, 20);
        pxvm_build_slot(&b, PXI_ROLE_SCRATCH, "mask", 3, 2);
        if (!(variant == 4 && refuse))
            pxvm_build_persist(&b, cur);
        i = px__video(&b, PX_OP_DIFF, 1, 2, 3);
        if (variant == 4)
            i = px__video(&b, PX_OP_UPDATE, 1, 2, 3);
        px__halt(&b);
        slot = variant == 3 ? 3 : 2;
    }
    px__expect(c, INSN_XY(&b, i, 0), "writes slot %s, a read-only input slot", variant == 2 ? "sal" : variant == 3 ? "mask" : "cur");
    px__finish(&b, c);
    if (refuse)
        *px__byte(c, DESC(slot, 0), 0) = PXI_ROLE_INPUT;
}

static void r_write_fits(int refuse, int variant, px_rcase *c)
{
    pxvm_builder b;
    px__base(&b, 16);
    px__pyramid(&b, 1, 0);
    int at = refuse ? 3 : 2; /* 2 + 2 = 4 fits the 4x4 slot; 3 + 2 does not */
    uint32_t i = variant ? px__sample(&b, PX_OP_SAMPLE, 1, 2, 0, at, 4, 2) : px__sample(&b, PX_OP_SAMPLE, 1, 2, at, 0, 2, 4);
    px__halt(&b);
    px__expect(c, INSN_XY(&b, i, 1), "instruction 1 (SAMPLE): destination %s does not fit slot out (4x4)",
               variant ? "0,3 4x2" : "3,0 2x4");
    px__finish(&b, c);
}

static void r_write_code(int refuse, int variant, px_rcase *c)
{
    pxvm_builder b;
    uint32_t i;
    if (variant == 0) { /* src 8x8: header 13, SAMPLE 13..20, HALT 21: code end 22 = (6, 1) */
        pxvm_build_init(&b, 16);
        pxvm_build_slot(&b, PXI_ROLE_INPUT, "src", 8, 8);
        i = px__sample(&b, PX_OP_SAMPLE, 1, 0, refuse ? 5 : 6, 1, 2, 1);
        px__halt(&b);
        px__expect(c, INSN_XY(&b, i, 1), "instruction 0 (SAMPLE): destination 5,1 2x1 of the program image overlaps its header and code (stream 0..21)");
    } else { /* DOT_RGB at 5, HALT at 6 in a 4-wide image: code end 7; pixel (0, 2) is 8, (0, 1) is 4 */
        pxvm_build_init(&b, 4);
        int32_t f[PXI_MAX_FIELDS] = {0};
        i = pxvm_build_insn(&b, PX_OP_DOT_RGB, f);
        px__halt(&b);
        uint8_t zero[16] = {0};
        int r = pxvm_build_row(&b, zero, 4);
        CHECK_EQ(r, 2);
        pxvm_build_patch(&b, i, PX_FI(DOT_RGB, row_a), 2);
        pxvm_build_patch(&b, i, PX_FI(DOT_RGB, row_b), 2);
        pxvm_build_patch(&b, i, PX_FI(DOT_RGB, row_out), refuse ? 1 : 2);
        px__expect(c, INSN_XY(&b, i, 0), "instruction 0 (DOT_RGB): destination 0,1 1x1 of the program image overlaps its header and code (stream 0..6)");
    }
    px__finish(&b, c);
}

/* ---- sampling, tables, masks ---------------------------------------------------------------- */

static void r_fetch_same(int refuse, int variant, px_rcase *c)
{
    pxvm_builder b;
    px__base(&b, 16);
    px__pyramid(&b, 1, 0);
    uint32_t i = px__sample(&b, variant ? PX_OP_ANISO : PX_OP_SAMPLE, refuse ? 2 : 1, 2, 0, 0, 4, 4);
    px__halt(&b);
    px__expect(c, INSN_XY(&b, i, 0), "instruction 1 (%s): reads and writes the same slot out", variant ? "ANISO" : "SAMPLE");
    px__finish(&b, c);
}

/* src input 8x8, out output 4x4, m scratch 1x1 (src's tile mask), tab data 12x4, t scratch 12x4. */
static void px__incremental(pxvm_builder *b, int persistent)
{
    px__base(b, 16);
    pxvm_build_slot(b, PXI_ROLE_SCRATCH, "m", 1, 1);
    pxvm_image d;
    pxvm_image_alloc(&d, 12, 4, NULL);
    pxvm_build_data_slot(b, "tab", &d);
    pxvm_image_free(&d);
    pxvm_build_slot(b, PXI_ROLE_SCRATCH, "t", 12, 4);
    if (persistent)
        pxvm_build_persist(b, 2);
}

static void r_fetch_persist(int refuse, int variant, px_rcase *c)
{
    pxvm_builder b;
    px__incremental(&b, !refuse);
    uint32_t i = variant ? px__gather(&b, 1, 2, 4, 4, 4, 0, 0, 3) : px__sample(&b, PX_OP_SAMPLE, 1, 2, 0, 0, 4, 4);
    if (!variant)
        pxvm_build_patch(&b, i, PX_FI(SAMPLE, mask), 3);
    px__halt(&b);
    px__expect(c, INSN_XY(&b, i, 0), "samples incrementally (mask m) into slot out, which is not persistent");
    px__finish(&b, c);
}

static void r_fetch_table_data(int refuse, int variant, px_rcase *c)
{
    (void)variant;
    pxvm_builder b;
    px__incremental(&b, 1);
    uint32_t i = px__gather(&b, 1, 2, 4, 4, refuse ? 5 : 4, 0, 0, 3);
    px__halt(&b);
    px__expect(c, INSN_XY(&b, i, 3), "an incremental GATHER needs its table in a data slot (constant), not slot t");
    px__finish(&b, c);
}

static void r_gather_own_table(int refuse, int variant, px_rcase *c)
{
    (void)variant;
    pxvm_builder b;
    px__incremental(&b, 0);
    uint32_t i = px__gather(&b, 1, refuse ? 5 : 2, 4, 4, 5, 0, 0, 0); /* out <- table t, or t <- t */
    px__halt(&b);
    px__expect(c, INSN_XY(&b, i, 3), "instruction 0 (GATHER): writes its own table slot t");
    px__finish(&b, c);
}

static void r_gather_table_fits(int refuse, int variant, px_rcase *c)
{
    pxvm_builder b;
    px__base(&b, 16);
    /* 4x4 outputs need 12x4 table pixels: variant 0 one row short, 1 one column short, 2 the
     * region moved one row down in a 12x5 table */
    int tw = variant == 1 && refuse ? 11 : 12, th = variant == 0 && refuse ? 3 : variant == 2 ? 5 : 4;
    pxvm_image d;
    pxvm_image_alloc(&d, tw, th, NULL);
    int k = pxvm_build_data_slot(&b, "tab", &d);
    pxvm_image_free(&d);
    uint32_t i = px__gather(&b, 1, 2, 4, 4, k, 0, variant == 2 ? (refuse ? 2 : 1) : 0, 0);
    px__halt(&b);
    px__expect(c, INSN_XY(&b, i, 4), "instruction 0 (GATHER): table 0,%d needs 12x4 pixels (3 per entry) but slot tab is %dx%d",
               variant == 2 ? 2 : 0, tw, th);
    px__finish(&b, c);
}

static void r_mask_tiles(int refuse, int variant, px_rcase *c)
{
    pxvm_builder b;
    pxvm_build_init(&b, 16);
    uint32_t i;
    if (variant <= 1) { /* src 33x17: 3x2 tiles (not 2x1) */
        pxvm_build_slot(&b, PXI_ROLE_INPUT, "src", 33, 17);
        pxvm_build_slot(&b, PXI_ROLE_OUTPUT, "out", 4, 4);
        pxvm_build_slot(&b, PXI_ROLE_SCRATCH, "m", refuse ? 2 : 3, 2);
        pxvm_build_persist(&b, 2);
        if (variant == 0) {
            i = px__pyramid(&b, 1, 3);
        } else {
            i = px__sample(&b, PX_OP_SAMPLE, 1, 2, 0, 0, 4, 4);
            pxvm_build_patch(&b, i, PX_FI(SAMPLE, mask), 3);
        }
        px__expect(c, INSN_XY(&b, i, 0), "tile mask m is 2x2; slot src (33x17) has 3x2 tiles of 16x16");
    } else { /* DIFF frame 40x20 -> cur: 3x2 tiles */
        pxvm_build_slot(&b, PXI_ROLE_INPUT, "frame", 40, 20);
        pxvm_build_slot(&b, PXI_ROLE_SCRATCH, "cur", 40, 20);
        pxvm_build_slot(&b, PXI_ROLE_SCRATCH, "m", 3, refuse ? 1 : 2);
        pxvm_build_persist(&b, 2);
        i = px__video(&b, PX_OP_DIFF, 1, 2, 3);
        px__expect(c, INSN_XY(&b, i, 0), "tile mask m is 3x1; slot cur (40x20) has 3x2 tiles of 16x16");
    }
    px__halt(&b);
    px__finish(&b, c);
}

/* frame input 40x20, cur scratch (persistent) cw x ch, mask scratch 3x2; `op` frame cur mask. */
static uint32_t px__video_base(pxvm_builder *b, int op, int frame, int cur, int mask, int cw, int ch, int persistent)
{
    pxvm_build_init(b, 16);
    pxvm_build_slot(b, PXI_ROLE_INPUT, "frame", 40, 20);
    pxvm_build_slot(b, PXI_ROLE_SCRATCH, "cur", cw, ch);
    pxvm_build_slot(b, PXI_ROLE_SCRATCH, "mask", 3, 2);
    if (persistent)
        pxvm_build_persist(b, 2);
    uint32_t i = px__video(b, op, frame, cur, mask);
    px__halt(b);
    return i;
}

static void r_video_same(int refuse, int variant, px_rcase *c)
{
    pxvm_builder b;
    uint32_t i = px__video_base(&b, variant ? PX_OP_UPDATE : PX_OP_DIFF, refuse ? 2 : 1, 2, 3, 40, 20, 1);
    px__expect(c, INSN_XY(&b, i, 0), "frame and cur are the same slot cur");
    px__finish(&b, c);
}

static void r_video_size(int refuse, int variant, px_rcase *c)
{
    pxvm_builder b;
    /* 41x20 and 40x21 still have 3x2 tiles: only the sizes differ */
    uint32_t i = px__video_base(&b, PX_OP_DIFF, 1, 2, 3, refuse && !variant ? 41 : 40, refuse && variant ? 21 : 20, 1);
    px__expect(c, INSN_XY(&b, i, 0), "frame frame is 40x20 but cur cur is %s", variant ? "40x21" : "41x20");
    px__finish(&b, c);
}

static void r_video_mask_own(int refuse, int variant, px_rcase *c)
{
    pxvm_builder b;
    uint32_t i = px__video_base(&b, PX_OP_DIFF, 1, 2, refuse ? (variant ? 1 : 2) : 3, 40, 20, 1);
    px__expect(c, INSN_XY(&b, i, 0), "the mask must be a slot of its own");
    px__finish(&b, c);
}

static void r_update_persist(int refuse, int variant, px_rcase *c)
{
    (void)variant;
    pxvm_builder b;
    uint32_t i = px__video_base(&b, PX_OP_UPDATE, 1, 2, 3, 40, 20, !refuse);
    px__expect(c, INSN_XY(&b, i, 0), "instruction 0 (UPDATE): updates slot cur, which is not persistent");
    px__finish(&b, c);
}

/* ---- SALIENCY, ARGMAX ----------------------------------------------------------------------- */

/* src input sw x sh, sal scratch mw x mh; SALIENCY src -> sal (c, s, map, shift), HALT. */
static uint32_t px__sal(pxvm_builder *b, int sw, int sh, int mw, int mh, int dst, int c, int s, int map, int shift)
{
    pxvm_build_init(b, 16);
    pxvm_build_slot(b, PXI_ROLE_INPUT, "src", sw, sh);
    pxvm_build_slot(b, PXI_ROLE_SCRATCH, "sal", mw, mh);
    uint32_t i = px__saliency(b, 1, dst, c, s, map, shift, 0);
    px__halt(b);
    return i;
}

static void r_sal_same(int refuse, int variant, px_rcase *c)
{
    (void)variant;
    pxvm_builder b;
    uint32_t i = px__sal(&b, 8, 8, 8, 8, refuse ? 1 : 2, 0, 1, 0, 0);
    px__expect(c, INSN_XY(&b, i, 0), "instruction 0 (SALIENCY): reads and writes the same slot src");
    px__finish(&b, c);
}

static void r_sal_order(int refuse, int variant, px_rcase *c)
{
    (void)variant;
    pxvm_builder b;
    uint32_t i = px__sal(&b, 8, 8, 4, 4, 2, 1, refuse ? 1 : 2, 1, 0);
    px__expect(c, INSN_XY(&b, i, 1), "centre level 1 must be finer than surround level 1");
    px__finish(&b, c);
}

static void r_sal_levels(int refuse, int variant, px_rcase *c)
{
    pxvm_builder b;
    uint32_t i;
    if (variant == 0) /* 8x8 has levels 0..3: the surround 3, or 4 */
        i = px__sal(&b, 8, 8, 8, 8, 2, 0, refuse ? 4 : 3, 0, 0);
    else /* the map level 3 (1x1), or 4 */
        i = px__sal(&b, 8, 8, 1, 1, 2, 0, 1, refuse ? 4 : 3, 0);
    px__expect(c, INSN_XY(&b, i, 1), "level 4 is beyond the 4 levels of slot src");
    px__finish(&b, c);
}

static void r_sal_map_level(int refuse, int variant, px_rcase *c)
{
    (void)variant;
    pxvm_builder b;
    uint32_t i = px__sal(&b, 8, 8, 4, 4, 2, 1, 2, refuse ? 0 : 1, 0);
    px__expect(c, INSN_XY(&b, i, 1), "map level 0 must not be finer than centre level 1");
    px__finish(&b, c);
}

static void r_sal_shift(int refuse, int variant, px_rcase *c)
{
    (void)variant;
    pxvm_builder b;
    uint32_t i = px__sal(&b, 8, 8, 8, 8, 2, 0, 1, 0, refuse ? 21 : 20);
    px__expect(c, INSN_XY(&b, i, 1), "shift 21 is larger than 20");
    px__finish(&b, c);
}

static void r_sal_size(int refuse, int variant, px_rcase *c)
{
    pxvm_builder b;
    /* src 9x7: level 1 is 4x3 (floored), not 5x4 */
    uint32_t i = px__sal(&b, 9, 7, refuse && !variant ? 5 : 4, refuse && variant ? 4 : 3, 2, 0, 2, 1, 0);
    px__expect(c, INSN_XY(&b, i, 0), "map slot sal is %s but level 1 of slot src is 4x3", variant ? "4x4" : "5x3");
    px__finish(&b, c);
}

static void r_argmax_level(int refuse, int variant, px_rcase *c)
{
    (void)variant;
    pxvm_builder b;
    px__base(&b, 16);
    uint32_t i = px__argmax(&b, 1, refuse ? 4 : 3, 0, 0, 0, 0);
    px__halt(&b);
    px__expect(c, INSN_XY(&b, i, 0), "instruction 0 (ARGMAX): level 4 is beyond the 4 levels of slot src");
    px__finish(&b, c);
}

static void r_argmax_ior(int refuse, int variant, px_rcase *c)
{
    pxvm_builder b;
    px__base(&b, 16);
    uint32_t i = variant ? px__argmax(&b, 1, 0, 0, 7, refuse ? 2 : 1, 0) : px__argmax(&b, 1, 0, 0, 0, refuse ? 9 : 8, 0);
    px__halt(&b);
    px__expect(c, INSN_XY(&b, i, 2), "inhibiting registers %s: there are 8 (0..7)", variant ? "7..8" : "0..8");
    px__finish(&b, c);
}

static void r_argmax_radius(int refuse, int variant, px_rcase *c)
{
    (void)variant;
    pxvm_builder b;
    px__base(&b, 16);
    uint32_t i = px__argmax(&b, 1, 0, 0, 0, 1, refuse ? 16385 : 16384);
    px__halt(&b);
    px__expect(c, INSN_XY(&b, i, 3), "inhibition radius 16385 is larger than 16384 texels");
    px__finish(&b, c);
}

/* ---- unlinkable, traps ---------------------------------------------------------------------- */

static void px__run_base(px_rcase *c, int iw, int ih, int slot)
{
    px__base_program(c);
    c->stage = PX_RUN;
    c->bind_slot = slot;
    if (iw)
        pxvm_image_alloc(&c->input, iw, ih, NULL);
}

static void r_bind_unbound(int refuse, int variant, px_rcase *c)
{
    (void)variant;
    px__run_base(c, refuse ? 0 : 8, 8, 1);
    px__expect(c, -1, -1, "input slot 1 ('src') is not bound to an image (--in src=FILE)");
}

static void r_bind_size(int refuse, int variant, px_rcase *c)
{
    int w = refuse && variant ? 9 : 8, h = refuse && !variant ? 9 : 8;
    px__run_base(c, w, h, 1);
    px__expect(c, -1, -1, "a %dx%d image cannot be bound to slot 1 ('src'), which is 8x8", w, h);
}

static void r_bind_role(int refuse, int variant, px_rcase *c)
{
    (void)variant;
    px__run_base(c, refuse ? 4 : 8, refuse ? 4 : 8, refuse ? 2 : 1);
    px__expect(c, -1, -1, "slot 2 ('out') is a output slot; only input slots take images");
}

static void r_dot_overflow(int refuse, int variant, px_rcase *c)
{
    (void)variant;
    pxvm_builder b;
    pxvm_build_init(&b, 8); /* DOT_RGB at 5, HALT at 6; rows a, b, out after them */
    int32_t f[PXI_MAX_FIELDS] = {0};
    uint32_t i = pxvm_build_insn(&b, PX_OP_DOT_RGB, f);
    px__halt(&b);
    /* 255*255 + 255*2 = 65535 fits; one more term 1*1 gives 65536 */
    uint8_t ra[8 * 4] = {0}, rb[8 * 4] = {0}, ro[8 * 4] = {0};
    ra[0] = ra[4] = 255, rb[0] = 255, rb[4] = 2;
    if (refuse)
        ra[8] = rb[8] = 1;
    int a = pxvm_build_row(&b, ra, 8), r = pxvm_build_row(&b, rb, 8), o = pxvm_build_row(&b, ro, 8);
    pxvm_build_patch(&b, i, PX_FI(DOT_RGB, row_a), a);
    pxvm_build_patch(&b, i, PX_FI(DOT_RGB, row_b), r);
    pxvm_build_patch(&b, i, PX_FI(DOT_RGB, row_out), o);
    px__expect(c, INSN_XY(&b, i, 0), "instruction 0 (DOT_RGB): sum 65536 does not fit in 16 bits");
    px__finish(&b, c);
    c->stage = PX_RUN;
}

static void r_steps(int refuse, int variant, px_rcase *c)
{
    (void)variant;
    pxvm_builder b;
    px__base(&b, 16);
    px__pyramid(&b, 1, 0);
    px__sample(&b, PX_OP_SAMPLE, 1, 2, 0, 0, 4, 4);
    uint32_t h = px__halt(&b);
    px__expect(c, INSN_XY(&b, h, 0), "step budget of 2 instructions exhausted before instruction 2 (see --max-steps)");
    px__finish(&b, c);
    c->stage = PX_RUN;
    c->bind_slot = 1;
    pxvm_image_alloc(&c->input, 8, 8, NULL);
    c->max_steps = refuse ? 2 : 3; /* HALT counts */
}

/* ---- the table ------------------------------------------------------------------------------ */

/* ---- any-size inputs ------------------------------------------------------------------------ */

/* Slot 1 'src' 8x8 any-size (bounds lo, hi, pixels), 2 'out' 4x4; PYRAMID src, SAMPLE src -> out
 * (its opcode at stream 22, cu at 25 = (9,1), code at 21, image 16 wide). */
static void px__any_program(px_rcase *c, int lo, int hi, uint32_t pixels)
{
    pxvm_builder b;
    px__base(&b, 16);
    pxvm_build_any_size(&b, 1, lo, hi, pixels);
    px__pyramid(&b, 1, 0);
    px__sample(&b, PX_OP_SAMPLE, 1, 2, 0, 0, 4, 4);
    px__halt(&b);
    px__finish(&b, c);
}
static void r_any_input(int refuse, int variant, px_rcase *c)
{
    (void)variant;
    px__any_program(c, 0, 0, 0);
    if (refuse)
        *px__byte(c, DESC(2, 0), 1) = PXI_SLOT_ANYSIZE;
    px__expect(c, DESC_XY(16, 2, 0), "slot 2 ('out'): only input slots can be any-size");
}
static void r_any_format(int refuse, int variant, px_rcase *c)
{
    (void)variant;
    px__any_program(c, 0, 0, 0);
    if (refuse)
        *px__byte(c, 1, 1) = 0;
    px__expect(c, DESC_XY(16, 1, 0), "slot 1 ('src'): any-size slots (flag 2) need format 1.1");
}
static void r_any_bounds(int refuse, int variant, px_rcase *c)
{
    if (variant == 0) /* min <= max: 8..8 is fine, 9..8 is not */
        px__any_program(c, refuse ? 9 : 8, 8, 0);
    else /* max <= the side limit */
        px__any_program(c, 0, (int)c->lim.max_side + refuse, 0);
    px__expect(c, DESC_XY(16, 1, 3), "slot 1 ('src'): any-size bounds: min side %d, max side %u must have min <= max",
               variant == 0 ? 8 + refuse : 1, variant == 0 ? 8 : c->lim.max_side + (unsigned)refuse);
}
static void r_any_reserved(int refuse, int variant, px_rcase *c)
{
    (void)variant;
    px__any_program(c, 0, 0, 0);
    *px__byte(c, DESC(1, 5), 0) = (uint8_t)refuse;
    px__expect(c, DESC_XY(16, 1, 5), "slot 1 ('src'): an any-size slot is no patch atlas: descriptor +5 must be 0");
}
static void r_any_reference(int refuse, int variant, px_rcase *c)
{
    if (variant == 0) /* the reference 8x8 at the min side */
        px__any_program(c, 8 + refuse, 16, 0);
    else if (variant == 1) /* at the max side */
        px__any_program(c, 0, 8 - refuse, 0);
    else /* at the max pixels */
        px__any_program(c, 0, 0, 64u - (uint32_t)refuse);
    px__expect(c, DESC_XY(16, 1, 1), "slot 1 ('src'): its reference size 8x8 lies outside its bounds");
    c->code = variant == 2 ? PXE_SLOT_ANY_REFERENCE_PIXELS : PXE_SLOT_ANY_REFERENCE;
}
static void r_any_readers(int refuse, int variant, px_rcase *c)
{
    pxvm_builder b;
    px__base(&b, 16);
    pxvm_build_slot(&b, PXI_ROLE_SCRATCH, "m", 1, 1); /* a tile mask of the 8x8 src */
    pxvm_build_persist(&b, 2);
    pxvm_build_any_size(&b, 1, 0, 0, 0);
    int32_t f[PXI_MAX_FIELDS] = {0};
    if (variant == 0) { /* SAMPLE may read it, GATHER may not */
        px__sample(&b, refuse ? PX_OP_GATHER : PX_OP_SAMPLE, 1, 2, 0, 0, 4, 4);
    } else if (variant == 1) { /* SAMPLE, but not incrementally */
        uint32_t i = px__sample(&b, PX_OP_SAMPLE, 1, 2, 0, 0, 4, 4);
        pxvm_build_patch(&b, i, PX_FI(SAMPLE, mask), refuse ? 3 : 0);
    } else { /* ARGMAX's space */
        f[PX_FI(ARGMAX, src)] = 2, f[PX_FI(ARGMAX, space)] = refuse ? 1 : 2;
        pxvm_build_insn(&b, PX_OP_ARGMAX, f);
    }
    px__halt(&b);
    px__finish(&b, c);
    if (variant == 1)
        px__expect(c, 5 + 8 * 3 - 16, 1, "instruction 0 (SAMPLE): samples any-size slot src incrementally (mask 3)");
    else
        px__expect(c, 5 + 8 * 3 - 16, 1, "instruction 0 (%s): operand %s names any-size slot src, which only PYRAMID",
                   variant == 0 ? "GATHER" : "ARGMAX", variant == 0 ? "src" : "space");
    c->code = variant == 1 ? PXE_ANY_INCREMENTAL : PXE_ANY_READER;
}
static void r_any_bind(int refuse, int variant, px_rcase *c)
{
    /* at most 80 pixels: 10x8 is exactly 80, 9x9 one more (the sides of both inside 4..16) */
    px__any_program(c, 4, 16, 80);
    c->stage = PX_RESOLVE, c->bind_slot = 1;
    int w[3][2] = {{16, 17}, {4, 3}, {10, 9}}, h[3][2] = {{4, 4}, {4, 4}, {8, 9}};
    c->rw = w[variant][refuse], c->rh = h[variant][refuse];
    c->code = PXE_INPUT_BOUNDS_PIXELS; /* the slot has a pixel bound */
    px__expect(c, -1, -1, "a %dx%d image cannot be bound to slot 1 ('src'): it takes 4x4 .. 16x16, at most 80 pixels",
               c->rw, c->rh);
}
static void r_any_range(int refuse, int variant, px_rcase *c)
{
    px__any_program(c, 0, 0, 0);
    c->stage = PX_RESOLVE, c->bind_slot = 1, c->rw = 16, c->rh = 8; /* cu doubles */
    int64_t cu = variant == 0 ? (1ll << 30) - 1 + refuse : -(1ll << 30) - refuse;
    pxi_write_le(c->prog.px, 25, 0, 4, (uint32_t)(int32_t)cu);
    px__expect(c, 9, 1, "at 16x8 of slot 1 ('src'): instruction 1 (SAMPLE): operand cu = %lld scales to %lld, outside int32",
               (long long)cu, (long long)(2 * cu));
}
static void r_any_resolved(int refuse, int variant, px_rcase *c)
{
    (void)variant;
    px__any_program(c, 0, 0, 0);
    /* the memory limit: what the slots need at 16x15, so that 16x16 is over it */
    pxvm_program poly, res;
    pxvm_error err;
    int wh[6] = {0, 0, 16, 15, 0, 0};
    if (pxvm_program_from_copy(&c->prog, &c->lim, &poly, &err) < 0 ||
        pxvm_program_resolve(&poly, wh, &c->lim, &res, &err) < 0) {
        px_test_fail(__FILE__, __LINE__, "%s", err.msg);
        return;
    }
    c->lim.max_memory = res.memory;
    pxvm_program_free(&res);
    pxvm_program_free(&poly);
    c->stage = PX_RESOLVE, c->bind_slot = 1, c->rw = 16, c->rh = 15 + refuse;
    px__expect(c, -1, -1, "at 16x16 of slot 1 ('src'), the resolved program breaks a rule: invalid: the slots need");
}

/* ---- the edges the pairs sit on (px_redge) --------------------------------------------------- */

/* Limits under which every case of the table loads, so that a refused case can be measured. */
static void px__lim_open(pxvm_limits *lim)
{
    pxvm_limits_default(lim);
    lim->max_side = 65535, lim->max_memory = UINT64_MAX / 4, lim->max_insns = UINT32_MAX;
}

/* The case's program loaded under the open limits; -1 (a test failure) when it does not load. */
static int px__measure_load(const px_rcase *c, pxvm_program *p)
{
    pxvm_limits open;
    pxvm_error err;
    px__lim_open(&open);
    if (pxvm_program_from_copy(&c->prog, &open, p, &err) < 0) {
        px_test_fail(__FILE__, __LINE__, "measuring a case: %s", err.msg);
        return -1;
    }
    return 0;
}

/* Slot k's any-size words as the descriptor's bytes hold them (the reference size, the min and
 * max side, the max pixels; SPEC 1), 0 standing for 0 (the loader's defaults are not applied). */
static void px__desc_any(const px_rcase *c, int k, int64_t *w, int64_t *h, int64_t *lo, int64_t *hi, int64_t *pixels)
{
    const uint8_t *d = c->prog.px + 4u * (size_t)DESC(k, 0);
    *w = pxi_read_le(d, 1, 0, 4), *h = pxi_read_le(d, 2, 0, 4);
    *lo = pxi_read_le(d, 3, 0, 2), *hi = pxi_read_le(d, 3, 2, 2), *pixels = pxi_read_le(d, 4, 0, 4);
}

static int e_image_side(const px_rcase *c, int variant, px_redge_at *e)
{
    (void)variant;
    pxvm_limits open;
    pxvm_error err;
    pxvm_image img;
    px__lim_open(&open);
    if (pxvm_png_decode(c->file, c->len, "case.png", &open, &img, &err) < 0)
        return px_test_fail(__FILE__, __LINE__, "%s", err.msg), 1;
    e->value = img.w > img.h ? img.w : img.h, e->bound = c->lim.max_side, e->dir = 1, e->what = "the larger side";
    pxvm_image_free(&img);
    return 0;
}

static int e_max_insns(const px_rcase *c, int variant, px_redge_at *e)
{
    (void)variant;
    pxvm_program p;
    if (px__measure_load(c, &p) < 0)
        return 1;
    e->value = p.ninsns, e->bound = c->lim.max_insns, e->dir = 1, e->what = "instructions";
    pxvm_program_free(&p);
    return 0;
}

static int e_prog_side(const px_rcase *c, int variant, px_redge_at *e)
{
    (void)variant;
    e->value = c->prog.w > c->prog.h ? c->prog.w : c->prog.h, e->bound = c->lim.max_side, e->dir = 1;
    e->what = "the program image's larger side";
    return 0;
}

static int e_memory(const px_rcase *c, int variant, px_redge_at *e)
{
    (void)variant;
    pxvm_program p;
    if (px__measure_load(c, &p) < 0)
        return 1;
    e->value = (int64_t)p.memory, e->bound = (int64_t)c->lim.max_memory, e->dir = 1, e->what = "bytes of slots";
    pxvm_program_free(&p);
    return 0;
}

static int e_slot_side(const px_rcase *c, int variant, px_redge_at *e)
{
    const uint8_t *d = c->prog.px + 4u * (size_t)DESC(2, 0);
    e->value = pxi_read_le(d, variant == 0 ? 1 : 2, 0, 4);
    e->bound = variant == 0 ? c->lim.max_side : 1, e->dir = variant == 0 ? 1 : -1;
    e->what = variant == 0 ? "slot 2's width" : "slot 2's height";
    return 0;
}

static int e_any_bounds(const px_rcase *c, int variant, px_redge_at *e)
{
    int64_t w, h, lo, hi, pixels;
    px__desc_any(c, 1, &w, &h, &lo, &hi, &pixels);
    if (variant == 0) /* min <= max */
        e->value = lo, e->bound = hi, e->what = "the min side";
    else /* max <= the side limit */
        e->value = hi, e->bound = c->lim.max_side, e->what = "the max side";
    e->dir = 1;
    return 0;
}

static int e_any_reference(const px_rcase *c, int variant, px_redge_at *e)
{
    int64_t w, h, lo, hi, pixels;
    px__desc_any(c, 1, &w, &h, &lo, &hi, &pixels);
    if (variant == 0)
        e->value = w < h ? w : h, e->bound = lo, e->dir = -1, e->what = "the reference's smaller side";
    else if (variant == 1)
        e->value = w > h ? w : h, e->bound = hi, e->dir = 1, e->what = "the reference's larger side";
    else
        e->value = w * h, e->bound = pixels, e->dir = 1, e->what = "the reference's pixels";
    return 0;
}

/* U-BIND-4: the bound size against the slot's own bounds, read from its descriptor; the other
 * two words of the rule inside their bounds, so that the one named decides. */
static int e_any_bind(const px_rcase *c, int variant, px_redge_at *e)
{
    int64_t w, h, lo, hi, pixels;
    px__desc_any(c, c->bind_slot, &w, &h, &lo, &hi, &pixels);
    int64_t small = c->rw < c->rh ? c->rw : c->rh, large = c->rw > c->rh ? c->rw : c->rh, n = (int64_t)c->rw * c->rh;
    if (variant == 0)
        e->value = large, e->bound = hi, e->dir = 1, e->what = "the larger side";
    else if (variant == 1)
        e->value = small, e->bound = lo, e->dir = -1, e->what = "the smaller side";
    else
        e->value = n, e->bound = pixels, e->dir = 1, e->what = "the pixels";
    if ((variant != 0 && large > hi) || (variant != 1 && small < lo) || (variant != 2 && pixels && n > pixels))
        px_test_fail(__FILE__, __LINE__, "U-BIND-4 variant %d: %dx%d breaks another word of the bounds (%lld..%lld, %lld pixels)",
                     variant, c->rw, c->rh, (long long)lo, (long long)hi, (long long)pixels);
    return 0;
}

static int e_any_range(const px_rcase *c, int variant, px_redge_at *e)
{
    int64_t w, h, lo, hi, pixels;
    px__desc_any(c, c->bind_slot, &w, &h, &lo, &hi, &pixels);
    int32_t cu = (int32_t)pxi_read_le(c->prog.px, 25, 0, 4);
    e->value = px_scale_q16(cu, c->rw, (int)w); /* SPEC 2's scale(q, W, W0) */
    e->bound = variant == 0 ? INT32_MAX : INT32_MIN, e->dir = variant == 0 ? 1 : -1, e->what = "the rescaled cu";
    e->step = (c->rw + w - 1) / w; /* one unit of cu moves it by at most ceil(W / W0) */
    return 0;
}

static int e_any_resolved(const px_rcase *c, int variant, px_redge_at *e)
{
    (void)variant;
    pxvm_program p, r;
    pxvm_limits open;
    pxvm_error err;
    px__lim_open(&open);
    if (px__measure_load(c, &p) < 0)
        return 1;
    int wh[2 * (PXVM_MAX_SLOTS + 1)] = {0};
    wh[2 * c->bind_slot] = c->rw, wh[2 * c->bind_slot + 1] = c->rh;
    int rc = pxvm_program_resolve(&p, wh, &open, &r, &err);
    pxvm_program_free(&p);
    if (rc < 0)
        return px_test_fail(__FILE__, __LINE__, "%s", err.msg), 1;
    e->value = (int64_t)r.memory, e->bound = (int64_t)c->lim.max_memory, e->dir = 1;
    e->what = "bytes of the resolution's slots";
    pxvm_program_free(&r);
    /* one row (the case's parameter) more or less: the step, the larger of the two, measured */
    for (int d = -1; d <= 1; d += 2) {
        wh[2 * c->bind_slot + 1] = c->rh + d;
        if (px__measure_load(c, &p) < 0)
            return 1;
        rc = pxvm_program_resolve(&p, wh, &open, &r, &err);
        pxvm_program_free(&p);
        if (rc < 0)
            return px_test_fail(__FILE__, __LINE__, "%s", err.msg), 1;
        int64_t step = ((int64_t)r.memory - e->value) * d;
        e->step = step > e->step ? step : e->step;
        pxvm_program_free(&r);
    }
    return 0;
}

/* Operand f of opcode op at the pixel the case's message names (an operand rule's: the
 * operand's own pixel), as the loader reads it. */
static int64_t px__operand_at(const px_rcase *c, int op, int f)
{
    const pxi_field_info *fi = &pxi_op(op)->fields[f];
    const uint8_t *px = c->prog.px + 4u * ((size_t)c->y * (size_t)c->prog.w + (size_t)c->x);
    return pxi_read_le(px, 0, fi->channel, fi->bytes);
}

static int e_opnd_taps(const px_rcase *c, int variant, px_redge_at *e)
{
    e->value = px__operand_at(c, PX_OP_ANISO, PX_FI(ANISO, taps)), e->what = "taps";
    e->bound = variant == 0 ? PX_MAX_TAPS : 1, e->dir = variant == 0 ? 1 : -1;
    return 0;
}

static int e_opnd_reg(const px_rcase *c, int variant, px_redge_at *e)
{
    e->value = px__operand_at(c, PX_OP_ARGMAX, variant == 0 ? PX_FI(ARGMAX, reg) : PX_FI(ARGMAX, ior_first));
    e->bound = PX_FIX_REGS - 1, e->dir = 1, e->what = variant == 0 ? "reg" : "ior_first";
    return 0;
}

static int e_opnd_level(const px_rcase *c, int variant, px_redge_at *e)
{
    (void)variant;
    e->value = px__operand_at(c, PX_OP_ARGMAX, PX_FI(ARGMAX, level));
    e->bound = PXVM_MAX_LEVELS - 1, e->dir = 1, e->what = "level";
    return 0;
}

/* T-STEP-1: the instructions a run executes (every one here: no early HALT), HALT included. */
static int e_steps(const px_rcase *c, int variant, px_redge_at *e)
{
    (void)variant;
    pxvm_program p;
    if (px__measure_load(c, &p) < 0)
        return 1;
    e->value = p.ninsns, e->bound = (int64_t)c->max_steps, e->dir = 1, e->what = "instructions run";
    pxvm_program_free(&p);
    return 0;
}

/* ---- RESIZE: its pairs are built in test_resize_op.c ----------------------------------------- */

void px_resize_rule_case(int rule, int refuse, int variant, pxvm_image *prog, int *x, int *y, char *msg, size_t n);
#define PX__RESIZE_RULE(k)                                                                                   \
    static void r_resize_##k(int refuse, int variant, px_rcase *c)                                           \
    {                                                                                                        \
        px_resize_rule_case(k, refuse, variant, &c->prog, &c->x, &c->y, c->msg, sizeof c->msg);             \
    }
PX__RESIZE_RULE(1)
PX__RESIZE_RULE(2)
PX__RESIZE_RULE(3)
PX__RESIZE_RULE(4)
void px_resize_memory_case(int refuse, int variant, pxvm_image *prog, pxvm_limits *lim, int *x, int *y, char *msg, size_t n);
static void r_resize_5(int refuse, int variant, px_rcase *c)
{
    px_resize_memory_case(refuse, variant, &c->prog, &c->lim, &c->x, &c->y, c->msg, sizeof c->msg);
}

/* ---- EMBED: its pairs are built in test_embed.c ----------------------------------------------- */
void px_embed_rule_case(int rule, int refuse, int variant, pxvm_image *prog, int *x, int *y, char *msg, size_t n);
#define PX__EMBED_RULE(k)                                                                                    \
    static void r_embed_##k(int refuse, int variant, px_rcase *c)                                            \
    {                                                                                                        \
        px_embed_rule_case(k, refuse, variant, &c->prog, &c->x, &c->y, c->msg, sizeof c->msg);              \
    }
PX__EMBED_RULE(1)
PX__EMBED_RULE(2)
PX__EMBED_RULE(3)
/* V-EMBED-4 says two things: variant 1 reads and writes one slot, variant 0 reads no atlas */
static void r_embed_4(int refuse, int variant, px_rcase *c)
{
    px_embed_rule_case(4, refuse, variant, &c->prog, &c->x, &c->y, c->msg, sizeof c->msg);
    c->code = variant ? PXE_EMBED_SAME_SLOT : PXE_EMBED_NOT_ATLAS;
}
PX__EMBED_RULE(5)
PX__EMBED_RULE(6)
PX__EMBED_RULE(7)
PX__EMBED_RULE(8)
PX__EMBED_RULE(9)
PX__EMBED_RULE(10)
PX__EMBED_RULE(11)
PX__EMBED_RULE(12)
void px_embed_memory_case(int refuse, int variant, pxvm_image *prog, pxvm_limits *lim, int *x, int *y, char *msg, size_t n);
static void r_embed_13(int refuse, int variant, px_rcase *c)
{
    px_embed_memory_case(refuse, variant, &c->prog, &c->lim, &c->x, &c->y, c->msg, sizeof c->msg);
}

static const px_rule px_rules[] = {
    {"M-FILE-1", PXE_PNG_SIGNATURE, r_png_signature, 2, NULL, NULL},
    {"M-FILE-2", PXE_PNG_CORRUPT, r_png_corrupt, 3, NULL, NULL},
    {"V-FILE-1", PXE_IMAGE_SIDE, r_image_side, 2, NULL, e_image_side},
    {"V-FILE-2", PXE_IMAGE_MEMORY, r_image_memory, 1, NULL, NULL},
    {"V-FILE-3", PXE_IMAGE_WORK, r_image_work, 4, NULL, NULL},
    {"M-FILE-3", PXE_IMAGE_SIGNATURE, r_image_signature, 2, NULL, NULL},
    {"M-FILE-4", PXE_JPEG_CORRUPT, r_jpeg_corrupt, 1, NULL, NULL},
    {"V-FILE-4", PXE_JPEG_SCANS, r_jpeg_scans, 1, NULL, NULL},
    {"M-HDR-1", PXE_HEADER_SHORT, r_header_short, 2, NULL, NULL},
    {"M-HDR-2", PXE_BAD_MAGIC, r_magic, 1, NULL, NULL},
    {"M-HDR-3", PXE_BAD_VERSION, r_version, 3, NULL, NULL},
    {"M-HDR-4", PXE_HEADER_RESERVED, r_header_flags, 1, NULL, NULL},
    {"M-HDR-5", PXE_HEADER_RESERVED, r_header_word4, 2, NULL, NULL},
    {"M-HDR-6", PXE_CODE_START, r_code_start, 1, NULL, NULL},
    {"V-HDR-1", PXE_NO_CODE, r_no_code, 1, NULL, NULL},
    {"V-LIMIT-1", PXE_TOO_MANY_INSNS, r_max_insns, 1, NULL, e_max_insns},
    {"V-LIMIT-2", PXE_SLOT_SIDE, r_prog_side, 1, NULL, e_prog_side},
    {"V-LIMIT-3", PXE_SLOT_MEMORY, r_memory, 1, NULL, e_memory},
    {"V-SLOT-1", PXE_SLOT_ROLE, r_slot_role, 2, NULL, NULL},
    {"V-SLOT-2", PXE_SLOT_NAME_CHARS, r_name_chars, 3, NULL, NULL},
    {"V-SLOT-3", PXE_SLOT_NAME_DIGIT, r_name_digit, 1, NULL, NULL},
    {"V-SLOT-4", PXE_SLOT_NAME_PROG, r_name_prog, 1, NULL, NULL},
    {"V-SLOT-5", PXE_SLOT_NAME_REPEAT, r_name_repeat, 2, NULL, NULL},
    {"V-SLOT-6", PXE_SLOT_FLAGS, r_slot_flags, 3, NULL, NULL},
    {"V-SLOT-7", PXE_SLOT_PERSIST_ROLE, r_slot_persist, 1, NULL, NULL},
    {"V-SLOT-8", PXE_SLOT_SIDE, r_slot_side, 2, NULL, e_slot_side},
    {"V-ANY-1", PXE_SLOT_ANY_ROLE, r_any_input, 1, NULL, NULL},
    {"V-ANY-2", PXE_SLOT_ANY_FORMAT, r_any_format, 1, NULL, NULL},
    {"V-ANY-3", PXE_SLOT_ANY_BOUNDS, r_any_bounds, 2, NULL, e_any_bounds},
    {"V-ANY-4", PXE_SLOT_ANY_RESERVED, r_any_reserved, 1, NULL, NULL},
    {"V-ANY-5", PXE_SLOT_ANY_REFERENCE, r_any_reference, 3, NULL, e_any_reference},
    {"V-ANY-6", PXE_ANY_READER, r_any_readers, 3, NULL, NULL},
    {"V-SLOT-9", PXE_SLOT_DATA_RECT, r_data_rect, 2, NULL, NULL},
    {"V-SLOT-10", PXE_SLOT_ORIGIN, r_origin, 2, NULL, NULL},
    {"V-SLOT-11", PXE_SLOT_PATCH_FIT, r_patch_fit, 3, NULL, NULL},
    {"V-SLOT-12", PXE_SLOT_PATCH_COUNT, r_patch_count, 1, NULL, NULL},
    {"M-CODE-1", PXE_CODE_SHORT, r_code_short, 1, NULL, NULL},
    {"V-CODE-1", PXE_OPCODE_RESERVED, r_opcode_reserved, 2, NULL, NULL},
    {"V-CODE-2", PXE_OPCODE_UNKNOWN, r_opcode_unknown, 2, NULL, NULL},
    {"V-CODE-3", PXE_NO_HALT, r_no_halt, 2, NULL, NULL},
    {"V-OPND-1", PXE_OPERAND_ZERO, r_opnd_zero, 2, NULL, NULL},
    {"V-OPND-2", PXE_OPERAND_ROW, r_opnd_row, 2, NULL, NULL},
    {"V-OPND-3", PXE_OPERAND_SLOT, r_opnd_slot, 2, NULL, NULL},
    {"V-OPND-4", PXE_OPERAND_MASK, r_opnd_mask, 1, NULL, NULL},
    {"V-OPND-5", PXE_OPERAND_MODE, r_opnd_mode, 2, NULL, NULL},
    {"V-OPND-6", PXE_OPERAND_DIM, r_opnd_dim, 2, NULL, NULL},
    {"V-OPND-7", PXE_OPERAND_TAPS, r_opnd_taps, 2, NULL, e_opnd_taps},
    {"V-OPND-8", PXE_OPERAND_FLAG, r_opnd_flag, 1, NULL, NULL},
    {"V-OPND-9", PXE_OPERAND_REG, r_opnd_reg, 2, NULL, e_opnd_reg},
    {"V-OPND-10", PXE_OPERAND_LEVEL, r_opnd_level, 1, NULL, e_opnd_level},
    {"V-WRITE-1", PXE_WRITE_READ_ONLY, r_write_readonly, 5, NULL, NULL},
    {"V-WRITE-2", PXE_WRITE_OUTSIDE, r_write_fits, 2, NULL, NULL},
    {"V-WRITE-3", PXE_WRITE_CODE, r_write_code, 2, NULL, NULL},
    {"V-FETCH-1", PXE_FETCH_SAME_SLOT, r_fetch_same, 2, NULL, NULL},
    {"V-FETCH-2", PXE_FETCH_NOT_PERSISTENT, r_fetch_persist, 2, NULL, NULL},
    {"V-FETCH-3", PXE_FETCH_TABLE_DATA, r_fetch_table_data, 1, NULL, NULL},
    {"V-GATHER-1", PXE_GATHER_OWN_TABLE, r_gather_own_table, 1, NULL, NULL},
    {"V-GATHER-2", PXE_GATHER_TABLE_OUTSIDE, r_gather_table_fits, 3, NULL, NULL},
    {"V-MASK-1", PXE_MASK_TILES, r_mask_tiles, 3, NULL, NULL},
    {"V-VIDEO-1", PXE_VIDEO_SAME_SLOT, r_video_same, 2, NULL, NULL},
    {"V-VIDEO-2", PXE_VIDEO_SIZES, r_video_size, 2, NULL, NULL},
    {"V-VIDEO-3", PXE_VIDEO_MASK_OWN, r_video_mask_own, 2, NULL, NULL},
    {"V-VIDEO-4", PXE_UPDATE_NOT_PERSISTENT, r_update_persist, 1, NULL, NULL},
    {"V-SAL-1", PXE_SALIENCY_SAME_SLOT, r_sal_same, 1, NULL, NULL},
    {"V-SAL-2", PXE_SALIENCY_ORDER, r_sal_order, 1, NULL, NULL},
    {"V-SAL-3", PXE_SALIENCY_LEVELS, r_sal_levels, 2, NULL, NULL},
    {"V-SAL-4", PXE_SALIENCY_MAP_LEVEL, r_sal_map_level, 1, NULL, NULL},
    {"V-SAL-5", PXE_SALIENCY_SHIFT, r_sal_shift, 1, NULL, NULL},
    {"V-SAL-6", PXE_SALIENCY_MAP_SIZE, r_sal_size, 2, NULL, NULL},
    {"V-ARGMAX-1", PXE_ARGMAX_LEVEL, r_argmax_level, 1, NULL, NULL},
    {"V-ARGMAX-2", PXE_ARGMAX_REGISTERS, r_argmax_ior, 2, NULL, NULL},
    {"V-ARGMAX-3", PXE_ARGMAX_RADIUS, r_argmax_radius, 1, NULL, NULL},
    {"U-BIND-1", PXE_UNBOUND_INPUT, r_bind_unbound, 1, NULL, NULL},
    {"U-BIND-2", PXE_INPUT_SIZE, r_bind_size, 2, NULL, NULL},
    {"U-BIND-3", PXE_BIND_ROLE, r_bind_role, 1, NULL, NULL},
    {"U-BIND-4", PXE_INPUT_BOUNDS, r_any_bind, 3, NULL, e_any_bind},
    {"U-BIND-5", PXE_RESOLVE_RANGE, r_any_range, 2, NULL, e_any_range},
    {"U-BIND-6", PXE_RESOLVE_INVALID, r_any_resolved, 1, NULL, e_any_resolved},
    {"T-DOT-1", PXE_TRAP_DOT_OVERFLOW, r_dot_overflow, 1, NULL, NULL},
    {"T-STEP-1", PXE_TRAP_STEPS, r_steps, 1, NULL, e_steps},
    /* RESIZE (test_resize_op.c) */
    {"V-RESIZE-1", PXE_RESIZE_FILTER_OPERAND, r_resize_1, 2, NULL, NULL},
    {"V-RESIZE-2", PXE_RESIZE_FIT_OPERAND, r_resize_2, 2, NULL, NULL},
    {"V-RESIZE-3", PXE_RESIZE_PAD_OPERAND, r_resize_3, 2, NULL, NULL},
    {"V-RESIZE-4", PXE_RESIZE_SAME_SLOT, r_resize_4, 1, NULL, NULL},
    {"V-RESIZE-5", PXE_RESIZE_MEMORY, r_resize_5, 2, NULL, NULL},
    /* EMBED (test_embed.c) */
    {"V-EMBED-1", PXE_EMBED_MODE, r_embed_1, 1, NULL, NULL},
    {"V-EMBED-2", PXE_EMBED_CHANNELS, r_embed_2, 2, NULL, NULL},
    {"V-EMBED-3", PXE_EMBED_OUT_ZERO, r_embed_3, 1, NULL, NULL},
    {"V-EMBED-4", PXE_EMBED_NOT_ATLAS, r_embed_4, 2, NULL, NULL},
    {"V-EMBED-5", PXE_EMBED_DATA_SLOTS, r_embed_5, 1, NULL, NULL},
    {"V-EMBED-6", PXE_EMBED_WEIGHTS_SIZE, r_embed_6, 2, NULL, NULL},
    {"V-EMBED-7", PXE_EMBED_PARAMS_SIZE, r_embed_7, 2, NULL, NULL},
    {"V-EMBED-8", PXE_EMBED_DST_SIZE, r_embed_8, 1, NULL, NULL},
    {"V-EMBED-9", PXE_EMBED_BIAS, r_embed_9, 2, NULL, NULL},
    {"V-EMBED-10", PXE_EMBED_MULTIPLIER, r_embed_10, 1, NULL, NULL},
    {"V-EMBED-11", PXE_EMBED_SHIFT, r_embed_11, 2, NULL, NULL},
    {"V-EMBED-12", PXE_EMBED_SHIFT_BOUND, r_embed_12, 1, NULL, NULL},
    {"V-EMBED-13", PXE_EMBED_MEMORY, r_embed_13, 2, NULL, NULL},
};
#define PX_NRULES (sizeof px_rules / sizeof px_rules[0])

static int px__edges_checked; /* sides whose edge was measured */

/* One side of one variant: 0 when it behaves as the rule says (and sits on its edge). */
static int px__check_side(const px_rule *r, int variant, int refuse)
{
    px_rcase c;
    memset(&c, 0, sizeof c);
    pxvm_limits_default(&c.lim);
    c.stage = PX_LOAD;
    r->make(refuse, variant, &c);
    pxvm_error err;
    int rc = px__attempt(&c, &err), bad = 0;
    px_redge_at e = {0, 0, 0, 0, ""};
    if (r->edge && !r->edge(&c, variant, &e)) { /* the pair sits on the edge it names */
        int64_t step = e.step > 0 ? e.step : 1, past = (e.value - e.bound) * e.dir; /* > 0: beyond the bound */
        int on_edge = refuse ? past >= 1 && past <= step : past <= 0 && past > -step;
        if (!on_edge) {
            px_test_fail(__FILE__, __LINE__,
                         "%s variant %d: the %s case is not on the rule's edge: %s = %lld, the bound %lld (%s %s%lld)",
                         r->id, variant, refuse ? "refused" : "accepted", e.what, (long long)e.value, (long long)e.bound,
                         refuse ? "wanted" : "wanted", step == 1 ? "" : "within a step of ",
                         (long long)(refuse ? e.bound + e.dir : e.bound));
            bad = 1;
        }
        px__edges_checked++;
    }
    char buf[1024];
    pxvm_error_format(&err, buf, sizeof buf);
    if (!refuse && rc < 0) {
        px_test_fail(__FILE__, __LINE__, "%s variant %d: the accepted case fails: %s", r->id, variant, buf);
        bad = 1;
    } else if (refuse && r->pending) {
        if (rc == 0) {
            printf("  %s variant %d: pending (%s)\n", r->id, variant, r->pending);
        } else {
            px_test_fail(__FILE__, __LINE__, "%s is refused now (%s): %s", r->id, buf,
                         err.code == r->code ? "drop its pending mark in test_rules.c" : "with another error than its rule's");
            bad = 1;
        }
    } else if (refuse) {
        pxvm_code want = c.code ? c.code : r->code;
        if (rc == 0 || err.code != want || err.cls != px__class_of(r->id) || err.x != c.x || err.y != c.y ||
            !strstr(err.msg, c.msg)) {
            px_test_fail(__FILE__, __LINE__, "%s variant %d: expected %s error %d at (%d,%d) with '%s'; got %s (code %d)",
                         r->id, variant, pxvm_class_name(px__class_of(r->id)), (int)want, c.x, c.y, c.msg,
                         rc == 0 ? "no error" : buf, (int)err.code);
            bad = 1;
        }
    }
    px__case_free(&c);
    return bad;
}

TEST(rules_every_rule_has_its_edge_pair)
{
    int pairs = 0;
    for (size_t k = 0; k < PX_NRULES; k++)
        for (int v = 0; v < px_rules[k].variants; v++) {
            px__check_side(&px_rules[k], v, 0);
            px__check_side(&px_rules[k], v, 1);
            pairs++;
        }
    printf("  %zu rules, %d pairs, %d sides measured on their edge\n", PX_NRULES, pairs, px__edges_checked);
}

/* ---- the SPEC's IDs against this table ------------------------------------------------------ */

static const struct {
    const char *name;
    pxvm_code code;
} px__codes[] = {
#define PXE(code, cls, fmt) {#code, PXE_##code},
#include "../../vm/errors.def"
};

static const char *px__rule_id(size_t i) { return px_rules[i].id; }
static void px__rule_row(size_t i, const char *rest) /* class by the ID's letter, error by the pair's code */
{
    const char *want = "?";
    for (size_t k = 0; k < sizeof px__codes / sizeof px__codes[0]; k++)
        if (px__codes[k].code == px_rules[i].code)
            want = px__codes[k].name;
    px_spec_row_is(px_rules[i].id, rest, pxvm_class_name(px__class_of(px_rules[i].id)), want);
}

TEST(rules_spec_ids_have_their_pairs)
{
    px_spec_ids t = {NULL, "test_rules.c", PX_NRULES, px__rule_id, px__rule_row};
    int ids = px_spec_ids_check(&t);
    CHECK_EQ(ids, (int)PX_NRULES);
    printf("  %d rule IDs in SPEC.md\n", ids);
}

/* ---- what the rules accept ------------------------------------------------------------------ */

/* SPEC 3: a HALT before the last instruction stops the run; what follows it is validated at load
 * but never runs (here a DOT_RGB that would trap) and counts no step. */
TEST(rules_halt_before_the_last_instruction_stops_the_run)
{
    for (int bad = 0; bad < 2; bad++) {
        pxvm_builder b;
        pxvm_build_init(&b, 8); /* HALT at 5, DOT_RGB at 6, HALT at 7; rows a, b, out */
        px__halt(&b);
        int32_t f[PXI_MAX_FIELDS] = {0};
        uint32_t dot = pxvm_build_insn(&b, PX_OP_DOT_RGB, f);
        px__halt(&b);
        uint8_t full[8 * 4], zero[8 * 4] = {0};
        memset(full, 255, sizeof full);
        int a = pxvm_build_row(&b, full, 8), o = pxvm_build_row(&b, zero, 8);
        pxvm_build_patch(&b, dot, PX_FI(DOT_RGB, row_a), a);
        pxvm_build_patch(&b, dot, PX_FI(DOT_RGB, row_b), a);
        pxvm_build_patch(&b, dot, PX_FI(DOT_RGB, row_out), bad ? 9 : o); /* 9: no such row */
        px_rcase c;
        memset(&c, 0, sizeof c);
        pxvm_limits_default(&c.lim);
        px__finish(&b, &c);
        c.stage = PX_RUN;
        c.max_steps = 1; /* the first HALT is the one step */
        pxvm_error err;
        int rc = px__attempt(&c, &err);
        if (bad) { /* still checked at load, though it never runs */
            CHECK(rc < 0);
            CHECK_EQ(err.code, PXE_OPERAND_ROW);
            CHECK_STR(err.msg, "instruction 1 (DOT_RGB): operand row_out = 9");
        } else {
            CHECK_EQ(rc, 0);
        }
        /* and the DOT_RGB never ran: its row is still zero after a run with the default budget */
        if (!bad) {
            pxvm_program prog;
            pxvm_executor *ex;
            CHECK(px_run_image(&c.prog, NULL, 0, &prog, &ex, &err) == 0);
            pxvm_image p = px_read(&prog, ex, 0, 0);
            CHECK_EQ(px_px(&p, 0, o), 0u);
            pxvm_image_free(&p);
            px_close(&prog, ex);
        }
        px__case_free(&c);
    }
}

/* SPEC 2, Writes: PYRAMID may rebuild the levels of an input, a data slot and the program image;
 * their level 0 is only read. */
TEST(rules_pyramid_on_read_only_slots_builds_their_levels)
{
    uint64_t st = 3;
    pxvm_builder b;
    pxvm_build_init(&b, 16);
    pxvm_build_slot(&b, PXI_ROLE_INPUT, "src", 5, 4);
    pxvm_image d = px_random_image(4, 2, &st);
    int tab = pxvm_build_data_slot(&b, "tab", &d);
    px__pyramid(&b, 1, 0);
    px__pyramid(&b, tab, 0);
    px__pyramid(&b, 0, 0);
    px__halt(&b);
    pxvm_image in = px_random_image(5, 4, &st), img;
    const pxvm_image *ins[] = {&in};
    pxvm_program prog;
    pxvm_executor *ex;
    pxvm_error err;
    CHECK(pxvm_build_finish(&b, &img, &err) == 0);
    pxvm_build_free(&b);
    CHECK(px_run_image(&img, ins, 1, &prog, &ex, &err) == 0);
    if (!ex)
        return;
    const pxvm_image *level0[] = {&img, &in, &d};
    for (int k = 0; k < 3; k++) {
        pxvm_image l0 = px_read(&prog, ex, k, 0), l1 = px_read(&prog, ex, k, 1);
        CHECK(!memcmp(l0.px, level0[k]->px, (size_t)l0.w * (size_t)l0.h * 4u)); /* level 0 untouched */
        CHECK(l1.w == (l0.w >> 1 ? l0.w >> 1 : 1) && l1.h == (l0.h >> 1 ? l0.h >> 1 : 1));
        for (int y = 0; y < l1.h; y++)
            for (int x = 0; x < l1.w; x++) {
                int x1 = 2 * x + 1 < l0.w ? 2 * x + 1 : l0.w - 1, y1 = 2 * y + 1 < l0.h ? 2 * y + 1 : l0.h - 1;
                CHECK_EQ(px_px(&l1, x, y),
                         px_box4(px_px(&l0, 2 * x, 2 * y), px_px(&l0, x1, 2 * y), px_px(&l0, 2 * x, y1), px_px(&l0, x1, y1)));
            }
        pxvm_image_free(&l0), pxvm_image_free(&l1);
    }
    px_close(&prog, ex);
    pxvm_image_free(&img), pxvm_image_free(&in), pxvm_image_free(&d);
}

/* SPEC 2, Patch atlases: a slot of any role with patch geometry is an atlas: a scratch atlas's
 * tokens get their geometry and read as patches; a data atlas's tokens keep (0, 0, 0, 0, -1). */
TEST(rules_atlases_of_any_role)
{
    uint64_t st = 5;
    pxvm_builder b;
    pxvm_build_init(&b, 16);
    pxvm_build_slot(&b, PXI_ROLE_INPUT, "src", 8, 8);
    int sc = pxvm_build_slot(&b, PXI_ROLE_SCRATCH, "sc", 9, 4); /* 2 patches of 4x4 and a spare column */
    pxvm_build_patches(&b, sc, 4, 4, 2);
    pxvm_image d = px_random_image(8, 4, &st);
    int tab = pxvm_build_data_slot(&b, "tab", &d);
    pxvm_build_patches(&b, tab, 4, 4, 2);
    uint32_t i = px__sample(&b, PX_OP_SAMPLE, 1, sc, 4, 0, 4, 4); /* token 1 */
    pxvm_build_patch(&b, i, PX_FI(SAMPLE, cu), 3 * 65536 + 32768);
    pxvm_build_patch(&b, i, PX_FI(SAMPLE, cv), 5 * 65536);
    pxvm_build_patch(&b, i, PX_FI(SAMPLE, lod), 9 * 256); /* clamped to the last level, 3 */
    px__halt(&b);
    pxvm_image in = px_random_image(8, 8, &st), img;
    const pxvm_image *ins[] = {&in};
    pxvm_program prog;
    pxvm_executor *ex;
    pxvm_error err;
    CHECK(pxvm_build_finish(&b, &img, &err) == 0);
    pxvm_build_free(&b);
    CHECK(px_run_image(&img, ins, 1, &prog, &ex, &err) == 0);
    if (!ex)
        return;
    int32_t g[2 * PX_GEOM_INTS], dg[2 * PX_GEOM_INTS];
    CHECK(pxvm_cpu_executor.read_state(ex, PXVM_STATE_GEOMETRY, sc, 0, 1, g, -1, &err) == 0);
    CHECK(pxvm_cpu_executor.read_state(ex, PXVM_STATE_GEOMETRY, tab, 0, 1, dg, -1, &err) == 0);
    const int32_t unwritten[PX_GEOM_INTS] = {0, 0, 0, 0, -1};
    const int32_t token1[PX_GEOM_INTS] = {3 * 65536 + 32768, 5 * 65536, 65536, 65536, 3 * 256};
    for (int k = 0; k < PX_GEOM_INTS; k++) {
        CHECK_EQ(g[k], unwritten[k]);
        CHECK_EQ(g[PX_GEOM_INTS + k], token1[k]);
        CHECK_EQ(dg[k], unwritten[k]);
        CHECK_EQ(dg[PX_GEOM_INTS + k], unwritten[k]);
    }
    /* the scratch atlas read as patches: patch 1 is its tile (1, 0) */
    uint8_t patches[2 * 4 * 4 * 4];
    pxvm_view v = {patches, -1, 1, 4, 8, 4, (int64_t)sizeof patches, 16, 4, 1};
    CHECK(pxvm_cpu_executor.read(ex, sc, 0, 0, &v, 1, &err) == 0);
    pxvm_image s = px_read(&prog, ex, sc, 0);
    for (int y = 0; y < 4; y++)
        CHECK(!memcmp(patches + 64 + 16 * y, s.px + ((size_t)y * 9 + 4) * 4u, 16));
    pxvm_image_free(&s);
    px_close(&prog, ex);
    pxvm_image_free(&img), pxvm_image_free(&in), pxvm_image_free(&d);
}

/* ---- PNG decoding (SPEC 5) ------------------------------------------------------------------ */

typedef struct {
    uint8_t *d;
    size_t n, cap;
} px__buf;

static void px__png_write(png_structp p, png_bytep d, size_t n)
{
    px__buf *b = png_get_io_ptr(p);
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2;
        b->d = realloc(b->d, b->cap);
    }
    memcpy(b->d + b->n, d, n);
    b->n += n;
}

static void px__png_flush(png_structp p) { (void)p; }

/* A one-row PNG of `n` samples (grey, or palette indices: unpacked values) of `depth` bits,
 * with a tRNS key (grey: key >= 0) or tRNS entries (palette: nalpha of them); decoded by pxvm. */
static pxvm_image px__png_row(int color, int depth, const int *vals, int n, int key, const uint8_t *alpha, int nalpha,
                              int npal)
{
    px__buf buf = {0};
    png_structp p = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png_create_info_struct(p);
    pxvm_image img = {0, 0, NULL};
    if (setjmp(png_jmpbuf(p))) {
        png_destroy_write_struct(&p, &info);
        free(buf.d);
        return img;
    }
    png_set_write_fn(p, &buf, px__png_write, px__png_flush);
    png_set_IHDR(p, info, (png_uint_32)n, 1, depth, color, PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
                 PNG_FILTER_TYPE_DEFAULT);
    if (color == PNG_COLOR_TYPE_PALETTE) {
        png_color pal[16];
        for (int k = 0; k < npal; k++)
            pal[k].red = (png_byte)(10 + k), pal[k].green = (png_byte)(100 + k), pal[k].blue = (png_byte)(200 + k);
        png_set_PLTE(p, info, pal, npal);
        if (nalpha)
            png_set_tRNS(p, info, alpha, nalpha, NULL);
    } else if (key >= 0) {
        png_color_16 c;
        memset(&c, 0, sizeof c);
        c.gray = (png_uint_16)key;
        png_set_tRNS(p, info, NULL, 0, &c);
    }
    png_write_info(p, info);
    uint8_t row[64] = {0};
    for (int x = 0; x < n; x++) {
        if (depth == 16) {
            row[2 * x] = (uint8_t)(vals[x] >> 8), row[2 * x + 1] = (uint8_t)vals[x];
        } else {
            int per = 8 / depth;
            row[x / per] = (uint8_t)(row[x / per] | vals[x] << (8 - depth * (x % per + 1)));
        }
    }
    png_write_row(p, row);
    png_write_end(p, info);
    png_destroy_write_struct(&p, &info);
    pxvm_limits lim;
    pxvm_limits_default(&lim);
    pxvm_error err;
    if (pxvm_png_decode(buf.d, buf.n, "row.png", &lim, &img, &err) < 0)
        px_test_fail(__FILE__, __LINE__, "%s", err.msg);
    free(buf.d);
    return img;
}

/* Pixel x of a decoded row is (v, v, v, a). */
#define CHECK_GREY(img, x, v, a) CHECK_EQ(px_px(&(img), x, 0), (uint32_t)(v) * 0x010101u | (uint32_t)(a) << 24)

TEST(rules_png_samples_scale_and_trns_keys)
{
    const int v1[] = {0, 1}, v2[] = {0, 1, 2, 3}, v4[] = {0, 1, 7, 15}, v16[] = {0x1100, 0x11FF, 0x1234, 0xFFFF};
    pxvm_image i;
    /* 1, 2, 4 bits: bit replication (x255, x85, x17); the tRNS key matches the raw sample */
    i = px__png_row(PNG_COLOR_TYPE_GRAY, 1, v1, 2, 1, NULL, 0, 0);
    if (i.px) {
        CHECK_GREY(i, 0, 0, 255);
        CHECK_GREY(i, 1, 255, 0);
    }
    pxvm_image_free(&i);
    i = px__png_row(PNG_COLOR_TYPE_GRAY, 2, v2, 4, 2, NULL, 0, 0);
    if (i.px) {
        CHECK_GREY(i, 0, 0, 255);
        CHECK_GREY(i, 1, 85, 255);
        CHECK_GREY(i, 2, 170, 0);
        CHECK_GREY(i, 3, 255, 255);
    }
    pxvm_image_free(&i);
    i = px__png_row(PNG_COLOR_TYPE_GRAY, 4, v4, 4, 7, NULL, 0, 0);
    if (i.px) {
        CHECK_GREY(i, 0, 0, 255);
        CHECK_GREY(i, 1, 17, 255);
        CHECK_GREY(i, 2, 119, 0);
        CHECK_GREY(i, 3, 255, 255);
    }
    pxvm_image_free(&i);
    i = px__png_row(PNG_COLOR_TYPE_GRAY, 4, v4, 4, -1, NULL, 0, 0); /* no tRNS: A = 255 */
    if (i.px) {
        CHECK_GREY(i, 2, 119, 255);
    }
    pxvm_image_free(&i);
    /* 16 bits: the high byte, but the key is compared with all 16 bits */
    i = px__png_row(PNG_COLOR_TYPE_GRAY, 16, v16, 4, 0x11FF, NULL, 0, 0);
    if (i.px) {
        CHECK_GREY(i, 0, 0x11, 255);
        CHECK_GREY(i, 1, 0x11, 0);
        CHECK_GREY(i, 2, 0x12, 255);
        CHECK_GREY(i, 3, 255, 255);
    }
    pxvm_image_free(&i);
    /* palette: the entry's 8-bit colour; tRNS entries, 255 past them; an index past the palette
     * reads (0, 0, 0) */
    const uint8_t alpha[] = {0, 128};
    i = px__png_row(PNG_COLOR_TYPE_PALETTE, 2, v2, 4, -1, alpha, 2, 4);
    if (i.px) {
        CHECK_EQ(px_px(&i, 0, 0), 10u | 100u << 8 | 200u << 16 | 0u << 24);
        CHECK_EQ(px_px(&i, 1, 0), 11u | 101u << 8 | 201u << 16 | 128u << 24);
        CHECK_EQ(px_px(&i, 3, 0), 13u | 103u << 8 | 203u << 16 | 255u << 24);
    }
    pxvm_image_free(&i);
    const int past[] = {0, 3, 5, 2};
    i = px__png_row(PNG_COLOR_TYPE_PALETTE, 4, past, 4, -1, alpha, 2, 4);
    if (i.px) {
        CHECK_EQ(px_px(&i, 2, 0), 255u << 24);
        CHECK_EQ(px_px(&i, 1, 0), 13u | 103u << 8 | 203u << 16 | 255u << 24);
    }
    pxvm_image_free(&i);
}
