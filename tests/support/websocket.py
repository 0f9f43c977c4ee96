"""A raw WebSocket client for tests: literal HTTP upgrades and frames, no library between.

Tests see exactly what a server answers to a bad upgrade request (status, headers, body)
and which frames it sends, including CLOSE frames and their status codes, which nats-py's
WebSocket transport hides. Client frames are masked (RFC 6455 §5.3) unless told not to be.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import ssl
import struct
import zlib
from collections.abc import AsyncIterator
from dataclasses import dataclass

__all__ = ["HttpReply", "WsClient", "frame", "http_request", "upgrade_request"]

KEY = base64.b64encode(b"0123456789abcdef").decode()


def upgrade_request(
    port: int, *, method: str = "GET", path: str = "/", headers: dict[str, str] | None = None
) -> bytes:
    """A WebSocket upgrade request; `headers` override (a value of "" drops a header)."""
    fields = {
        "Host": f"127.0.0.1:{port}",
        "Upgrade": "websocket",
        "Connection": "Upgrade",
        "Sec-WebSocket-Key": KEY,
        "Sec-WebSocket-Version": "13",
    } | (headers or {})
    lines = [f"{method} {path} HTTP/1.1"] + [f"{k}: {v}" for k, v in fields.items() if v]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


@dataclass
class HttpReply:
    status: int
    headers: dict[str, str]  # names lower-cased
    body: bytes


async def _read_head(reader: asyncio.StreamReader) -> tuple[int, dict[str, str]]:
    head = await reader.readuntil(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines:
        if ":" in line:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
    return int(status_line.split()[1]), headers


async def http_request(port: int, request: bytes, timeout: float = 5.0) -> HttpReply:
    """Send `request`, read one response: head, and a body of its Content-Length."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(request)
        status, headers = await asyncio.wait_for(_read_head(reader), timeout)
        size = int(headers.get("content-length", "0"))
        body = await asyncio.wait_for(reader.readexactly(size), timeout)
        return HttpReply(status, headers, body)
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()


def frame(
    payload: bytes, opcode: int = 2, *, fin: bool = True, rsv1: bool = False, mask: bool = True
) -> bytes:
    """One client frame (masked, as clients must, unless `mask` is False)."""
    first = (0x80 if fin else 0) | (0x40 if rsv1 else 0) | opcode
    size = len(payload)
    bit = 0x80 if mask else 0
    if size < 126:
        head = struct.pack("!BB", first, bit | size)
    elif size < 65536:
        head = struct.pack("!BBH", first, bit | 126, size)
    else:
        head = struct.pack("!BBQ", first, bit | 127, size)
    if not mask:
        return head + payload
    key = os.urandom(4)
    stream = int.from_bytes((key * (size // 4 + 1))[:size], "big")  # XOR in one big integer
    masked = (int.from_bytes(payload, "big") ^ stream).to_bytes(size, "big")
    return head + key + masked


class WsClient:
    """An upgraded connection: `send` frames, `read_frame` parses the server's frames
    (inflating permessage-deflate ones), `read_nats` gathers binary payload bytes."""

    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, headers: dict[str, str]
    ) -> None:
        self.reader = reader
        self.writer = writer
        self.headers = headers
        self.data = b""  # binary payload bytes read so far and not yet consumed

    @classmethod
    @contextlib.asynccontextmanager
    async def connect(
        cls,
        port: int,
        headers: dict[str, str] | None = None,
        timeout: float = 5.0,
        *,
        tls: ssl.SSLContext | None = None,
    ) -> AsyncIterator[WsClient]:
        """An upgraded connection; with `tls`, over TLS from the first byte (wss://)."""
        reader, writer = await asyncio.open_connection(
            "127.0.0.1",
            port,
            limit=1 << 24,
            ssl=tls,
            ssl_handshake_timeout=timeout if tls else None,
        )
        try:
            writer.write(upgrade_request(port, headers=headers))
            status, reply_headers = await asyncio.wait_for(_read_head(reader), timeout)
            assert status == 101, status
            yield cls(reader, writer, reply_headers)
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()

    async def send(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def read_frame(self, timeout: float = 5.0) -> tuple[int, bytes]:
        """(opcode, payload) of the next frame; raises IncompleteReadError at EOF."""

        async def read() -> tuple[int, bytes]:
            b0, b1 = await self.reader.readexactly(2)
            size = b1 & 0x7F
            if size == 126:
                (size,) = struct.unpack("!H", await self.reader.readexactly(2))
            elif size == 127:
                (size,) = struct.unpack("!Q", await self.reader.readexactly(8))
            payload = await self.reader.readexactly(size)
            if b0 & 0x40:
                payload = zlib.decompressobj(-15).decompress(payload + b"\x00\x00\xff\xff")
            return b0 & 0x0F, payload

        return await asyncio.wait_for(read(), timeout)

    async def read_nats(self, marker: bytes, timeout: float = 5.0) -> bytes:
        """Binary payload bytes up to and including `marker`; a CLOSE frame raises."""
        while marker not in self.data:
            opcode, payload = await self.read_frame(timeout)
            if opcode == 8:
                raise ConnectionError(f"CLOSE {payload!r} before {marker!r}; got {self.data!r}")
            self.data += payload
        end = self.data.index(marker) + len(marker)
        out, self.data = self.data[:end], self.data[end:]
        return out

    async def read_close(self, timeout: float = 5.0) -> tuple[bytes, int, bytes]:
        """Frames up to a CLOSE: (binary bytes before it, status, reason)."""
        while True:
            opcode, payload = await self.read_frame(timeout)
            if opcode == 8:
                data, self.data = self.data, b""
                status = struct.unpack("!H", payload[:2])[0] if payload else 1005
                return data, status, payload[2:]
            if opcode in (1, 2):
                self.data += payload

    async def frames_until_closed(self, timeout: float = 10.0) -> list[tuple[int, bytes]]:
        """Every frame until the server closes the connection (a CLOSE frame included);
        a timeout (the connection still open) raises."""
        frames = []
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionResetError):
            while True:
                frames.append(await self.read_frame(timeout))
        return frames
