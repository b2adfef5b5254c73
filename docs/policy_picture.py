"""Draws docs/img/policy-dynamic.png: a photo through programs/uniform.json with a dynamic policy,
the picture put back together from its tokens (so it shows what the tokens hold), each patch
outlined thin and each merge window (merge x merge patches) thick. Run from the repository root
(make docs-images runs it):
  PYTHONPATH=python python3 docs/policy_picture.py PHOTO POLICY OUT.png"""
import sys

import numpy as np
from PIL import Image, ImageDraw

import pxvm

photo, policy, out = sys.argv[1:4]
with pxvm.Runner(pxvm.Program.from_plan("programs/uniform.json")) as runner:
    r = runner.patches_batch([photo], policy=policy)
_, gh, gw = (int(v) for v in r.grid[0])
p = r.tokens.shape[1]
tiles = r[0].reshape(gh, gw, p, p, 4).transpose(0, 2, 1, 3, 4).reshape(gh * p, gw * p, 4)
scale = 2
img = Image.fromarray(tiles[:, :, :3]).resize((gw * p * scale, gh * p * scale), Image.NEAREST)
d = ImageDraw.Draw(img)
merge = int(pxvm.canonical_policy(policy).split("merge=")[1].split(",")[0])
for k in range(gw + 1):
    d.line([(k * p * scale, 0), (k * p * scale, gh * p * scale)], fill=(255, 255, 0) if k % merge == 0 else (90, 90, 90),
           width=2 if k % merge == 0 else 1)
for k in range(gh + 1):
    d.line([(0, k * p * scale), (gw * p * scale, k * p * scale)], fill=(255, 255, 0) if k % merge == 0 else (90, 90, 90),
           width=2 if k % merge == 0 else 1)
img.save(out)
(w, h), (w2, h2) = r.sizes[0].tolist()
print("%s: %dx%d -> %dx%d (%s), grid (t, h, w) = (1, %d, %d): %d tokens of %dx%d" %
      (photo, w, h, w2, h2, pxvm.canonical_policy(policy), gh, gw, len(r.tokens), p, p))
