"""Core NATS through the real nats-py client against a real Brook server over TCP."""

from __future__ import annotations

import asyncio
import logging
import socket
from typing import Any

import bcrypt
import nats
import pytest
from nats.errors import MaxPayloadError, NoRespondersError

import brook

pytestmark = pytest.mark.timeout(20)


class Inbox:
    """Collects messages from a subscription callback and waits for a count."""

    def __init__(self) -> None:
        self.msgs: list[Any] = []
        self._changed = asyncio.Event()

    async def cb(self, msg: Any) -> None:
        self.msgs.append(msg)
        self._changed.set()

    async def wait_for(self, n: int, timeout: float = 5.0) -> list[Any]:
        async with asyncio.timeout(timeout):
            while len(self.msgs) < n:
                self._changed.clear()
                await self._changed.wait()
        return self.msgs


async def test_publish_subscribe_with_wildcards(nc: Any) -> None:
    star, full, literal = Inbox(), Inbox(), Inbox()
    await nc.subscribe("orders.*", cb=star.cb)
    await nc.subscribe("orders.>", cb=full.cb)
    await nc.subscribe("orders.new", cb=literal.cb)
    for subject in ("orders.new", "orders.eu.new", "orders", "other.new"):
        await nc.publish(subject, subject.encode())
    await nc.flush()
    assert [m.subject for m in await full.wait_for(2)] == ["orders.new", "orders.eu.new"]
    assert [m.data for m in await star.wait_for(1)] == [b"orders.new"]
    assert [m.subject for m in await literal.wait_for(1)] == ["orders.new"]
    await nc.flush()
    assert (len(star.msgs), len(full.msgs), len(literal.msgs)) == (1, 2, 1)


async def test_headers_round_trip_byte_exact(nc: Any) -> None:
    inbox = Inbox()
    await nc.subscribe("hdr", cb=inbox.cb)
    payload = bytes(range(256)) * 4
    sent = {"X-Trace": "t1", "Nats-Msg-Id": "abc-1", "Weird-Value": "a: b ; c"}
    await nc.publish("hdr", payload, headers=sent)
    (msg,) = await inbox.wait_for(1)
    assert msg.data == payload
    assert msg.headers == sent


async def test_queue_group_delivers_each_message_to_one_member(nc: Any, server: Any) -> None:
    other = await nats.connect(server.url)
    members = [Inbox() for _ in range(3)]
    plain = Inbox()
    await nc.subscribe("work", queue="workers", cb=members[0].cb)
    await nc.subscribe("work", queue="workers", cb=members[1].cb)
    await other.subscribe("work", queue="workers", cb=members[2].cb)
    await other.subscribe("work", cb=plain.cb)
    await other.flush()
    n = 300
    for i in range(n):
        await nc.publish("work", str(i).encode())
    await plain.wait_for(n)
    await nc.flush()
    await other.flush()
    await asyncio.sleep(0.05)
    got = sorted(int(m.data) for box in members for m in box.msgs)
    assert got == list(range(n)), "every message reaches exactly one group member"
    assert all(box.msgs for box in members), "random choice spreads load over all members"
    await other.close()


async def test_request_reply_new_and_old_style(nc: Any) -> None:
    async def responder(msg: Any) -> None:
        await msg.respond(b"echo:" + msg.data)

    await nc.subscribe("svc.echo", cb=responder)
    reply = await nc.request("svc.echo", b"one", timeout=2)
    assert reply.data == b"echo:one"
    replies = await asyncio.gather(
        *(nc.request("svc.echo", b"%d" % i, timeout=2) for i in range(50))
    )
    assert [r.data for r in replies] == [b"echo:%d" % i for i in range(50)]
    old = await nc.request("svc.echo", b"old", timeout=2, old_style=True)
    assert old.data == b"echo:old"


async def test_no_responders(nc: Any) -> None:
    with pytest.raises(NoRespondersError):
        await nc.request("nobody.home", b"anyone?", timeout=2)


async def test_large_payload_is_refused(server: Any) -> None:
    async with brook.serve(port=0, max_payload_bytes=1024) as small:
        client = await nats.connect(small.url, allow_reconnect=False)
        assert client.max_payload == 1024
        with pytest.raises(MaxPayloadError):
            await client.publish("big", b"x" * 1025)
        await client.publish("ok", b"x" * 1024)
        await client.flush()
        await client.close()


async def test_max_payload_enforced_by_server_not_only_client() -> None:
    async with brook.serve(port=0, max_payload_bytes=1024) as small:
        client = await nats.connect(small.url, allow_reconnect=False)
        client._max_payload = 10 * 1024  # a client that ignores INFO's max_payload
        await client.publish("big", b"x" * 2048)
        async with asyncio.timeout(5):
            while not client.is_closed:
                await asyncio.sleep(0.01)
        assert "maximum payload violation" in str(client.last_error).lower()


async def test_echo_false_skips_own_messages(server: Any) -> None:
    quiet = await nats.connect(server.url, no_echo=True)
    loud = await nats.connect(server.url)
    own, others = Inbox(), Inbox()
    await quiet.subscribe("chat", cb=own.cb)
    await loud.subscribe("chat", cb=others.cb)
    await quiet.flush()
    await loud.flush()
    await quiet.publish("chat", b"from-quiet")
    await loud.publish("chat", b"from-loud")
    await others.wait_for(2)
    await own.wait_for(1)
    await quiet.flush()
    assert [m.data for m in own.msgs] == [b"from-loud"]
    await quiet.close()
    await loud.close()


async def test_auto_unsubscribe_after_max(nc: Any) -> None:
    inbox = Inbox()
    sub = await nc.subscribe("limited", cb=inbox.cb)
    await sub.unsubscribe(limit=2)
    for i in range(5):
        await nc.publish("limited", b"%d" % i)
    await nc.flush()
    await inbox.wait_for(2)
    await nc.flush()
    assert [m.data for m in inbox.msgs] == [b"0", b"1"]


async def test_token_auth() -> None:
    async with brook.serve(port=0, token="s3cret") as srv:
        good = await nats.connect(srv.url, token="s3cret", allow_reconnect=False)
        assert good.is_connected
        await good.close()
        with pytest.raises(Exception, match=r"(?i)authorization violation"):
            await nats.connect(
                srv.url, token="wrong", allow_reconnect=False, max_reconnect_attempts=0
            )


@pytest.mark.parametrize("hashed", [False, True], ids=["plain", "bcrypt"])
async def test_user_password_auth(hashed: bool) -> None:
    secret = "pa55"
    stored = bcrypt.hashpw(secret.encode(), bcrypt.gensalt(rounds=4)).decode() if hashed else secret
    async with brook.serve(port=0, user="alice", password=stored) as srv:
        good = await nats.connect(srv.url, user="alice", password=secret, allow_reconnect=False)
        inbox = Inbox()
        await good.subscribe("x", cb=inbox.cb)
        await good.publish("x", b"after-auth")
        await inbox.wait_for(1)
        await good.close()
        for user, password in (("alice", "nope"), ("bob", secret)):
            with pytest.raises(Exception, match=r"(?i)authorization violation"):
                await nats.connect(
                    srv.url,
                    user=user,
                    password=password,
                    allow_reconnect=False,
                    max_reconnect_attempts=0,
                )


async def test_drain_delivers_pending_then_closes(nc: Any) -> None:
    seen: list[bytes] = []

    async def slow(msg: Any) -> None:
        await asyncio.sleep(0.001)
        seen.append(msg.data)

    await nc.subscribe("drain.me", cb=slow)
    for i in range(100):
        await nc.publish("drain.me", b"%d" % i)
    await nc.flush()
    await nc.drain()
    assert nc.is_closed
    assert seen == [b"%d" % i for i in range(100)]


async def test_client_reconnects_after_server_restart() -> None:
    async with brook.serve(port=0) as first:
        port = first.port
        reconnected = asyncio.Event()

        async def on_reconnect() -> None:
            reconnected.set()

        client = await nats.connect(
            first.url,
            reconnected_cb=on_reconnect,
            reconnect_time_wait=0.1,
            max_reconnect_attempts=-1,
        )
        inbox = Inbox()
        await client.subscribe("survives", cb=inbox.cb)
        await client.flush()
    # The first server is gone; start a new one on the same port.
    async with brook.serve(port=port) as second:
        async with asyncio.timeout(10):
            await reconnected.wait()
        publisher = await nats.connect(second.url)
        await client.flush()  # the client re-sent its SUB on reconnect
        await publisher.publish("survives", b"after-restart")
        await inbox.wait_for(1)
        assert inbox.msgs[0].data == b"after-restart"
        await publisher.close()
        await client.close()


async def test_many_clients_fan_out(server: Any) -> None:
    clients = [await nats.connect(server.url) for _ in range(10)]
    boxes = [Inbox() for _ in clients]
    for client, box in zip(clients, boxes, strict=True):
        await client.subscribe("broadcast", cb=box.cb)
        await client.flush()
    await clients[0].publish("broadcast", b"hi all")
    for box in boxes:
        assert [m.data for m in await box.wait_for(1)] == [b"hi all"]
    for client in clients:
        await client.close()
    assert server.statistics()["connections"] == 0 or await _eventually_zero(server)


async def _eventually_zero(server: Any) -> bool:
    async with asyncio.timeout(2):
        while server.statistics()["connections"]:
            await asyncio.sleep(0.01)
    return True


async def test_trace_logs_protocol_bytes(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="brook.connection")
    async with brook.serve(port=0, trace=True) as srv:
        client = await nats.connect(srv.url)
        await client.publish("traced.subject", b"traced-payload")
        await client.flush()
        await client.close()
    received = [r.getMessage() for r in caplog.records if "<<-" in r.getMessage()]
    sent = [r.getMessage() for r in caplog.records if "->>" in r.getMessage()]
    assert any("PUB traced.subject" in m and "traced-payload" in m for m in received), received
    assert any("PONG" in m for m in sent)


async def test_no_trace_by_default(caplog: pytest.LogCaptureFixture, nc: Any) -> None:
    caplog.set_level(logging.DEBUG, logger="brook.connection")
    await nc.publish("quiet", b"x")
    await nc.flush()
    assert not [r for r in caplog.records if "<<-" in r.getMessage()]


@pytest.mark.parametrize(
    "limits",
    [
        # cut off by the pending-output cap (max_payload may not exceed max_pending)
        {"max_pending_bytes": 1024 * 1024, "max_payload_bytes": 64 * 1024},
        {"write_deadline_s": 0.3},  # cut off because its socket stays unwritable
    ],
    ids=["max_pending", "write_deadline"],
)
async def test_slow_consumer_is_dropped_and_others_are_unaffected(limits: dict[str, Any]) -> None:
    async with brook.serve(port=0, **limits) as srv:
        # A subscriber that never reads, with a tiny receive buffer.
        stalled = socket.socket()
        stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        stalled.setblocking(False)
        await asyncio.get_running_loop().sock_connect(stalled, ("127.0.0.1", srv.port))
        stalled.send(b'CONNECT {"verbose":false}\r\nSUB flood 1\r\n')
        healthy = await nats.connect(srv.url, allow_reconnect=False)
        inbox = Inbox()
        await healthy.subscribe("flood", cb=inbox.cb, pending_bytes_limit=256 * 1024 * 1024)
        publisher = await nats.connect(srv.url, allow_reconnect=False)
        async with asyncio.timeout(5):
            while len(srv.router.sublist.match(b"flood").plain) < 2:
                await asyncio.sleep(0.01)
        # 12.8 MB: more than the stalled socket's kernel buffers and max_pending together.
        n, chunk = 800, b"x" * 16 * 1024
        for i in range(n):
            await publisher.publish("flood", chunk)
            if i % 50 == 0:
                await publisher.flush()
        await publisher.flush()
        assert len(await inbox.wait_for(n, timeout=15)) == n, "the healthy subscriber got all"
        async with asyncio.timeout(5):
            while srv.slow_consumers == 0:
                await asyncio.sleep(0.02)
        assert srv.slow_consumers == 1
        assert len(srv.clients) == 2, "only the stalled connection was dropped"
        stalled.close()
        await healthy.close()
        await publisher.close()


async def test_a_slow_but_reading_subscriber_outlives_the_write_deadline() -> None:
    """As nats-server's write deadline: a client that keeps taking bytes, however far
    behind, is not cut off (max_pending bounds it); only one that takes nothing is."""
    async with brook.serve(port=0, write_deadline_s=0.3) as srv:
        loop = asyncio.get_running_loop()
        slow = socket.socket()  # default buffers: a tiny window stalls TCP itself
        slow.setblocking(False)
        await loop.sock_connect(slow, ("127.0.0.1", srv.port))
        slow.send(b'CONNECT {"verbose":false}\r\nSUB flood 1\r\n')
        publisher = await nats.connect(srv.url, allow_reconnect=False)
        async with asyncio.timeout(5):
            while not srv.router.sublist.match(b"flood").plain:
                await asyncio.sleep(0.01)
        total = 2000 * 16 * 1024

        async def read_slowly() -> None:
            received = 0
            while received < total:
                data = await loop.sock_recv(slow, 64 * 1024)
                assert data, "the server closed a subscriber that kept reading"
                received += len(data)
                await asyncio.sleep(0.005)

        # 32 MB: more than the kernel buffers hold, read at at most 13 MB/s from the start,
        # so the server's output stays paused far longer than the deadline while it is read.
        reader = asyncio.ensure_future(read_slowly())
        for i in range(2000):
            await publisher.publish("flood", b"x" * 16 * 1024)
            if i % 100 == 0:
                await publisher.flush()
        await publisher.flush()
        await asyncio.wait_for(reader, 30)
        assert srv.slow_consumers == 0
        slow.close()
        await publisher.close()
