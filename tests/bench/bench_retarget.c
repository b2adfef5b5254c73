/* bench_retarget - what switching sizes costs (issue 23, "Numbers to reach"), as JSON:
 *   bench_retarget [--executor cpu|cuda] [--images N] [--sizes S] [--batch B] [--seed X]
 * The program is programs/foveate273_any.pxi (any-size) resolved at each of S sizes (w in 320..959,
 * h in 240..719, drawn from the seed), as a runner does at a size it has not kept; the executor
 * runs the resolutions. Reported (milliseconds, medians of repeats):
 *   run_ms             one run (bind excluded) at one size
 *   bind_ms            one bind of an image of that size
 *   retarget_cached_host_ms  a retarget to a size seen before: the call alone (what it leaves
 *                      queued, if anything, is counted below)
 *   retarget_cached_ms the same call and a wait for the stream (on cuda: its textures, tables and
 *                      graph cached)
 *   retarget_new_ms    a retarget to a size not seen before
 *   resolve_new_ms     pxvm_program_resolve at a size (median over the S sizes); resolve_parsed_ms:
 *                      the same resolution parsed and validated whole (pxvm_program_resolve_parsed,
 *                      what it cost before the derivation)
 *   new_size           what a size never seen costs before its bind, as a runner pays it in a
 *                      stream where every image has a size of its own (a folder of photos): F
 *                      (--fresh, default 200) more sizes, each resolved (the least recently used of
 *                      PXVM_RESOLVE_CACHE resolutions freed first, as pxvm_runner does), retargeted
 *                      to, then its image bound, run and read; medians, over the sizes after the
 *                      first PXVM_RESOLVE_CACHE (each then replaces one kept), of: ms (resolution +
 *                      retarget, timed together), over_run (ms / run_ms: issue 23 asks <= 0.01),
 *                      resolve_ms and retarget_ms (each alone); filling_ms: ms over the first
 *                      PXVM_RESOLVE_CACHE sizes (the kept resolutions' memory touched a first time).
 *                      Run after everything else, so its sizes evict nothing measured before
 *   runner_new_size    pxvm_runner's own cost of a size never seen, host time from its bind's call
 *                      to the executor's bind (TSC on x86-64): before_ms (resolution + retarget),
 *                      over run_ms (issue 23 asks <= 0.01); before_warm_ms: another new size bound
 *                      at once after it (what is left when the lines a run and a bind leave cold
 *                      are warm)
 *   runner_bind_added  what a size never seen adds to the whole pxvm_runner_bind (the size change,
 *                      and whatever it leaves to the executor's bind), against the same call at
 *                      the size held, each right after a run, in pairs: for a pageable host image
 *                      (host_image) and, on cuda, a frame in device memory (device_frame): the
 *                      medians of both calls, added_ms (the median of the pairs' differences),
 *                      added_q_ms (their quartiles: the spread of the estimate; a host image's
 *                      bind is a copy of the image, 2-3 runs, whose own noise is larger than what
 *                      a size adds), added_over_run (issue 23 asks <= 0.01) and added_over_image
 *                      (over held bind + run: what the image costs), and the runs after each
 *   stream             N images, each of a size drawn from the S (retarget when it differs from the
 *                      last one), bound, run and its atlas read; against the same N images grouped
 *                      by size (S switches in all: the same-size rate of that mix of sizes):
 *                      images/s of both (medians of --rounds rounds, the two orders alternating)
 *                      and their ratio (issue 23 asks >= 0.8). Every image has its own pixels in
 *                      its own memory, bound once per pass, so neither order finds an image in
 *                      the host's caches that the other does not
 *   switch_ms          the whole cost of a switch: (mixed time - grouped time) / (mixed switches -
 *                      grouped switches), everything a switch does or leaves to the runs after it
 *   switch_over_run    switch_ms / run_ms (issue 23 asks <= 0.01); switch_over_image: over the
 *                      grouped stream's time per image (bind + run + read)
 *   retarget_loop_us   the call alone in a loop with nothing between (caches warm): between two
 *                      sizes, and around all S sizes in turn
 *   after_switch, size_held  where a switch's cost lands: a bind, and then a run, each waited
 *                      for, right after a switch between two sizes, and at a size held (medians)
 * The ratio's runs are the same work per image except the size switch: bind + run + read. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_common.h"
#include "../../vm/vm.h"
#include "../../executors/registry.h"
#include "../../vm/loader.h"
#include "../../api/runner_hooks.h"
#ifdef PXVM_HAVE_CUDA_GL
#include <cuda_runtime_api.h>
#endif

static uint64_t px__rng(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static void px__die(const char *what, const pxvm_error *err)
{
    char buf[1024];
    pxvm_error_format(err, buf, sizeof buf);
    fprintf(stderr, "bench_retarget: %s: %s\n", what, buf);
    exit(1);
}

typedef struct {
    const pxvm_executor_ops *ops;
    pxvm_executor *ex;
    int batch;
    uint8_t *atlas;
} px__ctx;

static void px__bind(px__ctx *c, const pxvm_program *prog, const pxvm_image *img)
{
    pxvm_error err;
    for (int b = 0; b < c->batch; b++) {
        pxvm_view v = pxvm_image_view(img);
        if (c->ops->bind(c->ex, 1, b, &v, &err) < 0)
            px__die("bind", &err);
    }
    (void)prog;
}

static void px__run_read(px__ctx *c, const pxvm_program *prog)
{
    pxvm_error err;
    if (c->ops->run(c->ex, NULL, &err) < 0)
        px__die("run", &err);
    const pxvm_slot *a = &prog->slots[2];
    pxvm_view v = {0};
    v.data = c->atlas, v.w = a->w, v.h = a->h, v.channels = 4, v.items = c->batch, v.device = -1;
    v.px_stride = 4, v.ch_stride = 1, v.row_stride = (int64_t)a->w * 4, v.item_stride = (int64_t)a->w * a->h * 4;
    if (c->ops->read(c->ex, 2, 0, 0, &v, 0, &err) < 0)
        px__die("read", &err);
}

/* The runner both runner timers measure: foveate273_any on `exec`, one item (exits on failure). */
static pxvm_runner *px__runner_any(const char *exec, pxvm_prog **prog)
{
    pxvm_runner *run;
    if (pxvm_prog_load("programs/foveate273_any.pxi", NULL, prog) || pxvm_runner_open(*prog, exec, 0, 0, 1, &run)) {
        fprintf(stderr, "bench_retarget: runner: %s\n", pxvm_errmsg());
        exit(1);
    }
    return run;
}

/* Their f-th size: f < 0 the largest (entered first: the storage then holds every later one), else
 * drawn from w 320..958, h 240..718. */
static void px__runner_size(int f, uint64_t *s, int *w, int *h)
{
    *w = f < 0 ? 959 : 320 + (int)(px__rng(s) % 639u);
    *h = f < 0 ? 719 : 240 + (int)(px__rng(s) % 479u);
}

/* pxvm_runner's own cost of a size never seen: from pxvm_runner_bind's call to the executor's
 * bind (the view's check, the size change, the runner's bookkeeping; the bind itself excluded),
 * host time (the TSC on x86-64; the wrapper that notes it runs dry first, its own lines warm). The executor's ops are its own with bind wrapped to note when it is entered. The
 * runner is entered at the largest size first (the storage then holds every later one). */
static double px__bind_entered;
static const pxvm_executor_ops *px__real_ops;
static int px__noting_bind(pxvm_executor *ex, int slot, int item0, const pxvm_view *v, pxvm_error *err)
{
    if (!ex) /* dry: its code and data warm before a measurement (the instrument's misses are not the runner's) */
        return px__bind_entered = 0, 0;
    if (px__bind_entered == 0)
        px__bind_entered = px__ticks();
    return px__real_ops->bind(ex, slot, item0, v, err);
}
/* What px__runner_new_size_ms measures: the median of `ms` (cold: the first bind after a run) and
 * the same bind made again at once at another size (warm: the lines a run leaves cold are warm
 * now; the difference is what memory costs). */
typedef struct {
    double ms, warm_ms;
} px__runner_cost;

static px__runner_cost px__runner_new_size_ms(const char *exec, int fresh, int skip, uint64_t seed,
                                             const pxvm_image *frame)
{
    pxvm_prog *prog;
    pxvm_runner *run = px__runner_any(exec, &prog);
    pxvm_error err;
    px__real_ops = pxvm_executor_find(exec, &err);
    static pxvm_executor_ops ops;
    ops = *px__real_ops;
    ops.bind = px__noting_bind;
    pxvm_runner_test_set_ops(run, &ops);
    double *t = calloc((size_t)fresh * 2u + 1u, sizeof(double)), *warm = t + fresh;
    int nt = 0, nw = 0;
    uint64_t s = seed;
    for (int f = -1; f < fresh; f++) {
        int w, h;
        px__runner_size(f, &s, &w, &h);
        pxvm_image img = {w, h, frame->px};
        pxvm_view v = pxvm_image_view(&img);
        for (int pass = 0; pass < 2; pass++) { /* cold (after a run), then warm (at once, one side one less) */
            if (pass == 1)
                v.w = img.w = w - 1;
            px__noting_bind(NULL, 0, 0, NULL, NULL);
            double t0 = px__ticks();
            if (pxvm_runner_bind(run, 1, 0, &v)) {
                fprintf(stderr, "bench_retarget: runner at %dx%d: %s\n", v.w, v.h, pxvm_errmsg());
                exit(1);
            }
            if (f < skip)
                continue;
            pass ? (warm[nw++] = px__bind_entered - t0) : (t[nt++] = px__bind_entered - t0);
        }
        if (pxvm_runner_run(run)) {
            fprintf(stderr, "bench_retarget: runner at %dx%d: %s\n", w, h, pxvm_errmsg());
            exit(1);
        }
    }
    for (int i = 0; i < 2 * fresh; i++) /* ticks to ms */
        t[i] /= px__ticks_per_ms();
    px__runner_cost c = {px__median(t, nt), px__median(warm, nw)};
    free(t);
    pxvm_runner_close(run);
    pxvm_prog_free(prog);
    return c;
}

/* What a size never seen adds to binding an image through pxvm_runner: the whole
 * pxvm_runner_bind call (the view's check, the size change in the runner and the executor, and
 * the executor's bind itself: whatever a change leaves to the bind is counted), host time by the
 * TSC, at a new size against the same call at the size held (the same size bound again), each
 * right after a run of the image before it (waited for), in pairs, one process. The image is a
 * w x h prefix of one of PX_FRAMES buffers in turn (so that neither bind of a pair reads pixels the
 * other just read): pageable host memory (the bind converts it through the host's caches and
 * stages it), or with `device` frames in the executor's device memory (the bind is a kernel
 * launch: the case of tensors already on the GPU). Reported: the medians of the new and held
 * calls, the median of the pairs' differences (what the new size adds), and the medians of the
 * runs (run + wait) after each. */
enum { PX_FRAMES = 3 };
typedef struct {
    double new_ms, held_ms, added_ms, added_q_ms[2], run_after_new_ms, run_after_held_ms;
} px__bind_added;

static px__bind_added px__runner_bind_added(const char *exec, void *const *frames, int device, int fresh, int skip,
                                            uint64_t seed)
{
    pxvm_prog *prog;
    pxvm_runner *run = px__runner_any(exec, &prog);
    double *t = calloc((size_t)fresh * 5u + 1u, sizeof(double));
    double *tn = t, *th = t + fresh, *d = t + 2 * fresh, *rn = t + 3 * fresh, *rh = t + 4 * fresh;
    int n = 0;
    uint64_t s = seed;
    for (int f = -1; f < fresh; f++) {
        int w, h;
        px__runner_size(f, &s, &w, &h);
        double bind[2], ran[2];
        for (int held = 0; held < 2; held++) { /* the new size, then the same size again */
            pxvm_view v = pxvm_view_host(frames[(2 * (f + 1) + held) % PX_FRAMES], w, h, 4);
            v.device = device ? 0 : -1;
            double t0 = px__ticks();
            int rc = pxvm_runner_bind(run, 1, 0, &v);
            double t1 = px__ticks();
            if (rc || pxvm_runner_run(run)) {
                fprintf(stderr, "bench_retarget: runner at %dx%d: %s\n", w, h, pxvm_errmsg());
                exit(1);
            }
            bind[held] = t1 - t0, ran[held] = px__ticks() - t1;
        }
        if (f < skip)
            continue;
        tn[n] = bind[0], th[n] = bind[1], d[n] = bind[0] - bind[1], rn[n] = ran[0], rh[n++] = ran[1];
    }
    for (int i = 0; i < 5 * fresh; i++) /* ticks to ms */
        t[i] /= px__ticks_per_ms();
    double added = px__median(d, n); /* (sorts d: its quartiles next) */
    px__bind_added a = {px__median(tn, n), px__median(th, n), added, {d[n / 4], d[3 * n / 4]}, px__median(rn, n),
                        px__median(rh, n)};
    free(t);
    pxvm_runner_close(run);
    pxvm_prog_free(prog);
    return a;
}

int main(int argc, char **argv)
{
    const char *exec = "cpu";
    int nimages = 1000, nsizes = 50, batch = 1, rounds = 5, fresh = 200;
    uint64_t seed = 1;
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(argv[i], "--executor") && v)
            exec = argv[++i];
        else if (!strcmp(argv[i], "--images") && v)
            nimages = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--sizes") && v)
            nsizes = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--batch") && v)
            batch = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--seed") && v)
            seed = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--rounds") && v)
            rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--fresh") && v)
            fresh = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: bench_retarget [--executor cpu|cuda] [--images N] [--sizes S] [--batch B] [--seed X] [--rounds R] [--fresh F]\n");
            return 2;
        }
    }
    if (nimages < 1 || nsizes < 2 || batch < 1 || rounds < 1 || fresh <= PXVM_RESOLVE_CACHE) {
        fprintf(stderr, "bench_retarget: --images >= 1, --sizes >= 2, --batch >= 1, --rounds >= 1, --fresh > %d\n",
                PXVM_RESOLVE_CACHE);
        return 2;
    }
    pxvm_error err;
    px__ctx c = {pxvm_executor_find(exec, &err), NULL, batch, NULL};
    if (!c.ops)
        px__die("executor", &err);
    if (c.ops->open(&c.ex, NULL, &err) < 0)
        px__die("open", &err);
    uint64_t s = seed;
    pxvm_program *progs = calloc((size_t)nsizes, sizeof *progs);
    pxvm_image *imgs = calloc((size_t)nsizes, sizeof *imgs);
    /* the any-size program resolved at each size (what a runner does at a size it has not kept),
     * each resolution timed */
    pxvm_program poly;
    pxvm_limits lim;
    pxvm_limits_default(&lim);
    if (pxvm_program_load("programs/foveate273_any.pxi", &lim, &poly, &err) < 0)
        px__die("programs/foveate273_any.pxi", &err);
    double *tres = calloc((size_t)nsizes, sizeof(double)), *tparsed = calloc((size_t)nsizes, sizeof(double));
    for (int i = 0; i < nsizes; i++) {
        int w = 320 + (int)(px__rng(&s) % 640u), h = 240 + (int)(px__rng(&s) % 480u);
        int wh[2 * (PXVM_MAX_SLOTS + 1)] = {0};
        wh[2] = w, wh[3] = h;
        double t0 = px__now_ms();
        if (pxvm_program_resolve(&poly, wh, &lim, &progs[i], &err) < 0)
            px__die("resolve", &err);
        tres[i] = px__now_ms() - t0;
        pxvm_program parsed; /* the same resolution parsed and validated whole, for comparison */
        t0 = px__now_ms();
        if (pxvm_program_resolve_parsed(&poly, wh, &lim, &parsed, &err) < 0)
            px__die("resolve", &err);
        tparsed[i] = px__now_ms() - t0;
        pxvm_program_free(&parsed);
        if (pxvm_image_alloc(&imgs[i], w, h, &err) < 0)
            px__die("image", &err);
        for (size_t p = 0; p < (size_t)w * (size_t)h * 4u; p++)
            imgs[i].px[p] = (uint8_t)(px__rng(&s) >> 56);
    }
    c.atlas = malloc((size_t)progs[0].slots[2].w * (size_t)progs[0].slots[2].h * 4u * (size_t)batch);
    if (c.ops->load(c.ex, &progs[0], batch, &err) < 0)
        px__die("load", &err);
    /* one run and one bind at size 0 */
    enum { REPS = 21 };
    double t[REPS], tb[REPS];
    px__bind(&c, &progs[0], &imgs[0]);
    px__run_read(&c, &progs[0]); /* warm: a graph captured, pages touched */
    for (int r = 0; r < REPS; r++) {
        double t0 = px__now_ms();
        px__bind(&c, &progs[0], &imgs[0]);
        if (c.ops->sync && c.ops->sync(c.ex, &err) < 0)
            px__die("sync", &err);
        double t1 = px__now_ms();
        if (c.ops->run(c.ex, NULL, &err) < 0)
            px__die("run", &err);
        if (c.ops->sync && c.ops->sync(c.ex, &err) < 0)
            px__die("sync", &err);
        tb[r] = t1 - t0, t[r] = px__now_ms() - t1;
    }
    double run_ms = px__median(t, REPS), bind_ms = px__median(tb, REPS);
    /* retargets to new sizes (every size once: after this all are cached), then to cached ones */
    double *tn = calloc((size_t)nsizes, sizeof(double)), tc[REPS];
    int ntn = 0;
    for (int i = 1; i < nsizes; i++) {
        double t0 = px__now_ms();
        if (c.ops->retarget(c.ex, &progs[i], &err) < 0)
            px__die("retarget", &err);
        if (c.ops->sync && c.ops->sync(c.ex, &err) < 0)
            px__die("sync", &err);
        tn[ntn++] = px__now_ms() - t0;
        px__bind(&c, &progs[i], &imgs[i]);
        px__run_read(&c, &progs[i]); /* its graph captured: the cached switch below replays it */
    }
    double th[REPS];
    for (int r = 0; r < REPS; r++) {
        int i = r % 2 ? 0 : 1;
        double t0 = px__now_ms();
        if (c.ops->retarget(c.ex, &progs[i], &err) < 0)
            px__die("retarget", &err);
        double t1 = px__now_ms();
        if (c.ops->sync && c.ops->sync(c.ex, &err) < 0)
            px__die("sync", &err);
        th[r] = t1 - t0, tc[r] = px__now_ms() - t0;
        px__bind(&c, &progs[i], &imgs[i]);
        px__run_read(&c, &progs[i]);
    }
    double resolve_ms = px__median(tres, nsizes), parsed_ms = px__median(tparsed, nsizes);
    double new_ms = px__median(tn, ntn), cached_ms = px__median(tc, REPS), host_ms = px__median(th, REPS);
    /* the call alone, nothing between: between two sizes, and around all S in turn */
    double loop_us[2];
    for (int far = 0; far < 2; far++) {
        enum { CALLS = 20000 };
        double t0 = px__now_ms();
        for (int r = 0; r < CALLS; r++)
            if (c.ops->retarget(c.ex, &progs[far ? r % nsizes : r % 2], &err) < 0)
                px__die("retarget", &err);
        loop_us[far] = (px__now_ms() - t0) * 1e3 / CALLS;
    }
    if (c.ops->retarget(c.ex, &progs[0], &err) < 0 || (c.ops->sync && c.ops->sync(c.ex, &err) < 0))
        px__die("retarget", &err);
    /* where a switch's cost lands: the bind and the run (each waited for) right after a switch
     * between sizes 0 and 1, against the same at a size held (4 images of each size in turn) */
    enum { COPIES = 4 };
    pxvm_image copies[2][COPIES];
    for (int i = 0; i < 2; i++)
        for (int k = 0; k < COPIES; k++) {
            size_t bytes = (size_t)imgs[i].w * (size_t)imgs[i].h * 4u;
            if (pxvm_image_alloc(&copies[i][k], imgs[i].w, imgs[i].h, &err) < 0)
                px__die("image", &err);
            memcpy(copies[i][k].px, imgs[i].px, bytes);
            copies[i][k].px[0] ^= (uint8_t)(k + 1);
        }
    double phase[2][2][2 * REPS]; /* [switched][bind, run][rep] */
    for (int sw = 0; sw < 2; sw++)
        for (int r = 0; r < 2 * REPS; r++) {
            int i = sw ? r % 2 : r / REPS; /* held: REPS at size 0, then REPS at size 1 */
            if ((sw || r % REPS == 0) && c.ops->retarget(c.ex, &progs[i], &err) < 0)
                px__die("retarget", &err);
            if (!sw && r % REPS == 0) /* the held size's first run is not counted */
                px__bind(&c, &progs[i], &copies[i][COPIES - 1]), px__run_read(&c, &progs[i]);
            if (c.ops->sync && c.ops->sync(c.ex, &err) < 0)
                px__die("sync", &err);
            double t0 = px__now_ms();
            px__bind(&c, &progs[i], &copies[i][(r / 2) % COPIES]);
            if (c.ops->sync && c.ops->sync(c.ex, &err) < 0)
                px__die("sync", &err);
            double t1 = px__now_ms();
            if (c.ops->run(c.ex, NULL, &err) < 0)
                px__die("run", &err);
            if (c.ops->sync && c.ops->sync(c.ex, &err) < 0)
                px__die("sync", &err);
            phase[sw][0][r] = t1 - t0, phase[sw][1][r] = px__now_ms() - t1;
            px__run_read(&c, &progs[i]);
        }
    double after_bind = px__median(phase[1][0], 2 * REPS), held_bind = px__median(phase[0][0], 2 * REPS);
    double after_run = px__median(phase[1][1], 2 * REPS), held_run = px__median(phase[0][1], 2 * REPS);
    for (int i = 0; i < 2; i++)
        for (int k = 0; k < COPIES; k++)
            pxvm_image_free(&copies[i][k]);
    /* the streams: the same images (sizes drawn from the S, each image its own pixels), once
     * grouped by size (S - 1 switches: the same-size rate of this mix of sizes), once in their
     * drawn order; rounds of both, alternating */
    int *seq = malloc(sizeof(int) * (size_t)nimages), *count = calloc((size_t)nsizes, sizeof(int));
    int *grouped = malloc(sizeof(int) * (size_t)nimages);
    pxvm_image *each = calloc((size_t)nimages, sizeof *each);
    uint64_t order = seed * 7 + 3;
    for (int n = 0; n < nimages; n++) {
        const pxvm_image *base = &imgs[seq[n] = (int)(px__rng(&order) % (uint64_t)nsizes)];
        count[seq[n]]++;
        if (pxvm_image_alloc(&each[n], base->w, base->h, &err) < 0)
            px__die("image", &err);
        size_t bytes = (size_t)base->w * (size_t)base->h * 4u;
        memcpy(each[n].px, base->px, bytes);
        for (size_t p = 0; p < bytes; p += 4096) /* its own pixels, every page */
            each[n].px[p] ^= (uint8_t)(n + 1);
    }
    for (int g = 0, k = 0; g < nsizes; g++) /* image positions, grouped by size, in drawn order within a size */
        for (int n = 0; n < nimages; n++)
            if (seq[n] == g)
                grouped[k++] = n;
    double *times[2] = {calloc((size_t)rounds, sizeof(double)), calloc((size_t)rounds, sizeof(double))};
    int switches[2] = {0, 0};
    for (int round = 0; round < rounds; round++)
        for (int pass = 0; pass < 2; pass++) {
            int last = -1, sw = 0;
            double t0 = px__now_ms();
            for (int k = 0; k < nimages; k++) {
                int n = pass == 0 ? grouped[k] : k, i = seq[n];
                if (i != last) {
                    if (c.ops->retarget(c.ex, &progs[i], &err) < 0)
                        px__die("retarget", &err);
                    last = i, sw++;
                }
                px__bind(&c, &progs[i], &each[n]);
                px__run_read(&c, &progs[i]);
            }
            times[pass][round] = (px__now_ms() - t0) / 1e3;
            switches[pass] = sw;
        }
    /* each round's own difference: the spread of the estimate */
    double lo = 1e300, hi = -1e300, dsw = switches[1] > switches[0] ? switches[1] - switches[0] : 1;
    for (int r = 0; r < rounds; r++) {
        double d = (times[1][r] - times[0][r]) * 1e3 / dsw;
        lo = d < lo ? d : lo, hi = d > hi ? d : hi;
    }
    double same_s = px__median(times[0], rounds), mixed_s = px__median(times[1], rounds);
    double switch_ms = (mixed_s - same_s) * 1e3 / dsw;
    double image_ms = same_s * 1e3 / nimages;
    for (int n = 0; n < nimages; n++)
        pxvm_image_free(&each[n]);
    free(each), free(grouped), free(times[0]), free(times[1]);
    free(seq), free(count);
    /* sizes never seen, one image each, resolutions kept as pxvm_runner keeps them (api/sizes.c
     * px__resolved: PXVM_RESOLVE_CACHE of them, the least recently used one freed when a new one
     * is made; never the one the executor runs) */
    enum { KEEP = PXVM_RESOLVE_CACHE };
    pxvm_program kept[KEEP];
    memset(kept, 0, sizeof kept);
    double *tf = calloc((size_t)fresh, sizeof(double)), *tfr = calloc((size_t)fresh, sizeof(double));
    double *tft = calloc((size_t)fresh, sizeof(double));
    pxvm_image frame; /* one buffer of the largest size, each fresh image a w x h prefix of it */
    if (pxvm_image_alloc(&frame, 960, 720, &err) < 0)
        px__die("image", &err);
    for (size_t p = 0; p < (size_t)960 * 720 * 4u; p++)
        frame.px[p] = (uint8_t)(px__rng(&s) >> 56);
    for (int f = 0; f < fresh; f++) {
        int wh[2 * (PXVM_MAX_SLOTS + 1)] = {0}, seen = 1;
        while (seen) { /* a size none of the S sizes and no fresh one before has */
            wh[2] = 320 + (int)(px__rng(&s) % 640u), wh[3] = 240 + (int)(px__rng(&s) % 480u), seen = 0;
            for (int i = 0; i < nsizes; i++)
                seen |= progs[i].slots[1].w == wh[2] && progs[i].slots[1].h == wh[3];
            for (int k = 0; k < KEEP && k < f; k++)
                seen |= kept[k].slots[1].w == wh[2] && kept[k].slots[1].h == wh[3];
        }
        pxvm_program *slot = &kept[f % KEEP]; /* the least recently used: made KEEP sizes ago */
        pxvm_program_free(slot);
        double t0 = px__now_ms();
        if (pxvm_program_resolve(&poly, wh, &lim, slot, &err) < 0)
            px__die("resolve", &err);
        double t1 = px__now_ms();
        if (c.ops->retarget(c.ex, slot, &err) < 0)
            px__die("retarget", &err);
        if (c.ops->sync && c.ops->sync(c.ex, &err) < 0)
            px__die("sync", &err);
        double t2 = px__now_ms();
        tfr[f] = t1 - t0, tft[f] = t2 - t1, tf[f] = t2 - t0;
        pxvm_image img = {wh[2], wh[3], frame.px};
        px__bind(&c, slot, &img);
        px__run_read(&c, slot);
    }
    double filling_ms = px__median(tf, KEEP), fresh_ms = px__median(tf + KEEP, fresh - KEEP);
    double fresh_resolve_ms = px__median(tfr + KEEP, fresh - KEEP), fresh_retarget_ms = px__median(tft + KEEP, fresh - KEEP);
    if (c.ops->retarget(c.ex, &progs[0], &err) < 0) /* none of the kept ones is loaded when they are freed */
        px__die("retarget", &err);
    for (int k = 0; k < KEEP; k++)
        pxvm_program_free(&kept[k]);
    /* the same through pxvm_runner: resolution + retarget */
    px__runner_cost rc = px__runner_new_size_ms(exec, fresh, KEEP, seed + 7, &frame);
    /* what a new size adds to a whole bind through the runner: a pageable image, and a frame in
     * device memory on the GPU */
    size_t frame_bytes = (size_t)960 * 720 * 4u;
    void *frames[PX_FRAMES] = {frame.px}; /* the largest frame and copies of it, each its own memory */
    for (int k = 1; k < PX_FRAMES; k++) {
        if (!(frames[k] = malloc(frame_bytes))) {
            fprintf(stderr, "bench_retarget: out of memory for a frame\n");
            exit(1);
        }
        memcpy(frames[k], frame.px, frame_bytes);
    }
    px__bind_added added[2] = {px__runner_bind_added(exec, frames, 0, fresh, KEEP, seed + 11), {0, 0, 0, {0, 0}, 0, 0}};
#ifdef PXVM_HAVE_CUDA_GL
    if (!strcmp(c.ops->name, "cuda")) {
        void *d_frames[PX_FRAMES];
        for (int k = 0; k < PX_FRAMES; k++)
            if (cudaMalloc(&d_frames[k], frame_bytes) != cudaSuccess ||
                cudaMemcpy(d_frames[k], frames[k], frame_bytes, cudaMemcpyHostToDevice) != cudaSuccess) {
                fprintf(stderr, "bench_retarget: a device frame: %s\n", cudaGetErrorString(cudaGetLastError()));
                exit(1);
            }
        added[1] = px__runner_bind_added(exec, d_frames, 1, fresh, KEEP, seed + 11);
        for (int k = 0; k < PX_FRAMES; k++)
            cudaFree(d_frames[k]);
    }
#endif
    for (int k = 1; k < PX_FRAMES; k++)
        free(frames[k]);
    char added_json[2][512];
    for (int k = 0; k < 2; k++) {
        const px__bind_added *a = &added[k];
        if (a->held_ms == 0) {
            snprintf(added_json[k], sizeof added_json[k], "null");
            continue;
        }
        snprintf(added_json[k], sizeof added_json[k],
                 "{\"new_ms\": %.5f, \"held_ms\": %.5f, \"added_ms\": %.5f, \"added_q_ms\": [%.5f, %.5f],\n"
                 "                         \"added_over_run\": %.5f, \"added_over_image\": %.5f, \"run_after_new_ms\": %.5f, "
                 "\"run_after_held_ms\": %.5f}",
                 a->new_ms, a->held_ms, a->added_ms, a->added_q_ms[0], a->added_q_ms[1], a->added_ms / run_ms,
                 a->added_ms / (a->held_ms + a->run_after_held_ms), a->run_after_new_ms, a->run_after_held_ms);
    }
    pxvm_image_free(&frame);
    free(tf), free(tfr), free(tft);
    printf("{\n  \"executor\": \"%s\", \"program\": \"programs/foveate273_any.pxi resolved at %d sizes (w 320..959, h 240..719)\",\n"
           "  \"batch\": %d, \"run_ms\": %.4f, \"bind_ms\": %.4f,\n"
           "  \"retarget_cached_host_ms\": %.5f, \"retarget_cached_ms\": %.4f, \"retarget_new_ms\": %.4f,\n"
           "  \"resolve_new_ms\": %.5f, \"resolve_parsed_ms\": %.5f,\n"
           "  \"new_size\": {\"sizes\": %d, \"ms\": %.4f, \"over_run\": %.4f, \"resolve_ms\": %.5f, \"retarget_ms\": %.5f,\n"
           "               \"filling_ms\": %.4f},\n"
           "  \"runner_new_size\": {\"before_ms\": %.5f, \"before_over_run\": %.4f, \"before_warm_ms\": %.5f},\n"
           "  \"runner_bind_added\": {\"host_image\": %s,\n                        \"device_frame\": %s},\n"
           "  \"stream\": {\"images\": %d, \"sizes\": %d, \"rounds\": %d, \"switches\": %d, \"grouped_switches\": %d,\n"
           "             \"grouped_by_size_images_per_s\": %.1f, \"mixed_sizes_images_per_s\": %.1f, \"ratio\": %.3f},\n"
           "  \"switch_ms\": %.5f, \"switch_ms_rounds\": [%.5f, %.5f], \"image_ms\": %.4f,\n"
           "  \"switch_over_run\": %.4f, \"switch_over_image\": %.4f,\n"
           "  \"after_switch\": {\"bind_ms\": %.4f, \"run_ms\": %.4f}, \"size_held\": {\"bind_ms\": %.4f, \"run_ms\": %.4f},\n"
           "  \"retarget_loop_us\": {\"two_sizes\": %.3f, \"all_sizes\": %.3f}\n}\n",
           c.ops->name, nsizes, batch, run_ms, bind_ms, host_ms, cached_ms, new_ms, resolve_ms, parsed_ms, fresh - KEEP, fresh_ms,
           fresh_ms / run_ms, fresh_resolve_ms, fresh_retarget_ms, filling_ms, rc.ms, rc.ms / run_ms,
           rc.warm_ms, added_json[0],
           added_json[1], nimages, nsizes, rounds, switches[1],
           switches[0], nimages * batch / same_s, nimages * batch / mixed_s, same_s / mixed_s, switch_ms, lo, hi, image_ms,
           switch_ms / run_ms, switch_ms / image_ms, after_bind, after_run, held_bind, held_run, loop_us[0], loop_us[1]);
    c.ops->close(c.ex);
    for (int i = 0; i < nsizes; i++) {
        pxvm_program_free(&progs[i]);
        pxvm_image_free(&imgs[i]);
    }
    pxvm_program_free(&poly);
    free(progs), free(imgs), free(tn), free(tres), free(tparsed), free(c.atlas);
    return 0;
}
