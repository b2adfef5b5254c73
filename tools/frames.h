/* frames.h - frame sequences for pxrun --frames (tools/frames.c). */
#ifndef PX_FRAMES_H
#define PX_FRAMES_H

#include "../vm/vm.h"

typedef struct px_frames px_frames;

/* source: a folder (its .png/.jpg files in name order), a glob pattern, "-" (raw frames of w x h
 * pixels of `channels` (3: RGB, 4: RGBA) bytes on standard input, back to back), or a video file
 * (FFmpeg, when built with it). Frames are decoded to RGBA8 on the host. */
int px_frames_open(const char *source, int w, int h, int channels, const pxvm_limits *lim, px_frames **out,
                   pxvm_error *err);
/* The next frame into *img (allocated here): 1, 0 at the end, -1 on an error. */
int px_frames_next(px_frames *f, pxvm_image *img, pxvm_error *err);
/* The number of frames when known in advance (files), else -1. */
long px_frames_count(const px_frames *f);
void px_frames_close(px_frames *f);

#endif
