"""In-process subscribers (`InternalClient`) as the router calls them (`Subscription.handler`,
called by `Router.publish` directly): a handler that raises is logged and harms neither the
publisher's connection nor the other subscribers; one that declines a request is no
responder, so the requester gets nats-server's 503; an unsubscribed one gets nothing.
A real Brook and a nats-py client over TCP."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import nats
import pytest
from nats.errors import NoRespondersError

import brook
from brook.routing.internal import InternalClient

pytestmark = pytest.mark.timeout(30)


async def test_a_failing_handler_is_logged_and_the_publisher_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with brook.serve(port=0, jetstream=False) as server:
        service = InternalClient(server.router, "svc")
        got: list[tuple[bytes, bytes | None, bytes]] = []

        def broken(subject: bytes, reply: bytes | None, header: bytes | None, data: bytes) -> None:
            raise RuntimeError("a bug in the service")

        def works(subject: bytes, reply: bytes | None, header: bytes | None, data: bytes) -> None:
            got.append((subject, reply, data))

        service.subscribe(b"svc.>", broken)
        service.subscribe(b"svc.ok", works)
        nc = await nats.connect(server.url, allow_reconnect=False)
        seen = await nc.subscribe("svc.ok")
        with caplog.at_level(logging.ERROR, logger="brook.internal"):
            await nc.publish("svc.ok", b"one", reply="r.1")
            await nc.flush()
        assert got == [(b"svc.ok", b"r.1", b"one")]
        assert (await seen.next_msg(timeout=5)).data == b"one"
        assert "svc: handler for b'svc.ok' failed" in caplog.text
        assert "a bug in the service" in caplog.text
        assert nc.is_connected
        await nc.publish("svc.ok", b"two")
        await nc.flush()
        assert [data for _, _, data in got] == [b"one", b"two"]
        await nc.close()


async def test_a_declining_handler_is_no_responder_and_unsubscribed_gets_nothing() -> None:
    async with brook.serve(port=0, jetstream=False) as server:
        service = InternalClient(server.router, "svc")
        calls: list[bytes] = []

        def decline(subject: bytes, reply: bytes | None, header: bytes | None, data: bytes) -> bool:
            calls.append(data)
            return False

        sub = service.subscribe(b"svc.q", decline)
        nc = await nats.connect(server.url, allow_reconnect=False)
        with pytest.raises(NoRespondersError):
            await nc.request("svc.q", b"ask", timeout=5)
        assert calls == [b"ask"]
        assert sub.delivered == 0  # a declined message is not counted
        service.unsubscribe(sub)
        with pytest.raises(NoRespondersError):
            await nc.request("svc.q", b"again", timeout=5)
        await asyncio.sleep(0)
        assert calls == [b"ask"]
        await nc.close()


async def test_a_subscription_removed_during_a_delivery_gets_nothing_more() -> None:
    """Two in-process subscriptions on one subject; the first, called first, removes the
    second: the message under way is not handed to the removed one."""
    async with brook.serve(port=0, jetstream=False) as server:
        service = InternalClient(server.router, "svc")
        calls: list[str] = []
        second: list[Any] = []

        def first(subject: bytes, reply: bytes | None, header: bytes | None, data: bytes) -> None:
            calls.append("first")
            service.unsubscribe(second[0])

        def removed(subject: bytes, reply: bytes | None, header: bytes | None, data: bytes) -> None:
            calls.append("second")

        service.subscribe(b"svc.r", first)
        second.append(service.subscribe(b"svc.r", removed))
        nc = await nats.connect(server.url, allow_reconnect=False)
        await nc.publish("svc.r", b"one")
        await nc.flush()
        assert calls == ["first"]
        await nc.close()
