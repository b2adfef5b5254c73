"""Token order, frames and float rules of ragged batches (include/pxvm.h pxvm_ragged merge and
temporal; pxvm_token_format rule; python/pxvm/ragged.py), on real photos of mixed sizes (CPU
executor; the cuda executor too under PXVM_TEST_EXECUTOR=cuda), against NumPy transcriptions of
transformers 4.x, 0 values differing:

- layout "qwen2vl" is Qwen2VLImageProcessor._preprocess's pixel_values (transformers 4.x,
  src/transformers/models/qwen2_vl/image_processing_qwen2_vl.py): Pillow BICUBIC resize to
  smart_resize's size, rescale (image_transforms.rescale: image.astype(np.float64) * scale, then
  .astype(np.float32)), normalize (image_transforms.normalize: mean and std cast to float32, then
  (image - mean) / std in float32), a still image repeated over temporal_patch_size = 2, then
      patches.reshape(grid_t, temporal_patch_size, channel, grid_h // merge_size, merge_size,
                      patch_size, grid_w // merge_size, merge_size, patch_size)
             .transpose(0, 3, 6, 4, 7, 2, 1, 5, 8)
             .reshape(grid_t * grid_h * grid_w, channel * temporal_patch_size * patch_size**2)
  and image_grid_thw = (grid_t, grid_h, grid_w) per image;
- temporal with two different frames (two photos stretched to one size);
- merge on its own (uint8 tiles) and its refusals: a grid side that is not a multiple of m is a
  UsageError naming the image and its grid; frames of one item of two sizes, likewise.
"""
import glob
import os

import numpy as np
import pytest
from PIL import Image

import pxvm
import reference_hf4 as ref
from conftest import EXECUTOR, PHOTO, ROOT

UNIFORM = os.path.join(ROOT, "programs", "uniform.json")
P = 14  # Qwen2-VL's patch


@pytest.fixture(scope="module")
def runner(tmp_path_factory):
    plan = tmp_path_factory.mktemp("plan") / "uniform14.json"
    plan.write_text('{"image": [224, 224], "scheme": "uniform", "patch": %d}' % P)
    with pxvm.Runner(pxvm.Program.from_plan(str(plan)), executor=EXECUTOR) as r:
        yield r


def _photo_paths():
    photos = sorted(glob.glob(os.path.join(ROOT, "build", "photos", "*")))
    if len(photos) < 10:
        pytest.skip("build/photos missing: sh tests/bench/photos.sh")
    return photos


@pytest.fixture(scope="module")
def photos():
    """About 10 real photos of mixed sizes (the smallest of build/photos, so that the test stays
    quick) and chelsea.png, as RGB arrays."""
    paths = sorted(_photo_paths(), key=os.path.getsize)[:9] + [PHOTO]
    return [np.asarray(Image.open(p).convert("RGB")) for p in paths]


def test_qwen2vl_layout_equals_transformers4_on_real_photos(runner, photos):
    r = runner.tokens_batch(photos, policy="dynamic", layout="qwen2vl", normalize="clip", rule="transformers4")
    want = ref.qwen2vl(photos)
    got = np.asarray(r.tokens)
    assert got.shape == want["pixel_values"].shape and got.dtype == np.float32
    differ = got.view(np.uint32) != want["pixel_values"].view(np.uint32)
    assert not differ.any(), "%d values differ" % int(differ.sum())
    assert np.array_equal(r.grid, want["image_grid_thw"])
    counts = want["image_grid_thw"].prod(axis=1)
    assert np.array_equal(r.offsets, np.concatenate([[0], np.cumsum(counts)]))
    assert len(r) == len(photos) and len(set(map(tuple, r.grid[:, 1:]))) > 3  # mixed sizes


def test_temporal_two_different_frames(runner, photos):
    """Two photos stretched to one size are the two frames of one item: Qwen2-VL's video
    flattening (tps 2) of those frames, float32 rule, flat; and nchw is the same bytes as
    (N, C, T, p, p), nhwc their (N, T, p, p, C) transpose."""
    size = (224, 168)
    a, b = photos[0], photos[3]
    r = runner.tokens_batch([a, b], policy="stretch", size=size, layout="flat", merge=2, temporal=2,
                            normalize="clip", rule="transformers4")
    want, thw = ref.qwen2vl_one([np.asarray(Image.fromarray(x).resize(size, Image.BICUBIC)) for x in (a, b)],
                                do_resize=False)
    got = np.asarray(r.tokens)
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))
    assert thw == (1, 12, 16) and r.grid.tolist() == [[1, 12, 16]] and r.offsets.tolist() == [0, 192]
    nchw = runner.tokens_batch([a, b], policy="stretch", size=size, layout="nchw", merge=2, temporal=2,
                               normalize="clip", rule="transformers4")
    assert nchw.tokens.shape == (192, 3, 2, P, P)
    assert np.array_equal(np.asarray(nchw.tokens).reshape(192, -1).view(np.uint32), want.view(np.uint32))
    nhwc = runner.tokens_batch([a, b], policy="stretch", size=size, layout="nhwc", merge=2, temporal=2,
                               normalize="clip", rule="transformers4")
    assert np.array_equal(np.asarray(nhwc.tokens).view(np.uint32),
                          np.asarray(nchw.tokens).transpose(0, 2, 3, 4, 1).view(np.uint32))
    tiles = runner.patches_batch([a, b], policy="stretch", size=size, merge=2, temporal=2)
    assert tiles.tokens.shape == (192, 2, P, P, 4)
    u8 = np.stack([np.asarray(Image.fromarray(x).resize(size, Image.BICUBIC)) for x in (a, b)])
    w8, _ = ref.flatten_patches(u8.transpose(0, 3, 1, 2), P)  # (N, C*T*p*p) of the bytes
    assert np.array_equal(np.asarray(tiles.tokens)[..., :3].transpose(0, 4, 1, 2, 3).reshape(192, -1), w8)


def test_merge_order_and_position_ids(runner, photos):
    """merge=2 tiles are the row-major tiles permuted into 2x2 windows; position ids follow."""
    rows = runner.patches_batch(photos[:3], policy="dynamic")
    win = runner.patches_batch(photos[:3], policy="dynamic", merge=2)
    assert np.array_equal(win.offsets, rows.offsets) and np.array_equal(win.grid, rows.grid)
    for i in range(3):
        _, gh, gw = rows.grid[i]
        order = np.arange(gh * gw).reshape(gh // 2, 2, gw // 2, 2).transpose(0, 2, 1, 3).reshape(-1)
        assert np.array_equal(np.asarray(win[i]), np.asarray(rows[i])[order])
        o = rows.offsets[i]
        assert np.array_equal(win.position_ids[:, o:o + gh * gw], rows.position_ids[:, o:o + gh * gw][:, order])


def test_merge_refuses_a_grid_that_is_not_whole_windows(runner):
    """The edge pair: a 56x28 canvas (4x2 tiles of 14) takes merge 2, 42x28 (3x2) is refused
    naming the image and its grid; merge 3 takes 42x42, not 56x42."""
    img = np.zeros((30, 40, 3), np.uint8)
    r = runner.patches_batch([img, img], policy="stretch", size=(56, 28), merge=2)
    assert r.tokens.shape == (16, P, P, 4)
    with pytest.raises(pxvm.UsageError, match=r"image 0: (usage: )?merge 2: its grid of 3x2 tiles") as e:
        runner.patches_batch([img, img], policy="stretch", size=(42, 28), merge=2)
    assert e.value.index == 0
    runner.patches_batch([img], policy="stretch", size=(42, 42), merge=3)
    with pytest.raises(pxvm.UsageError, match=r"merge 3: its grid of 4x3 tiles"):
        runner.patches_batch([img], policy="stretch", size=(56, 42), merge=3)


def test_temporal_refusals(runner):
    a, b = np.zeros((30, 40, 3), np.uint8), np.zeros((60, 40, 3), np.uint8)
    with pytest.raises(pxvm.UsageError, match=r"temporal=2 takes the images 2 frames per item: 3 images"):
        runner.patches_batch([a, a, a], policy="stretch", size=(28, 28), temporal=2)
    with pytest.raises(pxvm.UsageError, match=r"image 1: (usage: )?temporal 2: resized to 28x56, but image 0") as e:
        runner.patches_batch([a, b], policy="dynamic:min=1", temporal=2)
    assert e.value.index == 1
    with pytest.raises(pxvm.UsageError, match=r"qwen2vl. takes temporal=1 .* not 3"):
        runner.tokens_batch([a], policy="dynamic", layout="qwen2vl", temporal=3)


# ---- crop: CLIP/LLaVA's shortest-edge resize and centre crop ----------------------------------

def clip_crop_reference(a, w, h, short=None):
    """transformers 4.x, transcribed: image_transforms.get_resize_output_image_size(size=S,
    default_to_square=False) (short side S, long side int(S * long / short)), Pillow's
    Image.resize((w', h'), BICUBIC) (image_transforms.resize), then image_transforms.center_crop
    to (h, w): top = (h' - h) // 2, left = (w' - w) // 2, and when the resized image is smaller
    than the crop on a side, zeros around it (new_image of max(crop, side), the image at
    ceil((crop - side) / 2)) before the slice."""
    import math
    H0, W0 = a.shape[:2]
    S = short or max(w, h)
    if W0 <= H0:
        nw, nh = S, int(S * H0 / W0)
    else:
        nh, nw = S, int(S * W0 / H0)
    im = np.asarray(Image.fromarray(a).resize((nw, nh), Image.BICUBIC))
    top, left = (nh - h) // 2, (nw - w) // 2
    if top >= 0 and left >= 0 and top + h <= nh and left + w <= nw:
        return im[top:top + h, left:left + w]
    bh, bw = max(h, nh), max(w, nw)
    canvas = np.zeros((bh, bw, 3), np.uint8)
    tp, lp = math.ceil((bh - nh) / 2), math.ceil((bw - nw) / 2)
    canvas[tp:tp + nh, lp:lp + nw] = im
    top, left = top + tp, left + lp
    return canvas[max(0, top):min(bh, top + h), max(0, left):min(bw, left + w)]


def untile(tiles, w, h, p=P):
    return np.asarray(tiles).reshape(h // p, w // p, p, p, 4).transpose(0, 2, 1, 3, 4).reshape(h, w, 4)


@pytest.mark.parametrize("w, h, short", [(224, 224, None), (168, 224, None), (224, 140, None), (224, 224, 200),
                                         (98, 210, 120)])
def test_crop_equals_pillow_then_numpy_slicing_on_real_photos(runner, photos, w, h, short):
    """Every photo, crop to w x h (short=S or the default max(w, h)): 0 bytes differ from the
    reference (RGB; A is 255), one ragged call; and the same bytes through the host policy
    (pxvm_image_fit, as runs bind them)."""
    policy = "crop" if short is None else "crop:short=%d" % short
    r = runner.patches_batch(photos, policy=policy, size=(w, h), merge=1)
    n = (w // P) * (h // P)
    for i, a in enumerate(photos):
        got = untile(np.asarray(r.tokens)[i * n:(i + 1) * n], w, h)
        want = clip_crop_reference(a, w, h, short)
        assert int((got[..., :3] != want).sum()) == 0, "photo %d %s" % (i, a.shape)
        assert (got[..., 3] == 255).all()
    from pxvm.runner import _policy_image
    a = photos[0]
    assert np.array_equal(_policy_image(a, w, h, policy)[..., :3], clip_crop_reference(a, w, h, short))


def test_crop_edges():
    """The edge pairs of the rule, against the reference: the short side equal to S (the image
    kept: a copy's crop) and one over it; odd differences (the floor of (h' - h) / 2); S under the
    crop (zeros centred, ceil on the pad side) on one axis and on both."""
    from pxvm.runner import _policy_image
    rng = np.random.default_rng(41)
    cases = [((224, 300), 224, 224, None),  # short 224 == S: kept, then cropped: rows 38..262
             ((225, 300), 224, 224, None),  # 225 -> 224: resized
             ((224, 301), 224, 224, None),  # an odd difference: top = 77 // 2 = 38
             ((223, 301), 224, 224, None),
             ((200, 300), 224, 224, 199),   # S under the crop on both sides? 199 x 298: pad across
             ((300, 200), 224, 224, 150),   # 225 x 150: a column cut, rows padded (ceil 37)
             ((301, 200), 223, 224, 150),   # odd widths: 225 - 223 = 2, pad 74 / 2
             ((5, 7), 6, 6, None)]
    for (h0, w0), w, h, short in cases:
        a = rng.integers(0, 256, size=(h0, w0, 3), dtype=np.uint8)
        policy = "crop" if short is None else "crop:short=%d" % short
        got = _policy_image(a, w, h, policy)
        want = clip_crop_reference(a, w, h, short)
        assert got.shape[:2] == want.shape[:2] == (h, w)
        assert np.array_equal(got[..., :3], want), (h0, w0, w, h, short)


def test_crop_policy_text():
    assert pxvm.ragged.canonical_policy("crop") == "crop:bicubic"
    assert pxvm.ragged.canonical_policy("crop:bilinear:short=256") == "crop:short=256:bilinear"
    assert pxvm.ragged.canonical_policy("crop:short=16777216") == "crop:short=16777216:bicubic"
    for bad, why in [("crop:short=0", "short takes a whole number 1..16777216, not '0'"),
                     ("crop:short=16777217", "not '16777217'"), ("crop:short=2:short=3", "'short' given twice"),
                     ("crop:8,8,8", "unknown filter '8,8,8'")]:
        with pytest.raises(pxvm.UsageError, match=why):
            pxvm.ragged.canonical_policy(bad)


# ---- the float rules ----------------------------------------------------------------------------

PRESET_VALUES = {"clip": (ref.OPENAI_CLIP_MEAN, ref.OPENAI_CLIP_STD), "imagenet": ((0.485, 0.456, 0.406), (0.229, 0.224, 0.225)),
                 "siglip": ((0.5,) * 3, (0.5,) * 3), "none": ((0.0,) * 3, (1.0,) * 3)}


def rule_values(u8, preset, rule):
    """NumPy's float32 values of bytes u8 (..., 3) by a rule: "float32" (isa/SPEC.md section 9:
    np.float32(u) * np.float32(1/255)) or "transformers4" (image_transforms.rescale: float64
    product, then float32), then (x - mean) / std in float32 (image_transforms.normalize)."""
    mean, std = (np.array(v, dtype=np.float32) for v in PRESET_VALUES[preset])
    if rule == "float32":
        x = u8.astype(np.float32) * np.float32(1 / 255)
    else:
        x = (u8.astype(np.float64) * (1 / 255)).astype(np.float32)
    return (x - mean) / std


@pytest.mark.parametrize("preset", sorted(PRESET_VALUES))
def test_both_rules_equal_numpy_on_every_byte(runner, preset):
    """A 28x28 image holding every byte in every channel (stretch to its own size: a copy), both
    rules, the exact bits of NumPy's transcription; the rules differ on some bytes."""
    u = (np.arange(28 * 28 * 3, dtype=np.int64).reshape(28, 28, 3) * 7 + np.arange(3)) % 256
    img = u.astype(np.uint8)
    assert all(len(np.unique(img[..., c])) == 256 for c in range(3))
    got = {}
    for rule in ("float32", "transformers4"):
        r = runner.tokens_batch([img], policy="stretch", size=(28, 28), layout="nhwc", merge=1, normalize=preset,
                                rule=rule)
        tiles = np.asarray(r.tokens).reshape(2, 2, P, P, 3).transpose(0, 2, 1, 3, 4).reshape(28, 28, 3)
        want = rule_values(img, preset, rule)
        assert np.array_equal(tiles.view(np.uint32), want.view(np.uint32)), (preset, rule)
        got[rule] = tiles.view(np.uint32)
    assert (got["float32"] != got["transformers4"]).any()


def test_rule_edge_pair_clip_channel_0():
    """clip, channel 0: byte 47 gives the same bits by both rules, 48 is the first that differs
    (0xBF8BB784 by float32, 0xBF8BB785 by transformers4), in NumPy and in pxvm."""
    u = np.arange(256, dtype=np.uint8)[:, None].repeat(3, axis=1)
    a, b = rule_values(u, "clip", "float32")[:, 0].view(np.uint32), \
        rule_values(u, "clip", "transformers4")[:, 0].view(np.uint32)
    assert a[47] == b[47] and int(np.nonzero(a != b)[0][0]) == 48
    assert (int(a[48]), int(b[48])) == (0xBF8BB784, 0xBF8BB785)
    f0 = pxvm.tokens.token_format("float32", "clip", "nchw", False, "float32")
    f1 = pxvm.tokens.token_format("float32", "clip", "nchw", False, "transformers4")
    assert (f0.rule, f1.rule) == (0, 1)
    with pytest.raises(pxvm.UsageError, match="rule 'tf4' is none of float32, transformers4"):
        pxvm.tokens.token_format("float32", "clip", "nchw", False, "tf4")


def test_on_error_skip_leaves_out_whole_items(runner, tmp_path):
    """A file that does not decode: with layout "qwen2vl" (each image its own item) that image is
    left out; with temporal=2 its whole item (both frames) is, the failure naming the frame."""
    good = sorted(_photo_paths(), key=os.path.getsize)[:3]
    bad = tmp_path / "broken.png"
    bad.write_bytes(b"\x89PNG\r\n\x1a\n not a png")
    r = runner.tokens_batch([good[0], str(bad), good[1]], policy="dynamic", layout="qwen2vl", on_error="skip")
    assert r.index.tolist() == [0, 2] and [e.index for e in r.failures] == [1] and r.files == [good[0], good[1]]
    alone = runner.tokens_batch([good[0], good[1]], policy="dynamic", layout="qwen2vl")
    assert np.array_equal(np.asarray(r.tokens).view(np.uint32), np.asarray(alone.tokens).view(np.uint32))
    frames = [good[0], good[1], good[2], str(bad), good[0], good[2]]
    t = runner.tokens_batch(frames, policy="stretch", size=(56, 56), layout="qwen2vl", temporal=2, on_error="skip")
    assert t.index.tolist() == [0, 2] and [e.index for e in t.failures] == [3] and len(t) == 2
    assert t.tokens.shape == (2 * 16, 3 * 2 * P * P) and t.offsets.tolist() == [0, 16, 32]


def test_qwen2vl_error_names_the_callers_image(runner):
    """layout "qwen2vl" passes each image twice to the library: an image the rule refuses (aspect
    over 200:1) is still named by its index in the caller's list."""
    ok, thin = np.zeros((40, 40, 3), np.uint8), np.zeros((1, 201, 3), np.uint8)
    with pytest.raises(pxvm.Unlinkable, match=r"^image 1: .*201x1") as e:
        runner.tokens_batch([ok, thin, ok], policy="dynamic", layout="qwen2vl")
    assert e.value.index == 1


def test_a_repeated_view_resized_once_gives_the_bytes_of_copies(runner, photos):
    """The CPU executor resizes a still image once for its T frames (the same view again); the
    tokens equal those of distinct copies of it, each resized (and a group mixing both)."""
    same = runner.tokens_batch(photos[:4], policy="dynamic", layout="qwen2vl")
    pairs = [x for a in photos[:4] for x in (a, a.copy())]
    copies = runner.tokens_batch(pairs, policy="dynamic", layout="qwen2vl", temporal=2)
    assert np.array_equal(np.asarray(same.tokens).view(np.uint32), np.asarray(copies.tokens).view(np.uint32))
    a = photos[0]
    mixed = runner.patches_batch([a, a, a.copy(), a, a], policy="stretch", size=(56, 28), temporal=5)
    one = runner.patches_batch([a], policy="stretch", size=(56, 28), merge=1)
    assert all(np.array_equal(np.asarray(mixed.tokens)[:, f], np.asarray(one.tokens)) for f in range(5))
