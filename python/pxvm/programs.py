"""The programs pxvm ships (programs/*.pxi and the plans they are compiled from, programs/*.json),
found wherever the package is: inside an installed package (pip's wheel and `make install` put
them in pxvm/_programs/), else in the source checkout around python/pxvm.

    import pxvm
    prog = pxvm.Program.load(pxvm.programs.path("foveate273"))      # works outside the repo
    uniform = pxvm.Program.from_plan(pxvm.programs.path("uniform", "json"))
    pxvm.programs.names()    # ['aniso', 'dot_test', 'foveate273', ...]
"""
from __future__ import annotations

import os

from .errors import UsageError

_HERE = os.path.dirname(os.path.abspath(__file__))
#: where the programs are looked for, in order: the package's own copy, then a source checkout's
DIRECTORIES = (os.path.join(_HERE, "_programs"), os.path.join(os.path.dirname(os.path.dirname(_HERE)), "programs"))
KINDS = ("pxi", "json")


def _directory() -> str | None:
    for d in DIRECTORIES:
        if os.path.isdir(d) and any(f.endswith(".pxi") for f in os.listdir(d)):
            return d
    return None


def names(kind: str = "pxi") -> list[str]:
    """The shipped programs' names (kind "pxi"), or the plans' ("json"), sorted."""
    if kind not in KINDS:
        raise UsageError("usage: programs: kind %r is none of %s" % (kind, ", ".join(KINDS)))
    d = _directory()
    return sorted(f[:-len(kind) - 1] for f in os.listdir(d) if f.endswith("." + kind)) if d else []


def path(name: str, kind: str = "pxi") -> str:
    """The path of shipped program `name` (e.g. "foveate273"; kind "json": its plan). An unknown
    name is a UsageError listing the names there are."""
    if kind not in KINDS:
        raise UsageError("usage: programs: kind %r is none of %s" % (kind, ", ".join(KINDS)))
    if not isinstance(name, str) or not name or os.sep in name or "/" in name or name.startswith("."):
        raise UsageError("usage: programs: %r is no program name (one of %s)" % (name, ", ".join(names(kind))))
    d = _directory()
    p = os.path.join(d, "%s.%s" % (name, kind)) if d else None
    if p is None or not os.path.isfile(p):
        raise UsageError("usage: programs: no shipped %s %r (there are: %s)%s" % (
            "program" if kind == "pxi" else "plan", name, ", ".join(names(kind)) or "none",
            "" if d else "; looked in %s" % ", ".join(DIRECTORIES)))
    return p
