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
makes them) against Runner.tokens (the Python layer), synchronised once per round. And a batch of
32 device-resident 1024x1024 frames with per-image fixations [32, 2] to bf16 clip tokens: pxvm
(a fixation-relative logpolar plan, one Runner.tokens_batch call: one run, one read) against the
PyTorch path a user writes today for the same patch centres and footprints (float [0, 1] frames,
an avg_pool2d pyramid, centres from the fixations, one grid_sample per level, normalize with the
clip mean/std, .to(torch.bfloat16)), same GPU, same run, alternated; images/s and the ratio.

    python3 tests/bench/bench_tokens.py --cuda [--batch 32] [--json out.json]
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


CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)


def torch_tokens_path(prog, geom, fix0):
    """The PyTorch path of a user, for the tokens of `prog` (a fixation-relative plan): a function
    (frames (B, H, W, 4) uint8, fixations (B, 2) normalized) -> (B, N, 3, p, p) bf16 clip tokens,
    sampling the centres and footprints pxvm's geometry gives (geom (B, N, 5) int32, exact, of a
    run at fixations fix0): per token its offset from the fixation, its step du and its level
    (round(LOD), the same for every item of a relative plan)."""
    import torch
    import torch.nn.functional as F
    slot = prog.slot("atlas")
    p = slot.patch_w
    W, H = prog.inputs[0].w, prog.inputs[0].h
    g = geom.to(torch.float64)
    lod = geom[..., 4]
    if not bool((lod == lod[0]).all()) or not bool((lod >= 0).all()):
        raise SystemExit("bench: the plan's tokens do not share their levels across items (or one is unwritten)")
    fix_tex = fix0.to(torch.float64) * torch.tensor([W, H], dtype=torch.float64, device=fix0.device)
    offset = (g[0, :, 0:2] / 65536.0 - fix_tex[0]).float()  # (N, 2): centre - fixation, texels
    step = (g[0, :, 2] / 65536.0).float()                     # (N,) level-0 texels per patch texel
    level = torch.clamp(torch.round(lod[0].double() / 256.0), min=0).long()
    groups = [(int(lv), torch.nonzero(level == lv).flatten()) for lv in torch.unique(level).tolist()]
    top = max(lv for lv, _ in groups)
    ramp = torch.arange(p, dtype=torch.float32, device=geom.device) - (p - 1) / 2.0
    scale = torch.tensor([2.0 / W, 2.0 / H], device=geom.device)
    mean = torch.tensor(CLIP_MEAN, device=geom.device).view(1, 1, 3, 1, 1)
    std = torch.tensor(CLIP_STD, device=geom.device).view(1, 1, 3, 1, 1)

    def run(frames, fixations):
        b = frames.shape[0]
        x = frames[..., :3].permute(0, 3, 1, 2).float() / 255.0  # (B, 3, H, W) in [0, 1]
        pyr = [x]
        for _ in range(top):
            pyr.append(F.avg_pool2d(pyr[-1], 2))
        centre = fixations.float()[:, None, :] * torch.tensor([W, H], device=frames.device) + offset  # (B, N, 2)
        out = torch.empty((b, slot.patch_count, 3, p, p), device=frames.device)
        for lv, idx in groups:
            c, st = centre[:, idx], step[idx]                     # (B, n, 2), (n,)
            u = c[..., 0, None] + ramp * st[:, None]              # (B, n, p) level-0 texels
            v = c[..., 1, None] + ramp * st[:, None]
            gx = (u * scale[0] - 1.0)[:, :, None, :].expand(-1, -1, p, -1)
            gy = (v * scale[1] - 1.0)[:, :, :, None].expand(-1, -1, -1, p)
            grid = torch.stack([gx, gy], -1).reshape(b, len(idx) * p, p, 2)
            t = F.grid_sample(pyr[lv], grid, mode="bilinear", padding_mode="border", align_corners=False)
            out[:, idx] = t.reshape(b, 3, len(idx), p, p).permute(0, 2, 1, 3, 4)
        return ((out - mean) / std).to(torch.bfloat16)
    return run


def bench_batch(batch, reps, size=1024, executor="cuda"):
    """Issue 25's second figure: a batch of `batch` device-resident size x size frames with
    per-image fixations -> bf16 clip tokens, pxvm (one tokens_batch) vs the PyTorch path."""
    import torch
    dev = "cuda" if executor == "cuda" else "cpu"
    plan = json.load(open(os.path.join(ROOT, "programs", "logpolar.json")))
    plan.update({"image": [size, size], "fixation": "relative"})
    prog = pxvm.Program.from_plan(plan, "logpolar-relative-%d" % size)
    r = pxvm.Runner(prog, executor=executor)
    gen = torch.Generator(device="cpu").manual_seed(25)
    frames = torch.randint(0, 256, (batch, size, size, 4), dtype=torch.uint8, generator=gen).to(dev)
    fix = (0.3 + 0.4 * torch.rand((batch, 2), dtype=torch.float64, generator=gen)).to(dev)
    s = prog.slot("atlas")
    out = torch.empty((batch, s.patch_count, 3, s.patch_h, s.patch_w), dtype=torch.bfloat16, device=dev)

    def pxvm_batch():
        r.tokens_batch(frames, fixations=fix, dtype="bfloat16", normalize="clip", out=out, fixation_clamp=True)

    pxvm_batch()
    geom = r.geometry(batch=batch, exact=True, device="cuda" if dev == "cuda" else None)
    geom = torch.as_tensor(geom, device=dev)
    user = torch_tokens_path(prog, geom, fix)
    ref = user(frames, fix)
    # not the same bytes (other filters: bilinear on an avg-pool pyramid against the plan's own
    # sampling), the same tokens: the mean |difference| in normalized units says how near
    diff = float((ref.float() - out.float()).abs().mean())
    sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
    res = {}
    for name, fn in (("pxvm", pxvm_batch), ("torch", lambda: user(frames, fix))) * 2:  # alternated, second kept
        fn()
        sync()
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        sync()
        res[name] = reps * batch / (time.perf_counter() - t0)
    return {"batch": batch, "reps": reps, "frame": "%dx%d RGBA uint8 on %s" % (size, size, dev),
            "program": "logpolar, fixation relative, %d tokens of %dx%d" % (s.patch_count, s.patch_w, s.patch_h),
            "tokens": "B x %d x 3 x %d x %d bfloat16, clip" % (s.patch_count, s.patch_h, s.patch_w),
            "pxvm": "Runner.tokens_batch(frames, fixations=(B, 2) on the device, out=, fixation_clamp=True)",
            "torch": "float frames, avg_pool2d pyramid, grid_sample per level at the same centres/steps, "
                     "(x - mean) / std, .to(bfloat16)",
            "images_per_s": {k2: round(v2, 1) for k2, v2 in res.items()},
            "pxvm_over_torch": round(res["pxvm"] / res["torch"], 3),
            "mean_abs_diff_normalized": round(diff, 4)}


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
    ap.add_argument("--batch", type=int, default=32, help="--cuda: the batch of the tokens_batch figure")
    ap.add_argument("--batch-reps", type=int, default=50, help="--cuda: batches timed per round")
    ap.add_argument("--json")
    ap.add_argument("--md")
    a = ap.parse_args()
    if a.cuda:
        res = bench_cuda(a.frames)
        res["batch"] = bench_batch(a.batch, a.batch_reps)
    else:
        res = bench_cpu(a.rounds, a.reps, a.threads)
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
