/* frames.c - frame sequences for pxrun: a folder or glob of images (PNG, JPEG), raw RGB/RGBA
 * frames on standard input, or a video file through the library's reader (api/video.c: FFmpeg's
 * libraries opened at run time). */
#define _POSIX_C_SOURCE 200809L
#include "frames.h"

#include "../api/video.h"

#include <dirent.h>
#include <errno.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>


struct px_frames {
    int kind; /* 0 files, 1 raw frames from `in`, 2 video */
    char **files;
    long nfiles, next;
    int w, h, channels;
    pxvm_limits lim;
    pxvm_image_want want; /* files: the size the frames must have (0, 0: any) */
    char *want_name;
    long index;
    FILE *in;
    char *name; /* the source, for messages */
    px_video *video; /* a video file */
};

static int px__image_name(const char *n)
{
    const char *dot = strrchr(n, '.');
    return dot && (!strcasecmp(dot, ".png") || !strcasecmp(dot, ".jpg") || !strcasecmp(dot, ".jpeg"));
}

static int px__cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int px__add(px_frames *f, const char *path)
{
    char **n = realloc(f->files, sizeof(char *) * (size_t)(f->nfiles + 1));
    if (!n)
        return -1;
    f->files = n;
    return (f->files[f->nfiles++] = strdup(path)) ? 0 : -1;
}

/* Raw frames: sides and one frame's bytes against the limits before anything is read. */
static int px__raw_open(px_frames *f, FILE *in, const char *name, int w, int h, int channels, pxvm_error *err)
{
    if (w < 1 || h < 1 || (channels != 3 && channels != 4))
        return pxvm_fail(err, PXE_FRAMES_RAW_SIZE, -1, -1);
    if ((uint32_t)w > f->lim.max_side || (uint32_t)h > f->lim.max_side)
        return pxvm_fail(err, PXE_IMAGE_SIDE, -1, -1, name, (unsigned long)w, (unsigned long)h, f->lim.max_side);
    unsigned long long bytes = (unsigned long long)w * (unsigned long long)h * (4u + (unsigned)channels);
    if (bytes > f->lim.max_memory)
        return pxvm_fail(err, PXE_IMAGE_MEMORY, -1, -1, name, (unsigned long)w, (unsigned long)h, bytes,
                         (unsigned long long)f->lim.max_memory);
    f->kind = 1, f->w = w, f->h = h, f->channels = channels, f->in = in;
    return 0;
}

static px_frames *px__new(const pxvm_limits *lim, const char *name)
{
    px_frames *f = calloc(1, sizeof *f);
    if (f && !(f->name = strdup(name))) {
        free(f);
        f = NULL;
    }
    if (f)
        f->lim = *lim;
    return f;
}

int px_frames_open_raw(FILE *in, const char *name, int w, int h, int channels, const pxvm_limits *lim, px_frames **out,
                       pxvm_error *err)
{
    px_frames *f = *out = px__new(lim, name);
    if (!f)
        return pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)sizeof *f);
    return px__raw_open(f, in, name, w, h, channels, err);
}

/* A frame file of a folder or a glob must be a regular file: a FIFO named x.png would block
 * the reader forever, a device would never end. Checked (without opening) before any frame. */
static int px__regular(const char *path, pxvm_error *err)
{
    struct stat st;
    if (stat(path, &st) < 0)
        return pxvm_fail(err, PXE_IO_READ, -1, -1, path, strerror(errno));
    if (!S_ISREG(st.st_mode))
        return pxvm_fail(err, PXE_IO_READ, -1, -1, path,
                         "not a regular file (a FIFO, a device or a folder): frames of a folder or a pattern are read "
                         "from regular files only");
    return 0;
}

int px_frames_open(const char *source, int w, int h, int channels, const pxvm_limits *lim, px_frames **out,
                   pxvm_error *err)
{
    px_frames *f = *out = px__new(lim, source);
    if (!f)
        return pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)sizeof *f);
    struct stat st;
    if (!strcmp(source, "-"))
        return px__raw_open(f, stdin, "-", w, h, channels, err);
    if (strpbrk(source, "*?[")) {
        glob_t g;
        if (glob(source, 0, NULL, &g) != 0)
            return pxvm_fail(err, PXE_IO_READ, -1, -1, source, "no file matches the pattern");
        for (size_t i = 0; i < g.gl_pathc; i++) {
            if (px__regular(g.gl_pathv[i], err) < 0) {
                globfree(&g);
                return -1;
            }
            if (px__add(f, g.gl_pathv[i]) < 0) {
                globfree(&g);
                return pxvm_fail(err, PXE_NOMEM, -1, -1, 0ull);
            }
        }
        globfree(&g);
        qsort(f->files, (size_t)f->nfiles, sizeof(char *), px__cmp);
        return 0;
    }
    if (stat(source, &st) < 0)
        return pxvm_fail(err, PXE_IO_READ, -1, -1, source, strerror(errno));
    if (S_ISDIR(st.st_mode)) {
        DIR *d = opendir(source);
        if (!d)
            return pxvm_fail(err, PXE_IO_READ, -1, -1, source, strerror(errno));
        for (struct dirent *e; (e = readdir(d));) {
            if (e->d_name[0] == '.' || !px__image_name(e->d_name))
                continue;
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", source, e->d_name);
            if (px__regular(path, err) < 0) {
                closedir(d);
                return -1;
            }
            if (px__add(f, path) < 0) {
                closedir(d);
                return pxvm_fail(err, PXE_NOMEM, -1, -1, 0ull);
            }
        }
        closedir(d);
        if (!f->nfiles)
            return pxvm_fail(err, PXE_IO_READ, -1, -1, source, "the folder holds no .png or .jpg file");
        qsort(f->files, (size_t)f->nfiles, sizeof(char *), px__cmp);
        return 0;
    }
    f->kind = 2;
    return px_video_open(source, lim, &f->video, err);
}

int px_frames_want(px_frames *f, int w, int h, int slot, const char *slot_name)
{
    free(f->want_name);
    if (!(f->want_name = strdup(slot_name)))
        return -1;
    f->want = (pxvm_image_want){w, h, slot, f->want_name};
    return 0;
}

int px_frames_next(px_frames *f, pxvm_image *img, pxvm_error *err)
{
    memset(img, 0, sizeof *img);
    if (err)
        err->code = PXE_NONE;
    int rc = 0;
    if (f->kind == 0) {
        if (f->next >= f->nfiles)
            return 0;
        rc = pxvm_image_load_want(f->files[f->next++], &f->lim, &f->want, img, err) < 0 ? -1 : 1;
    } else if (f->kind == 1) {
        size_t n = (size_t)f->w * (size_t)f->h * (size_t)f->channels, got = 0;
        uint8_t *raw = malloc(n);
        if (!raw)
            return pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)n);
        while (got < n) {
            size_t r = fread(raw + got, 1, n - got, f->in);
            if (!r)
                break;
            got += r;
        }
        if (got == 0) {
            free(raw);
            return 0;
        }
        if (got < n) {
            free(raw);
            char msg[160];
            snprintf(msg, sizeof msg, "%s ended inside frame %ld (%zu of %zu bytes): check --frame-size and --frame-format",
                     f->in == stdin ? "standard input" : "the raw frames", f->index, got, n);
            return pxvm_fail(err, PXE_IO_READ, -1, -1, f->name, msg);
        }
        if (pxvm_image_alloc(img, f->w, f->h, err) < 0) {
            free(raw);
            return -1;
        }
        for (size_t i = 0; i < (size_t)f->w * (size_t)f->h; i++) {
            const uint8_t *p = raw + i * (size_t)f->channels;
            img->px[4 * i] = p[0], img->px[4 * i + 1] = p[1], img->px[4 * i + 2] = p[2];
            img->px[4 * i + 3] = f->channels == 4 ? p[3] : 255;
        }
        free(raw);
        rc = 1;
    } else {
        rc = px_video_next(f->video, img, err);
    }
    if (rc == 1)
        f->index++;
    return rc;
}

int px_frames_parse_size(const char *text, int *w, int *h)
{
    int v[2];
    const char *p = text;
    for (int i = 0; i < 2; i++) {
        if (*p < '0' || *p > '9')
            return -1;
        long x = 0;
        while (*p >= '0' && *p <= '9')
            if ((x = x * 10 + (*p++ - '0')) > 65535)
                return -1;
        if (x < 1 || (i == 0 && *p != 'x'))
            return -1;
        v[i] = (int)x;
        p += i == 0;
    }
    if (*p)
        return -1;
    *w = v[0], *h = v[1];
    return 0;
}

const char *px_frames_file(const px_frames *f) { return f->kind == 0 && f->next > 0 ? f->files[f->next - 1] : NULL; }

long px_frames_count(const px_frames *f) { return f->kind == 0 ? f->nfiles : -1; }

void px_frames_close(px_frames *f)
{
    if (!f)
        return;
    for (long i = 0; i < f->nfiles; i++)
        free(f->files[i]);
    free(f->files);
    free(f->name);
    free(f->want_name);
    px_video_close(f->video);
    free(f);
}
