"""Pull request status replies compared with nats-server, byte for byte.

Every delivery to a pull request's inbox is recorded whole: subject, reply (ack subject
with its timestamp token masked), the raw header block (status line, description and
headers such as Nats-Pending-Messages / Nats-Pending-Bytes, in order) and payload. The
scenarios cover the admission errors (409 Exceeded ..., 409 Consumer is push based,
400 Bad Request), 404 No Messages, 408 Request Timeout and Requests Pending, the max_bytes
endings (409 Message Size Exceeds MaxBytes, 409 Batch Completed), 409 Consumer Deleted
and 100 Idle Heartbeat.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.conformance.consumer_harness import (
    Probe,
    Scenario,
    ack_of,
    compare,
    fresh_stream,
    status_of,
)

pytestmark = [pytest.mark.conformance, pytest.mark.timeout(60)]

S = "CSTAT"
API = "$JS.API.CONSUMER"
MS = 1_000_000


async def _setup(p: Probe, messages: int) -> None:
    await fresh_stream(p, {"name": S, "subjects": ["cs.>"], "storage": "memory"})
    for i in range(messages):
        await p.publish(f"cs.{i}", f"payload-{i}".encode())


async def _consumer(p: Probe, name: str, **config: object) -> None:
    cfg = {"durable_name": name, "ack_policy": "explicit", **config}
    await p.api(
        f"create {name}", f"{API}.DURABLE.CREATE.{S}.{name}", {"stream_name": S, "config": cfg}
    )


async def _pull(
    p: Probe, label: str, consumer: str, body: object, count: int, timeout: float = 3.0
) -> list[Any]:
    """A pull request on its own inbox; records the first `count` messages it gets (fewer
    if `timeout` s pass first: how the scenarios show that nothing more comes)."""
    inbox = f"_INBOX.{consumer}.{label.replace(' ', '_')}"
    await p.next_request(S, consumer, inbox, body)
    return p.record_msgs(label, await p.take(inbox, count, timeout))


async def admission(p: Probe) -> None:
    await _setup(p, 2)
    await _consumer(p, "lim", max_batch=2, max_expires=1000 * MS, max_bytes=100)
    await _pull(p, "batch over max_batch", "lim", {"batch": 3}, 1)
    await _pull(p, "expires over max_expires", "lim", {"expires": 2000 * MS}, 1)
    await _pull(p, "max_bytes over max_bytes", "lim", {"max_bytes": 200}, 1)
    await _pull(p, "all three over", "lim", {"batch": 5, "expires": 5000 * MS, "max_bytes": 500}, 1)
    await _pull(
        p, "heartbeat too large", "lim", {"expires": 500 * MS, "idle_heartbeat": 300 * MS}, 1
    )
    await _pull(p, "heartbeat without expires", "lim", {"idle_heartbeat": 100 * MS}, 1)
    await _pull(p, "bad JSON type", "lim", {"batch": "x"}, 1)
    await _pull(p, "bad no_wait type", "lim", {"no_wait": 1}, 1)
    await _consumer(p, "push", deliver_subject="cs-push.deliver")
    await _pull(p, "pull on a push consumer", "push", {"batch": 1}, 1)
    await _pull(p, "pull on a push consumer, bad JSON", "push", b"{", 1)


PAYLOAD_FORMS: list[tuple[bytes, int]] = [  # (request payload, messages to wait for)
    (b"", 1),
    (b" 2 ", 2),
    (b"0", 1),
    (b"-5", 1),
    (b"+5", 1),  # 409: read as batch 5
    (b"abc", 1),  # not JSON, not a number: batch 1
    (b"[1]", 1),
    (b"1.5", 1),
    (b"\xff", 1),
    (b"{}", 1),
    (b'{"batch": null}', 1),
    (b'{"Batch": 2, "NO_WAIT": true}', 2),  # keys match case-insensitively
    (b'{"batch": 1.5}', 1),
    (b'{"batch": 1e3}', 1),
    (b'{"batch": "x"}', 1),
    (b'{"BATCH": "x"}', 1),
    (b'{"batch": [1]}', 1),
    (b'{"batch": {}}', 1),
    (b'{"batch": 99999999999999999999}', 1),
    (b'{"batch": 1, "batch": "x"}', 1),
    (b'{"no_wait": "y", "batch": "x"}', 1),  # the first bad field is named
    (b'{"expires": "1s"}', 1),
    (b'{"expires": 1.5}', 1),
    (b'{"expires": 9223372036854775808}', 1),
    (b'{"max_bytes": true}', 1),
    (b'{"no_wait": 1}', 1),
    (b'{"idle_heartbeat": "x"}', 1),
    (b'{"group": 5}', 1),
    (b'{"id": 1}', 1),
    (b'{"min_pending": "x"}', 1),
    (b'{"min_ack_pending": true}', 1),
    (b'{"priority": 1.5}', 1),
    (b'{"unknown": 1, "no_wait": true}', 1),
    (b'{"min_pending": 1, "no_wait": true}', 1),
    (b'{"min_ack_pending": -1, "no_wait": true}', 1),
    (b'{"id": "x", "no_wait": true}', 1),
    (b'{"id": "x", "min_pending": 1, "no_wait": true}', 1),
    (b'{"priority": 10, "id": "x", "no_wait": true}', 1),
    (b'{"priority": 10, "no_wait": true}', 1),
    (b'{"priority": -1, "no_wait": true}', 1),
    (b'{"priority": 5, "group": "g", "id": "", "no_wait": true}', 1),
    (b'{"batch": 5, "idle_heartbeat": 1000}', 1),  # the heartbeat check comes first
    (b'{"batch": 5, "idle_heartbeat": -1000, "no_wait": true}', 1),
    (b'{"batch": 2, "max_bytes": -5, "no_wait": true}', 2),
]


async def payload_forms(p: Probe) -> None:
    """How each request payload is read: errors in nats-server's words, else deliveries."""
    await _setup(p, 60)
    await _consumer(p, "pf", max_batch=2)
    for i, (payload, count) in enumerate(PAYLOAD_FORMS):
        inbox = f"_INBOX.pf.{i}"
        await p.next_request(S, "pf", inbox, payload)
        p.record_msgs(repr(payload), await p.take(inbox, count))
        await p.unsub(inbox)


async def bad_json(p: Probe) -> None:
    """Go's and Python's JSON error texts differ: only the status code and its prefix."""
    await _setup(p, 1)
    await _consumer(p, "bj")
    inbox = "_INBOX.bj"
    await p.next_request(S, "bj", inbox, b"{not json")
    got = await p.take(inbox, 1)
    p.record("status", [status_of(m)[: len("NATS/1.0 400 Bad Request")] for m in got])


async def no_wait(p: Probe) -> None:
    await _setup(p, 0)
    await _consumer(p, "nw")
    await _pull(p, "no_wait on an empty stream", "nw", {"batch": 1, "no_wait": True}, 1)
    await _pull(p, "no_wait, batch 5, empty", "nw", {"batch": 5, "no_wait": True}, 1)
    await _pull(
        p,
        "no_wait with expires, empty",
        "nw",
        {"batch": 2, "no_wait": True, "expires": 200 * MS},
        1,
    )
    for i in range(3):
        await p.publish(f"cs.{i}", f"payload-{i}".encode())
    await _pull(p, "no_wait, partial batch", "nw", {"batch": 5, "no_wait": True}, 3)
    p.record_msgs(
        "no_wait, partial batch: end", await p.take("_INBOX.nw.no_wait,_partial_batch", 1)
    )
    await p.publish("cs.x", b"one more")
    body = {"batch": 4, "no_wait": True, "expires": 1000 * MS}
    await _pull(p, "no_wait with expires, partial", "nw", body, 2)
    await p.publish("cs.y", b"exact")
    await _pull(p, "no_wait, exact batch", "nw", {"batch": 1, "no_wait": True}, 1)
    await p.settle(0.1)
    p.record_msgs("no_wait, exact batch: nothing after", p.drain("_INBOX.nw.no_wait,_exact_batch"))


async def timeouts(p: Probe) -> None:
    await _setup(p, 1)
    await _consumer(p, "to")
    await _pull(p, "expires, partial", "to", {"batch": 3, "expires": 200 * MS}, 2)
    await _pull(p, "expires, nothing", "to", {"batch": 2, "expires": 100 * MS}, 1)
    body = {"batch": 4, "expires": 100 * MS, "max_bytes": 1000}
    await _pull(p, "expires with max_bytes", "to", body, 1)
    await p.publish("cs.z", b"0123456789")
    await _pull(p, "expires with max_bytes, one delivered", "to", body, 2)
    # max_expires does not give a request without expires one: it waits on.
    await _consumer(p, "cap", max_expires=150 * MS)
    await _pull(p, "no expires under max_expires", "cap", {"batch": 3}, 2, timeout=0.4)


async def requests_pending(p: Probe) -> None:
    """max_ack_pending holds two messages back while requests wait for them."""
    await _setup(p, 3)
    await _consumer(p, "rp", max_ack_pending=1)
    first: list[Any] = await _pull(p, "first", "rp", {"batch": 1}, 1)
    await p.next_request(S, "rp", "_INBOX.rp.wait", {"batch": 3, "expires": 2000 * MS})
    await p.sync()
    # 2 messages pending < 3 requested by waiting requests.
    await _pull(p, "no_wait while more is requested", "rp", {"batch": 1, "no_wait": True}, 1)
    body = {"batch": 1, "no_wait": True, "expires": 100 * MS}
    await _pull(p, "no_wait with expires while more is requested", "rp", body, 1)
    await p.api("info", f"{API}.INFO.{S}.rp")
    await p.pub(ack_of(first[0]), b"+ACK")
    p.record_msgs("waiting request served after the ack", await p.take("_INBOX.rp.wait", 1))


async def requests_pending_equal(p: Probe) -> None:
    """As many messages pending as requested: a no_wait request is queued, not refused."""
    await _setup(p, 3)
    await _consumer(p, "rq", max_ack_pending=1)
    first: list[Any] = await _pull(p, "first", "rq", {"batch": 1}, 1)
    await p.next_request(S, "rq", "_INBOX.rq.wait", {"batch": 2, "expires": 2000 * MS})
    await p.sync()
    await p.next_request(S, "rq", "_INBOX.rq.nw", {"batch": 1, "no_wait": True})
    await p.settle(0.1)
    p.record_msgs("no_wait with as many pending as requested", p.drain("_INBOX.rq.nw"))
    await p.api("info", f"{API}.INFO.{S}.rq")
    await p.pub(ack_of(first[0]), b"+ACK")
    p.record_msgs("waiting request served after the ack", await p.take("_INBOX.rq.wait", 1))


async def max_waiting(p: Probe) -> None:
    await _setup(p, 0)
    await _consumer(p, "mw", max_waiting=1)
    await p.next_request(S, "mw", "_INBOX.mw.a", {"batch": 1, "expires": 2000 * MS})
    await p.sync()
    await _pull(p, "second request", "mw", {"batch": 1, "expires": 2000 * MS}, 1)
    await _pull(p, "second, no_wait", "mw", {"batch": 1, "no_wait": True}, 1)
    body = {"batch": 1, "expires": 300 * MS, "idle_heartbeat": 100 * MS}
    await _pull(p, "second, with heartbeat: dropped silently", "mw", body, 1, timeout=0.4)
    await p.api("info", f"{API}.INFO.{S}.mw")
    await p.api("delete", f"{API}.DELETE.{S}.mw")
    p.record_msgs("waiting request after delete", await p.take("_INBOX.mw.a", 1))


async def max_bytes(p: Probe) -> None:
    await _setup(p, 0)
    await p.publish("cs.small", b"x" * 10)
    await p.publish("cs.big", b"y" * 300)
    await p.publish("cs.small", b"z" * 10)
    await _consumer(p, "mb")
    await _pull(p, "budget too small for the first", "mb", {"batch": 5, "max_bytes": 20}, 1)
    await _pull(p, "first fits, second does not", "mb", {"batch": 5, "max_bytes": 120}, 2)
    await _pull(p, "batch completed with budget left", "mb", {"batch": 1, "max_bytes": 5000}, 2)
    body = {"batch": 5, "max_bytes": 5000, "no_wait": True}
    await _pull(p, "no_wait with max_bytes", "mb", body, 2)
    await p.api("info", f"{API}.INFO.{S}.mb")


async def deleted(p: Probe) -> None:
    await _setup(p, 0)
    await _consumer(p, "del")
    await p.next_request(S, "del", "_INBOX.del.a", {"batch": 3, "expires": 3000 * MS})
    await p.next_request(S, "del", "_INBOX.del.b", {"batch": 1})
    await p.next_request(
        S, "del", "_INBOX.del.c", {"batch": 2, "expires": 3000 * MS, "max_bytes": 900}
    )
    await p.sync()
    await asyncio.sleep(0.05)  # nats-server queues pull requests asynchronously
    await p.api("delete", f"{API}.DELETE.{S}.del")
    for box in "abc":
        p.record_msgs(f"request {box}", await p.take(f"_INBOX.del.{box}", 1))
    await _pull(p, "request after delete", "del", {"batch": 1}, 1)


async def no_interest(p: Probe) -> None:
    """nats-py's test_pull_subscribe_limits: a request on an inbox nobody subscribes to
    (any more) takes nothing; the message stays pending for a live request."""
    await _setup(p, 1)
    await _consumer(p, "ni")
    await p.next_request(S, "ni", "_INBOX.ni.nobody", {"batch": 1}, sub=False)
    await p.sync()
    await asyncio.sleep(0.05)  # nats-server queues pull requests asynchronously
    await p.api("info after a request nobody listens to", f"{API}.INFO.{S}.ni")
    await _pull(p, "a live request", "ni", {"batch": 1}, 1)
    await p.next_request(S, "ni", "_INBOX.ni.gone", {"batch": 1, "expires": 2000 * MS})
    await p.next_request(S, "ni", "_INBOX.ni.live", {"batch": 1, "expires": 2000 * MS})
    await p.sync()
    await asyncio.sleep(0.05)
    await p.unsub("_INBOX.ni.gone")
    await p.publish("cs.after", b"for the live one")
    p.record_msgs("the request still listened to", await p.take("_INBOX.ni.live", 1))
    await p.api("info at the end", f"{API}.INFO.{S}.ni")


HEARTBEAT = "NATS/1.0 100 Idle Heartbeat"


async def heartbeats(p: Probe) -> None:
    await _setup(p, 0)
    await _consumer(p, "hb")
    inbox = "_INBOX.hb"
    body = {"batch": 2, "expires": 500 * MS, "idle_heartbeat": 150 * MS}
    await p.next_request(S, "hb", inbox, body)
    p.record_msgs("first heartbeat", await p.take(inbox, 1))
    await p.publish("cs.hb", b"beat")
    p.record_msgs("delivery", await p.take(inbox, 1))
    p.record_msgs("heartbeat after the delivery", await p.take(inbox, 1))
    rest = await p.take(inbox, 10, timeout=0.6)
    # The count of heartbeats before the 408 depends on timing; their form and the end do not.
    kinds = {status_of(m) for m in rest}
    p.record(
        "then only heartbeats and the 408", kinds <= {HEARTBEAT, "NATS/1.0 408 Request Timeout"}
    )
    p.record("last", status_of(rest[-1]) if rest else None)
    p.record_msgs("the 408", [m for m in rest if status_of(m).startswith("NATS/1.0 408")])


PENDING_EQUAL = (
    "state.py pull_request refuses with 408 Requests Pending when waiting batches >= "
    "available messages; nats-server only when available < waiting batches (it queues here)"
)
SCENARIOS: dict[Scenario, dict[str, str]] = {
    admission: {},
    bad_json: {},
    payload_forms: {},
    no_wait: {},
    timeouts: {},
    requests_pending: {},
    requests_pending_equal: {
        "no_wait with as many pending as requested": PENDING_EQUAL,
        "info": PENDING_EQUAL + " (so num_waiting is 2 there)",
    },
    max_waiting: {},
    max_bytes: {},
    deleted: {},
    heartbeats: {},
    no_interest: {},
}


@pytest.mark.parametrize("scenario", list(SCENARIOS), ids=lambda f: f.__name__)
async def test_pull_status_matches_nats_server(scenario: Scenario, nats_server_url: str) -> None:
    await compare(scenario, nats_server_url, known=SCENARIOS[scenario])
