"""The compiled fast path (python/pxvm/_native.c), loaded and bound to the library."""
import ctypes
import os

from . import _capi
from .errors import UsageError, _check

_lib = _capi.lib


def _load_native():
    """The compiled fast path (python/pxvm/_native.c: prepared pxvm_runner_exec calls), bound to
    the library loaded here; None where it is not built (no python3-dev) or PXVM_NO_NATIVE=1.
    PXVM_NATIVE_SO=path loads that build of it instead of the package's (the sanitizer build's)."""
    off = os.environ.get("PXVM_NO_NATIVE", "")
    if off not in ("", "0", "1"):
        raise UsageError("usage: PXVM_NO_NATIVE=%s: 1 (the ctypes path alone) or 0 (the compiled one when built)" % off)
    if off == "1":
        return None
    path = os.environ.get("PXVM_NATIVE_SO")
    if path:  # another build of it (make asan-python: the sanitized one); not loading is an error then
        import importlib.machinery
        import importlib.util
        import sys
        loader = importlib.machinery.ExtensionFileLoader(__package__ + "._native", path)
        spec = importlib.util.spec_from_file_location(__package__ + "._native", path, loader=loader)
        _native = importlib.util.module_from_spec(spec)
        loader.exec_module(_native)
        sys.modules[spec.name] = _native
    else:
        try:
            from . import _native
        except ImportError:
            return None
    address = lambda f: ctypes.cast(f, ctypes.c_void_p).value  # noqa: E731
    _native.bind(address(_lib.pxvm_runner_exec), address(_lib.pxvm_runner_set_stream), _check,
                 address(_lib.pxvm_runner_read_tokens))
    return _native
