"""Tokens for models (isa/SPEC.md section 9) on the executor under test (CPU in CI; CUDA-GL with
PXVM_TEST_EXECUTOR=cuda on the GPU machine, through tests/bench/gpu-python-check): every preset,
dtype, layout and alpha equal bit for bit to a NumPy reference doing the float32 steps one by one
(CPU == NumPy; on the GPU machine also CUDA == CPU == NumPy, for host and device tensors), the
refusals (nothing written to out=), zero-copy (data pointers), and the positions."""
import os

import numpy as np
import pytest

import pxvm
from pxvm.tokens import positions_from_geometry
from conftest import EXECUTOR, ROOT

try:
    import torch
except ImportError:  # the host tests that need torch skip
    torch = None

CUDA = EXECUTOR == "cuda" and torch is not None and torch.cuda.is_available()
needs_torch = pytest.mark.skipif(torch is None, reason="needs torch")
needs_cuda = pytest.mark.skipif(not CUDA, reason="needs PXVM_TEST_EXECUTOR=cuda and a CUDA device")

PRESETS = {"clip": ([0.48145466, 0.4578275, 0.40821073], [0.26862954, 0.26130258, 0.27577711]),
           "siglip": ([0.5] * 3, [0.5] * 3),
           "imagenet": ([0.485, 0.456, 0.406], [0.229, 0.224, 0.225]),
           "none": ([0.0] * 3, [1.0] * 3)}
CUSTOM = ([0.1, -0.7, 3.0, 0.25], [0.3, -2.0, 1e-3, 4.0])


def reference(patches, normalize, dtype, layout, alpha):
    """The SPEC's rule in NumPy, one float32 operation at a time, from the uint8 patches (N, p, p, 4)."""
    mean, std = PRESETS[normalize] if isinstance(normalize, str) else normalize
    C = 4 if alpha else 3
    mean = np.array((list(mean) + [0.0])[:C], dtype=np.float32)  # alpha: mean 0, std 1 unless given
    std = np.array((list(std) + [1.0])[:C], dtype=np.float32)
    u = patches[..., :C].astype(np.float32)
    x = u * np.float32(1.0 / 255.0)   # float32 * float32, rounded once
    y = (x - mean) / std               # two float32 operations, each rounded
    assert y.dtype == np.float32
    if dtype == "float32":
        bits = y.view(np.uint32)
    elif dtype == "float16":
        bits = y.astype(np.float16).view(np.uint16)  # NumPy: round to nearest even
    else:
        b = y.view(np.uint32).astype(np.uint64)
        bits = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)
    if layout == "nhwc":
        return bits
    bits = bits.transpose(0, 3, 1, 2)
    return bits if layout == "nchw" else bits.reshape(bits.shape[0], -1)


def as_bits(t):
    """The bits of a tokens array or tensor (host copy), as unsigned integers."""
    if torch is not None and isinstance(t, torch.Tensor):
        t = t.cpu()
        return t.view(torch.int16 if t.element_size() == 2 else torch.int32).numpy().view(
            np.uint16 if t.element_size() == 2 else np.uint32)
    t = np.asarray(t)
    return t.view(np.uint16 if t.itemsize == 2 else np.uint32)


@pytest.fixture(scope="module")
def rgba():
    """A 451x300 RGBA image where every byte value occurs in every channel, alpha varying."""
    rng = np.random.default_rng(25)
    img = rng.integers(0, 256, size=(300, 451, 4), dtype=np.uint8)
    img[0, :256, :] = np.arange(256, dtype=np.uint8)[:, None]
    return img


@pytest.fixture(scope="module")
def runner(foveate):
    return pxvm.Runner(foveate, executor=EXECUTOR)


@pytest.mark.parametrize("normalize", ["clip", "siglip", "imagenet", "none", "custom"])
def test_tokens_equal_the_numpy_reference_bit_for_bit(runner, rgba, photo, normalize):
    norm = CUSTOM if normalize == "custom" else normalize
    checked = 0
    for img in (rgba, photo):
        patches = runner.patches(img)
        for dtype in ("float32", "float16", "bfloat16"):
            if dtype == "bfloat16" and torch is None:
                continue
            for layout in ("nchw", "nhwc", "flat"):
                for alpha in (False, True):
                    n = norm if not isinstance(norm, tuple) or alpha else (norm[0][:3], norm[1][:3])
                    t = runner.tokens(img, dtype=dtype, normalize=n, layout=layout, alpha=alpha)
                    want = reference(patches, n, dtype, layout, alpha)
                    assert tuple(t.shape) == want.shape
                    got = as_bits(t)
                    assert np.array_equal(got, want), (dtype, layout, alpha, np.argwhere(got != want)[:3])
                    checked += 1
    assert checked >= 24


@needs_torch
def test_bfloat16_is_torchs_rounding(runner, rgba):
    """bfloat16 tokens are torch's float32 -> bfloat16 (round to nearest even) of the float32 tokens."""
    f32 = runner.tokens(rgba, dtype="float32", normalize="clip")
    bf = runner.tokens(rgba, dtype="bfloat16", normalize="clip")
    f32 = torch.as_tensor(np.asarray(f32)) if not isinstance(f32, torch.Tensor) else f32
    assert torch.equal(bf.cpu().view(torch.int16), f32.cpu().to(torch.bfloat16).view(torch.int16))


def test_alpha_with_three_values_gets_mean_0_std_1(runner, rgba):
    t = runner.tokens(rgba, normalize=(CUSTOM[0][:3], CUSTOM[1][:3]), alpha=True)
    a = runner.patches(rgba)[..., 3].astype(np.float32) * np.float32(1.0 / 255.0)
    assert np.array_equal(as_bits(t)[:, 3], a.view(np.uint32))


def test_refusals_name_the_value_and_write_nothing(runner, photo):
    out = np.full((273, 3, 16, 16), 7.0, dtype=np.float32)
    cases = [
        (dict(normalize="CLIP"), "no normalization preset 'CLIP'"),
        (dict(normalize=([0.5, 0.5], [0.5, 0.5])), "needs 3 values each"),
        (dict(normalize=([0.5] * 4, [0.5] * 4)), "4 mean/std values for R, G, B (alpha 0)"),
        (dict(normalize=([0.5] * 3, [0.5, 0.0, 0.5])), "std[1] = 0 is not a finite, non-zero float32"),
        (dict(normalize=([0.5] * 3, [0.5, 1e-46, 0.5])), "std[1] = 1e-46"),
        (dict(normalize=([float("nan")] * 3, [0.5] * 3)), "mean[0] = nan"),
        (dict(dtype="float64"), "dtype 'float64' is none of float32, float16, bfloat16"),
        (dict(layout="chw"), "layout 'chw' is none of nchw, nhwc, flat"),
        (dict(alpha=1), "alpha is True or False"),
        (dict(slot="image"), "is no patch atlas"),
    ]
    for kwargs, words in cases:
        with pytest.raises(pxvm.UsageError) as e:
            runner.tokens(photo, out=out, **kwargs)
        assert words in str(e.value), (kwargs, str(e.value))
        assert (out == 7.0).all(), kwargs


def test_bad_out_is_refused_and_untouched(runner, photo):
    good = (273, 3, 16, 16)
    bad = [np.zeros(good, dtype=np.float64), np.zeros((273, 16, 16, 3), dtype=np.float32),
           np.zeros((273, 3, 16, 32), dtype=np.float32)[..., ::2], [0.0] * 10]
    for out in bad:
        with pytest.raises(pxvm.UsageError):
            runner.tokens(photo, out=out)
        if isinstance(out, np.ndarray):
            assert not out.any()
    ro = np.zeros(good, dtype=np.float32)
    ro.flags.writeable = False
    with pytest.raises(pxvm.UsageError, match="read-only"):
        runner.tokens(photo, out=ro)
    with pytest.raises(pxvm.UsageError, match="uint16 array takes the bits"):
        runner.tokens(photo, dtype="bfloat16", out=np.zeros(good, dtype=np.float32))


def test_cuda_out_needs_the_cuda_executor(foveate, photo):
    class FakeCuda:  # __cuda_array_interface__ only: refused before any pointer is used
        __cuda_array_interface__ = {"shape": (273, 3, 16, 16), "typestr": "<f4", "data": (0, False), "version": 3}
    cpu = pxvm.Runner(foveate, executor="cpu")
    with pytest.raises(pxvm.UsageError, match="needs executor 'cuda'"):
        cpu.tokens(photo, out=FakeCuda())
    FakeCuda.__cuda_array_interface__ = dict(FakeCuda.__cuda_array_interface__, typestr="<f8")
    with pytest.raises(pxvm.UsageError, match="got a CUDA array of <f8"):
        cpu.tokens(photo, out=FakeCuda())


def test_out_is_written_in_place_and_results_are_zero_copy(runner, photo):
    out = np.empty((273, 768), dtype=np.float16)
    r = runner.tokens(photo, dtype="float16", layout="flat", out=out)
    assert r is out
    assert np.array_equal(out, np.asarray(runner.tokens(photo, dtype="float16", layout="flat")))
    bits = np.empty((273, 3, 16, 16), dtype=np.uint16)  # bfloat16 bits asked for by name
    runner.tokens(photo, dtype="bfloat16", out=bits)
    assert np.array_equal(bits, reference(runner.patches(photo), "clip", "bfloat16", "nchw", False))
    t = runner.tokens(photo)
    assert isinstance(t, np.ndarray) and t.flags.c_contiguous
    if torch is not None:
        shared = torch.from_dlpack(t)
        assert shared.data_ptr() == t.ctypes.data
        host = torch.empty((273, 3, 16, 16), dtype=torch.bfloat16)
        assert runner.tokens(photo, dtype="bfloat16", out=host) is host
        nhwc = runner.tokens(photo, layout="nhwc", out=torch.empty((273, 16, 16, 3)))
        assert np.from_dlpack(nhwc).ctypes.data == nhwc.data_ptr()
        assert np.array_equal(np.from_dlpack(nhwc), runner.tokens(photo, layout="nhwc"))


@needs_cuda
def test_cuda_equals_cpu_equals_numpy_and_writes_device_memory(foveate, rgba):
    cpu = pxvm.Runner(foveate, executor="cpu")
    gpu = pxvm.Runner(foveate, executor="cuda")
    dev = torch.from_numpy(rgba).cuda()
    patches = cpu.patches(rgba)
    for dtype in ("float32", "float16", "bfloat16"):
        for layout in ("nchw", "nhwc", "flat"):
            for alpha in (False, True):
                want = reference(patches, "clip", dtype, layout, alpha)
                host = gpu.tokens(rgba, dtype=dtype, layout=layout, alpha=alpha)  # host input: a host result
                t = gpu.tokens(dev, dtype=dtype, layout=layout, alpha=alpha)      # device input: on the device
                assert isinstance(t, torch.Tensor) and t.is_cuda
                c = cpu.tokens(rgba, dtype=dtype, layout=layout, alpha=alpha)
                assert np.array_equal(as_bits(c), want)
                assert np.array_equal(as_bits(host), want)
                assert np.array_equal(as_bits(t), want), (dtype, layout, alpha)
    out = torch.empty((273, 3, 16, 16), dtype=torch.bfloat16, device="cuda")
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):  # on the caller's stream
        r = gpu.tokens(dev, dtype="bfloat16", normalize="siglip", out=out)
    stream.synchronize()
    assert r is out and r.data_ptr() == out.data_ptr()
    assert np.array_equal(as_bits(out), reference(patches, "siglip", "bfloat16", "nchw", False))
    assert torch.utils.dlpack.from_dlpack(out).data_ptr() == out.data_ptr()
    with pytest.raises(pxvm.UsageError):
        gpu.tokens(dev, out=torch.empty((273, 3, 16, 16), dtype=torch.float16, device="cuda"))


# ---- positions ------------------------------------------------------------------------------------

def test_positions_of_a_grid_program(photo):
    r = pxvm.Runner(os.path.join(ROOT, "programs", "grid.pxi"), executor=EXECUTOR)
    r.patches(photo)
    p = r.positions(t=3)
    g = r.geometry(exact=True)[0]
    assert np.array_equal(p.centre, g[:, :2] / 65536.0)
    assert np.array_equal(p.level, g[:, 4] / 256.0)
    assert np.array_equal(p.normalized, p.centre / [451.0, 300.0])
    assert ((p.normalized >= 0) & (p.normalized <= 1)).all()
    assert p.grid is not None and p.grid.shape == (273, 2)
    assert p.rope.shape == (3, 273) and (p.rope[0] == 3).all() and np.array_equal(p.rope[1:].T, p.grid)
    # the grid ids order the centres: a larger column, a larger x; a larger row, a larger y
    for axis, k in ((1, 0), (0, 1)):
        order = np.argsort(p.grid[:, axis], kind="stable")
        assert (np.diff(p.centre[order, k]) >= 0).all()


def test_positions_off_a_lattice(photo):
    r = pxvm.Runner(os.path.join(ROOT, "programs", "logpolar.pxi"), executor=EXECUTOR)
    r.patches(photo)
    p = r.positions()
    assert p.grid is None and p.rope.shape == (3, 273) and p.written.all()
    assert (p.step > 0).all()


def test_positions_rules():
    def geom(cells):
        return np.array([[(x * 2 + 1) << 15, (y * 2 + 1) << 15, 65536, 65536, 0] for x, y in cells], dtype=np.int32)
    full = positions_from_geometry(geom([(x, y) for y in range(2) for x in range(3)]), (6, 4))
    assert np.array_equal(full.grid, [[0, 0], [0, 1], [0, 2], [1, 0], [1, 1], [1, 2]])
    prefix = positions_from_geometry(geom([(0, 0), (1, 0), (2, 0), (0, 1)]), (6, 4))  # row-major prefix
    assert prefix.grid is not None and prefix.grid.tolist() == [[0, 0], [0, 1], [0, 2], [1, 0]]
    shuffled = positions_from_geometry(geom([(1, 1), (0, 0), (1, 0), (0, 1)]), (6, 4))  # any token order
    assert shuffled.grid.tolist() == [[1, 1], [0, 0], [0, 1], [1, 0]]
    hole = positions_from_geometry(geom([(0, 0), (2, 0), (1, 1)]), (6, 4))  # (1, 0) missing: no lattice
    assert hole.grid is None and hole.rope.tolist() == [[0, 0, 0], [0, 0, 1], [0, 2, 1]]
    twice = positions_from_geometry(geom([(0, 0), (0, 0)]), (6, 4))
    assert twice.grid is None
    g = geom([(0, 0), (1, 0)])
    g[1, 4] = -1  # never written
    p = positions_from_geometry(g, (6, 4))
    assert p.grid is None and p.rope is None and np.isnan(p.centre[1]).all() and not p.written[1]


# ---- batches: Runner.tokens_batch == a loop of Runner.tokens --------------------------------------

@pytest.mark.parametrize("dtype, layout", [("float32", "nchw"), ("float16", "flat"), ("bfloat16", "nhwc")])
def test_tokens_batch_equals_a_loop_of_single_calls(rgba, photo, dtype, layout):
    """A fixation-relative logpolar plan, 4 images with per-item fixations (B, 2): the batch's
    item b is tokens(images[b], fixation=fixations[b]) bit for bit, new or into out=; on the GPU
    machine also from CUDA tensors (images and fixations) into a CUDA out=."""
    prog = pxvm.Program.from_plan({"image": [451, 300], "budget": 48, "scheme": "logpolar", "levels": 4,
                                   "fixation": "relative"})
    r = pxvm.Runner(prog, executor=EXECUTOR)
    rng = np.random.default_rng(32)
    images = np.stack([rgba, photo, rgba[::-1].copy(), np.ascontiguousarray(photo[:, ::-1])])
    fix = rng.uniform(0, 1, (4, 2))
    fix[0] = (0.0, 1.0)  # a corner: tokens off the image
    host_out = np.uint16 if dtype == "bfloat16" else getattr(np, dtype)
    n, c = 48, 3
    shape = {"nchw": (n, c, 16, 16), "nhwc": (n, 16, 16, c), "flat": (n, c * 256)}[layout]
    one = [r.tokens(images[b], fixation=fix[b], dtype=dtype, layout=layout, normalize="siglip",
                    out=np.empty(shape, host_out)) for b in range(4)]
    out = np.full((4,) + shape, 7, host_out)
    assert r.tokens_batch(images, fixations=fix, dtype=dtype, layout=layout, normalize="siglip", out=out) is out
    assert all(np.array_equal(as_bits(out[b]), as_bits(one[b])) for b in range(4))
    assert not np.array_equal(as_bits(one[0]), as_bits(one[1]))  # the fixations moved the tokens
    if dtype != "bfloat16" or torch is not None:
        new = r.tokens_batch(list(images), fixations=fix, dtype=dtype, layout=layout, normalize="siglip")
        assert tuple(new.shape) == (4,) + shape and np.array_equal(as_bits(new), as_bits(out))
    if CUDA:
        cr = pxvm.Runner(prog, executor="cuda")
        dev = cr.tokens_batch(torch.from_numpy(images).cuda(), fixations=torch.from_numpy(fix).cuda(), dtype=dtype,
                              layout=layout, normalize="siglip")
        assert dev.is_cuda and np.array_equal(as_bits(dev), as_bits(out))


def test_tokens_batch_refusals(runner, photo):
    """A bad out= (the shape of one item's tokens, not the batch's) or dtype: UsageError, nothing
    written."""
    out = np.full((273, 3, 16, 16), 7, np.float32)
    with pytest.raises(pxvm.UsageError, match=r"out must be a C-contiguous float32 array of shape \(2, 273, 3, 16, 16\)"):
        runner.tokens_batch([photo, photo], out=out)
    assert (out == 7).all()
    with pytest.raises(pxvm.UsageError, match="dtype 'float64' is none of"):
        runner.tokens_batch([photo], dtype="float64")
