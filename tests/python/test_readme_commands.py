"""Every command in README.md and docs/*.md runs as printed (issues 24 and 42): each fenced `sh` and
`python` block of a page, in the page's order, from one scratch folder per page that stands for this
repository's root (a link to each of its entries, so that what the commands write - out/, plan.json,
tokens/, a venv - lands in the scratch folder, removed at the end), as a reader who followed that
page from the top would run it:

- `sh` blocks run under `bash -e -o pipefail` (every command must exit 0, a pipeline's first ones
  included), with bin/ on PATH, `python3` the interpreter running this test, and `head` and `less`
  reading all their input (so that a pipeline's status is its producer's, never SIGPIPE's);
- `python` blocks run under this interpreter with PYTHONPATH=python, as the README says, and no
  PXVM_LIB: the package finds build/libpxvm.so.1 as it would for the reader;
- a block that cannot run here is marked just before it, in the page, by an HTML comment with a
  reason: `<!-- readme-test: skip (needs a GPU) -->`; `<!-- readme-test: xfail (why) -->` marks a
  known failure, which must fail (when it passes, remove the marker). Other blocks (json, text, c)
  are not commands. Nothing is skipped without a marker, except the blocks that read
  build/data/vtest.avi where `make video-data` could not fetch it (offline; CI requires it).

Every relative link of those pages names a file that exists (and a heading of it, for `#anchor`).

Needs the default layout of `make test` (bin/ and build/ in the repository root)."""
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

import pytest

from conftest import BIN, ROOT

# README.md first, then the docs/ pages (not docs/design/: notes on why, with no commands)
PAGES = ["README.md"] + sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "docs", "*.md")))
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


def _read(page):
    with open(os.path.join(ROOT, page)) as f:
        return f.read()


_TEXTS = {page: _read(page) for page in PAGES}
BLOCKS = {page: readme_blocks(text) for page, text in _TEXTS.items()}
RUNNABLE = [(page,) + b for page in PAGES for b in BLOCKS[page] if b[1] in LANGS]


@pytest.mark.parametrize("page", PAGES)
def test_readme_markers_are_well_formed(page):
    """Each marker is `skip (reason)` or `xfail (reason)` and stands before an sh or python block."""
    blocks = BLOCKS[page]
    marked = {b[0] for b in blocks if b[3] is not None}
    for n, line in enumerate(_TEXTS[page].split("\n"), 1):
        m = MARKER.fullmatch(line)
        if not m:
            continue
        assert MARKER_KINDS.fullmatch(m.group(1)), "%s:%d: %r: write skip (reason) or xfail (reason)" % (
            page, n, m.group(1))
        following = [b for b in blocks if b[0] > n]
        assert following and following[0][0] in marked and following[0][1] in LANGS, (
            "%s:%d: the marker stands before no sh or python block" % (page, n))


def test_the_pages_have_commands():
    """The blocks were found: the README's quick start, and the pages' commands that run here."""
    readme = [b for b in RUNNABLE if b[0] == "README.md"]
    assert len(readme) >= 5 and sum(b[4] is None for b in readme) >= 4, "the README's blocks were not found"
    assert len(RUNNABLE) >= 10 and sum(b[4] is None for b in RUNNABLE) >= 8, "the pages' blocks were not found"


LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def _anchors(text):
    """The anchors GitHub gives a page's headings (outside code blocks): lower case, punctuation
    but - and _ dropped, spaces as -; a repeated heading gets -1, -2, ..."""
    seen, out, fence = {}, set(), None
    for line in text.split("\n"):
        f = FENCE.match(line)
        if fence is None and f:
            fence = f.group(2)
        elif fence is not None and line.strip().startswith(fence):
            fence = None
        m = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if fence is not None or not m:  # a comment in a code block is no heading
            continue
        slug = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
        k = seen.get(slug, 0)
        seen[slug] = k + 1
        out.add(slug if k == 0 else "%s-%d" % (slug, k))
    return out


def _outside_code(text):
    """The page without its fenced blocks and inline code (a link there is an example, not a link)."""
    lines, keep, fence = text.split("\n"), [], None
    for line in lines:
        m = FENCE.match(line)
        if fence is None and m:
            fence = m.group(2)
        elif fence is not None and line.strip().startswith(fence):
            fence = None
        elif fence is None:
            keep.append(re.sub(r"`[^`]*`", "", line))
    return "\n".join(keep)


@pytest.mark.parametrize("page", PAGES)
def test_relative_links_resolve(page):
    """Every relative link of the page names a file of the tree (and, with #anchor, a heading of it)."""
    bad = []
    for target in LINK.findall(_outside_code(_TEXTS[page])):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        file = os.path.normpath(os.path.join(ROOT, os.path.dirname(page), path)) if path else os.path.join(ROOT, page)
        if not os.path.exists(file):
            bad.append("%s: no file %s" % (target, os.path.relpath(file, ROOT)))
        elif anchor and file.endswith(".md") and anchor not in _anchors(_read(os.path.relpath(file, ROOT))):
            bad.append("%s: no heading #%s in %s" % (target, anchor, os.path.relpath(file, ROOT)))
    assert not bad, "%s: links that do not resolve:\n  %s" % (page, "\n  ".join(bad))


@pytest.fixture(scope="module")
def scratch():
    """The scratch root: links to the repository's entries (not out/, nor what the commands make),
    a folder of shims first on PATH, and the environment of a reader's shell."""
    if os.path.realpath(BIN) != os.path.realpath(os.path.join(ROOT, "bin")) or \
            not os.path.exists(os.path.join(ROOT, "build", "libpxvm.so.1")):
        pytest.skip("the README's commands use bin/ and build/ of the repository root (run through `make test`)")
    top = tempfile.mkdtemp(prefix="pxvm-readme-")
    shims = os.path.join(top, "shims")
    os.mkdir(shims)
    roots = {}

    def root_of(page):
        """The page's own scratch root, made at its first block: each page runs as read alone."""
        if page not in roots:
            root = roots[page] = os.path.join(top, "root-%d" % len(roots))
            os.mkdir(root)
            for name in os.listdir(ROOT):
                if name not in (".git", "out", "__pycache__"):
                    os.symlink(os.path.join(ROOT, name), os.path.join(root, name))
        return roots[page]
    for name, script in (("head", '/usr/bin/head "$@"; rc=$?; cat > /dev/null; exit $rc'), ("less", "exec cat")):
        with open(os.path.join(shims, name), "w") as f:
            f.write("#!/bin/sh\n%s\n" % script)
        os.chmod(os.path.join(shims, name), 0o755)
    os.symlink(sys.executable, os.path.join(shims, "python3"))
    env = {k: v for k, v in os.environ.items()
           if k not in ("PXVM_LIB", "PYTHONPATH", "MAKEFLAGS", "MAKELEVEL", "MFLAGS", "PXVM_BIN")}
    env["PATH"] = "%s:%s:%s" % (shims, os.path.join(ROOT, "bin"), env.get("PATH", "/usr/bin:/bin"))
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    yield root_of, env
    shutil.rmtree(top, ignore_errors=True)


@pytest.mark.parametrize("page,line,lang,code,marker", RUNNABLE,
                         ids=["%s:%d-%s" % (b[0], b[1], b[2]) for b in RUNNABLE])
def test_readme_block(scratch, page, line, lang, code, marker):
    root_of, env = scratch
    where = "%s:%d" % (page, line)
    kind, reason = MARKER_KINDS.fullmatch(marker).groups() if marker else (None, None)
    if kind == "skip":
        pytest.skip("%s: %s" % (where, reason))
    if VTEST in code and not os.path.exists(os.path.join(ROOT, VTEST)) and os.environ.get("PXVM_REQUIRE_VTEST") != "1":
        pytest.skip("%s: %s is missing (make video-data could not fetch it: offline?)" % (where, VTEST))
    root = root_of(page)
    if LANGS[lang] == "sh":
        cmd = ["bash", "-e", "-o", "pipefail", "-c", code, where]
    else:
        cmd = [sys.executable, "-c", code]
        env = dict(env, PYTHONPATH="python")
    r = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=300)
    report = "%s (%s) exited %d:\n%s\n--- stdout ---\n%s\n--- stderr ---\n%s" % (
        where, lang, r.returncode, code, r.stdout[-3000:], r.stderr[-3000:])
    if kind == "xfail":
        if r.returncode == 0:
            pytest.fail("%s passes now: remove its marker `xfail (%s)`" % (where, reason))
        pytest.xfail("%s: %s (exit %d: %s)" % (where, reason, r.returncode, r.stderr.strip()[-300:]))
    assert r.returncode == 0, report
