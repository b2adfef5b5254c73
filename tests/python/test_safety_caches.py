"""Issue 39: the Python caches are LRUs bounded by count and by bytes (runner._LRU, one helper for
all): pxvm.pyramid's runners per image size, a Runner's C runners per batch size, pxvm.seeds'
runners. Before, each grew with every size ever used (200 pyramid sizes: 1.4 GB; batch sizes
1..64: 2.1 GB). Policy dynamic keeps no runners per size any more: one executor call a batch."""
import numpy as np
import pytest

from conftest import EXECUTOR
import pxvm
from pxvm import ragged, runner as runner_mod, seeds
from pxvm.runner import _LRU

PLAN = {"image": [64, 48], "budget": 12, "patch": 8, "scheme": "logpolar"}


def test_lru_bounds_count_and_bytes_and_keeps_the_most_recent():
    gone = []
    c = _LRU(3, 100, evict=lambda k, v: gone.append(k))
    for k in range(3):
        c.put(k, "v%d" % k, 30)
    assert len(c) == 3 and c.bytes == 90 and gone == []  # at the count bound: all kept
    c.get(0)  # 0 used: 1 is now the least recent
    c.put(3, "v3", 30)  # count 4 > 3: 1 goes
    assert gone == [1] and list(c) == [2, 0, 3] and c.bytes == 90
    c.put(4, "v4", 10)  # count: 2 goes; 70 bytes
    assert gone == [1, 2] and list(c) == [0, 3, 4] and c.bytes == 70
    c.get(0)
    c.put(5, "v5", 60)  # count: 3 goes; then 4 + 0 + 5 = 100 bytes: exactly the bound, kept
    assert gone == [1, 2, 3] and list(c) == [4, 0, 5] and c.bytes == 100
    c.pop(4)  # 90 bytes in 0 and 5
    c.put(6, "v6", 11)  # 101 bytes, one over: the least recent (0) goes though the count is within
    assert gone == [1, 2, 3, 0] and list(c) == [5, 6] and c.bytes == 71
    c.put(7, "v7", 500)  # alone over the bytes: the most recent stays, every other goes
    assert gone == [1, 2, 3, 0, 5, 6] and list(c) == [7] and c.bytes == 500


def test_pyramid_keeps_a_bounded_number_of_sizes(monkeypatch):
    monkeypatch.setattr(runner_mod, "_pyramid_cache", _LRU(runner_mod.PYRAMID_SIZES, runner_mod.PYRAMID_BYTES))
    cache = runner_mod._pyramid_cache
    for i in range(runner_mod.PYRAMID_SIZES + 8):
        img = np.full((8 + i, 9, 3), i, np.uint8)
        levels = pxvm.pyramid(img, executor=EXECUTOR)
        assert levels[0].shape == (8 + i, 9, 4)
        assert len(cache) <= runner_mod.PYRAMID_SIZES and cache.bytes <= runner_mod.PYRAMID_BYTES
    assert len(cache) == runner_mod.PYRAMID_SIZES  # at the bound, not past it
    # the byte bound: sizes whose slots (about 1.3 MB each) are over a 4 MB cache
    monkeypatch.setattr(runner_mod, "_pyramid_cache", _LRU(100, 4 << 20))
    for i in range(6):
        pxvm.pyramid(np.zeros((512 + i, 512, 4), np.uint8), executor=EXECUTOR)
        assert runner_mod._pyramid_cache.bytes <= 4 << 20
    assert len(runner_mod._pyramid_cache) == 2  # 2 x 1.4 MB within 4 MB, a third is not


def test_a_runner_keeps_a_bounded_number_of_batch_sizes():
    r = pxvm.Runner(pxvm.Program.from_plan(PLAN), executor=EXECUTOR)
    img = np.full((48, 64, 4), 5, np.uint8)
    one = r.patches(img)
    for b in range(1, 2 * runner_mod.RUNNER_BATCH_SIZES + 3):
        p = r.patches_batch(np.stack([img] * b))
        assert np.array_equal(p[-1], one)
        assert len(r._runners) <= runner_mod.RUNNER_BATCH_SIZES
        assert r._runners.bytes <= runner_mod.RUNNER_BYTES
        assert set(r._stream) <= set(r._runners) and {k[0] for k in r._lent} <= set(r._runners)
    assert len(r._runners) == runner_mod.RUNNER_BATCH_SIZES
    assert np.array_equal(r.patches(img), one)  # batch 1 opened again once it went


def test_a_runners_byte_bound_closes_the_least_recent_batch_sizes(monkeypatch):
    r = pxvm.Runner(pxvm.Program.from_plan(PLAN), executor=EXECUTOR)
    per_item = runner_mod._slot_bytes(r.program)
    r._runners.max_bytes = 10 * per_item  # batches 1..4 are 10 items: kept; a batch of 5 then evicts
    img = np.full((48, 64, 4), 5, np.uint8)
    for b in (1, 2, 3, 4):
        r.patches_batch(np.stack([img] * b))
    assert sorted(r._runners) == [1, 2, 3, 4] and r._runners.bytes == 10 * per_item
    r.patches_batch(np.stack([img] * 5))
    # 15 items > 10: the least recent go (1, 2, then 3) until within: 4 + 5 = 9 items
    assert sorted(r._runners) == [4, 5] and r._runners.bytes == 9 * per_item


def test_no_c_runner_is_closed_under_a_call_that_uses_it(monkeypatch):
    """A callback of a batch-1 call that runs batches of other sizes on the same runner: the
    eviction waits for the outermost call to end (before, under ASan, a use after free)."""
    r = pxvm.Runner(pxvm.Program.from_plan(PLAN), executor=EXECUTOR)
    r._runners.max_count = 1
    img = np.full((48, 64, 4), 5, np.uint8)

    class Nested:
        def __array__(self, dtype=None, copy=None):
            for b in (2, 3):
                r.patches_batch(np.stack([img] * b))
            assert sorted(r._runners) == [1, 2, 3]  # over the bound while a call is in flight
            return img
    assert np.array_equal(r.patches(Nested()), r.patches_batch(img[None])[0])
    assert len(r._runners) == 1


def test_seeds_cache_is_bounded(monkeypatch):
    monkeypatch.setattr(seeds, "_cache", seeds._RunnerCache(4, seeds.PROGRAM_CACHE_BYTES))
    for i in range(10):
        seeds.generate_mipmaps(np.full((16 + i, 16, 3), i, np.uint8))
        assert len(seeds._cache) <= 4
    assert len(seeds._cache) == 4 and seeds._cache._runners.bytes <= seeds.PROGRAM_CACHE_BYTES
    assert seeds.PROGRAM_CACHE_SIZE == 32 and seeds._RunnerCache(32, 1)._runners.max_bytes == 1


def test_dynamic_policy_opens_no_runner_per_size(monkeypatch):
    """Policy dynamic needs no cache of runners: a batch of new sizes is one call of the runner's
    own executor (pxvm_runner_ragged), no program compiled, no runner opened (before: one runner
    and executor per size, in an LRU)."""
    import os
    from conftest import ROOT
    r = pxvm.Runner(pxvm.Program.from_plan(os.path.join(ROOT, "programs", "uniform.json")), executor=EXECUTOR)
    opened, compiled, ragged_calls = [], [], []
    for name, seen in (("pxvm_runner_open", opened), ("pxvm_prog_from_plan", compiled),
                       ("pxvm_runner_ragged", ragged_calls)):
        real = getattr(ragged._lib, name)
        monkeypatch.setattr(ragged._lib, name, lambda *a, real=real, seen=seen: seen.append(1) or real(*a))
    for i in range(6):
        rag = r.patches_batch([np.full((64, 64 + 32 * i, 3), 7, np.uint8)], policy="dynamic:min=1024,max=100000")
        assert len(rag) == 1 and len(rag.tokens) == (64 // 16) * ((64 + 32 * i) // 16)
    assert (len(opened), len(compiled), len(ragged_calls)) == (0, 0, 6)


@pytest.mark.parametrize("name", ["RUNNER_BATCH_SIZES", "RUNNER_BYTES", "PYRAMID_SIZES", "PYRAMID_BYTES"])
def test_bounds_are_documented_constants(name):
    assert getattr(runner_mod, name) > 0


def test_an_any_size_runner_is_counted_at_the_largest_size_it_took():
    """A C runner of an any-size program keeps storage for the largest image bound to it: counted at
    the reference size (red team: the cache believed 176 MB while 3.2 GB were held), the byte bound
    did not hold. Counted at the largest size taken, it does."""
    prog = pxvm.Program.load("programs/foveate273_any.pxi")
    r = pxvm.Runner(prog, executor=EXECUTOR)
    small, big = np.full((300, 451, 4), 5, np.uint8), np.full((600, 900, 4), 5, np.uint8)
    r.patches_batch(np.stack([big] * 2))
    r.patches_batch(np.stack([small] * 2))  # smaller now: the storage stays the big one's
    image = prog.slot("image").index
    want = runner_mod._slot_bytes(prog, 2, {image: (900, 600)})
    one = runner_mod._slot_bytes(prog, 1)  # the runner of one item the Runner opened, never bound
    assert want > runner_mod._slot_bytes(prog, 2) and r._runners.bytes == want + one
    r._runners.max_bytes = want + runner_mod._slot_bytes(prog, 1, {image: (900, 600)}) - 1
    r.patches(big)  # one item at the big size more: over the bound by one byte, batch 2 goes
    assert sorted(r._runners) == [1]
