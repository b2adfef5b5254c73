"""The package's one cache: values by key, bounded by count and by bytes (a Runner's C runners per
batch size, pxvm.pyramid's runners, pxvm.seeds' runners), and the byte measure of a C runner."""
import collections
import threading
import weakref

# Every cache of this process, for the fork handler (runner._after_fork_in_child).
_live_lrus = weakref.WeakSet()


class _LRU:
    """Values by key, the least recently used first out, bounded by count and by bytes: after
    trim(), at most max_count values whose sizes (the bytes given to put) add up to at most
    max_bytes are kept, except that the most recently used one stays even alone over max_bytes.
    The one cache helper of the package (pxvm.pyramid's runners, a Runner's C runners per batch
    size, pxvm.seeds' runners). A value that goes is handed to `evict` (None:
    dropped, so a Runner closes when its last reference goes, never under a call still using it).
    put() trims at once unless trim_on_put is False (a Runner trims its C runners between calls)."""

    def __init__(self, max_count, max_bytes, evict=None, trim_on_put=True):
        _live_lrus.add(self)
        self.max_count, self.max_bytes = max_count, max_bytes
        self.bytes = 0  # the sizes of the values kept, added up
        self._items = collections.OrderedDict()  # key -> (value, bytes)
        self._evict, self._trim_on_put = evict, trim_on_put
        self._lock = threading.Lock()  # guards the dict only: evict runs outside it

    def get(self, key, default=None):
        with self._lock:
            item = self._items.get(key)
            if item is None:
                return default
            self._items.move_to_end(key)
            return item[0]

    def put(self, key, value, nbytes):
        with self._lock:
            gone = self._items.pop(key, None)
            if gone is not None:
                self.bytes -= gone[1]
            self._items[key] = (value, int(nbytes))
            self.bytes += int(nbytes)
        if gone is not None and gone[0] is not value and self._evict:
            self._evict(key, gone[0])
        if self._trim_on_put:
            self.trim()
        return value

    def over(self):
        """Whether trim() would evict something."""
        return len(self._items) > 1 and (len(self._items) > self.max_count or self.bytes > self.max_bytes)

    def trim(self):
        """Evicts the least recently used values until within the bounds (the most recent one
        stays); returns [(key, value)] of those that went."""
        gone = []
        with self._lock:
            while len(self._items) > 1 and (len(self._items) > self.max_count or self.bytes > self.max_bytes):
                key, (value, nbytes) = self._items.popitem(last=False)
                self.bytes -= nbytes
                gone.append((key, value))
        if self._evict:
            for key, value in gone:
                self._evict(key, value)
        return gone

    def pop(self, key):
        with self._lock:
            item = self._items.pop(key, None)
            if item is not None:
                self.bytes -= item[1]
        return None if item is None else item[0]

    def clear(self):
        with self._lock:
            gone = list(self._items.items())
            self._items.clear()
            self.bytes = 0
        if self._evict:
            for key, (value, _) in gone:
                self._evict(key, value)

    def items(self):
        with self._lock:
            return [(k, v) for k, (v, _) in self._items.items()]

    def grow(self, key, nbytes):
        """The value of key holds nbytes now, if more than counted (an any-size runner's storage)."""
        with self._lock:
            item = self._items.get(key)
            if item is not None and nbytes > item[1]:
                self._items[key] = (item[0], int(nbytes))
                self.bytes += int(nbytes) - item[1]

    def __contains__(self, key):
        return key in self._items

    def __getitem__(self, key):
        return self._items[key][0]

    def __iter__(self):
        return iter(list(self._items))

    def keys(self):
        return list(self._items)

    def __len__(self):
        return len(self._items)


def _slot_bytes(program, batch=1, sizes=None):
    """What a C runner of `batch` items of program holds, estimated as its slots' storage: each
    slot's mip chain in RGBA8 at its (reference) size, or at sizes[slot index] (an any-size input's
    storage, which grows to the largest image bound), times the items (the caches' byte measure)."""
    total = 0
    for s in program.slots:
        w, h = sizes.get(s.index, (s.w, s.h)) if sizes else (s.w, s.h)
        for _ in range(max(1, s.levels)):
            total += w * h * 4
            w, h = max(1, w >> 1), max(1, h >> 1)
    return total * batch

