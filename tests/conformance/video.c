/* video.c - random frame sequences for the video opcodes, and the check that runs them.
 *
 * A case is two programs over the same slots and a frame sequence:
 *   incremental: DIFF frame cur mask T; UPDATE; PYRAMID cur mask=mask; SAMPLE/ANISO/GATHER with
 *                mask=mask into a persistent atlas;
 *   full:        the same DIFF and UPDATE (so cur evolves the same), a full PYRAMID cur, and the
 *                same sampling instructions without a mask into a plain atlas.
 * Frames change in random rectangles (small changes below the threshold too), sometimes with the
 * rectangles given to the runner instead of compared, registers of relative instructions move
 * now and then, and the stream is sometimes restarted. After every frame:
 *   incremental == full recompute: every level of cur, the atlas bytes, the token geometry;
 *   conservative changed tokens: a token whose bytes differ from the previous frame's is marked;
 *   executor == reference (when given): every slot, the changed tokens, the geometry.
 * Every other frame is borrowed (pxvm_runner_borrow, read in place): on the CPU the host frame,
 * on CUDA-GL a copy in device memory, from one of two buffers in turn; the others are bound: the
 * same bytes either way, and the input read back is the frame. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>
#ifdef PXVM_HAVE_CUDA_GL
#include <cuda_runtime_api.h>
#endif

#include "../../isa/px_sem.h"
#include "cases.h"


void px_video_case_free(px_video_case *v)
{
    pxvm_image_free(&v->incremental);
    pxvm_image_free(&v->full);
    for (int f = 0; f < v->nframes; f++)
        pxvm_image_free(&v->frames[f]);
    memset(v, 0, sizeof *v);
}

/* Both programs: slots frame 1, cur 2, mask 3, atlas 4, table 5; `incremental` picks the masks
 * and the persistent atlas. Instruction operands come from the same seed for both. */
static int px__video_program(const px_video_case *v, uint64_t seed, int incremental, pxvm_image *out)
{
    uint64_t s = seed;
    pxvm_builder b;
    pxvm_build_init(&b, 64);
    int w = v->w, h = v->h, pw = 1 + px_case_below(&s, 12), ph = 1 + px_case_below(&s, 12), n = 1 + px_case_below(&s, 24);
    int frame = pxvm_build_slot(&b, PXI_ROLE_INPUT, "frame", w, h);
    int cur = pxvm_build_slot(&b, PXI_ROLE_SCRATCH, "cur", w, h);
    int mask = pxvm_build_slot(&b, PXI_ROLE_SCRATCH, "mask", px_tiles(w), px_tiles(h));
    int atlas = pxvm_build_slot(&b, PXI_ROLE_OUTPUT, "atlas", pw * n, ph);
    pxvm_build_persist(&b, cur);
    if (incremental)
        pxvm_build_persist(&b, atlas);
    pxvm_build_patches(&b, atlas, pw, ph, n);
    pxvm_image t; /* a GATHER table: positions around the image, any LOD */
    pxvm_image_alloc(&t, 3 * pw, ph, NULL);
    for (int j = 0; j < ph; j++)
        for (int i = 0; i < pw; i++) {
            uint8_t *e = t.px + ((size_t)j * (size_t)t.w + 3u * (size_t)i) * 4u;
            pxi_write_le(e, 0, 0, 4, (uint32_t)((int32_t)(px_case_next(&s) % ((uint64_t)(w + 8) << 16)) - (4 << 16)));
            pxi_write_le(e, 1, 0, 4, (uint32_t)((int32_t)(px_case_next(&s) % ((uint64_t)(h + 8) << 16)) - (4 << 16)));
            pxi_write_le(e, 2, 0, 4, (uint32_t)px_case_below(&s, 10 * 256));
        }
    int table = pxvm_build_data_slot(&b, "table", &t);
    pxvm_image_free(&t);
    int32_t f[PXI_MAX_FIELDS] = {0};
    f[PX_FI(DIFF, frame)] = frame, f[PX_FI(DIFF, cur)] = cur, f[PX_FI(DIFF, mask)] = mask;
    f[PX_FI(DIFF, threshold)] = v->threshold;
    pxvm_build_insn(&b, PX_OP_DIFF, f);
    memset(f, 0, sizeof f);
    f[PX_FI(UPDATE, frame)] = frame, f[PX_FI(UPDATE, cur)] = cur, f[PX_FI(UPDATE, mask)] = mask;
    pxvm_build_insn(&b, PX_OP_UPDATE, f);
    memset(f, 0, sizeof f);
    f[PX_FI(PYRAMID, slot)] = cur, f[PX_FI(PYRAMID, mask)] = incremental ? mask : 0;
    pxvm_build_insn(&b, PX_OP_PYRAMID, f);
    for (int k = 0; k < n; k++) {
        int op = px_case_below(&s, 4), filter = px_case_below(&s, 3) == 0, rel = px_case_below(&s, 3) == 0;
        int mode = rel ? PX_MODE_REL(filter, px_case_below(&s, PX_FIX_REGS)) : filter;
        memset(f, 0, sizeof f);
        f[PX_FI(SAMPLE, src)] = cur, f[PX_FI(SAMPLE, dst)] = atlas, f[PX_FI(SAMPLE, mode)] = mode;
        f[PX_FI(SAMPLE, dst_x)] = k * pw, f[PX_FI(SAMPLE, w)] = pw, f[PX_FI(SAMPLE, h)] = ph;
        if (op == 3) {
            f[PX_FI(GATHER, table)] = table;
            f[PX_FI(GATHER, mask)] = incremental ? mask : 0;
            pxvm_build_insn(&b, PX_OP_GATHER, f);
            continue;
        }
        int32_t span = (int32_t)((w > h ? w : h) + 4) << 16;
        f[PX_FI(SAMPLE, cu)] = rel ? (int32_t)(px_case_next(&s) % (uint64_t)(span / 4)) - span / 8
                                   : (int32_t)(px_case_next(&s) % (uint64_t)span) - (2 << 16);
        f[PX_FI(SAMPLE, cv)] = rel ? (int32_t)(px_case_next(&s) % (uint64_t)(span / 4)) - span / 8
                                   : (int32_t)(px_case_next(&s) % (uint64_t)span) - (2 << 16);
        f[PX_FI(SAMPLE, du)] = px_case_below(&s, 8) == 0 ? -(1 << 16) : (int32_t)(1 + px_case_below(&s, 4 << 16));
        f[PX_FI(SAMPLE, dv)] = px_case_below(&s, 8) == 0 ? 0 : (int32_t)(1 + px_case_below(&s, 4 << 16));
        f[PX_FI(SAMPLE, lod)] = px_case_below(&s, 3) ? px_case_below(&s, 256 * 8) : 256 * px_case_below(&s, 8);
        if (op == 2) {
            f[PX_FI(ANISO, taps)] = 1 + px_case_below(&s, PX_MAX_TAPS);
            f[PX_FI(ANISO, tdu)] = (int32_t)px_case_below(&s, 6 << 16) - (3 << 16);
            f[PX_FI(ANISO, tdv)] = (int32_t)px_case_below(&s, 6 << 16) - (3 << 16);
            f[PX_FI(ANISO, mask)] = incremental ? mask : 0;
            pxvm_build_insn(&b, PX_OP_ANISO, f);
        } else {
            f[PX_FI(SAMPLE, mask)] = incremental ? mask : 0;
            pxvm_build_insn(&b, PX_OP_SAMPLE, f);
        }
    }
    pxvm_build_insn(&b, PX_OP_HALT, NULL);
    pxvm_error err;
    int rc = pxvm_build_finish(&b, out, &err);
    pxvm_build_free(&b);
    return rc;
}

int px_video_make(uint64_t seed, px_video_case *v)
{
    memset(v, 0, sizeof *v);
    snprintf(v->name, sizeof v->name, "video/%llu", (unsigned long long)seed);
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 7;
    static const int sizes[] = {1, 2, 15, 16, 17, 31, 33, 47, 64, 100, 129, 200};
    v->w = px_case_below(&s, 4) ? 1 + px_case_below(&s, 140) : sizes[px_case_below(&s, 12)];
    v->h = px_case_below(&s, 4) ? 1 + px_case_below(&s, 140) : sizes[px_case_below(&s, 12)];
    if (px_case_below(&s, 12) == 0) { /* large: several groups of 16x16 tiles (the GPU's levels 5-8), levels 9.. */
        static const int wide[] = {257, 300, 511, 512, 530, 777, 4200}, tall[] = {1, 40, 257, 300, 520};
        v->w = wide[px_case_below(&s, 7)], v->h = tall[px_case_below(&s, 5)];
        if (v->w > 4096) /* 17 groups a side, kept thin */
            v->h = 1 + px_case_below(&s, 48);
        if (px_case_below(&s, 2)) { /* tall as often as wide */
            int t = v->w;
            v->w = v->h, v->h = t;
        }
    }
    static const int thresholds[] = {0, 0, 1, 8, 16, 40, 128, 254, 255};
    v->threshold = px_case_below(&s, 3) ? thresholds[px_case_below(&s, 9)] : px_case_below(&s, 256);
    uint64_t pseed = px_case_next(&s);
    if (px__video_program(v, pseed, 1, &v->incremental) < 0 || px__video_program(v, pseed, 0, &v->full) < 0)
        return -1;
    v->nframes = 2 + px_case_below(&s, PX_VIDEO_MAX_FRAMES - 1);
    for (int fr = 0; fr < v->nframes; fr++) {
        pxvm_image *img = &v->frames[fr];
        if (pxvm_image_alloc(img, v->w, v->h, NULL) < 0)
            return -1;
        size_t bytes = (size_t)v->w * (size_t)v->h * 4u;
        if (fr == 0 || px_case_below(&s, 12) == 0) { /* a new scene */
            int smooth = px_case_below(&s, 2);
            for (size_t i = 0; i < bytes; i++)
                img->px[i] = (uint8_t)(smooth ? (i / 4) % (size_t)v->w * 3 + (i & 3) * 50 : px_case_next(&s));
        } else {
            memcpy(img->px, v->frames[fr - 1].px, bytes);
        }
        v->nrects[fr] = -1;
        int changes = px_case_below(&s, 4), give = px_case_below(&s, 4) == 0;
        if (give)
            v->nrects[fr] = 0;
        for (int c = 0; c < changes; c++) { /* a rectangle moves: new pixels, or a nudge of a few levels */
            int rw = 1 + px_case_below(&s, v->w), rh = 1 + px_case_below(&s, v->h);
            int rx = px_case_below(&s, v->w - rw + 1), ry = px_case_below(&s, v->h - rh + 1), nudge = px_case_below(&s, 3) == 0;
            int delta = 1 + px_case_below(&s, 20);
            for (int y = ry; y < ry + rh; y++)
                for (int x = rx; x < rx + rw; x++)
                    for (int ch = 0; ch < 4; ch++) {
                        uint8_t *p = img->px + ((size_t)y * (size_t)v->w + (size_t)x) * 4u + ch;
                        *p = nudge ? (uint8_t)(*p > 128 ? *p - delta : *p + delta) : (uint8_t)px_case_next(&s);
                    }
            if (give && v->nrects[fr] < PX_VIDEO_MAX_RECTS) /* sometimes only part of it is told */
                v->rects[fr][v->nrects[fr]++] = (pxvm_rect){rx, ry, px_case_below(&s, 4) ? rw : rw / 2, rh};
        }
        v->restart[fr] = fr > 0 && px_case_below(&s, 16) == 0;
        v->moved[fr] = fr == 0 || px_case_below(&s, 3) == 0;
        for (int r = 0; r < 2 * PX_FIX_REGS; r++)
            v->fix[fr][r] = v->moved[fr] ? (int32_t)(px_case_next(&s) % ((uint64_t)(v->w + v->h + 8) << 16)) - (4 << 16)
                                         : v->fix[fr - 1][r];
    }
    return 1;
}

/* ---- running ------------------------------------------------------------------------------------ */

typedef struct {
    const pxvm_executor_ops *ops;
    pxvm_executor *ex;
    pxvm_program prog;
    void *dev[2]; /* device frames to borrow, or NULL */
} px__vrun;

static int px__vopen(const pxvm_executor_ops *ops, const pxvm_image *img, px__vrun *r, pxvm_error *err)
{
    pxvm_limits lim;
    pxvm_limits_default(&lim);
    memset(r, 0, sizeof *r);
    r->ops = ops;
    if (pxvm_program_from_copy(img, &lim, &r->prog, err) < 0 || ops->open(&r->ex, NULL, err) < 0 ||
        ops->load(r->ex, &r->prog, 1, err) < 0)
        return -1;
    return 0;
}

static void px__vclose(px__vrun *r)
{
#ifdef PXVM_HAVE_CUDA_GL
    for (int i = 0; i < 2; i++)
        if (r->dev[i])
            cudaFree(r->dev[i]);
#endif
    if (r->ex)
        r->ops->close(r->ex);
    pxvm_program_free(&r->prog);
}

/* Borrows frame fr: on the CPU the frame itself, read in place; on the GPU a copy of it in
 * device buffer `buf`. 0, or -1 with *err set. */
static int px__vborrow(px__vrun *r, const px_video_case *v, int fr, int buf, pxvm_error *err)
{
    const pxvm_image *f = &v->frames[fr];
    size_t bytes = (size_t)f->w * (size_t)f->h * 4u;
    if (r->ops == &pxvm_cpu_executor) {
        pxvm_view hv = {f->px, -1, 1, f->w, f->h, 4, (int64_t)bytes, (int64_t)f->w * 4, 4, 1};
        return r->ops->borrow(r->ex, 1, 0, &hv, err);
    }
#ifdef PXVM_HAVE_CUDA_GL
    /* from pageable memory cudaMemcpy may return before its DMA ends, and the runner's stream
     * is not ordered after the legacy stream: the frame must be whole before the borrow */
    cudaError_t e = cudaSuccess;
    if ((!r->dev[buf] && (e = cudaMalloc(&r->dev[buf], bytes)) != cudaSuccess) ||
        (e = cudaMemcpy(r->dev[buf], f->px, bytes, cudaMemcpyHostToDevice)) != cudaSuccess ||
        (e = cudaDeviceSynchronize()) != cudaSuccess)
        return pxvm_fail(err, PXE_CUDA_CALL, -1, -1, "copying a test frame to the device", cudaGetErrorString(e),
                         cudaGetErrorName(e), __FILE__, __LINE__);
    pxvm_view dv = {r->dev[buf], 0, 1, f->w, f->h, 4, (int64_t)bytes, (int64_t)f->w * 4, 4, 1};
    return r->ops->borrow(r->ex, 1, 0, &dv, err);
#else
    (void)buf;
    return pxvm_fail(err, PXE_TOOL_USAGE, -1, -1, "no device frames in this build");
#endif
}

static int px__vframe(px__vrun *r, const px_video_case *v, int fr, pxvm_error *err)
{
    pxvm_run_options ro = {.max_steps = 1u << 24};
    int borrow = r->ops->borrow && (fr & 1);
    if (v->restart[fr] && r->ops->reset(r->ex, err) < 0)
        return -1;
    if ((borrow ? px__vborrow(r, v, fr, (fr >> 1) & 1, err) : pxvm_bind_image(r->ops, r->ex, 1, &v->frames[fr], err)) < 0 ||
        r->ops->set_fixations(r->ex, 0, 1, 0, PX_FIX_REGS, v->fix[fr], -1, err) < 0)
        return -1;
    if (v->nrects[fr] >= 0 && r->ops->set_dirty(r->ex, 0, v->rects[fr], v->nrects[fr], err) < 0)
        return -1;
    if (r->ops->run(r->ex, &ro, err) < 0)
        return -1;
    pxvm_image in; /* a borrowed input reads back as the frame */
    if (borrow && pxvm_read_image(r->ops, r->ex, &r->prog, 1, 0, 0, &in, err) == 0) {
        int same = !memcmp(in.px, v->frames[fr].px, (size_t)in.w * (size_t)in.h * 4u);
        pxvm_image_free(&in);
        if (!same)
            return pxvm_fail(err, PXE_TOOL_USAGE, -1, -1, "the borrowed input reads back unlike its frame");
    }
    return 0;
}

/* Every level of slots 2.. (cur, mask, atlas) as one byte string, then geometry and changed. */
static uint8_t *px__vstate(px__vrun *r, int with_changed, size_t *len, pxvm_error *err)
{
    size_t n = 0;
    const pxvm_program *p = &r->prog;
    for (int k = 2; k < p->nslots; k++)
        n += (size_t)p->slots[k].bytes;
    int atlas = pxvm_slot_lookup(p, "atlas");
    size_t tokens = (size_t)p->slots[atlas].patch_count;
    n += tokens * PX_GEOM_INTS * 4u + (with_changed ? tokens : 0);
    uint8_t *buf = malloc(n), *at = buf;
    if (!buf)
        return NULL;
    for (int k = 2; k < p->nslots; k++)
        for (int l = 0; l < p->slots[k].levels; l++) {
            pxvm_image img;
            if (pxvm_read_image(r->ops, r->ex, p, k, l, 0, &img, err) < 0) {
                free(buf);
                return NULL;
            }
            memcpy(at, img.px, (size_t)img.w * (size_t)img.h * 4u);
            at += (size_t)img.w * (size_t)img.h * 4u;
            pxvm_image_free(&img);
        }
    if (r->ops->read_state(r->ex, PXVM_STATE_GEOMETRY, atlas, 0, 1, at, -1, err) < 0 ||
        (with_changed && r->ops->read_state(r->ex, PXVM_STATE_CHANGED, atlas, 0, 1, at + tokens * PX_GEOM_INTS * 4u, -1, err) < 0)) {
        free(buf);
        return NULL;
    }
    *len = n;
    return buf;
}

long px_video_tokens, px_video_sampled; /* over every frame after the first: how incremental it was */

int px_video_check(const pxvm_executor_ops *ops, const pxvm_executor_ops *ref, const px_video_case *v,
                   px_golden_stats *st, char *why, size_t len)
{
    px__vrun inc, full, rinc;
    pxvm_error err = {0};
    int bad = 0;
    if (px__vopen(ops, &v->incremental, &inc, &err) < 0 || px__vopen(ops, &v->full, &full, &err) < 0 ||
        (ref && px__vopen(ref, &v->incremental, &rinc, &err) < 0)) {
        snprintf(why, len, "%s: cannot load: %s", v->name, err.msg);
        return -1;
    }
    int atlas = pxvm_slot_lookup(&inc.prog, "atlas");
    const pxvm_slot *as = &inc.prog.slots[atlas];
    size_t abytes = (size_t)as->w * (size_t)as->h * 4u;
    uint8_t *prev = calloc(abytes ? abytes : 1, 1);
    for (int fr = 0; fr < v->nframes && !bad; fr++) {
        if (px__vframe(&inc, v, fr, &err) < 0 || px__vframe(&full, v, fr, &err) < 0 ||
            (ref && px__vframe(&rinc, v, fr, &err) < 0)) {
            snprintf(why, len, "%s frame %d: run failed: %s", v->name, fr, err.msg);
            bad = -1;
            break;
        }
        size_t la = 0, lb = 0, lr = 0;
        uint8_t *a = px__vstate(&inc, 1, &la, &err), *b = px__vstate(&full, 0, &lb, &err);
        uint8_t *c = ref ? px__vstate(&rinc, 1, &lr, &err) : NULL;
        st->programs++;
        st->outputs += 3;
        st->bytes += la + lb + lr;
        /* incremental == full recompute (everything but the changed bytes) */
        if (!a || !b || lb != la - (size_t)as->patch_count || memcmp(a, b, lb)) {
            size_t p = 0;
            while (a && b && p < lb && a[p] == b[p])
                p++;
            snprintf(why, len, "%s (%dx%d, threshold %d) frame %d: incremental != full recompute at byte %zu of %zu",
                     v->name, v->w, v->h, v->threshold, fr, p, lb);
            bad = 1;
        }
        /* changed tokens: conservative */
        const uint8_t *changed = a ? a + lb : NULL;
        for (int t = 0; fr > 0 && changed && t < as->patch_count; t++)
            px_video_tokens++, px_video_sampled += changed[t];
        pxvm_image now;
        if (!bad && pxvm_read_image(inc.ops, inc.ex, &inc.prog, atlas, 0, 0, &now, &err) == 0) {
            int cols = as->w / as->patch_w;
            for (int t = 0; t < as->patch_count && !bad; t++) {
                int x0 = (t % cols) * as->patch_w, y0 = (t / cols) * as->patch_h, differs = 0;
                for (int y = y0; y < y0 + as->patch_h && !differs; y++)
                    differs = memcmp(now.px + ((size_t)y * (size_t)as->w + (size_t)x0) * 4u,
                                     prev + ((size_t)y * (size_t)as->w + (size_t)x0) * 4u, (size_t)as->patch_w * 4u) != 0;
                if (differs && !changed[t]) {
                    snprintf(why, len, "%s frame %d: token %d changed but is not marked", v->name, fr, t);
                    bad = 1;
                }
            }
            memcpy(prev, now.px, abytes);
            pxvm_image_free(&now);
        }
        if (!bad && ref && (lr != la || memcmp(a, c, la))) {
            size_t p = 0;
            while (p < la && a[p] == c[p])
                p++;
            snprintf(why, len, "%s frame %d: %s differs from %s at byte %zu of %zu", v->name, fr, ops->name, ref->name, p, la);
            bad = 1;
        }
        free(a), free(b), free(c);
    }
    free(prev);
    px__vclose(&inc), px__vclose(&full);
    if (ref)
        px__vclose(&rinc);
    if (bad > 0)
        st->differences++;
    return bad < 0 ? -1 : 0;
}
