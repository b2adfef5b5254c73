/* test_tokens.c - tokens for models (isa/SPEC.md, "Tokens for models") through the public API:
 * the exact float16/bfloat16 roundings, the values against the rule computed here step by step,
 * the three layouts against the uint8 patches, alpha, batches, and every refusal [A-TOKENS-n]
 * at its edge (the last accepted and the first refused case, nothing written on refusal), with
 * the SPEC's IDs checked against this file's pairs (test_rules.c checks the M/V/U/T IDs; these
 * API usage rules are checked here, where their cases are). */
#include <float.h>
#include <math.h>
#include <stdlib.h>

#include "../../api/runner_hooks.h"
#include "../../vm/tokens.h"
#include "test.h"

/* ---- the roundings -------------------------------------------------------------------------- */

static uint32_t px__fbits(float v)
{
    uint32_t b;
    memcpy(&b, &v, 4);
    return b;
}

static double px__f16_value(uint16_t h)
{
    int e = (h >> 10) & 31, m = h & 1023;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(1024 + m, e - 25);
    return h & 0x8000 ? -v : v;
}

/* The nearest float16 to a finite float by search over the values (ties: even mantissa): the
 * rule, done another way. */
static uint16_t px__f16_slow(float f)
{
    double v = fabs((double)f);
    /* the first h whose value is >= v; 0x7C00 counts as 65536, the value after 65504 */
#define PX__VAL(h) ((h) == 0x7C00 ? 65536.0 : px__f16_value((uint16_t)(h)))
    int lo = 0, hi = 0x7C00;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (PX__VAL(mid) >= v)
            hi = mid;
        else
            lo = mid + 1;
    }
    int best = lo;
    if (lo > 0 && PX__VAL(lo) != v) {
        double below = v - PX__VAL(lo - 1), above = PX__VAL(lo) - v;
        best = below < above ? lo - 1 : below > above ? lo : ((lo - 1) & 1 ? lo : lo - 1);
    }
#undef PX__VAL
    return (uint16_t)(best | (signbit(f) ? 0x8000 : 0));
}

TEST(tokens_float16_rounds_to_nearest_even)
{
    /* every float16 value, the ties between neighbours, and the points just beside them */
    int bad = 0;
    for (uint32_t h = 0; h < 0x7C00 && bad < 5; h++) {
        float v = (float)px__f16_value((uint16_t)h), next = (float)px__f16_value((uint16_t)(h + 1));
        float mid = (float)(((double)v + (double)next) / 2), cases[5] = {v, mid, nextafterf(mid, 0), nextafterf(mid, INFINITY), -v};
        for (int k = 0; k < 5; k++)
            if (pxvm_f32_to_f16(px__fbits(cases[k])) != px__f16_slow(cases[k])) {
                px_test_fail(__FILE__, __LINE__, "f16(%a) = %04x, want %04x", (double)cases[k],
                             pxvm_f32_to_f16(px__fbits(cases[k])), px__f16_slow(cases[k]));
                bad++;
            }
    }
    CHECK_EQ(pxvm_f32_to_f16(px__fbits(65504.0f)), 0x7BFF);
    CHECK_EQ(pxvm_f32_to_f16(px__fbits(nextafterf(65520.0f, 0))), 0x7BFF);
    CHECK_EQ(pxvm_f32_to_f16(px__fbits(65520.0f)), 0x7C00); /* the tie goes to the even infinity */
    CHECK_EQ(pxvm_f32_to_f16(px__fbits(-INFINITY)), 0xFC00);
    CHECK_EQ(pxvm_f32_to_f16(px__fbits(ldexpf(1, -25))), 0x0000);                  /* tie with 0: even */
    CHECK_EQ(pxvm_f32_to_f16(px__fbits(nextafterf(ldexpf(1, -25), 1))), 0x0001);
    CHECK_EQ(pxvm_f32_to_f16(px__fbits(ldexpf(3, -25))), 0x0002); /* 1.5 units: tie, to even 2 */
    CHECK_EQ(pxvm_f32_to_f16(px__fbits(ldexpf(1023.5f, -24))), 0x0400); /* carry into the smallest normal */
    CHECK_EQ(pxvm_f32_to_f16(px__fbits(1e-30f)), 0x0000);
}

TEST(tokens_bfloat16_rounds_to_nearest_even)
{
    CHECK_EQ(pxvm_f32_to_bf16(0x3F808000u), 0x3F80); /* tie, even stays */
    CHECK_EQ(pxvm_f32_to_bf16(0x3F818000u), 0x3F82); /* tie, odd rounds up */
    CHECK_EQ(pxvm_f32_to_bf16(0x3F808001u), 0x3F81);
    CHECK_EQ(pxvm_f32_to_bf16(0x3F807FFFu), 0x3F80);
    CHECK_EQ(pxvm_f32_to_bf16(0x7F7FFFFFu), 0x7F80); /* FLT_MAX rounds to infinity */
    CHECK_EQ(pxvm_f32_to_bf16(0xBF800000u), 0xBF80);
    uint64_t st = 7;
    for (int i = 0; i < 100000; i++) { /* against the value: the nearer of the two neighbours */
        uint32_t f = (uint32_t)px_rand(&st) & 0xBF7FFFFFu; /* finite */
        float v;
        memcpy(&v, &f, 4);
        uint32_t lo = f & 0xFFFF0000u, hi = lo + 0x10000u;
        float flo, fhi;
        memcpy(&flo, &lo, 4);
        memcpy(&fhi, &hi, 4);
        double dl = fabs((double)v - flo), dh = fabs((double)fhi - v);
        uint16_t want = (uint16_t)((dl < dh || (dl == dh && !((lo >> 16) & 1))) ? lo >> 16 : hi >> 16);
        if (pxvm_f32_to_bf16(f) != want) {
            px_test_fail(__FILE__, __LINE__, "bf16(%08x) = %04x, want %04x", f, pxvm_f32_to_bf16(f), want);
            break;
        }
    }
}

/* ---- tokens of a run ------------------------------------------------------------------------ */

/* A 16x16 input sampled texel for texel into 5 patches of 4x4 in a 12x8 atlas (3 columns, the
 * sixth cell unused): the atlas's bytes are the input's, alpha included. */
static const char *px__src = ".width 16\n.slot image input 16x16\n.slot atlas output 12x8 patches=4x4x5\n"
                             "SAMPLE src=image dst=atlas mode=nearest dst_x=0 dst_y=0 w=4 h=4 cu=2 cv=2 du=1 dv=1 lod=0\n"
                             "SAMPLE src=image dst=atlas mode=nearest dst_x=4 dst_y=0 w=4 h=4 cu=6 cv=2 du=1 dv=1 lod=0\n"
                             "SAMPLE src=image dst=atlas mode=nearest dst_x=8 dst_y=0 w=4 h=4 cu=10 cv=2 du=1 dv=1 lod=0\n"
                             "SAMPLE src=image dst=atlas mode=nearest dst_x=0 dst_y=4 w=4 h=4 cu=2 cv=10 du=1 dv=1 lod=0\n"
                             "SAMPLE src=image dst=atlas mode=nearest dst_x=4 dst_y=4 w=4 h=4 cu=13 cv=13 du=1 dv=1 lod=0\n"
                             "HALT\n";
enum { PX_N = 5, PX_P = 4 };

typedef struct {
    pxvm_prog *prog;
    pxvm_runner *run;
    uint8_t patches[2][PX_N][PX_P][PX_P][4];
} px_tok;

/* Opens the program with a batch of 2 on the CPU, binds two random RGBA images (every byte value
 * occurs), runs, and reads the patches. */
static int px__tok_open(px_tok *k)
{
    memset(k, 0, sizeof *k);
    if (pxvm_prog_assemble(px__src, "tokens.pxs", NULL, &k->prog) || pxvm_runner_open(k->prog, "cpu", 0, 2, 2, &k->run))
        return -1;
    uint64_t st = 11;
    uint8_t img[2][16 * 16 * 4];
    for (size_t i = 0; i < sizeof img; i++)
        img[i / sizeof img[0]][i % sizeof img[0]] = (uint8_t)(i < 256 ? i : px_rand(&st)); /* 0..255 first */
    pxvm_view v = pxvm_view_host(img, 16, 16, 4);
    v.items = 2, v.item_stride = sizeof img[0];
    pxvm_view out = {k->patches, -1, 2, PX_P, PX_P * PX_N, 4, sizeof k->patches[0], PX_P * 4, 4, 1};
    int atlas = pxvm_prog_slot_find(k->prog, "atlas");
    if (pxvm_runner_bind(k->run, 1, 0, &v) || pxvm_runner_run(k->run) || pxvm_runner_read_patches(k->run, atlas, 0, &out))
        return -1;
    return atlas;
}

static void px__tok_close(px_tok *k)
{
    pxvm_runner_close(k->run);
    pxvm_prog_free(k->prog);
}

/* The rule, step by step here: y = fl32(fl32(fl32(u) * r) - m) / s, then the dtype's rounding. */
static uint32_t px__rule(const pxvm_token_format *f, int c, int u)
{
    float r = (float)f->rescale, m = c < f->nvalues ? (float)f->mean[c] : 0.0f, s = c < f->nvalues ? (float)f->std[c] : 1.0f;
    float x = (float)u;
    x = x * r;
    float d = x - m;
    float y = d / s;
    uint32_t b = px__fbits(y);
    return f->dtype == PXVM_TOKENS_FLOAT32 ? b : f->dtype == PXVM_TOKENS_FLOAT16 ? pxvm_f32_to_f16(b) : pxvm_f32_to_bf16(b);
}

TEST(tokens_every_preset_dtype_layout_and_alpha_follow_the_rule)
{
    px_tok k;
    int atlas = px__tok_open(&k);
    CHECK(atlas > 0);
    if (atlas <= 0) {
        printf("  %s\n", pxvm_errmsg());
        px__tok_close(&k);
        return;
    }
    const char *presets[] = {"clip", "siglip", "imagenet", "none"};
    static uint32_t out[2 * PX_N * 4 * PX_P * PX_P + 16];
    int checked = 0;
    for (int pr = 0; pr < 5; pr++)
        for (int dtype = 0; dtype < 3; dtype++)
            for (int layout = 0; layout < 3; layout++)
                for (int alpha = 0; alpha < 2; alpha++) {
                    pxvm_token_format f;
                    if (pr < 4) {
                        CHECK(pxvm_token_format_preset(presets[pr], &f) == 0);
                    } else { /* custom, alpha's own values when kept */
                        f = (pxvm_token_format){0, 0, 0, 3, 1.0 / 127.0, {0.1, -0.7, 3.0, 0.25}, {0.3, -2.0, 1e-3, 4.0}, 0};
                        f.nvalues = alpha ? 4 : 3;
                    }
                    f.dtype = dtype, f.layout = layout, f.alpha = alpha;
                    int C = 3 + alpha, elem = dtype ? 2 : 4;
                    memset(out, 0xA5, sizeof out);
                    if (pxvm_runner_read_tokens(k.run, atlas, 0, 2, &f, out, -1)) {
                        px_test_fail(__FILE__, __LINE__, "%s", pxvm_errmsg());
                        continue;
                    }
                    for (int it = 0; it < 2; it++)
                        for (int p = 0; p < PX_N; p++)
                            for (int y = 0; y < PX_P; y++)
                                for (int x = 0; x < PX_P; x++)
                                    for (int c = 0; c < C; c++) {
                                        size_t tok = (size_t)(it * PX_N + p) * (size_t)(C * PX_P * PX_P);
                                        size_t at = tok + (layout == PXVM_TOKENS_NHWC ? (size_t)((y * PX_P + x) * C + c)
                                                                                      : (size_t)((c * PX_P + y) * PX_P + x));
                                        uint32_t got = elem == 4 ? out[at] : ((uint16_t *)out)[at];
                                        uint32_t want = px__rule(&f, c, k.patches[it][p][y][x][c]);
                                        if (got != want && checked >= 0) {
                                            px_test_fail(__FILE__, __LINE__,
                                                         "preset %d dtype %d layout %d alpha %d item %d token %d (%d,%d) c%d: "
                                                         "%08x != %08x", pr, dtype, layout, alpha, it, p, x, y, c, got, want);
                                            checked = -1000000;
                                        }
                                        checked++;
                                    }
                    /* nothing past the end: 2 items of N * C * p * p values */
                    size_t end = (size_t)2 * PX_N * (size_t)C * PX_P * PX_P * (size_t)elem;
                    CHECK(((uint8_t *)out)[end] == 0xA5);
                }
    printf("  %d values checked\n", checked);
    /* one item from the middle of the batch: item 1 alone is item 1 of the pair */
    pxvm_token_format f;
    CHECK(pxvm_token_format_preset("clip", &f) == 0);
    static uint32_t both[2 * PX_N * 3 * PX_P * PX_P], one[PX_N * 3 * PX_P * PX_P];
    CHECK(pxvm_runner_read_tokens(k.run, atlas, 0, 2, &f, both, -1) == 0);
    CHECK(pxvm_runner_read_tokens(k.run, atlas, 1, 1, &f, one, -1) == 0);
    CHECK(!memcmp(one, both + PX_N * 3 * PX_P * PX_P, sizeof one));
    /* presets as stated */
    CHECK(f.rescale == 1.0 / 255.0 && f.mean[0] == 0.48145466 && f.std[2] == 0.27577711 && f.nvalues == 3);
    CHECK(px__fbits((float)f.rescale) == 0x3B808081u);
    px__tok_close(&k);
}

TEST(tokens_known_values)
{
    pxvm_token_format f;
    CHECK(pxvm_token_format_preset("siglip", &f) == 0);
    pxvm_token_table t;
    pxvm_error err;
    CHECK(pxvm_token_table_build(&f, &t, &err) == 0);
    CHECK_EQ(t.value[0][0], px__fbits(-1.0f)); /* (0 - 0.5) / 0.5 */
    CHECK_EQ(t.value[2][255], px__fbits(1.0f)); /* 255 * fl32(1/255) rounds to 1 */
    CHECK(pxvm_token_format_preset("none", &f) == 0);
    f.dtype = PXVM_TOKENS_BFLOAT16;
    CHECK(pxvm_token_table_build(&f, &t, &err) == 0);
    CHECK_EQ(t.value[1][255], 0x3F80); /* 1.0 */
    CHECK_EQ(t.value[1][0], 0x0000);
}

/* The CPU executor writes host memory only. */
TEST(tokens_cpu_refuses_device_memory)
{
    px_tok k;
    int atlas = px__tok_open(&k);
    pxvm_token_format f;
    CHECK(pxvm_token_format_preset("none", &f) == 0);
    uint8_t dst[4] = {1, 2, 3, 4};
    CHECK(pxvm_runner_read_tokens(k.run, atlas, 0, 1, &f, dst, 0) == PXVM_USAGE);
    CHECK_STR(pxvm_errmsg(), "only by the CUDA-GL executor");
    CHECK(dst[0] == 1 && dst[3] == 4);
    CHECK(pxvm_runner_read_tokens(k.run, atlas, 0, 1, NULL, dst, -1) == PXVM_USAGE);
    CHECK(pxvm_runner_read_tokens(k.run, atlas, 0, 1, &f, NULL, -1) == PXVM_USAGE);
    px__tok_close(&k);
}

/* ---- the refusals at their edges ------------------------------------------------------------ */

typedef struct {
    pxvm_token_format f;
    const char *preset; /* not NULL: the case is pxvm_token_format_preset(preset) */
    int slot, item0, items;
} px_tcase;

typedef void (*px_tmake)(int refuse, int variant, px_tcase *c, char *msg);

typedef struct {
    const char *id;
    px_tmake make;
    int variants;
} px_trule;

/* The token of byte 255 with mean 0 and std s, as the table computes it: finite in the dtype? */
static int px__finite_token(const pxvm_token_format *f, float r, float s)
{
    float x = 255.0f * r, y = x / s;
    uint32_t b;
    memcpy(&b, &y, 4);
    if (!isfinite(y))
        return 0;
    return f->dtype == PXVM_TOKENS_FLOAT16 ? (pxvm_f32_to_f16(b) & 0x7FFFu) < 0x7C00u
           : f->dtype == PXVM_TOKENS_BFLOAT16 ? (pxvm_f32_to_bf16(b) & 0x7FFFu) < 0x7F80u : 1;
}

/* The smallest positive float32 std (bit patterns are ordered as the values) whose byte-255 token is finite */
static float px__smallest_finite_std(const pxvm_token_format *f)
{
    uint32_t lo = 1, hi = 0x3F800000u; /* std 1 is finite: the answer is in (lo - 1, hi] */
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        float s;
        memcpy(&s, &mid, 4);
        if (px__finite_token(f, (float)f->rescale, s))
            hi = mid;
        else
            lo = mid + 1;
    }
    float s;
    memcpy(&s, &lo, 4);
    return s;
}

/* The largest float32 rescale whose tokens are finite, with the format's channels (mean and std as given) */
static float px__largest_finite_rescale(const pxvm_token_format *f)
{
    uint32_t lo = 0x3F800000u, hi = 0x7F7FFFFFu; /* rescale 1 is finite */
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo + 1) / 2;
        float r;
        memcpy(&r, &mid, 4);
        int ok = 1;
        for (int c = 0; c < 3 && ok; c++) {
            float x = 255.0f * r, d = x - (float)f->mean[c], y = d / (float)f->std[c];
            ok = isfinite(x) && isfinite(y);
        }
        if (ok)
            lo = mid;
        else
            hi = mid - 1;
    }
    float r;
    memcpy(&r, &lo, 4);
    return r;
}

static void px__t1(int refuse, int variant, px_tcase *c, char *msg)
{
    (void)variant;
    c->f.dtype = refuse ? 3 : PXVM_TOKENS_BFLOAT16;
    strcpy(msg, "dtype 3 is none of");
}
static void px__t2(int refuse, int variant, px_tcase *c, char *msg)
{
    (void)variant;
    c->f.layout = refuse ? 3 : PXVM_TOKENS_FLAT;
    strcpy(msg, "layout 3 is none of");
}
static void px__t3(int refuse, int variant, px_tcase *c, char *msg)
{
    if (variant == 0) { /* 4 values: with alpha, not without */
        c->f.alpha = !refuse, c->f.nvalues = 4, c->f.mean[3] = 0.5, c->f.std[3] = 0.5;
        strcpy(msg, "4 mean/std values for R, G, B (alpha 0)");
    } else { /* 3 values with alpha, not 2 */
        c->f.alpha = 1, c->f.nvalues = refuse ? 2 : 3;
        strcpy(msg, "2 mean/std values for R, G, B, A");
    }
}
static void px__t4(int refuse, int variant, px_tcase *c, char *msg)
{
    if (variant == 0) {
        c->f.rescale = refuse ? 0.0 : 1.401298464324817e-45; /* the smallest float32 */
        strcpy(msg, "rescale = 0 is not a positive finite float32");
    } else { /* 3.5e38 rounds to infinity; FLT_MAX is finite, but takes byte 255 beyond binary32 (A-TOKENS-10): the
              * largest rescale whose tokens are finite is the accepted member */
        c->f.rescale = refuse ? 3.5e38 : (double)px__largest_finite_rescale(&c->f);
        strcpy(msg, "rescale = 3.5e+38 is not");
    }
}
static void px__t5(int refuse, int variant, px_tcase *c, char *msg)
{
    (void)variant;
    c->f.mean[1] = refuse ? 3.5e38 : -FLT_MAX, c->f.std[1] = 1.0; /* std 1: (x + FLT_MAX) / 1 is finite */
    strcpy(msg, "mean[1] = 3.5e+38 is not a finite float32");
}
static void px__t6(int refuse, int variant, px_tcase *c, char *msg)
{
    if (variant == 0) { /* the smallest std, whose tokens are finite when the rescale is as small: y = u */
        c->f.rescale = 1.401298464324817e-45, c->f.mean[2] = 0.0;
        c->f.std[2] = refuse ? 1e-46 : 1.401298464324817e-45; /* 1e-46 rounds to 0 */
        strcpy(msg, "std[2] = 1e-46 is not a finite, non-zero float32");
    } else { /* alpha's own std, with 4 values */
        c->f.alpha = 1, c->f.nvalues = 4, c->f.mean[3] = 0.0, c->f.std[3] = refuse ? NAN : -1.0;
        strcpy(msg, "std[3] = nan is not");
    }
}
static void px__t7(int refuse, int variant, px_tcase *c, char *msg)
{
    if (variant == 0) {
        c->slot = refuse ? 1 : 2;
        strcpy(msg, "slot 1 ('image') is no patch atlas");
    } else {
        c->slot = refuse ? 3 : 2;
        strcpy(msg, "slot 3: the program has slots 0..2");
    }
}
static void px__t8(int refuse, int variant, px_tcase *c, char *msg)
{
    if (variant == 0) {
        c->item0 = 1, c->items = refuse ? 2 : 1;
        strcpy(msg, "items 1..2 (2 from 1) are not within the batch of 2");
    } else {
        c->item0 = 0, c->items = refuse ? 0 : 1;
        strcpy(msg, "items 0..-1 (0 from 0)");
    }
}
static void px__t10(int refuse, int variant, px_tcase *c, char *msg)
{
    /* channel 0 with mean 0: byte 255 gives the largest value; the last std whose value is finite is accepted,
     * the float32 just below it refused; in float32 (variant 0), float16 (1) and bfloat16 (2) */
    c->f.dtype = variant == 0 ? PXVM_TOKENS_FLOAT32 : variant == 1 ? PXVM_TOKENS_FLOAT16 : PXVM_TOKENS_BFLOAT16;
    c->f.mean[0] = 0.0;
    float s = px__smallest_finite_std(&c->f);
    c->f.std[0] = refuse ? (double)nextafterf(s, 0.0f) : (double)s;
    snprintf(msg, 200, "byte 255 of channel 0 gives");
}

static void px__t9(int refuse, int variant, px_tcase *c, char *msg)
{
    (void)variant;
    c->preset = refuse ? "CLIP" : "clip";
    strcpy(msg, "no normalization preset 'CLIP' (presets: clip, siglip, imagenet, none)");
}

static void px__t11(int refuse, int variant, px_tcase *c, char *msg)
{
    (void)variant;
    c->f.rule = refuse ? 2 : PXVM_TOKENS_RULE_RESCALE_FLOAT64;
    strcpy(msg, "rule 2 is none of float32 (0), rescale-float64 (1");
}

static const px_trule px_trules[] = {
    {"A-TOKENS-1", px__t1, 1}, {"A-TOKENS-2", px__t2, 1}, {"A-TOKENS-3", px__t3, 2},
    {"A-TOKENS-4", px__t4, 2}, {"A-TOKENS-5", px__t5, 1}, {"A-TOKENS-6", px__t6, 2},
    {"A-TOKENS-7", px__t7, 2}, {"A-TOKENS-8", px__t8, 2}, {"A-TOKENS-9", px__t9, 1},
    {"A-TOKENS-10", px__t10, 3}, {"A-TOKENS-11", px__t11, 1},
};
#define PX_NTRULES (sizeof px_trules / sizeof px_trules[0])

TEST(tokens_every_refusal_has_its_edge_pair)
{
    px_tok k;
    int atlas = px__tok_open(&k);
    CHECK(atlas == 2);
    static uint8_t dst[2 * PX_N * 4 * PX_P * PX_P * 4 + 64];
    int pairs = 0;
    for (size_t r = 0; r < PX_NTRULES; r++)
        for (int v = 0; v < px_trules[r].variants; v++)
            for (int refuse = 0; refuse < 2; refuse++) {
                px_tcase c;
                char msg[200] = "";
                memset(&c, 0, sizeof c);
                CHECK(pxvm_token_format_preset("imagenet", &c.f) == 0);
                c.slot = atlas, c.item0 = 0, c.items = 2;
                px_trules[r].make(refuse, v, &c, msg);
                memset(dst, 0x5A, sizeof dst);
                int rc = c.preset ? pxvm_token_format_preset(c.preset, &c.f)
                                  : pxvm_runner_read_tokens(k.run, c.slot, c.item0, c.items, &c.f, dst, -1);
                if (!refuse) {
                    if (rc)
                        px_test_fail(__FILE__, __LINE__, "%s variant %d: the accepted case fails: %s", px_trules[r].id,
                                     v, pxvm_errmsg());
                    continue;
                }
                if (rc != PXVM_USAGE) {
                    px_test_fail(__FILE__, __LINE__, "%s variant %d: the refused case gives %d", px_trules[r].id, v, rc);
                    continue;
                }
                if (!strstr(pxvm_errmsg(), msg))
                    px_test_fail(__FILE__, __LINE__, "%s variant %d: '%s' does not contain '%s'", px_trules[r].id, v,
                                 pxvm_errmsg(), msg);
                for (size_t i = 0; i < sizeof dst; i++)
                    if (dst[i] != 0x5A) {
                        px_test_fail(__FILE__, __LINE__, "%s variant %d: byte %zu written on refusal", px_trules[r].id, v, i);
                        break;
                    }
                pairs++;
            }
    printf("  %zu rules, %d pairs\n", PX_NTRULES, pairs);
    px__tok_close(&k);
}

/* Every [A-TOKENS-n] of SPEC.md has a pair above and one index row "| ID | usage | `USAGE` |";
 * every pair above has its ID there. */
static const char *px__tok_id(size_t i) { return px_trules[i].id; }
static void px__tok_row(size_t i, const char *rest) { px_spec_row_is(px_trules[i].id, rest, "usage", "USAGE"); }

TEST(tokens_spec_ids_have_their_pairs)
{
    px_spec_ids t = {"A-TOKENS-", "test_tokens.c", PX_NTRULES, px__tok_id, px__tok_row};
    CHECK_EQ(px_spec_ids_check(&t), (int)PX_NTRULES);
}

/* ---- tokens and persistent slots at a change of size (SPEC 2, Any-size inputs) ----------------- */

/* 'image' any-size (reference 16x16), its pyramid (a larger size samples a level >= 1), sampled
 * into two 4x4 tokens of 'atlas' and, with `keep`, of the persistent atlas 'keep' too. */
static const char *px__size_src(int keep)
{
    return keep ? ".width 16\n.slot image input 16x16 any\n.slot atlas output 8x4 patches=4x4x2\n"
                  ".slot keep output 8x4 patches=4x4x2 persistent\n"
                  "PYRAMID image\n"
                  "SAMPLE src=image dst=atlas mode=nearest dst_x=0 dst_y=0 w=4 h=4 cu=2 cv=2 du=1 dv=1 lod=0\n"
                  "SAMPLE src=image dst=atlas mode=nearest dst_x=4 dst_y=0 w=4 h=4 cu=10 cv=10 du=1 dv=1 lod=0\n"
                  "SAMPLE src=image dst=keep mode=nearest dst_x=0 dst_y=0 w=4 h=4 cu=6 cv=2 du=1 dv=1 lod=0\n"
                  "SAMPLE src=image dst=keep mode=nearest dst_x=4 dst_y=0 w=4 h=4 cu=2 cv=10 du=1 dv=1 lod=0\n"
                  "HALT\n"
                : ".width 16\n.slot image input 16x16 any\n.slot atlas output 8x4 patches=4x4x2\n"
                  "PYRAMID image\n"
                  "SAMPLE src=image dst=atlas mode=nearest dst_x=0 dst_y=0 w=4 h=4 cu=2 cv=2 du=1 dv=1 lod=0\n"
                  "SAMPLE src=image dst=atlas mode=nearest dst_x=4 dst_y=0 w=4 h=4 cu=10 cv=10 du=1 dv=1 lod=0\n"
                  "HALT\n";
}

enum { PX_SZ_FLOATS = 2 * 3 * 4 * 4 }; /* 2 tokens, C = 3, 4x4, float32 */

/* The executor under test (PXVM_TEST_EXECUTOR: "cpu", the default, or "cuda" on the GPU machine). */
static const char *px__tok_executor(void)
{
    const char *name = getenv("PXVM_TEST_EXECUTOR");
    return name && *name ? name : "cpu";
}

/* Binds a random w x h image (seed) to slot 1 of `run`; runs it when `run_it`. */
static int px__size_bind(pxvm_runner *run, int w, int h, uint64_t seed, int run_it)
{
    pxvm_image img = px_random_image(w, h, &seed);
    pxvm_view v = pxvm_view_host(img.px, w, h, 4);
    int rc = pxvm_runner_bind(run, 1, 0, &v);
    if (!rc && run_it)
        rc = pxvm_runner_run(run);
    pxvm_image_free(&img);
    return rc;
}

/* Tokens (float32, 'none': the bytes / 255) of slot `slot` into t; 0 or the call's code. */
static int px__size_tokens(pxvm_runner *run, int slot, float *t)
{
    pxvm_token_format f;
    pxvm_token_format_preset("none", &f);
    return pxvm_runner_read_tokens(run, slot, 0, 1, &f, t, -1);
}

/* A size change (a new size bound to the any-size input) and the tokens read before the next
 * run: those of the state a load at that size starts from: a non-persistent atlas reads its
 * initial state (zeros, as a fresh runner bound at the new size reads it), not the atlas of the
 * run at the old size; a persistent atlas keeps what the runs before the change left (SPEC 2:
 * persistent slots keep their values); the token geometry, no slot, is the last run's. Then the
 * run at the new size equals a fresh runner's.
 * To a new size and back to a size seen before. */
TEST(tokens_after_a_size_change_read_the_new_size_initial_state)
{
    static const int sizes[3][2] = {{24, 20}, {12, 30}, {24, 20}};
    int cases = 0;
    for (int keep = 0; keep < 2; keep++) {
        pxvm_prog *prog = NULL;
        pxvm_runner *run = NULL;
        if (pxvm_prog_assemble(px__size_src(keep), "size.pxs", NULL, &prog) ||
            pxvm_runner_open(prog, px__tok_executor(), 0, 1, 1, &run)) {
            px_test_fail(__FILE__, __LINE__, "%s", pxvm_errmsg());
            pxvm_prog_free(prog);
            return;
        }
        int atlas = pxvm_prog_slot_find(prog, "atlas"), kept = keep ? pxvm_prog_slot_find(prog, "keep") : -1;
        float before[2][PX_SZ_FLOATS], after[2][PX_SZ_FLOATS], want[PX_SZ_FLOATS];
        CHECK_EQ(px__size_bind(run, 16, 16, 5, 1), 0);
        for (int z = 0; z < 3; z++) {
            int32_t g_before[2 * PXVM_GEOM_INTS], g_after[2 * PXVM_GEOM_INTS];
            CHECK_EQ(pxvm_runner_read_geometry(run, atlas, 0, 1, g_before, -1), 0);
            CHECK_EQ(px__size_tokens(run, atlas, before[0]), 0);
            if (keep)
                CHECK_EQ(px__size_tokens(run, kept, before[1]), 0);
            int w = sizes[z][0], h = sizes[z][1];
            float zeros[PX_SZ_FLOATS] = {0};
            CHECK(memcmp(before[0], zeros, sizeof zeros) && (!keep || memcmp(before[1], zeros, sizeof zeros)));
            CHECK_EQ(px__size_bind(run, w, h, 100u + (uint64_t)z, 0), 0);
            CHECK_EQ(px__size_tokens(run, atlas, after[0]), 0);
            /* the geometry is no slot: the last run's until the next run (SPEC 2) */
            CHECK_EQ(pxvm_runner_read_geometry(run, atlas, 0, 1, g_after, -1), 0);
            CHECK(!memcmp(g_before, g_after, sizeof g_after));
            for (int i = 0; i < PX_SZ_FLOATS; i++)
                want[i] = 0.0f; /* byte 0 / 255 */
            if (memcmp(after[0], want, sizeof want))
                px_test_fail(__FILE__, __LINE__, "keep %d, %dx%d: the atlas's tokens before the run are "
                             "not its initial state's (zeros): %s", keep, w, h,
                             !memcmp(after[0], before[0], sizeof want) ? "the old size's run's" : "other values");
            if (keep) {
                CHECK_EQ(px__size_tokens(run, kept, after[1]), 0);
                if (memcmp(after[1], before[1], sizeof want))
                    px_test_fail(__FILE__, __LINE__, "keep %d, %dx%d: the persistent atlas's tokens "
                                 "changed at the size change (%s)", keep, w, h,
                                 !memcmp(after[1], want, sizeof want) ? "wiped to zeros" : "other values");
            }
            /* the run at the new size: as a fresh runner's */
            CHECK_EQ(pxvm_runner_run(run), 0);
            pxvm_runner *fresh = NULL;
            float got[PX_SZ_FLOATS], ref[PX_SZ_FLOATS];
            if (pxvm_runner_open(prog, "cpu", 0, 1, 1, &fresh) || px__size_bind(fresh, w, h, 100u + (uint64_t)z, 1) ||
                px__size_tokens(fresh, atlas, ref) || px__size_tokens(run, atlas, got)) {
                px_test_fail(__FILE__, __LINE__, "%s", pxvm_errmsg());
            } else if (memcmp(got, ref, sizeof ref)) {
                px_test_fail(__FILE__, __LINE__, "keep %d, %dx%d: the run after the change differs from a "
                             "fresh runner's", keep, w, h);
            }
            pxvm_runner_close(fresh);
            cases++;
        }
        pxvm_runner_close(run);
        pxvm_prog_free(prog);
    }
    printf("  %d size changes\n", cases);
}

/* ---- RESIZE and token geometry (SPEC 6) -------------------------------------------------------- */

/* RESIZE writes no token geometry: tile 0, written only by a RESIZE of exactly its rectangle,
 * reads (0, 0, 0, 0, -1); tile 1, written by a SAMPLE and then by a RESIZE, keeps the SAMPLE's
 * geometry while its pixels are the RESIZE's (those of tile 0: the same RESIZE). */
TEST(tokens_resize_writes_no_geometry)
{
    static const char *src = ".width 16\n.slot image input 16x16\n.slot atlas output 8x4 patches=4x4x2\n"
                             "SAMPLE src=image dst=atlas mode=nearest dst_x=4 dst_y=0 w=4 h=4 cu=10 cv=6 du=1 dv=1 lod=0\n"
                             "RESIZE image atlas filter=1 at=(4,0) size=(4,4)\n"
                             "RESIZE image atlas filter=1 at=(0,0) size=(4,4)\n"
                             "HALT\n";
    pxvm_prog *prog = NULL;
    pxvm_runner *run = NULL;
    if (pxvm_prog_assemble(src, "resize_geometry.pxs", NULL, &prog) ||
        pxvm_runner_open(prog, px__tok_executor(), 0, 1, 1, &run) ||
        px__size_bind(run, 16, 16, 9, 1)) {
        px_test_fail(__FILE__, __LINE__, "%s", pxvm_errmsg());
        pxvm_runner_close(run);
        pxvm_prog_free(prog);
        return;
    }
    int atlas = pxvm_prog_slot_find(prog, "atlas");
    int32_t g[2][PXVM_GEOM_INTS];
    uint8_t patches[2][4][4][4];
    pxvm_view out = {patches, -1, 1, 4, 4 * 2, 4, sizeof patches, 4 * 4, 4, 1};
    CHECK_EQ(pxvm_runner_read_geometry(run, atlas, 0, 1, &g[0][0], -1), 0);
    CHECK_EQ(pxvm_runner_read_patches(run, atlas, 0, &out), 0);
    int32_t none[PXVM_GEOM_INTS] = {0, 0, 0, 0, -1}, sample[PXVM_GEOM_INTS] = {10 << 16, 6 << 16, 65536, 65536, 0};
    if (memcmp(g[0], none, sizeof none))
        px_test_fail(__FILE__, __LINE__, "tile 0 (RESIZE only): geometry (%d, %d, %d, %d, %d), not (0, 0, 0, 0, -1)",
                     g[0][0], g[0][1], g[0][2], g[0][3], g[0][4]);
    if (memcmp(g[1], sample, sizeof sample))
        px_test_fail(__FILE__, __LINE__, "tile 1 (SAMPLE, then RESIZE): geometry (%d, %d, %d, %d, %d), not the SAMPLE's",
                     g[1][0], g[1][1], g[1][2], g[1][3], g[1][4]);
    CHECK(!memcmp(patches[0], patches[1], sizeof patches[0])); /* both tiles hold the RESIZE's pixels */
    pxvm_runner_close(run);
    pxvm_prog_free(prog);
}
