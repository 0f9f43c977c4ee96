"""Per-subject sequence index for the file store, sized for millions of messages.

Each subject keeps its live sequences in ascending order, like the memory store's `_SeqList`,
so `subject_state`, `load_last(subject)` and the stream's per-subject limits are O(1) and
purging a subject's oldest messages is O(1) per message. Memory is what drives the shape:

* sequences live in an `array('I')` as offsets from the subject's first one (4 bytes each;
  `array('Q')` once a subject spans 2**32 sequences), not a list of ints (~36 bytes each);
* a subject with a single message (the common case for KV buckets, where every key is a
  subject) costs no object of its own: its sequence sits in an id-indexed array;
* subjects get small integer ids, stored per message in the segment columns (4 bytes), and
  ids of subjects that no longer hold messages are reused;
* a subject's older sequences, past the newest `2 * CHUNK`, are frozen `CHUNK` at a time
  into a `Chunk`: delta-coded, byte-shuffled and zlib-compressed (well under a byte a
  message where 4 were), with their first, last and count in the clear (ADR 0058). A
  chunk is thawed (decoded, kept beside its packed bytes) when a query or a removal
  needs its exact sequences; a subject keeps at most one chunk thawed, and refreezes
  the previous one (packing it again only if it changed) when it thaws another.
"""

from __future__ import annotations

import itertools
import operator
import sys
import zlib
from array import array
from bisect import bisect_left
from collections.abc import Iterator
from typing import Final

from brook.jetstream.store.file import packing
from brook.jetstream.store.filters import SubjectFilter

# Sequences in a frozen chunk; a subject's newest `2 * CHUNK` at most stay unfrozen
# (`_FREEZE_AT`, a constant: the check is on every append).
CHUNK = 1024
_FREEZE_AT = 2 * CHUNK
_LEVEL: Final = 1  # zlib: the deltas are small and repetitive, level 1 packs them about as well
_LAST: Final = operator.attrgetter("last")
_BIG: Final = sys.byteorder == "big"


def _encode(first: int, seqs: array[int]) -> bytes:
    """`seqs` (ascending) as offsets from a base at which the first is `first`: that
    first and then each one's distance from the one before, byte-shuffled, compressed.

    The distances are taken at once on the entries as the lanes of one integer: less the
    integer shifted by one lane, each lane holds its distance (no lane borrows from the
    next, the entries ascending)."""
    width = seqs.itemsize
    lanes = _lanes(seqs)
    shift = 8 * width
    mask = (1 << (shift * len(seqs))) - 1
    deltas = lanes - ((lanes << shift) & mask) - seqs[0] + first
    raw = deltas.to_bytes(width * len(seqs), "little")
    return zlib.compress(packing.shuffled(raw, width), _LEVEL)


def _decode(data: bytes, count: int) -> array[int]:
    """The offsets `_encode` was given (`count` of them): the distances summed up, lane
    by lane, in log2(count) shifted additions of the whole integer (no lane carries: the
    sums are the offsets)."""
    raw = zlib.decompress(data)
    width = len(raw) // count
    total = int.from_bytes(packing.unshuffled(memoryview(raw), width), "little")
    shift = 8 * width
    mask = (1 << (shift * count)) - 1
    while shift < 8 * len(raw):
        total += (total << shift) & mask
        shift *= 2
    out = array("I" if width == 4 else "Q")
    out.frombytes(total.to_bytes(len(raw), "little"))
    if _BIG:
        out.byteswap()
    return out


def _lanes(seqs: array[int]) -> int:
    """The entries of `seqs` as one integer, entry i in bits `i * 8 * itemsize` on."""
    if _BIG:
        seqs = array(seqs.typecode, seqs)
        seqs.byteswap()
    return int.from_bytes(seqs.tobytes(), "little")


class Chunk:
    """`count` older sequences of one subject, `first` .. `last`, frozen (see the module
    docstring): `packed` holds their offsets from `base` encoded, `seqs` those offsets
    while the chunk is thawed (`packed` is None once a removal changed them)."""

    __slots__ = ("base", "count", "first", "last", "packed", "seqs")

    def __init__(self, base: int, first: int, last: int, count: int, packed: bytes) -> None:
        self.base = base
        self.first = first
        self.last = last
        self.count = count
        self.packed: bytes | None = packed
        self.seqs: array[int] | None = None

    def thaw(self) -> array[int]:
        seqs = self.seqs
        if seqs is None:
            assert self.packed is not None
            seqs = self.seqs = _decode(self.packed, self.count)
        return seqs

    def encoded(self) -> bytes:
        """Its packed bytes, encoding a changed thawed chunk again (kept)."""
        if self.packed is None:
            seqs = self.seqs
            assert seqs is not None
            self.packed = _encode(seqs[0], seqs)
        return self.packed

    def freeze(self) -> None:
        self.encoded()
        self.seqs = None

    def offsets(self) -> array[int]:
        """Its sequences less `base`, without thawing it."""
        if self.seqs is not None:
            return self.seqs
        assert self.packed is not None
        return _decode(self.packed, self.count)

    def remove(self, seq: int) -> None:
        seqs = self.thaw()
        del seqs[bisect_left(seqs, seq - self.base)]
        self.packed = None
        self.count -= 1
        if seqs:
            self.first = self.base + seqs[0]
            self.last = self.base + seqs[-1]


class SubjectSeqs:
    """The live sequences of one subject, ascending. Never empty while indexed.

    The oldest are in `_cold` chunks (all older than the tail's), the newest in the tail
    `_seqs[_head:]`, which may be empty while chunks hold some."""

    __slots__ = ("_base", "_cold", "_head", "_ncold", "_one", "_seqs", "_thawed", "name", "sid")

    def __init__(self, name: str, sid: int, seq: int) -> None:
        self.name = name
        self.sid = sid
        self._one = seq  # the only sequence, while `_seqs` is None
        self._seqs: array[int] | None = None  # sequences less `_base`, ascending
        self._base = seq
        self._head = 0  # `_seqs[:_head]` are removed entries not yet compacted away
        self._cold: list[Chunk] | None = None  # frozen chunks, ascending, never empty
        self._ncold = 0  # sequences in `_cold`
        self._thawed: Chunk | None = None  # the chunk of `_cold` thawed, if one is

    def __len__(self) -> int:
        return 1 if self._seqs is None else len(self._seqs) - self._head + self._ncold

    def first(self) -> int:
        if self._seqs is None:
            return self._one
        if self._cold is not None:
            return self._cold[0].first
        return self._base + self._seqs[self._head]

    def last(self) -> int:
        seqs = self._seqs
        if seqs is None:
            return self._one
        if len(seqs) > self._head:
            return self._base + seqs[-1]
        assert self._cold is not None, "an empty subject"
        return self._cold[-1].last

    def append(self, seq: int) -> None:
        seqs = self._seqs
        if seqs is None:
            self.extend(seq, seq + 1)
            return
        try:
            seqs.append(seq - self._base)
        except OverflowError:  # past 2**32 from the first: `extend` widens the array
            self.extend(seq, seq + 1)
            return
        if len(seqs) >= _FREEZE_AT:
            self.freeze()

    def extend(self, seq: int, end: int) -> None:
        """Append the sequences `seq .. end - 1` (all greater than the last one)."""
        seqs = self._seqs
        if seqs is None:
            self._base = self._one
            seqs = self._seqs = array("I", (0,))
        base = self._base
        if end - 1 - base > 0xFFFFFFFF and seqs.typecode == "I":
            seqs = self._seqs = array("Q", seqs)  # spans 2**32 sequences: 8 bytes each
        seqs.extend(range(seq - base, end - base))
        if len(seqs) >= _FREEZE_AT:
            self.freeze()

    def freeze(self) -> None:
        """Freeze the tail's live sequences but its newest `CHUNK`, `CHUNK` at a time
        (called once it holds `_FREEZE_AT`: one chunk's encoding, tens of microseconds,
        every `CHUNK` appends of a subject, rather than all of a segment's at its roll,
        which measured 84 ms for 1M sequences)."""
        seqs = self._seqs
        assert seqs is not None
        base = self._base
        stop = len(seqs) - CHUNK
        if self._head >= stop:
            return  # (not reached: the dead prefix is compacted once it is half)
        cold = self._cold
        if cold is None:
            cold = self._cold = []
        for lo in range(self._head, stop, CHUNK):
            part = seqs[lo : min(lo + CHUNK, stop)]
            first = base + part[0]
            cold.append(Chunk(first, first, base + part[-1], len(part), _encode(0, part)))
            self._ncold += len(part)
        del seqs[:stop]
        self._head = 0

    def _thaw(self, chunk: Chunk) -> array[int]:
        """`chunk`'s offsets, thawed; the chunk thawed before is frozen again."""
        thawed = self._thawed
        if thawed is not chunk:
            if thawed is not None:
                thawed.freeze()
            self._thawed = chunk
        return chunk.thaw()

    def _cold_at(self, seq: int) -> int:
        """Position of the first chunk whose last is >= seq (`_cold` holds one)."""
        cold = self._cold
        assert cold is not None
        return 0 if cold[0].last >= seq else bisect_left(cold, seq, key=_LAST)

    def remove(self, seq: int) -> bool:
        """Remove a present sequence; returns True when the subject is now empty."""
        seqs = self._seqs
        if seqs is None:
            return True
        cold = self._cold
        if cold is not None and seq <= cold[-1].last:
            i = self._cold_at(seq)
            chunk = cold[i]
            self._thaw(chunk)
            chunk.remove(seq)
            self._ncold -= 1
            if not chunk.count:
                del cold[i]
                self._thawed = None
                if not cold:
                    self._cold = None
            return len(seqs) == self._head and not self._ncold
        seq -= self._base
        head = self._head
        if seqs[head] == seq:
            head += 1
            if head == len(seqs):
                if not self._ncold:
                    return True
                del seqs[:]  # the chunks hold the rest
                head = 0
            elif head >= 32 and head * 2 >= len(seqs):
                del seqs[:head]  # drop the dead prefix once it is half the array
                head = 0
            self._head = head
        elif seqs[-1] == seq:
            seqs.pop()
        else:
            del seqs[bisect_left(seqs, seq, head)]
        return False

    def at_or_after(self, seq: int) -> int | None:
        seqs = self._seqs
        if seqs is None:
            return self._one if self._one >= seq else None
        cold = self._cold
        if cold is not None and seq <= cold[-1].last:
            chunk = cold[self._cold_at(seq)]
            if seq <= chunk.first:
                return chunk.first
            offsets = self._thaw(chunk)
            return chunk.base + offsets[bisect_left(offsets, seq - chunk.base)]
        i = bisect_left(seqs, seq - self._base, self._head)
        return self._base + seqs[i] if i < len(seqs) else None

    def count_at_or_after(self, seq: int) -> int:
        seqs = self._seqs
        if seqs is None:
            return 1 if self._one >= seq else 0
        n = len(seqs) - bisect_left(seqs, seq - self._base, self._head)
        cold = self._cold
        if cold is not None and seq <= cold[-1].last:
            i = self._cold_at(seq)
            chunk = cold[i]
            n += sum(c.count for c in cold[i + 1 :])
            if seq <= chunk.first:
                n += chunk.count
            else:
                offsets = self._thaw(chunk)
                n += len(offsets) - bisect_left(offsets, seq - chunk.base)
        return n

    def all(self) -> list[int]:
        if self._seqs is None:
            return [self._one]
        out: list[int] = []
        for chunk in self._cold or ():
            cbase = chunk.base
            out += [cbase + s for s in chunk.offsets()]
        base = self._base
        out += [base + s for s in self._seqs[self._head :]]
        return out


class SubjectIndex:
    """Subjects currently stored, by name and by id.

    A subject with one message costs its name, a dict entry, and one slot in `names` and
    `_single`; only subjects that have held two or more messages get a `SubjectSeqs` in
    `_multi`. Callers see every subject as a `SubjectSeqs` (made on the fly for singles).
    """

    __slots__ = ("_free", "_freeze_at", "_multi", "_single", "by_name", "names")

    def __init__(self) -> None:
        self.by_name: dict[str, int] = {}  # name -> subject id
        self.names: list[str | None] = []  # subject id -> name (None: a free id)
        self._single: array[int] = array("Q")  # subject id -> its sequence, if not in _multi
        self._multi: dict[int, SubjectSeqs] = {}
        self._free: list[int] = []
        # `_FREEZE_AT` as it is now (tests shrink it first): read per publish, an attribute
        # of a native class costs less than a module global (ADR 0069).
        self._freeze_at = _FREEZE_AT

    def __len__(self) -> int:
        return len(self.by_name)

    def add(self, subject: str, seq: int) -> int:
        """Index `seq` (greater than every indexed sequence) under `subject`; returns the
        subject's id."""
        sid = self.by_name.get(subject)
        if sid is not None:
            entry = self._multi.get(sid)
            if entry is None:
                entry = self._multi[sid] = SubjectSeqs(subject, sid, self._single[sid])
            seqs = entry._seqs
            # `entry.append(seq)`'s usual case inline (a frame per publish, ADR 0062): the
            # offset fits the array's type and the tail is not due to freeze.
            if (
                seqs is not None
                and len(seqs) < self._freeze_at - 1
                and seq - entry._base <= 0xFFFFFFFF
            ):
                seqs.append(seq - entry._base)
            else:
                entry.append(seq)
            return sid
        if self._free:
            sid = self._free.pop()
            self.names[sid] = subject
            self._single[sid] = seq
        else:
            sid = len(self.names)
            self.names.append(subject)
            self._single.append(seq)
        self.by_name[subject] = sid
        return sid

    def add_run(self, subjects: list[str], seq: int) -> list[int]:
        """`add` of each of `subjects` at consecutive sequences from `seq`; their ids.
        Taken a stretch of one subject at a time (a run often repeats one): a subject
        that holds several messages already gets the stretch's sequences at once."""
        multi = self._multi
        sids: list[int] = []
        for subject, stretch in itertools.groupby(subjects):
            n = len(list(stretch))
            end = seq + n
            sid = self.by_name.get(subject)
            entry = multi.get(sid) if sid is not None else None
            while entry is None or entry._seqs is None:  # a new subject, or a single
                sid = self.add(subject, seq)
                seq += 1
                if seq == end:
                    break
                entry = multi.get(sid)
            if seq < end and entry is not None and entry._seqs is not None:
                entry.extend(seq, end)
                seq = end
            assert sid is not None
            sids += [sid] * n
        return sids

    def remove(self, sid: int, seq: int) -> None:
        entry = self._multi.get(sid)
        if entry is not None and not entry.remove(seq):
            return
        name = self.names[sid]
        assert name is not None, f"subject id {sid} is free"
        del self.by_name[name]
        self.names[sid] = None
        self._multi.pop(sid, None)
        self._free.append(sid)

    def name_of(self, sid: int) -> str:
        name = self.names[sid]
        assert name is not None, f"subject id {sid} is free"
        return name

    def clear(self) -> None:
        self.by_name.clear()
        self.names.clear()
        self._single = array("Q")
        self._multi.clear()
        self._free.clear()

    def _entry(self, name: str, sid: int) -> SubjectSeqs:
        entry = self._multi.get(sid)
        return entry if entry is not None else SubjectSeqs(name, sid, self._single[sid])

    def matching(self, flt: SubjectFilter) -> Iterator[SubjectSeqs]:
        """The subjects matching `flt`, as (read-only unless in `_multi`) `SubjectSeqs`."""
        if flt.literal is not None:
            sid = self.by_name.get(flt.literal)
            if sid is not None:
                yield self._entry(flt.literal, sid)
            return
        for name, sid in self.by_name.items():
            if flt.match_all or flt.matches(name):
                yield self._entry(name, sid)
