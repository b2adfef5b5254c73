"""Frame streams: programs with persistent slots run on one frame after another."""
from __future__ import annotations

import ctypes
from typing import TYPE_CHECKING, Iterable, Sequence

from . import _capi
from .errors import UsageError, _check
from ._arrays import _np, _is_torch, _torch, like_images as _like_images

if TYPE_CHECKING:
    from ._arrays import Array, Fixation
    from .runner import Runner

_lib = _capi.lib


class _Rect(ctypes.Structure):
    _fields_ = [("x", ctypes.c_int32), ("y", ctypes.c_int32), ("w", ctypes.c_int32), ("h", ctypes.c_int32)]


class Stream:
    """Frames pushed one after another through a runner whose program keeps state between runs
    (persistent slots, DIFF/UPDATE, incremental PYRAMID and sampling). The first frame, and the
    first after reset(), is computed whole. Host frames give NumPy outputs; CUDA frames give CUDA
    tensors, on torch's current stream, with no host copy. Make one with Runner.stream(slot) (slot:
    the patch atlas read, the first atlas output by default); Array and Fixation are Runner's."""

    def __init__(self, runner: Runner, slot: str | int | None = None) -> None:
        self.runner = runner
        self.atlas = runner._atlas(slot)
        ins = runner.program.inputs
        if len(ins) != 1:
            raise UsageError("usage: a stream binds its frames to the program's one input (it has %d)" % len(ins))
        self.frames = 0

    @_like_images()
    def push(self, frame: Array, dirty: Iterable[Sequence[int]] | None = None, fixation: Fixation = None,
             out: Array | None = None, fixation_units: str = "normalized",
             fixation_clamp: bool = False) -> tuple[Array, Array]:
        """Runs the next frame. dirty: optional [(x, y, w, h), ...] rectangles that changed (level-0
        texels; pixels outside them are taken as unchanged, and DIFF compares nothing); fixation
        (normalized to the frame: (0.5, 0.5) is its middle), fixation_units and fixation_clamp as
        for Runner.run. Returns (patches (N, h, w, 4), changed (N,) bool)."""
        with self.runner._in_call():  # the dirty rectangles, the run and its changed flags as one unit
            return self._push(frame, dirty, fixation, out, fixation_units, fixation_clamp)

    def _push(self, frame, dirty, fixation, out, fixation_units, fixation_clamp):
        r = self.runner
        h = r._runner(1)[0]
        if dirty is not None:
            rects = list(dirty)
            arr = (_Rect * max(1, len(rects)))(*[_Rect(*(_capi.c_integer(v, "dirty %s" % k, ctypes.c_int32)
                                                           for k, v in zip("xywh", (x, y, w, hh))))
                                                 for x, y, w, hh in rects])
            _check(_lib.pxvm_runner_set_dirty(h, 0, arr, len(rects)))
        p = r.patches(frame, slot=self.atlas.index, out=out, fixation=fixation, fixation_units=fixation_units,
                      fixation_clamp=fixation_clamp)
        self.frames += 1
        if _is_torch(p) and p.is_cuda:
            torch = _torch()
            c = torch.empty((self.atlas.patch_count,), dtype=torch.uint8, device=r._torch_device)
            _check(_lib.pxvm_runner_read_changed(h, self.atlas.index, 0, 1, ctypes.c_void_p(c.data_ptr()), r.device))
            return p, c.bool()
        np = _np()
        c = np.empty((self.atlas.patch_count,), dtype=np.uint8)
        _check(_lib.pxvm_runner_read_changed(h, self.atlas.index, 0, 1, ctypes.c_void_p(c.ctypes.data), -1))
        return p, c.astype(bool)

    def reset(self) -> None:
        """Starts again: the next frame is computed whole (the fixations set stay set)."""
        with self.runner._in_call():
            _check(_lib.pxvm_runner_restart(self.runner._runner(1)[0]))
        self.frames = 0
