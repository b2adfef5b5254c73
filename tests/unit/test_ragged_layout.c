/* test_ragged_layout.c - the token order and frames of ragged batches (pxvm_ragged merge and
 * temporal; vm/ragged_index.h, isa/SPEC.md section 10), the transformers 4.x float rule
 * (pxvm_token_format rule; section 9) and the crop policy's geometry (vm/policy.c
 * px_policy_geometry), each against an independent transcription:
 *   order   px_ragged_token against Qwen2-VL's reshape (gh/m, m, gw/m, m) -> transpose, written
 *           as the loops that enumerate it; px_ragged_value against the (C, T, p, p) and
 *           (T, p, p, C) nestings;
 *   batch   a CPU ragged batch with merge and temporal == the single-frame row-major tiles of
 *           each image moved by those loops, RGBA8 and float tokens in every layout;
 *   rule    the table of both rules against NumPy's bits at the first byte where they differ;
 *   crop    the window and offsets of transformers' center_crop at its edges. */
#include <stdlib.h>
#include <string.h>

#include "../../include/pxvm.h"
#include "../../vm/ragged_index.h"
#include "../../vm/resize.h"
#include "../../vm/tokens.h"
#include "test.h"

/* Qwen2-VL's order as the loops of its transpose (0, 3, 6, 4, 7, ...): windows (wy, wx)
 * row-major, then (iy, ix) inside; order[k] = the row-major tile index of token k. */
static void px__qwen_order(int gh, int gw, int m, int *order)
{
    int k = 0;
    for (int wy = 0; wy < gh / m; wy++)
        for (int wx = 0; wx < gw / m; wx++)
            for (int iy = 0; iy < m; iy++)
                for (int ix = 0; ix < m; ix++)
                    order[k++] = (wy * m + iy) * gw + wx * m + ix;
}

TEST(ragged_layout_token_order_is_qwen2vl_reshape_transpose)
{
    int order[36 * 36];
    for (int m = 1; m <= 4; m++)
        for (int gh = m; gh <= 12; gh += m)
            for (int gw = m; gw <= 12; gw += m) {
                px__qwen_order(gh, gw, m, order);
                for (int k = 0; k < gh * gw; k++) {
                    int tx = order[k] % gw, ty = order[k] / gw;
                    if (px_ragged_token(tx, ty, gw, m) != k) {
                        px_test_fail(__FILE__, __LINE__, "merge %d, grid %dx%d: tile (%d, %d) is token %lld, not %d", m,
                                     gw, gh, tx, ty, (long long)px_ragged_token(tx, ty, gw, m), k);
                        return;
                    }
                }
            }
    CHECK_EQ(px_ragged_token(5, 3, 7, 0), 26); /* 0 and 1: row-major */
    CHECK_EQ(px_ragged_token(5, 3, 7, 1), 26);
}

TEST(ragged_layout_value_offsets_are_the_nestings)
{
    for (int T = 1; T <= 3; T++)
        for (int C = 3; C <= 4; C++) {
            const int p = 3;
            size_t n = 0, bad = 0;
            for (int c = 0; c < C; c++) /* [C][T][p][p] */
                for (int f = 0; f < T; f++)
                    for (int r = 0; r < p; r++)
                        for (int q = 0; q < p; q++)
                            bad += px_ragged_value(c, f, q, r, p, T, C, 1) != n++;
            n = 0;
            for (int f = 0; f < T; f++) /* [T][p][p][C] */
                for (int r = 0; r < p; r++)
                    for (int q = 0; q < p; q++)
                        for (int c = 0; c < C; c++)
                            bad += px_ragged_value(c, f, q, r, p, T, C, 0) != n++;
            CHECK_EQ(bad, 0);
        }
}

static pxvm_runner *px__cpu(pxvm_prog **prog)
{
    pxvm_runner *run = NULL;
    *prog = NULL;
    if (pxvm_prog_from_plan("{\"image\": [8, 8], \"scheme\": \"uniform\", \"patch\": 4}", "layout.json", NULL, prog) ||
        pxvm_runner_open(*prog, "cpu", 0, 0, 1, &run)) {
        px_test_fail(__FILE__, __LINE__, "%s", pxvm_errmsg());
        pxvm_prog_free(*prog);
        return NULL;
    }
    return run;
}

/* A batch of 4 RGB images (2 items of 2 frames), stretched to 16x8 (4x2 tiles of 4), merge 2,
 * temporal 2, equals the single-frame row-major tiles moved token by token and frame by frame;
 * RGBA8 and every layout of float32 tokens. */
TEST(ragged_layout_merge_and_temporal_move_the_single_frame_tiles)
{
    pxvm_prog *prog;
    pxvm_runner *run = px__cpu(&prog);
    if (!run)
        return;
    enum { N = 4, P = 4, W = 16, H = 8, G = (W / P) * (H / P), T = 2 };
    static uint8_t px[N][13 * 11 * 3];
    pxvm_view v[N];
    uint64_t s = 41;
    for (int i = 0; i < N; i++) {
        for (size_t k = 0; k < sizeof px[i]; k++)
            s = s * 6364136223846793005ull + 1442695040888963407ull, px[i][k] = (uint8_t)(s >> 56);
        v[i] = pxvm_view_host(px[i], 13 - i, 11, 3); /* other sizes, one canvas */
        v[i].row_stride = 13 * 3;
    }
    int order[G];
    px__qwen_order(H / P, W / P, 2, order);
    for (int form = -1; form < 3; form++) { /* RGBA8, then nchw, nhwc, flat */
        pxvm_token_format f;
        pxvm_token_format_preset("imagenet", &f);
        f.layout = form < 0 ? 0 : form;
        int C = form < 0 ? 4 : 3;
        size_t esz = form < 0 ? 1 : 4, tile = (size_t)P * P * (size_t)C * esz, bytes = (size_t)N * G * tile;
        uint8_t *one = malloc(bytes), *got = malloc(bytes);
        pxvm_ragged a = {"stretch:bilinear", P, W, H, form < 0 ? NULL : &f, one, -1, bytes, 0, 0, 0};
        pxvm_ragged b = {"stretch:bilinear", P, W, H, form < 0 ? NULL : &f, got, -1, bytes, 0, 2, T};
        CHECK_EQ(pxvm_runner_ragged(run, N, v, &a), 0);
        CHECK_EQ(pxvm_runner_ragged(run, N, v, &b), 0);
        int planar = form == PXVM_TOKENS_NCHW || form == PXVM_TOKENS_FLAT;
        size_t bad = 0;
        for (int i = 0; i < N; i++) /* image i: item i / T, frame i % T */
            for (int k = 0; k < G; k++)
                for (int c = 0; c < C; c++)
                    for (int r = 0; r < P; r++)
                        for (int q = 0; q < P; q++) {
                            const uint8_t *from = one + ((size_t)i * G + (size_t)order[k]) * tile +
                                                  esz * (planar ? ((size_t)c * P + r) * P + q : ((size_t)r * P + q) * C + c);
                            size_t at = planar ? (((size_t)c * T + (size_t)(i % T)) * P + r) * P + q
                                               : ((((size_t)(i % T) * P) + r) * P + q) * C + c;
                            const uint8_t *to = got + ((size_t)(i / T) * G + (size_t)k) * tile * T + esz * at;
                            bad += memcmp(from, to, esz) != 0;
                        }
        if (bad)
            px_test_fail(__FILE__, __LINE__, "form %d: %zu values moved wrong", form, bad);
        free(one), free(got);
    }
    pxvm_runner_close(run);
    pxvm_prog_free(prog);
}

/* The two float rules at their edge: clip, channel 0, byte 47 gives the same bits by both, byte
 * 48 the first that differs; the bits are NumPy's: np.float32(u) * np.float32(1/255) (rule 0) and
 * np.float32(np.float64(u) * (1/255)) (rule 1), then (x - np.float32(0.48145466)) /
 * np.float32(0.26862954). Presets are rule 0. */
TEST(ragged_layout_transformers4_rule_edge_against_numpy)
{
    pxvm_token_format f;
    pxvm_token_table t0, t1;
    pxvm_error err;
    CHECK_EQ(pxvm_token_format_preset("clip", &f), 0);
    CHECK_EQ(f.rule, PXVM_TOKENS_RULE_FLOAT32);
    CHECK_EQ(pxvm_token_table_build(&f, &t0, &err), 0);
    f.rule = PXVM_TOKENS_RULE_RESCALE_FLOAT64;
    CHECK_EQ(pxvm_token_table_build(&f, &t1, &err), 0);
    CHECK_EQ(t0.value[0][47], 0xBF8D95E2u);
    CHECK_EQ(t1.value[0][47], 0xBF8D95E2u);
    CHECK_EQ(t0.value[0][48], 0xBF8BB784u);
    CHECK_EQ(t1.value[0][48], 0xBF8BB785u);
    int first = -1;
    for (int u = 0; u < 256 && first < 0; u++)
        if (t0.value[0][u] != t1.value[0][u])
            first = u;
    CHECK_EQ(first, 48);
    f.rule = 2;
    CHECK_EQ(pxvm_token_table_build(&f, &t1, &err), -1);
    CHECK_STR(err.msg, "rule 2 is none of");
}

/* transformers' center_crop at its edges: the floor of an odd difference, the short side equal
 * to S (the image kept), S under the crop (zeros centred at ceil((crop - side) / 2)). */
TEST(ragged_layout_crop_geometry_edges)
{
    static const struct {
        int sw, sh, w, h, S;
        int rw, rh, sx, sy, cx, cy, cw, ch;
    } cases[] = {
        {300, 224, 224, 224, 0, 300, 224, 38, 0, 0, 0, 224, 224},   /* short == S: kept, (300-224)//2 = 38 */
        {301, 224, 224, 224, 0, 301, 224, 38, 0, 0, 0, 224, 224},   /* 77 // 2 = 38 */
        {302, 225, 224, 224, 0, 300, 224, 38, 0, 0, 0, 224, 224},   /* int(224*302/225) = 300 */
        {300, 200, 224, 224, 150, 225, 150, 0, 0, 0, 37, 224, 150}, /* rows short: pad at ceil(74/2) = 37 */
        {300, 200, 224, 223, 150, 225, 150, 0, 0, 0, 37, 224, 150}, /* 73: ceil = 37 = -floor(-73/2) */
        {200, 300, 225, 224, 150, 150, 225, 0, 0, 38, 0, 150, 224}, /* columns short: 75 -> 38, rows cut 0 */
        {200, 300, 224, 224, 100, 100, 150, 0, 0, 62, 37, 100, 150}, /* both short */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        px_policy p;
        pxvm_error err;
        px_policy_geom g;
        char text[40];
        snprintf(text, sizeof text, cases[i].S ? "crop:short=%d" : "crop", cases[i].S);
        CHECK_EQ(px_policy_parse(text, &p, &err), 0);
        CHECK_EQ(px_policy_geometry(&p, cases[i].sw, cases[i].sh, cases[i].w, cases[i].h, &g, &err), 0);
        int got[8] = {g.rw, g.rh, g.sx, g.sy, g.cx, g.cy, g.cw, g.ch};
        int want[8] = {cases[i].rw, cases[i].rh, cases[i].sx, cases[i].sy, cases[i].cx, cases[i].cy, cases[i].cw, cases[i].ch};
        if (memcmp(got, want, sizeof got))
            px_test_fail(__FILE__, __LINE__, "case %zu: got %d %d %d %d %d %d %d %d", i, got[0], got[1], got[2], got[3],
                         got[4], got[5], got[6], got[7]);
    }
    /* the pad of a crop is (0, 0, 0, 255), the content the resize's */
    uint8_t rgb[5 * 3 * 3];
    memset(rgb, 200, sizeof rgb);
    uint8_t *out = NULL;
    CHECK_EQ(pxvm_image_fit_channels(rgb, 5, 3, 3, 6, 6, "crop:short=3", &out), 0); /* 5x3 -> 5x3 kept, rows 1..3 */
    if (out) {
        for (int y = 0; y < 6; y++)
            for (int x = 0; x < 6; x++) {
                const uint8_t *q = out + 4 * (y * 6 + x);
                int inside = x >= 1 && y >= 2 && y < 5; /* cx = ceil(1/2) = 1, cy = ceil(3/2) = 2 */
                uint32_t want = inside ? 0xFFC8C8C8u : 0xFF000000u;
                uint32_t have = (uint32_t)q[0] | (uint32_t)q[1] << 8 | (uint32_t)q[2] << 16 | (uint32_t)q[3] << 24;
                if (have != want)
                    px_test_fail(__FILE__, __LINE__, "(%d, %d): %08x, not %08x", x, y, have, want);
            }
        pxvm_free(out);
    }
}
