/* test_errors.c - every malformed, invalid, unlinkable and trap case: its class, its message and
 * the pixel it names; and random or mutated input that must fail cleanly. */
#include <stdlib.h>

#include "test.h"

static pxvm_limits px__lim(void)
{
    pxvm_limits l;
    pxvm_limits_default(&l);
    return l;
}

/* A valid program's slots: input 'src' 8x8, output 'out' 4x4; px__pyr then adds PYRAMID src,
 * and `sample` is a valid SAMPLE src -> out for the test to change. */
static void px__pyr(pxvm_builder *b)
{
    int32_t f[PXI_MAX_FIELDS] = {0};
    f[PX_FI(PYRAMID, slot)] = 1;
    pxvm_build_insn(b, PX_OP_PYRAMID, f);
}

static void px__base(pxvm_builder *b, int32_t *sample)
{
    pxvm_build_init(b, 16);
    pxvm_build_slot(b, PXI_ROLE_INPUT, "src", 8, 8);
    pxvm_build_slot(b, PXI_ROLE_OUTPUT, "out", 4, 4);
    memset(sample, 0, sizeof(int32_t) * PXI_MAX_FIELDS);
    sample[PX_FI(SAMPLE, src)] = 1, sample[PX_FI(SAMPLE, dst)] = 2;
    sample[PX_FI(SAMPLE, w)] = 4, sample[PX_FI(SAMPLE, h)] = 4;
    sample[PX_FI(SAMPLE, du)] = sample[PX_FI(SAMPLE, dv)] = 65536;
}

/* The error of loading `img` (a copy is loaded). */
static pxvm_error px__load_img(const pxvm_image *img, const pxvm_limits *lim)
{
    pxvm_error err;
    memset(&err, 0, sizeof err);
    pxvm_program prog;
    if (pxvm_program_from_copy(img, lim, &prog, &err) == 0) {
        pxvm_program_free(&prog);
        memset(&err, 0, sizeof err);
    }
    return err;
}

static void px__expect(pxvm_error e, pxvm_class cls, pxvm_code code, int x, int y, const char *msg)
{
    char buf[1024];
    pxvm_error_format(&e, buf, sizeof buf);
    if (e.cls != cls || e.code != code)
        px_test_fail(__FILE__, __LINE__, "expected %s error %d, got '%s' (code %d)", pxvm_class_name(cls), code, buf,
                     e.code);
    if (e.x != x || e.y != y)
        px_test_fail(__FILE__, __LINE__, "expected pixel (%d,%d), got (%d,%d): %s", x, y, e.x, e.y, buf);
    if (!strstr(e.msg, msg))
        px_test_fail(__FILE__, __LINE__, "message '%s' lacks '%s'", e.msg, msg);
}

/* Pixel (x, y) of the program image being built with width 16. */
#define AT(i) ((i) % 16), ((i) / 16)
/* stream index of the first instruction in px__base: header 5 + 2 slots * 8 */
#define CODE0 21

TEST(errors_malformed_png)
{
    pxvm_limits lim = px__lim();
    pxvm_image img;
    pxvm_error err;
    const uint8_t junk[] = "this is not a png at all";
    CHECK(pxvm_png_decode(junk, sizeof junk, "junk", &lim, &img, &err) < 0);
    px__expect(err, PXVM_MALFORMED, PXE_PNG_SIGNATURE, -1, -1, "'junk' is not a PNG file");
    /* a real program, truncated at every length: always a clean 'malformed' */
    uint8_t *data;
    size_t len;
    CHECK(pxvm_read_file("programs/foveate273.pxi", 1 << 20, &data, &len, &err) == 0);
    if (!data)
        return;
    for (size_t cut = 0; cut < len; cut += 1 + cut / 16) {
        CHECK(pxvm_png_decode(data, cut, "cut", &lim, &img, &err) < 0);
        CHECK_EQ(err.cls, PXVM_MALFORMED);
    }
    CHECK(pxvm_png_decode(data, len / 2, "half.pxi", &lim, &img, &err) < 0);
    px__expect(err, PXVM_MALFORMED, PXE_PNG_CORRUPT, -1, -1, "'half.pxi': corrupt or truncated PNG");
    free(data);
}

TEST(errors_header)
{
    pxvm_limits lim = px__lim();
    int32_t s[PXI_MAX_FIELDS];
    pxvm_builder b;
    px__base(&b, s);
    px__pyr(&b);
    pxvm_build_insn(&b, PX_OP_SAMPLE, s);
    pxvm_build_insn(&b, PX_OP_HALT, NULL);
    pxvm_image good;
    CHECK(pxvm_build_finish(&b, &good, NULL) == 0);
    pxvm_build_free(&b);
    pxvm_error ok = px__load_img(&good, &lim);
    CHECK_EQ(ok.code, PXE_NONE);

    pxvm_image img;
    pxvm_image_alloc(&img, good.w, good.h, NULL);
#define RESET() memcpy(img.px, good.px, (size_t)good.w * (size_t)good.h * 4u)
    RESET();
    img.px[1] = 'Y';
    px__expect(px__load_img(&img, &lim), PXVM_MALFORMED, PXE_BAD_MAGIC, 0, 0, "bad magic 50 59 56 4d");
    RESET();
    img.px[5] = 2; /* format 1.2: from the future (1.1 adds any-size inputs) */
    px__expect(px__load_img(&img, &lim), PXVM_MALFORMED, PXE_BAD_VERSION, 1, 0, "format version 1.2 is not supported");
    RESET();
    img.px[4] = 2;
    px__expect(px__load_img(&img, &lim), PXVM_MALFORMED, PXE_BAD_VERSION, 1, 0, "version 2.0");
    RESET();
    img.px[7] = 1;
    px__expect(px__load_img(&img, &lim), PXVM_MALFORMED, PXE_HEADER_RESERVED, 1, 0, "flags is 1");
    RESET();
    img.px[4 * 4] = 9;
    px__expect(px__load_img(&img, &lim), PXVM_MALFORMED, PXE_HEADER_RESERVED, 4, 0, "word 4 is 9");
    RESET();
    img.px[4 * 2] = 20; /* code start inside the slot descriptors */
    px__expect(px__load_img(&img, &lim), PXVM_MALFORMED, PXE_CODE_START, 2, 0, "code start 20 lies inside the header");
    RESET();
    img.px[4 * 3] = 0;
    px__expect(px__load_img(&img, &lim), PXVM_INVALID, PXE_NO_CODE, 3, 0, "no instructions");
    RESET();
    img.px[4 * 3] = 200; /* more instructions than pixels */
    pxvm_error e = px__load_img(&img, &lim);
    CHECK(e.cls == PXVM_MALFORMED || e.cls == PXVM_INVALID);
    RESET();
    img.px[6] = 200; /* 200 slot descriptors do not fit the image */
    px__expect(px__load_img(&img, &lim), PXVM_MALFORMED, PXE_HEADER_SHORT, 1, 0, "the header needs 1605 pixels");
    pxvm_limits few = lim;
    few.max_insns = 2;
    RESET();
    px__expect(px__load_img(&img, &few), PXVM_INVALID, PXE_TOO_MANY_INSNS, 3, 0, "3 instructions exceed the limit of 2");
    pxvm_image tiny;
    pxvm_image_alloc(&tiny, 2, 2, NULL);
    px__expect(px__load_img(&tiny, &lim), PXVM_MALFORMED, PXE_HEADER_SHORT, -1, -1, "needs 5 pixels but the image has 4");
    pxvm_image_free(&tiny);
    pxvm_image_free(&img);
    pxvm_image_free(&good);
}

TEST(errors_slots)
{
    pxvm_limits lim = px__lim();
    int32_t s[PXI_MAX_FIELDS];
    pxvm_builder b;
    pxvm_error e;

    px__base(&b, s);
    px__pyr(&b);
    b.slots[2].w = 16385; /* oversized */
    pxvm_build_insn(&b, PX_OP_HALT, NULL);
    px__expect(px_load_error(&b), PXVM_INVALID, PXE_SLOT_SIDE, AT(5 + 8 + 1), "slot 2 ('out') is 16385x4; sides must be 1..16384");

    px__base(&b, s);
    px__pyr(&b);
    b.slots[1].role = 7;
    pxvm_build_insn(&b, PX_OP_HALT, NULL);
    px__expect(px_load_error(&b), PXVM_INVALID, PXE_SLOT_ROLE, AT(5), "slot 1 has unknown role 7");

    px__base(&b, s);
    px__pyr(&b);
    strcpy(b.slots[2].name, "Out");
    pxvm_build_insn(&b, PX_OP_HALT, NULL);
    px__expect(px_load_error(&b), PXVM_INVALID, PXE_SLOT_NAME_CHARS, AT(5 + 8 + 6), "may only use a-z, 0-9 and _");

    px__base(&b, s);
    px__pyr(&b);
    strcpy(b.slots[2].name, "src");
    pxvm_build_insn(&b, PX_OP_HALT, NULL);
    px__expect(px_load_error(&b), PXVM_INVALID, PXE_SLOT_NAME_REPEAT, AT(5 + 8 + 6), "repeats the name");

    px__base(&b, s);
    px__pyr(&b);
    strcpy(b.slots[2].name, "2x");
    pxvm_build_insn(&b, PX_OP_HALT, NULL);
    px__expect(px_load_error(&b), PXVM_INVALID, PXE_SLOT_NAME_DIGIT, AT(5 + 8 + 6), "must not start with a digit");

    px__base(&b, s);
    px__pyr(&b);
    pxvm_build_patches(&b, 2, 3, 3, 2); /* only one 3x3 patch fits in 4x4 */
    pxvm_build_insn(&b, PX_OP_HALT, NULL);
    px__expect(px_load_error(&b), PXVM_INVALID, PXE_SLOT_PATCH_COUNT, AT(5 + 8 + 5), "patch count exceeds");

    /* memory: 2 slots of 16384^2 with mip chains exceed 1 GiB */
    px__base(&b, s);
    px__pyr(&b);
    b.slots[1].w = b.slots[1].h = 16384;
    b.slots[2].w = b.slots[2].h = 16384;
    pxvm_build_insn(&b, PX_OP_HALT, NULL);
    e = px_load_error(&b);
    px__expect(e, PXVM_INVALID, PXE_SLOT_MEMORY, -1, -1, "the limit is 1073741824");

    /* a data slot whose rectangle leaves the program image */
    px__base(&b, s);
    pxvm_image d;
    pxvm_image_alloc(&d, 4, 2, NULL);
    int k = pxvm_build_data_slot(&b, "tab", &d);
    pxvm_image_free(&d);
    px__pyr(&b);
    pxvm_build_insn(&b, PX_OP_HALT, NULL);
    pxvm_image img;
    CHECK(pxvm_build_finish(&b, &img, NULL) == 0);
    pxvm_build_free(&b);
    pxi_write_le(img.px, 5 + 8 * (k - 1) + 3, 0, 2, 14); /* x = 14: 14 + 4 > 16 */
    px__expect(px__load_img(&img, &lim), PXVM_INVALID, PXE_SLOT_DATA_RECT, AT(5 + 8 * (k - 1) + 3),
               "data rectangle does not lie inside the program image");
    pxvm_image_free(&img);
}

TEST(errors_opcodes_and_operands)
{
    int32_t s[PXI_MAX_FIELDS];
    pxvm_builder b;
    pxvm_image img;
    pxvm_limits lim = px__lim();

    /* unknown and reserved opcodes: patch the opcode pixel of a HALT */
    px__base(&b, s);
    px__pyr(&b);
    pxvm_build_insn(&b, PX_OP_HALT, NULL);
    pxvm_build_insn(&b, PX_OP_HALT, NULL);
    CHECK(pxvm_build_finish(&b, &img, NULL) == 0);
    pxvm_build_free(&b);
    img.px[4 * (CODE0 + 1)] = 0x80;
    px__expect(px__load_img(&img, &lim), PXVM_INVALID, PXE_OPCODE_UNKNOWN, AT(CODE0 + 1), "instruction 1: unknown opcode 0x80");
    img.px[4 * (CODE0 + 1)] = 0x21;
    px__expect(px__load_img(&img, &lim), PXVM_INVALID, PXE_OPCODE_RESERVED, AT(CODE0 + 1), "reserved for anisotropic footprints: further");
    img.px[4 * (CODE0 + 1)] = 0x32;
    px__expect(px__load_img(&img, &lim), PXVM_INVALID, PXE_OPCODE_RESERVED, AT(CODE0 + 1), "video");
    img.px[4 * (CODE0 + 1)] = PX_OP_HALT;
    img.px[4 * (CODE0 + 1) + 2] = 1; /* HALT's reserved bytes */
    px__expect(px__load_img(&img, &lim), PXVM_INVALID, PXE_OPERAND_ZERO, AT(CODE0 + 1), "(HALT): operand reserved = 256 (reserved, must be 0)");
    pxvm_image_free(&img);

    /* no HALT at the end */
    px__base(&b, s);
    px__pyr(&b);
    pxvm_build_insn(&b, PX_OP_SAMPLE, s);
    px__expect(px_load_error(&b), PXVM_INVALID, PXE_NO_HALT, AT(CODE0 + 1), "the last instruction (1, SAMPLE) is not HALT");

    /* the last instruction runs past the end of the image: a 16x2 image (32 pixels) whose code
     * starts at 25 holds PYRAMID, HALT and then a SAMPLE at 27 that would need pixels 27..34 */
    pxvm_image wide;
    pxvm_image_alloc(&wide, 16, 2, NULL);
    memcpy(wide.px, "PXVM\x01\x00\x00\x00", 8);
    wide.px[4 * 2] = 25;
    wide.px[4 * 3] = 3;
    wide.px[4 * 25] = PX_OP_PYRAMID;
    wide.px[4 * 26] = PX_OP_HALT;
    wide.px[4 * 27] = PX_OP_SAMPLE;
    px__expect(px__load_img(&wide, &lim), PXVM_MALFORMED, PXE_CODE_SHORT, AT(27), "instruction 2 (SAMPLE) needs 8 pixels");
    pxvm_image_free(&wide);

    /* operand kinds */
    px__base(&b, s);
    px__pyr(&b);
    s[PX_FI(SAMPLE, dst)] = 3;
    pxvm_build_insn(&b, PX_OP_SAMPLE, s);
    pxvm_build_insn(&b, PX_OP_HALT, NULL);
    px__expect(px_load_error(&b), PXVM_INVALID, PXE_OPERAND_SLOT, AT(CODE0 + 1), "instruction 1 (SAMPLE): operand dst = 3 (no such slot)");

    px__base(&b, s);
    px__pyr(&b);
    s[PX_FI(SAMPLE, mode)] = 4; /* a register without the relative bit */
    pxvm_build_insn(&b, PX_OP_SAMPLE, s);
    pxvm_build_insn(&b, PX_OP_HALT, NULL);
    px__expect(px_load_error(&b), PXVM_INVALID, PXE_OPERAND_MODE, AT(CODE0 + 1), "operand mode = 4");

    px__base(&b, s);
    px__pyr(&b);
    s[PX_FI(SAMPLE, h)] = 0;
    pxvm_build_insn(&b, PX_OP_SAMPLE, s);
    pxvm_build_insn(&b, PX_OP_HALT, NULL);
    px__expect(px_load_error(&b), PXVM_INVALID, PXE_OPERAND_DIM, AT(CODE0 + 1 + 2), "operand h = 0 (a size must be at least 1)");

    px__base(&b, s);
    px__pyr(&b);
    s[PX_FI(SAMPLE, reserved)] = 5;
    pxvm_build_insn(&b, PX_OP_SAMPLE, s);
    pxvm_build_insn(&b, PX_OP_HALT, NULL);
    px__expect(px_load_error(&b), PXVM_INVALID, PXE_OPERAND_ZERO, AT(CODE0 + 1 + 7), "operand reserved = 5");

    px__base(&b, s);
    px__pyr(&b);
    int32_t d[PXI_MAX_FIELDS] = {0};
    d[PX_FI(DOT_RGB, row_a)] = 200; /* the image has 2 rows */
    pxvm_build_insn(&b, PX_OP_DOT_RGB, d);
    pxvm_build_insn(&b, PX_OP_HALT, NULL);
    px__expect(px_load_error(&b), PXVM_INVALID, PXE_OPERAND_ROW, AT(CODE0 + 1), "operand row_a = 200 (no such row");
}

TEST(errors_regions)
{
    int32_t s[PXI_MAX_FIELDS];
    pxvm_builder b;

    /* an operand that leaves its slot: a 4x4 patch at (1, 0) of a 4x4 slot */
    px__base(&b, s);
    px__pyr(&b);
    s[PX_FI(SAMPLE, dst_x)] = 1;
    pxvm_build_insn(&b, PX_OP_SAMPLE, s);
    pxvm_build_insn(&b, PX_OP_HALT, NULL);
    px__expect(px_load_error(&b), PXVM_INVALID, PXE_WRITE_OUTSIDE, AT(CODE0 + 2),
               "instruction 1 (SAMPLE): destination 1,0 4x4 does not fit slot out (4x4)");

    px__base(&b, s);
    px__pyr(&b);
    s[PX_FI(SAMPLE, dst)] = 1;
    pxvm_build_insn(&b, PX_OP_SAMPLE, s);
    pxvm_build_insn(&b, PX_OP_HALT, NULL);
    px__expect(px_load_error(&b), PXVM_INVALID, PXE_FETCH_SAME_SLOT, AT(CODE0 + 1), "reads and writes the same slot src");

    /* writing over the code in the program image */
    px__base(&b, s);
    px__pyr(&b);
    s[PX_FI(SAMPLE, dst)] = 0;
    s[PX_FI(SAMPLE, w)] = s[PX_FI(SAMPLE, h)] = 1;
    pxvm_build_insn(&b, PX_OP_SAMPLE, s);
    pxvm_build_insn(&b, PX_OP_HALT, NULL);
    px__expect(px_load_error(&b), PXVM_INVALID, PXE_WRITE_CODE, AT(CODE0 + 2), "overlaps its header and code");

    px__base(&b, s);
    px__pyr(&b);
    int32_t d[PXI_MAX_FIELDS] = {0}; /* DOT_RGB into row 0 = the header */
    pxvm_build_insn(&b, PX_OP_DOT_RGB, d);
    pxvm_build_insn(&b, PX_OP_HALT, NULL);
    px__expect(px_load_error(&b), PXVM_INVALID, PXE_WRITE_CODE, AT(CODE0 + 1), "destination 0,0 1x1 of the program image overlaps its header and code (stream 0..23)");

    /* a table too short for the output: 4x4 outputs need 12x4 table pixels */
    px__base(&b, s);
    pxvm_image t;
    pxvm_image_alloc(&t, 11, 4, NULL);
    int tab = pxvm_build_data_slot(&b, "tab", &t);
    pxvm_image_free(&t);
    px__pyr(&b);
    int32_t g[PXI_MAX_FIELDS] = {0};
    g[PX_FI(GATHER, src)] = 1, g[PX_FI(GATHER, dst)] = 2, g[PX_FI(GATHER, w)] = 4, g[PX_FI(GATHER, h)] = 4;
    g[PX_FI(GATHER, table)] = tab;
    pxvm_build_insn(&b, PX_OP_GATHER, g);
    pxvm_build_insn(&b, PX_OP_HALT, NULL);
    px__expect(px_load_error(&b), PXVM_INVALID, PXE_GATHER_TABLE_OUTSIDE, AT(5 + 8 * 3 + 1 + 4),
               "table 0,0 needs 12x4 pixels (3 per entry) but slot tab is 11x4");

    px__base(&b, s);
    px__pyr(&b);
    g[PX_FI(GATHER, table)] = 2;
    pxvm_build_insn(&b, PX_OP_GATHER, g);
    pxvm_build_insn(&b, PX_OP_HALT, NULL);
    px__expect(px_load_error(&b), PXVM_INVALID, PXE_GATHER_OWN_TABLE, AT(CODE0 + 1 + 3), "writes its own table slot out");
}

TEST(errors_oversized_png)
{
    pxvm_limits lim = px__lim();
    pxvm_image big;
    CHECK(pxvm_image_alloc(&big, 16385, 1, NULL) == 0);
    uint8_t *png;
    size_t len;
    pxvm_error err;
    CHECK(pxvm_png_encode(&big, &png, &len, &err) == 0);
    pxvm_image out;
    CHECK(pxvm_png_decode(png, len, "big.png", &lim, &out, &err) < 0);
    px__expect(err, PXVM_INVALID, PXE_IMAGE_SIDE, -1, -1, "'big.png' is 16385x1; sides must be 1..16384");
    pxvm_limits small = lim;
    small.max_memory = 1000;
    pxvm_image_free(&big);
    pxvm_image_alloc(&big, 100, 100, NULL);
    free(png);
    CHECK(pxvm_png_encode(&big, &png, &len, &err) == 0);
    CHECK(pxvm_png_decode(png, len, "wide.png", &small, &out, &err) < 0);
    px__expect(err, PXVM_INVALID, PXE_IMAGE_MEMORY, -1, -1, "40000 bytes decoded; the limit is 1000");
    free(png);
    pxvm_image_free(&big);
}

TEST(errors_unlinkable_and_traps)
{
    int32_t s[PXI_MAX_FIELDS];
    pxvm_builder b;
    px__base(&b, s);
    px__pyr(&b);
    pxvm_build_insn(&b, PX_OP_SAMPLE, s);
    pxvm_build_insn(&b, PX_OP_HALT, NULL);
    pxvm_image img;
    CHECK(pxvm_build_finish(&b, &img, NULL) == 0);
    pxvm_build_free(&b);
    pxvm_program prog;
    pxvm_executor *ex;
    pxvm_error err;
    pxvm_limits lim = px__lim();
    CHECK(px_run_image(&img, NULL, 0, &prog, &ex, &err) < 0);
    px__expect(err, PXVM_UNLINKABLE, PXE_UNBOUND_INPUT, -1, -1, "input slot 1 ('src') is not bound to an image (--in src=FILE)");

    pxvm_image wrong;
    pxvm_image_alloc(&wrong, 8, 7, NULL);
    const pxvm_image *in[] = {&wrong};
    CHECK(px_run_image(&img, in, 1, &prog, &ex, &err) < 0);
    px__expect(err, PXVM_UNLINKABLE, PXE_INPUT_SIZE, -1, -1, "a 8x7 image cannot be bound to slot 1 ('src'), which is 8x8");
    pxvm_image_free(&wrong);

    pxvm_image right;
    CHECK(pxvm_program_from_copy(&img, &lim, &prog, &err) == 0);
    pxvm_image_alloc(&right, 4, 4, NULL);
    CHECK(pxvm_cpu_executor.open(&ex, NULL, &err) == 0);
    CHECK(pxvm_cpu_executor.load(ex, &prog, 1, &err) == 0);
    CHECK(pxvm_bind_image(&pxvm_cpu_executor, ex, 2, &right, &err) < 0);
    px__expect(err, PXVM_UNLINKABLE, PXE_BIND_ROLE, -1, -1, "slot 2 ('out') is a output slot");
    pxvm_image_free(&right);
    pxvm_image_alloc(&right, 8, 8, NULL);
    CHECK(pxvm_bind_image(&pxvm_cpu_executor, ex, 1, &right, &err) == 0);
    /* step budget: 3 instructions with a budget of 2 */
    pxvm_run_options ro = {.max_steps = 2};
    CHECK(pxvm_cpu_executor.run(ex, &ro, &err) < 0);
    px__expect(err, PXVM_TRAP, PXE_TRAP_STEPS, AT(CODE0 + 1 + 8), "step budget of 2 instructions exhausted before instruction 2");
    ro.max_steps = 3;
    CHECK(pxvm_cpu_executor.run(ex, &ro, &err) == 0);
    pxvm_image_free(&right);
    px_close(&prog, ex);
    pxvm_image_free(&img);
}

/* Random bytes, random pixels and mutated programs: every one loads cleanly or fails with a
 * classified error; those that load run within a small step budget without crashing. */
TEST(errors_random_input_fails_cleanly)
{
    pxvm_limits lim = px__lim();
    lim.max_memory = 64u << 20;
    uint64_t st = 77;
    for (int i = 0; i < 300; i++) {
        uint8_t buf[256];
        size_t n = (size_t)(px_rand(&st) % sizeof buf);
        for (size_t k = 0; k < n; k++)
            buf[k] = (uint8_t)px_rand(&st);
        if (i % 2 && n >= 8)
            memcpy(buf, "\x89PNG\r\n\x1a\n", 8);
        pxvm_image img;
        pxvm_error err;
        CHECK(pxvm_png_decode(buf, n, "random", &lim, &img, &err) < 0);
        CHECK_EQ(err.cls, PXVM_MALFORMED);
    }
    for (int i = 0; i < 300; i++) { /* random pixels as a program */
        pxvm_image img = px_random_image(1 + (int)(px_rand(&st) % 40), 1 + (int)(px_rand(&st) % 40), &st);
        if (i % 2 && img.w * img.h >= 2)
            memcpy(img.px, "PXVM\x01\x00", 6);
        pxvm_error e = px__load_img(&img, &lim);
        CHECK(e.cls == PXVM_MALFORMED || e.cls == PXVM_INVALID);
        CHECK(e.msg[0] != 0);
        pxvm_image_free(&img);
    }
    /* mutations of a valid program */
    pxvm_image base;
    pxvm_error err;
    CHECK(pxvm_png_load("programs/foveate273.pxi", &lim, &base, &err) == 0);
    if (!base.px)
        return;
    int loaded = 0, rejected = 0;
    pxvm_image input = px_random_image(451, 300, &st);
    for (int i = 0; i < 400; i++) {
        pxvm_image img;
        pxvm_image_alloc(&img, base.w, base.h, NULL);
        memcpy(img.px, base.px, (size_t)base.w * (size_t)base.h * 4u);
        int flips = 1 + (int)(px_rand(&st) % 4);
        for (int k = 0; k < flips; k++) {
            size_t at = (size_t)(px_rand(&st) % (i % 3 ? 200u : (uint64_t)img.w * (uint64_t)img.h * 4u));
            img.px[at] = (uint8_t)px_rand(&st);
        }
        pxvm_program prog;
        if (pxvm_program_from_image(&img, &lim, &prog, &err) < 0) {
            rejected++;
            CHECK(err.cls == PXVM_MALFORMED || err.cls == PXVM_INVALID);
            CHECK(err.x < base.w && err.y < base.h);
            continue;
        }
        loaded++;
        pxvm_executor *ex;
        CHECK(pxvm_cpu_executor.open(&ex, NULL, &err) == 0);
        if (pxvm_cpu_executor.load(ex, &prog, 1, &err) == 0) {
            for (int k = 1; k < prog.nslots; k++)
                if (prog.slots[k].role == PXI_ROLE_INPUT && prog.slots[k].w == 451 && prog.slots[k].h == 300)
                    pxvm_bind_image(&pxvm_cpu_executor, ex, k, &input, &err);
            pxvm_run_options ro = {.max_steps = 100};
            if (pxvm_cpu_executor.run(ex, &ro, &err) < 0)
                CHECK(err.cls == PXVM_UNLINKABLE || err.cls == PXVM_TRAP);
        }
        pxvm_cpu_executor.close(ex);
        pxvm_program_free(&prog);
    }
    CHECK(loaded > 0 && rejected > 0); /* the mutations reach both sides */
    pxvm_image_free(&input);
    pxvm_image_free(&base);
}

TEST(errors_read_only_slots)
{
    int32_t s[PXI_MAX_FIELDS];
    pxvm_builder b;
    px__base(&b, s);
    px__pyr(&b);
    s[PX_FI(SAMPLE, src)] = 2;
    s[PX_FI(SAMPLE, dst)] = 1; /* into the input */
    pxvm_build_insn(&b, PX_OP_SAMPLE, s);
    pxvm_build_insn(&b, PX_OP_HALT, NULL);
    px__expect(px_load_error(&b), PXVM_INVALID, PXE_WRITE_READ_ONLY, AT(CODE0 + 2), "writes slot src, a read-only input slot");
}
