"""libpxvm.so.1 found and loaded (no prototypes: _capi.py declares them); the one module below
errors.py and _capi.py, so that both use the library without importing each other."""
import ctypes
import os

_HERE = os.path.dirname(os.path.abspath(__file__))
_SONAME = "libpxvm.so.1"


def _candidates():
    """Where the library may be, in order, as (path or None, why not): the package's own copy (a pip
    build bundles one; `make install` links the one it installed); a source checkout's build/
    (python/pxvm beside include/pxvm.h: what `make` built there comes before an installed library,
    which may be older); the loader's path (LD_LIBRARY_PATH, the ldconfig cache: what `make install`
    put in /usr/local/lib). ctypes.util.find_library adds nothing on Linux: it returns the soname,
    which dlopen looks up on the same path."""
    own = os.path.join(_HERE, _SONAME)
    yield (own, None) if os.path.exists(own) else (None, own + ": none")
    root = os.path.normpath(os.path.join(_HERE, "..", ".."))
    built = os.path.join(root, "build", _SONAME)
    if not os.path.exists(os.path.join(root, "include", "pxvm.h")):
        yield None, "a source checkout's build/: not in one"
    else:
        yield (built, None) if os.path.exists(built) else (None, built + ": not built")
    yield _SONAME, None


def _open():
    """The library: PXVM_LIB when set, else the first of _candidates that exists. ImportError names
    the file and dlopen's words when it does not load, or every place looked at when none is there."""
    env = os.environ.get("PXVM_LIB")
    if env:
        candidates, looked = [(env, None)], []
    else:
        candidates, looked = _candidates(), ["PXVM_LIB: not set"]
    for path, why_not in candidates:
        if path is None:
            looked.append(why_not)
            continue
        try:
            return ctypes.CDLL(path if path == _SONAME else os.path.abspath(path)), path
        except OSError as e:
            if path != _SONAME:
                raise ImportError("pxvm: cannot load the library %s (%s); %s" % (
                    path, e, "point PXVM_LIB at a libpxvm.so.1, or unset it" if env else
                    "rebuild it ('make'), or set PXVM_LIB to another")) from None
            looked.append("the loader's path (LD_LIBRARY_PATH, the ldconfig cache): %s" % e)
    raise ImportError(
        "pxvm: cannot find %s. Looked at:\n  %s\n"
        "Install it ('make install' in pxvm's source tree: /usr/local/lib, then ldconfig), set PXVM_LIB "
        "to one (PXVM_LIB=/path/to/pxvm/build/%s), or reinstall this package from the source tree "
        "('pip install ./python' bundles the library it builds when none is installed)."
        % (_SONAME, "\n  ".join(looked), _SONAME))


lib, library_path = _open()
