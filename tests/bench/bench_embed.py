"""EMBED against PyTorch's int8 and bf16 GEMMs, same shapes, same run (issue 43's numbers).

    PXVM_LIB=$PWD/build/libpxvm.so.1 python3 tests/bench/bench_embed.py [--device cpu|cuda|both]
        [--batch 32] [--tokens 273] [--d 768,1024] [--reps 50] [--threads N] [--out tests/bench/results/embed-NAME]

Shape: batch x tokens patches of 16x16x3 (K = 768) into D features: M = batch * tokens rows.
pxvm: a program whose input is the atlas (17x17 patches of 16x16, 273 used) and whose one
instruction is EMBED (int8 weights, bf16 out). On the GPU, EMBED's time is its kernels' own device
time per run (torch.profiler over `reps` runs: pxvm's staging and GEMM kernels, torch's GEMM
kernels), which the ratios use; beside it the wall time of a whole run of the batch with and
without EMBED (CUDA tensors in, device to device, host synchronisation included: the run's fixed
costs, which a difference of the two would bury in the host's noise). On the CPU, EMBED's time is
the run of that program minus the run of the same program without EMBED (same slots: binding the
batch of inputs, no output written), medians of `reps` runs. Baselines on the same device and shapes: torch._int_mm
(int8 x int8 -> int32) and torch.nn.functional.linear in bf16 (GPU) or float32 (CPU), and, on the
CPU, PyTorch's dynamic int8 Linear (torch.ao) where present. On the CPU both sides run on the same
threads: pxvm's Runner(threads=N) and torch.set_num_threads(N), N = --threads (default: every
core; some builds of torch start with 1). Reports TOPS (2*M*N*K / time), the
fraction of the H200's dense int8 tensor-core peak (1,979 TOPS) and of its memory bandwidth
(4.8 TB/s: bytes = tokens M*K + weights N*K + outputs M*N*2) on the GPU. Writes NAME.json and
NAME.md.
"""
import argparse
import json
import os
import platform
import re
import statistics
import sys
import time

import numpy as np
import torch

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))
import pxvm  # noqa: E402
import pxvm.embed as E  # noqa: E402

H200_INT8_TOPS = 1979.0
H200_BW = 4.8e12


def atlas_program(q, count, with_embed):
    cols = 17
    text = (f".width {max(64, q.d, q.k // 4)}\n.slot atlas input {cols * 16}x{cols * 16} patches=16x16x{count}\n"
            "HALT\n")
    if with_embed:
        return E.attach(text, q, slot="atlas", mode="bf16")
    nb = (q.d * 2 + 3) // 4  # the same output slot, never written
    return pxvm.Program.assemble(text.replace("HALT\n", f".slot emb output {nb}x{count}\nHALT\n"))


def timed(fn, reps, sync):
    fn()
    sync()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        sync()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def kernel_us(fn, reps):
    """Device time per call of each CUDA kernel fn launches (torch.profiler, CUPTI: pxvm's kernels
    and graph replays included), as {name: us}: the kernels themselves, without the host's share."""
    from torch.profiler import ProfilerActivity, profile
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            fn()
        torch.cuda.synchronize()
    out = {}
    for e in prof.key_averages():
        t = getattr(e, "self_device_time_total", None)
        if t is None:
            t = getattr(e, "self_cuda_time_total", 0)
        if t:
            out[e.key] = out.get(e.key, 0.0) + t / reps
    return out


def cpu_embed_paths():
    """The CPU EMBED paths (PXVM_CPU_EMBED values) this CPU's flags claim, widest first. AMX also
    needs the kernel's leave: where it is refused the library takes the next path, and the "amx"
    row then times that one."""
    try:
        flags = set(next(l for l in open("/proc/cpuinfo") if l.startswith("flags")).split(":")[1].split())
    except (OSError, StopIteration):
        flags = set()
    paths = [("amx", {"amx_int8", "amx_tile", "avx512_vnni", "avx512bw"}), ("vnni", {"avx512_vnni", "avx512bw"}),
             ("avx2", {"avx2"}), ("portable", set())]
    return [p for p, need in paths if need <= flags]


def bench_device(dev, args, d):
    m, k = args.batch * args.tokens, 768
    rng = np.random.default_rng(0)
    q = E.quantize(rng.standard_normal((d, k)) * 0.02, rng.standard_normal(d) * 0.1, input_scale=1 / 255)
    imgs = rng.integers(0, 256, (args.batch, 272, 272, 4), dtype=np.uint8)
    sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
    batch_in = torch.from_numpy(imgs).to(dev) if dev == "cuda" else imgs
    res = {"device": dev, "m": m, "n": d, "k": k}
    times = {}
    for name, with_embed in (("pxvm_program", True), ("pxvm_no_embed", False)):
        r = pxvm.Runner(atlas_program(q, args.tokens, with_embed), executor=dev, threads=args.threads)
        times[name] = timed(lambda: r.run_batch(batch_in), args.reps, sync)
        if dev == "cuda" and with_embed:  # the EMBED kernels' own device time
            ks = kernel_us(lambda: r.run_batch(batch_in), args.reps)
            res["pxvm_kernels_us"] = {n: round(t, 2) for n, t in ks.items()}
            res["pxvm_embed_kernels_s"] = sum(t for n, t in ks.items() if "embed" in n) * 1e-6
    # CPU: EMBED's time is the run's minus the run without it (milliseconds: well above the noise);
    # CUDA: the kernels' own time (a difference of two walls of ~100 us is within the host's noise)
    res["pxvm_embed_s"] = res["pxvm_embed_kernels_s"] if dev == "cuda" else \
        max(times["pxvm_program"] - times["pxvm_no_embed"], 1e-9)
    if dev == "cpu":  # each path the CPU's flags claim, named as set (PXVM_CPU_EMBED; the same bytes),
        # in 3 alternated rounds with the run without EMBED (this host's noise moves a lone figure 2x)
        r = pxvm.Runner(atlas_program(q, args.tokens, True), executor=dev, threads=args.threads)
        r0 = pxvm.Runner(atlas_program(q, args.tokens, False), executor=dev, threads=args.threads)
        paths, rounds = cpu_embed_paths(), {}
        for _ in range(3):
            for path in paths + [None]:
                if path:
                    os.environ["PXVM_CPU_EMBED"] = path
                try:
                    t = timed(lambda: (r if path else r0).run_batch(batch_in), max(3, args.reps // 3), sync)
                finally:
                    os.environ.pop("PXVM_CPU_EMBED", None)
                rounds.setdefault(path, []).append(t)
        base = statistics.median(rounds[None])
        res["pxvm_embed_paths_s"] = {p: max(statistics.median(rounds[p]) - base, 1e-9) for p in paths}
    res.update({f"{n}_s": v for n, v in times.items()})
    if dev == "cuda":  # the dp4a kernel too (PXVM_CUDA_EMBED=dp4a; the default is mma.sync)
        os.environ["PXVM_CUDA_EMBED"] = "dp4a"
        r = pxvm.Runner(atlas_program(q, args.tokens, True), executor=dev)
        ks = kernel_us(lambda: r.run_batch(batch_in), args.reps)
        res["pxvm_embed_dp4a_s"] = sum(t for n, t in ks.items() if "embed" in n) * 1e-6
        del os.environ["PXVM_CUDA_EMBED"]
        r_check = pxvm.Runner(atlas_program(q, args.tokens, True), executor="cpu")
        one = imgs[:1]
        res["cpu_equals_cuda"] = bool(np.array_equal(np.asarray(r_check.run_batch(one)["emb"]),
                                                     pxvm.Runner(atlas_program(q, args.tokens, True), executor=dev)
                                                     .run_batch(one)["emb"]))
    a8 = torch.randint(-128, 128, (m, k), dtype=torch.int8, device=dev)
    b8 = torch.randint(-128, 128, (k, d), dtype=torch.int8, device=dev)
    try:
        res["torch_int_mm_s"] = timed(lambda: torch._int_mm(a8, b8), args.reps, sync)
        if dev == "cuda":
            res["torch_int_mm_kernels_s"] = sum(kernel_us(lambda: torch._int_mm(a8, b8), args.reps).values()) * 1e-6
    except Exception as e:  # noqa: BLE001 (not every build has it on every device)
        res["torch_int_mm_error"] = str(e).splitlines()[0]
    fdt = torch.bfloat16 if dev == "cuda" else torch.float32
    af, wf = a8.to(fdt), b8.t().contiguous().to(fdt)
    res["torch_linear_s"] = timed(lambda: torch.nn.functional.linear(af, wf), args.reps, sync)
    res["torch_linear_dtype"] = str(fdt)
    if dev == "cuda":
        res["torch_linear_kernels_s"] = sum(kernel_us(lambda: torch.nn.functional.linear(af, wf), args.reps).values()) * 1e-6
    if dev == "cpu":
        try:
            lin = torch.ao.nn.quantized.dynamic.Linear(k, d)
            x = af.float()
            res["torch_dynamic_int8_linear_s"] = timed(lambda: lin(x), args.reps, sync)
        except Exception as e:  # noqa: BLE001
            res["torch_dynamic_int8_linear_error"] = str(e).splitlines()[0]
    ops = 2.0 * m * d * k
    for key in [x for x in res if x.endswith("_s") and isinstance(res[x], float)
                and x not in ("pxvm_program_s", "pxvm_no_embed_s", "pxvm_embed_kernels_s")]:
        res[key[:-2] + "_tops"] = ops / res[key] / 1e12
    if dev == "cuda":
        t = res.get("pxvm_embed_kernels_s", res["pxvm_embed_s"])
        res["pxvm_fraction_of_int8_peak"] = ops / t / 1e12 / H200_INT8_TOPS
        res["pxvm_fraction_of_bandwidth"] = (m * k + d * k + m * d * 2) / t / H200_BW
        res["gpu"] = torch.cuda.get_device_name()
    return res


def markdown(rows):
    out = ["| device | M x K -> N | EMBED (pxvm) | torch._int_mm | torch linear | other | EMBED / _int_mm | EMBED / linear | "
           "peak, bandwidth |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        def f(key):
            if key + "_s" not in r:
                return r.get(key + "_error", "-")
            s = f"{r[key + '_s'] * 1e6:.1f} us ({r[key + '_tops']:.3g} TOPS)"
            if key + "_kernels_s" in r:  # the device's own time (profiler), then the wall time
                s = f"kernels {r[key + '_kernels_s'] * 1e6:.1f} us ({r[key + '_kernels_tops']:.3g} TOPS); wall {s}"
            return s
        paths = ", ".join(f"{p} {t * 1e3:.2f} ms" for p, t in r.get("pxvm_embed_paths_s", {}).items())
        other = f("torch_dynamic_int8_linear") + (f"; pxvm by PXVM_CPU_EMBED: {paths}" if paths else "") \
            if r["device"] == "cpu" else \
            f"dp4a kernel {f('pxvm_embed_dp4a')}; CPU == CUDA bytes: {r.get('cpu_equals_cuda')}"
        if r["device"] == "cpu":
            pxvm_cell = f("pxvm_embed")
        else:  # the kernels, each; then the whole run's wall time, with and without EMBED
            parts = ", ".join(f"{'stage' if 'stage' in n else 'GEMM' if 'gemm' in n else n} {t:.1f}"
                              for n, t in r["pxvm_kernels_us"].items() if "embed" in n)
            pxvm_cell = (f"kernels {r['pxvm_embed_s'] * 1e6:.1f} us ({r['pxvm_embed_tops']:.3g} TOPS: {parts}); "
                         f"a run of the batch {r['pxvm_program_s'] * 1e6:.0f} us wall, "
                         f"{r['pxvm_no_embed_s'] * 1e6:.0f} us without EMBED")
        ratio = f"{r['torch_int_mm_s'] / r['pxvm_embed_s']:.2f}x" if "torch_int_mm_s" in r else "-"
        ratio_linear = f"{r['torch_linear_s'] / r['pxvm_embed_s']:.2f}x"
        if "torch_int_mm_kernels_s" in r:  # GPU: the kernels' own times
            ratio = f"kernels {r['torch_int_mm_kernels_s'] / r['pxvm_embed_s']:.2f}x"
            ratio_linear = f"kernels {r['torch_linear_kernels_s'] / r['pxvm_embed_s']:.2f}x"
        peak = (f"{100 * r['pxvm_fraction_of_int8_peak']:.1f}% of 1,979 TOPS, {100 * r['pxvm_fraction_of_bandwidth']:.1f}% "
                "of 4.8 TB/s") if r["device"] == "cuda" else "-"
        out.append(f"| {r.get('gpu', r['device'])} | {r['m']} x {r['k']} -> {r['n']} | {pxvm_cell} | {f('torch_int_mm')} | "
                   f"{f('torch_linear')} ({r['torch_linear_dtype']}) | {other} | {ratio} | {ratio_linear} | {peak} |")
    return "\n".join(out) + "\n"


def driver_version():
    import subprocess
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20).stdout.split()
        return out[0] if out else None
    except (OSError, subprocess.SubprocessError):
        return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="both", choices=["cpu", "cuda", "both"])
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--tokens", type=int, default=273)
    ap.add_argument("--d", default="768,1024")
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--threads", type=int, default=os.cpu_count(), help="CPU threads of pxvm and torch (default: every core)")
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "bench", "results", "embed"))
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    devs = ["cpu", "cuda"] if args.device == "both" else [args.device]
    if "cuda" in devs and not torch.cuda.is_available():
        if args.device == "cuda":
            sys.exit("bench_embed: no CUDA device")
        devs.remove("cuda")
    load = os.getloadavg()[0]  # other processes on the cores make the CPU rows slower: say so
    rows = [bench_device(dev, args, int(d)) for dev in devs for d in args.d.split(",")]
    meta = {"date": time.strftime("%Y-%m-%dT%H:%MZ", time.gmtime()), "torch": torch.__version__,
            "host": platform.node(), "cpus": os.cpu_count(), "batch": args.batch, "tokens": args.tokens,
            "reps": args.reps, "driver": driver_version(), "threads": args.threads, "loadavg_1min_at_start": load,
            "torch_threads": torch.get_num_threads(),
            "torch_config": re.findall(r"BLAS_INFO=\w+|CPU capability usage: \w+|MKL-DNN v[\d.]+|oneDNN v[\d.]+|OpenMP \d+",
                                       torch.__config__.show())}
    with open(args.out + ".json", "w") as f:
        json.dump({"meta": meta, "rows": rows}, f, indent=1)
    table = markdown(rows)
    with open(args.out + ".md", "w") as f:
        drv = f", driver {meta['driver']}" if meta["driver"] else ""
        f.write(f"EMBED vs PyTorch, {meta['date']}, torch {meta['torch']}{drv}, {meta['cpus']} CPUs, {args.threads} threads, "
                f"load average {load:.1f} at the start (tests/bench/bench_embed.py; medians of {args.reps})\n\n" + table)
    print(table)


if __name__ == "__main__":
    main()
