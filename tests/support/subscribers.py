"""Subscriber stand-ins for tests of the subscription index."""

from __future__ import annotations

from brook.routing.sublist import Subscription
from brook.routing.subscriber import Subscriber


class NeverDelivered(Subscriber):
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

    def remove_subscription(self, sub: Subscription) -> None:
        raise AssertionError("the sublist never removes on its own")
