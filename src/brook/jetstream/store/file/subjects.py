"""Per-subject sequence index for the file store, sized for millions of messages.

Each subject keeps its live sequences in ascending order, like the memory store's `_SeqList`,
so `subject_state`, `load_last(subject)` and the stream's per-subject limits are O(1) and
purging a subject's oldest messages is O(1) per message. Memory is what drives the shape:

* sequences live in an `array('I')` as offsets from the subject's first one (4 bytes each;
  `array('Q')` once a subject spans 2**32 sequences), not a list of ints (~36 bytes each);
* a subject with a single message (the common case for KV buckets, where every key is a
  subject) costs no object of its own: its sequence sits in an id-indexed array;
* subjects get small integer ids, stored per message in the segment columns (4 bytes), and
  ids of subjects that no longer hold messages are reused.
"""

from __future__ import annotations

import itertools
from array import array
from bisect import bisect_left
from collections.abc import Iterator

from brook.jetstream.store.filters import SubjectFilter


class SubjectSeqs:
    """The live sequences of one subject, ascending. Never empty while indexed."""

    __slots__ = ("_base", "_head", "_one", "_seqs", "name", "sid")

    def __init__(self, name: str, sid: int, seq: int) -> None:
        self.name = name
        self.sid = sid
        self._one = seq  # the only sequence, while `_seqs` is None
        self._seqs: array[int] | None = None  # sequences less `_base`, ascending
        self._base = seq
        self._head = 0  # `_seqs[:_head]` are removed entries not yet compacted away

    def __len__(self) -> int:
        return 1 if self._seqs is None else len(self._seqs) - self._head

    def first(self) -> int:
        return self._one if self._seqs is None else self._base + self._seqs[self._head]

    def last(self) -> int:
        return self._one if self._seqs is None else self._base + self._seqs[-1]

    def append(self, seq: int) -> None:
        seqs = self._seqs
        if seqs is None:
            self.extend(seq, seq + 1)
            return
        try:
            seqs.append(seq - self._base)
        except OverflowError:  # past 2**32 from the first: `extend` widens the array
            self.extend(seq, seq + 1)

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

    def remove(self, seq: int) -> bool:
        """Remove a present sequence; returns True when the subject is now empty."""
        seqs = self._seqs
        if seqs is None:
            return True
        seq -= self._base
        head = self._head
        if seqs[head] == seq:
            head += 1
            if head == len(seqs):
                return True
            if head >= 32 and head * 2 >= len(seqs):
                del seqs[:head]  # drop the dead prefix once it is half the array
                head = 0
            self._head = head
        elif seqs[-1] == seq:
            seqs.pop()
        else:
            del seqs[bisect_left(seqs, seq, head)]
        return False

    def at_or_after(self, seq: int) -> int | None:
        if self._seqs is None:
            return self._one if self._one >= seq else None
        i = bisect_left(self._seqs, seq - self._base, self._head)
        return self._base + self._seqs[i] if i < len(self._seqs) else None

    def count_at_or_after(self, seq: int) -> int:
        if self._seqs is None:
            return 1 if self._one >= seq else 0
        return len(self._seqs) - bisect_left(self._seqs, seq - self._base, self._head)

    def all(self) -> list[int]:
        if self._seqs is None:
            return [self._one]
        base = self._base
        return [base + s for s in self._seqs[self._head :]]


class SubjectIndex:
    """Subjects currently stored, by name and by id.

    A subject with one message costs its name, a dict entry, and one slot in `names` and
    `_single`; only subjects that have held two or more messages get a `SubjectSeqs` in
    `_multi`. Callers see every subject as a `SubjectSeqs` (made on the fly for singles).
    """

    __slots__ = ("_free", "_multi", "_single", "by_name", "names")

    def __init__(self) -> None:
        self.by_name: dict[str, int] = {}  # name -> subject id
        self.names: list[str | None] = []  # subject id -> name (None: a free id)
        self._single: array[int] = array("Q")  # subject id -> its sequence, if not in _multi
        self._multi: dict[int, SubjectSeqs] = {}
        self._free: list[int] = []

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
