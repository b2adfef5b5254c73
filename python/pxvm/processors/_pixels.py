"""The pixel work of the processors: every image's resized RGBA8 pixels from one executor call
(pxvm_runner_ragged, include/pxvm.h "ragged batches"), on the runner's executor and device."""
from __future__ import annotations

import ctypes

from .. import _capi
from .._arrays import _np, _torch
from ..errors import _check

_lib = _capi.lib


def output_on_gpu(runner, items, device) -> bool:
    """Whether the pixels are written on the runner's GPU: a CUDA image in, or device= a GPU
    with the cuda executor (the cpu executor writes host memory: the result moves after)."""
    from ._base import on_cuda
    if runner.executor != "cuda":
        return False
    return any(on_cuda(x) for x in items) or (device is not None and str(device) != "cpu")


def resized(runner, items, policy: str, out_w: int, out_h: int, device=None):
    """(B, out_h, out_w, 4) uint8: the images resized by `policy` ("stretch:FILTER": Pillow's
    Image.resize((out_w, out_h), FILTER) of each, as RGB(A)), one call of the executor (tiles of
    one texel: the image row-major). NumPy on the host, a torch tensor on the runner's GPU."""
    from ..ragged import _image_views, _library_error
    np = _np()
    n = len(items)
    with runner.lock:
        views, cuda_in, keep = _image_views(runner, items, [None] * n, {})
        gpu = cuda_in or output_on_gpu(runner, items, device)
        shape = (n, out_h, out_w, 4)
        if gpu:
            torch = _torch()
            result = torch.empty(shape, dtype=torch.uint8, device=runner._torch_device)
            ptr, devno = result.data_ptr(), runner.device
        else:
            result = np.empty(shape, dtype=np.uint8)
            ptr, devno = result.ctypes.data, -1
        h, _ = runner._runner(1)
        if gpu:  # ordered on torch's current stream
            runner._sync_stream(1)
        elif runner._stream.get(1):
            _check(_lib.pxvm_runner_set_stream(h, None))
            runner._stream[1] = 0
        args = _capi.RaggedArgs(_capi.c_string(policy, "policy"), 1, out_w, out_h, None, ptr, devno,
                                n * out_h * out_w * 4, -1)
        rc = _lib.pxvm_runner_ragged(h, n, views, ctypes.byref(args))
        del keep
        if rc:
            raise _library_error(rc, args.failed, [None] * n)
    return result
