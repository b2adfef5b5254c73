"""Issue 39: a runner cannot be freed while a call into it is in flight (close() from a callback
the call makes is a UsageError), and a failed run leaves no borrowed array unreferenced. Under
the ASan-preloaded interpreter (make asan-python) these read freed memory before the fix; in the
release build they crash or run on a freed runner."""
import gc
import os

import numpy as np
import pytest

from conftest import EXECUTOR, ROOT
import pxvm
from pxvm import runner as runner_mod

PLAN = {"image": [64, 48], "budget": 12, "patch": 8, "scheme": "logpolar"}
FIX_PLAN = dict(PLAN, fixation="relative")  # takes fixations


def frame(v=40):
    return np.full((48, 64, 4), v, np.uint8)


class Closing:
    """An input whose NumPy conversion closes the runner it is given to (a callback of the call)."""

    def __init__(self, runner, image):
        self.runner, self.image, self.refused = runner, image, None

    def __array__(self, dtype=None, copy=None):
        try:
            self.runner.close()
        except pxvm.UsageError as e:
            self.refused = e
            raise
        return self.image


def check_refused_then_usable(r, call, *args, **kwargs):
    """call(*args) whose callback closes r: refused with the package's usage error; r still runs."""
    with pytest.raises(pxvm.UsageError, match="a call into this runner is under way"):
        call(*args, **kwargs)
    fix = (0.5, 0.5) if r.fixation_inputs else None
    assert r.patches(frame(), fixation=fix).shape[0] == 12  # the runner was not closed: it runs on
    r.close()  # outside a call, close() closes
    assert r.patches(frame(), fixation=fix).shape[0] == 12  # and a later call opens it again


def test_close_from_an_inputs_array_is_refused():
    r = pxvm.Runner(pxvm.Program.from_plan(PLAN), executor=EXECUTOR)
    bad = Closing(r, frame())
    check_refused_then_usable(r, r.patches, bad)
    assert bad.refused is not None  # the callback really called close() during the call


@pytest.mark.parametrize("call", ["run", "patches_batch", "tokens", "tokens_batch"])
def test_close_from_an_input_of_every_entry_point_is_refused(call):
    r = pxvm.Runner(pxvm.Program.from_plan(PLAN), executor=EXECUTOR)
    bad = Closing(r, frame())
    arg = [bad] if call.endswith("_batch") else bad
    check_refused_then_usable(r, getattr(r, call), arg)


def test_close_from_a_fixations_array_is_refused():
    r = pxvm.Runner(pxvm.Program.from_plan(FIX_PLAN), executor=EXECUTOR)
    fix = Closing(r, np.array([0.5, 0.5]))
    check_refused_then_usable(r, r.patches, frame(), fixation=fix)
    assert fix.refused is not None


def test_close_from_a_dirty_rectangles_index_is_refused():
    prog = pxvm.Program.from_plan(dict(FIX_PLAN, video=0))
    r = pxvm.Runner(prog, executor=EXECUTOR)
    s = r.stream()
    s.push(frame(), fixation=(0.5, 0.5))

    class ClosingInt:
        def __index__(self):
            r.close()
            return 0
    with pytest.raises(pxvm.UsageError, match="a call into this runner is under way"):
        s.push(frame(50), dirty=[(ClosingInt(), 0, 8, 8)])
    p, changed = s.push(frame(60), dirty=[(0, 0, 8, 8)], fixation=(0.5, 0.5))  # the stream's runner still runs
    assert p.shape[0] == 12 and changed.shape == (12,)


def test_close_from_a_torch_mode_on_the_fast_path_is_refused():
    torch = pytest.importorskip("torch")
    from torch.overrides import TorchFunctionMode
    if runner_mod._native is None:
        pytest.skip("the compiled fast path is not built here")
    r = pxvm.Runner(pxvm.Program.from_plan(PLAN), executor=EXECUTOR)
    t = torch.from_numpy(frame())
    first = r.patches(t)
    r.patches(t)  # the second call of these shapes takes the prepared call
    assert any(c.hits for c in r._prepared.values())

    class CloseOnStride(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            if getattr(func, "__name__", "") == "stride":
                r.close()
            return func(*args, **(kwargs or {}))
    with pytest.raises(pxvm.UsageError, match="a call into this runner is under way"):
        with CloseOnStride():
            r.patches(t)
    assert np.array_equal(np.asarray(r.patches(t)), np.asarray(first))


def test_close_from_another_thread_waits_for_the_call():
    import threading
    r = pxvm.Runner(pxvm.Program.from_plan(PLAN), executor=EXECUTOR)
    started, closed = threading.Event(), []

    class Slow:
        def __array__(self, dtype=None, copy=None):
            started.set()
            t.join(0.2)  # the closing thread blocks on Runner.lock meanwhile
            assert not closed
            return frame()
    t = threading.Thread(target=lambda: (started.wait(), r.close(), closed.append(1)))
    t.start()
    assert r.patches(Slow()).shape[0] == 12
    t.join()
    assert closed


def test_failed_run_keeps_its_borrowed_input_alive():
    """patches(x) fails after x was bound (a trap: step budget 1); x is deleted and its memory
    reused: reading the input slot raises the package's error or gives x's bytes, never another
    array's (before: the library kept x bound, Runner._lent did not hold it: freed memory read)."""
    prog = pxvm.Program.from_plan(PLAN, max_steps=1)
    r = pxvm.Runner(prog, executor=EXECUTOR)
    x = np.full((48, 64, 4), 7, np.uint8)
    with pytest.raises(pxvm.Trap):
        r.patches(x)
    del x
    gc.collect()
    others = [np.full((48, 64, 4), 99, np.uint8) for _ in range(8)]  # noqa: F841 (the freed memory reused)
    try:
        got = r.read("image")
    except pxvm.Error:
        return  # the library unbound what the failed run bound: a clean error
    assert set(np.unique(got)) == {7}


def test_failed_batch_run_keeps_its_borrowed_inputs_alive():
    prog = pxvm.Program.from_plan(PLAN, max_steps=1)
    r = pxvm.Runner(prog, executor=EXECUTOR)
    xs = np.full((2, 48, 64, 4), 7, np.uint8)
    with pytest.raises(pxvm.Trap):
        r.patches_batch(xs)
    del xs
    gc.collect()
    others = [np.full((2, 48, 64, 4), 99, np.uint8) for _ in range(8)]  # noqa: F841
    try:
        got = r.read("image", batch=2)
    except pxvm.Error:
        return
    assert set(np.unique(got)) == {7}


def test_a_runner_refuses_pickling_in_the_package_words():
    import pickle
    r = pxvm.Runner(os.path.join(ROOT, "programs", "foveate273.pxi"))
    with pytest.raises(TypeError, match="cannot be pickled: make a Runner in each process"):
        pickle.dumps(r)
