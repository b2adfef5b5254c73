"""A Runner another thread is using when the process forks: the child's calls on it run (the lock
that thread held is made again in the child, and the C runners it was inside are left to the
parent), instead of waiting forever on a lock no thread of the child will release (red team)."""
import os
import subprocess
import sys
import textwrap

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")

SCRIPT = textwrap.dedent("""
    import os, sys, threading, time
    import numpy as np
    import pxvm
    x = np.random.default_rng(0).integers(0, 256, (300, 451, 4), dtype=np.uint8)
    r = pxvm.Runner("programs/foveate273.pxi", threads=2)
    want = r.patches(x).copy()
    busy, stop = threading.Event(), False
    def loop():
        while not stop:
            with r.lock:  # inside a call's lock, as the fork comes
                busy.set()
                r.patches(x)
                time.sleep(0.01)
    t = threading.Thread(target=loop)
    t.start()
    busy.wait()
    pid = os.fork()
    if pid == 0:
        ok = bool((r.patches(x) == want).all())
        r.close()
        os._exit(0 if ok else 3)
    stop = True
    t.join()
    _, st = os.waitpid(pid, 0)
    sys.exit(os.WEXITSTATUS(st) if os.WIFEXITED(st) else 100 + os.WTERMSIG(st))
""")


def test_a_runner_busy_in_another_thread_at_fork_works_in_the_child():
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    r = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, env=env, timeout=60,
                       capture_output=True, text=True, start_new_session=True)
    assert r.returncode == 0, (r.returncode, r.stderr[-2000:])


CACHE_SCRIPT = textwrap.dedent("""
    import os, sys, threading
    import numpy as np
    import pxvm
    from pxvm import runner
    x = np.random.default_rng(0).integers(0, 256, (48, 64, 4), dtype=np.uint8)
    want = pxvm.pyramid(x)[0].copy()
    held, done = threading.Event(), threading.Event()
    def hold():  # another thread inside the cache's lock as the process forks
        with runner._pyramid_cache._lock:
            held.set()
            done.wait()
    t = threading.Thread(target=hold)
    t.start()
    held.wait()
    pid = os.fork()
    if pid == 0:
        os._exit(0 if (pxvm.pyramid(x)[0] == want).all() else 3)
    done.set()
    t.join()
    _, st = os.waitpid(pid, 0)
    sys.exit(os.WEXITSTATUS(st) if os.WIFEXITED(st) else 100 + os.WTERMSIG(st))
""")


def test_a_cache_lock_held_by_another_thread_at_fork_is_made_again_in_the_child():
    """pxvm.pyramid's runners (and the other caches) are an LRU behind a lock: held by another
    thread at the fork, the child's first call waited on it forever (red team, round 2)."""
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    r = subprocess.run([sys.executable, "-c", CACHE_SCRIPT], cwd=ROOT, env=env, timeout=60,
                       capture_output=True, text=True, start_new_session=True)
    assert r.returncode == 0, (r.returncode, r.stderr[-2000:])
