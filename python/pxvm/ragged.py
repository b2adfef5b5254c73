"""Ragged batches: images of different sizes whose token counts differ (policy "dynamic").

    runner = pxvm.Runner(pxvm.Program.from_plan("programs/uniform.json"))
    r = runner.patches_batch([img_a, img_b], policy="dynamic:merge=2")
    r.tokens        # (sum N_i, p, p, 4) uint8, the images' tokens one after the other
    r.offsets       # (B + 1,) int64: image i is tokens[offsets[i]:offsets[i + 1]] (cu_seqlens)
    r.grid          # (B, 3) int64: (t, h, w) in patches, t = 1; N_i = h * w
    r.sizes         # (B, 2, 2) int64: sizes[i, 0] = (w, h) as given, sizes[i, 1] = (w', h') resized
    r.position_ids  # (3, sum N_i) int64: each token's (t, h, w) (multimodal RoPE style)
    t = runner.tokens_batch(paths, policy="dynamic", dtype=torch.bfloat16, normalize="clip")
    t.tokens        # (sum N_i, 3, p, p) bfloat16 (layout "nchw"; "nhwc", "flat"), the same fields

Policy "dynamic" (docs/policies.md) resizes each image to its own w' x h' (Qwen2-VL's
smart_resize, f = patch * merge) and takes every patch x patch tile of it, row-major: the tokens
the runner's "uniform" plan gives at LOD 0 for w' x h'. The whole batch is one call of the
runner's executor (pxvm_runner_ragged, include/pxvm.h "ragged batches"): no program compiled, no
run and no runner per size; the cuda executor resizes on its GPU, from host arrays or CUDA
tensors of its device, the CPU executor over its threads. Every byte is the RESIZE rule's
(Pillow's Image.resize of the image as RGB(A)), float tokens the table rule of pxvm.tokens.

The images: host NumPy arrays or torch tensors (H, W), (H, W, C) or (C, H, W) with C in 1, 3, 4,
any strides (read in place, not copied); CUDA tensors (or __cuda_array_interface__ arrays) of the
runner's device on the cuda executor; paths of PNG/JPEG files, decoded by the library (as
load_image) on a pool of up to os.cpu_count() threads and read from the decoder's memory. Memory:
the decoded files of the call and the output (the executor's own within its max_memory). The
output is new (NumPy; a torch CUDA tensor when an image is on CUDA; bfloat16 on the host a torch
tensor, as pxvm.tokens) or out=, written in place: on CUDA on torch's current stream. An error
about one image (a file that does not decode, a size the rule refuses) is raised of its class
naming the image (e.index, e.file); nothing is returned and out= is not written then.

The position ids are in patch units and row-major; Qwen2-VL's language model numbers merged
tokens (h // merge, w // merge) and its processor orders the patches merge window by merge
window: permute the tokens for that model.
"""
from __future__ import annotations

import ctypes
import operator
import os
import re
import threading
import warnings

from . import _capi
from .errors import _BY_CLASS, Error, UsageError, _check
from ._arrays import _cuda_device, _describe, _fill_view, _np, _torch

_lib = _capi.lib


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
        #: the images' indices in the batch given (on_error="skip" leaves failed ones out)
        self.index = np.arange(len(grid), dtype=np.int64)
        #: the errors of the images left out (on_error="skip"), each naming its image (.index, .file)
        self.failures = []
        counts = np.diff(offsets)
        k = np.arange(int(offsets[-1]), dtype=np.int64) - np.repeat(offsets[:-1], counts)  # index in its image
        gw = np.repeat(grid[:, 2], counts)
        self.position_ids = np.stack([np.zeros_like(k), k // gw, k % gw])

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


def _named(e, i, name):
    """The same class of error, naming the image (its index, and its file when it has one)."""
    what = "image %d%s" % (i, " ('%s')" % name if name else "")
    reason = getattr(e, "reason", str(e))
    err = type(e)("%s: %s" % (what, reason))
    err.index, err.file, err.reason = i, name, reason
    return err


def _library_error(rc, failed, files):
    """The library's error of a ragged call; about image `failed` (>= 0): named by _named, the
    library's own "image i: " dropped (said once, with the file)."""
    msg = _lib.pxvm_errmsg().decode(errors="replace")
    err = _BY_CLASS.get(rc, Error)
    if failed < 0 or failed >= len(files):
        return err(msg)
    msg = re.sub(r"^([a-z][a-z ]*: )?image %d: " % failed, r"\1", msg, count=1)
    return _named(err(msg), failed, files[failed])


def _decode_files(files, decoded, warned, failures=None):
    """Decodes the files (files[i] a path or None) into decoded[i] = (pointer, w, h) on a pool of
    threads (the library's decoder; ctypes releases the GIL); warnings into warned[i]. The first
    failing file in the batch's order is raised named (whichever thread finds a failure first:
    the files after a failed one are skipped, those before it still decoded). The caller frees
    what is in `decoded`, also after an error. With `failures` (a dict) every file is decoded and
    each failure goes into failures[i], named; nothing is raised."""
    from .image import _decode, _limits
    todo = [i for i, f in enumerate(files) if f is not None]
    if not todo:
        return
    lim = _limits()
    failed = {}
    first = [len(files)]  # the lowest index that failed so far
    lock = threading.Lock()

    def one(i):
        if failures is None and i > first[0]:
            return
        try:
            px, w, h, warning = _decode(files[i], lim)
        except Error as e:
            with lock:
                failed[i] = e
                first[0] = min(first[0], i)
            return
        with lock:
            decoded[i] = (px, w, h)
            if warning:
                warned[i] = warning

    workers = min(len(todo), os.cpu_count() or 1, 64)
    if workers == 1:
        for i in todo:
            one(i)
    else:
        from concurrent.futures import ThreadPoolExecutor
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="pxvm-decode") as pool:
            list(pool.map(one, todo))
    if failures is not None:
        failures.update({i: _named(e, i, files[i]) for i, e in failed.items()})
    elif failed:
        i = min(failed)
        raise _named(failed[i], i, files[i]) from None


def _caller_level():
    """warnings.warn's stacklevel of the first frame outside the package (the caller's line; the
    depth of the package's wrappers differs between patches_batch and tokens_batch)."""
    import sys
    here, level = os.path.dirname(os.path.abspath(__file__)), 1
    f = sys._getframe(1)
    while f is not None and os.path.dirname(os.path.abspath(f.f_code.co_filename)) == here:
        f, level = f.f_back, level + 1
    return level


def _image_views(runner, items, files, decoded):
    """The pxvm_view of every image (files from `decoded`), whether one is CUDA memory, and the
    objects the views point into (kept alive over the call)."""
    n = len(items)
    views = (_capi.View * n)()
    keep, on_cuda = [], False
    for i, x in enumerate(items):
        if files[i] is not None:
            px, w, h = decoded[i]
            views[i] = _capi.View(px, -1, 1, w, h, 4, 0, 4 * w, 4, 1)
            continue
        try:
            a = _describe(x)
            if a.device != -1:
                on_cuda = True
                _cuda_device(a, runner.device)
                if runner.executor != "cuda":
                    raise UsageError("usage: input: CUDA tensors need executor 'cuda' (this runner's is '%s')" %
                                     runner.executor)
            _fill_view(views[i], a, 0, 0, False)  # HWC where both read (as image_hw)
        except Error as e:
            raise _named(e, i, None) from None
        except (ValueError, TypeError) as e:
            raise type(e)("image %d: %s" % (i, e)) from None
        keep.append(a.keep)
    return views, on_cuda, keep


def ragged_batch(runner, images, policy: str, fmt=None, dtype: str = "uint8", layout: str = "nchw",
                 out=None, device=None, on_error: str = "raise") -> Ragged:
    """ragged_batch_once, or with on_error="skip" the images that fail (a file that does not
    decode, a size the rule refuses, an image the executor refuses) left out: the result's
    `index` holds the kept images' indices in `images`, its `failures` the errors of the others
    (each names its image: e.index, e.file), in the batch's order. Files are decoded once."""
    if on_error not in ("raise", "skip"):
        raise UsageError("usage: on_error=%r: 'raise' (the first failure is raised, nothing returned) or "
                         "'skip' (failed images left out, listed in failures)" % (on_error,))
    if on_error == "raise":
        return ragged_batch_once(runner, images, policy, fmt, dtype, layout, out, device)
    np = _np()
    if not isinstance(images, (list, tuple)):
        if isinstance(images, (str, os.PathLike)) or len(getattr(images, "shape", ())) == 0:
            return ragged_batch_once(runner, images, policy, fmt, dtype, layout, out, device)  # its usage error
        images = [images[i] for i in range(int(images.shape[0]))]
    items = list(images)
    files = [os.fspath(x) if isinstance(x, (str, os.PathLike)) else None for x in items]
    decoded, warned, failures = {}, {}, {}
    try:
        _decode_files(files, decoded, warned, failures)
        for i in sorted(warned):
            warnings.warn(warned[i], stacklevel=_caller_level())
        for i, (px, w, h) in decoded.items():  # the decoder's memory, read in place
            items[i] = np.ctypeslib.as_array((ctypes.c_uint8 * (w * h * 4)).from_address(px.value)).reshape(h, w, 4)
        keep = [i for i in range(len(items)) if i not in failures]
        while keep:
            try:
                r = ragged_batch_once(runner, [items[i] for i in keep], policy, fmt, dtype, layout, out, device)
                break
            except Error as e:
                j = getattr(e, "index", None)
                if j is None:  # about no image: the call's own (out=, device=...)
                    raise
                i = keep.pop(j)
                failures[i] = _named(e, i, files[i])
        else:
            r = _empty(runner, fmt, dtype, layout, device)
        r.index = np.array(keep, dtype=np.int64)
        r.failures = [failures[i] for i in sorted(failures)]
        kept_files = [files[i] for i in keep]
        r.files = kept_files if any(kept_files) else None
        return r
    finally:
        for px, _, _ in decoded.values():
            _lib.pxvm_free(px)


def _empty(runner, fmt, dtype, layout, device):
    """The Ragged of no image (every one failed under on_error="skip"), of the output's kind."""
    from .tokens import _new_output, token_shape
    np = _np()
    _, patch = _plan_patch(runner)
    cuda = device is not None and str(device) != "cpu"
    if fmt is None:
        shape = (0, patch, patch, 4)
        tokens = _torch().empty(shape, dtype=_torch().uint8, device=runner._torch_device) if cuda else \
            np.empty(shape, dtype=np.uint8)
    else:
        tokens = _new_output(token_shape(0, patch, patch, 4 if fmt.alpha else 3, layout), dtype, cuda, runner)[0]
    return Ragged(tokens, np.zeros(1, np.int64), np.zeros((0, 3), np.int64), np.zeros((0, 2, 2), np.int64))


def ragged_batch_once(runner, images, policy: str, fmt=None, dtype: str = "uint8", layout: str = "nchw",
                      out=None, device=None) -> Ragged:
    """Runner.patches_batch (fmt None: RGBA8 tiles) and tokens_batch (fmt: a pxvm_token_format of
    `dtype` and `layout`) with policy "dynamic": images is a list (or a (B, ...) array or tensor)
    of images of any sizes or paths of PNG/JPEG files (see the module). One call of the executor
    writes every image's tiles into the packed output. An error of one image is raised as the
    package's error class naming its index (and file); nothing is returned then. device: None, the
    output where the images are (CUDA when one is a CUDA tensor, else the host); "cuda" (or a torch
    device of the runner's GPU): a CUDA tensor whatever the images (the cuda executor only)."""
    from .tokens import _ITEMSIZE, _checked_destination, _new_output, token_shape
    np = _np()
    _, patch = _plan_patch(runner)
    if not isinstance(images, (list, tuple)):
        if isinstance(images, (str, os.PathLike)) or len(getattr(images, "shape", ())) == 0:
            raise UsageError("usage: a ragged batch is a list of images or paths, or a (B, ...) array, not %s%s" %
                             ("a 0-d " if hasattr(images, "shape") else "", type(images).__name__))
        images = [images[i] for i in range(int(images.shape[0]))]
    if not images:
        raise UsageError("pxvm: a ragged batch needs at least one image")
    n = _capi.c_integer(len(images), "batch size")
    files = [os.fspath(x) if isinstance(x, (str, os.PathLike)) else None for x in images]
    policy_c = _capi.c_string(policy, "policy")
    decoded, warned = {}, {}
    try:
        _decode_files(files, decoded, warned)
        for i in sorted(warned):
            warnings.warn(warned[i], stacklevel=_caller_level())
        views, on_cuda, keep = _image_views(runner, images, files, decoded)
        if device is not None:
            where = str(device)
            if where not in ("cuda", "cuda:%d" % runner.device, "cpu"):
                raise UsageError("usage: device=%r: the output goes to 'cpu' or to the runner's GPU ('cuda', "
                                 "'cuda:%d')" % (device, runner.device))
            if where != "cpu" and runner.executor != "cuda":
                raise UsageError("usage: device=%r needs executor 'cuda' (this runner's is '%s')" %
                                 (device, runner.executor))
            if where == "cpu" and on_cuda:
                raise UsageError("usage: device='cpu' with CUDA tensors in: the output stays on their GPU")
            on_cuda = where != "cpu"
        wh = (ctypes.c_int * (2 * n))()
        for i in range(n):
            wh[2 * i], wh[2 * i + 1] = views[i].w, views[i].h
        out_wh = (ctypes.c_int * (2 * n))()
        offsets = np.zeros(n + 1, dtype=np.int64)
        failed = ctypes.c_int(-1)
        rc = _lib.pxvm_ragged_plan(policy_c, patch, 0, 0, n, wh, out_wh,
                                   offsets.ctypes.data_as(ctypes.POINTER(ctypes.c_int64)), ctypes.byref(failed))
        if rc:
            raise _library_error(rc, failed.value, files)
        total = int(offsets[-1])
        if fmt is None:
            shape = (total, patch, patch, 4)
        else:
            shape = token_shape(total, patch, patch, 4 if fmt.alpha else 3, layout)
        h, executor = runner._runner(1)
        if out is not None:
            ptr, devno = _checked_destination(out, shape, dtype, runner, executor)
            result = out
        elif fmt is None:
            if on_cuda:
                torch = _torch()
                result = torch.empty(shape, dtype=torch.uint8, device=runner._torch_device)
                ptr, devno = result.data_ptr(), runner.device
            else:
                result = np.empty(shape, dtype=np.uint8)
                ptr, devno = result.ctypes.data, -1
        else:
            result, ptr, devno = _new_output(shape, dtype, on_cuda and executor == "cuda", runner)
        nbytes = int(np.prod(shape, dtype=np.int64)) * _ITEMSIZE[dtype]
        if on_cuda or devno >= 0:  # ordered on torch's current stream
            runner._sync_stream(1)
        elif runner._stream.get(1):
            _check(_lib.pxvm_runner_set_stream(h, None))
            runner._stream[1] = 0
        args = _capi.RaggedArgs(policy_c, patch, 0, 0, None if fmt is None else ctypes.pointer(fmt), ptr, devno,
                                nbytes, -1)
        rc = _lib.pxvm_runner_ragged(h, n, views, ctypes.byref(args))
        if rc:
            raise _library_error(rc, args.failed, files)
    finally:
        for px, _, _ in decoded.values():
            _lib.pxvm_free(px)
    ow = np.ctypeslib.as_array(out_wh).reshape(n, 2).astype(np.int64)
    grid = np.stack([np.ones(n, np.int64), ow[:, 1] // patch, ow[:, 0] // patch], axis=1)
    given = np.ctypeslib.as_array(wh).reshape(n, 2).astype(np.int64)
    return Ragged(result, offsets, grid, np.stack([given, ow], axis=1), files if any(files) else None)


def resized_on_gpu(runner, x, w, h, policy: str):
    """x (a host array or tensor, or a CUDA tensor of the runner's device) resized by `policy`
    (stretch, fit, exact) to w x h by the runner's cuda executor, on its GPU: a new (h, w, 4)
    uint8 torch CUDA tensor, written on torch's current stream, the bytes of pxvm_image_fit (a
    ragged batch of one image, tiles of one texel: the image). Runner._apply_policy binds it."""
    torch = _torch()
    views, _, keep = _image_views(runner, [x], [None], {})
    out = torch.empty((h, w, 4), dtype=torch.uint8, device=runner._torch_device)
    handle, _ = runner._runner(1)
    runner._sync_stream(1)
    args = _capi.RaggedArgs(_capi.c_string(policy, "policy"), 1, w, h, None, out.data_ptr(), runner.device,
                            out.numel(), -1)
    rc = _lib.pxvm_runner_ragged(handle, 1, views, ctypes.byref(args))
    del keep
    _check(rc)
    return out
