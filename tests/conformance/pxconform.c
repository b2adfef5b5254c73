/* pxconform - the conformance suite runner (tests/conformance/run wraps it).
 *
 *   pxconform [--executor cpu|cuda] [--device N]
 *       Runs every edge case (cases.c) and every program of tests/golden/programs.txt on the
 *       executor and compares every level of every slot with tests/conformance/goldens.txt and
 *       tests/golden/goldens.txt.
 *   pxconform --write-goldens
 *       Writes tests/conformance/goldens.txt from the CPU reference executor.
 *   pxconform --random N --seed S [--executor cpu|cuda] [--save DIR]
 *       N random valid programs (seeds S .. S+N-1), each run on the executor and on the CPU
 *       reference, compared byte for byte. (With --executor cpu the reference runs on one thread,
 *       one instruction at a time, so the threaded, batched plan is what is checked.) On a
 *       difference: the seed, the first instruction whose outputs differ, the slot, the first
 *       differing pixel; the program and its inputs are saved under DIR.
 *
 *   pxconform --random N --seed S --fuse-embed [--executor cpu|cuda]
 *       The same with every EMBED whose atlas only feeds it fused on the executor under test
 *       (SPEC "Fused EMBED": the cuda executor's fetches write its staged rows, not the atlas):
 *       every byte is compared but the fused atlases' level 0, which is not kept.
 *
 *   pxconform --video N --seed S [--executor cpu|cuda]
 *       N random frame sequences (tests/conformance/video.c): incremental == full recompute on the
 *       executor after every frame, changed tokens conservative, and (cuda) the same bytes as the
 *       CPU reference.
 *
 *   pxconform --retarget N --seed S [--executor cpu|cuda]
 *       N random size switches of the shipped plans (retarget_conform.c): a retargeted executor
 *       == a fresh load of the program at that size, and (cuda) == the CPU executor.
 *
 * Ends with "conformance: P programs, O outputs, B bytes compared, D differences"; exit 0 only
 * with no difference.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../golden/golden.h"
#include "cases.h"
#include "../../tools/outputs.h"
#include "../../isa/px_sem.h"

typedef struct {
    const pxvm_executor_ops *ops;
    pxvm_executor *ex;
} px__target;

static char *px__program(const char *line, void *ctx, px_golden_stats *stats)
{
    px__target *t = ctx;
    return px_golden_run_line(t->ops, t->ex, line, stats);
}

static char *px__case(const char *name, void *reports, px_golden_stats *stats)
{
    (void)stats;
    return px_case_report(reports, name);
}

/* ---- random programs: run on two executors and compare ---------------------------------------- */

/* --fuse-embed: fuse the EMBEDs that may be on the executor under test; the programs it fused */
static int px__fuse;
static long px__fused_programs;

typedef struct {
    int failed;          /* the run failed: err holds why */
    uint8_t unkept[PXVM_MAX_SLOTS + 1]; /* level 0 not compared: a fused EMBED's atlas */
    pxvm_error err;
    int nimg;
    pxvm_image *img; /* every level of every slot, in slot/level order */
} px__result;

static void px__result_free(px__result *r)
{
    for (int i = 0; i < r->nimg; i++)
        pxvm_image_free(&r->img[i]);
    free(r->img);
    r->img = NULL;
    r->nimg = 0;
}

/* Runs the case's program (`full`, already validated), cut after `limit` instructions when
 * limit >= 0 (instruction `limit` becomes HALT), optionally one instruction per step. */
/* --fuse-embed on the executor under test: its fusable EMBEDs fused, their atlases marked unkept. */
static int px__fuse_on(const px__target *t, const pxvm_program *prog, px__result *r)
{
    uint8_t *fused = calloc(prog->ninsns ? prog->ninsns : 1, 1);
    pxvm_error why;
    if (!fused)
        return pxvm_fail(&r->err, PXE_NOMEM, -1, -1, (unsigned long long)prog->ninsns);
    int rc = 0;
    if (pxvm_embed_fusion(prog, fused, &why) > 0) {
        for (uint32_t i = 0; i < prog->ninsns; i++)
            if (fused[i])
                r->unkept[PX_ARG(&prog->insns[i], EMBED, src)] = 1;
        if (t->ops->fuse_embed)
            rc = t->ops->fuse_embed(t->ex, fused, &r->err);
    }
    free(fused);
    return rc;
}

static int px__run(const px__target *t, const px_case *c, const pxvm_program *full, long limit, int sequential,
                   int fuse, px__result *r)
{
    memset(r, 0, sizeof *r);
    pxvm_limits lim;
    pxvm_limits_default(&lim);
    pxvm_image copy;
    if (pxvm_image_alloc(&copy, c->program.w, c->program.h, &r->err) < 0)
        return -1;
    memcpy(copy.px, c->program.px, (size_t)copy.w * (size_t)copy.h * 4u);
    if (limit >= 0 && (uint32_t)limit < full->ninsns) {
        memset(copy.px + 4u * full->insns[limit].pc, 0, 4); /* HALT */
        pxi_write_le(copy.px, 3, 0, 4, (uint32_t)limit + 1);
    }
    pxvm_program prog;
    if (pxvm_program_from_image(&copy, &lim, &prog, &r->err) < 0) {
        r->failed = 1;
        return 0;
    }
    if (sequential) {
        for (uint32_t i = 0; i < prog.ninsns; i++)
            prog.steps[i] = (pxvm_step){PXVM_STEP_ONE, i, 1, 0};
        prog.nsteps = prog.ninsns;
    }
    pxvm_run_options ro = {.max_steps = lim.max_steps};
    int rc = t->ops->load(t->ex, &prog, 1, &r->err);
    if (rc == 0 && fuse)
        rc = px__fuse_on(t, &prog, r);
    for (int i = 0; rc == 0 && i < c->ninputs; i++)
        rc = pxvm_bind_image(t->ops, t->ex, c->input_slot[i], &c->inputs[i], &r->err);
    if (rc == 0 && c->has_fix)
        rc = t->ops->set_fixations(t->ex, 0, 1, 0, PX_FIX_REGS, c->fix, -1, &r->err);
    if (rc == 0)
        rc = t->ops->run(t->ex, &ro, &r->err);
    if (rc < 0) {
        r->failed = 1;
        pxvm_program_free(&prog);
        return r->err.cls == PXVM_IO || r->err.cls == PXVM_UNAVAILABLE ? -1 : 0; /* executor broke */
    }
    int total = 2; /* every level of every slot, then the registers and the token geometry */
    for (int k = 0; k < prog.nslots; k++)
        total += prog.slots[k].levels;
    r->img = calloc((size_t)total, sizeof(pxvm_image));
    for (int k = 0; k < prog.nslots && r->img; k++)
        for (int l = 0; l < prog.slots[k].levels; l++)
            if (pxvm_read_image(t->ops, t->ex, &prog, k, l, 0, &r->img[r->nimg++], &r->err) < 0) {
                pxvm_program_free(&prog);
                return -1;
            }
    /* registers (16 int32 = 16 "pixels") and geometry (5 int32 per token), compared as images */
    int n[2] = {2 * PX_FIX_REGS, prog.ngeom * PX_GEOM_INTS};
    for (int what = 0; what < 2 && r->img; what++) {
        pxvm_image *img = &r->img[r->nimg++];
        if (n[what] == 0 || pxvm_image_alloc(img, n[what], 1, &r->err) < 0)
            continue;
        int rc2 = 0;
        if (what == PXVM_STATE_FIXATIONS)
            rc2 = t->ops->read_state(t->ex, what, 0, 0, 1, (int32_t *)(void *)img->px, -1, &r->err);
        for (int k = 0; what == PXVM_STATE_GEOMETRY && k < prog.nslots && rc2 == 0; k++)
            if (prog.geom_base[k] >= 0)
                rc2 = t->ops->read_state(t->ex, what, k, 0, 1, (int32_t *)(void *)img->px + prog.geom_base[k] * PX_GEOM_INTS,
                                         -1, &r->err);
        if (rc2 < 0) {
            pxvm_program_free(&prog);
            return -1;
        }
    }
    pxvm_program_free(&prog);
    return 0;
}

/* 0 if equal; else describes the first difference into why. */
static int px__compare(const px__result *a, const px__result *b, const pxvm_program *prog, px_golden_stats *st,
                       char *why, size_t len)
{
    if (a->failed || b->failed) {
        if (a->failed && b->failed && a->err.code == b->err.code && !strcmp(a->err.msg, b->err.msg) &&
            a->err.x == b->err.x && a->err.y == b->err.y)
            return 0;
        snprintf(why, len, "runs end differently: '%s' vs '%s'", a->failed ? a->err.msg : "ok",
                 b->failed ? b->err.msg : "ok");
        return 1;
    }
    int i = 0;
    for (int k = 0; k < prog->nslots; k++)
        for (int l = 0; l < prog->slots[k].levels; l++, i++) {
            const pxvm_image *x = &a->img[i], *y = &b->img[i];
            size_t n = (size_t)x->w * (size_t)x->h * 4u;
            if (l == 0 && (a->unkept[k] || b->unkept[k]))
                continue; /* a fused EMBED's atlas: its level 0 is not kept (its EMBED's output is compared) */
            st->outputs++;
            st->bytes += n;
            if (!memcmp(x->px, y->px, n))
                continue;
            size_t p = 0;
            while (x->px[p] == y->px[p])
                p++;
            char lb[16];
            p /= 4;
            snprintf(why, len, "slot %s level %d, first differing pixel (%zu,%zu): %02x%02x%02x%02x vs %02x%02x%02x%02x",
                     pxvm_slot_label(prog, k, lb), l, p % (size_t)x->w, p / (size_t)x->w, x->px[4 * p],
                     x->px[4 * p + 1], x->px[4 * p + 2], x->px[4 * p + 3], y->px[4 * p], y->px[4 * p + 1],
                     y->px[4 * p + 2], y->px[4 * p + 3]);
            return 1;
        }
    for (int what = 0; what < 2; what++, i++) { /* fixation registers, token geometry */
        const pxvm_image *x = &a->img[i], *y = &b->img[i];
        size_t n = (size_t)x->w * (size_t)x->h * 4u;
        st->outputs += n > 0;
        st->bytes += n;
        if (n && memcmp(x->px, y->px, n)) {
            size_t p = 0;
            while (x->px[p] == y->px[p])
                p++;
            const int32_t *xa = (const int32_t *)(const void *)x->px, *ya = (const int32_t *)(const void *)y->px;
            snprintf(why, len, "%s differ at int32 %zu: %d vs %d", what ? "token geometry" : "fixation registers", p / 4,
                     xa[p / 4], ya[p / 4]);
            return 1;
        }
    }
    return 0;
}

static void px__save(const char *dir, const px_case *c, uint64_t seed)
{
    mkdir(dir, 0755);
    char path[1024], cmd[4096];
    pxvm_outputs out = {0};
    uint8_t *png;
    size_t len;
    snprintf(path, sizeof path, "%s/random-%llu.pxi", dir, (unsigned long long)seed);
    int n = snprintf(cmd, sizeof cmd, "bin/pxrun %s", path);
    if (pxvm_png_encode(&c->program, &png, &len, NULL) == 0) {
        pxvm_outputs_add(&out, path, png, len, NULL);
        free(png);
    }
    for (int i = 0; i < c->ninputs; i++) {
        snprintf(path, sizeof path, "%s/random-%llu-in%d.png", dir, (unsigned long long)seed, c->input_slot[i]);
        if (pxvm_png_encode(&c->inputs[i], &png, &len, NULL) == 0) {
            pxvm_outputs_add(&out, path, png, len, NULL);
            free(png);
        }
        n += snprintf(cmd + n, sizeof cmd - (size_t)n, " --in %d=%s", c->input_slot[i], path);
    }
    pxvm_outputs_commit(&out, NULL);
    printf("  saved; rerun with: %s --hash --executor cpu|cuda\n", cmd);
}

static int px__random(const px__target *t, const px__target *ref, int sequential, long count, uint64_t seed,
                      const char *save, px_golden_stats *st)
{
    long trapped = 0, insns = 0, ops[256] = {0};
    for (long i = 0; i < count; i++) {
        uint64_t s = seed + (uint64_t)i;
        px_case c;
        if (px_case_random(s, &c) < 0) {
            printf("seed %llu: the generator built no program\n", (unsigned long long)s);
            st->differences++;
            px_case_free(&c);
            continue;
        }
        pxvm_limits lim;
        pxvm_limits_default(&lim);
        pxvm_program prog;
        pxvm_error err;
        if (pxvm_program_from_copy(&c.program, &lim, &prog, &err) < 0) {
            printf("seed %llu: the generator made an invalid program: %s\n", (unsigned long long)s, err.msg);
            st->differences++;
            px_case_free(&c);
            continue;
        }
        px__result a, b;
        char why[2048];
        st->programs++;
        if (px__run(t, &c, &prog, -1, 0, px__fuse, &a) < 0 || px__run(ref, &c, &prog, -1, sequential, 0, &b) < 0) {
            printf("seed %llu: an executor failed: %s / %s\n", (unsigned long long)s, a.err.msg, b.err.msg);
            return -1;
        }
        trapped += a.failed && b.failed;
        for (int k = 0; k < prog.nslots; k++)
            if (a.unkept[k]) {
                px__fused_programs++;
                break;
            }
        insns += prog.ninsns;
        for (uint32_t k = 0; k < prog.ninsns; k++)
            ops[prog.insns[k].op]++;
        if (px__compare(&a, &b, &prog, st, why, sizeof why)) {
            st->differences++;
            /* the first instruction whose outputs differ: the shortest differing prefix */
            long lo = 0, hi = (long)prog.ninsns - 1; /* prefix lengths: [0, lo) agree ... hi differs */
            while (lo < hi) {
                long mid = (lo + hi) / 2;
                px__result pa, pb;
                px_golden_stats scratch = {0};
                char tmp[2048];
                int d = px__run(t, &c, &prog, mid, 0, px__fuse, &pa) == 0 &&
                        px__run(ref, &c, &prog, mid, sequential, 0, &pb) == 0 &&
                        px__compare(&pa, &pb, &prog, &scratch, tmp, sizeof tmp);
                px__result_free(&pa);
                px__result_free(&pb);
                if (d)
                    hi = mid;
                else
                    lo = mid + 1;
            }
            char text[512];
            int x, y;
            long culprit = lo > 0 ? lo - 1 : 0;
            pxvm_insn_format(&prog, &prog.insns[culprit], text, sizeof text);
            pxvm_stream_xy(&prog, prog.insns[culprit].pc, &x, &y);
            printf("DIFFERENCE seed %llu: %s\n  first instruction whose outputs differ: [%ld] pixel (%d,%d) %s\n",
                   (unsigned long long)s, why, culprit, x, y, text);
            if (save)
                px__save(save, &c, s);
        }
        px__result_free(&a);
        px__result_free(&b);
        pxvm_program_free(&prog);
        px_case_free(&c);
    }
    /* the count of each opcode the random programs used, named by the opcode table */
    printf("%ld instructions (", insns);
    const char *sep = "";
    for (unsigned v = 1; v < 256; v++)
        if (ops[v] && pxi_op(v)->name)
            printf("%s%s %ld", sep, pxi_op(v)->name, ops[v]), sep = ", ";
    printf("); %ld runs ended in the same trap\n", trapped);
    if (px__fuse)
        printf("fused EMBED (--fuse-embed) in %ld of %ld programs\n", px__fused_programs, count);
    return 0;
}

static int px__write_goldens(const char *path)
{
    pxvm_executor *ex;
    pxvm_error err;
    px_case_reports r;
    px_golden_stats st = {0};
    if (pxvm_cpu_executor.open(&ex, NULL, &err) < 0 || px_case_run_all(&pxvm_cpu_executor, ex, &st, &r) < 0)
        return 1;
    FILE *f = fopen(path, "w");
    if (!f)
        return 1;
    fprintf(f, "# pxvm conformance goldens: every edge case of tests/conformance/cases.c on the CPU reference\n"
               "# executor (FNV-1a 64 of every level of every slot, or the error a run ends with).\n"
               "# Regenerate: bin/pxconform --write-goldens (only when semantics change on purpose)\n");
    for (int i = 0; i < r.n; i++)
        fprintf(f, "== %s\n%s", r.names[i], r.reports[i] ? r.reports[i] : "error: no report\n");
    fclose(f);
    printf("wrote %s: %d cases\n", path, r.n);
    px_case_reports_free(&r);
    pxvm_cpu_executor.close(ex);
    return 0;
}

/* retarget_conform.c */
int px_retarget_conform(const pxvm_executor_ops *ops, const pxvm_open_options *oo, long switches, uint64_t seed,
                        px_golden_stats *st);

int main(int argc, char **argv)
{
    const char *exec_name = "cpu", *save = "build/conformance-failures";
    long count = 0, videos = 0, retargets = 0;
    uint64_t seed = 1;
    pxvm_open_options oo = {0, 0};
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(argv[i], "--write-goldens"))
            return px__write_goldens("tests/conformance/goldens.txt");
        else if (!strcmp(argv[i], "--executor") && v)
            exec_name = argv[++i];
        else if (!strcmp(argv[i], "--device") && v)
            oo.device = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--random") && v)
            count = atol(argv[++i]);
        else if (!strcmp(argv[i], "--video") && v)
            videos = atol(argv[++i]);
        else if (!strcmp(argv[i], "--retarget") && v)
            retargets = atol(argv[++i]);
        else if (!strcmp(argv[i], "--seed") && v)
            seed = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--save") && v)
            save = argv[++i];
        else if (!strcmp(argv[i], "--fuse-embed"))
            px__fuse = 1;
        else {
            fprintf(stderr, "usage: pxconform [--executor cpu|cuda] [--device N] [--random N --seed S [--fuse-embed]] [--save DIR] "
                            "[--video N --seed S] [--retarget N --seed S] | --write-goldens\n");
            return 2;
        }
    }
    pxvm_error err;
    px__target t = {pxvm_executor_find(exec_name, &err), NULL};
    if (!t.ops || t.ops->open(&t.ex, &oo, &err) < 0) {
        char buf[1024];
        pxvm_error_format(&err, buf, sizeof buf);
        fprintf(stderr, "pxconform: %s\n", buf);
        return 7;
    }
    px_golden_stats st = {0};
    int rc = 0;
    if (retargets > 0) {
        rc = px_retarget_conform(t.ops, &oo, retargets, seed, &st);
    } else if (videos > 0) {
        const pxvm_executor_ops *ref = t.ops == &pxvm_cpu_executor ? NULL : &pxvm_cpu_executor;
        printf("video sequences: %s, incremental against full recompute%s, seeds %llu..%llu\n", exec_name,
               ref ? " and against the CPU reference" : "", (unsigned long long)seed,
               (unsigned long long)(seed + (uint64_t)videos - 1));
        long frames = 0;
        for (long i = 0; i < videos && rc == 0; i++) {
            px_video_case vc;
            char why[1024];
            if (px_video_make(seed + (uint64_t)i, &vc) < 0) {
                printf("seed %llu: the generator built no program\n", (unsigned long long)(seed + (uint64_t)i));
                st.differences++;
            } else {
                long d = st.differences;
                frames += vc.nframes;
                if (px_video_check(t.ops, ref, &vc, &st, why, sizeof why) < 0)
                    rc = -1;
                if (st.differences != d || rc < 0)
                    printf("DIFFERENCE %s\n", why);
            }
            px_video_case_free(&vc);
        }
        printf("%ld frames; after the first frame %ld of %ld incremental tokens were sampled again (%.1f%%)\n", frames,
               px_video_sampled, px_video_tokens, px_video_tokens ? 100.0 * (double)px_video_sampled / (double)px_video_tokens : 0.0);
    } else if (count > 0) {
        int sequential = t.ops == &pxvm_cpu_executor;
        pxvm_open_options one = {1, 0};
        px__target ref = {&pxvm_cpu_executor, NULL};
        if (pxvm_cpu_executor.open(&ref.ex, sequential ? &one : NULL, &err) < 0)
            return 1;
        printf("random programs: %s against the CPU reference%s, seeds %llu..%llu\n", exec_name,
               sequential ? " (one thread, one instruction per step)" : "", (unsigned long long)seed,
               (unsigned long long)(seed + (uint64_t)count - 1));
        rc = px__random(&t, &ref, sequential, count, seed, save, &st);
        pxvm_cpu_executor.close(ref.ex);
    } else {
        px_case_reports r;
        long before = st.programs;
        if (px_case_run_all(t.ops, t.ex, &st, &r) < 0)
            return 1;
        px_golden_stats seen = {0};
        if (px_golden_check("tests/conformance/goldens.txt", px__case, &r, &seen, stdout) < 0)
            rc = -1;
        st.differences += seen.differences;
        if (seen.sections != r.n) {
            printf("the goldens hold %ld cases but there are %d: run --write-goldens\n", seen.sections, r.n);
            st.differences++;
        }
        printf("edge cases: %ld run on %s, %ld differ from the goldens\n", st.programs - before, exec_name,
               seen.differences);
        px_case_reports_free(&r);
        long d0 = st.differences;
        if (px_golden_check("tests/golden/goldens.txt", px__program, &t, &st, stdout) < 0)
            rc = -1;
        printf("programs/: %ld differ from the goldens\n", st.differences - d0);
    }
    printf("conformance: %ld programs, %ld outputs, %llu bytes compared, %ld differences\n", st.programs,
           st.outputs, st.bytes, st.differences);
    t.ops->close(t.ex);
    return rc < 0 || st.differences ? 1 : 0;
}
