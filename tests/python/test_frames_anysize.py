"""pxrun --frames into an any-size input (issue 23, item 5) on the executor under test: a folder of
photos of mixed sizes gives, frame by frame, the bytes of `pxrun --in FRAME`, through more sizes
than the 64 resolutions kept (PXVM_RESOLVE_CACHE) and back; a frame outside the bounds is an error naming its file,
size and the bounds, with nothing written; frames of one size (raw on stdin, a video) give the
bytes of the program `pxasm --resolve WxH` writes; a program that keeps state from frame to frame
restarts its stream at a change of size and says so; --fixation follows each frame's size."""
import os
import subprocess

import numpy as np
import pytest

import pxvm
from conftest import BIN, EXECUTOR, PHOTO, ROOT, pxrun

ANY = os.path.join(ROOT, "programs", "foveate273_any.pxi")
VTEST = os.environ.get("PXVM_VTEST") or next(
    (p for p in (os.path.join(ROOT, "build", "data", "vtest.avi"),
                 "/usr/share/doc/opencv-doc/examples/data/vtest.avi") if os.path.exists(p)), None)

# A stream that keeps state: the frame resized to 32x32, DIFF against the persistent `cur`, UPDATE
# (threshold 250: after the first frame nearly nothing is taken again, so a continued stream and a
# restarted one differ).
STATEFUL = """.width 64
.slot image input 40x30 any min=8 max=200
.slot small scratch 32x32
.slot cur output 32x32 persistent
.slot dirty scratch 2x2
RESIZE image small filter=2 at=(0,0) size=(32,32)
DIFF frame=small cur=cur mask=dirty threshold=250
UPDATE frame=small cur=cur mask=dirty
HALT
"""


def resized(path, size, out, filt="bicubic"):
    subprocess.run([os.path.join(BIN, "pxresize"), path, "%dx%d" % size, filt, str(out)], check=True,
                   capture_output=True)
    return out


def folder(tmp_path, name, sizes, source=PHOTO):
    d = tmp_path / name
    d.mkdir()
    return d, [resized(source, s, d / ("f%02d_%dx%d.png" % (i, *s))) for i, s in enumerate(sizes)]


def single(prog, frame, tmp_path, *extra, slot="atlas"):
    out = tmp_path / "single.npy"
    pxrun(str(prog), "--in", "image=%s" % frame, "--npy", "%s=%s" % (slot, out), "--executor", EXECUTOR, *extra)
    return np.load(out)


def test_mixed_sizes_each_frame_as_a_single_run(tmp_path):
    sizes = [(451, 300), (300, 451), (97, 64), (640, 360), (16, 16), (451, 300), (97, 64)]  # and back
    d, frames = folder(tmp_path, "mixed", sizes)
    npy, last = tmp_path / "frames.npy", tmp_path / "last.pxi"
    r = pxrun(ANY, "--frames", str(d), "--npy", "atlas=%s" % npy, "-o", str(last), "--time", "--executor", EXECUTOR)
    assert len([l for l in r.stderr.split("\n") if l.startswith("frame ")]) == len(sizes)
    a = np.load(npy)
    assert a.shape == (len(sizes), 273, 16, 16, 4)
    for i, f in enumerate(frames):
        assert a[i].tobytes() == single(ANY, f, tmp_path).tobytes(), f
    # -o: the program image of the last frame's resolution, as a single run of that frame writes it
    one = tmp_path / "one.pxi"
    pxrun(ANY, "--in", "image=%s" % frames[-1], "-o", str(one), "--executor", EXECUTOR)
    assert last.read_bytes() == one.read_bytes()


def test_more_sizes_than_kept_and_back(tmp_path):
    sizes = [(40 + 7 * i, 30 + 5 * i) for i in range(67)]  # PXVM_RESOLVE_CACHE (64) + 3
    sizes += [sizes[0], sizes[66], sizes[1], sizes[0]]  # an evicted size, the loaded one, evicted again
    d, frames = folder(tmp_path, "many", sizes)
    npy = tmp_path / "frames.npy"
    pxrun(ANY, "--frames", str(d), "--npy", "atlas=%s" % npy, "--executor", EXECUTOR)
    a = np.load(npy)
    runner = pxvm.Runner(pxvm.Program.load(ANY), executor=EXECUTOR)  # pxrun --in's bytes (test_anysize)
    for i, f in enumerate(frames):
        tokens = np.asarray(runner.run(pxvm.load_image(str(f)))["atlas"])
        want = tokens.reshape(17, 16, 17, 16, 4).transpose(0, 2, 1, 3, 4).reshape(289, 16, 16, 4)[:273]
        assert a[i].tobytes() == want.tobytes(), f
    assert a[-1].tobytes() == single(ANY, frames[-1], tmp_path).tobytes()


@pytest.mark.parametrize("where", ["first", "later"])
def test_a_frame_out_of_bounds_names_file_size_and_bounds_and_writes_nothing(tmp_path, where):
    sizes = [(15, 40), (97, 64), (60, 50)] if where == "first" else [(97, 64), (60, 50), (300, 15)]
    d, frames = folder(tmp_path, "oob", sizes)
    bad = frames[0] if where == "first" else frames[2]
    npy, last = tmp_path / "frames.npy", tmp_path / "last.pxi"
    r = pxrun(ANY, "--frames", str(d), "--npy", "atlas=%s" % npy, "-o", str(last), "--executor", EXECUTOR,
              check=False)
    w, h = sizes[0] if where == "first" else sizes[2]
    assert r.returncode == 5, r.stderr  # unlinkable, as --in
    assert ("pxrun: unlinkable: a %dx%d image cannot be bound to slot 1 ('image'): it takes 16x16 .. 16384x16384 "
            "(file '%s')" % (w, h, bad)) in r.stderr, r.stderr
    assert not npy.exists() and not last.exists()
    one = pxrun(ANY, "--in", "image=%s" % bad, "--npy", "atlas=%s" % npy, check=False)
    assert one.returncode == r.returncode and "a %dx%d image cannot be bound" % (w, h) in one.stderr


def test_raw_frames_of_one_size_as_the_resolved_program(tmp_path):
    w, h = 200, 150
    frames = [pxvm.load_image(str(resized(p, (w, h), tmp_path / ("r%d.png" % i))))
              for i, p in enumerate([PHOTO, os.path.join(ROOT, "tests", "data", "photos", "coins.png"), PHOTO])]
    raw = b"".join(np.ascontiguousarray(np.asarray(f)[..., :3]).tobytes() for f in frames)
    fixed = tmp_path / "fixed.pxi"
    subprocess.run([os.path.join(BIN, "pxasm"), ANY, "--resolve", "%dx%d" % (w, h), "-o", str(fixed)], check=True,
                   capture_output=True)
    got = {}
    for name, prog in (("any", ANY), ("fixed", str(fixed))):
        npy = tmp_path / ("%s.npy" % name)
        r = subprocess.run([os.path.join(BIN, "pxrun"), prog, "--frames", "-", "--frame-size", "%dx%d" % (w, h),
                            "--npy", "atlas=%s" % npy, "--executor", EXECUTOR], input=raw, capture_output=True,
                           cwd=ROOT)
        assert r.returncode == 0, r.stderr
        got[name] = npy.read_bytes()
    assert got["any"] == got["fixed"]
    assert np.load(tmp_path / "any.npy").shape == (3, 273, 16, 16, 4)
    # raw frames outside the bounds: the source and the frame named
    r = subprocess.run([os.path.join(BIN, "pxrun"), ANY, "--frames", "-", "--frame-size", "8x8", "--npy",
                        "atlas=%s" % (tmp_path / "no.npy")], input=b"\0" * 192, capture_output=True, cwd=ROOT)
    assert r.returncode == 5 and b"a 8x8 image cannot be bound to slot 1 ('image')" in r.stderr
    assert b"(frame 0 of '-')" in r.stderr and not (tmp_path / "no.npy").exists()


@pytest.mark.skipif(VTEST is None, reason="vtest.avi not found (make video-data fetches it)")
def test_a_video_as_the_resolved_program(tmp_path):
    fixed = tmp_path / "fixed.pxi"
    subprocess.run([os.path.join(BIN, "pxasm"), ANY, "--resolve", "768x576", "-o", str(fixed)], check=True,
                   capture_output=True)
    got = {}
    for name, prog in (("any", ANY), ("fixed", str(fixed))):
        npy = tmp_path / ("%s.npy" % name)
        r = pxrun(prog, "--frames", VTEST, "--max-frames", "3", "--npy", "atlas=%s" % npy, "--executor", EXECUTOR,
                  check=False)
        if r.returncode == 7:
            pytest.skip("pxrun has no FFmpeg here: " + r.stderr.strip())
        assert r.returncode == 0, r.stderr
        got[name] = npy.read_bytes()
    assert got["any"] == got["fixed"]


def test_a_stateful_program_restarts_its_stream_at_a_change_of_size(tmp_path):
    src = tmp_path / "stateful.pxs"
    src.write_text(STATEFUL)
    prog = tmp_path / "stateful.pxi"
    subprocess.run([os.path.join(BIN, "pxasm"), str(src), "-o", str(prog)], check=True, capture_output=True)
    photos = [PHOTO, os.path.join(ROOT, "tests", "data", "photos", "coins.png"),
              os.path.join(ROOT, "tests", "data", "photos", "camera.png"), PHOTO]
    d = tmp_path / "stream"
    d.mkdir()
    sizes = [(40, 30), (40, 30), (60, 50), (60, 50)]
    frames = [resized(p, s, d / ("f%d.png" % i), "box") for i, (p, s) in enumerate(zip(photos, sizes))]
    npy = tmp_path / "cur.npy"
    r = pxrun(str(prog), "--frames", str(d), "--npy", "cur=%s" % npy, "--executor", EXECUTOR)
    assert ("pxrun: --frames: frame 2 (file '%s') is 60x50, the previous ones 40x30: program '%s' keeps state from "
            "frame to frame (DIFF, UPDATE, persistent slots), so its stream restarts at the new size"
            % (frames[2], prog)) in r.stderr, r.stderr
    a = np.load(npy)
    first = [single(prog, f, tmp_path, slot="cur") for f in frames]  # each frame as a stream's first
    # frames 0 and 2 start a stream; 1 and 3 continue it (threshold 250: nothing taken again)
    assert a[0].tobytes() == first[0].tobytes() and a[2].tobytes() == first[2].tobytes()
    assert a[1].tobytes() == first[0].tobytes() and a[3].tobytes() == first[2].tobytes()
    assert a[2].tobytes() != a[1].tobytes()
    # a stream of one size: no restart said
    same = pxrun(str(prog), "--frames", str(d / "f[01].png"), "--npy", "cur=%s" % npy, "--executor", EXECUTOR)
    assert "restarts" not in same.stderr


def test_npy_of_the_frame_slot_needs_one_size_and_fixations_follow_each_frame(tmp_path):
    d, frames = folder(tmp_path, "fix", [(120, 90), (97, 64), (300, 451)])
    npy = tmp_path / "image.npy"
    r = pxrun(ANY, "--frames", str(d), "--npy", "image=%s" % npy, check=False)
    assert r.returncode == 2 and not npy.exists()
    assert ("--npy image: frame 1 (file '%s') is 97x64, the previous ones 120x90: slot 1 ('image') changes size with "
            "the frames and cannot be stacked in one array" % frames[1]) in r.stderr, r.stderr
    # a fixation-relative any-size plan: a normalized fixation is a fraction of each frame
    plan = tmp_path / "rel.json"
    plan.write_text('{"image": [120, 90], "size": "any", "bounds": {"min": 16, "max": 1000}, "budget": 12, '
                    '"patch": 8, "scheme": "logpolar", "fixation": "relative"}')
    rel = tmp_path / "rel.pxi"
    subprocess.run([os.path.join(BIN, "pxasm"), "--plan", str(plan), "-o", str(rel)], check=True, capture_output=True)
    out = tmp_path / "rel.npy"
    pxrun(str(rel), "--fixation", "0.3,0.6", "--frames", str(d), "--npy", "atlas=%s" % out, "--executor", EXECUTOR)
    a = np.load(out)
    for i, f in enumerate(frames):
        assert a[i].tobytes() == single(rel, f, tmp_path, "--fixation", "0.3,0.6").tobytes(), f
    # a texel fixation outside a later frame: the frame named
    r = pxrun(str(rel), "--fixation", "110px,80px", "--frames", str(d), "--npy", "atlas=%s" % out, check=False)
    assert r.returncode == 2 and "x = 110 texels is not in [0, 97]" in r.stderr
    assert "frame 1 (file '%s')" % frames[1] in r.stderr, r.stderr
