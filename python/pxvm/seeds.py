"""The seeds' API: texture pyramids, foveated and anisotropic sampling, persistent textures - a thin
layer over pixel programs.

    import pxvm
    image = pxvm.load_image("programs/data/chelsea.png")        # (300, 451, 4) uint8
    tex = pxvm.TexturePyramid(image)
    tokens = tex.sample_foveated((0.5, 0.4))                     # (273, 3, 16, 16) float32 in [0, 1]

Every call here compiles a program (an allocation plan through Program.from_plan, or pxasm text
through Program.assemble) and runs it with a Runner; nothing is sampled in Python. Programs are
compiled on demand and kept, with their runners, in one least-recently-used cache of
PROGRAM_CACHE_SIZE (32) entries keyed by every parameter that changes the program (image size,
fixation, budget, M0, e0, patch, levels, scale, orientation, uv, level, executor, device);
clear_cache() empties it (a cached runner also keeps a reference to the last image it ran on, as
every Runner does, until it runs on another). Compiling a 273-token plan takes about 0.2 ms and opening its CPU runner
about 0.4 ms, so a new fixation costs little; a repeated one costs only the run.

Why the fixation is part of the key: the seeds' grid (M(e) = M0 / (e + e0), a g x g grid of patch
centres whose LOD grows with the distance to the fixation) ties its tokens to image positions, so
the plan compiler refuses "fixation": "relative" for grid and aniso (assembler/README.md): one
program per fixation. Items of a batch that share a fixation run as one batch; items with
different fixations run one program each (the bytes are the same either way: tested).

Conventions (those of the package): images are uint8 NumPy arrays or torch tensors (CPU or CUDA),
(H, W), (H, W, C) or (C, H, W) with C in 1, 3, 4 (an axis of 1, 3 or 4 last is read as channels),
batches (B, C, H, W) (or (B, H, W, C) when axis 1 is not 1, 3 or 4); fixations and uv are
normalized to the image, x and y in [0, 1], (0.5, 0.5) its middle. Tokens are (N, 3, p, p) RGB
(alpha dropped), (B, N, 3, p, p) for a batch, by default: dtype "uint8" gives the VM's bytes,
"float32" (the default), "float16" and "bfloat16" are Runner.tokens' (pxvm.tokens; the rule of
isa/SPEC.md "Tokens for models", computed by the executor: on the device for CUDA inputs, with no
host copy), with its normalize (default here "none": u / 255), layout and alpha arguments. Host
inputs give NumPy outputs (bfloat16: a torch CPU tensor, NumPy has none), torch inputs torch
tensors on their device. Bad arguments raise pxvm.UsageError (a ValueError) naming the value,
before anything runs (mean/std values: when the library reads the tokens, after the run); a
wrong image dtype is a TypeError; what the library refuses keeps its own class (PlanError,
Unlinkable, Unavailable, ...). A TexturePyramid does not copy its image: keep it
unchanged while you sample it. Not thread-safe: one thread at a time per TexturePyramid or
PersistentTexture (the cache itself is locked).
"""
from __future__ import annotations

import json
import math
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Callable, Sequence, Union

from .errors import UsageError
from ._arrays import _describe, _is_torch, _np, _torch, like_images as _like_images
from .program import Program
from ._lru import _LRU, _slot_bytes
from .runner import Runner
from .tokens import positions_from_geometry
from ._seed_args import (DTYPES, _Output, _check_unit, _consecutive, _dtype, _geometry, _host_floats,  # noqa: F401
                         _int, _like, _on_cuda, _per_item, _points, _real, _stack_items, _uint8_tokens)
from ._seed_plans import _at_level_text, _grid_plan, _q16_text  # noqa: F401

if TYPE_CHECKING:
    import numpy
    from ._arrays import Array
    #: normalized (x, y), or per item (B, 2) for a batch: a sequence, NumPy array or torch tensor
    Point = Union[Sequence[float], Array]

__all__ = ["generate_mipmaps", "TexturePyramid", "PersistentTexture", "create_persistent", "update_partial",
           "update_mipmaps_incremental", "clear_cache", "PROGRAM_CACHE_SIZE", "DTYPES"]

#: how many compiled programs (each with its runner) the cache keeps, and of how many bytes of slot
#: storage together (runner._slot_bytes); the least recently used goes first
PROGRAM_CACHE_SIZE = 32
PROGRAM_CACHE_BYTES = 512 << 20

#: normalize=: a preset of pxvm.tokens (PRESETS: "clip", "siglip", "imagenet", "none") or (mean, std)
Normalize = Union[str, Sequence[Sequence[float]]]


# ---- the program cache ----------------------------------------------------------------------------

class _RunnerCache:
    """Runners of compiled programs in the package's LRU (runner._LRU: at most PROGRAM_CACHE_SIZE
    of them and PROGRAM_CACHE_BYTES of slot storage, least recently used first out; an evicted
    runner closes when the last reference to it goes). One runner serves every caller of its key,
    in any thread: callers hold its guard (Runner._in_call) over their whole run and reads."""

    def __init__(self, size: int, nbytes: int) -> None:
        self._runners = _LRU(size, nbytes)

    def runner(self, key: tuple, make: Callable[[], Program], executor: str, device: int) -> Runner:
        full = (key, executor, int(device))
        r = self._runners.get(full)
        if r is None:
            prog = make()
            r = self._runners.put(full, Runner(prog, executor=executor, device=device), _slot_bytes(prog))
        return r

    def clear(self) -> None:
        self._runners.clear()

    def __len__(self) -> int:
        return len(self._runners)


_cache = _RunnerCache(PROGRAM_CACHE_SIZE, PROGRAM_CACHE_BYTES)


def clear_cache() -> None:
    """Forgets every compiled program and its runner (they close when no caller holds them).

    >>> import pxvm
    >>> pxvm.seeds.clear_cache()
    """
    _cache.clear()


# ---- mipmaps --------------------------------------------------------------------------------------

def _pyramid_runner(w: int, h: int, executor: str, device: int) -> Runner:
    text = ".width 16\n.slot image input %dx%d\nPYRAMID image\nHALT\n" % (w, h)
    return _cache.runner(("pyramid", w, h), lambda: Program.assemble(text, "<pyramid>"), executor, device)


@_like_images(skip=0)
def generate_mipmaps(image: Array, executor: str = "cpu", device: int = 0) -> list[numpy.ndarray]:
    """The full mip chain of an image (or a batch) as the VM's PYRAMID computes it: level l+1 =
    (a+b+c+d+2)>>2 over 2x2 blocks of level l, OpenGL sizes (floor halving down to 1x1), exact
    integers. Returns a list of NumPy uint8 arrays, level 0 first: (h, w, 4) RGBA for an image,
    (B, h, w, 4) for a batch; level 0 is the image as RGBA (grey v -> (v, v, v, 255), RGB -> (r, g,
    b, 255)). The same bytes as pxvm.pyramid, from any input the package takes (CUDA tensors with
    executor="cuda": computed on the device, read back to the host).

    >>> import numpy as np, pxvm
    >>> levels = pxvm.generate_mipmaps(np.full((48, 64, 3), 200, np.uint8))
    >>> [l.shape for l in levels][:3], len(levels)
    ([(48, 64, 4), (24, 32, 4), (12, 16, 4)], 7)
    """
    batch, h, w = _geometry(image)
    r = _pyramid_runner(w, h, executor, device)
    with r._in_call():  # a cached runner, maybe another thread's too: the run and its reads as one unit
        if batch is None:
            r.run(image)
        else:
            r.run_batch(image)
        s = r.program.slot("image")
        items = 1 if batch is None else batch
        levels = [r.read("image", l, batch=items) for l in range(s.levels)]
    return [l[0] for l in levels] if batch is None else levels


# ---- texture pyramids -----------------------------------------------------------------------------

class TexturePyramid:
    """An image (or a batch) and its mip pyramid, sampled by pixel programs.

    TexturePyramid(image, executor="cpu", device=0)
        image: uint8 NumPy array or torch tensor (CPU or CUDA), one image (H, W), (H, W, C),
        (C, H, W) or a batch (B, C, H, W); not copied (keep it unchanged while in use).
        executor: "cpu", "cuda" (CUDA tensors need it) or "auto" (cuda when it opens here);
        .executor is then the one that opened ("cpu" or "cuda"); Unavailable says why not.

    .levels                          the mip chain, NumPy, level 0 first (generate_mipmaps)
    .sample_foveated(fixation, ...)  the seeds' foveated grid around a fixation -> (N, 3, p, p)
    .sample_anisotropic(fixation, orientation, ...)  the same grid, footprints elongated
    .sample_at_level(uv, level, ...) one patch per point, at a given level

    Fixations and uv are normalized to the image ((0.5, 0.5): its middle); for a batch a fixation
    is (x, y) for every item or (B, 2), one per item, and tokens are (B, N, 3, p, p).

    Output arguments of every sample call (those of Runner.tokens, with the seeds' defaults):
        dtype      "float32" (default), "float16", "bfloat16" (a torch tensor, also for NumPy
                   images: NumPy has none) or "uint8" (the VM's bytes); a NumPy or torch dtype works
        normalize  "none" (default: u / 255), "clip", "siglip", "imagenet" (pxvm.tokens' presets)
                   or (mean, std) of 3 values (4 with alpha); float dtypes only
        layout     "nchw" (default): (N, C, p, p); "nhwc": (N, p, p, C); "flat": (N, C*p*p)
        alpha      False (default): C = 3, RGB; True: C = 4, RGBA
        with_positions  True: returns (tokens, positions), positions a pxvm.tokens.Positions
                   (centre, step, level, normalized, grid, rope: Runner.positions), a list of B
                   of them for a batch
    The float tokens are written by the executor that ran the program (Runner.tokens: the rule of
    isa/SPEC.md "Tokens for models", one table lookup per value, on the device for CUDA inputs, no
    host copy); a batch's are written straight into the result.

    >>> import pxvm
    >>> tex = pxvm.TexturePyramid(pxvm.load_image("programs/data/chelsea.png"))
    >>> tex.sample_foveated((0.5, 0.4)).shape
    (273, 3, 16, 16)
    """

    def __init__(self, image: Array, executor: str = "cpu", device: int = 0) -> None:
        self.image = image
        self.batch, self.height, self.width = _geometry(image)
        self.device = int(device)
        self._executor = executor
        # opens the executor now (cheap: the pyramid program), so that Unavailable surfaces here
        self.executor = _pyramid_runner(self.width, self.height, executor, self.device).executor
        self._levels: list | None = None

    def __repr__(self) -> str:
        return "TexturePyramid(%s%dx%d, executor=%r)" % ("" if self.batch is None else "%d x " % self.batch,
                                                         self.width, self.height, self.executor)

    @property
    def levels(self) -> list[numpy.ndarray]:
        """The mip chain (generate_mipmaps: (h, w, 4), or (B, h, w, 4) for a batch, level 0
        first), computed on first use and kept.

        >>> import numpy as np, pxvm
        >>> len(pxvm.TexturePyramid(np.zeros((64, 64, 3), np.uint8)).levels)
        7
        """
        if self._levels is None:
            self._levels = generate_mipmaps(self.image, self._executor, self.device)
        return self._levels

    def _run_plans(self, keyed: list[tuple[tuple, Callable[[], Program]]], dtype: Any, normalize: Any, layout: Any,
                   alpha: Any, with_positions: bool) -> Any:
        """Runs item i's program (keyed[i]: cache key, maker), items with one key as one batch:
        the tokens in the format asked (float ones written by the executor straight into the
        result, each item in its row), and with with_positions their positions."""
        out = _Output(dtype, normalize, layout, alpha)
        groups: OrderedDict = OrderedDict()
        for i, (key, make) in enumerate(keyed):
            groups.setdefault(key, (make, []))[1].append(i)
        items = len(keyed)
        parts, where, result = [], [None] * items, None
        for key, (make, idx) in groups.items():
            r = _cache.runner(key, make, self._executor, self.device)
            b = len(idx)
            with r._in_call():  # a cached runner, maybe another thread's too: run and reads as one unit
                if self.batch is None:
                    if out.format is None:
                        parts.append((idx, r.patches(self.image)[None]))
                    else:
                        result = out.runner_tokens(r, self.image)
                else:
                    images = self.image if b == self.batch else [self.image[i] for i in idx]
                    if out.format is None:
                        parts.append((idx, r.patches_batch(images)))
                    else:
                        if result is None:
                            result, ptr, devno, item_bytes = out.new(r, items, _on_cuda(self.image))
                        bound, b = r._batch_inputs(images, {})
                        r._exec(bound, b, [], batched=True)
                        for j, i, n in _consecutive(idx):
                            out.read(r, b, j, n, ptr + i * item_bytes, devno)
                if with_positions:
                    g = r.geometry(None, b, exact=True)
                    for j, i in enumerate(idx):
                        where[i] = positions_from_geometry(g[j], (self.width, self.height))
        if out.format is None:
            p = _stack_items(parts, items)
            result = _uint8_tokens(p[0] if self.batch is None else p, out, self.image)
        elif self.batch is not None:
            result = _like(result, self.image)
        if with_positions:
            return result, (where[0] if self.batch is None else where)
        return result

    def sample_foveated(self, fixation: Point, num_patches: int = 273, M0: float = 1.0, e0: float = 0.5,
                        patch: int = 16, levels: int | None = None, scale: float | str = 1.0,
                        dtype: Any = "float32", normalize: Normalize = "none", layout: str = "nchw",
                        alpha: bool = False, with_positions: bool = False) -> Any:
        """The seeds' foveated sampling: a g x g grid of patch centres (g = ceil(sqrt(num_patches)),
        the first num_patches in row order), each a patch x patch tile at LOD clamp(-log2 M(e), 0,
        levels-1) with M(e) = M0 / (scale * e + e0), e the distance to the fixation in normalized
        image units: the plan {"scheme": "grid", "m0": M0, "e0": e0, "scale": scale} of
        assembler/README.md (scale 1, the default, is the seeds' formula; "auto" the plan's
        default; levels: the pyramid levels the LODs may use, None: all). Returns (N, 3, p, p)
        tokens ((B, N, 3, p, p) for a batch; dtype, normalize, layout, alpha, with_positions: see
        the class): the float ones those of Runner.tokens of that plan program, with dtype="uint8"
        the bytes of its Runner.patches (RGB, channels first).

        >>> import pxvm
        >>> tex = pxvm.TexturePyramid(pxvm.load_image("programs/data/chelsea.png"))
        >>> tex.sample_foveated((0.5, 0.5), num_patches=64, patch=8, dtype="uint8").shape
        (64, 3, 8, 8)
        """
        fix = _points("fixation", fixation, self.batch, self.width, self.height)
        keyed = []
        for f in fix:
            plan = _grid_plan(self.width, self.height, f, num_patches, M0, e0, patch, levels, scale)
            text = json.dumps(plan, sort_keys=True)
            keyed.append((("plan", text), lambda text=text: Program.from_plan(text, "<sample_foveated>")))
        return self._run_plans(keyed, dtype, normalize, layout, alpha, with_positions)

    def sample_anisotropic(self, fixation: Point, orientation: float | Sequence[float] | Array,
                           num_patches: int = 273, elongation: float = 4.0, taps: int = 4, M0: float = 1.0,
                           e0: float = 0.5, patch: int = 16, levels: int | None = None, scale: float | str = 1.0,
                           dtype: Any = "float32", normalize: Normalize = "none", layout: str = "nchw",
                           alpha: bool = False, with_positions: bool = False) -> Any:
        """The foveated grid of sample_foveated with each footprint elongated along `orientation`
        (degrees, the plan's "angle": the major axis runs along (cos a, sin a) in texels, y down,
        so a positive angle turns clockwise on screen; one for every item, or (B,) per item): the
        minor axis is the grid's step, the major one elongation x
        minor, covered by `taps` samples averaged with equal weights (ANISO: exact integers, one
        rounding); the LOD follows the minor axis. The plan {"scheme": "aniso", "angle":
        orientation, "elongation", "taps", "m0", "e0", "scale"} (assembler/README.md). Returns
        (N, 3, p, p) ((B, N, 3, p, p) for a batch; output arguments: see the class).

        >>> import pxvm
        >>> tex = pxvm.TexturePyramid(pxvm.load_image("programs/data/chelsea.png"))
        >>> tex.sample_anisotropic((0.5, 0.5), 30.0, num_patches=16).shape
        (16, 3, 16, 16)
        """
        fix = _points("fixation", fixation, self.batch, self.width, self.height)
        angles = _per_item("orientation", orientation, self.batch)
        keyed = []
        for f, a in zip(fix, angles):
            plan = _grid_plan(self.width, self.height, f, num_patches, M0, e0, patch, levels, scale, scheme="aniso",
                              angle=a, elongation=_real("elongation", elongation), taps=_int("taps", taps, 1, 16))
            text = json.dumps(plan, sort_keys=True)
            keyed.append((("plan", text), lambda text=text: Program.from_plan(text, "<sample_anisotropic>")))
        return self._run_plans(keyed, dtype, normalize, layout, alpha, with_positions)

    def sample_at_level(self, uv: Point, level: int | Sequence[int], patch: int = 16, dtype: Any = "float32",
                        normalize: Normalize = "none", layout: str = "nchw", alpha: bool = False,
                        with_positions: bool = False) -> Any:
        """One patch x patch tile per point, centred on it, from mip level `level` (one output pixel
        per texel of that level: step 2^level, bilinear within the level). uv: (N, 2) normalized
        points (the same for every item of a batch) or (B, N, 2) one set per item; level: an
        integer in 0..len(levels)-1, or (N,) one per point. A centre is quantized as fixations
        are: floor(u * W * 65536 + 0.5) / 65536 texels. The program is assembled (PYRAMID, one
        SAMPLE per point). Returns (N, 3, p, p) ((B, N, 3, p, p) for a batch; output arguments:
        see the class; with_positions: each point's centre, step and level as sampled).

        >>> import pxvm
        >>> tex = pxvm.TexturePyramid(pxvm.load_image("programs/data/chelsea.png"))
        >>> tex.sample_at_level([(0.25, 0.5), (0.75, 0.5)], level=2, dtype="uint8").shape
        (2, 3, 16, 16)
        """
        np = _np()
        a = _host_floats(uv)
        if a.ndim == 2 and a.shape[1] == 2 and a.shape[0] >= 1:
            sets = [a] * (1 if self.batch is None else self.batch)
        elif self.batch is not None and a.ndim == 3 and a.shape[0] == self.batch and a.shape[2] == 2 and a.shape[1]:
            sets = list(a)
        else:
            raise UsageError("usage: uv: shape %s: give (N, 2) normalized points%s" %
                             (a.shape, "" if self.batch is None else " or (B, N, 2) with B = %d" % self.batch))
        n = sets[0].shape[0]
        if n > 65536:
            raise UsageError("usage: uv: %d points: at most 65536" % n)
        _check_unit("uv", np.stack(sets), self.width, self.height,
                    lambda i: " (point %d)" % i[1] if self.batch is None else " (item %d, point %d)" % i[:2])
        nlev = max(self.width, self.height).bit_length()
        lv = _host_floats(level)
        if lv.ndim == 0:
            lv = lv.reshape(1).repeat(n)
        if lv.shape != (n,):
            raise UsageError("usage: level: shape %s: give an integer or (N,) with N = %d" % (lv.shape, n))
        lvs = []
        for v in lv:
            if not (math.isfinite(v) and v == int(v)):
                raise UsageError("usage: level = %r: an integer is needed" % float(v))
            lvs.append(_int("level", int(v), 0, nlev - 1))
        p = _int("patch", patch, 1, 256)
        keyed = []
        for s in sets:
            q = tuple((math.floor(float(u) * self.width * 65536.0 + 0.5),
                       math.floor(float(v) * self.height * 65536.0 + 0.5)) for u, v in s)
            key = ("at_level", self.width, self.height, q, tuple(lvs), p)
            keyed.append((key, lambda q=q: Program.assemble(_at_level_text(self.width, self.height, q, lvs, p),
                                                            "<sample_at_level>")))
        return self._run_plans(keyed, dtype, normalize, layout, alpha, with_positions)


# ---- persistent textures --------------------------------------------------------------------------

def _rgba(x: Any, like: Any = None):
    """A new (H, W, 4) uint8 RGBA copy of an image (grey v -> (v, v, v, 255), RGB -> (r, g, b, 255)),
    NumPy for a host image, a torch tensor on x's device for a tensor (on like's device if given)."""
    batch, h, w = _geometry(x)
    if batch is not None:
        raise UsageError("usage: image: shape %s: one image is needed here, not a batch" % (tuple(x.shape),))
    d = _describe(x)
    sh = tuple(d.shape)
    hwc = len(sh) == 2 or (sh[0], sh[1]) == (h, w)
    if _is_torch(x) or _is_torch(like):
        torch = _torch()
        t = x if _is_torch(x) else torch.from_numpy(_np().asarray(x))
        if like is not None:
            t = t.to(like.device)
        t = t[:, :, None] if t.ndim == 2 else (t if hwc else t.permute(1, 2, 0))
        out = torch.empty((h, w, 4), dtype=torch.uint8, device=t.device)
    else:
        np = _np()
        t = np.asarray(x)
        t = t[:, :, None] if t.ndim == 2 else (t if hwc else t.transpose(1, 2, 0))
        out = np.empty((h, w, 4), dtype=np.uint8)
    c = t.shape[2]
    out[..., :3] = t[..., :3] if c != 1 else t
    out[..., 3] = t[..., 3] if c == 4 else 255
    return out


class PersistentTexture:
    """A texture kept between updates, with its pyramid and its foveated tokens: a video plan
    program (the seeds' grid plan of sample_foveated with "video": threshold) on a Runner's
    stream. Its slots persist between runs: `cur` (the current image, level 0 and its pyramid),
    the atlas; each update runs DIFF (which 16x16 tiles changed by more than `threshold`, or the
    rectangles given), UPDATE (copies those tiles into cur), PYRAMID over those tiles only, and
    samples again only the tokens whose footprint reaches one. The bytes are those of the full
    recompute on the same image (tested: tokens == TexturePyramid(image).sample_foveated, levels
    == generate_mipmaps(image), at threshold 0).

    Make one with create_persistent; update with update_partial (a sub-image written at an
    offset, as glTexSubImage2D) or update_mipmaps_incremental (a whole new frame). The texture
    keeps its own RGBA copy of the current frame (NumPy, or a torch tensor on the input's device),
    so that a sub-image can be written into it; frames passed in are not kept.

    .levels           the pyramid of the current image (read back from slot cur, NumPy)
    .tokens(dtype, normalize, layout, alpha)  the tokens after the last update, (N, 3, p, p)
    .positions        where they lie (Runner.positions)
    .changed          (N,) bool: the tokens the last update sampled again
    .frames           updates run, the first (whole) one included
    """

    def __init__(self, image: Array, fixation: Point = (0.5, 0.5), num_patches: int = 273, M0: float = 1.0,
                 e0: float = 0.5, patch: int = 16, levels: int | None = None, scale: float | str = 1.0,
                 threshold: int = 0, executor: str = "cpu", device: int = 0) -> None:
        batch, self.height, self.width = _geometry(image)
        if batch is not None:
            raise UsageError("usage: create_persistent takes one image, not a batch of %d" % batch)
        fix = _points("fixation", fixation, None, self.width, self.height)[0]
        self.fixation = (float(fix[0]), float(fix[1]))
        self.threshold = _int("threshold", threshold, 0, 255)
        plan = _grid_plan(self.width, self.height, fix, num_patches, M0, e0, patch, levels, scale,
                          video=self.threshold)
        self.runner = Runner(Program.from_plan(plan, "<persistent>"), executor=executor, device=device)
        self.executor = self.runner.executor
        self._stream = self.runner.stream()
        self._like = image
        self._frame = _rgba(image)
        self.frames = 0
        self._push(None)

    def __repr__(self) -> str:
        return "PersistentTexture(%dx%d, fixation=%r, %d frames, executor=%r)" % (
            self.width, self.height, self.fixation, self.frames, self.executor)

    def _push(self, dirty):
        self._patches, self.changed = self._stream.push(self._frame, dirty=dirty)
        self.frames += 1

    def tokens(self, dtype: Any = "float32", normalize: Normalize = "none", layout: str = "nchw",
               alpha: bool = False) -> Array:
        """The tokens after the last update, (N, 3, p, p), as sample_foveated gives them (output
        arguments: see TexturePyramid; the float ones read from the runner's atlas by
        pxvm_runner_read_tokens, on the device for a CUDA texture).

        >>> import numpy as np, pxvm
        >>> tex = pxvm.create_persistent(np.zeros((64, 64, 3), np.uint8), num_patches=16, patch=8)
        >>> tex.tokens(dtype="uint8").shape
        (16, 3, 8, 8)
        """
        return self._tokens(_Output(dtype, normalize, layout, alpha))

    def _tokens(self, out: _Output) -> Array:
        if out.format is None:
            return _uint8_tokens(self._patches, out, self._like)
        on_cuda = _is_torch(self._frame) and self._frame.is_cuda
        a, ptr, devno, _ = out.new(self.runner, None, on_cuda)
        with self.runner._in_call():  # a read of the runner: under its guard, as every call into it
            if devno >= 0:
                self.runner._sync_stream(1)  # read on torch's current stream, as Runner.tokens does
            out.read(self.runner, 1, 0, 1, ptr, devno)
        return _like(a, self._like)

    @property
    def positions(self) -> Any:
        """Where the tokens lie (Runner.positions: a pxvm.tokens.Positions; the plan's grid, the
        same for every frame)."""
        return self.runner.positions()

    @property
    def levels(self) -> list[numpy.ndarray]:
        """The pyramid of the current image, (h, w, 4) NumPy per level, level 0 first (read from
        the runner's slot cur: a host copy)."""
        s = self.runner.program.slot("cur")
        return [self.runner.read("cur", l)[0] for l in range(s.levels)]

    def update_partial(self, sub_image: Array, offset: Sequence[int], dtype: Any = "float32",
                       normalize: Normalize = "none", layout: str = "nchw",
                       alpha: bool = False) -> tuple[Array, Array]:
        """Writes sub_image (any layout the package takes) into the texture with its top-left
        corner at offset = (x, y) level-0 texels, and updates the pyramid and the tokens over that
        rectangle only (it is given as the dirty rectangle: nothing else is compared). Returns
        (tokens (N, 3, p, p), changed (N,) bool)."""
        _, h, w = _geometry(sub_image)
        try:
            x, y = offset
        except (TypeError, ValueError):
            raise UsageError("usage: offset %r: give (x, y) texels" % (offset,)) from None
        x, y = _int("offset x", x, 0, self.width - 1), _int("offset y", y, 0, self.height - 1)
        out = _Output(dtype, normalize, layout, alpha)
        if x + w > self.width or y + h > self.height:
            raise UsageError("usage: update_partial: a %dx%d sub-image at (%d, %d) leaves the %dx%d texture" %
                             (w, h, x, y, self.width, self.height))
        self._frame[y:y + h, x:x + w] = _rgba(sub_image, self._frame if _is_torch(self._frame) else None)
        self._push([(x, y, w, h)])
        return self._tokens(out), self.changed

    def update_mipmaps_incremental(self, frame: Array, dirty: Sequence[Sequence[int]] | None = None,
                                   dtype: Any = "float32", normalize: Normalize = "none", layout: str = "nchw",
                                   alpha: bool = False) -> tuple[Array, Array]:
        """Replaces the image by `frame` (the texture's size, any layout) and updates the pyramid
        incrementally: DIFF finds the 16x16 tiles that changed by more than the threshold (or only
        the `dirty` rectangles [(x, y, w, h), ...] are taken as changed, pixels outside them as
        unchanged), the levels above them are rebuilt, the tokens reaching them sampled again.
        Returns (tokens (N, 3, p, p), changed (N,) bool)."""
        _, h, w = _geometry(frame)
        if (w, h) != (self.width, self.height):
            raise UsageError("usage: update_mipmaps_incremental: the frame is %dx%d, the texture %dx%d" %
                             (w, h, self.width, self.height))
        out = _Output(dtype, normalize, layout, alpha)
        self._frame = _rgba(frame, self._frame if _is_torch(self._frame) else None)
        self._push(None if dirty is None else [tuple(int(v) for v in r) for r in dirty])
        return self._tokens(out), self.changed


def create_persistent(image: Array, fixation: Point = (0.5, 0.5), num_patches: int = 273, M0: float = 1.0,
                      e0: float = 0.5, patch: int = 16, levels: int | None = None, scale: float | str = 1.0,
                      threshold: int = 0, executor: str = "cpu", device: int = 0) -> PersistentTexture:
    """A PersistentTexture of one image (computed whole now) sampled by the seeds' foveated grid
    at `fixation` (parameters as sample_foveated's; a new fixation needs a new texture: the grid's
    program is compiled for one). threshold: 0..255, DIFF's (0: every change is taken, and the
    texture is exactly the frames given; T > 0: a tile whose largest channel change is at most T
    keeps its previous pixels, as in video plans).

    >>> import numpy as np, pxvm
    >>> tex = pxvm.create_persistent(np.zeros((64, 64, 3), np.uint8), num_patches=16, patch=8)
    >>> tokens, changed = pxvm.update_partial(tex, np.full((8, 8, 3), 255, np.uint8), (4, 4))
    >>> tokens.shape, int(changed.sum()) < 16
    ((16, 3, 8, 8), True)
    """
    return PersistentTexture(image, fixation, num_patches, M0, e0, patch, levels, scale, threshold, executor, device)


def update_partial(texture: PersistentTexture, sub_image: Array, offset: Sequence[int], dtype: Any = "float32",
                   normalize: Normalize = "none", layout: str = "nchw", alpha: bool = False) -> tuple[Array, Array]:
    """texture.update_partial: writes sub_image at offset (x, y) texels; the pyramid and the tokens
    are updated over that rectangle only. Returns (tokens, changed).

    >>> import numpy as np, pxvm
    >>> tex = pxvm.create_persistent(np.zeros((64, 64, 3), np.uint8), num_patches=16, patch=8)
    >>> tokens, changed = pxvm.update_partial(tex, np.full((8, 8, 3), 255, np.uint8), (0, 0))
    >>> int(tex.levels[3][0, 0, 0])     # level 3 (8x8): its texel (0, 0) is the 8x8 corner, all 255
    255
    """
    return texture.update_partial(sub_image, offset, dtype, normalize, layout, alpha)


def update_mipmaps_incremental(texture: PersistentTexture, frame: Array, dirty: Sequence[Sequence[int]] | None = None,
                               dtype: Any = "float32", normalize: Normalize = "none", layout: str = "nchw",
                               alpha: bool = False) -> tuple[Array, Array]:
    """texture.update_mipmaps_incremental: a whole new frame; only the tiles that changed (DIFF,
    or the `dirty` rectangles) are copied, their pyramid rebuilt and their tokens sampled again.
    Returns (tokens, changed).

    >>> import numpy as np, pxvm
    >>> tex = pxvm.create_persistent(np.zeros((64, 64, 3), np.uint8), num_patches=16, patch=8)
    >>> frame = np.zeros((64, 64, 3), np.uint8); frame[40:, 40:] = 90
    >>> tokens, changed = pxvm.update_mipmaps_incremental(tex, frame)
    >>> bool(changed.any()), bool(changed.all())
    (True, False)
    """
    return texture.update_mipmaps_incremental(frame, dirty, dtype, normalize, layout, alpha)
