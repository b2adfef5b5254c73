"""The programs the seeds run, as text: the foveated grid's allocation plan and AT_LEVEL's pxasm."""
from __future__ import annotations

import math
from decimal import Decimal
from typing import Sequence

from ._seed_args import _int, _real


# ---- plans ----------------------------------------------------------------------------------------

def _grid_plan(w, h, fixation, num_patches, M0, e0, patch, levels, scale, scheme="grid", **extra):
    """The allocation plan of the seeds' foveated grid: M(e) = M0 / (scale * e + e0)."""
    plan = {"image": [w, h], "fixation": [float(fixation[0]), float(fixation[1])],
            "budget": _int("num_patches", num_patches, 1, 65536), "scheme": scheme, "m0": _real("M0", M0),
            "e0": _real("e0", e0), "patch": _int("patch", patch, 1, 256)}
    plan["scale"] = "auto" if isinstance(scale, str) and scale == "auto" else _real("scale", scale)
    if levels is not None:
        plan["levels"] = _int("levels", levels, 1, 16)
    plan.update(extra)
    return plan


def _q16_text(q: int) -> str:
    """The exact decimal of a Q16 value (every one has a finite expansion; pxasm reads it exactly)."""
    return format(Decimal(q) / Decimal(65536), "f")


def _at_level_text(w: int, h: int, q16_uv: Sequence[tuple[int, int]], levels: Sequence[int], patch: int) -> str:
    """pxasm source: PYRAMID, then one SAMPLE per point at its level (step 2^level: one output
    pixel per texel of that level), into an atlas of patch x patch tiles in row order."""
    n = len(q16_uv)
    cols = int(math.ceil(math.sqrt(n)))
    rows = (n + cols - 1) // cols
    out = [".width 64", ".slot image input %dx%d" % (w, h),
           ".slot atlas output %dx%d patches=%dx%dx%d" % (cols * patch, rows * patch, patch, patch, n),
           "PYRAMID image"]
    for k, ((qu, qv), lv) in enumerate(zip(q16_uv, levels)):
        out.append("SAMPLE src=image dst=atlas mode=linear dst_x=%d dst_y=%d w=%d h=%d cu=%s cv=%s du=%d dv=%d lod=%d" %
                   ((k % cols) * patch, (k // cols) * patch, patch, patch, _q16_text(qu), _q16_text(qv),
                    1 << lv, 1 << lv, lv))
    out.append("HALT")
    return "\n".join(out) + "\n"

