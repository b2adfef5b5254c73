"""A progress line: tqdm where installed, else a plain line on stderr (pxvm.data, pxvm.shards)."""
from __future__ import annotations


class _StderrProgress:
    """The plain progress line used where tqdm is not installed: "desc: i/total" on stderr,
    rewritten in place (at most 10 times a second), and a newline at the end."""

    def __init__(self, iterable, total, desc):
        self.iterable, self.total, self.desc = iterable, total, desc

    def __iter__(self):
        import sys
        import time
        last, i = 0.0, 0
        try:
            for i, x in enumerate(self.iterable, 1):
                now = time.monotonic()
                if now - last >= 0.1:
                    last = now
                    sys.stderr.write("\r%s: %d%s" % (self.desc, i, "/%d" % self.total if self.total is not None else ""))
                    sys.stderr.flush()
                yield x
        finally:
            sys.stderr.write("\r%s: %d%s done\n" % (self.desc, i, "/%d" % self.total if self.total is not None else ""))
            sys.stderr.flush()


def progress_bar(iterable, total: int | None = None, desc: str = "pxvm", enabled: bool = True):
    """iterable with a progress bar when enabled: tqdm's where tqdm is installed, else a plain line
    on stderr; never required (enabled=False: the iterable as it is). total: len(iterable) when
    it has one."""
    if not enabled:
        return iterable
    if total is None and hasattr(iterable, "__len__"):
        total = len(iterable)
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return _StderrProgress(iterable, total, desc)
    return tqdm(iterable, total=total, desc=desc)
