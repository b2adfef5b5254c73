"""Ragged batches through one executor call (pxvm_runner_ragged, python/pxvm/ragged.py):
Runner.patches_batch and tokens_batch with policy "dynamic" on real photos (programs/data,
skimage.data: RGB, grey, RGBA with real alpha, large) and synthetic sizes (1xN, Nx1, primes).

- RGBA8 tiles equal Pillow's Image.resize of the image as RGB(A) (BICUBIC, the policy's filter)
  cut into patch x patch tiles, byte for byte; strided views, CHW, torch tensors and file paths
  (decoded by pxvm on a thread pool) give the same bytes as contiguous arrays (RGBA band by band:
  RESIZE's rule, isa/SPEC.md; Image.resize premultiplies RGBA by alpha);
- float tokens (float32, float16, bfloat16; nchw, nhwc, flat; alpha) equal NumPy's float32
  (u8 * float32(1/255) - mean) / std, then float16 / bfloat16 round to nearest even, bit for bit;
- out= is written in place, a wrong one (shape, dtype, contiguity, read-only) is a UsageError
  naming what differs and is not written; an image's error names its index and file, returns
  nothing and writes nothing;
- on the cuda executor (PXVM_TEST_EXECUTOR=cuda with a GPU), CUDA tensors in, CUDA tensors out,
  equal to the CPU executor's bytes.
"""
import os

import numpy as np
import pytest
from PIL import Image

import pxvm
from conftest import EXECUTOR, PHOTO, ROOT

skdata = pytest.importorskip("skimage.data")

UNIFORM = os.path.join(ROOT, "programs", "uniform.json")
P = 16
FILTERS = {"bicubic": Image.BICUBIC, "bilinear": Image.BILINEAR, "lanczos": Image.LANCZOS}
CLIP = (np.array((0.48145466, 0.4578275, 0.40821073), np.float32),
        np.array((0.26862954, 0.26130258, 0.27577711), np.float32))


@pytest.fixture(scope="module")
def runner():
    with pxvm.Runner(pxvm.Program.from_plan(UNIFORM), executor=EXECUTOR) as r:
        yield r


def _synthetic():
    rng = np.random.default_rng(40)
    shapes = [(1, 150, 3), (150, 1, 3), (1, 1, 3), (97, 89, 3), (211, 7, 3), (7, 211), (101, 103, 4), (53, 61, 1)]
    return [rng.integers(0, 256, size=s, dtype=np.uint8) for s in shapes]


@pytest.fixture(scope="module")
def images():
    """Real photos (RGB, grey, RGBA with real alpha, a large one) and synthetic sizes."""
    photos = [np.asarray(Image.open(PHOTO).convert("RGB")), skdata.astronaut(), skdata.coffee(), skdata.camera(),
              skdata.logo(), skdata.rocket(), skdata.page(), skdata.retina()]
    return photos + _synthetic()


def pillow_rgba(a, w, h, filt="bicubic"):
    """Pillow's resize of image a (H, W), (H, W, 1|3|4) to w x h, as RGBA. RGBA band by band (each
    band an L image): RESIZE's rule; Image.resize premultiplies RGBA by alpha (isa/SPEC.md, RESIZE)."""
    a = np.asarray(a)
    if a.ndim == 3 and a.shape[2] == 1:
        a = a[:, :, 0]
    if a.ndim == 3 and a.shape[2] == 4:
        return np.stack([pillow_rgba(a[:, :, c], w, h, filt)[:, :, 0] for c in range(4)], axis=2)
    mode = {2: "L", 3: "RGB", 4: "RGBA"}[a.ndim if a.ndim == 2 else a.shape[2]]
    return np.asarray(Image.fromarray(a, mode).resize((w, h), FILTERS[filt]).convert("RGBA"))


def tiles(img, p=P):
    """(h, w, 4) -> (h/p * w/p, p, p, 4), row-major tiles."""
    h, w = img.shape[:2]
    return img.reshape(h // p, p, w // p, p, 4).transpose(0, 2, 1, 3, 4).reshape(-1, p, p, 4)


def check_against_pillow(rag, imgs, filt="bicubic"):
    assert len(rag) == len(imgs) and rag.offsets[0] == 0
    assert rag.tokens.shape == (int(rag.offsets[-1]), P, P, 4) and rag.tokens.dtype == np.uint8
    for i, a in enumerate(imgs):
        (w, h), (w2, h2) = rag.sizes[i].tolist()
        assert (h, w) == pxvm.ragged.image_hw(a)
        assert rag.grid[i].tolist() == [1, h2 // P, w2 // P]
        assert rag.offsets[i + 1] - rag.offsets[i] == (h2 // P) * (w2 // P)
        assert np.array_equal(np.asarray(rag[i]), tiles(pillow_rgba(a, w2, h2, filt))), (i, np.shape(a))


@pytest.mark.parametrize("policy,filt", [("dynamic", "bicubic"), ("dynamic:merge=1,min=1,max=60000:bilinear",
                                                                  "bilinear"),
                                         ("dynamic:merge=2,min=3136,max=200000:lanczos", "lanczos")])
def test_tiles_equal_pillow_byte_for_byte(runner, images, policy, filt):
    rag = runner.patches_batch(images, policy=policy)
    check_against_pillow(rag, images, filt)
    assert rag.files is None
    # sizes by the library's rule; position ids (t, h, w) row-major in patches
    for i, a in enumerate(images):
        h, w = pxvm.ragged.image_hw(a)
        assert tuple(rag.sizes[i, 1]) == pxvm.dynamic_size(policy, P, w, h)
        gh, gw = rag.grid[i, 1], rag.grid[i, 2]
        hh, ww = np.meshgrid(np.arange(gh), np.arange(gw), indexing="ij")
        want = np.stack([np.zeros(gh * gw, np.int64), hh.ravel(), ww.ravel()])
        assert np.array_equal(rag.position_ids[:, rag.offsets[i]:rag.offsets[i + 1]], want)


def test_strided_views_chw_and_torch_equal_contiguous(runner, images):
    torch = pytest.importorskip("torch")
    a = skdata.coffee()
    big = np.zeros((2 * a.shape[0], 3 * a.shape[1], 4), np.uint8)
    big[::2, ::3, :3] = a
    views = [big[::2, ::3, :3],                             # row and pixel strides, a channel of 4 skipped
             np.ascontiguousarray(a.transpose(2, 0, 1)),   # (C, H, W)
             a[:, :, ::-1],                                 # a negative channel stride (BGR of a)
             a[::-1],                                       # a negative row stride
             skdata.camera()[:, :, None],                   # (H, W, 1)
             torch.from_numpy(a),                           # torch on the CPU
             torch.from_numpy(np.ascontiguousarray(a.transpose(2, 0, 1))).permute(1, 2, 0)]  # non-contiguous
    want = [a, a, np.ascontiguousarray(a[:, :, ::-1]), np.ascontiguousarray(a[::-1]), skdata.camera(), a, a]
    got = runner.patches_batch(views, policy="dynamic")
    ref = runner.patches_batch(want, policy="dynamic")
    assert np.array_equal(got.tokens, ref.tokens) and np.array_equal(got.offsets, ref.offsets)
    assert isinstance(got.tokens, torch.Tensor)  # a torch tensor among the images: torch out (issue 41)
    check_against_pillow(ref, want)
    # a (B, H, W, C) array and a torch batch are batches too
    b = np.stack([a, a[::-1]])
    for batch in (b, torch.from_numpy(b)):
        r = runner.patches_batch(batch, policy="dynamic")
        assert len(r) == 2 and np.array_equal(r[0], ref[0]) and np.array_equal(r[1], ref[3])


def _write_files(tmp_path):
    """Photos written as PNG (RGB, L, RGBA, palette) and JPEG; returns their paths."""
    paths = []
    for name, im in (("chelsea.png", Image.open(PHOTO).convert("RGB")), ("camera.png", Image.fromarray(skdata.camera())),
                     ("logo.png", Image.fromarray(skdata.logo(), "RGBA")),
                     ("coffee_p.png", Image.fromarray(skdata.coffee()).convert("P")),
                     ("astronaut.jpg", Image.fromarray(skdata.astronaut())),
                     ("page.jpg", Image.fromarray(skdata.page())),
                     ("rocket.jpg", Image.fromarray(skdata.rocket()))):
        p = str(tmp_path / name)
        im.save(p)
        paths.append(p)
    return paths


def test_paths_equal_arrays_and_pillow(runner, tmp_path):
    paths = _write_files(tmp_path)
    paths = paths + paths[::-1] + paths  # 21 files over the decode pool, each kept in its place
    rag = runner.patches_batch(paths, policy="dynamic")
    assert rag.files == paths
    arrays = [pxvm.load_image(p) for p in paths]
    ref = runner.patches_batch(arrays, policy="dynamic")
    assert np.array_equal(rag.tokens, ref.tokens) and np.array_equal(rag.sizes, ref.sizes)
    check_against_pillow(rag, arrays)
    # the PNGs decode as Pillow decodes them: equal to Pillow from the file itself
    png = [np.asarray(Image.open(p).convert("RGBA" if Image.open(p).mode == "RGBA" else "RGB")) for p in paths[:4]]
    check_against_pillow(runner.patches_batch(paths[:4], policy="dynamic"), png)
    # paths and arrays mixed, os.PathLike too
    import pathlib
    mixed = runner.patches_batch([arrays[0], pathlib.Path(paths[1]), arrays[2]], policy="dynamic")
    assert mixed.files == [None, paths[1], None]
    assert np.array_equal(mixed.tokens, ref.tokens[:int(ref.offsets[3])])


def _tokens_np(u8, dtype, layout, mean, std, alpha=False):
    """The float tokens of RGBA8 tiles (T, p, p, 4) by NumPy: float32 steps, then the dtype."""
    c = 4 if alpha else 3
    if alpha:
        mean, std = np.append(mean, np.float32(0)), np.append(std, np.float32(1))
    x = (u8[..., :c].astype(np.float32) * np.float32(1 / 255) - mean) / std  # (T, p, p, C)
    x = {"nchw": x.transpose(0, 3, 1, 2), "nhwc": x, "flat": x.transpose(0, 3, 1, 2).reshape(len(x), -1)}[layout]
    x = np.ascontiguousarray(x)
    if dtype == "float16":
        return x.astype(np.float16).view(np.uint16)
    if dtype == "bfloat16":
        u = x.view(np.uint32)
        return ((u + (np.uint32(0x7FFF) + ((u >> 16) & 1))) >> 16).astype(np.uint16)
    return x.view(np.uint32)


def _bits(t):
    """The bits of a result (NumPy or torch) as unsigned integers."""
    if type(t).__module__.startswith("torch"):
        import torch
        t = t.cpu()
        if t.dtype == torch.bfloat16:
            return t.view(torch.int16).numpy().view(np.uint16)
        t = t.numpy()
    return t.view(np.uint16 if t.itemsize == 2 else np.uint32)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "torch.bfloat16", "torch.float16"])
@pytest.mark.parametrize("layout", ["nchw", "nhwc", "flat"])
def test_float_tokens_bit_exact(runner, images, dtype, layout):
    if dtype.startswith("torch.") or dtype == "bfloat16":
        torch = pytest.importorskip("torch")
    arg = getattr(torch, dtype[6:]) if dtype.startswith("torch.") else dtype
    name = dtype.rpartition(".")[2]
    u8 = runner.patches_batch(images, policy="dynamic")
    t = runner.tokens_batch(images, policy="dynamic", dtype=arg, normalize="clip", layout=layout)
    assert isinstance(t, pxvm.Ragged)
    assert np.array_equal(t.offsets, u8.offsets) and np.array_equal(t.grid, u8.grid)
    assert np.array_equal(t.position_ids, u8.position_ids) and np.array_equal(t.sizes, u8.sizes)
    want = _tokens_np(u8.tokens, name, layout, *CLIP)
    if name == "bfloat16":  # NumPy has no bfloat16: a torch tensor, as pxvm.tokens gives it
        assert t.tokens.dtype == torch.bfloat16 and t.tokens.device.type == "cpu"
    else:
        assert t.tokens.dtype == np.dtype(name)
    assert tuple(t.tokens.shape) == want.shape
    assert np.array_equal(_bits(t.tokens), want)


def test_float_tokens_alpha_and_own_normalization(runner, images):
    mean, std = (0.5, 0.25, 0.125, 0.3), (0.2, 0.3, 0.4, 0.5)
    u8 = runner.patches_batch(images, policy="dynamic")
    t = runner.tokens_batch(images, policy="dynamic", normalize=(mean, std), alpha=True, layout="nhwc")
    want = _tokens_np(u8.tokens, "float32", "nhwc", np.array(mean[:3], np.float32), np.array(std[:3], np.float32))
    x = (u8.tokens.astype(np.float32) * np.float32(1 / 255) - np.array(mean, np.float32)) / np.array(std, np.float32)
    assert np.array_equal(_bits(t.tokens), x.view(np.uint32))
    assert np.array_equal(_bits(t.tokens)[..., :3], want)
    s = runner.tokens_batch(images, policy="dynamic", normalize="siglip")
    x = (u8.tokens[..., :3].astype(np.float32) * np.float32(1 / 255) - np.float32(0.5)) / np.float32(0.5)
    assert np.array_equal(s.tokens, x.transpose(0, 3, 1, 2))
    # one image: Runner.tokens with policy dynamic is tokens_batch's [0]
    one = runner.tokens(images[0], policy="dynamic", dtype="float16")
    assert np.array_equal(one, runner.tokens_batch(images[:1], policy="dynamic", dtype="float16").tokens)


def test_out_is_written_in_place(runner, images):
    u8 = runner.patches_batch(images, policy="dynamic")
    n = len(u8.tokens)
    out = np.zeros((n, P, P, 4), np.uint8)
    r = runner.patches_batch(images, policy="dynamic", out=out)
    assert r.tokens is out and np.array_equal(out, u8.tokens)
    f = np.zeros((n, 3 * P * P), np.float32)
    t = runner.tokens_batch(images, policy="dynamic", layout="flat", out=f)
    assert t.tokens is f and np.array_equal(f.view(np.uint32), _tokens_np(u8.tokens, "float32", "flat", *CLIP))
    bits = np.zeros((n, 3, P, P), np.uint16)  # bfloat16 bits into a uint16 NumPy array
    assert runner.tokens_batch(images, policy="dynamic", dtype="bfloat16", out=bits).tokens is bits
    assert np.array_equal(bits, _tokens_np(u8.tokens, "bfloat16", "nchw", *CLIP))
    torch = pytest.importorskip("torch")
    tb = torch.zeros((n, P, P, 3), dtype=torch.bfloat16)
    assert runner.tokens_batch(images, policy="dynamic", dtype=torch.bfloat16, layout="nhwc", out=tb).tokens is tb
    assert np.array_equal(_bits(tb), _tokens_np(u8.tokens, "bfloat16", "nhwc", *CLIP))


def test_a_wrong_out_is_refused_and_not_written(runner, images):
    torch = pytest.importorskip("torch")
    n = int(runner.patches_batch(images, policy="dynamic").offsets[-1])
    cases = [  # (out, dtype, what the message names)
        (np.full((n + 1, 3, P, P), 7, np.float32), "float32", r"shape \(%d, 3, 16, 16\), got \(%d, 3, 16, 16\)" % (n, n + 1)),
        (np.full((n, 3, P, P), 7, np.float64), "float32", "got a NumPy array of float64"),
        (np.full((n, P, P, 3), 7, np.float32).transpose(0, 3, 1, 2), "float32", "not contiguous"),
        (np.full((n, 3, P, P), 7, np.float32), "float16", "got a NumPy array of float32"),
        (np.full((n, 3, P, P), 7, np.float16), "bfloat16", "a uint16 array takes the bits"),
        (torch.full((n, 3, P, P), 7, dtype=torch.float16), "bfloat16", "got a torch tensor of torch.float16"),
        (torch.full((n, 3, P, P + 1), 7, dtype=torch.bfloat16), "bfloat16", r"got \(%d, 3, 16, 17\)" % n),
    ]
    ro = np.full((n, 3, P, P), 7, np.float32)
    ro.flags.writeable = False
    cases.append((ro, "float32", "read-only"))
    for out, dtype, words in cases:
        before = out.clone() if hasattr(out, "clone") else out.copy()
        with pytest.raises(pxvm.UsageError, match=words):
            runner.tokens_batch(images, policy="dynamic", dtype=dtype, out=out)
        assert (torch.equal(out, before) if hasattr(out, "clone") else np.array_equal(out, before))
    # the bound itself: exactly the shape is taken, one token more or less is refused
    for m in (n - 1, n + 1):
        with pytest.raises(pxvm.UsageError, match=r"uint8 array of shape \(%d, 16, 16, 4\), got \(%d, " % (n, m)):
            runner.patches_batch(images, policy="dynamic", out=np.zeros((m, P, P, 4), np.uint8))
    assert len(runner.patches_batch(images, policy="dynamic", out=np.zeros((n, P, P, 4), np.uint8)).tokens) == n


def test_a_bad_file_in_the_middle_is_named_and_nothing_is_written(runner, tmp_path):
    paths = _write_files(tmp_path)
    bad = tmp_path / "bad.jpg"
    bad.write_bytes(open(paths[4], "rb").read()[:2000])  # a truncated JPEG
    batch = paths[:3] + [str(bad)] + paths[3:]
    n = int(runner.patches_batch(paths, policy="dynamic").offsets[-1]) + 10_000
    out = np.full((n, P, P, 4), 9, np.uint8)
    with pytest.raises(pxvm.Malformed, match=r"^image 3 \('%s'\): malformed: " % str(bad).replace("\\", "\\\\")) as e:
        runner.patches_batch(batch, policy="dynamic", out=out)
    assert e.value.index == 3 and e.value.file == str(bad)
    assert (out == 9).all()
    missing = str(tmp_path / "missing.png")
    with pytest.raises(pxvm.PxIOError) as e:
        runner.tokens_batch(paths[:1] + [missing], policy="dynamic")
    assert e.value.index == 1 and e.value.file == missing and "image 1 ('%s')" % missing in str(e.value)
    # two bad files: the first in the batch's order is named
    with pytest.raises(pxvm.Error) as e:
        runner.patches_batch(paths[:2] + [missing, str(bad)], policy="dynamic")
    assert e.value.index == 2


def test_errors_of_arrays_name_the_image(runner):
    ok = np.zeros((32, 32, 3), np.uint8)
    # the rule's bound: 200:1 is taken, 201:1 refused, named by index
    r = runner.patches_batch([ok, np.zeros((1, 200, 3), np.uint8), np.zeros((200, 1), np.uint8)], policy="dynamic")
    assert len(r) == 3
    with pytest.raises(pxvm.Unlinkable, match=r"^image 2: unlinkable: a 1x201 image: policy dynamic takes aspect") as e:
        runner.patches_batch([ok, ok, np.zeros((201, 1), np.uint8)], policy="dynamic")
    assert e.value.index == 2 and e.value.file is None
    with pytest.raises(pxvm.UsageError, match=r"^image 1: .*images are .* got shape \(32, 32, 2\)"):
        runner.patches_batch([ok, np.zeros((32, 32, 2), np.uint8)], policy="dynamic")
    with pytest.raises(TypeError, match="image 1: pxvm: images must be uint8"):
        runner.tokens_batch([ok, np.zeros((32, 32), np.float32)], policy="dynamic")
    with pytest.raises(pxvm.UsageError, match="policy dynamic does not take fixations"):
        runner.tokens_batch([ok], policy="dynamic", fixations=np.zeros((1, 2)))
    with pytest.raises(pxvm.UsageError, match="dtype 'float64' is none of"):
        runner.tokens_batch([ok], policy="dynamic", dtype="float64")
    with pytest.raises(pxvm.UsageError, match="a ragged batch needs at least one image"):
        runner.tokens_batch([], policy="dynamic")


def test_out_overlapping_an_image_is_refused_and_not_written(runner):
    """out= whose memory holds an image (the caller's buffer reused) is a UsageError naming the
    image, nothing written: the tiles were written while the image was read (silently wrong)."""
    img = np.random.default_rng(7).integers(0, 256, size=(40, 50, 3), dtype=np.uint8)
    n, *tile = runner.tokens_batch([img], policy="dynamic").tokens.shape
    out = np.zeros((2 * n, *tile), np.float32)
    a = out.reshape(-1).view(np.uint8)[-img.size:].reshape(img.shape)  # the last bytes of out
    a[:] = img
    before = out.copy()
    with pytest.raises(pxvm.UsageError, match=r"^image 1: .*overlaps the image's pixels") as e:
        runner.tokens_batch([img, a], policy="dynamic", out=out)
    assert e.value.index == 1
    assert np.array_equal(out.view(np.uint8), before.view(np.uint8))


def test_a_0d_array_is_no_batch_and_a_1_image_batch_is(runner):
    """A 0-d array (np.array(5), a torch scalar) has no batch axis: a UsageError naming it (was an
    IndexError from shape[0]); a (1, H, W, C) array is a batch of one image."""
    torch = pytest.importorskip("torch")
    for scalar in (np.array(5, np.uint8), torch.tensor(5, dtype=torch.uint8)):
        with pytest.raises(pxvm.UsageError, match=r"a \(B, \.\.\.\) array, not a 0-d (ndarray|Tensor)"):
            runner.tokens_batch(scalar, policy="dynamic")
    r = runner.patches_batch(np.zeros((1, 32, 48, 3), np.uint8), policy="dynamic")
    assert len(r) == 1 and tuple(r.sizes[0, 0]) == (48, 32)


# ---- the cuda executor: CUDA tensors in, CUDA tensors out -------------------------------------

def _cuda():
    torch = pytest.importorskip("torch")
    if EXECUTOR != "cuda" or not torch.cuda.is_available():
        pytest.skip("needs PXVM_TEST_EXECUTOR=cuda and a CUDA device")
    return torch


def test_cuda_tensors_equal_the_cpu_executor(images):
    torch = _cuda()
    with pxvm.Runner(pxvm.Program.from_plan(UNIFORM), executor="cpu") as cpu, \
            pxvm.Runner(pxvm.Program.from_plan(UNIFORM), executor="cuda") as gpu:
        want = cpu.patches_batch(images, policy="dynamic")
        dev = [torch.from_numpy(np.ascontiguousarray(a)).cuda() for a in images]
        dev[0] = torch.from_numpy(np.ascontiguousarray(images[0].transpose(2, 0, 1))).cuda().permute(1, 2, 0)
        got = gpu.patches_batch(dev, policy="dynamic")
        assert got.tokens.is_cuda and got.tokens.dtype == torch.uint8
        assert np.array_equal(got.tokens.cpu().numpy(), want.tokens)
        check_against_pillow(want, images)
        host = gpu.patches_batch(images, policy="dynamic")  # host arrays resized on the GPU
        assert isinstance(host.tokens, np.ndarray) and np.array_equal(host.tokens, want.tokens)
        tb = gpu.tokens_batch(dev, policy="dynamic", dtype=torch.bfloat16)
        assert tb.tokens.is_cuda and tb.tokens.dtype == torch.bfloat16
        assert np.array_equal(_bits(tb.tokens), _tokens_np(want.tokens, "bfloat16", "nchw", *CLIP))
        out = torch.zeros(tuple(tb.tokens.shape), dtype=torch.bfloat16, device="cuda")
        s = torch.cuda.Stream()
        with torch.cuda.stream(s):  # written on torch's current stream
            assert gpu.tokens_batch(images, policy="dynamic", dtype="bfloat16", out=out).tokens is out
        s.synchronize()
        assert torch.equal(out, tb.tokens)
        with pytest.raises(pxvm.UsageError, match="a CUDA out= needs executor 'cuda'"):
            cpu.tokens_batch(images, policy="dynamic", dtype="bfloat16", out=out)
        with pytest.raises(pxvm.UsageError, match="CUDA tensors need executor 'cuda'"):
            cpu.patches_batch(dev, policy="dynamic")


def test_a_decoder_warning_points_at_the_callers_line(runner, tmp_path):
    """A file the decoder warns about (bytes after the JPEG's end) gives the warning of load_image,
    attributed to the line that called patches_batch / tokens_batch, and its tokens."""
    p = tmp_path / "trailing.jpg"
    Image.fromarray(skdata.coffee()).save(p)
    with open(p, "ab") as f:
        f.write(b"\0" * 100)
    for call in (runner.patches_batch, runner.tokens_batch):
        with pytest.warns(UserWarning, match="100 bytes after the JPEG's end-of-image marker") as w:
            call([str(p)], policy="dynamic")
        assert [os.path.basename(x.filename) for x in w] == ["test_ragged_dynamic.py"]


def test_torch_dtypes_are_their_names_for_every_program():
    """dtype=torch.bfloat16 (or float16, float32) is the name's tokens for any program's tokens and
    tokens_batch, not only policy dynamic's; another torch dtype is the UsageError naming it."""
    torch = pytest.importorskip("torch")
    img = pxvm.load_image(PHOTO)
    with pxvm.Runner(os.path.join(ROOT, "programs", "foveate273.pxi"), executor=EXECUTOR) as r:
        for name in ("bfloat16", "float16", "float32"):
            a, b = r.tokens(img, dtype=getattr(torch, name)), r.tokens(img, dtype=name)
            assert np.array_equal(_bits(a), _bits(b))
            a = r.tokens_batch(np.stack([img, img]), dtype=getattr(torch, name))
            assert np.array_equal(_bits(a)[1], _bits(b))
        with pytest.raises(pxvm.UsageError, match="dtype torch.int8 is none of float32, float16, bfloat16"):
            r.tokens(img, dtype=torch.int8)


def test_device_is_for_the_dynamic_policy_and_a_gpu():
    """device= puts a dynamic batch's output on the runner's GPU; on the cpu executor it is refused
    naming the executor, and a policy other than dynamic refuses it (never ignored)."""
    import numpy as np
    r = pxvm.Runner(pxvm.Program.from_plan({"image": [64, 48], "scheme": "uniform", "patch": 16}))
    img = np.zeros((40, 30, 3), np.uint8)
    with pytest.raises(pxvm.UsageError, match="needs executor 'cuda'"):
        r.tokens_batch([img], policy="dynamic", dtype="float32", device="cuda")
    with pytest.raises(pxvm.UsageError, match="runner's GPU"):
        r.patches_batch([img], policy="dynamic", device="cuda:7")
    with pytest.raises(pxvm.UsageError, match="device= is for policy dynamic"):
        r.patches_batch([np.zeros((48, 64, 3), np.uint8)], device="cuda")
    got = r.patches_batch([img], policy="dynamic", device="cpu")  # the host: as without device=
    assert np.array_equal(got.tokens, r.patches_batch([img], policy="dynamic").tokens)


def test_cuda_device_puts_host_images_tokens_on_the_gpu(images):
    """Host arrays and files resized on the GPU into a CUDA tensor (device="cuda"): the bytes of
    the cpu executor's, and of the host output."""
    torch = _cuda()
    with pxvm.Runner(pxvm.Program.from_plan(UNIFORM), executor="cpu") as cpu, \
            pxvm.Runner(pxvm.Program.from_plan(UNIFORM), executor="cuda") as gpu:
        want = cpu.tokens_batch(images, policy="dynamic", dtype="bfloat16", layout="flat")
        got = gpu.tokens_batch(images, policy="dynamic", dtype="bfloat16", layout="flat", device="cuda")
        assert got.tokens.is_cuda and got.tokens.dtype == torch.bfloat16
        assert torch.equal(got.tokens.cpu(), want.tokens)
        u8 = gpu.patches_batch(images, policy="dynamic", device="cuda:0")
        assert u8.tokens.is_cuda and np.array_equal(u8.tokens.cpu().numpy(), cpu.patches_batch(images, policy="dynamic").tokens)


def test_on_error_skip_leaves_out_what_fails_and_lists_it(tmp_path):
    """on_error="skip": a file that does not decode, a truncated JPEG and an image the size rule
    refuses (201:1) are left out, listed in failures in the batch's order, each naming its index
    and file; the kept images' tokens are those of a batch of them alone; "raise" raises the first."""
    junk = tmp_path / "junk.png"
    junk.write_bytes(b"not a png at all")
    good = tmp_path / "coffee.jpg"
    Image.fromarray(skdata.coffee()).save(good)
    cut = tmp_path / "cut.jpg"
    cut.write_bytes(good.read_bytes()[:2000])
    wide = np.zeros((1, 201, 3), np.uint8)
    rocket = skdata.rocket()
    batch = [str(junk), rocket, str(cut), wide, str(good)]
    with pxvm.Runner(pxvm.Program.from_plan(UNIFORM)) as r:
        got = r.tokens_batch(batch, policy="dynamic", dtype="float32", on_error="skip")
        assert got.index.tolist() == [1, 4]
        assert [e.index for e in got.failures] == [0, 2, 3]
        assert [e.file for e in got.failures] == [str(junk), str(cut), None]
        assert isinstance(got.failures[0], pxvm.Malformed) and "image 0 ('%s')" % junk in str(got.failures[0])
        assert isinstance(got.failures[2], pxvm.Unlinkable) and "image 3" in str(got.failures[2])
        alone = r.tokens_batch([rocket, str(good)], policy="dynamic", dtype="float32")
        assert np.array_equal(got.tokens, alone.tokens) and np.array_equal(got.offsets, alone.offsets)
        assert got.files == [None, str(good)]
        with pytest.raises(pxvm.Malformed, match="image 0"):
            r.tokens_batch(batch, policy="dynamic", dtype="float32")
        none = r.patches_batch([str(junk)], policy="dynamic", on_error="skip")
        assert none.tokens.shape == (0, 16, 16, 4) and none.offsets.tolist() == [0] and len(none.failures) == 1
        with pytest.raises(pxvm.UsageError, match="on_error='ignore'"):
            r.patches_batch(batch, policy="dynamic", on_error="ignore")
        kept = r.patches_batch([rocket[:48, :64]], on_error="skip", policy="stretch")  # every policy (issue 41)
        assert kept.index.tolist() == [0] and kept.failures == []
