"""Edges of any-size programs through pxrun and the Python package (isa/SPEC.md sections 2 and 6):
the pixel bound at exactly its value, the level chain `--out SLOT@L` of an any-size slot is
checked against, which registers pxrun's --fixation sets when a program's input registers are
not 0..K-1, and programs with two any-size inputs."""
import os
import subprocess

import numpy as np
import pytest

from conftest import BIN, EXECUTOR, pxrun
import pxvm

# 'image' any-size (reference 16x16, at most 4899 pixels = 69x71; 4900 = 70x70 one more),
# sampled into two tokens
PIXELS_SRC = """.width 16
.slot image input 16x16 any pixels=4899
.slot atlas output 8x4 patches=4x4x2
PYRAMID image
SAMPLE src=image dst=atlas mode=nearest dst_x=0 dst_y=0 w=4 h=4 cu=2 cv=2 du=1 dv=1 lod=0
SAMPLE src=image dst=atlas mode=nearest dst_x=4 dst_y=0 w=4 h=4 cu=10 cv=10 du=1 dv=1 lod=0
HALT
"""

# input registers {2, 5}: each SAMPLE at its register's position
REGS_SRC = """.width 16
.slot image input 16x16
.slot atlas output 8x4 patches=4x4x2
SAMPLE src=image dst=atlas mode=nearest@f2 dst_x=0 dst_y=0 w=4 h=4 cu=0 cv=0 du=1 dv=1 lod=0
SAMPLE src=image dst=atlas mode=nearest@f5 dst_x=4 dst_y=0 w=4 h=4 cu=0 cv=0 du=1 dv=1 lod=0
HALT
"""

# two any-size inputs: a (reference 16x16), b (8x8, sides at most 64)
TWO_SRC = """.width 16
.slot a input 16x16 any
.slot b input 8x8 any max=64
.slot atlas output 8x4 patches=4x4x2
PYRAMID a
PYRAMID b
SAMPLE src=a dst=atlas mode=linear dst_x=0 dst_y=0 w=4 h=4 cu=8 cv=8 du=1 dv=1 lod=0
SAMPLE src=b dst=atlas mode=linear dst_x=4 dst_y=0 w=4 h=4 cu=4 cv=4 du=1 dv=1 lod=0
HALT
"""

FOV_ANY = os.path.join(os.path.dirname(__file__), "..", "..", "programs", "foveate273_any.pxi")


def pxi(tmp_path, name, src):
    """The program assembled by pxasm into tmp_path/name.pxi."""
    s = tmp_path / (name + ".pxs")
    s.write_text(src)
    out = str(tmp_path / (name + ".pxi"))
    r = subprocess.run([os.path.join(BIN, "pxasm"), str(s), "-o", out], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return out


def png(tmp_path, name, w, h, seed=1):
    from PIL import Image
    path = str(tmp_path / (name + ".png"))
    Image.fromarray(np.random.RandomState(seed).randint(0, 256, (h, w, 3), dtype=np.uint8)).save(path)
    return path


def geometry(tmp_path, args):
    g = str(tmp_path / "g.npy")
    pxrun(*args, "--geometry", "atlas=" + g)
    return np.load(g)


# ---- U-BIND-4's pixel bound at exactly its value (Python's size= and a native bind) ----------

def test_size_takes_exactly_the_max_pixels(tmp_path):
    prog = pxvm.Program.load(pxi(tmp_path, "pixels", PIXELS_SRC))
    run = pxvm.Runner(prog, executor=EXECUTOR)
    img = np.random.RandomState(2).randint(0, 256, (50, 50, 3), dtype=np.uint8)
    for w, h in ((69, 71), (71, 69)):  # exactly 4899 pixels
        run.run(img, size=(w, h))
        assert run.slot_size("image") == (w, h)
        native = np.random.RandomState(w).randint(0, 256, (h, w, 3), dtype=np.uint8)
        run.run(native)  # bound at its own size
        assert run.slot_size("image") == (w, h)
    with pytest.raises(pxvm.UsageError, match="a 70x70 image cannot be bound to slot 1 .'image'.: it takes "
                                              "1x1 .. 16384x16384, at most 4899 pixels"):
        run.run(img, size=(70, 70))
    with pytest.raises(pxvm.Unlinkable, match="a 70x70 image cannot be bound .*at most 4899 pixels"):
        run.run(np.zeros((70, 70, 3), np.uint8))
    run.close()


# ---- --out SLOT@L of an any-size input: the bound size's chain (SPEC 2) ----------------------

def test_out_level_of_an_any_size_input_is_the_bound_sizes(tmp_path):
    from PIL import Image
    big, small = png(tmp_path, "big", 900, 600), png(tmp_path, "small", 30, 20)
    # 900x600 has levels 0..9, the 451x300 reference 0..8: level 9 is the bound image's
    out = str(tmp_path / "o9.png")
    pxrun(FOV_ANY, "--in", "image=" + big, "--out", "image@9=" + out, "--out", "image@8=" + out + ".8.png")
    assert Image.open(out).size == (1, 1) and Image.open(out + ".8.png").size == (3, 2)
    # 30x20 has levels 0..4: level 5 is refused after the run, before anything is written
    atlas = str(tmp_path / "atlas.png")
    r = pxrun(FOV_ANY, "--in", "image=" + small, "--out", "atlas=" + atlas, "--out", "image@5=" + out + ".5.png",
              check=False)
    assert r.returncode == 2 and "slot 1 ('image') has levels 0..4; level 5 asked for" in r.stderr
    assert not os.path.exists(atlas) and not os.path.exists(out + ".5.png")
    pxrun(FOV_ANY, "--in", "image=" + small, "--out", "image@4=" + out + ".4.png")
    assert Image.open(out + ".4.png").size == (1, 1)
    # --frames: the last frame's chain (900x600 after 30x20 has level 9; 30x20 after 900x600 not)
    for order, ok in (((small, big), True), ((big, small), False)):
        frames = tmp_path / ("frames-%d" % ok)
        frames.mkdir()
        for i, f in enumerate(order):
            os.link(f, str(frames / ("%d.png" % i)))
        f9 = str(tmp_path / ("f9-%d.png" % ok))
        r = pxrun(FOV_ANY, "--frames", str(frames), "--out", "image@9=" + f9, check=False)
        assert (r.returncode == 0) == ok and os.path.exists(f9) == ok, r.stderr
        assert ok or "slot 1 ('image') has levels 0..4; level 9 asked for" in r.stderr
    # no size within the bounds (16 .. 16384) has level 15: refused before any input is read
    r = pxrun(FOV_ANY, "--in", "image=" + str(tmp_path / "missing.png"), "--out", "image@15=" + out, check=False)
    assert r.returncode == 2 and "slot 1 ('image') has levels 0..14; level 15 asked for" in r.stderr


# ---- pxrun --fixation: the k-th sets the k-th input register (SPEC 6) -------------------------

def test_fixations_set_the_input_registers_in_register_order(tmp_path):
    prog, img = pxi(tmp_path, "regs", REGS_SRC), png(tmp_path, "i16", 16, 16)
    g = geometry(tmp_path, [prog, "--in", "image=" + img, "--fixation", "0.25,0.25", "--fixation", "12px,8px"])
    # token 0 samples at register 2 (the first --fixation), token 1 at register 5 (the second)
    assert g[0][:2].tolist() == [4 << 16, 4 << 16] and g[1][:2].tolist() == [12 << 16, 8 << 16]
    r = pxrun(prog, "--in", "image=" + img, "--fixation", "0.25,0.25", check=False)
    assert r.returncode != 0 and "fixation register 5, which is not set" in r.stderr
    r = pxrun(prog, "--in", "image=" + img, "--fixation", "0.1,0.1", "--fixation", "0.2,0.2", "--fixation", "1,1",
              check=False)
    assert r.returncode == 2
    assert "--fixation '1,1': program '%s' takes 2 fixations, one per input register in register order (its input " \
           "registers: 2, 5): this is fixation 3" % prog in r.stderr


# ---- two any-size inputs (SPEC 2) -------------------------------------------------------------

def test_two_any_size_inputs_each_at_its_own_size(tmp_path):
    prog = pxi(tmp_path, "two", TWO_SRC)
    a, b, b_big = png(tmp_path, "a", 40, 30), png(tmp_path, "b", 20, 10, 2), png(tmp_path, "bb", 100, 50, 3)
    g = geometry(tmp_path, [prog, "--in", "a=" + a, "--in", "b=" + b])
    # each SAMPLE rescaled by its own src's size: a's centre 8 of 16 -> 20, 15 of 40x30; b's 4 of 8 -> 10, 5
    assert g[0][:2].tolist() == [20 << 16, 15 << 16] and g[1][:2].tolist() == [10 << 16, 5 << 16]
    g = geometry(tmp_path, [prog, "--in", "a=" + a, "--in", "b=" + b, "--size", "32x32"])
    assert g[0][:2].tolist() == [16 << 16, 16 << 16] and g[1][:2].tolist() == [16 << 16, 16 << 16]
    r = pxrun(prog, "--in", "a=" + a, "--in", "b=" + b_big, "--out", "atlas=" + str(tmp_path / "x.png"), check=False)
    assert r.returncode != 0 and "a 100x50 image cannot be bound to slot 2 ('b'): it takes 1x1 .. 64x64" in r.stderr
    r = pxrun(prog, "--in", "a=" + a, "--in", "b=" + b, "--size", "65x65", check=False)
    assert r.returncode == 2 and "a 65x65 image cannot be bound to slot 2 ('b')" in r.stderr


# ---- tokens across size changes (SPEC 2): each call's, never the previous size's ---------------

def test_tokens_across_size_changes_equal_a_fresh_runners(tmp_path):
    prog = pxvm.Program.load(pxi(tmp_path, "pixels", PIXELS_SRC))
    run = pxvm.Runner(prog, executor=EXECUTOR)
    sizes = [(40, 30), (24, 20), (40, 30), (24, 20), (69, 71)]
    for i, (w, h) in enumerate(sizes):
        img = np.random.RandomState(10 + i).randint(0, 256, (h, w, 3), dtype=np.uint8)
        fresh = pxvm.Runner(prog, executor=EXECUTOR)
        want = fresh.tokens(img, normalize="none")
        fresh.close()
        # the compiled fast path (one positional image) and the ctypes one (a named input)
        for got in (run.tokens(img, normalize="none"), run.tokens(image=img, normalize="none")):
            assert np.array_equal(got, want), "%dx%d (call %d)" % (w, h, i)
        assert run.slot_size("image") == (w, h)
        # what a read after the run shows: this size's atlas
        assert np.array_equal(run.read("atlas")[0], fresh_atlas(prog, img))
    run.close()


def fresh_atlas(prog, img):
    r = pxvm.Runner(prog, executor=EXECUTOR)
    r.run(img)
    out = r.read("atlas")[0]
    r.close()
    return out
