"""Redelivery compared with nats-server: delivery counts, num_redelivered and advisories.

Each scenario leaves messages unacknowledged, NAKs, terminates or extends them, and
records what comes back: every delivery whole (the ack subject carries the delivery count,
stream and consumer sequences and num_pending; only its timestamp token is masked), the
consumer info, and the MSG_NAKED / MSG_TERMINATED / MAX_DELIVERIES advisories (their `id`
and `timestamp` masked). ack_wait values are short (0.3-1 s); where a scenario depends on
time it records what arrived in a window with wide margins, never a measured duration.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

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

S = "CREDL"
API = "$JS.API.CONSUMER"
MS = 1_000_000
ADVISORIES = ("MSG_NAKED", "MSG_TERMINATED", "MAX_DELIVERIES")


async def _setup(p: Probe, messages: int, consumer: str, **config: Any) -> None:
    await fresh_stream(p, {"name": S, "subjects": ["cr.>"], "storage": "memory"})
    for kind in ADVISORIES:
        await p.sub(f"$JS.EVENT.ADVISORY.CONSUMER.{kind}.{S}.>")
    for i in range(messages):
        await p.publish(f"cr.{i}", f"m{i}".encode())
    cfg = {"durable_name": consumer, "ack_policy": "explicit", **config}
    body = {"stream_name": S, "config": cfg}
    await p.api("create", f"{API}.DURABLE.CREATE.{S}.{consumer}", body)


async def _pull(p: Probe, label: str, consumer: str, body: Any, count: int, **kw: Any) -> Any:
    inbox = f"_INBOX.{consumer}.{label.replace(' ', '_')}"
    await p.next_request(S, consumer, inbox, body)
    return p.record_msgs(label, await p.take(inbox, count, **kw))


async def _advisories(p: Probe, label: str, wait: float = 0.05) -> None:
    """Record (and forget) the advisories received so far, by kind, in stream order:
    nats-server sends advisories of messages whose deadlines pass together in either order."""
    await p.settle(wait)
    for kind in ADVISORIES:
        msgs = p.drain(f"$JS.EVENT.ADVISORY.CONSUMER.{kind}.{S}.>")
        got = [{"subject": m.subject.decode(), "advisory": json.loads(m.payload)} for m in msgs]
        got.sort(
            key=lambda g: (g["advisory"].get("stream_seq", 0), g["advisory"].get("consumer_seq", 0))
        )
        p.record(f"{label}: {kind} advisories", got)


async def _info(p: Probe, label: str, consumer: str) -> None:
    await p.api(label, f"{API}.INFO.{S}.{consumer}")


async def nak(p: Probe) -> None:
    await _setup(p, 2, "nak")
    first = await _pull(p, "first delivery", "nak", {"batch": 1}, 1)
    p.record("nak", await ack_sync(p, ack_of(first[0]), b"-NAK"))
    await _advisories(p, "after nak")
    again = await _pull(p, "redelivered at once", "nak", {"batch": 1}, 1)
    await _info(p, "info: one redelivered", "nak")
    p.record("nak with delay", await ack_sync(p, ack_of(again[0]), b'-NAK {"delay": 400000000}'))
    await _pull(p, "the next message first", "nak", {"batch": 1, "no_wait": True}, 1)
    await _pull(p, "nothing before the delay", "nak", {"batch": 1, "expires": 100 * MS}, 1)
    third = await _pull(p, "after the delay", "nak", {"batch": 1, "expires": 1000 * MS}, 1)
    p.record("nak with a duration", await ack_sync(p, ack_of(third[0]), b"-NAK 1ms"))
    fourth = await _pull(p, "after a duration", "nak", {"batch": 1, "expires": 1000 * MS}, 1)
    await _info(p, "info: three redeliveries of one message", "nak")
    p.record("ack", await ack_sync(p, ack_of(fourth[0])))
    p.record("nak after the ack", await ack_sync(p, ack_of(fourth[0]), b"-NAK"))
    await _advisories(p, "at the end")
    await _info(p, "info at the end", "nak")


async def nak_go_durations(p: Probe) -> None:
    """A `-NAK` delay is read with Go's time.ParseDuration: `.4s`, `1.s` and `+0.3s` are
    delays there too."""
    await _setup(p, 2, "nakgo")
    first = await _pull(p, "first delivery", "nakgo", {"batch": 1}, 1)
    p.record("nak .4s", await ack_sync(p, ack_of(first[0]), b"-NAK .4s"))
    await _pull(p, "the next message first", "nakgo", {"batch": 1, "no_wait": True}, 1)
    await _pull(p, "nothing before .4s", "nakgo", {"batch": 1, "expires": 100 * MS}, 1)
    again = await _pull(p, "after .4s", "nakgo", {"batch": 1, "expires": 1000 * MS}, 1)
    p.record("nak 1.s", await ack_sync(p, ack_of(again[0]), b"-NAK 1.s"))
    await _pull(p, "nothing before 1.s", "nakgo", {"batch": 1, "expires": 300 * MS}, 1)
    third = await _pull(p, "after 1.s", "nakgo", {"batch": 1, "expires": 2000 * MS}, 1)
    p.record("nak +0.3s", await ack_sync(p, ack_of(third[0]), b"-NAK +0.3s"))
    await _pull(p, "nothing before +0.3s", "nakgo", {"batch": 1, "expires": 50 * MS}, 1)
    fourth = await _pull(p, "after +0.3s", "nakgo", {"batch": 1, "expires": 1000 * MS}, 1)
    p.record("ack", await ack_sync(p, ack_of(fourth[0])))
    await _info(p, "info at the end", "nakgo")


async def ack_wait(p: Probe) -> None:
    await _setup(p, 3, "aw", ack_wait=500 * MS)
    got = await _pull(p, "first deliveries", "aw", {"batch": 3}, 3)
    p.record("ack the second", await ack_sync(p, ack_of(got[1])))
    await _pull(p, "nothing before ack_wait", "aw", {"batch": 2, "expires": 200 * MS}, 1)
    await _pull(p, "redelivered after ack_wait", "aw", {"batch": 2, "expires": 1500 * MS}, 2)
    await _info(p, "info: two redelivered", "aw")
    p.record("ack the third (old ack subject)", await ack_sync(p, ack_of(got[2])))
    await _info(p, "info: one left", "aw")
    await _advisories(p, "no advisories")


async def work_in_progress(p: Probe) -> None:
    await _setup(p, 1, "wpi", ack_wait=1000 * MS)
    got = await _pull(p, "delivery", "wpi", {"batch": 1}, 1)
    await asyncio.sleep(0.4)
    p.record("+WPI", await ack_sync(p, ack_of(got[0]), b"+WPI"))
    # Without the +WPI the redelivery would come at 1.0 s, with it at 1.4 s.
    await _pull(p, "nothing until 1.15 s", "wpi", {"batch": 1, "expires": 700 * MS}, 1)
    again = await _pull(p, "redelivered", "wpi", {"batch": 1, "expires": 1000 * MS}, 1)
    await _info(p, "info: redelivered once", "wpi")
    p.record("+WPI on the redelivery", await ack_sync(p, ack_of(again[0]), b"+WPI"))
    p.record("ack", await ack_sync(p, ack_of(again[0])))
    p.record("+WPI after the ack", await ack_sync(p, ack_of(again[0]), b"+WPI"))
    await _info(p, "info: done", "wpi")


async def backoff(p: Probe) -> None:
    await _setup(p, 1, "bo", backoff=[200 * MS, 500 * MS], max_deliver=3)
    await _pull(p, "delivery", "bo", {"batch": 1}, 1)
    await _pull(p, "nothing within 100 ms", "bo", {"batch": 1, "expires": 100 * MS}, 1)
    await _pull(p, "second delivery after 200 ms", "bo", {"batch": 1, "expires": 500 * MS}, 1)
    await _pull(p, "nothing within 300 ms", "bo", {"batch": 1, "expires": 300 * MS}, 1)
    await _pull(p, "third delivery after 500 ms", "bo", {"batch": 1, "expires": 700 * MS}, 1)
    await _info(p, "info: delivered three times", "bo")
    await _pull(p, "no fourth delivery", "bo", {"batch": 1, "expires": 800 * MS}, 1)
    await _advisories(p, "max deliveries")
    await _info(p, "info: given up", "bo")


async def max_deliver(p: Probe) -> None:
    await _setup(p, 2, "md", ack_wait=300 * MS, max_deliver=2)
    first = await _pull(p, "two deliveries", "md", {"batch": 2}, 2)
    p.record("ack the second", await ack_sync(p, ack_of(first[1])))
    again = await _pull(p, "redelivery", "md", {"batch": 1, "expires": 1000 * MS}, 1)
    await _info(p, "info: at max_deliver", "md")
    p.record("nak at max_deliver", await ack_sync(p, ack_of(again[0]), b"-NAK"))
    await _advisories(p, "after the nak")
    await _pull(p, "nothing more", "md", {"batch": 1, "no_wait": True}, 1)
    await _info(p, "info: given up", "md")
    await p.publish("cr.late", b"late")
    late = await _pull(p, "a new message", "md", {"batch": 1}, 1)
    await _pull(p, "its redelivery", "md", {"batch": 1, "expires": 1000 * MS}, 1)
    await _pull(p, "no third delivery", "md", {"batch": 1, "expires": 500 * MS}, 1)
    await _advisories(p, "after ack_wait")
    p.record("ack after max_deliver", await ack_sync(p, ack_of(late[0])))
    await _info(p, "info at the end", "md")


async def max_deliver_idle(p: Probe) -> None:
    """The last ack deadline passes while nobody asks for messages."""
    await _setup(p, 2, "mi", ack_wait=300 * MS, max_deliver=1)
    await _pull(p, "deliveries", "mi", {"batch": 2}, 2)
    await asyncio.sleep(0.6)
    await _advisories(p, "after ack_wait, no request")
    await _info(p, "info: deadline passed, no request", "mi")
    await _pull(p, "a request", "mi", {"batch": 1, "no_wait": True}, 1)
    await _advisories(p, "after a request")
    await _info(p, "info: after a request", "mi")


async def max_deliver_no_request(p: Probe) -> None:
    """max_deliver 2: the last ack deadline passes while no pull request waits.
    nats-server keeps the message pending (and redelivered) and gives up on it, with the
    advisory, only when the next request comes, which gets the next message."""
    await _setup(p, 2, "mn", ack_wait=300 * MS, max_deliver=2)
    await _pull(p, "delivery", "mn", {"batch": 1}, 1)
    await asyncio.sleep(0.45)
    await _pull(p, "redelivery", "mn", {"batch": 1, "no_wait": True}, 1)
    await asyncio.sleep(0.6)
    await _advisories(p, "after the last deadline, no request")
    await _info(p, "info: last deadline passed, no request", "mn")
    await _pull(p, "a request", "mn", {"batch": 2, "no_wait": True}, 2)
    await _advisories(p, "after a request")
    await _info(p, "info: after a request", "mn")


async def max_deliver_no_request_backoff(p: Probe) -> None:
    """max_deliver 3 with backoff: the same; the request that comes after the last
    deadline finds nothing else to deliver and expires."""
    await _setup(p, 1, "mb", backoff=[200 * MS, 300 * MS], max_deliver=3)
    await _pull(p, "delivery", "mb", {"batch": 1}, 1)
    await _pull(p, "second delivery", "mb", {"batch": 1, "expires": 600 * MS}, 1)
    await _pull(p, "third delivery", "mb", {"batch": 1, "expires": 800 * MS}, 1)
    await asyncio.sleep(0.6)
    await _advisories(p, "after the last deadline, no request")
    await _info(p, "info: last deadline passed, no request", "mb")
    await _pull(p, "a request", "mb", {"batch": 1, "expires": 300 * MS}, 1)
    await _advisories(p, "after a request")
    await _info(p, "info: after a request", "mb")


async def push_max_deliver_no_interest(p: Probe) -> None:
    """A push consumer's last ack deadline passes while its deliver subject has no
    subscriber: given up on when one comes, not at the deadline."""
    await _setup(p, 1, "pn", ack_wait=300 * MS, max_deliver=2, deliver_subject="cr-push.pn")
    await p.sub("cr-push.pn")
    p.record_msgs("delivery", await p.take("cr-push.pn", 1))
    p.record_msgs("redelivery", await p.take("cr-push.pn", 1, timeout=2))
    await p.unsub("cr-push.pn")
    await asyncio.sleep(0.6)
    await _advisories(p, "after the last deadline, no interest")
    await _info(p, "info: last deadline passed, no interest", "pn")
    await p.sub("cr-push.pn")
    p.record_msgs("nothing more", await p.take("cr-push.pn", 1, timeout=0.3))
    await _advisories(p, "after a subscriber came")
    await _info(p, "info: after a subscriber came", "pn")


async def terminate(p: Probe) -> None:
    await _setup(p, 3, "tm")
    got = await _pull(p, "deliveries", "tm", {"batch": 3}, 3)
    p.record("term with reason", await ack_sync(p, ack_of(got[0]), b"+TERM not for me"))
    p.record("bare term", await ack_sync(p, ack_of(got[1]), b"+TERM"))
    p.record("term twice", await ack_sync(p, ack_of(got[1]), b"+TERM again"))
    p.record("nak", await ack_sync(p, ack_of(got[2]), b"-NAK"))
    again = await _pull(p, "redelivery", "tm", {"batch": 1}, 1)
    p.record("term the redelivery", await ack_sync(p, ack_of(again[0]), b"+TERM  spaced  "))
    await _advisories(p, "terminated")
    await _info(p, "info", "tm")


async def stale_ack_subjects(p: Probe) -> None:
    """Acks sent to the ack subject of an earlier delivery of a redelivered message."""
    await _setup(p, 2, "st")
    got = await _pull(p, "deliveries", "st", {"batch": 2}, 2)
    for m in got:
        p.record("nak", await ack_sync(p, ack_of(m), b"-NAK"))
    again = await _pull(p, "redeliveries", "st", {"batch": 2}, 2)
    p.record("nak via the first ack subject", await ack_sync(p, ack_of(got[0]), b"-NAK"))
    p.record("term via the first ack subject", await ack_sync(p, ack_of(got[1]), b"+TERM old"))
    await _advisories(p, "stale")
    await _pull(p, "after the stale nak", "st", {"batch": 2, "no_wait": True}, 2)
    p.record("ack via the second ack subject", await ack_sync(p, ack_of(again[0])))
    await _info(p, "info", "st")


async def ack_next(p: Probe) -> None:
    await _setup(p, 6, "nx")
    got = await _pull(p, "first", "nx", {"batch": 1}, 1)
    await p.sub("_INBOX.nx.next")
    await p.pub(ack_of(got[0]), b"+NXT", reply="_INBOX.nx.next")
    nxt = p.record_msgs("+NXT", await p.take("_INBOX.nx.next", 1))
    await p.pub(ack_of(nxt[0]), b"+NXT 2", reply="_INBOX.nx.next")
    nxt = p.record_msgs("+NXT 2", await p.take("_INBOX.nx.next", 2))
    body = b'+NXT {"batch": 5, "no_wait": true}'
    await p.pub(ack_of(nxt[1]), body, reply="_INBOX.nx.next")
    p.record_msgs("+NXT no_wait", await p.take("_INBOX.nx.next", 3))
    await _info(p, "info", "nx")


async def push_redelivery(p: Probe) -> None:
    await _setup(p, 2, "pr", ack_wait=300 * MS, deliver_subject="cr-push.pr")
    await p.sub("cr-push.pr")
    got = p.record_msgs("deliveries", await p.take("cr-push.pr", 2))
    p.record("ack the first", await ack_sync(p, ack_of(got[0])))
    again = p.record_msgs("redelivery", await p.take("cr-push.pr", 1, timeout=2))
    await _info(p, "info", "pr")
    p.record("nak", await ack_sync(p, ack_of(again[0]), b"-NAK"))
    third = p.record_msgs("after the nak", await p.take("cr-push.pr", 1))
    p.record("ack", await ack_sync(p, ack_of(third[0])))
    await _advisories(p, "push")
    await _info(p, "info at the end", "pr")


# Every step matches nats-server; a difference found later goes here as label -> diagnosis.
SCENARIOS: dict[Scenario, dict[str, str]] = {
    nak: {},
    nak_go_durations: {},
    ack_wait: {},
    work_in_progress: {},
    backoff: {},
    max_deliver: {},
    max_deliver_idle: {},
    max_deliver_no_request: {},
    max_deliver_no_request_backoff: {},
    push_max_deliver_no_interest: {},
    terminate: {},
    stale_ack_subjects: {},
    ack_next: {},
    push_redelivery: {},
}


@pytest.mark.parametrize("scenario", list(SCENARIOS), ids=lambda f: f.__name__)
async def test_redelivery_matches_nats_server(scenario: Scenario, nats_server_url: str) -> None:
    await compare(scenario, nats_server_url, known=SCENARIOS[scenario])
