"""The file store on a filesystem that fills up (a real tmpfs, the kernel answering ENOSPC).

A write that does not fit raises `StoreFullError` and changes nothing: no message, no
partial record left in the segment, no sequence used. Reads go on. A purge frees the space
of every segment, the newest included, and writes then resume on the same store; a store
can be opened on a full disk and purged there.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from brook.jetstream.store.base import StoreFullError
from brook.jetstream.store.check import check_store
from brook.jetstream.store.file import FileStore
from tests.support.tmpfs import fill_up, free_bytes, small_tmpfs

T0 = 1_700_000_000_000_000_000
DISK_BYTES = 1024 * 1024
PAYLOAD = bytes(range(256)) * 12  # 3 KiB: records straddle pages, so writes tear


def store_until_full(s: FileStore) -> int:
    """Store messages until the disk refuses one; returns the last stored sequence."""
    for i in range(10 * DISK_BYTES // len(PAYLOAD)):
        try:
            s.store(f"full.{i % 3}", None, PAYLOAD, T0 + i)
        except StoreFullError:
            break
    else:
        raise AssertionError("the disk never filled up")
    with pytest.raises(StoreFullError, match="No space left on device"):
        s.store("full.x", None, PAYLOAD, T0)
    return s.state().last_seq


def test_a_full_disk_refuses_writes_and_changes_nothing(tmp_path: Path) -> None:
    with small_tmpfs(tmp_path / "disk", DISK_BYTES) as disk:
        s = FileStore(disk / "s")
        last = store_until_full(s)
        assert last > 100
        for _ in range(3):  # each refusal leaves the store exactly as it was
            with pytest.raises(StoreFullError):
                s.store("full.x", None, PAYLOAD, T0)
        state = s.state()
        assert (state.messages, state.last_seq) == (last, last)
        assert s.load(last) is not None  # reads go on
        assert s.load(1) is not None
        s.sync()
        # No half-written record after the last one: the log is clean as it is.
        assert check_store(disk / "s").healthy
        s.close()
        s = FileStore(disk / "s")
        assert s.recovery_report.clean
        assert s.state().last_seq == last
        s.close()


def test_purge_frees_every_segment_and_writes_resume(tmp_path: Path) -> None:
    with small_tmpfs(tmp_path / "disk", DISK_BYTES) as disk:
        s = FileStore(disk / "s", segment_bytes_max=256 * 1024)
        last = store_until_full(s)
        assert len(list((disk / "s" / "msgs").iterdir())) > 1
        assert s.purge().purged == last
        s.sync()
        # Every segment that held messages is gone, the newest (active) one included.
        segs = list((disk / "s" / "msgs").iterdir())
        assert [p.stat().st_size < 1024 for p in segs] == [True]
        assert free_bytes(disk) > DISK_BYTES * 9 // 10
        assert s.store("full.after", None, PAYLOAD, T0) == last + 1
        state = s.state()
        assert (state.first_seq, state.last_seq, state.messages) == (last + 1, last + 1, 1)
        s.close()
        s = FileStore(disk / "s")
        state = s.state()
        assert (state.first_seq, state.last_seq, state.messages) == (last + 1, last + 1, 1)
        assert s.recovery_report.clean
        s.close()


def test_a_store_opens_on_a_full_disk_and_a_purge_makes_room(tmp_path: Path) -> None:
    with small_tmpfs(tmp_path / "disk", DISK_BYTES) as disk:
        s = FileStore(disk / "s")
        last = store_until_full(s)
        s.close()
        fill_up(disk, leave_bytes=8192)  # room for a record or two, not for a message
        s = FileStore(disk / "s")
        assert s.state().last_seq == last
        with pytest.raises(StoreFullError):
            s.store("full.x", None, PAYLOAD, T0)
        s.purge()
        s.sync()
        assert free_bytes(disk) > DISK_BYTES // 2
        assert s.store("full.x", None, PAYLOAD, T0) == last + 1
        s.close()
        assert check_store(disk / "s").healthy


def test_a_skip_without_room_for_a_new_segment_is_kept_until_there_is(tmp_path: Path) -> None:
    """`skip_to` records the skip with a new segment; with no file left to create (the
    inodes used up) it holds in memory, the next append rolls first, and is refused until
    it can."""
    with small_tmpfs(tmp_path / "disk", DISK_BYTES, inodes=64) as disk:
        s = FileStore(disk / "s")
        for i in range(3):
            s.store("a", None, b"x", T0 + i)
        spare: list[Path] = []
        with pytest.raises(OSError, match="No space left"):  # noqa: PT012
            for i in range(64):
                (disk / f"spare{i}").touch()
                spare.append(disk / f"spare{i}")
        s.skip_to(10)
        assert s.state().last_seq == 10
        with pytest.raises(StoreFullError):
            s.store("a", None, b"x", T0 + 3)
        spare.pop().unlink()
        assert s.store("a", None, b"x", T0 + 3) == 11
        s.close()
        s = FileStore(disk / "s")
        assert (s.state().last_seq, s.state().messages) == (11, 4)
        s.close()
