"""SIGKILL `brook serve` while it restores a stream: a restore is all or nothing.

A backup of a stream with a durable consumer is taken from an in-process Brook; then a
`brook serve` subprocess on its own store receives it and is killed with SIGKILL, in one
round while chunks are still arriving and in the others at a spread of moments after the
last chunk (while it unpacks, checks, commits, adopts). After each restart on the same
directory the stream is either absent (and can be restored) or complete, with every message
and the consumer's state, and the staging area is empty.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import nats
import pytest

import brook
from tests.support.brookproc import start_brook
from tests.support.natsserver import free_port
from tests.support.snapshots import Backup, backup, restore, send_chunks, start_restore

pytestmark = pytest.mark.timeout(180)

MESSAGES = 2000
KILL_DELAYS_S = (0.0, 0.02, 0.05, 0.1, 0.2, 0.4, 0.8)


async def make_backup(store: Path) -> tuple[Backup, dict[str, Any]]:
    async with brook.serve(port=0, store_dir=str(store)) as server:
        nc = await nats.connect(server.url)
        js = nc.jetstream()
        await js.add_stream(name="R", subjects=["r.>"])
        for i in range(MESSAGES):
            await js.publish(f"r.{i % 5}", os.urandom(2000), headers={"I": str(i)})
        await js.delete_msg("R", 10)
        create = {"stream_name": "R", "config": {"durable_name": "D", "ack_policy": "explicit"}}
        await nc.request("$JS.API.CONSUMER.CREATE.R.D", json.dumps(create).encode())
        sub = await js.pull_subscribe_bind("D", "R")
        for m in await sub.fetch(30):
            await m.ack_sync()
        consumer = json.loads((await nc.request("$JS.API.CONSUMER.INFO.R.D", b"")).data)
        saved = await backup(nc, "R")
        await nc.close()
    return saved, {k: consumer[k] for k in ("ack_floor", "num_pending", "num_ack_pending")}


def kill(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)


async def state_after_restart(store: Path, port: int) -> tuple[Any, Any]:
    """(stream info or None, consumer view or None) on a restarted server."""
    proc = start_brook(store, port)
    try:
        nc = await nats.connect(f"nats://127.0.0.1:{port}", allow_reconnect=False)
        info = json.loads((await nc.request("$JS.API.STREAM.INFO.R", b"", timeout=10)).data)
        consumer = None
        if "error" not in info:
            c = json.loads((await nc.request("$JS.API.CONSUMER.INFO.R.D", b"", timeout=10)).data)
            consumer = {k: c[k] for k in ("ack_floor", "num_pending", "num_ack_pending")}
            consumer["ack_floor"].pop("last_active", None)
        await nc.close()
        return (None if "error" in info else info), consumer
    finally:
        kill(proc)


async def test_sigkill_during_restore_leaves_all_or_nothing(tmp_path: Path) -> None:
    saved, consumer_before = await make_backup(tmp_path / "source")
    consumer_before["ack_floor"].pop("last_active", None)
    store = tmp_path / "target"
    port = free_port()
    outcomes = []
    for delay in (None, *KILL_DELAYS_S):  # None: killed while chunks still arrive
        proc = start_brook(store, port)
        try:
            nc = await nats.connect(f"nats://127.0.0.1:{port}", allow_reconnect=False)
            started = await start_restore(nc, "R", saved.meta)
            assert "error" not in started, started
            if delay is None:
                await send_chunks(
                    nc, started["deliver_subject"], saved.data[: len(saved.data) // 2]
                )
            else:
                await send_chunks(nc, started["deliver_subject"], saved.data)
                await nc.publish(started["deliver_subject"], b"", reply=nc.new_inbox())
                await nc.flush()
                await asyncio.sleep(delay)
        finally:
            kill(proc)
        info, consumer = await state_after_restart(store, port)
        staging = store / "restores"
        assert not staging.exists() or not any(staging.iterdir()), "staging not emptied at start"
        if info is None:
            outcomes.append("absent")
            assert not (store / "streams" / "R").exists()
            continue
        outcomes.append("complete")
        assert info["state"]["messages"] == MESSAGES - 1
        assert info["state"]["last_seq"] == MESSAGES
        assert consumer == consumer_before
        # Complete: remove it, so that the next round restores again.
        proc = start_brook(store, port)
        try:
            nc = await nats.connect(f"nats://127.0.0.1:{port}", allow_reconnect=False)
            await nc.jetstream().delete_stream("R")
            await nc.close()
        finally:
            kill(proc)
    assert outcomes[0] == "absent"
    # Finally, a restore that is left alone succeeds.
    proc = start_brook(store, port)
    try:
        nc = await nats.connect(f"nats://127.0.0.1:{port}", allow_reconnect=False)
        final = await restore(nc, "R", saved.meta, saved.data)
        assert final["state"]["messages"] == MESSAGES - 1, final
        await nc.close()
    finally:
        kill(proc)
    print("outcomes by kill delay:", outcomes)
