"""Header blocks, timestamps, and the two nats-py internals the connector relies on."""

from __future__ import annotations

import asyncio
import datetime as dt
import inspect
from typing import Any

import nats.aio.client
import pytest
from hypothesis import given
from hypothesis import strategies as st

from brook_spark.wire import (
    FrameParser,
    RawClient,
    TimestampParser,
    encode_headers,
    group_headers,
    hpub_frame,
    parse_header_lines,
    parse_status,
)


def test_status_lines() -> None:
    assert parse_status(b"NATS/1.0 404 Message Not Found\r\n\r\n") == (404, "Message Not Found")
    assert parse_status(b"NATS/1.0 204 EOB\r\nNats-Num-Pending: 0\r\n\r\n") == (204, "EOB")
    assert parse_status(b"NATS/1.0 503\r\n\r\n") == (503, "")
    assert parse_status(b"NATS/1.0\r\nA: b\r\n\r\n") is None


def test_repeated_headers_are_kept_and_direct_headers_dropped() -> None:
    block = b"NATS/1.0\r\nK: 1\r\nK: 2\r\nOther:x\r\nNats-Stream: S\r\nNats-Sequence: 3\r\n\r\n"
    pairs = parse_header_lines(block)
    assert pairs == [
        ("K", "1"),
        ("K", "2"),
        ("Other", "x"),
        ("Nats-Stream", "S"),
        ("Nats-Sequence", "3"),
    ]
    assert group_headers(pairs) == [("K", ["1", "2"]), ("Other", ["x"])]


def test_encode_headers_refuses_what_cannot_be_sent() -> None:
    assert encode_headers([("A", "1"), ("A", "2")]) == b"NATS/1.0\r\nA: 1\r\nA: 2\r\n\r\n"
    with pytest.raises(ValueError, match="header name 'a b'"):
        encode_headers([("a b", "x")])
    with pytest.raises(ValueError, match="header name 'a:b'"):
        encode_headers([("a:b", "x")])
    with pytest.raises(ValueError, match="line break"):
        encode_headers([("a", "x\r\nInjected: 1")])
    assert hpub_frame("s", "r", b"H", b"pp") == b"HPUB s r 1 3\r\nHpp\r\n"


@given(
    st.datetimes(min_value=dt.datetime(1971, 1, 1), max_value=dt.datetime(2200, 1, 1)),
    st.integers(0, 999),
)
def test_timestamps_match_datetime(moment: dt.datetime, nanos: int) -> None:
    moment = moment.replace(tzinfo=dt.UTC)
    text = moment.strftime("%Y-%m-%dT%H:%M:%S") + f".{moment.microsecond:06d}{nanos:03d}Z"
    expected = int(moment.timestamp()) * 1_000_000 + moment.microsecond
    assert TimestampParser().micros(text) == expected
    assert (
        TimestampParser().micros(moment.strftime("%Y-%m-%dT%H:%M:%SZ"))
        == expected - moment.microsecond
    )


def test_timestamps_with_an_offset() -> None:
    assert TimestampParser().micros("1970-01-01T01:00:01.5+01:00") == 1_500_000


def test_nats_py_internals_are_where_the_connector_expects_them() -> None:
    """RawClient replaces the parser (`_ps`, whose `parse`/`reset` nats-py calls), hands
    other messages to `_process_msg` and writes to `_pending`; pinned nats-py 2.16.0."""
    sig = inspect.signature(nats.aio.client.Client._process_msg)
    assert list(sig.parameters) == ["self", "sid", "subject", "reply", "data", "headers"]
    client = nats.aio.client.Client()
    for attr in ("_pending", "_pending_data_size", "_flush_queue", "_max_pending_size", "_ps"):
        assert hasattr(client, attr), attr
    assert inspect.iscoroutinefunction(nats.aio.client.Client._flush_pending)
    for name in ("_process_ping", "_process_pong", "_process_info", "_process_err"):
        assert inspect.iscoroutinefunction(getattr(nats.aio.client.Client, name)), name
    assert isinstance(RawClient()._ps, FrameParser)


async def test_raw_subscription_sees_raw_headers(server: Any) -> None:
    client = RawClient()
    await client.connect(server.url, allow_reconnect=False)
    got: list[tuple[bytes, bytes, bytes, bytes | None]] = []
    sub = await client.raw_subscribe("raw.>", lambda *m: got.append(m))
    other = await client.subscribe("plain")  # ordinary subscriptions still work
    client.raw_publish_nowait(
        hpub_frame("raw.a", "rep", encode_headers([("K", "1"), ("K", "2")]), b"x")
    )
    await client.publish("plain", b"y")
    await client.flush()
    assert got == [(b"raw.a", b"rep", b"x", b"NATS/1.0\r\nK: 1\r\nK: 2\r\n\r\n")]
    assert (await other.next_msg(timeout=1)).data == b"y"
    await client.raw_unsubscribe(sub)
    await client.close()


def _mixed_frames() -> list[tuple[str, str, bytes, bytes]]:
    """(subject, reply, header block or b"", payload): small and large, with and without."""
    frames = []
    for i in range(200):
        header = encode_headers([("K", str(i))]) if i % 3 else b""
        size = (0, 1, 100, 40_000, 200_000)[i % 5] if i % 7 == 0 else i
        frames.append((f"raw.{i}", f"rep.{i}" if i % 2 else "", header, bytes([i % 251]) * size))
    return frames


async def test_frame_parser_over_reads_of_any_size_brook(server: Any) -> None:
    await _frames_round_trip(server.url)


async def test_frame_parser_over_reads_of_any_size_nats_server(nats_server_url: str) -> None:
    await _frames_round_trip(nats_server_url)


async def _frames_round_trip(url: str) -> None:
    """Raw frames cut anywhere by the socket's reads (payloads above nats-py's 32 KiB read),
    interleaved with an ordinary subscription's messages and PING/PONG round trips."""
    client = RawClient()
    await client.connect(url, allow_reconnect=False)
    got: list[tuple[bytes, bytes, bytes, bytes | None]] = []
    sub = await client.raw_subscribe("raw.>", lambda *m: got.append(m))
    plain = await client.subscribe("plain")
    frames = _mixed_frames()
    for i, (subject, reply, header, payload) in enumerate(frames):
        if header:
            client.raw_publish_nowait(hpub_frame(subject, reply, header, payload))
        else:
            await client.publish(subject, payload, reply=reply)
        if i % 50 == 0:
            await client.publish("plain", b"%d" % i)
            await client.flush()
    async with asyncio.timeout(10):  # a PING may overtake frames still in nats-py's buffer
        while len(got) < len(frames):
            await client.flush()
    assert got == [(s.encode(), r.encode(), p, h or None) for s, r, h, p in frames]
    assert [(await plain.next_msg(timeout=1)).data for _ in range(4)] == [
        b"0",
        b"50",
        b"100",
        b"150",
    ]
    await client.raw_unsubscribe(sub)
    await client.close()


def test_frame_parser_keeps_a_frame_cut_at_any_byte() -> None:
    """The same byte stream fed whole and in pieces of 1..7 bytes gives the same messages."""
    stream = b"".join(
        b"HMSG %b 9 %b%d %d\r\n%b%b\r\n"
        % (s.encode(), (r + " ").encode() if r else b"", len(h), len(h) + len(p), h, p)
        if h
        else b"MSG %b 9 %b%d\r\n%b\r\n" % (s.encode(), (r + " ").encode() if r else b"", len(p), p)
        for s, r, h, p in _mixed_frames()[:60]
    )
    stream += b"+OK\r\n"

    def feed(step: int) -> list[tuple[bytes, bytes, bytes, bytes | None]]:
        client = RawClient()
        got: list[tuple[bytes, bytes, bytes, bytes | None]] = []
        client._raw_handlers[9] = lambda *m: got.append(m)
        parser = FrameParser(client)

        async def run() -> None:
            for at in range(0, len(stream), step):
                await parser.parse(stream[at : at + step])

        asyncio.run(run())
        return got

    whole = feed(len(stream))
    assert len(whole) == 60
    assert whole[1] == (b"raw.1", b"rep.1", b"\x01", b"NATS/1.0\r\nK: 1\r\n\r\n")
    assert whole[0] == (b"raw.0", b"", b"", None)
    for step in (1, 2, 3, 7, 4096):
        assert feed(step) == whole, step
