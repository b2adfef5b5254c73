/* frames.c - frame sequences for pxrun: a folder or glob of images (PNG, JPEG), raw RGB/RGBA
 * frames on standard input, or a video file through FFmpeg's libraries (libavformat,
 * libavcodec, libswscale) when pxrun was built with them (PXVM_HAVE_FFMPEG). */
#define _POSIX_C_SOURCE 200809L
#include "frames.h"

#include <dirent.h>
#include <errno.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#ifdef PXVM_HAVE_FFMPEG
#include <dlfcn.h>
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/imgutils.h>
#include <libswscale/swscale.h>

/* FFmpeg's libraries are opened when a video is (dlopen, the major versions of the headers built
 * against), so pxrun runs where they are not installed and reads video where they are. */
#define PX__AV_FUNCS(X)                                                                                           \
    X(avformat, avformat_open_input) X(avformat, avformat_find_stream_info) X(avformat, av_find_best_stream)     \
    X(avformat, av_read_frame) X(avformat, avformat_close_input) X(avcodec, avcodec_alloc_context3)             \
    X(avcodec, avcodec_parameters_to_context) X(avcodec, avcodec_open2) X(avcodec, av_packet_alloc)            \
    X(avcodec, avcodec_receive_frame) X(avcodec, avcodec_send_packet) X(avcodec, av_packet_unref)              \
    X(avcodec, av_packet_free) X(avcodec, avcodec_free_context) X(avutil, av_frame_alloc)                      \
    X(avutil, av_frame_unref) X(avutil, av_frame_free) X(avutil, av_strerror) X(swscale, sws_getCachedContext) \
    X(swscale, sws_scale) X(swscale, sws_freeContext)
static struct {
#define X(lib, fn) __typeof__(fn) *fn;
    PX__AV_FUNCS(X)
#undef X
} px__av;

#define PX__STR2(x) #x
#define PX__STR(x) PX__STR2(x)
static int px__av_load(pxvm_error *err)
{
    static int loaded = 0;
    if (loaded)
        return 0;
    static const char *const names[4] = {"libavformat.so." PX__STR(LIBAVFORMAT_VERSION_MAJOR),
                                         "libavcodec.so." PX__STR(LIBAVCODEC_VERSION_MAJOR),
                                         "libavutil.so." PX__STR(LIBAVUTIL_VERSION_MAJOR),
                                         "libswscale.so." PX__STR(LIBSWSCALE_VERSION_MAJOR)};
    void *h[4];
    for (int i = 0; i < 4; i++)
        if (!(h[i] = dlopen(names[i], RTLD_NOW | RTLD_LOCAL))) {
            char msg[400];
            snprintf(msg, sizeof msg,
                     "reading video files needs FFmpeg's %s (apt-get install libavformat59 libavcodec59 "
                     "libswscale6), or pipe raw frames: ffmpeg -i VIDEO -f rawvideo -pix_fmt rgb24 - | pxrun ... "
                     "--frames - --frame-size WxH",
                     names[i]);
            return pxvm_fail(err, PXE_UNAVAILABLE, -1, -1, msg);
        }
    void *avformat = h[0], *avcodec = h[1], *avutil = h[2], *swscale = h[3];
#define X(lib, fn)                                                                                     \
    if (!(*(void **)&px__av.fn = dlsym(lib, #fn)))                                                     \
        return pxvm_fail(err, PXE_UNAVAILABLE, -1, -1, "FFmpeg's libraries lack " #fn " (another version?)");
    PX__AV_FUNCS(X)
#undef X
    loaded = 1;
    return 0;
}
#define avformat_open_input px__av.avformat_open_input
#define avformat_find_stream_info px__av.avformat_find_stream_info
#define av_find_best_stream px__av.av_find_best_stream
#define av_read_frame px__av.av_read_frame
#define avformat_close_input px__av.avformat_close_input
#define avcodec_alloc_context3 px__av.avcodec_alloc_context3
#define avcodec_parameters_to_context px__av.avcodec_parameters_to_context
#define avcodec_open2 px__av.avcodec_open2
#define av_packet_alloc px__av.av_packet_alloc
#define avcodec_receive_frame px__av.avcodec_receive_frame
#define avcodec_send_packet px__av.avcodec_send_packet
#define av_packet_unref px__av.av_packet_unref
#define av_packet_free px__av.av_packet_free
#define avcodec_free_context px__av.avcodec_free_context
#define av_frame_alloc px__av.av_frame_alloc
#define av_frame_unref px__av.av_frame_unref
#define av_frame_free px__av.av_frame_free
#define av_strerror px__av.av_strerror
#define sws_getCachedContext px__av.sws_getCachedContext
#define sws_scale px__av.sws_scale
#define sws_freeContext px__av.sws_freeContext
#endif

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
#ifdef PXVM_HAVE_FFMPEG
    AVFormatContext *fmt;
    AVCodecContext *dec;
    struct SwsContext *sws;
    AVPacket *pkt;
    AVFrame *frame;
    int stream, flushing, done;
#endif
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

#ifdef PXVM_HAVE_FFMPEG
static int px__av_fail(pxvm_error *err, const char *path, const char *what, int code)
{
    char buf[128], msg[300];
    av_strerror(code, buf, sizeof buf);
    snprintf(msg, sizeof msg, "%s (%s)", what, buf);
    return pxvm_fail(err, PXE_IO_READ, -1, -1, path, msg);
}

/* A frame FFmpeg could not decode whole (a damaged or truncated packet, a decoding error, a frame
 * the decoder patched up): strict, an error naming the file and the frame (0-based, the frame
 * about to come out); lenient, kept in *err as a warning (the first of the frame) and decoding
 * goes on, as FFmpeg would. Returns -1 (strict) or 0. */
static int px__av_damage(px_frames *f, pxvm_error *err, const char *what, int code)
{
    char buf[128] = "", msg[300];
    if (code)
        av_strerror(code, buf, sizeof buf);
    snprintf(msg, sizeof msg, "%s%s%s%s", what, code ? " (" : "", buf, code ? ")" : "");
    if (!(f->lim.flags & PXVM_DECODE_LENIENT))
        return pxvm_fail(err, PXE_VIDEO_FRAME, -1, -1, f->name, f->index, msg);
    if (err && err->code == PXE_NONE)
        pxvm_fail(err, PXE_VIDEO_FRAME, -1, -1, f->name, f->index, msg);
    return 0;
}

static int px__video_open(px_frames *f, const char *path, pxvm_error *err)
{
    if (px__av_load(err) < 0)
        return -1;
    f->kind = 2;
    int rc = avformat_open_input(&f->fmt, path, NULL, NULL);
    if (rc < 0)
        return px__av_fail(err, path, "FFmpeg cannot open it", rc);
    if ((rc = avformat_find_stream_info(f->fmt, NULL)) < 0)
        return px__av_fail(err, path, "no stream information", rc);
    const AVCodec *codec = NULL;
    f->stream = av_find_best_stream(f->fmt, AVMEDIA_TYPE_VIDEO, -1, -1, &codec, 0);
    if (f->stream < 0 || !codec)
        return px__av_fail(err, path, "no video stream FFmpeg can decode", f->stream < 0 ? f->stream : AVERROR_DECODER_NOT_FOUND);
    f->dec = avcodec_alloc_context3(codec);
    if (!f->dec || avcodec_parameters_to_context(f->dec, f->fmt->streams[f->stream]->codecpar) < 0 ||
        (rc = avcodec_open2(f->dec, codec, NULL)) < 0)
        return px__av_fail(err, path, "cannot open its decoder", rc);
    if (!(f->lim.flags & PXVM_DECODE_LENIENT))
        f->dec->err_recognition |= AV_EF_EXPLODE; /* decoders report damage they would conceal */
    f->w = f->dec->width, f->h = f->dec->height;
    if (f->w < 1 || f->h < 1 || (uint32_t)f->w > f->lim.max_side || (uint32_t)f->h > f->lim.max_side)
        return pxvm_fail(err, PXE_IMAGE_SIDE, -1, -1, path, (unsigned long)f->w, (unsigned long)f->h, f->lim.max_side);
    f->pkt = av_packet_alloc();
    f->frame = av_frame_alloc();
    if (!f->pkt || !f->frame)
        return pxvm_fail(err, PXE_NOMEM, -1, -1, 0ull);
    return 0;
}

/* A failure naming the file and the frame (0-based: the next frame to come out), malformed. */
static int px__av_frame_fail(px_frames *f, pxvm_error *err, const char *what, int code)
{
    char buf[128], msg[300];
    av_strerror(code, buf, sizeof buf);
    snprintf(msg, sizeof msg, "%s (%s)", what, buf);
    return pxvm_fail(err, PXE_VIDEO_FRAME, -1, -1, f->name, f->index, msg);
}

/* The next decoded frame as RGBA8 (swscale, exact point conversion of the decoder's output).
 * Damage (a packet the demuxer says is cut short or corrupt, a decoding error, a frame the
 * decoder concealed errors in) goes through px__av_damage: strict, an error. */
static int px__video_next(px_frames *f, pxvm_image *img, pxvm_error *err)
{
    for (;;) {
        int rc = avcodec_receive_frame(f->dec, f->frame);
        if (rc == 0) {
            if ((f->frame->decode_error_flags || (f->frame->flags & AV_FRAME_FLAG_CORRUPT)) &&
                px__av_damage(f, err, "the decoder concealed errors in it", 0) < 0) {
                av_frame_unref(f->frame);
                return -1;
            }
            f->sws = sws_getCachedContext(f->sws, f->frame->width, f->frame->height, (enum AVPixelFormat)f->frame->format,
                                          f->w, f->h, AV_PIX_FMT_RGBA, SWS_POINT, NULL, NULL, NULL);
            if (!f->sws || pxvm_image_alloc(img, f->w, f->h, err) < 0) {
                av_frame_unref(f->frame);
                return f->sws ? -1 : pxvm_fail(err, PXE_IO_READ, -1, -1, f->name, "no conversion to RGBA");
            }
            uint8_t *dst[4] = {img->px, NULL, NULL, NULL};
            int stride[4] = {f->w * 4, 0, 0, 0};
            sws_scale(f->sws, (const uint8_t *const *)f->frame->data, f->frame->linesize, 0, f->frame->height, dst, stride);
            av_frame_unref(f->frame);
            return 1;
        }
        if (rc == AVERROR_EOF)
            return 0;
        if (rc != AVERROR(EAGAIN))
            return px__av_frame_fail(f, err, "decoding failed", rc);
        if (f->flushing)
            return 0;
        rc = av_read_frame(f->fmt, f->pkt);
        if (rc == AVERROR_EOF) {
            f->flushing = 1;
            avcodec_send_packet(f->dec, NULL);
            continue;
        }
        if (rc < 0)
            return px__av_frame_fail(f, err, "reading the file failed", rc);
        if (f->pkt->stream_index != f->stream) {
            av_packet_unref(f->pkt);
            continue;
        }
        if ((f->pkt->flags & AV_PKT_FLAG_CORRUPT) &&
            px__av_damage(f, err, "its packet is truncated or corrupt", 0) < 0) {
            av_packet_unref(f->pkt);
            return -1;
        }
        rc = avcodec_send_packet(f->dec, f->pkt);
        av_packet_unref(f->pkt);
        if (rc < 0 && rc != AVERROR(EAGAIN) && px__av_damage(f, err, "decoding failed", rc) < 0)
            return -1; /* lenient: the packet is dropped */
    }
}
#endif

/* Raw frames: sides and one frame's bytes against the limits before anything is read. */
static int px__raw_open(px_frames *f, FILE *in, const char *name, int w, int h, int channels, pxvm_error *err)
{
    if (w < 1 || h < 1 || (channels != 3 && channels != 4))
        return pxvm_fail(err, PXE_USAGE, -1, -1,
                         "raw frames on standard input need --frame-size WxH (and --frame-format rgb or rgba)");
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
#ifdef PXVM_HAVE_FFMPEG
    return px__video_open(f, source, err);
#else
    return pxvm_fail(err, PXE_UNAVAILABLE, -1, -1,
                     "video files need pxrun built with FFmpeg's libraries (apt-get install libavformat-dev "
                     "libavcodec-dev libswscale-dev, then make); or pipe raw frames: ffmpeg -i VIDEO -f rawvideo "
                     "-pix_fmt rgb24 - | pxrun ... --frames - --frame-size WxH");
#endif
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
#ifdef PXVM_HAVE_FFMPEG
        rc = px__video_next(f, img, err);
#endif
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
#ifdef PXVM_HAVE_FFMPEG
    if (f->kind != 2) { /* (also a video whose libraries did not load) */
        free(f);
        return;
    }
    sws_freeContext(f->sws);
    av_frame_free(&f->frame);
    av_packet_free(&f->pkt);
    avcodec_free_context(&f->dec);
    avformat_close_input(&f->fmt);
#endif
    free(f);
}
