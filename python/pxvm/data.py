"""Loaders: pxbatch shards as NumPy arrays, and PyTorch datasets over shards and image folders.

    tokens, offsets, grid, files = pxvm.load_shard("tokens/shard-00000.npy")
    for shard in pxvm.iter_shards("tokens/"): ...
    ds = pxvm.ShardDataset("tokens/")          # item i: (tokens of image i, its grid, its file)
    ds = pxvm.ImageFolderDataset("photos/", "programs/uniform.json", policy="dynamic")

A shard is shard-NNNNN.npy with its marker shard-NNNNN.json (README, Datasets: pxbatch). A ragged
shard (--policy dynamic) has (tokens, p, p, 4) packed tokens, shard-NNNNN.offsets.npy (rows + 1)
int64 and shard-NNNNN.grid.npy (rows, 3) int64 beside it; a fixed-count shard's (rows, N, h, w, 4)
array is returned in the same form (offsets i * N, grid (1, 1, N): a grid-less program's tokens
in order). The torch classes are made on first use (torch is imported then; an ImportError where it is
not installed).
"""
from __future__ import annotations

import glob
import json
import os
import warnings

from .errors import Error, InvalidProgram, Malformed, PxIOError, Trap, Unlinkable, UsageError
from .ragged import canonical_policy, is_dynamic
from ._arrays import _np


def _load_npy(path, mmap=False):
    """np.load of one array file of a shard; a missing or unreadable file is PxIOError, one that is
    no .npy array (truncated, or a pickle) Malformed, each naming the file."""
    np = _np()
    try:
        return np.load(path, mmap_mode="r" if mmap else None, allow_pickle=False)
    except OSError as e:
        raise PxIOError("i/o error: cannot read '%s': %s" % (path, e.strerror or e)) from None
    except (ValueError, EOFError) as e:
        raise Malformed("malformed: shard file '%s' is no .npy array: %s" % (path, e)) from None


def _marker(path):
    base = path[:-4] if path.endswith(".npy") else path
    try:
        with open(base + ".json", "rb") as f:
            m = json.load(f)
    except OSError as e:
        raise PxIOError("i/o error: cannot read '%s.json': %s" % (base, e.strerror or e)) from None
    except ValueError as e:
        raise Malformed("malformed: '%s.json' is not a pxbatch marker: %s" % (base, e)) from None
    if not isinstance(m, dict) or not isinstance(m.get("rows"), list) or not isinstance(m.get("shape"), list):
        raise Malformed("malformed: '%s.json' is not a pxbatch marker: no 'rows' or 'shape'" % base)
    return base, m


def _name(e):
    return os.fsdecode(bytes.fromhex(e["file_bytes"])) if "file_bytes" in e else e["file"]


def load_shard(path: str | os.PathLike, mmap: bool = True):
    """(tokens, offsets, grid, files) of one shard (its .npy path, or the path without the
    extension): tokens (T, p, p, 4) uint8 (memory-mapped unless mmap=False), offsets (rows + 1,)
    int64, grid (rows, 3) int64, files the rows' input files (the marker's). The shapes are
    checked against the marker (a mismatch is Malformed); pxbatch --verify checks the hashes."""
    np = _np()
    base, m = _marker(os.fspath(path))
    tokens = _load_npy(base + ".npy", mmap)
    files = [_name(r) for r in m["rows"]]
    rows = len(files)
    if "ragged" in m:
        offsets = _load_npy(base + ".offsets.npy")
        grid = _load_npy(base + ".grid.npy")
        ok = (list(tokens.shape) == m["shape"] and offsets.shape == (rows + 1,) and grid.shape == (rows, 3)
              and offsets.dtype == np.int64 and grid.dtype == np.int64 and int(offsets[0]) == 0
              and int(offsets[-1]) == tokens.shape[0]
              and np.array_equal(np.diff(offsets), grid[:, 0] * grid[:, 1] * grid[:, 2]))
    else:
        ok = list(tokens.shape) == m["shape"] and tokens.shape[0] == rows
        n = tokens.shape[1]
        tokens = tokens.reshape((rows * n,) + tuple(tokens.shape[2:]))
        offsets = np.arange(rows + 1, dtype=np.int64) * n
        grid = np.tile(np.array([1, 1, n], dtype=np.int64), (rows, 1))
    if not ok:
        raise Malformed("malformed: shard '%s': its arrays do not match its marker (run pxbatch --verify)" % base)
    return tokens, offsets, grid, files


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


def _missing_inputs(d, paths):
    """(inputs missing, of how many, the missing shards' numbers) of a pxbatch --out folder whose
    markers are `paths`: the job's inputs (each marker's job.inputs, shard_size) that no shard
    holds, as pxbatch --verify counts missing shards. A marker without them is Malformed, and so
    is a folder whose markers are of two jobs (another program, policy, size, input list, ...:
    pxbatch --verify's "of another job"), never read as one dataset."""
    have, job, first = set(), None, None
    for p in paths:
        _, m = _marker(p[:-5])
        j = m.get("job") if isinstance(m.get("job"), dict) else {}
        n, size = j.get("inputs"), j.get("shard_size")
        if type(n) is not int or type(size) is not int or size < 1 or n < 0:
            raise Malformed("malformed: '%s' is not a pxbatch marker: no job.inputs or job.shard_size" % p)
        if first is None:
            first = (os.path.basename(p)[:-5], j)
        elif _job_diff(first[1], j):
            raise Malformed("malformed: '%s' holds shards of two pxbatch jobs: %s is of another job than %s (%s); "
                            "pxbatch --verify lists them: keep one job's shards in a folder"
                            % (d, os.path.basename(p)[:-5], first[0], _job_diff(first[1], j)))
        job = job or (n, size)
        arrays = [".npy"] + ([".offsets.npy", ".grid.npy"] if "ragged" in m else [])
        if all(os.path.exists(p[:-5] + a) for a in arrays):  # a marker without its arrays: missing too
            have.add(int(os.path.basename(p)[6:-5]))
    n, size = job
    missing = [k for k in range((n + size - 1) // size) if k not in have]
    return sum(min(size, n - k * size) for k in missing), n, missing


def iter_shards(directory: str | os.PathLike, mmap: bool = True, partial: bool = False):
    """load_shard of every shard of a pxbatch --out folder, in shard order. A folder that is not
    there, or holds no shard (a mistyped path), is PxIOError naming it, as pxbatch --verify
    fails on it: never an empty dataset. A folder that lacks shards of its job (an interrupted
    pxbatch: fewer inputs than its markers' job.inputs) is PxIOError naming it and how many inputs
    are missing, unless partial=True: then a warning says so and the shards present are read (a
    marker whose arrays are missing counts as a missing shard). A folder lacking shards whose
    .pxbatch.lock a run holds is one it may still be writing: PxIOError saying so."""
    d = os.fspath(directory)
    if not os.path.isdir(d):
        raise PxIOError("i/o error: cannot read '%s': %s" % (d, "not a directory" if os.path.exists(d)
                                                       else "No such file or directory"))
    paths = [p for p in sorted(glob.glob(os.path.join(glob.escape(d), "shard-[0-9]*.json")))
             if p[len(os.path.dirname(p)) + 7:-5].isdigit()]
    if not paths:
        raise PxIOError("i/o error: '%s' holds no pxbatch shard (shard-NNNNN.json)" % d)
    lost, n, shards = _missing_inputs(d, paths)
    held = lost and _lock_held(d)
    if held and not partial:
        raise PxIOError("i/o error: '%s' is being written: a pxbatch run holds it (its .pxbatch.lock) and %d of its "
                        "job's %d inputs are not there yet; read it when the run ends, or pass partial=True to read "
                        "the %d inputs present" % (d, lost, n, n - lost))
    if lost:
        what = ("'%s' is a partial pxbatch output: %d of its job's %d inputs are missing (%d shard%s not written: "
                "shard-%05d%s; an interrupted run? pxbatch --verify lists them)"
                % (d, lost, n, len(shards), "s" if len(shards) > 1 else "", shards[0], ", ..." if len(shards) > 1 else ""))
        if not partial:
            raise PxIOError("i/o error: %s: rerun the same pxbatch job to finish it, or pass partial=True to read the "
                            "%d inputs present" % (what, n - lost))
        warnings.warn("pxvm: %s; reading the %d inputs present (partial=True)" % (what, n - lost), stacklevel=2)
    for path in paths:
        k = int(os.path.basename(path)[6:-5])
        if k not in shards:  # a marker without its arrays is counted missing above
            yield load_shard(path[:-5], mmap=mmap)


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


# The classes of an error of one image (its file, its decoding, its size, its run), as pxbatch
# lists per file; others (unavailable executor, usage) are about the whole job.
_PER_IMAGE = (Malformed, InvalidProgram, Unlinkable, PxIOError, Trap)


def _per_image(e):
    """Whether pxvm error e is one image's: its class, or an image index (a ragged batch's
    errors name the image: a dynamic size the rule refuses, a grid that does not compile)."""
    return isinstance(e, _PER_IMAGE) or getattr(e, "index", None) is not None


_classes = {}


def _torch_classes():
    """The PyTorch datasets, made on first use (importing torch takes seconds: not at import pxvm)."""
    if _classes:
        return _classes
    import torch as _torch
    from torch.utils.data import Dataset as _Dataset, IterableDataset as _IterableDataset

    class ShardDataset(_Dataset):
        """The images of a pxbatch --out folder: item i -> (tokens (N_i, p, p, 4) uint8 tensor,
        grid (3,) int64 tensor (t, h, w), file). Shards are memory-mapped; an item is copied out.
        Pickled (a DataLoader's spawn workers) as its folder: a worker maps the shards again, and
        checks them again, itself (never the tokens copied through a pipe)."""

        def __init__(self, directory: str | os.PathLike, partial: bool = False) -> None:
            """partial: as for iter_shards (a folder that lacks shards of its job is refused unless
            partial=True, then warned of)."""
            self.directory, self.partial = os.fspath(directory), partial
            self._load()

        def _load(self):
            self.shards = list(iter_shards(self.directory, partial=self.partial))
            self.index = [(s, r) for s, sh in enumerate(self.shards) for r in range(len(sh[3]))]

        def __getstate__(self):
            return {"directory": self.directory, "partial": self.partial}

        def __setstate__(self, state):
            self.directory, self.partial = state["directory"], state["partial"]
            with warnings.catch_warnings():  # partial=True: warned of once, where it was made
                warnings.simplefilter("ignore")
                self._load()

        def __len__(self) -> int:
            return len(self.index)

        def __getitem__(self, i: int):
            s, r = self.index[i]
            tokens, offsets, grid, files = self.shards[s]
            t = _np().array(tokens[int(offsets[r]):int(offsets[r + 1])])
            return _torch.from_numpy(t), _torch.from_numpy(grid[r].copy()), files[r]

    class ImageFolderDataset(_IterableDataset):
        """A folder's PNG and JPEG files (name order, as pxbatch --in-dir) through a program: yields
        (tokens, grid, file) as ShardDataset's items, running a Runner (one per worker process) in
        batches of batch_size images (policy "dynamic": a ragged batch, one run per size). Workers of
        a DataLoader take every num_workers-th batch. size=(W, H): for an any-size program, every
        image brought to W x H by policy (stretch by default, or fit) as Runner's size= and
        pxbatch --size (checked at once: a bad size, one with native, exact or dynamic, and for a
        Program given, a fixed-size one or a size outside its bounds, are UsageErrors).

        A file that fails (unreadable, truncated or corrupt, not a PNG or JPEG, outside the
        program's bounds or of another size than a fixed-size program takes without a policy) is
        handled per on_error:

        - "skip" (the default): the batch's other images are still yielded, in file order; the
          file is appended to `failures` as (file, error) (the package's error class, its message
          naming the file) and reported once per file with warnings.warn (a UserWarning with the
          library's message). Skipping is the default because an IterableDataset cannot skip an
          item after raising (the exception ends its iterator, and so the DataLoader's epoch):
          one bad JPEG in a large scraped folder would end a training run that pxbatch (which
          lists the file and goes on) finishes, as issue 23 asks of a batch.
        - "raise": the first failing file raises its error naming the file (torchvision's
          ImageFolder behaviour: PIL raises on a corrupt file).

        lenient: passed to pxvm.load_image for every file (False: strict decoding; True: what
        load_image(lenient=True) accepts, each file's warning given as load_image gives it).

        Picklable (DataLoader workers started with spawn or forkserver): the program travels as
        its plan or its PNG bytes, and each worker makes its own Runner when it iterates.

        Errors that are not about one image (a program that cannot run here, a bad policy, a
        plan that policy dynamic cannot use) are raised in both modes.

        `failures` holds the last pass of this process only. With DataLoader(num_workers > 0)
        each worker iterates its own copy: the main process's `failures` stays EMPTY and the
        warnings are printed by the workers on stderr (not seen by warnings.catch_warnings in
        the main process). For an audit trail there, use on_error="raise" (the worker's error
        reaches the main process), num_workers=0, or pxbatch (its markers list every failed
        file). With workers the items interleave by batch: worker k runs batches k, k + n, ...
        and the DataLoader takes the workers' items in turn (file order within a batch only;
        each item carries its file)."""

        ON_ERROR = ("skip", "raise")

        def __init__(self, directory: str | os.PathLike, program, policy: str | None = None,
                     executor: str = "cpu", batch_size: int = 16, on_error: str = "skip",
                     size: tuple[int, int] | None = None, lenient: bool = False) -> None:
            if not isinstance(lenient, bool):
                raise UsageError("usage: lenient %r: True or False" % (lenient,))
            if on_error not in self.ON_ERROR:
                raise UsageError("usage: on_error %r: 'skip' (list the file, warn, go on) or 'raise'" % (on_error,))
            if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
                raise UsageError("usage: batch_size %r: a whole number from 1" % (batch_size,))
            if policy is not None:
                canonical_policy(policy)  # a bad policy is a UsageError naming it, now, not at the first batch
            from .runner import _size_policy
            size = _size_policy(policy, size)[0]  # as pxbatch --size: a bad size, one with native/exact/dynamic
            if size is not None and not isinstance(program, (str, os.PathLike)):
                from .runner import _size_check
                _size_check(program, size)  # a fixed-size program, a size outside the bounds: now
            self.size = size
            d = os.fspath(directory)
            try:
                names = os.listdir(d)
            except OSError as e:
                raise PxIOError("i/o error: cannot read '%s': %s" % (d, e.strerror or e)) from None
            self.files = sorted(os.path.join(d, f) for f in names
                                if not f.startswith(".") and f.lower().endswith((".png", ".jpg", ".jpeg")))
            if not self.files:  # as pxbatch --in-dir: a folder of no image is an error, not an empty epoch
                raise PxIOError("i/o error: no inputs: folder '%s' holds no PNG or JPEG file (.png, .jpg, .jpeg)" % d)
            self.program, self.policy, self.executor, self.batch_size = program, policy, executor, int(batch_size)
            self.on_error, self.lenient = on_error, lenient
            self.failures = []
            self._warned = set()

        def __getstate__(self):
            state = dict(self.__dict__)
            from .program import Program
            prog = self.program
            if isinstance(prog, Program):  # a C handle: its plan, or its image, is what travels
                state["program"] = ("plan", prog.plan, prog.name, prog._limits) if prog.plan is not None else \
                    ("png", prog.to_png(), prog.name, prog._limits)
            return state

        def __setstate__(self, state):
            prog = state["program"]
            if isinstance(prog, tuple):
                from .program import Program
                kind, data, name, limits = prog
                state["program"] = (Program.from_plan(data, name=name, **limits) if kind == "plan"
                                    else Program.from_png(data, name=name, **limits))
            self.__dict__.update(state)

        def _failed(self, f, e):
            """File f failed with pxvm error e: raised (on_error "raise") or listed and warned of
            once, its message naming the file either way (as pxbatch's: "... (file 'x.png')")."""
            if "'%s'" % f in str(e):
                named = e
            else:
                named = type(e)("%s (file '%s')" % (e, f))
            named.index, named.file = self.files.index(f), f  # its place in the folder's files
            if self.on_error == "raise":
                raise named from None
            self.failures.append((f, named))
            if f not in self._warned:
                self._warned.add(f)
                warnings.warn("pxvm: ImageFolderDataset skipped '%s': %s" % (f, e), stacklevel=2)

        def _items(self, runner, files, images):
            """[(file, tokens, grid)] of the images that ran (the batch at once; when it fails
            for one image, each image alone, so the others still run and each failure is named)."""
            np = _np()
            dynamic = is_dynamic(self.policy)

            def run(imgs):
                out = runner.patches_batch(imgs, policy=self.policy, size=self.size)
                if dynamic:
                    return [(np.array(out[i]), out.grid[i].copy()) for i in range(len(imgs))]
                return [(out[i], np.array([1, 1, out.shape[1]], dtype=np.int64)) for i in range(len(imgs))]

            try:
                return [(f,) + r for f, r in zip(files, run(images))]
            except Error as e:
                if not _per_image(e):
                    raise
            items = []
            for f, im in zip(files, images):
                try:
                    # a path: its errors name it (lenient: the image as decoded, _failed names it)
                    items.append((f,) + run([f] if dynamic and not self.lenient else [im])[0])
                except Error as e:
                    if not _per_image(e):
                        raise
                    self._failed(f, e)
            return items

        def __iter__(self):
            from .program import Program
            from .runner import Runner
            from .image import load_image
            info = _torch.utils.data.get_worker_info()
            k, n = (info.id, info.num_workers) if info else (0, 1)
            prog = self.program
            if not isinstance(prog, Program):
                p = os.fspath(prog)
                prog = Program.from_plan(p) if p.endswith(".json") else Program.load(p)
            runner = Runner(prog, executor=self.executor)
            self.failures = []
            for b, at in enumerate(range(0, len(self.files), self.batch_size)):
                if b % n != k:
                    continue
                files, images = [], []
                for f in self.files[at:at + self.batch_size]:
                    try:
                        images.append(load_image(f, lenient=self.lenient))
                        files.append(f)
                    except Error as e:
                        if not _per_image(e):
                            raise
                        self._failed(f, e)
                if not files:
                    continue
                for f, tokens, grid in self._items(runner, files, images):
                    yield _torch.from_numpy(tokens), _torch.from_numpy(grid), f

    for cls in (ShardDataset, ImageFolderDataset):  # pickled by name: pxvm.data.<name> (module __getattr__)
        cls.__qualname__ = cls.__name__
        cls.__module__ = __name__
    _classes.update(ShardDataset=ShardDataset, ImageFolderDataset=ImageFolderDataset)
    return _classes


def __getattr__(name):
    """pxvm.data.ShardDataset and ImageFolderDataset: an ImportError where torch is not installed."""
    if name in ("ShardDataset", "ImageFolderDataset"):
        return _torch_classes()[name]
    raise AttributeError("module 'pxvm.data' has no attribute %r" % name)
