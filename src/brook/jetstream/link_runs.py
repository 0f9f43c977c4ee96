"""The deliveries a mirror's or source's link takes from its origin (ADR 0020), as its
kind gets them (`Delivered`): each one's ack reply read (`read_ack_reply`), its header
without the origin's `Nats-Expected-*` and `Nats-Batch-*` (`origin_header`), and an
in-process origin consumer's runs (`DeliverRun`) taken a slice at a time (`take_run`)."""

from __future__ import annotations

from collections.abc import Callable

from brook.jetstream.consumer.acks import parse_ack_subject
from brook.jetstream.consumer.actions import DeliverRun
from brook.protocol import headers as hdrs

Delivery = tuple[str, int, int, int, int, int]
"""What a delivery's ack reply says (`$JS.ACK.<stream>.<consumer>.<delivered>.<origin
seq>.<delivery seq>.<ts>.<pending>`): consumer, delivered, origin (stream) sequence,
delivery (consumer) sequence, timestamp, pending. A plain tuple, made once per message
copied (a NamedTuple's constructor costs a Python call)."""


Delivered = tuple[Delivery, str, bytes | None, bytes]
"""One delivery as a link hands it to its kind: its ack reply read, subject, header, data."""

Stored = Callable[[list[tuple[str, int]]], None]
"""What a kind tells the engine it stored and kept, in order: each message's subject and
sequence (its consumers and the expiry timer hear of them as of publishes). One call per
run stored together."""


def origin_header(header: bytes) -> bytes | None:
    """A delivered header as a mirror or source takes it: without the origin's
    `Nats-Expected-*` and `Nats-Batch-*` headers (None when nothing is left)."""
    kept = hdrs.remove_prefixed(header, b"Nats-Expected-")
    if kept:
        kept = hdrs.remove_prefixed(kept, b"Nats-Batch-")
    return kept or None


def drops_lines(header: bytes) -> bool:
    """Might `origin_header` drop lines of `header`? (A run's headers are the origin's as
    stored: most have none of those lines, and are taken as they are.)"""
    return header.find(b"Nats-Expected-") >= 0 or header.find(b"Nats-Batch-") >= 0


def split_run(item: DeliverRun, room: int) -> tuple[DeliverRun, DeliverRun | None]:
    """The first `room` deliveries of `item` (at least one), and the rest (None: none)."""
    msgs = item.msgs
    if len(msgs) <= room:
        return item, None
    dseq, np = item.first_consumer_seq, item.pending_before
    acks = item.acks
    head = DeliverRun(
        item.reply,
        msgs[:room],
        acks[:room] if acks is not None else None,
        dseq,
        np,
        item.prefix,
        item.spans,
    )
    rest = DeliverRun(
        item.reply,
        msgs[room:],
        acks[room:] if acks is not None else None,
        dseq + room,
        max(np - room, 0),
        item.prefix,
        item.spans,
    )
    return head, rest


def take_run(
    item: DeliverRun, room: int, prefix: bytes, consumer: str, run: list[Delivered]
) -> tuple[int, DeliverRun | None]:
    """Up to `room` deliveries of `item` appended to `run` as `_drain` makes them of
    messages (their ack subjects read by `read_ack_reply`, `Nats-Expected-*` and
    `Nats-Batch-*` removed); none when they are not the consumer's whose ack subjects
    start with `prefix` (named `consumer`). Returns how many were taken, and the rest of
    `item` past `room` (None when nothing is left)."""
    item, rest = split_run(item, room)
    msgs = item.msgs
    dseq, np = item.first_consumer_seq, item.pending_before
    if not prefix or item.prefix != prefix:
        return len(msgs), rest  # an older consumer's
    append = run.append
    for m in msgs:
        if np > 0:
            np -= 1
        header = m.header or None
        if header:
            header = origin_header(header)
        append(((consumer, 1, m.seq, dseq, m.ts_ns, np), m.subject, header, m.data))
        dseq += 1
    return len(msgs), rest


def read_ack_reply(reply: bytes, prefix: bytes = b"", consumer: str = "") -> Delivery | None:
    """A delivery's ack reply read (`parse_ack_subject`; its common form, version 1, by one
    split: this runs for every message a mirror or source copies). A reply starting with
    `prefix`, the `$JS.ACK.<stream>.<consumer>.` of the consumer `consumer` that the link
    takes deliveries from, is read from the five numbers after it alone."""
    if prefix and reply.startswith(prefix):
        tail = reply[len(prefix) :]
        numbers = tail.split(b".")
        if len(numbers) == 5 and b"" not in numbers and tail.replace(b".", b"").isdigit():
            d, s, c, t, p = numbers
            return (consumer, int(d), int(s), int(c), int(t), int(p))
    parts = reply.split(b".")
    if (
        len(parts) == 9
        and parts[0] == b"$JS"
        and parts[1] == b"ACK"
        and parts[2]
        and parts[3]
        and b"".join(parts[4:]).isdigit()
        and all(parts[4:])
    ):
        _, _, _, name, d, s, c, t, p = parts
        return (name.decode(), int(d), int(s), int(c), int(t), int(p))
    meta = parse_ack_subject(reply.decode("utf-8", "surrogateescape"))
    if meta is None:
        return None
    return (
        meta.consumer,
        meta.delivered,
        meta.stream_seq,
        meta.consumer_seq,
        meta.timestamp_ns,
        meta.pending,
    )
