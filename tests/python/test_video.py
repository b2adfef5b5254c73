"""Video on the executor under test (CPU in CI, CUDA-GL with PXVM_TEST_EXECUTOR=cuda): a stream of
frames through an incremental plan gives, frame by frame, the bytes of the same plan recomputed in
full; changed-token masks are conservative; pxrun reads a video file (FFmpeg), raw frames on
stdin and a folder of images to the same bytes; OpenCV's vtest.avi end to end at thresholds
0, 8 and 16."""
import os
import re
import subprocess

import numpy as np
import pytest

import pxvm
from conftest import BIN, EXECUTOR, ROOT, pxrun

VTEST = os.environ.get("PXVM_VTEST") or next(
    (p for p in (os.path.join(ROOT, "build", "data", "vtest.avi"),
                 "/usr/share/doc/opencv-doc/examples/data/vtest.avi") if os.path.exists(p)), None)
need_vtest = pytest.mark.skipif(
    VTEST is None and os.environ.get("PXVM_REQUIRE_VTEST") != "1",
    reason="vtest.avi not found (make video-data fetches it from Debian's opencv-doc)")


def video_plan(w, h, threshold, scheme="logpolar", budget=48, patch=16):
    return {"image": [w, h], "budget": budget, "patch": patch, "scheme": scheme, "fixation": "relative",
            "video": threshold}


def full_twin(prog):
    """The same program recomputing everything: no tile masks, a plain (non-persistent) atlas;
    DIFF and UPDATE stay, so the current image evolves exactly as in the incremental one."""
    text = "\n".join(re.sub(r" mask=\w+", "", l) if l.split(" ")[0] in ("PYRAMID", "SAMPLE", "ANISO", "GATHER") else l
                     for l in prog.disassemble().split("\n"))
    text = re.sub(r"(\.slot atlas output [^;\n]*?) persistent", r"\1", text)
    return pxvm.Program.assemble(text, "full")


def moving_frames(n, w, h, seed):
    """A static scene with a few moving squares and sensor noise in one corner."""
    rng = np.random.default_rng(seed)
    base = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
    out = []
    for t in range(n):
        f = base.copy()
        for k in range(3):
            x, y = (7 * t + 40 * k) % (w - 12), (3 * t + 25 * k) % (h - 12)
            f[y:y + 12, x:x + 12] = (60 * k, 255 - 60 * k, 128)
        f[:6, :6] = rng.integers(0, 256, (6, 6, 3), dtype=np.uint8) // 32 + 100
        out.append(f)
    return out


def as_numpy(x):
    return x if isinstance(x, np.ndarray) else x.cpu().numpy()


@pytest.mark.parametrize("threshold", [0, 8, 40])
def test_stream_incremental_equals_full_recompute_and_changed_is_conservative(threshold):
    w, h = 150, 100
    prog = pxvm.Program.from_plan(video_plan(w, h, threshold))
    inc = pxvm.Runner(prog, executor=EXECUTOR).stream()
    full = pxvm.Runner(full_twin(prog), executor=EXECUTOR)
    prev, skipped = None, 0
    for i, f in enumerate(moving_frames(12, w, h, threshold)):
        fix = ((75 + (i // 4) * 10) / w, 0.5)  # the gaze moves now and then (normalized to the frame)
        got, changed = inc.push(f, fixation=fix)
        want = full.patches(f, fixation=fix)
        got, changed = as_numpy(got), as_numpy(changed)
        assert np.array_equal(got, as_numpy(want)), (threshold, i)
        if prev is not None:
            moved = np.any((got != prev).reshape(len(got), -1), axis=1)
            assert not np.any(moved & ~changed), (threshold, i)  # a changed token is always marked
            skipped += int((~changed).sum())
        prev = got
    assert skipped > 0  # the stream did skip work


def test_dirty_rectangles_and_reset():
    w, h = 64, 64
    prog = pxvm.Program.from_plan(video_plan(w, h, 0, budget=12, patch=8))
    s = pxvm.Runner(prog, executor=EXECUTOR).stream()
    f = np.full((h, w, 3), 90, np.uint8)
    s.push(f, fixation=(0.5, 0.5))
    g = f.copy()
    g[40:44, 40:44] = 250
    p1, c1 = s.push(g, dirty=[])  # "nothing changed": the new square is not seen
    assert not as_numpy(c1).any()
    p2, c2 = s.push(g, dirty=[(40, 40, 4, 4)])  # told: the tokens over it are sampled again
    assert as_numpy(c2).any() and not np.array_equal(as_numpy(p1), as_numpy(p2))
    s.reset()
    _, c3 = s.push(g)  # the fixation set stays set
    assert as_numpy(c3).all()  # after a reset, the whole frame


def identity_program(w, h):
    return ".width 16\n.slot image input %dx%d\nHALT\n" % (w, h)


@need_vtest
def test_vtest_avi_through_pxrun_and_python_at_thresholds_0_8_16(tmp_path):
    """OpenCV's vtest.avi (768x576, static camera): pxrun decodes it through FFmpeg; the frames
    it decoded, pushed through a Python stream, give pxrun's tokens and changed masks; raw frames
    on stdin give them too; incremental == full recompute; fewer tokens at higher thresholds."""
    n = 40
    ident = tmp_path / "ident.pxs"
    ident.write_text(identity_program(768, 576))
    subprocess.run([os.path.join(BIN, "pxasm"), str(ident), "-o", str(tmp_path / "ident.pxi")], check=True)
    frames_npy = tmp_path / "frames.npy"
    r = pxrun(str(tmp_path / "ident.pxi"), "--frames", VTEST, "--max-frames", str(n), "--npy", "image=%s" % frames_npy,
              check=False)
    if r.returncode == 7 and os.environ.get("PXVM_REQUIRE_VTEST") != "1":  # no FFmpeg here (the GPU machine)
        cv2 = pytest.importorskip("cv2", reason="neither FFmpeg's libraries nor OpenCV to decode vtest.avi")
        cap, frames = cv2.VideoCapture(VTEST), []
        while len(frames) < n:
            ok, bgr = cap.read()
            assert ok
            frames.append(cv2.cvtColor(bgr, cv2.COLOR_BGR2RGBA))
        return stream_matches_full_recompute(np.stack(frames))
    assert r.returncode == 0, r.stderr
    frames = np.load(frames_npy)[:, 0]
    assert frames.shape == (n, 576, 768, 4)
    sampled = {}
    for t in (0, 8, 16):
        plan = tmp_path / ("plan%d.json" % t)
        plan.write_text(str(video_plan(768, 576, t, budget=273)).replace("'", '"'))
        atlas, changed = tmp_path / ("a%d.npy" % t), tmp_path / ("c%d.npy" % t)
        pxrun(str(plan), "--fixation", "0.5,0.5", "--frames", VTEST, "--max-frames", str(n), "--npy",
              "atlas=%s" % atlas, "--changed", str(changed), "--executor", EXECUTOR)
        a, c = np.load(atlas), np.load(changed)
        prog = pxvm.Program.from_plan(str(plan))
        s = pxvm.Runner(prog, executor=EXECUTOR).stream()
        full = pxvm.Runner(full_twin(prog), executor=EXECUTOR)
        for i in range(n):
            p, ch = s.push(frames[i], fixation=(0.5, 0.5))
            assert np.array_equal(as_numpy(p), a[i]) and np.array_equal(as_numpy(ch), c[i].astype(bool)), (t, i)
            # the full twin sees every frame too: the current image depends on each of them
            assert np.array_equal(as_numpy(full.patches(frames[i], fixation=(0.5, 0.5))), a[i]), (t, i)
        sampled[t] = c[1:].mean()
        if t == 8:  # raw RGBA frames on stdin: the same tokens
            raw = subprocess.run([os.path.join(BIN, "pxrun"), str(plan), "--fixation", "0.5,0.5", "--frames", "-",
                                  "--frame-size", "768x576", "--frame-format", "rgba", "--npy",
                                  "atlas=%s" % (tmp_path / "raw.npy"), "--executor", EXECUTOR],
                                 input=frames.tobytes(), capture_output=True, cwd=ROOT)
            assert raw.returncode == 0, raw.stderr
            assert np.array_equal(np.load(tmp_path / "raw.npy"), a)
    print("tokens sampled after the first frame:", sampled)
    assert sampled[0] >= sampled[8] >= sampled[16] and sampled[16] < 0.9


def stream_matches_full_recompute(frames):
    """Where pxrun cannot decode video: OpenCV's frames, stream == full recompute, fewer tokens
    sampled at higher thresholds."""
    sampled = {}
    for t in (0, 8, 16):
        prog = pxvm.Program.from_plan(video_plan(768, 576, t, budget=273))
        s = pxvm.Runner(prog, executor=EXECUTOR).stream()
        full = pxvm.Runner(full_twin(prog), executor=EXECUTOR)
        ch_all = []
        for i in range(len(frames)):
            p, ch = s.push(frames[i], fixation=(0.5, 0.5))
            assert np.array_equal(as_numpy(p), as_numpy(full.patches(frames[i], fixation=(0.5, 0.5)))), (t, i)
            ch_all.append(as_numpy(ch))
        sampled[t] = np.mean(ch_all[1:])
    assert sampled[0] >= sampled[8] >= sampled[16] and sampled[16] < 0.9


def test_pxrun_frames_from_a_folder_and_errors(tmp_path):
    w, h = 48, 32
    frames = moving_frames(4, w, h, 1)
    d = tmp_path / "frames"
    d.mkdir()
    for i, f in enumerate(frames):
        rgba = np.concatenate([f, np.full((h, w, 1), 255, np.uint8)], axis=2)
        png = pxvm._capi.lib  # encode through the library: the same PNG writer as pxrun
        import ctypes
        p, n = ctypes.c_void_p(), ctypes.c_size_t()
        png.pxvm_image_encode_png.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int,
                                              ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_size_t)]
        assert png.pxvm_image_encode_png(np.ascontiguousarray(rgba).ctypes.data, w, h, ctypes.byref(p), ctypes.byref(n)) == 0
        (d / ("f%03d.png" % i)).write_bytes(ctypes.string_at(p, n.value))
        png.pxvm_free(p)
    plan = tmp_path / "plan.json"
    plan.write_text(str(video_plan(w, h, 0, budget=6, patch=8)).replace("'", '"'))
    out = tmp_path / "a.npy"
    r = pxrun(str(plan), "--fixation", "0.5,0.5", "--frames", str(d), "--npy", "atlas=%s" % out, "--time",
              "--executor", EXECUTOR)
    assert len([l for l in r.stderr.split("\n") if l.startswith("frame ")]) == 4
    s = pxvm.Runner(pxvm.Program.from_plan(str(plan)), executor=EXECUTOR).stream()
    a = np.load(out)
    for i, f in enumerate(frames):
        assert np.array_equal(as_numpy(s.push(f, fixation=(0.5, 0.5))[0]), a[i])
    bad = pxrun(str(plan), "--fixation", "0.5,0.5", "--frames", "-", check=False)
    assert bad.returncode == 2 and "--frame-size" in bad.stderr
    short = subprocess.run([os.path.join(BIN, "pxrun"), str(plan), "--fixation", "0.5,0.5", "--frames", "-",
                            "--frame-size", "48x32"],
                           input=b"\0" * (48 * 32 * 3 + 5), capture_output=True, cwd=ROOT)
    assert short.returncode == 1 and b"ended inside frame 1" in short.stderr
