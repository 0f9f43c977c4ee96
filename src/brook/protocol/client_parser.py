"""Sans-I/O parser for what a NATS server sends: INFO, MSG, HMSG, PING, PONG, +OK, -ERR.

Brook's server never needs this; tests, benchmarks and protocol tools do, to check the
server's bytes exactly rather than through a client library's interpretation.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from brook.protocol.errors import ProtocolError


@dataclass(frozen=True, slots=True)
class Info:
    fields: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Msg:
    subject: bytes
    sid: bytes
    reply: bytes | None
    header: bytes | None
    payload: bytes


@dataclass(frozen=True, slots=True)
class Simple:
    op: str  # "PING", "PONG" or "+OK"


@dataclass(frozen=True, slots=True)
class Err:
    text: str


ServerOp = Info | Msg | Simple | Err


class ServerParser:
    """Incremental parser: `feed(bytes)` returns the complete operations received so far."""

    def __init__(self) -> None:
        self._buf = b""

    def feed(self, data: bytes) -> list[ServerOp]:
        buf = self._buf + data
        out: list[ServerOp] = []
        pos = 0
        while True:
            eol = buf.find(b"\r\n", pos)
            if eol < 0:
                break
            line = buf[pos:eol]
            args = line.split()
            if not args:
                raise ProtocolError("empty line from server")
            op = args[0]
            if op in (b"MSG", b"HMSG"):
                has_hdr = op == b"HMSG"
                sizes = 2 if has_hdr else 1
                if len(args) not in (3 + sizes, 4 + sizes):
                    raise ProtocolError(f"bad {op.decode()} line {line!r}")
                reply = args[3] if len(args) == 4 + sizes else None
                total = int(args[-1])
                hdr_len = int(args[-2]) if has_hdr else 0
                start = eol + 2
                if len(buf) < start + total + 2:
                    break
                body = buf[start : start + total]
                if buf[start + total : start + total + 2] != b"\r\n":
                    raise ProtocolError("payload not followed by CRLF")
                header = body[:hdr_len] if has_hdr else None
                out.append(Msg(args[1], args[2], reply, header, body[hdr_len:]))
                pos = start + total + 2
                continue
            if op == b"INFO":
                out.append(Info(json.loads(line[4:])))
            elif op in (b"PING", b"PONG", b"+OK"):
                out.append(Simple(op.decode()))
            elif op == b"-ERR":
                text = line[4:].strip().decode()
                out.append(Err(text[1:-1] if text.startswith("'") else text))
            else:
                raise ProtocolError(f"unknown server operation {line[:32]!r}")
            pos = eol + 2
        self._buf = buf[pos:]
        return out
