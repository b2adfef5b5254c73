/* plans.c - see plans.h. */
#include "plans.h"

#include <math.h>
#include <string.h>

static int32_t px__q16(double v) { return (int32_t)llround(v * 65536.0); }

void pxvm_plan_foveate273(pxvm_builder *b, int w, int h)
{
    const int grid = 17, budget = 273, patch = 16;
    const double m0 = 1.0, e0 = 0.5, fix_x = 0.5, fix_y = 0.5, lod_max = 4.0;
    int img = pxvm_build_slot(b, PXI_ROLE_INPUT, "image", w, h);
    int atlas = pxvm_build_slot(b, PXI_ROLE_OUTPUT, "atlas", grid * patch, grid * patch);
    pxvm_build_patches(b, atlas, patch, patch, budget);
    int32_t f[PXI_MAX_FIELDS] = {0};
    f[PX_FI(PYRAMID, slot)] = img;
    pxvm_build_insn(b, PX_OP_PYRAMID, f);
    for (int p = 0; p < budget; p++) {
        double x = (p % grid + 0.5) / grid, y = (p / grid + 0.5) / grid;
        double e = sqrt((x - fix_x) * (x - fix_x) + (y - fix_y) * (y - fix_y));
        double lod = -log2(m0 / (e + e0));
        lod = lod < 0 ? 0 : (lod > lod_max ? lod_max : lod);
        int32_t lod_q8 = (int32_t)llround(lod * 256.0);
        double step = exp2(lod_q8 / 256.0); /* the step follows the stored LOD exactly */
        memset(f, 0, sizeof f);
        f[PX_FI(SAMPLE, src)] = img;
        f[PX_FI(SAMPLE, dst)] = atlas;
        f[PX_FI(SAMPLE, mode)] = PX_MODE_LINEAR;
        f[PX_FI(SAMPLE, dst_x)] = (p % grid) * patch;
        f[PX_FI(SAMPLE, dst_y)] = (p / grid) * patch;
        f[PX_FI(SAMPLE, w)] = patch;
        f[PX_FI(SAMPLE, h)] = patch;
        f[PX_FI(SAMPLE, cu)] = px__q16(x * w);
        f[PX_FI(SAMPLE, cv)] = px__q16(y * h);
        f[PX_FI(SAMPLE, du)] = px__q16(step);
        f[PX_FI(SAMPLE, dv)] = px__q16(step);
        f[PX_FI(SAMPLE, lod)] = lod_q8;
        pxvm_build_insn(b, PX_OP_SAMPLE, f);
    }
    pxvm_build_insn(b, PX_OP_HALT, NULL);
}
