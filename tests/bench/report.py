#!/usr/bin/env python3
"""Merges benchmark JSON into a results file and a markdown table with ratios and targets.

  report.py gpu PXVM_GPU.json TORCH.json OUT.json   (tests/bench/gpu-bench)
  report.py cpu PXVM_CPU.json OPENCV.json OUT.json  (make bench)
  report.py video-cpu OUT.json [key=value...] RUN.json...   (tests/bench/cpu-video-bench)

Every ratio is baseline time / pxvm time (> 1: pxvm is faster), from figures measured in the
same command on the same machine. Timing is never asserted anywhere; targets are reported."""
import datetime, json, re, sys

US = 1000.0


def by_size(doc):
    return {(s["w"], s["h"]): s for s in doc["sizes"]}


def fmt_ms(ms):
    return f"{ms * US:.1f} us" if ms < 1 else f"{ms:.3f} ms"


def gpu(pxvm, torch, out_path):
    P, T = by_size(pxvm), by_size(torch)
    rows, targets, sizes = [], [], []
    for key in P:
        p, t = P[key], T.get(key, {})
        w, h = key
        lvl0 = w * h * 4
        copy_bw = p["copy_bytes"] / (p["copy_d2d_ms"] / 1e3)
        pyr_traffic = p["pyramid_bytes"]  # reads level 0 once, writes levels >= 1 once
        pyr_bw = pyr_traffic / (p["pyramid_ms"] / 1e3)
        merged = dict(p)
        merged.update(t)
        merged["pyramid_gbps"] = pyr_bw / 1e9
        merged["copy_gbps"] = copy_bw / 1e9
        merged["pyramid_fraction_of_copy_bandwidth"] = pyr_bw / copy_bw
        ratios = {}
        for name, base in [("torch_pyramid_float_ms", "pyramid_ms"), ("torch_pyramid_u8_ms", "pyramid_ms"),
                           ("gl_generate_mipmap_ms", "pyramid_ms"), ("copy_d2d_ms", "pyramid_ms"),
                           ("torch_patches_grid_sample_ms", "patches_273_ms"),
                           ("torch_patches_loop_ms", "patches_273_ms"),
                           ("torch_pyramid5_and_grid_sample_ms", "program_graph_ms")]:
            if name in merged:
                ratios[f"{name} / {base}"] = merged[name] / merged[base]
        merged["ratios"] = ratios
        sizes.append(merged)
        label = f"{w}x{h}"
        rows.append(f"| {label} | full pyramid ({p['levels']} levels) | {fmt_ms(p['pyramid_ms'])} "
                    f"| PyTorch float {fmt_ms(t.get('torch_pyramid_float_ms', float('nan')))} "
                    f"({t.get('torch_pyramid_float_ms', float('nan')) / p['pyramid_ms']:.1f}x), "
                    f"PyTorch from uint8 {fmt_ms(t.get('torch_pyramid_u8_ms', float('nan')))} "
                    f"({t.get('torch_pyramid_u8_ms', float('nan')) / p['pyramid_ms']:.1f}x), "
                    f"glGenerateMipmap {fmt_ms(p['gl_generate_mipmap_ms'])} ({p['gl_generate_mipmap_ms'] / p['pyramid_ms']:.1f}x) "
                    f"| {pyr_bw / 1e9:.0f} GB/s = {pyr_bw / copy_bw:.0%} of the D2D copy's {copy_bw / 1e9:.0f} GB/s |")
        rows.append(f"| {label} | 273 patches 16x16, trilinear | {fmt_ms(p['patches_273_ms'])} "
                    f"| vectorized grid_sample {fmt_ms(t.get('torch_patches_grid_sample_ms', float('nan')))} "
                    f"({t.get('torch_patches_grid_sample_ms', float('nan')) / p['patches_273_ms']:.0f}x), "
                    f"per-patch loop {fmt_ms(t.get('torch_patches_loop_ms', float('nan')))} "
                    f"({t.get('torch_patches_loop_ms', float('nan')) / p['patches_273_ms']:.0f}x) | |")
        rows.append(f"| {label} | foveate273 program (graph replay, host wall time incl. sync) | {fmt_ms(p['program_graph_ms'])} "
                    f"| PyTorch 5-level pyramid + grid_sample {fmt_ms(t.get('torch_pyramid5_and_grid_sample_ms', float('nan')))} "
                    f"({t.get('torch_pyramid5_and_grid_sample_ms', float('nan')) / p['program_graph_ms']:.0f}x) | |")
        rows.append(f"| {label} | whole frame: pinned upload + pyramid + patches + download | {fmt_ms(p['frame_ms'])} "
                    f"| the upload alone (pinned H2D copy of level 0) {fmt_ms(p['h2d_pinned_ms'])}: "
                    f"{p['h2d_pinned_ms'] / p['frame_ms']:.0%} of the frame | {lvl0 / (p['h2d_pinned_ms'] / 1e3) / 1e9:.0f} GB/s over the link |")
        rows.append(f"| {label} | 1,000 frames back to back | {p['fps']:.0f} frames/s | | |")
        def target(work, size, limit_ms, measured):
            if key == size:
                targets.append({"work": work, "target_ms": limit_ms, "measured_ms": measured, "met": measured <= limit_ms})
        target("pyramid 4096^2", (4096, 4096), 0.040, p["pyramid_ms"])
        target("pyramid 1024^2", (1024, 1024), 0.010, p["pyramid_ms"])
        target("273 patches 16x16 trilinear (1024^2 input)", (1024, 1024), 0.015, p["patches_273_ms"])
        target("273 patches 16x16 trilinear (4096^2 input)", (4096, 4096), 0.015, p["patches_273_ms"])
        target("whole frame 1024^2 from host", (1024, 1024), 0.150, p["frame_ms"])
    doc = {"date": datetime.date.today().isoformat(), "gpu": pxvm["gpu"], "gl_renderer": pxvm.get("gl_renderer"),
           "gl_version": pxvm.get("gl_version"), "torch": torch.get("torch"), "sizes": sizes, "targets": targets}
    with open(out_path, "w") as f:
        json.dump(doc, f, indent=1)
    print(f"GPU: {pxvm['gpu']}, {pxvm.get('gl_version')}; PyTorch {torch.get('torch')}; medians\n")
    print("| input | work | pxvm | baselines (ratio = baseline / pxvm) | bandwidth |\n|---|---|---|---|---|")
    print("\n".join(rows))
    print("\n| target | limit | measured | met |\n|---|---|---|---|")
    for t in targets:
        print(f"| {t['work']} | {fmt_ms(t['target_ms'])} | {fmt_ms(t['measured_ms'])} | {'yes' if t['met'] else 'NO'} |")


def cpu(pxvm, opencv, out_path):
    P, O = by_size(pxvm), by_size(opencv)
    rows, targets, sizes = [], [], []
    for key in P:
        p, o = P[key], O.get(key, {})
        w, h = key
        merged = dict(p)
        merged.update(o)
        cv = o.get("opencv_inter_area_pyramid_ms", float("nan"))
        merged["ratios"] = {"opencv / pxvm pyramid": cv / p["pyramid_ms"], "pyramid / memcpy": p["pyramid_ms"] / p["memcpy_ms"]}
        sizes.append(merged)
        rows.append(f"| {w}x{h} | {fmt_ms(p['pyramid_ms'])} | {fmt_ms(cv)} ({cv / p['pyramid_ms']:.2f}x) "
                    f"| {fmt_ms(p['memcpy_ms'])} ({p['pyramid_ms'] / p['memcpy_ms']:.2f}x memcpy) | {fmt_ms(p['foveate273_ms'])} |")
        if key == (4096, 4096):
            targets.append({"work": "CPU pyramid 4096^2", "target": "<= OpenCV INTER_AREA", "measured_ms": p["pyramid_ms"],
                            "opencv_ms": cv, "met": p["pyramid_ms"] <= cv})
    doc = {"date": datetime.date.today().isoformat(), "cores": pxvm.get("cores"), "opencv": opencv.get("opencv"),
           "opencv_threads": opencv.get("threads"), "sizes": sizes, "targets": targets}
    with open(out_path, "w") as f:
        json.dump(doc, f, indent=1)
    print(f"CPU: {pxvm.get('cores')} cores; OpenCV {opencv.get('opencv')} with {opencv.get('threads')} threads; "
          f"median of {pxvm.get('runs', 1)} alternated runs of {pxvm.get('reps')} repetitions each\n")
    print("| input | pxvm PYRAMID | OpenCV INTER_AREA pyramid (ratio) | memcpy of level 0 | pxvm foveate273 (pyramid + 273 patches) |")
    print("|---|---|---|---|---|")
    print("\n".join(rows))
    print("\n| input | PNG output, default (--png fast) | --png best (the former setting) | best / fast |")
    print("|---|---|---|---|")
    for key in P:
        p = P[key]
        if "png_fast_ms" in p:
            print(f"| {key[0]}x{key[1]} | {fmt_ms(p['png_fast_ms'])}, {p['png_fast_bytes'] / 1e6:.1f} MB "
                  f"| {fmt_ms(p['png_best_ms'])}, {p['png_best_bytes'] / 1e6:.1f} MB | {p['png_best_ms'] / p['png_fast_ms']:.1f}x |")
    for t in targets:
        print(f"\ntarget {t['work']} {t['target']}: {fmt_ms(t['measured_ms'])} vs {fmt_ms(t['opencv_ms'])}: {'met' if t['met'] else 'NOT met'}")


def median(vals):
    v = sorted(vals)
    return v[len(v) // 2] if len(v) % 2 else (v[len(v) // 2 - 1] + v[len(v) // 2]) / 2


def video_cpu(out_path, run_paths, meta):
    """Runs of bench_video on the CPU (--paths full,16): each run's figures, their medians, the
    target (incremental >= 4x the full path at T = 16, on the median over runs of the median
    round)."""
    runs, every = [], None
    for path in run_paths:
        d = json.load(open(path))
        if "incremental_t0" in d:  # the run with every threshold, kept whole
            every = d
            continue
        t = d["incremental_t16"]
        runs.append({"full_fps": d["full"]["fps"], "t16_fps": t["fps"], "t16_speedup": t["speedup_vs_full"],
                     "t16_speedup_median_round": t["speedup_vs_full_median_round"],
                     "t16_speedup_best_rounds": t["speedup_vs_full_best_rounds"], "tokens_sampled": t["tokens_sampled"],
                     "tokens_bytes_changed": t["tokens_bytes_changed"], "video_frames": d["video_frames"],
                     "timed_frames": d["timed_frames"]})
    med = {k: median([r[k] for r in runs]) for k in ("full_fps", "t16_fps", "t16_speedup", "t16_speedup_median_round",
                                                      "t16_speedup_best_rounds")}
    ratios = [r["t16_speedup_median_round"] for r in runs]
    doc = dict(meta)
    doc.update({"runs": runs, "median": med, "all_thresholds_run": every, "median_round_range": [min(ratios), max(ratios)],
                "target": {"work": "CPU (2 cores) incremental vs full at T = 16", "target": ">= 4x",
                           "measured": med["t16_speedup_median_round"], "met": med["t16_speedup_median_round"] >= 4.0}})
    with open(out_path, "w") as f:
        json.dump(doc, f, indent=1)
    print(f"{len(runs)} runs of `{meta.get('command', 'bench_video')}`, {meta.get('date', '')}\n")
    print("| run | full frames/s | T = 16 frames/s | ratio of totals | median round | best rounds |")
    print("|---|---|---|---|---|---|")
    for i, r in enumerate(runs):
        print(f"| {i + 1} | {r['full_fps']:,.0f} | {r['t16_fps']:,.0f} | {r['t16_speedup']:.2f}x "
              f"| {r['t16_speedup_median_round']:.2f}x | {r['t16_speedup_best_rounds']:.2f}x |")
    print(f"| median | {med['full_fps']:,.0f} | {med['t16_fps']:,.0f} | {med['t16_speedup']:.2f}x "
          f"| **{med['t16_speedup_median_round']:.2f}x** | {med['t16_speedup_best_rounds']:.2f}x |")
    t = doc["target"]
    print(f"\ntarget {t['work']} {t['target']}: median round {t['measured']:.2f}x (range {min(ratios):.2f}-{max(ratios):.2f}x): "
          f"{'met' if t['met'] else 'NOT met'}; tokens sampled again {runs[0]['tokens_sampled']:.1%}, "
          f"their bytes changed {runs[0]['tokens_bytes_changed']:.1%}")
    if every:
        print("\nthe run with every threshold: " + ", ".join(
            f"T = {t} {every[f'incremental_t{t}']['speedup_vs_full_median_round']:.2f}x "
            f"({every[f'incremental_t{t}']['tokens_sampled']:.1%} of the tokens sampled again)"
            for t in (0, 8, 16) if f"incremental_t{t}" in every))


def load(paths):
    """One JSON file, or several (comma-separated) runs of the same benchmark: each figure becomes
    the median of its runs."""
    docs = [json.load(open(p)) for p in paths.split(",")]
    if len(docs) == 1:
        return docs[0]
    out = dict(docs[0])
    out["runs"] = len(docs)
    out["sizes"] = []
    for i, first in enumerate(docs[0]["sizes"]):
        merged = dict(first)
        for k, v in first.items():
            if k.endswith("_ms") and isinstance(v, (int, float)):
                vals = sorted(d["sizes"][i][k] for d in docs)
                merged[k] = median(vals)
                merged[k.replace("_ms", "_ms_runs")] = vals
        out["sizes"].append(merged)
    return out


if __name__ == "__main__":
    if len(sys.argv) >= 4 and sys.argv[1] == "video-cpu":  # then key=value pairs (the run's facts) and run files
        facts = [a for a in sys.argv[3:] if re.match(r"[a-z_]+=", a)]
        video_cpu(sys.argv[2], [a for a in sys.argv[3:] if a not in facts], dict(a.split("=", 1) for a in facts))
        sys.exit(0)
    if len(sys.argv) != 5 or sys.argv[1] not in ("gpu", "cpu"):
        sys.exit(__doc__)
    a, b = (load(p) for p in sys.argv[2:4])
    (gpu if sys.argv[1] == "gpu" else cpu)(a, b, sys.argv[4])
