"""Message fan-out: every matching plain subscription, one member of each queue group.

The router owns the subscription index and applies the delivery rules of wire reference
§1.11-§1.13: `echo: false` publishers do not receive their own messages, queue groups
deliver to one member chosen at random, `UNSUB <sid> <max>` removes a subscription after
its quota, and a request that reaches nobody gets a 503 no-responders status. A queue
member that declines a message (`deliver` returns False) passes it to the next in turn.

Interest watches: `watch_interest(subject, callback)` registers a literal subject (a push
consumer's deliver subject); `callback()` is called, synchronously and after the index was
updated, whenever a subscription whose subject could match it (`brook.subjects.matches`) is
added or removed. The callback re-checks `sublist.match(subject)` itself. The watched
subjects are a `SubjectIndex`: with nothing watched, subscribe/unsubscribe pay one length
test; a literal subscription one lookup; a wildcard one a walk of the watched subjects it
could match (`intersecting`), never a scan of them all.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from typing import Protocol, cast

from brook.protocol import headers
from brook.routing.subject_index import SubjectIndex
from brook.routing.sublist import EMPTY, Sublist, Subscription
from brook.routing.subscriber import Message, Subscriber

InterestCallback = Callable[[], None]


log = logging.getLogger("brook.internal")


def handler_failed(sub: Subscription, subject: bytes) -> None:
    """An in-process subscriber's callback raised: logged, never the publisher's problem
    (a bug in one service must not take down the publisher's connection)."""
    log.exception("%s: handler for %r failed", getattr(sub.client, "name", "?"), subject)


class InterestPeer(Protocol):
    """Told of every subscription added to or removed from a router: a leafnode
    connection, which passes its account's interest on to the server at its other end
    (ADR 0032)."""

    def interest_changed(self, sub: Subscription, delta: int) -> None: ...


class Publisher(Protocol):
    """What the router needs to know about the sender of a message."""

    echo: bool

    def remove_subscription(self, sub: Subscription) -> None: ...


class Router:
    def __init__(self, sublist: Sublist | None = None, *, rng: random.Random | None = None) -> None:
        self.sublist = sublist or Sublist()
        self._randrange = (rng or random.Random()).randrange
        # watched literal subject -> callbacks (see the module docstring)
        self._watches = SubjectIndex[InterestCallback]()
        # Leafnode connections of this account, told of interest changes (ADR 0032).
        self.peers: list[InterestPeer] = []
        # While leafnode connections are attached: the last message handed out under a
        # subject other than the one it is routed on (`shown_subject`) as (shown, routed).
        # A leaf connection given that very shown subject object sends the message on the
        # routed one instead, as nats-server sends JetStream deliveries over a leaf.
        self.shown: tuple[bytes, bytes] | None = None

    def subscribe(self, sub: Subscription) -> None:
        self.sublist.insert(sub)
        if self._watches:
            self._notify(sub.subject)
        if self.peers:
            for peer in self.peers:
                peer.interest_changed(sub, 1)

    def unsubscribe(self, sub: Subscription) -> None:
        self.sublist.remove(sub)
        if self._watches:
            self._notify(sub.subject)
        if self.peers:
            for peer in self.peers:
                peer.interest_changed(sub, -1)

    def watch_interest(self, subject: bytes, callback: InterestCallback) -> None:
        """Call `callback()` whenever a subscription that could match `subject` comes or goes."""
        self._watches.add(subject, callback)

    def unwatch_interest(self, subject: bytes, callback: InterestCallback) -> None:
        self._watches.remove(subject, callback)

    def has_interest(self, subject: bytes) -> bool:
        return bool(self.sublist.match(subject))

    def _notify(self, pattern: bytes) -> None:
        # The watched subjects are literal: a literal subscription can only match the
        # identical one (one lookup), a wildcard one those its walk reaches.
        for cb in self._watches.intersecting(pattern):
            cb()

    def publish_plain(self, publisher: object, subject: bytes, payload: bytes) -> int:
        """`publish` of a message with neither reply nor header (a PubAck, say): bound to
        its in-process publisher (`functools.partial`), it is called without a frame of
        interpreted code between the caller and the router."""
        return self.publish(publisher, subject, None, None, payload)

    def publish(
        self,
        publisher: object,
        subject: bytes,
        reply: bytes | None,
        header: bytes | None,
        payload: bytes,
        echo: bool = True,
        shown_subject: bytes | None = None,
    ) -> int:
        """Deliver a message; returns how many subscriptions received it.

        `shown_subject`, when given, is the subject on the MSG/HMSG line instead of the one
        routed on: a JetStream pull delivery is routed to the request's reply inbox but
        shows the message's stored subject (wire reference §6.5).
        """
        result = self.sublist.match(subject)
        if result is EMPTY:
            return 0
        if shown_subject is not None:
            if self.peers:
                self.shown = (shown_subject, subject)
            subject = shown_subject
        delivered = 0
        for sub in result.plain:
            client = sub.client
            if client is publisher and not echo:
                continue
            handler = sub.handler
            if handler is None:
                took = client.deliver(sub, subject, reply, header, payload)
            else:  # `InternalClient.deliver`, inline: a frame per stored message
                try:
                    took = handler(subject, reply, header, payload)
                except Exception:
                    handler_failed(sub, subject)
                    took = None
            if took is False:
                continue  # an internal service declined: it is not a responder
            delivered += 1
            sub.delivered += 1
            if sub.max_msgs and sub.delivered >= sub.max_msgs:
                self._expire(sub)
        for members in result.queues:
            if not echo:
                members = tuple(m for m in members if m.client is not publisher)
                if not members:
                    continue
            delivered += self._deliver_to_group(members, subject, reply, header, payload)
        return delivered

    def _deliver_to_group(
        self,
        members: tuple[Subscription, ...],
        subject: bytes,
        reply: bytes | None,
        header: bytes | None,
        payload: bytes,
    ) -> int:
        """Deliver to one member of a queue group, chosen at random; 1 if one took it."""
        start = self._randrange(len(members)) if len(members) > 1 else 0
        sub = members[start]
        if sub.client.deliver(sub, subject, reply, header, payload) is False:
            # Declined (a service that is not a responder, a connection whose
            # permissions deny the subject): the next member in turn, as nats-server.
            taker = self._next_taker(members, start, subject, reply, header, payload)
            if taker is None:
                return 0
            sub = taker
        sub.delivered += 1
        if sub.max_msgs and sub.delivered >= sub.max_msgs:
            self._expire(sub)
        return 1

    def publish_from_peer(
        self,
        peer: object,
        subject: bytes,
        reply: bytes | None,
        header: bytes | None,
        payload: bytes,
        queues: tuple[bytes, ...] | None,
        shown_subject: bytes | None = None,
    ) -> int:
        """Deliver a message that came over a leafnode connection (`peer`): to every
        plain subscription but the peer's own, and to one member of each queue group the
        sender named in `queues` (none when it named none; every group when None: a
        message mapped on its way in, nats-server's `pmrIgnoreEmptyQueueFilter`), as
        nats-server's `processMsgResults` with a queue filter. `shown_subject` as for
        `publish` (a JetStream delivery that crossed the leaf). Returns how many took it."""
        result = self.sublist.match(subject)
        if result is EMPTY:
            return 0
        if shown_subject is not None:
            self.shown = (shown_subject, subject)
            subject = shown_subject
        delivered = 0
        for sub in result.plain:
            client = sub.client
            if client is peer or client.deliver(sub, subject, reply, header, payload) is False:
                continue
            delivered += 1
            sub.delivered += 1
            if sub.max_msgs and sub.delivered >= sub.max_msgs:
                self._expire(sub)
        if queues is None or queues:
            for members in result.queues:
                if queues is None or members[0].queue in queues:
                    delivered += self._deliver_to_group(members, subject, reply, header, payload)
        return delivered

    def publish_run(
        self, publisher: object, subject: bytes, messages: list[Message], echo: bool = True
    ) -> None:
        """`publish(publisher, subject, reply, header, payload, echo, shown)` for each
        `(shown, reply, header, payload)` of `messages`, in order: a consumer's deliveries
        to one inbox or deliver subject. When that is one plain subscription without a
        quota, its subscriber gets them in one `deliver_run` (unless a leaf connection:
        it is told each message's routed subject by `publish`)."""
        result = self.sublist.match(subject)
        if not result.queues and len(result.plain) == 1:
            sub = result.plain[0]
            client = sub.client
            if (
                not sub.max_msgs
                and (echo or client is not publisher)
                and not (self.peers and any(p is cast(object, client) for p in self.peers))
            ):
                sub.delivered += client.deliver_run(sub, messages)
                return
        for shown, reply, header, payload in messages:
            self.publish(publisher, subject, reply, header, payload, echo, shown)

    def deliver_object(self, subject: bytes, obj: object) -> bool:
        """Hand `obj` (messages in their publisher's in-process form) to the one
        subscription on `subject` when that is a plain one without a quota whose subscriber
        takes such objects (`Subscriber.deliver_object`: an in-process service); False,
        with nothing delivered, otherwise (anyone else listening, a connection): the
        publisher then sends the messages' bytes."""
        result = self.sublist.match(subject)
        if result.queues or len(result.plain) != 1:
            return False
        sub = result.plain[0]
        if sub.max_msgs:
            return False
        taken = sub.client.deliver_object(sub, obj)
        if taken is None:
            return False
        sub.delivered += taken
        return True

    def publish_each(
        self, publisher: object, subjects: list[bytes], payload: bytes, echo: bool = True
    ) -> None:
        """`publish(publisher, subject, None, None, payload, echo)` for each subject, in
        order: a run of no-reply messages with one payload (a consumer's acks). While only
        exclusive routes can match the subjects (`Sublist.match_each`), each stretch bound
        for one route goes to its subscriber in one `deliver_each`."""
        stretches = self.sublist.match_each(subjects)
        if stretches is None:
            for subject in subjects:
                self.publish(publisher, subject, None, None, payload, echo)
            return
        for sub, stretch in stretches:
            if sub is None or (sub.client is publisher and not echo):
                continue  # nobody to deliver to; no reply to answer with a 503 either
            if sub.max_msgs:
                for subject in stretch:
                    self.publish(publisher, subject, None, None, payload, echo)
            else:
                sub.delivered += sub.client.deliver_each(sub, stretch, payload)

    @staticmethod
    def _next_taker(
        members: tuple[Subscription, ...],
        start: int,
        subject: bytes,
        reply: bytes | None,
        header: bytes | None,
        payload: bytes,
    ) -> Subscription | None:
        """The first member after `start` (in turn) that does not decline the message."""
        n = len(members)
        for i in range(1, n):
            sub = members[(start + i) % n]
            if sub.client.deliver(sub, subject, reply, header, payload) is not False:
                return sub
        return None

    def _expire(self, sub: Subscription) -> None:
        sub.client.remove_subscription(sub)

    def no_responders(self, publisher: Subscriber, subject: bytes, reply: bytes) -> bool:
        """Send the 503 status to the publisher's own subscription on `reply`, if it has one."""
        for sub in self.sublist.match(reply).plain:
            if sub.client is publisher:
                header = headers.encode([("Nats-Subject", subject.decode("utf-8", "replace"))], 503)
                # Not counted against `UNSUB <sid> <max>`: nats-server keeps an old-style
                # request's inbox (`UNSUB sid 1`) subscribed after a 503.
                publisher.deliver(sub, reply, None, header, b"")
                return True
        return False
