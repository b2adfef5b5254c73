"""Resolution policies (docs/policies.md) on real photos of different sizes and aspect
ratios (tests/data/photos, SOURCES.md, and programs/data/chelsea.png at the slot's size) bound to
foveate273's 451x300 input slot: pxrun --policy stretch == Pillow's Image.resize, fit == Pillow's
resize to the fit size pasted at the fit offset on a pad canvas; Python's policy= == pxrun; bad
policies are usage errors naming them; exact (the default) still names the file and both sizes."""
import glob
import os

import numpy as np
import pytest

import pxvm
from conftest import EXECUTOR, ROOT, pxrun

Image = pytest.importorskip("PIL.Image")

PROGRAM = os.path.join(ROOT, "programs", "foveate273.pxi")
PHOTOS = sorted(glob.glob(os.path.join(ROOT, "tests", "data", "photos", "*.png")) +
                glob.glob(os.path.join(ROOT, "tests", "data", "photos", "*.jpg"))) + \
    [os.path.join(ROOT, "programs", "data", "chelsea.png")]
W, H = 451, 300
FILTERS = {"nearest": 0, "lanczos": 1, "bilinear": 2, "bicubic": 3, "box": 4, "hamming": 5}


def fit_size(sw, sh, w, h):
    if sw * h > sh * w:
        return w, max(1, (2 * sh * w + sw) // (2 * sw))
    if sw * h < sh * w:
        return max(1, (2 * sw * h + sh) // (2 * sh)), h
    return w, h


def pillow(path, policy, w=W, h=H):
    """What a policy gives by Pillow, as (h, w, 3) RGB (grey photos as (v, v, v))."""
    parts = policy.split(":")
    flt = FILTERS[parts[1]] if len(parts) > 1 else FILTERS["bicubic"]
    im = Image.open(path).convert("RGB")
    if im.size == (w, h):
        return np.asarray(im)
    if parts[0] == "stretch":
        return np.asarray(im.resize((w, h), flt))
    pad = (0, 0, 0)
    if len(parts) > 2:
        pad = tuple(int(v) for v in parts[2].split(",")[:3]) if "," in parts[2] else tuple(bytes.fromhex(parts[2])[:3])
    nw, nh = fit_size(im.size[0], im.size[1], w, h)
    canvas = Image.new("RGB", (w, h), pad)
    canvas.paste(im.resize((nw, nh), flt), ((w - nw) // 2, (h - nh) // 2))
    return np.asarray(canvas)


def test_the_photos_are_of_four_sizes_and_aspects_and_small():
    sizes = {Image.open(p).size for p in PHOTOS}
    assert len(sizes) >= 5 and any(w > h for w, h in sizes) and any(w < h for w, h in sizes)
    assert any(w == h for w, h in sizes) and any(Image.open(p).mode == "L" for p in PHOTOS)
    assert all(os.path.getsize(p) < 300_000 for p in PHOTOS)


@pytest.mark.parametrize("policy", ["stretch", "stretch:lanczos", "stretch:nearest", "fit", "fit:bilinear:128,64,32",
                                    "fit:hamming:ff8000", "fit:box:10,20,30,255"])
def test_pxrun_policy_equals_pillow(policy, tmp_path):
    for path in PHOTOS:
        out = str(tmp_path / "o.png")
        pxrun(PROGRAM, "--in", "image=" + path, "--policy", policy, "--out", "image=" + out,
              "--executor", EXECUTOR)
        got = np.asarray(Image.open(out))
        assert got.shape == (H, W, 4)
        assert (got[..., 3] == 255).all()
        want = pillow(path, policy)
        assert np.array_equal(got[..., :3], want), (policy, os.path.basename(path))


def test_fit_pad_alpha_and_hex(tmp_path):
    path = os.path.join(ROOT, "tests", "data", "photos", "coffee-tall.png")
    a, b = str(tmp_path / "a.png"), str(tmp_path / "b.png")
    pxrun(PROGRAM, "--in", "image=" + path, "--policy", "fit:bicubic:1,2,3,4", "--out", "image=" + a)
    pxrun(PROGRAM, "--in", "image=" + path, "--policy", "fit:bicubic:01020304", "--out", "image=" + b)
    ga, gb = np.asarray(Image.open(a)), np.asarray(Image.open(b))
    assert np.array_equal(ga, gb)
    assert tuple(ga[0, 0]) == (1, 2, 3, 4) and tuple(ga[H // 2, W // 2][3:]) == (255,)


def test_pxrun_exact_default_names_the_file_and_sizes():
    path = os.path.join(ROOT, "tests", "data", "photos", "rocket.jpg")
    for extra in ([], ["--policy", "exact"]):
        r = pxrun(PROGRAM, "--in", "image=" + path, *extra, "--npy", "atlas=/dev/null", check=False)
        assert r.returncode == 5, r.stderr
        assert "rocket.jpg" in r.stderr and "640x427" in r.stderr and "451x300" in r.stderr, r.stderr


@pytest.mark.parametrize("bad", ["fill", "fit:bicubc", "fit:bicubic:256,0,0", "stretch:bicubic:0,0,0", "fit:",
                                 "exact:lanczos", "fit:bicubic:12345"])
def test_pxrun_bad_policy_is_a_usage_error_naming_it(bad):
    r = pxrun(PROGRAM, "--in", "image=" + PHOTOS[0], "--policy", bad, check=False)
    assert r.returncode == 2 and "'%s'" % bad in r.stderr, r.stderr


def test_pxrun_policy_without_an_input_slot_is_a_usage_error():
    r = pxrun(os.path.join(ROOT, "programs", "dot_test.pxi"), "--policy", "fit", check=False)
    assert r.returncode == 2 and "no input slot" in r.stderr, r.stderr


@pytest.mark.parametrize("policy", ["fit:bicubic", "stretch:bilinear", "fit:lanczos:200,100,0"])
def test_python_policy_equals_pxrun(policy, tmp_path, foveate):
    r = pxvm.Runner(foveate, executor=EXECUTOR)
    for path in PHOTOS:
        npy = str(tmp_path / "a.npy")
        pxrun(PROGRAM, "--in", "image=" + path, "--policy", policy, "--npy", "atlas=" + npy, "--executor", EXECUTOR)
        want = np.load(npy)
        img = np.asarray(Image.open(path))  # RGB or grey (H, W), as decoded by Pillow
        if path.endswith(".jpg"):
            img = pxvm.load_image(path)  # the library's JPEG decoder, as pxrun's
        assert np.array_equal(r.patches(img, policy=policy), want), (policy, path)
        assert np.array_equal(r.run(image=img, policy=policy)["atlas"], r.run(image=pxvm.load_image(path),
                                                                                 policy=policy)["atlas"])


def test_python_batches_of_mixed_sizes(foveate):
    r = pxvm.Runner(foveate, executor=EXECUTOR)
    imgs = [pxvm.load_image(p) for p in PHOTOS]
    assert len({i.shape for i in imgs}) == len(imgs)
    got = r.patches_batch(imgs, policy="fit:bicubic")
    assert got.shape[0] == len(imgs)
    for i, img in enumerate(imgs):
        assert np.array_equal(got[i], r.patches(img, policy="fit:bicubic"))
    rb = r.run_batch(imgs, policy="stretch")["atlas"]
    for i, img in enumerate(imgs):
        assert np.array_equal(rb[i], r.run(img, policy="stretch")["atlas"])
    # a (B, H, W, C) array of another size than the slot's
    stack = np.stack([imgs[0], imgs[0]])
    assert np.array_equal(r.patches_batch(stack, policy="fit")[1], r.patches(imgs[0], policy="fit"))


def test_python_policy_errors(foveate):
    r = pxvm.Runner(foveate, executor=EXECUTOR)
    img = pxvm.load_image(PHOTOS[0])
    with pytest.raises(pxvm.UsageError, match="'fit:bicubc'"):
        r.patches(img, policy="fit:bicubc")
    with pytest.raises(pxvm.Unlinkable):
        r.patches(img)
    with pytest.raises(pxvm.Unlinkable):
        r.patches(img, policy="exact")
    same = pxvm.load_image(os.path.join(ROOT, "programs", "data", "chelsea.png"))
    assert np.array_equal(r.patches(same, policy="fit:lanczos"), r.patches(same))


def test_python_policy_refuses_cuda_tensors(foveate):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    r = pxvm.Runner(foveate, executor=EXECUTOR)
    t = torch.zeros((400, 240, 3), dtype=torch.uint8, device="cuda")
    with pytest.raises(pxvm.UsageError, match="policies resize on the host"):
        r.patches(t, policy="fit")


@pytest.mark.parametrize("policy", ["stretch:bicubic", "fit:lanczos:1,2,3", "dynamic", "stretch:nearest"])
def test_policy_image_of_any_channels_equals_the_rgba_route(policy):
    """_policy_image hands grey and RGB arrays to the library as they are
    (pxvm_image_fit_channels); its bytes are pxvm_image_fit's of the image widened to RGBA (grey v
    -> (v, v, v, 255), RGB -> (r, g, b, 255)), for (H, W), (H, W, 1), (H, W, 3), (H, W, 4),
    (3, H, W) and a non-contiguous view."""
    import ctypes
    from pxvm import _capi
    from pxvm.runner import _policy_image
    lib = _capi.lib
    rng = np.random.default_rng(40)

    def via_rgba(rgba, w, h):
        H, W = rgba.shape[:2]
        out = ctypes.c_void_p()
        assert lib.pxvm_image_fit(rgba.ctypes.data, W, H, w, h, policy.encode(), ctypes.byref(out)) == 0
        try:
            return np.frombuffer(ctypes.string_at(out, w * h * 4), np.uint8).reshape(h, w, 4).copy()
        finally:
            lib.pxvm_free(out)

    for H, W in ((37, 53), (300, 211)):
        g = rng.integers(0, 256, (H, W), dtype=np.uint8)
        rgb = rng.integers(0, 256, (H, W, 3), dtype=np.uint8)
        rgba = rng.integers(0, 256, (H, W, 4), dtype=np.uint8)
        opaque = np.full((H, W, 1), 255, np.uint8)
        cases = {"HW": (g, np.dstack([g, g, g, opaque])), "HW1": (g[:, :, None], np.dstack([g, g, g, opaque])),
                 "HW3": (rgb, np.dstack([rgb, opaque])), "HW4": (rgba, rgba),
                 "CHW": (np.ascontiguousarray(rgb.transpose(2, 0, 1)), np.dstack([rgb, opaque])),
                 "view": (rgb[::-1][::-1, :, :], np.dstack([rgb, opaque]))}
        for name, (x, wide) in cases.items():
            got = _policy_image(x, 64, 48, policy)
            assert got.shape == (48, 64, 4), name
            assert np.array_equal(got, via_rgba(np.ascontiguousarray(wide), 64, 48)), (H, W, name)
