/* video.h - the library's video file reader (api/video.c), shared by the C API's pxvm_video_*
 * calls and pxrun's --frames (tools/frames.c): FFmpeg's libraries (libavformat, libavcodec,
 * libswscale) opened at run time, so nothing links them. Not installed. */
#ifndef PXVM_API_VIDEO_H
#define PXVM_API_VIDEO_H

#include "../vm/vm.h"

typedef struct px_video px_video;

/* Opens a video file (its best video stream) and its decoder; sides checked against lim->max_side.
 * lim->flags PXVM_DECODE_LENIENT: damage is decoded past (px_video_next). 0, or -1 with *out
 * NULL: an error naming the file (class unavailable where FFmpeg's libraries are missing or the
 * library was built without their headers). */
int px_video_open(const char *path, const pxvm_limits *lim, px_video **out, pxvm_error *err);
/* The frame size; the number of frames the container declares (-1: none declared); the average
 * frame rate (0: unknown). */
void px_video_info(const px_video *v, int *w, int *h, long *frames, double *fps);
/* The next frame decoded into *img as RGBA8 (allocated here; NULL: decoded and dropped, no
 * conversion): 1, 0 at the end, -1 on an error naming the file and the frame (0-based). Damage is
 * an error unless the file was opened lenient: then the frame is decoded as far as it goes and
 * err->code (PXE_NONE otherwise) says what was wrong, a warning (with 1, and with 0: a last packet
 * that was dropped). */
int px_video_next(px_video *v, pxvm_image *img, pxvm_error *err);
/* The frames px_video_next has returned. */
long px_video_index(const px_video *v);
void px_video_close(px_video *v);

/* api/errors.c, for the API's other files: err as the calling thread's last error (its class returned), and as its warning. */
int pxvm_api_fail(const pxvm_error *err);
void pxvm_api_warning(const pxvm_error *err);
/* A caller's limits (NULL: the defaults): 0, or the usage error of `call` (its class). */
int pxvm_api_check_limits(const pxvm_limits *lim, const char *call);

#endif
