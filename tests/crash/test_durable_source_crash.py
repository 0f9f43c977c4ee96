"""SIGKILL the server while a workqueue or interest origin is published to and sourced
through its durable consumer (ADR-60); afterwards every acknowledged origin message is in
the sourcing stream exactly once, and none left the origin before it was there.

Each round starts `brook serve` on a file store holding the workqueue (or interest)
stream `W` and a stream `S` sourcing it: `S`'s link asks `W` for a consumer, which `W`
makes the durable `JS_SRC_…` acked by flow control (the only consumer of the interest
stream, whose messages go once it acknowledged them). The round publishes
acknowledged messages to `W` (many in flight) and kills the server with SIGKILL at a
random moment. A message leaves `W` only when the link's flow-control answer
acknowledges it, and the link answers only once what it stored before is on disk: so
after each restart every acknowledged message is still in `W` or already in `S`. At the
end, once `S` caught up, `W` is empty and `S` holds each acknowledged message once (by
the origin sequence of its `Nats-Stream-Source` header), with its subject and payload.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import random
import subprocess
from pathlib import Path
from typing import Any

import nats
import pytest

from tests.support.brookproc import publish_until_killed, sigkill_rounds, start_brook
from tests.support.jsapi import create_streams
from tests.support.jsapi import request as _request
from tests.support.natsserver import free_port

pytestmark = pytest.mark.timeout(240)

ROUNDS = 5
Acked = dict[int, tuple[str, bytes]]  # W's sequence -> (subject, payload)


async def _publish_until_killed(
    url: str, pid: int, acked: Acked, rng: random.Random, retention: str
) -> None:
    nc = await nats.connect(url, allow_reconnect=False, max_reconnect_attempts=0)
    streams = (
        {"name": "W", "subjects": ["w.>"], "retention": retention},
        {"name": "S", "sources": [{"name": "W"}]},
    )
    await create_streams(nc, streams)
    # An interest stream keeps nothing while no consumer is there (as nats-server's):
    # published to once S's link made its durable consumer.
    for _ in range(100):
        if (await _request(nc, "$JS.API.CONSUMER.NAMES.W"))["consumers"]:
            break
        await asyncio.sleep(0.05)

    async def one(n: int) -> None:
        subject, data = f"w.{n % 5}", b"m-%d-%d" % (pid, n)
        reply = await nc.request(subject, data, timeout=2)
        acked[json.loads(reply.data)["seq"]] = (subject, data)

    await publish_until_killed(nc, pid, rng.uniform(0.3, 1.2), one)


async def _messages(nc: Any, stream: str) -> list[dict[str, Any]]:
    state = (await _request(nc, f"$JS.API.STREAM.INFO.{stream}"))["state"]
    out = []
    for seq in range(state["first_seq"], state["last_seq"] + 1):
        reply = await _request(nc, f"$JS.API.STREAM.MSG.GET.{stream}", {"seq": seq})
        if "message" in reply:
            out.append(reply["message"])
    return out


async def _where(nc: Any) -> tuple[dict[int, tuple[str, bytes]], list[tuple[int, str, bytes]]]:
    """What `W` still holds (by sequence) and what `S` holds: (W's sequence from the
    header, subject, payload) per message."""
    held = {
        m["seq"]: (m["subject"], base64.b64decode(m.get("data", "")))
        for m in await _messages(nc, "W")
    }
    copied = []
    for m in await _messages(nc, "S"):
        header = base64.b64decode(m["hdrs"]).decode()
        value = header.split("Nats-Stream-Source: ")[1].split("\r\n")[0].split(" ")
        assert value[0] == "W", header
        copied.append((int(value[1]), m["subject"], base64.b64decode(m.get("data", ""))))
    return held, copied


def _check(acked: Acked, held: dict[int, tuple[str, bytes]], copied: Any) -> None:
    """No message copied twice, and each acknowledged one in `W` or in `S` (or both)."""
    seqs = [seq for seq, _, _ in copied]
    assert len(seqs) == len(set(seqs)), "a message copied twice"
    in_s = {seq: (subject, data) for seq, subject, data in copied}
    for seq, message in acked.items():
        assert held.get(seq) == message or in_s.get(seq) == message, f"W's {seq} lost"


async def _stuck(nc: Any, held: dict[int, tuple[str, bytes]], log: str) -> str:
    """What to look at when messages stay in `W`: which, the consumers of `W`, the
    source's info and the servers' logs."""
    seqs = sorted(held)
    consumers = await _request(nc, "$JS.API.CONSUMER.LIST.W")
    sources = (await _request(nc, "$JS.API.STREAM.INFO.S")).get("sources")
    return (
        f"{len(held)} messages stay in W ({seqs[:3]}...{seqs[-3:]})\n"
        f"W's consumers: {json.dumps(consumers)}\nS's sources: {json.dumps(sources)}\n"
        f"log:\n{log[-8000:]}"
    )


@pytest.mark.parametrize("retention", ["workqueue", "interest"])
async def test_a_durably_sourced_origin_keeps_each_message_once_across_sigkills(
    tmp_path: Path, retention: str
) -> None:
    rng = random.Random(int(os.environ.get("BROOK_CRASH_SEED", "60")))
    store = tmp_path / "store"
    port = free_port()
    url = f"nats://127.0.0.1:{port}"
    acked: Acked = {}
    checks = 0

    async def round_(proc: subprocess.Popen[bytes], _: int) -> None:
        nonlocal checks
        if acked:  # what the last kill left: nothing lost, nothing twice
            nc = await nats.connect(url)
            _check(acked, *await _where(nc))
            checks += 1
            await nc.close()
        await _publish_until_killed(url, proc.pid, acked, rng, retention)

    log = tmp_path / "brook.log"  # every round's: shown if the end is not as it should be
    await sigkill_rounds(store, port, ROUNDS, round_, log=log)
    proc = start_brook(store, port, log=log)
    try:
        nc = await nats.connect(url)
        for _ in range(300):  # copied, then acknowledged by the next flow-control answer
            w = (await _request(nc, "$JS.API.STREAM.INFO.W"))["state"]["messages"]
            s = (await _request(nc, "$JS.API.STREAM.INFO.S"))["state"]["messages"]
            if w == 0 and s >= len(acked):
                break
            await asyncio.sleep(0.1)
        held, copied = await _where(nc)
        _check(acked, held, copied)
        if held:
            pytest.fail(await _stuck(nc, held, log.read_text(errors="replace")))
        assert {seq for seq, _, _ in copied} >= set(acked)
        names = await _request(nc, "$JS.API.CONSUMER.NAMES.W")
        assert len(names["consumers"]) == 1
        assert names["consumers"][0].startswith("JS_SRC_")
        await nc.close()
    finally:
        proc.terminate()
        assert proc.wait(10) == 0
    assert checks == ROUNDS - 1
    print(json.dumps({"acked": len(acked), "copied": len(copied), "rounds": ROUNDS}))
