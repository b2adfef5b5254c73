"""Fused EMBED against unfused, the same program and batch on the GPU (docs/embed.md, "Fused EMBED").

    PXVM_LIB=$PWD/build/libpxvm.so.1 python3 tests/bench/bench_fuse_embed.py [--batch 32] [--d 768]
        [--reps 50] [--out tests/bench/results/fuse-embed-NAME]

The program: foveate273 with its atlas a scratch slot, then EMBED of its 273 tokens (16x16x3, K =
768) into D features, bf16 out; a batch of random 451x300 images as one CUDA tensor. Two runners of
it on the cuda executor, one with fuse_embed=True. For each: the device time per run of every
kernel (torch.profiler over `reps` runs: the fetch kernel, the staging kernel, the GEMM, the
memset of the staged rows...) and the wall time of a run (median, host clock with the
synchronisation). EMBED's own kernels (staging, GEMM, a clear of the staged rows) against the
baselines of bench_embed.py at the same M x K -> N, measured in this run: torch._int_mm and
torch.nn.functional.linear in bf16. Checks first that the fused EMBED's bytes are the unfused runner's and the CPU
executor's (item 0). Writes NAME.json and NAME.md.
"""
import argparse
import datetime
import json
import os
import sys

import numpy as np
import torch

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))
import pxvm  # noqa: E402
import pxvm.embed as E  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_embed import kernel_us as kernels_us  # noqa: E402  (the profiler's kernels, {name: us})
from bench_embed import timed  # noqa: E402
from bench_embed import driver_version  # noqa: E402


def wall(fn, reps):
    return timed(fn, reps, torch.cuda.synchronize)


def program(d):
    rng = np.random.default_rng(0)
    q = E.quantize(rng.standard_normal((d, 768)) * 0.02, rng.standard_normal(d) * 0.1, input_scale=1 / 255)
    return E.attach(pxvm.Program.load(pxvm.programs.path("foveate273")), q, mode="bf16", atlas="scratch")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--d", type=int, default=768)
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "bench", "results", "fuse-embed"))
    args = ap.parse_args()
    prog = program(args.d)
    rng = np.random.default_rng(1)
    imgs = rng.integers(0, 256, (args.batch, 300, 451, 3), dtype=np.uint8)
    batch = torch.from_numpy(imgs).to("cuda")
    plain = pxvm.Runner(prog, executor="cuda")
    fused = pxvm.Runner(prog, executor="cuda", fuse_embed=True)
    cpu = pxvm.Runner(prog, executor="cpu")
    a = np.asarray(plain.run_batch(batch)["emb"].cpu())
    b = np.asarray(fused.run_batch(batch)["emb"].cpu())
    c = np.asarray(cpu.run_batch(imgs[:1])["emb"])
    res = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%MZ"), "driver": driver_version(),
           "torch": torch.__version__, "batch": args.batch, "tokens": 273, "k": 768, "d": args.d, "gpu": torch.cuda.get_device_name(),
           "fused_equals_unfused": bool(np.array_equal(a, b)), "fused_equals_cpu_item0": bool(np.array_equal(b[:1], c))}
    for name, r in (("unfused", plain), ("fused", fused)):
        ks = kernels_us(lambda: r.run_batch(batch), args.reps)
        res[name] = {"kernels_us": {k: round(v, 2) for k, v in sorted(ks.items(), key=lambda kv: -kv[1])},
                     "device_us": round(sum(ks.values()), 2),
                     "wall_us": round(wall(lambda: r.run_batch(batch), args.reps) * 1e6, 1)}
    m = args.batch * 273
    a8 = torch.randint(-128, 128, (m, 768), dtype=torch.int8, device="cuda")
    b8 = torch.randint(-128, 128, (768, args.d), dtype=torch.int8, device="cuda")
    af, wf = a8.to(torch.bfloat16), b8.t().contiguous().to(torch.bfloat16)
    res["torch_int_mm_kernels_us"] = round(sum(kernels_us(lambda: torch._int_mm(a8, b8), args.reps).values()), 2)
    res["torch_linear_bf16_kernels_us"] = round(sum(kernels_us(lambda: torch.nn.functional.linear(af, wf),
                                                                 args.reps).values()), 2)
    for name in ("unfused", "fused"):  # EMBED's kernels: its staging and GEMM, and the staged rows' clear
        ks = res[name]["kernels_us"]
        res[name]["embed_us"] = round(sum(v for k, v in ks.items() if "embed" in k or k.startswith("memset")), 2)
        res[name]["embed_over_int_mm"] = round(res["torch_int_mm_kernels_us"] / res[name]["embed_us"], 2)
        res[name]["embed_over_linear_bf16"] = round(res["torch_linear_bf16_kernels_us"] / res[name]["embed_us"], 2)
    lines = [f"# Fused EMBED on {res['gpu']}: {args.batch} x 273 tokens x 768 -> {args.d}, bf16", "",
             f"{res['date']}, driver {res['driver']}, torch {res['torch']}; medians of {args.reps}", "",
             f"fused == unfused: {res['fused_equals_unfused']}; fused == cpu (item 0): {res['fused_equals_cpu_item0']}", "",
             "| | device us per run (all kernels) | wall us per run |", "|---|---|---|"]
    for name in ("unfused", "fused"):
        lines.append(f"| {name} | {res[name]['device_us']} | {res[name]['wall_us']} |")
    lines += ["", f"Same run, kernels at {m} x 768 -> {args.d}: torch._int_mm {res['torch_int_mm_kernels_us']} us, "
              f"bf16 linear {res['torch_linear_bf16_kernels_us']} us", "",
              "| | EMBED's kernels us | _int_mm / EMBED | bf16 linear / EMBED |", "|---|---|---|---|"]
    for name in ("unfused", "fused"):
        r = res[name]
        lines.append(f"| {name} | {r['embed_us']} | {r['embed_over_int_mm']}x | {r['embed_over_linear_bf16']}x |")
    for name in ("unfused", "fused"):
        lines += ["", f"{name}:", ""] + [f"- {k}: {v} us" for k, v in res[name]["kernels_us"].items()]
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out + ".json", "w") as f:
        json.dump(res, f, indent=1)
    with open(args.out + ".md", "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0 if res["fused_equals_unfused"] and res["fused_equals_cpu_item0"] else 1


if __name__ == "__main__":
    sys.exit(main())
