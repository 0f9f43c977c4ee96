"""Commit markers: the last micro-batch a streaming query has fully written, kept in a KV bucket.

Derived message ids make a replayed micro-batch harmless only while its first publishes are
inside the stream's duplicate window (two minutes by default). A query that crashes after
writing batch N but before Spark records the commit replays batch N on restart, possibly
hours later. The sink therefore records N in a Key-Value bucket (`commitBucket`, key = the
query id, stable across restarts) when Spark commits the batch; tasks of a batch whose id is
at or below the marker skip publishing. KV is a client convention over a plain stream, so
this works on any JetStream server.
"""

from __future__ import annotations

import json

from nats.js.errors import BucketNotFoundError, KeyNotFoundError

from brook_spark.wire import RawClient


async def last_committed(nc: RawClient, bucket: str, query_id: str) -> int | None:
    js = nc.jetstream()
    try:
        kv = await js.key_value(bucket)
        entry = await kv.get(query_id)
    except (BucketNotFoundError, KeyNotFoundError):
        return None
    if not entry.value:
        return None
    return int(json.loads(entry.value)["batch_id"])


async def record_commit(nc: RawClient, bucket: str, query_id: str, batch_id: int) -> None:
    js = nc.jetstream()
    try:
        kv = await js.key_value(bucket)
    except BucketNotFoundError:
        kv = await js.create_key_value(
            bucket=bucket, history=1, description="brook_spark streaming sink commits"
        )
    current = await last_committed(nc, bucket, query_id)
    if current is not None and current >= batch_id:
        return
    await kv.put(query_id, json.dumps({"batch_id": batch_id}).encode())
