/* bench_gpu - the CUDA-GL executor's speed, with the GPU baselines measured in the same run.
 *
 * For each input size: PYRAMID (device time of its plan step, CUDA events), the foveate273 plan's
 * 273 trilinear 16x16 patches (device time of the fused batch), the whole program replayed as a
 * CUDA graph (host wall time, including the end-of-run synchronisation), a whole frame (upload
 * from pinned host memory + pyramid + patches + download of the atlas), and 1,000 frames back to
 * back. Baselines: a device-to-device copy of level 0 (the bandwidth reference) and
 * glGenerateMipmap (GL timer query). PyTorch baselines come from bench_torch.py in the same
 * command (tests/bench/gpu-bench). Writes JSON to stdout; medians of repeated runs.
 */
#include <GL/glew.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

#include "../../assembler/plan.h"
#include "../../isa/px_sem.h"
#include "../../vm/vm.h"

extern "C" const pxvm_executor_ops pxvm_cuda_gl_executor;

static double px__median(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static double px__now_ms()
{
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

static void px__die(const char *what, const pxvm_error *err)
{
    char buf[1024];
    pxvm_error_format(err, buf, sizeof buf);
    fprintf(stderr, "bench_gpu: %s: %s\n", what, buf);
    exit(1);
}

struct px__steps {
    std::vector<double> ms[4];
};

static void px__profile(void *ctx, const pxvm_program *, uint32_t step, double ms)
{
    px__steps *s = (px__steps *)ctx;
    if (step < 4)
        s->ms[step].push_back(ms);
}

static void px__load(pxvm_builder *b, pxvm_program *prog)
{
    pxvm_image img;
    pxvm_error err;
    pxvm_limits lim;
    pxvm_limits_default(&lim);
    if (pxvm_build_finish(b, &img, &err) < 0 || pxvm_program_from_image(&img, &lim, prog, &err) < 0)
        px__die("program", &err);
    pxvm_build_free(b);
}

int main(int argc, char **argv)
{
    int reps = argc > 1 ? atoi(argv[1]) : 100;
    const int sizes[][2] = {{1024, 1024}, {3840, 2160}, {4096, 4096}};
    const pxvm_executor_ops *ops = &pxvm_cuda_gl_executor;
    pxvm_executor *ex;
    pxvm_error err;
    pxvm_open_options oo = {0, 0};
    if (ops->open(&ex, &oo, &err) < 0)
        px__die("open", &err);
    cudaDeviceProp prop;
    int driver = 0;
    cudaGetDeviceProperties(&prop, 0);
    cudaDriverGetVersion(&driver);
    printf("{\n  \"gpu\": \"%s\", \"cuda_driver_api\": %d, \"gl_renderer\": \"%s\", \"gl_version\": \"%s\",\n  \"reps\": %d,\n  \"sizes\": [",
           prop.name, driver, (const char *)glGetString(GL_RENDERER), (const char *)glGetString(GL_VERSION), reps);
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
        int W = sizes[si][0], H = sizes[si][1];
        size_t bytes = (size_t)W * H * 4;
        pxvm_image in = {W, H, NULL};
        if (cudaHostAlloc(&in.px, bytes, cudaHostAllocDefault) != cudaSuccess)
            return 1;
        for (size_t i = 0; i < bytes; i++)
            in.px[i] = (uint8_t)((i * 2654435761u) >> 13);

        /* PYRAMID alone, and the foveate273 program */
        pxvm_builder b;
        pxvm_program pyr, fov;
        pxvm_build_init(&b, 16);
        int32_t f[PXI_MAX_FIELDS] = {0};
        f[PX_FI(PYRAMID, slot)] = pxvm_build_slot(&b, PXI_ROLE_INPUT, "image", W, H);
        pxvm_build_insn(&b, PX_OP_PYRAMID, f);
        pxvm_build_insn(&b, PX_OP_HALT, NULL);
        px__load(&b, &pyr);
        pxvm_build_init(&b, 64);
        pxvm_plan_foveate273(&b, W, H);
        px__load(&b, &fov);

        px__steps pyr_steps, fov_steps;
        pxvm_run_options prof = {1000, NULL, NULL, px__profile, &pyr_steps};
        if (ops->load(ex, &pyr, 1, &err) < 0 || pxvm_bind_image(ops, ex, 1, &in, &err) < 0)
            px__die("load", &err);
        for (int r = 0; r < reps + 5; r++)
            if (ops->run(ex, &prof, &err) < 0)
                px__die("run", &err);
        prof.profile_ctx = &fov_steps;
        if (ops->load(ex, &fov, 1, &err) < 0 || pxvm_bind_image(ops, ex, 1, &in, &err) < 0)
            px__die("load", &err);
        for (int r = 0; r < reps + 5; r++)
            if (ops->run(ex, &prof, &err) < 0)
                px__die("run", &err);
        for (int k = 0; k < 2; k++) { /* drop the warm-up runs */
            pyr_steps.ms[k].erase(pyr_steps.ms[k].begin(), pyr_steps.ms[k].begin() + 5);
            fov_steps.ms[k].erase(fov_steps.ms[k].begin(), fov_steps.ms[k].begin() + 5);
        }

        /* the whole program by graph replay; a whole frame; 1000 frames */
        pxvm_run_options plain = {1000, NULL, NULL, NULL, NULL};
        std::vector<double> graph_ms, frame_ms;
        pxvm_image atlas;
        for (int r = 0; r < reps + 5; r++) {
            double t0 = px__now_ms();
            if (ops->run(ex, &plain, &err) < 0)
                px__die("run", &err);
            if (r >= 5)
                graph_ms.push_back(px__now_ms() - t0);
        }
        for (int r = 0; r < reps + 5; r++) {
            double t0 = px__now_ms();
            if (pxvm_bind_image(ops, ex, 1, &in, &err) < 0 || ops->run(ex, &plain, &err) < 0 || pxvm_read_image(ops, ex, &fov, 2, 0, 0, &atlas, &err) < 0)
                px__die("frame", &err);
            if (r >= 5)
                frame_ms.push_back(px__now_ms() - t0);
            pxvm_image_free(&atlas);
        }
        /* the frame's parts: upload (bind + wait), run, read */
        std::vector<double> up_ms, run_ms, read_ms;
        for (int r = 0; r < reps / 2 + 5; r++) {
            double a0 = px__now_ms();
            if (pxvm_bind_image(ops, ex, 1, &in, &err) < 0)
                px__die("bind", &err);
            cudaDeviceSynchronize();
            double a1 = px__now_ms();
            if (ops->run(ex, &plain, &err) < 0)
                px__die("run", &err);
            double a2 = px__now_ms();
            if (pxvm_read_image(ops, ex, &fov, 2, 0, 0, &atlas, &err) < 0)
                px__die("read", &err);
            double a3 = px__now_ms();
            pxvm_image_free(&atlas);
            if (r >= 5) {
                up_ms.push_back(a1 - a0);
                run_ms.push_back(a2 - a1);
                read_ms.push_back(a3 - a2);
            }
        }
        double t0 = px__now_ms();
        for (int r = 0; r < 1000; r++) {
            if (pxvm_bind_image(ops, ex, 1, &in, &err) < 0 || ops->run(ex, &plain, &err) < 0 || pxvm_read_image(ops, ex, &fov, 2, 0, 0, &atlas, &err) < 0)
                px__die("frames", &err);
            pxvm_image_free(&atlas);
        }
        double frames_ms = px__now_ms() - t0;

        /* baselines: device-to-device copy of level 0; glGenerateMipmap */
        void *da, *db;
        cudaMalloc(&da, bytes);
        cudaMalloc(&db, bytes);
        cudaMemset(da, 7, bytes);
        std::vector<double> copy_ms, mip_ms;
        for (int r = 0; r < reps + 5; r++) {
            cudaEventRecord(e0);
            cudaMemcpyAsync(db, da, bytes, cudaMemcpyDeviceToDevice);
            cudaEventRecord(e1);
            cudaEventSynchronize(e1);
            float ms;
            cudaEventElapsedTime(&ms, e0, e1);
            if (r >= 5)
                copy_ms.push_back(ms);
        }
        std::vector<double> h2d_ms; /* the floor of a frame: level 0 from pinned memory over the link */
        for (int r = 0; r < reps / 4 + 5; r++) {
            cudaEventRecord(e0);
            cudaMemcpyAsync(da, in.px, bytes, cudaMemcpyHostToDevice);
            cudaEventRecord(e1);
            cudaEventSynchronize(e1);
            float ms;
            cudaEventElapsedTime(&ms, e0, e1);
            if (r >= 5)
                h2d_ms.push_back(ms);
        }
        cudaFree(da);
        cudaFree(db);
        GLuint tex, query;
        int levels = 1;
        for (int m = W > H ? W : H; m > 1; m >>= 1)
            levels++;
        glGenTextures(1, &tex);
        glBindTexture(GL_TEXTURE_2D, tex);
        glTexStorage2D(GL_TEXTURE_2D, levels, GL_RGBA8, W, H);
        glTexSubImage2D(GL_TEXTURE_2D, 0, 0, 0, W, H, GL_RGBA, GL_UNSIGNED_BYTE, in.px);
        glGenQueries(1, &query);
        for (int r = 0; r < reps / 4 + 5; r++) {
            glBeginQuery(GL_TIME_ELAPSED, query);
            glGenerateMipmap(GL_TEXTURE_2D);
            glEndQuery(GL_TIME_ELAPSED);
            GLuint64 ns = 0;
            glGetQueryObjectui64v(query, GL_QUERY_RESULT, &ns);
            if (r >= 5)
                mip_ms.push_back((double)ns / 1e6);
        }
        glDeleteQueries(1, &query);
        glDeleteTextures(1, &tex);
        GLenum ge = glGetError();

        double pyr_all = 0;
        for (int l = 0; l < pyr.slots[1].levels; l++)
            pyr_all += (double)px_mip_dim(W, l) * px_mip_dim(H, l) * 4;
        printf("%s\n    {\"w\": %d, \"h\": %d, \"levels\": %d,\n"
               "     \"pyramid_ms\": %.5f, \"pyramid_bytes\": %.0f,\n"
               "     \"fov_pyramid_ms\": %.5f, \"patches_273_ms\": %.5f,\n"
               "     \"program_graph_ms\": %.5f, \"frame_ms\": %.5f, \"frames_1000_ms\": %.3f, \"fps\": %.1f,\n"
               "     \"frame_upload_ms\": %.5f, \"frame_run_ms\": %.5f, \"frame_read_ms\": %.5f,\n"
               "     \"copy_d2d_ms\": %.5f, \"copy_bytes\": %zu, \"h2d_pinned_ms\": %.5f, \"gl_generate_mipmap_ms\": %.5f, \"gl_error\": %u}",
               si ? "," : "", W, H, pyr.slots[1].levels, px__median(pyr_steps.ms[0]), pyr_all,
               px__median(fov_steps.ms[0]), px__median(fov_steps.ms[1]), px__median(graph_ms), px__median(frame_ms),
               frames_ms, 1000.0 / (frames_ms / 1000.0), px__median(up_ms), px__median(run_ms), px__median(read_ms), px__median(copy_ms), 2 * bytes, px__median(h2d_ms), px__median(mip_ms), ge);
        fflush(stdout);
        pxvm_program_free(&pyr);
        pxvm_program_free(&fov);
        cudaFreeHost(in.px);
    }
    printf("\n  ]\n}\n");
    ops->close(ex);
    return 0;
}
