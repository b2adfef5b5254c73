"""What a newcomer's mistakes get back (found by a new user's trial on real photos): an error in
the library's words that names the keyword, file or value at fault, never one about something
else, and never a message the size of an image.

- a misspelt or misplaced option (polcy=, normalise=, device= on a call without it) is named as
  an unknown keyword, where it used to be read as an input and refused for the wrong reason;
- an image's bytes, or a file object, decode as its file does (load_image);
- a .pxi or a missing file given as a plan, a .json plan given to Runner, a photo given as a
  program: each says what the file is and which one;
- each tool says its version, the library's, and the executors built in (--version)."""
import io
import os
import subprocess

import numpy as np
import pytest

import pxvm
from pxvm.errors import Malformed, PlanError, PxIOError, UsageError
from conftest import BIN, ROOT

CHELSEA = os.path.join(ROOT, "programs", "data", "chelsea.png")
FOVEATE = os.path.join(ROOT, "programs", "foveate273.pxi")
UNIFORM_PXI = os.path.join(ROOT, "programs", "uniform.pxi")
UNIFORM_JSON = os.path.join(ROOT, "programs", "uniform.json")


@pytest.fixture(scope="module")
def image():
    return pxvm.load_image(CHELSEA)


@pytest.mark.parametrize("call, kwargs", [
    ("tokens", {"polcy": "fit"}),
    ("tokens", {"normalise": "clip"}),
    ("patches", {"device": "cuda"}),
    ("run", {"layout": "nhwc"}),
])
def test_a_misspelt_option_is_named_as_an_unknown_keyword(image, call, kwargs):
    r = pxvm.Runner(FOVEATE)
    key = next(iter(kwargs))
    with pytest.raises(UsageError, match="unknown keyword argument '%s'.*its inputs: image" % key):
        getattr(r, call)(image, **kwargs)


def test_a_misspelt_option_of_a_dynamic_batch_is_named_too(image):
    r = pxvm.Runner(pxvm.Program.from_plan(UNIFORM_JSON))
    with pytest.raises(UsageError, match="unknown keyword argument 'devcie'"):
        r.tokens_batch([image], policy="dynamic", devcie="cpu")
    with pytest.raises(UsageError, match="policy dynamic does not take inputs"):  # a slot name: as before
        r.tokens_batch([image], policy="dynamic", image=[image])


def test_inputs_by_slot_name_still_bind(image):
    r = pxvm.Runner(FOVEATE)
    assert np.array_equal(r.patches(image=image), r.patches(image))


def test_an_images_bytes_and_file_objects_decode_as_its_file():
    want = pxvm.load_image(CHELSEA)
    with open(CHELSEA, "rb") as f:
        data = f.read()
    assert np.array_equal(pxvm.load_image(data), want)
    assert np.array_equal(pxvm.load_image(bytearray(data)), want)
    assert np.array_equal(pxvm.load_image(io.BytesIO(data)), want)
    with open(CHELSEA, "rb") as f:
        assert np.array_equal(pxvm.load_image(f), want)
    with pytest.raises(Malformed, match="'<bytes>': corrupt or truncated PNG"):
        pxvm.load_image(data[:5000])
    with open(CHELSEA, "rb") as f, pytest.raises(Malformed, match="'%s': corrupt or truncated PNG" % CHELSEA):
        pxvm.load_image(_named(f, 5000))
    with open(CHELSEA, "r", encoding="latin-1") as f, pytest.raises(UsageError, match="binary mode"):
        pxvm.load_image(f)


def _named(f, n):
    """A file object named as f, holding its first n bytes."""
    b = io.BytesIO(f.read()[:n])
    b.name = f.name
    return b


def test_a_long_value_is_cut_in_the_message():
    with pytest.raises(UsageError) as e:
        pxvm.load_image("x" * 100000 + "\0")
    assert "contains a NUL character" in str(e.value) and len(str(e.value)) < 300, len(str(e.value))


def test_plans_and_programs_say_what_the_file_is():
    with pytest.raises(PlanError, match="is a PNG file, not a JSON plan .*Program.load opens it"):
        pxvm.Program.from_plan(UNIFORM_PXI)
    with pytest.raises(PxIOError, match="cannot read plan '/nonexistent/plan.json'"):
        pxvm.Program.from_plan("/nonexistent/plan.json")
    with pytest.raises(Malformed, match=r"not a pxvm program \(expected 'PXVM'\) \(file '%s'\)" % CHELSEA):
        pxvm.Program.load(CHELSEA)  # e.g. the program and the image swapped


def test_runner_takes_a_json_plan_as_pxrun_does(image):
    a = pxvm.Runner(UNIFORM_JSON)
    b = pxvm.Runner(pxvm.Program.from_plan(UNIFORM_JSON))
    assert image.shape[:2] == (300, 451)  # the plan's size: chelsea's
    assert np.array_equal(a.patches(image), b.patches(image))


def test_a_device_for_the_cpu_executor_is_refused():
    with pytest.raises(UsageError, match="device=5 is a CUDA device: the cpu executor takes none"):
        pxvm.Runner(FOVEATE, executor="cpu", device=5)
    assert pxvm.Runner(FOVEATE, executor="cpu", device=0).executor == "cpu"


def test_no_image_is_named_as_what_was_given():
    r = pxvm.Runner(FOVEATE)
    with pytest.raises(TypeError, match="images must be uint8 arrays, got a NoneType"):
        r.patches(None)
    with pytest.raises(TypeError, match="images must be uint8 arrays, got float32"):
        r.patches(np.zeros((300, 451, 3), np.float32))


@pytest.mark.parametrize("tool", ["pxrun", "pxbatch", "pxasm"])
def test_version_names_the_tool_the_library_and_the_executors(tool):
    r = subprocess.run([os.path.join(BIN, tool), "--version"], capture_output=True, text=True, timeout=60)
    lines = r.stdout.splitlines()
    assert r.returncode == 0 and r.stderr == "" and len(lines) == 2, (r.returncode, r.stdout, r.stderr)
    assert lines[0] == "%s (pxvm) %s" % (tool, pxvm.__version__)
    assert lines[1].startswith("executors: cpu")
    h = subprocess.run([os.path.join(BIN, tool), "--help"], capture_output=True, text=True, timeout=60)
    assert h.returncode == 0 and "--version" in h.stdout
