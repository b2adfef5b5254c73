/* asm_directives.c - the assembler's directives, read into the program: .slot, .data (a PNG file
 * beside the source, refused unless a regular file within the limit), .table (GATHER entries),
 * .rows and .pixels (blocks of RRGGBBAA pixels), and the slot names they declare. */
#define _GNU_SOURCE /* O_CLOEXEC */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "asm_internal.h"

static int px__hex_block_read(px_asm_src *s, uint8_t **px, int *n, int **line_len, int *nlines);

/* Reads lines of 8-hex-digit pixels up to ".end": all pixels in order, and how many each line had
 * (both malloc'ed; nothing is left allocated on failure). */
static int px__hex_block(px_asm_src *s, uint8_t **px, int *n, int **line_len, int *nlines)
{
    int rc = px__hex_block_read(s, px, n, line_len, nlines);
    if (rc < 0) {
        free(*px);
        free(*line_len);
        *px = NULL;
        *line_len = NULL;
    }
    return rc;
}

static int px__hex_block_read(px_asm_src *s, uint8_t **px, int *n, int **line_len, int *nlines)
{
    px_asm_tok t;
    int cap = 0, lcap = 0;
    *px = NULL;
    *line_len = NULL;
    *n = *nlines = 0;
    for (;;) {
        if (px_asm_next(s, &t) < 0)
            return -1;
        if (t.kind == T_EOF)
            return px_asm_fail_at(s, t.line, t.col, "missing .end");
        if (t.kind == T_EOL)
            continue;
        if (!strcmp(t.text, ".end"))
            return px_asm_expect_eol(s);
        int count = 0;
        while (t.kind == T_WORD) {
            if (*n == cap) {
                cap = cap ? 2 * cap : 256;
                uint8_t *q = realloc(*px, 4u * (size_t)cap);
                if (!q)
                    return px_asm_fail_at(s, t.line, t.col, "out of memory");
                *px = q;
            }
            if (px_asm_hex_pixel(t.text, *px + 4 * *n) < 0)
                return px_asm_fail_at(s, t.line, t.col, "'%s' is not a pixel (expected 8 hex digits RRGGBBAA)", t.text);
            (*n)++;
            count++;
            if (px_asm_next(s, &t) < 0)
                return -1;
        }
        if (t.kind != T_EOL)
            return px_asm_fail_at(s, t.line, t.col, "unexpected '%s' in a pixel block (expected RRGGBBAA pixels or .end)",
                               px_asm_tok_name(&t));
        if (*nlines == lcap) {
            lcap = lcap ? 2 * lcap : 64;
            int *q = realloc(*line_len, sizeof(int) * (size_t)lcap);
            if (!q)
                return px_asm_fail_at(s, t.line, t.col, "out of memory");
            *line_len = q;
        }
        (*line_len)[(*nlines)++] = count;
    }
}

static int px__role(const char *w)
{
    static const char *const names[] = {"", "input", "output", "scratch", "data"};
    for (int r = 1; r <= PXI_ROLE_LAST; r++)
        if (!strcmp(w, names[r]))
            return r;
    return -1;
}

/* A name for a slot or rows block: [a-z0-9_], not starting with a digit, at most `max` bytes. */
static int px__valid_name(const char *w, size_t max)
{
    if (!*w || strlen(w) > max || isdigit((unsigned char)*w))
        return 0;
    for (; *w; w++)
        if (!(islower((unsigned char)*w) || isdigit((unsigned char)*w) || *w == '_'))
            return 0;
    return 1;
}

int px_asm_find_slot(const px_asm_prog *p, const char *name)
{
    for (int k = 0; k < p->nslots; k++)
        if (p->slots[k].name[0] && !strcmp(p->slots[k].name, name))
            return k;
    return -1;
}

/* .slot NAME|- ROLE WxH [patches=PWxPHxN] [at=(X,Y)] [persistent]
 *       [any [min=SIDE] [max=SIDE] [pixels=N]]   (an any-size input; WxH its reference size) */
int px_asm_dir_slot(px_asm_src *s, px_asm_prog *p, const px_asm_tok *dir)
{
    px_asm_tok t;
    if (p->nslots >= PXVM_MAX_SLOTS)
        return px_asm_fail_at(s, dir->line, dir->col, "more than %d slots", PXVM_MAX_SLOTS);
    px_asm_slot *sl = &p->slots[p->nslots];
    memset(sl, 0, sizeof *sl);
    sl->line = dir->line;
    if (px_asm_word(s, &t, "a slot name (or - for none)") < 0)
        return -1;
    if (strcmp(t.text, "-")) {
        if (!px__valid_name(t.text, PXI_NAME_MAX) || !strcmp(t.text, "prog"))
            return px_asm_fail_at(s, t.line, t.col, "bad slot name '%s' (expected 1-8 of a-z 0-9 _, not starting with a digit, not 'prog')", t.text);
        if (px_asm_find_slot(p, t.text) >= 0)
            return px_asm_fail_at(s, t.line, t.col, "slot '%s' is already declared", t.text);
        snprintf(sl->name, sizeof sl->name, "%.*s", PXI_NAME_MAX, t.text);
    }
    if (px_asm_word(s, &t, "a role (input, output, scratch, data)") < 0)
        return -1;
    if ((sl->role = px__role(t.text)) < 0)
        return px_asm_fail_at(s, t.line, t.col, "unknown role '%s' (expected input, output, scratch or data)", t.text);
    if (px_asm_word(s, &t, "a size WxH") < 0)
        return -1;
    if (px_asm_parse_size(t.text, &sl->w, &sl->h) < 0)
        return px_asm_fail_at(s, t.line, t.col, "'%s' is not a size (expected WxH, e.g. 451x300)", t.text);
    for (;;) {
        if (px_asm_next(s, &t) < 0)
            return -1;
        if (t.kind == T_EOL || t.kind == T_EOF)
            break;
        px_asm_tok eq, v;
        if (t.kind == T_WORD && !strcmp(t.text, "persistent")) {
            sl->persist = 1;
            continue;
        }
        if (t.kind == T_WORD && !strcmp(t.text, "any")) {
            if (sl->role != PXI_ROLE_INPUT)
                return px_asm_fail_at(s, t.line, t.col, "only input slots can be any-size ('any')");
            sl->any = 1;
            continue;
        }
        if (t.kind != T_WORD || px_asm_next(s, &eq) < 0 || eq.kind != T_EQ)
            return px_asm_fail_at(s, t.line, t.col, "expected patches=PWxPHxN, at=(X,Y), persistent or any");
        if (!strcmp(t.text, "min") || !strcmp(t.text, "max") || !strcmp(t.text, "pixels")) {
            int side = strcmp(t.text, "pixels") != 0;
            if (!sl->any)
                return px_asm_fail_at(s, t.line, t.col, "%s= is a bound of an any-size slot: write 'any' before it", t.text);
            if (px_asm_word(s, &v, side ? "a side" : "a pixel count") < 0)
                return -1;
            long long n;
            if (px_asm_parse_int(v.text, 1, side ? 65535 : 4294967295ll, &n) < 0)
                return px_asm_fail_at(s, v.line, v.col, "%s=%s: expected an integer in 1..%s", t.text, v.text,
                                      side ? "65535" : "4294967295");
            *(!strcmp(t.text, "min") ? &sl->any_min : !strcmp(t.text, "max") ? &sl->any_max : &sl->any_pixels) = n;
        } else if (!strcmp(t.text, "patches")) {
            if (px_asm_word(s, &v, "PWxPHxN") < 0)
                return -1;
            char *last = strrchr(v.text, 'x');
            long long n;
            if (!last || px_asm_parse_int(last + 1, 1, INT_MAX, &n) < 0)
                return px_asm_fail_at(s, v.line, v.col, "'%s' is not PWxPHxN (e.g. 16x16x273)", v.text);
            *last = 0;
            if (px_asm_parse_size(v.text, &sl->pw, &sl->ph) < 0)
                return px_asm_fail_at(s, v.line, v.col, "'%s' is not PWxPHxN (e.g. 16x16x273)", v.text);
            sl->pn = (int)n;
        } else if (!strcmp(t.text, "at")) {
            px_asm_tok lp, x, c, y, rp;
            long long xv, yv;
            if (px_asm_next(s, &lp) < 0 || lp.kind != T_LP || px_asm_word(s, &x, "X") < 0 || px_asm_next(s, &c) < 0 ||
                c.kind != T_COMMA || px_asm_word(s, &y, "Y") < 0 || px_asm_next(s, &rp) < 0 || rp.kind != T_RP ||
                px_asm_parse_int(x.text, 0, 65535, &xv) < 0 || px_asm_parse_int(y.text, 0, 65535, &yv) < 0)
                return px_asm_fail_at(s, t.line, t.col, "expected at=(X,Y) with X and Y in 0..65535");
            if (sl->role != PXI_ROLE_DATA)
                return px_asm_fail_at(s, t.line, t.col, "only data slots have an origin (at=)");
            sl->at_x = (int)xv, sl->at_y = (int)yv, sl->has_at = 1;
        } else {
            return px_asm_fail_at(s, t.line, t.col, "unknown slot option '%s' (expected patches=, at=, min=, max= or pixels=)",
                                  t.text);
        }
    }
    if (sl->role == PXI_ROLE_DATA && !sl->has_at)
        return px_asm_fail_at(s, dir->line, dir->col, "a data slot declared with .slot needs at=(X,Y); use .data or .table to embed data");
    p->nslots++;
    return 0;
}

/* The bytes of a .data file: a regular file named relative to the source's folder (no absolute
 * path, no '..' component), at most lim->max_memory bytes. It is looked at with stat() before it
 * is opened, opened without blocking and looked at again (fstat) before it is read, so a FIFO, a
 * device such as /dev/zero or a file swapped for one in between is refused without a read. */
static int px__data_bytes(px_asm_src *s, const px_asm_tok *file, const pxvm_limits *lim, char *path, size_t cap,
                          uint8_t **data, size_t *len)
{
    const char *f = file->text;
    if (!f[0])
        return px_asm_fail_at(s, file->line, file->col, ".data: the file name is empty");
    if (f[0] == '/')
        return px_asm_fail_at(s, file->line, file->col,
                           ".data '%s': an absolute path is refused (a data file is named relative to the source's folder)", f);
    for (const char *c = f; *c;) {
        size_t n = strcspn(c, "/");
        if (n == 2 && c[0] == '.' && c[1] == '.')
            return px_asm_fail_at(s, file->line, file->col,
                               ".data '%s': a '..' component is refused (a data file lies in the source's folder or below it)", f);
        c += n + (c[n] == '/');
    }
    const char *slash = strrchr(s->path, '/');
    if ((size_t)(slash ? snprintf(path, cap, "%.*s/%s", (int)(slash - s->path), s->path, f) : snprintf(path, cap, "%s", f)) >= cap)
        return px_asm_fail_at(s, file->line, file->col, ".data '%s': the path is too long", f);
    struct stat st;
    if (stat(path, &st) != 0)
        return px_asm_fail_at(s, file->line, file->col, "cannot read '%s': %s", path, strerror(errno));
    if (!S_ISREG(st.st_mode))
        return px_asm_fail_at(s, file->line, file->col, ".data '%s' is not a regular file (a FIFO, device or folder is refused)", path);
    if ((uint64_t)st.st_size > lim->max_memory)
        return px_asm_fail_at(s, file->line, file->col, ".data '%s' is %llu bytes; the limit is %llu (the memory limit)", path,
                           (unsigned long long)st.st_size, (unsigned long long)lim->max_memory);
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0)
        return px_asm_fail_at(s, file->line, file->col, "cannot read '%s': %s", path, strerror(errno));
    int rc = 0;
    if (fstat(fd, &st) != 0) {
        rc = px_asm_fail_at(s, file->line, file->col, "cannot read '%s': %s", path, strerror(errno));
    } else if (!S_ISREG(st.st_mode)) {
        rc = px_asm_fail_at(s, file->line, file->col, ".data '%s' is not a regular file (a FIFO, device or folder is refused)", path);
    } else if ((uint64_t)st.st_size > lim->max_memory) {
        rc = px_asm_fail_at(s, file->line, file->col, ".data '%s' is %llu bytes; the limit is %llu (the memory limit)", path,
                         (unsigned long long)st.st_size, (unsigned long long)lim->max_memory);
    } else {
        /* st_size bytes; one more read tells a file that grew since (refused) from its end */
        size_t want = (size_t)st.st_size, got = 0;
        uint8_t *buf = malloc(want + 1);
        if (!buf)
            rc = px_asm_fail_at(s, file->line, file->col, ".data '%s': out of memory (%zu bytes)", path, want + 1);
        while (buf && rc == 0 && got <= want) {
            ssize_t r = read(fd, buf + got, want + 1 - got);
            if (r < 0 && errno == EINTR)
                continue;
            if (r < 0)
                rc = px_asm_fail_at(s, file->line, file->col, "cannot read '%s': %s", path, strerror(errno));
            else if (r == 0)
                break;
            else
                got += (size_t)r;
        }
        if (rc == 0 && got > want)
            rc = px_asm_fail_at(s, file->line, file->col, ".data '%s' changed while it was read", path);
        if (rc == 0) {
            *data = buf;
            *len = got;
        } else {
            free(buf);
        }
    }
    close(fd);
    return rc;
}

/* .data NAME "file.png" */
int px_asm_dir_data(px_asm_src *s, px_asm_prog *p, const px_asm_tok *dir, const pxvm_limits *lim)
{
    px_asm_tok name, file;
    if (px_asm_word(s, &name, "a slot name") < 0 || px_asm_next(s, &file) < 0)
        return -1;
    if (!px__valid_name(name.text, PXI_NAME_MAX) || px_asm_find_slot(p, name.text) >= 0)
        return px_asm_fail_at(s, name.line, name.col, "bad or repeated slot name '%s'", name.text);
    if (file.kind != T_STR)
        return px_asm_fail_at(s, file.line, file.col, "expected a \"file.png\" to embed");
    char path[1024];
    uint8_t *bytes = NULL;
    size_t len = 0;
    if (px__data_bytes(s, &file, lim, path, sizeof path, &bytes, &len) < 0)
        return -1;
    px_asm_slot *sl = &p->slots[p->nslots];
    memset(sl, 0, sizeof *sl);
    pxvm_error e;
    int rc = pxvm_png_decode(bytes, len, path, lim, &sl->data, &e);
    free(bytes);
    if (rc < 0)
        return px_asm_fail_at(s, file.line, file.col, "%s", e.msg);
    snprintf(sl->name, sizeof sl->name, "%.*s", PXI_NAME_MAX, name.text);
    sl->role = PXI_ROLE_DATA;
    sl->w = sl->data.w;
    sl->h = sl->data.h;
    sl->line = dir->line;
    p->nslots++;
    return px_asm_expect_eol(s);
}

/* .table NAME WxH, then W*H entries "u v lod", then .end: a GATHER table as a data slot. */
int px_asm_dir_table(px_asm_src *s, px_asm_prog *p, const px_asm_tok *dir)
{
    px_asm_tok name, size, t;
    int w, h;
    if (px_asm_word(s, &name, "a slot name") < 0 || px_asm_word(s, &size, "a size WxH (entries)") < 0)
        return -1;
    if (!px__valid_name(name.text, PXI_NAME_MAX) || px_asm_find_slot(p, name.text) >= 0)
        return px_asm_fail_at(s, name.line, name.col, "bad or repeated slot name '%s'", name.text);
    if (px_asm_parse_size(size.text, &w, &h) < 0 || 3 * w > 65535)
        return px_asm_fail_at(s, size.line, size.col, "'%s' is not a table size (expected WxH entries)", size.text);
    if (px_asm_expect_eol(s) < 0)
        return -1;
    px_asm_slot *sl = &p->slots[p->nslots];
    memset(sl, 0, sizeof *sl);
    if (pxvm_image_alloc(&sl->data, 3 * w, h, NULL) < 0)
        return px_asm_fail_at(s, dir->line, dir->col, "out of memory");
    snprintf(sl->name, sizeof sl->name, "%.*s", PXI_NAME_MAX, name.text);
    sl->role = PXI_ROLE_DATA;
    sl->w = 3 * w;
    sl->h = h;
    sl->line = dir->line;
    p->nslots++; /* owned by p from here, freed with it */
    int n = 0;
    for (;;) {
        if (px_asm_next(s, &t) < 0)
            return -1;
        if (t.kind == T_EOL)
            continue;
        if (t.kind == T_EOF)
            return px_asm_fail_at(s, t.line, t.col, "missing .end after %d of %d table entries", n, w * h);
        if (!strcmp(t.text, ".end")) {
            if (n != w * h)
                return px_asm_fail_at(s, t.line, t.col, "the table has %d entries, %dx%d needs %d", n, w, h, w * h);
            return px_asm_expect_eol(s);
        }
        px_asm_tok v, l;
        long long u, vv, lod;
        if (px_asm_word(s, &v, "v") < 0 || px_asm_word(s, &l, "lod") < 0)
            return -1;
        if (px_asm_parse_fixed(t.text, 16, INT32_MIN, INT32_MAX, &u) < 0)
            return px_asm_fail_at(s, t.line, t.col, "'%s' is not a coordinate (a decimal in -32768..32767.99998)", t.text);
        if (px_asm_parse_fixed(v.text, 16, INT32_MIN, INT32_MAX, &vv) < 0)
            return px_asm_fail_at(s, v.line, v.col, "'%s' is not a coordinate (a decimal in -32768..32767.99998)", v.text);
        if (px_asm_parse_fixed(l.text, 8, 0, 65535, &lod) < 0)
            return px_asm_fail_at(s, l.line, l.col, "'%s' is not a LOD (a decimal in 0..255.996)", l.text);
        if (n >= w * h)
            return px_asm_fail_at(s, t.line, t.col, "more than the %d entries of a %dx%d table", w * h, w, h);
        uint8_t *e = sl->data.px + ((size_t)(n / w) * (size_t)(3 * w) + 3u * (size_t)(n % w)) * 4u;
        pxi_write_le(e, 0, 0, 4, (uint32_t)u);
        pxi_write_le(e, 1, 0, 4, (uint32_t)vv);
        pxi_write_le(e, 2, 0, 4, (uint32_t)lod);
        n++;
        if (px_asm_expect_eol(s) < 0)
            return -1;
    }
}

/* .rows NAME, lines of pixels, .end: raw program-image rows after the code (DOT_RGB vectors). */
int px_asm_dir_rows(px_asm_src *s, px_asm_prog *p, const px_asm_tok *dir)
{
    px_asm_tok name;
    if (px_asm_word(s, &name, "a name for the rows") < 0 || px_asm_expect_eol(s) < 0)
        return -1;
    if (p->nrows_blocks >= 64)
        return px_asm_fail_at(s, dir->line, dir->col, "more than 64 .rows blocks");
    if (!px__valid_name(name.text, 63))
        return px_asm_fail_at(s, name.line, name.col, "bad name '%s' for rows", name.text);
    uint8_t *px;
    int *len, n, nlines;
    if (px__hex_block(s, &px, &n, &len, &nlines) < 0)
        return -1;
    if (nlines == 0) { /* (and realloc below never sees size 0, which would free the rows) */
        free(px);
        free(len);
        return px_asm_fail_at(s, dir->line, dir->col, ".rows %s has no rows (one line of RRGGBBAA pixels per row)", name.text);
    }
    uint8_t *q = realloc(p->rowpx, (size_t)(p->nrows + nlines) * (size_t)p->width * 4u);
    if (!q) {
        free(px);
        free(len);
        return px_asm_fail_at(s, dir->line, dir->col, "out of memory");
    }
    p->rowpx = q;
    int at = 0, rc = 0;
    for (int r = 0; r < nlines; r++) {
        if (len[r] > p->width) {
            rc = px_asm_fail_at(s, dir->line + 1 + r, 1, "a row of %d pixels is wider than the program (%d)", len[r], p->width);
            break;
        }
        uint8_t *row = p->rowpx + (size_t)(p->nrows + r) * (size_t)p->width * 4u;
        memset(row, 0, (size_t)p->width * 4u);
        memcpy(row, px + 4 * at, 4u * (size_t)len[r]);
        at += len[r];
    }
    free(px);
    free(len);
    if (rc < 0)
        return -1;
    px_asm_rows *rb = &p->rows[p->nrows_blocks++];
    snprintf(rb->name, sizeof rb->name, "%.*s", (int)sizeof rb->name - 1, name.text);
    rb->first = p->nrows;
    rb->count = nlines;
    rb->line = dir->line;
    p->nrows += nlines;
    return 0;
}

/* .pixels X Y, pixels in stream order from (X, Y), .end */
int px_asm_dir_pixels(px_asm_src *s, px_asm_prog *p, const px_asm_tok *dir)
{
    px_asm_tok x, y;
    long long xv, yv;
    if (px_asm_word(s, &x, "X") < 0 || px_asm_word(s, &y, "Y") < 0 || px_asm_parse_int(x.text, 0, 65535, &xv) < 0 ||
        px_asm_parse_int(y.text, 0, 65535, &yv) < 0)
        return px_asm_fail_at(s, dir->line, dir->col, "expected .pixels X Y");
    if (px_asm_expect_eol(s) < 0)
        return -1;
    if (p->npixels >= 256)
        return px_asm_fail_at(s, dir->line, dir->col, "more than 256 .pixels blocks");
    px_asm_pixels *b = &p->pixels[p->npixels];
    int *len, nlines;
    if (px__hex_block(s, &b->px, &b->n, &len, &nlines) < 0)
        return -1;
    free(len);
    b->x = (int)xv, b->y = (int)yv, b->line = dir->line;
    p->npixels++;
    return 0;
}
