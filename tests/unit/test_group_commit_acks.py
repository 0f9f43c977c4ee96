"""A file stream's PubAcks leave through its group commit (commit.py, ADR 0057): none
before the sync that covers its message, in request order with the other callbacks a
sync satisfies, and after a failed sync none but the 10077 error, each to its reply.
A real `FileStore` in a temporary directory; the sync fails on demand, as an fsync
returning EIO would (the store's own failure tests: tests/store/)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from brook.jetstream.commit import GroupCommitter
from brook.jetstream.store.base import StoreError
from brook.jetstream.store.file import FileStore
from brook.jetstream.stream import Stream
from tests.support.streams import Clock, stream_config

pytestmark = pytest.mark.timeout(30)


async def test_pubacks_wait_for_their_sync_keep_order_and_report_a_failed_one(
    tmp_path: Path,
) -> None:
    store = FileStore(directory=tmp_path / "S")
    failure: list[str] = []

    def sync() -> None:
        if failure:
            raise StoreError(failure[0])
        store.sync()

    committer = GroupCommitter(sync, None)
    sent: list[tuple[object, object]] = []
    clock = Clock()
    stream = Stream(
        stream_config(storage="file"),
        store,
        now_ns=clock,
        send_ack=lambda reply, ack: sent.append((reply, ack)),
        committer=committer,
        created_ns=clock.now,
    )
    try:
        stream.ingest(b"s.a", b"r.1", None, b"one")
        stream.when_durable(lambda error: sent.append(("callback", error)))
        stream.ingest(b"s.b", b"r.2", b"NATS/1.0\r\nNats-Msg-Id: m2\r\n\r\n", b"two")
        assert sent == []  # the first sync is under way: nothing is durable yet
        await committer.drain()
        assert sent == [
            (b"r.1", b'{"stream":"S","seq":1}'),
            ("callback", None),
            (b"r.2", b'{"stream":"S","seq":2}'),
        ]
        sent.clear()
        failure.append("sync failed: EIO")
        stream.ingest(b"s.a", b"r.3", None, b"three")
        stream.ingest(b"s.a", b"r.4", None, b"four")
        await committer.drain()
        assert [reply for reply, _ in sent] == [b"r.3", b"r.4"]
        for _, ack in sent:
            assert isinstance(ack, bytes)
            assert json.loads(ack) == {
                "error": {
                    "code": 503,
                    "err_code": 10077,
                    "description": "storage failure: sync failed: EIO",
                },
                "stream": "S",
                "seq": 0,
            }
    finally:
        failure.clear()
        stream.close()
