"""The narrow read port the consumer state machine uses, and its adapter over a store.

The state machine never sees a `MessageStore`; it asks a `MessageSource` already bound to
the consumer's filter subjects. Tests use an in-memory fake; the engine uses `StoreSource`.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Protocol

from brook.jetstream.store.base import MessageStore, RecordSpan, StoredMessage


class MessageSource(Protocol):
    def next_matching(self, after_seq: int) -> StoredMessage | None:
        """The first stored message matching the filter(s) with seq > after_seq."""
        ...

    def next_batch(
        self, after_seq: int, max_count: int, spans: list[RecordSpan] | None = None
    ) -> list[StoredMessage]:
        """`next_matching` repeated: up to `max_count` matching messages after `after_seq`;
        the records a file store read them from appended to `spans` (where it can)."""
        ...

    def load(self, seq: int) -> StoredMessage | None:
        """The message at seq (for redelivery), or None once it was removed."""
        ...

    def num_pending(self, from_seq: int) -> int:
        """How many stored messages matching the filter(s) have seq >= from_seq."""
        ...

    def searched_to(self, after_seq: int) -> int:
        """How far a search from `after_seq` that found no matching message looked: the
        stream's last sequence when messages may have been passed over (a filter), else
        `after_seq` (without a filter every message matches: none was passed over)."""
        ...


class StoreSource:
    """A `MessageSource` over a `MessageStore` and the consumer's (non-overlapping) filters."""

    __slots__ = ("_filters", "_store")

    def __init__(self, store: MessageStore, filters: Sequence[str] = ()) -> None:
        self._store = store
        fs = [f for f in filters if f and f != ">"]
        # One match-all filter makes the others irrelevant.
        self._filters = [""] if len(fs) < len(filters) or not fs else fs

    def next_matching(self, after_seq: int) -> StoredMessage | None:
        best: StoredMessage | None = None
        for f in self._filters:
            m = self._store.load_next(f, after_seq + 1)
            if m is not None and (best is None or m.seq < best.seq):
                best = m
        return best

    def next_batch(
        self, after_seq: int, max_count: int, spans: list[RecordSpan] | None = None
    ) -> list[StoredMessage]:
        filters = self._filters
        if len(filters) == 1:
            return self._store.load_batch(filters[0], after_seq + 1, max_count, spans)
        merged = [m for f in filters for m in self._store.load_batch(f, after_seq + 1, max_count)]
        merged.sort(key=lambda m: m.seq)  # filters do not overlap: no duplicates
        return merged[:max_count]

    def load(self, seq: int) -> StoredMessage | None:
        return self._store.load(seq)

    def num_pending(self, from_seq: int) -> int:
        return sum(self._store.num_pending(f, max(from_seq, 1)) for f in self._filters)

    def searched_to(self, after_seq: int) -> int:
        if self._filters == [""]:
            return after_seq
        return max(after_seq, self._store.state().last_seq)

    def last_matching(self) -> StoredMessage | None:
        best: StoredMessage | None = None
        for f in self._filters:
            m = self._store.load_last(f)
            if m is not None and (best is None or m.seq > best.seq):
                best = m
        return best


class DeliverPolicy(enum.Enum):
    ALL = "all"
    LAST = "last"
    NEW = "new"
    BY_START_SEQUENCE = "by_start_sequence"
    BY_START_TIME = "by_start_time"
    LAST_PER_SUBJECT = "last_per_subject"


def resolve_start_seq(
    policy: DeliverPolicy,
    source: StoreSource,
    *,
    stream_first_seq: int,
    stream_last_seq: int,
    opt_start_seq: int = 0,
    opt_start_time_ns: int = 0,
) -> int:
    """The first stream sequence a new consumer considers (its position).

    For `last_per_subject` the caller computes the per-subject start sequences itself and
    passes them to `ConsumerState(last_per_subject_seqs=...)`, with this function's result
    (`stream_last_seq + 1`) as the position after them.
    """
    if policy is DeliverPolicy.ALL:
        return max(stream_first_seq, 1)
    if policy is DeliverPolicy.LAST:
        last = source.last_matching()
        return last.seq if last is not None else stream_last_seq + 1
    if policy in (DeliverPolicy.NEW, DeliverPolicy.LAST_PER_SUBJECT):
        return stream_last_seq + 1
    if policy is DeliverPolicy.BY_START_SEQUENCE:
        return max(opt_start_seq, 1)
    # BY_START_TIME: the first matching message stored at or after the time (a scan).
    m = source.next_matching(0)
    while m is not None and m.ts_ns < opt_start_time_ns:
        m = source.next_matching(m.seq)
    return m.seq if m is not None else stream_last_seq + 1
