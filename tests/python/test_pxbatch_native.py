"""pxbatch with an any-size program (docs/datasets.md; issue 23): each image bound at its own
size (policy "native", the default for any-size programs, as pxrun); the photos of tests/data/photos
(four sizes and aspects) and chelsea finish with 0 failures, each row equal to the CPU Runner's
patches of that image (two images of one size in a shard run as one batch); the marker records
the policy and each row's size; an image outside the program's bounds is listed in its shard's
errors naming the file, its size and the bounds while the others go on; --policy native with a
fixed-size program is a usage error naming the program; fit with an any-size program resizes to
its reference size. PXVM_TEST_EXECUTOR=cuda runs pxbatch on the GPU (the reference stays the CPU
runner's bytes)."""
import glob
import json
import os
import shutil
import subprocess

import numpy as np
import pytest
from PIL import Image

import pxvm
from conftest import BIN, ROOT

PXBATCH = os.path.join(BIN, "pxbatch")
PROGRAM = os.path.join(ROOT, "programs", "foveate273_any.pxi")
FIXED = os.path.join(ROOT, "programs", "foveate273.pxi")
EXECUTOR = os.environ.get("PXVM_TEST_EXECUTOR", "cpu")
PHOTOS = sorted(glob.glob(os.path.join(ROOT, "tests", "data", "photos", "*.png")) +
                glob.glob(os.path.join(ROOT, "tests", "data", "photos", "*.jpg"))) + \
    [os.path.join(ROOT, "programs", "data", "chelsea.png")]


@pytest.fixture(scope="module")
def photos(tmp_path_factory):
    """The photos, and a second rocket: rocket.jpg and rocket2.jpg share a shard (--shard-size 3,
    names in byte order: camera chelsea coffee-tall | coins rocket rocket2), so one size there is
    a batch of two."""
    d = tmp_path_factory.mktemp("native") / "photos"
    d.mkdir()
    for p in PHOTOS:
        shutil.copy(p, d / os.path.basename(p))
    shutil.copy(d / "rocket.jpg", d / "rocket2.jpg")
    return d


@pytest.fixture(scope="module")
def runner():
    with pxvm.Runner(pxvm.Program.load(PROGRAM), executor="cpu") as r:
        yield r


def run(src, out, *extra, prog=PROGRAM, rc=0):
    r = subprocess.run([PXBATCH, str(prog), "--in-dir", str(src), "--out", str(out), "--shard-size", "3",
                        "--executor", EXECUTOR, "--threads", "1", *extra], capture_output=True, text=True, timeout=120)
    assert r.returncode == rc, r.stdout + r.stderr
    return r


def markers(out):
    return [json.load(open(f)) for f in sorted(glob.glob(str(out) + "/shard-*.json"))]


def verify(out):
    r = subprocess.run([PXBATCH, "--verify", str(out)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr


# exact on an any-size program is native (the program takes each size: pxrun's meaning)
@pytest.mark.parametrize("policy", [[], ["--policy", "native"], ["--policy", "exact"]])
def test_native_rows_equal_runner_patches(photos, tmp_path, runner, policy):
    out = tmp_path / "o"
    r = run(photos, out, *policy)
    assert "6 images" in r.stderr and " 0 failed" in r.stderr, r.stderr
    ms = markers(out)
    assert len(ms) == 2 and all(not m["errors"] and m["job"]["policy"] == "native" for m in ms)
    sizes = set()
    for m in ms:
        arr = np.load(str(out / ("shard-%05d.npy" % m["shard"])))
        assert arr.shape == (len(m["rows"]), 273, 16, 16, 4)
        for row in m["rows"]:
            img = pxvm.load_image(row["file"])
            assert row["size"] == [img.shape[1], img.shape[0]], row
            sizes.add(tuple(row["size"]))
            assert arr[row["row"]].tobytes() == runner.patches(img).tobytes(), row["file"]
    assert len(sizes) == 5  # four photo sizes and chelsea's (the reference, 451x300)
    verify(out)
    # a rerun of the same job skips every shard; the default and --policy native are one job
    r = run(photos, out, *([] if policy else ["--policy", "native"]))
    assert "2 finished shards skipped" in r.stderr, r.stderr


def test_an_image_outside_the_bounds_is_listed_and_the_others_go_on(photos, tmp_path, runner):
    d = tmp_path / "d"
    shutil.copytree(photos, d)
    Image.new("RGB", (10, 40), (9, 9, 9)).save(d / "coins-tiny.png")  # below the 16-pixel side
    out = tmp_path / "o"
    r = run(d, out, rc=9)
    assert "6 images" in r.stderr and " 1 failed" in r.stderr, r.stderr
    ms = markers(out)
    errors = [e for m in ms for e in m["errors"]]
    assert len(errors) == 1 and errors[0]["file"] == str(d / "coins-tiny.png")
    assert errors[0]["error"] == ("unlinkable: a 10x40 image cannot be bound to slot 1 ('image'): it takes "
                                  "16x16 .. 16384x16384 (file '%s')" % (d / "coins-tiny.png")), errors[0]
    rows = [row for m in ms for row in m["rows"]]
    assert len(ms) == 3 and len(rows) == 6
    for m in ms:  # the failed image's shard holds the others, whole
        arr = np.load(str(out / ("shard-%05d.npy" % m["shard"])))
        for row in m["rows"]:
            assert arr[row["row"]].tobytes() == runner.patches(pxvm.load_image(row["file"])).tobytes()
    assert not [f for f in os.listdir(out) if not f.startswith("shard-") and f != ".pxbatch.lock"]
    verify(out)


def test_native_with_a_fixed_program_is_a_usage_error_naming_it(photos, tmp_path):
    out = tmp_path / "o"
    r = run(photos, out, "--policy", "native", prog=FIXED, rc=2)
    assert "--policy native: program '%s' is not any-size; use fit or stretch" % FIXED in r.stderr, r.stderr
    assert not os.path.exists(out)


def test_fit_with_an_any_size_program_resizes_to_its_reference_size(photos, tmp_path):
    out = tmp_path / "o"
    run(photos, out, "--policy", "fit")
    ms = markers(out)
    assert all(m["job"]["policy"] == "fit:bicubic:0,0,0,255" and "size" not in m["rows"][0] for m in ms)
    with pxvm.Runner(pxvm.Program.load(FIXED), executor="cpu") as fixed:  # the same program at 451x300
        for m in ms:
            arr = np.load(str(out / ("shard-%05d.npy" % m["shard"])))
            for row in m["rows"]:
                want = fixed.patches(pxvm.load_image(row["file"]), policy="fit")
                assert arr[row["row"]].tobytes() == want.tobytes(), row["file"]


def test_a_shard_over_half_the_memory_still_runs(photos, tmp_path):
    """Decoded inputs wait within --max-memory / 2 (1 MB here) ahead of the workers, but a native
    shard runs once whole: camera.png alone (1.05 MB decoded) holds the bound, and the rest of its
    shard still decodes (its worker took it), so the run ends (it hung when the bound held a taken
    shard back) with the default run's files, with one worker and with two."""
    run(photos, tmp_path / "default")
    want = {f.name: f.read_bytes() for f in sorted((tmp_path / "default").iterdir()) if f.name.startswith("shard-")}
    for name, extra in (("one", []), ("two", ["--workers", "2"])):
        run(photos, tmp_path / name, "--max-memory", "2000000", *extra)
        got = {f.name: f.read_bytes() for f in sorted((tmp_path / name).iterdir()) if f.name.startswith("shard-")}
        assert got == want, name
