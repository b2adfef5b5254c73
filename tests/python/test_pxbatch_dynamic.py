"""pxbatch --policy dynamic through ragged batches (the executor resizes many images of many sizes
in one call while the next ones decode): every row of the shards is Pillow's resize to the
Qwen2-VL size (the row's "resized"), cut into 16x16 tiles row-major, on real photos of five sizes
(grey, RGB; PNG and JPEG); batches cut small by --max-memory (one image a call, decoders waiting
for the executor) give the same files; a file that fails (junk, a truncated JPEG) in the middle
of a batch is listed naming it, the rows after it keep their order; with --lenient the truncated
one is a row, named on stderr as a warning."""
import glob
import json
import os
import shutil
import subprocess

import numpy as np
import pytest

from conftest import BIN, EXECUTOR, ROOT
from test_ragged import smart_resize as qwen_size

PXBATCH = os.path.join(BIN, "pxbatch")
PLAN = os.path.join(ROOT, "programs", "uniform.json")
PHOTOS = sorted(glob.glob(os.path.join(ROOT, "tests", "data", "photos", "*.png")) +
                glob.glob(os.path.join(ROOT, "tests", "data", "photos", "*.jpg"))) + \
    [os.path.join(ROOT, "programs", "data", "chelsea.png")]
P, MERGE, MIN_PIXELS, MAX_PIXELS = 16, 2, 3136, 1003520  # the policy "dynamic"'s defaults at the plan's patch


def pxbatch(*args):
    return subprocess.run([PXBATCH, *args], capture_output=True, text=True, cwd=ROOT, timeout=300)


def smart_resize(h, w):
    """Qwen2-VL's rule at the plan's patch: test_ragged.py's transcription (docs/policies.md)."""
    return qwen_size(h, w, P * MERGE, MIN_PIXELS, MAX_PIXELS)


def pillow_tiles(path):
    """The reference: Pillow's bicubic resize to the dynamic size, RGBA, cut into P x P tiles."""
    from PIL import Image
    im = Image.open(path)
    im.load()
    h, w = smart_resize(im.height, im.width)
    assert im.mode in ("L", "RGB"), path  # (pxvm resizes RGBA's channels each on its own, Pillow premultiplied)
    a = np.asarray(im.resize((w, h), Image.BICUBIC).convert("RGBA"))
    return (im.width, im.height), (w, h), a.reshape(h // P, P, w // P, P, 4).transpose(0, 2, 1, 3, 4).reshape(-1, P, P, 4)


def shard_rows(out):
    """[(file, size, resized, tiles)] over the shards of `out`, in input order, and the errors."""
    rows, errors = [], []
    for m_path in sorted(glob.glob(str(out / "shard-*.json"))):
        m = json.load(open(m_path))
        base = m_path[:-len(".json")]
        tokens, offsets, grid = np.load(base + ".npy"), np.load(base + ".offsets.npy"), np.load(base + ".grid.npy")
        assert offsets[0] == 0 and offsets[-1] == len(tokens)
        for r, row in enumerate(m["rows"]):
            assert grid[r].tolist() == [1, row["resized"][1] // P, row["resized"][0] // P]
            rows.append((row["file"], row["size"], row["resized"], tokens[offsets[r]:offsets[r + 1]]))
        errors += m["errors"]
    return rows, errors


@pytest.fixture(scope="module")
def photos(tmp_path_factory):
    d = tmp_path_factory.mktemp("dyn") / "photos"
    d.mkdir()
    for i, p in enumerate(PHOTOS + PHOTOS[:2]):  # 7 files of 5 sizes: sizes repeat across batches
        shutil.copy(p, d / ("%02d-%s" % (i, os.path.basename(p))))
    return d


def test_dynamic_rows_are_pillows_resize_in_tiles(photos, tmp_path):
    out = tmp_path / "out"
    r = pxbatch(PLAN, "--in-dir", str(photos), "--out", str(out), "--policy", "dynamic", "--shard-size", "3",
                "--executor", EXECUTOR)
    assert r.returncode == 0 and "7 images" in r.stderr and " 0 failed" in r.stderr, r.stderr
    rows, errors = shard_rows(out)
    assert errors == [] and [f for f, *_ in rows] == sorted(str(p) for p in photos.iterdir())
    assert len({tuple(s) for _, s, _, _ in rows}) == 5
    for f, size, resized, tiles in rows:
        want_size, want_resized, want = pillow_tiles(f)
        assert size == list(want_size) and resized == list(want_resized), f
        assert tiles.shape == want.shape and int((tiles != want).sum()) == 0, f
    assert pxbatch("--verify", str(out)).returncode == 0
    import hashlib  # the marker's SHA-256 (SHA-NI where the CPU has it) is hashlib's
    for m_path in glob.glob(str(out / "shard-*.json")):
        m = json.load(open(m_path))
        data = open(m_path[:-len(".json")] + ".npy", "rb").read()
        assert len(data) > 100000 and hashlib.sha256(data).hexdigest() == m["npy_sha256"]


def test_small_batches_give_the_same_files(photos, tmp_path):
    """--max-memory 6 MB: a batch stops at 0.75 MB of decoded inputs (one photo a call) and the
    decoders wait above 1.5 MB; the files are the default run's, byte for byte."""
    big, small = tmp_path / "big", tmp_path / "small"
    for out, extra in ((big, []), (small, ["--max-memory", "6000000", "--decoders", "3"])):
        r = pxbatch(PLAN, "--in-dir", str(photos), "--out", str(out), "--policy", "dynamic", "--shard-size", "4",
                    "--executor", EXECUTOR, *extra)
        assert r.returncode == 0 and "7 images" in r.stderr, r.stderr
    names = sorted(os.listdir(big))
    assert names == sorted(os.listdir(small)) and len([n for n in names if n.endswith(".json")]) == 2
    for n in names:
        assert (big / n).read_bytes() == (small / n).read_bytes(), n


@pytest.fixture(scope="module")
def damaged(tmp_path_factory, photos):
    """Good photos around a junk file and a JPEG cut mid-scan, in one shard."""
    d = tmp_path_factory.mktemp("dyn-bad")
    files = sorted(photos.iterdir())[:4]
    shutil.copy(files[0], d / ("a-%s" % files[0].name))
    (d / "b-junk.png").write_bytes(b"\x89PNG\r\n\x1a\n not a png")
    jpg = [f for f in photos.iterdir() if f.suffix == ".jpg"][0].read_bytes()
    (d / "c-cut.jpg").write_bytes(jpg[:len(jpg) * 2 // 3])
    for k, f in enumerate(files[1:]):
        shutil.copy(f, d / ("d%d-%s" % (k, f.name)))
    return d


def test_a_bad_file_is_named_and_the_rest_go_on(damaged, tmp_path):
    out = tmp_path / "strict"
    r = pxbatch(PLAN, "--in-dir", str(damaged), "--out", str(out), "--policy", "dynamic", "--executor", EXECUTOR)
    assert r.returncode == 9 and "4 images" in r.stderr and "2 failed" in r.stderr, r.stderr
    for bad in ("b-junk.png", "c-cut.jpg"):
        assert "pxbatch: failed: malformed: '%s'" % (damaged / bad) in r.stderr, r.stderr
    rows, errors = shard_rows(out)
    assert [e["file"] for e in errors] == [str(damaged / "b-junk.png"), str(damaged / "c-cut.jpg")]
    assert "truncated" in errors[1]["error"] and "--lenient" in errors[1]["error"]
    good = sorted(str(f) for f in damaged.iterdir() if f.name[0] in "ad")
    assert [f for f, *_ in rows] == good
    for f, _, _, tiles in rows:
        assert np.array_equal(tiles, pillow_tiles(f)[2]), f
    assert pxbatch("--verify", str(out)).returncode == 0
    # a shard of one input that fails: written with no rows (0 tokens), the same rows overall
    one = tmp_path / "one"
    r = pxbatch(PLAN, "--in-dir", str(damaged), "--out", str(one), "--policy", "dynamic", "--executor", EXECUTOR,
                "--shard-size", "1")
    assert r.returncode == 9 and "4 images" in r.stderr and "2 failed" in r.stderr, r.stderr
    assert np.load(one / "shard-00001.npy").shape == (0, P, P, 4) and np.load(one / "shard-00001.offsets.npy").tolist() == [0]
    assert [(f, t.tobytes()) for f, _, _, t in shard_rows(one)[0]] == [(f, t.tobytes()) for f, _, _, t in rows]
    assert pxbatch("--verify", str(one)).returncode == 0


def test_lenient_makes_the_cut_jpeg_a_row(damaged, tmp_path):
    out = tmp_path / "lenient"
    r = pxbatch(PLAN, "--in-dir", str(damaged), "--out", str(out), "--policy", "dynamic", "--executor", EXECUTOR,
                "--lenient")
    cut = damaged / "c-cut.jpg"
    assert r.returncode == 9 and "5 images" in r.stderr and "1 failed" in r.stderr, r.stderr
    assert "pxbatch: warning (--lenient): malformed: '%s': corrupt or unsupported JPEG (truncated" % cut \
        in r.stderr
    rows, errors = shard_rows(out)
    assert [e["file"] for e in errors] == [str(damaged / "b-junk.png")]
    assert [f for f, *_ in rows][1] == str(cut)
    # the whole files' rows are the strict run's bytes
    strict = tmp_path / "strict"
    pxbatch(PLAN, "--in-dir", str(damaged), "--out", str(strict), "--policy", "dynamic", "--executor", EXECUTOR)
    by_file = {f: t for f, _, _, t in shard_rows(strict)[0]}
    for f, _, _, tiles in rows:
        if f != str(cut):
            assert np.array_equal(tiles, by_file[f]), f


def test_workers_and_ranks_write_the_same_files(photos, tmp_path):
    """One worker's files, byte for byte, from two workers of one process (--workers 2: on one GPU
    both share device 0), from the default (two a GPU on cuda, one on the cpu executor) and, under
    mpirun, from two ranks of two workers each; shards of two images, so that every worker writes
    some, in and out of order."""
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_btl_vader_single_copy_mechanism="none", OMPI_MCA_rmaps_base_oversubscribe="1")
    ways = [("one", [], ["--workers", "1"]), ("workers", [], ["--workers", "2"]),
            ("default", [], ["--devices", "1"] if EXECUTOR == "cuda" else [])]
    if shutil.which("mpirun"):
        ways.append(("ranks", ["mpirun", "-np", "2", "--oversubscribe"], ["--workers", "2"]))
    got = {}
    for name, launcher, extra in ways:
        out = tmp_path / name
        r = subprocess.run(launcher + [PXBATCH, PLAN, "--in-dir", str(photos), "--out", str(out), "--policy", "dynamic",
                                       "--shard-size", "2", "--executor", EXECUTOR, "--decoders", "2",
                                       "--stats", str(tmp_path / (name + ".json")), *extra],
                           capture_output=True, text=True, cwd=ROOT, timeout=300, env=env)
        assert r.returncode == 0 and "7 images" in r.stderr, r.stderr
        st = json.load(open(tmp_path / (name + ".json")))
        default = 2 if st["executor"] == "cuda" else 1  # two a GPU (one here), one on the cpu executor
        assert len(st["workers"]) == {"one": 1, "workers": 2, "default": default, "ranks": 4}[name], name
        assert all(w["images"] > 0 and 0 <= w["device"] < st["devices"] for w in st["workers"])  # each its share
        got[name] = {f.name: f.read_bytes() for f in sorted(out.iterdir()) if f.name.startswith("shard-")}
    assert len(got["one"]) == 4 * 4  # 7 images in shards of 2: .npy, .offsets.npy, .grid.npy, .json each
    for name in got:
        assert got[name] == got["one"], name


def test_failed_inputs_and_a_lookahead_of_one_image_keep_the_files(damaged, tmp_path):
    """The process's decode pool under its memory bound: --max-memory 1.6 MB, so decoded inputs
    wait within 800 kB (each photo here 384 kB to 1.09 MB decoded: one or two ahead, the decoders
    held back the rest of the time), in shards of two where two inputs fail (junk, a cut JPEG);
    one worker, two workers of one process and two ranks of two workers write the default run's
    files, byte for byte, and the pool's decodes are the inputs, each once. (On the CUDA executor
    6 MB, as test_small_batches_give_the_same_files: its ragged call counts each image's staging
    and resize rows within --max-memory, over 1.6 MB for the 640x427 photo.)"""
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_btl_vader_single_copy_mechanism="none", OMPI_MCA_rmaps_base_oversubscribe="1")
    small = ["--max-memory", "6000000" if EXECUTOR == "cuda" else "1600000", "--decoders", "2"]
    ways = [("default", [], []), ("one", [], small), ("workers", [], small + ["--workers", "2"])]
    if shutil.which("mpirun"):
        ways.append(("ranks", ["mpirun", "-np", "2", "--oversubscribe"], small + ["--workers", "2"]))
    got = {}
    for name, launcher, extra in ways:
        out = tmp_path / name
        r = subprocess.run(launcher + [PXBATCH, PLAN, "--in-dir", str(damaged), "--out", str(out), "--policy", "dynamic",
                                       "--shard-size", "2", "--executor", EXECUTOR,
                                       "--stats", str(tmp_path / (name + ".json")), *extra],
                           capture_output=True, text=True, cwd=ROOT, timeout=120, env=env)
        assert r.returncode == 9 and "4 images" in r.stderr and "2 failed" in r.stderr, r.stderr
        st = json.load(open(tmp_path / (name + ".json")))
        assert st["total"]["decoded"] == 6 and sum(p["decoded"] for p in st["pools"]) == 6
        got[name] = {f.name: f.read_bytes() for f in sorted(out.iterdir()) if f.name.startswith("shard-")}
    assert len(got["default"]) == 3 * 4
    assert [e["file"] for e in shard_rows(tmp_path / "one")[1]] == [str(damaged / "b-junk.png"),
                                                                    str(damaged / "c-cut.jpg")]
    for name in got:
        assert got[name] == got["default"], name


def test_inputs_run_as_they_come_and_the_rows_keep_their_order(photos, tmp_path):
    """A dynamic shard runs its decoded inputs in any order, as they come, and writes its rows in
    input order: the first input decodes 1.5 s late (PXVM_TEST_DECODE_DELAY, the test hook), one
    shard of all 7, two decoders, so the other six run first (the second decoder alone decodes
    them) and the worker then waits for it alone (wait_decoding_s: a decoder with nothing to take);
    every row's tokens were moved into row order (rows_moved: the first ran last), and the files
    are the default run's, byte for byte (without the reorder, the first row's tokens would come
    last)."""
    got = {}
    for name, env in (("default", {}), ("late", {"PXVM_TEST_DECODE_DELAY": "0:1500"})):
        out = tmp_path / name
        r = subprocess.run([PXBATCH, PLAN, "--in-dir", str(photos), "--out", str(out), "--policy", "dynamic",
                            "--shard-size", "7", "--executor", EXECUTOR, "--decoders", "2",
                            "--stats", str(tmp_path / (name + ".json"))],
                           capture_output=True, text=True, cwd=ROOT, timeout=120, env=dict(os.environ, **env))
        assert r.returncode == 0 and "7 images" in r.stderr, r.stderr
        got[name] = {f.name: f.read_bytes() for f in sorted(out.iterdir()) if f.name.startswith("shard-")}
    st = json.load(open(tmp_path / "late.json"))["total"]
    assert st["wait_decoding_s"] > 0.5 and st["rows_moved"] == 7 and st["executor_calls"] >= 2, st
    assert len(got["default"]) == 4
    for n in got["default"]:
        assert got["late"][n] == got["default"][n], n


def test_a_uniform_plan_without_a_policy_names_dynamic(photos, tmp_path):
    """The uniform plan at its own size (exact, the default without --policy): a photo of another
    size fails naming both resizing policies and dynamic, which that plan takes; a .pxi's message
    names no dynamic (test_pxbatch_trust's exact words)."""
    one = sorted(photos.iterdir())[0]
    lst = tmp_path / "l.txt"
    lst.write_text(str(one) + "\n")
    r = pxbatch(PLAN, "--in-list", str(lst), "--out", str(tmp_path / "o"), "--executor", EXECUTOR)
    assert r.returncode == 9, r.stderr  # an input failed
    err = json.load(open(tmp_path / "o" / "shard-00000.json"))["errors"][0]["error"]
    assert err in r.stderr and err.endswith("(file '%s'; --policy stretch or fit resizes it, --policy dynamic takes it at a size of its own)"
                        % one), err


def test_verify_says_one_shard(photos, tmp_path):
    """--verify's count agrees with its noun: '1 shard', '2 shards'."""
    for n, noun in ((7, "1 shard"), (4, "2 shards")):
        out = tmp_path / str(n)
        r = pxbatch(PLAN, "--in-dir", str(photos), "--out", str(out), "--policy", "dynamic", "--shard-size", str(n),
                    "--executor", EXECUTOR)
        assert r.returncode == 0, r.stderr
        r = subprocess.run([PXBATCH, "--verify", str(out)], capture_output=True, text=True)
        assert "%s: %s good, 0 corrupt" % (noun, noun.split()[0]) in r.stdout + r.stderr, r.stdout + r.stderr


def test_in_dir_says_what_it_did_not_read(photos, tmp_path):
    """--in-dir reads the .png, .jpg and .jpeg files that are not hidden; the other entries (a
    subfolder, a hidden image, a .bmp) are counted on stderr, not silently passed over; a folder
    with only those says so before its 'no input' error."""
    import shutil as sh
    src = tmp_path / "in"
    sh.copytree(photos, src)
    one = sorted(src.iterdir())[0]
    (src / "sub").mkdir()
    sh.copy(one, src / "sub" / one.name)
    sh.copy(one, src / ("." + one.name))
    (src / "x.bmp").write_bytes(b"BM")
    r = pxbatch(PLAN, "--in-dir", str(src), "--out", str(tmp_path / "o"), "--policy", "dynamic", "--executor", EXECUTOR)
    assert r.returncode == 0, r.stderr
    assert ("pxbatch: --in-dir '%s': 3 entries not read (only .png, .jpg and .jpeg files that are not hidden; "
            "subfolders are not read)" % src) in r.stderr, r.stderr
    assert "7 images" in r.stderr
    r = pxbatch(PLAN, "--in-dir", str(src / "sub"), "--out", str(tmp_path / "o2"), "--policy", "dynamic",
                "--executor", EXECUTOR)
    assert r.returncode == 0 and "entr" not in r.stderr, r.stderr  # nothing else there: nothing said
