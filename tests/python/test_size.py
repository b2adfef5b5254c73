"""--size WxH (pxrun, pxbatch) and size=(W, H) (Python) for an any-size program (issue 23: "pxrun
runs any program on any image that fits its declared bounds; --size/--policy where it helps"): every
image brought to W x H by the policy (stretch by default, or fit), the program run at its resolution
at W x H. The same bytes as the image resized by Pillow and bound at its own size, in all three
front ends; each conflicting or useless use refused (exit 2), naming the value."""
import os
import subprocess

import numpy as np
import pytest

import pxvm
from conftest import BIN, EXECUTOR, ROOT, pxrun

ANY = os.path.join(ROOT, "programs", "foveate273_any.pxi")
FIXED = os.path.join(ROOT, "programs", "foveate273.pxi")
PHOTOS_DIR = os.path.join(ROOT, "tests", "data", "photos")
PHOTOS = sorted(os.path.join(PHOTOS_DIR, f) for f in os.listdir(PHOTOS_DIR) if f.endswith((".png", ".jpg")))


def pxbatch(*args):
    return subprocess.run([os.path.join(BIN, "pxbatch"), *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=300)


def _npy_of(tmp_path, name, *args):
    out = tmp_path / (name + ".npy")
    pxrun(ANY, "--executor", EXECUTOR, "--npy", "atlas=%s" % out, *args)
    return np.load(out)


def test_pxrun_size_is_pxrun_on_the_pillow_resized_image(tmp_path):
    from PIL import Image
    for photo in PHOTOS[:2]:
        resized = tmp_path / "resized.png"
        Image.open(photo).convert("RGB").resize((320, 240), Image.BICUBIC).save(resized)
        sized = _npy_of(tmp_path, "sized", "--in", "image=" + photo, "--size", "320x240")
        native = _npy_of(tmp_path, "native", "--in", "image=%s" % resized)
        assert sized.tobytes() == native.tobytes(), photo
        # another size is another resolution: --size is not ignored
        other = _npy_of(tmp_path, "other", "--in", "image=" + photo, "--size", "200x300")
        assert other.tobytes() != sized.tobytes()


def test_pxbatch_size_is_pxrun_size_per_file_and_python_is_pxrun(tmp_path):
    d = tmp_path / "in"
    d.mkdir()
    for p in PHOTOS:
        os.symlink(p, d / os.path.basename(p))
    for policy in ([], ["--policy", "fit:bilinear:10,20,30"]):
        out = tmp_path / ("o%d" % len(policy))
        r = pxbatch(ANY, "--in-dir", str(d), "--out", str(out), "--size", "300x200", "--executor", EXECUTOR, *policy)
        assert r.returncode == 0, r.stderr
        shard = np.load(out / "shard-00000.npy")
        assert shard.shape[0] == len(PHOTOS)
        runner = pxvm.Runner(pxvm.Program.load(ANY), executor=EXECUTOR)
        py_policy = policy[1] if policy else None
        for i, p in enumerate(sorted(PHOTOS)):
            one = _npy_of(tmp_path, "one", "--in", "image=" + p, "--size", "300x200", *policy)
            assert shard[i].tobytes() == one.tobytes(), p
            assert runner.patches(pxvm.load_image(p), size=(300, 200), policy=py_policy).tobytes() == one.tobytes()
        batch = runner.patches_batch([pxvm.load_image(p) for p in sorted(PHOTOS)], size=[300, 200], policy=py_policy)
        assert batch.tobytes() == shard.tobytes()
        assert "size" in open(out / "shard-00000.json").read()


REFUSED = [
    (["--size", "320x240", "--policy", "native"], "--size 320x240: --policy 'native' decides the size itself"),
    (["--size", "320x240", "--policy", "exact"], "--size 320x240: --policy 'exact' decides the size itself"),
    (["--size", "8x8"], "--size 8x8 is outside the bounds of program '%s': a 8x8 image cannot be bound to slot 1 "
                        "('image'): it takes 16x16 .. 16384x16384" % ANY),
    (["--size", "320x240", "--size", "100x100"], "--size given twice ('320x240', then '100x100')"),
    (["--size", "320x"], "--size takes WxH, the width and height 1..65535 (e.g. 320x240), not '320x'"),
    (["--size", "0x5"], "not '0x5'"),
]


@pytest.mark.parametrize("args,words", REFUSED)
def test_size_refusals_pxrun_and_pxbatch(tmp_path, args, words):
    r = pxrun(ANY, "--in", "image=" + PHOTOS[0], *args, check=False)
    assert r.returncode == 2 and words in r.stderr, r.stderr
    r = pxbatch(ANY, "--in-dir", PHOTOS_DIR, "--out", str(tmp_path / "o"), "--executor", "cpu", *args)
    assert r.returncode == 2 and words in r.stderr, r.stderr
    assert not (tmp_path / "o").exists()


def test_size_with_a_fixed_size_program_or_dynamic_is_refused(tmp_path):
    words = ("--size 320x240: program '%s' is not any-size: its input slot 1 ('image') is 451x300, the only size it "
             "takes" % FIXED)
    r = pxrun(FIXED, "--in", "image=" + PHOTOS[0], "--size", "320x240", check=False)
    assert r.returncode == 2 and words in r.stderr, r.stderr
    r = pxbatch(FIXED, "--in-dir", PHOTOS_DIR, "--out", str(tmp_path / "o"), "--size", "320x240")
    assert r.returncode == 2 and words in r.stderr, r.stderr
    plan = os.path.join(ROOT, "programs", "uniform.json")
    r = pxrun(plan, "--in", "image=" + PHOTOS[0], "--size", "320x240", "--policy", "dynamic", check=False)
    assert r.returncode == 2 and "--policy 'dynamic' decides the size itself" in r.stderr, r.stderr
    r = pxrun(ANY, "--frames", PHOTOS_DIR, "--size", "320x240", check=False)
    assert r.returncode == 2 and "--size binds the --in images: --frames binds each frame at its own size" in r.stderr


def test_python_size_refusals_say_what_pxrun_says():
    runner = pxvm.Runner(pxvm.Program.load(ANY), executor=EXECUTOR)
    img = pxvm.load_image(PHOTOS[0])
    cases = [(dict(size=(320, 240), policy="native"), "size 320x240: policy 'native' decides the size itself"),
             (dict(size=(320, 240), policy="exact"), "size 320x240: policy 'exact' decides the size itself"),
             (dict(size=(320, 240), policy="dynamic"), "size 320x240: policy 'dynamic' decides the size itself"),
             (dict(size=(8, 8)), "size 8x8 is outside the bounds of program '%s': a 8x8 image cannot be bound to "
                                 "slot 1 ('image'): it takes 16x16 .. 16384x16384" % ANY),
             (dict(size=(0, 5)), "size takes (W, H), the width and height 1..65535"),
             (dict(size="320x240"), "size takes (W, H)")]
    for kw, words in cases:
        for call in (lambda: runner.patches(img, **kw), lambda: runner.run(img, **kw),
                     lambda: runner.patches_batch([img], **kw), lambda: runner.tokens(img, **kw),
                     lambda: runner.tokens_batch([img], **kw)):
            with pytest.raises(pxvm.UsageError, match="usage: ") as e:
                call()
            assert words in str(e.value), (kw, str(e.value))
    fixed = pxvm.Runner(pxvm.Program.load(FIXED), executor=EXECUTOR)
    with pytest.raises(pxvm.UsageError) as e:
        fixed.patches(img, size=(320, 240))
    assert ("size 320x240: program '%s' is not any-size: its input slot 1 ('image') is 451x300, the only size it "
            "takes" % FIXED) in str(e.value)


def test_image_folder_dataset_size_is_pxbatch_size(tmp_path):
    pytest.importorskip("torch")
    from pxvm.data import ImageFolderDataset
    d = tmp_path / "in"
    d.mkdir()
    for p in PHOTOS:
        os.symlink(p, d / os.path.basename(p))
    r = pxbatch(ANY, "--in-dir", str(d), "--out", str(tmp_path / "o"), "--size", "300x200", "--executor", "cpu")
    assert r.returncode == 0, r.stderr
    shard = np.load(tmp_path / "o" / "shard-00000.npy")
    items = list(ImageFolderDataset(d, ANY, size=(300, 200), batch_size=3))
    assert np.stack([t.numpy() for t, _, _ in items]).tobytes() == shard.tobytes()
    with pytest.raises(pxvm.UsageError, match="size 300x200: policy 'native' decides the size itself"):
        ImageFolderDataset(d, ANY, size=(300, 200), policy="native")
    with pytest.raises(pxvm.UsageError, match="is not any-size"):
        ImageFolderDataset(d, pxvm.Program.load(FIXED), size=(300, 200))


def test_a_batch_changes_size_again_and_equals_its_items_run_alone():
    """patches_batch([x, x], size=S2) after size=S1: every item takes the new size at once (was
    refused: the size check bound item 0 alone, and item 1 held the old size)."""
    r, one = pxvm.Runner(ANY, executor=EXECUTOR), pxvm.Runner(ANY, executor=EXECUTOR)
    x = np.random.default_rng(0).integers(0, 256, (300, 451, 4), dtype=np.uint8)
    for size in [(320, 240), (400, 300), (320, 240)]:
        both = r.patches_batch([x, x], size=size)
        alone = one.patches(x, size=size)
        assert np.array_equal(both[0], alone) and np.array_equal(both[1], alone)
