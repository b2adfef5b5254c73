"""What a run left in a Runner, read back (Runner's _Reads): token geometry, a slot's bound size,
a slot's level as pixels."""
from __future__ import annotations

import ctypes
from typing import TYPE_CHECKING

from . import _capi
from ._capi import View as _View
from .errors import _check
from ._arrays import _np, _torch
from ._guard import _locked

if TYPE_CHECKING:
    import numpy
    from ._arrays import Array

_lib = _capi.lib
PXVM_GEOM_INTS = 5  # int32 of one token's geometry


class _Reads:
    """Runner's reads after a run."""

    @_locked
    def geometry(self, slot: str | int | None = None, batch: int = 1, exact: bool = False,
                 device: str | None = None) -> Array:
        """Token geometry of the last run, as its sampling instructions used it: (B, N, 4) float32
        (centre x, centre y, step, LOD; level-0 texels, step = du; NaN for a token no instruction
        wrote), or with exact=True the library's int32 (B, N, 5): Q16 x, y, du, dv and the Q8.8
        LOD. NumPy from the host; device="cuda" gives CUDA tensors (no host copy)."""
        s = self._atlas(slot)
        h = self._runner(batch)[0]
        on_dev = device is not None and self._runner(batch)[1] == "cuda"
        if on_dev:
            torch = _torch()
            g = torch.empty((batch, s.patch_count, PXVM_GEOM_INTS), dtype=torch.int32, device=self._torch_device)
            self._sync_stream(batch)
            _check(_lib.pxvm_runner_read_geometry(h, s.index, 0, batch, ctypes.c_void_p(g.data_ptr()), self.device))
            if exact:
                return g
            f = torch.stack([g[..., 0].double() / 65536.0, g[..., 1].double() / 65536.0, g[..., 2].double() / 65536.0,
                             g[..., 4].double() / 256.0], dim=-1).float()
            f[g[..., 4] < 0] = float("nan")
            return f
        np = _np()
        g = np.empty((batch, s.patch_count, PXVM_GEOM_INTS), dtype=np.int32)
        _check(_lib.pxvm_runner_read_geometry(h, s.index, 0, batch, ctypes.c_void_p(g.ctypes.data), -1))
        if exact:
            return g
        f = np.stack([g[..., 0] / 65536.0, g[..., 1] / 65536.0, g[..., 2] / 65536.0, g[..., 4] / 256.0],
                     axis=-1).astype(np.float32)
        f[g[..., 4] < 0] = np.nan
        return f

    @_locked
    def slot_size(self, slot: str | int, batch: int = 1) -> tuple[int, int]:
        """(W, H) of a slot in the program the runner of `batch` items runs now: an any-size
        input's bound size (its reference size until another is bound), any other slot's own
        (pxvm_runner_slot_size)."""
        s = self.program.slot(slot)
        w, h = ctypes.c_int(), ctypes.c_int()
        _check(_lib.pxvm_runner_slot_size(self._runner(batch)[0], s.index, ctypes.byref(w), ctypes.byref(h)))
        return w.value, h.value

    @_locked
    def read(self, slot: str | int, level: int = 0, batch: int = 1) -> numpy.ndarray:
        """A level of a slot after the last run, as (B, h, w, 4) NumPy (host copy; an any-size
        input at its bound size)."""
        np = _np()
        s = self.program.slot(slot)
        level = _capi.c_integer(level, "level")
        h = self._runner(batch)[0]
        sw, sh = self.slot_size(s.index, batch)
        # the view's size at that level (a level out of 0..levels-1: the library's error names it)
        w, hh = max(1, sw >> max(level, 0)), max(1, sh >> max(level, 0))
        arr = np.empty((batch, hh, w, 4), dtype=np.uint8)
        v = _View(arr.ctypes.data, -1, batch, w, hh, 4, w * hh * 4, w * 4, 4, 1)
        _check(_lib.pxvm_runner_read(h, s.index, level, 0, ctypes.byref(v)))
        return arr

