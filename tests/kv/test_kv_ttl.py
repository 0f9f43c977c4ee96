"""Expiry in Key-Value buckets: bucket `ttl` (max_age), per-key TTL (`Nats-TTL`, which
needs `allow_msg_ttl`), and subject delete markers (`limit_marker_ttl`, nats-server 2.11+).

These wait on real clocks, with TTLs of one or two seconds, the shortest the servers take.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import nats.js.errors as jserr
import pytest

pytestmark = pytest.mark.timeout(40)


async def eventually(check: Callable[[], Awaitable[bool]], timeout: float = 6.0) -> None:
    deadline = time.monotonic() + timeout
    while not await check():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.05)


async def gone(kv: Any, key: str) -> bool:
    try:
        await kv.get(key)
    except jserr.KeyNotFoundError:
        return True
    return False


async def test_bucket_ttl_expires_values(js: Any) -> None:
    kv = await js.create_key_value(bucket="t", ttl=1)
    await kv.put("k", b"v")
    assert (await kv.get("k")).value == b"v"
    started = time.monotonic()
    await eventually(lambda: gone(kv, "k"))
    assert time.monotonic() - started > 0.5
    assert (await kv.status()).values == 0


async def test_per_key_ttl_with_create(js: Any) -> None:
    kv = await js.create_key_value(bucket="t")
    await kv.create("short", b"v", msg_ttl=1)
    await kv.put("long", b"v")
    msg = await js.get_msg("KV_t", subject="$KV.t.short")
    assert msg.headers["Nats-TTL"] == "1"
    await eventually(lambda: gone(kv, "short"))
    assert (await kv.get("long")).value == b"v"
    assert await kv.create("short", b"again") == 3  # the key is free again


async def test_purge_marker_with_ttl_goes_away(js: Any) -> None:
    kv = await js.create_key_value(bucket="t")
    await kv.put("k", b"v")
    await kv.purge("k", msg_ttl=1)

    async def empty() -> bool:
        return bool((await kv.status()).values == 0)

    await eventually(empty)


async def test_invalid_per_key_ttl(js: Any, nc: Any) -> None:
    await js.create_key_value(bucket="t")
    reply = await nc.request("$KV.t.k", b"v", headers={"Nats-TTL": "soon"}, timeout=5)
    assert b'"err_code":10165' in reply.data.replace(b" ", b"")


async def test_limit_marker_left_when_max_age_removes_a_key(js: Any) -> None:
    kv = await js.create_key_value(bucket="m", ttl=1, limit_marker_ttl=2)
    await kv.put("k", b"1")
    await kv.put("k", b"2")
    await kv.put("other", b"x")

    async def marked() -> bool:
        try:
            msg = await js.get_msg("KV_m", subject="$KV.m.k")
        except jserr.NotFoundError:
            return False
        return msg.headers is not None and "Nats-Marker-Reason" in msg.headers

    await eventually(marked)
    msg = await js.get_msg("KV_m", subject="$KV.m.k")
    assert msg.headers == {"Nats-Marker-Reason": "MaxAge", "Nats-TTL": "2s", "Nats-Rollup": "sub"}
    assert not msg.data
    assert msg.seq in (4, 5)  # one marker per emptied key, in removal order

    async def all_gone() -> bool:
        return bool((await kv.status()).values == 0)

    await eventually(all_gone)  # markers expire too, and leave no markers behind


async def test_limit_marker_after_a_per_key_ttl(js: Any) -> None:
    kv = await js.create_key_value(bucket="m", limit_marker_ttl=1)
    await kv.create("k", b"v", msg_ttl=1)
    watcher = await kv.watch("k")
    first = await watcher.updates(timeout=5)
    assert (first.key, first.value) == ("k", b"v")
    assert await watcher.updates(timeout=5) is None
    marker = await watcher.updates(timeout=5)
    assert (marker.key, marker.operation, marker.value) == ("k", "PURGE", b"")
    await watcher.stop()
    await eventually(lambda: _no_messages(kv))


async def _no_messages(kv: Any) -> bool:
    return bool((await kv.status()).values == 0)


async def test_no_marker_when_an_older_revision_survives(js: Any) -> None:
    kv = await js.create_key_value(bucket="m", history=5, limit_marker_ttl=5)
    await kv.put("k", b"keep")
    await kv.create("x", b"short", msg_ttl=1)
    await kv.delete("x")  # x's newest message is a DEL without TTL
    await eventually(lambda: _count_is(kv, 2))
    await asyncio.sleep(0.3)
    assert (await kv.status()).values == 2  # k and the DEL: no marker on x


async def _count_is(kv: Any, n: int) -> bool:
    return bool((await kv.status()).values == n)


async def test_watch_sees_markers_as_purges(js: Any) -> None:
    kv = await js.create_key_value(bucket="m", ttl=1, limit_marker_ttl=3)
    watcher = await kv.watchall()
    assert await watcher.updates(timeout=5) is None
    await kv.put("k", b"v")
    assert (await watcher.updates(timeout=5)).value == b"v"
    marker = await watcher.updates(timeout=5)
    assert (marker.key, marker.operation) == ("k", "PURGE")
    await watcher.stop()


async def test_memory_bucket_markers(js: Any) -> None:
    kv = await js.create_key_value(bucket="mm", ttl=1, limit_marker_ttl=2, storage="memory")
    await kv.put("k", b"v")

    async def marked() -> bool:
        try:
            msg = await js.get_msg("KV_mm", subject="$KV.mm.k")
        except jserr.NotFoundError:
            return False
        return bool(msg.headers and msg.headers.get("Nats-Marker-Reason") == "MaxAge")

    await eventually(marked)
