"""Fixtures for the `brook` client commands: a JetStream Brook in this process, the real
nats-server, and `cli()`, which runs a command line in-process (see `tests.cli.runner`)."""

from __future__ import annotations

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
