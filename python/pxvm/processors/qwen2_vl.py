"""Qwen2-VL's (and Qwen2.5-VL's) image processor: dynamic resolution, merge windows, temporal patch."""
from __future__ import annotations

from typing import Any

from .._arrays import _is_torch, _np, _torch
from ..errors import UsageError
from . import _base
from ._base import OPENAI_CLIP_MEAN, OPENAI_CLIP_STD, BatchFeature, Processor


def _positive(name, v):
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise UsageError("usage: %s=%r: a positive integer" % (name, v))
    return v


class Qwen2VLImageProcessor(Processor):
    """transformers' Qwen2VLImageProcessor (also Qwen2.5-VL's), computed by pxvm.

        proc = pxvm.processors.Qwen2VLImageProcessor(executor="cuda")
        out = proc(images, return_tensors="pt", device="cuda")
        out.pixel_values    # [sum N_i, 3 * 2 * 14 * 14] float32, merge-window order
        out.image_grid_thw  # [n, 3] int64: (1, h', w' / 14)
        out = proc(videos=[frames], return_tensors="pt")   # pixel_values_videos, video_grid_thw

    Each image becomes smart_resize's h' x w' (docs/policies.md, policy "dynamic"; multiples of
    patch_size * merge_size, area within [min_pixels, max_pixels]) by Pillow's resize (bicubic),
    is cut into patch_size tiles taken merge window by merge window, every tile repeated
    temporal_patch_size times (an image is one frame padded, as transformers does); a video's
    frames (a list, or an (F, H, W, C) array; one size per video) pad to a multiple of
    temporal_patch_size with the last frame. One executor call resizes and tiles the batch (images
    and videos together); the float values come from one table per channel (rule=)."""

    DEFAULTS = dict(do_resize=True, resample=3, do_rescale=True, rescale_factor=1 / 255, do_normalize=True,
                    image_mean=OPENAI_CLIP_MEAN, image_std=OPENAI_CLIP_STD, do_convert_rgb=True, min_pixels=None,
                    max_pixels=None, size=None, patch_size=14, temporal_patch_size=2, merge_size=2)

    def _settings(self, cfg: dict) -> dict:
        cfg = self._common(dict(cfg))
        lo, hi = 56 * 56, 28 * 28 * 1280
        size = cfg.get("size")
        if size is not None:
            if not isinstance(size, dict):
                raise UsageError("usage: size=%r: a dict {'shortest_edge': min_pixels, 'longest_edge': max_pixels}"
                                 % (size,))
            lo = size.get("shortest_edge", size.get("min_pixels", lo))
            hi = size.get("longest_edge", size.get("max_pixels", hi))
        lo = cfg["min_pixels"] if cfg.get("min_pixels") is not None else lo
        hi = cfg["max_pixels"] if cfg.get("max_pixels") is not None else hi
        cfg["min_pixels"], cfg["max_pixels"] = _positive("min_pixels", lo), _positive("max_pixels", hi)
        for k in ("patch_size", "temporal_patch_size", "merge_size"):
            _positive(k, cfg[k])
        # the library checks the rest of the policy (ranges, min <= max), naming the value
        cfg["policy"] = "dynamic:patch=%d,merge=%d,min=%d,max=%d:%s" % (
            cfg["patch_size"], cfg["merge_size"], cfg["min_pixels"], cfg["max_pixels"], cfg["filter"])
        from ..ragged import canonical_policy
        canonical_policy(cfg["policy"])
        return cfg

    def __call__(self, images=None, videos=None, return_tensors=None, device=None, **kwargs: Any) -> BatchFeature:
        return self.preprocess(images, videos=videos, return_tensors=return_tensors, device=device, **kwargs)

    def preprocess(self, images=None, videos=None, return_tensors=None, device=None, **kwargs: Any) -> BatchFeature:
        """pixel_values and image_grid_thw for `images` (one image, a list, or a (B, H, W, C)
        batch: PIL images, arrays, tensors, paths), pixel_values_videos and video_grid_thw for
        `videos` (a list of videos, each a list of frames or an (F, H, W, C) array; one video as an
        (F, H, W, C) array is also taken); see the class."""
        s = self._call_settings(kwargs)
        groups = [[x] for x in _base.image_list(images)]
        n_images = len(groups)
        for v in _video_list(videos):
            groups.append(v)
        if not groups:
            raise UsageError("usage: %s: no images and no videos given" % type(self).__name__)
        frames, first = [], []
        for g in groups:
            first.append(len(frames))
            frames.extend(g)
        items = [_base.as_rgb(x, i) for i, x in enumerate(frames)]
        runner = self._runner(s["patch_size"])
        from ._pixels import output_on_gpu
        r = runner.patches_batch(items, policy=s["policy"],
                                 device="cuda:%d" % runner.device if output_on_gpu(runner, items, device) else None)
        values, grids = _tokens(r, groups, first, n_images, s, self._table(s))
        data = {}
        np = _np()
        counts = [int(g[0] * g[1] * g[2]) for g in grids]
        cut = sum(counts[:n_images])
        if n_images:
            data["pixel_values"] = values[:cut]
            data["image_grid_thw"] = np.array(grids[:n_images], dtype=np.int64)
        if len(groups) > n_images:
            data["pixel_values_videos"] = values[cut:]
            data["video_grid_thw"] = np.array(grids[n_images:], dtype=np.int64)
        return _base.finish(data, return_tensors, device)


def _video_list(videos) -> list:
    """videos= as a list of videos, each a list of frames."""
    if videos is None:
        return []
    shape = tuple(getattr(videos, "shape", ()))
    if len(shape) == 4:  # one video, (F, H, W, C)
        return [[videos[i] for i in range(shape[0])]]
    if not isinstance(videos, (list, tuple)) or not videos:
        raise UsageError("usage: videos: a list of videos (each a list of frames or an (F, H, W, C) array)")
    out = []
    for v in videos:
        sv = tuple(getattr(v, "shape", ()))
        if len(sv) == 4:
            out.append([v[i] for i in range(sv[0])])
        elif isinstance(v, (list, tuple)) and v:
            out.append(list(v))
        else:
            raise UsageError("usage: videos: each video is a non-empty list of frames or an (F, H, W, C) array; "
                             "got %s" % ("shape %s" % (sv,) if sv else type(v).__name__))
    return out


def merge_order(gh: int, gw: int, m: int):
    """The row-major tile indices of a gh x gw grid in merge-window order (m x m windows row-major,
    row-major inside: transformers' reshape (gh/m, m, gw/m, m) and transpose (0, 2, 1, 3))."""
    np = _np()
    return np.arange(gh * gw, dtype=np.int64).reshape(gh // m, m, gw // m, m).transpose(0, 2, 1, 3).reshape(-1)


def _tokens(r, groups, first, n_images, s, table):
    """The flat tokens [sum t*h*w, C*T*p*p] of every group (an image: one frame) from the ragged
    tiles r, and the groups' (t, h, w)."""
    np = _np()
    T, m, p = s["temporal_patch_size"], s["merge_size"], s["patch_size"]
    src, grids = [], []
    for gi, g in enumerate(groups):
        f0, nf = first[gi], len(g)
        sizes = r.sizes[f0:f0 + nf, 0]
        if (sizes != sizes[0]).any():
            raise UsageError("usage: video %d: frames of several sizes (%s): a video's frames share one size" %
                             (gi - n_images, ", ".join(
                                 "%dx%d" % tuple(wh) for wh in np.unique(sizes, axis=0))))
        _, gh, gw = (int(v) for v in r.grid[f0])
        frames = list(range(f0, f0 + nf)) + [f0 + nf - 1] * ((-nf) % T)
        gt = len(frames) // T
        starts = r.offsets[frames].reshape(gt, T)  # each frame's first tile
        order = merge_order(gh, gw, m)
        idx = starts[:, None, :] + order[None, :, None]  # (gt, N, T)
        src.append(idx.reshape(-1, T))
        grids.append((gt, gh, gw))
    src = np.concatenate(src)
    tiles = r.tokens
    if _is_torch(tiles):
        torch = _torch()
        picked = tiles[torch.from_numpy(src).to(tiles.device)]  # (K, T, p, p, 4)
        vals = _base.look_up(table, picked).permute(0, 4, 1, 2, 3)
    else:
        vals = _base.look_up(table, tiles[src]).transpose(0, 4, 1, 2, 3)
    return vals.reshape(len(src), 3 * T * p * p), grids
