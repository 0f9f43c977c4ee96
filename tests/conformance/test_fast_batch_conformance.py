"""Fast batch publishes (`allow_batched`, the `.$FI` reply subjects of ADR-50's fast
ingest) side by side: nats-server 2.15.1 and Brook, everything each server sends to the
publisher's inbox compared as bytes (flow acks, gaps, errors, PubAcks, in order), with
the stream configs, infos and stored messages, and the same after a restart.

A step publishes one or more messages and then records whatever arrives on the inbox
until it has been quiet for a while (a fast batch answers some messages with nothing).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.conformance.test_counters_conformance import Run, _compare_across_restarts

pytestmark = [pytest.mark.conformance, pytest.mark.timeout(120)]

_QUIET_S = 0.3
START, APPEND, COMMIT, EOB, PING = range(5)


def _reply(batch: str, seq: int, op: int, *, flow: int = 0, gap: str = "fail") -> str:
    return f"fi.{batch}.{flow}.{gap}.{seq}.{op}.$FI"


async def _step(r: Run, label: str, *pubs: tuple[str, str, dict[str, str] | None]) -> None:
    """Publish (subject, reply, headers) in order; record what the inbox got."""
    sub = await r.nc.subscribe("fi.>")
    await r.nc.flush()
    for subject, reply, headers in pubs:
        await r.nc.publish(subject, subject.encode(), reply=reply, headers=headers)
    got: list[Any] = []
    while True:
        try:
            msg = await sub.next_msg(timeout=_QUIET_S)
        except TimeoutError:
            break
        got.append((msg.subject, msg.data))
    await sub.unsubscribe()
    r.record(label, got)


def _batch(
    batch: str, n: int, *, last: int = COMMIT, flow: int = 0, gap: str = "fail"
) -> list[tuple[str, str, dict[str, str] | None]]:
    """Messages 1..n of a batch on `f.<batch>`, the last one ending it with `last`."""
    pubs: list[tuple[str, str, dict[str, str] | None]] = []
    for seq in range(1, n + 1):
        op = START if seq == 1 else APPEND
        if seq == n:
            op = last
        pubs.append((f"f.{batch}", _reply(batch, seq, op, flow=flow, gap=gap), None))
    return pubs


async def configs(r: Run) -> None:
    for config in ({"allow_batched": True, "storage": "memory"}, {"allow_batched": "yes"}):
        reply = await r.create("CFG", **config)
        if "error" not in reply:
            await r.api("$JS.API.STREAM.DELETE.CFG")
    await r.create("F", allow_batched=True, allow_direct=True)
    await r.create("P")
    await r.update("P", allow_batched=True)
    await r.update("P", allow_batched=False)


async def batches(r: Run) -> None:
    await configs(r)
    # Refused: not enabled, patterns nats-server does not take, a long id, an unknown batch.
    await _step(r, "disabled", ("p.x", _reply("a", 1, START), None))
    for bad in (
        _reply("a", 0, START),
        _reply("a", 1, EOB),
        _reply("a", 2, START),
        _reply("a", 1, APPEND),
        _reply("a", 1, START, gap="maybe"),
        _reply("a", 1, 5),
        "fi.a.1.0.$FI",
        "fi.1.0.$FI",
        _reply("i" * 65, 1, START),
        _reply("unknown", 2, APPEND),
    ):
        await _step(r, f"refused {bad}", ("f.x", bad, None))
    # A batch of one, committed at once; batches with flow acks (a flow of 0 is 10).
    await _step(r, "one", *_batch("one", 1))
    await _step(r, "flow 0", *_batch("twentyfive", 25))
    await _step(r, "flow 3 eob", *_batch("three", 8, last=EOB, flow=3))
    # Two batches at once share the acks: the second starts at 1 and grows.
    pairs = zip(_batch("x", 12, flow=100), _batch("y", 12, flow=100), strict=True)
    both = [m for pair in pairs for m in pair]
    await _step(r, "two at once", *both)
    # Gaps: mode fail ends the batch (what came before is committed), mode ok goes on.
    await _step(
        r, "gap fail", *_batch("gf", 2, last=APPEND), ("f.gf", _reply("gf", 4, APPEND), None)
    )
    await _step(r, "after a gap fail", ("f.gf", _reply("gf", 5, APPEND), None))
    await _step(
        r,
        "gap ok",
        *_batch("go", 1, last=START, gap="ok"),
        ("f.go", _reply("go", 3, APPEND, gap="ok"), None),
        ("f.go", _reply("go", 2, APPEND, gap="ok"), None),  # backwards: ends it
    )
    await _step(
        r,
        "gap ok eob",
        *_batch("ge", 1, last=START, gap="ok"),
        ("f.ge", _reply("ge", 4, APPEND, gap="ok"), None),
        ("f.ge", _reply("ge", 5, EOB, gap="ok"), None),
    )
    # Pings: the last flow ack again; a gap (ends the batch in mode fail).
    await _step(
        r, "ping", *_batch("pg", 3, last=APPEND, flow=2), ("f.pg", _reply("pg", 3, PING), None)
    )
    await _step(r, "ping gap", ("f.pg", _reply("pg", 6, PING), None))
    await _step(
        r,
        "ping gap ok",
        *_batch("po", 2, last=APPEND, gap="ok"),
        ("f.po", _reply("po", 5, PING, gap="ok"), None),
        ("f.po", _reply("po", 6, COMMIT, gap="ok"), None),
    )
    # Errors: the first message's is a plain PubAck; later ones end a batch in mode fail,
    # and are reported while the batch goes on in mode ok.
    other = {"Nats-Expected-Stream": "OTHER"}
    await _step(r, "first fails", ("f.e1", _reply("e1", 1, START), other))
    await _step(
        r,
        "second fails",
        *_batch("e2", 1, last=START),
        ("f.e2", _reply("e2", 2, APPEND), other),
        ("f.e2", _reply("e2", 3, COMMIT), None),
    )
    await _step(
        r,
        "fails in gap ok",
        *_batch("e3", 1, last=START, gap="ok"),
        ("f.e3", _reply("e3", 2, APPEND, gap="ok"), other),
        ("f.e3", _reply("e3", 3, APPEND, gap="ok"), None),
        ("f.e3", _reply("e3", 4, COMMIT, gap="ok"), None),
    )
    # Duplicates (Nats-Msg-Id) are skipped; a first message that is one and commits.
    await r.pub("f.d", b"plain", Nats_Msg_Id="m1")
    await _step(
        r,
        "duplicate",
        ("f.d", _reply("d1", 1, START), {"Nats-Msg-Id": "m1"}),
        ("f.d", _reply("d1", 2, COMMIT), None),
    )
    await _step(r, "duplicate commit", ("f.d", _reply("d2", 1, COMMIT), {"Nats-Msg-Id": "m1"}))
    # Batch headers in a fast batch's message are stored as they are.
    atomic = {"Nats-Batch-Id": "z", "Nats-Batch-Sequence": "1"}
    await _step(r, "batch headers", ("f.h", _reply("h", 1, COMMIT), atomic))
    await after(r)


async def after(r: Run) -> None:
    await r.info("F")
    for subject in (
        "f.one",
        "f.twentyfive",
        "f.three",
        "f.gf",
        "f.go",
        "f.e2",
        "f.e3",
        "f.d",
        "f.h",
    ):
        await r.stored("F", subject)


async def test_fast_batches_match_across_a_restart(tmp_path: Path) -> None:
    await _compare_across_restarts(tmp_path, [batches, after])
