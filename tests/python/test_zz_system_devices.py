"""Last of all the Python tests (the file name sorts last): /dev/full and /dev/stdout are the
machine's own files; pxrun writes to them directly and must leave them as they are."""
import os
import stat

from conftest import PHOTO
from test_cli_io import FOV, run


def test_zz_dev_full_and_dev_stdout_are_kept_as_they_are():
    before_full, before_stdout = os.lstat("/dev/full"), os.lstat("/dev/stdout")
    try:
        r = run(["pxrun", FOV, "--in", "image=" + PHOTO, "--out", "atlas=/dev/full"])
        assert r.returncode == 1 and b"No space left on device" in r.stderr
        r = run(["pxrun", FOV, "--in", "image=" + PHOTO, "--npy", "atlas=/dev/stdout"])
        assert r.returncode == 0 and r.stdout[:6] == b"\x93NUMPY"
    finally:
        full, out = os.lstat("/dev/full"), os.lstat("/dev/stdout")
        assert stat.S_ISCHR(full.st_mode) and full.st_rdev == before_full.st_rdev, "/dev/full WAS REPLACED"
        assert stat.S_ISLNK(out.st_mode) and os.readlink("/dev/stdout") == "/proc/self/fd/1", "/dev/stdout WAS REPLACED"
        del before_stdout
