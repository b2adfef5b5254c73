"""Ragged batches: images of different sizes whose token counts differ (policy "dynamic").

    runner = pxvm.Runner(pxvm.Program.from_plan("programs/uniform.json"))
    r = runner.patches_batch([img_a, img_b], policy="dynamic:merge=2")
    r.tokens        # (sum N_i, p, p, 4) uint8, the images' tokens one after the other
    r.offsets       # (B + 1,) int64: image i is tokens[offsets[i]:offsets[i + 1]] (cu_seqlens)
    r.grid          # (B, 3) int64: (t, h, w) in patches, t = 1; N_i = h * w
    r.sizes         # (B, 2, 2) int64: sizes[i, 0] = (w, h) as given, sizes[i, 1] = (w', h') resized
    r.position_ids  # (3, sum N_i) int64: each token's (t, h, w) (multimodal RoPE style)

Policy "dynamic" (docs/policies.md) resizes each image to its own w' x h' (Qwen2-VL's
smart_resize, f = patch * merge) and takes every patch x patch tile of it at LOD 0, row-major:
the program of the runner's "uniform" plan compiled for w' x h'. The runner compiles that program
on the first image of each distinct size and keeps it, with its executor, in an LRU cache of
DYNAMIC_CACHE sizes; images of one size run as one batch. The position ids are in patch units
and row-major; Qwen2-VL's language model numbers merged tokens (h // merge, w // merge) and its
processor orders the patches merge window by merge window: permute the tokens for that model.
"""
from __future__ import annotations

import collections
import ctypes
import operator
import os

from . import _capi
from .errors import Error, UsageError, _check
from ._arrays import _np

_lib = _capi.lib

#: per-size programs (and their executors) a runner keeps for policy "dynamic", and of how many bytes
#: of slot storage together (runner._slot_bytes; least recently used goes first)
DYNAMIC_CACHE = 64
DYNAMIC_CACHE_BYTES = 1 << 30


def canonical_policy(policy: str) -> str:
    """A policy's canonical text ("dynamic" -> "dynamic:merge=2,min=3136,max=1003520:bicubic";
    "native" as it is); a bad one (empty, "native:...", an unknown kind...) is a UsageError in
    the library's words (vm/resize.c), the same as pxrun's and pxbatch's."""
    buf = ctypes.create_string_buffer(256)
    _check(_lib.pxvm_policy_canonical(_capi.c_string(policy, "policy"), buf, len(buf)))
    return buf.value.decode()


def image_hw(a):
    """(H, W) of an image array or tensor (H, W), (H, W, C) or (C, H, W) with C in 1, 3, 4 (HWC
    first where both read), or None for another shape."""
    sh = tuple(getattr(a, "shape", ()))
    if len(sh) == 2 or (len(sh) == 3 and sh[2] in (1, 3, 4)):
        return sh[0], sh[1]
    if len(sh) == 3 and sh[0] in (1, 3, 4):
        return sh[1], sh[2]
    return None


def is_dynamic(policy: str | None) -> bool:
    return isinstance(policy, str) and canonical_policy(policy).startswith("dynamic:")


def dynamic_size(policy: str, patch: int, w: int, h: int) -> tuple[int, int]:
    """(w', h') of a w x h image under a dynamic policy for a plan of this patch (the library's
    pxvm_policy_dynamic_size: the rule of docs/policies.md)."""
    ow, oh = ctypes.c_int(), ctypes.c_int()
    _check(_lib.pxvm_policy_dynamic_size(_capi.c_string(policy, "policy"), _capi.c_integer(patch, "patch"),
                                         _capi.c_integer(w, "w"), _capi.c_integer(h, "h"), ctypes.byref(ow),
                                         ctypes.byref(oh)))
    return ow.value, oh.value


class Ragged:
    """The packed tokens of a batch of images with different token counts (see the module)."""

    def __init__(self, tokens, offsets, grid, sizes, files=None):
        np = _np()
        self.tokens = tokens
        self.offsets = offsets
        self.grid = grid
        self.sizes = sizes
        #: the files the images came from (None for arrays)
        self.files = files
        n = int(offsets[-1])
        pos = np.zeros((3, n), dtype=np.int64)
        for i in range(len(grid)):
            a, b = int(offsets[i]), int(offsets[i + 1])
            gh, gw = int(grid[i, 1]), int(grid[i, 2])
            k = np.arange(b - a, dtype=np.int64)
            pos[1, a:b] = k // gw
            pos[2, a:b] = k % gw
        self.position_ids = pos

    def __len__(self) -> int:
        return len(self.grid)

    def __getitem__(self, i: int):
        """The tokens of image i, (N_i, p, p, 4) (a view of tokens); indexed as a Python sequence:
        -1 is the last image, an index outside -B..B-1 is an IndexError."""
        try:
            k = operator.index(i)
        except TypeError:
            raise TypeError("Ragged indices are integers, not %s" % type(i).__name__) from None
        n = len(self)
        if not -n <= k < n:
            raise IndexError("Ragged index %d out of range: %d images" % (k, n))
        k %= n
        return self.tokens[int(self.offsets[k]):int(self.offsets[k + 1])]

    def __repr__(self) -> str:
        return "Ragged(%d images, %d tokens of %s)" % (len(self), len(self.tokens), tuple(self.tokens.shape[1:]))


def _plan_patch(runner):
    """The runner's plan and patch; a program not compiled from a uniform plan is a UsageError."""
    plan = getattr(runner.program, "plan", None)
    if not isinstance(plan, dict) or plan.get("scheme") != "uniform":
        raise UsageError("usage: policy dynamic needs a program compiled from a \"uniform\" plan (Program.from_plan, "
                         "e.g. programs/uniform.json); program %s is %s" %
                         (runner.program.name, "a plan of scheme %r" % plan.get("scheme") if isinstance(plan, dict)
                          else "not a plan"))
    return plan, int(plan.get("patch", 16))


def _sized_runner(runner, plan, w, h):
    """The runner of the uniform plan compiled for w x h, from the runner's LRU cache."""
    from .program import Program
    from .runner import Runner
    from .runner import _LRU, _slot_bytes
    cache = runner.__dict__.get("_dynamic")
    if cache is None:
        cache = runner.__dict__["_dynamic"] = _LRU(DYNAMIC_CACHE, DYNAMIC_CACHE_BYTES)
    r = cache.get((w, h))
    if r is not None:
        return r
    p = dict(plan)
    p["image"] = [w, h]
    p.pop("budget", None)  # a uniform plan's budget is its full grid: that of w x h
    prog = Program.from_plan(p, name="%s@%dx%d" % (runner.program.name, w, h), **runner.program._limits)
    # an evicted runner closes when its last reference goes (never under a call still using it)
    return cache.put((w, h), Runner(prog, executor=runner.executor, device=runner.device, threads=runner.threads),
                     _slot_bytes(prog))


def _named(e, i, name):
    """The same class of error, naming the image (its index, and its file when it has one)."""
    what = "image %d%s" % (i, " ('%s')" % name if name else "")
    err = type(e)("%s: %s" % (what, e))
    err.index, err.file = i, name
    return err


def dynamic_patches_batch(runner, images, policy: str) -> Ragged:
    """Runner.patches_batch with policy "dynamic": images is a list (or a (B, ...) array) of host
    images of any sizes, or paths of PNG/JPEG files. An error of one image is raised as the
    package's error class naming its index (and file); nothing is returned then."""
    from .image import load_image
    from .runner import _policy_image
    np = _np()
    plan, patch = _plan_patch(runner)
    if not isinstance(images, (list, tuple)):
        images = [images[i] for i in range(int(images.shape[0]))]
    if not images:
        raise UsageError("pxvm: a ragged batch needs at least one image")
    files = [os.fspath(x) if isinstance(x, (str, os.PathLike)) else None for x in images]
    imgs, sizes = [], []
    for i, x in enumerate(images):
        try:
            a = load_image(x) if files[i] is not None else x
            hw = image_hw(a)
            if hw is None:
                raise UsageError("pxvm: images are (H, W), (H, W, C) or (C, H, W) with C in 1, 3, 4; got shape %s" %
                                 (tuple(a.shape),))
            h, w = hw
            wh = dynamic_size(policy, patch, w, h)
        except Error as e:
            raise _named(e, i, files[i]) from None
        except (ValueError, TypeError) as e:
            raise type(e)("image %d%s: %s" % (i, " ('%s')" % files[i] if files[i] else "", e)) from None
        imgs.append(a)
        sizes.append(((w, h), wh))
    grid = np.array([(1, s[1][1] // patch, s[1][0] // patch) for s in sizes], dtype=np.int64)
    offsets = np.zeros(len(imgs) + 1, dtype=np.int64)
    np.cumsum(grid[:, 1] * grid[:, 2], out=offsets[1:])
    tokens = np.empty((int(offsets[-1]), patch, patch, 4), dtype=np.uint8)
    groups = collections.OrderedDict()  # (w', h') -> [image index], one executor run each
    for i, s in enumerate(sizes):
        groups.setdefault(s[1], []).append(i)
    for (w, h), idx in groups.items():
        try:
            r = _sized_runner(runner, plan, w, h)
            batch = []
            for i in idx:
                try:
                    batch.append(_policy_image(imgs[i], w, h, policy))
                except Error as e:
                    raise _named(e, i, files[i]) from None
                except (ValueError, TypeError) as e:
                    raise type(e)("image %d%s: %s" % (i, " ('%s')" % files[i] if files[i] else "", e)) from None
            out = r.patches_batch(batch)
        except Error as e:
            if getattr(e, "index", None) is not None:
                raise
            raise _named(e, idx[0], files[idx[0]]) if len(idx) == 1 else type(e)(
                "images %s (all %dx%d): %s" % (idx, w, h, e)) from None
        for j, i in enumerate(idx):
            tokens[offsets[i]:offsets[i + 1]] = out[j]
    return Ragged(tokens, offsets, grid, np.array(sizes, dtype=np.int64), files if any(files) else None)
