"""Republish: a stream publishes each message it stores again, under a mapped subject.

As nats-server's `processJetStreamMsg`: once a message is stored (after its rollup and
the limits it triggered, before its PubAck), a message whose subject the republish
source matches is published to the mapped subject with no reply, its header block
followed by `Nats-Stream`, `Nats-Subject`, `Nats-Sequence`, `Nats-Time-Stamp` (RFC 3339,
UTC, nanoseconds without trailing zeros) and `Nats-Last-Sequence` (the sequence of the
previous message on the same subject, 0 if none), and for `headers_only` the
`Nats-Msg-Size` of the payload, which is then left out. A mapped subject that is not a
valid publish subject suppresses the republish (nats-server logs a warning).

nats-server sends republished messages through a queue; Brook delivers them at once
(so they precede the PubAck, as there), except while the same stream's previous
republish is still being delivered: a republish that leads back into its own stream
(through another stream's republish: each stream's own destination may not overlap its
subjects) is queued and sent on the next turn of the event loop, in order, so a cycle of
streams makes a stream of messages, as with nats-server, never a deep recursion.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable

from brook.jetstream.models.info import format_ts_ns
from brook.jetstream.models.transforms import RepublishConfig
from brook.routing.transform import SubjectTransform
from brook.subjects import is_valid_literal_subject

log = logging.getLogger("brook.republish")

MessageSender = Callable[[bytes, bytes, bytes], None]
"""(subject, header block, payload) -> None: an internal publish with no reply"""

_STATUS_LINE = b"NATS/1.0\r\n"
_HEADERS = (
    b"Nats-Stream: %b\r\nNats-Subject: %b\r\nNats-Sequence: %d\r\n"
    b"Nats-Time-Stamp: %b\r\nNats-Last-Sequence: %d\r\n"
)
_SIZE = b"Nats-Msg-Size: %d\r\n"


class Republisher:
    """One stream's republish (`compile` makes one from the configuration)."""

    def __init__(
        self, transform: SubjectTransform, stream: str, headers_only: bool, send: MessageSender
    ) -> None:
        self._transform = transform
        self._stream = stream.encode()
        self._headers_only = headers_only
        self._send = send
        self._sending = False
        self._queue: deque[tuple[bytes, bytes, bytes]] = deque()

    @classmethod
    def compile(
        cls, config: RepublishConfig | None, stream: str, send: MessageSender | None
    ) -> Republisher | None:
        """None when nothing is republished: no `republish`, an empty destination (as
        nats-server, which compiles no transform for it), or no way to send."""
        if config is None or send is None:
            return None
        transform = SubjectTransform.compile(config.src, config.dest)  # checked at create
        if transform is None:
            return None
        return cls(transform, stream, config.headers_only, send)

    def stored(
        self,
        subject: str,
        seq: int,
        ts_ns: int,
        last_seq: int,
        header: bytes | None,
        data: bytes,
    ) -> None:
        """Message `seq` was stored under `subject`; `last_seq` was the subject's last
        sequence before it."""
        raw = subject.encode("utf-8", "surrogateescape")
        target = self._transform.match(raw)
        if target is None:
            return
        if not is_valid_literal_subject(target):
            log.warning(
                "stream %s: suppressing republish with invalid subject %r",
                self._stream.decode(),
                target.decode("utf-8", "replace"),
            )
            return
        added = _HEADERS % (self._stream, raw, seq, format_ts_ns(ts_ns).encode(), last_seq)
        payload = data
        if self._headers_only:
            added += _SIZE % len(data)
            payload = b""
        # nats-server appends to the message's own header block, less its final CRLF.
        block = (header[:-2] if header else _STATUS_LINE) + added + b"\r\n"
        self._publish(target, block, payload)

    def _publish(self, subject: bytes, header: bytes, payload: bytes) -> None:
        if self._sending or self._queue:  # see the module docstring
            if not self._queue:
                asyncio.get_running_loop().call_soon(self._drain)
            self._queue.append((subject, header, payload))
            return
        self._sending = True
        try:
            self._send(subject, header, payload)
        finally:
            self._sending = False

    def _drain(self) -> None:
        """Send what was queued until now; what this queues (scheduling the next drain)
        goes on the next turn."""
        batch, self._queue = self._queue, deque()
        self._sending = True
        try:
            for subject, header, payload in batch:
                self._send(subject, header, payload)
        finally:
            self._sending = False
