"""Whoever receives a subscription's messages: the protocol the router delivers through.

Kept apart from `sublist` because connections, leaf connections and internal services
inherit it (for its batch methods' defaults), and `sublist` is compiled (ADR 0045): an
interpreted class cannot inherit a compiled protocol.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from brook.routing.sublist import Subscription

Message = tuple[bytes, bytes | None, bytes | None, bytes]
"""(subject, reply, header, payload) of one message in a run"""


class Subscriber(Protocol):
    """Whoever receives messages for a subscription: a client connection or an internal service.

    One message goes to `deliver`; a run of them to one of the batch methods, whose
    defaults call `deliver` for each message, in order. A subscriber overrides a batch
    method when it can take the run for less (a connection frames a run in one loop, a
    consumer applies a run of acks at once); the router always calls the batch method
    (ADR 0006)."""

    def deliver(
        self,
        sub: Subscription,
        subject: bytes,
        reply: bytes | None,
        header: bytes | None,
        payload: bytes,
    ) -> bool | None:
        """Deliver; an internal service returns False to decline (not a responder)."""
        ...

    def deliver_run(self, sub: Subscription, messages: list[Message]) -> int:
        """`deliver(sub, *message)` for each of `messages`, in order; returns how many
        were not declined."""
        taken = 0
        for subject, reply, header, payload in messages:
            if self.deliver(sub, subject, reply, header, payload) is not False:
                taken += 1
        return taken

    def deliver_each(self, sub: Subscription, subjects: list[bytes], payload: bytes) -> int:
        """`deliver(sub, subject, None, None, payload)` for each of `subjects`, in order;
        returns how many were not declined."""
        taken = 0
        for subject in subjects:
            if self.deliver(sub, subject, None, None, payload) is not False:
                taken += 1
        return taken

    def deliver_object(self, sub: Subscription, obj: object) -> int | None:
        """Take `obj`, messages in the form their in-process publisher holds them (a
        consumer's run of deliveries), instead of their bytes: how many messages it
        held, or None when this subscriber takes only bytes (the default: a connection)."""
        return None

    def remove_subscription(self, sub: Subscription) -> None:
        """Drop `sub` (its `UNSUB <sid> <max>` quota is reached): from the subscriber's
        own records and from the router."""
        ...
