"""Fixtures of the Python tests. The executor under test is PXVM_TEST_EXECUTOR ("cpu", the
default and CI's; "cuda" on the GPU machine, where the CUDA-only tests run too)."""
import os
import subprocess
import sys

import numpy as np
import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))
import pxvm  # noqa: E402

BIN = os.environ.get("PXVM_BIN", os.path.join(ROOT, "bin"))
EXECUTOR = os.environ.get("PXVM_TEST_EXECUTOR", "cpu")
PHOTO = os.path.join(ROOT, "programs", "data", "chelsea.png")


def golden_programs():
    """(program path, {slot: image path}) of tests/golden/programs.txt."""
    out = []
    with open(os.path.join(ROOT, "tests", "golden", "programs.txt")) as f:
        for line in f:
            words = line.split()
            if not words or words[0].startswith("#"):
                continue
            ins = {}
            for i, w in enumerate(words):
                if w == "--in":
                    slot, path = words[i + 1].split("=", 1)
                    ins[slot] = os.path.join(ROOT, path)
            out.append((os.path.join(ROOT, words[0]), ins))
    return out


def pxrun(*args, check=True):
    r = subprocess.run([os.path.join(BIN, "pxrun"), *args], capture_output=True, text=True, cwd=ROOT)
    if check and r.returncode:
        raise AssertionError("pxrun %s: exit %d: %s" % (" ".join(args), r.returncode, r.stderr))
    return r


def fnv1a64(data):
    """pxvm_hash64 (FNV-1a, 64 bits) of bytes, as pxrun --hash prints it."""
    h = 0xcbf29ce484222325
    for b in memoryview(data).cast("B"):
        h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h


@pytest.fixture(scope="session")
def photo():
    return pxvm.load_image(PHOTO)


@pytest.fixture(scope="session")
def foveate():
    return pxvm.Program.load(os.path.join(ROOT, "programs", "foveate273.pxi"))


def random_images(rng, n, h, w, c=4):
    return [rng.integers(0, 256, size=(h, w, c), dtype=np.uint8) for _ in range(n)]
