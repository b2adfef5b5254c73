#!/usr/bin/env python3
"""gen_log2_table.py - prints PX_LOG2_T, the table of px_log2_q8 (isa/px_sem.h), exactly.

T[m] = ceil(2^(32 + m/256)) for m = 0..255: the smallest integer t with t^256 >= 2^(8192 + m).
Found with integers only (no float): a bisection on t, each step comparing big-integer powers.
`--check` verifies the table in px_sem.h against this definition instead of printing it.
"""
import re
import sys


def ceil_root(m):
    """The smallest t with t**256 >= 2**(8192 + m)."""
    target = 1 << (8192 + m)
    lo, hi = 1 << 32, 1 << 33  # 2^32 <= T[m] <= 2^33
    while lo < hi:
        mid = (lo + hi) // 2
        if mid ** 256 >= target:
            hi = mid
        else:
            lo = mid + 1
    return lo


def table():
    return [ceil_root(m) for m in range(256)]


def c_text(t):
    rows = []
    for i in range(0, 256, 4):
        rows.append("        " + ", ".join("0x%09xull" % v for v in t[i:i + 4]) + ",")
    return "\n".join(rows)


def main():
    t = table()
    if len(sys.argv) > 1 and sys.argv[1] == "--check":
        text = open(sys.argv[2] if len(sys.argv) > 2 else "isa/px_sem.h").read()
        body = text[text.index("PX_LOG2_T[256] = {"):]
        body = body[:body.index("};")]
        got = [int(v, 16) for v in re.findall(r"0x([0-9a-f]+)ull", body)]
        if got != t:
            sys.exit("px_sem.h's PX_LOG2_T differs from its definition")
        print("PX_LOG2_T: 256 entries, each the ceiling of 2^(32 + m/256)")
        return
    print(c_text(t))


if __name__ == "__main__":
    main()
