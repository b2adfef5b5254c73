"""How transformers 5's image processors differ from pxvm's and from transformers 4.x's values.

    PXVM_LIB=build/libpxvm.so.1 PYTHONPATH=python python3 tests/bench/compare_transformers5.py \
        [--photos DIR_OR_FILE ...] [--limit N] [--executor auto] [--json OUT.json]

For each family (Qwen2-VL, CLIP, SigLIP) it builds transformers' processors directly from their
classes with the config values (no hub, no network): the default one (the class named as in 4.x,
which transformers 5 backs by torchvision), the "Fast" name where it exists, on the CPU and, where
a GPU is, on CUDA (device="cuda"), and the Pillow one (``...Pil``, or the 4.x-style class) where
transformers 5 still has it. It runs them, pxvm.processors (rule "transformers4" and "float32")
and tests/python/reference_hf4.py (the Pillow + NumPy transcription of 4.x the tests hold pxvm
to) on the same photos (pxvm on the cpu executor and, where a GPU is, the cuda one, tokens
written on the GPU) (PIL images, RGB-converted first as every processor here does), and
prints a table and writes JSON: per pair, whether the sizes/grids agree, the fraction of
differing float32 values, the largest and the mean absolute difference. A class or a device that
is missing, or a processor that fails, gives a row that says so: the script runs to the end.
Values are compared where the shapes agree (for Qwen2-VL: per image whose grid agrees).
"""
import argparse
import glob
import json
import os
import sys
import time
import traceback

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "tests", "python"))

from PIL import Image  # noqa: E402

import pxvm  # noqa: E402
import reference_hf4 as ref  # noqa: E402

FAMILIES = {
    "qwen2vl": dict(pxvm="Qwen2VLImageProcessor", hf=["Qwen2VLImageProcessor", "Qwen2VLImageProcessorFast"],
                    pil=["Qwen2VLImageProcessorPil"], keys=("pixel_values", "image_grid_thw"),
                    config=dict(min_pixels=3136, max_pixels=1003520, patch_size=14, temporal_patch_size=2,
                                merge_size=2, image_mean=ref.OPENAI_CLIP_MEAN, image_std=ref.OPENAI_CLIP_STD),
                    hf_config=dict(size={"shortest_edge": 3136, "longest_edge": 1003520}, patch_size=14,
                                   temporal_patch_size=2, merge_size=2, image_mean=ref.OPENAI_CLIP_MEAN,
                                   image_std=ref.OPENAI_CLIP_STD),
                    reference=lambda ims: ref.qwen2vl(ims)),
    "clip": dict(pxvm="CLIPImageProcessor", hf=["CLIPImageProcessor", "CLIPImageProcessorFast"],
                 pil=["CLIPImageProcessorPil"], keys=("pixel_values",),
                 config=dict(size={"shortest_edge": 224}, crop_size={"height": 224, "width": 224}),
                 hf_config=dict(size={"shortest_edge": 224}, crop_size={"height": 224, "width": 224},
                                do_center_crop=True, resample=3, image_mean=ref.OPENAI_CLIP_MEAN,
                                image_std=ref.OPENAI_CLIP_STD, do_convert_rgb=True),
                 reference=lambda ims: ref.clip(ims)),
    "siglip": dict(pxvm="SiglipImageProcessor", hf=["SiglipImageProcessor", "SiglipImageProcessorFast"],
                   pil=["SiglipImageProcessorPil"], keys=("pixel_values",),
                   config=dict(size={"height": 224, "width": 224}),
                   hf_config=dict(size={"height": 224, "width": 224}, resample=3, image_mean=[0.5] * 3,
                                  image_std=[0.5] * 3),
                   reference=lambda ims: ref.siglip(ims)),
}


def photos(paths, limit):
    files = []
    for p in paths:
        if os.path.isdir(p):
            files += sorted(glob.glob(os.path.join(p, "*.png")) + glob.glob(os.path.join(p, "*.jpg")))
        elif os.path.exists(p):
            files.append(p)
    files = files[:limit] if limit else files
    ims = []
    for f in files:
        im = Image.open(f)
        im.load()
        ims.append(im.convert("RGB"))  # every processor compared gets RGB (SigLIP's does not convert)
    return files, ims


def as_numpy(d, keys):
    out = {}
    for k in keys:
        v = d[k]
        if hasattr(v, "detach"):
            v = v.detach().float().cpu().numpy() if v.is_floating_point() else v.cpu().numpy()
        out[k] = np.asarray(v)
    return out


def compare(a, b, family):
    """The figures of one pair of results (dicts of NumPy arrays)."""
    row = {}
    if family == "qwen2vl":
        ga, gb = a["image_grid_thw"].reshape(-1, 3), b["image_grid_thw"].reshape(-1, 3)
        row["grids_agree"] = bool(ga.shape == gb.shape and (ga == gb).all())
        row["images_grid_differs"] = int((ga != gb).any(axis=1).sum()) if ga.shape == gb.shape else None
        if ga.shape != gb.shape:
            row["note"] = "different image counts"
            return row
        na, nb = np.r_[0, np.cumsum(ga.prod(axis=1))], np.r_[0, np.cumsum(gb.prod(axis=1))]
        same = [i for i in range(len(ga)) if (ga[i] == gb[i]).all()]
        va = np.concatenate([a["pixel_values"][na[i]:na[i + 1]] for i in same]) if same else np.zeros(0, np.float32)
        vb = np.concatenate([b["pixel_values"][nb[i]:nb[i + 1]] for i in same]) if same else np.zeros(0, np.float32)
        if va.shape[1:] != vb.shape[1:]:
            row["note"] = "token widths differ: %s vs %s" % (va.shape, vb.shape)
            return row
    else:
        va, vb = a["pixel_values"], b["pixel_values"]
        row["sizes_agree"] = bool(va.shape == vb.shape)
        if va.shape != vb.shape:
            row["note"] = "shapes differ: %s vs %s" % (va.shape, vb.shape)
            return row
    va, vb = va.astype(np.float32), vb.astype(np.float32)
    differ = va.view(np.uint32) != vb.view(np.uint32)
    d = np.abs(va.astype(np.float64) - vb.astype(np.float64))
    row.update(values=int(va.size), differing=float(differ.mean()) if va.size else 0.0,
               max_abs=float(d.max()) if d.size else 0.0, mean_abs=float(d.mean()) if d.size else 0.0)
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--photos", nargs="*", default=[os.path.join(ROOT, "build", "photos"),
                                                    os.path.join(ROOT, "programs", "data", "chelsea.png")])
    ap.add_argument("--limit", type=int, default=0, help="at most N photos (0: all)")
    ap.add_argument("--executors", default=None,
                    help="pxvm's executors, comma-separated (default: cpu, and cuda where torch sees a GPU)")
    ap.add_argument("--json", default="compare_transformers5.json")
    args = ap.parse_args()
    files, ims = photos(args.photos, args.limit)
    if not ims:
        sys.exit("no photos (run sh tests/bench/photos.sh, or give --photos)")
    try:
        import transformers
        version = transformers.__version__
    except Exception as e:  # noqa: BLE001 (any import failure is a row, not an end)
        transformers, version = None, "not importable: %s" % e
    try:
        import torch
        cuda = torch.cuda.is_available()
    except ImportError:
        torch, cuda = None, False
    executors = args.executors.split(",") if args.executors else ["cpu"] + (["cuda"] if cuda else [])
    info = dict(transformers=version, pillow=Image.__version__, numpy=np.__version__,
                torch=getattr(torch, "__version__", None), cuda=cuda, pxvm=pxvm.library_version,
                photos=[os.path.relpath(f, ROOT) for f in files])
    print("transformers %s, Pillow %s, NumPy %s, torch %s (cuda %s), pxvm %s; %d photos" %
          (version, info["pillow"], info["numpy"], info["torch"], cuda, info["pxvm"], len(files)))
    rows = []
    for fam, spec in FAMILIES.items():
        results, status = {}, {}

        def run(name, fn):
            t = time.perf_counter()
            try:
                results[name] = as_numpy(fn(), spec["keys"])
                status[name] = "ok (%.2f s)" % (time.perf_counter() - t)
            except Exception as e:  # noqa: BLE001 (a failing processor is a row)
                status[name] = "failed: %s: %s" % (type(e).__name__, str(e).splitlines()[0][:160] if str(e) else "")
                traceback.print_exc(limit=2)

        run("reference_hf4", lambda: spec["reference"](ims))
        for ex in executors:
            for rule in ("transformers4", "float32"):
                proc = getattr(pxvm.processors, spec["pxvm"])(executor=ex, rule=rule, **spec["config"])
                run("pxvm/%s" % rule + ("" if ex == "cpu" else " " + ex),
                    lambda proc=proc, ex=ex: proc(ims, return_tensors="pt", device=None if ex == "cpu" else ex))
        for kind, names in (("hf5", spec["hf"]), ("hf5-pil", spec["pil"])):
            for name in names:
                cls = getattr(transformers, name, None) if transformers is not None else None
                if cls is None:
                    status["%s %s" % (kind, name)] = ("missing: transformers %s" % version if transformers is None
                                                      else "missing: transformers %s has no %s" % (version, name))
                    continue
                devices = ["cpu"] + (["cuda"] if cuda and kind == "hf5" else [])
                for dev in devices:
                    label = "%s %s%s" % (kind, name, "" if dev == "cpu" else " cuda")

                    def call(cls=cls, dev=dev):
                        proc = cls(**spec["hf_config"])
                        kw = {"device": dev} if dev != "cpu" else {}
                        try:
                            return proc(ims, return_tensors="pt", **kw)
                        except TypeError:
                            if kw:
                                raise
                            return proc(ims, return_tensors="np")
                    run(label, call)
        for name, st in status.items():
            rows.append(dict(family=fam, a=name, b=None, status=st))
        names = list(results)
        anchors = [n for n in ("reference_hf4", "pxvm/transformers4", "pxvm/float32") if n in results]
        done = set()
        for x in anchors:
            for y in names:
                if x == y or (y, x) in done:
                    continue
                done.add((x, y))
                rows.append(dict(family=fam, a=x, b=y, **compare(results[x], results[y], fam)))
    print("\n%-8s %-32s %-38s %-6s %-10s %-10s %-10s %s" % ("family", "a", "b", "sizes", "differing", "max abs",
                                                          "mean abs", "note"))
    for r in rows:
        if r["b"] is None:
            print("%-8s %-32s %s" % (r["family"], r["a"], r["status"]))
            continue
        agree = r.get("grids_agree", r.get("sizes_agree"))
        print("%-8s %-32s %-38s %-6s %-10s %-10s %-10s %s" % (
            r["family"], r["a"], r["b"], "yes" if agree else "NO",
            "%.4f%%" % (100 * r["differing"]) if "differing" in r else "-",
            "%.3g" % r["max_abs"] if "max_abs" in r else "-", "%.3g" % r["mean_abs"] if "mean_abs" in r else "-",
            r.get("note", "") + ("" if not r.get("images_grid_differs") else
                                 "%d images' grids differ" % r["images_grid_differs"])))
    with open(args.json, "w") as f:
        json.dump(dict(info=info, rows=rows), f, indent=1)
    print("\nwrote", args.json)


if __name__ == "__main__":
    main()
