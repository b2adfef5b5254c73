"""Runners: a program loaded on an executor, run on images, batches and frames; pyramid().

One file of about 670 lines because it is one thing, the Runner class: its C runners per batch
size, the fast path's prepared calls, and its front doors (run, patches, run_batch, patches_batch,
tokens) that join the parts living beside it: the call into the library (_exec.py), reads after a
run (_reads.py), policies (policies.py), fixations (fixations.py), batches of many sizes and
on_error (_batch.py), alpha= and exif_transpose= (_options.py), the cache (_lru.py), the guard of
a call (_guard.py), the compiled fast path's loading (_nativeload.py)."""
from __future__ import annotations

import ctypes
import inspect
import os
import threading
import weakref
from typing import TYPE_CHECKING, Any

from . import _capi
from ._capi import View as _View
from .errors import Error, UsageError, Unlinkable, _check  # noqa: F401 (Error, Unlinkable: as before)
from ._arrays import _np, _is_torch, _describe, _torch, _current_stream
from ._arrays import like_images as _like_images
from ._batch import (ON_ERROR, BatchResult, _Batching, _as_ragged, _naming_paths,  # noqa: F401
                     _on_error, _path_loaded, _skipping)
from ._failures import _image_error, _is_path  # noqa: F401
from ._exec import _Exec
from ._guard import _InCall, _locked
from ._lru import _LRU, _live_lrus, _slot_bytes
from ._nativeload import _load_native
from ._options import _rgb, _with_alpha, _with_exif  # noqa: F401
from .fixations import FIXATION_UNITS, PXVM_FIX_REGS, _Fixations  # noqa: F401
from .policies import (_POLICY_HOST, _check_policy, _policy_image, _size_check, _size_policy,  # noqa: F401
                       canonical_policy, is_dynamic)
from .program import Program
from ._reads import PXVM_GEOM_INTS, _Reads  # noqa: F401 (PXVM_GEOM_INTS: pxvm's, as before)
from .ragged import image_hw, ragged_batch, ragged_layout, ragged_size, resized_on_gpu, wants_ragged
from .stream import Stream
from . import tokens as _tokens  # Runner.tokens' module, bound once (an import per call costs)

if TYPE_CHECKING:
    import numpy
    from ._arrays import Array, Batch, Fixation

_lib = _capi.lib

_native = _load_native()

_ONE_PIXEL = (ctypes.c_uint8 * 4)(0, 0, 0, 255)  # Runner._size_fits' image: one pixel, zero strides
#: a Runner keeps the C runners of at most this many batch sizes, and of at most RUNNER_BYTES of
#: slot storage (_slot_bytes) together; the least recently used go at the end of a call (the most
#: recent one stays, even alone over the bytes)
RUNNER_BATCH_SIZES = 8
RUNNER_BYTES = 512 << 20
#: pxvm.pyramid keeps the runners of at most this many image sizes, of at most PYRAMID_BYTES of
#: slot storage together (least recently used first out)
PYRAMID_SIZES = 16
PYRAMID_BYTES = 256 << 20


# Every Runner of this process, for the fork handler (_after_fork_in_child).
_live_runners = weakref.WeakSet()


def _after_fork_in_child():
    """In a forked child: a Runner another thread of the parent was using has its lock held by a
    thread that is not here, and its C runners in the middle of that call. Its lock is made again
    and its C runners are left alone (never closed: the parent's state; the next call opens new
    ones), so the child's calls run instead of waiting forever. A Runner the forking thread itself
    is inside keeps its lock (this thread releases it). The caches' locks (guarding a dict for a
    few lines, never held across a call) are made again too: another thread may have held one."""
    for lru in list(_live_lrus):
        lru._lock = threading.Lock()
    for r in list(_live_runners):
        try:
            if r.lock._is_owned():
                continue
        except AttributeError:  # an RLock without _is_owned: made again all the same
            pass
        r.lock = threading.RLock()
        if r._calls:
            r._calls = 0
            r._runners = _LRU(RUNNER_BATCH_SIZES, RUNNER_BYTES, trim_on_put=False)
            r._prepared, r._stream, r._lent, r._largest = {}, {}, {}, {}


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


# ---- runners --------------------------------------------------------------------------------------

def _executor_device(executor, device):
    """(executor name, CUDA device) from Runner's arguments: "cuda:N" and a torch.device("cuda", N)
    name device N as torch does (device= then either left at 0 or equal: two devices are a
    UsageError naming both); other names pass as they are (the library checks them)."""
    kind, index = getattr(executor, "type", None), getattr(executor, "index", None)
    if kind is not None and not isinstance(executor, str):  # a torch.device
        executor = kind if index is None else "%s:%d" % (kind, index)
    if isinstance(executor, str) and executor.startswith("cuda:"):
        n = executor[5:]
        if not n.isdigit():
            raise UsageError("usage: executor %r: 'cuda:N' takes a device number N" % executor)
        if device not in (0, int(n)):
            raise UsageError("usage: executor %r and device=%r name two devices" % (executor, device))
        return "cuda", int(n)
    if executor == "cpu" and device != 0:  # an option that would do nothing, as pxrun --device on the CPU
        raise UsageError("usage: device=%r is a CUDA device: the cpu executor takes none" % (device,))
    return executor, device


def _signature_of(fn):
    """The method shows fn's parameters (help(), inspect.signature), fn(runner, ...) being what it
    calls with self: a method that passes **kwargs on still lists every option it takes."""
    sig = inspect.signature(fn)
    params = list(sig.parameters.values())
    params[0] = params[0].replace(name="self")

    def apply(method):
        method.__signature__ = sig.replace(parameters=params)  # functools.wraps carries it outwards
        return method
    return apply


class Runner(_Exec, _Reads, _Fixations, _Batching):
    """A program loaded on an executor: "cpu", "cuda" (CUDA-GL), "cuda:N" (device N, as torch names
    it; a torch.device too) or "auto" (cuda when it opens here).

    run(**inputs) -> {output slot name: (H, W, 4)}; patches(image) -> (N, h, w, 4);
    run_batch(images) -> {name: (B, H, W, 4)}; patches_batch(images) -> (B, N, h, w, 4).
    A runner keeps its slots loaded per batch size (the first call with a new size loads them:
    milliseconds on the GPU), so repeated calls cost only the run: for the RUNNER_BATCH_SIZES most
    recently used batch sizes, within RUNNER_BYTES of slot storage (the others are closed when a
    call ends, and opened again when used).

    program: a Program, the path of a .pxi file or of a .json plan (Program.from_plan); device: the CUDA device; threads: CPU worker
    threads (0: all cores). The executor opens at once (.executor is then "cpu" or "cuda";
    Unavailable says why "cuda" cannot open). A runner is a context manager (close()).
    In the annotations, Array is a uint8 NumPy array or torch tensor (host or CUDA), Batch an
    Array with a leading B axis or a list of Arrays, Fixation (x, y), (K, 2), (B, 2) or (B, K, 2)
    (a sequence, array or tensor), "saliency" or None. An image may also be the path of a PNG or
    JPEG file (str or os.PathLike; in a batch, list items), for every policy: it is decoded by
    load_image, as pxrun --in decodes it, and an error of the call names the file.

    Fixations are normalized coordinates of the program's first input slot (W x H; for an
    any-size input, the size of the image bound to it in that run): x and y in
    [0, 1], (0, 0) its top-left corner, (1, 1) its bottom-right one, (0.5, 0.5) its middle; as
    pxrun --fixation and the C API take them (isa/SPEC.md section 6). Register k of a (K, 2) array
    becomes floor(x * W * 65536 + 0.5) (Q16 texels, in float64, one operation at a time).
    fixation_units="texels" takes level-0 texels instead, x in [0, W] and y in [0, H]. A value out
    of range (or NaN) is a UsageError naming it (fixation_clamp=True clamps instead); a fixation
    for a register the program does not read before ARGMAX writes it is a UsageError; running a
    program that takes fixations before each of its input registers was given one is Unlinkable.

    Threads: a runner may be shared; each call holds `lock` (a threading.RLock) for its whole
    bind, run and read, so calls of two threads take turns. Hold `lock` yourself to make several
    calls one unit (e.g. run, then geometry of that run) while other threads use the runner.
    close() from inside a call (a callback of it: an input's __array__, a torch mode) is a
    UsageError: a runner is never freed while a call into it is in flight.

    fuse_embed=True (off by default; docs/embed.md): every EMBED whose atlas only feeds it (a
    scratch atlas written only by SAMPLE, ANISO and GATHER before it, read by nothing else: SPEC
    "Fused EMBED") takes its tokens from the sampler; on cuda its atlas is never written. EMBED's
    bytes are the same; reading such an atlas (read, patches, tokens of it) is then, and after a
    run with it until a run without it succeeds, a UsageError naming the slot, on both executors. A program with
    no such EMBED is a UsageError here, naming the EMBED and the rule its atlas breaks."""

    def __init__(self, program: Program | str | os.PathLike, executor: str = "cpu", device: int = 0,
                 threads: int = 0, fuse_embed: bool = False) -> None:
        if not isinstance(program, Program):  # a .json file is a plan, as pxrun and pxbatch take it
            program = Program.from_plan(program) if str(program).endswith(".json") else Program.load(program)
        self.program = program
        executor, device = _executor_device(executor, device)
        #: held by every call that uses the library's runners (see the class)
        self.lock = threading.RLock()
        self.device = _capi.c_integer(device, "device")
        self.threads = _capi.c_integer(threads, "threads")
        self._calls = 0  # calls in flight (_InCall): close() refuses while any is
        _live_runners.add(self)
        #: the any-size inputs, whose storage grows with the largest image bound (_count_grown)
        self._grows = [s.index for s in program.slots if s.any_size]
        self._largest = {}  # {(batch, slot): the largest (w, h) bound}
        #: {batch size: (C runner handle, executor name)}, bounded (RUNNER_BATCH_SIZES, RUNNER_BYTES)
        self._runners = _LRU(RUNNER_BATCH_SIZES, RUNNER_BYTES, trim_on_put=False)
        self._stream = {}
        self._bufs = {}
        # {(batch, slot): (the input of the last run that succeeded, the input of a failed one since or
        # None)}: a slot may read either in place until a later run succeeds (the library unbinds what
        # a failed call bound, an older one kept it bound: kept alive both ways, never a freed array)
        self._lent = {}
        self._prepared = {}  # {call key: _native.Call}: repeats of the last call's shapes (see _prepare)
        self._torch_device = "cuda:%d" % self.device
        #: the program's input registers, bit k for register k (0: it takes no fixations)
        self.fixation_inputs = _lib.pxvm_prog_fixation_inputs(program._h)
        if not isinstance(fuse_embed, bool):
            raise UsageError("usage: fuse_embed must be True or False, not %r" % (fuse_embed,))
        self._fuse_embed = fuse_embed  # pxvm_runner_fuse_embed on every C runner (every batch size)
        self.executor = executor
        self.executor = self._runner(1)[1]  # opens now: "auto" resolves, errors surface here

    @property
    def fuse_embed(self) -> bool:
        """Whether EMBED is fused with the sampler (the constructor's choice, fixed for the runner:
        every batch size's C runner takes it when it opens)."""
        return self._fuse_embed

    def _runner(self, batch):
        r = self._runners.get(batch)
        if r is None:
            h = ctypes.c_void_p()
            _check(_lib.pxvm_runner_open(self.program._h, _capi.c_string(self.executor, "executor"), self.device,
                                         self.threads, _capi.c_integer(batch, "batch"), ctypes.byref(h)))
            # the arrays lent to a call stay referenced (_lent, the fast path's) until replaced,
            # so its borrows may last until the next bind: reads of an input read the array
            _check(_lib.pxvm_runner_keep_borrows(h, 1))
            if self._fuse_embed:
                try:
                    _check(_lib.pxvm_runner_fuse_embed(h, 1))
                except Error:  # the exception holds the message: the runner goes
                    _lib.pxvm_runner_close(h)
                    raise
            r = self._runners.put(batch, (h, _lib.pxvm_runner_executor(h).decode()), _slot_bytes(self.program, batch))
        return r

    def _in_call(self):
        """The guard of a call into this runner (_InCall: Runner.lock, close() refused meanwhile)."""
        return _InCall(self)

    def _close_runner(self, batch, h):
        """Closes the C runner of `batch` items and forgets what was set on it or lent to it."""
        if batch == 1:
            self._prepared = {}  # prepared calls hold the batch-1 handle
        self._stream.pop(batch, None)
        for key in [k for k in self._lent if k[0] == batch]:
            del self._lent[key]
        for key in [k for k in self._largest if k[0] == batch]:
            del self._largest[key]
        _lib.pxvm_runner_close(h)

    def _count_grown(self):
        """The C runners' bytes in their cache counted at the largest size each any-size input took
        (the storage a runner keeps: RUNNER_BYTES then bounds what they really hold)."""
        w, h = ctypes.c_int(), ctypes.c_int()
        for batch, (handle, _) in self._runners.items():
            sizes = {}
            for k in self._grows:
                if _lib.pxvm_runner_slot_size(handle, k, ctypes.byref(w), ctypes.byref(h)) == 0:
                    pw, ph = self._largest.get((batch, k), (0, 0))
                    sizes[k] = self._largest[(batch, k)] = (max(pw, w.value), max(ph, h.value))
            self._runners.grow(batch, _slot_bytes(self.program, batch, sizes))

    def _trim_runners(self):
        """The C runners of the least recently used batch sizes closed down to the bound
        (RUNNER_BATCH_SIZES, RUNNER_BYTES): at the end of the outermost call (_InCall)."""
        for batch, (h, _) in self._runners.trim():
            self._close_runner(batch, h)

    def __reduce__(self):
        raise TypeError("pxvm: a Runner holds an executor's memory and cannot be pickled: make a Runner in each "
                        "process from the program's file or plan (the datasets pickle that way)")

    def close(self) -> None:
        """Releases the executor's resources (also on leaving a with block, or when collected);
        a later call opens them again.

        Closing from inside a call into this runner (a callback the call makes: an input's
        __array__, a torch function mode, an __index__ of a dirty rectangle or a fixation) is a
        UsageError and closes nothing: the call still uses the runner. Another thread's close()
        waits for the call to end (Runner.lock)."""
        with self.lock:
            if self._calls:
                raise UsageError("usage: Runner.close: a call into this runner is under way (close() was called from "
                                 "inside it, e.g. by an input's __array__ or a torch mode); close it after the call "
                                 "returns")
            for batch, (h, _) in self._runners.items():
                self._runners.pop(batch)
                self._close_runner(batch, h)

    def __enter__(self) -> Runner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def __repr__(self) -> str:
        return "Runner(%r, executor=%r)" % (self.program, self.executor)

    # -- the compiled fast path: a repeat of a call's shapes skips _exec (PXVM_NO_NATIVE=1: never)
    def _fast_key(self, name, image, inputs, fixation, units, policy, *more):
        """The key of a call the fast path takes (one positional image, batch 1, no fixation, no
        policy), or None."""
        if _native is None or len(image) != 1 or inputs or fixation is not None or policy is not None \
                or units != "normalized" or _is_path(image[0]):
            return None
        return (name, *more)

    def _prepare(self, key, x, outs, out, tokens=None):
        """After _exec ran input x (batch 1) into outs [(slot, kind)] (into the arrays `out`, or new
        ones): the prepared call of those arrays' shapes, strides, dtypes and devices (nothing for
        arrays other than NumPy arrays and torch tensors). tokens (Runner.tokens, outs []): (atlas
        slot, TokenFormat, destination device, alloc): the call also reads the tokens after the run,
        into out[0], or into a new array that alloc = (kind, fn, args, kwargs) makes per call."""
        nin, nout = 1, len(outs)
        in_slots, in_items, in_views, out_slots, out_kinds, out_views = self._bufs[(1, nin, nout)]

        def arg(a, view):
            if _is_torch(a):
                torch = _torch()
                if type(a) is torch.Tensor:
                    return view, 1, tuple(a.shape), tuple(a.stride()), a.get_device(), torch.Tensor, a.dtype
            elif type(a) is _np().ndarray:
                return view, 0, a.shape, a.strides, -1, None, None, memoryview(a).format, a.itemsize
            return None
        args = [arg(x, 0)] + [arg(a, nin + i) for i, a in enumerate(out or ())]
        if None in args:
            return
        on_cuda = args[0][4] >= 0
        allocs = []
        for i, (k, kind) in enumerate([] if out else outs):
            s = self.program.slots[k]
            shape = (s.patch_count, s.patch_h, s.patch_w, 4) if kind else (s.h, s.w, 4)
            if on_cuda:
                torch = _torch()
                allocs.append((nin + i, 1, torch.empty, (shape,), {"dtype": torch.uint8, "device": self._torch_device}))
            else:
                allocs.append((nin + i, 0, _np().empty, (shape, _np().uint8), None))
        tok = None
        if tokens is not None:
            slot, fmt, devno, alloc = tokens
            if (devno >= 0) != on_cuda:  # the ctypes path sets the read's stream apart: it keeps this case
                return
            if alloc is not None:
                allocs.append((nin + nout,) + tuple(alloc))
            tok = (slot, bytes(fmt), devno)
        stream_fn = on_cuda and (getattr(_torch()._C, "_cuda_getCurrentRawStream", None) or _current_stream)
        self._prepared[key] = _native.prepare(
            self._runners.get(1)[0].value, tuple(in_slots[:nin]), tuple(in_items[:nin]),
            ctypes.string_at(in_views, ctypes.sizeof(_View) * nin), tuple(out_slots[:nout]), tuple(out_kinds[:nout]),
            ctypes.string_at(out_views, ctypes.sizeof(_View) * nout), tuple(args), tuple(allocs),
            (self._stream if self.executor == "cuda" else None, 1, on_cuda, stream_fn or None, self.device), tok)

    def _sync_stream(self, batch):
        """The library orders its work after torch's current stream and the stream after its work."""
        h = self._runner(batch)[0]
        handle = _current_stream(self.device) or 1  # 0: the legacy default stream, cudaStreamLegacy
        if self._stream.get(batch) != handle:
            _check(_lib.pxvm_runner_set_stream(h, ctypes.c_void_p(handle)))
            self._stream[batch] = handle

    def stream(self, slot: str | int | None = None) -> Stream:
        """A frame stream over this runner (programs with persistent slots, e.g. plans with
        "video": T): push(frame) runs the program on the next frame and returns
        (patches, changed), changed a (N,) bool array or tensor (True: the token was sampled
        again; False: its bytes are the previous frame's, its cached embedding still holds)."""
        return Stream(self, slot)

    def _named_slots(self, inputs):
        """{keyword: its Slot}: keywords that are no option of the call are taken as slot names;
        one that names no slot of the program is a misspelt or misplaced option: a UsageError
        naming it, before anything else is said about the inputs."""
        named = {}
        for key in inputs:
            k = _lib.pxvm_prog_slot_find(self.program._h, _capi.c_string(str(key), "slot"))
            if k < 0:
                raise UsageError("usage: unknown keyword argument '%s': no option of this call, and the program has "
                                 "no slot '%s' (its inputs: %s)" %
                                 (key, key, ", ".join(s.name for s in self.program.inputs)))
            named[key] = self.program.slots[k]
        return named

    def _inputs(self, args, kwargs):
        named = self._named_slots(kwargs)
        ins = self.program.inputs
        if args:
            if len(args) > 1 or len(ins) != 1 or kwargs:
                raise UsageError("usage: give inputs by slot name (%s)" % ", ".join(s.name for s in ins))
            return {ins[0].index: _path_loaded(args[0])}
        bound = {}
        for key, x in kwargs.items():
            bound[named[key].index] = _path_loaded(x)
        missing = [s.name for s in ins if s.index not in bound]
        if missing:
            raise Unlinkable("unlinkable: input slot '%s' is not bound to an image" % missing[0])
        return bound

    def _sized(self, policy, size):
        """size=(W, H) checked against policy and this program: (size, the policy to run with)."""
        size, policy = _size_policy(policy, size)
        _size_check(self.program, size)
        return size, policy

    def _apply_policy(self, bound, policy, batched, size=None):
        """bound {slot: image, batch or list} with every image of another size than its slot resized
        by `policy` on the host (a batch becomes a list of its items when one is resized); with
        size (from _sized), an any-size input's images are resized to it instead."""
        policy = _check_policy(policy)
        if size is not None:  # before any image is resized to it
            (x, *_), b = bound.values(), 1
            if batched:
                b = len(x) if isinstance(x, (list, tuple)) else int(x.shape[0])
            self._size_fits(size, b)
        if policy == "native" and not any(s.any_size for s in self.program.inputs):
            raise UsageError("usage: policy native: the program has no any-size input; use fit or stretch")
        if policy is None or policy in ("exact", "native"):
            return bound
        if is_dynamic(policy):
            raise UsageError("usage: policy %r: dynamic gives each image its own token grid: use patches or "
                             "patches_batch (a Ragged result)" % policy)
        slots = self.program.slots
        res = {}
        resize = self._policy_image
        for k, x in bound.items():
            s = slots[k]
            w, h = size if size is not None and s.any_size else (s.w, s.h)
            if isinstance(x, (list, tuple)):
                res[k] = [resize(xi, w, h, policy) for xi in x]
            elif batched:
                res[k] = [resize(x[i], w, h, policy) for i in range(int(x.shape[0]))]
            else:
                res[k] = resize(x, w, h, policy)
        return res

    def _policy_image(self, x, w, h, policy):
        """One image for a w x h slot by `policy`, resized where it is: a CUDA tensor on the cuda
        executor's GPU (ragged.resized_on_gpu: it stays there, and so do the outputs), a host image
        on the host (_policy_image: host in, host out); x itself when it is already w x h."""
        if image_hw(x) == (h, w) and not policy.startswith("crop"):  # bound as it is (crop: by its rule)
            return x
        if self.executor == "cuda" and _describe(x).device != -1:
            return resized_on_gpu(self, x, w, h, policy)
        return _policy_image(x, w, h, policy)

    def _size_fits(self, size, batch):
        """size=(W, H) (from _sized: within the program's bounds) resolved on the runner of `batch`
        items before any image is resized to it: a size its limits refuse (max_side, max_memory)
        is the library's error at once, in pxrun's words (pxrun --size refuses it before decoding).
        A one-pixel view with zero strides stands for the W x H image of every item (the items of a
        batch share an any-size input's size, so all are bound at once): the resolution is checked
        first, then the bind copies that pixel (the real images are bound at that size next)."""
        w, h = size
        handle = self._runner(batch)[0]
        for s in self.program.inputs:
            if s.any_size and self.slot_size(s.index, batch) != (w, h):
                v = _View(ctypes.addressof(_ONE_PIXEL), -1, batch, w, h, 4, 0, 0, 0, 1)
                _check(_lib.pxvm_runner_bind(handle, s.index, 0, ctypes.byref(v)))

    def _dynamic_only(self, **given):
        """Policy dynamic returns Ragged tokens: options it cannot honour are refused, never ignored."""
        self._named_slots(given.get("inputs") or {})
        bad = [k for k, v in given.items() if v is not None and v is not False and not (isinstance(v, dict) and not v)]
        if bad:
            raise UsageError("usage: policy dynamic does not take %s (each image has its own grid)" %
                             ", ".join(bad))

    def _atlas(self, slot):
        if slot is not None:
            s = self.program.slot(slot)
            if not s.patch_count:
                raise UsageError("usage: slot '%s' is no patch atlas" % s.name)
            return s
        for s in self.program.slots:
            if s.patch_count and s.role == "output":
                return s
        raise UsageError("usage: the program has no patch atlas output")

    @_with_exif
    @_like_images()
    @_naming_paths(batched=False)
    @_locked
    def run(self, *image: Array, fixation: Fixation = None, fixation_units: str = "normalized",
            fixation_clamp: bool = False, policy: str | None = None, size: tuple[int, int] | None = None,
            **inputs: Array) -> dict[str, Array]:
        """Runs once: {output slot name: level 0 as (H, W, 4)}.

        fixation: for fixation-relative programs, (x, y) normalized to the first input slot, x and
        y in [0, 1] (register 0; a (K, 2) array sets registers 0..K-1), host values or a CUDA
        tensor (converted on the device); fixation_units="texels" for level-0 texels (x in [0, W],
        y in [0, H]); fixation_clamp=True clamps values into that range (NaN: its middle) instead
        of refusing them, and on the device skips the check's read-back. "saliency" for programs
        that find their own fixations. Fixations stay set for later runs until set again;
        changing them reloads nothing.

        policy: a resolution policy for host images (NumPy, or torch on the CPU) of another size
        than their input slot: "exact" (None, the default: another size is Unlinkable),
        "stretch[:FILTER]" or "fit[:FILTER][:PAD]" (docs/policies.md), e.g.
        "fit:bicubic". Such an image is resized on the host through the library (pxvm_image_fit:
        RESIZE's bytes, Pillow's) into a new array, so it is copied; an image of the slot's size
        is bound as it is. CUDA tensors with a policy are a UsageError: resize them with a program
        that has RESIZE.

        size: (W, H) for an any-size program (pxrun --size): every image is brought to W x H by
        policy (stretch, the default with size, or fit) and the program runs its resolution at W x
        H. A UsageError with a fixed-size program (its slot's size is the only size), with policy
        native, exact or dynamic (they decide the size), or outside the input's bounds."""
        size, policy = self._sized(policy, size)
        outs = self.program.outputs
        key = self._fast_key("run", image, inputs, fixation, fixation_units, policy)
        call = self._prepared.get(key) if key else None
        res = call.run(image[0]) if call else None
        if res is not None:
            return {s.name: r for s, r in zip(outs, res if len(outs) != 1 else (res,))}
        res = self._exec(self._apply_policy(self._inputs(image, inputs), policy, False, size), 1, [(s.index, 0) for s in outs], fixation=fixation,
                         units=fixation_units, clamp=fixation_clamp)
        if key:
            self._prepare(key, image[0], [(s.index, 0) for s in outs], None)
        return {s.name: r[0] for s, r in zip(outs, res)}

    @_with_alpha
    @_with_exif
    @_like_images()
    @_naming_paths(batched=False)
    @_locked
    def patches(self, *image: Array, slot: str | int | None = None, out: Array | None = None,
                fixation: Fixation = None, with_geometry: bool = False, fixation_units: str = "normalized",
                fixation_clamp: bool = False, policy: str | None = None, size: tuple[int, int] | None = None,
                **inputs: Array) -> Array | tuple[Array, Array]:
        """Runs once: the patches of the (first) atlas output, (N, h, w, 4). With `out` (a
        C-contiguous uint8 array or tensor of that shape, on the inputs' device) the patches are
        written there instead of into a new array. fixation, fixation_units, fixation_clamp: as
        for run. with_geometry: returns (patches, geometry (N, 4)) with geometry as
        Runner.geometry gives it, on the same device. policy: as for run, or "dynamic..." (a
        program from a "uniform" plan): the (N, p, p, 4) tokens of the image's own grid (see
        patches_batch). size: as for run."""
        size, policy = self._sized(policy, size)
        if is_dynamic(policy):
            self._dynamic_only(fixation=fixation, with_geometry=with_geometry, slot=slot)
            if len(image) != 1 or inputs:
                raise UsageError("usage: policy dynamic takes one image, given as the first argument")
            return ragged_batch(self, [image[0]], policy, out=out)[0]
        s = self._atlas(slot)
        key = self._fast_key("patches", image, inputs, fixation, fixation_units, policy, s.index, out is None)
        call = self._prepared.get(key) if key else None
        p = None if not call else call.run(image[0]) if out is None else call.run(image[0], out)
        if p is None:
            res = self._exec(self._apply_policy(self._inputs(image, inputs), policy, False, size), 1, [(s.index, 1)], out=None if out is None else [out[None]],
                             fixation=fixation, units=fixation_units, clamp=fixation_clamp)
            if key:
                self._prepare(key, image[0], [(s.index, 1)], None if out is None else [out])
        p = out if out is not None else p if p is not None else res[0][0]
        if with_geometry:
            return p, self.geometry(s.index, 1, device="cuda" if _is_torch(p) and p.is_cuda else None)[0]
        return p

    @_with_exif
    @_like_images()
    @_naming_paths(batched=True)
    @_locked
    def run_batch(self, images: Batch | None = None, fixations: Fixation = None, fixation_units: str = "normalized",
                  fixation_clamp: bool = False, policy: str | None = None, size: tuple[int, int] | None = None,
                  on_error: str = "raise", **inputs: Batch) -> dict[str, Array]:
        """Runs the program on a batch (a (B, ...) array or tensor, or a list): {name: (B, H, W, 4)}.
        On the GPU each plan step is one launch for the whole batch. fixations: (B, 2) (or
        (B, K, 2)) normalized to the first input, one per item, host or CUDA (converted on the
        device), or "saliency"; fixation_units, fixation_clamp: as for run.

        policy: as for run; with a policy, `images` may be a list of host images of different
        sizes: each is resized (on the host, a copy) to the slot's size, then one batch runs.
        Into an any-size input with no resizing policy (None, "native", "exact") a list of
        images of different sizes runs as one batch per size, the results in the list's order.
        size: as for run (every image brought to it, then one batch).

        on_error="skip": the images that fail (a file that does not decode, a size the program
        does not take) are left out: a BatchResult, the kept images' outputs with .index and
        .failures as a Ragged's (see _skipping); "raise" (the default): the first failure raised."""
        if _on_error(on_error, {"named inputs (give images=)": inputs}):
            res, keep, failures, _ = _skipping(
                lambda im, fx: self.run_batch(im, fx, fixation_units=fixation_units, fixation_clamp=fixation_clamp,
                                              policy=policy, size=size), images, fixations)
            np = _np()
            out = BatchResult(res if res is not None else
                              {s.name: np.empty((0, 0, 0, 4), dtype=np.uint8) for s in self.program.outputs})
            out.index, out.failures = np.array(keep, dtype=np.int64), failures
            return out
        size, policy = self._sized(policy, size)
        bound, b = self._batch_inputs(images, inputs)
        groups = self._size_groups(bound, policy)
        if groups:  # images of several sizes into an any-size input: one batch per size
            (name,), order = [self.program.slots[k].name for k in bound], list(groups.values())
            (items,) = bound.values()
            parts = self._by_size(lambda idx: self.run_batch(fixations=self._take(fixations, idx),
                                                             fixation_units=fixation_units, fixation_clamp=fixation_clamp,
                                                             **{name: [items[i] for i in idx]}),
                                  order, images if images is not None else inputs.get(name))
            return {s.name: self._gather([p[s.name] for p in parts], order, b) for s in self.program.outputs}
        bound = self._apply_policy(bound, policy, True, size)
        outs = self.program.outputs
        res = self._exec(bound, b, [(s.index, 0) for s in outs], batched=True, fixation=fixations,
                         units=fixation_units, clamp=fixation_clamp)
        return {s.name: r for s, r in zip(outs, res)}

    @_with_alpha
    @_with_exif
    @_like_images()
    @_naming_paths(batched=True)
    @_locked
    def patches_batch(self, images: Batch | None = None, slot: str | int | None = None, out: Array | None = None,
                      fixations: Fixation = None, with_geometry: bool = False, fixation_units: str = "normalized",
                      fixation_clamp: bool = False, policy: str | None = None, size: tuple[int, int] | None = None,
                      device: str | None = None, on_error: str = "raise", merge: int | None = None,
                      temporal: int = 1, **inputs: Batch) -> Array | tuple[Array, Array]:
        """The atlas's patches for a batch: (B, N, h, w, 4) (into `out` when given, as patches);
        fixations, fixation_units, fixation_clamp and with_geometry ((B, N, 4)) as for run_batch
        and patches. policy: as for run_batch, or "dynamic[:KEYS][:FILTER]" for a program compiled
        from a "uniform" plan: each image gets its own token grid, and the result is a
        pxvm.ragged.Ragged (packed tokens, offsets, grid, sizes, position_ids; images may also be
        paths of PNG/JPEG files, or CUDA tensors on the cuda executor), the whole batch one call
        of the executor, into `out` (sum N_i, p, p, 4) when given; see python/pxvm/ragged.py and
        docs/policies.md, Ragged batches. Into an
        any-size input, images of different sizes need no policy (one batch per size, as run_batch).
        size: as for run_batch. on_error="skip": the images that fail are left out and the result
        is a Ragged for every policy (a fixed count N: offsets i * N, grid (1, 1, N)) whose index
        and failures say which; "raise" (the default): the first failure raised, naming its image.
        merge (None: row-major; m: Qwen2-VL's m x m window order) and temporal (T frames per
        tile, the images T per item, (N, T, p, p, 4)) give a Ragged for any policy (dynamic, or
        another with size=(W, H)); see python/pxvm/ragged.py."""
        if wants_ragged(policy, None, merge, temporal):
            _, m, t, _ = ragged_layout(policy, None, merge, temporal)
            out_w, out_h, policy = ragged_size(policy, size)
            self._dynamic_only(fixations=fixations, with_geometry=with_geometry, slot=slot, inputs=inputs)
            return ragged_batch(self, images, policy, out=out, device=device, on_error=on_error, size=(out_w, out_h),
                                merge=m, temporal=t)
        size, policy = self._sized(policy, size)
        if device is not None:
            raise UsageError("usage: device= is for policy dynamic (other patches follow their images' device)")
        if _on_error(on_error, {"out=": out is not None, "with_geometry": with_geometry,
                                "named inputs (give images=)": inputs}):
            s = self._atlas(slot)
            res, keep, failures, files = _skipping(
                lambda im, fx: self.patches_batch(im, slot=slot, fixations=fx, fixation_units=fixation_units,
                                                  fixation_clamp=fixation_clamp, policy=policy, size=size),
                images, fixations)
            return _as_ragged(res, keep, failures, files,
                              lambda: _np().empty((0, s.patch_h, s.patch_w, 4), dtype=_np().uint8))
        bound, b = self._batch_inputs(images, inputs)
        groups = self._size_groups(bound, policy)
        if groups:  # images of several sizes into an any-size input: one batch per size
            (name,), order = [self.program.slots[k].name for k in bound], list(groups.values())
            (items,) = bound.values()
            parts = self._by_size(lambda idx: self.patches_batch(slot=slot, fixations=self._take(fixations, idx),
                                                                 with_geometry=with_geometry,
                                                                 fixation_units=fixation_units,
                                                                 fixation_clamp=fixation_clamp,
                                                                 **{name: [items[i] for i in idx]}),
                                  order, images if images is not None else inputs.get(name))
            if with_geometry:
                p, g = self._gather([q[0] for q in parts], order, b), self._gather([q[1] for q in parts], order, b)
            else:
                p, g = self._gather(parts, order, b), None
            if out is not None:
                out[...] = p
                p = out
            return (p, g) if with_geometry else p
        bound = self._apply_policy(bound, policy, True, size)
        s = self._atlas(slot)
        p = self._exec(bound, b, [(s.index, 1)], batched=True, out=None if out is None else [out], fixation=fixations,
                       units=fixation_units, clamp=fixation_clamp)[0]
        if with_geometry:
            return p, self.geometry(s.index, b, device="cuda" if _is_torch(p) and p.is_cuda else None)
        return p

    @_with_exif
    @_like_images()
    @_naming_paths(batched=False)
    @_locked
    @_signature_of(_tokens.tokens)
    def tokens(self, *image: Array, **kwargs: Any) -> Any:
        """Runs once: the atlas's tokens as a normalized float tensor for a model, e.g.
        tokens(image, dtype="bfloat16", normalize="siglip", layout="nchw", alpha=False, out=None,
        fixation=None) -> (N, 3, p, p). See pxvm.tokens.tokens."""
        return _tokens.tokens(self, *image, **kwargs)

    @_with_exif
    @_like_images()
    @_naming_paths(batched=True)
    @_locked
    @_signature_of(_tokens.tokens_batch)
    def tokens_batch(self, images: Batch | None = None, fixations: Fixation = None, **kwargs: Any) -> Any:
        """Runs once on a batch: every item's tokens, (B, N, 3, p, p), each item's as tokens()
        gives them, e.g. tokens_batch(images, fixations=(B, 2), dtype="bfloat16"). See
        pxvm.tokens.tokens_batch."""
        return _tokens.tokens_batch(self, images, fixations, **kwargs)

    @_locked
    def positions(self, slot: str | int | None = None, t: int = 0) -> Any:
        """Every token's position after the last run (centre, step, level, normalized, grid ids,
        (t, h, w) rope ids): a pxvm.tokens.Positions. See pxvm.tokens.positions."""
        return _tokens.positions(self, slot, t)


# ---- convenience ----------------------------------------------------------------------------------

_pyramid_cache = _LRU(PYRAMID_SIZES, PYRAMID_BYTES)


@_like_images(skip=0)
def pyramid(image: Array, executor: str = "cpu", device: int = 0) -> list[numpy.ndarray]:
    """The full mip chain of an image under the PYRAMID rule ((a+b+c+d+2)>>2 per 2x2 block, OpenGL
    sizes), computed by the VM: a list of (h, w, 4) arrays, level 0 first."""
    a = _describe(image)
    sh = list(a.shape)
    if len(sh) == 2 or (len(sh) == 3 and sh[2] in (1, 3, 4)):
        h, w = sh[0], sh[1]
    elif len(sh) == 3 and sh[0] in (1, 3, 4):
        h, w = sh[1], sh[2]
    else:
        raise UsageError("pxvm: images are (H, W), (H, W, C) or (C, H, W) with C in 1, 3, 4; got %s" % (tuple(sh),))
    key = (w, h, executor, device)
    r = _pyramid_cache.get(key)
    if r is None:
        prog = Program.assemble(".width 16\n.slot image input %dx%d\nPYRAMID image\nHALT\n" % (w, h), "<pyramid>")
        r = _pyramid_cache.put(key, Runner(prog, executor=executor, device=device), _slot_bytes(prog))
    if a.device == -1:
        with r._in_call():  # the cached runner may be another thread's too: its run and reads as one unit
            r._exec({1: image}, 1, [])
            s = r.program.slots[1]
            return [r.read(1, l)[0] for l in range(s.levels)]
    raise UsageError("usage: pxvm.pyramid takes host images (use a Runner with executor='cuda' for tensors)")
