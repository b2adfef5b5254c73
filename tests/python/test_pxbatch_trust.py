"""pxbatch's shards can be trusted: each marker records the job that made it (a rerun of another job
into the same --out refuses, --overwrite replaces), --verify checks every shard against its marker,
--out is checked and locked before any work, and hostile inputs (FIFOs, long list lines, file names
that are not UTF-8, numbers that are not numbers) are refused or listed, never mishandled."""
import glob
import hashlib
import json
import os
import re
import shutil
import subprocess
import time

import numpy as np
import pytest

import pxvm
from conftest import BIN, PHOTO

PXBATCH = os.path.join(BIN, "pxbatch")
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_btl_vader_single_copy_mechanism="none", OMPI_MCA_rmaps_base_oversubscribe="1")
PLAN = {"image": [64, 48], "budget": 8, "scheme": "grid", "levels": 3}


@pytest.fixture(scope="module")
def ds(tmp_path_factory):
    """20 PNG crops of the photo (64x48), one corrupt file, programs p (8 patches: also as a plan) and
    q (4 patches)."""
    from PIL import Image
    root = tmp_path_factory.mktemp("trust")
    img = root / "img"
    img.mkdir()
    photo = pxvm.load_image(PHOTO)[:, :, :3]
    for i in range(20):
        y, x = (i * 11) % 250, (i * 17) % 380
        Image.fromarray(photo[y:y + 48, x:x + 64]).save(img / ("%03d.png" % i))
    (img / "010-corrupt.png").write_bytes(b"\x89PNG\r\n\x1a\nnot really")
    pxvm.Program.from_plan(PLAN).save(root / "p.pxi")
    (root / "p.json").write_text(json.dumps(PLAN))
    pxvm.Program.from_plan(dict(PLAN, budget=4)).save(root / "q.pxi")
    return root


def run(ds, out, *extra, prog="p.pxi", src=None, rc=9, timeout=60, **kw):
    """pxbatch over ds/img (21 files, one corrupt: exit 9) in shards of 8 on the CPU executor."""
    # the defaults an extra option replaces (pxbatch refuses an option given twice)
    defaults = [a for o, v in (("--shard-size", "8"), ("--executor", "cpu"), ("--threads", "1")) if o not in extra
                for a in (o, v)]
    cmd = [PXBATCH, str(ds / prog) if prog else None, "--out", str(out), *defaults,
           *(src or ["--in-dir", str(ds / "img")]), *extra]
    r = subprocess.run([c for c in cmd if c is not None], capture_output=True, env=ENV, timeout=timeout, **kw)
    r.stdout, r.stderr = r.stdout.decode(errors="replace"), r.stderr.decode(errors="replace")
    if rc is not None:
        assert r.returncode == rc, r.stderr
    return r


def verify(out, rc=0):
    r = subprocess.run([PXBATCH, "--verify", str(out)], capture_output=True, text=True, timeout=60)
    assert r.returncode == rc, r.stdout + r.stderr
    return r.stdout + r.stderr


def files(out):
    return {os.path.basename(f): open(f, "rb").read() for f in sorted(glob.glob(str(out) + "/shard-*"))}


def markers(out):
    """Every marker, read as strict UTF-8 JSON."""
    return [json.loads(open(f, "rb").read().decode("utf-8")) for f in sorted(glob.glob(str(out) + "/shard-*.json"))]


def test_markers_record_the_job_and_a_rerun_of_another_job_refuses(ds, tmp_path):
    out = tmp_path / "o"
    run(ds, out)
    ref = files(out)
    m = markers(out)
    assert len(m) == 3 and [x["shard"] for x in m] == [0, 1, 2]
    job = m[0]["job"]
    # the program's hash is SHA-256 of its decoded pixels (RGBA8, row-major)
    pixels = pxvm.load_image(str(ds / "p.pxi"))
    assert job["program_sha256"] == hashlib.sha256(np.ascontiguousarray(pixels).tobytes()).hexdigest()
    assert job["program_size"] == [pixels.shape[1], pixels.shape[0]]
    assert job["pxvm_version"] and job["input_slot"] == "image" and job["output_slot"] == "atlas"
    assert job["shard_size"] == 8 and job["inputs"] == 21
    names = sorted(glob.glob(str(ds / "img" / "*")))
    assert job["inputs_sha256"] == hashlib.sha256(b"".join(os.fsencode(n) + b"\0" for n in names)).hexdigest()
    assert all(x["job"] == job and x["program"] == str(ds / "p.pxi") for x in m)
    for x in m:  # the .npy's size and SHA-256 (what sha256sum prints)
        npy = open(str(out / ("shard-%05d.npy" % x["shard"])), "rb").read()
        assert x["npy_bytes"] == len(npy) and x["npy_sha256"] == hashlib.sha256(npy).hexdigest()
    # another program: refused, naming the field and both values; nothing touched
    r = run(ds, out, prog="q.pxi", rc=2)
    q_sha = hashlib.sha256(np.ascontiguousarray(pxvm.load_image(str(ds / "q.pxi"))).tobytes()).hexdigest()
    assert "another job" in r.stderr and "program_sha256" in r.stderr
    assert job["program_sha256"] in r.stderr and q_sha in r.stderr and "--overwrite" in r.stderr
    assert "rerun with that job's options to go on with it, with --overwrite to replace them" in r.stderr
    assert files(out) == ref
    # another shard size, another dataset: the same
    r = run(ds, out, "--shard-size", "4", rc=2)
    assert "shard_size: 8 -> 4" in r.stderr and files(out) == ref
    lst = tmp_path / "list.txt"
    lst.write_text("\n".join(names[:-1]) + "\n")
    r = run(ds, out, src=["--in-list", str(lst)], rc=2)
    assert "inputs: 21 -> 20" in r.stderr and "inputs_sha256" in r.stderr and files(out) == ref
    # --overwrite replaces them: the same files as a fresh run of q; every shard-* file goes, also
    # one pxbatch does not name so (the readers refuse it beside shards), the rest stays
    (out / "shard-99.npy").write_bytes(b"x")
    (out / "shard-00000.npy.bak").write_bytes(b"x")
    (out / "notes.txt").write_text("mine")
    os.mkdir(out / "shard-notes")
    run(ds, out, "--overwrite", prog="q.pxi")
    assert not (out / "shard-99.npy").exists() and not (out / "shard-00000.npy.bak").exists()
    assert (out / "notes.txt").read_text() == "mine" and (out / "shard-notes").is_dir()
    os.rmdir(out / "shard-notes")
    assert "3 shards: 3 good, 0 corrupt, 0 missing, 0 orphaned" in verify(out)
    run(ds, tmp_path / "fresh", prog="q.pxi")
    assert files(out) == files(tmp_path / "fresh") and len(files(out)) == 6
    r = run(ds, out, prog="q.pxi")  # the same job again: everything skipped
    assert "3 finished shards skipped" in r.stderr and "1 failed" in r.stderr


def test_a_plan_is_a_program_and_the_same_job_as_its_pxi(ds, tmp_path):
    run(ds, tmp_path / "pxi")
    r = run(ds, tmp_path / "plan", prog="p.json")
    a, b = files(tmp_path / "pxi"), files(tmp_path / "plan")
    assert a.keys() == b.keys()
    for name in a:
        if name.endswith(".npy"):
            assert a[name] == b[name]
    mp, mj = markers(tmp_path / "pxi"), markers(tmp_path / "plan")
    assert [x["job"] for x in mp] == [x["job"] for x in mj] and mj[0]["program"].endswith("p.json")
    r = run(ds, tmp_path / "plan")  # the .pxi rerun over the plan's shards: the same pixels, the same job
    assert "3 finished shards skipped" in r.stderr


def test_an_input_of_another_size_names_the_programs_slot(ds, tmp_path):
    from PIL import Image
    Image.new("RGB", (32, 32)).save(tmp_path / "small.png")
    lst = tmp_path / "l.txt"
    lst.write_text(str(tmp_path / "small.png") + "\n")
    run(ds, tmp_path / "o", src=["--in-list", str(lst)])
    err = markers(tmp_path / "o")[0]["errors"][0]["error"]
    assert err == ("unlinkable: a 32x32 image cannot be bound to slot 1 ('image'), which is 64x48 (file '%s'; "
                   "--policy stretch or fit resizes it)" % (tmp_path / "small.png"))


def test_verify_finds_corrupt_missing_and_orphaned_shards(ds, tmp_path):
    out = tmp_path / "o"
    run(ds, out)
    ref = files(out)
    m0 = markers(out)[0]
    assert "3 shards: 3 good, 0 corrupt, 0 missing, 0 orphaned; 1 input failed (in the markers' errors" in verify(out)
    # a truncated .npy, a deleted .npy, a deleted marker
    with open(out / "shard-00000.npy", "r+b") as f:
        f.truncate(1000)
    os.remove(out / "shard-00001.npy")
    text = verify(out, rc=1)
    assert "shard-00000: corrupt: its .npy is 1000 bytes" in text and "shard-00001: missing: its .npy" in text
    assert "1 good, 1 corrupt, 1 missing" in text
    # a rerun makes them again: the same bytes
    run(ds, out)
    assert files(out) == ref and "3 good" in verify(out)
    # the same size, other bytes: the SHA-256 differs
    data = bytearray(ref["shard-00002.npy"])
    data[-1] ^= 1
    (out / "shard-00002.npy").write_bytes(bytes(data))
    text = verify(out, rc=1)
    assert "shard-00002: corrupt: its .npy's SHA-256" in text
    assert "a corrupt one once its marker (shard-NNNNN.json) is removed" in text  # what to do
    r = run(ds, out)  # a rerun alone does not look at the bytes (it would hash every shard) ...
    assert "shard-00002: corrupt" in verify(out, rc=1)
    os.remove(out / "shard-00002.json")  # ... the marker removed, it makes the shard again
    run(ds, out)
    assert files(out) == ref
    shutil.copy(str(out / "shard-00000.npy"), str(out / "shard-00002.npy"))
    assert "shard-00002: corrupt: its .npy is" in verify(out, rc=1)
    (out / "shard-00002.npy").write_bytes(ref["shard-00002.npy"])
    # edited markers: a shape, a file name, the job
    m = json.loads(ref["shard-00001.json"])
    rows = m["shape"][0]
    m["shape"][0] -= 1
    (out / "shard-00001.json").write_text(json.dumps(m))
    assert "shard-00001: corrupt: its marker: %d rows listed, but the shape has %d" % (rows, rows - 1) in verify(out, rc=1)
    m = json.loads(ref["shard-00001.json"])
    m["rows"][3]["file"] = "elsewhere.png"
    (out / "shard-00001.json").write_text(json.dumps(m))
    assert "a marker was edited" in verify(out, rc=1)
    m = json.loads(ref["shard-00001.json"])
    m["job"]["pxvm_version"] = "0.9"
    (out / "shard-00001.json").write_text(json.dumps(m))
    assert 'shard-00001: corrupt: of another job than shard-00000 (pxvm_version: "%s" -> "0.9")' % (
        m0["job"]["pxvm_version"]) in verify(out, rc=1)
    (out / "shard-00001.json").write_text("{not json")
    assert "shard-00001: corrupt: its marker: not JSON" in verify(out, rc=1)
    # a rerun refuses a marker it cannot read (exit 3) rather than guess
    r = run(ds, out, rc=3)
    assert "shard-00001" in r.stderr and "not JSON" in r.stderr
    (out / "shard-00001.json").write_bytes(ref["shard-00001.json"])
    # orphans: a shard past the job's, a temporary file, an .npy without its marker
    (out / "shard-00007.npy").write_bytes(b"x")
    (out / "shard-00001.npy.tmp-abcdef").write_bytes(b"x")
    os.remove(out / "shard-00002.json")
    text = verify(out, rc=1)
    assert "shard-00007: orphaned" in text and "shard-00001.npy.tmp-abcdef: orphaned" in text
    assert "shard-00002: missing: its marker" in text and "2 good, 0 corrupt, 1 missing, 2 orphaned" in text
    os.mkdir(tmp_path / "empty")
    assert "no marker" in verify(tmp_path / "empty", rc=1)


def test_fifos_directories_and_devices_are_listed_as_failed_never_read(ds, tmp_path):
    img = tmp_path / "img"
    shutil.copytree(ds / "img", img)
    os.mkfifo(img / "x.png")  # nobody writes it: opening it for reading would block forever
    os.mkdir(img / "d.png")
    r = run(ds, tmp_path / "o", src=["--in-dir", str(img)], timeout=30)
    assert "3 failed" in r.stderr
    errs = {os.path.basename(e["file"]): e["error"] for m in markers(tmp_path / "o") for e in m["errors"]}
    assert errs["x.png"].endswith("x.png': not a regular file (a FIFO)") and errs["x.png"].startswith("i/o error")
    assert errs["d.png"].endswith("not a regular file (a directory)")
    lst = tmp_path / "l.txt"
    lst.write_text("/dev/zero\n%s\n" % (img / "x.png"))
    run(ds, tmp_path / "l", src=["--in-list", str(lst)], timeout=30)
    errs = [e["error"] for m in markers(tmp_path / "l") for e in m["errors"]]
    assert errs[0].endswith("not a regular file (a character device)") and errs[1].endswith("(a FIFO)")


def test_numbers_are_parsed_strictly(ds, tmp_path):
    for opt, val in [("--threads", "abc"), ("--shard-size", "2xyz"), ("--shard-size", "0"), ("--shard-size", "4097"),
                     ("--decoders", "-1"), ("--devices", " 1"), ("--max-memory", "1e9"), ("--threads", ""),
                     ("--workers", "0"), ("--workers", "65")]:
        r = run(ds, tmp_path / "o", opt, val, rc=2)
        assert "%s takes a whole number" % opt in r.stderr and "not '%s'" % val in r.stderr, (opt, val)
        assert not os.path.exists(tmp_path / "o")
    r = run(ds, tmp_path / "o", "--threads", rc=2)
    assert "--threads needs a value" in r.stderr
    r = run(ds, tmp_path / "o", "--executor", "gpu", rc=2)
    assert "--executor takes cpu, cuda or auto, not 'gpu'" in r.stderr
    run(ds, tmp_path / "o", "--decoders", "64", "--threads", "0")
    r = run(ds, tmp_path / "w", "--workers", "64", "--decoders", "1")  # the bound: 64 workers, 3 shards
    assert "over 1 process x 64 workers" in r.stderr and "20 images" in r.stderr
    r = run(ds, tmp_path / "w1", "--workers", "1")
    assert "over 1 process x 1 worker (cpu)," in r.stderr  # the summary names the executor
    r = run(ds, tmp_path / "auto", "--executor", "auto")  # and so says which one auto took
    assert re.search(r"over 1 process x \d+ workers? \((cpu|cuda)\),", r.stderr), r.stderr


def test_the_decode_pool_has_at_most_a_thread_an_input(ds, tmp_path):
    """--decoders x --workers threads a process, but no more than its 21 inputs: 7 x 3 = 21 all
    start, 11 x 2 = 22 and 64 x 64 start 21 (main started 64 x 64 and more: a gate's slots and
    --decoders threads for each shard in flight)."""
    for name, extra, want in (("exact", ("--decoders", "7", "--workers", "3"), 21),
                              ("over", ("--decoders", "11", "--workers", "2"), 21),
                              ("most", ("--decoders", "64", "--workers", "64"), 21),
                              ("under", ("--decoders", "5", "--workers", "4"), 20)):
        run(ds, tmp_path / name, "--stats", str(tmp_path / (name + ".json")), *extra)
        st = json.load(open(tmp_path / (name + ".json")))
        assert [p["decoders"] for p in st["pools"]] == [want] and st["total"]["decoded"] == 21, name


def test_list_lines_of_any_length(ds, tmp_path):
    names = sorted(glob.glob(str(ds / "img" / "0[0-4]*.png")))[:3]
    long_line = "./" * 2500 + "x.png"  # 5005 characters: too long a path, but one line and one input
    lst = tmp_path / "l.txt"
    lst.write_bytes(("%s\n%s\n\n%s\r\n%s" % (names[0], long_line, names[1], names[2])).encode())
    r = run(ds, tmp_path / "o", src=["--in-list", str(lst)])
    assert "3 images" in r.stderr and "1 failed" in r.stderr
    m = markers(tmp_path / "o")[0]
    assert [row["file"] for row in m["rows"]] == names and [row["input"] for row in m["rows"]] == [0, 2, 3]
    assert [(e["input"], e["file"]) for e in m["errors"]] == [(1, long_line)]
    assert m["errors"][0]["error"].startswith("i/o error: cannot read '././")
    lst.write_bytes(names[0].encode() + b"\nbad\0name\n")
    r = run(ds, tmp_path / "n", src=["--in-list", str(lst)], rc=3)
    assert "line 2 holds a NUL byte" in r.stderr


def test_file_names_that_are_not_utf8(ds, tmp_path):
    img = tmp_path / "img"
    shutil.copytree(ds / "img", img)
    raw = os.fsencode(str(img))
    shutil.copy(str(img / "000.png"), raw + b"/\xff\xfe-copy.png")
    open(raw + b"/\xe9-corrupt.png", "wb").write(b"not a png")
    out = tmp_path / "o"
    cmd = [PXBATCH, str(ds / "p.pxi"), "--in-dir", raw, "--out", str(out), "--shard-size", "8", "--executor", "cpu"]
    r = subprocess.run(cmd, capture_output=True, timeout=60)
    assert r.returncode == 9 and b"2 failed" in r.stderr
    m = markers(out)  # valid JSON, valid UTF-8
    entries = [e for x in m for e in x["rows"] + x["errors"]]
    named = {bytes.fromhex(e["file_bytes"]): e for e in entries if "file_bytes" in e}
    assert set(named) == {raw + b"/\xff\xfe-copy.png", raw + b"/\xe9-corrupt.png"}
    assert named[raw + b"/\xff\xfe-copy.png"]["file"].endswith("/\ufffd\ufffd-copy.png")
    assert "file_bytes" not in entries[0]
    # the copy's row holds the patches of the file it copies
    row = named[raw + b"/\xff\xfe-copy.png"]
    shard = [x for x in m if row in x["rows"]][0]
    arr = np.load(str(out / ("shard-%05d.npy" % shard["shard"])))
    assert np.array_equal(arr[row["row"]], pxvm.Runner(pxvm.Program.load(str(ds / "p.pxi"))).patches(
        pxvm.load_image(str(img / "000.png"))))
    # a rerun reads them back: everything skipped, the failures still counted; --verify agrees
    r = subprocess.run(cmd, capture_output=True, timeout=60)
    assert r.returncode == 9 and b"3 finished shards skipped" in r.stderr and b"2 failed" in r.stderr
    assert "3 good" in verify(out)


def test_out_is_checked_before_any_work(ds, tmp_path):
    fifo = tmp_path / "list.fifo"  # a list nobody writes: reading it would block, so nothing may read it
    os.mkfifo(fifo)
    (tmp_path / "file").write_text("x")
    r = run(ds, tmp_path / "file", src=["--in-list", str(fifo)], rc=1, timeout=20)
    assert "--out '%s' is not a directory" % (tmp_path / "file") in r.stderr
    r = run(ds, tmp_path / "no" / "such", src=["--in-list", str(fifo)], rc=1, timeout=20)
    assert "cannot create it: No such file or directory (pxbatch makes the last folder only: create the ones " \
        "above it first)" in r.stderr, r.stderr
    if os.geteuid() == 0:
        ro = "/proc/self"  # root writes anywhere but here
    else:
        ro = tmp_path / "ro"
        os.mkdir(ro, 0o555)
    r = run(ds, ro, src=["--in-list", str(fifo)], rc=1, timeout=20)
    assert "--out '%s' is not writable" % ro in r.stderr
    assert "images in" not in r.stderr


def _locked(path):
    """Does a process hold an flock on path (Linux: /proc/locks)?"""
    try:
        ino = os.stat(path).st_ino
    except FileNotFoundError:
        return False
    return any(len(f) > 5 and f[1] == "FLOCK" and f[5].endswith(":%d" % ino)
               for f in (line.split() for line in open("/proc/locks")))


def test_a_second_run_on_the_same_out_refuses(ds, tmp_path):
    run(ds, tmp_path / "ref")
    out = tmp_path / "o"
    names = "\n".join(sorted(glob.glob(str(ds / "img" / "*")))) + "\n"
    # the first run locks --out, then waits for its list on standard input
    a = subprocess.Popen([PXBATCH, str(ds / "p.pxi"), "--in-list", "-", "--out", str(out), "--shard-size", "8",
                          "--executor", "cpu", "--threads", "1"], stdin=subprocess.PIPE, stderr=subprocess.PIPE,
                         env=ENV)
    try:
        deadline = time.time() + 20
        while not _locked(out / ".pxbatch.lock"):
            assert time.time() < deadline and a.poll() is None, "the first run never locked --out"
            time.sleep(0.01)
        t = time.time()
        r = run(ds, out, rc=2, timeout=20)
        assert "another pxbatch run (or --verify) holds --out" in r.stderr and time.time() - t < 10
        assert "a pxbatch run holds" in verify(out, rc=2)
        assert files(out) == {}
        _, err = a.communicate(names.encode(), timeout=60)
    finally:
        a.kill()
        a.wait()
    assert a.returncode == 9, err
    assert files(out) == files(tmp_path / "ref") and "3 good" in verify(out)


def test_max_memory_bounds_the_batch_and_each_input(ds, tmp_path):
    from PIL import Image, PngImagePlugin
    r = run(ds, tmp_path / "o", "--max-memory", "100000", rc=2)
    assert "a batch of 8 needs" in r.stderr and "over --max-memory 100000: lower --shard-size" in r.stderr
    assert not os.path.exists(tmp_path / "o")
    info = PngImagePlugin.PngInfo()
    info.add_text("junk", "x" * 150000)  # a 64x48 PNG of 150 KB: decodes to 12 KB
    Image.open(ds / "img" / "000.png").save(tmp_path / "big-file.png", pnginfo=info)
    Image.new("RGB", (1000, 1000)).save(tmp_path / "big-image.png")  # small file, 4 MB decoded
    lst = tmp_path / "l.txt"
    lst.write_text("%s\n%s\n%s\n" % (ds / "img" / "001.png", tmp_path / "big-file.png", tmp_path / "big-image.png"))
    run(ds, tmp_path / "o", "--max-memory", "100000", "--shard-size", "1", src=["--in-list", str(lst)])
    errs = [e["error"] for m in markers(tmp_path / "o") for e in m["errors"]]
    assert len(errs) == 2 and all("see --max-memory" in e for e in errs), errs
    assert "over the limit of 100000" in errs[0] and "the limit is 100000" in errs[1]


def test_a_shard_that_is_not_written_is_not_counted(ds, tmp_path):
    out = tmp_path / "o"
    os.makedirs(out / "shard-00000.npy")  # the shard's file cannot be replaced
    r = run(ds, out, "--shard-size", "64", rc=1)  # i/o: over the failed input's 9
    assert "cannot write" in r.stderr and "shard-00000.npy" in r.stderr
    assert "0 images in" in r.stderr and "1 shard not written" in r.stderr and "0.0 MB out" in r.stderr
    assert "nothing to run" not in r.stderr, r.stderr  # it ran: only the write failed
    # mid-run (shards are written on the worker's writer thread while it runs the next): shard 1
    # fails, named; shard 0 stays written, shard 2 (run meanwhile) is not written
    out = tmp_path / "o2"
    os.makedirs(out / "shard-00001.npy")
    r = run(ds, out, rc=1)
    assert "cannot write" in r.stderr and "shard-00001.npy" in r.stderr, r.stderr
    assert "8 images in" in r.stderr and "2 shards not written" in r.stderr
    assert sorted(n for n in os.listdir(out) if n.startswith("shard-")) == ["shard-00000.json", "shard-00000.npy",
                                                                         "shard-00001.npy"]


@pytest.mark.skipif(not shutil.which("mpirun"), reason="needs Open MPI's mpirun")
def test_ranks_that_see_other_inputs_refuse(ds, tmp_path):
    # under mpirun only rank 0 reads standard input: the other ranks would see no inputs at all
    names = "\n".join(sorted(glob.glob(str(ds / "img" / "*")))) + "\n"
    r = subprocess.run(["mpirun", "-np", "2", "--oversubscribe", PXBATCH, str(ds / "p.pxi"), "--in-list", "-",
                        "--out", str(tmp_path / "o"), "--executor", "cpu", "--threads", "1"], input=names,
                       capture_output=True, text=True, env=ENV, timeout=60)
    assert r.returncode == 2 and "the ranks do not see the same program and inputs" in r.stderr
    assert files(tmp_path / "o") == {}


def test_inputs_that_cannot_be_read_or_hold_no_image_are_errors(ds, tmp_path):
    """A folder that cannot be read, a folder with no image and an empty list are errors (exit 1)
    naming it, with no shard written (not "0 images", exit 0)."""
    (tmp_path / "none").mkdir()
    (tmp_path / "none" / "notes.txt").write_text("no image here")
    (tmp_path / "empty.txt").write_text("")
    for src, says in ((["--in-dir", str(tmp_path / "missing")], "cannot read"),
                      (["--in-dir", str(tmp_path / "none")], "holds no .png, .jpg or .jpeg file"),
                      (["--in-list", str(tmp_path / "empty.txt")], "names no file")):
        out = tmp_path / ("out-" + os.path.basename(src[1]))
        r = run(ds, out, src=src, rc=1)
        assert says in r.stderr and src[1] in r.stderr, r.stderr
        assert not glob.glob(str(out / "shard-*"))


def test_max_side_admits_a_panorama_the_default_refuses(tmp_path):
    """A panorama wider than the default 16384 fails naming --max-side, which pxbatch takes (as
    pxrun); with it raised the same file is written (dynamic: 16400x100 is within 200:1)."""
    from PIL import Image
    (tmp_path / "img").mkdir()
    Image.new("RGB", (16400, 100), (10, 20, 30)).save(tmp_path / "img" / "pano.png")
    plan = os.path.join(os.path.dirname(BIN), "programs", "uniform.json")
    cmd = [PXBATCH, plan, "--in-dir", str(tmp_path / "img"), "--policy", "dynamic", "--executor", "cpu"]
    r = subprocess.run(cmd + ["--out", str(tmp_path / "a")], capture_output=True, text=True, env=ENV, timeout=60)
    assert r.returncode == 9 and "is 16400x100; sides must be 1..16384 (see --max-side)" in r.stderr, r.stderr
    r = subprocess.run(cmd + ["--out", str(tmp_path / "b"), "--max-side", "16400"], capture_output=True, text=True,
                       env=ENV, timeout=60)
    assert r.returncode == 0 and "1 images" in r.stderr, r.stderr
    r = subprocess.run(cmd + ["--out", str(tmp_path / "c"), "--max-side", "70000"], capture_output=True, text=True,
                       env=ENV, timeout=60)
    assert r.returncode == 2 and "--max-side takes a whole number 1..65535, not '70000'" in r.stderr, r.stderr
