"""The per-message half of a client connection: PUB in, MSG out. Compiled (ADR 0045).

`ClientConnection` inherits it and sets all of its state; what happens once per
connection (login, TLS, SUB, keep-alive, closing) stays in the interpreted class. Kept
apart so that mypyc compiles the two paths every message takes (`on_pub`, `deliver`) on
top of the compiled parser, router and output buffer, whose calls between them are then
native: the rest of the class cannot be compiled (its mixins and `asyncio.Protocol`).

What a compiled class calls of its interpreted subclass and of the other bases before
it (`routing.output.QueuedOutput`'s `_send` and `_flush`, `ClientLogin._require_connect`,
`_refuse_publish`) is declared here and overridden there. The output buffer is
`QueuedOutput`'s, interpreted because a leaf connection's transport is typed loosely
there; its attributes are declared here so that the compiled code reads them natively.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, cast

from mypy_extensions import mypyc_attr

from brook import limits
from brook.protocol import encoder
from brook.protocol import errors as perr
from brook.protocol.errors import ProtocolError
from brook.routing.mappings import SubjectMappings
from brook.routing.router import Router
from brook.routing.sublist import Subscription
from brook.server.permissions import (
    RESERVED_REPLY_PREFIXES,
    ConnectionPermissions,
    is_reserved_reply,
)
from brook.subjects import is_valid_literal_subject

if TYPE_CHECKING:
    from brook.routing.subscriber import Message, Subscriber


@mypyc_attr(allow_interpreted_subclasses=True)
class ClientCore:
    """A client's publishes routed and its deliveries framed (`ClientConnection` sets the
    state in its `__init__` and login)."""

    router: Router
    perms: ConnectionPermissions | None
    mappings: SubjectMappings | None
    connected: bool
    closed: bool
    headers: bool
    verbose: bool
    pedantic: bool
    echo: bool
    no_responders: bool
    in_msgs: int
    in_bytes: int
    out_msgs: int
    out_bytes: int
    loop: asyncio.AbstractEventLoop
    _out: list[bytes]
    _out_bytes: int
    _flush_scheduled: bool

    def _send(self, data: bytes) -> None:
        raise NotImplementedError

    def _flush(self) -> None:
        raise NotImplementedError

    def _frames_queued(self) -> None:
        """`QueuedOutput._queued`, inlined: written at the end of this loop turn, or at
        once past `OUTPUT_FLUSH_EAGER_BYTES`."""
        if self._out_bytes >= limits.OUTPUT_FLUSH_EAGER_BYTES:
            self._flush()
        elif not self._flush_scheduled:
            self._flush_scheduled = True
            self.loop.call_soon(self._flush)

    def _require_connect(self) -> bool:
        """False after closing a client that must CONNECT first (`ClientLogin`)."""
        raise NotImplementedError

    def _refuse_publish(self, subject: bytes | None, reply: bytes | None) -> None:
        """Answer and log a publish its permissions refuse (`subject`), or a reply
        subject reserved to the server (`reply`)."""
        raise NotImplementedError

    def on_pub(
        self, subject: bytes, reply: bytes | None, header: bytes | None, payload: bytes
    ) -> None:
        if not self.connected and not self._require_connect():
            return
        if header is not None and not self.headers:
            raise ProtocolError("HPUB without headers negotiated", None)
        self.in_msgs += 1
        self.in_bytes += len(payload) if header is None else len(payload) + len(header)
        if self.pedantic and not is_valid_literal_subject(subject):
            # nats-server only warns: the message is still published (and +OK'd).
            self._send(encoder.err(perr.INVALID_PUBLISH_SUBJECT))
        mappings = self.mappings
        if mappings is not None:
            # Before the permission checks, which see the mapped subject, as nats-server.
            mapped = mappings.select(subject)
            if mapped is not None:
                subject = mapped
        perms = self.perms
        if (
            perms is not None
            and not perms.published.get(subject)  # allowed: one lookup once decided
            and not perms.may_publish(subject)
        ):
            self._refuse_publish(subject, None)
            return
        if (
            reply is not None
            and reply.startswith(RESERVED_REPLY_PREFIXES)
            and is_reserved_reply(reply)
        ):
            self._refuse_publish(None, reply)
            return
        if self.verbose:
            self._send(encoder.OK)
        router = self.router
        delivered = router.publish(self, subject, reply, header, payload, self.echo)
        if not delivered and reply is not None and self.no_responders:
            # A Subscriber with the batch methods `ClientConnection` inherits after this
            router.no_responders(cast("Subscriber", self), subject, reply)

    def on_pub_run(self, subjects: list[bytes], payload: bytes) -> None:
        """PUBs alike but for their subjects read in a run (a consumer's acks): routed
        together, so that a read chunk of acks costs one call into the router rather than
        one publish each."""
        if (
            not self.connected
            or self.verbose
            or self.pedantic
            or self.perms is not None
            or self.mappings is not None
        ):
            for subject in subjects:  # +OK, warnings, permissions or mappings: one by one
                self.on_pub(subject, None, None, payload)
            return
        n = len(subjects)
        self.in_msgs += n
        self.in_bytes += len(payload) * n
        self.router.publish_each(self, subjects, payload, self.echo)

    def deliver(
        self,
        sub: Subscription,
        subject: bytes,
        reply: bytes | None,
        header: bytes | None,
        payload: bytes,
    ) -> bool | None:
        # The hot path of every delivery: MSG framing and the output append inlined
        # (the bytes of encoder.msg, then `_queued`).
        if self.closed:
            return None
        perms = self.perms
        if (
            perms is not None
            and (perms.filter_deliveries or reply is not None)
            and not perms.permit_delivery(subject, sub.queue, reply)
        ):
            return False  # a subscribe deny covers it: not delivered (nor counted)
        if header is not None and self.headers:
            frame = encoder.hmsg(subject, sub.sid, reply, header, payload)
            self.out_bytes += len(header) + len(payload)
        else:
            size = len(payload)
            if reply is None:
                frame = b"MSG %b %b %d\r\n%b\r\n" % (subject, sub.sid, size, payload)
            else:
                frame = b"MSG %b %b %b %d\r\n%b\r\n" % (subject, sub.sid, reply, size, payload)
            self.out_bytes += size
        self.out_msgs += 1
        self._out.append(frame)
        out_bytes = self._out_bytes + len(frame)
        self._out_bytes = out_bytes
        # `_frames_queued`, inlined: a method call on a class that interpreted classes
        # subclass goes through Python (about 600 instructions), once per message here.
        if out_bytes >= limits.OUTPUT_FLUSH_EAGER_BYTES:
            self._flush()
        elif not self._flush_scheduled:
            self._flush_scheduled = True
            self.loop.call_soon(self._flush)
        return None

    def deliver_run(self, sub: Subscription, messages: list[Message]) -> int:
        """`deliver(sub, subject, reply, header, payload)` for each message of a run
        (`Router.publish_run`): a consumer's deliveries, framed in one loop, counted and
        handed to the output once (a run is at most what the consumer may have
        outstanding, so the eager flush looks at the whole of it)."""
        if self.closed:
            return len(messages)
        if self.perms is not None:  # each message checked and granted (acks) by `deliver`
            taken = 0
            for subject, reply, header, payload in messages:
                if self.deliver(sub, subject, reply, header, payload) is not False:
                    taken += 1
            return taken
        sid = sub.sid
        headers = self.headers
        frames: list[bytes] = []
        content = 0  # header and payload bytes, as `out_bytes` counts them
        framed = 0
        for subject, reply, header, payload in messages:
            if header is not None and headers:
                frame = encoder.hmsg(subject, sid, reply, header, payload)
                content += len(header) + len(payload)
            else:
                size = len(payload)
                if reply is None:
                    frame = b"MSG %b %b %d\r\n%b\r\n" % (subject, sid, size, payload)
                else:
                    frame = b"MSG %b %b %b %d\r\n%b\r\n" % (subject, sid, reply, size, payload)
                content += size
            frames.append(frame)
            framed += len(frame)
        self.out_msgs += len(frames)
        self.out_bytes += content
        self._out.extend(frames)
        self._out_bytes += framed
        self._frames_queued()
        return len(messages)
