/* test_read.c - reads of a slot's levels into device memory on the cuda executor (one kernel
 * through the slots' surfaces, 16-byte stores where the view allows, a copy per item where it is
 * not 4-byte aligned) equal the host reads, byte for byte: widths whose rows end inside a group of
 * 4 texels, several items, levels >= 1, and views at every alignment. Skipped without a GPU. */
#include <stdlib.h>
#include <string.h>

#include "../../include/pxvm.h"
#include "test.h"

#ifdef PXVM_HAVE_CUDA_GL
#include <cuda_runtime_api.h>
#endif

TEST(read_device_views_equal_host_reads_at_every_alignment)
{
#ifndef PXVM_HAVE_CUDA_GL
    printf("  cuda: not built here: skipped\n");
#else
    /* an input of 37 x 23 (rows end 1 texel into a group), its pyramid, samples into an output of
     * 50 x 9 (2 texels past a group): every level of both is read */
    const char *src = ".width 64\n.slot image input 37x23\n.slot out output 50x9\n"
                      "PYRAMID image\n"
                      "SAMPLE image out mode=0 dst_x=0 dst_y=0 w=50 h=9 cu=18.5 cv=11.5 du=0.7 dv=2.1 lod=0.6\n"
                      "HALT\n";
    pxvm_prog *prog = NULL;
    pxvm_runner *run = NULL;
    if (pxvm_prog_assemble(src, "read", NULL, &prog) != 0) {
        px_test_fail(__FILE__, __LINE__, "assemble: %s", pxvm_errmsg());
        return;
    }
    if (pxvm_runner_open(prog, "cuda", 0, 0, 3, &run) != 0) {
        printf("  cuda: not here (%s): skipped\n", pxvm_errmsg());
        pxvm_prog_free(prog);
        return;
    }
    uint64_t seed = 7;
    pxvm_image img[3];
    for (int i = 0; i < 3; i++) {
        img[i] = px_random_image(37, 23, &seed);
        pxvm_view v = pxvm_view_host(img[i].px, 37, 23, 4);
        CHECK_EQ(pxvm_runner_bind(run, 1, i, &v), 0);
    }
    CHECK_EQ(pxvm_runner_run(run), 0);
    uint8_t *dev = NULL;
    size_t cap = 3u * 64u * 64u * 4u + 64u;
    CHECK(cudaMalloc((void **)&dev, cap) == cudaSuccess);
    int checked = 0;
    static const int slots[] = {1, 2};
    for (int si = 0; dev && si < 2; si++)
        for (int level = 0; level < 3; level++) {
            int w, h;
            if (pxvm_runner_slot_size(run, slots[si], &w, &h) != 0)
                break;
            for (int l = 0; l < level; l++)
                w = w > 1 ? w / 2 : 1, h = h > 1 ? h / 2 : 1;
            size_t row = (size_t)w * 4u + 8u, item = row * (size_t)h + 4u; /* strides: 4-byte, not 16-byte */
            uint8_t *want = calloc(3u * item, 1), *got = malloc(3u * item + 16u);
            pxvm_view hv = {want, -1, 3, w, h, 4, (int64_t)item, (int64_t)row, 4, 1};
            CHECK_EQ(pxvm_runner_read(run, slots[si], level, 0, &hv), 0);
            static const size_t offsets[] = {0, 4, 8, 1}; /* 16-byte, 4-byte aligned, and not (a copy) */
            for (size_t o = 0; o < 4; o++) {
                for (int packed = 0; packed < 2; packed++) { /* packed rows (16-byte strides when w % 4 == 0) */
                    size_t r = packed ? (size_t)w * 4u : row, it = packed ? r * (size_t)h : item;
                    pxvm_view dv = {dev + offsets[o], 0, 3, w, h, 4, (int64_t)it, (int64_t)r, 4, 1};
                    CHECK(cudaMemset(dev, 0xA5, cap) == cudaSuccess);
                    if (pxvm_runner_read(run, slots[si], level, 0, &dv) != 0) {
                        px_test_fail(__FILE__, __LINE__, "read slot %d level %d at +%zu: %s", slots[si], level, offsets[o],
                                     pxvm_errmsg());
                        continue;
                    }
                    CHECK(cudaMemcpy(got, dev + offsets[o], 3u * it, cudaMemcpyDeviceToHost) == cudaSuccess);
                    int same = 1;
                    for (int i = 0; i < 3; i++)
                        for (int y = 0; y < h; y++)
                            same &= !memcmp(got + (size_t)i * it + (size_t)y * r, want + (size_t)i * item + (size_t)y * row,
                                            (size_t)w * 4u);
                    if (!same)
                        px_test_fail(__FILE__, __LINE__, "slot %d level %d (%dx%d) at +%zu, %s rows: device read differs",
                                     slots[si], level, w, h, offsets[o], packed ? "packed" : "padded");
                    checked += same;
                }
            }
            free(want);
            free(got);
        }
    printf("  %d device reads equal the host's\n", checked);
    CHECK_EQ(checked, 2 * 3 * 4 * 2);
    cudaFree(dev);
    for (int i = 0; i < 3; i++)
        pxvm_image_free(&img[i]);
    pxvm_runner_close(run);
    pxvm_prog_free(prog);
#endif
}
