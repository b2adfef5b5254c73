"""The seeds' API (python/pxvm/seeds.py) on the executor under test (CPU in CI, CUDA-GL with
PXVM_TEST_EXECUTOR=cuda): mipmaps == pxvm.pyramid == a NumPy reference; sample_foveated and
sample_anisotropic == Runner.patches of the plan program byte for byte (and foveate273 itself);
sample_at_level == the crop of the level it samples; float tokens == a NumPy reference of the rule
bit for bit (float32, float16, bfloat16) and == Runner.tokens of the plan program in every layout,
positions == Runner.positions; batches == loops; persistent textures updated in part or
incrementally == the full recompute on the same image; bad input raises the package's classes
naming the value; the program cache stays bounded; every docstring example runs."""
import doctest
import math
import pydoc

import numpy as np
import pytest

import pxvm
from pxvm import seeds
from conftest import EXECUTOR, ROOT

W, H = 451, 300


def host(x):
    return x if isinstance(x, np.ndarray) else x.cpu().numpy()


def rgb_chw(patches):
    """Runner.patches (N, p, p, 4) -> the tokens' (N, 3, p, p)."""
    return host(patches)[..., :3].transpose(0, 3, 1, 2)


def grid_plan(fixation, budget=273, m0=1.0, e0=0.5, patch=16, scheme="grid", **kw):
    p = {"image": [W, H], "fixation": list(fixation), "budget": budget, "scheme": scheme, "m0": m0, "e0": e0,
         "scale": 1.0, "patch": patch}
    p.update(kw)
    return p


def reference_mipmaps(rgba):
    """(a+b+c+d+2)>>2 over 2x2 blocks, for power-of-two sides."""
    out = [rgba]
    while max(out[-1].shape[:2]) > 1:
        a = out[-1].astype(np.uint32)
        out.append(((a[0::2, 0::2] + a[0::2, 1::2] + a[1::2, 0::2] + a[1::2, 1::2] + 2) >> 2).astype(np.uint8))
    return out


def rgba_of(rgb):
    return np.concatenate([rgb, np.full(rgb.shape[:2] + (1,), 255, np.uint8)], axis=2)


def float_reference(u8, mean=None, std=None):
    """The rule, one float32 step at a time, element by element as Python would (np.float32 scalars)."""
    scale = np.float32(1.0 / 255.0)
    x = np.empty(u8.shape, np.float32)
    flat_u, flat_x = u8.reshape(-1, 3, u8.shape[-2] * u8.shape[-1]), x.reshape(-1, 3, u8.shape[-2] * u8.shape[-1])
    for c in range(3):
        col = flat_u[:, c, :].astype(np.float32) * scale
        if mean is not None:
            col = (col - np.float32(mean[c])) / np.float32(std[c])
        flat_x[:, c, :] = col
    return x


def preset(name):
    """(mean, std) of a normalize preset, from the library's one table (pxvm.tokens.token_format)."""
    f = pxvm.tokens.token_format("float32", name)
    return tuple(f.mean[:3]), tuple(f.std[:3])


def layout_of(chw, layout):
    """(..., C, p, p) -> the layout's arrangement."""
    if layout == "nhwc":
        return np.ascontiguousarray(np.moveaxis(chw, -3, -1))
    if layout == "flat":
        return chw.reshape(chw.shape[:-3] + (-1,))
    return chw


def bf16_bits_reference(f32):
    """float32 -> bfloat16 bits, round to nearest, ties to even (no NaN here)."""
    b = f32.view(np.uint32).astype(np.uint64)
    return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)


@pytest.fixture(scope="module")
def photo():
    return pxvm.load_image(ROOT + "/programs/data/chelsea.png")


@pytest.fixture(scope="module")
def tex(photo):
    return pxvm.TexturePyramid(photo, executor=EXECUTOR)


# ---- mipmaps --------------------------------------------------------------------------------------

def test_generate_mipmaps_equals_pyramid_and_a_numpy_reference(photo):
    rng = np.random.default_rng(1)
    img = rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)
    got = pxvm.generate_mipmaps(img, executor=EXECUTOR)
    want = reference_mipmaps(rgba_of(img))
    assert [g.shape for g in got] == [w.shape for w in want] and len(got) == 6
    assert all(np.array_equal(g, w) for g, w in zip(got, want))
    # odd sizes (OpenGL's floor halving): the bytes of pxvm.pyramid
    got = pxvm.generate_mipmaps(photo, executor=EXECUTOR)
    want = pxvm.pyramid(photo)
    assert len(got) == 9 and all(np.array_equal(g, w) for g, w in zip(got, want))
    assert pxvm.TexturePyramid(photo, executor=EXECUTOR).levels[4].shape == (18, 28, 4)


def test_generate_mipmaps_of_a_batch_is_the_loop_and_chw_is_hwc():
    rng = np.random.default_rng(2)
    b = rng.integers(0, 256, (3, 20, 36, 3), dtype=np.uint8)
    got = pxvm.generate_mipmaps(b.transpose(0, 3, 1, 2), executor=EXECUTOR)  # (B, C, H, W), strided
    assert got[0].shape == (3, 20, 36, 4) and len(got) == 6
    for i in range(3):
        one = pxvm.generate_mipmaps(b[i], executor=EXECUTOR)
        assert all(np.array_equal(g[i], o) for g, o in zip(got, one))


# ---- sampling == the programs ---------------------------------------------------------------------

def test_sample_foveated_is_foveate273_at_the_middle(photo, tex):
    want = rgb_chw(pxvm.Runner(pxvm.Program.load(ROOT + "/programs/foveate273.pxi"), executor=EXECUTOR).patches(photo))
    got = tex.sample_foveated((0.5, 0.5), levels=5, dtype="uint8")
    assert got.shape == (273, 3, 16, 16) and got.dtype == np.uint8
    assert np.array_equal(got, want)


@pytest.mark.parametrize("fixation,kw", [((0.2, 0.7), {}), ((0.0, 1.0), {"M0": 2.0, "e0": 0.25}),
                                         ((0.61, 0.33), {"num_patches": 50, "patch": 8, "levels": 4})])
def test_sample_foveated_equals_runner_patches_of_the_plan(photo, tex, fixation, kw):
    plan = grid_plan(fixation, budget=kw.get("num_patches", 273), m0=kw.get("M0", 1.0), e0=kw.get("e0", 0.5),
                     patch=kw.get("patch", 16), **({"levels": kw["levels"]} if "levels" in kw else {}))
    want = rgb_chw(pxvm.Runner(pxvm.Program.from_plan(plan), executor=EXECUTOR).patches(photo))
    got = tex.sample_foveated(fixation, dtype="uint8", **kw)
    assert got.shape == want.shape and np.array_equal(got, want)


def test_sample_anisotropic_equals_runner_patches_of_the_plan(photo, tex):
    plan = grid_plan((0.3, 0.45), budget=64, scheme="aniso", angle=-35.0, elongation=3.0, taps=5)
    want = rgb_chw(pxvm.Runner(pxvm.Program.from_plan(plan), executor=EXECUTOR).patches(photo))
    got = tex.sample_anisotropic((0.3, 0.45), -35.0, num_patches=64, elongation=3.0, taps=5, dtype="uint8")
    assert np.array_equal(got, want)
    assert not np.array_equal(got, tex.sample_anisotropic((0.3, 0.45), 55.0, num_patches=64, elongation=3.0,
                                                          taps=5, dtype="uint8"))


def test_sample_at_level_is_the_crop_of_that_level(tex):
    """A centre on a texel corner of level L samples that level's texels exactly (step 2^L)."""
    pts, lv, want = [], [], []
    for L, (kx, ky) in [(0, (100, 50)), (1, (40, 30)), (2, (20, 18)), (3, (10, 9)), (4, (12, 5))]:
        pts.append((kx * 2 ** L / W, ky * 2 ** L / H))
        lv.append(L)
        want.append(tex.levels[L][ky - 4:ky + 4, kx - 4:kx + 4, :3].transpose(2, 0, 1))
    got = tex.sample_at_level(pts, lv, patch=8, dtype="uint8")
    assert got.shape == (5, 3, 8, 8)
    for k in range(5):
        assert np.array_equal(got[k], want[k]), k
    one = tex.sample_at_level(pts[2:3], 2, patch=8, dtype="uint8")  # one level for every point
    assert np.array_equal(one[0], want[2])


# ---- float tokens ---------------------------------------------------------------------------------

@pytest.mark.parametrize("normalize", ["none", "clip", "siglip", "imagenet", ((0.1, 0.2, 0.3), (0.7, 0.5, 0.3))])
def test_float_tokens_are_the_rule_bit_for_bit(tex, normalize):
    u8 = tex.sample_foveated((0.4, 0.6), num_patches=40, dtype="uint8")
    if normalize == "none":
        want = float_reference(u8)
    else:
        mean, std = preset(normalize) if isinstance(normalize, str) else normalize
        want = float_reference(u8, mean, std)
    got = tex.sample_foveated((0.4, 0.6), num_patches=40, normalize=normalize)
    assert got.dtype == np.float32 and got.shape == (40, 3, 16, 16)
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))
    half = tex.sample_foveated((0.4, 0.6), num_patches=40, normalize=normalize, dtype=np.float16)
    assert half.dtype == np.float16 and np.array_equal(half.view(np.uint16), want.astype(np.float16).view(np.uint16))
    if normalize == "none":
        assert got.min() >= 0 and got.max() <= 1
        assert np.array_equal(np.rint(got * 255).astype(np.uint8), u8)  # the rescale loses nothing


def test_bfloat16_and_torch_tokens(photo):
    torch = pytest.importorskip("torch")
    t = torch.from_numpy(photo).permute(2, 0, 1)  # (C, H, W) view, RGBA
    tp = pxvm.TexturePyramid(t, executor=EXECUTOR)
    u8 = tp.sample_foveated((0.5, 0.3), num_patches=30, dtype="uint8")
    assert isinstance(u8, torch.Tensor) and u8.dtype == torch.uint8 and u8.device.type == "cpu"
    assert np.array_equal(u8.numpy(), pxvm.TexturePyramid(photo, executor=EXECUTOR).sample_foveated(
        (0.5, 0.3), num_patches=30, dtype="uint8"))
    want = float_reference(u8.numpy(), *preset("siglip"))
    bf = tp.sample_foveated((0.5, 0.3), num_patches=30, dtype=torch.bfloat16, normalize="siglip")
    assert bf.dtype == torch.bfloat16 and bf.shape == (30, 3, 16, 16)
    assert np.array_equal(bf.view(torch.int16).numpy().view(np.uint16), bf16_bits_reference(want))
    f32 = tp.sample_foveated((0.5, 0.3), num_patches=30, normalize="siglip")
    assert f32.dtype == torch.float32 and np.array_equal(f32.numpy().view(np.uint32), want.view(np.uint32))


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("layout", ["nchw", "nhwc", "flat"])
@pytest.mark.parametrize("alpha", [False, True])
def test_tokens_are_runner_tokens_of_the_plan_in_every_layout(photo, tex, dtype, layout, alpha):
    """Every output argument of Runner.tokens, through the seeds' calls: the same bits as
    Runner.tokens of the plan program, and the uint8 tokens in that layout are its Runner.patches."""
    if dtype == "bfloat16":
        torch = pytest.importorskip("torch")
    fix, n, norm = (0.35, 0.55), 36, ("imagenet" if not alpha else ((0.1, 0.2, 0.3, 0.4), (0.5, 0.6, 0.7, 0.8)))
    r = pxvm.Runner(pxvm.Program.from_plan(grid_plan(fix, budget=n)), executor=EXECUTOR)
    want = r.tokens(photo, dtype=dtype, normalize=norm, layout=layout, alpha=alpha)
    got = tex.sample_foveated(fix, num_patches=n, dtype=dtype, normalize=norm, layout=layout, alpha=alpha)
    c = 4 if alpha else 3
    shape = {"nchw": (n, c, 16, 16), "nhwc": (n, 16, 16, c), "flat": (n, c * 256)}[layout]
    assert tuple(got.shape) == shape and got.dtype == want.dtype
    if dtype == "bfloat16":  # NumPy images too: a torch CPU tensor, as Runner.tokens gives it
        assert isinstance(got, torch.Tensor) and got.device.type == "cpu"
        got, want = got.view(torch.int16).numpy(), want.view(torch.int16).numpy()
    assert np.array_equal(got.view(np.uint8), want.view(np.uint8))
    u8 = tex.sample_foveated(fix, num_patches=n, dtype="uint8", layout=layout, alpha=alpha)
    p = r.patches(photo)[..., :c].transpose(0, 3, 1, 2)
    assert u8.dtype == np.uint8 and np.array_equal(u8, layout_of(p, layout))
    if dtype == "float32" and not alpha:  # and the NumPy reference of the rule, bit for bit
        ref = layout_of(float_reference(p, *preset("imagenet")), layout)
        assert np.array_equal(got.view(np.uint32), ref.view(np.uint32))


def test_positions_are_runner_positions_of_the_program(photo, tex):
    r = pxvm.Runner(pxvm.Program.from_plan(grid_plan((0.7, 0.2), budget=49)), executor=EXECUTOR)
    r.patches(photo)
    want = r.positions()
    tok, pos = tex.sample_foveated((0.7, 0.2), num_patches=49, with_positions=True)
    assert tok.shape == (49, 3, 16, 16) and pos.grid.shape == (49, 2) and pos.rope.shape == (3, 49)
    for f in ("centre", "step", "level", "normalized", "grid", "rope", "written"):
        assert np.array_equal(getattr(pos, f), getattr(want, f)), f
    u8, pos8 = tex.sample_foveated((0.7, 0.2), num_patches=49, dtype="uint8", with_positions=True)
    assert np.array_equal(pos8.centre, want.centre)
    _, at = tex.sample_at_level([(0.25, 0.5), (0.75, 0.25)], [1, 3], patch=8, with_positions=True)
    assert np.array_equal(at.level, [1.0, 3.0]) and np.array_equal(at.step, [[2.0, 2.0], [8.0, 8.0]])
    assert np.array_equal(at.centre, [[0.25 * W, 0.5 * H], [0.75 * W, 0.25 * H]])
    _, an = tex.sample_anisotropic((0.5, 0.5), 20.0, num_patches=16, with_positions=True)
    assert an.written.all() and len(an.level) == 16


# ---- batches --------------------------------------------------------------------------------------

def batch_of(photo):
    return np.stack([photo[..., :3], photo[::-1, :, :3], photo[:, ::-1, :3], photo[::-1, ::-1, :3]])


def test_batches_equal_loops(photo):
    b = batch_of(photo)  # (B, H, W, 3)
    chw = b.transpose(0, 3, 1, 2)  # (B, C, H, W), a strided view
    bt = pxvm.TexturePyramid(chw, executor=EXECUTOR)
    assert (bt.batch, bt.height, bt.width) == (4, H, W)
    fix = [(0.2, 0.3), (0.8, 0.1), (0.2, 0.3), (0.5, 0.5)]  # items 0 and 2 share a program: one batch run
    got = bt.sample_foveated(fix, num_patches=100, dtype="uint8")
    ang = [0.0, 30.0, 30.0, -60.0]
    aniso = bt.sample_anisotropic(fix, ang, num_patches=36, dtype="uint8")
    uv = np.array([[(0.1, 0.1), (0.5, 0.9)], [(0.3, 0.3), (0.6, 0.2)], [(0.1, 0.1), (0.5, 0.9)], [(1, 1), (0, 0)]])
    at = bt.sample_at_level(uv, [1, 2], dtype="uint8")
    same = bt.sample_foveated((0.7, 0.4), num_patches=100, normalize="clip")  # one fixation for all
    assert got.shape == (4, 100, 3, 16, 16) and aniso.shape == (4, 36, 3, 16, 16) and at.shape == (4, 2, 3, 16, 16)
    for i in range(4):
        one = pxvm.TexturePyramid(b[i], executor=EXECUTOR)
        assert np.array_equal(got[i], one.sample_foveated(fix[i], num_patches=100, dtype="uint8")), i
        assert np.array_equal(aniso[i], one.sample_anisotropic(fix[i], ang[i], num_patches=36, dtype="uint8")), i
        assert np.array_equal(at[i], one.sample_at_level(uv[i], [1, 2], dtype="uint8")), i
        assert np.array_equal(same[i].view(np.uint32), one.sample_foveated((0.7, 0.4), num_patches=100,
                                                                          normalize="clip").view(np.uint32)), i
    # float tokens written item by item into one result: items 0 and 2 one run, 1 and 3 their own
    f16, pos = bt.sample_anisotropic(fix, ang, num_patches=36, dtype="float16", normalize="clip", layout="nhwc",
                                     with_positions=True)
    assert f16.shape == (4, 36, 16, 16, 3) and f16.dtype == np.float16 and len(pos) == 4
    ref = float_reference(aniso, *preset("clip")).astype(np.float16)
    assert np.array_equal(f16.view(np.uint16), np.moveaxis(ref, -3, -1).view(np.uint16))
    for i in range(4):
        one = pxvm.TexturePyramid(b[i], executor=EXECUTOR)
        _, p1 = one.sample_anisotropic(fix[i], ang[i], num_patches=36, with_positions=True)
        assert np.array_equal(pos[i].centre, p1.centre) and np.array_equal(pos[i].level, p1.level), i
    f32 = bt.sample_at_level(uv, [1, 2], layout="flat")
    assert f32.shape == (4, 2, 3 * 256) and np.array_equal(
        f32.view(np.uint32), float_reference(at).reshape(4, 2, -1).view(np.uint32))
    shared = bt.sample_at_level(uv[0], 1, dtype="uint8")  # (N, 2): the same points for every item
    assert all(np.array_equal(shared[i], pxvm.TexturePyramid(b[i], executor=EXECUTOR).sample_at_level(
        uv[0], 1, dtype="uint8")) for i in range(4))


def test_torch_batches_equal_numpy_batches(photo):
    torch = pytest.importorskip("torch")
    b = batch_of(photo)
    fix = torch.tensor([[0.25, 0.5], [0.75, 0.5], [0.5, 0.25], [0.5, 0.75]], dtype=torch.float64)
    got = pxvm.TexturePyramid(torch.from_numpy(b).permute(0, 3, 1, 2), executor=EXECUTOR).sample_foveated(
        fix, num_patches=49, dtype="uint8")
    want = pxvm.TexturePyramid(b, executor=EXECUTOR).sample_foveated(fix.numpy(), num_patches=49, dtype="uint8")
    assert isinstance(got, torch.Tensor) and np.array_equal(got.numpy(), want)
    tb = pxvm.TexturePyramid(torch.from_numpy(b), executor=EXECUTOR)
    fix2 = fix[[0, 1, 0, 3]]  # items 0 and 2 share a program
    bf = tb.sample_foveated(fix2, num_patches=49, dtype=torch.bfloat16, normalize="siglip")
    f32 = tb.sample_foveated(fix2, num_patches=49, normalize="siglip")
    ref = float_reference(tb.sample_foveated(fix2, num_patches=49, dtype="uint8").numpy(), *preset("siglip"))
    assert isinstance(f32, torch.Tensor) and f32.dtype == torch.float32 and f32.shape == (4, 49, 3, 16, 16)
    assert np.array_equal(f32.numpy().view(np.uint32), ref.view(np.uint32))
    assert np.array_equal(bf.view(torch.int16).numpy().view(np.uint16), bf16_bits_reference(ref))


@pytest.mark.skipif(EXECUTOR != "cuda", reason="CUDA tensors: the GPU check (PXVM_TEST_EXECUTOR=cuda)")
def test_cuda_tensors_give_cuda_tokens_with_the_host_bytes(photo):
    torch = pytest.importorskip("torch")
    b = batch_of(photo)
    dev = torch.from_numpy(b).cuda().permute(0, 3, 1, 2)
    fix = [(0.2, 0.3), (0.8, 0.1), (0.2, 0.3), (0.5, 0.5)]
    tp = pxvm.TexturePyramid(dev, executor="cuda")
    want = pxvm.TexturePyramid(b, executor="cpu")
    u8 = tp.sample_foveated(fix, num_patches=64, dtype="uint8")
    assert u8.is_cuda and np.array_equal(u8.cpu().numpy(), want.sample_foveated(fix, num_patches=64, dtype="uint8"))
    bf = tp.sample_foveated(fix, num_patches=64, dtype="bfloat16", normalize="clip")
    assert bf.is_cuda and bf.dtype == torch.bfloat16
    ref = float_reference(want.sample_foveated(fix, num_patches=64, dtype="uint8"), *preset("clip"))
    assert np.array_equal(bf.cpu().view(torch.int16).numpy().view(np.uint16), bf16_bits_reference(ref))
    assert all(np.array_equal(g, w) for g, w in zip(tp.levels, want.levels))
    f32 = tp.sample_foveated(fix, num_patches=64, normalize="imagenet", layout="flat")
    ref = float_reference(want.sample_foveated(fix, num_patches=64, dtype="uint8"), *preset("imagenet"))
    assert f32.is_cuda and np.array_equal(f32.cpu().numpy().view(np.uint32), ref.reshape(4, 64, -1).view(np.uint32))
    one = pxvm.TexturePyramid(dev[1], executor="cuda").sample_foveated(fix[1], num_patches=64, dtype="float16")
    assert one.is_cuda and np.array_equal(one.cpu().numpy().view(np.uint16),
                                          float_reference(want.sample_foveated(fix, num_patches=64, dtype="uint8")[1])
                                          .astype(np.float16).view(np.uint16))
    tex = pxvm.create_persistent(dev[0], fixation=(0.3, 0.6), num_patches=48, executor="cuda")
    sub = torch.full((3, 20, 30), 77, dtype=torch.uint8, device="cuda")
    tok, changed = tex.update_partial(sub, (50, 10), dtype="uint8")
    assert tok.is_cuda and changed.is_cuda
    ref_img = b[0].copy()
    ref_img[10:30, 50:80] = 77
    assert np.array_equal(tok.cpu().numpy(), pxvm.TexturePyramid(ref_img).sample_foveated(
        (0.3, 0.6), num_patches=48, dtype="uint8"))
    bf = tex.tokens(dtype="bfloat16", normalize="clip")
    assert bf.is_cuda and np.array_equal(bf.cpu().view(torch.int16).numpy().view(np.uint16),
                                         bf16_bits_reference(float_reference(tok.cpu().numpy(), *preset("clip"))))


# ---- persistent textures --------------------------------------------------------------------------

def moving_frames(n, w, h, seed):
    rng = np.random.default_rng(seed)
    base = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
    out = []
    for t in range(n):
        f = base.copy()
        for k in range(3):
            x, y = (7 * t + 40 * k) % (w - 12), (3 * t + 25 * k) % (h - 12)
            f[y:y + 12, x:x + 12] = (60 * k, 255 - 60 * k, 128)
        f[:6, :6] = rng.integers(0, 256, (6, 6, 3), dtype=np.uint8) // 32 + 100
        out.append(f)
    return out


def full(image, fixation, n):
    """The full recompute: a fresh pyramid and the plan program, tokens and levels."""
    tp = pxvm.TexturePyramid(image, executor=EXECUTOR)
    return tp.sample_foveated(fixation, num_patches=n, dtype="uint8"), tp.levels


def test_update_partial_equals_the_full_recompute():
    w, h, fix, n = 150, 100, (0.4, 0.6), 48
    rng = np.random.default_rng(3)
    img = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
    tex = pxvm.create_persistent(img, fixation=fix, num_patches=n, executor=EXECUTOR)
    tokens, levels = full(img, fix, n)
    assert tex.frames == 1 and np.array_equal(host(tex.tokens(dtype="uint8")), tokens)
    assert all(np.array_equal(a, b) for a, b in zip(tex.levels, levels))
    for (x, y, sw, sh) in [(50, 10, 30, 20), (0, 0, 1, 1), (149, 99, 1, 1), (0, 60, 150, 40), (33, 17, 5, 70)]:
        sub = rng.integers(0, 256, (sh, sw, 3), dtype=np.uint8)
        img[y:y + sh, x:x + sw] = sub
        if sw not in (1, 3, 4):  # any layout: (C, H, W) where it is not read as (H, W, C)
            sub = sub.transpose(2, 0, 1)
        prev = host(tex.tokens(dtype="uint8"))
        got, changed = pxvm.update_partial(tex, sub, (x, y), dtype="uint8")
        got, changed = host(got), host(changed)
        tokens, levels = full(img, fix, n)
        assert np.array_equal(got, tokens), (x, y)
        assert all(np.array_equal(a, b) for a, b in zip(tex.levels, levels)), (x, y)
        moved = np.any((got != prev).reshape(n, -1), axis=1)
        assert not np.any(moved & ~changed), (x, y)  # a changed token is always marked
    assert changed.dtype == bool and 0 < changed.sum() < n  # a narrow band touched some tokens, not all


@pytest.mark.parametrize("threshold", [0, 16])
def test_update_mipmaps_incremental_equals_the_full_recompute(threshold):
    """At threshold 0 the texture is the frame; at any threshold its tokens and levels are those of
    the full recompute on its current image (level 0 of .levels)."""
    w, h, fix, n = 150, 100, (0.55, 0.45), 60
    frames = moving_frames(8, w, h, threshold)
    tex = pxvm.create_persistent(frames[0], fixation=fix, num_patches=n, threshold=threshold, executor=EXECUTOR)
    skipped = 0
    for i, f in enumerate(frames[1:]):
        got, changed = pxvm.update_mipmaps_incremental(tex, f, dtype="uint8")
        got, changed = host(got), host(changed)
        cur = tex.levels[0]
        if threshold == 0:
            assert np.array_equal(cur, rgba_of(f)), i
        tokens, levels = full(cur, fix, n)
        assert np.array_equal(got, tokens), (threshold, i)
        assert all(np.array_equal(a, b) for a, b in zip(tex.levels, levels)), (threshold, i)
        skipped += int((~changed).sum())
    assert skipped > 0 and tex.frames == len(frames)
    # dirty rectangles: only they are taken as changed
    g = frames[0].copy()
    g[0:16, 0:16] = 0
    got, changed = tex.update_mipmaps_incremental(g, dirty=[(0, 0, 16, 16)], dtype="uint8")
    assert tex.levels[0][0:16, 0:16, :3].max() == 0
    f32, _ = tex.update_mipmaps_incremental(g, dirty=[], normalize="clip")  # nothing changed: the same tokens
    assert np.array_equal(host(f32).view(np.uint32), float_reference(host(got), *preset("clip")).view(
        np.uint32))


# ---- bad input ------------------------------------------------------------------------------------

def raises(cls, match, fn, *a, **kw):
    with pytest.raises(cls) as e:
        fn(*a, **kw)
    assert match in str(e.value), str(e.value)


def test_bad_input_is_refused_naming_the_value(photo, tex):
    U = pxvm.UsageError
    raises(U, "shape (2, 3, 4, 5, 6)", pxvm.TexturePyramid, np.zeros((2, 3, 4, 5, 6), np.uint8))
    raises(U, "shape (10, 10, 5)", pxvm.TexturePyramid, np.zeros((10, 10, 5), np.uint8))
    raises(TypeError, "uint8", pxvm.TexturePyramid, np.zeros((10, 10, 3), np.float32))
    raises(U, "x = 1.5 is not in [0, 1]", tex.sample_foveated, (1.5, 0.5))
    raises(U, "y = -0.1 is not in [0, 1]", tex.sample_foveated, (0.5, -0.1))
    raises(U, "x = nan is not in [0, 1]", tex.sample_anisotropic, (math.nan, 0.5), 10)
    raises(U, "fixation: shape (3,)", tex.sample_foveated, (0.5, 0.5, 0.5))
    raises(U, "dtype 'int8' is none of", tex.sample_foveated, (0.5, 0.5), dtype="int8")
    # the output arguments: Runner.tokens' checks and words (pxvm.tokens, the library)
    raises(U, "no normalization preset 'clip2'", tex.sample_foveated, (0.5, 0.5), normalize="clip2")
    raises(U, "needs 3 values each", tex.sample_foveated, (0.5, 0.5), normalize=((0.5, 0.5), (1, 1, 1)))
    raises(U, "std[1] = 0 is not a finite, non-zero float32", tex.sample_foveated, (0.5, 0.5),
           normalize=((0.5, 0.5, 0.5), (1, 0, 1)))
    raises(U, "mean[0] = nan is not a finite float32", tex.sample_anisotropic, (0.5, 0.5), 10,
           normalize=((math.nan, 0.5, 0.5), (1, 1, 1)))
    raises(U, "layout 'nwhc' is none of nchw, nhwc, flat", tex.sample_foveated, (0.5, 0.5), layout="nwhc")
    raises(U, "layout 'nwhc' is none of nchw, nhwc, flat", tex.sample_foveated, (0.5, 0.5), dtype="uint8",
           layout="nwhc")
    raises(U, "alpha is True or False, not 1", tex.sample_at_level, [(0.5, 0.5)], 0, alpha=1)
    raises(U, "alpha is True or False, not 1", tex.sample_at_level, [(0.5, 0.5)], 0, dtype="uint8", alpha=1)
    raises(U, "dtype 'uint8' gives the VM's bytes", tex.sample_foveated, (0.5, 0.5), dtype="uint8", normalize="clip")
    raises(U, "num_patches = 2.5: an integer is needed", tex.sample_foveated, (0.5, 0.5), num_patches=2.5)
    raises(U, "num_patches = 0 is not in 1..65536", tex.sample_foveated, (0.5, 0.5), num_patches=0)
    raises(U, "M0 = nan: a finite number", tex.sample_foveated, (0.5, 0.5), M0=float("nan"))
    # the plan compiler's own range check, its class and words
    raises(pxvm.PlanError, "'e0' = 1000000000.0 is outside", tex.sample_foveated, (0.5, 0.5), e0=1e9)
    raises(U, "orientation = inf", tex.sample_anisotropic, (0.5, 0.5), float("inf"))
    raises(U, "uv (point 1): y = 2.0 is not in [0, 1]", tex.sample_at_level, [(0.5, 0.5), (0.5, 2.0)], 0)
    raises(U, "uv: shape (2,)", tex.sample_at_level, (0.5, 0.5), 0)
    raises(U, "level = 9 is not in 0..8", tex.sample_at_level, [(0.5, 0.5)], 9)
    raises(U, "level = 1.5: an integer", tex.sample_at_level, [(0.5, 0.5)], 1.5)
    bt = pxvm.TexturePyramid(batch_of(photo), executor=EXECUTOR)
    raises(U, "fixation: shape (3, 2): give (x, y) or (B, 2) with B = 4", bt.sample_foveated, [(0.5, 0.5)] * 3)
    raises(U, "fixation (item 2): x = 1.25", bt.sample_foveated, [(0.5, 0.5)] * 2 + [(1.25, 0.5)] + [(0, 0)])
    raises(U, "orientation: shape (3,)", bt.sample_anisotropic, (0.5, 0.5), [1, 2, 3])
    raises(U, "not a batch", pxvm.create_persistent, batch_of(photo))
    small = pxvm.create_persistent(np.zeros((32, 48, 3), np.uint8), num_patches=4, executor=EXECUTOR)
    raises(U, "a 10x5 sub-image at (40, 0) leaves the 48x32 texture", small.update_partial,
           np.zeros((5, 10, 3), np.uint8), (40, 0))
    raises(U, "offset x = -1 is not in 0..47", small.update_partial, np.zeros((5, 10, 3), np.uint8), (-1, 0))
    raises(U, "the frame is 32x48, the texture 48x32", small.update_mipmaps_incremental,
           np.zeros((48, 32, 3), np.uint8))
    raises(U, "threshold = 300 is not in 0..255", pxvm.create_persistent, np.zeros((32, 48, 3), np.uint8),
           threshold=300)
    raises(U, "layout 'chw' is none of", small.update_partial, np.zeros((5, 10, 3), np.uint8), (0, 0), layout="chw")
    raises(U, "no normalization preset 'CLIP'", small.update_mipmaps_incremental, np.zeros((32, 48, 3), np.uint8),
           normalize="CLIP")
    assert small.frames == 1  # nothing ran


# ---- the cache, help, docstrings ------------------------------------------------------------------

def test_the_program_cache_is_a_bounded_lru(tex):
    seeds.clear_cache()
    tex.sample_foveated((0.5, 0.5), num_patches=9, dtype="uint8")
    key = next(iter(seeds._cache._runners))
    first = seeds._cache._runners[key]
    for i in range(seeds.PROGRAM_CACHE_SIZE + 5):
        tex.sample_foveated((i / 100.0, 0.5), num_patches=9, dtype="uint8")
        if i % 8 == 0:  # keeps the first program recently used
            tex.sample_foveated((0.5, 0.5), num_patches=9, dtype="uint8")
        assert len(seeds._cache) <= seeds.PROGRAM_CACHE_SIZE
    assert seeds._cache._runners.get(key) is first  # reused, not recompiled
    assert len(seeds._cache) == seeds.PROGRAM_CACHE_SIZE
    assert ("plan", key[0][1]) == key[0] and '"fixation": [0.5, 0.5]' in key[0][1]
    seeds.clear_cache()
    assert len(seeds._cache) == 0


def test_help_is_readable_and_the_docstring_examples_run():
    text = pydoc.render_doc(pxvm.TexturePyramid, renderer=pydoc.plaintext)
    for name in ("sample_foveated(self, fixation", "sample_anisotropic(self, fixation", "orientation: ",
                 "sample_at_level(self, uv", "levels", ">>> tex.sample_foveated((0.5, 0.4)).shape"):
        assert name in text, name
    for fn in (pxvm.generate_mipmaps, pxvm.create_persistent, pxvm.update_partial, pxvm.update_mipmaps_incremental):
        assert ">>> " in fn.__doc__ and fn.__annotations__, fn.__name__
    import os
    here = os.getcwd()
    os.chdir(ROOT)  # the examples name programs/data/chelsea.png
    try:
        res = doctest.testmod(seeds, optionflags=doctest.ELLIPSIS)
    finally:
        os.chdir(here)
    assert res.failed == 0 and res.attempted >= 30, res


def test_threads_sharing_a_cached_runner_take_turns():
    """Four threads sampling images of one size share the cache's one runner per plan (one C handle):
    each call holds Runner.lock over its run and reads, so every result is its image's (no crash, no
    mixed items, no 'running in another thread' refusal)."""
    import threading
    rng = np.random.default_rng(3)
    images = [rng.integers(0, 256, (120, 160, 3), dtype=np.uint8) for _ in range(4)]
    kw = dict(num_patches=64, patch=8, normalize="none", with_positions=True)

    def sample(i, dtype):
        tokens, pos = pxvm.TexturePyramid(images[i], executor=EXECUTOR).sample_foveated((0.5, 0.5), dtype=dtype, **kw)
        return host(tokens).copy(), pos.centre.copy()
    want = {(i, d): sample(i, d) for i in range(4) for d in ("uint8", "float32")}
    wrong, errors = [], []

    def work(k):
        for it in range(40):
            i, d = (k + it) % 4, ("uint8", "float32")[it % 2]
            try:
                got = sample(i, d)
                if not (np.array_equal(got[0], want[i, d][0]) and np.array_equal(got[1], want[i, d][1])):
                    wrong.append((k, it))
            except Exception as e:  # noqa: BLE001 - every failure is the test's
                errors.append(repr(e))
    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and not wrong, (errors[:3], wrong[:3])
