"""The file store's in-memory index: segments' slot columns, subjects, and counters.

Pure bookkeeping, no I/O: recovery fills it by replaying the log and the store keeps it in
step with every record it appends, so both go through the same `add`/`drop` code. It is
always derived from the log (storage-format.md 8); it is saved as a cache at a clean
close and periodically (`indexsnap`, storage-format.md 12), used at open only while the
log begins with what it covers.

Invariants (checked by tests through the public API):
* `first` is the lowest live sequence, or `last + 1` when nothing is live;
* `messages`/`bytes` are the live slots' count and accounted size;
* a sequence belongs to the segment with the greatest name <= it, at slot `seq - base`;
* every subject's sequence list holds exactly its live sequences;
* once open, the last segment is never packed, nor more than `hot_max` others unpacked
  (ADR 0054).

Packed segments: a sealed segment's columns are packed (`packing.py`) once `hot_max`
sealed segments newer in use are unpacked, and unpacked when something reads or changes
them. Everything that touches a segment's columns first calls `warm(seg)` (`locate`,
the walks and `drop` do it for their callers); only `warm` and `add_segment` pack, so a
caller's columns stay unpacked until its next `warm` of another segment.

A segment of `BACKGROUND_SLOTS` slots or more is packed on a worker thread (about 0.1 s
for a full 64 MB segment of small messages, which on the event loop would stall every
publish at each roll): its columns stay in place meanwhile, a copy of their bytes is
packed, and the result is installed by the next `warm` or `add_segment` unless the
segment was warmed (so maybe changed) in between, which drops that work.

Once the store is open it gives the index a `ColdFile` (`keep_cold`, ADR 0061): every
packed segment's bytes then go there (`Packed.spill`), and an unpack reads them back.
"""

from __future__ import annotations

from array import array
from bisect import bisect_right
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Final

from brook.jetstream.store.file import packing
from brook.jetstream.store.file.coldfile import ColdFile
from brook.jetstream.store.file.format import OVERHEAD
from brook.jetstream.store.file.segment import DEAD, HDR_BIT, LEN_MASK, Segment
from brook.jetstream.store.file.subjects import SubjectIndex

Slot = tuple[int, Segment, int]  # (seq, segment, slot)

# Sealed segments whose columns stay unpacked (besides the last, being written): a
# reader in order and a couple at random places unpack each segment once as they pass.
HOT_SEGMENTS_DEFAULT: Final = 2
# Segments at least this many slots are packed on `_PACKER` (smaller ones take under a
# few milliseconds and are packed at once).
BACKGROUND_SLOTS: Final = 65536
# One thread for every store's packing: it is rare (a roll), and zlib releases the GIL.
_PACKER: Final = ThreadPoolExecutor(1, thread_name_prefix="brook-index-pack")


def _empty_columns() -> tuple[array[int], array[int], array[int], array[int]]:
    """A packed segment's placeholder columns (offs, lens, tss, sids)."""
    return array("I"), array("I"), array("q"), array("I")


def accounted(lenfield: int) -> int:
    """nats-server's file-store size of a message from its `lens` column entry:
    `30 + subject + data` without a header, `34 + subject + header + data` with one."""
    body = (lenfield & LEN_MASK) - OVERHEAD
    return body + (34 if lenfield & HDR_BIT else 30)


class Index:
    __slots__ = (
        "_hot",
        "_packing",
        "bytes",
        "cold",
        "first",
        "hot_max",
        "last",
        "last_ts",
        "messages",
        "names",
        "segments",
        "subjects",
        "unpacks",
    )

    def __init__(self, first_seq: int, hot_max: int = HOT_SEGMENTS_DEFAULT) -> None:
        if hot_max < 1:
            raise ValueError(f"index_hot_segments must be >= 1, got {hot_max}")
        self.segments: list[Segment] = []  # in name (= log) order
        self.names: list[int] = []  # segment names, for bisect
        self.subjects = SubjectIndex()
        self.messages = 0
        self.bytes = 0
        self.last = first_seq - 1  # highest sequence ever assigned
        self.first = first_seq  # lowest live sequence, or last + 1 when empty
        self.last_ts = 0  # timestamp of the message at `last` (stays after removal)
        # Sealed segments whose columns are unpacked, oldest unpacked first (a FIFO: no
        # bookkeeping on every read), at most `hot_max` of them.
        self._hot: dict[Segment, None] = {}
        # Sealed segments being packed on `_PACKER`: their pack and their live count then.
        self._packing: dict[Segment, tuple[Future[packing.Packed], int]] = {}
        self.hot_max = hot_max
        self.unpacks = 0  # packed segments unpacked since the store opened (monitoring)
        self.cold: ColdFile | None = None  # where packed bytes go (`keep_cold`)

    # ------------------------------------------------------------------ segments

    def add_segment(self, seg: Segment) -> None:
        """Append `seg` as the last segment; the one before it is sealed now. `seg` is
        new, or opened (replay `warm`s it before adding to it)."""
        assert not self.names or seg.name > self.names[-1], "segment names must increase"
        if self._packing:
            self._install()
        sealed = self.segments[-1] if self.segments else None
        self.segments.append(seg)
        self.names.append(seg.name)
        if sealed is not None and sealed.packed is None:
            sealed.trim()  # no more slots come: its spare room goes
            self._hot[sealed] = None
            self._shed(seg)

    def remove_segment(self, seg: Segment) -> None:
        i = self.segments.index(seg)
        del self.segments[i]
        del self.names[i]
        self._hot.pop(seg, None)
        self._packing.pop(seg, None)
        if seg.packed is not None:
            seg.packed.release()

    def warm(self, seg: Segment) -> None:
        """Unpack `seg`'s columns if they are packed (see the module docstring)."""
        if self._packing:
            if self._packing.pop(seg, None) is not None:  # its columns are still in place
                self._hot[seg] = None
                self._shed(seg)
                return
            self._install()
        if seg.packed is not None:
            self._unpack(seg)
            if seg is not self.segments[-1]:
                self._hot[seg] = None
                self._shed(seg)

    def keep_cold(self, cold: ColdFile) -> None:
        """From now on keep packed segments' bytes in `cold`, those packed already too."""
        self.cold = cold
        for seg in self.segments:
            if seg.packed is not None:
                seg.packed.spill(cold)

    def close_cold(self) -> None:
        """At the store's close, after its last snapshot: the file goes."""
        if self.cold is not None:
            self.cold.close()
            self.cold = None

    def packed_segments(self) -> int:
        """Segments packed, or being packed."""
        return sum(seg.packed is not None for seg in self.segments) + len(self._packing)

    def settle(self) -> None:
        """Wait for the packs under way and install them (tests; a clean close)."""
        for future, _live in self._packing.values():
            future.result()
        self._install()

    def _install(self) -> None:
        """Install the packs that are done; one whose segment changed meanwhile (its
        live count differs; warm drops its work first anyway) is dropped."""
        for seg, (future, live) in list(self._packing.items()):
            if not future.done():
                continue
            del self._packing[seg]
            if seg.live == live:
                seg.packed = packed = future.result()
                seg.set_columns(_empty_columns())
                if self.cold is not None:
                    packed.spill(self.cold)

    def _unpack(self, seg: Segment) -> None:
        packed = seg.packed
        assert packed is not None
        seg.set_columns(packing.unpack(packed))
        seg.packed = None
        packed.release()
        self.unpacks += 1

    def _shed(self, keep: Segment) -> None:
        """Pack the oldest unpacked sealed segments beyond `hot_max`, never `keep`."""
        hot = self._hot
        while len(hot) > self.hot_max:  # >= 1, and `keep` is the newest: never reached
            seg = next(iter(hot))
            assert seg is not keep
            del hot[seg]
            seg.trim()
            columns = (seg.offs, seg.lens, seg.tss, seg.sids)
            if seg.count < BACKGROUND_SLOTS:
                seg.packed = packed = packing.pack(columns)
                seg.set_columns(_empty_columns())
                if self.cold is not None:
                    packed.spill(self.cold)
            else:
                raw = tuple(column.tobytes() for column in columns)
                self._packing[seg] = (_PACKER.submit(packing.pack_bytes, raw), seg.live)

    def segment_at(self, seq: int) -> int:
        """Position in `segments` of the segment that would hold `seq` (-1 if none)."""
        return bisect_right(self.names, seq) - 1

    def locate(self, seq: int) -> tuple[Segment, int] | None:
        """The segment (unpacked) and slot of a live message, or None."""
        i = bisect_right(self.names, seq) - 1
        if i < 0:
            return None
        seg = self.segments[i]
        if seg.packed is not None:
            if not seg.live:
                return None
            self.warm(seg)
        k = seg.slot(seq)
        return None if k < 0 else (seg, k)

    # ------------------------------------------------------------------ changes

    def add(
        self, seg: Segment, seq: int, offset: int, lenfield: int, ts: int, subject: str
    ) -> None:
        """Index a live message appended to `seg` (seq > last)."""
        sid = self.subjects.add(subject, seq)
        seg.add_slot(seq, offset, lenfield, ts, sid)
        if not self.messages:
            self.first = seq
        self.messages += 1
        # `accounted(lenfield)`, inline: a call per publish measured (ADR 0062)
        self.bytes += (lenfield & LEN_MASK) - OVERHEAD + (34 if lenfield & HDR_BIT else 30)
        self.last = seq
        self.last_ts = ts

    def add_run(
        self, seg: Segment, seq: int, offs: array[int], lens: array[int], tss: array[int],
        subjects: list[str], size: int, headers: int,
    ) -> None:  # fmt: skip
        """`add` for live messages at consecutive sequences from `seq` (> last), appended
        to `seg`: their columns extended at once. `size`: their records' bytes, `headers`:
        how many have a header (their `accounted` sizes added up from these)."""
        sids = array("I", self.subjects.add_run(subjects, seq))
        seg.add_slots(seq, offs, lens, tss, sids)
        if not self.messages:
            self.first = seq
        self.messages += len(subjects)
        self.bytes += size + len(subjects) * (30 - OVERHEAD) + 4 * headers
        self.last = seq + len(subjects) - 1
        self.last_ts = tss[-1]

    def add_removed(self, seg: Segment, seq: int, ts: int) -> None:
        """Index a message record that holds no live message (an ERASED one)."""
        seg.add_slot(seq, DEAD, 0, ts, 0)
        self.last = seq
        self.last_ts = ts
        if not self.messages:
            self.first = seq + 1

    def drop(self, seg: Segment, k: int) -> int:
        """Remove the live message in slot `k` of `seg`; returns its sequence."""
        self.warm(seg)
        seq = seg.base + k
        seg.offs[k] = DEAD
        seg.live -= 1
        self.subjects.remove(seg.sids[k], seq)
        self.messages -= 1
        self.bytes -= accounted(seg.lens[k])
        if seq == self.first:
            self.advance_first()
        return seq

    def drop_range(self, lo: int, hi: int) -> int:
        """Remove every live message in `lo..hi`; returns how many there were."""
        lo = max(lo, self.first)
        dropped = 0
        i = max(0, self.segment_at(lo))
        for seg in self.segments[i:]:
            if seg.base > hi:
                break
            if not seg.live:
                continue
            self.warm(seg)
            offs = seg.offs
            for k in range(max(0, lo - seg.base), min(hi - seg.base + 1, seg.count)):
                if offs[k] != DEAD:
                    self.drop(seg, k)
                    dropped += 1
        return dropped

    def clear(self) -> list[int]:
        """Remove every live message (a full purge); returns their sequences."""
        removed = [seq for seq, _seg, _k in self.iter_live(self.first)]
        for seg in self.segments:
            self.warm(seg)
            n = len(seg.offs)  # the spare room too, as long as the other columns
            seg.offs = array("I", b"\xff\xff\xff\xff" * n)
            seg.live = 0
        self.subjects.clear()
        self.messages = 0
        self.bytes = 0
        self.first = self.last + 1
        return removed

    def advance_first(self) -> None:
        """Move `first` to the lowest live sequence (amortised: it only moves forward)."""
        if not self.messages:
            self.first = self.last + 1
            return
        for seg in self.segments[max(0, self.segment_at(self.first)) :]:
            if not seg.live:
                continue
            packed = seg.packed
            if packed is not None and seg.live == packed.slots and self.first <= seg.base:
                self.first = seg.base  # its slots all live: no need to unpack it (at open)
                return
            break
        for seq, _seg, _k in self.iter_live(self.first):
            self.first = seq
            return
        raise AssertionError("messages counted but none live")

    # ------------------------------------------------------------------ walking

    def iter_live(self, start: int) -> Iterator[Slot]:
        """Live messages with seq >= start, ascending."""
        i = max(0, self.segment_at(start))
        for seg in self.segments[i:]:
            if not seg.live:
                continue
            self.warm(seg)
            offs = seg.offs
            base = seg.base
            for k in range(max(0, start - base), seg.count):
                if offs[k] != DEAD:
                    yield base + k, seg, k

    def iter_live_reverse(self, start: int) -> Iterator[Slot]:
        """Live messages with seq <= start, descending."""
        i = self.segment_at(start)
        for seg in reversed(self.segments[: i + 1]):
            if not seg.live:
                continue
            self.warm(seg)
            offs = seg.offs
            base = seg.base
            for k in range(min(start - base, seg.count - 1), -1, -1):
                if offs[k] != DEAD:
                    yield base + k, seg, k

    def first_ts(self) -> int:
        """The timestamp of the message at `first` (live), unpacking only when needed."""
        seg = self.segments[self.segment_at(self.first)]
        packed = seg.packed
        if packed is not None and seg.live == packed.slots and self.first == seg.base:
            return packed.ts0
        loc = self.locate(self.first)
        assert loc is not None, "first is not live"
        return loc[0].tss[loc[1]]

    def count_from(self, start: int) -> int:
        """How many live messages have seq >= start (array.count runs in C)."""
        total = 0
        for seg in reversed(self.segments):
            if seg.base >= start:
                total += seg.live
                continue
            if seg.live:
                self.warm(seg)
                tail = seg.offs[max(0, start - seg.base) : seg.count]
                total += len(tail) - tail.count(DEAD)
            break
        return total

    def gaps(self) -> list[int]:
        """Sequences between first and last that are not live (state's `deleted`)."""
        if not self.messages:
            return []
        out: list[int] = []
        expect = self.first
        for seq, _seg, _k in self.iter_live(self.first):
            if seq > expect:
                out.extend(range(expect, seq))
            expect = seq + 1
        out.extend(range(expect, self.last + 1))
        return out
