"""ctypes bindings of libpxvm.so (include/pxvm.h). No compiled extension: the same files run under
any python3 that has ctypes, whatever its version."""
import ctypes
import operator
import os

from . import _libload
from .errors import UsageError


def _usage(message):
    return UsageError(message)


def _c_range(ctype):
    bits = 8 * ctypes.sizeof(ctype)
    return (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if ctype(-1).value < 0 else (0, (1 << bits) - 1)


_RANGES = {t: _c_range(t) for t in (ctypes.c_int, ctypes.c_int32, ctypes.c_int64, ctypes.c_uint32, ctypes.c_uint64,
                                    ctypes.c_size_t)}


def c_integer(value, name, ctype=ctypes.c_int):
    """value as the int that a C argument or field of type ctype receives, checked first: ctypes
    would keep only its low bits (2**32 + 16 read as 16, -1 as the largest unsigned value). A
    whole number (int, NumPy integer, integral float) in ctype's range, else a UsageError naming
    the argument and the value. Every integer the package hands the library passes here."""
    try:
        v = operator.index(value)
    except TypeError:
        if not (isinstance(value, float) and value.is_integer()):
            raise _usage("usage: %s = %r: a whole number is needed" % (name, value)) from None
        v = int(value)
    lo, hi = _RANGES[ctype]
    if not lo <= v <= hi:
        raise _usage("usage: %s = %d is out of range (%d..%d)" % (name, v, lo, hi))
    return v


def _short(value, limit=80):
    """repr(value) cut to about limit characters (an image's bytes given as a path would fill a
    screen), saying how long it was."""
    r = repr(value)
    return r if len(r) <= limit else "%s... (%d characters)" % (r[:limit - 20], len(r))


def c_string(value, name, path=False):
    """value as the bytes of a C string (str: UTF-8; path=True: a file name, os.fsencode), checked
    first: C reads a string up to its first NUL, so "image\0junk" would be taken as "image". A
    string with a NUL is a UsageError naming the argument. Every string the package hands the
    library passes here."""
    try:
        b = os.fsencode(value) if path else value.encode() if isinstance(value, str) else bytes(value)
    except TypeError:
        raise _usage("usage: %s = %s: a %s is needed" % (name, _short(value), "path" if path else "string")) from None
    if b"\0" in b:
        raise _usage("usage: %s %s contains a NUL character (C would read only what comes before it)" %
                     (name, _short(value)))
    return b


class View(ctypes.Structure):
    """pxvm_view: images in caller memory at any byte strides."""
    _fields_ = [("data", ctypes.c_void_p), ("device", ctypes.c_int), ("items", ctypes.c_int),
                ("w", ctypes.c_int), ("h", ctypes.c_int), ("channels", ctypes.c_int),
                ("item_stride", ctypes.c_int64), ("row_stride", ctypes.c_int64),
                ("px_stride", ctypes.c_int64), ("ch_stride", ctypes.c_int64)]


class SlotInfo(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char * 16), ("role", ctypes.c_char_p), ("w", ctypes.c_int),
                ("h", ctypes.c_int), ("levels", ctypes.c_int), ("patch_w", ctypes.c_int),
                ("patch_h", ctypes.c_int), ("patch_count", ctypes.c_int),
                # an any-size input (format 1.1): its bounds; 0 for every other slot
                ("any_size", ctypes.c_int), ("min_side", ctypes.c_int), ("max_side", ctypes.c_int),
                ("max_pixels", ctypes.c_uint64)]


class Limits(ctypes.Structure):
    _fields_ = [("max_side", ctypes.c_uint32), ("max_memory", ctypes.c_uint64),
                ("max_insns", ctypes.c_uint32), ("max_steps", ctypes.c_uint64), ("flags", ctypes.c_uint32)]


class TokenFormat(ctypes.Structure):
    """pxvm_token_format: dtype, layout, alpha, rescale, mean/std of the tokens for models."""
    _fields_ = [("dtype", ctypes.c_int), ("layout", ctypes.c_int), ("alpha", ctypes.c_int),
                ("nvalues", ctypes.c_int), ("rescale", ctypes.c_double), ("mean", ctypes.c_double * 4),
                ("std", ctypes.c_double * 4), ("rule", ctypes.c_int)]


class RaggedArgs(ctypes.Structure):
    """pxvm_ragged: a batch of images of many sizes resized by a policy and cut into tiles."""
    _fields_ = [("policy", ctypes.c_char_p), ("patch", ctypes.c_int), ("out_w", ctypes.c_int),
                ("out_h", ctypes.c_int), ("fmt", ctypes.POINTER(TokenFormat)), ("dst", ctypes.c_void_p),
                ("dst_device", ctypes.c_int), ("dst_bytes", ctypes.c_size_t), ("failed", ctypes.c_int),
                ("merge", ctypes.c_int), ("temporal", ctypes.c_int)]


def _load():
    lib, path = _libload.lib, _libload.library_path
    P, I, S, Z = ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t
    PP = ctypes.POINTER(ctypes.c_void_p)
    IP = ctypes.POINTER(ctypes.c_int)
    VP = ctypes.POINTER(View)
    LP = ctypes.POINTER(Limits)
    sig = {
        "pxvm_version": (S, []),
        "pxvm_errmsg": (S, []),
        "pxvm_errclass": (I, []),
        "pxvm_warning": (S, []),
        "pxvm_free": (None, [P]),
        "pxvm_limits_default": (None, [LP]),
        "pxvm_image_load": (I, [S, LP, PP, IP, IP]),
        "pxvm_image_decode": (I, [P, Z, S, LP, PP, IP, IP]),
        "pxvm_image_fit": (I, [P, I, I, I, I, S, PP]),
        "pxvm_image_fit_channels": (I, [P, I, I, I, I, I, S, PP]),
        "pxvm_policy_dynamic_size": (I, [S, I, I, I, IP, IP]),
        "pxvm_policy_canonical": (I, [S, P, Z]),
        "pxvm_prog_load": (I, [S, LP, PP]),
        "pxvm_prog_from_png": (I, [P, Z, S, LP, PP]),
        "pxvm_prog_assemble": (I, [S, S, LP, PP]),
        "pxvm_prog_from_plan": (I, [S, S, LP, PP]),
        "pxvm_prog_free": (None, [P]),
        "pxvm_prog_disassemble": (I, [P, PP]),
        "pxvm_prog_encode": (I, [P, PP, ctypes.POINTER(Z)]),
        "pxvm_prog_slot_count": (I, [P]),
        "pxvm_prog_slot": (I, [P, I, ctypes.POINTER(SlotInfo)]),
        "pxvm_prog_slot_find": (I, [P, S]),
        "pxvm_runner_open": (I, [P, S, I, I, I, PP]),
        "pxvm_runner_close": (None, [P]),
        "pxvm_runner_executor": (S, [P]),
        "pxvm_runner_set_stream": (I, [P, P]),
        "pxvm_runner_bind": (I, [P, I, I, VP]),
        "pxvm_runner_keep_borrows": (I, [P, I]),
        "pxvm_runner_fuse_embed": (I, [P, I]),
        "pxvm_runner_run": (I, [P]),
        "pxvm_runner_read": (I, [P, I, I, I, VP]),
        "pxvm_runner_read_patches": (I, [P, I, I, VP]),
        "pxvm_runner_sync": (I, [P]),
        "pxvm_runner_exec": (I, [P, I, IP, IP, VP, I, IP, IP, VP]),
        "pxvm_runner_set_fixations": (I, [P, I, I, I, I, P, I]),
        "pxvm_runner_read_fixations": (I, [P, I, I, P, I]),
        "pxvm_runner_read_geometry": (I, [P, I, I, I, P, I]),
        "pxvm_runner_slot_size": (I, [P, I, IP, IP]),
        "pxvm_prog_fixation_use": (I, [P]),
        "pxvm_prog_fixation_inputs": (I, [P]),
        "pxvm_runner_set_fixations_normalized": (I, [P, I, I, I, I, P]),
        "pxvm_runner_set_dirty": (I, [P, I, P, I]),
        "pxvm_runner_restart": (I, [P]),
        "pxvm_runner_read_changed": (I, [P, I, I, I, P, I]),
        "pxvm_video_open": (I, [S, LP, PP]),
        "pxvm_video_info": (I, [P, IP, IP, ctypes.POINTER(ctypes.c_long), ctypes.POINTER(ctypes.c_double)]),
        "pxvm_video_next": (I, [P, VP, IP]),
        "pxvm_video_close": (None, [P]),
        "pxvm_token_format_preset": (I, [S, ctypes.POINTER(TokenFormat)]),
        "pxvm_runner_read_tokens": (I, [P, I, I, I, ctypes.POINTER(TokenFormat), P, I]),
        "pxvm_ragged_plan": (I, [S, I, I, I, I, IP, IP, ctypes.POINTER(ctypes.c_int64), IP]),
        "pxvm_runner_ragged": (I, [P, I, VP, ctypes.POINTER(RaggedArgs)]),
    }
    for name, (res, args) in sig.items():
        f = getattr(lib, name)
        f.restype = res
        f.argtypes = args
    return lib, path


lib, library_path = _load()
