"""pxvm's errors: one Error subclass per class of the library's errors (include/pxvm.h)."""
from . import _capi

_lib = _capi.lib


class Error(Exception):
    """A pxvm failure; `cls` is the library's class name ("invalid", "trap", ...)."""
    cls = None


class Malformed(Error):
    cls = "malformed"


class InvalidProgram(Error):
    cls = "invalid"


class Unlinkable(Error):
    cls = "unlinkable"


class Trap(Error):
    cls = "trap"


class PxIOError(Error, OSError):
    cls = "i/o error"


class UsageError(Error, ValueError):
    cls = "usage"


class Unavailable(Error):
    cls = "unavailable"


class AssemblyError(Error):
    cls = "assembly error"


class PlanError(Error):
    cls = "plan error"


_BY_CLASS = {1: Malformed, 2: InvalidProgram, 3: Unlinkable, 4: Trap, 5: PxIOError, 6: UsageError,
             7: Unavailable, 8: AssemblyError, 9: PlanError}


def _check(rc):
    if rc:
        raise _BY_CLASS.get(rc, Error)(_lib.pxvm_errmsg().decode(errors="replace"))
