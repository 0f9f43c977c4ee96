"""SIGKILL the server while durable consumers acknowledge; confirmed acks must hold.

`brook serve` runs as a subprocess on a file store and is killed with SIGKILL at a seeded
random moment, several times, each time restarted on the same directory and port. In each
round a durable pull consumer and a durable push consumer (explicit acks, a short
`ack_wait`) are consumed over a fresh connection: most messages are acknowledged with
`ack_sync` (answered only once the consumer state holding the ack is on disk), some with a
plain `ack()`, and a few are left unacknowledged so that they come back after `ack_wait`.

The rules checked (at-least-once, with durable confirmed acks):

* a message whose `ack_sync` was answered before a kill is never delivered after it;
* every message is delivered at least once, and in the end acknowledged: the consumers
  finish with nothing pending, nothing awaiting an ack, and the ack floor on the last
  stream sequence, also after a further clean restart.

The second test also publishes while consuming, so that a consumer may deliver (and even
persist) messages whose publish was never acknowledged: the consumer must deliver every
message that the stream keeps. A SIGKILL takes nothing the OS has, but a power loss can
take stored messages a consumer already delivered (a consumer file ahead of its stream),
so the last two tests make that on-disk state directly: the stream goes on after the
sequences the consumer saw, which are never handed out again, and a consumer legitimately
waiting for a future start sequence keeps waiting there.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import signal
import subprocess
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy, LostStreamData

import brook
from brook.jetstream.store.check import check_store
from tests.support.brookproc import start_brook
from tests.support.natsserver import free_port

pytestmark = pytest.mark.timeout(120)

STREAM = "C"
ROUNDS = 6
ACK_WAIT_S = 1.0
MAX_ACK_PENDING = 300
FETCH_BATCH = 50
ACK_SYNC_TIMEOUT_S = 2.0
PUBLISH_BATCH = 10
PUBLISH_PAUSE_S = 0.03
SEED = int(os.environ.get("BROOK_CRASH_SEED", "11"))

# (stream sequence, message id, publish attempt): one stored message. A retried publish
# carries the same Nats-Msg-Id but a new attempt number, so a message lost to a kill and
# stored again is told apart from the one that survived.
Key = tuple[int, int, int]


def skips(store: Path) -> int:
    """How often a restart found a consumer ahead of its stream (engine `_skip_seen`)."""
    return (store.parent / "server.log").read_text().count("were lost in a crash")


def stop(proc: subprocess.Popen[bytes], sig: int = signal.SIGKILL) -> int:
    if proc.poll() is None:
        proc.send_signal(sig)
    return proc.wait(10)


@dataclass
class Ledger:
    """What one consumer's clients saw, round by round (a round is one server life)."""

    name: str
    deliveries: int = 0
    redeliveries: int = 0
    delivered: set[Key] = field(default_factory=set)
    # key -> round in which its ack_sync was answered (the first time)
    confirmed: dict[Key, int] = field(default_factory=dict)
    plain_acked: set[Key] = field(default_factory=set)
    unconfirmed: int = 0  # ack_sync calls that failed (the kill came first)
    violations: list[str] = field(default_factory=list)

    def saw(self, key: Key, num_delivered: int, rnd: int) -> None:
        self.deliveries += 1
        self.redeliveries += num_delivered > 1
        self.delivered.add(key)
        acked_in = self.confirmed.get(key)
        if acked_in is not None and acked_in < rnd:
            self.violations.append(
                f"{self.name}: {key} delivered in round {rnd} "
                f"(delivery {num_delivered}) after its ack_sync was answered in round {acked_in}"
            )


@dataclass
class Publishes:
    """Publish bookkeeping of the concurrent variant."""

    acked: dict[int, int] = field(default_factory=dict)  # id -> stream sequence
    attempts: dict[int, int] = field(default_factory=dict)  # id -> publishes sent
    todo: list[int] = field(default_factory=list)
    next_id: int = 0


def identity(seq: int, data: bytes) -> Key:
    k, attempt, _ = data.split(b":", 2)
    return seq, int(k), int(attempt)


def body(k: int, attempt: int = 0) -> bytes:
    return b"%d:%d:" % (k, attempt) + b"x" * (k % 97)


class Round:
    """One server life: consumer workers on a fresh connection until the kill."""

    def __init__(self, rnd: int, js: Any, rng: random.Random) -> None:
        self.rnd = rnd
        self.js = js
        self.rng = rng
        self.acks: dict[str, set[asyncio.Task[None]]] = {"pull": set(), "push": set()}

    def _ack_mode(self, num_delivered: int) -> str:
        """Mostly confirmed acks, some plain ones; a few first deliveries left unacked."""
        r = self.rng.random()
        if num_delivered == 1 and r < 0.07:
            return "skip"
        return "plain" if r < 0.25 else "sync"

    async def _ack_sync(self, msg: Any, key: Key, ledger: Ledger) -> None:
        try:
            await msg.ack_sync(timeout=ACK_SYNC_TIMEOUT_S)
        except Exception:
            ledger.unconfirmed += 1
            return
        ledger.confirmed.setdefault(key, self.rnd)

    async def handle(self, msg: Any, ledger: Ledger) -> None:
        md = msg.metadata
        key = identity(md.sequence.stream, msg.data)
        ledger.saw(key, md.num_delivered, self.rnd)
        mode = self._ack_mode(md.num_delivered)
        if mode == "plain":
            await msg.ack()
            ledger.plain_acked.add(key)
        elif mode == "sync":
            acks = self.acks[ledger.name]
            task = asyncio.create_task(self._ack_sync(msg, key, ledger))
            acks.add(task)
            task.add_done_callback(acks.discard)
            while len(acks) > FETCH_BATCH:  # bounded confirmed acks in flight
                await asyncio.wait(list(acks), return_when=asyncio.FIRST_COMPLETED)

    async def pull(self, ledger: Ledger) -> None:
        psub = await self.js.pull_subscribe_bind("pull", stream=STREAM)
        while True:
            try:
                msgs = await psub.fetch(FETCH_BATCH, timeout=0.5)
            except TimeoutError:  # nats-py raises both its own and asyncio's
                continue
            for msg in msgs:
                await self.handle(msg, ledger)
            if self.acks["pull"]:  # the next request goes out once these acks are answered
                await asyncio.wait(list(self.acks["pull"]))

    async def push(self, ledger: Ledger) -> None:
        info = await self.js.consumer_info(STREAM, "push")
        sub = await self.js._nc.subscribe(info.config.deliver_subject)
        try:
            while True:
                try:
                    msg = await sub.next_msg(timeout=0.5)
                except TimeoutError:  # nats-py raises both its own and asyncio's
                    continue
                if msg.headers and msg.headers.get("Status"):
                    continue  # heartbeats and the like
                await self.handle(msg, ledger)
        finally:
            with contextlib.suppress(Exception):
                await sub.unsubscribe()


async def publisher(js: Any, pubs: Publishes, total: int, in_flight: int = PUBLISH_BATCH) -> None:
    """Publish ids (retries first) with Nats-Msg-Id until `total` ids are acknowledged."""

    async def one(k: int) -> None:
        attempt = pubs.attempts.get(k, 0)
        pubs.attempts[k] = attempt + 1
        data = body(k, attempt)
        ack = await js.publish(f"c.{k % 3}", data, headers={"Nats-Msg-Id": f"m-{k}"})
        pubs.acked[k] = ack.seq

    while pubs.todo or pubs.next_id < total:
        while len(pubs.todo) < in_flight and pubs.next_id < total:
            pubs.todo.append(pubs.next_id)
            pubs.next_id += 1
        # Ids leave `todo` only once acknowledged: a batch cut off by the kill (this task is
        # cancelled mid-gather) is retried, with the same ids, in the next round.
        batch = pubs.todo[:in_flight]
        await asyncio.gather(*(one(k) for k in batch), return_exceptions=True)
        pubs.todo[:] = [k for k in pubs.todo if k not in pubs.acked]
        await asyncio.sleep(PUBLISH_PAUSE_S)  # paced, so that publishing spans every kill


async def create_consumers(js: Any) -> None:
    common: dict[str, Any] = {
        "ack_policy": AckPolicy.EXPLICIT,
        "ack_wait": ACK_WAIT_S,
        "max_ack_pending": MAX_ACK_PENDING,
    }
    await js.add_consumer(STREAM, ConsumerConfig(durable_name="pull", **common))
    await js.add_consumer(
        STREAM,
        ConsumerConfig(durable_name="push", deliver_subject="deliver.push", **common),
    )


async def run_round(
    url: str,
    proc: subprocess.Popen[bytes],
    rnd: int,
    ledgers: dict[str, Ledger],
    rng: random.Random,
    *,
    kill_after: float | None,
    extra: Callable[[Any], Coroutine[Any, Any, None]] | None = None,
    done: Callable[[Any], Coroutine[Any, Any, bool]] | None = None,
) -> None:
    """Consume (and run `extra`) until SIGKILL after `kill_after` s, or until `done`."""
    nc = await nats.connect(url, allow_reconnect=False, max_reconnect_attempts=0)
    js = nc.jetstream(timeout=2)
    r = Round(rnd, js, rng)
    tasks = [
        asyncio.create_task(r.pull(ledgers["pull"])),
        asyncio.create_task(r.push(ledgers["push"])),
    ]
    if extra is not None:
        tasks.append(asyncio.create_task(extra(js)))
    try:
        if kill_after is not None:
            await asyncio.sleep(kill_after)
            for t in tasks:
                if t.done() and t.exception() is not None:
                    raise t.exception()  # type: ignore[misc]
            stop(proc)  # SIGKILL: whatever is in flight now is cut off
            await asyncio.sleep(0.1)  # let answers already on the socket arrive
        else:
            assert done is not None
            deadline = time.monotonic() + 40
            while not await done(js):
                for t in tasks:
                    if t.done() and t.exception() is not None:
                        raise t.exception()  # type: ignore[misc]
                if time.monotonic() > deadline:
                    infos = [await js.consumer_info(STREAM, n) for n in ("pull", "push")]
                    state = (await js.stream_info(STREAM)).state
                    raise AssertionError(f"consumers did not drain: {state} {infos}")
                await asyncio.sleep(0.2)
    finally:
        acks = [*r.acks["pull"], *r.acks["push"]]
        for t in [*tasks, *acks]:
            t.cancel()
        await asyncio.gather(*tasks, *acks, return_exceptions=True)
        with contextlib.suppress(Exception):
            await nc.close()


async def drained(js: Any, last_seq: int) -> bool:
    for name in ("pull", "push"):
        info = await js.consumer_info(STREAM, name)
        if (info.num_ack_pending, info.num_pending, info.ack_floor.stream_seq) != (0, 0, last_seq):
            return False
    return True


async def final_checks(url: str, last_seq: int) -> list[Any]:
    """Nothing is redelivered after ack_wait; returns both consumers' info."""
    nc = await nats.connect(url, allow_reconnect=False)
    js = nc.jetstream()
    psub = await js.pull_subscribe_bind("pull", stream=STREAM)
    info = await js.consumer_info(STREAM, "push")
    sub = await nc.subscribe(info.config.deliver_subject)
    with pytest.raises(TimeoutError):
        await psub.fetch(1, timeout=ACK_WAIT_S * 2)
    with pytest.raises(TimeoutError):
        await sub.next_msg(timeout=0.2)
    infos = [await js.consumer_info(STREAM, name) for name in ("pull", "push")]
    for info in infos:
        assert (info.num_ack_pending, info.num_pending, info.num_redelivered) == (0, 0, 0)
        assert info.ack_floor.stream_seq == last_seq == info.delivered.stream_seq
    await nc.close()
    return infos


def seqs(info: Any) -> tuple[int, int, int, int]:
    """Delivered and ack floor sequences (the `last_active` times are not persisted)."""
    d, a = info.delivered, info.ack_floor
    return d.consumer_seq, d.stream_seq, a.consumer_seq, a.stream_seq


def report(ledgers: dict[str, Ledger], **extra: Any) -> None:
    out: dict[str, Any] = dict(extra)
    for name, lg in ledgers.items():
        out[name] = {
            "deliveries": lg.deliveries,
            "redeliveries": lg.redeliveries,
            "confirmed": len(lg.confirmed),
            "plain_acked": len(lg.plain_acked),
            "ack_sync_failed": lg.unconfirmed,
        }
    print(json.dumps(out))


async def test_confirmed_acks_survive_sigkill(tmp_path: Path) -> None:
    """M messages published up front; consumers ack while the server is killed."""
    total = 3000
    rng = random.Random(SEED)
    store = tmp_path / "store"
    port = free_port()
    url = f"nats://127.0.0.1:{port}"
    ledgers = {name: Ledger(name) for name in ("pull", "push")}

    proc = start_brook(store, port, log=store.parent / "server.log")
    try:
        nc = await nats.connect(url, allow_reconnect=False)
        js = nc.jetstream(timeout=5)
        await js.add_stream(name=STREAM, subjects=["c.>"])
        for base in range(0, total, 200):
            acks = await asyncio.gather(
                *(js.publish(f"c.{k % 3}", body(k)) for k in range(base, min(base + 200, total)))
            )
            assert [a.seq for a in acks] == list(range(base + 1, min(base + 200, total) + 1))
        await create_consumers(js)
        await nc.close()
        for rnd in range(ROUNDS):
            if rnd:
                proc = start_brook(store, port, log=store.parent / "server.log")
            await run_round(url, proc, rnd, ledgers, rng, kill_after=rng.uniform(0.5, 1.5))
            assert proc.poll() is not None
        proc = start_brook(store, port, log=store.parent / "server.log")

        async def done(js: Any) -> bool:
            return await drained(js, total)

        await run_round(url, proc, ROUNDS, ledgers, rng, kill_after=None, done=done)
        before = await final_checks(url, total)
        assert stop(proc, signal.SIGTERM) == 0
        proc = start_brook(
            store, port, log=store.parent / "server.log"
        )  # a clean restart keeps the drained state
        after = await final_checks(url, total)
        assert [seqs(i) for i in after] == [seqs(i) for i in before]
        assert stop(proc, signal.SIGTERM) == 0
    finally:
        stop(proc)
    report(ledgers, stream_skips=skips(store))
    assert skips(store) == 0, "every message was durable before it was delivered"
    for lg in ledgers.values():
        assert not lg.violations, "\n".join(lg.violations[:20])
        assert {seq for seq, _, _ in lg.delivered} == set(range(1, total + 1))
        assert all(seq == k + 1 for seq, k, _ in lg.delivered), "a sequence changed its message"
        assert lg.confirmed, "some ack_sync must have been answered"
    stream_dir = store / "streams" / STREAM
    assert sorted(p.name for p in (stream_dir / "consumers").iterdir()) == [
        "pull.json",
        "push.json",
    ]
    assert check_store(stream_dir / "data").healthy


async def test_confirmed_acks_survive_sigkill_while_publishing(tmp_path: Path) -> None:
    """Publishes (with ids, retried after each kill) run alongside the consumers."""
    rng = random.Random(SEED + 1)
    kill_after = [rng.uniform(0.5, 1.5) for _ in range(ROUNDS)]
    # Paced publishing cannot finish within the rounds: every kill lands while publishing.
    max_rate = PUBLISH_BATCH / PUBLISH_PAUSE_S
    total = max(2000, int(sum(kill_after) * max_rate * 1.2))
    store = tmp_path / "store"
    port = free_port()
    url = f"nats://127.0.0.1:{port}"
    ledgers = {name: Ledger(name) for name in ("pull", "push")}
    pubs = Publishes()

    async def extra(js: Any) -> None:
        await publisher(js, pubs, total)

    proc = start_brook(store, port, log=store.parent / "server.log")
    try:
        nc = await nats.connect(url, allow_reconnect=False)
        js = nc.jetstream(timeout=5)
        await js.add_stream(name=STREAM, subjects=["c.>"], duplicate_window=120.0)
        await create_consumers(js)
        await nc.close()
        for rnd in range(ROUNDS):
            if rnd:
                proc = start_brook(store, port, log=store.parent / "server.log")
            await run_round(
                url, proc, rnd, ledgers, rng,
                kill_after=kill_after[rnd], extra=extra,
            )  # fmt: skip
            assert proc.poll() is not None
        assert pubs.todo or pubs.next_id < total, "publishing must span every kill"
        proc = start_brook(store, port, log=store.parent / "server.log")

        async def done(js: Any) -> bool:
            if pubs.todo or len(pubs.acked) < total:
                return False
            info = await js.stream_info(STREAM)
            return await drained(js, info.state.last_seq)

        await run_round(url, proc, ROUNDS, ledgers, rng, kill_after=None, extra=extra, done=done)
        nc = await nats.connect(url, allow_reconnect=False)
        js = nc.jetstream()
        state = (await js.stream_info(STREAM)).state
        stored: dict[int, Key] = {}
        for seq in range(state.first_seq, state.last_seq + 1):
            with contextlib.suppress(nats.js.errors.NotFoundError):
                stored[seq] = identity(seq, (await js.get_msg(STREAM, seq)).data or b"")
        await nc.close()
        await final_checks(url, state.last_seq)
        assert stop(proc, signal.SIGTERM) == 0
    finally:
        stop(proc)
    report(
        ledgers,
        published=total,
        stored=len(stored),
        last_seq=state.last_seq,
        stream_skips=skips(store),
    )
    assert sorted(k for _, k, _ in stored.values()) == list(range(total)), "ids stored once"
    for k, seq in pubs.acked.items():
        assert stored.get(seq, (0, -1, 0))[1] == k, f"acknowledged m-{k} is not at seq {seq}"
    for lg in ledgers.values():
        assert not lg.violations, "\n".join(lg.violations[:20])
        missing = set(stored.values()) - lg.delivered
        assert not missing, f"{lg.name}: stored messages never delivered: {sorted(missing)[:10]}"
    assert check_store(store / "streams" / STREAM / "data").healthy


async def test_stream_goes_on_after_what_its_consumer_saw(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The on-disk state a power loss can leave, made deterministically: the consumer
    delivered (and persisted) sequences 11..15 that were stored but not yet durable, so
    the stream comes back with 10 messages while the consumer file says 15. Those
    sequences are lost (stream info `state.lost`, as nats-server) and never handed out
    again: new publishes get 16.., which the consumer delivers as the new messages they
    are; its pending entries for lost messages are dropped, not redelivered."""
    store = tmp_path / "store"
    async with brook.serve(port=0, store_dir=str(store)) as server:
        nc = await nats.connect(server.url)
        js = nc.jetstream()
        await js.add_stream(name=STREAM, subjects=["c.>"])
        for k in range(10):
            await js.publish("c.x", body(k))
        config = ConsumerConfig(durable_name="d", ack_policy=AckPolicy.EXPLICIT, ack_wait=0.5)
        await js.add_consumer(STREAM, config)
        await nc.close()
    path = store / "streams" / STREAM / "consumers" / "d.json"
    record = json.loads(path.read_text())
    record["state"].update(
        delivered={"consumer_seq": 15, "stream_seq": 15},
        next_seq=16,
        pending=[[s, s, 1, 1, 1] for s in (9, 10, 12, 15)],  # 1..8, 11, 13, 14 acknowledged
        ack_floor={"consumer_seq": 8, "stream_seq": 8},
    )
    path.write_text(json.dumps(record))
    for restart in range(2):  # the skip is durable: a second restart finds nothing to do
        caplog.clear()
        async with brook.serve(port=0, store_dir=str(store)) as server:
            nc = await nats.connect(server.url)
            js = nc.jetstream()
            state = (await js.stream_info(STREAM)).state
            if restart:
                assert (state.messages, state.last_seq, state.lost) == (15, 20, None)
                assert "lost in a crash" not in caplog.text
                await nc.close()
                break
            assert (state.messages, state.last_seq) == (10, 15)
            assert state.lost == LostStreamData(msgs=[11, 12, 13, 14, 15], bytes=0)
            assert "sequences 11..15 were lost in a crash" in caplog.text
            info = await js.consumer_info(STREAM, "d")
            assert (info.delivered.stream_seq, info.delivered.consumer_seq) == (15, 15)
            acks = [await js.publish("c.x", body(k)) for k in range(10, 15)]
            assert [a.seq for a in acks] == [16, 17, 18, 19, 20]
            psub = await js.pull_subscribe_bind("d", stream=STREAM)
            got: dict[int, int] = {}
            while len(got) < 7:
                for m in await psub.fetch(7 - len(got), timeout=2):
                    seq = m.metadata.sequence.stream
                    got[seq] = m.metadata.num_delivered
                    assert identity(seq, m.data)[1] == (seq - 1 if seq <= 10 else seq - 6)
                    await m.ack_sync()
            assert got == {9: 2, 10: 2, 16: 1, 17: 1, 18: 1, 19: 1, 20: 1}
            info = await js.consumer_info(STREAM, "d")
            assert (info.num_ack_pending, info.num_pending, info.ack_floor.stream_seq) == (0, 0, 20)
            await nc.close()


async def test_consumer_starting_beyond_its_stream_is_not_rewound(tmp_path: Path) -> None:
    """A by_start_sequence consumer waiting for a future sequence is legitimately ahead of
    its stream: a restart keeps it waiting there."""
    store = tmp_path / "store"
    async with brook.serve(port=0, store_dir=str(store)) as server:
        nc = await nats.connect(server.url)
        js = nc.jetstream()
        await js.add_stream(name=STREAM, subjects=["c.>"])
        for k in range(10):
            await js.publish("c.x", body(k))
        config = ConsumerConfig(
            durable_name="d",
            ack_policy=AckPolicy.EXPLICIT,
            deliver_policy=DeliverPolicy.BY_START_SEQUENCE,
            opt_start_seq=15,
        )
        await js.add_consumer(STREAM, config)
        await nc.close()
    async with brook.serve(port=0, store_dir=str(store)) as server:
        nc = await nats.connect(server.url)
        js = nc.jetstream()
        info = await js.consumer_info(STREAM, "d")
        assert (info.delivered.stream_seq, info.num_pending) == (14, 0)
        for k in range(10, 15):
            await js.publish("c.x", body(k))
        psub = await js.pull_subscribe_bind("d", stream=STREAM)
        msgs = await psub.fetch(5, timeout=1)
        assert [m.metadata.sequence.stream for m in msgs] == [15]
        await nc.close()
