"""CLIP's (and LLaVA-1.5's) image processor: shortest-edge resize, centre crop."""
from __future__ import annotations

import math
from typing import Any

from .._arrays import _is_torch, _np
from ..errors import UsageError
from . import _base
from ._base import OPENAI_CLIP_MEAN, OPENAI_CLIP_STD, BatchFeature, Processor


def _side(name, v):
    if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= 16384:
        raise UsageError("usage: %s: %r is no side (an integer 1..16384)" % (name, v))
    return v


def hw_of(name: str, size) -> tuple:
    """{"height": h, "width": w} (or an int: square) as (h, w)."""
    if isinstance(size, int) and not isinstance(size, bool):
        return _side(name, size), size
    if isinstance(size, dict) and "height" in size and "width" in size:
        return _side(name + "['height']", size["height"]), _side(name + "['width']", size["width"])
    raise UsageError("usage: %s=%r: {'height': h, 'width': w} or an int" % (name, size))


def shortest_edge_size(height: int, width: int, size: int) -> tuple:
    """transformers' get_resize_output_image_size(size, default_to_square=False): the short side
    becomes `size`, the long one int(size * long / short) (a double division, truncated)."""
    short, long = (width, height) if width <= height else (height, width)
    new_long = int(size * long / short)
    return (new_long, size) if width <= height else (size, new_long)


class CLIPImageProcessor(Processor):
    """transformers' CLIPImageProcessor (CLIP, LLaVA-1.5), computed by pxvm.

        proc = pxvm.processors.CLIPImageProcessor()        # size 224, crop 224 (CLIP ViT-B/32, ViT-L/14)
        proc = pxvm.processors.CLIPImageProcessor(size={"shortest_edge": 336}, crop_size=336)   # LLaVA-1.5
        out = proc(images, return_tensors="pt", device="cuda")
        out.pixel_values    # [n, 3, 224, 224] float32

    Each image is resized (Pillow's resize, bicubic) so that its short side is
    size["shortest_edge"] (the long one int(S * long / short)), or to size {"height", "width"},
    then cropped to crop_size at the centre (top = (h - ch) // 2, left = (w - cw) // 2), then its
    values come from one table per channel (rule=). One executor call for the batch (policy
    "crop:short=S", docs/policies.md) writes the values; a resize to {"height", "width"} before
    the crop, or another rescale than 1/255, takes one call per resized size and the table in
    NumPy or torch."""

    DEFAULTS = dict(do_resize=True, size={"shortest_edge": 224}, resample=3, do_center_crop=True,
                    crop_size={"height": 224, "width": 224}, do_rescale=True, rescale_factor=1 / 255,
                    do_normalize=True, image_mean=OPENAI_CLIP_MEAN, image_std=OPENAI_CLIP_STD, do_convert_rgb=True)

    def _settings(self, cfg: dict) -> dict:
        cfg = self._common(dict(cfg))
        size = cfg["size"]
        if isinstance(size, int) and not isinstance(size, bool):  # get_size_dict(default_to_square=False)
            size = {"shortest_edge": size}
        if isinstance(size, dict) and "shortest_edge" in size:
            cfg["short"], cfg["resize_to"] = _side("size['shortest_edge']", size["shortest_edge"]), None
        else:
            cfg["short"], cfg["resize_to"] = None, hw_of("size", size)
        if cfg["do_center_crop"] is not True:
            raise UsageError("usage: %s: do_center_crop=%r: pxvm.processors always crop (do_center_crop=True)" %
                             (type(self).__name__, cfg["do_center_crop"]))
        cfg["crop"] = hw_of("crop_size", cfg["crop_size"])
        return cfg

    def __call__(self, images, return_tensors=None, device=None, **kwargs: Any) -> BatchFeature:
        return self.preprocess(images, return_tensors=return_tensors, device=device, **kwargs)

    def _resized_hw(self, s, h, w):
        return shortest_edge_size(h, w, s["short"]) if s["short"] is not None else s["resize_to"]

    def preprocess(self, images, return_tensors=None, device=None, **kwargs: Any) -> BatchFeature:
        """pixel_values [n, 3, crop h, crop w] for images (one image, a list, or a (B, H, W, C)
        batch: PIL images, arrays, tensors, paths); see the class."""
        s = self._call_settings(kwargs)
        return _base.finish({"pixel_values": fixed_batch(self, s, images, device, self._resized_hw)},
                            return_tensors, device)


def _crop(a, ch, cw):
    """image_transforms.center_crop of (H, W, C): the window, or zero padding where it is larger."""
    np = _np()
    h, w = int(a.shape[0]), int(a.shape[1])
    top, left = (h - ch) // 2, (w - cw) // 2
    if top >= 0 and left >= 0:
        return a[top:top + ch, left:left + cw]
    nh, nw = max(ch, h), max(cw, w)
    tp, lp = -(-(nh - h) // 2), -(-(nw - w) // 2)  # ceil
    if _is_torch(a):
        new = a.new_zeros((nh, nw) + tuple(a.shape[2:]))
    else:
        new = np.zeros((nh, nw) + a.shape[2:], dtype=a.dtype)
    new[tp:tp + h, lp:lp + w] = a
    top, left = top + tp, left + lp
    return new[max(0, top):min(nh, top + ch), max(0, left):min(nw, left + cw)]


def fixed_batch(proc, s, images, device, resized_hw):
    """[n, 3, ch, cw] float32: each image resized to resized_hw(s, h, w) (None: s["resize_to"]) by
    the executor, centre-cropped to s["crop"] (None: no crop). Without a crop and with the usual
    rescale (1/255) the executor writes the values (one call); else it resizes (one call per
    resized size) and the values come from the rule's table."""
    resized_hw = resized_hw or (lambda s, h, w: s["resize_to"])
    from ._pixels import resized
    from ..ragged import image_hw
    np = _np()
    items = [_base.as_rgb(x, i) for i, x in enumerate(_base.image_list(images))]
    if not items:
        raise UsageError("usage: %s: no images given" % type(proc).__name__)
    crop = s.get("crop")
    if s["do_rescale"] and s["rescale_factor"] == 1 / 255:  # the executor writes the values
        if crop is None:
            return _executor_values(proc, s, items, device, s["resize_to"], "stretch:%s" % s["filter"])
        if s.get("short") is not None:  # policy crop: the shortest-edge resize and the centre crop
            return _executor_values(proc, s, items, device, crop, "crop:short=%d:%s" % (s["short"], s["filter"]))
    runner = proc._runner(1)
    by_size = {}
    for i, x in enumerate(items):
        hw = image_hw(x)
        if hw is None:
            raise UsageError("usage: image %d: an array or tensor (H, W), (H, W, C) or (C, H, W) with C in 1, 3, 4; "
                             "got shape %s" % (i, tuple(x.shape)))
        by_size.setdefault(tuple(resized_hw(s, *hw)), []).append(i)
    parts = [None] * len(items)
    for (h, w), idx in by_size.items():
        px = resized(runner, [items[i] for i in idx], "stretch:%s" % s["filter"], w, h, device)
        for j, i in enumerate(idx):
            parts[i] = _crop(px[j], *crop) if crop is not None else px[j]
    table = proc._table(s)
    if _is_torch(parts[0]):
        import torch
        rgb = torch.stack(parts)
        return _base.look_up(table, rgb).permute(0, 3, 1, 2).contiguous()
    rgb = np.stack(parts)
    return np.ascontiguousarray(_base.look_up(table, rgb).transpose(0, 3, 1, 2))


def tile_side(h: int, w: int) -> int:
    """The largest tile side (at most 256, the library's) that divides both sides."""
    g = math.gcd(h, w)
    return max(d for d in range(1, min(g, 256) + 1) if g % d == 0)


def _executor_values(proc, s, items, device, hw, policy):
    """[n, 3, h, w] float32 of the images brought to hw = (h, w) by `policy` (stretch, or crop),
    the values written by the executor (tokens_batch: one call; tiles of the largest side that
    fits, put back together when there are several per image)."""
    from ._pixels import output_on_gpu
    h, w = hw
    p = tile_side(h, w)
    runner = proc._runner(p)
    where = "cuda:%d" % runner.device if output_on_gpu(runner, items, device) else None
    norm = (s["image_mean"], s["image_std"]) if s["do_normalize"] else ((0.0,) * 3, (1.0,) * 3)
    r = runner.tokens_batch(items, policy=policy, size=(w, h), dtype="float32", normalize=norm,
                            layout="nchw", merge=1, rule=proc.rule, device=where)
    t, n = r.tokens, len(items)
    if p == h and p == w:
        return t
    t = t.reshape(n, h // p, w // p, 3, p, p)
    t = t.permute(0, 3, 1, 4, 2, 5) if _is_torch(t) else t.transpose(0, 3, 1, 4, 2, 5)
    return t.reshape(n, 3, h, w)
