"""Fixtures for the `brook` client commands: a JetStream Brook in this process, the real
nats-server, and `cli()`, which runs a command line in-process (see `tests.cli.runner`)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import nats
import pytest

import brook


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[Any]:
    """Brook with JetStream on a file store in the test's directory."""
    async with brook.serve(port=0, store_dir=str(tmp_path / "store")) as srv:
        yield srv


async def _quiet(_err: Exception) -> None:
    """Tests assert on results; nats-py's asynchronous error reports are noise here."""


@pytest.fixture
async def nc(server: Any) -> AsyncIterator[Any]:
    client = await nats.connect(server.url, allow_reconnect=False, error_cb=_quiet)
    yield client
    if not client.is_closed:
        await client.close()


@pytest.fixture
async def js(nc: Any) -> Any:
    return nc.jetstream(timeout=5)


@pytest.fixture(params=["brook", "nats-server"])
async def url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    """A JetStream server's URL: Brook in this process, then the real nats-server (shared
    by the session: tests name their streams uniquely). The same command lines must give
    the same results on both."""
    if request.param == "brook":
        async with brook.serve(port=0, store_dir=str(tmp_path / "store")) as srv:
            yield srv.url
        return
    yield request.getfixturevalue("nats_server_url")


@pytest.fixture
def name(request: pytest.FixtureRequest) -> str:
    """A stream name no other test uses (the nats-server is shared)."""
    return "S" + uuid.uuid4().hex[:10].upper()


@pytest.fixture
async def client(url: str) -> AsyncIterator[Any]:
    nc = await nats.connect(url, allow_reconnect=False, error_cb=_quiet)
    yield nc
    await nc.close()
