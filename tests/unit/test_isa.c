/* test_isa.c - the opcode table is consistent, and the generated spec is current. */
#include <stdlib.h>

#include "../../isa/px_sem.h"
#include "test.h"

/* the number of opcodes the table defines (PX_OP lines), counted by the table itself */
enum {
#define PX_OP(name, value, pixels, synopsis) PX_TABLE_OP_##name,
#include "../../isa/opcodes.def"
    PX_TABLE_OPCODES
};

TEST(isa_fields_cover_every_channel_once)
{
    int implemented = 0;
    for (unsigned v = 0; v < 256; v++) {
        const pxi_op_info *op = pxi_op(v);
        if (!op->name) {
            CHECK(op->reserved_for != NULL); /* every other value belongs to a reserved range */
            continue;
        }
        implemented++;
        if (op->pixels < 1 || op->pixels > PXI_MAX_PIXELS || op->nfields > PXI_MAX_FIELDS) {
            px_test_fail(__FILE__, __LINE__, "%s: %d pixels, %d fields: beyond PXI_MAX_PIXELS/FIELDS", op->name, op->pixels,
                         op->nfields);
            continue;
        }
        int used[PXI_MAX_PIXELS * 4] = {0};
        used[0] = 1; /* the opcode byte */
        for (int f = 0; f < op->nfields; f++) {
            const pxi_field_info *fi = &op->fields[f];
            CHECK(fi->pixel < op->pixels);
            CHECK(fi->bytes >= 1 && fi->channel + fi->bytes <= 4);
            for (int b = 0; b < fi->bytes; b++)
                used[fi->pixel * 4 + fi->channel + b]++;
        }
        for (int i = 0; i < op->pixels * 4; i++)
            if (used[i] != 1)
                px_test_fail(__FILE__, __LINE__, "%s: byte %d of its pixels is used %d times", op->name, i, used[i]);
    }
    CHECK_EQ(implemented, PX_TABLE_OPCODES);
}

/* opcodes.def's PX_FACTS: every opcode has a plan kind, and its operand sets name slot operands
 * (SLOT or MASK kind) of its own; what may be any-size or read above level 0 is read. */
TEST(isa_facts_name_slot_operands_of_their_opcode)
{
    for (unsigned v = 0; v < 256; v++) {
        const pxi_op_info *op = pxi_op(v);
        const pxi_op_facts *f = &op->facts;
        if (!op->name) {
            CHECK(f->plan == PXP_NONE && !f->reads && !f->writes && !f->upper && !f->anysize && !f->flags);
            continue;
        }
        CHECK(f->plan != PXP_NONE);
        uint32_t sets[4] = {f->reads, f->writes, f->upper, f->anysize};
        for (int k = 0; k < 4; k++)
            for (int b = 0; b < 31; b++) {
                if (!(sets[k] >> b & 1u))
                    continue;
                if (b >= op->nfields || (op->fields[b].kind != PXK_SLOT && op->fields[b].kind != PXK_MASK))
                    px_test_fail(__FILE__, __LINE__, "%s: fact set %d names operand %d, not a slot operand", op->name,
                                 k, b);
            }
        if ((f->upper & ~f->reads) || (f->anysize & ~f->reads))
            px_test_fail(__FILE__, __LINE__, "%s: upper or anysize names an operand it does not read", op->name);
        CHECK(f->mask < 0 || op->fields[f->mask].kind == PXK_MASK);
        CHECK(f->plan != PXP_FETCH || (op->fields[PX_FI(SAMPLE, dst)].kind == PXK_SLOT &&
                                       (f->writes == (1u << PX_FI(SAMPLE, dst)))));
    }
    CHECK(pxi_facts(PX_OP_HALT)->plan == PXP_HALT);
}

TEST(isa_field_accessors_match_table)
{
    CHECK(!strcmp(pxi_op(PX_OP_SAMPLE)->fields[PX_FI(SAMPLE, cu)].name, "cu"));
    CHECK(!strcmp(pxi_op(PX_OP_SAMPLE)->fields[PX_FI(SAMPLE, lod)].name, "lod"));
    CHECK(!strcmp(pxi_op(PX_OP_GATHER)->fields[PX_FI(GATHER, table_y)].name, "table_y"));
    CHECK(!strcmp(pxi_op(PX_OP_DOT_RGB)->fields[PX_FI(DOT_RGB, row_out)].name, "row_out"));
    /* SAMPLE and GATHER share the leading operands the executors read without looking */
    for (int f = 0; f <= PX_FI(SAMPLE, h); f++)
        CHECK(!strcmp(pxi_op(PX_OP_SAMPLE)->fields[f].name, pxi_op(PX_OP_GATHER)->fields[f].name));
    /* ANISO is SAMPLE plus taps: the same operands at the same places up to lod */
    for (int f = 0; f <= PX_FI(SAMPLE, lod); f++) {
        const pxi_field_info *a = &pxi_op(PX_OP_SAMPLE)->fields[f], *b = &pxi_op(PX_OP_ANISO)->fields[f];
        CHECK(!strcmp(a->name, b->name) && a->kind == b->kind && a->pixel == b->pixel && a->channel == b->channel &&
              a->bytes == b->bytes);
    }
}

TEST(isa_encode_decode_roundtrip)
{
    uint64_t s = 7;
    for (int round = 0; round < 200; round++) {
        const unsigned ops[] = {PX_OP_HALT, PX_OP_DOT_RGB, PX_OP_PYRAMID, PX_OP_SAMPLE, PX_OP_GATHER, PX_OP_ANISO};
        const pxi_op_info *op = pxi_op(ops[round % 6]);
        int32_t f[PXI_MAX_FIELDS] = {0};
        for (int i = 0; i < op->nfields; i++) {
            uint32_t mask = op->fields[i].bytes == 4 ? 0xFFFFFFFFu : (1u << (8 * op->fields[i].bytes)) - 1;
            uint32_t r = (uint32_t)px_rand(&s) & mask;
            f[i] = op->fields[i].kind == PXK_Q16 ? px_entry_q16(r) : (int32_t)r;
        }
        pxvm_builder b;
        pxvm_build_init(&b, 8);
        pxvm_build_insn(&b, op->value, f);
        pxvm_image img;
        CHECK(pxvm_build_finish(&b, &img, NULL) == 0);
        pxi_insn in;
        pxvm_insn_decode(img.px + 4 * PXI_HEADER_PIXELS, PXI_HEADER_PIXELS, op, &in);
        for (int i = 0; i < op->nfields; i++)
            CHECK_EQ(in.a[i], f[i]);
        pxvm_image_free(&img);
        pxvm_build_free(&b);
    }
}

TEST(isa_spec_is_generated_from_the_tables)
{
    char cmd[512];
    const char *bin = getenv("PXVM_BIN");
    snprintf(cmd, sizeof cmd, "%s/gen_spec isa/SPEC.in.md 2>&1", bin && *bin ? bin : "bin");
    FILE *p = popen(cmd, "r");
    CHECK(p != NULL);
    if (!p)
        return;
    size_t cap = 1 << 20, n = 0;
    char *gen = malloc(cap);
    n = fread(gen, 1, cap, p);
    pclose(p);
    uint8_t *cur = NULL;
    size_t len = 0;
    CHECK(pxvm_read_file("isa/SPEC.md", 1 << 20, &cur, &len, NULL) == 0);
    CHECK(n == len && cur && !memcmp(gen, cur, n)); /* run `make isa/SPEC.md` and commit it */
    free(gen);
    free(cur);
}
