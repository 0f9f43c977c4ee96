"""Brook's HTTP monitoring endpoints read over raw asyncio streams, as a monitoring tool would.

No HTTP client library sits in between, so tests see status lines, headers and connection
handling exactly as sent; the server closes every connection after its response, so a
request reads until the close. `varz` is what tests that only want a figure from /varz use.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any


class Response:
    """A parsed HTTP response: status, lower-cased header names, body bytes."""

    def __init__(self, raw: bytes) -> None:
        head, _, self.body = raw.partition(b"\r\n\r\n")
        status_line, *lines = head.decode("latin-1").split("\r\n")
        self.status = int(status_line.split(" ")[1])
        self.headers = {k.lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines)}

    def json(self) -> Any:
        return json.loads(self.body)


async def request(server: Any, raw: bytes) -> Response:
    """Send `raw` as is to `server`'s monitor port and read until the server closes (it
    always does)."""
    async with asyncio.timeout(3):
        reader, writer = await asyncio.open_connection("127.0.0.1", server.monitor.port)
        writer.write(raw)
        await writer.drain()
        data = await reader.read()
        writer.close()
    return Response(data)


async def get(server: Any, path: str, method: str = "GET") -> Response:
    return await request(server, f"{method} {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())


async def get_json(server: Any, path: str) -> Any:
    """The JSON document at `path`, which must come with status 200 as JSON."""
    resp = await get(server, path)
    assert resp.status == 200, resp.body
    assert resp.headers["content-type"] == "application/json"
    return resp.json()


async def varz(server: Any) -> dict[str, Any]:
    doc: dict[str, Any] = await get_json(server, "/varz")
    return doc
