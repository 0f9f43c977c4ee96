"""ClientParser: every operation, framing rules, limits, errors, pause/resume (example-based)."""

from __future__ import annotations

from typing import Any

import pytest

from brook.protocol import encoder
from brook.protocol.errors import (
    MAX_CONTROL_LINE,
    MAX_PAYLOAD,
    UNKNOWN_OPERATION,
    ProtocolError,
)
from brook.protocol.parser import ClientParser

Op = tuple[Any, ...]

MAX_PAYLOAD_BYTES = 1024
MAX_CONTROL_LINE_BYTES = 256
# Where runs of PUBs are looked for, as a server with JetStream has it (its ack prefix).
RUN_PREFIXES = (b"$JS.ACK.",)


class Recorder:
    """Records every callback as a tuple; optionally pauses the parser after chosen ops."""

    def __init__(self, pause_on: frozenset[str] = frozenset()) -> None:
        self.ops: list[Op] = []
        self.pause_on = pause_on
        self.parser: ClientParser | None = None

    def _record(self, op: Op) -> None:
        self.ops.append(op)
        if op[0] in self.pause_on:
            assert self.parser is not None
            self.parser.paused = True

    def on_connect(self, options: dict[str, Any]) -> None:
        self._record(("connect", options))

    def on_pub(
        self, subject: bytes, reply: bytes | None, header: bytes | None, payload: bytes
    ) -> None:
        self._record(("pub", subject, reply, header, payload))

    def on_pub_run(self, subjects: list[bytes], payload: bytes) -> None:
        for subject in subjects:
            self.on_pub(subject, None, None, payload)

    def on_sub(self, subject: bytes, queue: bytes | None, sid: bytes) -> None:
        self._record(("sub", subject, queue, sid))

    def on_unsub(self, sid: bytes, max_msgs: int | None) -> None:
        self._record(("unsub", sid, max_msgs))

    def on_ping(self) -> None:
        self._record(("ping",))

    def on_pong(self) -> None:
        self._record(("pong",))


def make(
    *,
    max_payload: int = MAX_PAYLOAD_BYTES,
    max_control_line: int = MAX_CONTROL_LINE_BYTES,
    pause_on: frozenset[str] = frozenset(),
) -> tuple[ClientParser, Recorder]:
    rec = Recorder(pause_on)
    parser = ClientParser(
        rec,
        max_payload=max_payload,
        max_control_line=max_control_line,
        run_prefixes=RUN_PREFIXES,
    )
    rec.parser = parser
    return parser, rec


def is_paused(parser: ClientParser) -> bool:
    # A function, so mypy does not carry `paused` narrowing across resume().
    return parser.paused


def parse(*chunks: bytes, **kwargs: Any) -> list[Op]:
    parser, rec = make(**kwargs)
    for chunk in chunks:
        parser.feed(chunk)
    return rec.ops


def feed_all(parser: ClientParser, chunks: tuple[bytes, ...]) -> None:
    for chunk in chunks:
        parser.feed(chunk)


def parse_error(*chunks: bytes, **kwargs: Any) -> tuple[ProtocolError, list[Op]]:
    parser, rec = make(**kwargs)
    with pytest.raises(ProtocolError) as info:
        feed_all(parser, chunks)
    return info.value, rec.ops


# ---------------------------------------------------------------------------- every operation


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b'CONNECT {"verbose":false,"name":"n"}\r\n', ("connect", {"verbose": False, "name": "n"})),
        (b"PUB foo 5\r\nhello\r\n", ("pub", b"foo", None, None, b"hello")),
        (b"PUB foo _INBOX.1 5\r\nhello\r\n", ("pub", b"foo", b"_INBOX.1", None, b"hello")),
        (b"PUB foo 0\r\n\r\n", ("pub", b"foo", None, None, b"")),
        (
            b"HPUB foo 12 17\r\nNATS/1.0\r\n\r\nhello\r\n",
            ("pub", b"foo", None, b"NATS/1.0\r\n\r\n", b"hello"),
        ),
        (
            b"HPUB foo rep 12 17\r\nNATS/1.0\r\n\r\nhello\r\n",
            ("pub", b"foo", b"rep", b"NATS/1.0\r\n\r\n", b"hello"),
        ),
        (
            b"HPUB foo 12 12\r\nNATS/1.0\r\n\r\n\r\n",
            ("pub", b"foo", None, b"NATS/1.0\r\n\r\n", b""),
        ),
        (b"SUB foo.* 1\r\n", ("sub", b"foo.*", None, b"1")),
        (b"SUB foo.> workers 22\r\n", ("sub", b"foo.>", b"workers", b"22")),
        (b"UNSUB 1\r\n", ("unsub", b"1", None)),
        (b"UNSUB 1 0\r\n", ("unsub", b"1", 0)),
        (b"UNSUB 1 10\r\n", ("unsub", b"1", 10)),
        (b"PING\r\n", ("ping",)),
        (b"PONG\r\n", ("pong",)),
    ],
)
def test_each_operation(data: bytes, expected: Op) -> None:
    assert parse(data) == [expected]


def test_info_and_ok_from_a_client_are_ignored() -> None:
    assert parse(b'INFO {"x":1}\r\n+OK\r\nPING\r\n') == [("ping",)]


def test_ping_ignores_trailing_arguments() -> None:
    assert parse(b"PING extra stuff\r\nPONG x\r\n") == [("ping",), ("pong",)]


def test_ping_and_pong_ignore_whatever_follows_the_op_word() -> None:
    # nats-server reads PING/PONG and skips the rest of the line.
    assert parse(b"PINGX\r\npongpong y\r\nPiNgPoNg\r\n") == [("ping",), ("pong",), ("ping",)]


def test_unsub_with_an_unparsable_max_unsubscribes_now() -> None:
    # nats-server treats a max it cannot parse as no max at all.
    for tok in (b"x", b"-1", b"1.5", b"1234567890"):
        assert parse(b"UNSUB 1 " + tok + b"\r\n") == [("unsub", b"1", None)]
    assert parse(b"UNSUB 1 999999999\r\n") == [("unsub", b"1", 999_999_999)]


def test_connect_null_means_no_options() -> None:
    assert parse(b"CONNECT null\r\n") == [("connect", {})]


def test_info_null_is_ignored() -> None:
    assert parse(b"INFO null\r\nPING\r\n") == [("ping",)]


def test_header_size_zero_is_delivered_as_a_message_without_header() -> None:
    # An empty header block carries nothing: the handler gets header=None, as for PUB.
    assert parse(b"HPUB foo 0 5\r\nhello\r\n") == [("pub", b"foo", None, None, b"hello")]
    assert parse(b"HPUB foo r 0 0\r\n\r\n") == [("pub", b"foo", b"r", None, b"")]


def test_payload_may_contain_protocol_bytes() -> None:
    payload = b"PING\r\nPUB x 1\r\n\n\r"
    assert parse(encoder.pub(b"foo", payload)) == [("pub", b"foo", None, None, payload)]


def test_several_operations_in_one_feed_keep_their_order() -> None:
    data = b"SUB a 1\r\nPUB a 2\r\nhi\r\nPING\r\nUNSUB 1\r\nPONG\r\n"
    assert parse(data) == [
        ("sub", b"a", None, b"1"),
        ("pub", b"a", None, None, b"hi"),
        ("ping",),
        ("unsub", b"1", None),
        ("pong",),
    ]


# ---------------------------------------------------------------------------- framing rules


@pytest.mark.parametrize(
    "data",
    [
        b"ping\r\n",
        b"Ping\r\n",
        b"pInG\r\n",
    ],
)
def test_operation_names_are_case_insensitive_ping(data: bytes) -> None:
    assert parse(data) == [("ping",)]


def test_operation_names_are_case_insensitive_all_ops() -> None:
    data = (
        b"connect {}\r\n"
        b"pub foo 1\r\nx\r\n"
        b"hPub foo 12 12\r\nNATS/1.0\r\n\r\n\r\n"
        b"sub foo 1\r\n"
        b"Unsub 1\r\n"
        b"pong\r\n"
        b"info {}\r\n"
        b"+ok\r\n"
    )
    assert parse(data) == [
        ("connect", {}),
        ("pub", b"foo", None, None, b"x"),
        ("pub", b"foo", None, b"NATS/1.0\r\n\r\n", b""),
        ("sub", b"foo", None, b"1"),
        ("unsub", b"1", None),
        ("pong",),
    ]


def test_arguments_are_split_on_runs_of_spaces_and_tabs() -> None:
    data = (
        b"PUB \t foo\t\t  bar   3\r\nabc\r\n"
        b"SUB\tfoo \t q\t\t7  \t\r\n"
        b"UNSUB   7\t 2\r\n"
        b"HPUB\tfoo  12\t12 \r\nNATS/1.0\r\n\r\n\r\n"
    )
    assert parse(data) == [
        ("pub", b"foo", b"bar", None, b"abc"),
        ("sub", b"foo", b"q", b"7"),
        ("unsub", b"7", 2),
        ("pub", b"foo", None, b"NATS/1.0\r\n\r\n", b""),
    ]


def test_vertical_tab_and_form_feed_are_not_argument_separators() -> None:
    # nats-server splits arguments on spaces, tabs and CR only; `bytes.split()` would also
    # split on VT and FF and turn `PUB foo\x0c3` into a valid publish to `foo`.
    assert parse(b"SUB foo\x0bbar 1\r\n") == [("sub", b"foo\x0bbar", None, b"1")]
    err, ops = parse_error(b"PUB foo\x0c3\r\nabc\r\n")
    assert err.err_text is None
    assert ops == []


def test_lines_may_end_with_lf_only() -> None:
    data = b"PING\nSUB foo 1\nPUB foo 3\nabc\r\nUNSUB 1 1\nCONNECT {}\n"
    assert parse(data) == [
        ("ping",),
        ("sub", b"foo", None, b"1"),
        ("pub", b"foo", None, None, b"abc"),
        ("unsub", b"1", 1),
        ("connect", {}),
    ]


def test_connect_options_keep_json_types() -> None:
    options = {"verbose": False, "pedantic": True, "name": "é", "protocol": 1, "x": [1, None]}
    assert parse(encoder.connect(options)) == [("connect", options)]


def test_connect_options_may_follow_a_tab() -> None:
    assert parse(b'CONNECT\t{"a":1}\r\n') == [("connect", {"a": 1})]


# ---------------------------------------------------------------------------- split feeds

STREAM = (
    encoder.connect({"verbose": False, "headers": True})
    + encoder.sub(b"foo.*", b"1")
    + encoder.sub(b"foo.>", b"2", b"q")
    + encoder.pub(b"foo.bar", b"hello world")
    + encoder.pub(b"foo.bar", b"", reply=b"_INBOX.x")
    + encoder.hpub(b"foo.baz", b"NATS/1.0\r\nA: b\r\n\r\n", b"payload\r\n", reply=b"r")
    + b"PING\nPONG\r\n"
    + encoder.unsub(b"1", 5)
    + encoder.unsub(b"2")
)


def test_one_byte_at_a_time_gives_the_same_operations() -> None:
    whole = parse(STREAM)
    assert len(whole) == 10
    parser, rec = make()
    for i in range(len(STREAM)):
        parser.feed(STREAM[i : i + 1])
    assert rec.ops == whole
    assert parser.buffered_bytes == 0


def test_every_two_way_split_gives_the_same_operations() -> None:
    whole = parse(STREAM)
    for cut in range(len(STREAM) + 1):
        assert parse(STREAM[:cut], STREAM[cut:]) == whole, cut


def test_one_mib_payload_in_64_kib_chunks() -> None:
    mib = 1024 * 1024
    payload = bytes(i % 251 for i in range(mib))
    data = encoder.pub(b"big", payload, reply=b"r") + b"PING\r\n"
    parser, rec = make(max_payload=mib)
    step = 64 * 1024
    for start in range(0, len(data), step):
        parser.feed(data[start : start + step])
        assert parser.buffered_bytes <= mib + 2
    assert rec.ops == [("pub", b"big", b"r", None, payload), ("ping",)]
    assert parser.buffered_bytes == 0


def test_payload_waits_for_its_trailing_crlf() -> None:
    parser, rec = make()
    parser.feed(b"PUB foo 3\r\nabc")
    assert rec.ops == []
    parser.feed(b"\r")
    assert rec.ops == []
    parser.feed(b"\n")
    assert rec.ops == [("pub", b"foo", None, None, b"abc")]


def test_empty_feed_is_harmless() -> None:
    parser, rec = make()
    parser.feed(b"")
    parser.feed(b"PI")
    parser.feed(b"")
    parser.feed(b"NG\r\n")
    parser.feed(b"")
    assert rec.ops == [("ping",)]


# ---------------------------------------------------------------------------- limits


def test_payload_of_exactly_max_payload_is_accepted() -> None:
    payload = b"x" * MAX_PAYLOAD_BYTES
    assert parse(encoder.pub(b"foo", payload)) == [("pub", b"foo", None, None, payload)]


@pytest.mark.parametrize(
    "line",
    [
        b"PUB foo %d\r\n" % (MAX_PAYLOAD_BYTES + 1),
        b"PUB foo reply %d\r\n" % (MAX_PAYLOAD_BYTES + 1),
        b"HPUB foo 10 %d\r\n" % (MAX_PAYLOAD_BYTES + 1),
        b"HPUB foo reply 0 %d\r\n" % (MAX_PAYLOAD_BYTES + 1),
        b"PUB foo 999999999\r\n",  # the largest size nats-server parses (9 digits)
    ],
)
def test_max_payload_is_refused_on_the_control_line(line: bytes) -> None:
    # No payload byte has arrived yet: the refusal must not wait for it.
    parser, _ = make()
    with pytest.raises(ProtocolError) as info:
        parser.feed(line)
    assert info.value.err_text == MAX_PAYLOAD
    assert parser.buffered_bytes == 0


def _sub_line(args_len: int) -> bytes:
    """A SUB control line (without line end) whose argument part is `args_len` bytes."""
    sid = b" 1"
    return b"SUB " + b"s" * (args_len - len(sid)) + sid


def test_argument_part_of_exactly_max_control_line_is_accepted() -> None:
    line = _sub_line(MAX_CONTROL_LINE_BYTES)
    assert len(line) > MAX_CONTROL_LINE_BYTES  # the op word does not count
    subject = b"s" * (MAX_CONTROL_LINE_BYTES - 2)
    assert parse(line + b"\r\n") == [("sub", subject, None, b"1")]
    assert parse(line + b"\n") == [("sub", subject, None, b"1")]


def test_argument_part_over_max_control_line_is_refused() -> None:
    err, ops = parse_error(_sub_line(MAX_CONTROL_LINE_BYTES + 1) + b"\r\nPING\r\n")
    assert err.err_text == MAX_CONTROL_LINE
    assert ops == []


def test_partial_line_over_max_control_line_is_refused_before_its_end() -> None:
    parser, _ = make()
    parser.feed(_sub_line(MAX_CONTROL_LINE_BYTES))  # at the limit, no line end yet: wait
    assert parser.buffered_bytes == MAX_CONTROL_LINE_BYTES + 4
    with pytest.raises(ProtocolError) as info:
        parser.feed(b"x")
    assert info.value.err_text == MAX_CONTROL_LINE


def test_partial_line_of_unbounded_garbage_is_refused() -> None:
    parser, _ = make()
    with pytest.raises(ProtocolError) as info:
        feed_all(parser, (b"PUB " + b"a" * 100,) * 100)
    assert info.value.err_text == MAX_CONTROL_LINE
    assert parser.buffered_bytes == 0


def test_partial_line_ending_in_cr_at_the_limit_is_not_refused() -> None:
    # Regression: a line at the limit whose CR arrived before its LF was refused, although
    # the same bytes in one read are accepted.
    line = _sub_line(MAX_CONTROL_LINE_BYTES)
    assert parse(line + b"\r", b"\n") == parse(line + b"\r\n")
    assert len(parse(line + b"\r", b"\n")) == 1


@pytest.mark.parametrize(
    "data",
    [
        b"X" * 20 + b" " + b"y" * 300,  # an op word longer than any operation
        b"FOO " + b"y" * 300,  # an unknown op word followed by a long argument part
        b" SUB " + b"y" * 300,  # a leading blank
    ],
)
def test_long_lines_give_the_same_error_whole_or_partial(data: bytes) -> None:
    partial, _ = parse_error(data)
    whole, _ = parse_error(data + b"\r\n")
    assert partial.err_text == whole.err_text == UNKNOWN_OPERATION


@pytest.mark.parametrize(
    "line",
    [
        b"PINGX" + b"x" * 300 + b"\r\n",
        b"PING" + b"x" * 20 + b" " + b"y" * 300 + b"\r\n",
        b"PINGPONG " + b"y" * 250 + b"\r\n",
        b"PONG" + b"z" * (MAX_CONTROL_LINE_BYTES + 1) + b"\r\n",
    ],
)
def test_ping_with_trailing_junk_gives_the_same_outcome_however_split(line: bytes) -> None:
    # Regression: the partial-line check did not know the PING/PONG prefix rule, so a long
    # `PINGxxx` line was a PING in one read and an unknown operation in two.
    def outcome(*chunks: bytes) -> tuple[list[Op], str | bool | None]:
        parser, rec = make()
        try:
            for chunk in chunks:
                parser.feed(chunk)
        except ProtocolError as exc:
            return rec.ops, exc.err_text
        return rec.ops, False

    whole = outcome(line)
    for cut in (5, 100, len(line) - 2, len(line) - 1):
        assert outcome(line[:cut], line[cut:]) == whole, cut


def test_control_line_limit_applies_to_connect() -> None:
    line = b'CONNECT {"name":"' + b"n" * MAX_CONTROL_LINE_BYTES + b'"}\r\n'
    err, _ = parse_error(line)
    assert err.err_text == MAX_CONTROL_LINE


# ---------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("data", "err_text"),
    [
        # Unknown operations, empty lines, ops missing all their arguments: Unknown Protocol Op.
        (b"FOO\r\n", UNKNOWN_OPERATION),
        (b"FOO bar\r\n", UNKNOWN_OPERATION),
        (b"PUBX foo 1\r\n", UNKNOWN_OPERATION),
        (b"MSG foo 1 1\r\n", UNKNOWN_OPERATION),
        (b"\r\n", UNKNOWN_OPERATION),
        (b"\n", UNKNOWN_OPERATION),
        (b" \t\r\n", UNKNOWN_OPERATION),
        (b" PING\r\n", UNKNOWN_OPERATION),
        (b"\tPING\r\n", UNKNOWN_OPERATION),
        (b"\rPING\r\n", UNKNOWN_OPERATION),
        (b" CONNECT {}\r\n", UNKNOWN_OPERATION),
        (b"PUB\r\n", UNKNOWN_OPERATION),
        (b"HPUB\r\n", UNKNOWN_OPERATION),
        (b"SUB\r\n", UNKNOWN_OPERATION),
        (b"UNSUB\r\n", UNKNOWN_OPERATION),
        (b"-ERR\r\n", UNKNOWN_OPERATION),
        # A payload not followed by exactly CRLF.
        (b"PUB foo 3\r\nabcd\r\n", UNKNOWN_OPERATION),
        (b"PUB foo 3\r\nabc\n\r\n", UNKNOWN_OPERATION),
        (b"PUB foo 3\r\nabc\rX", UNKNOWN_OPERATION),
        (b"HPUB foo 1 3\r\nabcXX", UNKNOWN_OPERATION),
        # Limits.
        (b"PUB foo 1025\r\n", MAX_PAYLOAD),
        (b"SUB " + b"x" * 300 + b" 1\r\n", MAX_CONTROL_LINE),
        # Wrong argument counts: silent close.
        (b"PUB foo\r\n", None),
        (b"PUB a b c 1\r\n", None),
        (b"HPUB foo 1\r\n", None),
        (b"HPUB a b c 1 2\r\n", None),
        (b"SUB foo\r\n", None),
        (b"SUB a b c d\r\n", None),
        (b"UNSUB 1 2 3\r\n", None),
        (b"CONNECT\r\n", None),
        # Malformed sizes: silent close.
        (b"PUB foo -1\r\n", None),
        (b"PUB foo +1\r\n", None),
        (b"PUB foo x\r\n", None),
        (b"PUB foo 1_0\r\n", None),
        (b"PUB foo 0x10\r\n", None),
        (b"PUB foo \xef\xbc\x91\r\n", None),  # a full-width digit one
        (b"PUB foo 1234567890\r\n", None),  # 10 digits: more than nats-server parses
        (b"PUB foo 1234567890123456789\r\n", None),
        # ...leading zeros count: refused with the payload in the same read (fast path) too.
        (b"PUB foo 0000000002\r\nhi\r\n", None),
        (b"PUB foo r 0000000002\r\nhi\r\n", None),
        (b"PUB $JS.ACK.s.c.1.1.1 0000000000\r\n\r\n", None),
        (b"HPUB foo 0000000012 12\r\nNATS/1.0\r\n\r\n\r\n", None),
        (b"HPUB foo 12 0000000012\r\nNATS/1.0\r\n\r\n\r\n", None),
        (b"HPUB foo x 3\r\n", None),
        (b"HPUB foo 1 x\r\n", None),
        (b"HPUB foo 4 3\r\n", None),  # header larger than total
        # Blanks after the op word but no arguments: a malformed op, silent close.
        (b"PUB \r\n", None),
        (b"HPUB\t\r\n", None),
        (b"SUB  \r\n", None),
        (b"UNSUB \r\n", None),
        (b"CONNECT \r\n", None),
        # CONNECT options that are not a JSON object: silent close.
        (b"CONNECT {\r\n", None),
        (b"CONNECT {}}\r\n", None),
        (b"CONNECT [1]\r\n", None),
        (b"CONNECT 1\r\n", None),
        (b'CONNECT "\xff"\r\n', None),
        (b"CONNECT \xff\xfe{\r\n", None),
        # INFO from a client must at least be a JSON object.
        (b"INFO x\r\n", None),
        (b"INFO [1]\r\n", None),
        # A client that sends -ERR: silent close.
        (b"-ERR 'oops'\r\n", None),
        # Junk after PING is ignored, but still bounded by the control line limit.
        (b"PINGX" + b"x" * 300 + b"\r\n", MAX_CONTROL_LINE),
    ],
)
def test_protocol_errors_and_their_err_text(data: bytes, err_text: str | None) -> None:
    err, ops = parse_error(data)
    assert err.err_text == err_text
    assert err.reason
    assert ops == []


def test_deeply_nested_connect_json_is_a_protocol_error() -> None:
    # Regression: json.loads raised RecursionError, which escaped feed().
    for nested in (b"[" * 2000, b'{"a":' * 800):
        err, _ = parse_error(b"CONNECT " + nested + b"\r\n", max_control_line=4096)
        assert err.err_text is None


def test_operations_before_an_error_are_dispatched() -> None:
    err, ops = parse_error(b"PING\r\nSUB foo 1\r\nBAD\r\nPONG\r\n")
    assert err.err_text == UNKNOWN_OPERATION
    assert ops == [("ping",), ("sub", b"foo", None, b"1")]


# ---------------------------------------------------------------------------- pause / resume


def test_pause_stops_after_the_current_operation_and_resume_continues_in_order() -> None:
    parser, rec = make(pause_on=frozenset({"connect"}))
    parser.feed(b"CONNECT {}\r\nSUB foo 1\r\nPUB foo 2\r\nhi\r\nPI")
    assert rec.ops == [("connect", {})]
    assert is_paused(parser)
    assert parser.buffered_bytes > 0
    parser.feed(b"NG\r\nPONG\r\n")  # bytes arriving while paused are kept, not parsed
    assert rec.ops == [("connect", {})]
    parser.resume()
    assert not is_paused(parser)
    assert rec.ops == [
        ("connect", {}),
        ("sub", b"foo", None, b"1"),
        ("pub", b"foo", None, None, b"hi"),
        ("ping",),
        ("pong",),
    ]
    assert parser.buffered_bytes == 0


def test_pause_on_every_operation() -> None:
    parser, rec = make(pause_on=frozenset({"connect", "sub", "pub", "unsub", "ping", "pong"}))
    parser.feed(STREAM)
    assert len(rec.ops) == 1
    while parser.paused:
        parser.resume()
    assert rec.ops == parse(STREAM)


def test_resume_with_a_payload_still_arriving() -> None:
    parser, rec = make(pause_on=frozenset({"ping"}))
    parser.feed(b"PING\r\nPUB foo 10\r\n0123")
    assert rec.ops == [("ping",)]
    parser.resume()
    assert rec.ops == [("ping",)]  # the payload is incomplete
    parser.feed(b"456789\r")
    parser.feed(b"\n")
    assert rec.ops == [("ping",), ("pub", b"foo", None, None, b"0123456789")]


def test_resume_without_anything_buffered() -> None:
    parser, rec = make(pause_on=frozenset({"ping"}))
    parser.feed(b"PING\r\n")
    assert is_paused(parser)
    parser.resume()
    assert rec.ops == [("ping",)]
    assert not is_paused(parser)


def test_a_paused_parser_keeps_a_completed_payload_for_resume() -> None:
    parser, rec = make(pause_on=frozenset({"pong"}))
    parser.feed(b"PUB foo 5\r\nab")
    parser.paused = True  # e.g. the connection paused between reads
    parser.feed(b"cde\r\nPONG\r\nPING\r\n")
    assert rec.ops == []
    parser.resume()
    assert rec.ops == [("pub", b"foo", None, None, b"abcde"), ("pong",)]
    parser.resume()
    assert rec.ops[-1] == ("ping",)


# ---------------------------------------------------------------------------- state after errors


@pytest.mark.parametrize(
    "bad",
    [
        b"PUB foo 3\r\nabcXY",  # error while a payload was pending
        b"PING\r\nBOGUS\r\nSUB foo 1\r\nPU",  # buffered bytes after the error are dropped
        b"PUB foo 2000\r\n",
        b"SUB " + b"x" * 400,  # partial line over the limit
        b"CONNECT [\r\n",
    ],
)
def test_parser_state_is_reset_after_a_protocol_error(bad: bytes) -> None:
    parser, rec = make()
    with pytest.raises(ProtocolError):
        parser.feed(bad)
    assert parser.buffered_bytes == 0
    rec.ops.clear()
    parser.feed(b"PING\r\nPUB foo 2\r\nok\r\n")
    assert rec.ops == [("ping",), ("pub", b"foo", None, None, b"ok")]


def test_parser_state_is_reset_after_a_handler_raises_protocol_error() -> None:
    class Refusing(Recorder):
        def on_pub(
            self, subject: bytes, reply: bytes | None, header: bytes | None, payload: bytes
        ) -> None:
            raise ProtocolError("refused", None)

    rec = Refusing()
    parser = ClientParser(rec, max_payload=100, max_control_line=256)
    with pytest.raises(ProtocolError):
        parser.feed(b"PUB foo 2\r\nhi\r\nPING\r\n")
    assert parser.buffered_bytes == 0
    parser.feed(b"PONG\r\n")
    assert rec.ops == [("pong",)]


# ---------------------------------------------------------------------------- runs of PUBs (acks)


class AckRunRecorder(Recorder):
    """Keeps the runs `on_pub_run` hands over, besides recording each ack as a PUB."""

    def __init__(self) -> None:
        super().__init__()
        self.runs: list[tuple[list[bytes], bytes]] = []

    def on_pub_run(self, subjects: list[bytes], payload: bytes) -> None:
        self.runs.append((list(subjects), payload))
        super().on_pub_run(subjects, payload)


def _ack(n: int, blanks: bytes = b" ") -> bytes:
    return b"PUB $JS.ACK.S.C.1.%d.%d.1700.0%b4\r\n+ACK\r\n" % (n, n, blanks)


def test_consecutive_plain_acks_are_handed_over_as_one_run_in_order() -> None:
    rec = AckRunRecorder()
    parser = ClientParser(
        rec, max_payload=MAX_PAYLOAD_BYTES, max_control_line=256, run_prefixes=RUN_PREFIXES
    )
    parser.feed(
        _ack(1)
        + _ack(2, b"  ")  # nats-py's double blank
        + b"PING\r\n"
        + _ack(3)
        + b"PUB $JS.ACK.S.C.1.4.4.1700.0 4\r\n-NAK\r\n"  # another payload: a run of its own
        + b"PUB $JS.ACK.S.C.1.5.5.1700.0 _INBOX.r 4\r\n+ACK\r\n"  # asks for an answer
        + _ack(6)
        + _ack(7)
        + b"PUB $JS.ACK.S.C.1.8.8.1700.0  0\r\n\r\n"  # nats-py's: no payload
        + b"PUB $JS.ACK.S.C.1.9.9.1700.0 0\r\n\r\n"
        + _ack(10)
    )
    subject = b"$JS.ACK.S.C.1.%d.%d.1700.0"
    assert rec.runs == [
        ([subject % (1, 1), subject % (2, 2)], b"+ACK"),
        ([subject % (3, 3)], b"+ACK"),
        ([subject % (4, 4)], b"-NAK"),
        ([subject % (6, 6), subject % (7, 7)], b"+ACK"),
        ([subject % (8, 8), subject % (9, 9)], b""),
        ([subject % (10, 10)], b"+ACK"),
    ]
    assert rec.ops == [
        ("pub", subject % (1, 1), None, None, b"+ACK"),
        ("pub", subject % (2, 2), None, None, b"+ACK"),
        ("ping",),
        ("pub", subject % (3, 3), None, None, b"+ACK"),
        ("pub", subject % (4, 4), None, None, b"-NAK"),
        ("pub", subject % (5, 5), b"_INBOX.r", None, b"+ACK"),
        ("pub", subject % (6, 6), None, None, b"+ACK"),
        ("pub", subject % (7, 7), None, None, b"+ACK"),
        ("pub", subject % (8, 8), None, None, b""),
        ("pub", subject % (9, 9), None, None, b""),
        ("pub", subject % (10, 10), None, None, b"+ACK"),
    ]


def test_a_run_of_acks_split_across_reads_loses_nothing() -> None:
    stream = b"".join(_ack(i) for i in range(1, 41))
    rec = AckRunRecorder()
    parser = ClientParser(
        rec, max_payload=MAX_PAYLOAD_BYTES, max_control_line=256, run_prefixes=RUN_PREFIXES
    )
    for at in range(0, len(stream), 37):
        parser.feed(stream[at : at + 37])
    assert [op[1] for op in rec.ops] == [
        b"$JS.ACK.S.C.1.%d.%d.1700.0" % (i, i) for i in range(1, 41)
    ]
    assert parser.buffered_bytes == 0


def test_an_ack_over_the_control_line_limit_ends_the_run_with_the_usual_error() -> None:
    rec = AckRunRecorder()
    parser = ClientParser(
        rec, max_payload=MAX_PAYLOAD_BYTES, max_control_line=40, run_prefixes=RUN_PREFIXES
    )
    long_ack = b"PUB $JS.ACK.S.C.1.2.2.1700." + b"0" * 40 + b" 4\r\n+ACK\r\n"
    with pytest.raises(ProtocolError) as info:
        parser.feed(_ack(1) + long_ack)
    assert info.value.err_text == "maximum control line exceeded"
    assert rec.runs == [([b"$JS.ACK.S.C.1.1.1.1700.0"], b"+ACK")]


@pytest.mark.parametrize("payload", [b"", b"+ACK"])
@pytest.mark.parametrize("blanks", [b" ", b"  ", b"   "])
def test_acks_right_at_the_control_line_limit_stay_in_the_run(
    payload: bytes, blanks: bytes
) -> None:
    # A run takes every ack whose control line is within the limit; a longer line goes
    # the general way, which applies the limit to the arguments (after "PUB ") and
    # refuses the first one over it.
    limit = 64
    size = b"%d" % len(payload)

    def ack(n: int, line_len: int) -> bytes:
        head = b"$JS.ACK.S.C.1.%d.%d.1700." % (n, n)
        filler = line_len - len(b"PUB ") - len(head) - len(blanks) - len(size)
        line = b"PUB " + head + b"0" * filler + blanks + size
        assert len(line) == line_len
        return line + b"\r\n" + payload + b"\r\n"

    rec = AckRunRecorder()
    parser = ClientParser(
        rec, max_payload=MAX_PAYLOAD_BYTES, max_control_line=limit, run_prefixes=RUN_PREFIXES
    )
    lengths = [limit - 2, limit, limit - 1, limit, limit, limit + 4]
    with pytest.raises(ProtocolError) as info:
        parser.feed(
            b"".join(ack(n, k) for n, k in enumerate(lengths, 1)) + ack(7, limit + 5) + ack(8, 40)
        )
    assert [op[1].split(b".")[5] for op in rec.ops] == [b"%d" % n for n in range(1, 7)]
    subjects, run_payload = rec.runs[0]
    assert (len(subjects), run_payload) == (5, payload)
    assert info.value.err_text == "maximum control line exceeded"


@pytest.mark.parametrize("form", [b" 4\r\n+ACK\r\n", b"  0\r\n\r\n"])
def test_long_runs_of_acks_with_other_operations_among_them(form: bytes) -> None:
    # Long runs are taken in windows of growing size, each checked as a whole; anything
    # else inside a window (another verb, a PING, different blanks, an ack asking for an
    # answer) must come out in its place, and every ack exactly once, in order.
    def ack(n: int, tail: bytes = form) -> bytes:
        return b"PUB $JS.ACK.S.C.1.%d.%d.1700.0%b" % (n, n, tail)

    odd = {
        100: b"PUB $JS.ACK.S.C.1.100.100.1700.0 4\r\n-NAK\r\n",
        101: b"PING\r\n",
        250: ack(250, b"   4\r\n+ACK\r\n"),
        251: ack(251, b"   0\r\n\r\n"),
        400: b"PUB $JS.ACK.S.C.1.400.400.1700.0 _INBOX.x" + form,
        700: b"PUB orders.eu.created" + form,  # the same tail, not an ack subject
        500: b"PUB $JS.ACK." + form,  # nothing after the prefix: not a plain ack
        501: b"PUB $JS.ACK.x" + form,  # the shortest that is
        402: b"PUB $JS.ACK.S..1.402\t.402.1700.0" + form,
    }
    stream = b"".join(odd.get(i, ack(i)) for i in range(1, 1201))
    rec = AckRunRecorder()
    parser = ClientParser(
        rec, max_payload=MAX_PAYLOAD_BYTES, max_control_line=4096, run_prefixes=RUN_PREFIXES
    )
    for at in range(0, len(stream), 20_000):
        parser.feed(stream[at : at + 20_000])
    expected = [op for i in range(1, 1201) for op in _ops_of(odd.get(i, ack(i)))]
    assert rec.ops == expected
    in_runs = [subject for subjects, _ in rec.runs for subject in subjects]
    assert all(s.startswith(b"$JS.ACK.") and len(s) > len(b"$JS.ACK.") for s in in_runs)
    assert len(in_runs) >= 1190
    assert len(rec.runs) < 40  # long runs, not one call per ack
    assert parser.buffered_bytes == 0


def _ops_of(data: bytes) -> list[tuple[object, ...]]:
    """What a parser on its own makes of `data` (no runs: the general path)."""
    rec = Recorder()
    ClientParser(rec, max_payload=MAX_PAYLOAD_BYTES, max_control_line=4096).feed(data)
    return rec.ops
