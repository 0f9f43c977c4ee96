"""The connector's hot loop: MSG/HMSG frames of raw subscriptions, sliced out of a socket
read and handed to their handlers. Compiled with mypyc in Brook's group (ADR 0059).

A Spark read receives every row as one HMSG frame (a direct-get reply). In pure Python,
finding its control line, splitting it and converting its sizes cost about 1 us a row,
a third of the connector's read path (ADR 0055). Compiled, the bytes of the line are read
one by one with `i64` positions, with brook's `protocol.lines` token and size readers
(ADR 0053: indexing bytes is native, while `bytes.find` with a start and `int()` parse
their arguments generically).

`scan` reads only the frames it is sure of, as `wire.FrameParser` would read them; at
anything else (another operation, a subscription without a raw handler, a frame not yet
complete, a line of an unusual shape) it returns that frame's position and the parser's
general path takes over from there, so the result never depends on whether this module is
compiled. Every slice here has its stop at or after its start (mypyc 2.4.1 raises
SystemError for a bytes slice whose stop is before its start).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from mypy_extensions import i64

from brook.protocol.lines import ascii_size, token_end

RawHandler = Callable[[bytes, bytes, bytes, bytes | None], None]
"""(subject, reply, payload, header block or None) -> None; runs on the client's loop."""

ARGS_MAX: Final = 3  # after subject and sid: [reply] size, or [reply] header size, size


def _op_length(buf: bytes, pos: i64, n: i64) -> i64:
    """5 for `HMSG `, 4 for `MSG ` at `pos`, else 0."""
    if n - pos < 5:
        return 0
    if buf[pos] == 72 and buf[pos + 1] == 77 and buf[pos + 2] == 83 and buf[pos + 3] == 71:
        return 5 if buf[pos + 4] == 32 else 0
    if buf[pos] == 77 and buf[pos + 1] == 83 and buf[pos + 2] == 71 and buf[pos + 3] == 32:
        return 4
    return 0


def scan(data: bytes, pos: i64, handlers: dict[int, RawHandler]) -> i64:
    """Hand the complete MSG/HMSG frames from `pos` on whose sid has a raw handler to it,
    in order, while they come; return the position of the first thing left for the
    general path (`len(data)` when nothing is). A line is read here only as single
    spaces between `op subject sid [reply] [header-size] size` and CR LF after it."""
    n: i64 = len(data)
    while pos < n:
        op = _op_length(data, pos, n)
        if op == 0:
            return pos
        subject_start = pos + op
        subject_end = token_end(data, subject_start, n)
        if subject_end == subject_start or subject_end >= n or data[subject_end] != 32:
            return pos
        sid_end = token_end(data, subject_end + 1, n)
        sid = ascii_size(data, subject_end + 1, sid_end)
        if sid < 0 or sid_end >= n or data[sid_end] != 32:
            return pos
        # The arguments after the sid: [reply] [header size] size, each after one space.
        count: i64 = 0
        s0: i64 = 0
        e0: i64 = 0
        s1: i64 = 0
        e1: i64 = 0
        s2: i64 = 0
        e2: i64 = 0
        i = sid_end
        while i < n and data[i] == 32:
            end = token_end(data, i + 1, n)
            if end == i + 1 or count == ARGS_MAX:
                return pos
            if count == 0:
                s0, e0 = i + 1, end
            elif count == 1:
                s1, e1 = i + 1, end
            else:
                s2, e2 = i + 1, end
            count += 1
            i = end
        if i + 1 >= n or data[i] != 13 or data[i + 1] != 10:
            return pos
        has_reply = count == (3 if op == 5 else 2)
        if not has_reply and count != (2 if op == 5 else 1):
            return pos
        # The size is the last argument; an HMSG's header size the one before it.
        if count == 1:
            total = ascii_size(data, s0, e0)
        elif count == 2:
            total = ascii_size(data, s1, e1)
        else:
            total = ascii_size(data, s2, e2)
        header_size: i64 = 0
        if op == 5:
            header_size = ascii_size(data, s1, e1) if count == 3 else ascii_size(data, s0, e0)
        if total < 0 or header_size < 0 or header_size > total:
            return pos
        start = i + 2
        end = start + total
        if end + 2 > n:
            return pos  # not complete yet
        handler = handlers.get(sid)
        if handler is None:
            return pos
        subject = data[subject_start:subject_end]
        reply = data[s0:e0] if has_reply else b""
        if header_size > 0:
            header: bytes | None = data[start : start + header_size]
        else:
            header = None
        payload = data[start + header_size : end]
        pos = end + 2
        handler(subject, reply, payload, header)
    return pos


# --------------------------------------------------------------------------- direct-get headers

SEQUENCE_DIGITS_MAX: Final = 18  # any longer might not fit in an i64: the caller's slow path


def _has_key(buf: bytes, i: i64, n: i64, key: bytes) -> bool:
    size: i64 = len(key)
    if n - i < size:
        return False
    for k in range(size):  # noqa: SIM110  (a native loop; `all()` makes a generator)
        if buf[i + k] != key[k]:
            return False
    return True


def _direct_key(buf: bytes, i: i64, n: i64) -> bool:
    """Whether the key after `Nats-` at `i` is one of the other headers a server appends
    to a direct-get reply (`wire.DIRECT_HEADERS`), with its colon."""
    return (
        _has_key(buf, i, n, b"Stream:")
        or _has_key(buf, i, n, b"Num-Pending:")
        or _has_key(buf, i, n, b"Last-Sequence:")
        or _has_key(buf, i, n, b"UpTo-Sequence:")
    )


def _value_start(buf: bytes, i: i64, n: i64) -> i64:
    """After the spaces at `i` (the blanks between a header's colon and its value)."""
    while i < n and buf[i] == 32:
        i += 1
    return i


def _text_end(buf: bytes, i: i64, n: i64) -> i64:
    """The first CR at or after `i`, or `n`."""
    while i < n and buf[i] != 13:
        i += 1
    return i


def _next_line(buf: bytes, i: i64, n: i64) -> i64:
    """Just after the next CR LF at or after `i`, or `n`."""
    while i + 1 < n:
        if buf[i] == 13 and buf[i + 1] == 10:
            return i + 2
        i += 1
    return n


def direct_columns(
    blocks: list[bytes],
) -> tuple[list[int], list[bytes], list[bytes], list[int]] | None:
    """(sequences, subjects, time stamps, rows with user headers) of direct-get replies'
    header blocks, read in one pass, or None when a block does not carry `Nats-Sequence`
    (as digits), `Nats-Subject` and `Nats-Time-Stamp` exactly once each: the caller then
    decodes row by row. Read as `fetch.RawReplies`' regular expressions read the joined
    blocks: a header line is `Key: value` after a CR LF, spaces after the colon skipped, the
    value up to the next CR; a user header is any other line with a first byte that is
    neither CR nor LF (ADR 0059)."""
    seqs: list[int] = []
    subjects: list[bytes] = []
    stamps: list[bytes] = []
    user_rows: list[int] = []
    for row, block in enumerate(blocks):
        n: i64 = len(block)
        seq: i64 = -1
        subject_start: i64 = -1
        subject_end: i64 = -1
        stamp_start: i64 = -1
        stamp_end: i64 = -1
        found_seq: i64 = 0
        found_subject: i64 = 0
        found_stamp: i64 = 0
        user = False
        i = _next_line(block, 0, n)
        while i < n:
            c = block[i]
            line_end = i  # where to look for the line's CR LF from
            if c == 13 or c == 10:
                pass
            elif not _has_key(block, i, n, b"Nats-"):
                user = True
            elif _has_key(block, i + 5, n, b"Sequence:"):
                start = _value_start(block, i + 14, n)
                end = start
                while end < n and 48 <= block[end] <= 57:
                    end += 1
                if end - start > SEQUENCE_DIGITS_MAX:
                    return None
                if end > start:  # without digits, no sequence (as `_SEQ` reads it)
                    seq = 0
                    for k in range(start, end):
                        seq = seq * 10 + block[k] - 48
                    found_seq += 1
                line_end = end
            elif _has_key(block, i + 5, n, b"Subject:"):
                subject_start = _value_start(block, i + 13, n)
                subject_end = _text_end(block, subject_start, n)
                found_subject += 1
                line_end = subject_end
            elif _has_key(block, i + 5, n, b"Time-Stamp:"):
                stamp_start = _value_start(block, i + 16, n)
                stamp_end = _text_end(block, stamp_start, n)
                found_stamp += 1
                line_end = stamp_end
            elif not user:
                user = not _direct_key(block, i + 5, n)
            i = _next_line(block, line_end, n)
        if found_seq != 1 or found_subject != 1 or found_stamp != 1:
            return None
        seqs.append(seq)
        subjects.append(block[subject_start:subject_end])
        stamps.append(block[stamp_start:stamp_end])
        if user:
            user_rows.append(row)
    return seqs, subjects, stamps, user_rows


def _is_space(c: i64) -> bool:
    """ASCII whitespace, as `bytes.strip()` strips it."""
    return c == 32 or 9 <= c <= 13


DIRECT_NAMES: Final = frozenset(
    {
        b"Nats-Stream",
        b"Nats-Subject",
        b"Nats-Sequence",
        b"Nats-Time-Stamp",
        b"Nats-Num-Pending",
        b"Nats-Last-Sequence",
        b"Nats-UpTo-Sequence",
    }
)


def user_headers(
    blocks: list[bytes], rows: list[int], n: i64
) -> tuple[list[int], list[bytes], list[int], list[bytes], list[bool]]:
    """The headers column of the first `n` blocks, only `rows` having user headers, as
    the flat lists of an Arrow map of lists: (row offsets into the keys, keys, key offsets
    into the values, values, null rows). Read as `wire.parse_header_lines` and
    `wire.group_headers` read each block: `Key: value` lines after the first line, split
    at CR LF, each side stripped of ASCII whitespace, the direct-get headers dropped,
    repeated keys grouped in first-seen order; a row left without any is null (ADR 0059)."""
    row_offsets: list[int] = [0]
    keys: list[bytes] = []
    key_offsets: list[int] = [0]
    values: list[bytes] = []
    nulls: list[bool] = []
    at: i64 = 0
    for row in range(n):
        grouped: dict[bytes, list[bytes]] = {}
        if at < len(rows) and rows[at] == row:
            at += 1
            block = blocks[row]
            size: i64 = len(block)
            i = _next_line(block, 0, size)
            while i < size:
                line_end = _next_line(block, i, size)
                stop = line_end  # the line without its CR LF (the last may have none)
                if line_end - 2 >= i and block[line_end - 2] == 13 and block[line_end - 1] == 10:
                    stop = line_end - 2
                if _has_key(block, i, stop, b"Nats-") and (
                    _has_key(block, i + 5, stop, b"Sequence:")
                    or _has_key(block, i + 5, stop, b"Subject:")
                    or _has_key(block, i + 5, stop, b"Time-Stamp:")
                    or _direct_key(block, i + 5, stop)
                ):
                    i = line_end  # a direct-get header as servers write it: no slices
                    continue
                colon = i
                while colon < stop and block[colon] != 58:
                    colon += 1
                if colon < stop:
                    key_start = i
                    key_end = colon
                    while key_start < key_end and _is_space(block[key_start]):
                        key_start += 1
                    while key_end > key_start and _is_space(block[key_end - 1]):
                        key_end -= 1
                    value_start = colon + 1
                    value_end = stop
                    while value_start < value_end and _is_space(block[value_start]):
                        value_start += 1
                    while value_end > value_start and _is_space(block[value_end - 1]):
                        value_end -= 1
                    key = block[key_start:key_end]
                    if key not in DIRECT_NAMES:
                        value = block[value_start:value_end]
                        found = grouped.get(key)
                        if found is None:
                            grouped[key] = [value]
                        else:
                            found.append(value)
                i = line_end
        for key, found in grouped.items():
            keys.append(key)
            values.extend(found)
            key_offsets.append(len(values))
        row_offsets.append(len(keys))
        nulls.append(not grouped)
    return row_offsets, keys, key_offsets, values, nulls
