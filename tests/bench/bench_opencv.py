#!/usr/bin/env python3
"""The CPU baseline for `make bench`: OpenCV's resize(INTER_AREA) pyramid of an RGBA8 image (what
a Python pipeline would use), on all cores, same sizes as bench_cpu. Medians; prints JSON."""
import json, sys, time
import cv2
import numpy as np

reps = int(sys.argv[1]) if len(sys.argv) > 1 else 15


def pyramid(img):
    levels = [img]
    while max(levels[-1].shape[:2]) > 1:
        h, w = levels[-1].shape[:2]
        levels.append(cv2.resize(levels[-1], (max(1, w // 2), max(1, h // 2)), interpolation=cv2.INTER_AREA))
    return levels


def median_ms(fn):
    fn()
    t = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        t.append((time.perf_counter() - t0) * 1e3)
    t.sort()
    return t[len(t) // 2]


out = {"opencv": cv2.__version__, "threads": cv2.getNumThreads(), "reps": reps, "sizes": []}
rng = np.random.default_rng(1)
for (w, h) in [(1024, 1024), (3840, 2160), (4096, 4096)]:
    img = rng.integers(0, 256, (h, w, 4), dtype=np.uint8)
    out["sizes"].append({"w": w, "h": h, "opencv_levels": len(pyramid(img)),
                         "opencv_inter_area_pyramid_ms": median_ms(lambda: pyramid(img))})
print(json.dumps(out, indent=1))
