/* args.c - the command-line tools' values of options (args.h). */
#include "args.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "../include/pxvm.h"

int px_parse_u64(const char *s, uint64_t *v)
{
    char *end;
    errno = 0;
    unsigned long long x = strtoull(s, &end, 10);
    if (!*s || *end || errno || s[0] == '-')
        return -1;
    *v = x;
    return 0;
}

void px_print_version(const char *tool)
{
    printf("%s (pxvm) %s\n", tool, PXVM_VERSION);
#ifdef PXVM_HAVE_CUDA_GL
    puts("executors: cpu, cuda (CUDA-GL: runs where an NVIDIA GPU, its driver and EGL are)");
#else
    puts("executors: cpu (built without the CUDA-GL executor: no nvcc, EGL or GLEW here)");
#endif
}
