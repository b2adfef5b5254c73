"""The RESIZE instruction end to end: a program with RESIZE, assembled by pxasm and run by pxrun
(on PXVM_TEST_EXECUTOR), gives Pillow's bytes on photographs from scikit-image's data folder:
Image.resize((w, h), filter) for stretch (fit=0), and for fit=1 Pillow's resize to the fit rule's
size (isa/SPEC.md, RESIZE) pasted, centred, into a canvas of the pad colour. RGB photos are
compared in R, G, B with alpha 255; grey ("L") ones in R, as the VM holds them as (v, v, v, 255)."""
import os
import subprocess

import numpy as np
import pytest

from conftest import BIN, EXECUTOR, pxrun

Image = pytest.importorskip("PIL.Image")

SKIMAGE_DATA = "/usr/lib/python3/dist-packages/skimage/data"
FILTERS = {"nearest": 0, "lanczos": 1, "bilinear": 2, "bicubic": 3, "box": 4, "hamming": 5}
PAD = (128, 64, 33, 255)

# (photo, mode, [(w, h, fit, filter)]): downscaling, upscaling, one side, both aspects of fit
CASES = [
    ("chelsea.png", "RGB", [(448, 448, 1, "bicubic"), (224, 224, 0, "bilinear"), (451, 150, 0, "lanczos"),
                            (97, 301, 1, "hamming"), (640, 480, 0, "box"), (300, 100, 1, "nearest")]),
    ("astronaut.png", "RGB", [(224, 224, 0, "bicubic"), (100, 300, 1, "lanczos"), (300, 100, 1, "bilinear"),
                              (513, 511, 0, "hamming"), (64, 64, 1, "box"), (1000, 7, 0, "nearest")]),
    ("coffee.png", "RGB", [(384, 384, 1, "bicubic"), (37, 401, 0, "bicubic"), (600, 400, 1, "lanczos")]),
    ("camera.png", "L", [(256, 256, 0, "bicubic"), (200, 100, 1, "lanczos"), (99, 77, 0, "box")]),
]


def fit_size(sw, sh, w, h):
    if sw * h > sh * w:
        return w, max(1, (2 * sh * w + sw) // (2 * sw))
    if sw * h < sh * w:
        return max(1, (2 * sw * h + sh) // (2 * sh)), h
    return w, h


def expected(im, w, h, fit, flt):
    if not fit:
        return np.asarray(im.resize((w, h), flt)), None
    nw, nh = fit_size(im.width, im.height, w, h)
    return np.asarray(im.resize((nw, nh), flt)), ((w - nw) // 2, (h - nh) // 2, nw, nh)


@pytest.mark.parametrize("photo,mode,sizes", CASES, ids=[c[0] for c in CASES])
def test_resize_op_gives_pillows_bytes(tmp_path, photo, mode, sizes):
    path = os.path.join(SKIMAGE_DATA, photo)
    if not os.path.exists(path):
        pytest.skip("scikit-image's data folder is not installed (make deps)")
    with Image.open(path) as f:
        im = f.convert(mode)
    src = tmp_path / "src.png"
    im.save(src)
    lines = [".width 32", ".slot image input %dx%d" % im.size]
    for i, (w, h, fit, name) in enumerate(sizes):
        lines.append(".slot out%d output %dx%d" % (i, w + 3, h + 2))
    for i, (w, h, fit, name) in enumerate(sizes):
        pad = " pad_r=%d pad_g=%d pad_b=%d pad_a=%d" % PAD if fit else ""
        lines.append("RESIZE image out%d filter=%d at=(2,1) size=(%d,%d) fit=%d%s" % (i, FILTERS[name], w, h, fit, pad))
    lines.append("HALT")
    (tmp_path / "p.pxs").write_text("\n".join(lines) + "\n")
    subprocess.run([os.path.join(BIN, "pxasm"), str(tmp_path / "p.pxs"), "-o", str(tmp_path / "p.pxi")], check=True)
    outs = []
    for i in range(len(sizes)):
        outs += ["--out", "out%d=%s" % (i, tmp_path / ("o%d.png" % i))]
    pxrun(str(tmp_path / "p.pxi"), "--executor", EXECUTOR, "--in", "image=%s" % src, *outs)
    for i, (w, h, fit, name) in enumerate(sizes):
        with Image.open(tmp_path / ("o%d.png" % i)) as f:
            got = np.asarray(f.convert("RGBA"))
        assert got.shape == (h + 2, w + 3, 4)
        want, box = expected(im, w, h, fit, FILTERS[name])
        rect = got[1:1 + h, 2:2 + w]
        # outside the rectangle: untouched (an output starts zeroed)
        assert not got[0].any() and not got[1 + h:].any() and not got[:, :2].any() and not got[:, 2 + w:].any()
        if box:
            ox, oy, nw, nh = box
            canvas = np.zeros((h, w), bool)
            canvas[oy:oy + nh, ox:ox + nw] = True
            assert (rect[~canvas] == PAD).all(), (photo, w, h, name)
            rect = rect[oy:oy + nh, ox:ox + nw]
        if mode == "L":
            assert np.array_equal(rect[..., 0], want), (photo, w, h, fit, name)
            assert np.array_equal(rect[..., 1], want) and np.array_equal(rect[..., 2], want)
        else:
            assert np.array_equal(rect[..., :3], want), (photo, w, h, fit, name)
        assert (rect[..., 3] == 255).all()
