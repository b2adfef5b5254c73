"""Tokens for models: an atlas's patches as a normalized float tensor (Runner.tokens) and every
token's position (Runner.positions), by the exact rule of isa/SPEC.md section 9.

    tok = runner.tokens(image, dtype="bfloat16", normalize="siglip")   # (273, 3, 16, 16)

The values are computed by the executor that ran the program (one table per channel built on the
host, looked up by the CPU threads or one CUDA kernel): no pass over the patches in Python, no
copy. Channel c of a texel with byte u becomes y = fl32(fl32(fl32(u) * r) - m_c) / s_c in float32
(r = fl32(1/255), m_c, s_c the preset's or your mean/std as float32), then float16 / bfloat16
round to nearest even; CPU and CUDA give the same bits, and so does NumPy doing those float32
steps (tests/python/test_tokens.py).

Where the tensor lives, and who owns it:
- with out=: written in place (a torch tensor, a CuPy array or anything with
  __cuda_array_interface__ on the runner's CUDA device, or a host NumPy array / torch tensor),
  nothing copied; CUDA memory is written on torch's current stream (CuPy's when torch is absent);
- without out=: CUDA inputs (cuda executor) give a new torch CUDA tensor (CuPy when torch is
  absent); torch CPU inputs a torch CPU tensor; NumPy inputs give a new NumPy array, except bfloat16: NumPy has none, so a torch CPU
  tensor (torch.bfloat16), or, without torch, a UsageError: pass out=<uint16 NumPy array> to get
  the raw bfloat16 bits instead (the only place where bits stand for values, asked for by name).
NumPy results share their memory with torch.from_dlpack(result) (DLPack, no copy).

With policy "dynamic" (a program from a "uniform" plan), tokens_batch gives a pxvm.ragged.Ragged:
each image at its own size, the packed [sum N_i, ...] tokens written by one executor call
(python/pxvm/ragged.py), the same dtypes, layouts, out= and owners as above. dtype may also be
a torch dtype (torch.bfloat16) or a NumPy one (np.float16).
"""
from __future__ import annotations

import ctypes
import functools
from typing import TYPE_CHECKING, Any, Sequence, Union

from . import _capi
from ._arrays import _is_torch, _np, _torch
from .errors import UsageError, _check
from ._batch import _as_ragged, _on_error, _skipping
from ._destinations import (DTYPES, LAYOUTS, _CAI_TYPES, _ITEMSIZE, _NUMPY_DTYPES, _TORCH_DTYPES,  # noqa: F401
                            _c_contiguous, _checked_destination, _cuda_stream, _destination, _new_output, _shape,
                            dtype_name, token_shape)
from .ragged import is_dynamic, ragged_batch, ragged_layout, ragged_size, wants_ragged

if TYPE_CHECKING:
    import numpy
    from ._arrays import Array, Batch, Fixation

_lib = _capi.lib

#: rule=: the float rule of isa/SPEC.md section 9 ("float32": r = fl32(1/255), all in float32;
#: "transformers4": transformers 4.x's Pillow-based processors, the rescale in float64 then float32)
RULES = {"float32": 0, "transformers4": 1}
PRESETS = ("clip", "siglip", "imagenet", "none")
#: normalize=: a preset name, or (mean, std): 3 values each, or 4 with alpha=True
Normalize = Union[str, "tuple[Sequence[float], Sequence[float]]"]


def token_format(dtype: str = "float32", normalize: Normalize = "clip", layout: str = "nchw",
                 alpha: bool = False, rule: str = "float32") -> _capi.TokenFormat:
    """The library's pxvm_token_format for these arguments (checked here for names, by the library
    for values: a UsageError naming what is wrong). rule: a name of RULES."""
    if not isinstance(rule, str) or rule not in RULES:
        raise UsageError("usage: tokens: rule %r is none of %s" % (rule, ", ".join(RULES)))
    dtype = dtype_name(dtype)
    if not isinstance(dtype, str) or dtype not in DTYPES:  # a list is no name (nor hashable)
        raise UsageError("usage: tokens: dtype %r is none of %s" % (dtype, ", ".join(DTYPES)))
    if not isinstance(layout, str) or layout not in LAYOUTS:
        raise UsageError("usage: tokens: layout %r is none of %s" % (layout, ", ".join(LAYOUTS)))
    if not isinstance(alpha, bool):
        raise UsageError("usage: tokens: alpha is True or False, not %r" % (alpha,))
    f = _capi.TokenFormat()
    if isinstance(normalize, str):
        _check(_lib.pxvm_token_format_preset(_capi.c_string(normalize, "normalize"), ctypes.byref(f)))
    else:
        try:
            mean, std = normalize
            mean, std = [float(v) for v in mean], [float(v) for v in std]
        except (TypeError, ValueError):
            raise UsageError("usage: tokens: normalize is a preset (%s) or (mean, std), got %r" %
                             (", ".join(PRESETS), normalize)) from None
        if len(mean) != len(std) or not 3 <= len(mean) <= 4:
            raise UsageError("usage: tokens: normalize=(mean, std) needs 3 values each (4 with alpha), got %d and %d" %
                             (len(mean), len(std)))
        f.rescale, f.nvalues = 1.0 / 255.0, len(mean)
        for c in range(4):
            f.mean[c] = mean[c] if c < len(mean) else 0.0
            f.std[c] = std[c] if c < len(std) else 1.0
    f.dtype, f.layout, f.alpha, f.rule = DTYPES[dtype], LAYOUTS[layout], int(alpha), RULES[rule]
    return f


def _fast_key(runner, image, inputs, dtype, normalize, layout, alpha, out, slot, fixation, units, policy):
    """The key of the prepared call (python/pxvm/_native.c) for these arguments, or None (the
    ctypes path alone: fixations, policies, named inputs, arguments that are not plain values).
    Only values the ctypes path accepted get a prepared call, and a key holds each argument's
    exact type, so a value that only compares equal (alpha=1 for True) is checked again."""
    if type(alpha) is not bool or type(dtype) is not str or type(layout) is not str or \
            type(slot) not in (type(None), str, int):
        return None
    if type(normalize) is not str:
        try:
            mean, std = normalize
            normalize = (tuple(float(v) for v in mean), tuple(float(v) for v in std))
        except (TypeError, ValueError):
            return None
    return runner._fast_key("tokens", image, inputs, fixation, units, policy, type(slot), slot, dtype, normalize,
                            layout, alpha, out is None)


def _alloc(result):
    """How the prepared call makes a new output like `result` (a torch tensor or NumPy array), or None."""
    if _is_torch(result):
        torch = _torch()
        if type(result) is torch.Tensor:
            return 1, torch.empty, (tuple(result.shape),), {"dtype": result.dtype, "device": result.device}
        return None
    np = _np()
    if type(result) is np.ndarray:
        return 0, np.empty, (result.shape, result.dtype), None
    return None


def _run_and_read(runner, bound, batch, batched, s, fmt, shape, dtype, out, fixation, units, clamp):
    """One run of `batch` items and the read of their tokens: (the result, TokenFormat, device of
    the destination). out= is checked before anything runs."""
    h, name = runner._runner(batch)
    on_cuda = any(_is_torch(x) and x.is_cuda or getattr(x, "__cuda_array_interface__", None) is not None
                  for v in bound.values() for x in (v if isinstance(v, (list, tuple)) else [v]))
    if out is not None:
        ptr, devno = _checked_destination(out, shape, dtype, runner, name)
        result = out
    else:
        result, ptr, devno = _new_output(shape, dtype, on_cuda and name == "cuda", runner)
    runner._exec(bound, batch, [], batched=batched, fixation=fixation, units=units, clamp=clamp)
    if devno >= 0:  # written on the caller's stream, after the run
        handle = _cuda_stream(runner)
        if runner._stream.get(batch) != handle:
            _check(_lib.pxvm_runner_set_stream(h, ctypes.c_void_p(handle)))
            runner._stream[batch] = handle
    _check(_lib.pxvm_runner_read_tokens(h, s.index, 0, batch, ctypes.byref(fmt), ctypes.c_void_p(ptr), devno))
    return result, devno


def _locked(function):
    """function(runner, ...) under the runner's guard (Runner._in_call: one thread at a time per
    runner, close() refused during the call)."""
    @functools.wraps(function)
    def locked(runner, *args, **kwargs):
        with runner._in_call():
            return function(runner, *args, **kwargs)
    return locked


@_locked
def tokens(runner, *image: Array, dtype: str = "float32", normalize: Normalize = "clip", layout: str = "nchw",
           alpha: bool = False, out: Any = None, slot: str | int | None = None, fixation: Fixation = None,
           fixation_units: str = "normalized", fixation_clamp: bool = False, policy: str | None = None,
           size: tuple[int, int] | None = None, **inputs: Array) -> Any:
    """Runs the program once and returns the tokens of its (first) atlas output: (N, C, p, p) for
    layout "nchw", (N, p, p, C) "nhwc", (N, C*p*p) "flat" ((C, ph, pw) order: a ViT patch
    embedding's Conv2d weight.reshape(D, -1) order), C = 3, or 4 with alpha=True.

    dtype "float32", "float16" or "bfloat16"; normalize a preset ("clip", "siglip", "imagenet",
    "none": rescale to [0, 1] only) or (mean, std) of 3 values (4 with alpha; with 3, alpha gets
    mean 0, std 1); values rescaled by 1/255 first. out: see the module's doc. fixation,
    fixation_units, fixation_clamp, policy, slot and named inputs: as for Runner.patches. Bad names,
    values, or an out= of another dtype, shape, device or not contiguous: UsageError, nothing
    written.

    A repeat of a call's arguments and arrays' shapes (one image, NumPy or torch, no fixation or
    policy) takes the compiled fast path (python/pxvm/_native.c): bind, run and read in one call,
    the same bytes; PXVM_NO_NATIVE=1 keeps the ctypes path. size: as for Runner.run. policy
    "dynamic...": the image's own grid of tokens (tokens_batch's Ragged for one image, its [0])."""
    size, policy = runner._sized(policy, size)
    dtype = dtype_name(dtype)
    if is_dynamic(policy):
        runner._dynamic_only(fixation=fixation, slot=slot, fixation_clamp=fixation_clamp, inputs=inputs,
                             fixation_units=None if fixation_units == "normalized" else fixation_units)
        if len(image) != 1:
            raise UsageError("usage: policy dynamic takes one image, given as the first argument")
        return ragged_batch(runner, [image[0]], policy, token_format(dtype, normalize, layout, alpha), dtype,
                            layout, out)[0]
    key = _fast_key(runner, image, inputs, dtype, normalize, layout, alpha, out, slot, fixation, fixation_units,
                    policy)
    call = runner._prepared.get(key) if key else None
    if call is not None:
        res = call.run(image[0]) if out is None else call.run(image[0], out)
        if res is not None:
            return res if out is None else out
    s = runner._atlas(slot)
    fmt = token_format(dtype, normalize, layout, alpha)
    shape = _shape(s, 4 if alpha else 3, layout)
    runner._runner(1)
    bound = runner._apply_policy(runner._inputs(image, inputs), policy, False, size)
    result, devno = _run_and_read(runner, bound, 1, False, s, fmt, shape, dtype, out, fixation, fixation_units,
                                  fixation_clamp)
    if key:
        alloc = None
        if out is None:
            alloc = _alloc(result)
            if alloc is None:  # CuPy: the ctypes path alone
                return result
        runner._prepare(key, image[0], [], None if out is None else [out], tokens=(s.index, fmt, devno, alloc))
    return result


@_locked
def tokens_batch(runner, images: Batch | None = None, fixations: Fixation = None, dtype: str = "float32",
                 normalize: Normalize = "clip", layout: str = "nchw", alpha: bool = False, out: Any = None,
                 slot: str | int | None = None, fixation_units: str = "normalized", fixation_clamp: bool = False,
                 policy: str | None = None, size: tuple[int, int] | None = None, device: str | None = None,
                 on_error: str = "raise", merge: int | None = None, temporal: int = 1, rule: str = "float32",
                 **inputs: Batch) -> Any:
    """Runs the program once on a batch and returns every item's tokens: (B, N, C, p, p) for
    layout "nchw" (B, N, p, p, C) "nhwc", (B, N, C*p*p) "flat"; item b's are tokens(images[b],
    fixation=fixations[b], ...)'s bytes. images, fixations ((B, 2) or (B, K, 2), per item, host
    or CUDA), fixation_units, fixation_clamp, policy, size and named inputs: as for Runner.run_batch;
    dtype, normalize, layout, alpha, out, slot: as for tokens (out= of the (B, ...) shape). On
    the GPU the batch is one run (each plan step one launch) and one read (one kernel).

    policy "dynamic[:KEYS][:FILTER]" (a program from a "uniform" plan): each image at its own
    size by the rule, its own grid of tokens: a pxvm.ragged.Ragged whose tokens are the packed
    [sum N_i, ...] tokens (out=: of that shape), written by one call of the executor
    (python/pxvm/ragged.py); images may be paths of PNG/JPEG files. dtype may also be a torch
    dtype (torch.bfloat16). device="cuda" puts the tokens on the runner's GPU whatever the images
    (host arrays and files are resized there: the tensor a model takes, written once).
    on_error="skip" leaves out the images that fail (the Ragged's index and failures say which),
    for every policy: a fixed count N gives a Ragged too, as patches_batch's.

    merge (None: row-major; m: Qwen2-VL's m x m window order), temporal (T frames per token, the
    images T per item) and layout "qwen2vl" (Qwen2-VL's pixel_values: "flat", the dynamic policy's
    merge, temporal patch 2, each image given once) give a Ragged for any policy: dynamic, or
    "stretch", "fit", "exact", "crop[:short=S][:FILTER]" (CLIP's shortest-edge resize and centre
    crop) with size=(W, H); see python/pxvm/ragged.py. rule: "float32" (isa/SPEC.md section 9) or
    "transformers4" (transformers 4.x's Pillow-based processors: the rescale in float64, then
    float32; the values of their pixel_values bit for bit)."""
    dtype = dtype_name(dtype)
    if wants_ragged(policy, layout, merge, temporal):
        c_layout, m, t, repeat = ragged_layout(policy, layout, merge, temporal)
        out_w, out_h, policy = ragged_size(policy, size)
        runner._dynamic_only(fixations=fixations, slot=slot, fixation_clamp=fixation_clamp, inputs=inputs,
                             fixation_units=None if fixation_units == "normalized" else fixation_units)
        return ragged_batch(runner, images, policy, token_format(dtype, normalize, c_layout, alpha, rule), dtype,
                            c_layout, out, device, on_error, (out_w, out_h), m, t, repeat)
    size, policy = runner._sized(policy, size)
    if device is not None:
        raise UsageError("usage: device= is for policy dynamic (other tokens follow their images' device)")
    s = runner._atlas(slot)
    fmt = token_format(dtype, normalize, layout, alpha, rule)
    if _on_error(on_error, {"out=": out is not None, "named inputs (give images=)": inputs}):  # as patches_batch
        res, keep, failures, files = _skipping(
            lambda im, fx: runner.tokens_batch(im, fx, dtype=dtype, normalize=normalize, layout=layout, alpha=alpha,
                                               slot=slot, fixation_units=fixation_units, fixation_clamp=fixation_clamp,
                                               policy=policy, size=size, rule=rule), images, fixations)
        return _as_ragged(res, keep, failures, files, lambda: _new_output(
            token_shape(0, s.patch_h, s.patch_w, 4 if alpha else 3, layout), dtype, False, runner)[0])
    bound, b = runner._batch_inputs(images, inputs)
    bound = runner._apply_policy(bound, policy, True, size)
    shape = (b,) + _shape(s, 4 if alpha else 3, layout)
    return _run_and_read(runner, bound, b, True, s, fmt, shape, dtype, out, fixations, fixation_units,
                         fixation_clamp)[0]


class Positions:
    """Where every token of an atlas was sampled (isa/SPEC.md sections 6 and 9), NumPy arrays:

    centre      (N, 2) float64: the centre (x, y) in level-0 texels (Q16 / 65536)
    step        (N, 2) float64: (du, dv), texels per patch texel (the patch covers
                patch_w * du x patch_h * dv texels); 0 for GATHER
    level       (N,) float64: the LOD used (Q8.8 / 256)
    normalized  (N, 2) float64: centre / (W, H) of the program's first input slot (an any-size
                input's bound size), in [0, 1] for a centre inside the image (NaN without an
                input slot)
    grid        (N, 2) int64 (row, col), or None: when the tokens lie on a lattice (the ranks of
                their centre y and x among the distinct ones form cells 0..N-1 of the grid in
                row-major order, each once: a full grid or a row-major prefix)
    rope        (3, N) int64 (t, h, w): multimodal-RoPE ids; t the frame given, (h, w) the grid
                ids or, off a lattice, the ranks of the centre y and x; None if a token was
                never written
    written     (N,) bool: an instruction wrote the token (else its values are NaN)
    """

    centre: numpy.ndarray
    step: numpy.ndarray
    level: numpy.ndarray
    normalized: numpy.ndarray
    grid: numpy.ndarray | None
    rope: numpy.ndarray | None
    written: numpy.ndarray

    def __init__(self, **fields: Any) -> None:
        self.__dict__.update(fields)

    def __repr__(self) -> str:
        return "Positions(N=%d, grid=%s)" % (len(self.level), None if self.grid is None else
                                             "%dx%d" % (self.grid[:, 0].max() + 1, self.grid[:, 1].max() + 1))


def positions_from_geometry(g: numpy.ndarray, ref_wh: tuple[int, int] | None, t: int = 0) -> Positions:
    """Positions of the tokens of one item from its exact geometry (N, 5) int32 (Runner.geometry
    with exact=True); ref_wh: the first input slot's (W, H), or None."""
    np = _np()
    g = np.asarray(g, dtype=np.int64)
    written = g[:, 4] >= 0
    centre = g[:, 0:2] / 65536.0
    step = g[:, 2:4] / 65536.0
    level = g[:, 4] / 256.0
    centre[~written] = np.nan
    step[~written] = np.nan
    level = np.where(written, level, np.nan)
    if ref_wh:
        normalized = centre / np.array([float(ref_wh[0]), float(ref_wh[1])])
    else:
        normalized = np.full_like(centre, np.nan)
    grid = rope = None
    n = len(g)
    if n and written.all():
        xs, col = np.unique(g[:, 0], return_inverse=True)
        ys, row = np.unique(g[:, 1], return_inverse=True)
        cell = row.astype(np.int64) * len(xs) + col
        if np.array_equal(np.sort(cell), np.arange(n)):
            grid = np.stack([row, col], axis=1).astype(np.int64)
        rope = np.stack([np.full(n, int(t), dtype=np.int64), row.astype(np.int64), col.astype(np.int64)])
    return Positions(centre=centre, step=step, level=level, normalized=normalized, grid=grid, rope=rope,
                     written=written)


@_locked
def positions(runner, slot: str | int | None = None, t: int = 0) -> Positions:
    """The positions of the last run's tokens of the (first) atlas output (see Positions)."""
    s = runner._atlas(slot)
    g = runner.geometry(s.index, 1, exact=True)[0]
    ins = runner.program.inputs
    return positions_from_geometry(g, runner.slot_size(ins[0].index) if ins else None, t)
