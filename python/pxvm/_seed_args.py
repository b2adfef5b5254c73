"""The seeds' arguments checked (points, reals, per-item values, dtypes) and their outputs made
(tokens of the input's kind, items stacked back in order): pxvm.seeds' helpers."""
from __future__ import annotations

import ctypes
import math
import operator
from typing import TYPE_CHECKING, Any, Callable

from . import _capi
from .errors import UsageError, _check
from ._arrays import _describe, _is_torch, _np, _torch
from .tokens import LAYOUTS, dtype_name, _new_output, _shape as _token_shape, token_format
from .tokens import DTYPES as _FLOAT_DTYPES

if TYPE_CHECKING:
    from ._arrays import Array
    from .runner import Runner

#: the token dtypes: "uint8" (the VM's bytes) and the float ones of Runner.tokens
DTYPES = ("uint8",) + tuple(_FLOAT_DTYPES)


# ---- arguments ------------------------------------------------------------------------------------

def _geometry(image: Any) -> tuple[int | None, int, int]:
    """(B or None for a single image, H, W) of an image or a batch, by the package's layout rules."""
    sh = tuple(int(d) for d in _describe(image).shape)
    if len(sh) == 2:
        return None, sh[0], sh[1]
    if len(sh) == 3 and sh[2] in (1, 3, 4):
        return None, sh[0], sh[1]
    if len(sh) == 3 and sh[0] in (1, 3, 4):
        return None, sh[1], sh[2]
    if len(sh) == 4 and sh[0] >= 1 and sh[1] in (1, 3, 4):
        return sh[0], sh[2], sh[3]
    if len(sh) == 4 and sh[0] >= 1 and sh[3] in (1, 3, 4):
        return sh[0], sh[1], sh[2]
    raise UsageError("usage: image: shape %s is none of (H, W), (H, W, C), (C, H, W), (B, C, H, W) or (B, H, W, C) "
                     "with C in 1, 3, 4" % (sh,))


def _int(name: str, v: Any, lo: int, hi: int) -> int:
    try:
        i = operator.index(v)
    except TypeError:
        raise UsageError("usage: %s = %r: an integer is needed" % (name, v)) from None
    if not lo <= i <= hi:
        raise UsageError("usage: %s = %d is not in %d..%d" % (name, i, lo, hi))
    return int(i)


def _real(name: str, v: Any) -> float:
    try:
        f = float(v)
    except (TypeError, ValueError):
        raise UsageError("usage: %s = %r: a number is needed" % (name, v)) from None
    if not math.isfinite(f):
        raise UsageError("usage: %s = %r: a finite number is needed" % (name, f))
    return f


def _host_floats(v: Any):
    """A float64 NumPy array of a sequence, array or tensor (a CUDA tensor is read back: these
    values are compiled into programs, on the host)."""
    np = _np()
    if _is_torch(v):
        v = v.detach().cpu().numpy()
    try:
        return np.asarray(v, dtype=np.float64)
    except (TypeError, ValueError):
        raise UsageError("usage: %r is not numbers" % (v,)) from None


def _points(name: str, v: Any, batch: int | None, w: int, h: int):
    """Normalized (x, y) as a (B or 1, 2) float64 array, each checked in [0, 1]: (x, y) for every
    item, or (B, 2) one per item."""
    a = _host_floats(v)
    items = 1 if batch is None else batch
    if a.shape == (2,):
        a = a.reshape(1, 2).repeat(items, axis=0)
    elif batch is None or a.shape != (batch, 2):
        raise UsageError("usage: %s: shape %s: give (x, y)%s" % (name, a.shape, "" if batch is None else
                                                                 " or (B, 2) with B = %d" % batch))
    _check_unit(name, a, w, h, lambda i: "" if batch is None else " (item %d)" % i[0])
    return a


def _check_unit(name: str, a, w: int, h: int, where: Callable) -> None:
    np = _np()
    bad = ~((a >= 0) & (a <= 1))  # NaN is bad too
    if bad.any():
        at = tuple(int(i) for i in np.argwhere(bad)[0])
        raise UsageError("usage: %s%s: %s = %r is not in [0, 1] (normalized coordinates of the %dx%d image)" %
                         (name, where(at), "xy"[at[-1]], float(a[at]), w, h))


def _per_item(name: str, v: Any, batch: int | None) -> list[float]:
    """A number for every item: one, or (B,) for a batch."""
    a = _host_floats(v)
    items = 1 if batch is None else batch
    if a.ndim == 0:
        vals = [float(a)] * items
    elif batch is not None and a.shape == (batch,):
        vals = [float(x) for x in a]
    else:
        raise UsageError("usage: %s: shape %s: give a number%s" % (name, a.shape, "" if batch is None else
                                                                   " or (B,) with B = %d" % batch))
    return [_real(name, x) for x in vals]


def _dtype(dtype: Any) -> str:
    """The name in DTYPES of a name, a NumPy dtype or a torch dtype (tokens.dtype_name's rule)."""
    name = dtype_name(dtype)
    if not isinstance(name, str) or name not in DTYPES:
        raise UsageError("usage: dtype %r is none of %s" % (dtype, ", ".join(DTYPES)))
    return name


class _Output:
    """A call's output arguments, checked before anything runs: dtype (a DTYPES name), normalize,
    layout, alpha; for the float dtypes .format is the library's token format
    (pxvm.tokens.token_format: the presets' table and the names are checked there; mean/std values
    are checked by the library when it reads the tokens, a UsageError naming the value)."""

    def __init__(self, dtype: Any, normalize: Any, layout: Any, alpha: Any) -> None:
        self.dtype, self.normalize, self.layout, self.alpha = _dtype(dtype), normalize, layout, alpha
        if self.dtype == "uint8":
            if not (isinstance(normalize, str) and normalize == "none"):
                raise UsageError("usage: dtype 'uint8' gives the VM's bytes: normalize must be 'none' (it is %r)" %
                                 (normalize,))
            if not isinstance(layout, str) or layout not in LAYOUTS:
                raise UsageError("usage: layout %r is none of %s" % (layout, ", ".join(LAYOUTS)))
            if not isinstance(alpha, bool):
                raise UsageError("usage: alpha is True or False, not %r" % (alpha,))
            self.format = None
        else:
            self.format = token_format(self.dtype, normalize, layout, alpha)
            if self.dtype == "bfloat16":  # NumPy has no bfloat16, CuPy neither: refused before any run
                try:
                    _torch()
                except ImportError:
                    raise UsageError("usage: dtype 'bfloat16' needs torch (NumPy has no bfloat16)") from None
        self.channels = 4 if alpha else 3

    def runner_tokens(self, r: Runner, image: Any) -> Array:
        """Runner.tokens of one image in this format (NumPy results of torch CPU images as tensors)."""
        return _like(r.tokens(image, dtype=self.dtype, normalize=self.normalize, layout=self.layout,
                              alpha=self.alpha), image)

    def new(self, r: Runner, items: int | None, on_cuda: bool) -> tuple[Array, int, int, int]:
        """A new (items, ...) array (items None: one item, no batch axis) of r's tokens in this
        format, where Runner.tokens would put them: (array, pointer, device number or -1, bytes
        of one item)."""
        item = _token_shape(r._atlas(None), self.channels, self.layout)
        shape = item if items is None else (items,) + item
        a, ptr, devno = _new_output(shape, self.dtype, on_cuda and r.executor == "cuda", r)
        item_bytes = (4 if self.dtype == "float32" else 2) * math.prod(item)
        return a, ptr, devno, item_bytes

    def read(self, r: Runner, batch: int, first: int, items: int, ptr: int, devno: int) -> None:
        """Items first .. first+items-1 of r's last run on `batch` items into ptr: the executor's
        table lookups (pxvm_runner_read_tokens, on the runner's stream for CUDA memory)."""
        h = r._runner(batch)[0]
        _check(_capi.lib.pxvm_runner_read_tokens(h, r._atlas(None).index, first, items, ctypes.byref(self.format),
                                                 ctypes.c_void_p(ptr), devno))


# ---- outputs --------------------------------------------------------------------------------------

def _on_cuda(image: Any) -> bool:
    return _describe(image).device != -1


def _like(x: Any, image: Any) -> Any:
    """The Runner gives NumPy for host inputs: torch CPU images get torch tensors (no copy)."""
    if _is_torch(image) and not _is_torch(x):
        return _torch().from_numpy(x)
    return x


def _uint8_tokens(patches_rgba: Array, out: _Output, image: Any) -> Array:
    """(..., p, p, 4) RGBA patches -> the VM's bytes in out's layout: (..., C, p, p) nchw,
    (..., p, p, C) nhwc, (..., C*p*p) flat; C = 3 (RGB), 4 with alpha."""
    p = _like(patches_rgba, image)[..., :out.channels]
    on_torch = _is_torch(p)
    if out.layout != "nhwc":
        nd = p.ndim
        perm = tuple(range(nd - 3)) + (nd - 1, nd - 3, nd - 2)
        p = p.permute(*perm) if on_torch else p.transpose(perm)
    p = p.contiguous() if on_torch else _np().ascontiguousarray(p)
    return p.reshape(tuple(p.shape[:-3]) + (-1,)) if out.layout == "flat" else p


def _consecutive(idx: list[int]) -> list[tuple[int, int, int]]:
    """[(position in idx, item, count)]: the runs of consecutive items of idx (one read each)."""
    runs: list = []
    for j, i in enumerate(idx):
        if runs and runs[-1][1] + runs[-1][2] == i:
            runs[-1][2] += 1
        else:
            runs.append([j, i, 1])
    return [tuple(r) for r in runs]


def _stack_items(parts: list, batch: int) -> Any:
    """[(item indices, (b, ...) results)] -> (B, ...) in item order."""
    if len(parts) == 1:
        return parts[0][1]
    first = parts[0][1]
    shape = (batch,) + tuple(first.shape[1:])
    if _is_torch(first):
        torch = _torch()
        out = torch.empty(shape, dtype=first.dtype, device=first.device)
        for idx, r in parts:
            out[torch.as_tensor(idx, device=first.device)] = r
        return out
    np = _np()
    out = np.empty(shape, dtype=first.dtype)
    for idx, r in parts:
        out[idx] = r
    return out

