#!/usr/bin/env python3
"""PyTorch baselines for tests/bench/gpu-bench, on the same GPU in the same command.

For each size: the full avg_pool2d pyramid from float input and from uint8 input (converted
first, as a pipeline must), the classic per-patch Python loop that cuts 273 foveated 16x16
patches from a 5-level pyramid, and the vectorized version (grid_sample on every level for all
patches, blended between the two nearest levels by the fractional LOD: the trilinear sampling
pxvm's SAMPLE does). Times are CUDA-event medians; prints JSON."""
import json, math, sys
import torch
import torch.nn.functional as F

dev = "cuda"
reps = int(sys.argv[1]) if len(sys.argv) > 1 else 50


def median_ms(fn, n=reps, warm=5):
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(n):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b))
    times.sort()
    return times[len(times) // 2]


def pyramid(x, max_levels=99):
    levels = [x]
    while len(levels) < max_levels and min(levels[-1].shape[-2:]) >= 2:
        levels.append(F.avg_pool2d(levels[-1], 2))
    return levels


def plan(grid=17, budget=273, lod_max=4.0):
    """foveate273's patch centres (normalized) and LODs, as pxvm's plan computes them."""
    idx = torch.arange(budget, device=dev)
    cx = ((idx % grid).double() + 0.5) / grid
    cy = ((idx // grid).double() + 0.5) / grid
    e = torch.sqrt((cx - 0.5) ** 2 + (cy - 0.5) ** 2)
    lod = torch.clamp(torch.log2(e + 0.5), 0, lod_max)
    return cx.float(), cy.float(), lod.float()


def patches_loop(pyr, cx, cy, lod):
    """The classic per-patch loop: pick a level, slice 16x16 around the centre, pad, stack."""
    out = []
    for x, y, l in zip(cx.tolist(), cy.tolist(), lod.tolist()):
        L = pyr[min(int(l), len(pyr) - 1)]
        H, W = L.shape[-2:]
        sx, sy = int(x * W) - 8, int(y * H) - 8
        p = L[0, :, max(0, sy):min(H, sy + 16), max(0, sx):min(W, sx + 16)]
        if p.shape[1] < 16 or p.shape[2] < 16:
            p = F.pad(p, (0, 16 - p.shape[2], 0, 16 - p.shape[1]))
        out.append(p)
    return torch.stack(out)


def patches_vectorized(pyr, cx, cy, lod):
    """grid_sample on every level for all patches, then the linear blend between levels."""
    n = cx.shape[0]
    H0, W0 = pyr[0].shape[-2:]
    step = torch.exp2(lod)  # one output pixel per texel of the chosen level
    off = torch.arange(16, device=dev).float() - 7.5
    gx = cx[:, None, None] + off[None, None, :] * step[:, None, None] / W0
    gy = cy[:, None, None] + off[None, :, None] * step[:, None, None] / H0
    grid = torch.stack([gx.expand(-1, 16, 16), gy.expand(-1, 16, 16)], -1) * 2 - 1
    samples = torch.stack([F.grid_sample(L.expand(n, -1, -1, -1), grid, mode="bilinear",
                                         padding_mode="border", align_corners=False) for L in pyr])
    l0 = lod.floor().long().clamp(max=len(pyr) - 1)
    l1 = (l0 + 1).clamp(max=len(pyr) - 1)
    f = (lod - lod.floor())[:, None, None, None]
    ar = torch.arange(n, device=dev)
    return samples[l0, ar] * (1 - f) + samples[l1, ar] * f


def main():
    out = {"torch": torch.__version__, "gpu": torch.cuda.get_device_name(), "reps": reps, "sizes": []}
    cx, cy, lod = plan()
    for (w, h) in [(1024, 1024), (3840, 2160), (4096, 4096)]:
        g = torch.Generator(device=dev).manual_seed(1)
        u8 = torch.randint(0, 256, (1, 4, h, w), dtype=torch.uint8, device=dev, generator=g)
        f = u8.float() / 255
        r = {"w": w, "h": h, "torch_levels": len(pyramid(f))}
        r["torch_pyramid_float_ms"] = median_ms(lambda: pyramid(f))
        r["torch_pyramid_u8_ms"] = median_ms(lambda: pyramid(u8.float() / 255))
        pyr5 = pyramid(f, 5)
        r["torch_patches_loop_ms"] = median_ms(lambda: patches_loop(pyr5, cx, cy, lod), n=max(5, reps // 5))
        r["torch_patches_grid_sample_ms"] = median_ms(lambda: patches_vectorized(pyr5, cx, cy, lod))
        r["torch_pyramid5_and_grid_sample_ms"] = median_ms(lambda: patches_vectorized(pyramid(f, 5), cx, cy, lod))
        out["sizes"].append(r)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
