/* pxrun_size.h - --policy and --size WxH, shared by pxrun and pxbatch (tools/pxrun_size.c): the size every
 * image is bound at for an any-size program, each image brought to it by a resizing policy
 * (stretch, the default with --size, or fit). One set of rules and words for both tools; the
 * Python package (Runner's size=) says the same. */
#ifndef PXRUN_SIZE_H
#define PXRUN_SIZE_H

#include "../vm/resize.h"
#include "../vm/vm.h"

typedef struct px_size_opt {
    const char *text; /* --size's value; NULL: not given */
    int w, h;
} px_size_opt;

/* --policy's value as pxrun and pxbatch take it: "native" (*native = 1: an any-size input takes
 * each image at its own size; the tools' kind, not the library's) or a library policy (*p). An
 * empty value, "native:..." and a bad policy are usage errors naming the value and listing every
 * kind, native too (Python's policy= says the same: python/pxvm/ragged.py). 0, or -1. */
int px_policy_option(const char *text, px_policy *p, int *native, pxvm_error *err);
/* One --size value: "WxH", each side 1..65535. 0, or -1 with a usage error naming the value (or
 * both values when --size is given twice). */
int px_size_parse(const char *text, px_size_opt *s, pxvm_error *err);
/* --size against --policy (before the program is loaded): native, exact and dynamic decide the
 * size themselves (usage error naming the policy); no --policy: *p becomes stretch (bicubic).
 * policy_text: --policy's value (NULL: not given); native: it was "native". 0, or -1. */
int px_size_policy(const px_size_opt *s, const char *policy_text, int native, px_policy *p, pxvm_error *err);
/* --size against the program: a fixed-size program is a usage error (its slot's size is the only
 * one), as is a size outside an any-size input's bounds (naming them); else wh[2k], wh[2k+1] of
 * every any-size input slot k set to W x H (pxvm_program_resolve's sizes). 0, or -1. */
int px_size_slots(const pxvm_program *prog, const char *prog_path, const px_size_opt *s, int *wh, pxvm_error *err);

#endif
