"""A red-team trial of the CLI/Python bad-input work (trial 3): two outputs to one file, a folder of
two jobs' shards, two pxbatch runs on one new --out, ... Nothing of the user's lost, nothing silently
wrong. Each test fails before its fix (the commit says which)."""
import os
import shutil
import subprocess

import numpy as np
import pytest

import pxvm
from conftest import BIN, ROOT, pxrun

FIXED = os.path.join(ROOT, "programs", "foveate273.pxi")
CAMERA = os.path.join(ROOT, "tests", "data", "photos", "camera.png")

TWO_INPUTS = """.width 16
.slot a input 451x300 any min=16
.slot b input 451x300 any min=16
.slot oa output 64x64
.slot ob output 64x64
RESIZE a oa filter=3 at=(0,0) size=(64,64) fit=0 pad_r=0 pad_g=0 pad_b=0 pad_a=0
RESIZE b ob filter=3 at=(0,0) size=(64,64) fit=0 pad_r=0 pad_g=0 pad_b=0 pad_a=0
HALT
"""


def tool(name, *args, cwd=ROOT, **kw):
    return subprocess.run([os.path.abspath(os.path.join(BIN, name)), *args], capture_output=True, text=True, cwd=cwd, timeout=300,
                          **kw)


@pytest.fixture
def two(tmp_path):
    """A program of two any-size inputs (a, b) and two outputs (oa, ob)."""
    src = tmp_path / "two.pxs"
    src.write_text(TWO_INPUTS)
    r = tool("pxasm", str(src), "-o", str(tmp_path / "two.pxi"))
    assert r.returncode == 0, r.stderr
    return str(tmp_path / "two.pxi")


# ---- 1: two outputs to one file: one was lost, exit 0

@pytest.mark.parametrize("outs", [
    ["--npy", "oa=x.npy", "--npy", "ob=x.npy"],
    ["--npy", "oa=x.npy", "--npy", "ob=./x.npy"],
    ["--out", "oa=z.png", "--out", "ob=z.png"],
    ["--out", "oa=z.png", "--npy", "ob=z.png"],
    ["-o", "z.png", "--npy", "ob=sub/../z.png"],
])
def test_two_outputs_to_one_file_is_a_usage_error(tmp_path, two, outs):
    (tmp_path / "sub").mkdir()
    r = tool("pxrun", two, "--in", "a=" + CAMERA, "--in", "b=" + CAMERA, *outs, cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    names = ["-o" if o == "-o" else o + " " + v.split("=")[0] for o, v in zip(outs[::2], outs[1::2])]
    paths = [v.split("=")[-1] for v in outs[1::2]]
    if names[0] == "-o":  # -o is named after the slot outputs
        names, paths = names[::-1], paths[::-1]
    words = "pxrun: usage: %s and %s both write '%s'" % (names[0], names[1], paths[0])
    assert words in r.stderr and "give each output its own file" in r.stderr
    if paths[0] != paths[1]:
        assert "(%s as '%s')" % (names[1], paths[1]) in r.stderr
    assert not list(tmp_path.glob("*.npy")) and not list(tmp_path.glob("*.png"))  # nothing written
    ok = tool("pxrun", two, "--in", "a=" + CAMERA, "--in", "b=" + CAMERA, "--npy", "oa=x.npy", "--npy", "ob=y.npy",
              cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr


# ---- 2: a folder of two jobs' shards was read as one dataset

def _batch(out, inputs, *extra):
    r = tool("pxbatch", FIXED, "--in-dir", str(inputs), "--out", str(out), "--shard-size", "1",
             "--executor", "cpu", *extra)
    assert r.returncode == 0, r.stderr
    return out


@pytest.mark.parametrize("other, field", [
    (["--policy", "stretch"], "policy: \"fit:bicubic:0,0,0,255\" -> \"stretch:bicubic\""),
    (["--policy", "fit"], "inputs: 4 -> 5"),  # another folder: 5 inputs
])
def test_iter_shards_refuses_two_jobs_shards_in_one_folder(tmp_path, other, field):
    d = tmp_path / "in"
    d.mkdir()
    for i in range(4):
        shutil.copy(CAMERA, d / ("c%d.png" % i))
    a = _batch(tmp_path / "a", d, "--policy", "fit")
    d5 = tmp_path / "in5"
    shutil.copytree(d, d5)
    shutil.copy(CAMERA, d5 / "c4.png")
    b = _batch(tmp_path / "b", d5 if "inputs" in field else d, *other)
    for f in b.glob("shard-00001.*"):  # shard 1 of another job, beside job a's shards 0, 2, 3
        shutil.copy(f, a / f.name)
    words = "'%s' holds shards of two pxbatch jobs: shard-00001 is of another job than shard-00000 (" % a
    with pytest.raises(pxvm.Malformed) as e:
        list(pxvm.data.iter_shards(a, partial=True))
    assert words in str(e.value) and field in str(e.value), str(e.value)
    assert tool("pxbatch", "--verify", str(a)).returncode == 1  # as pxbatch --verify: of another job
    torch = pytest.importorskip("torch")  # noqa: F841
    with pytest.raises(pxvm.Malformed, match="two pxbatch jobs"):
        pxvm.data.ShardDataset(a)


# ---- 3: two pxbatch runs started together on a new --out: the loser exited 1 ("cannot create it:
# File exists": mkdir's EEXIST was an error); it must be the lock's usage error (exit 2), or a run
# that finds the other's finished shards (exit 0); never 1, never two runs in one folder

def test_pxbatch_runs_racing_for_a_new_out_never_fail_with_i_o(tmp_path):
    d = tmp_path / "in"
    d.mkdir()
    shutil.copy(CAMERA, d / "c0.png")
    exe = os.path.join(BIN, "pxbatch")
    codes, logs = [], []
    for k in range(24):
        out = tmp_path / ("o%d" % k)
        args = [exe, FIXED, "--in-dir", str(d), "--out", str(out), "--policy", "fit", "--executor", "cpu"]
        runs = [subprocess.Popen(args, stderr=subprocess.PIPE, text=True) for _ in range(3)]
        for p in runs:
            err = p.communicate(timeout=300)[1]
            codes.append(p.returncode)
            logs.append(err)
            assert p.returncode in (0, 2), err
            if p.returncode == 2:
                assert "another pxbatch run (or --verify) holds --out '%s'" % out in err
        assert tool("pxbatch", "--verify", str(out)).returncode == 0
    assert 0 in codes


# ---- 5: size=(np.int64(300), 200) and size=np.array([300, 200]) were refused with a message that
# printed like a valid value

ANY = os.path.join(ROOT, "programs", "foveate273_any.pxi")


@pytest.mark.parametrize("size", [(np.int64(300), 200), np.array([300, 200]), [np.uint16(300), np.int32(200)]])
def test_size_takes_integral_numpy_values(size):
    runner = pxvm.Runner(pxvm.Program.load(ANY), executor="cpu")
    img = pxvm.load_image(CAMERA)
    want = runner.patches(img, size=(300, 200))
    assert np.array_equal(runner.patches(img, size=size), want)


@pytest.mark.parametrize("size, kinds", [((300.0, 200), "(tuple of float, int;"),
                                         ((np.float64(300), 200), "(tuple of float64, int;"),
                                         ((True, 200), "(tuple of bool, int;")])
def test_a_refused_size_shows_its_type(size, kinds):
    runner = pxvm.Runner(pxvm.Program.load(ANY), executor="cpu")
    with pytest.raises(pxvm.UsageError) as e:
        runner.patches(pxvm.load_image(CAMERA), size=size)
    assert "size takes (W, H)" in str(e.value) and kinds in str(e.value), str(e.value)


# ---- 6, 7: which image failed (e.index, e.file) and only image errors named by a file

def _png(path, w, h):
    """A w x h grey RGB PNG (written here: no image library needed)."""
    import struct
    import zlib

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    raw = b"".join(b"\x00" + bytes([128]) * (3 * w) for _ in range(h))
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) +
                     chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
    return str(path)


def test_usage_errors_are_not_named_by_the_file(tmp_path):
    runner = pxvm.Runner(pxvm.Program.load(FIXED), executor="cpu")
    with pytest.raises(pxvm.UsageError) as e:
        runner.patches(CAMERA, policy="bogus")
    assert "(file '" not in str(e.value), str(e.value)
    with pytest.raises(pxvm.UsageError) as e:
        runner.patches_batch([CAMERA, CAMERA], policy="fit", size=(300, 200))  # a fixed-size program
    assert "(file" not in str(e.value), str(e.value)


def test_a_single_path_error_sets_index_and_file(tmp_path):
    bad = tmp_path / "trunc.png"
    bad.write_bytes(open(CAMERA, "rb").read()[:200])
    runner = pxvm.Runner(pxvm.Program.load(FIXED), executor="cpu")
    with pytest.raises(pxvm.Malformed) as e:
        runner.patches(str(bad), policy="fit")
    assert (e.value.index, e.value.file) == (0, str(bad))
    with pytest.raises(pxvm.PxIOError) as e:
        runner.patches(str(tmp_path / "none.png"), policy="fit")
    assert (e.value.index, e.value.file) == (0, str(tmp_path / "none.png"))


def test_a_fixed_size_batch_names_the_failing_image(tmp_path):
    good = _png(tmp_path / "good.png", 451, 300)  # the program's input size
    rocket = os.path.join(ROOT, "tests", "data", "photos", "rocket.jpg")
    runner = pxvm.Runner(pxvm.Program.load(FIXED), executor="cpu")
    with pytest.raises(pxvm.Unlinkable) as e:
        runner.patches_batch([good, rocket, good])
    assert (e.value.index, e.value.file) == (1, rocket)
    assert "(image 1, file '%s')" % rocket in str(e.value) and good not in str(e.value), str(e.value)
    bad = tmp_path / "trunc.png"
    bad.write_bytes(open(good, "rb").read()[:60])
    with pytest.raises(pxvm.Malformed) as e:
        runner.patches_batch([good, good, str(bad)])
    assert (e.value.index, e.value.file) == (2, str(bad)), str(e.value)


def test_image_folder_failures_carry_index_and_file(tmp_path):
    pytest.importorskip("torch")
    d = tmp_path / "in"
    d.mkdir()
    shutil.copy(CAMERA, d / "a.png")
    (d / "b.png").write_bytes(open(CAMERA, "rb").read()[:200])
    ds = pxvm.data.ImageFolderDataset(d, FIXED, policy="fit")
    with pytest.warns(UserWarning):
        assert len(list(ds)) == 1
    (f, e), = ds.failures
    assert f == str(d / "b.png") and (e.index, e.file) == (1, f)


# ---- 8: pxrun --info with run options, unknown or value-less options

@pytest.mark.parametrize("args, words", [
    (["--info", "--max-steps", "5"], "so --max-steps would do nothing"),
    (["--info", "--time"], "--time needs a run, and input slot 1 is not bound: give --in SLOT=FILE"),
    (["--info", "--hash"], "--hash needs a run, and input slot 1 is not bound"),
    (["--info", "--trace"], "--trace needs a run, and input slot 1 is not bound"),
    (["--info", "-o", "x.png"], "-o needs a run, and input slot 1 is not bound"),
    (["--info", "--overlay", "x.png"], "--overlay needs a run, and input slot 1 is not bound"),
    (["--bogus"], "unknown option '--bogus'"),
    (["--bogus", "1"], "unknown option '--bogus'"),
    (["--npy"], "--npy is missing its value"),
    (["--in", "image=" + CAMERA, "--max-steps"], "--max-steps is missing its value"),
])
def test_pxrun_info_and_option_words(tmp_path, args, words):
    r = tool("pxrun", FIXED, *args, cwd=tmp_path)
    assert r.returncode == 2 and r.stderr.startswith("pxrun: usage: ") and words in r.stderr, r.stderr
    assert "unlinkable" not in r.stderr and not r.stdout  # no description printed before the refusal


# ---- 9: pxbatch usage errors in the one-line form; a program of two inputs refused up front

def test_pxbatch_usage_errors_are_one_line_with_the_hint(tmp_path, two):
    d = tmp_path / "in"
    d.mkdir()
    shutil.copy(CAMERA, d / "c0.png")
    out = str(tmp_path / "o")
    cases = [
        (["--bogus"], "unknown option '--bogus'"),
        (["--in-dir", str(d), "--in-list", "x.txt", "--out", out], "--in-dir '%s' exclude each other" % d),
        (["--in-dir", str(d), "--out", out, "--size", "0x3"], "--size takes WxH"),
        (["--in-dir", str(d), "--out", out, "--size", "300x200"], "is not any-size"),
        (["--out", out], "(the inputs are missing)"),
    ]
    for args, words in cases:
        r = tool("pxbatch", FIXED, *args)
        lines = r.stderr.splitlines()
        assert r.returncode == 2 and len(lines) == 2, (args, r.stderr)
        assert lines[0].startswith("pxbatch: usage: ") and words in lines[0], (args, r.stderr)
        assert lines[1] == "(pxbatch --help lists the options)", (args, r.stderr)
    r = tool("pxbatch", two, "--in-dir", str(d), "--out", out)
    assert r.returncode == 2 and "has 2 input slots (1 'a', 2 'b', ...): pxbatch binds one input" in r.stderr, r.stderr
    assert "--in" not in r.stderr.replace("--in-", "").replace("pxrun --in SLOT", "") and not os.path.exists(out)


# ---- 10: a folder a run is still writing; a marker whose .npy is missing

def _four(tmp_path):
    d = tmp_path / "in"
    d.mkdir()
    for i in range(4):
        shutil.copy(CAMERA, d / ("c%d.png" % i))
    return _batch(tmp_path / "o", d, "--policy", "fit")


def test_iter_shards_of_a_folder_a_run_holds_says_it_may_still_be_written(tmp_path):
    import fcntl
    out = _four(tmp_path)
    for f in out.glob("shard-00003.*"):
        f.unlink()
    import time
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # another process holds the lock, as a run does
        fcntl.flock(os.open(out / ".pxbatch.lock", os.O_RDWR), fcntl.LOCK_EX)
        os.write(w, b"x")
        time.sleep(60)
        os._exit(0)
    try:
        assert os.read(r, 1) == b"x"
        with pytest.raises(pxvm.PxIOError) as e:
            list(pxvm.data.iter_shards(out))
        assert "a pxbatch run holds it" in str(e.value) and "read it when the run ends" in str(e.value)
        assert "rerun" not in str(e.value)
    finally:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        os.close(r)
        os.close(w)


def test_partial_counts_a_marker_without_its_npy_as_missing(tmp_path):
    out = _four(tmp_path)
    (out / "shard-00002.npy").unlink()
    with pytest.raises(pxvm.PxIOError, match="1 of its job's 4 inputs are missing"):
        list(pxvm.data.iter_shards(out))
    with pytest.warns(UserWarning, match="reading the 3 inputs present"):
        shards = list(pxvm.data.iter_shards(out, partial=True))
    assert [s[3] for s in shards] == [[str(tmp_path / "in" / ("c%d.png" % i))] for i in (0, 1, 3)]
