"""A consumer update that changes its filters, against nats-server and Brook: the new
filters apply at once, from the consumer's position (what it passed stays passed), and
num_pending is counted again through them (issue 14; nats.py's
`test_update_consumer_with_filter_subjects`). The same raw requests go to both servers;
the update responses, consumer infos and delivered subjects are compared."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import nats
import pytest

import brook

pytestmark = [pytest.mark.conformance, pytest.mark.timeout(60)]

STREAM = "UPDF"
_VOLATILE = {"created", "ts", "last_active", "_nats.ver", "_nats.level"}


def normalise(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: normalise(v) for k, v in value.items() if k not in _VOLATILE}
    if isinstance(value, list):
        return [normalise(v) for v in value]
    return value


async def _api(nc: Any, subject: str, body: Any = None) -> Any:
    data = b"" if body is None else json.dumps(body).encode()
    return normalise(json.loads((await nc.request(subject, data, timeout=5)).data))


async def _publish(nc: Any, *subjects: str) -> None:
    for subject in subjects:
        await nc.request(subject, subject.encode(), timeout=5)


async def _fetch(nc: Any, name: str) -> list[str]:
    """The subjects a no_wait fetch of up to 10 delivers (each acked), then its status."""
    inbox = nc.new_inbox()
    sub = await nc.subscribe(inbox)
    body = json.dumps({"batch": 10, "no_wait": True}).encode()
    await nc.publish(f"$JS.API.CONSUMER.MSG.NEXT.{STREAM}.{name}", body, reply=inbox)
    got: list[str] = []
    while True:
        msg = await sub.next_msg(timeout=5)
        if not msg.reply:  # the 404 that ends a no_wait request
            got.append(f"status {(msg.headers or {}).get('Status')}")
            break
        got.append(msg.subject)
        await nc.request(msg.reply, b"", timeout=5)  # ack_sync: applied before what follows
    await sub.unsubscribe()
    return got


async def _update(nc: Any, name: str, **filters: Any) -> Any:
    config = {"durable_name": name, "ack_policy": "explicit", **filters}
    body = {"stream_name": STREAM, "config": config, "action": "update"}
    return await _api(nc, f"$JS.API.CONSUMER.CREATE.{STREAM}.{name}", body)


async def _info_settled(nc: Any, name: str, num_pending: int) -> Any:
    """nats-server's consumer info once its `num_pending` is `num_pending` (or after 5 s):
    it counts a new message for its consumers in the stream's signal goroutine, after the
    PubAck has left (stream.go `signalConsumersLoop`, consumer.go `processStreamSignal`),
    so on a loaded machine an info asked for right after the publish may not count it yet."""
    info = await _api(nc, f"$JS.API.CONSUMER.INFO.{STREAM}.{name}")
    for _ in range(100):
        if info.get("num_pending") == num_pending:
            break
        await asyncio.sleep(0.05)
        info = await _api(nc, f"$JS.API.CONSUMER.INFO.{STREAM}.{name}")
    return info


async def scenario(url: str, *, settle: bool = False) -> list[Any]:
    """The steps, each answer in `out`. With `settle` (nats-server), a consumer info after
    publishes waits for the count of its new messages (`_info_settled`); Brook counts them
    before the PubAck, so it is asked once."""
    nc = await nats.connect(url, allow_reconnect=False)
    out: list[Any] = []
    try:
        config = {"name": STREAM, "subjects": ["BAR.*"], "storage": "memory"}
        out.append(await _api(nc, f"$JS.API.STREAM.CREATE.{STREAM}", config))
        await _publish(nc, "BAR.X", "BAR.A", "BAR.C", "BAR.B", "BAR.X")
        create = {
            "stream_name": STREAM,
            "config": {"durable_name": "d", "ack_policy": "explicit", "filter_subject": "BAR.X"},
        }
        out.append(await _api(nc, f"$JS.API.CONSUMER.CREATE.{STREAM}.d", create))
        out.append(await _api(nc, f"$JS.API.CONSUMER.INFO.{STREAM}.d"))
        # One BAR.X delivered; then the filter changes from BAR.X to BAR.A and BAR.B.
        inbox = nc.new_inbox()
        sub = await nc.subscribe(inbox)
        await nc.publish(f"$JS.API.CONSUMER.MSG.NEXT.{STREAM}.d", b'{"batch":1}', reply=inbox)
        first = await sub.next_msg(timeout=5)
        out.append(first.subject)
        await nc.request(first.reply, b"", timeout=5)
        await sub.unsubscribe()
        out.append(await _update(nc, "d", filter_subjects=["BAR.A", "BAR.B"]))
        out.append(await _api(nc, f"$JS.API.CONSUMER.INFO.{STREAM}.d"))
        out.append(await _fetch(nc, "d"))  # BAR.A and BAR.B; not BAR.C, not the BAR.X
        await _publish(nc, "BAR.C", "BAR.A", "BAR.X")
        if settle:  # one new message for the filters BAR.A and BAR.B: BAR.A
            out.append(await _info_settled(nc, "d", 1))
        else:
            out.append(await _api(nc, f"$JS.API.CONSUMER.INFO.{STREAM}.d"))
        # Back to one filter: BAR.X, of which only the one published after the position.
        out.append(await _update(nc, "d", filter_subject="BAR.X"))
        out.append(await _fetch(nc, "d"))
        # An unfiltered consumer narrowed before reading anything (nats.py's case).
        create["config"] = {"durable_name": "e", "ack_policy": "explicit"}
        out.append(await _api(nc, f"$JS.API.CONSUMER.CREATE.{STREAM}.e", create))
        out.append(await _update(nc, "e", filter_subject="BAR.C"))
        out.append(await _fetch(nc, "e"))
        out.append(await _update(nc, "e"))  # and widened again: everything after BAR.C
        out.append(await _fetch(nc, "e"))
    finally:
        await nc.request(f"$JS.API.STREAM.DELETE.{STREAM}", b"", timeout=5)
        await nc.close()
    return out


@pytest.fixture
async def brook_url(tmp_path: Path) -> AsyncIterator[str]:
    async with brook.serve(port=0, store_dir=str(tmp_path / "store")) as server:
        yield server.url


async def test_filter_update_applies_as_on_nats_server(
    brook_url: str, nats_server_url: str
) -> None:
    theirs = await scenario(nats_server_url, settle=True)
    ours = await scenario(brook_url)
    mismatches = [
        f"step {i}:\n  nats-server: {t}\n  brook:       {o}"
        for i, (t, o) in enumerate(zip(theirs, ours, strict=True))
        if t != o
    ]
    assert not mismatches, "\n".join(mismatches)
    assert theirs[6] == ["BAR.A", "BAR.B", "status 404"]  # the scenario says what it means
    assert theirs[7]["num_pending"] == 1
