"""Subscriber stand-ins for tests of the subscription index."""

from __future__ import annotations

from brook.routing.sublist import Subscription


class NeverDelivered:
    """A subscriber that is never delivered to: the sublist only stores it."""

    def deliver(
        self,
        sub: Subscription,
        subject: bytes,
        reply: bytes | None,
        header: bytes | None,
        payload: bytes,
    ) -> None:
        raise AssertionError("the sublist never delivers")
