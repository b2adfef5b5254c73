"""The host tables of pxvm.autograd's backward (NumPy only, no torch): RESIZE's, SAMPLE's and
PYRAMID's integer rules as isa/SPEC.md writes them, and the fixed-order transpose built from them
as a few padded gather tables (ELL: per output row, K (index, weight) pairs summed in one fixed
order; docs/autograd.md, "The backward"). pxvm.autograd applies them with torch."""
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


def pyramid_weights(sizes):
    """m_l / 4^l for every level l: a level-0 pixel's weight in its texel of level l (a power of
    two), m_l doubling at each step from a side of 1 (its texel counted twice)."""
    out, m = [], 1
    for l in range(len(sizes)):
        if l:
            m *= (2 if sizes[l - 1][0] == 1 else 1) * (2 if sizes[l - 1][1] == 1 else 1)
        out.append(m / 4.0 ** l)
    return out


def pyramid_transpose(sizes, offs, tex, pos=None):
    """PYRAMID's transpose to level 0 for the levels SAMPLE reads (tex: the texels it reads, in
    the levels' buffer): (levels, idx, weights), levels ascending; idx[k] (H, W) the index of
    pixel (X, Y)'s texel (X >> l, Y >> l) of level l = levels[k] in the buffer (offs[-1], a zero,
    where the texel does not exist: X >> l >= w_l, a column that a floored odd side drops), or
    pos of that index where pos (a table over the buffer, a zero last) is given; and weights[k]
    = pyramid_weights(sizes)[l]. Separable: a row index and a column index per level, then one
    2-D take."""
    W, H = sizes[0]
    X, Y = np.arange(W, dtype=np.int64), np.arange(H, dtype=np.int64)
    touched = set(np.flatnonzero(np.bincount(np.searchsorted(offs, tex, side="right") - 1)).tolist())
    if pos is None:
        pos = np.arange(int(offs[-1]) + 1, dtype=np.int64)
    zero = pos[int(offs[-1])]
    levels, idx, wts, m = [], [], [], pyramid_weights(sizes)
    okx, oky = np.ones(W, dtype=bool), np.ones(H, dtype=bool)
    for l in range(len(sizes)):
        wl, hl = sizes[l]
        if l:
            okx &= (X >> l) < wl     # every step: max(1, w >> l) is not w >> l
            oky &= (Y >> l) < hl
        if l not in touched:
            continue
        grid = np.full((hl + 1, wl + 1), zero, dtype=pos.dtype)     # a zero row and column last
        grid[:hl, :wl] = pos[offs[l]:offs[l] + wl * hl].reshape(hl, wl)
        t = grid.take(np.where(oky, Y >> l, hl), axis=0).take(np.where(okx, X >> l, wl), axis=1)
        levels.append(l), idx.append(t), wts.append(m[l])
    return levels, idx, wts


# ---- the transpose as gather tables ---------------------------------------------------------------
#
# A stage maps a tensor X (rows along `axis`, the channels last) to Y: Y's row r is the sum over
# k < K of X[idx[k, r]] * w[k, r] (w absent: 1), the K terms added as a pairwise tree (K a power of
# two: the first half plus the second half, elementwise, until one is left) or, for "seq", left to
# right. Padding entries point at a zero row of X with weight 0. One gather, at most one product,
# log2(K) (or K - 1) additions: a handful of elementwise launches per stage, none an atomic.

OP_US = 6.0         # the cost model that picks the chunk width: one launch of an eager torch op (us)
BYTES_PER_US = 2.5e6  # and the bytes a gather-and-add pipeline moves per us on an H200 (2.5 TB/s)


def pow2(n):
    k = 1
    while k < n:
        k *= 2
    return k


def stage(axis, idx, w=None, reduce="tree", shape=None):
    """A stage (module comment): idx int (K, *R), int32 where it fits; w float64 (K, *R') with R'
    broadcasting against R and the trailing axes (None: every weight 1); shape: the leading shape
    its output is reshaped to (None: as it comes)."""
    idx = np.asarray(idx)
    small = idx.size == 0 or int(idx.max()) < 2 ** 31 - 1
    return {"axis": axis, "idx": np.ascontiguousarray(idx, dtype=np.int32 if small else np.int64),
            "reduce": reduce, "shape": shape, "w": None if w is None else np.ascontiguousarray(w, dtype=np.float64)}


def _chunk(counts, K):
    """Rows of width K that cut each segment's list (counts[s] entries, side by side) in order:
    (entry of each (k, row) or -1 for a pad, as (K, R); the segment's row count)."""
    rows = (counts + K - 1) // K
    R = int(rows.sum())
    start = np.cumsum(counts) - counts                    # the segment's first entry
    row_seg = np.repeat(np.arange(len(counts)), rows)
    row_first = np.arange(R) - np.repeat(np.cumsum(rows) - rows, rows)   # the row's rank in its segment
    e = start[row_seg][None, :] + row_first[None, :] * K + np.arange(K)[:, None]
    valid = (row_first[None, :] * K + np.arange(K)[:, None]) < counts[row_seg][None, :]
    return np.where(valid, e, -1), rows


def _round_cost(hist, K, first):
    """The modelled cost (us) of one round of chunks of K over segments of hist ((rows, segments)
    pairs), and the histogram of the segments it leaves unfinished (more than one sum)."""
    entries = sum(n * -(-r // K) * K for r, n in hist)
    ops = 1 + first + int(math.log2(K))
    left = {}
    for r, n in hist:
        if -(-r // K) > 1:
            left[-(-r // K)] = left.get(-(-r // K), 0) + n
    return ops * OP_US + entries * (24 * (3 + 2 * first) + 4 + 8 * first) / BYTES_PER_US, tuple(sorted(left.items()))


def round_widths(counts):
    """The chunk width of each round (module comment, segment_rounds) that minimizes the cost
    model: round 1 over every segment, each later one over the segments still unfinished only;
    widths 2 to 64 (1 where every segment has one entry). Searched over the segments' histogram."""
    from functools import lru_cache
    values, n = np.unique(np.asarray(counts), return_counts=True)
    hist = tuple(zip(values.tolist(), n.tolist()))
    if int(values.max()) == 1:
        return [1]

    @lru_cache(maxsize=None)
    def best(h, first):
        if not h:
            return 0.0, ()
        top, out = pow2(max(r for r, _ in h)), None
        K = 2
        while K <= min(64, top):
            cost, left = _round_cost(h, K, first)
            rest, widths = best(left, False)
            if out is None or cost + rest < out[0]:
                out = (cost + rest, (K,) + widths)
            K *= 2
        return out

    return list(best(hist, True)[1])


def segment_rounds(counts, src, w, zero):
    """The stages that sum segments: segment s owns counts[s] >= 1 consecutive entries (src: the
    row of X each reads, w: its weight), added in their order by rounds of chunks (widths by
    round_widths): round 1 gathers X's rows for every segment, weighs them and sums each chunk;
    round j > 1 gathers, for the segments that still have more than one sum, their sums of round
    j-1 and sums each chunk. Every round writes its sums into one buffer S (its stage's "into":
    (rows of S, first row)): round 1's rows first, then a zero row (a row of pads), then each
    later round's. Pads read X's zero row (round 1) or S's. Returns (stages, widths, the row of S
    of each segment's sum, the zero row of S)."""
    counts = np.asarray(counts, dtype=np.int64)
    src, w = np.asarray(src), np.asarray(w)
    widths = round_widths(counts)
    K = widths[0]
    e, rows = _chunk(counts, K)
    e = np.concatenate([e, np.full((K, 1), -1)], axis=1)      # S's zero row: every entry a pad
    pad = e < 0
    zero_s = e.shape[1] - 1
    specs = [(np.where(pad, zero, src[np.maximum(e, 0)]), np.where(pad, 0.0, w[np.maximum(e, 0)])[..., None], 0)]
    first_row = np.cumsum(rows) - rows                        # each segment's first sum in S
    final = first_row.copy()
    off = zero_s + 1
    active = np.nonzero(rows > 1)[0]
    for K in widths[1:]:
        r = rows[active]
        sums = np.repeat(first_row[active] - (np.cumsum(r) - r), r) + np.arange(int(r.sum()))   # their rows in S
        e, rows_j = _chunk(r, K)
        specs.append((np.where(e < 0, zero_s, sums[np.maximum(e, 0)]), None, off))
        first_row = np.zeros_like(rows)
        first_row[active] = off + np.cumsum(rows_j) - rows_j
        final[active] = first_row[active]
        rows = np.zeros_like(rows)
        rows[active] = rows_j
        off += int(rows_j.sum())
        active = active[rows_j > 1]
    assert len(active) == 0
    stages = []
    for j, (idx, wt, at) in enumerate(specs):
        st = stage(0, idx, wt)
        st["into"], st["from_s"], st["last_round"] = (off, at), j > 0, j == len(specs) - 1
        stages.append(st)
    return stages, widths, final, zero_s


def resize_axis_stage(n_in, n_out, f, axis, trail):
    """RESIZE's transpose along one axis as a stage (None for n_in == n_out, the identity): source
    s receives its outputs (resize_taps: ascending) padded to a power of two with the zero at
    n_out, the input's last index along that axis; trail: the axes after it (channels included)."""
    if n_in == n_out:
        return None
    idx, w = resize_taps(n_in, n_out, f)
    K = pow2(idx.shape[1])
    I, Wt = np.full((K, n_in), n_out, dtype=np.int64), np.zeros((K, n_in))
    I[:idx.shape[1]], Wt[:idx.shape[1]] = idx.T, w.T
    return stage(axis, I, Wt.reshape((K, n_in) + (1,) * trail))


def resize_stages(H, W, grid, ph, pw, f):
    """The transpose of "resize W x H to the tiles' canvas, then cut it": the tokens' rows (token,
    y, x; the zero after them at N*ph*pw) gathered straight into the vertical transpose (the tile
    permutation folded into its index), giving (H, w' + 1) rows, the last column zero; then the
    horizontal transpose to (H, W). Returns (stages, the stage after which r/s_c applies: 0)."""
    rows, cols = grid
    oh, ow = rows * ph, cols * pw
    zero = rows * cols * ph * pw
    if H == oh:
        I, Wt = np.arange(H, dtype=np.int64)[None, :], None
    else:
        idx, w = resize_taps(H, oh, f)
        K = pow2(idx.shape[1])
        I, Wt = np.full((K, H), oh, dtype=np.int64), np.zeros((K, H))
        I[:idx.shape[1]], Wt[:idx.shape[1]] = idx.T, w.T
        Wt = Wt[:, :, None, None]
    # the zero column only where the horizontal transpose follows (and reads it as its pad)
    i, x = I[:, :, None], np.arange(ow + (W != ow), dtype=np.int64)[None, None, :]
    tok = ((i // ph) * cols + x // pw) * (ph * pw) + (i % ph) * pw + x % pw
    st = [stage(0, np.where((i >= oh) | (x >= ow), zero, tok), Wt)]
    sx = resize_axis_stage(W, ow, f, 1, 1)
    return st + ([sx] if sx is not None else []), 0


def sample_stages(tex, out, wt, offs, sizes, n_out, pre=None):
    """The transpose of SAMPLE over PYRAMID (then of a policy's resize, pre = (W, H, f, (nw, nh,
    ox, oy)) or None): the contributions (tex, out, wt / 2^24) times the pyramid's power of two of
    their texel's level, grouped by texel (ascending), each texel's in ascending output order (then
    as sample_contributions lists its taps), summed by segment_rounds; then each pixel (row-major)
    takes its texel of each level read, added left to right, levels ascending (a zero where SAMPLE
    never reads it; where fewer than half the pixels take anything, those pixels' sums are made
    apart, scaled, and a last gather spreads them over the image, zeros elsewhere); then the
    resize's vertical and horizontal transposes (the content rectangle's rows, with a zero row
    and column only where a transpose follows to read them as its pads).
    Returns (stages, the chunk widths, the stage after which r/s_c applies)."""
    lvl = np.searchsorted(offs, tex, side="right") - 1
    order = np.argsort(tex * (int(out.max(initial=0)) + 1) + out, kind="stable")   # by texel, output, then as listed
    tex_s = tex[order]
    starts = np.flatnonzero(np.diff(tex_s, prepend=-1))       # sorted: no second sort for np.unique
    uniq, counts = tex_s[starts], np.diff(np.append(starts, len(tex_s)))
    lw = np.asarray(pyramid_weights(sizes))
    w_s = (wt[order] / 16777216.0) * lw[lvl[order]]     # both powers of two apart from wt: exact
    if len(uniq):
        stages, widths, final, zero = segment_rounds(counts, out[order], w_s, n_out)
    else:
        stages, widths, final, zero = [], [], np.zeros(0, dtype=np.int64), n_out
    pos = np.full(int(offs[-1]) + 1, zero, dtype=np.int64)
    pos[uniq] = final
    levels, per, _ = pyramid_transpose(sizes, offs, tex, pos)
    per = per or [np.full((sizes[0][1], sizes[0][0]), zero, dtype=np.int64)]
    scale_after = len(stages) - 1
    if pre is None:
        H, W = sizes[0][1], sizes[0][0]
        levels_of = np.stack([p.reshape(-1) for p in per])
        hit = np.nonzero((levels_of != zero).any(axis=0))[0]
        if len(per) == 1 or 2 * len(hit) >= H * W:
            stages.append(stage(0, levels_of, None, "seq", shape=(H, W)))
            return stages, widths, scale_after
        # few pixels receive anything (a foveated plan): add the levels for those pixels only (a
        # zero row after them), scale them, then one gather spreads them over the image
        stages.append(stage(0, np.concatenate([levels_of[:, hit], np.full((len(per), 1), zero)], 1), None, "seq"))
        spread = np.full(H * W, len(hit), dtype=np.int64)
        spread[hit] = np.arange(len(hit))
        stages.append(stage(0, spread[None, :], None, shape=(H, W)))
        return stages, widths, scale_after + 1
    Ws, Hs, f, (nw, nh, ox, oy) = pre
    grid = np.full((len(per), nh + (Hs != nh), nw + (Ws != nw)), zero, dtype=np.int64)
    for k, p in enumerate(per):
        grid[k, :nh, :nw] = p[oy:oy + nh, ox:ox + nw]
    stages.append(stage(0, grid.reshape(len(per), -1), None, "seq", shape=tuple(grid.shape[1:])))
    for st in (resize_axis_stage(Hs, nh, f, 0, 2), resize_axis_stage(Ws, nw, f, 1, 1)):
        if st is not None:
            stages.append(st)
    return stages, widths, scale_after
