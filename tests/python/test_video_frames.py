"""Video files from Python and the CLI (issue 41, point 3) on OpenCV's clips (build/data, `make
video-data`: vtest.avi, a static camera; Megamind.avi and tree.avi, camera motion): pxvm.video's
frames are pxrun --frames' bytes; its sampling is qwen-vl-utils' (0.0.10, QwenLM/Qwen2.5-VL
qwen-vl-utils/src/qwen_vl_utils/vision_process.py: smart_nframes, _read_video_torchvision's
torch.linspace(0, total - 1, nframes).round()); pxrun --fixations FILE gives frame k the tokens of
--fixation with line k; a video plan of "size": "any" is compiled at the video's frame size (==
the plan written for that size); a memory limit hit stacking frames names their real size."""
import math
import os

import numpy as np
import pytest

import pxvm
from pxvm import video
import subprocess

from conftest import BIN, ROOT, pxrun


def clip(name):
    for p in (os.path.join(ROOT, "build", "data", name), "/usr/share/doc/opencv-doc/examples/data/" + name):
        if os.path.exists(p):
            return p
    pytest.skip("%s not found (make video-data fetches it from Debian's opencv-doc)" % name)


IDENTITY = """; the frame, nothing else: --npy image= dumps the decoded frames
.width 16
.slot image input 64x64 any min=8 max=4096
HALT
"""


def pxrun_frames(tmp_path, path, n):
    """The first n frames of `path` as pxrun --frames decodes them: (n, H, W, 4)."""
    pxs = tmp_path / "identity.pxs"
    pxs.write_text(IDENTITY)
    pxi, npy = tmp_path / "identity.pxi", tmp_path / "frames.npy"
    subprocess.run([os.path.join(BIN, "pxasm"), str(pxs), "-o", str(pxi)], check=True, capture_output=True)
    pxrun(str(pxi), "--frames", path, "--max-frames", str(n), "--npy", "image=%s" % npy)
    a = np.load(npy)
    return a.reshape(a.shape[0], a.shape[2], a.shape[3], 4)


@pytest.mark.parametrize("name,size,declared,count,fps", [("vtest.avi", (768, 576), 795, 795, 10.0),
                                                           ("Megamind.avi", (720, 528), 270, 270, 23.976),
                                                           ("tree.avi", (320, 240), 444, 68, 15.0)])
def test_info_and_frames_equal_pxrun(tmp_path, name, size, declared, count, fps):
    """tree.avi declares 444 frames, 376 of them empty AVI chunks: it decodes to 68 (as pxrun's)."""
    path = clip(name)
    i = video.info(path)
    assert (i.width, i.height, i.frames) == (*size, declared)
    assert video.count(path) == count
    assert i.fps == pytest.approx(fps, rel=1e-4)
    ref = pxrun_frames(tmp_path, path, 12)
    got = video.frames(path)
    assert len(got) == count
    rgb = [f for _, f in zip(range(12), got)]
    assert all(f.shape == (size[1], size[0], 3) and f.dtype == np.uint8 for f in rgb)
    assert np.array_equal(np.stack(rgb), ref[..., :3])
    rgba = [f for _, f in zip(range(12), video.frames(path, channels=4))]
    assert np.array_equal(np.stack(rgba), ref)
    assert sum(1 for _ in got) == count  # every frame, and a second iteration starts again


def qwen_smart_nframes(total, video_fps, fps=None, nframes=None):
    """qwen-vl-utils 0.0.10 smart_nframes, transcribed (FRAME_FACTOR 2, FPS 2.0, FPS_MIN_FRAMES 4,
    FPS_MAX_FRAMES 768)."""
    if nframes is not None:
        n = round(nframes / 2) * 2
    else:
        fps = 2.0 if fps is None else fps
        min_frames = math.ceil(4 / 2) * 2
        max_frames = math.floor(min(768, total) / 2) * 2
        n = total / video_fps * fps
        n = min(min(max(n, min_frames), max_frames), total)
        n = math.floor(n / 2) * 2
    if not (2 <= n <= total):
        raise ValueError(n)
    return n


def test_sampling_indices_equal_torch_linspace_round():
    torch = pytest.importorskip("torch")
    pairs = 0
    rates = (1.0, 7.5, 10.0, 14.999925, 23.976, 25.0, 29.97, 30.0, 59.94, 60.0, 120.0)
    for total in list(range(2, 400)) + list(range(400, 40000, 331)):
        for video_fps in rates:
            for fps in (0.5, 1.0, 2.0, 4.0, 8.0):
                try:
                    want_n = qwen_smart_nframes(total, video_fps, fps=fps)
                except ValueError:
                    with pytest.raises(pxvm.UsageError):
                        video.smart_nframes(total, video_fps, fps=fps)
                    continue
                assert video.smart_nframes(total, video_fps, fps=fps) == want_n
                want = torch.linspace(0, total - 1, want_n).round().long().tolist()
                assert video.sample_indices(total, video_fps, fps=fps) == want
                pairs += 1
    assert pairs > 10000
    assert video.smart_nframes(795, 10.0) == 158 and video.smart_nframes(3, 10.0) == 2
    assert video.smart_nframes(100, 25.0, count=7) == 8  # round_by_factor(7, 2) = 8
    with pytest.raises(pxvm.UsageError):
        video.smart_nframes(100, 25.0, fps=2.0, count=8)


def test_numpy_linspace_equals_torch_without_torch(monkeypatch):
    """The NumPy path (torch not importable) gives torch.linspace(...).round() too: every
    (total, n) up to 300 and a spread beyond, n up to 768 (the sampler's largest)."""
    torch = pytest.importorskip("torch")
    def no_torch():
        raise ImportError("no torch")
    monkeypatch.setattr(video, "_torch", no_torch)
    checked = 0
    for total in list(range(2, 300)) + list(range(300, 40000, 397)):
        for n in range(2, min(total, 768) + 1, 1 if total < 300 else 11):
            want = torch.linspace(0, total - 1, n).round().long().tolist()
            assert video._linspace_round(total, n) == want, (total, n)
            checked += 1
    assert checked > 40000


@pytest.mark.parametrize("name", ["vtest.avi", "Megamind.avi", "tree.avi"])
def test_sampled_frames_are_the_frames_at_the_indices(tmp_path, name):
    path = clip(name)
    i, total = video.info(path), video.count(path)
    got = video.frames(path, fps=2.0)
    assert got.indices == video.sample_indices(total, i.fps, fps=2.0)
    assert len(got) == len(got.indices) and got.sample_fps == pytest.approx(len(got) / total * i.fps)
    c = video.frames(path, count=8)
    want = set(got.indices) | set(c.indices)
    every = {k: f for k, f in enumerate(video.frames(path)) if k in want}
    frames = list(got)
    assert len(frames) == len(got.indices)
    for k, f in zip(got.indices, frames):
        assert np.array_equal(f, every[k])
    assert c.indices == video.sample_indices(total, i.fps, count=8) and len(c) == 8
    assert np.array_equal(np.stack(list(c)), np.stack([every[k] for k in c.indices]))


def test_start_end_seconds_and_torch_device():
    path = clip("vtest.avi")
    span = video.frames(path, start=1.0, end=2.0)  # frames 10..20 at 10 frames/s, both ends kept
    assert span.indices == list(range(10, 21)) and len(span) == 11
    every = [f for _, f in zip(range(21), video.frames(path))]
    assert all(np.array_equal(a, every[k]) for k, a in zip(span.indices, span))
    s = video.frames(path, fps=2.0, start=1.0, end=2.0)  # 11 frames at 10/s: 2.2 -> max(2.2, 4) = 4
    assert s.indices == [10 + k for k in video.sample_indices(11, 10.0, fps=2.0)] and len(s) == 4
    torch = pytest.importorskip("torch")
    t = next(iter(video.frames(path, device="cpu")))
    assert isinstance(t, torch.Tensor) and t.dtype == torch.uint8 and np.array_equal(t.numpy(), every[0])


def test_errors_name_the_file(tmp_path):
    with pytest.raises(pxvm.PxIOError, match="no/such.avi"):
        video.info("no/such.avi")
    text = tmp_path / "notes.avi"
    text.write_text("not a video\n" * 10)
    with pytest.raises(pxvm.PxIOError, match="notes.avi"):
        video.frames(str(text))
    path = clip("tree.avi")
    with pytest.raises(pxvm.InvalidProgram, match="is 320x240; sides must be 1..319"):
        video.info(path, max_side=319)
    assert video.info(path, max_side=320).width == 320
    with pytest.raises(pxvm.UsageError, match="tree.avi"):
        video.frames(path, count=70)  # more than its 68 frames
    assert len(video.frames(path, count=68)) == 68
    with pytest.raises(pxvm.UsageError, match="channels"):
        video.frames(path, channels=1)


def test_memory_limit_stacking_frames_names_their_size(tmp_path):
    """Stacking vtest.avi's frames for --npy past --max-memory: the message names the output, the
    frames stacked and their real size (768x576), not "0x0"; nothing is written. 20000000 bytes
    hold 11 frames of 768x576x4 (19464192 bytes), not 12."""
    path = clip("vtest.avi")
    pxs, pxi = tmp_path / "identity.pxs", tmp_path / "identity.pxi"
    pxs.write_text(IDENTITY)
    subprocess.run([os.path.join(BIN, "pxasm"), str(pxs), "-o", str(pxi)], check=True, capture_output=True)
    npy = tmp_path / "frames.npy"
    r = pxrun(str(pxi), "--frames", path, "--npy", "image=%s" % npy, "--max-memory", "20000000", check=False)
    assert r.returncode == 4
    assert ("'--npy image=%s: frames 0..11 of %s stacked, each' is 768x576, 21233664 bytes decoded; the limit is "
            "20000000" % (npy, path)) in r.stderr
    assert not npy.exists()
    pxrun(str(pxi), "--frames", path, "--npy", "image=%s" % npy, "--max-memory", "20000000", "--max-frames", "11")
    assert np.load(npy).shape[0] == 11


RELATIVE = '{"image": [720, 528], "size": "any", "budget": 64, "scheme": "logpolar", "fixation": "relative"}'
GAZE = ["0.5,0.5", "0.25,0.3", "0.8,0.75", "100px,200px", "0.1,0.9", "700px,500px"]


def atlas_frames(tmp_path, plan, path, n, *opts):
    npy = tmp_path / "atlas.npy"
    pxrun(str(plan), "--frames", path, "--max-frames", str(n), "--npy", "atlas=%s" % npy, *opts)
    return np.load(npy)


@pytest.mark.parametrize("name,plan", [("vtest.avi", os.path.join(ROOT, "docs", "plans", "video-vtest.json")),
                                       ("Megamind.avi", None)])
def test_fixations_file_frame_k_equals_fixation_of_line_k(tmp_path, name, plan):
    """Frame k run with --fixations (a moving gaze) has the tokens of a run whose --fixation is
    line k: the video plan of vtest.avi keeps state (DIFF, UPDATE, incremental tokens), Megamind's
    (camera motion) is a relative logpolar plan. The same fixations as a .npy give the same bytes
    (float64 normalized rows and int32 texel rows)."""
    path = clip(name)
    if plan is None:
        plan = tmp_path / "relative.json"
        plan.write_text(RELATIVE)
    gaze = tmp_path / "gaze.txt"
    gaze.write_text("\n".join(GAZE) + "\n")
    got = atlas_frames(tmp_path, plan, path, len(GAZE), "--fixations", str(gaze))
    assert got.shape[0] == len(GAZE)
    for k, line in enumerate(GAZE):
        one = atlas_frames(tmp_path, plan, path, k + 1, "--fixation", line)
        assert np.array_equal(got[k], one[k]), (k, line)
    assert not np.array_equal(got[0], got[1])  # the gaze moved
    norm = tmp_path / "norm.npy"  # the normalized lines as float64, the texel lines apart
    np.save(norm, np.array([[0.5, 0.5], [0.25, 0.3]], dtype=np.float64))
    assert np.array_equal(atlas_frames(tmp_path, plan, path, 2, "--fixations", str(norm)), got[:2])
    texels = tmp_path / "texels.npy"
    np.save(texels, np.array([[100, 200], [700, 500]], dtype=np.int32))
    t = atlas_frames(tmp_path, plan, path, 2, "--fixations", str(texels))
    assert np.array_equal(t[0], atlas_frames(tmp_path, plan, path, 1, "--fixation", "100px,200px")[0])


def test_fixations_file_errors_name_the_file_line_and_counts(tmp_path):
    path = clip("vtest.avi")
    plan = os.path.join(ROOT, "docs", "plans", "video-vtest.json")
    gaze = tmp_path / "gaze.txt"
    gaze.write_text("0.5,0.5\n0.4,0.4\n0.3,0.3\n")
    out = tmp_path / "atlas.npy"
    # 3 lines for 3 frames: accepted; for 4 frames: a usage error naming both counts, nothing written
    pxrun(plan, "--frames", path, "--max-frames", "3", "--fixations", str(gaze), "--npy", "atlas=%s" % out)
    out.unlink()
    r = pxrun(plan, "--frames", path, "--max-frames", "4", "--fixations", str(gaze), "--npy", "atlas=%s" % out,
              check=False)
    assert r.returncode == 2 and not out.exists()
    assert "--fixations '%s' has 3 lines (one per frame) and '%s' has more frames: frame 3 has none" % (gaze, path) \
        in r.stderr
    gaze.write_text("0.5,0.5\n0.4;0.4\n")
    r = pxrun(plan, "--frames", path, "--fixations", str(gaze), check=False)
    assert r.returncode == 2 and "--fixations '%s' line 2 ('0.4;0.4'): expected X,Y" % gaze in r.stderr
    gaze.write_text("0.5,0.5\n768px,576px\n769px,10px\n")  # the frame's far corner is in, one texel past is not
    r = pxrun(plan, "--frames", path, "--max-frames", "3", "--fixations", str(gaze), check=False)
    assert r.returncode == 2 and "--fixations '%s' line 3 (frame 2)" % gaze in r.stderr and "769" in r.stderr
    r = pxrun(plan, "--frames", path, "--fixations", str(gaze), "--fixation", "0.5,0.5", check=False)
    assert r.returncode == 2 and "--fixations and --fixation both set the first input register" in r.stderr
    r = pxrun(plan, "--in", "image=%s" % os.path.join(ROOT, "programs", "data", "chelsea.png"), "--fixations",
              str(gaze), check=False)
    assert r.returncode == 2 and "--fixations gives one fixation per frame: it needs --frames" in r.stderr
    bad = tmp_path / "bad.npy"
    np.save(bad, np.zeros((4, 3), dtype=np.float32))
    r = pxrun(plan, "--frames", path, "--fixations", str(bad), check=False)
    assert r.returncode == 2 and "--fixations '%s': a .npy of fixations must be an array (F, 2)" % bad in r.stderr
    r = pxrun(plan, "--frames", path, "--fixations", str(tmp_path / "none.txt"), check=False)
    assert r.returncode == 1 and "cannot read" in r.stderr and "none.txt" in r.stderr


ANY_VIDEO = {"image": [768, 576], "size": "any", "budget": 273, "scheme": "logpolar", "fixation": "relative",
             "video": 16}


@pytest.mark.parametrize("name,size", [("Megamind.avi", (720, 528)), ("tree.avi", (320, 240)),
                                       ("vtest.avi", (768, 576))])
def test_any_size_video_plan_equals_the_plan_at_the_frame_size(tmp_path, name, size):
    """One video plan of "size": "any" for every clip: compiled at the clip's frame size, its
    --npy atlas, --changed and --geometry bytes are those of the plan written for that size."""
    import json
    path = clip(name)
    anyp, fixed = tmp_path / "any.json", tmp_path / "fixed.json"
    anyp.write_text(json.dumps(ANY_VIDEO))
    fixed.write_text(json.dumps(dict({k: v for k, v in ANY_VIDEO.items() if k != "size"}, image=list(size))))
    got = {}
    for tag, plan in (("any", anyp), ("fixed", fixed)):
        outs = [tmp_path / ("%s-%s.npy" % (tag, o)) for o in ("atlas", "changed", "geometry")]
        pxrun(str(plan), "--fixation", "0.4,0.6", "--frames", path, "--max-frames", "24", "--npy",
              "atlas=%s" % outs[0], "--changed", str(outs[1]), "--geometry", "atlas=%s" % outs[2])
        got[tag] = [o.read_bytes() for o in outs]
    assert got["any"] == got["fixed"]
    assert np.load(tmp_path / "any-changed.npy")[1:].sum() < np.load(tmp_path / "any-changed.npy")[0].sum() * 23


def test_any_size_video_plan_bounds_name_the_frame(tmp_path):
    """The plan's bounds hold for the frame size: max 720 takes Megamind.avi's 720x528 frames, max
    719 refuses them with the any-size words, naming the frame and the file; nothing written."""
    import json
    path = clip("Megamind.avi")
    plan, out = tmp_path / "any.json", tmp_path / "atlas.npy"
    plan.write_text(json.dumps(dict(ANY_VIDEO, image=[640, 480], bounds={"min": 16, "max": 720})))
    pxrun(str(plan), "--fixation", "0.5,0.5", "--frames", path, "--max-frames", "2", "--npy", "atlas=%s" % out)
    assert np.load(out).shape[0] == 2
    out.unlink()
    plan.write_text(json.dumps(dict(ANY_VIDEO, image=[640, 480], bounds={"min": 16, "max": 719})))
    r = pxrun(str(plan), "--fixation", "0.5,0.5", "--frames", path, "--npy", "atlas=%s" % out, check=False)
    assert r.returncode != 0 and "720x528" in r.stderr and "frame 0 of '%s'" % path in r.stderr, r.stderr
    assert not out.exists()
    r = pxrun(str(plan), "--fixation", "0.5,0.5", "--in", "image=%s" % os.path.join(ROOT, "programs", "data",
                                                                                    "chelsea.png"), check=False)
    assert r.returncode == 8 and '"size": "any" is for still images' in r.stderr  # no frames: the parser's words


def test_stream_of_an_any_size_video_plan_equals_pxrun(tmp_path):
    """Python end to end on Megamind.avi (camera motion): pxvm.video's frames pushed through a
    Stream of the any-size video plan (video.plan_program at the clip's size) give pxrun's tokens
    and changed masks with --fixations, frame by frame; a size outside the plan's bounds is a
    UsageError naming them."""
    import json
    path = clip("Megamind.avi")
    gaze = [(0.5, 0.5), (0.3, 0.4), (0.7, 0.6), (0.5, 0.5), (0.2, 0.8), (0.9, 0.1)]
    (tmp_path / "gaze.txt").write_text("".join("%r,%r\n" % g for g in gaze))
    (tmp_path / "any.json").write_text(json.dumps(ANY_VIDEO))
    atlas, changed = tmp_path / "atlas.npy", tmp_path / "changed.npy"
    pxrun(str(tmp_path / "any.json"), "--frames", path, "--max-frames", str(len(gaze)), "--fixations",
          str(tmp_path / "gaze.txt"), "--npy", "atlas=%s" % atlas, "--changed", str(changed))
    want, want_changed = np.load(atlas), np.load(changed)
    prog = video.plan_program(ANY_VIDEO, path)
    assert prog.inputs[0].w == 720 and prog.inputs[0].h == 528
    stream = pxvm.Runner(prog, executor="cpu").stream()
    for k, (frame, g) in enumerate(zip(video.frames(path), gaze)):
        tokens, ch = stream.push(frame, fixation=g)
        assert np.array_equal(tokens, want[k]), k
        assert np.array_equal(ch, want_changed[k].astype(bool)), k
    with pytest.raises(pxvm.UsageError, match="720x528 .*outside the bounds"):
        video.plan_program(dict(ANY_VIDEO, image=[640, 480], bounds={"min": 16, "max": 719}), path)
    assert video.plan_program(dict(ANY_VIDEO, image=[640, 480], bounds={"min": 16, "max": 720}), path).inputs[0].w == 720
