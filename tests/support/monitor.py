"""Brook's HTTP monitoring endpoints read over raw asyncio streams, as a monitoring tool would.

No HTTP client library sits in between, so tests see status lines, headers and connection
handling exactly as sent. `get` asks the server to close the connection after its answer
(`Connection: close`; the server keeps connections open otherwise), so a request reads
until the close. `varz` is what tests that only want a figure from /varz use.
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
    """Send `raw` as is to `server`'s monitor port and read until the server closes (which
    it does after a request that asks for it, or one it refuses)."""
    async with asyncio.timeout(3):
        reader, writer = await asyncio.open_connection("127.0.0.1", server.monitor.port)
        writer.write(raw)
        await writer.drain()
        data = await reader.read()
        writer.close()
    return Response(data)


async def get(server: Any, path: str, method: str = "GET") -> Response:
    raw = f"{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    return await request(server, raw.encode())


async def get_json(server: Any, path: str) -> Any:
    """The JSON document at `path`, which must come with status 200 as JSON."""
    resp = await get(server, path)
    assert resp.status == 200, resp.body
    assert resp.headers["content-type"] == "application/json"
    return resp.json()


async def varz(server: Any) -> dict[str, Any]:
    doc: dict[str, Any] = await get_json(server, "/varz")
    return doc


def json_shape(value: Any) -> Any:
    """The keys and JSON types of a document, its values left out: what monitoring tools
    written for nats-server rely on. Numbers are one type, as Go writes a float64 that
    happens to be whole (`0`) as an integer. A list's shape is the sorted set of its
    elements' shapes."""
    if isinstance(value, dict):
        return {k: json_shape(v) for k, v in value.items()}
    if isinstance(value, list):
        return sorted({json.dumps(json_shape(v), sort_keys=True) for v in value})
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    return type(value).__name__
