#!/usr/bin/env python3
"""The Python layer's cost and the batch, measured in one run on the GPU machine (figures, not
assertions). Prints JSON; tests/bench/gpu-python-check runs it beside bench_device (C).

- overhead: a Runner.patches call against the same work through one raw ctypes call with views
  built beforehand (the library's C entry point), CPU (451x300) and GPU (device-resident 1024^2);
  Runner.patches on each of its paths: the compiled one (pxvm._native, when built) and ctypes
  (PXVM_NO_NATIVE=1's); on the CPU also the C API itself (a C loop of pxvm_runner_exec, compiled
  here against the library the package loaded), for foveate273 and a 2-patch 16x16 program whose
  run costs next to nothing (there the overhead is most of a call);
- frames/s of device-resident 1024^2 frames through Python (torch CUDA tensors in and out);
- a batch of 32 1024^2 CUDA tensors through foveate273: pxvm patches_batch vs 32 single runs vs
  PyTorch (avg_pool2d 5-level pyramid + grid_sample of the 273 patches, the whole batch at once).

  bench_python.py [bench_device.json]      everything (the GPU machine)
  bench_python.py --cpu                    the CPU part alone (no GPU, no torch needed)"""
import ctypes
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
sys.path.insert(0, os.path.dirname(__file__))
import pxvm  # noqa: E402
from pxvm import _capi  # noqa: E402
from pxvm import runner as runner_mod  # noqa: E402
from pxvm._arrays import _describe, _image_view  # noqa: E402

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
TINY = (".width 16\n.slot image input 16x16\n.slot atlas output 32x16 patches=16x16x2\n"
        "SAMPLE src=image dst=atlas mode=nearest dst_x=0 dst_y=0 w=16 h=16 cu=8 cv=8 du=1 dv=1 lod=0\n"
        "SAMPLE src=image dst=atlas mode=linear dst_x=16 dst_y=0 w=16 h=16 cu=7.5 cv=8.25 du=0.5 dv=0.5 lod=0\nHALT\n")
# The C API's cost of the same call: n pxvm_runner_exec of an RGBA frame into the atlas's patches
C_LOOP = r"""
#define _POSIX_C_SOURCE 199309L
#include <pxvm.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
int main(int argc, char **argv)
{
    pxvm_prog *prog;
    pxvm_runner *run;
    int w = atoi(argv[3]), h = atoi(argv[4]), n = atoi(argv[5]), threads = atoi(argv[6]);
    uint8_t *rgba = malloc((size_t)w * h * 4);
    FILE *f = fopen(argv[2], "rb");
    if (!f || fread(rgba, 4, (size_t)w * h, f) != (size_t)w * h || pxvm_prog_load(argv[1], NULL, &prog) ||
        pxvm_runner_open(prog, "cpu", 0, threads, 1, &run)) {
        fprintf(stderr, "c loop: %s\n", pxvm_errmsg());
        return 1;
    }
    int in_slot = pxvm_prog_slot_find(prog, "image"), out_slot = pxvm_prog_slot_find(prog, "atlas"), kind = 1;
    pxvm_slot_info ai;
    pxvm_prog_slot(prog, out_slot, &ai);
    uint8_t *out = malloc((size_t)ai.patch_w * ai.patch_h * ai.patch_count * 4);
    pxvm_view in = pxvm_view_host(rgba, w, h, 4), ov = pxvm_view_host(out, ai.patch_w, ai.patch_h * ai.patch_count, 4);
    struct timespec t0, t1;
    for (int i = -20; i < n; i++) {
        if (i == 0)
            clock_gettime(CLOCK_MONOTONIC, &t0);
        if (pxvm_runner_exec(run, 1, &in_slot, NULL, &in, 1, &out_slot, &kind, &ov)) {
            fprintf(stderr, "c loop: %s\n", pxvm_errmsg());
            return 1;
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("%.3f\n", ((double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec)) / n / 1e3);
    return 0;
}
"""
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


def ctypes_runner(prog, **kw):
    """A Runner that takes the ctypes path alone, as PXVM_NO_NATIVE=1 makes every runner do."""
    r = pxvm.Runner(prog, **kw)
    r._fast_key = lambda *a: None
    return r


def rounds(fns, n, r=9, sync=None):
    """{name: (median, min) per-call us over r rounds of n calls}, the functions alternated round by
    round (a shared machine's speed drifts); a function marked rounds_itself times its n calls."""
    got = {k: [] for k in fns}
    for _ in range(r):
        for k, fn in fns.items():
            got[k].append(fn() if getattr(fn, "rounds_itself", False) else per_call_us(fn, n, sync))
    return {k: (statistics.median(v), min(v)) for k, v in got.items()}


def c_loop(work, prog, img, n, threads):
    """A function that times n pxvm_runner_exec calls of prog on img in C (us per call)."""
    exe = os.path.join(work, "c_loop")
    if not os.path.exists(exe):
        src = os.path.join(work, "c_loop.c")
        open(src, "w").write(C_LOOP)
        lib = os.path.realpath(_capi.library_path if os.path.sep in _capi.library_path else
                               os.path.join(ROOT, "build", "libpxvm.so.1"))
        subprocess.run(["cc", "-std=c11", "-O2", "-I", os.path.join(ROOT, "include"), src, lib,
                        "-Wl,-rpath," + os.path.dirname(lib), "-o", exe], check=True)
    path = os.path.join(work, "prog%d.pxi" % id(prog))
    prog.save(path)
    frame = os.path.join(work, "frame%d.rgba" % id(prog))
    np.ascontiguousarray(img).tofile(frame)

    def run():
        out = subprocess.run([exe, path, frame, str(img.shape[1]), str(img.shape[0]), str(n), str(threads)],
                             capture_output=True, text=True, check=True)
        return float(out.stdout)
    run.rounds_itself = True
    return run


def cpu_part(out, n=150):
    """Runner.patches (compiled and ctypes paths), the prepared ctypes call and the C API, on the
    CPU executor: foveate273 on the bundled 451x300 photo, and the 2-patch 16x16 program."""
    out["native"] = runner_mod._native is not None
    fov = pxvm.Program.load(os.path.join(ROOT, "programs", "foveate273.pxi"))
    img = pxvm.load_image(os.path.join(ROOT, "programs", "data", "chelsea.png"))
    tiny = pxvm.assemble(TINY)
    small = np.random.default_rng(1).integers(0, 256, (16, 16, 4), dtype=np.uint8)
    with tempfile.TemporaryDirectory() as work:
        # one worker thread: the run's own time varies least (the figures sought are the overheads)
        for name, prog, x, calls, threads in (("cpu", fov, img, n, 1), ("cpu_tiny", tiny, small, 100 * n, 1)):
            native = pxvm.Runner(prog, executor="cpu", threads=threads)
            plain = ctypes_runner(prog, executor="cpu", threads=threads)
            call, _ = raw_exec(plain, x)
            shape = (prog.slot("atlas").patch_count, 16, 16, 4)
            hbuf, hbuf2 = np.empty(shape, np.uint8), np.empty(shape, np.uint8)
            fns = {"ctypes": lambda: plain.patches(x), "raw": call, "c": c_loop(work, prog, x, calls, threads),
                   "ctypes_out": lambda: plain.patches(x, out=hbuf2)}
            if out["native"]:
                fns["native"] = lambda: native.patches(x)
                fns["native_out"] = lambda: native.patches(x, out=hbuf)
            t = rounds(fns, calls)
            for k, (med, low) in t.items():
                out["%s_%s_call_us" % (name, k)] = med
                out["%s_%s_call_min_us" % (name, k)] = low
            for k in ("native", "ctypes", "raw", "native_out", "ctypes_out"):
                if k in t:  # over the C API's call; the min of rounds: the least disturbed
                    out["%s_%s_overhead_us" % (name, k)] = t[k][0] - t["c"][0]
                    out["%s_%s_overhead_min_us" % (name, k)] = t[k][1] - t["c"][1]
            if out["native"]:
                assert np.array_equal(native.patches(x), plain.patches(x)) and np.array_equal(hbuf, hbuf2)
    out["cpu_python_call_us"] = out.get("cpu_native_call_us", out["cpu_ctypes_call_us"])  # as Runner.patches runs
    out["cpu_python_overhead_us"] = out["cpu_python_call_us"] - out["cpu_raw_call_us"]


def raw_exec(runner, x, batch=1):
    """The same work as runner.patches(x) as one prepared call into the library."""
    h = runner._runner(batch)[0]
    a = _describe(x)
    s = runner.program.slot("image")
    v_in = _image_view(a, s.w, s.h, batch > 1)
    at = runner.program.slot("atlas")
    if a.device >= 0:
        import torch
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
    import torch
    import torch.nn.functional as F
    from bench_torch import pyramid as torch_pyramid
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


def machine():
    model = [line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")]
    return {"date": time.strftime("%Y-%m-%dT%H:%MZ", time.gmtime()), "cpu": model[0] if model else platform.machine(),
            "cores": os.cpu_count(), "python": sys.version.split()[0], "numpy": np.__version__,
            "pxvm": pxvm.library_version, "native": runner_mod._native is not None}


def main():
    if sys.argv[1:] == ["--cpu"]:
        out = machine()
        cpu_part(out)
        print(json.dumps(out, indent=1))
        return
    import torch
    _argv, sys.argv = sys.argv, sys.argv[:1]  # bench_torch reads its own arguments when imported
    from bench_torch import plan as torch_plan
    sys.argv = _argv
    c_json = json.load(open(sys.argv[1])) if len(sys.argv) > 1 else {}
    out = machine()
    out.update({"torch": torch.__version__, "gpu": torch.cuda.get_device_name()})
    # CPU: the bundled photo through foveate273 (and the 2-patch program)
    cpu_part(out)
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
    # the two paths of Runner.patches apart, alternated (gpu_python_* above: the one it takes)
    plain = ctypes_runner(prog, executor="cuda")
    buf2 = torch.empty((273, 16, 16, 4), dtype=torch.uint8, device="cuda")
    fns = {"ctypes": lambda: plain.patches(x), "ctypes_out": lambda: plain.patches(x, out=buf2), "raw": call}
    if out["native"]:
        fns["native"] = lambda: gpu.patches(x)
        fns["native_out"] = lambda: gpu.patches(x, out=buf)
    t = rounds(fns, n // 4, 5, sync)
    for k, (med, low) in t.items():
        out["gpu_%s_frame_us" % k] = med
        out["gpu_%s_frame_min_us" % k] = low
        if k != "raw":
            out["gpu_%s_overhead_us" % k] = med - t["raw"][0]
    out["gpu_python_fps"] = 1e6 / out["gpu_python_frame_us"]
    out["gpu_python_out_fps"] = 1e6 / out["gpu_python_frame_out_us"]
    if "c_device_frame_fps" in c_json:
        out["c_device_frame_fps"] = c_json["c_device_frame_fps"]
        for k in ("native", "native_out", "ctypes", "ctypes_out"):
            if "gpu_%s_frame_us" % k in out:  # against the C API's frame (bench_device, the same run)
                out["gpu_%s_vs_c_fps" % k] = 1e6 / c_json["c_device_frame_fps"] / out["gpu_%s_frame_us" % k]
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
