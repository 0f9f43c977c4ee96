"""SIGKILL the server while an origin is published to and mirrored; afterwards the mirror
equals the origin (ADR 0020).

Each round starts `brook serve` on a file store holding an origin `O` and its mirror `M`,
publishes acknowledged messages to `O` (many in flight, a few with headers) and kills the
server with SIGKILL at a random moment, while the mirror is copying. The mirror resumes
at its last sequence + 1 after each restart. At the end, once the mirror caught up, both
streams hold the same messages at the same sequences: subject, headers, payload and
timestamp; every acknowledged publish is there.
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

from tests.support.brookproc import publish_until_killed as until_killed
from tests.support.brookproc import sigkill_rounds, start_brook
from tests.support.jsapi import create_streams, request
from tests.support.natsserver import free_port

pytestmark = pytest.mark.timeout(180)

ROUNDS = 5


STREAMS = ({"name": "O", "subjects": ["o.>"]}, {"name": "M", "mirror": {"name": "O"}})


async def publish_until_killed(
    url: str, proc: subprocess.Popen[bytes], acked: dict[int, bytes], rng: random.Random
) -> None:
    nc = await nats.connect(url, allow_reconnect=False, max_reconnect_attempts=0)
    await create_streams(nc, STREAMS)

    async def one(n: int) -> None:
        data = b"m-%d-%d" % (proc.pid, n)
        headers = {"X-N": str(n)} if n % 3 == 0 else None
        reply = await nc.request(f"o.{n % 5}", data, timeout=2, headers=headers)
        ack = json.loads(reply.data)
        acked[ack["seq"]] = data

    await until_killed(nc, proc.pid, rng.uniform(0.3, 1.0), one)


async def _all(nc: Any, stream: str) -> tuple[dict[str, Any], list[Any]]:
    info = await request(nc, f"$JS.API.STREAM.INFO.{stream}", {"deleted_details": True})
    out = []
    for seq in range(info["state"]["first_seq"], info["state"]["last_seq"] + 1):
        reply = await request(nc, f"$JS.API.STREAM.MSG.GET.{stream}", {"seq": seq})
        out.append(reply.get("message", reply.get("error", {}).get("err_code")))
    return info["state"], out


async def test_a_mirror_equals_its_origin_after_repeated_sigkills(tmp_path: Path) -> None:
    rng = random.Random(int(os.environ.get("BROOK_CRASH_SEED", "16")))
    store = tmp_path / "store"
    port = free_port()
    url = f"nats://127.0.0.1:{port}"
    acked: dict[int, bytes] = {}
    await sigkill_rounds(
        store, port, ROUNDS, lambda proc, _: publish_until_killed(url, proc, acked, rng)
    )
    proc = start_brook(store, port)
    try:
        nc = await nats.connect(url)
        origin = await request(nc, "$JS.API.STREAM.INFO.O")
        last = origin["state"]["last_seq"]
        for _ in range(600):
            info = await request(nc, "$JS.API.STREAM.INFO.M")
            if info["state"]["last_seq"] == last and info["mirror"]["lag"] == 0:
                break
            await asyncio.sleep(0.05)
        o_state, o_msgs = await _all(nc, "O")
        m_state, m_msgs = await _all(nc, "M")
        await nc.close()
    finally:
        proc.terminate()
        assert proc.wait(10) == 0
    for key in ("messages", "first_seq", "last_seq", "deleted"):
        assert m_state.get(key) == o_state.get(key), (key, m_state.get(key), o_state.get(key))
    assert m_msgs == o_msgs
    stored = {m["seq"]: m["data"] for m in o_msgs if isinstance(m, dict)}
    for seq, data in acked.items():
        assert base64.b64decode(stored[seq]) == data, f"acknowledged {seq} lost"
    print(json.dumps({"acked": len(acked), "last_seq": last, "rounds": ROUNDS}))
