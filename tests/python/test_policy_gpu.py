"""Policies on the executor (issue 40): with the cuda executor, stretch and fit resize CUDA tensors
on its GPU (the host path refused them) and host arrays on the host, giving the cpu executor's
bytes: the runs' outputs are equal, on the device of their inputs. Runs where PXVM_TEST_EXECUTOR=cuda and a GPU are present (the
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
    img = pxvm.load_image(PHOTO)[..., :3].copy()  # a real photo (451x300), RGB, another size than the slot's
    prog = pxvm.Program.from_plan({"image": [320, 240], "scheme": "uniform", "patch": 16})
    with pxvm.Runner(prog, executor="cpu") as cpu, pxvm.Runner(prog, executor="cuda") as gpu:
        want = cpu.patches(img, policy=policy)
        got_host = gpu.patches(img, policy=policy)
        got_dev = gpu.patches(torch.from_numpy(img).cuda(), policy=policy)
        assert isinstance(got_host, np.ndarray) and np.array_equal(got_host, want)  # host in, host out
        assert got_dev.is_cuda and np.array_equal(got_dev.cpu().numpy(), want)
        dev2 = [torch.from_numpy(img).cuda(), torch.from_numpy(np.ascontiguousarray(img[::2, ::3])).cuda()]
        batch = gpu.patches_batch(dev2, policy=policy)
        assert np.array_equal(batch.cpu().numpy(), cpu.patches_batch([img, img[::2, ::3]], policy=policy))
        same = torch.from_numpy(np.ascontiguousarray(img[:240, :320])).cuda()  # the slot's size: bound as it is
        assert np.array_equal(gpu.patches(same, policy=policy).cpu().numpy(), cpu.patches(img[:240, :320], policy=policy))
