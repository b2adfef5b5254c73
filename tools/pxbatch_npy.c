/* pxbatch_npy.c - the header of an .npy file as --verify reads it (versions 1.0 to 3.0, a C-order
 * uint8 array): its shape and where its data starts, anything else refused with the reason. */
#include <inttypes.h>
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

int pxb_npy_header(const uint8_t *data, size_t len, int *ndim, uint64_t shape[8], size_t *data_offset, char *why,
                   size_t why_len)
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
            if (!((vn == 3 && (!memcmp(val, "|u1", 3) || !memcmp(val, "<u1", 3) || !memcmp(val, ">u1", 3) ||
                               !memcmp(val, "=u1", 3))) ||
                  (vn == 2 && !memcmp(val, "u1", 2)))) {
                pxb_why(why, why_len, "the .npy holds '%.*s', not uint8", (int)(vn < 32 ? vn : 32), val);
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
