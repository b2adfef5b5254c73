"""Fixations of a Runner: given ones converted and checked (normalized or texels, host or CUDA),
and the registers read back after a run (Runner's _Fixations)."""
from __future__ import annotations

import ctypes
from typing import TYPE_CHECKING

from . import _capi
from .errors import UsageError, _check
from ._arrays import _np, _is_torch, _torch
from ._guard import _locked

if TYPE_CHECKING:
    from ._arrays import Array

_lib = _capi.lib
PXVM_FIX_REGS = 8   # fixation registers per item (include/pxvm.h)
FIXATION_UNITS = ("normalized", "texels")  # fixation_units=: the default, and the explicit texel door


class _Fixations:
    """Runner's fixation methods."""

    def _fixations(self, fixation, batch, batched, units="normalized", clamp=False, ref_wh=None):
        """Fixations as (kind, (B, K, 2) array) or None (keep the registers): ("normalized", host
        float64), converted and checked by the library; ("q16", host int32), converted and checked
        here (texels, and torch tensors); ("device", CUDA int32 tensor), converted and checked on
        the device, on the current stream (no copy to the host; the range check reads one flag
        back, which fixation_clamp=True spares). One rule: register = floor(n * W * 65536 + 0.5)
        for a normalized n, floor(x * 65536 + 0.5) for texels, in float64, one operation at a time
        (the library's pxvm_runner_set_fixations_normalized, NumPy's and torch's give one result).
        ref_wh: the (W, H) of the first input in this run (an any-size input's bound size), or None
        for its slot's size."""
        if units not in FIXATION_UNITS:
            raise UsageError("usage: fixation_units is 'normalized' (the default) or 'texels', not %r" % (units,))
        if fixation is None:
            return None
        if isinstance(fixation, str):
            if fixation != "saliency":
                raise UsageError("usage: fixation is (x, y) (normalized to the first input), an array, or 'saliency'")
            if not self.program.finds_fixations:
                raise UsageError("usage: fixation='saliency': program %s finds no fixations (compile a logpolar or v1 "
                                 "plan with \"scanpath\": K)" % self.program.name)
            return None
        if not self.fixation_inputs:
            if self.program.finds_fixations:
                raise UsageError("usage: fixation: program %s takes no fixations: it finds its own (ARGMAX; give "
                                 "fixation='saliency')" % self.program.name)
            raise UsageError("usage: fixation: program %s takes no fixations: it samples no position relative to a "
                             "fixation (compile its plan with \"fixation\": \"relative\")" % self.program.name)
        np = _np()
        on_torch = _is_torch(fixation)
        if on_torch:  # on its device
            torch = _torch()
            t = fixation.detach().to(torch.float64)
        else:
            t = np.asarray(fixation, dtype=np.float64)
        if not batched and t.ndim in (1, 2):
            t = t.reshape((1,) + tuple(t.shape))
        if t.ndim == 2:  # (B, 2): register 0 of each item
            t = t.reshape(t.shape[0], 1, 2)
        if t.ndim != 3 or t.shape[0] != batch or t.shape[2] != 2 or not 1 <= t.shape[1] <= PXVM_FIX_REGS:
            raise UsageError("pxvm: fixation must be (x, y), (K, 2) registers, or per item (B, 2) / (B, K, 2) with "
                             "B = %d and K <= %d; got shape %s" % (batch, PXVM_FIX_REGS, tuple(t.shape)))
        ins = self.program.inputs
        ref = ins[0] if ins else None
        if ref is None and units == "normalized":
            raise UsageError("usage: fixation: a normalized fixation needs an input slot to scale to (program %s has "
                             "none; give fixation_units='texels')" % self.program.name)
        if ref is not None:
            ref = (ref.name,) + tuple(ref_wh or (ref.w, ref.h))  # (name, W, H) at the size of this run
        hi = (1.0, 1.0) if units == "normalized" else ((float(ref[1]), float(ref[2])) if ref else (32767.0, 32767.0))
        if on_torch and not fixation.is_cuda and units == "normalized" and not clamp:
            on_torch, t = False, t.numpy()  # host values: the library converts them at the bound size
        if on_torch:
            if clamp:
                t = torch.stack([torch.nan_to_num(t[..., a], nan=hi[a] / 2).clamp(0.0, hi[a]) for a in (0, 1)], -1)
            else:
                bad = torch.stack([~((t[..., a] >= 0) & (t[..., a] <= hi[a])) for a in (0, 1)], -1)  # NaN: bad
                if bool(bad.any()):  # the one value read back
                    self._fixation_range_error(tuple(bad.nonzero()[0].tolist()), t, units, hi, ref)
            if units == "normalized":  # n * W, then * 65536, + 0.5, floor: separate float64 operations
                t = torch.stack([t[..., 0] * float(ref[1]), t[..., 1] * float(ref[2])], -1)
            q = torch.floor((t * 65536.0) + 0.5).to(torch.int32).contiguous()
            return ("device", q) if q.is_cuda else ("q16", q.numpy())
        if clamp:
            t = np.stack([np.clip(np.nan_to_num(t[..., a], nan=hi[a] / 2), 0.0, hi[a]) for a in (0, 1)], -1)
        if units == "normalized":
            return "normalized", np.ascontiguousarray(t)
        bad = ~((t >= 0) & (t <= np.array(hi)))
        if bad.any():
            self._fixation_range_error(tuple(np.argwhere(bad)[0]), t, units, hi, ref)
        return "q16", np.ascontiguousarray(np.floor((t * 65536.0) + 0.5).astype(np.int32))

    def _fixation_range_error(self, at, t, units, hi, ref):
        """The library's words for a value out of range: item, register, axis and the value."""
        b, k, a = (int(i) for i in at)
        v = repr(float(t[b, k, a]))
        v = v[:-2] if v.endswith(".0") else v  # as the library prints it: 452, 1.5, nan
        where = "input slot '%s', %dx%d" % ref if ref else "the program has no input slot"
        if units == "normalized":
            raise UsageError("usage: fixation (item %d, register %d): %s = %s is not in [0, 1] (normalized coordinates "
                             "of %s)" % (b, k, "xy"[a], v, where))
        raise UsageError("usage: fixation (item %d, register %d): %s = %s texels is not in [0, %d] (%s)" %
                         (b, k, "xy"[a], v, int(hi[a]), where))

    @_locked
    def fixations(self, batch: int = 1, device: str | None = None) -> Array:
        """The fixation registers after the last run, (B, 8, 2) level-0 texels (float64, the
        registers' Q16 / 65536; give them back with fixation_units="texels"): what ARGMAX found (a
        scanpath in registers 0..K-1) or what was set. NumPy from the host; with device="cuda" a
        CUDA tensor, read on the device."""
        h = self._runner(batch)[0]
        if device is not None and self._runner(batch)[1] == "cuda":
            torch = _torch()
            t = torch.empty((batch, PXVM_FIX_REGS, 2), dtype=torch.int32, device=self._torch_device)
            self._sync_stream(batch)
            _check(_lib.pxvm_runner_read_fixations(h, 0, batch, ctypes.c_void_p(t.data_ptr()), self.device))
            return t.to(torch.float64) / 65536.0
        np = _np()
        a = np.empty((batch, PXVM_FIX_REGS, 2), dtype=np.int32)
        _check(_lib.pxvm_runner_read_fixations(h, 0, batch, ctypes.c_void_p(a.ctypes.data), -1))
        return a.astype(np.float64) / 65536.0

