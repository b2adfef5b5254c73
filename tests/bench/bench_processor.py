#!/usr/bin/env python3
"""The processor benchmark (issue 40, item 4): a folder of real photos of mixed sizes ->
dynamic-resolution tokens, every way of making them measured in one run, on one machine.

    sh tests/bench/photos.sh                       # build/photos: 35 photos, 33 sizes, ~25 MB
    python3 tests/bench/bench_processor.py [--photos build/photos] [--reps 3] \
        [--json OUT.json] [--md OUT.md] [--label cpu]

Each image is resized by Qwen2-VL's rule (pxvm's policy "dynamic", docs/policies.md: sides
multiples of patch x merge, area within 3136..1003520, bicubic), rescaled to [0, 1] and
normalized with the CLIP mean/std, and cut into patches: the tensor the model takes, in bf16.
Patch 16 (merge 2): tokens (N, 3*16*16), each patch channel-major (C, p, p), patches row-major.
Patch 14, merge 2, temporal 2 (only where transformers is installed, to compare with its
Qwen2VLImageProcessor): its own layout, (N, 3*2*14*14), merge window by merge window.

Ways (one not installed, or without its device, is skipped with a line saying so):
  pillow        Pillow resize(BICUBIC) + NumPy rescale/normalize, one thread: the reference
  pillow-pool   the same in a process pool (fork) over all the host's cores
  pxvm-cpu      Runner(uniform plan, "cpu").tokens_batch(images, policy="dynamic", dtype="bfloat16",
                normalize="clip", layout="flat"): one ragged call (pxvm_runner_ragged) resizes, tiles and
                normalizes every image; from files pxvm decodes on a pool of threads
  pxvm-cuda     the same with executor "cuda": host arrays (or files) in, a CUDA tensor out
  torchvision-cpu / -cuda   torchvision resize(bicubic, antialias=True) + normalize in torch
  hf-CLASS-DEVICE   transformers' Qwen2-VL image processors (patch 14 only), each class of the
                installed release once (5.x: Qwen2VLImageProcessorPil, Qwen2VLImageProcessor on the
                torchvision backend; 4.x: Qwen2VLImageProcessor, Qwen2VLImageProcessorFast), the
                torch-backed ones on the CPU and with device="cuda"

Per way: images/s from decoded images (decode excluded: host RGB uint8 arrays, or PIL images for
Pillow; uploads to a GPU included) and from files (decode included: pxvm decodes itself, the
others with Pillow); medians of --reps rounds, the ways alternated in each round (the machine is
shared and noisy); the ratios to Pillow are medians over rounds of the ratio within a round.
The decoders' floor: pxvm's decoders alone (libjpeg-turbo, libpng) on a pool of os.cpu_count()
threads, the files decoded and nothing else: what any way from files is bounded by.
Exactness, from an untimed run: the resized uint8 bytes differing from Pillow's (count, largest
difference; for transformers recovered from its float32 output, exact since its float error is
far below half a level), the float32 elements differing from the reference and the largest
difference, and the bf16 elements of the timed output differing from the reference's bf16 (from
decoded images, and from files: there each way decodes on its own, pxvm with its libjpeg-turbo).
Figures only, nothing timed is asserted; a pxvm byte differing from Pillow's is an error: exit 1.
"""
import argparse
import datetime
import glob
import json
import multiprocessing as mp
import os
import platform
import statistics
import subprocess
import sys
import time
import warnings

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))
import numpy as np  # noqa: E402
from PIL import Image  # noqa: E402

warnings.filterwarnings("ignore", message=".*after the JPEG's end-of-image marker.*")
warnings.filterwarnings("ignore", message=".*NumPy array is not writable.*")  # read only, never written

CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)
MEAN32 = np.array(CLIP_MEAN, dtype=np.float32)
STD32 = np.array(CLIP_STD, dtype=np.float32)
SCALE32 = np.float32(1 / 255)
MIN_PIXELS, MAX_PIXELS, MERGE = 3136, 1003520, 2
SKIPPED = []
FAILED = []  # pxvm failures (an error of its run, a byte differing from Pillow's): exit 1


def skip(name, why):
    SKIPPED.append({"way": name, "why": why})
    print(f"bench_processor: skipped {name}: {why}", file=sys.stderr)


def smart_resize(h, w, f, lo=MIN_PIXELS, hi=MAX_PIXELS):
    """(h', w'): Qwen2-VL's rule as docs/policies.md states it (checked against pxvm.dynamic_size)."""
    import math
    hb, wb = round(h / f) * f, round(w / f) * f
    if hb * wb > hi:
        beta = math.sqrt(h * w / hi)
        hb, wb = max(f, math.floor(h / beta / f) * f), max(f, math.floor(w / beta / f) * f)
    elif hb * wb < lo:
        beta = math.sqrt(lo / (h * w))
        hb, wb = math.ceil(h * beta / f) * f, math.ceil(w * beta / f) * f
    return hb, wb


# ---- the layout and the normalization, NumPy (the reference's arithmetic) ----

def layout_np(x, p, qwen):
    """(h, w, C) -> (N, C*p*p) row-major patches, or Qwen2-VL's (N, C*2*p*p) merge-window order."""
    h, w, c = x.shape
    gh, gw = h // p, w // p
    if not qwen:
        return x.reshape(gh, p, gw, p, c).transpose(0, 2, 4, 1, 3).reshape(gh * gw, c * p * p)
    m = MERGE
    t = x.reshape(gh // m, m, p, gw // m, m, p, c).transpose(0, 3, 1, 4, 6, 2, 5)[:, :, :, :, :, None]
    return np.broadcast_to(t, t.shape[:5] + (2, p, p)).reshape(gh * gw, c * 2 * p * p)


def normalize_np(u8):
    """uint8 (..., 3) -> float32: x / 255 (as x * float32(1/255)), then (x - mean) / std."""
    return (u8.astype(np.float32) * SCALE32 - MEAN32) / STD32


def bf16_bits(x):
    """float32 -> bfloat16 bits (uint16), round to nearest even (as torch's .to(torch.bfloat16))."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    return ((u + (np.uint32(0x7FFF) + ((u >> 16) & 1))) >> 16).astype(np.uint16)


def tokens_np(resized_u8, p, qwen, bf16):
    t = layout_np(normalize_np(resized_u8), p, qwen)
    return bf16_bits(t) if bf16 else t


def pillow_resize(im, hw):
    return np.asarray(im.resize((hw[1], hw[0]), Image.BICUBIC))


def open_rgb(path):
    with Image.open(path) as im:
        return im.convert("RGB")


# ---- the pool's workers (fork: the decoded images are inherited, not sent) ----
_POOL = {}


def _pool_decoded(i):
    c = _POOL
    return tokens_np(pillow_resize(c["pil"][i], c["hw"][i]), c["p"], c["qwen"], True)


def _pool_resized(i):
    return pillow_resize(_POOL["pil"][i], _POOL["hw"][i])


def _pool_file(i):
    c = _POOL
    return tokens_np(pillow_resize(open_rgb(c["files"][i]), c["hw"][i]), c["p"], c["qwen"], True)


# ---- ways ----

class Way:
    name = "?"
    note = ""

    def run(self, files_mode, bf16=True):
        """The tokens of every image (a list, host or device), timed as a whole."""
        raise NotImplementedError

    def resized(self):
        """The resized uint8 (h', w', 3) images, or None where the way does not expose them."""
        return None

    def close(self):
        pass


class PillowWay(Way):
    name = "pillow"
    note = "Pillow resize(BICUBIC) + NumPy rescale/normalize, one thread (the reference)"

    def __init__(self, S):
        self.S = S

    def run(self, files_mode, bf16=True):
        S = self.S
        out = []
        for i in range(S.n):
            im = open_rgb(S.files[i]) if files_mode else S.pil[i]
            out.append(tokens_np(pillow_resize(im, S.hw[i]), S.p, S.qwen, bf16))
        return out

    def resized(self):
        return [pillow_resize(im, hw) for im, hw in zip(self.S.pil, self.S.hw)]


class PoolWay(Way):
    name = "pillow-pool"

    def __init__(self, S):
        self.S = S
        _POOL.update(pil=S.pil, files=S.files, hw=S.hw, p=S.p, qwen=S.qwen)
        self.procs = os.cpu_count() or 1
        self.note = f"the same in a multiprocessing pool (fork) of {self.procs} processes, bf16 sent back"
        self.pool = mp.get_context("fork").Pool(self.procs)
        self.order = sorted(range(S.n), key=lambda i: -S.pixels[i])  # largest first: no straggler last

    def run(self, files_mode, bf16=True):
        if not bf16:
            return None
        res = self.pool.map(_pool_file if files_mode else _pool_decoded, self.order, chunksize=1)
        out = [None] * self.S.n
        for i, r in zip(self.order, res):
            out[i] = r
        return out

    def resized(self):
        return self.pool.map(_pool_resized, range(self.S.n), chunksize=1)

    def close(self):
        self.pool.terminate()


class PxvmWay(Way):
    def __init__(self, S, executor):
        import pxvm
        self.pxvm, self.S, self.executor = pxvm, S, executor
        self.name = f"pxvm-{executor}"
        plan = {"image": [451, 300], "scheme": "uniform", "patch": S.p}
        self.program = pxvm.Program.from_plan(plan, name="uniform%d" % S.p)
        self.policy = "dynamic:merge=%d,min=%d,max=%d:bicubic" % (MERGE, MIN_PIXELS, MAX_PIXELS)
        self.runner = pxvm.Runner(self.program, executor=executor)
        where = "into a CUDA tensor" if executor == "cuda" else "on the host"
        self.note = (f"Runner(uniform plan, \"{executor}\").tokens_batch(policy=\"dynamic\", dtype, normalize=\"clip\", "
                     f"layout=\"flat\"): one ragged call resizes, tiles and normalizes every image {where}"
                     + ("; Qwen2-VL's merge-window order and temporal patch by a torch permutation" if S.qwen else ""))

    def run(self, files_mode, bf16=True):
        S = self.S
        images = list(S.files) if files_mode else list(S.arrays)
        rg = self.runner.tokens_batch(images, policy=self.policy, dtype="bfloat16" if bf16 else "float32",
                                      normalize="clip", layout="flat",
                                      device="cuda" if self.executor == "cuda" else None)
        t, off = rg.tokens, rg.offsets
        if not S.qwen:
            out = [t[int(off[i]):int(off[i + 1])] for i in range(S.n)]
        else:
            out = []
            import torch
            tt = t if hasattr(t, "reshape") and hasattr(t, "permute") else torch.from_numpy(t)
            for i in range(S.n):
                gh, gw = int(rg.grid[i, 1]), int(rg.grid[i, 2])
                x = tt[int(off[i]):int(off[i + 1])].reshape(gh // MERGE, MERGE, gw // MERGE, MERGE, 3, S.p, S.p)
                x = x.permute(0, 2, 1, 3, 4, 5, 6).unsqueeze(5)
                out.append(x.expand(*x.shape[:5], 2, S.p, S.p).reshape(gh * gw, 3 * 2 * S.p * S.p))
        if self.executor == "cuda":
            import torch
            torch.cuda.synchronize()
        return out

    def resized(self):
        rg = self.runner.patches_batch(list(self.S.arrays), policy=self.policy)
        S = self.S
        res = []
        for i in range(S.n):
            gh, gw = int(rg.grid[i, 1]), int(rg.grid[i, 2])
            tok = to_np(rg[i])
            res.append(tok.reshape(gh, gw, S.p, S.p, 4)[..., :3].transpose(0, 2, 1, 3, 4).reshape(gh * S.p, gw * S.p, 3))
        return res


def decode_floor(S, reps):
    """What pxvm's decoders alone (libjpeg-turbo, libpng) do over all the host's cores: the files
    decoded on a thread pool of os.cpu_count() threads, nothing else; images/s, median of reps."""
    try:
        import pxvm
    except ImportError:
        return None
    from concurrent.futures import ThreadPoolExecutor
    threads = os.cpu_count() or 1
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(pxvm.load_image, S.files))  # warm: the page cache
        ts = []
        for _ in range(reps):
            t0 = time.perf_counter()
            list(pool.map(pxvm.load_image, S.files))
            ts.append(time.perf_counter() - t0)
    return {"threads": threads, "seconds": ts, "images_per_s": S.n / median(ts)}


def layout_torch(x, p, qwen):
    h, w, c = x.shape
    gh, gw = h // p, w // p
    if not qwen:
        return x.reshape(gh, p, gw, p, c).permute(0, 2, 4, 1, 3).reshape(gh * gw, c * p * p)
    m = MERGE
    t = x.reshape(gh // m, m, p, gw // m, m, p, c).permute(0, 3, 1, 4, 6, 2, 5).unsqueeze(5)
    return t.expand(*t.shape[:5], 2, p, p).reshape(gh * gw, c * 2 * p * p)


class TorchvisionWay(Way):
    def __init__(self, S, device):
        import torch
        try:
            from torchvision.transforms.v2 import functional as F
            api = "v2"
        except ImportError:  # torchvision < 0.15 (Debian 12's 0.14): the same kernel, v1's function
            from torchvision.transforms import functional as F
            api = "v1"
        from torchvision.transforms import InterpolationMode
        import torchvision
        self.torch, self.F, self.mode, self.S, self.device = torch, F, InterpolationMode.BICUBIC, S, device
        self.name = f"torchvision-{device}"
        self.note = (f"torchvision {torchvision.__version__} transforms.{api} resize(bicubic, antialias=True) + "
                     f"normalize in torch, on the {device.upper()}" + (" (host images uploaded)" if device == "cuda" else ""))
        self.mean = torch.tensor(CLIP_MEAN, dtype=torch.float32, device=device)
        self.std = torch.tensor(CLIP_STD, dtype=torch.float32, device=device)
        self.scale = torch.tensor(1 / 255, dtype=torch.float32, device=device)
        self.chw = [torch.from_numpy(a).permute(2, 0, 1) for a in S.arrays]

    def resize(self, i, chw):
        t = chw.to(self.device, non_blocking=False)
        return self.F.resize(t, list(self.S.hw[i]), interpolation=self.mode, antialias=True)

    def run(self, files_mode, bf16=True):
        torch, S = self.torch, self.S
        out = []
        for i in range(S.n):
            chw = torch.from_numpy(np.asarray(open_rgb(S.files[i]))).permute(2, 0, 1) if files_mode else self.chw[i]
            r = self.resize(i, chw).permute(1, 2, 0)
            x = (r.float() * self.scale - self.mean) / self.std
            t = layout_torch(x, S.p, S.qwen)
            out.append(t.to(torch.bfloat16) if bf16 else t)
        if self.device == "cuda":
            torch.cuda.synchronize()
        return out

    def resized(self):
        return [self.resize(i, self.chw[i]).permute(1, 2, 0).cpu().numpy() for i in range(self.S.n)]


def hf_torch_backed(cls):
    """Whether a transformers image processor class works on torch tensors (the "fast", torchvision
    backend, which takes device=) rather than on NumPy/PIL images."""
    names = [c.__name__ for c in cls.__mro__]
    return any("Fast" in n or "Torchvision" in n for n in names)


class HfWay(Way):
    def __init__(self, S, cls, device):
        import torch
        import transformers
        self.torch, self.S, self.device = torch, S, device
        self.fast = hf_torch_backed(cls)
        self.name = "hf-%s-%s" % (cls.__name__, device)
        # min_pixels/max_pixels: the keywords every release honours (one release ignored size=)
        self.proc = cls(size={"shortest_edge": MIN_PIXELS, "longest_edge": MAX_PIXELS}, min_pixels=MIN_PIXELS,
                        max_pixels=MAX_PIXELS, patch_size=S.p, merge_size=MERGE, temporal_patch_size=2,
                        image_mean=list(CLIP_MEAN), image_std=list(CLIP_STD))
        self.kw = {"return_tensors": "pt"}
        if self.fast:
            self.kw["device"] = device
        self.note = (f"transformers {transformers.__version__} {cls.__name__} "
                     + (f"(torch backend) on the {device.upper()}" if self.fast else "(NumPy/PIL backend)"))
        self.inputs = self.prepare([np.asarray(a) for a in S.arrays])

    def prepare(self, arrays):
        if self.fast:
            return [self.torch.from_numpy(a).permute(2, 0, 1) for a in arrays]
        return arrays

    def run(self, files_mode, bf16=True):
        torch, S = self.torch, self.S
        ims = self.prepare([np.asarray(open_rgb(f)) for f in S.files]) if files_mode else self.inputs
        bf = self.proc(images=ims, **self.kw)
        pv = bf["pixel_values"]
        counts = [int(g[0] * g[1] * g[2]) for g in bf["image_grid_thw"]]
        pv = pv.to(torch.bfloat16) if bf16 else pv
        if pv.is_cuda:
            torch.cuda.synchronize()
        return list(torch.split(pv, counts))


def hf_classes():
    """The Qwen2-VL image processor classes of the installed transformers, each once (5.x: the
    torchvision-backed Qwen2VLImageProcessor and the Pillow-backed Qwen2VLImageProcessorPil; 4.x:
    Qwen2VLImageProcessor (NumPy/PIL) and Qwen2VLImageProcessorFast)."""
    import transformers
    found = []
    for name in ("Qwen2VLImageProcessorPil", "Qwen2VLImageProcessor", "Qwen2VLImageProcessorFast"):
        cls = getattr(transformers, name, None)
        if cls is None:
            try:
                import importlib
                mod = {"Qwen2VLImageProcessorPil": "image_processing_pil_qwen2_vl",
                       "Qwen2VLImageProcessor": "image_processing_qwen2_vl",
                       "Qwen2VLImageProcessorFast": "image_processing_qwen2_vl_fast"}[name]
                cls = getattr(importlib.import_module("transformers.models.qwen2_vl." + mod), name, None)
            except Exception:  # noqa: BLE001 (absent in this release)
                cls = None
        if cls is not None and cls not in found:
            found.append(cls)
    return found


# ---- the run ----

class Setup:
    pass


def median(v):
    return statistics.median(v) if v else None


def to_np(t):
    if hasattr(t, "detach"):
        import torch
        t = t.detach().cpu()
        if t.dtype == torch.bfloat16:
            return t.view(torch.int16).numpy().view(np.uint16)
        return t.numpy()
    return np.asarray(t)


def compare_bytes(ref, got):
    if got is None:
        return None
    n = big = 0
    for r, g in zip(ref, got):
        if r.shape != g.shape:
            return {"error": f"resized shape {g.shape} != Pillow's {r.shape}"}
        d = np.abs(r.astype(np.int16) - g.astype(np.int16))
        n += int(np.count_nonzero(d))
        big = max(big, int(d.max()))
    total = sum(r.size for r in ref)
    return {"bytes_differing": n, "bytes_total": total, "fraction": n / total, "largest_difference": big}


def compare_values(ref, got):
    n = 0
    big = 0.0
    total = 0
    for r, g in zip(ref, got):
        g = to_np(g)
        if r.shape != g.shape:
            return {"error": f"tokens shape {g.shape} != the reference's {r.shape}"}
        total += r.size
        if r.dtype == np.uint16:  # bf16 bits: count only
            n += int(np.count_nonzero(r != g))
            continue
        d = np.abs(r.astype(np.float64) - g.astype(np.float64))
        n += int(np.count_nonzero(d))
        big = max(big, float(d.max()))
    out = {"elements_differing": n, "elements_total": total, "fraction": n / total}
    if ref and ref[0].dtype != np.uint16:
        out["largest_difference"] = big
    return out


def recover_bytes(S, vals):
    """The resized uint8 image behind float32 normalized tokens (patch-14 Qwen layout)."""
    p, m = S.p, MERGE
    res = []
    for (h, w), v in zip(S.hw, vals):
        v = to_np(v).astype(np.float64)
        gh, gw = h // p, w // p
        t = v.reshape(gh // m, gw // m, m, m, 3, 2, p, p)[:, :, :, :, :, 0]  # (gh/m, gw/m, m, m, 3, p, p)
        img = t.transpose(0, 2, 5, 1, 3, 6, 4).reshape(h, w, 3)
        u = np.rint((img * np.array(CLIP_STD) + np.array(CLIP_MEAN)) * 255)
        res.append(np.clip(u, 0, 255).astype(np.uint8))
    return res


def section(S, ways, reps):
    """Times every way (decoded, files) over reps alternated rounds, then checks their outputs."""
    print(f"bench_processor: patch {S.p}{', Qwen2-VL layout' if S.qwen else ''}: {S.n} images, "
          f"{len(set(S.hw))} resized sizes, {S.total_tokens} tokens; ways: {', '.join(w.name for w in ways)}",
          file=sys.stderr)
    ref = PillowWay(S)
    ref_resized = ref.resized()
    ref_f32 = ref.run(False, bf16=False)
    ref_bf16 = [bf16_bits(r) for r in ref_f32]
    times = {w.name: {"decoded": [], "files": []} for w in ways}
    last, last_files = {}, {}
    kept = []
    for w in ways:  # warm-up: libraries loaded, kernels compiled, files in the page cache
        try:
            last[w.name] = w.run(False)
            last_files[w.name] = w.run(True)
            kept.append(w)
        except Exception as e:  # noqa: BLE001: a way that fails is reported, the others still run
            if w.name.startswith("pxvm"):
                FAILED.append(f"{w.name} (patch {S.p}) failed: {type(e).__name__}: {e}")
            skip(w.name, f"failed: {type(e).__name__}: {e}")
            del times[w.name]
    ways = kept
    for rnd in range(reps):
        for w in ways:
            for mode in ("decoded", "files"):
                t0 = time.perf_counter()
                out = w.run(mode == "files")
                times[w.name][mode].append(time.perf_counter() - t0)
                (last if mode == "decoded" else last_files)[w.name] = out
                del out
        print(f"bench_processor: round {rnd + 1}/{reps}: " + ", ".join(
            f"{k} {S.n / v['decoded'][-1]:.1f}/{S.n / v['files'][-1]:.1f}" for k, v in times.items()) +
              " images/s (decoded/files)", file=sys.stderr)
    results = []
    for w in ways:
        r = {"way": w.name, "what": w.note,
             "seconds_decoded": times[w.name]["decoded"], "seconds_files": times[w.name]["files"],
             "images_per_s_decoded": S.n / median(times[w.name]["decoded"]),
             "images_per_s_files": S.n / median(times[w.name]["files"])}
        try:
            f32 = w.run(False, bf16=False)
            if f32 is not None:
                r["float32_vs_reference"] = compare_values(ref_f32, f32)
            r["bf16_vs_reference"] = compare_values(ref_bf16, last[w.name])
            # from files each way decodes on its own (pxvm with its libjpeg-turbo and libpng)
            r["bf16_vs_reference_from_files"] = compare_values(ref_bf16, last_files.pop(w.name))
            got = w.resized()
            how = "resized"
            if got is None and isinstance(w, HfWay) and f32 is not None:
                got, how = recover_bytes(S, f32), "recovered from the float32 output"
            r["bytes_vs_pillow"] = compare_bytes(ref_resized, got)
            if r["bytes_vs_pillow"] is not None:
                r["bytes_vs_pillow"]["how"] = how
            del f32, got
        except Exception as e:  # noqa: BLE001: reported in its row
            r["check_error"] = f"{type(e).__name__}: {e}"
            r.setdefault("bytes_vs_pillow", {"error": "not checked: " + r["check_error"]})
        b = r.get("bytes_vs_pillow")
        if w.name.startswith("pxvm") and (b is None or b.get("error") or b["bytes_differing"]):
            FAILED.append(f"{w.name} (patch {S.p}): {fmt_bytes(b)}")
        results.append(r)
    base = next(r for r in results if r["way"] == "pillow")
    for r in results:  # the median over rounds of the ratio within a round: the machine's drift cancels
        for mode in ("decoded", "files"):
            r[f"ratio_{mode}_vs_pillow"] = median([b / t for t, b in zip(r["seconds_" + mode], base["seconds_" + mode])])
    return results


def make_setup(photos, patch, qwen):
    S = Setup()
    S.files = sorted(f for f in glob.glob(os.path.join(photos, "*")) if f.lower().endswith((".png", ".jpg", ".jpeg")))
    S.p, S.qwen = patch, qwen
    S.pil = [open_rgb(f) for f in S.files]
    S.arrays = [np.asarray(im) for im in S.pil]
    S.n = len(S.files)
    S.sizes = [im.size for im in S.pil]
    S.hw = [smart_resize(im.size[1], im.size[0], patch * MERGE) for im in S.pil]
    S.pixels = [w * h for w, h in S.sizes]
    S.total_tokens = sum(h * w // (patch * patch) for h, w in S.hw)
    try:
        import pxvm
        for (w, h), hw in zip(S.sizes, S.hw):
            px = pxvm.dynamic_size("dynamic:merge=%d,min=%d,max=%d" % (MERGE, MIN_PIXELS, MAX_PIXELS), patch, w, h)
            if (px[1], px[0]) != hw:
                sys.exit(f"bench_processor: the rule's transcription gives {hw[::-1]} for {w}x{h}, pxvm {px}")
    except ImportError:
        pass
    return S


def torch_setup(S):
    try:
        import torch
    except ImportError:
        return None
    S.t_dev = "cuda" if torch.cuda.is_available() else "cpu"
    S.t_mean = torch.tensor(CLIP_MEAN, dtype=torch.float32, device=S.t_dev)
    S.t_std = torch.tensor(CLIP_STD, dtype=torch.float32, device=S.t_dev)
    S.t_scale = torch.tensor(1 / 255, dtype=torch.float32, device=S.t_dev)
    return torch


def build_ways(S, torch, with_hf):
    ways = [PillowWay(S), PoolWay(S)]  # the pool forks before anything starts CUDA
    try:
        import pxvm  # noqa: F401
        ways.append(PxvmWay(S, "cpu"))
        if torch is not None and torch.cuda.is_available():
            try:
                ways.append(PxvmWay(S, "cuda"))
            except Exception as e:  # noqa: BLE001 (the executor's own error says why)
                skip("pxvm-cuda", f"{type(e).__name__}: {e}")
        else:
            skip("pxvm-cuda", "no CUDA device (torch.cuda.is_available() is False)" if torch else "torch not installed")
    except ImportError as e:
        skip("pxvm-cpu, pxvm-cuda", f"pxvm not importable ({e}): build with make, set PXVM_LIB")
    if torch is None:
        skip("torchvision", "torch not installed")
    else:
        try:
            import torchvision  # noqa: F401
            ways.append(TorchvisionWay(S, "cpu"))
            if torch.cuda.is_available():
                ways.append(TorchvisionWay(S, "cuda"))
            else:
                skip("torchvision-cuda", "no CUDA device")
        except ImportError:
            skip("torchvision-cpu, torchvision-cuda", "torchvision not installed (Debian: python3-torchvision; "
                 "README: unpacked from its .deb onto PYTHONPATH)")
    if with_hf:
        classes = hf_classes()
        if not classes:
            skip("transformers' Qwen2-VL processors", "no Qwen2VLImageProcessor class found in this transformers")
        for cls in classes:
            for d in (["cpu", "cuda"] if hf_torch_backed(cls) else ["cpu"]):
                if d == "cuda" and not torch.cuda.is_available():
                    skip(cls.__name__ + " on cuda", "no CUDA device")
                    continue
                try:
                    ways.append(HfWay(S, cls, d))
                except Exception as e:  # noqa: BLE001 (its own words say why)
                    skip(f"{cls.__name__} on {d}", f"{type(e).__name__}: {e}")
    return ways


def machine(torch):
    cpu = platform.processor() or "?"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import PIL
    m = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%MZ"), "nproc": os.cpu_count(),
         "cpu": cpu, "python": platform.python_version(), "pillow": PIL.__version__, "numpy": np.__version__}
    try:
        m["commit"] = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                                     text=True).stdout.strip()
    except OSError:
        pass
    if torch is not None:
        m["torch"] = torch.__version__
        if torch.cuda.is_available():
            m["gpu"] = torch.cuda.get_device_name(0)
    for mod in ("torchvision", "transformers"):
        try:
            m[mod] = __import__(mod).__version__
        except ImportError:
            m[mod] = None
    return m


def fmt_bytes(b):
    if b is None:
        return "-"
    if "error" in b:
        return b["error"]
    if b["bytes_differing"] == 0:
        return "0"
    return f"{b['bytes_differing']:,} ({b['fraction'] * 100:.3g}%), up to {b['largest_difference']}"


def fmt_vals(v):
    if v is None:
        return "-"
    if "error" in v:
        return v["error"]
    if v["elements_differing"] == 0:
        return "0"
    s = f"{v['fraction'] * 100:.3g}%"
    return s + (f", up to {v['largest_difference']:.3g}" if "largest_difference" in v else "")


def markdown(doc):
    m = doc["machine"]
    lines = [f"Processor benchmark, {m['date']}: {m['cpu']}, nproc {m['nproc']}"
             + (f", {m['gpu']}" if m.get("gpu") else "") + f"; Python {m['python']}, Pillow {m['pillow']}, "
             f"NumPy {m['numpy']}, torch {m.get('torch')}, torchvision {m.get('torchvision')}, "
             f"transformers {m.get('transformers')}; pxvm {m.get('commit')}. {doc['images']} photos "
             f"({doc['photos_mb']:.1f} MB, {doc['megapixels']:.1f} Mpixels). images/s: medians of {doc['reps']} rounds, "
             "the ways alternated in each; in brackets the median over rounds of the ratio to Pillow's images/s "
             "in the same round.", ""]
    for sec in doc["sections"]:
        lines += [f"**{sec['title']}** ({sec['tokens']:,} tokens, {sec['resized_sizes']} resized sizes)", "",
                  "| way | images/s, decoded | images/s, from files | resized bytes differing from Pillow's "
                  "| float32 elements differing | bf16 elements differing | the same, from files |",
                  "|---|---|---|---|---|---|---|"]
        for r in sec["ways"]:
            lines.append(f"| {r['way']} | {r['images_per_s_decoded']:,.1f} ({r['ratio_decoded_vs_pillow']:.2f}x) "
                         f"| {r['images_per_s_files']:,.1f} ({r['ratio_files_vs_pillow']:.2f}x) | {fmt_bytes(r['bytes_vs_pillow'])} "
                         f"| {fmt_vals(r.get('float32_vs_reference'))} | {fmt_vals(r.get('bf16_vs_reference'))} "
                         f"| {fmt_vals(r.get('bf16_vs_reference_from_files'))} |")
        by = {r["way"]: r for r in sec["ways"]}
        gpu = [r for r in sec["ways"] if r["way"].endswith("-cuda") and not r["way"].startswith("pxvm")]
        for name in ("pxvm-cuda", "pxvm-cpu"):
            me = by.get(name)
            if not me:
                continue
            if name == "pxvm-cuda" and gpu:
                best = max(gpu, key=lambda r: r["images_per_s_decoded"])
                lines.append(f"- {name}, decoded: {me['images_per_s_decoded'] / best['images_per_s_decoded']:.2f}x the "
                             f"fastest other GPU processor of this run ({best['way']}, "
                             f"{best['images_per_s_decoded']:,.1f} images/s)")
            floor = doc.get("decode_floor")
            if floor:
                lines.append(f"- {name}, from files: {me['images_per_s_files'] / floor['images_per_s']:.0%} of what the "
                             f"decoders alone do on {floor['threads']} threads ({floor['images_per_s']:,.1f} images/s)")
            pool = by.get("pillow-pool")
            if pool:
                lines.append(f"- {name}: {me['ratio_decoded_vs_pillow']:.2f}x Pillow + NumPy on one thread, "
                             f"{me['images_per_s_decoded'] / pool['images_per_s_decoded']:.2f}x its pool of "
                             f"{doc['machine']['nproc']} processes (decoded)")
        lines.append("")
    floor = doc.get("decode_floor")
    if floor:
        lines.append(f"- decoders alone: pxvm's (libjpeg-turbo, libpng) on a pool of {floor['threads']} threads, the "
                     f"files decoded and nothing else: {floor['images_per_s']:,.1f} images/s (the floor of every way "
                     "from files)")
    seen = {}
    for sec in doc["sections"]:
        for r in sec["ways"]:
            seen.setdefault(r["way"], r["what"])
    lines += [f"- {k}: {v}" for k, v in seen.items()]
    for s in doc["skipped"]:
        lines.append(f"- skipped {s['way']}: {s['why']}")
    for f in doc["pxvm_failures"]:
        lines.append(f"- **ERROR** {f}")
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--photos", default=os.path.join(ROOT, "build", "photos"))
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--json")
    ap.add_argument("--md")
    ap.add_argument("--ways", help="comma-separated names to keep (default: every way available)")
    a = ap.parse_args()
    if not glob.glob(os.path.join(a.photos, "*")):
        sys.exit(f"bench_processor: no photos in {a.photos}: run sh tests/bench/photos.sh first")
    try:
        import transformers  # noqa: F401
        with_hf = True
    except ImportError:
        with_hf = False
    doc = {"sections": []}
    torch = None
    for patch, qwen in ((16, False), (14, True)):
        if qwen and not with_hf:
            skip("patch 14 (transformers' Qwen2-VL image processors)", "transformers not installed")
            continue
        S = make_setup(a.photos, patch, qwen)
        torch = torch_setup(S)
        ways = [w for w in build_ways(S, torch, qwen) if not a.ways or w.name in a.ways.split(",") or w.name == "pillow"]
        try:
            res = section(S, ways, a.reps)
        finally:
            for w in ways:
                w.close()
        if "decode_floor" not in doc:
            doc["decode_floor"] = decode_floor(S, a.reps)
        title = f"patch {patch}, merge {MERGE}" + (", temporal 2, Qwen2-VL's layout" if qwen else "")
        doc["sections"].append({"title": title, "patch": patch, "qwen_layout": qwen, "tokens": S.total_tokens,
                                "resized_sizes": len(set(S.hw)), "ways": res})
        doc["images"] = S.n
        doc["photos_mb"] = sum(os.path.getsize(f) for f in S.files) / 1e6
        doc["megapixels"] = sum(S.pixels) / 1e6
        doc["photos"] = [{"file": os.path.basename(f), "size": list(s), "mode": Image.open(f).mode,
                          "resized": [hw[1], hw[0]]} for f, s, hw in zip(S.files, S.sizes, S.hw)]
    doc["machine"] = machine(torch)
    doc["reps"] = a.reps
    doc["skipped"] = SKIPPED
    doc["pxvm_exact"] = not FAILED
    doc["pxvm_failures"] = FAILED
    md = markdown(doc)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(doc, f, indent=1)
    if a.md:
        with open(a.md, "w") as f:
            f.write(md)
    print(json.dumps(doc, indent=1))
    print(md, file=sys.stderr)
    if FAILED:
        print("bench_processor: ERROR: pxvm is not Pillow's bytes: " + "; ".join(FAILED), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
