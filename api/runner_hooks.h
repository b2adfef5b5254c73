/* runner_hooks.h - what the unit tests need of a runner beyond the public API (not installed). */
#ifndef PXVM_API_RUNNER_HOOKS_H
#define PXVM_API_RUNNER_HOOKS_H

#include "../include/pxvm.h"
#include "../vm/vm.h"

/* Replaces the ops the runner calls its executor through (the same executor, so `ops` must be
 * the executor's own ops with some entries wrapped): how a test makes a retarget or a load fail. */
void pxvm_runner_test_set_ops(pxvm_runner *run, const pxvm_executor_ops *ops);
/* The resolutions the runner keeps, and the bytes they hold together (as its budget counts them). */
int pxvm_runner_test_resolutions(const pxvm_runner *run, uint64_t *bytes);

#endif
