"""Byte encoders for the NATS protocol, both directions (wire reference §1.3-§1.9).

Server→client frames (INFO, MSG, HMSG, PING, PONG, +OK, -ERR) are what Brook sends;
client→server frames (CONNECT, PUB, HPUB, SUB, UNSUB) serve tests, benchmarks and
tools that speak the protocol without a client library. All return complete frames.
"""

from __future__ import annotations

import json
from typing import Any

PING = b"PING\r\n"
PONG = b"PONG\r\n"
OK = b"+OK\r\n"
CRLF = b"\r\n"


def _json(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def info(fields: dict[str, Any]) -> bytes:
    # nats-server writes a space between the JSON and CRLF; clients strip it.
    return b"INFO " + _json(fields) + b" \r\n"


def err(text: str) -> bytes:
    return b"-ERR '" + text.encode() + b"'\r\n"


def msg(subject: bytes, sid: bytes, reply: bytes | None, payload: bytes) -> bytes:
    if reply:
        return b"MSG %b %b %b %d\r\n%b\r\n" % (subject, sid, reply, len(payload), payload)
    return b"MSG %b %b %d\r\n%b\r\n" % (subject, sid, len(payload), payload)


def hmsg(subject: bytes, sid: bytes, reply: bytes | None, header: bytes, payload: bytes) -> bytes:
    hl = len(header)
    if reply:
        return b"HMSG %b %b %b %d %d\r\n%b%b\r\n" % (
            subject, sid, reply, hl, hl + len(payload), header, payload,
        )  # fmt: skip
    return b"HMSG %b %b %d %d\r\n%b%b\r\n" % (subject, sid, hl, hl + len(payload), header, payload)


def connect(options: dict[str, Any]) -> bytes:
    return b"CONNECT " + _json(options) + CRLF


def pub(subject: bytes, payload: bytes, reply: bytes | None = None) -> bytes:
    if reply:
        return b"PUB %b %b %d\r\n%b\r\n" % (subject, reply, len(payload), payload)
    return b"PUB %b %d\r\n%b\r\n" % (subject, len(payload), payload)


def hpub(subject: bytes, header: bytes, payload: bytes, reply: bytes | None = None) -> bytes:
    hl = len(header)
    if reply:
        return b"HPUB %b %b %d %d\r\n%b%b\r\n" % (
            subject, reply, hl, hl + len(payload), header, payload,
        )  # fmt: skip
    return b"HPUB %b %d %d\r\n%b%b\r\n" % (subject, hl, hl + len(payload), header, payload)


def sub(subject: bytes, sid: bytes, queue: bytes | None = None) -> bytes:
    if queue:
        return b"SUB %b %b %b\r\n" % (subject, queue, sid)
    return b"SUB %b %b\r\n" % (subject, sid)


def unsub(sid: bytes, max_msgs: int | None = None) -> bytes:
    if max_msgs is None:
        return b"UNSUB %b\r\n" % sid
    return b"UNSUB %b %d\r\n" % (sid, max_msgs)
