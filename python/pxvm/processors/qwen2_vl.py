"""Qwen2-VL's (and Qwen2.5-VL's) image processor: dynamic resolution, merge windows, temporal patch."""
from __future__ import annotations

from typing import Any

from .._arrays import _is_torch, _np
from ..errors import UsageError
from ..ragged import canonical_policy, image_hw
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
        canonical_policy(cfg["policy"])
        return cfg

    def __call__(self, images=None, videos=None, return_tensors=None, device=None, **kwargs: Any) -> BatchFeature:
        """preprocess(images, ...), which says what it returns: a processor is called as transformers' are."""
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
        T = s["temporal_patch_size"]
        rgb = iter(_base.rgb_items([x for g in groups for x in g]))
        items, grids_t = [], []
        for gi, g in enumerate(groups):
            g = [next(rgb) for _ in g]
            if gi >= n_images:
                sizes = {image_hw(x) for x in g}
                if len(sizes) > 1:
                    raise UsageError("usage: video %d: frames of several sizes (%s): a video's frames share one size"
                                     % (gi - n_images, ", ".join("%dx%d" % (w, h) for h, w in sorted(sizes))))
            padded = g + [g[-1]] * ((-len(g)) % T)  # the last frame repeated (an image: T times)
            items.extend(padded)
            grids_t.append(len(padded) // T)
        runner = self._runner(s["patch_size"])
        where = "cuda:%d" % runner.device if _base.output_on_gpu(runner, items, device) else None
        p, m = s["patch_size"], s["merge_size"]
        if s["do_rescale"] and s["rescale_factor"] == 1 / 255:  # the executor writes the values
            norm = (s["image_mean"], s["image_std"]) if s["do_normalize"] else ((0.0,) * 3, (1.0,) * 3)
            r = runner.tokens_batch(items, policy=s["policy"], dtype="float32", normalize=norm, layout="flat",
                                    merge=m, temporal=T, rule=self.rule, device=where)
            values = r.tokens
        else:  # another rescale: the tiles, then the rule's table
            r = runner.patches_batch(items, policy=s["policy"], merge=m, temporal=T, device=where)
            vals = _base.look_up(self._table(s), r.tokens)  # (N, T, p, p, 3)
            vals = vals.permute(0, 4, 1, 2, 3) if _is_torch(vals) else vals.transpose(0, 4, 1, 2, 3)
            values = vals.reshape(len(vals), 3 * T * p * p)
        grids, k = [], 0
        for t in grids_t:  # an image or video's items are consecutive, each one of its t
            grids.append((t, int(r.grid[k][1]), int(r.grid[k][2])))
            k += t
        return self._result(values, grids, n_images, len(groups), return_tensors, device)

    @staticmethod
    def _result(values, grids, n_images, n_groups, return_tensors, device) -> BatchFeature:
        """The BatchFeature of the packed values of n_images images then the videos."""
        data = {}
        np = _np()
        counts = [int(g[0] * g[1] * g[2]) for g in grids]
        cut = sum(counts[:n_images])
        if n_images:
            data["pixel_values"] = values[:cut]
            data["image_grid_thw"] = np.array(grids[:n_images], dtype=np.int64)
        if n_groups > n_images:
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
