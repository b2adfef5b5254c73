"""Decodes the first N frames of a video with OpenCV into a uint8 (N, H, W, 4) RGBA .npy, the
input of bench_video (on the GPU machine, whose python3 has OpenCV; pxrun --frames VIDEO --npy
image=... with a one-slot program writes the same layout where FFmpeg's libraries are installed).
  python3 tests/bench/video_frames.py VIDEO N OUT.npy"""
import sys

import cv2
import numpy as np

cap = cv2.VideoCapture(sys.argv[1])
frames = []
while len(frames) < int(sys.argv[2]):
    ok, bgr = cap.read()
    if not ok:
        break
    rgba = cv2.cvtColor(bgr, cv2.COLOR_BGR2RGBA)
    frames.append(rgba)
np.save(sys.argv[3], np.stack(frames))
print("%d frames of %dx%d" % (len(frames), frames[0].shape[1], frames[0].shape[0]))
