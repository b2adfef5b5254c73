/* fuzz_plan: bytes as a plan (JSON); what parses is compiled, summarized and drawn. */
#include <stdio.h>

#include "../../assembler/plan.h"
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pxvm_plan plan;
    pxvm_error err;
    if (pxvm_plan_parse((const char *)data, size, "fuzz.json", &plan, &err) < 0)
        return 0;
    pxvm_image prog, photo, overlay;
    if (pxvm_plan_compile(&plan, &prog, &err) == 0)
        pxvm_image_free(&prog);
    FILE *null = fopen("/dev/null", "w");
    if (null) {
        pxvm_plan_summary(&plan, null);
        fclose(null);
    }
    if (pxvm_image_alloc(&photo, 64, 48, NULL) == 0) {
        if (pxvm_plan_overlay(&plan, &photo, &overlay, &err) == 0)
            pxvm_image_free(&overlay);
        pxvm_image_free(&photo);
    }
    pxvm_plan_free(&plan);
    return 0;
}
