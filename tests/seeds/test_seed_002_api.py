"""Seed 002, an API summary of nats-py's JetStream context: its usage examples against the server.

The examples (examples/s002_api.py) publish to and subscribe on subjects of streams they never
create, so the `streams` fixture creates one stream per subject family first. Checked: what the
examples and their helpers printed, and the consumer and stream state on the server.

Two usage examples cannot run with nats-py 2.16 on any server, and the tests pin down how they
fail (identically on nats-server): the pull example calls `fetch(batch_size=...)` (nats-py's
keyword is `batch`) and `pull_sub.messages()` (pull subscriptions have no message iterator), and
the queue example names a durable different from its queue, which nats-py refuses.

The summary's ConsumerConfig lists fields whose behaviour has no usage example (replay policy
`original`, `rate_limit_bps`, `sample_freq`, `headers_only`, flow control and heartbeats, the
pull request limits, `inactive_threshold`): `test_consumer_config_*` exercise each through
nats-py and check what a client can observe.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import time
import types
from collections.abc import AsyncIterator
from typing import Any

import nats
import nats.js.errors
import pytest
from nats.js.api import AckPolicy, ConsumerConfig, ReplayPolicy

from tests.seeds.conftest import Examples, Printed, wait_until

pytestmark = pytest.mark.timeout(60)

STREAMS = {
    "EVENTS": ["events.>"],
    "METRICS": ["metrics.>"],
    "ORDERS": ["orders.>"],
    "AUDIT": ["audit.>"],
    "WORK": ["work.>"],
    "BATCH": ["batch.>"],
}


@pytest.fixture
async def nc(server_url: str) -> AsyncIterator[Any]:
    conn = await nats.connect(server_url, allow_reconnect=False)
    yield conn
    await conn.close()


@pytest.fixture
async def js(nc: Any) -> Any:
    """The streams the examples assume: one per subject family they use."""
    js = nc.jetstream()
    for name, subjects in STREAMS.items():
        await js.add_stream(name=name, subjects=subjects)
    return js


@pytest.fixture
def api(examples: Examples) -> types.ModuleType:
    return examples.load("s002_api")


async def test_publish_and_publish_async(js: Any, api: types.ModuleType, printed: Printed) -> None:
    their_nc, their_js, ack1, ack2 = await api.main()
    assert printed() == ["Message stored at sequence 1"]
    assert (ack1.stream, ack1.seq, ack2.stream, ack2.seq) == ("METRICS", 1, "METRICS", 2)
    assert their_js.publish_async_pending() == 0
    stored = await js.get_msg("METRICS", 2)
    assert (stored.subject, stored.data) == ("metrics.memory", b'{"usage": 82.1}')
    stored = await js.get_msg("EVENTS", 1)
    assert stored.data == b'{"user_id": 123, "timestamp": "2024-01-01T10:00:00Z"}'
    await their_nc.close()


async def test_push_subscriptions(js: Any, api: types.ModuleType, printed: Printed) -> None:
    await js.publish("events.user.login", b"first")
    js_sub = await api.simple_subscription(js)
    await js.publish("events.user.logout", b"second")
    await wait_until(lambda: len(printed.starting("Processing")) == 2)
    assert printed.starting("Processing") == ["Processing: first", "Processing: second"]

    await js.publish("orders.created", b"o1")
    await api.durable_subscription(js)
    await js.publish("orders.created", b"o2")
    await wait_until(lambda: len(printed.starting("order")) == 2)
    assert printed.starting("order") == ["order: o1", "order: o2"]

    await asyncio.sleep(0.1)  # acks are fire-and-forget
    info = await js_sub.consumer_info()
    assert (info.ack_floor.stream_seq, info.num_ack_pending) == (2, 0)
    info = await js.consumer_info("ORDERS", "order-processor")
    assert info.config.ack_policy == AckPolicy.EXPLICIT
    assert (info.ack_floor.stream_seq, info.num_ack_pending, info.push_bound) == (2, 0, True)


async def test_ordered_consumer(js: Any, api: types.ModuleType, printed: Printed) -> None:
    """nats-py's ordered consumer: ack none, flow control, 5 s heartbeats (wire reference §6.9).
    Enough data goes through it to need several flow-control round trips."""
    for i in range(3):
        await js.publish("audit.logs", f"log {i}".encode())
    await api.ordered_subscription(js)
    big = b"x" * 4096
    for i in range(3, 400):
        await js.publish_async("audit.logs", f"log {i} ".encode() + big)
    await asyncio.wait_for(js.publish_async_completed(), 30)
    await wait_until(lambda: len(printed.starting("audit")) >= 400, timeout=30)
    logs = printed.starting("audit")
    assert [line.split()[2] for line in logs] == [str(i) for i in range(400)]

    (info,) = await js.consumers_info("AUDIT")
    assert info.config.flow_control is True
    assert info.config.idle_heartbeat == 5
    assert info.config.ack_policy == AckPolicy.NONE
    assert info.delivered.stream_seq == 400


async def test_queue_subscription_with_another_durable_name_is_refused_by_the_client(
    js: Any, api: types.ModuleType
) -> None:
    with pytest.raises(
        nats.js.errors.Error,
        match="cannot create queue subscription 'workers' to consumer 'task-worker'",
    ):
        await api.queue_subscription(js)
    assert await js.consumers_info("WORK") == []


async def test_pull_subscription(js: Any, api: types.ModuleType, printed: Printed) -> None:
    for i in range(12):
        await js.publish("batch.jobs", f"job {i}".encode())
    # As written it stops at its first fetch: nats-py's keyword is `batch`, not `batch_size`.
    with pytest.raises(TypeError, match="batch_size"):
        await api.pull_subscription(js)
    info = await js.consumer_info("BATCH", "job-processor")  # pull_subscribe did run
    assert info.num_pending == 12
    assert info.config.ack_policy == AckPolicy.EXPLICIT

    # What the example does, in nats-py's spelling.
    pull_sub = await js.pull_subscribe("batch.jobs", durable="job-processor")
    msgs = await pull_sub.fetch(10, timeout=5.0)
    for msg in msgs:
        await api.process_job(msg.data)
        await msg.ack_sync()
    assert printed.starting("job") == [f"job: job {i}" for i in range(10)]
    msgs = await pull_sub.fetch(5, timeout=1.0)  # fewer than asked are there: returns those
    assert [m.data for m in msgs] == [b"job 10", b"job 11"]
    assert not hasattr(pull_sub, "messages")  # the example's last loop has nothing to call
    info = await js.consumer_info("BATCH", "job-processor")
    assert (info.ack_floor.stream_seq, info.num_ack_pending, info.num_pending) == (10, 2, 0)


async def test_ack_in_progress_nak_delay_term(
    js: Any, api: types.ModuleType, printed: Printed
) -> None:
    for payload in (b"ok", b"later", b"fatal", b"flaky"):
        await js.publish("orders.created", payload)
    await js.subscribe("orders.created", durable="acker", manual_ack=True, cb=api.message_handler)
    await wait_until(lambda: len(printed.starting("complex_processing")) >= 5)
    await asyncio.sleep(1.0)  # nothing else may come: "later" waits 30 s, "fatal" never
    assert sorted(printed.starting("complex_processing")) == sorted(
        f"complex_processing {p}" for p in ("ok", "later", "fatal", "flaky", "flaky")
    )
    info = await js.consumer_info("ORDERS", "acker")
    assert info.delivered.stream_seq == 4
    assert info.ack_floor.stream_seq == 1  # "later" (seq 2) is still pending
    assert info.num_ack_pending == 1
    assert info.num_redelivered == 0


# -- ConsumerConfig fields without a usage example ---------------------------------------------


async def test_consumer_config_is_echoed(js: Any, nc: Any) -> None:
    push = ConsumerConfig(
        durable_name="all-fields-push",
        description="every field the summary lists",
        deliver_subject="deliver.all-fields",
        ack_wait=12.5,
        max_deliver=7,
        filter_subject="events.>",
        replay_policy=ReplayPolicy.ORIGINAL,
        rate_limit_bps=1_000_000,
        sample_freq="50%",
        max_ack_pending=99,
        flow_control=True,
        idle_heartbeat=2.0,
        headers_only=True,
    )
    info = await js.add_consumer("EVENTS", push)
    for field in (
        "description",
        "ack_wait",
        "max_deliver",
        "filter_subject",
        "replay_policy",
        "rate_limit_bps",
        "sample_freq",
        "max_ack_pending",
        "flow_control",
        "idle_heartbeat",
        "headers_only",
    ):
        assert getattr(info.config, field) == getattr(push, field), field

    # nats-py's ConsumerConfig has no `max_request_batch` / `max_request_expires` (the
    # summary's names); on the wire they are `max_batch` and `max_expires`.
    with pytest.raises(TypeError, match="max_request_batch"):
        ConsumerConfig(max_request_batch=5)  # type: ignore[call-arg]
    info = await create_raw(
        nc,
        "EVENTS",
        {
            "durable_name": "all-fields-pull",
            "ack_policy": "explicit",
            "max_waiting": 10,
            "max_batch": 5,
            "max_expires": 30_000_000_000,
            "inactive_threshold": 60_000_000_000,
        },
    )
    assert info["config"]["max_waiting"] == 10
    assert info["config"]["max_batch"] == 5
    assert info["config"]["max_expires"] == 30_000_000_000
    assert info["config"]["inactive_threshold"] == 60_000_000_000
    info = await js.consumer_info("EVENTS", "all-fields-pull")
    assert (info.config.max_waiting, info.config.inactive_threshold) == (10, 60.0)


async def create_raw(nc: Any, stream: str, config: dict[str, Any]) -> dict[str, Any]:
    """Create a consumer from a config nats-py cannot express; the server's reply."""
    request = {"stream_name": stream, "config": config}
    reply = await nc.request(
        f"$JS.API.CONSUMER.CREATE.{stream}.{config['durable_name']}",
        json.dumps(request).encode(),
        timeout=5,
    )
    answer: dict[str, Any] = json.loads(reply.data)
    assert "error" not in answer, answer
    return answer


async def test_consumer_config_headers_only(js: Any) -> None:
    await js.publish("events.a", b"twelve bytes", headers={"k": "v"})
    await js.publish("events.b", b"")
    sub = await js.subscribe("events.>", config=ConsumerConfig(headers_only=True))
    first = await sub.next_msg(timeout=2)
    second = await sub.next_msg(timeout=2)
    assert (first.data, first.headers) == (b"", {"k": "v", "Nats-Msg-Size": "12"})
    assert (second.data, second.headers) == (b"", {"Nats-Msg-Size": "0"})


async def test_consumer_config_replay_original(js: Any) -> None:
    """Deliveries are spaced as the publishes were (about 0.5 s), not sent at once."""
    for i in range(3):
        await js.publish("events.tick", str(i).encode())
        if i < 2:
            await asyncio.sleep(0.5)
    sub = await js.subscribe("events.>", config=ConsumerConfig(replay_policy=ReplayPolicy.ORIGINAL))
    arrivals = []
    for _ in range(3):
        await sub.next_msg(timeout=3)
        arrivals.append(time.monotonic())
    gaps = [b - a for a, b in itertools.pairwise(arrivals)]
    assert all(0.35 < gap < 1.5 for gap in gaps), gaps


async def test_consumer_config_rate_limit(js: Any) -> None:
    """3 MiB at 8 Mbit/s (1 MiB/s): nats-server lets a burst of one max payload (1 MiB) through
    at once, then paces the rest, so it takes about two seconds rather than an instant."""
    payload = b"r" * 65536
    for _ in range(48):
        await js.publish_async("events.bulk", payload)
    await asyncio.wait_for(js.publish_async_completed(), 20)
    started = time.monotonic()
    sub = await js.subscribe("events.>", config=ConsumerConfig(rate_limit_bps=8 * 1024 * 1024))
    for _ in range(48):
        await sub.next_msg(timeout=5)
    assert 1.2 < time.monotonic() - started < 6


async def test_consumer_config_sample_freq(js: Any, nc: Any) -> None:
    """With `sample_freq` 100% every ack publishes an ack metric advisory."""
    metrics = await nc.subscribe("$JS.EVENT.METRIC.CONSUMER.ACK.EVENTS.sampled")
    await nc.flush()
    await js.publish("events.a", b"1")
    await js.publish("events.a", b"2")
    sub = await js.pull_subscribe(
        "events.>", durable="sampled", config=ConsumerConfig(sample_freq="100%")
    )
    for msg in await sub.fetch(2, timeout=2):
        await msg.ack()
    events = [json.loads((await metrics.next_msg(timeout=2)).data) for _ in range(2)]
    assert [e["type"] for e in events] == ["io.nats.jetstream.metric.v1.consumer_ack"] * 2
    assert [(e["stream"], e["consumer"], e["stream_seq"]) for e in events] == [
        ("EVENTS", "sampled", 1),
        ("EVENTS", "sampled", 2),
    ]
    assert [e["deliveries"] for e in events] == [1, 1]


async def test_consumer_config_flow_control_and_heartbeats(js: Any, nc: Any) -> None:
    """Flow control and a 0.5 s idle heartbeat, seen on a plain subscription to the deliver
    subject: every message arrives in order, flow-control requests (answered here as nats-py
    would) come with a reply subject, and idle heartbeats carry the last sequences delivered."""
    for i in range(200):
        await js.publish_async("events.fc", str(i).encode() + b"." * 8000)
    await asyncio.wait_for(js.publish_async_completed(), 30)
    sub = await nc.subscribe("deliver.fc")
    await js.add_consumer(
        "EVENTS",
        ConsumerConfig(
            durable_name="fc",
            deliver_subject="deliver.fc",
            ack_policy=AckPolicy.NONE,
            flow_control=True,
            idle_heartbeat=0.5,
        ),
    )
    got: list[int] = []
    flow_requests = 0
    heartbeats: list[dict[str, str]] = []
    deadline = time.monotonic() + 20
    while len(got) < 200 or not heartbeats:
        msg = await sub.next_msg(timeout=max(0.1, deadline - time.monotonic()))
        status = (msg.headers or {}).get("Status")
        if status == "100" and msg.reply:
            flow_requests += 1
            await nc.publish(msg.reply, b"")
        elif status == "100":
            heartbeats.append(msg.headers)
        else:
            got.append(int(msg.data.split(b".")[0]))
    assert got == list(range(200))
    assert flow_requests > 0
    assert heartbeats[-1]["Nats-Last-Consumer"] == "200"
    assert heartbeats[-1]["Nats-Last-Stream"] == "200"


async def test_consumer_config_pull_limits(js: Any, nc: Any) -> None:
    """`max_request_batch` refuses bigger fetches; an unused ephemeral with an
    `inactive_threshold` is removed."""
    await js.publish("events.a", b"1")
    await create_raw(
        nc, "EVENTS", {"durable_name": "limited", "ack_policy": "explicit", "max_batch": 2}
    )
    sub = await js.pull_subscribe_bind("limited", "EVENTS")
    assert [m.data for m in await sub.fetch(2, timeout=1)] == [b"1"]
    # nats-py's fetch turns the refusal into an empty batch; the refusal itself is a status.
    assert await sub.fetch(3, timeout=1) == []
    inbox = nc.new_inbox()
    refusals = await nc.subscribe(inbox)
    await nc.publish("$JS.API.CONSUMER.MSG.NEXT.EVENTS.limited", b'{"batch": 3}', reply=inbox)
    refusal = await refusals.next_msg(timeout=2)
    assert refusal.headers == {"Status": "409", "Description": "Exceeded MaxRequestBatch of 2"}

    info = await js.add_consumer("EVENTS", ConsumerConfig(inactive_threshold=0.5))
    name = info.name

    async def gone() -> bool:
        with contextlib.suppress(nats.js.errors.NotFoundError):
            await js.consumer_info("EVENTS", name)
            return False
        return True

    for _ in range(100):
        if await gone():
            break
        await asyncio.sleep(0.05)
    assert await gone()


async def test_bind_helpers(js: Any) -> None:
    """The summary's bind calls: to an existing push consumer and to an existing pull one."""
    await js.publish("work.tasks", b"t1")
    push_cfg = ConsumerConfig(durable_name="bound-push", deliver_subject="deliver.bound")
    await js.add_consumer("WORK", push_cfg)
    push = await js.subscribe_bind("WORK", push_cfg, "bound-push", manual_ack=True)
    msg = await push.next_msg(timeout=2)
    assert msg.data == b"t1"
    assert js.is_status_msg(msg) is None
    await msg.ack_sync()

    await js.add_consumer("WORK", ConsumerConfig(durable_name="bound-pull"))
    pull = await js.pull_subscribe_bind("bound-pull", "WORK")
    (msg,) = await pull.fetch(1, timeout=2)
    assert msg.data == b"t1"
    await msg.ack_sync()
    await push.drain()
    info = await js.consumer_info("WORK", "bound-pull")
    assert info.ack_floor.stream_seq == 1
