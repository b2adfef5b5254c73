"""Issue 23's "bad input" clause where a user meets it: an image outside the program's bounds, a
truncated or non-image file, a file given where another kind is needed. Each gets an error naming
the file (and what was wrong); in a batch the other images go on and each failure is listed;
nothing partial is written, and nothing is skipped silently."""
import os

import pytest

from conftest import PHOTO, ROOT, pxrun

FOVEATE = os.path.join(ROOT, "programs", "foveate273.pxi")


def test_pxrun_scanpath_with_a_program_image_is_a_usage_error_naming_the_file():
    """--scanpath compiles a plan: a .pxi (already compiled) is a usage error (exit 2) saying so and
    naming the file; before, the .pxi was parsed as JSON ('plan error', exit 1)."""
    r = pxrun("--scanpath", "3", FOVEATE, "--in", "image=" + PHOTO, check=False)
    assert r.returncode == 2, r.stderr
    assert "usage: --scanpath 3 needs a JSON plan" in r.stderr and "'%s' is a program image (.pxi)" % FOVEATE in r.stderr
    assert "plan error" not in r.stderr
