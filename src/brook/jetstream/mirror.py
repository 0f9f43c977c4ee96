"""Mirrors (ADR 0020): a stream holding a copy of another, at the origin's sequences.

`Mirror` is the mirror's side of its `OriginLink` (link.py): the consumer-create request
nats-server's `setupMirrorConsumer` sends (byte for byte the same JSON, subject and
`Nats-Required-Api-Level` header), where the deliveries start once the origin answers
(sequences the origin no longer has are skipped), and each delivery as
`processInboundMirrorMsg` takes it (`sourcing.Tracking`): stored at its origin sequence
and timestamp (`store_mirrored`), under the subject its `subject_transforms` map
it to, the gaps before it skipped when the origin lost them; any other jump in the
delivery sequence recreates the consumer after the last stored.

A mirror has no subjects: nothing a client publishes reaches it (nats-server answers a
publish to its name with no responders, as Brook does), and an update that removes the
mirror promotes it into an ordinary stream (nats-server 2.12), whose link is then closed.
A mirror resumes after a restart from its own last sequence + 1: the store is the
position, so nothing is copied twice and nothing skipped.

With `mirror_direct` (inherited from a local origin's `allow_direct`) a mirror answers its
origin's direct gets too, from its first delivery with fewer than `CAUGHT_UP_PENDING`
messages pending (the engine subscribes it, `caught_up`): a read replica.

`mirror_info` is the `mirror` of stream info (nats-server's `StreamSourceInfo`).
"""

from __future__ import annotations

import bisect
import logging
import operator
from collections.abc import Callable, Sequence
from typing import Any

from brook import limits
from brook.jetstream import ttl as ttls
from brook.jetstream.consumer.actions import DeliverRun
from brook.jetstream.errors import ApiError
from brook.jetstream.link import OriginLink
from brook.jetstream.link_requests import (
    ACCOUNT,
    API_PREFIX,
    CreateRequest,
    api_subject,
    link_subject,
    origin_consumer_config,
    reset_request,
)
from brook.jetstream.link_runs import Delivered, Stored, drops_lines
from brook.jetstream.models.consumer_json import format_time_with_offset
from brook.jetstream.models.sources import StreamSource, go_hash
from brook.jetstream.models.transforms import subject_transform_json
from brook.jetstream.sourcing import Tracking, Verdict
from brook.jetstream.store.base import NewMessage, RecordSpan, StoreError, StoreFullError
from brook.jetstream.stream import Stream
from brook.protocol import headers as hdrs
from brook.routing.transform import SubjectTransform

log = logging.getLogger("brook.mirror")

# nats-server's mirror asks its origin for API level 4 (durable sourcing, reset); a Brook
# origin serves both at its own level, which a request may not exceed there (ADR 0003),
# and a mirror of its interest or workqueue stream needs `sourcing` (ADR-60): so, as a
# source does, at most Brook's own level.
_REQUIRED_API_LEVEL = hdrs.encode(
    [("Nats-Required-Api-Level", str(min(4, limits.JETSTREAM_API_LEVEL)))]
)

# A delivery with fewer messages pending than this has the mirror nearly level with its
# origin: it starts answering the origin's direct gets (`mirror_direct`).
CAUGHT_UP_PENDING = 10  # nats-server's dgetCaughtUpThresh


# A stored message's header, and its fields as a `NewMessage` (`Mirror.delivered_run`).
_HEADER = operator.attrgetter("header")
_AS_NEW = operator.attrgetter("subject", "header", "data", "ts_ns")
# A `NewMessage`'s fields (`store_mirrored`).
_SUBJECT, _NEW_HEADER, _DATA = (operator.itemgetter(i) for i in range(3))


def consumer_name(stream_name: str) -> str:
    """nats-server's `JS_MIRROR_<createStableConsumerHash>` (no JetStream domain here)."""
    return f"JS_MIRROR_{go_hash(f'{stream_name} {ACCOUNT}')}"


class Mirror:
    """The mirror's kind of link (`link.LinkKind`)."""

    setup_error = "MIRROR_CONSUMER_SETUP_FAILED"
    requires_ack_fc = "MIRROR_CONSUMER_REQUIRES_ACK_FC"

    def __init__(
        self, stream: Stream, stored: Stored, caught_up: Callable[[], None] | None = None
    ) -> None:
        source = stream.config.mirror
        assert source is not None
        self.stream = stream
        self.source: StreamSource = source
        self._stored = stored
        self._caught_up = caught_up  # called once, at the first delivery nearly level
        compiled = (SubjectTransform.compile(t.src, t.dest) for t in source.subject_transforms)
        self._transforms = [t for t in compiled if t is not None]
        self._refusal = ""  # what the mirror's limits last refused (logged once)

    def create_request(self) -> CreateRequest:
        source = self.source
        if source.consumer is not None:  # created beforehand on the origin (ADR-60)
            return reset_request(source)
        state = self.stream.store.state()
        config: dict[str, Any] = {
            "name": consumer_name(self.stream.name),
            "deliver_policy": "by_start_sequence",
            "opt_start_seq": state.last_seq + 1,
        }
        if state.messages == 0 and state.first_seq == 0:  # never used: its start options
            del config["opt_start_seq"]
            if source.opt_start_seq > 0:
                config["opt_start_seq"] = source.opt_start_seq
            elif source.opt_start_time is not None:
                config["deliver_policy"] = "by_start_time"
                config["opt_start_time"] = format_time_with_offset(
                    source.opt_start_time, source.opt_start_time_offset
                )
        if "opt_start_seq" not in config and "opt_start_time" not in config:
            config["deliver_policy"] = "all"
        external = source.external
        if external is not None and external.deliver:
            deliver = link_subject(external.deliver + ".M")
        else:
            deliver = link_subject("$JS.M")
        metadata = {"_nats.mirror.acc": ACCOUNT, "_nats.mirror.stream": self.stream.name}
        config |= origin_consumer_config(source, deliver, metadata)
        if "filter_subject" in config:
            subject = f"{API_PREFIX}.CONSUMER.CREATE.{source.name}.{config['name']}"
            subject += "." + config["filter_subject"]
        else:
            subject = f"{API_PREFIX}.CONSUMER.CREATE.{source.name}"
        if external is not None:
            subject = subject.replace(API_PREFIX, external.api, 1).replace("..", ".")
        body = {"stream_name": source.name, "config": config, "action": ""}
        return CreateRequest(subject, _REQUIRED_API_LEVEL, body)

    def refused(self, err_code: int) -> bool:
        return False  # a mirror's request is the same whatever the origin says

    def created(self, info: dict[str, Any], tracking: Tracking, header: bytes | None) -> None:
        """Sequences the origin delivered before this consumer's start are skipped (the
        origin lost them, or the mirror starts late: `opt_start_seq`)."""
        delivered = int(info.get("delivered", {}).get("stream_seq", 0))
        store = self.stream.store
        last = store.state().last_seq
        if last < delivered:
            store.skip_msgs(delivered)
        tracking.dseq = 0
        tracking.sseq = max(delivered, last)

    def delivered(self, tracking: Tracking, run: list[Delivered]) -> bool:
        """Each delivery checked in order (`Tracking.mirror_delivery`, its common case, the
        next origin sequence from the current consumer, written out here), those to store
        mapped by the transforms and stored together (`store_mirrored`); False at the
        first that asks for a new consumer, after storing those before it."""
        messages: list[NewMessage] = []
        seqs: list[int] = []
        retry = False
        current = tracking.consumer
        for (consumer, delivered, seq, dseq, ts_ns, pending), subject, header, data in run:
            if seq == tracking.sseq + 1 and consumer == current and delivered <= 1 and current:
                tracking.sseq, tracking.dseq = seq, dseq
            else:
                verdict = tracking.mirror_delivery(consumer, seq, dseq, delivered)
                if verdict is Verdict.SKIP_AND_STORE:
                    tracking.skipped(seq)
                elif verdict is Verdict.RETRY:
                    retry = True
                    break
                elif verdict is not Verdict.STORE:
                    continue
            if self._caught_up is not None and pending < CAUGHT_UP_PENDING:
                self._caught_up()
                self._caught_up = None
            for transform in self._transforms:
                mapped = transform.match(subject.encode("utf-8", "surrogateescape"))
                if mapped is not None:
                    subject = mapped.decode("utf-8", "surrogateescape")
                    break
            messages.append((subject, header, data, ts_ns))
            seqs.append(seq)
        return self._store(messages, seqs) and not retry

    def delivered_run(self, tracking: Tracking, run: DeliverRun) -> bool | None:
        """`delivered`'s common case at once: the run's messages follow the last stored
        (every one is stored, as `Tracking.mirror_delivery` says), no transform maps
        them and no header has lines a mirror drops (`origin_header`): stored as they
        are. Otherwise None (`delivered` takes them one by one)."""
        msgs = run.msgs
        first, n = msgs[0].seq, len(msgs)
        if (
            self._transforms
            or first != tracking.sseq + 1
            or msgs[-1].seq - first != n - 1
            or any(map(drops_lines, filter(None, map(_HEADER, msgs))))
        ):
            return None
        tracking.sseq, tracking.dseq = first + n - 1, run.first_consumer_seq + n - 1
        if self._caught_up is not None and run.pending_before - n < CAUGHT_UP_PENDING:
            self._caught_up()
            self._caught_up = None
        return self._store(list(map(_AS_NEW, msgs)), list(range(first, first + n)), run.spans)

    def _store(
        self, messages: list[NewMessage], seqs: list[int], spans: Sequence[RecordSpan] = ()
    ) -> bool:
        """`store_mirrored`; False when it failed (the link asks again later)."""
        if messages:
            try:
                store_mirrored(self.stream, messages, seqs, self._stored, spans)
            except StoreError as exc:
                self.stream.write_failed(f"store mirrored messages from {seqs[0]}", exc)
                return False  # recreated after the last stored, once there is room
            except ApiError as err:  # the mirror's own limits: asked again later
                self._refused(err)
                return False
        return True

    def _refused(self, err: ApiError) -> None:
        """Logged once per kind of refusal (the link asks again every few seconds)."""
        if err.description != self._refusal:
            self._refusal = err.description
            log.warning(
                "mirror %s refused the message after sequence %d of %s: %s",
                self.stream.name,
                self.stream.store.last_seq(),
                self.source.name,
                err.description,
            )

    def when_durable(self, callback: Callable[[BaseException | None], None]) -> None:
        self.stream.when_durable(callback)

    def delete_subject(self) -> str | None:
        if self.source.consumer is not None:
            return None
        return api_subject(
            self.source, f"DELETE.{self.source.name}.{consumer_name(self.stream.name)}"
        )


def store_mirrored(
    stream: Stream,
    messages: list[NewMessage],
    seqs: list[int],
    stored: Stored,
    spans: Sequence[RecordSpan] = (),
) -> None:
    """Store messages of the origin of mirror `stream` (`messages[i]` at origin sequence
    `seqs[i]`, rising, and at its own timestamp: ADR 0020, nats-server's
    `processJetStreamMsg` with a last sequence): the sequences before each that the
    origin no longer has become gaps (`skip_msgs`), each stretch of consecutive
    sequences is one `store_run`, then the stream's own retention, limits and expiry
    apply as after publishes. Of a publish's checks only the mirror's own limits and the
    store limits apply (sealed, `max_msg_size`, `discard: new`, quota.py; each message
    checked against the store as it is then): a message they refuse raises their
    ApiError, and the mirror asks for it again later, as nats-server's (it stores what
    its origin stored, or stops). `stored` hears of the messages kept, in one call (not
    one at a sequence stored already, nor on an interest stream one no consumer wants:
    it takes its sequence and is removed, as a publish), then `on_removed` of what the
    limits removed. A store failure (`StoreError`) or a refusal (`ApiError`) is raised
    once what was stored before it went through the same steps. `spans`: the records
    the messages were read from in the origin (`MessageStore.store_run`), for the one
    stretch of a mirror without transforms or dropped header lines (`delivered_run`)."""
    store = stream.store
    last = store.last_seq()
    if seqs and seqs[0] <= last:  # stored already
        k = bisect.bisect_right(seqs, last)
        messages, seqs = messages[k:], seqs[k:]
    if not seqs:
        return
    space = stream.space
    headers = filter(None, map(_NEW_HEADER, messages))
    if space is not None and not space.admit(
        sum(map(len, map(_DATA, messages))) + sum(map(len, headers))
    ):
        raise StoreFullError("no room for mirrored messages")
    config = stream.config
    checked = (
        config.sealed
        or config.max_msg_size >= 0
        or config.discard == "new"
        or stream.quota is not None
    )
    failure: StoreError | ApiError | None = None
    try:
        if not checked and seqs[-1] - seqs[0] == len(seqs) - 1:  # one stretch, unchecked
            if seqs[0] != last + 1:
                store.skip_msgs(seqs[0] - 1)
            store.store_run(messages, spans)
        else:
            start = 0  # of the piece not stored yet
            for i, seq in enumerate(seqs):
                if checked:  # against the store as it is with the messages before this one
                    if i > start:
                        store.store_run(messages[start:i])
                        start = i
                    subject, header, data, _ = messages[i]
                    stream.check_mirrored(subject, header, data)
                if seq != last + 1:
                    if i > start:
                        store.store_run(messages[start:i])
                        start = i
                    store.skip_msgs(seq - 1)
                last = seq
            store.store_run(messages[start:])
    except (StoreError, ApiError) as exc:
        failure = exc
        k = bisect.bisect_right(seqs, store.last_seq())
        messages, seqs = messages[:k], seqs[:k]
    retention = stream.retention if config.retention == "interest" else None
    expiry = stream.expiry
    if retention is None and not config.allow_msg_ttl:
        kept = list(zip(map(_SUBJECT, messages), seqs, strict=True))
    else:
        kept = []
        for (subject, header, _, ts_ns), seq in zip(messages, seqs, strict=True):
            if retention is not None and not retention.wanted(subject):
                store.remove(seq)
                continue
            if config.allow_msg_ttl and header:
                value = ttls.header_value(header)
                try:
                    ttl = ttls.parse_ttl(value) if value else 0
                except ttls.InvalidTTL:
                    ttl = 0
                if ttl:
                    expiry.ttl_stored(seq, ts_ns, ttl)
            kept.append((subject, seq))
    if kept:
        stored(kept)
    if seqs and config.max_age > 0:
        expiry.wake_by(messages[0][3] + config.max_age)
    if seqs:
        per_subject = config.max_msgs_per_subject > 0
        stream.apply_limits({m[0] for m in messages} if per_subject else ())
    if failure is not None:
        raise failure


def mirror_info(source: StreamSource, link: OriginLink | None, now_ns: int) -> dict[str, Any]:
    """nats-server's `StreamSourceInfo` of a mirror: `active` is the time since its
    origin's consumer was last heard from (-1: never); the filter is shown once the link
    asked its origin for a consumer, the transforms from the start (as nats-server)."""
    out: dict[str, Any] = {"name": source.name}
    if source.external is not None:
        out["external"] = {"api": source.external.api, "deliver": source.external.deliver}
    last = link.last_active_ns if link is not None else 0
    out["lag"] = link.lag if link is not None else 0
    out["active"] = now_ns - last if last else -1
    if link is not None and link.error is not None:
        out["error"] = link.error.to_json()
    if source.filter_subject and link is not None and link.requested:
        out["filter_subject"] = source.filter_subject  # as nats-server: once it asked
    if source.subject_transforms:
        out["subject_transforms"] = [subject_transform_json(t) for t in source.subject_transforms]
    return out
