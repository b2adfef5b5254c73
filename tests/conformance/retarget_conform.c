/* retarget_conform.c - pxconform --retarget N: N random size switches of the shipped plans
 * (programs/NAME.json compiled for random image sizes, batch 2). Each switch retargets one long-lived
 * executor to the plan at the new size (every 4th switch goes back to a size seen before: the
 * GPU's cached textures, tables and graphs), binds new images, runs, and compares every level of
 * every slot of every item, the fixation registers and the token geometry with a fresh executor of
 * the same kind loaded with that program, and with the CPU executor, byte for byte. A plan whose
 * structure changes with the size (logpolar drops tokens that fall outside, uniform's budget
 * follows the image) is refused by pxvm_check_retarget at such sizes: counted as refused, the
 * loaded program stays. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "../../assembler/plan.h"
#include "../golden/golden.h"
#include "cases.h"

#define PX_RT_BATCH 2

static const char *const px__plans[] = {"programs/foveate273.json", "programs/grid.json", "programs/logpolar.json",
                                        "programs/aniso.json", "programs/uniform.json", "programs/v1.json"};
#define PX_RT_NPLANS ((int)(sizeof px__plans / sizeof px__plans[0]))

/* The plan of `path` with its "image" set to w x h, compiled and loaded. */
static int px__plan_at(const char *path, int w, int h, pxvm_program *prog, pxvm_error *err)
{
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    if (!root)
        return pxvm_fail(err, PXE_IO_READ, -1, -1, path, je.text);
    json_object_set_new(root, "image", json_pack("[ii]", w, h));
    char *text = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    if (!text)
        return pxvm_fail(err, PXE_NOMEM, -1, -1, 0ull);
    pxvm_plan plan;
    pxvm_image img;
    int rc = pxvm_plan_parse(text, strlen(text), path, &plan, err);
    free(text);
    if (rc == 0) {
        rc = pxvm_plan_compile(&plan, &img, err);
        pxvm_plan_free(&plan);
    }
    pxvm_limits lim;
    pxvm_limits_default(&lim);
    return rc == 0 ? pxvm_program_from_image(&img, &lim, prog, err) : -1;
}

static const int32_t px__fix[PX_RT_BATCH][2] = {{120 << 16, 90 << 16}, {37 << 16 | 0x8000, 200 << 16}};

static int px__bind_all(const pxvm_executor_ops *ops, pxvm_executor *ex, const pxvm_program *prog, uint64_t seed,
                        pxvm_error *err)
{
    for (int k = 0; k < prog->nslots; k++)
        if (prog->slots[k].role == PXI_ROLE_INPUT)
            for (int b = 0; b < PX_RT_BATCH; b++) {
                pxvm_image img;
                if (pxvm_image_alloc(&img, prog->slots[k].w, prog->slots[k].h, err) < 0)
                    return -1;
                uint64_t s = seed * 977u + (uint64_t)(k * PX_RT_BATCH + b);
                for (size_t i = 0; i < (size_t)img.w * (size_t)img.h * 4u; i++)
                    img.px[i] = (uint8_t)(px_case_next(&s) >> 56);
                pxvm_view v = pxvm_image_view(&img);
                int rc = ops->bind(ex, k, b, &v, err);
                pxvm_image_free(&img);
                if (rc < 0)
                    return -1;
            }
    return 0;
}

/* Every level of every slot of every item, the registers and the geometry, as bytes. */
static uint8_t *px__state(const pxvm_executor_ops *ops, pxvm_executor *ex, const pxvm_program *prog, size_t *len,
                          long *outputs, pxvm_error *err)
{
    size_t n = 0, cap = 1 << 20;
    uint8_t *out = malloc(cap);
    int ok = out != NULL;
#define PX__PUT(p, bytes)                                                                                             \
    do {                                                                                                             \
        while (ok && n + (bytes) > cap) {                                                                            \
            uint8_t *q_ = realloc(out, cap *= 2);                                                                    \
            ok = q_ != NULL;                                                                                         \
            if (q_)                                                                                                  \
                out = q_;                                                                                            \
        }                                                                                                            \
        if (ok) {                                                                                                    \
            memcpy(out + n, (p), (bytes));                                                                           \
            n += (bytes);                                                                                            \
        }                                                                                                            \
    } while (0)
    for (int b = 0; ok && b < PX_RT_BATCH; b++)
        for (int k = 0; ok && k < prog->nslots; k++)
            for (int l = 0; ok && l < prog->slots[k].levels; l++) {
                pxvm_image img;
                if (pxvm_read_image(ops, ex, prog, k, l, b, &img, err) < 0) {
                    free(out);
                    return NULL;
                }
                PX__PUT(img.px, (size_t)img.w * (size_t)img.h * 4u);
                pxvm_image_free(&img);
                (*outputs)++;
            }
    int32_t fix[PX_RT_BATCH * 16];
    if (ok && ops->read_state(ex, PXVM_STATE_FIXATIONS, 0, 0, PX_RT_BATCH, fix, -1, err) < 0)
        ok = 0;
    PX__PUT(fix, sizeof fix);
    for (int k = 0; ok && k < prog->nslots; k++)
        if (prog->geom_base[k] >= 0) {
            size_t bytes = (size_t)PX_RT_BATCH * (size_t)prog->slots[k].patch_count * PXVM_GEOM_INTS * sizeof(int32_t);
            int32_t *g = malloc(bytes);
            if (!g || ops->read_state(ex, PXVM_STATE_GEOMETRY, k, 0, PX_RT_BATCH, g, -1, err) < 0)
                ok = 0;
            else
                PX__PUT(g, bytes);
            free(g);
        }
#undef PX__PUT
    if (!ok) {
        free(out);
        if (!err->msg[0])
            pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)cap);
        return NULL;
    }
    *len = n;
    return out;
}

/* A fresh executor of `ops` with prog loaded, registers set, images of `seed` bound, run. */
static uint8_t *px__fresh(const pxvm_executor_ops *ops, const pxvm_open_options *oo, const pxvm_program *prog, uint64_t seed,
                          size_t *len, long *outputs, pxvm_error *err)
{
    pxvm_executor *ex = NULL;
    uint8_t *s = NULL;
    if (ops->open(&ex, oo, err) == 0 && ops->load(ex, prog, PX_RT_BATCH, err) == 0 &&
        ops->set_fixations(ex, 0, PX_RT_BATCH, 0, 1, &px__fix[0][0], -1, err) == 0 && px__bind_all(ops, ex, prog, seed, err) == 0 &&
        ops->run(ex, NULL, err) == 0)
        s = px__state(ops, ex, prog, len, outputs, err);
    if (ex)
        ops->close(ex);
    return s;
}

int px_retarget_conform(const pxvm_executor_ops *ops, const pxvm_open_options *oo, long switches, uint64_t seed,
                        px_golden_stats *st);
int px_retarget_conform(const pxvm_executor_ops *ops, const pxvm_open_options *oo, long switches, uint64_t seed,
                        px_golden_stats *st)
{
    uint64_t rng = seed * 0x9E3779B97F4A7C15ull + 1;
    long done = 0, refused = 0;
    printf("retarget: %ld size switches of the shipped plans on %s (batch %d), each against a fresh load%s, seed %llu\n",
           switches, ops->name, PX_RT_BATCH, ops == &pxvm_cpu_executor ? "" : " and the CPU executor",
           (unsigned long long)seed);
    for (int p = 0; p < PX_RT_NPLANS && done < switches; p++) {
        long per = (switches - done) / (PX_RT_NPLANS - p);
        enum { PX_KEEP = 8 };
        pxvm_program progs[PX_KEEP]; /* the programs of recent sizes (the loaded one among them) */
        int sizes[PX_KEEP][2], used[PX_KEEP] = {0}, nused = 0, next_slot = 0, cur = -1;
        pxvm_executor *ex = NULL;
        pxvm_error err;
        memset(&err, 0, sizeof err);
        if (ops->open(&ex, oo, &err) < 0) {
            printf("DIFFERENCE %s: open: %s\n", px__plans[p], err.msg);
            st->differences++;
            break;
        }
        for (long i = 0; i <= per; i++) {
            int w, h, slot;
            if (i % 4 == 0 && nused > 1) { /* back to a size seen before (not the one loaded) */
                slot = (int)(px_case_next(&rng) % (uint64_t)PX_KEEP);
                while (!used[slot] || slot == cur)
                    slot = (slot + 1) % PX_KEEP;
                w = sizes[slot][0], h = sizes[slot][1];
            } else { /* a new size, replacing the oldest program kept (never the loaded one) */
                w = 280 + (int)(px_case_next(&rng) % 700u), h = 280 + (int)(px_case_next(&rng) % 500u);
                slot = next_slot == cur ? (next_slot + 1) % PX_KEEP : next_slot;
                next_slot = (slot + 1) % PX_KEEP;
                if (used[slot])
                    pxvm_program_free(&progs[slot]), used[slot] = 0, nused--;
                if (px__plan_at(px__plans[p], w, h, &progs[slot], &err) < 0) {
                    printf("DIFFERENCE %s at %dx%d: the plan does not compile: %s\n", px__plans[p], w, h, err.msg);
                    st->differences++;
                    break;
                }
                used[slot] = 1, nused++;
                sizes[slot][0] = w, sizes[slot][1] = h;
            }
            const pxvm_program *prog = &progs[slot];
            uint64_t img_seed = seed * 100003u + (uint64_t)p * 1009u + (uint64_t)i;
            int rc = i == 0 ? ops->load(ex, prog, PX_RT_BATCH, &err) == 0 &&
                                      ops->set_fixations(ex, 0, PX_RT_BATCH, 0, 1, &px__fix[0][0], -1, &err) == 0
                            : ops->retarget(ex, prog, &err) == 0;
            if (!rc && i > 0 && err.code == PXE_RETARGET_DIFFERS && strstr(err.msg, "retarget: the next program differs")) {
                refused++;
                continue; /* the loaded program stays */
            }
            cur = slot;
            if (rc)
                rc = px__bind_all(ops, ex, prog, img_seed, &err) == 0 && ops->run(ex, NULL, &err) == 0;
            size_t la = 0, lb = 0, lc = 0;
            uint8_t *a = rc ? px__state(ops, ex, prog, &la, &st->outputs, &err) : NULL;
            if (!a) {
                printf("DIFFERENCE %s, switch %ld to %dx%d: %s\n", px__plans[p], i, w, h, err.msg);
                st->differences++;
                break;
            }
            uint8_t *b = px__fresh(ops, oo, prog, img_seed, &lb, &st->outputs, &err);
            uint8_t *c = ops == &pxvm_cpu_executor ? NULL : px__fresh(&pxvm_cpu_executor, NULL, prog, img_seed, &lc, &st->outputs, &err);
            st->programs++;
            st->bytes += (unsigned long long)la * (c ? 2u : 1u);
            if (!b || la != lb || memcmp(a, b, la)) {
                printf("DIFFERENCE %s, switch %ld to %dx%d: the retargeted run differs from a fresh load%s%s\n", px__plans[p], i,
                       w, h, b ? "" : ": ", b ? "" : err.msg);
                st->differences++;
            }
            if (ops != &pxvm_cpu_executor && (!c || la != lc || memcmp(a, c, la))) {
                printf("DIFFERENCE %s, switch %ld to %dx%d: the retargeted run differs from the CPU executor%s%s\n",
                       px__plans[p], i, w, h, c ? "" : ": ", c ? "" : err.msg);
                st->differences++;
            }
            free(a), free(b), free(c);
            done += i > 0;
        }
        ops->close(ex); /* before the programs it ran */
        for (int k = 0; k < PX_KEEP; k++)
            if (used[k])
                pxvm_program_free(&progs[k]);
    }
    printf("retarget: %ld switches compared, %ld refused by the check (the plan's structure changes with the size)\n", done,
           refused);
    return 0;
}
