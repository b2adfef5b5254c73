/* test.h - a minimal test harness: TEST(name) { CHECK(...); } registers itself; the runner
 * (tests/unit/main.c) runs every test (or those whose name contains argv[1]) and prints
 * "N passed, N failed". A test passes when none of its checks failed. */
#ifndef PX_TEST_H
#define PX_TEST_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "../../vm/pxi_build.h"
#include "../../vm/vm.h"
#include "../../executors/registry.h"

typedef void (*px_test_fn)(void);
void px_test_register(const char *name, px_test_fn fn);
void px_test_fail(const char *file, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#define TEST(name)                                                                  \
    static void test_##name(void);                                                  \
    __attribute__((constructor)) static void test_register_##name(void)            \
    {                                                                               \
        px_test_register(#name, test_##name);                                       \
    }                                                                               \
    static void test_##name(void)

#define CHECK(cond)                                                                 \
    do {                                                                            \
        if (!(cond))                                                                \
            px_test_fail(__FILE__, __LINE__, "CHECK(%s)", #cond);                   \
    } while (0)
#define CHECK_EQ(a, b)                                                              \
    do {                                                                            \
        long long px_a_ = (long long)(a), px_b_ = (long long)(b);                   \
        if (px_a_ != px_b_)                                                         \
            px_test_fail(__FILE__, __LINE__, "%s == %s: %lld != %lld", #a, #b, px_a_, px_b_); \
    } while (0)
#define CHECK_STR(hay, needle)                                                      \
    do {                                                                            \
        if (!strstr((hay), (needle)))                                               \
            px_test_fail(__FILE__, __LINE__, "'%s' does not contain '%s'", (hay), (needle)); \
    } while (0)

/* ---- helpers shared by the tests (tests/unit/helpers.c) ---- */

/* Runs a program image on the CPU executor: inputs bound in slot order (NULL = none).
 * Returns 0, or -1 with *err set. On success *ex is left open for reads (close with px_close). */
int px_run_image(const pxvm_image *prog_img, const pxvm_image *const *inputs, int ninputs, pxvm_program *prog,
                 pxvm_executor **ex, pxvm_error *err);
int px_run_builder(pxvm_builder *b, const pxvm_image *const *inputs, int ninputs, pxvm_program *prog,
                   pxvm_executor **ex, pxvm_error *err);
void px_close(pxvm_program *prog, pxvm_executor *ex);
/* A level of a slot after a run (caller frees). */
pxvm_image px_read(const pxvm_program *prog, pxvm_executor *ex, int slot, int level);
/* Loads a program image that is expected to fail validation; returns the error. */
pxvm_error px_load_error(pxvm_builder *b);
/* The builder's program finished, freed and loaded (default limits) into *prog: 0, or -1 with the
 * failure reported. */
int px_build_program(pxvm_builder *b, pxvm_program *prog);
uint32_t px_px(const pxvm_image *img, int x, int y); /* pixel as R | G<<8 | B<<16 | A<<24 */
void px_set(pxvm_image *img, int x, int y, uint32_t rgba);
uint64_t px_rand(uint64_t *state); /* splitmix64 */
pxvm_image px_random_image(int w, int h, uint64_t *state);
/* A video program (64x64 frame: DIFF, UPDATE, PYRAMID, then a GATHER of two table entries into a
 * persistent 2x1 atlas), incremental (tile masks) or not; both entries read (at + 0.5, at + 0.5),
 * entry 0 at LOD lod0 (Q8.8), entry 1 at level 0. Programs for other `at` differ only in the
 * table's pixels. 0, or -1 (the failure reported). */
int px_gather_video_program(int incremental, int at, uint32_t lod0, pxvm_program *prog);

/* The executor PXVM_TEST_EXECUTOR names (cpu when unset; the GPU check sets cuda); NULL, reported,
 * when there is none such. */
const pxvm_executor_ops *px_test_executor(void);

/* A test file's table of SPEC rule IDs, each with its edge pair in that file, against
 * isa/SPEC.md: every ID of the table is defined there once ("[ID]") and has one index row
 * ("| ID | class | `CODE` | ..."), whose text after the ID row(i, rest) checks; every ID SPEC.md
 * names with `prefix` (NULL: every ID of the form X-NAME-n, X one of M V U T) is in the table.
 * Failures are reported; returns the count of definitions found. */
typedef struct px_spec_ids {
    const char *prefix;
    const char *file; /* the test file holding the pairs, for the messages */
    size_t n;
    const char *(*id)(size_t i);
    void (*row)(size_t i, const char *rest); /* NULL: the row's text is not checked */
} px_spec_ids;
int px_spec_ids_check(const px_spec_ids *t);
/* "| class | `CODE` |" after an ID in SPEC's index: 0 when they are these (else reported, naming id). */
int px_spec_row_is(const char *id, const char *rest, const char *cls, const char *code);

#endif
