"""ctypes bindings of libpxvm.so (include/pxvm.h). No compiled extension: the same files run under
any python3 that has ctypes, whatever its version."""
import ctypes
import os

_HERE = os.path.dirname(os.path.abspath(__file__))


def _find_library():
    """PXVM_LIB, then the build tree this package sits in, then the system's loader path."""
    env = os.environ.get("PXVM_LIB")
    if env:
        return env
    for cand in (os.path.join(_HERE, "libpxvm.so.1"),
                 os.path.join(_HERE, "..", "..", "build", "libpxvm.so.1")):
        if os.path.exists(cand):
            return os.path.abspath(cand)
    return "libpxvm.so.1"


class View(ctypes.Structure):
    """pxvm_view: images in caller memory at any byte strides."""
    _fields_ = [("data", ctypes.c_void_p), ("device", ctypes.c_int), ("items", ctypes.c_int),
                ("w", ctypes.c_int), ("h", ctypes.c_int), ("channels", ctypes.c_int),
                ("item_stride", ctypes.c_int64), ("row_stride", ctypes.c_int64),
                ("px_stride", ctypes.c_int64), ("ch_stride", ctypes.c_int64)]


class SlotInfo(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char * 16), ("role", ctypes.c_char_p), ("w", ctypes.c_int),
                ("h", ctypes.c_int), ("levels", ctypes.c_int), ("patch_w", ctypes.c_int),
                ("patch_h", ctypes.c_int), ("patch_count", ctypes.c_int)]


class Limits(ctypes.Structure):
    _fields_ = [("max_side", ctypes.c_uint32), ("max_memory", ctypes.c_uint64),
                ("max_insns", ctypes.c_uint32), ("max_steps", ctypes.c_uint64), ("flags", ctypes.c_uint32)]


def _load():
    path = _find_library()
    try:
        lib = ctypes.CDLL(path)
    except OSError as e:
        raise ImportError(
            "pxvm: cannot load the library %s (%s); build it with 'make' or set PXVM_LIB" % (path, e)) from None
    P, I, S, Z = ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t
    PP = ctypes.POINTER(ctypes.c_void_p)
    IP = ctypes.POINTER(ctypes.c_int)
    VP = ctypes.POINTER(View)
    LP = ctypes.POINTER(Limits)
    sig = {
        "pxvm_version": (S, []),
        "pxvm_errmsg": (S, []),
        "pxvm_errclass": (I, []),
        "pxvm_free": (None, [P]),
        "pxvm_limits_default": (None, [LP]),
        "pxvm_image_load": (I, [S, LP, PP, IP, IP]),
        "pxvm_image_decode": (I, [P, Z, S, LP, PP, IP, IP]),
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
        "pxvm_runner_run": (I, [P]),
        "pxvm_runner_read": (I, [P, I, I, I, VP]),
        "pxvm_runner_read_patches": (I, [P, I, I, VP]),
        "pxvm_runner_sync": (I, [P]),
        "pxvm_runner_exec": (I, [P, I, IP, IP, VP, I, IP, IP, VP]),
        "pxvm_runner_set_fixations": (I, [P, I, I, I, I, P, I]),
        "pxvm_runner_read_fixations": (I, [P, I, I, P, I]),
        "pxvm_runner_read_geometry": (I, [P, I, I, I, P, I]),
        "pxvm_prog_fixation_use": (I, [P]),
        "pxvm_runner_set_dirty": (I, [P, I, P, I]),
        "pxvm_runner_restart": (I, [P]),
        "pxvm_runner_read_changed": (I, [P, I, I, I, P, I]),
    }
    for name, (res, args) in sig.items():
        f = getattr(lib, name)
        f.restype = res
        f.argtypes = args
    return lib, path


lib, library_path = _load()
