"""pxbatch --policy (docs/datasets.md and docs/policies.md): real photos of mixed sizes
(tests/data/photos) and chelsea (the slot's size) through foveate273 with --policy fit finish with
no failures, each row equal to Runner.patches(image, policy=...); the policy is part of the marker's
job (a rerun with another refuses naming it; a marker without one is exact); exact, the default,
lists each file of another size as failed naming it and both sizes; a program that samples relative
to a fixation register is refused before any work (pxbatch gives no fixation)."""
import glob
import json
import os
import shutil
import subprocess

import numpy as np
import pytest

import pxvm
from conftest import BIN, ROOT

PXBATCH = os.path.join(BIN, "pxbatch")
PROGRAM = os.path.join(ROOT, "programs", "foveate273.pxi")
PHOTOS = sorted(glob.glob(os.path.join(ROOT, "tests", "data", "photos", "*.png")) +
                glob.glob(os.path.join(ROOT, "tests", "data", "photos", "*.jpg"))) + \
    [os.path.join(ROOT, "programs", "data", "chelsea.png")]
W, H = 451, 300


@pytest.fixture(scope="module")
def photos(tmp_path_factory):
    d = tmp_path_factory.mktemp("policy") / "photos"
    d.mkdir()
    for p in PHOTOS:
        shutil.copy(p, d / os.path.basename(p))
    return d


def run(src, out, *extra, prog=PROGRAM, rc=0):
    r = subprocess.run([PXBATCH, str(prog), "--in-dir", str(src), "--out", str(out), "--shard-size", "2",
                        "--executor", "cpu", "--threads", "1", *extra], capture_output=True, text=True, timeout=120)
    assert r.returncode == rc, r.stdout + r.stderr
    return r


def markers(out):
    return [json.load(open(f)) for f in sorted(glob.glob(str(out) + "/shard-*.json"))]


def sizes():
    return {os.path.basename(p): pxvm.load_image(p).shape[1::-1] for p in PHOTOS}


@pytest.mark.parametrize("policy", ["fit", "stretch:lanczos", "fit:bilinear:200,100,0"])
def test_policy_rows_equal_runner_patches(photos, tmp_path, foveate, policy):
    out = tmp_path / "o"
    r = run(photos, out, "--policy", policy)
    assert "0 failed" in r.stderr, r.stderr
    runner = pxvm.Runner(foveate, executor="cpu")
    ms = markers(out)
    assert len(ms) == 3 and all(not m["errors"] for m in ms)
    canon = {"fit": "fit:bicubic:0,0,0,255", "stretch:lanczos": "stretch:lanczos",
             "fit:bilinear:200,100,0": "fit:bilinear:200,100,0,255"}[policy]
    rows = 0
    for m in ms:
        assert m["job"]["policy"] == canon
        arr = np.load(str(out / ("shard-%05d.npy" % m["shard"])))
        for row in m["rows"]:
            want = runner.patches(pxvm.load_image(row["file"]), policy=policy)
            assert np.array_equal(arr[row["row"]], want), (policy, row["file"])
            rows += 1
    assert rows == len(PHOTOS)
    r = subprocess.run([PXBATCH, "--verify", str(out)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr


def test_a_rerun_with_another_policy_refuses_naming_the_field(photos, tmp_path):
    out = tmp_path / "o"
    run(photos, out, "--policy", "fit")
    before = {f: open(f, "rb").read() for f in glob.glob(str(out) + "/shard-*")}
    r = run(photos, out, "--policy", "stretch", rc=2)
    assert "another job" in r.stderr and 'policy: "fit:bicubic:0,0,0,255" -> "stretch:bicubic"' in r.stderr, r.stderr
    assert {f: open(f, "rb").read() for f in glob.glob(str(out) + "/shard-*")} == before
    # the same policy, written another way, is the same job: every shard is skipped
    r = run(photos, out, "--policy", "fit:bicubic:000000ff")
    assert "3 finished shards skipped" in r.stderr, r.stderr
    assert "(none opened: nothing to run)" in r.stderr and "(auto)" not in r.stderr, r.stderr
    # exact, the default, is another job too
    r = run(photos, out, rc=2)
    assert '"fit:bicubic:0,0,0,255" -> "exact"' in r.stderr, r.stderr


def test_a_marker_without_a_policy_is_exact(photos, tmp_path):
    """Outputs written before the field existed stay valid: a missing policy reads as exact."""
    out = tmp_path / "o"
    run(photos, out, "--policy", "exact", rc=9)
    for f in glob.glob(str(out) + "/shard-*.json"):
        m = json.load(open(f))
        del m["job"]["policy"]
        open(f, "w").write(json.dumps(m))
    r = run(photos, out, "--policy", "exact", rc=9)
    assert "3 finished shards skipped" in r.stderr, r.stderr
    r = run(photos, out, "--policy", "fit", rc=2)
    assert 'policy: "exact" -> "fit:bicubic:0,0,0,255"' in r.stderr, r.stderr
    r = subprocess.run([PXBATCH, "--verify", str(out)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr


def test_exact_lists_each_wrong_size_file_naming_it_and_the_sizes(photos, tmp_path):
    out = tmp_path / "o"
    run(photos, out, rc=9)
    ms = markers(out)
    assert all(m["job"]["policy"] == "exact" for m in ms)
    errors = {os.path.basename(e["file"]): e["error"] for m in ms for e in m["errors"]}
    rows = [os.path.basename(r["file"]) for m in ms for r in m["rows"]]
    s = sizes()
    assert len(set(s.values())) == len(s) and s["chelsea.png"] == (W, H)  # mixed sizes, one the slot's
    assert rows == ["chelsea.png"] and set(errors) == set(s) - {"chelsea.png"}
    for name, err in errors.items():
        w, h = s[name]
        assert err.startswith("unlinkable: a %dx%d image" % (w, h)), err
        assert "which is %dx%d" % (W, H) in err and name in err and "--policy" in err, err


def test_a_relative_plan_is_refused_before_any_work(photos, tmp_path):
    plan = tmp_path / "relative.json"
    plan.write_text(json.dumps({"image": [W, H], "budget": 64, "scheme": "logpolar", "fixation": "relative"}))
    out = tmp_path / "o"
    r = run(photos, out, prog=plan, rc=2)
    assert ("program '%s' samples relative to fixation register 0: pxbatch gives no fixation; compile the plan "
            "with an absolute fixation" % plan) in r.stderr, r.stderr
    assert not glob.glob(str(out) + "/shard-*")
    # the same plan with an absolute fixation runs
    plan.write_text(json.dumps({"image": [W, H], "budget": 64, "scheme": "logpolar"}))
    run(photos, out, "--policy", "stretch", prog=plan)
    assert len(markers(out)) == 3


@pytest.mark.parametrize("bad", ["bogus", "fit:sharp", "exact:bicubic", "fit:bicubic:1,2"])
def test_a_bad_policy_is_a_usage_error_naming_it(photos, tmp_path, bad):
    out = tmp_path / "o"
    r = run(photos, out, "--policy", bad, rc=2)
    assert "bad policy '%s'" % bad in r.stderr, r.stderr
    assert not os.path.exists(out)
