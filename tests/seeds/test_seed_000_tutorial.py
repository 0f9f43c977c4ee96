"""Seed 000, a nats-py JetStream tutorial: its seven scripts run as the tutorial runs them.

Each script is a separate `python x.py` process against the test's server, started in the order
the tutorial's "How to run" sections give; long-running ones (subscribers, replier, workers) are
stopped with Ctrl+C once they have printed what they should. What is checked is what each script
printed and what the server holds afterwards (the stream's config and sequence, each consumer's
acknowledgement floor).
"""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import nats
import nats.js.errors
import pytest
from nats.js.api import RetentionPolicy, StorageType

from tests.seeds.conftest import Examples, wait_until

pytestmark = pytest.mark.timeout(60)

STREAM = "example_stream"


@pytest.fixture
async def js(server_url: str) -> AsyncIterator[Any]:
    """The test's own client, to look at what the scripts left on the server."""
    nc = await nats.connect(server_url, allow_reconnect=False)
    yield nc.jetstream()
    await nc.close()


async def test_stream_py_creates_then_recreates_the_stream(examples: Examples, js: Any) -> None:
    first = await examples.run("s000_stream")
    assert first.splitlines() == [
        f"Stream '{STREAM}' does not exist. Proceeding to create a new one.",
        f"Stream '{STREAM}' created successfully.",
    ]
    info = await js.stream_info(STREAM)
    assert info.config.subjects == ["my.subject.*"]
    assert info.config.retention == RetentionPolicy.LIMITS
    assert info.config.storage == StorageType.FILE
    # nats-py takes max_age in seconds, so the tutorial's "9 * 10**9 nanoseconds" is 9e9 s
    # (9e18 ns on the wire, still inside int64); it comes back as it went in.
    assert info.config.max_age == 9 * 10**9
    assert info.config.max_msgs == 1000
    assert info.config.max_bytes == 10 * 1024 * 1024

    await js.publish("my.subject.x", b"old")
    second = await examples.run("s000_stream")
    assert second.splitlines() == [
        f"Existing stream '{STREAM}' deleted.",
        f"Stream '{STREAM}' created successfully.",
    ]
    assert (await js.stream_info(STREAM)).state.messages == 0


async def test_three_subscribers_each_get_every_published_message(
    examples: Examples, js: Any
) -> None:
    await examples.run("s000_stream")
    subscribers = [await examples.start("s000_subscriber") for _ in range(3)]
    for sub in subscribers:
        await sub.wait_for("Subscriber is running. Press Ctrl+C to exit.")
        assert "Subscriber is listening on 'my.subject.*'." in sub.output

    published = await examples.run("s000_publisher")
    sent = [f"Message {i}" for i in range(1, 6)]
    assert [line for line in published.splitlines() if line.startswith("Published")] == [
        f"Published: {m}" for m in sent
    ]
    assert "Publisher disconnected from NATS server." in published
    assert "Error" not in published

    for sub in subscribers:
        await sub.wait_for("Received a message on 'my.subject.test': Message 5")
    # Every subscriber has its own (ephemeral) consumer, and so every message, in order, acked.
    consumers = await js.consumers_info(STREAM)
    assert len(consumers) == 3
    for info in consumers:
        info = await acked(js, info.name, 5)
        assert info.delivered.stream_seq == 5

    for sub in subscribers:
        assert await sub.interrupt() == 0
        received = [line for line in sub.lines if line.startswith("Received")]
        assert received == [f"Received a message on 'my.subject.test': {m}" for m in sent]
        assert sub.lines[-1] == "Subscriber disconnected from NATS server."
    assert (await js.stream_info(STREAM)).state.last_seq == 5


async def test_replier_answers_the_requester_through_the_stream(
    examples: Examples, js: Any
) -> None:
    await examples.run("s000_stream")
    replier = await examples.start("s000_replier")
    await replier.wait_for("is listening for messages...")
    consumer = replier.lines[-1].split()[0]
    assert re.fullmatch(r"consumer_[0-9a-f-]{36}", consumer)

    requested = await examples.run("s000_requester")
    answer = f"Response from {consumer} : HELLO, CONSUMERS!"
    assert f"Received response: {answer}" in requested.splitlines()
    assert "Collected all responses" in requested.splitlines()
    assert f"All responses: [{answer!r}]" in requested.splitlines()
    assert "Timed out" not in requested

    await replier.wait_for(f"{consumer} sent response")
    assert f"{consumer} received request: Hello, Consumers!" in replier.lines
    info = await acked(js, consumer, 1)
    assert info.config.durable_name == consumer
    assert info.num_redelivered == 0
    await replier.kill()  # it has no way to stop but a signal (the tutorial leaves it running)


# What worker.py prints when it loses the race described below (nats-server's 10013).
RACE_LOST = (
    "Error subscribing to subject: nats: BadRequestError: code=400 err_code=10013 "
    "description='consumer name already in use'"
)


async def test_workers_in_a_queue_group_share_the_tasks(examples: Examples, js: Any) -> None:
    await examples.run("s000_stream")
    # "Start multiple workers": two processes, each running Consumer1 and Consumer2.
    workers = [await examples.start("s000_worker") for _ in range(2)]
    for worker in workers:
        await worker.wait_for("is running. Press Ctrl+C to exit.", count=2)
        # Consumer1 and Consumer2 start together: both may find no consumer "workers" and
        # both create it, each with its own deliver subject; the server then refuses the second.
        assert [line for line in worker.lines if "Error" in line] in ([], [RACE_LOST])

    published = await examples.run("s000_task_publisher")
    assert "Published: Message 5" in published
    assert "Error" not in published

    def deliveries() -> list[str]:
        return [
            line.split(": ", 1)[1]
            for worker in workers
            for line in worker.lines
            if "] Received a message on 'my.subject.test': " in line
        ]

    await wait_until(lambda: len(deliveries()) >= 5)
    # Each task went to exactly one member of the group.
    assert Counter(deliveries()) == Counter(f"Message {i}" for i in range(1, 6))
    info = await acked(js, "workers", 5)
    assert info.config.deliver_group == "workers"
    for worker in workers:
        await worker.interrupt()
        assert "Consumers are shutting down." in worker.lines


async def test_worker_that_loses_the_create_race_is_refused(examples: Examples, js: Any) -> None:
    """The losing side of worker.py's race, made deterministic: Consumer1 has created the queue
    consumer and is subscribed to its deliver subject; Consumer2, which looked before it existed,
    now creates it too with its own deliver subject. nats-server refuses that (10013) while the
    deliver subject has a subscriber, so Consumer1 keeps getting the tasks; accepting it would
    move delivery to a subject Consumer2 never subscribes to, leaving Consumer1 silently idle."""
    await examples.run("s000_stream")
    worker = examples.load("s000_worker")
    nc1 = await nats.connect(examples.url)
    await worker.subscribe_to_subject(nc1.jetstream(), "my.subject.*", "workers", "Consumer1")
    config = (await js.consumer_info(STREAM, "workers")).config
    config.deliver_subject = "_INBOX.consumer2"
    with pytest.raises(nats.js.errors.BadRequestError) as refused:
        await js.add_consumer(STREAM, config)
    assert (refused.value.err_code, refused.value.description) == (
        10013,
        "consumer name already in use",
    )
    await js.publish("my.subject.test", b"task")
    await acked(js, "workers", 1)  # delivered to Consumer1, which acked it
    await nc1.close()


async def acked(js: Any, consumer: str, seq: int) -> Any:
    """The consumer's info once its ack floor reached `seq` (acks are fire-and-forget)."""
    for _ in range(250):
        info = await js.consumer_info(STREAM, consumer)
        if info.ack_floor.stream_seq >= seq:
            break
        await asyncio.sleep(0.02)
    assert info.ack_floor.stream_seq == seq
    assert info.num_ack_pending == 0
    return info
