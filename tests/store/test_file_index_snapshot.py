"""The index snapshot (ADR 0046, storage-format.md 12) on real files: a clean close saves
the index, the next open loads it instead of replaying the log and ends with exactly the
state a full replay builds; a missing, damaged, stale or foreign snapshot falls back to
the replay and loses nothing."""

from __future__ import annotations

import os
import shutil
import struct
import zlib
from collections.abc import Callable
from pathlib import Path

import pytest

from brook.jetstream.store.base import StreamState
from brook.jetstream.store.file import FileStore, indexsnap, recovery
from brook.jetstream.store.file.index import Index
from brook.jetstream.store.file.segment import Segment
from tests.store.conftest import chunks_of

T0 = 1_700_000_000_000_000_000
N = 300


def fill(directory: Path, n: int = N, first: int = 0) -> None:
    s = FileStore(directory, segment_bytes_max=4096)
    try:
        for i in range(first, first + n):
            hdr = b"NATS/1.0\r\nI: %d\r\n\r\n" % i if i % 7 == 0 else None
            s.store(f"snap.{i % 5}.{i // 100}", hdr, b"data-%05d" % i, T0 + i)
        for seq in (2, 50, 51, 52, 140):
            if seq <= first + n:
                s.remove(seq)
    finally:
        s.close()


def shape(index: Index) -> object:
    """Everything the index holds, comparable across two opens."""
    subjects = index.subjects
    live = {name: sid for name, sid in subjects.by_name.items()}
    per_subject = {
        name: (e.all() if (e := subjects._multi.get(sid)) and e._seqs else None)
        for name, sid in live.items()
    }
    singles = {
        name: subjects._single[sid] for name, sid in live.items() if sid not in subjects._multi
    }

    def warmed(seg: Segment) -> Segment:
        index.warm(seg)  # packed columns unpacked (ADR 0054), each as it is read
        return seg

    def columns(seg: Segment) -> tuple[list[int], list[int], list[int], list[int]]:
        n = seg.count  # the slots; the columns may have spare room after them (ADR 0069)
        return list(seg.offs[:n]), list(seg.lens[:n]), list(seg.tss[:n]), list(seg.sids[:n])

    segments = [
        (
            seg.name, seg.base, seg.size, seg.live, offs,
            [n if off != 0xFFFFFFFF else None for n, off in zip(lens, offs, strict=True)],
            tss, [subjects.names[sid] if off != 0xFFFFFFFF else None
                  for sid, off in zip(sids, offs, strict=True)],
            list(seg.ext),
        )
        for seg in map(warmed, index.segments)
        for offs, lens, tss, sids in (columns(seg),)
    ]  # fmt: skip
    counters = (index.first, index.last, index.last_ts, index.messages, index.bytes)
    return counters, segments, per_subject, singles


def open_shape(directory: Path) -> tuple[str, object, StreamState]:
    s = FileStore(directory)
    try:
        return s.recovery_report.snapshot, shape(s._index), s.state()
    finally:
        s.close()


def full_replay_shape(directory: Path, tmp: Path) -> object:
    copy = tmp / "replayed"
    shutil.copytree(directory, copy)
    (copy / indexsnap.SNAPSHOT).unlink(missing_ok=True)
    used, index_shape, _state = open_shape(copy)
    assert used == "missing"
    return index_shape


def test_a_clean_close_saves_the_index_and_open_loads_it(tmp_path: Path) -> None:
    d = tmp_path / "s"
    fill(d)
    assert (d / indexsnap.SNAPSHOT).is_file()
    expected = full_replay_shape(d, tmp_path)
    used, loaded, state = open_shape(d)
    assert used == "used"
    assert loaded == expected
    assert state.messages == N - 5
    # The open removed it and the close wrote a new one, used again.
    assert open_shape(d)[:2] == ("used", expected)


def test_changes_after_a_loaded_snapshot_are_kept(tmp_path: Path) -> None:
    d = tmp_path / "s"
    fill(d)
    s = FileStore(d, segment_bytes_max=4096)
    try:
        assert s.recovery_report.snapshot == "used"
        assert not (d / indexsnap.SNAPSHOT).exists()  # removed at open
        for i in range(40):
            s.store("snap.new", None, b"after-%d" % i, T0 + N + i)
        s.remove(10)
        s.purge(subject="snap.3.>")
        crashed = tmp_path / "crashed"
        shutil.copytree(d, crashed)  # the files as a crash now would leave them
        state = s.state()
    finally:
        s.close()
    for directory, used in ((crashed, "missing"), (d, "used")):
        s = FileStore(directory)
        try:
            assert s.recovery_report.snapshot == used
            assert s.state() == state
            last = s.load_last("snap.new")
            assert last is not None
            assert last.data == b"after-39"
            assert s.load(10) is None
            assert s.subject_state("snap.3.>").messages == 0
        finally:
            s.close()
    assert open_shape(d)[1] == full_replay_shape(d, tmp_path)


def _rewrite(path: Path, edit: str) -> None:
    raw = bytearray(path.read_bytes())
    if edit == "flip":
        raw[len(raw) // 2] ^= 0x40
    elif edit == "truncate":
        del raw[len(raw) // 3 :]
    elif edit == "version":
        struct.pack_into("<I", raw, 8, indexsnap.VERSION + 1)
        raw[-4:] = struct.pack("<I", zlib.crc32(raw[:-4]))
    elif edit == "garbage":
        raw = bytearray(b"not a snapshot")
    path.write_bytes(bytes(raw))


@pytest.mark.parametrize(
    ("edit", "reason"),
    [
        ("flip", "bad checksum"),
        ("truncate", "bad checksum"),
        ("version", f"version {indexsnap.VERSION + 1}, not {indexsnap.VERSION}"),
        ("garbage", "not an index snapshot"),
    ],
)
def test_a_damaged_snapshot_falls_back_to_the_replay(
    tmp_path: Path, edit: str, reason: str, caplog: pytest.LogCaptureFixture
) -> None:
    d = tmp_path / "s"
    fill(d)
    expected = full_replay_shape(d, tmp_path)
    _rewrite(d / indexsnap.SNAPSHOT, edit)
    used, loaded, state = open_shape(d)
    assert used == reason
    assert loaded == expected
    assert state.messages == N - 5
    assert f"index snapshot not used ({reason})" in caplog.text


def test_a_snapshot_of_an_older_log_is_used_up_to_its_mark(tmp_path: Path) -> None:
    """A snapshot of an older log (appended to and closed since): the log still begins
    with what it covers, so it is loaded and only the records after its mark replayed."""
    d = tmp_path / "s"
    fill(d)
    old = (d / indexsnap.SNAPSHOT).read_bytes()
    fill(d, 50, first=N)  # reopen, append 50, close
    (d / indexsnap.SNAPSHOT).write_bytes(old)
    expected = full_replay_shape(d, tmp_path)
    used, loaded, state = open_shape(d)
    assert used == "used"
    assert state.messages == N + 50 - 5
    assert loaded == expected


def test_a_log_damaged_after_the_snapshot_is_replayed(tmp_path: Path) -> None:
    """Bytes of a covered segment rewritten after the close: the snapshot is not trusted
    and the replay finds the damage."""
    d = tmp_path / "s"
    fill(d)
    seg = sorted((d / "msgs").glob("*.seg"))[1]
    raw = bytearray(seg.read_bytes())
    raw[200] ^= 0xFF
    seg.write_bytes(bytes(raw))
    s = FileStore(d)
    try:
        assert s.recovery_report.snapshot.endswith("changed since the snapshot")
        assert not s.recovery_report.clean
    finally:
        s.close()


# ---------------------------------------------------------------- periodic snapshots


def crash(s: FileStore) -> None:
    """Leave the store as a SIGKILL would: descriptors closed, nothing synced or saved."""
    for seg in (*s._index.segments, *s._doomed):
        seg.close()
    os.close(s._lock_fd)
    s._closed = True


def periodic(s: FileStore) -> None:
    """One periodic snapshot, as the engine takes it (copy on the loop, job in a thread)."""
    job = s.capture_snapshot()
    assert job is not None
    assert job()


def _store_more(s: FileStore, n: int, tag: str = "new") -> None:
    last = s.state().last_seq
    for i in range(n):
        s.store(f"snap.{tag}", None, b"after-%d" % i, T0 + last + 1 + i)


AFTER: dict[str, tuple[Callable[[FileStore], object], str]] = {
    "appends": (lambda s: _store_more(s, 40), "used"),
    "removals": (lambda s: (s.remove(10), s.purge(subject="snap.3.>")), "used"),
    "expiry": (lambda s: s.expire_before(T0 + 120), "used"),
    "purge-reclaimed": (lambda s: s.purge(), "used"),  # the sync after it deletes them
    "reclaimed-in-part": (lambda s: s.purge(up_to_seq=N // 2), "used"),
    "erase": (lambda s: s.remove(11, erase=True), "missing"),
    "cut": (lambda s: s.truncate(N - 20), "missing"),
}


@pytest.mark.parametrize("after", AFTER)
def test_a_periodic_snapshot_is_used_up_to_its_mark_after_a_crash(
    tmp_path: Path, after: str
) -> None:
    """Snapshot, then changes, then a crash: the open loads the snapshot and replays
    what follows its mark, ending where a full replay ends; segments deleted with
    messages live at the mark, or bytes rewritten under it (erase and cut remove the
    snapshot first), fall back to the full replay."""
    d = tmp_path / "s"
    fill(d)
    s = FileStore(d, segment_bytes_max=4096)
    _store_more(s, 30, "before")
    periodic(s)
    change, used = AFTER[after]
    change(s)
    s.sync()
    state = s.state()
    crash(s)
    expected = full_replay_shape(d, tmp_path)
    got, loaded, reopened = open_shape(d)
    assert got == used
    assert loaded == expected
    assert reopened == state


def _torn(d: Path) -> None:
    last = sorted((d / "msgs").glob("*.seg"))[-1]
    with open(last, "ab") as f:
        f.write(b"\x00\x01half a record")


def _shortened(d: Path) -> None:
    first = sorted((d / "msgs").glob("*.seg"))[0]
    os.truncate(first, first.stat().st_size - 10)


def _replaced(d: Path) -> None:
    first = sorted((d / "msgs").glob("*.seg"))[0]
    raw = first.read_bytes()
    first.unlink()
    first.write_bytes(raw)  # the same bytes in another file: not the file it covers


@pytest.mark.parametrize(
    ("damage", "used"),
    [
        (_torn, "used"),
        (_shortened, "is {size} bytes, covered"),
        (_replaced, "changed since the snapshot"),
    ],
)
def test_the_log_after_a_crash_against_the_mark(tmp_path: Path, damage: object, used: str) -> None:
    """A torn write after the mark is cut off as ever; a covered segment cut short or
    replaced is not trusted."""
    d = tmp_path / "s"
    fill(d)
    s = FileStore(d, segment_bytes_max=4096)
    _store_more(s, 30)
    periodic(s)
    _store_more(s, 5, "tail")
    s.sync()
    crash(s)
    assert callable(damage)
    damage(d)
    expected = full_replay_shape(d, tmp_path)
    s = FileStore(d)
    try:
        report = s.recovery_report
        if used == "used":
            assert report.snapshot == "used"
            assert [f.kind for f in report.findings] == ["torn_tail"]
            assert s.load_last("snap.tail") is not None
        else:
            assert used.split("{size}")[-1].strip() in report.snapshot, report.snapshot
        assert shape(s._index) == expected
    finally:
        s.close()


def test_a_snapshot_made_stale_while_written_is_not_installed(tmp_path: Path) -> None:
    """An erase, or the close, between the copy and the write: the job writes nothing,
    and what the close saved is what the next open uses."""
    d = tmp_path / "s"
    fill(d)
    s = FileStore(d, segment_bytes_max=4096)
    _store_more(s, 10)
    job = s.capture_snapshot()
    assert job is not None
    s.remove(12, erase=True)
    assert job() is False
    assert not (d / indexsnap.SNAPSHOT).exists()
    periodic(s)
    assert s.capture_snapshot() is None, "nothing changed since the last one"
    _store_more(s, 3)
    job = s.capture_snapshot()
    assert job is not None
    s.close()
    assert job() is False
    expected = full_replay_shape(d, tmp_path)
    assert open_shape(d)[:2] == ("used", expected)


def test_frozen_subject_chunks_are_saved_and_loaded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Subjects' older sequences frozen in chunks (ADR 0058; chunks of 16 here), one of
    them changed by removals while thawed, are saved as chunks and loaded as they were:
    the same sequences as a full replay's, still frozen."""
    chunks_of(monkeypatch, 16)
    d = tmp_path / "s"
    s = FileStore(d, segment_bytes_max=4096)
    try:
        for i in range(600):
            s.store(f"c.{i % 3}", None, b"x%d" % i, T0 + i)
        for seq in (1, 4, 100, 103, 301):  # c.0's oldest two, two in a chunk, one more
            s.remove(seq)
        entry = s._index.subjects._multi[s._index.subjects.by_name["c.0"]]
        assert entry._cold is not None
        assert len(entry._cold) > 2
        assert any(c.packed is None for c in entry._cold)  # thawed and changed
    finally:
        s.close()
    expected = full_replay_shape(d, tmp_path)
    used, loaded, state = open_shape(d)
    assert used == "used"
    assert loaded == expected
    assert state.messages == 595
    s = FileStore(d)
    try:
        assert s.recovery_report.snapshot == "used"
        multi = s._index.subjects._multi.values()
        assert all(e._cold is not None and e._ncold >= 200 - 2 * 16 - 5 for e in multi)
        assert s.subject_state("c.0").first_seq == 7
        assert s.num_pending("c.1", 100) == len(range(101, 601, 3))
    finally:
        s.close()


def test_a_subject_whose_unfrozen_sequences_were_all_removed_is_loaded_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A subject left with frozen chunks only (its newest, unfrozen sequences removed) is
    saved with no tail sequences and loaded with every chunk's: not as a single message.
    (The store model found it: 2 messages counted as 1 after the reopen.)"""
    chunks_of(monkeypatch, 2)
    d = tmp_path / "s"
    s = FileStore(d)
    try:
        for i in range(4):
            s.store("a.x", None, b"x", T0 + i)  # 1, 2 frozen in a chunk; 3, 4 the tail
        s.remove(3)
        s.remove(4)
        assert s.subject_counts("a.x") == {"a.x": 2}
    finally:
        s.close()
    expected = full_replay_shape(d, tmp_path)
    used, loaded, state = open_shape(d)
    assert (used, state.messages) == ("used", 2)
    assert loaded == expected
    s = FileStore(d)
    try:
        assert s.subject_counts("a.x") == {"a.x": 2}
        assert s.subject_state("a.x").last_seq == 2
        assert s.num_pending("a.x", 1) == 2
    finally:
        s.close()


def test_an_open_of_a_large_log_returns_freed_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After opening a log of RELEASE_AFTER_BYTES or more the open calls glibc's
    malloc_trim (ADR 0058: 26 of 64 MB at 10M messages were freed pages kept); a smaller
    one does not (a store per stream: many small opens at a start)."""
    if recovery._MALLOC_TRIM is None:
        pytest.skip("not glibc")
    fill(tmp_path / "s")
    calls: list[int] = []
    monkeypatch.setattr(recovery, "_MALLOC_TRIM", calls.append)
    FileStore(tmp_path / "s").close()
    assert calls == []
    monkeypatch.setattr(recovery, "RELEASE_AFTER_BYTES", 4096)
    FileStore(tmp_path / "s").close()
    assert calls == [0]
