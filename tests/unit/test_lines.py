"""`protocol.lines.message_line` and `header_line`: the one-pass reading of a PUB's or
LMSG's line, and of an HPUB's or HMSG's, that the parsers' fast paths use (ADR 0053),
against the split-based reading it replaced.

The parsers' own tests check that the fast and general paths give the same operations
however a stream is split; this checks the scanners' contract itself, byte by byte,
compiled or not (the suite runs both ways).
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brook.protocol.lines import (
    NOT_FAST,
    NOT_FAST_HEADER,
    SIZE_DIGITS_MAX,
    header_line,
    message_line,
)

# (subject, reply or None, the sizes (one, or header and total), payload start)
Reading = tuple[bytes, bytes | None, tuple[int, ...], int] | None


def scanned(
    buf: bytes, pos: int, n: int, op: bytes, bare_lf: bool, sizes: int = 1, max_line: int = 4096
) -> Reading:
    """`message_line`'s result (`header_line`'s with `sizes` 2) as a `Reading`."""
    if sizes == 1:
        fields = message_line(buf, pos, n, op, bare_lf, max_line)
        if fields == NOT_FAST:
            return None
        subject_end, reply_end, size, start = fields
        read: tuple[int, ...] = (size,)
    else:
        header_fields = header_line(buf, pos, n, op, bare_lf, max_line)
        if header_fields == NOT_FAST_HEADER:
            return None
        subject_end, reply_end, hdr, total, start = header_fields
        read = (hdr, total)
    subject = buf[pos + len(op) : subject_end]
    reply = None if reply_end < 0 else buf[subject_end + 1 : reply_end]
    return subject, reply, read, start


def reference(
    buf: bytes, pos: int, n: int, op: bytes, bare_lf: bool, sizes: int = 1, max_line: int = 4096
) -> Reading:
    """The fast path before ADR 0053: the line found, split on single spaces, checked;
    `sizes` trailing sizes (2: header and total, the header's at most the total); the
    line before its end at most `max_line` bytes."""
    view = buf[:n]
    eol = view.find(b"\n", pos)
    if eol < 0 or not view.startswith(op, pos):
        return None
    has_cr = eol > pos and view[eol - 1] == 13
    if not has_cr and not bare_lf:
        return None
    if (eol - 1 if has_cr else eol) - pos > max_line:
        return None
    seg = view[pos + len(op) : eol - 1 if has_cr else eol]
    if b"\t" in seg or b"\r" in seg or b"\n" in seg:
        return None
    args = seg.split(b" ")
    if len(args) not in (1 + sizes, 2 + sizes) or not args[0]:
        return None
    tokens = args[-sizes:]
    if any(not t.isdigit() or len(t) > SIZE_DIGITS_MAX for t in tokens):
        return None
    read = tuple(map(int, tokens))
    if read != tuple(sorted(read)):
        return None  # a header larger than the total
    return args[0], args[1] if len(args) == 2 + sizes else None, read, eol + 1


@pytest.mark.parametrize(
    ("line", "bare_lf", "expected"),
    [
        (b"PUB a 5\r\nhello\r\n", True, (b"a", None, (5,), 9)),
        (b"PUB a 5\nhello\r\n", True, (b"a", None, (5,), 8)),
        (b"PUB a 5\nhello\r\n", False, None),  # LMSG: CR LF only
        (b"PUB a.b _INBOX.1 0\r\n\r\n", True, (b"a.b", b"_INBOX.1", (0,), 20)),
        (b"PUB a  12\r\n", True, (b"a", b"", (12,), 11)),  # nats-py's doubled blank
        (b"PUB a   12\r\n", True, None),
        (b"PUB a\t12\r\n", True, None),
        (b"PUB a\tb 12\r\n", True, None),
        (b"PUB a b\tc 12\r\n", True, None),
        (b"PUB a\rb 12\r\n", True, None),
        (b"PUB a b 1\t\r\n", True, None),
        (b"PUB a 1\r2\r\n", True, None),
        (b"PUB a b c 1\r\n", True, None),
        (b"PUB a 123456789\r\n", True, (b"a", None, (123456789,), 17)),
        (b"PUB a 1234567890\r\n", True, None),  # nats-server reads at most 9 digits
        (b"PUB a 00012\r\n", True, (b"a", None, (12,), 13)),
        (b"PUB a -1\r\n", True, None),
        (b"PUB a 1x\r\n", True, None),
        (b"PUB a 1:\r\n", True, None),
        (b"PUB a /1\r\n", True, None),
        (b"PUB a 5\r", True, None),  # the LF is still to come
        (b"PUB a 5", True, None),
        (b"PUB  a 5\r\n", True, None),  # an empty subject
        (b"pub a 5\r\n", True, None),  # lower case: the general path
        (b"PUB a\x0bb 5\r\n", True, (b"a\x0bb", None, (5,), 11)),
    ],
)
def test_lines(line: bytes, bare_lf: bool, expected: Reading) -> None:
    assert scanned(line, 0, len(line), b"PUB ", bare_lf) == expected
    assert reference(line, 0, len(line), b"PUB ", bare_lf) == expected


@pytest.mark.parametrize(
    ("line", "bare_lf", "expected"),
    [
        (b"HPUB a 12 17\r\n", True, (b"a", None, (12, 17), 14)),
        (b"HPUB a 12 17\n", True, (b"a", None, (12, 17), 13)),
        (b"HPUB a 12 17\n", False, None),  # HMSG: CR LF only
        (b"HPUB a.b _INBOX.1 0 5\r\n", True, (b"a.b", b"_INBOX.1", (0, 5), 23)),
        (b"HPUB a  12 17\r\n", True, (b"a", b"", (12, 17), 15)),  # nats-py's doubled blank
        (b"HPUB a 12 12\r\n", True, (b"a", None, (12, 12), 14)),
        (b"HPUB a 13 12\r\n", True, None),  # the header larger than the total
        (b"HPUB a r 13 12\r\n", True, None),
        (b"HPUB a 12\r\n", True, None),  # one size
        (b"HPUB a r 12\r\n", True, None),
        (b"HPUB a b c 1 2\r\n", True, None),
        (b"HPUB a 1  2\r\n", True, None),
        (b"HPUB a   1 2\r\n", True, None),
        (b"HPUB a 1 2 \r\n", True, None),
        (b"HPUB a 1\t2\r\n", True, None),
        (b"HPUB a\t1 2\r\n", True, None),
        (b"HPUB a 1 2\r3\r\n", True, None),
        (b"HPUB a 1 123456789\r\n", True, (b"a", None, (1, 123456789), 20)),
        (b"HPUB a 1 1234567890\r\n", True, None),
        (b"HPUB a 0000000001 2\r\n", True, None),
        (b"HPUB a 1x 2\r\n", True, None),
        (b"HPUB a 1 2x\r\n", True, None),
        (b"HPUB a -1 2\r\n", True, None),
        (b"HPUB a 1 2\r", True, None),  # the LF is still to come
        (b"HPUB a 1 2", True, None),
        (b"HPUB  a 1 2\r\n", True, None),  # an empty subject
        (b"hpub a 1 2\r\n", True, None),  # lower case: the general path
        (b"PUB a 1 2\r\n", True, None),
    ],
)
def test_header_lines(line: bytes, bare_lf: bool, expected: Reading) -> None:
    assert scanned(line, 0, len(line), b"HPUB ", bare_lf, 2) == expected
    assert reference(line, 0, len(line), b"HPUB ", bare_lf, 2) == expected


def test_reads_at_a_position_and_within_n() -> None:
    buf = b"junkLMSG s r 3\r\nabc\r\n"
    assert scanned(buf, 4, len(buf), b"LMSG ", False) == (b"s", b"r", (3,), 16)
    assert scanned(buf, 4, 15, b"LMSG ", False) is None  # the LF is past n
    assert scanned(buf, 4, len(buf), b"PUB ", False) is None
    buf = b"junkHMSG s r 1 3\r\nabc\r\n"
    assert scanned(buf, 4, len(buf), b"HMSG ", False, 2) == (b"s", b"r", (1, 3), 18)
    assert scanned(buf, 4, 17, b"HMSG ", False, 2) is None
    assert scanned(buf, 4, len(buf), b"LMSG ", False, 2) is None


def test_a_line_longer_than_max_line_is_not_read() -> None:
    """The line before its CR LF (or bare LF) is at most `max_line` bytes: the general
    path refuses a longer one."""
    buf = b"PUB subject 3\r\nabc\r\n"
    assert scanned(buf, 0, len(buf), b"PUB ", True, max_line=13) == (b"subject", None, (3,), 15)
    assert scanned(buf, 0, len(buf), b"PUB ", True, max_line=12) is None
    buf = b"HPUB subject 1 3\nabc\r\n"
    assert scanned(buf, 0, len(buf), b"HPUB ", True, 2, max_line=16) == (
        b"subject",
        None,
        (1, 3),
        17,
    )
    assert scanned(buf, 0, len(buf), b"HPUB ", True, 2, max_line=15) is None


# Mostly the arguments clients send, so that a good part of the lines read fast; the
# rest anything of the bytes that matter.
TOKEN = st.sampled_from([b"a", b"a.b", b"_INBOX.x", b"1", b"00", b""]) | st.lists(
    st.sampled_from([b"a", b":", b"1", b"0", b"\t", b"\r", b"\n", b"\x0b"]), max_size=4
).map(b"".join)
BLANK = st.sampled_from([b" ", b" ", b" ", b"  ", b"\t", b""])
END = st.sampled_from([b"\r\n", b"\r\n", b"\n", b"\r", b""])


@pytest.mark.parametrize(("op", "sizes"), [(b"PUB ", 1), (b"HPUB ", 2)])
@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from([b"", b"", b"", b" ", b"X "]),
    st.lists(st.tuples(TOKEN, BLANK), min_size=1, max_size=4),
    st.lists(st.integers(min_value=0, max_value=10**11) | st.integers(0, 20), min_size=2),
    END,
    st.booleans(),
    st.sampled_from([4096, 4096, 8, 12, 16]),
)
def test_same_as_the_split_reading(
    op: bytes,
    sizes: int,
    mangle: bytes,
    args: list[tuple[bytes, bytes]],
    numbers: list[int],
    end: bytes,
    bare_lf: bool,
    max_line: int,
) -> None:
    head = {b"": op, b" ": op + b" ", b"X ": op[:-2] + b"X "}[mangle]
    tail = b" ".join(b"%d" % number for number in numbers[:sizes])
    buf = head + b"".join(token + blank for token, blank in args) + tail + end + b"xx"
    for n in (len(buf), max(0, len(buf) - 3)):
        assert scanned(buf, 0, n, op, bare_lf, sizes, max_line) == reference(
            buf, 0, n, op, bare_lf, sizes, max_line
        )
