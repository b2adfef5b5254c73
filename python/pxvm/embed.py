"""pxvm.embed: an exact int8 patch embedding (the EMBED opcode, isa/SPEC.md "EMBED") from Python.

    import pxvm, pxvm.embed
    q = pxvm.embed.quantize(conv.weight.reshape(768, -1), conv.bias, input_scale=1.0)
    prog = pxvm.embed.attach(pxvm.Program.load(pxvm.programs.path("foveate273")), q, mode="bf16")
    runner = pxvm.Runner(prog, executor="cpu")
    runner.run(image)
    emb = pxvm.embed.read(runner, q, mode="bf16")        # (273, 768) torch.bfloat16, CPU == GPU bytes

What is where:
- quantize: a float weight [D, K] (a ViT Conv2d weight [D, C, p, p] reshaped: K in (c, y, x)
  order, the order EMBED reads a patch in) and bias [D] to int8 weights, int32 bias and TFLite's
  fixed-point multiplier and shift per channel, deterministically (float64 NumPy, IEEE
  round-half-even; the same bytes on every machine). Per-channel symmetric: scale_w[d] =
  max|W[d]| / 127 (1 for an all-zero row), w_q = rint(W / scale_w) in -127..127, bias_q =
  rint(b / (input_scale * scale_w)); the accumulator's real scale is input_scale * scale_w[d],
  written as multiplier * 2^(shift - 31) by quantize_multiplier (TFLite's QuantizeMultiplier).
  For mode "int8" the multiplier is of input_scale * scale_w / output_scale instead.
- pack: int8 weights, int32 bias, multipliers and shifts as the RGBA8 texels of EMBED's two data
  slots (weights ceil(K/4) x D, 4 int8 a texel; params D x 3 little-endian int32).
- attach: a program with a patch atlas plus EMBED of that atlas (pxasm text: the program's own
  disassembly, its data placed below the code). Programs with their own embedded data (.pixels
  or .rows blocks) are refused: their pixel positions would move.
- read / decode: the output slot as int32 or int8 NumPy arrays, or bf16 as a torch tensor (uint16
  bits without torch).
- tokens: a runner's patches (T, ph, pw, 4) as the uint8 [T, K] rows EMBED multiplies.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from .program import Program

MODES = {"int32": 0, "int8": 1, "bf16": 2}
TERM_MAX = 255 * 128  # the largest |(token - zero_point) * weight| (SPEC V-EMBED-9)


def quantize_multiplier(real: float) -> tuple[int, int]:
    """(multiplier, shift) with real ~= multiplier * 2^(shift - 31), multiplier in [2^30, 2^31) (0
    for real 0): TFLite's QuantizeMultiplier (tensorflow/lite/kernels/internal/quantization_util.cc),
    exact in float64 (frexp, then q * 2^31 rounded half away from zero, as TfLiteRound)."""
    real = float(real)
    if not math.isfinite(real) or real < 0:
        raise ValueError(f"a scale must be finite and >= 0, not {real!r}")
    if real == 0.0:
        return 0, 0
    q, e = math.frexp(real)
    m = math.floor(q * (1 << 31) + 0.5)  # q * 2^31 is exact; + 0.5 rounds half away from zero (q > 0)
    if m == 1 << 31:
        m //= 2
        e += 1
    if e < -31:  # TFLite: too small a scale is 0
        return 0, 0
    if e > 30:
        raise ValueError(f"scale {real!r} is too large for EMBED (shift {e} > 30)")
    return int(m), int(e)


@dataclass
class Quantized:
    """What EMBED needs of a layer: int8 weights [D, K], int32 bias, multiplier and shift [D], and
    the float scales they stand for (scale[d] = multiplier[d] * 2^(shift[d] - 31), ~ the real one)."""
    weight: np.ndarray      # int8 [D, K]
    bias: np.ndarray        # int32 [D]
    multiplier: np.ndarray  # int32 [D]
    shift: np.ndarray       # int32 [D]
    weight_scale: np.ndarray  # float64 [D]
    out_zero: int = 0

    @property
    def d(self) -> int:
        return int(self.weight.shape[0])

    @property
    def k(self) -> int:
        return int(self.weight.shape[1])


def _numpy(a: Any) -> np.ndarray:
    if hasattr(a, "detach"):  # a torch tensor, on any device
        a = a.detach().to("cpu")
        if str(a.dtype) == "torch.bfloat16":
            a = a.float()
        a = a.numpy()
    return np.asarray(a)


def quantize(weight: Any, bias: Any = None, input_scale: float = 1.0, mode: str = "bf16", output_scale: float = 1.0,
             output_zero: int = 0) -> Quantized:
    """Per-channel symmetric int8 quantization of a float weight [D, K] (and bias [D]) for EMBED of
    uint8 tokens whose real value is input_scale * (token - zero_point). mode "bf16" or "int32":
    multiplier/shift of the accumulator's scale (EMBED's bf16 output is then the real embedding);
    "int8": of input_scale * scale_w / output_scale, with output_zero."""
    w = _numpy(weight).astype(np.float64)
    if w.ndim != 2:
        raise ValueError(f"weight must be [D, K], not of shape {w.shape}")
    if mode not in MODES:
        raise ValueError(f"mode must be one of {sorted(MODES)}, not {mode!r}")
    d = w.shape[0]
    amax = np.abs(w).max(axis=1)
    scale = np.where(amax > 0, amax / 127.0, 1.0)
    wq = np.clip(np.rint(w / scale[:, None]), -127, 127).astype(np.int8)
    acc_scale = float(input_scale) * scale
    b = np.zeros(d) if bias is None else _numpy(bias).astype(np.float64).reshape(d)
    bq = np.rint(b / acc_scale)
    limit = (1 << 31) - 1 - w.shape[1] * TERM_MAX
    if np.any(np.abs(bq) > limit):
        raise ValueError(f"a bias is too large for int32 accumulators: |bias_q| must be <= {limit} (SPEC V-EMBED-9)")
    real = acc_scale / float(output_scale) if mode == "int8" else acc_scale
    ms = [quantize_multiplier(r) for r in real]
    return Quantized(wq, bq.astype(np.int32), np.array([m for m, _ in ms], np.int32), np.array([s for _, s in ms], np.int32),
                     scale, int(output_zero) if mode == "int8" else 0)


def from_int8(weight: Any, bias: Any, multiplier: Any = None, shift: Any = None, out_zero: int = 0) -> Quantized:
    """A layer already in int8 (e.g. a TFLite model's): its weights [D, K], int32 bias and,
    for modes int8 and bf16, its per-channel multipliers and shifts, taken as they are."""
    w = _numpy(weight)
    if w.dtype != np.int8 or w.ndim != 2:
        raise TypeError(f"weight must be an int8 [D, K] array, not {w.dtype} {w.shape}")
    d = w.shape[0]
    z = np.zeros(d, np.int32)
    m = z if multiplier is None else _numpy(multiplier).astype(np.int64).reshape(d)
    s = z if shift is None else _numpy(shift).astype(np.int64).reshape(d)
    return Quantized(w, _numpy(bias).astype(np.int64).reshape(d).astype(np.int32), m.astype(np.int32), s.astype(np.int32),
                     np.ones(d), int(out_zero))


def pack(q: Quantized) -> tuple[np.ndarray, np.ndarray]:
    """The two data slots' texels: weights (D, ceil(K/4), 4) uint8 (row d: its K int8 bytes, then
    zeros) and params (3, D, 4) uint8 (rows bias, multiplier, shift as little-endian int32)."""
    d, k = q.weight.shape
    wt = (k + 3) // 4
    w = np.zeros((d, 4 * wt), np.uint8)
    w[:, :k] = q.weight.view(np.uint8)
    p = np.stack([q.bias, q.multiplier, q.shift]).astype("<i4")
    return w.reshape(d, wt, 4), p.view(np.uint8).reshape(3, d, 4)


def _pixels_block(x: int, y: int, img: np.ndarray, width: int) -> str:
    """A .pixels block writing img (h, w, 4) at (x, y) of a program image `width` wide (stream
    order: the pixels between its rows are written 0)."""
    h, w, _ = img.shape
    rows = np.zeros((h, width, 4), np.uint8)
    rows[:, x:x + w] = img
    flat = rows.reshape(-1, 4)[: (h - 1) * width + w]  # up to the last pixel of its last row
    words = flat.view(">u4").reshape(-1)  # RRGGBBAA as the assembler reads it
    lines = [" ".join(f"{v:08x}" for v in words[i:i + 64]) for i in range(0, len(words), 64)]
    return f".pixels {x} {y}\n" + "\n".join(lines) + "\n.end\n"


def attach(program: Any, q: Quantized, slot: str = "atlas", mode: str = "bf16", zero_point: int = 0, channels: int = 3,
           name: str = "emb", atlas: str = "keep") -> Any:
    """`program` (a pxvm.Program or pxasm text) with EMBED of its patch atlas `slot` by q added
    before its final HALT: slots `name` (the output, one row per token), `name`_w and `name`_p
    (the data). atlas="scratch" makes an output atlas a scratch slot (read by EMBED only, no
    longer an output: what Runner(..., fuse_embed=True) needs to fuse the sampler into EMBED);
    "keep" (the default) leaves it as it is. Returns the new pxvm.Program (validated at load,
    SPEC V-EMBED-*)."""

    if mode not in MODES:
        raise ValueError(f"mode must be one of {sorted(MODES)}, not {mode!r}")
    if atlas not in ("keep", "scratch"):
        raise ValueError(f"atlas must be 'keep' or 'scratch', not {atlas!r}")
    text = program if isinstance(program, str) else program.disassemble()
    lines = [ln for ln in text.splitlines()]
    if any(ln.lstrip().startswith((".pixels", ".rows", ".data", ".table")) for ln in lines):
        raise ValueError("attach takes programs without embedded data (.pixels, .rows, .data, .table blocks)")
    old_w = old_h = 0
    body = []
    found = None
    for ln in lines:
        t = ln.split(";")[0].split()
        if t and t[0] == ".width":
            old_w = int(t[1])
            continue
        if t and t[0] == ".height":
            old_h = int(t[1])
            continue
        if t and t[0] == ".slot" and t[1] == slot:
            found = t
            if atlas == "scratch" and t[2] == "output":  # the role is the third word of its line
                ln = ln.replace(f".slot {slot} output", f".slot {slot} scratch", 1)
        body.append(ln)
    if found is None or not any(a.startswith("patches=") for a in found):
        raise ValueError(f"the program has no patch atlas named {slot!r}")
    pw, ph, count = (int(v) for v in next(a for a in found if a.startswith("patches="))[8:].split("x"))
    if q.k != channels * pw * ph:
        raise ValueError(f"the weights have K = {q.k}; {channels} channels of {pw}x{ph} patches need K = {channels * pw * ph}")
    d, k = q.weight.shape
    wt = (k + 3) // 4
    nbytes = {0: 4, 1: 1, 2: 2}[MODES[mode]]
    width = max(old_w, d, wt, 16)
    # the old stream (header, slots, code), the new slots' descriptors and EMBED, then a spare row
    y0 = -(-(old_w * old_h + 3 * 8 + 3) // width) + 1
    wimg, pimg = pack(q)
    rows = 1 if mode == "int32" else 3
    out = [f".width {width}", f".height {y0 + d + rows}"]
    halt = max(i for i, ln in enumerate(body) if ln.split(";")[0].split()[:1] == ["HALT"])
    for i, ln in enumerate(body):
        if i == halt:
            out.append(f"EMBED src={slot} dst={name} mode={MODES[mode]} weights={name}_w params={name}_p "
                       f"channels={channels} zero_point={int(zero_point)} d={d} out_zero={q.out_zero & 255 if mode == 'int8' else 0}")
        out.append(ln)
        if ln.split(";")[0].split()[:1] == [".slot"] and (i + 1 == len(body) or
                                                        body[i + 1].split(";")[0].split()[:1] != [".slot"]):
            out.append(f".slot {name} output {(d * nbytes + 3) // 4}x{count}")
            out.append(f".slot {name}_w data {wt}x{d} at=(0,{y0})")
            out.append(f".slot {name}_p data {d}x{rows} at=(0,{y0 + d})")
    out.append(_pixels_block(0, y0, wimg, width).rstrip("\n"))
    out.append(_pixels_block(0, y0 + d, pimg[:rows], width).rstrip("\n"))
    return Program.assemble("\n".join(out) + "\n", name="embed")


def atlas_patches(atlas: Any, slot: Any) -> np.ndarray:
    """An atlas's level 0 (H, W, 4) (Runner.run's output) as its patches (count, ph, pw, 4): patch t
    the tile (t mod cols, t div cols), cols = W div pw (SPEC section 2). `slot`: its pxvm.Slot."""
    a = _numpy(atlas)
    if a.ndim == 4:
        a = a[0]
    pw, ph, n = slot.patch_w, slot.patch_h, slot.patch_count
    cols, rows = a.shape[1] // pw, a.shape[0] // ph
    tiles = a[:rows * ph, :cols * pw].reshape(rows, ph, cols, pw, 4).transpose(0, 2, 1, 3, 4)
    return tiles.reshape(rows * cols, ph, pw, 4)[:n]


def tokens(patches: Any, channels: int = 3) -> np.ndarray:
    """Patches (T, ph, pw, 4) uint8 (Runner.patches, Runner.read of an atlas) as the uint8 [T, K]
    rows EMBED multiplies: channels 0..C-1, each patch's rows, each row's pixels ((c, y, x))."""
    p = _numpy(patches)
    t = p.shape[0]
    return np.ascontiguousarray(p[..., :channels].transpose(0, 3, 1, 2)).reshape(t, -1)


def decode(rgba: Any, d: int, mode: str = "bf16") -> Any:
    """EMBED's output slot (T, W, 4) uint8 (or (1, T, W, 4)) as int32 / int8 NumPy [T, D], or bf16
    as a torch.bfloat16 tensor [T, D] (NumPy uint16 bits when torch is not installed)."""
    a = np.ascontiguousarray(_numpy(rgba))
    if a.ndim == 4:
        a = a[0]
    rows = a.reshape(a.shape[0], -1)
    if mode == "int32":
        return rows.view("<i4")[:, :d].copy()
    if mode == "int8":
        return rows.view(np.int8)[:, :d].copy()
    bits = rows.view("<u2")[:, :d].copy()
    try:
        import torch
    except ImportError:
        return bits
    return torch.from_numpy(bits.astype(np.int16)).view(torch.bfloat16)


def read(runner: Any, q: Quantized, mode: str = "bf16", name: str = "emb") -> Any:
    """The embeddings of the last run of `runner` (a program made by attach): decode of its slot."""
    return decode(runner.read(name), q.d, mode)
