"""What the processors share: their result (BatchFeature), their keyword arguments, the images
they take, the float values of a rule (one table per channel) and the runners they use."""
from __future__ import annotations

import os
from typing import Any

from .. import _capi
from .._arrays import _is_torch, _np, _torch
from ..errors import UsageError
from ..image import load_image
from ..program import Program
from ..ragged import _decode_files
from ..runner import Runner

OPENAI_CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
OPENAI_CLIP_STD = (0.26862954, 0.26130258, 0.27577711)
IMAGENET_STANDARD_MEAN = (0.5, 0.5, 0.5)
IMAGENET_STANDARD_STD = (0.5, 0.5, 0.5)

RULES = ("transformers4", "float32")
#: PIL's resampling numbers (PIL.Image.Resampling, transformers' PILImageResampling) as pxvm's filters
FILTERS = {0: "nearest", 1: "lanczos", 2: "bilinear", 3: "bicubic", 4: "box", 5: "hamming"}
#: keys of a preprocessor_config.json that say what the file is, not how to process: from_dict skips them
CONFIG_METADATA = ("image_processor_type", "processor_class", "feature_extractor_type", "_processor_class",
                   "auto_map", "_valid_processor_keys", "image_seq_length")


class BatchFeature(dict):
    """The processor's result, as transformers' BatchFeature: a dict whose keys are also
    attributes (out.pixel_values), with .to(device or dtype) moving its torch tensors (a dtype
    casts the floating ones only, as transformers does)."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError("BatchFeature has no key %r (keys: %s)" % (name, ", ".join(self))) from None

    def to(self, *args: Any, **kwargs: Any) -> "BatchFeature":
        torch = _torch()
        is_dtype = bool(args) and isinstance(args[0], torch.dtype) or "dtype" in kwargs
        out = BatchFeature()
        for k, v in self.items():
            if not isinstance(v, torch.Tensor):
                if isinstance(v, _np().ndarray):
                    v = torch.from_numpy(v)
                else:
                    out[k] = v
                    continue
            if is_dtype and not torch.is_floating_point(v):
                dev = [a for a in args if not isinstance(a, torch.dtype)] or \
                    ([kwargs["device"]] if "device" in kwargs else [])
                out[k] = v.to(*dev) if dev else v
            else:
                out[k] = v.to(*args, **kwargs)
        return out

    def __repr__(self) -> str:
        parts = ["%s: %s %s" % (k, tuple(getattr(v, "shape", ())), getattr(v, "dtype", type(v).__name__))
                 for k, v in self.items()]
        return "BatchFeature({%s})" % ", ".join(parts)


def check_kwargs(cls_name: str, given: dict, allowed) -> dict:
    """The keyword arguments this processor takes; any other is refused, named, except an unknown
    do_* flag that is False (it asks for nothing: a config's "do_pad": false), which is dropped."""
    bad = sorted(k for k in given if k not in allowed and not (k.startswith("do_") and given[k] is False))
    if bad:
        raise UsageError("usage: %s: keyword argument%s %s not supported by pxvm.processors (supported: %s)" %
                         (cls_name, "s" if len(bad) > 1 else "", ", ".join(bad), ", ".join(sorted(allowed))))
    return {k: v for k, v in given.items() if k in allowed}


def check_rule(rule: str) -> str:
    if rule not in RULES:
        raise UsageError("usage: rule=%r is none of %s" % (rule, ", ".join(RULES)))
    return rule


def filter_name(resample) -> str:
    """resample= (a PIL number or enum, or a pxvm filter name) as pxvm's filter name."""
    if isinstance(resample, str) and resample in FILTERS.values():
        return resample
    try:
        return FILTERS[int(resample)]
    except (TypeError, ValueError, KeyError):
        raise UsageError("usage: resample=%r is none of PIL's filters (%s) nor their names" %
                         (resample, ", ".join("%d %s" % kv for kv in FILTERS.items()))) from None


def three(name: str, v) -> tuple:
    """image_mean/image_std: one float for every channel, or three."""
    try:
        vals = [float(v)] * 3 if isinstance(v, (int, float)) else [float(x) for x in v]
    except (TypeError, ValueError):
        raise UsageError("usage: %s=%r: a float or 3 floats" % (name, v)) from None
    if len(vals) != 3:
        raise UsageError("usage: %s=%r: a float or 3 floats (R, G, B), not %d" % (name, v, len(vals)))
    return tuple(vals)


def value_table(rule: str, do_rescale: bool, rescale_factor: float, do_normalize: bool, mean, std):
    """(3, 256) float32: the value of byte u in channel c, by `rule`.
    "transformers4": transformers 4.x's image_transforms.rescale (u as float64 times the factor,
    then float32) and normalize (float32: (x - mean) / std), each only when asked;
    "float32": isa/SPEC.md section 9 (x = fl32(fl32(u) * fl32(r)), y = fl32(fl32(x - m) / s); a
    step not asked for is r = 1, or m = 0 and s = 1, which leave x as it is)."""
    np = _np()
    u = np.arange(256, dtype=np.uint8)[None, :].repeat(3, axis=0)  # (3, 256)
    m = np.array(mean, dtype=np.float32)[:, None]
    s = np.array(std, dtype=np.float32)[:, None]
    if rule == "transformers4":
        x = (u.astype(np.float64) * rescale_factor).astype(np.float32) if do_rescale else u.astype(np.float32)
        return ((x - m) / s).astype(np.float32) if do_normalize else x
    with np.errstate(over="ignore", divide="ignore"):
        x = u.astype(np.float32) * np.float32(rescale_factor if do_rescale else 1.0)
        if not do_normalize:
            return x
        return ((x - m) / s).astype(np.float32)


def look_up(table, rgb):
    """table (3, 256) float32 applied to rgb[..., c] (uint8, last axis the channels R, G, B, A
    or R, G, B): float32 of rgb's shape with 3 channels, computed where rgb is (NumPy, or torch
    on its device); a gather, so every value is the table's bits."""
    if _is_torch(rgb):
        torch = _torch()
        t = torch.from_numpy(table).to(rgb.device).reshape(-1)
        idx = rgb[..., :3].long() + torch.tensor([0, 256, 512], device=rgb.device)
        return t[idx]
    np = _np()
    idx = rgb[..., :3].astype(np.intp) + np.array([0, 256, 512], dtype=np.intp)
    return table.reshape(-1)[idx]


def _pil():
    try:
        from PIL import Image
        return Image
    except ImportError:  # no Pillow: no PIL images either
        return None


def as_rgb(x, index: int):
    """One image as pxvm takes it, RGB (transformers' convert_to_rgb): a PIL image as its
    np.asarray after convert("RGB") when its mode is another; an array or tensor (H, W), (H, W, C)
    or (C, H, W), C in 1, 3, 4, with alpha dropped (a view: no copy); a path decoded by the
    library (pxvm.load_image: libpng, libjpeg-turbo), alpha dropped."""
    Image = _pil()
    if Image is not None and isinstance(x, Image.Image):
        if x.mode == "L":  # grey as it is: the library widens v to (v, v, v), as convert("RGB")
            return _np().asarray(x)
        if x.mode != "RGB":
            x = x.convert("RGB")
        return _np().asarray(x)
    if isinstance(x, (str, os.PathLike)):
        return load_image(x)[..., :3]
    shape = tuple(getattr(x, "shape", ()))
    if len(shape) == 3 and shape[2] == 4:
        return x[..., :3]
    if len(shape) == 3 and shape[0] == 4 and shape[2] not in (1, 3):
        return x[:3]
    if len(shape) in (2, 3):
        return x
    raise UsageError("usage: image %d: a PIL image, a path, or an array or tensor (H, W), (H, W, C) or (C, H, W) "
                     "with C in 1, 3, 4; got %s" % (index, "shape %s" % (shape,) if shape else type(x).__name__))


def rgb_items(xs) -> list:
    """as_rgb of every image, the paths decoded by the library on a pool of threads (as ragged
    batches decode theirs: pxvm.ragged._decode_files; the first failing file raised, named), its
    warnings (bytes after the end of a file) given at the caller's line."""
    import ctypes
    import warnings
    files = [os.fspath(x) if isinstance(x, (str, os.PathLike)) else None for x in xs]
    out = [None if f is not None else as_rgb(x, i) for i, (x, f) in enumerate(zip(xs, files))]
    if not any(f is not None for f in files):
        return out
    np = _np()
    decoded, warned = {}, {}
    try:
        _decode_files(files, decoded, warned)
        for i in sorted(warned):
            warnings.warn(warned[i], stacklevel=_caller_level())
        for i, (px, w, h) in decoded.items():  # RGB out of the decoder's RGBA8, then its memory freed
            rgba = np.ctypeslib.as_array((ctypes.c_uint8 * (w * h * 4)).from_address(px.value)).reshape(h, w, 4)
            out[i] = rgba[..., :3].copy()
    finally:
        for px, _, _ in decoded.values():
            _capi.lib.pxvm_free(px)
    return out


def _caller_level() -> int:
    """warnings.warn's stacklevel of the first frame outside the pxvm package (the caller's line)."""
    import sys
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
    f, level = sys._getframe(1), 1
    while f is not None and os.path.abspath(f.f_code.co_filename).startswith(here):
        f, level = f.f_back, level + 1
    return level


def image_list(images, what: str = "images") -> list:
    """images= as a list of single images: one image, a (B, H, W, C) array, or a list of them, or
    a list of such lists (flattened, as transformers' make_flat_list_of_images)."""
    if images is None:
        return []
    Image = _pil()
    if isinstance(images, (list, tuple)):
        out = []
        for x in images:
            if isinstance(x, (list, tuple)) or len(getattr(x, "shape", ())) == 4:
                out.extend(image_list(x, what))
            else:
                out.append(x)
        return out
    if (Image is not None and isinstance(images, Image.Image)) or isinstance(images, (str, os.PathLike)):
        return [images]
    shape = tuple(getattr(images, "shape", ()))
    if len(shape) == 4:
        return [images[i] for i in range(shape[0])]
    if len(shape) in (2, 3):
        return [images]
    raise UsageError("usage: %s: an image, a list of images or a (B, H, W, C) batch; got %s" %
                     (what, "shape %s" % (shape,) if shape else type(images).__name__))


def on_cuda(x) -> bool:
    if _is_torch(x):
        return x.device.type == "cuda"
    return getattr(x, "__cuda_array_interface__", None) is not None


def output_on_gpu(runner, items, device) -> bool:
    """Whether the executor writes the result on the runner's GPU: a CUDA image in, or device= a
    GPU with the cuda executor (the cpu executor writes host memory: finish moves it after)."""
    if runner.executor != "cuda":
        return False
    return any(on_cuda(x) for x in items) or (device is not None and str(device) != "cpu")


def finish(data: dict, return_tensors, device) -> BatchFeature:
    """The result in the type asked for: "pt" torch tensors (on `device` when given, else where
    the values are: the grids follow them to a GPU), "np" NumPy arrays, None NumPy as
    transformers 4.x, unless a value is on a GPU (then torch, there)."""
    if return_tensors not in (None, "pt", "np"):
        raise UsageError("usage: return_tensors=%r is none of 'pt', 'np' or None" % (return_tensors,))
    gpu = any(_is_torch(v) and v.device.type == "cuda" for v in data.values())
    if return_tensors == "np" and (gpu or (device is not None and str(device) != "cpu")):
        raise UsageError("usage: return_tensors='np' with device=%r: NumPy arrays live on the host; use "
                         "return_tensors='pt'" % (str(device) if device is not None else "cuda",))
    out = BatchFeature()
    if return_tensors == "pt" or (return_tensors is None and gpu):
        torch = _torch()
        if device is None and gpu:  # the grids go where the values are
            device = next(v.device for v in data.values() if _is_torch(v) and v.device.type == "cuda")
        for k, v in data.items():
            t = v if isinstance(v, torch.Tensor) else torch.from_numpy(v)
            out[k] = t.to(device) if device is not None else t
        return out
    if device is not None and str(device) != "cpu":
        raise UsageError("usage: device=%r needs return_tensors='pt'" % (str(device),))
    for k, v in data.items():
        out[k] = v.numpy() if _is_torch(v) else v
    return out


#: call-time keywords every processor takes besides its own settings (data_format only channels_first)
CALL_KEYWORDS = ("return_tensors", "device", "data_format", "input_data_format")


class Processor:
    """The shared part of the processors: settings as transformers names them (the class's
    DEFAULTS), overridable per call; the executor and the float rule; a cache of runners."""

    DEFAULTS: dict = {}

    def __init__(self, executor: str = "auto", rule: str = "transformers4", **kwargs: Any) -> None:
        kwargs = check_kwargs(type(self).__name__, kwargs, self.DEFAULTS)
        self.executor = executor
        self.rule = check_rule(rule)
        self.config = dict(self.DEFAULTS)
        self.config.update(kwargs)
        self._settings(self.config)  # checked now: a bad value is refused at construction
        self._runners: dict = {}

    def __getattr__(self, name: str) -> Any:
        config = self.__dict__.get("config")
        if config is not None and name in config:
            return config[name]
        raise AttributeError("%s has no attribute %r" % (type(self).__name__, name))

    def __getstate__(self) -> dict:
        """Pickled without its runners (a DataLoader worker opens its own on first use)."""
        return {k: v for k, v in self.__dict__.items() if k != "_runners"}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._runners = {}

    @classmethod
    def from_dict(cls, config_dict: dict, executor: str = "auto", rule: str = "transformers4", **kwargs: Any):
        """A processor from a preprocessor_config.json's dict (keys saying what the file is, such
        as image_processor_type, skipped; any other unknown key refused, named); kwargs override."""
        cfg = {k: v for k, v in dict(config_dict).items() if k not in CONFIG_METADATA}
        cfg.update(kwargs)
        return cls(executor=executor, rule=rule, **cfg)

    def to_dict(self) -> dict:
        return dict(self.config, image_processor_type=type(self).__name__)

    def __repr__(self) -> str:
        return "pxvm.processors.%s(executor=%r, rule=%r, %s)" % (
            type(self).__name__, self.executor, self.rule,
            ", ".join("%s=%r" % kv for kv in self.config.items() if self.DEFAULTS.get(kv[0]) != kv[1]))

    def _call_settings(self, kwargs: dict) -> dict:
        """This call's settings: the processor's, overridden by the call's keywords (checked)."""
        kwargs = check_kwargs(type(self).__name__, kwargs, tuple(self.DEFAULTS) + CALL_KEYWORDS)
        fmt = kwargs.pop("data_format", "channels_first")
        if str(getattr(fmt, "value", fmt)) not in ("channels_first", "ChannelDimension.FIRST"):
            raise UsageError("usage: %s: data_format=%r: pxvm.processors write channels_first only" %
                             (type(self).__name__, fmt))
        kwargs.pop("input_data_format", None)  # the layout is read from the shape (HWC first, as pxvm)
        cfg = dict(self.config)
        cfg.update({k: v for k, v in kwargs.items() if v is not None})
        return self._settings(cfg)

    def _settings(self, cfg: dict) -> dict:
        """The settings checked and in pxvm's terms (the subclass's)."""
        raise NotImplementedError

    def _table(self, s: dict):
        return value_table(self.rule, bool(s["do_rescale"]), float(s["rescale_factor"]), bool(s["do_normalize"]),
                           s["image_mean"], s["image_std"])

    def _runner(self, patch: int):
        """A runner of this processor's executor for tiles of side `patch` (a "uniform" plan: the
        ragged calls use its executor and device, and its patch for policy dynamic)."""
        r = self._runners.get(patch)
        if r is None:
            prog = Program.from_plan({"image": [4 * patch, 4 * patch], "scheme": "uniform", "patch": patch},
                                     name="pxvm.processors uniform patch %d" % patch)
            r = self._runners[patch] = Runner(prog, executor=self.executor)
        return r

    def _common(self, cfg: dict) -> dict:
        """The settings every family has, checked: resample, rescale, normalize."""
        if cfg.get("do_resize", True) is not True:
            raise UsageError("usage: %s: do_resize=%r: pxvm.processors always resize (do_resize=True)" %
                             (type(self).__name__, cfg.get("do_resize")))
        cfg["filter"] = filter_name(cfg["resample"])
        cfg["image_mean"] = three("image_mean", cfg["image_mean"])
        cfg["image_std"] = three("image_std", cfg["image_std"])
        try:
            cfg["rescale_factor"] = float(cfg["rescale_factor"])
        except (TypeError, ValueError):
            raise UsageError("usage: rescale_factor=%r: a float" % (cfg["rescale_factor"],)) from None
        if 0.0 in cfg["image_std"] and cfg["do_normalize"]:
            raise UsageError("usage: image_std=%r: no std may be 0" % (cfg["image_std"],))
        return cfg
