/* bench_fixation - what a moving gaze costs on the CUDA-GL executor, through the public C API,
 * with 1024x1024 frames already in GPU memory and everything on one caller stream (no host
 * synchronisation until a measurement ends). Figures, not assertions; prints JSON.
 *
 *   same      one fixation-relative logpolar plan (budget 273: 270 tokens): bind + run + patches per frame
 *   moving    the same with a new fixation every frame, set from device memory
 *             (pxvm_runner_set_fixations): no reload, the same CUDA graph replayed
 *   moving_host  ... set from host memory
 *   recompile the old way: a new absolute plan per fixation (compile + load + run + patches)
 *   saliency  a scanpath plan: SALIENCY + ARGMAX (K = 1 and 4) + the tokens around each fixation
 *   batch32   32 images with 32 fixations in one batched run, against 32 absolute programs (one
 *             per fixation, loaded once) run one after another
 *
 *   bench_fixation [FRAMES] */
#include <cuda_runtime.h>

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "../../include/pxvm.h"
#include "bench_common.h"

#define W 1024
#define H 1024
#define BATCH 32

static const char *px__logpolar(char *buf, size_t n, const char *fixation, const char *extra)
{
    snprintf(buf, n, "{\"image\": [%d, %d], \"budget\": 273, \"scheme\": \"logpolar\", \"fixation\": %s%s}", W, H,
             fixation, extra);
    return buf;
}

typedef struct {
    pxvm_prog *prog;
    pxvm_runner *run;
    int image, atlas;
    pxvm_view out;
    uint8_t *d_out;
} px__job;

static void px__open(px__job *j, const char *plan, int batch, cudaStream_t s)
{
    px__ck(pxvm_prog_from_plan(plan, "bench", NULL, &j->prog), "bench_fixation: plan");
    px__ck(pxvm_runner_open(j->prog, "cuda", 0, 0, batch, &j->run), "bench_fixation: open");
    px__ck(pxvm_runner_set_stream(j->run, s), "bench_fixation: stream");
    j->image = pxvm_prog_slot_find(j->prog, "image");
    j->atlas = pxvm_prog_slot_find(j->prog, "atlas");
    pxvm_slot_info ai;
    px__ck(pxvm_prog_slot(j->prog, j->atlas, &ai), "bench_fixation: slot");
    size_t pbytes = (size_t)ai.patch_w * ai.patch_h * ai.patch_count * 4;
    cudaMalloc(&j->d_out, pbytes * (size_t)batch);
    pxvm_view o = {j->d_out, 0, batch, ai.patch_w, ai.patch_h * ai.patch_count, 4, (int64_t)pbytes, ai.patch_w * 4, 4, 1};
    j->out = o;
}

static void px__close(px__job *j)
{
    pxvm_runner_close(j->run);
    pxvm_prog_free(j->prog);
    cudaFree(j->d_out);
}

/* One frame: [fixation] + bind + run + patches. fix: Q16 pairs (items of them), device memory
 * when dev, host otherwise; NULL: keep the registers. */
static void px__frame(px__job *j, const pxvm_view *in, const int32_t *fix, int dev)
{
    if (fix)
        px__ck(pxvm_runner_set_fixations(j->run, 0, in->items, 0, 1, fix, dev ? 0 : -1), "bench_fixation: fixations");
    px__ck(pxvm_runner_bind(j->run, j->image, 0, in), "bench_fixation: bind");
    px__ck(pxvm_runner_run(j->run), "bench_fixation: run");
    px__ck(pxvm_runner_read_patches(j->run, j->atlas, 0, &j->out), "bench_fixation: read");
}

int main(int argc, char **argv)
{
    int frames = argc > 1 ? atoi(argv[1]) : 1000;
    size_t frame = (size_t)W * H * 4;
    uint8_t *d_in, *h = (uint8_t *)malloc(frame);
    cudaMalloc(&d_in, frame * BATCH);
    for (size_t i = 0; i < frame; i++) /* a smooth picture with structure, so saliency has work */
        h[i] = (uint8_t)(((i / 4) % W) * 3 / 16 + ((i / 4) / W) / 8 + ((i & 3) == 0 && (i / 4) % 97 < 9 ? 90 : 0));
    for (int b = 0; b < BATCH; b++)
        cudaMemcpy(d_in + frame * (size_t)b, h, frame, cudaMemcpyHostToDevice);
    /* fixations: a pseudo-random walk over the image, Q16, one per frame, on the device */
    int32_t *hf = (int32_t *)malloc(sizeof(int32_t) * 2 * (size_t)(frames > BATCH ? frames : BATCH)), *d_fix;
    for (int i = 0; i < (frames > BATCH ? frames : BATCH); i++) {
        hf[2 * i] = (int32_t)((((unsigned)i * 7919u) % W) << 16) + 32768;
        hf[2 * i + 1] = (int32_t)((((unsigned)i * 104729u) % H) << 16) + 32768;
    }
    cudaMalloc(&d_fix, sizeof(int32_t) * 2 * (size_t)(frames > BATCH ? frames : BATCH));
    cudaMemcpy(d_fix, hf, sizeof(int32_t) * 2 * (size_t)(frames > BATCH ? frames : BATCH), cudaMemcpyHostToDevice);
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    pxvm_view in = {d_in, 0, 1, W, H, 4, (int64_t)frame, W * 4, 4, 1};
    char plan[512];

    /* same fixation vs a new one every frame (device, host), one relative program */
    px__job rel;
    px__open(&rel, px__logpolar(plan, sizeof plan, "\"relative\"", ""), 1, s);
    for (int i = 0; i < 20; i++)
        px__frame(&rel, &in, d_fix, 1);
    cudaStreamSynchronize(s);
    double t0 = px__now_ms();
    for (int i = 0; i < frames; i++)
        px__frame(&rel, &in, NULL, 0);
    cudaStreamSynchronize(s);
    double same_ms = (px__now_ms() - t0) / frames;
    t0 = px__now_ms();
    for (int i = 0; i < frames; i++)
        px__frame(&rel, &in, d_fix + 2 * i, 1);
    cudaStreamSynchronize(s);
    double moving_ms = (px__now_ms() - t0) / frames;
    t0 = px__now_ms();
    for (int i = 0; i < frames; i++)
        px__frame(&rel, &in, hf + 2 * i, 0);
    cudaStreamSynchronize(s);
    double moving_host_ms = (px__now_ms() - t0) / frames;

    /* the old way: a program compiled and loaded per fixation */
    int nre = 20;
    t0 = px__now_ms();
    for (int i = 0; i < nre; i++) {
        char fix[96];
        snprintf(fix, sizeof fix, "[%.6f, %.6f]", (hf[2 * i] / 65536.0) / W, (hf[2 * i + 1] / 65536.0) / H);
        px__job abs_job;
        px__open(&abs_job, px__logpolar(plan, sizeof plan, fix, ""), 1, s);
        px__frame(&abs_job, &in, NULL, 0);
        cudaStreamSynchronize(s);
        px__close(&abs_job);
    }
    double recompile_ms = (px__now_ms() - t0) / nre;

    /* saliency + ARGMAX + the tokens around each of K fixations */
    double sal_ms[2];
    const int ks[2] = {1, 4};
    for (int v = 0; v < 2; v++) {
        char extra[64];
        snprintf(extra, sizeof extra, ", \"scanpath\": %d", ks[v]);
        px__job sal;
        px__open(&sal, px__logpolar(plan, sizeof plan, "\"relative\"", extra), 1, s);
        for (int i = 0; i < 20; i++)
            px__frame(&sal, &in, NULL, 0);
        cudaStreamSynchronize(s);
        t0 = px__now_ms();
        for (int i = 0; i < frames; i++)
            px__frame(&sal, &in, NULL, 0);
        cudaStreamSynchronize(s);
        sal_ms[v] = (px__now_ms() - t0) / frames;
        px__close(&sal);
    }

    /* 32 images with 32 fixations: one batched run vs 32 absolute programs */
    px__job many;
    px__open(&many, px__logpolar(plan, sizeof plan, "\"relative\"", ""), BATCH, s);
    pxvm_view inb = in;
    inb.items = BATCH;
    for (int i = 0; i < 10; i++)
        px__frame(&many, &inb, d_fix, 1);
    cudaStreamSynchronize(s);
    int sets = frames / 10 > 20 ? frames / 10 : 20;
    t0 = px__now_ms();
    for (int i = 0; i < sets; i++)
        px__frame(&many, &inb, d_fix, 1);
    cudaStreamSynchronize(s);
    double batch_ms = (px__now_ms() - t0) / sets;
    px__job progs[BATCH];
    for (int b = 0; b < BATCH; b++) {
        char fix[96];
        snprintf(fix, sizeof fix, "[%.6f, %.6f]", (hf[2 * b] / 65536.0) / W, (hf[2 * b + 1] / 65536.0) / H);
        px__open(&progs[b], px__logpolar(plan, sizeof plan, fix, ""), 1, s);
        pxvm_view one = in;
        one.data = d_in + frame * (size_t)b;
        px__frame(&progs[b], &one, NULL, 0);
    }
    cudaStreamSynchronize(s);
    t0 = px__now_ms();
    for (int i = 0; i < sets; i++)
        for (int b = 0; b < BATCH; b++) {
            pxvm_view one = in;
            one.data = d_in + frame * (size_t)b;
            px__frame(&progs[b], &one, NULL, 0);
        }
    cudaStreamSynchronize(s);
    double programs_ms = (px__now_ms() - t0) / sets;

    cudaDeviceProp prop;
    cudaGetDeviceProperties(&prop, 0);
    int driver = 0;
    cudaDriverGetVersion(&driver);
    pxvm_slot_info ai;
    px__ck(pxvm_prog_slot(rel.prog, rel.atlas, &ai), "bench_fixation: slot");
    printf("{\"gpu\": \"%s\", \"cuda_driver_api\": %d, \"w\": %d, \"h\": %d, \"frames\": %d, \"tokens\": %d,\n"
           " \"same_fixation_frame_us\": %.3f, \"new_fixation_device_frame_us\": %.3f, "
           "\"new_fixation_host_frame_us\": %.3f,\n"
           " \"new_fixation_cost_ratio\": %.3f, \"recompile_per_fixation_ms\": %.3f, \"recompile_vs_relative\": %.1f,\n"
           " \"saliency_argmax_tokens_frame_us\": %.3f, \"saliency_scanpath4_frame_us\": %.3f,\n"
           " \"batch32_32_fixations_us\": %.3f, \"programs32_us\": %.3f, \"batch_vs_programs\": %.2f}\n",
           prop.name, driver, W, H, frames, ai.patch_count, 1e3 * same_ms, 1e3 * moving_ms, 1e3 * moving_host_ms, moving_ms / same_ms,
           recompile_ms, recompile_ms / moving_ms, 1e3 * sal_ms[0], 1e3 * sal_ms[1], 1e3 * batch_ms, 1e3 * programs_ms,
           programs_ms / batch_ms);
    px__close(&rel);
    px__close(&many);
    for (int b = 0; b < BATCH; b++)
        px__close(&progs[b]);
    return 0;
}
