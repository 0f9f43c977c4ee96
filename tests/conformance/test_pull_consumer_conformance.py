"""Pull consumer scenarios run against nats-server and Brook: the same raw requests, the
normalised responses and deliveries compared (timestamps, versions and inbox names masked)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import nats
import pytest

import brook

pytestmark = pytest.mark.timeout(60)

STREAM = "PULLC"
_VOLATILE = {"created", "ts", "last_active", "_nats.ver", "_nats.level"}


def normalise(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: normalise(v) for k, v in value.items() if k not in _VOLATILE}
    if isinstance(value, list):
        return [normalise(v) for v in value]
    return value


def _mask_ack(reply: str | None) -> str | None:
    if reply is None or not reply.startswith("$JS.ACK."):
        return reply
    tokens = reply.split(".")
    tokens[7] = "<ts>"
    return ".".join(tokens)


async def _api(nc: Any, subject: str, body: Any = None) -> Any:
    data = b"" if body is None else json.dumps(body).encode()
    try:
        msg = await nc.request(subject, data, timeout=5)
    except nats.errors.NoRespondersError:
        return "no responders"
    return normalise(json.loads(msg.data))


async def _pull(nc: Any, body: Any, wait: float = 0.3) -> tuple[list[Any], list[str]]:
    """One pull request; returns what reached the inbox within `wait` and the ack subjects."""
    inbox = nc.new_inbox()
    sub = await nc.subscribe(inbox)
    await nc.publish(
        f"$JS.API.CONSUMER.MSG.NEXT.{STREAM}.d", json.dumps(body).encode(), reply=inbox
    )
    got: list[Any] = []
    acks: list[str] = []
    try:
        while True:
            msg = await sub.next_msg(timeout=wait)
            headers = dict(msg.headers or {})
            subject = "<inbox>" if msg.subject == inbox else msg.subject
            got.append((subject, _mask_ack(msg.reply), headers, msg.data))
            if msg.reply:
                acks.append(msg.reply)
    except nats.errors.TimeoutError:
        pass
    await sub.unsubscribe()
    return got, acks


async def scenario(url: str) -> list[Any]:
    nc = await nats.connect(url, allow_reconnect=False)
    out: list[Any] = []
    try:
        await nc.request(f"$JS.API.STREAM.DELETE.{STREAM}", b"", timeout=5)
        config = {"name": STREAM, "subjects": ["pc.>"], "storage": "memory"}
        out.append(await _api(nc, f"$JS.API.STREAM.CREATE.{STREAM}", config))
        for i in range(3):
            out.append(json.loads((await nc.request(f"pc.{i}", str(i).encode())).data))
        create = {
            "stream_name": STREAM,
            "config": {
                "name": "d",
                "durable_name": "d",
                "ack_policy": "explicit",
                "filter_subject": "pc.>",
            },
        }
        out.append(await _api(nc, f"$JS.API.CONSUMER.CREATE.{STREAM}.d.pc.>", create))
        got, acks = await _pull(nc, {"batch": 10, "expires": 1_000_000_000, "no_wait": True})
        out.append(got)
        out.append((await nc.request(acks[0], b"", timeout=5)).data)  # ack_sync
        await nc.publish(acks[1], b"-NAK")
        await nc.publish(acks[2], b"+TERM")
        await nc.flush()
        await asyncio.sleep(0.1)  # nats-server processes acks asynchronously
        out.append(await _api(nc, f"$JS.API.CONSUMER.INFO.{STREAM}.d"))
        got, acks = await _pull(nc, {"batch": 5, "no_wait": True})
        out.append(got)  # the NAKed message again, then 404
        await nc.publish(acks[0], b"+ACK")
        await nc.flush()
        out.append((await _pull(nc, {"batch": 2, "expires": 200_000_000}, wait=0.6))[0])
        out.append(await _api(nc, f"$JS.API.CONSUMER.INFO.{STREAM}.d"))
        out.append(await _api(nc, f"$JS.API.CONSUMER.NAMES.{STREAM}"))
        out.append(await _api(nc, f"$JS.API.CONSUMER.LIST.{STREAM}"))
        out.append(await _api(nc, f"$JS.API.CONSUMER.DELETE.{STREAM}.d"))
        out.append(await _api(nc, f"$JS.API.CONSUMER.INFO.{STREAM}.d"))
        out.append(await _api(nc, f"$JS.API.CONSUMER.MSG.NEXT.{STREAM}.d", {"batch": 1}))
        out.append(await _api(nc, f"$JS.API.CONSUMER.NAMES.{STREAM}"))
    finally:
        await nc.request(f"$JS.API.STREAM.DELETE.{STREAM}", b"", timeout=5)
        await nc.close()
    return out


@pytest.fixture
async def brook_url(tmp_path: Path) -> AsyncIterator[str]:
    async with brook.serve(port=0, store_dir=str(tmp_path)) as server:
        yield server.url


async def test_pull_consumer_scenario_matches_nats_server(
    brook_url: str, nats_server_url: str
) -> None:
    theirs = await scenario(nats_server_url)
    ours = await scenario(brook_url)
    mismatches = [
        f"step {i}:\n  nats-server: {t}\n  brook:       {o}"
        for i, (t, o) in enumerate(zip(theirs, ours, strict=True))
        if t != o
    ]
    assert not mismatches, "\n".join(mismatches)
