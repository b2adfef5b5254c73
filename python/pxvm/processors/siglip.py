"""SigLIP's image processor: a square (or any fixed) resize."""
from __future__ import annotations

from typing import Any

from . import _base
from ._base import IMAGENET_STANDARD_MEAN, IMAGENET_STANDARD_STD, BatchFeature, Processor
from .clip import fixed_batch, hw_of


class SiglipImageProcessor(Processor):
    """transformers' SiglipImageProcessor, computed by pxvm.

        proc = pxvm.processors.SiglipImageProcessor()     # 224 x 224; size={"height": 384, "width": 384}
        out = proc(images, return_tensors="pt", device="cuda")
        out.pixel_values    # [n, 3, 224, 224] float32

    Each image is resized to size (Pillow's resize, bicubic; aspect not kept), then its values come
    from one table per channel (rule=; mean and std 0.5). One executor call for the batch.
    transformers' do_convert_rgb defaults to None here (a grey or RGBA image fails there); pxvm
    converts every image to RGB, as with do_convert_rgb=True."""

    DEFAULTS = dict(do_resize=True, size={"height": 224, "width": 224}, resample=3, do_rescale=True,
                    rescale_factor=1 / 255, do_normalize=True, image_mean=IMAGENET_STANDARD_MEAN,
                    image_std=IMAGENET_STANDARD_STD, do_convert_rgb=None)

    def _settings(self, cfg: dict) -> dict:
        cfg = self._common(dict(cfg))
        cfg["resize_to"] = hw_of("size", cfg["size"])
        return cfg

    def __call__(self, images, return_tensors=None, device=None, **kwargs: Any) -> BatchFeature:
        """preprocess(images, ...), which says what it returns: a processor is called as transformers' are."""
        return self.preprocess(images, return_tensors=return_tensors, device=device, **kwargs)

    def preprocess(self, images, return_tensors=None, device=None, **kwargs: Any) -> BatchFeature:
        """pixel_values [n, 3, h, w] for images (one image, a list, or a (B, H, W, C) batch: PIL
        images, arrays, tensors, paths); see the class."""
        s = self._call_settings(kwargs)
        return _base.finish({"pixel_values": fixed_batch(self, s, images, device)},
                            return_tensors, device)
