/* test_ragged.c - ragged batches (pxvm_runner_ragged, pxvm_ragged_plan; isa/SPEC.md "Ragged
 * batches", [A-RAGGED-n]) against what they promise to equal, byte for byte:
 *   tiles   image i resized by pxvm_image_fit_channels to its size, then the "uniform" plan
 *           compiled for that size run and read with pxvm_runner_read_patches (CPU);
 *   tokens  those tiles converted by pxvm_runner_read_tokens' table (vm/tokens.h);
 *   batch   n images in one call == n calls of one image; on cuda, a batch split into parts
 *           (a small max_memory) == one part.
 * Every executor here runs them: cpu always, cuda when it opens (PXVM_TEST_EXECUTOR=cuda makes it
 * required: the GPU check); a mismatch names the executor, the image and the first byte. Every
 * refusal is checked with a sentinel-filled dst: nothing is written. */
#include <stdlib.h>
#include <string.h>

#include "../../include/pxvm.h"
#include "../../vm/tokens.h"
#include "test.h"

#ifdef PXVM_HAVE_CUDA_GL
#include <cuda_runtime_api.h>
#endif

/* ---- executors ----------------------------------------------------------------------------- */

static const char *const px__execs[] = {"cpu", "cuda"};
enum { PX_NEXEC = 2 };

/* A runner of a small uniform plan on executor `exec` (its program is not what a ragged batch
 * runs), the program compiled with max_memory `max_memory` (0: the default). 0: open; 1: cuda
 * is not here and not required (skipped, said once); -1: a failure (reported). */
static int px__open(const char *exec, uint64_t max_memory, pxvm_prog **prog, pxvm_runner **run)
{
    static int said;
    pxvm_limits lim;
    pxvm_limits_default(&lim);
    if (max_memory)
        lim.max_memory = max_memory;
    *prog = NULL, *run = NULL;
    if (pxvm_prog_from_plan("{\"image\": [8, 8], \"scheme\": \"uniform\", \"patch\": 8}", "ragged.json", &lim, prog)) {
        px_test_fail(__FILE__, __LINE__, "plan: %s", pxvm_errmsg());
        return -1;
    }
    int rc = pxvm_runner_open(*prog, exec, 0, 0, 1, run);
    if (!rc)
        return 0;
    const char *want = getenv("PXVM_TEST_EXECUTOR");
    if (!strcmp(exec, "cuda") && rc == PXVM_UNAVAILABLE && !(want && !strcmp(want, "cuda"))) {
        if (!said++)
            printf("  cuda: not here (%s): its cases skipped\n", pxvm_errmsg());
    } else {
        px_test_fail(__FILE__, __LINE__, "%s: %s", exec, pxvm_errmsg());
        rc = -1;
    }
    pxvm_prog_free(*prog);
    *prog = NULL;
    return rc < 0 ? -1 : 1;
}

static void px__close(pxvm_prog *prog, pxvm_runner *run)
{
    pxvm_runner_close(run);
    pxvm_prog_free(prog);
}

/* ---- images and their views ------------------------------------------------------------------ */

/* An image as HWC bytes (the truth) and a view of a copy of it laid out by `kind`:
 *   0 HWC packed; 1 CHW planar (ch_stride w*h, px_stride 1); 2 rows padded (7 bytes more);
 *   3 rows bottom-up (row_stride negative); 4 channels reversed in memory (ch_stride -1, data at
 *   the last channel); 5 pixels padded to 5 bytes (px_stride C + 2 > C). */
typedef struct px_rimg {
    int w, h, c;
    uint8_t *hwc;
    uint8_t *mem; /* the view's memory */
    pxvm_view v;
} px_rimg;

enum { PX_NKINDS = 6 };

static void px__rimg(px_rimg *m, int w, int h, int c, int kind, uint64_t seed)
{
    memset(m, 0, sizeof *m);
    m->w = w, m->h = h, m->c = c;
    size_t n = (size_t)w * (size_t)h * (size_t)c;
    m->hwc = malloc(n);
    for (size_t i = 0; i < n; i++) /* smooth and noisy: both halves of the filters' sums */
        m->hwc[i] = (uint8_t)(i % 3 ? px_rand(&seed) >> 56 : (i * 37u) & 255u);
    int64_t rs = (int64_t)w * c, ps = c, cs = 1;
    int64_t off = 0; /* of pixel (0, 0), channel 0 in mem */
    size_t bytes = n;
    switch (kind) {
    case 1:
        ps = 1, cs = (int64_t)w * h, rs = w;
        break;
    case 2:
        rs = (int64_t)w * c + 7, bytes = (size_t)rs * (size_t)h;
        break;
    case 3:
        rs = -(int64_t)w * c, off = (int64_t)w * c * (h - 1);
        break;
    case 4:
        cs = -1, off = c - 1;
        break;
    case 5:
        ps = c + 2, rs = (int64_t)w * ps, bytes = (size_t)rs * (size_t)h;
        break;
    default:
        break;
    }
    m->mem = malloc(bytes);
    memset(m->mem, 0xEE, bytes);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            for (int k = 0; k < c; k++)
                m->mem[off + y * rs + x * ps + k * cs] = m->hwc[((size_t)y * (size_t)w + (size_t)x) * (size_t)c + (size_t)k];
    m->v = pxvm_view_host(m->mem + off, w, h, c);
    m->v.row_stride = rs, m->v.px_stride = ps, m->v.ch_stride = cs;
    m->v.item_stride = 0;
}

static void px__rimg_free(px_rimg *m)
{
    free(m->hwc), free(m->mem);
    memset(m, 0, sizeof *m);
}

/* ---- the reference: resize, then a uniform program compiled for the size -------------------- */

/* The RGBA8 tiles of image m by the reference path: resized to ow x oh by pxvm_image_fit_channels
 * (policy), then the uniform plan of patch p compiled for ow x oh, run on the CPU, its patches
 * read. *tiles (malloc'd): (ow/p)*(oh/p) tiles of p*p*4 bytes. 0, or -1 (reported). */
static int px__reference(const px_rimg *m, const char *policy, int p, int ow, int oh, uint8_t **tiles)
{
    *tiles = NULL;
    uint8_t *rgba = NULL;
    if (pxvm_image_fit_channels(m->hwc, m->w, m->h, m->c, ow, oh, policy, &rgba)) {
        px_test_fail(__FILE__, __LINE__, "fit %dx%dx%d -> %dx%d '%s': %s", m->w, m->h, m->c, ow, oh, policy, pxvm_errmsg());
        return -1;
    }
    char plan[160];
    snprintf(plan, sizeof plan, "{\"image\": [%d, %d], \"scheme\": \"uniform\", \"patch\": %d}", ow, oh, p);
    pxvm_prog *prog = NULL;
    pxvm_runner *run = NULL;
    int n = (ow / p) * (oh / p), rc = -1;
    uint8_t *t = malloc((size_t)n * (size_t)p * (size_t)p * 4u);
    pxvm_view in = pxvm_view_host(rgba, ow, oh, 4);
    pxvm_view out = pxvm_view_host(t, p, p * n, 4);
    out.item_stride = (int64_t)n * p * p * 4;
    if (pxvm_prog_from_plan(plan, "uniform.json", NULL, &prog) || pxvm_runner_open(prog, "cpu", 0, 1, 1, &run) ||
        pxvm_runner_bind(run, 1, 0, &in) || pxvm_runner_run(run) || pxvm_runner_read_patches(run, 2, 0, &out))
        px_test_fail(__FILE__, __LINE__, "uniform %dx%d patch %d: %s", ow, oh, p, pxvm_errmsg());
    else
        rc = 0, *tiles = t, t = NULL;
    pxvm_runner_close(run);
    pxvm_prog_free(prog);
    pxvm_free(rgba);
    free(t);
    return rc;
}

/* The expected bytes of a batch: each image's reference tiles one after the other, in fmt (NULL:
 * RGBA8) converted by the table of pxvm_runner_read_tokens, built here from the tiles. *bytes
 * the size. out_wh: the sizes the plan gives. NULL on a failure (reported). */
static uint8_t *px__expected(const px_rimg *imgs, int n, const char *policy, int p, const int *out_wh,
                             const int64_t *off, const pxvm_token_format *fmt, size_t *bytes)
{
    pxvm_token_table tab;
    pxvm_error err;
    if (fmt && pxvm_token_table_build(fmt, &tab, &err) < 0) {
        px_test_fail(__FILE__, __LINE__, "table: %s", err.msg);
        return NULL;
    }
    size_t pp = (size_t)p * (size_t)p, tile = fmt ? pp * (size_t)tab.channels * (size_t)tab.elem : pp * 4u;
    *bytes = (size_t)off[n] * tile;
    uint8_t *want = malloc(*bytes ? *bytes : 1);
    for (int i = 0; i < n; i++) {
        uint8_t *t = NULL;
        if (px__reference(&imgs[i], policy, p, out_wh[2 * i], out_wh[2 * i + 1], &t) < 0) {
            free(want);
            return NULL;
        }
        int64_t nt = off[i + 1] - off[i];
        if (!fmt) {
            memcpy(want + (size_t)off[i] * tile, t, (size_t)nt * tile);
        } else {
            for (int64_t k = 0; k < nt; k++) {
                uint8_t *o = want + (size_t)(off[i] + k) * tile;
                for (size_t q = 0; q < pp; q++)
                    for (int c = 0; c < tab.channels; c++) {
                        uint32_t v = tab.value[c][t[((size_t)k * pp + q) * 4u + (size_t)c]];
                        size_t at = tab.layout == PXVM_TOKENS_NHWC ? q * (size_t)tab.channels + (size_t)c : (size_t)c * pp + q;
                        if (tab.elem == 4)
                            memcpy(o + 4u * at, &v, 4);
                        else {
                            uint16_t h = (uint16_t)v;
                            memcpy(o + 2u * at, &h, 2);
                        }
                    }
            }
        }
        free(t);
    }
    return want;
}

/* The first byte where got differs from want, named by image (the tile offsets) and byte within
 * the image's tiles: 1 when they differ (reported), 0 when they agree. */
static int px__diff(const char *what, const char *exec, const uint8_t *got, const uint8_t *want, size_t bytes,
                    int n, const int64_t *off, size_t tile)
{
    size_t k = 0;
    while (k < bytes && got[k] == want[k])
        k++;
    if (k == bytes)
        return 0;
    int i = 0;
    while (i + 1 < n && (size_t)off[i + 1] * tile <= k)
        i++;
    size_t at = k - (size_t)off[i] * tile;
    px_test_fail(__FILE__, __LINE__, "%s on %s: image %d, byte %zu of its tiles (tile %zu, byte %zu): %u, not %u", what,
                 exec, i, at, at / tile, at % tile, got[k], want[k]);
    return 1;
}

/* One ragged call of imgs[0..n) on run into a fresh buffer (host dst), compared with the
 * reference; returns the number of cases compared (1), 0 on a failure (reported). */
static int px__check_batch(pxvm_runner *run, const char *exec, const char *what, px_rimg *imgs, int n,
                           const char *policy, int p, int ow, int oh, const pxvm_token_format *fmt)
{
    int *wh = malloc(sizeof(int) * 4u * (size_t)n), *out_wh = wh + 2 * n;
    int64_t *off = malloc(sizeof(int64_t) * ((size_t)n + 1u));
    pxvm_view *views = malloc(sizeof(pxvm_view) * (size_t)n);
    for (int i = 0; i < n; i++)
        wh[2 * i] = imgs[i].w, wh[2 * i + 1] = imgs[i].h, views[i] = imgs[i].v;
    int failed = 7, ok = 0;
    uint8_t *want = NULL, *got = NULL;
    size_t bytes = 0;
    if (pxvm_ragged_plan(policy, p, ow, oh, n, wh, out_wh, off, &failed) || failed != -1) {
        px_test_fail(__FILE__, __LINE__, "%s: plan '%s': %s (failed %d)", what, policy, pxvm_errmsg(), failed);
        goto out;
    }
    if (!(want = px__expected(imgs, n, policy, p, out_wh, off, fmt, &bytes)))
        goto out;
    got = malloc(bytes + 64);
    memset(got, 0xA5, bytes + 64);
    pxvm_ragged t = {policy, p, ow, oh, fmt, got, -1, bytes, 7};
    if (pxvm_runner_ragged(run, n, views, &t) || t.failed != -1) {
        px_test_fail(__FILE__, __LINE__, "%s on %s: %s (failed %d)", what, exec, pxvm_errmsg(), t.failed);
        goto out;
    }
    size_t tile = off[n] ? bytes / (size_t)off[n] : 1;
    ok = !px__diff(what, exec, got, want, bytes, n, off, tile);
    for (size_t k = bytes; k < bytes + 64; k++)
        if (got[k] != 0xA5) {
            px_test_fail(__FILE__, __LINE__, "%s on %s: byte %zu after the tiles written", what, exec, k - bytes);
            ok = 0;
            break;
        }
out:
    free(wh), free(off), free(views), free(want), free(got);
    return ok;
}

/* ---- tiles == fit + uniform program ------------------------------------------------------------ */

static const int px__sizes[][2] = {{1, 1}, {1, 9}, {9, 1}, {13, 17}, {31, 29}, {64, 48}, {97, 61}, {24, 16}, {2, 37}};
enum { PX_NSIZES = sizeof px__sizes / sizeof px__sizes[0] };

/* Every size, channels 1, 3, 4 and every view kind (cycled), as one batch per policy. */
static int px__batch_of(px_rimg *imgs, uint64_t seed)
{
    int n = 0;
    for (int s = 0; s < PX_NSIZES; s++)
        for (int c = 0; c < 3; c++, n++)
            px__rimg(&imgs[n], px__sizes[s][0], px__sizes[s][1], c == 0 ? 1 : c == 1 ? 3 : 4, n % PX_NKINDS, seed + (uint64_t)n);
    return n;
}

typedef struct px_rpol {
    const char *policy;
    int patch, ow, oh;
} px_rpol;

static const px_rpol px__policies[] = {
    /* stretch: every filter, sources smaller and larger than 24x16 (up and down), and 24x16 itself (a copy) */
    {"stretch:nearest", 8, 24, 16}, {"stretch:box", 8, 24, 16}, {"stretch:bilinear", 8, 24, 16},
    {"stretch:hamming", 8, 24, 16}, {"stretch", 8, 24, 16}, {"stretch:lanczos", 8, 24, 16},
    {"stretch:bicubic", 1, 5, 3}, /* primes, patch 1 */
    {"stretch:lanczos", 4, 100, 4}, /* one side up, one down */
    /* dynamic: its own size per image, merge/min/max several ways, every filter */
    {"dynamic:merge=1,min=16,max=1024:nearest", 4, 0, 0}, {"dynamic:merge=1,min=16,max=1024:box", 4, 0, 0},
    {"dynamic:merge=1,min=16,max=1024:bilinear", 4, 0, 0}, {"dynamic:merge=1,min=16,max=1024:hamming", 4, 0, 0},
    {"dynamic:merge=1,min=16,max=1024", 4, 0, 0}, {"dynamic:merge=1,min=16,max=1024:lanczos", 4, 0, 0},
    {"dynamic", 14, 0, 0}, /* Qwen2-VL's defaults: every one of these grows to min 3136 */
    {"dynamic:patch=2,merge=3,min=36,max=400:bilinear", 2, 0, 0}, /* the larger ones shrink to max */
    {"dynamic:merge=2,min=1,max=64", 1, 0, 0},
    /* fit: a pad with alpha, the default pad, nearest */
    {"fit:bicubic:10,20,30,40", 8, 24, 16}, {"fit", 4, 16, 24}, {"fit:nearest:ff000080", 8, 8, 8},
    {"fit:lanczos:1,2,3", 2, 2, 2},
};
enum { PX_NPOL = sizeof px__policies / sizeof px__policies[0] };

TEST(ragged_tiles_equal_fit_then_a_uniform_program)
{
    px_rimg imgs[PX_NSIZES * 3];
    int n = px__batch_of(imgs, 40);
    for (int e = 0; e < PX_NEXEC; e++) {
        pxvm_prog *prog;
        pxvm_runner *run;
        if (px__open(px__execs[e], 0, &prog, &run))
            continue;
        int cases = 0;
        for (int k = 0; k < PX_NPOL; k++)
            cases += px__check_batch(run, px__execs[e], px__policies[k].policy, imgs, n, px__policies[k].policy,
                                     px__policies[k].patch, px__policies[k].ow, px__policies[k].oh, NULL);
        CHECK_EQ(cases, PX_NPOL);
        printf("  %s: %d policies x %d images\n", px__execs[e], cases, n);
        px__close(prog, run);
    }
    for (int i = 0; i < n; i++)
        px__rimg_free(&imgs[i]);
}

/* exact: every image is the size asked (a copy); patch 256 at its edge; 1x1 at patch 1. */
TEST(ragged_tiles_exact_and_the_patch_edges)
{
    static const struct { int w, h, p; } cases[] = {{16, 8, 8}, {256, 256, 256}, {1, 1, 1}, {256, 512, 256}, {7, 3, 1}};
    for (int e = 0; e < PX_NEXEC; e++) {
        pxvm_prog *prog;
        pxvm_runner *run;
        if (px__open(px__execs[e], 0, &prog, &run))
            continue;
        for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
            px_rimg imgs[3];
            for (int i = 0; i < 3; i++)
                px__rimg(&imgs[i], cases[k].w, cases[k].h, i == 0 ? 1 : i == 1 ? 3 : 4, (int)(k + (size_t)i) % PX_NKINDS,
                         100u + k * 3u + (uint64_t)i);
            char what[64];
            snprintf(what, sizeof what, "exact %dx%d patch %d", cases[k].w, cases[k].h, cases[k].p);
            CHECK_EQ(px__check_batch(run, px__execs[e], what, imgs, 3, "exact", cases[k].p, cases[k].w, cases[k].h, NULL), 1);
            /* stretch to the same size: a copy too */
            CHECK_EQ(px__check_batch(run, px__execs[e], what, imgs, 3, "stretch:lanczos", cases[k].p, cases[k].w,
                                     cases[k].h, NULL), 1);
            for (int i = 0; i < 3; i++)
                px__rimg_free(&imgs[i]);
        }
        px__close(prog, run);
    }
}

/* ---- tokens == the tiles through the table --------------------------------------------------- */

TEST(ragged_tokens_equal_the_tiles_through_the_table)
{
    px_rimg imgs[PX_NSIZES * 3];
    int n = px__batch_of(imgs, 77);
    static const char *const pols[] = {"dynamic:merge=1,min=16,max=1024", "fit:bilinear:9,8,7,6"};
    for (int e = 0; e < PX_NEXEC; e++) {
        pxvm_prog *prog;
        pxvm_runner *run;
        if (px__open(px__execs[e], 0, &prog, &run))
            continue;
        int cases = 0, want = 0;
        for (int dtype = 0; dtype < 3; dtype++)
            for (int layout = 0; layout < 3; layout++)
                for (int alpha = 0; alpha < 2; alpha++)
                    for (int k = 0; k < 2; k++, want++) {
                        pxvm_token_format f;
                        CHECK_EQ(pxvm_token_format_preset(k ? "imagenet" : "clip", &f), 0);
                        f.dtype = dtype, f.layout = layout, f.alpha = alpha;
                        if (alpha && k) /* 4 values: alpha's own mean and std */
                            f.nvalues = 4, f.mean[3] = 0.25, f.std[3] = 0.5;
                        char what[96];
                        snprintf(what, sizeof what, "tokens dtype %d layout %d alpha %d, %s", dtype, layout, alpha, pols[k]);
                        cases += px__check_batch(run, px__execs[e], what, imgs, n, pols[k], 4, k ? 12 : 0, k ? 8 : 0, &f);
                    }
        CHECK_EQ(cases, want);
        printf("  %s: %d formats\n", px__execs[e], cases);
        px__close(prog, run);
    }
    for (int i = 0; i < n; i++)
        px__rimg_free(&imgs[i]);
}

/* ---- batch == loop, parts == one part ------------------------------------------------------------ */

/* The bytes of one ragged call (host dst of `bytes`), or NULL (reported). */
static uint8_t *px__ragged_bytes(pxvm_runner *run, int n, const pxvm_view *views, const char *policy, int p, int ow,
                                 int oh, const pxvm_token_format *fmt, size_t bytes)
{
    uint8_t *got = malloc(bytes ? bytes : 1);
    memset(got, 0x3C, bytes);
    pxvm_ragged t = {policy, p, ow, oh, fmt, got, -1, bytes, 0};
    if (pxvm_runner_ragged(run, n, views, &t)) {
        px_test_fail(__FILE__, __LINE__, "%s n %d: %s", policy, n, pxvm_errmsg());
        free(got);
        return NULL;
    }
    return got;
}

TEST(ragged_a_batch_equals_a_loop_and_parts_equal_one)
{
    px_rimg imgs[PX_NSIZES * 3];
    int n = px__batch_of(imgs, 9);
    pxvm_view views[PX_NSIZES * 3];
    int wh[4 * PX_NSIZES * 3];
    int64_t off[PX_NSIZES * 3 + 1];
    for (int i = 0; i < n; i++)
        views[i] = imgs[i].v, wh[2 * i] = imgs[i].w, wh[2 * i + 1] = imgs[i].h;
    static const char *const pols[] = {"dynamic:merge=2,min=64,max=2048:lanczos", "stretch:box"};
    pxvm_token_format bf16;
    CHECK_EQ(pxvm_token_format_preset("siglip", &bf16), 0);
    bf16.dtype = PXVM_TOKENS_BFLOAT16, bf16.layout = PXVM_TOKENS_NHWC;
    for (int e = 0; e < PX_NEXEC; e++) {
        pxvm_prog *prog, *small_prog;
        pxvm_runner *run, *small;
        if (px__open(px__execs[e], 0, &prog, &run))
            continue;
        /* 64 KiB: a part's budget is a quarter of it, so the batch goes in many parts on cuda */
        if (px__open(px__execs[e], 64u << 10, &small_prog, &small)) {
            px__close(prog, run);
            continue;
        }
        for (int k = 0; k < 2; k++)
            for (int tok = 0; tok < 2; tok++) {
                const pxvm_token_format *fmt = tok ? &bf16 : NULL;
                int ow = k ? 16 : 0, oh = k ? 8 : 0;
                CHECK_EQ(pxvm_ragged_plan(pols[k], 4, ow, oh, n, wh, wh + 2 * n, off, NULL), 0);
                size_t tile = 16u * (tok ? 3u * 2u : 4u), bytes = (size_t)off[n] * tile;
                uint8_t *all = px__ragged_bytes(run, n, views, pols[k], 4, ow, oh, fmt, bytes);
                uint8_t *parts = px__ragged_bytes(small, n, views, pols[k], 4, ow, oh, fmt, bytes);
                uint8_t *loop = malloc(bytes);
                for (int i = 0; i < n && all; i++) {
                    size_t b = (size_t)(off[i + 1] - off[i]) * tile;
                    uint8_t *one = px__ragged_bytes(run, 1, &views[i], pols[k], 4, ow, oh, fmt, b);
                    if (one)
                        memcpy(loop + (size_t)off[i] * tile, one, b);
                    free(one);
                }
                char what[96];
                snprintf(what, sizeof what, "%s%s: batch vs loop", pols[k], tok ? " bf16" : "");
                if (all)
                    px__diff(what, px__execs[e], all, loop, bytes, n, off, tile);
                snprintf(what, sizeof what, "%s%s: parts (max_memory 64 KiB) vs one", pols[k], tok ? " bf16" : "");
                if (all && parts)
                    px__diff(what, px__execs[e], parts, all, bytes, n, off, tile);
                free(all), free(parts), free(loop);
            }
        px__close(small_prog, small);
        px__close(prog, run);
    }
    for (int i = 0; i < n; i++)
        px__rimg_free(&imgs[i]);
}
