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

Token order and frames (tokens_batch / patches_batch keywords; the library's pxvm_ragged merge
and temporal, include/pxvm.h):
    merge=None (or 1)   each image's tiles row-major;
    merge=m             m x m windows row-major, the tiles of a window row-major: Qwen2-VL's
                        processor order (each grid side a multiple of m, else a UsageError naming
                        the image; policy dynamic with merge=m always gives such grids);
    temporal=T          the images come T frames per item (len(images) a multiple of T, the
                        frames of an item of one resized size): item g is images[g*T:(g+1)*T]
                        and each of its tokens holds T frames: (N, C, T, p, p) "nchw", (N, T, p,
                        p, C) "nhwc", (N, C*T*p*p) "flat" (Qwen2-VL's (C, T, p, p) flattening),
                        (N, T, p, p, 4) uint8 tiles. offsets, grid (t = 1), sizes, files and
                        index are per item.
    layout="qwen2vl"    tokens_batch only: Qwen2-VL's pixel_values, "flat" with merge = the
                        dynamic policy's merge (2 by default) and temporal patch 2: each image
                        given once is passed twice by this layer (Qwen2-VL tiles a still image
                        over its temporal patch); temporal=2 instead takes frames in pairs (a
                        video). The grid is Qwen2-VL's image_grid_thw per item.
Policies other than dynamic ("stretch", "fit", "exact", "crop[:short=S][:FILTER]") give a
Ragged too when one of these is asked for, every image resized to size=(W, H).

The position ids are in patch units, (t, h, w) of each token in the order written (merge
windows included); Qwen2-VL's language model numbers merged tokens (h // merge, w // merge).
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
from ._failures import _named
from ._destinations import _ITEMSIZE, _checked_destination, _new_output, token_shape
from .image import _decode, _limits
from .policies import _size_policy, canonical_policy, dynamic_size, is_dynamic  # noqa: F401 (pxvm.ragged's names)

_lib = _capi.lib


def image_hw(a):
    """(H, W) of an image array or tensor (H, W), (H, W, C) or (C, H, W) with C in 1, 3, 4 (HWC
    first where both read), or None for another shape."""
    sh = tuple(getattr(a, "shape", ()))
    if len(sh) == 2 or (len(sh) == 3 and sh[2] in (1, 3, 4)):
        return sh[0], sh[1]
    if len(sh) == 3 and sh[0] in (1, 3, 4):
        return sh[1], sh[2]
    return None


class Ragged:
    """The packed tokens of a batch of images with different token counts (see the module)."""

    def __init__(self, tokens, offsets, grid, sizes, files=None, merge: int = 1):
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
        if merge > 1:  # the inverse of the window order (vm/ragged_index.h, px_ragged_token)
            m = merge
            window, inner = k // (m * m), k % (m * m)
            hh = window // (gw // m) * m + inner // m
            ww = window % (gw // m) * m + inner % m
        else:
            hh, ww = k // gw, k % gw
        self.position_ids = np.stack([np.zeros_like(k), hh, ww])

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


def _library_error(rc, failed, files, repeat=1):
    """The library's error of a ragged call; about image `failed` (>= 0; the library's, of the
    images each given `repeat` times): named by _named as the caller's image failed // repeat, the
    library's own "image i: " dropped (said once, with the file)."""
    msg = _lib.pxvm_errmsg().decode(errors="replace")
    err = _BY_CLASS.get(rc, Error)
    if failed < 0 or failed >= len(files) * repeat:
        return err(msg)
    msg = re.sub(r"^([a-z][a-z ]*: )?image %d: " % failed, r"\1", msg, count=1)
    if repeat > 1:  # the library's indices of other images in the message are its own too
        msg += " (the library's image %d: this layer passes each image %d times)" % (failed, repeat)
    return _named(err(msg), failed // repeat, files[failed // repeat])


def _whole(v, name, lo):
    """v as an int >= lo (an int or an integral NumPy value; no bool), else a UsageError."""
    try:
        if isinstance(v, bool) or type(v).__name__ == "bool_":
            raise TypeError
        k = operator.index(v)
    except TypeError:
        k = None
    if k is None or k < lo or k > 65536:
        raise UsageError("usage: %s=%r: a whole number %d..65536" % (name, v, lo))
    return k


def wants_ragged(policy, layout=None, merge=None, temporal=1) -> bool:
    """Whether a batch call gives a Ragged: policy dynamic, or a token order or frames asked for
    (layout "qwen2vl", merge, temporal)."""
    return is_dynamic(policy) or layout == "qwen2vl" or merge is not None or \
        not (isinstance(temporal, int) and not isinstance(temporal, bool) and temporal == 1)


def _policy_merge(policy):
    """The merge= of a dynamic policy's canonical text, or None for another policy."""
    if not is_dynamic(policy):
        return None
    return int(re.search(r"merge=(\d+)", canonical_policy(policy)).group(1))


def ragged_layout(policy, layout, merge, temporal):
    """(the library's layout name, merge, temporal, repeat) of a batch call's layout, merge and
    temporal (see the module): layout "qwen2vl" is "flat", the dynamic policy's merge (2 for
    another policy) and temporal 2, each image given `repeat` = 2 times (temporal=1) or the frames
    in pairs (temporal=2, repeat 1)."""
    m = None if merge is None else _whole(merge, "merge", 1)
    t = _whole(temporal, "temporal", 1)
    if layout != "qwen2vl":
        return layout, m or 1, t, 1
    pm = _policy_merge(policy)
    if m is not None and pm is not None and m != pm:
        raise UsageError("usage: layout 'qwen2vl' with merge=%d, but policy '%s' has merge=%d (leave merge out)" %
                         (m, policy, pm))
    if t not in (1, 2):
        raise UsageError("usage: layout 'qwen2vl' takes temporal=1 (each image passed twice, as Qwen2-VL tiles a still "
                         "image) or temporal=2 (frames in pairs), not %d" % t)
    return "flat", m or pm or 2, 2, 2 if t == 1 else 1


def ragged_size(policy, size):
    """(out_w, out_h, the policy to run with) of a ragged call: (0, 0) for dynamic (size refused,
    as for runs), else size=(W, H) (needed; stretch when no policy is given)."""
    if is_dynamic(policy):
        _size_policy(policy, size)  # its words for a size given with dynamic
        return 0, 0, policy
    if size is None:
        raise UsageError("usage: policy %r with a token order or frames (merge, temporal, layout 'qwen2vl') resizes "
                         "every image to size=(W, H): give size" % (policy,))
    (w, h), policy = _size_policy(policy, size)
    return w, h, policy


def _decode_files(files, decoded, warned, failures=None):
    """Decodes the files (files[i] a path or None) into decoded[i] = (pointer, w, h) on a pool of
    threads (the library's decoder; ctypes releases the GIL); warnings into warned[i]. The first
    failing file in the batch's order is raised named (whichever thread finds a failure first:
    the files after a failed one are skipped, those before it still decoded). The caller frees
    what is in `decoded`, also after an error. With `failures` (a dict) every file is decoded and
    each failure goes into failures[i], named; nothing is raised."""
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
                 out=None, device=None, on_error: str = "raise", size=(0, 0), merge: int = 1, temporal: int = 1,
                 repeat: int = 1) -> Ragged:
    """ragged_batch_once, or with on_error="skip" the items that fail (a file that does not
    decode, a size the rule refuses, an image the executor refuses; with temporal frames, the
    whole item of a failing frame) left out: the result's `index` holds the kept items' indices,
    its `failures` the errors of the others (each names its image: e.index, e.file, indices of
    `images`), in the batch's order. Files are decoded once."""
    if on_error not in ("raise", "skip"):
        raise UsageError("usage: on_error=%r: 'raise' (the first failure is raised, nothing returned) or "
                         "'skip' (failed images left out, listed in failures)" % (on_error,))
    if on_error == "raise":
        return ragged_batch_once(runner, images, policy, fmt, dtype, layout, out, device, size, merge, temporal,
                                 repeat)
    np = _np()
    if not isinstance(images, (list, tuple)):
        if isinstance(images, (str, os.PathLike)) or len(getattr(images, "shape", ())) == 0:
            return ragged_batch_once(runner, images, policy, fmt, dtype, layout, out, device, size, merge,
                                     temporal, repeat)  # its usage error
        images = [images[i] for i in range(int(images.shape[0]))]
    items = list(images)
    group = temporal // repeat  # the caller's images per item
    if len(items) % group:
        return ragged_batch_once(runner, items, policy, fmt, dtype, layout, out, device, size, merge, temporal,
                                 repeat)  # its usage error
    files = [os.fspath(x) if isinstance(x, (str, os.PathLike)) else None for x in items]
    decoded, warned, failures = {}, {}, {}
    try:
        _decode_files(files, decoded, warned, failures)
        for i in sorted(warned):
            warnings.warn(warned[i], stacklevel=_caller_level())
        for i, (px, w, h) in decoded.items():  # the decoder's memory, read in place
            items[i] = np.ctypeslib.as_array((ctypes.c_uint8 * (w * h * 4)).from_address(px.value)).reshape(h, w, 4)
        keep = [g for g in range(len(items) // group) if not any(g * group + j in failures for j in range(group))]
        while keep:
            try:
                r = ragged_batch_once(runner, [items[g * group + j] for g in keep for j in range(group)], policy, fmt,
                                      dtype, layout, out, device, size, merge, temporal, repeat)
                break
            except Error as e:
                j = getattr(e, "index", None)
                if j is None:  # about no image: the call's own (out=, device=...)
                    raise
                g = keep.pop(j // group)
                i = g * group + j % group
                failures[i] = _named(e, i, files[i])
        else:
            r = _empty(runner, fmt, dtype, layout, device, temporal)
        r.index = np.array(keep, dtype=np.int64)
        r.failures = [failures[i] for i in sorted(failures)]
        kept_files = [files[g * group] for g in keep]
        r.files = kept_files if any(kept_files) else None
        return r
    finally:
        for px, _, _ in decoded.values():
            _lib.pxvm_free(px)


def ragged_shape(n, patch, fmt, layout, temporal=1):
    """The shape of n ragged tokens of temporal frames: RGBA8 tiles (fmt None) or fmt's (see the
    module); temporal 1 gives the single-frame shapes."""
    if fmt is None:
        return (n, patch, patch, 4) if temporal == 1 else (n, temporal, patch, patch, 4)
    c = 4 if fmt.alpha else 3
    if temporal == 1:
        return token_shape(n, patch, patch, c, layout)
    return {"nchw": (n, c, temporal, patch, patch), "nhwc": (n, temporal, patch, patch, c),
            "flat": (n, c * temporal * patch * patch)}[layout]


def _empty(runner, fmt, dtype, layout, device, temporal=1):
    """The Ragged of no image (every one failed under on_error="skip"), of the output's kind."""
    np = _np()
    _, patch = _plan_patch(runner)
    cuda = device is not None and str(device) != "cpu"
    shape = ragged_shape(0, patch, fmt, layout, temporal)
    if fmt is None:
        tokens = _torch().empty(shape, dtype=_torch().uint8, device=runner._torch_device) if cuda else \
            np.empty(shape, dtype=np.uint8)
    else:
        tokens = _new_output(shape, dtype, cuda, runner)[0]
    return Ragged(tokens, np.zeros(1, np.int64), np.zeros((0, 3), np.int64), np.zeros((0, 2, 2), np.int64))


def ragged_batch_once(runner, images, policy: str, fmt=None, dtype: str = "uint8", layout: str = "nchw",
                      out=None, device=None, size=(0, 0), merge: int = 1, temporal: int = 1,
                      repeat: int = 1) -> Ragged:
    """Runner.patches_batch (fmt None: RGBA8 tiles) and tokens_batch (fmt: a pxvm_token_format of
    `dtype` and `layout`, the library's layout name) as a Ragged: images is a list (or a (B, ...)
    array or tensor) of images of any sizes or paths of PNG/JPEG files (see the module), each
    passed `repeat` times to the library, whose merge and temporal (pxvm_ragged's) give the order
    and frames; size (out_w, out_h) for the policies other than dynamic ((0, 0)). One call of the
    executor writes every image's tiles into the packed output. An error of one image is raised
    as the package's error class naming its index (and file); nothing is returned then. device:
    None, the output where the images are (CUDA when one is a CUDA tensor, else the host); "cuda"
    (or a torch device of the runner's GPU): a CUDA tensor whatever the images (the cuda executor
    only)."""
    np = _np()
    _, patch = _plan_patch(runner)
    if not isinstance(images, (list, tuple)):
        if isinstance(images, (str, os.PathLike)) or len(getattr(images, "shape", ())) == 0:
            raise UsageError("usage: a ragged batch is a list of images or paths, or a (B, ...) array, not %s%s" %
                             ("a 0-d " if hasattr(images, "shape") else "", type(images).__name__))
        images = [images[i] for i in range(int(images.shape[0]))]
    if not images:
        raise UsageError("pxvm: a ragged batch needs at least one image")
    group = temporal // repeat
    if len(images) % group:
        raise UsageError("usage: temporal=%d takes the images %d frames per item: %d images are not whole items" %
                         (group, group, len(images)))
    n = _capi.c_integer(len(images) * repeat, "batch size")
    files = [os.fspath(x) if isinstance(x, (str, os.PathLike)) else None for x in images]
    policy_c = _capi.c_string(policy, "policy")
    out_w, out_h = size
    decoded, warned = {}, {}
    try:
        _decode_files(files, decoded, warned)
        for i in sorted(warned):
            warnings.warn(warned[i], stacklevel=_caller_level())
        views, on_cuda, keep = _image_views(runner, images, files, decoded)
        if repeat > 1:  # the same view `repeat` times (Qwen2-VL's still image over its temporal patch)
            rep = (_capi.View * n)()
            for i in range(n):
                rep[i] = views[i // repeat]
            views = rep
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
        rc = _lib.pxvm_ragged_plan(policy_c, patch, out_w, out_h, n, wh, out_wh,
                                   offsets.ctypes.data_as(ctypes.POINTER(ctypes.c_int64)), ctypes.byref(failed))
        if rc:
            raise _library_error(rc, failed.value, files, repeat)
        total = int(offsets[-1]) // temporal
        shape = ragged_shape(total, patch, fmt, layout, temporal)
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
        args = _capi.RaggedArgs(policy_c, patch, out_w, out_h, None if fmt is None else ctypes.pointer(fmt), ptr,
                                devno, nbytes, -1, merge, temporal)
        rc = _lib.pxvm_runner_ragged(h, n, views, ctypes.byref(args))
        if rc:
            raise _library_error(rc, args.failed, files, repeat)
    finally:
        for px, _, _ in decoded.values():
            _lib.pxvm_free(px)
    first = np.arange(0, n, temporal)  # each item's first frame, in the library's images
    ow = np.ctypeslib.as_array(out_wh).reshape(n, 2).astype(np.int64)[first]
    grid = np.stack([np.ones(len(first), np.int64), ow[:, 1] // patch, ow[:, 0] // patch], axis=1)
    given = np.ctypeslib.as_array(wh).reshape(n, 2).astype(np.int64)[first]
    item_files = [files[i // repeat] for i in first]
    return Ragged(result, offsets[::temporal] // temporal, grid, np.stack([given, ow], axis=1),
                  item_files if any(item_files) else None, merge)


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
                            out.numel(), -1, 0, 0)
    rc = _lib.pxvm_runner_ragged(handle, 1, views, ctypes.byref(args))
    del keep
    _check(rc)
    return out
