"""NumPy arrays, torch tensors and __cuda_array_interface__ objects described for the library (views
of caller memory: pointer, shape, byte strides, device), and the lazy imports of numpy and torch."""
from __future__ import annotations

from typing import TYPE_CHECKING

import ctypes

from ._capi import View as _View, c_integer as _c_integer
from .errors import UsageError

if TYPE_CHECKING:  # the names in the API's annotations (numpy and torch are imported only where used)
    from typing import Sequence, Union
    import numpy
    import torch
    #: an image or an output: a uint8 NumPy array or torch tensor (host or CUDA)
    Array = Union[numpy.ndarray, torch.Tensor]
    #: a batch: an Array with a leading B axis, or a list of Arrays (one per item)
    Batch = Union[Array, Sequence[Array]]
    #: fixations normalized to the first input (texels with fixation_units="texels"): (x, y), (K, 2),
    #: per item (B, 2) or (B, K, 2), or "saliency"
    Fixation = Union[Sequence, Array, str, None]


def _np():
    import numpy
    return numpy


def _is_torch(x):
    return type(x).__module__.split(".")[0] == "torch"


class _Arr:
    """What the library needs of an array: pointer, shape and byte strides, device; `keep` holds
    the object alive during the call."""
    __slots__ = ("ptr", "shape", "strides", "device", "keep")


def _describe(x):
    a = _Arr()
    if _is_torch(x):
        torch = _torch()
        if x.dtype != torch.uint8:
            raise TypeError("pxvm: images must be uint8, got a torch tensor of %s" % x.dtype)
        a.ptr, a.shape, a.strides = x.data_ptr(), tuple(x.shape), tuple(x.stride())  # uint8: elements = bytes
        a.device = x.device.index if x.device.type == "cuda" else -1
        if x.device.type == "cuda" and a.device is None:
            a.device = torch.cuda.current_device()
        if x.device.type not in ("cpu", "cuda"):
            raise UsageError("pxvm: tensors must be on the CPU or a CUDA device, not %s" % x.device)
        a.keep = x
        return a
    cai = getattr(x, "__cuda_array_interface__", None)
    if cai is not None:
        if cai["typestr"] not in ("|u1", "<u1"):
            raise TypeError("pxvm: images must be uint8, got a CUDA array of %s" % cai["typestr"])
        a.shape = tuple(cai["shape"])
        st = cai.get("strides")
        if st is None:
            st, acc = [], 1
            for d in reversed(a.shape):
                st.insert(0, acc)
                acc *= d
        a.ptr, a.strides, a.device, a.keep = cai["data"][0], tuple(st), -2, x  # -2: the runner's device
        return a
    np = _np()
    arr = np.asarray(x)
    if arr.dtype != np.uint8:  # an object array is no array at all: say what was given
        raise TypeError("pxvm: images must be uint8 arrays, got %s" %
                        (arr.dtype if arr.dtype != object else "a %s" % type(x).__name__))
    a.ptr, a.shape, a.strides, a.device, a.keep = arr.ctypes.data, arr.shape, arr.strides, -1, arr
    return a


def _cuda_device(a, device):
    """A described CUDA input (a.device != -1) of a runner on CUDA device `device`: an
    __cuda_array_interface__ array's device taken as the runner's (the library checks the
    pointer's), a tensor on another GPU a UsageError naming both."""
    if a.device == -2:
        a.device = device
    elif a.device != device:
        raise UsageError("usage: input: the tensor is on cuda:%d, the runner on cuda:%d" % (a.device, device))


def _fill_view(v, a, w, h, batched):
    """Fills View v with `a`: (H, W), (H, W, C) or (C, H, W), with a leading batch axis when `batched`.
    The layout is the one whose (H, W) is the slot's; HWC first where both fit."""
    shape, st = list(a.shape), list(a.strides)
    if batched:
        if not shape:
            raise UsageError("pxvm: a batch needs a leading batch axis")
        items, item_stride = shape.pop(0), st.pop(0)
    else:
        items, item_stride = 1, 0
    want = "(B, H, W), (B, H, W, C) or (B, C, H, W)" if batched else "(H, W), (H, W, C) or (C, H, W)"
    if len(shape) == 2:
        H, W, C, rs, ps, cs = shape[0], shape[1], 1, st[0], st[1], 0
    elif len(shape) == 3:
        hwc = shape[2] in (1, 3, 4)
        chw = shape[0] in (1, 3, 4)
        if hwc and chw:  # both possible: the one that fits the slot, HWC first
            hwc = tuple(shape[:2]) == (h, w) or tuple(shape[1:]) != (h, w)
        if hwc:
            H, W, C, rs, ps, cs = shape[0], shape[1], shape[2], st[0], st[1], st[2]
        elif chw:
            C, H, W, cs, rs, ps = shape[0], shape[1], shape[2], st[0], st[1], st[2]
        else:
            raise UsageError("pxvm: images are %s with C in 1, 3, 4; got shape %s" % (want, tuple(a.shape)))
    else:
        raise UsageError("pxvm: images are %s with C in 1, 3, 4; got shape %s" % (want, tuple(a.shape)))
    # checked before the View's C fields keep only their low bits (a stride-tricked array may
    # claim 2**32 + 1 rows)
    v.data, v.device = a.ptr, a.device
    v.items, v.w, v.h = _c_integer(items, "batch size"), _c_integer(W, "image width"), _c_integer(H, "image height")
    v.channels = C
    i64 = ctypes.c_int64
    v.item_stride, v.row_stride = _c_integer(item_stride, "item stride", i64), _c_integer(rs, "row stride", i64)
    v.px_stride, v.ch_stride = _c_integer(ps, "pixel stride", i64), _c_integer(cs, "channel stride", i64)
    return v


def _image_view(a, w, h, batched):
    return _fill_view(_View(), a, w, h, batched)


def _c_contiguous(shape, strides):
    """Rows of bytes back to back (axes of length 1 may have any stride)."""
    acc = 1
    for d, st in zip(reversed(shape), reversed(strides)):
        if d != 1 and st != acc:
            return False
        acc *= d
    return True


_torch_mod = None


def _torch():
    global _torch_mod
    if _torch_mod is None:
        import torch
        _torch_mod = torch
    return _torch_mod


def _current_stream(device):
    """torch's current CUDA stream on `device` as a cudaStream_t (0: the legacy default stream)."""
    torch = _torch()
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)  # the cheap form, where torch has it
    return raw(device) if raw else torch.cuda.current_stream(device).cuda_stream


# ---- results of the input's kind ------------------------------------------------------------------
# One rule for every call that takes images (Runner.run, run_batch, patches, patches_batch, tokens,
# tokens_batch, Stream.push, pyramid, generate_mipmaps): torch tensors in, torch tensors out on
# their device; NumPy (or files) in, NumPy out. The one exception is bfloat16 from host NumPy input:
# NumPy has no bfloat16, so those tokens are a torch CPU tensor (never raw uint16 bits unasked).

_NOT_IMAGES = ("out", "fixation", "fixations")  # keyword arguments that never decide the output's kind


def _is_tensor(x):
    return _is_torch(x) and isinstance(x, _torch().Tensor)


def tensor_device(args, kwargs):
    """The device of the first torch tensor among the images given (positional arguments, keyword
    arguments other than out= and fixations, one level of lists), or None when none is a tensor."""
    values = list(args) + [v for k, v in kwargs.items() if k not in _NOT_IMAGES]
    for v in values:
        for x in (v if isinstance(v, (list, tuple)) else (v,)):
            if _is_tensor(x):
                return x.device
    return None


def as_torch(result, device, out=None):
    """result with every NumPy array made a torch tensor on `device` (torch.from_numpy: the same
    memory on the CPU, no copy; one copy to a CUDA device), through dicts, lists and tuples and a
    Ragged's fields; torch tensors and `out` (the caller's own array, returned as given) unchanged."""
    np = _np()
    if result is out and out is not None:
        return result
    if isinstance(result, np.ndarray):
        t = _torch().from_numpy(result)
        return t if device is None or device.type == "cpu" else t.to(device)
    if isinstance(result, dict):
        d = {k: as_torch(v, device, out) for k, v in result.items()}
        if type(result) is dict:
            return d
        same = type(result)(d)  # a BatchResult: its index too
        same.__dict__.update({k: as_torch(v, device, out) for k, v in vars(result).items()})
        return same
    if isinstance(result, (list, tuple)):
        return type(result)(as_torch(v, device, out) for v in result)
    if hasattr(result, "position_ids") and hasattr(result, "offsets"):  # a Ragged
        result.tokens = as_torch(result.tokens, device, out)
        ragged_like_tokens(result)
    return result


_RAGGED_INDEX_FIELDS = ("offsets", "grid", "sizes", "position_ids", "index")


def ragged_like_tokens(r):
    """A Ragged whose tokens are a torch tensor gets its offsets, grid, sizes, position_ids and
    index as int64 torch tensors on the tokens' device too (cu_seqlens where the model runs)."""
    if _is_tensor(r.tokens):
        np = _np()
        for name in _RAGGED_INDEX_FIELDS:
            v = getattr(r, name, None)
            if isinstance(v, np.ndarray):
                setattr(r, name, _torch().from_numpy(v).to(r.tokens.device))
    return r


def like_images(skip=1):
    """Decorator: the call's result in its images' kind (see above); `skip` leading positional
    arguments (self) are not images."""
    import functools

    def wrap(function):
        @functools.wraps(function)
        def call(*args, **kwargs):
            result = function(*args, **kwargs)
            device = tensor_device(args[skip:], kwargs)
            if device is None:
                return ragged_like_tokens(result) if hasattr(result, "position_ids") else result
            return as_torch(result, device, kwargs.get("out"))
        return call
    return wrap
