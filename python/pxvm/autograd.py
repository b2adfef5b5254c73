"""A deterministic backward through pxvm's sampling: tokens that carry a torch autograd graph.

    tok = pxvm.autograd.tokens(runner, image)          # image: float tensor, byte scale 0..255
    loss(model(tok)).backward()                        # image.grad: the transpose map, exact order

The forward is pxvm's own: the image is quantized to uint8 as the VM takes it (round half to even,
clamped to 0..255) and runner.tokens() runs it, so the values are exactly the frozen mode's (float32,
isa/SPEC.md section 9). The backward applies the transpose of the forward's linear part (docs/
autograd.md states it): every token value is, up to the integer rounding of the forward, a fixed
weighted sum of input pixels whose weights are the integer tables of the forward divided by powers
of two (RESIZE's Q22 taps, PYRAMID's 1/4 box, SAMPLE's 8-bit bilinear and LOD weights), then the
affine normalize r/s_c * v - m_c/s_c. The transpose is accumulated in float64 in a fixed order,
as a few gather tables built once per plan on the host (pxvm.autograd_tables): per output row, K
(index, weight) pairs, one gather, one product and a pairwise tree of additions; SAMPLE's
contributions per texel in rounds of such chunks, PYRAMID's levels per pixel, RESIZE's taps per
source row and column. No atomics, no BLAS, every step an elementwise IEEE operation, so two runs
give the same bits and the CPU and CUDA paths give the same bits; on a GPU the backward is about
ten launches.

Cases (anything else is a NotImplementedError that names what is not covered):
- policy "dynamic[...]" or "stretch[:FILTER]" with size= on a "uniform" plan's program: the image
  resized by RESIZE's rule and cut into tiles (the gradient: RESIZE's transpose of the tiles'
  gradient);
- a program whose instructions are PYRAMID of its input and SAMPLEs (linear or nearest, absolute
  or fixation-relative, no tile mask) from that input, each writing exactly one tile of one atlas
  (the foveated, uniform, v1 and logpolar plans; any-size inputs at the image's size or size=):
  SAMPLE's transpose, then PYRAMID's, then, where a policy (stretch, fit) resized the image
  before the run, RESIZE's transpose of the content rectangle.

The gradient with respect to the fixation is not given (None): the forward rounds the centre to
Q16 and the bilinear weight to 8 bits, so the tokens are piecewise constant in the fixation and the
true derivative is zero almost everywhere (docs/autograd.md). The gradient with respect to the
image passes the uint8 quantization as the identity (a straight-through estimator).

The frozen mode (runner.tokens, no graph) stays the default; this module is opt-in.
"""
from __future__ import annotations

import re

from .ragged import canonical_policy, dynamic_size, is_dynamic
from .tokens import token_format

from .autograd_tables import (FILTERS, PREC, fit_rect, level_sizes, np,  # noqa: F401 (re-exported)
                              pyramid_u8, resize_stages, resize_table, resize_taps, resize_u8,
                              sample_contributions, sample_stages)

__all__ = ["tokens", "plan", "Plan", "linear", "resize_table", "resize_taps"]


def _torch():
    import torch
    return torch


class Plan:
    """The linear part J of one tokens() forward and its transpose, for one image size and one
    geometry: apply(x) = J x (float64, the forward without its integer rounding: for gradcheck and
    the adjoint test) and transpose(g) = J^T g, in a fixed order on the device of g.

    x: (C, H, W) float64 image (C = 3); g: (N, C, p, p) tokens' gradient. The normalize's factor
    r/s_c is part of J (its constant -m_c/s_c is not: J is the linear part). The transpose is
    `stages`: gather tables (pxvm.autograd_tables, "a stage") applied to the gradient's rows,
    with the factor r/s_c after stage `scale_after` (docs/autograd.md, "The backward")."""

    def __init__(self, kind, in_hw, ph, pw, n_tokens, scale, stages, scale_after, **parts):
        self.kind, self.in_hw, self.ph, self.pw, self.n = kind, in_hw, ph, pw, n_tokens
        self.scale = np.asarray(scale, dtype=np.float64)  # r / s_c per channel (3)
        self.stages, self.scale_after = stages, scale_after
        self.parts = parts
        self._dev, self._fwd, self._graphs = {}, {}, {}

    def describe(self):
        """The transpose's stages: (axis, K, rows, weighted, reduce) each, and the bytes of their
        tables (what bench_backward.py prints)."""
        return [(st["axis"], st["idx"].shape[0], int(np.prod(st["idx"].shape[1:])), st["w"] is not None,
                 st["reduce"]) for st in self.stages], \
            sum(st["idx"].nbytes + (st["w"].nbytes if st["w"] is not None else 0) for st in self.stages)

    # -- the transpose's tables on a device, cached (moved once per plan and device) --
    def _on(self, device):
        torch = _torch()
        key = str(device)
        if key not in self._dev:
            st = [dict(s, idx=torch.from_numpy(s["idx"]).to(device).reshape(-1), K=s["idx"].shape[0],
                       rows=tuple(s["idx"].shape[1:]),
                       w=None if s["w"] is None else torch.from_numpy(s["w"]).to(device)) for s in self.stages]
            self._dev[key] = {"stages": st, "scale": torch.from_numpy(self.scale).to(device), "zero": {}}
        return self._dev[key]

    # -- the forward's tables (apply(), for tests and gradcheck), cached apart --
    def _fwd_on(self, device):
        torch = _torch()
        key = str(device)
        if key not in self._fwd:
            d = {}
            for k, v in list(self.parts.items()) + [("pre." + k, v) for k, v in (self.parts.get("pre") or {}).items()]:
                d[k] = torch.from_numpy(v).to(device) if isinstance(v, np.ndarray) else v
            d["scale"] = torch.from_numpy(self.scale).to(device)
            self._fwd[key] = d
        return self._fwd[key]

    # ---- the resize kind: tiles of a resized image ----
    def _tiles(self, img):
        rows, cols = self.parts["grid"]
        C = img.shape[0]
        return img.reshape(C, rows, self.ph, cols, self.pw).permute(1, 3, 0, 2, 4).reshape(rows * cols, C, self.ph,
                                                                                          self.pw)

    @staticmethod
    def _gather_axis(a, idx, w, dim):
        """sum over j, in order j = 0, 1, ..., of a.index_select(dim, idx[:, j]) * w[:, j]: one
        axis's transpose (or forward) as a fixed-order gather, a zero appended on that axis."""
        torch = _torch()
        shape = list(a.shape)
        shape[dim] = 1
        a = torch.cat([a, a.new_zeros(shape)], dim=dim)
        acc = None
        view = [1] * a.dim()
        view[dim] = -1
        for j in range(idx.shape[1]):
            term = a.index_select(dim, idx[:, j]) * w[:, j].view(view)
            acc = term if acc is None else acc + term
        return acc

    def _resize(self, x, d, k="", rect=None, canvas=None):
        nw, nh, ox, oy = rect or self.parts["rect"]
        oh, ow = canvas or self.parts["canvas"]
        x = self._gather_axis(x, d[k + "fx_idx"], d[k + "fx_w"], 2)   # horizontal pass first, as the forward
        x = self._gather_axis(x, d[k + "fy_idx"], d[k + "fy_w"], 1)
        return _torch().nn.functional.pad(x, (ox, ow - nw - ox, oy, oh - nh - oy))

    def _sample(self, x, d):
        """The forward's linear part: PYRAMID as exact averages, then SAMPLE's weights."""
        torch = _torch()
        C = x.shape[0]
        sizes = self.parts["sizes"]
        levels = [x]
        for l in range(1, len(sizes)):
            L = levels[-1]
            hp, wp = L.shape[1:]
            w, h = sizes[l]
            x0 = torch.arange(w, device=x.device) * 2
            x1 = torch.clamp(x0 + 1, max=wp - 1)
            y0 = torch.arange(h, device=x.device) * 2
            y1 = torch.clamp(y0 + 1, max=hp - 1)
            levels.append((L[:, y0][:, :, x0] + L[:, y0][:, :, x1] + L[:, y1][:, :, x0] + L[:, y1][:, :, x1]) * 0.25)
        flat = torch.cat([lv.reshape(C, -1) for lv in levels], dim=1)
        out = x.new_zeros((C, self.n * self.ph * self.pw))
        out.index_add_(1, d["s_out"], flat[:, d["s_tex"]] * d["s_w"])
        return out

    # ---- public ----
    def apply(self, x):
        """J x: (C, H, W) float -> (N, C, ph, pw), the forward's linear part (no rounding)."""
        d = self._fwd_on(x.device)
        if self.kind == "resize":
            t = self._tiles(self._resize(x, d))
        else:
            pre = self.parts["pre"]
            if pre is not None:
                x = self._resize(x, d, "pre.", pre["rect"], pre["canvas"])
            s = self._sample(x, d)
            t = s.reshape(x.shape[0], self.n, self.ph, self.pw).permute(1, 0, 2, 3)
        return t * d["scale"].to(t.dtype).view(1, -1, 1, 1)

    def transpose_hwc(self, g, dtype=None):
        """J^T g as a contiguous (H, W, C) tensor of dtype (default float64) on g's device: the
        tokens' gradient (N, C, ph, pw) as rows (token, y, x) of C values with a zero block after
        them (one copy), then each stage's gather, product and additions in float64 (the products
        of a float32 gradient and the dyadic weights are exact), r/s_c per channel after stage
        scale_after (on the texels' sums: fewer rows than the image), and the last arithmetic step
        writing dtype (one rounding from float64)."""
        torch = _torch()
        d = self._on(g.device)
        f64 = torch.float64
        dtype = dtype or f64
        C = g.shape[1]
        zkey = (g.dtype, C)
        if zkey not in d["zero"]:
            d["zero"][zkey] = g.new_zeros((1, self.ph, self.pw, C))
        x = torch.cat([g.permute(0, 2, 3, 1), d["zero"][zkey]], 0).view(-1, C)
        stages = d["stages"]
        # the last step that computes (a product or an addition) writes the result's dtype
        last = max([i for i, st in enumerate(stages) if st["w"] is not None or st["K"] > 1] + [-2])
        if last <= self.scale_after:
            last = None          # no arithmetic after the scale: the scale's product writes dtype

        def step(fn, a, b, final, into=None):
            if into is not None and final:   # a round's sums, written into its rows of S
                return fn(a, b, out=into.view(torch.broadcast_shapes(a.shape, b.shape)))
            if not final or dtype == f64:
                return fn(a, b)
            out = torch.empty(torch.broadcast_shapes(a.shape, b.shape), dtype=dtype, device=a.device)
            return fn(a, b, out=out)

        if self.scale_after < 0:
            x = step(torch.mul, x, d["scale"], last is None)
        s_buf = None
        for i, st in enumerate(stages):
            a, K = st["axis"], st["K"]
            into = None
            if st.get("into") is not None:   # a round of chunks: its sums go to S (segment_rounds)
                if s_buf is None:
                    s_buf = torch.empty((st["into"][0], C), dtype=f64, device=g.device)
                into = s_buf.narrow(0, st["into"][1], st["rows"][0])
            src = s_buf if st.get("from_s") else x
            v = src.index_select(a, st["idx"]).view(src.shape[:a] + (K,) + st["rows"] + src.shape[a + 1:])
            if st["w"] is not None:   # float64 weights: a float32 gradient is widened exactly here
                v = step(torch.mul, v, st["w"], (i == last or into is not None) and K == 1, into)
            if st["reduce"] == "tree":
                while K > 1:
                    K //= 2
                    v = step(torch.add, v.narrow(a, 0, K), v.narrow(a, K, K), (i == last or into is not None)
                             and K == 1, into)
                x = s_buf if st.get("last_round") else v.select(a, 0)
            else:
                x = v.select(a, 0)
                for k in range(1, K):
                    x = step(torch.add, x, v.select(a, k), i == last and k == K - 1)
            if st["shape"] is not None:
                x = x.reshape(st["shape"] + (C,))
            if i == self.scale_after:
                x = step(torch.mul, x, d["scale"], last is None)
        H, W = self.in_hw
        assert tuple(x.shape) == (H, W, C) and x.dtype == dtype, (x.shape, x.dtype)
        return x

    def transpose_graphed(self, g, dtype=None):
        """transpose_hwc(g, dtype) of a CUDA g as one CUDA graph: captured at the first call per
        (device, g's dtype and shape, dtype) from the same launches, then each call copies g into
        the graph's input, replays it (the same kernels: the same bits) and returns a copy of its
        output (the graph's buffers are reused by the next call). Three launches instead of a
        dozen. One backward at a time per plan: the buffers are the plan's."""
        torch = _torch()
        dtype = dtype or torch.float64
        key = (str(g.device), g.dtype, tuple(g.shape), dtype)
        got = self._graphs.get(key)
        if got is None:
            g_in = torch.empty(g.shape, dtype=g.dtype, device=g.device)
            g_in.copy_(g)
            side = torch.cuda.Stream(g.device)
            side.wait_stream(torch.cuda.current_stream(g.device))
            with torch.cuda.stream(side):    # the tables and the zero block on the device, outside the graph
                self.transpose_hwc(g_in, dtype)
            torch.cuda.current_stream(g.device).wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, capture_error_mode="thread_local"):   # the autograd engine's thread
                out = self.transpose_hwc(g_in, dtype)
            got = self._graphs[key] = (graph, g_in, out)
        graph, g_in, out = got
        g_in.copy_(g)
        graph.replay()
        return out.clone()

    def transpose(self, g):
        """J^T g: (N, C, ph, pw) -> (C, H, W) float64 (a view of transpose_hwc's result)."""
        return self.transpose_hwc(g).permute(2, 0, 1)


_INSN = re.compile(r"^(\w+)\s+(.*?)\s*;")


def _program_sampling(program):
    """The program's sampling, if this module covers it: (input slot, atlas slot, nearest), nearest
    a bool per tile (the mode of the last SAMPLE that writes it), or a NotImplementedError naming
    the instruction it does not cover."""
    src = dst = pyr = None
    tiles = {}
    for line in program.disassemble().splitlines():
        m = _INSN.match(line)
        if not m or line.startswith("."):
            continue
        op, ops = m.group(1), dict(kv.split("=", 1) for kv in m.group(2).split() if "=" in kv)
        if op == "HALT":
            break
        if op == "PYRAMID" and pyr is None and "mask" not in ops:
            pyr = ops["slot"]
            continue
        if op == "SAMPLE" and pyr is not None and ops.get("src") == pyr and "mask" not in ops and \
                ops.get("dst") == (dst or ops.get("dst")):
            src, dst = ops["src"], ops["dst"]
            a = program.slot(dst)
            x, y, w, h = (int(ops[k]) for k in ("dst_x", "dst_y", "w", "h"))
            if a.patch_count and (w, h) == (a.patch_w, a.patch_h) and x % w == 0 and y % h == 0:
                t = (y // h) * (a.w // w) + x // w
                if t < a.patch_count:
                    tiles[t] = ops["mode"].split("@")[0] == "nearest"
                    continue
        raise NotImplementedError("pxvm.autograd: instruction %r is not covered (PYRAMID of the input, then "
                                  "SAMPLEs from it, each into one tile of one atlas: docs/autograd.md)"
                                  % line.split(";")[0].strip())
    if src is None:
        raise NotImplementedError("pxvm.autograd: the program has no SAMPLE after a PYRAMID")
    a = program.slot(dst)
    return src, dst, np.array([tiles.get(t, False) for t in range(a.patch_count)])


def _sampling_of(runner):
    """_program_sampling of the runner's program, kept on the runner (the disassembly is parsed
    once); a NotImplementedError is raised again at every call."""
    got = runner.__dict__.get("_autograd_sampling")
    if got is None or got[0] is not runner.program:
        try:
            got = (runner.program, _program_sampling(runner.program))
        except NotImplementedError as e:
            got = (runner.program, e)
        runner.__dict__["_autograd_sampling"] = got
    if isinstance(got[1], Exception):
        raise NotImplementedError(str(got[1]))
    return got[1]


def _relative(runner):
    """Whether a SAMPLE of the runner's program is fixation-relative (its geometry, so its plan,
    then depends on the fixation: read at every run; otherwise on the image size only)."""
    got = runner.__dict__.get("_autograd_relative")
    if got is None or got[0] is not runner.program:
        got = (runner.program, any(l.startswith("SAMPLE") and re.search(r"mode=\w+@", l)
                                   for l in runner.program.disassemble().splitlines()))
        runner.__dict__["_autograd_relative"] = got
    return got[1]


def _norm_scale(normalize):
    if normalize is None:  # plan(normalize=None): the sampling's map alone (tests: exact dyadic sums)
        return [1.0, 1.0, 1.0]
    f = token_format("float32", normalize, "nchw", False)
    r = float(np.float32(f.rescale))
    return [r / float(np.float32(f.std[c])) for c in range(3)]


def _policy_resize(policy, size, w, h, patch):
    """(out_w, out_h, filter number) of a dynamic policy, or of stretch with size=; else
    NotImplementedError (plan() handles stretch and fit to a program's input)."""
    c = canonical_policy(policy)
    kind, filt = c.split(":")[0], c.split(":")[-1]
    if kind == "dynamic":
        ow, oh = dynamic_size(policy, patch, w, h)
    elif kind == "stretch" and size is not None:
        ow, oh = size
    else:
        raise NotImplementedError("pxvm.autograd: policy %r is not covered here (dynamic, or stretch with size=)"
                                  % policy)
    return ow, oh, FILTERS[filt]


def _resize_parts(W, H, ow, oh, f, rect=None):
    """The forward's tables of a resize from W x H to the content rectangle rect = (nw, nh, ox, oy)
    (default: all of ow x oh) of an ow x oh canvas: per-output gathers (f*_, for apply())."""
    nw, nh, ox, oy = rect or (ow, oh, 0, 0)
    parts = {"canvas": (oh, ow), "rect": (nw, nh, ox, oy), "filter": f}
    for ax, n_in, n_out in (("x", W, nw), ("y", H, nh)):
        lo, ks = resize_table(n_in, n_out, f)
        m = max(1, max(len(k) for k in ks))
        fi = np.full((n_out, m), n_in, dtype=np.int64)
        fw = np.zeros((n_out, m), dtype=np.float64)
        for i in range(n_out):
            for j, k in enumerate(ks[i]):
                fi[i, j], fw[i, j] = lo[i] + j, k / 4194304.0
        parts["f%s_idx" % ax], parts["f%s_w" % ax] = fi, fw
    return parts


def _program_resize(runner, policy, size, W, H, slot):
    """The resize a policy makes before a program's run (Runner._apply_policy): (parts, (w, h)) or
    (None, (W, H)) when the image is bound as it is."""
    if slot.any_size:
        w, h = size if size is not None else (W, H)
    else:
        w, h = slot.w, slot.h
    if (w, h) == (W, H) and (policy is None or not canonical_policy(policy).startswith("crop")):
        return None, (W, H)
    if policy is None:
        raise NotImplementedError("pxvm.autograd: an image of %dx%d for a %dx%d input needs a policy"
                                  % (W, H, w, h))
    c = canonical_policy(policy).split(":")
    if c[0] not in ("stretch", "fit"):
        raise NotImplementedError("pxvm.autograd: policy %r is not covered (dynamic, stretch, fit)" % policy)
    rect = fit_rect(W, H, w, h) if c[0] == "fit" else None
    return _resize_parts(W, H, w, h, FILTERS[c[1]], rect), (w, h)


def plan(runner, hw, policy=None, size=None, normalize="clip", geometry=None) -> Plan:
    """The Plan of a tokens() call on an image of (H, W): for a policy, from the RESIZE tables;
    otherwise from the token geometry of the run (runner.geometry(exact=True)[0], or geometry=).
    normalize=None leaves the normalize's factor out (r/s_c = 1: J is the sampling alone)."""
    H, W = hw
    scale = _norm_scale(normalize)
    if policy is not None and (is_dynamic(policy) or (size is not None and not _any_size(runner))):
        s = runner.program.slot(runner._atlas(None).index)
        p = s.patch_w
        ow, oh, f = _policy_resize(policy, size, W, H, p)
        if ow % p or oh % s.patch_h:
            raise NotImplementedError("pxvm.autograd: %dx%d is not a whole number of %dx%d tiles" % (ow, oh, p, p))
        parts = _resize_parts(W, H, ow, oh, f)
        parts["grid"] = (oh // s.patch_h, ow // p)
        stages, scale_after = resize_stages(H, W, parts["grid"], s.patch_h, p, f)
        return Plan("resize", (H, W), s.patch_h, p, parts["grid"][0] * parts["grid"][1], scale, stages,
                    scale_after, **parts)
    src, dst, nearest = _sampling_of(runner)
    s, a = runner.program.slot(src), runner.program.slot(dst)
    pre, (w, h) = _program_resize(runner, policy, size, W, H, s)
    if geometry is None:
        geometry = runner.geometry(a.name, exact=True)[0]
    sizes = level_sizes(w, h)
    tex, out, wt, offs = sample_contributions(geometry, a.patch_w, a.patch_h, sizes, nearest)
    n_out = a.patch_count * a.patch_h * a.patch_w
    stages, widths, scale_after = sample_stages(tex, out, wt, offs, sizes, n_out,
                                                None if pre is None else (W, H, pre["filter"], pre["rect"]))
    return Plan("sample", hw, a.patch_h, a.patch_w, a.patch_count, scale, stages, scale_after, sizes=sizes,
                s_tex=tex, s_out=out, s_w=wt / 16777216.0, pre=pre, chunk_widths=widths)


def _any_size(runner):
    return any(sl.any_size for sl in runner.program.inputs)


_PLANS_MAX = 16


def _cached_plan(runner, hw, policy, size, normalize, geometry):
    """plan(), kept on the runner for the last _PLANS_MAX keys (image size, policy, size, normalize,
    the geometry's bytes): a training loop over one program and one size builds its tables once."""
    cache = runner.__dict__.setdefault("_autograd_plans", {})
    key = (hw, policy, tuple(size) if size is not None else None, repr(normalize),
           geometry if geometry is None or isinstance(geometry, str) else np.asarray(geometry).tobytes())
    p = cache.pop(key, None)
    if p is None:  # "static": the geometry of the run just made
        p = plan(runner, hw, policy, size, normalize, None if isinstance(geometry, str) else geometry)
    cache[key] = p
    while len(cache) > _PLANS_MAX:
        cache.pop(next(iter(cache)))
    return p


def _hwc(image):
    """(H, W, 3) view of a float image given (H, W, 3) or (3, H, W) (HWC first where both read)."""
    if image.dim() == 3 and image.shape[2] == 3:
        return image, False
    if image.dim() == 3 and image.shape[0] == 3:
        return image.permute(1, 2, 0), True
    raise ValueError("pxvm.autograd: the image is (H, W, 3) or (3, H, W) floats, got %s" % (tuple(image.shape),))


def _function():
    torch = _torch()

    class Tokens(torch.autograd.Function):
        """forward: pxvm's tokens of the image quantized to uint8; backward: Plan.transpose."""

        @staticmethod
        def forward(ctx, image_hwc, runner, kw, cuda_graph=False):
            # three launches: round half to even, clamp, and the byte conversion into a contiguous HWC
            u8 = image_hwc.detach().round().clamp_(0, 255).to(torch.uint8, memory_format=torch.contiguous_format)
            hw, policy, size = tuple(u8.shape[:2]), kw.get("policy"), kw.get("size")
            norm = kw.get("normalize", "clip")
            ragged = policy is not None and is_dynamic(policy)
            if ragged:  # the plan first: a case not covered is refused before the run
                ctx.plan = _cached_plan(runner, hw, policy, size, norm, None)
            else:
                _sampling_of(runner)
            t = runner.tokens(u8, dtype="float32", layout="nchw", **kw)
            if not ragged and _relative(runner):  # this run's geometry: the fixation's centres
                ctx.plan = _cached_plan(runner, hw, policy, size, norm, runner.geometry(exact=True)[0])
            elif not ragged:  # the geometry is the program's at this size: read once
                ctx.plan = _cached_plan(runner, hw, policy, size, norm, "static")
            ctx.dtype, ctx.cuda_graph = image_hwc.dtype, cuda_graph
            return t.to(image_hwc.device)

        @staticmethod
        def backward(ctx, g):
            if ctx.cuda_graph and g.is_cuda:
                return ctx.plan.transpose_graphed(g, ctx.dtype), None, None, None
            return ctx.plan.transpose_hwc(g, ctx.dtype), None, None, None   # (H, W, 3), the image's dtype

    class Linear(torch.autograd.Function):
        """The linear part alone, float64 both ways: gradcheck's subject."""

        @staticmethod
        def forward(ctx, x, p):
            ctx.p = p
            return p.apply(x)

        @staticmethod
        def backward(ctx, g):
            return ctx.p.transpose(g), None

    return Tokens, Linear


_FN = None


def _fns():
    global _FN
    if _FN is None:
        _FN = _function()
    return _FN


def tokens(runner, image, normalize="clip", policy=None, size=None, fixation=None,
           fixation_units="normalized", layout="nchw", cuda_graph=False):
    """runner.tokens() of a float image (byte scale 0..255, (H, W, 3) or (3, H, W), CPU or CUDA
    as the runner's executor takes it) with an autograd graph: float32 tokens (N, 3, p, p) (layout
    "nhwc" or "flat" as runner.tokens) whose values are the frozen mode's for the image rounded to
    uint8, and whose backward gives image.grad by the fixed-order transpose (docs/autograd.md).
    normalize, policy ("dynamic[...]", or "stretch[:FILTER]" with size=), fixation: as
    runner.tokens. One image; the fixation gets no gradient. cuda_graph=True (a CUDA image): the
    backward replays its launches as one CUDA graph per plan (Plan.transpose_graphed: the same
    bits, three launches; one backward at a time per plan)."""
    if not getattr(image, "is_floating_point", lambda: False)():
        raise TypeError("pxvm.autograd: the image is a float tensor (byte scale 0..255), got %s"
                        % getattr(image, "dtype", type(image).__name__))
    if cuda_graph not in (False, True):
        raise TypeError("pxvm.autograd: cuda_graph is True or False, got %r" % (cuda_graph,))
    if cuda_graph and not image.is_cuda:
        raise ValueError("pxvm.autograd: cuda_graph=True takes a CUDA image, got one on %s" % image.device)
    hwc, _ = _hwc(image)
    kw = {"normalize": normalize}
    if policy is not None:
        kw["policy"] = policy
        if size is not None:
            kw["size"] = size
    if fixation is not None:
        kw["fixation"], kw["fixation_units"] = fixation, fixation_units
    t = _fns()[0].apply(hwc, runner, kw, cuda_graph)
    if layout == "nhwc":
        return t.permute(0, 2, 3, 1)
    if layout == "flat":
        return t.reshape(t.shape[0], -1)
    if layout != "nchw":
        raise ValueError("pxvm.autograd: layout %r is none of nchw, nhwc, flat" % (layout,))
    return t


def linear(x, p: Plan):
    """J x with J^T as its backward, float64 (x: (3, H, W)): torch.autograd.gradcheck's subject and
    the adjoint test's."""
    return _fns()[1].apply(x, p)
