"""A source copies only what is durable in its origin (consumer/executor.py).

On a real Brook with a file stream `W` and a stream `S` sourcing it, the engine's sync
threads are held busy by the test (jobs that wait on an event), so no group commit can
finish: a message published to `W` meanwhile is in `W` (its store shows it) but not yet
on stable storage, and the source's consumer must not hand it to `S`'s link until `W`'s
sync is done. Once the threads are free it is copied. Before, it was copied at once: a
crash could then take it back from `W`, whose next message would take its sequence while
`S`'s copy stood for it (tests/crash/test_durable_source_crash.py found that).

A publish without a reply to a file stream is synced soon too, not left in the write
buffer (ADR 0051) for a later PubAck's sync to write: killed a moment later, Brook has it.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import nats
import pytest

import brook
from brook import limits
from tests.support.brookproc import start_brook
from tests.support.jsapi import create_streams
from tests.support.jsapi import request as _request
from tests.support.natsserver import free_port

pytestmark = pytest.mark.timeout(60)


async def _messages(nc: Any, stream: str) -> int:
    info = await _request(nc, f"$JS.API.STREAM.INFO.{stream}")
    return int(info["state"]["messages"])


async def _until(nc: Any, stream: str, count: int) -> None:
    for _ in range(200):
        if await _messages(nc, stream) == count:
            return
        await asyncio.sleep(0.025)
    raise AssertionError(f"{stream} never held {count} messages")


async def test_a_source_waits_for_its_origins_sync_before_copying(tmp_path: Path) -> None:
    async with brook.serve(port=0, store_dir=str(tmp_path)) as server:
        nc = await nats.connect(server.url)
        js = nc.jetstream()
        await create_streams(
            nc, ({"name": "W", "subjects": ["w.>"]}, {"name": "S", "sources": [{"name": "W"}]})
        )
        await js.publish("w.1", b"one")  # acknowledged: durable
        await _until(nc, "S", 1)

        gate = threading.Event()
        busy = [server.jetstream._executor.submit(gate.wait) for _ in range(limits.SYNC_THREADS)]
        try:
            await nc.publish("w.2", b"two")  # no reply: nobody waits for its sync
            await nc.flush()
            await _until(nc, "W", 2)
            await asyncio.sleep(0.3)  # the link's turn came and went
            assert await _messages(nc, "S") == 1, "copied before its origin synced it"
        finally:
            gate.set()
        for job in busy:
            job.result(5)
        await _until(nc, "S", 2)
        got = await _request(nc, "$JS.API.STREAM.MSG.GET.S", {"seq": 2})
        assert got["message"]["subject"] == "w.2"
        await nc.close()


async def test_a_publish_without_reply_survives_a_sigkill_soon_after(tmp_path: Path) -> None:
    store, port = tmp_path / "store", free_port()
    proc = start_brook(store, port)
    try:
        nc = await nats.connect(f"nats://127.0.0.1:{port}")
        await create_streams(nc, ({"name": "W", "subjects": ["w.>"]},))
        for i in range(100):
            await nc.publish(f"w.{i % 3}", b"m-%d" % i)
        await nc.flush()
        await _until(nc, "W", 100)
        await asyncio.sleep(0.5)  # "soon": a group commit takes milliseconds
        await nc.close()
    finally:
        proc.kill()
        proc.wait(10)
    proc = start_brook(store, port)
    try:
        nc = await nats.connect(f"nats://127.0.0.1:{port}")
        assert await _messages(nc, "W") == 100
        last = await _request(nc, "$JS.API.STREAM.MSG.GET.W", {"seq": 100})
        assert last["message"]["subject"] == "w.0"
        await nc.close()
    finally:
        proc.terminate()
        assert proc.wait(10) == 0
