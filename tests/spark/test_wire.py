"""Header blocks, timestamps, and the two nats-py internals the connector relies on."""

from __future__ import annotations

import datetime as dt
import inspect
from typing import Any

import nats.aio.client
import pytest
from hypothesis import given
from hypothesis import strategies as st

from brook_spark.wire import (
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
    """RawClient overrides `_process_msg` and writes to `_pending`; pinned nats-py 2.16.0."""
    sig = inspect.signature(nats.aio.client.Client._process_msg)
    assert list(sig.parameters) == ["self", "sid", "subject", "reply", "data", "headers"]
    client = nats.aio.client.Client()
    for attr in ("_pending", "_pending_data_size", "_flush_queue", "_max_pending_size"):
        assert hasattr(client, attr), attr
    assert inspect.iscoroutinefunction(nats.aio.client.Client._flush_pending)


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
