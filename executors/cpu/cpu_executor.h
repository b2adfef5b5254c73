/* cpu_executor.h - what the CPU executor's files share: the executor's state (struct
 * pxvm_executor) and the functions one file calls in another. The opcodes' pixel rules are in
 * cpu_slot.h, video.c and fixation.c; pxvm_cpu_executor (the ops table) is in run.c. */
#ifndef PX_CPU_EXECUTOR_H
#define PX_CPU_EXECUTOR_H

#include "../../vm/vm.h"
#include "threadpool.h"

#include "cpu_slot.h"

/* Item b's slot k is entry b * nslots + k of the per-slot arrays; an instruction of item b sees
 * the slots of item b only (`store`, `view` below point at item b's row). */
struct pxvm_executor {
    const pxvm_program *prog; /* alive from load until the next load or close */
    int nslots;               /* of the loaded program: unload must not read a freed program */
    int batch;                /* items */
    px_pool *pool;
    uint8_t **all_store;   /* per item and slot: the whole mip chain */
    px_cpu_src *all_view;  /* per item and slot: level pointers and sizes */
    uint8_t *bound;        /* per item and slot: an input image was bound */
    uint8_t **store;       /* the item being run: &all_store[item * nslots] */
    px_cpu_src *view;
    int32_t *fix_set;      /* per item: the registers a run starts with, [batch][8][2] */
    int32_t *fix_all;      /* per item: the registers of the run, [batch][8][2] */
    int32_t *geom_all;     /* per item: token geometry, [batch][ngeom][PX_GEOM_INTS] */
    int32_t *fix, *geom;   /* the item being run */
    /* video, per item: primed (a run has completed since load or reset), the registers each
     * incremental relative instruction last sampled with [batch][ninsns][2], the changed-token
     * bytes [batch][ngeom], the dirty rectangles for the next run (n = -1: none given) */
    uint8_t *primed, *changed_all, *changed;
    int32_t *last_reg;
    pxvm_rect *rects;
    int *nrects;
    /* The plan: px_cpu_plan_load's arrays below (level_flags .. span_at), all in plan_mem, one
     * block; mask_counts' entries and resize are allocated apart */
    uint8_t *plan_mem;
    uint8_t *level_flags; /* px_cpu_pyramid_upper's scratch: the most level-4 texels of a slot */
    int32_t **mask_counts; /* per slot that a fetch reads as its mask: px_cpu_mask_counts of it,
                            * built by the fetch step that reads it (else NULL) */
    uint8_t *step_masks;   /* per fetch step, from step_mask_at[step]: the masks it reads, then 0 */
    uint32_t *step_mask_at;
    /* What an incremental fetch's footprint gives, kept per item and instruction while its
     * fixation register stays where it was (they are functions of it): the tile box of the
     * token rule (px_footprint_tiles) and, for a SAMPLE/ANISO that may sample pixel by pixel,
     * its pixels' tile spans (px_cpu_patch_spans). `geom_known`: bit 0 the box, bit 1 the
     * spans; cleared when the fetch samples whole (the register moved, or an unprimed item). */
    px_tilebox *box_all;  /* [batch][ninsns] */
    uint8_t *geom_known;  /* [batch][ninsns] */
    int16_t *spans_all;   /* [batch][spans_per_item] */
    int32_t *span_at;     /* per instruction: where its spans start in an item's part, -1 none */
    size_t spans_per_item;
    int item;
    /* RESIZE: per instruction, its tables and passes (NULL for other opcodes, or no RESIZE at
     * all), and pass 1's buffer, as large as the largest RESIZE needs */
    struct px_resize_op **resize;
    uint8_t *resize_tmp;
    /* EMBED: per instruction, its packed weights and parameters (NULL for other opcodes, or no
     * EMBED at all): its data slots are read-only and fixed by the program (embed.c) */
    struct px_cpu_embed **embed;
    uint32_t ninsns; /* of the loaded program, for unload */
    /* the scratch op's memory (vm.h), kept until the next scratch call or close */
    uint8_t *scratch;
    size_t scratch_cap;
    /* retarget: per item and slot, the bytes all_store holds (an input's storage only grows);
     * NULL until the first retarget, when every entry is the slot's bytes */
    uint64_t *store_cap;
    /* retarget: per item and slot, the PXVM_RESET_* parts a retarget sent back to their initial
     * state that are not restored yet: done as the item's next run starts (with the run's own
     * reset, so that a part the run restores anyway costs nothing more) or before anything reads
     * slots (px_cpu_wipe_flush); NULL until the first retarget */
    uint8_t *wipe_pending;
    /* retarget: the plans of programs switched away from ([PX_CPU_PLANS_KEPT], NULL until the
     * first retarget), each checked against the loaded program already; never the current one's.
     * Freed at unload (a load starts with none). plan_evict: the entry a full cache drops next. */
    struct px_cpu_plan_kept *plans_kept;
    int plan_evict;
};

/* What px_cpu_plan_load makes for one program (the plan fields of struct pxvm_executor), kept by
 * retarget for a program switched away from, under its serial, so that a switch back to that
 * size takes it instead of making it again (and skips the check it passed before). */
typedef struct px_cpu_plan_kept {
    uint64_t serial; /* 0: an empty entry (all pointers NULL) */
    uint8_t *plan_mem;
    uint8_t *level_flags;
    int32_t **mask_counts;
    uint8_t *step_masks;
    uint32_t *step_mask_at;
    px_tilebox *box_all;
    uint8_t *geom_known;
    int16_t *spans_all;
    int32_t *span_at;
    size_t spans_per_item;
    struct px_resize_op **resize;
    uint8_t *resize_tmp;
    struct px_cpu_embed **embed;
} px_cpu_plan_kept;
/* The most plans kept: a stream over more sizes than this makes some again (round robin). */
#define PX_CPU_PLANS_KEPT 64

/* One instruction (or the first of a batch) for the pool's workers. */
typedef struct {
    const pxvm_executor *ex;
    const pxi_insn *in;
} px_cpu_insn_job;

/* resources.c: the executor and its slots' storage. load (again: unload first) allocates every
 * item's slots and per-item state and fills them as a run starts; unload frees what load
 * allocated (also part way); select points store, view, fix, geom and changed at an item. */
int px_cpu_open(pxvm_executor **out, const pxvm_open_options *opt, pxvm_error *err);
int px_cpu_load(pxvm_executor *ex, const pxvm_program *prog, int batch, pxvm_error *err);
void px_cpu_unload(pxvm_executor *ex);
void px_cpu_select(pxvm_executor *ex, int item);
/* ... and what the instructions' operands decide, made for ex->prog (load, retarget) and freed.
 * like: the plan of another resolution of the program ex->prog resolves (resolved_from), whose
 * parts that no size decides are copied rather than made from the instructions; or NULL. */
int px_cpu_plan_load(pxvm_executor *ex, const struct px_cpu_plan_kept *like, pxvm_error *err);
void px_cpu_plan_unload(pxvm_executor *ex);
/* Restores what retarget left pending (wipe_pending) in every item: before slots are read. */
void px_cpu_wipe_flush(pxvm_executor *ex);
/* Restores the parts `parts` (PXVM_RESET_*) of slot k, held at store, to their initial state. */
void px_cpu_restore(pxvm_executor *ex, int k, uint8_t *store, unsigned parts);

/* retarget.c: the ops' retarget (vm.h); forget_plans frees the plans it kept (unload). */
int px_cpu_retarget(pxvm_executor *ex, const pxvm_program *prog, pxvm_error *err);
void px_cpu_retarget_forget_plans(pxvm_executor *ex);

/* bind.c: inputs copied into a slot (bind) or read in place (borrow). */
/* tiles.c: the ops' tiles (vm/ragged.h), images spread over the pool, largest first. */
struct px_ragged_job;
int px_cpu_ragged(pxvm_executor *ex, const struct px_ragged_job *job, pxvm_error *err);
int px_cpu_scratch(pxvm_executor *ex, size_t bytes, void **ptr, int *device, pxvm_error *err);
int px_cpu_bind(pxvm_executor *ex, int slot, int item0, const pxvm_view *v, pxvm_error *err);
int px_cpu_borrow(pxvm_executor *ex, int slot, int item0, const pxvm_view *v, pxvm_error *err);
void px_cpu_release(pxvm_executor *ex, int slot, int item0, int items);

/* pyramid.c: the full PYRAMID of a slot of the item being run, over the pool. */
void px_cpu_pyramid(pxvm_executor *ex, int slot);

/* fetch.c: SAMPLE, ANISO and GATHER of the item being run. count_masks: the counts of the masks
 * that fetch step s reads; fetch_insn: one instruction; batch_part: instructions b..e-1 of a
 * plan batch (a px_cpu_insn_job), for px_pool_for. */
void px_cpu_count_masks(pxvm_executor *ex, uint32_t s);
void px_cpu_fetch_insn(const pxvm_executor *ex, const pxi_insn *in);
void px_cpu_batch_part(void *ctx, int b, int e);

/* resize.c: every RESIZE's tables, built at load (0, or -1 with *err: unload frees what was
 * made), freed at unload; and RESIZE instruction `index` on the item being run. */
int px_cpu_resize_load(pxvm_executor *ex, pxvm_error *err);
void px_cpu_resize_unload(pxvm_executor *ex);
void px_cpu_resize(pxvm_executor *ex, uint32_t index);

/* embed.c: every EMBED's pack, made from the program at load (0, or -1 with *err: unload frees
 * what was made), freed at unload. */
int px_cpu_embed_load(pxvm_executor *ex, pxvm_error *err);
void px_cpu_embed_unload(pxvm_executor *ex);

/* tokens.c: the ops' read_tokens (vm/tokens.h). */
struct pxvm_token_table;
int px_cpu_read_tokens(pxvm_executor *ex, int slot, int item0, int items, const struct pxvm_token_table *t, void *dst,
                       int device, pxvm_error *err);

/* dot.c: DOT_RGB on the item being run; returns the sum (the row is written when it fits). */
uint64_t px_cpu_dot(pxvm_executor *ex, const pxi_insn *in);

/* The executor's dispatch: plan step s of one instruction on the item being run, by the family of
 * its opcode (opcodes.def), each in its family's file (run.c: halt): 0 to go on, 1 at HALT, -1 on
 * a trap with *err set. */
#define PX_FACTS(name, family, plan, reads, writes, upper, anysize, flags) \
    int px_cpu_run_##family(pxvm_executor *ex, uint32_t s, pxvm_error *err);
#include "../../isa/opcodes.def"

#endif
