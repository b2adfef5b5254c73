"""alpha= on the uint8 outputs (issue 41: "the uint8 outputs carry a fourth RGBA channel"):
patches and patches_batch take alpha= as tokens do. The default stays RGBA, the atlas's bytes as
pxrun, pxbatch's shards and the goldens hold them; alpha=False gives RGB, a view of them."""
import os

import numpy as np
import pytest

import pxvm
from conftest import EXECUTOR, ROOT

torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def runners():
    with pxvm.Runner(pxvm.Program.load(os.path.join(ROOT, "programs", "foveate273.pxi")), executor=EXECUTOR) as r, \
            pxvm.Runner(pxvm.Program.from_plan(os.path.join(ROOT, "programs", "uniform.json")), executor=EXECUTOR) as u:
        yield r, u


CALLS = {
    "patches": lambda r, u, x, **kw: r.patches(x, **kw),
    "patches with_geometry": lambda r, u, x, **kw: r.patches(x, with_geometry=True, **kw)[0],
    "patches_batch": lambda r, u, x, **kw: r.patches_batch([x, x], **kw),
    "patches_batch skip": lambda r, u, x, **kw: r.patches_batch([x, x], on_error="skip", **kw).tokens,
    "patches dynamic": lambda r, u, x, **kw: u.patches(x, policy="dynamic", **kw),
    "patches_batch dynamic": lambda r, u, x, **kw: u.patches_batch([x, x[:100]], policy="dynamic", **kw).tokens,
}


@pytest.mark.parametrize("kind", ["numpy", "torch"])
@pytest.mark.parametrize("call", sorted(CALLS))
def test_alpha_false_is_the_rgb_of_the_default(runners, photo, call, kind):
    r, u = runners
    x = photo if kind == "numpy" else torch.from_numpy(photo)
    rgba = CALLS[call](r, u, x)
    rgb = CALLS[call](r, u, x, alpha=False)
    assert rgba.shape[-1] == 4 and rgb.shape[-1] == 3 and rgb.shape[:-1] == rgba.shape[:-1]
    assert np.array_equal(np.asarray(rgb), np.asarray(rgba)[..., :3])
    assert type(rgb) is type(rgba)
    assert CALLS[call](r, u, x, alpha=True).shape == rgba.shape


def test_alpha_false_is_a_view_not_a_copy(runners, photo):
    r, _ = runners
    rgb = r.patches(photo, alpha=False)
    assert rgb.base is not None and not rgb.flags.c_contiguous


@pytest.mark.parametrize("alpha", [0, "no", None])
def test_alpha_is_a_bool(runners, photo, alpha):
    r, _ = runners
    with pytest.raises(pxvm.UsageError, match="alpha is True or False"):
        r.patches(photo, alpha=alpha)


def test_alpha_false_with_out_is_refused(runners, photo):
    r, _ = runners
    with pytest.raises(pxvm.UsageError, match="out holds the RGBA bytes"):
        r.patches(photo, alpha=False, out=np.empty((273, 16, 16, 4), np.uint8))
