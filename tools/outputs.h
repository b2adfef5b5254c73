/* outputs.h - what the tools write (tools/outputs.c): all-or-nothing output files and .npy arrays.
 * Tool code, not the library's: libpxvm writes no file. */
#ifndef PXVM_TOOLS_OUTPUTS_H
#define PXVM_TOOLS_OUTPUTS_H

#include "../vm/vm.h"

/* Outputs. A regular file (or a new path) is written all-or-nothing: to a temporary file in its
 * folder, renamed into place by pxvm_outputs_commit only when every output succeeded; abort (or a
 * failed commit) removes the temporary files. A symbolic link is followed and its target
 * replaced that way. "-" (standard output), a FIFO or a character device is written directly at
 * commit, before any rename (so a failed stream replaces no file); its write errors (ENOSPC,
 * EPIPE) are i/o errors. Anything else (a directory, a block device, a socket) is refused: nothing
 * that is not a regular file is ever replaced. */
typedef struct pxvm_outputs {
    int n, cap;
    char **final_path, **tmp_path;       /* tmp_path NULL: a stream */
    uint8_t **stream_data;
    size_t *stream_len;
} pxvm_outputs;
int pxvm_outputs_add(pxvm_outputs *o, const char *path, const void *data, size_t len, pxvm_error *err);
int pxvm_outputs_commit(pxvm_outputs *o, pxvm_error *err);
void pxvm_outputs_abort(pxvm_outputs *o);
/* For a SIGINT/SIGTERM handler: pxvm_outputs_track(o) names the outputs under way, and
 * pxvm_outputs_remove_temporaries() (async-signal-safe) unlinks their temporary files. */
void pxvm_outputs_track(pxvm_outputs *o);
void pxvm_outputs_remove_temporaries(void);

/* NumPy .npy (format 1.0) bytes of a uint8 array of shape (n, h, w, 4). *out is malloc'ed. */
int pxvm_npy_encode(const uint8_t *data, int n, int h, int w, uint8_t **out, size_t *len, pxvm_error *err);
/* The same for any shape of ndim (1..8) dimensions. */
int pxvm_npy_encode_shape(const uint8_t *data, int ndim, const int *shape, uint8_t **out, size_t *len, pxvm_error *err);
/* ... and any element type: descr as NumPy writes it ("<i4" for little-endian int32), elem bytes. */
int pxvm_npy_encode_typed(const void *data, const char *descr, size_t elem, int ndim, const int *shape, uint8_t **out,
                          size_t *len, pxvm_error *err);

#endif
