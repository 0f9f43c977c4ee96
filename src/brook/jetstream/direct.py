"""Direct get: a stream answers `$JS.API.DIRECT.GET.<S>[.<subject>]` with stored messages.

Only streams with `allow_direct` subscribe (queue group `_sys_`, as nats-server), so for
other streams the requester gets the no-responders status. Replies are not JSON: each is
the stored message (payload and headers byte-exact) with `Nats-Stream`, `Nats-Subject`,
`Nats-Sequence` and `Nats-Time-Stamp` appended to its header block; batch and multi-last
replies add `Nats-Num-Pending` and `Nats-Last-Sequence` and end with a `204 EOB` status
message. Failures are status messages: `404 Message Not Found`, `404 No Results`,
`408 Empty Request`, `408 Bad Request`, `408 Malformed Request`, `413 Too Many Results`
(wire reference §7.2, transcripts js-direct-get*.txt), and first of all
`412 Required Api Level` for a `Nats-Required-Api-Level` above Brook's (versioning.py).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from brook.jetstream import models, versioning
from brook.jetstream.fields import get_field
from brook.jetstream.store.base import MessageStore, StoredMessage
from brook.jetstream.stream import Stream
from brook.protocol import headers as hdrs
from brook.routing.subscriber import Message

MULTI_LAST_SUBJECTS_MAX = 1024
BATCH_MAX = 1_000_000
# A batch is read from the store and handed to the router in runs of at most this many
# messages: one store call and one delivery call per run instead of per message (a Spark
# task reads thousands per request), bounded so that a large batch is not all in memory.
BATCH_RUN_MAX = 256

Send = Callable[[bytes, bytes, bytes], None]
"""(reply subject, header block, payload) -> None"""
SendRun = Callable[[bytes, list[Message]], None]
"""(reply subject, messages as `Router.publish_run` takes them) -> None"""


class BadDirectRequest(Exception):
    def __init__(self, status: int, description: str) -> None:
        super().__init__(description)
        self.status = status
        self.description = description


def status_header(
    status: int, description: str, fields: list[tuple[str, str]] | None = None
) -> bytes:
    return hdrs.encode(fields or [], status, description)


def message_header(
    stream: str, msg: StoredMessage, extra: list[tuple[str, str]] | None = None
) -> bytes:
    """The stored header block with the direct-get headers appended at its end."""
    text = (
        f"Nats-Stream: {stream}\r\nNats-Subject: {msg.subject}\r\n"
        f"Nats-Sequence: {msg.seq}\r\nNats-Time-Stamp: {models.format_ts_ns(msg.ts_ns)}\r\n"
    )
    if extra:
        text += "".join(f"{k}: {v}\r\n" for k, v in extra)
    appended = text.encode()
    stored = msg.header
    if stored and stored.startswith(b"NATS/1.0") and stored.endswith(b"\r\n\r\n"):
        return stored[:-2] + appended + b"\r\n"
    return b"NATS/1.0\r\n" + appended + b"\r\n"


class BatchHeaders:
    """The replies of a batched direct get's messages, each header block one bytes format.

    A Spark task reads a stream by batches of thousands (ADR 0047); `message_header` per
    message (a list of extra pairs, an f-string, `format_ts_ns`, an encode, two joins) was
    a third of the server's cost of a direct-get reply (ADR 0059). The messages of a batch
    share their stream and mostly few subjects and few seconds, so those parts are encoded
    once per batch, and a run of messages is formatted in one loop. The blocks are byte for
    byte `message_header`'s with `Nats-Num-Pending` and `Nats-Last-Sequence`.
    """

    __slots__ = ("_format", "_second", "_second_text", "_subjects")

    def __init__(self, stream: str) -> None:
        self._format = (
            b"%%bNats-Stream: %b\r\nNats-Subject: %%b\r\nNats-Sequence: %%d\r\n"
            b"Nats-Time-Stamp: %%b\r\nNats-Num-Pending: %%d\r\nNats-Last-Sequence: %%d\r\n\r\n"
        ) % stream.encode()
        self._subjects: dict[str, bytes] = {}
        self._second = -1
        self._second_text = b""

    def run(
        self,
        reply: bytes,
        msgs: list[StoredMessage],
        pending: int,
        last_sent: int,
        room: int,
        after: bool,
    ) -> tuple[list[Message], int, int]:
        """(replies, the last one's `Nats-Num-Pending`, room left) for `msgs` in order,
        while `room` bytes last.

        `pending` is one less for each message sent (never below 0), starting with the
        first of `msgs` when it comes `after` a message sent already, else the next. As
        nats-server, the message that uses the last of `room` (its subject, stored header
        and payload) is the last one sent.
        """
        fmt = self._format
        subjects = self._subjects
        out: list[Message] = []
        append = out.append
        for msg in msgs:
            if after:
                pending = max(pending - 1, 0)
            after = True
            subject = subjects.get(msg.subject)
            if subject is None:
                subject = subjects[msg.subject] = msg.subject.encode()
            stored = msg.header
            if stored and stored.startswith(b"NATS/1.0") and stored.endswith(b"\r\n\r\n"):
                start = stored[:-2]
            else:
                start = b"NATS/1.0\r\n"
            seconds, nanos = divmod(msg.ts_ns, 1_000_000_000)
            if seconds != self._second or seconds <= 0:
                stamp = self._time(msg.ts_ns)
            elif nanos:
                stamp = b"%b.%bZ" % (self._second_text, (b"%09d" % nanos).rstrip(b"0"))
            else:
                stamp = self._second_text + b"Z"
            data = msg.data
            append((reply, None, fmt % (start, subject, msg.seq, stamp, pending, last_sent), data))
            last_sent = msg.seq
            room -= len(subject) + len(stored or b"") + len(data)
            if room <= 0:
                break
        return out, pending, room

    def _time(self, ts_ns: int) -> bytes:
        """`models.format_ts_ns` as bytes; keeps the second's text for the next message."""
        text = models.format_ts_ns(ts_ns)
        seconds = ts_ns // 1_000_000_000
        if seconds > 0:
            self._second = seconds
            self._second_text = text[:19].encode()
        return text.encode()


def _bad_request(_reason: str) -> BadDirectRequest:
    return BadDirectRequest(408, "Bad Request")


def _int(body: dict[str, Any], key: str) -> int:
    value = get_field(body, key, int, 0, _bad_request)
    if value < 0:
        raise _bad_request(f"{key} is negative")
    return value


def _str(body: dict[str, Any], key: str) -> str:
    return get_field(body, key, str, "", _bad_request)


class DirectGet:
    """Answers direct-get requests for one stream."""

    def __init__(
        self, stream: Stream, send: Send, send_run: SendRun, default_max_bytes: int
    ) -> None:
        self.stream = stream
        self._default_max_bytes = default_max_bytes  # a batch without `max_bytes`
        self._send = send
        self._send_run = send_run

    def handle(
        self, subject_tokens: list[str], reply: bytes | None, header: bytes | None, payload: bytes
    ) -> None:
        if reply is None:
            return
        try:
            if versioning.refuses(header):
                raise BadDirectRequest(*versioning.REQUIRED_API_LEVEL_STATUS)
            if subject_tokens:
                if payload.strip():
                    raise BadDirectRequest(408, "Bad Request")
                self._single(reply, self.stream.store.load_last(".".join(subject_tokens)))
                return
            body = self._parse(payload)
            if body.get("multi_last"):
                self._multi_last(reply, body)
            elif body.get("batch"):
                self._batch(reply, body)
            else:
                self._single(reply, self._select(body))
        except BadDirectRequest as bad:
            self._send(reply, status_header(bad.status, bad.description), b"")

    def _parse(self, payload: bytes) -> dict[str, Any]:
        text = payload.strip()
        if not text:
            raise BadDirectRequest(408, "Empty Request")
        try:
            body = json.loads(text)
        except (ValueError, RecursionError):
            raise BadDirectRequest(408, "Malformed Request") from None
        if not isinstance(body, dict):
            raise BadDirectRequest(408, "Malformed Request")
        return body

    def _select(self, body: dict[str, Any]) -> StoredMessage | None:
        store = self.stream.store
        seq = _int(body, "seq")
        last_by = _str(body, "last_by_subj")
        next_by = _str(body, "next_by_subj")
        start_time = _str(body, "start_time")
        if last_by:
            if seq or next_by:
                raise BadDirectRequest(408, "Bad Request")
            return store.load_last(last_by)
        start = self._start_seq(seq, start_time)
        if next_by:
            return store.load_next(next_by, max(start, 1))
        if start_time:
            return store.load_next(">", start)
        if seq <= 0:
            raise BadDirectRequest(408, "Bad Request")
        return store.load(seq)

    def _start_seq(self, seq: int, start_time: str) -> int:
        if not start_time:
            return seq
        try:
            start_ns = models.parse_ts(start_time)
        except ValueError:
            raise BadDirectRequest(408, "Bad Request") from None
        store = self.stream.store
        msg = store.load_next(">", max(seq, 1))
        while msg is not None and msg.ts_ns < start_ns:
            msg = store.load_next(">", msg.seq + 1)
        return msg.seq if msg is not None else store.state().last_seq + 1

    def _single(self, reply: bytes, msg: StoredMessage | None) -> None:
        if msg is None:
            self._send(reply, status_header(404, "Message Not Found"), b"")
            return
        self._send(reply, message_header(self.stream.name, msg), msg.data)

    def _batch(self, reply: bytes, body: dict[str, Any]) -> None:
        store = self.stream.store
        batch = min(_int(body, "batch"), BATCH_MAX)
        max_bytes = _int(body, "max_bytes") or self._default_max_bytes
        flt = _str(body, "next_by_subj") or ">"
        seq = self._start_seq(max(_int(body, "seq"), 1), _str(body, "start_time"))
        headers = BatchHeaders(self.stream.name)
        room = max_bytes
        last_sent = 0
        count = 0
        pending = 0
        # nats-server 2.15 applies `up_to_seq` to multi_last only, not to plain batches.
        while count < batch:
            msgs = store.load_batch(flt, seq, min(batch - count, BATCH_RUN_MAX))
            if not msgs:
                break
            if not count:
                # Counted once, then one less per message sent (as nats-server): counting
                # the tail again for every message made a large batch quadratic.
                pending = store.num_pending(flt, msgs[0].seq + 1)
            run, pending, room = headers.run(reply, msgs, pending, last_sent, room, count > 0)
            self._send_run(reply, run)
            count += len(run)
            last_sent = msgs[len(run) - 1].seq
            if room <= 0:
                break
            seq = msgs[-1].seq + 1
        if not count:
            self._send(reply, status_header(404, "Message Not Found"), b"")
            return
        eob = [("Nats-Num-Pending", str(pending)), ("Nats-Last-Sequence", str(last_sent))]
        self._send(reply, status_header(204, "EOB", eob), b"")

    def _multi_last(self, reply: bytes, body: dict[str, Any]) -> None:
        store = self.stream.store
        subjects = body.get("multi_last")
        if not isinstance(subjects, list) or not all(isinstance(s, str) for s in subjects):
            raise BadDirectRequest(408, "Bad Request")
        up_to = _int(body, "up_to_seq") or store.state().last_seq
        found: dict[int, StoredMessage] = {}
        for flt in subjects:
            for subject in store.subject_counts(flt):
                msg = _last_at_or_below(store, subject, up_to)
                if msg is not None:
                    found[msg.seq] = msg
                if len(found) > MULTI_LAST_SUBJECTS_MAX:
                    raise BadDirectRequest(413, "Too Many Results")
        if not found:
            self._send(reply, status_header(404, "No Results"), b"")
            return
        batch = _int(body, "batch") or len(found)
        ordered = sorted(found.items())[:batch]
        last_sent = 0
        for i, (seq, msg) in enumerate(ordered):
            extra = [
                ("Nats-Num-Pending", str(len(found) - i - 1)),  # unsent ones count as pending
                ("Nats-Last-Sequence", str(last_sent)),
            ]
            self._send(reply, message_header(self.stream.name, msg, extra), msg.data)
            last_sent = seq
        eob = [
            ("Nats-Num-Pending", str(len(found) - len(ordered))),
            ("Nats-Last-Sequence", str(last_sent)),
            ("Nats-UpTo-Sequence", str(up_to)),
        ]
        self._send(reply, status_header(204, "EOB", eob), b"")


def _last_at_or_below(store: MessageStore, subject: str, up_to: int) -> StoredMessage | None:
    msg = store.load_last(subject)
    if msg is None or msg.seq <= up_to:
        return msg
    # Rare (up_to_seq in the past): walk this subject's messages forward to the bound.
    best = None
    cursor = store.load_next(subject, 0)
    while cursor is not None and cursor.seq <= up_to:
        best = cursor
        cursor = store.load_next(subject, cursor.seq + 1)
    return best
