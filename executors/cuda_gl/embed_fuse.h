/* embed_fuse.h - a fused EMBED's write (SPEC "Fused EMBED"): the fetch kernel (fetch.cu) hands
 * each texel it samples for a fused atlas to the EMBED's staged rows instead of the atlas, in the
 * byte order of px_emb_stage_row (embed_tile.h), so that the GEMM reads the rows the staging
 * kernel would have made and the atlas is neither written nor read back. Written so that gcc
 * compiles it too: tests/unit/test_fuse.c checks it on the host against px_emb_stage_row.
 * The includer defines PX_SEM (isa/px_sem.h). */
#ifndef PX_EMBED_FUSE_H
#define PX_EMBED_FUSE_H

#include <stddef.h>
#include <stdint.h>

/* Where the fetches of one atlas slot write instead (tok NULL: the atlas itself). */
typedef struct px_emb_fuse {
    uint8_t *tok;        /* the EMBED's staged rows: row item * ntok + t, kb bytes each */
    int kb;              /* bytes per row (K rounded up; the bytes past K stay 0) */
    int c, pw, ph, cols, ntok; /* channels, patch size, atlas columns, tokens */
} px_emb_fuse;

/* Texel (x, y) of item `item`'s atlas, value v (R | G << 8 | B << 16 | A << 24), into its token's
 * row: byte c * area + (y mod ph) * pw + x mod pw of token (y div ph) * cols + x div pw, for the
 * C channels; a texel of no token (right of cols * pw, or a token >= ntok) is dropped. */
PX_SEM void px_emb_fused_store(const px_emb_fuse *f, int item, int x, int y, uint32_t v)
{
    int tx = x / f->pw, ty = y / f->ph;
    if (x < 0 || y < 0 || tx >= f->cols)
        return;
    int t = ty * f->cols + tx;
    if (t >= f->ntok)
        return;
    int area = f->pw * f->ph, p = (y - ty * f->ph) * f->pw + (x - tx * f->pw);
    uint8_t *row = f->tok + ((size_t)item * (size_t)f->ntok + (size_t)t) * (size_t)f->kb;
    for (int c = 0; c < f->c; c++)
        row[c * area + p] = (uint8_t)(v >> (8 * c));
}

#endif
