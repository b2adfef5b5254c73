"""Bytes after a whole image (issue 39): a JPEG's EOI or a PNG's IEND followed by padding (Debian's
mate-backgrounds Wood.jpg: 23299 bytes), a phone's motion photo (an MP4 after the JPEG), an MPF
file (a second JPEG after the first), one newline. Pillow opens every one of them; pxvm reads them
in both modes (pxrun notes them with --verbose, load_image warns), and they cannot hide a
truncated image. The files are made here from the bundled photo (no download); pxbatch's are in
test_pxbatch_lenient.py."""
import io
import os
import struct
import subprocess
import warnings

import numpy as np
import pytest

import pxvm
from conftest import BIN, PHOTO, ROOT

FOV = os.path.join(ROOT, "programs", "foveate273.pxi")
JPEG_END = "JPEG's end-of-image marker"
PNG_END = "PNG's IEND chunk"


def mp4():
    """An 'ftyp' box and an 'mdat' box of 4000 bytes of (fake) video: what a motion photo appends."""
    body = bytes((i * 2654435761 >> 13) & 0xFF for i in range(3992))  # every byte value, FF D8 among them
    return struct.pack(">I", 24) + b"ftypmp42" + bytes(4) + b"mp42isom" + struct.pack(">I", 4000) + b"mdat" + body


def second_jpeg():
    """A 64x48 JPEG: the second image of an MPF file (a gain map, a depth map)."""
    from PIL import Image
    b = io.BytesIO()
    Image.new("L", (64, 48), 128).save(b, "JPEG")
    return b.getvalue()


TRAILERS = {"zeros": bytes(23299), "mp4": mp4(), "mpf": second_jpeg(), "newline": b"\n"}


@pytest.fixture(scope="module")
def bases(tmp_path_factory):
    """The photo as PNG, JPEG and progressive JPEG: the whole files trailers are appended to."""
    from PIL import Image
    d = tmp_path_factory.mktemp("bases")
    rgb = Image.open(PHOTO).convert("RGB")
    rgb.save(d / "base.jpg", quality=90)
    rgb.save(d / "base-prog.jpg", quality=90, progressive=True)
    return {"png": open(PHOTO, "rb").read(), "jpg": (d / "base.jpg").read_bytes(),
            "prog.jpg": (d / "base-prog.jpg").read_bytes()}


def cases():
    return [(kind, tail) for kind in ("png", "jpg", "prog.jpg") for tail in TRAILERS]


def write(tmp_path, bases, kind, tail):
    path = tmp_path / ("%s-%s" % (tail, kind))
    path.write_bytes(bases[kind] + TRAILERS[tail])
    return path, len(bases[kind]), len(TRAILERS[tail]), PNG_END if kind == "png" else JPEG_END


@pytest.mark.parametrize("kind,tail", cases())
def test_pillow_opens_every_file_with_a_trailer(bases, tmp_path, kind, tail):
    from PIL import Image
    path, _, _, _ = write(tmp_path, bases, kind, tail)
    with Image.open(path) as im:
        im.load()
        assert im.size == (451, 300)


@pytest.mark.parametrize("kind,tail", cases())
def test_load_image_reads_a_trailer_and_warns_how_many_bytes(bases, tmp_path, kind, tail):
    path, end, n, marker = write(tmp_path, bases, kind, tail)
    whole = tmp_path / ("whole-" + kind)
    whole.write_bytes(bases[kind])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the whole file: no warning
        want = pxvm.load_image(whole)
    note = "pxvm: '%s': %d bytes after the %s (which ends at byte %d) ignored" % (path, n, marker, end)
    for lenient in (False, True):
        with warnings.catch_warnings(record=True) as got:
            warnings.simplefilter("always")
            img = pxvm.load_image(path, lenient=lenient)
        assert [str(w.message) for w in got] == [note]
        assert got[0].category is UserWarning
        assert np.array_equal(img, want)


def test_the_debian_photos_trailer_read_as_pillow_reads_it(bases, tmp_path):
    """Wood.jpg's trailer is 563 zero bytes and the rest of another JPEG's tables: made alike here,
    decoded to Pillow's pixels (libjpeg-turbo both)."""
    from PIL import Image
    path = tmp_path / "wood-like.jpg"
    tail = bytes(563) + b"LN\xb8\x02\xd8\xff\xdb\x00\x84" + bytes(range(256)) * 89
    path.write_bytes(bases["jpg"] + tail)
    with pytest.warns(UserWarning, match="%d bytes after the JPEG's end-of-image marker" % len(tail)):
        img = pxvm.load_image(path)
    with Image.open(path) as im:
        ref = np.asarray(im.convert("RGBA"))
    assert np.abs(img.astype(int) - ref).max() <= 1


def pxrun(*args):
    return subprocess.run([os.path.join(BIN, "pxrun"), *[str(a) for a in args]], capture_output=True, text=True,
                          cwd=ROOT)


@pytest.mark.parametrize("tail", list(TRAILERS))
def test_pxrun_reads_a_trailer_and_notes_it_with_verbose(bases, tmp_path, tail):
    path, end, n, marker = write(tmp_path, bases, "jpg", tail)
    whole = tmp_path / "whole.jpg"
    whole.write_bytes(bases["jpg"])
    want = pxrun(FOV, "--in", "image=%s" % whole, "--hash")
    assert want.returncode == 0, want.stderr
    r = pxrun(FOV, "--in", "image=%s" % path, "--hash")
    assert r.returncode == 0 and r.stderr == "" and r.stdout == want.stdout, r.stderr
    r = pxrun(FOV, "--in", "image=%s" % path, "--hash", "--verbose")
    assert r.returncode == 0 and r.stdout == want.stdout, r.stderr
    assert r.stderr == "pxrun: note: '%s': %d bytes after the %s (which ends at byte %d) ignored\n" % (
        path, n, marker, end)


@pytest.mark.parametrize("kind", ["jpg", "prog.jpg"])
@pytest.mark.parametrize("tail", list(TRAILERS))
def test_a_trailer_cannot_hide_a_jpeg_cut_mid_scan(bases, tmp_path, kind, tail):
    data = bases[kind]
    for cut in (len(data) // 2, len(data) - 3):
        path = tmp_path / ("cut-%d-%s" % (cut, kind))
        path.write_bytes(data[:cut] + TRAILERS[tail])
        r = pxrun(FOV, "--in", "image=%s" % path)
        assert r.returncode == 3, (cut, r.stderr)
        assert "pxrun: malformed: '%s': corrupt or unsupported JPEG (" % path in r.stderr
        with pytest.raises(pxvm.Malformed, match="corrupt or unsupported JPEG"):
            pxvm.load_image(path)


@pytest.mark.parametrize("tail", list(TRAILERS))
def test_a_trailer_cannot_hide_a_png_whose_image_data_is_short(tmp_path, tail):
    """Every chunk whole (lengths and CRCs right), the one IDAT half the image's data, IEND."""
    import zlib
    data = open(PHOTO, "rb").read()
    pos, idat = 8, b""
    while pos < len(data):
        n, = struct.unpack(">I", data[pos:pos + 4])
        if data[pos + 4:pos + 8] == b"IDAT":
            idat += data[pos + 8:pos + 8 + n]
        pos += 12 + n

    def chunk(kind, body):
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
    path = tmp_path / "short.png"
    path.write_bytes(data[:33] + chunk(b"IDAT", idat[:len(idat) // 2]) + chunk(b"IEND", b"") + TRAILERS[tail])
    for lenient in (False, True):
        with pytest.raises(pxvm.Malformed, match="short.png': corrupt or truncated PNG \\(Not enough image data\\)$"):
            pxvm.load_image(path, lenient=lenient)
