"""Any-size programs from Python: foveate273_any takes the mixed-size photos of tests/data/photos
without any policy, each at its own size, with the bytes pxrun writes; and gen_log2_table.py's
table is checked exactly with big integers."""
import os
import subprocess
import sys

import numpy as np
import pytest

import pxvm

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.environ.get("PXVM_BIN", os.path.join(ROOT, "bin"))
PHOTOS = os.path.join(ROOT, "tests", "data", "photos")
PROGRAM = os.path.join(ROOT, "programs", "foveate273_any.pxi")
EXECUTOR = os.environ.get("PXVM_TEST_EXECUTOR", "cpu")


def _photos():
    return sorted(os.path.join(PHOTOS, f) for f in os.listdir(PHOTOS) if f.endswith((".png", ".jpg")))


def test_log2_table_is_exact():
    out = subprocess.run([sys.executable, os.path.join(ROOT, "isa", "gen_log2_table.py"), "--check",
                          os.path.join(ROOT, "isa", "px_sem.h")], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    # the definition itself, independently: T[m]^256 >= 2^(8192+m) > (T[m]-1)^256
    sys.path.insert(0, os.path.join(ROOT, "isa"))
    import gen_log2_table
    t = gen_log2_table.table()
    assert t[0] == 1 << 32
    for m, v in enumerate(t):
        assert v ** 256 >= 1 << (8192 + m) > (v - 1) ** 256


def test_slot_info_reports_the_bounds():
    prog = pxvm.Program.load(PROGRAM)
    s = prog.slot("image")
    assert s.any_size and (s.w, s.h) == (451, 300)
    assert (s.min_side, s.max_side, s.max_pixels) == (16, 16384, 0)
    assert not prog.slot("atlas").any_size


def test_runner_takes_mixed_sizes_as_pxrun_does(tmp_path):
    prog = pxvm.Program.load(PROGRAM)
    runner = pxvm.Runner(prog, executor=EXECUTOR)
    sizes = set()
    for path in _photos():
        img = pxvm.load_image(path)
        sizes.add(img.shape[:2])
        tokens = np.asarray(runner.run(img)["atlas"])
        npy = tmp_path / (os.path.basename(path) + ".npy")
        subprocess.run([os.path.join(BIN, "pxrun"), PROGRAM, "--in", "image=" + path, "--npy", "atlas=%s" % npy],
                       check=True, capture_output=True)
        want = np.load(npy)  # (273, 16, 16, 4): the atlas's patches, row by row of 17
        patches = tokens.reshape(17, 16, 17, 16, 4).transpose(0, 2, 1, 3, 4).reshape(289, 16, 16, 4)[:273]
        assert patches.tobytes() == want.tobytes(), path
    assert len(sizes) == 4  # the photos really have 4 sizes


def test_size_outside_the_bounds_is_unlinkable():
    prog = pxvm.Program.load(PROGRAM)
    runner = pxvm.Runner(prog, executor=EXECUTOR)
    with pytest.raises(pxvm.Unlinkable, match="it takes 16x16 .. 16384x16384"):
        runner.run(np.zeros((10, 40, 3), dtype=np.uint8))
