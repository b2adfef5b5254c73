/* test_fuzz_regressions.c - every input a fuzzer found to crash, as a test named after what it
 * found. The fuzzer's own input is kept in tests/fuzz/regressions/ too. */
#include "../../assembler/pxasm.h"
#include "test.h"

/* fuzz_asm, 2026-11-21: a .pixels block with no pixels (its only line a comment) reached
 * memcpy with a NULL source (undefined behaviour, caught by UBSan). */
TEST(fuzz_asm_empty_pixels_block)
{
    pxvm_limits lim;
    pxvm_limits_default(&lim);
    pxvm_image img;
    pxvm_error err;
    const char *src = ".slot a input 8x8\nHALT\n.pixels 0 1\n# nothing but a comment\n.end\n";
    CHECK(pxasm_assemble(src, strlen(src), "empty.pxs", &lim, &img, &err) == 0);
    pxvm_image_free(&img);
    /* and the fuzzer's own input, which assembles as well */
    CHECK(pxasm_assemble_file("tests/fuzz/regressions/asm-empty-pixels-block.pxs", &lim, &img, &err) == 0);
    pxvm_image_free(&img);
}

/* fuzz_asm, 2026-11-21: two empty .rows blocks; the second grew the rows to 0 bytes, which
 * realloc treats as a free, and the rows were then freed twice (caught by ASan). An empty
 * .rows block is now an error. */
TEST(fuzz_asm_two_empty_rows_blocks)
{
    pxvm_limits lim;
    pxvm_limits_default(&lim);
    pxvm_image img;
    pxvm_error err;
    const char *src = "HALT\n.rows a\n.end\n.rows b\n.end\n";
    CHECK(pxasm_assemble(src, strlen(src), "rows.pxs", &lim, &img, &err) < 0);
    CHECK_EQ(err.cls, PXVM_ASSEMBLY);
    CHECK_STR(err.msg, "rows.pxs:2:1: .rows a has no rows (one line of RRGGBBAA pixels per row)");
    CHECK(pxasm_assemble_file("tests/fuzz/regressions/asm-two-empty-rows-blocks.pxs", &lim, &img, &err) < 0);
    CHECK_EQ(err.cls, PXVM_ASSEMBLY);
}
