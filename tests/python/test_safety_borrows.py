"""What the Runner lends the library in place (a borrow kept until the next bind) stays alive:
the arrays the views point at, including the temporary array made from a PIL image or an object
with __array__, not only the caller's object (found by a red team: read("image") after patches(x)
read freed memory, exit 139 or an ASan heap-use-after-free)."""
import gc
import os

import numpy as np
import pytest

import pxvm

EXECUTOR = os.environ.get("PXVM_TEST_EXECUTOR", "cpu")
ROOT = os.path.join(os.path.dirname(__file__), "..", "..")


def image():
    return np.random.default_rng(1).integers(0, 256, (300, 451, 4), dtype=np.uint8)


class ArrayLike:
    """Any object whose __array__ gives a fresh array each time."""
    def __init__(self, a):
        self.a = a

    def __array__(self, dtype=None, copy=None):
        return self.a.copy()


@pytest.mark.parametrize("kind", ["pil", "arraylike"])
def test_the_temporary_array_of_an_input_stays_alive_while_borrowed(kind):
    src = image()
    if kind == "pil":
        from PIL import Image
        x = Image.fromarray(src, "RGBA")
    else:
        x = ArrayLike(src)
    r = pxvm.Runner(os.path.join(ROOT, "programs", "foveate273.pxi"), executor=EXECUTOR)
    r.patches(x)
    gc.collect()
    junk = [np.full(src.shape, 7, np.uint8) for _ in range(8)]  # would reuse freed memory
    assert np.array_equal(r.read("image", 0)[0], src)
    del junk
    r.close()


def test_pyramid_of_a_pil_image_reads_no_freed_memory():
    from PIL import Image
    src = image()
    levels = pxvm.pyramid(Image.fromarray(src, "RGBA"))
    assert np.array_equal(levels[0], src)
