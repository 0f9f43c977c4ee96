"""Direct consumers (what mirrors and sources create on their origin, ADR 0020) have no
store: nothing of them is written, a restart does not bring them back and a snapshot does
not carry them; what Brook does not build yet stays refused with 10052 (nats-server turns a
named direct sourcing consumer of an interest or workqueue stream into a durable one acked
with `flow_control`, ADR-60; `sourcing` without `direct` is that durable kind too).

How the origin answers and delivers is compared with nats-server in
tests/conformance/test_direct_consumer_conformance.py.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import nats
import pytest

import brook
from brook import limits
from brook.jetstream.models.info import parse_ts
from brook.jetstream.snapshot.archive import unpack
from brook.jetstream.sourcing import stream_identity
from tests.support.snapshots import backup, restore

pytestmark = pytest.mark.timeout(60)

API = "$JS.API.CONSUMER"
Msg = tuple[bytes, bytes | None, bytes | None, bytes]  # subject, reply, header, payload


def _sourcing(name: str, deliver: str, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "deliver_subject": deliver,
        "ack_policy": "none",
        "max_deliver": 1,
        "idle_heartbeat": 1_000_000_000,
        "flow_control": True,
        "direct": True,
        "sourcing": True,
        "inactive_threshold": 10_000_000_000,
        **extra,
    }


async def _create(nc: Any, stream: str, config: dict[str, Any]) -> dict[str, Any]:
    body = json.dumps({"stream_name": stream, "config": config}).encode()
    reply = await nc.request(f"{API}.CREATE.{stream}.{config['name']}", body, timeout=5)
    answer: dict[str, Any] = json.loads(reply.data)
    return answer


async def _info(nc: Any, stream: str, name: str) -> dict[str, Any]:
    reply = await nc.request(f"{API}.INFO.{stream}.{name}", b"", timeout=5)
    answer: dict[str, Any] = json.loads(reply.data)
    return answer


async def test_a_direct_consumer_is_neither_written_nor_restored(tmp_path: Path) -> None:
    store = tmp_path / "store"
    async with brook.serve(port=0, store_dir=str(store)) as server:
        nc = await nats.connect(server.url)
        js = nc.jetstream()
        await js.add_stream(name="O", subjects=["o.>"])
        await js.publish("o.a", b"1")
        await nc.subscribe("$JS.M.x")
        created = await _create(nc, "O", _sourcing("JS_MIRROR_x", "$JS.M.x"))
        name = created["name"]
        assert name.startswith("JS_MIRROR_x-"), created
        assert "error" not in await _info(nc, "O", name)
        await nc.close()
    assert list((store / "streams" / "O" / "consumers").glob("*")) == []
    async with brook.serve(port=0, store_dir=str(store)) as server:
        nc = await nats.connect(server.url)
        assert (await _info(nc, "O", name))["error"]["err_code"] == 10014
        stream = json.loads((await nc.request("$JS.API.STREAM.INFO.O", b"", timeout=5)).data)
        assert stream["state"]["consumer_count"] == 0
        await nc.close()


async def test_a_snapshot_leaves_direct_consumers_out(tmp_path: Path) -> None:
    async with brook.serve(port=0, store_dir=str(tmp_path / "store")) as server:
        nc = await nats.connect(server.url)
        js = nc.jetstream()
        await js.add_stream(name="O", subjects=["o.>"])
        await js.publish("o.a", b"1")
        await js.add_consumer("O", durable_name="kept", ack_policy="explicit")
        await nc.subscribe("$JS.M.x")
        name = (await _create(nc, "O", _sourcing("JS_MIRROR_x", "$JS.M.x")))["name"]
        saved = await backup(nc, "O")
        (tmp_path / "upload").write_bytes(saved.data)
        staging = tmp_path / "staging"
        staging.mkdir()
        assert list(unpack(tmp_path / "upload", staging, budget=-1).consumers) == ["kept"]
        await js.delete_stream("O")
        final = await restore(nc, "O", saved.meta, saved.data)
        assert final["state"]["consumer_count"] == 1, final
        assert "error" not in await _info(nc, "O", "kept")
        assert (await _info(nc, "O", name))["error"]["err_code"] == 10014
        await nc.close()


@pytest.mark.parametrize(
    ("retention", "extra", "unsupported"),
    [
        ("interest", {"sourcing": False}, "direct consumers of interest and workqueue streams are"),
        (
            "workqueue",
            {"sourcing": False},
            "direct consumers of interest and workqueue streams are",
        ),
    ],
)
async def test_what_is_not_built_stays_refused(
    nc: Any, retention: str, extra: dict[str, Any], unsupported: str
) -> None:
    js = nc.jetstream()
    await js.add_stream(name="O", subjects=["o.>"], retention=retention)
    await nc.subscribe("$JS.M.x")
    answer = await _create(nc, "O", _sourcing("JS_MIRROR_x", "$JS.M.x", **extra))
    assert answer["error"] == {
        "code": 500,
        "err_code": 10052,
        "description": f"{unsupported} not supported by this server",
    }
    assert (await js.stream_info("O")).state.consumer_count == 0
    names = json.loads((await nc.request(f"{API}.NAMES.O", b"", timeout=5)).data)
    assert names["consumers"] == []


async def test_the_create_request_works_through_the_engines_internal_client(
    tmp_path: Path,
) -> None:
    """A mirror's link is an in-process client of the origin's API (ADR 0020): its
    request goes through the router to the API and the consumer, the reply (with its
    `Nats-Stream-Identity` header) and then the deliveries and heartbeats come back to
    its own subscriptions, on the loop turns after the request."""
    async with brook.serve(port=0, store_dir=str(tmp_path / "store")) as server:
        nc = await nats.connect(server.url)
        js = nc.jetstream()
        await js.add_stream(name="O", subjects=["o.>"])
        await js.publish("o.a", b"1")
        await js.publish("o.b", b"2")
        internal = server.jetstream.internal
        replies: list[Msg] = []
        deliveries: list[Msg] = []

        def keep(into: list[Msg]) -> Callable[[bytes, bytes | None, bytes | None, bytes], None]:
            return lambda *msg: into.append(msg)

        internal.subscribe("_R_.link", keep(replies))
        internal.subscribe("$JS.M.link", keep(deliveries))
        body = {"stream_name": "O", "config": _sourcing("JS_MIRROR_l", "$JS.M.link")}
        # A link asking more than Brook's API level is refused, as a nats-server of that
        # level refuses nats-server's own mirrors (which then ask again without it).
        for level in (limits.JETSTREAM_API_LEVEL + 1, limits.JETSTREAM_API_LEVEL):
            internal.publish(
                b"$JS.API.CONSUMER.CREATE.O.JS_MIRROR_l",
                json.dumps(body).encode(),
                b"NATS/1.0\r\nNats-Required-Api-Level: %d\r\n\r\n" % level,
                b"_R_.link",
            )
        refused = json.loads(replies.pop(0)[3])
        assert refused["error"]["err_code"] == 10185, refused
        assert len(replies) == 1  # answered at once,
        assert deliveries == []  # delivered on the next loop turns
        _, _, header, payload = replies[0]
        created = json.loads(payload)
        assert created["push_bound"] is True, created
        identity = json.loads((await nc.request("$JS.API.STREAM.INFO.O", b"")).data)["created"]
        assert header == b"NATS/1.0\r\nNats-Stream-Identity: %s\r\n\r\n" % (
            stream_identity(parse_ts(identity)).encode()
        )
        for _ in range(100):
            if len(deliveries) >= 2:
                break
            await asyncio.sleep(0.01)
        assert [(s, p) for s, _, _, p in deliveries] == [(b"o.a", b"1"), (b"o.b", b"2")]
        assert all(r is not None and r.count(b".") == 8 for _, r, _, _ in deliveries)
        await nc.close()
