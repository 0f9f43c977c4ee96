"""A sealed segment's slot columns packed while nobody reads them (ADR 0054).

The columns cost 20 bytes per stored message (`segment.py`); kept for every segment they
were most of the memory a large stream holds (26.7 MB per 1M messages at 10M, where
nats-server holds about 2 MB, loading its blocks' indexes lazily). A packed segment keeps
them in about 3.5 bytes per message, losslessly and without I/O: each column's bytes are
*shuffled* (all first bytes of its entries, then all second bytes, ...; slicing with a
step, so it runs in C) and the four are compressed with zlib at level 1. Shuffled, the
high bytes of offsets, timestamps and subject ids, which change slowly along a segment,
become long runs. Unpacking restores the exact arrays (about 65 ms for 800k slots here).

Kept rather than reloaded from the log: reloading means scanning the segment (seconds for
64 MB in Python) and remapping subject ids, and the packed form is what the index snapshot
stores for such a segment, so a restart does not unpack it either. An open store keeps the
packed bytes in a file (`spill`, `coldfile.py`, ADR 0061), not in memory.
"""

from __future__ import annotations

import struct
import sys
import zlib
from array import array
from typing import Protocol

_CODES = ("I", "I", "q", "I")  # offs, lens, tss, sids (`Segment`'s column types)
_WIDTHS = (4, 4, 8, 4)
_TS = struct.Struct("=q")  # a `tss` entry (native order, as `array.tobytes` gives)
_LITTLE = sys.byteorder == "little"
_BELOW_0X80 = bytes(range(0x80))
_LEVEL = 1  # about as small as level 6 here, and 3-5 times faster


class Regions(Protocol):
    """Where a `Packed` keeps its bytes once spilled (`coldfile.ColdFile`)."""

    def put(self, data: bytes) -> int: ...
    def get(self, at: int, size: int) -> bytes: ...
    def free(self, at: int, size: int) -> None: ...


class Packed:
    """Four slot columns of `slots` entries, shuffled and compressed (`pack`), with what
    is asked of cold segments without reading them: the first slot's timestamp (a
    stream's state asks for its first message's, slot 0 of a packed segment whose slots
    are all live) and how many slots have a header (the deduplication window, rebuilt at
    open from the recent messages with a header, skips segments without any).

    Its bytes (`data`) are in memory, or once `spill`ed in a region of a file, read back
    on each use; `release` frees that region when the segment no longer needs it."""

    __slots__ = ("_at", "_data", "_freed", "_regions", "headed", "size", "slots", "ts0")

    def __init__(self, slots: int, data: bytes, ts0: int, headed: int) -> None:
        self.slots = slots
        self._data: bytes | None = data
        self.size = len(data)
        self.ts0 = ts0
        self.headed = headed
        self._regions: Regions | None = None
        self._at = 0  # the region's offset, once spilled
        self._freed = False

    @property
    def data(self) -> bytes:
        data = self._data
        if data is None:
            assert self._regions is not None
            return self._regions.get(self._at, self.size)
        return data

    @property
    def spilled(self) -> bool:
        return self._data is None

    def spill(self, regions: Regions) -> None:
        """Move the bytes to a region of `regions` (kept in memory if that fails)."""
        if self._data is None or self._regions is not None:
            return
        try:
            self._at = regions.put(self._data)
        except OSError:
            return
        self._regions = regions
        self._data = None

    def release(self) -> None:
        """The segment dropped this pack (unpacked, or deleted): free its region. A copy
        of the index taken before (a snapshot capture) may still read it: the region's
        offset is kept and `Regions.free` waits for such readers."""
        if self._regions is not None and not self._freed:
            self._freed = True
            self._regions.free(self._at, self.size)


def shuffled(raw: bytes, width: int) -> bytes:
    """All first bytes of `raw`'s `width`-byte entries, then all second bytes, ..."""
    return b"".join([raw[i::width] for i in range(width)])


def unshuffled(raw: memoryview, width: int) -> bytearray:
    """The bytes `shuffled` was given."""
    out = bytearray(len(raw))
    step = len(raw) // width
    for i in range(width):
        out[i::width] = raw[i * step : (i + 1) * step]
    return out


def pack(columns: tuple[array[int], array[int], array[int], array[int]]) -> Packed:
    """`columns` (offs, lens, tss, sids, of equal length) packed."""
    return pack_bytes(tuple(column.tobytes() for column in columns))


def pack_bytes(columns: tuple[bytes, ...]) -> Packed:
    """`pack` of the columns' bytes (`array.tobytes()`), as a snapshot captured them."""
    slots = len(columns[0]) // 4
    parts = [shuffled(raw, width) for raw, width in zip(columns, _WIDTHS, strict=True)]
    ts0 = _TS.unpack_from(columns[2])[0] if slots else 0
    # The lengths' high bytes (little-endian: the fourth plane of the shuffled `lens`) are
    # 0x80 or more exactly where HDR_BIT is set: count them by deleting the others, in C.
    high = parts[1][(3 if _LITTLE else 0) * slots : (4 if _LITTLE else 1) * slots]
    headed = len(high.translate(None, _BELOW_0X80))
    return Packed(slots, zlib.compress(b"".join(parts), _LEVEL), ts0, headed)


def unpack(packed: Packed) -> tuple[array[int], array[int], array[int], array[int]]:
    """The columns `pack` was given, equal to them."""
    raw = memoryview(zlib.decompress(packed.data))
    out: list[array[int]] = []
    pos = 0
    for code in _CODES:
        column = array(code)
        size = packed.slots * column.itemsize
        column.frombytes(unshuffled(raw[pos : pos + size], column.itemsize))
        pos += size
        out.append(column)
    if pos != len(raw):
        raise ValueError(f"packed columns hold {len(raw)} bytes, not {pos}")
    return out[0], out[1], out[2], out[3]
