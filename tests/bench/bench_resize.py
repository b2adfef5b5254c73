#!/usr/bin/env python3
"""RESIZE on the GPU against Pillow (CPU) and torch interpolate(antialias=True) on the same GPU,
measured in one run (figures, not assertions). Prints JSON.

For each case (source size -> destination size, filter) and each of three ways:
  pxvm      a program of one RESIZE (the exact rule of isa/SPEC.md), device-resident uint8 input
            and output (torch CUDA tensors), through Runner.run: Python call included;
  pillow    PIL.Image.resize on the host (one thread), the reference the bytes must equal;
  torch     torch.nn.functional.interpolate(antialias=True) of the float image on the GPU, then
            rounded and clamped to uint8 (what a PyTorch pipeline does);
the time per image (median of repeats), and the bytes against Pillow's: pxvm must differ in 0
bytes (it is checked here too: a difference makes the exit status 1); torch's differences are
reported (count, largest). Usage: bench_resize.py [--executor cuda|cpu] [--repeat N]."""
import argparse
import json
import os
import statistics
import sys
import time

import numpy as np
from PIL import Image

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
import pxvm  # noqa: E402

try:
    import torch
    import torch.nn.functional as F
except ImportError:  # the CPU-only machine may lack torch: the torch column is then absent
    torch = None

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
FILTERS = {"bilinear": (2, Image.BILINEAR), "bicubic": (3, Image.BICUBIC)}
CASES = [((1920, 1080), (448, 448), "bicubic"), ((1920, 1080), (448, 448), "bilinear"),
         ((4096, 2160), (336, 336), "bicubic"), ((640, 427), (1024, 1024), "bicubic"),
         ((1000, 872), (384, 384), "bilinear")]


def photo(w, h):
    """The bundled photo resized (Pillow, lanczos) to w x h: real content at every size."""
    src = Image.open(os.path.join(ROOT, "programs", "data", "chelsea.png")).convert("RGBA")
    return np.asarray(src.resize((w, h), Image.LANCZOS))


def timed(fn, repeat, sync=None):
    fn()
    if sync:
        sync()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        if sync:
            sync()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e6


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--executor", default="cuda")
    ap.add_argument("--repeat", type=int, default=50)
    a = ap.parse_args()
    cuda = a.executor == "cuda"
    dev = "cuda" if cuda else "cpu"
    sync = torch.cuda.synchronize if (cuda and torch) else None
    out = {"executor": a.executor, "repeat": a.repeat, "date": time.strftime("%Y-%m-%d"), "cases": []}
    if cuda and torch:
        out["gpu"] = torch.cuda.get_device_name(0)
    bad = 0
    for (sw, sh), (dw, dh), fname in CASES:
        code, pil_filter = FILTERS[fname]
        src = photo(sw, sh)
        prog = pxvm.assemble(".width 16\n.slot image input %dx%d\n.slot out output %dx%d\n"
                             "RESIZE image out filter=%d at=(0,0) size=(%d,%d) fit=0 pad_r=0 pad_g=0 pad_b=0 pad_a=0\n"
                             "HALT\n" % (sw, sh, dw, dh, code, dw, dh))
        runner = pxvm.Runner(prog, executor=a.executor)
        x = torch.from_numpy(src).to(dev) if torch else src
        res = {"src": [sw, sh], "dst": [dw, dh], "filter": fname}
        res["pxvm_us"] = timed(lambda: runner.run(x), a.repeat, sync)
        got = runner.run(x)["out"]
        got = got.cpu().numpy() if torch and hasattr(got, "cpu") else np.asarray(got)
        pim = Image.fromarray(src[:, :, :3])
        res["pillow_us"] = timed(lambda: pim.resize((dw, dh), pil_filter), max(3, a.repeat // 10))
        ref = np.asarray(pim.resize((dw, dh), pil_filter))
        res["pxvm_bytes_differing_from_pillow"] = int((got[:, :, :3] != ref).sum())
        bad += res["pxvm_bytes_differing_from_pillow"] != 0
        if torch:
            xf = torch.from_numpy(np.ascontiguousarray(src[:, :, :3])).to(dev).permute(2, 0, 1)[None].float()

            def tr():
                return F.interpolate(xf, size=(dh, dw), mode=fname, antialias=True, align_corners=False).round().clamp(0, 255).to(torch.uint8)
            res["torch_us"] = timed(tr, a.repeat, sync)
            t = tr()[0].permute(1, 2, 0).cpu().numpy()
            d = np.abs(t.astype(np.int16) - ref.astype(np.int16))
            res["torch_bytes_differing_from_pillow"] = int((d != 0).sum())
            res["torch_largest_difference"] = int(d.max())
            res["pxvm_vs_torch_speed"] = res["torch_us"] / res["pxvm_us"]
        res["pxvm_vs_pillow_speed"] = res["pillow_us"] / res["pxvm_us"]
        res["bytes"] = dw * dh * 3
        out["cases"].append(res)
        runner.close()
    print(json.dumps(out, indent=1))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
