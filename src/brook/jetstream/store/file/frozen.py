"""`FrozenLog`: a file store's log exactly as it was at one moment, readable from any thread.

A stream snapshot (jetstream/snapshot/) must be one point in time while publishes,
removals and purges go on. The log makes that cheap (storage-format.md 1): every change is
a record appended to a segment, so the log's prefix that existed at the moment `T` replays
to the store's state at `T`. Freezing records, for every segment, its length at `T` and opens
a descriptor of its own on the file (taken on the event loop, between two writes, so no
record is half-written), and reads only that prefix later. Two things can still touch those
bytes afterwards, and both are covered:

* whole-segment deletion unlinks a file: the frozen descriptor keeps its bytes readable;
* erase overwrites a record in place (6.3): the store hands the record's original bytes
  to every frozen log (`preserve`) *before* it overwrites them, and `read` puts them back
  over whatever it read. A read that raced the overwrite is patched too, because the
  original was preserved before the overwrite began.

Nothing else writes below a segment's length (torn tails are cut only at open).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path


class FrozenLog:
    """Segment prefixes and `meta.json` as they were when the store froze them."""

    def __init__(
        self,
        meta: bytes,
        segments: list[tuple[str, Path, int]],
        on_close: Callable[[FrozenLog], None],
    ) -> None:
        self.meta = meta
        self._sizes: dict[str, int] = {}
        self._fds: dict[str, int] = {}
        self._preserved: dict[str, list[tuple[int, bytes]]] = {}
        self._lock = threading.Lock()  # `preserve` (event loop) against `read` (a worker)
        self._on_close: Callable[[FrozenLog], None] | None = on_close
        try:
            for filename, path, size in segments:
                self._fds[filename] = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
                self._sizes[filename] = size
        except BaseException:
            self.close()
            raise

    @property
    def segments(self) -> dict[str, int]:
        """Segment file name -> its frozen length, in log order."""
        return dict(self._sizes)

    def read(self, filename: str, offset: int, n: int) -> bytes:
        """Up to `n` bytes of the frozen segment at `offset` (never past its frozen end)."""
        n = max(0, min(n, self._sizes[filename] - offset))
        data = os.pread(self._fds[filename], n, offset)
        if len(data) != n:
            raise OSError(f"segment {filename} is shorter than when it was frozen")
        with self._lock:
            patches = list(self._preserved.get(filename, ()))
        if not patches:
            return data
        buf = bytearray(data)
        end = offset + n
        for at, original in patches:
            lo, hi = max(at, offset), min(at + len(original), end)
            if lo < hi:
                buf[lo - offset : hi - offset] = original[lo - at : hi - at]
        return bytes(buf)

    def preserve(self, filename: str, offset: int, original: bytes) -> None:
        """The store is about to overwrite `original` at `offset` (erase): keep it."""
        if offset < self._sizes.get(filename, 0):
            with self._lock:
                self._preserved.setdefault(filename, []).append((offset, original))

    def close(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()
        if self._on_close is not None:
            self._on_close(self)
            self._on_close = None
