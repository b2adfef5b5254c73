"""A newcomer's second trial of issue 23 (B..K): nothing silently wrong. A partial pxbatch folder
read as a dataset, empty or repeated options, options --info ignores, a failed run's leftovers, an
empty file, which image of a batch failed, and what a marker's program hash is of. Each test fails
before its fix (the commit says which)."""
import os
import shutil
import subprocess
import warnings

import numpy as np
import pytest

import pxvm
from conftest import BIN, EXECUTOR, PHOTO, ROOT, pxrun

ANY = os.path.join(ROOT, "programs", "foveate273_any.pxi")
FIXED = os.path.join(ROOT, "programs", "foveate273.pxi")
CAMERA = os.path.join(ROOT, "tests", "data", "photos", "camera.png")


def pxbatch(*args):
    return subprocess.run([os.path.join(BIN, "pxbatch"), *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=300)


# ---- B: an interrupted pxbatch --out folder is not a dataset without a word

def test_iter_shards_refuses_a_partial_folder_unless_partial_true(tmp_path):
    d = tmp_path / "in"
    d.mkdir()
    for i in range(5):
        shutil.copy(CAMERA, d / ("c%d.png" % i))
    out = tmp_path / "o"
    r = pxbatch(FIXED, "--in-dir", str(d), "--out", str(out), "--shard-size", "2", "--policy", "fit",
                "--executor", "cpu")
    assert r.returncode == 0, r.stderr
    assert len(list(pxvm.data.iter_shards(out))) == 3  # whole: no warning, no error
    for f in out.glob("shard-00001.*"):  # as a run interrupted before shard 1
        f.unlink()
    words = "'%s' is a partial pxbatch output: 2 of its job's 5 inputs are missing (1 shard not written: shard-00001" % out
    with pytest.raises(pxvm.PxIOError) as e:
        list(pxvm.data.iter_shards(out))
    assert words in str(e.value) and "partial=True" in str(e.value)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        shards = list(pxvm.data.iter_shards(out, partial=True))
    assert len(shards) == 2 and sum(len(s[3]) for s in shards) == 3
    assert any(words in str(w.message) and "reading the 3 inputs present" in str(w.message) for w in caught)
    torch = pytest.importorskip("torch")  # noqa: F841
    from pxvm.data import ShardDataset
    with pytest.raises(pxvm.PxIOError, match="2 of its job's 5 inputs are missing"):
        ShardDataset(out)
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        assert len(ShardDataset(out, partial=True)) == 3


# ---- C, E: an empty --policy is not native; every bad-policy message lists native among the kinds

KINDS = "(native, exact, stretch[:FILTER], fit[:FILTER][:PAD], crop[:short=S][:FILTER] or dynamic["
BAD_POLICIES = [("", "bad policy '': an empty policy " + KINDS),
                ("native:bicubic", "bad policy 'native:bicubic': native takes no filter or pad " + KINDS),
                ("nativ", "bad policy 'nativ': unknown kind (not native, exact, stretch, fit, crop or dynamic) " + KINDS),
                ("fit:foo", "bad policy 'fit:foo': unknown filter 'foo' " + KINDS)]


@pytest.mark.parametrize("policy,words", BAD_POLICIES)
def test_bad_policy_is_a_usage_error_with_the_same_words_everywhere(tmp_path, policy, words):
    for prog in (ANY, FIXED):
        r = pxrun(prog, "--in", "image=" + CAMERA, "--policy", policy, "--npy", "atlas=%s" % (tmp_path / "a.npy"),
                  check=False)
        assert r.returncode == 2 and words in r.stderr, r.stderr
        assert not (tmp_path / "a.npy").exists()
    r = pxbatch(ANY, "--in-dir", os.path.dirname(CAMERA), "--out", str(tmp_path / "o"), "--policy", policy)
    assert r.returncode == 2 and words in r.stderr, r.stderr
    runner = pxvm.Runner(pxvm.Program.load(FIXED), executor=EXECUTOR)
    img = pxvm.load_image(CAMERA)
    for call in (lambda: runner.patches(img, policy=policy), lambda: runner.run_batch([img], policy=policy),
                 lambda: runner.tokens(img, policy=policy), lambda: pxvm.canonical_policy(policy)):
        with pytest.raises(pxvm.UsageError) as e:
            call()
        assert words in str(e.value)


# ---- D: a single-valued option given twice is a usage error naming both values (never the last silently)

PXRUN_TWICE = [("--policy", "native", "fit"), ("--executor", "cpu", "auto"), ("--threads", "2", "3"),
               ("--repeat", "1", "2"), ("--png", "fast", "best"), ("--max-side", "4096", "8192"),
               ("--max-memory", "1000000000", "2000000000"), ("--max-insns", "100000", "200000"),
               ("--max-steps", "100000", "200000"), ("-o", "/tmp/a.pxi", "/tmp/b.pxi"), ("--size", "300x200", "200x300"),
               ("--overlay", "/tmp/a.png", "/tmp/b.png"), ("--device", "0", "1"), ("--scanpath", "2", "3"),
               ("--frames", "programs/data", "tests/data/photos"), ("--max-frames", "1", "2"),
               ("--changed", "/tmp/a.npy", "/tmp/b.npy"), ("--frame-size", "8x8", "9x9"),
               ("--frame-format", "rgb", "rgba")]


@pytest.mark.parametrize("opt,first,then", PXRUN_TWICE)
def test_pxrun_option_given_twice_is_a_usage_error(opt, first, then):
    r = pxrun(ANY, "--in", "image=" + CAMERA, opt, first, opt, then, check=False)
    assert r.returncode == 2, r.stderr
    assert "%s given twice ('%s', then '%s'): give it once" % (opt, first, then) in r.stderr, r.stderr


def test_pxrun_in_binding_one_slot_twice_is_a_usage_error():
    r = pxrun(ANY, "--in", "image=" + CAMERA, "--in", "image=" + PHOTO, "--hash", check=False)
    assert r.returncode == 2 and ("--in binds slot 1 ('image') twice ('%s', then '%s')" % (CAMERA, PHOTO)) in r.stderr


PXBATCH_TWICE = [("--policy", "native", "fit"), ("--out", "o1", "o2"), ("--in-dir", "d1", "d2"),
                 ("--executor", "cpu", "auto"), ("--shard-size", "3", "4"), ("--threads", "1", "2"),
                 ("--decoders", "1", "2"), ("--max-memory", "1000000000", "2000000000"), ("--size", "300x200", "20x30"),
                 ("--devices", "1", "2")]


@pytest.mark.parametrize("opt,first,then", PXBATCH_TWICE)
def test_pxbatch_option_given_twice_is_a_usage_error(tmp_path, opt, first, then):
    base = {"--in-dir": os.path.dirname(CAMERA), "--out": str(tmp_path / "o")}
    base.pop(opt, None)
    args = [a for kv in base.items() for a in kv]
    r = pxbatch(ANY, *args, opt, first, opt, then)
    assert r.returncode == 2, r.stderr
    assert "%s given twice ('%s', then '%s'): give it once" % (opt, first, then) in r.stderr, r.stderr
    assert not (tmp_path / "o").exists()


# ---- E: a pxrun usage error is one line and where to find the options, not buried under --help

@pytest.mark.parametrize("args", [["--policy", "native:bicubic"], ["--bogus", "1"], ["--threads", "-3"],
                                  ["--size", "8x8", "--in", "image=" + CAMERA]])
def test_pxrun_usage_error_is_not_buried_under_the_help(args):
    r = pxrun(ANY, *args, check=False)
    assert r.returncode == 2
    lines = r.stderr.splitlines()
    assert len(lines) == 2 and lines[0].startswith("pxrun: usage: ") and lines[1] == "(pxrun --help lists the options)", \
        r.stderr
    assert "--max-side N" in pxrun("--help").stdout  # the options are still one --help away


# ---- F: --info alone runs nothing: an option only a run uses is a usage error, not exit 0

@pytest.mark.parametrize("args", [["--policy", "fit"], ["--size", "300x200"], ["--repeat", "3"], ["--profile"],
                                  ["--png", "best"], ["--threads", "2"], ["--executor", "cpu"], ["--lenient"]])
def test_pxrun_info_alone_with_an_option_only_a_run_uses_is_a_usage_error(args):
    prog = ANY if "--size" in args else FIXED
    r = pxrun(prog, *args, "--info", check=False)
    assert r.returncode == 2, r.stderr
    assert ("--info alone runs nothing (input slot 1 is not bound: --in SLOT=FILE runs it), so %s would do nothing"
            % args[0]) in r.stderr
    assert r.stdout == ""
    r = pxrun(prog, "--info")  # alone: it describes the program, exit 0
    assert "launch plan" in r.stdout and "--info: not run" in r.stderr
    r = pxrun(prog, *args, "--info", "--in", "image=" + PHOTO, "--hash")  # with a run: they act
    assert "launch plan" in r.stdout and "atlas" in r.stdout


# ---- G: a pxbatch run that fails before writing any shard leaves nothing it made

def test_pxbatch_failing_before_a_shard_removes_the_folder_and_lock_it_made(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    (tmp_path / "o").mkdir()
    for src, says in ((str(tmp_path / "nodir"), "cannot read '%s'" % (tmp_path / "nodir")),
                      (str(empty), "no inputs: folder '%s'" % empty)):
        out = tmp_path / "o" / "zz"
        r = pxbatch(FIXED, "--in-dir", src, "--out", str(out), "--executor", "cpu")
        assert r.returncode == 1 and says in r.stderr, r.stderr
        assert not out.exists(), sorted(os.listdir(out))
    kept = tmp_path / "kept"  # a folder that was there stays (without the lock this run made)
    kept.mkdir()
    (kept / "mine.txt").write_text("x")
    r = pxbatch(FIXED, "--in-dir", str(empty), "--out", str(kept), "--executor", "cpu")
    assert r.returncode == 1 and sorted(os.listdir(kept)) == ["mine.txt"]
    ok = tmp_path / "ok"  # a run that writes its shards keeps them and its lock
    r = pxbatch(FIXED, "--in-dir", os.path.dirname(CAMERA), "--out", str(ok), "--executor", "cpu", "--policy", "fit")
    assert r.returncode == 0 and sorted(os.listdir(ok)) == [".pxbatch.lock", "shard-00000.json", "shard-00000.npy"]


# ---- H: an empty file says it is empty

def test_an_empty_image_file_says_it_is_empty(tmp_path):
    empty = tmp_path / "empty.png"
    empty.write_bytes(b"")
    words = "'%s' is empty (0 bytes): neither a PNG nor a JPEG file" % empty
    r = pxrun(FIXED, "--in", "image=%s" % empty, "--hash", check=False)
    assert r.returncode == 3 and words in r.stderr and "unknown signature" not in r.stderr, r.stderr
    with pytest.raises(pxvm.Malformed) as e:
        pxvm.load_image(str(empty))
    assert words in str(e.value)
    d = tmp_path / "in"
    d.mkdir()
    shutil.copy(PHOTO, d / "a.png")
    (d / "b.png").write_bytes(b"")
    r = pxbatch(FIXED, "--in-dir", str(d), "--out", str(tmp_path / "o"), "--executor", "cpu")
    assert r.returncode == 9 and ("'%s' is empty (0 bytes)" % (d / "b.png")) in r.stderr, r.stderr
    r = pxrun(FIXED, "--in", "image=" + os.path.join(ROOT, "README.md"), check=False)  # not empty: as before
    assert r.returncode == 3 and "is neither a PNG nor a JPEG file (unknown signature)" in r.stderr


# ---- I: a batch of several sizes names the image that is outside the bounds (its index, its file)

def test_a_batch_names_the_image_outside_the_bounds(tmp_path):
    from PIL import Image
    runner = pxvm.Runner(pxvm.Program.load(ANY), executor=EXECUTOR)
    imgs = [pxvm.load_image(CAMERA), pxvm.load_image(PHOTO)]
    tiny = np.zeros((5, 17, 4), np.uint8)
    bounds = "a 17x5 image cannot be bound to slot 1 ('image'): it takes 16x16 .. 16384x16384"
    with pytest.raises(pxvm.Unlinkable) as e:
        runner.patches_batch(imgs + [tiny])
    assert "%s (image 2 of the batch)" % bounds in str(e.value) and e.value.index == 2
    with pytest.raises(pxvm.Unlinkable) as e:
        runner.run_batch([imgs[0], tiny, imgs[1], tiny])
    assert "%s (images 1, 3 of the batch)" % bounds in str(e.value) and e.value.index == 1
    path = tmp_path / "tiny.png"
    Image.new("RGB", (17, 5)).save(path)
    with pytest.raises(pxvm.Unlinkable) as e:
        runner.patches_batch([CAMERA, str(path), PHOTO])
    assert "%s (image 1 of the batch, file '%s')" % (bounds, path) in str(e.value)
    assert e.value.file == str(path) and "camera" not in str(e.value)


# ---- J: a marker mismatch over program_sha256 says what the hash is of

def test_pxbatch_mismatch_says_what_program_sha256_is_of(tmp_path):
    out = tmp_path / "o"
    photos = os.path.dirname(CAMERA)
    assert pxbatch(ANY, "--in-dir", photos, "--out", str(out), "--executor", "cpu").returncode == 0
    r = pxbatch(ANY, "--in-dir", photos, "--out", str(out), "--executor", "cpu", "--policy", "fit")
    assert r.returncode == 2, r.stderr
    assert 'policy: "native" -> "fit:bicubic:0,0,0,255"' in r.stderr and "program_sha256: " in r.stderr
    assert ("(program_sha256 is the SHA-256 of the program image as it runs: for an any-size program under --policy "
            "stretch or fit, of its resolution at the reference size or at --size, under native of the program "
            "itself; so the same file under another --policy or --size has another)") in r.stderr
    r = pxbatch(ANY, "--in-dir", photos, "--out", str(out), "--executor", "cpu", "--shard-size", "2")
    assert r.returncode == 2 and "shard_size" in r.stderr and "program_sha256 is" not in r.stderr  # only when it differs


# ---- K: a plan that does not compile exits 8 in every tool (pxasm's), not 1 (i/o)

def test_a_bad_plan_exits_8_in_every_tool(tmp_path):
    plan = tmp_path / "bad.json"
    plan.write_text('{"scheme": "nope"}')
    r = pxrun(str(plan), check=False)
    assert r.returncode == 8 and "plan error: %s" % plan in r.stderr, r.stderr
    r = pxbatch(str(plan), "--in-dir", os.path.dirname(CAMERA), "--out", str(tmp_path / "o"))
    assert r.returncode == 8 and "plan error: %s" % plan in r.stderr, r.stderr
    r = subprocess.run([os.path.join(BIN, "pxasm"), "--plan", str(plan), "-o", str(tmp_path / "x.pxi")],
                       capture_output=True, text=True)
    assert r.returncode == 8 and "plan error: %s" % plan in r.stderr
    assert "8 plan" in pxrun("--help").stdout
    assert not (tmp_path / "o").exists()
