"""Four-component JPEGs (CMYK, and YCCK which libjpeg-turbo turns into CMYK), which print workflows
write and Pillow and browsers open, decode to Pillow's `Image.open(f).convert("RGB")` byte for byte
(isa/SPEC.md, "Binding images": its rule on libjpeg-turbo's inverted CMYK samples): Pillow-written
CMYK JPEGs of real photos (baseline, progressive, 4:4:4 and 4:2:0, odd sides, 1x1, an EXIF
orientation) and a YCCK one written by libjpeg-turbo; pxbatch's dynamic rows of them are Pillow's
bicubic resize of that RGB image."""
import io
import os
import shutil

import numpy as np
import pytest

import pxvm
from conftest import EXECUTOR, ROOT
from test_pxbatch_dynamic import PLAN, P, pxbatch, shard_rows, smart_resize

Image = pytest.importorskip("PIL.Image")
ImageOps = pytest.importorskip("PIL.ImageOps")

PHOTOS = os.path.join(ROOT, "tests", "data", "photos")
YCCK = os.path.join(ROOT, "tests", "data", "cmyk", "rocket-ycck.jpg")


def cmyk_jpeg(photo, crop=None, exif=None, **save):
    """The photo as a CMYK JPEG written by Pillow (Adobe marker, transform 0), as bytes."""
    im = Image.open(os.path.join(PHOTOS, photo)).convert("RGB")
    if crop:
        im = im.crop(crop)
    cmyk = im.convert("CMYK")
    a = np.asarray(cmyk).copy()  # Pillow's convert leaves K at 0: give black ink a part, as real files do
    a[..., 3] = np.minimum(a[..., :3].min(axis=2), 200)
    a[..., :3] -= a[..., 3:4]
    buf = io.BytesIO()
    kw = dict(save)
    if exif is not None:
        kw["exif"] = exif
    Image.fromarray(a, "CMYK").save(buf, "JPEG", **kw)
    return buf.getvalue()


def pillow_rgb(data, transpose=False):
    im = Image.open(io.BytesIO(data))
    assert im.mode == "CMYK"
    if transpose:
        im = ImageOps.exif_transpose(im)
    return np.asarray(im.convert("RGB"))


CASES = {  # Pillow's 4:2:0 CMYK subsamples C alone, which no TurboJPEG TJSAMP_* names; 4:4:4 is one
    "chelsea-baseline-420": lambda: cmyk_jpeg("../../../programs/data/chelsea.png", quality=90, subsampling=2),
    "rocket-progressive-444": lambda: cmyk_jpeg("rocket.jpg", quality=85, subsampling=0, progressive=True),
    "coffee-odd-sides": lambda: cmyk_jpeg("coffee-tall.png", crop=(3, 5, 240, 396), quality=75),
    "camera-grey-1x1": lambda: cmyk_jpeg("camera.png", crop=(100, 100, 101, 101), quality=95),
    "ycck-libjpeg-turbo": lambda: open(YCCK, "rb").read(),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_cmyk_jpeg_is_pillows_rgb(name):
    data = CASES[name]()
    got = pxvm.load_image(data)
    want = pillow_rgb(data)
    assert got.shape == want.shape[:2] + (4,)
    assert int((got[..., :3] != want).sum()) == 0 and bool((got[..., 3] == 255).all())
    if name != "camera-grey-1x1":  # black ink varies: the rule's K term is exercised
        k = np.asarray(Image.open(io.BytesIO(data)))[..., 3]
        assert int(k.min()) != int(k.max())


def test_cmyk_jpeg_with_an_exif_orientation_is_pillows_transposed_rgb():
    exif = Image.Exif()
    exif[0x0112] = 6  # rotated 90 degrees: stored sideways
    data = cmyk_jpeg("rocket.jpg", crop=(0, 0, 97, 61), exif=exif.tobytes(), quality=90)
    got = pxvm.load_image(data, exif_transpose=True)
    want = pillow_rgb(data, transpose=True)
    assert got.shape == (97, 61, 4) and want.shape == (97, 61, 3)
    assert int((got[..., :3] != want).sum()) == 0


def test_pxbatch_dynamic_rows_of_cmyk_jpegs_are_pillows_resize(tmp_path):
    src = tmp_path / "in"
    src.mkdir()
    (src / "a-chelsea.jpg").write_bytes(CASES["chelsea-baseline-420"]())
    shutil.copy(YCCK, src / "b-ycck.jpg")
    out = tmp_path / "out"
    r = pxbatch(PLAN, "--in-dir", str(src), "--out", str(out), "--policy", "dynamic", "--executor", EXECUTOR)
    assert r.returncode == 0 and " 0 failed" in r.stderr, r.stderr
    rows, errors = shard_rows(out)
    assert errors == [] and len(rows) == 2
    for f, size, resized, tiles in rows:
        im = Image.open(f).convert("RGB")
        h, w = smart_resize(im.height, im.width)
        a = np.asarray(im.resize((w, h), Image.BICUBIC).convert("RGBA"))
        want = a.reshape(h // P, P, w // P, P, 4).transpose(0, 2, 1, 3, 4).reshape(-1, P, P, 4)
        assert size == [im.width, im.height] and resized == [w, h], f
        assert tiles.shape == want.shape and int((tiles != want).sum()) == 0, f
