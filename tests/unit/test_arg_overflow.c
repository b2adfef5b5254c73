/* test_arg_overflow.c - argument checks at the ends of int: items, registers and token ranges
 * near INT_MAX are refused with their words, and computing those words overflows nothing (the
 * sanitizer build traps on signed overflow, so each of these failed there before). */
#include <limits.h>
#include <string.h>

#include "../../include/pxvm.h"
#include "../../vm/vm.h"
#include "test.h"

TEST(arg_overflow_items_registers_and_tokens_near_int_max)
{
    pxvm_prog *prog = NULL;
    pxvm_runner *run = NULL;
    CHECK_EQ(pxvm_prog_load("programs/foveate273.pxi", NULL, &prog), 0);
    CHECK_EQ(pxvm_runner_open(prog, "cpu", 0, 1, 2, &run), 0);
    uint8_t px[4] = {0};
    pxvm_view v = pxvm_view_host(px, 1, 1, 4);
    v.w = 451, v.h = 300, v.items = INT_MAX; /* items 1..INT_MAX: the last item is INT_MAX */
    CHECK_EQ(pxvm_runner_bind(run, 1, 1, &v), PXVM_USAGE);
    CHECK_STR(pxvm_errmsg(), "items 1..2147483647 are outside the batch of 2");
    v.items = 2;
    CHECK_EQ(pxvm_runner_bind(run, 1, INT_MAX, &v), PXVM_USAGE);
    CHECK_STR(pxvm_errmsg(), "items 2147483647..2147483648 are outside the batch of 2");
    /* strides no memory has: refused with their numbers before any address is computed from them */
    v.items = 2, v.item_stride = INT64_MIN;
    CHECK_EQ(pxvm_runner_bind(run, 1, 0, &v), PXVM_USAGE);
    CHECK_STR(pxvm_errmsg(), "span 2^48 bytes or more");
    /* the edge, on the shape alone (the memory is the caller's promise): 2 rows of one RGBA pixel
     * span row_stride + 3 bytes; 2^48 - 1 is a view, 2^48 is not */
    pxvm_error err;
    pxvm_view e = pxvm_view_host(px, 1, 2, 4);
    e.row_stride = ((int64_t)1 << 48) - 4;
    CHECK_EQ(pxvm_check_input_view(1, 0, &e, &err), 0);
    e.row_stride++;
    CHECK_EQ(pxvm_check_input_view(1, 0, &e, &err), -1);
    CHECK_STR(err.msg, "row 281474976710653");
    v.item_stride = (int64_t)451 * 300 * 4;
    int32_t xy[2] = {0, 0};
    CHECK_EQ(pxvm_runner_set_fixations(run, 0, 1, 1, INT_MAX, xy, -1), PXVM_USAGE);
    CHECK_STR(pxvm_errmsg(), "registers 1..2147483647 asked for");
    CHECK_EQ(pxvm_runner_set_fixations(run, 0, 1, INT_MAX, 1, xy, -1), PXVM_USAGE);
    pxvm_token_format fmt;
    CHECK_EQ(pxvm_token_format_preset("clip", &fmt), 0);
    float out[4];
    CHECK_EQ(pxvm_runner_read_tokens(run, 2, INT_MAX, 2, &fmt, out, -1), PXVM_USAGE);
    CHECK_STR(pxvm_errmsg(), "items 2147483647..2147483648");
    pxvm_runner_close(run);
    pxvm_prog_free(prog);
}
