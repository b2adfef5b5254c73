"""pxbatch --policy dynamic (ragged shards) and the loaders of python/pxvm/data.py.

pxbatch over the real photos of tests/data/photos (four sizes and aspects) with a uniform plan and
--policy dynamic finishes with 0 failures; each shard's packed tokens, offsets and grid equal the
Python ragged batch of the same files (Runner.patches_batch(files, policy=...)); --verify passes
and finds a changed offsets file, a truncated grid file and inconsistent index files; a rerun
skips finished shards, and remakes one whose grid file is gone; a .pxi or a grid plan with
dynamic is refused naming it; a file that fails is listed and the others go on. load_shard,
iter_shards, and the torch ShardDataset / ImageFolderDataset give the same tokens.
"""
import glob
import json
import os
import shutil
import subprocess

import numpy as np
import pytest

import pxvm
from conftest import BIN, EXECUTOR, ROOT

PXBATCH = os.path.join(BIN, "pxbatch")
PLAN = os.path.join(ROOT, "programs", "uniform.json")
PHOTOS = sorted(glob.glob(os.path.join(ROOT, "tests", "data", "photos", "*.png")) +
                glob.glob(os.path.join(ROOT, "tests", "data", "photos", "*.jpg")))
POLICY = "dynamic:max=200000"


def pxbatch(*args):
    return subprocess.run([PXBATCH, *args], capture_output=True, text=True, cwd=ROOT, timeout=300)


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    top = tmp_path_factory.mktemp("ragged")
    photos = top / "photos"
    photos.mkdir()
    for i, p in enumerate(PHOTOS + PHOTOS[:2]):  # 6 files, sizes repeated inside a shard
        shutil.copy(p, photos / ("%02d-%s" % (i, os.path.basename(p))))
    out = top / "tokens"
    r = pxbatch(PLAN, "--in-dir", str(photos), "--out", str(out), "--policy", POLICY, "--shard-size", "4",
                "--executor", EXECUTOR)
    assert r.returncode == 0, r.stderr
    assert "6 images" in r.stderr and " 0 failed" in r.stderr
    return photos, out


def test_shards_equal_the_python_ragged_batch(shards):
    photos, out = shards
    files = sorted(str(p) for p in photos.iterdir())
    with pxvm.Runner(pxvm.Program.from_plan(PLAN), executor=EXECUTOR) as runner:
        want = runner.patches_batch(files, policy=POLICY)
    got = list(pxvm.iter_shards(out))
    assert len(got) == 2
    tokens = np.concatenate([g[0] for g in got])
    grid = np.concatenate([g[2] for g in got])
    assert [f for g in got for f in g[3]] == files
    assert tokens.tobytes() == want.tokens.tobytes()
    assert np.array_equal(grid, want.grid)
    for g in got:
        assert g[1][0] == 0 and g[1][-1] == len(g[0])
    m = json.load(open(out / "shard-00000.json"))
    assert m["shape"] == [int(got[0][1][-1]), 16, 16, 4] and m["errors"] == []
    assert m["job"]["policy"] == "dynamic:patch=16,merge=2,min=3136,max=200000:bicubic"
    assert [r["size"] for r in m["rows"]] == want.sizes[:4, 0].tolist()
    assert [r["resized"] for r in m["rows"]] == want.sizes[:4, 1].tolist()
    import hashlib
    for ext, key in (("offsets.npy", "offsets"), ("grid.npy", "grid")):
        data = open(out / ("shard-00000." + ext), "rb").read()
        assert len(data) == m["ragged"][key + "_bytes"]
        assert hashlib.sha256(data).hexdigest() == m["ragged"][key + "_sha256"]


def test_verify_and_reruns(shards, tmp_path):
    _, out = shards
    d = tmp_path / "copy"
    shutil.copytree(out, d)
    r = pxbatch("--verify", str(d))
    assert r.returncode == 0 and "2 good, 0 corrupt" in r.stdout, r.stdout
    off = d / "shard-00001.offsets.npy"
    good = off.read_bytes()
    a = np.load(off)
    a[1] += 1  # same size, another hash
    np.save(off, a)
    r = pxbatch("--verify", str(d))
    assert r.returncode == 1 and "shard-00001: corrupt: its offsets.npy's SHA-256" in r.stdout, r.stdout
    off.write_bytes(good)
    grid = d / "shard-00000.grid.npy"
    grid.write_bytes(grid.read_bytes()[:-8])
    r = pxbatch("--verify", str(d))
    assert r.returncode == 1 and "shard-00000: corrupt: its grid.npy is" in r.stdout, r.stdout
    grid.unlink()  # a rerun makes the shard again, the same bytes
    r = pxbatch(PLAN, "--in-dir", str(shards[0]), "--out", str(d), "--policy", POLICY, "--shard-size", "4",
                "--executor", EXECUTOR)
    assert r.returncode == 0 and "1 finished shard skipped" in r.stderr, r.stderr
    for f in sorted(os.listdir(out)):
        if f.startswith("shard-"):
            assert (d / f).read_bytes() == (out / f).read_bytes(), f
    r = pxbatch(PLAN, "--in-dir", str(shards[0]), "--out", str(d), "--policy", "dynamic", "--shard-size", "4")
    assert r.returncode == 2 and 'in policy: "dynamic:patch=16,merge=2,min=3136,max=200000:bicubic" -> ' \
        '"dynamic:patch=16,merge=2,min=3136,max=1003520:bicubic"' in r.stderr, r.stderr


def test_verify_finds_index_files_that_disagree(shards, tmp_path):
    """Index files rewritten whole with their marker's hashes updated: only the consistency check finds them."""
    import hashlib
    _, out = shards
    d = tmp_path / "copy"
    shutil.copytree(out, d)
    g = np.load(d / "shard-00000.grid.npy")
    g[0, 1] += 1
    np.save(d / "shard-00000.grid.npy", g)
    m = json.load(open(d / "shard-00000.json"))
    data = (d / "shard-00000.grid.npy").read_bytes()
    m["ragged"]["grid_bytes"], m["ragged"]["grid_sha256"] = len(data), hashlib.sha256(data).hexdigest()
    json.dump(m, open(d / "shard-00000.json", "w"))
    r = pxbatch("--verify", str(d))
    assert r.returncode == 1 and "shard-00000: corrupt: its offsets and grid do not agree" in r.stdout, r.stdout


def test_dynamic_refusals_and_failures(tmp_path):
    r = pxbatch(os.path.join(ROOT, "programs", "foveate273.pxi"), "--in-dir", os.path.dirname(PHOTOS[0]), "--out",
                str(tmp_path / "a"), "--policy", "dynamic")
    assert r.returncode == 2 and "'%s' is a program of one size" % os.path.join(ROOT, "programs", "foveate273.pxi") \
        in r.stderr, r.stderr
    r = pxbatch(os.path.join(ROOT, "programs", "grid.json"), "--in-dir", os.path.dirname(PHOTOS[0]), "--out",
                str(tmp_path / "a"), "--policy", "dynamic")
    assert r.returncode == 2 and "is a plan of scheme 'grid'" in r.stderr, r.stderr
    r = pxbatch(PLAN, "--in-dir", os.path.dirname(PHOTOS[0]), "--out", str(tmp_path / "a"), "--policy",
                "dynamic:patch=14")
    assert r.returncode == 2 and "patch=14, but the plan's patch is 16" in r.stderr, r.stderr
    # a file that fails (corrupt; too wide for dynamic) is listed, the others go on
    d = tmp_path / "mixed"
    d.mkdir()
    shutil.copy(PHOTOS[0], d / "a.png")
    (d / "b.png").write_bytes(b"junk")
    wide = np.zeros((2, 600, 3), np.uint8)
    from PIL import Image
    Image.fromarray(wide).save(d / "c.png")
    r = pxbatch(PLAN, "--in-dir", str(d), "--out", str(tmp_path / "m"), "--policy", "dynamic", "--executor", EXECUTOR)
    assert r.returncode == 9 and "1 images" in r.stderr and "2 failed" in r.stderr, r.stderr
    m = json.load(open(tmp_path / "m" / "shard-00000.json"))
    assert [e["file"] for e in m["errors"]] == [str(d / "b.png"), str(d / "c.png")]
    assert "policy dynamic takes aspect ratios up to 200:1; this one is 300.00:1 (file '%s')" % (d / "c.png") \
        in m["errors"][1]["error"]
    tokens, offsets, grid, files = pxvm.load_shard(tmp_path / "m" / "shard-00000.npy")
    assert files == [str(d / "a.png")] and offsets.tolist() == [0, len(tokens)]
    assert pxbatch("--verify", str(tmp_path / "m")).returncode == 0


def test_load_shard_of_a_fixed_count_shard(tmp_path):
    r = pxbatch(os.path.join(ROOT, "programs", "foveate273.pxi"), "--in-dir", os.path.dirname(PHOTOS[0]), "--out",
                str(tmp_path / "f"), "--policy", "fit", "--executor", EXECUTOR)
    assert r.returncode == 0, r.stderr
    tokens, offsets, grid, files = pxvm.load_shard(tmp_path / "f" / "shard-00000")
    raw = np.load(tmp_path / "f" / "shard-00000.npy")
    assert tokens.shape == (raw.shape[0] * 273, 16, 16, 4) and np.array_equal(tokens, raw.reshape(tokens.shape))
    assert offsets.tolist() == [273 * i for i in range(len(files) + 1)] and grid.tolist() == [[1, 1, 273]] * len(files)
    by_marker = pxvm.load_shard(tmp_path / "f" / "shard-00000.json")  # the marker's path names it too
    assert np.array_equal(by_marker[0], tokens) and by_marker[3] == files
    json.dump({"pxbatch": 1}, open(tmp_path / "f" / "shard-00000.json", "w"))
    with pytest.raises(pxvm.Malformed, match="shard-00000.json' is not a pxbatch marker: 'shard' is not 0, the number "
                                             "of its name"):
        pxvm.load_shard(tmp_path / "f" / "shard-00000.npy")


def test_load_shard_missing_or_broken_files_are_package_errors(shards, tmp_path):
    """A missing index file or marker is PxIOError and a truncated .npy Malformed, each naming the file
    (not numpy's FileNotFoundError / ValueError)."""
    _, out = shards
    d = tmp_path / "copy"
    shutil.copytree(out, d)
    pxvm.load_shard(d / "shard-00000.npy")
    os.remove(d / "shard-00000.offsets.npy")
    with pytest.raises(pxvm.PxIOError, match="cannot read '.*shard-00000.offsets.npy'"):
        pxvm.load_shard(d / "shard-00000.npy")
    data = (d / "shard-00001.grid.npy").read_bytes()
    (d / "shard-00001.grid.npy").write_bytes(data[:len(data) // 2])
    with pytest.raises(pxvm.Malformed, match="shard file '.*shard-00001.grid.npy' is %d bytes, its marker says %d"
                       % (len(data) // 2, len(data))):
        pxvm.load_shard(d / "shard-00001.npy")
    (d / "shard-00001.grid.npy").write_bytes(data)
    npy = (d / "shard-00001.npy").read_bytes()
    for mmap in (False, True):  # the marker's size, no .npy array
        (d / "shard-00001.npy").write_bytes(b"\x93NUMPY" + bytes(len(npy) - 6))
        with pytest.raises(pxvm.Malformed, match="shard file '.*shard-00001.npy' is no .npy array"):
            pxvm.load_shard(d / "shard-00001.npy", mmap=mmap)
    with pytest.raises(pxvm.PxIOError, match="cannot read '.*nowhere/shard-00000.json'"):
        pxvm.load_shard(tmp_path / "nowhere" / "shard-00000.npy")


def test_torch_datasets(shards):
    torch = pytest.importorskip("torch", reason="python3-torch is not installed: the PyTorch datasets are not tested")
    photos, out = shards
    ds = pxvm.data.ShardDataset(out)
    files = sorted(str(p) for p in photos.iterdir())
    assert len(ds) == len(files)
    with pxvm.Runner(pxvm.Program.from_plan(PLAN), executor=EXECUTOR) as runner:
        want = runner.patches_batch(files, policy=POLICY)
    for i in range(len(ds)):
        t, g, f = ds[i]
        assert f == files[i] and t.dtype == torch.uint8 and g.tolist() == want.grid[i].tolist()
        assert t.numpy().tobytes() == want[i].tobytes()
    loader = torch.utils.data.DataLoader(ds, batch_size=None, shuffle=False)
    assert [f for _, _, f in loader] == files
    it = list(pxvm.data.ImageFolderDataset(photos, PLAN, policy=POLICY, executor=EXECUTOR, batch_size=4))
    assert [f for _, _, f in it] == files
    for i, (t, g, f) in enumerate(it):
        assert t.numpy().tobytes() == want[i].tobytes() and g.tolist() == want.grid[i].tolist()


def test_the_dataset_classes_are_importable_from_pxvm():
    """pxvm.ShardDataset, as pxvm.data's docstring writes it (every public name from pxvm itself)."""
    pytest.importorskip("torch")
    assert pxvm.ShardDataset is pxvm.data.ShardDataset
    assert pxvm.ImageFolderDataset is pxvm.data.ImageFolderDataset
    with pytest.raises(AttributeError, match="module 'pxvm' has no attribute 'ShardDatasets'"):
        getattr(pxvm, "ShardDatasets")
