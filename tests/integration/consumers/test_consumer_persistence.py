"""Durable pull consumers of file streams survive a restart: clean shutdown and SIGKILL
(config, delivered sequences, ack floor, pending messages with their delivery counts)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.js.api import AckPolicy, ConsumerConfig

import brook
from brook.config.settings import Settings
from tests.support.brookproc import start_brook
from tests.support.natsserver import free_port

pytestmark = pytest.mark.timeout(60)

ACK_WAIT_S = 0.5


async def setup(js: Any) -> Any:
    await js.add_stream(name="P", subjects=["p.>"])
    for i in range(10):
        await js.publish("p.x", b"%d" % i)
    config = ConsumerConfig(ack_policy=AckPolicy.EXPLICIT, ack_wait=ACK_WAIT_S)
    return await js.pull_subscribe("p.>", durable="d", stream="P", config=config)


async def fetch_seqs(psub: Any, n: int, timeout: float = 2) -> list[Any]:
    msgs: list[Any] = []
    while len(msgs) < n:
        msgs += await psub.fetch(n - len(msgs), timeout=timeout)
    return msgs


async def check_after_restart(js: Any, acked: set[int], unacked: set[int]) -> None:
    """The never-delivered messages come at once, the unacked ones again after ack_wait
    (delivery count 2), the acknowledged ones never."""
    psub = await js.pull_subscribe_bind("d", stream="P")
    expected = set(range(1, 11)) - acked
    got = await fetch_seqs(psub, len(expected), timeout=ACK_WAIT_S * 4)
    seqs = [m.metadata.sequence.stream for m in got]
    assert sorted(seqs) == sorted(expected), "each remaining message exactly once"
    for m in got:
        seq = m.metadata.sequence.stream
        assert m.metadata.num_delivered == (2 if seq in unacked else 1), seq
        await m.ack_sync()
    with pytest.raises(nats.errors.TimeoutError):
        await psub.fetch(1, timeout=ACK_WAIT_S * 2)
    info = await js.consumer_info("P", "d")
    assert (info.delivered.stream_seq, info.ack_floor.stream_seq, info.num_ack_pending) == (
        10,
        10,
        0,
    )


async def test_clean_restart_keeps_durable_consumer(tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    async with brook.serve(port=0, store_dir=store) as server:
        nc = await nats.connect(server.url)
        js = nc.jetstream()
        psub = await setup(js)
        msgs = await fetch_seqs(psub, 6)
        for m in msgs[:4]:
            await m.ack_sync()
        before = await js.consumer_info("P", "d")
        await nc.close()
    assert (before.delivered.stream_seq, before.ack_floor.stream_seq) == (6, 4)
    assert before.num_ack_pending == 2
    async with brook.serve(port=0, store_dir=store) as server:
        nc = await nats.connect(server.url)
        js = nc.jetstream()
        after = await js.consumer_info("P", "d")
        assert after.config.ack_wait == ACK_WAIT_S
        assert after.config.durable_name == "d"
        assert after.created == before.created
        assert (after.delivered.stream_seq, after.delivered.consumer_seq) == (6, 6)
        assert (after.ack_floor.stream_seq, after.ack_floor.consumer_seq) == (4, 4)
        assert (after.num_ack_pending, after.num_pending) == (2, 4)
        await check_after_restart(js, acked={1, 2, 3, 4}, unacked={5, 6})
        await js.delete_consumer("P", "d")
        await nc.close()
    assert not (Path(store) / "streams" / "P" / "consumers" / "d.json").exists()


async def test_sigkill_keeps_ack_sync_acknowledgements(tmp_path: Path) -> None:
    store = tmp_path / "store"
    port = free_port()
    url = f"nats://127.0.0.1:{port}"
    proc = start_brook(store, port)
    try:
        nc = await nats.connect(url, allow_reconnect=False)
        js = nc.jetstream()
        psub = await setup(js)
        msgs = await fetch_seqs(psub, 6)
        await asyncio.gather(*(m.ack_sync() for m in msgs[:2] + msgs[3:5]))  # 1, 2, 4, 5
        proc.send_signal(signal.SIGKILL)
        proc.wait(5)
        await nc.close()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
    proc = start_brook(store, port)
    try:
        nc = await nats.connect(url, allow_reconnect=False)
        js = nc.jetstream()
        info = await js.consumer_info("P", "d")
        assert (info.delivered.stream_seq, info.ack_floor.stream_seq) == (6, 2)
        assert info.num_ack_pending == 2
        await check_after_restart(js, acked={1, 2, 4, 5}, unacked={3, 6})
        await nc.close()
    finally:
        proc.kill()
        proc.wait(5)


async def test_damaged_consumer_file_is_skipped(tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    async with brook.serve(port=0, store_dir=store) as server:
        nc = await nats.connect(server.url)
        js = nc.jetstream()
        await setup(js)
        await js.add_consumer("P", durable_name="good", ack_policy="explicit")
        await js.add_consumer("P", ack_policy="explicit")  # ephemeral: not persisted
        await nc.close()
    consumers = Path(store) / "streams" / "P" / "consumers"
    assert sorted(p.name for p in consumers.iterdir()) == ["d.json", "good.json"]
    bad = consumers / "d.json"
    bad.write_text(json.dumps({"config": {"durable_name": "d"}})[:-5])
    async with brook.serve(port=0, store_dir=store) as server:
        nc = await nats.connect(server.url)
        js = nc.jetstream()
        assert await js.consumers_info("P") is not None
        names = [c.name for c in await js.consumers_info("P")]
        assert names == ["good"]
        assert (await js.stream_info("P")).state.messages == 10
        await nc.close()
    assert bad.exists(), "a damaged consumer file is never deleted"


def _saved_floor(store: Path) -> int:
    """The ack floor (stream sequence) in consumer d's file."""
    path = store / "streams" / "P" / "consumers" / "d.json"
    return int(json.loads(path.read_text())["state"]["ack_floor"]["stream_seq"])


async def _saved_floor_reaches(store: Path, seq: int, timeout: float) -> None:
    for _ in range(int(timeout / 0.02)):
        if _saved_floor(store) >= seq:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"the saved ack floor stayed below {seq}")


@contextlib.asynccontextmanager
async def _ten_delivered(
    store: Path, flush_interval_s: float
) -> AsyncIterator[tuple[Any, Any, list[Any]]]:
    """A Brook with that consumer_flush_interval, consumer d and its ten messages fetched:
    (connection, JetStream context, messages)."""
    settings = Settings()
    settings.jetstream.consumer_flush_interval_s = flush_interval_s
    async with brook.serve(port=0, store_dir=str(store), settings=settings) as server:
        nc = await nats.connect(server.url)
        try:
            js = nc.jetstream()
            yield nc, js, await fetch_seqs(await setup(js), 10)
        finally:
            await nc.close()


async def test_plain_acks_are_saved_at_the_flush_interval_and_ack_sync_at_once(
    tmp_path: Path,
) -> None:
    # Plain acks and deliveries rewrite the consumer's file at most once per
    # consumer_flush_interval_s; an ack that asks for a confirmation is written (and
    # answered) at once, whatever the interval; shutdown writes what is left.
    store = tmp_path / "store"
    async with _ten_delivered(store, 30.0) as (nc, js, msgs):
        await msgs[0].ack_sync()  # written at once: delivered 10, floor 1
        assert _saved_floor(store) == 1
        for m in msgs[1:5]:
            await m.ack()
        await nc.flush()
        info = await js.consumer_info("P", "d")
        assert info.ack_floor.stream_seq == 5
        await asyncio.sleep(0.3)
        assert _saved_floor(store) == 1  # not yet: throttled
        await asyncio.wait_for(msgs[5].ack_sync(), 2)  # not held back by the interval
        await _saved_floor_reaches(store, 6, timeout=2)
        for m in msgs[6:]:
            await m.ack()
        await nc.flush()
        info = await js.consumer_info("P", "d")
        assert info.ack_floor.stream_seq == 10
        assert _saved_floor(store) == 6
    assert _saved_floor(store) == 10  # written at shutdown


async def test_plain_acks_reach_the_file_within_the_flush_interval(tmp_path: Path) -> None:
    store = tmp_path / "store"
    async with _ten_delivered(store, 0.2) as (_nc, _js, msgs):
        for m in msgs:
            await m.ack()
        await _saved_floor_reaches(store, 10, timeout=5)
