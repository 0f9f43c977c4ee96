"""The memory store: a stream's messages in process memory, lost on restart.

Layout, chosen so the stream layer's per-publish work stays O(1) or O(log n):

* `_msgs` maps sequence -> `StoredMessage`. Appends are O(1) and `load(seq)` is one dict
  lookup; gaps are simply absent keys.
* `_first` is the lowest stored sequence (or `last_seq + 1` when empty). When the first
  message goes, the next one is found by probing upwards; since `_first` only ever moves
  forward each gap is crossed once, so this is amortised O(1). A long run of gaps (say,
  after purging a busy subject) falls back to asking the per-subject index instead.
* `_subjects` maps subject -> `_SeqList`, the ascending sequences on that subject. It makes
  `subject_state`, `load_last(subject)`, `purge(subject=...)` and the stream's
  `max_msgs_per_subject` enforcement (always "drop the oldest on this subject") cheap:
  dropping a subject's oldest sequence is O(1), anything else O(log n) plus a memmove.
* Counters (`_bytes`, `_last`, `_last_ts`) make `state()` O(1) unless details are asked.

Bytes are accounted as nats-server's memory store does (`base.memory_msg_size`). See
`base.py` for the contract every method follows.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from brook.jetstream.store.base import (
    LostData,
    NewMessage,
    PurgeResult,
    RecordSpan,
    StoredMessage,
    StoreError,
    StreamState,
    SubjectState,
    add_lost,
    load_next_repeated,
    memory_msg_size,
)
from brook.jetstream.store.filters import SubjectFilter, compile_filter

# How far to probe sequence by sequence before asking the per-subject index instead. Small
# enough to bound a call over a long run of gaps, big enough that ordinary gaps never pay
# for a walk over every subject.
_PROBE_LIMIT = 64


class _SeqList:
    """The ascending sequences stored on one subject, with O(1) removal of the oldest.

    Removing the oldest just advances `_head`; the dead prefix is dropped once it is at
    least half the list, so memory stays proportional to the live entries and the cost of
    the copy is amortised over the removals that made it necessary.
    """

    __slots__ = ("_head", "_seqs")

    def __init__(self) -> None:
        self._seqs: list[int] = []
        self._head = 0

    def __len__(self) -> int:
        return len(self._seqs) - self._head

    def __iter__(self) -> Iterator[int]:
        seqs = self._seqs
        for i in range(self._head, len(seqs)):
            yield seqs[i]

    def append(self, seq: int) -> None:
        self._seqs.append(seq)

    def first(self) -> int:
        return self._seqs[self._head]

    def last(self) -> int:
        return self._seqs[-1]

    def remove(self, seq: int) -> None:
        seqs = self._seqs
        if seqs[self._head] == seq:
            self._head += 1
            if self._head >= 32 and self._head * 2 >= len(seqs):
                del seqs[: self._head]
                self._head = 0
        elif seqs[-1] == seq:
            seqs.pop()
        else:
            del seqs[bisect_left(seqs, seq, self._head)]
        if self._head == len(seqs):  # empty: reset so an emptied list holds no memory
            seqs.clear()
            self._head = 0

    def at_or_after(self, seq: int) -> int | None:
        """The lowest sequence >= seq, or None."""
        seqs = self._seqs
        i = bisect_left(seqs, seq, self._head)
        return seqs[i] if i < len(seqs) else None

    def count_at_or_after(self, seq: int) -> int:
        seqs = self._seqs
        return len(seqs) - bisect_left(seqs, seq, self._head)

    def all(self) -> list[int]:
        """All sequences, ascending (a copy: callers remove while iterating)."""
        return self._seqs[self._head :]


@dataclass(frozen=True, slots=True)
class MemorySnapshot:
    """A memory store's content at one moment: its live messages in sequence order and the
    sequence bounds (messages are shared with the store, which never changes one)."""

    first_seq: int
    last_seq: int
    last_ts_ns: int
    messages: list[StoredMessage]


class MemoryStore:
    """A `MessageStore` kept in memory; `sync()` has nothing to do."""

    def __init__(self, first_seq: int = 1) -> None:
        if first_seq < 1:
            raise ValueError(f"first_seq must be >= 1, got {first_seq}")
        self._msgs: dict[int, StoredMessage] = {}
        self._subjects: dict[str, _SeqList] = {}
        self._first = first_seq  # lowest stored sequence; last + 1 while empty
        self._last = first_seq - 1  # highest sequence ever assigned
        self._last_ts = 0
        self._bytes = 0
        self._lost: LostData | None = None  # skipped sequences (skip_to)
        self._closed = False

    # ------------------------------------------------------------------ writing

    def store(self, subject: str, header: bytes | None, data: bytes, ts_ns: int) -> int:
        self._check_open()
        header = header or None  # b"" is no header (base.py)
        seq = self._last + 1
        self._msgs[seq] = StoredMessage(seq, subject, header, data, ts_ns)
        seqs = self._subjects.get(subject)
        if seqs is None:
            seqs = self._subjects[subject] = _SeqList()
        seqs.append(seq)
        self._bytes += memory_msg_size(subject, header, data)
        self._last = seq
        self._last_ts = ts_ns
        # While empty `_first` already equals `_last + 1`, i.e. this sequence.
        return seq

    def store_run(self, messages: Sequence[NewMessage], spans: Sequence[RecordSpan] = ()) -> None:
        for subject, header, data, ts_ns in messages:  # nothing to batch in memory
            self.store(subject, header, data, ts_ns)

    def remove(self, seq: int, *, erase: bool = False) -> bool:
        # `erase` needs no work: dropping the only reference is all memory can do.
        self._check_open()
        if seq not in self._msgs:
            return False
        self._drop(seq)
        self._advance_first()
        return True

    def purge(
        self, *, subject: str | None = None, up_to_seq: int = 0, keep: int = 0
    ) -> PurgeResult:
        self._check_open()
        flt = compile_filter(subject)
        if flt.match_all and up_to_seq <= 0 and keep <= 0:
            return self._purge_all()
        if flt.match_all:
            victims = self._all_victims(up_to_seq, keep)
        else:
            victims = self._filtered_victims(flt, up_to_seq, keep)
        for seq in victims:
            self._drop(seq)
        self._advance_first()
        return PurgeResult(purged=len(victims), removed_seqs=victims)

    def expire_before(self, ts_ns: int) -> list[int]:
        # Timestamps are non-decreasing in sequence order (base.py), so the expired
        # messages are a prefix: walk from the first and stop at the first young one.
        self._check_open()
        removed: list[int] = []
        msgs = self._msgs
        while msgs:
            first = msgs[self._first]
            if first.ts_ns >= ts_ns:
                break
            self._drop(first.seq)
            removed.append(first.seq)
            self._advance_first()
        return removed

    def skip_to(self, last_seq: int) -> None:
        self._check_open()
        if last_seq <= self._last:
            return
        self._lost = add_lost(self._lost, range(self._last + 1, last_seq + 1), 0)
        self._last = last_seq
        if not self._msgs:
            self._first = last_seq + 1

    def truncate(self, last_seq: int) -> None:
        self._check_open()
        if last_seq >= self._last:
            return
        for seq in range(last_seq + 1, self._last + 1):
            if seq in self._msgs:
                self._drop(seq)
        kept = self._msgs.get(last_seq)
        if kept is not None:
            self._last_ts = kept.ts_ns
        self._last = last_seq
        self._advance_first()

    def skip_msgs(self, last_seq: int) -> None:
        self._check_open()
        if last_seq <= self._last:
            return
        self._last = last_seq
        if not self._msgs:
            self._first = last_seq + 1

    def sync(self) -> None:
        self._check_open()

    def close(self) -> None:
        self._closed = True
        self._msgs = {}
        self._subjects = {}

    # ------------------------------------------------------------------ snapshots

    def freeze(self) -> MemorySnapshot:
        """The content now, for a stream snapshot: O(messages) references, no payload copies.
        The dict holds sequences in insertion order, which is ascending (`store`)."""
        self._check_open()
        return MemorySnapshot(self._first, self._last, self._last_ts, list(self._msgs.values()))

    @classmethod
    def thaw(cls, snapshot: MemorySnapshot) -> MemoryStore:
        """A store holding exactly `snapshot` (a restore); ValueError if it is inconsistent."""
        msgs = snapshot.messages
        last = snapshot.last_seq
        floor = msgs[0].seq if msgs else snapshot.first_seq
        if floor < 1 or floor > last + 1 or (msgs and msgs[-1].seq > last):
            raise ValueError(f"messages {floor}.. do not fit last_seq {last}")
        store = cls(first_seq=floor)
        prev = 0
        for m in msgs:
            if m.seq <= prev:
                raise ValueError(f"sequence {m.seq} after {prev}")
            prev = m.seq
            store._last = m.seq - 1
            store.store(m.subject, m.header, m.data, m.ts_ns)
        store._last, store._last_ts = last, snapshot.last_ts_ns
        store._first = floor if msgs else last + 1
        return store

    # ------------------------------------------------------------------ reading

    def load(self, seq: int) -> StoredMessage | None:
        self._check_open()
        return self._msgs.get(seq)

    def load_next(self, filter_subject: str, start_seq: int) -> StoredMessage | None:
        self._check_open()
        if not self._msgs:
            return None
        start = max(start_seq, self._first)
        if start > self._last:
            return None
        flt = compile_filter(filter_subject)
        if flt.literal is not None:
            seqs = self._subjects.get(flt.literal)
            found = seqs.at_or_after(start) if seqs is not None else None
            return None if found is None else self._msgs[found]
        return self._next_matching(flt, start)

    def load_batch(
        self,
        filter_subject: str,
        start_seq: int,
        max_count: int,
        spans: list[RecordSpan] | None = None,
    ) -> list[StoredMessage]:
        return load_next_repeated(self, filter_subject, start_seq, max_count)

    def load_last(self, filter_subject: str) -> StoredMessage | None:
        self._check_open()
        if not self._msgs:
            return None
        flt = compile_filter(filter_subject)
        if flt.match_all:
            return self._msgs[self._highest()]
        best = 0
        for _, seqs in self._matching(flt):
            best = max(best, seqs.last())
        return self._msgs[best] if best else None

    def last_seq(self) -> int:
        self._check_open()
        return self._last

    def state(
        self, *, deleted_details: bool = False, subjects_filter: str | None = None
    ) -> StreamState:
        self._check_open()
        msgs = self._msgs
        count = len(msgs)
        last = self._last
        st = StreamState(
            messages=count,
            bytes=self._bytes,
            last_seq=last,
            last_ts_ns=self._last_ts,
            num_subjects=len(self._subjects),
        )
        if count:
            st.first_seq = self._first
            st.first_ts_ns = msgs[self._first].ts_ns
            st.num_deleted = last - self._first + 1 - count
        else:
            st.first_seq = last + 1 if last > 0 else 0
        st.lost = self._lost
        if deleted_details:
            st.deleted = (
                [s for s in range(self._first, last + 1) if s not in msgs] if st.num_deleted else []
            )
        if subjects_filter is not None:
            st.subjects = self.subject_counts(subjects_filter)
        return st

    def subject_state(self, filter_subject: str) -> SubjectState:
        self._check_open()
        if not self._msgs:
            return SubjectState()
        flt = compile_filter(filter_subject)
        if flt.match_all:
            return SubjectState(len(self._msgs), self._first, self._highest())
        count, first, last = 0, 0, 0
        for _, seqs in self._matching(flt):
            count += len(seqs)
            f = seqs.first()
            first = f if not first or f < first else first
            last = max(last, seqs.last())
        return SubjectState(count, first, last)

    def num_pending(self, filter_subject: str, start_seq: int) -> int:
        self._check_open()
        msgs = self._msgs
        if not msgs:
            return 0
        start = max(start_seq, self._first)
        if start > self._last:
            return 0
        flt = compile_filter(filter_subject)
        if flt.match_all:
            if start == self._first:
                return len(msgs)
            # Probe the tail when it is short (a consumer near the end), else count per
            # subject: one bisect each.
            if self._last - start < max(_PROBE_LIMIT, 2 * len(self._subjects)):
                return sum(1 for seq in range(start, self._last + 1) if seq in msgs)
        return sum(seqs.count_at_or_after(start) for _, seqs in self._matching(flt))

    def subject_counts(self, filter_subject: str) -> dict[str, int]:
        self._check_open()
        return {
            subject: len(seqs) for subject, seqs in self._matching(compile_filter(filter_subject))
        }

    def last_seqs(self, filter_subject: str) -> list[int]:
        self._check_open()
        return [seqs.last() for _, seqs in self._matching(compile_filter(filter_subject))]

    def recent_headed(self, since_ns: int, most: int) -> list[int]:
        self._check_open()
        found: list[int] = []
        for seq in reversed(self._msgs):  # insertion order is sequence order
            msg = self._msgs[seq]
            if most <= 0 or msg.ts_ns < since_ns:
                break
            most -= 1
            if msg.header:
                found.append(seq)
        found.reverse()
        return found

    # ------------------------------------------------------------------ internals

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError("message store is closed")

    def _matching(self, flt: SubjectFilter) -> Iterator[tuple[str, _SeqList]]:
        """The (subject, sequences) pairs whose subject matches the filter."""
        if flt.literal is not None:
            seqs = self._subjects.get(flt.literal)
            if seqs is not None:
                yield flt.literal, seqs
            return
        for subject, seqs in self._subjects.items():
            if flt.matches(subject):
                yield subject, seqs

    def _drop(self, seq: int) -> None:
        """Remove a present message from the map, its subject's index and the counters,
        leaving `_first` for the caller to fix (once per batch)."""
        msg = self._msgs.pop(seq)
        seqs = self._subjects[msg.subject]
        seqs.remove(seq)
        if not seqs:
            del self._subjects[msg.subject]
        self._bytes -= memory_msg_size(msg.subject, msg.header, msg.data)

    def _advance_first(self) -> None:
        """Move `_first` to the lowest stored sequence (or `_last + 1` when empty)."""
        msgs = self._msgs
        if not msgs:
            self._first = self._last + 1
            return
        seq = self._first
        for _ in range(_PROBE_LIMIT):
            if seq in msgs:
                self._first = seq
                return
            seq += 1
        self._first = min(seqs.first() for seqs in self._subjects.values())

    def _highest(self) -> int:
        """The highest stored sequence; the store must not be empty."""
        msgs = self._msgs
        seq = self._last
        for _ in range(_PROBE_LIMIT):
            if seq in msgs:
                return seq
            seq -= 1
        return max(seqs.last() for seqs in self._subjects.values())

    def _next_matching(self, flt: SubjectFilter, start: int) -> StoredMessage | None:
        """First message at or after `start` (within first..last) matching a non-literal
        filter: probe sequences while that is cheap, then ask each matching subject."""
        msgs = self._msgs
        # Probing costs one step per sequence, asking the subjects a match and a bisect per
        # subject; usually the next match is near, so probe first, up to the point where
        # asking the subjects would have been cheaper.
        end = min(self._last, start + max(_PROBE_LIMIT, 2 * len(self._subjects)) - 1)
        verdicts: dict[str, bool] = {}
        for seq in range(start, end + 1):
            msg = msgs.get(seq)
            if msg is None:
                continue
            ok = verdicts.get(msg.subject)
            if ok is None:
                ok = verdicts[msg.subject] = flt.matches(msg.subject)
            if ok:
                return msg
        if end >= self._last:
            return None
        best: int | None = None
        for _, seqs in self._matching(flt):
            found = seqs.at_or_after(end + 1)
            if found is not None and (best is None or found < best):
                best = found
        return None if best is None else msgs[best]

    def _purge_all(self) -> PurgeResult:
        # Sequences were inserted in ascending order, and dicts keep insertion order.
        removed = list(self._msgs)
        self._msgs = {}
        self._subjects = {}
        self._bytes = 0
        self._first = self._last + 1
        return PurgeResult(purged=len(removed), removed_seqs=removed)

    def _all_victims(self, up_to_seq: int, keep: int) -> list[int]:
        """Unfiltered purge with a bound and/or keep: everything below a cut-off."""
        msgs = self._msgs
        bound = self._last + 1
        if up_to_seq > 0:
            bound = min(bound, up_to_seq)
        if keep > 0:
            if keep >= len(msgs):
                return []
            # The keep-th newest sequence: everything below it goes.
            newest = reversed(msgs)
            oldest_kept = bound
            for _ in range(keep):
                oldest_kept = next(newest)
            bound = min(bound, oldest_kept)
        if bound > self._last:
            return list(msgs)  # everything (ascending: insertion order), no gap probing
        # Probing costs bound - first steps, but afterwards `_first` >= bound, so no
        # sequence is probed twice over the store's life.
        return [s for s in range(self._first, bound) if s in msgs]

    def _filtered_victims(self, flt: SubjectFilter, up_to_seq: int, keep: int) -> list[int]:
        """Filtered purge: the matching sequences below `up_to_seq`, less the newest
        `keep` of all matching ones (counted across the filter, as nats-server does)."""
        groups = [seqs for _, seqs in self._matching(flt)]
        if not groups:
            return []
        if len(groups) == 1:
            matching = groups[0].all()
        else:
            matching = sorted(s for seqs in groups for s in seqs)
        if keep > 0:
            if keep >= len(matching):
                return []
            matching = matching[: len(matching) - keep]
        if up_to_seq > 0:
            matching = matching[: bisect_left(matching, up_to_seq)]
        return matching
