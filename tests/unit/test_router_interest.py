"""`Router.watch_interest`: callbacks for subscriptions that could match a watched subject."""

from __future__ import annotations

from brook.routing.router import Router
from brook.routing.sublist import Subscription
from brook.routing.subscriber import Subscriber


class _Client(Subscriber):
    echo = True

    def deliver(
        self,
        sub: Subscription,
        subject: bytes,
        reply: bytes | None,
        header: bytes | None,
        payload: bytes,
    ) -> bool | None:
        return None

    def remove_subscription(self, sub: Subscription) -> None:
        raise AssertionError("no quotas here")


def test_watch_notifies_matching_subscriptions_only() -> None:
    router = Router()
    calls: list[bool] = []

    def cb() -> None:
        calls.append(router.has_interest(b"d.x"))

    router.watch_interest(b"d.x", cb)
    client = _Client()
    other = Subscription(client, b"e.x", b"1")
    router.subscribe(other)
    assert calls == []
    exact = Subscription(client, b"d.x", b"2")
    router.subscribe(exact)
    wild = Subscription(client, b"d.*", b"3", queue=b"q")
    router.subscribe(wild)
    router.unsubscribe(exact)
    router.unsubscribe(wild)
    assert calls == [True, True, True, False]
    router.unwatch_interest(b"d.x", cb)
    router.subscribe(exact)
    assert calls == [True, True, True, False]
    router.unwatch_interest(b"d.x", cb)  # unknown: ignored
