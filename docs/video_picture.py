"""Draws docs/img/video.png: frame 30 of OpenCV's vtest.avi through the video plan at threshold 16,
its dirty 16x16 tiles tinted red, the tokens it sampled again outlined green, the tokens it kept
(reusable embeddings) outlined grey. Inputs from pxrun (make docs-images runs this):
  python3 docs/video_picture.py FRAMES.npy DIRTY.npy CHANGED.npy GEOMETRY.npy OUT.png"""
import sys

import numpy as np
from PIL import Image, ImageDraw

frames, dirty, changed, geom = (np.load(p) for p in sys.argv[1:5])
frame = frames[-1, 0][:, :, :3].astype(np.float32) * 0.6
mask = dirty[-1, 0][:, :, 0] > 0
for ty, tx in zip(*np.nonzero(mask)):
    frame[ty * 16:(ty + 1) * 16, tx * 16:(tx + 1) * 16] = frame[ty * 16:(ty + 1) * 16, tx * 16:(tx + 1) * 16] * 0.6 + [90, 0, 0]
img = Image.fromarray(frame.clip(0, 255).astype(np.uint8))
d = ImageDraw.Draw(img)
for t, g in enumerate(geom):
    cx, cy, half = g[0] / 65536, g[1] / 65536, 8 * g[2] / 65536
    d.rectangle([cx - half, cy - half, cx + half, cy + half], outline=(60, 255, 60) if changed[-1, t] else (150, 150, 150))
img.save(sys.argv[5])
print("frame %d: %d of %d tiles dirty, %d of %d tokens sampled again" % (len(frames) - 1, mask.sum(), mask.size,
                                                                        changed[-1].sum(), changed.shape[1]))
