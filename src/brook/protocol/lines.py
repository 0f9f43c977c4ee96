"""A message's control line read in one pass, by the client parser (PUB, HPUB) and the
leaf parser (LMSG, HMSG). Compiled (ADR 0053).

Under mypyc, indexing bytes is native, while `bytes.find` and `bytes.startswith` with a
start parse their arguments as a tuple (CPython 3.11's METH_VARARGS), about 700
instructions a call: a PUB's fast path made five such calls and an `int()` of its size
(900 more); one pass over its line's bytes costs less than one of them. The helpers are
native calls between compiled functions.
"""

from __future__ import annotations

from typing import Final

from mypy_extensions import i64

# nats-server's parseSize reads at most 9 digits ("999M"); longer sizes are malformed.
SIZE_DIGITS_MAX: Final = 9

NOT_FAST: Final = (-1, -1, -1, -1)
"""What `message_line` returns for a line it does not read."""

NOT_FAST_HEADER: Final = (-1, -1, -1, -1, -1)
"""What `header_line` returns for a line it does not read."""


def _subject_end(buf: bytes, pos: i64, n: i64, op: bytes, least: i64) -> i64:
    """Where the subject after `op` at `pos` ends (at the single space after it), or -1:
    not `op`, an empty subject, fewer than `least` bytes after `op`, or no space."""
    i = pos + len(op)
    if n - i < least:
        return -1
    for k in range(len(op)):
        if buf[pos + k] != op[k]:
            return -1
    end = token_end(buf, i, n)
    if end == i or end >= n or buf[end] != 32:
        return -1
    return end


def token_end(buf: bytes, i: i64, n: i64) -> i64:
    """Where the argument at `i` ends: its first blank, CR or LF, or `n`."""
    while i < n:
        c = buf[i]
        if c == 32 or c == 9 or c == 13 or c == 10:
            break
        i += 1
    return i


def ascii_size(buf: bytes, start: i64, end: i64) -> i64:
    """The size `buf[start:end]` says (1-9 ASCII digits, as nats-server's parseSize), or -1.
    Also the Spark connector's, for the MSG and HMSG frames it scans (ADR 0059)."""
    if end == start or end - start > SIZE_DIGITS_MAX:
        return -1
    size: i64 = 0
    for i in range(start, end):
        c = buf[i]
        if c < 48 or c > 57:
            return -1
        size = size * 10 + c - 48
    return size


def _body_start(buf: bytes, i: i64, n: i64, bare_lf: bool) -> i64:
    """Where the body starts after the line's end at `i` (CR LF, or a bare LF with
    `bare_lf`), or -1: anything else there, or the end not yet received."""
    if i >= n:
        return -1
    if buf[i] == 13:
        i += 1
        if i >= n:
            return -1
    elif not bare_lf:
        return -1
    if buf[i] != 10:
        return -1
    return i + 1


def message_line(
    buf: bytes, pos: int, n: int, op: bytes, bare_lf: bool, max_line: int
) -> tuple[int, int, int, int]:
    """The line at `pos` of `buf[:n]` as the parsers' fast paths take it: `op` (the
    operation and a space, upper case), a subject, a reply (possibly empty: nats-py
    doubles the blank before the size) and a size of 1-9 ASCII digits, each after one
    space, then CR LF (or a bare LF, with `bare_lf`), the line before its end at most
    `max_line` bytes. Returns (end of the subject, end of the reply or -1 without one,
    size, start of the payload), or `NOT_FAST` for anything else, a line not complete in
    `buf` included: the parser's general path, which gives the same result for every
    line this one reads, reads it then (and refuses a line too long)."""
    subject_end = _subject_end(buf, pos, n, op, 4)
    if subject_end < 0:
        return NOT_FAST
    second = subject_end + 1
    second_end = token_end(buf, second, n)
    if second_end >= n:
        return NOT_FAST
    if buf[second_end] == 32:  # that was the reply: the size follows
        reply_end = second_end
        second = second_end + 1
        second_end = token_end(buf, second, n)
    else:
        reply_end = -1
    size = ascii_size(buf, second, second_end)
    if size < 0 or second_end - pos > max_line:
        return NOT_FAST
    start = _body_start(buf, second_end, n, bare_lf)
    if start < 0:
        return NOT_FAST
    return subject_end, reply_end, size, start


def header_line(
    buf: bytes, pos: int, n: int, op: bytes, bare_lf: bool, max_line: int
) -> tuple[int, int, int, int, int]:
    """`message_line` for a message with headers (HPUB, HMSG): `op`, a subject, a reply
    (possibly empty), the header's size and the total size, each after one space, the
    header's size at most the total. Returns (end of the subject, end of the reply or -1,
    header size, total size, start of the header), or `NOT_FAST_HEADER`."""
    subject_end = _subject_end(buf, pos, n, op, 6)
    if subject_end < 0:
        return NOT_FAST_HEADER
    second = subject_end + 1
    second_end = token_end(buf, second, n)
    if second_end >= n or buf[second_end] != 32:
        return NOT_FAST_HEADER
    third = second_end + 1
    third_end = token_end(buf, third, n)
    if third_end >= n:
        return NOT_FAST_HEADER
    if buf[third_end] == 32:  # a reply, then the two sizes
        reply_end = second_end
        fourth = third_end + 1
        fourth_end = token_end(buf, fourth, n)
        hdr = ascii_size(buf, third, third_end)
        total = ascii_size(buf, fourth, fourth_end)
        line_end = fourth_end
    else:
        reply_end = -1
        hdr = ascii_size(buf, second, second_end)
        total = ascii_size(buf, third, third_end)
        line_end = third_end
    if hdr < 0 or total < hdr or line_end - pos > max_line:
        return NOT_FAST_HEADER
    start = _body_start(buf, line_end, n, bare_lf)
    if start < 0:
        return NOT_FAST_HEADER
    return subject_end, reply_end, hdr, total, start
