#!/usr/bin/env python3
"""The host resize of the dynamic policy against Pillow, on real photos of mixed sizes, in one run
(figures, not assertions; prints JSON; exit status 1 if any byte differs from Pillow's).

Photos: tests/data/photos, programs/data/chelsea.png and the colour and grey pictures of Debian's
python3-skimage data, decoded beforehand (grey and palette ones converted to RGB, as a
processor does). Each is resized to Qwen2-VL's size (the dynamic policy's rule,
pxvm_policy_dynamic_size; --patch 16 or 14, merge 2) with bicubic:
  pillow       PIL Image.resize of the decoded RGB image, one thread (the reference);
  pillow-array the same from the RGB array (Image.fromarray, resize, np.asarray): what a NumPy
               pipeline pays;
  pxvm         pxvm_image_fit_channels(policy "dynamic") of the RGB array, one image after
               another: the host resize (AVX2 where present, a large image in bands over the
               cores, PXVM_RESIZE_THREADS; PXVM_RESIZE_PORTABLE=1 forces the portable kernels);
  pxvm-policy  pxvm.runner._policy_image of the RGB array: what patches_batch(policy="dynamic")
               runs per image on the host (RGBA array out);
  pxvm-pool    pxvm over a pool of --threads Python threads (ctypes releases the GIL).
Images/s is the photos' count over the median (--repeat runs) of the time for the whole set.
"large": camera-sized photos (5640x3172, 4032x3024, 1920x1080: chelsea resized there with Pillow's
Lanczos, as bench_resize.py does), each timed alone, pillow against pxvm, medians of --repeat.
Usage: bench_resize_cpu.py [--patch 16] [--repeat 5] [--threads N] [--json out.json]"""
import argparse
import ctypes
import glob
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from PIL import Image

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "python"))
import pxvm  # noqa: E402
from pxvm import _capi  # noqa: E402
from pxvm.ragged import dynamic_size  # noqa: E402
from pxvm.runner import _policy_image  # noqa: E402

SKIMAGE = "/usr/lib/python3/dist-packages/skimage/data"


def photo_paths():
    paths = sorted(glob.glob(os.path.join(ROOT, "tests", "data", "photos", "*.png")) +
                   glob.glob(os.path.join(ROOT, "tests", "data", "photos", "*.jpg")))
    paths.append(os.path.join(ROOT, "programs", "data", "chelsea.png"))
    for name in sorted(os.listdir(SKIMAGE)) if os.path.isdir(SKIMAGE) else []:
        if name.endswith((".png", ".jpg")) and not name.startswith("_"):
            paths.append(os.path.join(SKIMAGE, name))
    return paths


def load(paths):
    """(path, PIL RGB image, its RGB array) of each photo that decodes as a picture."""
    out = []
    for p in paths:
        try:
            im = Image.open(p)
            im.load()
        except Exception:  # noqa: BLE001 - skimage's folder holds a few non-pictures
            continue
        if im.mode not in ("L", "P", "RGB", "RGBA", "LA", "PA") or min(im.size) < 8:
            continue
        rgb = im.convert("RGB")
        out.append((p, rgb, np.asarray(rgb).copy()))
    return out


def machine():
    model = ""
    try:
        for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines():
            if line.startswith("Model name"):
                model = line.split(":", 1)[1].strip()
    except OSError:
        pass
    return {"nproc": os.cpu_count(), "cpu": model, "python": platform.python_version(),
            "pillow": Image.__version__}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--patch", type=int, default=16)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--json")
    a = ap.parse_args()
    lib = _capi.lib
    fit_channels = hasattr(lib, "pxvm_image_fit_channels")
    policy = b"dynamic:patch=%d" % a.patch
    photos = load(photo_paths())
    sizes = [dynamic_size("dynamic:patch=%d" % a.patch, a.patch, rgb.size[0], rgb.size[1]) for _, rgb, _ in photos]

    def pillow_one(i):
        return photos[i][1].resize(sizes[i], Image.BICUBIC)

    def pillow_array(i):
        return np.asarray(Image.fromarray(photos[i][2]).resize(sizes[i], Image.BICUBIC))

    def policy_one(i):
        return _policy_image(photos[i][2], sizes[i][0], sizes[i][1], policy.decode())

    def pxvm_one(i):
        rgb = photos[i][2]
        h, w = rgb.shape[:2]
        ow, oh = sizes[i]
        out = ctypes.c_void_p()
        if not fit_channels:  # a library from before pxvm_image_fit_channels: RGBA widened here, as its Python did
            rgba = np.empty((h, w, 4), dtype=np.uint8)
            rgba[..., :3] = rgb
            rgba[..., 3] = 255
            r = lib.pxvm_image_fit(rgba.ctypes.data, w, h, ow, oh, policy, ctypes.byref(out))
        else:
            r = lib.pxvm_image_fit_channels(rgb.ctypes.data, w, h, 3, ow, oh, policy, ctypes.byref(out))
        if r != 0:
            raise RuntimeError("pxvm_image_fit failed on %s" % photos[i][0])
        try:
            rgba = np.empty((oh, ow, 4), dtype=np.uint8)
            ctypes.memmove(rgba.ctypes.data, out, ow * oh * 4)
            return rgba
        finally:
            lib.pxvm_free(out)

    differ = 0
    for i in range(len(photos)):
        ref = np.asarray(pillow_one(i))
        for got in (pxvm_one(i), policy_one(i)):
            differ += int(np.count_nonzero(ref != got[..., :3]))  # a photo of the size itself comes back as it is
            differ += int(np.count_nonzero(got[..., 3] != 255)) if got.shape[2] == 4 else 0

    large = []
    src = Image.open(os.path.join(ROOT, "programs", "data", "chelsea.png")).convert("RGB")
    for W, H in ((5640, 3172), (4032, 3024), (1920, 1080)):
        im = src.resize((W, H), Image.LANCZOS)
        arr = np.asarray(im).copy()
        ow, oh = dynamic_size("dynamic:patch=%d" % a.patch, a.patch, W, H)
        photos.append((None, im, arr))
        sizes.append((ow, oh))
        i = len(photos) - 1
        d = int(np.count_nonzero(np.asarray(pillow_one(i)) != pxvm_one(i)[..., :3]))
        differ += d
        t = {"pillow": [], "pxvm": []}
        for _ in range(a.repeat):
            for k, fn in (("pillow", pillow_one), ("pxvm", pxvm_one)):
                t0 = time.perf_counter()
                fn(i)
                t[k].append(time.perf_counter() - t0)
        mp, mx = statistics.median(t["pillow"]), statistics.median(t["pxvm"])
        large.append({"size": [W, H], "to": [ow, oh], "pillow_ms": round(mp * 1e3, 2), "pxvm_ms": round(mx * 1e3, 2),
                      "x_pillow": round(mp / mx, 2), "bytes_differing": d})
    del photos[-3:], sizes[-3:]

    pool = ThreadPoolExecutor(a.threads)

    def whole(fn):
        def run():
            for i in range(len(photos)):
                fn(i)
        return run

    def pooled():
        list(pool.map(pxvm_one, range(len(photos))))

    ways = {"pillow": whole(pillow_one), "pillow-array": whole(pillow_array), "pxvm": whole(pxvm_one),
            "pxvm-policy": whole(policy_one), "pxvm-pool": pooled}
    times = {k: [] for k in ways}
    for _ in range(a.repeat):  # interleaved, so that a noisy neighbour hits every way alike
        for k, fn in ways.items():
            t = time.perf_counter()
            fn()
            times[k].append(time.perf_counter() - t)
    n = len(photos)
    res = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "machine": machine(),
           "patch": a.patch, "images": n, "repeat": a.repeat, "threads": a.threads,
           "library": _capi.library_path, "fit_channels": fit_channels,
           "resize_threads_env": os.environ.get("PXVM_RESIZE_THREADS"),
           "portable_env": os.environ.get("PXVM_RESIZE_PORTABLE"),
           "sizes": sorted({p[1].size for p in photos}, key=lambda s: s[0] * s[1]),
           "source_pixels": int(sum(p[2].shape[0] * p[2].shape[1] for p in photos)),
           "bytes_differing": differ, "large": large, "ways": {}}
    for k, ts in times.items():
        med = statistics.median(ts)
        res["ways"][k] = {"median_s": round(med, 4), "images_per_s": round(n / med, 1),
                          "runs_s": [round(t, 4) for t in ts]}
    pil = res["ways"]["pillow"]["median_s"]
    for k in ways:
        res["ways"][k]["x_pillow"] = round(pil / res["ways"][k]["median_s"], 2)
    text = json.dumps(res, indent=1)
    print(text)
    if a.json:
        with open(a.json, "w") as f:
            f.write(text + "\n")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
