/* pxbatch_verify.c - pxbatch --verify: a folder checked against the shard rule of pxbatch.h
 * (every shard against its marker: the .npy's size, header, shape and SHA-256, the index files,
 * the job, the names' hash) and what is corrupt, missing or orphaned listed; a marker read from
 * a folder. The rest of the file handling (pxbatch.h) is in pxbatch_sha256.c, pxbatch_names.c
 * (the names of shard files), pxbatch_marker.c, pxbatch_npy.c. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pxbatch_files.h"

/* ---- --verify ------------------------------------------------------------------------------- */

typedef struct {
    int index;
    unsigned char has[PXB_GRID + 1]; /* which of its files are there (PXB_JSON .. PXB_GRID) */
} px__entry_t;

static int px__entry_cmp(const void *a, const void *b)
{
    int x = ((const px__entry_t *)a)->index, y = ((const px__entry_t *)b)->index;
    return (x > y) - (x < y);
}

/* Reads a whole regular file (at most max bytes). */
static int px__read_regular(const char *path, uint64_t max, uint8_t **data, size_t *len, char *why, size_t why_len)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        pxb_why(why, why_len, "cannot read it: %s", strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size > max) {
        pxb_why(why, why_len, S_ISREG(st.st_mode) ? "%lld bytes: too large" : "not a regular file",
                (long long)st.st_size);
        close(fd);
        return -1;
    }
    size_t n = (size_t)st.st_size, got = 0;
    uint8_t *buf = malloc(n ? n : 1);
    while (buf && got < n) {
        ssize_t k = read(fd, buf + got, n - got);
        if (k <= 0)
            break;
        got += (size_t)k;
    }
    close(fd);
    if (!buf || got != n) {
        pxb_why(why, why_len, "cannot read it: %s", buf ? "short read" : "out of memory");
        free(buf);
        return -1;
    }
    *data = buf, *len = n;
    return 0;
}

/* Checks a shard's .npy against its marker: "" when good, else the reason in why. */
static int px__verify_npy(const char *path, const pxb_marker *m, char *why, size_t why_len)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        pxb_why(why, why_len, "its .npy %s", fd < 0 ? strerror(errno) : "is not a regular file");
        if (fd >= 0)
            close(fd);
        return -1;
    }
    int rc = -1;
    if ((uint64_t)st.st_size != m->npy_bytes) {
        pxb_why(why, why_len, "its .npy is %lld bytes, its marker says %" PRIu64, (long long)st.st_size, m->npy_bytes);
        close(fd);
        return -1;
    }
    pxb_sha256 c;
    pxb_sha256_init(&c);
    size_t cap = 1u << 20, got = 0, head_len = 0;
    uint8_t *buf = malloc(cap), head[4096];
    ssize_t k;
    while (buf && (k = read(fd, buf, cap)) > 0) {
        if (head_len < sizeof head) {
            size_t take = sizeof head - head_len < (size_t)k ? sizeof head - head_len : (size_t)k;
            memcpy(head + head_len, buf, take);
            head_len += take;
        }
        pxb_sha256_update(&c, buf, (size_t)k);
        got += (size_t)k;
    }
    close(fd);
    free(buf);
    int ndim;
    uint64_t shape[8];
    size_t off;
    char hex[65], hwhy[160];
    pxb_sha256_hex(&c, hex);
    if (got != m->npy_bytes)
        pxb_why(why, why_len, "its .npy could not be read whole (%zu of %" PRIu64 " bytes)", got, m->npy_bytes);
    else if (pxb_npy_header(head, head_len, &ndim, shape, &off, hwhy, sizeof hwhy) < 0)
        pxb_why(why, why_len, "its .npy: %s", hwhy);
    else if (m->ragged && (ndim != 4 || memcmp(shape, m->shape, 4 * sizeof m->shape[0])))
        pxb_why(why, why_len, "its .npy's shape is not the marker's (%" PRIu64 ", %" PRIu64 ", %" PRIu64 ", 4)",
                m->shape[0], m->shape[1], m->shape[2]);
    else if (!m->ragged && (ndim != 5 || memcmp(shape, m->shape, sizeof m->shape)))
        pxb_why(why, why_len, "its .npy's shape is not the marker's (%" PRIu64 ", %" PRIu64 ", %" PRIu64 ", %" PRIu64
                              ", 4)",
                m->shape[0], m->shape[1], m->shape[2], m->shape[3]);
    else if (off + m->shape[0] * m->shape[1] * m->shape[2] * (m->ragged ? 4u : m->shape[3] * 4u) != got)
        pxb_why(why, why_len, "its .npy's data is not the shape's size");
    else if (strcmp(hex, m->npy_sha256))
        pxb_why(why, why_len, "its .npy's SHA-256 is %.12s..., its marker says %.12s...", hex, m->npy_sha256);
    else
        rc = 0;
    return rc;
}

/* One index file of a ragged shard (ext "offsets.npy" or "grid.npy"): its size and SHA-256 the
 * marker's, an int64 .npy of `dims` dimensions whose shape is `want`; *v its values (malloc'ed). */
static int px__verify_index(const char *dir, int index, const char *ext, uint64_t bytes, const char *sha, int dims,
                            const uint64_t *want, int64_t **v, char *why, size_t why_len)
{
    char *path, rwhy[256], hex[65], hwhy[160];
    if (asprintf(&path, "%s/shard-%05d.%s", dir, index, ext) < 0)
        return -1;
    uint8_t *data;
    size_t len, off;
    int rc = px__read_regular(path, bytes + 1, &data, &len, rwhy, sizeof rwhy);
    free(path);
    if (rc < 0) {
        pxb_why(why, why_len, "its %s: %s", ext, rwhy);
        return -1;
    }
    int ndim;
    uint64_t shape[8];
    pxb_sha256_of(data, len, hex);
    rc = -1;
    if (len != bytes)
        pxb_why(why, why_len, "its %s is %zu bytes, its marker says %" PRIu64, ext, len, bytes);
    else if (strcmp(hex, sha))
        pxb_why(why, why_len, "its %s's SHA-256 is %.12s..., its marker says %.12s...", ext, hex, sha);
    else if (pxb_npy_header_i64(data, len, &ndim, shape, &off, hwhy, sizeof hwhy) < 0)
        pxb_why(why, why_len, "its %s: %s", ext, hwhy);
    else if (ndim != dims || memcmp(shape, want, (size_t)dims * sizeof *want) ||
             off + (dims == 1 ? want[0] : want[0] * want[1]) * 8u != len)
        pxb_why(why, why_len, "its %s is not (%s) int64 for the marker's rows", ext, dims == 1 ? "rows + 1" : "rows, 3");
    else if (!(*v = malloc(len - off + 8)))
        pxb_why(why, why_len, "out of memory");
    else {
        for (size_t i = 0; i < (len - off) / 8; i++) {
            uint64_t x = 0;
            for (int b = 7; b >= 0; b--)
                x = x << 8 | data[off + i * 8 + (size_t)b];
            (*v)[i] = (int64_t)x;
        }
        rc = 0;
    }
    free(data);
    return rc;
}

/* A ragged shard's offsets and grid ([SH-ARRAY]): as the marker records them, grid row r the
 * marker's row r (1, h' / p, w' / p), offsets from 0, each the last plus its row's t * h * w, to
 * the token count. The sum is compared as it grows, so no value of the files overflows it. */
static int px__verify_ragged(const char *dir, int index, const pxb_marker *m, char *why, size_t why_len)
{
    int64_t *off = NULL, *grid = NULL;
    uint64_t os[1] = {m->nrows + 1}, gs[2] = {m->nrows, 3};
    int rc = -1;
    if (px__verify_index(dir, index, "offsets.npy", m->offsets_bytes, m->offsets_sha256, 1, os, &off, why, why_len) == 0 &&
        px__verify_index(dir, index, "grid.npy", m->grid_bytes, m->grid_sha256, 2, gs, &grid, why, why_len) == 0) {
        rc = 0;
        uint64_t at = 0; /* grid values checked before they are multiplied */
        for (size_t r = 0; !rc && r < m->nrows; r++) {
            const int64_t *g = grid + 3 * r;
            if (g[0] != 1 || g[1] < 1 || g[1] > INT32_MAX || g[2] < 1 || g[2] > INT32_MAX || off[r] < 0 ||
                (uint64_t)off[r] != at)
                rc = -1;
            at += (uint64_t)g[1] * (uint64_t)g[2];
            if (at > m->shape[0])
                rc = -1;
        }
        if (rc || off[m->nrows] < 0 || (uint64_t)off[m->nrows] != at || at != m->shape[0]) {
            pxb_why(why, why_len, "its offsets and grid do not agree (offsets from 0 to the %" PRIu64
                                  " tokens, each row t * h * w of its grid, t = 1)", m->shape[0]);
            rc = -1;
        }
        for (size_t r = 0; !rc && r < m->nrows; r++) {
            int64_t want[3];
            pxb_marker_row_grid(m, r, want);
            if (memcmp(grid + 3 * r, want, sizeof want)) {
                pxb_why(why, why_len, "its grid's row %zu is (%" PRId64 ", %" PRId64 ", %" PRId64 "), but its marker's "
                        "row %zu is resized to (1, %" PRId64 ", %" PRId64 ") patches", r, grid[3 * r], grid[3 * r + 1],
                        grid[3 * r + 2], r, want[1], want[2]);
                rc = -1;
            }
        }
    }
    free(off);
    free(grid);
    return rc;
}

int pxb_marker_load(const char *dir, int index, pxb_marker *m, char *why, size_t why_len)
{
    char *path;
    if (asprintf(&path, "%s/shard-%05d.json", dir, index) < 0)
        return -1;
    uint8_t *data;
    size_t len;
    char rwhy[256];
    int rc = px__read_regular(path, PXB_MARKER_MAX, &data, &len, rwhy, sizeof rwhy);
    free(path);
    if (rc < 0) {
        pxb_why(why, why_len, "its marker: %s", rwhy);
        return -1;
    }
    rc = pxb_marker_parse((const char *)data, len, index, m, rwhy, sizeof rwhy);
    free(data);
    if (rc < 0)
        pxb_why(why, why_len, "its marker: %s", rwhy);
    return rc;
}

int pxb_verify(const char *dir, FILE *out)
{
    char *lock;
    if (asprintf(&lock, "%s/.pxbatch.lock", dir) < 0)
        return 1;
    int lfd, busy = 0;
    for (int tries = 0;; tries++) { /* the lock locked must still be the path's (a failed run unlinks its own) */
        struct stat held, now;
        lfd = open(lock, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
        busy = lfd >= 0 && flock(lfd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
        if (lfd < 0 || busy || tries >= 100 ||
            (fstat(lfd, &held) == 0 && stat(lock, &now) == 0 && held.st_dev == now.st_dev && held.st_ino == now.st_ino))
            break;
        close(lfd);
    }
    free(lock);
    if (busy) {
        fprintf(stderr, "pxbatch: usage: a pxbatch run holds '%s' (its .pxbatch.lock): verify it when the run ends\n",
                dir);
        close(lfd);
        return 2;
    }
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "pxbatch: i/o error: cannot read '%s': %s\n", dir, strerror(errno));
        if (lfd >= 0)
            close(lfd);
        return 1;
    }
    px__entry_t *e = NULL;
    size_t n = 0, cap = 0;
    unsigned long good = 0, corrupt = 0, missing = 0, orphaned = 0, failed = 0; /* failed: inputs, in markers */
    struct dirent *de;
    while ((de = readdir(d))) {
        int index = -1, kind = pxb_shard_entry(de->d_name, &index);
        if (kind == PXB_NOT_OURS)
            continue;
        if (kind == PXB_TEMP || kind == PXB_STRAY) {
            fprintf(out, "%s: orphaned: %s\n", de->d_name,
                    kind == PXB_TEMP ? "the temporary file of an unfinished write"
                                     : "not a name pxbatch writes (shard-NNNNN.json, .npy, .offsets.npy, .grid.npy): "
                                       "a copy or a renamed file?");
            orphaned++;
            continue;
        }
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            px__entry_t *ne = realloc(e, cap * sizeof *e);
            if (!ne)
                break;
            e = ne;
        }
        e[n] = (px__entry_t){index, {0}};
        e[n++].has[kind] = 1;
    }
    closedir(d);
    if (n)
        qsort(e, n, sizeof *e, px__entry_cmp);
    size_t merged = 0; /* one entry a shard number */
    for (size_t i = 0; i < n; i++) {
        if (merged && e[merged - 1].index == e[i].index)
            for (int k = 0; k <= PXB_GRID; k++)
                e[merged - 1].has[k] |= e[i].has[k];
        else
            e[merged++] = e[i];
    }
    n = merged;
    /* the job: the first marker that parses */
    pxb_marker ref = {0};
    int have_ref = 0;
    char why[1024];
    for (size_t i = 0; i < n && !have_ref; i++)
        have_ref = e[i].has[PXB_JSON] && pxb_marker_load(dir, e[i].index, &ref, why, sizeof why) == 0;
    uint64_t nshards = have_ref ? (ref.inputs + ref.shard_size - 1) / ref.shard_size : 0;
    pxb_sha256 names;
    pxb_sha256_init(&names);
    int names_ok = have_ref, edited = 0;
    uint64_t expect = 0; /* the next shard number not yet seen */
    for (size_t i = 0; i <= n; i++) {
        uint64_t index = i < n ? (uint64_t)e[i].index : nshards;
        if (index > expect && expect < nshards) { /* a gap */
            uint64_t last = (index < nshards ? index : nshards) - 1;
            if (last == expect)
                fprintf(out, "shard-%05" PRIu64 ": missing: no marker, no .npy\n", expect);
            else
                fprintf(out, "shard-%05" PRIu64 " .. shard-%05" PRIu64 ": missing: no markers, no .npy\n", expect, last);
            missing += last - expect + 1;
            names_ok = 0;
        }
        if (i == n)
            break;
        expect = index + 1;
        pxb_marker m;
        if (!have_ref) { /* no job known: each marker's reason, not "past the job's 0 shards" */
            if (e[i].has[PXB_JSON] && pxb_marker_load(dir, (int)index, &m, why, sizeof why) < 0) {
                fprintf(out, "shard-%05" PRIu64 ": corrupt: %s\n", index, why);
                corrupt++;
            } else {
                fprintf(out, "shard-%05" PRIu64 ": missing: its marker (an unfinished shard's files are there)\n", index);
                missing++;
            }
            continue;
        }
        if (index >= nshards) {
            fprintf(out, "shard-%05" PRIu64 ": orphaned: past the job's %" PRIu64 " shards\n", index, nshards);
            for (int k = 0; k <= PXB_GRID; k++)
                orphaned += e[i].has[k];
            continue;
        }
        if (!e[i].has[PXB_JSON] || !e[i].has[PXB_NPY]) {
            fprintf(out, "shard-%05" PRIu64 ": missing: %s\n", index,
                    e[i].has[PXB_JSON] ? "its .npy (the marker is there)"
                                       : "its marker (an unfinished shard's files are there)");
            missing++;
            names_ok = 0;
            continue;
        }
        if (pxb_marker_load(dir, (int)index, &m, why, sizeof why) < 0) {
            fprintf(out, "shard-%05" PRIu64 ": corrupt: %s\n", index, why);
            corrupt++;
            names_ok = 0;
            continue;
        }
        char diff[1024];
        if (!m.ragged && (e[i].has[PXB_OFFSETS] || e[i].has[PXB_GRID])) {
            fprintf(out, "shard-%05" PRIu64 ": orphaned: index files (offsets.npy, grid.npy) beside a shard that is "
                         "not ragged\n", index);
            orphaned += (unsigned long)e[i].has[PXB_OFFSETS] + e[i].has[PXB_GRID];
        }
        if (m.ragged && (!e[i].has[PXB_OFFSETS] || !e[i].has[PXB_GRID])) {
            fprintf(out, "shard-%05" PRIu64 ": missing: its %s (the marker is there)\n", index,
                    e[i].has[PXB_OFFSETS] ? "grid.npy" : "offsets.npy");
            missing++;
            names_ok = 0;
        } else if (pxb_job_diff(ref.job, m.job, diff, sizeof diff)) {
            fprintf(out, "shard-%05" PRIu64 ": corrupt: of another job than shard-%05d (%s)\n", index, ref.shard, diff);
            corrupt++;
            names_ok = 0;
        } else {
            failed += (unsigned long)json_array_size(json_object_get(m.root, "errors"));
            if (names_ok && pxb_marker_hash_names(&m, &names) < 0)
                names_ok = 0;
            char *path;
            if (asprintf(&path, "%s/shard-%05" PRIu64 ".npy", dir, index) < 0)
                path = NULL;
            if (!path || px__verify_npy(path, &m, why, sizeof why) < 0 ||
                (m.ragged && px__verify_ragged(dir, (int)index, &m, why, sizeof why) < 0)) {
                fprintf(out, "shard-%05" PRIu64 ": corrupt: %s\n", index, path ? why : "out of memory");
                corrupt++;
            } else
                good++;
            free(path);
        }
        pxb_marker_free(&m);
    }
    if (names_ok) {
        char hex[65];
        pxb_sha256_hex(&names, hex);
        const char *want = json_string_value(json_object_get(ref.job, "inputs_sha256"));
        edited = !want || strcmp(hex, want);
    }
    if (!have_ref)
        fprintf(out, "no marker of a pxbatch job%s\n", n ? " parses" : "");
    char inputs[160] = ""; /* valid shards, but not every input in them: a user wants to know */
    if (failed)
        snprintf(inputs, sizeof inputs, "; %lu input%s failed (in the markers' errors; --retry-failed remakes "
                 "those shards once the files are fixed)", failed, failed == 1 ? "" : "s");
    fprintf(out, "pxbatch --verify %s: %" PRIu64 " shard%s: %lu good, %lu corrupt, %lu missing, %lu orphaned%s%s\n", dir,
            nshards, nshards == 1 ? "" : "s", good, corrupt, missing, orphaned, inputs,
            edited ? "; the markers' file lists do not hash to the job's inputs_sha256 (a marker was edited)" : "");
    if (have_ref && (corrupt || missing))
        fprintf(out, "pxbatch --verify %s: a rerun of the job makes missing shards again, and a corrupt one once "
                     "its marker (shard-NNNNN.json) is removed\n", dir);
    pxb_marker_free(&ref);
    free(e);
    if (lfd >= 0)
        close(lfd);
    return have_ref && !edited && !corrupt && !missing && !orphaned && good == nshards ? 0 : 1;
}
