/* test_dot.c - DOT_RGB, the original pixel protocol: sums, the 16-bit edge, overflow traps. */
#include "test.h"

/* Runs DOT_RGB over vectors a and b (n R values each, the rest of the row 0); returns 0 and the
 * result pixel, or -1 with the error. */
static int px__dot(const uint8_t *a, const uint8_t *b, int n, int width, uint32_t *result, pxvm_error *err)
{
    pxvm_builder bld;
    pxvm_build_init(&bld, width);
    uint32_t dot = pxvm_build_insn(&bld, PX_OP_DOT_RGB, NULL);
    pxvm_build_insn(&bld, PX_OP_HALT, NULL);
    uint8_t ra[4 * 64] = {0}, rb[4 * 64] = {0};
    for (int i = 0; i < n; i++)
        ra[4 * i] = a[i], rb[4 * i] = b[i], ra[4 * i + 3] = rb[4 * i + 3] = 255;
    int row_a = pxvm_build_row(&bld, ra, n), row_b = pxvm_build_row(&bld, rb, n);
    int row_o = pxvm_build_row(&bld, ra, 0);
    pxvm_build_patch(&bld, dot, PX_FI(DOT_RGB, row_a), row_a);
    pxvm_build_patch(&bld, dot, PX_FI(DOT_RGB, row_b), row_b);
    pxvm_build_patch(&bld, dot, PX_FI(DOT_RGB, row_out), row_o);
    pxvm_program prog;
    pxvm_executor *ex;
    if (px_run_builder(&bld, NULL, 0, &prog, &ex, err) < 0)
        return -1;
    pxvm_image out = px_read(&prog, ex, 0, 0);
    *result = px_px(&out, 0, row_o);
    CHECK_EQ(px_px(&out, 1, row_o), 0); /* only pixel 0 of the row is written */
    pxvm_image_free(&out);
    px_close(&prog, ex);
    return 0;
}

TEST(dot_300_gives_44_1)
{
    const uint8_t a[] = {10, 20}, b[] = {10, 10};
    uint32_t r = 0;
    pxvm_error err;
    CHECK(px__dot(a, b, 2, 16, &r, &err) == 0);
    CHECK_EQ(r, 44u | (1u << 8)); /* R = 44, G = 1, B = A = 0 */
}

TEST(dot_edge_values)
{
    pxvm_error err;
    uint32_t r;
    const uint8_t one[] = {1}, v255[] = {255, 255}, v2[] = {255, 2}, v128[] = {128, 127};
    CHECK(px__dot(one, one, 1, 16, &r, &err) == 0 && r == 1);
    CHECK(px__dot(v255, v2, 2, 16, &r, &err) == 0 && r == 0xFFFFu); /* 65535: the largest that fits */
    CHECK(px__dot(v128, v128, 2, 16, &r, &err) == 0 && r == 128u * 128u + 127u * 127u);
    const uint8_t a[] = {3, 0, 7}, b[] = {5, 9, 9}; /* a zero in A ends both vectors */
    CHECK(px__dot(a, b, 3, 16, &r, &err) == 0 && r == 15);
    const uint8_t z[] = {0, 5}; /* empty vector */
    CHECK(px__dot(z, b, 2, 16, &r, &err) == 0 && r == 0);
    /* no zero at all: the vectors end at the image width */
    uint8_t full[16];
    for (int i = 0; i < 16; i++)
        full[i] = 2;
    CHECK(px__dot(full, full, 16, 16, &r, &err) == 0 && r == 64);
}

TEST(dot_overflow_traps)
{
    pxvm_error err;
    uint32_t r;
    const uint8_t a[] = {255, 255}, b[] = {255, 3}; /* 65025 + 765 = 65790 > 65535 */
    CHECK(px__dot(a, b, 2, 16, &r, &err) == -1);
    CHECK_EQ(err.cls, PXVM_TRAP);
    CHECK_EQ(err.code, PXE_TRAP_DOT_OVERFLOW);
    CHECK_STR(err.msg, "sum 65790 does not fit in 16 bits");
    CHECK(err.x == PXI_HEADER_PIXELS && err.y == 0); /* the DOT_RGB opcode pixel */
    /* the largest sum the format can produce: 64 x 255 x 255 */
    uint8_t m[64];
    for (int i = 0; i < 64; i++)
        m[i] = 255;
    CHECK(px__dot(m, m, 64, 64, &r, &err) == -1);
    CHECK_STR(err.msg, "sum 4161600");
}
