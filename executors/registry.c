/* registry.c - the executors by name: "cpu", "cuda" (when this binary has the CUDA-GL executor)
 * and "auto" (cuda when it opens here, else cpu). */
#include <stdio.h>
#include <string.h>

#include "../vm/vm.h"
#include "registry.h"

#ifdef PXVM_HAVE_CUDA_GL
extern const pxvm_executor_ops pxvm_cuda_gl_executor;
#endif

int pxvm_executor_open_named(const char *name, const pxvm_open_options *opt, const pxvm_executor_ops **ops,
                             pxvm_executor **ex, pxvm_error *cuda_why, pxvm_error *err)
{
    int automatic = !strcmp(name, "auto");
    *ex = NULL;
    *ops = pxvm_executor_find(automatic ? "cuda" : name, err);
    if (*ops && (*ops)->open(ex, opt, err) == 0)
        return 0;
    if (*ex) { /* a failed open may leave a half-made executor */
        (*ops)->close(*ex);
        *ex = NULL;
    }
    if (!automatic)
        return -1;
    if (cuda_why)
        *cuda_why = *err;
    *ops = &pxvm_cpu_executor;
    return (*ops)->open(ex, opt, err);
}

const pxvm_executor_ops *pxvm_executor_find(const char *name, pxvm_error *err)
{
    if (!strcmp(name, "cpu"))
        return &pxvm_cpu_executor;
    if (!strcmp(name, "cuda")) {
#ifdef PXVM_HAVE_CUDA_GL
        return &pxvm_cuda_gl_executor;
#else
        pxvm_fail(err, PXE_EXECUTOR_NOT_BUILT, -1, -1);
        return NULL;
#endif
    }
    pxvm_fail(err, PXE_EXECUTOR_NAME, -1, -1, name);
    return NULL;
}
