"""`$JS.API.CONSUMER.RESET.<stream>.<consumer>` compared with nats-server, step by step.

The request (nats-server 2.14+) moves a consumer to another stream sequence: an empty body
goes back to right above the ack floor, `{"seq": N}` to N where the deliver policy allows.
The scenarios record the reset answers (consumer info plus `reset_seq`, or the error),
what pull requests get afterwards (byte for byte, with the redelivery counts in the ack
subjects), what acks of deliveries made before the reset do, consumer info, and the stream
state of an interest stream whose consumer skips forward.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import nats
import pytest

from tests.conformance.consumer_harness import (
    Probe,
    Scenario,
    ack_of,
    ack_sync,
    compare,
    fresh_stream,
)

pytestmark = [pytest.mark.conformance, pytest.mark.timeout(60)]

S = "CRESET"
API = "$JS.API.CONSUMER"
MS = 1_000_000


async def _setup(p: Probe, messages: int, **config: Any) -> None:
    await fresh_stream(p, {"name": S, "subjects": ["creset.>"], "storage": "memory", **config})
    for i in range(messages):
        await p.publish(f"creset.{'ab'[i % 2]}", f"payload-{i + 1}".encode())


async def _consumer(p: Probe, name: str, **config: object) -> None:
    cfg = {"durable_name": name, "ack_policy": "explicit", **config}
    await p.api(f"create {name}", f"{API}.CREATE.{S}.{name}", {"stream_name": S, "config": cfg})


async def _reset(p: Probe, label: str, consumer: str, body: bytes = b"") -> Any:
    """A reset request with a raw body; JSON parser texts (Go's, Python's) are masked."""
    try:
        msg = await p.nc.request(f"{API}.RESET.{S}.{consumer}", body, timeout=1)
        reply: Any = json.loads(msg.data)
    except nats.errors.TimeoutError:
        reply = "no answer"
    except nats.errors.NoRespondersError:
        reply = "no responders"
    error = reply.get("error") if isinstance(reply, dict) else None
    if error and error["description"].startswith("invalid JSON: "):
        error["description"] = "invalid JSON: <parser message>"
    p.record(label, reply)
    return reply


async def _pull(p: Probe, label: str, consumer: str, body: object, count: int) -> list[Any]:
    inbox = f"_INBOX.{consumer}.{label.replace(' ', '_')}"
    await p.next_request(S, consumer, inbox, body)
    return p.record_msgs(label, await p.take(inbox, count))


async def rewind_and_forward(p: Probe) -> None:
    """Pending, NAKed and acked messages, then resets back to the floor and forward."""
    await _setup(p, 5)
    await _consumer(p, "c", max_deliver=5)
    first = await _pull(p, "first three", "c", {"batch": 3, "no_wait": True}, 3)
    p.record("ack 1", await ack_sync(p, ack_of(first[0])))
    p.record("nak 2", await ack_sync(p, ack_of(first[1]), b"-NAK"))
    await p.api("info before", f"{API}.INFO.{S}.c")
    await _reset(p, "reset to the floor", "c")
    await p.pub(ack_of(first[2]), b"+ACK")  # past the new position: ignored, unanswered
    await p.sync()
    await asyncio.sleep(0.05)  # nats-server processes acks asynchronously
    await p.api("info after the reset", f"{API}.INFO.{S}.c")
    again = await _pull(
        p, "delivered again, counts forgotten", "c", {"batch": 10, "no_wait": True}, 5
    )
    p.record("ack of 3 from before the reset", await ack_sync(p, ack_of(first[2])))
    p.record("ack of 4", await ack_sync(p, ack_of(again[2])))
    await p.api("info after acks", f"{API}.INFO.{S}.c")
    await p.next_request(S, "c", "_INBOX.c.waiting", {"batch": 2, "expires": 2000 * MS})
    await p.sync()
    await asyncio.sleep(0.05)  # nats-server queues pull requests asynchronously
    await _reset(p, "reset forward to 4 with a request waiting", "c", b'{"seq": 4}')
    p.record_msgs("the waiting request is served", await p.take("_INBOX.c.waiting", 2))
    await _reset(p, "reset past the end", "c", b'{"seq": 100}')
    await _reset(p, "reset back to the floor, which moved to 99", "c", b"null")
    await _reset(p, "reset to 1", "c", b'{"SEQ": 1, "other": true}')
    await p.api("info at the end", f"{API}.INFO.{S}.c")


async def requests(p: Probe) -> None:
    """Request bodies and the deliver policies that refuse a sequence."""
    await _setup(p, 5)
    await _consumer(p, "c")
    for body in (b"{}", b'{"seq": 0}', b'{"seq": 3}'):
        await _reset(p, f"all {body!r}", "c", body)
    for body in (b"not json", b"[1]", b"3", b'{"seq": -1}', b'{"seq": 1.5}', b'{"seq": "3"}'):
        await _reset(p, f"refused {body!r}", "c", body)
    await _consumer(p, "new", deliver_policy="new")
    await _reset(p, "new, to a sequence", "new", b'{"seq": 2}')
    await _reset(p, "new, to the floor", "new")
    await _consumer(p, "last", deliver_policy="last")
    await _reset(p, "last, to a sequence", "last", b'{"seq": 2}')
    await _consumer(p, "by_seq", deliver_policy="by_start_sequence", opt_start_seq=3)
    await _reset(p, "by_start_sequence, below", "by_seq", b'{"seq": 2}')
    await _reset(p, "by_start_sequence, at", "by_seq", b'{"seq": 3}')
    await _reset(p, "by_start_sequence, above", "by_seq", b'{"seq": 5}')
    await _consumer(
        p, "by_time", deliver_policy="by_start_time", opt_start_time="2000-01-01T00:00:00Z"
    )
    await _reset(p, "by_start_time, at the first", "by_time", b'{"seq": 1}')
    await _consumer(p, "f", filter_subject="creset.b")
    await _reset(p, "filtered", "f", b'{"seq": 3}')
    await _pull(p, "filtered, from 3", "f", {"batch": 5, "no_wait": True}, 2)
    await _consumer(p, "push", deliver_subject="creset-push.deliver")
    await _reset(p, "push", "push", b'{"seq": 2}')
    await _reset(p, "no such consumer", "nope")


async def interest(p: Probe) -> None:
    """An interest stream: what the consumer skips is no longer held, and goes."""
    await _setup(p, 4, retention="interest")
    await _consumer(p, "i")
    await _reset(p, "skip two", "i", b'{"seq": 3}')
    info = await p.api(None, f"$JS.API.STREAM.INFO.{S}")
    state = info["state"]
    p.record("stream after", (state["messages"], state["first_seq"], state["last_seq"]))
    await _pull(p, "what is left", "i", {"batch": 5, "no_wait": True}, 2)


SCENARIOS: list[Scenario] = [rewind_and_forward, requests, interest]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda f: f.__name__)
async def test_consumer_reset_matches_nats_server(scenario: Scenario, nats_server_url: str) -> None:
    await compare(scenario, nats_server_url)
