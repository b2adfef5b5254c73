"""pxbatch --lenient (issue 39): pxrun's meaning, "recover a damaged image" and only that. Without
it a truncated input fails (its error naming --lenient) and an input with bytes after its end (a
motion photo's MP4) is read; with it the truncated one is decoded, named on stderr as a warning,
and the job records "decode": "lenient" (another job than a strict one into the same --out)."""
import json
import os
import struct
import subprocess

import numpy as np
import pytest

import pxvm
from conftest import BIN, PHOTO


def mp4():
    """An 'ftyp' box and an 'mdat' box of 4000 bytes of (fake) video: what a motion photo appends."""
    body = bytes((i * 2654435761 >> 13) & 0xFF for i in range(3992))
    return struct.pack(">I", 24) + b"ftypmp42" + bytes(4) + b"mp42isom" + struct.pack(">I", 4000) + b"mdat" + body


PXBATCH = os.path.join(BIN, "pxbatch")


@pytest.fixture(scope="module")
def small_set(tmp_path_factory):
    """A 64x48 program and four inputs: a PNG, a JPEG, the JPEG with an MP4 after it, the JPEG
    cut mid-scan."""
    from PIL import Image
    root = tmp_path_factory.mktemp("lenient")
    img = root / "img"
    img.mkdir()
    crop = Image.open(PHOTO).convert("RGB").crop((100, 100, 164, 148))
    crop.save(img / "a.png")
    crop.save(img / "b.jpg", quality=90)
    jpg = (img / "b.jpg").read_bytes()
    (img / "c-motion.jpg").write_bytes(jpg + mp4())
    (img / "d-cut.jpg").write_bytes(jpg[:len(jpg) * 2 // 3])
    pxvm.Program.from_plan({"image": [64, 48], "budget": 8, "scheme": "grid", "levels": 3}).save(root / "p.pxi")
    return root


def pxbatch(ds, out, *extra):
    return subprocess.run([PXBATCH, str(ds / "p.pxi"), "--in-dir", str(ds / "img"), "--out", str(out), "--executor",
                           "cpu", "--threads", "1", *extra], capture_output=True, text=True)


def marker(out):
    return json.load(open(out / "shard-00000.json"))


def test_pxbatch_reads_trailers_and_refuses_damage_without_lenient(small_set, tmp_path):
    r = pxbatch(small_set, tmp_path / "strict")
    assert r.returncode == 9, r.stderr
    m = marker(tmp_path / "strict")
    assert [row["file"].rsplit("/", 1)[1] for row in m["rows"]] == ["a.png", "b.jpg", "c-motion.jpg"]
    assert len(m["errors"]) == 1 and m["errors"][0]["file"].endswith("d-cut.jpg")
    assert "truncated" in m["errors"][0]["error"] and "--lenient" in m["errors"][0]["error"]
    assert "decode" not in m["job"]
    assert "pxbatch: failed: malformed: '%s'" % (small_set / "img" / "d-cut.jpg") in r.stderr
    assert "c-motion.jpg" not in r.stderr  # bytes after the end: read, no damage to report


def test_pxbatch_lenient_decodes_damage_and_says_so(small_set, tmp_path):
    out = tmp_path / "lenient"
    r = pxbatch(small_set, out, "--lenient")
    assert r.returncode == 0, r.stderr
    m = marker(out)
    assert len(m["rows"]) == 4 and m["errors"] == []
    assert m["job"]["decode"] == "lenient"
    cut = small_set / "img" / "d-cut.jpg"
    assert "pxbatch: warning (--lenient): malformed: '%s': corrupt or unsupported JPEG (truncated" % cut \
        in r.stderr
    assert "c-motion.jpg" not in r.stderr
    # the marker keeps the warning beside the row it decoded, and no other row has one
    warned = {row["file"].rsplit("/", 1)[1]: row.get("warning") for row in m["rows"]}
    assert warned["d-cut.jpg"] and "corrupt or unsupported JPEG (truncated" in warned["d-cut.jpg"]
    assert "pxbatch: warning (--lenient): %s" % warned["d-cut.jpg"] in r.stderr
    assert [f for f, w in warned.items() if w is not None] == ["d-cut.jpg"]
    assert len(list(pxvm.iter_shards(out))) == 1  # the loaders read the marker as before
    # the rows of the whole files are the strict job's bytes; the cut one is the lenient decode's
    rows = np.load(out / "shard-00000.npy")
    prog = pxvm.Program.load(small_set / "p.pxi")
    with pxvm.Runner(prog) as run:
        with pytest.warns(UserWarning, match="corrupt or unsupported JPEG"):
            want = [run.patches(pxvm.load_image(small_set / "img" / f, lenient=True))
                    for f in ("a.png", "b.jpg", "c-motion.jpg", "d-cut.jpg")]
    assert np.array_equal(rows, np.stack(want))
    assert subprocess.run([PXBATCH, "--verify", str(out)], capture_output=True).returncode == 0
    # another job: the same --out without --lenient refuses, naming the field
    r = pxbatch(small_set, out)
    assert r.returncode == 2 and "decode" in r.stderr, r.stderr


def test_pxbatch_lenient_is_a_job_option(small_set, tmp_path):
    r = subprocess.run([PXBATCH, "--verify", str(tmp_path), "--lenient"], capture_output=True, text=True)
    assert r.returncode == 2 and "--verify DIR takes no program, --out, inputs, --policy or --lenient" in r.stderr
    r = subprocess.run([PXBATCH, "--help"], capture_output=True, text=True)
    assert r.returncode == 0 and "--lenient" in r.stdout and "Bytes after a complete image" in r.stdout
