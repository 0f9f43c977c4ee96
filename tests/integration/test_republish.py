"""Republish through nats-py against Brook: nats.py's own KV republish test, and a cycle
of republishing streams (the byte-exact comparison with nats-server is in
tests/conformance/test_transform_conformance.py)."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import nats
import nats.js.api
import pytest

import brook
from brook.routing.transform import fnv1a_32
from tests.support.snapshots import backup, restore

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[Any]:
    async with brook.serve(port=0, store_dir=str(tmp_path / "store")) as running:
        yield running


async def test_kv_republish_as_nats_py_tests_it(server: Any) -> None:
    """nats.py's nats/tests/test_js.py::KVTest::test_kv_republish, against Brook."""
    nc = await nats.connect(server.url, allow_reconnect=False)
    js = nc.jetstream()
    kv = await js.create_key_value(
        bucket="TEST_UPDATE", republish=nats.js.api.RePublish(src=">", dest="bar.>")
    )
    sinfo = await js.stream_info("KV_TEST_UPDATE")
    assert sinfo.config.republish is not None

    sub = await nc.subscribe("bar.>")
    await kv.put("hello.world", b"Hello World!")
    msg = await sub.next_msg()
    assert msg.subject == "bar.$KV.TEST_UPDATE.hello.world"
    assert msg.data == b"Hello World!"
    assert msg.headers is not None
    assert msg.headers.get("Nats-Msg-Size", None) is None
    assert msg.headers["Nats-Subject"] == "$KV.TEST_UPDATE.hello.world"
    await sub.unsubscribe()

    kv = await js.create_key_value(
        bucket="TEST_UPDATE_HEADERS",
        republish=nats.js.api.RePublish(src=">", dest="quux.>", headers_only=True),
    )
    sub = await nc.subscribe("quux.>")
    await kv.put("hello.world", b"Hello World!")
    msg = await sub.next_msg()
    assert msg.data == b""
    assert msg.headers is not None
    assert msg.headers["Nats-Sequence"] == "1"
    assert msg.headers["Nats-Msg-Size"] == "12"
    assert msg.headers["Nats-Stream"] == "KV_TEST_UPDATE_HEADERS"
    await sub.unsubscribe()
    await nc.close()


async def test_a_cycle_of_republishing_streams_neither_recurses_nor_stalls(
    server: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """A republishes into B's subjects and B into A's: each stored message makes another,
    as with nats-server, until `discard: new` limits stop them (or the header block, which
    grows by the republish headers at each turn, exceeds its maximum: a few hundred
    turns). Delivered synchronously,
    they would recurse hundreds of streams deep; Brook sends a stream's republish that
    its own republish caused on the next loop turn, so it never recurses and other
    clients are served meanwhile."""
    caplog.set_level(logging.ERROR)
    limit = 150
    nc = await nats.connect(server.url, allow_reconnect=False)
    for name, mine, theirs in (("A", "a", "b"), ("B", "b", "a")):
        config = {
            "name": name,
            "subjects": [f"{mine}.*"],
            "max_msgs": limit,
            "discard": "new",
            "republish": {"src": f"{mine}.*", "dest": f"{theirs}.$1"},
        }
        reply = json.loads(
            (await nc.request(f"$JS.API.STREAM.CREATE.{name}", json.dumps(config).encode())).data
        )
        assert "error" not in reply, reply

    async def echo(msg: Any) -> None:
        await msg.respond(msg.data)

    await nc.subscribe("echo", cb=echo)
    ack = json.loads((await nc.request("a.x", b"go", timeout=5)).data)
    assert ack == {"stream": "A", "seq": 1}
    echoes = 0
    deadline = time.monotonic() + 30
    counts: list[int] = []
    while time.monotonic() < deadline:
        assert (await nc.request("echo", b"ping", timeout=5)).data == b"ping"
        echoes += 1
        counts = []
        for name in ("A", "B"):
            info = json.loads((await nc.request(f"$JS.API.STREAM.INFO.{name}", b"")).data)
            counts.append(info["state"]["messages"])
        if counts == [limit, limit]:
            break
        await asyncio.sleep(0.01)
    assert counts == [limit, limit]
    assert echoes >= 1
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    await nc.close()


async def test_an_update_keeps_an_empty_republish_destination_inactive(tmp_path: Path) -> None:
    """docs/compatibility.md: nats-server's STREAM.UPDATE turns an empty `dest` into `>`,
    so the stream republishes into itself and no longer loads after a restart; Brook
    keeps the configuration as created: nothing republished, the stream still there."""
    config = {"name": "E", "subjects": ["e.>"], "republish": {}}
    async with brook.serve(port=0, store_dir=str(tmp_path)) as running:
        nc = await nats.connect(running.url, allow_reconnect=False)
        for verb in ("CREATE", "UPDATE"):
            reply = json.loads(
                (await nc.request(f"$JS.API.STREAM.{verb}.E", json.dumps(config).encode())).data
            )
            assert reply["config"]["republish"] == {"src": ">", "dest": ""}
        sub = await nc.subscribe("e.>")
        assert json.loads((await nc.request("e.a", b"x")).data) == {"stream": "E", "seq": 1}
        assert (await sub.next_msg(timeout=1)).headers is None  # the publish itself
        with pytest.raises(nats.errors.TimeoutError):
            await sub.next_msg(timeout=0.3)
        await nc.close()
    async with brook.serve(port=0, store_dir=str(tmp_path)) as running:
        nc = await nats.connect(running.url, allow_reconnect=False)
        info = json.loads((await nc.request("$JS.API.STREAM.INFO.E", b"")).data)
        assert info["state"]["messages"] == 1
        assert info["config"]["republish"] == {"src": ">", "dest": ""}
        await nc.close()


async def test_a_restored_stream_maps_and_republishes(server: Any) -> None:
    """A snapshot carries `subject_transform` and `republish` in its configuration, and
    the restored stream compiles and applies them."""
    nc = await nats.connect(server.url, allow_reconnect=False)
    config = {
        "name": "SR",
        "subjects": ["sr.>"],
        "subject_transform": {"src": "sr.*", "dest": "sr.{{partition(4,1)}}.$1"},
        "republish": {"src": "sr.*.*", "dest": "rp.$1.$2", "headers_only": True},
    }
    await nc.request("$JS.API.STREAM.CREATE.SR", json.dumps(config).encode())
    await nc.request("sr.k", b"one")
    saved = await backup(nc, "SR")
    await nc.request("$JS.API.STREAM.DELETE.SR", b"")
    final = await restore(nc, "SR", saved.meta, saved.data)
    assert final["config"]["subject_transform"] == config["subject_transform"]
    assert final["config"]["republish"] == config["republish"]
    sub = await nc.subscribe("rp.>")
    assert json.loads((await nc.request("sr.k", b"two")).data) == {"stream": "SR", "seq": 2}
    msg = await sub.next_msg(timeout=2)
    bucket = fnv1a_32(b"k") % 4
    assert msg.subject == f"rp.{bucket}.k"
    assert msg.headers is not None
    assert (msg.headers["Nats-Subject"], msg.headers["Nats-Last-Sequence"]) == (
        f"sr.{bucket}.k",
        "1",
    )
    assert (msg.headers["Nats-Msg-Size"], msg.data) == ("3", b"")
    await nc.close()
