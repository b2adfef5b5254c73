"""Resolution policies on the host: a policy's text checked by the library, size=(W, H) against
a policy and a program, an image resized by a policy (pxvm_image_fit_channels)."""
from __future__ import annotations

import ctypes
import operator

from . import _capi
from .errors import UsageError, _check
from ._arrays import _np, _is_torch

_lib = _capi.lib


def canonical_policy(policy: str) -> str:
    """A policy's canonical text ("dynamic" -> "dynamic:merge=2,min=3136,max=1003520:bicubic";
    "native" as it is); a bad one (empty, "native:...", an unknown kind...) is a UsageError in
    the library's words (vm/resize.c), the same as pxrun's and pxbatch's."""
    buf = ctypes.create_string_buffer(256)
    _check(_lib.pxvm_policy_canonical(_capi.c_string(policy, "policy"), buf, len(buf)))
    return buf.value.decode()


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


_POLICY_HOST = ("usage: policy %r: policies resize on the host: pass a host array, or use a program with RESIZE")


def _check_policy(policy):
    """None or the policy text, checked by the library (a bad one is a UsageError naming it);
    "native" (an any-size input takes each image at its own size: Runner._apply_policy) as it is."""
    if policy is None or policy == "native":
        return policy
    if not isinstance(policy, str):
        raise TypeError("pxvm: policy must be a string such as 'fit:bicubic', got %s" % type(policy).__name__)
    canonical_policy(policy)  # empty, native:..., a bad one: its words (with native among the kinds)
    one = (ctypes.c_uint8 * 4)()
    out = ctypes.c_void_p()
    _check(_lib.pxvm_image_fit(ctypes.cast(one, ctypes.c_void_p), 1, 1, 1, 1, _capi.c_string(policy, "policy"),
                               ctypes.byref(out)))
    _lib.pxvm_free(out)
    return policy


def _size_policy(policy, size):
    """size=(W, H) against policy (no program needed): (W, H) or None, and the policy it runs with
    (stretch when none is given). As pxrun/pxbatch --size (tools/pxrun_size.c), same words: native,
    exact and dynamic decide the size themselves (UsageError naming the policy)."""
    if size is None:
        return None, policy
    try:  # whole numbers: int, or an integral NumPy scalar (np.int64(300), an item of np.array([300, 200]))
        w, h = size
        if any(isinstance(v, bool) or type(v).__name__ == "bool_" for v in (w, h)):
            raise TypeError("a bool is no size")
        w, h = operator.index(w), operator.index(h)
        ok = 1 <= w <= 65535 and 1 <= h <= 65535
    except (TypeError, ValueError):
        ok = False
    if not ok:
        try:
            kinds = "%s of %s" % (type(size).__name__, ", ".join(type(v).__name__ for v in size))
        except TypeError:
            kinds = type(size).__name__
        raise UsageError("usage: size takes (W, H), the width and height 1..65535 (e.g. (320, 240)), not %r (%s; "
                         "whole numbers: int or an integral NumPy value)" % (size, kinds))
    if policy is None:
        return (w, h), "stretch"
    _check_policy(policy)
    if policy in ("native", "exact") or is_dynamic(policy):
        raise UsageError("usage: size %dx%d: policy '%s' decides the size itself (native and exact bind each image at "
                         "its own size, dynamic at its rule's); size takes stretch[:FILTER] or fit[:FILTER[:PAD]]"
                         % (w, h, policy))
    return (w, h), policy


def _size_check(program, size):
    """size=(W, H) against the program, as pxrun --size: a fixed-size program (its slot's size is the
    only one) or a size outside an any-size input's bounds is a UsageError naming them."""
    if size is None:
        return
    w, h = size
    ins = program.inputs
    if not any(s.any_size for s in ins):
        if not ins:
            raise UsageError("usage: size %dx%d: program '%s' has no input slot" % (w, h, program.name))
        s = ins[0]
        raise UsageError("usage: size %dx%d: program '%s' is not any-size: its input slot %d ('%s') is %dx%d, the only "
                         "size it takes (policy stretch or fit resizes images to it)"
                         % (w, h, program.name, s.index, s.name, s.w, s.h))
    for s in ins:
        if s.any_size and not (s.min_side <= min(w, h) and max(w, h) <= s.max_side and
                               (not s.max_pixels or w * h <= s.max_pixels)):
            most = ", at most %d pixels" % s.max_pixels if s.max_pixels else ""
            raise UsageError("usage: size %dx%d is outside the bounds of program '%s': a %dx%d image cannot be bound "
                             "to slot %d ('%s'): it takes %dx%d .. %dx%d%s" % (w, h, program.name, w, h, s.index, s.name,
                                                                               s.min_side, s.min_side, s.max_side,
                                                                               s.max_side, most))


def _policy_image(x, w, h, policy):
    """One host image (H, W), (H, W, C) or (C, H, W) for a w x h slot: x itself when it is w x h,
    else a new (h, w, 4) uint8 array: its RGBA8 pixels (grey v -> (v, v, v, 255), RGB -> (r, g, b,
    255)) through pxvm_image_fit_channels (the widening done in the library)."""
    if _is_torch(x):
        if x.device.type != "cpu":
            raise UsageError(_POLICY_HOST % policy)
        x = x.numpy()
    elif getattr(x, "__cuda_array_interface__", None) is not None:
        raise UsageError(_POLICY_HOST % policy)
    np = _np()
    a = np.asarray(x)
    if a.dtype != np.uint8:
        raise TypeError("pxvm: images must be uint8 arrays, got %s" % a.dtype)
    if a.ndim == 2:
        a = a[:, :, None]
    elif a.ndim == 3 and a.shape[2] not in (1, 3, 4) and a.shape[0] in (1, 3, 4):
        a = a.transpose(1, 2, 0)
    if a.ndim != 3 or a.shape[2] not in (1, 3, 4):
        raise UsageError("pxvm: images are (H, W), (H, W, C) or (C, H, W) with C in 1, 3, 4; got shape %s" %
                         (tuple(np.shape(x)),))
    H, W, C = a.shape
    if (H, W) == (h, w) and not policy.startswith("crop"):  # crop resizes by the short side, at any size
        return x
    a = np.ascontiguousarray(a)  # its own channels: the library widens them to RGBA
    out = ctypes.c_void_p()
    _check(_lib.pxvm_image_fit_channels(a.ctypes.data, W, H, C, w, h, _capi.c_string(policy, "policy"),
                                        ctypes.byref(out)))
    try:
        rgba = np.empty((h, w, 4), dtype=np.uint8)
        ctypes.memmove(rgba.ctypes.data, out, w * h * 4)
        return rgba
    finally:
        _lib.pxvm_free(out)

