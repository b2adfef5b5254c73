"""From pixels to logits: a real photo -> a pxvm program (foveated or uniform tokens) -> EMBED, the
patch embedding in exact int8 arithmetic inside the VM -> a small ViT-like model in PyTorch (a few
transformer layers, weights from a fixed seed) -> logits. The embedding runs on the CPU executor
and, where there is a GPU, on the CUDA one too, and the two are compared byte for byte.

    python3 examples/pixels_to_logits.py [photo] [--plan foveate273|uniform] [--layers 4]

(from the repository after `make`; PXVM_LIB=build/libpxvm.so.1 if the package is not installed).
"""
import argparse
import hashlib
import os
import sys

import numpy as np
import torch

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))
import pxvm  # noqa: E402
import pxvm.embed as E  # noqa: E402


class TinyViT(torch.nn.Module):
    """A ViT after its patch embedding: class token, positions, pre-norm transformer layers, head."""

    def __init__(self, dim, tokens, layers, heads, classes):
        super().__init__()
        self.cls = torch.nn.Parameter(torch.randn(1, 1, dim) * 0.02)
        self.pos = torch.nn.Parameter(torch.randn(1, tokens + 1, dim) * 0.02)
        layer = torch.nn.TransformerEncoderLayer(dim, heads, 4 * dim, dropout=0.0, activation="gelu", batch_first=True,
                                                 norm_first=True)
        self.blocks = torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.norm = torch.nn.LayerNorm(dim)
        self.head = torch.nn.Linear(dim, classes)

    def forward(self, emb):  # emb: (B, T, dim) float
        x = torch.cat([self.cls.expand(emb.shape[0], -1, -1), emb], 1) + self.pos
        return self.head(self.norm(self.blocks(x))[:, 0])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("photo", nargs="?", default=os.path.join(ROOT, "programs", "data", "chelsea.png"))
    ap.add_argument("--plan", default="foveate273", help="a shipped program with a 16x16 patch atlas 'atlas'")
    ap.add_argument("--dim", type=int, default=192)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--executors", default="auto", help="'cpu', 'cuda' or 'auto' (cpu, and cuda when present)")
    args = ap.parse_args()
    torch.manual_seed(0)

    # the model's first layer: a ViT patch embedding, Conv2d(3, dim, 16, stride 16), with the
    # pixel normalization (x / 255 - 0.5) / 0.5 folded into it, so that EMBED takes raw pixels
    conv = torch.nn.Conv2d(3, args.dim, 16, 16)
    w = conv.weight.detach().double().reshape(args.dim, -1) / 0.5          # over x / 255
    b = conv.bias.detach().double() - (conv.weight.detach().double() * (0.5 / 0.5)).sum((1, 2, 3))
    q = E.quantize(w, b, input_scale=1 / 255, mode="bf16")                # int8 weights, TFLite scales

    prog = pxvm.Program.load(pxvm.programs.path(args.plan))
    atlas = next(s for s in prog.outputs if s.name == "atlas")
    program = E.attach(prog, q, mode="bf16")
    image = pxvm.load_image(args.photo)
    print(f"{os.path.basename(args.photo)} {image.shape[1]}x{image.shape[0]} -> {args.plan}: {atlas.patch_count} tokens "
          f"of 16x16x3 -> EMBED int8 [{args.dim}, 768] -> bf16")

    executors = ["cpu"]
    if args.executors in ("cuda", "auto"):
        try:
            pxvm.Runner(program, executor="cuda")
            executors = ["cpu", "cuda"] if args.executors == "auto" else ["cuda"]
        except pxvm.Error as e:
            if args.executors == "cuda":
                raise
            print(f"cuda: not here ({str(e).splitlines()[0][:90]})")
    elif args.executors != "cpu":
        ap.error("--executors is cpu, cuda or auto")

    model = TinyViT(args.dim, atlas.patch_count, args.layers, 3, 1000).eval()
    results = {}
    for ex in executors:
        runner = pxvm.Runner(program, executor=ex)
        out = runner.run(image, policy="stretch")
        emb = E.decode(out["emb"], q.d, "bf16")  # (T, dim) torch.bfloat16
        with torch.no_grad():
            logits = model(emb.float().unsqueeze(0))
        digest = hashlib.sha256(emb.view(torch.int16).numpy().tobytes()).hexdigest()[:16]
        results[ex] = (emb, logits)
        top = torch.topk(logits[0], 3)
        print(f"{ex:4}: embeddings {tuple(emb.shape)} bf16 sha256 {digest}; logits top-3 classes "
              f"{top.indices.tolist()} ({', '.join(f'{v:.3f}' for v in top.values.tolist())})")
        # what the float model computes from the same tokens: EMBED is its int8 approximation
        tok = torch.from_numpy(E.tokens(E.atlas_patches(out["atlas"], atlas))).double()
        ref = tok / 255 @ w.T + b
        err = (emb.double() - ref).abs().max().item()
        print(f"      float patch embedding of the same tokens: max |difference| {err:.4f} (int8 weights, bf16 output)")
    if len(results) == 2:
        same = torch.equal(results["cpu"][0].view(torch.int16), results["cuda"][0].view(torch.int16))
        print(f"cpu vs cuda: embeddings {'identical, byte for byte' if same else 'DIFFER'}")
        if not same:
            sys.exit(1)


if __name__ == "__main__":
    main()
