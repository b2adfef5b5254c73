"""Draws the pictures of docs/policies.md. Run from the repository root (make
docs-images runs it; PXVM_BIN: where pxrun is, default bin):

  PYTHONPATH=python python3 docs/policy_picture.py PHOTO POLICY OUT.png
      docs/img/policy-dynamic.png: a photo through programs/uniform.json with a dynamic policy, the
      picture put back together from its tokens (so it shows what the tokens hold), each patch
      outlined thin and each merge window (merge x merge patches) thick.
  PYTHONPATH=python python3 docs/policy_picture.py native OUT.png PHOTO...
      docs/img/policy-native.png: programs/foveate273_any.pxi bound to each photo at its own size
      (policy native: a fixed budget of 273 tokens whatever the size), the footprints drawn by
      pxrun --overlay, side by side at one height.
  PYTHONPATH=python python3 docs/policy_picture.py policies PHOTO OUT.png
      docs/img/policies.png: what each policy does with one photo: exact (refused), stretch and fit
      (programs/foveate273.pxi, 451x300), native (programs/foveate273_any.pxi), dynamic
      (programs/uniform.json, dynamic:max=50000), each panel what the program samples, captioned.
Each prints one line per panel (sizes, tokens): the .txt beside the picture."""
import os
import subprocess
import sys
import tempfile

import numpy as np
from PIL import Image, ImageDraw

import pxvm

BIN = os.environ.get("PXVM_BIN", "bin")
HEIGHT = 300  # every panel of a row is scaled to this height
CAPTION = 30  # pixels under a panel for its caption (two lines of Pillow's default font)


def dynamic_tiles(photo, policy, scale):
    """The photo through the uniform plan with `policy` (dynamic), put back together from its
    tokens, patches outlined (merge windows thick); and the Ragged result."""
    with pxvm.Runner(pxvm.Program.from_plan("programs/uniform.json")) as runner:
        r = runner.patches_batch([photo], policy=policy)
    _, gh, gw = (int(v) for v in r.grid[0])
    p = r.tokens.shape[1]
    tiles = r[0].reshape(gh, gw, p, p, 4).transpose(0, 2, 1, 3, 4).reshape(gh * p, gw * p, 4)
    img = Image.fromarray(tiles[:, :, :3]).resize((round(gw * p * scale), round(gh * p * scale)), Image.NEAREST)
    d = ImageDraw.Draw(img)
    merge = int(pxvm.canonical_policy(policy).split("merge=")[1].split(",")[0])
    for k in range(gw + 1):
        x = round(k * p * scale)
        d.line([(x, 0), (x, img.height)], fill=(255, 255, 0) if k % merge == 0 else (90, 90, 90),
               width=2 if k % merge == 0 else 1)
    for k in range(gh + 1):
        y = round(k * p * scale)
        d.line([(0, y), (img.width, y)], fill=(255, 255, 0) if k % merge == 0 else (90, 90, 90),
               width=2 if k % merge == 0 else 1)
    return img, r


def overlay(program, photo, *policy):
    """pxrun's --overlay: the bound input (resized by the policy) with the atlas's token
    footprints drawn; and the number of tokens (the geometry's rows)."""
    with tempfile.TemporaryDirectory() as tmp:
        png, geo = os.path.join(tmp, "o.png"), os.path.join(tmp, "g.npy")
        subprocess.run([os.path.join(BIN, "pxrun"), program, "--in", "image=" + photo, *policy, "--overlay", png,
                        "--geometry", "atlas=" + geo], check=True, capture_output=True)
        return Image.open(png).convert("RGB"), len(np.load(geo))


def row(panels):
    """Panels (image, caption lines) side by side, each scaled to HEIGHT, captions under them."""
    scaled = [(im.resize((round(im.width * HEIGHT / im.height), HEIGHT), Image.LANCZOS), cap) for im, cap in panels]
    gap = 8
    out = Image.new("RGB", (sum(im.width for im, _ in scaled) + gap * (len(scaled) + 1), HEIGHT + CAPTION + 2 * gap),
                    (255, 255, 255))
    d = ImageDraw.Draw(out)
    x = gap
    for im, cap in scaled:
        out.paste(im, (x, gap))
        for k, line in enumerate(cap):
            d.text((x, gap + HEIGHT + 4 + 12 * k), line, fill=(0, 0, 0))
        x += im.width + gap
    return out


def native(out, photos):
    panels = []
    for photo in photos:
        im, n = overlay("programs/foveate273_any.pxi", photo)
        panels.append((im, ["%s %dx%d" % (os.path.basename(photo), im.width, im.height), "native: %d tokens" % n]))
        print("%s: %dx%d, bound at its own size: %d tokens" % (photo, im.width, im.height, n))
    row(panels).save(out)


def policies(photo, out):
    w, h = Image.open(photo).size
    refused = Image.open(photo).convert("RGB").point(lambda v: v // 3)
    d = ImageDraw.Draw(refused)
    d.line([(0, 0), (w, h)], fill=(255, 0, 0), width=4)
    d.line([(0, h), (w, 0)], fill=(255, 0, 0), width=4)
    panels = [(refused, ["exact: refused,", "%dx%d is not 451x300" % (w, h)])]
    print("exact: %s %dx%d is unlinkable to foveate273's 451x300 slot" % (photo, w, h))
    for policy in ("stretch", "fit"):
        im, n = overlay("programs/foveate273.pxi", photo, "--policy", policy)
        panels.append((im, ["%s: %dx%d, aspect %s" % (policy, im.width, im.height,
                                                       "lost" if policy == "stretch" else "kept"),
                            "%d tokens" % n]))
        print("%s: resized into 451x300: %d tokens" % (policy, n))
    im, n = overlay("programs/foveate273_any.pxi", photo)
    panels.append((im, ["native: %dx%d as it is," % (w, h), "%d tokens (fixed budget)" % n]))
    print("native: bound at %dx%d: %d tokens" % (w, h, n))
    policy = "dynamic:max=50000"
    im, r = dynamic_tiles(photo, policy, 1)
    (_, _), (w2, h2) = r.sizes[0].tolist()
    panels.append((im, ["dynamic: %dx%d," % (w2, h2), "%d tokens (grid %dx%d)" % (len(r.tokens), r.grid[0][2],
                                                                                 r.grid[0][1])]))
    print("dynamic (%s): resized to %dx%d: %d tokens" % (pxvm.canonical_policy(policy), w2, h2, len(r.tokens)))
    row(panels).save(out)


def dynamic(photo, policy, out):
    img, r = dynamic_tiles(photo, policy, 2)
    img.save(out)
    _, gh, gw = (int(v) for v in r.grid[0])
    (w, h), (w2, h2) = r.sizes[0].tolist()
    print("%s: %dx%d -> %dx%d (%s), grid (t, h, w) = (1, %d, %d): %d tokens of %dx%d" %
          (photo, w, h, w2, h2, pxvm.canonical_policy(policy), gh, gw, len(r.tokens), r.tokens.shape[1],
           r.tokens.shape[1]))


if __name__ == "__main__":
    if sys.argv[1] == "native":
        native(sys.argv[2], sys.argv[3:])
    elif sys.argv[1] == "policies":
        policies(sys.argv[2], sys.argv[3])
    else:
        dynamic(*sys.argv[1:4])
