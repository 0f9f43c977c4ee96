"""A Key-Value bucket with a read replica: a mirror of the bucket's stream answers its
direct gets (`mirror_direct`, inherited from the origin's `allow_direct`), through the
unmodified nats-py client, on Brook and on nats-server (ADR 0020)."""

from __future__ import annotations

import asyncio
from typing import Any

import nats.js.errors as jserr
import pytest
from nats.js.api import StreamConfig, StreamSource

pytestmark = pytest.mark.timeout(60)


async def _caught_up(js: Any, mirror: str, last_seq: int) -> Any:
    for _ in range(200):
        info = await js.stream_info(mirror)
        if info.state.last_seq == last_seq and info.mirror is not None and info.mirror.lag == 0:
            return info
        await asyncio.sleep(0.05)
    raise AssertionError(f"{mirror} did not reach {last_seq}: {info}")


async def test_a_mirror_serves_a_buckets_reads_once_its_origin_is_gone(js: Any) -> None:
    kv = await js.create_key_value(bucket="src", history=1, direct=True)
    await kv.put("a", b"1")
    await kv.put("b", b"2")
    await kv.put("a", b"3")
    await kv.delete("b")
    await js.add_stream(StreamConfig(name="KV_replica", mirror=StreamSource(name="KV_src")))
    info = await _caught_up(js, "KV_replica", 4)
    assert info.config.mirror_direct is True
    assert (info.state.messages, info.state.first_seq) == (2, 3)  # overwritten: skipped
    await js.delete_stream("KV_src")  # only the replica answers the bucket's reads now
    entry = await kv.get("a")
    assert (entry.value, entry.revision) == (b"3", 3)
    with pytest.raises(jserr.KeyNotFoundError):
        await kv.get("b")
    assert (await js.get_msg("KV_replica", 3)).data == b"3"
    with pytest.raises(jserr.NotFoundError):
        await js.get_msg("KV_replica", 1)
