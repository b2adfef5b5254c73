/* fetch.cu - SAMPLE, ANISO and GATHER on the CUDA-GL executor: one launch per plan step of
 * independent fetches, every item, each texel isa/px_sem.h's px_sample / px_sample_aniso; an
 * incremental fetch decides here, on the device, whether its patch is sampled again. */
#include "gpu_slot.cuh"

/* A batch of SAMPLE/GATHER: blockIdx.x picks the instruction, the y blocks share its pixels. */
/* fix: [items][8][2] registers of the run; geom: [items][ngeom][PX_GEOM_INTS] token geometry.
 * An incremental instruction (f.mask) decides, in its one block, whether it samples: on an
 * unprimed item, when its register moved, or when a dirty tile lies in its footprint box (the
 * threads scan the box together); otherwise its patch keeps its bytes. */
/* fuse: [nslots] where a fused EMBED's atlas is written instead (embed_fuse.h), read per block. */
__global__ void px__k_fetch(const px_gpu_slot *all_slots, int nslots, const px_gpu_fetch *batch, const int32_t *fix,
                            int32_t *geom, int ngeom, px_gpu_video vid, const px_emb_fuse *fuse)
{
    px_gpu_fetch f = batch[blockIdx.x];
    const px_gpu_slot *slots = all_slots + (size_t)blockIdx.z * (size_t)nslots; /* this item's slots */
    const px_gpu_slot *src = &slots[f.src];
    cudaSurfaceObject_t out = slots[f.dst].surf[0];
    int64_t fx = 0, fy = 0; /* the fixation offset of a relative instruction */
    if (f.reg >= 0) {
        fx = fix[(size_t)blockIdx.z * PX_FIX_REGS * 2u + 2u * (unsigned)f.reg];
        fy = fix[(size_t)blockIdx.z * PX_FIX_REGS * 2u + 2u * (unsigned)f.reg + 1u];
    }
    int64_t cu = f.cu + fx, cv = f.cv + fy;
    if (f.mask) { /* launched with one block per instruction: the block's decision is final */
        int hit = 0;
        if (threadIdx.x == 0) { /* unprimed, or the register moved (while the others scan the box) */
            hit = !vid.primed[blockIdx.z];
            if (f.reg >= 0) {
                int32_t *last = vid.last_reg + ((size_t)blockIdx.z * (size_t)vid.ninsns + (size_t)f.index) * 2u;
                hit |= last[0] != (int32_t)fx || last[1] != (int32_t)fy;
                last[0] = (int32_t)fx, last[1] = (int32_t)fy;
            }
        }
        { /* the footprint box's rows, one per thread, through the mask's row bitmaps */
            px_tilebox b = px_footprint_tiles(f.u_lo + fx, f.u_hi + fx, f.v_lo + fy, f.v_hi + fy, f.lmin, f.lmax, f.mode,
                                              src->w[0], src->h[0]);
            const uint32_t *bits = f.bits + f.bits_item * blockIdx.z;
            for (int r = b.y0 + (int)threadIdx.x; b.x0 <= b.x1 && r <= b.y1 && !hit; r += blockDim.x)
                hit = px_gpu_row_dirty(bits + (size_t)r * (size_t)f.wpr, b.x0, b.x1);
        }
        int sample = __syncthreads_or(hit);
        if (f.token >= 0 && threadIdx.x == 0)
            vid.changed[(size_t)blockIdx.z * (size_t)ngeom + (size_t)f.token] = (uint8_t)sample;
        if (!sample)
            return;
    } else if (f.token >= 0 && blockIdx.y == 0 && threadIdx.x == 0) {
        vid.changed[(size_t)blockIdx.z * (size_t)ngeom + (size_t)f.token] = 1;
    }
    /* launched early after the tile kernels (px__enqueue): the decision above read only their
     * output (they have ended); the texels below may be the group kernel's */
    px_gpu_wait_previous();
    if (f.token >= 0 && blockIdx.y == 0 && threadIdx.x == 0) {
        int32_t *g = geom + ((size_t)blockIdx.z * (size_t)ngeom + (size_t)f.token) * PX_GEOM_INTS;
        if (f.op == PX_OP_GATHER) { /* the centre entry's position and LOD */
            cudaTextureObject_t t = slots[f.table].tex[0];
            int ex = f.tx + 3 * (f.w / 2), ey = f.ty + f.h / 2;
            px_geom_write(g, px_entry_q16(px__texel(t, ex, ey)) + fx, px_entry_q16(px__texel(t, ex + 1, ey)) + fy, 0, 0,
                          px_lod_used(px_entry_lod(px__texel(t, ex + 2, ey)), f.mode, src->levels));
        } else {
            px_geom_write(g, cu, cv, f.du, f.dv, px_lod_used(f.lod, f.mode, src->levels));
        }
    }
    px_emb_fuse fz = fuse[f.dst];
    int n = f.w * f.h;
    for (int p = blockIdx.y * blockDim.x + threadIdx.x; p < n; p += gridDim.y * blockDim.x) {
        int i = p % f.w, j = p / f.w;
        uint32_t v;
        if (f.op == PX_OP_SAMPLE) {
            v = px_sample(src, cu + px_patch_pos(0, f.du, i, f.w), cv + px_patch_pos(0, f.dv, j, f.h), f.lod, f.mode);
        } else if (f.op == PX_OP_ANISO) {
            v = px_sample_aniso(src, cu + px_patch_pos(0, f.du, i, f.w), cv + px_patch_pos(0, f.dv, j, f.h), f.lod, f.mode,
                                f.taps, f.tdu, f.tdv);
        } else {
            cudaTextureObject_t t = slots[f.table].tex[0];
            int ex = f.tx + 3 * i, ey = f.ty + j;
            v = px_sample(src, px_entry_q16(px__texel(t, ex, ey)) + fx, px_entry_q16(px__texel(t, ex + 1, ey)) + fy,
                          px_entry_lod(px__texel(t, ex + 2, ey)), f.mode);
        }
        if (fz.tok) /* a fused EMBED's atlas: the token's bytes straight into its staged row */
            px_emb_fused_store(&fz, (int)blockIdx.z, f.x + i, f.y + j, v);
        else
            px__store(out, f.x + i, f.y + j, v);
    }
}

/* One step's batch; `early`: started before the launch ahead of it ends (px_gpu_early_config). */
cudaError_t px_gpu_fetch_step(const px_gpu_slot *d_slots, int nslots, const px_gpu_fetch *batch, dim3 grid, const int32_t *fix,
                              int32_t *geom, int ngeom, px_gpu_video vid, const px_emb_fuse *fuse, cudaStream_t stream,
                              int early)
{
    cudaLaunchAttribute attr;
    cudaLaunchConfig_t cfg = px_gpu_early_config(grid, dim3(256), stream, &attr);
    cfg.numAttrs = early ? 1 : 0;
    return cudaLaunchKernelEx(&cfg, px__k_fetch, d_slots, nslots, batch, fix, geom, ngeom, vid, fuse);
}
