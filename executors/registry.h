/* registry.h - the executors by name (executors/registry.c): what the front doors open. The VM
 * defines the interface (vm.h: pxvm_executor_ops); the executors, above it, are named here. */
#ifndef PXVM_EXECUTORS_REGISTRY_H
#define PXVM_EXECUTORS_REGISTRY_H

#include "../vm/vm.h"

#ifdef __cplusplus
extern "C" {
#endif

extern const pxvm_executor_ops pxvm_cpu_executor;
/* "cpu" or "cuda"; sets an UNAVAILABLE error naming the reason when that executor is not built. */
const pxvm_executor_ops *pxvm_executor_find(const char *name, pxvm_error *err);
/* Opens executor `name`: "cpu", "cuda", or "auto" (cuda when it opens here, else cpu; then
 * *cuda_why, when not NULL, says why cuda did not open). Sets *ops and *ex, or fails. */
int pxvm_executor_open_named(const char *name, const pxvm_open_options *opt, const pxvm_executor_ops **ops,
                             pxvm_executor **ex, pxvm_error *cuda_why, pxvm_error *err);

#ifdef __cplusplus
}
#endif
#endif
