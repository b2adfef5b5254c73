/* args.h - the command-line tools' values of options (tools/args.c), parsed one way in every tool. */
#ifndef PXVM_TOOLS_ARGS_H
#define PXVM_TOOLS_ARGS_H

#include <stdint.h>

/* A decimal whole number, all of s, that fits 64 bits (no sign, no space, no suffix): 0 with *v,
 * or -1 (the caller names the option). */
int px_parse_u64(const char *s, uint64_t *v);

/* What every tool's --version prints on stdout: "TOOL (pxvm) VERSION" and the executors built
 * in, the lines a bug report wants. */
void px_print_version(const char *tool);

#endif
