"""SIGKILL the server while two origins are published to and sourced; afterwards the
sourcing stream holds every origin message exactly once (ADR 0020).

Each round starts `brook serve` on a file store holding origins `O1` and `O2` and a
stream `S` sourcing both, publishes acknowledged messages to both origins (many in
flight, some with a `Nats-Msg-Id`) and kills the server with SIGKILL at a random moment,
while the sources are copying. Each source resumes after the newest message it stored
(its `Nats-Stream-Source` headers and `sources.db`). At the end, once both sources caught
up, `S` holds each origin message once: its origin sequence (from the header), subject
and payload; every acknowledged publish is there. Then `S` is purged and the server
killed again: after the restart the sources do not copy their origins again.

The second test kills the server in the middle of a source's catch-up (an origin filled
beforehand, copied in runs of hundreds of messages stored together: stream_sourced.py),
each round once the sourcing stream holds a random share of what is left: afterwards it
holds the origin's messages in order, each once.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import random
import signal
import subprocess
from pathlib import Path
from typing import Any

import nats
import pytest

from tests.support.brookproc import publish_until_killed as until_killed
from tests.support.brookproc import sigkill_rounds, start_brook
from tests.support.jsapi import create_streams, request
from tests.support.natsserver import free_port

pytestmark = pytest.mark.timeout(240)

ROUNDS = 5
STREAMS = (
    {"name": "O1", "subjects": ["a.>"]},
    {"name": "O2", "subjects": ["b.>"]},
    {"name": "S", "sources": [{"name": "O1"}, {"name": "O2"}]},
)


async def publish_until_killed(
    url: str,
    proc: subprocess.Popen[bytes],
    acked: dict[tuple[str, int], bytes],
    rng: random.Random,
) -> None:
    nc = await nats.connect(url, allow_reconnect=False, max_reconnect_attempts=0)
    await create_streams(nc, STREAMS)

    async def one(n: int) -> None:
        data = b"m-%d-%d" % (proc.pid, n)
        headers = {"Nats-Msg-Id": data.decode()} if n % 3 == 0 else None
        subject = f"a.{n % 5}" if n % 2 else f"b.{n % 7}"
        reply = await nc.request(subject, data, timeout=2, headers=headers)
        ack = json.loads(reply.data)
        acked[(ack["stream"], ack["seq"])] = data

    await until_killed(nc, proc.pid, rng.uniform(0.3, 1.0), one)


async def _caught_up(nc: Any, expected: int) -> dict[str, Any]:
    info: dict[str, Any] = {}
    for _ in range(600):
        info = await request(nc, "$JS.API.STREAM.INFO.S")
        lags = [source["lag"] for source in info.get("sources", [])]
        if info["state"]["messages"] >= expected and lags == [0, 0]:
            await asyncio.sleep(0.5)  # a duplicate would arrive now
            return await request(nc, "$JS.API.STREAM.INFO.S")
        await asyncio.sleep(0.05)
    raise AssertionError(f"S did not catch up to {expected}: {info}")


async def _sourced(nc: Any, first: int, last: int) -> list[tuple[str, int, str, bytes]]:
    """(origin, origin sequence, subject, payload) of each message of S."""
    out = []
    for seq in range(first, last + 1):
        reply = await request(nc, "$JS.API.STREAM.MSG.GET.S", {"seq": seq})
        message = reply["message"]
        header = base64.b64decode(message["hdrs"]).decode()
        value = header.split("Nats-Stream-Source: ")[1].split("\r\n")[0].split(" ")
        data = base64.b64decode(message.get("data", ""))
        out.append((value[0], int(value[1]), message["subject"], data))
    return out


async def test_a_source_copies_each_origin_message_once_across_sigkills(tmp_path: Path) -> None:
    rng = random.Random(int(os.environ.get("BROOK_CRASH_SEED", "16")))
    store = tmp_path / "store"
    port = free_port()
    url = f"nats://127.0.0.1:{port}"
    acked: dict[tuple[str, int], bytes] = {}
    await sigkill_rounds(
        store, port, ROUNDS, lambda proc, _: publish_until_killed(url, proc, acked, rng)
    )
    proc = start_brook(store, port)
    try:
        nc = await nats.connect(url)
        origins = {}
        for name in ("O1", "O2"):
            state = (await request(nc, f"$JS.API.STREAM.INFO.{name}"))["state"]
            assert state["messages"] == state["last_seq"], state  # nothing removed
            for seq in range(1, state["last_seq"] + 1):
                reply = await request(nc, f"$JS.API.STREAM.MSG.GET.{name}", {"seq": seq})
                message = reply["message"]
                origins[(name, seq)] = (message["subject"], base64.b64decode(message["data"]))
        info = await _caught_up(nc, len(origins))
        copied = await _sourced(nc, 1, info["state"]["last_seq"])
        purged = await request(nc, "$JS.API.STREAM.PURGE.S")
        assert purged["purged"] == len(copied)
        await nc.close()
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    keys = [(origin, seq) for origin, seq, _, _ in copied]
    assert len(keys) == len(set(keys)), "a message copied twice"
    assert {key: (subject, data) for *key_parts, subject, data in copied
            for key in [tuple(key_parts)]} == origins  # fmt: skip
    for key, data in acked.items():
        assert origins[key][1] == data, f"acknowledged {key} lost"
    # Purged, then killed: the sources resume where they were (sources.db), not at 1.
    proc = start_brook(store, port)
    try:
        nc = await nats.connect(url)
        await nc.request("a.after", b"a", timeout=5)
        await nc.request("b.after", b"b", timeout=5)
        info = await _caught_up(nc, 2)
        assert info["state"]["messages"] == 2, info["state"]
        after = await _sourced(nc, info["state"]["first_seq"], info["state"]["last_seq"])
        assert sorted(subject for _, _, subject, _ in after) == ["a.after", "b.after"]
        await nc.close()
    finally:
        proc.terminate()
        assert proc.wait(10) == 0
    print(json.dumps({"acked": len(acked), "copied": len(copied), "rounds": ROUNDS}))


CATCH_UP_MESSAGES = 20_000
CATCH_UP_ROUNDS = 4
WINDOW = {"duplicate_window": 120_000_000_000}  # S's ids are checked against each other


async def _origin_filled(url: str, n: int) -> None:
    """O filled with `n` messages (every third with a `Nats-Msg-Id`, every fifth with
    another header), published without acks and waited for."""
    nc = await nats.connect(url)
    await create_streams(nc, [{"name": "O", "subjects": ["o.>"]}])
    for i in range(n):
        headers = {"Nats-Msg-Id": f"id-{i}"} if i % 3 == 0 else None
        if i % 5 == 0:
            headers = {**(headers or {}), "X-N": str(i)}
        await nc.publish(f"o.{i % 7}", b"c-%d" % i, headers=headers)
    for _ in range(600):
        if (await request(nc, "$JS.API.STREAM.INFO.O"))["state"]["messages"] == n:
            break
        await asyncio.sleep(0.05)
    await nc.close()


async def _kill_amid_catch_up(
    url: str, proc: subprocess.Popen[bytes], rng: random.Random, killed_at: list[int]
) -> None:
    """Create S (once), then SIGKILL the server once S holds a random share of what is
    left to copy: in the middle of its catch-up runs."""
    nc = await nats.connect(url, allow_reconnect=False, max_reconnect_attempts=0)
    try:
        await create_streams(nc, [{"name": "S", "sources": [{"name": "O"}], **WINDOW}])
        start = (await request(nc, "$JS.API.STREAM.INFO.S"))["state"]["messages"]
        target = start + int((CATCH_UP_MESSAGES - start) * rng.uniform(0.2, 0.5))
        while True:
            messages = (await request(nc, "$JS.API.STREAM.INFO.S"))["state"]["messages"]
            if messages >= target:
                break
            await asyncio.sleep(0.005)
        os.kill(proc.pid, signal.SIGKILL)
        killed_at.append(messages)
    finally:
        await nc.close()


async def test_a_source_killed_amid_its_catch_up_runs_copies_each_message_once(
    tmp_path: Path,
) -> None:
    """A source's catch-up (runs of hundreds of messages stored together) killed with
    SIGKILL again and again: once caught up, S holds O's messages in O's order, each once,
    with its subject, payload, headers and origin sequence."""
    rng = random.Random(int(os.environ.get("BROOK_CRASH_SEED", "16")))
    store = tmp_path / "store"
    port = free_port()
    url = f"nats://127.0.0.1:{port}"
    proc = start_brook(store, port)
    try:
        await _origin_filled(url, CATCH_UP_MESSAGES)
    finally:
        proc.terminate()
        assert proc.wait(10) == 0
    killed_at: list[int] = []
    await sigkill_rounds(
        store,
        port,
        CATCH_UP_ROUNDS,
        lambda proc, _: _kill_amid_catch_up(url, proc, rng, killed_at),
    )
    # On a loaded machine a later round's catch-up may end between two polls: the kill
    # then finds it done, a round that tests less but no less truly.
    assert any(0 < k < CATCH_UP_MESSAGES for k in killed_at), killed_at
    proc = start_brook(store, port)
    try:
        nc = await nats.connect(url)
        for _ in range(600):
            info = await request(nc, "$JS.API.STREAM.INFO.S")
            if info["state"]["messages"] >= CATCH_UP_MESSAGES and info["sources"][0]["lag"] == 0:
                break
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.5)  # a duplicate would arrive now
        state = (await request(nc, "$JS.API.STREAM.INFO.S"))["state"]
        assert (state["messages"], state["last_seq"]) == (CATCH_UP_MESSAGES, CATCH_UP_MESSAGES)
        sub = await nc.jetstream().subscribe("o.>", stream="S", ordered_consumer=True)
        for seq in range(1, CATCH_UP_MESSAGES + 1):
            msg = await sub.next_msg(timeout=10)
            i = seq - 1
            headers = dict(msg.headers or {})
            source = headers.pop("Nats-Stream-Source").split(" ")
            want = {"Nats-Msg-Id": f"id-{i}"} if i % 3 == 0 else {}
            if i % 5 == 0:
                want["X-N"] = str(i)
            assert (msg.metadata.sequence.stream, int(source[1]), msg.subject, msg.data) == (
                seq,
                seq,
                f"o.{i % 7}",
                b"c-%d" % i,
            )
            assert headers == want
        await nc.close()
    finally:
        proc.terminate()
        assert proc.wait(10) == 0
    print(json.dumps({"killed_at": killed_at, "messages": CATCH_UP_MESSAGES}))
