"""`protocol.lines.message_line`: the one-pass reading of a PUB's or LMSG's line that the
parsers' fast paths use (ADR 0053), against the split-based reading it replaced.

The parsers' own tests check that the fast and general paths give the same operations
however a stream is split; this checks the scanner's contract itself, byte by byte,
compiled or not (the suite runs both ways).
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brook.protocol.lines import NOT_FAST, SIZE_DIGITS_MAX, message_line

Reading = tuple[bytes, bytes | None, int, int] | None


def scanned(buf: bytes, pos: int, n: int, op: bytes, bare_lf: bool) -> Reading:
    """`message_line`'s result as (subject, reply or None, size, payload start)."""
    fields = message_line(buf, pos, n, op, bare_lf)
    if fields == NOT_FAST:
        return None
    subject_end, reply_end, size, start = fields
    subject = buf[pos + len(op) : subject_end]
    reply = None if reply_end < 0 else buf[subject_end + 1 : reply_end]
    return subject, reply, size, start


def reference(buf: bytes, pos: int, n: int, op: bytes, bare_lf: bool) -> Reading:
    """The fast path before ADR 0053: the line found, split on single spaces, checked."""
    view = buf[:n]
    eol = view.find(b"\n", pos)
    if eol < 0 or not view.startswith(op, pos):
        return None
    has_cr = eol > pos and view[eol - 1] == 13
    if not has_cr and not bare_lf:
        return None
    seg = view[pos + len(op) : eol - 1 if has_cr else eol]
    if b"\t" in seg or b"\r" in seg or b"\n" in seg:
        return None
    args = seg.split(b" ")
    if len(args) not in (2, 3) or not args[0]:
        return None
    size = args[-1]
    if not size.isdigit() or len(size) > SIZE_DIGITS_MAX:
        return None
    return args[0], args[1] if len(args) == 3 else None, int(size), eol + 1


@pytest.mark.parametrize(
    ("line", "bare_lf", "expected"),
    [
        (b"PUB a 5\r\nhello\r\n", True, (b"a", None, 5, 9)),
        (b"PUB a 5\nhello\r\n", True, (b"a", None, 5, 8)),
        (b"PUB a 5\nhello\r\n", False, None),  # LMSG: CR LF only
        (b"PUB a.b _INBOX.1 0\r\n\r\n", True, (b"a.b", b"_INBOX.1", 0, 20)),
        (b"PUB a  12\r\n", True, (b"a", b"", 12, 11)),  # nats-py's doubled blank
        (b"PUB a   12\r\n", True, None),
        (b"PUB a\t12\r\n", True, None),
        (b"PUB a\tb 12\r\n", True, None),
        (b"PUB a b\tc 12\r\n", True, None),
        (b"PUB a\rb 12\r\n", True, None),
        (b"PUB a b 1\t\r\n", True, None),
        (b"PUB a 1\r2\r\n", True, None),
        (b"PUB a b c 1\r\n", True, None),
        (b"PUB a 123456789\r\n", True, (b"a", None, 123456789, 17)),
        (b"PUB a 1234567890\r\n", True, None),  # nats-server reads at most 9 digits
        (b"PUB a 00012\r\n", True, (b"a", None, 12, 13)),
        (b"PUB a -1\r\n", True, None),
        (b"PUB a 1x\r\n", True, None),
        (b"PUB a 1:\r\n", True, None),
        (b"PUB a /1\r\n", True, None),
        (b"PUB a 5\r", True, None),  # the LF is still to come
        (b"PUB a 5", True, None),
        (b"PUB  a 5\r\n", True, None),  # an empty subject
        (b"pub a 5\r\n", True, None),  # lower case: the general path
        (b"PUB a\x0bb 5\r\n", True, (b"a\x0bb", None, 5, 11)),
    ],
)
def test_lines(line: bytes, bare_lf: bool, expected: Reading) -> None:
    assert scanned(line, 0, len(line), b"PUB ", bare_lf) == expected
    assert reference(line, 0, len(line), b"PUB ", bare_lf) == expected


def test_reads_at_a_position_and_within_n() -> None:
    buf = b"junkLMSG s r 3\r\nabc\r\n"
    assert scanned(buf, 4, len(buf), b"LMSG ", False) == (b"s", b"r", 3, 16)
    assert scanned(buf, 4, 15, b"LMSG ", False) is None  # the LF is past n
    assert scanned(buf, 4, len(buf), b"PUB ", False) is None


TOKEN = st.lists(st.sampled_from([b"a", b":", b"1", b"0", b"\t", b"\r", b"\n"]), max_size=4)
BLANK = st.sampled_from([b" ", b"  ", b"\t", b""])
END = st.sampled_from([b"\r\n", b"\n", b"\r", b""])


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from([b"PUB ", b"PUB", b"PUB  ", b"PUX "]),
    st.lists(st.tuples(TOKEN.map(b"".join), BLANK), min_size=1, max_size=4),
    st.integers(min_value=0, max_value=10**11),
    END,
    st.booleans(),
)
def test_same_as_the_split_reading(
    op: bytes, args: list[tuple[bytes, bytes]], size: int, end: bytes, bare_lf: bool
) -> None:
    buf = op + b"".join(token + blank for token, blank in args) + b"%d" % size + end + b"xx"
    for n in (len(buf), max(0, len(buf) - 3)):
        assert scanned(buf, 0, n, b"PUB ", bare_lf) == reference(buf, 0, n, b"PUB ", bare_lf)
