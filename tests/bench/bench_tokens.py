#!/usr/bin/env python3
"""Tokens for models, what they cost (isa/SPEC.md section 9), every figure from the same run.

CPU (default): foveate273 on the bundled photo (451x300), the CPU executor, through the library's
calls (ctypes, no Python layer in the loop): the uint8 patch read (pxvm_runner_read_patches)
against the token read (pxvm_runner_read_tokens, clip, float32 / bfloat16, nchw), alone and as
the whole path of a frame (run + read); the ratios are what the issue bounds (float path <= 1.1 x
the uint8 path). Medians of alternated rounds (this machine's speed drifts).

    python3 tests/bench/bench_tokens.py [--json out.json] [--md out.md]

CUDA (--cuda, the GPU machine): foveate273 planned for a device-resident 1024x1024 RGBA frame
(torch CUDA uint8), to bf16 clip tokens in a preallocated CUDA tensor, on torch's current stream:
frames/s of the library's calls (bind a device view, run, read_tokens: ctypes, as a C caller
makes them) against Runner.tokens (the Python layer), synchronised once per round.
"""
import argparse
import ctypes
import json
import os
import platform
import statistics
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))
import numpy as np  # noqa: E402
import pxvm  # noqa: E402
from pxvm import _capi  # noqa: E402
from pxvm.errors import _check  # noqa: E402
from pxvm.tokens import token_format  # noqa: E402

lib = _capi.lib


def timed(fn, reps):
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    return (time.perf_counter() - t0) / reps * 1e6  # us per call


def bench_cpu(rounds, reps, threads):
    prog = pxvm.Program.load(os.path.join(ROOT, "programs", "foveate273.pxi"))
    h = ctypes.c_void_p()
    _check(lib.pxvm_runner_open(prog._h, b"cpu", 0, threads, 1, ctypes.byref(h)))
    img = pxvm.load_image(os.path.join(ROOT, "programs", "data", "chelsea.png"))
    img = np.ascontiguousarray(img)
    v = _capi.View(img.ctypes.data, -1, 1, img.shape[1], img.shape[0], img.shape[2], img.nbytes, img.strides[0],
                   img.strides[1], img.strides[2])
    _check(lib.pxvm_runner_bind(h, 1, 0, ctypes.byref(v)))
    _check(lib.pxvm_runner_run(h))
    atlas = prog.slot("atlas")
    n, p = atlas.patch_count, atlas.patch_w
    u8 = np.empty((n, p, p, 4), dtype=np.uint8)
    pv = _capi.View(u8.ctypes.data, -1, 1, p, p * n, 4, u8.nbytes, p * 4, 4, 1)
    f32 = np.empty((n, 3, p, p), dtype=np.float32)
    b16 = np.empty((n, 3, p, p), dtype=np.uint16)
    fmt32, fmt16 = token_format("float32", "clip"), token_format("bfloat16", "clip")
    k = atlas.index

    def read_u8():
        _check(lib.pxvm_runner_read_patches(h, k, 0, ctypes.byref(pv)))

    def read_f32():
        _check(lib.pxvm_runner_read_tokens(h, k, 0, 1, ctypes.byref(fmt32), ctypes.c_void_p(f32.ctypes.data), -1))

    def read_b16():
        _check(lib.pxvm_runner_read_tokens(h, k, 0, 1, ctypes.byref(fmt16), ctypes.c_void_p(b16.ctypes.data), -1))

    def run():
        _check(lib.pxvm_runner_run(h))

    cases = {"read_uint8": read_u8, "read_float32": read_f32, "read_bfloat16": read_b16,
             "frame_uint8": lambda: (run(), read_u8()), "frame_float32": lambda: (run(), read_f32()),
             "frame_bfloat16": lambda: (run(), read_b16())}
    for fn in cases.values():  # warm: pages, caches, threads
        timed(fn, 20)
    samples = {name: [] for name in cases}
    for _ in range(rounds):
        for name, fn in cases.items():
            samples[name].append(timed(fn, reps if name.startswith("read") else max(reps // 10, 10)))
    lib.pxvm_runner_close(h)
    us = {name: statistics.median(s) for name, s in samples.items()}
    return {
        "machine": {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(), "threads": threads,
                    "python": platform.python_version()},
        "program": "foveate273 (451x300 -> 273 tokens of 16x16)",
        "rounds": rounds,
        "us_median": {k2: round(v2, 2) for k2, v2 in us.items()},
        "bytes": {"uint8": int(u8.nbytes), "float32": int(f32.nbytes), "bfloat16": int(b16.nbytes)},
        "ratio_read_float32_over_uint8": round(us["read_float32"] / us["read_uint8"], 3),
        "ratio_read_bfloat16_over_uint8": round(us["read_bfloat16"] / us["read_uint8"], 3),
        "ratio_frame_float32_over_uint8": round(us["frame_float32"] / us["frame_uint8"], 3),
        "ratio_frame_bfloat16_over_uint8": round(us["frame_bfloat16"] / us["frame_uint8"], 3),
    }


def bench_cuda(frames):
    import torch
    plan = json.load(open(os.path.join(ROOT, "programs", "foveate273.json")))
    plan["image"] = [1024, 1024]
    prog = pxvm.Program.from_plan(plan, "foveate273-1024")
    r = pxvm.Runner(prog, executor="cuda")
    frame = torch.randint(0, 256, (1024, 1024, 4), dtype=torch.uint8, device="cuda")
    s = r.program.slot("atlas")
    out = torch.empty((s.patch_count, 3, s.patch_h, s.patch_w), dtype=torch.bfloat16, device="cuda")
    # the library's calls, as a C caller makes them (the runner's handle, ctypes)
    h = r._runner(1)[0]
    r.tokens(frame, dtype="bfloat16", out=out)  # sets torch's stream on the runner
    fmt = token_format("bfloat16", "clip")
    v = _capi.View(frame.data_ptr(), 0, 1, 1024, 1024, 4, 1024 * 1024 * 4, 4096, 4, 1)
    ins, items = (ctypes.c_int * 1)(1), (ctypes.c_int * 1)(0)
    views = (_capi.View * 1)(v)

    def c_frame():
        _check(lib.pxvm_runner_exec(h, 1, ins, items, views, 0, None, None, None))
        _check(lib.pxvm_runner_read_tokens(h, s.index, 0, 1, ctypes.byref(fmt), ctypes.c_void_p(out.data_ptr()), 0))

    def py_frame():
        r.tokens(frame, dtype="bfloat16", normalize="clip", out=out)

    res = {}
    for name, fn in (("c_api", c_frame), ("python", py_frame)) * 2:  # alternated, the second round kept
        for _ in range(50):
            fn()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(frames):
            fn()
        torch.cuda.synchronize()
        res[name] = frames / (time.perf_counter() - t0)
    return {"gpu": torch.cuda.get_device_name(), "frames": frames, "frame": "1024x1024 RGBA uint8, CUDA",
            "tokens": "273 x 3 x 16 x 16 bfloat16, clip, into a preallocated CUDA tensor",
            "frames_per_s": {k2: round(v2, 1) for k2, v2 in res.items()},
            "python_over_c_api": round(res["python"] / res["c_api"], 3)}


def markdown(cpu):
    us = cpu["us_median"]
    lines = ["# Tokens for models: CPU cost (bench_tokens.py)", "",
             "%s, %s cores, %s threads; %s; medians of %d alternated rounds." % (
                 cpu["machine"]["cpu"], cpu["machine"]["cores"], cpu["machine"]["threads"], cpu["program"],
                 cpu["rounds"]), "",
             "| what | uint8 patches | float32 tokens | bfloat16 tokens | float32 / uint8 | bfloat16 / uint8 |",
             "|---|---|---|---|---|---|",
             "| read after a run (us) | %.1f | %.1f | %.1f | %.2f | %.2f |" % (
                 us["read_uint8"], us["read_float32"], us["read_bfloat16"], cpu["ratio_read_float32_over_uint8"],
                 cpu["ratio_read_bfloat16_over_uint8"]),
             "| a frame: run + read (us) | %.1f | %.1f | %.1f | %.2f | %.2f |" % (
                 us["frame_uint8"], us["frame_float32"], us["frame_bfloat16"], cpu["ratio_frame_float32_over_uint8"],
                 cpu["ratio_frame_bfloat16_over_uint8"]),
             "", "Bytes written per frame: uint8 %d, float32 %d, bfloat16 %d." % (
                 cpu["bytes"]["uint8"], cpu["bytes"]["float32"], cpu["bytes"]["bfloat16"])]
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cuda", action="store_true", help="the GPU part (needs torch and the cuda executor)")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--reps", type=int, default=400)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--frames", type=int, default=2000)
    ap.add_argument("--json")
    ap.add_argument("--md")
    a = ap.parse_args()
    res = bench_cuda(a.frames) if a.cuda else bench_cpu(a.rounds, a.reps, a.threads)
    text = json.dumps(res, indent=1)
    print(text)
    if a.json:
        with open(a.json, "w") as f:
            f.write(text + "\n")
    if a.md and not a.cuda:
        with open(a.md, "w") as f:
            f.write(markdown(res))


if __name__ == "__main__":
    main()
