"""Key-Value calls built on ordered push consumers: watch, watchall, keys, history,
purge_deletes. They lean on flow control, idle heartbeats, headers-only delivery,
`last_per_subject` and accurate pending counts in consumer info and ack subjects."""

from __future__ import annotations

import asyncio
import datetime
from typing import Any

import nats.errors
import nats.js.errors as jserr
import pytest

from tests.kv.conftest import Target

pytestmark = pytest.mark.timeout(40)


@pytest.fixture
async def kv(js: Any) -> Any:
    return await js.create_key_value(bucket="w", history=10)


async def _keys(kv: Any, target: Target, **kwargs: Any) -> list[str]:
    """`kv.keys()` of a bucket that has keys, allowing for a nats-py race that nats-server
    sometimes wins.

    nats-py's watcher asks for consumer info right after creating its ordered consumer and
    ends the listing at once when the reply says nothing is pending and no message has been
    received yet. nats-server delivers from the consumer's goroutine while the API reply goes
    out from another, so the info (pending 0, everything already sent) can overtake the
    messages, and `keys()` then raises NoKeysError (seen once in CI). Brook is asked once, so
    the test still fails if Brook ever answers this way; nats-server up to five times, and
    only for this error.
    """
    for _ in range(1 if target.is_brook else 5):
        try:
            return list(await kv.keys(**kwargs))
        except jserr.NoKeysError:
            continue
    raise AssertionError(f"{target.kind}: keys() found no keys in a bucket that has some")


async def _drain_initial(watcher: Any) -> list[Any]:
    """Entries up to the `None` that marks the end of the initial values."""
    entries = []
    while (entry := await watcher.updates(timeout=5)) is not None:
        entries.append(entry)
    return entries


async def test_watch_on_an_empty_bucket_says_initial_values_are_done(kv: Any) -> None:
    watcher = await kv.watchall()
    assert await watcher.updates(timeout=5) is None
    await watcher.stop()


async def test_watchall_gives_latest_values_then_live_updates(kv: Any) -> None:
    await kv.put("a", b"1")
    await kv.put("a", b"2")
    await kv.put("b", b"3")
    watcher = await kv.watchall()
    initial = await _drain_initial(watcher)
    assert [(e.key, e.value, e.revision, e.delta) for e in initial] == [
        ("a", b"2", 2, 1),
        ("b", b"3", 3, 0),
    ]
    assert all(e.bucket == "w" and e.operation is None for e in initial)
    now = datetime.datetime.now(datetime.UTC)
    assert abs((initial[0].created - now).total_seconds()) < 30
    await kv.put("c", b"4")
    live = await watcher.updates(timeout=5)
    assert (live.key, live.value, live.revision, live.delta) == ("c", b"4", 4, 0)
    await kv.delete("a")
    deleted = await watcher.updates(timeout=5)
    assert (deleted.key, deleted.operation, deleted.revision) == ("a", "DEL", 5)
    await kv.purge("b")
    purged = await watcher.updates(timeout=5)
    assert (purged.key, purged.operation, purged.revision) == ("b", "PURGE", 6)
    with pytest.raises(nats.errors.TimeoutError):
        await watcher.updates(timeout=0.3)
    await watcher.stop()


async def test_watch_with_include_history(kv: Any) -> None:
    for i in range(3):
        await kv.put("k", str(i).encode())
    await kv.put("other", b"x")
    await kv.delete("k")
    watcher = await kv.watchall(include_history=True)
    initial = await _drain_initial(watcher)
    assert [(e.key, e.value, e.operation) for e in initial] == [
        ("k", b"0", None),
        ("k", b"1", None),
        ("k", b"2", None),
        ("other", b"x", None),
        ("k", b"", "DEL"),
    ]
    assert [e.delta for e in initial] == [4, 3, 2, 1, 0]
    await watcher.stop()


async def test_watch_ignore_deletes(kv: Any) -> None:
    await kv.put("keep", b"1")
    await kv.put("gone", b"1")
    await kv.delete("gone")
    await kv.put("purged", b"1")
    await kv.purge("purged")
    watcher = await kv.watchall(ignore_deletes=True)
    assert [e.key for e in await _drain_initial(watcher)] == ["keep"]
    await kv.delete("keep")
    await kv.put("new", b"2")
    assert (await watcher.updates(timeout=5)).key == "new"
    await watcher.stop()


async def test_watch_meta_only_delivers_headers_only(kv: Any) -> None:
    await kv.put("a", b"some value")
    await kv.put("b", b"another")
    watcher = await kv.watchall(meta_only=True)
    initial = await _drain_initial(watcher)
    assert [(e.key, e.value, e.revision) for e in initial] == [("a", b"", 1), ("b", b"", 2)]
    info = await watcher._sub.consumer_info()
    assert info.config.headers_only is True
    await watcher.stop()


async def test_watch_one_key_and_wildcards(kv: Any) -> None:
    for key in ("a", "a.x", "a.y", "a.x.deep", "b.x"):
        await kv.put(key, key.encode())
    cases = {"a": ["a"], "a.*": ["a.x", "a.y"], "a.>": ["a.x", "a.y", "a.x.deep"],
             "*.x": ["a.x", "b.x"]}  # fmt: skip
    for pattern, expected in cases.items():
        watcher = await kv.watch(pattern)
        assert [e.key for e in await _drain_initial(watcher)] == expected, pattern
        await watcher.stop()
    watcher = await kv.watch("a.*")
    await _drain_initial(watcher)
    await kv.put("b.y", b"no")
    await kv.put("a.z", b"yes")
    assert (await watcher.updates(timeout=5)).key == "a.z"
    await watcher.stop()


async def test_watch_of_a_missing_key_then_its_creation(kv: Any) -> None:
    watcher = await kv.watch("later")
    assert await watcher.updates(timeout=5) is None
    await kv.put("later", b"v")
    entry = await watcher.updates(timeout=5)
    assert (entry.key, entry.value) == ("later", b"v")
    await watcher.stop()


async def test_watcher_as_async_iterator(kv: Any) -> None:
    await kv.put("a", b"1")
    watcher = await kv.watchall()
    seen = []
    async for entry in watcher:
        if entry is None:
            break
        seen.append(entry.key)
    assert seen == ["a"]
    await watcher.stop()


async def test_keys(kv: Any, target: Target) -> None:
    with pytest.raises(jserr.NoKeysError):
        await kv.keys()
    for key in ("b", "a", "c.x", "c.y"):
        await kv.put(key, b"v")
    await kv.put("a", b"again")
    await kv.delete("b")
    await kv.put("p", b"v")
    await kv.purge("p")
    assert sorted(await _keys(kv, target)) == ["a", "c.x", "c.y"]
    assert sorted(await _keys(kv, target, filters=["c."])) == ["c.x", "c.y"]


async def test_keys_when_every_key_is_deleted(kv: Any) -> None:
    await kv.put("a", b"1")
    await kv.delete("a")
    with pytest.raises(jserr.NoKeysError):
        await kv.keys()


async def test_history(kv: Any) -> None:
    await kv.put("h", b"1")
    await kv.put("x", b"other")
    await kv.put("h", b"2")
    await kv.delete("h")
    await kv.put("h", b"3")
    entries = await kv.history("h")
    assert [(e.value, e.revision, e.operation) for e in entries] == [
        (b"1", 1, None),
        (b"2", 3, None),
        (b"", 4, "DEL"),
        (b"3", 5, None),
    ]
    with pytest.raises(jserr.NoKeysError):
        await kv.history("missing")


async def test_history_after_purge(kv: Any) -> None:
    await kv.put("h", b"1")
    await kv.put("h", b"2")
    await kv.purge("h")
    entries = await kv.history("h")
    assert [(e.revision, e.operation) for e in entries] == [(3, "PURGE")]


async def test_purge_deletes_keeps_recent_markers_by_default(kv: Any, js: Any) -> None:
    await kv.put("a", b"1")
    await kv.put("a", b"2")
    await kv.delete("a")
    await kv.put("b", b"1")
    await kv.purge("b")
    await kv.put("c", b"live")
    assert await kv.purge_deletes() is True
    assert (await js.stream_info("KV_w")).state.messages == 3  # two recent markers and c
    with pytest.raises(jserr.KeyNotFoundError):
        await kv.get("a")


async def test_purge_deletes_older_than_nothing_removes_every_marker(
    kv: Any, js: Any, target: Target
) -> None:
    await kv.put("a", b"1")
    await kv.delete("a")
    await kv.put("b", b"1")
    await kv.purge("b")
    await kv.put("c", b"live")
    await kv.purge_deletes(olderthan=-1)
    assert (await js.stream_info("KV_w")).state.messages == 1
    assert await _keys(kv, target) == ["c"]
    with pytest.raises(jserr.NoKeysError):
        await kv.history("a")


async def test_watch_many_keys_needs_flow_control(js: Any, target: Target) -> None:
    """More entries than the watcher's queue (256) and the consumer's flow-control window:
    delivery must pause and resume, and every key arrive once, in order."""
    kv = await js.create_key_value(bucket="many")
    n = 3000
    futures = [await js.publish_async(f"$KV.many.k{i:05d}", b"v" * 100) for i in range(n)]
    await asyncio.gather(*futures)
    watcher = await kv.watchall()
    seen = [e.key for e in await _drain_initial(watcher)]
    assert seen == [f"k{i:05d}" for i in range(n)]
    await watcher.stop()
    assert len(await _keys(kv, target)) == n


async def test_two_watchers_see_the_same_updates(kv: Any) -> None:
    one = await kv.watchall()
    two = await kv.watch("x.*")
    assert await one.updates(timeout=5) is None
    assert await two.updates(timeout=5) is None
    await kv.put("x.1", b"a")
    await kv.put("y", b"b")
    assert (await one.updates(timeout=5)).key == "x.1"
    assert (await one.updates(timeout=5)).key == "y"
    assert (await two.updates(timeout=5)).key == "x.1"
    await one.stop()
    await two.stop()


async def test_the_watch_consumer_as_the_server_reports_it(kv: Any, js: Any) -> None:
    await kv.put("a", b"1")
    watcher = await kv.watch("a")
    await _drain_initial(watcher)
    assert (await js.stream_info("KV_w")).state.consumer_count == 1
    info = await js.consumer_info("KV_w", watcher._sub._consumer)
    config = info.config
    assert config.filter_subject == "$KV.w.a"
    assert config.inactive_threshold == 300
    assert config.flow_control is True
    assert config.idle_heartbeat == 5
    assert config.deliver_policy == "last_per_subject"
    assert config.ack_policy == "none"
    assert config.max_deliver == 1
    assert config.mem_storage is True
    assert (info.num_pending, info.delivered.stream_seq) == (0, 1)
    await watcher.stop()
