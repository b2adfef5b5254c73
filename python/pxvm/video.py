"""Video files: their frames as (H, W, 3) uint8 arrays, every frame or sampled as Qwen2-VL's video
input samples them, through the library's FFmpeg reader (include/pxvm.h, "video files": the
frames pxrun --frames reads, byte for byte).

    import pxvm
    pxvm.video.info("clip.avi")                   # VideoInfo(width=768, height=576, frames=795, fps=10.0)
    for frame in pxvm.video.frames("clip.avi"):   # every frame, NumPy (H, W, 3) uint8
        ...
    clip = pxvm.video.frames("clip.avi", fps=2.0) # Qwen2-VL's sampling: clip.indices, len(clip)
    batch = numpy.stack(list(clip))

Sampling (fps= or count=) is qwen-vl-utils' fetch_video (version 0.0.10, QwenLM/Qwen2.5-VL,
qwen-vl-utils/src/qwen_vl_utils/vision_process.py, smart_nframes and _read_video_torchvision):
with fps, nframes = floor_by_factor(min(min(max(total / video_fps * fps, min_frames), max_frames),
total), 2) where min_frames = ceil_by_factor(4, 2) and max_frames = floor_by_factor(min(768, total),
2); with count, nframes = round_by_factor(count, 2); then the frames at
torch.linspace(0, total - 1, nframes).round(). Frames between the samples are decoded and dropped
(no seeking: a seek lands on a key frame, and exact frames need the decode anyway), without the
conversion to RGB.
"""
from __future__ import annotations

import ctypes
import json
import math
import os
from typing import TYPE_CHECKING, Iterator, NamedTuple

from . import _capi
from .errors import Malformed, UsageError, _check
from ._arrays import _np, _torch
from .image import PXVM_DECODE_LENIENT, _limits
from .policies import _size_check
from .program import Program

if TYPE_CHECKING:
    import numpy

_lib = _capi.lib

FRAME_FACTOR = 2  # qwen-vl-utils: frames come in pairs (Qwen2-VL's temporal patch)
FPS = 2.0
FPS_MIN_FRAMES = 4
FPS_MAX_FRAMES = 768


class VideoInfo(NamedTuple):
    width: int
    height: int
    frames: int | None  # the count the container declares (None: none), which may not be the frames
    # decoded: tree.avi declares 444, of which 376 are empty AVI chunks ("repeat the last frame"),
    # and decodes to 68 frames, as FFmpeg, PyAV and torchvision's read_video give them
    fps: float | None   # the average frame rate; None: unknown


class _Video:
    """An open pxvm_video handle (closed by close() or when collected)."""

    def __init__(self, path, lim):
        self.path, self.h = os.fspath(path), None
        h = ctypes.c_void_p()
        _check(_lib.pxvm_video_open(_capi.c_string(path, "path", path=True), ctypes.byref(lim), ctypes.byref(h)))
        self.h = h
        w, hh, n, fps = ctypes.c_int(), ctypes.c_int(), ctypes.c_long(), ctypes.c_double()
        _check(_lib.pxvm_video_info(h, ctypes.byref(w), ctypes.byref(hh), ctypes.byref(n), ctypes.byref(fps)))
        self.info = VideoInfo(w.value, hh.value, n.value if n.value >= 0 else None, fps.value or None)

    def next(self, dst):
        """Decodes the next frame into dst (a contiguous (H, W, C) uint8 array) or drops it (None):
        True, or False at the end. A lenient file's damage comes as a UserWarning."""
        got = ctypes.c_int()
        view = None
        if dst is not None:
            view = _capi.View(ctypes.c_void_p(dst.ctypes.data), -1, 1, self.info.width, self.info.height,
                              dst.shape[2], 0, self.info.width * dst.shape[2], dst.shape[2], 1)
        _check(_lib.pxvm_video_next(self.h, ctypes.byref(view) if view is not None else None, ctypes.byref(got)))
        warning = _lib.pxvm_warning()
        if warning:
            import warnings
            warnings.warn("pxvm: " + warning.decode(errors="replace"), stacklevel=3)
        return bool(got.value)

    def close(self):
        if self.h:
            _lib.pxvm_video_close(self.h)
            self.h = None

    __del__ = close


def info(path: str | os.PathLike, **limits: int) -> VideoInfo:
    """The frame size, the frame count the container declares (None: none) and the average frame
    rate (None: unknown) of a video file, from its header (no frame decoded)."""
    v = _Video(path, _limits(**limits))
    try:
        return v.info
    finally:
        v.close()


def count(path: str | os.PathLike, lenient: bool = False, **limits: int) -> int:
    """The number of frames the file decodes to (what frames() gives and samples from): one pass
    decoding each frame without converting it (vtest.avi's 795 frames: about 0.3 s)."""
    lim = _limits(**limits)
    if lenient:
        lim.flags |= PXVM_DECODE_LENIENT
    v = _Video(path, lim)
    try:
        n = 0
        while v.next(None):
            n += 1
        return n
    finally:
        v.close()


def _ceil_by(x, f):
    return math.ceil(x / f) * f


def _floor_by(x, f):
    return math.floor(x / f) * f


def smart_nframes(total: int, video_fps: float, fps: float | None = None, count: int | None = None,
                  min_frames: int = FPS_MIN_FRAMES, max_frames: int | None = None) -> int:
    """How many frames Qwen2-VL's video input takes from `total` frames at `video_fps`:
    qwen-vl-utils 0.0.10's smart_nframes (fps= or count=, not both; neither: fps=2.0).
    max_frames None: min(768, total). UsageError where the result is not in 2..total."""
    if fps is not None and count is not None:
        raise UsageError("usage: give fps or count, not both (Qwen2-VL's smart_nframes takes one)")
    if count is not None:
        n = round(count / FRAME_FACTOR) * FRAME_FACTOR
    else:
        fps = FPS if fps is None else fps
        if not (fps > 0) or not (video_fps and video_fps > 0):
            raise UsageError("usage: fps %r of a video at %r frames/s: both must be > 0" % (fps, video_fps))
        lo = _ceil_by(min_frames, FRAME_FACTOR)
        hi = _floor_by(min(FPS_MAX_FRAMES, total) if max_frames is None else max_frames, FRAME_FACTOR)
        n = _floor_by(min(min(max(total / video_fps * fps, lo), hi), total), FRAME_FACTOR)
    if not (FRAME_FACTOR <= n <= total):
        raise UsageError("usage: %d frames sampled of %d: the sample must be %d..%d frames (qwen-vl-utils' rule)"
                         % (n, total, FRAME_FACTOR, total))
    return int(n)


def _linspace_round(total: int, n: int) -> list[int]:
    """torch.linspace(0, total - 1, n).round() as a list: torch's own when it is importable (what
    qwen-vl-utils computes on this machine), else the same float32 arithmetic in NumPy: torch's CPU
    linspace kernel (ATen/native/cpu/RangeFactoriesKernel.cpp, AVX2: blocks of two 8-wide vectors,
    each from start + step * idx (fused) then base + k * step, elements past the blocks one by one,
    the first half from the start, the second from the end), tested equal to torch 1.13's."""
    try:
        torch = _torch()
    except ImportError:
        torch = None
    if torch is not None:
        return [int(i) for i in torch.linspace(0, total - 1, n).round().long().tolist()]
    np = _np()
    f32, f64 = np.float32, np.float64
    if n == 1:
        return [0]
    end = f32(total - 1)
    step = f32(end / f32(n - 1))
    half = n // 2

    def one(i):  # fused multiply-add: exact in float64 (24-bit step times an integer below 2^24), one rounding
        return f32(f64(step) * i) if i < half else f32(f64(end) - f64(step) * (n - i - 1))

    out = np.empty(n, dtype=np.float32)
    i = 0
    while i <= n - 16:
        for _ in range(2):
            base = one(i)
            out[i:i + 8] = base + np.arange(8, dtype=np.float32) * step  # rounded twice, as the vector code
            i += 8
    for k in range(i, n):
        out[k] = one(k)
    return [int(x) for x in np.round(out).astype(np.int64)]


def sample_indices(total: int, video_fps: float, fps: float | None = None, count: int | None = None,
                   min_frames: int = FPS_MIN_FRAMES, max_frames: int | None = None) -> list[int]:
    """The frames (0-based, of `total`) Qwen2-VL's video input takes: smart_nframes, then
    torch.linspace(0, total - 1, nframes).round()."""
    return _linspace_round(total, smart_nframes(total, video_fps, fps, count, min_frames, max_frames))


def plan_program(plan: dict | str | os.PathLike, source, **limits: int):
    """The Program of `plan` (a dict, JSON text or a .json path, as Program.from_plan) for the
    frames of `source` (a video file, or its (width, height)), as pxrun PLAN.json --frames compiles
    it: a plan of "size": "any" that keeps state ("video") or has a scanpath is compiled at the
    frame size, as the same plan with "image" at that size, once the size is checked against its
    bounds (UsageError naming them); any other plan as it is. For Runner(...).stream()."""
    if isinstance(plan, dict):
        p = dict(plan)
    elif isinstance(plan, (str, os.PathLike)) and not str(plan).lstrip().startswith("{"):
        with open(plan, "rb") as f:
            p = json.loads(f.read().decode())
    else:
        p = json.loads(str(plan))
    if not (isinstance(p, dict) and p.get("size") == "any" and ("video" in p or "scanpath" in p)):
        return Program.from_plan(plan, **limits)
    w, h = (source.width, source.height) if isinstance(source, VideoInfo) else \
        tuple(source) if isinstance(source, (tuple, list)) else info(source)[:2]
    _size_check(Program.from_plan({k: v for k, v in p.items() if k not in ("video", "scanpath")}, **limits), (w, h))
    at = {k: v for k, v in p.items() if k not in ("size", "bounds")}
    at["image"] = [w, h]
    return Program.from_plan(at, **limits)


class Frames:
    """The frames of a video file (pxvm.video.frames): iterate for (H, W, C) uint8 NumPy arrays
    (torch tensors on `device` when one is given); len() is the number of frames it gives (of the
    frames decoded: counted once, by pxvm.video.count). `indices`: the frame numbers given (None:
    every frame); `sample_fps`: the rate of the frames given (qwen-vl-utils' sample_fps); `info`:
    pxvm.video.info's."""

    def __init__(self, path, fps, count, start, end, channels, device, lenient, min_frames, max_frames, limits):
        if channels not in (3, 4):
            raise UsageError("usage: channels=%r: 3 (RGB) or 4 (RGBA)" % (channels,))
        self.path, self.channels, self.device = os.fspath(path), channels, device
        self._lim = _limits(**limits)
        if lenient:
            self._lim.flags |= PXVM_DECODE_LENIENT
        self.info = info_ = info(path, **limits)
        self._lenient, self._limits = lenient, limits
        self._count = None
        sampled = fps is not None or count is not None
        total = self.count() if sampled or start is not None or end is not None else None
        self.first, last = 0, None if total is None else total - 1
        if start is not None or end is not None:
            if not info_.fps:
                raise UsageError("usage: start=/end= (seconds) of '%s': its frame rate is unknown" % self.path)
            # frame k is at k / fps seconds; torchvision's read_video keeps start <= t <= end
            self.first = max(0, math.ceil((start or 0.0) * info_.fps - 1e-9))
            if end is not None:
                last = min(last, math.floor(end * info_.fps + 1e-9))
            if last < self.first:
                raise UsageError("usage: start=%r, end=%r of '%s' (%d frames at %g frames/s): no frame between them"
                                 % (start, end, self.path, total, info_.fps))
        self.total = None if last is None else last - self.first + 1  # the frames sampled from
        self.indices = None
        self.sample_fps = info_.fps
        if sampled:
            try:
                picked = sample_indices(self.total, info_.fps or 0.0, fps, count, min_frames, max_frames)
            except UsageError as e:
                raise UsageError("%s ('%s')" % (e, self.path)) from None
            self.indices = [self.first + i for i in picked]
            self.sample_fps = len(picked) / max(self.total, 1e-6) * (info_.fps or 0.0)
        elif start is not None or end is not None:
            self.indices = list(range(self.first, last + 1))

    def count(self) -> int:
        """The frames the file decodes to (pxvm.video.count, once)."""
        if self._count is None:
            self._count = count(self.path, self._lenient, **self._limits)
        return self._count

    def __len__(self) -> int:
        if self.indices is not None:
            return len(self.indices)
        return self.count()  # not the declared count: it may count empty chunks

    def __iter__(self) -> Iterator:
        np = _np()
        v = _Video(self.path, self._lim)
        w, h = self.info.width, self.info.height
        try:
            want = iter(self.indices) if self.indices is not None else None
            target = next(want, None) if want is not None else 0
            k = 0
            while target is not None:
                if k < target:  # decoded and dropped
                    if not v.next(None):
                        break
                    k += 1
                    continue
                frame = np.empty((h, w, self.channels), dtype=np.uint8)
                if not v.next(frame):
                    break
                k += 1
                yield self._out(frame)
                target = next(want, None) if want is not None else k
            if target is not None and want is not None:
                raise Malformed("malformed: '%s': frame %d is missing: the file ended after %d frames (%d counted "
                                "before)" % (self.path, target, k, self.count()))
        finally:
            v.close()

    def _out(self, frame):
        if self.device is None:
            return frame
        return _torch().from_numpy(frame).to(self.device)


def frames(path: str | os.PathLike, fps: float | None = None, count: int | None = None, *,
           start: float | None = None, end: float | None = None, channels: int = 3, device=None,
           lenient: bool = False, min_frames: int = FPS_MIN_FRAMES, max_frames: int | None = None,
           **limits: int) -> Frames:
    """The frames of a video file, decoded by the library's FFmpeg reader (pxrun --frames' bytes).

    fps=None and count=None: every frame. fps= (frames per second) or count= (frames): sampled as
    Qwen2-VL's video input is (qwen-vl-utils 0.0.10 fetch_video: fps=2.0 is its default; the
    module's docstring gives the rule); min_frames, max_frames as its video element's.
    start=, end=: seconds (frame k is at k / the file's rate; start <= k / rate <= end, as
    torchvision's read_video), the frames sampled from that span.
    channels: 3 (RGB, the default) or 4 (RGBA, A = 255). device: None gives NumPy arrays, else
    torch tensors on it ("cpu", "cuda:0"). lenient: damaged frames decoded as far as they go, each
    with a UserWarning (strict: pxvm.Malformed naming the file and frame). **limits: max_side,
    max_memory as for pxvm.load_image. Iterating decodes from the start each time."""
    return Frames(path, fps, count, start, end, channels, device, lenient, min_frames, max_frames, limits)
