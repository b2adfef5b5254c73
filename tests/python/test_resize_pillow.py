"""RESIZE against Pillow: bin/pxresize (the host reference of vm/resize.c, isa/SPEC.md, RESIZE) must give
the bytes of Pillow's Image.resize((w, h), filter) for every filter, on photographs from
scikit-image's data folder (RGB, and grey "L" images: the VM holds them as (v, v, v, 255), whose R
channel is compared) and on a seeded random sweep of small images and sizes.

RESIZE resamples each channel on its own, as Pillow does for L, RGB and RGBX. Pillow's
Image.resize premultiplies RGBA by alpha first (RGBa) and divides after; RGBA images are compared
here band by band (each band resized as an L image), which is RESIZE's rule, not Pillow's RGBA."""
import os
import subprocess

import numpy as np
import pytest

from conftest import BIN

Image = pytest.importorskip("PIL.Image")

SKIMAGE_DATA = "/usr/lib/python3/dist-packages/skimage/data"
FILTERS = {
    "nearest": Image.NEAREST,
    "box": Image.BOX,
    "bilinear": Image.BILINEAR,
    "hamming": Image.HAMMING,
    "bicubic": Image.BICUBIC,
    "lanczos": Image.LANCZOS,
}
# (file, converted to): RGB photographs of six sizes (two JPEGs, decoded by Pillow), three grey ones
PHOTOS = [
    ("astronaut.png", "RGB"),
    ("coffee.png", "RGB"),
    ("chelsea.png", "RGB"),
    ("rocket.jpg", "RGB"),
    ("motorcycle_left.png", "RGB"),
    ("hubble_deep_field.jpg", "RGB"),
    ("camera.png", "L"),
    ("coins.png", "L"),
    ("chelsea.png", "L"),
]

COUNTS = {"cases": 0, "bytes": 0}


def pxresize(src_png, size, name, out_png):
    r = subprocess.run([os.path.join(BIN, "pxresize"), src_png, "%dx%d" % size, name, out_png],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    with Image.open(out_png) as im:
        return np.asarray(im.convert("RGBA"))


def compare(im, png, size, name, tmp_path, what):
    """pxresize of png (im's pixels) against Pillow's resize of im; returns the differing bytes."""
    ours = pxresize(png, size, name, str(tmp_path / "out.png"))
    assert ours.shape == (size[1], size[0], 4), (what, ours.shape)
    if im.mode == "RGBA":
        want = np.stack([np.asarray(b.resize(size, FILTERS[name])) for b in im.split()], axis=-1)
        got = ours
    elif im.mode == "L":
        want, got = np.asarray(im.resize(size, FILTERS[name])), ours[:, :, 0]
    else:
        want, got = np.asarray(im.resize(size, FILTERS[name])), ours[:, :, :3]
    COUNTS["cases"] += 1
    COUNTS["bytes"] += want.size
    diff = int(np.count_nonzero(got != want))
    if diff:
        where = np.argwhere(got != want)[0]
        print("DIFF %s %s %s -> %s: %d bytes, first at %s: ours %d pillow %d" % (
            what, name, im.size, size, diff, tuple(where), got[tuple(where)], want[tuple(where)]))
    return diff


def photo_sizes(w, h):
    """Downscales and upscales, odd and prime sides, 1xN and Nx1, one side kept, large factors."""
    return [
        (w // 2, h // 2),
        (w * 11 // 8 + 1, h * 13 // 8),  # up, odd
        (97, 61),                        # primes
        (7, 5),                          # large factors down (512 -> 7)
        (1, h // 3 + 1),
        (w // 5 + 2, 1),
        (1, 1),
        (w, h // 3 + 2),                 # height alone: one pass
        (w // 3 + 1, h),                 # width alone: one pass
        (w - 1, h + 1),
    ]


@pytest.mark.parametrize("photo,mode", PHOTOS, ids=["%s-%s" % p for p in PHOTOS])
def test_resize_photos(photo, mode, tmp_path):
    path = os.path.join(SKIMAGE_DATA, photo)
    if not os.path.exists(path):
        pytest.skip("scikit-image's data folder is missing (Debian's python3-skimage)")
    with Image.open(path) as f:
        im = f.convert(mode)
    png = str(tmp_path / "in.png")
    im.save(png)
    # a few texels enlarged hundreds of times (3 -> 500): the kernels' tails at the edges
    tiny = im.crop((im.width // 2, im.height // 2, im.width // 2 + 3, im.height // 2 + 2))
    tiny_png = str(tmp_path / "tiny.png")
    tiny.save(tiny_png)
    bad = 0
    for name in FILTERS:
        for size in photo_sizes(*im.size):
            bad += compare(im, png, size, name, tmp_path, photo) > 0
        bad += compare(tiny, tiny_png, (500, 499), name, tmp_path, photo + " 3x2 crop") > 0
    assert bad == 0, "%d cases differ from Pillow (lines DIFF above)" % bad


def test_resize_random_sweep(tmp_path):
    """200 seeded random (image, size, filter): sides 1..40 in, 1..90 out, RGB and RGBA."""
    rng = np.random.default_rng(2023)
    bad = 0
    for i in range(200):
        w, h = (int(v) for v in rng.integers(1, 41, size=2))
        size = tuple(int(v) for v in rng.integers(1, 91, size=2))
        if i % 10 == 0:
            size = (w, int(size[1]))  # one side kept
        name = list(FILTERS)[i % len(FILTERS)]
        mode = "RGBA" if i % 3 == 0 else "RGB"
        im = Image.fromarray(rng.integers(0, 256, size=(h, w, len(mode)), dtype=np.uint8), mode)
        png = str(tmp_path / "in.png")
        im.save(png)
        bad += compare(im, png, size, name, tmp_path, "random %d %s" % (i, mode)) > 0
    assert bad == 0, "%d cases differ from Pillow (lines DIFF above)" % bad


def test_resize_count(capsys):
    """Runs last in this file: prints how many cases and bytes were compared."""
    if COUNTS["cases"] == 0:
        pytest.skip("no case ran")
    with capsys.disabled():
        print("\ntest_resize_pillow: %d cases, %d bytes compared with Pillow %s" % (
            COUNTS["cases"], COUNTS["bytes"], Image.__version__))
