"""The compiled fast path (python/pxvm/_native.c): a prepared pxvm_runner_exec call that Runner.patches
and Runner.run take for repeats of a call's shapes. Its bytes are the ctypes path's, arrays of
another shape fall back to that path, the library's errors come out as the package's classes, 100k
calls leak nothing, and the .so is one abi3 build. On the GPU machine (PXVM_TEST_EXECUTOR=cuda) the
same comparisons run with CUDA tensors in and out."""
import contextlib
import gc
import os
import re
import subprocess
import sys
import sysconfig
import tracemalloc

import numpy as np
import pytest

import pxvm
from pxvm import runner as runner_mod
from conftest import EXECUTOR, ROOT, random_images

SO = os.path.join(ROOT, "python", "pxvm", "_native.abi3.so")
SRC = os.path.join(ROOT, "python", "pxvm", "_native.c")
BUILDABLE = os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h"))
OFF = os.environ.get("PXVM_NO_NATIVE") == "1"
needs_native = pytest.mark.skipif(runner_mod._native is None,
                                  reason="pxvm._native is not loaded (PXVM_NO_NATIVE=1, or no python3-dev)")
TINY = (".width 16\n.slot image input 16x16\n.slot atlas output 32x16 patches=16x16x2\n"
        "SAMPLE src=image dst=atlas mode=nearest dst_x=0 dst_y=0 w=16 h=16 cu=8 cv=8 du=1 dv=1 lod=0\n"
        "SAMPLE src=image dst=atlas mode=linear dst_x=16 dst_y=0 w=16 h=16 cu=7.5 cv=8.25 du=0.5 dv=0.5 lod=0\nHALT\n")


@contextlib.contextmanager
def ctypes_path():
    """The ctypes path alone, as PXVM_NO_NATIVE=1 gives it (for runners called inside)."""
    saved, runner_mod._native = runner_mod._native, None
    try:
        yield
    finally:
        runner_mod._native = saved


def same(a, b):
    """Byte equality of two NumPy arrays or tensors (host or CUDA), shapes and dtypes included."""
    a = a.cpu().numpy() if hasattr(a, "cpu") else a
    b = b.cpu().numpy() if hasattr(b, "cpu") else b
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


def host_bits(a):
    """A host NumPy view of the bits of an array or tensor (bfloat16 as uint16: NumPy has none)."""
    if hasattr(a, "cpu"):
        import torch
        a = a.cpu()
        a = (a.view(torch.int16) if a.dtype == torch.bfloat16 else a).numpy()
    return a.view(np.uint16) if a.dtype == np.int16 else a


def same_bits(a, b):
    """Same shape, element size and bytes (a bfloat16 tensor and the uint16 bits of a host out=)."""
    a, b = host_bits(a), host_bits(b)
    return a.shape == b.shape and a.itemsize == b.itemsize and a.tobytes() == b.tobytes()


def hits(r):
    return sum(c.hits for c in r._prepared.values())


@pytest.fixture(scope="module")
def rgba_photo(photo):
    """The photo with a varying alpha (tokens with alpha=True read it)."""
    img = np.empty(photo.shape[:2] + (4,), np.uint8)
    img[..., :3] = photo[..., :3]
    img[..., 3] = np.arange(photo.shape[1], dtype=np.uint8)[None, :]
    return img


def on_executor(x):
    """x on the executor under test: NumPy for the CPU, a CUDA tensor for cuda."""
    if EXECUTOR != "cuda":
        return x
    torch = pytest.importorskip("torch")
    return torch.from_numpy(np.ascontiguousarray(x)).cuda()


# ---- the build ------------------------------------------------------------------------------------

def test_extension_is_built_where_it_can_be():
    if not BUILDABLE:
        pytest.skip("no Python.h for this python (python3-dev): the package runs on ctypes alone")
    assert os.path.exists(SO), "make builds %s when python3-dev is installed" % SO
    if not OFF:
        assert runner_mod._native is not None and runner_mod._native.__file__ == SO


def test_extension_is_abi3_on_the_limited_api():
    if not os.path.exists(SO):
        pytest.skip("not built")
    assert ".abi3.so" in __import__("importlib.machinery").machinery.EXTENSION_SUFFIXES
    src = open(SRC).read()
    assert src.index("#define Py_LIMITED_API 0x030B0000") < src.index("#include <Python.h>")
    # the library is not linked: its functions come from the copy ctypes loaded (bind)
    nm = subprocess.run(["nm", "-D", "--undefined-only", SO], capture_output=True, text=True, check=True).stdout
    undefined = set(re.findall(r"\bU (\S+)", nm))
    assert not [s for s in undefined if s.startswith("pxvm_")], undefined
    # no private CPython symbol beyond those the stable ABI itself exports for its macros
    abi_only = {"_Py_Dealloc", "_Py_NoneStruct", "_Py_IncRef", "_Py_DecRef", "_PyArg_ParseTuple_SizeT",
                "_PyObject_CallFunction_SizeT", "_Py_TrueStruct", "_Py_FalseStruct", "_Py_NotImplementedStruct"}
    assert not [s for s in undefined if s.startswith("_Py") and s not in abi_only], undefined


def test_no_native_env():
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    code = "import pxvm.runner as r; print(r._native is None)"
    out = subprocess.run([sys.executable, "-c", code], env=dict(env, PXVM_NO_NATIVE="1"), capture_output=True,
                         text=True)
    assert out.returncode == 0 and out.stdout.strip() == "True", out.stderr
    bad = subprocess.run([sys.executable, "-c", code], env=dict(env, PXVM_NO_NATIVE="yes"), capture_output=True,
                         text=True)
    assert bad.returncode != 0 and "PXVM_NO_NATIVE=yes: 1 (the ctypes path alone) or 0" in bad.stderr


# ---- the bytes ------------------------------------------------------------------------------------

@needs_native
def test_patches_equal_ctypes_in_every_layout(foveate, photo):
    """Native == ctypes byte for byte: RGBA, RGB, grey, CHW, a strided view, into out=; each
    layout called three times (the first prepares, the next two run natively)."""
    rgb = np.ascontiguousarray(photo[:, :, :3])
    big = np.zeros((600, 902, 3), np.uint8)
    big[::2, ::2] = rgb
    feeds = [photo, rgb, np.ascontiguousarray(photo[:, :, 1]), np.ascontiguousarray(photo.transpose(2, 0, 1))]
    if EXECUTOR != "cuda":
        feeds.append(big[::2, ::2])  # strides (1804, 6, 1): read where it lies
    with ctypes_path():
        slow = pxvm.Runner(foveate, executor=EXECUTOR)
        want = [slow.patches(on_executor(x)) for x in feeds]
    fast = pxvm.Runner(foveate, executor=EXECUTOR)
    for x, w in zip(feeds, want):
        x = on_executor(x) if EXECUTOR == "cuda" else x
        got = [fast.patches(x) for _ in range(3)]
        assert fast._prepared[("patches", 2, True)].hits == 2  # prepared for this layout by the first
        assert all(same(g, w) for g in got)
        out = got[0] * 0
        assert fast.patches(x, out=out) is out and fast.patches(x, out=out) is out and same(out, w)
        assert fast._prepared[("patches", 2, False)].hits == 1


@needs_native
def test_run_and_geometry_equal_ctypes(foveate, photo):
    """run() with one output and with two (a tuple from the prepared call), patches with geometry."""
    two = pxvm.assemble(TINY.replace(".slot atlas output 32x16 patches=16x16x2\n", ".slot atlas output 32x16 "
                                     "patches=16x16x2\n.slot level output 16x16\n").replace(
        "HALT", "SAMPLE src=image dst=level mode=nearest dst_x=0 dst_y=0 w=16 h=16 cu=8 cv=8 du=1 dv=1 lod=0\nHALT"))
    small = random_images(np.random.default_rng(5), 1, 16, 16)[0]
    cases = [(foveate, photo), (two, small)]
    with ctypes_path():
        want_run = [pxvm.Runner(p, executor=EXECUTOR).run(on_executor(x)) for p, x in cases]
        want_p, want_g = pxvm.Runner(foveate, executor=EXECUTOR).patches(on_executor(photo), with_geometry=True)
    assert list(want_run[1]) == ["atlas", "level"]
    runners = [pxvm.Runner(p, executor=EXECUTOR) for p, _ in cases]
    f = pxvm.Runner(foveate, executor=EXECUTOR)
    xs = [on_executor(x) for _, x in cases]
    for _ in range(3):
        for r, x, want in zip(runners, xs, want_run):
            got = r.run(x)
            assert list(got) == list(want) and all(same(got[k], want[k]) for k in got)
        p, g = f.patches(xs[0], with_geometry=True)
        assert same(p, want_p) and same(g, want_g)
    assert [hits(r) for r in runners] == [2, 2] and hits(f) == 2


@needs_native
def test_torch_host_tensors_equal_ctypes(foveate, photo):
    torch = pytest.importorskip("torch")
    t = torch.from_numpy(photo.copy())
    with ctypes_path():
        want = pxvm.Runner(foveate).patches(t)
    r = pxvm.Runner(foveate)
    out = torch.empty((273, 16, 16, 4), dtype=torch.uint8)
    got = [r.patches(t) for _ in range(3)] + [r.patches(t, out=out) for _ in range(2)]
    assert hits(r) == 3 and all(same(g, want) for g in got)


@needs_native
def test_cuda_tensors_in_and_out_equal_ctypes_and_cpu(foveate, photo):
    torch = pytest.importorskip("torch")
    if EXECUTOR != "cuda" or not torch.cuda.is_available():
        pytest.skip("needs PXVM_TEST_EXECUTOR=cuda and a CUDA device")
    cpu = pxvm.Runner(foveate, executor="cpu").patches(photo)
    x = torch.from_numpy(photo).cuda()
    r = pxvm.Runner(foveate, executor="cuda")
    out = torch.empty((273, 16, 16, 4), dtype=torch.uint8, device="cuda")
    s = torch.cuda.Stream()
    got = [r.patches(x) for _ in range(3)] + [r.patches(x, out=out) for _ in range(2)]
    with torch.cuda.stream(s):  # another current stream: the native call orders its work there
        got.append(r.patches(x))
        got.append(r.patches(x))
    torch.cuda.synchronize()
    assert all(g.is_cuda for g in got) and all(same(g, cpu) for g in got)
    # 5 of the 7 calls run natively: the first of each key takes ctypes and prepares (call 1 for
    # ("patches", 2, True), call 4 for the out= key ("patches", 2, False)); the stream change is no
    # miss: the prepared call sets torch's new current stream itself (sync_stream), calls 6 and 7
    plain, into = r._prepared[("patches", 2, True)], r._prepared[("patches", 2, False)]
    assert (plain.hits, plain.misses, into.hits, into.misses) == (4, 0, 1, 0)
    assert r._stream[1] == s.cuda_stream and hits(r) == 5
    # a host array on the same runner: no stream (as the ctypes path leaves it), the same bytes
    assert same(r.patches(photo), cpu) and same(r.patches(photo), cpu) and r._stream[1] == 0


# ---- tokens (Runner.tokens: bind, run and read_tokens in one prepared call) ------------------------

TOKEN_CASES = [("float32", "clip", "nchw", False), ("float16", "siglip", "nhwc", True),
               ("bfloat16", "imagenet", "flat", False), ("float32", ([0.1, -0.7, 3.0], [0.3, -2.0, 1e-3]), "nchw", False),
               ("float16", "none", "flat", True)]


def token_out(dtype, shape):
    """A destination for tokens on the executor under test (bfloat16 on the host: the uint16 bits)."""
    if EXECUTOR == "cuda":
        torch = pytest.importorskip("torch")
        return torch.full(shape, 7, dtype=getattr(torch, dtype), device="cuda")
    return np.full(shape, 7, {"float32": np.float32, "float16": np.float16, "bfloat16": np.uint16}[dtype])


def tokens_of(r, x, dtype, norm, layout, alpha, out):
    return r.tokens(x, dtype=dtype, normalize=norm, layout=layout, alpha=alpha, out=out)


@needs_native
@pytest.mark.parametrize("dtype, norm, layout, alpha", TOKEN_CASES)
def test_tokens_equal_ctypes(foveate, rgba_photo, dtype, norm, layout, alpha):
    """Runner.tokens natively == the ctypes path, bit for bit: new outputs (where the host has the
    dtype: bfloat16 needs torch there) and into out=; three calls each, the first prepares."""
    torch_host = dtype != "bfloat16" or EXECUTOR == "cuda"
    if not torch_host:
        try:
            import torch  # noqa: F401
            torch_host = True
        except ImportError:
            pass
    x = on_executor(rgba_photo)
    shape = {"nchw": (273, 4 if alpha else 3, 16, 16), "nhwc": (273, 16, 16, 4 if alpha else 3),
             "flat": (273, (4 if alpha else 3) * 256)}[layout]
    with ctypes_path():
        slow = pxvm.Runner(foveate, executor=EXECUTOR)
        want = tokens_of(slow, x, dtype, norm, layout, alpha, token_out(dtype, shape))
        assert slow._prepared == {}
    fast = pxvm.Runner(foveate, executor=EXECUTOR)
    calls = 0
    if torch_host:
        got = [tokens_of(fast, x, dtype, norm, layout, alpha, None) for _ in range(3)]
        assert all(same_bits(g, want) for g in got) and len({id(g) for g in got}) == 3  # a new array each call
        calls += 1
    outs = [token_out(dtype, shape) for _ in range(3)]
    assert all(tokens_of(fast, x, dtype, norm, layout, alpha, o) is o for o in outs)
    assert all(same_bits(o, want) for o in outs)
    calls += 1
    assert len(fast._prepared) == calls and hits(fast) == 2 * calls
    assert all(c.misses == 0 for c in fast._prepared.values())


@needs_native
def test_tokens_fast_path_checks_what_it_runs(foveate, rgba_photo):
    """A prepared tokens call never runs arguments the ctypes path would refuse: alpha=1 (not
    True), an out= of another dtype, shape or contiguity take the ctypes path, which refuses them
    and writes nothing; another layout or preset is another prepared call."""
    r = pxvm.Runner(foveate, executor=EXECUTOR)
    x = on_executor(rgba_photo)
    out = token_out("float32", (273, 4, 16, 16))
    for _ in range(2):
        r.tokens(x, alpha=True, out=out)
    assert hits(r) == 1
    with pytest.raises(pxvm.UsageError, match="alpha is True or False"):
        r.tokens(x, alpha=1, out=out)
    for bad in (token_out("float16", (273, 4, 16, 16)), token_out("float32", (273, 3, 16, 16)),
                token_out("float32", (273, 16, 4, 16)).swapaxes(1, 2)):
        before = (bad.cpu().numpy() if hasattr(bad, "cpu") else bad).copy()
        with pytest.raises(pxvm.UsageError, match="usage: tokens: out must be"):
            r.tokens(x, alpha=True, out=bad)
        assert same(bad, before)
    assert hits(r) == 1 and sum(c.misses for c in r._prepared.values()) == 3
    with ctypes_path():
        want = pxvm.Runner(foveate, executor=EXECUTOR).tokens(x, normalize="siglip", layout="nhwc",
                                                            out=token_out("float32", (273, 16, 16, 3)))
    got = [r.tokens(x, normalize="siglip", layout="nhwc", out=token_out("float32", (273, 16, 16, 3)))
           for _ in range(2)]
    assert all(same(g, want) for g in got) and hits(r) == 2 and len(r._prepared) == 2


@needs_native
def test_tokens_100k_calls_leak_nothing():
    """100,000 native tokens calls (new outputs, and into out=): reference counts come back,
    Python allocations and RSS stay flat."""
    prog = pxvm.assemble(TINY)
    r = pxvm.Runner(prog, executor="cpu", threads=1)
    x = random_images(np.random.default_rng(4), 1, 16, 16)[0]
    out = np.empty((2, 3, 16, 16), np.float32)
    want = r.tokens(x)
    for _ in range(100):
        r.tokens(x), r.tokens(x, out=out)
    gc.collect()
    refs = sys.getrefcount(x), sys.getrefcount(out)
    tracemalloc.start()
    rss, traced = rss_kib(), tracemalloc.get_traced_memory()[0]
    for _ in range(50000):
        r.tokens(x)
        r.tokens(x, out=out)
    gc.collect()
    grown, grown_rss = tracemalloc.get_traced_memory()[0] - traced, rss_kib() - rss
    tracemalloc.stop()
    assert (sys.getrefcount(x), sys.getrefcount(out)) == refs
    assert grown < 64 * 1024, grown
    assert grown_rss < 8 * 1024, grown_rss
    assert hits(r) >= 100000 + 198 and same(out, want)


# ---- fallback and errors --------------------------------------------------------------------------

@needs_native
def test_another_shape_falls_back_and_prepares_again(foveate, photo):
    r = pxvm.Runner(foveate, executor=EXECUTOR)
    rgb = on_executor(np.ascontiguousarray(photo[:, :, :3]))
    x = on_executor(photo)
    with ctypes_path():
        want = pxvm.Runner(foveate, executor=EXECUTOR).patches(x)
    r.patches(x), r.patches(x)
    first = r._prepared[("patches", 2, True)]
    assert (first.hits, first.misses) == (1, 0)
    assert same(r.patches(rgb), want)          # a miss: the ctypes path ran it, then prepared RGB
    assert first.misses == 1 and r._prepared[("patches", 2, True)] is not first
    assert same(r.patches(rgb), want) and r._prepared[("patches", 2, True)].hits == 1
    # the ctypes path's own refusals, unchanged: a wrong dtype, a wrong size, a bad out=
    with pytest.raises(TypeError, match="uint8"):
        r.patches(np.zeros((300, 451, 4), np.float32))
    with pytest.raises(pxvm.Unlinkable):
        r.patches(on_executor(np.zeros((301, 451, 4), np.uint8)))
    with pytest.raises(ValueError, match="C-contiguous"):
        r.patches(rgb, out=on_executor(np.zeros((273, 16, 16, 8), np.uint8))[..., :4])
    assert same(r.patches(rgb), want)


@needs_native
def test_library_errors_are_the_package_classes(foveate, photo):
    """A prepared call whose exec fails (a slot number the program lacks): the library's message
    as pxvm.UsageError, nothing returned."""
    r = pxvm.Runner(foveate)
    r.patches(photo)
    in_slots, in_items, in_views, out_slots, out_kinds, out_views = r._bufs[(1, 1, 1)]
    import ctypes
    size = ctypes.sizeof(pxvm._capi.View)
    call = runner_mod._native.prepare(
        r._runners[1][0].value, (1,), (0,), ctypes.string_at(in_views, size), (9,), (1,),
        ctypes.string_at(out_views, size), ((0, 0, photo.shape, photo.strides, -1, None, None),),
        ((1, 0, np.empty, ((273, 16, 16, 4), np.uint8), None),), (None, 1, False, None, 0))
    with pytest.raises(pxvm.UsageError, match="slot"):
        call.run(photo)
    with pytest.raises(TypeError, match="takes 1 arrays, got 2"):
        call.run(photo, photo)
    with pytest.raises(ValueError):
        runner_mod._native.prepare(1, (1,), (0,), b"", (), (), b"", (), (), (None, 1, False, None, 0))


@needs_native
def test_close_forgets_prepared_calls(foveate, photo):
    r = pxvm.Runner(foveate)
    want = r.patches(photo)
    r.patches(photo)
    r.close()
    assert r._prepared == {}
    assert same(r.patches(photo), want) and same(r.patches(photo), want)


# ---- leaks ----------------------------------------------------------------------------------------

def rss_kib():
    with open("/proc/self/status") as f:
        return int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1))


@needs_native
def test_100k_calls_leak_nothing():
    """100,000 native calls (new outputs, and into out=): the input's and out's reference counts
    come back, Python allocations (tracemalloc: NumPy's included) and RSS stay flat."""
    prog = pxvm.assemble(TINY)
    r = pxvm.Runner(prog, executor="cpu", threads=1)
    x = random_images(np.random.default_rng(3), 1, 16, 16)[0]
    out = np.empty((2, 16, 16, 4), np.uint8)
    want = r.patches(x)
    for _ in range(100):
        r.patches(x), r.patches(x, out=out)
    gc.collect()
    refs = sys.getrefcount(x), sys.getrefcount(out)
    tracemalloc.start()
    rss, traced = rss_kib(), tracemalloc.get_traced_memory()[0]
    for _ in range(50000):
        r.patches(x)
        r.patches(x, out=out)
    gc.collect()
    grown, grown_rss = tracemalloc.get_traced_memory()[0] - traced, rss_kib() - rss
    tracemalloc.stop()
    assert (sys.getrefcount(x), sys.getrefcount(out)) == refs
    assert grown < 64 * 1024, grown
    assert grown_rss < 8 * 1024, grown_rss
    assert hits(r) >= 100000 + 198 and same(out, want)


def test_one_runner_shared_by_threads_gives_each_its_own_result(foveate):
    """Threads sharing one Runner (the fast path's prepared calls, the ctypes path, tokens and
    geometry under Runner.lock) take turns on its one C handle: every result is its own image's.
    Without the lock a thread finding a prepared call busy entered the same handle on the ctypes path."""
    import threading
    images = random_images(np.random.default_rng(11), 4, 300, 451)
    r = pxvm.Runner(foveate, executor=EXECUTOR)
    want = [(r.patches(im).copy(), r.tokens(im, dtype="float32").copy()) for im in images]
    want_geometry = r.geometry()  # foveate273 samples at fixed places: one geometry for every image
    wrong, errors = [], []

    def work(k):
        for it in range(30):
            i = (k + it) % 4
            try:
                p = r.patches(images[i])
                t = r.tokens(images[i], dtype="float32")
                if not (np.array_equal(p, want[i][0]) and np.array_equal(t, want[i][1])):
                    wrong.append((k, it))
                with r.lock:  # a run and the geometry of that run as one unit
                    r.patches(images[i])
                    g = r.geometry()
                if not np.array_equal(g, want_geometry):
                    wrong.append((k, it, "geometry"))
            except Exception as e:  # noqa: BLE001 - every failure is the test's
                errors.append(repr(e))
    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and not wrong, (errors[:3], wrong[:3])
