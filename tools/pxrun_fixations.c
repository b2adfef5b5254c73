/* pxrun_fixations.c - pxrun's fixations: --fixation X,Y parsed, checked and converted to the
 * program's input registers (px_run_fixations), and --fixations FILE: one fixation per frame of
 * --frames, for a gaze that moves.
 * A text file, one line per frame (frame k: line k + 1), each "X,Y" as --fixation takes it
 * (normalized to the frame, or level-0 texels with px: "512px,300px"); or a .npy array of shape
 * (F, 2), row k for frame k: float32/float64 normalized, int32/int64 texels (little-endian,
 * C order). Read whole before anything runs; errors name the file and the line (or row). */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pxrun.h"


static int px__ff_add(px_run_fixfile *f, double x, double y, int texels, pxvm_error *err)
{
    if (f->n % 1024 == 0) {
        double(*v)[2] = realloc(f->v, sizeof *f->v * (size_t)(f->n + 1024));
        if (v)
            f->v = v;
        unsigned char *t = realloc(f->texels, (size_t)(f->n + 1024));
        if (t)
            f->texels = t;
        if (!v || !t)
            return pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)(f->n + 1024) * 17u);
    }
    f->v[f->n][0] = x, f->v[f->n][1] = y, f->texels[f->n++] = (unsigned char)texels;
    return 0;
}

/* A .npy of shape (F, 2): '<f4', '<f8' (normalized), '<i4', '<i8' (texels), C order. */
static int px__ff_npy(px_run_fixfile *f, const unsigned char *d, size_t len, pxvm_error *err)
{
    if (len < 10 || d[6] < 1 || d[6] > 3)
        return pxvm_fail(err, PXE_FIXFILE_NOT_NPY, -1, -1, f->path);
    size_t hl = d[6] == 1 ? (size_t)d[8] | (size_t)d[9] << 8 : len >= 12 ? (size_t)d[8] | (size_t)d[9] << 8 | (size_t)d[10] << 16 | (size_t)d[11] << 24 : len;
    size_t off = d[6] == 1 ? 10 : 12;
    if (off + hl > len)
        return pxvm_fail(err, PXE_FIXFILE_NPY_SHORT, -1, -1, f->path);
    char hdr[512];
    size_t n = hl < sizeof hdr - 1 ? hl : sizeof hdr - 1;
    memcpy(hdr, d + off, n);
    hdr[n] = 0;
    const char *descr = strstr(hdr, "'descr': '"), *shape = strstr(hdr, "'shape': (");
    int item = 0, isfloat = 0;
    if (descr) {
        descr += 10;
        if (!strncmp(descr, "<f4'", 4) || !strncmp(descr, "<i4'", 4))
            item = 4;
        else if (!strncmp(descr, "<f8'", 4) || !strncmp(descr, "<i8'", 4))
            item = 8;
        isfloat = descr[1] == 'f';
    }
    char *end = NULL;
    long rows = shape ? strtol(shape + 10, &end, 10) : -1;
    if (!item || !strstr(hdr, "'fortran_order': False") || rows < 1 || !end || strncmp(end, ", 2)", 4))
        return pxvm_fail(err, PXE_FIXFILE_NPY_SHAPE, -1, -1, f->path);
    if ((len - off - hl) / (size_t)item / 2 != (size_t)rows || (len - off - hl) % ((size_t)item * 2))
        return pxvm_fail(err, PXE_FIXFILE_NPY_DATA, -1, -1, f->path, rows, item, len - off - hl);
    f->npy = 1;
    const unsigned char *p = d + off + hl;
    for (long r = 0; r < rows; r++) {
        double v[2];
        for (int c = 0; c < 2; c++, p += item) {
            uint64_t u = 0;
            for (int b = item - 1; b >= 0; b--)
                u = u << 8 | p[b];
            if (isfloat && item == 4) {
                uint32_t u32 = (uint32_t)u;
                float x;
                memcpy(&x, &u32, 4);
                v[c] = x;
            } else if (isfloat) {
                memcpy(&v[c], &u, 8);
            } else
                v[c] = item == 4 ? (double)(int32_t)(uint32_t)u : (double)(int64_t)u;
        }
        if (px__ff_add(f, v[0], v[1], !isfloat, err) < 0)
            return -1;
    }
    return 0;
}

int px_run_fixfile_load(px_run_fixfile *f, const pxvm_limits *lim, pxvm_error *err)
{
    FILE *in = fopen(f->path, "rb");
    if (!in)
        return pxvm_fail(err, PXE_IO_READ, -1, -1, f->path, strerror(errno));
    unsigned char *d = NULL;
    size_t len = 0, cap = 0;
    for (;;) { /* the whole file, within --max-memory */
        if (len == cap) {
            cap = cap ? cap * 2 : 65536;
            unsigned char *nd = cap <= lim->max_memory ? realloc(d, cap) : NULL;
            if (!nd) {
                free(d);
                fclose(in);
                return cap > lim->max_memory
                           ? pxvm_fail(err, PXE_IMAGE_MEMORY, -1, -1, f->path, 0ul, 0ul, (unsigned long long)cap,
                                       (unsigned long long)lim->max_memory)
                           : pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)cap);
            }
            d = nd;
        }
        size_t r = fread(d + len, 1, cap - len, in);
        if (!r)
            break;
        len += r;
    }
    int bad = ferror(in);
    fclose(in);
    if (bad) {
        free(d);
        return pxvm_fail(err, PXE_IO_READ, -1, -1, f->path, "read error");
    }
    int rc = 0;
    if (len >= 6 && !memcmp(d, "\x93NUMPY", 6))
        rc = px__ff_npy(f, d, len, err);
    else
        for (size_t i = 0, line = 1; rc == 0 && i < len; line++) { /* one "X,Y" a line */
            size_t j = i;
            while (j < len && d[j] != '\n')
                j++;
            size_t k = j > i && d[j - 1] == '\r' ? j - 1 : j; /* CRLF as LF */
            char text[128], what[400];
            if (k - i >= sizeof text || memchr(d + i, 0, k - i)) {
                rc = pxvm_fail(err, PXE_FIXFILE_LINE, -1, -1, f->path, line);
                break;
            }
            memcpy(text, d + i, k - i);
            text[k - i] = 0;
            double v[2];
            int texels = 0;
            snprintf(what, sizeof what, "--fixations '%.200s' line %zu ('%.127s')", f->path, line, text);
            rc = px_run_parse_fixation(text, v, &texels, what, err);
            if (rc == 0)
                rc = px__ff_add(f, v[0], v[1], texels, err);
            i = j + 1;
        }
    free(d);
    if (rc == 0 && f->n == 0)
        rc = pxvm_fail(err, PXE_FIXFILE_EMPTY, -1, -1, f->path);
    return rc;
}

int px_run_fixfile_frame(const pxvm_program *prog, const px_run_args *a, long frame, int32_t q[2], pxvm_error *err)
{
    const px_run_fixfile *f = &a->fixfile;
    char what[500];
    if (frame >= f->n)
        return pxvm_fail(err, PXE_FIXFILE_SHORT, -1, -1, f->path, f->n, f->npy ? "rows" : "lines", a->frames, frame,
                         f->n);
    snprintf(what, sizeof what, "--fixations '%.300s' %s %ld (frame %ld)", f->path, f->npy ? "row" : "line",
             f->npy ? frame : frame + 1, frame);
    return pxvm_fixation_convert(prog, f->v[frame], f->texels[frame], q, what, NULL, err);
}

void px_run_fixfile_free(px_run_fixfile *f)
{
    free(f->v);
    free(f->texels);
    f->v = NULL, f->texels = NULL, f->n = 0;
}

int px_run_parse_fixation(const char *text, double v[2], int *texels, const char *what, pxvm_error *err)
{
    int px[2] = {0, 0};
    const char *p = text;
    for (int i = 0; i < 2; i++) {
        char *end;
        v[i] = strtod(p, &end);
        if (end == p)
            goto bad;
        if (!strncmp(end, "px", 2))
            px[i] = 1, end += 2;
        if (i == 0 && *end != ',')
            goto bad;
        if (i == 1 && *end)
            goto bad;
        p = end + 1;
    }
    if (px[0] != px[1])
        return pxvm_fail(err, PXE_FIXATION_MIXED, -1, -1, what);
    *texels = px[0];
    return 0;
bad:
    return pxvm_fail(err, PXE_FIXATION_SYNTAX, -1, -1, what);
}

int px_run_fix_reg(const pxvm_program *prog, int k)
{
    unsigned inputs = pxvm_fixation_inputs(prog, NULL);
    for (int r = 0; r < PX_FIX_REGS; r++)
        if (inputs >> r & 1 && k-- == 0)
            return r;
    return -1;
}

/* Every --fixation parsed, checked (the k-th given is for the program's k-th input register, the
 * values in range) and converted to Q16 as the library converts them; then every input register
 * of the program must have one. Before anything is loaded on the executor. */
int px_run_fixations(const pxvm_program *prog, const px_run_args *a, int32_t q[PX_FIX_REGS][2], pxvm_error *err)
{
    unsigned given = 0;
    for (int k = 0; k < a->nfix; k++) {
        const char *t = a->fix_text[k], *comma = strchr(t, ',');
        char what[300], hint[300] = "";
        double v[2];
        int texels = 0, reg = px_run_fix_reg(prog, k);
        snprintf(what, sizeof what, "--fixation '%s'", t);
        if (px_run_parse_fixation(t, v, &texels, what, err) < 0)
            return -1;
        if (reg < 0 && k > 0) { /* (k = 0: the library's words for a program that takes none) */
            char list[64] = "";
            for (int r = 0, n = 0; r < k; r++)
                n += snprintf(list + n, sizeof list - (size_t)n, "%s%d", r ? ", " : "", px_run_fix_reg(prog, r));
            return pxvm_fail(err, PXE_FIXATION_TOO_MANY, -1, -1, what, a->prog_path, k, k > 1 ? "s" : "",
                             k > 1 ? "s" : "", list, k + 1);
        }
        if (pxvm_fixation_check_regs(prog, a->prog_path, reg < 0 ? 0 : reg, 1, what, err) < 0)
            return -1;
        given |= 1u << reg;
        if (!texels && comma && v[0] >= 0 && v[1] >= 0 && (v[0] > 1 || v[1] > 1) && v[0] < 1e9 && v[1] < 1e9)
            /* a texel fixation written without px? */
            snprintf(hint, sizeof hint, "; texels are written with px: --fixation %.*spx,%spx", (int)(comma - t), t,
                     comma + 1);
        if (pxvm_fixation_convert(prog, v, texels, q[k], what, hint, err) < 0)
            return -1;
    }
    if (a->fixfile.path) { /* the first input register, set at each frame (px_run_fixfile_frame) */
        int reg = px_run_fix_reg(prog, 0);
        char what[400];
        snprintf(what, sizeof what, "--fixations '%.300s'", a->fixfile.path);
        if (pxvm_fixation_check_regs(prog, a->prog_path, reg < 0 ? 0 : reg, 1, what, err) < 0)
            return -1;
        given |= 1u << reg;
    }
    return pxvm_fixation_check_set(prog, a->prog_path, given, -1,
                                   " (--fixation X,Y, normalized to the first input)", err);
}
