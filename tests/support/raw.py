"""A raw NATS protocol client for tests: literal bytes out, parsed (or raw) server ops in.

No client library sits in between, so tests see exactly what a server sends, including
what nats-py would hide or reject. Typical use::

    async with RawClient.connect(host, port) as c:
        assert c.info["headers"] is True
        ops = await c.handshake(verbose=True)          # CONNECT + PING, up to the PONG
        await c.send(b"SUB foo 1\\r\\nPUB foo 2\\r\\nhi\\r\\n")
        ops = await c.read_ops(until=is_msg)

Server ops are parsed with `brook.protocol.client_parser.ServerParser`. Ops that arrive
while waiting for something else are kept, in order, for the next `read_ops`. Server
PINGs are recorded like any other op; they are answered with PONG only when the client
was created with `auto_pong=True`. Every wait takes an explicit `timeout` in seconds
(hence the ASYNC109 exemptions): a test reads best when each expectation says how long
it may take.

The socket is driven by an `asyncio.Protocol` rather than a `StreamReader`: when a server
closes with our unread bytes in its buffer the kernel sends a TCP reset, and a
`StreamReader` would then raise before returning the `-ERR` that arrived just before it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from typing import Any, cast
from urllib.parse import urlparse

from brook.protocol.client_parser import Err, Info, Msg, ServerOp, ServerParser, Simple

__all__ = [
    "DEFAULT_CONNECT",
    "OMIT",
    "PONG",
    "Err",
    "Info",
    "Msg",
    "RawClient",
    "ServerOp",
    "Simple",
    "is_err",
    "is_msg",
    "is_op",
]

PING = Simple("PING")
PONG = Simple("PONG")
OK = Simple("+OK")

# What the raw client sends in CONNECT unless told otherwise: the shape nats-py uses,
# made explicit so nothing depends on server defaults (transcripts/proto-errors.txt).
DEFAULT_CONNECT: dict[str, Any] = {
    "verbose": False,
    "pedantic": False,
    "headers": True,
    "no_responders": True,
    "protocol": 1,
    "lang": "raw",
    "version": "0",
}


class _Omit:
    def __repr__(self) -> str:
        return "OMIT"


OMIT: Any = _Omit()
"""Pass as a `handshake` option value to leave that key out of CONNECT entirely."""


def is_op(name: str) -> Callable[[ServerOp], bool]:
    """Predicate for `read_ops(until=...)`: a PING, PONG or +OK."""
    return lambda op: isinstance(op, Simple) and op.op == name


def is_err(op: ServerOp) -> bool:
    return isinstance(op, Err)


def is_msg(op: ServerOp) -> bool:
    return isinstance(op, Msg)


class _Socket(asyncio.Protocol):
    """Collects received bytes and end-of-stream; never drops data on a reset."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.buf = bytearray()
        self.eof = False
        self._wakeup: asyncio.Event = asyncio.Event()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop does not subclass it

    def data_received(self, data: bytes) -> None:
        self.buf += data
        self._wakeup.set()

    def eof_received(self) -> bool:
        self.eof = True
        self._wakeup.set()
        return False  # let the transport close our side too

    def connection_lost(self, exc: Exception | None) -> None:
        self.eof = True
        self._wakeup.set()

    async def chunk(self, wait_s: float) -> bytes | None:
        """Bytes received so far; None on timeout; b"" at end of stream."""
        if not self.buf and not self.eof:
            self._wakeup.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wakeup.wait(), max(wait_s, 0.0))
        if self.buf:
            data = bytes(self.buf)
            self.buf.clear()
            return data
        return b"" if self.eof else None


class RawClient:
    """One TCP connection to a NATS server, driven byte by byte."""

    def __init__(self, sock: _Socket, *, auto_pong: bool) -> None:
        self._sock = sock
        self.auto_pong = auto_pong
        self._parser = ServerParser()
        self._ops: deque[ServerOp] = deque()
        self.closed = False  # the server closed (FIN or reset) the connection
        self.info: dict[str, Any] = {}

    # ------------------------------------------------------------------ lifecycle

    @classmethod
    @contextlib.asynccontextmanager
    async def connect(
        cls,
        host: str,
        port: int,
        *,
        auto_pong: bool = False,
        read_info: bool = True,
        timeout: float = 2.0,
        tls: ssl.SSLContext | None = None,
    ) -> AsyncIterator[RawClient]:
        """Open a connection and (unless `read_info=False`) wait for the first INFO; with
        `tls`, the TLS handshake comes first (a server's `handshake_first`)."""
        loop = asyncio.get_running_loop()
        _, sock = await asyncio.wait_for(
            loop.create_connection(_Socket, host, port, ssl=tls), timeout
        )
        client = cls(sock, auto_pong=auto_pong)
        try:
            if read_info:
                await client._read_first_info(timeout)
            yield client
        finally:
            client.abort()

    @classmethod
    def connect_url(
        cls, url: str, **kwargs: Any
    ) -> contextlib.AbstractAsyncContextManager[RawClient]:
        """`connect` with a `nats://host:port` URL (e.g. `server.url` or `nats_server_url`)."""
        parsed = urlparse(url)
        assert parsed.hostname is not None, url
        assert parsed.port is not None, url
        return cls.connect(parsed.hostname, parsed.port, **kwargs)

    async def start_tls(self, context: ssl.SSLContext, *, timeout: float = 2.0) -> None:
        """Upgrade this connection to TLS (as a client does after the server's INFO)."""
        transport = self._sock.transport
        assert transport is not None
        loop = asyncio.get_running_loop()
        upgraded = await asyncio.wait_for(
            loop.start_tls(transport, self._sock, context, server_hostname="127.0.0.1"), timeout
        )
        assert upgraded is not None
        self._sock.transport = upgraded

    def abort(self) -> None:
        """Close our end now (what a client that just goes away does)."""
        transport = self._sock.transport
        if transport is not None and not transport.is_closing():
            transport.close()

    async def _read_first_info(self, wait_s: float) -> None:
        ops = await self.read_ops(until=lambda op: isinstance(op, Info), timeout=wait_s)
        first = ops[0]
        assert isinstance(first, Info), f"first server op is not INFO: {first!r}"
        self.info = first.fields
        # Anything behind the INFO (e.g. -ERR 'maximum connections exceeded') stays queued.
        for op in reversed(ops[1:]):
            self._ops.appendleft(op)

    # ------------------------------------------------------------------ output

    async def send(self, data: bytes) -> bool:
        """Write `data`; False (not an exception) when the connection is already closed."""
        transport = self._sock.transport
        if self.closed or self._sock.eof or transport is None or transport.is_closing():
            return False
        transport.write(data)
        await asyncio.sleep(0)  # let the loop hand the bytes to the kernel
        return True

    async def handshake(self, *, timeout: float = 2.0, **options: Any) -> list[ServerOp]:
        """Send CONNECT (DEFAULT_CONNECT updated with `options`) and PING; read up to PONG.

        Returns the ops received: `+OK` (verbose), `PONG`, and for `protocol: 1` the async
        INFO with `connect_info` that follows the PONG. Stops early, without raising, at an
        `-ERR` or when the server closes; the caller asserts on what came back.
        """
        merged = {**DEFAULT_CONNECT, **options}
        connect = {k: v for k, v in merged.items() if v is not OMIT}
        await self.send(b"CONNECT " + json.dumps(connect).encode() + b"\r\nPING\r\n")
        ops = await self.read_ops(
            until=lambda op: isinstance(op, Err) or op == PONG,
            timeout=timeout,
            allow_eof=True,
        )
        if ops and ops[-1] == PONG and connect.get("protocol") == 1:
            ops += await self.read_ops(
                until=lambda op: isinstance(op, Info) and bool(op.fields.get("connect_info")),
                timeout=min(timeout, 1.0),
                allow_eof=True,
                allow_timeout=True,
            )
        return ops

    # ------------------------------------------------------------------ input

    async def _read_chunk(self, wait_s: float) -> bytes | None:
        """One raw read; None on timeout, b"" at end of stream (then `closed` is set)."""
        data = await self._sock.chunk(wait_s)
        if data == b"":
            self.closed = True
        return data

    async def _fill(self, wait_s: float) -> bool:
        """Read and parse what arrives; False on timeout or end of stream."""
        data = await self._read_chunk(wait_s)
        if not data:
            return False
        for op in self._parser.feed(data):
            if self.auto_pong and op == PING:
                await self.send(b"PONG\r\n")
            self._ops.append(op)
        return True

    async def read_ops(
        self,
        until: Callable[[ServerOp], bool] | None = None,
        timeout: float = 2.0,
        *,
        quiet: float = 0.15,
        allow_eof: bool = False,
        allow_timeout: bool = False,
    ) -> list[ServerOp]:
        """Return parsed server ops.

        With `until`, read until an op satisfying it arrives and return every op up to and
        including it; raise `TimeoutError` after `timeout` s (or `ConnectionError` if the
        server closes first) unless `allow_timeout` / `allow_eof`, which return what came.
        Without `until`, collect ops until nothing arrives for `quiet` s, the server
        closes, or `timeout` s pass.
        """
        deadline = time.monotonic() + timeout
        out: list[ServerOp] = []
        while True:
            while self._ops:
                op = self._ops.popleft()
                out.append(op)
                if until is not None and until(op):
                    return out
            if self.closed:
                if until is None or allow_eof:
                    return out
                raise ConnectionError(f"server closed the connection; ops so far: {out!r}")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            wait = remaining if until is not None else min(quiet, remaining)
            if not await self._fill(wait) and not self.closed and until is None:
                return out  # quiet
        if until is None or allow_timeout:
            return out
        raise TimeoutError(f"no matching op within {timeout}s; ops so far: {out!r}")

    async def expect_closed(self, timeout: float = 2.0) -> bool:
        """Wait up to `timeout` s for the server to close; True if it did.

        Ops read meanwhile stay queued for `read_ops`.
        """
        deadline = time.monotonic() + timeout
        while not self.closed:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            await self._fill(remaining)
        return True

    async def read_raw(self, timeout: float = 2.0, *, quiet: float = 0.15) -> bytes:
        """Raw bytes from the socket until `quiet` s of silence, end of stream, or `timeout` s.

        Bypasses the parser: use it for exact-byte checks once earlier ops are consumed.
        """
        return await self._read_raw(timeout, quiet, None)

    async def read_raw_until(self, expected_len: int, timeout: float = 2.0) -> bytes:
        """Raw bytes until at least `expected_len` arrived, end of stream, or `timeout` s."""
        return await self._read_raw(timeout, timeout, expected_len)

    async def _read_raw(self, wait_s: float, quiet: float, expected_len: int | None) -> bytes:
        assert not self._ops, f"parsed ops not consumed yet: {list(self._ops)!r}"
        deadline = time.monotonic() + wait_s
        buf = b""
        while not self.closed and (expected_len is None or len(buf) < expected_len):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            data = await self._read_chunk(min(quiet, remaining))
            if not data:
                break
            buf += data
        return buf
