"""`$JS.EVENT.ADVISORY.CONSUMER.PAUSE.<stream>.<consumer>` compared with nats-server.

CONSUMER.PAUSE announces a pause, an explicit resume and the automatic resume when the
pause ends with a `consumer_pause` advisory. The scenario records each advisory whole, in
nats-server's key order (its `id` and `timestamp` masked; a `pause_until` that is the
instant asked for shown as such, since that instant differs between the two runs).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from tests.conformance.consumer_harness import Probe, compare, fresh_stream

pytestmark = [pytest.mark.conformance, pytest.mark.timeout(60)]

S = "CPAUSE"
API = "$JS.API.CONSUMER"
ADVISORIES = f"$JS.EVENT.ADVISORY.CONSUMER.PAUSE.{S}.>"


async def _pause(p: Probe, label: str, until: str | None) -> None:
    """Pause `c` until `until` (None resumes), then record the advisories that follow
    (two when the pause is over before the next step: its start and its end)."""
    body = {} if until is None else {"pause_until": until}
    await p.api(None, f"{API}.PAUSE.{S}.c", body)  # its pause_remaining is a duration
    count = 2 if label.startswith("short") else 1
    got = []
    for m in await p.take(ADVISORIES, count):
        advisory = json.loads(m.payload)
        if advisory["pause_until"] == until:
            advisory["pause_until"] = "<as asked>"
        got.append({"subject": m.subject.decode(), "advisory": advisory})
    p.record(label, got)


async def pause_and_resume(p: Probe) -> None:
    await fresh_stream(p, {"name": S, "subjects": ["cpause.>"], "storage": "memory"})
    config = {"durable_name": "c", "ack_policy": "explicit"}
    await p.api("create", f"{API}.CREATE.{S}.c", {"stream_name": S, "config": config})
    await p.sub(ADVISORIES)
    await _pause(p, "far pause", "2099-01-01T00:00:00Z")
    await _pause(p, "explicit resume", None)
    # Nanoseconds that end in a non-zero digit: formatted back in full by both servers.
    soon = datetime.now(UTC) + timedelta(milliseconds=400)
    await _pause(p, "short pause, then its end", soon.strftime("%Y-%m-%dT%H:%M:%S.%f123Z"))


async def test_pause_advisories_match_nats_server(nats_server_url: str) -> None:
    await compare(pause_and_resume, nats_server_url)
