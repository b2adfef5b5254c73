"""EXIF orientation on request (issue 41): pxvm.load_image(path, exif_transpose=True) equals
Pillow's ImageOps.exif_transpose (what Hugging Face's transformers.image_utils.load_image calls)
byte for byte, on a real photo saved by Pillow with each of the 8 orientations, as JPEG and PNG
(the JPEG decoded by the same libjpeg-turbo as Pillow's here: checked first); a malformed EXIF
block (truncated, garbage) is ignored where Pillow ignores it, never a crash; Runner calls and
ImageFolderDataset take exif_transpose= for their files."""
import io
import os
import random
import warnings

import numpy as np
import pytest

import pxvm
from conftest import ROOT

PIL = pytest.importorskip("PIL")
from PIL import Image, ImageOps  # noqa: E402

ORIENTATION = 0x0112
PHOTO = os.path.join(ROOT, "build", "photos", "fruits.jpg")


@pytest.fixture(scope="module")
def photo():
    """A real photo (build/photos/fruits.jpg, else the bundled chelsea.png), cut to an odd size so
    that a turn that swaps or mirrors the wrong axis cannot go unseen."""
    path = PHOTO if os.path.exists(PHOTO) else os.path.join(ROOT, "programs", "data", "chelsea.png")
    im = Image.open(path).convert("RGB")
    return im.crop((0, 0, min(im.width, 301), min(im.height, 203)))


def _save(im, path, orientation, fmt):
    ex = Image.Exif()
    ex[ORIENTATION] = orientation
    im.save(path, format=fmt, exif=ex.tobytes(), **({"quality": 92} if fmt == "JPEG" else {}))
    assert Image.open(path).getexif().get(ORIENTATION) == orientation  # Pillow wrote it


@pytest.mark.parametrize("fmt", ["PNG", "JPEG"])
@pytest.mark.parametrize("orientation", range(1, 9))
def test_exif_transpose_equals_pillows(tmp_path, photo, fmt, orientation):
    path = str(tmp_path / ("o%d.%s" % (orientation, fmt.lower())))
    _save(photo, path, orientation, fmt)
    stored = pxvm.load_image(path)
    assert np.array_equal(stored, np.array(Image.open(path).convert("RGBA")))  # the same decoder as Pillow's
    want = np.array(ImageOps.exif_transpose(Image.open(path)).convert("RGBA"))
    got = pxvm.load_image(path, exif_transpose=True)
    assert got.shape == want.shape and np.array_equal(got, want)
    if orientation != 1:
        assert not np.array_equal(got, stored) if got.shape == stored.shape else got.shape == stored.shape[1::-1] + (4,)


def _pillow_orientation(data):
    """The orientation Pillow's exif_transpose would apply to a file, or None where Pillow
    raises on its EXIF (then it is ignored: the image as stored)."""
    try:
        with warnings.catch_warnings():  # Pillow warns of the corrupt EXIF it goes past
            warnings.simplefilter("ignore")
            o = Image.open(io.BytesIO(data)).getexif().get(ORIENTATION)
    except Exception:
        return None
    return o if isinstance(o, int) and 2 <= o <= 8 else None


_METHODS = {2: Image.FLIP_LEFT_RIGHT, 3: Image.ROTATE_180, 4: Image.FLIP_TOP_BOTTOM, 5: Image.TRANSPOSE,
            6: Image.ROTATE_270, 7: Image.TRANSVERSE, 8: Image.ROTATE_90}


@pytest.mark.parametrize("fmt", ["JPEG", "PNG"])
def test_truncated_and_garbage_exif_is_ignored_as_pillow_ignores_it(tmp_path, photo, fmt):
    """The EXIF block cut at every length, and random garbage in it: pxvm never fails on it and
    turns the image exactly as Pillow reads the orientation (none where Pillow cannot read it)."""
    small = photo.crop((0, 0, 9, 7))
    buf = io.BytesIO()
    ex = Image.Exif()
    ex[ORIENTATION] = 6
    tiff = ex.tobytes()[6:] if ex.tobytes().startswith(b"Exif\0\0") else ex.tobytes()
    small.save(buf, format=fmt)
    plain = buf.getvalue()
    rng = random.Random(41)
    blocks = [tiff[:k] for k in range(len(tiff) + 1)]
    blocks += [bytes(rng.randrange(256) for _ in range(rng.randrange(40))) for _ in range(30)]
    blocks += [tiff[:8] + bytes(rng.randrange(256) for _ in range(rng.randrange(30))) for _ in range(30)]
    blocks += [tiff[:4] + bytes([rng.randrange(256)]) + tiff[5:] for _ in range(10)]  # an IFD offset anywhere
    stored = pxvm.load_image(_write(tmp_path, "plain", plain))
    for k, block in enumerate(blocks):
        data = _with_exif_block(plain, block, fmt)
        path = _write(tmp_path, "b%d" % k, data)
        got = pxvm.load_image(path, exif_transpose=True)
        o = _pillow_orientation(data)
        want = stored if o is None else np.array(Image.fromarray(stored).transpose(_METHODS[o]))
        assert np.array_equal(got, want), (k, block, o)


def _write(tmp_path, name, data):
    p = tmp_path / name
    p.write_bytes(data)
    return str(p)


def _with_exif_block(plain, tiff, fmt):
    import struct
    import zlib
    if fmt == "JPEG":
        seg = b"Exif\0\0" + tiff
        return plain[:2] + b"\xff\xe1" + struct.pack(">H", len(seg) + 2) + seg + plain[2:]
    chunk = struct.pack(">I", len(tiff)) + b"eXIf" + tiff + struct.pack(">I", zlib.crc32(b"eXIf" + tiff))
    return plain[:-12] + chunk + plain[-12:]


def test_runner_files_and_the_dataset_take_exif_transpose(tmp_path, photo):
    """A batch's files (policy dynamic and a fixed size) and a folder dataset turn their files."""
    d = tmp_path / "folder"
    d.mkdir()
    path = str(d / "o6.jpg")
    _save(photo, path, 6, "JPEG")
    upright = pxvm.load_image(path, exif_transpose=True)
    u = pxvm.Runner(pxvm.Program.from_plan(os.path.join(ROOT, "programs", "uniform.json")))
    r = u.patches_batch([path], policy="dynamic", exif_transpose=True)
    assert np.array_equal(r.tokens, u.patches_batch([upright], policy="dynamic").tokens)
    assert tuple(r.sizes[0, 0]) == (upright.shape[1], upright.shape[0])
    assert not np.array_equal(u.patches_batch([path], policy="dynamic").sizes, r.sizes)  # off by default
    f = pxvm.Runner(pxvm.Program.load(os.path.join(ROOT, "programs", "foveate273.pxi")))
    assert np.array_equal(f.patches(path, policy="stretch", exif_transpose=True), f.patches(upright, policy="stretch"))
    assert np.array_equal(f.tokens_batch([path], policy="stretch", exif_transpose=True),
                          f.tokens_batch([upright], policy="stretch"))
    pytest.importorskip("torch")
    ds = pxvm.data.ImageFolderDataset(str(d), os.path.join(ROOT, "programs", "uniform.json"), policy="dynamic",
                                      exif_transpose=True)
    (tokens, grid, name), = list(ds)
    assert np.array_equal(tokens.numpy(), r.tokens)


def test_pxrun_and_pxbatch_take_exif_transpose(tmp_path, photo):
    """The command-line tools turn their inputs as load_image(exif_transpose=True) does (never the
    program), and pxbatch records it in the job: a rerun without it is another job."""
    import json
    import subprocess
    from conftest import BIN
    d = tmp_path / "folder"
    d.mkdir()
    path = str(d / "o6.jpg")
    _save(photo, path, 6, "JPEG")
    upright = pxvm.load_image(path, exif_transpose=True)
    anyp = os.path.join(ROOT, "programs", "foveate273_any.pxi")
    want = pxvm.Runner(anyp).patches(upright)
    npy = str(tmp_path / "a.npy")
    subprocess.run([os.path.join(BIN, "pxrun"), anyp, "--in", "image=%s" % path, "--exif-transpose", "--npy",
                    "atlas=%s" % npy], check=True, capture_output=True)
    assert np.array_equal(np.load(npy), want)
    subprocess.run([os.path.join(BIN, "pxrun"), anyp, "--in", "image=%s" % path, "--npy", "atlas=%s" % npy],
                   check=True, capture_output=True)  # without it: the pixels as stored
    assert np.array_equal(np.load(npy), pxvm.Runner(anyp).patches(pxvm.load_image(path)))
    out = tmp_path / "shards"
    cmd = [os.path.join(BIN, "pxbatch"), anyp, "--in-dir", str(d), "--out", str(out), "--executor", "cpu"]
    subprocess.run(cmd + ["--exif-transpose"], check=True, capture_output=True)
    assert np.array_equal(np.load(str(out / "shard-00000.npy"))[0], want)
    assert json.load(open(out / "shard-00000.json"))["job"]["exif_transpose"] is True
    r = subprocess.run(cmd, capture_output=True, text=True)  # the same --out without it: another job
    assert r.returncode == 2 and "exif_transpose" in r.stderr, r.stderr


@pytest.mark.parametrize("value", [1, "yes", None])
def test_exif_transpose_is_a_bool(value, tmp_path, photo):
    path = str(tmp_path / "o.png")
    _save(photo, path, 3, "PNG")
    with pytest.raises(pxvm.UsageError, match="exif_transpose"):
        pxvm.load_image(path, exif_transpose=value)
    f = pxvm.Runner(pxvm.Program.load(os.path.join(ROOT, "programs", "foveate273.pxi")))
    with pytest.raises(pxvm.UsageError, match="exif_transpose"):
        f.patches(path, policy="stretch", exif_transpose=value)
