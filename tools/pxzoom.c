/* pxzoom - enlarge an image by an integer factor with visible pixels (for looking at programs):
 * alpha is made opaque, so instruction pixels with A = 0 stay visible. */
#include <stdio.h>
#include <stdlib.h>

#include "../vm/vm.h"

int main(int argc, char **argv)
{
    if (argc != 4 || atoi(argv[3]) < 1 || atoi(argv[3]) > 64) {
        fprintf(stderr, "usage: pxzoom IN.png OUT.png FACTOR(1..64)\n");
        return 2;
    }
    int k = atoi(argv[3]);
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
