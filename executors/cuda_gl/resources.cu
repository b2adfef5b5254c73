/* resources.cu - the CUDA-GL executor's load and unload: a GL texture per slot and item with its
 * mip chain (slot_storage.cu makes it and its views), mapped for CUDA once, device buffers and plan
 * records, and the clear kernel that zeroes levels (at load, every run, restart). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "executor.cuh"

/* skip: NULL, or where the fetches into each slot write instead (a fused atlas's level 0 stays) */
__global__ void px__k_clear(const px_gpu_rect *rects, const px_emb_fuse *skip)
{
    const px_gpu_rect r = rects[blockIdx.y];
    if (skip && r.level == 0 && skip[r.slot].tok)
        return;
    for (int p = blockIdx.x * blockDim.x + threadIdx.x; p < r.w * r.h; p += gridDim.x * blockDim.x)
        px__store(r.surf, p % r.w, p / r.w, 0);
}

int px__need_program(const pxvm_executor *ex, const char *op, pxvm_error *err)
{
    if (ex->prog)
        return 0;
    return pxvm_fail(err, PXE_CUDA_NO_PROGRAM, -1, -1, op);
}

void px__graphs_drop(cudaGraphExec_t *graph, cudaGraph_t *graph_def, px_gpu_frame_nodes **frame_nodes, int *have_graph)
{
    for (int g = 0; g < 2; g++) {
        if (have_graph[g]) {
            cudaGraphExecDestroy(graph[g]);
            cudaGraphDestroy(graph_def[g]);
        }
        free(frame_nodes[g]);
        frame_nodes[g] = NULL;
        have_graph[g] = 0;
    }
}

void px__gl_unload(pxvm_executor *ex)
{
    if (!ex->prog)
        return;
    px__make_current(ex);
    int n = ex->nslots, all = ex->nslots * ex->batch;
    cudaStreamSynchronize(ex->stream);
    if (ex->rt_free) /* the cached sizes (retarget.cu's); what is in use is freed below */
        ex->rt_free(ex);
    px__graphs_drop(ex->graph, ex->graph_def, ex->frame_nodes, ex->have_graph);
    ex->capture_later = 0;
    if (ex->slots)
        for (int i = 0; i < all; i++)
            for (int l = 0; l < ex->slots[i].levels; l++) {
                if (ex->slots[i].tex[l])
                    cudaDestroyTextureObject(ex->slots[i].tex[l]);
                if (ex->slots[i].surf[l])
                    cudaDestroySurfaceObject(ex->slots[i].surf[l]);
            }
    if (ex->mapped)
        cudaGraphicsUnmapResources(all, ex->res, ex->stream);
    ex->mapped = 0;
    for (int i = 0; ex->res && i < all; i++)
        if (ex->res[i])
            cudaGraphicsUnregisterResource(ex->res[i]);
    if (ex->gl_tex)
        glDeleteTextures(all, ex->gl_tex);
    for (int k = 0; ex->staging && k < n; k++) {
        if (ex->staging[k])
            cudaFreeHost(ex->staging[k]);
        if (ex->d_staging[k])
            cudaFree(ex->d_staging[k]);
        if (ex->h_out && ex->h_out[k])
            cudaFreeHost(ex->h_out[k]);
    }
    cudaFree(ex->d_slots);
    cudaFree(ex->d_fetch);
    cudaFree(ex->d_clear);
    cudaFree(ex->d_prog);
    cudaFree(ex->d_status);
    if (ex->d_fix_run != ex->d_fix_set)
        cudaFree(ex->d_fix_run);
    cudaFree(ex->d_fix_set);
    cudaFree(ex->d_geom);
    cudaFree(ex->d_primed);
    cudaFree(ex->d_changed);
    cudaFree(ex->d_dirty);
    cudaFree(ex->d_last_reg);
    for (int k = 0; ex->d_bits && k < ex->nslots; k++)
        cudaFree(ex->d_bits[k]), cudaFree(ex->d_dmap[k]), cudaFree(ex->d_sync[k]);
    free(ex->d_bits);
    free(ex->d_dmap);
    free(ex->d_sync);
    ex->d_bits = NULL;
    ex->d_dmap = NULL;
    ex->d_sync = NULL;
    for (int k = 0; ex->d_upload && k < ex->nslots; k++)
        for (int t = 0; t < 2; t++) {
            cudaFree(ex->d_upload[k][t]);
            if (ex->up_done[k][t])
                cudaEventDestroy(ex->up_done[k][t]), cudaEventDestroy(ex->up_free[k][t]);
        }
    free(ex->d_upload);
    free(ex->up_done);
    free(ex->up_free);
    free(ex->up_turn);
    free(ex->h_rects);
    free(ex->h_nrects);
    free(ex->h_primed);
    ex->h_primed = NULL;
    ex->h_rects = NULL;
    ex->h_nrects = NULL;
    ex->d_upload = NULL;
    ex->up_done = ex->up_free = NULL;
    ex->up_turn = NULL;
    ex->d_primed = ex->d_changed = NULL;
    ex->d_dirty = NULL;
    ex->d_last_reg = NULL;
    ex->d_fix_set = ex->d_fix_run = ex->d_geom = NULL;
    for (uint32_t i = 0; ex->resize && i < ex->resize_n; i++)
        px_gpu_resize_free(ex->resize[i]);
    free(ex->resize);
    ex->resize = NULL;
    ex->resize_n = 0;
    for (uint32_t i = 0; ex->embed && i < ex->embed_n; i++)
        px_gpu_embed_free(ex->embed[i]);
    free(ex->embed);
    ex->embed = NULL;
    ex->embed_n = 0;
    free(ex->fused);
    free(ex->h_fuse);
    cudaFree(ex->d_fuse);
    ex->fused = NULL, ex->h_fuse = NULL, ex->d_fuse = NULL, ex->fuse_dp4a = 0;
    cudaFree(ex->d_counter);
    cudaFreeHost(ex->h_status);
    free(ex->gl_tex);
    free(ex->res);
    free(ex->slots);
    free(ex->arrays);
    free(ex->bound);
    free(ex->staging);
    free(ex->d_staging);
    free(ex->frame_src);
    free(ex->h_out);
    free(ex->step_blocks);
    ex->step_blocks = NULL;
    ex->d_staging = NULL;
    ex->frame_src = NULL;
    ex->h_out = NULL;
    ex->out_valid = 0;
    ex->gl_tex = NULL, ex->res = NULL, ex->slots = NULL, ex->arrays = NULL, ex->bound = NULL, ex->staging = NULL;
    ex->d_slots = NULL, ex->d_fetch = NULL, ex->d_clear = NULL, ex->d_prog = NULL;
    ex->d_status = NULL, ex->d_counter = NULL, ex->h_status = NULL;
    ex->prog = NULL;
}

/* Clear records for levels [l0, l1) of table entry i (item * nslots + slot). */
void px__add_clear(pxvm_executor *ex, px_gpu_rect *rects, int i, int l0, int l1)
{
    const px_gpu_slot *s = &ex->slots[i];
    for (int l = l0; l < l1; l++) {
        rects[ex->nclear].surf = s->surf[l];
        rects[ex->nclear].w = s->w[l];
        rects[ex->nclear].h = s->h[l];
        rects[ex->nclear].slot = i % ex->nslots, rects[ex->nclear].level = l;
        if (s->w[l] * s->h[l] > ex->max_clear_px)
            ex->max_clear_px = s->w[l] * s->h[l];
        ex->nclear++;
    }
}

int px__launch_clear(pxvm_executor *ex, const px_gpu_rect *d_rects, int n, int max_px, pxvm_error *err)
{
    if (n == 0)
        return 0;
    int bx = (max_px + 255) / 256;
    dim3 grid((unsigned)(bx < 256 ? bx : 256), (unsigned)n);
    px__k_clear<<<grid, 256, 0, ex->stream>>>(d_rects, NULL);
    PX__CK(cudaGetLastError());
    return 0;
}

int px__launch_reset(pxvm_executor *ex, pxvm_error *err)
{
    if (ex->nclear == 0)
        return 0;
    int bx = (ex->max_clear_px + 255) / 256;
    dim3 grid((unsigned)(bx < 256 ? bx : 256), (unsigned)ex->nclear);
    px__k_clear<<<grid, 256, 0, ex->stream>>>(ex->d_clear, ex->d_fuse);
    PX__CK(cudaGetLastError());
    return 0;
}

/* Row bitmaps, group maps and counters for every slot the loaded program uses as a tile mask
 * (those made already are kept: retarget calls it again for the next program). */
int px__alloc_masks(pxvm_executor *ex, pxvm_error *err)
{
    const pxvm_program *prog = ex->prog;
    size_t batch = (size_t)ex->batch;
    if (!ex->d_bits) {
        ex->d_bits = (uint32_t **)calloc((size_t)prog->nslots, sizeof(uint32_t *));
        ex->d_dmap = (uint8_t **)calloc((size_t)prog->nslots, sizeof(uint8_t *));
        ex->d_sync = (unsigned **)calloc((size_t)prog->nslots, sizeof(unsigned *));
    }
    if (!ex->d_bits || !ex->d_dmap || !ex->d_sync)
        return pxvm_fail(err, PXE_NOMEM, -1, -1, 0ull);
    for (uint32_t i = 0; i < prog->ninsns; i++) {
        const pxi_insn *in = &prog->insns[i];
        int plan = pxi_facts(in->op)->plan; /* DIFF's and UPDATE's mask, or a MASK operand (PYRAMID, fetches) */
        int m = plan == PXP_DIFF || plan == PXP_UPDATE ? in->a[PX_FI(DIFF, mask)] : pxi_mask_of(in);
        if (m && !ex->d_bits[m]) {
            int tw = prog->slots[m].w, th = prog->slots[m].h;
            PX__CK(cudaMalloc(&ex->d_bits[m], sizeof(uint32_t) * (size_t)px_gpu_words(tw) * (size_t)th * batch));
            PX__CK(cudaMalloc(&ex->d_dmap[m], px_gpu_tiles_scratch(tw, th) * batch));
            PX__CK(cudaMalloc(&ex->d_sync[m], sizeof(unsigned) * batch));
            PX__CK(cudaMemsetAsync(ex->d_sync[m], 0, sizeof(unsigned) * batch, ex->stream));
        }
    }
    return 0;
}

/* The fetch kernel's records of the loaded program's instructions into fetch (ninsns of them,
 * zeroed by the caller) and each plan step's y blocks into step_blocks (nsteps): host work only,
 * shared by load and retarget (which writes them straight into its upload's staging block). */
void px__fetch_fill(const pxvm_executor *ex, px_gpu_fetch *fetch, unsigned *step_blocks)
{
    const pxvm_program *prog = ex->prog;
    /* SAMPLE/GATHER records, one per instruction, so a batch is a contiguous range */
    for (uint32_t i = 0; i < prog->ninsns; i++) {
        const pxi_insn *in = &prog->insns[i];
        if (in->op != PX_OP_SAMPLE && in->op != PX_OP_ANISO && in->op != PX_OP_GATHER)
            continue;
        px_gpu_fetch *f = &fetch[i];
        f->op = in->op;
        f->src = in->a[PX_FI(SAMPLE, src)], f->dst = in->a[PX_FI(SAMPLE, dst)];
        f->mode = px_mode_filter(in->a[PX_FI(SAMPLE, mode)]), f->reg = px_mode_reg(in->a[PX_FI(SAMPLE, mode)]);
        f->token = prog->insn_token[i];
        f->mask = pxvm_fetch_mask(in);
        f->index = (int)i;
        if (f->mask) {
            f->bits = ex->d_bits[f->mask];
            f->wpr = px_gpu_words(prog->slots[f->mask].w);
            f->bits_item = (size_t)f->wpr * (size_t)prog->slots[f->mask].h;
            px__fetch_box(prog, i, f);
        }
        f->x = in->a[PX_FI(SAMPLE, dst_x)], f->y = in->a[PX_FI(SAMPLE, dst_y)];
        f->w = in->a[PX_FI(SAMPLE, w)], f->h = in->a[PX_FI(SAMPLE, h)];
        if (in->op == PX_OP_SAMPLE || in->op == PX_OP_ANISO) {
            f->taps = in->op == PX_OP_ANISO ? PX_ARG(in, ANISO, taps) : 1;
            px__fetch_rescaled(prog, i, f);
        } else {
            f->table = PX_ARG(in, GATHER, table), f->tx = PX_ARG(in, GATHER, table_x), f->ty = PX_ARG(in, GATHER, table_y);
        }
    }
    /* each fetch launch gets y blocks for its own largest patch, decided here, not per run */
    for (uint32_t si = 0; si < prog->nsteps; si++) {
        int most = 0, incremental = 0;
        for (uint32_t i = prog->steps[si].first; i < prog->steps[si].first + prog->steps[si].count; i++) {
            most = fetch[i].w * fetch[i].h > most ? fetch[i].w * fetch[i].h : most;
            incremental |= fetch[i].mask != 0;
        }
        int by = incremental ? 1 : (most + 255) / 256; /* an incremental decision is one block's */
        step_blocks[si] = (unsigned)(by < 1 ? 1 : (by < 64 ? by : 64));
    }
}

/* An incremental fetch's (SAMPLE, ANISO or GATHER with a tile mask) footprint box, decided at
 * load (vm/launch_plan.c). */
void px__fetch_box(const pxvm_program *prog, uint32_t i, px_gpu_fetch *f)
{
    const pxvm_fetch_box *b = &prog->insn_box[i];
    f->u_lo = b->u_lo, f->u_hi = b->u_hi, f->v_lo = b->v_lo, f->v_hi = b->v_hi, f->lmin = b->lmin, f->lmax = b->lmax;
}

/* The fields of SAMPLE or ANISO instruction i's record that a resolution of an any-size program
 * rescales (SPEC V-ANY-6: cu, cv, du, dv, lod, tdu, tdv). */
void px__fetch_rescaled(const pxvm_program *prog, uint32_t i, px_gpu_fetch *f)
{
    const pxi_insn *in = &prog->insns[i];
    /* ANISO shares SAMPLE's layout up to lod */
    f->cu = PX_ARG(in, SAMPLE, cu), f->cv = PX_ARG(in, SAMPLE, cv);
    f->du = PX_ARG(in, SAMPLE, du), f->dv = PX_ARG(in, SAMPLE, dv);
    f->lod = (uint32_t)PX_ARG(in, SAMPLE, lod);
    f->tdu = in->op == PX_OP_ANISO ? PX_ARG(in, ANISO, tdu) : 0;
    f->tdv = in->op == PX_OP_ANISO ? PX_ARG(in, ANISO, tdv) : 0;
}

/* The fetch kernel's records (into *d_fetch, allocated here, uploaded on the stream) and each
 * plan step's y blocks (*step_blocks, host): at load. */
int px__fetch_records(pxvm_executor *ex, px_gpu_fetch **d_fetch, unsigned **step_blocks, pxvm_error *err)
{
    const pxvm_program *prog = ex->prog;
    px_gpu_fetch *fetch = (px_gpu_fetch *)calloc(prog->ninsns ? prog->ninsns : 1, sizeof(px_gpu_fetch));
    *step_blocks = (unsigned *)calloc(prog->nsteps ? prog->nsteps : 1, sizeof(unsigned));
    if (!fetch || !*step_blocks) {
        free(fetch);
        return pxvm_fail(err, PXE_NOMEM, -1, -1, 0ull);
    }
    px__fetch_fill(ex, fetch, *step_blocks);
    cudaError_t e = cudaMalloc(d_fetch, sizeof(px_gpu_fetch) * prog->ninsns);
    /* pageable: copied to staging memory before the call returns, so fetch may be freed */
    if (e == cudaSuccess)
        e = cudaMemcpyAsync(*d_fetch, fetch, sizeof(px_gpu_fetch) * prog->ninsns, cudaMemcpyHostToDevice, ex->stream);
    free(fetch);
    if (e != cudaSuccess)
        return px__cuda_fail(err, "uploading the launch plan", e, __FILE__, __LINE__);
    return 0;
}

/* The per-run reset's clear records (what prog->reset marks; inputs and data never change) for the
 * slots' current surfaces into rects (room for every level of every table entry): host work only,
 * counted into *nclear and *max_px. */
void px__reset_fill(pxvm_executor *ex, px_gpu_rect *rects, int *nclear, int *max_px)
{
    const pxvm_program *prog = ex->prog;
    int n = ex->nslots, all = n * ex->batch;
    int keep_n = ex->nclear, keep_px = ex->max_clear_px; /* px__add_clear counts into these */
    ex->nclear = ex->max_clear_px = 0;
    for (int i = 0; i < all; i++) {
        int k = i % n;
        uint8_t r = prog->reset[k];
        if ((r & PXVM_RESET_LEVEL0) && k != 0)
            px__add_clear(ex, rects, i, 0, 1);
        if (r & PXVM_RESET_UPPER)
            px__add_clear(ex, rects, i, 1, ex->slots[i].levels);
    }
    int got_n = ex->nclear, got_px = ex->max_clear_px;
    ex->nclear = keep_n, ex->max_clear_px = keep_px;
    *nclear = got_n, *max_px = got_px;
}

/* Clear records made by fill (host work: arg is its own) into room for every level of every table
 * entry, then uploaded into *d (allocated here, NULL when there is none) on the stream; `what`
 * names the upload in an error. The per-run reset's at load, retarget's wipe and rest at the
 * first retarget. */
int px__rect_records(pxvm_executor *ex, px_rect_fill fill, void *arg, px_gpu_rect **d, int *n, int *max_px,
                     const char *what, pxvm_error *err)
{
    int all = ex->nslots * ex->batch, total = 0;
    for (int i = 0; i < all; i++)
        total += ex->slots[i].levels;
    px_gpu_rect *rects = (px_gpu_rect *)calloc((size_t)(total ? total : 1), sizeof(px_gpu_rect));
    if (!rects)
        return pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)(total ? total : 1) * sizeof(px_gpu_rect));
    fill(ex, rects, n, max_px, arg);
    *d = NULL;
    cudaError_t e = cudaSuccess;
    if (*n) {
        e = cudaMalloc(d, sizeof(px_gpu_rect) * (size_t)*n);
        if (e == cudaSuccess) /* pageable: staged before the call returns */
            e = cudaMemcpyAsync(*d, rects, sizeof(px_gpu_rect) * (size_t)*n, cudaMemcpyHostToDevice, ex->stream);
    }
    free(rects);
    if (e != cudaSuccess)
        return px__cuda_fail(err, what, e, __FILE__, __LINE__);
    return 0;
}

static void px__reset_fill_records(pxvm_executor *ex, px_gpu_rect *rects, int *n, int *max_px, void *arg)
{
    (void)arg;
    px__reset_fill(ex, rects, n, max_px);
}

/* The same records uploaded: into *d_clear (allocated here, NULL when there is none), on the
 * stream; at load. */
int px__reset_records(pxvm_executor *ex, px_gpu_rect **d_clear, int *nclear, int *max_px, pxvm_error *err)
{
    return px__rect_records(ex, px__reset_fill_records, NULL, d_clear, nclear, max_px, "uploading reset records", err);
}

/* A table of one record per instruction (RESIZE's, EMBED's), made at its first record. */
template <class T> static int px__per_insn(T ***table, uint32_t *n, uint32_t ninsns, pxvm_error *err)
{
    if (!*table) {
        *table = (T **)calloc(ninsns, sizeof(T *));
        if (!*table)
            return pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)ninsns * sizeof(T *));
        *n = ninsns;
    }
    return 0;
}

int px__gl_load(pxvm_executor *ex, const pxvm_program *prog, int batch, pxvm_error *err)
{
    if (ex->prog)
        px__gl_unload(ex);
    PX__CK(cudaSetDevice(ex->device));
    px__make_current(ex);
    cudaGetLastError(); /* an error left by other code on this thread is not this load's */
    /* the memory it needs, checked before anything is allocated: a clear error, not a failed
     * allocation halfway (slots with their mip chains, and the inputs' linear copies) */
    unsigned long long need = (unsigned long long)prog->memory;
    for (int k = 0; k < prog->nslots; k++)
        if (prog->slots[k].role == PXI_ROLE_INPUT)
            need += 4ull * (unsigned long long)prog->slots[k].w * (unsigned long long)prog->slots[k].h;
    need *= (unsigned long long)batch;
    size_t free_b = 0, total_b = 0;
    PX__CK(cudaMemGetInfo(&free_b, &total_b));
    if (need > free_b)
        return pxvm_fail(err, PXE_CUDA_MEMORY, -1, -1, need, batch, batch == 1 ? "" : "s", ex->device,
                         (unsigned long long)free_b, (unsigned long long)total_b);
    ex->prog = prog;
    ex->batch = batch;
    int n = ex->nslots = prog->nslots, all = n * batch;
    ex->has_dot = 0;
    for (uint32_t i = 0; i < prog->ninsns; i++)
        ex->has_dot |= pxi_facts(prog->insns[i].op)->plan == PXP_TRAP; /* DOT_RGB */
    ex->gl_tex = (GLuint *)calloc((size_t)all, sizeof(GLuint));
    ex->res = (cudaGraphicsResource_t *)calloc((size_t)all, sizeof(cudaGraphicsResource_t));
    ex->slots = (px_gpu_slot *)calloc((size_t)all, sizeof(px_gpu_slot));
    ex->arrays = (cudaArray_t *)calloc((size_t)all * PXVM_MAX_LEVELS, sizeof(cudaArray_t));
    ex->bound = (uint8_t *)calloc((size_t)all, 1);
    ex->staging = (uint8_t **)calloc((size_t)n, sizeof(uint8_t *));
    ex->d_staging = (uint8_t **)calloc((size_t)n, sizeof(uint8_t *));
    ex->frame_src = (const uint8_t **)calloc((size_t)n, sizeof(uint8_t *));
    ex->h_out = (uint8_t **)calloc((size_t)n, sizeof(uint8_t *));
    ex->out_valid = 0;
    if (!ex->h_out || !ex->d_staging || !ex->frame_src || !ex->gl_tex || !ex->res || !ex->slots || !ex->arrays || !ex->bound || !ex->staging)
        return pxvm_fail(err, PXE_NOMEM, -1, -1, 0ull);
    PX__CK(cudaMalloc(&ex->d_status, sizeof(px_gpu_status) * (size_t)batch));
    /* load-time uploads and memsets go on the executor's stream too: the legacy stream's are not
     * ordered with its non-blocking stream (a pageable cudaMemcpy may return before its DMA ends) */
    PX__CK(cudaMemsetAsync(ex->d_status, 0xFF, sizeof(px_gpu_status) * (size_t)batch, ex->stream)); /* no trap */
    PX__CK(cudaMalloc(&ex->d_counter, sizeof(unsigned) * (size_t)batch));
    PX__CK(cudaMemsetAsync(ex->d_counter, 0, sizeof(unsigned) * (size_t)batch, ex->stream));
    PX__CK(cudaHostAlloc(&ex->h_status, sizeof(px_gpu_status) * (size_t)batch, cudaHostAllocDefault));
    /* the fetch kernel's fuse table: every slot written as itself until pxvm_runner_fuse_embed */
    ex->h_fuse = (px_emb_fuse *)calloc((size_t)n, sizeof(px_emb_fuse));
    if (!ex->h_fuse)
        return pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)n * sizeof(px_emb_fuse));
    PX__CK(cudaMalloc(&ex->d_fuse, sizeof(px_emb_fuse) * (size_t)n));
    PX__CK(cudaMemsetAsync(ex->d_fuse, 0, sizeof(px_emb_fuse) * (size_t)n, ex->stream));
    {
        size_t fix_bytes = sizeof(int32_t) * PX_FIX_REGS * 2u * (size_t)batch;
        size_t ngeom = (size_t)prog->ngeom * (size_t)batch;
        PX__CK(cudaMalloc(&ex->d_fix_set, fix_bytes));
        PX__CK(cudaMemsetAsync(ex->d_fix_set, 0, fix_bytes, ex->stream));
        ex->d_fix_run = ex->d_fix_set;
        if (prog->writes_fixation)
            PX__CK(cudaMalloc(&ex->d_fix_run, fix_bytes));
        int32_t *g = (int32_t *)malloc(sizeof(int32_t) * PX_GEOM_INTS * (ngeom ? ngeom : 1));
        if (!g)
            return pxvm_fail(err, PXE_NOMEM, -1, -1, 0ull);
        pxvm_geometry_clear(g, ngeom);
        cudaError_t ge = cudaMalloc(&ex->d_geom, sizeof(int32_t) * PX_GEOM_INTS * (ngeom ? ngeom : 1));
        if (ge == cudaSuccess)
            ge = cudaMemcpyAsync(ex->d_geom, g, sizeof(int32_t) * PX_GEOM_INTS * ngeom, cudaMemcpyHostToDevice, ex->stream);
        free(g);
        if (ge == cudaSuccess)
            ge = cudaMalloc(&ex->d_primed, (size_t)batch);
        if (ge == cudaSuccess)
            ge = cudaMalloc(&ex->d_changed, ngeom ? ngeom : 1);
        if (ge == cudaSuccess)
            ge = cudaMalloc(&ex->d_dirty, sizeof(px_gpu_dirty) * (size_t)batch);
        if (ge == cudaSuccess)
            ge = cudaMalloc(&ex->d_last_reg, sizeof(int32_t) * 2u * prog->ninsns * (size_t)batch);
        if (ge == cudaSuccess)
            ge = cudaMemsetAsync(ex->d_changed, 0, ngeom ? ngeom : 1, ex->stream);
        if (ge != cudaSuccess)
            return px__cuda_fail(err, "allocating fixation registers, token geometry and video state", ge, __FILE__,
                                 __LINE__);
        px__video_end(ex); /* dirty rectangles: none */
        if (px__alloc_masks(ex, err) < 0)
            return -1;
        PX__CK(cudaMemsetAsync(ex->d_primed, 0, (size_t)batch, ex->stream));
    }

    /* storage: GL textures with full chains, registered once, mapped until close */
    glGenTextures(all, ex->gl_tex);
    for (int i = 0; i < all; i++)
        if (px__slot_texture(ex->gl_tex[i], &ex->res[i], &prog->slots[i % n], i % n, i / n, err) < 0)
            return -1;
    PX__CK(cudaGraphicsMapResources(all, ex->res, ex->stream));
    ex->mapped = 1;
    for (int i = 0; i < all; i++)
        if (px__slot_views(ex->res[i], &prog->slots[i % n], &ex->slots[i], &ex->arrays[(size_t)i * PXVM_MAX_LEVELS],
                           ex->stream, i % n, err) < 0)
            return -1;
    for (int k = 0; k < n; k++) {
        const pxvm_slot *s = &prog->slots[k];
        size_t bytes = (size_t)s->w * (size_t)s->h * 4u * (size_t)batch;
        if (s->role == PXI_ROLE_INPUT) { /* zeros, as the slot, until bound (a frame-only input lives here) */
            PX__CK(cudaMalloc(&ex->d_staging[k], bytes));
            PX__CK(cudaMemsetAsync(ex->d_staging[k], 0, bytes, ex->stream));
        }
        if (s->role == PXI_ROLE_OUTPUT)
            PX__CK(cudaHostAlloc(&ex->h_out[k], bytes, cudaHostAllocDefault));
    }
    PX__CK(cudaMalloc(&ex->d_slots, sizeof(px_gpu_slot) * (size_t)all));
    PX__CK(cudaMemcpyAsync(ex->d_slots, ex->slots, sizeof(px_gpu_slot) * (size_t)all, cudaMemcpyHostToDevice, ex->stream));

    if (px__fetch_records(ex, &ex->d_fetch, &ex->step_blocks, err) < 0)
        return -1;

    /* RESIZE's tables and buffers and EMBED's packed weights and staging rows, made once here (a
     * run, or a graph, only launches) */
    for (uint32_t i = 0; i < prog->ninsns; i++) {
        int op = prog->insns[i].op;
        if (op == PX_OP_RESIZE && (px__per_insn(&ex->resize, &ex->resize_n, prog->ninsns, err) < 0 ||
                                   px_gpu_resize_make(prog, &prog->insns[i], batch, ex->stream, &ex->resize[i], err) < 0))
            return -1;
        if (op == PX_OP_EMBED && (px__per_insn(&ex->embed, &ex->embed_n, prog->ninsns, err) < 0 ||
                                  px_gpu_embed_make(prog, &prog->insns[i], batch, ex->stream, &ex->embed[i], err) < 0))
            return -1;
    }

    /* initial state: every level of every slot zeroed, then level 0 of the program and data */
    int total_levels = 0;
    for (int i = 0; i < all; i++)
        total_levels += ex->slots[i].levels;
    px_gpu_rect *rects = (px_gpu_rect *)calloc((size_t)total_levels, sizeof(px_gpu_rect));
    px_gpu_rect *d_all = NULL;
    if (!rects)
        return pxvm_fail(err, PXE_NOMEM, -1, -1, 0ull);
    ex->nclear = ex->max_clear_px = 0;
    for (int i = 0; i < all; i++)
        px__add_clear(ex, rects, i, 0, ex->slots[i].levels);
    cudaError_t e = cudaMalloc(&d_all, sizeof(px_gpu_rect) * (size_t)ex->nclear);
    if (e == cudaSuccess)
        e = cudaMemcpyAsync(d_all, rects, sizeof(px_gpu_rect) * (size_t)ex->nclear, cudaMemcpyHostToDevice, ex->stream);
    if (e != cudaSuccess) {
        free(rects);
        cudaFree(d_all);
        return px__cuda_fail(err, "uploading clear records", e, __FILE__, __LINE__);
    }
    int rc = px__launch_clear(ex, d_all, ex->nclear, ex->max_clear_px, err);
    if (rc == 0)
        rc = px__reset_records(ex, &ex->d_clear, &ex->nclear, &ex->max_clear_px, err);
    free(rects);
    if (rc < 0) {
        cudaStreamSynchronize(ex->stream);
        cudaFree(d_all);
        return -1;
    }
    /* level 0 of the program image (kept on the device to restore it) and of data slots */
    uint8_t *level0 = NULL;
    for (int k = 0; k < n; k++) {
        const pxvm_slot *s = &prog->slots[k];
        if (s->role != PXI_ROLE_PROGRAM && s->role != PXI_ROLE_DATA)
            continue;
        size_t pitch = (size_t)s->w * 4u, bytes = pitch * (size_t)s->h;
        uint8_t *tmp = (uint8_t *)realloc(level0, bytes);
        if (!tmp) {
            free(level0);
            return pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)bytes);
        }
        level0 = tmp;
        pxvm_slot_initial(prog, k, level0);
        for (int b = 0; b < batch && e == cudaSuccess; b++)
            e = cudaMemcpy2DToArrayAsync(px__array(ex, b, k, 0), 0, 0, level0, pitch, pitch, (size_t)s->h,
                                         cudaMemcpyHostToDevice, ex->stream);
        if (e == cudaSuccess && k == 0 && (prog->reset[0] & PXVM_RESET_LEVEL0)) {
            e = cudaMalloc(&ex->d_prog, bytes);
            if (e == cudaSuccess)
                e = cudaMemcpyAsync(ex->d_prog, level0, bytes, cudaMemcpyHostToDevice, ex->stream);
        }
        if (e == cudaSuccess)
            e = cudaStreamSynchronize(ex->stream); /* level0 is reused for the next slot */
        if (e != cudaSuccess) {
            free(level0);
            cudaFree(d_all);
            return px__cuda_fail(err, "uploading program and data slots", e, __FILE__, __LINE__);
        }
    }
    free(level0);
    e = cudaStreamSynchronize(ex->stream);
    cudaFree(d_all);
    if (e != cudaSuccess)
        return px__cuda_fail(err, "initialising slots", e, __FILE__, __LINE__);
    return 0;
}

/* The end of a run of a video program: every item primed, its dirty rectangles used up. */
__global__ void px__k_video_end(uint8_t *primed, px_gpu_dirty *dirty, int items)
{
    for (int b = blockIdx.x * blockDim.x + threadIdx.x; b < items; b += gridDim.x * blockDim.x) {
        primed[b] = 1;
        dirty[b].n = -1;
    }
}

/* The launch, for load and for run.cu (a run's end, a restart). */
void px__video_end(pxvm_executor *ex)
{
    px__k_video_end<<<1, 256, 0, ex->stream>>>(ex->d_primed, ex->d_dirty, ex->batch);
}
