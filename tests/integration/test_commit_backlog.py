"""The bound on PubAcks awaiting their fsync (`jetstream.max_acks_awaiting_sync`,
jetstream/backlog.py): a publisher that does not wait for its acks is paused, not buffered
without limit, and loses nothing; the bound and what it did are in /varz."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import nats
import pytest

import brook
from brook.config.settings import JetStreamSettings, Settings
from tests.support.monitor import varz
from tests.support.raw import Msg, RawClient, is_op

pytestmark = pytest.mark.timeout(60)

COUNT = 10_000
WRITES = 20
PAYLOAD = b"x" * 100
# A read takes at most 256 KiB (asyncio's selector loop; uvloop takes less): about 2,000
# of these publishes. So with a bound, at most about that many acks wait at once.
READ_PUBLISHES_MAX = 256 * 1024 // len(b"PUB bp.x _R.0 100\r\n" + PAYLOAD + b"\r\n") + 1


def serve_with_bound(tmp_path: Path, bound: int) -> Any:
    settings = Settings(jetstream=JetStreamSettings(max_acks_awaiting_sync=bound))
    return brook.serve(http_port=-1, store_dir=str(tmp_path), settings=settings)


async def commits(server: Any) -> dict[str, Any]:
    stats: dict[str, Any] = (await varz(server))["jetstream"]["brook_commits"]
    return stats


async def add_stream(server: Any) -> None:
    nc = await nats.connect(server.url)
    await nc.jetstream().add_stream(name="BP", subjects=["bp.>"])
    await nc.close()


async def burst(raw: RawClient, count: int = COUNT) -> None:
    """`count` publishes to the file stream, each asking for its PubAck, sent in
    `WRITES` writes without waiting for any ack."""
    per_write = count // WRITES
    for w in range(WRITES):
        first = w * per_write
        frames = b"".join(
            b"PUB bp.x _R.%d 100\r\n%b\r\n" % (i, PAYLOAD) for i in range(first, first + per_write)
        )
        await raw.send(frames)


async def acks(raw: RawClient, count: int = COUNT) -> list[Msg]:
    got: list[Msg] = []
    while len(got) < count:
        ops = await raw.read_ops(
            until=lambda op: isinstance(op, Msg) and op.subject == b"_R.%d" % (count - 1),
            timeout=30,
        )
        got += [op for op in ops if isinstance(op, Msg)]
    return got


async def subscribed_publisher(raw: RawClient) -> None:
    await raw.handshake()
    await raw.send(b"SUB _R.> 1\r\nPING\r\n")
    await raw.read_ops(until=is_op("PONG"))


async def test_a_publisher_past_the_bound_is_paused_and_every_ack_arrives(
    tmp_path: Path,
) -> None:
    # A bound of 1: every read that publishes to the stream waits for its sync.
    async with serve_with_bound(tmp_path, 1) as server:
        await add_stream(server)
        async with RawClient.connect_url(server.url) as raw:
            await subscribed_publisher(raw)
            await burst(raw)
            got = await acks(raw)
        answers = [(m.subject, json.loads(m.payload)) for m in got]
        assert answers == [
            (b"_R.%d" % i, {"stream": "BP", "seq": i + 1}) for i in range(COUNT)
        ]  # every ack, in order, for a stored message
        stats = await commits(server)
        assert stats["pauses"] >= 1
        assert stats["acks_awaiting_sync"] == 0
        assert stats["paused_connections"] == 0
        assert stats["max_acks_awaiting_sync"] == 1
        # Never every publish's ack at once: at most the bound and one read's worth.
        assert 1 <= stats["acks_awaiting_sync_high_water"] <= 1 + READ_PUBLISHES_MAX


async def test_without_a_bound_nobody_is_paused(tmp_path: Path) -> None:
    async with serve_with_bound(tmp_path, 0) as server:
        await add_stream(server)
        async with RawClient.connect_url(server.url) as raw:
            await subscribed_publisher(raw)
            await burst(raw)
            assert len(await acks(raw)) == COUNT
        stats = await commits(server)
        assert (stats["pauses"], stats["max_acks_awaiting_sync"]) == (0, 0)
        assert stats["acks_awaiting_sync_high_water"] >= 1


async def test_a_paused_publisher_that_leaves_is_forgotten(tmp_path: Path) -> None:
    """The publisher goes away while paused: nothing waits to resume it, what it published
    is stored, and the next publisher is served."""
    async with serve_with_bound(tmp_path, 1) as server:
        await add_stream(server)
        async with RawClient.connect_url(server.url) as raw:
            await subscribed_publisher(raw)
            await burst(raw)
        for _ in range(100):  # the server notices the close
            stats = await commits(server)
            if stats["paused_connections"] == 0 and stats["acks_awaiting_sync"] == 0:
                break
            await asyncio.sleep(0.05)
        assert (stats["paused_connections"], stats["acks_awaiting_sync"]) == (0, 0)
        assert stats["pauses"] >= 1
        nc = await nats.connect(server.url)
        js = nc.jetstream()
        stored = (await js.stream_info("BP")).state.messages
        ack = await js.publish("bp.y", b"after")
        assert ack.seq == stored + 1
        await nc.close()
