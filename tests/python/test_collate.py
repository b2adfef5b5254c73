"""Datasets for a VLM pipeline (issue 41, "Batches and datasets"): pxvm.data.collate_ragged as a
DataLoader's collate_fn, len() on the datasets, an optional progress bar. The DataLoader test
runs 2 workers over a folder of real photos of mixed sizes (build/photos: sh tests/bench/photos.sh)
to the end."""
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

import pxvm
from conftest import ROOT

torch = pytest.importorskip("torch")
PHOTOS = os.path.join(ROOT, "build", "photos")
UNIFORM = os.path.join(ROOT, "programs", "uniform.json")


def _photos():
    if not os.path.isdir(PHOTOS) or len(os.listdir(PHOTOS)) < 8:
        pytest.skip("no photos: run sh tests/bench/photos.sh")
    return sorted(os.path.join(PHOTOS, f) for f in os.listdir(PHOTOS) if f.lower().endswith((".png", ".jpg", ".jpeg")))


def test_collate_of_items_is_the_ragged_batch_of_their_images():
    """Collating the items of three images equals patches_batch of the three files, field by field."""
    files = _photos()[:3]
    u = pxvm.Runner(pxvm.Program.from_plan(UNIFORM))
    ref = u.patches_batch(files, policy="dynamic")
    items = [(torch.from_numpy(np.array(ref[i])), torch.from_numpy(ref.grid[i].copy()), f) for i, f in enumerate(files)]
    got = pxvm.data.collate_ragged(items)
    assert isinstance(got, pxvm.Ragged) and len(got) == 3 and got.files == files
    assert isinstance(got.tokens, torch.Tensor) and np.array_equal(got.tokens.numpy(), ref.tokens)
    for name in ("offsets", "grid", "position_ids"):
        v = getattr(got, name)
        assert isinstance(v, torch.Tensor) and v.dtype == torch.int64, name
        assert np.array_equal(v.numpy(), getattr(ref, name)), name
    # NumPy items, NumPy out
    got = pxvm.data.collate_ragged([(np.array(ref[i]), ref.grid[i]) for i in range(3)])
    assert isinstance(got.offsets, np.ndarray) and np.array_equal(got.tokens, ref.tokens) and got.files is None


def test_collate_refuses_an_item_whose_count_is_not_its_grid():
    t = torch.zeros((12, 16, 16, 4), dtype=torch.uint8)
    pxvm.data.collate_ragged([(t, torch.tensor([1, 3, 4]))])  # 12 = 1 * 3 * 4: taken
    with pytest.raises(pxvm.UsageError, match="item 1: 12 tokens for grid \\[1, 3, 5\\]"):
        pxvm.data.collate_ragged([(t, torch.tensor([1, 3, 4])), (t, torch.tensor([1, 3, 5]))])


def test_dataloader_with_two_workers_over_real_photos_runs_to_the_end():
    files = _photos()
    ds = pxvm.data.ImageFolderDataset(PHOTOS, UNIFORM, policy="dynamic", batch_size=4)
    assert len(ds) == len(files)
    loader = torch.utils.data.DataLoader(ds, batch_size=5, num_workers=2, collate_fn=pxvm.data.collate_ragged)
    seen, tokens = [], 0
    u = pxvm.Runner(pxvm.Program.from_plan(UNIFORM))
    for batch in loader:
        assert isinstance(batch, pxvm.Ragged) and isinstance(batch.offsets, torch.Tensor)
        assert int(batch.offsets[-1]) == batch.tokens.shape[0] == batch.position_ids.shape[1]
        assert torch.equal(batch.offsets[1:] - batch.offsets[:-1], batch.grid.prod(dim=1))
        seen += batch.files
        tokens += batch.tokens.shape[0]
        if len(seen) <= 5:  # the first batch: the bytes of the same files through patches_batch
            with warnings.catch_warnings():  # Wood.jpg's bytes after its end: no damage, warned of
                warnings.simplefilter("ignore")
                ref = u.patches_batch(batch.files, policy="dynamic")
            assert np.array_equal(batch.tokens.numpy(), ref.tokens)
    assert sorted(seen) == files  # every photo once, to the end (no failure in this folder)
    assert tokens > len(files)


def test_len_of_a_shard_dataset(tmp_path):
    files = _photos()[:3]
    d = tmp_path / "in"
    d.mkdir()
    for f in files:
        os.symlink(f, d / os.path.basename(f))
    out = tmp_path / "out"
    r = subprocess.run([os.path.join(os.environ.get("PXVM_BIN", os.path.join(ROOT, "bin")), "pxbatch"),
                        UNIFORM, "--in-dir", str(d), "--out", str(out),
                        "--policy", "dynamic"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    ds = pxvm.data.ShardDataset(str(out))
    assert len(ds) == 3
    batch = pxvm.data.collate_ragged([ds[i] for i in range(len(ds))])
    assert len(batch) == 3


def test_progress_without_tqdm_is_a_line_on_stderr():
    """progress=True never needs tqdm: where it cannot be imported, a plain line on stderr."""
    code = ("import sys; sys.modules['tqdm'] = None; import pxvm; "
            "print(sum(1 for _ in pxvm.data.progress_bar(range(7), desc='job')))")
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "7" and "job: 7/7 done" in r.stderr


def test_folder_dataset_progress(capfd):
    files = _photos()[:2]
    d = os.path.dirname(files[0])
    ds = pxvm.data.ImageFolderDataset(d, UNIFORM, policy="dynamic", batch_size=16, progress=True)
    ds.files = files  # two photos are enough to see the bar
    assert len(list(ds)) == 2
    assert "pxvm batches of" in capfd.readouterr().err
