"""Drop-in image processors: transformers' Qwen2-VL, CLIP and SigLIP processors, computed by pxvm.

    proc = pxvm.processors.Qwen2VLImageProcessor(executor="auto")
    out = proc(images, return_tensors="pt", device="cuda")    # out.pixel_values, out.image_grid_thw

Called as transformers' image processors are (keyword arguments as transformers names them;
others are refused, named), they return a BatchFeature-like dict. With rule="transformers4" (the
default) the values are bit for bit those of transformers 4.x's Pillow-based processors; rule
"float32" is isa/SPEC.md section 9's. docs/processors.md says more.
"""
from ._base import BatchFeature, value_table  # noqa: F401
from .clip import CLIPImageProcessor
from .qwen2_vl import Qwen2VLImageProcessor
from .siglip import SiglipImageProcessor

#: Qwen2.5-VL uses Qwen2-VL's image processor
Qwen2_5_VLImageProcessor = Qwen2VLImageProcessor

__all__ = ["BatchFeature", "CLIPImageProcessor", "Qwen2VLImageProcessor", "Qwen2_5_VLImageProcessor",
           "SiglipImageProcessor", "value_table"]
