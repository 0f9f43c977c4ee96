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
from typing import Any

from brook.protocol.errors import MAX_CONTROL_LINE, MAX_PAYLOAD, ProtocolError

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
class Msg:
    """`LMSG`/`HMSG`; `queues` names the queue groups the sender chose this side for."""

    subject: bytes
    reply: bytes | None
    queues: tuple[bytes, ...]
    header: bytes | None
    payload: bytes


@dataclass(frozen=True, slots=True)
class Simple:
    op: bytes  # b"PING", b"PONG" or b"+OK"


@dataclass(frozen=True, slots=True)
class Err:
    text: str


LeafOp = Info | Connect | Sub | Unsub | Msg | Simple | Err


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


class LeafParser:
    """Incremental parser: `feed(bytes)` returns the complete operations received so far."""

    def __init__(self, *, max_control_line: int, max_payload: int) -> None:
        self._buf = b""
        self._max_line = max_control_line
        self._max_payload = max_payload

    def feed(self, data: bytes) -> list[LeafOp]:
        buf = self._buf + data if self._buf else data
        out: list[LeafOp] = []
        pos = 0
        size = len(buf)
        while pos < size:
            eol = buf.find(b"\r\n", pos)
            if eol < 0:
                if size - pos > self._max_line:
                    raise ProtocolError("control line too long", MAX_CONTROL_LINE)
                break
            line = buf[pos:eol]
            args = line.split()
            if not args:
                raise ProtocolError("unknown operation")
            op = args[0].upper()
            if op in (b"LMSG", b"HMSG"):
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
                start = eol + 2
                if size < start + total + 2:
                    break  # the body is not all here yet
                if buf[start + total : start + total + 2] != b"\r\n":
                    raise ProtocolError("payload not followed by CRLF", None)
                body = buf[start : start + total]
                if hdr >= 0:
                    out.append(Msg(args[1], reply, queues, body[:hdr], body[hdr:]))
                else:
                    out.append(Msg(args[1], reply, queues, None, body))
                pos = start + total + 2
                continue
            if len(line) > self._max_line:
                raise ProtocolError("control line too long", MAX_CONTROL_LINE)
            out.append(_control(op, args, line))
            pos = eol + 2
        self._buf = buf[pos:]
        return out


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
