"""Sealed segments' packed index columns kept in a file instead of memory (ADR 0061).

Packed (ADR 0054), a sealed segment's columns still cost 1.5 to 3.5 bytes a message, most of
what a large stream's index held; nats-server keeps nothing per message of a block it has
not loaded. Once a store is open, each packed segment's bytes are written here and dropped
from memory (`Packed.spill`); an unpack reads them back (one pread of a few hundred KB for
a segment of 131072 slots, from the page cache while the system has room for it).

The file is a cache of what the index holds, never part of the store: it is created
unlinked in the stream's directory (`O_TMPFILE`, or a name removed at once), so it holds
disk space only while the store is open and leaves nothing after a crash, and it is never
synced. Regions are only appended; a region freed (its segment unpacked or deleted) has
its blocks punched out, later if a snapshot being written may still read it (`pin`).
"""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile
import threading
from pathlib import Path

from brook.jetstream.store.file.segment import punch_hole


class ColdFile:
    """Regions of packed columns (`put`, `get`, `free`) in an unlinked file."""

    __slots__ = ("_file", "_garbage", "_lock", "_pins", "end", "held")

    def __init__(self, directory: Path) -> None:
        # Open as long as the store is: closed by `close`.
        self._file = tempfile.TemporaryFile(dir=directory, prefix="index-cold-")  # noqa: SIM115
        self.end = 0  # where the next region goes
        self.held = 0  # bytes of regions not freed (monitoring)
        # Frees wait while a snapshot capture may read their regions (`pin`).
        self._lock = threading.Lock()
        self._pins = 0
        self._garbage: list[tuple[int, int]] = []

    def put(self, data: bytes) -> int:
        """Write `data` as a new region; its offset. Raises OSError (then nothing is kept)."""
        at = self.end
        fd = self._file.fileno()
        view = memoryview(data)
        done = 0
        while done < len(data):
            done += os.pwrite(fd, view[done:], at + done)
        self.end += len(data)
        self.held += len(data)
        return at

    def get(self, at: int, size: int) -> bytes:
        """The region of `size` bytes at `at` (any thread)."""
        data = os.pread(self._file.fileno(), size, at)
        if len(data) != size:
            raise OSError(errno.EIO, f"index cold file: {len(data)} of {size} bytes at {at}")
        return data

    def free(self, at: int, size: int) -> None:
        """The region at `at` is no longer needed: its blocks go back to the filesystem
        now, or once no snapshot capture is pinned (best effort: where the filesystem
        cannot punch holes, the file keeps them until the store closes)."""
        self.held -= size
        with self._lock:
            self._garbage.append((at, size))
        self._collect()

    def pin(self) -> None:
        """A snapshot capture may read regions until `unpin`: frees wait (any thread)."""
        with self._lock:
            self._pins += 1

    def unpin(self) -> None:
        with self._lock:
            self._pins -= 1
        self._collect()

    def _collect(self) -> None:
        """Punch out the freed regions, unless a capture is pinned."""
        with self._lock:
            if self._pins or not self._garbage:
                return
            garbage, self._garbage = self._garbage, []
        for start, length in garbage:
            with contextlib.suppress(OSError):
                punch_hole(self._file.fileno(), start, length)

    def close(self) -> None:
        self._file.close()
