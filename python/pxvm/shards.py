"""pxbatch shards read as NumPy arrays, checked by the shard rule of tools/pxbatch.h (as pxbatch
--verify checks them): load_shard and iter_shards (see pxvm.data for the datasets over them)."""
from __future__ import annotations

import json
import math
import os
import warnings

from .errors import Error, Malformed, PxIOError
from .policies import dynamic_size
from ._progress import progress_bar
from ._arrays import _np


# ---- the shard rule ----------------------------------------------------------------------------
# One rule for what a pxbatch --out folder holds, written once in tools/pxbatch.h ("the shard
# rule", [SH-NAME] .. [SH-NAMES]) and checked there by pxbatch --verify; the functions below are
# its mirror, each naming the part it checks (tests/python/test_data_safety.py runs both on the
# same tampered folders). What --verify calls corrupt or orphaned is Malformed here, what it calls
# missing PxIOError (partial=True reads the rest), each naming the file.

_MARKER_MAX = 1 << 30          # PXB_MARKER_MAX
_SHARD_SIZE_MAX = 4096         # PXB_SHARD_SIZE_MAX
_INT32_MAX = 2 ** 31 - 1
_EXTS = ("json", "npy", "offsets.npy", "grid.npy")  # PXB_JSON .. PXB_GRID
_DIGITS = frozenset("0123456789")
_HEX = frozenset("0123456789abcdefABCDEF")


def _shard_entry(name):
    """[SH-NAME] (pxb_shard_entry): (kind, K) of a folder entry's name: kind one of _EXTS with K
    its shard number, "temp" (an unfinished write's), "stray" (any other "shard-..." name), or
    None (not the job's)."""
    if not name.startswith("shard-"):
        return None, None
    if ".tmp-" in name[6:]:
        return "temp", None
    i = 6
    while i < len(name) and name[i] in _DIGITS and i - 6 < 11:
        i += 1
    digits = name[6:i]
    if len(digits) < 5 or (len(digits) > 5 and digits[0] == "0") or int(digits) > _INT32_MAX or name[i:i + 1] != ".":
        return "stray", None
    return (name[i + 1:], int(digits)) if name[i + 1:] in _EXTS else ("stray", None)


def _stray(path):
    return Malformed("malformed: '%s' is not a file pxbatch writes (shard-NNNNN.json, .npy, .offsets.npy, "
                     ".grid.npy): a copy or a renamed file? pxbatch --verify lists it as orphaned" % path)


def _open_regular(path):
    """[SH-FILE]: (fd, size) of path, a regular file, opened without blocking so that a FIFO, a
    device or a folder is refused (Malformed) before a byte is read; PxIOError when it cannot be
    opened."""
    import stat
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | getattr(os, "O_NOCTTY", 0))
    except OSError as e:
        raise PxIOError("i/o error: cannot read '%s': %s" % (path, e.strerror or e)) from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        what = ("a FIFO" if stat.S_ISFIFO(st.st_mode) else "a folder" if stat.S_ISDIR(st.st_mode)
                else "a device" if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode) else "a socket or another kind")
        raise Malformed("malformed: '%s' is not a regular file (%s): not a file pxbatch writes" % (path, what))
    return fd, st.st_size


def _read_regular(path, cap, exact=False):
    """The bytes of regular file path ([SH-FILE]): at most cap of them, or exactly cap (exact);
    another size is Malformed before a byte is read."""
    fd, size = _open_regular(path)
    try:
        if size > cap or (exact and size != cap):
            raise Malformed(("malformed: shard file '%s' is %d bytes, its marker says %d (pxbatch --verify: corrupt)"
                             if exact else "malformed: '%s' is %d bytes, over the %d bytes a pxbatch marker can be")
                            % (path, size, cap))
        with os.fdopen(os.dup(fd), "rb") as f:
            data = f.read(size)
    except OSError as e:
        raise PxIOError("i/o error: cannot read '%s': %s" % (path, e.strerror or e)) from None
    finally:
        os.close(fd)
    if len(data) != size:
        raise PxIOError("i/o error: cannot read '%s': short read" % path)
    return data


def _strict_json(data):
    """JSON as pxbatch --verify reads it (jansson, duplicate keys refused): UTF-8, no NaN or
    Infinity, no duplicate key, no NUL or lone surrogate in a string, integers within int64 and
    finite reals; ValueError otherwise."""
    def pairs(kv):
        d = {}
        for k, v in kv:
            if k in d:
                raise ValueError("duplicate object key %r" % k)
            d[k] = v
        return d

    def no_constant(c):
        raise ValueError("%s is not JSON" % c)

    m = json.loads(data.decode("utf-8"), object_pairs_hook=pairs, parse_constant=no_constant)
    todo = [m]
    while todo:
        x = todo.pop()
        if isinstance(x, str):
            if "\0" in x:
                raise ValueError("a string holds a NUL character")
            x.encode("utf-8")  # a lone surrogate: UnicodeEncodeError, a ValueError
        elif type(x) is int and not -2 ** 63 <= x < 2 ** 63:
            raise ValueError("an integer past int64")
        elif type(x) is float and not math.isfinite(x):
            raise ValueError("a number past a double's range")
        elif isinstance(x, dict):
            todo.extend(x.keys())
            todo.extend(x.values())
        elif isinstance(x, list):
            todo.extend(x)
    return m


def _int(obj, key, lo, hi):
    v = obj.get(key) if isinstance(obj, dict) else None
    return v if type(v) is int and lo <= v <= hi else None


def _pair(a):
    """[w, h] of integers 1..2^31-1, else None."""
    if type(a) is list and len(a) == 2 and all(type(x) is int and 1 <= x <= _INT32_MAX for x in a):
        return a
    return None


def _entry_name(e):
    """The file an entry names ("file_bytes" hex, else "file"), as bytes (pxb_json_get_name); None
    when it names none."""
    if "file_bytes" in e:
        h = e["file_bytes"]
        if not isinstance(h, str) or not h or len(h) % 2 or not set(h) <= _HEX:
            return None
        b = bytes.fromhex(h)
        return None if 0 in b else b
    s = e.get("file")
    if not isinstance(s, str) or not s:
        return None
    try:
        return s.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate (jansson refuses it)
        return None


class _Marker:
    """A marker as [SH-JOB] and [SH-ROW] read it (pxb_marker_parse)."""


def _parse_marker(path, shard):
    """[SH-FILE], [SH-JOB], [SH-ROW]: the marker at path, of shard number `shard`, checked field
    by field as pxbatch --verify checks it; Malformed naming the file and the field otherwise."""
    data = _read_regular(path, _MARKER_MAX)

    def bad(why):
        return Malformed("malformed: '%s' is not a pxbatch marker: %s (pxbatch --verify: corrupt)" % (path, why))

    try:
        r = _strict_json(data)
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise bad("not JSON (%s)" % e) from None
    if not isinstance(r, dict) or _int(r, "pxbatch", 1, 1) is None:
        raise bad("not a marker of this pxbatch (\"pxbatch\": 1 missing: an older pxbatch's?)")
    if _int(r, "shard", shard, shard) is None:
        raise bad("'shard' is not %d, the number of its name" % shard)
    m = _Marker()
    m.path, m.root, m.shard, m.job = path, r, shard, r.get("job")
    if not isinstance(m.job, dict):
        raise bad("no 'job' object")
    m.shard_size = _int(m.job, "shard_size", 1, _SHARD_SIZE_MAX)
    m.inputs = _int(m.job, "inputs", 0, _INT32_MAX)
    if m.shard_size is None or m.inputs is None:
        raise bad("job: 'shard_size' is not an integer 1..%d or 'inputs' not 0..%d" % (_SHARD_SIZE_MAX, _INT32_MAX))
    m.first = shard * m.shard_size
    if m.first >= m.inputs:
        raise bad("shard %d is past the job's %d inputs" % (shard, m.inputs))
    m.count = min(m.shard_size, m.inputs - m.first)
    m.policy = m.job.get("policy", "exact")
    if not isinstance(m.policy, str):
        raise bad("job: 'policy' is not a policy text")
    m.native = m.policy == "native"
    dynamic = m.policy == "dynamic" or m.policy.startswith("dynamic:")
    ragged = r.get("ragged")
    m.ragged = "ragged" in r
    if dynamic != m.ragged:
        raise bad(("no 'ragged', but policy %s writes ragged shards" if dynamic else
                   "a 'ragged', but policy %s writes shards of one shape") % m.policy)
    shape, dims = r.get("shape"), 4 if m.ragged else 5
    if (type(shape) is not list or len(shape) != dims or
            any(type(x) is not int or not 0 <= x <= _INT32_MAX for x in shape) or shape[-1] != 4):
        raise bad("'shape' is not (tokens, h, w, 4)" if m.ragged else "'shape' is not (rows, patches, h, w, 4)")
    if m.ragged and (shape[1] < 1 or shape[2] != shape[1]):
        raise bad("'shape' is not (tokens, p, p, 4)")
    m.shape = shape
    if m.ragged:
        ok = isinstance(ragged, dict)
        m.offsets_bytes = _int(ragged, "offsets_bytes", 0, 2 ** 63 - 1)
        m.grid_bytes = _int(ragged, "grid_bytes", 0, 2 ** 63 - 1)
        m.offsets_sha256 = ragged.get("offsets_sha256") if ok else None
        m.grid_sha256 = ragged.get("grid_sha256") if ok else None
        if not ok or m.offsets_bytes is None or m.grid_bytes is None or not _is_sha(m.offsets_sha256) or \
                not _is_sha(m.grid_sha256):
            raise bad("'ragged' is not {offsets_bytes, offsets_sha256, grid_bytes, grid_sha256}")
    m.npy_bytes = _int(r, "npy_bytes", 0, 2 ** 63 - 1)
    if m.npy_bytes is None:
        raise bad("'npy_bytes' is not an integer")
    if not _is_sha(r.get("npy_sha256")):
        raise bad("'npy_sha256' is not 64 hex digits")
    rows, errors = r.get("rows"), r.get("errors")
    if type(rows) is not list or type(errors) is not list:
        raise bad("no 'rows' or 'errors' list")
    if not m.ragged and len(rows) != shape[0]:
        raise bad("%d rows listed, but the shape has %d" % (len(rows), shape[0]))
    if len(rows) + len(errors) != m.count:
        raise bad("%d rows and %d errors listed, but the shard has %d inputs" % (len(rows), len(errors), m.count))
    last = m.first + m.count - 1
    entries = []  # (input, name) of rows and errors
    for what, lst in (("rows", rows), ("errors", errors)):
        prev = -1
        for i, e in enumerate(lst):
            if type(e) is not dict:
                raise bad("%s[%d] is not an object" % (what, i))
            if what == "rows" and _int(e, "row", i, i) is None:
                raise bad("rows[%d]: 'row' is not %d" % (i, i))
            if what == "rows":
                _row_sizes(m, e, i, bad)
            k = _int(e, "input", m.first, last)
            if k is None:
                raise bad("%s[%d]: 'input' is not one of the shard's inputs %d..%d" % (what, i, m.first, last))
            name = _entry_name(e)
            if name is None:
                raise bad("%s[%d]: no file name ('file' or 'file_bytes')" % (what, i))
            if what == "errors" and not isinstance(e.get("error"), str):
                raise bad("errors[%d]: no 'error'" % i)
            if k <= prev:
                raise bad("%s[%d] is input %d, expected one after %d" % (what, i, k, prev))
            prev = k
            entries.append((k, name))
    entries.sort()
    if [k for k, _ in entries] != list(range(m.first, m.first + m.count)):
        raise bad("its rows and errors do not name each input %d..%d once" % (m.first, last))
    m.names = [n for _, n in entries]  # in input order: [SH-NAMES]
    m.files = [os.fsdecode(_entry_name(e)) for e in rows]
    return m


def _is_sha(s):
    return isinstance(s, str) and len(s) == 64 and set(s) <= frozenset("0123456789abcdef")


def _row_sizes(m, e, i, bad):
    """[SH-ROW] row i's "size" and "resized" (px__row_sizes)."""
    size, resized = e.get("size"), e.get("resized")
    if (m.ragged or m.native) and _pair(size) is None:
        raise bad("rows[%d]: 'size' is not [w, h] of 1..%d" % (i, _INT32_MAX))
    if not m.ragged and not m.native and "size" in e:
        raise bad("rows[%d]: a 'size', but policy %s binds every image at the input's size" % (i, m.policy))
    if not m.ragged:
        if "resized" in e:
            raise bad("rows[%d]: a 'resized', but the shard is not ragged" % i)
        return
    try:
        want = list(dynamic_size(m.policy, m.shape[1], size[0], size[1]))
    except Error as x:
        raise bad("rows[%d]: 'size' [%d, %d]: %s" % (i, size[0], size[1], x)) from None
    if _pair(resized) != want:
        raise bad("rows[%d]: 'resized' is not [%d, %d], policy %s's size of its 'size' [%d, %d]"
                  % (i, want[0], want[1], m.policy, size[0], size[1]))


def _load_npy(path, size=None, mmap=False):
    """[SH-FILE], [SH-ARRAY]: np.load of one array file of a shard, a regular file (opened without
    blocking) of `size` bytes when given, holding one .npy array and nothing after it. A file that
    cannot be read is PxIOError, one that is no .npy array (truncated, a pickle, another size)
    Malformed, each naming the file."""
    np = _np()
    fd, st_size = _open_regular(path)
    try:
        if size is not None and st_size != size:
            raise Malformed("malformed: shard file '%s' is %d bytes, its marker says %d (pxbatch --verify: corrupt)"
                            % (path, st_size, size))
        # the file checked is the file read: mapped through its descriptor, never the path again
        src = "/proc/self/fd/%d" % fd if mmap and os.path.isdir("/proc/self/fd") else None
        if src is None and mmap:
            src = path
        try:
            if src is not None:
                a = np.load(src, mmap_mode="r", allow_pickle=False)
                end = a.offset + a.nbytes
            else:
                with os.fdopen(os.dup(fd), "rb") as f:
                    a = np.load(f, allow_pickle=False)
                    end = f.tell()
        except OSError as e:
            raise PxIOError("i/o error: cannot read '%s': %s" % (path, e.strerror or e)) from None
        except (ValueError, EOFError) as e:
            raise Malformed("malformed: shard file '%s' is no .npy array: %s" % (path, e)) from None
        if end != st_size:
            raise Malformed("malformed: shard file '%s' is no .npy array: %d bytes after its data"
                            % (path, st_size - end))
        return a
    finally:
        os.close(fd)


def _npy_bytes(path, data):
    """The .npy array that data (the bytes of file path) holds, nothing after it; Malformed naming
    the file otherwise."""
    import io
    f = io.BytesIO(data)
    try:
        a = _np().load(f, allow_pickle=False)
    except (ValueError, EOFError) as e:
        raise Malformed("malformed: shard file '%s' is no .npy array: %s" % (path, e)) from None
    if f.tell() != len(data):
        raise Malformed("malformed: shard file '%s' is no .npy array: %d bytes after its data" % (path, len(data) - f.tell()))
    return a


def _shard_paths(path):
    """(folder, shard number, base path) of a shard given as its .npy path, its marker's (.json)
    or the path without the extension; a name that is not a shard's ([SH-NAME]) is Malformed."""
    p = os.fspath(path)
    base = p[:-4] if p.endswith(".npy") else p[:-5] if p.endswith(".json") else p
    kind, k = _shard_entry(os.path.basename(base) + ".json")
    if kind != "json":
        raise _stray(base + ".npy")
    return os.path.dirname(base), k, base


def load_shard(path: str | os.PathLike, mmap: bool = True):
    """(tokens, offsets, grid, files) of one shard (its .npy path, its marker's, or the path
    without the extension): tokens (T, p, p, 4) uint8 (memory-mapped unless mmap=False), offsets (rows + 1,)
    int64, grid (rows, 3) int64, files the rows' input files (the marker's).

    The shard is checked by the shard rule of tools/pxbatch.h, as pxbatch --verify checks it:
    its name, regular files only (a FIFO or a device is refused, never waited on), the marker
    field by field (its size capped, each row's size and resized), the arrays' sizes and shapes
    against it, a ragged shard's index files by their SHA-256 and against the rows (offsets from 0,
    increasing by each row's grid, to the token count). A shard that breaks it is Malformed naming
    the file; a file missing or unreadable PxIOError. --verify also hashes the tokens."""
    _, k, base = _shard_paths(path)
    return _load_checked(base, _parse_marker(base + ".json", k), mmap)


def _load_checked(base, m, mmap):
    """[SH-ARRAY]: the arrays of the shard whose marker is m."""
    import hashlib
    np = _np()
    tokens = _load_npy(base + ".npy", m.npy_bytes, mmap)
    rows = len(m.files)

    def bad(why):
        return Malformed("malformed: shard '%s': %s (pxbatch --verify: corrupt)" % (base, why))

    if tokens.dtype != np.uint8 or list(tokens.shape) != m.shape or not (tokens.flags.c_contiguous or tokens.size == 0):
        raise bad("its .npy is %s %s, its marker says uint8 %s" % (tokens.dtype, tuple(tokens.shape), tuple(m.shape)))
    if not m.ragged:
        n = tokens.shape[1]
        tokens = tokens.reshape((rows * n,) + tuple(tokens.shape[2:]))
        offsets = np.arange(rows + 1, dtype=np.int64) * n
        grid = np.tile(np.array([1, 1, n], dtype=np.int64), (rows, 1))
        return tokens, offsets, grid, m.files
    index = {}
    for ext, nbytes, sha, shape in (("offsets.npy", m.offsets_bytes, m.offsets_sha256, (rows + 1,)),
                                    ("grid.npy", m.grid_bytes, m.grid_sha256, (rows, 3))):
        f = "%s.%s" % (base, ext)
        data = _read_regular(f, nbytes, exact=True)
        if hashlib.sha256(data).hexdigest() != sha:
            raise bad("its %s's SHA-256 is not its marker's" % ext)
        a = _npy_bytes(f, data)  # the bytes hashed are the bytes read
        if a.dtype != np.dtype("<i8") or a.shape != shape:
            raise bad("its %s is not (%s) int64 for the marker's rows" % (ext, "rows + 1" if len(shape) == 1 else "rows, 3"))
        index[ext] = a
    offsets, grid = index["offsets.npy"], index["grid.npy"]
    # offsets from 0, each the last plus its row's t * h * w, to the token count (grid values
    # checked before they are multiplied)
    ok = bool(np.all(grid[:, 0] == 1) and np.all((grid[:, 1:] >= 1) & (grid[:, 1:] <= _INT32_MAX)))
    if ok:
        want = np.concatenate([[0], np.cumsum([int(g[1]) * int(g[2]) for g in grid.tolist()], dtype=object)])
        ok = offsets.tolist() == want.tolist() and int(want[-1]) == tokens.shape[0]
    if not ok:
        raise bad("its offsets and grid do not agree (offsets from 0 to the %d tokens, each row t * h * w of its "
                  "grid, t = 1)" % tokens.shape[0])
    p = m.shape[1]
    for r, e in enumerate(m.root["rows"]):
        w, h = e["resized"]
        if grid[r].tolist() != [1, h // p, w // p]:
            raise bad("its grid's row %d is %s, but its marker's row %d is resized to (1, %d, %d) patches"
                      % (r, tuple(grid[r].tolist()), r, h // p, w // p))
    return tokens, offsets, grid, m.files


# A job field added after markers were first written, and the value such a marker was made with
# (as tools/pxbatch_marker.c px__job_default): "policy", "exact" (pxbatch resized nothing then).
_JOB_DEFAULTS = {"policy": "exact"}


def _job_diff(a, b):
    """How pxbatch job record b differs from a ("field: A -> B; ..."), as pxbatch --verify's
    pxb_job_diff: "" when they are one job (a field missing from an older marker taken at its
    default)."""
    out = []
    for key in list(b) + [k for k in a if k not in b]:
        x, y = a.get(key, _JOB_DEFAULTS.get(key)), b.get(key, _JOB_DEFAULTS.get(key))
        if x != y:
            out.append("%s: %s -> %s" % (key, "(none)" if x is None else json.dumps(x, separators=(",", ":")),
                                         "(none)" if y is None else json.dumps(y, separators=(",", ":"))))
    return "; ".join(out)


def _scan(d):
    """[SH-NAME], [SH-SET], [SH-JOB]: the shards of folder d by number, {K: (marker, files there)},
    every marker checked and of one job; a stray, or a shard K past the job's count or an index
    file beside a shard that is not ragged (orphaned), Malformed naming it. Temporary files of an
    unfinished write are returned apart (they count as a missing part: partial=True reads on)."""
    try:
        names = os.listdir(d)
    except OSError as e:
        raise PxIOError("i/o error: cannot read '%s': %s" % (d, e.strerror or e)) from None
    have, temps = {}, []
    for name in sorted(names):
        kind, k = _shard_entry(name)
        if kind is None:
            continue
        if kind == "stray":
            raise _stray(os.path.join(d, name))
        if kind == "temp":
            temps.append(os.path.join(d, name))
            continue
        have.setdefault(k, set()).add(kind)
    if not have:
        return {}, temps, None
    markers, first = {}, None
    for k in sorted(have):
        if "json" in have[k]:
            m = _parse_marker(os.path.join(d, "shard-%05d.json" % k), k)
            if first is None:
                first = m
            elif _job_diff(first.job, m.job):
                raise Malformed("malformed: '%s' holds shards of two pxbatch jobs: shard-%05d is of another job than "
                                "shard-%05d (%s); pxbatch --verify lists them: keep one job's shards in a folder"
                                % (d, k, first.shard, _job_diff(first.job, m.job)))
            markers[k] = m
    if first is None:  # files of shards, no marker: unfinished shards of a job not known
        return {}, temps, have
    nshards = (first.inputs + first.shard_size - 1) // first.shard_size
    for k in sorted(have):
        if k >= nshards:
            raise Malformed("malformed: '%s' is past the job's %d shards: pxbatch --verify lists it as orphaned"
                            % (os.path.join(d, "shard-%05d.%s" % (k, sorted(have[k])[0])), nshards))
        if k in markers and not markers[k].ragged and have[k] & {"offsets.npy", "grid.npy"}:
            raise Malformed("malformed: '%s' is an index file beside a shard that is not ragged: pxbatch --verify "
                            "lists it as orphaned" % os.path.join(d, "shard-%05d.%s" % (k, sorted(have[k] & {
                                "offsets.npy", "grid.npy"})[0])))
    shards = {}
    for k, m in markers.items():
        need = {"json", "npy"} | ({"offsets.npy", "grid.npy"} if m.ragged else set())
        if need <= have[k]:
            shards[k] = m
    return shards, temps, first


def iter_shards(directory: str | os.PathLike, mmap: bool = True, partial: bool = False, progress: bool = False):
    """load_shard of every shard of a pxbatch --out folder, in shard order, the folder checked
    first by the shard rule of tools/pxbatch.h as pxbatch --verify checks it: a file that is not
    one pxbatch writes (a copy named shard-000001.npy), a shard past the job's, two jobs' shards,
    a marker or array that breaks the rule are Malformed naming the file (--verify's corrupt and
    orphaned), and the names of the inputs must hash to the job's inputs_sha256.

    A folder that is not there, or holds no shard (a mistyped path), is PxIOError naming it, as
    pxbatch --verify fails on it: never an empty dataset. A folder that lacks shards of its job (an
    interrupted pxbatch: fewer inputs than its markers' job.inputs, or the temporary file of an
    unfinished write) is PxIOError naming it and how many inputs are missing, unless partial=True:
    then a warning says so and the shards present are read (a marker whose arrays are missing
    counts as a missing shard). A folder lacking shards whose .pxbatch.lock a run holds is one it
    may still be writing: PxIOError saying so. The work is bounded by the files there, not by
    what a marker claims. progress=True: a progress bar over the shards (see progress())."""
    import hashlib
    d = os.fspath(directory)
    if not os.path.isdir(d):
        raise PxIOError("i/o error: cannot read '%s': %s" % (d, "not a directory" if os.path.exists(d)
                                                       else "No such file or directory"))
    shards, temps, job = _scan(d)
    if job is None:
        raise PxIOError("i/o error: '%s' holds no pxbatch shard (shard-NNNNN.json)" % d)
    n, size = job.inputs, job.shard_size
    nshards = (n + size - 1) // size
    gap = 0  # the first missing shard (bounded by the shards there, not by job.inputs)
    while gap in shards:
        gap += 1
    missing = nshards - len(shards)
    lost = n - sum(min(size, n - k * size) for k in shards)
    held = (lost or temps) and _lock_held(d)
    if held and not partial:
        raise PxIOError("i/o error: '%s' is being written: a pxbatch run holds it (its .pxbatch.lock) and %d of its "
                        "job's %d inputs are not there yet; read it when the run ends, or pass partial=True to read "
                        "the %d inputs present" % (d, lost, n, n - lost))
    if lost or temps:
        what = ("'%s' is a partial pxbatch output: %d of its job's %d inputs are missing (%d shard%s not written: "
                "shard-%05d%s; an interrupted run? pxbatch --verify lists them)"
                % (d, lost, n, missing, "s" if missing > 1 else "", gap, ", ..." if missing > 1 else "")
                if lost else "'%s' holds the temporary file of an unfinished write: '%s'" % (d, temps[0]))
        if not partial:
            raise PxIOError("i/o error: %s: rerun the same pxbatch job to finish it, or pass partial=True to read the "
                            "%d inputs present" % (what, n - lost))
        warnings.warn("pxvm: %s; reading the %d inputs present (partial=True)" % (what, n - lost), stacklevel=2)
    else:  # [SH-NAMES]: every shard there, the names of the job's inputs
        c = hashlib.sha256()
        for k in sorted(shards):
            for name in shards[k].names:
                c.update(name + b"\0")
        if c.hexdigest() != job.job.get("inputs_sha256"):
            raise Malformed("malformed: '%s': the markers' file lists do not hash to the job's inputs_sha256 (a marker "
                            "was edited; pxbatch --verify says so)" % d)
    for k in progress_bar(sorted(shards), enabled=progress, desc="pxvm shards"):
        yield _load_checked(os.path.join(d, "shard-%05d" % k), shards[k], mmap)


def _lock_held(d):
    """Whether a pxbatch run holds folder d now (its .pxbatch.lock locked: flock, as pxbatch
    --verify asks); False where that cannot be told."""
    try:
        import fcntl
        fd = os.open(os.path.join(d, ".pxbatch.lock"), os.O_RDONLY | os.O_CLOEXEC)
    except (ImportError, OSError):
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(fd)  # also releases a shared lock taken here

