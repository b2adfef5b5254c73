/* bench_embed_floor - what EMBED's storage costs on this GPU before any arithmetic: its input is a
 * patch atlas and its output a slot, both 2D arrays (the CUDA-GL executor's slots are GL textures,
 * which CUDA maps as arrays: block-linear, read through the texture path, written through
 * surfaces), while PyTorch's GEMMs read and write linear memory. Times, at bench_embed.py's shape
 * (32 items, an atlas of 17x17 patches of 16x16 RGBA8, 273 tokens, D = 768 bf16 out):
 *   - every atlas texel read into linear memory through the texture path, through 16-byte surface
 *     loads (EMBED's staging pass), and by cudaMemcpy2DFromArray;
 *   - every output texel written through a surface from linear memory (4-byte and 16-byte stores),
 *     and by cudaMemcpy2DToArray;
 *   - the same bytes copied linear to linear (the bandwidth PyTorch's kernels see).
 * Prints JSON (medians of --reps, CUDA events). Arrays made by CUDA, not GL: the same layout class
 * (block-linear), without an EGL context.
 *   bench_embed_floor [--reps N] [--d D] */
#include <cuda_runtime.h>

#include <algorithm>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

#define ITEMS 32
#define COLS 17
#define PATCH 16
#define TOKENS 273

static void ck(cudaError_t e, const char *what)
{
    if (e != cudaSuccess) {
        fprintf(stderr, "bench_embed_floor: %s: %s\n", what, cudaGetErrorString(e));
        exit(1);
    }
}

struct arrays {
    cudaArray_t a[ITEMS];
    cudaTextureObject_t tex[ITEMS];
    cudaSurfaceObject_t surf[ITEMS];
    int w, h;
};

static void make(arrays *s, int w, int h)
{
    s->w = w, s->h = h;
    cudaChannelFormatDesc f = cudaCreateChannelDesc<uchar4>();
    for (int i = 0; i < ITEMS; i++) {
        ck(cudaMallocArray(&s->a[i], &f, (size_t)w, (size_t)h, cudaArraySurfaceLoadStore), "cudaMallocArray");
        cudaResourceDesc r = {};
        r.resType = cudaResourceTypeArray, r.res.array.array = s->a[i];
        cudaTextureDesc t = {};
        t.addressMode[0] = t.addressMode[1] = cudaAddressModeClamp, t.filterMode = cudaFilterModePoint;
        t.readMode = cudaReadModeElementType;
        ck(cudaCreateTextureObject(&s->tex[i], &r, &t, NULL), "cudaCreateTextureObject");
        ck(cudaCreateSurfaceObject(&s->surf[i], &r), "cudaCreateSurfaceObject");
    }
}

/* Every texel of every item's atlas into linear memory, a thread a texel, x fastest (the staging
 * pass reads the same texels, 4 per thread, in token order). */
__global__ void k_tex_to_linear(const cudaTextureObject_t *tex, int w, int h, uint32_t *out)
{
    int item = blockIdx.z, n = w * h;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        uchar4 v = tex2D<uchar4>(tex[item], (float)(i % w) + 0.5f, (float)(i / w) + 0.5f);
        out[(size_t)item * n + i] = (uint32_t)v.x | (uint32_t)v.y << 8 | (uint32_t)v.z << 16 | (uint32_t)v.w << 24;
    }
}

/* The same through 16-byte surface loads (4 texels each; EMBED's staging pass reads so). */
__global__ void k_surf_to_linear(const cudaSurfaceObject_t *surf, int w, int h, uint4 *out)
{
    int item = blockIdx.z, n = w * h / 4;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        out[(size_t)item * n + i] = surf2Dread<uint4>(surf[item], (i % (w / 4)) * 16, i / (w / 4));
}

/* Linear memory into every item's output array through its surface: 4-byte texels one by one, or
 * 16 bytes (4 texels) per store. */
template <int VEC>
__global__ void k_linear_to_surf(const cudaSurfaceObject_t *surf, int w, int h, const uint32_t *in)
{
    int item = blockIdx.z, n = w * h / VEC;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        int x = (i % (w / VEC)) * VEC, y = i / (w / VEC);
        const uint32_t *p = in + (size_t)item * w * h + (size_t)y * w + x;
        if (VEC == 1)
            surf2Dwrite(*p, surf[item], x * 4, y);
        else
            surf2Dwrite(*(const uint4 *)p, surf[item], x * 4, y);
    }
}

__global__ void k_copy(const uint4 *in, uint4 *out, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        out[i] = in[i];
}

template <class F>
static double median_us(int reps, F f)
{
    cudaEvent_t a, b;
    cudaEventCreate(&a), cudaEventCreate(&b);
    f();
    ck(cudaDeviceSynchronize(), "warm-up");
    std::vector<float> ms;
    for (int r = 0; r < reps; r++) {
        cudaEventRecord(a);
        f();
        cudaEventRecord(b);
        cudaEventSynchronize(b);
        float t;
        cudaEventElapsedTime(&t, a, b);
        ms.push_back(t);
    }
    ck(cudaGetLastError(), "a timed launch");
    std::sort(ms.begin(), ms.end());
    return 1000.0 * ms[ms.size() / 2];
}

int main(int argc, char **argv)
{
    int reps = 50, d = 768;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--reps"))
            reps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--d"))
            d = atoi(argv[i + 1]);
    }
    if (reps < 1 || d < 4 || d % 8) {
        fprintf(stderr, "usage: bench_embed_floor [--reps N>=1] [--d D, a multiple of 8]\n");
        return 2;
    }
    arrays atlas, out;
    make(&atlas, COLS * PATCH, COLS * PATCH);
    make(&out, d / 2, TOKENS); /* bf16: two values a texel, a token a row */
    cudaTextureObject_t *d_tex;
    cudaSurfaceObject_t *d_surf;
    ck(cudaMalloc(&d_tex, sizeof atlas.tex), "cudaMalloc");
    ck(cudaMalloc(&d_surf, sizeof out.surf), "cudaMalloc");
    cudaMemcpy(d_tex, atlas.tex, sizeof atlas.tex, cudaMemcpyHostToDevice);
    cudaMemcpy(d_surf, out.surf, sizeof out.surf, cudaMemcpyHostToDevice);
    size_t atlas_bytes = (size_t)ITEMS * atlas.w * atlas.h * 4, out_bytes = (size_t)ITEMS * out.w * out.h * 4;
    size_t big = std::max(atlas_bytes, out_bytes);
    uint32_t *lin, *lin2;
    ck(cudaMalloc(&lin, big), "cudaMalloc");
    ck(cudaMalloc(&lin2, big), "cudaMalloc");
    std::vector<uint32_t> host(big / 4);
    for (size_t i = 0; i < host.size(); i++)
        host[i] = (uint32_t)(i * 2654435761u);
    cudaMemcpy(lin, host.data(), big, cudaMemcpyHostToDevice);
    for (int i = 0; i < ITEMS; i++)
        ck(cudaMemcpy2DToArray(atlas.a[i], 0, 0, lin + (size_t)i * atlas.w * atlas.h, (size_t)atlas.w * 4,
                               (size_t)atlas.w * 4, (size_t)atlas.h, cudaMemcpyDeviceToDevice),
           "filling the atlas");
    int sms;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
    dim3 ga((unsigned)(atlas.w * atlas.h + 255) / 256, 1, ITEMS), go((unsigned)(out.w * out.h + 255) / 256, 1, ITEMS);

    double t_tex = median_us(reps, [&] { k_tex_to_linear<<<ga, 256>>>(d_tex, atlas.w, atlas.h, lin2); });
    /* check: the texture path gives the bytes written */
    std::vector<uint32_t> back(atlas_bytes / 4);
    cudaMemcpy(back.data(), lin2, atlas_bytes, cudaMemcpyDeviceToHost);
    int ok_tex = !memcmp(back.data(), host.data(), atlas_bytes);
    cudaSurfaceObject_t *d_asurf;
    ck(cudaMalloc(&d_asurf, sizeof atlas.surf), "cudaMalloc");
    cudaMemcpy(d_asurf, atlas.surf, sizeof atlas.surf, cudaMemcpyHostToDevice);
    dim3 ga4((unsigned)(atlas.w * atlas.h / 4 + 255) / 256, 1, ITEMS);
    cudaMemset(lin2, 0, big);
    double t_surf_read = median_us(reps, [&] { k_surf_to_linear<<<ga4, 256>>>(d_asurf, atlas.w, atlas.h, (uint4 *)lin2); });
    cudaMemcpy(back.data(), lin2, atlas_bytes, cudaMemcpyDeviceToHost);
    ok_tex = ok_tex && !memcmp(back.data(), host.data(), atlas_bytes);
    double t_from_array = median_us(reps, [&] {
        for (int i = 0; i < ITEMS; i++)
            cudaMemcpy2DFromArrayAsync(lin2 + (size_t)i * atlas.w * atlas.h, (size_t)atlas.w * 4, atlas.a[i], 0, 0,
                                       (size_t)atlas.w * 4, (size_t)atlas.h, cudaMemcpyDeviceToDevice);
    });
    double t_surf4 = median_us(reps, [&] { k_linear_to_surf<1><<<go, 256>>>(d_surf, out.w, out.h, lin); });
    dim3 go4((unsigned)(out.w * out.h / 4 + 255) / 256, 1, ITEMS);
    cudaMemset(lin2, 0, big);
    for (int i = 0; i < ITEMS; i++)
        cudaMemcpy2DToArray(out.a[i], 0, 0, lin2, (size_t)out.w * 4, (size_t)out.w * 4, (size_t)out.h, cudaMemcpyDeviceToDevice);
    double t_surf16 = median_us(reps, [&] { k_linear_to_surf<4><<<go4, 256>>>(d_surf, out.w, out.h, lin); });
    /* check: 16-byte surface stores put the texels where 4-byte ones do */
    back.resize(out_bytes / 4);
    for (int i = 0; i < ITEMS; i++)
        cudaMemcpy2DFromArray(back.data() + (size_t)i * out.w * out.h, (size_t)out.w * 4, out.a[i], 0, 0, (size_t)out.w * 4,
                              (size_t)out.h, cudaMemcpyDeviceToHost);
    int ok_surf16 = !memcmp(back.data(), host.data(), out_bytes);
    double t_to_array = median_us(reps, [&] {
        for (int i = 0; i < ITEMS; i++)
            cudaMemcpy2DToArrayAsync(out.a[i], 0, 0, lin + (size_t)i * out.w * out.h, (size_t)out.w * 4, (size_t)out.w * 4,
                                     (size_t)out.h, cudaMemcpyDeviceToDevice);
    });
    double t_copy_atlas = median_us(reps, [&] { k_copy<<<sms * 8, 256>>>((const uint4 *)lin, (uint4 *)lin2, atlas_bytes / 16); });
    double t_copy_out = median_us(reps, [&] { k_copy<<<sms * 8, 256>>>((const uint4 *)lin, (uint4 *)lin2, out_bytes / 16); });
    cudaDeviceProp p;
    cudaGetDeviceProperties(&p, 0);
    int drv = 0;
    cudaDriverGetVersion(&drv);
    printf("{\"gpu\": \"%s\", \"cuda_driver\": %d, \"items\": %d, \"atlas_bytes\": %zu, \"out_bytes\": %zu, \"d\": %d,\n"
           " \"atlas_texture_to_linear_us\": %.2f, \"atlas_surface_16B_to_linear_us\": %.2f, \"atlas_reads_correct\": %s,\n"
           " \"atlas_memcpy_from_array_us\": %.2f,\n"
           " \"out_surface_4B_us\": %.2f, \"out_surface_16B_us\": %.2f, \"out_surface_16B_correct\": %s, \"out_memcpy_to_array_us\": %.2f,\n"
           " \"atlas_linear_copy_us\": %.2f, \"out_linear_copy_us\": %.2f}\n",
           p.name, drv, ITEMS, atlas_bytes, out_bytes, d, t_tex, t_surf_read, ok_tex ? "true" : "false", t_from_array, t_surf4, t_surf16,
           ok_surf16 ? "true" : "false", t_to_array, t_copy_atlas, t_copy_out);
    return ok_tex && ok_surf16 ? 0 : 1;
}
