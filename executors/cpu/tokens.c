/* tokens.c - tokens for models on the CPU executor: an atlas's patches through the format's
 * per-channel table (vm/tokens.c builds it and converts a run of patches), spread over the
 * threads as the uint8 patch read is (run.c). */
#include "../../vm/tokens.h"
#include "cpu_executor.h"

typedef struct {
    const pxvm_token_table *t;
    const pxvm_slot *s;
    const uint8_t *src;
    int src_w;
    void *dst;
} px__tokens_job;

static void px__tokens_part(void *ctx, int p0, int p1)
{
    const px__tokens_job *j = ctx;
    pxvm_tokens_convert(j->t, j->s, j->src, j->src_w, j->dst, p0, p1);
}

int px_cpu_read_tokens(pxvm_executor *ex, int slot, int item0, int items, const pxvm_token_table *t, void *dst,
                       int device, pxvm_error *err)
{
    if (pxvm_check_tokens(ex->prog, ex->batch, slot, item0, items, dst, err) < 0)
        return -1;
    if (device >= 0)
        return pxvm_fail(err, PXE_HOST_ONLY_WRITE, -1, -1, "tokens");
    px_cpu_wipe_flush(ex); /* tokens between a retarget and a run: the initial state's */
    const pxvm_slot *s = &ex->prog->slots[slot];
    size_t per_item = pxvm_tokens_item_bytes(s, t);
    for (int i = 0; i < items; i++) {
        const px_cpu_src *v = &ex->all_view[(size_t)(item0 + i) * (size_t)ex->nslots + (size_t)slot];
        px__tokens_job job = {t, s, v->level[0], v->w[0], (uint8_t *)dst + (size_t)i * per_item};
        px_pool_for(ex->pool, s->patch_count, 32, px__tokens_part, &job);
    }
    return 0;
}
