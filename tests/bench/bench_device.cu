/* bench_device - device-resident frames through the public C API (include/pxvm.h) on the
 * CUDA-GL executor: the frame is already in GPU memory (a decoder's or a model's), so a frame is
 * bind (convert into the slot, device to device) + run + patches into device memory, all on one
 * caller stream with no host synchronisation until the end. Prints JSON.
 *   bench_device [FRAMES] [BATCH] */
#include <cuda_runtime.h>

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "../../include/pxvm.h"
#include "bench_common.h"

/* frames/s of `frames` frames: bind + run + read patches, items at a time. */
static double px__frames_per_s(pxvm_runner *r, int image, int atlas, const pxvm_view *in, const pxvm_view *out,
                               int frames, cudaStream_t s, int bind)
{
    for (int i = 0; i < 20; i++) { /* warm-up: the graph is captured on the first run */
        px__ck(pxvm_runner_bind(r, image, 0, in), "bench_device: bind");
        px__ck(pxvm_runner_run(r), "bench_device: run");
        px__ck(pxvm_runner_read_patches(r, atlas, 0, out), "bench_device: read");
    }
    cudaStreamSynchronize(s);
    double t0 = px__now_ms();
    for (int i = 0; i < frames; i++) {
        if (bind)
            px__ck(pxvm_runner_bind(r, image, 0, in), "bench_device: bind");
        px__ck(pxvm_runner_run(r), "bench_device: run");
        px__ck(pxvm_runner_read_patches(r, atlas, 0, out), "bench_device: read");
    }
    cudaStreamSynchronize(s);
    return frames * in->items / ((px__now_ms() - t0) / 1e3);
}

int main(int argc, char **argv)
{
    int frames = argc > 1 ? atoi(argv[1]) : 2000, batch = argc > 2 ? atoi(argv[2]) : 32;
    const int W = 1024, H = 1024;
    const char *plan = "{\"image\": [1024, 1024], \"budget\": 273, \"scheme\": \"grid\", \"m0\": 1, \"e0\": 0.5, "
                       "\"scale\": 1, \"levels\": 5}";
    pxvm_prog *prog;
    pxvm_runner *one, *many;
    px__ck(pxvm_prog_from_plan(plan, "foveate273-1024", NULL, &prog), "bench_device: plan");
    px__ck(pxvm_runner_open(prog, "cuda", 0, 0, 1, &one), "bench_device: open");
    px__ck(pxvm_runner_open(prog, "cuda", 0, 0, batch, &many), "bench_device: open batch");
    int image = pxvm_prog_slot_find(prog, "image"), atlas = pxvm_prog_slot_find(prog, "atlas");
    pxvm_slot_info ai;
    px__ck(pxvm_prog_slot(prog, atlas, &ai), "bench_device: slot");
    size_t frame = (size_t)W * H * 4, pbytes = (size_t)ai.patch_w * ai.patch_h * ai.patch_count * 4;
    uint8_t *d_in, *d_out, *h = (uint8_t *)malloc(frame);
    cudaMalloc(&d_in, frame * (size_t)batch);
    cudaMalloc(&d_out, pbytes * (size_t)batch);
    for (size_t i = 0; i < frame; i++)
        h[i] = (uint8_t)((i * 2654435761u) >> 13);
    for (int b = 0; b < batch; b++)
        cudaMemcpy(d_in + frame * (size_t)b, h, frame, cudaMemcpyHostToDevice);
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    px__ck(pxvm_runner_set_stream(one, s), "bench_device: stream");
    px__ck(pxvm_runner_set_stream(many, s), "bench_device: stream");
    pxvm_view in = {d_in, 0, 1, W, H, 4, (int64_t)frame, W * 4, 4, 1};
    pxvm_view out = {d_out, 0, 1, ai.patch_w, ai.patch_h * ai.patch_count, 4, (int64_t)pbytes, ai.patch_w * 4, 4, 1};
    double fps = px__frames_per_s(one, image, atlas, &in, &out, frames, s, 1);
    double fps_bound = px__frames_per_s(one, image, atlas, &in, &out, frames, s, 0);
    pxvm_view inb = in, outb = out;
    inb.items = outb.items = batch;
    double batch_ips = px__frames_per_s(many, image, atlas, &inb, &outb, frames / batch > 20 ? frames / batch : 20, s, 1);
    /* RGB8 frames (3 bytes a pixel, expanded on the device) */
    pxvm_view rgb = {d_in, 0, 1, W, H, 3, (int64_t)frame, W * 3, 3, 1};
    double fps_rgb = px__frames_per_s(one, image, atlas, &rgb, &out, frames, s, 1);
    cudaDeviceProp prop;
    cudaGetDeviceProperties(&prop, 0);
    printf("{\"gpu\": \"%s\", \"w\": %d, \"h\": %d, \"frames\": %d, \"batch\": %d,\n"
           " \"c_device_frame_fps\": %.1f, \"c_device_frame_us\": %.3f,\n"
           " \"c_device_rgb_frame_fps\": %.1f,\n"
           " \"c_bound_frame_run_read_fps\": %.1f,\n"
           " \"c_batch_images_per_s\": %.1f, \"c_batch_us_per_batch\": %.3f}\n",
           prop.name, W, H, frames, batch, fps, 1e6 / fps, fps_rgb, fps_bound, batch_ips, 1e6 * batch / batch_ips);
    pxvm_runner_close(one);
    pxvm_runner_close(many);
    pxvm_prog_free(prog);
    return 0;
}
