"""SIGKILL the server while clients publish; every acknowledged message must survive.

Each round starts `brook serve` as a subprocess on a file store, publishes with many
acknowledged publishes in flight (each with a `Nats-Msg-Id`), and kills the server with
SIGKILL at a random moment. Publishes that were not acknowledged are retried with the same
id in the next round, so a message that reached the disk without its PubAck must be
recognised as a duplicate after the restart. At the end every acknowledged message is
present exactly once, byte-exact, and no id appears twice.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import random
import signal
import subprocess
from pathlib import Path

import nats
import pytest

from tests.support.brookproc import start_brook
from tests.support.natsserver import free_port

pytestmark = pytest.mark.timeout(120)

ROUNDS = 5
IN_FLIGHT = 64


def payload(k: int) -> bytes:
    digest = hashlib.sha256(b"%d" % k).digest()
    return digest * (1 + k % 7)  # varied sizes, content derivable from the id


async def publish_until_killed(
    url: str,
    proc: subprocess.Popen[bytes],
    todo: list[int],
    acked: dict[int, int],
    rng: random.Random,
    next_k: int,
) -> int:
    """Publish (retries first, then new ids) until the server dies; returns the next new id."""
    nc = await nats.connect(url, allow_reconnect=False, max_reconnect_attempts=0)
    js = nc.jetstream(timeout=2)
    await js.add_stream(name="CRASH", subjects=["crash.>"])
    loop = asyncio.get_running_loop()
    loop.call_later(rng.uniform(0.2, 0.8), os.kill, proc.pid, signal.SIGKILL)

    async def one(k: int) -> None:
        ack = await js.publish(f"crash.{k % 5}", payload(k), headers={"Nats-Msg-Id": f"m-{k}"})
        if k in acked:
            assert ack.seq == acked[k], f"m-{k} acknowledged twice with different sequences"
        acked[k] = ack.seq

    try:
        while True:
            while len(todo) < IN_FLIGHT:
                todo.append(next_k)
                next_k += 1
            batch, todo[:] = todo[:IN_FLIGHT], todo[IN_FLIGHT:]
            results = await asyncio.gather(*(one(k) for k in batch), return_exceptions=True)
            failed = [
                k for k, r in zip(batch, results, strict=True) if isinstance(r, BaseException)
            ]
            if failed:
                todo[:0] = failed  # retried, with the same ids, after the restart
                return next_k
    finally:
        if not nc.is_closed:
            await nc.close()


async def read_all(url: str) -> list[tuple[int, str, bytes, str]]:
    nc = await nats.connect(url)
    js = nc.jetstream()
    info = await js.stream_info("CRASH")
    out = []
    for seq in range(info.state.first_seq, info.state.last_seq + 1):
        try:
            msg = await js.get_msg("CRASH", seq)
        except nats.js.errors.NotFoundError:
            continue
        msg_id = (msg.headers or {}).get("Nats-Msg-Id", "")
        out.append((seq, msg.subject or "", msg.data or b"", msg_id))
    await nc.close()
    return out


async def stream_shape(url: str) -> tuple[object, ...]:
    """The stream's counters and per-subject counts (its index) as its info tells them."""
    nc = await nats.connect(url)
    try:
        js = nc.jetstream()
        info = await js.stream_info("CRASH", subjects_filter=">")
        st = info.state
        return st.messages, st.bytes, st.first_seq, st.last_seq, st.num_deleted, st.subjects
    finally:
        await nc.close()


@pytest.mark.parametrize(
    "snapshots", ["", "close", "periodic"], ids=["replay", "index-snapshot", "periodic-snapshot"]
)
async def test_acknowledged_messages_survive_sigkill(tmp_path: Path, snapshots: str) -> None:
    """With "close", each round begins with a clean stop, which saves the stream's index
    snapshot (ADR 0046): the killed server opened its store from it. With "periodic", the
    server saves it every 50 ms while the clients publish: each restart loads the one the
    killed server saved last and replays only the log after its mark; the store it opens
    must then be the one a full replay builds."""
    rng = random.Random(int(os.environ.get("BROOK_CRASH_SEED", "7")))
    store = tmp_path / "store"
    port = free_port()
    url = f"nats://127.0.0.1:{port}"
    args: list[str] = []
    if snapshots == "periodic":
        conf = tmp_path / "brook.conf"
        conf.write_text("jetstream { index_snapshot_interval: 50ms }\n")
        args = ["-c", str(conf)]
    log = tmp_path / "brook.log"
    acked: dict[int, int] = {}
    next_k = 0
    todo: list[int] = []
    interrupted = 0
    left = 0  # rounds whose killed server left a periodic snapshot
    for round_ in range(ROUNDS):
        if snapshots == "close" and round_:
            proc = start_brook(store, port)
            proc.terminate()
            assert proc.wait(10) == 0
            assert list(store.rglob("index.snap")), "a clean stop saves the index snapshot"
        proc = start_brook(store, port, log=log, args=args)
        try:
            next_k = await publish_until_killed(url, proc, todo, acked, rng, next_k)
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait(10)
        interrupted += bool(todo)
        left += bool(list(store.rglob("index.snap")))
    assert interrupted == ROUNDS, "every kill must land while publishes are in flight"
    assert acked, "some publishes must have been acknowledged"
    proc = start_brook(store, port, log=log, args=args)
    try:
        stored = await read_all(url)
        state = await stream_shape(url)
    finally:
        proc.terminate()
        assert proc.wait(10) == 0
    if snapshots == "periodic":
        assert left == ROUNDS, "each killed server left a periodic snapshot"
        assert "index snapshot not used" not in log.read_text(), log.read_text()
        for snap in store.rglob("index.snap"):
            snap.unlink()  # the same log opened by a full replay
        proc = start_brook(store, port)
        try:
            assert await read_all(url) == stored
            assert await stream_shape(url) == state
        finally:
            proc.terminate()
            assert proc.wait(10) == 0
    by_id: dict[str, tuple[int, str, bytes]] = {}
    for seq, subject, data, msg_id in stored:
        assert msg_id not in by_id, f"{msg_id} stored twice (seqs {by_id[msg_id][0]} and {seq})"
        by_id[msg_id] = (seq, subject, data)
    for k, seq in acked.items():
        entry = by_id.get(f"m-{k}")
        assert entry is not None, f"acknowledged m-{k} (seq {seq}) lost"
        assert entry == (seq, f"crash.{k % 5}", payload(k)), f"m-{k} changed"
    seqs = [s for s, *_ in stored]
    assert seqs == sorted(seqs)
    unacked_but_stored = len(stored) - len(acked)
    print(
        json.dumps(
            {"acked": len(acked), "stored": len(stored), "stored_unacked": unacked_but_stored}
        )
    )
