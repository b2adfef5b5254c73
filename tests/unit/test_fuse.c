/* test_fuse.c - fused EMBED (pxvm_runner_fuse_embed, SPEC "Fused EMBED", [A-FUSE-n]): each rule's
 * edge pair (the last program or call accepted, the first refused, by one instruction or value,
 * with its class, error and the instruction or slot its message names) on every executor present,
 * the SPEC's IDs against those pairs, and EMBED's bytes fused against unfused (a batch of two, an
 * any-size input switched between sizes and back), on every executor present: on the cuda one the
 * fetches then write the tokens into EMBED's staged rows (the GPU check runs this file there);
 * and the cuda executor's fused write (embed_fuse.h) against its staging kernel's, on the host. */
#include <stdlib.h>
#include <string.h>

#include "../../isa/px_sem.h"
#include "test.h"

/* the CUDA executor's staging and fused writes, run on the host (their CPU twins) */
typedef struct {
    const pxvm_image *atlas;
} px_fuse_twin;
#define PX_EMB_CTX const px_fuse_twin *
#define PX_EMB_TEXEL(ctx, which, x, y) ((void)(which), px_px((ctx)->atlas, (x), (y)))
#define PX_EMB_STORE(ctx, x, y, v) ((void)(ctx), (void)(x), (void)(y), (void)(v))
#include "../../executors/cuda_gl/embed_fuse.h"
#include "../../executors/cuda_gl/embed_tile.h"

static const char *const px__fexecs[] = {"cpu", "cuda"};
enum { PX_FNEXEC = 2 };

/* What a program of the pairs varies. The base: PYRAMID image; SAMPLE, SAMPLE into the two 8x8
 * tiles of `atlas` (scratch, 16x8); EMBED atlas -> emb (int32, d = 4, K = 192); HALT. */
typedef struct {
    int no_embed;     /* A-FUSE-1 */
    int atlas_role;   /* A-FUSE-2 (0: scratch) */
    int persistent;   /* A-FUSE-3 */
    int writer_op;    /* A-FUSE-4: the second writer's opcode (0: SAMPLE) */
    int embed_first;  /* A-FUSE-5: EMBED before the second writer */
    int reader;       /* A-FUSE-6: an instruction after EMBED: 1 SAMPLE src, 2 PYRAMID slot, 3 GATHER table */
    int reads_atlas;  /* ... naming the atlas (1) or another slot (0) */
    int any_size;     /* the image an any-size input (16 .. 64) */
    int gap;          /* rows of the second token that its writer leaves unwritten (at the bottom) */
} px_fvar;

enum { PX_F_IMAGE = 1, PX_F_ATLAS, PX_F_W, PX_F_P, PX_F_EMB, PX_F_OTHER, PX_F_TAB };

static void px__sample(pxvm_builder *b, int op, int src, int dst, int x, int y, int h, int cu, int cv)
{
    int32_t f[PXI_MAX_FIELDS] = {0};
    if (op == PX_OP_RESIZE) {
        f[PX_FI(RESIZE, src)] = src, f[PX_FI(RESIZE, dst)] = dst, f[PX_FI(RESIZE, filter)] = 0;
        f[PX_FI(RESIZE, dst_x)] = x, f[PX_FI(RESIZE, dst_y)] = y, f[PX_FI(RESIZE, w)] = 8, f[PX_FI(RESIZE, h)] = h;
        pxvm_build_insn(b, op, f);
        return;
    }
    f[PX_FI(SAMPLE, src)] = src, f[PX_FI(SAMPLE, dst)] = dst, f[PX_FI(SAMPLE, dst_x)] = x, f[PX_FI(SAMPLE, dst_y)] = y;
    f[PX_FI(SAMPLE, w)] = 8, f[PX_FI(SAMPLE, h)] = h, f[PX_FI(SAMPLE, cu)] = cu << 16, f[PX_FI(SAMPLE, cv)] = cv << 16;
    f[PX_FI(SAMPLE, du)] = 3 << 15, f[PX_FI(SAMPLE, dv)] = 1 << 16, f[PX_FI(SAMPLE, lod)] = 96;
    if (op == PX_OP_ANISO)
        f[PX_FI(ANISO, taps)] = 3, f[PX_FI(ANISO, tdu)] = 1 << 15, f[PX_FI(ANISO, tdv)] = 1 << 14;
    pxvm_build_insn(b, op, f);
}

/* The program image of v (0), or -1 (reported). */
static int px__fimage(const px_fvar *v, pxvm_image *img)
{
    enum { K = 192, D = 4 };
    pxvm_builder b;
    pxvm_build_init(&b, 64);
    int image = pxvm_build_slot(&b, PXI_ROLE_INPUT, "image", 32, 32);
    if (v->any_size)
        pxvm_build_any_size(&b, image, 16, 64, 0);
    int atlas = pxvm_build_slot(&b, v->atlas_role ? v->atlas_role : PXI_ROLE_SCRATCH, "atlas", 16, 8);
    pxvm_build_patches(&b, atlas, 8, 8, 2);
    if (v->persistent)
        pxvm_build_persist(&b, atlas);
    pxvm_image wi, pi;
    pxvm_image_alloc(&wi, K / 4, D, NULL);
    pxvm_image_alloc(&pi, D, 1, NULL);
    uint64_t s = 7;
    for (size_t i = 0; i < (size_t)K * D; i++)
        wi.px[i] = (uint8_t)(int8_t)((int)(px_rand(&s) % 21u) - 10);
    for (int o = 0; o < D; o++)
        px_set(&pi, o, 0, (uint32_t)(int32_t)(o * 1000 - 1500));
    int wk = pxvm_build_data_slot(&b, "w", &wi), pk = pxvm_build_data_slot(&b, "p", &pi);
    pxvm_image_free(&wi);
    pxvm_image_free(&pi);
    int emb = pxvm_build_slot(&b, PXI_ROLE_OUTPUT, "emb", D, 2);
    int other = pxvm_build_slot(&b, PXI_ROLE_SCRATCH, "other", 8, 8);
    int tab = pxvm_build_slot(&b, PXI_ROLE_SCRATCH, "tab", 24, 8);
    (void)wk, (void)pk, (void)emb, (void)other, (void)tab;
    int32_t f[PXI_MAX_FIELDS] = {0};
    f[PX_FI(PYRAMID, slot)] = PX_F_IMAGE;
    pxvm_build_insn(&b, PX_OP_PYRAMID, f);
    int32_t e[PXI_MAX_FIELDS] = {0};
    e[PX_FI(EMBED, src)] = PX_F_ATLAS, e[PX_FI(EMBED, dst)] = PX_F_EMB, e[PX_FI(EMBED, mode)] = 0;
    e[PX_FI(EMBED, weights)] = PX_F_W, e[PX_FI(EMBED, params)] = PX_F_P, e[PX_FI(EMBED, channels)] = 3;
    e[PX_FI(EMBED, zero_point)] = 3, e[PX_FI(EMBED, d)] = D;
    px__sample(&b, PX_OP_SAMPLE, PX_F_IMAGE, PX_F_ATLAS, 0, 0, 8, 11, 13);
    if (v->embed_first && !v->no_embed)
        pxvm_build_insn(&b, PX_OP_EMBED, e);
    px__sample(&b, v->writer_op ? v->writer_op : PX_OP_SAMPLE, PX_F_IMAGE, PX_F_ATLAS, 8, 0, 8 - v->gap, 20, 17);
    if (!v->embed_first && !v->no_embed)
        pxvm_build_insn(&b, PX_OP_EMBED, e);
    int from = v->reads_atlas ? PX_F_ATLAS : PX_F_TAB;
    if (v->reader == 1) {
        px__sample(&b, PX_OP_SAMPLE, from, PX_F_OTHER, 0, 0, 8, 4, 4);
    } else if (v->reader == 2) {
        int32_t py[PXI_MAX_FIELDS] = {0};
        py[PX_FI(PYRAMID, slot)] = from;
        pxvm_build_insn(&b, PX_OP_PYRAMID, py);
    } else if (v->reader == 3) {
        int32_t g[PXI_MAX_FIELDS] = {0};
        g[PX_FI(GATHER, src)] = PX_F_IMAGE, g[PX_FI(GATHER, dst)] = PX_F_OTHER, g[PX_FI(GATHER, w)] = 1;
        g[PX_FI(GATHER, h)] = 1, g[PX_FI(GATHER, table)] = from;
        pxvm_build_insn(&b, PX_OP_GATHER, g);
    }
    pxvm_build_insn(&b, PX_OP_HALT, NULL);
    pxvm_error err;
    int rc = pxvm_build_finish(&b, img, &err);
    pxvm_build_free(&b);
    if (rc < 0)
        px_test_fail(__FILE__, __LINE__, "build: %s", err.msg);
    return rc < 0 ? -1 : 0;
}

/* The program of v as a pxvm_prog (0), or the load's class with its message. */
static int px__fprog(const px_fvar *v, pxvm_prog **out)
{
    pxvm_image img;
    pxvm_error err;
    uint8_t *png = NULL;
    size_t len = 0;
    if (px__fimage(v, &img))
        return -1;
    int rc = pxvm_png_encode(&img, &png, &len, &err);
    pxvm_image_free(&img);
    if (rc < 0) {
        px_test_fail(__FILE__, __LINE__, "encode: %s", err.msg);
        return -1;
    }
    rc = pxvm_prog_from_png(png, len, "fuse.pxi", NULL, out);
    free(png);
    if (rc)
        px_test_fail(__FILE__, __LINE__, "load: %s", pxvm_errmsg());
    return rc;
}

/* A runner of prog on exec, batch items: 0; 1 when cuda is not here (said once); -1 failed. */
static int px__fopen(const char *exec, const pxvm_prog *prog, int batch, pxvm_runner **run)
{
    static int said;
    int rc = pxvm_runner_open(prog, exec, 0, 2, batch, run);
    if (!rc)
        return 0;
    const char *want = getenv("PXVM_TEST_EXECUTOR");
    if (!strcmp(exec, "cuda") && rc == PXVM_UNAVAILABLE && !(want && !strcmp(want, "cuda"))) {
        if (!said++)
            printf("  cuda: not here (%s): its cases skipped\n", pxvm_errmsg());
        return 1;
    }
    px_test_fail(__FILE__, __LINE__, "%s: %s", exec, pxvm_errmsg());
    return -1;
}

/* Variant v's program and one runner of it on exec, batch 1: 0; 1 when cuda is not here, -1
 * failed (reported); nothing left open but on 0. */
static int px__fone(const char *exec, const px_fvar *v, pxvm_prog **prog, pxvm_runner **run)
{
    *prog = NULL, *run = NULL;
    if (px__fprog(v, prog))
        return -1;
    int o = px__fopen(exec, *prog, 1, run);
    if (o) {
        pxvm_prog_free(*prog);
        *prog = NULL;
    }
    return o;
}

/* The any-size (or not) program whose atlas ANISO writes, and two runners of it on exec, batch 2:
 * 0; 1 when cuda is not here (nothing left open); -1 failed (reported). */
static int px__fpair(const char *exec, int any, pxvm_prog **prog, pxvm_runner **plain, pxvm_runner **fused)
{
    px_fvar v;
    memset(&v, 0, sizeof v);
    v.any_size = any;
    v.writer_op = PX_OP_ANISO; /* SAMPLE and ANISO write the atlas, its tokens overlap nothing */
    *prog = NULL, *plain = *fused = NULL;
    if (px__fprog(&v, prog))
        return -1;
    int o = px__fopen(exec, *prog, 2, plain);
    if (o == 0 && (o = px__fopen(exec, *prog, 2, fused)) != 0)
        pxvm_runner_close(*plain);
    if (o) {
        pxvm_prog_free(*prog);
        *prog = NULL, *plain = *fused = NULL;
    }
    return o;
}

/* ---- the pairs ---------------------------------------------------------------------------- */

/* One pair member: what it builds and calls, and (refused) the class and a fragment wanted. */
typedef struct {
    px_fvar v;
    int on;           /* the value given to pxvm_runner_fuse_embed */
    int read;         /* A-FUSE-7: after a run with fusion on: 1 read level `level`, 2 read_patches,
                       * 3 read_tokens, 4 exec with the atlas's patches (or emb's level 0) out */
    int level;
    int read_other;   /* ... of emb (accepted side) */
    int fuse_off;     /* fusion off before the read: 1 without a run since (still unkept), 2 after one */
    int want_rc;
    char msg[200];
} px_fcase;

typedef void (*px_fmake)(int refuse, int variant, px_fcase *c);

static void px__f1(int refuse, int variant, px_fcase *c)
{
    (void)variant;
    c->v.no_embed = refuse;
    snprintf(c->msg, sizeof c->msg, "pxvm_runner_fuse_embed: the program has no EMBED instruction to fuse");
}

static void px__f2(int refuse, int variant, px_fcase *c)
{
    (void)variant;
    c->v.atlas_role = refuse ? PXI_ROLE_OUTPUT : 0;
    snprintf(c->msg, sizeof c->msg, "instruction 3 (EMBED): cannot be fused: its atlas atlas is not a scratch slot "
             "(its role: output)");
}

static void px__f3(int refuse, int variant, px_fcase *c)
{
    (void)variant;
    c->v.persistent = refuse;
    snprintf(c->msg, sizeof c->msg, "instruction 3 (EMBED): cannot be fused: its atlas atlas is persistent");
}

static void px__f4(int refuse, int variant, px_fcase *c)
{
    /* the last accepted writers: ANISO (variant 0) and SAMPLE (1); refused: RESIZE */
    c->v.writer_op = refuse ? PX_OP_RESIZE : variant ? PX_OP_SAMPLE : PX_OP_ANISO;
    snprintf(c->msg, sizeof c->msg, "instruction 3 (EMBED): cannot be fused: its atlas atlas is written by "
             "instruction 2 (RESIZE); only SAMPLE, ANISO and GATHER");
}

static void px__f5(int refuse, int variant, px_fcase *c)
{
    (void)variant; /* the second writer just before the EMBED (index 2, EMBED 3), or just after (3, EMBED 2) */
    c->v.embed_first = refuse;
    snprintf(c->msg, sizeof c->msg, "instruction 2 (EMBED): cannot be fused: its atlas atlas is written by "
             "instruction 3 (SAMPLE), after the EMBED");
}

static void px__f6(int refuse, int variant, px_fcase *c)
{
    static const char *const ops[] = {"SAMPLE", "PYRAMID", "GATHER"};
    c->v.reader = variant + 1, c->v.reads_atlas = refuse;
    snprintf(c->msg, sizeof c->msg, "instruction 3 (EMBED): cannot be fused: its atlas atlas is read by instruction 4 "
             "(%s) too", ops[variant]);
}

static void px__f7(int refuse, int variant, px_fcase *c)
{
    static const char *const calls[] = {"pxvm_runner_read", "pxvm_runner_read_patches", "pxvm_runner_read_tokens",
                                        "pxvm_runner_read_patches", "pxvm_runner_read"};
    c->read = variant == 4 ? 1 : variant + 1;
    if (variant == 0)
        c->level = refuse ? 0 : 1; /* level 0 refused, level 1 (zeros: nothing builds it) read */
    else if (variant == 3)
        c->read_other = !refuse; /* exec: emb's level 0 read, the atlas's patches refused */
    else if (variant == 4)
        c->fuse_off = refuse ? 1 : 2; /* off: the last run's atlas is unkept until a run without fusion */
    else
        c->fuse_off = refuse ? 0 : 2; /* fusion off and a run since: the atlas reads as always */
    snprintf(c->msg, sizeof c->msg, "%s: slot 2 ('atlas') is the atlas of a fused EMBED", calls[variant]);
}

static void px__f8(int refuse, int variant, px_fcase *c)
{
    c->on = variant ? (refuse ? -1 : 0) : (refuse ? 2 : 1);
    snprintf(c->msg, sizeof c->msg, "pxvm_runner_fuse_embed: on must be 0 or 1 (got %d)", c->on);
}

typedef struct {
    const char *id;
    px_fmake make;
    int variants;
} px_frule;

static const px_frule px_frules[] = {
    {"A-FUSE-1", px__f1, 1}, {"A-FUSE-2", px__f2, 1}, {"A-FUSE-3", px__f3, 1}, {"A-FUSE-4", px__f4, 2},
    {"A-FUSE-5", px__f5, 1}, {"A-FUSE-6", px__f6, 3}, {"A-FUSE-7", px__f7, 5}, {"A-FUSE-8", px__f8, 2},
};
#define PX_NFRULES (sizeof px_frules / sizeof px_frules[0])

/* A random image bound to every item of the runner's slot 1 at w x h. */
static int px__fbind(pxvm_runner *run, int w, int h, uint64_t seed)
{
    int items = pxvm_runner_batch(run);
    uint8_t *px = malloc((size_t)w * (size_t)h * 3u * (size_t)items);
    for (size_t i = 0; i < (size_t)w * (size_t)h * 3u * (size_t)items; i++)
        px[i] = (uint8_t)(px_rand(&seed) >> 24);
    pxvm_view v = pxvm_view_host(px, w, h, 3);
    v.items = items, v.item_stride = (int64_t)w * h * 3;
    int rc = pxvm_runner_bind(run, PX_F_IMAGE, 0, &v);
    free(px);
    return rc;
}

/* Case c on exec: the call's return code (fuse_embed's, or the read's after a run). */
static int px__frun(const char *exec, const px_fcase *c, int *skipped)
{
    pxvm_prog *prog;
    pxvm_runner *run;
    int o = px__fone(exec, &c->v, &prog, &run);
    *skipped = o > 0;
    if (o)
        return -1;
    int rc = pxvm_runner_fuse_embed(run, c->on);
    if (rc == 0 && c->read) {
        if (px__fbind(run, 32, 32, 3) || pxvm_runner_run(run)) {
            px_test_fail(__FILE__, __LINE__, "%s: run: %s", exec, pxvm_errmsg());
            rc = -1;
        } else if (c->fuse_off && (pxvm_runner_fuse_embed(run, 0) || (c->fuse_off == 2 && pxvm_runner_run(run)))) {
            px_test_fail(__FILE__, __LINE__, "%s: fusion off: %s", exec, pxvm_errmsg());
            rc = -1;
        } else {
            uint8_t buf[16 * 8 * 4 * 4];
            pxvm_view dst = {buf, -1, 1, 16 >> c->level, 8 >> c->level, 4, 0, (16 >> c->level) * 4, 4, 1};
            pxvm_view patches = {buf, -1, 1, 8, 16, 4, 0, 32, 4, 1};
            if (c->read == 1) {
                rc = pxvm_runner_read(run, PX_F_ATLAS, c->level, 0, &dst);
            } else if (c->read == 2) {
                rc = pxvm_runner_read_patches(run, PX_F_ATLAS, 0, &patches);
            } else if (c->read == 3) {
                pxvm_token_format fmt;
                pxvm_token_format_preset("none", &fmt);
                rc = pxvm_runner_read_tokens(run, PX_F_ATLAS, 0, 1, &fmt, buf, -1);
            } else {
                pxvm_view emb = {buf, -1, 1, 4, 2, 4, 0, 16, 4, 1};
                int slot = c->read_other ? PX_F_EMB : PX_F_ATLAS, kind = c->read_other ? 0 : 1;
                rc = pxvm_runner_exec(run, 0, NULL, NULL, NULL, 1, &slot, &kind, c->read_other ? &emb : &patches);
            }
        }
    }
    pxvm_runner_close(run);
    pxvm_prog_free(prog);
    return rc;
}

TEST(fuse_every_refusal_has_its_edge_pair)
{
    for (int e = 0; e < PX_FNEXEC; e++) {
        int pairs = 0, skipped = 0;
        for (size_t r = 0; r < PX_NFRULES && !skipped; r++)
            for (int v = 0; v < px_frules[r].variants && !skipped; v++)
                for (int refuse = 0; refuse < 2 && !skipped; refuse++) {
                    px_fcase c;
                    memset(&c, 0, sizeof c);
                    c.on = 1, c.want_rc = PXVM_USAGE;
                    px_frules[r].make(refuse, v, &c);
                    int rc = px__frun(px__fexecs[e], &c, &skipped);
                    if (skipped)
                        break;
                    const char *msg = pxvm_errmsg();
                    if (!refuse && rc)
                        px_test_fail(__FILE__, __LINE__, "%s variant %d on %s: the accepted case fails: %s",
                                     px_frules[r].id, v, px__fexecs[e], msg);
                    else if (refuse && (rc != c.want_rc || !strstr(msg, c.msg)))
                        px_test_fail(__FILE__, __LINE__, "%s variant %d on %s: got %d '%s'; wanted %d with '%s'",
                                     px_frules[r].id, v, px__fexecs[e], rc, rc ? msg : "", c.want_rc, c.msg);
                    else if (refuse)
                        pairs++;
                }
        if (!skipped)
            printf("  %s: %d refusals at their edges\n", px__fexecs[e], pairs);
    }
}

/* Every [A-FUSE-n] of SPEC.md has a pair above, is defined once and has one index row
 * "| A-FUSE-n | usage | `CODE` |"; every pair above has its ID there. */
static const char *px__fuse_id(size_t i) { return px_frules[i].id; }
static void px__fuse_row(size_t i, const char *rest) { px_spec_row_is(px_frules[i].id, rest, "usage", NULL); }

TEST(fuse_spec_ids_have_their_pairs)
{
    px_spec_ids t = {"A-FUSE-", "test_fuse.c", PX_NFRULES, px__fuse_id, px__fuse_row};
    CHECK_EQ(px_spec_ids_check(&t), (int)PX_NFRULES);
}

/* ---- the bytes ---------------------------------------------------------------------------- */

/* emb of both items, and the atlas's token geometry, after a run at w x h. */
static int px__fout(pxvm_runner *run, int w, int h, uint64_t seed, uint8_t emb[2][4 * 2 * 4], int32_t geom[2 * 2 * 5])
{
    pxvm_view v = {emb, -1, 2, 4, 2, 4, 4 * 2 * 4, 16, 4, 1};
    if (px__fbind(run, w, h, seed) || pxvm_runner_run(run) || pxvm_runner_read(run, PX_F_EMB, 0, 0, &v) ||
        pxvm_runner_read_geometry(run, PX_F_ATLAS, 0, 2, geom, -1)) {
        px_test_fail(__FILE__, __LINE__, "run at %dx%d: %s", w, h, pxvm_errmsg());
        return -1;
    }
    return 0;
}

TEST(fuse_embed_bytes_equal_unfused_in_batches_and_across_sizes)
{
    static const int sizes[][2] = {{32, 32}, {48, 20}, {32, 32}, {64, 64}};
    for (int e = 0; e < PX_FNEXEC; e++)
        for (int any = 0; any < 2; any++) {
            pxvm_prog *prog;
            pxvm_runner *plain, *fused;
            int o = px__fpair(px__fexecs[e], any, &prog, &plain, &fused);
            if (o < 0)
                return;
            if (o)
                break;
            CHECK_EQ(pxvm_runner_fuse_embed(fused, 1), 0);
            int checked = 0, nonzero = 0;
            for (int k = 0; k < (any ? 4 : 1); k++) {
                uint8_t a[2][32], b[2][32];
                int32_t ga[20], gb[20];
                uint64_t seed = 100u + (uint64_t)k;
                if (px__fout(plain, sizes[k][0], sizes[k][1], seed, a, ga) ||
                    px__fout(fused, sizes[k][0], sizes[k][1], seed, b, gb))
                    break;
                if (memcmp(a, b, sizeof a) || memcmp(ga, gb, sizeof ga))
                    px_test_fail(__FILE__, __LINE__, "%s, any-size %d, %dx%d: fused EMBED (or geometry) differs",
                                 px__fexecs[e], any, sizes[k][0], sizes[k][1]);
                for (size_t i = 0; i < sizeof a; i++)
                    nonzero += ((const uint8_t *)a)[i] != 0;
                uint8_t buf[16 * 8 * 4];
                pxvm_view dst = {buf, -1, 1, 16, 8, 4, 0, 64, 4, 1};
                CHECK_EQ(pxvm_runner_read(fused, PX_F_ATLAS, 0, 1, &dst), PXVM_USAGE); /* still fused after a switch */
                checked++;
            }
            CHECK_EQ(checked, any ? 4 : 1);
            CHECK(nonzero > 0);
            /* turned off, the same runner reads its atlas again, and its EMBED is the same */
            CHECK_EQ(pxvm_runner_fuse_embed(fused, 0), 0);
            uint8_t a[2][32], b[2][32];
            int32_t ga[20], gb[20];
            if (!px__fout(plain, 32, 32, 9, a, ga) && !px__fout(fused, 32, 32, 9, b, gb)) {
                CHECK(!memcmp(a, b, sizeof a));
                uint8_t pa[16 * 8 * 4], pb[16 * 8 * 4];
                pxvm_view va = {pa, -1, 1, 16, 8, 4, 0, 64, 4, 1}, vb = {pb, -1, 1, 16, 8, 4, 0, 64, 4, 1};
                CHECK_EQ(pxvm_runner_read(plain, PX_F_ATLAS, 0, 1, &va), 0);
                CHECK_EQ(pxvm_runner_read(fused, PX_F_ATLAS, 0, 1, &vb), 0);
                CHECK(!memcmp(pa, pb, sizeof pa));
            }
            pxvm_runner_close(plain);
            pxvm_runner_close(fused);
            pxvm_prog_free(prog);
        }
}

/* ---- the cuda executor's fused write, on the host ---------------------------------------------- */

/* Every texel of two items' atlases handed to px_emb_fused_store (what the fetch kernel does for
 * a fused atlas, texel by texel, in any order) gives the rows px_emb_stage_row stages from the
 * atlases (the staging kernel's), byte for byte, padding included: random shapes, channels 1, 3,
 * 4, patches whose area is no multiple of 4, a last row of tokens part full, and texels right of
 * and below every token (dropped). */
TEST(fuse_fused_store_stages_the_rows_the_staging_kernel_does)
{
    uint64_t s = 43;
    int bad = 0, cases = 0;
    for (int n = 0; n < 300; n++) {
        static const int chans[] = {1, 3, 4};
        int c = chans[px_rand(&s) % 3], pw = 1 + (int)(px_rand(&s) % 9), ph = 1 + (int)(px_rand(&s) % 9);
        int cols = 1 + (int)(px_rand(&s) % 5), prow = 1 + (int)(px_rand(&s) % 5);
        int ntok = cols * prow - (int)(px_rand(&s) % (uint64_t)cols), k = c * pw * ph, kb = PX_EMB_KB(k);
        int w = cols * pw + (int)(px_rand(&s) % 3), h = prow * ph + (int)(px_rand(&s) % 3);
        px_emb_geom g = {c, pw, ph, cols, ntok, k, (k + 3) / 4, 1, 0, 0, 0};
        size_t bytes = (size_t)2 * (size_t)ntok * (size_t)kb;
        uint8_t *staged = calloc(bytes, 1), *fused = calloc(bytes, 1);
        px_emb_fuse f = {fused, kb, c, pw, ph, cols, ntok};
        for (int item = 0; item < 2; item++) {
            pxvm_image atlas = px_random_image(w, h, &s);
            px_fuse_twin tw = {&atlas};
            for (int t = 0; t < ntok; t++)
                for (int y = 0; y < ph; y++)
                    px_emb_stage_row(&tw, &g, t, y, staged + ((size_t)item * (size_t)ntok + (size_t)t) * (size_t)kb);
            for (int y = h - 1; y >= 0; y--) /* any order: each byte has one texel */
                for (int x = 0; x < w; x++)
                    px_emb_fused_store(&f, item, x, y, px_px(&atlas, x, y));
            pxvm_image_free(&atlas);
        }
        if (memcmp(staged, fused, bytes) && bad++ < 3)
            px_test_fail(__FILE__, __LINE__, "C %d, %dx%d patches, %d cols, %d tokens, atlas %dx%d: fused rows differ", c,
                         pw, ph, cols, ntok, w, h);
        cases++;
        free(staged);
        free(fused);
    }
    CHECK_EQ(bad, 0);
    CHECK_EQ(cases, 300);
}

/* ---- a failed run keeps the atlas unkept ------------------------------------------------------ */

/* A-FUSE-7 after a run that fails before it writes anything: the cuda executor neither wrote nor
 * cleared the atlas in the fused run before (it holds an older run's bytes, or a size's zeros),
 * the cpu one wrote it; a run without fusion that fails (here: its input's borrow ended with the
 * fused run, UNBOUND_INPUT) writes neither, so the read stays refused on both executors until a
 * run without fusion succeeds (the pair: the same read after one, accepted). */
TEST(fuse_failed_run_without_fusion_keeps_the_atlas_unkept)
{
    for (int e = 0; e < PX_FNEXEC; e++) {
        px_fvar v;
        memset(&v, 0, sizeof v);
        pxvm_prog *prog;
        pxvm_runner *run;
        int o = px__fone(px__fexecs[e], &v, &prog, &run);
        if (o < 0)
            return;
        if (o)
            continue;
        uint8_t img[32 * 32 * 3], buf[16 * 8 * 4];
        uint64_t s = 5;
        for (size_t i = 0; i < sizeof img; i++)
            img[i] = (uint8_t)(px_rand(&s) >> 24);
        pxvm_view in = pxvm_view_host(img, 32, 32, 3), dst = {buf, -1, 1, 16, 8, 4, 0, 64, 4, 1};
        CHECK_EQ(pxvm_runner_fuse_embed(run, 1), 0);
        CHECK_EQ(pxvm_runner_borrow(run, PX_F_IMAGE, 0, &in), 0);
        CHECK_EQ(pxvm_runner_run(run), 0); /* fused; the borrow ends with it */
        CHECK_EQ(pxvm_runner_fuse_embed(run, 0), 0);
        CHECK_EQ(pxvm_runner_run(run), PXVM_UNLINKABLE); /* no image bound: it runs nothing */
        CHECK_EQ(pxvm_runner_read(run, PX_F_ATLAS, 0, 0, &dst), PXVM_USAGE);
        CHECK_STR(pxvm_errmsg(), "pxvm_runner_read: slot 2 ('atlas') is the atlas of a fused EMBED");
        CHECK_EQ(pxvm_runner_bind(run, PX_F_IMAGE, 0, &in), 0);
        CHECK_EQ(pxvm_runner_run(run), 0);
        CHECK_EQ(pxvm_runner_read(run, PX_F_ATLAS, 0, 0, &dst), 0);
        pxvm_runner_close(run);
        pxvm_prog_free(prog);
    }
}

/* A-FUSE-7 against section 2's switch rule: after a change of size every slot but inputs and
 * persistent ones reads as after a load (both executors zero them), whichever door reads it. So
 * once fusion is off, a switch ends the refusal a fused run left: the atlas reads as zeros (the
 * pair: the same read after a bind at the same size, no switch, is still refused). */
TEST(fuse_off_a_size_switch_makes_the_atlas_read_as_after_a_load)
{
    for (int e = 0; e < PX_FNEXEC; e++)
        for (int sw = 0; sw < 2; sw++) {
            px_fvar v;
            memset(&v, 0, sizeof v);
            v.any_size = 1;
            pxvm_prog *prog;
            pxvm_runner *run;
            int o = px__fone(px__fexecs[e], &v, &prog, &run);
            if (o < 0)
                return;
            if (o)
                break;
            uint8_t buf[16 * 8 * 4];
            memset(buf, 0xA5, sizeof buf);
            pxvm_view dst = {buf, -1, 1, 16, 8, 4, 0, 64, 4, 1};
            CHECK_EQ(pxvm_runner_fuse_embed(run, 1), 0);
            CHECK_EQ(px__fbind(run, 32, 32, 3), 0);
            CHECK_EQ(pxvm_runner_run(run), 0);
            CHECK_EQ(pxvm_runner_fuse_embed(run, 0), 0);
            CHECK_EQ(px__fbind(run, sw ? 48 : 32, sw ? 20 : 32, 4), 0);
            if (!sw) {
                CHECK_EQ(pxvm_runner_read(run, PX_F_ATLAS, 0, 0, &dst), PXVM_USAGE);
                CHECK_STR(pxvm_errmsg(), "slot 2 ('atlas') is the atlas of a fused EMBED");
            } else {
                CHECK_EQ(pxvm_runner_read(run, PX_F_ATLAS, 0, 0, &dst), 0);
                int nonzero = 0;
                for (size_t i = 0; i < sizeof buf; i++)
                    nonzero += buf[i] != 0;
                CHECK_EQ(nonzero, 0);
            }
            pxvm_runner_close(run);
            pxvm_prog_free(prog);
        }
}

/* Fusion turned on and off between changes of size, back to sizes seen before (the cuda
 * executor keeps each size's configuration with its captured graphs: a toggle must drop them
 * all, or a graph replays the other setting's staging), in a batch of two: EMBED's bytes equal
 * an unfused runner's at every step, on every executor present. */
TEST(fuse_toggled_between_sizes_keeps_embed_bytes)
{
    static const int sizes[][2] = {{32, 32}, {48, 20}, {32, 32}, {48, 20}, {64, 64}, {32, 32}, {48, 20}};
    for (int e = 0; e < PX_FNEXEC; e++) {
        pxvm_prog *prog;
        pxvm_runner *plain, *fused;
        int o = px__fpair(px__fexecs[e], 1, &prog, &plain, &fused);
        if (o < 0)
            return;
        if (o)
            break;
        int steps = 0;
        for (int k = 0; k < 7; k++)
            for (int rep = 0; rep < 2; rep++) { /* twice a size: a graph is captured, then replayed */
                CHECK_EQ(pxvm_runner_fuse_embed(fused, (k + rep) % 2), 0);
                uint8_t a[2][32], b[2][32];
                int32_t ga[20], gb[20];
                uint64_t seed = 300u + (uint64_t)(2 * k + rep);
                if (px__fout(plain, sizes[k][0], sizes[k][1], seed, a, ga) ||
                    px__fout(fused, sizes[k][0], sizes[k][1], seed, b, gb))
                    break;
                if (memcmp(a, b, sizeof a))
                    px_test_fail(__FILE__, __LINE__, "%s, %dx%d, fusion %d: EMBED differs", px__fexecs[e], sizes[k][0],
                                 sizes[k][1], (k + rep) % 2);
                steps++;
            }
        CHECK_EQ(steps, 14);
        pxvm_runner_close(plain);
        pxvm_runner_close(fused);
        pxvm_prog_free(prog);
    }
}

/* ---- the cover of a fused EMBED's tokens, per program ----------------------------------------- */

/* Gap g's program loaded on ops, fused where it may be, its image bound and run: the executor (0),
 * or NULL (reported). */
static pxvm_executor *px__cover_open(const pxvm_executor_ops *ops, const pxvm_program *prog, const pxvm_image *image)
{
    pxvm_error err;
    pxvm_executor *ex = NULL;
    pxvm_open_options oo = {2, 0};
    uint8_t fused[64] = {0};
    pxvm_view v = pxvm_image_view(image);
    int ok = prog->ninsns <= sizeof fused && pxvm_embed_fusion(prog, fused, &err) == 1 &&
             ops->open(&ex, &oo, &err) == 0 && ops->load(ex, prog, 1, &err) == 0 &&
             (!ops->fuse_embed || ops->fuse_embed(ex, fused, &err) == 0) && ops->bind(ex, PX_F_IMAGE, 0, &v, &err) == 0 &&
             ops->run(ex, NULL, &err) == 0;
    if (ok)
        return ex;
    px_test_fail(__FILE__, __LINE__, "%s: %s", ops->name, err.msg);
    if (ex)
        ops->close(ex);
    return NULL;
}

static int px__cover_read(const pxvm_executor_ops *ops, pxvm_executor *ex, uint8_t out[32])
{
    pxvm_error err;
    pxvm_view v = {out, -1, 1, 4, 2, 4, 32, 16, 4, 1};
    if (ops->read(ex, PX_F_EMB, 0, 0, &v, 0, &err) == 0)
        return 0;
    px_test_fail(__FILE__, __LINE__, "read: %s", err.msg);
    return -1;
}

/* The CUDA executor leaves a fused EMBED's staged rows uncleared between runs when the fetches
 * cover every texel of its tokens, and works the cover out again for the program a retarget
 * brings. After runs of a program that covers them, one whose second writer leaves the last row
 * of token 1 unwritten must see that row as a cleared atlas's zeros, not the last program's bytes:
 * equal to a fresh load of it. The pair: a gap of 0 rows and of 1 (their EMBEDs differ). */
TEST(fuse_cover_is_worked_out_again_after_a_retarget)
{
    const pxvm_executor_ops *ops = px_test_executor();
    if (!ops)
        return;
    pxvm_limits lim;
    pxvm_limits_default(&lim);
    pxvm_error err;
    pxvm_image image, pimg[2];
    pxvm_program prog[2];
    uint8_t want[2][32], got[32];
    pxvm_image_alloc(&image, 32, 32, NULL);
    uint64_t s = 5;
    for (size_t i = 0; i < 32u * 32u * 4u; i++)
        image.px[i] = (uint8_t)px_rand(&s);
    int loaded = 0, checked = 0;
    for (int g = 0; g < 2; g++) {
        px_fvar v;
        memset(&v, 0, sizeof v);
        v.gap = g;
        if (px__fimage(&v, &pimg[g]))
            break;
        if (pxvm_program_from_copy(&pimg[g], &lim, &prog[g], &err) < 0) {
            px_test_fail(__FILE__, __LINE__, "load gap %d: %s", g, err.msg);
            pxvm_image_free(&pimg[g]);
            break;
        }
        loaded++;
        pxvm_executor *ex = px__cover_open(ops, &prog[g], &image); /* a fresh load: the reference */
        if (!ex)
            break;
        checked += px__cover_read(ops, ex, want[g]) == 0;
        ops->close(ex);
    }
    if (checked == 2) {
        CHECK(memcmp(want[0], want[1], 32) != 0);
        pxvm_executor *ex = px__cover_open(ops, &prog[0], &image);
        static const int to[] = {1, 0, 1};
        for (int n = 0; ex && n < 3; n++) {
            pxvm_view v = pxvm_image_view(&image);
            if (ops->retarget(ex, &prog[to[n]], &err) < 0 || ops->bind(ex, PX_F_IMAGE, 0, &v, &err) < 0 ||
                ops->run(ex, NULL, &err) < 0 || ops->run(ex, NULL, &err) < 0) {
                px_test_fail(__FILE__, __LINE__, "%s, switch %d: %s", ops->name, n, err.msg);
                break;
            }
            if (px__cover_read(ops, ex, got) == 0 && memcmp(got, want[to[n]], 32))
                px_test_fail(__FILE__, __LINE__, "%s, switch %d to the gap of %d: EMBED differs from a fresh load",
                             ops->name, n, to[n]);
        }
        if (ex)
            ops->close(ex);
    }
    CHECK_EQ(checked, 2);
    for (int g = 0; g < loaded; g++) {
        pxvm_program_free(&prog[g]);
        pxvm_image_free(&pimg[g]);
    }
    pxvm_image_free(&image);
}

/* The cover rule itself (pxvm_embed_tokens_covered, no GPU needed): the two 8x8 writers cover the
 * atlas's two tokens (1); the second one row short leaves a row of token 1 unwritten (0). */
TEST(fuse_tokens_covered_by_their_fetches_or_not)
{
    pxvm_limits lim;
    pxvm_limits_default(&lim);
    for (int g = 0; g < 2; g++) {
        px_fvar v;
        memset(&v, 0, sizeof v);
        v.gap = g;
        pxvm_image img;
        pxvm_program prog;
        pxvm_error err;
        if (px__fimage(&v, &img))
            return;
        if (pxvm_program_from_copy(&img, &lim, &prog, &err) < 0) {
            px_test_fail(__FILE__, __LINE__, "load gap %d: %s", g, err.msg);
            pxvm_image_free(&img);
            return;
        }
        int checked = 0;
        for (uint32_t i = 0; i < prog.ninsns; i++)
            if (prog.insns[i].op == PX_OP_EMBED) {
                CHECK_EQ(pxvm_embed_tokens_covered(&prog, i), !g);
                checked++;
            }
        CHECK_EQ(checked, 1);
        pxvm_program_free(&prog);
        pxvm_image_free(&img);
    }
}
