"""A batch's images: paths loaded and the failing one named in the error (.index, .file),
on_error="skip" (the images that fail left out), and a batch of many sizes run as one batch
per size (Runner's _Batching)."""
from __future__ import annotations

import functools
import os
from typing import Any

from .errors import Error, UsageError
from ._arrays import _np, _is_torch, _torch
from ._failures import _image_error, _is_path, _named, _per_image
from .image import load_image
from .ragged import Ragged, image_hw  # noqa: F401 (image_hw: _Batching)


def _path_loaded(x):
    """An image argument as bound: a file path (str or os.PathLike) becomes its PNG or JPEG image
    (load_image, as pxrun --in decodes it), in a list each such item; anything else as it is."""
    if _is_path(x):
        return load_image(x)
    if isinstance(x, (list, tuple)) and any(_is_path(xi) for xi in x):
        return [_path_loaded(xi) for xi in x]
    return x


def _naming_paths(batched):
    """A call whose images may be file paths: an image's error (_image_error: not a usage error
    about the program or an option) is raised of its class naming the failing image: e.index (its
    place among the images given) and e.file (its path), the file added to the message when the
    library's does not name it (a bind's, e.g. a size a fixed-size input does not take). When the
    failing image cannot be told, the files given are named (e.file None). batched: the images
    are the first positional argument (the second is fixations), not every positional argument."""
    def wrap(method):
        @functools.wraps(method)
        def call(self, *args, **kwargs):
            try:
                return method(self, *args, **kwargs)
            except Error as e:
                ins = self.program.inputs
                names = {s.name for s in ins} | {"images"}
                first = ins[0].index if ins else -1
                given = [(first, v) for v in (args[:1] if batched else args)] + \
                    [(first if k == "images" else self.program.slot(k).index, v) for k, v in kwargs.items()
                     if k in names]
                items, where = [], []  # the images given, and the (slot, item) each is bound to
                for slot, v in given:
                    for j, x in enumerate(v if isinstance(v, (list, tuple)) else [v]):
                        items.append(x)
                        where.append((slot, j))
                files = [os.fspath(x) for x in items if _is_path(x)]
                if not files or not _image_error(e) or getattr(e, "file", None) or \
                        getattr(e, "index", None) is not None:
                    raise
                named = [i for i, x in enumerate(items) if _is_path(x) and os.fspath(x) == e.info.file]
                if len(named) == 1:  # the library's error names it (a decode's): say which it is
                    e.index, e.file = named[0], os.fspath(items[named[0]])
                    raise
                bound = (e.info.slot, e.info.item)  # the bind that failed, as the library says
                i = 0 if len(items) == 1 else where.index(bound) if bound in where else None
                if i is not None:
                    if not _is_path(items[i]):
                        raise
                    err = type(e)("%s (image %d, file '%s')" % (e, i, os.fspath(items[i])) if len(items) > 1
                                  else "%s (file '%s')" % (e, os.fspath(items[i])))
                    err.index, err.file = i, os.fspath(items[i])
                    raise err from None
                shown = ", ".join("'%s'" % f for f in files[:4]) + (" and %d more" % (len(files) - 4) if len(files) > 4 else "")
                err = type(e)("%s (file%s %s)" % (e, "s" if len(files) > 1 else "", shown))
                err.index, err.file = None, files[0] if len(files) == 1 else None
                raise err from None
        return call
    return wrap



# ---- on_error="skip" for batches of one size ------------------------------------------------------

ON_ERROR = ("raise", "skip")


class BatchResult(dict):
    """run_batch's {name: (B', H, W, 4)} with on_error="skip": the kept images' outputs, and as
    a Ragged's: `index` (the kept images' indices in the batch given) and `failures` (the errors
    of the others, each naming its image: .index, .file), in the batch's order."""
    index: Any
    failures: list


def _on_error(on_error, given):
    """on_error checked ('raise' or 'skip'); with "skip", out=, with_geometry and named inputs
    (given: {name: value}) are UsageErrors: the kept rows are not known before the run."""
    if on_error not in ON_ERROR:
        raise UsageError("usage: on_error=%r: 'raise' (the first failure is raised, nothing returned) or "
                         "'skip' (failed images left out, listed in failures)" % (on_error,))
    if on_error == "skip":
        for name, v in given.items():
            if v:
                raise UsageError("usage: on_error='skip' takes no %s (the images kept are known after the run)" % name)
    return on_error == "skip"


def _skipping(call, images, fixations):
    """call(items, fixations) (a batch call with on_error "raise") over the images that do not
    fail: (its result or None when every image failed, the kept indices, the failures, the
    images' files (None for arrays)); the failures are the
    ragged batches' failure type, ragged._named: the same class naming the image by .index and
    .file). An error about no image (a usage error, an executor that cannot open) is raised."""
    if images is None:
        raise UsageError("usage: on_error='skip' takes the images as `images` (one input slot)")
    if isinstance(images, (str, os.PathLike)) or len(getattr(images, "shape", (0,))) == 0:
        raise UsageError("usage: a batch is a list of images or paths, or a (B, ...) array, not %s" %
                         type(images).__name__)
    items = list(images) if isinstance(images, (list, tuple)) else [images[i] for i in range(int(images.shape[0]))]
    files = [os.fspath(x) if _is_path(x) else None for x in items]
    failures, keep = {}, list(range(len(items)))

    def failed(i, e):
        failures[i] = _named(e, i, files[i])

    while keep:
        try:
            result = call([items[i] for i in keep], _Batching._take(fixations, keep))
            break
        except Error as e:
            if not _per_image(e):
                raise
            j = getattr(e, "index", None)
            if j is not None and 0 <= j < len(keep):
                failed(keep.pop(j), e)
                continue
            found = False  # which one the error is about is not told: each image alone says
            for i in list(keep):
                try:
                    call([items[i]], _Batching._take(fixations, [i]))
                except Error as e1:
                    if not _per_image(e1):
                        raise
                    failed(i, e1)
                    keep.remove(i)
                    found = True
            if not found:
                raise
    else:
        result = None
    return result, keep, [failures[i] for i in sorted(failures)], files


def _as_ragged(result, keep, failures, files, empty):
    """A skipped batch's (B', N, ...) tokens as a Ragged (the form of a fixed-count pxbatch shard:
    offsets i * N, grid (1, 1, N): tokens in the program's order), with its index and failures;
    empty(): the (0, ...) tokens when every image failed."""
    np = _np()
    b = len(keep)
    if result is None:
        tokens, n = empty(), 0
    else:
        n = int(result.shape[1])
        tokens = result.reshape((b * n,) + tuple(result.shape[2:]))
    r = Ragged(tokens, np.arange(b + 1, dtype=np.int64) * n, np.tile(np.array([1, 1, n], np.int64), (b, 1)), None)
    r.index, r.failures = np.array(keep, dtype=np.int64), failures
    kept = [files[i] for i in keep]
    r.files = kept if any(f is not None for f in kept) else None
    return r


class _Batching:
    """Runner's batches of images of several sizes: grouped by size, run, gathered back."""

    def _size_groups(self, bound, policy):
        """For a list of images of different sizes bound to the one any-size input, with no policy
        that resizes (None, native, exact): {(h, w): [item indices]} in first-seen order; else None.
        A runner binds one size to all its items, so such a batch runs as one batch per size."""
        if policy not in (None, "native", "exact") or len(bound) != 1:
            return None
        (k, x), = bound.items()
        if not self.program.slots[k].any_size or not isinstance(x, (list, tuple)):
            return None
        groups = {}
        for i, xi in enumerate(x):
            groups.setdefault(image_hw(xi), []).append(i)  # None (a bad shape): the bind says why
        return groups if len(groups) > 1 else None

    def _by_size(self, run_group, order, given):
        """run_group(idx) for each group of items of one size (order, from _size_groups); an error of
        a group is raised again naming its items (e.index, the first; e.file when it was given as a
        path): a runner's error names the size, not which images of the batch had it."""
        parts = []
        for idx in order:
            try:
                parts.append(run_group(idx))
            except Error as e:
                if getattr(e, "index", None) is not None:
                    raise
                given = given if isinstance(given, (list, tuple)) else None
                files = [os.fspath(given[i]) for i in idx if given is not None and _is_path(given[i])]
                what = ("image %d" % idx[0] if len(idx) == 1 else "images %s" % ", ".join(map(str, idx[:8])) +
                        (" and %d more" % (len(idx) - 8) if len(idx) > 8 else ""))
                what += " of the batch"
                if files:
                    what += ", file%s %s" % ("s" if len(files) > 1 else "", ", ".join("'%s'" % f for f in files[:8]))
                err = type(e)("%s (%s)" % (e, what))
                err.index, err.file = idx[0], files[0] if len(files) == 1 else None
                raise err from None
        return parts

    @staticmethod
    def _take(a, idx):
        """Items idx of a per-item argument (an array, tensor or list of B), or a as it is."""
        if a is None or isinstance(a, str):
            return a
        if isinstance(a, (list, tuple)):
            return [a[i] for i in idx]
        if _is_torch(a):
            return a[_torch().as_tensor(idx, device=a.device)]
        return a[idx]

    @staticmethod
    def _gather(parts, order, n):
        """The per-group results (each (len(group), ...)) back in item order: one (n, ...) array."""
        items = [None] * n
        for res, idx in zip(parts, order):
            for j, i in enumerate(idx):
                items[i] = res[j]
        if _is_torch(items[0]):
            return _torch().stack(items)
        return _np().stack(items)

    def _batch_inputs(self, images, inputs):
        if images is not None:
            inputs = dict(inputs)
            ins = self.program.inputs
            if len(ins) != 1:
                raise UsageError("usage: give batches by slot name (%s)" % ", ".join(s.name for s in ins))
            inputs[ins[0].name] = images
        bound = self._inputs((), inputs)
        sizes = {len(x) if isinstance(x, (list, tuple)) else int(x.shape[0]) for x in bound.values()}
        if len(sizes) != 1 or 0 in sizes:
            raise UsageError("pxvm: every input of a batch needs the same, non-zero batch size, got %s" % sorted(sizes))
        return bound, sizes.pop()
