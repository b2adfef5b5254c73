"""Fused EMBED from Python (Runner(..., fuse_embed=True), isa/SPEC.md "Fused EMBED"): EMBED's bytes
equal an unfused CPU runner's on real photos, one at a time and in a batch, and on an any-size
program switched between two sizes and back (one image and a batch at each); reading the fused
atlas is a UsageError naming the slot; a program whose atlas feeds more than its EMBED is a
UsageError naming the EMBED and the rule. The fused runner is PXVM_TEST_EXECUTOR's: on the GPU
machine (cuda) the fused CUDA runner's bytes are compared with the CPU executor's."""
import glob
import os

import numpy as np
import pytest

from conftest import EXECUTOR, PHOTO, ROOT
import pxvm
import pxvm.embed as E

PHOTOS = [PHOTO] + sorted(glob.glob(os.path.join(ROOT, "build", "photos", "*")))[:3]


def _layer(d, seed=3, mode="bf16"):
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((d, 3 * 16 * 16)) * 0.05
    b = rng.standard_normal(d) * 0.5
    return E.quantize(w, b, input_scale=1 / 255, mode=mode, output_scale=0.02, output_zero=-3 if mode == "int8" else 0)


def _plan_text(name):
    """The plan's program, its atlas an output (attach(..., atlas="scratch") makes it scratch)."""
    text = pxvm.Program.load(pxvm.programs.path(name)).disassemble()
    assert ".slot atlas output" in text
    return text


def _images(paths):
    return [pxvm.load_image(p) for p in paths]


@pytest.mark.parametrize("mode", ["bf16", "int8"])
def test_fused_embed_equals_unfused_on_photos_and_batches(mode):
    q = _layer(96, mode=mode)
    prog = E.attach(_plan_text("foveate273"), q, mode=mode, zero_point=128 if mode == "int8" else 0, atlas="scratch")
    plain = pxvm.Runner(prog, executor="cpu")
    fused = pxvm.Runner(prog, executor=EXECUTOR, fuse_embed=True)
    assert fused.fuse_embed and not plain.fuse_embed
    images = _images(PHOTOS)
    nonzero = 0
    for image in images:
        a = plain.run(image, policy="stretch")["emb"]
        b = fused.run(image, policy="stretch")["emb"]
        assert np.array_equal(np.asarray(a), np.asarray(b.cpu() if hasattr(b, "cpu") else b))
        nonzero += int(np.asarray(a).any())
    assert nonzero == len(images)
    a = plain.run_batch(images, policy="stretch")["emb"]
    b = fused.run_batch(images, policy="stretch")["emb"]
    b = np.asarray(b.cpu() if hasattr(b, "cpu") else b)
    assert np.asarray(a).shape[0] == len(images) and np.array_equal(np.asarray(a), b)


def test_fused_embed_follows_an_any_size_input_across_sizes():
    q = _layer(64)
    prog = E.attach(_plan_text("foveate273_any"), q, atlas="scratch")
    plain = pxvm.Runner(prog, executor="cpu")
    fused = pxvm.Runner(prog, executor=EXECUTOR, fuse_embed=True)
    image = pxvm.load_image(PHOTO)
    for h, w in ((image.shape[0], image.shape[1]), (200, 320), (image.shape[0], image.shape[1])):
        img = np.ascontiguousarray(image[:h, :w])
        assert np.array_equal(np.asarray(plain.run(img)["emb"]), np.asarray(fused.run(img)["emb"])), (w, h)
        with pytest.raises(pxvm.UsageError, match=r"slot 2 \('atlas'\) is the atlas of a fused EMBED"):
            fused.read("atlas")
        pair = [img, np.ascontiguousarray(img[::-1])]
        a = np.asarray(plain.run_batch(pair)["emb"])
        b = fused.run_batch(pair)["emb"]
        assert np.array_equal(a, np.asarray(b.cpu() if hasattr(b, "cpu") else b)), (w, h)


def test_reading_a_fused_atlas_is_refused_and_geometry_is_not():
    q = _layer(32)
    prog = E.attach(_plan_text("foveate273"), q, atlas="scratch")
    plain = pxvm.Runner(prog, executor="cpu")
    fused = pxvm.Runner(prog, executor=EXECUTOR, fuse_embed=True)
    image = pxvm.load_image(PHOTO)
    plain.run(image, policy="stretch")
    fused.run(image, policy="stretch")
    plain.read("atlas")  # unfused: the atlas reads as always
    with pytest.raises(pxvm.UsageError, match=r"pxvm_runner_read: slot 2 \('atlas'\) is the atlas of a fused EMBED"):
        fused.read("atlas")
    assert np.array_equal(np.asarray(plain.geometry("atlas")), np.asarray(fused.geometry("atlas")))


def test_a_program_without_a_fusable_embed_is_refused_with_the_rule():
    q = _layer(32)
    prog = E.attach(pxvm.Program.load(pxvm.programs.path("foveate273")), q)  # the atlas is an output
    pxvm.Runner(prog, executor=EXECUTOR)  # unfused: fine
    with pytest.raises(pxvm.UsageError, match=r"instruction 274 \(EMBED\): cannot be fused: its atlas atlas is not a "
                                              r"scratch slot \(its role: output\)"):
        pxvm.Runner(prog, executor=EXECUTOR, fuse_embed=True)
    with pytest.raises(pxvm.UsageError, match="no EMBED instruction"):
        pxvm.Runner(pxvm.Program.load(pxvm.programs.path("foveate273")), executor=EXECUTOR, fuse_embed=True)
    with pytest.raises(pxvm.UsageError, match="fuse_embed must be True or False"):
        pxvm.Runner(prog, executor=EXECUTOR, fuse_embed=1)


def test_fused_cuda_equals_cpu():
    torch = pytest.importorskip("torch")
    if EXECUTOR != "cuda" or not torch.cuda.is_available():
        pytest.skip("needs PXVM_TEST_EXECUTOR=cuda and a CUDA device")
    for mode, zp in (("bf16", 0), ("int8", 128), ("int32", 7)):
        prog = E.attach(_plan_text("foveate273"), _layer(768, mode=mode), mode=mode, zero_point=zp, atlas="scratch")
        cpu = pxvm.Runner(prog, executor="cpu")
        gpu = pxvm.Runner(prog, executor="cuda", fuse_embed=True)
        images = _images(PHOTOS)
        a = cpu.run_batch(images, policy="stretch")["emb"]
        b = gpu.run_batch(images, policy="stretch")["emb"]
        assert np.array_equal(np.asarray(a), np.asarray(b.cpu() if hasattr(b, "cpu") else b)), mode


def test_attach_atlas_scratch_makes_only_the_atlas_scratch_and_keeps_the_bytes():
    q = _layer(64)
    kept = E.attach(_plan_text("foveate273"), q)
    made = E.attach(_plan_text("foveate273"), q, atlas="scratch")
    assert ".slot atlas output" in kept.disassemble() and ".slot atlas scratch" in made.disassemble()
    assert made.disassemble().replace(".slot atlas scratch", ".slot atlas output") == kept.disassemble()
    with pytest.raises(pxvm.UsageError):  # an output atlas does not fuse (A-FUSE-2)
        pxvm.Runner(kept, executor="cpu", fuse_embed=True)
    img = _images(PHOTOS[:1])[0]
    a = pxvm.Runner(kept, executor="cpu").run(img)["emb"]
    b = pxvm.Runner(made, executor="cpu", fuse_embed=True).run(img)["emb"]
    assert np.array_equal(np.asarray(a), np.asarray(b))
    with pytest.raises(ValueError, match="atlas must be"):
        E.attach(_plan_text("foveate273"), q, atlas="drop")


def test_fuse_embed_is_the_constructors_choice_and_read_only():
    prog = E.attach(_plan_text("foveate273"), _layer(32), atlas="scratch")
    r = pxvm.Runner(prog, executor="cpu", fuse_embed=True)
    assert r.fuse_embed is True
    with pytest.raises(AttributeError):  # a later batch size would open unfused: refused instead
        r.fuse_embed = False
    assert r.fuse_embed is True
