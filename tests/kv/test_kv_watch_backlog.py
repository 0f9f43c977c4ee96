"""A KV watcher whose application falls behind: the 1M-key scale test's stall, in seconds.

The watcher's application reads nothing until the server has delivered the whole bucket.
nats-py answers flow control on receipt (see `backlog.py`), so the entire backlog lands in
the watcher subscription's queue. With a queue smaller than the backlog nats-py drops the
overflow, reports it only to `error_cb`, and the watch never reaches the entry with delta 0
that ends the initial values: it stalls, although the server's consumer has delivered
everything and is still bound. The same happens against nats-server, which shows the stall
is the client's. With a queue that holds the backlog (what the scale test now gives its
watchers) every entry arrives. The tight queue here is 1000 messages for a 3000-key
backlog, the scale test's 512Ki-message default against a 1M-key bucket made small.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import nats.errors
import pytest

from tests.kv.backlog import BacklogJetStream
from tests.kv.conftest import Target

pytestmark = pytest.mark.timeout(60)

KEYS = 3000
BUCKET = "lag"
STREAM = f"KV_{BUCKET}"


async def _loaded_bucket(nc: Any, js: Any) -> Any:
    kv = await js.create_key_value(bucket=BUCKET)
    for i in range(KEYS):  # core publishes, pipelined: the stream stores them all the same
        await nc.publish(f"$KV.{BUCKET}.k{i:05d}", b"v")
    deadline = time.monotonic() + 20
    while (await kv.status()).values < KEYS:
        assert time.monotonic() < deadline, "the puts were not all stored"
        await asyncio.sleep(0.05)
    return kv


async def _watch_while_not_reading(target: Target, pending_msgs_limit: int) -> dict[str, Any]:
    """Start a watchall, read nothing until the server has delivered every key, then read
    what the watcher has. Returns what the client saw and the server's consumer state."""
    errors: list[Exception] = []

    async def on_error(err: Exception) -> None:
        errors.append(err)

    nc = await nats.connect(target.url, allow_reconnect=False, error_cb=on_error)
    try:
        js = BacklogJetStream(nc, pending_msgs_limit=pending_msgs_limit, timeout=10)
        kv = await _loaded_bucket(nc, js)
        watcher = await kv.watchall()
        deadline = time.monotonic() + 20
        while True:
            (info,) = await js.consumers_info(STREAM)
            assert info.delivered is not None
            if info.delivered.stream_seq == KEYS:
                break
            assert time.monotonic() < deadline, f"server delivered only {info.delivered}"
            await asyncio.sleep(0.05)
        await nc.flush()  # every delivery made so far has been through nats-py's reader
        entries = []
        finished = False
        try:
            while (entry := await watcher.updates(timeout=1)) is not None:
                entries.append(entry)
            finished = True
        except nats.errors.TimeoutError:
            pass
        (info,) = await js.consumers_info(STREAM)
        assert info.delivered is not None
        await watcher.stop()
        return {
            "entries": entries,
            "finished": finished,
            "dropped": sum(isinstance(e, nats.errors.SlowConsumerError) for e in errors),
            "other_errors": [e for e in errors if not isinstance(e, nats.errors.SlowConsumerError)],
            "delivered": info.delivered.stream_seq,
            "num_pending": info.num_pending,
            "push_bound": info.push_bound,
        }
    finally:
        await nc.close()


async def test_a_watcher_whose_queue_overflows_stalls_with_the_server_consumer_healthy(
    target: Target,
) -> None:
    seen = await _watch_while_not_reading(target, pending_msgs_limit=1000)
    assert seen["other_errors"] == []
    assert seen["dropped"] > 0, "nats-py queued more than its limit?"
    assert len(seen["entries"]) + seen["dropped"] == KEYS
    # The entry with delta 0 was among the dropped ones: no end-of-initial-values marker.
    assert not seen["finished"]
    assert all(e.delta > 0 for e in seen["entries"])
    # The server did its part and still has the watcher bound.
    assert (seen["delivered"], seen["num_pending"], seen["push_bound"]) == (KEYS, 0, True)


async def test_a_watcher_whose_queue_holds_the_backlog_gets_every_entry(target: Target) -> None:
    seen = await _watch_while_not_reading(target, pending_msgs_limit=KEYS + 1000)
    assert (seen["dropped"], seen["other_errors"]) == (0, [])
    assert seen["finished"]
    entries = seen["entries"]
    assert [e.key for e in entries] == [f"k{i:05d}" for i in range(KEYS)]
    assert [e.delta for e in entries[-2:]] == [1, 0]
    assert (seen["delivered"], seen["num_pending"], seen["push_bound"]) == (KEYS, 0, True)
