"""In-process clients: how server-side services (the JetStream API, streams) use routing.

An `InternalClient` is a subscriber like a TCP connection, but its messages are handed to a
Python callback instead of being encoded onto a socket, and what it publishes enters the
same router. Because a stream's subscription is an ordinary subscription, a publish that a
stream captures is "delivered" and never draws a no-responders status (wire reference
§1.13), exactly as with nats-server.

Callbacks run synchronously on the event-loop thread inside the publisher's processing, so
they must not block; anything slow (fsync) is handed to a thread and answered later.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from brook.routing.router import Router, handler_failed
from brook.routing.sublist import MessageHandler, Subscription
from brook.routing.subscriber import Subscriber

log = logging.getLogger("brook.internal")

EachHandler = Callable[[list[bytes], bytes], None]
"""(subjects, payload) of a run of `(subject, None, None, payload)` messages"""

ObjectHandler = Callable[[object], int]
"""(messages in their in-process publisher's form) -> how many it held (`Router.deliver_object`)"""


class InternalClient(Subscriber):
    """A named in-process participant on the router."""

    def __init__(self, router: Router, name: str) -> None:
        self.router = router
        self.name = name
        self.echo = True
        self._each_handlers: dict[int, EachHandler] = {}
        self._object_handlers: dict[int, ObjectHandler] = {}
        self._next_sid = 0
        self.subs: dict[bytes, Subscription] = {}

    def subscribe(
        self,
        subject: str | bytes,
        handler: MessageHandler,
        queue: bytes | None = None,
        *,
        cache_results: bool = True,
        each_handler: EachHandler | None = None,
        object_handler: ObjectHandler | None = None,
    ) -> Subscription:
        """`cache_results=False` for a wildcard whose matching subjects are each published
        about once (ack subjects): see `Subscription.cache_results`. `each_handler` takes
        a run of no-reply messages with one payload in one call instead of `handler` once
        each (`Router.publish_each`); `object_handler` takes messages in their in-process
        publisher's form, when this is the only subscription on their subject
        (`Router.deliver_object`)."""
        self._next_sid += 1
        sid = b"%d" % self._next_sid
        subj = subject.encode() if isinstance(subject, str) else subject
        sub = Subscription(self, subj, sid, queue, cache_results=cache_results)
        sub.handler = handler
        if each_handler is not None:
            self._each_handlers[id(sub)] = each_handler
        if object_handler is not None:
            self._object_handlers[id(sub)] = object_handler
        self.subs[sid] = sub
        self.router.subscribe(sub)
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        self.remove_subscription(sub)

    def remove_subscription(self, sub: Subscription) -> None:
        # Gone at once, even for a delivery under way whose match still holds it (a
        # handler removing another subscription of the same message): it declines.
        sub.handler = None
        self._each_handlers.pop(id(sub), None)
        self._object_handlers.pop(id(sub), None)
        self.subs.pop(sub.sid, None)
        self.router.unsubscribe(sub)

    def close(self) -> None:
        for sub in list(self.subs.values()):
            self.remove_subscription(sub)

    def deliver(
        self,
        sub: Subscription,
        subject: bytes,
        reply: bytes | None,
        header: bytes | None,
        payload: bytes,
    ) -> bool | None:
        """The router calls `sub.handler` itself on its usual path (`Router.publish`)."""
        handler = sub.handler
        if handler is None:
            return False
        try:
            return handler(subject, reply, header, payload)
        except Exception:
            handler_failed(sub, subject)
            return None

    def deliver_each(self, sub: Subscription, subjects: list[bytes], payload: bytes) -> int:
        handler = self._each_handlers.get(id(sub))
        if handler is None:
            return super().deliver_each(sub, subjects, payload)
        try:
            handler(subjects, payload)
        except Exception:
            log.exception("%s: handler for a run on %r failed", self.name, sub.subject)
        return len(subjects)

    def deliver_object(self, sub: Subscription, obj: object) -> int | None:
        handler = self._object_handlers.get(id(sub))
        if handler is None:
            return None
        try:
            return handler(obj)
        except Exception:
            log.exception("%s: handler for an object on %r failed", self.name, sub.subject)
            return 0

    def publish(
        self,
        subject: bytes,
        payload: bytes,
        header: bytes | None = None,
        reply: bytes | None = None,
    ) -> int:
        return self.router.publish(self, subject, reply, header, payload)
