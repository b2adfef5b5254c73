/* fuzz_jpeg: any bytes as an image file (JPEG, and PNG by its signature), through the decoders
 * pxrun --in and pxvm_image_load use: strict, lenient, and bound to a 64x48 slot, under small
 * limits. Whatever strict decodes, lenient decodes to the same pixels without a warning (at most
 * strict's note of bytes after the end); what strict refuses naming --lenient, lenient decodes;
 * and a size the header did not promise never comes out. */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pxvm_limits strict = px_fuzz_limits(), lenient = strict;
    lenient.flags = PXVM_DECODE_LENIENT;
    pxvm_image a, b;
    pxvm_error err;
    int rs = pxvm_image_decode_any(data, size, "fuzz.jpg", &strict, &a, &err);
    pxvm_code strict_note = rs == 0 ? err.code : PXE_NONE;
    int names_lenient = rs < 0 && strstr(err.msg, "--lenient") != NULL;
    if (rs == 0 && ((err.code != PXE_NONE && !pxvm_decode_note(&err)) || a.w < 1 || a.h < 1 || (uint32_t)a.w > strict.max_side ||
                    (uint32_t)a.h > strict.max_side))
        abort();
    int rl = pxvm_image_decode_any(data, size, "fuzz.jpg", &lenient, &b, &err);
    if (rl == 0 && (b.w < 1 || b.h < 1 || (uint32_t)b.w > lenient.max_side || (uint32_t)b.h > lenient.max_side))
        abort();
    if (rs == 0 && (rl != 0 || err.code != strict_note || a.w != b.w || a.h != b.h ||
                    memcmp(a.px, b.px, (size_t)a.w * (size_t)a.h * 4u)))
        abort(); /* strict accepts only what lenient decodes without a warning */
    if (rs < 0 && rl == 0 && (err.code == PXE_NONE || pxvm_decode_note(&err)))
        abort(); /* lenient went past something strict refused: it must say what (a warning) */
    if (names_lenient && rl != 0)
        abort(); /* the refusal said --lenient decodes it */
    pxvm_image_want want = {64, 48, 1, "image"};
    pxvm_image c;
    if (pxvm_image_decode_want(data, size, "fuzz.jpg", &lenient, &want, &c, &err) == 0) {
        if (c.w != 64 || c.h != 48)
            abort();
        pxvm_image_free(&c);
    }
    if (rs == 0)
        pxvm_image_free(&a);
    if (rl == 0)
        pxvm_image_free(&b);
    return 0;
}
