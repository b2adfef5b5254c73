"""pxvm's errors: one Error subclass per class of the library's errors (include/pxvm.h), named by
the library (pxvm_class_name: the words before the colon of its messages, written once in
vm/error.c), and what an error is about as fields the library sets (pxvm_last_error_info: .info)."""
from __future__ import annotations

import ctypes
import os
from typing import NamedTuple

from ._libload import lib as _lib


class _ErrorInfo(ctypes.Structure):
    """pxvm_error_info."""
    _fields_ = [("item", ctypes.c_int), ("slot", ctypes.c_int), ("file", ctypes.c_char_p)]


# declared here (errors.py comes before _capi.py, which declares the rest)
_lib.pxvm_errmsg.restype = ctypes.c_char_p
_lib.pxvm_errmsg.argtypes = []
_lib.pxvm_class_name.restype = ctypes.c_char_p
_lib.pxvm_class_name.argtypes = [ctypes.c_int]
_lib.pxvm_last_error_info.restype = ctypes.c_int
_lib.pxvm_last_error_info.argtypes = [ctypes.POINTER(_ErrorInfo)]


class ErrorInfo(NamedTuple):
    """What a failure is about, as the library recorded it: item (the batch item of the bind that
    failed), slot (its slot), file (the file of a failed decode); -1, -1, None when none."""
    item: int = -1
    slot: int = -1
    file: str | None = None


class Error(Exception):
    """A pxvm failure; `cls` is the library's class name ("invalid", "trap", ...); `info` what it is
    about (ErrorInfo: the library's fields for its errors, none for the package's own)."""
    cls: str | None = None
    info: ErrorInfo = ErrorInfo()


class Malformed(Error):
    """A file is not a .pxi / PNG / JPEG at all."""


class InvalidProgram(Error):
    """A program or image decodes but breaks a rule of the format or a limit."""


class Unlinkable(Error):
    """The images bound do not fit the program's slots (or an input slot has none)."""


class Trap(Error):
    """A valid, linked program failed while running (e.g. its step budget ran out)."""


class PxIOError(Error, OSError):
    """Files or memory (also an OSError)."""


class UsageError(Error, ValueError):
    """Arguments: names, sizes, layouts (also a ValueError)."""


class Unavailable(Error):
    """An executor that cannot run here (no GPU, not built, not enough device memory)."""


class AssemblyError(Error):
    """pxasm source that does not assemble."""


class PlanError(Error):
    """An allocation plan that does not compile."""


#: the subclasses in the order of the library's pxvm_class (1, 2, ...): a class the library adds
#: is an Error here until it is listed (tests/python/test_errors_once.py counts them)
_BY_CLASS = dict(enumerate((Malformed, InvalidProgram, Unlinkable, Trap, PxIOError, UsageError, Unavailable,
                            AssemblyError, PlanError), 1))
for _code, _sub in _BY_CLASS.items():
    _sub.cls = _lib.pxvm_class_name(_code).decode()


def _last_info() -> ErrorInfo:
    """The library's fields of the calling thread's last failure."""
    info = _ErrorInfo()
    _lib.pxvm_last_error_info(ctypes.byref(info))
    return ErrorInfo(info.item, info.slot, os.fsdecode(info.file) if info.file else None)


def _check(rc: int) -> None:
    """Raises the Error subclass of a library return code (0: nothing), with the library's message
    and its fields (.info)."""
    if rc:
        e = _BY_CLASS.get(rc, Error)(_lib.pxvm_errmsg().decode(errors="replace"))
        e.info = _last_info()
        raise e
