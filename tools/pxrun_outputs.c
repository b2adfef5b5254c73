/* pxrun_outputs.c - the files pxrun writes after a run: PNG (--out, -o), .npy (--npy), and
 * the fixation outputs (the fixations printed, --geometry, --overlay), all added to the
 * outputs committed together. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../assembler/plan.h"
#include "../isa/px_sem.h"
#include "pxrun.h"

/* The bytes of a --npy output: the patches of an atlas (as the executor reads them), or the
 * whole slot as N = 1. */
/* What --npy writes of a slot, as pixels (into *img, allocated here) and its (N, H, W, 4) shape:
 * the patches of an atlas, else the whole level 0 as N = 1. */
int px_run_npy_array(const pxvm_executor_ops *ops, pxvm_executor *ex, const pxvm_program *prog, int slot,
                     pxvm_image *img, int shape[4], pxvm_error *err)
{
    const pxvm_slot *s = &prog->slots[slot];
    shape[3] = 4;
    if (!s->patch_count) {
        shape[0] = 1, shape[1] = s->h, shape[2] = s->w;
        return pxvm_read_image(ops, ex, prog, slot, 0, 0, img, err);
    }
    shape[0] = s->patch_count, shape[1] = s->patch_h, shape[2] = s->patch_w;
    if (pxvm_image_alloc(img, s->patch_w, s->patch_h * s->patch_count, err) < 0)
        return -1;
    pxvm_view v = pxvm_image_view(img);
    if (ops->read(ex, slot, 0, 0, &v, 1, err) < 0) {
        pxvm_image_free(img);
        return -1;
    }
    return 0;
}

static int px__npy_bytes(const pxvm_executor_ops *ops, pxvm_executor *ex, const pxvm_program *prog, int slot,
                         uint8_t **out, size_t *len, pxvm_error *err)
{
    pxvm_image img;
    int shape[4];
    if (px_run_npy_array(ops, ex, prog, slot, &img, shape, err) < 0)
        return -1;
    int rc = pxvm_npy_encode_shape(img.px, 4, shape, out, len, err);
    pxvm_image_free(&img);
    return rc;
}

/* Reads every requested output and writes it to a temporary file (committed by the caller). */
int px_run_outputs(const pxvm_executor_ops *ops, pxvm_executor *ex, const pxvm_program *prog, const px_run_args *a,
                   pxvm_outputs *files, pxvm_error *err)
{
    for (int kind = 0; kind < 3; kind++) {
        int n = kind == 0 ? a->nout : kind == 1 ? (a->frames ? 0 : a->nnpy) : (a->final_path ? 1 : 0);
        for (int i = 0; i < n; i++) {
            int slot = kind == 0 ? a->slot_of[1][i] : kind == 1 ? a->slot_of[2][i] : 0;
            int level = kind == 0 ? a->outs[i].level : 0;
            const char *path = kind == 0 ? a->outs[i].path : kind == 1 ? a->npys[i].path : a->final_path;
            pxvm_image img = {0, 0, NULL};
            uint8_t *bytes = NULL;
            size_t len = 0;
            int r = kind == 1 ? px__npy_bytes(ops, ex, prog, slot, &bytes, &len, err)
                              : pxvm_read_image(ops, ex, prog, slot, level, 0, &img, err);
            if (r == 0 && kind != 1)
                r = pxvm_png_encode_ex(&img, a->png, &bytes, &len, err);
            pxvm_image_free(&img);
            if (r == 0)
                r = pxvm_outputs_add(files, path, bytes, len, err);
            free(bytes);
            if (r < 0)
                return -1;
        }
    }
    return 0;
}

/* The registers ARGMAX writes (0 .. highest + 1), or 0. */
static int px__written_registers(const pxvm_program *prog)
{
    int n = 0;
    for (uint32_t i = 0; i < prog->ninsns; i++)
        if (prog->insns[i].op == PX_OP_ARGMAX && PX_ARG(&prog->insns[i], ARGMAX, reg) + 1 > n)
            n = PX_ARG(&prog->insns[i], ARGMAX, reg) + 1;
    return n;
}

/* After the run: the fixations found (printed), --geometry files and the --overlay picture. */
int px_run_fixation_outputs(const pxvm_executor_ops *ops, pxvm_executor *ex, const pxvm_program *prog,
                            const px_run_args *a, const pxvm_image *photo, pxvm_outputs *files, pxvm_error *err)
{
    int32_t fix[PX_FIX_REGS * 2];
    if (ops->read_state(ex, PXVM_STATE_FIXATIONS, 0, 0, 1, fix, -1, err) < 0)
        return -1;
    int found = px__written_registers(prog);
    for (int k = 0; k < found; k++)
        printf("fixation %d: %.4f %.4f\n", k, fix[2 * k] / 65536.0, fix[2 * k + 1] / 65536.0);
    for (int i = 0; i < a->ngeom + (a->overlay_path ? 1 : 0); i++) {
        int slot = i < a->ngeom ? pxvm_slot_lookup(prog, a->geoms[i].slot) : -1;
        if (i == a->ngeom) /* the overlay: the first atlas */
            for (int k = 0; k < prog->nslots && slot < 0; k++)
                slot = prog->geom_base[k] >= 0 ? k : -1;
        if (i < a->ngeom && slot < 0)
            return pxvm_fail(err, PXE_NO_SLOT, -1, -1, a->geoms[i].slot);
        if (i == a->ngeom && (slot < 0 || !photo))
            return pxvm_fail(err, PXE_OVERLAY_NO_ATLAS, -1, -1);
        const pxvm_slot *s = &prog->slots[slot];
        int32_t *g = malloc(sizeof(int32_t) * PX_GEOM_INTS * (size_t)(s->patch_count ? s->patch_count : 1));
        uint8_t *bytes = NULL;
        size_t len = 0;
        pxvm_image pic = {0, 0, NULL};
        int rc = g ? ops->read_state(ex, PXVM_STATE_GEOMETRY, slot, 0, 1, g, -1, err)
                   : pxvm_fail(err, PXE_NOMEM, -1, -1, 0ull);
        if (rc == 0 && i < a->ngeom) {
            const int shape[2] = {s->patch_count, PX_GEOM_INTS};
            rc = pxvm_npy_encode_typed(g, "<i4", 4, 2, shape, &bytes, &len, err);
        } else if (rc == 0) {
            rc = pxvm_geometry_overlay(photo, g, s->patch_count, s->patch_w, s->patch_h, fix, found ? found : a->nfix,
                                       &pic, err);
            if (rc == 0)
                rc = pxvm_png_encode_ex(&pic, a->png, &bytes, &len, err);
        }
        if (rc == 0)
            rc = pxvm_outputs_add(files, i < a->ngeom ? a->geoms[i].path : a->overlay_path, bytes, len, err);
        free(g);
        free(bytes);
        pxvm_image_free(&pic);
        if (rc < 0)
            return -1;
    }
    return 0;
}
