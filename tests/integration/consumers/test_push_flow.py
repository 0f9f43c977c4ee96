"""Flow control, ordered consumers, headers_only, replay original, rate limits, pause and
ack sampling through nats-py against Brook (wire reference §6.6, §6.9, §5.4)."""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from nats.js.api import AckPolicy, ConsumerConfig, ReplayPolicy

pytestmark = pytest.mark.timeout(40)


async def _publish_many(js: Any, n: int, size: int, subject: str = "s.a") -> None:
    acks = [await js.publish_async(subject, bytes([i % 256]) * size) for i in range(n)]
    await asyncio.wait_for(asyncio.gather(*acks), 20)


async def test_flow_controlled_push_delivers_past_the_window(js: Any) -> None:
    """6 MiB through a 2 MiB starting window: only possible if nats-py's flow-control
    responses reach the consumer."""
    await _publish_many(js, 600, 10_000)
    got: list[int] = []
    done = asyncio.Event()

    async def handler(msg: Any) -> None:
        got.append(msg.metadata.sequence.stream)
        if len(got) == 600:
            done.set()

    sub = await js.subscribe(
        "s.>", cb=handler, idle_heartbeat=1.0, flow_control=True, manual_ack=False
    )
    await asyncio.wait_for(done.wait(), 20)
    assert got == list(range(1, 601))
    await sub.unsubscribe()


async def test_flow_control_request_has_a_reply_and_stalls_until_answered(nc: Any, js: Any) -> None:
    await _publish_many(js, 300, 10_000)  # 3 MB
    inbox = nc.new_inbox()
    sub = await nc.subscribe(inbox, pending_msgs_limit=100_000, pending_bytes_limit=-1)
    cfg = {
        "stream_name": "S",
        "config": {
            "ack_policy": "none",
            "deliver_subject": inbox,
            "flow_control": True,
            "idle_heartbeat": 1_000_000_000,
        },
    }
    r = await nc.request("$JS.API.CONSUMER.CREATE.S", json.dumps(cfg).encode(), timeout=2)
    assert "error" not in json.loads(r.data)
    data_msgs = 0
    fc: Any = None
    while fc is None:
        m = await sub.next_msg(timeout=3)
        if m.headers and m.headers.get("Status") == "100":
            if m.reply:
                fc = m
        else:
            data_msgs += 1
    assert fc.header.get("Description") == "FlowControl Request"
    assert fc.reply.startswith("$JS.FC.S.")
    # Without an answer delivery stops below 300, and the heartbeat says we are stalled.
    stalled = None
    deadline = time.monotonic() + 5
    while stalled is None and time.monotonic() < deadline:
        m = await sub.next_msg(timeout=3)
        if m.headers and m.headers.get("Status") == "100":
            stalled = m.headers.get("Nats-Consumer-Stalled")
        else:
            data_msgs += 1
    assert stalled == fc.reply
    assert data_msgs < 300
    await nc.publish(fc.reply, b"")
    while data_msgs < 300:
        m = await sub.next_msg(timeout=3)
        if not m.headers:
            data_msgs += 1
        elif m.reply:
            await nc.publish(m.reply, b"")
    assert data_msgs == 300


async def test_ordered_consumer_receives_everything_in_order(js: Any) -> None:
    for i in range(50):
        await js.publish(f"s.{i % 5}", str(i).encode())
    sub = await js.subscribe("s.>", ordered_consumer=True)
    got = []
    for _ in range(50):
        msg = await sub.next_msg(timeout=2)
        got.append(int(msg.data))
        assert msg.metadata.sequence.consumer == len(got)
    assert got == list(range(50))
    await js.publish("s.x", b"50")
    assert (await sub.next_msg(timeout=2)).data == b"50"
    await sub.unsubscribe()


async def test_ordered_consumer_stays_alive_while_idle_and_is_reaped_when_abandoned(
    nc: Any, js: Any
) -> None:
    inbox = nc.new_inbox()
    sub = await nc.subscribe(inbox)
    cfg = {
        "stream_name": "S",
        "config": {
            "ack_policy": "none",
            "deliver_subject": inbox,
            "flow_control": True,
            "idle_heartbeat": 1_000_000_000,
            "inactive_threshold": 1_000_000_000,
            "mem_storage": True,
        },
    }
    r = json.loads(
        (await nc.request("$JS.API.CONSUMER.CREATE.S", json.dumps(cfg).encode(), timeout=2)).data
    )
    name = r["name"]
    await asyncio.sleep(2.0)  # idle but bound: twice the threshold, still there
    assert (await js.consumer_info("S", name)).push_bound is True
    await sub.unsubscribe()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        names = json.loads((await nc.request("$JS.API.CONSUMER.NAMES.S", b"", timeout=2)).data)
        if name not in names["consumers"]:
            break
        await asyncio.sleep(0.2)
    else:
        pytest.fail("an abandoned ephemeral push consumer was not reaped")


async def test_headers_only_pull(js: Any) -> None:
    await js.publish("s.a", b"hello", headers={"K": "v"})
    await js.publish("s.b", b"abc")
    psub = await js.pull_subscribe("s.>", "ho", config=ConsumerConfig(headers_only=True))
    msgs = await psub.fetch(2, timeout=2)
    assert [(m.data, m.headers) for m in msgs] == [
        (b"", {"K": "v", "Nats-Msg-Size": "5"}),
        (b"", {"Nats-Msg-Size": "3"}),
    ]
    info = await js.consumer_info("S", "ho")
    assert info.config.headers_only is True


async def test_replay_original_keeps_the_spacing(js: Any) -> None:
    for _ in range(3):
        await js.publish("s.a", b"x")
        await asyncio.sleep(0.4)
    sub = await js.subscribe(
        "s.>", durable="rp", config=ConsumerConfig(replay_policy=ReplayPolicy.ORIGINAL)
    )
    times = []
    for _ in range(3):
        await sub.next_msg(timeout=3)
        times.append(time.monotonic())
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert all(0.3 < g < 1.0 for g in gaps), gaps


async def test_rate_limit_throttles_push_delivery(nc: Any) -> None:
    js = nc.jetstream()
    # The limiter's burst is the stream's max_msg_size: 1 KiB here.
    await js.add_stream(name="R", subjects=["r.>"], max_msg_size=1024)
    for _ in range(12):
        await js.publish("r.a", b"p" * 1000)
    start = time.monotonic()
    sub = await js.subscribe(
        "r.>",
        durable="rl",
        config=ConsumerConfig(rate_limit_bps=80_000, ack_policy=AckPolicy.NONE),
    )
    for _ in range(12):
        await sub.next_msg(timeout=5)
    elapsed = time.monotonic() - start
    # ~1 KB per message at 10 KB/s: about 1.1 s for the 11 after the burst.
    assert 0.8 < elapsed < 4, elapsed


async def test_pause_and_resume(nc: Any, js: Any) -> None:
    await js.add_consumer("S", ConsumerConfig(durable_name="pz", ack_policy=AckPolicy.EXPLICIT))
    advisories = await nc.subscribe("$JS.EVENT.ADVISORY.CONSUMER.PAUSE.S.pz")
    until = (datetime.now(UTC) + timedelta(seconds=1.5)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    reply = await js.pause_consumer("S", "pz", until)
    assert reply.paused is True
    info = await js.consumer_info("S", "pz")
    assert info.paused is True
    assert 0 < info.pause_remaining <= 1_500_000_000  # ns, as nats-py leaves it
    await js.publish("s.a", b"1")
    psub = await js.pull_subscribe_bind("pz", "S")
    start = time.monotonic()
    msgs = await psub.fetch(1, timeout=5)
    assert msgs[0].data == b"1"
    assert 0.8 < time.monotonic() - start < 3
    adv = [json.loads((await advisories.next_msg(timeout=2)).data) for _ in range(2)]
    assert [(a["type"], a["paused"]) for a in adv] == [
        ("io.nats.jetstream.advisory.v1.consumer_pause", True),
        ("io.nats.jetstream.advisory.v1.consumer_pause", False),
    ]
    # Pause far ahead, then resume explicitly.
    await js.pause_consumer("S", "pz", "2099-01-01T00:00:00Z")
    await js.publish("s.a", b"2")
    with pytest.raises(asyncio.TimeoutError):
        await psub.fetch(1, timeout=0.5)
    resumed = await js.resume_consumer("S", "pz")
    assert resumed.paused is False
    assert (await psub.fetch(1, timeout=2))[0].data == b"2"


async def test_pause_errors_look_like_nats_server(nc: Any, js: Any) -> None:
    r = json.loads((await nc.request("$JS.API.CONSUMER.PAUSE.S.nope", b"{}", timeout=2)).data)
    assert r == {
        "type": "io.nats.jetstream.api.v1.consumer_pause_response",
        "error": {"code": 404, "err_code": 10014, "description": "consumer not found"},
        "paused": False,
        "pause_until": "0001-01-01T00:00:00Z",
    }
    r = json.loads((await nc.request("$JS.API.CONSUMER.PAUSE.Q.x", b"{}", timeout=2)).data)
    assert r["error"]["err_code"] == 10059


async def test_pause_survives_restart_of_config(js: Any) -> None:
    await js.add_consumer("S", ConsumerConfig(durable_name="pp"))
    await js.pause_consumer("S", "pp", "2099-01-01T00:00:00Z")
    info = await js.consumer_info("S", "pp")
    assert info.config.pause_until == "2099-01-01T00:00:00Z"
    assert info.config.metadata["_nats.req.level"] == "1"


async def test_sample_freq_publishes_ack_metrics(nc: Any, js: Any) -> None:
    metrics = await nc.subscribe("$JS.EVENT.METRIC.CONSUMER.ACK.S.sf")
    for i in range(4):
        await js.publish("s.a", str(i).encode())
    psub = await js.pull_subscribe("s.>", "sf", config=ConsumerConfig(sample_freq="50%"))
    for m in await psub.fetch(4, timeout=2):
        await m.ack_sync()
    got = [json.loads((await metrics.next_msg(timeout=2)).data) for _ in range(2)]
    with pytest.raises(asyncio.TimeoutError):
        await metrics.next_msg(timeout=0.3)
    assert all(g["type"] == "io.nats.jetstream.metric.v1.consumer_ack" for g in got)
    assert all(g["stream"] == "S" and g["consumer"] == "sf" and g["deliveries"] == 1 for g in got)
    assert all(g["ack_time"] > 0 for g in got)
