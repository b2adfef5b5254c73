#!/usr/bin/env python3
"""pxbatch --policy dynamic over a folder of real photos against a Pillow + NumPy process pool over
all the host's cores, on the same files (issue 40: "pxbatch over such a folder on one GPU against
a Pillow process pool over all the host's cores").

    sh tests/bench/photos.sh                       # build/photos: 35 photos, 33 sizes
    python3 tests/bench/bench_pxbatch_dynamic.py [--photos build/photos] [--copies 4] [--reps 3] \
        [--executor cpu --executor cuda] [--pxbatch LABEL=PATH ...] [--variant LABEL=ARGS ...] \
        [--json OUT] [--md OUT]

The folder is the photos --copies times over (symbolic links, so every image is decoded again).
Ways, alternated in each of --reps rounds (the machine is shared and noisy), medians quoted:
  pxbatch-EXEC[-LABEL]  pxbatch PLAN --policy dynamic --executor EXEC, the uniform plan of patch
                16 (programs/uniform.json): files decoded (libjpeg-turbo, libpng) on its host
                threads, resized by Qwen2-VL's rule (bicubic) and cut into 16x16 RGBA8 tiles by the
                executor, written as shards (.npy, offsets, grid, the marker with SHA-256s) into a
                fresh --out; timed as a whole process (start, decode, resize, write); each
                --variant LABEL=ARGS runs it with ARGS added (e.g. "2w=--workers 2"), "--ranks N"
                among them under mpirun -np N (e.g. "2r=--ranks 2 --workers 1"), "--env K=V" a
                variable set for it (e.g. glibc's malloc tunables)
  pool-u8       multiprocessing (fork) pool of os.cpu_count() processes: Pillow open + convert
                RGB + resize((w', h'), BICUBIC) to the same size (smart_resize), cut into uint8
                16x16x3 tiles (N, 16, 16, 3), sent back to the parent (what pxbatch writes, less
                alpha and the files)
  pool-f32      the same, then NumPy rescale + CLIP normalize, float32 patches (N, 3*16*16) sent
                back (issue 40's "ten-line Python process pool")
  pool-decode   the same pool, Pillow open + convert RGB only (its size sent back): the host's
                decode ceiling (libjpeg-turbo, libpng over all its cores), which every pxbatch way
                shares however many GPUs it drives
images/s = images / wall seconds ("after setup": less pxbatch's setup_s, the process's fixed start, which
a short run overweights and more GPUs do not divide); ratios pxbatch / pool are medians over rounds of the ratio within
a round. Beside each pxbatch figure, the bound, from pxbatch --stats of its median round: the setup
before its workers (MPI, counting and opening devices) and their time; the decoders busy on average
of those it has (cores' worth of decoding); the shares of the workers' wall time spent opening the
executor, in the executor (its calls are synchronous: an upper bound of the GPU busy and the link,
upload and read-back), waiting for decoded images, and writing shards (disk, SHA-256); and CPU
seconds, system among them (page faults, munmap, the files). Exactness (untimed): the bytes of
each pxbatch's shards (RGB of its tiles) differing from pool-u8's tiles, which must be 0, and
every pxbatch way's shard files the same bytes (else exit 1). (pxvm resizes an RGBA image's
channels each on its own, so its RGB is that of the image with alpha dropped, as pool-u8 makes
it; Pillow resizes RGBA premultiplied, which differs where alpha is 0: the RGBA photo of
build/photos.)
"""
import argparse
import datetime
import glob
import json
import multiprocessing as mp
import os
import platform
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
from PIL import Image

from bench_processor import smart_resize as qwen_size  # noqa: E402 (this folder: the one transcription)

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
P, MERGE, MIN_PIXELS, MAX_PIXELS = 16, 2, 3136, 1003520
MEAN32 = np.array((0.48145466, 0.4578275, 0.40821073), np.float32)
STD32 = np.array((0.26862954, 0.26130258, 0.27577711), np.float32)
SCALE32 = np.float32(1 / 255)


def smart_resize(h, w):
    """(h', w'): Qwen2-VL's rule at patch P, bench_processor.py's transcription (docs/policies.md)."""
    return qwen_size(h, w, P * MERGE, MIN_PIXELS, MAX_PIXELS)


def pool_u8(path):
    with Image.open(path) as im:
        im = im.convert("RGB")
    h, w = smart_resize(im.height, im.width)
    a = np.asarray(im.resize((w, h), Image.BICUBIC))
    return a.reshape(h // P, P, w // P, P, 3).transpose(0, 2, 1, 3, 4).reshape(-1, P, P, 3)


def pool_f32(path):
    t = pool_u8(path)
    x = (t.astype(np.float32) * SCALE32 - MEAN32) / STD32
    return np.ascontiguousarray(x.transpose(0, 3, 1, 2)).reshape(len(t), -1)


def pool_decode(path):
    with Image.open(path) as im:
        return im.convert("RGB").size


def machine():
    cpu = platform.processor()
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    gpu = ""
    try:
        gpu = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=30).stdout.strip().replace("\n", ", ")
    except (OSError, subprocess.SubprocessError):
        pass
    return {"host": platform.node(), "cpu": cpu, "cores": os.cpu_count(), "gpu": gpu, "python": platform.python_version()}


def shard_files(out):
    """{name: SHA-256} of the shard files of a pxbatch --out."""
    import hashlib
    return {f: hashlib.sha256(open(os.path.join(out, f), "rb").read()).hexdigest()
            for f in sorted(os.listdir(out)) if f.startswith("shard-")}


def shard_tiles(out):
    """The RGB of every tile of a pxbatch --out, in input order."""
    parts = []
    for m in sorted(glob.glob(os.path.join(out, "shard-*.json"))):
        parts.append(np.load(m[:-len(".json")] + ".npy")[..., :3])
    return np.concatenate(parts) if parts else np.zeros((0, P, P, 3), np.uint8)


def bound(st):
    """Where a run's time went (pxbatch --stats), in words: the setup before the workers (devices
    counted, inputs listed) and the workers' time; the decoders busy of those it has, then the
    workers' wall shared among opening the executor, the executor (GPU and link), waiting for
    decoded images and writing shards (disk), with the decoders' waits for memory; and (the
    decode pool's, when the stats have it) while a worker waited: every decoder decoding (decode-
    limited), one held back by --max-memory / 2 (memory-limited), or one with nothing to take
    (what it waited for was decoding: one large image)."""
    t, wall = st["total"], sum(w["wall_s"] for w in st["workers"]) or 1
    have = st["decoders_per_worker"] * st["workers_per_process"] * st["processes"]
    text = ("setup %.2f s + %.2f s; decoders %.1f of %d busy; workers (%d x %d): opening %.0f%%, executor %.0f%%, "
            "waiting decoded %.0f%%, writing %.0f%%%s; decoders waited %.1f s for memory" %
            (st["setup_s"], st["wall_s"], t["decoders_busy"], have, st["processes"], st["workers_per_process"],
             100 * t["open_s"] / wall, 100 * t["executor_s"] / wall,
             100 * t["input_wait_s"] / wall, 100 * t["write_s"] / wall,
             ", waiting writer %.0f%%" % (100 * t["write_wait_s"] / wall) if t.get("write_wait_s") else "",
             t["decode_memory_wait_s"]))
    if "wait_all_busy_s" in t:
        text += ("; a worker waiting %.2f s: all decoders busy %.2f, held back by memory %.2f, one decode alone %.2f"
                 % (t["wait_all_busy_s"] + t["wait_memory_bound_s"] + t["wait_decoding_s"], t["wait_all_busy_s"],
                    t["wait_memory_bound_s"], t["wait_decoding_s"]))
    return text


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--photos", default=os.path.join(ROOT, "build", "photos"))
    ap.add_argument("--copies", type=int, default=4)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--executor", action="append", help="cpu, cuda (default: cpu, and cuda when it opens)")
    ap.add_argument("--pxbatch", action="append", help="LABEL=PATH (default: bin/pxbatch, no label)")
    ap.add_argument("--variant", action="append",
                    help="LABEL=ARGS: pxbatch with ARGS added; --ranks N among them: under mpirun -np N")
    ap.add_argument("--shard-size", type=int, default=64)
    ap.add_argument("--tmp", default=None, help="where the folder and the shards go (default: the system's)")
    ap.add_argument("--base", help="a --variant's LABEL: each other variant's images/s over it, per pxbatch "
                                   "and executor (a scaling ratio), wall and after setup")
    ap.add_argument("--label", default="")
    ap.add_argument("--json")
    ap.add_argument("--md")
    a = ap.parse_args()
    photos = sorted(f for f in glob.glob(os.path.join(a.photos, "*"))
                    if f.lower().endswith((".png", ".jpg", ".jpeg")))
    if not photos:
        sys.exit("bench_pxbatch_dynamic: no photos in %s (sh tests/bench/photos.sh makes them)" % a.photos)
    tmp = tempfile.mkdtemp(prefix="bench-pxbatch-", dir=a.tmp)
    folder = os.path.join(tmp, "in")
    os.mkdir(folder)
    for c in range(a.copies):
        for f in photos:
            os.symlink(os.path.abspath(f), os.path.join(folder, "%d-%s" % (c, os.path.basename(f))))
    files = sorted(os.path.join(folder, f) for f in os.listdir(folder))
    n = len(files)
    binaries = [(s.split("=", 1) if "=" in s else ("", s)) for s in (a.pxbatch or [os.path.join(ROOT, "bin", "pxbatch")])]
    plan = os.path.join(ROOT, "programs", "uniform.json")
    executors = a.executor
    if not executors:
        executors = ["cpu"]
        probe = subprocess.run([binaries[-1][1], plan, "--in-dir", os.path.join(ROOT, "tests", "data", "photos"),
                                "--out", os.path.join(tmp, "probe"), "--policy", "dynamic", "--executor", "cuda"],
                               capture_output=True, text=True)
        if probe.returncode == 0:
            executors.append("cuda")
        else:
            print("bench_pxbatch_dynamic: no cuda here (%s)" % (probe.stderr.strip().splitlines() or ["?"])[0],
                  file=sys.stderr)

    cpu_secs = {}  # pxbatch's user + system seconds a run (the pool's processes outlive a round: not counted)
    sys_secs = {}  # of which system (page faults, munmap, files: the kernel's share)
    stats = {}  # pxbatch --stats of each run
    mpi_env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")

    key_of = {}  # a pxbatch way's name: (executor, binary label, variant label)

    def pxbatch_way(label, path, ex, variant):
        vlabel, vargs = variant
        name = "pxbatch-%s%s%s" % (ex, "-" + label if label else "", "-" + vlabel if vlabel else "")
        key_of[name] = (ex, label, vlabel)
        extra, launcher, env = shlex.split(vargs), [], dict(mpi_env)
        if "--ranks" in extra:  # under mpirun
            k = extra.index("--ranks")
            launcher = ["mpirun", "-np", extra[k + 1], "--oversubscribe", "--bind-to", "none"]
            del extra[k:k + 2]
        while "--env" in extra:  # a variable of pxbatch's environment (e.g. glibc's malloc tunables)
            k = extra.index("--env")
            key, val = extra[k + 1].split("=", 1)
            env[key] = val
            if launcher:  # mpirun passes it on
                launcher += ["-x", key]
            del extra[k:k + 2]

        def run(out):
            cmd = launcher + [path, plan, "--in-dir", folder, "--out", out, "--policy", "dynamic", "--executor", ex,
                              "--shard-size", str(a.shard_size), "--overwrite", "--stats", out + ".stats.json", *extra]
            u0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            t = time.perf_counter()
            r = subprocess.run(cmd, capture_output=True, text=True, env=env)
            dt = time.perf_counter() - t
            u1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            if r.returncode != 0:
                sys.exit("bench_pxbatch_dynamic: %s failed (%d): %s" % (" ".join(cmd), r.returncode, r.stderr))
            cpu_secs.setdefault(name, []).append(u1.ru_utime + u1.ru_stime - u0.ru_utime - u0.ru_stime)
            sys_secs.setdefault(name, []).append(u1.ru_stime - u0.ru_stime)
            with open(out + ".stats.json") as f:
                stats.setdefault(name, []).append(json.load(f))
            return dt
        return (name, run)

    order = sorted(range(n), key=lambda i: -os.path.getsize(files[i]))  # largest first: no straggler last
    pool = mp.get_context("fork").Pool(os.cpu_count() or 1)

    def pool_way(fn):
        def run(_out):
            t = time.perf_counter()
            res = pool.map(fn, [files[i] for i in order], chunksize=1)
            dt = time.perf_counter() - t
            assert len(res) == n
            return dt
        return run

    variants = [tuple(v.split("=", 1)) for v in a.variant] if a.variant else [("", "")]
    ways = [pxbatch_way(lb, p, ex, v) for ex in executors for lb, p in binaries for v in variants]
    ways += [("pool-u8", pool_way(pool_u8)), ("pool-f32", pool_way(pool_f32)), ("pool-decode", pool_way(pool_decode))]
    secs = {w: [] for w, _ in ways}
    outs = {w: os.path.join(tmp, w) for w, _ in ways}
    for w, run in ways:  # warm-up (page cache, the pool's imports), untimed
        run(outs[w])
    for r in range(a.reps):
        for w, run in ways:
            secs[w].append(run(outs[w]))
        print("round %d: " % (r + 1) + ", ".join("%s %.1f/s" % (w, n / secs[w][-1]) for w, _ in ways), file=sys.stderr)
    # exactness: every pxbatch's tiles against Pillow's (pool-u8's)
    want = np.concatenate(pool.map(pool_u8, files, chunksize=1))
    pool.terminate()
    differ, files_of = {}, {}
    for w, _ in ways:
        if w.startswith("pxbatch"):
            got = shard_tiles(outs[w])
            differ[w] = int((got != want).sum()) if got.shape == want.shape else -1
            files_of[w] = shard_files(outs[w])
    first = next((w for w, _ in ways if w.startswith("pxbatch")), None)
    unlike = [w for w in files_of if files_of[w] != files_of[first]]  # every way's shards: the same files
    results = []
    for w, _ in ways:
        row = {"way": w, "images": n, "seconds_median": statistics.median(secs[w]),
               "images_per_s": n / statistics.median(secs[w]), "seconds": secs[w]}
        if w.startswith("pxbatch"):
            row["bytes_differing_from_pillow"] = differ[w]
            row["same_files_as_" + first] = w not in unlike
            row["cpu_seconds_median"] = statistics.median(cpu_secs[w][1:])  # [0]: the warm-up
            row["sys_seconds_median"] = statistics.median(sys_secs[w][1:])
            for base in ("pool-u8", "pool-f32", "pool-decode"):
                row["ratio_to_" + base] = statistics.median(secs[base][k] / secs[w][k] for k in range(a.reps))
            timed = stats[w][1:]  # [0]: the warm-up
            # without the setup (the process, MPI, the program, the devices opened): a fixed cost that
            # a short run overweights and more GPUs do not divide
            row["images_per_s_after_setup"] = n / statistics.median(secs[w][k] - timed[k]["setup_s"]
                                                                    for k in range(a.reps))
            row["stats"] = timed[sorted(range(a.reps), key=lambda k: secs[w][k])[a.reps // 2]]
            row["bound"] = bound(row["stats"])
        results.append(row)
    doc = {"benchmark": "pxbatch --policy dynamic vs a Pillow + NumPy process pool", "label": a.label,
           "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
           "machine": machine(), "photos": len(photos), "copies": a.copies, "images": n, "reps": a.reps,
           "shard_size": a.shard_size, "pool_processes": os.cpu_count(),
           "sizes": len({Image.open(f).size for f in photos}), "results": results}
    md = ["# pxbatch --policy dynamic vs a Pillow process pool%s" % (" (" + a.label + ")" if a.label else ""), "",
          "%s; %s, %d cores%s. %d images (%d photos of %d sizes x %d, links), shard size %d, medians of %d "
          "rounds (ways alternated); pool: %d processes (fork)." %
          (doc["date"], doc["machine"]["cpu"], doc["machine"]["cores"],
           ", " + doc["machine"]["gpu"] if doc["machine"]["gpu"] else "", n, len(photos), doc["sizes"], a.copies,
           a.shard_size, a.reps, os.cpu_count()), "",
          "| way | images/s | after setup | x pool-u8 | x pool-f32 | x pool-decode | CPU s (user + sys; sys) | bytes "
          "differing from Pillow | the bound (pxbatch --stats) |",
          "|---|---|---|---|---|---|---|---|---|"]
    for row in results:
        md.append("| %s | %.1f | %s | %s | %s | %s | %s | %s | %s |" % (
            row["way"], row["images_per_s"],
            "%.1f" % row["images_per_s_after_setup"] if "images_per_s_after_setup" in row else "",
            "%.2f" % row["ratio_to_pool-u8"] if "ratio_to_pool-u8" in row else "",
            "%.2f" % row["ratio_to_pool-f32"] if "ratio_to_pool-f32" in row else "",
            "%.2f" % row["ratio_to_pool-decode"] if "ratio_to_pool-decode" in row else "",
            "%.2f; %.2f" % (row["cpu_seconds_median"], row["sys_seconds_median"]) if "cpu_seconds_median" in row else "",
            row.get("bytes_differing_from_pillow", ""), row.get("bound", "")))
    if a.base:  # each variant against the base variant of the same binary and executor
        by_key = {key_of[row["way"]]: row for row in results if row["way"] in key_of}
        lines = []
        for row in results:
            ex, label, vlabel = key_of.get(row["way"], (None, None, a.base))
            base = by_key.get((ex, label, a.base))
            if vlabel == a.base or base is None:
                continue
            row["ratio_to_base"] = row["images_per_s"] / base["images_per_s"]
            row["ratio_to_base_after_setup"] = row["images_per_s_after_setup"] / base["images_per_s_after_setup"]
            lines.append("- %s / %s: %.2fx (after setup %.2fx)" % (row["way"], base["way"], row["ratio_to_base"],
                                                                   row["ratio_to_base_after_setup"]))
        md += ["", "Against %s (images/s, medians):" % a.base, ""] + lines
    text = "\n".join(md) + "\n"
    print(text)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")
    if a.md:
        with open(a.md, "w") as f:
            f.write(text)
    shutil.rmtree(tmp, ignore_errors=True)
    bad = [w for w, d in differ.items() if d != 0]
    if bad:
        print("bench_pxbatch_dynamic: bytes differ from Pillow's: %s" % bad, file=sys.stderr)
    if unlike:
        print("bench_pxbatch_dynamic: shard files differ from %s's: %s" % (first, unlike), file=sys.stderr)
    elif first:
        print("bench_pxbatch_dynamic: every pxbatch way wrote the same shard files (%d)" % len(files_of[first]),
              file=sys.stderr)
    return 1 if bad or unlike else 0


if __name__ == "__main__":
    sys.exit(main())
