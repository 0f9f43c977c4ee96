"""Mirrors on Brook alone (ADR 0020): what nats-server has no counterpart of to compare.

A mirror through a durable origin consumer (ADR-60) is refused with 10052 until its link
can reset that consumer (nats-server accepts it).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import nats
import pytest

import brook
from brook.jetstream import mirror as mirror_mod
from brook.jetstream.store.base import NewMessage, RecordSpan
from brook.jetstream.store.file import format as fmt
from brook.jetstream.store.file import store as file_store

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


def _msg_records(directory: Path) -> list[bytes]:
    """The MSG records of the segments under `directory`, in order."""
    out = []
    for path in sorted(directory.rglob("*.seg")):
        data = path.read_bytes()
        for info in fmt.scan(data, len(data)):
            assert isinstance(info, tuple)
            if info[2] == fmt.T_MSG:
                out.append(data[info[0] : info[0] + info[1]])
    return out


async def test_a_mirror_writes_its_origins_records_as_they_are(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file mirror catching up on a file origin in the same process writes the records
    the origin's reader checked, as they are (ADR 0035): each stretch it stores comes
    with the origin's records of exactly those messages (which `store_run` then copies
    rather than encodes: tests/store/test_file_store.py), and the mirror's log holds the
    origin's records byte for byte (headers and all)."""
    store = tmp_path / "store"
    async with brook.serve(port=0, store_dir=str(store)) as server:
        nc = await nats.connect(server.url, allow_reconnect=False)
        js = nc.jetstream()
        await js.add_stream(name="O", subjects=["o.>"])
        for i in range(600):
            headers = {"K": f"v{i}"} if i % 4 == 0 else None
            await js.publish(f"o.{i % 3}", b"%d" % i * (i % 50), headers=headers)
        stretches: list[bool] = []  # per stretch stored: did its spans hold its records?
        store_mirrored = mirror_mod.store_mirrored

        def spied(
            stream: Any, messages: list[NewMessage], seqs: list[int], stored: Any,
            spans: Sequence[RecordSpan] = (),
        ) -> None:  # fmt: skip
            stretches.append(file_store._copied(spans, seqs[0], len(messages)) is not None)
            store_mirrored(stream, messages, seqs, stored, spans)

        monkeypatch.setattr(mirror_mod, "store_mirrored", spied)
        config = {"name": "M", "mirror": {"name": "O"}}
        reply = await _request(nc, "$JS.API.STREAM.CREATE.M", config)
        assert "error" not in reply
        for _ in range(100):
            info = await _request(nc, "$JS.API.STREAM.INFO.M")
            if info["state"]["messages"] == 600:
                break
            await asyncio.sleep(0.05)
        assert info["state"]["last_seq"] == 600
        assert stretches
        assert all(stretches)
        await nc.close()
    origin = _msg_records(next(p for p in store.rglob("O") if p.is_dir()))
    mirror = _msg_records(next(p for p in store.rglob("M") if p.is_dir()))
    assert len(origin) == 600
    assert mirror == origin
