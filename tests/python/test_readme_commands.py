"""Every command in README.md runs as printed (issue 24): each fenced `sh` and `python` block, in the
page's order, from one scratch folder that stands for this repository's root (a link to each of its
entries, so that what the commands write - out/, plan.json, tokens/, a venv - lands in the scratch
folder, removed at the end), as a reader who followed the page from the top would run it:

- `sh` blocks run under `bash -e -o pipefail` (every command must exit 0, a pipeline's first ones
  included), with bin/ on PATH, `python3` the interpreter running this test, and `head` and `less`
  reading all their input (so that a pipeline's status is its producer's, never SIGPIPE's);
- `python` blocks run under this interpreter with PYTHONPATH=python, as the README says, and no
  PXVM_LIB: the package finds build/libpxvm.so.1 as it would for the reader;
- a block that cannot run here is marked just before it, in the README, by an HTML comment with a
  reason: `<!-- readme-test: skip (needs a GPU) -->`; `<!-- readme-test: xfail (why) -->` marks a
  known failure, which must fail (when it passes, remove the marker). Other blocks (json, text)
  are not commands. Nothing is skipped without a marker, except the blocks that read
  build/data/vtest.avi where `make video-data` could not fetch it (offline; CI requires it).

Needs the default layout of `make test` (bin/ and build/ in the repository root)."""
import os
import re
import shutil
import subprocess
import sys
import tempfile

import pytest

from conftest import BIN, ROOT

README = os.path.join(ROOT, "README.md")
LANGS = {"sh": "sh", "bash": "sh", "python": "python"}
MARKER = re.compile(r"\s*<!--\s*readme-test:\s*(.*?)\s*-->\s*")     # a line of its own
MARKER_KINDS = re.compile(r"(skip|xfail) \((.+)\)")
FENCE = re.compile(r"^( *)(`{3,}|~{3,})\s*([\w+-]*)")
VTEST = "build/data/vtest.avi"


def readme_blocks(text):
    """[(line, lang, code, marker)] of every fenced block: marker is the `readme-test:` comment on the
    last non-blank line before the fence (or None); the code has the fence's indentation removed."""
    lines = text.split("\n")
    blocks, i = [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, lang = len(m.group(1)), m.group(2), m.group(3)
        start, body = i + 1, []
        i += 1
        while i < len(lines) and not re.match(r"^ *%s%s*\s*$" % (re.escape(fence), re.escape(fence[0])), lines[i]):
            body.append(lines[i][indent:] if lines[i][:indent].strip() == "" else lines[i])
            i += 1
        i += 1
        k = start - 2
        while k >= 0 and not lines[k].strip():
            k -= 1
        mk = MARKER.fullmatch(lines[k]) if k >= 0 else None
        blocks.append((start, lang, "\n".join(body) + "\n", mk.group(1) if mk else None))
    return blocks


with open(README) as _f:
    _TEXT = _f.read()
BLOCKS = readme_blocks(_TEXT)
RUNNABLE = [b for b in BLOCKS if b[1] in LANGS]


def test_readme_markers_are_well_formed():
    """Each marker is `skip (reason)` or `xfail (reason)` and stands before an sh or python block."""
    marked = {b[0] for b in BLOCKS if b[3] is not None}
    for n, line in enumerate(_TEXT.split("\n"), 1):
        m = MARKER.fullmatch(line)
        if not m:
            continue
        assert MARKER_KINDS.fullmatch(m.group(1)), "README.md:%d: %r: write skip (reason) or xfail (reason)" % (
            n, m.group(1))
        following = [b for b in BLOCKS if b[0] > n]
        assert following and following[0][0] in marked and following[0][1] in LANGS, (
            "README.md:%d: the marker stands before no sh or python block" % n)
    assert len(RUNNABLE) >= 10 and sum(b[3] is None for b in RUNNABLE) >= 8, "the README's blocks were not found"


@pytest.fixture(scope="module")
def scratch():
    """The scratch root: links to the repository's entries (not out/, nor what the commands make),
    a folder of shims first on PATH, and the environment of a reader's shell."""
    if os.path.realpath(BIN) != os.path.realpath(os.path.join(ROOT, "bin")) or \
            not os.path.exists(os.path.join(ROOT, "build", "libpxvm.so.1")):
        pytest.skip("the README's commands use bin/ and build/ of the repository root (run through `make test`)")
    top = tempfile.mkdtemp(prefix="pxvm-readme-")
    root, shims = os.path.join(top, "root"), os.path.join(top, "shims")
    os.mkdir(root)
    os.mkdir(shims)
    for name in os.listdir(ROOT):
        if name not in (".git", "out", "__pycache__"):
            os.symlink(os.path.join(ROOT, name), os.path.join(root, name))
    for name, script in (("head", '/usr/bin/head "$@"; rc=$?; cat > /dev/null; exit $rc'), ("less", "exec cat")):
        with open(os.path.join(shims, name), "w") as f:
            f.write("#!/bin/sh\n%s\n" % script)
        os.chmod(os.path.join(shims, name), 0o755)
    os.symlink(sys.executable, os.path.join(shims, "python3"))
    env = {k: v for k, v in os.environ.items()
           if k not in ("PXVM_LIB", "PYTHONPATH", "MAKEFLAGS", "MAKELEVEL", "MFLAGS", "PXVM_BIN")}
    env["PATH"] = "%s:%s:%s" % (shims, os.path.join(root, "bin"), env.get("PATH", "/usr/bin:/bin"))
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    yield root, env
    shutil.rmtree(top, ignore_errors=True)


@pytest.mark.parametrize("line,lang,code,marker", RUNNABLE, ids=["README.md:%d-%s" % (b[0], b[1]) for b in RUNNABLE])
def test_readme_block(scratch, line, lang, code, marker):
    root, env = scratch
    kind, reason = MARKER_KINDS.fullmatch(marker).groups() if marker else (None, None)
    if kind == "skip":
        pytest.skip("README.md:%d: %s" % (line, reason))
    if VTEST in code and not os.path.exists(os.path.join(ROOT, VTEST)) and os.environ.get("PXVM_REQUIRE_VTEST") != "1":
        pytest.skip("README.md:%d: %s is missing (make video-data could not fetch it: offline?)" % (line, VTEST))
    if LANGS[lang] == "sh":
        cmd = ["bash", "-e", "-o", "pipefail", "-c", code, "README.md:%d" % line]
    else:
        cmd = [sys.executable, "-c", code]
        env = dict(env, PYTHONPATH="python")
    r = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=300)
    report = "README.md:%d (%s) exited %d:\n%s\n--- stdout ---\n%s\n--- stderr ---\n%s" % (
        line, lang, r.returncode, code, r.stdout[-3000:], r.stderr[-3000:])
    if kind == "xfail":
        if r.returncode == 0:
            pytest.fail("README.md:%d passes now: remove its marker `xfail (%s)`" % (line, reason))
        pytest.xfail("README.md:%d: %s (exit %d: %s)" % (line, reason, r.returncode, r.stderr.strip()[-300:]))
    assert r.returncode == 0, report
