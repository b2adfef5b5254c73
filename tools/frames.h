/* frames.h - frame sequences for pxrun --frames (tools/frames.c). */
#ifndef PX_FRAMES_H
#define PX_FRAMES_H

#include "../vm/vm.h"

typedef struct px_frames px_frames;

/* source: a folder (its .png/.jpg files in name order), a glob pattern, "-" (raw frames of w x h
 * pixels of `channels` (3: RGB, 4: RGBA) bytes on standard input, back to back), or a video file
 * (the library's reader, api/video.h: FFmpeg opened at run time). Frames are decoded to RGBA8
 * on the host. */
int px_frames_open(const char *source, int w, int h, int channels, const pxvm_limits *lim, px_frames **out,
                   pxvm_error *err);
/* Raw frames as for "-", read from `in` (named `name` in messages): what the fuzzer reads. */
int px_frames_open_raw(FILE *in, const char *name, int w, int h, int channels, const pxvm_limits *lim,
                       px_frames **out, pxvm_error *err);
/* Image files must be w x h (the slot the frames are bound to, for the message): any other size
 * is refused from the file's header, before it is decoded. Returns -1 out of memory. */
int px_frames_want(px_frames *f, int w, int h, int slot, const char *slot_name);
/* The next frame into *img (allocated here): 1, 0 at the end, -1 on an error. Damage is an error
 * naming the file (and, in a video, the frame) unless lim->flags has PXVM_DECODE_LENIENT: then
 * the frame is decoded as far as it goes and err->code (PXE_NONE otherwise) says what was wrong,
 * for the caller to print as a warning (with 1, and with 0: a last packet that was dropped). */
int px_frames_next(px_frames *f, pxvm_image *img, pxvm_error *err);
/* "WxH" (--frame-size): decimal sides 1..65535, nothing else. 0, or -1 with *w, *h unchanged. */
int px_frames_parse_size(const char *text, int *w, int *h);
/* The file of the frame px_frames_next returned last (a folder's or a glob's), for messages;
 * NULL for raw frames and video, or before the first frame. */
const char *px_frames_file(const px_frames *f);
/* The number of frames when known in advance (files), else -1. */
long px_frames_count(const px_frames *f);
void px_frames_close(px_frames *f);

#endif
