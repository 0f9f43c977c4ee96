"""A run of a source's messages stored in one pass (`Stream.ingest_sourced_run`, ADR 0049).

A source's link hands over its origin's deliveries a run at a time (link_runs.py), and
most of a run needs nothing of a publish's checks but a few comparisons: a header with no
JetStream header besides the `Nats-Stream-Source` its source wrote (and perhaps a
`Nats-Msg-Id` not seen yet), a size under the stream's limits, room under a discard-new
limit. Such messages (`_plain_prefix`) are stored together (`MessageStore.store_run`, one
write per segment), their ids remembered, then the discard-old limits applied once, as a
mirror's run is (`StreamLimits.apply_limits`; the messages left are the same as after one
message at a time). Every other message, and every message of a stream whose features
need each message on its own (republish, counters, schedules, sealed, a discard-new
per-subject limit), goes through `Stream.ingest_sourced`, the path of one message, which
makes its own checks and gives its own error: a run stops at the first message refused,
the messages before it stored, as nats-server's `processInboundSourceMsg` stops.

The fast path decides only that a message surely passes; it never refuses one itself, so
the errors, their order and what a refusal leaves are the single path's.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from brook.jetstream import publish_headers
from brook.jetstream.dedup import MSG_ID
from brook.jetstream.errors import ApiError
from brook.jetstream.ingested import Ingested, SourcedRun
from brook.jetstream.publish_headers import MAX_HEADER_BYTES
from brook.jetstream.sourcing import STREAM_SOURCE_HEADER
from brook.jetstream.store.base import NewMessage, StoreError
from brook.protocol import headers as hdrs

if TYPE_CHECKING:
    from brook.jetstream.dedup import DedupWindow
    from brook.jetstream.expiry import StreamExpiry
    from brook.jetstream.models.stream_config import StreamConfig
    from brook.jetstream.quota import Quota
    from brook.jetstream.republish import Republisher
    from brook.jetstream.retention import StreamRetention
    from brook.jetstream.schedules import ScheduleIndex
    from brook.jetstream.space import StoreSpace
    from brook.jetstream.store.base import MessageStore

SourcedMessage = tuple[str, bytes, bytes]
"""A source's message as the stream stores it: subject (transforms applied), header
(`Nats-Stream-Source` written), data."""

_NATS = b"Nats-"
_SOURCE_LINE = b"\r\n" + STREAM_SOURCE_HEADER.encode() + b":"
_PLAIN_NAMES = (MSG_ID, STREAM_SOURCE_HEADER)
_SUBJECT = operator.itemgetter(0)
_UNLIMITED = 1 << 62  # room where there is no limit


def plain_msg_id(header: bytes) -> str | None:
    """The `Nats-Msg-Id` of a sourced message's `header` ("" for none) when its only
    JetStream headers are `Nats-Stream-Source` and `Nats-Msg-Id`, which a source's message
    needs no check for but dedup; None when it has others (a TTL, a rollup, a counter's
    increment...) or is no header block a parse reads: the single path's. (Most have
    only the source's line: `_plain_prefix` tells those at once.)"""
    try:
        block = hdrs.parse(header)
    except hdrs.HeaderError:
        return None
    return publish_headers.plain_msg_id(block, _PLAIN_NAMES)


class StreamSourcedRuns:
    """`Stream`'s part that stores a source's runs (a mixin, ADR 0031)."""

    if TYPE_CHECKING:  # what it uses of `Stream`, which sets all of it
        config: StreamConfig
        store: MessageStore
        dedup: DedupWindow
        expiry: StreamExpiry
        retention: StreamRetention | None
        quota: Quota | None
        space: StoreSpace | None
        schedules: ScheduleIndex | None
        now_ns: Callable[[], int]
        _republish: Republisher | None
        _removed: list[int]

        def ingest_sourced(self, subject: str, header: bytes, data: bytes) -> Ingested: ...
        def store_refused(self, exc: StoreError) -> ApiError: ...
        def write_failed(self, what: str, error: StoreError) -> None: ...
        def accounted_size(self, subject: str, header: bytes | None, data: bytes) -> int: ...
        def _enforce_subject_limit(self, subject: str) -> None: ...
        def _enforce_stream_limits(self) -> None: ...
        def _report_removed(self) -> None: ...

    def ingest_sourced_run(self, run: Sequence[SourcedMessage]) -> SourcedRun:
        """Store a source's `run` (at least one message) as `ingest_sourced` would one
        message after the other (module docstring): the plain stretches together, the
        rest one by one, up to the first message refused. The caller asks for the sync."""
        config = self.config
        together = not (
            self._republish is not None
            or config.sealed
            or config.allow_msg_counter
            or self.schedules is not None
            or (config.discard == "new" and config.max_msgs_per_subject > 0)
        )
        done = SourcedRun(0, 0, [])
        n = len(run)
        while done.taken < n:
            if together:
                end, ids, nbytes = self._plain_prefix(run, done.taken)
                if end > done.taken and not self._store_plain(run, end, ids, nbytes, done):
                    return done
            if done.taken == n:
                break
            subject, header, data = run[done.taken]
            result = self.ingest_sourced(subject, header, data)
            done.last = result
            if result.error is not None:
                done.error = result.error
                return done
            done.taken += 1
            if not result.duplicate:
                done.stored = done.taken
                if result.kept:
                    done.kept.append((subject, result.seq))
        return done

    def _plain_prefix(
        self, run: Sequence[SourcedMessage], start: int
    ) -> tuple[int, list[str], int]:
        """How far from `start` the messages of `run` surely pass the checks of one
        message with no more than dedup (`plain_msg_id`, an id neither remembered nor
        repeated), their sizes (`max_msg_size`, a discard-new `max_msgs`/`max_bytes` with
        the messages before them, the free-space budget, the store quota, last as it
        counts what it admits), and, in an interest stream, a consumer that wants them;
        with their `Nats-Msg-Id`s ("" for none) and their bytes as the free-space budget
        counts them."""
        config = self.config
        max_size = config.max_msg_size
        discard_new = config.discard == "new" and (config.max_msgs > 0 or config.max_bytes > 0)
        room_msgs = room_bytes = _UNLIMITED  # below 1: a stream at (or over) its limit
        bytes_limited = discard_new and config.max_bytes > 0
        if discard_new:
            state = self.store.state()
            if config.max_msgs > 0:
                room_msgs = config.max_msgs - state.messages
            if config.max_bytes > 0:
                room_bytes = config.max_bytes - state.bytes
        retention = self.retention if config.retention == "interest" else None
        quota, dedup = self.quota, self.dedup
        budget = self.space.budget if self.space is not None else _UNLIMITED
        ids: list[str] = []
        seen: set[str] = set()
        total = 0  # bytes as the free-space budget counts them
        end = start
        for i in range(start, len(run)):  # no copy of the run: this runs after each slow one
            subject, header, data = run[i]
            size = len(header) + len(data)
            if 0 <= max_size < size or len(header) > MAX_HEADER_BYTES:
                break
            msg_id = ""
            if header.count(_NATS) != 1 or _SOURCE_LINE not in header:  # more than its line
                found = plain_msg_id(header)
                if found is None:
                    break
                msg_id = found
            if msg_id:
                if msg_id in seen or dedup.lookup(msg_id) is not None:
                    break
                seen.add(msg_id)
            if retention is not None and not retention.wanted(subject):
                break
            if discard_new:
                if room_msgs <= 0:
                    break
                if bytes_limited:
                    accounted = self.accounted_size(subject, header, data)
                    if accounted > room_bytes:
                        break
                    room_bytes -= accounted
                room_msgs -= 1
            if total + size >= budget:
                break
            if quota is not None:
                try:
                    quota.admit(self.accounted_size(subject, header, data))
                except ApiError:
                    break
            total += size
            ids.append(msg_id)
            end += 1
        return end, ids, total

    def _store_plain(
        self,
        run: Sequence[SourcedMessage],
        end: int,
        ids: list[str],
        nbytes: int,
        done: SourcedRun,
    ) -> bool:
        """Store `run[done.taken:end]` (`_plain_prefix`'s: their ids, their bytes) in one
        `store_run`, then what storing one message does after its write: its id
        remembered, the max_age wake-up, the discard-old limits (once), what they removed
        reported; `done` brought up to date. False when the store failed: `done.error`
        says how, for the first message not stored."""
        start = done.taken
        now = self.now_ns()
        store = self.store
        before = store.last_seq()
        piece: list[NewMessage] = [(s, h, d, now) for s, h, d in run[start:end]]
        if self.space is not None:
            self.space.admit(nbytes)  # within its budget (`_plain_prefix`): no reading
        failure = None
        try:
            store.store_run(piece)
        except StoreError as exc:
            failure = self.store_refused(exc)
        count = store.last_seq() - before
        if count:
            config = self.config
            if config.max_age > 0 and self.expiry.next_wakeup_ns is None:
                self.expiry.wake_by(now + config.max_age)
            if any(ids):
                remember = self.dedup.remember
                for k, msg_id in enumerate(ids[:count]):
                    if msg_id:
                        remember(msg_id, before + 1 + k, now)
            self.dedup.last_id = ids[count - 1]
            seqs = range(before + 1, before + 1 + count)
            done.kept.extend(zip(map(_SUBJECT, piece), seqs, strict=False))  # the stored
            try:
                if config.max_msgs_per_subject > 0:
                    for subject in {m[0] for m in piece[:count]}:
                        self._enforce_subject_limit(subject)
                self._enforce_stream_limits()
            except StoreError as exc:  # the messages are stored: they stand
                self.write_failed(f"apply the limits after storing {before + count}", exc)
            if self._removed:
                self._report_removed()
            done.taken = done.stored = start + count
            done.last = Ingested(before + count, True)
        if failure is not None:
            done.error = failure
            done.last = Ingested(0, False, False, failure)
            return False
        return True
