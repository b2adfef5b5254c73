"""Edges that let mutants of tests/mutate/mutants.txt survive the rest of the suite (`make mutate`):
the tools' strict numbers, pxbatch's marker comparison, and the Python layer's layouts, dtypes,
slot lists and dirty rectangles. Each test names the mutants it kills."""
import json
import os
import shutil
import subprocess

import numpy as np
import pytest

import pxvm
from conftest import BIN, PHOTO, ROOT

PXRUN, PXASM, PXBATCH = (os.path.join(BIN, t) for t in ("pxrun", "pxasm", "pxbatch"))


def tool(*cmd, stdin=subprocess.DEVNULL):
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, cwd=ROOT, stdin=stdin, timeout=120)
    return r.returncode, r.stderr.split("\n", 1)[0]


def test_pxrun_numbers_and_levels_are_strict(tmp_path):
    """pxrun-u64-trailing, pxrun-level-range, frames-size-zero."""
    base = [PXRUN, "programs/pyramid.pxi", "--in", "image=" + PHOTO]
    assert tool(*base, "--threads", "4")[0] == 0
    assert tool(*base, "--threads", "4x") == (2, "pxrun: usage: bad option or value: --threads 4x")
    assert tool(*base, "--max-steps", "10 ") == (2, "pxrun: usage: bad option or value: --max-steps 10 ")
    out = tmp_path / "l.png"
    assert tool(*base, "--out", "image@8=%s" % out)[0] == 0 and out.exists()
    assert tool(*base, "--out", "image@16=%s" % out) == (2, "pxrun: usage: --out takes SLOT=FILE.png or SLOT@LEVEL=FILE.png")
    for size in ("0x10", "10x0", "65536x1"):
        assert tool(*base[:2], "--frames", "-", "--frame-size", size) == (2, "pxrun: usage: bad option or value: --frame-size " + size)


def test_pxasm_limits_are_not_negative(tmp_path):
    """pxasm-u64-negative: '-1' is refused, not wrapped to 2^64 - 1."""
    out = tmp_path / "d.pxi"
    assert tool(PXASM, "--max-memory", "1048576", "programs/dot_test.pxs", "-o", out)[0] == 0
    for v in ("-1", "-0"):
        assert tool(PXASM, "--max-memory", v, "programs/dot_test.pxs", "-o", out) == (
            2, "pxasm: bad option or value: --max-memory " + v)


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    """6 PNG crops of the photo (32x24) and a plan's program (4 patches)."""
    from PIL import Image
    root = tmp_path_factory.mktemp("mut")
    (root / "img").mkdir()
    photo = pxvm.load_image(PHOTO)[:, :, :3]
    for i in range(6):
        Image.fromarray(photo[20 * i:20 * i + 24, 30 * i:30 * i + 32]).save(root / "img" / ("%d.png" % i))
    pxvm.Program.from_plan({"image": [32, 24], "budget": 4, "scheme": "grid", "levels": 3}).save(root / "p.pxi")
    return root


def pxbatch(root, out, *extra):
    # the defaults an extra option replaces (pxbatch refuses an option given twice)
    defaults = [a for o, v in (("--shard-size", "2"), ("--executor", "cpu"), ("--threads", "1")) if o not in extra
                for a in (o, v)]
    r = subprocess.run([PXBATCH, str(root / "p.pxi"), "--in-dir", str(root / "img"), "--out", str(out),
                        *defaults, *extra],
                       capture_output=True, text=True, timeout=120)
    return r.returncode, r.stderr


def test_pxbatch_numbers_past_2_64(batch, tmp_path):
    """pxbatch-u64-overflow: 2^64 + 1 is refused, not wrapped to 1 (nor 2^64 to 0)."""
    for v in ("18446744073709551617", "18446744073709551616", "99999999999999999999"):
        rc, err = pxbatch(batch, tmp_path / "o", "--threads", v)
        assert rc == 2 and "--threads takes a whole number" in err, err
    assert not (tmp_path / "o").exists()
    rc, err = pxbatch(batch, tmp_path / "o", "--max-memory", "9223372036854775807")
    assert rc == 0, err


def test_pxbatch_marker_comparison_sees_keys_and_shards_past_the_job(batch, tmp_path):
    """pxbatch-job-diff-dropped: a marker's job key that this run lacks is a difference; a marker
    of the shard just past the job's last does not parse (so pxbatch-shard-past-end, the check
    after it, is equivalent)."""
    out = tmp_path / "o"
    assert pxbatch(batch, out)[0] == 0
    assert pxbatch(batch, out)[0] == 0  # the same job: skipped
    saved = tmp_path / "saved"
    shutil.copytree(out, saved)
    m = json.loads((out / "shard-00000.json").read_text())
    m["job"]["threshold"] = 7  # a key this pxbatch does not write
    (out / "shard-00000.json").write_text(json.dumps(m))
    rc, err = pxbatch(batch, out)
    assert rc == 2 and "holds the shards of another job" in err and "threshold" in err, err
    shutil.rmtree(out)
    shutil.copytree(saved, out)
    m = json.loads((out / "shard-00002.json").read_text())
    m["shard"] = 3  # 6 inputs in shards of 2: 0..2
    (out / "shard-00003.json").write_text(json.dumps(m))
    rc, err = pxbatch(batch, out)
    assert rc == 3 and "shard-00003: its marker: shard 3 is past the job's 6 inputs" in err, err


COPY = """.slot image input 3x3
.slot tmp scratch 3x3
.slot out output 3x3
SAMPLE src=image dst=tmp mode=nearest size=(3,3) center=(1.5,1.5) step=1 lod=0
SAMPLE src=tmp dst=out mode=nearest size=(3,3) center=(1.5,1.5) step=1 lod=0
HALT
"""


def test_square_three_channel_array_is_hwc_first():
    """py-hwc-first: an array that is (H, W, C) and (C, H, W) at once is read as HWC."""
    r = pxvm.Runner(pxvm.Program.assemble(COPY), executor="cpu")
    x = np.arange(27, dtype=np.uint8).reshape(3, 3, 3) * 9
    out = r.run(x)["out"]
    assert np.array_equal(out[:, :, :3], x) and (out[:, :, 3] == 255).all()
    assert np.array_equal(r.run(np.ascontiguousarray(x.transpose(2, 0, 1)))["out"][:, :, :3], x.transpose(2, 0, 1))


def test_only_uint8_images():
    """py-dtype: int8 (and bool) arrays are refused, as are wider ones."""
    r = pxvm.Runner(pxvm.Program.assemble(COPY), executor="cpu")
    for dt in (np.int8, np.bool_, np.uint16):
        with pytest.raises(TypeError, match="uint8"):
            r.run(np.zeros((3, 3, 3), dt))


def test_inputs_are_the_input_slots():
    """py-inputs: Program.inputs lists input slots only (not scratch), outputs output slots."""
    p = pxvm.Program.assemble(COPY)
    assert [s.name for s in p.inputs] == ["image"]
    assert [s.name for s in p.outputs] == ["out"]


def test_stream_dirty_rectangle_is_x_y_w_h():
    """py-stream-rect: push(dirty=[(x, y, w, h)]) marks the tiles under x, y (not y, x)."""
    plan = {"image": [64, 48], "budget": 12, "scheme": "grid", "levels": 3, "video": 0}
    prog = pxvm.Program.from_plan(plan)
    s = pxvm.Runner(prog, executor="cpu").stream()
    ref = pxvm.Runner(prog, executor="cpu")
    photo = pxvm.load_image(PHOTO)
    a = np.ascontiguousarray(photo[100:148, 200:264])
    s.push(a)
    b = a.copy()
    b[0:8, 40:56] = 255 - b[0:8, 40:56]  # tiles (2, 0) and (3, 0)
    p, changed = s.push(b, dirty=[(40, 0, 16, 8)])
    assert np.array_equal(p, ref.patches(b))
    assert changed.any() and not changed.all()


def test_gen_spec_refuses_what_it_cannot_generate(tmp_path):
    """Coverage (tools/gen_spec.c): no template, an unreadable one, an opcode the table lacks."""
    gen = os.path.join(BIN, "gen_spec")
    assert tool(gen) == (2, "usage: gen_spec SPEC.in.md > SPEC.md")
    assert tool(gen, tmp_path / "missing.md")[0] == 1
    t = tmp_path / "t.md"
    t.write_text("# x\n@OPCODE HALT@\n")
    assert tool(gen, t)[0] == 0
    t.write_text("@OPCODE NOPE@\n")
    assert tool(gen, t) == (1, "gen_spec: no opcode NOPE")
