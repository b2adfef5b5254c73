#!/usr/bin/env python3
"""pxvm.autograd's backward against PyTorch's grid_sample backward, every figure from the same run.

The work (issue 43, point 3): 273 patches of 16x16 from a 1024x1024 RGB image, foveate273's plan
at that size (programs/foveate273.json with "image": [1024, 1024]), forward + backward to the
image (a float tensor with requires_grad), the upstream gradient fixed.

- pxvm: pxvm.autograd.tokens(runner, image) (the image rounded to uint8, the VM's run and token
  read; the plan, built at the first call, is kept on the runner: foveate273 takes no fixation,
  so its geometry is the program's) then .backward(g): the fixed-order transpose
  (docs/autograd.md);
- grid_sample: F.grid_sample(image, grid) at the same 273 x 16 x 16 level-0 positions as the VM's
  (from its token geometry: bilinear on level 0, align_corners=False, border), float32, then
  .backward(g): PyTorch's CUDA backward adds into the image's gradient with atomics;
- grid_sample trilinear: what a user writes for the same footprints: an avg_pool2d pyramid of
  the levels the plan reads, grid_sample on each, blended by the fractional LODs, then backward.

Times are medians of --reps rounds (CUDA: synchronised around each round, host wall time).
Launches: the torch operations that compute (views and empty tensors not counted, a
TorchDispatchMode) of pxvm's forward (the quantization; the VM's run is one call into the library)
and of its backward (Plan.transpose_hwc, the plan's stages), and on CUDA the GPU activities that
torch.profiler sees in one forward + backward of pxvm and of grid_sample.
Determinism: --repeat backward passes of the same forward and g; the count of gradient elements
that differ from the first pass's (summed over the passes) and the passes that differ. With
--cuda (the default where a GPU is), the CPU executor's path is run once too and its gradient
compared with the GPU's (elements that differ: 0 expected).

    python3 tests/bench/bench_backward.py [--cpu] [--reps 50] [--repeat 10] [--json F] [--md F] [--profile F]
"""
import argparse
import json
import os
import platform
import statistics
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import pxvm  # noqa: E402
from pxvm import autograd as A  # noqa: E402


def program(size):
    d = json.load(open(os.path.join(ROOT, "programs", "foveate273.json")))
    d["image"] = [size, size]
    return pxvm.Program.from_plan(d)


def image(size, dev):
    yy, xx = np.mgrid[0:size, 0:size]
    rng = np.random.default_rng(43)
    im = 128 + 60 * np.sin(xx / 17.0) * np.cos(yy / 13.0) + rng.normal(0, 20, (size, size))
    im = np.clip(np.stack([im, im[::-1], im[:, ::-1]], -1), 0, 255)
    return torch.from_numpy(im).float().to(dev)


def sync(dev):
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def median_us(fn, dev, reps, warm=5):
    for _ in range(warm):
        fn()
    ts = []
    for _ in range(reps):
        sync(dev)
        t0 = time.perf_counter()
        fn()
        sync(dev)
        ts.append((time.perf_counter() - t0) * 1e6)
    return statistics.median(ts)


def positions(geom, size):
    """The VM's level-0 sample positions (Q16, SPEC section 3) as grid_sample's normalized grid."""
    g = geom.astype(np.float64)
    i = np.arange(16)
    u = g[:, 0:1] + np.floor((2 * i[None] - 15) * g[:, 2:3] / 2)
    v = g[:, 1:2] + np.floor((2 * i[None] - 15) * g[:, 3:4] / 2)
    gx = np.broadcast_to((2 * (u / 65536) / size - 1)[:, None, :], (len(g), 16, 16))
    gy = np.broadcast_to((2 * (v / 65536) / size - 1)[:, :, None], (len(g), 16, 16))
    return np.stack([gx, gy], -1).reshape(1, len(g) * 16, 16, 2)


def count_ops(fn):
    """The torch operations fn runs that compute (not views, not empty tensors): on a GPU, each
    one kernel launch at least."""
    from torch.utils._python_dispatch import TorchDispatchMode
    free = {"empty", "empty_strided", "empty_like", "new_empty", "new_empty_strided", "lift_fresh", "is_same_size"}
    ops = []

    class Count(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            view = any(r.alias_info is not None and not r.alias_info.is_write for r in func._schema.returns)
            if not view and func.overloadpacket.__name__ not in free:
                ops.append(func.overloadpacket.__name__)
            return func(*args, **(kwargs or {}))

    with Count():
        fn()
    return ops


def cuda_kernels(fn, dev):
    """The GPU activities (kernels, copies, memsets) torch.profiler records in one call of fn
    (None off CUDA or if the profiler cannot say)."""
    if dev.type != "cuda":
        return None
    try:
        from torch.profiler import ProfilerActivity, profile
        sync(dev)
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            fn()
            sync(dev)
        return sum(1 for e in prof.events() if str(getattr(e, "device_type", "")).endswith("CUDA"))
    except Exception as e:  # the figure is informative: the bench goes on without it
        print("cuda_kernels: %s" % e, file=sys.stderr)
        return None


def profile_table(fn, dev, rows=30):
    """torch.profiler's table of one call of fn (after a warm call), sorted by GPU time, and the
    sum of the GPU activities' times against the call's wall time: where the time goes."""
    from torch.profiler import ProfilerActivity, profile
    fn()
    sync(dev)
    t0 = time.perf_counter()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        fn()
        sync(dev)
    wall = (time.perf_counter() - t0) * 1e6
    gpu = [e for e in prof.events() if str(getattr(e, "device_type", "")).endswith("CUDA")]
    busy = sum(e.time_range.elapsed_us() for e in gpu)
    head = "GPU activities %d, their time %.1f us, the call's wall time under the profiler %.1f us" % (
        len(gpu), busy, wall)
    return head + "\n" + prof.key_averages().table(sort_by="device_time_total", row_limit=rows)


def determinism(step, repeat):
    """(elements that differ from the first pass, summed over the others; passes that differ)."""
    first = step()
    diff = passes = 0
    for _ in range(repeat - 1):
        d = int((step() != first).sum().item())
        diff += d
        passes += d > 0
    return diff, passes


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cpu", action="store_true", help="the CPU executor and torch on the CPU")
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--json")
    ap.add_argument("--md")
    ap.add_argument("--profile", metavar="FILE", help="write torch.profiler's tables of one forward + backward")
    a = ap.parse_args()
    cuda = not a.cpu and torch.cuda.is_available()
    dev = torch.device("cuda" if cuda else "cpu")
    prog = program(a.size)
    runner = pxvm.Runner(prog, executor="cuda" if cuda else "cpu")
    x0 = image(a.size, dev)
    sync(dev)
    t0 = time.perf_counter()
    t = A.tokens(runner, x0)                     # the first call builds the plan (host, NumPy)
    sync(dev)
    first_ms = (time.perf_counter() - t0) * 1e3
    geom = runner.geometry(exact=True)[0]
    g = torch.randn(t.shape, generator=torch.Generator().manual_seed(1)).to(dev)
    n = t.shape[0]
    grid = torch.from_numpy(positions(geom, a.size)).float().to(dev)
    lod = geom[:, 4] / 256.0
    levels = int(np.floor(lod.max())) + 2
    xn = x0.permute(2, 0, 1)[None].contiguous()                      # (1, 3, H, W) for torch
    g_gs = g.permute(1, 0, 2, 3).reshape(1, 3, n * 16, 16)           # grid_sample's output layout

    def pxvm_step():
        x = x0.clone().requires_grad_(True)
        A.tokens(runner, x).backward(g)
        return x.grad

    def pxvm_graph_step():
        x = x0.clone().requires_grad_(True)
        A.tokens(runner, x, cuda_graph=True).backward(g)
        return x.grad

    def pxvm_fwd():
        A.tokens(runner, x0.clone().requires_grad_(True))

    def gs_step():
        x = xn.clone().requires_grad_(True)
        F.grid_sample(x, grid, mode="bilinear", padding_mode="border", align_corners=False).backward(g_gs)
        return x.grad

    def gs_fwd():
        F.grid_sample(xn.clone().requires_grad_(True), grid, mode="bilinear", padding_mode="border",
                      align_corners=False)

    # trilinear: the same centres and steps, one grid per level read, blended by the LOD
    lod_t = torch.from_numpy(lod).float().to(dev)
    l0 = lod_t.floor().long()
    frac = (lod_t - lod_t.floor())[:, None, None]
    ar = torch.arange(n, device=dev)

    def tri_step():
        x = xn.clone().requires_grad_(True)
        pyr = [x]
        while len(pyr) < levels:
            pyr.append(F.avg_pool2d(pyr[-1], 2))
        s = torch.stack([F.grid_sample(L, grid, mode="bilinear", padding_mode="border", align_corners=False)
                         .reshape(3, n, 16, 16).permute(1, 0, 2, 3) for L in pyr])
        out = s[l0, ar] * (1 - frac[:, None]) + s[(l0 + 1).clamp(max=levels - 1), ar] * frac[:, None]
        out.backward(g)
        return x.grad

    r = {"device": torch.cuda.get_device_name(dev) if cuda else platform.processor() or platform.machine(),
         "torch": torch.__version__, "pxvm": pxvm.library_version, "size": a.size, "patches": n,
         "levels_read": levels, "reps": a.reps, "repeat": a.repeat, "pxvm_first_call_ms": first_ms,
         "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    plan = A._cached_plan(runner, (a.size, a.size), None, None, "clip", "static")
    plan.transpose_hwc(g, torch.float32)                          # its tables on the device once
    xq = x0.clone().requires_grad_(True)
    fwd_ops = count_ops(lambda: A.tokens(runner, xq))
    bwd_ops = count_ops(lambda: plan.transpose_hwc(g, torch.float32))
    stages, table_bytes = plan.describe()
    r["pxvm_forward_torch_ops"], r["pxvm_backward_torch_ops"] = len(fwd_ops), len(bwd_ops)
    r["pxvm_backward_ops"] = bwd_ops
    r["pxvm_stages"] = ["K=%d rows=%d%s %s" % (k, n, " weighted" if w else "", red) for _, k, n, w, red in stages]
    r["pxvm_chunk_widths"] = plan.parts.get("chunk_widths")
    r["pxvm_table_mib"] = table_bytes / 2 ** 20
    r["pxvm_cuda_kernels_forward_backward"] = cuda_kernels(pxvm_step, dev)
    r["grid_sample_cuda_kernels_forward_backward"] = cuda_kernels(gs_step, dev)
    if a.profile and cuda:
        with open(a.profile, "w") as f:
            for name, fn in (("pxvm forward", pxvm_fwd), ("pxvm forward + backward, graph", pxvm_graph_step),
                             ("grid_sample forward + backward", gs_step)):
                f.write("== %s\n%s\n" % (name, profile_table(fn, dev)))
    r["pxvm_forward_us"] = median_us(pxvm_fwd, dev, a.reps)
    r["pxvm_forward_backward_us"] = median_us(pxvm_step, dev, a.reps)
    r["grid_sample_forward_us"] = median_us(gs_fwd, dev, a.reps)
    r["grid_sample_forward_backward_us"] = median_us(gs_step, dev, a.reps)
    r["trilinear_forward_backward_us"] = median_us(tri_step, dev, a.reps)
    r["pxvm_differing_elements"], r["pxvm_differing_passes"] = determinism(pxvm_step, a.repeat)
    if cuda:  # the backward replayed as one CUDA graph (opt-in): the same bits, fewer launches
        try:
            r["pxvm_graph_forward_backward_us"] = median_us(pxvm_graph_step, dev, a.reps)
            r["pxvm_graph_differing_elements"], r["pxvm_graph_differing_passes"] = determinism(pxvm_graph_step,
                                                                                               a.repeat)
            r["pxvm_graph_vs_eager_differing"] = int((pxvm_graph_step() != pxvm_step()).sum().item())
            r["pxvm_graph_cuda_kernels_forward_backward"] = cuda_kernels(pxvm_graph_step, dev)
        except Exception as e:  # reported, not fatal: the eager rows stand
            r["pxvm_graph_error"] = "%s: %s" % (type(e).__name__, e)
            print("cuda_graph: %s" % r["pxvm_graph_error"], file=sys.stderr)
    # where pxvm's forward + backward goes, part by part (each synchronised alone), and the floor of
    # any Python autograd.Function: one copy each way, the autograd engine's calls into Python
    u8 = x0.round().clamp_(0, 255).to(torch.uint8)

    class Copy(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, g):
            return g.clone()

    def floor_step():
        x = x0.clone().requires_grad_(True)
        Copy.apply(x).backward(x0)
        return x.grad

    r["parts_us"] = {
        "quantize (round, clamp, uint8)": median_us(lambda: x0.round().clamp_(0, 255).to(torch.uint8), dev, a.reps),
        "runner.tokens of the uint8 image (the VM's run and read)":
            median_us(lambda: runner.tokens(u8, dtype="float32", layout="nchw"), dev, a.reps),
        "Plan.transpose_hwc (the backward's launches)": median_us(lambda: plan.transpose_hwc(g, torch.float32),
                                                                  dev, a.reps),
        "a Python autograd.Function copying each way, forward + backward": median_us(floor_step, dev, a.reps)}
    if cuda and "pxvm_graph_error" not in r:   # a capture that failed is reported above, not timed
        r["parts_us"]["Plan.transpose_graphed (the backward as one graph)"] = median_us(
            lambda: plan.transpose_graphed(g, torch.float32), dev, a.reps)
    r["grid_sample_differing_elements"], r["grid_sample_differing_passes"] = determinism(gs_step, a.repeat)
    r["trilinear_differing_elements"], r["trilinear_differing_passes"] = determinism(tri_step, a.repeat)
    r["gradient_elements"] = int(x0.numel())
    if cuda:
        rc = pxvm.Runner(prog, executor="cpu")
        xc = x0.cpu().requires_grad_(True)
        tc = A.tokens(rc, xc)
        tc.backward(g.cpu())
        r["cpu_vs_cuda_token_differing"] = int((tc != A.tokens(runner, x0).cpu()).sum().item())
        r["cpu_vs_cuda_gradient_differing"] = int((xc.grad != pxvm_step().cpu()).sum().item())
    r["ratio_grid_sample_over_pxvm"] = r["grid_sample_forward_backward_us"] / r["pxvm_forward_backward_us"]
    md = ["| %s, %dx%d, %d patches 16x16, torch %s | forward us | forward + backward us | differing gradient "
          "elements over %d passes (passes) |" % (r["device"], a.size, a.size, n, r["torch"], a.repeat),
          "|---|---|---|---|",
          "| pxvm.autograd.tokens (VM forward, fixed-order transpose) | %.1f | %.1f | %d (%d) |" % (
              r["pxvm_forward_us"], r["pxvm_forward_backward_us"], r["pxvm_differing_elements"],
              r["pxvm_differing_passes"])]
    graphed = "pxvm_graph_forward_backward_us" in r
    if graphed:
        md.append("| pxvm.autograd.tokens, cuda_graph=True (the backward as one CUDA graph) | | %.1f | %d (%d) |" % (
            r["pxvm_graph_forward_backward_us"], r["pxvm_graph_differing_elements"], r["pxvm_graph_differing_passes"]))
    md += ["| grid_sample, level 0, same positions | %.1f | %.1f | %d (%d) |" % (
               r["grid_sample_forward_us"], r["grid_sample_forward_backward_us"], r["grid_sample_differing_elements"],
               r["grid_sample_differing_passes"]),
           "| avg_pool2d pyramid + grid_sample per level + LOD blend | | %.1f | %d (%d) |" % (
               r["trilinear_forward_backward_us"], r["trilinear_differing_elements"], r["trilinear_differing_passes"]),
           "",
           "grid_sample forward + backward / pxvm forward + backward = %.2f (target: >= 1). pxvm's first "
           "call, which builds the plan on the host: %.1f ms." % (r["ratio_grid_sample_over_pxvm"], first_ms),
           "pxvm's launches: forward %d torch ops + the VM's run, backward %d torch ops (%s); stages %s, "
           "chunk widths %s, tables %.1f MiB on the device." % (
               r["pxvm_forward_torch_ops"], r["pxvm_backward_torch_ops"], " ".join(bwd_ops),
               "; ".join(r["pxvm_stages"]), r["pxvm_chunk_widths"], r["pxvm_table_mib"])]
    if cuda:
        md.append("GPU activities (kernels, copies, memsets; torch.profiler) in one forward + backward: pxvm %s "
                  "(the VM's run included), grid_sample %s." % (
                      r["pxvm_cuda_kernels_forward_backward"], r["grid_sample_cuda_kernels_forward_backward"]))
        if graphed:
            md.append("cuda_graph=True: %d gradient elements differ from the eager backward's; grid_sample forward "
                      "+ backward / pxvm's with the graph = %.2f; GPU activities in one forward + backward %s." % (
                          r["pxvm_graph_vs_eager_differing"],
                          r["grid_sample_forward_backward_us"] / r["pxvm_graph_forward_backward_us"],
                          r["pxvm_graph_cuda_kernels_forward_backward"]))
        else:
            md.append("cuda_graph=True failed: %s" % r.get("pxvm_graph_error"))
        md.append("CPU executor vs CUDA: %d token values and %d gradient elements differ (of %d)." % (
            r["cpu_vs_cuda_token_differing"], r["cpu_vs_cuda_gradient_differing"], r["gradient_elements"]))
    md.append("Parts, each timed alone (synchronised; medians of %d): %s." % (
        a.reps, "; ".join("%s %.1f us" % kv for kv in r["parts_us"].items())))
    text = "\n".join(md)
    print(json.dumps(r, indent=1))
    print(text)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(r, f, indent=1)
    if a.md:
        with open(a.md, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
