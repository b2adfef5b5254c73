/* fuzz_common.h - limits small enough for fuzzing: every target rejects large inputs through
 * the same limits users set with --max-side / --max-memory / --max-insns / --max-steps. */
#ifndef PX_FUZZ_COMMON_H
#define PX_FUZZ_COMMON_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../vm/vm.h"
#include "../../executors/registry.h"

static inline pxvm_limits px_fuzz_limits(void)
{
    pxvm_limits lim;
    pxvm_limits_default(&lim);
    lim.max_side = 1024;
    lim.max_memory = 16u << 20;
    lim.max_insns = 4096;
    lim.max_steps = 64;
    return lim;
}

/* Bytes as a raw program image: byte 0 (+1) is the width, the rest RGBA pixels (a partial last
 * row is dropped). Returns 0 with img allocated, or -1. */
static inline int px_fuzz_raw_image(const uint8_t *d, size_t n, pxvm_image *img)
{
    if (n < 1)
        return -1;
    int w = (int)d[0] + 1;
    size_t pixels = (n - 1) / 4, h = pixels / (size_t)w;
    if (h < 1)
        return -1;
    if (pxvm_image_alloc(img, w, (int)h, NULL) < 0)
        return -1;
    memcpy(img->px, d + 1, (size_t)w * h * 4u);
    return 0;
}

#endif
