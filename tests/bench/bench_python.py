#!/usr/bin/env python3
"""The Python layer's cost and the batch, measured in one run on the GPU machine (figures, not
assertions). Prints JSON; tests/bench/gpu-bench-python runs it beside bench_device (C).

- overhead: a Runner.patches call against the same work through one raw ctypes call with views
  built beforehand (the library's C entry point), CPU (451x300) and GPU (device-resident 1024^2);
- frames/s of device-resident 1024^2 frames through Python (torch CUDA tensors in and out);
- a batch of 32 1024^2 CUDA tensors through foveate273: pxvm patches_batch vs 32 single runs vs
  PyTorch (avg_pool2d 5-level pyramid + grid_sample of the 273 patches, the whole batch at once)."""
import ctypes
import json
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
sys.path.insert(0, os.path.dirname(__file__))
import pxvm  # noqa: E402
from pxvm import _capi  # noqa: E402
from pxvm._arrays import _describe, _image_view  # noqa: E402
_argv, sys.argv = sys.argv, sys.argv[:1]  # bench_torch reads its own arguments when imported
from bench_torch import plan as torch_plan, pyramid as torch_pyramid  # noqa: E402
sys.argv = _argv

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
PLAN = {"image": [1024, 1024], "budget": 273, "scheme": "grid", "m0": 1, "e0": 0.5, "scale": 1, "levels": 5}


def per_call_us(fn, n, sync=None):
    for _ in range(20):
        fn()
    if sync:
        sync()
    t = time.perf_counter()
    for _ in range(n):
        fn()
    if sync:
        sync()
    return (time.perf_counter() - t) / n * 1e6


def raw_exec(runner, x, batch=1):
    """The same work as runner.patches(x) as one prepared call into the library."""
    h = runner._runner(batch)[0]
    a = _describe(x)
    s = runner.program.slot("image")
    v_in = _image_view(a, s.w, s.h, batch > 1)
    at = runner.program.slot("atlas")
    if a.device >= 0:
        out = torch.empty((batch, at.patch_count, at.patch_h, at.patch_w, 4), dtype=torch.uint8, device="cuda")
        ptr, dev = out.data_ptr(), 0
    else:
        out = np.empty((batch, at.patch_count, at.patch_h, at.patch_w, 4), np.uint8)
        ptr, dev = out.ctypes.data, -1
    v_out = _capi.View(ptr, dev, batch, at.patch_w, at.patch_h * at.patch_count, 4,
                       at.patch_w * at.patch_h * at.patch_count * 4, at.patch_w * 4, 4, 1)
    ins, items, outs, kinds = (ctypes.c_int * 1)(s.index), (ctypes.c_int * 1)(0), (ctypes.c_int * 1)(at.index), (ctypes.c_int * 1)(1)
    vi, vo = (_capi.View * 1)(v_in), (_capi.View * 1)(v_out)
    f = _capi.lib.pxvm_runner_exec

    def call():
        if f(h, 1, ins, items, vi, 1, outs, kinds, vo):
            raise RuntimeError(_capi.lib.pxvm_errmsg())
    return call, out


def torch_batch(x_u8, cx, cy, lod):
    """PyTorch: uint8 (B, 4, H, W) -> float, 5-level avg_pool2d pyramid, grid_sample of the 273
    trilinear patches on every level for the whole batch, blend between the two nearest levels."""
    f = x_u8.float() / 255
    pyr = torch_pyramid(f, 5)
    B, n = f.shape[0], cx.shape[0]
    H0, W0 = pyr[0].shape[-2:]
    step = torch.exp2(lod)
    off = torch.arange(16, device="cuda").float() - 7.5
    gx = cx[:, None, None] + off[None, None, :] * step[:, None, None] / W0
    gy = cy[:, None, None] + off[None, :, None] * step[:, None, None] / H0
    grid = (torch.stack([gx.expand(-1, 16, 16), gy.expand(-1, 16, 16)], -1) * 2 - 1).reshape(1, n * 16, 16, 2)
    grid = grid.expand(B, -1, -1, -1)
    samples = torch.stack([F.grid_sample(L, grid, mode="bilinear", padding_mode="border", align_corners=False)
                           for L in pyr])  # (levels, B, 4, n*16, 16)
    samples = samples.reshape(len(pyr), B, 4, n, 16, 16)
    l0 = lod.floor().long().clamp(max=len(pyr) - 1)
    l1 = (l0 + 1).clamp(max=len(pyr) - 1)
    fr = (lod - lod.floor())[:, None, None, None, None]
    ar = torch.arange(n, device="cuda")
    return samples[l0, :, :, ar] * (1 - fr) + samples[l1, :, :, ar] * fr  # (n, B, 4, 16, 16)


def main():
    c_json = json.load(open(sys.argv[1])) if len(sys.argv) > 1 else {}
    out = {"torch": torch.__version__, "gpu": torch.cuda.get_device_name(), "python": sys.version.split()[0]}
    # CPU: the bundled photo through foveate273
    fov = pxvm.Program.load(os.path.join(ROOT, "programs", "foveate273.pxi"))
    img = pxvm.load_image(os.path.join(ROOT, "programs", "data", "chelsea.png"))
    cpu = pxvm.Runner(fov, executor="cpu")
    call, _ = raw_exec(cpu, img)
    out["cpu_python_call_us"] = per_call_us(lambda: cpu.patches(img), 500)
    out["cpu_raw_call_us"] = per_call_us(call, 500)
    out["cpu_python_overhead_us"] = out["cpu_python_call_us"] - out["cpu_raw_call_us"]
    hbuf = np.empty((273, 16, 16, 4), np.uint8)
    out["cpu_python_out_call_us"] = per_call_us(lambda: cpu.patches(img, out=hbuf), 500)
    # GPU: device-resident 1024^2 frames
    prog = pxvm.Program.from_plan(PLAN)
    gpu = pxvm.Runner(prog, executor="cuda")
    x = torch.randint(0, 256, (1024, 1024, 4), dtype=torch.uint8, device="cuda")
    sync = torch.cuda.synchronize
    n = 2000
    out["gpu_python_frame_us"] = per_call_us(lambda: gpu.patches(x), n, sync)
    buf = torch.empty((273, 16, 16, 4), dtype=torch.uint8, device="cuda")
    out["gpu_python_frame_out_us"] = per_call_us(lambda: gpu.patches(x, out=buf), n, sync)
    call, _ = raw_exec(gpu, x)
    gpu._runner(1)  # the raw call uses the stream the Python call set
    out["gpu_raw_frame_us"] = per_call_us(call, n, sync)
    out["gpu_python_overhead_us"] = out["gpu_python_frame_us"] - out["gpu_raw_frame_us"]
    out["gpu_python_fps"] = 1e6 / out["gpu_python_frame_us"]
    out["gpu_python_out_fps"] = 1e6 / out["gpu_python_frame_out_us"]
    if "c_device_frame_fps" in c_json:
        out["c_device_frame_fps"] = c_json["c_device_frame_fps"]
        out["python_vs_c_fps"] = out["gpu_python_fps"] / c_json["c_device_frame_fps"]
        out["python_out_vs_c_fps"] = out["gpu_python_out_fps"] / c_json["c_device_frame_fps"]
    # the batch of 32
    B = 32
    X = torch.randint(0, 256, (B, 1024, 1024, 4), dtype=torch.uint8, device="cuda")
    out["batch"] = B
    out["pxvm_batch_ms"] = per_call_us(lambda: gpu.patches_batch(X), 50, sync) / 1e3
    out["pxvm_32_singles_ms"] = per_call_us(lambda: [gpu.patches(X[i]) for i in range(B)], 20, sync) / 1e3
    cx, cy, lod = torch_plan()
    Xc = X.permute(0, 3, 1, 2)
    out["torch_batch_ms"] = per_call_us(lambda: torch_batch(Xc, cx, cy, lod), 10, sync) / 1e3
    out["batch_vs_torch"] = out["torch_batch_ms"] / out["pxvm_batch_ms"]
    out["batch_vs_singles"] = out["pxvm_32_singles_ms"] / out["pxvm_batch_ms"]
    # the bytes agree with the CPU executor on one item of the batch
    ref = pxvm.Runner(prog, executor="cpu").patches(X[3].cpu().numpy())
    out["batch_item_equals_cpu"] = bool(np.array_equal(gpu.patches_batch(X)[3].cpu().numpy(), ref))
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
