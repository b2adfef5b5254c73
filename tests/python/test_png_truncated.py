"""PNG decoding against Pillow on files written here (a small PNG writer: every colour type the
decoder reads, all five row filters, several IDAT chunks, Adam7 interlacing): a whole file is
Pillow's `convert("RGBA")` byte for byte, interlaced or not; a file cut inside its image data,
decoded with lenient=True, is what Pillow gives with `ImageFile.LOAD_TRUNCATED_IMAGES` (the rows
that arrived, the rest of its zeroed image) at every cut tried, with the truncation as the
warning; strict refuses it naming lenient (isa/SPEC.md, "Lenient decoding")."""
import io
import struct
import warnings
import zlib

import numpy as np
import pytest

import pxvm
from conftest import ROOT

Image = pytest.importorskip("PIL.Image")
ImageFile = pytest.importorskip("PIL.ImageFile")

ADAM7 = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2)]


def _chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xffffffff)


def _filtered(raw, bpp, f, prev):
    """One row's bytes under PNG filter f (0 none, 1 sub, 2 up, 3 average, 4 Paeth)."""
    r = np.frombuffer(raw, np.uint8).astype(np.int32)
    b = np.frombuffer(prev, np.uint8).astype(np.int32) if prev is not None else np.zeros_like(r)
    if f in (0, 2):
        return bytes(((r - (b if f == 2 else 0)) & 255).astype(np.uint8))
    out = np.zeros_like(r)
    for i in range(len(r)):  # left neighbours of the raw row: sequential
        a = r[i - bpp] if i >= bpp else 0
        c = b[i - bpp] if i >= bpp else 0
        if f == 1:
            p = a
        elif f == 3:
            p = (a + b[i]) // 2
        else:
            pa, pb, pc = abs(b[i] - c), abs(a - c), abs(a + b[i] - 2 * c)
            p = a if pa <= pb and pa <= pc else (b[i] if pb <= pc else c)
        out[i] = (r[i] - p) & 255
    return bytes(out.astype(np.uint8))


def png(a, color, depth=8, interlace=False, palette=None, trns=None, orientation=None):
    """a (h, w, channels) of samples (uint16 for depth 16, indices for colour type 3) as a PNG:
    filters 0..4 in turn, IDAT chunks of 700 bytes."""
    h, w, ch = a.shape
    bpp = max(1, ch * depth // 8)

    def rows(sub, k=0):
        out, prev = b"", None
        for row in sub:
            if depth == 16:
                raw = row.astype(">u2").tobytes()
            elif depth == 8:
                raw = row.astype(np.uint8).tobytes()
            else:  # 1, 2 or 4 bits, one channel
                raw = np.packbits(np.unpackbits(row.astype(np.uint8).reshape(-1, 1), axis=1)[:, 8 - depth:]).tobytes()
            f = k % 5
            k += 1
            out += bytes([f]) + _filtered(raw, bpp, f, prev)
            prev = raw
        return out

    passes = ADAM7 if interlace else [(0, 0, 1, 1)]
    data = b"".join(rows(a[y0::dy, x0::dx]) for x0, y0, dx, dy in passes
                    if len(range(y0, h, dy)) and len(range(x0, w, dx)))
    out = b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, depth, color, 0, 0, int(interlace)))
    if palette is not None:
        out += _chunk(b"PLTE", bytes(np.asarray(palette, np.uint8).reshape(-1)))
    if trns is not None:
        out += _chunk(b"tRNS", trns)
    if orientation is not None:  # an eXIf chunk: a big-endian TIFF block of one entry, Orientation
        out += _chunk(b"eXIf", b"MM\0*\0\0\0\x08\0\x01" + struct.pack(">HHIHH", 0x0112, 3, 1, orientation, 0) + b"\0" * 4)
    z = zlib.compress(data, 9)
    for i in range(0, len(z), 700):
        out += _chunk(b"IDAT", z[i:i + 700])
    return out + _chunk(b"IEND", b"")


def cases():
    photo = np.asarray(Image.open(f"{ROOT}/programs/data/chelsea.png").convert("RGBA"))[40:87, 100:161]  # 47 x 61
    rng = np.random.default_rng(7)
    idx = rng.integers(0, 6, photo.shape[:2] + (1,))
    pal = rng.integers(0, 256, (6, 3))
    grey = photo[..., :1]
    return {
        "rgb": dict(a=photo[..., :3], color=2),
        "rgba": dict(a=photo, color=6),
        "grey": dict(a=grey, color=0),
        "grey-alpha": dict(a=photo[..., [0, 3]], color=4),
        "palette-trns": dict(a=idx, color=3, palette=pal, trns=bytes([10, 200, 255])),
        "rgb16": dict(a=photo[..., :3].astype(np.uint16) * 257 + 3, color=2, depth=16),
        "grey1": dict(a=(grey > 100).astype(np.uint8), color=0, depth=1),
        "rgb-key0": dict(a=photo[..., :3], color=2, trns=struct.pack(">HHH", 0, 0, 0)),
    }


def pillow_rgba(data):
    im = Image.open(io.BytesIO(data))
    im.load()
    return np.asarray(im.convert("RGBA"))


@pytest.mark.parametrize("interlace", [False, True], ids=["progressive-rows", "adam7"])
@pytest.mark.parametrize("name", sorted(cases()))
def test_whole_png_is_pillows_rgba(name, interlace):
    data = png(interlace=interlace, **cases()[name])
    assert np.array_equal(pxvm.load_image(data), pillow_rgba(data))


@pytest.mark.parametrize("interlace", [False, True], ids=["progressive-rows", "adam7"])
@pytest.mark.parametrize("name", sorted(cases()))
def test_truncated_png_lenient_is_pillows_load_truncated(name, interlace, monkeypatch):
    data = png(interlace=interlace, **cases()[name])
    first = data.index(b"IDAT") - 4  # the first IDAT chunk's length
    end = data.rindex(b"IEND") - 4
    cuts = sorted({c for c in (first + 8, first + 9, first + 300, *np.linspace(first + 8, end - 1, 9).astype(int))
                   if c < end})
    monkeypatch.setattr(ImageFile, "LOAD_TRUNCATED_IMAGES", True)
    partial = 0
    for cut in cuts:
        want = pillow_rgba(data[:cut])
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            got = pxvm.load_image(data[:cut], lenient=True)
        assert np.array_equal(got, want), (name, interlace, cut)
        assert any("truncated: the data ends at byte %d" % cut in str(x.message) for x in w), [str(x.message) for x in w]
        partial += not np.array_equal(got, pxvm.load_image(data))
        with pytest.raises(pxvm.Malformed, match="decodes what is left of it"):
            pxvm.load_image(data[:cut])
    assert partial >= len(cuts) // 2  # the cuts really leave rows out (a cut late in the last IDAT may not)
    # one byte before the image data begins: no image, refused in both modes, as Pillow refuses it
    with pytest.raises(pxvm.Malformed, match="truncated"):
        pxvm.load_image(data[:first + 7], lenient=True)
    with pytest.raises(OSError):
        pillow_rgba(data[:first + 7])


def test_pxbatch_lenient_row_of_a_truncated_png_is_pillows(tmp_path, monkeypatch):
    """pxbatch --lenient --policy dynamic over a cut photo: its row is Pillow's bicubic resize of
    what LOAD_TRUNCATED_IMAGES gives, and stderr names the file and the truncation."""
    from conftest import EXECUTOR
    from test_pxbatch_dynamic import PLAN, P, pxbatch, shard_rows, smart_resize
    data = open(f"{ROOT}/programs/data/chelsea.png", "rb").read()
    src = tmp_path / "in"
    src.mkdir()
    cut = src / "cut.png"
    cut.write_bytes(data[:len(data) * 3 // 5])
    r = pxbatch(PLAN, "--in-dir", str(src), "--out", str(tmp_path / "o"), "--policy", "dynamic", "--lenient",
                "--executor", EXECUTOR)
    assert r.returncode == 0 and "pxbatch: warning (--lenient): malformed: '%s'" % cut in r.stderr, r.stderr
    monkeypatch.setattr(ImageFile, "LOAD_TRUNCATED_IMAGES", True)
    im = Image.open(cut).convert("RGB")
    h, w = smart_resize(im.height, im.width)
    a = np.asarray(im.resize((w, h), Image.BICUBIC).convert("RGBA"))
    want = a.reshape(h // P, P, w // P, P, 4).transpose(0, 2, 1, 3, 4).reshape(-1, P, P, 4)
    (f, size, resized, tiles), = shard_rows(tmp_path / "o")[0]
    assert resized == [w, h] and tiles.shape == want.shape and int((tiles != want).sum()) == 0
    assert int((np.asarray(im)[-1] == 0).all())  # its last rows never arrived


def test_damage_the_strict_pass_did_not_reach_is_refused(monkeypatch):
    """Found by a red team: the bytes of a cut file that only the lenient pass inflates can hold
    damage of their own. Corrupt compressed data before the cut is refused in both modes (as in the
    whole file), and so is a compressed stream that ends before the last row (a whole file's "Not
    enough image data"), which cutting IEND off used to hide; the same cut of a sound file decodes."""
    photo = np.asarray(Image.open(f"{ROOT}/programs/data/chelsea.png").convert("RGB"))[:100, :120]
    sound = png(photo, 2)
    second = sound.index(b"IDAT", sound.index(b"IDAT") + 4) - 4  # the second IDAT chunk
    bad = bytearray(sound)
    bad[second + 8 + 100: second + 8 + 103] = bytes(x ^ 0xA5 for x in bad[second + 8 + 100: second + 8 + 103])
    bad[second + 708: second + 712] = struct.pack(">I", zlib.crc32(bytes(bad[second + 4: second + 708])))
    cut = second + 8 + 500
    with pytest.warns(UserWarning, match="truncated"):
        assert pxvm.load_image(sound[:cut], lenient=True).shape == (100, 120, 4)
    for data in (bytes(bad), bytes(bad[:cut])):
        for lenient in (False, True):
            with pytest.raises(pxvm.Malformed) as e:
                pxvm.load_image(data, lenient=lenient)
            assert "decodes what is left" not in str(e.value)
    rows = b"".join(b"\0" + photo[y].tobytes() for y in range(60))  # 60 of its 100 rows
    short = sound[:33] + _chunk(b"IDAT", zlib.compress(rows)) + _chunk(b"IEND", b"")
    for data in (short, short[:-12], short[:-6]):
        with pytest.raises(pxvm.Malformed, match="Not enough image data"):
            pxvm.load_image(data, lenient=True)


def test_a_cut_rotated_png_binds_at_its_upright_size(tmp_path):
    """Found by a red team: with --exif-transpose, a cut PNG stored sideways (orientation 6) binds
    to a slot of its upright size, as the whole file does."""
    import subprocess
    from conftest import BIN
    photo = np.asarray(Image.open(f"{ROOT}/programs/data/chelsea.png").convert("RGB"))
    sideways = np.ascontiguousarray(np.rot90(photo, 1))  # 300 wide, 451 tall: upright it is 451x300
    data = png(sideways, 2, orientation=6)
    for name, d in (("whole.png", data), ("cut.png", data[:len(data) // 2])):
        (tmp_path / name).write_bytes(d)
        r = subprocess.run([f"{BIN}/pxrun", f"{ROOT}/programs/grid.pxi", "--in", f"image={tmp_path / name}",
                            "--exif-transpose", "--lenient"], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, (name, r.stderr)
        assert ("truncated" in r.stderr) == (name == "cut.png"), r.stderr
