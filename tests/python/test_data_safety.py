"""Datasets and shards under hostile or unusual conditions (issue 39).

Fork: a Runner used in the main process, then forked children (DataLoader workers) close it or
run it: the CPU executor's thread pool is made again in the child, never a hang (each case runs in
a subprocess with a timeout, so a hang fails the test instead of hanging CI). Spawn: the datasets
pickle (DataLoader(multiprocessing_context="spawn")). lenient= reaches load_image. Shards: the one
rule of tools/pxbatch.h (names, rows, arrays) checked by pxbatch --verify and the Python loaders
alike, on the same tampered folders.
"""
import glob
import os
import shutil
import signal
import subprocess
import sys
import textwrap

import pytest

import pxvm
from conftest import ROOT

PLAN = os.path.join(ROOT, "programs", "uniform.json")
PHOTOS = sorted(glob.glob(os.path.join(ROOT, "tests", "data", "photos", "*.png")) +
                glob.glob(os.path.join(ROOT, "tests", "data", "photos", "*.jpg")) +
                [os.path.join(ROOT, "programs", "data", "chelsea.png")])


def _photos(tmp_path):
    d = tmp_path / "photos"
    d.mkdir()
    for p in PHOTOS:
        shutil.copy(p, d / os.path.basename(p))
    return d


def _python(script, timeout=120):
    """Runs script in a fresh interpreter (pxvm importable) in a session of its own; a hang past
    timeout is a failure, and the whole session (forked children too) is killed."""
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    p = subprocess.Popen([sys.executable, "-c", textwrap.dedent(script)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT, start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        pytest.fail("hung: no exit within %d s" % timeout)
    return subprocess.CompletedProcess(p.args, p.returncode, out, err)


# ---- fork -------------------------------------------------------------------------------------

def test_forked_children_close_and_run_a_runner_of_the_parent():
    """The runner's pool has workers asleep on its condition variable at the fork; the child
    closing it hung in pthread_cond_destroy (8f6e306); a child running it runs on a pool of its
    own and gets the parent's tokens."""
    r = _python("""
        import os, time, numpy as np, pxvm
        runner = pxvm.Runner(pxvm.Program.from_plan(%r), executor="cpu")
        img = pxvm.load_image(%r)
        want = np.array(runner.patches_batch([img], policy="dynamic")[0])
        time.sleep(0.05)  # the workers are asleep
        for close_only in (True, False):
            pid = os.fork()
            if pid == 0:
                ok = True
                if not close_only:
                    got = np.array(runner.patches_batch([img], policy="dynamic")[0])
                    ok = got.tobytes() == want.tobytes()
                runner.close()
                os._exit(0 if ok else 3)
            _, st = os.waitpid(pid, 0)
            print("child", close_only, os.waitstatus_to_exitcode(st))
        got = np.array(runner.patches_batch([img], policy="dynamic")[0])  # the parent's pool still runs
        print("parent", got.tobytes() == want.tobytes())
        runner.close()
    """ % (PLAN, PHOTOS[-1]), timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n")[:3] == ["child True 0", "child False 0", "parent True"], r.stdout + r.stderr


def test_dataloader_workers_after_a_runner_in_the_main_process(tmp_path):
    """The user's trial: a Runner used in the main process (garbage not yet collected at the fork,
    collected in the worker), then DataLoader(num_workers=2) over an ImageFolderDataset of real
    photos: every file, the same tokens as in the main process, no hang (8f6e306: the worker hung
    at 0% CPU in pxvm_runner_close -> px_pool_destroy -> pthread_cond_destroy)."""
    pytest.importorskip("torch", reason="python3-torch is not installed")
    d = _photos(tmp_path)
    r = _python("""
        import gc, os, numpy as np, torch, pxvm
        gc.disable()
        runner = pxvm.Runner(pxvm.Program.from_plan(%r), executor="cpu")
        files = sorted(os.path.join(%r, f) for f in os.listdir(%r))
        want = runner.patches_batch(files, policy="dynamic")
        cycle = [runner]
        cycle.append(cycle)
        del runner, cycle  # garbage the main process has not collected at the fork
        ds = pxvm.data.ImageFolderDataset(%r, %r, policy="dynamic", batch_size=2)
        got = {f: t.numpy().tobytes() for t, g, f in torch.utils.data.DataLoader(
            ds, batch_size=None, num_workers=2, worker_init_fn=lambda _: gc.collect())}
        print(len(got), sorted(got) == files, all(got[f] == np.array(want[i]).tobytes() for i, f in enumerate(files)))
    """ % (PLAN, str(d), str(d), str(d), PLAN))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "%d True True" % len(PHOTOS), r.stdout + r.stderr


# ---- spawn: the datasets pickle ---------------------------------------------------------------

def test_datasets_pickle_round_trip(tmp_path):
    """8f6e306: "Can't pickle local object '_torch_classes.<locals>.ImageFolderDataset'". The program
    travels as its plan (or its PNG), a ShardDataset as its folder (never its tokens)."""
    pytest.importorskip("torch", reason="python3-torch is not installed")
    import pickle
    d = _photos(tmp_path)
    want = None
    for program in (PLAN, pxvm.Program.from_plan(PLAN)):
        ds = pxvm.data.ImageFolderDataset(d, program, policy="dynamic", batch_size=3)
        copy = pickle.loads(pickle.dumps(ds))
        assert type(copy) is type(ds) and copy.files == ds.files
        got = [(f, t.numpy().tobytes(), g.tolist()) for t, g, f in copy]
        assert got == [(f, t.numpy().tobytes(), g.tolist()) for t, g, f in ds]
        assert len(got) == len(PHOTOS)
        want = want or got
        assert got == want
    out = tmp_path / "tokens"
    r = subprocess.run([os.path.join(os.environ.get("PXVM_BIN", os.path.join(ROOT, "bin")), "pxbatch"), PLAN,
                        "--in-dir", str(d), "--out", str(out), "--policy", "dynamic", "--shard-size", "2"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    ds = pxvm.data.ShardDataset(out)
    data = pickle.dumps(ds)
    assert len(data) < 4096  # the folder, not the tokens
    copy = pickle.loads(data)
    assert len(copy) == len(ds) == len(PHOTOS)
    for i in range(len(ds)):
        a, b = ds[i], copy[i]
        assert a[0].numpy().tobytes() == b[0].numpy().tobytes() and a[1].tolist() == b[1].tolist() and a[2] == b[2]
        assert (a[2], a[0].numpy().tobytes(), a[1].tolist()) == want[i]


def test_dataloader_with_spawn_workers(tmp_path):
    pytest.importorskip("torch", reason="python3-torch is not installed")
    d = _photos(tmp_path)
    r = _python("""
        import os, torch, pxvm
        ds = pxvm.data.ImageFolderDataset(%r, pxvm.Program.from_plan(%r), policy="dynamic", batch_size=2)
        got = sorted(f for _, _, f in torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2,
                                                                   multiprocessing_context="spawn"))
        print(got == sorted(ds.files), len(got))
    """ % (str(d), PLAN), timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "True %d" % len(PHOTOS), r.stdout + r.stderr


# ---- lenient= ----------------------------------------------------------------------------------

def test_image_folder_dataset_lenient_reaches_load_image(tmp_path):
    """A truncated photo: strict (the default) skips it naming the file; lenient=True decodes what
    it can (load_image's warning) and yields it; lenient must be a bool."""
    pytest.importorskip("torch", reason="python3-torch is not installed")
    d = tmp_path / "photos"
    d.mkdir()
    shutil.copy(PHOTOS[0], d / "a.png")
    data = open(os.path.join(ROOT, "tests", "data", "photos", "rocket.jpg"), "rb").read()
    (d / "b.jpg").write_bytes(data[:len(data) * 2 // 3])
    ds = pxvm.data.ImageFolderDataset(d, PLAN, policy="dynamic")
    with pytest.warns(UserWarning, match="skipped '%s'" % (d / "b.jpg")):
        assert [f for _, _, f in ds] == [str(d / "a.png")]
    assert isinstance(ds.failures[0][1], pxvm.Malformed)
    ds = pxvm.data.ImageFolderDataset(d, PLAN, policy="dynamic", lenient=True)
    with pytest.warns(UserWarning, match="pxvm: malformed: '%s'" % (d / "b.jpg")):  # load_image's, not a skip
        assert [f for _, _, f in ds] == [str(d / "a.png"), str(d / "b.jpg")]
    assert ds.failures == []
    with pytest.raises(pxvm.UsageError, match="lenient 'yes': True or False"):
        pxvm.data.ImageFolderDataset(d, PLAN, lenient="yes")


# ---- shards: one rule (tools/pxbatch.h), pxbatch --verify and the Python loaders agree -----------

BIN = os.environ.get("PXVM_BIN", os.path.join(ROOT, "bin"))


def _pxbatch(*args):
    return subprocess.run([os.path.join(BIN, "pxbatch"), *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=300)


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """Two good pxbatch outputs of the real photos: ragged (--policy dynamic, 3 shards of 2, 2, 1)
    and fixed-count (foveate273.pxi, --policy fit)."""
    top = tmp_path_factory.mktemp("shards")
    d = _photos(top)
    out = {}
    for kind, args in (("ragged", [PLAN, "--policy", "dynamic"]),
                       ("fixed", [os.path.join(ROOT, "programs", "foveate273.pxi"), "--policy", "fit"])):
        r = _pxbatch(*args, "--in-dir", str(d), "--out", str(top / kind), "--shard-size", "2", "--executor", "cpu")
        assert r.returncode == 0, r.stderr
        out[kind] = top / kind
    return out


def _loaders(d, partial=False):
    """What the Python loaders say of folder d: ("OK", rows) or ("ClassName", message), in a
    subprocess under a 4 GiB address-space limit and a timeout (8f6e306 grew past 7.5 GB on one
    tampered folder and blocked forever on another)."""
    r = _python("""
        import os, resource, sys
        if "asan" not in os.environ.get("LD_PRELOAD", ""):  # ASan's shadow memory needs terabytes of it
            resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))
        import warnings, pxvm
        warnings.simplefilter("ignore")
        try:
            rows = 0
            for tokens, offsets, grid, files in pxvm.iter_shards(%r, partial=%r):
                assert len(offsets) == len(files) + 1 and int(offsets[-1]) == len(tokens)
                rows += len(files)
            print("OK", rows)
        except pxvm.Error as e:
            print(type(e).__name__, e)
    """ % (str(d), partial), timeout=60)
    assert r.returncode == 0, r.stderr
    kind, _, words = r.stdout.strip().partition(" ")
    return kind, words


def _marker(d, k, edit):
    import json
    p = d / ("shard-%05d.json" % k)
    m = json.loads(p.read_text())
    edit(m)
    p.write_text(json.dumps(m))


def _index(d, k, ext, edit):
    """Rewrites shard k's offsets or grid file through edit(array), its marker's size and SHA-256
    updated: only the rule's checks can find it."""
    import hashlib
    import numpy as np
    p = d / ("shard-%05d.%s.npy" % (k, ext))
    a = np.load(p)
    edit(a)
    np.save(p, a)
    data = p.read_bytes()

    def fix(m):
        m["ragged"][ext + "_bytes"], m["ragged"][ext + "_sha256"] = len(data), hashlib.sha256(data).hexdigest()
    _marker(d, k, fix)


def _copy_as(d, src, dst):
    for f in list(d.glob(src + ".*")):
        shutil.copy(f, d / (dst + f.name[len(src):]))


def _grow_offsets(d):
    """offsets [0, T + 1000, T] of a two-row shard, the grid rewritten to agree ((1, 1, T + 1000),
    (1, -1, 1000)): 8f6e306's load_shard returned fewer tokens for it."""
    import numpy as np
    t = int(np.load(d / "shard-00000.offsets.npy")[-1])
    _index(d, 0, "offsets", lambda a: a.__setitem__(1, t + 1000))
    _index(d, 0, "grid", lambda a: a.__setitem__(slice(None), np.array([[1, 1, t + 1000], [1, -1, 1000]])))


def _raw(d, k, field):
    """Shard k's marker with `field` (JSON text, as it stands) first in its object."""
    p = d / ("shard-%05d.json" % k)
    p.write_bytes(b"{" + field + b", " + p.read_bytes().lstrip()[1:])


def _set(path, key, value):
    def edit(m):
        x = m
        for k in path:
            x = x[k]
        x[key] = value
    return edit


# (finding, folder kind, tampering, the Python error class, a file its message names)
TAMPERED = [
    ("copy named shard-000001", "ragged", lambda d: _copy_as(d, "shard-00001", "shard-000001"),
     "Malformed", "shard-000001."),
    ("shard-1.npy beside the job", "ragged", lambda d: shutil.copy(d / "shard-00001.npy", d / "shard-1.npy"),
     "Malformed", "shard-1.npy"),
    ("row size edited", "ragged", lambda d: _marker(d, 0, lambda m: m["rows"][1]["size"].__setitem__(0, 1451)),
     "Malformed", "shard-00000.json"),
    ("row resized edited", "ragged", lambda d: _marker(d, 0, lambda m: m["rows"][1]["resized"].__setitem__(0, 480)),
     "Malformed", "shard-00000.json"),
    ("grid row contradicts its row's size", "ragged",
     lambda d: _index(d, 0, "grid", lambda a: a.__setitem__((1, slice(1, 3)), a[1, 2:0:-1].copy())),
     "Malformed", "shard-00000"),
    ("row index not its position", "ragged", lambda d: _marker(d, 1, lambda m: m["rows"][1].__setitem__("row", 0)),
     "Malformed", "shard-00001.json"),
    ("orphan past the job's shards", "ragged",
     lambda d: (_copy_as(d, "shard-00002", "shard-00007"), _marker(d, 7, _set([], "shard", 7))),
     "Malformed", "shard-00007."),
    ("offsets [0, T+1000, T]", "ragged", _grow_offsets, "Malformed", "shard-00000"),
    ("job.inputs = 10**15", "ragged",
     lambda d: [_marker(d, k, _set(["job"], "inputs", 10 ** 15)) for k in range(3)], "Malformed", "shard-00000.json"),
    ("marker a link to /dev/zero", "ragged",
     lambda d: ((d / "shard-00000.json").unlink(), os.symlink("/dev/zero", d / "shard-00000.json")),
     "Malformed", "shard-00000.json"),
    ("marker a FIFO", "ragged", lambda d: ((d / "shard-00001.json").unlink(), os.mkfifo(d / "shard-00001.json")),
     "Malformed", "shard-00001.json"),
    ("offsets.npy a FIFO", "ragged",
     lambda d: ((d / "shard-00001.offsets.npy").unlink(), os.mkfifo(d / "shard-00001.offsets.npy")),
     "Malformed", "shard-00001.offsets.npy"),
    ("tokens .npy a folder", "ragged", lambda d: ((d / "shard-00002.npy").unlink(), (d / "shard-00002.npy").mkdir()),
     "Malformed", "shard-00002.npy"),
    ("a file name edited", "ragged", lambda d: _marker(d, 1, lambda m: m["rows"][0].__setitem__("file", "/x.png")),
     "Malformed", "inputs_sha256"),
    ("the temporary file of an unfinished write", "ragged",
     lambda d: shutil.copy(d / "shard-00001.npy", d / "shard-00001.npy.tmp-AbC123"), "PxIOError", "shard-00001.npy.tmp-"),
    ("a marker with a duplicate key", "ragged", lambda d: _raw(d, 1, b'"shard": 1'), "Malformed", "shard-00001.json"),
    ("a marker with NaN", "ragged", lambda d: _raw(d, 1, b'"x": NaN'), "Malformed", "shard-00001.json"),
    ("a marker with 1e400", "ragged", lambda d: _raw(d, 1, b'"x": 1e400'), "Malformed", "shard-00001.json"),
    ("a marker with 2**63", "ragged", lambda d: _raw(d, 1, b'"x": 9223372036854775808'), "Malformed",
     "shard-00001.json"),
    ("a marker with a lone surrogate", "ragged", lambda d: _raw(d, 1, b'"x": "\\ud800"'), "Malformed",
     "shard-00001.json"),
    ("a marker with a NUL in a string", "ragged", lambda d: _raw(d, 1, b'"x": "a\\u0000"'), "Malformed",
     "shard-00001.json"),
    ("a marker that is not UTF-8", "ragged", lambda d: _raw(d, 1, b'"x": "\xff"'), "Malformed", "shard-00001.json"),
    ("a 'size' in a fixed shard's row", "fixed", lambda d: _marker(d, 0, lambda m: m["rows"][0].__setitem__("size", [1, 1])),
     "Malformed", "shard-00000.json"),
    ("an offsets.npy beside a fixed shard", "fixed",
     lambda d: shutil.copy(d / "shard-00000.npy", d / "shard-00000.offsets.npy"), "Malformed", "shard-00000.offsets.npy"),
]


def test_load_shard_refuses_offsets_past_the_tokens(folders, tmp_path):
    """8f6e306: offsets [0, T + 1000, T] (the grid made to agree) gave row 0 all T tokens and row 1
    none, silently."""
    d = tmp_path / "d"
    shutil.copytree(folders["ragged"], d)
    _grow_offsets(d)
    for mmap in (True, False):
        with pytest.raises(pxvm.Malformed, match="shard '%s': its offsets and grid do not agree"
                           % (d / "shard-00000")):
            pxvm.load_shard(d / "shard-00000.npy", mmap=mmap)
    pxvm.load_shard(d / "shard-00001.npy")  # the others still load


@pytest.mark.parametrize("kind", ["ragged", "fixed"])
def test_untampered_folders_pass_both(folders, kind):
    r = _pxbatch("--verify", str(folders[kind]))
    assert r.returncode == 0 and "3 good, 0 corrupt, 0 missing, 0 orphaned" in r.stdout, r.stdout
    assert _loaders(folders[kind]) == ("OK", str(len(PHOTOS)))


@pytest.mark.parametrize("finding, kind, tamper, cls, names", TAMPERED, ids=[t[0] for t in TAMPERED])
def test_tampered_folders_are_refused_by_both(folders, tmp_path, finding, kind, tamper, cls, names):
    """Each finding of issue 39 (and its class): pxbatch --verify exits 1 and the Python loaders
    raise the package's error naming the file (8f6e306: --verify passed the copy, the edited sizes
    and the grid; iter_shards read the copy and the orphan, load_shard the offsets, and grew or
    blocked on the marker)."""
    d = tmp_path / kind
    shutil.copytree(folders[kind], d, symlinks=True)
    tamper(d)
    r = _pxbatch("--verify", str(d))
    assert r.returncode == 1, (finding, r.stdout, r.stderr)
    got, words = _loaders(d)
    assert got == cls and names in words, (finding, got, words)
    assert str(d) in words


@pytest.mark.parametrize("inputs, verify, cls", [
    (2 ** 31 - 1, "missing", "PxIOError"),  # the largest job: a marker of it, most shards missing
    (2 ** 31, "corrupt: its marker: 'inputs' is not an integer 0..2147483647", "Malformed"),
])
def test_job_inputs_at_the_bound(folders, tmp_path, inputs, verify, cls):
    """job.inputs 0..2^31-1 ([SH-JOB]); either way the work is bounded by the files there (the
    loaders count missing shards, they do not list them)."""
    d = tmp_path / "d"
    shutil.copytree(folders["ragged"], d)
    for f in d.glob("shard-00002.*"):  # shards 0 and 1 (4 inputs) of a job of `inputs`
        f.unlink()
    for k in range(2):
        _marker(d, k, _set(["job"], "inputs", inputs))
    r = _pxbatch("--verify", str(d))
    assert r.returncode == 1 and verify in r.stdout, r.stdout
    got, words = _loaders(d)
    assert got == cls, words
    if cls == "PxIOError":
        assert "%d of its job's %d inputs are missing" % (inputs - 4, inputs) in words, words
        assert _loaders(d, partial=True) == ("OK", "4")
    else:
        assert "shard-00000.json' is not a pxbatch marker" in words, words


# (name, what --verify and the loaders take it for: None not the job's, "stray", or a shard number)
NAMES = [
    ("README.txt", None), ("shard", None), ("shard-00001.json", 1), ("shard-00001.offsets.npy", 1),
    ("shard-000001.json", "stray"), ("shard-0001.json", "stray"), ("shard-1.json", "stray"),
    ("shard-100000.json", 100000), ("shard-2147483647.npy", 2147483647), ("shard-2147483648.npy", "stray"),
    ("shard-00001.json.bak", "stray"), ("shard-00001.JSON", "stray"), ("shard-00001.npy.npy", "stray"),
    ("shard-00001", "stray"), ("shard-00001.tmp-x1", "temp"),
]


@pytest.mark.parametrize("name, want", NAMES, ids=[n for n, _ in NAMES])
def test_shard_names_one_rule(folders, tmp_path, name, want):
    """[SH-NAME] at its edges (five digits zero-padded, more only without a leading zero, K up to
    2^31-1): the Python mirror and --verify take each name alike."""
    from pxvm.data import _shard_entry
    kind, k = _shard_entry(name)
    assert (None if kind is None else k if kind in ("json", "npy", "offsets.npy", "grid.npy") else kind) == want
    d = tmp_path / "d"
    shutil.copytree(folders["ragged"], d)
    if (d / name).exists():
        return  # the job's own file
    (d / name).write_bytes(b"{}")
    r = _pxbatch("--verify", str(d))
    if want is None:
        assert r.returncode == 0, r.stdout
        assert _loaders(d) == ("OK", str(len(PHOTOS)))
        return
    assert r.returncode == 1, r.stdout
    if want == "stray":
        assert "%s: orphaned: not a name pxbatch writes" % name in r.stdout, r.stdout
    elif want == "temp":
        assert "%s: orphaned: the temporary file of an unfinished write" % name in r.stdout, r.stdout
    elif want != 1:
        assert "shard-%05d: orphaned: past the job's 3 shards" % want in r.stdout, r.stdout
    got, words = _loaders(d)
    assert got == ("PxIOError" if want == "temp" else "Malformed") and name in words, words


@pytest.mark.parametrize("extra, verify, words", [
    (0, "its marker: not JSON", "is not a pxbatch marker: not JSON"),  # read, then refused for what it holds
    (1, "its marker: 1073741825 bytes: too large", "is 1073741825 bytes, over the 1073741824 bytes"),  # never read
])
def test_marker_size_cap(folders, tmp_path, extra, verify, words):
    """[SH-FILE] PXB_MARKER_MAX (1 GiB): a marker of that size is read, one byte more is refused
    before a byte is read (sparse files: no disk used)."""
    d = tmp_path / "d"
    shutil.copytree(folders["ragged"], d)
    with open(d / "shard-00001.json", "r+b") as f:
        f.truncate(0)
        f.truncate((1 << 30) + extra)
    r = _pxbatch("--verify", str(d))
    assert r.returncode == 1 and "shard-00001: corrupt: " + verify in r.stdout, r.stdout
    got, said = _loaders(d)
    assert got == "Malformed" and "shard-00001.json" in said and words in said, said
