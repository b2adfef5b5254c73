/* tokens.c - tokens for models (isa/SPEC.md, "Tokens for models"): presets, the format's
 * checks, the per-channel value tables (the only float math of a token read, done here on the
 * host), the exact float16/bfloat16 roundings, and the conversion of an atlas's patches that
 * the CPU executor spreads over its threads (and the CUDA-GL one uses for outputs it already
 * downloaded). */
#include "tokens.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- presets -------------------------------------------------------------------------------- */

static const struct {
    const char *name;
    double mean[3], std[3];
} px__presets[] = {
    {"clip", {0.48145466, 0.4578275, 0.40821073}, {0.26862954, 0.26130258, 0.27577711}},
    {"siglip", {0.5, 0.5, 0.5}, {0.5, 0.5, 0.5}},
    {"imagenet", {0.485, 0.456, 0.406}, {0.229, 0.224, 0.225}},
    {"none", {0.0, 0.0, 0.0}, {1.0, 1.0, 1.0}},
};

int pxvm_token_preset(const char *name, pxvm_token_format *fmt, pxvm_error *err)
{
    for (size_t k = 0; k < sizeof px__presets / sizeof px__presets[0]; k++) {
        if (strcmp(name, px__presets[k].name))
            continue;
        memset(fmt, 0, sizeof *fmt);
        fmt->dtype = PXVM_TOKENS_FLOAT32, fmt->layout = PXVM_TOKENS_NCHW, fmt->alpha = 0, fmt->nvalues = 3;
        fmt->rescale = 1.0 / 255.0;
        for (int c = 0; c < 3; c++)
            fmt->mean[c] = px__presets[k].mean[c], fmt->std[c] = px__presets[k].std[c];
        fmt->mean[3] = 0.0, fmt->std[3] = 1.0;
        return 0;
    }
    return pxvm_fail(err, PXE_TOKEN_PRESET, -1, -1, name);
}

/* ---- exact roundings ------------------------------------------------------------------------ */

uint16_t pxvm_f32_to_f16(uint32_t f)
{
    uint32_t sign = (f >> 16) & 0x8000u, a = f & 0x7FFFFFFFu;
    if (a > 0x7F800000u) /* NaN (no token is one: the format's checks exclude it) */
        return (uint16_t)(sign | 0x7E00u);
    if (a >= 0x477FF000u) /* >= 65520 (half-way above 65504, ties to the even infinity) and inf */
        return (uint16_t)(sign | 0x7C00u);
    int e = (int)(a >> 23) - 127 + 15; /* the float16 biased exponent */
    uint32_t mant = a & 0x7FFFFFu;
    if (e >= 1) {                      /* normal: drop 13 bits, rounding; a carry moves the exponent */
        uint32_t h = ((uint32_t)e << 10) | (mant >> 13), rest = mant & 0x1FFFu;
        if (rest > 0x1000u || (rest == 0x1000u && (h & 1u)))
            h++;
        return (uint16_t)(sign | h);
    }
    int shift = 14 - e; /* subnormal: units of 2^-24 */
    if (shift > 24)     /* below half the smallest subnormal (2^-25 and less: 0 by ties to even) */
        return (uint16_t)sign;
    uint32_t m = mant | 0x800000u, h = m >> shift, rest = m & ((1u << shift) - 1u), half = 1u << (shift - 1);
    if (rest > half || (rest == half && (h & 1u)))
        h++;
    return (uint16_t)(sign | h);
}

uint16_t pxvm_f32_to_bf16(uint32_t f)
{
    if ((f & 0x7FFFFFFFu) > 0x7F800000u)
        return (uint16_t)((f >> 16) | 0x40u);
    return (uint16_t)((f + 0x7FFFu + ((f >> 16) & 1u)) >> 16);
}

/* ---- the format and its table --------------------------------------------------------------- */

static uint32_t px__bits(float v)
{
    uint32_t b;
    memcpy(&b, &v, 4);
    return b;
}

int pxvm_token_table_build(const pxvm_token_format *fmt, pxvm_token_table *t, pxvm_error *err)
{
    if (fmt->dtype < PXVM_TOKENS_FLOAT32 || fmt->dtype > PXVM_TOKENS_BFLOAT16) /* [A-TOKENS-1] */
        return pxvm_fail(err, PXE_TOKEN_DTYPE, -1, -1, (int)fmt->dtype);
    if (fmt->layout < PXVM_TOKENS_NCHW || fmt->layout > PXVM_TOKENS_FLAT) /* [A-TOKENS-2] */
        return pxvm_fail(err, PXE_TOKEN_LAYOUT, -1, -1, (int)fmt->layout);
    if ((fmt->alpha != 0 && fmt->alpha != 1) || fmt->nvalues < 3 || fmt->nvalues > 3 + fmt->alpha) /* [A-TOKENS-3] */
        return fmt->alpha == 1   ? pxvm_fail(err, PXE_TOKEN_NVALUES_ALPHA, -1, -1, fmt->nvalues)
               : fmt->alpha == 0 ? pxvm_fail(err, PXE_TOKEN_NVALUES, -1, -1, fmt->nvalues)
                                 : pxvm_fail(err, PXE_TOKEN_ALPHA, -1, -1, fmt->nvalues, fmt->alpha);
    if (fmt->rule != PXVM_TOKENS_RULE_FLOAT32 && fmt->rule != PXVM_TOKENS_RULE_RESCALE_FLOAT64) /* [A-TOKENS-11] */
        return pxvm_fail(err, PXE_TOKEN_RULE, -1, -1, (int)fmt->rule);
    float r = (float)fmt->rescale;
    if (!(isfinite(r) && r > 0.0f)) /* [A-TOKENS-4] (NaN fails the comparison) */
        return pxvm_fail(err, PXE_TOKEN_RESCALE, -1, -1, fmt->rescale);
    int C = 3 + fmt->alpha;
    float mean[4], sd[4];
    for (int c = 0; c < C; c++) {
        int given = c < fmt->nvalues;
        double mv = given ? fmt->mean[c] : 0.0, sv = given ? fmt->std[c] : 1.0;
        mean[c] = (float)mv, sd[c] = (float)sv;
        if (!isfinite(mean[c])) /* [A-TOKENS-5] */
            return pxvm_fail(err, PXE_TOKEN_MEAN, -1, -1, c, mv);
        if (!isfinite(sd[c]) || sd[c] == 0.0f) /* [A-TOKENS-6] */
            return pxvm_fail(err, PXE_TOKEN_STD, -1, -1, c, sv);
    }
    t->dtype = fmt->dtype, t->layout = fmt->layout, t->channels = C;
    t->elem = fmt->dtype == PXVM_TOKENS_FLOAT32 ? 4 : 2;
    memset(t->value, 0, sizeof t->value);
    for (int c = 0; c < C; c++)
        for (int u = 0; u < 256; u++) {
            /* one binary32 operation per statement (-ffp-contract=off: no fused multiply-add);
             * rule 1 rescales in double with the rescale as given, then rounds once to binary32
             * (transformers 4.x: image.astype(np.float64) * scale, then .astype(np.float32)) */
            float x = fmt->rule == PXVM_TOKENS_RULE_RESCALE_FLOAT64 ? (float)((double)u * fmt->rescale) : (float)u * r;
            float d = x - mean[c];
            float y = d / sd[c];
            uint32_t b = px__bits(y);
            t->value[c][u] = fmt->dtype == PXVM_TOKENS_FLOAT32 ? b
                             : fmt->dtype == PXVM_TOKENS_FLOAT16 ? pxvm_f32_to_f16(b)
                                                                 : pxvm_f32_to_bf16(b);
            uint32_t mag = t->value[c][u] & (fmt->dtype == PXVM_TOKENS_FLOAT32 ? 0x7FFFFFFFu : 0x7FFFu);
            if (!isfinite(y) || mag >= (fmt->dtype == PXVM_TOKENS_FLOAT32   ? 0x7F800000u
                                        : fmt->dtype == PXVM_TOKENS_FLOAT16 ? 0x7C00u
                                                                            : 0x7F80u)) { /* [A-TOKENS-10] */
                return pxvm_fail(err, PXE_TOKEN_NOT_FINITE, -1, -1, u, c, (double)y,
                                 fmt->dtype == PXVM_TOKENS_FLOAT32   ? "float32"
                                 : fmt->dtype == PXVM_TOKENS_FLOAT16 ? "float16"
                                                                     : "bfloat16",
                                 (double)r, c, (double)mean[c], c, (double)sd[c]);
            }
        }
    return 0;
}

int pxvm_check_tokens(const pxvm_program *prog, int batch, int slot, int item0, int items, const void *dst,
                      pxvm_error *err)
{
    char lb[16];
    if (slot < 0 || slot >= prog->nslots) /* [A-TOKENS-7] */
        return pxvm_fail(err, PXE_TOKEN_SLOT_RANGE, -1, -1, slot, prog->nslots - 1);
    if (!prog->slots[slot].patch_count)
        return pxvm_fail(err, PXE_TOKEN_NO_ATLAS, -1, -1, slot, pxvm_slot_label(prog, slot, lb));
    if (items < 1 || item0 < 0 || item0 > batch - items) /* [A-TOKENS-8] */
        return pxvm_fail(err, PXE_TOKEN_ITEMS, -1, -1, item0, (long long)item0 + items - 1, items, item0, batch,
                         batch - 1);
    if (!dst)
        return pxvm_fail(err, PXE_TOKEN_NULL_DST, -1, -1);
    return 0;
}

size_t pxvm_tokens_item_bytes(const pxvm_slot *s, const pxvm_token_table *t)
{
    return (size_t)s->patch_count * (size_t)t->channels * (size_t)s->patch_h * (size_t)s->patch_w * (size_t)t->elem;
}

/* ---- conversion ----------------------------------------------------------------------------- */

/* One patch, the format's constants known to the compiler in each instance (C, elem, planar):
 * planar layouts go channel by channel along a row (contiguous stores, a gather the vectorizer
 * can make of the lookups), interleaved ones texel by texel. */
#define PX__PATCH(C, T, PLANAR)                                                                            \
    for (int y = 0; y < ph; y++) {                                                                         \
        const uint8_t *row = src + (size_t)y * (size_t)level_w * 4u;                                       \
        if (PLANAR) {                                                                                      \
            for (int c = 0; c < (C); c++) {                                                                \
                T *o = (T *)out + (size_t)c * plane + (size_t)y * (size_t)pw;                              \
                const uint32_t *v = t->value[c];                                                           \
                for (int x = 0; x < pw; x++)                                                               \
                    o[x] = (T)v[row[4 * x + c]];                                                           \
            }                                                                                              \
        } else {                                                                                           \
            T *o = (T *)out + (size_t)y * (size_t)pw * (C);                                                \
            for (int x = 0; x < pw; x++)                                                                   \
                for (int c = 0; c < (C); c++)                                                              \
                    o[(size_t)x * (C) + (size_t)c] = (T)t->value[c][row[4 * x + c]];                       \
        }                                                                                                  \
    }

/* Wider vector variants where the CPU has them (gather instructions), as the CPU executor's hot
 * loops (executors/cpu/cpu_slot.h, PX_VECTOR_CLONES); the portable build is the default. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__)
__attribute__((target_clones("arch=x86-64-v4", "avx2", "default")))
#endif
void pxvm_tokens_convert(const pxvm_token_table *t, const pxvm_slot *s, const uint8_t *level0, int level_w, void *dst,
                         int p0, int p1)
{
    int cols = s->w / s->patch_w, pw = s->patch_w, ph = s->patch_h, planar = t->layout != PXVM_TOKENS_NHWC;
    size_t plane = (size_t)pw * (size_t)ph, per = plane * (size_t)t->channels * (size_t)t->elem;
    for (int p = p0; p < p1; p++) {
        const uint8_t *src = level0 + ((size_t)((p / cols) * ph) * (size_t)level_w + (size_t)((p % cols) * pw)) * 4u;
        uint8_t *out = (uint8_t *)dst + (size_t)p * per;
        if (t->elem == 4) {
            if (t->channels == 3 && planar)
                PX__PATCH(3, uint32_t, 1)
            else if (t->channels == 3)
                PX__PATCH(3, uint32_t, 0)
            else if (planar)
                PX__PATCH(4, uint32_t, 1)
            else
                PX__PATCH(4, uint32_t, 0)
        } else {
            if (t->channels == 3 && planar)
                PX__PATCH(3, uint16_t, 1)
            else if (t->channels == 3)
                PX__PATCH(3, uint16_t, 0)
            else if (planar)
                PX__PATCH(4, uint16_t, 1)
            else
                PX__PATCH(4, uint16_t, 0)
        }
    }
}
