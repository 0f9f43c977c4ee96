"""Mirrors on Brook alone (ADR 0020): what nats-server has no counterpart of to compare.

A mirror through a durable origin consumer (ADR-60) is refused with 10052 until its link
can reset that consumer (nats-server accepts it).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import nats
import pytest

import brook

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
async def nc(tmp_path: Path) -> AsyncIterator[Any]:
    async with brook.serve(port=0, store_dir=str(tmp_path / "store")) as server:
        client = await nats.connect(server.url, allow_reconnect=False)
        yield client
        await client.close()


async def _request(nc: Any, subject: str, body: Any = None, timeout: float = 5) -> Any:
    data = b"" if body is None else json.dumps(body).encode()
    return json.loads((await nc.request(subject, data, timeout=timeout)).data)
