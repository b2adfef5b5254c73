"""pxvm.autograd: tokens with a deterministic backward (docs/autograd.md).

The backward is the transpose J^T of the forward's linear part J, built from the forward's own
integer tables: these tests check that the tables give the VM's bytes (so J is the forward's map),
that J^T is J's exact adjoint (gradcheck in float64, <J x, y> = <x, J^T y>), that the bits repeat
over runs and agree between the CPU and CUDA paths (CUDA: PXVM_TEST_EXECUTOR=cuda on the GPU
machine), and that the gradient is close to torch's grid_sample / F.interpolate gradient of the
same sampling with unquantized weights (tolerances derived in each test)."""
import json
import os

import numpy as np
import pytest

import pxvm
from conftest import EXECUTOR, PHOTO, ROOT

torch = pytest.importorskip("torch")
F = torch.nn.functional
A = pxvm.autograd

CUDA = EXECUTOR == "cuda" and torch.cuda.is_available()
needs_cuda = pytest.mark.skipif(not CUDA, reason="needs PXVM_TEST_EXECUTOR=cuda and a CUDA device")

# odd sides (PYRAMID's floored levels), a fractional LOD (two levels), nearest, edge clamping
SMALL = """.width 64
.height 8
.slot image input 13x7
.slot atlas output 8x8 patches=4x4x4
PYRAMID slot=image
SAMPLE src=image dst=atlas mode=linear dst_x=0 dst_y=0 w=4 h=4 cu=6.3 cv=3.7 du=1.3 dv=0.8 lod=0.6
SAMPLE src=image dst=atlas mode=nearest dst_x=4 dst_y=0 w=4 h=4 cu=1.3 cv=0.7 du=2.3 dv=1.8 lod=1.6
SAMPLE src=image dst=atlas mode=linear dst_x=0 dst_y=4 w=4 h=4 cu=12.9 cv=0.1 du=3.1 dv=2.7 lod=2.7
SAMPLE src=image dst=atlas mode=linear dst_x=4 dst_y=4 w=4 h=4 cu=5 cv=3 du=1 dv=1 lod=9
HALT
"""
# a side of 1 (PYRAMID counts that texel twice) and levels beyond the last
THIN = """.width 64
.height 8
.slot image input 9x1
.slot atlas output 4x2 patches=2x2x2
PYRAMID slot=image
SAMPLE src=image dst=atlas mode=linear dst_x=0 dst_y=0 w=2 h=2 cu=4.2 cv=0.5 du=2.5 dv=0.5 lod=1.3
SAMPLE src=image dst=atlas mode=linear dst_x=2 dst_y=0 w=2 h=2 cu=7.7 cv=0.3 du=3 dv=1 lod=2.9
HALT
"""

# eight tokens piled on a few texels (du = dv = 0.25, three LODs): a texel's list of contributions
# runs to hundreds, so SAMPLE's transpose takes several rounds of chunks
PILE = """.width 64
.height 16
.slot image input 16x12
.slot atlas output 32x16 patches=8x8x8
PYRAMID slot=image
""" + "".join("SAMPLE src=image dst=atlas mode=linear dst_x=%d dst_y=%d w=8 h=8 cu=%.2f cv=%.2f du=0.25 dv=0.3 lod=%s\n"
              % (8 * (k % 4), 8 * (k // 4), 7.3 + 0.1 * k, 5.6 - 0.05 * k, ("0", "0.5", "1.2")[k % 3])
              for k in range(8)) + "HALT\n"


def test_import_pxvm_imports_neither_numpy_nor_torch():
    """pxvm.autograd is exported by `import pxvm`, which imports NumPy and torch only where used
    (as the rest of the package): importing it pulls neither in."""
    import subprocess
    import sys
    code = "import sys, pxvm; pxvm.autograd.tokens; print('numpy' in sys.modules, 'torch' in sys.modules)"
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.split() == ["False", "False"]


def photo():
    return pxvm.load_image(PHOTO)[..., :3].copy()


def relative_logpolar():
    d = json.load(open(os.path.join(ROOT, "programs", "logpolar.json")))
    d["fixation"] = "relative"
    return pxvm.Program.from_plan(d)


def sampling_programs():
    """(program, image, fixation) of every sampling case the tables must reproduce."""
    rng = np.random.default_rng(43)
    im = photo()
    return [(pxvm.Program.load(pxvm.programs.path("foveate273")), im, None),
            (pxvm.Program.from_plan(os.path.join(ROOT, "programs", "uniform.json")), im, None),
            (pxvm.Program.from_plan(os.path.join(ROOT, "programs", "v1.json")), im, None),
            (relative_logpolar(), im, (0.3, 0.6)),
            (relative_logpolar(), im, (1.0, 0.0)),
            (pxvm.assemble(SMALL), rng.integers(0, 256, (7, 13, 3), dtype=np.uint8), None),
            (pxvm.assemble(THIN), rng.integers(0, 256, (1, 9, 3), dtype=np.uint8), None),
            (pxvm.Program.from_plan(os.path.join(ROOT, "programs", "foveate273_any.json")),  # any size: its own
             np.ascontiguousarray(im[13:253, 40:417]), None)]


def vm_patches(prog, im, fixation):
    r = pxvm.Runner(prog)
    pat = r.patches(im) if fixation is None else r.patches(im, fixation=fixation)
    return r, pat


@pytest.mark.parametrize("case", range(8))
def test_sample_tables_give_the_vm_bytes(case):
    """The contributions (texel, output, integer weight) rebuilt from the token geometry and the
    SPEC's rules, with PYRAMID's integer rule, give every byte of the VM's patches: the map whose
    transpose the backward applies is the forward's."""
    prog, im, fixation = sampling_programs()[case]
    r, pat = vm_patches(prog, im, fixation)
    src, dst, nearest = A._program_sampling(prog)
    a = prog.slot(dst)
    sizes = A.level_sizes(im.shape[1], im.shape[0])
    tex, out, wt, _ = A.sample_contributions(r.geometry(exact=True)[0], a.patch_w, a.patch_h, sizes, nearest)
    flat = np.concatenate([lv.reshape(-1, 3) for lv in A.pyramid_u8(im, sizes)]).astype(np.int64)
    acc = np.zeros((a.patch_count * a.patch_h * a.patch_w, 3), np.int64)
    np.add.at(acc, out, flat[tex] * wt[:, None])
    mine = ((acc + (1 << 23)) >> 24).reshape(a.patch_count, a.patch_h, a.patch_w, 3)
    assert np.array_equal(mine, pat[..., :3])


@pytest.mark.parametrize("policy", ["dynamic", "dynamic:max=50000", "dynamic:min=400000:bilinear",
                                    "dynamic:lanczos", "dynamic:box", "dynamic:hamming", "dynamic:nearest"])
def test_resize_tables_give_the_vm_tokens(policy):
    """RESIZE's tables computed in Python from the SPEC's rule (resize_table), run through the
    integer passes, then tiled and normalized by SPEC section 9's float32 steps: the tokens of
    runner.tokens(policy=...) bit for bit, downscaling and upscaling, every filter."""
    r = pxvm.Runner(pxvm.Program.from_plan(os.path.join(ROOT, "programs", "uniform.json")))
    im = photo()
    t = np.asarray(r.tokens(im, policy=policy, normalize="none"))
    ow, oh, f = A._policy_resize(policy, None, im.shape[1], im.shape[0], 16)
    res = A.resize_u8(im, ow, oh, f)
    tiles = res.reshape(oh // 16, 16, ow // 16, 16, 3).transpose(0, 2, 4, 1, 3).reshape(-1, 3, 16, 16)
    table = (np.arange(256, dtype=np.float32) * np.float32(1 / 255)).astype(np.float32)
    assert np.array_equal(table[tiles], t)


def runners():
    return [(pxvm.Runner(pxvm.Program.load(pxvm.programs.path("foveate273"))), None),
            (pxvm.Runner(pxvm.Program.from_plan(os.path.join(ROOT, "programs", "uniform.json"))), "dynamic")]


@pytest.mark.parametrize("which", [0, 1])
def test_forward_is_the_frozen_mode_and_backward_the_plan_transpose(which):
    r, policy = runners()[which]
    im = photo()
    x = torch.from_numpy(im).double().permute(2, 0, 1).contiguous().requires_grad_(True)  # (3, H, W) too
    t = A.tokens(r, x, policy=policy, normalize="siglip")
    frozen = r.tokens(torch.from_numpy(im), normalize="siglip", **({"policy": policy} if policy else {}))
    assert t.dtype == torch.float32 and torch.equal(t, frozen)
    g = torch.randn(t.shape, generator=torch.Generator().manual_seed(1))
    t.backward(g)
    p = A.plan(r, im.shape[:2], policy, normalize="siglip",
               geometry=None if policy else r.geometry(exact=True)[0])
    assert torch.equal(x.grad, p.transpose(g))
    flat = A.tokens(r, x, policy=policy, normalize="siglip", layout="flat")
    assert torch.equal(flat, t.reshape(t.shape[0], -1))


@pytest.mark.parametrize("which", [0, 1])
def test_backward_bits_repeat_over_10_runs(which):
    """Ten forward + backward passes of the same image and gradient: identical bits (float32
    image, so the float64 sums are rounded once more at the end, identically)."""
    r, policy = runners()[which]
    x = torch.from_numpy(photo()).float()
    g = torch.randn((273, 3, 16, 16) if which == 0 else (504, 3, 16, 16), generator=torch.Generator().manual_seed(2))
    grads = []
    for _ in range(10):
        xi = x.clone().requires_grad_(True)
        A.tokens(r, xi, policy=policy).backward(g)
        grads.append(xi.grad)
    assert grads[0].abs().sum() > 0
    assert all(torch.equal(grads[0], gi) for gi in grads[1:])


def policy_cases():
    """(runner, image, policy, size): a program after a host resize by a policy (Runner's
    _apply_policy), and an any-size program at its image's size and at size=."""
    fov = pxvm.Program.load(pxvm.programs.path("foveate273"))
    anyp = pxvm.Program.from_plan(os.path.join(ROOT, "programs", "foveate273_any.json"))
    im = photo()
    tall = np.ascontiguousarray(im[:, 100:300])       # 200x300: fit pads its sides
    return [(fov, tall, "fit", None), (fov, tall, "stretch:bilinear", None), (fov, tall, "fit:lanczos:9,8,7,255", None),
            (anyp, tall, None, None), (anyp, tall, "stretch", (320, 256))]


@pytest.mark.parametrize("case", range(5))
def test_policy_before_a_program(case):
    """The resize a policy makes before the run (stretch, fit: RESIZE's tables, the fit rule's
    rectangle, the pad a constant) composed with the program's map: the tables give the bytes the
    library binds, the forward is the frozen mode's, the gradient is the plan's transpose, and the
    transpose is the composed map's exact adjoint."""
    prog, im, policy, size = policy_cases()[case]
    r = pxvm.Runner(prog)
    kw = {k: v for k, v in (("policy", policy), ("size", size)) if v is not None}
    x = torch.from_numpy(im).float().requires_grad_(True)
    t = A.tokens(r, x, normalize="imagenet", **kw)
    assert torch.equal(t, r.tokens(torch.from_numpy(im), normalize="imagenet", **kw))
    p = A.plan(r, im.shape[:2], policy, size, normalize="imagenet", geometry=r.geometry(exact=True)[0])
    g = torch.randn(t.shape, generator=torch.Generator().manual_seed(case))
    t.backward(g)
    assert torch.equal(x.grad, p.transpose(g).permute(1, 2, 0).float())
    pre = p.parts["pre"]
    if pre is not None:  # the tables and the rectangle give the library's bytes
        from pxvm.runner import _policy_image
        oh, ow = pre["canvas"]
        nw, nh, ox, oy = pre["rect"]
        want = np.asarray(_policy_image(im, ow, oh, pxvm.canonical_policy(policy)))[..., :3]
        f = A.FILTERS[pxvm.canonical_policy(policy).split(":")[1]]
        mine = A.resize_u8(im, nw, nh, f)
        assert np.array_equal(want[oy:oy + nh, ox:ox + nw], mine)
    gen = torch.Generator().manual_seed(11)
    xx = torch.randn((3,) + im.shape[:2], dtype=torch.float64, generator=gen)
    yy = torch.randn(t.shape, dtype=torch.float64, generator=gen)
    lhs, rhs = (p.apply(xx) * yy).sum().item(), (xx * p.transpose(yy)).sum().item()
    assert abs(lhs - rhs) <= 1e-12 * (p.apply(xx).abs() * yy.abs()).sum().item()


def test_relative_program_follows_the_fixation():
    """A fixation-relative program's plan comes from each run's geometry: fixations a, b, a give
    gradients equal to the transposes of plans built from each run's own geometry, a's twice."""
    r = pxvm.Runner(relative_logpolar())
    im = torch.from_numpy(photo()).float()
    g = torch.randn((266, 3, 16, 16), generator=torch.Generator().manual_seed(9))   # logpolar: 266 tokens
    grads = []
    for fix in ((0.3, 0.6), (0.7, 0.2), (0.3, 0.6)):
        x = im.clone().requires_grad_(True)
        A.tokens(r, x, fixation=fix).backward(g)
        p = A.plan(r, tuple(im.shape[:2]), geometry=r.geometry(exact=True)[0])
        assert torch.equal(x.grad, p.transpose(g).permute(1, 2, 0).float())
        grads.append(x.grad)
    assert not torch.equal(grads[0], grads[1]) and torch.equal(grads[0], grads[2])


def test_backward_runs_under_torch_deterministic_mode():
    """Gathers, products and sums only: torch.use_deterministic_algorithms(True) refuses none of
    them (on CUDA it refuses index_copy_ and atomics-based ops), and the bits are the same."""
    r, _ = runners()[0]
    x = torch.from_numpy(photo()).float()
    g = torch.randn((273, 3, 16, 16), generator=torch.Generator().manual_seed(10))
    x1 = x.clone().requires_grad_(True)
    A.tokens(r, x1).backward(g)
    was = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        x2 = x.clone().requires_grad_(True)
        A.tokens(r, x2).backward(g)
    finally:
        torch.use_deterministic_algorithms(was)
    assert torch.equal(x1.grad, x2.grad)


def small_plans():
    rs = pxvm.Runner(pxvm.assemble(SMALL))
    rng = np.random.default_rng(5)
    rs.patches(rng.integers(0, 256, (7, 13, 3), dtype=np.uint8))
    rt = pxvm.Runner(pxvm.assemble(THIN))
    rt.patches(rng.integers(0, 256, (1, 9, 3), dtype=np.uint8))
    ru = pxvm.Runner(pxvm.Program.from_plan(os.path.join(ROOT, "programs", "uniform.json")))
    rf = pxvm.Runner(pxvm.assemble(SMALL))
    rf.patches(rng.integers(0, 256, (9, 8, 3), dtype=np.uint8), policy="fit:bicubic")
    return [((7, 13), A.plan(rs, (7, 13))), ((1, 9), A.plan(rt, (1, 9))),
            ((9, 8), A.plan(rf, (9, 8), "fit:bicubic", geometry=rf.geometry(exact=True)[0])),
            ((7, 13), A.plan(ru, (7, 13), "stretch:bicubic", size=(16, 32))),   # up
            ((37, 21), A.plan(ru, (37, 21), "stretch:lanczos", size=(16, 16))),  # down
            ((7, 13), A.plan(ru, (7, 13), "stretch:nearest", size=(32, 16)))]


def dense_cases():
    """(plan with r/s_c = 1, exact): small plans whose transpose the dense reference checks; exact
    when J's entries are dyadic with few enough bits that integer gradients sum exactly in float64
    (SAMPLE's 2^-24 over PYRAMID's 4^-l, or RESIZE's two Q22 axes), not when a policy's resize is
    composed with SAMPLE (2^-24 4^-l 2^-44: past 53 bits)."""
    rng = np.random.default_rng(12)
    out = []
    for src, hw in ((SMALL, (7, 13)), (THIN, (1, 9)), (PILE, (12, 16))):
        r = pxvm.Runner(pxvm.assemble(src))
        r.patches(rng.integers(0, 256, hw + (3,), dtype=np.uint8))
        out.append((A.plan(r, hw, normalize=None), True))
    rf = pxvm.Runner(pxvm.assemble(SMALL))
    rf.patches(rng.integers(0, 256, (9, 8, 3), dtype=np.uint8), policy="fit:bicubic")
    out.append((A.plan(rf, (9, 8), "fit:bicubic", normalize=None, geometry=rf.geometry(exact=True)[0]), False))
    ru = pxvm.Runner(pxvm.Program.from_plan(os.path.join(ROOT, "programs", "uniform.json")))
    for hw, pol, size in (((7, 13), "stretch:bicubic", (16, 32)), ((37, 21), "stretch:lanczos", (16, 16)),
                          ((7, 13), "stretch:nearest", (32, 16)), ((16, 32), "stretch:bilinear", (32, 16))):
        out.append((A.plan(ru, hw, pol, size=size, normalize=None), True))
    return out


def dense(p):
    """J as a dense float64 matrix (outputs x pixels, one channel: channels do not mix), column i
    = apply(e_i): the forward's linear part, whose index_add_ sums dyadic entries exactly."""
    H, W = p.in_hw
    eye = torch.eye(H * W, dtype=torch.float64).reshape(H * W, 1, H, W).expand(H * W, 3, H, W)
    return torch.stack([p.apply(e)[:, 0].reshape(-1) for e in eye], 1)


@pytest.mark.parametrize("case", range(8))
def test_transpose_is_the_dense_reference(case):
    """Plan.transpose (gather tables, fixed-order trees) against the dense matrix's transpose
    (torch.matmul): bit for bit for integer gradients where the sums are exact (every case but
    the fit policy before SAMPLE), and to 1e-13 of the sum of magnitudes for random float64
    gradients (the orders differ). PILE's lists take several rounds of chunks."""
    p, exact = dense_cases()[case]
    J = dense(p)
    H, W = p.in_hw
    gen = torch.Generator().manual_seed(case)
    gi = torch.randint(-2, 3, (p.n, 3, p.ph, p.pw), generator=gen).double()
    gr = torch.randn((p.n, 3, p.ph, p.pw), dtype=torch.float64, generator=gen)
    for g in (gi, gr):
        ref = (J.T @ g.permute(1, 0, 2, 3).reshape(3, -1).T).T.reshape(3, H, W)
        ours = p.transpose(g)
        assert ours.abs().sum() > 0
        if g is gi and exact:
            assert torch.equal(ours, ref)
        else:
            bound = 1e-13 * (J.abs().T @ g.abs().permute(1, 0, 2, 3).reshape(3, -1).T).T.reshape(3, H, W)
            assert ((ours - ref).abs() <= bound).all()
    if case == 2:
        assert len(p.parts["chunk_widths"]) >= 2


def test_rounds_of_chunks_sum_long_lists():
    """segment_rounds on lists of 1 to 4097 entries (three rounds at least; the later ones over
    the unfinished segments only), run by Plan.transpose_hwc's engine with a last gather of each
    segment's sum: every sum is the exact one (integer gradients, weights k/256), the widths are
    the cost model's, and a segment of one entry is its product."""
    from pxvm.autograd_tables import round_widths, segment_rounds, stage
    rng = np.random.default_rng(17)
    counts = np.concatenate([np.ones(500, np.int64), rng.integers(2, 9, 300), rng.integers(60, 70, 20), [1372, 4097]])
    rng.shuffle(counts)
    n_out, E = 5000, int(counts.sum())
    src, w = rng.integers(0, n_out, E), rng.integers(1, 256, E) / 256.0
    stages, widths, final, _ = segment_rounds(counts, src, w, n_out)
    assert len(widths) >= 3 and widths == round_widths(counts)
    p = A.Plan("sample", (1, len(counts)), 1, 1, n_out, [1.0, 1.0, 1.0],
               stages + [stage(0, final[None, :], shape=(1, len(counts)))], len(stages) - 1)
    g = torch.randint(-8, 9, (n_out, 3, 1, 1), generator=torch.Generator().manual_seed(17)).double()
    ref = np.zeros((len(counts), 3))
    np.add.at(ref, np.repeat(np.arange(len(counts)), counts), g[:, :, 0, 0].numpy()[src] * w[:, None])
    assert torch.equal(p.transpose_hwc(g)[0], torch.from_numpy(ref))


def count_ops(fn):
    """The torch operations fn runs that compute (a view, an empty tensor are not counted), by a
    TorchDispatchMode: on a GPU each is a kernel launch."""
    from torch.utils._python_dispatch import TorchDispatchMode
    free = {"empty", "empty_strided", "empty_like", "new_empty", "new_empty_strided", "lift_fresh", "is_same_size"}

    class Count(TorchDispatchMode):
        ops = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            view = any(r.alias_info is not None and not r.alias_info.is_write for r in func._schema.returns)
            if not view and func.overloadpacket.__name__ not in free:
                self.ops.append(func.overloadpacket.__name__)
            return func(*args, **(kwargs or {}))

    with Count():
        fn()
    return Count.ops


@pytest.mark.parametrize("which", [0, 1])
def test_backward_is_a_handful_of_ops(which):
    """The backward of foveate273 (two levels read) and of the dynamic policy: one copy of the
    gradient, per stage a gather, a product and log2(K) (or K - 1) additions, the scale: at most 12
    launches on a GPU (before the gather tables: 24), as many as the plan's stages say."""
    r, policy = runners()[which]
    x = torch.from_numpy(photo()).float().requires_grad_(True)
    t = A.tokens(r, x, policy=policy)
    g = torch.randn(t.shape, generator=torch.Generator().manual_seed(5))
    p = A._cached_plan(r, tuple(x.shape[:2]), policy, None, "clip", None if policy else "static")
    p.transpose(g)                              # the tables on the device once
    ops = count_ops(lambda: t.backward(g))
    assert len(ops) <= 12, ops
    stages, nbytes = p.describe()
    want = 2 + sum(1 + w + (k.bit_length() - 1 if red == "tree" else k - 1) for _, k, _, w, red in stages)
    assert len(ops) == want, ops
    assert ops.count("index_select") == len(stages)


@pytest.mark.parametrize("case", range(6))
def test_gradcheck_of_the_linear_map(case):
    """torch.autograd.gradcheck in float64: the backward is the Jacobian of the linear forward
    (J's weights: the integer tables over powers of two, with the normalize's r/s_c)."""
    hw, p = small_plans()[case]
    x = torch.rand((3,) + hw, dtype=torch.float64, generator=torch.Generator().manual_seed(case)) * 255
    x.requires_grad_(True)
    assert torch.autograd.gradcheck(lambda v: A.linear(v, p), (x,), eps=1e-3, atol=1e-7, rtol=1e-6)


@pytest.mark.parametrize("which", [0, 1])
def test_transpose_is_the_exact_adjoint(which):
    """<J x, y> = <x, J^T y> on a photo's size, to float64 rounding of the two sums."""
    r, policy = runners()[which]
    im = photo()
    if policy is None:
        r.patches(im)
    p = A.plan(r, im.shape[:2], policy, geometry=None if policy else r.geometry(exact=True)[0])
    gen = torch.Generator().manual_seed(3)
    x = torch.randn((3,) + im.shape[:2], dtype=torch.float64, generator=gen)
    y = torch.randn((p.n, 3, 16, 16), dtype=torch.float64, generator=gen)
    lhs, rhs = (p.apply(x) * y).sum().item(), (x * p.transpose(y)).sum().item()
    assert abs(lhs - rhs) <= 1e-12 * (p.apply(x).abs() * y.abs()).sum().item()


def test_linear_forward_is_the_vm_up_to_rounding():
    """J x + the normalize's constant is the VM's tokens to within the forward's roundings: PYRAMID
    rounds once per level (a half byte each, at most 4 levels here: 2 bytes) and SAMPLE once."""
    r, _ = runners()[0]
    im = photo()
    t = A.tokens(r, torch.from_numpy(im).float(), normalize="none")
    p = A.plan(r, im.shape[:2], geometry=r.geometry(exact=True)[0], normalize="none")
    lin = p.apply(torch.from_numpy(im).double().permute(2, 0, 1))
    assert (lin - t.double()).abs().max().item() <= 2.5 / 255


def smooth(h, w):
    yy, xx = np.mgrid[0:h, 0:w]
    return (128 + 60 * np.sin(xx / 7.0) * np.cos(yy / 5.0) + 40 * np.cos((xx + yy) / 11.0)).round().astype(np.uint8)


def test_gradient_close_to_grid_sample():
    """LOD 0, du = dv = 1 at fractional centres: SAMPLE is grid_sample's bilinear (align_corners
    False, border) but for its weights, whose fractions are floored to 8 bits. Each of an output's
    4 tap weights then differs by less than 2/256, so ||ours - grid_sample's||_1 < (8/256)*||g||_1
    (after the normalize's factor r, equal in both); on a smooth image the tokens differ by less
    than a byte's rounding plus 2/256 of the local range."""
    rng = np.random.default_rng(7)
    H, W, n = 48, 64, 12
    cu, cv = rng.uniform(6, W - 6, n), rng.uniform(6, H - 6, n)
    lines = [".width 64", ".height 16", ".slot image input %dx%d" % (W, H),
             ".slot atlas output 48x32 patches=8x8x%d" % n, "PYRAMID slot=image"]
    for k in range(n):
        lines.append("SAMPLE src=image dst=atlas mode=linear dst_x=%d dst_y=%d w=8 h=8 cu=%.4f cv=%.4f du=1 dv=1 lod=0"
                     % (8 * (k % 6), 8 * (k // 6), cu[k], cv[k]))
    r = pxvm.Runner(pxvm.assemble("\n".join(lines + ["HALT", ""])))
    img = np.repeat(smooth(H, W)[..., None], 3, axis=2)
    x = torch.from_numpy(img).double().requires_grad_(True)
    t = A.tokens(r, x, normalize="none")
    g = torch.randn(t.shape, generator=torch.Generator().manual_seed(4))
    t.backward(g)
    geo = r.geometry(exact=True)[0].astype(np.float64)
    ii = np.arange(8)
    u = geo[:, 0:1] + np.floor((2 * ii[None] - 7) * geo[:, 2:3] / 2)   # Q16, the VM's positions
    v = geo[:, 1:2] + np.floor((2 * ii[None] - 7) * geo[:, 3:4] / 2)
    gx = torch.from_numpy(2 * (u / 65536) / W - 1)[:, None, :].expand(n, 8, 8)
    gy = torch.from_numpy(2 * (v / 65536) / H - 1)[:, :, None].expand(n, 8, 8)
    grid = torch.stack([gx, gy], -1).reshape(1, n * 8, 8, 2)
    xr = torch.from_numpy(img).double().permute(2, 0, 1)[None].requires_grad_(True)
    ref = F.grid_sample(xr, grid, mode="bilinear", padding_mode="border", align_corners=False)
    ref = ref.reshape(1, 3, n, 8, 8).permute(0, 2, 1, 3, 4)[0]               # (n, 3, 8, 8)
    r32 = float(np.float32(1 / 255))
    assert (ref * r32 - t.double()).abs().max().item() <= (0.5 + 2 / 256 * 255) / 255
    ref.backward(g.double() * r32)
    ours, theirs = x.grad.permute(2, 0, 1), xr.grad[0]
    err = (ours - theirs).abs().sum().item()
    assert 0 < err < 8 / 256 * (g.double() * r32).abs().sum().item()


def tiles_to_canvas(g, rows, cols):
    """(N, C, p, p) tiles, row-major, -> the (C, rows * p, cols * p) image they were cut from."""
    n, c, ph, pw = g.shape
    return g.reshape(rows, cols, c, ph, pw).permute(2, 0, 3, 1, 4).reshape(c, rows * ph, cols * pw)


@pytest.mark.parametrize("mode,filt", [("bicubic", "bicubic"), ("bilinear", "bilinear")])
def test_gradient_close_to_interpolate(mode, filt):
    """stretch:bicubic / bilinear against F.interpolate(antialias=True), Pillow's kernels in float:
    the only difference is RESIZE's Q22 coefficients, each within 2^-23 of the float weight, so
    ||ours - theirs||_1 <= (kx + ky) * 2^-23 * L * ||g||_1 with k the longest runs and L = 1.5
    bounding a run's sum of |weights| (BICUBIC's negative lobes)."""
    r = pxvm.Runner(pxvm.Program.from_plan(os.path.join(ROOT, "programs", "uniform.json")))
    H, W = 97, 131
    for ow, oh in ((64, 48), (192, 160)):
        p = A.plan(r, (H, W), "stretch:" + filt, size=(ow, oh), normalize="none")
        g = torch.randn((p.n, 3, 16, 16), dtype=torch.float64, generator=torch.Generator().manual_seed(ow))
        ours = p.transpose(g)
        x = torch.zeros((1, 3, H, W), dtype=torch.float64, requires_grad=True)
        F.interpolate(x, size=(oh, ow), mode=mode, align_corners=False, antialias=True).backward(
            tiles_to_canvas(g, oh // 16, ow // 16)[None] * float(p.scale[0]))
        f = A.FILTERS[filt]
        kx = max(len(k) for k in A.resize_table(W, ow, f)[1])
        ky = max(len(k) for k in A.resize_table(H, oh, f)[1])
        bound = (kx + ky) * 2.0 ** -23 * 1.5 * (g.abs().sum().item() * float(p.scale[0]))
        err = (ours - x.grad[0]).abs().sum().item()
        assert 0 < err <= bound


def test_not_covered_is_said():
    """A program outside the covered cases is a NotImplementedError naming its instruction; the
    fit policy (a pad) too; the fixation gets no gradient (docs/autograd.md says why)."""
    prog = pxvm.Program.load(pxvm.programs.path("aniso"))
    r = pxvm.Runner(prog)
    x = torch.zeros((prog.inputs[0].h, prog.inputs[0].w, 3), requires_grad=True)
    with pytest.raises(NotImplementedError, match="ANISO"):
        A.tokens(r, x)
    with pytest.raises(TypeError, match="float tensor"):   # a uint8 image: the frozen mode's input
        A.tokens(pxvm.Runner(pxvm.Program.load(pxvm.programs.path("foveate273"))),
                 torch.zeros((300, 451, 3), dtype=torch.uint8))
    with pytest.raises(NotImplementedError, match="crop"):
        A.tokens(pxvm.Runner(pxvm.Program.load(pxvm.programs.path("foveate273"))),
                 torch.zeros((200, 300, 3), requires_grad=True), policy="crop")
    rl = pxvm.Runner(relative_logpolar())
    fx = torch.tensor([0.4, 0.5], dtype=torch.float64, requires_grad=True)
    t = A.tokens(rl, torch.from_numpy(photo()).float().requires_grad_(True), fixation=fx.detach().numpy())
    t.sum().backward()
    assert fx.grad is None


@needs_cuda
@pytest.mark.parametrize("which", [0, 1])
def test_cpu_and_cuda_give_the_same_bits(which):
    """The same tokens from the cuda executor, and the same gradient bits from the transpose on
    the GPU as on the CPU (elementwise float64 steps in one fixed order, no atomics, no BLAS)."""
    _, policy = runners()[which]
    prog = pxvm.Program.load(pxvm.programs.path("foveate273")) if which == 0 else \
        pxvm.Program.from_plan(os.path.join(ROOT, "programs", "uniform.json"))
    rc, rg = pxvm.Runner(prog, executor="cpu"), pxvm.Runner(prog, executor="cuda")
    im = torch.from_numpy(photo()).float()
    g = torch.randn((273, 3, 16, 16) if which == 0 else (504, 3, 16, 16), generator=torch.Generator().manual_seed(6))
    xc, xg = im.clone().requires_grad_(True), im.cuda().requires_grad_(True)
    tc, tg = A.tokens(rc, xc, policy=policy), A.tokens(rg, xg, policy=policy)
    assert tg.is_cuda and torch.equal(tc, tg.cpu())
    tc.backward(g)
    was = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)   # nothing the GPU backward uses is refused
    try:
        tg.backward(g.cuda())
    finally:
        torch.use_deterministic_algorithms(was)
    assert torch.equal(xc.grad, xg.grad.cpu())
    grads = []
    for _ in range(10):
        xr = im.cuda().requires_grad_(True)
        A.tokens(rg, xr, policy=policy).backward(g.cuda())
        grads.append(xr.grad)
    assert all(torch.equal(grads[0], gi) for gi in grads[1:])
    p = A.plan(rc, tuple(im.shape[:2]), policy, geometry=None if policy else rc.geometry(exact=True)[0])
    gd = torch.randn((p.n, 3, 16, 16), dtype=torch.float64, generator=torch.Generator().manual_seed(8))
    assert torch.equal(p.transpose(gd), p.transpose(gd.cuda()).cpu())
    g32 = gd.cuda().float()
    p.transpose_hwc(g32, torch.float32)                      # the float32 zero block made once
    ops = count_ops(lambda: p.transpose_hwc(g32, torch.float32))   # launches on the GPU
    assert len(ops) <= 12, ops


@needs_cuda
def test_cpu_and_cuda_transpose_the_small_plans_alike():
    """Every dense-reference plan (several rounds of chunks for PILE, a policy's resize composed,
    RESIZE up and down): the transpose's bits on the GPU are the CPU's, for float64 and float32
    gradients, and the CUDA result is the dense reference's (exact integer case) too."""
    for case, (p, exact) in enumerate(dense_cases()):
        gen = torch.Generator().manual_seed(20 + case)
        for g in (torch.randn((p.n, 3, p.ph, p.pw), dtype=torch.float64, generator=gen),
                  torch.randn((p.n, 3, p.ph, p.pw), generator=gen),
                  torch.randint(-2, 3, (p.n, 3, p.ph, p.pw), generator=gen).double()):
            for dtype in (torch.float64, torch.float32):
                cpu = p.transpose_hwc(g, dtype)
                gpu = p.transpose_hwc(g.cuda(), dtype)
                assert gpu.is_cuda and gpu.dtype == dtype and torch.equal(cpu, gpu.cpu()), (case, g.dtype, dtype)


def test_cuda_graph_takes_a_cuda_image():
    """cuda_graph=True replays the backward as a CUDA graph: on a CPU image it is refused by name
    (ValueError naming the device), cuda_graph=False on the same image runs; not a bool: TypeError."""
    r, _ = runners()[0]
    x = torch.from_numpy(photo()).float().requires_grad_(True)
    A.tokens(r, x, cuda_graph=False).sum().backward()
    assert x.grad.abs().sum() > 0
    with pytest.raises(ValueError, match="cuda_graph=True takes a CUDA image, got one on cpu"):
        A.tokens(r, x, cuda_graph=True)
    with pytest.raises(TypeError, match="cuda_graph is True or False, got 'yes'"):
        A.tokens(r, x, cuda_graph="yes")


@needs_cuda
@pytest.mark.parametrize("which", [0, 1])
def test_cuda_graph_backward_is_the_eager_bits(which):
    """The graphed backward replays the eager launches: the same gradient bits as the eager CUDA
    path and the CPU path, over 10 passes; each pass returns its own tensor (the graph's output
    buffer is copied out: an earlier gradient is not overwritten by a later pass)."""
    _, policy = runners()[which]
    prog = pxvm.Program.load(pxvm.programs.path("foveate273")) if which == 0 else \
        pxvm.Program.from_plan(os.path.join(ROOT, "programs", "uniform.json"))
    rc, rg = pxvm.Runner(prog, executor="cpu"), pxvm.Runner(prog, executor="cuda")
    im = torch.from_numpy(photo()).float()
    n = 273 if which == 0 else 504
    xc = im.clone().requires_grad_(True)
    g = torch.randn((n, 3, 16, 16), generator=torch.Generator().manual_seed(14))
    A.tokens(rc, xc, policy=policy).backward(g)
    grads = []
    for k in range(10):
        xg = im.cuda().requires_grad_(True)
        A.tokens(rg, xg, policy=policy, cuda_graph=True).backward(g.cuda() * (1 if k % 2 == 0 else 2))
        grads.append(xg.grad)
    assert torch.equal(grads[0].cpu(), xc.grad)
    assert all(torch.equal(grads[0], gi) for gi in grads[2::2])
    assert not torch.equal(grads[0], grads[1])     # pass 1 (2 g) did not overwrite pass 0's gradient
    xe = im.cuda().requires_grad_(True)
    A.tokens(rg, xe, policy=policy).backward(g.cuda() * 2)
    assert torch.equal(grads[1], xe.grad)

