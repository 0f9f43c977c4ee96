"""A stream's way in, compiled: its subscription handler (`Ingress`) and the usual
publish's short path (`PlainPublish`), ADR 0067.

Every message published to a stream's subjects reaches `Ingress.__call__` from the router
(an in-process subscription's handler, sublist.py). The usual publish (a PubAck wanted, no
header but a `Nats-Msg-Id`, a stream whose configuration asks for no more than dedup, the
limits and the store: ADR 0062) is stored, acknowledged through the durability gate and
told to the consumers it concerns here, in compiled code, without an interpreted frame;
every other message goes to `Stream.ingest`, which makes all of nats-server's checks and
answers, then to the same consumer and expiry steps. `Stream.ingest` stores a plain
message by the same `PlainPublish.store` (one path for what is stored and how: the
property tests compare it with `Stream._ingest`).

The stream is an interpreted class: this module reaches it only for what is rare (a
discard-new check, the discard-old limits, a failed write, an error's PubAck) through
`StreamHooks`, and holds what a publish uses in attributes of its own, set when the stream
is configured (`Stream.reconfigure` makes a new `PlainPublish`; the engine makes a new
`Ingress` after every reconfiguration).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from mypy_extensions import i64

from brook.jetstream.commit import GroupCommitter
from brook.jetstream.consumer_index import ConsumerIndex
from brook.jetstream.dedup import DedupWindow
from brook.jetstream.errors import ApiError, api_error
from brook.jetstream.expiry import StreamExpiry
from brook.jetstream.fast_reply import SUFFIX as FAST_SUFFIX
from brook.jetstream.ingested import Ingested
from brook.jetstream.publish_headers import plain_publish_id
from brook.jetstream.quota import Quota
from brook.jetstream.space import StoreSpace
from brook.jetstream.store.base import MessageStore, StoreError


class StreamHooks(Protocol):
    """What the compiled paths use of `Stream` (stream.py), each call rare but `ingest`."""

    def ingest(
        self, subject: bytes, reply: bytes | None, header: bytes | None, data: bytes
    ) -> Ingested: ...
    def answer(self, reply: bytes | None, result: Ingested) -> None: ...
    def accounted_size(self, subject: str, header: bytes | None, data: bytes) -> int: ...
    def _check_discard_new(
        self, subject: str, header: bytes | None, data: bytes, rollup: str | None
    ) -> None: ...
    def _enforce_limits(self, subject: str) -> None: ...
    def _report_removed(self) -> None: ...
    def store_refused(self, exc: StoreError) -> ApiError: ...
    def write_failed(self, what: str, error: StoreError) -> None: ...


class Rearm(Protocol):
    """The engine's expiry timer (expiry_timer.py): `at`, when armed, and `arm`."""

    at: int | None

    def arm(self, deadline: int) -> None: ...


def pub_ack(stream_json: bytes, seq: int) -> bytes:
    """The PubAck of a plain publish, as `PlainPublish.store` says: stored at `seq`
    (> 0), or a duplicate of message -`seq` (nats-server's bytes, `"duplicate": true`
    with its blank). `stream_json`: the stream's name (and domain) as the PubAck has it."""
    if seq > 0:
        return b'{"stream":%b,"seq":%d}' % (stream_json, seq)
    return b'{"stream":%b,"seq":%d,"duplicate": true}' % (stream_json, -seq)


class PlainPublish:
    """`Stream._ingest`'s steps for the usual publish and no other test: a stream not
    sealed whose configuration asks for no more than dedup, the limits and the store
    (`Stream.reconfigure` makes one only for such a stream), a message within
    `max_msg_size` with no header but a `Nats-Msg-Id` (`plain_publish_id`)."""

    def __init__(
        self,
        stream: StreamHooks,
        store: MessageStore,
        dedup: DedupWindow,
        expiry: StreamExpiry,
        removed: list[int],
        now_ns: Callable[[], int],
        *,
        max_msg_size: int,
        discard_new: bool,
        max_age: int,
        limits: bool,
        quota: Quota | None,
        space: StoreSpace | None,
    ) -> None:
        self.stream = stream
        self.store_ = store
        self.dedup = dedup
        self.expiry = expiry
        self.removed = removed  # `Stream._removed` itself (emptied in place)
        self.now_ns = now_ns
        self.max_msg_size: i64 = max_msg_size
        self.discard_new = discard_new
        self.max_age: i64 = max_age
        self.limits = limits  # a discard-old limit is set
        self.quota = quota
        self.space = space

    def store(self, raw_subject: bytes, header: bytes | None, data: bytes) -> int:
        """Store the message if it is a plain one: its sequence; a duplicate's -sequence
        of the message first stored with its id; 0, having done nothing, for any other
        message (`Stream._ingest` takes it). Raises the `ApiError` to answer (a limit, no
        room, a failed write), having stored nothing."""
        msg_id = plain_publish_id(header)
        if msg_id is None:
            return 0
        size: i64 = len(data)
        if header is not None:
            size += len(header)
        if 0 <= self.max_msg_size < size:
            return 0
        dedup = self.dedup
        if msg_id:
            seen = dedup.lookup(msg_id)
            if seen is not None:
                return -seen
        subject = raw_subject.decode("utf-8", "surrogateescape")
        stream = self.stream
        quota = self.quota
        if quota is not None:
            quota.admit(stream.accounted_size(subject, header, data))
        space = self.space
        if space is not None and not space.admit(size):
            raise api_error("INSUFFICIENT_RESOURCES")
        if self.discard_new:
            stream._check_discard_new(subject, header, data, None)
        now = self.now_ns()
        try:
            seq = self.store_.store(subject, header, data, now)
        except StoreError as exc:
            raise stream.store_refused(exc) from None
        max_age = self.max_age
        if max_age > 0:
            expiry = self.expiry
            if expiry.next_wakeup_ns is None:
                expiry.wake_by(now + max_age)
        if msg_id:
            dedup.remember(msg_id, seq, now)
        dedup.last_id = msg_id
        if self.limits:
            try:
                stream._enforce_limits(subject)
            except StoreError as exc:  # the message is stored: its ack stands
                stream.write_failed(f"apply the rollup or limits after storing {seq}", exc)
        if self.removed:
            stream._report_removed()
        return seq


class Ingress:
    """A stream's subscription handler: what the engine's ingest callback did (ADR 0012),
    the usual publish in compiled code. A stored message concerns only the consumers whose
    filter matches it (`ConsumerIndex`); a publish that brings an expiry forward re-arms
    the stream's timer. (What a publish removed reached the consumers already: the
    stream's `on_removed`, `on_purge`.)"""

    def __init__(
        self,
        stream: StreamHooks,
        plain: PlainPublish | None,
        committer: GroupCommitter | None,
        send_ack: Callable[[bytes, bytes], object],
        stream_json: bytes,
        consumers: ConsumerIndex[Any],
        stored: Callable[[list[Any], int], None],
        expiry: StreamExpiry,
        timer: Rearm,
        max_age: int,
    ) -> None:
        # `plain`: None unless a PubAck may go by `committer`, or at once by `send_ack`
        # when nothing follows it (a memory stream): the engine decides (`_attach`).
        self.stream = stream
        self.plain = plain
        self.committer = committer
        self.send_ack = send_ack
        self.stream_json = stream_json
        self.consumers = consumers
        self.stored = stored
        self.expiry = expiry
        self.timer = timer
        self.max_age: i64 = max_age

    def __call__(
        self, subject: bytes, reply: bytes | None, header: bytes | None, data: bytes
    ) -> None:
        plain = self.plain
        if (
            plain is not None
            and reply is not None
            and not (len(reply) > 4 and reply[-4:] == FAST_SUFFIX)
        ):
            try:
                seq = plain.store(subject, header, data)
            except ApiError as err:
                self.stream.answer(reply, Ingested(0, False, False, err))
                return
            if seq:
                ack = pub_ack(self.stream_json, seq)
                committer = self.committer
                if committer is not None:
                    committer.request_ack(reply, ack)
                else:
                    self.send_ack(reply, ack)
                if seq > 0:
                    self._stored(subject, seq)
                    if self.max_age > 0:
                        self._rearm()
                return
        result = self.stream.ingest(subject, reply, header, data)
        if result.kept:
            self._stored(subject, result.seq)
        self._rearm()

    def _stored(self, subject: bytes, seq: int) -> None:
        runners = self.consumers.matching(subject)
        if runners:
            self.stored(runners, seq)

    def _rearm(self) -> None:
        wake = self.expiry.next_wakeup_ns
        if wake is not None:
            timer = self.timer
            at = timer.at
            if at is None or wake < at:
                timer.arm(wake)  # a publish brought an expiry forward
