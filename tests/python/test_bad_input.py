"""Issue 23's "bad input" clause where a user meets it: an image outside the program's bounds, a
truncated or non-image file, a file given where another kind is needed. Each gets an error naming
the file (and what was wrong); in a batch the other images go on and each failure is listed;
nothing partial is written, and nothing is skipped silently."""
import json
import os
import pathlib
import re
import shutil
import subprocess
import warnings

import numpy as np
import pytest

import pxvm
from conftest import BIN, EXECUTOR, PHOTO, ROOT, pxrun

FOVEATE = os.path.join(ROOT, "programs", "foveate273.pxi")


def test_pxrun_scanpath_with_a_program_image_is_a_usage_error_naming_the_file():
    """--scanpath compiles a plan: a .pxi (already compiled) is a usage error (exit 2) saying so and
    naming the file; before, the .pxi was parsed as JSON ('plan error', exit 1)."""
    r = pxrun("--scanpath", "3", FOVEATE, "--in", "image=" + PHOTO, check=False)
    assert r.returncode == 2, r.stderr
    assert "usage: --scanpath 3 needs a JSON plan" in r.stderr and "'%s' is a program image (.pxi)" % FOVEATE in r.stderr
    assert "plan error" not in r.stderr


# ---- a real folder: photos of mixed sizes, a truncated PNG, a non-image .jpg, an image outside the bounds

PHOTOS_DIR = os.path.join(ROOT, "tests", "data", "photos")
PHOTOS = sorted(f for f in os.listdir(PHOTOS_DIR) if f.endswith((".png", ".jpg")))
ANY = os.path.join(ROOT, "programs", "foveate273_any.pxi")
PLAN = os.path.join(ROOT, "programs", "uniform.json")
BAD = ["b-truncated.png", "c-not-an-image.jpg", "e-sliver.png"]  # sort among the photos


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """Copies of the test photos (4 sizes) with three bad files among them: the first 20000 bytes
    of a PNG, a text file named .jpg, and a 4x1000 PNG (outside foveate273_any's 16..16384 sides,
    and over policy dynamic's 200:1 aspect ratio)."""
    from PIL import Image
    d = tmp_path_factory.mktemp("bad-input") / "photos"
    d.mkdir()
    for f in PHOTOS:
        shutil.copy(os.path.join(PHOTOS_DIR, f), d / f)
    (d / BAD[0]).write_bytes(open(os.path.join(PHOTOS_DIR, "camera.png"), "rb").read()[:20000])
    (d / BAD[1]).write_text("not an image\n")
    Image.new("RGB", (4, 1000), (200, 10, 10)).save(d / BAD[2])
    # in name order the bad files sit among the good ones (a batch of 3 holds both)
    assert sorted(os.listdir(d)) == [BAD[0], BAD[1], PHOTOS[0], PHOTOS[1], PHOTOS[2], BAD[2], PHOTOS[3]]
    return d


def _dataset_pass(ds):
    """The items of one pass and the warnings it gave."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        items = list(ds)
    return items, [str(w.message) for w in caught if "ImageFolderDataset" in str(w.message)]


def _check_failures(ds, folder, warned, outside):
    """Each bad file listed once, in file order, with its class and a message naming it, and one
    warning naming it; `outside`: the words of the out-of-bounds file's error."""
    assert [(os.path.basename(f), type(e)) for f, e in ds.failures] == [
        (BAD[0], pxvm.Malformed), (BAD[1], pxvm.Malformed), (BAD[2], pxvm.Unlinkable)]
    for f, e in ds.failures:
        assert "'%s'" % f in str(e), e
    assert "corrupt or truncated PNG" in str(ds.failures[0][1])
    assert "neither a PNG nor a JPEG" in str(ds.failures[1][1])
    assert all(w in str(ds.failures[2][1]) for w in outside), ds.failures[2][1]
    assert len(warned) == 3
    for w, (f, e) in zip(warned, ds.failures):
        assert w.startswith("pxvm: ImageFolderDataset skipped '%s': " % f), w


@pytest.mark.parametrize("batch_size", [3, 16])
def test_image_folder_dataset_goes_on_past_bad_files_and_lists_each(folder, batch_size):
    """foveate273_any over the folder: the 4 photos are yielded in file order with the tokens each
    gives alone, though batches hold bad files; each bad file is in `failures` (naming it; the
    out-of-bounds one with its size and the bounds) and warned of once, not again next pass.
    Before: the first bad file ended the iteration."""
    torch = pytest.importorskip("torch")  # noqa: F841
    ds = pxvm.data.ImageFolderDataset(folder, ANY, batch_size=batch_size, executor=EXECUTOR)
    assert ds.on_error == "skip"
    items, warned = _dataset_pass(ds)
    assert [os.path.basename(f) for _, _, f in items] == PHOTOS
    r = pxvm.Runner(pxvm.Program.load(ANY), executor=EXECUTOR)
    for tokens, grid, f in items:
        assert tokens.numpy().tobytes() == np.asarray(r.patches(pxvm.load_image(f))).tobytes(), f
        assert grid.tolist() == [1, 1, 273]
    _check_failures(ds, folder, warned, ["a 4x1000 image", "16x16 .. 16384x16384"])
    again, warned = _dataset_pass(ds)
    assert [f for _, _, f in again] == [f for _, _, f in items] and warned == [] and len(ds.failures) == 3


def test_image_folder_dataset_dynamic_goes_on_past_bad_files(folder):
    """The same with a uniform plan and policy dynamic (ragged batches): the sliver is refused by
    the dynamic rule (over 200:1), named; the others' tokens are Runner.patches' of each alone."""
    pytest.importorskip("torch")
    ds = pxvm.data.ImageFolderDataset(folder, PLAN, policy="dynamic", batch_size=3, executor=EXECUTOR)
    items, warned = _dataset_pass(ds)
    assert [os.path.basename(f) for _, _, f in items] == PHOTOS
    r = pxvm.Runner(pxvm.Program.from_plan(PLAN), executor=EXECUTOR)
    for tokens, grid, f in items:
        one = r.patches(f, policy="dynamic")
        assert tokens.numpy().tobytes() == np.asarray(one).tobytes(), f
        assert int(grid[1]) * int(grid[2]) == one.shape[0]
    _check_failures(ds, folder, warned, ["a 4x1000 image", "200:1"])


def test_image_folder_dataset_strict_and_job_errors_raise(folder):
    """on_error="raise" raises the first bad file's error naming it; a bad on_error is a
    UsageError; an error that is no image's (policy dynamic with a .pxi) raises in skip mode too,
    it is not listed against each file."""
    pytest.importorskip("torch")
    ds = pxvm.data.ImageFolderDataset(folder, ANY, batch_size=3, executor=EXECUTOR, on_error="raise")
    with pytest.raises(pxvm.Malformed, match="'%s': corrupt or truncated PNG" % re.escape(str(folder / BAD[0]))):
        list(ds)
    ds = pxvm.data.ImageFolderDataset(folder, ANY, batch_size=16, executor=EXECUTOR, on_error="raise")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning: strict mode raises instead
        with pytest.raises(pxvm.Malformed, match=re.escape(BAD[0])):
            list(ds)
    with pytest.raises(pxvm.UsageError, match="on_error 'ignore'"):
        pxvm.data.ImageFolderDataset(folder, ANY, on_error="ignore")
    ds = pxvm.data.ImageFolderDataset(folder, ANY, policy="dynamic", executor=EXECUTOR)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(pxvm.UsageError, match="policy dynamic needs a program compiled from a \"uniform\" plan"):
            list(ds)


# ---- Runner: an image given as a file path, for every policy

@pytest.mark.parametrize("program,policy", [(FOVEATE, None), (FOVEATE, "exact"), (FOVEATE, "fit"),
                                            (FOVEATE, "stretch:bilinear"), (ANY, None), (ANY, "native"),
                                            (PLAN, "dynamic")])
def test_runner_takes_a_file_path_for_every_policy(program, policy):
    """run, patches, tokens (and the batch calls, a list of paths) take a PNG/JPEG path as
    load_image's array, for every policy; before, only policy dynamic took a path (the others:
    'TypeError: images must be uint8 arrays, got <U40')."""
    prog = pxvm.Program.from_plan(program) if program.endswith(".json") else pxvm.Program.load(program)
    r = pxvm.Runner(prog, executor=EXECUTOR)
    # foveate273 without a resizing policy takes its own size (451x300, chelsea); the others a 640x427 JPEG
    photo = PHOTO if program == FOVEATE and policy in (None, "exact") else os.path.join(PHOTOS_DIR, "rocket.jpg")
    img = pxvm.load_image(photo)
    for given in (photo, pathlib.Path(photo)):
        assert np.asarray(r.patches(given, policy=policy)).tobytes() == np.asarray(r.patches(img, policy=policy)).tobytes()
        if policy != "dynamic":
            want = r.run(img, policy=policy)
            got = r.run(given, policy=policy)
            assert {k: np.asarray(v).tobytes() for k, v in got.items()} == {k: np.asarray(v).tobytes() for k, v in want.items()}
            assert np.asarray(r.tokens(given, policy=policy)).tobytes() == np.asarray(r.tokens(img, policy=policy)).tobytes()
            assert np.asarray(r.patches(image=given, policy=policy)).tobytes() == np.asarray(r.patches(img, policy=policy)).tobytes()
    batch = r.patches_batch([photo, img], policy=policy)
    want = r.patches_batch([img, img], policy=policy)
    if policy == "dynamic":
        assert np.asarray(batch.tokens).tobytes() == np.asarray(want.tokens).tobytes()
    else:
        assert np.asarray(batch).tobytes() == np.asarray(want).tobytes()
        assert np.asarray(r.tokens_batch([photo, photo], policy=policy)).tobytes() == \
            np.asarray(r.tokens_batch([img, img], policy=policy)).tobytes()


def test_runner_errors_of_a_file_path_name_the_file(folder):
    """An image given by path that does not fit is an error naming the file (its size and the
    slot's size or bounds come from the library); one that does not decode names it too."""
    tall = str(folder / "coffee-tall.png")
    fixed = pxvm.Runner(pxvm.Program.load(FOVEATE), executor=EXECUTOR)
    with pytest.raises(pxvm.Unlinkable, match=r"a 240x400 image .* which is 451x300 \(file '%s'\)" % re.escape(tall)) as e:
        fixed.patches(tall)
    assert e.value.file == tall
    anysize = pxvm.Runner(pxvm.Program.load(ANY), executor=EXECUTOR)
    sliver = str(folder / BAD[2])
    with pytest.raises(pxvm.Unlinkable, match=r"a 4x1000 image .* 16x16 \.\. 16384x16384 \(file '%s'\)" % re.escape(sliver)):
        anysize.run(sliver)
    # the one image that failed, not every file of the batch (test_trial2: the index too)
    with pytest.raises(pxvm.Unlinkable, match=r"a 4x1000 image .*\(image 0 of the batch, file '%s'\)$" % re.escape(sliver)):
        anysize.patches_batch([sliver, tall])
    with pytest.raises(pxvm.Malformed, match="'%s': corrupt or truncated PNG" % re.escape(str(folder / BAD[0]))):
        anysize.patches(str(folder / BAD[0]))
    with pytest.raises(pxvm.Malformed, match="'%s' is neither a PNG nor a JPEG" % re.escape(str(folder / BAD[1]))):
        anysize.tokens_batch([tall, str(folder / BAD[1])])


def test_loaders_refuse_what_would_be_an_empty_or_wrong_dataset(folder, tmp_path):
    """A missing or image-less folder, a bad batch_size or policy are errors naming them at once,
    not an empty epoch or a failure at the first batch (before: [] for an empty folder and for
    iter_shards of a mistyped path, 'range() arg 3 must not be zero', a bad policy accepted)."""
    pytest.importorskip("torch")
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "notes.txt").write_text("no image here\n")
    with pytest.raises(pxvm.PxIOError, match="folder '%s' holds no PNG or JPEG file" % re.escape(str(empty))):
        pxvm.data.ImageFolderDataset(empty, ANY)
    with pytest.raises(pxvm.PxIOError, match="cannot read '%s'" % re.escape(str(tmp_path / "nowhere"))):
        pxvm.data.ImageFolderDataset(tmp_path / "nowhere", ANY)
    for bad in (0, -1, 2.5, True):
        with pytest.raises(pxvm.UsageError, match="batch_size"):
            pxvm.data.ImageFolderDataset(folder, ANY, batch_size=bad)
    with pytest.raises(pxvm.UsageError, match="fitt"):
        pxvm.data.ImageFolderDataset(folder, ANY, policy="fitt")
    with pytest.raises(pxvm.PxIOError, match="'%s' holds no pxbatch shard" % re.escape(str(empty))):
        list(pxvm.iter_shards(empty))
    with pytest.raises(pxvm.PxIOError, match="cannot read '%s'" % re.escape(str(tmp_path / "nowhere"))):
        pxvm.data.ShardDataset(tmp_path / "nowhere")


@pytest.mark.parametrize("program,policy", [(ANY, "native"), (PLAN, "dynamic")])
def test_pxbatch_names_each_failed_file_on_stderr(folder, tmp_path, program, policy):
    """pxbatch over the folder (native: each image at its size; dynamic: ragged shards): the
    photos are written, each bad file is in the marker's errors and named on stderr (the file,
    then the classified error), the summary counts 3 failures and the exit status is 9."""
    r = subprocess.run([os.path.join(BIN, "pxbatch"), program, "--in-dir", str(folder), "--out", str(tmp_path / "o"),
                        "--policy", policy, "--executor", "cpu", "--shard-size", "3"], capture_output=True, text=True)
    assert r.returncode == 9, r.stderr
    assert "4 images" in r.stderr and ", 3 failed," in r.stderr
    errors = [e for m in sorted((tmp_path / "o").glob("shard-*.json")) for e in json.loads(m.read_text())["errors"]]
    assert [os.path.basename(e["file"]) for e in errors] == BAD
    failed = sorted(ln for ln in r.stderr.splitlines() if ln.startswith("pxbatch: failed"))
    # the classified error names the file once (as pxrun's lines): the error alone follows
    assert all("'%s'" % e["file"] in e["error"] for e in errors)
    assert failed == sorted("pxbatch: failed: %s" % e["error"] for e in errors)
    assert "unlinkable: a 4x1000 image" in errors[2]["error"] and str(folder / BAD[2]) in errors[2]["error"]


def test_another_format_under_a_png_name_is_named(tmp_path):
    """A GIF, WebP, TIFF, BMP, AVIF, HEIF or JPEG 2000 file named .png is refused naming its format
    (convert it first), where an unknown signature says only that; each format's edge: a text
    starting "BM" without a DIB header size, a "GIF87" one byte short, a RIFF that is not WEBP."""
    from PIL import Image
    im = Image.new("RGB", (20, 10), (1, 2, 3))
    named = {}
    for fmt, name in (("GIF", "GIF"), ("WEBP", "WebP"), ("TIFF", "TIFF"), ("BMP", "BMP")):
        p = tmp_path / ("x-%s.png" % fmt.lower())
        im.save(p, fmt)
        named[p] = name
    for data, name in ((b"\0\0\0\x1cftypavif" + bytes(16), "AVIF"), (b"\0\0\0\x18ftypheic" + bytes(12), "HEIF"),
                       (b"\0\0\0\x0cjP  \r\n\x87\n" + bytes(20), "JPEG 2000")):
        p = tmp_path / ("x-%s.png" % name.replace(" ", ""))
        p.write_bytes(data)
        named[p] = name
    for p, name in named.items():
        with pytest.raises(pxvm.Malformed, match=re.escape("'%s' is a %s file, whatever its name: pxvm decodes PNG "
                                                           "and JPEG (convert it first)" % (p, name))):
            pxvm.load_image(str(p))
    for data in (b"BMX is a text file, not a bitmap", b"GIF87", b"RIFF\0\0\0\0WAVEfmt "):
        p = tmp_path / "other.png"
        p.write_bytes(data)
        with pytest.raises(pxvm.Malformed, match="is neither a PNG nor a JPEG file \\(unknown signature\\)"):
            pxvm.load_image(str(p))
