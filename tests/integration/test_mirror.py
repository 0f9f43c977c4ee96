"""Mirrors on Brook alone (ADR 0020): what nats-server has no counterpart of to compare.

A mirror through a durable origin consumer (ADR-60) is refused with 10052 until its link
can reset that consumer (nats-server accepts it).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import nats
import pytest

import brook

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
async def nc(tmp_path: Path) -> AsyncIterator[Any]:
    async with brook.serve(port=0, store_dir=str(tmp_path / "store")) as server:
        client = await nats.connect(server.url, allow_reconnect=False)
        yield client
        await client.close()


async def _request(nc: Any, subject: str, body: Any = None, timeout: float = 5) -> Any:
    data = b"" if body is None else json.dumps(body).encode()
    return json.loads((await nc.request(subject, data, timeout=timeout)).data)


async def test_consumers_of_a_mirror_hear_of_each_run_it_stores(nc: Any) -> None:
    """The mirror stores its deliveries in runs and tells its consumers of each run at
    once: a filtered and an unfiltered push consumer, there before the messages, get
    every message of theirs at the origin's sequences, in order."""
    js = nc.jetstream()
    await js.add_stream(name="O", subjects=["o.>"])
    assert "error" not in await _request(
        nc, "$JS.API.STREAM.CREATE.M", {"name": "M", "mirror": {"name": "O"}}
    )
    every = await js.subscribe("o.>", stream="M", durable="every")
    only_b = await js.subscribe("o.b", stream="M", durable="only_b")
    await asyncio.gather(*(js.publish(f"o.{'ab'[i % 2]}", b"%d" % i) for i in range(300)))
    got = [await every.next_msg(timeout=5) for _ in range(300)]
    assert [m.metadata.sequence.stream for m in got] == list(range(1, 301))
    assert [m.data for m in got] == [b"%d" % i for i in range(300)]
    got_b = [await only_b.next_msg(timeout=5) for _ in range(150)]
    assert [m.metadata.sequence.stream for m in got_b] == list(range(2, 301, 2))
    assert {m.subject for m in got_b} == {"o.b"}
