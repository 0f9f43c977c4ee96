"""Atomic batch publishes (`allow_atomic`, ADR-50), as nats-server 2.12+ handles them on
one server (`processJetStreamAtomicBatchMsg`).

A message with a non-empty `Nats-Batch-Id` belongs to a batch of its stream: numbered by
`Nats-Batch-Sequence` from 1 without gaps, staged here (answered with an empty message)
until one carries `Nats-Batch-Commit: 1` (itself stored) or `eob` (an end marker, not
stored). The commit checks the batch as a whole, then stores every message in order and
answers with one PubAck naming the batch and its size (`"batch"`, `"count"`); a batch
that fails is dropped whole and nothing of it is stored. Batches are keyed by stream and
id, as nats-server keys them, whoever sends them. A message asking a higher API level
(`Nats-Required-Api-Level`) drops its batch with 10185; otherwise that header is not kept.

Limits (nats-server's, `limits.py`): messages per batch, batches staged per stream and
per server, and the time a batch may wait for its next message. Each stream's batches
have one idle timer (`DeadlineTimer`, timer.py, on the engine's clock), armed at the
oldest batch's deadline when there is none and re-armed when it fires: a message costs no
timer operation. A batch past its time is abandoned when the timer fires, or before, when
it is touched or room is needed.

A batch abandoned for its time, a gap, its size or a required API level is announced as
nats-server announces it (`$JS.EVENT.ADVISORY.STREAM.BATCH_ABANDONED.<stream>`,
`abandoned_advisory`); other errors (a bad commit value, an unknown batch, the checks of
the commit) drop the batch without one, as there.

A crash while a commit writes its messages leaves the batch's first messages without the
last, which carries the commit: the stream cuts its store back to before them when it
opens again (`uncommitted_tail`, `MessageStore.truncate`), so that a batch is stored whole
or not at all and its sequences are free again.
"""

from __future__ import annotations

import asyncio
import secrets
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

from brook import limits
from brook.jetstream import counters, versioning
from brook.jetstream import publish_headers as ph
from brook.jetstream import ttl as ttls
from brook.jetstream.advisories import go_json
from brook.jetstream.dedup import MSG_ID
from brook.jetstream.errors import api_error
from brook.jetstream.models.info import format_ts_ns
from brook.jetstream.schedules import NEXT, SCHEDULER, check_schedule
from brook.jetstream.schedules import PREFIX as SCHEDULE_PREFIX
from brook.jetstream.store.base import MessageStore
from brook.jetstream.timer import DeadlineTimer
from brook.protocol import headers as hdrs

if TYPE_CHECKING:
    from brook.jetstream.stream import Stream

BATCH_ID = b"Nats-Batch-Id"
_BATCH_SEQ = b"Nats-Batch-Sequence"
_BATCH_COMMIT = b"Nats-Batch-Commit"
_BATCH_ID_BYTES_MAX = 64
_EXPECTED_LAST_MSG_ID_RAW = ph.EXPECTED_LAST_MSG_ID.encode()
ABANDONED_SUBJECT = "$JS.EVENT.ADVISORY.STREAM.BATCH_ABANDONED"
_ABANDONED_TYPE = "io.nats.jetstream.advisory.v1.stream_batch_abandoned"
# nats-server's reasons (`BatchAbandonReason`, jetstream_events.go).
TIMEOUT, LARGE, INCOMPLETE, UNSUPPORTED = "timeout", "large", "incomplete", "unsupported"

Abandoned = Callable[[str, str], None]  # (batch id, reason): the stream announces it


@dataclass(slots=True)
class BatchLimits:
    """The bounds on staged atomic batches (server-wide settings), the batches staged
    now, and the event loop their idle timers run on (set when the engine starts)."""

    size_max: int = limits.ATOMIC_BATCH_SIZE_MAX
    inflight_per_stream: int = limits.ATOMIC_BATCH_INFLIGHT_PER_STREAM
    inflight_total: int = limits.ATOMIC_BATCH_INFLIGHT_TOTAL
    timeout_ns: int = limits.ATOMIC_BATCH_TIMEOUT_NS
    fast_inflight_per_stream: int = limits.FAST_BATCH_INFLIGHT_PER_STREAM
    fast_inflight_total: int = limits.FAST_BATCH_INFLIGHT_TOTAL
    inflight: int = 0  # batches staged now, across streams
    fast_inflight: int = 0  # fast batches in progress now, across streams (fast_batch.py)
    # The streams' batch sets holding any batch: swept for idle batches before a new
    # batch is refused for the server's limit.
    holders: set[AtomicBatches] = field(default_factory=set)
    loop: asyncio.AbstractEventLoop | None = None

    def statistics(self) -> dict[str, int]:
        """For monitoring (`/varz` jetstream.brook_batches)."""
        return {
            "inflight": self.inflight,
            "max_inflight_total": self.inflight_total,
            "max_inflight_per_stream": self.inflight_per_stream,
            "max_msgs": self.size_max,
            "timeout": self.timeout_ns,
            "fast_inflight": self.fast_inflight,
            "max_fast_inflight_total": self.fast_inflight_total,
            "max_fast_inflight_per_stream": self.fast_inflight_per_stream,
        }


@dataclass(slots=True)
class StagedMessage:
    subject: str
    header: bytes
    data: bytes


@dataclass(slots=True)
class _Batch:
    touched_ns: int
    messages: list[StagedMessage] = field(default_factory=list)


@dataclass(slots=True)
class Commit:
    """A complete batch, checked, for the stream to store in order."""

    batch_id: str
    messages: list[StagedMessage]


class _Touched(Protocol):
    touched_ns: int  # the batch's last activity


_B = TypeVar("_B", bound=_Touched)


class IdleBatches(Generic[_B]):
    """One stream's batches of one kind (atomic here, fast in fast_batch.py) by id, oldest
    activity first, with the idle timer that ends those idle past the batch timeout
    (`timed_out`). `now_ns` is the engine's clock."""

    def __init__(self, limits_: BatchLimits, now_ns: Callable[[], int]) -> None:
        self._limits = limits_
        self._now_ns = now_ns
        self._batches: OrderedDict[str, _B] = OrderedDict()
        # Fires at the oldest batch's deadline or earlier (`sweep` re-arms it).
        self.timer = DeadlineTimer(self.sweep, limits_.loop, now_ns)

    def __len__(self) -> int:
        return len(self._batches)

    def sweep(self) -> int | None:
        """The idle timer's work: end the batches idle past the timeout; the moment the
        oldest batch left will be, or None when none is left."""
        self._expire(self._now_ns())
        for oldest in self._batches.values():
            return oldest.touched_ns + self._limits.timeout_ns
        return None

    def _expire(self, now_ns: int) -> None:
        deadline = now_ns - self._limits.timeout_ns
        batches = self._batches
        while batches:
            key, oldest = next(iter(batches.items()))
            if oldest.touched_ns > deadline:
                return
            self.timed_out(key)

    def timed_out(self, key: str) -> None:
        """Batch `key` was idle past the timeout: dropped, as its kind drops it."""
        raise NotImplementedError


class AtomicBatches(IdleBatches[_Batch]):
    """One stream's batches being staged. `abandoned` is told of each batch abandoned for
    a reason nats-server announces."""

    def __init__(
        self, limits_: BatchLimits, now_ns: Callable[[], int], abandoned: Abandoned
    ) -> None:
        super().__init__(limits_, now_ns)
        self._abandoned = abandoned

    def add(self, batch_id: bytes, subject: str, header: bytes, data: bytes) -> Commit | None:
        """Stage one message of a batch: None while the batch goes on, its `Commit` when
        this message ends it. Raises the `ApiError` to answer (the batch is dropped)."""
        lim = self._limits
        now_ns = self._now_ns()
        self._expire(now_ns)
        if len(batch_id) > _BATCH_ID_BYTES_MAX:
            raise api_error("ATOMIC_PUBLISH_INVALID_BATCH_ID")
        raw_seq = hdrs.raw_value(header, _BATCH_SEQ)
        if raw_seq is None or not raw_seq.isdigit():
            raise api_error("ATOMIC_PUBLISH_MISSING_SEQ")
        seq = int(raw_seq)
        commit = hdrs.raw_value(header, _BATCH_COMMIT)
        eob = commit == b"eob"
        key = batch_id.decode("utf-8", "surrogateescape")
        batch = self._batches.get(key)
        if batch is None:
            if seq != 1:
                if seq - eob > lim.size_max:
                    raise api_error("ATOMIC_PUBLISH_TOO_LARGE_BATCH", size=lim.size_max)
                raise api_error("ATOMIC_PUBLISH_INCOMPLETE_BATCH")
            if len(self._batches) + 1 > lim.inflight_per_stream:
                raise api_error("ATOMIC_PUBLISH_TOO_MANY_INFLIGHT")
            if lim.inflight + 1 > lim.inflight_total:
                for holder in list(lim.holders):  # other streams' idle batches go first
                    holder._expire(now_ns)
                if lim.inflight + 1 > lim.inflight_total:
                    raise api_error("ATOMIC_PUBLISH_TOO_MANY_INFLIGHT")
            batch = self._batches[key] = _Batch(now_ns)
            lim.inflight += 1
            lim.holders.add(self)
            if self.timer.at is None:
                self.timer.arm(now_ns + lim.timeout_ns)
        if commit is not None and commit not in (b"1", b"eob"):
            self._drop(key)
            raise api_error("ATOMIC_PUBLISH_INVALID_BATCH_COMMIT")
        if hdrs.raw_value(header, versioning.REQUIRED_API_LEVEL_HEADER):  # not when empty
            if versioning.refuses(header):  # the whole batch, as nats-server
                self._drop(key, UNSUPPORTED)
                raise api_error("REQUIRED_API_LEVEL")
            header = versioning.without_header(header)
        batch.touched_ns = now_ns
        self._batches.move_to_end(key)
        if seq != len(batch.messages) + 1 or (seq == 1 and eob):
            self._drop(key, INCOMPLETE)
            raise api_error("ATOMIC_PUBLISH_INCOMPLETE_BATCH")
        if seq - eob > lim.size_max:
            self._drop(key, LARGE)
            raise api_error("ATOMIC_PUBLISH_TOO_LARGE_BATCH", size=lim.size_max)
        if not eob:
            batch.messages.append(StagedMessage(subject, header, data))
        if commit is None:
            return None
        self._drop(key)
        if eob:  # the last stored message carries the commit, as nats-server writes it
            last = batch.messages[-1]
            last.header = last.header[:-2] + b"Nats-Batch-Commit: 1\r\n\r\n"
        return Commit(key, batch.messages)

    def clear(self) -> None:
        """Drop every staged batch (`allow_atomic` turned off, the stream deleted), as
        nats-server does: without advisories."""
        self._limits.inflight -= len(self._batches)
        self._batches.clear()
        self._limits.holders.discard(self)
        self.timer.cancel()

    def _drop(self, key: str, reason: str | None = None) -> None:
        if self._batches.pop(key, None) is not None:
            self._limits.inflight -= 1
            if not self._batches:
                self._limits.holders.discard(self)
            if reason is not None:
                self._abandoned(key, reason)

    def timed_out(self, key: str) -> None:
        self._drop(key, TIMEOUT)  # abandoned, with its advisory


def check_commit(stream: Stream, commit: Commit) -> None:
    """The checks nats-server makes of every message of a batch before it stores any
    (`checkMsgHeadersPreClusteredProposal`, in its order), so that a batch that fails
    them stores nothing: headers a batch cannot use, increments, expected stream, TTLs,
    message ids (a repeat within the batch or the duplicate window fails the batch),
    expected last sequence (counting the batch's messages before, and then refused on
    any but the first), last subject sequence (not on a subject the batch wrote before),
    rollups (`all` first only, `sub` on a subject's first message only) and the
    discard-new limits with the batch so far."""
    config = stream.config
    ids: set[str] = set()
    written: dict[str, int] = {}  # subject -> messages of the batch before this one
    added_bytes = 0
    for index, message in enumerate(commit.messages):
        header = message.header
        if hdrs.raw_value(header, _EXPECTED_LAST_MSG_ID_RAW):
            raise api_error("ATOMIC_PUBLISH_UNSUPPORTED_HEADER", header=ph.EXPECTED_LAST_MSG_ID)
        if len(header) > ph.MAX_HEADER_BYTES:
            raise api_error("STREAM_HEADER_EXCEEDS_MAXIMUM")
        if header.find(counters.INCR) >= 0:
            counters.check_increment(header, message.data, config.allow_msg_counter)
        try:
            block = hdrs.parse(header)
        except hdrs.HeaderError:
            block = None
        if block is not None:
            _check_batched_headers(stream, block, message, index, ids, written)
        subject = message.subject
        written[subject] = written.get(subject, 0) + 1
        added_bytes += stream.accounted_size(subject, header, message.data)
        if config.discard == "new":
            rollup = block is not None and block.get(ph.ROLLUP) is not None
            _check_batch_discard_new(stream, subject, index + 1, added_bytes, written, rollup)


def _check_batch_discard_new(
    stream: Stream,
    subject: str,
    count: int,
    added_bytes: int,
    written: dict[str, int],
    rollup: bool,
) -> None:
    """nats-server's discard-new limits for a batch: the stream with the batch so far."""
    config = stream.config
    state = stream.store.state()
    if 0 < config.max_msgs < state.messages + count:
        raise api_error("STREAM_STORE_FAILED", err="maximum messages exceeded")
    if 0 < config.max_bytes < state.bytes + added_bytes:
        raise api_error("STREAM_STORE_FAILED", err="maximum bytes exceeded")
    per_subject = config.max_msgs_per_subject
    if config.discard_new_per_subject and per_subject > 0 and not rollup:
        on_subject = stream.store.subject_state(subject).messages + written[subject]
        if on_subject > per_subject:
            raise api_error("STREAM_STORE_FAILED", err="maximum messages per subject exceeded")


def _check_batched_headers(
    stream: Stream,
    block: hdrs.HeaderBlock,
    message: StagedMessage,
    index: int,
    ids: set[str],
    written: dict[str, int],
) -> None:
    """One message's JetStream headers, checked as part of its batch."""
    config = stream.config
    header = message.header
    expected = block.get(ph.EXPECTED_STREAM)
    if expected is not None and expected != stream.name:
        raise api_error("STREAM_NOT_MATCH")
    ttl_value = ttls.header_value(header)
    if ttl_value:
        if not config.allow_msg_ttl:
            raise api_error("MESSAGE_TTL_DISABLED")
        try:
            ttls.parse_ttl(ttl_value)
        except ttls.InvalidTTL:
            raise api_error("MESSAGE_TTL_INVALID") from None
    msg_id = block.get(MSG_ID)
    if msg_id:
        if msg_id in ids or stream.dedup.lookup(msg_id) is not None:
            raise api_error("ATOMIC_PUBLISH_DUPLICATE_MESSAGE")
        ids.add(msg_id)
    value = block.get(ph.EXPECTED_LAST_SEQ)
    if value is not None:
        # As nats-server counts it: the messages of the batch before this one.
        last = stream.store.state().last_seq + index
        if ph.uint(value) != last:
            raise api_error("STREAM_WRONG_LAST_SEQUENCE", seq=last)
        if index:
            raise api_error("STREAM_WRONG_LAST_SEQUENCE_CONSTANT")
    value = block.get(ph.EXPECTED_LAST_SUBJ_SEQ)
    if value is not None:
        if message.subject in written:
            raise api_error("STREAM_WRONG_LAST_SEQUENCE_CONSTANT")
        last = stream.store.subject_state(message.subject).last_seq
        if ph.uint(value) != last:
            raise api_error("STREAM_WRONG_LAST_SEQUENCE", seq=last)
    if header.find(SCHEDULE_PREFIX) >= 0:
        check_schedule(stream, header, message.subject)
    rollup = block.get(ph.ROLLUP) or None
    if rollup is not None:
        rollup = rollup.lower()
        if not config.allow_rollup_hdrs or config.deny_purge:
            raise api_error("STREAM_ROLLUP_FAILED", err="rollup not permitted")
        if rollup == "sub" and message.subject in written:
            raise api_error("STREAM_ROLLUP_FAILED", err="batch rollup sub invalid")
        if rollup == "all" and written:
            raise api_error("STREAM_ROLLUP_FAILED", err="batch rollup all invalid")
        if rollup not in ("sub", "all"):
            raise api_error("STREAM_ROLLUP_FAILED", err=f'rollup value invalid: "{rollup}"')


def abandoned_advisory(
    stream: str, batch_id: str, reason: str, now_ns: int, domain: str = ""
) -> tuple[bytes, bytes]:
    """nats-server's `JSStreamBatchAbandonedAdvisory` as its account sees it: subject and
    JSON bytes (Go's key order, compact, Go's escapes; no `account`: nats-server names it
    only in the copy it sends to the system account; `domain` after `stream` when the
    server has one, as `sendStreamBatchAbandonedAdvisory` sets it)."""
    body = {
        "type": _ABANDONED_TYPE,
        "id": secrets.token_hex(11),
        "timestamp": format_ts_ns(now_ns),
        "stream": stream,
    }
    if domain:
        body["domain"] = domain
    body["batch"] = batch_id
    body["reason"] = reason
    return f"{ABANDONED_SUBJECT}.{stream}".encode(), go_json(body)


def uncommitted_tail(store: MessageStore) -> range:
    """The sequences of a batch whose commit was cut short: a commit writes its messages
    one after another in one turn of the event loop, the last one with its
    `Nats-Batch-Commit`, so only a crash in between leaves the newest stored message with
    a batch id and no commit. Its `Nats-Batch-Sequence` says how many came before it, all
    directly before it, numbered from 1 under the same id (anything else is no commit of
    Brook's: a fast batch may store such headers as data). Empty when there is none, and
    when the newest message is one a schedule stored by a batch produced (schedules.py):
    it keeps the batch's headers."""
    last = store.load_last(">")
    if last is None or not last.header or last.header.find(BATCH_ID) < 0:
        return range(0)
    header = last.header
    batch_id = hdrs.raw_value(header, BATCH_ID)
    if not batch_id or hdrs.raw_value(header, _BATCH_COMMIT) is not None:
        return range(0)
    if hdrs.raw_value(header, SCHEDULER) and hdrs.raw_value(header, NEXT):
        return range(0)
    raw_seq = hdrs.raw_value(header, _BATCH_SEQ)
    if raw_seq is None or not raw_seq.isdigit() or not 0 < int(raw_seq) <= last.seq:
        return range(0)
    tail = range(last.seq - int(raw_seq) + 1, last.seq + 1)
    for number, seq in enumerate(tail, 1):
        msg = store.load(seq)
        if msg is None:  # removed by the batch's own rollup or limits
            continue
        if (
            not msg.header
            or hdrs.raw_value(msg.header, BATCH_ID) != batch_id
            or hdrs.raw_value(msg.header, _BATCH_SEQ) != b"%d" % number
            or hdrs.raw_value(msg.header, _BATCH_COMMIT) is not None
        ):
            return range(0)
    return tail
