"""on_error="skip"|"raise" and a failures list on every batch call (issue 41, "Batches and
datasets"): run_batch, patches_batch and tokens_batch for every policy, with the ragged batches'
failure type (ragged._named: the error's class, .index, .file, "image i ('file'): ..."), as
policy dynamic and the datasets have. One bad file no longer ends a whole batch."""
import os

import numpy as np
import pytest

import pxvm
from conftest import EXECUTOR, PHOTO, ROOT

torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def runner():
    with pxvm.Runner(pxvm.Program.load(os.path.join(ROOT, "programs", "foveate273.pxi")), executor=EXECUTOR) as r:
        yield r


@pytest.fixture(scope="module")
def bad_png(tmp_path_factory):
    p = tmp_path_factory.mktemp("bad") / "truncated.png"
    with open(PHOTO, "rb") as f:
        p.write_bytes(f.read()[:100])  # a real PNG cut inside its first IDAT
    return str(p)


CALLS = {
    "patches_batch": lambda r, imgs, **kw: r.patches_batch(imgs, **kw),
    "tokens_batch": lambda r, imgs, **kw: r.tokens_batch(imgs, **kw),
    "run_batch": lambda r, imgs, **kw: r.run_batch(imgs, **kw),
}


def _rows(call, res):
    """The kept images' outputs as (B', ...) NumPy arrays."""
    if call == "run_batch":
        return np.asarray(res["atlas"])
    t = np.asarray(res.tokens.float() if isinstance(res.tokens, torch.Tensor) and res.tokens.dtype == torch.bfloat16
                   else res.tokens)
    return t.reshape((len(res), -1) + t.shape[1:])


@pytest.mark.parametrize("call", sorted(CALLS))
def test_skip_leaves_out_a_bad_file_and_a_wrong_size(runner, photo, bad_png, call):
    f = CALLS[call]
    imgs = [PHOTO, bad_png, photo, photo[:10]]  # a file, a truncated file, an array, a size the program refuses
    res = f(runner, imgs, on_error="skip")
    assert list(np.asarray(res.index)) == [0, 2]
    assert [type(e) for e in res.failures] == [pxvm.Malformed, pxvm.Unlinkable]
    assert [(e.index, e.file) for e in res.failures] == [(1, bad_png), (3, None)]
    assert str(res.failures[0]).startswith("image 1 ('%s'): " % bad_png) and "451x10" in str(res.failures[1])
    want = f(runner, [photo, photo])  # the kept images' bytes are those of a batch without the failures
    want = np.asarray(want["atlas"] if call == "run_batch" else want)
    assert np.array_equal(_rows(call, res), want)
    with pytest.raises(pxvm.Malformed, match="truncated.png"):  # "raise", the default: the first failure
        f(runner, imgs)


@pytest.mark.parametrize("call", sorted(CALLS))
def test_every_image_failing_gives_an_empty_result(runner, bad_png, call):
    res = CALLS[call](runner, [bad_png, bad_png], on_error="skip")
    assert len(res.index) == 0 and [e.index for e in res.failures] == [0, 1]


def test_the_failure_type_is_the_dynamic_one(bad_png):
    """A fixed-count batch and a dynamic one list the same failure: same class, index, file, words."""
    u = pxvm.Runner(pxvm.Program.from_plan(os.path.join(ROOT, "programs", "uniform.json")))
    r = pxvm.Runner(pxvm.Program.load(os.path.join(ROOT, "programs", "foveate273.pxi")))
    a = u.patches_batch([PHOTO, bad_png], policy="dynamic", on_error="skip").failures[0]
    b = r.patches_batch([PHOTO, bad_png], on_error="skip").failures[0]
    assert (type(a), a.index, a.file, str(a)) == (type(b), b.index, b.file, str(b))


def test_skip_keeps_the_input_kind(runner, photo, bad_png):
    res = runner.tokens_batch([torch.from_numpy(photo), bad_png], on_error="skip")
    assert isinstance(res.tokens, torch.Tensor) and isinstance(res.index, torch.Tensor)
    res = runner.run_batch([torch.from_numpy(photo), bad_png], on_error="skip")
    assert isinstance(res["atlas"], torch.Tensor) and isinstance(res.index, torch.Tensor) and len(res.failures) == 1


@pytest.mark.parametrize("call", sorted(CALLS))
def test_bad_on_error_and_skip_with_out_are_usage_errors(runner, photo, call):
    with pytest.raises(pxvm.UsageError, match="on_error='ignore'"):
        CALLS[call](runner, [photo], on_error="ignore")
    if call != "run_batch":
        with pytest.raises(pxvm.UsageError, match="out="):
            CALLS[call](runner, [photo], on_error="skip", out=np.empty((1, 273, 16, 16, 4), np.uint8))
