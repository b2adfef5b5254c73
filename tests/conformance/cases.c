/* cases.c - the conformance programs: edge-value cases, one family per opcode, and a seeded
 * generator of random valid programs. Every case is built here, in memory, deterministically. */
#define _POSIX_C_SOURCE 200809L
#include "cases.h"

#include "../../isa/px_sem.h"

#include <stdlib.h>
#include <string.h>


/* Noise, or a smooth gradient (where interpolation errors would show), by seed. */
static void px__fill(pxvm_image *img, uint64_t seed)
{
    uint64_t s = seed;
    int smooth = (int)(seed & 1);
    for (int y = 0; y < img->h; y++)
        for (int x = 0; x < img->w; x++) {
            uint8_t *p = img->px + ((size_t)y * (size_t)img->w + (size_t)x) * 4u;
            if (smooth) {
                p[0] = (uint8_t)(x * 7 + y * 3), p[1] = (uint8_t)(x * y), p[2] = (uint8_t)(255 - x - y);
                p[3] = (uint8_t)(x ^ y);
            } else {
                uint64_t r = px_case_next(&s);
                memcpy(p, &r, 4);
            }
        }
}

void px_case_free(px_case *c)
{
    pxvm_image_free(&c->program);
    for (int i = 0; i < c->ninputs; i++)
        pxvm_image_free(&c->inputs[i]);
    memset(c, 0, sizeof *c);
}

static int px__finish(px_case *c, pxvm_builder *b)
{
    pxvm_error err;
    int rc = pxvm_build_finish(b, &c->program, &err);
    pxvm_build_free(b);
    return rc;
}

static int px__input(px_case *c, pxvm_builder *b, const char *name, int w, int h, uint64_t seed)
{
    int k = pxvm_build_slot(b, PXI_ROLE_INPUT, name, w, h);
    c->input_slot[c->ninputs] = k;
    pxvm_image_alloc(&c->inputs[c->ninputs], w, h, NULL);
    px__fill(&c->inputs[c->ninputs], seed);
    c->ninputs++;
    return k;
}

static void px__pyr(pxvm_builder *b, int slot)
{
    int32_t f[PXI_MAX_FIELDS] = {0};
    f[PX_FI(PYRAMID, slot)] = slot;
    pxvm_build_insn(b, PX_OP_PYRAMID, f);
}

static void px__sample(pxvm_builder *b, int src, int dst, int mode, int x, int y, int w, int h, int32_t cu, int32_t cv,
                       int32_t du, int32_t dv, uint32_t lod)
{
    int32_t f[PXI_MAX_FIELDS] = {0};
    f[PX_FI(SAMPLE, src)] = src, f[PX_FI(SAMPLE, dst)] = dst, f[PX_FI(SAMPLE, mode)] = mode;
    f[PX_FI(SAMPLE, dst_x)] = x, f[PX_FI(SAMPLE, dst_y)] = y, f[PX_FI(SAMPLE, w)] = w, f[PX_FI(SAMPLE, h)] = h;
    f[PX_FI(SAMPLE, cu)] = cu, f[PX_FI(SAMPLE, cv)] = cv, f[PX_FI(SAMPLE, du)] = du, f[PX_FI(SAMPLE, dv)] = dv;
    f[PX_FI(SAMPLE, lod)] = (int32_t)lod;
    pxvm_build_insn(b, PX_OP_SAMPLE, f);
}

static void px__gather(pxvm_builder *b, int src, int dst, int mode, int x, int y, int w, int h, int table, int tx, int ty)
{
    int32_t f[PXI_MAX_FIELDS] = {0};
    f[PX_FI(GATHER, src)] = src, f[PX_FI(GATHER, dst)] = dst, f[PX_FI(GATHER, mode)] = mode;
    f[PX_FI(GATHER, dst_x)] = x, f[PX_FI(GATHER, dst_y)] = y, f[PX_FI(GATHER, w)] = w, f[PX_FI(GATHER, h)] = h;
    f[PX_FI(GATHER, table)] = table, f[PX_FI(GATHER, table_x)] = tx, f[PX_FI(GATHER, table_y)] = ty;
    pxvm_build_insn(b, PX_OP_GATHER, f);
}

static void px__saliency(pxvm_builder *b, int src, int dst, int acc, int c, int sl, int m, int shift, int wl, int wrg,
                         int wby)
{
    int32_t f[PXI_MAX_FIELDS] = {0};
    f[PX_FI(SALIENCY, src)] = src, f[PX_FI(SALIENCY, dst)] = dst, f[PX_FI(SALIENCY, accumulate)] = acc;
    f[PX_FI(SALIENCY, centre)] = c, f[PX_FI(SALIENCY, surround)] = sl, f[PX_FI(SALIENCY, map)] = m;
    f[PX_FI(SALIENCY, shift)] = shift, f[PX_FI(SALIENCY, w_lum)] = wl, f[PX_FI(SALIENCY, w_rg)] = wrg;
    f[PX_FI(SALIENCY, w_by)] = wby;
    pxvm_build_insn(b, PX_OP_SALIENCY, f);
}

static void px__argmax(pxvm_builder *b, int src, int level, int reg, const int w[4], int space, int first, int count,
                       int radius)
{
    int32_t f[PXI_MAX_FIELDS] = {0};
    f[PX_FI(ARGMAX, src)] = src, f[PX_FI(ARGMAX, level)] = level, f[PX_FI(ARGMAX, reg)] = reg;
    f[PX_FI(ARGMAX, w_r)] = w[0], f[PX_FI(ARGMAX, w_g)] = w[1], f[PX_FI(ARGMAX, w_b)] = w[2], f[PX_FI(ARGMAX, w_a)] = w[3];
    f[PX_FI(ARGMAX, space)] = space, f[PX_FI(ARGMAX, ior_first)] = first, f[PX_FI(ARGMAX, ior_count)] = count;
    f[PX_FI(ARGMAX, radius)] = radius;
    pxvm_build_insn(b, PX_OP_ARGMAX, f);
}

static void px__aniso(pxvm_builder *b, int src, int dst, int mode, int x, int y, int w, int h, int32_t cu, int32_t cv,
                      int32_t step, uint32_t lod, int taps, int32_t tdu, int32_t tdv)
{
    int32_t f[PXI_MAX_FIELDS] = {0};
    f[PX_FI(ANISO, src)] = src, f[PX_FI(ANISO, dst)] = dst, f[PX_FI(ANISO, mode)] = mode;
    f[PX_FI(ANISO, dst_x)] = x, f[PX_FI(ANISO, dst_y)] = y, f[PX_FI(ANISO, w)] = w, f[PX_FI(ANISO, h)] = h;
    f[PX_FI(ANISO, cu)] = cu, f[PX_FI(ANISO, cv)] = cv, f[PX_FI(ANISO, du)] = step, f[PX_FI(ANISO, dv)] = step;
    f[PX_FI(ANISO, lod)] = (int32_t)lod, f[PX_FI(ANISO, taps)] = taps, f[PX_FI(ANISO, tdu)] = tdu, f[PX_FI(ANISO, tdv)] = tdv;
    pxvm_build_insn(b, PX_OP_ANISO, f);
}

/* ---- edge-value cases ----------------------------------------------------------------------- */

static int px__case_dot(px_case *c, int which)
{
    static const struct {
        const char *name;
        uint8_t a[8], b[8];
        int width;
    } k[] = {
        {"dot/300", {10, 20}, {10, 10}, 16},          {"dot/65535", {255, 255}, {255, 2}, 16},
        {"dot/overflow", {255, 255}, {255, 3}, 16},   {"dot/empty", {0, 9}, {9, 9}, 16},
        {"dot/zero_in_b", {9, 9, 9}, {1, 0, 7}, 16},  {"dot/full_width", {1, 2, 3, 4, 5, 6, 7, 8}, {8, 7, 6, 5, 4, 3, 2, 1}, 8},
    };
    if (which >= (int)(sizeof k / sizeof k[0]))
        return 0;
    if (!c)
        return 1;
    snprintf(c->name, sizeof c->name, "%s", k[which].name);
    pxvm_builder b;
    pxvm_build_init(&b, k[which].width);
    uint32_t dot = pxvm_build_insn(&b, PX_OP_DOT_RGB, NULL);
    pxvm_build_insn(&b, PX_OP_HALT, NULL);
    uint8_t ra[64] = {0}, rb[64] = {0};
    for (int i = 0; i < 8; i++)
        ra[4 * i] = k[which].a[i], rb[4 * i] = k[which].b[i], ra[4 * i + 1] = rb[4 * i + 2] = (uint8_t)(i * 30);
    int r0 = pxvm_build_row(&b, ra, 8), r1 = pxvm_build_row(&b, rb, 8), r2 = pxvm_build_row(&b, ra, 0);
    pxvm_build_patch(&b, dot, PX_FI(DOT_RGB, row_a), r0);
    pxvm_build_patch(&b, dot, PX_FI(DOT_RGB, row_b), r1);
    pxvm_build_patch(&b, dot, PX_FI(DOT_RGB, row_out), r2);
    return px__finish(c, &b) == 0 ? 1 : -1;
}

static const int px__pyr_sizes[][2] = {{1, 1}, {2, 1}, {1, 2}, {3, 3}, {1, 7}, {7, 1}, {5, 3}, {3, 5}, {17, 9},
                                       {65, 33}, {255, 2}, {2, 255}, {100, 100}, {451, 300}, {16384, 1}, {1, 16384},
                                       {3, 16384}, {2048, 2048}, {4097, 2051}}; /* the last two: the GPU's large tiles */

static int px__case_pyramid(px_case *c, int which)
{
    if (which >= (int)(sizeof px__pyr_sizes / sizeof px__pyr_sizes[0]))
        return 0;
    if (!c)
        return 1;
    int w = px__pyr_sizes[which][0], h = px__pyr_sizes[which][1];
    snprintf(c->name, sizeof c->name, "pyramid/%dx%d", w, h);
    pxvm_builder b;
    pxvm_build_init(&b, 16);
    px__pyr(&b, px__input(c, &b, "image", w, h, (uint64_t)(1000 + which)));
    pxvm_build_insn(&b, PX_OP_HALT, NULL);
    return px__finish(c, &b) == 0 ? 1 : -1;
}

/* SAMPLE: every LOD of interest x both modes x patches inside, hanging off each corner, mirrored,
 * at extreme coordinates and steps, into one atlas of 8x8 tiles. */
static int px__case_sample(px_case *c, int which)
{
    static const int sizes[][2] = {{1, 1}, {1, 9}, {9, 1}, {5, 3}, {33, 17}, {64, 64}, {451, 300}, {16384, 1}, {3001, 2049}};
    static const uint32_t lods[] = {0, 1, 127, 128, 255, 256, 333, 768, 1279, 1536, 3583, 65535};
    if (which >= (int)(sizeof sizes / sizeof sizes[0]))
        return 0;
    if (!c)
        return 1;
    int w = sizes[which][0], h = sizes[which][1];
    snprintf(c->name, sizeof c->name, "sample/%dx%d", w, h);
    const int nl = (int)(sizeof lods / sizeof lods[0]), npos = 7, tiles = nl * 2 * npos;
    pxvm_builder b;
    pxvm_build_init(&b, 64);
    int src = px__input(c, &b, "image", w, h, (uint64_t)(2000 + which));
    int atlas = pxvm_build_slot(&b, PXI_ROLE_OUTPUT, "atlas", 16 * 8, (tiles + 15) / 16 * 8);
    pxvm_build_patches(&b, atlas, 8, 8, tiles);
    px__pyr(&b, src);
    int t = 0;
    const int32_t W = w << 16, H = h << 16, one = 1 << 16;
    for (int li = 0; li < nl; li++)
        for (int mode = 0; mode < 2; mode++)
            for (int p = 0; p < npos; p++, t++) {
                int32_t cu, cv, du = one + 777 * p, dv = one - 555 * p;
                switch (p) {
                case 0: cu = W / 2, cv = H / 2; break;                                  /* centred */
                case 1: cu = 0, cv = 0; break;                                          /* top-left corner */
                case 2: cu = W, cv = H; break;                                          /* bottom-right corner */
                case 3: cu = W / 3 + 12345, cv = H / 3 - 999, du = -3 * one, dv = -one / 3; break; /* mirrored */
                case 4: cu = INT32_MAX, cv = INT32_MIN, du = INT32_MAX, dv = INT32_MIN; break;    /* extremes */
                case 5: cu = W / 2 + 1, cv = H / 2 - 1, du = one / 7, dv = 0; break;    /* sub-texel steps */
                default: cu = -5 * one, cv = H + 3 * one, du = 9 * one, dv = 2 * one; break;      /* far outside */
                }
                px__sample(&b, src, atlas, mode, (t % 16) * 8, (t / 16) * 8, 8, 8, cu, cv, du, dv, lods[li]);
            }
    pxvm_build_insn(&b, PX_OP_HALT, NULL);
    return px__finish(c, &b) == 0 ? 1 : -1;
}

/* ANISO: tap counts 1..16, tap steps along each axis, diagonal, extreme; both modes. */
static int px__case_aniso(px_case *c, int which)
{
    static const int sizes[][2] = {{1, 1}, {33, 17}, {451, 300}};
    static const int taps[] = {1, 2, 3, 8, 16};
    if (which >= (int)(sizeof sizes / sizeof sizes[0]))
        return 0;
    if (!c)
        return 1;
    int w = sizes[which][0], h = sizes[which][1];
    snprintf(c->name, sizeof c->name, "aniso/%dx%d", w, h);
    const int32_t one = 1 << 16;
    const int32_t steps[][2] = {{one, 0}, {0, one}, {3 * one / 2, one / 3}, {-2 * one, 5 * one}, {INT32_MAX, INT32_MIN}};
    const int nt = 5, ns = 5, tiles = nt * ns * 2;
    pxvm_builder b;
    pxvm_build_init(&b, 64);
    int src = px__input(c, &b, "image", w, h, (uint64_t)(4000 + which));
    int atlas = pxvm_build_slot(&b, PXI_ROLE_OUTPUT, "atlas", 10 * 8, (tiles + 9) / 10 * 8);
    px__pyr(&b, src);
    int t = 0;
    for (int ti = 0; ti < nt; ti++)
        for (int si = 0; si < ns; si++)
            for (int mode = 0; mode < 2; mode++, t++) {
                int32_t f[PXI_MAX_FIELDS] = {0};
                f[PX_FI(ANISO, src)] = src, f[PX_FI(ANISO, dst)] = atlas, f[PX_FI(ANISO, mode)] = mode;
                f[PX_FI(ANISO, dst_x)] = (t % 10) * 8, f[PX_FI(ANISO, dst_y)] = (t / 10) * 8;
                f[PX_FI(ANISO, w)] = f[PX_FI(ANISO, h)] = 8;
                f[PX_FI(ANISO, cu)] = (w << 16) / 2 + 777 * t, f[PX_FI(ANISO, cv)] = (h << 16) / 2 - 333 * t;
                f[PX_FI(ANISO, du)] = one + 1000 * si, f[PX_FI(ANISO, dv)] = one - 999 * ti;
                f[PX_FI(ANISO, lod)] = (int32_t)((unsigned)(ti * 211 + si * 97) % 1536);
                f[PX_FI(ANISO, taps)] = taps[ti];
                f[PX_FI(ANISO, tdu)] = steps[si][0], f[PX_FI(ANISO, tdv)] = steps[si][1];
                pxvm_build_insn(&b, PX_OP_ANISO, f);
            }
    pxvm_build_insn(&b, PX_OP_HALT, NULL);
    return px__finish(c, &b) == 0 ? 1 : -1;
}

/* GATHER: a table of extreme and ordinary entries, embedded as a data slot and also read from
 * the program image's own rows. */
static int px__case_gather(px_case *c, int which)
{
    if (which >= 2)
        return 0;
    if (!c)
        return 1;
    snprintf(c->name, sizeof c->name, "gather/%s", which ? "table_in_program_rows" : "table_slot");
    const int tw = 6, th = 5, w = 37, h = 23;
    uint64_t s = 3000 + (uint64_t)which;
    pxvm_image table;
    pxvm_image_alloc(&table, 3 * tw, th, NULL);
    const int32_t special[] = {0, 1, -1, 32768, 65535, 65536, INT32_MAX, INT32_MIN, w << 16, h << 16, (w << 16) + 1};
    for (int j = 0; j < th; j++)
        for (int i = 0; i < tw; i++) {
            uint8_t *e = table.px + ((size_t)j * (size_t)table.w + 3u * (size_t)i) * 4u;
            int32_t u = (i + j) % 3 ? (int32_t)(px_case_next(&s) % (uint64_t)((w + 4) << 16)) - (2 << 16)
                                    : special[(i * 5 + j) % 11];
            int32_t v = (i * j) % 4 ? (int32_t)(px_case_next(&s) % (uint64_t)((h + 4) << 16)) - (2 << 16)
                                    : special[(i + 7 * j) % 11];
            uint32_t lod = (uint32_t)((i * 97 + j * 211) % 1700) | (j == 4 ? 0xFF00u : 0u);
            pxi_write_le(e, 0, 0, 4, (uint32_t)u);
            pxi_write_le(e, 1, 0, 4, (uint32_t)v);
            pxi_write_le(e, 2, 0, 4, lod | (uint32_t)px_case_next(&s) << 16); /* B, A ignored */
        }
    /* linear and nearest over the same table; with the table in the program image's own rows, the
     * rows follow the code, so the GATHERs are patched once the rows exist */
    pxvm_builder b;
    pxvm_build_init(&b, 32);
    int src = px__input(c, &b, "image", w, h, 3100 + (uint64_t)which);
    int out = pxvm_build_slot(&b, PXI_ROLE_OUTPUT, "out", 2 * tw, th);
    int tab = which ? 0 : pxvm_build_data_slot(&b, "table", &table);
    px__pyr(&b, src);
    px__gather(&b, src, out, 0, 0, 0, tw, th, tab, 0, 0);
    uint32_t g_lin = b.ninsns - 1;
    px__gather(&b, src, out, 1, tw, 0, tw, th, tab, 0, 0);
    uint32_t g_near = b.ninsns - 1;
    pxvm_build_insn(&b, PX_OP_HALT, NULL);
    if (which) {
        int row0 = -1;
        for (int j = 0; j < th; j++) {
            int r = pxvm_build_row(&b, table.px + (size_t)j * (size_t)table.w * 4u, table.w);
            row0 = row0 < 0 ? r : row0;
        }
        pxvm_build_patch(&b, g_lin, PX_FI(GATHER, table_y), row0);
        pxvm_build_patch(&b, g_near, PX_FI(GATHER, table_y), row0);
    }
    pxvm_image_free(&table);
    return px__finish(c, &b) == 0 ? 1 : -1;
}

/* Fixation: ARGMAX ties, flat images, corners, 1x1, inhibition covering the image, SALIENCY on
 * odd sizes, relative SAMPLE/GATHER/ANISO with extreme registers, token geometry. */
static void px__set(pxvm_image *img, int x, int y, uint8_t r, uint8_t g, uint8_t bl, uint8_t a)
{
    uint8_t *p = img->px + ((size_t)y * (size_t)img->w + (size_t)x) * 4u;
    p[0] = r, p[1] = g, p[2] = bl, p[3] = a;
}

static int px__case_fixation(px_case *c, int which)
{
    static const char *const names[] = {"fixation/argmax_flat",        "fixation/argmax_ties_and_corner",
                                        "fixation/one_by_one",         "fixation/saliency_odd_scanpath",
                                        "fixation/inhibition_covers_all", "fixation/extreme_registers",
                                        "fixation/itti_64x48",         "fixation/topdown_map"};
    if (which >= (int)(sizeof names / sizeof names[0]))
        return 0;
    if (!c)
        return 1;
    snprintf(c->name, sizeof c->name, "%s", names[which]);
    pxvm_builder b;
    pxvm_build_init(&b, 32);
    static const int rgb1[4] = {1, 1, 1, 0}, r1[4] = {1, 0, 0, 0}, g1[4] = {0, 1, 0, 0};
    const int32_t one = 1 << 16;
    switch (which) {
    case 0: { /* flat: the first texel wins; the patch is centred on its centre */
        int in = px__input(c, &b, "image", 5, 3, 1);
        for (int y = 0; y < 3; y++)
            for (int x = 0; x < 5; x++)
                px__set(&c->inputs[0], x, y, 77, 77, 77, 255);
        int atlas = pxvm_build_slot(&b, PXI_ROLE_OUTPUT, "atlas", 4, 4);
        pxvm_build_patches(&b, atlas, 4, 4, 1);
        px__argmax(&b, in, 0, 0, rgb1, in, 0, 0, 0);
        px__sample(&b, in, atlas, PX_MODE_REL(PX_MODE_LINEAR, 0), 0, 0, 4, 4, 0, 0, one, one, 0);
        break;
    }
    case 1: { /* a tie (first in row-major order), a corner maximum in another channel, inhibition */
        int in = px__input(c, &b, "image", 6, 4, 2);
        for (int y = 0; y < 4; y++)
            for (int x = 0; x < 6; x++)
                px__set(&c->inputs[0], x, y, 0, 0, 0, 255);
        px__set(&c->inputs[0], 4, 1, 200, 0, 0, 255);
        px__set(&c->inputs[0], 1, 2, 200, 0, 0, 255);
        px__set(&c->inputs[0], 5, 3, 0, 255, 0, 255);
        int atlas = pxvm_build_slot(&b, PXI_ROLE_OUTPUT, "atlas", 6, 2);
        pxvm_build_patches(&b, atlas, 2, 2, 3);
        px__argmax(&b, in, 0, 0, r1, in, 0, 0, 0);
        px__argmax(&b, in, 0, 1, g1, in, 0, 0, 0);
        px__argmax(&b, in, 0, 2, r1, in, 0, 1, 1);
        for (int k = 0; k < 3; k++)
            px__sample(&b, in, atlas, PX_MODE_REL(PX_MODE_NEAREST, k), 2 * k, 0, 2, 2, 0, 0, one, one, 0);
        break;
    }
    case 2: { /* 1x1: a radius-0 disc inhibits the only texel, so ARGMAX falls back to it */
        int in = px__input(c, &b, "image", 1, 1, 3);
        pxvm_image t;
        pxvm_image_alloc(&t, 6, 2, NULL);
        for (int j = 0; j < 2; j++)
            for (int i = 0; i < 2; i++) {
                uint8_t *e = t.px + ((size_t)j * 6u + 3u * (size_t)i) * 4u;
                pxi_write_le(e, 0, 0, 4, (uint32_t)(i * one - one / 2));
                pxi_write_le(e, 1, 0, 4, (uint32_t)(j * one));
                pxi_write_le(e, 2, 0, 4, 0);
            }
        int table = pxvm_build_data_slot(&b, "table", &t);
        pxvm_image_free(&t);
        int atlas = pxvm_build_slot(&b, PXI_ROLE_OUTPUT, "atlas", 4, 2);
        pxvm_build_patches(&b, atlas, 2, 2, 2);
        px__argmax(&b, in, 0, 0, rgb1, in, 0, 0, 0);
        px__argmax(&b, in, 0, 1, rgb1, in, 0, 1, 0);
        px__gather(&b, in, atlas, PX_MODE_REL(PX_MODE_LINEAR, 1), 0, 0, 2, 2, table, 0, 0);
        px__gather(&b, in, atlas, PX_MODE_REL(PX_MODE_NEAREST, 0), 2, 0, 2, 2, table, 0, 0);
        break;
    }
    case 3: { /* odd sizes: saliency maps with clipped blocks, a 4-fixation scanpath */
        int in = px__input(c, &b, "image", 7, 5, 4);
        int sal = pxvm_build_slot(&b, PXI_ROLE_OUTPUT, "sal", 3, 2);
        int atlas = pxvm_build_slot(&b, PXI_ROLE_OUTPUT, "atlas", 12, 6);
        pxvm_build_patches(&b, atlas, 3, 3, 8);
        px__pyr(&b, in);
        px__saliency(&b, in, sal, 0, 0, 2, 1, 2, 1, 1, 1);
        px__saliency(&b, in, sal, 1, 1, 2, 1, 0, 3, 2, 1);
        for (int k = 0; k < 4; k++)
            px__argmax(&b, sal, 0, k, r1, in, 0, k, 2);
        for (int k = 0; k < 4; k++) {
            px__sample(&b, in, atlas, PX_MODE_REL(PX_MODE_LINEAR, k), 3 * k, 0, 3, 3, one / 3, -one / 5, one, one, 64);
            px__aniso(&b, in, atlas, PX_MODE_REL(PX_MODE_LINEAR, k), 3 * k, 3, 3, 3, 0, 0, 2 * one, 256, 3, one, one / 2);
        }
        break;
    }
    case 4: { /* inhibition discs that cover the image: every ARGMAX returns the global maximum */
        int in = px__input(c, &b, "image", 9, 9, 6);
        int atlas = pxvm_build_slot(&b, PXI_ROLE_OUTPUT, "atlas", 9, 3);
        pxvm_build_patches(&b, atlas, 3, 3, 3);
        for (int k = 0; k < 3; k++)
            px__argmax(&b, in, 0, k, rgb1, in, 0, k, 16384);
        for (int k = 0; k < 3; k++)
            px__sample(&b, in, atlas, PX_MODE_REL(PX_MODE_NEAREST, k), 3 * k, 0, 3, 3, 0, 0, one, one, 0);
        break;
    }
    case 5: { /* registers at the Q16 extremes: positions clamp, geometry saturates */
        int in = px__input(c, &b, "image", 10, 7, 7);
        int atlas = pxvm_build_slot(&b, PXI_ROLE_OUTPUT, "atlas", 8, 4);
        pxvm_build_patches(&b, atlas, 2, 2, 8);
        c->has_fix = 1;
        const int32_t v[16] = {INT32_MAX, INT32_MAX, INT32_MIN, INT32_MIN, INT32_MAX, INT32_MIN, 0, 0,
                               5 * one + 1, 3 * one - 1, -one, 20 * one, one / 2, one / 2, 9 * one, 6 * one};
        memcpy(c->fix, v, sizeof v);
        px__pyr(&b, in);
        for (int k = 0; k < 8; k++)
            px__sample(&b, in, atlas, PX_MODE_REL(k & 1, k), 2 * (k % 4), 2 * (k / 4), 2, 2, k & 2 ? INT32_MAX : INT32_MIN + k,
                       k * one / 4, one << (k % 3), one, (uint32_t)(k * 100));
        break;
    }
    case 6: { /* the Itti-Koch pattern: centres 1, 2 against surrounds c+2, c+3, maps at level 3 */
        int in = px__input(c, &b, "image", 64, 48, 9);
        for (int y = 0; y < 48; y++) /* a soft gradient with one red square */
            for (int x = 0; x < 64; x++)
                px__set(&c->inputs[0], x, y, (uint8_t)(90 + x / 2), (uint8_t)(100 + y / 2), 110, 255);
        for (int y = 14; y < 22; y++)
            for (int x = 40; x < 46; x++)
                px__set(&c->inputs[0], x, y, 250, 20, 20, 255);
        int sal = pxvm_build_slot(&b, PXI_ROLE_OUTPUT, "sal", 8, 6);
        int atlas = pxvm_build_slot(&b, PXI_ROLE_OUTPUT, "atlas", 16, 8);
        pxvm_build_patches(&b, atlas, 4, 4, 8);
        px__pyr(&b, in);
        int first = 1;
        for (int cl = 1; cl <= 2; cl++)
            for (int d = 2; d <= 3; d++, first = 0)
                px__saliency(&b, in, sal, !first, cl, cl + d, 3, 3, 1, 2, 1);
        for (int k = 0; k < 4; k++)
            px__argmax(&b, sal, 0, k, r1, in, 0, k, 8);
        for (int k = 0; k < 4; k++)
            for (int t = 0; t < 2; t++)
                px__sample(&b, in, atlas, PX_MODE_REL(PX_MODE_LINEAR, k), 4 * ((2 * k + t) % 4), 4 * ((2 * k + t) / 4), 4, 4,
                           t ? 6 * one : 0, 0, (1 + t) * one, (1 + t) * one, (uint32_t)(t * 256));
        break;
    }
    default: { /* top-down: ARGMAX over a caller's map of another size, in the image's coordinates */
        int in = px__input(c, &b, "image", 32, 32, 10);
        int query = px__input(c, &b, "query", 5, 3, 11);
        int atlas = pxvm_build_slot(&b, PXI_ROLE_OUTPUT, "atlas", 8, 4);
        pxvm_build_patches(&b, atlas, 4, 4, 2);
        px__pyr(&b, in);
        px__argmax(&b, query, 0, 0, g1, in, 0, 0, 0);
        px__argmax(&b, query, 0, 1, g1, in, 0, 1, 4);
        px__sample(&b, in, atlas, PX_MODE_REL(PX_MODE_LINEAR, 0), 0, 0, 4, 4, 0, 0, 2 * one, 2 * one, 256);
        px__sample(&b, in, atlas, PX_MODE_REL(PX_MODE_LINEAR, 1), 4, 0, 4, 4, 0, 0, 2 * one, 2 * one, 256);
        break;
    }
    }
    pxvm_build_insn(&b, PX_OP_HALT, NULL);
    return px__finish(c, &b) == 0 ? 1 : -1;
}

static void px__resize(pxvm_builder *b, int src, int dst, int filter, int x, int y, int w, int h, int fit, uint32_t pad)
{
    int32_t f[PXI_MAX_FIELDS] = {0};
    f[PX_FI(RESIZE, src)] = src, f[PX_FI(RESIZE, dst)] = dst, f[PX_FI(RESIZE, filter)] = filter;
    f[PX_FI(RESIZE, dst_x)] = x, f[PX_FI(RESIZE, dst_y)] = y, f[PX_FI(RESIZE, w)] = w, f[PX_FI(RESIZE, h)] = h;
    f[PX_FI(RESIZE, fit)] = fit;
    if (fit) {
        f[PX_FI(RESIZE, pad_r)] = (int32_t)(pad & 255u), f[PX_FI(RESIZE, pad_g)] = (int32_t)((pad >> 8) & 255u);
        f[PX_FI(RESIZE, pad_b)] = (int32_t)((pad >> 16) & 255u), f[PX_FI(RESIZE, pad_a)] = (int32_t)(pad >> 24);
    }
    pxvm_build_insn(b, PX_OP_RESIZE, f);
}

/* RESIZE: a source of sw x sh resized with each of the six filters into a w x h rectangle of an
 * output (one rectangle per filter, a texel apart, stacked), stretched or fitted; then the
 * output's pyramid. Upscaling, downscaling, one side only, equal sizes (a copy), 1-texel sides. */
static const int px__resize_sizes[][5] = {
    {37, 23, 16, 16, 0},   {37, 23, 16, 16, 1},  {16, 16, 37, 23, 0}, {16, 16, 37, 23, 1}, {40, 30, 40, 11, 0},
    {40, 30, 13, 30, 0},   {9, 9, 9, 9, 0},      {9, 9, 9, 9, 1},     {1, 1, 5, 3, 0},     {5, 3, 1, 1, 0},
    {300, 2, 10, 10, 1},   {2, 300, 10, 10, 1},  {451, 300, 64, 64, 1}, {300, 451, 64, 64, 1}, {451, 300, 224, 224, 0},
    {1000, 7, 33, 3, 0},   {64, 48, 200, 7, 1},
};

static int px__case_resize(px_case *c, int which)
{
    if (which >= (int)(sizeof px__resize_sizes / sizeof px__resize_sizes[0]))
        return 0;
    if (!c)
        return 1;
    const int *z = px__resize_sizes[which];
    snprintf(c->name, sizeof c->name, "resize/%dx%d_%dx%d_%s", z[0], z[1], z[2], z[3], z[4] ? "fit" : "stretch");
    pxvm_builder b;
    pxvm_build_init(&b, 16);
    int in = px__input(c, &b, "image", z[0], z[1], (uint64_t)(3000 + which));
    int out = pxvm_build_slot(&b, PXI_ROLE_OUTPUT, "out", z[2] + 3, 6 * (z[3] + 1) + 1);
    for (int f = 0; f < 6; f++)
        px__resize(&b, in, out, f, 2, 1 + f * (z[3] + 1), z[2], z[3], z[4], 0xFF204080u + (uint32_t)f);
    px__pyr(&b, out);
    pxvm_build_insn(&b, PX_OP_HALT, NULL);
    return px__finish(c, &b) == 0 ? 1 : -1;
}

/* ---- EMBED: an atlas embedded by int8 weights (shared by the edge cases and random programs) -- */

/* Weights and params data slots for EMBED of K-byte tokens into d channels: weights from `wsel`
 * (0 random, 1 all -128, 2 all 127), biases random or at the bound of V-EMBED-9 (channel 0),
 * multipliers and shifts random within the rules (some at the largest left shift of V-EMBED-12). */
static void px__embed_data(pxvm_builder *b, uint64_t *s, int k, int d, int mode, int wsel, int *wk, int *pk)
{
    int wt = (k + 3) / 4;
    pxvm_image wi, pi;
    pxvm_image_alloc(&wi, wt, d, NULL);
    pxvm_image_alloc(&pi, d, 3, NULL);
    int64_t terms = (int64_t)k * PX_EMBED_TERM_MAX;
    for (int o = 0; o < d; o++) {
        uint8_t *row = wi.px + (size_t)o * (size_t)wt * 4u;
        for (int i = 0; i < 4 * wt; i++) /* the padding after K is random too: never read */
            row[i] = wsel == 1 ? 0x80 : wsel == 2 ? 0x7F : (uint8_t)px_case_next(s);
        int32_t bias = (int32_t)(px_case_next(s) % 2000001u) - 1000000;
        if (o == 0 && px_case_below(s, 2))
            bias = (int32_t)(INT32_MAX - terms) * (px_case_below(s, 2) ? 1 : -1);
        int64_t bound = terms + (bias < 0 ? -(int64_t)bias : bias);
        int shift = -px_case_below(s, 32);
        if (mode == PX_EMBED_MODE_BF16)
            shift = px_case_below(s, 62) - 31;
        else if (px_case_below(s, 4) == 0)
            for (shift = 0; shift < PX_EMBED_SHIFT_MAX && (bound << (shift + 1)) <= INT32_MAX;)
                shift++;
        uint32_t mult = px_case_below(s, 8) == 0 ? 0x7FFFFFFFu : (1u << 30) + (uint32_t)(px_case_next(s) % (1u << 30));
        pxi_write_le(pi.px + 4u * (size_t)o, 0, 0, 4, (uint32_t)bias);
        pxi_write_le(pi.px + 4u * ((size_t)d + (size_t)o), 0, 0, 4, mult);
        pxi_write_le(pi.px + 4u * (2u * (size_t)d + (size_t)o), 0, 0, 4, (uint32_t)shift);
    }
    *wk = pxvm_build_data_slot(b, "w", &wi);
    *pk = pxvm_build_data_slot(b, "p", &pi);
    pxvm_image_free(&wi);
    pxvm_image_free(&pi);
}

static void px__embed(pxvm_builder *b, int src, int dst, int mode, int wk, int pk, int c, int zp, int d, int out_zero)
{
    int32_t f[PXI_MAX_FIELDS] = {0};
    f[PX_FI(EMBED, src)] = src, f[PX_FI(EMBED, dst)] = dst, f[PX_FI(EMBED, mode)] = mode;
    f[PX_FI(EMBED, weights)] = wk, f[PX_FI(EMBED, params)] = pk, f[PX_FI(EMBED, channels)] = c;
    f[PX_FI(EMBED, zero_point)] = zp, f[PX_FI(EMBED, d)] = d, f[PX_FI(EMBED, out_zero)] = mode == 1 ? out_zero : 0;
    pxvm_build_insn(b, PX_OP_EMBED, f);
}

/* The output slot of EMBED: one row per token of d values. */
static int px__embed_out(pxvm_builder *b, int d, int mode, int tokens)
{
    return pxvm_build_slot(b, PXI_ROLE_OUTPUT, "emb", (d * px_embed_out_bytes(mode) + 3) / 4, tokens);
}

static int px__case_embed(px_case *c, int which)
{
    static const struct {
        const char *name;
        int c, p, cols, rows, count, d, mode, zp, wsel, fill;
    } k[] = {
        /* the extremes: tokens of 255 against weights of -128 and 127, biases at the bound */
        {"embed/i32_extreme_neg", 3, 16, 2, 2, 4, 8, 0, 0, 1, 255},
        {"embed/i32_extreme_pos", 3, 16, 2, 2, 4, 8, 0, 0, 2, 255},
        {"embed/i32_zp128", 4, 3, 3, 2, 5, 37, 0, 128, 0, -1},
        {"embed/i8_requant", 3, 4, 3, 3, 9, 70, 1, 0, 0, -1},
        {"embed/i8_zp255", 1, 7, 2, 5, 10, 33, 1, 255, 0, -1},
        {"embed/bf16", 3, 5, 4, 2, 7, 66, 2, 17, 0, -1},
        {"embed/bf16_one_token", 3, 1, 1, 1, 1, 1, 2, 0, 0, -1},
    };
    if (which >= (int)(sizeof k / sizeof k[0]))
        return 0;
    if (!c)
        return 1;
    snprintf(c->name, sizeof c->name, "%s", k[which].name);
    uint64_t s = 0xE3BEDull + (uint64_t)which;
    int p = k[which].p, kk = k[which].c * p * p, d = k[which].d, mode = k[which].mode;
    int wt = (kk + 3) / 4;
    pxvm_builder b;
    pxvm_build_init(&b, wt > d ? (wt > 16 ? wt : 16) : (d > 16 ? d : 16));
    int src = px__input(c, &b, "img", k[which].cols * p, k[which].rows * p, s);
    if (k[which].fill >= 0)
        memset(c->inputs[0].px, k[which].fill, (size_t)c->inputs[0].w * (size_t)c->inputs[0].h * 4u);
    pxvm_build_patches(&b, src, p, p, k[which].count);
    int wk, pk;
    px__embed_data(&b, &s, kk, d, mode, k[which].wsel, &wk, &pk);
    int dst = px__embed_out(&b, d, mode, k[which].count);
    px__embed(&b, src, dst, mode, wk, pk, k[which].c, k[which].zp, d, px_case_below(&s, 256));
    pxvm_build_insn(&b, PX_OP_HALT, NULL);
    return px__finish(c, &b) == 0 ? 1 : -1;
}

typedef int (*px__family)(px_case *c, int which);
static const px__family px__families[] = {px__case_dot, px__case_pyramid, px__case_sample, px__case_gather,
                                          px__case_aniso, px__case_fixation, px__case_resize,
                                          px__case_embed};

int px_case_edge(int index, px_case *c)
{
    memset(c, 0, sizeof *c);
    for (size_t f = 0; f < sizeof px__families / sizeof px__families[0]; f++)
        for (int which = 0; px__families[f](NULL, which); which++)
            if (index-- == 0)
                return px__families[f](c, which);
    return 0;
}

int px_case_run_all(const pxvm_executor_ops *ops, pxvm_executor *ex, px_golden_stats *stats, px_case_reports *r)
{
    memset(r, 0, sizeof *r);
    px_case c;
    for (int i = 0;; i++) {
        int built = px_case_edge(i, &c);
        if (built == 0)
            return 0;
        char **names = realloc(r->names, sizeof(char *) * (size_t)(r->n + 1));
        char **reports = names ? realloc(r->reports, sizeof(char *) * (size_t)(r->n + 1)) : NULL;
        if (names)
            r->names = names;
        if (reports)
            r->reports = reports;
        if (!names || !reports || built < 0) {
            px_case_free(&c);
            return -1;
        }
        pxvm_limits lim;
        pxvm_limits_default(&lim);
        pxvm_program prog;
        pxvm_error err;
        const pxvm_image *in[PX_CASE_MAX_INPUTS];
        for (int k = 0; k < c.ninputs; k++)
            in[k] = &c.inputs[k];
        char *text = NULL;
        if (pxvm_program_from_image(&c.program, &lim, &prog, &err) == 0) {
            text = px_golden_run(ops, ex, &prog, c.input_slot, in, c.ninputs, c.has_fix ? c.fix : NULL, stats);
            pxvm_program_free(&prog);
        }
        r->names[r->n] = strdup(c.name);
        r->reports[r->n] = text;
        r->n++;
        px_case_free(&c);
    }
}

char *px_case_report(const px_case_reports *r, const char *name)
{
    for (int i = 0; i < r->n; i++)
        if (!strcmp(r->names[i], name))
            return r->reports[i] ? strdup(r->reports[i]) : NULL;
    return NULL;
}

void px_case_reports_free(px_case_reports *r)
{
    for (int i = 0; i < r->n; i++) {
        free(r->names[i]);
        free(r->reports[i]);
    }
    free(r->names);
    free(r->reports);
    memset(r, 0, sizeof *r);
}

/* ---- random valid programs ------------------------------------------------------------------ */

static int px__size(uint64_t *s)
{
    switch (px_case_below(s, 12)) {
    case 0: return 1;
    case 1: return 2;
    case 2: return 3;
    case 3: return 16 + px_case_below(s, 3) - 1;
    case 4: return 200 + px_case_below(s, 400);
    default: return 1 + px_case_below(s, 90);
    }
}

static int32_t px__coord(uint64_t *s, int size)
{
    switch (px_case_below(s, 10)) {
    case 0: return INT32_MAX - px_case_below(s, 3);
    case 1: return INT32_MIN + px_case_below(s, 3);
    case 2: return (int32_t)(px_case_below(s, 3) << 15); /* texel edges and centres near 0 */
    default: return (int32_t)(px_case_next(s) % (uint64_t)((int64_t)(size + 8) << 16)) - (4 << 16);
    }
}

static int32_t px__step(uint64_t *s)
{
    switch (px_case_below(s, 10)) {
    case 0: return INT32_MAX;
    case 1: return INT32_MIN;
    case 2: return 0;
    case 3: return 1 << (16 + px_case_below(s, 4));
    default: return (int32_t)(px_case_next(s) % (8u << 16)) - (4 << 16);
    }
}

static uint32_t px__lod(uint64_t *s)
{
    switch (px_case_below(s, 8)) {
    case 0: return 65535;
    case 1: return (uint32_t)px_case_below(s, 16) << 8; /* whole levels */
    case 2: return (uint32_t)(px_case_below(s, 16) << 8) | 128u;
    default: return (uint32_t)px_case_below(s, 12 * 256);
    }
}

int px_case_random(uint64_t seed, px_case *c)
{
    memset(c, 0, sizeof *c);
    snprintf(c->name, sizeof c->name, "random/%llu", (unsigned long long)seed);
    uint64_t s = seed * 0x2545F4914F6CDD1Dull + 1;
    pxvm_builder b;
    pxvm_build_init(&b, 16 + px_case_below(&s, 48));
    int nin = 1 + px_case_below(&s, 2), nw = 1 + px_case_below(&s, 2), nscratch = px_case_below(&s, 2);
    int slots[12], writable[12], nslot = 0, nwritable = 0;
    char name[16];
    for (int i = 0; i < nin; i++) {
        snprintf(name, sizeof name, "in%d", i);
        int w = px__size(&s), h = px__size(&s);
        if (px_case_below(&s, 40) == 0)
            w = 1000 + px_case_below(&s, 3000);
        slots[nslot++] = px__input(c, &b, name, w, h, px_case_next(&s));
    }
    for (int i = 0; i < nw + nscratch; i++) {
        snprintf(name, sizeof name, i < nw ? "out%d" : "tmp%d", i);
        int k = pxvm_build_slot(&b, i < nw ? PXI_ROLE_OUTPUT : PXI_ROLE_SCRATCH, name, 1 + px_case_below(&s, 64),
                                1 + px_case_below(&s, 64));
        slots[nslot++] = writable[nwritable++] = k;
    }
    /* fixation: a third of the programs set registers, sample relative to them, and may compute
     * saliency maps (slot "sal": level `sal_map` of the first input) and ARGMAX */
    int use_fix = px_case_below(&s, 3) == 0, sal = -1, sal_map = 0;
    const pxvm_builder_slot *in0 = &b.slots[slots[0]];
    int in0_levels = px_mip_levels(in0->w, in0->h);
    if (use_fix) {
        c->has_fix = 1;
        for (int r = 0; r < 2 * PX_FIX_REGS; r++)
            c->fix[r] = px__coord(&s, in0->w);
        if (in0_levels >= 2) {
            sal_map = px_case_below(&s, in0_levels);
            sal = pxvm_build_slot(&b, PXI_ROLE_OUTPUT, "sal", px_mip_dim(in0->w, sal_map), px_mip_dim(in0->h, sal_map));
            slots[nslot++] = sal;
        }
    }
    int table = -1;
    if (px_case_below(&s, 2)) {
        pxvm_image t;
        int tw = 1 + px_case_below(&s, 6), th = 1 + px_case_below(&s, 6);
        pxvm_image_alloc(&t, 3 * tw, th, NULL);
        for (int j = 0; j < th; j++)
            for (int i = 0; i < tw; i++) {
                uint8_t *e = t.px + ((size_t)j * (size_t)t.w + 3u * (size_t)i) * 4u;
                pxi_write_le(e, 0, 0, 4, (uint32_t)px__coord(&s, 64));
                pxi_write_le(e, 1, 0, 4, (uint32_t)px__coord(&s, 64));
                pxi_write_le(e, 2, 0, 4, px__lod(&s) | ((uint32_t)px_case_next(&s) << 16));
            }
        if (3 * tw <= b.width) {
            table = pxvm_build_data_slot(&b, "table", &t);
            slots[nslot++] = table;
        }
        pxvm_image_free(&t);
    }
    /* EMBED: a third of the programs embed an atlas the other instructions write into (its own
     * random numbers: the rest of a seed's program draws as before) */
    uint64_t es = seed ^ 0xE3BEDE3BEDull;
    int emb_src = -1, emb_w = 0, emb_p = 0, emb_dst = 0, emb_c = 3, emb_d = 1, emb_mode = 0;
    if (px_case_below(&es, 3) == 0) {
        int pw = 1 + px_case_below(&es, 8), ph = 1 + px_case_below(&es, 8);
        int cols = 1 + px_case_below(&es, 5), prow = 1 + px_case_below(&es, 5);
        static const int chans[] = {1, 3, 4};
        emb_c = chans[px_case_below(&es, 3)];
        while ((emb_c * pw * ph + 3) / 4 > b.width)
            pw = 1 + pw / 2, ph = 1 + ph / 2;
        emb_d = 1 + px_case_below(&es, b.width);
        emb_mode = px_case_below(&es, 3);
        int count = cols * prow - px_case_below(&es, cols);
        emb_src = pxvm_build_slot(&b, PXI_ROLE_SCRATCH, "atlas", cols * pw, prow * ph);
        pxvm_build_patches(&b, emb_src, pw, ph, count);
        slots[nslot++] = writable[nwritable++] = emb_src;
        px__embed_data(&b, &es, emb_c * pw * ph, emb_d, emb_mode, px_case_below(&es, 8) == 0 ? 1 + px_case_below(&es, 2) : 0,
                       &emb_w, &emb_p);
        emb_dst = px__embed_out(&b, emb_d, emb_mode, count);
    }
    int ninsns = 1 + px_case_below(&s, 30);
    uint32_t dots[20]; /* 3 rows each, and rows are u8 operands */
    int ndots = 0;
    for (int n = 0; n < ninsns; n++) {
        int nops = use_fix ? 16 : 13; /* 3/13 PYRAMID, 6/13 SAMPLE, 2/13 GATHER, 1/13 DOT_RGB, 1/13 RESIZE */
        int op = px_case_below(&s, nops);
        if (op == nops - 1) { /* RESIZE of any other slot into a rectangle of a writable one */
            int dst = writable[px_case_below(&s, nwritable)], src;
            do
                src = px_case_below(&s, 6) ? slots[px_case_below(&s, nslot)] : 0;
            while (src == dst);
            const pxvm_builder_slot *d = &b.slots[dst];
            int w = 1 + px_case_below(&s, d->w), h = 1 + px_case_below(&s, d->h);
            int x = px_case_below(&s, d->w - w + 1), y = px_case_below(&s, d->h - h + 1);
            int fit = px_case_below(&s, 2);
            px__resize(&b, src, dst, px_case_below(&s, 6), x, y, w, h, fit, (uint32_t)px_case_next(&s));
        } else if (op == 12 && sal >= 0) { /* SALIENCY of the first input into "sal" */
            int cl = px_case_below(&s, sal_map + 1 < in0_levels - 1 ? sal_map + 1 : in0_levels - 1);
            int sl = cl + 1 + px_case_below(&s, in0_levels - cl - 1);
            px__saliency(&b, slots[0], sal, px_case_below(&s, 2), cl, sl, sal_map, px_case_below(&s, 21), px_case_below(&s, 256),
                         px_case_below(&s, 256), px_case_below(&s, 256));
        } else if (op >= 12) { /* ARGMAX of any slot level, with or without inhibition */
            int src = slots[px_case_below(&s, nslot)], space = slots[px_case_below(&s, nslot)];
            const pxvm_builder_slot *ss = &b.slots[src];
            int first = px_case_below(&s, PX_FIX_REGS), count = px_case_below(&s, PX_FIX_REGS - first + 1);
            int w4[4] = {px_case_below(&s, 256), px_case_below(&s, 256), px_case_below(&s, 256), px_case_below(&s, 4) ? 0 : px_case_below(&s, 256)};
            int radius = px_case_below(&s, 8) == 0 ? 16384 : px_case_below(&s, 1 + ss->w / 2);
            px__argmax(&b, src, px_case_below(&s, px_mip_levels(ss->w, ss->h)), px_case_below(&s, PX_FIX_REGS), w4, space, first,
                       count, radius);
        } else if (op < 3) { /* PYRAMID of any slot, the program image included */
            px__pyr(&b, px_case_below(&s, 8) ? slots[px_case_below(&s, nslot)] : 0);
        } else if (op < 11) { /* SAMPLE or GATHER into a writable slot */
            int dst = writable[px_case_below(&s, nwritable)], src;
            do
                src = px_case_below(&s, 5) ? slots[px_case_below(&s, nslot)] : 0;
            while (src == dst);
            const pxvm_builder_slot *d = &b.slots[dst];
            int w = 1 + px_case_below(&s, d->w), h = 1 + px_case_below(&s, d->h);
            int x = px_case_below(&s, d->w - w + 1), y = px_case_below(&s, d->h - h + 1);
            int mode = px_case_below(&s, 4) == 0;
            if (use_fix && px_case_below(&s, 2))
                mode = PX_MODE_REL(mode, px_case_below(&s, PX_FIX_REGS));
            int tab = op >= 9 ? slots[px_case_below(&s, nslot)] : -1;
            if (tab >= 0 && tab != dst && b.slots[tab].w >= 3) {
                const pxvm_builder_slot *t = &b.slots[tab];
                w = w < t->w / 3 ? w : t->w / 3;
                h = h < t->h ? h : t->h;
                px__gather(&b, src, dst, mode, x, y, w, h, tab, px_case_below(&s, t->w - 3 * w + 1), px_case_below(&s, t->h - h + 1));
            } else if (px_case_below(&s, 4) == 0) { /* ANISO */
                int32_t sw = src ? b.slots[src].w : b.width, f[PXI_MAX_FIELDS] = {0};
                f[PX_FI(ANISO, src)] = src, f[PX_FI(ANISO, dst)] = dst, f[PX_FI(ANISO, mode)] = mode;
                f[PX_FI(ANISO, dst_x)] = x, f[PX_FI(ANISO, dst_y)] = y, f[PX_FI(ANISO, w)] = w, f[PX_FI(ANISO, h)] = h;
                f[PX_FI(ANISO, cu)] = px__coord(&s, sw), f[PX_FI(ANISO, cv)] = px__coord(&s, sw);
                f[PX_FI(ANISO, du)] = px__step(&s), f[PX_FI(ANISO, dv)] = px__step(&s);
                f[PX_FI(ANISO, lod)] = (int32_t)px__lod(&s), f[PX_FI(ANISO, taps)] = 1 + px_case_below(&s, PX_MAX_TAPS);
                f[PX_FI(ANISO, tdu)] = px__step(&s), f[PX_FI(ANISO, tdv)] = px__step(&s);
                pxvm_build_insn(&b, PX_OP_ANISO, f);
            } else {
                int32_t sw = src ? b.slots[src].w : b.width;
                px__sample(&b, src, dst, mode, x, y, w, h, px__coord(&s, sw), px__coord(&s, sw), px__step(&s), px__step(&s),
                           px__lod(&s));
            }
        } else if (ndots < 20) { /* DOT_RGB: rows are appended after the code */
            dots[ndots++] = pxvm_build_insn(&b, PX_OP_DOT_RGB, NULL);
        }
    }
    if (emb_src >= 0)
        px__embed(&b, emb_src, emb_dst, emb_mode, emb_w, emb_p, emb_c, px_case_below(&es, 2) ? 0 : px_case_below(&es, 256),
                  emb_d, px_case_below(&es, 256));
    pxvm_build_insn(&b, PX_OP_HALT, NULL);
    for (int d = 0; d < ndots; d++) {
        uint8_t ra[64 * 4], rb[64 * 4];
        int small = px_case_below(&s, 16) != 0; /* mostly sums that fit; sometimes an overflow trap */
        for (int i = 0; i < 64 * 4; i++) {
            ra[i] = (uint8_t)(small ? px_case_next(&s) % 9 : px_case_next(&s));
            rb[i] = (uint8_t)(small ? px_case_next(&s) % 9 : px_case_next(&s));
        }
        int r0 = pxvm_build_row(&b, ra, b.width), r1 = pxvm_build_row(&b, rb, b.width), r2 = pxvm_build_row(&b, ra, 0);
        pxvm_build_patch(&b, dots[d], PX_FI(DOT_RGB, row_a), px_case_below(&s, 6) ? r0 : r2);
        pxvm_build_patch(&b, dots[d], PX_FI(DOT_RGB, row_b), r1);
        pxvm_build_patch(&b, dots[d], PX_FI(DOT_RGB, row_out), r2);
    }
    return px__finish(c, &b) == 0 ? 1 : -1;
}
