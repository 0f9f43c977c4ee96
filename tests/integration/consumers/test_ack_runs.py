"""Acks read in runs (`ClientParser` → `Connection.on_pub_run` → `Router.publish_each` →
the consumer's `deliver_each`) and deliveries framed in runs (`Router.publish_run` →
`Connection.deliver_run`) behave as one publish each: against a real Brook, over TCP."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import nats
import pytest
from nats.js.api import ConsumerConfig

import brook

pytestmark = pytest.mark.timeout(30)


async def ack_floor_reaches(js: Any, durable: str, seq: int) -> Any:
    for _ in range(200):
        info = await js.consumer_info("S", durable)
        if info.ack_floor.stream_seq >= seq:
            return info
        await asyncio.sleep(0.02)
    raise AssertionError(f"ack floor stayed at {info.ack_floor.stream_seq}, wanted {seq}")


async def publish_many(js: Any, n: int) -> None:
    await asyncio.gather(*(js.publish("s.a", b"%d" % i) for i in range(n)))


async def test_a_burst_of_acks_settles_every_message(js: Any) -> None:
    await publish_many(js, 600)
    psub = await js.pull_subscribe("s.>", durable="d")
    got: list[Any] = []
    while len(got) < 600:
        got += await psub.fetch(300, timeout=5)
    assert [m.metadata.sequence.stream for m in got] == list(range(1, 601))
    # Not awaited one by one: nats-py writes them out together, so they arrive in runs.
    await asyncio.gather(*(m.ack() for m in got))
    info = await ack_floor_reaches(js, "d", 600)
    assert info.num_ack_pending == 0
    assert info.num_redelivered == 0
    assert info.delivered.consumer_seq == 600


async def test_an_ack_subscriber_sees_the_acks_and_the_consumer_still_gets_them(
    nc: Any, js: Any
) -> None:
    watcher = await nats.connect(nc.connected_url.geturl(), allow_reconnect=False)
    try:
        seen: list[tuple[str, bytes]] = []
        sub = await watcher.subscribe("$JS.ACK.>", cb=None)
        await watcher.flush()
        await publish_many(js, 50)
        psub = await js.pull_subscribe("s.>", durable="d")
        msgs = await psub.fetch(50, timeout=5)
        await asyncio.gather(*(m.ack() for m in msgs))
        for _ in range(50):
            m = await sub.next_msg(timeout=5)
            seen.append((m.subject, m.data))
        assert [s for s, _ in seen] == [m.reply for m in msgs]
        assert {d for _, d in seen} == {b""}  # nats-py's ack has no payload
        info = await ack_floor_reaches(js, "d", 50)
        assert info.num_ack_pending == 0
    finally:
        await watcher.close()


async def _read_until(reader: asyncio.StreamReader, buf: bytearray, done: Any) -> None:
    while not done(buf):
        chunk = await asyncio.wait_for(reader.read(65536), 5)
        assert chunk, "connection closed"
        buf += chunk


def _pull(batch: int) -> bytes:
    """A pull request for durable `d` of stream `S`, delivering to `in.box`."""
    request = json.dumps({"batch": batch, "expires": 5_000_000_000}).encode()
    return b"PUB $JS.API.CONSUMER.MSG.NEXT.S.d in.box %d\r\n%b\r\n" % (len(request), request)


@contextlib.asynccontextmanager
async def _raw_client(
    nc: Any, *, verbose: bool
) -> AsyncIterator[tuple[asyncio.StreamReader, asyncio.StreamWriter, bytearray]]:
    """A raw TCP connection to the server `nc` uses, past its INFO, CONNECTed and
    subscribed to `in.box` (sid 1): the reader, the writer and the buffer of what came."""
    host, port = nc.connected_url.hostname, nc.connected_url.port
    reader, writer = await asyncio.open_connection(host, port)
    try:
        buf = bytearray()
        await _read_until(reader, buf, lambda b: b"\r\n" in b)  # INFO
        del buf[:]
        connect = {"verbose": verbose, "pedantic": False}
        writer.write(b"CONNECT %b\r\nSUB in.box 1\r\n" % json.dumps(connect).encode())
        yield reader, writer, buf
    finally:
        writer.close()


async def test_a_verbose_client_gets_one_ok_per_ack(nc: Any, js: Any) -> None:
    await publish_many(js, 5)
    await js.add_consumer("S", durable_name="d", ack_policy="explicit")
    async with _raw_client(nc, verbose=True) as (reader, writer, buf):
        writer.write(_pull(5))
        await _read_until(reader, buf, lambda b: b.count(b"MSG s.a 1 ") == 5)
        replies = [
            line.split(b" ")[3]
            for line in bytes(buf).split(b"\r\n")
            if line.startswith(b"MSG s.a 1 ")
        ]
        assert len(replies) == 5
        oks_before = buf.count(b"+OK\r\n")
        writer.write(b"".join(b"PUB %b 4\r\n+ACK\r\n" % r for r in replies))
        await _read_until(reader, buf, lambda b: b.count(b"+OK\r\n") >= oks_before + 5)
        info = await ack_floor_reaches(js, "d", 5)
        assert info.num_ack_pending == 0
        assert oks_before == 3  # CONNECT, SUB, PUB


async def test_a_run_of_naks_redelivers_each_message(nc: Any, js: Any) -> None:
    # Acks alike but not plain (`-NAK` here) reach the consumer as a run too, which
    # applies them one by one: every message comes again, then a run of plain acks
    # settles them all.
    await publish_many(js, 20)
    await js.add_consumer("S", durable_name="d", ack_policy="explicit")
    async with _raw_client(nc, verbose=False) as (reader, writer, buf):
        pull = _pull(20)
        writer.write(pull)

        async def replies() -> list[bytes]:
            await _read_until(reader, buf, lambda b: b.count(b"MSG s.a 1 ") == 20)
            lines = bytes(buf).split(b"\r\n")
            del buf[:]
            return [line.split(b" ")[3] for line in lines if line.startswith(b"MSG s.a 1 ")]

        first = await replies()
        writer.write(b"".join(b"PUB %b 4\r\n-NAK\r\n" % r for r in first) + pull)
        again = await replies()
        # The same messages (stream sequences), each delivered a second time (the token
        # after the stream and consumer names is the delivery count).
        assert [r.split(b".")[5] for r in again] == [r.split(b".")[5] for r in first]
        assert {r.split(b".")[4] for r in again} == {b"2"}
        writer.write(b"".join(b"PUB %b 0\r\n\r\n" % r for r in again))
        info = await ack_floor_reaches(js, "d", 20)
        assert info.num_ack_pending == 0
        assert info.delivered.consumer_seq == 40  # 20 deliveries, then the same 20 again


async def test_the_ack_memo_empties_on_plain_acks_and_stays_bounded(tmp_path: Any) -> None:
    # The executor remembers each ack subject it sent until its plain ack returns (a dict
    # lookup instead of reading the subject). Plain acks leave nothing behind; acks of
    # other kinds leave their subjects, but only up to the memo's bound, after which it
    # is emptied and acks are read from their subjects again.
    from brook.jetstream.consumer.executor import ACK_MEMO_MIN

    async with brook.serve(port=0, store_dir=str(tmp_path / "store")) as server:
        nc = await nats.connect(server.url, allow_reconnect=False)
        try:
            js = nc.jetstream()
            await js.add_stream(name="S", subjects=["s.>"])
            total = ACK_MEMO_MIN + 300
            await publish_many(js, total)
            psub = await js.pull_subscribe(
                "s.>", durable="d", config=ConsumerConfig(max_ack_pending=100)
            )
            runner = server.jetstream.consumers["S"]["d"]
            got = await psub.fetch(100, timeout=5)
            assert len(runner.executor.ack_memo) == 100
            await asyncio.gather(*(m.ack() for m in got))
            await ack_floor_reaches(js, "d", 100)
            assert runner.executor.ack_memo == {}
            # Terminated, not acked plainly: their subjects stay, up to the bound.
            termed = 100
            while termed < total - 100:
                got = await psub.fetch(100, timeout=5)
                await asyncio.gather(*(m.term() for m in got))
                termed += len(got)
                await ack_floor_reaches(js, "d", termed)
                assert len(runner.executor.ack_memo) <= runner.executor.ack_memo_cap + 100
            # Plain acks after the memo was emptied are read from their subjects.
            got = await psub.fetch(100, timeout=5)
            await asyncio.gather(*(m.ack() for m in got))
            info = await ack_floor_reaches(js, "d", total)
            assert info.num_ack_pending == 0
        finally:
            await nc.close()


async def test_a_push_window_refilled_in_slices_delivers_everything_once(js: Any) -> None:
    """A full window's acks sent together free it all at once; the refill goes a slice at
    a time, each in a later loop turn (ADR 0064), with no further input to prompt it: the
    whole window still comes, once and in order."""
    await publish_many(js, 2000)
    got: list[Any] = []
    arrived = asyncio.Event()

    async def on_msg(m: Any) -> None:
        got.append(m)
        if len(got) in (1000, 2000):
            arrived.set()

    sub = await js.subscribe(
        "s.>",
        durable="p",
        cb=on_msg,
        manual_ack=True,
        config=ConsumerConfig(max_ack_pending=1000, ack_wait=30),
    )
    for n in (1000, 2000):
        await asyncio.wait_for(arrived.wait(), 10)
        arrived.clear()
        assert len(got) == n
        await asyncio.gather(*(m.ack() for m in got[n - 1000 :]))  # written out together
    assert [m.metadata.sequence.stream for m in got] == list(range(1, 2001))
    info = await ack_floor_reaches(js, "p", 2000)
    assert (info.num_ack_pending, info.num_redelivered, info.num_pending) == (0, 0, 0)
    await sub.unsubscribe()
