/* pxbatch_marker.c - a shard's marker as read back (every field checked as [SH-JOB] and [SH-ROW]
 * of pxbatch.h say: the format, the job, the shape, the .npy's size and SHA-256, each input of the
 * shard once, in order, each row's sizes), the names its inputs hash to, and the fields in which
 * two jobs differ. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "../include/pxvm.h"
#include "pxbatch_files.h"

/* ---- markers -------------------------------------------------------------------------------- */

/* An integer field lo..hi of obj. */
static int px__int(json_t *obj, const char *key, uint64_t lo, uint64_t hi, uint64_t *v, char *why, size_t why_len)
{
    json_t *x = json_object_get(obj, key);
    if (!json_is_integer(x) || json_integer_value(x) < 0 || (uint64_t)json_integer_value(x) < lo ||
        (uint64_t)json_integer_value(x) > hi) {
        pxb_why(why, why_len, "'%s' is not an integer %" PRIu64 "..%" PRIu64, key, lo, hi);
        return -1;
    }
    *v = (uint64_t)json_integer_value(x);
    return 0;
}

static int px__is_sha(const char *s)
{
    if (!s || strlen(s) != 64)
        return 0;
    for (int i = 0; i < 64; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return 0;
    return 1;
}

/* A [w, h] pair of integers 1..2^31-1. */
static int px__pair(json_t *a, int *w, int *h)
{
    json_t *x = json_array_get(a, 0), *y = json_array_get(a, 1);
    if (!json_is_array(a) || json_array_size(a) != 2 || !json_is_integer(x) || !json_is_integer(y) ||
        json_integer_value(x) < 1 || json_integer_value(x) > INT32_MAX || json_integer_value(y) < 1 ||
        json_integer_value(y) > INT32_MAX)
        return -1;
    *w = (int)json_integer_value(x), *h = (int)json_integer_value(y);
    return 0;
}

/* Row i's "size" and "resized" ([SH-ROW]): [w, h] and the policy's dynamic size of it in a ragged
 * shard, [w, h] alone under "native", neither otherwise. */
static int px__row_sizes(json_t *e, size_t i, const pxb_marker *m, char *why, size_t why_len)
{
    json_t *size = json_object_get(e, "size"), *resized = json_object_get(e, "resized");
    int w = 0, h = 0, rw, rh, ow, oh;
    if ((m->ragged || m->native) && px__pair(size, &w, &h) < 0) {
        pxb_why(why, why_len, "rows[%zu]: 'size' is not [w, h] of 1..%d", i, INT32_MAX);
        return -1;
    }
    if (!m->ragged && !m->native && size) {
        pxb_why(why, why_len, "rows[%zu]: a 'size', but policy %s binds every image at the input's size", i, m->policy);
        return -1;
    }
    if (!m->ragged) {
        if (resized)
            pxb_why(why, why_len, "rows[%zu]: a 'resized', but the shard is not ragged", i);
        return resized ? -1 : 0;
    }
    if (pxvm_policy_dynamic_size(m->policy, (int)m->shape[1], w, h, &ow, &oh) != 0) {
        pxb_why(why, why_len, "rows[%zu]: 'size' [%d, %d]: %s", i, w, h, pxvm_errmsg());
        return -1;
    }
    if (px__pair(resized, &rw, &rh) < 0 || rw != ow || rh != oh) {
        pxb_why(why, why_len, "rows[%zu]: 'resized' is not [%d, %d], policy %s's size of its 'size' [%d, %d]", i, ow, oh,
                m->policy, w, h);
        return -1;
    }
    return 0;
}

void pxb_marker_row_grid(const pxb_marker *m, size_t r, int64_t grid[3])
{
    json_t *resized = json_object_get(json_array_get(json_object_get(m->root, "rows"), r), "resized");
    int64_t p = m->shape[1] ? (int64_t)m->shape[1] : 1;
    grid[0] = 1;
    grid[1] = json_integer_value(json_array_get(resized, 1)) / p;
    grid[2] = json_integer_value(json_array_get(resized, 0)) / p;
}

/* Entry i of rows or errors: its input number (increasing within the list) and a name. */
static int px__entry(json_t *list, size_t i, int is_row, const pxb_marker *m, uint64_t *input, char *why, size_t why_len)
{
    const char *what = is_row ? "rows" : "errors";
    json_t *e = json_array_get(list, i);
    uint64_t v;
    if (!json_is_object(e)) {
        pxb_why(why, why_len, "%s[%zu] is not an object", what, i);
        return -1;
    }
    if (is_row && (px__int(e, "row", i, i, &v, NULL, 0) < 0)) {
        pxb_why(why, why_len, "rows[%zu]: 'row' is not %zu", i, i);
        return -1;
    }
    if (is_row && px__row_sizes(e, i, m, why, why_len) < 0)
        return -1;
    if (px__int(e, "input", m->first, m->first + m->count - 1, input, NULL, 0) < 0) {
        pxb_why(why, why_len, "%s[%zu]: 'input' is not one of the shard's inputs %" PRIu64 "..%" PRIu64, what, i,
                m->first, m->first + m->count - 1);
        return -1;
    }
    char *name = pxb_json_get_name(e, "file");
    if (!name) {
        pxb_why(why, why_len, "%s[%zu]: no file name ('file' or 'file_bytes')", what, i);
        return -1;
    }
    free(name);
    if (!is_row && !json_is_string(json_object_get(e, "error"))) {
        pxb_why(why, why_len, "errors[%zu]: no 'error'", i);
        return -1;
    }
    return 0;
}

int pxb_marker_parse(const char *data, size_t len, int shard, pxb_marker *m, char *why, size_t why_len)
{
    memset(m, 0, sizeof *m);
    json_error_t jerr;
    m->root = json_loadb(data, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!m->root) {
        pxb_why(why, why_len, "not JSON (line %d: %s)", jerr.line, jerr.text);
        return -1;
    }
    uint64_t v;
    json_t *r = m->root;
    if (!json_is_object(r) || px__int(r, "pxbatch", PXB_FORMAT, PXB_FORMAT, &v, NULL, 0) < 0) {
        pxb_why(why, why_len, "not a marker of this pxbatch (\"pxbatch\": %d missing: an older pxbatch's?)", PXB_FORMAT);
        goto bad;
    }
    if (px__int(r, "shard", shard < 0 ? 0 : (uint64_t)shard, shard < 0 ? INT32_MAX : (uint64_t)shard, &v, why,
                why_len) < 0)
        goto bad;
    m->shard = (int)v;
    m->job = json_object_get(r, "job");
    if (!json_is_object(m->job)) {
        pxb_why(why, why_len, "no 'job' object");
        goto bad;
    }
    if (px__int(m->job, "shard_size", 1, PXB_SHARD_SIZE_MAX, &m->shard_size, why, why_len) < 0 ||
        px__int(m->job, "inputs", 0, INT32_MAX, &m->inputs, why, why_len) < 0)
        goto bad;
    m->first = (uint64_t)m->shard * m->shard_size;
    if (m->first >= m->inputs) {
        pxb_why(why, why_len, "shard %d is past the job's %" PRIu64 " inputs", m->shard, m->inputs);
        goto bad;
    }
    m->count = m->inputs - m->first < m->shard_size ? m->inputs - m->first : m->shard_size;
    json_t *policy = json_object_get(m->job, "policy"), *ragged = json_object_get(r, "ragged");
    m->policy = policy ? json_string_value(policy) : "exact";
    if (!m->policy || (policy && strlen(m->policy) != json_string_length(policy))) {
        pxb_why(why, why_len, "job: 'policy' is not a policy text");
        goto bad;
    }
    m->native = !strcmp(m->policy, "native");
    int dynamic = !strncmp(m->policy, "dynamic", 7) && (m->policy[7] == 0 || m->policy[7] == ':');
    if (dynamic != (ragged != NULL)) {
        pxb_why(why, why_len, dynamic ? "no 'ragged', but policy %s writes ragged shards"
                                      : "a 'ragged', but policy %s writes shards of one shape", m->policy);
        goto bad;
    }
    json_t *shape = json_object_get(r, "shape");
    size_t dims = ragged ? 4 : 5;
    if (json_array_size(shape) != dims) {
        pxb_why(why, why_len, "'shape' is not %zu numbers", dims);
        goto bad;
    }
    for (size_t i = 0; i < dims; i++) {
        json_t *x = json_array_get(shape, i);
        if (!json_is_integer(x) || json_integer_value(x) < 0 || json_integer_value(x) > INT32_MAX ||
            (i == dims - 1 && json_integer_value(x) != 4)) {
            pxb_why(why, why_len, ragged ? "'shape' is not (tokens, h, w, 4)" : "'shape' is not (rows, patches, h, w, 4)");
            goto bad;
        }
        m->shape[i] = (uint64_t)json_integer_value(x);
    }
    if (ragged && (m->shape[1] < 1 || m->shape[2] != m->shape[1])) {
        pxb_why(why, why_len, "'shape' is not (tokens, p, p, 4)");
        goto bad;
    }
    if (ragged) { /* the offsets and grid files of a dynamic shard */
        const char *so = json_string_value(json_object_get(ragged, "offsets_sha256"));
        const char *sg = json_string_value(json_object_get(ragged, "grid_sha256"));
        if (!json_is_object(ragged) || px__int(ragged, "offsets_bytes", 0, INT64_MAX, &m->offsets_bytes, why, why_len) < 0 ||
            px__int(ragged, "grid_bytes", 0, INT64_MAX, &m->grid_bytes, why, why_len) < 0 || !px__is_sha(so) ||
            !px__is_sha(sg)) {
            pxb_why(why, why_len, "'ragged' is not {offsets_bytes, offsets_sha256, grid_bytes, grid_sha256}");
            goto bad;
        }
        memcpy(m->offsets_sha256, so, 65);
        memcpy(m->grid_sha256, sg, 65);
        m->ragged = 1;
    }
    if (px__int(r, "npy_bytes", 0, INT64_MAX, &m->npy_bytes, why, why_len) < 0)
        goto bad;
    const char *sha = json_string_value(json_object_get(r, "npy_sha256"));
    if (!px__is_sha(sha)) {
        pxb_why(why, why_len, "'npy_sha256' is not 64 hex digits");
        goto bad;
    }
    memcpy(m->npy_sha256, sha, 65);
    json_t *rows = json_object_get(r, "rows"), *errors = json_object_get(r, "errors");
    if (!json_is_array(rows) || !json_is_array(errors)) {
        pxb_why(why, why_len, "no 'rows' or 'errors' list");
        goto bad;
    }
    m->nrows = json_array_size(rows), m->nerrors = json_array_size(errors);
    if (!m->ragged && m->nrows != m->shape[0]) {
        pxb_why(why, why_len, "%zu rows listed, but the shape has %" PRIu64, m->nrows, m->shape[0]);
        goto bad;
    }
    if (m->nrows + m->nerrors != m->count) {
        pxb_why(why, why_len, "%zu rows and %zu errors listed, but the shard has %" PRIu64 " inputs", m->nrows, m->nerrors,
                m->count);
        goto bad;
    }
    /* both lists in input order; merged, every input of the shard once */
    size_t i = 0, k = 0;
    uint64_t next = m->first, a = UINT64_MAX, b = UINT64_MAX;
    if ((m->nrows && px__entry(rows, 0, 1, m, &a, why, why_len) < 0) ||
        (m->nerrors && px__entry(errors, 0, 0, m, &b, why, why_len) < 0))
        goto bad;
    while (i < m->nrows || k < m->nerrors) {
        int row = i < m->nrows && (k >= m->nerrors || a < b);
        if ((row ? a : b) != next) {
            pxb_why(why, why_len, "%s[%zu] is input %" PRIu64 ", expected %" PRIu64, row ? "rows" : "errors", row ? i : k,
                    row ? a : b, next);
            goto bad;
        }
        if (row && ++i < m->nrows && px__entry(rows, i, 1, m, &a, why, why_len) < 0)
            goto bad;
        if (!row && ++k < m->nerrors && px__entry(errors, k, 0, m, &b, why, why_len) < 0)
            goto bad;
        next++;
    }
    return 0;
bad:
    pxb_marker_free(m);
    return -1;
}

void pxb_marker_free(pxb_marker *m)
{
    json_decref(m->root);
    memset(m, 0, sizeof *m);
}

int pxb_marker_hash_names(const pxb_marker *m, pxb_sha256 *c)
{
    json_t *rows = json_object_get(m->root, "rows"), *errors = json_object_get(m->root, "errors");
    size_t i = 0, k = 0;
    while (i < m->nrows || k < m->nerrors) {
        json_t *a = json_array_get(rows, i), *b = json_array_get(errors, k);
        json_int_t ia = a ? json_integer_value(json_object_get(a, "input")) : INT64_MAX;
        json_int_t ib = b ? json_integer_value(json_object_get(b, "input")) : INT64_MAX;
        json_t *e = ia < ib ? a : b;
        ia < ib ? i++ : k++;
        char *name = pxb_json_get_name(e, "file");
        if (!name)
            return -1;
        pxb_sha256_update(c, name, strlen(name) + 1);
        free(name);
    }
    return 0;
}

static void px__append(char *buf, size_t len, const char *key, json_t *a, json_t *b)
{
    char *x = a ? json_dumps(a, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;
    char *y = b ? json_dumps(b, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;
    size_t at = strlen(buf);
    if (at < len)
        snprintf(buf + at, len - at, "%s%s: %s -> %s", at ? "; " : "", key, x ? x : "(none)", y ? y : "(none)");
    free(x);
    free(y);
}

/* A job field added after markers were first written, and the value such a marker was made with
 * (NULL: none): "policy", "exact" (pxbatch resized nothing then). */
static json_t *px__job_default(const char *key)
{
    return !strcmp(key, "policy") ? json_string("exact") : NULL;
}

/* job's field key, or its default when a marker written before it existed has none (a new
 * reference, json_decref it; NULL: neither) */
static json_t *px__job_get(json_t *job, const char *key)
{
    json_t *v = json_object_get(job, key);
    return v ? json_incref(v) : px__job_default(key);
}

int pxb_job_diff(json_t *old_job, json_t *new_job, char *buf, size_t len)
{
    int n = 0;
    const char *key;
    json_t *v;
    if (len)
        buf[0] = 0;
    json_object_foreach(new_job, key, v) {
        json_t *o = px__job_get(old_job, key), *w = px__job_get(new_job, key);
        if (!o || !json_equal(o, w))
            px__append(buf, len, key, o, w), n++;
        json_decref(o);
        json_decref(w);
    }
    json_object_foreach(old_job, key, v) {
        json_t *w = json_object_get(new_job, key) ? NULL : px__job_default(key);
        if (!json_object_get(new_job, key) && (!w || !json_equal(v, w)))
            px__append(buf, len, key, v, w), n++;
        json_decref(w);
    }
    return n;
}
