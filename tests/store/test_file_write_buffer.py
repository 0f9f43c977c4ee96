"""The file store's write buffer (ADR 0051): appends wait in memory until a sync writes
them in one piece, are read back from memory meanwhile, and find their disk space
reserved, so a full disk still refuses the append that does not fit and changes nothing.

The behavioural suite and the model test run against a buffered store too (the
"file-buffered" kind, conftest.py); these tests look at the files themselves.
"""

from __future__ import annotations

import shutil
import sys
import threading
from pathlib import Path

import pytest

from brook.jetstream.store.base import StoreFullError
from brook.jetstream.store.check import check_store
from brook.jetstream.store.file import FileStore
from brook.jetstream.store.file import format as fmt
from brook.jetstream.store.file.segment import Segment, segment_filename
from tests.support.tmpfs import small_tmpfs

T0 = 1_700_000_000_000_000_000
BUFFER = 64 * 1024


def segment_bytes(directory: Path) -> int:
    return sum(p.stat().st_size for p in (directory / "msgs").glob("*.seg"))


def test_appends_wait_for_the_sync_and_are_read_from_memory_meanwhile(tmp_path: Path) -> None:
    d = tmp_path / "s"
    s = FileStore(d, write_buffer_bytes=BUFFER)
    try:
        s.store("a.1", None, b"first", T0)
        s.sync()
        on_disk = segment_bytes(d)
        for i in range(2, 101):
            s.store(
                f"a.{i % 3}", b"NATS/1.0\r\nk: v\r\n\r\n" if i % 2 else None, b"m%d" % i, T0 + i
            )
        assert segment_bytes(d) == on_disk  # nothing written yet: one write at the sync
        assert s.statistics()["write_buffered_bytes"] > 0
        # Read back from memory: single loads, a batch and the last per subject.
        msg = s.load(50)
        assert msg is not None
        assert (msg.subject, msg.data) == ("a.2", b"m50")
        assert [m.seq for m in s.load_batch(">", 1, 100)] == list(range(1, 101))
        last = s.load_last("a.1")
        assert last is not None
        assert last.data == b"m100"
        crashed = tmp_path / "crashed"
        shutil.copytree(d, crashed)  # what a crash of the process before the sync leaves
        s.sync()
        assert segment_bytes(d) > on_disk
        assert s.statistics()["write_buffered_bytes"] == 0
        synced = tmp_path / "synced"
        shutil.copytree(d, synced)
    finally:
        s.close()
    for directory, last_seq in ((crashed, 1), (synced, 100)):
        report = check_store(directory)
        assert report.healthy, report.format()
        r = FileStore(directory)
        try:
            assert r.recovery_report.clean
            assert r.state().last_seq == last_seq
            msg = r.load(last_seq)
            assert msg is not None
            assert msg.data == (b"first" if last_seq == 1 else b"m100")
        finally:
            r.close()


def test_a_full_buffer_is_written_without_a_sync(tmp_path: Path) -> None:
    d = tmp_path / "s"
    s = FileStore(d, write_buffer_bytes=4096)
    try:
        record = fmt.OVERHEAD + len("b") + 100
        for i in range(100):
            s.store("b", None, bytes(100), T0 + i)
        # Written each time 4 KiB were pending: what is left pending is less than that.
        written = segment_bytes(d)
        assert 100 * record - 4096 < written < 100 * record
        assert s.statistics()["write_buffered_bytes"] < 4096
    finally:
        s.close()
    assert segment_bytes(d) > 100 * record  # the close syncs the rest


def test_erasing_a_message_still_pending_erases_it_on_disk(tmp_path: Path) -> None:
    d = tmp_path / "s"
    s = FileStore(d, write_buffer_bytes=BUFFER)
    try:
        for i in range(10):
            s.store("e", None, b"secret-%d" % i, T0 + i)
        assert s.remove(5, erase=True)
        assert s.load(5) is None
        loaded = s.load(6)
        assert loaded is not None
        assert loaded.data == b"secret-5"
        s.sync()
    finally:
        s.close()
    raw = b"".join(p.read_bytes() for p in (d / "msgs").glob("*.seg"))
    assert b"secret-4" not in raw
    assert b"secret-5" in raw
    assert check_store(d).healthy


def test_a_roll_writes_the_sealed_segment_and_a_restart_finds_everything(tmp_path: Path) -> None:
    d = tmp_path / "s"
    s = FileStore(d, segment_bytes_max=2048, write_buffer_bytes=BUFFER)
    try:
        for i in range(200):
            s.store(f"r.{i % 4}", None, b"%04d" % i, T0 + i)
        segments = sorted((d / "msgs").glob("*.seg"))
        assert len(segments) >= 4
        # Only the active segment holds pending appends: every sealed one is whole.
        assert all(p.stat().st_size >= 2048 for p in segments[:-1])
        assert [m.data for m in s.load_batch(">", 190, 10)] == [
            b"%04d" % i for i in range(189, 199)
        ]
    finally:
        s.close()
    r = FileStore(d)
    try:
        assert r.recovery_report.clean
        assert r.state().messages == 200
    finally:
        r.close()


DISK_BYTES = 1024 * 1024
PAYLOAD = bytes(range(256)) * 12


def test_a_full_disk_refuses_the_append_that_does_not_fit_and_changes_nothing(
    tmp_path: Path,
) -> None:
    with small_tmpfs(tmp_path / "disk", DISK_BYTES) as disk:
        s = FileStore(disk / "s", write_buffer_bytes=BUFFER)
        for i in range(10 * DISK_BYTES // len(PAYLOAD)):
            try:
                s.store(f"full.{i % 3}", None, PAYLOAD, T0 + i)
            except StoreFullError:
                break
        else:
            raise AssertionError("the disk never filled up")
        last = s.state().last_seq
        assert last > 100
        for _ in range(3):  # each refusal leaves the store as it was
            with pytest.raises(StoreFullError, match="No space left on device"):
                s.store("full.x", None, PAYLOAD, T0)
        assert s.state().last_seq == last
        s.sync()  # every accepted append had its space: the sync writes them all
        assert check_store(disk / "s").healthy
        s.close()
        s = FileStore(disk / "s")
        assert s.recovery_report.clean
        assert s.state().last_seq == last
        msg = s.load(last)
        assert msg is not None
        assert msg.data == PAYLOAD
        s.close()


def test_reads_agree_with_a_flush_from_another_thread(tmp_path: Path) -> None:
    """The sync thread writes the pending bytes while the event loop appends and reads:
    every read, wholly pending, straddling the written end or wholly written, returns
    exactly the bytes appended there."""
    seg = Segment.create(tmp_path, 1)
    seg.buffer_max = 1 << 20
    stop = threading.Event()

    def flusher() -> None:
        while not stop.is_set():
            seg.flush()

    thread = threading.Thread(target=flusher)
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # the threads take turns as often as they can
    thread.start()
    try:
        records: list[tuple[int, bytes]] = []
        for i in range(3000):
            record = b"%d:" % i + bytes([i % 251]) * (i % 97)
            records.append((seg.buffer(record), record))
            for offset, data in (records[-1], records[i // 2], records[(i * 7) % len(records)]):
                assert seg.read(offset, len(data)) == data
            if i % 10 == 0:  # a range of records, across the written end when it falls there
                offset = records[max(0, i - 5)][0]
                assert seg.read(offset, seg.size - offset) == b"".join(
                    r for _, r in records[max(0, i - 5) :]
                )
    finally:
        stop.set()
        thread.join()
        sys.setswitchinterval(interval)
        seg.flush()
        seg.close()
    assert (tmp_path / segment_filename(1)).read_bytes() == b"".join(r for _, r in records)
