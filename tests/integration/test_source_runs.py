"""A source's run stored in one pass (stream_sourced.py, ADR 0049): what it could get
wrong against storing one message at a time.

`SourcedStream.ingest_run` is given runs as a source's link gives them, on a real Brook
whose stores are then read back: the same deliveries stored one at a time by the single
path (`Stream.ingest_sourced`, with the header and subject `ingest_run` makes) into a
twin stream give the same messages, sequences, ids and positions; a duplicate
`Nats-Msg-Id` in the middle of a run (of a message before it in the run, and of one stored
before) is not stored; a run that meets `max_msgs` under `discard: new` stops at the
message refused, with the single path's error, and the source resumes from there (through
its link, from an origin of nats-py's publishes). tests/conformance/test_source_runs_
conformance.py compares catch-up runs with nats-server.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import nats
import pytest

import brook
from brook.jetstream.engine import JetStream
from brook.jetstream.models import parse_stream_config
from brook.jetstream.sources import SourcedStream, SourceItem
from brook.jetstream.sourcing import source_header_at, sourced_header
from tests.support.jsapi import request

pytestmark = pytest.mark.timeout(60)

INAME = "O > >"
IDENT = "ID1"
WINDOW = {"duplicate_window": 60_000_000_000}


def _create(js: JetStream, body: dict[str, Any]) -> None:
    def lookup(name: str) -> Any:
        stream = js.streams.get(name)
        return None if stream is None else stream.config

    js.create(parse_stream_config(body, streams=lookup))


@contextlib.asynccontextmanager
async def _server(tmp_path: Path, *bodies: dict[str, Any]) -> AsyncIterator[JetStream]:
    """A Brook with an origin O (empty: its links deliver nothing) and streams `bodies`."""
    async with brook.serve(port=0, store_dir=str(tmp_path)) as server:
        js = server.jetstream
        _create(js, {"name": "O", "subjects": ["a.>", "b.>"]})
        for body in bodies:
            _create(js, body)
        yield js


def _sourced(js: JetStream, name: str) -> SourcedStream:
    sourced = js.sourced(name)
    assert sourced is not None
    return sourced


def _one_by_one(sourced: SourcedStream, items: list[SourceItem]) -> list[tuple[int, bool, Any]]:
    """`items` stored by the single path, one message after the other, as sources did
    before runs: (seq, duplicate, error code) of each, up to the first refused."""
    out: list[tuple[int, bool, Any]] = []
    for seq, subject, header, data in items:
        value = source_header_at(INAME, str(seq), subject, IDENT)
        result = sourced.stream.ingest_sourced(subject, sourced_header(header, value), data)
        out.append((result.seq, result.duplicate, result.error and result.error.err_code))
        if result.error is not None:
            break
        if not result.duplicate:
            sourced.positions.stored(INAME, seq, IDENT)
    return out


def _contents(js: JetStream, name: str) -> list[tuple[int, str, bytes | None, bytes]]:
    store = js.get(name).store
    state = store.state()
    out = []
    for seq in range(state.first_seq, state.last_seq + 1):
        m = store.load(seq)
        if m is not None:
            out.append((m.seq, m.subject, m.header, m.data))
    return out


def _id(value: str) -> bytes:
    return b"NATS/1.0\r\nNats-Msg-Id: %b\r\n\r\n" % value.encode()


async def test_a_run_with_duplicate_msg_ids_in_the_middle_is_stored_as_one_by_one(
    tmp_path: Path,
) -> None:
    """Ids repeated within the run and of a message stored before it; a header the run
    cannot take as it is (a TTL) and one it can (another header, a daisy chain's source
    line) between them; the last message a duplicate, so the position stays at the
    last stored."""
    body = {**WINDOW, "sources": [{"name": "O"}]}
    async with _server(tmp_path, {"name": "R", **body}, {"name": "T", **body}) as js:
        items: list[SourceItem] = [
            (2, "a.2", _id("x"), b"2"),
            (3, "a.3", None, b"3"),
            (5, "a.5", _id("x"), b"5 dup of 2, in the run"),
            (6, "a.6", _id("before"), b"6 dup of one stored before the run"),
            (7, "b.7", b"NATS/1.0\r\nNats-TTL: 1h\r\nNats-Msg-Id: t\r\n\r\n", b"7 TTL"),
            (8, "b.8", b"NATS/1.0\r\nFoo: bar\r\nNats-Stream-Source: X 1 > > x\r\n\r\n", b"8"),
            (9, "a.9", _id("t"), b"9 dup of the TTL one"),
            (10, "a.10", _id("y"), b"10"),
            (11, "a.11", _id("y"), b"11 dup, last"),
        ]
        before: SourceItem = (1, "a.1", _id("before"), b"1")
        run_side, one_side = _sourced(js, "R"), _sourced(js, "T")
        assert not run_side.ingest_run(INAME, [before], IDENT).error
        assert _one_by_one(one_side, [before]) == [(1, False, None)]
        done = run_side.ingest_run(INAME, items, IDENT)
        singles = _one_by_one(one_side, items)
        duplicates = [s[1] for s in singles]
        assert duplicates == [False, False, True, True, False, False, True, False, True]
        assert (done.taken, done.stored, done.error) == (9, 8, None)
        assert done.kept == [("a.2", 2), ("a.3", 3), ("b.7", 4), ("b.8", 5), ("a.10", 6)]
        assert done.last is not None
        assert (done.last.seq, done.last.duplicate) == (6, True)
        ran, one = _contents(js, "R"), _contents(js, "T")
        assert ran == one
        assert [m[3] for m in ran] == [b"1", b"2", b"3", b"7 TTL", b"8", b"10"]
        assert ran[4][2] == b"NATS/1.0\r\nFoo: bar\r\nNats-Stream-Source: O 8 > > b.8 ID1\r\n\r\n"
        assert run_side.positions.positions[INAME].seq == 10  # 11 was a duplicate
        assert one_side.positions.positions[INAME].seq == 10
        # The ids are remembered as by the single path: each one again is a duplicate.
        again: list[SourceItem] = [(20 + i, "a.x", _id(v), b"") for i, v in enumerate("xty")]
        done = run_side.ingest_run(INAME, again, IDENT)
        assert (done.taken, done.stored, done.kept) == (3, 0, [])
        assert js.get("R").expiry.next_wakeup_ns is None  # no TTL permission: none armed


@pytest.mark.parametrize(
    ("limit", "error"),
    [
        ({"max_msgs": 4}, "maximum messages exceeded"),
        ({"max_bytes": 300}, "maximum bytes exceeded"),  # about 90 bytes each
    ],
)
async def test_a_run_meeting_a_discard_new_limit_stops_at_the_message_refused(
    tmp_path: Path, limit: dict[str, int], error: str
) -> None:
    limits = {"sources": [{"name": "O"}], "discard": "new", **limit}
    async with _server(tmp_path, {"name": "R", **limits}, {"name": "T", **limits}) as js:
        items: list[SourceItem] = [(s, f"a.{s}", None, b"%d" % s) for s in range(1, 7)]
        done = _sourced(js, "R").ingest_run(INAME, items, IDENT)
        singles = _one_by_one(_sourced(js, "T"), items)
        assert singles[-1] == (0, False, 10077)
        assert done.error is not None
        assert (done.error.err_code, done.error.description) == (10077, error)
        stored = _contents(js, "R")
        assert stored == _contents(js, "T")
        assert 0 < len(stored) == done.taken == done.stored == len(singles) - 1 < 6
        assert [m[3] for m in stored] == [b"%d" % s for s in range(1, len(stored) + 1)]
        assert _sourced(js, "R").positions.positions[INAME].seq == len(stored)


async def test_a_stream_over_its_discard_new_limit_stores_nothing_of_a_run(
    tmp_path: Path,
) -> None:
    """Lowered below what it holds (discard new removes nothing), max_msgs refuses
    every message of the next run, its first included."""
    body = {"name": "R", "sources": [{"name": "O"}], "discard": "new", "max_msgs": 10}
    async with _server(tmp_path, body) as js:
        sourced = _sourced(js, "R")
        items: list[SourceItem] = [(s, f"a.{s}", None, b"%d" % s) for s in range(1, 13)]
        assert not sourced.ingest_run(INAME, items[:6], IDENT).error
        js.update(parse_stream_config({**body, "max_msgs": 4}))
        done = sourced.ingest_run(INAME, items[6:], IDENT)
        assert done.error is not None
        assert (done.taken, done.stored, done.kept, done.error.err_code) == (0, 0, [], 10077)
        assert len(_contents(js, "R")) == 6
        assert sourced.positions.positions[INAME].seq == 6


async def test_the_source_resumes_at_the_message_max_msgs_refused(tmp_path: Path) -> None:
    """Through the link: an origin of 600 messages (runs of up to 256), a source whose
    `max_msgs` under `discard: new` takes 250; raised, the rest come, none twice and
    none missing, in the origin's order."""
    async with brook.serve(port=0, store_dir=str(tmp_path)) as server:
        nc = await nats.connect(server.url)
        js = nc.jetstream()
        await js.add_stream(name="O", subjects=["a.>"])
        acks = [js.publish(f"a.{i % 7}", b"%d" % i) for i in range(600)]
        await asyncio.gather(*acks)
        body = {"name": "S", "sources": [{"name": "O"}], "max_msgs": 250, "discard": "new"}
        assert "error" not in await request(nc, "$JS.API.STREAM.CREATE.S", body)
        await _wait_for(nc, 250)
        await asyncio.sleep(0.5)  # the source asks again, and is refused again
        assert (await js.stream_info("S")).state.messages == 250
        update = {**body, "max_msgs": 1000}
        assert "error" not in await request(nc, "$JS.API.STREAM.UPDATE.S", update)
        await _wait_for(nc, 600)
        await asyncio.sleep(0.3)
        info = await js.stream_info("S")
        assert (info.state.messages, info.state.last_seq) == (600, 600)
        sub = await js.subscribe("a.>", stream="S", ordered_consumer=True)
        for seq in range(1, 601):
            msg = await sub.next_msg(timeout=5)
            source = (msg.headers or {})["Nats-Stream-Source"].split(" ")
            assert (msg.metadata.sequence.stream, int(source[1]), msg.data) == (
                seq,
                seq,
                b"%d" % (seq - 1),
            )
        await nc.close()


async def _wait_for(nc: Any, messages: int) -> None:
    info: dict[str, Any] = {}
    for _ in range(400):
        info = await request(nc, "$JS.API.STREAM.INFO.S")
        if info["state"]["messages"] >= messages:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"S did not reach {messages}: {json.dumps(info)[:400]}")
