/* slot_storage.cu - one slot's storage for one item, as load and retarget make it: a GL texture with
 * the slot's mip chain registered with CUDA, and the kernels' per-level texture and surface objects
 * of it, checked to write the levels they name (made again when they do not). */
#include <stdint.h>
#include <string.h>

#include "executor.cuh"

/* One slot's storage for one item: a GL_RGBA8 texture `tex` with the slot's whole mip chain,
 * registered with CUDA into *res (load and retarget make every slot texture this way). */
int px__slot_texture(GLuint tex, cudaGraphicsResource_t *res, const pxvm_slot *s, int slot, int item, pxvm_error *err)
{
    glBindTexture(GL_TEXTURE_2D, tex);
    glTexStorage2D(GL_TEXTURE_2D, s->levels, GL_RGBA8, s->w, s->h);
    GLenum ge = glGetError();
    glBindTexture(GL_TEXTURE_2D, 0);
    if (ge != GL_NO_ERROR)
        return pxvm_fail(err, PXE_CUDA_TEX_STORAGE, -1, -1, s->levels, s->w, s->h, slot, item, (unsigned)ge);
    PX__CK(cudaGraphicsGLRegisterImage(res, tex, GL_TEXTURE_2D, cudaGraphicsRegisterFlagsSurfaceLoadStore));
    return 0;
}

/* The kernels' view of a mapped slot texture: per level its CUDA array (arrays[l]), its size, a
 * point-filtered texture object and a surface object. g->levels counts the levels made so far, so
 * that what a failure leaves is destroyed with the rest. */
static int px__slot_views_once(cudaGraphicsResource_t res, const pxvm_slot *s, px_gpu_slot *g, cudaArray_t *arrays, pxvm_error *err)
{
    cudaMipmappedArray_t mip;
    PX__CK(cudaGraphicsResourceGetMappedMipmappedArray(&mip, res));
    g->levels = 0;
    for (int l = 0; l < s->levels; l++) {
        PX__CK(cudaGetMipmappedArrayLevel(&arrays[l], mip, (unsigned)l));
        g->w[l] = px_mip_dim(s->w, l);
        g->h[l] = px_mip_dim(s->h, l);
        cudaResourceDesc rd;
        memset(&rd, 0, sizeof rd);
        rd.resType = cudaResourceTypeArray;
        rd.res.array.array = arrays[l];
        cudaTextureDesc td;
        memset(&td, 0, sizeof td);
        td.addressMode[0] = td.addressMode[1] = cudaAddressModeClamp;
        td.filterMode = cudaFilterModePoint;
        td.readMode = cudaReadModeElementType;
        td.normalizedCoords = 0;
        PX__CK(cudaCreateTextureObject(&g->tex[l], &rd, &td, NULL));
        PX__CK(cudaCreateSurfaceObject(&g->surf[l], &rd));
        g->levels = l + 1;
    }
    return 0;
}

/* Writes a pattern through every surface of levels >= 1 (each level its own value). */
__global__ void px__k_views_probe(const px_gpu_rect *rects, uint32_t v)
{
    const px_gpu_rect r = rects[blockIdx.y];
    for (int p = blockIdx.x * blockDim.x + threadIdx.x; p < r.w * r.h; p += gridDim.x * blockDim.x)
        px__store(r.surf, p % r.w, p / r.w, v + blockIdx.y);
}

/* Do the surfaces of levels >= 1 write those levels? Each level is filled with its own value
 * through its surface and its first and last texels are read back through its array. (Measured
 * on an H100, driver 580: now and then the views of a freshly mapped GL texture's levels >= 1
 * address other memory, while the arrays they were made from are right; made again, they are.)
 * 1 right, 0 wrong, -1 with *err. What the pattern leaves, the caller clears. */
static int px__views_right(const px_gpu_slot *g, const cudaArray_t *arrays, cudaStream_t stream, pxvm_error *err)
{
    if (g->levels < 2)
        return 1;
    px_gpu_rect r[PXVM_MAX_LEVELS], *d = NULL;
    int n = 0, mx = 0;
    for (int l = 1; l < g->levels; l++, n++) {
        r[n].surf = g->surf[l], r[n].w = g->w[l], r[n].h = g->h[l];
        mx = g->w[l] * g->h[l] > mx ? g->w[l] * g->h[l] : mx;
    }
    const uint32_t base = 0x5A5AA500u;
    PX__CK(cudaMallocAsync((void **)&d, sizeof(px_gpu_rect) * (size_t)n, stream));
    cudaError_t e = cudaMemcpyAsync(d, r, sizeof(px_gpu_rect) * (size_t)n, cudaMemcpyHostToDevice, stream);
    if (e == cudaSuccess) {
        int bx = (mx + 255) / 256;
        px__k_views_probe<<<dim3((unsigned)(bx < 256 ? bx : 256), (unsigned)n), 256, 0, stream>>>(d, base);
        e = cudaGetLastError();
    }
    uint32_t got[PXVM_MAX_LEVELS][2];
    for (int l = 1; e == cudaSuccess && l < g->levels; l++) {
        size_t x = (size_t)g->w[l] - 1u, y = (size_t)g->h[l] - 1u;
        e = cudaMemcpy2DFromArrayAsync(&got[l][0], 4, arrays[l], 0, 0, 4, 1, cudaMemcpyDeviceToHost, stream);
        if (e == cudaSuccess)
            e = cudaMemcpy2DFromArrayAsync(&got[l][1], 4, arrays[l], x * 4u, y, 4, 1, cudaMemcpyDeviceToHost, stream);
    }
    cudaFreeAsync(d, stream);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(stream);
    if (e != cudaSuccess)
        return px__cuda_fail(err, "checking a slot's level views", e, __FILE__, __LINE__);
    for (int l = 1; l < g->levels; l++)
        if (got[l][0] != base + (uint32_t)(l - 1) || got[l][1] != base + (uint32_t)(l - 1))
            return 0;
    return 1;
}

int px__slot_views(cudaGraphicsResource_t res, const pxvm_slot *s, px_gpu_slot *g, cudaArray_t *arrays, cudaStream_t stream,
                   int slot, pxvm_error *err)
{
    for (int attempt = 0; attempt < 4; attempt++) {
        if (attempt) /* the wrong views go; the arrays are fetched again with the new ones */
            for (int l = 0; l < g->levels; l++) {
                cudaDestroyTextureObject(g->tex[l]);
                cudaDestroySurfaceObject(g->surf[l]);
                g->tex[l] = 0, g->surf[l] = 0;
            }
        if (px__slot_views_once(res, s, g, arrays, err) < 0)
            return -1;
        int right = px__views_right(g, arrays, stream, err);
        if (right != 0)
            return right < 0 ? -1 : 0;
    }
    return pxvm_fail(err, PXE_CUDA_VIEWS, -1, -1, slot, s->w, s->h, s->levels);
}
