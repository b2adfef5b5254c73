/* test_fixation.c - fixation registers, relative sampling, SALIENCY, ARGMAX and token geometry:
 * explicit expected values for the conformance edge cases (tests/conformance/cases.c, whose
 * hashes the GPU must reproduce), an independent re-derivation of SALIENCY from the spec text,
 * the relative == absolute property on random programs, validation and assembly. */
#define _GNU_SOURCE /* open_memstream */
#include <stdio.h>
#include <stdlib.h>

#include <math.h>

#include "../../api/fixation.h"
#include "../../assembler/plan.h"
#include "../../assembler/pxasm.h"
#include "../../isa/px_sem.h"
#include "../conformance/cases.h"
#include "test.h"

#define ONE 65536
#define HALF 32768

/* A conformance edge case by name, run on the CPU executor (registers set if the case has them). */
typedef struct {
    px_case c;
    pxvm_program prog;
    pxvm_executor *ex;
    int32_t fix[PX_FIX_REGS * 2];
} px__run;

static int px__run_case(const char *name, px__run *r)
{
    memset(r, 0, sizeof *r);
    for (int i = 0;; i++) {
        int built = px_case_edge(i, &r->c);
        if (built <= 0)
            return -1;
        if (!strcmp(r->c.name, name))
            break;
        px_case_free(&r->c);
    }
    pxvm_limits lim;
    pxvm_limits_default(&lim);
    pxvm_error err;
    pxvm_run_options ro = {.max_steps = lim.max_steps};
    if (pxvm_program_from_copy(&r->c.program, &lim, &r->prog, &err) < 0 ||
        pxvm_cpu_executor.open(&r->ex, NULL, &err) < 0 || pxvm_cpu_executor.load(r->ex, &r->prog, 1, &err) < 0)
        return -1;
    for (int i = 0; i < r->c.ninputs; i++)
        if (pxvm_bind_image(&pxvm_cpu_executor, r->ex, r->c.input_slot[i], &r->c.inputs[i], &err) < 0)
            return -1;
    if (r->c.has_fix && pxvm_cpu_executor.set_fixations(r->ex, 0, 1, 0, PX_FIX_REGS, r->c.fix, -1, &err) < 0)
        return -1;
    if (pxvm_cpu_executor.run(r->ex, &ro, &err) < 0 ||
        pxvm_cpu_executor.read_state(r->ex, PXVM_STATE_FIXATIONS, 0, 0, 1, r->fix, -1, &err) < 0) {
        fprintf(stderr, "%s: %s\n", name, err.msg);
        return -1;
    }
    return 0;
}

static void px__run_free(px__run *r)
{
    pxvm_cpu_executor.close(r->ex);
    pxvm_program_free(&r->prog);
    px_case_free(&r->c);
}

/* Token geometry of an atlas slot (caller frees). */
static int32_t *px__geom(px__run *r, const char *slot)
{
    int k = pxvm_slot_lookup(&r->prog, slot);
    int32_t *g = calloc((size_t)r->prog.slots[k].patch_count * PX_GEOM_INTS, sizeof(int32_t));
    pxvm_error err;
    if (pxvm_cpu_executor.read_state(r->ex, PXVM_STATE_GEOMETRY, k, 0, 1, g, -1, &err) < 0)
        px_test_fail(__FILE__, __LINE__, "%s", err.msg);
    return g;
}

/* Token 0's geometry in slot "atlas" is want[0..4]. */
static void px__check_token0(px__run *r, const int32_t want[PX_GEOM_INTS])
{
    int32_t *g = px__geom(r, "atlas");
    for (int i = 0; i < PX_GEOM_INTS; i++)
        CHECK_EQ(g[i], want[i]);
    free(g);
}

/* The first texel (row-major) where wr*R + wg*G + wb*B is largest: ARGMAX's rule, by hand. */
static void px__argmax_texel(const pxvm_image *img, int wr, int wg, int wb, int *bx, int *by)
{
    int best = -1;
    for (int y = 0; y < img->h; y++)
        for (int x = 0; x < img->w; x++) {
            uint32_t p = px_px(img, x, y);
            int v = wr * (int)(p & 255u) + wg * (int)((p >> 8) & 255u) + wb * (int)((p >> 16) & 255u);
            if (v > best)
                best = v, *bx = x, *by = y;
        }
}

#define CHECK_REG(r, k, X, Y)                                                                   \
    do {                                                                                        \
        CHECK_EQ((r)->fix[2 * (k)], (X));                                                       \
        CHECK_EQ((r)->fix[2 * (k) + 1], (Y));                                                   \
    } while (0)

TEST(fixation_argmax_flat_image_picks_the_first_texel)
{
    px__run r;
    CHECK(px__run_case("fixation/argmax_flat", &r) == 0);
    CHECK_REG(&r, 0, HALF, HALF); /* centre of texel (0, 0) */
    const int32_t want[PX_GEOM_INTS] = {HALF, HALF, ONE, ONE, 0};
    px__check_token0(&r, want);
    px__run_free(&r);
}

TEST(fixation_argmax_ties_corners_and_inhibition)
{
    px__run r;
    CHECK(px__run_case("fixation/argmax_ties_and_corner", &r) == 0);
    CHECK_REG(&r, 0, 4 * ONE + HALF, 1 * ONE + HALF); /* (4,1) and (1,2) tie: row-major first */
    CHECK_REG(&r, 1, 5 * ONE + HALF, 3 * ONE + HALF); /* G maximum in the bottom-right corner */
    CHECK_REG(&r, 2, 1 * ONE + HALF, 2 * ONE + HALF); /* (4,1) inhibited by register 0 */
    /* the nearest-sampled 2x2 patch around register 2 is texels (0..1, 1..2): (1,2) is 200 red */
    pxvm_image a = px_read(&r.prog, r.ex, pxvm_slot_lookup(&r.prog, "atlas"), 0);
    CHECK_EQ(px_px(&a, 4, 0) & 255u, 200); /* patch 2's texel (0, 0) is image (1, 2) */
    pxvm_image_free(&a);
    px__run_free(&r);
}

TEST(fixation_one_by_one_inhibited_everywhere_falls_back_and_gather_geometry)
{
    px__run r;
    CHECK(px__run_case("fixation/one_by_one", &r) == 0);
    CHECK_REG(&r, 0, HALF, HALF);
    CHECK_REG(&r, 1, HALF, HALF); /* the radius-0 disc covers the only texel */
    /* GATHER token: entry (w/2, h/2) = (1, 1): u = 1 - 1/2, v = 1, plus register 1 = (1/2, 1/2) */
    const int32_t want[PX_GEOM_INTS] = {ONE, ONE + HALF, 0, 0, 0};
    px__check_token0(&r, want);
    px__run_free(&r);
}

TEST(fixation_inhibition_covering_the_image_returns_the_global_maximum)
{
    px__run r;
    CHECK(px__run_case("fixation/inhibition_covers_all", &r) == 0);
    int bx = 0, by = 0;
    px__argmax_texel(&r.c.inputs[0], 1, 1, 1, &bx, &by);
    for (int k = 0; k < 3; k++)
        CHECK_REG(&r, k, bx * ONE + HALF, by * ONE + HALF);
    px__run_free(&r);
}

TEST(fixation_extreme_registers_clamp_and_geometry_saturates)
{
    px__run r;
    CHECK(px__run_case("fixation/extreme_registers", &r) == 0);
    int32_t *g = px__geom(&r, "atlas");
    CHECK_EQ(g[0 * 5 + 0], -1);                /* INT32_MIN + register INT32_MAX */
    CHECK_EQ(g[1 * 5 + 0], INT32_MIN);         /* INT32_MIN + 1 + register INT32_MIN saturates */
    CHECK_EQ(g[1 * 5 + 1], INT32_MIN + ONE / 4); /* ONE/4 + register INT32_MIN */
    CHECK_EQ(g[2 * 5 + 0], INT32_MAX);         /* INT32_MAX + register INT32_MAX saturates */
    CHECK_EQ(g[2 * 5 + 4], 200);               /* linear: the LOD as given, below the last level (3) */
    CHECK_EQ(g[3 * 5 + 4], 256);               /* nearest: 300 rounds to level 1 */
    CHECK_EQ(g[7 * 5 + 4], 768);               /* nearest: 700 rounds to 3, the last level */
    CHECK_EQ(g[7 * 5 + 0], INT32_MAX);         /* INT32_MAX + 9 texels saturates */
    CHECK_EQ(g[6 * 5 + 2], 1 << 16 << 0);      /* du = ONE << (6 % 3) */
    free(g);
    px__run_free(&r);
}

TEST(fixation_itti_saliency_first_fixation_lands_on_the_red_square)
{
    px__run r;
    CHECK(px__run_case("fixation/itti_64x48", &r) == 0);
    /* the square covers x 40..45, y 14..21; a map texel is 8x8 image texels */
    CHECK(r.fix[0] >= 36 * ONE && r.fix[0] <= 50 * ONE);
    CHECK(r.fix[1] >= 10 * ONE && r.fix[1] <= 26 * ONE);
    for (int k = 1; k < 4; k++) /* inhibition of return: four distinct fixations */
        for (int j = 0; j < k; j++)
            CHECK(r.fix[2 * k] != r.fix[2 * j] || r.fix[2 * k + 1] != r.fix[2 * j + 1]);
    px__run_free(&r);
}

TEST(fixation_topdown_map_of_another_size_maps_to_image_coordinates)
{
    px__run r;
    CHECK(px__run_case("fixation/topdown_map", &r) == 0);
    int bx = 0, by = 0;
    px__argmax_texel(&r.c.inputs[1], 0, 1, 0, &bx, &by); /* the query map's G */
    /* centre of query texel (bx, by) in the 32x32 image: (bx + 1/2) * 32/5, (by + 1/2) * 32/3 */
    CHECK_EQ(r.fix[0], (int32_t)(((int64_t)(2 * bx + 1) * 32 * 32768) / 5));
    CHECK_EQ(r.fix[1], (int32_t)(((int64_t)(2 * by + 1) * 32 * 32768) / 3));
    px__run_free(&r);
}

/* SALIENCY re-derived from the spec text alone: features, absolute differences, block maximum,
 * shift, cap and saturating accumulation, on the pyramid the executor built. */
TEST(fixation_saliency_matches_an_independent_derivation)
{
    px__run r;
    CHECK(px__run_case("fixation/saliency_odd_scanpath", &r) == 0);
    int in = r.c.input_slot[0], sal = pxvm_slot_lookup(&r.prog, "sal");
    pxvm_image L0 = px_read(&r.prog, r.ex, in, 0), L1 = px_read(&r.prog, r.ex, in, 1), L2 = px_read(&r.prog, r.ex, in, 2);
    pxvm_image got = px_read(&r.prog, r.ex, sal, 0);
    const pxvm_image *lv[3] = {&L0, &L1, &L2};
    /* the case: SALIENCY c0 s2 map1 shift2 weights (1,1,1), then c1 s2 map1 shift0 (3,2,1) added */
    const int pass[2][7] = {{0, 2, 1, 2, 1, 1, 1}, {1, 2, 1, 0, 3, 2, 1}};
    for (int y = 0; y < got.h; y++)
        for (int x = 0; x < got.w; x++) {
            int total = 0;
            for (int p = 0; p < 2; p++) {
                int c = pass[p][0], s = pass[p][1], m = pass[p][2], best = 0;
                const pxvm_image *C = lv[c], *S = lv[s];
                for (int yc = y << (m - c); yc < ((y + 1) << (m - c)) && yc < C->h; yc++)
                    for (int xc = x << (m - c); xc < ((x + 1) << (m - c)) && xc < C->w; xc++) {
                        int xs = xc >> (s - c), ys = yc >> (s - c);
                        xs = xs < S->w - 1 ? xs : S->w - 1;
                        ys = ys < S->h - 1 ? ys : S->h - 1;
                        uint32_t a = px_px(C, xc, yc), b = px_px(S, xs, ys);
                        int ar = (int)(a & 255), ag = (int)((a >> 8) & 255), ab = (int)((a >> 16) & 255);
                        int br = (int)(b & 255), bg = (int)((b >> 8) & 255), bb = (int)((b >> 16) & 255);
                        int d = pass[p][4] * abs((ar + ag + ab) - (br + bg + bb)) + pass[p][5] * abs((ar - ag) - (br - bg)) +
                                pass[p][6] * abs((2 * ab - ar - ag) - (2 * bb - br - bg));
                        best = d > best ? d : best;
                    }
                best >>= pass[p][3];
                best = best > 255 ? 255 : best;
                total = total + best > 255 ? 255 : total + best;
            }
            uint32_t want = (uint32_t)total * 0x010101u | 0xFF000000u;
            if (px_px(&got, x, y) != want)
                px_test_fail(__FILE__, __LINE__, "map (%d,%d): %08x, derived %08x", x, y, px_px(&got, x, y), want);
        }
    pxvm_image_free(&L0), pxvm_image_free(&L1), pxvm_image_free(&L2), pxvm_image_free(&got);
    px__run_free(&r);
}

TEST(fixation_saliency_of_a_flat_image_is_zero)
{
    pxvm_builder b;
    pxvm_build_init(&b, 32);
    int in = pxvm_build_slot(&b, PXI_ROLE_INPUT, "image", 16, 8);
    int sal = pxvm_build_slot(&b, PXI_ROLE_OUTPUT, "sal", 4, 2);
    int32_t f[PXI_MAX_FIELDS] = {0};
    f[PX_FI(PYRAMID, slot)] = in;
    pxvm_build_insn(&b, PX_OP_PYRAMID, f);
    memset(f, 0, sizeof f);
    f[PX_FI(SALIENCY, src)] = in, f[PX_FI(SALIENCY, dst)] = sal, f[PX_FI(SALIENCY, centre)] = 1;
    f[PX_FI(SALIENCY, surround)] = 3, f[PX_FI(SALIENCY, map)] = 2;
    f[PX_FI(SALIENCY, w_lum)] = f[PX_FI(SALIENCY, w_rg)] = f[PX_FI(SALIENCY, w_by)] = 255;
    pxvm_build_insn(&b, PX_OP_SALIENCY, f);
    pxvm_build_insn(&b, PX_OP_HALT, NULL);
    pxvm_image img;
    pxvm_image_alloc(&img, 16, 8, NULL);
    for (int i = 0; i < 16 * 8; i++)
        px_set(&img, i % 16, i / 16, 0xFF3070A0u);
    const pxvm_image *ins[1] = {&img};
    pxvm_program prog;
    pxvm_executor *ex;
    pxvm_error err;
    CHECK(px_run_builder(&b, ins, 1, &prog, &ex, &err) == 0);
    pxvm_image got = px_read(&prog, ex, sal, 0);
    for (int i = 0; i < 8; i++)
        CHECK_EQ(px_px(&got, i % 4, i / 4), 0xFF000000u);
    pxvm_image_free(&got);
    pxvm_image_free(&img);
    px_close(&prog, ex);
}

/* Relative == absolute: random SAMPLE/ANISO/GATHER relative to random registers give the bytes
 * of the same instructions with the register added to their centres (and GATHER tables). */
TEST(fixation_relative_equals_absolute_on_random_programs)
{
    uint64_t st = 42;
    for (int trial = 0; trial < 60; trial++) {
        int w = 1 + (int)(px_rand(&st) % 70), h = 1 + (int)(px_rand(&st) % 70);
        pxvm_image img = px_random_image(w, h, &st);
        int32_t fix[PX_FIX_REGS * 2];
        for (int i = 0; i < PX_FIX_REGS * 2; i++)
            fix[i] = (int32_t)(px_rand(&st) % ((uint64_t)(w + h + 20) << 16)) - (10 << 16);
        pxvm_builder br, ba;
        pxvm_build_init(&br, 64);
        pxvm_build_init(&ba, 64);
        pxvm_image tr, ta; /* GATHER tables: relative entries, and entries + the register */
        pxvm_image_alloc(&tr, 12, 4, NULL);
        pxvm_image_alloc(&ta, 12, 4, NULL);
        int greg = (int)(px_rand(&st) % PX_FIX_REGS);
        for (int j = 0; j < 4; j++)
            for (int i = 0; i < 4; i++) {
                int32_t u = (int32_t)(px_rand(&st) % (40u << 16)) - (20 << 16), v = (int32_t)(px_rand(&st) % (40u << 16)) - (20 << 16);
                uint32_t lod = (uint32_t)(px_rand(&st) % 1200);
                uint8_t *er = tr.px + ((size_t)j * 12u + 3u * (size_t)i) * 4u, *ea = ta.px + ((size_t)j * 12u + 3u * (size_t)i) * 4u;
                pxi_write_le(er, 0, 0, 4, (uint32_t)u), pxi_write_le(er, 1, 0, 4, (uint32_t)v), pxi_write_le(er, 2, 0, 4, lod);
                pxi_write_le(ea, 0, 0, 4, (uint32_t)(u + fix[2 * greg])), pxi_write_le(ea, 1, 0, 4, (uint32_t)(v + fix[2 * greg + 1]));
                pxi_write_le(ea, 2, 0, 4, lod);
            }
        pxvm_builder *bs[2] = {&br, &ba};
        for (int which = 0; which < 2; which++) {
            pxvm_builder *b = bs[which];
            int in = pxvm_build_slot(b, PXI_ROLE_INPUT, "image", w, h);
            int out = pxvm_build_slot(b, PXI_ROLE_OUTPUT, "out", 32, 32);
            pxvm_build_patches(b, out, 4, 4, 64);
            pxvm_build_data_slot(b, "table", which ? &ta : &tr); /* slot 3 */
            int32_t f[PXI_MAX_FIELDS] = {0};
            f[PX_FI(PYRAMID, slot)] = in;
            pxvm_build_insn(b, PX_OP_PYRAMID, f);
        }
        for (int t = 0; t < 40; t++) {
            int op = (int)(px_rand(&st) % 3), reg = (int)(px_rand(&st) % PX_FIX_REGS), filter = (int)(px_rand(&st) % 2);
            int32_t f[PXI_MAX_FIELDS] = {0};
            f[PX_FI(SAMPLE, src)] = 1, f[PX_FI(SAMPLE, dst)] = 2;
            f[PX_FI(SAMPLE, dst_x)] = 4 * (t % 8), f[PX_FI(SAMPLE, dst_y)] = 4 * (t / 8);
            f[PX_FI(SAMPLE, w)] = f[PX_FI(SAMPLE, h)] = 4;
            int32_t cu = (int32_t)(px_rand(&st) % (40u << 16)) - (20 << 16), cv = (int32_t)(px_rand(&st) % (40u << 16)) - (20 << 16);
            f[PX_FI(SAMPLE, du)] = (int32_t)(px_rand(&st) % (6u << 16)) - (3 << 16);
            f[PX_FI(SAMPLE, dv)] = (int32_t)(px_rand(&st) % (6u << 16)) - (3 << 16);
            f[PX_FI(SAMPLE, lod)] = (int32_t)(px_rand(&st) % 1500);
            int opcode = op == 0 ? PX_OP_SAMPLE : op == 1 ? PX_OP_ANISO : PX_OP_GATHER;
            if (op == 1) {
                f[PX_FI(ANISO, taps)] = 1 + (int)(px_rand(&st) % 16);
                f[PX_FI(ANISO, tdu)] = (int32_t)(px_rand(&st) % (4u << 16)) - (2 << 16);
                f[PX_FI(ANISO, tdv)] = (int32_t)(px_rand(&st) % (4u << 16)) - (2 << 16);
            }
            int32_t g[PXI_MAX_FIELDS];
            memcpy(g, f, sizeof g);
            if (op == 2) {
                memset(f + PX_FI(GATHER, table), 0, sizeof(int32_t) * 4);
                f[PX_FI(GATHER, table)] = 3, f[PX_FI(GATHER, table_x)] = 0, f[PX_FI(GATHER, table_y)] = 0;
                memcpy(g, f, sizeof g);
                reg = greg;
            } else {
                f[PX_FI(SAMPLE, cu)] = cu, f[PX_FI(SAMPLE, cv)] = cv;
                g[PX_FI(SAMPLE, cu)] = cu + fix[2 * reg], g[PX_FI(SAMPLE, cv)] = cv + fix[2 * reg + 1];
            }
            f[PX_FI(SAMPLE, mode)] = PX_MODE_REL(filter, reg);
            g[PX_FI(SAMPLE, mode)] = filter;
            pxvm_build_insn(&br, opcode, f);
            pxvm_build_insn(&ba, opcode, g);
        }
        pxvm_build_insn(&br, PX_OP_HALT, NULL);
        pxvm_build_insn(&ba, PX_OP_HALT, NULL);
        pxvm_image pr, pa;
        pxvm_error err;
        CHECK(pxvm_build_finish(&br, &pr, &err) == 0 && pxvm_build_finish(&ba, &pa, &err) == 0);
        pxvm_build_free(&br), pxvm_build_free(&ba);
        pxvm_limits lim;
        pxvm_limits_default(&lim);
        pxvm_program prog_r, prog_a;
        pxvm_executor *er, *ea;
        pxvm_run_options ro = {.max_steps = lim.max_steps};
        CHECK(pxvm_program_from_copy(&pr, &lim, &prog_r, &err) == 0);
        CHECK(pxvm_program_from_copy(&pa, &lim, &prog_a, &err) == 0);
        CHECK(pxvm_cpu_executor.open(&er, NULL, &err) == 0 && pxvm_cpu_executor.open(&ea, NULL, &err) == 0);
        CHECK(pxvm_cpu_executor.load(er, &prog_r, 1, &err) == 0 && pxvm_cpu_executor.load(ea, &prog_a, 1, &err) == 0);
        CHECK(pxvm_bind_image(&pxvm_cpu_executor, er, 1, &img, &err) == 0);
        CHECK(pxvm_bind_image(&pxvm_cpu_executor, ea, 1, &img, &err) == 0);
        CHECK(pxvm_cpu_executor.set_fixations(er, 0, 1, 0, PX_FIX_REGS, fix, -1, &err) == 0);
        CHECK(pxvm_cpu_executor.run(er, &ro, &err) == 0 && pxvm_cpu_executor.run(ea, &ro, &err) == 0);
        pxvm_image a = px_read(&prog_r, er, 2, 0), b2 = px_read(&prog_a, ea, 2, 0);
        if (memcmp(a.px, b2.px, (size_t)a.w * (size_t)a.h * 4u))
            px_test_fail(__FILE__, __LINE__, "trial %d (%dx%d): relative and absolute outputs differ", trial, w, h);
        int32_t gr[64 * 5], ga[64 * 5];
        CHECK(pxvm_cpu_executor.read_state(er, PXVM_STATE_GEOMETRY, 2, 0, 1, gr, -1, &err) == 0);
        CHECK(pxvm_cpu_executor.read_state(ea, PXVM_STATE_GEOMETRY, 2, 0, 1, ga, -1, &err) == 0);
        if (memcmp(gr, ga, sizeof gr))
            px_test_fail(__FILE__, __LINE__, "trial %d: token geometry differs", trial);
        pxvm_image_free(&a), pxvm_image_free(&b2), pxvm_image_free(&pr), pxvm_image_free(&pa);
        pxvm_image_free(&tr), pxvm_image_free(&ta), pxvm_image_free(&img);
        pxvm_cpu_executor.close(er), pxvm_cpu_executor.close(ea);
        pxvm_program_free(&prog_r), pxvm_program_free(&prog_a);
    }
}

TEST(fixation_validation_names_the_operand)
{
    pxvm_builder b;
    int32_t f[PXI_MAX_FIELDS];
    struct {
        int op, field, value;
        const char *msg;
    } bad[] = {
        {PX_OP_SAMPLE, PX_FI(SAMPLE, mode), 32, "operand mode = 32"},
        {PX_OP_ARGMAX, PX_FI(ARGMAX, reg), 8, "operand reg = 8 (fixation registers are 0..7)"},
        {PX_OP_ARGMAX, PX_FI(ARGMAX, level), 3, "level 3 is beyond the 3 levels of slot image"},
        {PX_OP_ARGMAX, PX_FI(ARGMAX, ior_count), 9, "inhibiting registers 0..8: there are 8"},
        {PX_OP_ARGMAX, PX_FI(ARGMAX, radius), 16385, "inhibition radius 16385 is larger than 16384"},
        {PX_OP_SALIENCY, PX_FI(SALIENCY, surround), 0, "centre level 0 must be finer than surround level 0"},
        {PX_OP_SALIENCY, PX_FI(SALIENCY, map), 2, "map slot sal is 2x2 but level 2 of slot image is 1x1"},
        {PX_OP_SALIENCY, PX_FI(SALIENCY, accumulate), 2, "operand accumulate = 2 (a flag is 0 or 1)"},
        {PX_OP_SALIENCY, PX_FI(SALIENCY, shift), 21, "shift 21 is larger than 20"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        pxvm_build_init(&b, 16);
        int in = pxvm_build_slot(&b, PXI_ROLE_INPUT, "image", 4, 4);
        int sal = pxvm_build_slot(&b, PXI_ROLE_OUTPUT, "sal", 2, 2);
        int atlas = pxvm_build_slot(&b, PXI_ROLE_OUTPUT, "atlas", 2, 2);
        memset(f, 0, sizeof f);
        if (bad[i].op == PX_OP_SAMPLE) {
            f[PX_FI(SAMPLE, src)] = in, f[PX_FI(SAMPLE, dst)] = atlas, f[PX_FI(SAMPLE, w)] = f[PX_FI(SAMPLE, h)] = 1;
        } else if (bad[i].op == PX_OP_ARGMAX) {
            f[PX_FI(ARGMAX, src)] = in, f[PX_FI(ARGMAX, space)] = in;
        } else {
            f[PX_FI(SALIENCY, src)] = in, f[PX_FI(SALIENCY, dst)] = sal, f[PX_FI(SALIENCY, surround)] = 2;
            f[PX_FI(SALIENCY, map)] = 1;
        }
        f[bad[i].field] = bad[i].value;
        pxvm_build_insn(&b, bad[i].op, f);
        pxvm_build_insn(&b, PX_OP_HALT, NULL);
        pxvm_error e = px_load_error(&b);
        if (e.cls != PXVM_INVALID || !strstr(e.msg, bad[i].msg))
            px_test_fail(__FILE__, __LINE__, "case %zu: '%s' lacks '%s'", i, e.msg, bad[i].msg);
    }
}

TEST(fixation_assembly_round_trip)
{
    const char *src = ".width 16\n"
                      ".slot image input 16x16\n"
                      ".slot sal output 4x4\n"
                      ".slot atlas output 8x8 patches=4x4x4\n"
                      "PYRAMID image\n"
                      "SALIENCY src=image dst=sal accumulate=0 centre=0 surround=3 map=2 shift=1 w_lum=1 w_rg=2 w_by=3\n"
                      "ARGMAX src=sal level=0 reg=0 w_r=1 w_g=0 w_b=0 w_a=0 space=image ior_first=0 ior_count=0 radius=0\n"
                      "ARGMAX src=sal level=0 reg=1 w_r=1 w_g=0 w_b=0 w_a=0 space=image ior_first=0 ior_count=1 radius=4\n"
                      "SAMPLE src=image dst=atlas mode=linear@f1 dst_x=0 dst_y=0 w=4 h=4 cu=0 cv=0 du=1 dv=1 lod=0\n"
                      "SAMPLE src=image dst=atlas mode=nearest@f7 dst_x=4 dst_y=0 w=4 h=4 cu=-2.5 cv=1 du=2 dv=2 lod=1\n"
                      "HALT\n";
    pxvm_image img, img2;
    pxvm_error err;
    pxvm_limits lim;
    pxvm_limits_default(&lim);
    if (pxasm_assemble(src, strlen(src), "fix.pxs", &lim, &img, &err) < 0) {
        px_test_fail(__FILE__, __LINE__, "%s", err.msg);
        return;
    }
    pxvm_program prog;
    CHECK(pxvm_program_from_copy(&img, &lim, &prog, &err) == 0);
    CHECK_EQ(PX_ARG(&prog.insns[4], SAMPLE, mode), PX_MODE_REL(PX_MODE_LINEAR, 1));
    CHECK_EQ(PX_ARG(&prog.insns[5], SAMPLE, mode), PX_MODE_REL(PX_MODE_NEAREST, 7));
    CHECK(prog.uses_fixation && prog.writes_fixation);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    pxasm_disassemble(&prog, "fix.pxi", f);
    fclose(f);
    CHECK_STR(text, "mode=nearest@f7");
    CHECK_STR(text, "ior_count=1 radius=4");
    CHECK(pxasm_assemble(text, len, "round.pxs", &lim, &img2, &err) == 0);
    CHECK(img.w == img2.w && img.h == img2.h && !memcmp(img.px, img2.px, (size_t)img.w * (size_t)img.h * 4u));
    free(text);
    pxvm_program_free(&prog);
    pxvm_image_free(&img), pxvm_image_free(&img2);
}

/* A scanpath plan's atlas is fixation-major (assembler/README.md: "the atlas holds K x tokens,
 * fixation by fixation"): token t = k * N + i is token i of the plan around fixation k, so tokens
 * 0 .. N-1 are fixation 0's, N .. 2N-1 fixation 1's. Checked on the instructions (token t samples
 * relative to register t div N) and on the geometry after a run (token t's centre minus fixation
 * t div N is token t mod N's offset, the same for every fixation). */
TEST(fixation_scanpath_atlas_is_fixation_major)
{
    const char *plan = "{\"image\": [64, 48], \"budget\": 12, \"scheme\": \"logpolar\", \"scanpath\": 3}";
    pxvm_image img;
    pxvm_error err;
    pxvm_limits lim;
    pxvm_limits_default(&lim);
    pxvm_program prog;
    CHECK(pxvm_plan_image(plan, strlen(plan), "scan.json", 0, &img, &err) == 0);
    CHECK(pxvm_program_from_image(&img, &lim, &prog, &err) == 0);
    int atlas = pxvm_slot_lookup(&prog, "atlas"), K = 3;
    if (atlas < 0)
        return;
    int n = prog.slots[atlas].patch_count / K;
    CHECK(n > 1 && n * K == prog.slots[atlas].patch_count);
    int seen = 0;
    for (uint32_t i = 0; i < prog.ninsns; i++) {
        int t = prog.insn_token[i];
        if (t < 0)
            continue;
        seen++;
        t -= prog.geom_base[atlas];
        CHECK_EQ(px_mode_reg(prog.insns[i].a[PX_FI(SAMPLE, mode)]), t / n);
    }
    CHECK_EQ(seen, n * K);
    /* a run on a picture with three bright spots: three distinct fixations */
    pxvm_image pic;
    pxvm_image_alloc(&pic, 64, 48, NULL);
    for (size_t k = 0; k < 64u * 48u; k++)
        pic.px[4 * k + 3] = 255;
    const int spot[3][2] = {{10, 10}, {50, 12}, {30, 38}};
    for (int s = 0; s < 3; s++)
        for (int y = spot[s][1] - 2; y < spot[s][1] + 2; y++)
            for (int x = spot[s][0] - 2; x < spot[s][0] + 2; x++)
                px_set(&pic, x, y, 0xFF0000FFu | (uint32_t)(255 - 40 * s) << 8);
    pxvm_executor *ex;
    pxvm_run_options ro = {.max_steps = lim.max_steps};
    int32_t fix[PX_FIX_REGS * 2];
    int32_t *g = calloc((size_t)(n * K) * PX_GEOM_INTS, sizeof(int32_t));
    CHECK(pxvm_cpu_executor.open(&ex, NULL, &err) == 0 && pxvm_cpu_executor.load(ex, &prog, 1, &err) == 0);
    CHECK(pxvm_bind_image(&pxvm_cpu_executor, ex, pxvm_slot_lookup(&prog, "image"), &pic, &err) == 0);
    CHECK(pxvm_cpu_executor.run(ex, &ro, &err) == 0);
    CHECK(pxvm_cpu_executor.read_state(ex, PXVM_STATE_FIXATIONS, 0, 0, 1, fix, -1, &err) == 0);
    CHECK(pxvm_cpu_executor.read_state(ex, PXVM_STATE_GEOMETRY, atlas, 0, 1, g, -1, &err) == 0);
    CHECK(fix[0] != fix[2] || fix[1] != fix[3]); /* the fixations differ: the layouts are told apart */
    CHECK(fix[2] != fix[4] || fix[3] != fix[5]);
    for (int t = 0; t < n * K; t++) {
        int k = t / n, i = t % n;
        CHECK_EQ(g[t * PX_GEOM_INTS] - fix[2 * k], g[i * PX_GEOM_INTS] - fix[0]);
        CHECK_EQ(g[t * PX_GEOM_INTS + 1] - fix[2 * k + 1], g[i * PX_GEOM_INTS + 1] - fix[1]);
        for (int e = 2; e < PX_GEOM_INTS; e++)
            CHECK_EQ(g[t * PX_GEOM_INTS + e], g[i * PX_GEOM_INTS + e]);
    }
    free(g);
    pxvm_image_free(&pic);
    pxvm_cpu_executor.close(ex);
    pxvm_program_free(&prog);
}

/* SPEC 6: a GATHER's token takes the position and LOD of its centre entry, (w div 2, h div 2) of
 * its table region (for an even size the one right of and below the middle), plus the register;
 * the LOD used is that entry's, clamped (linear) or rounded half up and clamped (nearest). */
TEST(fixation_gather_token_is_its_centre_entry)
{
    static const struct {
        int w, h, mode;
        int32_t lod, want_lod;
    } cases[] = {
        {3, 3, PX_MODE_REL(PX_MODE_LINEAR, 2), 9 * 256 + 10, 4 * 256}, /* 16x16: levels 0..4 */
        {4, 2, PX_MODE_REL(PX_MODE_NEAREST, 2), 256 + 128, 2 * 256},   /* centre entry (2, 1) */
        {1, 1, PX_MODE_LINEAR, 3 * 256 + 7, 3 * 256 + 7},              /* absolute: no register */
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        int w = cases[k].w, h = cases[k].h;
        pxvm_builder b;
        pxvm_build_init(&b, 16);
        pxvm_build_slot(&b, PXI_ROLE_INPUT, "image", 16, 16);
        int atlas = pxvm_build_slot(&b, PXI_ROLE_OUTPUT, "atlas", w, h);
        pxvm_build_patches(&b, atlas, w, h, 1);
        pxvm_image t;
        pxvm_image_alloc(&t, 3 * w, h, NULL);
        for (int j = 0; j < h; j++)
            for (int i = 0; i < w; i++) { /* entry (i, j): u = 100i + j + 1/2, v = -(10j + i), LOD i + j */
                uint8_t *e = t.px + ((size_t)j * (size_t)t.w + 3u * (size_t)i) * 4u;
                pxi_write_le(e, 0, 0, 4, (uint32_t)((100 * i + j) * ONE + HALF));
                pxi_write_le(e, 1, 0, 4, (uint32_t)(-(10 * j + i) * ONE));
                pxi_write_le(e, 2, 0, 4, (uint32_t)((i + j) * 256));
            }
        uint8_t *c = t.px + ((size_t)(h / 2) * (size_t)t.w + 3u * (size_t)(w / 2)) * 4u;
        pxi_write_le(c, 2, 0, 4, (uint32_t)cases[k].lod); /* the centre entry's LOD */
        int tab = pxvm_build_data_slot(&b, "tab", &t);
        pxvm_image_free(&t);
        int32_t f[PXI_MAX_FIELDS] = {0};
        f[PX_FI(GATHER, src)] = 1, f[PX_FI(GATHER, dst)] = atlas, f[PX_FI(GATHER, mode)] = cases[k].mode;
        f[PX_FI(GATHER, w)] = w, f[PX_FI(GATHER, h)] = h, f[PX_FI(GATHER, table)] = tab;
        pxvm_build_insn(&b, PX_OP_GATHER, f);
        pxvm_build_insn(&b, PX_OP_HALT, NULL);
        pxvm_image img, in;
        pxvm_error err;
        pxvm_limits lim;
        pxvm_limits_default(&lim);
        pxvm_program prog;
        pxvm_executor *ex;
        pxvm_run_options ro = {.max_steps = 100};
        CHECK(pxvm_build_finish(&b, &img, &err) == 0);
        pxvm_build_free(&b);
        pxvm_image_alloc(&in, 16, 16, NULL);
        int32_t fix[PX_FIX_REGS * 2] = {0}, g[PX_GEOM_INTS];
        fix[4] = 7 * ONE, fix[5] = -3 * ONE; /* register 2 */
        CHECK(pxvm_program_from_image(&img, &lim, &prog, &err) == 0);
        CHECK(pxvm_cpu_executor.open(&ex, NULL, &err) == 0 && pxvm_cpu_executor.load(ex, &prog, 1, &err) == 0);
        CHECK(pxvm_bind_image(&pxvm_cpu_executor, ex, 1, &in, &err) == 0);
        CHECK(pxvm_cpu_executor.set_fixations(ex, 0, 1, 0, PX_FIX_REGS, fix, -1, &err) == 0);
        CHECK(pxvm_cpu_executor.run(ex, &ro, &err) == 0);
        CHECK(pxvm_cpu_executor.read_state(ex, PXVM_STATE_GEOMETRY, atlas, 0, 1, g, -1, &err) == 0);
        int rel = px_mode_reg(cases[k].mode) >= 0, ci = w / 2, cj = h / 2;
        CHECK_EQ(g[0], (100 * ci + cj) * ONE + HALF + (rel ? 7 * ONE : 0));
        CHECK_EQ(g[1], -(10 * cj + ci) * ONE + (rel ? -3 * ONE : 0));
        CHECK_EQ(g[2], 0);
        CHECK_EQ(g[3], 0);
        CHECK_EQ(g[4], cases[k].want_lod);
        pxvm_cpu_executor.close(ex);
        pxvm_program_free(&prog);
        pxvm_image_free(&in);
    }
}

/* ---- fixations from the host (SPEC 6): one unit and one conversion in every front door ---------- */

/* The conversion: floor(n * W * 65536 + 0.5) in IEEE double, one operation at a time: not llround
 * (which differs where the + 0.5 rounds up) nor a round half to even (numpy, torch). */
TEST(fixation_host_conversion_is_floor_of_n_times_w_times_65536_plus_half)
{
    CHECK_EQ(pxvm_fixation_q16(0.5, 451), 14778368);     /* 225.5 texels */
    CHECK_EQ(pxvm_fixation_q16(0.5, 300), 9830400);      /* 150 */
    CHECK_EQ(pxvm_fixation_q16(0.1, 451), 2955674);      /* 45.1 texels: 2955673.6 */
    CHECK_EQ(pxvm_fixation_q16(0.1, 1024), 6710886);     /* 102.4: 6710886.4 */
    CHECK_EQ(pxvm_fixation_q16(0.7, 300), 13762560);     /* 0.7 * 300 is 210.0 in doubles */
    CHECK_EQ(pxvm_fixation_q16(1.0, 451), 451 * 65536);  /* the bottom-right corner */
    CHECK_EQ(pxvm_fixation_q16(0.0, 451), 0);
    CHECK_EQ(pxvm_fixation_q16(100.5, 1), 6586368);      /* texels: the same with side 1 */
    /* a tie: 24689 / 2^26 of 512 texels is 12344.5 / 65536 texels exactly: rounds up, to 12345
     * (half to even would give 12344) */
    double tie = 24689.0 / 67108864.0;
    CHECK(tie * 512 * 65536 == 12344.5);
    CHECK_EQ(pxvm_fixation_q16(tie, 512), 12345);
    /* just below a half: n * W * 65536 = 0.5 - 2^-54, whose + 0.5 rounds to 1.0 in doubles, so
     * the register is 1 where llround would give 0: the rule is the formula, as written */
    double below = ldexp(1, -26) - ldexp(1, -79); /* the double just below 2^-26 */
    CHECK(below * 512 * 65536 == 0.5 - ldexp(1, -54));
    CHECK_EQ(pxvm_fixation_q16(below, 512), 1);
    CHECK_EQ(llround(below * 512 * 65536), 0);
}

static int px__assemble(const char *src, pxvm_program *prog)
{
    pxvm_image img;
    pxvm_error err;
    pxvm_limits lim;
    pxvm_limits_default(&lim);
    if (pxasm_assemble(src, strlen(src), "fix.pxs", &lim, &img, &err) < 0 ||
        pxvm_program_from_image(&img, &lim, prog, &err) < 0) {
        px_test_fail(__FILE__, __LINE__, "%s", err.msg);
        return -1;
    }
    return 0;
}

#define PX__HEAD ".width 16\n.slot image input 64x32\n.slot sal output 8x4\n.slot atlas output 8x8 patches=4x4x4\nPYRAMID image\n"
#define PX__SAMPLE(reg, x) "SAMPLE src=image dst=atlas mode=linear@f" #reg " dst_x=" #x " dst_y=0 w=4 h=4 cu=0 cv=0 du=1 dv=1 lod=0\n"
#define PX__ARGMAX(reg, first, count) "ARGMAX src=sal level=0 reg=" #reg " w_r=1 w_g=0 w_b=0 w_a=0 space=image ior_first=" #first " ior_count=" #count " radius=4\n"

/* Input registers: read before an ARGMAX writes them, in program order up to the first HALT. */
TEST(fixation_input_registers_are_read_before_written)
{
    static const struct {
        const char *code;
        unsigned inputs;
    } cases[] = {
        {PX__SAMPLE(0, 0), 1u},                                                   /* a relative plan */
        {PX__SAMPLE(0, 0) PX__SAMPLE(3, 4), 9u},                                  /* registers 0 and 3 */
        {"SAMPLE src=image dst=atlas mode=linear dst_x=0 dst_y=0 w=4 h=4 cu=0 cv=0 du=1 dv=1 lod=0\n", 0u}, /* absolute */
        {PX__ARGMAX(0, 0, 0) PX__ARGMAX(1, 0, 1) PX__SAMPLE(0, 0) PX__SAMPLE(1, 4), 0u}, /* a scanpath */
        {PX__ARGMAX(1, 0, 1) PX__SAMPLE(1, 0), 1u},          /* ARGMAX inhibited by register 0, never written */
        {PX__ARGMAX(0, 0, 1) PX__SAMPLE(0, 0), 1u},          /* ARGMAX reads its own register before writing it */
        {PX__ARGMAX(0, 0, 0) PX__SAMPLE(0, 0) PX__SAMPLE(2, 4), 4u}, /* register 2 is still read unwritten */
        {PX__SAMPLE(5, 0) PX__ARGMAX(5, 0, 0), 32u},         /* read, then written: an input */
        {"HALT\n" PX__SAMPLE(0, 0), 0u},                     /* after the first HALT: never runs */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char src[2048];
        snprintf(src, sizeof src, "%s%sHALT\n", PX__HEAD, cases[i].code);
        pxvm_program prog;
        if (px__assemble(src, &prog) < 0)
            continue;
        unsigned got = pxvm_fixation_inputs(&prog, NULL);
        if (got != cases[i].inputs)
            px_test_fail(__FILE__, __LINE__, "case %zu: inputs 0x%x, not 0x%x", i, got, cases[i].inputs);
        pxvm_program_free(&prog);
    }
    /* the public call on a handle */
    pxvm_prog *h = NULL;
    CHECK(pxvm_prog_assemble(PX__HEAD PX__SAMPLE(0, 0) PX__SAMPLE(3, 4) "HALT\n", "two.pxs", NULL, &h) == 0);
    CHECK_EQ(pxvm_prog_fixation_inputs(h), 9);
    pxvm_prog_free(h);
}

/* One atlas token's geometry centre after a run of `run`, item `item`. */
static void px__centre(pxvm_runner *run, const pxvm_prog *prog, int item, int32_t c[2])
{
    int32_t g[4 * PXVM_GEOM_INTS] = {0};
    CHECK(pxvm_runner_read_geometry(run, pxvm_prog_slot_find(prog, "atlas"), item, 1, g, -1) == 0);
    c[0] = g[0], c[1] = g[1];
}

/* The C API: normalized fixations by default (pxvm_runner_set_fixations_normalized), Q16 texels
 * through pxvm_runner_set_fixations; ranges, registers and unset input registers refused. */
TEST(fixation_c_api_normalized_door_checks_and_unset_registers)
{
    const char *src = ".width 16\n.slot image input 451x300\n.slot atlas output 4x4 patches=4x4x1\nPYRAMID image\n"
                      "SAMPLE src=image dst=atlas mode=linear@f0 dst_x=0 dst_y=0 w=4 h=4 cu=0 cv=0 du=1 dv=1 lod=0\nHALT\n";
    pxvm_prog *prog = NULL;
    pxvm_runner *run = NULL;
    if (pxvm_prog_assemble(src, "rel.pxs", NULL, &prog) || pxvm_runner_open(prog, "cpu", 0, 1, 2, &run)) {
        px_test_fail(__FILE__, __LINE__, "%s", pxvm_errmsg());
        pxvm_prog_free(prog);
        return;
    }
    uint8_t *px = calloc(451 * 300 * 4 * 2, 1);
    pxvm_view in = {px, -1, 2, 451, 300, 4, 451 * 300 * 4, 451 * 4, 4, 1};
    CHECK(pxvm_runner_bind(run, 1, 0, &in) == 0);
    /* no fixation: unlinkable, naming the program, the register and the instruction's pixel */
    CHECK_EQ(pxvm_runner_run(run), PXVM_UNLINKABLE);
    CHECK_STR(pxvm_errmsg(), "unlinkable: pixel (");
    CHECK_STR(pxvm_errmsg(), "program 'rel.pxs' samples relative to fixation register 0, which is not set for batch "
                             "item 0: give a fixation");
    /* item 0 set, item 1 not: still unlinkable, for item 1 */
    const double half[2] = {0.5, 0.5};
    CHECK(pxvm_runner_set_fixations_normalized(run, 0, 1, 0, 1, half) == 0);
    CHECK_EQ(pxvm_runner_run(run), PXVM_UNLINKABLE);
    CHECK_STR(pxvm_errmsg(), "not set for batch item 1");
    /* out of range, NaN: usage errors naming the value; nothing set (item 1 stays unset) */
    const double bad[4][2] = {{0.5, 0.5}, {1.5, 0.5}};
    CHECK_EQ(pxvm_runner_set_fixations_normalized(run, 0, 2, 0, 1, &bad[0][0]), PXVM_USAGE);
    CHECK_STR(pxvm_errmsg(), "fixation (item 1, register 0): x = 1.5 is not in [0, 1] (normalized coordinates of input "
                             "slot 'image', 451x300)");
    const double nan2[2] = {0.5, NAN};
    CHECK_EQ(pxvm_runner_set_fixations_normalized(run, 1, 1, 0, 1, nan2), PXVM_USAGE);
    CHECK_STR(pxvm_errmsg(), "y = nan is not in [0, 1]");
    CHECK_EQ(pxvm_runner_run(run), PXVM_UNLINKABLE);
    /* a register the program does not read: usage */
    const double two[4] = {0.5, 0.5, 0.5, 0.5};
    CHECK_EQ(pxvm_runner_set_fixations_normalized(run, 1, 1, 0, 2, two), PXVM_USAGE);
    CHECK_STR(pxvm_errmsg(), "program 'rel.pxs' takes no fixation in register 1 (its input register: 0)");
    /* the texel door: Q16, in the image */
    const int32_t q_bad[2] = {-1, 0}, q_edge[2] = {451 * 65536, 300 * 65536 + 1};
    CHECK_EQ(pxvm_runner_set_fixations(run, 1, 1, 0, 1, q_bad, -1), PXVM_USAGE);
    CHECK_STR(pxvm_errmsg(), "x = -1 (Q16");
    CHECK_EQ(pxvm_runner_set_fixations(run, 1, 1, 0, 1, q_edge, -1), PXVM_USAGE);
    CHECK_STR(pxvm_errmsg(), "y = 19660801 (Q16");
    const int32_t q[2] = {100 * 65536 + 32768, 7 * 65536};
    CHECK(pxvm_runner_set_fixations(run, 1, 1, 0, 1, q, -1) == 0);
    CHECK(pxvm_runner_run(run) == 0);
    int32_t c[2];
    px__centre(run, prog, 0, c); /* (0.5, 0.5) of 451x300 */
    CHECK_EQ(c[0], 14778368);
    CHECK_EQ(c[1], 9830400);
    px__centre(run, prog, 1, c);
    CHECK_EQ(c[0], q[0]);
    CHECK_EQ(c[1], q[1]);
    /* 0.1 of 451 texels: 2955673.6 rounds up */
    const double tenth[2] = {0.1, 0.7};
    CHECK(pxvm_runner_set_fixations_normalized(run, 1, 1, 0, 1, tenth) == 0);
    CHECK(pxvm_runner_run(run) == 0);
    px__centre(run, prog, 1, c);
    CHECK_EQ(c[0], 2955674);
    CHECK_EQ(c[1], 13762560);
    /* a restart keeps what was set */
    CHECK(pxvm_runner_restart(run) == 0);
    CHECK(pxvm_runner_run(run) == 0);
    pxvm_runner_close(run);
    /* a program that takes no fixations refuses them, in either unit */
    pxvm_prog *abs_prog = NULL;
    CHECK(pxvm_prog_load("programs/foveate273.pxi", NULL, &abs_prog) == 0);
    if (abs_prog && pxvm_runner_open(abs_prog, "cpu", 0, 1, 1, &run) == 0) {
        CHECK_EQ(pxvm_runner_set_fixations_normalized(run, 0, 1, 0, 1, half), PXVM_USAGE);
        CHECK_STR(pxvm_errmsg(), "program 'programs/foveate273.pxi' takes no fixations: it samples no position relative "
                                 "to a fixation register");
        CHECK_EQ(pxvm_runner_set_fixations(run, 0, 1, 0, 1, q, -1), PXVM_USAGE);
        pxvm_runner_close(run);
    }
    pxvm_prog_free(abs_prog);
    free(px);
    pxvm_prog_free(prog);
}

/* A rounding tie through the C door: 24689 / 2^26 of a 512-texel side is 12344.5 / 65536
 * texels: register 12345. */
TEST(fixation_c_api_tie_rounds_up)
{
    const char *src = ".width 16\n.slot image input 512x300\n.slot atlas output 4x4 patches=4x4x1\nPYRAMID image\n"
                      "SAMPLE src=image dst=atlas mode=linear@f0 dst_x=0 dst_y=0 w=4 h=4 cu=0 cv=0 du=1 dv=1 lod=0\nHALT\n";
    pxvm_prog *prog = NULL;
    pxvm_runner *run = NULL;
    if (pxvm_prog_assemble(src, "tie.pxs", NULL, &prog) || pxvm_runner_open(prog, "cpu", 0, 1, 1, &run)) {
        px_test_fail(__FILE__, __LINE__, "%s", pxvm_errmsg());
        pxvm_prog_free(prog);
        return;
    }
    uint8_t *px = calloc(512 * 300 * 4, 1);
    pxvm_view in = pxvm_view_host(px, 512, 300, 4);
    const double tie[2] = {24689.0 / 67108864.0, 0.5};
    int32_t c[2];
    CHECK(pxvm_runner_bind(run, 1, 0, &in) == 0);
    CHECK(pxvm_runner_set_fixations_normalized(run, 0, 1, 0, 1, tie) == 0);
    CHECK(pxvm_runner_run(run) == 0);
    px__centre(run, prog, 0, c);
    CHECK_EQ(c[0], 12345);
    CHECK_EQ(c[1], 150 * 65536);
    pxvm_runner_close(run);
    pxvm_prog_free(prog);
    free(px);
}
