"""A sourcing stream's side of its sources (ADR 0020, sources.py): what it stores for a
delivered message, the header bytes recorded from nats-server 2.15.1, dedup, stream info's
`sources`, and where each source resumes after a restart (its headers, newest first, and
the position record that survives a purge); what stays refused with 10052.

The deliveries are handed to the stream's `SourcedStream` as its links hand them (the
links to the empty origins deliver nothing meanwhile), on a real Brook whose stream is
read back by nats-py; tests/conformance/test_sources_conformance.py runs the links
against nats-server.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.aio.client import Client
from nats.js.api import StreamSource

import brook
from brook.jetstream.engine import JetStream
from brook.jetstream.models import parse_stream_config
from brook.jetstream.sources import RECORD_FILE, SourcedStream, decode_record
from brook.jetstream.sourcing import stream_identity
from tests.support.jsapi import request

pytestmark = pytest.mark.timeout(30)

O1_SOURCE = {"name": "O1", "filter_subject": "a.>"}
O2_SOURCE = {"name": "O2", "subject_transforms": [{"src": "b.*", "dest": "bb.{{wildcard(1)}}"}]}
O1_INAME = "O1 a.> >"
O2_INAME = "O2 b.* bb.{{wildcard(1)}}"


def _create(js: JetStream, body: dict[str, Any]) -> None:
    def lookup(name: str) -> Any:
        stream = js.streams.get(name)
        return None if stream is None else stream.config

    js.create(parse_stream_config(body, streams=lookup))


def _sourced(js: JetStream, name: str) -> SourcedStream:
    sourced = js.sourced(name)
    assert sourced is not None
    return sourced


async def _get(nc: Client, stream: str, seq: int) -> tuple[str, bytes, bytes]:
    answer = await request(nc, f"$JS.API.STREAM.MSG.GET.{stream}", {"seq": seq})
    message = answer["message"]
    header = base64.b64decode(message.get("hdrs", ""))
    return message["subject"], header, base64.b64decode(message.get("data", ""))


def _origins(js: JetStream) -> None:
    _create(js, {"name": "O1", "subjects": ["a.>"]})
    _create(js, {"name": "O2", "subjects": ["b.>"]})


@contextlib.asynccontextmanager
async def _sourcing(
    tmp_path: Path, body: dict[str, Any]
) -> AsyncIterator[tuple[JetStream, SourcedStream, str]]:
    """A Brook on `tmp_path` with the origins O1 and O2 and the sourcing stream `body`:
    its JetStream, the stream's `SourcedStream` and the server's URL."""
    async with brook.serve(port=0, store_dir=str(tmp_path)) as server:
        js = server.jetstream
        _origins(js)
        _create(js, body)
        yield js, _sourced(js, body["name"]), server.url


async def test_sourced_messages_take_new_sequences_and_nats_server_s_header(
    tmp_path: Path,
) -> None:
    """The steps of the nats-server probe in ADR 0020: O1's `a.1` carried `Nats-Msg-Id`,
    `Nats-Expected-Stream` and `Foo`; O2's `b.1` and `b.2` go through the transform."""
    body = {"name": "S", "subjects": ["s.>"], "sources": [O1_SOURCE, O2_SOURCE]}
    async with _sourcing(tmp_path, body) as (js, sourced, url):
        o1 = stream_identity(js.get("O1").created_ns)
        o2 = stream_identity(js.get("O2").created_ns)
        header = b"NATS/1.0\r\nNats-Msg-Id: m1\r\nFoo: bar\r\n\r\n"  # as the link hands it
        b_header = b"NATS/1.0\r\nNats-Msg-Id: m1\r\n\r\n"
        assert not sourced.ingest(O2_INAME, "b.1", b_header, b"b-one", 1, o2).error
        assert not sourced.ingest(O2_INAME, "b.2", None, b"b-two", 2, o2).error
        assert not sourced.ingest(O1_INAME, "a.1", header, b"one", 1, o1).error
        nc = await nats.connect(url)
        assert await _get(nc, "S", 1) == (
            "bb.1",
            f"NATS/1.0\r\nNats-Msg-Id: m1\r\nNats-Stream-Source: {O2_INAME.replace(' ', ' 1 ', 1)}"
            f" b.1 {o2}\r\n\r\n".encode(),
            b"b-one",
        )
        assert await _get(nc, "S", 2) == (
            "bb.2",
            f"NATS/1.0\r\nNats-Stream-Source: {O2_INAME.replace(' ', ' 2 ', 1)} b.2 {o2}"
            "\r\n\r\n".encode(),
            b"b-two",
        )
        assert await _get(nc, "S", 3) == (
            "a.1",
            f"NATS/1.0\r\nNats-Msg-Id: m1\r\nFoo: bar\r\nNats-Stream-Source: O1 1 a.> > a.1 {o1}"
            "\r\n\r\n".encode(),
            b"one",
        )
        # No duplicate_window was set: a sourcing stream then has none (nats-server).
        info = await request(nc, "$JS.API.STREAM.INFO.S", {})
        assert "duplicate_window" not in info["config"]
        assert info["state"]["messages"] == 3
        assert info["sources"] == [
            {"name": "O1", "lag": 0, "seq": 1, "active": -1, "filter_subject": "a.>"},
            {
                "name": "O2",
                "lag": 0,
                "seq": 2,
                "active": -1,
                "subject_transforms": [{"src": "b.*", "dest": "bb.{{wildcard(1)}}"}],
            },
        ]
        assert list(info)[-2:] == ["sources", "ts"]
        await nc.close()


async def test_a_daisy_chain_keeps_only_the_last_hop(
    tmp_path: Path,
) -> None:
    async with _sourcing(tmp_path, {"name": "S", "sources": [{"name": "O1"}]}) as (_, sourced, url):
        header = b"NATS/1.0\r\nNats-Stream-Source: X 9 > > x.1\r\nA: 1\r\n\r\n"
        assert not sourced.ingest("O1 > >", "a.1", header, b"x", 3, "").error
        nc = await nats.connect(url)
        _, stored, _ = await _get(nc, "S", 1)
        assert stored == b"NATS/1.0\r\nA: 1\r\nNats-Stream-Source: O1 3 > > a.1\r\n\r\n"
        await nc.close()


async def test_dedup_by_msg_id_when_the_sourcing_stream_has_a_window(tmp_path: Path) -> None:
    sources = [{"name": "O1"}, {"name": "O2"}]
    body = {"name": "D", "sources": sources, "duplicate_window": 60_000_000_000}
    async with _sourcing(tmp_path, body) as (js, sourced, _):
        header = b"NATS/1.0\r\nNats-Msg-Id: same\r\n\r\n"
        first = sourced.ingest("O1 > >", "a.1", header, b"1", 1, "")
        again = sourced.ingest("O2 > >", "b.1", header, b"2", 7, "")
        assert (first.seq, first.duplicate, again.seq, again.duplicate) == (1, False, 1, True)
        assert js.get("D").store.state().messages == 1
        # Only what is stored moves a position (nats-server's store tracks it so).
        assert sourced.positions.positions["O2 > >"].seq == 0


async def test_a_publish_may_not_carry_the_source_header(tmp_path: Path) -> None:
    async with brook.serve(port=0, store_dir=str(tmp_path)) as server:
        nc = await nats.connect(server.url)
        await nc.jetstream().add_stream(name="P", subjects=["p"])
        reply = await nc.request("p", b"x", headers={"Nats-Stream-Source": "X 1 > > p"}, timeout=5)
        assert json.loads(reply.data) == {
            "error": {
                "code": 400,
                "err_code": 10227,
                "description": "message stream source header is not allowed",
            },
            "stream": "P",
            "seq": 0,
        }
        await nc.close()


async def test_a_sourced_ttl_or_rollup_needs_no_permission_of_the_sourcing_stream(
    tmp_path: Path,
) -> None:
    async with _sourcing(tmp_path, {"name": "S", "sources": [{"name": "O1"}]}) as (js, sourced, _):
        ttl = b"NATS/1.0\r\nNats-TTL: 1s\r\n\r\n"
        rollup = b"NATS/1.0\r\nNats-Rollup: sub\r\n\r\n"
        assert not sourced.ingest("O1 > >", "a.1", ttl, b"1", 1, "").error
        assert not sourced.ingest("O1 > >", "a.2", None, b"2", 2, "").error
        assert not sourced.ingest("O1 > >", "a.2", rollup, b"3", 3, "").error
        state = js.get("S").store.state()
        assert (state.messages, state.last_seq) == (2, 3)  # the rollup removed 2


async def test_each_source_resumes_after_a_restart_and_after_a_purge(tmp_path: Path) -> None:
    """The newest header of each source gives its position after a restart; once the
    stream is purged, the position record does."""
    body = {"name": "S", "subjects": ["s.>"], "sources": [O1_SOURCE, O2_SOURCE]}
    async with _sourcing(tmp_path, body) as (_, sourced, url):
        for seq in (3, 5, 8):
            assert not sourced.ingest(O1_INAME, f"a.{seq}", None, b"", seq, "I1").error
        assert not sourced.ingest(O2_INAME, "b.4", None, b"", 4, "I2").error
        nc = await nats.connect(url)
        await nc.jetstream().publish("s.own", b"a publish of its own")
        await nc.close()
    async with brook.serve(port=0, store_dir=str(tmp_path)) as server:
        sourced = _sourced(server.jetstream, "S")
        positions = sourced.positions.positions
        assert (positions[O1_INAME].seq, positions[O1_INAME].ident) == (8, "I1")
        assert (positions[O2_INAME].seq, positions[O2_INAME].ident) == (4, "I2")
        nc = await nats.connect(server.url)
        purged = await request(nc, "$JS.API.STREAM.PURGE.S", {})
        assert purged["purged"] == 5
        # A sourced message after the purge, made durable with its record.
        assert not sourced.ingest(O2_INAME, "b.6", None, b"", 6, "I2").error
        await nc.jetstream().publish("s.own", b"its ack waits for the record")
        await nc.jetstream().purge_stream("S")
        await nc.close()
        _, record = decode_record((tmp_path / "streams" / "S" / RECORD_FILE).read_bytes())
        assert (record[O1_INAME].seq, record[O2_INAME].seq) == (8, 6)
    async with brook.serve(port=0, store_dir=str(tmp_path)) as server:
        positions = _sourced(server.jetstream, "S").positions.positions
        assert positions[O1_INAME].seq == 8
        assert positions[O2_INAME].seq == 6


@pytest.mark.parametrize(
    ("extra", "source", "text"),
    [
        ({}, {"consumer": {"name": "C", "deliver_subject": "d"}}, "source consumer is"),
        ({"allow_msg_counter": True}, {}, "sources into a counter stream are"),
    ],
)
async def test_what_brook_does_not_honour_yet_is_refused(
    tmp_path: Path, extra: dict[str, Any], source: dict[str, Any], text: str
) -> None:
    async with brook.serve(port=0, store_dir=str(tmp_path)) as server:
        nc = await nats.connect(server.url)
        await nc.jetstream().add_stream(name="O1", subjects=["a.>"])
        body = {"name": "S", "subjects": ["s.>"], "sources": [{"name": "O1", **source}], **extra}
        answer = await request(nc, "$JS.API.STREAM.CREATE.S", body)
        assert answer["error"] == {
            "code": 500,
            "err_code": 10052,
            "description": f"{text} not supported by this server",
        }
        assert "S" not in server.jetstream.streams
        await nc.close()


async def test_a_source_from_a_start_time_through_nats_py(tmp_path: Path) -> None:
    """nats.py's own V210FeaturesTest.test_stream_source_opt_start_time, against Brook:
    only what the origin stored from `opt_start_time` on is copied."""
    async with brook.serve(port=0, store_dir=str(tmp_path)) as server:
        nc = await nats.connect(server.url)
        js = nc.jetstream()
        await js.add_stream(name="SOURCE_TIME", subjects=["src.>"])
        await js.publish("src.1", b"before")
        await js.publish("src.2", b"before")
        await asyncio.sleep(0.1)
        midpoint = datetime.datetime.now(datetime.UTC)
        await asyncio.sleep(0.1)
        await js.publish("src.3", b"after")
        await js.publish("src.4", b"after")
        source = StreamSource(name="SOURCE_TIME", opt_start_time=midpoint)
        await js.add_stream(name="DEST_TIME", sources=[source])
        for _ in range(100):
            info = await js.stream_info("DEST_TIME")
            if info.state.messages >= 2:
                break
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.3)
        info = await js.stream_info("DEST_TIME")
        assert info.state.messages == 2
        assert info.config.sources is not None
        assert info.config.sources[0].name == "SOURCE_TIME"
        assert isinstance(info.config.sources[0].opt_start_time, datetime.datetime)
        await nc.close()


async def test_a_message_the_stream_refuses_is_asked_for_again(tmp_path: Path) -> None:
    """A discard-new limit refuses the third message: the source asks for it again (as
    nats-server's `retrySourceConsumerAtSeq`) and stores it once the limit allows, with
    nothing copied twice."""
    async with brook.serve(port=0, store_dir=str(tmp_path)) as server:
        nc = await nats.connect(server.url)
        js = nc.jetstream()
        await js.add_stream(name="O1", subjects=["a.>"])
        for i in range(3):
            await js.publish(f"a.{i}", b"%d" % i)
        body = {"name": "S", "sources": [{"name": "O1"}], "max_msgs": 2, "discard": "new"}
        assert "error" not in await request(nc, "$JS.API.STREAM.CREATE.S", body)
        for _ in range(100):
            if (await js.stream_info("S")).state.messages == 2:
                break
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.5)
        assert (await js.stream_info("S")).state.messages == 2
        update = {**body, "max_msgs": 10}
        assert "error" not in await request(nc, "$JS.API.STREAM.UPDATE.S", update)
        for _ in range(200):
            if (await js.stream_info("S")).state.messages == 3:
                break
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.5)
        subjects = [(await _get(nc, "S", seq))[0] for seq in (1, 2, 3)]
        assert subjects == ["a.0", "a.1", "a.2"]
        assert (await js.stream_info("S")).state.messages == 3
        await nc.close()
