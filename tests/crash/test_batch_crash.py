"""Atomic batches are stored whole or not at all, across crashes.

A commit writes its messages one after another, the last with `Nats-Batch-Commit`; a
crash in between leaves the first ones on disk. The first test makes that state for
real (the file store written directly, as the commit writes it, and closed without the
last message) and starts Brook over it: the store is cut back to before the batch, so
its sequences are taken again by the next messages. The second SIGKILLs `brook serve`
at random moments while clients commit batches, then checks that every stored batch is
whole and every acknowledged batch is there. The third does the same with fast batches: every
message a flow ack or PubAck covered is there, once.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import nats
import pytest

import brook
from brook.jetstream.store.file import FileStore
from tests.support.brookproc import sigkill_rounds, start_brook
from tests.support.natsserver import free_port

pytestmark = pytest.mark.timeout(120)

BATCH = 20
ROUNDS = 4


def _header(batch: str, seq: int, commit: bool = False) -> bytes:
    lines = [f"Nats-Batch-Id: {batch}", f"Nats-Batch-Sequence: {seq}"]
    if commit:
        lines.append("Nats-Batch-Commit: 1")
    return ("NATS/1.0\r\n" + "".join(f"{line}\r\n" for line in lines) + "\r\n").encode()


async def _commit(nc: Any, batch: str, size: int) -> dict[str, Any]:
    """Publish a batch of `size` on `b.<batch>`; the commit's PubAck (raises on a
    timeout, a lost connection or an error reply)."""
    for seq in range(1, size):
        await nc.request(f"b.{batch}", b"%d" % seq, timeout=2, headers=_parse(_header(batch, seq)))
    reply = await nc.request(
        f"b.{batch}", b"%d" % size, timeout=2, headers=_parse(_header(batch, size, True))
    )
    ack: dict[str, Any] = json.loads(reply.data)
    assert "error" not in ack, ack
    return ack


def _parse(block: bytes) -> dict[str, str]:
    lines = block.decode().split("\r\n")[1:-2]
    return dict(line.split(": ", 1) for line in lines)


async def test_a_commit_cut_short_is_removed_at_start(tmp_path: Path) -> None:
    store_dir = tmp_path / "store"
    async with brook.serve(port=0, store_dir=str(store_dir)) as server:
        nc = await nats.connect(server.url)
        await nc.jetstream().add_stream(name="B", subjects=["b.>"], allow_atomic=True)
        ack = await _commit(nc, "whole", 3)
        assert ack == {"stream": "B", "seq": 3, "batch": "whole", "count": 3}
        await nc.close()
    # The first two of three messages of a commit, on disk, as a crash leaves them.
    store = FileStore(store_dir / "streams" / "B" / "data")
    store.store("b.cut", _header("cut", 1), b"1", 1)
    store.store("b.cut", _header("cut", 2), b"2", 2)
    store.sync()
    store.close()
    async with brook.serve(port=0, store_dir=str(store_dir)) as server:
        nc = await nats.connect(server.url)
        js = nc.jetstream()
        info = await js.stream_info("B")
        assert info.state.messages == 3
        assert info.state.last_seq == 3  # the cut batch's sequences are free again
        assert (await js.get_last_msg("B", "b.whole")).seq == 3
        with pytest.raises(nats.js.errors.NotFoundError):
            await js.get_last_msg("B", "b.cut")
        ack = await _commit(nc, "after", 2)  # the stream takes batches as before
        assert ack == {"stream": "B", "seq": 5, "batch": "after", "count": 2}
        await nc.close()
    async with brook.serve(port=0, store_dir=str(store_dir)) as server:  # and keeps them
        nc = await nats.connect(server.url)
        info = await nc.jetstream().stream_info("B")
        assert (info.state.messages, info.state.last_seq) == (5, 5)
        await nc.close()


async def _until_killed(
    url: str, proc: subprocess.Popen[bytes], rng: random.Random, acked: set[str], round_: int
) -> None:
    nc = await nats.connect(url, allow_reconnect=False, max_reconnect_attempts=0)
    await nc.jetstream().add_stream(name="B", subjects=["b.>"], allow_atomic=True)
    asyncio.get_running_loop().call_later(rng.uniform(0.3, 1.0), os.kill, proc.pid, signal.SIGKILL)

    async def client(c: int) -> None:
        n = 0
        while True:
            batch = f"r{round_}c{c}n{n}"
            await _commit(nc, batch, BATCH)
            acked.add(batch)
            n += 1

    try:
        await asyncio.gather(*(client(c) for c in range(4)))
    except Exception:
        pass
    finally:
        if not nc.is_closed:
            await nc.close()


async def _stored(url: str) -> Counter[str]:
    """How many messages of each batch the stream holds, read through a pull consumer.
    A cut commit's sequences are free again (the first test shows it); what a kill may
    leave unused is the one sequence of a record torn in its header, which the log keeps
    (storage-format.md 7.6: its batch, in the torn part, is unknown): one per round."""
    nc = await nats.connect(url)
    js = nc.jetstream(timeout=30)
    state = (await js.stream_info("B")).state
    total = state.messages
    assert 0 <= state.last_seq - total <= ROUNDS, state
    sub = await js.pull_subscribe("b.>", durable="check")
    seen: Counter[str] = Counter()
    while sum(seen.values()) < total:
        try:
            got = await sub.fetch(500, timeout=10)
        except nats.errors.TimeoutError:
            info = await js.stream_info("B")
            raise AssertionError(f"{sum(seen.values())} of {total}: {info.state}") from None
        for msg in got:
            assert msg.headers is not None
            seen[msg.headers["Nats-Batch-Id"]] += 1
            await msg.ack()
    await nc.close()
    return seen


async def test_sigkill_during_commits_leaves_whole_batches(tmp_path: Path) -> None:
    rng = random.Random(16)
    store, port = tmp_path / "store", free_port()
    url = f"nats://127.0.0.1:{port}"
    acked: set[str] = set()
    await sigkill_rounds(
        store, port, ROUNDS, lambda proc, round_: _until_killed(url, proc, rng, acked, round_)
    )
    proc = start_brook(store, port)
    try:
        stored = await _stored(url)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=10)
    assert acked, "no batch was acknowledged"
    assert acked <= set(stored), "an acknowledged batch is missing"
    partial = {batch: n for batch, n in stored.items() if n != BATCH}
    assert not partial, f"batches stored in part: {partial}"


async def _fast_until_killed(
    url: str, proc: subprocess.Popen[bytes], rng: random.Random, acked: set[str], round_: int
) -> None:
    """Fast batches of BATCH messages, a flow ack after each (flow 1): every message a
    flow ack or the PubAck covered goes into `acked` as `<batch>/<seq>`."""
    nc = await nats.connect(url, allow_reconnect=False, max_reconnect_attempts=0)
    await nc.jetstream().add_stream(name="F", subjects=["f.>"], allow_batched=True)
    asyncio.get_running_loop().call_later(rng.uniform(0.3, 1.0), os.kill, proc.pid, signal.SIGKILL)

    async def client(c: int) -> None:
        n = 0
        while True:
            batch = f"r{round_}c{c}n{n}"
            sub = await nc.subscribe(f"fi.{batch}.>")
            for seq in range(1, BATCH + 1):
                op = 0 if seq == 1 else 2 if seq == BATCH else 1
                reply_to = f"fi.{batch}.1.fail.{seq}.{op}.$FI"
                await nc.publish(f"f.{batch}", b"%d" % seq, reply=reply_to)
                while True:
                    reply = json.loads((await sub.next_msg(timeout=2)).data)
                    assert "error" not in reply, reply
                    done = reply.get("seq") if reply.get("type") == "ack" else reply.get("count")
                    if done == seq:
                        break
                acked.add(f"{batch}/{seq}")
            await sub.unsubscribe()
            n += 1

    try:
        await asyncio.gather(*(client(c) for c in range(4)))
    except Exception:
        pass
    finally:
        if not nc.is_closed:
            await nc.close()


async def test_sigkill_during_fast_batches_keeps_every_acknowledged_message(
    tmp_path: Path,
) -> None:
    """A fast batch's flow ack says the messages up to it are stored: after SIGKILLs,
    each one is there, once."""
    rng = random.Random(17)
    store, port = tmp_path / "store", free_port()
    url = f"nats://127.0.0.1:{port}"
    acked: set[str] = set()
    await sigkill_rounds(
        store, port, ROUNDS, lambda proc, round_: _fast_until_killed(url, proc, rng, acked, round_)
    )
    proc = start_brook(store, port)
    try:
        nc = await nats.connect(url)
        js = nc.jetstream(timeout=30)
        total = (await js.stream_info("F")).state.messages
        sub = await js.pull_subscribe("f.>", durable="check")
        stored: Counter[str] = Counter()
        while sum(stored.values()) < total:
            for msg in await sub.fetch(500, timeout=10):
                stored[f"{msg.subject[2:]}/{msg.data.decode()}"] += 1
                await msg.ack()
        await nc.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=10)
    assert acked, "no message was acknowledged"
    assert acked <= set(stored), "an acknowledged message is missing"
    assert max(stored.values()) == 1, "a message was stored twice"
