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
