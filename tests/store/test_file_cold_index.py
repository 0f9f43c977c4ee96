"""Packed index columns kept in a file, not in memory (ADR 0061), on real files: an open
store's packed segments hold their bytes in an unlinked file of the stream directory,
unpacks read them back and free them, a snapshot captured before a segment's region was
freed still writes that segment's bytes, and nothing is left in the directory."""

from __future__ import annotations

import shutil
from pathlib import Path

from brook.jetstream.store.file import FileStore
from brook.jetstream.store.file.index import BACKGROUND_SLOTS
from brook.jetstream.store.file.indexsnap import SNAPSHOT

T0 = 1_700_000_000_000_000_000
N = 600


def fill(d: Path) -> None:
    s = FileStore(d, segment_slots_max=50, index_hot_segments=1, fsync=False)
    s.store_run([(f"cd.{i % 3}", None, b"c-%05d" % i, T0 + i) for i in range(N)])
    s.close()


def check(s: FileStore) -> None:
    for seq in range(1, N + 1):
        m = s.load(seq)
        assert m is not None
        assert (m.subject, m.data, m.ts_ns) == (f"cd.{(seq - 1) % 3}", b"c-%05d" % (seq - 1),
                                                 T0 + seq - 1)  # fmt: skip


def packed_sizes(s: FileStore) -> int:
    return sum(seg.packed.size for seg in s._index.segments if seg.packed is not None)


def test_packed_segments_live_in_the_cold_file_and_come_back(tmp_path: Path) -> None:
    assert BACKGROUND_SLOTS > 50  # packed at once, not on the worker thread
    d = tmp_path / "s"
    fill(d)
    s = FileStore(d, segment_slots_max=50, index_hot_segments=1, fsync=False)
    try:
        stats = s.statistics()
        assert stats["segments"] == N // 50
        assert stats["index_packed_segments"] == N // 50 - 1  # all but the active one
        held = stats["index_cold_bytes"]
        assert held == packed_sizes(s) > 0
        assert all(seg.packed.spilled for seg in s._index.segments if seg.packed is not None)
        check(s)  # every segment unpacked in turn, one sealed one kept unpacked
        assert s.statistics()["index_unpacks"] == stats["index_unpacks"] + N // 50 - 1
        # Packed again as the reader moved on: in the file again (new regions).
        assert s.statistics()["index_cold_bytes"] == packed_sizes(s) > 0
        assert s.remove(7)
        assert s.purge(subject="cd.1").purged == N // 3
        assert s.statistics()["index_cold_bytes"] == packed_sizes(s)
    finally:
        s.close()
    # Nothing of the cold file in the directory, before or after the close.
    assert sorted(p.name for p in d.iterdir()) == sorted(["LOCK", "meta.json", "msgs", SNAPSHOT])
    s = FileStore(d, fsync=False)
    try:
        assert s.recovery_report.snapshot == "used"
        assert s.state().messages == N - 1 - N // 3  # seq 7 is cd.0's
        assert s.load(7) is None
        assert s.load(8) is None  # cd.1
        m = s.load(9)
        assert m is not None
        assert m.data == b"c-00008"
    finally:
        s.close()


def test_a_snapshot_captured_before_an_unpack_keeps_the_packed_bytes(tmp_path: Path) -> None:
    """The capture holds a packed segment whose region is freed (the segment unpacked by
    a read) before the capture is encoded: the region stays readable until then."""
    d = tmp_path / "s"
    fill(d)
    s = FileStore(d, segment_slots_max=50, index_hot_segments=1, fsync=False)
    try:
        s.store("cd.x", None, b"new", T0 + N)  # something new for a periodic snapshot
        job = s.capture_snapshot()
        assert job is not None
        before = s.statistics()["index_cold_bytes"]
        check(s)  # unpacks (frees) every sealed segment the capture holds packed
        assert s.statistics()["index_cold_bytes"] <= before
        assert job()
        kept = (d / SNAPSHOT).read_bytes()
    finally:
        s.close()
    # The periodic snapshot, not the one of the close: still exactly the log.
    (d / SNAPSHOT).write_bytes(kept)
    s = FileStore(d, fsync=False)
    try:
        assert s.recovery_report.snapshot == "used"
        check(s)
        m = s.load(N + 1)
        assert m is not None
        assert m.data == b"new"
    finally:
        s.close()
    shutil.rmtree(d)
