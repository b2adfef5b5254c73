"""Loaders: pxbatch shards as NumPy arrays, and PyTorch datasets over shards and image folders.

    tokens, offsets, grid, files = pxvm.load_shard("tokens/shard-00000.npy")
    for shard in pxvm.iter_shards("tokens/"): ...
    ds = pxvm.ShardDataset("tokens/")          # item i: (tokens of image i, its grid, its file)
    ds = pxvm.ImageFolderDataset("photos/", "programs/uniform.json", policy="dynamic")

A shard is shard-NNNNN.npy with its marker shard-NNNNN.json (docs/datasets.md). A ragged
shard (--policy dynamic) has (tokens, p, p, 4) packed tokens, shard-NNNNN.offsets.npy (rows + 1)
int64 and shard-NNNNN.grid.npy (rows, 3) int64 beside it; a fixed-count shard's (rows, N, h, w, 4)
array is returned in the same form (offsets i * N, grid (1, 1, N): a grid-less program's tokens
in order). What a folder holds is checked by the shard rule of tools/pxbatch.h, as pxbatch --verify
checks it: a tampered folder is the package's error naming the file, never read. The torch classes
are made on first use (torch is imported then; an ImportError where it is
not installed).
"""
from __future__ import annotations

import os
import warnings

from .errors import Error, PxIOError, UsageError
from ._failures import _per_image
from .image import load_image
from .policies import _size_check, _size_policy, canonical_policy, is_dynamic
from .program import Program
from .ragged import Ragged
from .runner import Runner
from ._arrays import _is_tensor, _np, ragged_like_tokens
from ._progress import progress_bar  # noqa: F401 (pxvm.data.progress_bar, as before)
from .shards import _shard_entry, iter_shards, load_shard  # noqa: F401 (pxvm.data's names, as before)


# ---- collation and datasets ----------------------------------------------------------------------

def collate_ragged(items):
    """A DataLoader's collate_fn for items of different token counts (ShardDataset's and
    ImageFolderDataset's (tokens (N_i, ...), grid (3,) (t, h, w), file) items, or (tokens, grid)
    pairs): a pxvm.Ragged, as Runner.patches_batch/tokens_batch give one: tokens the items'
    packed (sum N_i, ...); offsets (B + 1,) int64 (cu_seqlens: item i is
    tokens[offsets[i]:offsets[i + 1]]); grid (B, 3) int64; position_ids (3, sum N_i) int64 (t, h,
    w) of each token, row-major; files (a list, None where an item has none). Torch tensors in,
    torch tensors out (the index arrays too); NumPy in, NumPy out. An item whose token count is
    not t * h * w of its grid is a UsageError naming it.

        loader = DataLoader(pxvm.data.ImageFolderDataset(d, prog, policy="dynamic"), batch_size=8,
                            num_workers=2, collate_fn=pxvm.data.collate_ragged)"""
    np = _np()
    items = list(items)
    if not items:
        raise UsageError("usage: collate_ragged: no items")
    tokens, grids, files = [], [], []
    for i, item in enumerate(items):
        if not isinstance(item, (tuple, list)) or len(item) not in (2, 3):
            raise UsageError("usage: collate_ragged: item %d is (tokens, grid[, file]), not %s" % (i, type(item).__name__))
        t, g = item[0], item[1]
        g = np.asarray(g.cpu() if _is_tensor(g) else g, dtype=np.int64).reshape(-1)
        if g.shape != (3,) or int(np.prod(g)) != int(t.shape[0]):
            raise UsageError("usage: collate_ragged: item %d: %d tokens for grid %s (t, h, w)" % (i, t.shape[0], g.tolist()))
        tokens.append(t)
        grids.append(g)
        files.append(item[2] if len(item) == 3 else None)
    counts = [int(t.shape[0]) for t in tokens]
    offsets = np.zeros(len(items) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum(counts)
    if all(_is_tensor(t) for t in tokens):
        import torch
        packed = torch.cat(tokens)
    else:
        packed = np.concatenate([np.asarray(t) for t in tokens])
    r = Ragged(packed, offsets, np.stack(grids), None, files if any(f is not None for f in files) else None)
    return ragged_like_tokens(r)



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
                     size: tuple[int, int] | None = None, lenient: bool = False, progress: bool = False,
                     exif_transpose: bool = False) -> None:
            """progress=True: a progress bar over the batches of each pass (each worker's share with
            DataLoader workers). exif_transpose=True: every file decoded with its EXIF orientation
            applied (pxvm.load_image(path, exif_transpose=True), as Hugging Face's load_image).: tqdm where installed, else a line on stderr (progress_bar)."""
            if not isinstance(lenient, bool):
                raise UsageError("usage: lenient %r: True or False" % (lenient,))
            if not isinstance(exif_transpose, bool):
                raise UsageError("usage: exif_transpose %r: True or False" % (exif_transpose,))
            if on_error not in self.ON_ERROR:
                raise UsageError("usage: on_error %r: 'skip' (list the file, warn, go on) or 'raise'" % (on_error,))
            if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
                raise UsageError("usage: batch_size %r: a whole number from 1" % (batch_size,))
            if policy is not None:
                canonical_policy(policy)  # a bad policy is a UsageError naming it, now, not at the first batch
            size = _size_policy(policy, size)[0]  # as pxbatch --size: a bad size, one with native/exact/dynamic
            if size is not None and not isinstance(program, (str, os.PathLike)):
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
            self.on_error, self.lenient, self.progress = on_error, lenient, bool(progress)
            self.exif_transpose = exif_transpose
            self.failures = []
            self._warned = set()

        def __getstate__(self):
            state = dict(self.__dict__)
            prog = self.program
            if isinstance(prog, Program):  # a C handle: its plan, or its image, is what travels
                state["program"] = ("plan", prog.plan, prog.name, prog._limits) if prog.plan is not None else \
                    ("png", prog.to_png(), prog.name, prog._limits)
            return state

        def __setstate__(self, state):
            prog = state["program"]
            if isinstance(prog, tuple):
                kind, data, name, limits = prog
                state["program"] = (Program.from_plan(data, name=name, **limits) if kind == "plan"
                                    else Program.from_png(data, name=name, **limits))
            self.__dict__.update(state)

        def __len__(self) -> int:
            """The number of files: the items of a pass, less the files that fail (on_error "skip")."""
            return len(self.files)

        def _failed(self, f, e):
            """File f failed with pxvm error e: raised (on_error "raise") or listed and warned of
            once, its message naming the file either way (as pxbatch's: "... (file 'x.png')")."""
            if f in (getattr(e, "file", None), e.info.file):  # named by the library or by the batch
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
                    items.append((f,) + run([f] if dynamic and not self.lenient and not self.exif_transpose
                                            else [im])[0])
                except Error as e:
                    if not _per_image(e):
                        raise
                    self._failed(f, e)
            return items

        def __iter__(self):
            info = _torch.utils.data.get_worker_info()
            k, n = (info.id, info.num_workers) if info else (0, 1)
            prog = self.program
            if not isinstance(prog, Program):
                p = os.fspath(prog)
                prog = Program.from_plan(p) if p.endswith(".json") else Program.load(p)
            runner = Runner(prog, executor=self.executor)
            self.failures = []
            mine = [at for b, at in enumerate(range(0, len(self.files), self.batch_size)) if b % n == k]
            bar = progress_bar(mine, desc="pxvm batches of %s" % os.path.dirname(self.files[0]), enabled=self.progress)
            for at in bar:
                files, images = [], []
                for f in self.files[at:at + self.batch_size]:
                    try:
                        images.append(load_image(f, lenient=self.lenient, exif_transpose=self.exif_transpose))
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
