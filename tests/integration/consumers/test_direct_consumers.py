"""Direct consumers (what mirrors and sources create on their origin, ADR 0020) have no
store: nothing of them is written, a restart does not bring them back and a snapshot does
not carry them; what Brook does not build yet stays refused with 10052 (nats-server turns a
named direct sourcing consumer of an interest or workqueue stream into a durable one acked
with `flow_control`, ADR-60; `sourcing` without `direct` is that durable kind too).

How the origin answers and delivers is compared with nats-server in
tests/conformance/test_direct_consumer_conformance.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import nats
import pytest

import brook
from brook.jetstream.snapshot.archive import unpack
from tests.support.snapshots import backup, restore

pytestmark = pytest.mark.timeout(60)

API = "$JS.API.CONSUMER"


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
        ("interest", {}, "direct consumers of interest and workqueue streams are"),
        ("workqueue", {}, "direct consumers of interest and workqueue streams are"),
        ("limits", {"direct": False}, "sourcing consumers that are not direct are"),
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
