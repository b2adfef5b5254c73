"""The shipped programs inside the package (issue 41, "Install"): pxvm.programs.path/names, and
the wheel and sdist that python/build_backend builds (what `pip install ./python` runs) hold
programs/*.pxi and the plans, so the quick start works outside the repository."""
import os
import subprocess
import sys
import tarfile
import zipfile

import pytest

import pxvm
from conftest import PHOTO, ROOT

SHIPPED = sorted(os.path.splitext(f)[0] for f in os.listdir(os.path.join(ROOT, "programs"))
                 if f.endswith((".pxs", ".json")))


def test_names_and_paths_in_the_checkout():
    assert pxvm.programs.names() == SHIPPED
    p = pxvm.programs.path("foveate273")
    assert os.path.samefile(p, os.path.join(ROOT, "programs", "foveate273.pxi"))
    assert pxvm.Program.load(p).outputs[0].patch_count == 273
    assert pxvm.programs.path("uniform", "json").endswith("uniform.json")


@pytest.mark.parametrize("name", ["nosuch", "../programs/foveate273", "", ".hidden", None])
def test_an_unknown_name_is_a_usage_error_listing_the_names(name):
    with pytest.raises(pxvm.UsageError, match="foveate273"):
        pxvm.programs.path(name)


def _backend():
    sys.path.insert(0, os.path.join(ROOT, "python", "build_backend"))
    try:
        import pxvm_backend
    finally:
        sys.path.pop(0)
    return pxvm_backend


def test_the_wheel_ships_the_programs_and_the_quick_start_runs_outside_the_repo(tmp_path, monkeypatch):
    monkeypatch.setenv("PXVM_BUNDLE", "0")  # the library from PXVM_LIB: the wheel's .py files and programs are tested
    name = _backend().build_wheel(str(tmp_path))
    with zipfile.ZipFile(tmp_path / name) as z:
        inside = set(z.namelist())
        z.extractall(tmp_path / "site")
    for n in SHIPPED:
        assert "pxvm/_programs/%s.pxi" % n in inside, n
    assert "pxvm/_programs/uniform.json" in inside and "pxvm/programs.py" in inside
    away = tmp_path / "elsewhere"
    away.mkdir()
    code = ("import pxvm, os; p = pxvm.programs.path('foveate273'); assert '_programs' in p, p; "
            "r = pxvm.Runner(pxvm.Program.load(p)); print(r.patches(pxvm.load_image(%r)).shape, "
            "len(pxvm.programs.names()))" % PHOTO)
    env = dict(os.environ, PYTHONPATH=str(tmp_path / "site"))
    env["PXVM_LIB"] = os.environ.get("PXVM_LIB") or os.path.join(ROOT, "build", "libpxvm.so.1")
    r = subprocess.run([sys.executable, "-c", code], cwd=away, env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["(273,", "16,", "16,", "4)", str(len(SHIPPED))]


def test_the_sdist_ships_the_programs(tmp_path):
    name = _backend().build_sdist(str(tmp_path))
    with tarfile.open(tmp_path / name) as t:
        inside = {m.name.split("/", 1)[1] for m in t.getmembers()}
    for n in SHIPPED:
        assert "pxvm/_programs/%s.pxi" % n in inside, n
