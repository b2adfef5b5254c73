/* pyramid.cu - the full PYRAMID on the CUDA-GL executor (video.cu has the incremental one): a
 * launch builds up to 7 levels tile by tile in shared memory, each texel isa/px_sem.h's px_box4 over
 * px_pyr_src0/1, as on the CPU executor. run.cu enqueues it through px_gpu_pyramid. */
#include "gpu_slot.cuh"

/* A block builds a tile's levels: SIDE texels wide at the first level it builds, so log2(SIDE)+1
 * levels from a 2*SIDE square of the source level. Large levels use SIDE 64 (7 levels a block,
 * more work per block for its serial chain of levels), small ones SIDE 32 (more blocks). */
#define PX_PYR_SIDE_SMALL 32
#define PX_PYR_SIDE_LARGE 64

/* A texel of level l: through the texture object, or, for a level this launch itself wrote
 * (`fresh`), through the surface (texture caches are not coherent with writes of the same launch). */
static __device__ inline uint32_t px__level_texel(const px_gpu_slot *s, int l, int x, int y, bool fresh)
{
    return fresh ? surf2Dread<uint32_t>(s->surf[l], x * 4, y) : px__texel(s->tex[l], x, y);
}

/* Builds levels L+1 .. L+K of one tile (tile (bx, by) of PX_PYR_SIDE texels at level L+1). Level
 * L+m texel x depends only on level-L texels [x*2^m, (x+1)*2^m) (px_pyr_src1 clamps inside that
 * range), so a tile needs no other tile's data: its levels live in shared memory. */
/* `lin`, when not NULL, is level L as a linear array (an input's upload buffer, which holds exactly
 * its level 0; its width a multiple of 4 so that rows are 16-byte aligned): plain 16-byte global
 * loads then replace the surface loads. */
template <int SIDE>
static __device__ void px__pyr_tile(const px_gpu_slot *s, int L, int K, int bx, int by, bool fresh,
                                    uint32_t (*buf)[SIDE * SIDE], const uint32_t *lin)
{
    const int side = SIDE, pairs = side / 2;
    {
        /* Level L+1, two horizontal neighbours per item. Inside the level a pair reads its 4x2
         * source texels as two 16-byte surface loads (measured faster than eight 4-byte texture
         * fetches); pairs at the borders use the clamped per-texel path. Both compute px_box4
         * over the same texels. */
        int w0 = s->w[L], h0 = s->h[L], w1 = s->w[L + 1], h1 = s->h[L + 1];
#pragma unroll 4
        for (int i = threadIdx.x; i < pairs * side; i += blockDim.x) {
            int lx = 2 * (i % pairs), ly = i / pairs;
            int x = bx * side + lx, y = by * side + ly;
            uint32_t v[2] = {0, 0};
            if (y < h1 && x + 1 < w1 && 2 * x + 3 < w0 && 2 * y + 1 < h0) {
                uint4 a, b;
                if (lin) {
                    a = __ldg((const uint4 *)(lin + (size_t)(2 * y) * (size_t)w0 + (size_t)(2 * x)));
                    b = __ldg((const uint4 *)(lin + (size_t)(2 * y + 1) * (size_t)w0 + (size_t)(2 * x)));
                } else {
                    a = surf2Dread<uint4>(s->surf[L], 2 * x * 4, 2 * y);
                    b = surf2Dread<uint4>(s->surf[L], 2 * x * 4, 2 * y + 1);
                }
                v[0] = px_box4(a.x, a.y, b.x, b.y);
                v[1] = px_box4(a.z, a.w, b.z, b.w);
                surf2Dwrite(make_uint2(v[0], v[1]), s->surf[L + 1], x * 4, y);
            } else if (y < h1) {
                for (int k = 0; k < 2 && x + k < w1; k++) {
                    int xk = x + k;
                    int x0 = px_pyr_src0(xk), x1 = px_pyr_src1(xk, w0), y0 = px_pyr_src0(y), y1 = px_pyr_src1(y, h0);
                    v[k] = px_box4(px__level_texel(s, L, x0, y0, fresh), px__level_texel(s, L, x1, y0, fresh),
                                   px__level_texel(s, L, x0, y1, fresh), px__level_texel(s, L, x1, y1, fresh));
                    px__store(s->surf[L + 1], xk, y, v[k]);
                }
            }
            buf[0][ly * side + lx] = v[0];
            buf[0][ly * side + lx + 1] = v[1];
        }
    }
    for (int m = 2, cur = 1; m <= K; m++, cur ^= 1) {
        __syncthreads();
        int ps = side >> (m - 2), cs = ps >> 1;
        int lp = L + m - 1, wp = s->w[lp], hp = s->h[lp], wc = s->w[lp + 1], hc = s->h[lp + 1];
        int ox = bx * ps, oy = by * ps; /* tile origin at the previous level */
        const uint32_t *prev = buf[cur ^ 1];
        for (int i = threadIdx.x; i < cs * cs; i += blockDim.x) {
            int x = bx * cs + i % cs, y = by * cs + i / cs;
            uint32_t v = 0;
            if (x < wc && y < hc) {
                int x0 = px_pyr_src0(x) - ox, x1 = px_pyr_src1(x, wp) - ox;
                int y0 = px_pyr_src0(y) - oy, y1 = px_pyr_src1(y, hp) - oy;
                v = px_box4(prev[y0 * ps + x0], prev[y0 * ps + x1], prev[y1 * ps + x0], prev[y1 * ps + x1]);
                px__store(s->surf[lp + 1], x, y, v);
            }
            buf[cur][i] = v;
        }
    }
}

/* Levels L+1 .. L+K, tile by tile; then, when tail > 0, the last block to finish builds levels
 * L+K+1 .. L+K+tail from level L+K (at most 2*SIDE square, one tile), in the same launch. */
/* 8 blocks of 256 threads per SM: at 48 registers (unbounded) only 5 fit (ncu: 62.5% occupancy,
 * 46% of cycles with no eligible warp). */
template <int SIDE>
__global__ void __launch_bounds__(256, SIDE == PX_PYR_SIDE_SMALL ? 8 : 4)
    px__k_pyramid(const px_gpu_slot *slots, int nslots, int slot, int L, int K, int tail, unsigned *counters,
                  const uint32_t *lin_all, size_t lin_item)
{
    __shared__ uint32_t buf[2][SIDE * SIDE];
    __shared__ bool last;
    const px_gpu_slot *s = &slots[(size_t)blockIdx.z * (size_t)nslots + (size_t)slot]; /* this item's slot */
    unsigned *counter = counters + blockIdx.z;
    const uint32_t *lin = lin_all ? lin_all + (size_t)blockIdx.z * lin_item : NULL;
    px__pyr_tile<SIDE>(s, L, K, blockIdx.x, blockIdx.y, false, buf, lin);
    if (!tail)
        return;
    __threadfence(); /* this block's level L+K texels are visible to every block */
    __syncthreads();
    if (threadIdx.x == 0)
        last = atomicAdd(counter, 1u) == gridDim.x * gridDim.y - 1;
    __syncthreads();
    if (!last)
        return;
    __threadfence();
    px__pyr_tile<SIDE>(s, L + K, tail, 0, 0, true, buf, NULL);
    if (threadIdx.x == 0)
        *counter = 0; /* ready for the next launch */
}

/* Up to 7 (6) levels per launch; once the rest fits one tile, it is the launch's tail. */
cudaError_t px_gpu_pyramid(const px_gpu_slot *d_slots, int nslots, const px_gpu_slot *g, int k, const uint32_t *lin0,
                           unsigned *counters, int items, cudaStream_t stream)
{
    for (int L = 0; L + 1 < g->levels;) {
        int large = (long long)g->w[L + 1] * g->h[L + 1] >= 1024LL * 1024;
        int side = large ? PX_PYR_SIDE_LARGE : PX_PYR_SIDE_SMALL, per = large ? 7 : 6;
        int K = g->levels - 1 - L < per ? g->levels - 1 - L : per;
        int rest = g->levels - 1 - L - K;
        int tail = rest > 0 && g->w[L + K] <= 2 * side && g->h[L + K] <= 2 * side ? rest : 0;
        dim3 grid((unsigned)((g->w[L + 1] + side - 1) / side), (unsigned)((g->h[L + 1] + side - 1) / side), (unsigned)items);
        /* an input's level 0 is also in its linear upload buffer (inputs are read-only) */
        const uint32_t *lin = L == 0 && lin0 && (g->w[0] & 3) == 0 ? lin0 : NULL;
        size_t lin_item = (size_t)g->w[0] * (size_t)g->h[0];
        if (large)
            px__k_pyramid<PX_PYR_SIDE_LARGE><<<grid, 256, 0, stream>>>(d_slots, nslots, k, L, K, tail, counters, lin, lin_item);
        else
            px__k_pyramid<PX_PYR_SIDE_SMALL><<<grid, 256, 0, stream>>>(d_slots, nslots, k, L, K, tail, counters, lin, lin_item);
        L += K + tail;
    }
    return cudaGetLastError();
}
