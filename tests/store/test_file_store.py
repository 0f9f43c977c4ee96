"""The file store on real files: persistence, segments, space reclamation, erase, durability
under concurrency, memory per message, and the `brook store check` command.

The behaviour every store shares is in test_store_behaviour.py / test_store_model.py; this
file covers what only a file store has. Damage and recovery are in test_file_recovery.py.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import sys
import threading
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

from brook.cli.store import store_check_command
from brook.jetstream.store.base import (
    RecordSpan,
    StoredMessage,
    StoreError,
    file_msg_size,
)
from brook.jetstream.store.check import check_store
from brook.jetstream.store.file import FileStore
from brook.jetstream.store.file import format as fmt
from brook.jetstream.store.memory import MemoryStore

SRC = Path(__file__).resolve().parents[2] / "src"
T0 = 1_700_000_000_000_000_000


def seg_files(directory: Path) -> list[Path]:
    return sorted((directory / "msgs").glob("*.seg"))


def raw_bytes(directory: Path) -> bytes:
    return b"".join(p.read_bytes() for p in seg_files(directory))


def fill(
    store: FileStore | MemoryStore, n: int, *, subject: str = "s.{i}", size: int = 10
) -> list[int]:
    return [
        store.store(subject.format(i=i % 7), None, f"{i:0{size}d}".encode(), T0 + i)
        for i in range(n)
    ]


def snapshot(store: FileStore | MemoryStore) -> tuple[object, ...]:
    """Everything observable, for comparing stores (bytes accounting differs by kind)."""
    st_ = store.state(deleted_details=True, subjects_filter=">")
    st_.bytes = 0
    msgs = []
    for seq in range(max(1, st_.first_seq), st_.last_seq + 1):
        msgs.append(store.load(seq))
    return (st_, msgs, store.load_last(">"), store.subject_state("s.*"))


# ---------------------------------------------------------------------- basics


def test_round_trip_every_field(tmp_path: Path) -> None:
    s = FileStore(tmp_path / "st")
    cases = [
        ("a", None, b""),
        ("a.b.c", b"NATS/1.0\r\nX: 1\r\n\r\n", b"payload"),
        ("utf8.\u00e9\u4e2d", None, bytes(range(256))),
        ("big", None, b"z" * 200_000),
        ("empty.hdr", b"", b"d"),
    ]
    seqs = [s.store(subj, hdr, data, T0 + i) for i, (subj, hdr, data) in enumerate(cases)]
    assert seqs == [1, 2, 3, 4, 5]
    for seq, (subj, hdr, data) in zip(seqs, cases, strict=True):
        assert s.load(seq) == StoredMessage(seq, subj, hdr or None, data, T0 + seq - 1)
    assert s.state().bytes == sum(file_msg_size(*c) for c in cases)
    s.close()
    s = FileStore(tmp_path / "st")
    for seq, (subj, hdr, data) in zip(seqs, cases, strict=True):
        assert s.load(seq) == StoredMessage(seq, subj, hdr or None, data, T0 + seq - 1)
    assert s.recovery_report.clean
    s.close()


def test_reopen_keeps_state_deletes_and_purges(tmp_path: Path) -> None:
    s = FileStore(tmp_path, first_seq=100)
    m = MemoryStore(first_seq=100)
    for store in (s, m):
        fill(store, 50)
        store.remove(100)  # first: first_seq advances
        store.remove(120)  # middle: a gap
        store.purge(subject="s.3")
        store.purge(up_to_seq=110)
        store.purge(subject="s.*", keep=20)
        store.expire_before(T0 + 30)
    s.remove(149, erase=True)  # the last: last_seq and last_ts stay
    m.remove(149)
    assert snapshot(s) == snapshot(m)
    s.close()
    s = FileStore(tmp_path, first_seq=100)
    assert snapshot(s) == snapshot(m)
    assert s.state().last_seq == 149
    assert s.state().last_ts_ns == T0 + 49
    s.purge()
    s.close()
    s = FileStore(tmp_path, first_seq=100)
    st_ = s.state()
    assert (st_.messages, st_.first_seq, st_.last_seq, st_.last_ts_ns) == (0, 150, 149, T0 + 49)
    assert s.store("n", None, b"", T0 + 99) == 150  # sequences are never reused
    s.close()


def test_fresh_store_first_seq_survives_reopen(tmp_path: Path) -> None:
    FileStore(tmp_path, first_seq=42).close()
    s = FileStore(tmp_path, first_seq=42)
    assert (s.state().first_seq, s.state().last_seq) == (42, 41)
    assert s.store("a", None, b"", 1) == 42
    s.close()


def test_closed_store_refuses(tmp_path: Path) -> None:
    s = FileStore(tmp_path)
    s.close()
    s.close()  # idempotent
    for call in (lambda: s.load(1), lambda: s.store("a", None, b"", 1), s.sync, s.state):
        with pytest.raises(StoreError):
            call()


def test_subject_too_long_is_refused(tmp_path: Path) -> None:
    s = FileStore(tmp_path)
    with pytest.raises(StoreError):
        s.store("a" * 70_000, None, b"", 1)
    assert s.store("ok", None, b"", 1) == 1
    s.close()


# ---------------------------------------------------------------------- durability


def test_crash_after_sync_loses_nothing(tmp_path: Path) -> None:
    """A process killed with os._exit (no close, no atexit) after sync()."""
    script = f"""
import os, sys
sys.path.insert(0, {str(SRC)!r})
from brook.jetstream.store.file import FileStore
s = FileStore({str(tmp_path)!r}, segment_bytes_max=4096)
for i in range(500):
    s.store("crash." + str(i % 5), None, b"%06d" % i, {T0} + i)
s.remove(3)
s.purge(subject="crash.4")
s.sync()
for i in range(500, 510):
    s.store("late", None, b"x", {T0} + i)
os._exit(0)
"""
    subprocess.run([sys.executable, "-c", script], check=True, timeout=60)
    s = FileStore(tmp_path)
    assert s.recovery_report.clean, s.recovery_report
    for i in range(500):
        msg = s.load(i + 1)
        if i == 2 or i % 5 == 4:
            assert msg is None
        else:
            assert msg is not None
            assert msg.data == b"%06d" % i
    assert s.state().last_seq == 510  # written to the OS, so a process crash keeps it too
    s.close()


def test_copy_of_open_store_after_sync_is_complete(tmp_path: Path) -> None:
    """The directory bytes as a crash would leave them: copied while the store is open."""
    s = FileStore(tmp_path / "live", segment_bytes_max=2048)
    fill(s, 300)
    s.remove(10)
    s.sync()
    shutil.copytree(tmp_path / "live", tmp_path / "copy")
    expected = snapshot(s)
    s.close()
    c = FileStore(tmp_path / "copy", segment_bytes_max=2048)
    assert c.recovery_report.clean
    assert snapshot(c) == expected
    c.close()


def test_concurrent_sync_while_storing(tmp_path: Path) -> None:
    """A thread loops sync() while the loop thread stores 50k messages, rolls segments and
    removes whole segments' worth of messages (so descriptors get closed under it)."""
    s = FileStore(tmp_path, segment_bytes_max=256 * 1024)
    stop = threading.Event()
    errors: list[BaseException] = []

    def syncer() -> None:
        while not stop.is_set():
            try:
                s.sync()
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)
                return

    t = threading.Thread(target=syncer)
    t.start()
    try:
        removed = set()
        for i in range(50_000):
            s.store(f"c.{i % 10}", None, b"%08d" % i, T0 + i)
            if i % 3 == 0 and i < 30_000:
                s.remove(i + 1)
                removed.add(i + 1)
            if i == 40_000:
                s.purge(up_to_seq=5_000)
                removed.update(range(1, 5_000))
    finally:
        stop.set()
        t.join()
    assert not errors, errors
    s.sync()
    assert s.statistics()["pending_deletions"] == 0
    s.close()
    s = FileStore(tmp_path, segment_bytes_max=256 * 1024)
    assert s.recovery_report.clean
    assert s.state().messages == 50_000 - len(removed)
    for seq in range(1, 50_001, 7):
        msg = s.load(seq)
        assert (msg is None) == (seq in removed)
        assert msg is None or msg.data == b"%08d" % (seq - 1)
    s.close()
    assert check_store(tmp_path).healthy


def test_failed_fsync_stops_the_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    s = FileStore(tmp_path)
    s.store("a", None, b"x", 1)

    def broken(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fsync", broken)
    with pytest.raises(StoreError):
        s.sync()
    monkeypatch.undo()
    with pytest.raises(StoreError):  # a retry could falsely succeed: refuse instead
        s.sync()
    with pytest.raises(StoreError):
        s.store("a", None, b"x", 2)
    assert s.load(1) is not None  # reads still work
    s.close()


def test_fsync_false_mode(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    s = FileStore(tmp_path, fsync=False)
    calls: list[int] = []
    monkeypatch.setattr(os, "fsync", calls.append)
    fill(s, 10)
    s.sync()
    assert calls == []
    monkeypatch.undo()
    s.close()
    assert FileStore(tmp_path).state().messages == 10


def test_a_new_store_is_made_durable_by_its_first_sync(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Creating a store (a stream) costs no fsync; the first sync, before any message is
    acknowledged, fsyncs its files and every directory that names a new one."""
    synced: list[Path] = []
    fsync = os.fsync

    def recording(fd: int) -> None:
        synced.append(Path(os.readlink(f"/proc/self/fd/{fd}")))
        fsync(fd)

    monkeypatch.setattr(os, "fsync", recording)
    directory = tmp_path / "stream" / "data"
    s = FileStore(directory)
    assert synced == []
    s.store("a", None, b"x", 1)
    s.sync()
    (segment,) = seg_files(directory)
    expected = {segment, directory / "meta.json", directory / "msgs", directory}
    assert expected | {tmp_path / "stream", tmp_path} == set(synced)
    synced.clear()
    s.store("a", None, b"x", 2)
    s.sync()
    assert synced == [segment]  # only once
    s.close()


def test_a_new_store_lost_before_its_first_sync_opens_as_new(tmp_path: Path) -> None:
    """What a power loss may leave of a store nothing was ever synced in: no meta.json,
    an empty or no segment. It opens as the new, empty store it was, nothing reported."""
    FileStore(tmp_path, first_seq=5).close()
    (tmp_path / "meta.json").unlink()
    for segment in seg_files(tmp_path):
        segment.unlink()
    s = FileStore(tmp_path, first_seq=5)
    assert s.recovery_report.clean
    assert s.store("a", None, b"x", 1) == 5
    s.close()


# ---------------------------------------------------------------------- segments


def test_segments_roll_and_whole_segments_are_deleted(tmp_path: Path) -> None:
    s = FileStore(tmp_path, segment_bytes_max=1024)
    seqs = fill(s, 200)
    files = seg_files(tmp_path)
    assert len(files) > 5
    assert all(p.stat().st_size < 1024 + 200 for p in files)  # rolled once past the limit
    names = [int(p.stem) for p in files]
    assert names[0] == 1
    assert names == sorted(names)
    first_file = files[0]
    in_first = [q for q in seqs if q < names[1]]
    for q in in_first[:-1]:
        s.remove(q)
    s.sync()
    assert first_file.exists()  # one message still live
    s.remove(in_first[-1])
    s.sync()
    assert not first_file.exists()
    disk_before = sum(p.stat().st_size for p in seg_files(tmp_path))
    s.purge(up_to_seq=150)
    s.sync()
    disk_after = sum(p.stat().st_size for p in seg_files(tmp_path))
    assert disk_after < disk_before / 2
    expected = snapshot(s)
    s.close()
    s = FileStore(tmp_path, segment_bytes_max=1024)
    assert snapshot(s) == expected
    assert s.recovery_report.clean
    s.close()
    assert check_store(tmp_path).healthy


@pytest.mark.parametrize("how", ["purge", "purge_up_to", "expire"])
def test_emptying_the_store_deletes_the_newest_segment_too(tmp_path: Path, how: str) -> None:
    """A purge that leaves nothing frees the space of every segment, the one being
    appended to included (on a full disk, purging is how an operator makes room)."""
    s = FileStore(tmp_path)
    fill(s, 2000, size=100)
    [newest] = seg_files(tmp_path)
    assert newest.stat().st_size > 200_000
    if how == "purge":
        assert s.purge().purged == 2000
    elif how == "purge_up_to":
        assert s.purge(up_to_seq=2001).purged == 2000
    else:
        assert len(s.expire_before(T0 + 2000)) == 2000
    s.sync()
    assert not newest.exists()
    assert sum(p.stat().st_size for p in seg_files(tmp_path)) < 200
    state = s.state()
    assert (state.messages, state.first_seq, state.last_seq) == (0, 2001, 2000)
    s.close()
    s = FileStore(tmp_path)
    assert s.recovery_report.clean
    state = s.state()
    assert (state.first_seq, state.last_seq, state.last_ts_ns) == (2001, 2000, T0 + 1999)
    assert s.store("s.x", None, b"x", T0 + 2000) == 2001
    s.close()
    assert check_store(tmp_path).healthy


@pytest.mark.parametrize("messages", [0, 5])
def test_skip_to_leaves_no_segment_behind(tmp_path: Path, messages: int) -> None:
    """`skip_to` starts a segment named after the skip; the one it leaves, if nothing in
    it is live (a fresh store's, never written), is deleted, not left for `check`."""
    s = FileStore(tmp_path)
    fill(s, messages)
    s.skip_to(9)
    s.close()
    assert check_store(tmp_path).healthy
    assert [int(p.stem) for p in seg_files(tmp_path)] == ([1, 10] if messages else [10])
    s = FileStore(tmp_path)
    assert s.recovery_report.clean
    assert (s.state().last_seq, s.state().messages) == (9, messages)
    assert s.store("s.x", None, b"x", T0) == 10
    s.close()


def test_deleting_a_segment_keeps_its_tombstones_for_older_segments(tmp_path: Path) -> None:
    """Segment D holds the tombstones of messages in an older segment A that stays (one live
    message). Deleting D must not resurrect them (storage-format.md 6.2)."""
    s = FileStore(tmp_path, segment_bytes_max=600)
    fill(s, 40)
    names = [int(p.stem) for p in seg_files(tmp_path)]
    a_end, d_name = names[1] - 1, names[-1]
    for q in range(2, a_end + 1):  # tombstones go to the active segment, D
        s.remove(q)
    fill(s, 40)  # D is sealed now
    names = [int(p.stem) for p in seg_files(tmp_path)]
    d_end = names[names.index(d_name) + 1] - 1
    for q in range(d_name, d_end + 1):  # D holds nothing live any more: it is deleted
        s.remove(q)
    s.sync()
    files = {int(p.stem) for p in seg_files(tmp_path)}
    assert d_name not in files
    assert 1 in files
    expected = snapshot(s)
    s.close()
    s = FileStore(tmp_path, segment_bytes_max=600)
    assert s.recovery_report.clean
    assert snapshot(s) == expected
    assert s.load(1) is not None
    assert all(s.load(q) is None for q in range(2, a_end + 1))
    s.close()


def test_truncate_cuts_later_segments_and_keeps_later_removals(tmp_path: Path) -> None:
    """The tail spans segments of its own; removals of older messages recorded after it
    (some emptying whole segments, whose files go and whose tombstones were copied after
    the tail) stay removed. The directory checks clean and reopens the same."""
    s = FileStore(tmp_path, segment_bytes_max=600)
    fill(s, 20)
    tail_start = len(seg_files(tmp_path))
    fill(s, 30)  # 21..50, to be cut
    assert len(seg_files(tmp_path)) > tail_start + 1
    for q in range(1, 15):
        s.remove(q)
    s.sync()
    assert int(seg_files(tmp_path)[0].stem) > 1  # a whole segment went
    s.truncate(20)
    st_ = s.state()
    assert (st_.messages, st_.first_seq, st_.last_seq) == (6, 15, 20)
    assert all(int(p.stem) <= 21 for p in seg_files(tmp_path))
    assert s.store("s.new", None, b"new", T0 + 99) == 21
    expected = snapshot(s)
    s.close()
    assert check_store(tmp_path).healthy
    s = FileStore(tmp_path, segment_bytes_max=600)
    assert s.recovery_report.clean
    assert snapshot(s) == expected
    assert all(s.load(q) is None for q in range(1, 15))
    s.close()


def test_erase_overwrites_the_bytes(tmp_path: Path) -> None:
    s = FileStore(tmp_path)
    s.store("secret.subject.zq", b"NATS/1.0\r\nSecret-Hdr: hq\r\n\r\n", b"TOP-SECRET-PAYLOAD", 1)
    s.store("plain", None, b"KEEP-ME", 2)
    s.remove(1, erase=True)
    s.sync()
    raw = raw_bytes(tmp_path)
    for needle in (b"TOP-SECRET-PAYLOAD", b"secret.subject.zq", b"Secret-Hdr"):
        assert needle not in raw
    assert b"KEEP-ME" in raw
    assert check_store(tmp_path).healthy  # the erased record is still a valid record
    s.close()
    s = FileStore(tmp_path)
    assert s.load(1) is None
    assert s.load(2) is not None
    assert s.recovery_report.clean
    s.close()


# ---------------------------------------------------------------------- model


class SmallSegmentsMachine(RuleBasedStateMachine):
    """The file store with tiny segments (so rolls, reclamation and tombstone copies happen
    all the time) against the memory store, reopened and checked at random."""

    counter = itertools.count()

    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(os.environ["BROOK_TEST_TMP"]) / f"m{next(self.counter)}"
        self.file = FileStore(self.dir, segment_bytes_max=300)
        self.mem = MemoryStore()
        self.clock = T0

    def teardown(self) -> None:
        self.file.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    @rule(subj=st.sampled_from(["s.0", "s.1", "s.2", "t"]), n=st.integers(1, 12))
    def store(self, subj: str, n: int) -> None:
        for _ in range(n):
            self.clock += 1
            a = self.file.store(subj, None, b"d%d" % self.clock, self.clock)
            b = self.mem.store(subj, None, b"d%d" % self.clock, self.clock)
            assert a == b

    @rule(back=st.integers(0, 40), erase=st.booleans())
    def remove(self, back: int, erase: bool) -> None:
        seq = self.mem.state().last_seq - back
        assert self.file.remove(seq, erase=erase) == self.mem.remove(seq)

    @rule(
        subject=st.sampled_from([None, "s.0", "s.*", "t"]),
        up_to=st.integers(0, 80),
        keep=st.integers(0, 5),
    )
    def purge(self, subject: str | None, up_to: int, keep: int) -> None:
        a = self.file.purge(subject=subject, up_to_seq=up_to, keep=keep)
        assert a == self.mem.purge(subject=subject, up_to_seq=up_to, keep=keep)

    @rule(back=st.integers(0, 30))
    def expire(self, back: int) -> None:
        assert self.file.expire_before(self.clock - back) == self.mem.expire_before(
            self.clock - back
        )

    @rule()
    def sync(self) -> None:
        self.file.sync()

    @rule()
    def reopen(self) -> None:
        self.file.close()
        self.file = FileStore(self.dir, segment_bytes_max=300)
        assert self.file.recovery_report.clean, self.file.recovery_report

    @invariant()
    def same(self) -> None:
        assert snapshot(self.file) == snapshot(self.mem)

    @invariant()
    def checker_agrees(self) -> None:
        report = check_store(self.dir)
        assert report.healthy, report.format()
        st_ = self.file.state()
        assert (report.messages, report.first_seq, report.last_seq, report.bytes) == (
            st_.messages,
            st_.first_seq,
            st_.last_seq,
            st_.bytes,
        )


def test_small_segments_match_the_memory_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BROOK_TEST_TMP", str(tmp_path))
    run_state_machine_as_test(
        SmallSegmentsMachine,
        settings=settings(
            max_examples=40,
            stateful_step_count=25,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )


# ---------------------------------------------------------------------- memory


def test_index_memory_per_message(tmp_path: Path) -> None:
    """Payloads are not kept in memory; the index costs a few dozen bytes per message."""
    n = 100_000
    s = FileStore(tmp_path)
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        payload = b"x" * 100
        for i in range(n):
            s.store(f"orders.{i % 16}", None, payload, T0 + i)
        per_msg = (tracemalloc.get_traced_memory()[0] - base) / n
    finally:
        tracemalloc.stop()
    print(f"\nfile store index: {per_msg:.1f} bytes/message ({n} x 100-byte messages)")
    assert per_msg < 1024
    s.close()


# ---------------------------------------------------------------------- CLI


def test_cli_check_exit_codes_and_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    s = FileStore(tmp_path / "st")
    fill(s, 5)
    s.close()
    assert store_check_command([str(tmp_path / "st")]) == 0
    assert "healthy" in capsys.readouterr().out
    assert store_check_command([str(tmp_path / "st"), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["healthy"] is True
    assert doc["messages"] == 5
    assert doc["findings"] == []

    seg = seg_files(tmp_path / "st")[0]
    with open(seg, "ab") as f:
        f.write(b"\xb7\x5e\x01garbage")
    assert store_check_command([str(tmp_path / "st"), "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["healthy"] is False
    assert doc["findings"][0]["kind"] == "torn_tail"
    assert store_check_command([str(tmp_path / "st")]) == 1
    assert "torn_tail" in capsys.readouterr().out

    assert store_check_command([]) == 2
    assert store_check_command([str(tmp_path / "nope")]) == 2
    assert store_check_command(["--bogus", str(tmp_path)]) == 2
    assert store_check_command(["--help"]) == 0
    capsys.readouterr()


def test_statistics(tmp_path: Path) -> None:
    s = FileStore(tmp_path, segment_bytes_max=512)
    fill(s, 40)
    stats = s.statistics()
    assert stats["segments"] == len(seg_files(tmp_path)) > 1
    assert stats["segment_bytes"] == sum(p.stat().st_size for p in seg_files(tmp_path))
    s.close()


def test_directory_is_locked_while_open(tmp_path: Path) -> None:
    s = FileStore(tmp_path)
    with pytest.raises(StoreError):
        FileStore(tmp_path)
    assert check_store(tmp_path).healthy  # readers need no lock
    s.close()
    FileStore(tmp_path).close()


def test_store_run_writes_what_store_writes(tmp_path: Path) -> None:
    """A run of messages (`store_run`, one write per segment) leaves the same segments as
    storing them one by one (rolled at the same records, of the same sizes), read back the
    same, also after reopening."""
    messages = [
        (f"r.{i % 5}", b"NATS/1.0\r\nK: v\r\n\r\n" if i % 3 == 0 else None, b"%05d" % i, T0 + i)
        for i in range(90)
    ]
    one = FileStore(tmp_path / "one", segment_bytes_max=700)
    for message in messages:
        one.store(*message)
    run = FileStore(tmp_path / "run", segment_bytes_max=700)
    run.store_run(messages[:1])
    run.store_run(messages[1:60])
    run.store_run([])
    run.store_run(messages[60:])
    assert len(seg_files(tmp_path / "run")) > 5
    assert snapshot(run) == snapshot(one)
    accounted = one.state().bytes
    assert run.state().bytes == accounted  # each message's size accounted alike
    one.close()
    run.close()
    segments = [(p.name, p.stat().st_size) for p in seg_files(tmp_path / "run")]
    assert segments == [(p.name, p.stat().st_size) for p in seg_files(tmp_path / "one")]
    reopened = FileStore(tmp_path / "run", segment_bytes_max=700)
    assert reopened.recovery_report.clean
    assert snapshot(reopened)[1] == [StoredMessage(i + 1, *m) for i, m in enumerate(messages)]
    assert reopened.state().bytes == accounted
    reopened.close()


def msg_records(directory: Path) -> list[bytes]:
    """The MSG records of a store's segments, in order (preambles, whose STATE records
    carry the time they were written, and tombstones left out)."""
    out = []
    for path in seg_files(directory):
        data = path.read_bytes()
        for info in fmt.scan(data, len(data)):
            assert isinstance(info, tuple)
            if info[2] == fmt.T_MSG:
                out.append(data[info[0] : info[0] + info[1]])
    return out


def test_a_run_stored_from_the_records_it_was_read_from_is_stored_as_encoded(
    tmp_path: Path,
) -> None:
    """A mirror's run stored from the records its origin read it from (`store_run` with
    `spans`, ADR 0035) leaves the segments, index and state that encoding the same
    messages leaves: byte for byte the same records, rolled at the same places, also
    after reopening. The origin's records come from several segments, some with
    tombstones between them; spans that do not cover the run, or are not its
    messages' records, are not used (and change nothing)."""
    origin = FileStore(tmp_path / "origin", segment_bytes_max=900)
    first = 61  # the mirror's run: all live; removals below it leave tombstones in it
    for i in range(1, 121):
        header = b"NATS/1.0\r\nK: v\r\n\r\n" if i % 3 == 0 else None
        origin.store(f"r.{i % 5}", header, b"%05d" % i, T0 + i)
        if i > first and i % 7 == 0:
            origin.remove(i - first)  # a tombstone between two live records
    spans: list[RecordSpan] = []
    read = origin.load_batch("", first, 200, spans)
    assert len(spans) > 2
    assert spans[0].first_seq == first
    assert [m.seq for m in read] == list(range(first, first + len(read)))  # all live
    assert any(
        span.offs[-1] + (span.lens[-1] & 0x7FFFFFFF) - span.offs[0]
        > sum(n & 0x7FFFFFFF for n in span.lens)
        for span in spans
    )  # one span's records are not back to back
    messages = [(m.subject, m.header, m.data, m.ts_ns) for m in read]
    mirrors = {}
    for name, given in (("encoded", ()), ("copied", spans)):
        mirror = FileStore(tmp_path / name, segment_bytes_max=700)
        mirror.skip_msgs(first - 1)
        mirror.store_run(messages[:7], given)
        mirror.store_run(messages[7:], given)
        mirrors[name] = mirror
    # The spans' records are taken as they are, not encoded again: a run whose payloads
    # differ from theirs in their bytes only (the lengths and times `store_run` checks
    # are the same) is stored as the spans hold it. (A mirror gives their own messages.)
    probe = FileStore(tmp_path / "probe", segment_bytes_max=700)
    probe.skip_msgs(first - 1)
    probe.store_run([(s, h, b"?" * len(d), ts) for s, h, d, ts in messages], spans)
    assert [m.data for m in probe.load_batch("", first, 200)] == [m.data for m in read]
    probe.close()
    encoded, copied = mirrors["encoded"], mirrors["copied"]
    assert len(seg_files(tmp_path / "copied")) > 5
    assert snapshot(copied) == snapshot(encoded)
    assert copied.state().bytes == encoded.state().bytes
    assert msg_records(tmp_path / "copied") == msg_records(tmp_path / "encoded")
    assert msg_records(tmp_path / "copied")[-len(read) :] == [
        r for r in msg_records(tmp_path / "origin") if first <= fmt.decode_message(r).seq
    ]
    sizes = [p.stat().st_size for p in seg_files(tmp_path / "encoded")]
    assert [p.stat().st_size for p in seg_files(tmp_path / "copied")] == sizes
    # Spans of other sequences, or whose records are not these messages', are not used.
    for mirror in mirrors.values():
        mirror.store_run(messages[:3], spans)  # stored at other sequences: encoded
        mirror.store_run([(s, h, d + b"!", ts) for s, h, d, ts in messages[3:4]], spans)
    assert msg_records(tmp_path / "copied") == msg_records(tmp_path / "encoded")
    encoded.close()
    copied.close()
    reopened = FileStore(tmp_path / "copied", segment_bytes_max=700)
    encoded = FileStore(tmp_path / "encoded", segment_bytes_max=700)
    assert reopened.recovery_report.clean
    assert snapshot(reopened) == snapshot(encoded)
    encoded.close()
    reopened.close()
    origin.close()


def test_a_run_indexes_stretches_of_one_subject_as_one_by_one(tmp_path: Path) -> None:
    """A run whose subjects come in stretches (`SubjectIndex.add_run` takes a stretch at
    once) indexes each subject's sequences as storing them one by one does: subjects new,
    single and holding several already, before and after removals."""
    lengths = [1, 3, 1, 1, 6, 2, 1, 4, 1, 5]
    subjects = [f"s.{k % 4}" for k, n in enumerate(lengths) for _ in range(n)]
    messages = [(subject, None, b"%d" % i, T0 + i) for i, subject in enumerate(subjects)]
    one = FileStore(tmp_path / "one")
    run = FileStore(tmp_path / "run")
    for message in messages[:3]:
        one.store(*message)
        run.store(*message)
    for message in messages[3:]:
        one.store(*message)
    run.store_run(messages[3:17])
    run.store_run(messages[17:])
    names = sorted(set(subjects))
    for seq in (2, 9, 10, 25):
        for store in (one, run):
            assert [store.subject_state(n) for n in names] == [one.subject_state(n) for n in names]
            assert [store.load_last(n) for n in names] == [one.load_last(n) for n in names]
            assert snapshot(store) == snapshot(one)
        one.remove(seq)
        run.remove(seq)
    one.close()
    run.close()


def test_a_run_is_encoded_as_each_record_alone() -> None:
    """`encode_messages` makes the records `encode_message` makes one by one, and stops
    before the first it cannot encode with the reason `encode_message` raises."""
    run = [("a.b", None, b"1", T0), ("c", b"NATS/1.0\r\nK: v\r\n\r\n", b"", T0 + 1)]
    records, error = fmt.encode_messages(7, run)
    assert error == ""
    assert records == [
        fmt.encode_message(7 + i, ts, subject.encode(), header or b"", data)
        for i, (subject, header, data, ts) in enumerate(run)
    ]
    for bad in (("", None, b"x", T0), ("a", None, b"x", 2**63)):
        records, error = fmt.encode_messages(7, [*run, bad, run[0]])
        assert len(records) == 2
        with pytest.raises(fmt.RecordError) as raised:
            fmt.encode_message(9, bad[3], bad[0].encode(), b"", bad[2])
        assert error == str(raised.value)


def test_store_run_stores_the_messages_before_a_bad_one(tmp_path: Path) -> None:
    """A message the store cannot hold (an empty subject) fails the run with `StoreError`;
    the messages before it are stored, nothing after it."""
    s = FileStore(tmp_path / "s")
    with pytest.raises(StoreError, match="subject length"):
        s.store_run([("a", None, b"1", T0), ("b", None, b"2", T0), ("", None, b"3", T0)])
    assert s.last_seq() == 2
    assert s.load(2) == StoredMessage(2, "b", None, b"2", T0)
    assert s.store("c", None, b"4", T0) == 3
    s.close()


def test_recent_headed_across_segments_matches_the_records(tmp_path: Path) -> None:
    """The file store answers from its index columns across many small segments (the
    bisection per segment, the cap falling inside one, a segment of removed slots)."""
    store = FileStore(directory=tmp_path / "s", segment_bytes_max=400)
    for i in range(200):
        header = b"NATS/1.0\r\nNats-Msg-Id: %d\r\n\r\n" % i if i % 4 == 1 else None
        store.store("a.b", header, b"payload", 5_000 + i)
    for seq in range(40, 70):
        store.remove(seq)
    assert len(store._index.segments) > 10  # the case under test
    for since in (0, 5_050, 5_069, 5_120, 5_199, 5_200):
        for most in (1, 3, 50, 140, 1_000):
            young = [
                m
                for seq in range(200, 0, -1)
                if (m := store.load(seq)) is not None and m.ts_ns >= since
            ][:most]
            expected = sorted(m.seq for m in young if m.header)
            assert store.recent_headed(since, most) == expected, (since, most)
    store.close()
