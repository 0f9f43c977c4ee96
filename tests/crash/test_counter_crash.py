"""SIGKILL the server while clients increment counters; every acknowledged increment must
be counted exactly once.

Each round starts `brook serve` as a subprocess on a file store and sends increments
(`Nats-Incr`, each with its own `Nats-Msg-Id`, many in flight, over a few subjects) to a
counter stream, and acknowledged plain publishes to a stream with `persist_mode: async`,
then kills the server with SIGKILL at a random moment. Increments that were not
acknowledged are sent again with the same id in the next round, so one that reached the
disk without its PubAck is recognised as a duplicate after the restart. At the end each
subject's stored history is a chain (each total is the previous one plus the message's
increment, and each acknowledged total is the one stored at its sequence), no increment
is stored twice, each subject's total is the sum of all its increments, and every
acknowledged message of the async stream is there: its PubAck did not wait for the
fsync, but the write had reached the operating system, which a process crash does not
undo.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import subprocess
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.js.api import PersistMode, StreamConfig

from tests.support.brookproc import start_brook
from tests.support.natsserver import free_port

pytestmark = pytest.mark.timeout(120)

ROUNDS = 5
IN_FLIGHT = 64
SUBJECTS = 3


def increment(k: int) -> int:
    return k % 11 - 3  # negative, zero and positive steps


def subject(k: int) -> str:
    return f"hits.{k % SUBJECTS}"


class Book:
    """What the clients were told: acknowledged increments and async publishes."""

    def __init__(self) -> None:
        self.acked: dict[int, tuple[int, str]] = {}  # increment k -> (seq, total)
        self.async_acked: dict[int, int] = {}  # async publish k -> seq
        self.todo: list[int] = []
        self.next_k = 0
        self.next_async = 0


async def _setup(js: Any) -> None:
    await js.add_stream(StreamConfig(name="HITS", subjects=["hits.>"], allow_msg_counter=True))
    await js.add_stream(name="ASYNC", subjects=["async"], persist_mode=PersistMode.ASYNC)


async def publish_until_killed(
    url: str, proc: subprocess.Popen[bytes] | None, book: Book, rng: random.Random
) -> None:
    """Increment (retries first, then new ids) until the server dies; with no `proc`,
    until every increment owed is acknowledged."""
    nc = await nats.connect(url, allow_reconnect=False, max_reconnect_attempts=0)
    js = nc.jetstream(timeout=2)
    await _setup(js)
    if proc is not None:
        asyncio.get_running_loop().call_later(
            rng.uniform(0.2, 0.8), os.kill, proc.pid, signal.SIGKILL
        )

    async def one(k: int) -> None:
        headers = {"Nats-Incr": str(increment(k)), "Nats-Msg-Id": f"i-{k}"}
        ack = await js.publish(subject(k), b"", headers=headers)
        if ack.duplicate:  # stored before a crash took its PubAck: the total is stored
            assert k not in book.acked, f"i-{k} acknowledged twice"
            book.acked[k] = (ack.seq, "")
        else:
            assert ack.val is not None
            book.acked[k] = (ack.seq, ack.val)

    async def plain() -> None:
        k = book.next_async
        book.next_async += 1
        ack = await js.publish("async", b"a-%d" % k)
        book.async_acked[k] = ack.seq

    try:
        while proc is not None or book.todo:
            if proc is not None:
                while len(book.todo) < IN_FLIGHT:
                    book.todo.append(book.next_k)
                    book.next_k += 1
            batch, book.todo[:] = book.todo[:IN_FLIGHT], book.todo[IN_FLIGHT:]
            work = [one(k) for k in batch] + [plain() for _ in range(8)]
            results = await asyncio.gather(*work, return_exceptions=True)
            failed = [
                k
                for k, r in zip(batch, results[: len(batch)], strict=True)
                if isinstance(r, BaseException)
            ]
            for r in results:
                if isinstance(r, AssertionError):
                    raise r
            if failed:
                book.todo[:0] = failed  # retried, with the same ids, after the restart
                return
    finally:
        if not nc.is_closed:
            await nc.close()


async def read_stream(url: str, name: str) -> list[Any]:
    nc = await nats.connect(url)
    js = nc.jetstream()
    info = await js.stream_info(name)
    out = []
    for seq in range(info.state.first_seq, info.state.last_seq + 1):
        try:
            out.append(await js.get_msg(name, seq))
        except nats.js.errors.NotFoundError:
            continue
    await nc.close()
    return out


async def test_acknowledged_increments_are_counted_once_through_sigkill(tmp_path: Path) -> None:
    rng = random.Random(int(os.environ.get("BROOK_CRASH_SEED", "11")))
    store = tmp_path / "store"
    port = free_port()
    url = f"nats://127.0.0.1:{port}"
    book = Book()
    interrupted = 0
    for _ in range(ROUNDS):
        proc = start_brook(store, port)
        try:
            await publish_until_killed(url, proc, book, rng)
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait(10)
        interrupted += bool(book.todo)
    assert interrupted == ROUNDS, "every kill must land while increments are in flight"
    proc = start_brook(store, port)
    try:
        await publish_until_killed(url, None, book, rng)  # the last retries, no kill
        history = await read_stream(url, "HITS")
        async_stored = await read_stream(url, "ASYNC")
    finally:
        proc.terminate()
        assert proc.wait(10) == 0
    assert sorted(book.acked) == list(range(book.next_k)), "every increment acknowledged"
    totals = {f"hits.{n}": 0 for n in range(SUBJECTS)}
    seen: dict[str, int] = {}
    for msg in history:
        headers = msg.headers or {}
        msg_id = headers["Nats-Msg-Id"]
        assert msg_id not in seen, f"{msg_id} stored twice (seqs {seen[msg_id]} and {msg.seq})"
        seen[msg_id] = msg.seq
        totals[msg.subject] += int(headers["Nats-Incr"])
        assert json.loads(msg.data) == {"val": str(totals[msg.subject])}, f"seq {msg.seq}"
        k = int(msg_id[2:])
        seq, val = book.acked[k]
        assert seq == msg.seq, f"i-{k} acknowledged as {seq}, stored at {msg.seq}"
        assert val in ("", str(totals[msg.subject])), f"i-{k} acknowledged total {val}"
    assert len(seen) == book.next_k, "every acknowledged increment is stored"
    for n in range(SUBJECTS):
        expected = sum(increment(k) for k in range(book.next_k) if k % SUBJECTS == n)
        assert totals[f"hits.{n}"] == expected
    stored_async = {msg.seq: msg.data for msg in async_stored}
    for k, seq in book.async_acked.items():
        assert stored_async.get(seq) == b"a-%d" % k, f"acknowledged async a-{k} lost"
    print(
        json.dumps(
            {"increments": book.next_k, "async_acked": len(book.async_acked), "rounds": ROUNDS}
        )
    )
