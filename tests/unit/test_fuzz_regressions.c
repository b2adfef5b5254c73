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
