"""pxbatch: a dataset in shards, one process or several under mpirun (Open MPI, CPU executor in
CI): the shards are the same bytes however the work is split, a killed run resumes to the same
result, a bad file is listed in its shard's errors and does not stop the job."""
import glob
import json
import os
import pty
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import pxvm
from conftest import BIN, PHOTO

PXBATCH = os.path.join(BIN, "pxbatch")
MPI_ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_btl_vader_single_copy_mechanism="none", OMPI_MCA_rmaps_base_oversubscribe="1")


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    """300 crops of the photo (PNG and JPEG, 64x48), one corrupt file, and a program for them."""
    from PIL import Image
    root = tmp_path_factory.mktemp("ds")
    img = root / "img"
    img.mkdir()
    photo = pxvm.load_image(PHOTO)[:, :, :3]
    for i in range(300):
        y, x = (i * 7) % 250, (i * 13) % 380
        Image.fromarray(photo[y:y + 48, x:x + 64]).save(img / ("%03d.%s" % (i, "jpg" if i % 2 else "png")))
    (img / "150-corrupt.png").write_bytes(b"\x89PNG\r\n\x1a\nnot really")
    prog = pxvm.Program.from_plan({"image": [64, 48], "budget": 8, "scheme": "grid", "levels": 3})
    prog.save(root / "p.pxi")
    return root


def pxbatch(ds, out, *extra, mpi=0, check_rc=9):
    cmd = [PXBATCH, str(ds / "p.pxi"), "--in-dir", str(ds / "img"), "--out", str(out), "--shard-size", "16",
           "--executor", "cpu", "--threads", "1", *extra]
    if mpi:
        cmd = ["mpirun", "-np", str(mpi), "--oversubscribe"] + cmd
    r = subprocess.run(cmd, capture_output=True, text=True, env=MPI_ENV)
    if check_rc is not None:
        assert r.returncode == check_rc, r.stderr
    return r


def files(out):
    return {os.path.basename(f): open(f, "rb").read() for f in sorted(glob.glob(str(out / "shard-*")))}


def test_shards_cover_the_dataset_with_the_programs_bytes(dataset, tmp_path):
    r = pxbatch(dataset, tmp_path / "one")
    assert "301 images" not in r.stderr and "300 images" in r.stderr and "1 failed" in r.stderr
    out = files(tmp_path / "one")
    assert len(out) == 2 * 19  # 301 files in shards of 16
    runner = pxvm.Runner(pxvm.Program.load(str(dataset / "p.pxi")))
    seen, errors = 0, []
    for name in sorted(out):
        if not name.endswith(".json"):
            continue
        idx = json.loads(out[name])
        arr = np.load(str(tmp_path / "one" / name.replace(".json", ".npy")))
        assert arr.shape == tuple(idx["shape"]) and arr.shape[1:] == (8, 16, 16, 4)
        for row in idx["rows"]:
            assert np.array_equal(arr[row["row"]], runner.patches(pxvm.load_image(row["file"])))
            seen += 1
        errors += idx["errors"]
    assert seen == 300
    assert [os.path.basename(e["file"]) for e in errors] == ["150-corrupt.png"]
    assert "malformed" in errors[0]["error"] and "corrupt or truncated PNG" in errors[0]["error"]
    # the failure is named on stderr too, not only in the marker: the file, then its classified error
    failed = [ln for ln in r.stderr.splitlines() if ln.startswith("pxbatch: failed")]
    assert "'%s'" % errors[0]["file"] in errors[0]["error"]  # the error names the file: not twice
    assert failed == ["pxbatch: failed: %s" % errors[0]["error"]]


@pytest.mark.skipif(not shutil.which("mpirun"), reason="needs Open MPI's mpirun")
def test_two_ranks_write_the_same_bytes_as_one_process(dataset, tmp_path):
    pxbatch(dataset, tmp_path / "one")
    r = pxbatch(dataset, tmp_path / "two", mpi=2)
    assert "over 2 processes" in r.stderr
    assert files(tmp_path / "two") == files(tmp_path / "one")
    r = pxbatch(dataset, tmp_path / "three", mpi=3)
    assert files(tmp_path / "three") == files(tmp_path / "one")


def test_ctrl_c_says_what_stays_and_a_rerun_resumes(dataset, tmp_path):
    """SIGINT (Ctrl-C) ends pxbatch by the signal, after one line saying the shards written are
    kept and how to go on; the same command then finishes to a fresh run's bytes."""
    pxbatch(dataset, tmp_path / "ref")
    out = tmp_path / "run"
    cmd = [PXBATCH, str(dataset / "p.pxi"), "--in-dir", str(dataset / "img"), "--out", str(out), "--shard-size", "16",
           "--executor", "cpu", "--threads", "1"]
    p = subprocess.Popen(cmd, env=MPI_ENV, stderr=subprocess.PIPE, text=True)
    while not glob.glob(str(out / "shard-*.json")) and p.poll() is None:
        time.sleep(0.001)
    p.send_signal(signal.SIGINT)
    err = p.communicate(timeout=60)[1]
    assert p.returncode == -signal.SIGINT, err  # 19 shards: the first is written long before the last
    assert "pxbatch: interrupted: the shards written are kept; the same command again resumes" in err, err
    pxbatch(dataset, out)
    assert files(out) == files(tmp_path / "ref")


def test_a_killed_run_resumes_to_the_same_result(dataset, tmp_path):
    pxbatch(dataset, tmp_path / "ref")
    ref = files(tmp_path / "ref")
    out = tmp_path / "run"
    # a real kill, as early as it lands
    p = subprocess.Popen([PXBATCH, str(dataset / "p.pxi"), "--in-dir", str(dataset / "img"), "--out", str(out),
                          "--shard-size", "16", "--executor", "cpu", "--threads", "1"], env=MPI_ENV,
                         stderr=subprocess.DEVNULL)
    while not glob.glob(str(out / "shard-*.json")) and p.poll() is None:
        time.sleep(0.001)
    p.send_signal(signal.SIGKILL)
    p.wait()
    # and a crash between a shard's two files: its data written, its index (the marker) not
    (out / "shard-00003.npy").write_bytes(b"partial")
    for f in glob.glob(str(out / "shard-00003.json")) + glob.glob(str(out / "shard-00007.*")):
        os.remove(f)
    r = pxbatch(dataset, out)
    assert files(out) == ref
    assert [n for n in os.listdir(out) if ".tmp-" in n] == []
    r = pxbatch(dataset, out)  # everything finished: all skipped
    assert "19 finished shards skipped" in r.stderr and "0 images" in r.stderr and "1 failed" in r.stderr
    # the earlier run's failure is named again, with its shard (150-corrupt.png sorts as input 151)
    failed = [ln for ln in r.stderr.splitlines() if ln.startswith("pxbatch: failed")]
    assert len(failed) == 1 and failed[0].startswith(
        "pxbatch: failed (shard-00009, an earlier run): malformed: '%s'" % (dataset / "img" / "150-corrupt.png"))


def test_retry_failed_makes_again_only_the_shards_that_failed(dataset, tmp_path):
    """A failed input fixed after the run: a rerun names it again and skips its shard; with
    --retry-failed that shard alone is made again, to the bytes of a fresh run on the fixed files."""
    ds = tmp_path / "ds"
    shutil.copytree(dataset, ds)
    pxbatch(ds, tmp_path / "out")
    (ds / "img" / "150-corrupt.png").write_bytes((ds / "img" / "150.png").read_bytes())  # the file fixed
    r = pxbatch(ds, tmp_path / "out")  # a plain rerun: the earlier failure stands, named
    assert "19 finished shards skipped" in r.stderr and "pxbatch: failed (shard-00009, an earlier run)" in r.stderr
    r = pxbatch(ds, tmp_path / "out", "--retry-failed", check_rc=0)
    assert "16 images" in r.stderr and "0 failed, 18 finished shards skipped" in r.stderr, r.stderr
    assert "pxbatch: failed" not in r.stderr
    pxbatch(ds, tmp_path / "fresh", check_rc=0)
    assert files(tmp_path / "out") == files(tmp_path / "fresh")
    r = pxbatch(ds, tmp_path / "out", "--retry-failed", "--overwrite", check_rc=2)
    assert "--retry-failed would do nothing with --overwrite" in r.stderr


def test_progress_on_a_terminal_and_usage(dataset, tmp_path):
    master, slave = pty.openpty()
    p = subprocess.Popen([PXBATCH, str(dataset / "p.pxi"), "--in-dir", str(dataset / "img"), "--out",
                          str(tmp_path / "o"), "--shard-size", "16", "--executor", "cpu"], stderr=slave, env=MPI_ENV)
    p.wait()
    os.close(slave)
    text = b""
    try:
        while True:
            chunk = os.read(master, 65536)
            if not chunk:
                break
            text += chunk
    except OSError:
        pass
    os.close(master)
    assert b"\rpxbatch: shard 19 of 19" in text and b"images/s" in text
    r = subprocess.run([PXBATCH, str(dataset / "p.pxi"), "--out", str(tmp_path / "x")], capture_output=True, text=True)
    assert r.returncode == 2 and "one of --in-list, --in-dir" in r.stderr
    lst = tmp_path / "list.txt"
    lst.write_text("\n".join(sorted(glob.glob(str(dataset / "img" / "*")))) + "\n")
    r = subprocess.run([PXBATCH, str(dataset / "p.pxi"), "--in-list", str(lst), "--out", str(tmp_path / "l"),
                        "--shard-size", "16", "--executor", "cpu"], capture_output=True, text=True)
    assert r.returncode == 9 and files(tmp_path / "l") == files(tmp_path / "o")


STAT_PARTS = ("open_s", "decode_s", "input_wait_s", "executor_s", "write_s", "write_wait_s")
POOL_PARTS = ("decode_idle_s", "decode_memory_wait_s", "wait_all_busy_s", "wait_memory_bound_s", "wait_decoding_s")


def check_stats(st, images, decoded, rows, decoders):
    """A --stats document: the run's figures, a row per worker, the total their sums; a row per
    process's decode pool (--decoders x workers threads shared by its workers), whose decoders'
    seconds (decoding, idle, held back by memory) fill its threads' lives, whose decodes are the
    workers' (each input counted once), and whose seconds while a worker waited (split by what the
    decoders were doing) are within the workers' waits."""
    assert st["images"] == images and st["total"]["images"] == images and st["total"]["decoded"] == decoded
    assert st["wall_s"] > 0 and st["setup_s"] > 0 and st["images_per_s"] == pytest.approx(images / st["wall_s"])
    assert [(w["rank"], w["worker"]) for w in st["workers"]] == rows
    assert sum(w["images"] for w in st["workers"]) == images
    for part in STAT_PARTS:
        assert st["total"][part] == pytest.approx(sum(w[part] for w in st["workers"]))
    for count in ("executor_calls", "rows_moved"):
        assert st["total"][count] == sum(w[count] for w in st["workers"])
    # a fixed shard is one run (shards of 16 here), its rows bound in order: none moved
    assert st["total"]["executor_calls"] == (decoded + 15) // 16 and st["total"]["rows_moved"] == 0
    for w in st["workers"]:
        assert w["decode_s"] > 0 and w["executor_s"] > 0 and w["write_s"] > 0
        # the worker's own parts follow one another within its life; its writer (a thread from after
        # the open to the end) and the decoders overlap them
        assert w["open_s"] + w["input_wait_s"] + w["executor_s"] + w["write_wait_s"] <= w["wall_s"] * 1.001
        assert w["open_s"] + w["write_s"] <= w["wall_s"] * 1.001
        assert w["decoders_busy"] == pytest.approx(w["decode_s"] / w["wall_s"])
    pools = st["pools"]
    assert [p["rank"] for p in pools] == sorted({r for r, _ in rows})
    for p in pools:
        workers = [w for w in st["workers"] if w["rank"] == p["rank"]]
        assert p["decoders"] == decoders * st["workers_per_process"]
        assert p["decoded"] == sum(w["decoded"] for w in workers)
        assert p["decode_s"] == pytest.approx(sum(w["decode_s"] for w in workers))
        assert p["decode_s"] + p["decode_idle_s"] + p["decode_memory_wait_s"] == \
            pytest.approx(p["decoders"] * p["wall_s"], rel=0.05, abs=0.02)
        assert 0 < p["decoders_busy"] <= p["decoders"] * 1.02  # never more than the pool's decode at once
        assert p["decoders_busy_fraction"] == pytest.approx(p["decoders_busy"] / p["decoders"])
        waited = p["wait_all_busy_s"] + p["wait_memory_bound_s"] + p["wait_decoding_s"]
        assert max(w["input_wait_s"] for w in workers) * 0.9 - 0.01 <= waited
        assert waited <= sum(w["input_wait_s"] for w in workers) * 1.1 + 0.01
    for part in POOL_PARTS + ("decoders",):
        assert st["total"][part] == pytest.approx(sum(p[part] for p in pools))
    assert st["total"]["decoders_busy"] == pytest.approx(st["total"]["decode_s"] / st["wall_s"])
    assert st["total"]["decoders_busy_fraction"] == pytest.approx(st["total"]["decoders_busy"] / st["total"]["decoders"])


def test_stats_say_where_the_time_went(dataset, tmp_path):
    pxbatch(dataset, tmp_path / "one")
    r = pxbatch(dataset, tmp_path / "o", "--stats", str(tmp_path / "s.json"), "--decoders", "2")
    st = json.load(open(tmp_path / "s.json"))
    check_stats(st, 300, 301, [(0, 0)], 2)
    assert st["processes"] == 1 and st["workers_per_process"] == 1 and st["decoders_per_worker"] == 2
    assert st["executor"] == "cpu" and st["cores"] == len(os.sched_getaffinity(0))
    assert files(tmp_path / "o") == files(tmp_path / "one")  # the same shards with or without it
    # a file that cannot be written (no such folder; a directory): i/o (1), named, before any work
    for bad, why in ((tmp_path / "no" / "s.json", "No such file or directory"), (tmp_path, "not a regular file")):
        r = pxbatch(dataset, tmp_path / "o2", "--stats", str(bad), check_rc=1)
        assert "pxbatch: i/o error: --stats '%s': cannot write it (%s)" % (bad, why) in r.stderr, r.stderr
        assert "images" not in r.stderr and not (tmp_path / "o2").exists()
    r = subprocess.run([PXBATCH, "--verify", str(tmp_path / "o"), "--stats", str(tmp_path / "v.json")],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "--verify DIR takes no program, --out, inputs, --policy or --stats" in r.stderr


@pytest.mark.skipif(not shutil.which("mpirun"), reason="needs Open MPI's mpirun")
def test_stats_gather_every_ranks_workers(dataset, tmp_path):
    pxbatch(dataset, tmp_path / "o", "--stats", str(tmp_path / "s.json"), "--decoders", "1", mpi=2)
    st = json.load(open(tmp_path / "s.json"))
    check_stats(st, 300, 301, [(0, 0), (1, 0)], 1)
    assert st["processes"] == 2


def test_workers_write_the_same_bytes_as_one(dataset, tmp_path):
    """--workers 2: two executors in one process (on one GPU both on device 0), each its share of the
    shards; the same files as one worker, and under mpirun with two ranks of two workers."""
    pxbatch(dataset, tmp_path / "one")
    r = pxbatch(dataset, tmp_path / "two", "--workers", "2")
    assert "over 1 process x 2 workers" in r.stderr
    assert files(tmp_path / "two") == files(tmp_path / "one")
    if shutil.which("mpirun"):
        r = pxbatch(dataset, tmp_path / "four", "--workers", "2", mpi=2)
        assert "over 2 processes x 2 workers" in r.stderr
        assert files(tmp_path / "four") == files(tmp_path / "one")



BIG_HOST_SHIM = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <sched.h>
#include <unistd.h>
/* this rank's host: 256 cores and 1 TiB (pxbatch sizes --max-memory's default from them) */
long sysconf(int name)
{
    static long (*real)(int);
    if (!real)
        real = (long (*)(int))dlsym(RTLD_NEXT, "sysconf");
    return name == _SC_PHYS_PAGES ? (1L << 40) / real(_SC_PAGESIZE) : name == _SC_NPROCESSORS_ONLN ? 256 : real(name);
}
int sched_getaffinity(pid_t pid, size_t size, cpu_set_t *set)
{
    (void)pid;
    CPU_ZERO_S(size, set);
    for (int i = 0; i < 256; i++)
        CPU_SET_S(i, size, set);
    return 0;
}
"""


@pytest.mark.skipif(not shutil.which("mpirun") or not shutil.which("cc"), reason="needs Open MPI's mpirun and cc")
def test_ranks_on_unlike_hosts_take_one_memory_default(tmp_path):
    """--max-memory's default follows a host's cores and memory; ranks on unlike hosts take the
    least, so that they agree on what fits (a batch, an input): a 5.7 GB batch over 4 GiB is
    refused by both ranks, where one rank going on alone into the job's collectives hung."""
    (tmp_path / "bighost.c").write_text(BIG_HOST_SHIM)
    so = tmp_path / "bighost.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(so), str(tmp_path / "bighost.c"), "-ldl"], check=True)
    wrap = tmp_path / "rank.sh"  # rank 0 on the big host, rank 1 on this one
    wrap.write_text('#!/bin/sh\n[ "$BIG_RANK" = "$OMPI_COMM_WORLD_RANK" ] && export LD_PRELOAD=%s\nexec "$@"\n' % so)
    wrap.chmod(0o755)
    img = tmp_path / "img"
    img.mkdir()
    shutil.copy(PHOTO, img / ("a" + os.path.splitext(PHOTO)[1]))

    def job(out):
        return [str(wrap), PXBATCH, os.path.join(os.path.dirname(BIN), "programs", "grid.json"), "--in-dir", str(img),
                "--out", str(out), "--shard-size", "2048", "--policy", "stretch", "--executor", "cpu"]
    seen = subprocess.run([sys.executable, "-c", "import os; print(os.sysconf('SC_PHYS_PAGES') * os.sysconf("
                           "'SC_PAGESIZE'), len(os.sched_getaffinity(0)))"], capture_output=True, text=True,
                          env=dict(os.environ, LD_PRELOAD=str(so)), check=True)
    mem, cores = map(int, seen.stdout.split())  # what rank 0 sees: a default over 4 GiB (256 MiB a core)
    assert mem == 1 << 40 and cores > 16, seen.stdout
    r = subprocess.run(["mpirun", "-np", "2", "-x", "BIG_RANK"] + job(tmp_path / "o2"), capture_output=True, text=True,
                       env=dict(MPI_ENV, BIG_RANK="0"), timeout=60)
    # rank 0, the big host, refuses too, at this host's 4 GiB
    assert r.returncode == 2 and "over --max-memory 4294967296" in r.stderr, r.stderr
