"""The PEP 517 build backend of the pxvm Python package (python/pyproject.toml), in the standard
library alone, so that `pip install ./python` works offline in any virtual environment: a venv made
without --system-site-packages has setuptools but not the wheel package, which Debian's setuptools
66 needs to build a wheel. A wheel is a zip file: the package's .py files, the metadata of
pyproject.toml's [project] table, the shipped programs (pxvm/_programs/: _program_files) and (see
_bundled_library) libpxvm.so.1.

Hooks: build_wheel, build_sdist, build_editable (a .pth naming this folder: the package found
through the checkout, and with it the checkout's build/libpxvm.so.1), their get_requires_* (none)
and prepare_metadata_*.
"""
import base64
import hashlib
import io
import os
import re
import subprocess
import sys
import sysconfig
import tarfile
import zipfile

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))      # python/
ROOT = os.path.dirname(HERE)                                           # pxvm's source tree, if it is one
SONAME = "libpxvm.so.1"
DATE = (1980, 1, 1, 0, 0, 0)                                           # reproducible zip entries


def _project():
    """pyproject.toml's [project] table (tomllib, or the subset written there on Python < 3.11)."""
    with open(os.path.join(HERE, "pyproject.toml"), "rb") as f:
        text = f.read()
    try:
        import tomllib
        return tomllib.loads(text.decode())["project"]
    except ImportError:
        pass
    tables, table, key = {}, None, None
    for line in text.decode().splitlines():
        line = line.split(" #")[0].strip() if not line.lstrip().startswith("#") else ""
        if not line:
            continue
        m = re.fullmatch(r"\[([\w.-]+)\]", line)
        if m:
            table = tables.setdefault(m.group(1), {})
            continue
        k, _, v = line.partition("=")
        v = v.strip()
        if v.startswith('"'):
            table[k.strip()] = v.strip('"')
        elif v.startswith("["):
            table[k.strip()] = re.findall(r'"([^"]*)"', v)
    project = tables.get("project", {})
    project["optional-dependencies"] = tables.get("project.optional-dependencies", {})
    return project


def _metadata():
    p = _project()
    lines = ["Metadata-Version: 2.1", "Name: %s" % p["name"], "Version: %s" % p["version"],
             "Summary: %s" % p.get("description", ""), "License: MIT",
             "Requires-Python: %s" % p.get("requires-python", ">=3")]
    lines += ["Requires-Dist: %s" % d for d in p.get("dependencies", [])]
    for extra, deps in p.get("optional-dependencies", {}).items():
        lines.append("Provides-Extra: %s" % extra)
        lines += ['Requires-Dist: %s ; extra == "%s"' % (d, extra) for d in deps]
    return p["name"], p["version"], "\n".join(lines) + "\n"


def _dist_info():
    name, version, _ = _metadata()
    return "%s-%s.dist-info" % (name, version)


def _installed_library():
    """Whether a libpxvm.so.1 loads here (LD_LIBRARY_PATH, the ldconfig cache), as at import."""
    import ctypes
    try:
        ctypes.CDLL(SONAME)
        return True
    except OSError:
        return False


def _in_tree():
    """Whether python/ sits in pxvm's source tree (else: an unpacked sdist)."""
    return all(os.path.exists(os.path.join(ROOT, f)) for f in ("Makefile", "include/pxvm.h", "api/libpxvm.map"))


def _bundled_library():
    """The library to copy into the wheel, or None. PXVM_BUNDLE=auto (the default): none when one is
    installed (the package finds it at import), else the source tree's, built with `make -C .. lib`
    (none outside a source tree: an sdist); 1: always the source tree's; 0: never."""
    mode = os.environ.get("PXVM_BUNDLE", "auto")
    if mode not in ("auto", "0", "1"):
        raise ValueError("pxvm: PXVM_BUNDLE is %r: give auto, 0 or 1" % mode)
    in_tree = _in_tree()
    why = ("PXVM_BUNDLE=0" if mode == "0" else
           "a libpxvm.so.1 is installed" if mode == "auto" and _installed_library() else
           "not built in pxvm's source tree" if mode == "auto" and not in_tree else None)
    if why:
        print("pxvm: the wheel holds no library (%s): the package loads the installed one" % why, file=sys.stderr)
        return None
    if not in_tree:
        raise RuntimeError("pxvm: PXVM_BUNDLE=1 needs pxvm's source tree around python/ (%s)" % ROOT)
    make = os.environ.get("MAKE", "make")
    print("pxvm: building the library to bundle: %s -C %s BUILD=build lib" % (make, ROOT), file=sys.stderr)
    subprocess.run([make, "-C", ROOT, "BUILD=build", "lib"], check=True, stdout=sys.stderr)
    return os.path.realpath(os.path.join(ROOT, "build", SONAME))


def _record_hash(data):
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _write_wheel(wheel_directory, files, pure):
    """files: [(path in the wheel, bytes, mode)]; adds the dist-info and returns the wheel's name."""
    name, version, metadata = _metadata()
    tag = "py3-none-any" if pure else "py3-none-" + re.sub(r"[-.]", "_", sysconfig.get_platform())
    dist_info = _dist_info()
    wheel_meta = "Wheel-Version: 1.0\nGenerator: pxvm_backend\nRoot-Is-Purelib: %s\nTag: %s\n" % (
        "true" if pure else "false", tag)
    files = files + [(dist_info + "/METADATA", metadata.encode(), 0o644),
                     (dist_info + "/WHEEL", wheel_meta.encode(), 0o644),
                     (dist_info + "/top_level.txt", b"pxvm\n", 0o644)]
    record = "".join("%s,%s,%d\n" % (path, _record_hash(data), len(data)) for path, data, _ in files)
    record += dist_info + "/RECORD,,\n"
    files.append((dist_info + "/RECORD", record.encode(), 0o644))
    filename = "%s-%s-%s.whl" % (name, version, tag)
    with zipfile.ZipFile(os.path.join(wheel_directory, filename), "w", zipfile.ZIP_DEFLATED) as z:
        for path, data, mode in files:
            info = zipfile.ZipInfo(path, DATE)
            info.external_attr = (0o100000 | mode) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
    return filename


#: the package's subpackages (folders of .py files), shipped with its own .py files
PY_SUBPACKAGES = ("processors",)


def _package_files():
    pkg = os.path.join(HERE, "pxvm")
    out = []
    for sub in PY_SUBPACKAGES:  # pxvm.processors: a folder of modules
        for f in sorted(os.listdir(os.path.join(pkg, sub))):
            if f.endswith(".py"):
                with open(os.path.join(pkg, sub, f), "rb") as fh:
                    out.append(("pxvm/%s/%s" % (sub, f), fh.read(), 0o644))
    for f in sorted(os.listdir(pkg)):
        if f.endswith(".py"):
            with open(os.path.join(pkg, f), "rb") as fh:
                out.append(("pxvm/" + f, fh.read(), 0o644))
    return out + _program_files()


PROGRAM_KINDS = (".pxi", ".json")


def _program_files():
    """The shipped programs as pxvm/_programs/NAME.pxi and their plans NAME.json (pxvm.programs.path):
    from the source tree's programs/ (the .pxi built there first with make when one is missing),
    or, outside a source tree (a wheel built from the sdist), from the sdist's pxvm/_programs/."""
    src = os.path.join(ROOT, "programs")
    if _in_tree() and os.path.isdir(src):
        sources = [f for f in os.listdir(src) if f.endswith((".pxs", ".json"))]
        want = sorted({os.path.splitext(f)[0] + ".pxi" for f in sources})
        missing = [f for f in want if not os.path.isfile(os.path.join(src, f))]
        if missing:
            make = os.environ.get("MAKE", "make")
            print("pxvm: building the programs to ship: %s -C %s %s" % (make, ROOT, " ".join(missing)), file=sys.stderr)
            subprocess.run([make, "-C", ROOT, "BUILD=build"] + ["programs/" + f for f in missing], check=True,
                           stdout=sys.stderr)
        files = want + sorted(f for f in sources if f.endswith(".json"))
    else:
        src = os.path.join(HERE, "pxvm", "_programs")
        files = sorted(f for f in os.listdir(src) if f.endswith(PROGRAM_KINDS)) if os.path.isdir(src) else []
    out = []
    for f in files:
        with open(os.path.join(src, f), "rb") as fh:
            out.append(("pxvm/_programs/" + f, fh.read(), 0o644))
    return out


def _write_metadata(metadata_directory):
    d = os.path.join(metadata_directory, _dist_info())
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "METADATA"), "w") as f:
        f.write(_metadata()[2])
    return _dist_info()


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    return _write_metadata(metadata_directory)


def prepare_metadata_for_build_editable(metadata_directory, config_settings=None):
    return _write_metadata(metadata_directory)


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    files = _package_files()
    lib = _bundled_library()
    if lib:
        with open(lib, "rb") as f:
            files.append(("pxvm/" + SONAME, f.read(), 0o755))
    return _write_wheel(wheel_directory, files, pure=lib is None)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    return _write_wheel(wheel_directory, [("pxvm.pth", (HERE + "\n").encode(), 0o644)], pure=True)


def build_sdist(sdist_directory, config_settings=None):
    name, version, metadata = _metadata()
    base = "%s-%s" % (name, version)
    filename = base + ".tar.gz"
    members = [("PKG-INFO", metadata.encode())]
    for rel in ["pyproject.toml", "build_backend/pxvm_backend.py"]:
        with open(os.path.join(HERE, rel), "rb") as f:
            members.append((rel, f.read()))
    members += [(rel, data) for rel, data, _ in _package_files()]  # the programs too, built if need be
    with tarfile.open(os.path.join(sdist_directory, filename), "w:gz", format=tarfile.PAX_FORMAT) as t:
        for rel, data in members:
            info = tarfile.TarInfo(base + "/" + rel)
            info.size, info.mode, info.mtime = len(data), 0o644, 315532800
            t.addfile(info, io.BytesIO(data))
    return filename

