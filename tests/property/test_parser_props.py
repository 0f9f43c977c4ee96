"""ClientParser properties: splitting never changes the result; no input escapes as a crash.

(a) A stream of valid operations gives the same callbacks however it is split (and however
    often the handler pauses the parser).
(b) Arbitrary bytes, grammar-shaped garbage and mutated valid streams, split anywhere, give
    only callbacks or ProtocolError — never another exception — and the bytes the parser
    keeps stay bounded by the limits.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from brook.protocol import encoder
from brook.protocol.errors import ProtocolError
from brook.protocol.parser import ClientParser

MAX_PAYLOAD = 512
MAX_CONTROL_LINE = 256
# Hostile input also runs with a long control line: some failures (deep JSON nesting in
# CONNECT) need one.
LONG_CONTROL_LINE = 32 * 1024
LIMITS = st.sampled_from([(MAX_CONTROL_LINE, MAX_PAYLOAD), (LONG_CONTROL_LINE, 65536)])
SLACK = 32  # a partial line's op word, blank and trailing CR; a pending payload's CR


def buffer_bound(parser: ClientParser) -> int:
    return parser.max_control_line + parser.max_payload + SLACK


SETTINGS = settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

Op = tuple[Any, ...]


class Recorder:
    def __init__(self, pauses: list[bool] | None = None) -> None:
        self.ops: list[Op] = []
        self.parser: ClientParser | None = None
        self._pauses = pauses or []

    def _record(self, op: Op) -> None:
        self.ops.append(op)
        if self._pauses and self._pauses[(len(self.ops) - 1) % len(self._pauses)]:
            assert self.parser is not None
            self.parser.paused = True

    def on_connect(self, options: dict[str, Any]) -> None:
        assert isinstance(options, dict)
        self._record(("connect", options))

    def on_pub(
        self, subject: bytes, reply: bytes | None, header: bytes | None, payload: bytes
    ) -> None:
        assert isinstance(subject, bytes)
        assert subject
        assert reply is None or (isinstance(reply, bytes) and reply)
        assert header is None or (isinstance(header, bytes) and header)
        assert isinstance(payload, bytes)
        assert self.parser is not None
        assert len(payload) + len(header or b"") <= self.parser.max_payload
        self._record(("pub", subject, reply, header, payload))

    def on_pub_run(self, subjects: list[bytes], payload: bytes) -> None:
        for subject in subjects:
            self.on_pub(subject, None, None, payload)

    def on_sub(self, subject: bytes, queue: bytes | None, sid: bytes) -> None:
        assert subject
        assert sid
        assert queue is None or queue
        self._record(("sub", subject, queue, sid))

    def on_unsub(self, sid: bytes, max_msgs: int | None) -> None:
        assert sid
        assert max_msgs is None or max_msgs >= 0
        self._record(("unsub", sid, max_msgs))

    def on_ping(self) -> None:
        self._record(("ping",))

    def on_pong(self) -> None:
        self._record(("pong",))


def new_parser(
    pauses: list[bool] | None = None, limits: tuple[int, int] = (MAX_CONTROL_LINE, MAX_PAYLOAD)
) -> tuple[ClientParser, Recorder]:
    rec = Recorder(pauses)
    parser = ClientParser(
        rec, max_control_line=limits[0], max_payload=limits[1], run_prefixes=(b"$JS.ACK.",)
    )
    rec.parser = parser
    return parser, rec


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({min(c, len(data)) for c in cuts})
    chunks, start = [], 0
    for p in points:
        chunks.append(data[start:p])
        start = p
    chunks.append(data[start:])
    return chunks


# ---------------------------------------------------------------------------- valid streams

_BLANKS = bytes.maketrans(b" \t\r\n\x0b\x0c", b"______")

# Tokens: any bytes but the argument separators, so also non-ASCII and control bytes.
token = st.one_of(
    st.sampled_from([b"foo", b"foo.bar", b"*", b">", b"foo.*.>", b"_INBOX.x1", b"$JS.API.>"]),
    st.binary(min_size=1, max_size=12).map(lambda b: b.translate(_BLANKS)),
)
maybe_token = st.none() | token
body = st.binary(max_size=160) | st.sampled_from([b"", b"\r\n", b"PING\r\n", b"PUB x 1\r\n"])
json_value = st.none() | st.booleans() | st.integers() | st.text(max_size=10)
options = st.dictionaries(st.text(max_size=8), json_value, max_size=5)


@st.composite
def valid_op(draw: st.DrawFn) -> tuple[bytes, Op | None]:
    """One encoded operation and the callback it must produce (None: ignored)."""
    kinds = ["connect", "pub", "ack", "hpub", "sub", "unsub", "ping", "pong", "info"]
    kind = draw(st.sampled_from(kinds))
    if kind in ("connect", "info"):
        opts = draw(options)
        encode = encoder.connect if kind == "connect" else encoder.info
        while len(encode(opts)) > MAX_CONTROL_LINE:  # JSON escapes make the line grow
            opts.popitem()
        return encode(opts), ("connect", opts) if kind == "connect" else None
    if kind == "pub":
        subject, reply, payload = draw(token), draw(maybe_token), draw(body)
        return encoder.pub(subject, payload, reply), ("pub", subject, reply, None, payload)
    if kind == "ack":  # what the parser hands over in runs (`on_pub_run`), and others alike
        subject = b"$JS.ACK." + draw(token)
        payload = draw(st.sampled_from([b"+ACK", b"+ACK", b"", b"", b"-NAK", b"+AC"]) | body)
        reply = draw(st.none() | st.none() | token)
        return encoder.pub(subject, payload, reply), ("pub", subject, reply, None, payload)
    if kind == "hpub":
        subject, reply = draw(token), draw(maybe_token)
        header, payload = draw(body), draw(body)
        expected_header = header or None  # a zero-length header is no header
        return (
            encoder.hpub(subject, header, payload, reply),
            ("pub", subject, reply, expected_header, payload),
        )
    if kind == "sub":
        subject, queue, sid = draw(token), draw(maybe_token), draw(token)
        return encoder.sub(subject, sid, queue), ("sub", subject, queue, sid)
    if kind == "unsub":
        sid = draw(token)
        max_msgs = draw(st.none() | st.integers(0, 999_999_999))  # nats-server: 9 digits
        return encoder.unsub(sid, max_msgs), ("unsub", sid, max_msgs)
    if kind == "ping":
        return encoder.PING, ("ping",)
    assert kind == "pong"
    return encoder.PONG, ("pong",)


@st.composite
def restyled_op(draw: st.DrawFn) -> tuple[bytes, Op | None]:
    """A valid operation with the framing liberties the protocol allows."""
    frame, expected = draw(valid_op())
    line_end = frame.index(b"\r\n")
    line, rest = frame[:line_end], frame[line_end + 2 :]
    op, _, args = line.partition(b" ")
    if draw(st.booleans()):
        op = bytes(c ^ 0x20 if draw(st.booleans()) and chr(c).isalpha() else c for c in op)
    if args and draw(st.booleans()) and not line.startswith((b"CONNECT", b"INFO")):
        blanks = st.sampled_from([b" ", b"\t", b"  ", b" \t "])
        args = draw(blanks).join(args.split(b" ")) + draw(st.sampled_from([b"", b" ", b"\t"]))
        line = op + draw(blanks) + args
    else:
        line = op + (b" " + args if args else b"")
    eol = draw(st.sampled_from([b"\r\n", b"\n"]))
    return line + eol + rest, expected


valid_stream = st.lists(valid_op() | restyled_op(), max_size=25)


@SETTINGS
@given(ops=valid_stream, data=st.data())
def test_split_stream_gives_the_same_operations(
    ops: list[tuple[bytes, Op | None]], data: st.DataObject
) -> None:
    stream = b"".join(frame for frame, _ in ops)
    expected = [op for _, op in ops if op is not None]

    parser, rec = new_parser()
    parser.feed(stream)
    assert rec.ops == expected
    assert parser.buffered_bytes == 0

    cuts = data.draw(st.lists(st.integers(0, len(stream)), max_size=40), label="cuts")
    parser, rec = new_parser()
    for chunk in split(stream, cuts):
        parser.feed(chunk)
        assert parser.buffered_bytes <= buffer_bound(parser)
    assert rec.ops == expected
    assert parser.buffered_bytes == 0


@SETTINGS
@given(ops=valid_stream, data=st.data())
def test_one_byte_at_a_time_gives_the_same_operations(
    ops: list[tuple[bytes, Op | None]], data: st.DataObject
) -> None:
    stream = b"".join(frame for frame, _ in ops)
    parser, rec = new_parser()
    for i in range(len(stream)):
        parser.feed(stream[i : i + 1])
    assert rec.ops == [op for _, op in ops if op is not None]


@SETTINGS
@given(ops=valid_stream, pauses=st.lists(st.booleans(), min_size=1, max_size=8), data=st.data())
def test_pausing_anywhere_keeps_the_operations_in_order(
    ops: list[tuple[bytes, Op | None]], pauses: list[bool], data: st.DataObject
) -> None:
    stream = b"".join(frame for frame, _ in ops)
    cuts = data.draw(st.lists(st.integers(0, len(stream)), max_size=20), label="cuts")
    parser, rec = new_parser(pauses)
    for chunk in split(stream, cuts):
        parser.feed(chunk)
        while parser.paused:  # the connection resumes before it reads again
            parser.resume()
    assert rec.ops == [op for _, op in ops if op is not None]
    assert parser.buffered_bytes == 0


# ---------------------------------------------------------------------------- hostile input

FRAGMENTS = [
    b"PUB", b"HPUB", b"SUB", b"UNSUB", b"PING", b"PONG", b"CONNECT", b"INFO", b"+OK", b"-ERR",
    b"pub", b"MSG", b" ", b"\t", b"  ", b"\r\n", b"\n", b"\r", b"\r\r\n", b"\x0b", b"\x0c",
    b"0", b"1", b"5", b"12", b"512", b"513", b"-1", b"99999999999999999999", b"1e3",
    b"000000002", b"0000000002", b"0000000000",
    b"\xef\xbc\x91", b"$JS.ACK.", b"$JS.ACK.S.C.1.2.3.4.5", b"4", b"+ACK",
    b"foo", b"foo.bar", b"*", b">", b"{", b"}", b"[" * 50, b"{}", b'{"verbose":false}',
    b'"', b"null", b"\x00", b"\xff", b"x" * 300, b"PINGX", b"pongpong", b"PING" + b"x" * 260,
]  # fmt: skip

garbage = st.lists(st.sampled_from(FRAGMENTS) | st.binary(max_size=8), max_size=60).map(b"".join)

ODD_ARGS = [
    b"-1", b"x", b"0", b"3", b"512", b"513", b"999999999", b"1234567890", b"1e3", b"+1",
    b"000000003", b"0000000003", b"0000000000",
    b"\xef\xbc\x91", b"{}", b"null", b"[]", b'{"a":', b"[" * 250, b"[" * 3000, b'"\xff"',
]  # fmt: skip


# Arities around the legal ones, so a single malformed argument is often what fails.
ARITIES = {
    b"PUB": (1, 2, 3, 4), b"HPUB": (2, 3, 4, 5), b"SUB": (1, 2, 3, 4), b"UNSUB": (0, 1, 2, 3),
    b"CONNECT": (0, 1, 2), b"INFO": (0, 1, 2), b"-ERR": (0, 1), b"PING": (0, 1),
    b"PONG": (0, 2), b"+OK": (0, 1), b"pub": (2,), b"PINGX": (0, 1), b"MSG": (3,),
}  # fmt: skip


@st.composite
def token_soup_line(draw: st.DrawFn) -> bytes:
    """A real op word with plausible, often malformed, arguments."""
    op = draw(st.sampled_from(sorted(ARITIES)))
    arity = draw(st.sampled_from(ARITIES[op]))
    args = draw(st.lists(token | st.sampled_from(ODD_ARGS), min_size=arity, max_size=arity))
    blank = draw(st.sampled_from([b" ", b"\t", b"  "]))
    tail = draw(st.sampled_from([b"\r\n", b"\n", b" \r\n", b"", b"\r\nabc\r\n"]))
    return blank.join([op, *args]) + tail


@st.composite
def deep_json_line(draw: st.DrawFn) -> bytes:
    """CONNECT or INFO with JSON nested deeper than Python's recursion limit allows.

    Deeper than 1000 (the default limit) is not enough here: Hypothesis raises the limit to
    the current depth + 2000 while a test runs.
    """
    opener = draw(st.sampled_from([b"[", b'{"a":', b"[{},"]))
    nested = opener * draw(st.integers(4000, 6000))
    return draw(st.sampled_from([b"CONNECT ", b"INFO "])) + nested + b"\r\n"


token_soup = st.lists(
    token_soup_line() | deep_json_line() | valid_op().map(lambda t: t[0]), max_size=12
).map(b"".join)


@st.composite
def mutated_stream(draw: st.DrawFn) -> bytes:
    stream = bytearray(b"".join(frame for frame, _ in draw(valid_stream)))
    for _ in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["flip", "insert", "delete", "truncate", "duplicate"]))
        at = draw(st.integers(0, len(stream)))
        if kind == "flip" and at < len(stream):
            stream[at] ^= 1 << draw(st.integers(0, 7))
        elif kind == "insert":
            stream[at:at] = draw(st.sampled_from(FRAGMENTS) | st.binary(min_size=1, max_size=8))
        elif kind == "delete":
            del stream[at : at + draw(st.integers(1, 8))]
        elif kind == "truncate":
            del stream[at:]
        elif kind == "duplicate":
            stream[at:at] = stream[at : at + draw(st.integers(1, 64))]
    return bytes(stream)


hostile = st.binary(max_size=2048) | garbage | token_soup | mutated_stream()


def feed_all(chunks: list[bytes], limits: tuple[int, int]) -> None:
    """Feed every chunk, continuing after errors (the parser resets after one)."""
    parser, _ = new_parser(limits=limits)
    for chunk in chunks:
        error: ProtocolError | None = None
        try:
            parser.feed(chunk)
        except ProtocolError as exc:
            error = exc
        if error is not None:
            assert error.reason
            assert parser.buffered_bytes == 0  # reset after an error
        assert parser.buffered_bytes <= buffer_bound(parser)


def outcome(
    chunks: list[bytes], limits: tuple[int, int] = (MAX_CONTROL_LINE, MAX_PAYLOAD)
) -> tuple[list[Op], str | bool | None]:
    """Callbacks up to the first error and that error's err_text (False: no error)."""
    parser, rec = new_parser(limits=limits)
    try:
        for chunk in chunks:
            parser.feed(chunk)
    except ProtocolError as exc:
        return rec.ops, exc.err_text
    return rec.ops, False


@SETTINGS
@given(data=hostile, cuts=st.lists(st.integers(0, 4096), max_size=30), limits=LIMITS)
def test_hostile_bytes_give_only_callbacks_or_protocol_errors(
    data: bytes, cuts: list[int], limits: tuple[int, int]
) -> None:
    feed_all(split(data, cuts), limits)


@SETTINGS
@given(chunks=st.lists(hostile, max_size=6), limits=LIMITS)
def test_hostile_chunks_give_only_callbacks_or_protocol_errors(
    chunks: list[bytes], limits: tuple[int, int]
) -> None:
    feed_all(chunks, limits)


@SETTINGS
@given(data=hostile, cuts=st.lists(st.integers(0, 4096), max_size=30), limits=LIMITS)
def test_outcome_does_not_depend_on_the_split(
    data: bytes, cuts: list[int], limits: tuple[int, int]
) -> None:
    """Callbacks up to the first error, and that error's err_text, are the same however split."""
    assert outcome(split(data, cuts), limits) == outcome([data], limits)


# ---------------------------------------------------------------------------- every split

# The parser has fast paths (an upper-case PUB whose payload is buffered, runs of plain
# acks) beside the general one, and which one a frame takes depends on where a read ends.
# Frames at the edges of what they check (sizes padded with zeros to 9 digits and beyond,
# control lines around max_control_line, acks) are split at every position, so a rule that
# only one path applies shows up as an outcome that depends on the split.


@st.composite
def size_token(draw: st.DrawFn, value: int) -> bytes:
    """`value` as nats-server may or may not read it: zero-padded to 1-12 digits."""
    return b"%0*d" % (draw(st.integers(1, 12)), value)


@st.composite
def edge_frame(
    draw: st.DrawFn,
    max_control_line: int,
    kinds: tuple[str, ...] = ("pub", "pub-reply", "ack", "hpub", "unsub"),
) -> bytes:
    """PUB, PUB with reply, ack, HPUB or UNSUB with zero-padded numbers, its first argument
    (subject or sid) sized to put the line's argument part near max_control_line."""
    kind = draw(st.sampled_from(kinds))
    payload = draw(st.sampled_from([b"", b"hi", b"+ACK", b"x" * 40]))
    op, prefix, tail = b"PUB", b"s.", payload + b"\r\n"
    if kind == "unsub":
        op, prefix, tail = b"UNSUB", b"", b""
        rest = [draw(size_token(draw(st.integers(0, 3))))]
    elif kind == "hpub":
        header = b"NATS/1.0\r\n\r\n"
        op, tail = b"HPUB", header + tail
        rest = [draw(size_token(len(header))), draw(size_token(len(header) + len(payload)))]
    else:
        rest = [draw(size_token(len(payload)))]
        if kind == "pub-reply":
            rest.insert(0, b"r")
        if kind == "ack":
            prefix = b"$JS.ACK.s.c.1.1."
    args_tail = draw(st.sampled_from([b" ", b"  "])) + b" ".join(rest)
    room = max_control_line - len(prefix) - len(args_tail)
    length = draw(st.sampled_from([1, 8, room - 1, room, room + 1, room + 4, room + 5]))
    line = op + b" " + prefix + b"a" * max(length, 1) + args_tail
    return line + draw(st.sampled_from([b"\r\n", b"\n"])) + tail


@st.composite
def ack_run(draw: st.DrawFn, max_control_line: int) -> bytes:
    """Plain acks alike enough for `_ack_span`'s windows, with at most one odd one out: a
    padded size, a tab, another payload, or a subject around the control line limit."""
    blanks, payload = draw(st.sampled_from([(b" ", b""), (b"  ", b""), (b"  ", b"+ACK")]))
    size = b"%d" % len(payload)
    acks = [
        b"PUB $JS.ACK.s.c.1.%d.1 %b%b\r\n%b\r\n" % (i, blanks, size, payload)
        for i in range(draw(st.integers(2, 24)))
    ]
    odd = draw(
        st.sampled_from(
            [
                b"PUB $JS.ACK.s.c.1.9.1 %b0%b\r\n%b\r\n" % (blanks, size, payload),
                b"PUB $JS.ACK.s.c.1.9.1 %b%b\r\n%b\r\n" % (blanks, b"0" * 9 + size, payload),
                b"PUB $JS.ACK.s.c.1.9.1\t%b\r\n%b\r\n" % (size, payload),
                b"PUB $JS.ACK.s.c.1.9.1 %b3\r\n-NA\r\n" % blanks,
            ]
        )
        | edge_frame(max_control_line, kinds=("ack",))
    )
    acks.insert(draw(st.integers(0, len(acks))), odd)
    return b"".join(acks)


edge_stream = st.lists(
    edge_frame(MAX_CONTROL_LINE) | ack_run(MAX_CONTROL_LINE) | valid_op().map(lambda t: t[0]),
    max_size=4,
)


# Quadratic in the stream's length (every split position parses it all again): well under
# the default timeout alone, past it on a loaded 2-core machine.
@pytest.mark.timeout(300)
@SETTINGS
@given(frames=edge_stream)
def test_edge_frames_give_one_outcome_at_every_split_position(frames: list[bytes]) -> None:
    stream = b"".join(frames)
    whole = outcome([stream])
    for at in range(len(stream) + 1):
        assert outcome([stream[:at], stream[at:]]) == whole, at
    assert outcome([stream[i : i + 1] for i in range(len(stream))]) == whole


@SETTINGS
@given(size=st.integers(0, 10_000), header=st.booleans())
def test_declared_sizes_are_bounded_by_max_payload(size: int, header: bool) -> None:
    parser, rec = new_parser()
    line = b"HPUB foo 0 %d\r\n" % size if header else b"PUB foo %d\r\n" % size
    if size > MAX_PAYLOAD:
        with pytest.raises(ProtocolError) as info:
            parser.feed(line)
        assert info.value.err_text == "Maximum Payload Violation"
        assert parser.buffered_bytes == 0
        return
    parser.feed(line)
    parser.feed(b"x" * size)
    assert rec.ops == []
    parser.feed(b"\r\n")
    assert rec.ops == [("pub", b"foo", None, None, b"x" * size)]
