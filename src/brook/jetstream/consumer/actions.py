"""What the consumer state machine asks its owner to do: small immutable values.

The runner's executor (executor.py) carries them out in order: `Deliver` becomes a
MSG/HMSG to `reply` with the original subject and `ack_subject` as reply (a `DeliverRun`,
one for each of its messages), `Status` an inline-status HMSG, `Advisory` a publish of
`payload` (JSON) to `subject` once the executor has added `id` and `timestamp`,
`RemoveMessage` a removal from the stream, `Acked` a note for interest retention.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from brook.jetstream.consumer.ack_reply import first_ack_replies
from brook.jetstream.models.info import format_ts_ns
from brook.jetstream.store.base import RecordSpan, StoredMessage

ADVISORY_PREFIX = "$JS.EVENT.ADVISORY.CONSUMER"

MAX_DELIVERIES = "MAX_DELIVERIES"
MSG_TERMINATED = "MSG_TERMINATED"
MSG_NAKED = "MSG_NAKED"
ACK_METRIC = "ACK"

ADVISORY_TYPES = {
    MAX_DELIVERIES: "io.nats.jetstream.advisory.v1.max_deliver",
    MSG_TERMINATED: "io.nats.jetstream.advisory.v1.terminated",
    MSG_NAKED: "io.nats.jetstream.advisory.v1.nak",
}
# The `reason` of the MSG_TERMINATED advisory for a pending message that left the stream
# (nats-server's `ackTermUnackedLimitsReason`).
DELETED_WHILE_PENDING = "Unacknowledged message was deleted"
PAUSE_ADVISORY_TYPE = "io.nats.jetstream.advisory.v1.consumer_pause"
ACK_METRIC_TYPE = "io.nats.jetstream.metric.v1.consumer_ack"
METRIC_PREFIX = "$JS.EVENT.METRIC.CONSUMER"


@dataclass(slots=True)
class Deliver:
    """Send `msg` to `reply` (pull request inbox or push deliver subject).

    Not frozen, unlike the other actions: one is made per delivered message, and a frozen
    dataclass's `__init__` (one `object.__setattr__` per field) costs four times as much.
    Nobody mutates one."""

    msg: StoredMessage
    reply: str
    ack_subject: bytes  # the reply subject, as sent (`acks.ack_subject`, encoded)
    consumer_seq: int
    stream_seq: int
    delivery_count: int
    pending: int  # num_pending after this delivery (the last ack-subject token)
    timestamp_ns: int  # the message's stored timestamp


@dataclass(slots=True)
class DeliverRun:
    """First deliveries of consecutive new messages to one `reply`: message `i` goes
    exactly as `delivers()[i]` says. `Delivery.deliver_new` makes one per call
    instead of a `Deliver` per message (a push consumer's deliveries, or those to the one
    waiting pull request): the owner frames the run in one loop. Nobody mutates one
    (but `ack_subjects`, which fills in `acks` once).

    Each ack subject is `prefix` (`$JS.ACK.<stream>.<consumer>.`) and `1.<stream seq>.
    <consumer seq>.<timestamp>.<pending>`: all of it is in the run, so a flow-controlled
    push run leaves them unformatted (`acks` None) until someone needs their bytes
    (`ack_subjects`); a link in this process that takes the run as it is
    (`Router.deliver_object`) never does.

    A flow-controlled push run read from a file store carries the records its messages
    were read from (`spans`, shared by the runs of one `deliver_new` call and covering
    more than the run's messages, or not all of them): a mirror in this process writes
    them as they are (ADR 0035)."""

    reply: str
    msgs: list[StoredMessage]
    acks: list[bytes] | None  # the ack subject of each; None: not formatted yet
    first_consumer_seq: int  # consecutive from here
    pending_before: int  # num_pending before the first; one less after each, down to 0
    prefix: bytes = b""  # `$JS.ACK.<stream>.<consumer>.`, which every ack subject starts with
    spans: Sequence[RecordSpan] = ()  # ascending, by their sequences

    def ack_subjects(self) -> list[bytes]:
        """The ack subject of each message (formatted now, once, if they were not)."""
        acks = self.acks
        if acks is None:
            acks = self.acks = first_ack_replies(
                self.prefix, self.msgs, self.first_consumer_seq, self.pending_before
            )
        return acks

    def delivers(self) -> list[Deliver]:
        """The same deliveries, one `Deliver` each."""
        first, before = self.first_consumer_seq, self.pending_before
        acks = self.ack_subjects()
        return [
            Deliver(m, self.reply, ack, first + i, m.seq, 1, max(before - i - 1, 0), m.ts_ns)
            for i, (m, ack) in enumerate(zip(self.msgs, acks, strict=True))
        ]


@dataclass(frozen=True, slots=True)
class Status:
    """An inline status (`NATS/1.0 <code> <description>`) with optional headers, no body,
    sent to `reply`; `respond_to` is the message's own reply subject (flow control)."""

    reply: str
    code: int
    description: str
    headers: tuple[tuple[str, str], ...] = ()
    respond_to: str | None = None

    def header_block(self) -> bytes:
        lines = [f"NATS/1.0 {self.code} {self.description}"]
        lines += [f"{k}: {v}" for k, v in self.headers]
        return ("\r\n".join(lines) + "\r\n\r\n").encode()


@dataclass(frozen=True, slots=True)
class Advisory:
    """A consumer advisory (`kind` MAX_DELIVERIES, MSG_TERMINATED or MSG_NAKED) or the
    sampled ack metric (`kind` ACK_METRIC)."""

    kind: str
    subject: str
    payload: dict[str, Any]


@dataclass(frozen=True, slots=True)
class RemoveMessage:
    """Workqueue retention: the stream should remove this message now."""

    seq: int


@dataclass(frozen=True, slots=True)
class Acked:
    """Interest retention: this consumer no longer needs `seq`; the stream decides."""

    seq: int


Action = Deliver | DeliverRun | Status | Advisory | RemoveMessage | Acked


def pending_headers(messages: int, nbytes: int) -> tuple[tuple[str, str], ...]:
    return (("Nats-Pending-Messages", str(messages)), ("Nats-Pending-Bytes", str(nbytes)))


def heartbeat_headers(consumer_seq: int, stream_seq: int) -> tuple[tuple[str, str], ...]:
    return (("Nats-Last-Consumer", str(consumer_seq)), ("Nats-Last-Stream", str(stream_seq)))


def advisory(kind: str, stream: str, consumer: str, **fields: Any) -> Advisory:
    payload: dict[str, Any] = {"type": ADVISORY_TYPES[kind], "stream": stream}
    payload["consumer"] = consumer
    payload.update(fields)
    return Advisory(kind, f"{ADVISORY_PREFIX}.{kind}.{stream}.{consumer}", payload)


def ack_metric(stream: str, consumer: str, **fields: Any) -> Advisory:
    """`$JS.EVENT.METRIC.CONSUMER.ACK.<S>.<C>`: one sampled acknowledgement (`sample_freq`)."""
    payload: dict[str, Any] = {"type": ACK_METRIC_TYPE, "stream": stream, "consumer": consumer}
    payload.update(fields)
    return Advisory(ACK_METRIC, f"{METRIC_PREFIX}.{ACK_METRIC}.{stream}.{consumer}", payload)


def pause_advisory(stream: str, consumer: str, *, paused: bool, until_ns: int | None) -> Advisory:
    """`$JS.EVENT.ADVISORY.CONSUMER.PAUSE.<S>.<C>`: the consumer was paused until `until_ns`
    (`paused`), or resumed (by CONSUMER.PAUSE, or when that time came)."""
    payload: dict[str, Any] = {
        "type": PAUSE_ADVISORY_TYPE,
        "stream": stream,
        "consumer": consumer,
        "paused": paused,
        "pause_until": format_ts_ns(until_ns or 0),
    }
    return Advisory("PAUSE", f"{ADVISORY_PREFIX}.PAUSE.{stream}.{consumer}", payload)


def headers_only(msg: StoredMessage) -> StoredMessage:
    """The delivery of a `headers_only` consumer: no payload, and `Nats-Msg-Size: <payload
    length>` appended to the message's header block (one is created if it had none)."""
    line = b"Nats-Msg-Size: %d\r\n\r\n" % len(msg.data)
    header = msg.header[:-2] + line if msg.header else b"NATS/1.0\r\n" + line
    return StoredMessage(msg.seq, msg.subject, header, b"", msg.ts_ns)
