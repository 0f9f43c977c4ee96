"""Sans-I/O parser for what NATS clients send: CONNECT, PUB, HPUB, SUB, UNSUB, PING, PONG.

`ClientParser.feed(data)` consumes any chunk of bytes (split anywhere) and calls one
`ClientOpHandler` method per complete operation, in order. Calling back rather than
returning event objects keeps the hot path free of per-message allocations beyond the
subject and payload slices (docs/adr/0002-parser-callbacks.md).

Framing follows nats-server's observable behaviour (wire reference §1.1, and
`transcripts/proto-errors.txt`):

* control lines end at LF, with an optional CR before it; operation names are
  case-insensitive; arguments are split on runs of spaces and tabs;
* the argument part of a control line may be at most `max_control_line` bytes →
  `-ERR 'maximum control line exceeded'`;
* a PUB/HPUB whose declared size exceeds `max_payload` is refused as soon as its control
  line is read → `-ERR 'Maximum Payload Violation'`;
* a payload must be followed by exactly CRLF, an unknown operation (a line starting with
  a blank included) or an operation that needs arguments but has none →
  `-ERR 'Unknown Protocol Operation'`;
* wrong argument counts or malformed sizes (anything but 1-9 ASCII digits, leading zeros
  counted, as nats-server's parseSize) → the connection closes without an -ERR.

Every problem raises `ProtocolError`; nothing else escapes `feed` for any input.
"""

from __future__ import annotations

import json
import re
from typing import Any, Protocol

from brook.protocol.errors import MAX_CONTROL_LINE, MAX_PAYLOAD, UNKNOWN_OPERATION, ProtocolError
from brook.protocol.lines import SIZE_DIGITS_MAX, header_line, message_line
from brook.protocol.reads import ReadBuffer


class ClientOpHandler(Protocol):
    """Receives the operations of one client connection, in order."""

    def on_connect(self, options: dict[str, Any]) -> None: ...

    def on_pub(
        self, subject: bytes, reply: bytes | None, header: bytes | None, payload: bytes
    ) -> None: ...

    def on_pub_run(self, subjects: list[bytes], payload: bytes) -> None:
        """A run of consecutive PUBs alike but for their subjects, all under one of the
        parser's `run_prefixes` (see `ClientParser`): `on_pub(subject, None, None,
        payload)` for each subject, in order."""
        ...

    def on_sub(self, subject: bytes, queue: bytes | None, sid: bytes) -> None: ...

    def on_unsub(self, sid: bytes, max_msgs: int | None) -> None: ...

    def on_ping(self) -> None: ...

    def on_pong(self) -> None: ...


_OPS = frozenset(
    (b"PUB", b"HPUB", b"SUB", b"UNSUB", b"PING", b"PONG", b"CONNECT", b"INFO", b"+OK", b"-ERR")
)


# A PUB of a run (`_pub_run`): subject, blanks, size; no reply.
_RUN_PUB = re.compile(rb"PUB ([^ \t\r\n]+) +([0-9]{1,9})\r\n")

# What may not occur in a subject (nor, but for its blanks, in a run's tail).
_SUBJECT_BREAKS = b" \t\r\n"
# `_run_span`'s first window, in PUBs (of the first one's length), and its largest.
_SPAN_FIRST_OPS = 8
_SPAN_MAX_BYTES = 1 << 20


def _pub_run(
    buf: bytes,
    first: int,
    subject_end: int,
    start: int,
    size: int,
    prefixes: tuple[bytes, ...],
    heads: tuple[bytes, ...],
    max_payload: int,
    max_control_line: int,
) -> tuple[list[bytes], bytes, int] | None:
    """A run of PUBs alike but for their subjects (all longer than, and starting as, the
    one of `prefixes` the first's subject starts with; no reply; the same blanks, size
    and payload), from the one at `first` (a line `_RUN_PUB` matches: its subject ends at
    `subject_end`, its payload of `size` bytes starts at `start`): their subjects, the
    payload, and where the run ends; None when the first one is not complete or not
    right (the general path reads it then). Each is exactly what the general path would
    make of it: the run is handed over together (`on_pub_run`). `heads`: `PUB ` and each
    of `prefixes`.

    A client sends such PUBs alike (a consumer's acks, say), so after the first one the
    run is taken in windows of growing size, each checked with a few scans over its
    bytes (`_run_span`); where a window holds anything else, a smaller one is tried, then
    one PUB at a time (the blanks before the size may differ then)."""
    subject = buf[first + 4 : subject_end]
    head = next(
        (h for prefix, h in zip(prefixes, heads, strict=True) if subject.startswith(prefix)),
        heads[-1],
    )
    end = start + size
    if size > max_payload or buf[end : end + 2] != b"\r\n" or subject_end - first <= len(head):
        return None
    subjects = [subject]
    payload = buf[start:end]
    pos = end + 2
    tail = buf[subject_end:pos]  # blanks, size, CRLF, payload, CRLF
    longest = max_control_line - len(tail) + len(payload) + 4 - len(b"PUB ")
    if not buf.startswith(head, pos):
        return subjects, payload, pos  # a run of one (at the end of a read, often)
    unit = pos - first
    budget = unit * _SPAN_FIRST_OPS
    while budget >= unit:
        span = _run_span(buf, pos, head, tail, budget, longest)
        if span is None:
            budget //= 2
            continue
        subjects += span[0]
        pos = span[1]
        if not buf.startswith(head, pos):
            return subjects, payload, pos
        budget = min(budget * 2, _SPAN_MAX_BYTES)
    rest = tail.lstrip(b" ")  # size, CRLF, payload, CRLF: the blanks may differ here
    while (
        (m := _RUN_PUB.match(buf, pos)) is not None
        and buf.startswith(rest, m.start(2))
        and m.end(1) - pos > len(head)
        and m.end() - 2 - pos <= max_control_line
    ):
        subjects.append(m[1])
        pos = m.start(2) + len(rest)
        if not buf.startswith(head, pos):
            break
    return subjects, payload, pos


def _starts_run(subject: bytes, prefixes: tuple[bytes, ...]) -> bool:
    """Does `subject` start with one of `prefixes`? One by one: a compiled
    `bytes.startswith` of one bytes argument is native, of a tuple a Python call."""
    return any(subject.startswith(prefix) for prefix in prefixes)


def _run_span(
    buf: bytes, pos: int, head: bytes, tail: bytes, budget: int, longest: int
) -> tuple[list[bytes], int] | None:
    """The subjects of the PUBs `PUB <subject><tail>` that fill `buf` from `pos` up to
    the end of the last `tail` within `budget` bytes, and that end; None unless every one
    of them is such a PUB whose subject (starting as `head` after `PUB `, and longer; no
    blank, tab, CR or LF) is at most `longest` bytes. `buf` starts with `head` at `pos`."""
    last = buf.rfind(tail, pos, pos + budget)
    if last < 0:
        return None
    body = buf[pos + 4 : last]  # subject, tail + "PUB ", subject, ..., subject
    sep = tail + b"PUB "
    subjects = body.split(sep)
    joints = len(subjects) - 1
    breaks = len(sep) - len(sep.translate(None, _SUBJECT_BREAKS))
    if (
        len(body) - len(body.translate(None, _SUBJECT_BREAKS)) != joints * breaks
        or body.count(tail + head) != joints
        or min(map(len, subjects)) <= len(head) - 4
        or max(map(len, subjects)) > longest
    ):
        return None
    return subjects, last + len(tail)


def _size(token: bytes, what: str) -> int:
    # bytes.isdigit() is ASCII-only and rejects signs, spaces and underscores, which
    # int() would accept; nats-server accepts plain decimal digits only.
    if not token.isdigit() or len(token) > SIZE_DIGITS_MAX:
        raise ProtocolError(f"invalid {what} size {token[:32]!r}", None)
    return int(token)


def _unsub_max(token: bytes) -> int | None:
    # nats-server: a max it cannot parse counts as "no max", i.e. unsubscribe now.
    if not token.isdigit() or len(token) > SIZE_DIGITS_MAX:
        return None
    return int(token)


def _no_args(op: bytes, line: bytes) -> ProtocolError:
    # "PUB" alone is an unknown operation to nats-server; "PUB " (blanks, then nothing) is
    # a malformed PUB and closes silently.
    if line[len(op) : len(op) + 1] in (b" ", b"\t"):
        return ProtocolError(f"{op.decode()} with blank arguments", None)
    return ProtocolError(f"{op.decode()} without arguments")


class ClientParser(ReadBuffer):
    """Incremental parser of client→server operations for one connection.

    `paused` lets the handler stop parsing after the current operation (used while a
    CONNECT's credentials are checked off the event loop); `resume()` continues with the
    bytes already received.

    `run_prefixes`: subjects that clients publish to in runs, one PUB after another with
    no reply, the same size and payload (a JetStream consumer's acks: the connection
    passes the router's exclusive prefixes). Consecutive such PUBs under one of them go
    to the handler as one `on_pub_run` (ADR 0006); any other PUB goes to `on_pub`.
    """

    __slots__ = (
        "_handler",
        "_pending",
        "_run_heads",
        "_run_prefixes",
        "max_control_line",
        "max_payload",
        "paused",
    )

    def __init__(
        self,
        handler: ClientOpHandler,
        *,
        max_payload: int,
        max_control_line: int,
        run_prefixes: tuple[bytes, ...] = (),
    ) -> None:
        self._handler = handler
        self._run_prefixes = run_prefixes
        self._run_heads = tuple(b"PUB " + prefix for prefix in run_prefixes)
        self.max_payload = max_payload
        self.max_control_line = max_control_line
        self.paused = False
        super().__init__()
        # A PUB/HPUB whose control line was read and whose payload is still arriving:
        # (subject, reply, header_len, total_len). Payload chunks gather in `_chunks`
        # and are joined once, so a large payload split over many reads is copied once.
        self._pending: tuple[bytes, bytes | None, int, int] | None = None

    def resume(self) -> None:
        self.paused = False
        self.feed(b"")

    def feed(self, data: bytes) -> None:
        """Consume `data`, dispatching every complete operation it finishes."""
        buf = self._input(data)
        if buf is None:
            return
        if self.paused:
            self._buf = buf  # kept whole, pending payload included, until resume()
            return
        n = len(buf)
        pos = 0
        on_pub = self._handler.on_pub
        run_heads = self._run_heads
        run_prefixes = self._run_prefixes
        max_control_line = self.max_control_line
        max_payload = self.max_payload
        try:
            if self._pending is not None:
                pos = self._take_payload(buf, 0)
                if pos < 0:
                    return
            while pos < n and not self.paused:
                # Fast path for the most common operations (`message_line`, `header_line`),
                # payload already received; not for a PUB a run may start with (a
                # consumer's ack). Anything else, including every error, goes through
                # `_dispatch`, so behaviour is the same either way, however the bytes
                # were split into reads.
                subject_end, reply_end, size, start = message_line(
                    buf, pos, n, b"PUB ", True, max_control_line
                )
                if start >= 0:
                    subject = buf[pos + 4 : subject_end]
                    if reply_end < subject_end + 2 and _starts_run(subject, run_prefixes):
                        # No reply, under a run prefix: a consumer's ack, the first of
                        # a run if its line ends in CR LF, as `_RUN_PUB` reads one.
                        run = (
                            _pub_run(
                                buf,
                                pos,
                                subject_end,
                                start,
                                size,
                                run_prefixes,
                                run_heads,
                                max_payload,
                                max_control_line,
                            )
                            if buf[start - 2] == 13
                            else None
                        )
                        if run is not None:
                            subjects, payload, pos = run
                            self._handler.on_pub_run(subjects, payload)
                            continue
                    else:
                        end = start + size
                        if size <= max_payload and buf[end : end + 2] == b"\r\n":
                            reply = (
                                buf[subject_end + 1 : reply_end]
                                if reply_end > subject_end + 1
                                else None
                            )
                            on_pub(subject, reply, None, buf[start:end])
                            pos = end + 2
                            continue
                elif buf[pos] == 72:  # "H": an HPUB, read likewise (`header_line`)
                    subject_end, reply_end, hdr, total, start = header_line(
                        buf, pos, n, b"HPUB ", True, max_control_line
                    )
                    if start >= 0:
                        end = start + total
                        if total <= max_payload and buf[end : end + 2] == b"\r\n":
                            on_pub(
                                buf[pos + 5 : subject_end],
                                buf[subject_end + 1 : reply_end]
                                if reply_end > subject_end + 1
                                else None,
                                buf[start : start + hdr] if hdr else None,
                                buf[start + hdr : end],
                            )
                            pos = end + 2
                            continue
                eol = buf.find(b"\n", pos)
                if eol < 0:
                    self._check_partial_line(buf, pos)
                    self._buf = buf[pos:]
                    return
                line_end = eol - 1 if eol > pos and buf[eol - 1] == 13 else eol
                if (
                    run_heads
                    and line_end - pos <= max_control_line
                    and buf.startswith(run_heads, pos)
                    and (r := _RUN_PUB.match(buf, pos)) is not None
                    and (
                        run := _pub_run(
                            buf,
                            pos,
                            r.end(1),
                            r.end(),
                            int(r[2]),
                            run_prefixes,
                            run_heads,
                            max_payload,
                            max_control_line,
                        )
                    )
                    is not None
                ):
                    subjects, payload, pos = run
                    self._handler.on_pub_run(subjects, payload)
                    continue
                self._dispatch(buf[pos:line_end])
                pos = eol + 1
                if self._pending is not None and not self.paused:
                    pos = self._take_payload(buf, pos)
                    if pos < 0:
                        return
        except ProtocolError:
            self._clear_reads()
            self._pending = None
            raise
        if pos < n:
            self._buf = buf[pos:]

    def _take_payload(self, buf: bytes, pos: int) -> int:
        """Deliver the pending PUB/HPUB if its payload is complete; -1 (stashed) if not."""
        pending = self._pending
        assert pending is not None
        end = pos + pending[3]
        n = len(buf)
        if end + 2 > n:
            # Wait for the rest of the payload without re-parsing the line.
            self._wait_for_body(buf, pos, pending[3])
            return -1
        if buf[end : end + 2] != b"\r\n":
            raise ProtocolError("payload not followed by CRLF")
        hdr_len = pending[2]
        self._pending = None
        if hdr_len:
            self._handler.on_pub(
                pending[0], pending[1], buf[pos : pos + hdr_len], buf[pos + hdr_len : end]
            )
        else:
            self._handler.on_pub(pending[0], pending[1], None, buf[pos:end])
        return end + 2

    def _check_partial_line(self, buf: bytes, pos: int) -> None:
        # Without a line end yet, the argument part (after the op word) is bounded too,
        # so a peer cannot make us buffer an endless control line.
        # The checks and their order are `_dispatch`'s, so where the bytes happen to be
        # split never changes the outcome.
        partial = len(buf) - pos
        if buf[-1] == 13:
            partial -= 1  # the CR of a CRLF whose LF is still to come is not part of the line
        if partial <= self.max_control_line:
            return
        head = buf[pos : pos + 16]
        if head[:1].isspace():
            raise ProtocolError("control line starts with a blank")
        ends = [i for i in (head.find(b" "), head.find(b"\t"), head.find(b"\r")) if i >= 0]
        op_len = min(ends, default=len(head))
        if head[:op_len].upper() not in _OPS:
            if head[:4].upper() not in (b"PING", b"PONG"):
                raise ProtocolError(f"unknown operation {head[:op_len]!r}")
            op_len = 4
        if partial - op_len - 1 > self.max_control_line:
            raise ProtocolError("control line too long", MAX_CONTROL_LINE)

    def _dispatch(self, line: bytes) -> None:
        if line[:1].isspace():
            raise ProtocolError("control line starts with a blank")  # as nats-server
        args = line.split()
        if b"\x0b" in line or b"\x0c" in line:
            # bytes.split() also splits on VT and FF; nats-server splits on blanks and CR only.
            args = [a for a in line.replace(b"\t", b" ").replace(b"\r", b" ").split(b" ") if a]
        if not args:
            raise ProtocolError("empty control line")
        op = args[0].upper()
        op_len = len(op)
        if op not in _OPS:
            if op[:4] not in (b"PING", b"PONG"):
                raise ProtocolError(f"unknown operation {args[0][:16]!r}")
            op = op[:4]  # nats-server reads PING/PONG and ignores the rest of the line
            op_len = 4  # ...which counts as arguments here, to keep buffering bounded
        if len(line) > self.max_control_line and len(line) - op_len - 1 > self.max_control_line:
            raise ProtocolError("control line too long", MAX_CONTROL_LINE)
        nargs = len(args)
        if op == b"PUB":
            if nargs == 3:
                subject, reply, size_tok = args[1], None, args[2]
            elif nargs == 4:
                subject, reply, size_tok = args[1], args[2], args[3]
            elif nargs == 1:
                raise _no_args(op, line)
            else:
                raise ProtocolError("PUB with wrong argument count", None)
            size = _size(size_tok, "payload")
            if size > self.max_payload:
                raise ProtocolError("payload too large", MAX_PAYLOAD)
            self._pending = (subject, reply, 0, size)
        elif op == b"HPUB":
            if nargs == 4:
                subject, reply, hdr_tok, total_tok = args[1], None, args[2], args[3]
            elif nargs == 5:
                subject, reply, hdr_tok, total_tok = args[1], args[2], args[3], args[4]
            elif nargs == 1:
                raise _no_args(op, line)
            else:
                raise ProtocolError("HPUB with wrong argument count", None)
            hdr = _size(hdr_tok, "header")
            total = _size(total_tok, "total")
            if hdr > total:
                raise ProtocolError("header size larger than total size", None)
            if total > self.max_payload:
                raise ProtocolError("payload too large", MAX_PAYLOAD)
            self._pending = (subject, reply, hdr, total)
        elif op == b"PING":
            self._handler.on_ping()
        elif op == b"PONG":
            self._handler.on_pong()
        elif op == b"SUB":
            if nargs == 3:
                self._handler.on_sub(args[1], None, args[2])
            elif nargs == 4:
                self._handler.on_sub(args[1], args[2], args[3])
            elif nargs == 1:
                raise _no_args(op, line)
            else:
                raise ProtocolError("SUB with wrong argument count", None)
        elif op == b"UNSUB":
            if nargs == 2:
                self._handler.on_unsub(args[1], None)
            elif nargs == 3:
                self._handler.on_unsub(args[1], _unsub_max(args[2]))
            elif nargs == 1:
                raise _no_args(op, line)
            else:
                raise ProtocolError("UNSUB with wrong argument count", None)
        elif op == b"CONNECT":
            if nargs == 1:
                raise ProtocolError("CONNECT without options", None)
            self._handler.on_connect(_connect_options(line[len(args[0]) :]))
        elif op == b"+OK":
            pass  # nats-server ignores it from clients
        elif op == b"INFO":
            # Ignored from clients when it is JSON; anything else closes the connection.
            _json_object(line[len(args[0]) :], "INFO")
        elif op == b"-ERR":
            if nargs == 1:
                raise _no_args(op, line)
            raise ProtocolError("client sent -ERR", None)
        else:
            raise ProtocolError(f"unknown operation {args[0][:16]!r}")


def _json_object(raw: bytes, what: str) -> dict[str, Any]:
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError) as exc:  # RecursionError: deep `[[[[...` nesting
        raise ProtocolError(f"{what} is not JSON: {exc}", None) from None
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ProtocolError(f"{what} is not a JSON object", None)
    return value


def _connect_options(raw: bytes) -> dict[str, Any]:
    # Go's json.Unmarshal of `null` into a struct leaves it unchanged, hence {} for null.
    return _json_object(raw, "CONNECT")


__all__ = ["UNKNOWN_OPERATION", "ClientOpHandler", "ClientParser", "ProtocolError"]
