"""Fixtures for consumer tests: a Brook with a store, a client, and stream S on `s.>`."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import nats
import pytest

import brook


@pytest.fixture(params=["memory", "file"])
def storage(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
async def nc(tmp_path: Path) -> AsyncIterator[Any]:
    async with brook.serve(port=0, store_dir=str(tmp_path / "store")) as server:
        conn = await nats.connect(server.url, allow_reconnect=False)
        yield conn
        await conn.close()


@pytest.fixture
async def js(nc: Any, storage: str) -> Any:
    js = nc.jetstream()
    await js.add_stream(name="S", subjects=["s.>"], storage=storage)
    return js
