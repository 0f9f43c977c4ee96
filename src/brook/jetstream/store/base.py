"""The message-store interface every stream storage implements, and its value types.

A store is an ordered log of messages addressed by stream sequence. It knows nothing of
stream configuration: limits, discard policy, dedup and retention are decided by the
stream (`brook.jetstream.stream`) using the primitives below, so the memory and file
stores stay small and are held to one behavioural test suite (`tests/store/`).

Sequences start at `first_seq` of an empty store (1 unless configured) and grow by one per
stored message; they are never reused, even after every message is removed, nor (file
store) after a crash or damage took the newest records (docs/storage-format.md 7.6). `last_seq`
stays at the highest sequence ever assigned. Removing a message leaves a gap ("deleted")
unless it is the first message, in which case `first_seq` advances past it and any gap
that follows.

Durability contract: `store()` returns once the message is written to the operating
system; `sync()` (blocking, callable from a thread other than the one calling `store()`)
returns once everything stored before the call started is on stable storage. The stream
layer batches `sync()` calls (group commit) and sends PubAcks only after the covering
sync returns. Methods other than `sync()` are called from the event loop thread only.
After `close()` every method except `close()` itself (including `sync()`) raises
`StoreError`, so a late group commit fails loudly instead of acknowledging nothing.

Bytes accounting (`StreamState.bytes`) follows nats-server so KV and object-store
`max_bytes` limits behave identically: memory store `len(subject) + len(header) + len(data)
+ 16`; file store `30 + len(subject) + len(data)` without a header, `34 + len(subject) +
len(header) + len(data)` with one (`memory_msg_size` / `file_msg_size` below; lengths are
of the UTF-8 encoded subject). An empty header (`b""`) is no header: it is accounted as
none and loads back as `None`, so both stores agree and the file store need not tell the
two apart on disk.

State details, as nats-server reports them (wire reference §3.3), so the stream layer can
copy `state()` into STREAM.INFO unchanged:

* An empty store reports `first_seq = last_seq + 1`, or 0 while `last_seq` is 0 (a
  never-used stream starting at 1 reports `first_seq = 0, last_seq = 0`, even after a
  purge). A fresh store created with `first_seq=N` (N > 1) reports `first_seq = N`,
  `last_seq = N - 1`. `first_ts_ns` is 0 when empty.
* `last_ts_ns` is the timestamp of the message at `last_seq` and, like `last_seq`, stays
  after that message is removed or purged (0 if nothing was ever stored).
* `num_deleted = (last_seq - first_seq + 1) - messages` while not empty, else 0; `deleted`
  lists exactly those gap sequences, ascending. Removing or purging never changes
  `last_seq`, and `first_seq` is always the lowest stored sequence.
* `num_subjects` counts distinct subjects currently stored.

Filters: every filter argument (`filter_subject`, purge `subject`, `subjects_filter`) may
use `*` and `>` wildcards; `""` and `">"` match every subject (`filters.py` holds the one
matcher both stores use). Sequences returned in lists are ascending.
"""

from __future__ import annotations

import errno
import itertools
from array import array
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol


class StoreError(Exception):
    """The store cannot do what was asked (closed, I/O failure, corrupt beyond repair)."""


class StoreFullError(StoreError):
    """The filesystem has no room for a write (ENOSPC, EDQUOT). Nothing was changed: the
    same call can succeed once space is freed."""


NO_SPACE_ERRNOS = (errno.ENOSPC, errno.EDQUOT)


def is_no_space(exc: BaseException) -> bool:
    """A write failed because the filesystem is full (or the quota used up)."""
    return isinstance(exc, StoreFullError) or (
        isinstance(exc, OSError) and exc.errno in NO_SPACE_ERRNOS
    )


def write_error(what: str, exc: OSError) -> StoreError:
    """The StoreError for a failed write: `StoreFullError` when the disk is full."""
    kind = StoreFullError if is_no_space(exc) else StoreError
    return kind(f"{what}: {exc}")


# Stream info lists at most this many lost sequences (the lowest); `LostData.bytes` and
# the store's log cover them all.
LOST_SEQS_LISTED_MAX = 10_000


@dataclass(frozen=True, slots=True)
class LostData:
    """Sequences that were assigned to messages the store can no longer return: damage
    found when a file store was opened, or sequences a consumer saw before a crash took
    them (`skip_to`). nats-server's `state.lost` (`msgs`, `bytes`); `bytes` is what the
    damaged records occupied on disk, 0 when unknown."""

    msgs: tuple[int, ...]
    bytes: int


def add_lost(lost: LostData | None, seqs: Iterable[int], nbytes: int) -> LostData:
    """`lost` with the sequences `seqs` and `nbytes` bytes added (the lowest
    `LOST_SEQS_LISTED_MAX` sequences are listed)."""
    listed = set(lost.msgs) if lost else set()
    listed.update(itertools.islice(seqs, LOST_SEQS_LISTED_MAX))
    msgs = tuple(sorted(listed)[:LOST_SEQS_LISTED_MAX])
    return LostData(msgs, (lost.bytes if lost else 0) + nbytes)


NewMessage = tuple[str, bytes | None, bytes, int]
"""A message to store: subject, header (None or b"": none), data, timestamp (ns)."""


@dataclass(slots=True)
class StoredMessage:
    """One message as read from a store. Not frozen, as the store hands out one per read
    and a frozen dataclass's `__init__` costs four times as much; treat it as read-only."""

    seq: int
    subject: str
    header: bytes | None  # the raw NATS/1.0 header block, byte-exact, or None
    data: bytes
    ts_ns: int  # nanoseconds since the Unix epoch, UTC


@dataclass(frozen=True, slots=True)
class RecordSpan:
    """The records of messages at consecutive sequences from `first_seq`, as a file store
    read them and checked them (CRC included) to hand out those messages: `data`, read
    from segment offset `start`, holds the record of sequence `first_seq + i` at
    `offs[i] - start`, `lens[i]` bytes long (the segment's columns: offsets, lengths with
    the header bit, timestamps). A mirror stores its origin's messages at the same
    sequences and timestamps, so their records are these bytes: its file store writes
    them as they are (`MessageStore.store_run`) instead of encoding them again
    (ADR 0035). Only the file store makes and reads them."""

    first_seq: int
    data: bytes
    start: int
    offs: array[int]
    lens: array[int]
    tss: array[int]


def load_next_repeated(
    store: MessageStore, filter_subject: str, start_seq: int, max_count: int
) -> list[StoredMessage]:
    """`MessageStore.load_batch` done as `load_next` repeated: a store's plain version."""
    out: list[StoredMessage] = []
    while len(out) < max_count:
        m = store.load_next(filter_subject, start_seq)
        if m is None:
            break
        out.append(m)
        start_seq = m.seq + 1
    return out


@dataclass(slots=True)
class StreamState:
    messages: int = 0
    bytes: int = 0
    first_seq: int = 0
    first_ts_ns: int = 0  # 0 when the store is empty
    last_seq: int = 0
    last_ts_ns: int = 0
    num_deleted: int = 0  # gaps between first_seq and last_seq
    num_subjects: int = 0
    deleted: list[int] | None = None  # only when asked for (deleted_details)
    subjects: dict[str, int] | None = None  # only when asked for (subjects_filter)
    lost: LostData | None = None  # messages lost since the store was opened (LostData)


def memory_msg_size(subject: str, header: bytes | None, data: bytes) -> int:
    """Bytes the memory store accounts for one message (nats-server `memStoreMsgSize`)."""
    return len(subject.encode()) + (len(header) if header else 0) + len(data) + 16


def file_msg_size(subject: str, header: bytes | None, data: bytes) -> int:
    """Bytes the file store accounts for one message (nats-server `fileStoreMsgSize`)."""
    n = len(subject.encode()) + len(data)
    return n + 34 + len(header) if header else n + 30


@dataclass(frozen=True, slots=True)
class SubjectState:
    """Messages stored on subjects matching a filter."""

    messages: int = 0
    first_seq: int = 0
    last_seq: int = 0


@dataclass(slots=True)
class PurgeResult:
    purged: int = 0
    removed_seqs: list[int] = field(default_factory=list)  # for consumers' bookkeeping


class MessageStore(Protocol):
    """What a stream needs from its storage. See the module docstring for the contract."""

    def store(self, subject: str, header: bytes | None, data: bytes, ts_ns: int) -> int:
        """Append a message at `last_seq + 1`; returns its sequence."""
        ...

    def store_run(self, messages: Sequence[NewMessage], spans: Sequence[RecordSpan] = ()) -> None:
        """Append `messages` (subject, header, data, ts_ns) at `last_seq + 1` onwards, as
        many `store` calls would, in fewer writes (a mirror's run of deliveries). On a
        failure the messages before the failing one are stored (`last_seq` says how far).
        `spans` may hold the records of `messages` (at these sequences) as a file store
        read them: a file store writes those bytes rather than encoding the same again;
        any other store, or spans that do not cover them, changes nothing."""
        ...

    def load(self, seq: int) -> StoredMessage | None:
        """The message at `seq`, or None if it never existed or was removed."""
        ...

    def load_next(self, filter_subject: str, start_seq: int) -> StoredMessage | None:
        """The first message with seq >= start_seq whose subject matches the filter
        (`""` or `">"` match everything; wildcards allowed)."""
        ...

    def load_batch(
        self,
        filter_subject: str,
        start_seq: int,
        max_count: int,
        spans: list[RecordSpan] | None = None,
    ) -> list[StoredMessage]:
        """Up to `max_count` messages matching the filter from `start_seq` on, ascending:
        `load_next` repeated, in one call (a consumer's deliveries read in runs). A file
        store appends to `spans` the records it read them from (a mirror's origin)."""
        ...

    def load_last(self, filter_subject: str) -> StoredMessage | None:
        """The message with the highest sequence whose subject matches the filter."""
        ...

    def remove(self, seq: int, *, erase: bool = False) -> bool:
        """Remove one message; False if absent (never stored, already removed, or outside
        `first_seq..last_seq`: the caller tells "beyond the end" apart via `last_seq`).
        `erase` overwrites its bytes on disk too."""
        ...

    def purge(
        self, *, subject: str | None = None, up_to_seq: int = 0, keep: int = 0
    ) -> PurgeResult:
        """Remove messages: all, or those matching `subject` (wildcards allowed), only with
        seq < up_to_seq when given, keeping the newest `keep` (per the filter) when given.
        A full purge (no subject, no up_to_seq, no keep) sets first_seq = last_seq + 1.

        `keep` counts messages, not sequences: the newest `keep` messages matching the
        filter (across all its subjects together, as nats-server's filtered purge does)
        survive. With both `up_to_seq` and `keep` (the API rejects that combination, rollups
        never send it) a message is removed only if both would remove it. `up_to_seq=0`
        means "not given" and 1 removes nothing; past `last_seq` it removes everything but
        `last_seq` stays (nats-server would move `last_seq` to `up_to_seq - 1`; Brook never
        does). `purged == len(removed_seqs)`."""
        ...

    def state(
        self, *, deleted_details: bool = False, subjects_filter: str | None = None
    ) -> StreamState:
        """Counters in O(1); `deleted` filled only with `deleted_details`, `subjects` (a
        subject -> count map of subjects matching the filter) only when `subjects_filter`
        is not None. The stream layer calls this after every removal, so keep it cheap."""
        ...

    def last_seq(self) -> int:
        """`state().last_seq`, without building the state (a mirror asks it per message)."""
        ...

    def subject_state(self, filter_subject: str) -> SubjectState:
        """Count, first and last sequence of messages on subjects matching the filter."""
        ...

    def num_pending(self, filter_subject: str, start_seq: int) -> int:
        """How many messages matching the filter have seq >= start_seq (direct-get and
        consumer `num_pending`); must not scan every message for a literal filter."""
        ...

    def subject_counts(self, filter_subject: str) -> dict[str, int]:
        """Per-subject message counts for subjects matching the filter."""
        ...

    def last_seqs(self, filter_subject: str) -> list[int]:
        """The last sequence of every subject matching the filter, from the index (no
        message is read): deliver policy `last_per_subject` over a million KV keys."""
        ...

    def recent_headed(self, since_ns: int, most: int) -> list[int]:
        """Ascending, the sequences of the messages with a header among the newest `most`
        live messages stored at or after `since_ns`: the only ones that can carry a
        `Nats-Msg-Id`, so a restart rebuilds its duplicate window without reading the
        others (a file store answers from its index)."""
        ...

    def expire_before(self, ts_ns: int) -> list[int]:
        """Remove every message stored before `ts_ns` (max_age); returns removed sequences.

        Timestamps come from the stream's clock and are expected to be non-decreasing in
        sequence order, so an implementation may stop at the first message (in sequence
        order) whose `ts_ns >= ts_ns` instead of scanning the whole store."""
        ...

    def skip_to(self, last_seq: int) -> None:
        """Sequences up to `last_seq` count as assigned although no message holds them:
        `last_seq` rises to it (never falls) and the next message gets `last_seq + 1`. The
        skipped sequences are reported as lost. For a stream whose durable consumers saw
        sequences that a crash took from the store, so they are never handed out twice."""
        ...

    def truncate(self, last_seq: int) -> None:
        """Take the store back to `last_seq`, as if no message above it had been stored:
        those are gone and the next message gets `last_seq + 1`; what was removed up to
        `last_seq` stays removed. For a tail no reader has seen (what a crash left of an
        atomic batch's commit, cut when its stream opens)."""
        ...

    def skip_msgs(self, last_seq: int) -> None:
        """Sequences up to `last_seq` count as assigned and deleted (nats-server's
        `SkipMsgs`): `last_seq` rises to it (never falls), the next message gets
        `last_seq + 1`, and the skipped sequences are gaps like removed messages (not
        lost). A mirror stores its origin's messages at their own sequences this way.
        Durable with the next `sync()`."""
        ...

    def sync(self) -> None:
        """Make everything stored so far durable. Thread-safe against store() calls."""
        ...

    def close(self) -> None:
        """Sync and release resources; idempotent."""
        ...
