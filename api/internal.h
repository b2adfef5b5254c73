/* internal.h - what the API's files in api/ share and nothing outside them sees: the handles'
 * structs and the px__ helpers of errors.c, sizes.c and runner.c. Not installed. */
#ifndef PXVM_API_INTERNAL_H
#define PXVM_API_INTERNAL_H

#include "../include/pxvm.h"
#include "../vm/vm.h"


struct pxvm_prog {
    pxvm_program p;
    pxvm_limits lim;
    char name[256]; /* the file or the name given: what messages call the program */
};

/* One resolution of an any-size program (the runner's cache). */
typedef struct px_resolved {
    int *wh;            /* [nslots][2]: the size of every slot it was resolved at; NULL: empty */
    pxvm_program prog;
    uint64_t used;      /* the runner's clock when it was last switched to */
} px_resolved;

/* What a borrow of an item is: none, or made by an earlier call, or by the exec under way (which
 * ends those alone when it fails). */
enum { PX_NOT_BORROWED, PX_BORROWED, PX_BORROWED_NOW };

/* What the runner remembers of a fixation register, to give it again at another size. */
enum { PX_FIX_NONE, PX_FIX_Q16, PX_FIX_NORMALIZED, PX_FIX_DEVICE };

struct pxvm_runner {
    /* what every bind reads first (hot: keep together, at the start) */
    int lost;            /* a failed change of size left the executor without a program it could run */
    int batch;
    const pxvm_executor_ops *ops;
    pxvm_executor *ex;
    const pxvm_prog *prog;
    /* any-size programs: the executor runs `cur`, prog->p itself or one of the resolutions */
    const pxvm_program *cur;
    uint8_t *bound;      /* [nslots][batch]: the input items bound at cur's size */
    uint8_t *borrowed;   /* [nslots][batch]: PX_BORROWED, or PX_BORROWED_NOW by the exec under way */
    int any_borrowed;    /* some item is borrowed (0: nothing to end) */
    int in_exec;         /* pxvm_runner_exec is binding: its borrows are PX_BORROWED_NOW */
    int keep_borrows;    /* pxvm_runner_keep_borrows: successful borrows end at the next bind, not the next run */
    int fix_normalized_ever; /* a normalized fixation was set once (px__refix converts those anew) */
    unsigned fix_inputs; /* the program's input registers (bit k: register k) */
    uint8_t *fix_set;    /* [batch]: the registers given a value since the runner opened */
    uint8_t *fix_kind;   /* [batch][8] PX_FIX_* */
    int32_t *fix_q;      /* [batch][8][2] the Q16 values given (PX_FIX_Q16) */
    double *fix_n;       /* [batch][8][2] the normalized values given (PX_FIX_NORMALIZED) */
    uint64_t clock;
    px_resolved cache[PXVM_RESOLVE_CACHE];
    /* pxvm_runner_fuse_embed: [ninsns] the EMBEDs fused (NULL: off), and their atlases, whose
     * level 0 no read may see (the cuda executor does not write it) */
    uint8_t *fused;
    uint8_t fused_slot[PXVM_MAX_SLOTS + 1];
    /* ... and those a run since the last one that succeeded ran fused: unkept until a run succeeds
     * or a change of size zeroes them (cuda has not written them) */
    uint8_t ran_fused[PXVM_MAX_SLOTS + 1];
};

/* errors.c */
extern _Thread_local char px__last_warning[1024];
PXVM_COLD int px__fail(const pxvm_error *err);
/* Records error `code` of errors.def, its message formatted with the arguments, as the thread's last
 * failure; returns its class (a call's refusal of its arguments). */
PXVM_COLD int (px__refuse)(pxvm_code code, ...); /* (name): tests/check-errors checks its calls */
void px__keep_warning(const pxvm_error *err);
int px__check_limits(const pxvm_limits *lim, const char *call);
const pxvm_limits *px__limits(const pxvm_limits *lim, pxvm_limits *def);
PXVM_COLD int px__unusable(const pxvm_runner *run, const char *call);

/* sizes.c */
uint64_t px__resolution_bytes(const pxvm_program *p);
int px__resolved(pxvm_runner *run, const int *wh, const pxvm_program **out, pxvm_error *err);
PXVM_HOT int px__check_view_any_size(const pxvm_runner *run, int slot, int first_item, const pxvm_view *view,
                                     pxvm_error *err);
int px__size_allowed(const pxvm_runner *run, int slot, int first_item, int items, int w, int h, pxvm_error *err);
PXVM_HOT int px__switch_size(pxvm_runner *run, int slot, int first_item, int items, int w, int h, pxvm_error *err);

/* runner.c; px__fused_read: -1 with FUSED_READ naming `call` and the slot when a read of its
 * level `level` would see a fused atlas (pxvm_runner_fuse_embed); else 0 */
int px__fused_read(const pxvm_runner *run, int slot, int level, const char *call, pxvm_error *err);
PXVM_HOT int px__bind(pxvm_runner *run, int slot, int first_item, const pxvm_view *view, int borrow);

#endif
