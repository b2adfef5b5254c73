"""Torch in -> torch out on the same device, NumPy in -> NumPy out, for every call that takes
images (issue 41, "Types"): one table of calls x input kinds (NumPy, torch CPU, torch CUDA where
a GPU and the cuda executor are under test). The one exception, by design: bfloat16 tokens from
NumPy input are a torch CPU tensor (NumPy has no bfloat16). Also dtypes given as names, NumPy or
torch dtypes, and executors as "cuda:N" or a torch.device."""
import os

import numpy as np
import pytest

import pxvm
from conftest import EXECUTOR, PHOTO, ROOT

torch = pytest.importorskip("torch")

KINDS = ["numpy", "torch-cpu"] + (["torch-cuda"] if EXECUTOR == "cuda" and torch.cuda.is_available() else [])


@pytest.fixture(scope="module")
def runners():
    prog = pxvm.Program.load(os.path.join(ROOT, "programs", "foveate273.pxi"))
    uniform = pxvm.Program.from_plan(os.path.join(ROOT, "programs", "uniform.json"))
    with pxvm.Runner(prog, executor=EXECUTOR) as r, pxvm.Runner(uniform, executor=EXECUTOR) as u:
        yield r, u


def _as(kind, a):
    if kind == "numpy":
        return a
    t = torch.from_numpy(np.ascontiguousarray(a))
    return t.cuda() if kind == "torch-cuda" else t


def _leaves(x):
    """Every array of a result (dicts, tuples, lists, a Ragged's tokens and index arrays)."""
    if isinstance(x, dict):
        return [a for v in x.values() for a in _leaves(v)]
    if isinstance(x, (list, tuple)):
        return [a for v in x for a in _leaves(v)]
    if isinstance(x, pxvm.Ragged):
        return [x.tokens, x.offsets, x.grid, x.sizes, x.position_ids, x.index]
    return [x]


CALLS = {
    "run": lambda r, u, x, y: r.run(x),
    "run_batch": lambda r, u, x, y: r.run_batch([x, x]),
    "run policy": lambda r, u, x, y: r.run(y, policy="stretch"),
    "patches": lambda r, u, x, y: r.patches(x),
    "patches with_geometry": lambda r, u, x, y: r.patches(x, with_geometry=True),
    "patches_batch": lambda r, u, x, y: r.patches_batch([x, x]),
    "patches_batch dynamic": lambda r, u, x, y: u.patches_batch([x, y], policy="dynamic"),
    "tokens": lambda r, u, x, y: r.tokens(x),
    "tokens float16": lambda r, u, x, y: r.tokens(x, dtype="float16"),
    "tokens dynamic": lambda r, u, x, y: u.tokens(y, policy="dynamic"),
    "tokens_batch": lambda r, u, x, y: r.tokens_batch([x, x]),
    "tokens_batch dynamic": lambda r, u, x, y: u.tokens_batch([x, y], policy="dynamic"),
    "stream push": lambda r, u, x, y: r.stream().push(x),
    "pyramid": lambda r, u, x, y: pxvm.pyramid(y),
    "generate_mipmaps": lambda r, u, x, y: pxvm.generate_mipmaps(y, executor=EXECUTOR),
}
HOST_ONLY = {"pyramid", "run policy"}  # CUDA tensors are a UsageError there (documented)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("call", sorted(CALLS))
def test_output_kind_is_the_input_kind(runners, photo, kind, call):
    if kind == "torch-cuda" and call in HOST_ONLY:
        pytest.skip("host images only")
    r, u = runners
    x, y = _as(kind, photo), _as(kind, photo[:200, :300])
    leaves = _leaves(CALLS[call](r, u, x, y))
    assert leaves
    for a in leaves:
        if kind == "numpy":
            assert isinstance(a, np.ndarray), "%s: NumPy in, %s out" % (call, type(a))
        else:
            assert isinstance(a, torch.Tensor), "%s: torch in, %s out" % (call, type(a))
            assert a.device == x.device, "%s: input on %s, output on %s" % (call, x.device, a.device)


def test_torch_cpu_output_shares_the_bytes_of_numpy_output(runners, photo):
    """The torch result holds the same bytes as the NumPy one (torch.from_numpy: no copy made)."""
    r, _ = runners
    assert np.array_equal(r.patches(torch.from_numpy(photo)).numpy(), r.patches(photo))
    assert np.array_equal(r.tokens(torch.from_numpy(photo)).numpy(), r.tokens(photo))


def test_ragged_index_tensors_are_int64_on_the_tokens_device(runners, photo):
    _, u = runners
    res = u.tokens_batch([torch.from_numpy(photo), torch.from_numpy(photo[:100, :150])], policy="dynamic")
    for name in ("offsets", "grid", "sizes", "position_ids", "index"):
        v = getattr(res, name)
        assert isinstance(v, torch.Tensor) and v.dtype == torch.int64, name
    assert res[1].shape[0] == int(res.offsets[2] - res.offsets[1])


def test_bfloat16_from_numpy_is_the_one_exception(runners, photo):
    """NumPy has no bfloat16: a torch CPU tensor (the values, not raw uint16 bits)."""
    r, _ = runners
    t = r.tokens(photo, dtype="bfloat16")
    assert isinstance(t, torch.Tensor) and t.dtype == torch.bfloat16 and t.device.type == "cpu"


def test_out_is_returned_as_given(runners, photo):
    r, _ = runners
    out = np.empty((273, 3, 16, 16), np.float32)
    assert r.tokens(torch.from_numpy(photo), out=out) is out


@pytest.mark.parametrize("dtype", ["float16", np.float16, np.dtype("float16"), torch.float16])
def test_dtype_as_name_numpy_or_torch(runners, photo, dtype):
    r, _ = runners
    want = r.tokens(photo, dtype="float16")
    got = r.tokens(photo, dtype=dtype)
    assert got.dtype == np.float16 and np.array_equal(got, want)


@pytest.mark.parametrize("dtype", [np.float32, np.dtype("float32"), torch.float32])
def test_dtype_forms_in_seeds(dtype):
    from pxvm.seeds import _dtype
    assert _dtype(dtype) == "float32"


@pytest.mark.parametrize("dtype", [np.int32, torch.int32, "int32"])
def test_other_dtypes_are_refused_by_name(runners, photo, dtype):
    r, _ = runners
    with pytest.raises(pxvm.UsageError, match="int32"):
        r.tokens(photo, dtype=dtype)


@pytest.mark.parametrize("executor", [torch.device("cpu"), "cpu"])
def test_executor_as_torch_device(executor):
    prog = pxvm.Program.load(os.path.join(ROOT, "programs", "foveate273.pxi"))
    with pxvm.Runner(prog, executor=executor) as r:
        assert r.executor == "cpu"


def test_cuda_n_is_a_device_not_a_name():
    """'cuda:0' is executor cuda on device 0: refused only where no GPU is (Unavailable), never as a
    bad name; 'cuda:x' is a UsageError."""
    prog = pxvm.Program.load(os.path.join(ROOT, "programs", "foveate273.pxi"))
    try:
        with pxvm.Runner(prog, executor="cuda:0") as r:
            assert r.executor == "cuda" and r.device == 0
    except pxvm.Unavailable:
        pass
    with pytest.raises(pxvm.UsageError, match="cuda:x"):
        pxvm.Runner(prog, executor="cuda:x")
