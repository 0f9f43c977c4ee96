"""One segment file: its descriptor, positional I/O, and the in-memory columns indexing it.

A segment holds messages with consecutive sequences `base .. base + count - 1` (slots of
removed messages stay, marked DEAD), so a sequence maps to its slot by subtraction and the
per-message cost is four array entries (20 bytes) instead of a Python object. Only the record
location, length, timestamp and subject id are kept: payloads are read back with pread().

The columns hold `count` slots and, while the segment is written to, spare room after them
(zeros, never read): an append writes its slot's four entries by index and grows the
columns a chunk at a time (`_grow`), since four `array.append` calls cost compiled code
four Python method calls, each checking and storing its value twice (ADR 0069). Whatever
reads the columns stops at `count`; `trim` gives the spare room back (a sealed segment,
one packed or saved in the index snapshot).

All writes are positional (`os.pwrite`) at an offset the segment tracks itself: no shared
file position, so the sync thread can fsync while the event loop writes, and a write that
failed half-way is simply overwritten by the next one. O_APPEND is deliberately not used:
on Linux it makes pwrite() ignore the offset, which erase (an in-place overwrite) needs.
Governed by docs/storage-format.md sections 2 and 4.

The store's appends are buffered (`buffer`, ADR 0051): their bytes wait in `pending` and
reach the file in one pwrite() when the next sync starts (`flush`, from whichever thread
syncs), when the buffer holds `write_buffer_bytes`, or before anything reads the file
other than `read`, which serves the pending bytes from memory. One write per group commit
instead of one per message: a pwrite() costs about 1.8 us here, a buffered append 0.2 us.
So that a buffered write can never fail for lack of space after its message was accepted,
`buffer` first reserves the disk blocks it goes to (fallocate with FALLOC_FL_KEEP_SIZE,
which allocates without changing the file's size), `preallocate_bytes` ahead at a time;
where the filesystem cannot (no fallocate), the segment writes through, as before.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import os
import threading
from array import array
from collections.abc import Callable
from pathlib import Path
from typing import Final, SupportsIndex, cast

from brook import limits
from brook.jetstream.store.file.packing import Packed

DEAD: Final = 0xFFFFFFFF  # `offs` sentinel: the slot's message is removed (or was never kept)
HDR_BIT: Final = 0x80000000  # set in `lens` when the message has a (non-empty) header
LEN_MASK: Final = 0x7FFFFFFF
MAX_SEGMENT_BYTES: Final = 0xFFFFFFFF - 1  # offsets are u32 columns; DEAD is reserved
NO_SLOTS_MAX: Final = 1 << 48  # a segment no store made active (`Segment.activate`)
# Spare slots the columns grow by when full (`Segment._grow`): as many as they hold, at
# least the first and at most the second: at most 20 KiB spare per written segment.
GROW_MIN: Final = 16
GROW_MAX: Final = 1024
SUFFIX: Final = ".seg"


_KEEP_SIZE: Final = 0x01  # FALLOC_FL_KEEP_SIZE (linux/falloc.h)
_PUNCH_HOLE: Final = 0x02  # FALLOC_FL_PUNCH_HOLE (with KEEP_SIZE, as Linux requires)


def _load_fallocate() -> Callable[[int, int, int, int], int] | None:
    """libc's fallocate(2), or None where there is none (not Linux): Python's own
    `os.posix_fallocate` would change the file's size, which recovery reads as its end."""
    try:
        func = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True).fallocate
    except (OSError, AttributeError):
        return None
    func.argtypes = (ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64)
    func.restype = ctypes.c_int
    return cast(Callable[[int, int, int, int], int], func)


_fallocate = _load_fallocate()


def reserve(fd: int, offset: int, length: int) -> None:
    """Allocate the disk blocks of `offset .. offset + length` without changing the file's
    size; raises OSError (ENOSPC: the disk is full; EOPNOTSUPP: the filesystem cannot)."""
    _allocate(fd, _KEEP_SIZE, offset, length)


def punch_hole(fd: int, offset: int, length: int) -> None:
    """Give the disk blocks of `offset .. offset + length` back to the filesystem (they
    read as zeros) without changing the file's size; raises OSError where it cannot."""
    _allocate(fd, _KEEP_SIZE | _PUNCH_HOLE, offset, length)


def _allocate(fd: int, mode: int, offset: int, length: int) -> None:
    if _fallocate is None:
        raise OSError(errno.EOPNOTSUPP, "fallocate is not available")
    if _fallocate(fd, mode, offset, length) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))


def segment_filename(name: int) -> str:
    return f"{name:020d}{SUFFIX}"


def parse_segment_filename(filename: str) -> int | None:
    """The segment name of a file called `<20 digits>.seg`, else None (not a segment)."""
    stem, dot, ext = filename.partition(".")
    if dot and ext == SUFFIX[1:] and len(stem) == 20 and stem.isdigit():
        return int(stem)
    return None


class Segment:
    """An open segment file and its slot columns (see the module docstring)."""

    __slots__ = (
        "alloc",
        "base",
        "buffer_max",
        "count",
        "doomed",
        "ext",
        "fd",
        "flushed",
        "lens",
        "live",
        "name",
        "offs",
        "packed",
        "path",
        "pending",
        "prealloc",
        "roll_size",
        "sids",
        "size",
        "slots_max",
        "tss",
        "wlock",
    )

    def __init__(self, name: int, path: Path, fd: int, size: int) -> None:
        self.name = name  # last_seq + 1 when created; every message here has seq >= name
        self.path = path
        self.fd = fd
        self.size = size  # bytes of valid records: where the next record goes
        # Buffered appends (module docstring): `pending` holds the bytes from `flushed` to
        # `size`, on disk in blocks reserved up to `alloc` (-1: write through instead).
        # `wlock` guards `pending` and `flushed` against a flush from the sync thread.
        self.pending = bytearray()
        self.flushed = size
        self.alloc = size
        self.buffer_max = 0  # pending bytes that make `buffer` flush; 0: write through
        self.prealloc = limits.STORE_PREALLOCATE_BYTES  # reserved ahead of the pending bytes
        self.wlock = threading.Lock()
        self.base = name  # sequence of slot 0 (set by the first message appended)
        self.offs = array("I")  # record offset per slot, DEAD when removed
        self.lens = array("I")  # record length per slot | HDR_BIT
        self.tss = array("q")  # message timestamp per slot
        self.sids = array("I")  # subject id per slot (index.SubjectIndex)
        self.count = 0  # slots in the columns: their first `count` entries (module docstring)
        self.live = 0  # slots not DEAD
        # The store's roll test, cheap on its every append (ADR 0061): it asks `should_roll`
        # once `size` reaches `roll_size`, the store's `segment_bytes_max`, or 0 once the
        # slots reach `slots_max` (`add_slot`, `add_slots`). Set by the store (`activate`).
        self.slots_max = NO_SLOTS_MAX
        self.roll_size = MAX_SEGMENT_BYTES
        # Tombstone ranges written in this segment that remove messages of older segments:
        # flattened (lo, hi) pairs, repeated elsewhere before this file may be deleted.
        self.ext = array("Q")
        self.doomed = False  # removed from the index, waiting for a sync to unlink it
        # While packed (`Index.warm`, ADR 0054): the four columns above, which are empty.
        self.packed: Packed | None = None

    @classmethod
    def create(cls, directory: Path, name: int) -> Segment:
        path = directory / segment_filename(name)
        flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
        fd = os.open(path, flags, 0o644)
        return cls(name, path, fd, 0)

    @classmethod
    def open(cls, path: Path, name: int, *, writable: bool) -> Segment:
        flags = (os.O_RDWR if writable else os.O_RDONLY) | getattr(os, "O_CLOEXEC", 0)
        fd = os.open(path, flags)
        return cls(name, path, fd, os.fstat(fd).st_size)

    # ------------------------------------------------------------------ I/O

    def append(self, record: bytes) -> int:
        """Write `record` after the last valid one, now (after any pending bytes); returns
        its offset."""
        self.flush()
        offset = self.size
        self.write_at(offset, record)
        self.size = self.flushed = offset + len(record)
        return offset

    def buffer(self, record: bytes) -> int:
        """Append `record` after the last valid one through the write buffer (module
        docstring), its disk space reserved first; returns its offset. Raises OSError
        (ENOSPC) with nothing appended when the space cannot be reserved. Event loop only."""
        offset = self.size
        if self.buffer_max <= 0:  # writing through: nothing is ever pending
            self._write(offset, record)
            self.size = self.flushed = offset + len(record)
            return offset
        end = offset + len(record)
        if end > self.alloc and (self.alloc < 0 or not self._reserve(end, self.prealloc)):
            return self.append(record)
        # The lock's methods called, not `with`: compiled, `with` looks up and calls
        # `__enter__` and `__exit__` (1,150 instructions a record, callgrind).
        lock = self.wlock
        lock.acquire()
        try:
            self.pending += record
        finally:
            lock.release()
        self.size = end
        if end - self.flushed >= self.buffer_max:
            # The record is appended whatever this write does: a failure leaves the bytes
            # pending, and the next sync, flushing them again, reports it.
            with contextlib.suppress(OSError):
                self.flush()
        return offset

    def _reserve(self, end: int, preallocate: int) -> bool:
        """Reserve the blocks up to `end` (and `preallocate` bytes more if there is room);
        False when the filesystem cannot reserve (the segment writes through from now)."""
        start = self.alloc
        try:
            reserve(self.fd, start, end + preallocate - start)
        except OSError as exc:
            if exc.errno in (errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
                self.flush()
                self.alloc = -1
                return False
            if exc.errno != errno.ENOSPC or not preallocate:
                raise
            reserve(self.fd, start, end - start)  # only what this record needs
            preallocate = 0
        self.alloc = end + preallocate
        return True

    def flush(self) -> None:
        """Write the pending bytes to the file (any thread). A failure raises OSError and
        leaves them pending."""
        with self.wlock:
            pending = self.pending
            if pending:
                self._write(self.flushed, pending)
                self.flushed += len(pending)
                pending.clear()

    def write_at(self, offset: int, data: bytes) -> None:
        """Overwrite (or extend by) `data` at `offset`, now: the pending bytes first."""
        self.flush()
        self._write(offset, data)

    def _write(self, offset: int, data: bytes | bytearray) -> None:
        view = memoryview(data)
        try:
            done = os.pwrite(self.fd, view, offset)
            while done < len(data):  # short writes are legal; finish them
                done += os.pwrite(self.fd, view[done:], offset + done)
        finally:
            view.release()  # a bytearray with an export cannot be resized

    def read(self, offset: int, length: int) -> bytes:
        """`length` bytes from `offset` (fewer past the end), the pending ones from memory:
        a read writes nothing (event loop only, where the pending bytes are appended)."""
        if offset + length > self.flushed and self.pending:
            with self.wlock:  # `flushed` may have moved since: a sync's flush
                head = self.flushed - offset  # the bytes of the range in the file
                if head <= 0:  # all of it pending
                    return bytes(self.pending[-head : length - head])
                if head < length:
                    tail = bytes(self.pending[: length - head])
                    # What lies before `flushed` is in the file and stays as it is.
                    return self._pread(offset, head) + tail
        return self._pread(offset, length)

    def _pread(self, offset: int, length: int) -> bytes:
        data = os.pread(self.fd, length, offset)
        while len(data) < length:
            more = os.pread(self.fd, length - len(data), offset + len(data))
            if not more:
                break
            data += more
        return data

    def truncate(self, size: int) -> None:
        self.flush()
        os.ftruncate(self.fd, size)
        self.size = self.flushed = size
        if self.alloc >= 0:
            self.alloc = size  # truncating frees the blocks reserved beyond it

    def drop_unfinished(self) -> None:
        """After a failed append (a full disk): cut off whatever part of it reached the
        file, so the bytes after the last valid record never look like a torn record."""
        if self.pending:
            return  # a buffered append failed to reserve its space: nothing was written
        with contextlib.suppress(OSError):
            os.ftruncate(self.fd, self.flushed)
            if self.alloc >= 0:
                self.alloc = self.flushed  # the blocks reserved beyond are freed too

    def close(self) -> None:
        """Close the file, its pending bytes dropped: the store syncs (which flushes)
        before it closes a segment that still matters."""
        self.pending.clear()
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    # ------------------------------------------------------------------ policy

    def should_roll(self, segment_bytes_max: int, next_record_bytes: int, slots_max: int) -> bool:
        """The one roll predicate (storage-format.md 4): full (its bytes, or its slots:
        ADR 0061), and holding a message so the next segment's name (`last_seq + 1`) is
        greater than this one's."""
        slots = self.count
        if not slots:
            return False
        return (
            self.size >= segment_bytes_max
            or self.size + next_record_bytes > MAX_SEGMENT_BYTES
            or slots >= slots_max
        )

    # ------------------------------------------------------------------ slots

    def end_seq(self) -> int:
        """One past the highest slot's sequence (== base when the segment has no slot)."""
        packed = self.packed
        return self.base + (self.count if packed is None else packed.slots)

    def next_seq(self) -> int:
        """The sequence this segment's next message record must have: messages in a
        segment are consecutive, and the first is its name (storage-format.md 6.1)."""
        end = self.end_seq()
        return end if end > self.base else self.name

    def slot(self, seq: int) -> int:
        """The slot of `seq` if it is live in this segment, else -1."""
        k = seq - self.base
        if 0 <= k < self.count and self.offs[k] != DEAD:
            return k
        return -1

    def add_slot(self, seq: int, offset: int, lenfield: int, ts_ns: int, sid: int) -> None:
        """Append the slot for `seq` (>= end_seq; the gap, if any, becomes DEAD slots)."""
        n = self.count  # unpacked: every caller warms the segment first
        if not n:
            self.base = seq
        elif seq != self.base + n:
            self._dead_slots(seq - self.base - n, ts_ns)
            n = self.count
        offs = self.offs
        if n == len(offs):
            self._grow(n)
        # The index as a Python int once: compiled, each `column[n]` would box `n` anew.
        k = cast(SupportsIndex, n)
        offs[k] = offset
        self.lens[k] = lenfield
        self.tss[k] = ts_ns
        self.sids[k] = sid
        n += 1
        self.count = n
        if offset != DEAD:
            self.live += 1
        if n >= self.slots_max:
            self.roll_size = 0

    def _grow(self, n: int) -> None:
        """Spare room after the `n` slots of full columns (module docstring)."""
        spare = min(max(n, GROW_MIN), GROW_MAX)
        for column in (self.offs, self.lens, self.tss, self.sids):
            column.frombytes(bytes(spare * column.itemsize))

    def trim(self) -> None:
        """Give the columns' spare room back: they hold `count` slots exactly."""
        n = self.count
        if len(self.offs) > n:
            for column in (self.offs, self.lens, self.tss, self.sids):
                del column[n:]

    def set_columns(self, columns: tuple[array[int], array[int], array[int], array[int]]) -> None:
        """Replace the columns (offs, lens, tss, sids) by these, exactly as long (empty
        while packed)."""
        self.offs, self.lens, self.tss, self.sids = columns
        self.count = len(self.offs)

    def add_slots(
        self, seq: int, offs: array[int], lens: array[int], tss: array[int], sids: array[int]
    ) -> None:
        """`add_slot` for live messages at consecutive sequences from `seq`, each column
        extended at once."""
        if not self.count:
            self.base = seq
        gap = seq - self.end_seq()
        if gap:
            self._dead_slots(gap, tss[0])
        self.trim()
        self.offs.extend(offs)
        self.lens.extend(lens)
        self.tss.extend(tss)
        self.sids.extend(sids)
        self.count = n = len(self.offs)
        self.live += len(offs)
        if n >= self.slots_max:
            self.roll_size = 0

    def activate(self, segment_bytes_max: int, slots_max: int) -> None:
        """Make this the store's active segment, rolling at these limits (`roll_size`)."""
        self.slots_max = slots_max
        self.roll_size = 0 if self.count >= slots_max else segment_bytes_max

    def _dead_slots(self, gap: int, ts_ns: int) -> None:
        """`gap` DEAD slots, for sequences no message of this segment holds."""
        self.trim()
        self.offs.extend(array("I", [DEAD]) * gap)
        self.lens.extend(array("I", [0]) * gap)
        self.tss.extend(array("q", [ts_ns]) * gap)
        self.sids.extend(array("I", [0]) * gap)
        self.count += gap

    def note_external(self, lo: int, hi: int) -> None:
        """Remember a tombstone range written here, if it reaches older segments."""
        if lo >= self.name:
            return
        hi = min(hi, self.name - 1)
        ext = self.ext
        if ext and ext[-1] + 1 >= lo and ext[-2] <= lo:  # extends the previous range
            ext[-1] = max(ext[-1], hi)
        else:
            ext.extend((lo, hi))
