/* format.c - programs and results as text: an instruction as "SAMPLE src=1 dst=2 ..." (table
 * driven, Q16 and LOD operands as exact decimals), and the hash report of every level of every
 * slot (the goldens' format, `pxrun --hash`), read through an executor. */
#include <inttypes.h>
#include <stdio.h>

#include "vm.h"
#include "../isa/px_sem.h"

/* Exact decimal of v / 2^frac (every such value has a finite decimal expansion). */
static void px__fmt_fixed(int64_t v, int frac, char *buf, size_t len)
{
    uint64_t m = v < 0 ? (uint64_t)(-(v + 1)) + 1 : (uint64_t)v;
    uint64_t ip = m >> frac, fp = m & ((1ull << frac) - 1);
    int n = snprintf(buf, len, "%s%" PRIu64, v < 0 ? "-" : "", ip);
    if (fp && n > 0 && (size_t)n + 2 < len) {
        buf[n++] = '.';
        while (fp && (size_t)n + 1 < len) {
            fp *= 10;
            buf[n++] = (char)('0' + (fp >> frac));
            fp &= (1ull << frac) - 1;
        }
        buf[n] = 0;
    }
}

void pxvm_insn_format(const pxvm_program *prog, const pxi_insn *in, char *buf, size_t len)
{
    const pxi_op_info *op = pxi_op(in->op);
    size_t n = (size_t)snprintf(buf, len, "%s", op->name ? op->name : "?");
    for (int f = 0; f < op->nfields && n < len; f++) {
        const pxi_field_info *fi = &op->fields[f];
        char val[48], lb[16];
        int32_t v = in->a[f];
        switch (fi->kind) {
        case PXK_ZERO: continue;
        case PXK_MASK:
            if (!v)
                continue; /* none: the default */
            /* fall through */
        case PXK_SLOT: snprintf(val, sizeof val, "%s", prog ? pxvm_slot_label(prog, v, lb) : "?"); break;
        case PXK_MODE:
            if (px_mode_reg(v) >= 0)
                snprintf(val, sizeof val, "%s@f%d", px_mode_filter(v) == PX_MODE_NEAREST ? "nearest" : "linear",
                         px_mode_reg(v));
            else
                snprintf(val, sizeof val, "%s", px_mode_filter(v) == PX_MODE_NEAREST ? "nearest" : "linear");
            break;
        case PXK_Q16: px__fmt_fixed(v, 16, val, sizeof val); break;
        case PXK_LOD: px__fmt_fixed(v, 8, val, sizeof val); break;
        case PXK_U8:
        case PXK_FLAG:
        case PXK_REG:
        case PXK_LEVEL:
        case PXK_ROW:
        case PXK_U16:
        case PXK_DIM:
        case PXK_TAPS: snprintf(val, sizeof val, "%d", (int)v); break;
        }
        n += (size_t)snprintf(buf + n, len - n, " %s=%s", fi->name, val);
    }
}

int pxvm_hash_report(const pxvm_executor_ops *ops, pxvm_executor *ex, const pxvm_program *prog, FILE *out,
                     pxvm_error *err)
{
    char lb[16];
    for (int k = 0; k < prog->nslots; k++)
        for (int l = 0; l < prog->slots[k].levels; l++) {
            pxvm_image img;
            if (pxvm_read_image(ops, ex, prog, k, l, 0, &img, err) < 0)
                return -1;
            fprintf(out, "%s L%d %dx%d %016" PRIx64 "\n", pxvm_slot_label(prog, k, lb), l, img.w, img.h,
                    pxvm_hash64(img.px, (size_t)img.w * (size_t)img.h * 4u));
            pxvm_image_free(&img);
        }
    return 0;
}
