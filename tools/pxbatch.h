/* pxbatch.h - pxbatch's file handling, apart from running shards (tools/pxbatch_sha256.c,
 * pxbatch_names.c, pxbatch_marker.c, pxbatch_npy.c, pxbatch_verify.c): strict numbers, the list
 * file, JSON strings of any file name, SHA-256, shard markers, .npy headers and --verify. The
 * parsers take bytes, so that tests/fuzz/fuzz_pxbatch.c can reach them. */
#ifndef PXBATCH_H
#define PXBATCH_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

/* The marker format this pxbatch writes and reads ("pxbatch": 1 in every marker). */
#define PXB_FORMAT 1

/* ---- SHA-256 (FIPS 180-4) ------------------------------------------------------------------- */

typedef struct pxb_sha256 {
    uint32_t h[8];
    uint64_t bytes;
    uint8_t buf[64];
    size_t fill;
} pxb_sha256;
void pxb_sha256_init(pxb_sha256 *c);
void pxb_sha256_update(pxb_sha256 *c, const void *data, size_t len);
void pxb_sha256_hex(pxb_sha256 *c, char hex[65]); /* finishes: 64 lowercase hex digits */
void pxb_sha256_of(const void *data, size_t len, char hex[65]);

/* ---- numbers, names, the list file ------------------------------------------------------------ */

/* A decimal number in lo..hi written with digits only (no sign, space or suffix): 0, else -1. */
int pxb_parse_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t *v);

typedef struct pxb_names {
    char **v;
    size_t n, cap;
} pxb_names;
int pxb_names_add(pxb_names *l, const char *s); /* a copy of s; -1: out of memory */
void pxb_names_free(pxb_names *l);
/* A list file: one name a line, any length; a line ends at "\n" (a "\r" before it is dropped) or at
 * the end of the file; empty lines are skipped. -1 with `why`: a line holding a NUL byte (no file
 * name can), out of memory, a read error. */
int pxb_list_read(FILE *f, pxb_names *l, char *why, size_t why_len);

/* ---- JSON ----------------------------------------------------------------------------------- */

/* Is s[0..len) UTF-8 as JSON needs it (no overlong forms, surrogates or code points past
 * U+10FFFF)? */
int pxb_utf8_valid(const char *s, size_t len);
/* A JSON string of any bytes: control characters escaped, bytes that are not UTF-8 each written
 * as U+FFFD (the replacement character). */
void pxb_json_str(FILE *f, const char *s);
/* `"key": "s"`, and when s is not UTF-8 also `, "key_bytes": "<hex of s's bytes>"`: the name
 * itself, whatever bytes the file system gave. */
void pxb_json_name(FILE *f, const char *key, const char *s);
/* The name an object holds under key: key_bytes (hex) when present, else the string; malloc'ed,
 * NULL when missing or not a file name (bad hex, a NUL byte, empty). */
char *pxb_json_get_name(json_t *obj, const char *key);

/* ---- markers -------------------------------------------------------------------------------- */

/* A shard marker (shard-NNNNN.json) as read back, every field checked: the format, the job (the
 * fields that decide the output bytes), the shape, the .npy's size and SHA-256, the rows and
 * errors (each input of the shard exactly once, in input order). */
typedef struct pxb_marker {
    json_t *root;            /* owned */
    json_t *job;             /* in root */
    int shard;
    uint64_t shard_size, inputs;
    uint64_t first, count;   /* the shard's inputs: [first, first + count) */
    uint64_t shape[5];       /* ragged: (tokens, p, p, 4), shape[4] 0 */
    uint64_t npy_bytes;
    char npy_sha256[65];
    int ragged;              /* --policy dynamic: "ragged" holds the offsets and grid files */
    uint64_t offsets_bytes, grid_bytes;
    char offsets_sha256[65], grid_sha256[65];
    size_t nrows, nerrors;
} pxb_marker;
/* Parses a marker; `shard` is the number its file name gives (-1: any). 0, or -1 with `why`. */
int pxb_marker_parse(const char *data, size_t len, int shard, pxb_marker *m, char *why, size_t why_len);
void pxb_marker_free(pxb_marker *m);
/* Feeds the names of the marker's inputs, in input order, each with a NUL after it, to c (the
 * job's inputs_sha256 is this hash over all shards). -1 if a name is missing. */
int pxb_marker_hash_names(const pxb_marker *m, pxb_sha256 *c);
/* Reads and parses DIR/shard-NNNNN.json (a regular file) as marker `index`; why starts "its marker". */
int pxb_marker_load(const char *dir, int index, pxb_marker *m, char *why, size_t why_len);
/* A pxbatch file name "shard-<digits>.<ext>": the shard number, else -1. */
int pxb_shard_name(const char *name, const char *ext);
/* Compares two job objects: 0 when equal, else writes "field: old -> new" for every field that
 * differs (or that only one of them has) into buf and returns the count. A field added after
 * markers were first written counts as its default where a job lacks it ("policy": "exact"). */
int pxb_job_diff(json_t *old_job, json_t *new_job, char *buf, size_t len);

/* ---- .npy ----------------------------------------------------------------------------------- */

/* Parses an .npy header (versions 1.0 to 3.0) of a C-order uint8 array: its shape and where the
 * data starts. 0, or -1 with `why`. */
int pxb_npy_header(const uint8_t *data, size_t len, int *ndim, uint64_t shape[8], size_t *data_offset, char *why,
                   size_t why_len);

/* Like pxb_npy_header, for a C-order little-endian int64 array ('<i8'). */
int pxb_npy_header_i64(const uint8_t *data, size_t len, int *ndim, uint64_t shape[8], size_t *data_offset, char *why,
                       size_t why_len);
/* An .npy (version 1.0) of a C-order little-endian int64 array of `ndim` dimensions (1..8);
 * *out is malloc'ed. 0, or -1 (out of memory). */
int pxb_npy_i64(const int64_t *v, int ndim, const uint64_t *shape, uint8_t **out, size_t *len);

/* ---- --verify ------------------------------------------------------------------------------- */

/* Checks every shard of DIR against its marker and lists what is corrupt, missing or orphaned on
 * `out`; returns the exit status: 0 every shard good, 1 a problem found (or no shard), 2 DIR is
 * not a folder pxbatch can read or a run holds its lock. */
int pxb_verify(const char *dir, FILE *out);

#endif
