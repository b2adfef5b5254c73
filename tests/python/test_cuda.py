"""CUDA tensors on the CUDA-GL executor (the GPU machine: PXVM_TEST_EXECUTOR=cuda): outputs equal
the CPU executor's bytes, never pass through the host, and follow torch's current stream."""
import os
import re

import numpy as np
import pytest

import pxvm
from conftest import EXECUTOR, ROOT, golden_programs, random_images

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(EXECUTOR != "cuda" or not torch.cuda.is_available(),
                                reason="needs PXVM_TEST_EXECUTOR=cuda and a CUDA device")


def cpu_and_gpu(prog):
    return pxvm.Runner(prog, executor="cpu"), pxvm.Runner(prog, executor="cuda")


def test_every_program_cuda_tensors_equal_cpu():
    rng = np.random.default_rng(4)
    for path, ins in golden_programs():
        prog = pxvm.Program.load(path)
        cpu, gpu = cpu_and_gpu(prog)
        feeds = {s.name: random_images(rng, 1, s.h, s.w)[0] for s in prog.inputs}
        want = cpu.run(**feeds)
        got = gpu.run(**{k: torch.from_numpy(v).cuda() for k, v in feeds.items()})
        for name, arr in want.items():
            assert got[name].is_cuda and got[name].dtype == torch.uint8
            assert np.array_equal(got[name].cpu().numpy(), arr), (path, name)


def test_layouts_on_the_device_equal_cpu(foveate, photo):
    cpu, gpu = cpu_and_gpu(foveate)
    rgb = np.ascontiguousarray(photo[:, :, :3])
    want = cpu.patches(rgb)
    t = torch.from_numpy(rgb).cuda()
    big = torch.zeros((600, 902, 3), dtype=torch.uint8, device="cuda")
    big[::2, ::2] = t
    for name, x in {"hwc": t, "chw permuted": t.permute(2, 0, 1), "chw contiguous": t.permute(2, 0, 1).contiguous(),
                    "strided": big[::2, ::2], "rgba": torch.from_numpy(photo).cuda()}.items():
        got = gpu.patches(x)
        ref = want if name != "rgba" else cpu.patches(photo)
        assert got.is_cuda and np.array_equal(got.cpu().numpy(), ref), name
    grey = torch.from_numpy(np.ascontiguousarray(photo[:, :, 0])).cuda()
    assert np.array_equal(gpu.patches(grey).cpu().numpy(), cpu.patches(photo[:, :, 0]))


def test_batch_equals_loop_on_the_device(foveate):
    rng = np.random.default_rng(5)
    imgs = random_images(rng, 6, 300, 451)
    cpu, gpu = cpu_and_gpu(foveate)
    loop = np.stack([cpu.patches(x) for x in imgs])
    dev = torch.from_numpy(np.stack(imgs)).cuda()
    assert np.array_equal(gpu.patches_batch(dev).cpu().numpy(), loop)
    assert np.array_equal(gpu.patches_batch([x for x in dev]).cpu().numpy(), loop)
    assert np.array_equal(gpu.patches_batch(np.stack(imgs)), loop)  # host batch on the GPU: NumPy out
    singles = torch.stack([gpu.patches(x) for x in dev])
    assert np.array_equal(singles.cpu().numpy(), loop)


def test_a_non_default_stream_is_followed(foveate, photo):
    cpu, gpu = cpu_and_gpu(foveate)
    want = cpu.patches(photo)
    src = torch.from_numpy(photo).cuda()
    s = torch.cuda.Stream()
    for _ in range(3):
        with torch.cuda.stream(s):
            x = torch.zeros_like(src)
            torch.cuda._sleep(20_000_000)  # the input is written late on s: the library must wait for it
            x.copy_(src)
            out = gpu.patches(x)
            out2 = out.clone()  # used on s at once, no synchronisation
        s.synchronize()
        assert np.array_equal(out2.cpu().numpy(), want)


def test_no_host_round_trip_for_cuda_inputs(foveate, photo):
    from torch.profiler import ProfilerActivity, profile
    gpu = pxvm.Runner(foveate, executor="cuda")
    x = torch.from_numpy(photo).cuda()
    gpu.patches(x)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(5):
            out = gpu.patches(x)
        torch.cuda.synchronize()
    names = [e.name for e in prof.events()]
    copies = [n for n in names if "Memcpy" in n and ("HtoD" in n or "DtoH" in n)]
    kernels = [n for n in names if "px__k_" in n]
    print("kernels seen:", sorted(set(kernels)), "host copies:", copies)
    assert any("px__k_bind" in n for n in kernels) and any("px__k_patches" in n for n in kernels)
    assert copies == []
    assert out.is_cuda


def test_wrong_device_or_executor_is_a_value_error(foveate, photo):
    cpu = pxvm.Runner(foveate, executor="cpu")
    with pytest.raises(ValueError, match="CUDA tensors need executor 'cuda'"):
        cpu.patches(torch.from_numpy(photo).cuda())


def test_readme_torch_example_runs(monkeypatch):
    from test_api import readme_python_blocks
    block = next(b for b in readme_python_blocks() if "patches_batch(frames)" in b)
    monkeypatch.chdir(ROOT)
    env = {}
    exec(block, env)
    assert env["tokens"].shape == (32, 273, 16, 16, 4) and env["tokens"].is_cuda
    assert env["emb"].shape == (32, 273, 1024)
    cpu = pxvm.Runner(env["prog"], executor="cpu")
    assert np.array_equal(env["tokens"][7].cpu().numpy(), cpu.patches(env["frames"][7].cpu().numpy()))


def test_slots_beyond_free_gpu_memory_are_unavailable_and_the_gpu_stays_usable(foveate, photo):
    prog = pxvm.assemble(".width 16\n.slot image input 8192x8192\nPYRAMID image\nHALT\n")
    free, total = torch.cuda.mem_get_info()
    batch = int(free // (8192 * 8192 * 4 * 2)) + 8  # more items than fit
    r = pxvm.Runner(prog, executor="cuda")
    with pytest.raises(pxvm.Unavailable, match=r"the program needs \d+ bytes of GPU memory \(%d items.*CUDA device 0 "
                                               r"has \d+ bytes free of \d+" % batch):
        r.run_batch([np.zeros((8192, 8192), np.uint8)] * batch)
    cpu, gpu = cpu_and_gpu(foveate)
    assert np.array_equal(gpu.patches(photo), cpu.patches(photo))


# ---- fixations on the device ------------------------------------------------------------------

def test_scanpath_plan_cuda_equals_cpu_patches_fixations_and_geometry(photo):
    prog = pxvm.Program.from_plan({"image": [451, 300], "budget": 64, "scheme": "logpolar", "scanpath": 4})
    cpu, gpu = cpu_and_gpu(prog)
    want = cpu.patches(photo, fixation="saliency")
    got, geo = gpu.patches(torch.from_numpy(photo).cuda(), fixation="saliency", with_geometry=True)
    assert np.array_equal(got.cpu().numpy(), want)
    assert np.array_equal(gpu.fixations(), cpu.fixations())
    assert np.array_equal(gpu.geometry(exact=True), cpu.geometry(exact=True))
    assert geo.is_cuda and np.allclose(geo.cpu().numpy(), cpu.geometry()[0], equal_nan=True)


def test_device_fixations_per_item_stay_on_the_device_and_equal_cpu(photo):
    from torch.profiler import ProfilerActivity, profile
    prog = pxvm.Program.from_plan({"image": [451, 300], "budget": 64, "scheme": "v1", "fixation": "relative"})
    cpu, gpu = cpu_and_gpu(prog)
    rng = np.random.default_rng(3)
    fix = rng.uniform(0, 1, (8, 2))  # normalized
    fix[0] = (0.033834199419042754, 0.005086288452148437)  # ties: x * 451 * 65536 = 1000028.5, y * 300 * 65536 = 100000.5
    frames = torch.from_numpy(np.stack([photo] * 8)).cuda()
    dfix = torch.from_numpy(fix).cuda()
    want = cpu.patches_batch(np.stack([photo] * 8), fixations=fix)
    got = gpu.patches_batch(frames, fixations=dfix)  # converted on the device: the library's registers, exactly
    assert np.array_equal(got.cpu().numpy(), want)
    assert np.array_equal(gpu.fixations(batch=8), cpu.fixations(batch=8))
    assert tuple(gpu.fixations(batch=8)[0, 0] * 65536) == (1000029, 100001)  # halves round up, not to even
    side = np.array([451.0, 300.0])
    assert np.array_equal(gpu.patches_batch(frames, fixations=dfix * torch.from_numpy(side).cuda(),
                                            fixation_units="texels").cpu().numpy(),
                          cpu.patches_batch(np.stack([photo] * 8), fixations=fix * side, fixation_units="texels"))
    with pytest.raises(pxvm.UsageError, match=re.escape("fixation (item 3, register 0): y = 1.5 is not in [0, 1]")):
        bad = dfix.clone()
        bad[3, 1] = 1.5
        gpu.patches_batch(frames, fixations=bad)
    torch.cuda.synchronize()
    # with fixation_clamp=True nothing is read back: the values never leave the device
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for i in range(5):
            out, geo = gpu.patches_batch(frames, fixations=(dfix + i / 100) % 1.0, fixation_clamp=True,
                                         with_geometry=True)
        torch.cuda.synchronize()
    copies = [e.name for e in prof.events() if "Memcpy" in e.name and ("HtoD" in e.name or "DtoH" in e.name)]
    assert copies == [] and out.is_cuda and geo.is_cuda
    assert np.array_equal(gpu.geometry(batch=8, exact=True)[:, :, :2] - (gpu.fixations(batch=8)[:, :1] * 65536).astype(np.int32),
                          cpu.geometry(batch=8, exact=True)[:, :, :2] - (cpu.fixations(batch=8)[:, :1] * 65536).astype(np.int32))
    # checked (the default): one flag comes back, the values stay
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        gpu.patches_batch(frames, fixations=dfix)
        torch.cuda.synchronize()
    copies = [e.name for e in prof.events() if "Memcpy" in e.name and ("HtoD" in e.name or "DtoH" in e.name)]
    assert not any("HtoD" in c for c in copies) and len(copies) <= 1, copies


def test_readme_fixation_example_runs(monkeypatch):
    from test_api import readme_python_blocks
    block = next(b for b in readme_python_blocks() if "fixations=gaze" in b)
    monkeypatch.chdir(ROOT)
    env = {}
    exec(block, env)
    n = env["r"]._atlas(None).patch_count  # logpolar: rings x wedges <= the budget
    assert env["tokens"].shape == (32, n, 16, 16, 4) and env["tokens"].is_cuda and 250 <= n <= 273
    assert env["where"].shape == (32, n, 4) and env["where"].is_cuda
    assert env["scan"].fixations().shape == (1, 8, 2)


# ---- video: streams on the GPU -------------------------------------------------------------------

def test_video_stream_pinned_host_frames_pipelined_equal_cpu():
    """Page-locked host frames take the pipelined upload (copy stream, two buffers in turn); the
    caller refills one pinned buffer right after each push returns."""
    from test_video import moving_frames, video_plan
    prog = pxvm.Program.from_plan(video_plan(96, 64, 8, budget=16, patch=8))
    cpu, gpu = pxvm.Runner(prog, executor="cpu").stream(), pxvm.Runner(prog, executor="cuda").stream()
    buf = torch.empty((64, 96, 4), dtype=torch.uint8).pin_memory()
    for i, f in enumerate(moving_frames(10, 96, 64, 3)):
        rgba = np.concatenate([f, np.full((64, 96, 1), 255, np.uint8)], axis=2)
        buf.copy_(torch.from_numpy(rgba))
        pg, cg = gpu.push(buf, fixation=(0.5, 0.5))
        buf.fill_(0)  # reused at once: the upload must be done
        pc, cc = cpu.push(rgba, fixation=(0.5, 0.5))
        assert np.array_equal(pg, pc) and np.array_equal(cg, cc), i


def test_video_stream_cuda_frames_equal_cpu_and_changed_on_device():
    from test_video import moving_frames, video_plan
    prog = pxvm.Program.from_plan(video_plan(120, 80, 16, budget=24, patch=8))
    cpu, gpu = pxvm.Runner(prog, executor="cpu").stream(), pxvm.Runner(prog, executor="cuda").stream()
    for i, f in enumerate(moving_frames(10, 120, 80, 5)):
        pg, cg = gpu.push(torch.from_numpy(f).cuda(), fixation=(0.5, 0.5), dirty=[(0, 0, 120, 80)] if i == 4 else None)
        pc, cc = cpu.push(f, fixation=(0.5, 0.5), dirty=[(0, 0, 120, 80)] if i == 4 else None)
        assert pg.is_cuda and cg.is_cuda and cg.dtype == torch.bool
        assert np.array_equal(pg.cpu().numpy(), pc) and np.array_equal(cg.cpu().numpy(), cc), i


def test_video_stream_dirty_rectangles_upload_only_their_tiles():
    """With rectangles given, a host frame's bytes outside their tiles never cross the link (the
    input is read only by DIFF/UPDATE); the pixels there may change without anyone seeing it, on
    either executor, and the bytes stay those of the CPU. Pageable and page-locked frames, and a
    restart (whose first frame is whole again)."""
    from test_video import video_plan
    w, h = 100, 70
    prog = pxvm.Program.from_plan(video_plan(w, h, 0, budget=16, patch=8))
    cpu, gpu = pxvm.Runner(prog, executor="cpu").stream(), pxvm.Runner(prog, executor="cuda").stream()
    rng = np.random.default_rng(9)
    pinned = torch.empty((h, w, 4), dtype=torch.uint8).pin_memory()
    for i in range(12):
        f = rng.integers(0, 256, (h, w, 4), dtype=np.uint8)  # everything changes...
        rects = [(int(rng.integers(0, w - 20)), int(rng.integers(0, h - 20)), 17, 9)] if i % 4 else None  # ...only this is told
        if i == 6:
            cpu.reset(), gpu.reset()
        src = f
        if i % 2:
            pinned.copy_(torch.from_numpy(f))
            src = pinned
        pg, cg = gpu.push(src, dirty=rects, fixation=(0.5, 0.5))
        pc, cc = cpu.push(f, dirty=rects, fixation=(0.5, 0.5))
        assert np.array_equal(pg, pc) and np.array_equal(cg, cc), i
