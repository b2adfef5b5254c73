/* bench_video - the full path against the incremental path on a real video, through the public C
 * API. Frames: a .npy of uint8 (F, H, W, 4) or (F, 1, H, W, 4) (pxrun --frames vtest.avi --npy
 * image=... with a one-slot program writes one), scaled to the size asked (nearest texel).
 * Programs: a fixation-relative logpolar plan (budget 273) compiled as a still-image plan (the
 * full path: the whole pyramid and every token, every frame) and with "video": T for T = 0, 8,
 * 16 (DIFF, UPDATE, incremental PYRAMID and tokens). Per path: frames/s of bind + run + patches
 * (+ changed tokens), interleaved in rounds (so that a shared machine's noise falls on every path
 * alike), the tokens sampled again and the tokens whose bytes changed (the floor for any exact
 * rule). On cuda, the host's own cost of a frame (enqueued while the GPU is held), from frames in GPU
 * memory and from page-locked host memory, with the link's pinned H2D bandwidth measured in the
 * same run. Figures, not assertions; prints JSON.
 *
 *   bench_video --executor cpu|cuda --frames FILE.npy [--size WxH] [--count N] [--threads N]
 *               [--paths full,0,8,16] [--device-only 1]   (a subset, e.g. under ncu) */
#include <cuda_runtime.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../include/pxvm.h"
#include "bench_common.h"

/* Reads a uint8 .npy whose last three dimensions are H, W, 4. */
static uint8_t *px__load_npy(const char *path, int *n, int *w, int *h)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    unsigned char pre[10];
    if (fread(pre, 1, 10, f) != 10)
        return NULL;
    size_t hl = (size_t)pre[8] | ((size_t)pre[9] << 8);
    char *hdr = (char *)calloc(hl + 1, 1);
    if (fread(hdr, 1, hl, f) != hl)
        return NULL;
    long d[6];
    int nd = 0;
    for (char *p = strstr(hdr, "'shape': (") + 10; nd < 6 && *p && *p != ')';) {
        char *end;
        d[nd++] = strtol(p, &end, 10);
        p = end + (*end == ',' ? 1 : 0);
        while (*p == ' ')
            p++;
    }
    free(hdr);
    *n = (int)d[0], *h = (int)d[nd - 3], *w = (int)d[nd - 2];
    size_t bytes = (size_t)*n * (size_t)*w * (size_t)*h * 4u;
    uint8_t *px = (uint8_t *)malloc(bytes);
    if (!px || fread(px, 1, bytes, f) != bytes)
        return NULL;
    fclose(f);
    return px;
}

typedef struct {
    pxvm_prog *prog;
    pxvm_runner *run;
    int image, atlas, tokens;
    pxvm_view out;
    void *d_out;
    size_t out_bytes;
    uint8_t *changed;
    void *stream; /* cudaStream_t on cuda */
} px__path;

static void px__open(px__path *p, const char *exec, int threads, int w, int h, int threshold, int cuda)
{
    char plan[256], video[32] = "";
    if (threshold >= 0)
        snprintf(video, sizeof video, ", \"video\": %d", threshold);
    snprintf(plan, sizeof plan, "{\"image\": [%d, %d], \"budget\": 273, \"scheme\": \"logpolar\", \"fixation\": \"relative\"%s}",
             w, h, video);
    px__ck(pxvm_prog_from_plan(plan, "bench", NULL, &p->prog), "bench_video: plan");
    px__ck(pxvm_runner_open(p->prog, exec, 0, threads, 1, &p->run), "bench_video: open");
    p->image = pxvm_prog_slot_find(p->prog, "image");
    p->atlas = pxvm_prog_slot_find(p->prog, "atlas");
    pxvm_slot_info ai;
    px__ck(pxvm_prog_slot(p->prog, p->atlas, &ai), "bench_video: slot");
    p->tokens = ai.patch_count;
    size_t pbytes = (size_t)ai.patch_w * ai.patch_h * ai.patch_count * 4;
    if (cuda)
        cudaMalloc(&p->d_out, pbytes);
    else
        p->d_out = malloc(pbytes);
    pxvm_view o = {p->d_out, cuda ? 0 : -1, 1, ai.patch_w, ai.patch_h * ai.patch_count, 4, (int64_t)pbytes, ai.patch_w * 4, 4, 1};
    p->out = o;
    p->out_bytes = pbytes;
    p->changed = (uint8_t *)malloc((size_t)p->tokens);
    if (cuda) { /* runs on a caller stream: enqueued, no host synchronisation per frame */
        cudaStream_t st;
        cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking);
        px__ck(pxvm_runner_set_stream(p->run, st), "bench_video: stream");
        p->stream = st;
    }
    int32_t centre[2] = {w << 15, h << 15};
    px__ck(pxvm_runner_set_fixations(p->run, 0, 1, 0, 1, centre, -1), "bench_video: fixation");
}

static void px__close(px__path *p, int cuda)
{
    pxvm_runner_close(p->run);
    pxvm_prog_free(p->prog);
    if (cuda)
        cudaFree(p->d_out);
    else
        free(p->d_out);
    free(p->changed);
}

/* Frames are borrowed, as pxvm_runner_exec (and so Python) does: read in place where the
 * executor can (cpu: a host frame; cuda: a frame in GPU memory that only DIFF and UPDATE read,
 * so not the full path's, which its pyramid reads), else copied as by bind. */
static int px__bind(px__path *p, const pxvm_view *in)
{
    return pxvm_runner_borrow(p->run, p->image, 0, in);
}

/* frames/s of page-locked host frames with a dirty rectangle given per frame: a band of the frame
 * (frac of its height) moving down; only its tiles are uploaded. */
static double px__fps_rects(px__path *p, const uint8_t *frames, int nframes, int count, int w, int h, double frac)
{
    size_t fb = (size_t)w * h * 4;
    int band = (int)(h * frac);
    px__ck(pxvm_runner_restart(p->run), "bench_video: restart");
    double t0 = 0;
    for (int i = 0; i < count + 1; i++) {
        if (i == 1) {
            px__ck(pxvm_runner_sync(p->run), "bench_video: sync");
            t0 = px__now_ms();
        }
        pxvm_rect r = {0, (i * 16) % (h - band + 1), w, band};
        if (i > 0)
            px__ck(pxvm_runner_set_dirty(p->run, 0, &r, 1), "bench_video: dirty");
        pxvm_view in = {(void *)(frames + fb * (size_t)(i % nframes)), -1, 1, w, h, 4, (int64_t)fb, w * 4, 4, 1};
        px__ck(pxvm_runner_bind(p->run, p->image, 0, &in), "bench_video: bind");
        px__ck(pxvm_runner_run(p->run), "bench_video: run");
        px__ck(pxvm_runner_read_patches(p->run, p->atlas, 0, &p->out), "bench_video: read");
    }
    px__ck(pxvm_runner_sync(p->run), "bench_video: sync");
    return count / ((px__now_ms() - t0) / 1e3);
}

/* The tokens sampled again after the first frame, and those whose bytes differ from the previous
 * frame's: what an oracle would have to sample again, the floor under any exact rule (a pass of
 * its own: reading them to the host waits for each run). */
static void px__token_stats(px__path *p, const uint8_t *frames, int nframes, int w, int h, int device, double *sampled,
                            double *bytes_changed)
{
    size_t fb = (size_t)w * h * 4, tb = p->out_bytes / (size_t)p->tokens;
    long total = 0, again = 0, differ = 0;
    uint8_t *prev = (uint8_t *)malloc(p->out_bytes), *cur = (uint8_t *)malloc(p->out_bytes);
    px__ck(pxvm_runner_restart(p->run), "bench_video: restart");
    for (int i = 0; i < nframes; i++) {
        pxvm_view in = {(void *)(frames + fb * (size_t)i), device, 1, w, h, 4, (int64_t)fb, w * 4, 4, 1};
        px__ck(px__bind(p, &in), "bench_video: bind");
        px__ck(pxvm_runner_run(p->run), "bench_video: run");
        px__ck(pxvm_runner_read_patches(p->run, p->atlas, 0, &p->out), "bench_video: read");
        px__ck(pxvm_runner_read_changed(p->run, p->atlas, 0, 1, p->changed, -1), "bench_video: changed");
        px__ck(pxvm_runner_sync(p->run), "bench_video: sync");
        if (device >= 0)
            cudaMemcpy(cur, p->d_out, p->out_bytes, cudaMemcpyDeviceToHost);
        else
            memcpy(cur, p->d_out, p->out_bytes);
        for (int t = 0; i > 0 && t < p->tokens; t++) {
            again += p->changed[t];
            differ += memcmp(cur + tb * (size_t)t, prev + tb * (size_t)t, tb) != 0;
        }
        total += i > 0 ? p->tokens : 0;
        uint8_t *x = prev;
        prev = cur, cur = x;
    }
    *sampled = total ? (double)again / (double)total : 0;
    *bytes_changed = total ? (double)differ / (double)total : 0;
    free(prev);
    free(cur);
}

/* Frames i0 .. i0+n-1 of the cycled sequence (bind + run + patches), synchronised at the end
 * (host frames too: their uploads and runs are queued); milliseconds. Frame 0 after a restart is
 * the whole first frame: prime a path with a block of 1 before timing it. */
static double px__block_ms(px__path *p, const uint8_t *frames, int nframes, int i0, int n, int w, int h, int device)
{
    size_t fb = (size_t)w * h * 4;
    double t0 = px__now_ms();
    for (int i = i0; i < i0 + n; i++) {
        pxvm_view in = {(void *)(frames + fb * (size_t)(i % nframes)), device, 1, w, h, 4, (int64_t)fb, w * 4, 4, 1};
        px__ck(px__bind(p, &in), "bench_video: bind");
        px__ck(pxvm_runner_run(p->run), "bench_video: run");
        px__ck(pxvm_runner_read_patches(p->run, p->atlas, 0, &p->out), "bench_video: read");
    }
    px__ck(pxvm_runner_sync(p->run), "bench_video: sync");
    return px__now_ms() - t0;
}

/* frames/s over `count` frames (cycling) of a path alone. */
static double px__fps(px__path *p, const uint8_t *frames, int nframes, int count, int w, int h, int device)
{
    px__ck(pxvm_runner_restart(p->run), "bench_video: restart");
    px__block_ms(p, frames, nframes, 0, 1, w, h, device); /* the first frame (whole) is not timed */
    return count / (px__block_ms(p, frames, nframes, 1, count, w, h, device) / 1e3);
}

/* Holds the GPU for `ns` (its global timer), so that what the host enqueues meanwhile only queues. */
__global__ void px__k_hold(long long ns)
{
    long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    while (t - t0 < ns);
}

/* The host's own cost of a frame from GPU memory (bind + run + patches, enqueued only): the
 * runner's stream is held by a kernel while `count` frames are enqueued. If this is near the
 * frame time, the path is bound by the host, not by the GPU. Negative when the hold ran out
 * first (the queue was full: no figure). */
static double px__host_us(px__path *p, const uint8_t *d_frames, int nframes, int count, int w, int h)
{
    size_t fb = (size_t)w * h * 4;
    const long long hold_ns = 500000000;
    px__k_hold<<<1, 1, 0, (cudaStream_t)p->stream>>>(hold_ns);
    double t0 = px__now_ms();
    for (int i = 0; i < count; i++) {
        pxvm_view in = {(void *)(d_frames + fb * (size_t)(i % nframes)), 0, 1, w, h, 4, (int64_t)fb, w * 4, 4, 1};
        px__ck(px__bind(p, &in), "bench_video: bind");
        px__ck(pxvm_runner_run(p->run), "bench_video: run");
        px__ck(pxvm_runner_read_patches(p->run, p->atlas, 0, &p->out), "bench_video: read");
    }
    double ms = px__now_ms() - t0;
    px__ck(pxvm_runner_sync(p->run), "bench_video: sync");
    return ms < hold_ns / 1e6 * 0.8 ? ms * 1e3 / count : -1;
}

int main(int argc, char **argv)
{
    const char *exec = "cpu", *path = NULL;
    int W = 0, H = 0, count = 300, threads = 0, device_only = 0;
    const char *paths = "full,0,8,16";
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--executor"))
            exec = argv[i + 1];
        else if (!strcmp(argv[i], "--frames"))
            path = argv[i + 1];
        else if (!strcmp(argv[i], "--size"))
            sscanf(argv[i + 1], "%dx%d", &W, &H);
        else if (!strcmp(argv[i], "--count"))
            count = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--threads"))
            threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--paths"))
            paths = argv[i + 1];
        else if (!strcmp(argv[i], "--device-only"))
            device_only = atoi(argv[i + 1]);
    }
    int n, w0, h0;
    uint8_t *src = path ? px__load_npy(path, &n, &w0, &h0) : NULL;
    if (!src) {
        fprintf(stderr, "usage: bench_video --executor cpu|cuda --frames FILE.npy [--size WxH] [--count N]\n");
        return 2;
    }
    if (!W)
        W = w0, H = h0;
    size_t fb = (size_t)W * H * 4;
    int cuda = !strcmp(exec, "cuda");
    uint8_t *frames; /* host frames at the benchmark size (page-locked on cuda) */
    if (cuda)
        cudaHostAlloc(&frames, fb * (size_t)n, cudaHostAllocDefault);
    else
        frames = (uint8_t *)malloc(fb * (size_t)n);
    for (int f = 0; f < n; f++)
        for (int y = 0; y < H; y++)
            for (int x = 0; x < W; x++)
                memcpy(frames + fb * f + ((size_t)y * W + x) * 4,
                       src + (size_t)w0 * h0 * 4 * f + ((size_t)(y * h0 / H) * w0 + (size_t)(x * w0 / W)) * 4, 4);
    free(src);
    uint8_t *d_frames = NULL;
    double link = 0, link1 = 0, link2 = 0;
    if (cuda) {
        cudaMalloc(&d_frames, fb * (size_t)n);
        cudaMemcpy(d_frames, frames, fb * (size_t)n, cudaMemcpyHostToDevice);
        /* the link: one frame per copy, back to back on a stream, as the pipeline copies them */
        /* ... on one stream, and alternating over two (the copy engines may take two at once):
         * the faster is the link */
        cudaStream_t ls[2];
        cudaStreamCreateWithFlags(&ls[0], cudaStreamNonBlocking);
        cudaStreamCreateWithFlags(&ls[1], cudaStreamNonBlocking);
        for (int r = 0; r < 4; r++) {
            double t0 = px__now_ms();
            for (int i = 0; i < 200; i++)
                cudaMemcpyAsync(d_frames + fb * (size_t)(i % n), frames + fb * (size_t)(i % n), fb, cudaMemcpyHostToDevice,
                                ls[r >= 2 ? i & 1 : 0]);
            cudaStreamSynchronize(ls[0]);
            cudaStreamSynchronize(ls[1]);
            double bw = 200.0 * (double)fb / ((px__now_ms() - t0) / 1e3); /* bytes/s */
            if (r == 1)
                link1 = bw;
            if (r == 3)
                link2 = bw;
        }
        link = link1 > link2 ? link1 : link2;
        cudaMemcpy(d_frames, frames, fb * (size_t)n, cudaMemcpyHostToDevice);
    }
    const int ts[4] = {-1, 0, 8, 16};
    double fps[4][2] = {{0}}, sampled[4] = {0}, differ[4] = {0}, host_us[4] = {0}, fps_rects = 0;
    int want[4] = {0};
    for (const char *q = paths; *q; q += strcspn(q, ","), q += *q == ',') {
        int len = (int)strcspn(q, ",");
        for (int k = 0; k < 4; k++) {
            char name[8];
            snprintf(name, sizeof name, "%s", k ? (k == 1 ? "0" : k == 2 ? "8" : "16") : "full");
            want[k] |= (int)strlen(name) == len && !strncmp(q, name, (size_t)len);
        }
    }
    /* The paths' device-frame (cuda) or host-frame (cpu) timings are interleaved: rounds of
     * `block` frames of each path in turn, so that a neighbour's load on a shared machine, or a
     * change of clock, falls on every path alike; each keeps its own frame sequence. */
    px__path paths_open[4];
    const uint8_t *timed_frames = cuda ? d_frames : frames;
    int timed_device = cuda ? 0 : -1, block = cuda ? 500 : 100, next[4] = {0};
    double ms[4] = {0};
    int rounds = (count + block - 1) / block;
    double *round_ms = (double *)calloc((size_t)rounds * 4, sizeof(double)); /* [round][path] */
    for (int k = 0; k < 4; k++) {
        if (!want[k])
            continue;
        px__open(&paths_open[k], exec, threads, W, H, ts[k], cuda);
        if (ts[k] >= 0)
            px__token_stats(&paths_open[k], timed_frames, n, W, H, timed_device, &sampled[k], &differ[k]);
        px__ck(pxvm_runner_restart(paths_open[k].run), "bench_video: restart");
        next[k] = 1;
        px__block_ms(&paths_open[k], timed_frames, n, 0, 1, W, H, timed_device); /* the whole first frame: not timed */
    }
    for (int done = 0; done < count; done += block) {
        int b = count - done < block ? count - done : block;
        for (int k = 0; k < 4; k++)
            if (want[k]) {
                double t = px__block_ms(&paths_open[k], timed_frames, n, next[k], b, W, H, timed_device);
                ms[k] += t;
                round_ms[(done / block) * 4 + k] = t;
                next[k] += b;
            }
    }
    /* the median over rounds of the full path's time / this path's time: robust to a round that a
     * neighbour slowed down */
    double round_ratio[4] = {0}, best_ratio[4] = {0};
    for (int k = 1; k < 4 && want[0]; k++) {
        if (!want[k])
            continue;
        double *r = (double *)malloc(sizeof(double) * (size_t)rounds);
        for (int i = 0; i < rounds; i++)
            r[i] = round_ms[i * 4] / round_ms[i * 4 + k];
        qsort(r, (size_t)rounds, sizeof(double), px__cmp_double);
        round_ratio[k] = rounds % 2 ? r[rounds / 2] : (r[rounds / 2 - 1] + r[rounds / 2]) / 2;
        free(r);
        double best_full = 1e300, best = 1e300; /* each path's fastest round: the least disturbed */
        for (int i = 0; i < rounds; i++) {
            best_full = round_ms[i * 4] < best_full ? round_ms[i * 4] : best_full;
            best = round_ms[i * 4 + k] < best ? round_ms[i * 4 + k] : best;
        }
        best_ratio[k] = best_full / best;
    }
    free(round_ms);
    for (int k = 0; k < 4; k++) {
        if (!want[k])
            continue;
        px__path *p = &paths_open[k];
        fps[k][0] = count / (ms[k] / 1e3);
        if (cuda)
            host_us[k] = px__host_us(p, d_frames, n, 200, W, H);
        if (cuda && !device_only)
            fps[k][1] = px__fps(p, frames, n, count, W, H, -1);
        if (cuda && ts[k] == 16 && !device_only)
            fps_rects = px__fps_rects(p, frames, n, count, W, H, 0.1);
        px__close(p, cuda);
    }
    char gpu[256] = "none";
    if (cuda) {
        cudaDeviceProp prop;
        cudaGetDeviceProperties(&prop, 0);
        snprintf(gpu, sizeof gpu, "%s", prop.name);
    }
    printf("{\"executor\": \"%s\", \"gpu\": \"%s\", \"w\": %d, \"h\": %d, \"video_frames\": %d, \"timed_frames\": %d,\n", exec,
           gpu, W, H, n, count);
    const char *names[4] = {"full", "incremental_t0", "incremental_t8", "incremental_t16"};
    for (int k = 0; k < 4; k++) {
        if (!want[k])
            continue;
        printf(" \"%s\": {\"fps%s\": %.1f", names[k], cuda ? "_device" : "", fps[k][0]);
        if (cuda)
            printf(", \"host_us_per_frame_device\": %.2f", host_us[k]);
        if (cuda)
            printf(", \"fps_pinned_host\": %.1f, \"pinned_host_link_fraction\": %.3f", fps[k][1], fps[k][1] * (double)fb / link);
        if (ts[k] >= 0)
            printf(", \"tokens_sampled\": %.3f, \"tokens_bytes_changed\": %.3f, \"speedup_vs_full\": %.2f, "
                   "\"speedup_vs_full_median_round\": %.2f, \"speedup_vs_full_best_rounds\": %.2f",
                   sampled[k], differ[k], want[0] ? fps[k][0] / fps[0][0] : 0.0, round_ratio[k], best_ratio[k]);
        printf("},\n");
    }
    if (cuda)
        printf(" \"incremental_t16_pinned_host_rects_10pct_fps\": %.1f,\n", fps_rects);
    printf(" \"pinned_h2d_GBps\": %.2f, \"pinned_h2d_one_stream_GBps\": %.2f, \"pinned_h2d_two_streams_GBps\": %.2f}\n",
           link / 1e9, link1 / 1e9, link2 / 1e9);
    return 0;
}
