"""The leafnode codec (brook/leafnode/codec.py) on the forms nats-server's leafnode.go
sends and reads: LS+/LS- with queue weights, LMSG/HMSG with and without reply and with
the `+`/`|` queue forms, split anywhere, and what it refuses."""

from __future__ import annotations

import pytest

from brook.leafnode import codec
from brook.leafnode.codec import Connect, Err, Info, LeafParser, Msg, Simple, Sub, Unsub
from brook.protocol.errors import ProtocolError


def parser() -> LeafParser:
    return LeafParser(max_control_line=4096, max_payload=1024)


def test_operations() -> None:
    data = (
        b'INFO {"server_id":"X","leafnode_urls":[]} \r\n'
        b'CONNECT {"name":"e"}\r\n'
        b"LS+ foo\r\nLS+ foo.* q 3\r\nLS- foo\r\nLS- foo.* q\r\n"
        b"PING\r\nPONG\r\n+OK\r\n-ERR 'Loop detected'\r\n"
    )
    assert parser().feed(data) == [
        Info({"server_id": "X", "leafnode_urls": []}),
        Connect({"name": "e"}),
        Sub(b"foo", None, 1),
        Sub(b"foo.*", b"q", 3),
        Unsub(b"foo", None),
        Unsub(b"foo.*", b"q"),
        Simple(b"PING"),
        Simple(b"PONG"),
        Simple(b"+OK"),
        Err("Loop detected"),
    ]


@pytest.mark.parametrize(
    ("frame", "expected"),
    [
        (b"LMSG a 2\r\nhi\r\n", Msg(b"a", None, (), None, b"hi")),
        (b"LMSG a r 2\r\nhi\r\n", Msg(b"a", b"r", (), None, b"hi")),
        (b"LMSG a + r q1 q2 2\r\nhi\r\n", Msg(b"a", b"r", (b"q1", b"q2"), None, b"hi")),
        (b"LMSG a | q1 2\r\nhi\r\n", Msg(b"a", None, (b"q1",), None, b"hi")),
        (b"HMSG a 5 7\r\nH\r\n\r\nhi\r\n", Msg(b"a", None, (), b"H\r\n\r\n", b"hi")),
        (b"HMSG a r 5 7\r\nH\r\n\r\nhi\r\n", Msg(b"a", b"r", (), b"H\r\n\r\n", b"hi")),
        (
            b"HMSG a + r q 5 7\r\nH\r\n\r\nhi\r\n",
            Msg(b"a", b"r", (b"q",), b"H\r\n\r\n", b"hi"),
        ),
        (b"HMSG a | q 5 7\r\nH\r\n\r\nhi\r\n", Msg(b"a", None, (b"q",), b"H\r\n\r\n", b"hi")),
    ],
)
def test_messages_round_trip_and_split_anywhere(frame: bytes, expected: Msg) -> None:
    assert (
        codec.message(
            expected.subject,
            expected.reply,
            list(expected.queues),
            expected.header,
            expected.payload,
        )
        == frame
    )
    for cut in range(len(frame)):
        p = parser()
        assert p.feed(frame[:cut]) + p.feed(frame[cut:]) == [expected]


def test_interest_frames() -> None:
    assert codec.sub(b"foo", 1) == b"LS+ foo\r\n"
    assert codec.sub(b"foo bar", 4) == b"LS+ foo bar 4\r\n"
    assert codec.unsub(b"foo bar") == b"LS- foo bar\r\n"


@pytest.mark.parametrize(
    ("data", "err_text"),
    [
        (b"GARBAGE\r\n", "Unknown Protocol Operation"),
        (b"\r\n", "Unknown Protocol Operation"),
        (b"LS+ a b\r\n", None),
        (b"LS+ a q x\r\n", None),
        (b"LMSG a\r\n", None),
        (b"LMSG a x r q 2\r\nhi\r\n", None),
        (b"LMSG a -1\r\n", None),
        (b"HMSG a 5 2\r\nhi\r\n", None),
        (b"LMSG a 2\r\nhiXX", None),
        (b"LMSG a 2048\r\n", "Maximum Payload Violation"),
        (b"INFO [1]\r\n", None),
        (b"CONNECT {\r\n", None),
        (b"LS+ " + b"a" * 5000, "maximum control line exceeded"),
    ],
)
def test_refused(data: bytes, err_text: str | None) -> None:
    with pytest.raises(ProtocolError) as caught:
        parser().feed(data)
    assert caught.value.err_text == err_text
