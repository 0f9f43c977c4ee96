"""Push consumers through nats-py's JetStream API against Brook (wire reference §6.6):
interest-gated delivery to the deliver subject, acks and redelivery, deliver groups,
idle heartbeats and `push_bound`."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.js.api import AckPolicy, ConsumerConfig

import brook

pytestmark = pytest.mark.timeout(30)


async def test_durable_push_manual_ack(js: Any) -> None:
    await js.publish("s.a", b"1")
    sub = await js.subscribe("s.>", durable="pd", manual_ack=True)
    await js.publish("s.b", b"2")
    got = []
    for _ in range(2):
        msg = await sub.next_msg(timeout=2)
        got.append((msg.subject, msg.data, msg.metadata.sequence.stream))
        await msg.ack()
    assert got == [("s.a", b"1", 1), ("s.b", b"2", 2)]
    await asyncio.sleep(0.05)
    info = await js.consumer_info("S", "pd")
    assert info.push_bound is True
    assert info.delivered.stream_seq == 2
    assert info.ack_floor.stream_seq == 2
    assert info.num_ack_pending == 0
    await sub.unsubscribe()


async def test_callback_subscription(js: Any) -> None:
    received: list[bytes] = []
    done = asyncio.Event()

    async def handler(msg: Any) -> None:
        received.append(msg.data)
        await msg.ack()
        if len(received) == 3:
            done.set()

    await js.publish("s.a", b"1")
    await js.subscribe("s.>", cb=handler, durable="pd2")
    await js.publish("s.a", b"2")
    await js.publish("s.a", b"3")
    await asyncio.wait_for(done.wait(), 2)
    assert received == [b"1", b"2", b"3"]


async def test_redelivery_after_ack_wait_and_nak_term(js: Any) -> None:
    await js.publish("s.a", b"1")
    await js.publish("s.a", b"2")
    sub = await js.subscribe(
        "s.>", durable="rd", manual_ack=True, config=ConsumerConfig(ack_wait=0.3)
    )
    first = await sub.next_msg(timeout=2)
    second = await sub.next_msg(timeout=2)
    assert (first.data, second.data) == (b"1", b"2")
    await second.term()
    await first.in_progress()
    again = await sub.next_msg(timeout=2)  # after ack_wait
    assert again.data == b"1"
    assert again.metadata.num_delivered == 2
    await again.nak()
    third = await sub.next_msg(timeout=2)
    assert third.data == b"1"
    assert third.metadata.num_delivered == 3
    await third.ack()
    await asyncio.sleep(0.05)
    info = await js.consumer_info("S", "rd")
    assert info.num_ack_pending == 0
    assert info.ack_floor.stream_seq == 2


async def test_queue_subscription_members_share_messages(js: Any) -> None:
    a = await js.subscribe("s.>", queue="workers", manual_ack=True)
    b = await js.subscribe("s.>", queue="workers", manual_ack=True)
    info = await js.consumer_info("S", "workers")
    assert info.config.deliver_group == "workers"
    n = 40
    for i in range(n):
        await js.publish("s.a", str(i).encode())

    async def drain(sub: Any) -> list[int]:
        out: list[int] = []
        while True:
            try:
                msg = await sub.next_msg(timeout=0.5)
            except nats.errors.TimeoutError:
                return out
            out.append(int(msg.data))
            await msg.ack()

    got_a, got_b = await asyncio.gather(drain(a), drain(b))
    assert not set(got_a) & set(got_b)
    assert sorted(got_a + got_b) == list(range(n))
    assert got_a  # random member choice: both get some of 40 (all-to-one: p = 2**-39)
    assert got_b


async def test_idle_heartbeats(nc: Any, js: Any) -> None:
    await js.add_consumer(
        "S",
        ConsumerConfig(durable_name="hb", deliver_subject="hb.inbox", idle_heartbeat=0.2),
    )
    sub = await nc.subscribe("hb.inbox")
    await js.publish("s.a", b"1")
    msg = await sub.next_msg(timeout=2)
    assert msg.data == b"1"
    await msg.ack()
    beat = await sub.next_msg(timeout=2)
    assert beat.headers is not None
    assert beat.header is not None
    assert beat.reply == ""
    assert beat.data == b""
    assert beat.headers.get("Status") == "100"
    assert beat.headers.get("Description") == "Idle Heartbeat"
    assert beat.headers.get("Nats-Last-Consumer") == "1"
    assert beat.headers.get("Nats-Last-Stream") == "1"


async def test_nats_py_idle_heartbeat_subscription(js: Any) -> None:
    sub = await js.subscribe("s.>", durable="hb2", idle_heartbeat=0.2, manual_ack=True)
    await asyncio.sleep(0.7)  # heartbeats flow; nats-py swallows them
    await js.publish("s.a", b"1")
    msg = await sub.next_msg(timeout=2)
    assert msg.data == b"1"
    await msg.ack()


async def test_delivery_pauses_without_interest(nc: Any, js: Any) -> None:
    await js.add_consumer(
        "S",
        ConsumerConfig(durable_name="p", deliver_subject="p.inbox", ack_policy=AckPolicy.EXPLICIT),
    )
    info = await js.consumer_info("S", "p")
    assert not info.push_bound
    await js.publish("s.a", b"1")
    await asyncio.sleep(0.1)
    info = await js.consumer_info("S", "p")
    assert info.delivered.stream_seq == 0  # nobody listening: nothing delivered
    sub = await nc.subscribe("p.inbox")
    msg = await sub.next_msg(timeout=2)
    assert msg.data == b"1"
    await msg.ack()
    assert (await js.consumer_info("S", "p")).push_bound
    await sub.unsubscribe()
    await asyncio.sleep(0.05)
    assert not (await js.consumer_info("S", "p")).push_bound
    await js.publish("s.a", b"2")
    await asyncio.sleep(0.1)
    info = await js.consumer_info("S", "p")
    assert info.delivered.stream_seq == 1
    assert info.num_pending == 1
    wild = await nc.subscribe("p.*")  # a wildcard subscription is interest too
    msg = await wild.next_msg(timeout=2)
    assert msg.data == b"2"
    assert msg.subject == "s.a"
    await msg.ack()


async def test_durable_push_survives_restart(tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    async with brook.serve(port=0, store_dir=store) as server:
        nc = await nats.connect(server.url, allow_reconnect=False)
        js = nc.jetstream()
        await js.add_stream(name="S", subjects=["s.>"])
        await js.add_consumer(
            "S",
            ConsumerConfig(
                durable_name="pp",
                deliver_subject="pp.inbox",
                ack_policy=AckPolicy.EXPLICIT,
                ack_wait=0.5,
            ),
        )
        for i in range(3):
            await js.publish("s.a", b"%d" % i)
        sub = await nc.subscribe("pp.inbox")
        first = await sub.next_msg(timeout=2)
        await first.ack_sync()
        await sub.next_msg(timeout=2)  # delivered, never acked
        await sub.next_msg(timeout=2)
        await nc.close()
    async with brook.serve(port=0, store_dir=store) as server:
        nc = await nats.connect(server.url, allow_reconnect=False)
        js = nc.jetstream()
        info = await js.consumer_info("S", "pp")
        assert info.config.deliver_subject == "pp.inbox"
        assert not info.push_bound
        assert info.num_ack_pending == 2
        sub = await nc.subscribe("pp.inbox")
        again = [await sub.next_msg(timeout=2) for _ in range(2)]
        assert sorted(m.data for m in again) == [b"1", b"2"]
        assert all(m.metadata.num_delivered == 2 for m in again)
        await nc.close()
