/* video.c - video files through FFmpeg's libraries (libavformat, libavcodec, libswscale), opened
 * at run time (dlopen) so that nothing links them: the reader of pxrun --frames and of the C API's
 * pxvm_video_* calls (include/pxvm.h, "video files"). Built with FFmpeg's headers when they are
 * installed (PXVM_HAVE_FFMPEG); without them every open is PXE_VIDEO_NOT_BUILT (class unavailable). */
#define _POSIX_C_SOURCE 200809L
#include "video.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../include/pxvm.h"

#ifdef PXVM_HAVE_FFMPEG
#include <dlfcn.h>
#include <pthread.h>
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/imgutils.h>
#include <libswscale/swscale.h>

/* FFmpeg's libraries are opened when a video is (dlopen, the major versions of the headers built
 * against), so the library loads where they are not installed and reads video where they are. */
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
static int px__av_loaded; /* under px__av_lock: px__av filled */
static pthread_mutex_t px__av_lock = PTHREAD_MUTEX_INITIALIZER;

static int px__av_load_locked(pxvm_error *err)
{
    if (px__av_loaded)
        return 0;
    static const char *const names[4] = {"libavformat.so." PX__STR(LIBAVFORMAT_VERSION_MAJOR),
                                         "libavcodec.so." PX__STR(LIBAVCODEC_VERSION_MAJOR),
                                         "libavutil.so." PX__STR(LIBAVUTIL_VERSION_MAJOR),
                                         "libswscale.so." PX__STR(LIBSWSCALE_VERSION_MAJOR)};
    void *h[4];
    for (int i = 0; i < 4; i++)
        if (!(h[i] = dlopen(names[i], RTLD_NOW | RTLD_LOCAL)))
            return pxvm_fail(err, PXE_FFMPEG_MISSING, -1, -1, names[i]);
    void *avformat = h[0], *avcodec = h[1], *avutil = h[2], *swscale = h[3];
#define X(lib, fn)                                                                                     \
    if (!(*(void **)&px__av.fn = dlsym(lib, #fn)))                                                     \
        return pxvm_fail(err, PXE_FFMPEG_SYMBOL, -1, -1, #fn);
    PX__AV_FUNCS(X)
#undef X
    px__av_loaded = 1;
    return 0;
}

/* Once per process, whichever thread opens the first video (Python threads, DataLoader workers). */
static int px__av_load(pxvm_error *err)
{
    pthread_mutex_lock(&px__av_lock);
    int rc = px__av_load_locked(err);
    pthread_mutex_unlock(&px__av_lock);
    return rc;
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

struct px_video {
    char *name; /* the file, for messages */
    pxvm_limits lim;
    int w, h;
    long frames, index;
    double fps;
    pxvm_image rgba; /* pxvm_video_next's frame before it is copied into the caller's view */
#ifdef PXVM_HAVE_FFMPEG
    int loaded; /* FFmpeg's libraries were opened: what close may call */
    AVFormatContext *fmt;
    AVCodecContext *dec;
    struct SwsContext *sws;
    AVPacket *pkt;
    AVFrame *frame;
    int stream, flushing;
#endif
};

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
static int px__av_damage(px_video *v, pxvm_error *err, const char *what, int code)
{
    char buf[128] = "", msg[300];
    if (code)
        av_strerror(code, buf, sizeof buf);
    snprintf(msg, sizeof msg, "%s%s%s%s", what, code ? " (" : "", buf, code ? ")" : "");
    if (!(v->lim.flags & PXVM_DECODE_LENIENT))
        return pxvm_fail(err, PXE_VIDEO_FRAME, -1, -1, v->name, v->index, msg);
    if (err && err->code == PXE_NONE)
        pxvm_fail(err, PXE_VIDEO_FRAME, -1, -1, v->name, v->index, msg);
    return 0;
}

static double px__rate(AVRational r) { return r.num > 0 && r.den > 0 ? (double)r.num / (double)r.den : 0; }

static int px__open(px_video *v, const char *path, pxvm_error *err)
{
    if (px__av_load(err) < 0)
        return -1;
    v->loaded = 1;
    int rc = avformat_open_input(&v->fmt, path, NULL, NULL);
    if (rc < 0)
        return px__av_fail(err, path, "FFmpeg cannot open it", rc);
    if ((rc = avformat_find_stream_info(v->fmt, NULL)) < 0)
        return px__av_fail(err, path, "no stream information", rc);
    const AVCodec *codec = NULL;
    v->stream = av_find_best_stream(v->fmt, AVMEDIA_TYPE_VIDEO, -1, -1, &codec, 0);
    if (v->stream < 0 || !codec)
        return px__av_fail(err, path, "no video stream FFmpeg can decode", v->stream < 0 ? v->stream : AVERROR_DECODER_NOT_FOUND);
    v->dec = avcodec_alloc_context3(codec);
    if (!v->dec || avcodec_parameters_to_context(v->dec, v->fmt->streams[v->stream]->codecpar) < 0 ||
        (rc = avcodec_open2(v->dec, codec, NULL)) < 0)
        return px__av_fail(err, path, "cannot open its decoder", rc);
    if (!(v->lim.flags & PXVM_DECODE_LENIENT))
        v->dec->err_recognition |= AV_EF_EXPLODE; /* decoders report damage they would conceal */
    v->w = v->dec->width, v->h = v->dec->height;
    if (v->w < 1 || v->h < 1 || (uint32_t)v->w > v->lim.max_side || (uint32_t)v->h > v->lim.max_side)
        return pxvm_fail(err, PXE_IMAGE_SIDE, -1, -1, path, (unsigned long)v->w, (unsigned long)v->h, v->lim.max_side);
    const AVStream *st = v->fmt->streams[v->stream];
    v->frames = st->nb_frames > 0 && st->nb_frames <= 0x7fffffff ? (long)st->nb_frames : -1;
    /* the average rate, as decord's get_avg_fps and PyAV's average_rate (torchvision's video_fps) */
    v->fps = px__rate(st->avg_frame_rate) > 0 ? px__rate(st->avg_frame_rate) : px__rate(st->r_frame_rate);
    v->pkt = av_packet_alloc();
    v->frame = av_frame_alloc();
    if (!v->pkt || !v->frame)
        return pxvm_fail(err, PXE_NOMEM, -1, -1, 0ull);
    return 0;
}

/* A failure naming the file and the frame (0-based: the next frame to come out), malformed. */
static int px__av_frame_fail(px_video *v, pxvm_error *err, const char *what, int code)
{
    char buf[128], msg[300];
    av_strerror(code, buf, sizeof buf);
    snprintf(msg, sizeof msg, "%s (%s)", what, buf);
    return pxvm_fail(err, PXE_VIDEO_FRAME, -1, -1, v->name, v->index, msg);
}

/* The next decoded frame as RGBA8 (swscale, exact point conversion of the decoder's output), or
 * dropped (img NULL). Damage (a packet the demuxer says is cut short or corrupt, a decoding
 * error, a frame the decoder concealed errors in) goes through px__av_damage: strict, an error. */
static int px__next(px_video *v, pxvm_image *img, pxvm_error *err)
{
    for (;;) {
        int rc = avcodec_receive_frame(v->dec, v->frame);
        if (rc == 0) {
            if ((v->frame->decode_error_flags || (v->frame->flags & AV_FRAME_FLAG_CORRUPT)) &&
                px__av_damage(v, err, "the decoder concealed errors in it", 0) < 0) {
                av_frame_unref(v->frame);
                return -1;
            }
            if (!img) {
                av_frame_unref(v->frame);
                return 1;
            }
            v->sws = sws_getCachedContext(v->sws, v->frame->width, v->frame->height, (enum AVPixelFormat)v->frame->format,
                                          v->w, v->h, AV_PIX_FMT_RGBA, SWS_POINT, NULL, NULL, NULL);
            if (!v->sws || pxvm_image_alloc(img, v->w, v->h, err) < 0) {
                av_frame_unref(v->frame);
                return v->sws ? -1 : pxvm_fail(err, PXE_IO_READ, -1, -1, v->name, "no conversion to RGBA");
            }
            uint8_t *dst[4] = {img->px, NULL, NULL, NULL};
            int stride[4] = {v->w * 4, 0, 0, 0};
            sws_scale(v->sws, (const uint8_t *const *)v->frame->data, v->frame->linesize, 0, v->frame->height, dst, stride);
            av_frame_unref(v->frame);
            return 1;
        }
        if (rc == AVERROR_EOF)
            return 0;
        if (rc != AVERROR(EAGAIN))
            return px__av_frame_fail(v, err, "decoding failed", rc);
        if (v->flushing)
            return 0;
        rc = av_read_frame(v->fmt, v->pkt);
        if (rc == AVERROR_EOF) {
            v->flushing = 1;
            avcodec_send_packet(v->dec, NULL);
            continue;
        }
        if (rc < 0)
            return px__av_frame_fail(v, err, "reading the file failed", rc);
        if (v->pkt->stream_index != v->stream) {
            av_packet_unref(v->pkt);
            continue;
        }
        if ((v->pkt->flags & AV_PKT_FLAG_CORRUPT) && px__av_damage(v, err, "its packet is truncated or corrupt", 0) < 0) {
            av_packet_unref(v->pkt);
            return -1;
        }
        rc = avcodec_send_packet(v->dec, v->pkt);
        av_packet_unref(v->pkt);
        if (rc < 0 && rc != AVERROR(EAGAIN) && px__av_damage(v, err, "decoding failed", rc) < 0)
            return -1; /* lenient: the packet is dropped */
    }
}
#endif

int px_video_open(const char *path, const pxvm_limits *lim, px_video **out, pxvm_error *err)
{
    px_video *v = *out = calloc(1, sizeof *v);
    if (!v || !(v->name = strdup(path))) {
        free(v);
        *out = NULL;
        return pxvm_fail(err, PXE_NOMEM, -1, -1, (unsigned long long)sizeof *v);
    }
    v->lim = *lim;
#ifdef PXVM_HAVE_FFMPEG
    if (px__open(v, path, err) == 0)
        return 0;
#else
    pxvm_fail(err, PXE_VIDEO_NOT_BUILT, -1, -1);
#endif
    px_video_close(v);
    *out = NULL;
    return -1;
}

void px_video_info(const px_video *v, int *w, int *h, long *frames, double *fps)
{
    *w = v->w, *h = v->h, *frames = v->frames, *fps = v->fps;
}

int px_video_next(px_video *v, pxvm_image *img, pxvm_error *err)
{
    if (img)
        memset(img, 0, sizeof *img);
    if (err)
        err->code = PXE_NONE;
    int rc = 0;
#ifdef PXVM_HAVE_FFMPEG
    rc = px__next(v, img, err);
#else
    (void)err;
#endif
    if (rc == 1)
        v->index++;
    return rc;
}

long px_video_index(const px_video *v) { return v->index; }

void px_video_close(px_video *v)
{
    if (!v)
        return;
#ifdef PXVM_HAVE_FFMPEG
    if (v->loaded) {
        sws_freeContext(v->sws);
        av_frame_free(&v->frame);
        av_packet_free(&v->pkt);
        avcodec_free_context(&v->dec);
        avformat_close_input(&v->fmt);
    }
#endif
    pxvm_image_free(&v->rgba);
    free(v->name);
    free(v);
}

/* ---- the public calls (include/pxvm.h, "video files") ---------------------------------------- */

struct pxvm_video {
    px_video *v;
};

static int (px__video_refuse)(pxvm_code code, ...) /* (name): tests/check-errors checks its calls */
{
    pxvm_error err;
    va_list ap;
    va_start(ap, code);
    pxvm_failv(&err, code, -1, -1, ap);
    va_end(ap);
    return pxvm_api_fail(&err);
}

int pxvm_video_open(const char *path, const pxvm_limits *lim, pxvm_video **out)
{
    pxvm_limits def;
    pxvm_error err;
    if (!path || !out)
        return px__video_refuse(PXE_NULL_ARGUMENT, "pxvm_video_open");
    *out = NULL;
    int bad_limits = pxvm_api_check_limits(lim, "pxvm_video_open");
    if (bad_limits)
        return bad_limits;
    if (!lim)
        pxvm_limits_default(&def), lim = &def;
    pxvm_video *h = calloc(1, sizeof *h);
    if (!h) {
        pxvm_fail(&err, PXE_NOMEM, -1, -1, (unsigned long long)sizeof *h);
        return pxvm_api_fail(&err);
    }
    if (px_video_open(path, lim, &h->v, &err) < 0) {
        free(h);
        return pxvm_api_fail(&err);
    }
    *out = h;
    return 0;
}

int pxvm_video_info(const pxvm_video *video, int *w, int *h, long *frames, double *fps)
{
    if (!video || !w || !h || !frames || !fps)
        return px__video_refuse(PXE_NULL_ARGUMENT, "pxvm_video_info");
    px_video_info(video->v, w, h, frames, fps);
    return 0;
}

int pxvm_video_next(pxvm_video *video, const pxvm_view *dst, int *got)
{
    pxvm_error err;
    if (!video || !got)
        return px__video_refuse(PXE_NULL_ARGUMENT, "pxvm_video_next");
    px_video *v = video->v;
    *got = 0;
    if (dst) {
        if (dst->device >= 0 || !dst->data || dst->items != 1 || dst->w != v->w || dst->h != v->h ||
            (dst->channels != 3 && dst->channels != 4))
            return px__video_refuse(PXE_VIDEO_DST, v->name, v->w, v->h, v->w, v->h);
    }
    pxvm_image_free(&v->rgba);
    int rc = px_video_next(v, dst ? &v->rgba : NULL, &err);
    if (rc < 0)
        return pxvm_api_fail(&err);
    pxvm_api_warning(&err);
    *got = rc;
    if (rc == 1 && dst) /* RGBA8 rows into the caller's view: alpha dropped for 3 channels */
        for (int y = 0; y < v->h; y++)
            for (int x = 0; x < v->w; x++)
                for (int c = 0; c < dst->channels; c++)
                    ((uint8_t *)dst->data)[y * dst->row_stride + x * dst->px_stride + c * dst->ch_stride] =
                        v->rgba.px[((size_t)y * (size_t)v->w + (size_t)x) * 4 + (size_t)c];
    return 0;
}

void pxvm_video_close(pxvm_video *video)
{
    if (!video)
        return;
    px_video_close(video->v);
    free(video);
}
