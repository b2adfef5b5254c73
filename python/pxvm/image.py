"""Images decoded by the library (PNG, JPEG) and the limits and buffers shared with programs."""
from __future__ import annotations

import contextlib
import contextvars
import ctypes
import os
import warnings
from typing import TYPE_CHECKING, Any

from . import _capi
from ._capi import Limits as _Limits
from .errors import UsageError, _check
from ._arrays import _np

if TYPE_CHECKING:
    import numpy

_lib = _capi.lib


PXVM_DECODE_LENIENT = 1  # include/pxvm.h: pxvm_limits.flags
PXVM_DECODE_EXIF_TRANSPOSE = 2

#: exif_transpose= of the call in progress on this thread (Runner calls taking files: _with_exif);
#: read where the limits of a decode are made, so every file the call decodes is oriented
_exif_transpose = contextvars.ContextVar("pxvm_exif_transpose", default=False)


@contextlib.contextmanager
def exif_transposed(on):
    """Within the block, the files this thread decodes (load_image, a batch's files) apply their
    EXIF orientation when `on` (a bool: else a UsageError)."""
    if not isinstance(on, bool):
        raise UsageError("usage: exif_transpose is True or False, not %r" % (on,))
    token = _exif_transpose.set(on)
    try:
        yield
    finally:
        _exif_transpose.reset(token)


def _limits(max_side=None, max_memory=None, max_insns=None, max_steps=None):
    lim = _Limits()
    _lib.pxvm_limits_default(ctypes.byref(lim))
    for k, v in (("max_side", max_side), ("max_memory", max_memory), ("max_insns", max_insns),
                 ("max_steps", max_steps)):
        if v is not None:
            setattr(lim, k, _capi.c_integer(v, k, dict(_Limits._fields_)[k]))
    if _exif_transpose.get():
        lim.flags |= PXVM_DECODE_EXIF_TRANSPOSE
    return lim


def _take_bytes(ptr, n):
    try:
        return ctypes.string_at(ptr, n)
    finally:
        _lib.pxvm_free(ptr)


def load_image(path: str | os.PathLike | bytes | Any, lenient: bool = False, exif_transpose: bool = False,
               **limits: int) -> numpy.ndarray:
    """A PNG or JPEG file as a (H, W, 4) uint8 NumPy array, decoded exactly as pxrun --in decodes it
    (libpng, libjpeg-turbo), the limits checked from the file's header first. path: the file's
    path, or its contents: the bytes (as a dataset stores them), or a file object open in binary
    mode (io.BytesIO...), named in messages by its .name or as <bytes>.

    Decoding is strict: a truncated or corrupt file raises ``pxvm.Malformed``. ``lenient=True``
    (pxrun's ``--lenient``) decodes what it can and reports what it went past as a ``UserWarning``
    with pxrun's words. Bytes after a complete image (after a PNG's IEND, a JPEG's end-of-image
    marker: a motion photo's video, an MPF file's second image, padding) are no damage: the image
    is returned in both modes, with a ``UserWarning`` that says how many bytes were ignored.

    ``exif_transpose=True`` applies the file's EXIF orientation (1..8: a JPEG's APP1 Exif
    segment, a PNG's eXIf chunk) as Pillow's ``ImageOps.exif_transpose`` does (Hugging Face's
    ``load_image`` calls it): the upright image, (W, H, 4) for orientations 5..8. An absent or
    malformed EXIF block changes nothing. Off by default (the pixels as stored, as pxrun)."""
    np = _np()
    if not isinstance(exif_transpose, bool):
        raise UsageError("usage: exif_transpose is True or False, not %r" % (exif_transpose,))
    lim = _limits(**limits)  # a Runner call's exif_transpose=True included (exif_transposed)
    if exif_transpose:
        lim.flags |= PXVM_DECODE_EXIF_TRANSPOSE
    if lenient:
        lim.flags |= PXVM_DECODE_LENIENT
    px, w, h, warning = _decode(path, lim)
    if warning:
        warnings.warn(warning, stacklevel=2)
    data = _take_bytes(px, w * h * 4)
    return np.frombuffer(data, dtype=np.uint8).reshape(h, w, 4).copy()


def _contents(source):
    """The bytes of an image given as its contents rather than a path (None for a path): a file
    object (its read()), a bytearray or memoryview, or bytes holding a NUL (which no path holds,
    and every PNG and JPEG does)."""
    if hasattr(source, "read"):
        source = source.read()
        if not isinstance(source, (bytes, bytearray, memoryview)):
            raise UsageError("usage: the file object gave %s, not bytes: open it in binary mode ('rb')"
                             % type(source).__name__)
        return bytes(source)
    if isinstance(source, (bytearray, memoryview)) or (isinstance(source, bytes) and b"\0" in source):
        return bytes(source)
    return None


def _decode(path, lim):
    """The library's decode of a file: (pointer to its RGBA8 pixels, which the caller hands to
    pxvm_free, w, h, the warning to give or None). Callable from any thread: ctypes releases the
    GIL during the decode and the library's message and warning are the calling thread's."""
    px, w, h = ctypes.c_void_p(), ctypes.c_int(), ctypes.c_int()
    data = _contents(path)
    if data is not None:  # the file's bytes, decoded from memory (pxvm_image_decode)
        name = _capi.c_string(str(getattr(path, "name", "<bytes>")), "name", path=True)
        _check(_lib.pxvm_image_decode(data, len(data), name, ctypes.byref(lim), ctypes.byref(px), ctypes.byref(w),
                                      ctypes.byref(h)))
    else:
        _check(_lib.pxvm_image_load(_capi.c_string(path, "path", path=True), ctypes.byref(lim), ctypes.byref(px),
                                    ctypes.byref(w), ctypes.byref(h)))
    warning = _lib.pxvm_warning()  # lenient: damage gone past; either mode: bytes after the end
    return px, w.value, h.value, "pxvm: " + warning.decode(errors="replace") if warning else None
