"""Where tokens are written: their dtypes and layouts, shapes, an out= checked, a new array of the
input's kind (pxvm.tokens and the ragged batches, python/pxvm/ragged.py, share them)."""
from __future__ import annotations

from ._arrays import _current_stream, _is_torch, _np, _torch
from .errors import UsageError

DTYPES = {"float32": 0, "float16": 1, "bfloat16": 2}
LAYOUTS = {"nchw": 0, "nhwc": 1, "flat": 2}


def token_shape(n, ph, pw, channels, layout):
    """The shape of n tokens of ph x pw texels and `channels` values each in `layout`."""
    return {"nchw": (n, channels, ph, pw), "nhwc": (n, ph, pw, channels), "flat": (n, channels * ph * pw)}[layout]


def _shape(s, channels, layout):
    return token_shape(s.patch_count, s.patch_h, s.patch_w, channels, layout)


def _c_contiguous(shape, strides, itemsize):
    acc = itemsize
    for d, st in zip(reversed(shape), reversed(strides)):
        if d != 1 and st != acc:
            return False
        acc *= d
    return True


def _cuda_stream(runner):
    """The stream CUDA outputs are written on: torch's current one, else CuPy's (0: legacy default)."""
    try:
        return _current_stream(runner.device) or 1
    except ImportError:
        import cupy
        return cupy.cuda.get_current_stream().ptr or 1


_TORCH_DTYPES = ("float32", "float16", "bfloat16")
# the destinations' element types ("uint8": a ragged batch's RGBA8 tiles, python/pxvm/ragged.py)
_NUMPY_DTYPES = {"float32": "float32", "float16": "float16", "bfloat16": "uint16", "uint8": "uint8"}  # bf16: bits
_CAI_TYPES = {"float32": ("<f4",), "float16": ("<f2",), "bfloat16": ("<u2",), "uint8": ("|u1", "<u1")}
_ITEMSIZE = {"float32": 4, "float16": 2, "bfloat16": 2, "uint8": 1}


def dtype_name(dtype):
    """dtype= as its name, the one rule wherever a dtype is taken: a name as it is; a torch dtype
    (torch.bfloat16) or a NumPy one (np.float16, np.dtype("float32")) as its name ("bfloat16",
    "uint8"); anything else as it is (token_format then says what is wrong with it)."""
    if isinstance(dtype, str):
        return dtype
    name = None
    if _is_torch(dtype):
        name = str(dtype).rpartition(".")[2]
    else:
        np = _np()
        if isinstance(dtype, np.dtype) or (isinstance(dtype, type) and issubclass(dtype, np.generic)):
            name = np.dtype(dtype).name
    return name if name in DTYPES or name == "uint8" else dtype  # another: named as given in the error


def _destination(out, shape, dtype, runner, executor):
    """(pointer, device number or -1) of out= after its checks: dtype, shape, C-contiguous, device."""
    want = "a C-contiguous %s array of shape %s" % (dtype, shape)
    if _is_torch(out):
        torch = _torch()
        if out.dtype != getattr(torch, dtype):
            raise UsageError("usage: tokens: out must be %s, got a torch tensor of %s" % (want, out.dtype))
        if tuple(out.shape) != shape or not out.is_contiguous():
            raise UsageError("usage: tokens: out must be %s, got %s%s" % (
                want, tuple(out.shape), "" if out.is_contiguous() else " (not contiguous)"))
        if out.device.type == "cuda":
            dev = out.device.index if out.device.index is not None else torch.cuda.current_device()
            return out.data_ptr(), dev
        if out.device.type != "cpu":
            raise UsageError("usage: tokens: out must be on the CPU or a CUDA device, not %s" % out.device)
        return out.data_ptr(), -1
    cai = getattr(out, "__cuda_array_interface__", None)
    if cai is not None:
        if cai["typestr"] not in _CAI_TYPES[dtype]:
            raise UsageError("usage: tokens: out must be %s, got a CUDA array of %s" % (want, cai["typestr"]))
        st = cai.get("strides")
        itemsize = _ITEMSIZE[dtype]
        if tuple(cai["shape"]) != shape or (st is not None and not _c_contiguous(shape, st, itemsize)):
            raise UsageError("usage: tokens: out must be %s, got %s" % (want, tuple(cai["shape"])))
        dev = getattr(getattr(out, "device", None), "id", None)  # CuPy; else the library checks the pointer
        return cai["data"][0], runner.device if dev is None else dev
    np = _np()
    if not isinstance(out, np.ndarray):
        raise UsageError("usage: tokens: out must be %s (NumPy, torch or a CUDA array), got %s" %
                         (want, type(out).__name__))
    if out.dtype != np.dtype(_NUMPY_DTYPES[dtype]):
        raise UsageError("usage: tokens: out must be %s%s, got a NumPy array of %s" % (
            want, " (NumPy has no bfloat16: a uint16 array takes the bits)" if dtype == "bfloat16" else "", out.dtype))
    if out.shape != shape or not out.flags.c_contiguous or not out.flags.writeable:
        raise UsageError("usage: tokens: out must be %s, got %s%s" % (
            want, out.shape, " (not contiguous)" if not out.flags.c_contiguous else
            " (read-only)" if not out.flags.writeable else ""))
    return out.ctypes.data, -1


def _checked_destination(out, shape, dtype, runner, executor):
    """_destination, and a CUDA out= only on the runner's device of a cuda executor."""
    ptr, devno = _destination(out, shape, dtype, runner, executor)
    if devno >= 0:
        if executor != "cuda":
            raise UsageError("usage: tokens: a CUDA out= needs executor 'cuda' (this runner's is '%s')" % executor)
        if devno != runner.device:
            raise UsageError("usage: tokens: out is on cuda:%d, the runner on cuda:%d" % (devno, runner.device))
    return ptr, devno


def _new_output(shape, dtype, on_cuda, runner):
    """A new array for the tokens and its (pointer, device)."""
    if on_cuda:
        try:
            torch = _torch()
        except ImportError:
            import cupy
            if dtype == "bfloat16":
                raise UsageError("usage: tokens: dtype 'bfloat16' on CUDA without torch: CuPy has no bfloat16; "
                                 "pass out=<a uint16 CuPy array> for the bits") from None
            with cupy.cuda.Device(runner.device):
                a = cupy.empty(shape, dtype=dtype)
            return a, a.data.ptr, runner.device
        a = torch.empty(shape, dtype=getattr(torch, dtype), device="cuda:%d" % runner.device)
        return a, a.data_ptr(), runner.device
    if dtype == "bfloat16":
        try:
            torch = _torch()
        except ImportError:
            raise UsageError("usage: tokens: dtype 'bfloat16' on the host needs torch (NumPy has no bfloat16); "
                             "pass out=<a uint16 NumPy array> to get the bits") from None
        a = torch.empty(shape, dtype=torch.bfloat16)
        return a, a.data_ptr(), -1
    np = _np()
    a = np.empty(shape, dtype=dtype)
    return a, a.ctypes.data, -1
