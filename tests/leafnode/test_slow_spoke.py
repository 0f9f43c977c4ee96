"""A spoke that never reads: once what Brook (the hub) holds for it passes
`max_pending`, the connection is cut as a slow consumer; the hub's clients are served
throughout (ADR 0032)."""

from __future__ import annotations

import asyncio
import json

import nats
import pytest

from tests.support.leafnodes import brook_hub, hub_conf, wait_leaf
from tests.support.natsserver import free_port

pytestmark = pytest.mark.timeout(60)


async def test_spoke_that_never_reads_is_cut(caplog: pytest.LogCaptureFixture) -> None:
    port = free_port()
    async with brook_hub(hub_conf(port) + "max_pending: 1MB\n") as hub:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        info = json.loads((await reader.readline())[5:])
        assert info["leafnode_urls"]
        writer.write(b'CONNECT {"name":"stuck","headers":true}\r\nLS+ big\r\n')
        await writer.drain()
        leaf = await wait_leaf(hub)
        nc = await nats.connect(hub.url)
        for _ in range(50):
            if leaf.peer_has_interest(b"big"):
                break
            await asyncio.sleep(0.02)
        chunk = b"x" * 65536
        for _ in range(400):  # 26 MB: more than the socket buffers and max_pending
            await nc.publish("big", chunk)
            if leaf.transport is None:
                break
            await nc.flush()
        await asyncio.wait_for(leaf.closed, 10)
        assert "slow consumer" in caplog.text
        sub = await nc.subscribe("still")
        await nc.publish("still", b"served")
        assert (await sub.next_msg(timeout=2)).data == b"served"
        await nc.close()
        writer.close()
