"""pxrun and pxasm with pipes, FIFOs, terminals, symlinks, devices and standard input/output
(issue 13): only regular files are replaced (all-or-nothing), streams are written directly and
their write errors are i/o errors, '-' is standard input/output, signals leave no temporary file."""
import io
import os
import pty
import signal
import stat
import subprocess
import threading
import time
import tty

import numpy as np
import pytest

from conftest import BIN, PHOTO, ROOT

FOV = os.path.join(ROOT, "programs", "foveate273.pxi")


def run(args, **kw):
    return subprocess.run([os.path.join(BIN, args[0])] + list(args[1:]), capture_output=True, **kw)


def npy_bytes(tmp_path):
    path = tmp_path / "ref.npy"
    assert run(["pxrun", FOV, "--in", "image=" + PHOTO, "--npy", "atlas=%s" % path]).returncode == 0
    return path.read_bytes()


def temporaries(folder):
    return [n for n in os.listdir(folder) if ".tmp-" in n]


def test_dash_is_stdout_and_the_bytes_are_the_files(tmp_path):
    r = run(["pxrun", FOV, "--in", "image=" + PHOTO, "--npy", "atlas=-"])
    assert r.returncode == 0 and r.stdout == npy_bytes(tmp_path)
    assert np.load(io.BytesIO(r.stdout)).shape == (273, 16, 16, 4)


def test_dash_is_stdin_for_program_input_source_and_plan(tmp_path):
    want = npy_bytes(tmp_path)
    with open(FOV, "rb") as f:
        r = run(["pxrun", "-", "--in", "image=" + PHOTO, "--npy", "atlas=-"], stdin=f)
    assert r.returncode == 0 and r.stdout == want
    with open(PHOTO, "rb") as f:
        r = run(["pxrun", FOV, "--in", "image=-", "--npy", "atlas=-"], stdin=f)
    assert r.returncode == 0 and r.stdout == want
    plan = open(os.path.join(ROOT, "programs", "foveate273.json"), "rb").read()
    r = run(["pxasm", "--plan", "-", "-o", "-"], input=plan)
    assert r.returncode == 0 and r.stdout[:8] == b"\x89PNG\r\n\x1a\n"
    src = run(["pxasm", "-d", FOV, "-o", "-"]).stdout
    again = run(["pxasm", "-", "-o", str(tmp_path / "again.pxi")], input=src)
    assert again.returncode == 0
    r = run(["pxrun", str(tmp_path / "again.pxi"), "--in", "image=" + PHOTO, "--npy", "atlas=-"])
    assert r.stdout == want
    r = run(["pxrun", "-", "--in", "image=-"], input=b"")
    assert r.returncode == 2 and b"at most one" in r.stderr


def test_pipes_fifos_and_dev_fd_inputs(tmp_path):
    want = npy_bytes(tmp_path)
    rfd, wfd = os.pipe()
    data = open(PHOTO, "rb").read()
    t = threading.Thread(target=lambda: (os.write(wfd, data), os.close(wfd)))
    t.start()
    r = run(["pxrun", FOV, "--in", "image=/dev/fd/%d" % rfd, "--npy", "atlas=-"], pass_fds=(rfd,))
    t.join()
    os.close(rfd)
    assert r.returncode == 0 and r.stdout == want, r.stderr
    fifo = tmp_path / "in.fifo"
    os.mkfifo(fifo)
    t = threading.Thread(target=lambda: open(fifo, "wb").write(data))
    t.start()
    r = run(["pxrun", FOV, "--in", "image=%s" % fifo, "--npy", "atlas=-"])
    t.join()
    assert r.returncode == 0 and r.stdout == want


def test_a_long_stream_is_cut_at_the_limit():
    gen = subprocess.Popen(["cat", "/dev/zero"], stdout=subprocess.PIPE)
    t0 = time.time()
    r = run(["pxrun", FOV, "--in", "image=-", "--max-memory", "2000000"], stdin=gen.stdout)
    gen.kill()
    gen.wait()
    assert r.returncode == 1 and b"longer than the memory limit" in r.stderr
    assert time.time() - t0 < 20


def test_symlinks_are_followed_and_kept(tmp_path):
    want = npy_bytes(tmp_path)
    target = tmp_path / "target.npy"
    target.write_bytes(b"old")
    link = tmp_path / "link.npy"
    link.symlink_to("target.npy")
    assert run(["pxrun", FOV, "--in", "image=" + PHOTO, "--npy", "atlas=%s" % link]).returncode == 0
    assert link.is_symlink() and os.readlink(link) == "target.npy" and target.read_bytes() == want
    dangling = tmp_path / "dangling.npy"
    dangling.symlink_to("sub/new.npy")
    (tmp_path / "sub").mkdir()
    assert run(["pxrun", FOV, "--in", "image=" + PHOTO, "--npy", "atlas=%s" % dangling]).returncode == 0
    assert dangling.is_symlink() and (tmp_path / "sub" / "new.npy").read_bytes() == want
    assert temporaries(tmp_path) == [] and temporaries(tmp_path / "sub") == []


def test_a_fifo_output_streams_to_its_reader(tmp_path):
    want = npy_bytes(tmp_path)
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    got = []
    t = threading.Thread(target=lambda: got.append(open(fifo, "rb").read()))
    t.start()
    r = run(["pxrun", FOV, "--in", "image=" + PHOTO, "--npy", "atlas=%s" % fifo])
    t.join()
    assert r.returncode == 0 and got == [want]
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_a_terminal_output_is_written_directly(tmp_path):
    want = npy_bytes(tmp_path)
    master, slave = pty.openpty()
    tty.setraw(slave)  # no newline translation
    name = os.ttyname(slave)
    got = bytearray()
    done = threading.Event()

    def reader():
        while not done.is_set() or len(got) < len(want):
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            got.extend(chunk)
            if len(got) >= len(want):
                break
    t = threading.Thread(target=reader)
    t.start()
    r = run(["pxrun", FOV, "--in", "image=" + PHOTO, "--npy", "atlas=%s" % name])
    done.set()
    t.join(10)
    os.close(slave)
    os.close(master)
    assert r.returncode == 0 and bytes(got) == want
    assert stat.S_ISCHR(os.stat(name).st_mode) if os.path.exists(name) else True


def test_directories_are_refused_and_nothing_is_written(tmp_path):
    keep = tmp_path / "keep.png"
    keep.write_bytes(b"old")
    (tmp_path / "dir.npy").mkdir()
    r = run(["pxrun", FOV, "--in", "image=" + PHOTO, "--out", "atlas=%s" % keep, "--npy", "atlas=%s" % (tmp_path / "dir.npy")])
    assert r.returncode == 1 and b"is a directory" in r.stderr
    assert keep.read_bytes() == b"old" and temporaries(tmp_path) == []


def test_a_closed_pipe_is_an_io_error():
    p = subprocess.Popen([os.path.join(BIN, "pxrun"), FOV, "--in", "image=" + PHOTO, "--out", "atlas=-"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdout.read(10)
    p.stdout.close()
    err = p.stderr.read()
    assert p.wait() == 1 and b"Broken pipe" in err


def test_png_fast_by_default_best_on_request(tmp_path):
    fast, best, again = tmp_path / "f.png", tmp_path / "b.png", tmp_path / "g.png"
    base = ["pxrun", FOV, "--in", "image=" + PHOTO, "--out"]
    assert run(base + ["atlas=%s" % fast]).returncode == 0
    assert run(base + ["atlas=%s" % best, "--png", "best"]).returncode == 0
    assert run(base + ["atlas=%s" % again, "--png", "fast"]).returncode == 0
    assert fast.read_bytes() == again.read_bytes() and fast.read_bytes() != best.read_bytes()
    import pxvm
    assert np.array_equal(pxvm.load_image(str(fast)), pxvm.load_image(str(best)))
    assert run(base + ["atlas=x.png", "--png", "smallest"]).returncode == 2


def test_sigterm_and_sigint_leave_no_temporary_file(tmp_path):
    # two large outputs encoded slowly (--png best): the first one's temporary file exists while
    # the second is encoded; the signal comes then
    src = tmp_path / "big.pxs"
    src.write_text(".width 16\n.slot image input 4096x4096\n.slot a output 4096x4096\n.slot b output 4096x4096\n"
                   "PYRAMID image\nHALT\n")
    assert run(["pxasm", str(src), "-o", str(tmp_path / "big.pxi")]).returncode == 0
    noise = tmp_path / "noise.png"
    rng = np.random.default_rng(1)
    from PIL import Image
    Image.fromarray(rng.integers(0, 256, (4096, 4096, 4), dtype=np.uint8)).save(noise)
    out = tmp_path / "out"
    out.mkdir()
    for sig in (signal.SIGTERM, signal.SIGINT):
        p = subprocess.Popen([os.path.join(BIN, "pxrun"), str(tmp_path / "big.pxi"), "--in", "image=%s" % noise,
                              "--out", "image=%s" % (out / "1.png"), "--out", "image@1=%s" % (out / "2.png"),
                              "--out", "image@0=%s" % (out / "3.png"), "--png", "best"])
        deadline = time.time() + 60
        while not temporaries(out) and p.poll() is None and time.time() < deadline:
            time.sleep(0.001)  # the signal lands as the file appears: the moment pxvm_outputs_add guards
        assert temporaries(out), "no temporary file seen while writing"
        p.send_signal(sig)
        assert p.wait() == -sig
        assert temporaries(out) == [] and os.listdir(out) == []


def test_a_file_over_the_limit_names_both_sizes(tmp_path):
    """A regular file larger than --max-memory is refused before it is read, with its size and the
    limit (the figures to raise it by); one byte under the limit passes that check."""
    big = tmp_path / "big.png"
    with open(big, "wb") as f:
        f.truncate(2000001)
    r = run(["pxrun", FOV, "--in", "image=%s" % big, "--max-memory", "2000000"])
    assert r.returncode == 1, r.stderr
    assert b"'%s': file of 2000001 bytes, larger than the memory limit of 2000000" % str(big).encode() in r.stderr
    with open(big, "wb") as f:
        f.truncate(2000000)
    r = run(["pxrun", FOV, "--in", "image=%s" % big, "--max-memory", "2000000"])
    assert r.returncode != 0 and b"larger than the memory limit" not in r.stderr, r.stderr
