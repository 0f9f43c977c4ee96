"""A message's control line read in one pass, by the client parser (PUB) and the leaf
parser (LMSG). Compiled (ADR 0053).

Under mypyc, indexing bytes is native, while `bytes.find` and `bytes.startswith` with a
start parse their arguments as a tuple (CPython 3.11's METH_VARARGS), about 700
instructions a call: a PUB's fast path made five such calls and an `int()` of its size
(900 more); one pass over its line's bytes costs less than one of them.
"""

from __future__ import annotations

from typing import Final

# nats-server's parseSize reads at most 9 digits ("999M"); longer sizes are malformed.
SIZE_DIGITS_MAX: Final = 9

NOT_FAST: Final = (-1, -1, -1, -1)
"""What `message_line` returns for a line it does not read."""


def message_line(
    buf: bytes, pos: int, n: int, op: bytes, bare_lf: bool
) -> tuple[int, int, int, int]:
    """The line at `pos` of `buf[:n]` as the parsers' fast paths take it: `op` (the
    operation and a space, upper case), a subject, a reply (possibly empty: nats-py
    doubles the blank before the size) and a size of 1-9 ASCII digits, each after one
    space, then CR LF (or a bare LF, with `bare_lf`). Returns (end of the subject, end
    of the reply or -1 without one, size, start of the payload), or `NOT_FAST` for
    anything else, a line not complete in `buf` included: the parser's general path,
    which gives the same result for every line this one reads, reads it then."""
    i = pos + len(op)
    if n - i < 4:
        return NOT_FAST
    for k in range(len(op)):
        if buf[pos + k] != op[k]:
            return NOT_FAST
    first = i
    while i < n:
        c = buf[i]
        if c == 32 or c == 9 or c == 13 or c == 10:
            break
        i += 1
    if i == first or i >= n or buf[i] != 32:
        return NOT_FAST
    subject_end = i
    i += 1
    second = i
    while i < n:
        c = buf[i]
        if c == 32 or c == 9 or c == 13 or c == 10:
            break
        i += 1
    if i >= n:
        return NOT_FAST
    reply_end = -1
    if buf[i] == 32:  # that was the reply: the size follows
        reply_end = i
        i += 1
    else:  # that is the size, read again as digits
        i = second
    digits = i
    size = 0
    while i < n:
        c = buf[i]
        if c < 48 or c > 57:
            break
        size = size * 10 + c - 48
        i += 1
    if i == digits or i - digits > SIZE_DIGITS_MAX or i >= n:
        return NOT_FAST
    if buf[i] == 13:
        i += 1
        if i >= n:
            return NOT_FAST
    elif not bare_lf:
        return NOT_FAST
    if buf[i] != 10:
        return NOT_FAST
    return subject_end, reply_end, size, i + 1
