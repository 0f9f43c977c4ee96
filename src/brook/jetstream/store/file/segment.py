"""One segment file: its descriptor, positional I/O, and the in-memory columns indexing it.

A segment holds messages with consecutive sequences `base .. base + len(offs) - 1` (slots of
removed messages stay, marked DEAD), so a sequence maps to its slot by subtraction and the
per-message cost is four array entries (20 bytes) instead of a Python object. Only the record
location, length, timestamp and subject id are kept: payloads are read back with pread().

All writes are positional (`os.pwrite`) at an offset the segment tracks itself: no shared
file position, so the sync thread can fsync while the event loop writes, and a write that
failed half-way is simply overwritten by the next one. O_APPEND is deliberately not used:
on Linux it makes pwrite() ignore the offset, which erase (an in-place overwrite) needs.
Governed by docs/storage-format.md sections 2 and 4.
"""

from __future__ import annotations

import contextlib
import os
from array import array
from pathlib import Path

from brook.jetstream.store.file.packing import Packed

DEAD = 0xFFFFFFFF  # `offs` sentinel: the slot's message is removed (or was never kept)
HDR_BIT = 0x80000000  # set in `lens` when the message has a (non-empty) header
LEN_MASK = 0x7FFFFFFF
MAX_SEGMENT_BYTES = 0xFFFFFFFF - 1  # offsets are u32 columns; DEAD is reserved
SUFFIX = ".seg"


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
        "base",
        "doomed",
        "ext",
        "fd",
        "lens",
        "live",
        "name",
        "offs",
        "packed",
        "path",
        "sids",
        "size",
        "tss",
    )

    def __init__(self, name: int, path: Path, fd: int, size: int) -> None:
        self.name = name  # last_seq + 1 when created; every message here has seq >= name
        self.path = path
        self.fd = fd
        self.size = size  # bytes of valid records: where the next record goes
        self.base = name  # sequence of slot 0 (set by the first message appended)
        self.offs = array("I")  # record offset per slot, DEAD when removed
        self.lens = array("I")  # record length per slot | HDR_BIT
        self.tss = array("q")  # message timestamp per slot
        self.sids = array("I")  # subject id per slot (index.SubjectIndex)
        self.live = 0  # slots not DEAD
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
        """Write `record` after the last valid one; returns its offset."""
        offset = self.size
        self.write_at(offset, record)
        self.size = offset + len(record)
        return offset

    def write_at(self, offset: int, data: bytes) -> None:
        view = memoryview(data)
        done = os.pwrite(self.fd, view, offset)
        while done < len(data):  # short writes are legal; finish them
            done += os.pwrite(self.fd, view[done:], offset + done)

    def read(self, offset: int, length: int) -> bytes:
        data = os.pread(self.fd, length, offset)
        while len(data) < length:
            more = os.pread(self.fd, length - len(data), offset + len(data))
            if not more:
                break
            data += more
        return data

    def truncate(self, size: int) -> None:
        os.ftruncate(self.fd, size)
        self.size = size

    def drop_unfinished(self) -> None:
        """After a failed append (a full disk): cut off whatever part of it reached the
        file, so the bytes after the last valid record never look like a torn record."""
        with contextlib.suppress(OSError):
            os.ftruncate(self.fd, self.size)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    # ------------------------------------------------------------------ policy

    def should_roll(self, segment_bytes_max: int, next_record_bytes: int) -> bool:
        """The one roll predicate (storage-format.md 4): full, and holding a message so the
        next segment's name (`last_seq + 1`) is greater than this one's."""
        if not self.offs:
            return False
        return self.size >= segment_bytes_max or self.size + next_record_bytes > MAX_SEGMENT_BYTES

    # ------------------------------------------------------------------ slots

    def end_seq(self) -> int:
        """One past the highest slot's sequence (== base when the segment has no slot)."""
        packed = self.packed
        return self.base + (len(self.offs) if packed is None else packed.slots)

    def next_seq(self) -> int:
        """The sequence this segment's next message record must have: messages in a
        segment are consecutive, and the first is its name (storage-format.md 6.1)."""
        end = self.end_seq()
        return end if end > self.base else self.name

    def slot(self, seq: int) -> int:
        """The slot of `seq` if it is live in this segment, else -1."""
        k = seq - self.base
        if 0 <= k < len(self.offs) and self.offs[k] != DEAD:
            return k
        return -1

    def add_slot(self, seq: int, offset: int, lenfield: int, ts_ns: int, sid: int) -> None:
        """Append the slot for `seq` (>= end_seq; the gap, if any, becomes DEAD slots)."""
        if not self.offs:
            self.base = seq
        gap = seq - self.end_seq()
        if gap:
            self._dead_slots(gap, ts_ns)
        self.offs.append(offset)
        self.lens.append(lenfield)
        self.tss.append(ts_ns)
        self.sids.append(sid)
        if offset != DEAD:
            self.live += 1

    def add_slots(
        self, seq: int, offs: array[int], lens: array[int], tss: array[int], sids: array[int]
    ) -> None:
        """`add_slot` for live messages at consecutive sequences from `seq`, each column
        extended at once."""
        if not self.offs:
            self.base = seq
        gap = seq - self.end_seq()
        if gap:
            self._dead_slots(gap, tss[0])
        self.offs.extend(offs)
        self.lens.extend(lens)
        self.tss.extend(tss)
        self.sids.extend(sids)
        self.live += len(offs)

    def _dead_slots(self, gap: int, ts_ns: int) -> None:
        """`gap` DEAD slots, for sequences no message of this segment holds."""
        self.offs.extend(array("I", [DEAD]) * gap)
        self.lens.extend(array("I", [0]) * gap)
        self.tss.extend(array("q", [ts_ns]) * gap)
        self.sids.extend(array("I", [0]) * gap)

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
