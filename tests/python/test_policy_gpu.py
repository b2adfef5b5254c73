"""Policies on the executor (issue 40): with the cuda executor, stretch and fit resize on its GPU,
from host arrays and from CUDA tensors (which the host path refused), giving the cpu executor's
bytes: the runs' outputs are equal. Runs where PXVM_TEST_EXECUTOR=cuda and a GPU are present (the
GPU check); on the CPU the host path is what test_policy.py covers."""
import numpy as np
import pytest

import pxvm
from conftest import EXECUTOR, PHOTO, ROOT  # noqa: F401


def _cuda():
    torch = pytest.importorskip("torch")
    if EXECUTOR != "cuda" or not torch.cuda.is_available():
        pytest.skip("needs PXVM_TEST_EXECUTOR=cuda and a CUDA device")
    return torch


@pytest.mark.parametrize("policy", ["stretch", "fit:bilinear:10,20,30", "stretch:lanczos"])
def test_policies_resize_on_the_gpu_with_the_cpus_bytes(policy):
    torch = _cuda()
    img = pxvm.load_image(PHOTO)[..., :3].copy()  # a real photo, RGB, another size than the slot's
    prog = pxvm.Program.from_plan({"image": [451, 300], "scheme": "uniform", "patch": 16})
    with pxvm.Runner(prog, executor="cpu") as cpu, pxvm.Runner(prog, executor="cuda") as gpu:
        want = cpu.patches(img, policy=policy)
        got_host = gpu.patches(img, policy=policy)
        got_dev = gpu.patches(torch.from_numpy(img).cuda(), policy=policy)
        assert np.array_equal(np.asarray(got_host), want)
        assert got_dev.is_cuda and np.array_equal(got_dev.cpu().numpy(), want)
        batch = gpu.patches_batch([img, img[::2, ::3]], policy=policy)
        assert np.array_equal(np.asarray(batch), cpu.patches_batch([img, img[::2, ::3]], policy=policy))
