/* test_resolution_budget.c - the resolutions of an any-size program a runner keeps are inside the
 * program's memory limit (max_memory), not 64 whole copies of the program image beside it. */
#include <stdlib.h>
#include <string.h>

#include "../../api/runner_hooks.h"
#include "test.h"

TEST(resolution_cache_holds_at_most_the_memory_limit)
{
    /* every size a resolution, kept in the cache: a wide program image makes each resolution's
     * copy of it large */
    static const char text[] = ".width 4096\n.slot image input 64x48 any min=8 max=64\n.slot out output 16x16\n"
                               "RESIZE image out filter=1 at=(0,0) size=(16,16)\nHALT\n";
    pxvm_limits lim;
    pxvm_limits_default(&lim);
    pxvm_prog *prog = NULL;
    CHECK_EQ(pxvm_prog_assemble(text, "wide.pxs", &lim, &prog), 0);
    pxvm_runner *run = NULL;
    CHECK_EQ(pxvm_runner_open(prog, "cpu", 0, 1, 1, &run), 0);
    uint64_t one = 0;
    CHECK_EQ(pxvm_runner_test_resolutions(run, &one), 1);
    pxvm_runner_close(run);
    pxvm_prog_free(prog);
    /* a limit that holds the slots at every size and three resolutions, not four */
    lim.max_memory = 3 * one + one / 2;
    CHECK_EQ(pxvm_prog_assemble(text, "wide.pxs", &lim, &prog), 0);
    CHECK_EQ(pxvm_runner_open(prog, "cpu", 0, 1, 1, &run), 0);
    static uint8_t px[64 * 64 * 4];
    int image = pxvm_prog_slot_find(prog, "image"), most = 0;
    for (int k = 0; k < 12; k++) {
        pxvm_view v = pxvm_view_host(px, 20 + k, 30 + k, 4);
        CHECK_EQ(pxvm_runner_bind(run, image, 0, &v), 0);
        CHECK_EQ(pxvm_runner_run(run), 0);
        uint64_t bytes = 0;
        int n = pxvm_runner_test_resolutions(run, &bytes);
        most = n > most ? n : most;
        CHECK(bytes <= lim.max_memory);
    }
    CHECK_EQ(most, 3);
    pxvm_runner_close(run);
    pxvm_prog_free(prog);
}
