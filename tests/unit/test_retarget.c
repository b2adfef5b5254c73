/* test_retarget.c - the executors' retarget (vm.h): load(P_a) -> bind/run -> retarget(P_b) ->
 * bind/run gives the bytes a fresh executor loaded with P_b gives (every level of every slot of
 * every item, token geometry, fixation registers), over 20+ sizes (1xN, Nx1, odd, prime) and back
 * to sizes seen before (the GPU's cached ones), batch 2; an input whose size stays keeps its
 * binding; pxvm_check_retarget's refusals. The programs differ only in input size and operands,
 * made without any-size support: the same plan (or assembly) compiled for each size.
 * PXVM_TEST_EXECUTOR=cuda runs it on the CUDA-GL executor (default cpu). */
#include <stdlib.h>

#include "../../assembler/plan.h"
#include "../../assembler/pxasm.h"
#include "test.h"

#define PX_BATCH 2

/* PX_FAM_SLOTS: what the executors may leave undone at a switch when they know it changes
 * nothing; its programs change which output a SAMPLE and a PYRAMID write with the size (so a
 * switch must clear levels the last program's PYRAMID wrote and the next one's leaves), and
 * write the program image (DOT_RGB) whose vectors follow the size (so slot 0 must start as the
 * next program's image). */
/* PX_FAM_SLOT0: at odd widths a SAMPLE writes the program image (a region after the code), which
 * its runs then restore; at even widths a SAMPLE reads the program image, whose operands differ
 * with the size: a restore left from a program of the first kind must not bring its image back. */
/* PX_FAM_ANY: resolutions of one any-size program (pxvm_program_resolve; SPEC V-ANY-6): siblings
 * that differ only in the input's size and SAMPLE/ANISO's rescaled operands (the CUDA-GL executor
 * copies a sibling's records and rewrites those; px__any_poly, made at its first use). */
typedef enum { PX_FAM_GRID, PX_FAM_RELATIVE, PX_FAM_RESIZE, PX_FAM_TWO_INPUTS, PX_FAM_SLOTS, PX_FAM_SLOT0, PX_FAM_ANY } px_family;

static pxvm_program px__any_poly;
static int px__any_made;

/* The family's program for a w x h input (slot 1). */
static int px__program(px_family fam, int w, int h, pxvm_program *prog)
{
    char text[1024];
    pxvm_error err;
    pxvm_image img;
    pxvm_limits lim;
    pxvm_limits_default(&lim);
    int rc;
    if (fam == PX_FAM_ANY) {
        if (!px__any_made) {
            snprintf(text, sizeof text,
                     ".width 16\n.slot image input 64x48 any\n.slot out output 24x16\nPYRAMID image\n"
                     "SAMPLE src=image dst=out mode=linear at=(0,0) size=(8,8) center=(20.5,30.25) step=(2,-3) lod=1.2\n"
                     "ANISO src=image dst=out at=(8,0) size=(8,8) center=(10,10) step=(1,1) lod=0.5 taps=4 tdu=0.5 tdv=-0.5\n"
                     "SAMPLE src=image dst=out mode=nearest at=(16,8) size=(8,8) center=(63,47) step=1 lod=0\nHALT\n");
            if (pxasm_assemble(text, strlen(text), "retarget_any.pxs", &lim, &img, &err) < 0 ||
                pxvm_program_from_image(&img, &lim, &px__any_poly, &err) < 0) {
                px_test_fail(__FILE__, __LINE__, "the any-size program: %s", err.msg);
                return -1;
            }
            px__any_made = 1;
        }
        int wh[6] = {0, 0, w, h, 0, 0};
        rc = pxvm_program_resolve(&px__any_poly, wh, &lim, prog, &err);
        if (rc < 0)
            px_test_fail(__FILE__, __LINE__, "resolving at %dx%d: %s", w, h, err.msg);
        else /* siblings: what the executor's reuse keys on */
            CHECK(prog->resolved_from != 0 && prog->resolved_from == px__any_poly.serial);
        return rc;
    }
    if (fam == PX_FAM_GRID || fam == PX_FAM_RELATIVE) {
        snprintf(text, sizeof text, "{\"image\": [%d, %d], \"budget\": 8, \"patch\": 8, \"levels\": 2, %s}", w, h,
                 fam == PX_FAM_GRID ? "\"scheme\": \"grid\"" : "\"scheme\": \"logpolar\", \"fixation\": \"relative\"");
        pxvm_plan plan;
        rc = pxvm_plan_parse(text, strlen(text), "retarget.json", &plan, &err);
        if (rc == 0) {
            rc = pxvm_plan_compile(&plan, &img, &err);
            pxvm_plan_free(&plan);
        }
    } else if (fam == PX_FAM_RESIZE) {
        snprintf(text, sizeof text,
                 ".width 16\n.slot image input %dx%d\n.slot canvas output 48x40\n"
                 "RESIZE image canvas filter=3 at=(0,0) size=(48,40) fit=1 pad_r=128 pad_g=128 pad_b=128 pad_a=255\n"
                 "PYRAMID canvas\nHALT\n",
                 w, h);
        rc = pxasm_assemble(text, strlen(text), "retarget.pxs", &lim, &img, &err);
    } else if (fam == PX_FAM_SLOT0) {
        snprintf(text, sizeof text,
                 ".width 16\n.height 8\n.slot image input %dx%d\n.slot a output 16x8\n"
                 "SAMPLE src=%s dst=%s mode=linear at=(%d, 6) size=(4, 2) center=(%d.5, %d.5) step=1 lod=0\nHALT\n",
                 w, h, w % 2 ? "image" : "prog", w % 2 ? "prog" : "a", w % 3 * 4, w % 2 ? w / 2 : w % 7,
                 w % 2 ? h / 2 : 3);
        rc = pxasm_assemble(text, strlen(text), "retarget4.pxs", &lim, &img, &err);
    } else if (fam == PX_FAM_SLOTS) {
        const char *out = w % 2 ? "a" : "b";
        snprintf(text, sizeof text,
                 ".width 16\n.slot image input %dx%d\n.slot a output 32x32\n.slot b output 32x32\n"
                 "SAMPLE src=image dst=%s mode=linear at=(%d, %d) size=(16, 16) center=(%d.5, %d.5) step=1 lod=0.5\n"
                 "PYRAMID %s\nDOT_RGB row_a=va row_b=vb row_out=out\nHALT\n"
                 ".rows va\n%02x0000ff 140000ff\n.end\n.rows vb\n0a0000ff 0a0000ff\n.end\n.rows out\n00000000\n.end\n",
                 w, h, out, h % 2 * 16, w % 3 * 8, w / 2, h / 2, out, w % 200 + 1);
        rc = pxasm_assemble(text, strlen(text), "retarget3.pxs", &lim, &img, &err);
    } else {
        snprintf(text, sizeof text,
                 ".width 16\n.slot a input %dx%d\n.slot b input 13x9\n.slot canvas output 64x32\n"
                 "RESIZE a canvas filter=2 at=(0,0) size=(32,32) fit=1 pad_r=1 pad_g=2 pad_b=3 pad_a=255\n"
                 "RESIZE b canvas filter=1 at=(32,0) size=(32,32)\n"
                 "PYRAMID canvas\nHALT\n",
                 w, h);
        rc = pxasm_assemble(text, strlen(text), "retarget2.pxs", &lim, &img, &err);
    }
    if (rc == 0)
        rc = pxvm_program_from_image(&img, &lim, prog, &err);
    if (rc < 0)
        px_test_fail(__FILE__, __LINE__, "family %d at %dx%d: %s", (int)fam, w, h, err.msg);
    return rc;
}

/* Binds input `slot` of every item with images made from `seed` (the same seed, the same bytes). */
static int px__bind(const pxvm_executor_ops *ops, pxvm_executor *ex, const pxvm_program *prog, int slot, uint64_t seed)
{
    for (int b = 0; b < PX_BATCH; b++) {
        uint64_t st = seed * 31u + (uint64_t)b;
        pxvm_image img = px_random_image(prog->slots[slot].w, prog->slots[slot].h, &st);
        pxvm_view v = pxvm_image_view(&img);
        pxvm_error err;
        int rc = ops->bind(ex, slot, b, &v, &err);
        pxvm_image_free(&img);
        if (rc < 0) {
            px_test_fail(__FILE__, __LINE__, "bind: %s", err.msg);
            return -1;
        }
    }
    return 0;
}

static const int32_t px__fix[PX_BATCH][2] = {{3 << 16 | 0x4000, 1 << 16}, {0, 2 << 16 | 0x8000}};

/* Everything a run leaves: every level of every slot of every item, the fixation registers and
 * the token geometry of every atlas slot, as one byte string (malloc'ed). */
static uint8_t *px__snapshot(const pxvm_executor_ops *ops, pxvm_executor *ex, const pxvm_program *prog, size_t *len)
{
    size_t cap = 1 << 16, n = 0;
    uint8_t *out = malloc(cap);
    pxvm_error err;
#define PX__PUT(p, bytes)                                                                                             \
    do {                                                                                                             \
        while (n + (bytes) > cap)                                                                                    \
            out = realloc(out, cap *= 2);                                                                            \
        memcpy(out + n, (p), (bytes));                                                                               \
        n += (bytes);                                                                                                \
    } while (0)
    for (int b = 0; b < PX_BATCH; b++)
        for (int k = 0; k < prog->nslots; k++)
            for (int l = 0; l < prog->slots[k].levels; l++) {
                pxvm_image img;
                if (pxvm_read_image(ops, ex, prog, k, l, b, &img, &err) < 0) {
                    px_test_fail(__FILE__, __LINE__, "read slot %d level %d: %s", k, l, err.msg);
                    continue;
                }
                int wh[2] = {img.w, img.h};
                PX__PUT(wh, sizeof wh);
                PX__PUT(img.px, (size_t)img.w * (size_t)img.h * 4u);
                pxvm_image_free(&img);
            }
    int32_t fix[PX_BATCH * 16];
    if (ops->read_state(ex, PXVM_STATE_FIXATIONS, 0, 0, PX_BATCH, fix, -1, &err) < 0)
        px_test_fail(__FILE__, __LINE__, "read fixations: %s", err.msg);
    PX__PUT(fix, sizeof fix);
    for (int k = 0; k < prog->nslots; k++)
        if (prog->geom_base[k] >= 0) {
            size_t bytes = (size_t)PX_BATCH * (size_t)prog->slots[k].patch_count * PXVM_GEOM_INTS * sizeof(int32_t);
            int32_t *g = malloc(bytes);
            if (ops->read_state(ex, PXVM_STATE_GEOMETRY, k, 0, PX_BATCH, g, -1, &err) < 0)
                px_test_fail(__FILE__, __LINE__, "read geometry: %s", err.msg);
            PX__PUT(g, bytes);
            free(g);
        }
#undef PX__PUT
    *len = n;
    return out;
}

static const int px__sizes[][2] = {
    {64, 64}, {1, 64}, {64, 1}, {9, 61}, {61, 9}, {2, 71}, {71, 2}, {101, 103}, {29, 31}, {31, 37}, {17, 53},
    {53, 17}, {1, 97}, {97, 1}, {127, 65}, {16, 64}, {64, 16}, {251, 7}, {8, 64}, {45, 30}, {13, 67}, {67, 13},
    /* back to sizes seen before: cached on the GPU */
    {1, 64}, {101, 103}, {64, 64}, {251, 7}, {9, 61}, {64, 1},
};
#define PX_NSIZES ((int)(sizeof px__sizes / sizeof px__sizes[0]))

#ifdef PXVM_HAVE_CUDA_GL
/* executors/cuda_gl/retarget.cu: input textures (one slot, every item) its switches have made since
 * the load (a CUDA-GL executor's only) */
uint64_t px_gpu_retarget_textures_made(const pxvm_executor *ex);
/* ... and configurations (records, slot table, image for one set of sizes and operands) */
uint64_t px_gpu_retarget_configs_made(const pxvm_executor *ex);
#endif

/* Input textures (configs: configurations) the executor's switches have made so far, or -1 when
 * it does not count them (the CPU executor, whose storage only grows too, counts nothing). */
static long long px__made(pxvm_executor *ex, int configs)
{
#ifdef PXVM_HAVE_CUDA_GL
    const char *name = getenv("PXVM_TEST_EXECUTOR");
    if (name && !strcmp(name, "cuda"))
        return (long long)(configs ? px_gpu_retarget_configs_made(ex) : px_gpu_retarget_textures_made(ex));
#endif
    (void)ex, (void)configs;
    return -1;
}

/* The property over the sizes for one family: the retargeted executor's run == a fresh one's;
 * made[i] (when not NULL): px__made(configs) after the switch to sizes[i]. */
static void px__property_at(px_family fam, const int (*sizes)[2], int nsizes, long long *made, int configs)
{
    const pxvm_executor_ops *ops = px_test_executor();
    if (!ops)
        return;
    pxvm_program *progs = calloc((size_t)nsizes, sizeof *progs);
    for (int i = 0; i < nsizes; i++)
        if (px__program(fam, sizes[i][0], sizes[i][1], &progs[i]) < 0)
            goto out;
    pxvm_executor *ex = NULL;
    pxvm_error err;
    pxvm_open_options opt = {0, 0};
    if (ops->open(&ex, &opt, &err) < 0 || ops->load(ex, &progs[0], PX_BATCH, &err) < 0 ||
        ops->set_fixations(ex, 0, PX_BATCH, 0, 1, &px__fix[0][0], -1, &err) < 0) {
        px_test_fail(__FILE__, __LINE__, "open/load: %s", err.msg);
        goto close;
    }
    /* the second input of PX_FAM_TWO_INPUTS is bound once, here, and kept by every retarget */
    for (int k = 1; k < progs[0].nslots; k++)
        if (progs[0].slots[k].role == PXI_ROLE_INPUT && px__bind(ops, ex, &progs[0], k, 1000u * (uint64_t)0 + (uint64_t)k) < 0)
            goto close;
    for (int i = 0; i < nsizes; i++) {
        const pxvm_program *p = &progs[i];
        uint64_t seed = 1000u * (uint64_t)i;
        if (i > 0) {
            if (ops->retarget(ex, p, &err) < 0) {
                px_test_fail(__FILE__, __LINE__, "retarget to %dx%d: %s", p->slots[1].w, p->slots[1].h, err.msg);
                break;
            }
            if (made)
                made[i] = px__made(ex, configs);
            int changed = progs[i - 1].slots[1].w != p->slots[1].w || progs[i - 1].slots[1].h != p->slots[1].h;
            if (changed) { /* the changed input is unbound: a run is refused until it is bound */
                CHECK(ops->run(ex, NULL, &err) < 0);
                CHECK_EQ(err.code, PXE_UNBOUND_INPUT);
                CHECK_STR(err.msg, "input slot 1");
            }
            /* slot 1 bound with this size's seed; other inputs keep the binding from load */
            if (px__bind(ops, ex, p, 1, seed + 1) < 0)
                break;
        }
        if (ops->run(ex, NULL, &err) < 0) {
            px_test_fail(__FILE__, __LINE__, "run at %dx%d: %s", p->slots[1].w, p->slots[1].h, err.msg);
            break;
        }
        size_t la, lb;
        uint8_t *a = px__snapshot(ops, ex, p, &la);
        /* the fresh executor binds slot 1 from seed + 1, slot k > 1 from 0 + k, as above */
        uint8_t *b = NULL;
        {
            pxvm_executor *fx = NULL;
            if (ops->open(&fx, &opt, &err) < 0 || ops->load(fx, p, PX_BATCH, &err) < 0 ||
                ops->set_fixations(fx, 0, PX_BATCH, 0, 1, &px__fix[0][0], -1, &err) < 0) {
                px_test_fail(__FILE__, __LINE__, "fresh: %s", err.msg);
            } else {
                int ok = px__bind(ops, fx, p, 1, i == 0 ? 1 : seed + 1) == 0;
                for (int k = 2; ok && k < p->nslots; k++)
                    if (p->slots[k].role == PXI_ROLE_INPUT)
                        ok = px__bind(ops, fx, p, k, (uint64_t)k) == 0;
                if (ok && ops->run(fx, NULL, &err) == 0)
                    b = px__snapshot(ops, fx, p, &lb);
                else if (ok)
                    px_test_fail(__FILE__, __LINE__, "fresh run: %s", err.msg);
            }
            if (fx)
                ops->close(fx);
        }
        if (b && (la != lb || memcmp(a, b, la)))
            px_test_fail(__FILE__, __LINE__, "family %d, size %d (%dx%d): retargeted run differs from a fresh load", (int)fam,
                         i, p->slots[1].w, p->slots[1].h);
        CHECK(b != NULL);
        free(a);
        free(b);
    }
close:
    if (ex)
        ops->close(ex);
out:
    for (int i = 0; i < nsizes; i++)
        pxvm_program_free(&progs[i]);
    free(progs);
}

static void px__property(px_family fam) { px__property_at(fam, px__sizes, PX_NSIZES, NULL, 0); }

/* A read between a retarget and the next run sees what a fresh load shows (the executors may
 * leave restoring the slots to that run): every level of every slot, every item; an input the
 * switch resized is unbound and reads as after a load (zero), one it kept stays as bound. Sizes
 * smaller (storage reused) and larger (grown). */
static void px__read_before_run(px_family fam, int wa, int ha, int wb, int hb)
{
    const pxvm_executor_ops *ops = px_test_executor();
    pxvm_program pa, pb;
    if (!ops || px__program(fam, wa, ha, &pa) < 0)
        return;
    if (px__program(fam, wb, hb, &pb) < 0) {
        pxvm_program_free(&pa);
        return;
    }
    pxvm_executor *ex = NULL, *fx = NULL;
    pxvm_error err;
    pxvm_open_options opt = {0, 0};
    int ok = ops->open(&ex, &opt, &err) == 0 && ops->load(ex, &pa, PX_BATCH, &err) == 0 &&
             ops->set_fixations(ex, 0, PX_BATCH, 0, 1, &px__fix[0][0], -1, &err) == 0;
    for (int k = 1; ok && k < pa.nslots; k++)
        if (pa.slots[k].role == PXI_ROLE_INPUT)
            ok = px__bind(ops, ex, &pa, k, (uint64_t)k) == 0;
    ok = ok && ops->run(ex, NULL, &err) == 0 && ops->retarget(ex, &pb, &err) == 0 && ops->open(&fx, &opt, &err) == 0 &&
         ops->load(fx, &pb, PX_BATCH, &err) == 0;
    if (!ok)
        px_test_fail(__FILE__, __LINE__, "setup: %s", err.msg);
    int compared = 0;
    for (int b = 0; ok && b < PX_BATCH; b++)
        for (int k = 0; k < pb.nslots; k++)
            for (int l = 0; l < pb.slots[k].levels; l++) { /* an input resized is unbound: as after a load */
                if (pb.slots[k].role == PXI_ROLE_INPUT && pb.slots[k].w == pa.slots[k].w && pb.slots[k].h == pa.slots[k].h)
                    break;
                pxvm_image x, y;
                if (pxvm_read_image(ops, ex, &pb, k, l, b, &x, &err) < 0 || pxvm_read_image(ops, fx, &pb, k, l, b, &y, &err) < 0) {
                    px_test_fail(__FILE__, __LINE__, "read slot %d level %d: %s", k, l, err.msg);
                    continue;
                }
                if (x.w != y.w || x.h != y.h || memcmp(x.px, y.px, (size_t)x.w * (size_t)x.h * 4u))
                    px_test_fail(__FILE__, __LINE__, "family %d: slot %d level %d of item %d read after a retarget differs from a fresh load",
                                 (int)fam, k, l, b);
                compared++;
                pxvm_image_free(&x);
                pxvm_image_free(&y);
            }
    CHECK(!ok || compared > 0);
    if (ex)
        ops->close(ex);
    if (fx)
        ops->close(fx);
    pxvm_program_free(&pa);
    pxvm_program_free(&pb);
}

TEST(retarget_read_before_run_equals_fresh_load)
{
    static const px_family fams[] = {PX_FAM_GRID, PX_FAM_RESIZE, PX_FAM_SLOTS, PX_FAM_TWO_INPUTS};
    for (size_t f = 0; f < sizeof fams / sizeof fams[0]; f++) {
        px__read_before_run(fams[f], 64, 64, 29, 31); /* smaller: storage reused */
        px__read_before_run(fams[f], 29, 31, 101, 103); /* larger: grown */
    }
}

/* Input storage only grows: after a switch to the largest size, a stream of sizes that fit in it
 * (smaller or equal in each side: 1xN, Nx1, odd, the largest again) makes no texture on the GPU,
 * and each gives the bytes a fresh load gives (levels >= 1 of the reused storage hold the last
 * size's pyramid, RESIZE reads it through the smaller size); a size larger in one side makes
 * one. Families: the input pyramided and sampled (grid), resized (two inputs, one kept bound). */
TEST(retarget_sizes_within_the_largest_make_no_texture_equal_fresh_load)
{
    static const int sizes[][2] = {{64, 64}, {127, 103}, {1, 64}, {64, 1}, {9, 61}, {127, 1}, {1, 103}, {101, 103},
                                   {29, 31}, {127, 65}, {45, 30}, {127, 103}, {13, 67}, {2, 71}, {127, 104}, {64, 64}};
    enum { N = (int)(sizeof sizes / sizeof sizes[0]), GROWN = 1, LARGER = N - 2 };
    static const px_family fams[] = {PX_FAM_GRID, PX_FAM_TWO_INPUTS};
    for (size_t f = 0; f < sizeof fams / sizeof fams[0]; f++) {
        long long made[N];
        for (int i = 0; i < N; i++)
            made[i] = -2;
        px__property_at(fams[f], sizes, N, made, 0);
        if (made[GROWN] == -1) /* an executor that does not count */
            continue;
        CHECK_EQ(made[GROWN], 1); /* 64x64 -> 127x103: one texture */
        for (int i = GROWN + 1; i < LARGER; i++)
            if (made[i] != made[GROWN])
                px_test_fail(__FILE__, __LINE__, "family %d: the switch to %dx%d (within %dx%d) made %lld textures", (int)fams[f],
                             sizes[i][0], sizes[i][1], sizes[GROWN][0], sizes[GROWN][1], made[i] - made[i - 1]);
        CHECK_EQ(made[LARGER], made[GROWN] + 1); /* 127x104: one row more */
        CHECK_EQ(made[N - 1], made[LARGER]);
    }
}

TEST(retarget_grid_plan_equals_fresh_load) { px__property(PX_FAM_GRID); }

/* More sizes of one any-size program than the CUDA-GL executor keeps configurations of (64):
 * the oldest go while the next are made from a sibling's records, and sizes seen long before
 * are made again. */
TEST(retarget_resolutions_past_the_configuration_cache_equal_fresh_load)
{
    enum { N = 80 };
    int sizes[N][2];
    for (int i = 0; i < N - 6; i++)
        sizes[i][0] = 16 + (i * 37) % 113, sizes[i][1] = 9 + (i * 53) % 97;
    for (int i = N - 6; i < N; i++) /* back to the first sizes: evicted by now */
        sizes[i][0] = sizes[i - (N - 6)][0], sizes[i][1] = sizes[i - (N - 6)][1];
    px__property_at(PX_FAM_ANY, (const int (*)[2])sizes, N, NULL, 0);
    if (px__any_made)
        pxvm_program_free(&px__any_poly);
    px__any_made = 0;
}

/* A size resolved again (another resolution: another program, another serial) while its
 * configuration is cached finds it by the key, which holds the inputs' sizes and no operand (a
 * resolution's rescaled operands follow from its any-size program and those sizes), so the GPU
 * makes no configuration; a size differing in one side makes one. Each equals a fresh load. The
 * largest size is loaded first: no switch grows the input (a growth drops the configurations
 * that name the replaced textures). */
TEST(retarget_a_size_resolved_again_finds_its_configuration_equals_fresh_load)
{
    static const int sizes[][2] = {{64, 48}, {40, 30}, {17, 23}, {64, 48}, {40, 30}, {17, 23}, {41, 30}, {40, 31}, {40, 30}};
    enum { N = (int)(sizeof sizes / sizeof sizes[0]) };
    long long made[N];
    for (int i = 0; i < N; i++)
        made[i] = -2;
    px__property_at(PX_FAM_ANY, sizes, N, made, 1);
    if (px__any_made)
        pxvm_program_free(&px__any_poly);
    px__any_made = 0;
    if (made[1] == -1) /* an executor that does not count */
        return;
    static const long long want[N] = {-2, 1, 2, 2, 2, 2, 3, 4, 4};
    for (int i = 1; i < N; i++)
        if (made[i] != want[i])
            px_test_fail(__FILE__, __LINE__, "after the switch to %dx%d (size %d): %lld configurations made, expected %lld", sizes[i][0],
                         sizes[i][1], i, made[i], want[i]);
}
/* Resolutions of two any-size programs that differ in one SAMPLE's center only, at the same size:
 * their configurations differ (the GPU's key for a resolution holds no operand, only the sizes and
 * the program it was resolved from), so switching between them, and to each one resolved again,
 * equals a fresh load each time; on the GPU the second program makes one configuration and the
 * ones resolved again find theirs. Fails if the key forgot which program a resolution is of. */
TEST(retarget_resolutions_of_two_programs_at_one_size_equal_fresh_load)
{
    const pxvm_executor_ops *ops = px_test_executor();
    if (!ops)
        return;
    pxvm_limits lim;
    pxvm_limits_default(&lim);
    pxvm_program poly[2], res[4];
    int npoly = 0, nres = 0;
    pxvm_error err;
    for (int v = 0; v < 2; v++) {
        char text[512];
        pxvm_image img;
        snprintf(text, sizeof text,
                 ".width 16\n.slot image input 64x48 any\n.slot out output 16x8\nPYRAMID image\n"
                 "SAMPLE src=image dst=out mode=linear at=(0,0) size=(8,8) center=(%s,30.25) step=(2,-3) lod=1.2\n"
                 "SAMPLE src=image dst=out mode=nearest at=(8,0) size=(8,8) center=(63,47) step=1 lod=0\nHALT\n",
                 v ? "21.5" : "20.5");
        if (pxasm_assemble(text, strlen(text), "two_any.pxs", &lim, &img, &err) < 0 ||
            pxvm_program_from_image(&img, &lim, &poly[v], &err) < 0) {
            px_test_fail(__FILE__, __LINE__, "program %d: %s", v, err.msg);
            goto out;
        }
        npoly++;
    }
    static const int which[4] = {0, 1, 0, 1}; /* R1, R2, R1 again, R2 again */
    int wh[6] = {0, 0, 40, 30, 0, 0};
    for (int i = 0; i < 4; i++, nres++)
        if (pxvm_program_resolve(&poly[which[i]], wh, &lim, &res[i], &err) < 0) {
            px_test_fail(__FILE__, __LINE__, "resolving %d: %s", i, err.msg);
            goto out;
        }
    pxvm_executor *ex = NULL;
    pxvm_open_options opt = {0, 0};
    if (ops->open(&ex, &opt, &err) < 0 || ops->load(ex, &res[0], PX_BATCH, &err) < 0) {
        px_test_fail(__FILE__, __LINE__, "open/load: %s", err.msg);
        goto close;
    }
    long long made[4] = {0};
    for (int i = 0; i < 4; i++) {
        const pxvm_program *p = &res[i];
        if (i > 0 && ops->retarget(ex, p, &err) < 0) {
            px_test_fail(__FILE__, __LINE__, "retarget %d: %s", i, err.msg);
            break;
        }
        made[i] = px__made(ex, 1);
        if (px__bind(ops, ex, p, 1, 7) < 0 || ops->run(ex, NULL, &err) < 0) {
            px_test_fail(__FILE__, __LINE__, "run %d: %s", i, err.msg);
            break;
        }
        size_t la, lb = 0;
        uint8_t *a = px__snapshot(ops, ex, p, &la), *b = NULL;
        pxvm_executor *fx = NULL;
        if (ops->open(&fx, &opt, &err) == 0 && ops->load(fx, p, PX_BATCH, &err) == 0 && px__bind(ops, fx, p, 1, 7) == 0 &&
            ops->run(fx, NULL, &err) == 0)
            b = px__snapshot(ops, fx, p, &lb);
        else
            px_test_fail(__FILE__, __LINE__, "fresh %d: %s", i, err.msg);
        if (fx)
            ops->close(fx);
        if (b && (la != lb || memcmp(a, b, la)))
            px_test_fail(__FILE__, __LINE__, "switch %d (program %d at 40x30): differs from a fresh load", i, which[i]);
        free(a);
        free(b);
    }
    if (made[1] >= 0) { /* an executor that counts: R2 made one, R1 and R2 again found theirs */
        CHECK_EQ(made[1], 1);
        CHECK_EQ(made[2], 1);
        CHECK_EQ(made[3], 1);
    }
close:
    if (ex)
        ops->close(ex);
out:
    for (int i = 0; i < nres; i++)
        pxvm_program_free(&res[i]);
    for (int v = 0; v < npoly; v++)
        pxvm_program_free(&poly[v]);
}
TEST(retarget_relative_plan_keeps_fixations_equals_fresh_load) { px__property(PX_FAM_RELATIVE); }
TEST(retarget_resize_equals_fresh_load) { px__property(PX_FAM_RESIZE); }
TEST(retarget_keeps_other_input_bound_equals_fresh_load) { px__property(PX_FAM_TWO_INPUTS); }
TEST(retarget_changed_writers_and_program_image_equal_fresh_load) { px__property(PX_FAM_SLOTS); }
TEST(retarget_program_image_written_by_some_sizes_equals_fresh_load) { px__property(PX_FAM_SLOT0); }

static int px__asm(const char *text, pxvm_program *prog)
{
    pxvm_limits lim;
    pxvm_limits_default(&lim);
    pxvm_image img;
    pxvm_error err;
    if (pxasm_assemble(text, strlen(text), "refuse.pxs", &lim, &img, &err) < 0 ||
        pxvm_program_from_image(&img, &lim, prog, &err) < 0) {
        px_test_fail(__FILE__, __LINE__, "%s", err.msg);
        return -1;
    }
    return 0;
}

/* An input switched back to a size seen before starts with zero levels >= 1, as after a load,
 * when the next program reads them without rebuilding them: P(A) pyramids the input at size A,
 * Q(B) at size B, then R(A) pyramids another slot and samples the input's level 1..2 (zeros on a
 * fresh load); on the GPU, A's textures come back from the cache holding P's pyramid. */
TEST(retarget_back_to_a_cached_size_input_levels_start_zero)
{
    const pxvm_executor_ops *ops = px_test_executor();
    if (!ops)
        return;
    static const struct { int w, h; const char *pyramid; } spec[3] = {{40, 30, "image"}, {24, 20, "image"}, {40, 30, "a"}};
    pxvm_program progs[3];
    pxvm_limits lim;
    pxvm_limits_default(&lim);
    for (int i = 0; i < 3; i++) {
        char text[512];
        pxvm_image img;
        pxvm_error err;
        snprintf(text, sizeof text,
                 ".width 16\n.slot image input %dx%d\n.slot a output 16x16\nPYRAMID %s\n"
                 "SAMPLE src=image dst=a mode=linear at=(0, 0) size=(16, 16) center=(%d, %d) step=2 lod=1.5\nHALT\n",
                 spec[i].w, spec[i].h, spec[i].pyramid, spec[i].w / 2, spec[i].h / 2);
        if (pxasm_assemble(text, strlen(text), "upper.pxs", &lim, &img, &err) < 0 ||
            pxvm_program_from_image(&img, &lim, &progs[i], &err) < 0) {
            px_test_fail(__FILE__, __LINE__, "%s", err.msg);
            for (int j = 0; j < i; j++)
                pxvm_program_free(&progs[j]);
            return;
        }
    }
    pxvm_executor *ex = NULL, *fx = NULL;
    pxvm_error err;
    pxvm_open_options opt = {0, 0};
    int ok = ops->open(&ex, &opt, &err) == 0 && ops->load(ex, &progs[0], PX_BATCH, &err) == 0 &&
             px__bind(ops, ex, &progs[0], 1, 7) == 0 && ops->run(ex, NULL, &err) == 0;
    for (int i = 1; ok && i < 3; i++)
        ok = ops->retarget(ex, &progs[i], &err) == 0 && px__bind(ops, ex, &progs[i], 1, 7 + (uint64_t)i) == 0 &&
             ops->run(ex, NULL, &err) == 0;
    ok = ok && ops->open(&fx, &opt, &err) == 0 && ops->load(fx, &progs[2], PX_BATCH, &err) == 0 &&
         px__bind(ops, fx, &progs[2], 1, 9) == 0 && ops->run(fx, NULL, &err) == 0;
    CHECK(ok);
    if (!ok)
        px_test_fail(__FILE__, __LINE__, "%s", err.msg);
    if (ok) {
        size_t la, lb;
        uint8_t *a = px__snapshot(ops, ex, &progs[2], &la), *b = px__snapshot(ops, fx, &progs[2], &lb);
        CHECK(la == lb && memcmp(a, b, la) == 0);
        free(a);
        free(b);
    }
    if (ex)
        ops->close(ex);
    if (fx)
        ops->close(fx);
    for (int i = 0; i < 3; i++)
        pxvm_program_free(&progs[i]);
}

/* An input switched to a smaller size reads zero in levels >= 1 when its PYRAMID does not run in
 * the next run (after a HALT, or beyond the run's step budget), as after a load: a run skips the
 * pending zeroing only when its budget reaches a PYRAMID that rewrites them before anything reads
 * them (pxvm_upper_rebuilt). Each program runs whole at 64x64 (its storage then holds that
 * image, and its pyramid where it has one), then at 32x32 with a budget: all of its slots equal
 * those of a fresh load at 32x32 run with the same budget (traps included). */
TEST(retarget_input_levels_zero_when_its_pyramid_does_not_run)
{
    const pxvm_executor_ops *ops = px_test_executor();
    if (!ops)
        return;
    static const char *sample = "SAMPLE src=image dst=out mode=linear at=(0,0) size=(8,8) center=(4.5,4.5) step=1 lod=1\n";
    static const struct { const char *before, *after; uint64_t budget; } runs[] = {
        {"", "HALT\nPYRAMID image\nHALT\n", UINT64_MAX}, /* the PYRAMID after the HALT: never runs */
        {"PYRAMID image\n", "HALT\n", 0},                 /* a budget that stops before it */
        {"PYRAMID image\n", "HALT\n", 1},                 /* ... that runs it, then stops */
        {"PYRAMID image\n", "HALT\n", UINT64_MAX},
        /* a budget that runs an instruction before it, not it */
        {"SAMPLE src=b dst=out mode=nearest at=(0,0) size=(8,8) center=(4,4) step=1 lod=0\nPYRAMID image\n", "HALT\n", 1},
    };
    int compared = 0;
    for (size_t r = 0; r < sizeof runs / sizeof runs[0]; r++) {
        char body[256], text[512];
        pxvm_program p, q;
        snprintf(body, sizeof body, "%s%s%s", runs[r].before, sample, runs[r].after);
        snprintf(text, sizeof text, ".width 16\n.slot image input 64x64\n.slot b input 8x8\n.slot out output 8x8\n%s", body);
        if (px__asm(text, &p) < 0)
            return;
        snprintf(text, sizeof text, ".width 16\n.slot image input 32x32\n.slot b input 8x8\n.slot out output 8x8\n%s", body);
        if (px__asm(text, &q) < 0) {
            pxvm_program_free(&p);
            return;
        }
        pxvm_executor *ex = NULL, *fx = NULL;
        pxvm_error err, e1, e2;
        pxvm_open_options opt = {0, 0};
        pxvm_run_options ro = {runs[r].budget, NULL, NULL, NULL, NULL};
        int ok = ops->open(&ex, &opt, &err) == 0 && ops->load(ex, &p, PX_BATCH, &err) == 0 &&
                 px__bind(ops, ex, &p, 1, 3) == 0 && px__bind(ops, ex, &p, 2, 5) == 0 && ops->run(ex, NULL, &err) == 0 &&
                 ops->retarget(ex, &q, &err) == 0 && px__bind(ops, ex, &q, 1, 4) == 0 && ops->open(&fx, &opt, &err) == 0 &&
                 ops->load(fx, &q, PX_BATCH, &err) == 0 && px__bind(ops, fx, &q, 1, 4) == 0 &&
                 px__bind(ops, fx, &q, 2, 5) == 0;
        CHECK(ok);
        if (ok) {
            int ra = ops->run(ex, &ro, &e1), rb = ops->run(fx, &ro, &e2);
            if (ra != rb || (ra < 0 && e1.code != e2.code) || (ra < 0) != (runs[r].budget < 3 || r == 4)) /* traps */
                px_test_fail(__FILE__, __LINE__, "run %zu: %d (%s), fresh %d (%s)", r, ra, ra ? e1.msg : "", rb,
                             rb ? e2.msg : "");
            size_t la, lb;
            uint8_t *a = px__snapshot(ops, ex, &q, &la), *b = px__snapshot(ops, fx, &q, &lb);
            if (!a || !b || la != lb || memcmp(a, b, la))
                px_test_fail(__FILE__, __LINE__, "run %zu (budget %llu): the slots differ from a fresh load's", r,
                             (unsigned long long)runs[r].budget);
            else
                compared++;
            free(a);
            free(b);
        } else {
            px_test_fail(__FILE__, __LINE__, "%s", err.msg);
        }
        if (ex)
            ops->close(ex);
        if (fx)
            ops->close(fx);
        pxvm_program_free(&p);
        pxvm_program_free(&q);
    }
    CHECK_EQ(compared, 5);
}

/* An incremental GATHER switched to a program whose table entries differ (its operands equal)
 * has no last output to build on: with the same frame bound again (no tile dirty), the run
 * samples it whole and equals a fresh load; each way, twice (the second switch finds the first
 * program's configuration cached on the GPU). */
TEST(retarget_gather_with_other_table_entries_equals_fresh_load)
{
    const pxvm_executor_ops *ops = px_test_executor();
    if (!ops)
        return;
    pxvm_program p[2];
    if (px_gather_video_program(1, 4, 2u * 256u, &p[0]) < 0)
        return;
    if (px_gather_video_program(1, 40, 2u * 256u, &p[1]) < 0) {
        pxvm_program_free(&p[0]);
        return;
    }
    pxvm_executor *ex = NULL;
    pxvm_error err;
    pxvm_open_options opt = {0, 0};
    int ok = ops->open(&ex, &opt, &err) == 0 && ops->load(ex, &p[0], PX_BATCH, &err) == 0 &&
             px__bind(ops, ex, &p[0], 1, 11) == 0 && ops->run(ex, NULL, &err) == 0;
    int compared = 0;
    for (int n = 1; ok && n <= 4; n++) {
        const pxvm_program *q = &p[n % 2];
        pxvm_executor *fx = NULL;
        ok = ops->retarget(ex, q, &err) == 0 && px__bind(ops, ex, q, 1, 11) == 0 && ops->run(ex, NULL, &err) == 0 &&
             ops->open(&fx, &opt, &err) == 0 && ops->load(fx, q, PX_BATCH, &err) == 0 && px__bind(ops, fx, q, 1, 11) == 0 &&
             ops->run(fx, NULL, &err) == 0;
        for (int b = 0; ok && b < PX_BATCH; b++) {
            pxvm_image x, y;
            if (pxvm_read_image(ops, ex, q, 4, 0, b, &x, &err) < 0 || pxvm_read_image(ops, fx, q, 4, 0, b, &y, &err) < 0) {
                ok = 0;
                break;
            }
            if (memcmp(x.px, y.px, 2 * 4))
                px_test_fail(__FILE__, __LINE__, "switch %d, item %d: the GATHER's tokens differ from a fresh load's", n, b);
            compared++;
            pxvm_image_free(&x);
            pxvm_image_free(&y);
        }
        if (fx)
            ops->close(fx);
    }
    if (!ok)
        px_test_fail(__FILE__, __LINE__, "%s", err.msg);
    CHECK_EQ(compared, 4 * PX_BATCH);
    if (ex)
        ops->close(ex);
    pxvm_program_free(&p[0]);
    pxvm_program_free(&p[1]);
}

/* The check's refusals name what differs; a refused retarget changes nothing. */
TEST(retarget_refusals_name_what_differs)
{
    const pxvm_executor_ops *ops = px_test_executor();
    if (!ops)
        return;
    static const char *base = ".width 16\n.slot image input 20x10\n.slot canvas output 16x16\n"
                              "RESIZE image canvas filter=1 at=(0,0) size=(16,16)\nRESIZE image canvas filter=2 at=(0,0) size=(8,8)\nHALT\n";
    static const struct {
        const char *text, *words;
    } bad[] = {
        {".width 16\n.slot image input 20x10\n.slot canvas output 16x16\n"
         "RESIZE image canvas filter=1 at=(0,0) size=(16,16)\nPYRAMID canvas\nHALT\n",
         "the opcode of instruction 1 (PYRAMID, loaded RESIZE)"},
        {".width 16\n.slot image input 20x10\n.slot canvas output 16x12\n"
         "RESIZE image canvas filter=1 at=(0,0) size=(16,12)\nRESIZE image canvas filter=2 at=(0,0) size=(8,8)\nHALT\n",
         "the size of slot 2 ('canvas'), not an input: 16x12"},
        {".width 16\n.slot image input 20x10\n.slot canvas scratch 16x16\n"
         "RESIZE image canvas filter=1 at=(0,0) size=(16,16)\nRESIZE image canvas filter=2 at=(0,0) size=(8,8)\nHALT\n",
         "the role of slot 2 ('canvas')"},
        {".width 16\n.slot image input 20x10\n.slot out output 16x16\n"
         "RESIZE image out filter=1 at=(0,0) size=(16,16)\nRESIZE image out filter=2 at=(0,0) size=(8,8)\nHALT\n",
         "the name of slot 2 ('canvas'): 'out'"},
        {".width 16\n.slot image input 20x10\n.slot canvas output 16x16\n"
         "RESIZE image canvas filter=1 at=(0,0) size=(16,16)\nHALT\n",
         "its instruction count (2, loaded 3)"},
        {".width 16\n.slot image input 20x10\n.slot canvas output 16x16\n.slot extra scratch 4x4\n"
         "RESIZE image canvas filter=1 at=(0,0) size=(16,16)\nRESIZE image canvas filter=2 at=(0,0) size=(8,8)\nHALT\n",
         "its slot count (4, loaded 3)"},
    };
    pxvm_program p0, ok;
    if (px__asm(base, &p0) < 0)
        return;
    pxvm_executor *ex = NULL;
    pxvm_error err;
    pxvm_open_options opt = {0, 0};
    if (ops->open(&ex, &opt, &err) < 0 || ops->load(ex, &p0, PX_BATCH, &err) < 0) {
        px_test_fail(__FILE__, __LINE__, "%s", err.msg);
        return;
    }
    px__bind(ops, ex, &p0, 1, 5);
    CHECK_EQ(ops->run(ex, NULL, &err), 0);
    size_t la, lb;
    uint8_t *before = px__snapshot(ops, ex, &p0, &la);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        pxvm_program q;
        if (px__asm(bad[i].text, &q) < 0)
            continue;
        CHECK_EQ(ops->retarget(ex, &q, &err), -1);
        CHECK_EQ(err.code, PXE_RETARGET_DIFFERS);
        CHECK_STR(err.msg, "retarget: the next program differs from the loaded one in ");
        CHECK_STR(err.msg, bad[i].words);
        pxvm_program_free(&q);
    }
    /* still loaded, still bound: the same run gives the same bytes */
    CHECK_EQ(ops->run(ex, NULL, &err), 0);
    uint8_t *after = px__snapshot(ops, ex, &p0, &lb);
    CHECK(la == lb && !memcmp(before, after, la));
    free(before);
    free(after);
    /* the last accepted difference: another input size and other operands */
    if (px__asm(".width 16\n.slot image input 7x30\n.slot canvas output 16x16\n"
                "RESIZE image canvas filter=3 at=(2,1) size=(13,15)\nRESIZE image canvas filter=0 at=(0,0) size=(5,8)\nHALT\n",
                &ok) == 0) {
        CHECK_EQ(ops->retarget(ex, &ok, &err), 0);
        ops->close(ex); /* before the program it runs goes */
        pxvm_program_free(&ok);
    } else {
        ops->close(ex);
    }
    pxvm_program_free(&p0);
}

/* Resolutions of one any-size program at edge sizes (1xN, Nx1, 1x1, odd), back and forth, within
 * the input's storage and beyond it: each retarget's run == a fresh load of that resolution, byte
 * for byte (every level of every slot, the program image's too), every item. */
TEST(retarget_any_size_edge_sizes_back_and_forth_equal_fresh_load)
{
    static const int sizes[][2] = {{64, 64},  {101, 103}, {1, 64},  {64, 1},  {9, 61},  {61, 9},  {2, 71},
                                   {71, 2},   {29, 31},   {97, 1},  {1, 97},  {101, 103}, {64, 64}, {16, 16},
                                   {251, 7},  {45, 30},   {13, 67}, {250, 7}, {67, 13},  {1, 1},   {45, 30},
                                   {1, 1},    {251, 103}};
    px__property_at(PX_FAM_ANY, sizes, (int)(sizeof sizes / sizeof sizes[0]), NULL, 0);
    if (px__any_made)
        pxvm_program_free(&px__any_poly);
    px__any_made = 0;
}
