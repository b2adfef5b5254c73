"""pxvm's errors: one Error subclass per class of the library's errors (include/pxvm.h)."""
from __future__ import annotations

import ctypes

from ._libload import lib as _lib

_lib.pxvm_errmsg.restype = ctypes.c_char_p  # as _capi declares it: errors.py comes before _capi


class Error(Exception):
    """A pxvm failure; `cls` is the library's class name ("invalid", "trap", ...)."""
    cls: str | None = None


class Malformed(Error):
    """A file is not a .pxi / PNG / JPEG at all."""
    cls = "malformed"


class InvalidProgram(Error):
    """A program or image decodes but breaks a rule of the format or a limit."""
    cls = "invalid"


class Unlinkable(Error):
    """The images bound do not fit the program's slots (or an input slot has none)."""
    cls = "unlinkable"


class Trap(Error):
    """A valid, linked program failed while running (e.g. its step budget ran out)."""
    cls = "trap"


class PxIOError(Error, OSError):
    """Files or memory (also an OSError)."""
    cls = "i/o error"


class UsageError(Error, ValueError):
    """Arguments: names, sizes, layouts (also a ValueError)."""
    cls = "usage"


class Unavailable(Error):
    """An executor that cannot run here (no GPU, not built, not enough device memory)."""
    cls = "unavailable"


class AssemblyError(Error):
    """pxasm source that does not assemble."""
    cls = "assembly error"


class PlanError(Error):
    """An allocation plan that does not compile."""
    cls = "plan error"


_BY_CLASS = {1: Malformed, 2: InvalidProgram, 3: Unlinkable, 4: Trap, 5: PxIOError, 6: UsageError,
             7: Unavailable, 8: AssemblyError, 9: PlanError}


def _check(rc: int) -> None:
    """Raises the Error subclass of a library return code (0: nothing), with the library's message."""
    if rc:
        raise _BY_CLASS.get(rc, Error)(_lib.pxvm_errmsg().decode(errors="replace"))
