/* ragged.h - a batch of images of many sizes resized by a policy and cut into tiles
 * (include/pxvm.h: pxvm_runner_ragged), what both executors share: the arguments' checks, each
 * image's plan (its resized size, the content rectangle, the tables of its RESIZE) and the
 * writing of one resized image's tiles, which the CPU executor runs over its pool and the
 * CUDA-GL one mirrors in a kernel (executors/cuda_gl/ragged.cu). A size is an argument here, not
 * a program: a batch of N sizes costs N table builds (O(w + h) each), no compile, no load. */
#ifndef PX_RAGGED_H
#define PX_RAGGED_H

#include "ragged_index.h"
#include "resize.h"
#include "tokens.h"
#include "vm.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One image of a batch, planned: its view, the canvas it is resized to (w x h, tiled), the
 * content rectangle inside it (fit: px_resize_fit's; else the canvas) and its first tile. */
typedef struct px_ragged_image {
    pxvm_view v;
    int w, h;
    int64_t tile0, tiles; /* the first token of the image's item (its group's), its tiles */
    int frame;            /* its frame in the item's tokens: i % temporal */
    int nframes;          /* the host writes frames frame .. frame + nframes - 1 from this image's
                           * resize (the next images of its group that show the same view); 0:
                           * an earlier image writes this one's (the cuda executor ignores it) */
    px_policy_geom g;     /* where the policy puts it on its canvas (fit's bars, crop's window) */
} px_ragged_image;

/* The most tiles one batch gives (offsets stay int64 and dst's bytes a product that fits: a tile
 * has at least 4 bytes, and no memory holds 2^50). */
#define PX_RAGGED_MAX_TILES (1ll << 48)

typedef struct px_ragged_job {
    int n;
    px_ragged_image *img;          /* [n] */
    px_policy policy;
    int fit;                      /* RESIZE's fit operand: 1 for the fit policy */
    uint32_t pad;                 /* R | G << 8 | B << 16 | A << 24 */
    int patch;
    const pxvm_token_table *table; /* NULL: RGBA8 tiles */
    int merge;                    /* the tiles' order (ragged_index.h): 1 row-major, m >= 2 windows */
    int temporal;                 /* frames per token, 1.. */
    size_t tile_bytes;            /* the bytes of one token in dst (temporal frames of a tile) */
    int64_t tiles;                /* the batch's tokens */
    void *dst;
    int dst_device;
    uint64_t max_memory;          /* the runner's budget for what a call holds */
    int *failed;                  /* the image an error names (pxvm_ragged.failed) */
} px_ragged_job;

/* The plan of a batch (sizes only; px_tiles_plan's checks): the policy parsed, each image's
 * canvas and tile offsets; images' views and the table are filled by px_ragged_prepare. 0, or -1
 * with *err set and *failed the image it names (or -1). */
int px_ragged_sizes(const char *policy, int patch, int out_w, int out_h, int n, const int *wh, px_policy *pol,
                   int *out_wh, int64_t *offsets, int *failed, pxvm_error *err);
/* The whole job from the public arguments (views checked, dst's size checked against the tiles,
 * the table built when a format is given: table must have room for one). job->img is allocated
 * here: px_ragged_job_free. */
int px_ragged_prepare(px_ragged_job *job, int n, const pxvm_view *views, pxvm_ragged *t, pxvm_token_table *table,
                     uint64_t max_memory, pxvm_error *err);
void px_ragged_job_free(px_ragged_job *job);

/* Image i's RESIZE (its view's size into its canvas by its geometry, the job's filter and pad;
 * a crop computes only the texels it keeps). */
int px_ragged_op(const px_ragged_job *job, int i, px_resize_op *op, pxvm_error *err);

/* The host work of image i: resized into scratch (the op's content, view's channel count) then
 * written as its tiles into the job's host dst. threads: bands of one image (1: none, <= 0 as
 * the work pays for). 0, or -1 with *err set. */
int px_ragged_image_host(const px_ragged_job *job, int i, int threads, pxvm_error *err);

/* The RGBA value of canvas texel (x, y) given the content's texel at (x - cx, y - cy) when
 * inside it: the pad outside (both executors' rule, kept in one place). */
#define PX_TILES_INSIDE(op, x, y) ((x) >= (op)->cx && (x) < (op)->cx + (op)->cw && (y) >= (op)->cy && (y) < (op)->cy + (op)->ch)

#ifdef __cplusplus
}
#endif

#endif
