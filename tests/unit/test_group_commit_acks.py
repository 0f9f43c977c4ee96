"""A file stream's PubAcks leave through its group commit (commit.py, ADR 0057): none
before the sync that covers its message, in request order with the other callbacks a
sync satisfies, and after a failed sync none but the 10077 error, each to its reply.
A real `FileStore` in a temporary directory; the sync fails on demand, as an fsync
returning EIO would (the store's own failure tests: tests/store/). Each sync runs in the
executor's thread, covering what was requested before it started; a batch the executor
refuses (shut down) is a failed sync."""

from __future__ import annotations

import asyncio
import json
import threading
from concurrent.futures import ThreadPoolExecutor
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


async def test_a_sync_covers_what_was_requested_before_it_started_in_the_executors_thread(
    tmp_path: Path,
) -> None:
    # The sync runs in the executor given (one of its threads), never on the loop, and a
    # request made while it runs waits for the next one.
    store = FileStore(directory=tmp_path / "S")
    release = threading.Event()
    threads: list[str] = []

    def sync() -> None:
        threads.append(threading.current_thread().name)
        if len(threads) == 1:
            release.wait(10)
        store.sync()

    executor = ThreadPoolExecutor(1, thread_name_prefix="brook-sync-test")
    committer = GroupCommitter(sync, executor)
    done: list[tuple[str, BaseException | None]] = []
    try:
        committer.request(lambda error: done.append(("first", error)))
        while not threads:  # the first sync has started, with the first request
            await asyncio.sleep(0.001)
        committer.request(lambda error: done.append(("second", error)))
        committer.request(lambda error: done.append(("third", error)))
        assert committer.pending == 2
        await asyncio.sleep(0.01)
        assert done == []  # its sync is held
        release.set()
        while len(done) < 3:
            await asyncio.sleep(0.001)
        assert done == [("first", None), ("second", None), ("third", None)]
        assert committer.syncs == 2  # one sync for the two made during the first
        assert threads == ["brook-sync-test_0"] * 2
    finally:
        release.set()
        executor.shutdown(wait=True)
        store.close()


async def test_a_batch_the_shut_down_executor_refuses_is_a_failed_sync(tmp_path: Path) -> None:
    # No PubAck but the 10077 error for it, and `drain` still ends (a publish arriving
    # while the server stops must neither raise into its connection nor hang the stop).
    store = FileStore(directory=tmp_path / "S")
    executor = ThreadPoolExecutor(1)
    executor.shutdown(wait=True)
    committer = GroupCommitter(store.sync, executor)
    sent: list[tuple[bytes, bytes]] = []
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
        await asyncio.wait_for(committer.drain(), 5)
        assert [reply for reply, _ in sent] == [b"r.1"]
        error = json.loads(sent[0][1])["error"]
        assert error["err_code"] == 10077
        assert error["description"].startswith("storage failure: ")
        assert committer.pending == 0
    finally:
        stream.close()
