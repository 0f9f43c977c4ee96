"""Message schedules through the whole server: the engine's timer fires them on the real
clock, a consumer on the target is told, a produced message is made durable by a group
commit of its own, and a SIGKILL after a schedule fired neither loses its message nor
fires it again. (Exact timing under a manual clock: tests/unit/test_schedules.py.)"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from pathlib import Path

import nats
import pytest

from brook.jetstream.commit import GroupCommitter
from brook.jetstream.models import parse_stream_config
from brook.jetstream.schedules import format_time
from brook.jetstream.store.file import FileStore
from brook.jetstream.stream import Stream
from brook.protocol import headers as hdrs
from tests.support.brookproc import start_brook
from tests.support.natsserver import free_port
from tests.support.streams import SECOND, Clock

pytestmark = pytest.mark.timeout(60)


async def test_a_produced_message_is_made_durable_by_a_group_commit(tmp_path: Path) -> None:
    clock = Clock()
    store = FileStore(directory=tmp_path / "S")
    committer = GroupCommitter(store.sync, None)
    config = parse_stream_config(
        {"name": "S", "subjects": ["s.>"], "allow_msg_schedules": True}, subject_name="S"
    )
    stream = Stream(
        config,
        store,
        now_ns=clock,
        send_ack=lambda reply, ack: None,
        committer=committer,
        created_ns=clock.now,
    )
    header = hdrs.encode([("Nats-Schedule", "@every 1s"), ("Nats-Schedule-Target", "s.t")])
    stream.ingest(b"s.x", None, header, b"tick")  # no reply: nothing asks for a sync
    await committer.drain()
    before = committer.syncs
    clock.now += SECOND
    stream.expire()
    assert store.state().last_seq == 2
    await committer.drain()
    assert committer.syncs > before  # (drain waits; it asks for none when none is due)
    stream.close()


async def _js(url: str, subject: str, body: dict[str, object]) -> dict[str, object]:
    nc = await nats.connect(url, allow_reconnect=False)
    try:
        reply = await nc.request(subject, json.dumps(body).encode(), timeout=5)
        return dict(json.loads(reply.data))
    finally:
        await nc.close()


async def test_schedules_fire_on_time_reach_consumers_and_survive_sigkill(
    tmp_path: Path,
) -> None:
    port = free_port()
    url = f"nats://127.0.0.1:{port}"
    proc = start_brook(tmp_path, port)
    try:
        nc = await nats.connect(url, allow_reconnect=False)
        js = nc.jetstream()
        await js.add_stream(name="S", subjects=["s.>", "t.>"], allow_msg_schedules=True)
        sub = await js.pull_subscribe("t.>", durable="D")
        at = "@at " + format_time((time.time_ns() // SECOND + 2) * SECOND, None)
        await js.publish(
            "s.once", b"once", headers={"Nats-Schedule": at, "Nats-Schedule-Target": "t.once"}
        )
        await js.publish(
            "s.tick",
            b"tick",
            headers={"Nats-Schedule": "@every 1s", "Nats-Schedule-Target": "t.tick"},
        )
        got = await sub.fetch(1, timeout=5)  # the consumer hears of it when it fires
        assert got[0].subject in ("t.once", "t.tick")
        deadline = time.monotonic() + 10
        while True:
            try:
                await js.get_last_msg("S", "t.once")
                break
            except nats.js.errors.NotFoundError:
                assert time.monotonic() < deadline, "the @at schedule never fired"
                await asyncio.sleep(0.1)
        await nc.close()
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    proc = start_brook(tmp_path, port)
    try:
        nc = await nats.connect(url, allow_reconnect=False)
        js = nc.jetstream()
        state = await js.stream_info("S", subjects_filter=">")
        subjects = state.state.subjects or {}
        assert subjects.get("t.once") == 1  # stored once, its schedule purged
        assert "s.once" not in subjects
        assert subjects.get("s.tick") == 1
        ticks = subjects.get("t.tick", 0)
        await asyncio.sleep(2.5)
        state = await js.stream_info("S", subjects_filter=">")
        subjects = state.state.subjects or {}
        assert subjects.get("t.once") == 1  # not fired again after the restart
        assert subjects.get("t.tick", 0) >= ticks + 1  # the repeating one goes on
        await nc.close()
    finally:
        proc.terminate()
        proc.wait()
