"""The Python layer on the executor under test (CPU in CI): outputs equal pxrun's byte for byte,
batch == loop, every input layout gives the same bytes, every error class with its message."""
import glob
import os
import re

import numpy as np
import pytest

import pxvm
from conftest import EXECUTOR, PHOTO, ROOT, fnv1a64, golden_programs, pxrun, random_images


def hash_report(runner):
    """pxrun --hash's lines, computed from the runner's own reads."""
    lines = []
    for s in runner.program.slots:
        for level in range(s.levels):
            img = runner.read(s.index, level)[0]
            lines.append("%s L%d %dx%d %016x" % (s.name, level, img.shape[1], img.shape[0], fnv1a64(img.tobytes())))
    return lines


@pytest.mark.parametrize("path,ins", golden_programs(), ids=lambda v: os.path.basename(v) if isinstance(v, str) else "")
def test_every_program_equals_pxrun_hash(path, ins):
    args = [path, "--hash", "--executor", EXECUTOR]
    for slot, img in ins.items():
        args += ["--in", "%s=%s" % (slot, img)]
    want = pxrun(*args).stdout.split("\n")
    runner = pxvm.Runner(pxvm.Program.load(path), executor=EXECUTOR)
    runner.run(**{slot: pxvm.load_image(img) for slot, img in ins.items()})
    assert hash_report(runner) == [l for l in want if l]


def test_patches_equal_pxrun_npy(tmp_path, foveate, photo):
    npy = tmp_path / "p.npy"
    pxrun(os.path.join(ROOT, "programs", "foveate273.pxi"), "--in", "image=" + PHOTO, "--npy", "atlas=%s" % npy,
          "--executor", EXECUTOR)
    got = pxvm.Runner(foveate, executor=EXECUTOR).patches(photo)
    assert got.shape == (273, 16, 16, 4) and got.dtype == np.uint8
    assert np.array_equal(got, np.load(npy))


def test_run_returns_the_atlas_and_patches_are_its_tiles(foveate, photo):
    r = pxvm.Runner(foveate, executor=EXECUTOR)
    atlas = r.run(image=photo)["atlas"]
    assert atlas.shape == (272, 272, 4)
    tiles = atlas.reshape(17, 16, 17, 16, 4).transpose(0, 2, 1, 3, 4).reshape(289, 16, 16, 4)[:273]
    assert np.array_equal(r.patches(photo), tiles)
    assert np.array_equal(r.run(photo)["atlas"], atlas)  # positional for the one input


def test_batch_equals_loop_of_singles(foveate):
    rng = np.random.default_rng(1)
    imgs = random_images(rng, 5, 300, 451)
    r = pxvm.Runner(foveate, executor=EXECUTOR)
    singles = np.stack([r.patches(x) for x in imgs])
    assert np.array_equal(r.patches_batch(np.stack(imgs)), singles)
    assert np.array_equal(r.patches_batch(imgs), singles)  # a list: bound item by item, no stacking
    atlases = r.run_batch(np.stack(imgs))["atlas"]
    assert atlases.shape == (5, 272, 272, 4)
    assert np.array_equal(atlases, np.stack([r.run(x)["atlas"] for x in imgs]))
    assert np.array_equal(r.patches_batch(np.stack(imgs[:1])), singles[:1])  # B = 1 keeps its axis


def test_batch_on_every_program_equals_loop():
    rng = np.random.default_rng(2)
    for path, ins in golden_programs():
        prog = pxvm.Program.load(path)
        r = pxvm.Runner(prog, executor=EXECUTOR)
        if not prog.inputs:
            continue
        s = prog.inputs[0]
        imgs = random_images(rng, 3, s.h, s.w)
        loop = [r.run(**{s.name: x}) for x in imgs]
        batch = r.run_batch(**{s.name: np.stack(imgs)})
        for o in prog.outputs:
            assert np.array_equal(batch[o.name], np.stack([d[o.name] for d in loop])), (path, o.name)


def test_every_layout_gives_the_same_bytes(foveate, photo):
    import torch
    r = pxvm.Runner(foveate, executor=EXECUTOR)
    rgb = np.ascontiguousarray(photo[:, :, :3])
    want_rgb = r.patches(np.concatenate([rgb, np.full(rgb.shape[:2] + (1,), 255, np.uint8)], axis=2))
    strided = np.zeros((600, 902, 3), np.uint8)
    strided[::2, ::2] = rgb
    layouts = {
        "hwc rgb": rgb,
        "chw rgb": np.ascontiguousarray(rgb.transpose(2, 0, 1)),
        "chw view": rgb.transpose(2, 0, 1),
        "strided rows and pixels": strided[::2, ::2],
        "bgr reversed channels": rgb[:, :, ::-1][:, :, ::-1],
        "torch hwc": torch.from_numpy(rgb),
        "torch chw permuted": torch.from_numpy(rgb).permute(2, 0, 1),
        "torch chw contiguous": torch.from_numpy(rgb).permute(2, 0, 1).contiguous(),
    }
    for name, x in layouts.items():
        assert np.array_equal(r.patches(x), want_rgb), name
    grey = np.ascontiguousarray(photo[:, :, 1])
    want_grey = r.patches(np.stack([grey, grey, grey, np.full_like(grey, 255)], axis=2))
    for name, x in {"hw": grey, "hw1": grey[:, :, None], "1hw": grey[None], "torch hw": torch.from_numpy(grey)}.items():
        assert np.array_equal(r.patches(x), want_grey), name
    assert np.array_equal(r.patches(torch.from_numpy(photo)), r.patches(photo))
    out = r.patches(torch.from_numpy(photo))
    assert isinstance(out, torch.Tensor) and out.device.type == "cpu"  # torch in, torch out (issue 41)


def test_out_receives_the_patches(foveate, photo):
    r = pxvm.Runner(foveate, executor=EXECUTOR)
    buf = np.zeros((273, 16, 16, 4), np.uint8)
    assert r.patches(photo, out=buf) is buf
    assert np.array_equal(buf, r.patches(photo))
    many = np.zeros((2, 273, 16, 16, 4), np.uint8)
    r.patches_batch([photo, photo], out=many)
    assert np.array_equal(many[1], buf)
    with pytest.raises(ValueError, match="C-contiguous uint8 host array of shape"):
        r.patches(photo, out=np.zeros((273, 16, 16, 3), np.uint8))


def test_inputs_are_not_modified_and_outputs_are_new(foveate, photo):
    r = pxvm.Runner(foveate, executor=EXECUTOR)
    before = photo.copy()
    a, b = r.patches(photo), r.patches(photo)
    assert np.array_equal(photo, before)
    assert not np.shares_memory(a, b)


def test_pyramid_is_the_pyramid_rule(photo):
    levels = pxvm.pyramid(photo)
    assert [l.shape[:2] for l in levels][:3] == [(300, 451), (150, 225), (75, 112)]
    assert len(levels) == 9 and levels[-1].shape == (1, 1, 4)
    a = levels[0].astype(np.uint32)
    want = (a[0:300:2, 0:450:2] + a[1:300:2, 0:450:2] + a[0:300:2, 1:450:2] + a[1:300:2, 1:450:2] + 2) >> 2
    assert np.array_equal(levels[1], want.astype(np.uint8))
    assert np.array_equal(levels[0], photo)


def test_program_sources_round_trip(foveate, tmp_path):
    text = foveate.disassemble()
    again = pxvm.assemble(text)
    assert again.to_png() == foveate.to_png()
    plan = {"image": [451, 300], "budget": 273, "scheme": "grid", "m0": 1, "e0": 0.5, "scale": 1, "levels": 5}
    assert pxvm.Program.from_plan(plan).to_png() == foveate.to_png()
    (tmp_path / "plan.json").write_text(__import__("json").dumps(plan))
    assert pxvm.Program.from_plan(str(tmp_path / "plan.json")).to_png() == foveate.to_png()
    foveate.save(tmp_path / "f.pxi")
    assert pxvm.Program.load(tmp_path / "f.pxi").to_png() == foveate.to_png()
    assert [s.name for s in foveate.slots] == ["prog", "image", "atlas"]
    assert foveate.slot("atlas").patch_count == 273


def test_jpeg_input_decodes_like_libjpeg_and_pxrun(tmp_path, foveate, photo):
    from PIL import Image
    for mode, kw in (("RGB", {"quality": 90}), ("RGB", {"quality": 75, "progressive": True}), ("L", {})):
        path = str(tmp_path / ("x-%s-%d.jpg" % (mode, len(kw))))
        Image.fromarray(photo[:, :, :3]).convert(mode).save(path, **kw)
        img = pxvm.load_image(path)
        ref = np.asarray(Image.open(path).convert("RGBA"))  # Pillow: the same libjpeg-turbo, same defaults
        assert img.shape == (300, 451, 4) and np.array_equal(img, ref), mode
        npy = tmp_path / "j.npy"
        pxrun(os.path.join(ROOT, "programs", "foveate273.pxi"), "--in", "image=" + path, "--npy", "atlas=%s" % npy,
              "--executor", EXECUTOR)
        assert np.array_equal(pxvm.Runner(foveate, executor=EXECUTOR).patches(img), np.load(npy))


def test_jpeg_limits_apply_before_decoding(tmp_path, photo):
    from PIL import Image
    path = str(tmp_path / "big.jpg")
    Image.fromarray(photo[:, :, :3]).save(path)
    with pytest.raises(pxvm.InvalidProgram, match=r"is 451x300; sides must be 1\.\.100"):
        pxvm.load_image(path, max_side=100)
    with pytest.raises(pxvm.InvalidProgram, match="541200 bytes decoded; the limit is 100000"):
        pxvm.load_image(path, max_memory=100000)
    bad = tmp_path / "trunc.jpg"
    bad.write_bytes(open(path, "rb").read()[:200])
    with pytest.raises(pxvm.Malformed, match="corrupt or unsupported JPEG"):
        pxvm.load_image(str(bad))
    other = tmp_path / "x.gif"
    other.write_bytes(b"GIF89a" + bytes(100))
    with pytest.raises(pxvm.Malformed, match="is a GIF file, whatever its name: pxvm decodes PNG and JPEG"):
        pxvm.load_image(str(other))


# ---- every error class, with pxrun's words ------------------------------------------------------

def pxrun_message(*args):
    r = pxrun(*args, check=False)
    assert r.returncode != 0
    return r.stderr.strip().split("\n")[0].replace("pxrun: ", "", 1)


def test_error_classes_and_messages(tmp_path, foveate, photo):
    bad = tmp_path / "bad.pxi"
    bad.write_bytes(b"not a png at all")
    with pytest.raises(pxvm.Malformed) as e:
        pxvm.Program.load(str(bad))
    assert str(e.value) == pxrun_message(str(bad))

    # a valid PNG whose first instruction names a slot that does not exist
    import io
    from PIL import Image
    prog = pxvm.assemble(".width 16\n.slot image input 8x8\nPYRAMID image\nHALT\n")
    im = Image.open(io.BytesIO(prog.to_png())).convert("RGBA")
    r_, g_, b_, a_ = im.getpixel((13, 0))
    im.putpixel((13, 0), (r_, 7, b_, a_))
    bad_prog = tmp_path / "bad-operand.pxi"
    im.save(bad_prog, format="PNG")
    with pytest.raises(pxvm.InvalidProgram) as e:
        pxvm.Program.from_png(bad_prog.read_bytes(), name=str(bad_prog))
    assert "pixel (13,0): instruction 0 (PYRAMID): operand slot = 7" in str(e.value)
    assert str(e.value) == pxrun_message(str(bad_prog))

    r = pxvm.Runner(foveate, executor=EXECUTOR)
    with pytest.raises(pxvm.Unlinkable) as e:
        r.patches(photo[:200])
    assert "a 451x200 image cannot be bound to slot 1 ('image'), which is 451x300" in str(e.value)
    small = tmp_path / "small.png"
    from PIL import Image
    Image.fromarray(photo[:200]).save(small)
    # pxrun's words, then the file it read (Python binds an array: no file to name)
    assert pxrun_message(os.path.join(ROOT, "programs", "foveate273.pxi"), "--in", "image=%s" % small,
                         "--executor", EXECUTOR) == str(e.value) + " (file '%s'; --policy stretch or fit resizes it)" % small
    with pytest.raises(pxvm.Unlinkable, match="not bound"):
        r.run()

    trap = pxvm.Program.load(os.path.join(ROOT, "programs", "foveate273.pxi"), max_steps=2)
    with pytest.raises(pxvm.Trap, match=r"step budget of 2 instructions exhausted before instruction 2"):
        pxvm.Runner(trap, executor=EXECUTOR).patches(photo)

    with pytest.raises(pxvm.PxIOError, match="cannot read"):
        pxvm.Program.load(str(tmp_path / "missing.pxi"))
    with pytest.raises(OSError):
        pxvm.load_image(str(tmp_path / "missing.png"))

    with pytest.raises(pxvm.UsageError, match="no slot 'nope'"):
        r.run(nope=photo)
    with pytest.raises(ValueError):
        r.run(nope=photo)
    with pytest.raises(ValueError, match=r"with C in 1, 3, 4; got shape \(300, 451, 2\)"):
        r.patches(np.zeros((300, 451, 2), np.uint8))
    with pytest.raises(ValueError, match=r"with C in 1, 3, 4"):
        r.patches(np.zeros((5, 300, 451, 4), np.uint8))
    with pytest.raises(TypeError, match="uint8"):
        r.patches(photo.astype(np.int16))

    with pytest.raises(pxvm.AssemblyError, match=r"<text>:1:1: unknown mnemonic 'BOGUS'"):
        pxvm.assemble("BOGUS\n")
    with pytest.raises(pxvm.PlanError, match="scheme"):
        pxvm.Program.from_plan({"image": [100, 100], "budget": 10, "scheme": "nonsense"})

    if EXECUTOR == "cpu":
        try:
            pxvm.Runner(foveate, executor="cuda")
        except pxvm.Unavailable as e:  # no GPU here, or the executor not built: the reason is named
            assert str(e).startswith("unavailable: ") and str(e) == pxrun_message(
                os.path.join(ROOT, "programs", "dot_test.pxi"), "--executor", "cuda")
        with pytest.raises(pxvm.UsageError):
            pxvm.Runner(foveate, executor="tpu")


def test_random_bytes_never_crash(tmp_path):
    rng = np.random.default_rng(3)
    for i in range(50):
        data = bytes(rng.integers(0, 256, size=int(rng.integers(0, 400)), dtype=np.uint8))
        if i % 2:
            data = b"\x89PNG\r\n\x1a\n" + data
        with pytest.raises(pxvm.Error):
            pxvm.Program.from_png(data)


def test_the_library_exports_exactly_the_public_header():
    header = open(os.path.join(ROOT, "include", "pxvm.h")).read()
    declared = set(re.findall(r"^[a-z_ ]*[ *](pxvm_[a-z_]+)\(", header, re.M))
    exported = set(re.findall(r"^\s+(pxvm_[a-z_]+);", open(os.path.join(ROOT, "api", "libpxvm.map")).read(), re.M))
    assert declared == exported
    assert pxvm.library_version == "1.0.0"


def readme_python_blocks():
    """The Python blocks of README.md, then of the docs/ pages (where the longer examples live)."""
    pages = [os.path.join(ROOT, "README.md")] + sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")))
    return [b for p in pages for b in re.findall(r"```python\n(.*?)```", open(p).read(), re.S)]


def test_readme_quick_start_runs(monkeypatch):
    block = next(b for b in readme_python_blocks() if "pxvm.Runner(pxvm.Program.load" in b)
    monkeypatch.chdir(ROOT)
    env = {}
    exec(block, env)
    assert env["patches"].shape == (273, 16, 16, 4)


def test_bad_shapes_and_unhashable_names_are_usage_errors():
    """Wrong image shapes, a list for a name, an empty ragged batch: UsageError (a ValueError), never a
    bare ValueError or an unhashable-type TypeError; a wrong dtype stays the documented TypeError."""
    r = pxvm.Runner(os.path.join(ROOT, "programs", "foveate273.pxi"), executor="cpu")
    image = np.zeros((300, 451, 3), np.uint8)
    for shape in [(300, 451, 2), (300, 451, 4, 1)]:
        with pytest.raises(pxvm.UsageError, match="images are"):
            r.tokens(np.zeros(shape, np.uint8))
    with pytest.raises(pxvm.UsageError, match="layout"):
        r.tokens(image, layout=["nchw"])
    with pytest.raises(pxvm.UsageError, match="dtype"):
        r.tokens(image, dtype=["float32"])
    with pytest.raises(pxvm.UsageError, match="images are"):
        pxvm.pyramid(np.zeros((4, 4, 4, 1), np.uint8))
    with pytest.raises(pxvm.UsageError, match="at least one image"):
        uniform = pxvm.Runner(pxvm.Program.from_plan(open(os.path.join(ROOT, "programs", "uniform.json")).read()))
        uniform.patches_batch([], policy="dynamic")
    with pytest.raises(TypeError, match="uint8"):
        r.tokens(np.zeros((300, 451, 3), np.float32))


def test_executor_names_a_cuda_device_as_torch_does():
    """executor="cuda:N" (or a torch.device) is executor cuda on device N; with device= naming
    another it is refused naming both, and "cuda:x" names no device (words of the library's)."""
    from pxvm.runner import _executor_device
    assert _executor_device("cuda:1", 0) == ("cuda", 1)
    assert _executor_device("cuda:1", 1) == ("cuda", 1)
    assert _executor_device("cuda", 2) == ("cuda", 2)
    assert _executor_device("cpu", 0) == ("cpu", 0)
    with pytest.raises(pxvm.UsageError, match="name two devices"):
        _executor_device("cuda:1", 2)
    with pytest.raises(pxvm.UsageError, match="takes a device number"):
        _executor_device("cuda:x", 0)
    torch = pytest.importorskip("torch")
    assert _executor_device(torch.device("cuda", 3), 0) == ("cuda", 3)
    assert _executor_device(torch.device("cpu"), 0) == ("cpu", 0)
