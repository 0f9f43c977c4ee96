"""Packed index columns (ADR 0054) on real files: a file store keeps the columns of at
most `index_hot_segments` sealed segments unpacked, packs the others, unpacks one when a
read or a removal reaches it, and a restart from the index snapshot leaves the sealed
segments packed. (The model test's "packed" store checks every answer against a model
with segments of a few messages.)"""

from __future__ import annotations

from pathlib import Path

from brook.jetstream.store.base import SubjectState
from brook.jetstream.store.file import FileStore, indexsnap
from brook.jetstream.store.file.format import OVERHEAD
from brook.jetstream.store.file.index import BACKGROUND_SLOTS, Index
from brook.jetstream.store.filters import compile_filter

T0 = 1_700_000_000_000_000_000
N = 400


def unpacked_sealed(s: FileStore) -> int:
    stats = s.statistics()
    return int(stats["segments"]) - 1 - int(stats["index_packed_segments"])


def test_sealed_segments_beyond_the_bound_are_packed_and_read_back(tmp_path: Path) -> None:
    s = FileStore(tmp_path / "s", segment_bytes_max=2048, index_hot_segments=2)
    try:
        for i in range(N):
            s.store(f"pk.{i % 3}", b"NATS/1.0\r\nI: 1\r\n\r\n" if i % 5 == 0 else None,
                    b"m-%05d" % i, T0 + i)  # fmt: skip
        stats = s.statistics()
        segments = stats["segments"]
        assert segments > 8
        assert stats["index_hot_segments"] == 2
        assert stats["index_packed_segments"] == segments - 3  # the active one, and 2
        assert stats["index_unpacks"] == 0
        # The first and a middle segment are unpacked; 7 lies in the first, N in the active.
        for seq in (1, N // 2, 7, N):
            m = s.load(seq)
            assert m is not None
            assert (m.subject, m.data, m.ts_ns) == (f"pk.{(seq - 1) % 3}", b"m-%05d" % (seq - 1),
                                                     T0 + seq - 1)  # fmt: skip
            assert (m.header is not None) == ((seq - 1) % 5 == 0)
            assert unpacked_sealed(s) <= 2
        assert s.statistics()["index_unpacks"] == 2
        # Removals and filtered reads in packed segments, the bound held throughout.
        assert s.remove(10)
        assert s.purge(subject="pk.1", up_to_seq=200).purged == 66
        assert unpacked_sealed(s) <= 2
        got = s.load_next("pk.2", 150)
        assert got is not None
        assert got.seq == 150
        assert [m.seq for m in s.load_batch("", 1, 12)] == [
            1,
            3,
            4,
            6,
            7,
            9,
            12,
            13,
            15,
            16,
            18,
            19,
        ]
        state = s.state()
        assert (state.messages, state.first_seq, state.first_ts_ns) == (N - 67, 1, T0)
        assert s.subject_state("pk.1").messages == N // 3 - 66
    finally:
        s.close()


def test_a_restart_from_the_snapshot_leaves_sealed_segments_packed(tmp_path: Path) -> None:
    d = tmp_path / "s"
    s = FileStore(d, segment_bytes_max=2048, index_hot_segments=4)
    try:
        for i in range(N):
            s.store(f"pk.{i % 3}", None, b"m-%05d" % i, T0 + i)
        segments = s.statistics()["segments"]
        before = s.state()
    finally:
        s.close()
    s = FileStore(d, segment_bytes_max=2048, index_hot_segments=4)
    try:
        assert s.recovery_report.snapshot == "used"
        stats = s.statistics()
        # Open unpacks the active segment only: the first's slots are all live, so the
        # first message's timestamp (state) is the packed segment's first slot's.
        assert stats["index_packed_segments"] == segments - 1
        assert stats["index_unpacks"] == 1  # the active one's
        assert s.state() == before
        assert s.statistics()["index_unpacks"] == 1
        assert [m.data for m in s.load_batch("", N - 2, 10)] == [b"m-00397", b"m-00398", b"m-00399"]
        s.store("pk.new", None, b"after", T0 + N)  # appends go to the unpacked active one
        assert s.load(N + 1) is not None
    finally:
        s.close()


def test_a_subject_spanning_2_32_sequences_keeps_them_exactly(tmp_path: Path) -> None:
    """A subject's sequences are kept as 4-byte offsets from its first (ADR 0054); one
    spanning more than 2**32 widens to 8 bytes, in the store and through the snapshot."""
    far = 2**32 + 10
    s = FileStore(tmp_path / "s", first_seq=1)
    try:
        s.store("w.a", None, b"1", T0)
        s.store("w.a", None, b"2", T0 + 1)
        s.skip_to(far - 1)  # the next sequence is `far`
        s.store("w.a", None, b"3", T0 + 2)
        s.store("w.a", None, b"4", T0 + 3)
        assert s.subject_state("w.a") == SubjectState(4, 1, far + 1)
        assert s.remove(2)
        got = s.load_next("w.a", 2)
        assert got is not None
        assert (got.seq, got.data) == (far, b"3")
        assert s.num_pending("w.a", 3) == 2
        assert s.purge(subject="w.a", keep=1).removed_seqs == [1, far]
        assert s.subject_state("w.a") == SubjectState(1, far + 1, far + 1)
    finally:
        s.close()
    # The subject table through a snapshot: one subject at 4 bytes, one widened to 8.
    index = Index(1)
    for seq, subject in ((1, "n"), (5, "n"), (7, "w"), (8, "w"), (far, "w"), (far + 3, "n")):
        index.subjects.add(subject, seq)
    indexsnap.write(tmp_path, index)
    loaded = Index(1)
    assert indexsnap.load(tmp_path, loaded, []) == []
    for name in ("n", "w"):
        want = next(index.subjects.matching(compile_filter(name))).all()
        assert next(loaded.subjects.matching(compile_filter(name))).all() == want
    assert next(loaded.subjects.matching(compile_filter("w"))).at_or_after(9) == far


def test_recent_headed_skips_packed_segments_without_a_header(tmp_path: Path) -> None:
    """The deduplication window's rebuild (`recent_headed`) counts a packed segment whose
    slots are all young and none headed without unpacking it, and answers as the records
    say across the packed and unpacked ones, the cap and the window's start falling in
    segments of either kind."""
    s = FileStore(tmp_path / "s", segment_bytes_max=400, index_hot_segments=1)
    try:
        for i in range(300):
            header = b"NATS/1.0\r\nNats-Msg-Id: %d\r\n\r\n" % i if 100 <= i < 130 else None
            s.store("a.b", header, b"payload", 5_000 + i)
        for seq in range(110, 115):
            s.remove(seq)
        assert s.statistics()["index_packed_segments"] > 10
        newest = [m for seq in range(300, 0, -1) if (m := s.load(seq)) is not None]
        for since in (0, 5_090, 5_105, 5_128, 5_200):
            for most in (1, 20, 180, 196, 1_000):
                young = [m for m in newest if m.ts_ns >= since][:most]
                expected = sorted(m.seq for m in young if m.header)
                assert s.recent_headed(since, most) == expected, (since, most)
        # Only the segments holding the 30 headed messages (6) are unpacked, of about 60.
        unpacks = s.statistics()["index_unpacks"]
        assert s.recent_headed(5_000, 1_000) == [m.seq for m in reversed(newest) if m.header]
        assert s.statistics()["index_unpacks"] - unpacks <= 8
    finally:
        s.close()


def test_large_segments_are_packed_off_the_loop(tmp_path: Path) -> None:
    """A segment of `BACKGROUND_SLOTS` slots or more is packed on a worker thread: it
    counts as packed at once, stays readable meanwhile (a read takes it back, dropping
    that work), and its pack is installed later; a clean close installs every pack, so
    the reopened store's snapshot has them packed."""
    per = BACKGROUND_SLOTS + 10
    d = tmp_path / "s"
    s = FileStore(d, segment_bytes_max=per * (OVERHEAD + 1), index_hot_segments=1)
    try:
        for i in range(3 * per):
            s.store("b", None, b"", T0 + i)
        s._index.settle()
        stats = s.statistics()
        assert stats["segments"] == 4  # the last is the active one
        assert stats["index_packed_segments"] == 2  # the first two
        m = s.load(5)  # unpacked; the third goes under way
        assert m is not None
        assert m.ts_ns == T0 + 4
        assert s.statistics()["index_unpacks"] == 1
        assert s.statistics()["index_packed_segments"] == 2  # under way counts
        m = s.load(2 * per + 7)  # the third, taken back before its pack was installed
        assert m is not None
        assert m.ts_ns == T0 + 2 * per + 6
        assert s.statistics()["index_unpacks"] == 1  # nothing to unpack
        s._index.settle()
        m = s.load(per + 5)  # the second, packed on the worker thread
        assert m is not None
        assert m.ts_ns == T0 + per + 4
        assert s.statistics()["index_unpacks"] == 2
    finally:
        s.close()
    s = FileStore(d, segment_bytes_max=per * (OVERHEAD + 1), index_hot_segments=1)
    try:
        assert s.recovery_report.snapshot == "used"
        assert s.statistics()["index_packed_segments"] == 3  # every sealed one
        assert [m.ts_ns for m in s.load_batch("", 1, 3)] == [T0, T0 + 1, T0 + 2]
    finally:
        s.close()
