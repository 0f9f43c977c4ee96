"""CONSUMER.INFO, CONSUMER.NAMES and CONSUMER.LIST compared with nats-server.

Each scenario drives a consumer through deliveries and acknowledgements and asks for its
info at each point: `delivered`, `ack_floor` (with `last_active` present or absent),
`num_ack_pending`, `num_redelivered`, `num_pending`, `num_waiting` and `push_bound` must
match. Acknowledgements are sent as requests (`ack_sync`) so both servers have processed
them before the next info. What is masked, and why: consumer_harness.Probe._mask.
"""

from __future__ import annotations

import asyncio

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

S = "CINFO"
API = "$JS.API.CONSUMER"


async def _setup(p: Probe) -> None:
    await fresh_stream(p, {"name": S, "subjects": ["ci.>"], "storage": "memory"})
    for subject in ("ci.a", "ci.b", "ci.a", "ci.c", "ci.a", "ci.b"):
        await p.publish(subject, subject.encode())


async def _info(p: Probe, label: str, consumer: str) -> None:
    await p.api(label, f"{API}.INFO.{S}.{consumer}")


async def pull_durable(p: Probe) -> None:
    await _setup(p)
    cfg = {"durable_name": "d", "ack_policy": "explicit", "filter_subject": "ci.a"}
    await p.api("create", f"{API}.CREATE.{S}.d.ci.a", {"stream_name": S, "config": cfg})
    await _info(p, "info after create", "d")
    await p.next_request(S, "d", "_INBOX.pd1", {"batch": 2, "no_wait": True})
    first = p.record_msgs("deliveries", await p.take("_INBOX.pd1", 2))
    await _info(p, "info after two deliveries", "d")
    await p.next_request(S, "d", "_INBOX.pd1", {"batch": 1, "no_wait": True})
    third = await p.take("_INBOX.pd1", 1)
    p.record("ack of the 2nd (out of order)", await ack_sync(p, ack_of(first[1])))
    await _info(p, "info: floor stays", "d")
    p.record("ack of the 1st", await ack_sync(p, ack_of(first[0])))
    await _info(p, "info: floor moves past both", "d")
    p.record("duplicate ack", await ack_sync(p, ack_of(first[0])))
    p.record("nak of the 3rd", await ack_sync(p, ack_of(third[0]), b"-NAK"))
    await p.next_request(S, "d", "_INBOX.pd1", {"batch": 1, "no_wait": True})
    again = p.record_msgs("redelivery", await p.take("_INBOX.pd1", 1))
    await _info(p, "info: one redelivered", "d")
    p.record("ack of the redelivery", await ack_sync(p, ack_of(again[0])))
    await _info(p, "info: all acked", "d")
    # Outstanding requests are counted in num_waiting.
    await p.next_request(S, "d", "_INBOX.pd2", {"batch": 3, "expires": 5_000_000_000})
    await p.next_request(S, "d", "_INBOX.pd3", {"batch": 1, "expires": 5_000_000_000})
    await p.sync()
    await _info(p, "info: two waiting", "d")
    await p.publish("ci.b")  # does not match the filter
    await p.publish("ci.a", b"late")
    p.record_msgs("late delivery", await p.take("_INBOX.pd2", 1))
    await _info(p, "info: still two waiting", "d")
    await p.api("delete", f"{API}.DELETE.{S}.d")
    p.record_msgs("waiting requests after delete", await p.take("_INBOX.pd2", 1))
    p.record_msgs("waiting requests after delete (2)", await p.take("_INBOX.pd3", 1))
    await _info(p, "info after delete", "d")


async def filters_and_policies(p: Probe) -> None:
    await _setup(p)
    multi = {"name": "m", "filter_subjects": ["ci.a", "ci.c"], "ack_policy": "all"}
    await p.api("create multi", f"{API}.CREATE.{S}.m", {"stream_name": S, "config": multi})
    none = {"durable_name": "n", "ack_policy": "none", "deliver_policy": "last_per_subject"}
    none["filter_subject"] = "ci.*"
    await p.api("create none", f"{API}.DURABLE.CREATE.{S}.n", {"stream_name": S, "config": none})
    start = {"durable_name": "q", "deliver_policy": "by_start_sequence", "opt_start_seq": 4}
    await p.api("create start", f"{API}.DURABLE.CREATE.{S}.q", {"stream_name": S, "config": start})
    for c in ("m", "n", "q"):
        await _info(p, f"info {c} after create", c)
    await p.next_request(S, "m", "_INBOX.m", {"batch": 3, "no_wait": True})
    got = p.record_msgs("multi deliveries", await p.take("_INBOX.m", 3))
    p.record("ack all up to the 2nd", await ack_sync(p, ack_of(got[1])))
    await _info(p, "info m: ack all", "m")
    p.record("ack all below the floor", await ack_sync(p, ack_of(got[0])))
    await _info(p, "info m: unchanged", "m")
    await p.next_request(S, "n", "_INBOX.n", {"batch": 10, "no_wait": True})
    p.record_msgs("ack none deliveries", await p.take("_INBOX.n", 4))
    await _info(p, "info n: floor follows delivered", "n")
    await p.next_request(S, "q", "_INBOX.q", {"batch": 1})
    p.record_msgs("start seq delivery", await p.take("_INBOX.q", 1))
    await _info(p, "info q", "q")


async def ephemeral_pull(p: Probe) -> None:
    await _setup(p)
    body = {"stream_name": S, "config": {"ack_policy": "explicit", "filter_subject": "ci.b"}}
    created = await p.api(None, f"{API}.CREATE.{S}", body)
    p.alias(created["name"], "<ephemeral>")
    p.record("create ephemeral", created)
    await p.next_request(S, created["name"], "_INBOX.e", {"batch": 5, "no_wait": True})
    p.record_msgs("deliveries", await p.take("_INBOX.e", 3))
    await _info(p, "info", created["name"])
    await p.api("names", f"{API}.NAMES.{S}")


async def push(p: Probe) -> None:
    await _setup(p)
    cfg = {
        "durable_name": "p",
        "deliver_subject": "dlv.p",
        "ack_policy": "explicit",
        "filter_subject": "ci.a",
    }
    await p.api("create push", f"{API}.DURABLE.CREATE.{S}.p", {"stream_name": S, "config": cfg})
    await _info(p, "info: not bound", "p")
    await p.sub("dlv.p")
    got = p.record_msgs("push deliveries", await p.take("dlv.p", 3))
    p.record("ack 1st", await ack_sync(p, ack_of(got[0])))
    await _info(p, "info: bound", "p")
    await p.next_request(S, "p", "_INBOX.pp", {"batch": 1, "expires": 1_000_000_000})
    p.record_msgs("pull from push consumer", await p.take("_INBOX.pp", 1))
    await p.unsub("dlv.p")
    await asyncio.sleep(0.05)  # nats-server learns of lost interest asynchronously
    await _info(p, "info: unbound", "p")
    ecfg = {"deliver_subject": "dlv.e", "ack_policy": "none", "filter_subject": "ci.c"}
    created = await p.api(None, f"{API}.CREATE.{S}", {"stream_name": S, "config": ecfg})
    p.alias(created["name"], "<ephemeral>")
    p.record("create push ephemeral", created)
    await p.sub("dlv.e")
    p.record_msgs("ephemeral push delivery", await p.take("dlv.e", 1))
    await _info(p, "info ephemeral push", created["name"])


async def waiting_without_interest(p: Probe) -> None:
    """A waiting request whose inbox lost its subscriber is not counted."""
    await _setup(p)
    cfg = {"durable_name": "w", "ack_policy": "explicit", "filter_subject": "ci.zz"}
    await p.api("create", f"{API}.DURABLE.CREATE.{S}.w", {"stream_name": S, "config": cfg})
    for box in ("_INBOX.w1", "_INBOX.w2", "_INBOX.w3"):
        await p.next_request(S, "w", box, {"batch": 1, "expires": 5_000_000_000})
    await p.sync()
    await asyncio.sleep(0.05)  # nats-server queues pull requests asynchronously
    await _info(p, "info: three waiting", "w")
    await p.unsub("_INBOX.w2")
    await _info(p, "info: one inbox gone", "w")
    await p.unsub("_INBOX.w1")
    await _info(p, "info: the first inbox gone too", "w")
    await p.publish("ci.zz", b"z")
    p.record_msgs("delivered to the one still listening", await p.take("_INBOX.w3", 1))
    await _info(p, "info after the delivery", "w")


async def list_and_names(p: Probe) -> None:
    await _setup(p)
    await p.api("names empty", f"{API}.NAMES.{S}")
    await p.api("list empty", f"{API}.LIST.{S}")
    for name in ("c3", "a1", "b2"):
        cfg = {"durable_name": name, "ack_policy": "explicit", "description": name}
        await p.api(None, f"{API}.DURABLE.CREATE.{S}.{name}", {"stream_name": S, "config": cfg})
    named = {"name": "e9", "ack_policy": "none", "inactive_threshold": 60_000_000_000}
    await p.api(None, f"{API}.CREATE.{S}.e9", {"stream_name": S, "config": named})
    await p.api("names", f"{API}.NAMES.{S}")
    await p.api("names {}", f"{API}.NAMES.{S}", {})
    await p.api("names offset 1", f"{API}.NAMES.{S}", {"offset": 1})
    await p.api("names offset 9", f"{API}.NAMES.{S}", {"offset": 9})
    await p.api("list", f"{API}.LIST.{S}")
    await p.api("list offset 2", f"{API}.LIST.{S}", {"offset": 2})
    await p.api("list offset 4", f"{API}.LIST.{S}", {"offset": 4})
    await p.api("names of a missing stream", f"{API}.NAMES.NOPE")
    await p.api("list of a missing stream", f"{API}.LIST.NOPE")
    await p.api("info of a missing consumer", f"{API}.INFO.{S}.zz")
    await p.api("info with a body", f"{API}.INFO.{S}.a1", {"x": 1})


POSITION = (
    "delivered.stream_seq: nats-server moves the consumer's position over non-matching "
    "messages whenever it looks for one to deliver (a request is waiting): it reports the "
    "stream's last sequence (6); Brook moves it only on a delivery (0)"
)
SCENARIOS: dict[Scenario, dict[str, str]] = {
    pull_durable: {},
    filters_and_policies: {},
    ephemeral_pull: {},
    push: {},
    waiting_without_interest: {
        "info: three waiting": POSITION,
        "info: one inbox gone": POSITION,
        "info: the first inbox gone too": POSITION,
    },
    list_and_names: {},
}


@pytest.mark.parametrize("scenario", list(SCENARIOS), ids=lambda f: f.__name__)
async def test_consumer_info_matches_nats_server(scenario: Scenario, nats_server_url: str) -> None:
    await compare(scenario, nats_server_url, known=SCENARIOS[scenario])
