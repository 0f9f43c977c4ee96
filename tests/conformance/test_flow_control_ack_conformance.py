"""The `flow_control` ack policy and durable sourcing consumers (ADR-60), compared with
nats-server.

A consumer acked by flow control is what a mirror's or source's consumer becomes on an
interest or workqueue origin: the create request nats-server's `setupMirrorConsumer` /
`setupSourceConsumer` send (`direct`, `sourcing`, a stable name) is turned by the origin
into a durable push consumer with `ack_policy: flow_control`, whose flow-control answers
(`Nats-Last-Consumer`/`Nats-Last-Stream` headers) are its acks: on a workqueue origin the
messages they cover go, the others stay. Each scenario plays the sourcing side over a raw
connection and records the replies, the deliveries and the origin's state.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from brook.protocol import headers
from tests.conformance.consumer_harness import Probe, compare, fresh_stream
from tests.conformance.test_direct_consumer_conformance import _ops, sourcing_config

pytestmark = [pytest.mark.conformance, pytest.mark.timeout(60)]

S = "FCO"
API = "$JS.API.CONSUMER"
DELIVER = "$JS.M.dlvr"  # as sourcing_config has it
SECOND_NS = 1_000_000_000


async def _create(p: Probe, label: str, subject: str, config: dict[str, Any]) -> dict[str, Any]:
    """A consumer create request with `Nats-Required-Api-Level: 2` (what Brook serves,
    ADR 0003; nats-server serves more); the reply's JSON is recorded and returned."""
    inbox = f"_R.{len(p.steps)}"
    await p.sub(inbox)
    block = headers.encode([("Nats-Required-Api-Level", "2")])
    body = json.dumps({"stream_name": S, "config": config, "action": ""}).encode()
    await p.raw.send(
        f"HPUB {subject} {inbox} {len(block)} {len(block) + len(body)}\r\n".encode()
        + block
        + body
        + b"\r\n"
    )
    [reply] = await p.take(inbox, 1)
    answer: dict[str, Any] = json.loads(reply.payload)
    p.record(label, answer)
    await p.unsub(inbox)
    return answer


async def _answer(p: Probe, reply: bytes, last_consumer: int, last_stream: int) -> None:
    """Answer a flow-control request as a mirror or source does, after its store."""
    block = headers.encode(
        [("Nats-Last-Consumer", str(last_consumer)), ("Nats-Last-Stream", str(last_stream))]
    )
    await p.raw.send(
        f"HPUB {reply.decode()} {len(block)} {len(block)}\r\n".encode() + block + b"\r\n"
    )
    await p.sync()


async def _state(p: Probe, label: str) -> None:
    info = await p.api(None, f"$JS.API.STREAM.INFO.{S}")
    state = info["state"]
    p.record(label, {k: state[k] for k in ("messages", "first_seq", "last_seq", "consumer_count")})


def _fc_replies(msgs: list[Any]) -> list[bytes]:
    return [m.reply for m in msgs if m.reply is not None and m.reply.startswith(b"$JS.FC.")]


# ---------------------------------------------------------------------------- scenarios


async def config_checks(p: Probe) -> None:
    """nats-server's checks of a `flow_control` consumer, in its order, and the defaults
    it fills in (flow control and a 1 s heartbeat, unless pedantic)."""
    await fresh_stream(p, {"name": S, "subjects": ["fco.>"], "storage": "memory"})
    push = {"durable_name": "F", "deliver_subject": DELIVER, "ack_policy": "flow_control"}
    cases: list[tuple[str, dict[str, Any], bool]] = [
        ("pull", {"durable_name": "F", "ack_policy": "flow_control"}, False),
        ("no flow control, pedantic", push, True),
        ("heartbeat 2s", {**push, "flow_control": True, "idle_heartbeat": 2 * SECOND_NS}, True),
        ("max_ack_pending -1", {**push, "max_ack_pending": -1}, False),
        ("ack_wait", {**push, "ack_wait": SECOND_NS}, False),
        ("backoff", {**push, "backoff": [SECOND_NS]}, False),
        ("max_deliver", {**push, "max_deliver": 3}, False),
    ]
    for label, config, pedantic in cases:
        body = {"stream_name": S, "config": config, "pedantic": pedantic}
        await p.api(label, f"{API}.CREATE.{S}.F", body)
    created = await p.api("defaults", f"{API}.CREATE.{S}.F", {"stream_name": S, "config": push})
    assert "error" not in created, created
    await p.api("info", f"{API}.INFO.{S}.F")


async def workqueue_origin(p: Probe) -> None:
    """A source's request on a workqueue origin: a durable `JS_SRC_…` consumer acked by
    flow control, listed and counted; deliveries as to any push consumer; after the idle
    heartbeat a flow-control request asks for the acks, and its answer removes what it
    covers from the origin (only that); another consumer may not overlap it."""
    await fresh_stream(
        p, {"name": S, "subjects": ["fco.>"], "storage": "memory", "retention": "workqueue"}
    )
    for i in range(4):
        await p.publish(f"fco.{'ab'[i % 2]}", f"m{i + 1}".encode())
    await p.sub(DELIVER)
    config = sourcing_config("JS_SRC_wq", max_deliver=0)
    config["metadata"] = {"_nats.src.stream": "SRC", "_nats.src.acc": "$G"}
    await _create(p, "create", f"{API}.CREATE.{S}.JS_SRC_wq", config)
    p.record("deliveries", _ops(await p.take(DELIVER, 4)))
    after_hb = await p.take(DELIVER, 2, timeout=2.5)
    p.record("heartbeat, then a flow-control request", _ops(after_hb))
    await _state(p, "before the answer")
    [fc] = _fc_replies(after_hb)
    await _answer(p, fc, 2, 2)
    await _state(p, "after an answer covering two")
    await p.api("info after the answer", f"{API}.INFO.{S}.JS_SRC_wq")
    await p.api("names", f"{API}.NAMES.{S}")
    body = {"stream_name": S, "config": {"durable_name": "W", "ack_policy": "explicit"}}
    await p.api("an overlapping consumer", f"{API}.CREATE.{S}.W", body)


async def interest_origin_recreated(p: Probe) -> None:
    """On an interest origin the same request again (the link after a gap) updates the
    durable consumer and resets it to its ack floor: what was not acknowledged is
    delivered again from delivery sequence 1; the start options of the second request
    are not taken (the consumer keeps its own)."""
    await fresh_stream(
        p, {"name": S, "subjects": ["fco.>"], "storage": "memory", "retention": "interest"}
    )
    await p.sub(DELIVER)
    config = sourcing_config("JS_MIRROR_in", max_deliver=0)
    await _create(p, "create", f"{API}.CREATE.{S}.JS_MIRROR_in", config)
    for i in range(3):
        await p.publish("fco.a", f"m{i + 1}".encode())
    got = await p.take(DELIVER, 3)
    p.record("deliveries", _ops(got))
    await _state(p, "kept for the consumer")
    again = {**config, "deliver_policy": "by_start_sequence", "opt_start_seq": 3}
    await p.unsub(DELIVER)
    await p.sub(DELIVER)
    await _create(p, "asked again", f"{API}.CREATE.{S}.JS_MIRROR_in", again)
    p.record("delivered again", _ops(await p.take(DELIVER, 3)))
    after_hb = await p.take(DELIVER, 2, timeout=2.5)
    p.record("heartbeat and request", _ops(after_hb))
    [fc] = _fc_replies(after_hb)
    await _answer(p, fc, 3, 3)
    await _state(p, "acknowledged: gone")
    await p.api("info", f"{API}.INFO.{S}.JS_MIRROR_in")


@pytest.mark.parametrize(
    "scenario",
    [config_checks, workqueue_origin, interest_origin_recreated],
    ids=lambda s: s.__name__,
)
async def test_flow_control_acks_match_nats_server(scenario: Any, nats_server_url: str) -> None:
    await compare(scenario, nats_server_url)
