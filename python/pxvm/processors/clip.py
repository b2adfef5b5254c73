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
        """preprocess(images, ...), which says what it returns: a processor is called as transformers' are."""
        return self.preprocess(images, return_tensors=return_tensors, device=device, **kwargs)

    def preprocess(self, images, return_tensors=None, device=None, **kwargs: Any) -> BatchFeature:
        """pixel_values [n, 3, crop h, crop w] for images (one image, a list, or a (B, H, W, C)
        batch: PIL images, arrays, tensors, paths); see the class."""
        s = self._call_settings(kwargs)
        return _base.finish({"pixel_values": fixed_batch(self, s, images, device)},
                            return_tensors, device)


def _crop(a, ch, cw):
    """image_transforms.center_crop of a batch (n, H, W, C) of one size: the window, or zero
    padding where the crop is larger (the image at ceil((ch - H) / 2), as transformers places it)."""
    np = _np()
    h, w = int(a.shape[1]), int(a.shape[2])
    top, left = (h - ch) // 2, (w - cw) // 2
    if top >= 0 and left >= 0:
        return a[:, top:top + ch, left:left + cw]
    nh, nw = max(ch, h), max(cw, w)
    tp, lp = -(-(nh - h) // 2), -(-(nw - w) // 2)  # ceil
    shape = (a.shape[0], nh, nw) + tuple(a.shape[3:])
    new = a.new_zeros(shape) if _is_torch(a) else np.zeros(shape, dtype=a.dtype)
    new[:, tp:tp + h, lp:lp + w] = a
    top, left = top + tp, left + lp
    return new[:, max(0, top):min(nh, top + ch), max(0, left):min(nw, left + cw)]


def fixed_batch(proc, s, images, device):
    """[n, 3, h, w] float32 of the images brought to one size, in one executor call: resized to
    s["resize_to"] (stretch) or, with s["crop"], by policy crop (shortest edge s["short"]) or
    resized then centre-cropped here. With the usual rescale (1/255) and nothing to crop here,
    the executor writes the values; else it writes the pixels and the rule's table gives them."""
    items = _base.rgb_items(_base.image_list(images))
    if not items:
        raise UsageError("usage: %s: no images given" % type(proc).__name__)
    crop, then_crop = s.get("crop"), None
    if crop is None:
        policy, hw = "stretch:%s" % s["filter"], s["resize_to"]
    elif s.get("short") is not None:  # policy crop: the shortest-edge resize and the centre crop
        policy, hw = "crop:short=%d:%s" % (s["short"], s["filter"]), crop
    else:  # a resize to (height, width), then the crop
        policy, hw, then_crop = "stretch:%s" % s["filter"], s["resize_to"], crop
    h, w = hw
    p = tile_side(h, w)
    runner = proc._runner(p)
    where = "cuda:%d" % runner.device if _base.output_on_gpu(runner, items, device) else None
    n = len(items)
    if s["do_rescale"] and s["rescale_factor"] == 1 / 255 and then_crop is None:
        norm = (s["image_mean"], s["image_std"]) if s["do_normalize"] else ((0.0,) * 3, (1.0,) * 3)
        t = runner.tokens_batch(items, policy=policy, size=(w, h), dtype="float32", normalize=norm, layout="nchw",
                                merge=1, rule=proc.rule, device=where).tokens
        return t if p == h and p == w else _untile(t, n, h, w, p, (0, 3, 1, 4, 2, 5), (n, 3, h, w))
    px = runner.patches_batch(items, policy=policy, size=(w, h), merge=1, device=where).tokens  # (N, p, p, 4)
    px = _untile(px, n, h, w, p, (0, 1, 3, 2, 4, 5), (n, h, w, 4))
    if then_crop is not None:
        px = _crop(px, *then_crop)
    vals = _base.look_up(proc._table(s), px)
    return vals.permute(0, 3, 1, 2).contiguous() if _is_torch(vals) else \
        _np().ascontiguousarray(vals.transpose(0, 3, 1, 2))


def _untile(t, n, h, w, p, order, shape):
    """Row-major tiles of side p of n images h x w put back together (nchw tokens: order
    (0, 3, 1, 4, 2, 5) to (n, C, h, w); RGBA8 tiles: (0, 1, 3, 2, 4, 5) to (n, h, w, 4))."""
    t = t.reshape((n, h // p, w // p) + tuple(t.shape[1:]))
    t = t.permute(*order) if _is_torch(t) else t.transpose(*order)
    return t.reshape(shape)


def tile_side(h: int, w: int) -> int:
    """The largest tile side (at most 256, the library's) that divides both sides."""
    g = math.gcd(h, w)
    return max(d for d in range(1, min(g, 256) + 1) if g % d == 0)
