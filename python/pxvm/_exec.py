"""The one call into the library per run (Runner's _Exec): the inputs described as pxvm_views,
fixations set, the outputs made or checked, pxvm_runner_exec, the inputs kept alive as lent."""
from __future__ import annotations

import ctypes

from . import _capi
from ._capi import View as _View
from .errors import UsageError, _check
from ._arrays import _np, _describe, _fill_view, _c_contiguous, _torch, _cuda_device

_lib = _capi.lib


class _Exec:
    """Runner's call into the library."""

    # -- the one call into the library per run
    def _buffers(self, batch, nin, nout):
        """The ctypes arrays of one call shape, made once and refilled (they cost microseconds)."""
        key = (batch, nin, nout)
        bufs = self._bufs.get(key)
        if bufs is None:
            bufs = self._bufs[key] = ((ctypes.c_int * max(nin, 1))(), (ctypes.c_int * max(nin, 1))(),
                                      (_View * max(nin, 1))(), (ctypes.c_int * max(nout, 1))(),
                                      (ctypes.c_int * max(nout, 1))(), (_View * max(nout, 1))())
        return bufs

    def _exec(self, inputs, batch, outs, batched=False, out=None, fixation=None, units="normalized", clamp=False):
        """inputs: {slot index: array, or a list of one array per item}, arrays with a leading
        batch axis when `batched`; outs: [(slot, kind)] kind 0 level 0, 1 patches; `out`: arrays
        to write them into instead of new ones; fixation, units, clamp: see _fixations. Returns the
        output arrays in the order of outs."""
        h, name = self._runner(batch)
        binds = []  # (slot, first item, description, has a batch axis)
        for k, x in inputs.items():
            if isinstance(x, (list, tuple)):
                binds += [(k, i, _describe(xi), False) for i, xi in enumerate(x)]
            else:
                binds.append((k, 0, _describe(x), batched))
        on_cuda = False
        for _, _, a, _ in binds:
            if a.device != -1:
                on_cuda = True
                _cuda_device(a, self.device)
        if on_cuda:
            if name != "cuda":
                raise UsageError("usage: input: CUDA tensors need executor 'cuda' (this runner's is '%s')" % name)
            self._sync_stream(batch)
        elif self._stream.get(batch):
            _check(_lib.pxvm_runner_set_stream(h, None))
            self._stream[batch] = 0
        nin, nout = len(binds), len(outs)
        in_slots, in_items, in_views, out_slots, out_kinds, out_views = self._buffers(batch, nin, nout)
        slots = self.program.slots
        for i, (k, item, a, has_axis) in enumerate(binds):
            s = slots[k]
            in_slots[i], in_items[i] = k, item
            _fill_view(in_views[i], a, s.w, s.h, has_axis)
        ins = self.program.inputs
        if fixation is None or not ins:
            ref_wh = None
        else:  # the first input's size in this run: the image bound to it now, else the one bound before
            ref_wh = next(((in_views[i].w, in_views[i].h) for i, b in enumerate(binds) if b[0] == ins[0].index),
                          None) or self.slot_size(ins[0].index, batch)
        fix = self._fixations(fixation, batch, batched, units, clamp, ref_wh)
        if fix is not None:
            kind, fx = fix
            if kind == "device" and not on_cuda:
                if name != "cuda":
                    raise UsageError("usage: fixation: CUDA tensors need executor 'cuda' (this runner's is '%s')" % name)
                self._sync_stream(batch)
            if kind != "normalized" and ref_wh != self.slot_size(ins[0].index, batch):
                # Q16 texels are checked against the size bound when they are set: bind the first
                # input at its new size first, then set them (the call then runs without that bind)
                keep = 0
                for i in range(nin):
                    if in_slots[i] == ins[0].index:
                        _check(_lib.pxvm_runner_bind(h, in_slots[i], in_items[i], ctypes.byref(in_views[i])))
                    else:
                        in_slots[keep], in_items[keep] = in_slots[i], in_items[i]
                        in_views[keep] = in_views[i]
                        keep += 1
                nin = keep
            if kind == "device":
                _check(_lib.pxvm_runner_set_fixations(h, 0, batch, 0, fx.shape[1], ctypes.c_void_p(fx.data_ptr()),
                                                      self.device))
            elif kind == "normalized":  # the library converts and checks them
                _check(_lib.pxvm_runner_set_fixations_normalized(h, 0, batch, 0, fx.shape[1],
                                                                 ctypes.c_void_p(fx.ctypes.data)))
            else:
                _check(_lib.pxvm_runner_set_fixations(h, 0, batch, 0, fx.shape[1], ctypes.c_void_p(fx.ctypes.data), -1))
        results = []
        for i, (k, kind) in enumerate(outs):
            s = slots[k]
            if kind:
                vw, vh = s.patch_w, s.patch_h * s.patch_count
                full = (batch, s.patch_count, s.patch_h, s.patch_w, 4)
            else:
                vw, vh = s.w, s.h
                full = (batch, s.h, s.w, 4)
            if out is not None:
                arr = out[i]
                d = _describe(arr)
                if tuple(d.shape) != full or not _c_contiguous(full, d.strides) or (d.device >= 0) != on_cuda:
                    raise UsageError("pxvm: out must be a C-contiguous uint8 %s array of shape %s, got %s of %s" %
                                     ("CUDA" if on_cuda else "host", full, "CUDA" if d.device >= 0 else "host",
                                      tuple(d.shape)))
                ptr, devno = d.ptr, (self.device if on_cuda else -1)
            elif on_cuda:
                arr = _torch().empty(full, dtype=_torch().uint8, device=self._torch_device)
                ptr, devno = arr.data_ptr(), self.device
            else:
                arr = _np().empty(full, dtype=_np().uint8)
                ptr, devno = arr.ctypes.data, -1
            v = out_views[i]
            v.data, v.device, v.items, v.w, v.h, v.channels = ptr, devno, batch, vw, vh, 4
            v.item_stride, v.row_stride, v.px_stride, v.ch_stride = vw * vh * 4, vw * 4, 4, 1
            out_slots[i], out_kinds[i] = k, kind
            results.append(arr)
        rc = _lib.pxvm_runner_exec(h, nin, in_slots, in_items, in_views, nout, out_slots, out_kinds, out_views)
        # borrowed: what the views point at (the described arrays: a temporary np.asarray of a PIL
        # image or of an __array__ object, not only the caller's object) kept alive while the slot
        # may still read it (see __init__)
        lent = {}
        for k, _, a, _ in binds:
            lent.setdefault(k, []).append(a.keep)
        for k, x in lent.items():
            self._lent[(batch, k)] = (self._lent.get((batch, k), (None,))[0], x) if rc else (x, None)
        _check(rc)
        return results
