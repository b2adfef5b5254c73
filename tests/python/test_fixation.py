"""Fixations on the executor under test (CPU in CI, CUDA-GL with PXVM_TEST_EXECUTOR=cuda):
relative == absolute for plans at random fixations, batch of fixations == loop, no reload when the
fixation changes, token geometry, bottom-up scanpaths on hand-checked pictures, and pxrun's
--fixation, --scanpath, --geometry and --overlay."""
import os
import re
from decimal import Decimal

import numpy as np
import pytest

import pxvm
from conftest import EXECUTOR, PHOTO, ROOT, pxrun

Q16 = 65536


def plan(scheme, **kw):
    p = {"image": [451, 300], "budget": 48, "scheme": scheme, "fixation": "relative"}
    p.update(kw)
    return p


def baked(prog, fix_q16):
    """The absolute program of a relative one for fixations fix_q16[k] = (x, y) in Q16: every
    `mode=...@fK` instruction gets the register added to its centre, exactly (the disassembler
    prints Q16 operands as exact decimals)."""
    out = []
    for line in prog.disassemble().split("\n"):
        m = re.search(r"mode=(linear|nearest)@f(\d)", line)
        if m:
            k = int(m.group(2))
            line = line.replace(m.group(0), "mode=" + m.group(1))
            for field, add in (("cu", fix_q16[k][0]), ("cv", fix_q16[k][1])):
                v = re.search(r"\b%s=(-?[0-9.]+)" % field, line)
                q = int(Decimal(v.group(1)) * Q16) + add
                line = line.replace(v.group(0), "%s=%s" % (field, Decimal(q) / Decimal(Q16)), 1)
        out.append(line)
    return pxvm.Program.assemble("\n".join(out), "baked")


@pytest.mark.parametrize("scheme", ["logpolar", "v1"])
def test_relative_plan_equals_the_absolute_program_at_random_fixations(scheme, photo):
    prog = pxvm.Program.from_plan(plan(scheme))
    rel = pxvm.Runner(prog, executor=EXECUTOR)
    rng = np.random.default_rng(11)
    for _ in range(6):
        fx, fy = rng.uniform(-20, 471), rng.uniform(-20, 320)
        q = (int(round(fx * Q16)), int(round(fy * Q16)))
        got = rel.patches(photo, fixation=(fx, fy))
        want = pxvm.Runner(baked(prog, [q]), executor=EXECUTOR).patches(photo)
        if not isinstance(got, np.ndarray):
            got = got.cpu().numpy()
        assert np.array_equal(got, want), (scheme, fx, fy)
        g = rel.geometry(exact=True)[0]
        t = pxvm.Runner(baked(prog, [q]), executor=EXECUTOR)
        t.patches(photo)
        assert np.array_equal(g, t.geometry(exact=True)[0])


def test_batch_of_fixations_equals_a_loop_and_changing_it_reloads_nothing(photo):
    prog = pxvm.Program.from_plan(plan("logpolar"))
    r = pxvm.Runner(prog, executor=EXECUTOR)
    fix = np.array([[225.5, 150.0], [10.0, 290.0], [440.25, 3.5], [-5.0, 150.0]])
    imgs = np.stack([photo] * 4)
    batch = r.patches_batch(imgs, fixations=fix)
    geo = r.geometry(batch=4, exact=True)
    loaded = dict(r._runners)
    for i in range(4):
        one = r.patches(photo, fixation=fix[i])
        assert np.array_equal(batch[i], one), i
        assert np.array_equal(geo[i], r.geometry(exact=True)[0])
    assert set(r._runners) == set(loaded) and all(r._runners[k] is loaded[k] for k in loaded)
    # the geometry moves with the fixation, exactly: the same offsets from another register value
    d = r.geometry(batch=4, exact=True)
    assert np.array_equal(d[1, :, 0] - d[0, :, 0], np.full(d.shape[1], int(round((10.0 - 225.5) * Q16))))


def test_geometry_reports_the_tokens_as_sampled(photo, foveate):
    r = pxvm.Runner(foveate, executor=EXECUTOR)
    r.patches(photo)
    g = r.geometry()[0]
    ge = r.geometry(exact=True)[0]
    assert g.shape == (273, 4) and g.dtype == np.float32 and ge.shape == (273, 5)
    # foveate273's first token: the instruction's own operands (absolute program, no register)
    text = foveate.disassemble().split("\n")
    first = next(l for l in text if l.startswith("SAMPLE"))
    cu = Decimal(re.search(r"\bcu=(-?[0-9.]+)", first).group(1))
    assert ge[0, 0] == int(cu * Q16) and ge[0, 2] == ge[0, 3]
    assert np.all(ge[:, 4] >= 0) and np.all(ge[:, 4] <= 4 * 256)  # LOD clamped to the plan's 5 levels


def scanpath_of(image, k, budget=32):
    prog = pxvm.Program.from_plan({"image": [image.shape[1], image.shape[0]], "budget": budget,
                                   "scheme": "logpolar", "scanpath": k})
    r = pxvm.Runner(prog, executor=EXECUTOR)
    r.patches(image, fixation="saliency")
    return r.fixations()[0, :k]


def test_bottom_up_scanpath_lands_on_the_cats_eyes_and_nose(photo):
    """programs/data/chelsea.png, boxes checked by eye: left eye, right eye, nose."""
    boxes = {"left eye": (135, 85, 215, 155), "right eye": (285, 105, 350, 170), "nose": (230, 220, 300, 270)}
    hits = []
    for x, y in scanpath_of(photo, 3):
        inside = [n for n, (x0, y0, x1, y1) in boxes.items() if x0 <= x <= x1 and y0 <= y <= y1]
        assert len(inside) == 1, (x, y)
        hits += inside
    assert sorted(hits) == sorted(boxes), hits


def test_bottom_up_first_fixation_finds_a_red_sign_on_a_grey_wall():
    """A made picture: a grey wall with plaster noise and a red octagon (a stop sign) at (236, 84)."""
    rng = np.random.default_rng(5)
    h, w = 240, 320
    img = np.clip(128 + rng.normal(0, 6, (h, w, 1)), 0, 255).repeat(3, axis=2).astype(np.uint8)
    yy, xx = np.mgrid[0:h, 0:w]
    d = np.maximum(np.abs(xx - 236), np.abs(yy - 84))
    octagon = (d <= 18) & (np.abs(xx - 236) + np.abs(yy - 84) <= 26)
    img[octagon] = (205, 20, 25)
    (x, y), = scanpath_of(img, 1)
    assert abs(x - 236) <= 20 and abs(y - 84) <= 20, (x, y)


def test_scanpath_fixations_are_distinct_and_ties_on_a_flat_image_go_first():
    flat = np.full((64, 96, 3), 100, np.uint8)
    fx = scanpath_of(flat, 4, budget=8)
    # a flat picture has no saliency: the first map texel (row-major) wins, then inhibition moves
    # on; the map is level 4 (6x4), so texel (0, 0)'s centre is (8, 8) in the image
    assert tuple(fx[0]) == (8.0, 8.0)
    assert len({tuple(p) for p in fx}) == 4


def test_fixation_errors_use_the_librarys_words(photo, foveate):
    r = pxvm.Runner(foveate, executor=EXECUTOR)
    with pytest.raises(pxvm.UsageError, match="samples no position relative to a fixation"):
        r.patches(photo, fixation=(1, 2))
    rel = pxvm.Runner(pxvm.Program.from_plan(plan("logpolar")), executor=EXECUTOR)
    with pytest.raises(pxvm.UsageError, match="finds no fixations"):
        rel.patches(photo, fixation="saliency")
    with pytest.raises(ValueError, match="fixation must be"):
        rel.patches_batch(np.stack([photo] * 2), fixations=np.zeros((3, 2)))
    with pytest.raises(pxvm.PlanError, match="fixation-relative plans are logpolar or v1"):
        pxvm.Program.from_plan(plan("grid"))


def test_pxrun_fixation_scanpath_geometry_and_overlay(tmp_path, photo):
    pj = tmp_path / "plan.json"
    pj.write_text('{"image": [451, 300], "budget": 32, "scheme": "logpolar"}')
    geo, ov = tmp_path / "g.npy", tmp_path / "o.png"
    r = pxrun(str(pj), "--scanpath", "3", "--in", "image=" + PHOTO, "--geometry", "atlas=%s" % geo,
              "--overlay", str(ov), "--executor", EXECUTOR)
    printed = [tuple(map(float, l.split()[2:])) for l in r.stdout.split("\n") if l.startswith("fixation ")]
    want = scanpath_of(photo, 3)
    assert np.allclose(np.array(printed), want, atol=1e-4)
    g = np.load(geo)
    assert g.dtype == np.int32 and g.shape[1] == 5 and g.shape[0] % 3 == 0
    assert pxvm.load_image(str(ov)).shape == (300, 451, 4)
    # --fixation, normalized and in texels, on a relative plan: the same tokens as the API's
    rel = tmp_path / "rel.json"
    rel.write_text('{"image": [451, 300], "budget": 32, "scheme": "v1", "fixation": "relative"}')
    for text, fix in (("0.5,0.5", (225.5, 150.0)), ("100px,40.25px", (100.0, 40.25))):
        npy = tmp_path / "p.npy"
        pxrun(str(rel), "--fixation", text, "--in", "image=" + PHOTO, "--npy", "atlas=%s" % npy, "--executor", EXECUTOR)
        api = pxvm.Runner(pxvm.Program.from_plan(str(rel)), executor=EXECUTOR).patches(photo, fixation=fix)
        assert np.array_equal(np.load(npy), api), text
    bad = pxrun(str(rel), "--fixation", "1,2,3", "--in", "image=" + PHOTO, check=False)
    assert bad.returncode == 2 and "--fixation '1,2,3'" in bad.stderr
    # normalized in [0, 1] only (texels with px); a relative program needs one, others take none
    for args, status, words in ((["--fixation", "2000,2000"], 2, "x = 2000 is not in [0, 1]"),
                                (["--fixation", "100px,0.5"], 2, "give both values normalized"),
                                ([], 5, "samples relative to fixation register 0, which is not set")):
        bad = pxrun(str(rel), *args, "--in", "image=" + PHOTO, check=False)
        assert bad.returncode == status and words in bad.stderr, (args, bad.stderr)
    bad = pxrun(str(pj), "--scanpath", "3", "--fixation", "0.5,0.5", "--in", "image=" + PHOTO, check=False)
    assert bad.returncode == 2 and "takes no fixations: it finds its own" in bad.stderr
