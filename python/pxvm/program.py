"""Pixel programs: loaded, assembled or compiled from a plan, validated, immutable."""
from __future__ import annotations

import ctypes
import json as _json
import os

from . import _capi
from ._capi import SlotInfo as _SlotInfo
from .errors import PlanError, PxIOError, UsageError, _check
from .image import _limits, _take_bytes

_lib = _capi.lib


class Slot:
    """A program slot: name, role ("input", "output", ...), size, levels, patch geometry."""
    __slots__ = ("index", "name", "role", "w", "h", "levels", "patch_w", "patch_h", "patch_count", "any_size",
                 "min_side", "max_side", "max_pixels")

    def __init__(self, index: int, info: _SlotInfo) -> None:
        self.index = index
        self.name = info.name.decode()
        self.role = info.role.decode()
        self.w, self.h, self.levels = info.w, info.h, info.levels
        self.patch_w, self.patch_h, self.patch_count = info.patch_w, info.patch_h, info.patch_count
        # an any-size input: w x h is its reference size; images of min_side..max_side (both sides)
        # and at most max_pixels pixels (0: no bound) are bound at their own size
        self.any_size = bool(info.any_size)
        self.min_side, self.max_side, self.max_pixels = info.min_side, info.max_side, info.max_pixels

    def __repr__(self) -> str:
        extra = ", %d patches of %dx%d" % (self.patch_count, self.patch_w, self.patch_h) if self.patch_count else ""
        return "Slot(%d %r %s %dx%d, %d levels%s)" % (self.index, self.name, self.role, self.w, self.h, self.levels,
                                                      extra)


def _plan_file(path) -> str:
    """The text of a plan file, in the library's words when it is none: PxIOError when it cannot be
    read, PlanError when it is a PNG (a .pxi: Program.load opens it) or no UTF-8 text."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise PxIOError("i/o error: cannot read plan '%s': %s" % (path, e.strerror or e)) from None
    if data.startswith(b"\x89PNG"):
        raise PlanError("plan error: '%s' is a PNG file, not a JSON plan (a .pxi program: Program.load opens it)"
                        % path)
    try:
        return data.decode()
    except UnicodeDecodeError as e:
        raise PlanError("plan error: '%s' is not a JSON plan: byte %d is not UTF-8 text" % (path, e.start)) from None


class Program:
    """A loaded, validated pixel program (immutable). Make one with load, from_plan, from_png or
    assemble."""

    def __init__(self, handle: int, name: str) -> None:
        self._h = ctypes.c_void_p(handle)
        self.name = name
        n = _lib.pxvm_prog_slot_count(self._h)
        self.slots = []
        for k in range(n):
            info = _SlotInfo()
            _check(_lib.pxvm_prog_slot(self._h, k, ctypes.byref(info)))
            self.slots.append(Slot(k, info))
        #: the plan (a dict) when the program was compiled from one (from_plan), else None
        self.plan = None
        self._limits = {}
        self._inputs = [s for s in self.slots if s.role == "input"]
        self._outputs = [s for s in self.slots if s.role == "output"]
        use = _lib.pxvm_prog_fixation_use(self._h)
        #: the program samples relative to fixation registers (or finds fixations itself)
        self.uses_fixation = use >= 1
        #: the program finds its own fixations (SALIENCY + ARGMAX: a "scanpath" plan)
        self.finds_fixations = use == 2

    @classmethod
    def _make(cls, fn, name, *args, **limits):
        h = ctypes.c_void_p()
        lim = _limits(**limits)
        _check(fn(*args, ctypes.byref(lim), ctypes.byref(h)))
        return cls(h.value, name)

    @classmethod
    def load(cls, path: str | os.PathLike, **limits: int) -> Program:
        """A .pxi file (limits: max_side, max_memory, max_insns, max_steps)."""
        return cls._make(_lib.pxvm_prog_load, str(path), _capi.c_string(path, "path", path=True), **limits)

    @classmethod
    def from_png(cls, data: bytes | bytearray | memoryview, name: str = "program", **limits: int) -> Program:
        """A .pxi given as PNG bytes."""
        data = bytes(data)
        return cls._make(_lib.pxvm_prog_from_png, name, data, len(data), _capi.c_string(name, "name"), **limits)

    @classmethod
    def assemble(cls, text: str, name: str = "<text>", **limits: int) -> Program:
        """pxasm source text (assembler/README.md)."""
        return cls._make(_lib.pxvm_prog_assemble, name, _capi.c_string(text, "text"), _capi.c_string(name, "name"),
                         **limits)

    @classmethod
    def from_plan(cls, plan: dict | str | os.PathLike, name: str | None = None, **limits: int) -> Program:
        """An allocation plan: a dict, a JSON string, or the path of a JSON file (the fields are in
        assembler/README.md). All float math happens here, deterministically."""
        if isinstance(plan, dict):
            text, name = _json.dumps(plan), name or "<plan>"
        elif isinstance(plan, (str, os.PathLike)) and not str(plan).lstrip().startswith("{"):
            text, name = _plan_file(plan), name or str(plan)
        else:
            text, name = str(plan), name or "<plan>"
        prog = cls._make(_lib.pxvm_prog_from_plan, name, _capi.c_string(text, "plan"), _capi.c_string(name, "name"),
                         **limits)
        prog.plan = _json.loads(text)  # the plan it was compiled from (policy "dynamic" compiles it per size)
        prog._limits = limits
        return prog

    def disassemble(self) -> str:
        """pxasm source that assembles back to the same pixels."""
        p = ctypes.c_void_p()
        _check(_lib.pxvm_prog_disassemble(self._h, ctypes.byref(p)))
        return _take_bytes(p, len(ctypes.string_at(p))).decode()

    def to_png(self) -> bytes:
        """The program image as PNG bytes (what a .pxi file holds)."""
        p, n = ctypes.c_void_p(), ctypes.c_size_t()
        _check(_lib.pxvm_prog_encode(self._h, ctypes.byref(p), ctypes.byref(n)))
        return _take_bytes(p, n.value)

    def save(self, path: str | os.PathLike) -> None:
        """Writes the program image (to_png) to a .pxi file."""
        with open(path, "wb") as f:
            f.write(self.to_png())

    def slot(self, name: str | int) -> Slot:
        """A slot by name or number."""
        k = _lib.pxvm_prog_slot_find(self._h, _capi.c_string(str(name), "slot"))
        if k < 0:
            raise UsageError("usage: the program has no slot '%s'" % name)
        return self.slots[k]

    @property
    def inputs(self) -> list[Slot]:
        """The input slots, in slot order."""
        return self._inputs

    @property
    def outputs(self) -> list[Slot]:
        """The output slots, in slot order."""
        return self._outputs

    def __repr__(self) -> str:
        return "Program(%r, %d slots)" % (self.name, len(self.slots))

    def __del__(self) -> None:
        h = getattr(self, "_h", None)
        if h is not None and h.value:
            _lib.pxvm_prog_free(h)
            self._h = ctypes.c_void_p()


def assemble(text: str, name: str = "<text>", **limits: int) -> Program:
    """pxasm source text -> Program."""
    return Program.assemble(text, name, **limits)
