"""Pillow + NumPy references of transformers 4.x's slow (Pillow-based) image processors.

transformers is not installed offline, so these are transcriptions of its 4.x source, not its
code: each step is the one the named function takes, with the same NumPy dtypes, in the same
order. Sources (huggingface/transformers, the 4.4x-4.5x releases, e.g. v4.51):
- src/transformers/image_transforms.py: ``convert_to_rgb`` (a PIL image not in mode "RGB" is
  ``image.convert("RGB")``, other inputs untouched), ``resize`` (a uint8 array goes through
  ``to_pil_image`` without rescaling, ``PIL.Image.resize((width, height), resample,
  reducing_gap=None)`` and back to an array), ``rescale`` (``image.astype(np.float64) * scale``,
  then ``.astype(np.float32)``), ``normalize`` (mean and std as arrays of the image's dtype,
  float32: ``(image - mean) / std`` channel-last), ``center_crop`` (``top = (h - ch) // 2``,
  ``left = (w - cw) // 2``; zero padding when the crop is larger), ``get_resize_output_image_size``
  (shortest edge: ``int(size * long / short)`` for the long side);
- src/transformers/models/qwen2_vl/image_processing_qwen2_vl.py: ``smart_resize``,
  ``Qwen2VLImageProcessor._preprocess`` (every frame resized to the size of the first, rescale,
  normalize, channel-first, frames padded to a multiple of temporal_patch_size by repeating the
  last, the reshape to (t, T, C, h/m, m, p, w/m, m, p), transpose (0, 3, 6, 4, 7, 2, 1, 5, 8),
  flatten to [t*h*w, C*T*p*p]) and ``preprocess`` (each image its own ``_preprocess`` call, one
  per video: ``pixel_values``/``image_grid_thw``, ``pixel_values_videos``/``video_grid_thw``);
- src/transformers/models/clip/image_processing_clip.py: ``CLIPImageProcessor.resize``
  (``{"shortest_edge": s}``: ``get_resize_output_image_size(default_to_square=False)``;
  ``{"height", "width"}``: that size) and ``preprocess`` (convert RGB, resize, center_crop,
  rescale, normalize, channel-first);
- src/transformers/models/siglip/image_processing_siglip.py: ``SiglipImageProcessor.preprocess``
  (resize to (height, width), rescale, normalize 0.5/0.5; its do_convert_rgb defaults to None, so
  a non-RGB image fails there: the reference, like pxvm, converts it to RGB first).

``rule="float32"`` swaps rescale + normalize for pxvm's SPEC section 9 rule (every step in
float32, r = fl32(1/255)); everything else is the same.
"""
import math

import numpy as np
from PIL import Image

OPENAI_CLIP_MEAN = [0.48145466, 0.4578275, 0.40821073]
OPENAI_CLIP_STD = [0.26862954, 0.26130258, 0.27577711]
IMAGENET_STANDARD_MEAN = [0.5, 0.5, 0.5]
IMAGENET_STANDARD_STD = [0.5, 0.5, 0.5]


def to_rgb_array(image):
    """convert_to_rgb then to_numpy_array: a PIL image as an (H, W, 3) uint8 array (mode "RGB",
    else image.convert("RGB"): alpha dropped, palette looked up, grey replicated); an array as
    it is (an (H, W, 3) uint8 array here)."""
    if isinstance(image, Image.Image):
        if image.mode != "RGB":
            image = image.convert("RGB")
        return np.array(image)
    a = np.asarray(image)
    assert a.dtype == np.uint8 and a.ndim == 3 and a.shape[2] == 3, "the references take RGB uint8 arrays"
    return a


def pil_resize(a, height, width, resample=Image.BICUBIC):
    """image_transforms.resize of a uint8 (H, W, 3) array: to_pil_image (no rescale: uint8),
    PIL's resize((width, height), resample, reducing_gap=None), np.array back."""
    return np.array(Image.fromarray(a).resize((width, height), resample=resample, reducing_gap=None))


def rescale(a, scale):
    """image_transforms.rescale: float64 product, then float32."""
    return (a.astype(np.float64) * scale).astype(np.float32)


def normalize(a, mean, std):
    """image_transforms.normalize, channel-last, in the image's dtype (float32)."""
    if not np.issubdtype(a.dtype, np.floating):
        a = a.astype(np.float32)
    return (a - np.array(mean, dtype=a.dtype)) / np.array(std, dtype=a.dtype)


def float32_rule(a, scale, mean, std):
    """pxvm's SPEC section 9 rule: x = fl32(fl32(u) * r), y = fl32(fl32(x - m) / s), float32 all
    through (r, m, s the float32 values nearest the doubles given)."""
    x = a.astype(np.float32) * np.float32(scale)
    return (x - np.array(mean, dtype=np.float32)) / np.array(std, dtype=np.float32)


def values(a, rule, do_rescale, scale, do_normalize, mean, std):
    """A uint8 channel-last image's float values by `rule` ("transformers4": rescale then
    normalize as transformers 4.x; "float32": section 9, a step not asked for being r = 1, or
    mean 0 and std 1)."""
    if rule == "float32":
        return float32_rule(a, scale if do_rescale else 1.0, mean if do_normalize else (0.0,) * 3,
                            std if do_normalize else (1.0,) * 3)
    assert rule == "transformers4", rule
    out = a
    if do_rescale:
        out = rescale(out, scale)
    if do_normalize:
        out = normalize(out, mean, std)
    return out


# ---- Qwen2-VL ------------------------------------------------------------------------------

def smart_resize(height, width, factor=28, min_pixels=56 * 56, max_pixels=28 * 28 * 1280):
    """image_processing_qwen2_vl.smart_resize (4.x): (h', w') multiples of factor, area within
    [min_pixels, max_pixels] where it can be, aspect kept."""
    if max(height, width) / min(height, width) > 200:
        raise ValueError("absolute aspect ratio must be smaller than 200, got %s" %
                         (max(height, width) / min(height, width)))
    h_bar = round(height / factor) * factor
    w_bar = round(width / factor) * factor
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt((height * width) / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return h_bar, w_bar


def qwen2vl_one(frames, rule="transformers4", do_resize=True, resample=Image.BICUBIC, do_rescale=True,
                rescale_factor=1 / 255, do_normalize=True, image_mean=OPENAI_CLIP_MEAN, image_std=OPENAI_CLIP_STD,
                min_pixels=56 * 56, max_pixels=28 * 28 * 1280, patch_size=14, temporal_patch_size=2, merge_size=2):
    """Qwen2VLImageProcessor._preprocess of one image ([image]) or one video (its frames):
    (flatten_patches [t*h*w, C*T*p*p] float32, (t, h, w))."""
    frames = [to_rgb_array(f) for f in frames]
    height, width = frames[0].shape[:2]
    resized_height, resized_width = height, width
    processed = []
    for image in frames:
        if do_resize:
            resized_height, resized_width = smart_resize(height, width, factor=patch_size * merge_size,
                                                         min_pixels=min_pixels, max_pixels=max_pixels)
            image = pil_resize(image, resized_height, resized_width, resample)
        image = values(image, rule, do_rescale, rescale_factor, do_normalize, image_mean, image_std)
        processed.append(image.transpose(2, 0, 1))  # to_channel_dimension_format(FIRST)
    patches = np.array(processed)
    if patches.shape[0] % temporal_patch_size != 0:
        repeats = np.repeat(patches[-1][np.newaxis], temporal_patch_size - (patches.shape[0] % temporal_patch_size),
                            axis=0)
        patches = np.concatenate([patches, repeats], axis=0)
    return flatten_patches(patches, patch_size, temporal_patch_size, merge_size)


def flatten_patches(patches, patch_size=14, temporal_patch_size=2, merge_size=2):
    """_preprocess's flattening of (grid_t * T, C, H, W) frames (any dtype): the tokens in merge
    window order, each (C, T, p, p) flat; (flatten_patches [t*h*w, C*T*p*p], (t, h, w))."""
    patches = np.asarray(patches)
    channel, height, width = patches.shape[1:]
    grid_t = patches.shape[0] // temporal_patch_size
    grid_h, grid_w = height // patch_size, width // patch_size
    patches = patches.reshape(grid_t, temporal_patch_size, channel, grid_h // merge_size, merge_size, patch_size,
                              grid_w // merge_size, merge_size, patch_size)
    patches = patches.transpose(0, 3, 6, 4, 7, 2, 1, 5, 8)
    flat = patches.reshape(grid_t * grid_h * grid_w, channel * temporal_patch_size * patch_size * patch_size)
    return flat, (grid_t, grid_h, grid_w)


def qwen2vl(images=None, videos=None, **kw):
    """Qwen2VLImageProcessor.preprocess (4.x): images one _preprocess each, videos (lists of
    frames, or (F, H, W, 3) arrays) one each; the dict of pixel_values/image_grid_thw and
    pixel_values_videos/video_grid_thw (grids int64, as np.array of int tuples)."""
    out = {}
    if images is not None:
        if not isinstance(images, (list, tuple)):
            images = [images]
        pv, grids = [], []
        for image in images:
            p, g = qwen2vl_one([image], **kw)
            pv.extend(p)
            grids.append(g)
        out["pixel_values"] = np.array(pv)
        out["image_grid_thw"] = np.array(grids)
    if videos is not None:
        pv, grids = [], []
        for video in videos:
            p, g = qwen2vl_one(list(video), **kw)
            pv.extend(p)
            grids.append(g)
        out["pixel_values_videos"] = np.array(pv)
        out["video_grid_thw"] = np.array(grids)
    return out


# ---- CLIP and SigLIP -----------------------------------------------------------------------

def shortest_edge_size(height, width, size):
    """get_resize_output_image_size(size=int, default_to_square=False): (h', w')."""
    short, long = (width, height) if width <= height else (height, width)
    new_short, new_long = size, int(size * long / short)
    return (new_long, new_short) if width <= height else (new_short, new_long)


def center_crop(a, crop_height, crop_width):
    """image_transforms.center_crop of a channel-last array (the zero-padded case included)."""
    orig_height, orig_width = a.shape[:2]
    top = (orig_height - crop_height) // 2
    bottom = top + crop_height
    left = (orig_width - crop_width) // 2
    right = left + crop_width
    if top >= 0 and bottom <= orig_height and left >= 0 and right <= orig_width:
        return a[top:bottom, left:right]
    new_height, new_width = max(crop_height, orig_height), max(crop_width, orig_width)
    new = np.zeros((new_height, new_width) + a.shape[2:], dtype=a.dtype)
    top_pad = math.ceil((new_height - orig_height) / 2)
    left_pad = math.ceil((new_width - orig_width) / 2)
    new[top_pad:top_pad + orig_height, left_pad:left_pad + orig_width] = a
    top, bottom, left, right = top + top_pad, bottom + top_pad, left + left_pad, right + left_pad
    return new[max(0, top):min(new_height, bottom), max(0, left):min(new_width, right)]


def clip(images, rule="transformers4", size=None, crop_size=None, do_resize=True, do_center_crop=True,
         resample=Image.BICUBIC, do_rescale=True, rescale_factor=1 / 255, do_normalize=True,
         image_mean=OPENAI_CLIP_MEAN, image_std=OPENAI_CLIP_STD):
    """CLIPImageProcessor.preprocess (4.x): {"pixel_values": [n, 3, ch, cw] float32}."""
    size = size if size is not None else {"shortest_edge": 224}
    crop_size = crop_size if crop_size is not None else {"height": 224, "width": 224}
    if not isinstance(images, (list, tuple)):
        images = [images]
    out = []
    for image in images:
        a = to_rgb_array(image)
        if do_resize:
            if "shortest_edge" in size:
                h, w = shortest_edge_size(a.shape[0], a.shape[1], size["shortest_edge"])
            else:
                h, w = size["height"], size["width"]
            a = pil_resize(a, h, w, resample)
        if do_center_crop:
            a = center_crop(a, crop_size["height"], crop_size["width"])
        a = values(a, rule, do_rescale, rescale_factor, do_normalize, image_mean, image_std)
        out.append(a.transpose(2, 0, 1))
    return {"pixel_values": np.array(out)}


def siglip(images, rule="transformers4", size=None, do_resize=True, resample=Image.BICUBIC, do_rescale=True,
           rescale_factor=1 / 255, do_normalize=True, image_mean=IMAGENET_STANDARD_MEAN,
           image_std=IMAGENET_STANDARD_STD):
    """SiglipImageProcessor.preprocess (4.x): {"pixel_values": [n, 3, h, w] float32}."""
    size = size if size is not None else {"height": 224, "width": 224}
    if not isinstance(images, (list, tuple)):
        images = [images]
    out = []
    for image in images:
        a = to_rgb_array(image)
        if do_resize:
            a = pil_resize(a, size["height"], size["width"], resample)
        a = values(a, rule, do_rescale, rescale_factor, do_normalize, image_mean, image_std)
        out.append(a.transpose(2, 0, 1))
    return {"pixel_values": np.array(out)}
