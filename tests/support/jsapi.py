"""JetStream API requests from tests, with any NATS client (`nc.request`)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

STREAM_NAME_IN_USE = 10058


async def request(nc: Any, subject: str, body: Any = None, timeout: float = 5) -> dict[str, Any]:
    """The decoded JSON reply to `body` (none: an empty request) sent to `subject`."""
    data = b"" if body is None else json.dumps(body).encode()
    return json.loads((await nc.request(subject, data, timeout=timeout)).data)  # type: ignore[no-any-return]


async def create_streams(nc: Any, configs: Iterable[dict[str, Any]]) -> None:
    """Create each stream, or find it there already with this config (a restarted server)."""
    for config in configs:
        reply = await request(nc, f"$JS.API.STREAM.CREATE.{config['name']}", config)
        assert "error" not in reply or reply["error"]["err_code"] == STREAM_NAME_IN_USE, reply
