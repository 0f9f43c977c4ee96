"""Raw message access on top of nats-py: header blocks in, header blocks out.

nats-py turns every message into a `Msg` with headers parsed into a `dict[str, str]`, which
loses repeated header keys (JetStream allows them) and costs more per message than the rest
of the read path. `RawClient` is the standard nats-py client (connect, auth, TLS, reconnects,
pings stay nats-py's) with its protocol parser replaced by `FrameParser`: messages of
subscriptions registered with `raw_subscribe` are sliced out of each socket read and go
straight to a synchronous handler with the raw header block, with no per-message coroutine
or queue (ADR 0050). Writes build HPUB frames here, so multi-valued headers survive and no
per-message coroutine runs.

This relies on internals of the pinned nats-py (2.16.0): the parser attribute `Client._ps`
(nats-py calls its `parse` and `reset`), `Client._process_msg` and the `_process_ping`/
`_pong`/`_info`/`_err` callbacks, and `Client._send_command`/`_flush_pending`, its write
buffer. tests/spark/test_wire.py checks them against the installed client.
"""

from __future__ import annotations

import calendar
import datetime as dt
import json
import re
import time
from collections.abc import Iterable
from typing import Any

from nats.aio.client import Client
from nats.aio.subscription import Subscription
from nats.errors import ProtocolError
from nats.protocol import parser as nats_parser

from brook_spark import framescan
from brook_spark.framescan import RawHandler

STATUS_LINE_PREFIX = b"NATS/1.0 "
HEADER_LINE = b"NATS/1.0\r\n"
# Headers a server appends to direct-get replies; never part of the user's headers.
DIRECT_HEADERS = frozenset(
    {
        "Nats-Stream",
        "Nats-Subject",
        "Nats-Sequence",
        "Nats-Time-Stamp",
        "Nats-Num-Pending",
        "Nats-Last-Sequence",
        "Nats-UpTo-Sequence",
    }
)
# `framescan.scan` reads a line byte by byte: compiled, 3 times faster than this module's
# loop (`find`, `split`, `int`); interpreted, 2 times slower, so then the loop reads all.
SCAN_COMPILED = not framescan.__file__.endswith(".py")
_RFC3339 = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|z|[+-]\d\d:\d\d)?$")
_HEADER_KEY = re.compile(r"^[!-9;-~]+$")  # printable ASCII except ':' and space


class RawClient(Client):
    """nats-py's client plus subscriptions whose messages bypass `Msg` construction."""

    def __init__(self) -> None:
        super().__init__()
        self._raw_handlers: dict[int, RawHandler] = {}
        self._ps = FrameParser(self)

    async def raw_subscribe(self, subject: str, handler: RawHandler) -> Subscription:
        async def unused(_msg: Any) -> None:  # raw messages never reach nats-py's queue
            return None

        sub = await self.subscribe(subject, cb=unused)
        self._raw_handlers[sub._id] = handler
        return sub

    async def raw_unsubscribe(self, sub: Subscription) -> None:
        self._raw_handlers.pop(sub._id, None)
        if not self.is_closed:
            await sub.unsubscribe()

    async def process_other(
        self, sid: int, subject: bytes, reply: bytes, data: bytes, headers: bytes | None
    ) -> None:
        """A message of a subscription made with nats-py's `subscribe`."""
        # nats-py passes None for "no headers" although it annotates bytes.
        await self._process_msg(sid, subject, reply, data, headers or b"")

    def raw_publish_nowait(self, frame: bytes) -> None:
        """Queue one PUB/HPUB frame; `flush_frames` hands them to the socket."""
        self._pending.append(frame)
        self._pending_data_size += len(frame)

    def raw_publish_many(self, frames: list[bytes]) -> None:
        """Queue whole PUB/HPUB frames at once; `flush_frames` hands them to the socket."""
        self._pending.extend(frames)
        self._pending_data_size += sum(map(len, frames))

    async def flush_frames(self) -> None:
        """Kick nats-py's flusher unless a kick is already queued (as `publish` does)."""
        queue = self._flush_queue
        if self._pending_data_size > 0 and queue is not None and queue.empty():
            await self._flush_pending()


class FrameParser(nats_parser.Parser):
    """nats-py's protocol parser, replaced by one that walks a socket read frame by frame.

    nats-py's parser copies each message out of a `bytearray`, deletes it from the front and
    awaits `_process_msg` per message: about 3 us a message, more than the rest of a Spark
    read (ADR 0050). This one finds each control line in the bytes of the read, slices the
    header block and payload out of them and calls a raw subscription's handler directly
    (the common frames in `framescan.scan`, compiled: ADR 0059);
    other subscriptions' messages go through `_process_msg` as before, and every other
    operation (`PING`, `PONG`, `INFO`, `+OK`, `-ERR`) to nats-py's own handling. A frame cut
    by the end of a read is kept (as a list of parts, so a large payload is joined once) until
    the rest arrives. nats-py calls only `parse` and `reset` on its parser.
    """

    def __init__(self, nc: RawClient) -> None:
        self.client = nc
        self._generation = 0
        super().__init__(nc)

    def reset(self) -> None:
        """A new connection (nats-py resets its parser on connect and reconnect)."""
        super().reset()
        self._generation += 1
        self._parts: list[bytes] = []
        self._have = 0
        self._need = 0  # bytes the kept frame needs before it can be parsed again

    async def parse(self, data: bytes = b"") -> None:
        if self._parts:
            self._parts.append(data)
            self._have += len(data)
            if self._have < self._need:
                return
            data = b"".join(self._parts)
            self._parts = []
        handlers = self.client._raw_handlers
        generation = self._generation
        n = len(data)
        pos = 0
        while pos < n:
            if SCAN_COMPILED:
                # The frames of raw subscriptions in one call; the loop below reads
                # whatever it leaves, one operation at a time.
                pos = framescan.scan(data, pos, handlers)
                if pos >= n:
                    return
            eol = data.find(b"\r\n", pos)
            if eol < 0:
                if n - pos > nats_parser.MAX_CONTROL_LINE_SIZE:
                    raise ProtocolError("nats: control line too long")
                self._keep(data, pos, n - pos + 1)
                return
            op = data[pos : pos + 4]
            if op == b"HMSG" or op == b"MSG ":
                args = data[pos:eol].split()
                try:
                    if op == b"HMSG":
                        size = int(args[-1])
                        header_size = int(args[-2])
                        reply = args[3] if len(args) == 6 else b""
                    else:
                        size = int(args[-1])
                        header_size = 0
                        reply = args[3] if len(args) == 5 else b""
                    subject = args[1]
                    sid = int(args[2])
                except (IndexError, ValueError):
                    raise ProtocolError("nats: malformed MSG") from None
                start = eol + 2
                end = start + size
                if end + 2 > n:
                    self._keep(data, pos, end + 2 - pos)
                    return
                if header_size:
                    header: bytes | None = data[start : start + header_size]
                    payload = data[start + header_size : end]
                else:
                    header = None
                    payload = data[start:end]
                pos = end + 2
                handler = handlers.get(sid)
                if handler is not None:
                    handler(subject, reply, payload, header)
                    continue
                await self.client.process_other(sid, subject, reply, payload, header)
            else:
                line = data[pos : eol + 2]
                pos = eol + 2
                await self._control(line)
            if self._generation != generation:
                return  # the connection was reset meanwhile: the rest is of the old one

    def _keep(self, data: bytes, pos: int, need: int) -> None:
        rest = data[pos:]
        self._parts = [rest]
        self._have = len(rest)
        self._need = need

    async def _control(self, line: bytes) -> None:
        """Any operation but MSG/HMSG, handled as nats-py's parser handles it."""
        nc = self.client
        if nats_parser.PING_RE.match(line):
            await nc._process_ping()
        elif nats_parser.PONG_RE.match(line):
            await nc._process_pong()
        elif nats_parser.OK_RE.match(line):
            pass
        elif (info := nats_parser.INFO_RE.match(line)) is not None:
            await nc._process_info(json.loads(info.group(1).decode()))
        elif (err := nats_parser.ERR_RE.match(line)) is not None:
            await nc._process_err((err.group(1) or b"").decode().lower())
        else:
            raise ProtocolError("nats: unknown protocol")


# --------------------------------------------------------------------------- header blocks


def parse_status(header: bytes) -> tuple[int, str] | None:
    """(code, description) for an inline status such as `NATS/1.0 404 No Messages`."""
    if not header.startswith(STATUS_LINE_PREFIX):
        return None
    end = header.find(b"\r\n")
    line = header[len(STATUS_LINE_PREFIX) : end].decode("utf-8", "replace")
    code, _, description = line.strip().partition(" ")
    try:
        return int(code), description
    except ValueError:
        return None


def parse_header_lines(header: bytes) -> list[tuple[str, str]]:
    """Every `Key: value` line after the first line, in order, repeated keys kept."""
    first = header.find(b"\r\n")
    if first < 0:
        return []
    out = []
    for line in header[first + 2 :].split(b"\r\n"):
        if not line:
            continue
        key, sep, value = line.partition(b":")
        if sep:
            out.append(
                (key.strip().decode("utf-8", "replace"), value.strip().decode("utf-8", "replace"))
            )
    return out


def group_headers(pairs: Iterable[tuple[str, str]]) -> list[tuple[str, list[str]]]:
    """Pairs to a map of key -> values, keys in first-seen order; direct-get headers dropped."""
    grouped: dict[str, list[str]] = {}
    for key, value in pairs:
        if key in DIRECT_HEADERS:
            continue
        grouped.setdefault(key, []).append(value)
    return list(grouped.items())


def encode_headers(pairs: Iterable[tuple[str, str]]) -> bytes:
    """A header block; raises ValueError naming a key or value that cannot be sent."""
    parts = [HEADER_LINE]
    for key, value in pairs:
        if not _HEADER_KEY.match(key):
            raise ValueError(f"header name {key!r} is not valid (printable ASCII, no ':')")
        if "\r" in value or "\n" in value:
            raise ValueError(f"header {key!r} has a line break in its value")
        parts.append(f"{key}: {value}\r\n".encode())
    parts.append(b"\r\n")
    return b"".join(parts)


def hpub_frame(subject: str, reply: str, header: bytes, payload: bytes) -> bytes:
    return b"HPUB %b %b %d %d\r\n%b%b\r\n" % (
        subject.encode(),
        reply.encode(),
        len(header),
        len(header) + len(payload),
        header,
        payload,
    )


# --------------------------------------------------------------------------- timestamps


class TimestampParser:
    """RFC 3339 UTC times (`2025-01-02T03:04:05.123456789Z`) to epoch microseconds.

    Consecutive messages share their second, so the calendar arithmetic is cached per
    second and only the fraction is parsed per message.
    """

    def __init__(self) -> None:
        self._second: str = ""
        self._base_us: int = 0

    def micros(self, text: str) -> int:
        second = text[:19]
        if second != self._second:
            self._base_us = calendar.timegm(time.strptime(second, "%Y-%m-%dT%H:%M:%S")) * 1_000_000
            self._second = second
        rest = text[19:]
        if rest == "Z":
            return self._base_us
        if rest.startswith(".") and rest.endswith("Z"):
            digits = rest[1:-1]
            return self._base_us + int((digits + "000000")[:6])
        return self._slow(text)

    @staticmethod
    def _slow(text: str) -> int:
        """Any RFC 3339 time, for servers that write a numeric zone offset."""
        match = _RFC3339.match(text)
        if match is None:
            raise ValueError(f"not an RFC 3339 time: {text!r}")
        head, frac, zone = match.groups()
        zone = "+00:00" if zone in (None, "Z", "z") else zone
        parsed = dt.datetime.fromisoformat(head + zone)
        return int(parsed.timestamp()) * 1_000_000 + int(((frac or "") + "000000")[:6])
