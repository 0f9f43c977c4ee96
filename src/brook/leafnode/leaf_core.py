"""The per-message half of a leaf connection: LMSG in, LMSG out. Compiled (ADR 0053).

`LeafConnection` inherits it and sets all of its state; the handshake, interest, keep-alive
and closing stay in the interpreted class, as a client's do (`server/client_core.py`, ADR
0045). Kept apart so that mypyc compiles the two paths every message across a leaf takes
(`on_msg`, `deliver`) on top of the compiled parser and router.

What it calls of its interpreted subclass and of `QueuedOutput` (`_send`, `_plan`,
`_queues`, `_refused_in`) is declared here and overridden there, `QueuedOutput` coming
before this class in `LeafConnection`'s bases.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from mypy_extensions import mypyc_attr

from brook.leafnode import codec, jsdomain
from brook.leafnode.peers import DENIED_PREFIXES, AccountLeafs
from brook.routing.mappings import SubjectMappings
from brook.routing.router import Router
from brook.routing.sublist import MatchResult, Subscription

if TYPE_CHECKING:
    from brook.leafnode.connection import LeafConnection


class LeafCounters:
    """A leaf connection's messages and bytes each way (`/leafz`)."""

    def __init__(self) -> None:
        self.in_msgs = 0
        self.in_bytes = 0
        self.out_msgs = 0
        self.out_bytes = 0


@mypyc_attr(allow_interpreted_subclasses=True)
class LeafCore:
    """A leaf connection's messages routed in and framed out (`LeafConnection` sets the
    state in its `__init__` and handshake)."""

    router: Router
    leafs: AccountLeafs
    counters: LeafCounters
    mappings: SubjectMappings | None  # the account's, applied to messages coming in
    ready: bool
    _checks_in: bool
    # `deliver`'s decisions for the subject of the router match result `_plan_result`.
    _plan_result: MatchResult | None
    _plan_first: Subscription | None
    _plan_plain: bool
    _plan_groups: tuple[bytes, ...] | None

    def _send(self, data: bytes) -> None:
        raise NotImplementedError

    def _refused_in(self, subject: bytes) -> bool:
        raise NotImplementedError

    def _plan(self, result: MatchResult, subject: bytes) -> None:
        raise NotImplementedError

    def _queues(
        self, subject: bytes, payload: bytes, result: MatchResult, groups: tuple[bytes, ...]
    ) -> list[bytes]:
        raise NotImplementedError

    def on_msg(
        self,
        subject: bytes,
        reply: bytes | None,
        queues: tuple[bytes, ...],
        header: bytes | None,
        payload: bytes,
    ) -> None:
        counters = self.counters
        counters.in_msgs += 1
        counters.in_bytes += len(payload) if header is None else len(payload) + len(header)
        if (
            not self.ready
            # `denied`, inlined: once per message (`startswith` of one bytes is native)
            or any(subject.startswith(prefix) for prefix in DENIED_PREFIXES)
            or (self._checks_in and self._refused_in(subject))
        ):
            return
        shown = None
        if reply is not None and reply.startswith(jsdomain.ACK_PREFIX):
            delivered = jsdomain.split_delivered(reply)
            if delivered is not None:  # a JetStream delivery (jsdomain.py)
                reply, shown = delivered
        groups: tuple[bytes, ...] | None = queues
        mappings = self.mappings
        if mappings is not None:
            mapped = mappings.select(subject)
            if mapped is not None:
                subject = mapped
                # nats-server: a mapped message naming no queue group goes to local ones
                groups = queues or None
        leafs = self.leafs
        leafs.inbound = (cast("LeafConnection", self), queues)
        try:
            self.router.publish_from_peer(self, subject, reply, header, payload, groups, shown)
        finally:
            leafs.inbound = None

    def deliver(
        self,
        sub: Subscription,
        subject: bytes,
        reply: bytes | None,
        header: bytes | None,
        payload: bytes,
    ) -> bool:
        """Send one LMSG/HMSG for the message however many of this connection's
        subscriptions match it: the first of them in the router's result sends, with
        the queue groups the peer serves for it; False when nothing is sent.

        What depends on the subject alone (which subscription sends, the denies, the
        peer's interest in it) is decided once per router match result, the sublist's
        cached one for the subject, and kept while it is the result and the peer's
        interest is unchanged (`_plan`)."""
        router = self.router
        shown = router.shown
        if shown is not None and shown[0] is subject:
            # A JetStream delivery: sent on the subject it is routed on (jsdomain.py).
            subject = shown[1]
            if reply is not None:
                reply = jsdomain.with_delivered(reply, shown[0])
        result = router.sublist.match(subject)
        if result is not self._plan_result:
            self._plan(result, subject)
        first = self._plan_first
        if first is not None and sub is not first:
            return False
        groups = self._plan_groups
        if groups is None:
            return False
        queues = self._queues(subject, payload, result, groups) if groups else None
        if not queues and not self._plan_plain:
            return False
        counters = self.counters
        counters.out_msgs += 1
        if header is None and reply is None and not queues:
            size = len(payload)
            counters.out_bytes += size
            self._send(b"LMSG %b %d\r\n%b\r\n" % (subject, size, payload))
        else:
            counters.out_bytes += len(payload) + (len(header) if header else 0)
            self._send(codec.message(subject, reply, queues, header, payload))
        return True
