"""Seed 001, an essay on JetStream concepts: each of its nats-py snippets against the test server.

The snippets live in examples/s001_essay.py, each wrapped in an async function; the stream the
essay creates first (and its connection) is the one every later snippet is given, as in the
essay. Snippets that loop forever (`async for msg in sub.messages`) run as tasks until they have
handled what was published, then are cancelled. Checked: what the snippets printed or returned
and the consumer and stream state on the server.

Three snippets cannot run with nats-py 2.16 on any server, and the tests pin down how they fail
(identically on nats-server): `js.subscribe` has no `opt_start_seq` / `opt_start_time` keyword
(a TypeError), and a queue subscription whose durable name differs from the queue name is
refused by the client. What those snippets mean is then checked with the calls nats-py does have.
"""

from __future__ import annotations

import asyncio
import contextlib
import types
from collections import Counter
from collections.abc import AsyncIterator, Coroutine
from datetime import datetime, timedelta
from typing import Any

import nats
import nats.js.errors
import pytest
from nats.js.api import ConsumerConfig, DeliverPolicy, StorageType

from tests.seeds.conftest import Examples, Printed, wait_until

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
async def essay(examples: Examples) -> types.ModuleType:
    return examples.load("s001_essay")


@pytest.fixture
async def js(essay: types.ModuleType) -> AsyncIterator[Any]:
    """The essay's first snippet: connect, and create the ORDERS stream."""
    nc, js = await essay.create_stream()
    yield js
    await nc.close()


@contextlib.asynccontextmanager
async def running(snippet: Coroutine[Any, Any, Any]) -> AsyncIterator[asyncio.Task[Any]]:
    """Run a snippet that never ends by itself for the length of the block, then cancel it."""
    task = asyncio.create_task(snippet)
    try:
        yield task
    finally:
        # nats-py's Client._flush_pending swallows a CancelledError (a cancel that lands while
        # js.subscribe sends its SUB is lost), so cancel until the task has actually ended.
        while not task.done():
            task.cancel()
            await asyncio.wait({task}, timeout=1)
        error = None if task.cancelled() else task.exception()
        if error is not None:
            raise error


async def consumer_acked(js: Any, consumer: str, seq: int, timeout: float = 10.0) -> None:
    """Wait until `consumer` exists (a snippet running in a task creates it) and has acked `seq`."""
    floor = None
    for _ in range(int(timeout / 0.02)):
        with contextlib.suppress(nats.js.errors.NotFoundError):
            floor = (await js.consumer_info("ORDERS", consumer)).ack_floor.stream_seq
            if floor == seq:
                return
        await asyncio.sleep(0.02)
    raise AssertionError(f"{consumer} acked up to {floor}, not {seq}, within {timeout}s")


async def publish(js: Any, *payloads: bytes) -> None:
    for payload in payloads:
        await js.publish("orders.new", payload)


async def test_stream_publish_and_dedup(js: Any, essay: types.ModuleType, printed: Printed) -> None:
    info = await js.stream_info("ORDERS")
    assert info.config.subjects == ["orders.>"]
    assert info.config.storage == StorageType.FILE
    assert info.config.max_msgs == 100000
    assert info.config.max_age == 86400  # seconds in nats-py, 24 h

    await essay.publish(js)
    assert printed() == ["Stored at sequence 1"]

    first = await essay.publish_with_msg_id(js)
    again = await essay.publish_with_msg_id(js)  # a retry after a timeout, say
    assert (first.stream, first.seq, first.duplicate) == ("ORDERS", 2, None)
    assert (again.stream, again.seq, again.duplicate) == ("ORDERS", 2, True)
    assert (await js.stream_info("ORDERS")).state.messages == 2


async def test_durable_consumer_resumes_where_it_left_off(
    examples: Examples, essay: types.ModuleType, printed: Printed
) -> None:
    nc, js = await essay.create_stream()
    await publish(js, b"1", b"2", b"3")
    async with running(essay.durable_consumer(js)):
        await wait_until(lambda: len(printed.starting("processed")) == 3)
    info = await js.consumer_info("ORDERS", "my-processor")
    assert info.ack_floor.stream_seq == 3
    await nc.close()  # the client goes away; the durable consumer stays

    nc, js = await essay.create_stream()  # the same stream again: accepted as is
    await publish(js, b"4", b"5")
    async with running(essay.durable_consumer(js)):
        await wait_until(lambda: len(printed.starting("processed")) == 5)
    assert printed.starting("processed") == [f"processed orders.new: {i}" for i in range(1, 6)]
    info = await js.consumer_info("ORDERS", "my-processor")
    assert info.ack_floor.stream_seq == 5
    assert info.num_ack_pending == 0
    assert info.num_redelivered == 0
    await nc.close()


async def test_push_and_pull_consumers(js: Any, essay: types.ModuleType, printed: Printed) -> None:
    await publish(js, *(str(i).encode() for i in range(1, 13)))

    async with running(essay.push_consumer(js)):
        await consumer_acked(js, "push-consumer", 12)

    await essay.pull_consumer(js)
    assert printed.starting("processed") == [f"processed orders.new: {i}" for i in range(1, 11)]
    await consumer_acked(js, "pull-consumer", 10)  # acks are fire-and-forget
    info = await js.consumer_info("ORDERS", "pull-consumer")
    assert info.num_pending == 2
    assert info.num_ack_pending == 0


async def test_ack_nak_term_in_progress(js: Any, essay: types.ModuleType, printed: Printed) -> None:
    await publish(js, b"ok", b"retry", b"poison", b"slow")
    subscription = await js.subscribe("orders.>", durable="acks")
    async with running(essay.acknowledgments(subscription)):
        await wait_until(lambda: len(printed.starting("process_order")) >= 5)
        await asyncio.sleep(0.5)  # long enough to see a wrongful redelivery of poison or slow
    # "retry" was nak'ed once and redelivered at once; poison (term) and slow (in progress,
    # within the 30 s ack wait) were not redelivered.
    assert Counter(printed.starting("process_order")) == Counter(
        {
            "process_order ok": 1,
            "process_order retry": 2,
            "process_order poison": 1,
            "process_order slow": 1,
        }
    )
    info = await js.consumer_info("ORDERS", "acks")
    assert info.delivered.stream_seq == 4
    assert info.ack_floor.stream_seq == 3  # ok and retry acked, poison terminated
    assert info.num_ack_pending == 1  # slow
    assert info.num_redelivered == 0  # retry was acked on its redelivery


async def test_replay_policies(js: Any, essay: types.ModuleType) -> None:
    # As written, both calls pass keywords `js.subscribe` does not take: nats-py raises before
    # anything reaches the server.
    with pytest.raises(TypeError, match="opt_start_seq"):
        await essay.start_from_sequence(js)
    with pytest.raises(TypeError, match="opt_start_time"):
        await essay.start_from_time(js)
    assert await js.consumers_info("ORDERS") == []

    # What they mean, with nats-py's spelling (the policy and start in a ConsumerConfig).
    for i in range(1, 1006):
        await js.publish_async("orders.new", str(i).encode())
    await asyncio.wait_for(js.publish_async_completed(), 20)

    from_seq = await js.subscribe(
        "orders.>",
        config=ConsumerConfig(deliver_policy=DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=1000),
    )
    got = [await from_seq.next_msg(timeout=2) for _ in range(6)]
    assert [m.metadata.sequence.stream for m in got] == list(range(1000, 1006))
    assert got[0].data == b"1000"

    from_time = await js.subscribe(
        "orders.>",
        config=ConsumerConfig(
            deliver_policy=DeliverPolicy.BY_START_TIME,
            opt_start_time=datetime.now() - timedelta(hours=1),
        ),
    )
    first = await from_time.next_msg(timeout=2)
    assert first.metadata.sequence.stream == 1
    recent = await js.subscribe(
        "orders.>",
        config=ConsumerConfig(
            deliver_policy=DeliverPolicy.BY_START_TIME,
            opt_start_time=datetime.now() + timedelta(hours=1),
        ),
    )
    with pytest.raises(nats.errors.TimeoutError):
        await recent.next_msg(timeout=0.3)


async def test_queue_group_with_another_durable_name_is_refused_by_the_client(
    js: Any, essay: types.ModuleType
) -> None:
    with pytest.raises(
        nats.js.errors.Error,
        match="cannot create queue subscription 'processors' to consumer 'order-processor'",
    ):
        await essay.queue_group(js)
    assert await js.consumers_info("ORDERS") == []


async def test_stream_operations(js: Any, essay: types.ModuleType, printed: Printed) -> None:
    payloads = [f'{{"id": {i}}}'.encode() for i in range(1, 121)]
    for payload in payloads:
        await js.publish("orders.new", payload)

    msg = await essay.stream_operations(js)
    assert msg.seq == 100
    assert msg.subject == "orders.new"
    assert msg.data == b'{"id": 100}'
    # Bytes as nats-server's file store counts them: per message, 30 bytes of record overhead
    # (22 of header, 8 of checksum) plus the subject and the payload.
    assert printed() == [
        "Messages: 120",
        f"Bytes: {sum(30 + len('orders.new') + len(p) for p in payloads)}",
        "First seq: 1",
        "Last seq: 120",
    ]
    state = (await js.stream_info("ORDERS")).state
    assert (state.messages, state.first_seq, state.last_seq) == (0, 121, 120)
