"""EMBED from Python (pxvm.embed): the program's embeddings of real photos' tokens equal an integer
reference exactly, byte for byte: an int64 matmul of the same int8 data in NumPy, then isa/SPEC.md's
"EMBED" output rule transcribed here (gemmlowp's SaturatingRoundingDoublingHighMul and
RoundingDivideByPOT as TFLite's MultiplyByQuantizedMultiplier uses them; bf16 rounded once, to
nearest even). On the GPU machine (PXVM_TEST_EXECUTOR=cuda) the CUDA executor's bytes equal the CPU's."""
import glob
import os

import numpy as np
import pytest

from conftest import EXECUTOR, PHOTO, ROOT
import pxvm
import pxvm.embed as E

PHOTOS = [PHOTO] + sorted(glob.glob(os.path.join(ROOT, "build", "photos", "*")))[:4]


# ---- SPEC "EMBED", transcribed in NumPy (int64 throughout) ------------------------------------

def srdhm(a, b):
    ab = a.astype(np.int64) * b.astype(np.int64)
    x = ab + np.where(ab >= 0, 1 << 30, 1 - (1 << 30))
    q = np.where(x >= 0, x >> 31, -((-x) >> 31))  # C's division: toward zero
    return np.where((a == -2**31) & (b == -2**31), 2**31 - 1, q)


def rdbpot(x, e):
    mask = (np.int64(1) << e) - 1
    rem = x & mask
    threshold = (mask >> 1) + (x < 0)
    return (x >> e) + (rem > threshold)


def requant_i8(acc, mult, shift, out_zero):
    left, right = np.maximum(shift, 0), np.maximum(-shift, 0)
    v = rdbpot(srdhm(acc * (np.int64(1) << left), mult), right) + out_zero
    return np.clip(v, -128, 127).astype(np.int8)


def bf16_bits(acc, mult, shift):
    p = acc.astype(np.int64) * mult.astype(np.int64)
    a = np.abs(p).astype(np.uint64)
    n = np.zeros(a.shape, np.int64)
    for b in (32, 16, 8, 4, 2, 1):  # the index of the highest set bit
        hi = (a >> (n + b).astype(np.uint64)) != 0
        n = np.where(hi, n + b, n)
    r = n - 7
    rs = np.maximum(r, 1).astype(np.uint64)
    q = np.where(r > 0, a >> rs, a << np.maximum(-r, 0).astype(np.uint64))
    rem = a & ((np.uint64(1) << rs) - np.uint64(1))
    half = np.uint64(1) << (rs - np.uint64(1))
    up = (r > 0) & ((rem > half) | ((rem == half) & ((q & np.uint64(1)) == 1)))
    q = q + up
    carry = q == 256
    q = np.where(carry, 128, q).astype(np.int64)
    n = n + carry
    bits = ((p < 0).astype(np.int64) << 15) | ((n + shift - 31 + 127) << 7) | (q & 127)
    return np.where(p == 0, 0, bits).astype(np.uint16)


def reference(tok, q, mode, zero_point):
    acc = (tok.astype(np.int64) - zero_point) @ q.weight.astype(np.int64).T + q.bias.astype(np.int64)
    assert np.abs(acc).max() < 2**31
    if mode == "int32":
        return acc.astype(np.int32)
    if mode == "int8":
        return requant_i8(acc, q.multiplier.astype(np.int64), q.shift.astype(np.int64), q.out_zero)
    return bf16_bits(acc, q.multiplier, q.shift.astype(np.int64))


def test_reference_rules_at_their_edges():
    """The transcription agrees with the C tests' values (tests/unit/test_embed.c)."""
    a = np.array([2**30] * 4 + [-2**31], np.int64)
    b = np.array([3, -3, 1, -1, -2**31], np.int64)
    assert srdhm(a, b).tolist() == [2, -1, 1, 0, 2**31 - 1]
    assert rdbpot(np.array([5, -5, 4, -4, -2**31]), np.array([1, 1, 3, 3, 31])).tolist() == [3, -3, 1, -1, -1]
    one = np.full(5, 2**30)
    assert bf16_bits(np.array([257, 259, 258, 511, -1]), one, np.ones(5, np.int64)).tolist() == \
        [0x4380, 0x4382, 0x4381, 0x4400, 0xBF80]


def test_quantize_multiplier_is_tflites():
    assert E.quantize_multiplier(0.5) == (1 << 30, 0)
    assert E.quantize_multiplier(1.0) == (1 << 30, 1)
    assert E.quantize_multiplier(0.75) == (3 << 29, 0)
    assert E.quantize_multiplier(0.0) == (0, 0)
    m, s = E.quantize_multiplier(1 / 255 * 0.01)
    assert 1 << 30 <= m < 1 << 31 and abs(m * 2.0 ** (s - 31) - 1 / 255 * 0.01) < 2.0 ** (s - 31)
    with pytest.raises(ValueError):
        E.quantize_multiplier(-1.0)


def _layer(d, k, seed, mode):
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((d, k)) * 0.05
    b = rng.standard_normal(d) * 0.5
    return E.quantize(w, b, input_scale=1 / 255, mode=mode, output_scale=0.02, output_zero=-3 if mode == "int8" else 0)


@pytest.mark.parametrize("plan", ["foveate273", "uniform"])
@pytest.mark.parametrize("mode,zero_point,d", [("bf16", 0, 768), ("int8", 0, 100), ("int32", 128, 64), ("int8", 128, 37)])
def test_embed_equals_the_integer_reference_on_photos(plan, mode, zero_point, d):
    prog = pxvm.Program.load(pxvm.programs.path(plan))
    atlas = next(s for s in prog.outputs if s.name == "atlas")
    q = _layer(d, 3 * 16 * 16, d, mode)
    runner = pxvm.Runner(E.attach(prog, q, mode=mode, zero_point=zero_point), executor=EXECUTOR)
    for path in PHOTOS:
        out = runner.run(pxvm.load_image(path), policy="stretch")
        tok = E.tokens(E.atlas_patches(out["atlas"], atlas))
        assert tok.shape == (atlas.patch_count, 768)
        got = np.asarray(out["emb"]).reshape(tok.shape[0], -1)
        want = reference(tok, q, mode, zero_point)
        nb = {"int32": 4, "int8": 1, "bf16": 2}[mode]
        assert np.array_equal(got[:, :d * nb].view(want.dtype), want), (path, mode)
        assert not got[:, d * nb:].any()  # the padding of each row is 0
        if mode == "bf16":
            real = tok / 255.0 @ (q.weight * q.weight_scale[:, None]).T.astype(np.float64) + q.bias * q.weight_scale / 255
            emb = E.read(runner, q, mode).float().numpy()
            assert np.allclose(emb, real, rtol=1 / 64, atol=1e-6)  # bf16 of the real embedding


def test_cuda_equals_cpu():
    torch = pytest.importorskip("torch")
    if EXECUTOR != "cuda" or not torch.cuda.is_available():
        pytest.skip("needs PXVM_TEST_EXECUTOR=cuda and a CUDA device")
    prog = pxvm.Program.load(pxvm.programs.path("foveate273"))
    for mode, zp in (("bf16", 0), ("int8", 128), ("int32", 7)):
        q = _layer(1024, 768, 5, mode)
        p = E.attach(prog, q, mode=mode, zero_point=zp)
        cpu, gpu = pxvm.Runner(p, executor="cpu"), pxvm.Runner(p, executor="cuda")
        for path in PHOTOS:
            image = pxvm.load_image(path)
            cpu.run(image, policy="stretch")
            gpu.run(image, policy="stretch")
            assert np.array_equal(cpu.read("emb"), gpu.read("emb")), (path, mode)


def test_bad_layers_are_refused_with_the_rule():
    prog = pxvm.Program.load(pxvm.programs.path("foveate273"))
    q = _layer(8, 768, 1, "int8")
    with pytest.raises(ValueError, match="K = 768"):
        E.attach(prog, q, channels=4)
    with pytest.raises(ValueError, match="no patch atlas"):
        E.attach(prog, q, slot="image")
    bad = E.from_int8(q.weight, q.bias, q.multiplier, np.full(8, 31))  # shift 31: V-EMBED-11
    with pytest.raises(pxvm.Error, match="channel 0: shift 31 is not in -31..30"):
        E.attach(prog, bad, mode="bf16")
    big = E.from_int8(q.weight, np.full(8, 2**31 - 1 - 768 * 255 * 128 + 1), q.multiplier, q.shift)  # V-EMBED-9
    with pytest.raises(pxvm.Error, match="exceeds 2"):
        E.attach(prog, big, mode="int32")
    ok = E.from_int8(q.weight, np.full(8, 2**31 - 1 - 768 * 255 * 128), q.multiplier, q.shift)  # the bound itself
    E.attach(prog, ok, mode="int32")
    with pytest.raises(ValueError, match="too large for int32"):
        E.quantize(np.ones((2, 768)), np.full(2, 1e9), input_scale=1 / 255)


def test_example_pixels_to_logits_runs():
    """examples/pixels_to_logits.py: a photo through foveate273, EMBED and a small ViT, on the CPU
    (and, on the GPU machine, the CUDA executor with identical embeddings)."""
    import subprocess
    import sys
    ex = "auto" if EXECUTOR == "cuda" else "cpu"
    r = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "pixels_to_logits.py"), "--layers", "2",
                        "--executors", ex], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert "cpu : embeddings (273, 192) bf16" in r.stdout and "logits top-3" in r.stdout
    if EXECUTOR == "cuda":
        assert "cpu vs cuda: embeddings identical, byte for byte" in r.stdout


@pytest.mark.parametrize("mode", ["int32", "int8", "bf16"])
def test_embed_of_an_input_atlas_reads_the_bound_bytes(mode):
    """An atlas given as an input (bound from a packed RGBA array, which the CPU executor borrows:
    read in place) is embedded from its bytes: the CPU executor once read its own, zero, storage."""
    rng = np.random.default_rng(7)
    count, d = 16, 64
    q = _layer(d, 3 * 16 * 16, 11, mode)
    text = f".width 192\n.slot atlas input 272x272 patches=16x16x{count}\nHALT\n"
    runner = pxvm.Runner(E.attach(text, q, slot="atlas", mode=mode), executor=EXECUTOR)
    atlas = rng.integers(0, 256, (272, 272, 4), dtype=np.uint8)
    slot = next(s for s in runner.program.inputs if s.name == "atlas")
    tok = E.tokens(E.atlas_patches(atlas, slot))
    got = np.asarray(runner.run(atlas)["emb"]).reshape(count, -1)
    want = reference(tok, q, mode, 0)
    nb = {"int32": 4, "int8": 1, "bf16": 2}[mode]
    assert np.array_equal(got[:, :d * nb].view(want.dtype), want)
