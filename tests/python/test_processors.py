"""pxvm.processors against Pillow + NumPy transcriptions of transformers 4.x's slow processors
(tests/python/reference_hf4.py: Qwen2VLImageProcessor._preprocess/preprocess,
CLIPImageProcessor.preprocess, SiglipImageProcessor.preprocess, image_transforms' resize,
rescale, normalize and center_crop; the files and functions are cited there).

Every float is compared by its bits (.view(uint32)): 0 may differ, on real photos of mixed sizes
and modes (RGB, grey, palette, RGBA; PNG and JPEG), both rules (transformers4, float32), the cpu
executor and, where a GPU is present (the GPU check), the cuda one (tensors in, tokens written on
the GPU). Also: a video (frames of two photos, an odd count padded), the input kinds (PIL, paths,
arrays, tensors, batches), the return types (pt, np, None; device) and refused arguments.
"""
import glob
import os
import pickle

import numpy as np
import pytest
from PIL import Image

import pxvm
import reference_hf4 as ref
from conftest import ROOT

torch = pytest.importorskip("torch")

PHOTO_FILES = ([os.path.join(ROOT, "programs", "data", "chelsea.png")] +
               sorted(glob.glob(os.path.join(ROOT, "tests", "data", "photos", "*.png")) +
                      glob.glob(os.path.join(ROOT, "tests", "data", "photos", "*.jpg"))))
# build/photos (tests/bench/photos.sh) when present: more sizes, JPEGs, palette and RGBA PNGs
MORE = ["Dune.jpg", "HappyFish.jpg", "green_palette.png", "chicky_512.png", "templ.png", "left01.jpg", "butterfly.jpg",
        "messi5.jpg", "building.jpg", "starry_night.jpg"]
PHOTO_FILES += [p for p in (os.path.join(ROOT, "build", "photos", f) for f in MORE) if os.path.exists(p)]

EXECUTORS = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(),
                                                                     reason="needs a CUDA device"))]
RULES = ["transformers4", "float32"]


def _photos():
    out = [Image.open(p) for p in PHOTO_FILES]
    for im in out:
        im.load()
    # real photos of more sizes that every machine has (python3-skimage's data, installed by make deps)
    # (the GPU machine has no skimage: it has build/photos)
    try:
        import skimage.data
        out += [Image.fromarray(getattr(skimage.data, n)()) for n in ("coffee", "hubble_deep_field", "page", "text")]
    except ImportError:
        pass
    rgb = out[0].convert("RGB")
    # the modes the committed photos lack, made of a real photo: palette, RGBA (alpha varying), grey+alpha
    rgba = rgb.convert("RGBA")
    rgba.putalpha(Image.linear_gradient("L").resize(rgb.size))
    out += [rgb.quantize(64), rgba, rgb.convert("LA")]
    return out


PHOTOS = _photos()


def bits_equal(got, want, what):
    got = got.cpu().numpy() if isinstance(got, torch.Tensor) else np.asarray(got)
    assert got.shape == want.shape, "%s: shape %s, want %s" % (what, got.shape, want.shape)
    assert got.dtype == want.dtype, "%s: dtype %s, want %s" % (what, got.dtype, want.dtype)
    if got.dtype == np.float32:
        differ = got.view(np.uint32) != want.view(np.uint32)
    else:
        differ = got != want
    assert not differ.any(), "%s: %d of %d values differ" % (what, int(differ.sum()), differ.size)


def assert_same(got, want):
    assert sorted(got.keys()) == sorted(want.keys())
    for k in want:
        bits_equal(got[k], want[k], k)


def test_photos_are_mixed():
    """The set is what the checks need: >= 8 sizes, grey, palette and RGBA among the modes."""
    modes = {im.mode for im in PHOTOS}
    assert {"RGB", "L", "P", "RGBA"} <= modes, modes
    assert len({im.size for im in PHOTOS}) >= 8, sorted({im.size for im in PHOTOS})


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("rule", RULES)
def test_qwen2vl_equals_reference(executor, rule):
    proc = pxvm.processors.Qwen2VLImageProcessor(executor=executor, rule=rule)
    device = "cuda" if executor == "cuda" else None
    got = proc(PHOTOS, return_tensors="pt", device=device)
    if device:
        assert got["pixel_values"].is_cuda and got["image_grid_thw"].is_cuda
    assert_same(got, ref.qwen2vl(PHOTOS, rule=rule))


@pytest.mark.parametrize("executor", EXECUTORS)
def test_qwen2vl_settings_equal_reference(executor):
    """Qwen2.5-VL's settings as a preprocessor_config.json gives them (from_dict), smaller
    max_pixels and another merge/patch, min_pixels over the small photos' areas."""
    cfg = {"min_pixels": 3136, "max_pixels": 12845056, "patch_size": 14, "temporal_patch_size": 2, "merge_size": 2,
           "image_mean": ref.OPENAI_CLIP_MEAN, "image_std": ref.OPENAI_CLIP_STD,
           "image_processor_type": "Qwen2VLImageProcessor", "processor_class": "Qwen2_5_VLProcessor"}
    proc = pxvm.processors.Qwen2VLImageProcessor.from_dict(cfg, executor=executor)
    some = PHOTOS[:6]
    assert_same(proc(some, return_tensors="np"), ref.qwen2vl(some, max_pixels=12845056))
    proc = pxvm.processors.Qwen2_5_VLImageProcessor(executor=executor, max_pixels=100000, min_pixels=90000,
                                                     merge_size=3, patch_size=16)
    assert_same(proc(some, return_tensors="np"),
                ref.qwen2vl(some, max_pixels=100000, min_pixels=90000, merge_size=3, patch_size=16))
    # another rescale (the tiles and the rule's table instead of the executor's values)
    for rule in RULES:
        other = pxvm.processors.Qwen2VLImageProcessor(executor=executor, rule=rule, rescale_factor=1 / 256,
                                                      temporal_patch_size=3)
        assert_same(other(some, return_tensors="np"),
                    ref.qwen2vl(some, rule=rule, rescale_factor=1 / 256, temporal_patch_size=3))
    # call-time overrides, as transformers' preprocess(**kwargs)
    assert_same(proc(some, return_tensors="np", min_pixels=3136, max_pixels=50176, merge_size=2, patch_size=14),
                ref.qwen2vl(some, max_pixels=50176))


def _video_frames(n):
    """n frames 320x240, alternating two real photos (Pillow's bicubic resize to one size)."""
    a = np.asarray(PHOTOS[0].convert("RGB").resize((320, 240), Image.BICUBIC))
    b = np.asarray(Image.open(os.path.join(ROOT, "tests", "data", "photos", "rocket.jpg")).convert("RGB")
                   .resize((320, 240), Image.BICUBIC))
    return [a if i % 2 == 0 else b for i in range(n)]


@pytest.mark.parametrize("executor", EXECUTORS)
def test_qwen2vl_video_equals_reference(executor):
    """videos=: an odd frame count (padded with the last frame), a list of frames and an
    (F, H, W, C) array, together with images in one call."""
    three, four = _video_frames(3), _video_frames(4)
    proc = pxvm.processors.Qwen2VLImageProcessor(executor=executor)
    got = proc(images=PHOTOS[:2], videos=[three, np.stack(four)], return_tensors="pt")
    want = ref.qwen2vl(PHOTOS[:2], videos=[three, four])
    assert_same(got, want)
    assert want["video_grid_thw"].tolist() == [[2, 18, 22], [2, 18, 22]]  # 3 frames -> t = 2 (padded)
    only = proc(videos=np.stack(three), return_tensors="np")  # one video as an (F, H, W, C) array
    assert_same(only, ref.qwen2vl(videos=[three]))


def test_qwen2vl_video_of_mixed_sizes_refused():
    frames = [_video_frames(1)[0], np.asarray(PHOTOS[0].convert("RGB"))]
    proc = pxvm.processors.Qwen2VLImageProcessor(executor="cpu")
    with pytest.raises(pxvm.UsageError, match=r"video 0: frames of several sizes \(320x240, 451x300\)"):
        proc(videos=[frames])


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("rule", RULES)
def test_clip_equals_reference(executor, rule):
    proc = pxvm.processors.CLIPImageProcessor(executor=executor, rule=rule)
    device = "cuda" if executor == "cuda" else None
    got = proc(PHOTOS, return_tensors="pt", device=device)
    assert got.pixel_values.shape == (len(PHOTOS), 3, 224, 224)
    assert_same(got, ref.clip(PHOTOS, rule=rule))


@pytest.mark.parametrize("executor", EXECUTORS)
def test_clip_settings_equal_reference(executor):
    """LLaVA-1.5's CLIP ViT-L/14-336 (from an old-style config: size an int, the shortest edge),
    a crop larger than the resized image (zero padding), a non-square crop."""
    cfg = {"crop_size": 336, "do_center_crop": True, "do_normalize": True, "do_resize": True,
           "feature_extractor_type": "CLIPFeatureExtractor", "image_mean": ref.OPENAI_CLIP_MEAN,
           "image_std": ref.OPENAI_CLIP_STD, "resample": 3, "size": 336}
    proc = pxvm.processors.CLIPImageProcessor.from_dict(cfg, executor=executor)
    some = PHOTOS[:6]
    assert_same(proc(some, return_tensors="np"),
                ref.clip(some, size={"shortest_edge": 336}, crop_size={"height": 336, "width": 336}))
    proc = pxvm.processors.CLIPImageProcessor(executor=executor, size={"shortest_edge": 200},
                                              crop_size={"height": 256, "width": 180})
    assert_same(proc(some, return_tensors="np"),
                ref.clip(some, size={"shortest_edge": 200}, crop_size={"height": 256, "width": 180}))
    # a resize to (height, width) before the crop, another rescale: the resized pixels, then the table
    for kw in (dict(size={"height": 256, "width": 300}), dict(rescale_factor=1 / 256)):
        for rule in RULES:
            proc = pxvm.processors.CLIPImageProcessor(executor=executor, rule=rule, **kw)
            assert_same(proc(some, return_tensors="np"), ref.clip(some, rule=rule, **kw))


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("rule", RULES)
def test_siglip_equals_reference(executor, rule):
    proc = pxvm.processors.SiglipImageProcessor(executor=executor, rule=rule)
    device = "cuda" if executor == "cuda" else None
    got = proc(PHOTOS, return_tensors="pt", device=device)
    assert got.pixel_values.shape == (len(PHOTOS), 3, 224, 224)
    assert_same(got, ref.siglip(PHOTOS, rule=rule))
    proc = pxvm.processors.SiglipImageProcessor(executor=executor, rule=rule, size={"height": 384, "width": 384},
                                                resample=2, do_normalize=False)
    assert_same(proc(PHOTOS[:4], return_tensors="np"),
                ref.siglip(PHOTOS[:4], rule=rule, size={"height": 384, "width": 384}, resample=Image.BILINEAR,
                           do_normalize=False))
    # a size of 7 x 7 tiles of 50 (put back together), a size of tiles of one texel (331 is a prime),
    # another rescale (the resized pixels, then the rule's table)
    for kw in (dict(size={"height": 150, "width": 350}), dict(size={"height": 331, "width": 224}),
               dict(size={"height": 100, "width": 120}, rescale_factor=1 / 256)):
        proc = pxvm.processors.SiglipImageProcessor(executor=executor, rule=rule, **kw)
        assert_same(proc(PHOTOS[:4], return_tensors="np"), ref.siglip(PHOTOS[:4], rule=rule, **kw))


@pytest.mark.parametrize("executor", EXECUTORS)
def test_input_kinds_give_the_same_values(executor):
    """Paths (decoded by the library), RGB and RGBA arrays (alpha dropped, as convert("RGB")),
    grey arrays, torch tensors (on the GPU with the cuda executor), a (B, H, W, C) batch and one
    image not in a list all give the PIL images' values."""
    proc = pxvm.processors.Qwen2VLImageProcessor(executor=executor)
    files = [p for p in PHOTO_FILES if p.endswith((".png", ".jpg"))][:5]
    want = ref.qwen2vl([Image.open(p) for p in files])
    assert_same(proc(files, return_tensors="np"), want)
    rgba = [np.asarray(Image.open(p).convert("RGBA")) for p in files]
    assert_same(proc(rgba, return_tensors="np"), want)
    dev = "cuda" if executor == "cuda" else "cpu"
    tensors = [torch.from_numpy(np.ascontiguousarray(a[..., :3])).to(dev) for a in rgba]
    got = proc(tensors, return_tensors="pt")
    assert got.pixel_values.device.type == dev and got.image_grid_thw.device.type == dev
    assert_same(got, want)
    grey = np.asarray(PHOTOS[1].convert("L"))
    assert_same(proc(grey, return_tensors="np"), ref.qwen2vl([Image.fromarray(grey)]))
    batch = np.stack([np.asarray(PHOTOS[0].convert("RGB"))] * 3)
    clip = pxvm.processors.CLIPImageProcessor(executor=executor)
    assert_same(clip(batch, return_tensors="np"), ref.clip([PHOTOS[0]] * 3))
    # nested lists and lists of batches are flattened (transformers' make_flat_list_of_images)
    assert_same(clip([[PHOTOS[0]], [batch[:2], PHOTOS[0]]], return_tensors="np"), ref.clip([PHOTOS[0]] * 4))


def test_return_types():
    proc = pxvm.processors.SiglipImageProcessor(executor="cpu")
    img = PHOTOS[0]
    for rt, kind in ((None, np.ndarray), ("np", np.ndarray), ("pt", torch.Tensor)):
        out = proc(img, return_tensors=rt)
        assert isinstance(out, dict) and isinstance(out, pxvm.processors.BatchFeature)
        assert isinstance(out["pixel_values"], kind) and out.pixel_values is out["pixel_values"]
    out = proc([img, img], return_tensors="pt", device="cpu")
    assert out.pixel_values.device.type == "cpu" and out.pixel_values.shape == (2, 3, 224, 224)
    half = out.to(torch.float16)
    assert half.pixel_values.dtype == torch.float16
    q = pxvm.processors.Qwen2VLImageProcessor(executor="cpu")(img, return_tensors="pt").to(torch.bfloat16)
    assert q.pixel_values.dtype == torch.bfloat16 and q.image_grid_thw.dtype == torch.int64  # ints stay
    with pytest.raises(AttributeError, match="no key 'nope'"):
        out.nope
    with pytest.raises(pxvm.UsageError, match="return_tensors='np' with device='cuda'"):
        proc(img, return_tensors="np", device="cuda")
    with pytest.raises(pxvm.UsageError, match="return_tensors='tf' is none of"):
        proc(img, return_tensors="tf")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_device_cuda_from_host_images():
    """device="cuda": host images in, the tokens on the GPU (written there by the cuda executor;
    moved there by the cpu one), the same bits."""
    want = ref.qwen2vl(PHOTOS[:3])
    for executor in ("cuda", "cpu"):
        got = pxvm.processors.Qwen2VLImageProcessor(executor=executor)(PHOTOS[:3], return_tensors="pt",
                                                                     device="cuda")
        assert got.pixel_values.is_cuda
        assert_same(got, want)
    got = pxvm.processors.CLIPImageProcessor(executor="cuda")(PHOTOS[:3], return_tensors="pt", device="cuda")
    assert got.pixel_values.is_cuda
    assert_same(got, ref.clip(PHOTOS[:3]))


def test_bad_arguments_are_refused_by_name():
    P = pxvm.processors
    with pytest.raises(pxvm.UsageError, match="keyword argument shortest_edge not supported"):
        P.Qwen2VLImageProcessor(shortest_edge=3)
    with pytest.raises(pxvm.UsageError, match="keyword arguments do_pad, image_grid_pinpoints not supported"):
        P.CLIPImageProcessor(image_grid_pinpoints=[[336, 672]], do_pad=True)
    with pytest.raises(pxvm.UsageError, match="keyword argument do_center_crop not supported"):
        P.SiglipImageProcessor(executor="cpu")(PHOTOS[0], do_center_crop=True)
    # an unknown do_* flag set False asks for nothing (a config's "do_pad": false): taken; True: refused
    clip = P.CLIPImageProcessor.from_dict({"do_pad": False, "crop_size": 224, "size": 224}, executor="cpu")
    assert_same(clip(PHOTOS[:2], return_tensors="np", do_thing=False), ref.clip(PHOTOS[:2]))
    with pytest.raises(pxvm.UsageError, match="keyword argument do_pad not supported"):
        P.CLIPImageProcessor.from_dict({"do_pad": True})
    with pytest.raises(pxvm.UsageError, match="keyword argument crop_pct not supported"):
        P.CLIPImageProcessor.from_dict({"crop_pct": 0.9, "image_processor_type": "CLIPImageProcessor"})
    with pytest.raises(pxvm.UsageError, match="rule='float64' is none of transformers4, float32"):
        P.CLIPImageProcessor(rule="float64")
    with pytest.raises(pxvm.UsageError, match="resample=9 is none of PIL's filters"):
        P.CLIPImageProcessor(resample=9)
    with pytest.raises(pxvm.UsageError, match=r"image_mean=\[0.5, 0.5\]: a float or 3 floats"):
        P.SiglipImageProcessor(image_mean=[0.5, 0.5])
    with pytest.raises(pxvm.UsageError, match="do_resize=False: pxvm.processors always resize"):
        P.Qwen2VLImageProcessor(do_resize=False)
    with pytest.raises(pxvm.UsageError, match="data_format='channels_last'"):
        P.SiglipImageProcessor(executor="cpu")(PHOTOS[0], data_format="channels_last")
    with pytest.raises(pxvm.UsageError, match="max_pixels=0: a positive integer"):
        P.Qwen2VLImageProcessor(max_pixels=0)
    with pytest.raises(pxvm.UsageError, match="no images and no videos"):
        P.Qwen2VLImageProcessor(executor="cpu")()


def test_settings_at_their_edges():
    """min_pixels == max_pixels is accepted, min_pixels = max_pixels + 1 refused by the library's
    rule naming both; a crop side of 16384 accepted, 16385 refused naming it."""
    P = pxvm.processors
    proc = P.Qwen2VLImageProcessor(executor="cpu", min_pixels=50176, max_pixels=50176)
    assert_same(proc(PHOTOS[:2], return_tensors="np"), ref.qwen2vl(PHOTOS[:2], min_pixels=50176, max_pixels=50176))
    with pytest.raises(pxvm.UsageError, match="50177"):
        P.Qwen2VLImageProcessor(min_pixels=50177, max_pixels=50176)
    P.CLIPImageProcessor(crop_size=16384)
    with pytest.raises(pxvm.UsageError, match=r"crop_size: 16385 is no side"):
        P.CLIPImageProcessor(crop_size=16385)


def test_a_bad_file_is_named():
    proc = pxvm.processors.CLIPImageProcessor(executor="cpu")
    with pytest.raises(pxvm.Error, match="nope.png"):
        proc([PHOTO_FILES[0], os.path.join(ROOT, "nope.png")])


def test_pickled_processor_works():
    """A processor pickles without its runners (DataLoader workers with spawn) and gives the same
    values after, with its settings."""
    proc = pxvm.processors.Qwen2VLImageProcessor(executor="cpu", max_pixels=200000)
    want = proc(PHOTOS[:2], return_tensors="np")
    again = pickle.loads(pickle.dumps(proc))
    assert again.max_pixels == 200000 and again.rule == "transformers4"
    assert_same(again(PHOTOS[:2], return_tensors="np"), want)


def test_paths_decoded_with_warnings_at_the_callers_line(tmp_path):
    """Paths are decoded by the library (a pool of threads); bytes after a JPEG's end are no damage
    but a warning, given at the caller's line (not inside pxvm), and the values are the photo's."""
    src = os.path.join(ROOT, "tests", "data", "photos", "rocket.jpg")
    padded = tmp_path / "rocket+junk.jpg"
    padded.write_bytes(open(src, "rb").read() + b"junk after the end")
    proc = pxvm.processors.SiglipImageProcessor(executor="cpu")
    with pytest.warns(UserWarning, match="18 bytes after the JPEG's end-of-image marker") as rec:
        got = proc([str(padded), src], return_tensors="np")
    assert [w.filename for w in rec] == [__file__]
    assert_same(got, ref.siglip([Image.open(src), Image.open(src)]))


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("name", ["Megamind.avi", "tree.avi"])
def test_qwen2vl_video_file_with_camera_motion_equals_reference(executor, name):
    """A real clip with camera motion, its frames read by pxvm.video as Qwen2-VL samples them (2 a
    second), through the processor == the transcription of transformers 4.x on the same frames."""
    path = os.path.join(ROOT, "build", "data", name)
    if not os.path.exists(path):
        pytest.skip("%s: make video-data" % path)
    try:
        frames = list(pxvm.video.frames(path, fps=2.0))[:7]  # odd: the last frame repeated
    except pxvm.Unavailable as e:  # a machine without FFmpeg's libraries (the GPU machine)
        pytest.skip(str(e))
    proc = pxvm.processors.Qwen2VLImageProcessor(executor=executor)
    got = proc(videos=[frames], return_tensors="pt", device="cuda" if executor == "cuda" else None)
    assert_same(got, ref.qwen2vl(videos=[frames]))
    assert got["video_grid_thw"][0, 0].item() == 4
