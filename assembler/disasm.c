/* disasm.c - .pxi -> pxasm source that reassembles to the same pixels (and so the same file).
 * Header and slots become directives, instructions print from the opcode table with exact
 * decimals, and every other non-zero pixel (data, vectors) becomes a .pixels block. */
#include "pxasm.h"

#include <string.h>

void pxasm_disassemble(const pxvm_program *prog, const char *name, FILE *out)
{
    const pxvm_image *img = &prog->image;
    uint32_t header_end = PXI_HEADER_PIXELS + PXI_SLOT_PIXELS * (uint32_t)(prog->nslots - 1);
    fprintf(out, "; %s: pxvm format %d.%d, %dx%d program image, %d slots, %u instructions\n", name, PXI_VERSION_MAJOR,
            prog->format_minor, img->w, img->h, prog->nslots - 1, prog->ninsns);
    fprintf(out, ".width %d\n.height %d\n", img->w, img->h);
    if (prog->code_start != header_end)
        fprintf(out, ".code_start %u\n", prog->code_start);
    for (int k = 1; k < prog->nslots; k++) {
        const pxvm_slot *s = &prog->slots[k];
        fprintf(out, ".slot %s %s %dx%d", s->name[0] ? s->name : "-", pxi_role_name(s->role), s->w, s->h);
        if (s->patch_count)
            fprintf(out, " patches=%dx%dx%d", s->patch_w, s->patch_h, s->patch_count);
        if (s->flags & PXI_SLOT_PERSIST)
            fprintf(out, " persistent");
        if (s->flags & PXI_SLOT_ANYSIZE) { /* the bounds as the descriptor holds them (0: not written) */
            const uint8_t *d = img->px + 4u * (size_t)s->desc_pixel;
            uint32_t lo = pxi_read_le(d, 3, 0, 2), hi = pxi_read_le(d, 3, 2, 2), pixels = pxi_read_le(d, 4, 0, 4);
            fprintf(out, " any");
            if (lo)
                fprintf(out, " min=%u", lo);
            if (hi)
                fprintf(out, " max=%u", hi);
            if (pixels)
                fprintf(out, " pixels=%u", pixels);
        }
        if (s->role == PXI_ROLE_DATA)
            fprintf(out, " at=(%d,%d)", s->data_x, s->data_y);
        fprintf(out, "   ; slot %d\n", k);
    }
    for (uint32_t i = 0; i < prog->ninsns; i++) {
        const pxi_insn *in = &prog->insns[i];
        char text[1024];
        int x, y;
        pxvm_insn_format(prog, in, text, sizeof text);
        pxvm_stream_xy(prog, in->pc, &x, &y);
        fprintf(out, "%-100s ; [%u] (%d,%d) %s\n", text, i, x, y, pxi_op(in->op)->synopsis);
    }
    /* everything else that is not zero, one .pixels block per row span */
    for (int yy = 0; yy < img->h; yy++) {
        int x0 = -1, x1 = -1;
        for (int xx = 0; xx < img->w; xx++) {
            uint32_t idx = (uint32_t)yy * (uint32_t)img->w + (uint32_t)xx;
            const uint8_t *p = img->px + 4u * idx;
            if (idx < prog->code_end || !(p[0] | p[1] | p[2] | p[3]))
                continue;
            if (x0 < 0)
                x0 = xx;
            x1 = xx;
        }
        if (x0 < 0)
            continue;
        fprintf(out, ".pixels %d %d\n", x0, yy);
        for (int xx = x0; xx <= x1; xx++) {
            const uint8_t *p = img->px + 4u * ((size_t)yy * (size_t)img->w + (size_t)xx);
            fprintf(out, "%02x%02x%02x%02x%s", p[0], p[1], p[2], p[3], (xx - x0) % 16 == 15 || xx == x1 ? "\n" : " ");
        }
        fprintf(out, ".end\n");
    }
}
