"""Policy "dynamic" and ragged batches (docs/policies.md, python/pxvm/ragged.py).

- The size rule: the library's pxvm_policy_dynamic_size against a Python transcription of
  Qwen2-VL's smart_resize (reference_hf4.smart_resize, transcribed from transformers 4.x; the
  real transformers code is not installed offline, so this is a transcription, not it),
  over tens of thousands of sizes and several settings, ties of the rounding (half to even) among
  them.
- The tokens: each image's tokens are its Pillow resize (Image.resize((w', h'), BICUBIC), the
  policy's filter) cut into patch x patch tiles row-major: checked against Pillow on the real
  photos of tests/data/photos.
- A ragged batch == the same images one at a time, byte for byte (one executor call per batch,
  no runner per size: tests/python/test_ragged_dynamic.py); position ids; errors name the image
  (index, file) and nothing is returned.
"""
import glob
import os

import numpy as np
import pytest
from PIL import Image

import pxvm
from conftest import EXECUTOR, ROOT
from reference_hf4 import smart_resize

PHOTOS = sorted(glob.glob(os.path.join(ROOT, "tests", "data", "photos", "*.png")) +
                glob.glob(os.path.join(ROOT, "tests", "data", "photos", "*.jpg")))
UNIFORM = os.path.join(ROOT, "programs", "uniform.json")


@pytest.fixture(scope="module")
def runner():
    with pxvm.Runner(pxvm.Program.from_plan(UNIFORM), executor=EXECUTOR) as r:
        yield r


SETTINGS = [  # (policy, patch, merge, min, max)
    ("dynamic", 14, 2, 3136, 1003520),
    ("dynamic", 16, 2, 3136, 1003520),
    ("dynamic:merge=1,min=1,max=20000", 16, 1, 1, 20000),
    ("dynamic:merge=3,min=50000,max=60000", 7, 3, 50000, 60000),
    ("dynamic:merge=2,min=100,max=100", 14, 2, 100, 100),
]


@pytest.mark.parametrize("policy,patch,merge,lo,hi", SETTINGS)
def test_dynamic_size_equals_the_python_transcription(policy, patch, merge, lo, hi):
    f = patch * merge
    rng = np.random.default_rng(patch * 1000 + merge)
    sizes = [(w, h) for w in range(1, 130) for h in range(1, 130)]                       # small: every one
    sizes += [(int(a), int(b)) for a, b in rng.integers(1, 5000, size=(3000, 2))]       # photos
    sizes += [(int(a), int(b)) for a, b in rng.integers(1, 40000, size=(500, 2))]       # large
    sizes += [(k * f + f // 2, j * f + f // 2) for k in range(0, 40) for j in range(0, 40)]  # ties (f even)
    sizes += [(1, 200), (200, 1), (1, 201), (2, 401), (3, 600), (3, 601), (16384, 16384)]
    sizes += [(k, 200 * k + d) for k in range(1, 60) for d in (-1, 0, 1)]  # the 200:1 edge, both ways
    sizes += [(200 * k + d, k) for k in range(1, 60) for d in (-1, 0, 1)]
    checked = ties = refused = 0
    for w, h in sizes:
        try:
            want = smart_resize(h, w, f, lo, hi)
        except ValueError:
            with pytest.raises(pxvm.Unlinkable, match="%dx%d image: policy dynamic takes aspect ratios" % (w, h)):
                pxvm.dynamic_size(policy, patch, w, h)
            refused += 1
            continue
        got = pxvm.dynamic_size(policy, patch, w, h)
        assert got == (want[1], want[0]), (w, h, got, want)
        checked += 1
        ties += f % 2 == 0 and (w % f == f // 2 or h % f == f // 2)
    assert checked > 15000 and (ties > 1000 or f % 2) and refused > 100


def test_ties_round_half_to_even():
    # f = 28: 42 = 1.5 f -> 2 f; 70 = 2.5 f -> 2 f; 98 = 3.5 f -> 4 f (Python's round)
    assert pxvm.dynamic_size("dynamic:min=1", 14, 42, 70) == (56, 56)
    assert pxvm.dynamic_size("dynamic:min=1", 14, 98, 126) == (112, 112)


def _tiles(img, p):
    """(h, w, 4) -> (h/p * w/p, p, p, 4), row-major tiles."""
    h, w = img.shape[:2]
    return img.reshape(h // p, p, w // p, p, 4).transpose(0, 2, 1, 3, 4).reshape(-1, p, p, 4)


def test_tokens_are_the_pillow_resize_in_tiles(runner):
    r = runner.patches_batch(PHOTOS, policy="dynamic")
    assert len(r) == len(PHOTOS) and r.files == PHOTOS
    for i, path in enumerate(PHOTOS):
        im = Image.open(path).convert("RGB")
        (w, h), (w2, h2) = r.sizes[i].tolist()
        assert (w, h) == im.size
        assert (w2, h2) == tuple(reversed(smart_resize(h, w, 32, 3136, 1003520)))
        rgb = np.asarray(im.resize((w2, h2), Image.BICUBIC))
        want = np.concatenate([rgb, np.full(rgb.shape[:2] + (1,), 255, np.uint8)], axis=2)
        assert r.grid[i].tolist() == [1, h2 // 16, w2 // 16]
        assert np.array_equal(r[i], _tiles(want, 16)), path


def test_ragged_batch_equals_one_at_a_time(runner):
    imgs = [pxvm.load_image(p) for p in PHOTOS]
    imgs = imgs + [imgs[0], imgs[2], imgs[0]]  # repeated sizes
    r = runner.patches_batch(imgs, policy="dynamic:merge=2,min=3136,max=200000:bilinear")
    assert r.offsets[0] == 0 and np.all(np.diff(r.offsets) == r.grid[:, 1] * r.grid[:, 2])
    assert r.tokens.shape == (int(r.offsets[-1]), 16, 16, 4) and r.tokens.dtype == np.uint8
    for i, x in enumerate(imgs):
        one = runner.patches(x, policy="dynamic:merge=2,min=3136,max=200000:bilinear")
        assert one.tobytes() == r[i].tobytes()
        assert int(r.sizes[i, 1, 0]) * int(r.sizes[i, 1, 1]) <= 200000
    # position ids: (t, h, w) of every token, row-major in patches
    assert r.position_ids.shape == (3, len(r.tokens)) and r.position_ids.dtype == np.int64
    for i in range(len(r)):
        a, b = r.offsets[i], r.offsets[i + 1]
        gh, gw = r.grid[i, 1], r.grid[i, 2]
        hh, ww = np.meshgrid(np.arange(gh), np.arange(gw), indexing="ij")
        assert np.array_equal(r.position_ids[:, a:b], np.stack([np.zeros(gh * gw, np.int64), hh.ravel(),
                                                               ww.ravel()]))
    # a (B, H, W, C) array is a batch too
    s = runner.patches_batch(np.stack([imgs[0], imgs[0]]), policy="dynamic")
    assert np.array_equal(s[1], runner.patches(imgs[0], policy="dynamic"))


def test_errors_name_the_image_and_return_nothing(runner, tmp_path):
    bad = tmp_path / "bad.png"
    bad.write_bytes(b"not an image")
    with pytest.raises(pxvm.Malformed, match=r"image 2 \('%s'\)" % str(bad).replace("\\", "\\\\")) as e:
        runner.patches_batch(PHOTOS[:2] + [str(bad)], policy="dynamic")
    assert e.value.index == 2 and e.value.file == str(bad)
    wide = np.zeros((4, 1000, 3), np.uint8)  # 250:1
    with pytest.raises(pxvm.Unlinkable, match=r"image 1: unlinkable: a 1000x4 image: policy dynamic takes aspect"):
        runner.patches_batch([np.zeros((32, 32), np.uint8), wide], policy="dynamic")
    with pytest.raises(pxvm.UsageError, match="patch=14, but the plan's patch is 16"):
        runner.patches_batch(PHOTOS, policy="dynamic:patch=14")
    with pytest.raises(pxvm.UsageError, match="'dynamic:pach=14'"):
        runner.patches_batch(PHOTOS, policy="dynamic:pach=14")
    with pytest.raises(TypeError, match="image 0: pxvm: images must be uint8"):
        runner.patches_batch([np.zeros((32, 32), np.float32)], policy="dynamic")


def test_dynamic_refuses_what_it_cannot_honour(runner):
    img = pxvm.load_image(PHOTOS[0])
    with pytest.raises(pxvm.UsageError, match=r"out must be a C-contiguous uint8 array of shape \(\d+, 16, 16, 4\), "
                       r"got \(1, 1, 16, 16, 4\)"):
        runner.patches_batch([img], policy="dynamic", out=np.zeros((1, 1, 16, 16, 4), np.uint8))
    with pytest.raises(pxvm.UsageError, match="policy dynamic does not take fixations"):
        runner.patches_batch([img], policy="dynamic", fixations=np.zeros((1, 2)))
    with pytest.raises(pxvm.UsageError, match="does not take with_geometry"):
        runner.patches(img, policy="dynamic", with_geometry=True)
    with pytest.raises(pxvm.UsageError, match="use patches or patches_batch"):
        runner.run(img, policy="dynamic")
    with pytest.raises(pxvm.UsageError, match="use patches or patches_batch"):
        runner.run_batch([img], policy="dynamic")
    with pxvm.Runner(os.path.join(ROOT, "programs", "foveate273.pxi"), executor=EXECUTOR) as r:
        with pytest.raises(pxvm.UsageError, match="needs a program compiled from a \"uniform\" plan.*not a plan"):
            r.patches_batch([img], policy="dynamic")
    with pxvm.Runner(pxvm.Program.from_plan(os.path.join(ROOT, "programs", "grid.json")), executor=EXECUTOR) as r:
        with pytest.raises(pxvm.UsageError, match="a plan of scheme 'grid'"):
            r.patches_batch([img], policy="dynamic")


def test_canonical_policy():
    assert pxvm.canonical_policy("dynamic") == "dynamic:merge=2,min=3136,max=1003520:bicubic"
    assert pxvm.canonical_policy("fit:808080") == "fit:bicubic:128,128,128,255"
    with pytest.raises(pxvm.UsageError, match="'dynamic:min=5,max=4'"):
        pxvm.canonical_policy("dynamic:min=5,max=4")


def test_pxrun_policy_dynamic(runner, tmp_path):
    from conftest import pxrun
    want = runner.patches_batch(PHOTOS, policy="dynamic:merge=1,max=100000:lanczos")
    for i, p in enumerate(PHOTOS):
        out = tmp_path / ("%d.npy" % i)
        pxrun(UNIFORM, "--in", "image=" + p, "--policy", "dynamic:merge=1,max=100000:lanczos", "--npy",
              "atlas=" + str(out), "--executor", EXECUTOR)
        assert np.load(out).tobytes() == want[i].tobytes()
    r = pxrun(os.path.join(ROOT, "programs", "foveate273.pxi"), "--in", "image=" + PHOTOS[0], "--policy", "dynamic",
              check=False)
    assert r.returncode == 2 and "programs/foveate273.pxi' is a program of one size" in r.stderr
    r = pxrun(os.path.join(ROOT, "programs", "grid.json"), "--in", "image=" + PHOTOS[0], "--policy", "dynamic",
              check=False)
    assert r.returncode == 2 and "is a plan of scheme 'grid'" in r.stderr
    r = pxrun(UNIFORM, "--policy", "dynamic", check=False)
    assert r.returncode == 2 and "give the plan's one input image" in r.stderr
    Image.fromarray(np.zeros((2, 500, 3), np.uint8)).save(tmp_path / "wide.png")
    r = pxrun(UNIFORM, "--in", "image=%s" % (tmp_path / "wide.png"), "--policy", "dynamic", check=False)
    assert r.returncode == 5 and "a 500x2 image: policy dynamic takes aspect ratios up to 200:1; this one is " \
        "250.00:1 (file '%s')" % (tmp_path / "wide.png") in r.stderr, r.stderr
