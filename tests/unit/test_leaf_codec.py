"""The leafnode codec (brook/leafnode/codec.py) on the forms nats-server's leafnode.go
sends and reads: LS+/LS- with queue weights, LMSG/HMSG with and without reply and with
the `+`/`|` queue forms, split anywhere, and what it refuses; its fast path for
messages gives what its general path gives."""

from __future__ import annotations

import itertools
from typing import NamedTuple

import pytest

from brook.leafnode import codec
from brook.leafnode.codec import Connect, Err, Info, LeafOp, LeafParser, Simple, Sub, Unsub
from brook.protocol.errors import ProtocolError


class Msg(NamedTuple):
    subject: bytes
    reply: bytes | None
    queues: tuple[bytes, ...]
    header: bytes | None
    payload: bytes


class Collect:
    """A `LeafOpHandler` that keeps what it is handed, in order."""

    def __init__(self) -> None:
        self.ops: list[LeafOp | Msg] = []

    def on_msg(
        self,
        subject: bytes,
        reply: bytes | None,
        queues: tuple[bytes, ...],
        header: bytes | None,
        payload: bytes,
    ) -> None:
        self.ops.append(Msg(subject, reply, queues, header, payload))

    def on_op(self, op: LeafOp) -> None:
        self.ops.append(op)


class Parser:
    """A parser and what it parsed, fed as the tests say."""

    def __init__(self, max_payload: int = 1024) -> None:
        self.handler = Collect()
        self.parser = LeafParser(self.handler, max_control_line=4096, max_payload=max_payload)

    def feed(self, data: bytes) -> list[LeafOp | Msg]:
        """What `data` completed."""
        before = len(self.handler.ops)
        self.parser.feed(data)
        return self.handler.ops[before:]


def parser() -> Parser:
    return Parser()


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
        (b"LMSG a 2\r\nhiXX", "Unknown Protocol Operation"),
        (b"LMSG a 2048\r\n", "Maximum Payload Violation"),
        (b"INFO [1]\r\n", None),
        (b"CONNECT {\r\n", None),
        (b"LS+ " + b"a" * 5000, "maximum control line exceeded"),
        # whole lines too, the fast path's (no queues) and the general path's
        (b"LMSG " + b"a" * 5000 + b" 2\r\nhi\r\n", "maximum control line exceeded"),
        (b"LMSG a | " + b"q " * 2500 + b"2\r\nhi\r\n", "maximum control line exceeded"),
    ],
)
def test_refused(data: bytes, err_text: str | None) -> None:
    with pytest.raises(ProtocolError) as caught:
        parser().feed(data)
    assert caught.value.err_text == err_text


class GeneralLines(LeafParser):
    """A parser that counts the lines its general path reads."""

    lines = 0

    def _line(self, buf: bytes, pos: int, eol: int) -> int:
        self.lines += 1
        return super()._line(buf, pos, eol)


# Messages of every form, with what looks like protocol in bodies, among other operations.
STREAM = (
    b"LMSG a 2\r\nhi\r\n"
    b"LMSG a.b r.1 0\r\n\r\n"
    b"LMSG a 10\r\nLMSG a 2\r\n\r\n"
    b"HMSG a 12 14\r\nNATS/1.0\r\n\r\nhi\r\n"
    b"HMSG a r 12 12\r\nNATS/1.0\r\n\r\n\r\n"
    b"LS+ a q 2\r\nPING\r\n"
    b"LMSG a + r q1 q2 2\r\nhi\r\n"
    b"HMSG a | q 12 14\r\nNATS/1.0\r\n\r\nhi\r\n"
    b"LMSG  a\tr  2\r\nhi\r\n"  # the general path: runs of blanks, a tab
    b"lmsg a 2\r\nhi\r\n"  # the general path
    b"LMSG b 70000\r\n" + b"x" * 70_000 + b"\r\n"
    b"HMSG b 12 70012\r\nNATS/1.0\r\n\r\n" + b"y" * 70_000 + b"\r\n"
    b"LMSG a 2\r\nhi\r\n"
)
FAST = 8  # the messages above the fast path reads when it has them whole


def parse_in(data: bytes, pieces: list[int], max_payload: int = 100_000) -> Parser:
    """`data` fed to a new parser in reads cut at `pieces`."""
    p = Parser(max_payload)
    feed_in(p, data, pieces)
    return p


def feed_in(p: Parser, data: bytes, pieces: list[int]) -> None:
    for start, end in itertools.pairwise([0, *pieces, len(data)]):
        p.feed(data[start:end])


def test_fast_path_reads_what_the_general_path_reads() -> None:
    whole = Parser(100_000)
    whole.parser = GeneralLines(whole.handler, max_control_line=4096, max_payload=100_000)
    whole.feed(STREAM)
    assert isinstance(whole.parser, GeneralLines)
    assert whole.parser.lines == 14 - FAST  # it was used
    # One byte at a time the fast path never has a body whole: the general path reads all.
    bytewise = parse_in(STREAM, list(range(1, len(STREAM))))
    assert whole.handler.ops == bytewise.handler.ops
    assert whole.handler.ops[-3:] == [
        Msg(b"b", None, (), None, b"x" * 70_000),
        Msg(b"b", None, (), b"NATS/1.0\r\n\r\n", b"y" * 70_000),
        Msg(b"a", None, (), None, b"hi"),
    ]
    assert Msg(b"a", b"r", (), None, b"hi") in whole.handler.ops  # the tab-spaced one
    # Split anywhere in two, and in TCP-sized chunks.
    for cut in range(0, len(STREAM), 97):
        assert parse_in(STREAM, [cut]).handler.ops == whole.handler.ops
    assert parse_in(STREAM, list(range(1, len(STREAM), 1460))).handler.ops == whole.handler.ops


@pytest.mark.parametrize(
    ("bad", "err_text"),
    [
        (b"LMSG a 2000\r\n", "Maximum Payload Violation"),
        (b"HMSG a 12 2000\r\n", "Maximum Payload Violation"),
        (b"LMSG a + r q 2000\r\n", "Maximum Payload Violation"),
        (b"HMSG a 20 12\r\n", None),
        (b"LMSG a 2\r\nhiX\r\n", "Unknown Protocol Operation"),
        (b"HMSG a 2 x\r\nhi\r\n", None),
    ],
)
def test_fast_path_refuses_what_the_general_path_refuses(bad: bytes, err_text: str | None) -> None:
    """After good messages in the same read, or split anywhere: the messages before it
    handed over, then the same error."""
    good = b"LMSG a 2\r\nhi\r\nHMSG a 12 14\r\nNATS/1.0\r\n\r\nhi\r\n"
    data = good + bad + b"LMSG a 2\r\nhi\r\n"
    for cut in range(len(data)):
        p = Parser()
        with pytest.raises(ProtocolError) as caught:
            feed_in(p, data, [cut])
        assert caught.value.err_text == err_text
        assert p.handler.ops == [
            Msg(b"a", None, (), None, b"hi"),
            Msg(b"a", None, (), b"NATS/1.0\r\n\r\n", b"hi"),
        ]


def test_large_body_split_across_reads() -> None:
    """A 1 MiB body in TCP-sized reads: one message, its bytes intact."""
    body = bytes(range(256)) * 4096
    data = b"LMSG big r 1048576\r\n" + body + b"\r\nPING\r\n"
    p = parse_in(data, list(range(1, len(data), 65536)), max_payload=1 << 20)
    assert p.handler.ops == [Msg(b"big", b"r", (), None, body), Simple(b"PING")]


def test_handler_replaced_and_parsing_stopped() -> None:
    """The acceptor's hand-over: operations after the switch go to the new handler;
    `stop()` drops the rest of the read."""
    second = Collect()
    p = LeafParser(Collect(), max_control_line=4096, max_payload=1024)

    class Switch(Collect):
        def on_op(self, op: LeafOp) -> None:
            super().on_op(op)
            p.handler = second

    p.handler = Switch()
    p.feed(b"CONNECT {}\r\nLMSG a 2\r\nhi\r\nPING\r\n")
    assert second.ops == [Msg(b"a", None, (), None, b"hi"), Simple(b"PING")]

    class Stop(Collect):
        def on_op(self, op: LeafOp) -> None:
            super().on_op(op)
            p.stop()

    p.handler = stopping = Stop()
    p.feed(b"PING\r\nLMSG a 2\r\nhi\r\nPING\r\n")
    p.feed(b"PING\r\n")
    assert stopping.ops == [Simple(b"PING")]
