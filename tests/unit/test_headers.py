"""The NATS/1.0 header block: exact encoding, status lines, parsing, round trips, rejections."""

from __future__ import annotations

import pytest

from brook.protocol import headers
from brook.protocol.headers import HeaderBlock, HeaderError


def test_empty_block() -> None:
    assert headers.encode() == b"NATS/1.0\r\n\r\n"
    assert headers.encode([]) == b"NATS/1.0\r\n\r\n"
    assert headers.parse(b"NATS/1.0\r\n\r\n") == HeaderBlock()


def test_fields_are_encoded_in_order_with_case_and_repeats_kept() -> None:
    block = headers.encode([("Foo", "bar"), ("foo", "baz"), ("Foo", "qux")])
    assert block == b"NATS/1.0\r\nFoo: bar\r\nfoo: baz\r\nFoo: qux\r\n\r\n"


def test_no_responders_503_exact_bytes() -> None:
    block = headers.encode([("Nats-Subject", "nobody.home")], 503)
    assert block == b"NATS/1.0 503\r\nNats-Subject: nobody.home\r\n\r\n"
    assert len(block) == 43
    parsed = headers.parse(block)
    assert parsed.status == 503
    assert parsed.description == ""
    assert parsed.get("Nats-Subject") == "nobody.home"


@pytest.mark.parametrize(
    ("status", "description", "fields", "expected"),
    [
        (404, "No Messages", [], b"NATS/1.0 404 No Messages\r\n\r\n"),
        (408, "Request Timeout", [], b"NATS/1.0 408 Request Timeout\r\n\r\n"),
        (
            100,
            "Idle Heartbeat",
            [("Nats-Last-Consumer", "5"), ("Nats-Last-Stream", "7")],
            b"NATS/1.0 100 Idle Heartbeat\r\nNats-Last-Consumer: 5\r\nNats-Last-Stream: 7\r\n\r\n",
        ),
        (100, "FlowControl Request", [], b"NATS/1.0 100 FlowControl Request\r\n\r\n"),
        (503, "", [], b"NATS/1.0 503\r\n\r\n"),
    ],
)
def test_status_lines(
    status: int, description: str, fields: list[tuple[str, str]], expected: bytes
) -> None:
    block = headers.encode(fields, status, description)
    assert block == expected
    parsed = headers.parse(block)
    assert parsed.status == status
    assert parsed.description == description
    assert parsed.fields == fields


@pytest.mark.parametrize(
    "fields",
    [
        [],
        [("A", "1")],
        [("Nats-Msg-Id", "abc-123"), ("Nats-Expected-Stream", "ORDERS")],
        [("X", "a: b: c"), ("Y", "")],  # colons in values, empty values
        [("Repeat", "1"), ("Repeat", "2"), ("repeat", "3")],
        [("Unicode", "héllo wörld"), ("Spaces Inside", "v a l")],
    ],
)
def test_round_trip(fields: list[tuple[str, str]]) -> None:
    assert headers.parse(headers.encode(fields)).fields == fields
    parsed = headers.parse(headers.encode(fields, 100, "Idle Heartbeat"))
    assert (parsed.status, parsed.description, parsed.fields) == (100, "Idle Heartbeat", fields)


def test_get_and_get_all() -> None:
    parsed = headers.parse(headers.encode([("A", "1"), ("B", "2"), ("A", "3")]))
    assert parsed.get("A") == "1"
    assert parsed.get_all("A") == ["1", "3"]
    assert parsed.get("a") is None  # names are case-sensitive
    assert parsed.get_all("missing") == []


def test_parse_is_lenient_about_whitespace_after_the_colon() -> None:
    parsed = headers.parse(b"NATS/1.0\r\nA:1\r\nB:   2  \r\nC:\t3\r\n\r\n")
    assert parsed.fields == [("A", "1"), ("B", "2"), ("C", "3")]


def test_parse_of_a_status_line_with_extra_spaces() -> None:
    parsed = headers.parse(b"NATS/1.0   404   No Messages  \r\n\r\n")
    assert (parsed.status, parsed.description) == (404, "No Messages")


@pytest.mark.parametrize("name", ["", "A:B", ":", "A\rB", "A\nB", "A\r\n"])
def test_invalid_names_are_rejected(name: str) -> None:
    with pytest.raises(ValueError, match="header name"):
        headers.encode([(name, "v")])


@pytest.mark.parametrize("value", ["a\rb", "a\nb", "\r\n", "v\r\nInjected: yes"])
def test_invalid_values_are_rejected(value: str) -> None:
    with pytest.raises(ValueError, match="header value"):
        headers.encode([("Name", value)])


@pytest.mark.parametrize(
    "block",
    [
        b"",
        b"HTTP/1.1 200 OK\r\n\r\n",
        b"nats/1.0\r\n\r\n",
        b"NATS/1.0 50\r\n\r\n",
        b"NATS/1.0 5000\r\n\r\n",
        b"NATS/1.0 abc\r\n\r\n",
        b"NATS/1.0\r\nno colon here\r\n\r\n",
        b"NATS/1.0\r\n: empty name\r\n\r\n",
    ],
)
def test_parse_rejects_malformed_blocks(block: bytes) -> None:
    with pytest.raises(HeaderError):
        headers.parse(block)


def test_header_error_is_a_value_error() -> None:
    assert issubclass(HeaderError, ValueError)


@pytest.mark.parametrize(
    ("block", "value"),
    [
        (b"NATS/1.0\r\nNats-Batch-Id: b1\r\n\r\n", b"b1"),
        (b"NATS/1.0\r\nNats-Batch-Id:b1 \r\n\r\n", b"b1 "),  # trailing space kept
        (b"NATS/1.0\r\nNats-Batch-Id: \tb1\r\n\r\n", b"\tb1"),  # only spaces skipped
        (b"NATS/1.0\r\nNats-Batch-Id:\r\n\r\n", b""),
        (b"NATS/1.0\r\nnats-batch-id: b1\r\n\r\n", None),  # case-sensitive
        (b"NATS/1.0\r\nX-Nats-Batch-Id: b1\r\n\r\n", None),
        (b"NATS/1.0\r\nNats-Batch-Id-X: b1\r\n\r\n", None),
        (b"NATS/1.0\r\nA: 1\r\nNats-Batch-Id: 1\r\nNats-Batch-Id: 2\r\n\r\n", b"1"),
        (b"NATS/1.0 Nats-Batch-Id: b1\r\n\r\n", None),  # not on the status line
        (b"NATS/1.0\r\nno colon\r\nNats-Batch-Id: b1\r\n\r\n", b"b1"),  # parse refuses
    ],
)
def test_raw_value_reads_as_nats_server_does(block: bytes, value: bytes | None) -> None:
    assert headers.raw_value(block, b"Nats-Batch-Id") == value


def test_remove_prefixed_cuts_lines_as_nats_server() -> None:
    """`removeHeaderIfPrefixPresent`: whole lines whose name starts with the prefix, only
    at the start of a line; nothing left but the empty block is no header."""
    block = b"NATS/1.0\r\nNats-Msg-Id: 1\r\nNats-Expected-Stream: O\r\nX-Nats-Expected-A: b\r\n\r\n"
    assert headers.remove_prefixed(block, b"Nats-Expected-") == (
        b"NATS/1.0\r\nNats-Msg-Id: 1\r\nX-Nats-Expected-A: b\r\n\r\n"
    )
    only = b"NATS/1.0\r\nNats-Expected-Stream: O\r\nNats-Expected-Last-Sequence: 2\r\n\r\n"
    assert headers.remove_prefixed(only, b"Nats-Expected-") is None
    assert (
        headers.remove_prefixed(b"NATS/1.0\r\nA: b\r\n\r\n", b"Nats-")
        == b"NATS/1.0\r\nA: b\r\n\r\n"
    )
