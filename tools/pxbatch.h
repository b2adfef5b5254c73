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

/* ---- the shard rule ---------------------------------------------------------------------------
 * What a pxbatch --out folder holds, as pxbatch writes it. ONE rule, checked by pxbatch --verify
 * (pxbatch_names.c, pxbatch_marker.c, pxbatch_verify.c) and mirrored by the Python loaders
 * (python/pxvm/data.py: load_shard, iter_shards, ShardDataset); tests/python/test_data_safety.py
 * runs both on the same tampered folders and checks that they agree.
 *
 * [SH-NAME] An entry whose name begins "shard-" is the job's; any other (.pxbatch.lock, a README)
 *   is not and is ignored. The job's entries are:
 *   - shard files "shard-K.EXT": K the shard number 0..2^31-1 written as printf's "%05d" writes it
 *     (five digits, zero-padded; more digits only without a leading zero), EXT one of "json" (the
 *     marker), "npy" (the tokens), "offsets.npy" and "grid.npy" (a ragged shard's index files);
 *   - temporary files of an unfinished write: a name holding ".tmp-";
 *   - strays: every other "shard-..." name (a copy, a renamed or an edited file).
 * [SH-FILE] A shard file is a regular file (a link is followed only to one): it is opened without
 *   blocking and checked before a byte is read, so a FIFO, a device or a folder is refused, never
 *   read or waited on. A marker is at most PXB_MARKER_MAX bytes.
 * [SH-JOB] A marker is a JSON object: "pxbatch": PXB_FORMAT, "shard": K of its name, a "job"
 *   object with shard_size 1..PXB_SHARD_SIZE_MAX and inputs 0..2^31-1, the shard's first input
 *   K * shard_size below inputs; every marker of a folder records the same job (pxb_job_diff).
 *   The job has ceil(inputs / shard_size) shards; a shard holds shard_size inputs, the last the
 *   rest. A marker is ragged (has "ragged") exactly when job.policy is a dynamic policy.
 * [SH-ROW] rows[i] has "row" i and an "input" of the shard; rows and errors are each in input
 *   order and together name every input of the shard once; each entry names a file ("file" or
 *   "file_bytes"), each error has an "error" text. A row of a ragged shard has "size" [w, h]
 *   (1..2^31-1, the image as decoded) and "resized" [w', h'], the job policy's dynamic size of
 *   (w, h) for the shard's patch (pxvm_policy_dynamic_size); a row of a "native" job has "size"
 *   only; other rows have neither.
 * [SH-SET] Shard K below the job's count is there when its marker and its .npy are, and, when
 *   ragged, its two index files; it is missing when one of these is not there. Orphaned: a
 *   shard K at or past the count, an index file beside a shard that is not ragged, a stray and a
 *   temporary file.
 * [SH-ARRAY] The .npy is npy_bytes bytes: a C-order uint8 array of the marker's shape, ragged
 *   (T, p, p, 4), else (rows, N, h, w, 4). A ragged shard's offsets.npy is a (rows + 1) and its
 *   grid.npy a (rows, 3) little-endian int64 array, each of the size and SHA-256 its marker
 *   records; grid row i is (1, h' / p, w' / p) of row i's "resized"; offsets[0] is 0 and
 *   offsets[i + 1] is offsets[i] plus grid row i's t * h * w (so the offsets increase), and
 *   offsets[rows] is T.
 * [SH-NAMES] When no shard is missing, the file names of all the inputs in input order, each
 *   followed by a NUL byte, hash (SHA-256) to job.inputs_sha256.
 * A folder is good when every shard is there and follows the rule, and nothing is orphaned.
 * --verify also checks each .npy's SHA-256 (it reads the tokens whole); the Python loaders map
 * the tokens, and check the .npy's size, header and shape but not its hash. */

/* The largest marker read (1 GiB): far above what a shard of PXB_SHARD_SIZE_MAX inputs writes. */
#define PXB_MARKER_MAX (1u << 30)
/* The most inputs a shard holds (pxbatch --shard-size). */
#define PXB_SHARD_SIZE_MAX 4096

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
    const char *policy;      /* job.policy (in root; "exact" in a marker older than the field) */
    int native;              /* job.policy "native": each row records the size it was bound at */
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
/* What a folder entry's name is to a pxbatch job ([SH-NAME]): PXB_JSON .. PXB_GRID (a shard file,
 * *index its number), PXB_TEMP, PXB_STRAY, or PXB_NOT_OURS. */
enum { PXB_JSON, PXB_NPY, PXB_OFFSETS, PXB_GRID, PXB_TEMP, PXB_STRAY, PXB_NOT_OURS };
int pxb_shard_entry(const char *name, int *index);
/* A shard file's name "shard-K.<ext>" as [SH-NAME] writes it: K, else -1. */
int pxb_shard_name(const char *name, const char *ext);
/* Row r's grid ([SH-ARRAY]: (1, h' / p, w' / p) of its "resized") of a ragged marker. */
void pxb_marker_row_grid(const pxb_marker *m, size_t r, int64_t grid[3]);
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
/* The header of an .npy (version 1.0) of a C-order array of `descr` ("|u1", "<i8") and `ndim`
 * (1..8) dimensions, as NumPy writes it (padded with spaces and a newline to a multiple of 64
 * bytes): into head, its length returned; at most PXB_NPY_HEAD_MAX bytes. */
#define PXB_NPY_HEAD_MAX 256
size_t pxb_npy_head(const char *descr, int ndim, const uint64_t *shape, uint8_t head[PXB_NPY_HEAD_MAX]);
/* An .npy (version 1.0) of a C-order little-endian int64 array of `ndim` dimensions (1..8);
 * *out is malloc'ed. 0, or -1 (out of memory). */
int pxb_npy_i64(const int64_t *v, int ndim, const uint64_t *shape, uint8_t **out, size_t *len);

/* ---- --verify ------------------------------------------------------------------------------- */

/* Checks every shard of DIR against its marker and lists what is corrupt, missing or orphaned on
 * `out`; returns the exit status: 0 every shard good, 1 a problem found (or no shard), 2 DIR is
 * not a folder pxbatch can read or a run holds its lock. */
int pxb_verify(const char *dir, FILE *out);

#endif
