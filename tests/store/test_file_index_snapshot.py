"""The index snapshot (ADR 0046, storage-format.md 12) on real files: a clean close saves
the index, the next open loads it instead of replaying the log and ends with exactly the
state a full replay builds; a missing, damaged, stale or foreign snapshot falls back to
the replay and loses nothing."""

from __future__ import annotations

import shutil
import struct
import zlib
from pathlib import Path

import pytest

from brook.jetstream.store.base import StreamState
from brook.jetstream.store.file import FileStore, indexsnap
from brook.jetstream.store.file.index import Index

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
        name: (list(e._seqs[e._head :]) if (e := subjects._multi.get(sid)) and e._seqs else None)
        for name, sid in live.items()
    }
    singles = {
        name: subjects._single[sid] for name, sid in live.items() if sid not in subjects._multi
    }
    segments = [
        (
            seg.name, seg.base, seg.size, seg.live, list(seg.offs), list(seg.lens),
            list(seg.tss), [subjects.names[sid] if off != 0xFFFFFFFF else None
                            for sid, off in zip(seg.sids, seg.offs, strict=True)],
            list(seg.ext),
        )
        for seg in index.segments
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


def test_a_stale_snapshot_is_not_used(tmp_path: Path) -> None:
    """A snapshot of an older log (appended to and closed since) does not match it."""
    d = tmp_path / "s"
    fill(d)
    old = (d / indexsnap.SNAPSHOT).read_bytes()
    fill(d, 50, first=N)  # reopen, append 50, close
    (d / indexsnap.SNAPSHOT).write_bytes(old)
    used, loaded, state = open_shape(d)
    assert used.startswith("segment") or "segments covered" in used, used
    assert state.messages == N + 50 - 5
    assert loaded == full_replay_shape(d, tmp_path)


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
