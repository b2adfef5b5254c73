"""The host tables of pxvm.autograd's backward (NumPy only, no torch): RESIZE's, SAMPLE's and
PYRAMID's integer rules as isa/SPEC.md writes them, and their transposes' index tables.
pxvm.autograd applies them with torch."""
from __future__ import annotations

import math


class _NumPy:
    """NumPy, imported at first use (`import pxvm` imports neither NumPy nor torch)."""

    def __getattr__(self, name):
        import numpy
        return getattr(numpy, name)


np = _NumPy()

PREC = 22  # RESIZE's Q22 coefficients (isa/px_resize.h, PX_RESIZE_PREC)
FILTERS = {"nearest": 0, "lanczos": 1, "bilinear": 2, "bicubic": 3, "box": 4, "hamming": 5}
_C54 = 0.540000021457672119140625  # 0.54f widened (SPEC, RESIZE, Filters)
_C46 = 0.4600000083446502685546875


# ---- RESIZE's tables, from the SPEC rule (isa/SPEC.md, RESIZE: "The table of one axis") ---------

def _sinc(x):
    if x == 0.0:
        return 1.0
    t = x * math.pi
    return math.sin(t) / t


def _kernel(f):
    """(K, support) of filter number f, as isa/SPEC.md writes them (IEEE double, in that order)."""
    if f == 4:
        return (lambda x: 1.0 if -0.5 < x <= 0.5 else 0.0), 0.5
    if f == 2:
        return (lambda x: 1.0 - abs(x) if abs(x) < 1.0 else 0.0), 1.0
    if f == 5:
        def hamming(x):
            x = abs(x)
            if x == 0.0:
                return 1.0
            if x >= 1.0:
                return 0.0
            t = x * math.pi
            return (math.sin(t) / t) * (_C54 + _C46 * math.cos(t))
        return hamming, 1.0
    if f == 3:
        def bicubic(x):
            x = abs(x)
            if x < 1.0:
                return ((1.5 * x - 2.5) * x) * x + 1.0
            if x < 2.0:
                return (((x - 5.0) * x + 8.0) * x - 4.0) * -0.5
            return 0.0
        return bicubic, 2.0
    if f == 1:
        return (lambda x: _sinc(x) * _sinc(x / 3.0) if -3.0 <= x < 3.0 else 0.0), 3.0
    raise ValueError("filter %r has no kernel" % f)


def resize_table(n_in: int, n_out: int, f: int):
    """One axis of RESIZE (n_in -> n_out, filter number f): (lo, k) with lo[i] the first source
    index of output i's run and k[i] its list of int Q22 coefficients, exactly isa/SPEC.md's table
    (NEAREST: k = [2^22] at the running-sum index). n_in == n_out: the identity (pass 1 of the rule,
    and "the intermediate image is the source" when one side keeps its length)."""
    if n_in == n_out:
        return list(range(n_out)), [[1 << PREC]] * n_out
    if f == 0:
        a = n_in / n_out
        p = a * 0.5
        lo = []
        for _ in range(n_out):
            xi = int(p)
            lo.append(-1 if p < 0 or xi >= n_in else xi)
            p = p + a
        return lo, [[1 << PREC] if x >= 0 else [] for x in lo]
    K, s = _kernel(f)
    scale = n_in / n_out
    fs = 1.0 if scale < 1.0 else scale
    support = s * fs
    inv = 1.0 / fs
    los, ks = [], []
    for i in range(n_out):
        center = (i + 0.5) * scale
        lo = max(int(center - support + 0.5), 0)
        hi = min(int(center + support + 0.5), n_in)
        w = [K(((lo + j) - center + 0.5) * inv) for j in range(hi - lo)]
        ww = 0.0
        for v in w:
            ww = ww + v
        if ww != 0.0:
            w = [v / ww for v in w]
        ks.append([int(v * 4194304.0 + 0.5) if v >= 0 else int(v * 4194304.0 - 0.5) for v in w])
        los.append(lo)
    return los, ks


def resize_taps(n_in: int, n_out: int, f: int):
    """The transpose of one axis's table as a gather per source index, in a fixed order: (idx, w),
    int64 and float64 arrays of shape (n_in, M): source s receives sum over j of
    g[idx[s, j]] * w[s, j], j = 0, 1, ... in that order (output indices ascending); a pad entry
    points at index n_out (a zero appended by the caller) with weight 0. w = k / 2^22 exactly."""
    lo, ks = resize_table(n_in, n_out, f)
    lists = [[] for _ in range(n_in)]
    for i in range(n_out):
        for j, k in enumerate(ks[i]):
            if k:
                lists[lo[i] + j].append((i, k))
    m = max(1, max(len(x) for x in lists))
    idx = np.full((n_in, m), n_out, dtype=np.int64)
    w = np.zeros((n_in, m), dtype=np.float64)
    for s, x in enumerate(lists):
        for j, (i, k) in enumerate(x):
            idx[s, j], w[s, j] = i, k / 4194304.0
    return idx, w


def resize_u8(img, w_out, h_out, f):
    """RESIZE's bytes from these tables (NumPy, (H, W, C) uint8; tests compare them with the
    library's). The horizontal pass first, rounded and clamped to 8 bits, then the vertical."""
    def axis(a, n_out, ax):
        n_in = a.shape[ax]
        if n_in == n_out:
            return a
        lo, ks = resize_table(n_in, n_out, f)
        a = np.moveaxis(a, ax, 0).astype(np.int64)
        out = np.zeros((n_out,) + a.shape[1:], dtype=np.int64)
        for i in range(n_out):
            if f == 0:
                out[i] = a[lo[i]] if lo[i] >= 0 else 0
                continue
            acc = np.full(a.shape[1:], 1 << (PREC - 1), dtype=np.int64)
            for j, k in enumerate(ks[i]):
                acc += a[lo[i] + j] * k
            out[i] = np.where(acc < 0, 0, np.minimum(acc >> PREC, 255))
        return np.moveaxis(out, 0, ax).astype(np.uint8)
    return axis(axis(np.asarray(img), w_out, 1), h_out, 0)


# ---- SAMPLE and PYRAMID (isa/SPEC.md sections 3 and 4) --------------------------------------------

def level_sizes(w, h):
    n = int(math.floor(math.log2(max(w, h)))) + 1
    return [(max(1, w >> l), max(1, h >> l)) for l in range(n)]


def sample_contributions(geom, pw, ph, sizes, mode):
    """Every (level texel, output texel, integer weight) of the SAMPLEs of an atlas, from the token
    geometry (int (N, 5): Q16 cx, cy, du, dv, Q8.8 LOD as the run used them, fixation included).
    Output o = (p * ph + j) * pw + i; texel t = offset[l] + y * w_l + x over the levels
    concatenated. The weights are those of isa/SPEC.md section 4 over 2^24 (linear:
    (256-f or f) * (256-fx or fx) * (256-fy or fy)) or 2^24 (nearest: one texel), so that
    out_u8 = (sum of u8 * weight + 2^23) >> 24 is the VM's byte. Tokens no instruction wrote (LOD -1)
    contribute nothing. Returns (texel, output, weight) int64 arrays, and the level offsets."""
    geom = np.asarray(geom, dtype=np.int64)
    if not isinstance(mode, str):  # a bool per token: nearest or linear
        nearest = np.asarray(mode, dtype=bool)
        parts = []
        for m, sel in (("linear", ~nearest), ("nearest", nearest)):
            g = geom.copy()
            g[~sel, 4] = -1
            parts.append(sample_contributions(g, pw, ph, sizes, m))
        return tuple(np.concatenate([p[k] for p in parts]) for k in range(3)) + (parts[0][3],)
    offs = np.cumsum([0] + [w * h for w, h in sizes])
    n = len(sizes)
    N = geom.shape[0]
    ii, jj = np.arange(pw, dtype=np.int64), np.arange(ph, dtype=np.int64)
    cx, cy, du, dv, lod = (geom[:, k:k + 1] for k in range(5))
    u = cx + ((2 * ii[None, :] - (pw - 1)) * du) // 2          # (N, pw)
    v = cy + ((2 * jj[None, :] - (ph - 1)) * dv) // 2          # (N, ph)
    out = (np.arange(N, dtype=np.int64)[:, None, None] * ph + jj[None, :, None]) * pw + ii[None, None, :]
    written = lod[:, 0] >= 0
    widths = np.array([s[0] for s in sizes], dtype=np.int64)
    heights = np.array([s[1] for s in sizes], dtype=np.int64)
    T, O, W = [], [], []

    def add(rows, lv, lw, xs, wx, ys, wy):
        # the taps of level lv[r] for tokens r in rows: xs, wx (R, pw, k); ys, wy (R, ph, k)
        base = offs[lv[rows]][:, None, None]
        wl = widths[lv[rows]][:, None, None]
        for a in range(xs.shape[2]):
            for b in range(ys.shape[2]):
                wt = lw[rows][:, None, None] * wy[:, :, b][:, :, None] * wx[:, :, a][:, None, :]
                t = base + ys[:, :, b][:, :, None] * wl + xs[:, :, a][:, None, :]
                keep = wt != 0
                T.append(t[keep]), O.append(out[rows][keep]), W.append(wt[keep])

    def taps(pos, lv, rows, side):
        # isa/SPEC.md section 4, linear, one axis: (t0, t1) and (256 - frac, frac)
        p = (pos[rows] >> lv[rows][:, None]) - 32768
        hi = (side[lv[rows]] - 1)[:, None]
        t0 = np.clip(p >> 16, 0, hi)
        t1 = np.clip((p >> 16) + 1, 0, hi)
        fr = (p & 0xFFFF) >> 8
        return np.stack([t0, t1], -1), np.stack([256 - fr, fr], -1)

    if mode == "nearest":
        l = np.minimum(lod[:, 0] >> 8, n - 1)
        rows = np.nonzero(written)[0]
        L = l[rows][:, None]
        x = np.clip((u[rows] >> L) >> 16, 0, (widths[l[rows]] - 1)[:, None])
        y = np.clip((v[rows] >> L) >> 16, 0, (heights[l[rows]] - 1)[:, None])
        one = np.full(N, 1 << 24, dtype=np.int64)
        add(rows, l, one, x[:, :, None], np.ones_like(x)[:, :, None], y[:, :, None], np.ones_like(y)[:, :, None])
    else:
        l0 = lod[:, 0] >> 8
        top = l0 >= n - 1
        f = np.where(top, 0, lod[:, 0] & 255)
        l0 = np.where(top, n - 1, l0)
        l1 = np.where(top, n - 1, l0 + 1)
        for lv, lw in ((l0, 256 - f), (l1, f)):
            rows = np.nonzero(written & (lw != 0))[0]
            xs, wx = taps(u, lv, rows, widths)
            ys, wy = taps(v, lv, rows, heights)
            add(rows, lv, lw, xs, wx, ys, wy)
    if not T:
        z = np.zeros(0, dtype=np.int64)
        return z, z, z, offs
    return np.concatenate(T), np.concatenate(O), np.concatenate(W), offs


def pyramid_u8(img, sizes):
    """PYRAMID's levels (isa/SPEC.md, PYRAMID) in NumPy, (H, W, C) uint8 each."""
    levels = [np.asarray(img)]
    for l in range(1, len(sizes)):
        L = levels[-1].astype(np.int64)
        hp, wp = L.shape[:2]
        w, h = sizes[l]
        x0 = 2 * np.arange(w)
        x1 = np.minimum(x0 + 1, wp - 1)
        y0 = 2 * np.arange(h)
        y1 = np.minimum(y0 + 1, hp - 1)
        s = L[y0][:, x0] + L[y0][:, x1] + L[y1][:, x0] + L[y1][:, x1] + 2
        levels.append((s >> 2).astype(np.uint8))
    return levels



def fit_rect(sw, sh, W, H):
    """RESIZE's fit rule (isa/px_resize.h, px_resize_fit): (nw, nh, ox, oy) of a sw x sh source in
    a W x H rectangle, exact integers."""
    nw, nh = W, H
    if sw * H > sh * W:
        nh = max(1, (2 * sh * W + sw) // (2 * sw))
    elif sw * H < sh * W:
        nw = max(1, (2 * sw * H + sh) // (2 * sh))
    return nw, nh, (W - nw) // 2, (H - nh) // 2


def _pyramid_transpose(sizes, offs, tex):
    """PYRAMID's transpose from level l to level 0, for each level l >= 1 that SAMPLE reads: the
    index of pixel (X, Y)'s texel (X >> l, Y >> l) in the levels' buffer (offs[-1], a zero, where
    the texel does not exist: X >> l >= w_l, a column that a floored odd side drops), and the
    weight m_l / 4^l, m_l doubling at each step from a side of 1 (its texel counted twice)."""
    W, H = sizes[0]
    X, Y = np.arange(W, dtype=np.int64)[None, :], np.arange(H, dtype=np.int64)[:, None]
    touched = set(np.searchsorted(offs, tex, side="right") - 1) if len(tex) else set()
    idx, wts, m = [], [], 1
    ok = np.ones((H, W), dtype=bool)
    for l in range(1, len(sizes)):
        m *= (2 if sizes[l - 1][0] == 1 else 1) * (2 if sizes[l - 1][1] == 1 else 1)
        wl, hl = sizes[l]
        ok &= ((X >> l) < wl) & ((Y >> l) < hl)   # every step: max(1, w >> l) is not w >> l
        if l not in touched:
            continue
        i = offs[l] + (Y >> l) * wl + (X >> l)
        idx.append(np.where(ok, i, offs[-1]).reshape(-1))
        wts.append(m / 4.0 ** l)
    return idx, wts
