/* ragged.c - a batch of images resized by a policy and cut into tiles: the plan both executors
 * share and the host's work (tiles.h). */
#include "ragged.h"

#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>

#include "../isa/px_resize.h"
#include "../isa/px_sem.h"

/* err's message prefixed with the image it is about ("image 3: ..."), *failed = i. */
static int px__about(pxvm_error *err, int i, int *failed)
{
    char pre[24];
    size_t k = (size_t)snprintf(pre, sizeof pre, "image %d: ", i), len = 0;
    while (len < sizeof err->msg - 1 && err->msg[len])
        len++;
    if (len + k > sizeof err->msg - 1)
        len = sizeof err->msg - 1 - k;
    memmove(err->msg + k, err->msg, len);
    memcpy(err->msg, pre, k);
    err->msg[k + len] = 0;
    if (failed)
        *failed = i;
    return -1;
}

int px_ragged_sizes(const char *policy, int patch, int out_w, int out_h, int n, const int *wh, px_policy *pol,
                   int *out_wh, int64_t *offsets, int *failed, pxvm_error *err)
{
    if (failed)
        *failed = -1;
    if (!policy || n < 0 || !offsets || (n && !wh)) /* offsets[0] is written for n = 0 too */
        return pxvm_fail(err, PXE_TILES_ARGS, -1, -1);
    if (patch < 1 || patch > 256)
        return pxvm_fail(err, PXE_TILES_PATCH, -1, -1, patch);
    if (px_policy_parse(policy, pol, err) < 0)
        return -1;
    int dynamic = pol->kind == PX_POLICY_DYNAMIC;
    if (dynamic && px_policy_dynamic_patch(pol, patch, err) < 0)
        return -1;
    if (pol->kind == PX_POLICY_NATIVE)
        return pxvm_fail(err, PXE_TILES_NATIVE, -1, -1);
    if (dynamic ? out_w || out_h
                : out_w < 1 || out_h < 1 || out_w % patch || out_h % patch || out_w > PX_RESIZE_MAX_SIDE ||
                      out_h > PX_RESIZE_MAX_SIDE)
        return dynamic ? pxvm_fail(err, PXE_TILES_DYNAMIC_SIZE, -1, -1, out_w, out_h)
                       : pxvm_fail(err, PXE_TILES_SIZE, -1, -1, out_w, out_h);
    offsets[0] = 0;
    for (int i = 0; i < n; i++) {
        int w = wh[2 * i], h = wh[2 * i + 1], ow = out_w, oh = out_h;
        if (w < 1 || h < 1 || w > PX_RESIZE_MAX_SIDE || h > PX_RESIZE_MAX_SIDE) {
            pxvm_fail(err, PXE_TILES_IMAGE_SIDE, -1, -1, w, h);
            return px__about(err, i, failed);
        }
        if (dynamic && px_dynamic_size(pol, w, h, &ow, &oh, err) < 0)
            return px__about(err, i, failed);
        px_policy_geom g;
        if (pol->kind == PX_POLICY_CROP && px_policy_geometry(pol, w, h, ow, oh, &g, err) < 0)
            return px__about(err, i, failed);
        if (pol->kind == PX_POLICY_EXACT && (w != ow || h != oh)) {
            pxvm_fail(err, PXE_POLICY_SIZE, -1, -1, "exact", w, h, ow, oh);
            return px__about(err, i, failed);
        }
        int64_t tiles = (int64_t)(ow / patch) * (oh / patch); /* <= 2^48: sides <= 2^24 */
        if (tiles > PX_RAGGED_MAX_TILES - offsets[i]) {
            pxvm_fail(err, PXE_TILES_TOO_MANY, -1, -1, (long long)(offsets[i] + tiles));
            return px__about(err, i, failed);
        }
        if (out_wh)
            out_wh[2 * i] = ow, out_wh[2 * i + 1] = oh;
        offsets[i + 1] = offsets[i] + tiles;
    }
    return 0;
}

/* The tile order and frames of a batch (pxvm_ragged's merge and temporal) against its images'
 * resized sizes (out_wh): values in range, n a multiple of T, one size per group
 * of T images, grid sides multiples of merge. 0, or -1 with *err set (naming the image). */
static int px__layout_check(const pxvm_ragged *t, int n, const int *out_wh, int *failed, pxvm_error *err)
{
    if (t->merge < 0 || t->merge > PX_RESIZE_MAX_SIDE || t->temporal < 0 || t->temporal > 65536)
        return pxvm_fail(err, PXE_TILES_LAYOUT, -1, -1, t->merge, t->temporal);
    int T = t->temporal > 1 ? t->temporal : 1, mg = t->merge > 1 ? t->merge : 1;
    if (n % T)
        return pxvm_fail(err, PXE_TILES_GROUPS, -1, -1, T, T, n);
    for (int i = 0; i < n; i++) {
        int w = out_wh[2 * i], h = out_wh[2 * i + 1], g0 = i - i % T;
        if (w != out_wh[2 * g0] || h != out_wh[2 * g0 + 1]) {
            pxvm_fail(err, PXE_TILES_FRAME_SIZE, -1, -1, T, w, h, g0, out_wh[2 * g0], out_wh[2 * g0 + 1]);
            return px__about(err, i, failed);
        }
        int gw = w / t->patch, gh = h / t->patch;
        if (gw % mg || gh % mg) {
            pxvm_fail(err, PXE_TILES_MERGE, -1, -1, mg, gw, gh, w, h, mg, mg);
            return px__about(err, i, failed);
        }
    }
    return 0;
}

void px_ragged_job_free(px_ragged_job *job)
{
    free(job->img);
    job->img = NULL;
}

/* Whether view v's bytes (from its lowest address to its highest, whatever the strides' signs)
 * meet dst's [dst, dst + bytes): both in host memory, or both on one device. px__check_view has
 * bounded the strides' span under 2^48, so the offsets below do not overflow. */
static int px__view_meets_dst(const pxvm_view *v, const void *dst, int dst_device, unsigned __int128 bytes)
{
    if ((v->device < 0) != (dst_device < 0) || (dst_device >= 0 && v->device != dst_device) || !bytes)
        return 0;
    const int64_t st[4] = {v->item_stride, v->row_stride, v->px_stride, v->ch_stride};
    const int64_t n[4] = {v->items, v->h, v->w, v->channels};
    int64_t lo = 0, hi = 0;
    for (int k = 0; k < 4; k++)
        if (st[k] < 0)
            lo += st[k] * (n[k] - 1);
        else
            hi += st[k] * (n[k] - 1);
    uintptr_t a = (uintptr_t)v->data, d = (uintptr_t)dst;
    unsigned __int128 first = (unsigned __int128)(a + (uintptr_t)lo), last = (unsigned __int128)(a + (uintptr_t)hi);
    return first < (unsigned __int128)d + bytes && last >= (unsigned __int128)d;
}

/* Whether two views show the same pixels the same way (the same memory, sizes and strides). */
static int px__same_view(const pxvm_view *a, const pxvm_view *b)
{
    return a->data == b->data && a->device == b->device && a->w == b->w && a->h == b->h &&
           a->channels == b->channels && a->row_stride == b->row_stride && a->px_stride == b->px_stride &&
           a->ch_stride == b->ch_stride;
}

int px_ragged_prepare(px_ragged_job *job, int n, const pxvm_view *views, pxvm_ragged *t, pxvm_token_table *table,
                     uint64_t max_memory, pxvm_error *err)
{
    memset(job, 0, sizeof *job);
    if (!t || n < 1 || !views)
        return pxvm_fail(err, PXE_TILES_NO_IMAGES, -1, -1);
    t->failed = -1;
    job->failed = &t->failed;
    int *wh = malloc(sizeof(int) * 4u * (size_t)n);
    int64_t *off = malloc(sizeof(int64_t) * ((size_t)n + 1u));
    job->img = calloc((size_t)n, sizeof *job->img);
    if (!wh || !off || !job->img) {
        free(wh), free(off), px_ragged_job_free(job);
        return pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)n * 64ull);
    }
    int rc = 0;
    for (int i = 0; i < n && !rc; i++) {
        /* items first: the view check would call a second item one outside a batch of 1 */
        if ((views[i].items != 1 &&
             pxvm_fail(err, PXE_TILES_ONE_ITEM, -1, -1) < 0) ||
            pxvm_check_input_view(1, 0, &views[i], err) < 0)
            rc = px__about(err, i, job->failed);
        else
            wh[2 * i] = views[i].w, wh[2 * i + 1] = views[i].h;
    }
    if (!rc)
        rc = px_ragged_sizes(t->policy, t->patch, t->out_w, t->out_h, n, wh, &job->policy, wh + 2 * n, off,
                            job->failed, err);
    if (!rc)
        rc = px__layout_check(t, n, wh + 2 * n, job->failed, err);
    if (!rc && t->fmt && pxvm_token_table_build(t->fmt, table, err) < 0)
        rc = -1;
    if (!rc) {
        int T = t->temporal > 1 ? t->temporal : 1;
        job->n = n, job->patch = t->patch, job->table = t->fmt ? table : NULL;
        job->merge = t->merge > 1 ? t->merge : 1, job->temporal = T;
        job->fit = job->policy.kind == PX_POLICY_FIT;
        job->pad = (uint32_t)job->policy.pad[0] | (uint32_t)job->policy.pad[1] << 8 |
                   (uint32_t)job->policy.pad[2] << 16 | (uint32_t)job->policy.pad[3] << 24;
        size_t pp = (size_t)t->patch * (size_t)t->patch;
        job->tile_bytes = (table ? pp * (size_t)table->channels * (size_t)table->elem : pp * 4u) * (size_t)T;
        job->tiles = off[n] / T; /* a group's images have one size: off[g * T] is T times its item's first token */
        job->dst = t->dst, job->dst_device = t->dst_device, job->max_memory = max_memory;
        for (int i = 0; i < n; i++) {
            px_ragged_image *im = &job->img[i];
            im->v = views[i], im->w = wh[2 * (n + i)], im->h = wh[2 * (n + i) + 1];
            im->tile0 = off[i - i % T] / T, im->tiles = off[i + 1] - off[i], im->frame = i % T;
            px_policy_geometry(&job->policy, im->v.w, im->v.h, im->w, im->h, &im->g, err); /* checked by the plan */
            im->nframes = 1;
        }
        /* a frame that shows its group's previous view again (Qwen2-VL's still image, given T
         * times) is written by the first of the run: one resize (the host's; cuda resizes each) */
        for (int i = 1, lead = 0; i < n; i++)
            if (job->img[i].frame > 0 && px__same_view(&views[i - 1], &views[i]))
                job->img[i].nframes = 0, job->img[lead].nframes++;
            else
                lead = i;
        unsigned __int128 need = (unsigned __int128)job->tiles * job->tile_bytes;
        size_t align = table && t->fmt ? (size_t)table->elem : 1u;
        if (t->dst && (uintptr_t)t->dst % align)
            rc = pxvm_fail(err, PXE_TILES_DST_ALIGN, -1, -1, align);
        else if (!t->dst || need > t->dst_bytes)
            rc = pxvm_fail(err, PXE_TILES_DST_SMALL, -1, -1, t->dst ? "has" : "is NULL, of", t->dst_bytes,
                           (long long)job->tiles, (unsigned long long)need);
        /* the tiles are written while other images are still read (the pool, the parts): an
         * image in dst's bytes would be read half overwritten, silently wrong */
        for (int i = 0; i < n && !rc; i++)
            if (px__view_meets_dst(&views[i], t->dst, t->dst_device, need)) {
                pxvm_fail(err, PXE_TILES_DST_OVERLAP, -1, -1, t->dst_bytes, t->dst);
                rc = px__about(err, i, job->failed);
            }
    }
    free(wh), free(off);
    if (rc)
        px_ragged_job_free(job);
    return rc;
}

int px_ragged_op(const px_ragged_job *job, int i, px_resize_op *op, pxvm_error *err)
{
    const px_ragged_image *im = &job->img[i];
    if (px_resize_op_window(im->v.w, im->v.h, &im->g, job->policy.filter, job->pad, op, err) < 0)
        return px__about(err, i, job->failed);
    return 0;
}

/* A resized image inside its canvas: the content at (cx, cy), pad around it. */
typedef struct px__canvas {
    const uint8_t *px; /* the content, cw x ch texels of `channels` bytes, rows `stride` apart */
    int64_t stride;
    int channels;
    int cx, cy, cw, ch;
    uint32_t pad;
} px__canvas;

/* Canvas row y into row[0 .. w) as RGBA texels. */
static void px__canvas_row(const px__canvas *c, int y, int w, uint32_t *row)
{
    int j = y - c->cy, x0 = c->cx, x1 = c->cx + c->cw;
    if (j < 0 || j >= c->ch)
        x0 = x1 = w; /* all pad */
    for (int x = 0; x < x0 && x < w; x++)
        row[x] = c->pad;
    const uint8_t *p = c->px + (int64_t)(j < 0 ? 0 : j) * c->stride;
    if (x0 < x1)
        switch (c->channels) {
        case 1:
            for (int x = x0; x < x1; x++, p++)
                row[x] = (uint32_t)p[0] * 0x010101u | 0xFF000000u;
            break;
        case 3:
            for (int x = x0; x < x1; x++, p += 3)
                row[x] = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | 0xFF000000u;
            break;
        default:
            memcpy(row + x0, p, (size_t)(x1 - x0) * 4u);
        }
    for (int x = x1 > x0 ? x1 : x0; x < w; x++)
        row[x] = c->pad;
}

/* Image im's tiles from its canvas, one canvas row at a time: row r of every tile of a tile row,
 * at its token (px_ragged_token: the job's order) and its frames' values (px_ragged_value): its
 * own frame and the nframes - 1 after it that show the same view. */
static void px__write_tiles(const px_ragged_job *job, const px_ragged_image *im, const px__canvas *c, uint32_t *row)
{
    const int p = job->patch, gw = im->w / p, T = job->temporal;
    const pxvm_token_table *t = job->table;
    uint8_t *base = (uint8_t *)job->dst + (size_t)im->tile0 * job->tile_bytes;
    for (int y = 0; y < im->h; y++) {
        int ty = y / p, r = y % p;
        px__canvas_row(c, y, im->w, row);
        for (int tx = 0; tx < gw; tx++) {
            uint8_t *out = base + (size_t)px_ragged_token(tx, ty, gw, job->merge) * job->tile_bytes;
            const uint32_t *s = row + (size_t)tx * (size_t)p;
            for (int f = im->frame; f < im->frame + im->nframes; f++) {
                if (!t) {
                    memcpy(out + px_ragged_value(0, f, 0, r, p, T, 4, 0), s, 4u * (size_t)p);
                    continue;
                }
                int planar = t->layout != PXVM_TOKENS_NHWC;
                for (int ch = 0; ch < t->channels; ch++) {
                    const uint32_t *tab = t->value[ch];
                    int sh = 8 * ch;
                    size_t o = px_ragged_value(ch, f, 0, r, p, T, t->channels, planar);
                    size_t step = planar ? 1u : (size_t)t->channels; /* from texel q to q + 1 */
                    if (t->elem == 4) {
                        uint32_t *d = (uint32_t *)(void *)out + o;
                        for (int q = 0; q < p; q++)
                            d[(size_t)q * step] = tab[(s[q] >> sh) & 255u];
                    } else {
                        uint16_t *d = (uint16_t *)(void *)out + o;
                        for (int q = 0; q < p; q++)
                            d[(size_t)q * step] = (uint16_t)tab[(s[q] >> sh) & 255u];
                    }
                }
            }
        }
    }
}

int px_ragged_image_host(const px_ragged_job *job, int i, int threads, pxvm_error *err)
{
    const px_ragged_image *im = &job->img[i];
    const pxvm_view *v = &im->v;
    if (!im->nframes) /* the frame before it shows the same view and writes this frame too */
        return 0;
    int sw = v->w, sh = v->h, C = v->channels;
    /* the resize reads interleaved rows, top down, each after the last: a view of other strides
     * (planar, padded pixels, rows bottom-up or overlapping) is packed first */
    const uint8_t *src = v->data;
    int64_t sstride = v->row_stride;
    uint8_t *packed = NULL;
    if (v->ch_stride != 1 || v->px_stride != C || v->row_stride < (int64_t)sw * C) {
        packed = malloc((size_t)sw * (size_t)sh * (size_t)C);
        if (!packed)
            return pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)sw * sh * C);
        for (int y = 0; y < sh; y++)
            for (int x = 0; x < sw; x++)
                for (int c = 0; c < C; c++)
                    packed[((size_t)y * sw + x) * C + c] =
                        ((const uint8_t *)v->data)[y * v->row_stride + x * v->px_stride + c * v->ch_stride];
        src = packed, sstride = (int64_t)sw * C;
    }
    px_resize_op op;
    if (px_resize_op_window(sw, sh, &im->g, job->policy.filter, job->pad, &op, err) < 0) {
        free(packed);
        return px__about(err, i, NULL);
    }
    int nw = op.cw, nh = op.ch;
    src += op.src_y * sstride + (int64_t)op.src_x * C; /* a crop's window of an axis not resized */
    px__canvas c = {src, sstride, C, op.cx, op.cy, nw, nh, job->pad};
    uint8_t *tmp = NULL;
    int rc = 0;
    if (!op.copy) {
        tmp = malloc((size_t)nw * (size_t)nh * (size_t)C);
        if (!tmp)
            rc = pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)nw * nh * C);
        else
            rc = px_resize_op_threads(&op, src, sstride, tmp, (int64_t)nw * C, C, threads, err);
        c.px = tmp, c.stride = (int64_t)nw * C;
    }
    px_resize_op_free(&op);
    uint32_t *row = rc ? NULL : malloc((size_t)im->w * 4u);
    if (!rc && !row)
        rc = pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)im->w * 4ull);
    if (!rc)
        px__write_tiles(job, im, &c, row);
    free(row);
    free(tmp);
    free(packed);
    return rc < 0 ? px__about(err, i, NULL) : 0;
}
