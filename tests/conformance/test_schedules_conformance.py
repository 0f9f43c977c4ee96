"""Message schedules (`allow_msg_schedules`, `Nats-Schedule`; ADR-51) side by side:
nats-server 2.15.1 and Brook, replies and stored messages compared.

Each scenario runs the same steps on both servers (at once, each on its own store) and
records the stream requests' replies (config and errors as JSON), the PubAcks as bytes and
the stored messages as bytes (subject, sequence, header block, payload). The `@at` times
are computed once per test, a few seconds ahead, so both servers get the same headers;
polling for a schedule to fire is not recorded. The restart scenario stops each server
before its schedules are due and starts it again on the same store.
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conformance.test_counters_conformance import (
    Run,
    _compare_across_restarts,
    _compare_once,
)

pytestmark = [pytest.mark.conformance, pytest.mark.timeout(120)]

_NEXT_TIME = re.compile(
    rb"Nats-Schedule-Next: \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)\r\n"
)


def _at(seconds_ahead: int) -> str:
    """An `@at` pattern this many whole seconds from now (UTC)."""
    moment = int(time.time()) + seconds_ahead
    return "@at " + time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(moment))


async def _msg(r: Run, stream: str, request: dict[str, Any]) -> Any:
    reply = json.loads(
        (
            await r.nc.request(
                f"$JS.API.STREAM.MSG.GET.{stream}", json.dumps(request).encode(), timeout=5
            )
        ).data
    )
    msg = reply.get("message")
    if msg is None:
        return reply.get("error")
    header = base64.b64decode(msg.get("hdrs", ""))
    # A repeating schedule's next time is the moment it ran: its form is compared.
    header = _NEXT_TIME.sub(rb"Nats-Schedule-Next: <time>\2\r\n", header)
    return (msg["subject"], msg["seq"], header, base64.b64decode(msg.get("data", "")))


async def _contents(r: Run, stream: str) -> None:
    """Every stored message of the stream, recorded in order, and its state."""
    info = json.loads((await r.nc.request(f"$JS.API.STREAM.INFO.{stream}", b"", timeout=5)).data)
    state = info["state"]
    r.record(f"state {stream}", {k: state[k] for k in ("messages", "first_seq", "last_seq")})
    for seq in range(state["first_seq"], state["last_seq"] + 1):
        found = await _msg(r, stream, {"seq": seq})
        if isinstance(found, tuple):
            r.record(f"message {stream} {seq}", found)


async def _wait_for(r: Run, stream: str, subject: str, count: int = 1) -> None:
    """Poll (unrecorded) until `subject` holds `count` messages."""
    for _ in range(150):
        reply = await r.nc.request(
            f"$JS.API.STREAM.INFO.{stream}",
            json.dumps({"subjects_filter": subject}).encode(),
            timeout=5,
        )
        subjects = json.loads(reply.data)["state"].get("subjects") or {}
        if subjects.get(subject, 0) >= count:
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"{subject} in {stream} never reached {count} messages")


def _batch(batch: str, seq: int, lines: str) -> bytes:
    head = f"NATS/1.0\r\nNats-Batch-Id: {batch}\r\nNats-Batch-Sequence: {seq}\r\n"
    return f"{head}{lines}\r\n\r\n".encode()


# ---------------------------------------------------------------------------- configuration


async def schedule_configs(r: Run) -> None:
    for config in (
        {"allow_msg_schedules": True},
        {"allow_msg_schedules": True, "storage": "memory"},
        {"allow_msg_schedules": True, "discard": "new"},
        {"allow_msg_schedules": True, "deny_purge": True},
        {"allow_msg_schedules": True, "deny_purge": True, "allow_rollup_hdrs": True},
        {"allow_msg_schedules": True, "pedantic": True},
        {"allow_msg_schedules": True, "allow_rollup_hdrs": True, "pedantic": True},
        {"allow_msg_schedules": True, "allow_msg_counter": True},
        {"allow_msg_schedules": True, "allow_msg_ttl": True, "retention": "workqueue"},
        {"allow_msg_schedules": True, "mirror": {"name": "O"}, "subjects": []},
        {"allow_msg_schedules": True, "sources": [{"name": "O"}]},
        {"allow_msg_schedules": None},
        {"allow_msg_schedules": False},
        {"allow_msg_schedules": "yes"},
    ):
        reply = await r.create("CFG", **config)
        if "error" not in reply:
            await r.api("$JS.API.STREAM.DELETE.CFG")
    await r.create("S", allow_msg_schedules=True)
    await r.update("S", allow_msg_schedules=False)
    await r.update("S", allow_msg_schedules=True, max_msgs=10)
    await r.create("S", allow_msg_schedules=True)  # idempotent: the same configuration
    await r.create("N")
    await r.update("N", allow_msg_schedules=True, discard="new")
    await r.update("N", allow_msg_schedules=True)
    await r.update("N", allow_msg_schedules=True, allow_rollup_hdrs=False)


async def test_schedule_configurations_match(tmp_path: Path) -> None:
    await _compare_once(tmp_path, schedule_configs)


# ---------------------------------------------------------------------------- publishes


async def publishes(r: Run) -> None:
    await r.create("S", allow_msg_schedules=True, subjects=["s.>", "t.>"])
    await r.create("T", allow_msg_schedules=True, allow_msg_ttl=True, subjects=["tt.>"])
    await r.create("N")
    later = "@at 2099-01-01T00:00:00Z"
    for headers in (
        {"Nats_Schedule": later, "Nats_Schedule_Target": "t.a"},
        {"Nats_Schedule": "@at 2099-01-01T01:00:00+01:00", "Nats_Schedule_Target": "t.a"},
        {"Nats_Schedule": "@at 2099-01-01T00:00:00.5Z", "Nats_Schedule_Target": "t.a"},
        {"Nats_Schedule": "@at 2099-02-30T00:00:00Z", "Nats_Schedule_Target": "t.a"},
        {"Nats_Schedule": "@at 2099-01-01 00:00:00Z", "Nats_Schedule_Target": "t.a"},
        {"Nats_Schedule": "@at 2099-01-01T00:00:00", "Nats_Schedule_Target": "t.a"},
        {"Nats_Schedule": "@every 1m", "Nats_Schedule_Target": "t.a"},
        {"Nats_Schedule": "@every 1s", "Nats_Schedule_Target": "t.a"},
        {"Nats_Schedule": "@every 999ms", "Nats_Schedule_Target": "t.a"},
        {"Nats_Schedule": "@every -5s", "Nats_Schedule_Target": "t.a"},
        {"Nats_Schedule": "@every x", "Nats_Schedule_Target": "t.a"},
        {"Nats_Schedule": "0 30 * * * *", "Nats_Schedule_Target": "t.a"},
        {"Nats_Schedule": "*/10 * * * * MON-FRI", "Nats_Schedule_Target": "t.a"},
        {"Nats_Schedule": "0 0 12 1,15 jan,Jul ?", "Nats_Schedule_Target": "t.a"},
        {"Nats_Schedule": "0 0 0 30 2 *", "Nats_Schedule_Target": "t.a"},
        {"Nats_Schedule": "0 0 24 * * *", "Nats_Schedule_Target": "t.a"},
        {"Nats_Schedule": "0 0 * * *", "Nats_Schedule_Target": "t.a"},
        {"Nats_Schedule": "@yearly", "Nats_Schedule_Target": "t.a"},
        {"Nats_Schedule": "@weekly", "Nats_Schedule_Target": "t.a"},
        {"Nats_Schedule": "@reboot", "Nats_Schedule_Target": "t.a"},
        {
            "Nats_Schedule": "@daily",
            "Nats_Schedule_Target": "t.a",
            "Nats_Schedule_Time_Zone": "America/New_York",
        },
        {
            "Nats_Schedule": later,
            "Nats_Schedule_Target": "t.a",
            "Nats_Schedule_Time_Zone": "UTC",
        },
        {"Nats_Schedule": "@hourly", "Nats_Schedule_Target": "t.a", "Nats_Schedule_Time_Zone": "X"},
        {"Nats_Schedule": later},
        {"Nats_Schedule": later, "Nats_Schedule_Target": "s.x"},
        {"Nats_Schedule": later, "Nats_Schedule_Target": "t.*"},
        {"Nats_Schedule": later, "Nats_Schedule_Target": "elsewhere"},
        {"Nats_Schedule": later, "Nats_Schedule_Target": "t.a", "Nats_Schedule_Source": "t.a"},
        {"Nats_Schedule": later, "Nats_Schedule_Target": "t.a", "Nats_Schedule_Source": "s.x"},
        {"Nats_Schedule": later, "Nats_Schedule_Target": "t.a", "Nats_Schedule_Source": "q"},
        {"Nats_Schedule": later, "Nats_Schedule_Target": "t.a", "Nats_Schedule_Source": "s.z"},
        {"Nats_Schedule": later, "Nats_Schedule_Target": "t.a", "Nats_Schedule_TTL": "5s"},
        {"Nats_Schedule": later, "Nats_Schedule_Target": "t.a", "Nats_Schedule_Rollup": "sub"},
        {"Nats_Schedule": later, "Nats_Schedule_Target": "t.a", "Nats_Schedule_Rollup": "all"},
        {"Nats_Schedule": later, "Nats_Schedule_Target": "t.a", "Nats_Rollup": "sub"},
        {"Nats_Schedule": later, "Nats_Schedule_Target": "t.a", "Nats_Rollup": "all"},
        {"Nats_Schedule": later, "Nats_Schedule_Target": "t.a", "Nats_Msg_Id": "m1"},
        {"Nats_Schedule": later, "Nats_Schedule_Target": "t.a", "Nats_Msg_Id": "m1"},
        {"Nats_Schedule_Target": "t.a"},
        {"Nats_Scheduler": "s.x"},
        {"Nats_Schedule_Next": "purge"},
        {"Nats_Schedule_Next": "2099-01-01T00:00:00Z", "Nats_Scheduler": "s.y"},
        {"Nats_Schedule_Next": "purge", "Nats_Scheduler": "s.x"},
        {"Nats_Schedule_Next": "purge", "Nats_Scheduler": "s.nothing"},
    ):
        await r.pub("s.x", b"body", **headers)
    await r.pub("t.plain", b"plain")
    await r.pub("s.y", Nats_Schedule_Next="purge", Nats_Scheduler="t.plain")
    await r.pub("s.y", Nats_Schedule_Next="purge", Nats_Scheduler="s.y")
    # A TTL-enabled stream takes Nats-Schedule-TTL; a bad value is refused.
    await r.pub("tt.s", Nats_Schedule=later, Nats_Schedule_Target="tt.t", Nats_Schedule_TTL="5s")
    await r.pub("tt.s", Nats_Schedule=later, Nats_Schedule_Target="tt.t", Nats_Schedule_TTL="x")
    await r.pub("tt.s", Nats_Schedule=later, Nats_Schedule_Target="tt.t", Nats_Schedule_TTL="0s")
    # A stream without schedules refuses them, good or bad.
    await r.pub("n.a", Nats_Schedule=later, Nats_Schedule_Target="n.b")
    await r.pub("n.a", Nats_Schedule="@every 1ms", Nats_Schedule_Target="n.b")
    await r.pub("n.a", Nats_Schedule_Time_Zone="Nowhere")
    await r.pub("n.a", Nats_Schedule_Next="purge", Nats_Scheduler="n.b")
    await r.pub("n.a", Nats_Schedule_Next="purge")
    await r.pub("n.a", Nats_Schedule_Target="n.b")
    await r.pub("n.a", Nats_Schedule="")
    # Exact header bytes.
    await r.hpub("s.h", b"NATS/1.0\r\nNats-Schedule:@yearly\r\nNats-Schedule-Target:t.h\r\n\r\n")
    await r.hpub("s.h", b"NATS/1.0\r\nNats-Schedule: @yearly \r\nNats-Schedule-Target: t.h\r\n\r\n")
    await r.hpub("s.h", b"NATS/1.0\r\nnats-schedule: @yearly\r\nNats-Schedule-Target: t.h\r\n\r\n")
    await r.hpub("s.h", b"NATS/1.0\r\nNats-Schedule: @yearly\r\nNats-Rollup: SUB\r\n\r\n")
    await r.hpub(
        "s.h",
        b"NATS/1.0\r\nNats-Schedule: @yearly\r\nNats-Schedule-Target: t.h\r\n"
        b"Nats-Rollup: SUB\r\n\r\n",
    )
    await r.hpub("s.h", b"NATS/1.0\r\nNats-Schedule-Time-Zone:\r\n\r\n")
    await _contents(r, "S")
    # Atomic batches: each message's schedule is checked before any is stored.
    await r.create("B", allow_msg_schedules=True, allow_atomic=True, subjects=["b.>"])
    good = "Nats-Schedule: @yearly\r\nNats-Schedule-Target: b.t"
    for batch, second in (
        ("one", good),
        ("two", "Nats-Schedule: @yearly\r\nNats-Schedule-Target: x"),
    ):
        await r.hpub("b.a", _batch(batch, 1, good), b"1")
        await r.hpub("b.b", _batch(batch, 2, second + "\r\nNats-Batch-Commit: 1"), b"2")
    await _contents(r, "B")
    await _contents(r, "T")
    await _contents(r, "N")


async def test_schedule_publishes_match(tmp_path: Path) -> None:
    await _compare_once(tmp_path, publishes)


# ---------------------------------------------------------------------------- firing


async def firing(r: Run, *, at: str) -> None:
    await r.create("S", allow_msg_schedules=True, allow_msg_ttl=True, subjects=["s.>", "t.>"])
    await r.create("E", allow_msg_schedules=True, subjects=["e.>"])
    await r.create("Z", allow_msg_schedules=True, subjects=["z.>"])
    await r.create("B", allow_msg_schedules=True, allow_atomic=True, subjects=["b.>"])
    await r.pub("s.src", b"sampled", X_From="source", Nats_Msg_Id="src-1", Nats_TTL="1h")
    await r.pub("t.r", b"rolled away")
    await r.pub(
        "s.once",
        b"once",
        Nats_Schedule=at,
        Nats_Schedule_Target="t.once",
        X_Custom="kept",
        Nats_Msg_Id="id-once",
        Nats_Expected_Last_Subject_Sequence="0",
    )
    await r.pub(
        "s.ttl",
        b"ttl",
        Nats_Schedule=at,
        Nats_Schedule_Target="t.ttl",
        Nats_Schedule_TTL="1h",
        Nats_Schedule_Rollup="sub",
    )
    await r.pub(
        "s.sampled",
        b"own",
        Nats_Schedule=at,
        Nats_Schedule_Target="t.sampled",
        Nats_Schedule_Source="s.src",
    )
    await r.pub(
        "s.fallback",
        b"own",
        Nats_Schedule=at,
        Nats_Schedule_Target="t.fallback",
        Nats_Schedule_Source="s.empty",
    )
    await r.pub(
        "s.roll", b"r", Nats_Schedule=at, Nats_Schedule_Target="t.r", Nats_Schedule_Rollup="sub"
    )
    # Repeating schedules, each in a stream of its own (when they fire is timing's).
    await r.pub("e.every", b"tick", Nats_Schedule="@every 1s", Nats_Schedule_Target="e.t")
    await r.pub(
        "z.cron",
        b"cron",
        Nats_Schedule="* * * * * *",
        Nats_Schedule_Target="z.c",
        Nats_Schedule_Time_Zone="Asia/Kolkata",
    )
    # A schedule stored by an atomic batch: its message keeps the batch's headers.
    await r.hpub("b.s", _batch("bb", 1, f"Nats-Schedule: {at}\r\nNats-Schedule-Target: b.t"))
    await r.hpub("b.p", _batch("bb", 2, "Nats-Batch-Commit: 1"), b"plain")
    # Replaced before it fires: the newer schedule on the subject wins (rollup).
    await r.pub("s.replaced", b"old", Nats_Schedule="@yearly", Nats_Schedule_Target="t.old")
    await r.pub("s.replaced", b"new", Nats_Schedule=at, Nats_Schedule_Target="t.new")
    # Cancelled before it fires, by a client's purge.
    await r.pub("s.cancel", b"c", Nats_Schedule=at, Nats_Schedule_Target="t.cancel")
    await r.pub("s.cancelling", Nats_Schedule_Next="purge", Nats_Scheduler="s.cancel")
    await _contents(r, "S")
    for subject in ("t.once", "t.ttl", "t.sampled", "t.fallback", "t.r", "t.new"):
        await _wait_for(r, "S", subject)
    await _wait_for(r, "E", "e.t")
    await _wait_for(r, "Z", "z.c")
    await _wait_for(r, "B", "b.t")
    # The repeating schedules are cancelled once they have fired; their counts are timing's.
    for subject, scheduler in (("e.stop", "e.every"), ("z.stop", "z.cron")):
        stop = {"Nats-Schedule-Next": "purge", "Nats-Scheduler": scheduler}
        await r.nc.request(subject, b"", timeout=5, headers=stop)
    for subject in ("t.once", "t.ttl", "t.sampled", "t.fallback", "t.r", "t.new"):
        r.record(f"last {subject}", await _msg(r, "S", {"last_by_subj": subject}))
    for subject in ("s.once", "s.replaced", "s.cancel", "t.old", "t.cancel"):
        r.record(f"last {subject}", await _msg(r, "S", {"last_by_subj": subject}))
    r.record("first e.t", await _msg(r, "E", {"next_by_subj": "e.t", "seq": 1}))
    r.record("first z.c", await _msg(r, "Z", {"next_by_subj": "z.c", "seq": 1}))
    r.record("last e.every", await _msg(r, "E", {"last_by_subj": "e.every"}))
    await _contents(r, "B")
    r.record("last z.cron", await _msg(r, "Z", {"last_by_subj": "z.cron"}))
    await _contents(r, "S")


async def test_schedules_fire_as_in_nats_server(tmp_path: Path) -> None:
    at = _at(6)

    async def scenario(r: Run) -> None:
        await firing(r, at=at)

    await _compare_once(tmp_path, scenario)


# ---------------------------------------------------------------------------- restarts


async def test_schedules_survive_a_restart_as_in_nats_server(tmp_path: Path) -> None:
    at = _at(6)

    async def before(r: Run) -> None:
        await r.create("S", allow_msg_schedules=True, subjects=["s.>", "t.>"])
        await r.pub("s.once", b"once", Nats_Schedule=at, Nats_Schedule_Target="t.once")
        await r.pub("s.year", b"year", Nats_Schedule="@yearly", Nats_Schedule_Target="t.year")
        await _contents(r, "S")

    async def after(r: Run) -> None:
        await _contents(r, "S")
        await _wait_for(r, "S", "t.once")
        await _contents(r, "S")
        # The yearly schedule is still a schedule: it can be purged.
        await r.pub("s.x", Nats_Schedule_Next="purge", Nats_Scheduler="s.year")
        await r.pub("s.y", Nats_Schedule_Next="purge", Nats_Scheduler="t.once")
        await _contents(r, "S")

    await _compare_across_restarts(tmp_path, [before, after])
