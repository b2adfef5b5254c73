/* pxzoom - enlarge an image by an integer factor with visible pixels (for looking at programs):
 * alpha is made opaque, so instruction pixels with A = 0 stay visible. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../vm/vm.h"
#include "outputs.h"

int main(int argc, char **argv)
{
    if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        printf("usage: pxzoom IN.png OUT.png FACTOR(1..64)\n");
        return 0;
    }
    char *end = NULL;
    long kl = argc == 4 ? strtol(argv[3], &end, 10) : 0;
    if (argc != 4 || !end || *end || end == argv[3] || kl < 1 || kl > 64) {
        fprintf(stderr, "usage: pxzoom IN.png OUT.png FACTOR(1..64)%s%s%s\n", argc == 4 ? ": factor '" : "",
                argc == 4 ? argv[3] : "", argc == 4 ? "' is not an integer 1..64" : "");
        return 2;
    }
    int k = (int)kl;
    pxvm_limits lim;
    pxvm_limits_default(&lim);
    pxvm_error err = {0};
    pxvm_image in, out;
    pxvm_outputs o = {0};
    uint8_t *png = NULL;
    size_t len = 0;
    if (pxvm_png_load(argv[1], &lim, &in, &err) < 0 || pxvm_image_alloc(&out, in.w * k, in.h * k, &err) < 0) {
        fprintf(stderr, "pxzoom: %s\n", err.msg);
        return 1;
    }
    for (int y = 0; y < out.h; y++)
        for (int x = 0; x < out.w; x++) {
            const uint8_t *s = in.px + ((size_t)(y / k) * (size_t)in.w + (size_t)(x / k)) * 4u;
            uint8_t *d = out.px + ((size_t)y * (size_t)out.w + (size_t)x) * 4u;
            d[0] = s[0], d[1] = s[1], d[2] = s[2], d[3] = 255;
        }
    if (pxvm_png_encode(&out, &png, &len, &err) < 0 || pxvm_outputs_add(&o, argv[2], png, len, &err) < 0 ||
        pxvm_outputs_commit(&o, &err) < 0) {
        fprintf(stderr, "pxzoom: %s\n", err.msg);
        return 1;
    }
    free(png);
    pxvm_image_free(&in);
    pxvm_image_free(&out);
    return 0;
}
