/* loader.h - what the program loader's files share: pxvm_program_from_image (parse.c) decodes the
 * image, then calls validate.c, launch_plan.c and geometry.c in turn. Private to those files:
 * executors, tools and the API see a loaded program through vm.h. */
#ifndef PX_VM_LOADER_H
#define PX_VM_LOADER_H

#include "vm.h"

/* Stream pixel i of an image (row-major RGBA8). */
#define PX_VM_PIX(img, i) ((img)->px + 4u * (size_t)(i))

/* The fetches (plan kind FETCH: SAMPLE, ANISO, GATHER): their leading operands (src .. h) share
 * one layout (tested). */
static inline int px_vm_is_fetch(const pxi_insn *in) { return pxi_facts(in->op)->plan == PXP_FETCH; }

/* parse.c: slot k's descriptor (prog->slots[k], zeroed by the caller; earlier slots parsed) and
 * the serial of a program made now (vm.h). */
int px_vm_parse_slot(const pxvm_image *img, int k, const pxvm_limits *lim, pxvm_program *prog, pxvm_error *err);
uint64_t px_vm_new_serial(void);
/* The header's rules that read the limits: the instruction count and the program image's sides. */
int px_vm_check_header_limits(const pxvm_image *img, uint32_t ninsns, const pxvm_limits *lim, pxvm_error *err);

/* validate.c: the operand rules that follow from an operand's kind alone (each operand as it is
 * decoded, prog->image and prog->nslots set), and an instruction's rules that need the whole
 * header and code (its regions against slot sizes, masks, levels). 0, or -1 with *err set. */
int px_vm_check_field(const pxvm_program *prog, const pxi_insn *in, uint32_t index, const pxi_field_info *fi, int32_t v,
                      pxvm_error *err);
int px_vm_check_insn(const pxvm_program *prog, const pxi_insn *in, uint32_t index, pxvm_error *err);
/* Can px_vm_check_insn's verdict on `in`, once passed, change when the slots marked in resized[]
 * ([nslots]) change size and levels alone? (0: no; 1: it must be checked again) */
int px_vm_insn_rules_read_size(const pxi_insn *in, const uint8_t *resized);
/* Adds what every RESIZE needs besides the slots (px_resize_need: its tables and Pillow's
 * intermediate, SPEC V-RESIZE-5) and every EMBED (px_embed_need: its packed weights and staged
 * tokens, V-EMBED-13) to prog->memory, in program order, against lim->max_memory: 0, or -1 with
 * RESIZE_MEMORY or EMBED_MEMORY naming the first instruction that crosses it. Run after
 * px_vm_check_insn. */
int px_vm_check_insn_memory(pxvm_program *prog, const pxvm_limits *lim, pxvm_error *err);
/* Does px_vm_check_field have a rule for operands of this kind? (0: every value passes) */
int px_vm_kind_has_rule(enum pxi_kind kind);

/* launch_plan.c, on a validated program: the launch plan (prog->steps), what every run restores
 * (prog->reset), the position box of incremental fetch i (prog->insn_box[i], the array allocated
 * by the first call) and which incremental fetches own their destination (insn_box[].sole). */
int px_vm_build_plan(pxvm_program *prog, pxvm_error *err);
int px_vm_build_reset(pxvm_program *prog, pxvm_error *err);
int px_vm_fetch_box(pxvm_program *prog, const pxi_insn *in, uint32_t i, pxvm_error *err);
int px_vm_fetch_sole(pxvm_program *prog, pxvm_error *err);

/* geometry.c: a slot's levels, their byte offsets and its bytes (from w and h); token geometry
 * and the per-instruction video facts (calls px_vm_fetch_box for each incremental fetch). */
void px_vm_slot_geometry(pxvm_slot *s);
int px_vm_build_geometry(pxvm_program *prog, pxvm_error *err);

#endif
