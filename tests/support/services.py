"""Service imports seen from the exporting side, for the accounts conformance tests."""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

import nats


async def request_info(exporter: Any, importer: Any, subject: str = "svc") -> dict[str, Any]:
    """The `Nats-Request-Info` header `exporter`'s service on `subject` receives from a
    request `importer` makes through its import. nats-server may not have linked a
    just-connected importer's import at its first request (no responders): it is asked
    again for up to 2 s. Both clients are closed."""
    try:

        async def answer(msg: Any) -> None:
            await msg.respond((msg.headers or {}).get("Nats-Request-Info", "").encode())

        await exporter.subscribe(subject, cb=answer)
        await exporter.flush()
        for _ in range(20):
            with contextlib.suppress(nats.errors.NoRespondersError):
                reply = await importer.request(subject, b"", timeout=2)
                info: dict[str, Any] = json.loads(reply.data)
                return info
            await asyncio.sleep(0.1)
        raise AssertionError(f"no responders to the import of {subject!r}")
    finally:
        await exporter.close()
        await importer.close()
