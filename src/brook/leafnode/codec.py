"""Sans-I/O codec of the leafnode protocol, both roles (nats-server's `leafnode.go`).

Operations: `INFO {..}`, `CONNECT {..}`, `LS+ <subject> [<queue> <weight>]`,
`LS- <subject> [<queue>]`, `LMSG <subject> [<reply>] <size>` and
`HMSG <subject> [<reply>] <hdr> <total>`, their queue forms `LMSG <subject> + <reply>
<q1 q2..> <size>` and `LMSG <subject> | <q1 q2..> <size>`, PING, PONG, +OK, -ERR. Leaf
connections are bound to one account at each end, so no line carries an account.

A malformed line raises `ProtocolError` (nats-server answers `-ERR 'Unknown Protocol
Operation'` or closes on a bad argument count); a control line or payload over the bounds
given raises it before the bytes are held.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Protocol

from brook.protocol.errors import MAX_CONTROL_LINE, MAX_PAYLOAD, ProtocolError
from brook.protocol.lines import header_line, message_line
from brook.protocol.reads import ReadBuffer

PING = b"PING\r\n"
PONG = b"PONG\r\n"


@dataclass(frozen=True, slots=True)
class Info:
    fields: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Connect:
    fields: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Sub:
    """`LS+`: interest in `subject`, or `weight` members of `queue` on it."""

    subject: bytes
    queue: bytes | None
    weight: int


@dataclass(frozen=True, slots=True)
class Unsub:
    subject: bytes
    queue: bytes | None


@dataclass(frozen=True, slots=True)
class Simple:
    op: bytes  # b"PING", b"PONG" or b"+OK"


@dataclass(frozen=True, slots=True)
class Err:
    text: str


LeafOp = Info | Connect | Sub | Unsub | Simple | Err
"""Every operation but LMSG/HMSG, which go to `LeafOpHandler.on_msg` as their parts."""


class LeafOpHandler(Protocol):
    """Receives the operations of one leaf connection, in order (as `ClientOpHandler`
    does a client's, ADR 0002: a message costs no object of its own)."""

    def on_msg(
        self,
        subject: bytes,
        reply: bytes | None,
        queues: tuple[bytes, ...],
        header: bytes | None,
        payload: bytes,
    ) -> None:
        """An LMSG/HMSG; `queues` names the queue groups the sender chose this side for."""
        ...

    def on_op(self, op: LeafOp) -> None: ...


def _size(arg: bytes) -> int:
    if not arg.isdigit():
        raise ProtocolError(f"bad size {arg[:20]!r}", None)
    return int(arg)


def _message_args(args: list[bytes], sizes: int) -> tuple[bytes | None, tuple[bytes, ...]]:
    """(reply, queues) of an LMSG/HMSG line's arguments, `sizes` trailing size fields
    (1 for LMSG, 2 for HMSG), as nats-server's `processLeafMsgArgs`."""
    middle = args[2 : len(args) - sizes]
    if not middle:
        return None, ()
    if len(middle) == 1:
        return middle[0], ()
    if middle[0] == b"+":
        return middle[1], tuple(middle[2:])
    if middle[0] == b"|":
        return None, tuple(middle[1:])
    raise ProtocolError("bad or missing reply indicator", None)


class LeafParser(ReadBuffer):
    """Incremental parser: `feed(bytes)` calls `handler` for each complete operation.

    `handler` may be replaced between operations (the hub's acceptor hands the rest of
    a read to the connection its CONNECT logged in); `stop()` ends the parsing of what
    was received (a connection that is closing).

    An LMSG/HMSG without queue names whose line is single-spaced and whose body is in
    the same read takes a fast path (as the client parser's PUB and HPUB; the line read
    by the compiled `protocol.lines.message_line` or `header_line`): the general one
    reads every other form, every error, and a message split across reads, whose line is
    read once and whose body gathers in `_chunks`, joined once when complete. Either gives the
    same result however the bytes were split into reads (tests/unit/test_leaf_codec.py).
    """

    __slots__ = (
        "_max_line",
        "_max_payload",
        "_pending",
        "handler",
        "stopped",
    )

    def __init__(self, handler: LeafOpHandler, *, max_control_line: int, max_payload: int) -> None:
        super().__init__()
        self.handler = handler
        self.stopped = False
        self._max_line = max_control_line
        self._max_payload = max_payload
        # An LMSG/HMSG whose line was read and whose body is still arriving: (subject,
        # reply, queues, header size or -1, total size).
        self._pending: tuple[bytes, bytes | None, tuple[bytes, ...], int, int] | None = None

    def stop(self) -> None:
        self.stopped = True
        self._clear_reads()

    def feed(self, data: bytes) -> None:
        if self.stopped:
            return
        buf = self._input(data)
        if buf is None:
            return
        pos = 0
        size = len(buf)
        max_payload = self._max_payload
        max_line = self._max_line
        on_msg = self.handler.on_msg
        try:
            if self._pending is not None:
                pos = self._take_body(buf, 0)
                if pos < 0:
                    return
            while pos < size and not self.stopped:
                subject_end, reply_end, total, start = message_line(
                    buf, pos, size, b"LMSG ", False, max_line
                )
                if start >= 0:
                    end = start + total
                    if total <= max_payload and buf[end : end + 2] == b"\r\n":
                        reply = (
                            buf[subject_end + 1 : reply_end]
                            if reply_end > subject_end + 1
                            else None
                        )
                        on_msg(buf[pos + 5 : subject_end], reply, (), None, buf[start:end])
                        pos = end + 2
                        continue
                elif buf[pos] == 72:  # "H": an HMSG, read likewise
                    subject_end, reply_end, hdr, total, start = header_line(
                        buf, pos, size, b"HMSG ", False, max_line
                    )
                    end = start + total
                    if start >= 0 and total <= max_payload and buf[end : end + 2] == b"\r\n":
                        on_msg(
                            buf[pos + 5 : subject_end],
                            buf[subject_end + 1 : reply_end]
                            if reply_end > subject_end + 1
                            else None,
                            (),
                            buf[start : start + hdr],
                            buf[start + hdr : end],
                        )
                        pos = end + 2
                        continue
                eol = buf.find(b"\r\n", pos)
                if eol < 0:
                    if size - pos > max_line:
                        raise ProtocolError("control line too long", MAX_CONTROL_LINE)
                    self._buf = buf[pos:]
                    return
                pos = self._line(buf, pos, eol)
                on_msg = self.handler.on_msg  # the handler may have been replaced
                if self._pending is not None:
                    pos = self._take_body(buf, pos)
                    if pos < 0:
                        return
        except ProtocolError:
            self.stop()
            self._pending = None
            raise
        if pos < size and not self.stopped:
            self._buf = buf[pos:]

    def _line(self, buf: bytes, pos: int, eol: int) -> int:
        """The general path of the control line at `pos`: an LMSG/HMSG's line leaves it
        pending for its body, any other operation goes to the handler. Returns where the
        next line (or the body) starts."""
        line = buf[pos:eol]
        args = line.split()
        if not args:
            raise ProtocolError("unknown operation")
        if len(line) > self._max_line:
            raise ProtocolError("control line too long", MAX_CONTROL_LINE)
        op = args[0].upper()
        if op == b"LMSG" or op == b"HMSG":
            sizes = 2 if op == b"HMSG" else 1
            if len(args) < 2 + sizes:
                raise ProtocolError(f"bad {op.decode()} line", None)
            total = _size(args[-1])
            hdr = _size(args[-2]) if sizes == 2 else -1
            if hdr > total:
                raise ProtocolError("header size larger than total size", None)
            if total > self._max_payload:
                raise ProtocolError("payload too large", MAX_PAYLOAD)
            reply, queues = _message_args(args, sizes)
            self._pending = (args[1], reply, queues, hdr, total)
            return eol + 2
        self.handler.on_op(_control(op, args, line))
        return eol + 2

    def _take_body(self, buf: bytes, pos: int) -> int:
        """Hand the pending message to the handler if its body is complete at `pos`
        (where the next operation starts is returned); -1 when it is not: the body so
        far is kept in `_chunks`."""
        pending = self._pending
        assert pending is not None
        end = pos + pending[4]
        if end + 2 > len(buf):
            self._wait_for_body(buf, pos, pending[4])
            return -1
        if buf[end : end + 2] != b"\r\n":
            raise ProtocolError("payload not followed by CRLF")  # as nats-server: -ERR
        self._pending = None
        subject, reply, queues, hdr, _ = pending
        if hdr >= 0:
            self.handler.on_msg(subject, reply, queues, buf[pos : pos + hdr], buf[pos + hdr : end])
        else:
            self.handler.on_msg(subject, reply, queues, None, buf[pos:end])
        return end + 2


def _control(op: bytes, args: list[bytes], line: bytes) -> LeafOp:
    if op == b"LS+":
        if len(args) == 2:
            return Sub(args[1], None, 1)
        if len(args) == 4:
            return Sub(args[1], args[2], _size(args[3]))
        raise ProtocolError("LS+ parse error", None)
    if op == b"LS-":
        if len(args) in (2, 3):
            return Unsub(args[1], args[2] if len(args) == 3 else None)
        raise ProtocolError("LS- parse error", None)
    if op in (b"PING", b"PONG", b"+OK") and len(args) == 1:
        return Simple(op)
    if op in (b"INFO", b"CONNECT"):
        try:
            fields = json.loads(line[len(op) :])
        except ValueError:
            raise ProtocolError(f"bad {op.decode()} JSON", None) from None
        if not isinstance(fields, dict):
            raise ProtocolError(f"bad {op.decode()} JSON", None)
        return Info(fields) if op == b"INFO" else Connect(fields)
    if op == b"-ERR":
        text = line[4:].strip().decode("utf-8", "replace")
        return Err(text[1:-1] if len(text) > 1 and text[0] == text[-1] == "'" else text)
    raise ProtocolError("unknown operation")


def _json(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def info(fields: dict[str, Any]) -> bytes:
    return b"INFO " + _json(fields) + b" \r\n"


def connect(fields: dict[str, Any]) -> bytes:
    return b"CONNECT " + _json(fields) + b"\r\n"


def err(text: str) -> bytes:
    return b"-ERR '" + text.encode() + b"'\r\n"


def sub(key: bytes, weight: int) -> bytes:
    """`LS+` of an interest key (`subject` or `subject queue`), with the queue weight."""
    if b" " in key:
        return b"LS+ %b %d\r\n" % (key, weight)
    return b"LS+ %b\r\n" % key


def unsub(key: bytes) -> bytes:
    return b"LS- %b\r\n" % key


def message(
    subject: bytes,
    reply: bytes | None,
    queues: list[bytes] | None,
    header: bytes | None,
    payload: bytes,
) -> bytes:
    """An LMSG (no header) or HMSG frame, with the queue names the receiver is to serve."""
    if queues:
        middle = (b"+ " + reply + b" " if reply else b"| ") + b" ".join(queues) + b" "
    elif reply:
        middle = reply + b" "
    else:
        middle = b""
    if header is None:
        return b"LMSG %b %b%d\r\n%b\r\n" % (subject, middle, len(payload), payload)
    hl = len(header)
    return b"HMSG %b %b%d %d\r\n%b%b\r\n" % (
        subject, middle, hl, hl + len(payload), header, payload,
    )  # fmt: skip
