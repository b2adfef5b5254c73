"""Issue 42, point 3: errors defined once, with structured fields.

The classes' names are the library's (pxvm_class_name, vm/error.c): python/pxvm/errors.py writes
none of them. What a failure is about comes as fields the library sets (pxvm_last_error_info:
Error.info = (item, slot, file)), never by reading its message: the failing image of a batch is
the item of the bind that failed, a file that does not decode is the file of its decode."""
import ast
import ctypes
import os

import numpy as np
import pytest
from PIL import Image

import pxvm
from pxvm import errors
from conftest import EXECUTOR, PHOTO, ROOT

PACKAGE = os.path.join(ROOT, "python", "pxvm")
FOVEATE = os.path.join(ROOT, "programs", "foveate273.pxi")


def class_name(code):
    """The library's pxvm_class_name(code), declared here (not through the package)."""
    f = pxvm._capi.lib.pxvm_class_name
    f.restype, f.argtypes = ctypes.c_char_p, [ctypes.c_int]
    return f(code).decode()


def test_the_class_names_are_the_librarys():
    for code, sub in errors._BY_CLASS.items():
        assert sub.cls == class_name(code)
    assert class_name(len(errors._BY_CLASS) + 1) == "?", "a class of the library has no subclass here"
    assert pxvm.PxIOError.cls == "i/o error" and pxvm.AssemblyError.cls == "assembly error"
    with pytest.raises(pxvm.Malformed) as e:
        pxvm.Program.from_png(b"not a png")
    assert str(e.value).startswith(pxvm.Malformed.cls + ": ")


def test_errors_py_writes_no_class_name():
    tree = ast.parse(open(os.path.join(PACKAGE, "errors.py")).read())
    names = {class_name(k) for k in range(1, len(errors._BY_CLASS) + 1)}
    written = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and n.value in names]
    assert not written, "class names written in errors.py: %s" % written


@pytest.fixture(scope="module")
def runner():
    with pxvm.Runner(pxvm.Program.load(FOVEATE), executor=EXECUTOR) as r:
        yield r


@pytest.mark.parametrize("k", [0, 2, 3])
def test_a_failing_item_of_a_batch_is_named_by_the_librarys_field(runner, k):
    photo = pxvm.load_image(PHOTO)
    images = [photo] * 4
    images[k] = photo[:10]  # a size the fixed-size input refuses
    with pytest.raises(pxvm.Unlinkable) as e:
        runner.run_batch(images)
    assert e.value.info.item == k and e.value.info.slot == runner.program.inputs[0].index
    assert e.value.info.file is None


@pytest.mark.parametrize("k", [1, 2])
def test_a_failing_file_of_a_batch_is_named_by_index_and_file(runner, tmp_path, k):
    """Two refused files of one size: the first one bound is named (the library's item), not the
    first of that size found by decoding every file again."""
    small = str(tmp_path / "small.png")
    Image.fromarray(np.full((10, 451, 3), 7, np.uint8)).save(small)
    small2 = str(tmp_path / "small2.png")
    Image.fromarray(np.full((10, 451, 3), 9, np.uint8)).save(small2)
    files = [PHOTO, PHOTO, PHOTO]
    files[k] = small
    with pytest.raises(pxvm.Unlinkable) as e:
        runner.patches_batch(files + [small2])
    assert (e.value.index, e.value.file) == (k, small)
    assert "(image %d, file '%s')" % (k, small) in str(e.value)


def test_a_file_that_does_not_decode_is_the_librarys_field(tmp_path):
    bad = tmp_path / "cut.png"
    bad.write_bytes(open(PHOTO, "rb").read()[:100])
    with pytest.raises(pxvm.Malformed) as e:
        pxvm.load_image(str(bad))
    assert e.value.info.file == str(bad) and e.value.info.item == -1
    with pytest.raises(pxvm.UsageError) as e:  # the next failure clears the fields
        pxvm.Runner(FOVEATE, executor="no-such-executor")
    assert e.value.info == pxvm.errors.ErrorInfo()


#: every `re.` call of the package, and why it reads no error message to find what failed
RE_ALLOWED = {
    ("ragged.py", "_library_error"): "drops the library's 'image i: ' from the text; i is pxvm_ragged.failed",
    ("ragged.py", "_policy_merge"): "reads a policy's canonical text, not an error",
    ("autograd.py", "_relative"): "reads a program's listing (is a SAMPLE fixation-relative), not an error",
}


def test_no_regular_expression_reads_an_error_message():
    found = set()
    for root, _, files in os.walk(PACKAGE):
        for f in files:
            if not f.endswith(".py"):
                continue
            tree = ast.parse(open(os.path.join(root, f)).read())
            for fn in ast.walk(tree):
                if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    for n in ast.walk(fn):
                        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "re":
                            found.add((os.path.relpath(os.path.join(root, f), PACKAGE), fn.name))
    assert found <= set(RE_ALLOWED), "re. used in %s" % sorted(found - set(RE_ALLOWED))
