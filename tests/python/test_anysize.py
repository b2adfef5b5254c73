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


def _relative_any():
    """A fixation-relative logpolar plan whose input takes any size (reference 451x300)."""
    import json
    plan = {"image": [451, 300], "fixation": "relative", "budget": 273, "scheme": "logpolar", "levels": 5,
            "size": "any"}
    return pxvm.Program.from_plan(json.dumps(plan))


def test_fixations_are_taken_at_the_bound_size():
    """Normalized fixations as NumPy, as a torch host tensor (and a CUDA one on the cuda executor)
    and as texels of the image bound now give one run, at the image's size, after a run at the
    reference size: (0.5, 0.5) of a 1000x1000 image centres near (500, 500), and (800, 800) texels
    are in range there (they were converted or checked at 451x300)."""
    r = pxvm.Runner(_relative_any(), executor=EXECUTOR)
    rng = np.random.default_rng(5)
    small = rng.integers(0, 256, (300, 451, 4), dtype=np.uint8)
    big = rng.integers(0, 256, (1000, 1000, 4), dtype=np.uint8)

    def after_small(**fix):
        r.run(small, fixation=(0.5, 0.5))
        return r.patches(big, **fix), r.geometry(exact=True)[0]
    want, g = after_small(fixation=(0.5, 0.5))
    assert abs(float(g[0, 0]) / 65536 - 500) < 5 and abs(float(g[0, 1]) / 65536 - 500) < 5, g[0]
    fixations = [dict(fixation=(500, 500), fixation_units="texels")]
    try:
        import torch
        fixations.append(dict(fixation=torch.tensor([0.5, 0.5], dtype=torch.float64)))
        fixations.append(dict(fixation=torch.tensor([500.0, 500.0]), fixation_units="texels"))
        if EXECUTOR == "cuda":
            fixations.append(dict(fixation=torch.tensor([0.5, 0.5], dtype=torch.float64, device="cuda")))
    except ImportError:
        pass
    for fix in fixations:
        p, gg = after_small(**fix)
        assert np.array_equal(gg, g) and np.array_equal(p, want), fix
    after_small(fixation=(800, 800), fixation_units="texels")  # in [0, 1000]: accepted
    assert r.geometry(exact=True)[0][0, 0] > 451 * 65536
    with pytest.raises(pxvm.UsageError, match="1000x1000"):
        after_small(fixation=(1001, 10), fixation_units="texels")
    r.patches(big, fixation=(900, 900), fixation_units="texels")  # no new bind: the bound 1000x1000
    with pytest.raises(pxvm.UsageError, match="is not in \\[0, 1000\\].*1000x1000"):
        r.run(fixation=(1000.5, 1), fixation_units="texels", image=big)


def test_positions_and_read_use_the_bound_size():
    """Runner.positions().normalized divides by the bound image's size and Runner.read of the
    any-size input reads it at that size (both used the 451x300 reference size)."""
    r = pxvm.Runner(PROGRAM, executor=EXECUTOR)
    big = np.random.default_rng(6).integers(0, 256, (1000, 1000, 4), dtype=np.uint8)
    r.patches(big)
    assert r.slot_size("image") == (1000, 1000)
    p = r.positions()
    assert np.nanmax(p.normalized) <= 1.0 and np.allclose(p.normalized, p.centre / 1000.0, equal_nan=True)
    assert np.array_equal(r.read("image")[0], big)
    assert r.read("image", level=1).shape == (1, 500, 500, 4)


def _rgba(path):
    return np.asarray(pxvm.load_image(path))


def test_a_batch_of_mixed_sizes_runs_one_batch_per_size():
    """patches_batch / run_batch take a list of images of different sizes into an any-size input
    (a runner binds one size to all its items, so each size runs as its own batch) and give, in
    the list's order, the bytes each image gives alone: with geometry, into `out`, and with the
    policies that resize nothing (native, exact); native on a fixed program is refused."""
    imgs = [_rgba(p) for p in _photos()]
    imgs = imgs + imgs[:2]  # sizes repeat, out of order
    assert len({im.shape[:2] for im in imgs}) >= 4
    r = pxvm.Runner(pxvm.Program.load(PROGRAM), executor=EXECUTOR)
    p, g = r.patches_batch(imgs, with_geometry=True)
    assert tuple(p.shape) == (len(imgs), 273, 16, 16, 4)
    atlas = r.run_batch(imgs)["atlas"]
    for i, im in enumerate(imgs):
        one, g1 = r.patches(im, with_geometry=True)
        assert np.asarray(one).tobytes() == np.asarray(p[i]).tobytes(), i
        assert np.asarray(g1).tobytes() == np.asarray(g[i]).tobytes(), i
        assert np.asarray(r.run(im)["atlas"]).tobytes() == np.asarray(atlas[i]).tobytes(), i
    for policy in ("native", "exact"):
        assert np.asarray(r.patches_batch(imgs, policy=policy)).tobytes() == np.asarray(p).tobytes()
    out = np.zeros((len(imgs), 273, 16, 16, 4), np.uint8)
    assert r.patches_batch(imgs, out=out) is out and out.tobytes() == np.asarray(p).tobytes()
    assert pxvm.ragged.canonical_policy("native") == "native"
    fixed = pxvm.Runner(pxvm.Program.load(os.path.join(ROOT, "programs", "foveate273.pxi")), executor=EXECUTOR)
    with pytest.raises(pxvm.UsageError, match="policy native: the program has no any-size input"):
        fixed.patches_batch(imgs, policy="native")


def test_an_image_folder_dataset_of_mixed_sizes_with_an_any_size_program():
    """ImageFolderDataset over photos of several sizes with foveate273_any (no policy): every
    photo's tokens, as Runner.patches gives them alone."""
    pytest.importorskip("torch")
    ds = pxvm.data.ImageFolderDataset(PHOTOS, PROGRAM, batch_size=3, executor=EXECUTOR)
    r = pxvm.Runner(pxvm.Program.load(PROGRAM), executor=EXECUTOR)
    got = list(ds)
    assert [f for _, _, f in got] == _photos()
    for tokens, grid, f in got:
        assert tokens.numpy().tobytes() == np.asarray(r.patches(_rgba(f))).tobytes(), f
        assert grid.tolist() == [1, 1, 273]
