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
#include <dirent.h>
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
 *   the last channel); 5 pixels padded (px_stride C + 2); 6 every row the same memory (row_stride
 *   0, a broadcast). */
typedef struct px_rimg {
    int w, h, c;
    uint8_t *hwc;
    uint8_t *mem; /* the view's memory */
    size_t bytes;  /* mem's */
    int64_t off;   /* v.data - mem */
    pxvm_view v;
} px_rimg;

enum { PX_NKINDS = 7 };

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
    case 6: /* every row the first (a broadcast): the truth's rows made equal */
        rs = 0, bytes = (size_t)w * (size_t)c;
        for (int y = 1; y < h; y++)
            memcpy(m->hwc + (size_t)y * (size_t)w * (size_t)c, m->hwc, (size_t)w * (size_t)c);
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
    m->bytes = bytes, m->off = off;
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
    /* the image widened to RGBA (SPEC 2: grey v -> (v, v, v, 255), RGB -> (r, g, b, 255)) and
     * resized by pxvm_image_fit (RESIZE's bytes), which pxvm_image_fit_channels must equal */
    uint8_t *rgba = NULL, *by_channels = NULL;
    uint8_t *w4 = malloc((size_t)m->w * (size_t)m->h * 4u);
    for (size_t i = 0; i < (size_t)m->w * (size_t)m->h; i++)
        for (int k = 0; k < 4; k++)
            w4[4 * i + (size_t)k] = k == 3 && m->c < 4 ? 255 : m->hwc[i * (size_t)m->c + (size_t)(m->c == 1 ? 0 : k)];
    int frc = pxvm_image_fit(w4, m->w, m->h, ow, oh, policy, &rgba) ||
              pxvm_image_fit_channels(m->hwc, m->w, m->h, m->c, ow, oh, policy, &by_channels);
    free(w4);
    if (!frc && memcmp(rgba, by_channels, (size_t)ow * (size_t)oh * 4u))
        px_test_fail(__FILE__, __LINE__, "%dx%dx%d -> %dx%d '%s': pxvm_image_fit_channels differs from the widened "
                     "image's pxvm_image_fit", m->w, m->h, m->c, ow, oh, policy);
    pxvm_free(by_channels);
    if (frc) {
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
    pxvm_ragged t = {policy, p, ow, oh, fmt, got, -1, bytes, 7, 0, 0};
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
    /* the content at the source's size (no resize) with pad bars (64x48 in 64x64), and dynamic
     * sizes equal to the image's (64x48, 24x16: copies) */
    {"fit:box:1,2,3,4", 16, 64, 64}, {"dynamic:merge=1,min=16,max=4096", 4, 0, 0},
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
    pxvm_ragged t = {policy, p, ow, oh, fmt, got, -1, bytes, 0, 0, 0};
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
                if (!tok && all) { /* RGBA8 tiles take a dst at any address */
                    uint8_t *odd = malloc(bytes + 1);
                    pxvm_ragged t = {pols[k], 4, ow, oh, NULL, odd + 1, -1, bytes, 0, 0, 0};
                    CHECK_EQ(pxvm_runner_ragged(run, n, views, &t), 0);
                    snprintf(what, sizeof what, "%s: dst at an odd address vs aligned", pols[k]);
                    px__diff(what, px__execs[e], odd + 1, all, bytes, n, off, tile);
                    free(odd);
                }
                free(all), free(parts), free(loop);
            }
        px__close(small_prog, small);
        px__close(prog, run);
    }
    for (int i = 0; i < n; i++)
        px__rimg_free(&imgs[i]);
}

/* ---- the plan's arguments, and a batch of many images ---------------------------------------------- */

/* n = 0 plans an empty batch (offsets[0] = 0); offsets NULL is refused for any n (it was written
 * through for n = 0: a crash); wh NULL only with n = 0. */
TEST(ragged_plan_arguments)
{
    int64_t off[2] = {-5, -5};
    int wh[2] = {7, 7}, failed = 9;
    CHECK_EQ(pxvm_ragged_plan("stretch", 8, 8, 8, 0, NULL, NULL, off, &failed), 0);
    CHECK_EQ(off[0], 0);
    CHECK_EQ(failed, -1);
    CHECK_EQ(pxvm_ragged_plan("stretch", 8, 8, 8, 0, NULL, NULL, NULL, &failed), PXVM_USAGE);
    CHECK_STR(pxvm_errmsg(), "tiles: a NULL argument or n < 0");
    CHECK_EQ(pxvm_ragged_plan("stretch", 8, 8, 8, 1, wh, NULL, NULL, &failed), PXVM_USAGE);
    CHECK_EQ(pxvm_ragged_plan("stretch", 8, 8, 8, 1, NULL, NULL, off, &failed), PXVM_USAGE);
    CHECK_EQ(pxvm_ragged_plan("stretch", 8, 8, 8, -1, wh, NULL, off, &failed), PXVM_USAGE);
    CHECK_EQ(pxvm_ragged_plan(NULL, 8, 8, 8, 1, wh, NULL, off, &failed), PXVM_USAGE);
    CHECK_EQ(pxvm_ragged_plan("stretch", 8, 8, 8, 1, wh, NULL, off, &failed), 0);
    CHECK_EQ(off[1], 1);
    /* the sizes dynamic gives are pxvm_policy_dynamic_size's, the offsets their tiles' sums */
    int sizes[6] = {640, 480, 3, 600, 1000, 7}, out[6], w, h;
    int64_t o[4];
    CHECK_EQ(pxvm_ragged_plan("dynamic", 14, 0, 0, 3, sizes, out, o, &failed), 0);
    int64_t sum = 0;
    for (int i = 0; i < 3; i++) {
        CHECK_EQ(pxvm_policy_dynamic_size("dynamic", 14, sizes[2 * i], sizes[2 * i + 1], &w, &h), 0);
        CHECK(out[2 * i] == w && out[2 * i + 1] == h);
        CHECK_EQ(o[i], sum);
        sum += (int64_t)(w / 14) * (h / 14);
    }
    CHECK_EQ(o[3], sum);
    /* every size up to 80 x 80 in one plan (the rounding's ties, both clamps): each image's size
     * is pxvm_policy_dynamic_size's */
    static const struct { const char *policy; int patch; } dyn[] = {
        {"dynamic", 14}, {"dynamic:merge=1,min=16,max=256", 4}, {"dynamic:merge=3,min=100,max=900:box", 2}};
    enum { S = 80 };
    int *all = malloc(sizeof(int) * 4u * S * S), *all_out = all + 2 * S * S;
    int64_t *all_off = malloc(sizeof(int64_t) * (S * S + 1));
    for (int i = 0; i < S * S; i++)
        all[2 * i] = 1 + i % S, all[2 * i + 1] = 1 + i / S;
    for (size_t k = 0; k < sizeof dyn / sizeof dyn[0]; k++) {
        CHECK_EQ(pxvm_ragged_plan(dyn[k].policy, dyn[k].patch, 0, 0, S * S, all, all_out, all_off, &failed), 0);
        for (int i = 0; i < S * S; i++) {
            if (pxvm_policy_dynamic_size(dyn[k].policy, dyn[k].patch, all[2 * i], all[2 * i + 1], &w, &h) ||
                w != all_out[2 * i] || h != all_out[2 * i + 1] ||
                all_off[i + 1] - all_off[i] != (int64_t)(w / dyn[k].patch) * (h / dyn[k].patch)) {
                px_test_fail(__FILE__, __LINE__, "%s: a %dx%d image planned %dx%d, tiles %lld; dynamic_size %dx%d",
                             dyn[k].policy, all[2 * i], all[2 * i + 1], all_out[2 * i], all_out[2 * i + 1],
                             (long long)(all_off[i + 1] - all_off[i]), w, h);
                break;
            }
        }
    }
    free(all), free(all_off);
}

/* 100,000 images of 1 texel each (channels cycling, every view kind) stretched to 2x1 at patch 1:
 * the pool's order (largest first) and many small images give each image its own tiles. */
TEST(ragged_many_images)
{
    enum { N = 100000 };
    uint8_t px[4] = {10, 20, 30, 40};
    pxvm_view *views = malloc(sizeof(pxvm_view) * N);
    for (int i = 0; i < N; i++) {
        int c = i % 3 == 0 ? 1 : i % 3 == 1 ? 3 : 4;
        views[i] = pxvm_view_host(px, 1, 1, c);
    }
    uint8_t *got = malloc((size_t)N * 8u);
    for (int e = 0; e < PX_NEXEC; e++) {
        pxvm_prog *prog;
        pxvm_runner *run;
        if (px__open(px__execs[e], 0, &prog, &run))
            continue;
        memset(got, 0, (size_t)N * 8u);
        pxvm_ragged t = {"stretch:bicubic", 1, 2, 1, NULL, got, -1, (size_t)N * 8u, 0, 0, 0};
        CHECK_EQ(pxvm_runner_ragged(run, N, views, &t), 0);
        for (int i = 0; i < N; i++) {
            int c = views[i].channels;
            uint8_t want[4] = {10, (uint8_t)(c == 1 ? 10 : 20), (uint8_t)(c == 1 ? 10 : 30), (uint8_t)(c == 4 ? 40 : 255)};
            if (memcmp(got + 8u * (size_t)i, want, 4) || memcmp(got + 8u * (size_t)i + 4, want, 4)) {
                px_test_fail(__FILE__, __LINE__, "%s: image %d (channels %d): %u %u %u %u", px__execs[e], i, c,
                             got[8 * i], got[8 * i + 1], got[8 * i + 2], got[8 * i + 3]);
                break;
            }
        }
        px__close(prog, run);
    }
    free(got), free(views);
}

/* ---- real photos ------------------------------------------------------------------------------------ */

static int px__name_cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Real photos of mixed sizes (programs/data/chelsea.png, and every .png/.jpg of $PXVM_PHOTOS or
 * build/photos when there: `sh tests/bench/photos.sh`), each decoded to RGBA and viewed as RGBA,
 * RGB or grey (the RGBA memory read with px_stride 4), resized by Qwen2-VL's dynamic rule (patch
 * 14) in one batch: tiles, and bf16 CLIP tokens, == the reference. */
TEST(ragged_real_photos)
{
    const char *dir = getenv("PXVM_PHOTOS");
    dir = dir && *dir ? dir : "build/photos";
    char *names[64];
    int n = 0;
    static const char chelsea[] = "programs/data/chelsea.png";
    names[n] = malloc(sizeof chelsea);
    memcpy(names[n++], chelsea, sizeof chelsea);
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d)) && n < 64;) {
        size_t len = strlen(e->d_name);
        if (len > 4 && (!strcmp(e->d_name + len - 4, ".png") || !strcmp(e->d_name + len - 4, ".jpg"))) {
            names[n] = malloc(strlen(dir) + len + 2);
            sprintf(names[n++], "%s/%s", dir, e->d_name);
        }
    }
    if (d)
        closedir(d);
    qsort(names + 1, (size_t)(n - 1), sizeof names[0], px__name_cmp);
    px_rimg *imgs = calloc((size_t)n, sizeof *imgs);
    int k = 0;
    for (int i = 0; i < n; i++) {
        uint8_t *rgba = NULL;
        int w, h;
        if (pxvm_image_load(names[i], NULL, &rgba, &w, &h)) {
            px_test_fail(__FILE__, __LINE__, "%s: %s", names[i], pxvm_errmsg());
            continue;
        }
        px_rimg *m = &imgs[k];
        int c = k % 3 == 0 ? 4 : k % 3 == 1 ? 3 : 1;
        size_t px = (size_t)w * (size_t)h;
        m->w = w, m->h = h, m->c = c, m->hwc = malloc(px * (size_t)c), m->mem = rgba, m->bytes = px * 4u;
        for (size_t q = 0; q < px; q++)
            memcpy(m->hwc + q * (size_t)c, rgba + 4u * q, (size_t)c);
        m->v = pxvm_view_host(rgba, w, h, c);
        m->v.px_stride = 4, m->v.row_stride = (int64_t)w * 4;
        k++;
    }
    pxvm_token_format bf16;
    pxvm_token_format_preset("clip", &bf16);
    bf16.dtype = PXVM_TOKENS_BFLOAT16;
    for (int e = 0; e < PX_NEXEC && k; e++) {
        pxvm_prog *prog;
        pxvm_runner *run;
        if (px__open(px__execs[e], 0, &prog, &run))
            continue;
        int ok = px__check_batch(run, px__execs[e], "photos, dynamic", imgs, k, "dynamic", 14, 0, 0, NULL) +
                 px__check_batch(run, px__execs[e], "photos, dynamic bf16", imgs, k, "dynamic", 14, 0, 0, &bf16);
        CHECK_EQ(ok, 2);
        printf("  %s: %d photos%s\n", px__execs[e], k, k == 1 ? " (no build/photos: sh tests/bench/photos.sh)" : "");
        px__close(prog, run);
    }
    for (int i = 0; i < k; i++)
        free(imgs[i].hwc), pxvm_free(imgs[i].mem);
    for (int i = 0; i < n; i++)
        free(names[i]);
    free(imgs);
}

/* ---- refusals: each rule at its edge, nothing written -------------------------------------------- */

enum { PX_GMAX = 4 };

/* One call of a refusal pair: the arguments, and what the refused side gives. */
typedef struct px_gcase {
    const char *policy;
    int patch, ow, oh, n;
    int wh[PX_GMAX][2], chan[PX_GMAX];
    int null_data, two_items, bad_device; /* the image whose view has that fault, or -1 */
    int fmt_on;
    pxvm_token_format f;
    size_t misalign;   /* dst's offset from a 16-aligned address */
    int bytes_delta;   /* dst_bytes = what the tiles take + this */
    int dst_null, dst_device;
    int plan_only;     /* pxvm_ragged_plan with wh alone (sizes no memory holds): n may exceed PX_GMAX, */
    int plan_w, plan_h; /* every image plan_w x plan_h */
    uint64_t max_memory; /* the runner's (cuda: its parts), 0 default */
    const char *exec_only; /* the pair runs on this executor alone (NULL: every one) */
    int merge, temporal; /* pxvm_ragged's */
    int want_rc, want_failed;
    char msg[200];
} px_gcase;

typedef void (*px_gmake)(int refuse, int variant, px_gcase *c);
typedef struct px_grule {
    const char *id;
    px_gmake make;
    int variants;
} px_grule;

static void px__g_base(px_gcase *c)
{
    memset(c, 0, sizeof *c);
    c->policy = "stretch:bilinear", c->patch = 8, c->ow = 24, c->oh = 16, c->n = 3;
    for (int i = 0; i < PX_GMAX; i++)
        c->wh[i][0] = 13 + i, c->wh[i][1] = 11 + 2 * i, c->chan[i] = i % 2 ? 3 : 4;
    c->null_data = c->two_items = c->bad_device = -1;
    c->dst_device = -1;
    c->want_rc = PXVM_USAGE, c->want_failed = -1;
}

static void px__g1(int refuse, int variant, px_gcase *c) /* the policy's text */
{
    (void)variant;
    c->policy = refuse ? "stretch:lanczoz" : "stretch:lanczos";
    snprintf(c->msg, sizeof c->msg, "bad policy 'stretch:lanczoz'");
}
static void px__g2(int refuse, int variant, px_gcase *c) /* native */
{
    (void)variant;
    c->policy = refuse ? "native" : "exact", c->ow = 16, c->oh = 8;
    for (int i = 0; i < c->n; i++)
        c->wh[i][0] = 16, c->wh[i][1] = 8;
    snprintf(c->msg, sizeof c->msg, "policy native keeps each image's size");
}
static void px__g3(int refuse, int variant, px_gcase *c) /* patch 1..256 */
{
    if (variant == 0)
        c->patch = refuse ? 257 : 256, c->ow = c->oh = refuse ? 257 : 256;
    else
        c->patch = refuse ? 0 : 1, c->ow = 5, c->oh = 3;
    snprintf(c->msg, sizeof c->msg, "patch must be 1..256, not %d", c->patch);
}
static void px__g4(int refuse, int variant, px_gcase *c) /* out_w x out_h */
{
    if (variant == 0) { /* a multiple of the patch */
        c->ow = refuse ? 25 : 24;
        snprintf(c->msg, sizeof c->msg, "out_w x out_h (25x16) must be multiples of the patch, 1..2^24");
    } else if (variant == 1) { /* dynamic: 0 x 0 */
        c->policy = "dynamic:merge=1,min=16,max=4096", c->patch = 4, c->ow = 0, c->oh = refuse ? 8 : 0;
        snprintf(c->msg, sizeof c->msg, "out_w and out_h are 0, not 0x8");
    } else if (variant == 3) { /* an image's side, 1..2^24 (sizes only) */
        c->plan_only = 1, c->n = 2, c->plan_w = refuse ? (1 << 24) + 1 : 1 << 24, c->plan_h = 1, c->want_failed = 0;
        snprintf(c->msg, sizeof c->msg, "image 0: tiles: a 16777217x1 image (sides are 1..2^24)");
    } else if (variant == 4) { /* crop: the long side resized, 1..2^24 (sizes only) */
        c->plan_only = 1, c->n = 2, c->policy = "crop", c->ow = c->oh = 8, c->plan_w = 1;
        c->plan_h = refuse ? (1 << 21) + 1 : 1 << 21, c->want_failed = 0;
        snprintf(c->msg, sizeof c->msg, "image 0: policy crop: a 1x2097153 image's short side resized to 8 makes its "
                 "long side 16777224, past 2^24");
    } else { /* 2^24, the largest side (sizes only: no memory holds the tiles) */
        c->plan_only = 1, c->n = 1, c->plan_w = c->plan_h = 7, c->patch = 8;
        c->ow = refuse ? (1 << 24) + 8 : 1 << 24, c->oh = 8;
        snprintf(c->msg, sizeof c->msg, "out_w x out_h (16777224x8) must be multiples");
    }
}
static void px__g5(int refuse, int variant, px_gcase *c) /* each view's shape */
{
    if (variant == 0) {
        c->chan[1] = refuse ? 2 : 1;
        snprintf(c->msg, sizeof c->msg, "image 1: input: channels must be 1 (grey), 3 (RGB) or 4 (RGBA), not 2");
    } else if (variant == 1) {
        c->null_data = refuse ? 2 : -1;
        snprintf(c->msg, sizeof c->msg, "image 2: input: no data (NULL pointer)");
    } else {
        c->two_items = refuse ? 1 : -1;
        snprintf(c->msg, sizeof c->msg, "image 1: input: a tile batch takes one item per view");
    }
    c->want_failed = variant == 1 ? 2 : 1;
}
static void px__g6(int refuse, int variant, px_gcase *c) /* exact: every image the size asked */
{
    (void)variant;
    c->policy = "exact", c->ow = 16, c->oh = 8;
    for (int i = 0; i < c->n; i++)
        c->wh[i][0] = 16, c->wh[i][1] = 8;
    c->wh[2][1] = refuse ? 9 : 8;
    c->want_failed = 2;
    snprintf(c->msg, sizeof c->msg, "image 2: policy exact: a 16x9 image is not 16x8");
}
static void px__g7(int refuse, int variant, px_gcase *c) /* dynamic: aspect up to 200:1, in the middle of a batch */
{
    c->policy = "dynamic:merge=1,min=16,max=4096", c->patch = 4, c->ow = c->oh = 0;
    if (variant == 0)
        c->wh[1][0] = refuse ? 201 : 200, c->wh[1][1] = 1;
    else
        c->wh[1][0] = 3, c->wh[1][1] = refuse ? 601 : 600;
    c->want_rc = PXVM_UNLINKABLE, c->want_failed = 1;
    if (variant == 0)
        snprintf(c->msg, sizeof c->msg, "image 1: a 201x1 image: policy dynamic takes aspect ratios up to 200:1; this one is 201.00:1");
    else
        snprintf(c->msg, sizeof c->msg, "image 1: a 3x601 image: policy dynamic takes aspect ratios up to 200:1; this one is 200.33:1");
}
static void px__g8(int refuse, int variant, px_gcase *c) /* dst's size */
{
    if (variant == 0) {
        c->bytes_delta = refuse ? -1 : 0;
        snprintf(c->msg, sizeof c->msg, "tiles: dst has 4607 bytes; the 18 tiles take 4608");
    } else {
        c->dst_null = refuse;
        snprintf(c->msg, sizeof c->msg, "tiles: dst is NULL, of 4608 bytes; the 18 tiles take 4608");
    }
}
static void px__g9(int refuse, int variant, px_gcase *c) /* dst aligned to its dtype */
{
    c->fmt_on = 1;
    pxvm_token_format_preset("clip", &c->f);
    c->f.dtype = variant == 0 ? PXVM_TOKENS_FLOAT32 : variant == 1 ? PXVM_TOKENS_FLOAT16 : PXVM_TOKENS_BFLOAT16;
    size_t elem = variant == 0 ? 4 : 2;
    c->misalign = refuse ? elem / 2 : elem;
    snprintf(c->msg, sizeof c->msg, "tiles: dst must be aligned to its dtype (%zu bytes)", elem);
}
static void px__g10(int refuse, int variant, px_gcase *c) /* the batch's tiles, at most 2^48 */
{
    c->plan_only = 1, c->plan_w = c->plan_h = 1, c->patch = 1, c->ow = 1 << 24, c->oh = 1 << 23;
    if (variant == 0) {
        c->n = refuse ? 3 : 2; /* 2^47 tiles each */
        c->want_failed = 2;
        snprintf(c->msg, sizeof c->msg, "image 2: tiles: the batch's tiles reach 422212465065984 here, over 2^48");
    } else { /* 2^48 tiles each: 2^15 + 1 of them overflowed int64 offsets (2^63) */
        c->oh = 1 << 24, c->n = refuse ? (1 << 15) + 1 : 1;
        c->want_failed = 1;
        snprintf(c->msg, sizeof c->msg, "image 1: tiles: the batch's tiles reach 562949953421312 here, over 2^48");
    }
}
static void px__g11(int refuse, int variant, px_gcase *c) /* n >= 1 */
{
    (void)variant;
    c->n = refuse ? 0 : 1;
    snprintf(c->msg, sizeof c->msg, "tiles: no images (n < 1), or a NULL argument");
}
static void px__g12(int refuse, int variant, px_gcase *c) /* the cpu executor: host memory */
{
    c->exec_only = "cpu";
    if (variant == 0) {
        c->dst_device = refuse ? 0 : -1;
        snprintf(c->msg, sizeof c->msg, "tiles: the cpu executor writes host memory (dst_device -1)");
    } else {
        c->bad_device = refuse ? 1 : -1, c->want_failed = 1;
        snprintf(c->msg, sizeof c->msg, "image 1: the cpu executor reads host memory (device -1)");
    }
}

/* The device bytes image 1 of px__g13's batch needs on cuda (px__g13_probe reads them from a
 * refusal's message), so that the pair sits at them. */
static uint64_t px__g13_need;
static void px__g13(int refuse, int variant, px_gcase *c) /* cuda: an image's bytes within max_memory */
{
    (void)variant;
    c->exec_only = "cuda", c->want_failed = 1;
    c->wh[1][0] = 97, c->wh[1][1] = 61, c->chan[1] = 4; /* the largest, in the middle */
    c->max_memory = px__g13_need ? px__g13_need - (refuse ? 1u : 0u) : 16u << 10;
    snprintf(c->msg, sizeof c->msg, "image 1: a 97x61 image resized to 24x16 needs %llu bytes on the device, over the "
             "runner's max_memory %llu", (unsigned long long)px__g13_need, (unsigned long long)px__g13_need - 1);
}

static void px__g14(int refuse, int variant, px_gcase *c) /* merge: grids of whole windows, merge >= 0 */
{
    if (variant == 0) { /* 4x2 tiles take merge 2, 3x2 do not */
        c->merge = 2, c->ow = refuse ? 24 : 32, c->want_failed = 0;
        snprintf(c->msg, sizeof c->msg, "image 0: merge 2: its grid of 3x2 tiles (w x h, resized to 24x16) is not "
                 "made of 2x2 windows");
    } else {
        c->merge = refuse ? -1 : 0;
        snprintf(c->msg, sizeof c->msg, "tiles: merge -1 and temporal 0: merge is 0..2^24");
    }
}
static void px__g15(int refuse, int variant, px_gcase *c) /* temporal: whole groups of one size, temporal >= 0 */
{
    if (variant == 0) { /* 4 images make 2 groups of 2, 3 do not */
        c->temporal = 2, c->n = refuse ? 3 : 4;
        snprintf(c->msg, sizeof c->msg, "tiles: temporal 2 takes the images in groups of 2 frames; 3 images are not "
                 "whole groups");
    } else if (variant == 1) { /* dynamic: the second frame of a group resized to another size */
        c->policy = "dynamic:merge=1,min=16,max=4096", c->patch = 4, c->ow = c->oh = 0, c->n = 2, c->temporal = 2;
        c->wh[0][0] = 16, c->wh[0][1] = 16, c->wh[1][0] = refuse ? 20 : 16, c->wh[1][1] = 16, c->want_failed = 1;
        snprintf(c->msg, sizeof c->msg, "image 1: temporal 2: resized to 20x16, but image 0, the first frame of its "
                 "group, is 16x16");
    } else {
        c->temporal = refuse ? -1 : 0;
        snprintf(c->msg, sizeof c->msg, "tiles: merge 0 and temporal -1: merge is 0..2^24");
    }
}

static const px_grule px_grules[] = {
    {"A-RAGGED-1", px__g1, 1}, {"A-RAGGED-2", px__g2, 1}, {"A-RAGGED-3", px__g3, 2}, {"A-RAGGED-4", px__g4, 5},
    {"A-RAGGED-5", px__g5, 3}, {"A-RAGGED-6", px__g6, 1}, {"A-RAGGED-7", px__g7, 2}, {"A-RAGGED-8", px__g8, 2},
    {"A-RAGGED-9", px__g9, 3}, {"A-RAGGED-10", px__g10, 2}, {"A-RAGGED-11", px__g11, 1}, {"A-RAGGED-12", px__g12, 2},
    {"A-RAGGED-13", px__g13, 1}, {"A-RAGGED-14", px__g14, 2}, {"A-RAGGED-15", px__g15, 3},
};
#define PX_NGRULES (sizeof px_grules / sizeof px_grules[0])

/* Runs case c on run: its return code; *failed the call's pxvm_ragged.failed; *written: a byte
 * of the sentinel-filled dst changed. */
static int px__g_run(pxvm_runner *run, const px_gcase *c, int *failed, int *written)
{
    *failed = -7, *written = 0;
    if (c->plan_only) {
        int *wh = malloc(sizeof(int) * 2u * (size_t)(c->n + 1));
        int64_t *off = malloc(sizeof(int64_t) * (size_t)(c->n + 1));
        for (int i = 0; i < c->n; i++)
            wh[2 * i] = c->plan_w, wh[2 * i + 1] = c->plan_h;
        int rc = pxvm_ragged_plan(c->policy, c->patch, c->ow, c->oh, c->n, wh, NULL, off, failed);
        free(wh), free(off);
        return rc;
    }
    px_rimg imgs[PX_GMAX];
    pxvm_view views[PX_GMAX];
    for (int i = 0; i < PX_GMAX; i++) {
        int ch = c->chan[i] == 2 ? 4 : c->chan[i];
        px__rimg(&imgs[i], c->wh[i][0], c->wh[i][1], ch, i % PX_NKINDS, 5u + (uint64_t)i);
        views[i] = imgs[i].v;
        if (c->chan[i] == 2)
            views[i].channels = 2;
        if (i == c->null_data)
            views[i].data = NULL;
        if (i == c->two_items)
            views[i].items = 2;
        if (i == c->bad_device)
            views[i].device = 0;
    }
    /* the tiles the accepted side takes: the size the refused side is judged against */
    int wh[2 * PX_GMAX];
    int64_t off[PX_GMAX + 1];
    for (int i = 0; i < PX_GMAX; i++)
        wh[2 * i] = c->wh[i][0], wh[2 * i + 1] = c->wh[i][1];
    size_t tile = (size_t)c->patch * (size_t)c->patch * (c->fmt_on ? 3u * (c->f.dtype ? 2u : 4u) : 4u);
    size_t need = 0;
    if (c->n >= 1 && !pxvm_ragged_plan(c->policy, c->patch, c->ow, c->oh, c->n, wh, NULL, off, NULL))
        need = (size_t)off[c->n] * tile;
    size_t cap = need + 64;
    uint8_t *buf = malloc(cap + 16), *dst = buf + (16u - (uintptr_t)buf % 16u) % 16u + c->misalign;
    memset(buf, 0x5A, cap + 16);
    pxvm_ragged t = {c->policy, c->patch, c->ow, c->oh, c->fmt_on ? &c->f : NULL, c->dst_null ? NULL : dst,
                     c->dst_device, (size_t)((long long)need + c->bytes_delta), -7, c->merge, c->temporal};
    int rc = pxvm_runner_ragged(run, c->n, views, &t);
    *failed = t.failed;
    for (size_t k = 0; k < cap + 16 && rc; k++)
        if (buf[k] != 0x5A) {
            *written = 1;
            break;
        }
    free(buf);
    for (int i = 0; i < PX_GMAX; i++)
        px__rimg_free(&imgs[i]);
    return rc;
}

/* px__g13_need from the refusal of its batch at a max_memory of 16 KiB (cuda). */
static void px__g13_probe(const char *exec)
{
    px_gcase c;
    px__g_base(&c);
    px__g13(1, 0, &c);
    pxvm_prog *prog;
    pxvm_runner *run;
    if (px__open(exec, c.max_memory, &prog, &run))
        return;
    int failed, written;
    if (px__g_run(run, &c, &failed, &written) == PXVM_USAGE) {
        const char *at = strstr(pxvm_errmsg(), " needs ");
        px__g13_need = at ? strtoull(at + 7, NULL, 10) : 0;
    }
    if (!px__g13_need)
        px_test_fail(__FILE__, __LINE__, "A-RAGGED-13 on %s: no need in '%s'", exec, pxvm_errmsg());
    px__close(prog, run);
}

TEST(ragged_every_refusal_has_its_edge_pair)
{
    for (int e = 0; e < PX_NEXEC; e++) {
        const char *exec = px__execs[e];
        int pairs = 0;
        pxvm_prog *probe_prog;
        pxvm_runner *probe;
        if (px__open(exec, 0, &probe_prog, &probe))
            continue; /* not here (said), or reported */
        px__close(probe_prog, probe);
        if (!strcmp(exec, "cuda") && !px__g13_need)
            px__g13_probe(exec);
        for (size_t r = 0; r < PX_NGRULES; r++)
            for (int v = 0; v < px_grules[r].variants; v++)
                for (int refuse = 0; refuse < 2; refuse++) {
                    px_gcase c;
                    px__g_base(&c);
                    px_grules[r].make(refuse, v, &c);
                    if (c.exec_only && strcmp(c.exec_only, exec))
                        continue;
                    pxvm_prog *prog;
                    pxvm_runner *run;
                    if (px__open(exec, c.max_memory, &prog, &run))
                        break;
                    int failed, written, rc = px__g_run(run, &c, &failed, &written);
                    const char *msg = pxvm_errmsg();
                    if (!refuse) {
                        if (rc)
                            px_test_fail(__FILE__, __LINE__, "%s variant %d on %s: the accepted case fails: %s",
                                         px_grules[r].id, v, exec, msg);
                    } else if (rc != c.want_rc || !strstr(msg, c.msg) || failed != c.want_failed || written) {
                        px_test_fail(__FILE__, __LINE__, "%s variant %d on %s: got %d '%s' (failed %d%s); wanted %d with "
                                     "'%s' (failed %d)", px_grules[r].id, v, exec, rc, rc ? msg : "", failed,
                                     written ? ", dst written" : "", c.want_rc, c.msg, c.want_failed);
                    } else {
                        pairs++;
                    }
                    px__close(prog, run);
                }
        printf("  %s: %d refusals at their edges\n", exec, pairs);
    }
}

/* Every [A-RAGGED-n] of SPEC.md has a pair above, is defined once and has one index row whose
 * class is the pair's ("| A-RAGGED-n | usage | `CODE` |"); every pair above has its ID there. */
static const char *px__g_id(size_t i) { return px_grules[i].id; }
static void px__g_row(size_t i, const char *rest) /* the class the pair's refusal shows */
{
    px_gcase c;
    px__g_base(&c);
    px_grules[i].make(1, 0, &c);
    px_spec_row_is(px_grules[i].id, rest, pxvm_class_name(c.want_rc), NULL);
}

TEST(ragged_spec_ids_have_their_pairs)
{
    px_spec_ids t = {"A-RAGGED-", "test_ragged.c", PX_NGRULES, px__g_id, px__g_row};
    CHECK_EQ(px_spec_ids_check(&t), (int)PX_NGRULES);
}

/* ---- cuda: device views and a device dst ------------------------------------------------------ */

#ifdef PXVM_HAVE_CUDA_GL
/* The batch's bytes into a device dst (filled with 0x5A first) read back to the host: NULL on a
 * failure (reported); *rc the call's code. */
static uint8_t *px__device_dst(pxvm_runner *run, int n, const pxvm_view *views, const char *policy, int p, int ow,
                               int oh, const pxvm_token_format *fmt, size_t bytes, size_t misalign, int *rc, int *failed)
{
    void *d = NULL;
    uint8_t *got = malloc(bytes + 64);
    if (cudaMalloc(&d, bytes + 64 + misalign) != cudaSuccess || cudaMemset(d, 0x5A, bytes + 64 + misalign) != cudaSuccess) {
        px_test_fail(__FILE__, __LINE__, "cudaMalloc of %zu bytes", bytes + 64);
        cudaFree(d), free(got);
        return NULL;
    }
    pxvm_ragged t = {policy, p, ow, oh, fmt, (uint8_t *)d + misalign, 0, bytes, 0, 0, 0};
    *rc = pxvm_runner_ragged(run, n, views, &t);
    *failed = t.failed;
    if ((!*rc && pxvm_runner_sync(run)) ||
        cudaMemcpy(got, (uint8_t *)d + misalign, bytes + 64, cudaMemcpyDeviceToHost) != cudaSuccess) {
        px_test_fail(__FILE__, __LINE__, "%s: %s", policy, pxvm_errmsg());
        free(got), got = NULL;
    }
    cudaFree(d);
    return got;
}
#endif

/* Device views (the same strides, negative ones included) and a device dst give the host's
 * bytes; a batch refused at an image past its first parts (its bytes over max_memory) leaves a
 * device dst untouched: the images are checked before any part runs. */
TEST(ragged_cuda_device_memory_and_untouched_dst)
{
#ifndef PXVM_HAVE_CUDA_GL
    printf("  no CUDA-GL executor in this build: skipped\n");
#else
    pxvm_prog *prog;
    pxvm_runner *run;
    if (px__open("cuda", 0, &prog, &run))
        return;
    px_rimg imgs[PX_NSIZES * 3];
    int n = px__batch_of(imgs, 311);
    pxvm_view hv[PX_NSIZES * 3], dv[PX_NSIZES * 3];
    void *dmem[PX_NSIZES * 3] = {0};
    int wh[4 * PX_NSIZES * 3];
    int64_t off[PX_NSIZES * 3 + 1];
    for (int i = 0; i < n; i++) {
        hv[i] = dv[i] = imgs[i].v, wh[2 * i] = imgs[i].w, wh[2 * i + 1] = imgs[i].h;
        if (cudaMalloc(&dmem[i], imgs[i].bytes) != cudaSuccess ||
            cudaMemcpy(dmem[i], imgs[i].mem, imgs[i].bytes, cudaMemcpyHostToDevice) != cudaSuccess)
            px_test_fail(__FILE__, __LINE__, "cudaMalloc/cudaMemcpy of image %d", i);
        dv[i].data = (uint8_t *)dmem[i] + imgs[i].off, dv[i].device = 0;
    }
    const char *policy = "dynamic:merge=1,min=16,max=1024:lanczos";
    pxvm_token_format bf16;
    pxvm_token_format_preset("clip", &bf16);
    bf16.dtype = PXVM_TOKENS_BFLOAT16, bf16.layout = PXVM_TOKENS_NCHW, bf16.alpha = 1;
    CHECK_EQ(pxvm_ragged_plan(policy, 4, 0, 0, n, wh, wh + 2 * n, off, NULL), 0);
    for (int tok = 0; tok < 2; tok++) {
        const pxvm_token_format *fmt = tok ? &bf16 : NULL;
        size_t tile = 16u * (tok ? 4u * 2u : 4u), bytes = (size_t)off[n] * tile;
        uint8_t *want = px__expected(imgs, n, policy, 4, wh + 2 * n, off, fmt, &bytes);
        /* RGBA8 tiles take a dst at any address: also 1 byte past an aligned one */
        for (int dev_views = 0; dev_views < (tok ? 2 : 3) && want; dev_views++) {
            int rc, failed;
            size_t misalign = dev_views == 2 ? 1u : 0u;
            uint8_t *got = px__device_dst(run, n, dev_views ? dv : hv, policy, 4, 0, 0, fmt, bytes, misalign, &rc, &failed);
            char what[96];
            snprintf(what, sizeof what, "%s views, device dst%s%s", dev_views ? "device" : "host", tok ? ", bf16" : "",
                     misalign ? " at an odd address" : "");
            if (got && rc)
                px_test_fail(__FILE__, __LINE__, "%s: %s", what, pxvm_errmsg());
            else if (got) {
                px__diff(what, "cuda", got, want, bytes, n, off, tile);
                for (size_t k = bytes; k < bytes + 64; k++)
                    if (got[k] != 0x5A) {
                        px_test_fail(__FILE__, __LINE__, "%s: byte %zu after the tiles written", what, k - bytes);
                        break;
                    }
            }
            free(got);
        }
        free(want);
    }
    px__close(prog, run);
    /* 16 KiB: a 31x29 image is a part of its own (4 KiB a part), a 97x61 one (24 KiB staged) refused */
    pxvm_prog *sprog;
    pxvm_runner *small;
    if (!px__open("cuda", 16u << 10, &sprog, &small)) {
        px_rimg b[5];
        pxvm_view bv[5];
        for (int i = 0; i < 5; i++) {
            px__rimg(&b[i], i == 3 ? 97 : 31, i == 3 ? 61 : 29, 4, 0, 900u + (uint64_t)i);
            bv[i] = b[i].v;
        }
        int rc, failed;
        uint8_t *got = px__device_dst(small, 5, bv, "stretch", 8, 24, 16, NULL, 5u * 6u * 256u, 0, &rc, &failed);
        CHECK_EQ(rc, PXVM_USAGE);
        CHECK_EQ(failed, 3);
        CHECK_STR(pxvm_errmsg(), "image 3: a 97x61 image resized to 24x16 needs");
        for (size_t k = 0; got && k < 5u * 6u * 256u + 64u; k++)
            if (got[k] != 0x5A) {
                px_test_fail(__FILE__, __LINE__, "a refused batch wrote byte %zu of the device dst (image %zu's tiles)", k,
                             k / (6u * 256u));
                break;
            }
        free(got);
        for (int i = 0; i < 5; i++)
            px__rimg_free(&b[i]);
        px__close(sprog, small);
    }
    for (int i = 0; i < n; i++)
        cudaFree(dmem[i]), px__rimg_free(&imgs[i]);
#endif
}

/* dst may not overlap an image's bytes: the tiles are written while other images (other threads,
 * other parts) are still read, so an aliased image was read half overwritten, silently wrong.
 * The pair: dst ending at the image's lowest byte (accepted) and one byte further (refused,
 * naming the image, nothing written), also for rows bottom-up (the lowest byte is the last row's),
 * and in a batch of two the image that overlaps is the one named. */
TEST(ragged_refuses_a_dst_overlapping_an_image)
{
    for (int e = 0; e < PX_NEXEC; e++) {
        pxvm_prog *prog;
        pxvm_runner *run;
        if (px__open(px__execs[e], 0, &prog, &run))
            continue;
        enum { W = 8, H = 8, IMG = W * H * 4 }; /* exact 8x8, patch 4: 4 tiles of 64 bytes, IMG in all */
        for (int bottom_up = 0; bottom_up < 2; bottom_up++)
            for (int shift = 0; shift < 2; shift++) {
                uint8_t buf[3 * IMG], other[IMG];
                memset(buf, 0x5A, sizeof buf);
                for (int k = 0; k < IMG; k++)
                    buf[IMG + 1 + k] = other[k] = (uint8_t)(k * 7 + 3);
                pxvm_view views[2] = {pxvm_view_host(other, W, H, 4), pxvm_view_host(buf + IMG + 1, W, H, 4)};
                if (bottom_up)
                    views[1].data = buf + IMG + 1 + (H - 1) * W * 4, views[1].row_stride = -W * 4;
                /* shift 0: dst is [buf + 1, buf + IMG + 1), ending at the image's lowest byte */
                pxvm_ragged t = {"exact", 4, W, H, NULL, buf + 1 + shift, -1, IMG, -7, 0, 0};
                int rc = pxvm_runner_ragged(run, 1, views + 1, &t);
                if (!shift) {
                    CHECK_EQ(rc, 0);
                    continue;
                }
                CHECK_EQ(rc, PXVM_USAGE);
                CHECK_STR(pxvm_errmsg(), "image 0: tiles: dst");
                CHECK_STR(pxvm_errmsg(), "overlaps the image's pixels");
                CHECK_EQ(t.failed, 0);
                t.dst = buf, t.dst_bytes = 2 * IMG; /* two images' tiles: [buf, buf + 2 IMG) meets image 1 */
                CHECK_EQ(pxvm_runner_ragged(run, 2, views, &t), PXVM_USAGE);
                CHECK_STR(pxvm_errmsg(), "image 1: tiles: dst");
                CHECK_EQ(t.failed, 1);
                for (int k = 0; k <= IMG; k++)
                    if (buf[k] != 0x5A) {
                        px_test_fail(__FILE__, __LINE__, "%s: a refused call wrote dst byte %d", px__execs[e], k);
                        break;
                    }
            }
        px__close(prog, run);
    }
}
