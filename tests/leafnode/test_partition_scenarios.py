"""`concurrently` (tests/support/partitions.py), which the partition tests run their
topologies with: every link is set up before any scenario starts and closed after the
last one ends, every scenario runs to its end, and a failure names its scenario."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest

from tests.support.partitions import concurrently

pytestmark = pytest.mark.timeout(10)


async def test_links_around_all_scenarios_and_failures_named() -> None:
    events: list[str] = []

    @contextlib.asynccontextmanager
    async def link(name: str) -> AsyncIterator[str]:
        events.append(f"open {name}")
        yield name
        events.append(f"close {name}")

    async def scenario(name: str, link: str) -> str:
        events.append(f"start {name}")
        await asyncio.sleep(0.05 if name == "slow" else 0)
        assert name != "bad", f"{link} broke"
        events.append(f"end {name}")
        return link.upper()

    with pytest.raises(ExceptionGroup) as failed:
        await concurrently({n: link(n) for n in ("slow", "bad", "fast")}, scenario)
    assert str(failed.value).startswith("failed: bad")
    [error] = failed.value.exceptions
    assert isinstance(error, AssertionError)
    assert "bad broke" in str(error)
    assert error.__notes__ == ["in scenario bad"]
    assert events[:6] == [*(f"open {n}" for n in ("slow", "bad", "fast")),
                          *(f"start {n}" for n in ("slow", "bad", "fast"))]  # fmt: skip
    assert events.index("end slow") < events.index("close slow")
    assert {"end fast", "end slow"} <= set(events)
    assert await concurrently({n: link(n) for n in ("a", "b")}, scenario) == {"a": "A", "b": "B"}
