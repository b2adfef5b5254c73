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
