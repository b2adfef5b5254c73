"""The guard of every call into a Runner's C runners: Runner.lock held, calls in flight counted."""
import functools


class _InCall:
    """The one guard of every call into a Runner's C runners (Runner methods, pxvm.tokens,
    Stream.push and reset, the seeds' and pyramid's runs): holds Runner.lock and counts the calls
    in flight, so close() made from inside one (an input's __array__, a torch mode reading
    stride(), an __index__ of a dirty rectangle or a fixation) is refused instead of freeing the C
    runner the call still uses. When the outermost call ends, the runner's C runners of other
    batch sizes are trimmed to their bound (never while a call may hold one)."""
    __slots__ = ("runner",)

    def __init__(self, runner):
        self.runner = runner

    def __enter__(self):
        r = self.runner
        r.lock.acquire()
        r._calls += 1
        return r

    def __exit__(self, *exc):
        r = self.runner
        r._calls -= 1
        try:
            if not r._calls and r._grows:
                r._count_grown()
            if not r._calls and r._runners.over():
                r._trim_runners()
        finally:
            r.lock.release()


def _locked(method):
    """The method under the runner's guard (_InCall, Runner.lock): one C runner handle is used by
    one thread at a time (include/pxvm.h), so threads sharing a Runner take turns instead of
    racing, and the runner cannot be closed under a call in flight."""
    @functools.wraps(method)
    def locked(self, *args, **kwargs):
        with _InCall(self):
            return method(self, *args, **kwargs)
    return locked
