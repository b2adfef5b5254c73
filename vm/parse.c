/* parse.c - the loader: a .pxi image to a pxvm_program. Here the header, the slot descriptors and
 * each instruction's decoding; then the other stages in turn (loader.h: validate.c, launch_plan.c,
 * geometry.c). Everything is checked once, at load, before any run. */
#include "loader.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../isa/px_sem.h"

static uint32_t px__u32(const pxvm_image *img, uint32_t index) { return pxi_read_le(PX_VM_PIX(img, index), 0, 0, 4); }

/* Stream pixel coordinates for error messages, before prog->image is set. */
#define PX__AT(img, i) (int)((i) % (uint32_t)(img)->w), (int)((i) / (uint32_t)(img)->w)

void pxvm_insn_decode(const uint8_t *pixels, uint32_t pc, const pxi_op_info *op, pxi_insn *out)
{
    memset(out, 0, sizeof *out);
    out->op = op->value;
    out->npix = op->pixels;
    out->nfields = op->nfields;
    out->pc = pc;
    for (int f = 0; f < op->nfields; f++) {
        const pxi_field_info *fi = &op->fields[f];
        uint32_t raw = pxi_read_le(pixels, fi->pixel, fi->channel, fi->bytes);
        out->a[f] = fi->kind == PXK_Q16 ? px_entry_q16(raw) : (int32_t)raw;
    }
}

static int px__name_char(int c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'; }

/* An any-size input's bounds (descriptor +3, +4, +5; SPEC V-ANY-3..5). */
static int px__parse_bounds(const pxvm_image *img, int k, const pxvm_limits *lim, pxvm_slot *s, pxvm_error *err)
{
    uint32_t d = (uint32_t)s->desc_pixel;
    const uint8_t *pb = PX_VM_PIX(img, d + 3);
    uint32_t lo = pxi_read_le(pb, 0, 0, 2), hi = pxi_read_le(pb, 0, 2, 2);
    uint32_t pixels = px__u32(img, d + 4), reserved = px__u32(img, d + 5);
    lo = lo ? lo : 1;
    hi = hi ? hi : lim->max_side;
    if (lo > hi || hi > lim->max_side)
        return pxvm_fail(err, PXE_SLOT_ANY_BOUNDS, PX__AT(img, d + 3), k, s->name, lo, hi, lim->max_side);
    if (reserved)
        return pxvm_fail(err, PXE_SLOT_ANY_RESERVED, PX__AT(img, d + 5), k, s->name);
    s->min_side = (int)lo, s->max_side = (int)hi, s->max_pixels = pixels;
    if ((uint32_t)s->w < lo || (uint32_t)s->h < lo || (uint32_t)s->w > hi || (uint32_t)s->h > hi ||
        (pixels && (uint64_t)s->w * (uint64_t)s->h > pixels)) {
        if (pixels)
            return pxvm_fail(err, PXE_SLOT_ANY_REFERENCE_PIXELS, PX__AT(img, d + 1), k, s->name, s->w, s->h, lo, lo, hi, hi,
                             pixels);
        return pxvm_fail(err, PXE_SLOT_ANY_REFERENCE, PX__AT(img, d + 1), k, s->name, s->w, s->h, lo, lo, hi, hi);
    }
    return 0;
}

int px_vm_parse_slot(const pxvm_image *img, int k, const pxvm_limits *lim, pxvm_program *prog, pxvm_error *err)
{
    pxvm_slot *s = &prog->slots[k];
    uint32_t d = (uint32_t)(PXI_HEADER_PIXELS + PXI_SLOT_PIXELS * (k - 1));
    const uint8_t *p0 = PX_VM_PIX(img, d);
    s->desc_pixel = (int)d;
    s->role = p0[0];
    if (s->role < PXI_ROLE_INPUT || s->role > PXI_ROLE_LAST)
        return pxvm_fail(err, PXE_SLOT_ROLE, PX__AT(img, d), k, s->role);

    /* name first, so that later messages can use it */
    const uint8_t *nm = PX_VM_PIX(img, d + 6);
    int len = 0;
    while (len < PXI_NAME_MAX && nm[len])
        len++;
    for (int i = len; i < PXI_NAME_MAX; i++)
        if (nm[i])
            return pxvm_fail(err, PXE_SLOT_NAME_BYTES, PX__AT(img, d + 6), k);
    for (int i = 0; i < len; i++)
        if (!px__name_char(nm[i]))
            return pxvm_fail(err, PXE_SLOT_NAME_CHARS, PX__AT(img, d + 6), k);
    if (len && nm[0] >= '0' && nm[0] <= '9')
        return pxvm_fail(err, PXE_SLOT_NAME_DIGIT, PX__AT(img, d + 6), k);
    memcpy(s->name, nm, (size_t)len);
    s->name[len] = 0;
    if (!strcmp(s->name, "prog"))
        return pxvm_fail(err, PXE_SLOT_NAME_PROG, PX__AT(img, d + 6), k);
    for (int j = 1; j < k; j++)
        if (len && !strcmp(prog->slots[j].name, s->name))
            return pxvm_fail(err, PXE_SLOT_NAME_REPEAT, PX__AT(img, d + 6), k);

    if ((p0[1] & ~PXI_SLOT_FLAGS) || p0[2] || p0[3])
        return pxvm_fail(err, PXE_SLOT_FLAGS, PX__AT(img, d), k, s->name);
    s->flags = p0[1];
    if ((s->flags & PXI_SLOT_PERSIST) && s->role != PXI_ROLE_OUTPUT && s->role != PXI_ROLE_SCRATCH)
        return pxvm_fail(err, PXE_SLOT_PERSIST_ROLE, PX__AT(img, d), k, s->name);
    int any = (s->flags & PXI_SLOT_ANYSIZE) != 0;
    if (any && s->role != PXI_ROLE_INPUT)
        return pxvm_fail(err, PXE_SLOT_ANY_ROLE, PX__AT(img, d), k, s->name);
    if (any && prog->format_minor < PXI_MINOR_ANYSIZE)
        return pxvm_fail(err, PXE_SLOT_ANY_FORMAT, PX__AT(img, d), k, s->name);
    uint32_t w = px__u32(img, d + 1), h = px__u32(img, d + 2);
    if (w < 1 || h < 1 || w > lim->max_side || h > lim->max_side)
        return pxvm_fail(err, PXE_SLOT_SIDE, PX__AT(img, d + 1), k, s->name, w, h, lim->max_side);
    s->w = (int)w;
    s->h = (int)h;

    const uint8_t *po = PX_VM_PIX(img, d + 3);
    uint32_t dx = pxi_read_le(po, 0, 0, 2), dy = pxi_read_le(po, 0, 2, 2);
    if (any)
        return px__parse_bounds(img, k, lim, s, err);
    if (s->role == PXI_ROLE_DATA) {
        if ((uint64_t)dx + w > (uint64_t)img->w || (uint64_t)dy + h > (uint64_t)img->h)
            return pxvm_fail(err, PXE_SLOT_DATA_RECT, PX__AT(img, d + 3), k, s->name);
        s->data_x = (int)dx;
        s->data_y = (int)dy;
    } else if (dx || dy) {
        return pxvm_fail(err, PXE_SLOT_ORIGIN, PX__AT(img, d + 3), k, s->name);
    }

    const uint8_t *pp = PX_VM_PIX(img, d + 4);
    uint32_t pw = pxi_read_le(pp, 0, 0, 2), ph = pxi_read_le(pp, 0, 2, 2), pc = px__u32(img, d + 5);
    if (pw || ph || pc) {
        if (!pw || !ph || !pc || pw > w || ph > h)
            return pxvm_fail(err, PXE_SLOT_PATCH_FIT, PX__AT(img, d + 4), k, s->name);
        if ((uint64_t)pc > (uint64_t)(w / pw) * (h / ph))
            return pxvm_fail(err, PXE_SLOT_PATCH_COUNT, PX__AT(img, d + 5), k, s->name);
    }
    s->patch_w = (int)pw;
    s->patch_h = (int)ph;
    s->patch_count = (int)pc;
    return 0;
}

/* Never 0, never reused while the library is loaded: a freed program's serial does not come back
 * with another one made at the same address. */
uint64_t px_vm_new_serial(void)
{
    static uint64_t px__serials;
    return __atomic_add_fetch(&px__serials, 1, __ATOMIC_RELAXED);
}

int px_vm_check_header_limits(const pxvm_image *img, uint32_t ninsns, const pxvm_limits *lim, pxvm_error *err)
{
    if (ninsns > lim->max_insns)
        return pxvm_fail(err, PXE_TOO_MANY_INSNS, PX__AT(img, 3), ninsns, lim->max_insns);
    /* the program image itself must respect the limits a slot does */
    if ((uint32_t)img->w > lim->max_side || (uint32_t)img->h > lim->max_side)
        return pxvm_fail(err, PXE_SLOT_SIDE, -1, -1, 0, "prog", img->w, img->h, lim->max_side);
    return 0;
}

/* ---- load ----------------------------------------------------------------------------------- */

int pxvm_program_from_image(pxvm_image *image, const pxvm_limits *lim, pxvm_program *prog, pxvm_error *err)
{
    memset(prog, 0, sizeof *prog);
    prog->image = *image;
    image->px = NULL;
    const pxvm_image *img = &prog->image;
    uint64_t total = (uint64_t)img->w * (uint64_t)img->h;
    if (total < PXI_HEADER_PIXELS) {
        pxvm_fail(err, PXE_HEADER_SHORT, -1, -1, (unsigned long long)PXI_HEADER_PIXELS, (unsigned long long)total);
        goto fail;
    }
    const uint8_t *p0 = PX_VM_PIX(img, 0), *p1 = PX_VM_PIX(img, 1);
    if (p0[0] != PXI_MAGIC_R || p0[1] != PXI_MAGIC_G || p0[2] != PXI_MAGIC_B || p0[3] != PXI_MAGIC_A) {
        pxvm_fail(err, PXE_BAD_MAGIC, PX__AT(img, 0), p0[0], p0[1], p0[2], p0[3]);
        goto fail;
    }
    if (p1[0] != PXI_VERSION_MAJOR || p1[1] > PXI_VERSION_MINOR) {
        pxvm_fail(err, PXE_BAD_VERSION, PX__AT(img, 1), p1[0], p1[1], PXI_VERSION_MAJOR, PXI_VERSION_MAJOR,
                  PXI_VERSION_MINOR);
        goto fail;
    }
    prog->format_minor = p1[1];
    if (p1[3]) {
        pxvm_fail(err, PXE_HEADER_RESERVED, PX__AT(img, 1), "flags", p1[3]);
        goto fail;
    }
    int nslots = p1[2];
    uint64_t header_end = PXI_HEADER_PIXELS + (uint64_t)PXI_SLOT_PIXELS * (uint64_t)nslots;
    if (header_end > total) {
        pxvm_fail(err, PXE_HEADER_SHORT, PX__AT(img, 1), (unsigned long long)header_end, (unsigned long long)total);
        goto fail;
    }
    uint32_t code_start = px__u32(img, 2), ninsns = px__u32(img, 3), reserved = px__u32(img, 4);
    if (reserved) {
        pxvm_fail(err, PXE_HEADER_RESERVED, PX__AT(img, 4), "word 4", reserved);
        goto fail;
    }
    if (code_start < header_end) {
        pxvm_fail(err, PXE_CODE_START, PX__AT(img, 2), code_start, (unsigned)header_end);
        goto fail;
    }
    if (ninsns == 0) {
        pxvm_fail(err, PXE_NO_CODE, PX__AT(img, 3));
        goto fail;
    }
    if (px_vm_check_header_limits(img, ninsns, lim, err) < 0)
        goto fail;
    prog->nslots = nslots + 1;
    prog->slots = calloc((size_t)prog->nslots, sizeof(pxvm_slot));
    if (!prog->slots) {
        pxvm_fail(err, PXE_NOMEM, -1, -1, 0ull);
        goto fail;
    }
    pxvm_slot *s0 = &prog->slots[0];
    s0->role = PXI_ROLE_PROGRAM;
    strcpy(s0->name, "prog");
    s0->w = img->w;
    s0->h = img->h;
    s0->desc_pixel = -1;
    for (int k = 1; k <= nslots; k++) {
        if (px_vm_parse_slot(img, k, lim, prog, err) < 0)
            goto fail;
        prog->any_size += (prog->slots[k].flags & PXI_SLOT_ANYSIZE) != 0;
    }
    prog->memory = 0;
    for (int k = 0; k <= nslots; k++) {
        px_vm_slot_geometry(&prog->slots[k]);
        prog->memory += prog->slots[k].bytes;
    }
    if (prog->memory > lim->max_memory) {
        pxvm_fail(err, PXE_SLOT_MEMORY, -1, -1, (unsigned long long)prog->memory,
                  (unsigned long long)lim->max_memory);
        goto fail;
    }

    /* decode every instruction once, checking each operand against its kind */
    prog->insns = malloc(sizeof(pxi_insn) * ninsns);
    if (!prog->insns) {
        pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)(sizeof(pxi_insn) * ninsns));
        goto fail;
    }
    prog->code_start = code_start;
    uint64_t pc = code_start;
    for (uint32_t i = 0; i < ninsns; i++) {
        if (pc >= total) {
            pxvm_fail(err, PXE_CODE_SHORT, -1, -1, i, "?", 1u, (unsigned long long)total);
            goto fail;
        }
        unsigned value = PX_VM_PIX(img, pc)[0];
        const pxi_op_info *op = pxi_op(value);
        if (!op->name) {
            if (op->reserved_for && strcmp(op->reserved_for, "unassigned"))
                pxvm_fail(err, PXE_OPCODE_RESERVED, PX__AT(img, pc), i, value, op->reserved_for);
            else
                pxvm_fail(err, PXE_OPCODE_UNKNOWN, PX__AT(img, pc), i, value);
            goto fail;
        }
        if (pc + op->pixels > total) {
            pxvm_fail(err, PXE_CODE_SHORT, PX__AT(img, pc), i, op->name, (unsigned)op->pixels,
                      (unsigned long long)total);
            goto fail;
        }
        pxi_insn *in = &prog->insns[i];
        pxvm_insn_decode(PX_VM_PIX(img, pc), (uint32_t)pc, op, in);
        prog->ninsns = i + 1;
        for (int f = 0; f < op->nfields; f++)
            if (px_vm_check_field(prog, in, i, &op->fields[f], in->a[f], err) < 0)
                goto fail;
        pc += op->pixels;
    }
    prog->code_end = (uint32_t)pc;
    const pxi_insn *last = &prog->insns[ninsns - 1];
    if (pxi_facts(last->op)->plan != PXP_HALT) {
        pxvm_fail(err, PXE_NO_HALT, PX__AT(img, last->pc), ninsns - 1, pxi_op(last->op)->name);
        goto fail;
    }
    /* rules that need the whole header and code: regions against slot sizes */
    for (uint32_t i = 0; i < ninsns; i++)
        if (px_vm_check_insn(prog, &prog->insns[i], i, err) < 0)
            goto fail;
    if (px_vm_check_insn_memory(prog, lim, err) < 0)
        goto fail;
    if (px_vm_build_plan(prog, err) < 0 || px_vm_build_reset(prog, err) < 0 || px_vm_build_geometry(prog, err) < 0 ||
        (prog->insn_box && px_vm_fetch_sole(prog, err) < 0))
        goto fail;
    prog->serial = px_vm_new_serial();
    return 0;
fail:
    pxvm_program_free(prog);
    return -1;
}

int pxvm_program_from_copy(const pxvm_image *image, const pxvm_limits *lim, pxvm_program *prog, pxvm_error *err)
{
    pxvm_image copy;
    memset(prog, 0, sizeof *prog);
    if (pxvm_image_alloc(&copy, image->w, image->h, err) < 0)
        return -1;
    memcpy(copy.px, image->px, (size_t)image->w * (size_t)image->h * 4u);
    return pxvm_program_from_image(&copy, lim, prog, err);
}

/* After a failed load of the program in `file`: when its image is no program at all (no pxvm
 * header: e.g. a photo given as the program, pxrun's arguments swapped), the message says which
 * file; returns -1. */
static int px__not_program_file(pxvm_error *err, const char *file)
{
    if (err->code == PXE_BAD_MAGIC || err->code == PXE_HEADER_SHORT) {
        size_t at = strlen(err->msg);
        snprintf(err->msg + at, sizeof err->msg - at, " (file '%.300s')", file);
    }
    return -1;
}

int pxvm_program_load(const char *path, const pxvm_limits *lim, pxvm_program *prog, pxvm_error *err)
{
    pxvm_image img;
    pxvm_limits plim = *lim; /* an EXIF orientation turns images given as inputs, never a program */
    plim.flags &= ~PXVM_DECODE_EXIF_TRANSPOSE;
    memset(prog, 0, sizeof *prog);
    if (pxvm_png_load(path, &plim, &img, err) < 0)
        return -1;
    return pxvm_program_from_image(&img, lim, prog, err) < 0 ? px__not_program_file(err, path) : 0;
}

void pxvm_program_free(pxvm_program *prog)
{
    pxvm_image_free(&prog->image);
    free(prog->slots);
    free(prog->insns);
    free(prog->steps);
    free(prog->reset);
    free(prog->rebuild_upper);
    free(prog->geom_base);
    free(prog->insn_box);
    free(prog->frame_only);
    free(prog->insn_token);
    memset(prog, 0, sizeof *prog);
}
