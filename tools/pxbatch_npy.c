/* pxbatch_npy.c - the header of an .npy file as --verify reads it (versions 1.0 to 3.0, a C-order
 * uint8 array): its shape and where its data starts, anything else refused with the reason. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "pxbatch_files.h"

/* ---- .npy ----------------------------------------------------------------------------------- */

static const char *px__skip(const char *p, const char *end)
{
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\n'))
        p++;
    return p;
}

/* A quoted Python string (no escapes): [*s, *s + *n) */
static const char *px__pystr(const char *p, const char *end, const char **s, size_t *n)
{
    if (p >= end || (*p != '\'' && *p != '"'))
        return NULL;
    char q = *p++;
    const char *start = p;
    while (p < end && *p != q && *p != '\\')
        p++;
    if (p >= end || *p != q)
        return NULL;
    *s = start, *n = (size_t)(p - start);
    return p + 1;
}

static int px__npy_header(const uint8_t *data, size_t len, int i64, int *ndim, uint64_t shape[8], size_t *data_offset,
                          char *why, size_t why_len);

int pxb_npy_header(const uint8_t *data, size_t len, int *ndim, uint64_t shape[8], size_t *data_offset, char *why,
                   size_t why_len)
{
    return px__npy_header(data, len, 0, ndim, shape, data_offset, why, why_len);
}

int pxb_npy_header_i64(const uint8_t *data, size_t len, int *ndim, uint64_t shape[8], size_t *data_offset, char *why,
                       size_t why_len)
{
    return px__npy_header(data, len, 1, ndim, shape, data_offset, why, why_len);
}

size_t pxb_npy_head(const char *descr, int ndim, const uint64_t *shape, uint8_t head[PXB_NPY_HEAD_MAX])
{
    char dict[PXB_NPY_HEAD_MAX];
    int at = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
    for (int d = 0; d < ndim && d < 8; d++)
        at += snprintf(dict + at, sizeof dict - (size_t)at, "%" PRIu64 "%s", shape[d], ndim == 1 ? "," : d + 1 < ndim ? ", " : "");
    at += snprintf(dict + at, sizeof dict - (size_t)at, "), }");
    size_t h = 10 + (size_t)at + 1, pad = (64 - h % 64) % 64, hl = (size_t)at + pad + 1;
    memcpy(head, "\x93NUMPY\x01\x00", 8);
    head[8] = (uint8_t)(hl & 0xff), head[9] = (uint8_t)(hl >> 8);
    memcpy(head + 10, dict, (size_t)at);
    memset(head + 10 + at, ' ', pad);
    head[10 + hl - 1] = '\n';
    return 10 + hl;
}

int pxb_npy_i64(const int64_t *v, int ndim, const uint64_t *shape, uint8_t **out, size_t *len)
{
    uint8_t head[PXB_NPY_HEAD_MAX];
    size_t hl = pxb_npy_head("<i8", ndim, shape, head);
    uint64_t n = 1;
    for (int d = 0; d < ndim && d < 8; d++)
        n *= shape[d];
    *len = hl + (size_t)n * 8u;
    uint8_t *b = malloc(*len);
    if (!b)
        return -1;
    memcpy(b, head, hl);
    for (uint64_t i = 0; i < n; i++)
        for (int k = 0; k < 8; k++)
            b[hl + i * 8 + (uint64_t)k] = (uint8_t)((uint64_t)v[i] >> (8 * k));
    *out = b;
    return 0;
}

static int px__npy_header(const uint8_t *data, size_t len, int i64, int *ndim, uint64_t shape[8], size_t *data_offset,
                          char *why, size_t why_len)
{
    if (len < 10 || memcmp(data, "\x93NUMPY", 6)) {
        pxb_why(why, why_len, "not an .npy file (no \\x93NUMPY magic)");
        return -1;
    }
    if (data[6] < 1 || data[6] > 3 || data[7] != 0) {
        pxb_why(why, why_len, ".npy version %u.%u is not 1.0 to 3.0", data[6], data[7]);
        return -1;
    }
    size_t start = data[6] == 1 ? 10 : 12;
    if (len < start) {
        pxb_why(why, why_len, "truncated .npy header");
        return -1;
    }
    uint64_t hl = data[6] == 1 ? (uint64_t)data[8] | (uint64_t)data[9] << 8
                               : (uint64_t)data[8] | (uint64_t)data[9] << 8 | (uint64_t)data[10] << 16 |
                                     (uint64_t)data[11] << 24;
    if (hl > len - start) {
        pxb_why(why, why_len, "the .npy header says %" PRIu64 " bytes, the file has %zu after the magic", hl,
                len - start);
        return -1;
    }
    const char *p = (const char *)data + start, *end = p + hl;
    int have[3] = {0, 0, 0};
    *ndim = 0;
    p = px__skip(p, end);
    if (p >= end || *p++ != '{')
        goto bad;
    for (;;) {
        p = px__skip(p, end);
        if (p < end && *p == '}') {
            p++;
            break;
        }
        const char *key, *val;
        size_t kn, vn;
        if (!(p = px__pystr(p, end, &key, &kn)))
            goto bad;
        p = px__skip(p, end);
        if (p >= end || *p++ != ':')
            goto bad;
        p = px__skip(p, end);
        if (kn == 5 && !memcmp(key, "descr", 5) && !have[0]) {
            if (!(p = px__pystr(p, end, &val, &vn)))
                goto bad;
            if (i64 ? !(vn == 3 && !memcmp(val, "<i8", 3))
                    : !((vn == 3 && (!memcmp(val, "|u1", 3) || !memcmp(val, "<u1", 3) || !memcmp(val, ">u1", 3) ||
                                     !memcmp(val, "=u1", 3))) ||
                        (vn == 2 && !memcmp(val, "u1", 2)))) {
                pxb_why(why, why_len, "the .npy holds '%.*s', not %s", (int)(vn < 32 ? vn : 32), val,
                        i64 ? "little-endian int64 ('<i8')" : "uint8");
                return -1;
            }
            have[0] = 1;
        } else if (kn == 13 && !memcmp(key, "fortran_order", 13) && !have[1]) {
            if (end - p >= 5 && !memcmp(p, "False", 5))
                p += 5;
            else {
                pxb_why(why, why_len, "the .npy is not in C order");
                return -1;
            }
            have[1] = 1;
        } else if (kn == 5 && !memcmp(key, "shape", 5) && !have[2]) {
            if (p >= end || *p++ != '(')
                goto bad;
            for (;;) {
                p = px__skip(p, end);
                if (p < end && *p == ')') {
                    p++;
                    break;
                }
                uint64_t x = 0;
                const char *d = p;
                while (p < end && *p >= '0' && *p <= '9' && x <= (UINT64_MAX >> 4))
                    x = x * 10 + (uint64_t)(*p++ - '0');
                if (p == d || *ndim == 8)
                    goto bad;
                shape[(*ndim)++] = x;
                p = px__skip(p, end);
                if (p < end && *p == ',')
                    p++;
                else if (p >= end || *p != ')')
                    goto bad;
            }
            have[2] = 1;
        } else
            goto bad;
        p = px__skip(p, end);
        if (p < end && *p == ',')
            p++;
        else if (p >= end || *p != '}')
            goto bad;
    }
    if (px__skip(p, end) != end || !have[0] || !have[1] || !have[2])
        goto bad;
    *data_offset = start + (size_t)hl;
    return 0;
bad:
    pxb_why(why, why_len, "the .npy header is not a dict of descr, fortran_order and shape");
    return -1;
}
