"""A raw TLS client that shows what a server sends when it refuses a handshake.

`failed_handshake` drives a client handshake with `ssl.MemoryBIO`s over a plain socket,
so that every byte the server sends is seen before OpenSSL interprets it: the TLS alert
records in clear (content type 21: TLS 1.2, or any version before the keys are agreed)
and the error the client's `ssl` reports, whose reason names the alert it received
(encrypted under TLS 1.3 once the server has its Finished, e.g. a refused client
certificate: `TLSV13_ALERT_CERTIFICATE_REQUIRED`)."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import time
from typing import Any

ALERT = 21  # the TLS record content type of an alert


def alert_records(raw: bytes) -> list[bytes]:
    """The payloads (level, description) of the clear-text alert records in `raw`, the
    bytes a server sent, read record by record (5-byte headers)."""
    alerts = []
    at = 0
    while at + 5 <= len(raw):
        size = int.from_bytes(raw[at + 3 : at + 5], "big")
        if raw[at] == ALERT:
            alerts.append(raw[at + 5 : at + 5 + size])
        at += 5 + size
    return alerts


async def failed_handshake(
    host: str,
    port: int,
    context: ssl.SSLContext,
    *,
    after_info: bool = True,
    prefix: bytes = b"",
    timeout: float = 3.0,
    then: bytes = b"",
    hold: float = 0.0,
) -> dict[str, Any]:
    """Connect, read the plain-text INFO line first when `after_info` (the upgrade path),
    send `prefix` raw (e.g. garbage), then handshake with `context` and read until the
    server closes or `timeout` passes: the clear-text alerts received, and the error the
    client's `ssl` raised (library and reason), or "ok" when nothing failed. With `hold`,
    the client then sends `then` raw and stays, up to `hold` seconds, for the server to
    close: `closed_in` is how long that took (None: it did not)."""
    reader, writer = await asyncio.open_connection(host, port)
    raw = bytearray()
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = context.wrap_bio(incoming, outgoing, server_hostname="127.0.0.1")
    error = "ok"
    try:
        if after_info:
            await asyncio.wait_for(reader.readline(), timeout)
        if prefix:
            writer.write(prefix)
        async with asyncio.timeout(timeout):
            handshaken = False
            while True:
                try:
                    if not handshaken:
                        tls.do_handshake()
                        handshaken = True
                    writer.write(outgoing.read())
                    if handshaken:
                        tls.read(1024)  # anything the server sends after the handshake
                except ssl.SSLWantReadError:
                    writer.write(outgoing.read())
                data = await reader.read(65536)
                raw += data
                if not data:
                    incoming.write_eof()
                    if handshaken:
                        tls.read(1024)
                    else:
                        tls.do_handshake()
                    error = "closed"
                    break
                incoming.write(data)
    except ssl.SSLError as exc:
        error = f"{exc.library}:{exc.reason}"
    except TimeoutError:
        error = "timeout"
    except OSError as exc:
        error = type(exc).__name__
    outcome: dict[str, Any] = {"alerts": alert_records(bytes(raw)), "error": error}
    try:
        if hold:
            outcome["closed_in"] = await _closed_in(reader, writer, then, hold)
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
    return outcome


async def _closed_in(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, then: bytes, hold: float
) -> float | None:
    started = time.monotonic()
    with contextlib.suppress(OSError):  # a reset, or TimeoutError: not closed in time
        writer.write(then)
        async with asyncio.timeout(hold):
            while await reader.read(65536):
                pass
            return time.monotonic() - started
    return None
