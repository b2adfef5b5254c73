"""Fixations on the executor under test (CPU in CI, CUDA-GL with PXVM_TEST_EXECUTOR=cuda):
relative == absolute for plans at random fixations, batch of fixations == loop, no reload when the
fixation changes, token geometry, bottom-up scanpaths on hand-checked pictures, pxrun's
--fixation, --scanpath, --geometry and --overlay, and one unit for fixations in every door
(normalized to the first input; texels only when asked; SPEC 6)."""
import math
import os
import re
from decimal import Decimal

import numpy as np
import pytest

import pxvm
from conftest import EXECUTOR, PHOTO, ROOT, pxrun

Q16 = 65536


def q16(n, side):
    """SPEC 6: a normalized coordinate's register, floor(n * W * 65536 + 0.5) in doubles, one
    operation at a time (Python's float arithmetic is IEEE double, left to right)."""
    return math.floor(n * side * 65536 + 0.5)


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
    for fx, fy in [(0, 0), (1, 1), (1, 0)] + [tuple(rng.uniform(0, 1, 2)) for _ in range(4)]:
        q = (q16(fx, 451), q16(fy, 300))
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
    fix = np.array([[0.5, 0.5], [10 / 451, 290 / 300], [440.25 / 451, 3.5 / 300], [0.0, 0.5]])
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
    assert np.array_equal(d[1, :, 0] - d[0, :, 0], np.full(d.shape[1], q16(10 / 451, 451) - q16(0.5, 451)))


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
    with pytest.raises(pxvm.UsageError, match="takes no fixations: it samples no position relative to a fixation"):
        r.patches(photo, fixation=(0.5, 0.5))
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
    for text, fix, units in (("0.5,0.5", (0.5, 0.5), "normalized"), ("0.1234,0.8765", (0.1234, 0.8765), "normalized"),
                             ("100px,40.25px", (100.0, 40.25), "texels")):
        npy, geo = tmp_path / "p.npy", tmp_path / "g.npy"
        pxrun(str(rel), "--fixation", text, "--in", "image=" + PHOTO, "--npy", "atlas=%s" % npy, "--geometry",
              "atlas=%s" % geo, "--executor", EXECUTOR)
        r = pxvm.Runner(pxvm.Program.from_plan(str(rel)), executor=EXECUTOR)
        api = r.patches(photo, fixation=fix, fixation_units=units)
        assert np.array_equal(np.load(npy), as_numpy(api)), text
        assert np.array_equal(np.load(geo), r.geometry(exact=True)[0]), text
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


def as_numpy(x):
    return x if isinstance(x, np.ndarray) else x.cpu().numpy()


# ---- one unit in every door (SPEC 6, "Fixations from the host") -----------------------------------

def one_token(w, h, regs=(0,)):
    """A program of one 4x4 token per register, each a relative SAMPLE centred on the register
    (cu = cv = 0): the token's geometry centre is the register, exactly."""
    text = ".width 16\n.slot image input %dx%d\n.slot atlas output %dx4 patches=4x4x%d\nPYRAMID image\n" % (
        w, h, 4 * len(regs), len(regs))
    for i, k in enumerate(regs):
        text += ("SAMPLE src=image dst=atlas mode=linear@f%d dst_x=%d dst_y=0 w=4 h=4 cu=0 cv=0 du=1 dv=1 lod=0\n" %
                 (k, 4 * i))
    return pxvm.Program.assemble(text + "HALT\n", "one-token-%dx%d" % (w, h))


def registers(runner, image, **kw):
    runner.patches(image, **kw)
    return [tuple(int(v) for v in g[:2]) for g in runner.geometry(exact=True)[0]]


def test_normalized_is_the_default_and_becomes_floor_n_w_65536_plus_half():
    img = np.zeros((300, 451, 3), np.uint8)
    r = pxvm.Runner(one_token(451, 300), executor=EXECUTOR)
    # (0.5, 0.5) is the middle of the 451x300 input: 225.5 and 150 texels
    assert registers(r, img, fixation=(0.5, 0.5)) == [(math.floor(0.5 * 451 * 65536 + 0.5), 150 * Q16)]
    assert registers(r, img, fixation=(0.5, 0.5))[0] == (14778368, 9830400)
    assert registers(r, img, fixation=(0.1, 0.7)) == [(2955674, 13762560)]  # 2955673.6 rounds up
    assert registers(r, img, fixation=np.array([[1.0, 0.0]])) == [(451 * Q16, 0)]  # corners; a (K, 2) array
    # texels by the keyword only
    assert registers(r, img, fixation=(100.5, 7), fixation_units="texels") == [(6586368, 458752)]
    assert registers(r, img, fixation=(451, 300), fixation_units="texels") == [(451 * Q16, 300 * Q16)]
    # a batch: one (x, y) per item
    b = r.patches_batch(np.stack([img] * 3), fixations=[(0.5, 0.5), (0.25, 0.75), (1, 1)])
    assert b.shape[0] == 3
    assert [tuple(int(v) for v in g[0, :2]) for g in r.geometry(batch=3, exact=True)] == [
        (q16(0.5, 451), q16(0.5, 300)), (q16(0.25, 451), q16(0.75, 300)), (451 * Q16, 300 * Q16)]


def test_a_rounding_tie_rounds_up_in_python_and_pxrun(tmp_path):
    """24689 / 2^26 of a 512-texel side is 12344.5 / 65536 texels exactly: register 12345 (a round
    half to even, numpy's and torch's round, would give 12344)."""
    n = 24689 / 2 ** 26
    assert n * 512 * 65536 == 12344.5 and float(np.round(n * 512 * 65536)) == 12344
    img = np.zeros((300, 512, 4), np.uint8)
    prog = one_token(512, 300)
    r = pxvm.Runner(prog, executor=EXECUTOR)
    assert registers(r, img, fixation=(n, 0.5)) == [(12345, 150 * Q16)]
    # ties on sides that are no power of two: x * 451 * 65536 = 1000028.5, y * 300 * 65536 = 100000.5
    tx, ty = 0.033834199419042754, 0.005086288452148437
    assert tx * 451 * 65536 == 1000028.5 and ty * 300 * 65536 == 100000.5
    assert registers(pxvm.Runner(one_token(451, 300), executor=EXECUTOR), np.zeros((300, 451, 4), np.uint8),
                     fixation=(tx, ty)) == [(1000029, 100001)]
    prog.save(str(tmp_path / "tie.pxi"))
    png = tmp_path / "tie.png"
    png.write_bytes(_png(img))
    text = "%s,0.5" % Decimal(n)  # the exact decimal of the double
    pxrun(str(tmp_path / "tie.pxi"), "--in", "image=%s" % png, "--fixation", text, "--geometry",
          "atlas=%s" % (tmp_path / "g.npy"), "--executor", EXECUTOR)
    assert tuple(np.load(tmp_path / "g.npy")[0, :2]) == (12345, 150 * Q16)


def _png(img):
    import ctypes
    lib = pxvm._capi.lib
    p, n = ctypes.c_void_p(), ctypes.c_size_t()
    lib.pxvm_image_encode_png.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int,
                                          ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_size_t)]
    a = np.ascontiguousarray(img)
    assert lib.pxvm_image_encode_png(a.ctypes.data, a.shape[1], a.shape[0], ctypes.byref(p), ctypes.byref(n)) == 0
    data = ctypes.string_at(p, n.value)
    lib.pxvm_free(p)
    return data


def test_out_of_range_fixations_are_refused_naming_the_value():
    img = np.zeros((300, 451, 3), np.uint8)
    r = pxvm.Runner(one_token(451, 300), executor=EXECUTOR)
    for fix, units, words in (((1.5, 0.5), "normalized", "fixation (item 0, register 0): x = 1.5 is not in [0, 1] "
                                                          "(normalized coordinates of input slot 'image', 451x300)"),
                              ((0.5, -0.25), "normalized", "y = -0.25 is not in [0, 1]"),
                              ((float("nan"), 0.5), "normalized", "x = nan is not in [0, 1]"),
                              ((225.5, 150), "normalized", "x = 225.5 is not in [0, 1]"),  # texels, not asked for
                              ((452, 3), "texels", "x = 452 texels is not in [0, 451] (input slot 'image', 451x300)"),
                              ((3, -1), "texels", "y = -1 texels is not in [0, 300]")):
        with pytest.raises(pxvm.UsageError, match=re.escape(words)):
            r.patches(img, fixation=fix, fixation_units=units)
    with pytest.raises(pxvm.UsageError, match=re.escape("fixation (item 2, register 0): x = 2 is not in [0, 1]")):
        r.patches_batch(np.stack([img] * 3), fixations=[(0.5, 0.5), (0.5, 0.5), (2.0, 0.5)])
    with pytest.raises(pxvm.UsageError, match="fixation_units is 'normalized'"):
        r.patches(img, fixation=(0.5, 0.5), fixation_units="pixels")
    # clamped when asked: the nearest end of the range, NaN the middle
    assert registers(r, img, fixation=(1.5, -0.25), fixation_clamp=True) == [(451 * Q16, 0)]
    assert registers(r, img, fixation=(float("nan"), 0.5), fixation_clamp=True) == [(q16(0.5, 451), q16(0.5, 300))]
    assert registers(r, img, fixation=(500, 3), fixation_units="texels", fixation_clamp=True) == [(451 * Q16, 3 * Q16)]


def test_a_relative_program_without_a_fixation_is_unlinkable(photo):
    r = pxvm.Runner(pxvm.Program.from_plan(plan("logpolar"), name="rel"), executor=EXECUTOR)
    with pytest.raises(pxvm.Unlinkable, match=re.escape("program 'rel' samples relative to fixation register 0, which "
                                                        "is not set: give a fixation")):
        r.patches(photo)
    with pytest.raises(pxvm.Unlinkable, match="not set for batch item 0"):
        r.patches_batch(np.stack([photo] * 2))
    r.patches(photo, fixation=(0.5, 0.5))
    r.patches(photo)  # set once, it stays set


def test_a_fixation_the_program_does_not_take_is_refused(photo):
    img = np.zeros((300, 451, 3), np.uint8)
    r = pxvm.Runner(one_token(451, 300), executor=EXECUTOR)
    with pytest.raises(pxvm.UsageError, match=re.escape("takes no fixation in register 1 (its input register: 0)")):
        r.patches(img, fixation=[(0.5, 0.5), (0.5, 0.5)])
    two = pxvm.Runner(one_token(451, 300, regs=(0, 1)), executor=EXECUTOR)
    assert two.fixation_inputs == 3
    assert registers(two, img, fixation=[(0.5, 0.5), (0, 1)]) == [(q16(0.5, 451), q16(0.5, 300)), (0, 300 * Q16)]
    with pytest.raises(pxvm.Unlinkable, match="samples relative to fixation register 1, which is not set"):
        pxvm.Runner(one_token(451, 300, regs=(0, 1)), executor=EXECUTOR).patches(img, fixation=(0.5, 0.5))
    scan = pxvm.Runner(pxvm.Program.from_plan({"image": [451, 300], "budget": 16, "scheme": "logpolar",
                                               "scanpath": 2}), executor=EXECUTOR)
    assert scan.fixation_inputs == 0
    with pytest.raises(pxvm.UsageError, match="takes no fixations: it finds its own"):
        scan.patches(photo, fixation=(0.5, 0.5))
    scan.patches(photo)  # a scanpath needs none


def test_torch_tensors_are_converted_with_the_same_float64_operations():
    """torch converts fixations on their device (the CPU here; CUDA on the GPU, tests/python/
    test_cuda.py) with separate float64 operations: the library's registers, ties included."""
    torch = pytest.importorskip("torch")
    img = np.zeros((300, 451, 3), np.uint8)
    r = pxvm.Runner(one_token(451, 300), executor=EXECUTOR)
    rng = np.random.default_rng(7)
    fix = np.concatenate([[[0.033834199419042754, 0.005086288452148437], [0.5, 0.5], [0, 1], [0.1, 0.7]],
                          rng.uniform(0, 1, (4, 2))])
    imgs = np.stack([img] * len(fix))

    def regs():
        return [tuple(int(v) for v in g[0, :2]) for g in r.geometry(batch=len(fix), exact=True)]

    r.patches_batch(imgs, fixations=fix)  # NumPy: the library converts
    want = regs()
    assert want == [(q16(x, 451), q16(y, 300)) for x, y in fix] and want[0] == (1000029, 100001)
    r.patches_batch(imgs, fixations=torch.from_numpy(fix))  # torch: converted here, in float64
    assert regs() == want
    texels = fix * [451.0, 300.0]
    r.patches_batch(imgs, fixations=torch.from_numpy(texels), fixation_units="texels")
    assert regs() == [(math.floor(x * 65536 + 0.5), math.floor(y * 65536 + 0.5)) for x, y in texels]
    r.patches_batch(imgs, fixations=texels, fixation_units="texels")
    assert regs() == [(math.floor(x * 65536 + 0.5), math.floor(y * 65536 + 0.5)) for x, y in texels]
    bad = torch.from_numpy(fix).clone()
    bad[5, 1] = float("nan")
    with pytest.raises(pxvm.UsageError, match=re.escape("fixation (item 5, register 0): y = nan is not in [0, 1]")):
        r.patches_batch(imgs, fixations=bad)
    assert registers(r, img, fixation=torch.tensor([1.5, float("nan")]), fixation_clamp=True) == [
        (451 * Q16, q16(0.5, 300))]
