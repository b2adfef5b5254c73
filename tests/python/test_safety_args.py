"""Issue 39: every integer from Python range-checked and every string checked for NUL before it
reaches C (pxvm._capi.c_integer, c_string: ctypes would keep an integer's low bits and C stops a
string at its NUL); Ragged indexed as Python sequences are; size=(W, H) checked against the
program's limits before any image is resized to it, in pxrun's words."""
import os

import numpy as np
import pytest

from conftest import EXECUTOR, ROOT, pxrun
import pxvm
from pxvm import runner as runner_mod

FOVEATE = os.path.join(ROOT, "programs", "foveate273.pxi")
ANY = os.path.join(ROOT, "programs", "foveate273_any.pxi")
PHOTO = os.path.join(ROOT, "programs", "data", "chelsea.png")
PLAN = {"image": [64, 48], "budget": 12, "patch": 8, "scheme": "logpolar"}
INT_MAX = 2**31 - 1


# ---- integers ------------------------------------------------------------------------------------

def test_dynamic_size_patch_beyond_int_is_refused_not_truncated():
    # before: 2**32 + 16 reached C as 16, and the answer was patch 16's
    with pytest.raises(pxvm.UsageError, match=r"patch = 4294967312 is out of range \(-2147483648\.\.2147483647\)"):
        pxvm.dynamic_size("dynamic", 2**32 + 16, 640, 480)
    # the pair at the C int's edge: INT_MAX reaches the library (its own rule refuses it), INT_MAX + 1 does not
    with pytest.raises(pxvm.Error) as e:
        pxvm.dynamic_size("dynamic", INT_MAX, 640, 480)
    assert "out of range (-2147483648" not in str(e.value)
    with pytest.raises(pxvm.UsageError, match="patch = 2147483648 is out of range"):
        pxvm.dynamic_size("dynamic", INT_MAX + 1, 640, 480)
    with pytest.raises(pxvm.UsageError, match="w = 4294967936 is out of range"):
        pxvm.dynamic_size("dynamic", 16, 2**32 + 640, 480)


def test_load_image_limits_are_range_checked():
    # before: max_memory=-1 became 2**64 - 1, no limit at all
    with pytest.raises(pxvm.UsageError, match=r"max_memory = -1 is out of range \(0\.\.18446744073709551615\)"):
        pxvm.load_image(PHOTO, max_memory=-1)
    assert pxvm.load_image(PHOTO, max_memory=2**64 - 1).shape == (300, 451, 4)  # the largest uint64: taken
    with pytest.raises(pxvm.UsageError, match="max_memory = 18446744073709551616 is out of range"):
        pxvm.load_image(PHOTO, max_memory=2**64)
    with pytest.raises(pxvm.UsageError, match="max_side = 4294967296 is out of range"):
        pxvm.load_image(PHOTO, max_side=2**32)  # before: 0
    with pytest.raises(pxvm.UsageError, match="max_side = 1.5: a whole number is needed"):
        pxvm.load_image(PHOTO, max_side=1.5)


def test_read_level_minus_one_is_the_librarys_usage_error():
    r = pxvm.Runner(FOVEATE, executor=EXECUTOR)
    r.patches(pxvm.load_image(PHOTO))
    with pytest.raises(pxvm.UsageError, match=r"has levels 0\.\.8; level -1 asked for"):  # before: negative shift count
        r.read("image", level=-1)
    assert r.read("image", level=0).shape == (1, 300, 451, 4)
    with pytest.raises(pxvm.UsageError, match="level = 4294967296 is out of range"):  # before: level 0
        r.read("image", level=2**32)


def test_runner_arguments_are_range_checked():
    with pytest.raises(pxvm.UsageError, match="threads = 4294967297 is out of range"):
        pxvm.Runner(FOVEATE, executor=EXECUTOR, threads=2**32 + 1)  # before: 1 thread
    r = pxvm.Runner(FOVEATE, executor=EXECUTOR)
    with pytest.raises(pxvm.UsageError, match="batch = 4294967297 is out of range"):
        r.read("image", batch=2**32 + 1)  # before: the runner of 1 item


def test_an_image_claiming_more_rows_than_an_int_is_refused():
    """A stride-tricked array of 2**32 + 48 rows: before, the view's height became 48 and the
    program ran on it as if it were a 64 x 48 image."""
    r = pxvm.Runner(pxvm.Program.from_plan(PLAN), executor=EXECUTOR)
    base = np.zeros(4, np.uint8)
    tall = np.lib.stride_tricks.as_strided(base, shape=(2**32 + 48, 64, 4), strides=(0, 0, 1))
    with pytest.raises(pxvm.UsageError, match="image height = 4294967344 is out of range"):
        r.patches(tall)
    ok = np.lib.stride_tricks.as_strided(base, shape=(48, 64, 4), strides=(0, 0, 1))
    assert r.patches(ok).shape == (12, 8, 8, 4)


def test_dirty_rectangles_are_range_checked():
    prog = pxvm.Program.from_plan(dict(PLAN, fixation="relative", video=0))
    s = pxvm.Runner(prog, executor=EXECUTOR).stream()
    f = np.full((48, 64, 4), 9, np.uint8)
    s.push(f, fixation=(0.5, 0.5))
    with pytest.raises(pxvm.UsageError, match="dirty w = 4294967304 is out of range"):
        s.push(f, dirty=[(0, 0, 2**32 + 8, 8)])  # before: a rectangle 8 wide
    s.push(f, dirty=[(0, 0, 8, 8)])


# ---- strings -------------------------------------------------------------------------------------

def test_slot_names_with_a_nul_are_refused():
    prog = pxvm.Program.load(FOVEATE)
    assert prog.slot("image").name == "image"
    with pytest.raises(pxvm.UsageError, match=r"slot 'image\\x00junk' contains a NUL character"):
        prog.slot("image\0junk")  # before: slot 'image'
    r = pxvm.Runner(prog, executor=EXECUTOR)
    with pytest.raises(pxvm.UsageError, match="contains a NUL character"):
        r.patches(image=pxvm.load_image(PHOTO), **{"image\0junk": pxvm.load_image(PHOTO)})


def test_paths_and_texts_with_a_nul_are_refused():
    with pytest.raises(pxvm.UsageError, match=r"path '.*foveate273\.pxi\\x00junk' contains a NUL character"):
        pxvm.Program.load(FOVEATE + "\0junk")  # before: foveate273.pxi loaded
    with pytest.raises(pxvm.UsageError, match="contains a NUL character"):
        pxvm.load_image(PHOTO + "\0junk")
    with pytest.raises(pxvm.UsageError, match="text .* contains a NUL character"):
        pxvm.Program.assemble(".width 16\n.slot image input 8x8\nHALT\n\0garbage")
    with pytest.raises(pxvm.UsageError, match="policy 'fit\\\\x00junk' contains a NUL character"):
        pxvm.canonical_policy("fit\0junk")
    with pytest.raises(pxvm.UsageError, match="executor 'cpu\\\\x00junk' contains a NUL character"):
        pxvm.Runner(FOVEATE, executor="cpu\0junk")


# ---- Ragged --------------------------------------------------------------------------------------

def test_ragged_indexes_as_a_python_sequence():
    r = pxvm.Runner(pxvm.Program.from_plan(os.path.join(ROOT, "programs", "uniform.json")), executor=EXECUTOR)
    imgs = [np.full((h, w, 3), v, np.uint8) for (w, h), v in (((64, 64), 10), ((96, 64), 20), ((64, 128), 30))]
    rag = r.patches_batch(imgs, policy="dynamic:min=1024,max=20000")
    assert len(rag) == 3
    parts = [rag[i] for i in range(3)]
    assert [p.shape[0] for p in parts] == [int(rag.offsets[i + 1] - rag.offsets[i]) for i in range(3)]
    assert np.array_equal(rag[-1], parts[2]) and rag[-1].shape[0] > 0  # before: empty
    assert np.array_equal(rag[-2], parts[1])  # before: image 1... of -2 + 1 = -1: the wrong span
    assert np.array_equal(rag[-3], parts[0])
    with pytest.raises(IndexError, match="Ragged index 3 out of range: 3 images"):
        rag[3]
    with pytest.raises(IndexError, match="Ragged index -4 out of range: 3 images"):
        rag[-4]
    assert [p.shape for p in rag] == [p.shape for p in parts]  # iteration stops at the end
    assert np.array_equal(rag[np.int64(1)], parts[1])
    with pytest.raises(TypeError):
        rag[1.0]


# ---- size= before any work -----------------------------------------------------------------------

def test_size_beyond_the_memory_limit_is_refused_before_resizing(monkeypatch):
    """Before: every image was resized to 16384 x 16384 first (11.5 s, 3.2 GB), then refused."""
    resized = []
    real = runner_mod._policy_image
    monkeypatch.setattr(runner_mod, "_policy_image", lambda *a: resized.append(a[1:3]) or real(*a))
    r = pxvm.Runner(ANY, executor=EXECUTOR)
    img = pxvm.load_image(PHOTO)
    want = pxrun(ANY, "--in", "image=" + PHOTO, "--size", "16384x16384", "--hash", check=False)
    assert want.returncode != 0
    words = want.stderr.strip().split("pxrun: ", 1)[1]
    assert "the slots need" in words and "(see --max-memory)" in words
    for call in (lambda: r.patches(img, size=(16384, 16384)), lambda: r.patches_batch([img, img], size=(16384, 16384)),
                 lambda: r.tokens(img, size=(16384, 16384)), lambda: r.run(img, size=(16384, 16384))):
        with pytest.raises(pxvm.Unlinkable) as e:
            call()
        assert str(e.value) == words  # pxrun's words
    assert resized == []
    assert r.patches(img, size=(300, 200)).shape == (273, 16, 16, 4)
    assert resized == [(300, 200)]


def test_size_memory_limit_edge():
    """max_memory exactly what the size needs: taken; one byte less: refused before resizing."""
    r = pxvm.Runner(pxvm.Program.load(ANY, max_memory=4 << 20), executor=EXECUTOR)
    img = pxvm.load_image(PHOTO)
    with pytest.raises(pxvm.Unlinkable) as e:
        r.patches(img, size=(1600, 1200))
    need = int(str(e.value).split("the slots need ")[1].split(" bytes")[0])
    ok = pxvm.Runner(pxvm.Program.load(ANY, max_memory=need), executor=EXECUTOR)
    assert ok.patches(img, size=(1600, 1200)).shape == (273, 16, 16, 4)
    short = pxvm.Runner(pxvm.Program.load(ANY, max_memory=need - 1), executor=EXECUTOR)
    with pytest.raises(pxvm.Unlinkable, match="the slots need %d bytes with their mip chains; the limit is %d"
                       % (need, need - 1)):
        short.patches(img, size=(1600, 1200))
