"""The file store's append path made cheaper without changing what it writes or answers
(ADR 0069): a stored message's record is byte for byte the documented one
(storage-format.md 5), and the active segment's slot columns, which now keep spare room
after their `count` slots, answer every read up to the last message and nothing past it:
whole runs, runs with removed slots, counts, the dedup window's rebuild, expiry, a
snapshot and a reopen; a sealed segment gives its spare room back."""

from __future__ import annotations

import zlib
from pathlib import Path

import pytest

from brook.jetstream.store.base import NewMessage
from brook.jetstream.store.file import FileStore
from brook.jetstream.store.file import format as fmt

T0 = 1_700_000_000_000_000_000
HDR = b"NATS/1.0\r\nNats-Msg-Id: x\r\n\r\n"


@pytest.mark.parametrize("flags", [0, fmt.F_ERASED])
@pytest.mark.parametrize("header", [b"", HDR])
def test_a_message_record_is_the_documented_layout(flags: int, header: bytes) -> None:
    subject, data, seq, ts = b"orders.new", b"payload", 2**40 + 7, T0 + 12345
    length = fmt.OVERHEAD + len(subject) + len(header) + len(data)
    head = fmt.HEADER.pack(
        fmt.MAGIC, fmt.VERSION, fmt.T_MSG, length, seq, ts, flags, 0,
        len(subject), len(header), len(data),
    )  # fmt: skip
    body = head + subject + header + data
    expected = body + zlib.crc32(body).to_bytes(4, "little")
    assert fmt.encode_message(seq, ts, subject, header, data, flags) == expected
    m = fmt.decode_message(expected)
    assert (m.seq, m.ts_ns, m.flags, m.subject, m.header, m.data) == (
        seq, ts, flags, subject, header, data,
    )  # fmt: skip


def test_a_timestamp_outside_i64_is_refused_as_before() -> None:
    with pytest.raises(fmt.RecordError):
        fmt.encode_message(1, 2**63, b"a", b"", b"")


def message(seq: int) -> NewMessage:
    return (f"col.{seq % 3}", HDR if seq % 5 == 0 else None, b"m-%05d" % seq, T0 + seq)


def answers(s: FileStore, last: int, removed: set[int]) -> None:
    """Every read sees exactly the live messages 1..last."""
    live = [seq for seq in range(1, last + 1) if seq not in removed]
    assert [m.seq for m in s.load_batch(">", 1, 10 * last)] == live
    assert [m.data for m in s.load_batch(">", 1, 10 * last)] == [message(q)[2] for q in live]
    assert s.load(last + 1) is None
    assert s.load_next(">", last + 1) is None
    st = s.state()
    assert (st.messages, st.last_seq, st.first_seq) == (len(live), last, live[0])
    assert s.num_pending(">", 1) == len(live)
    assert s.num_pending("col.1", last - 6) == sum(1 for q in live if q >= last - 6 and q % 3 == 1)
    assert s.recent_headed(T0, 10 * last) == [q for q in live if q % 5 == 0]
    assert s.recent_headed(T0 + last - 10, 10 * last) == [
        q for q in live if q % 5 == 0 and q >= last - 10
    ]
    last_of = s.load_last("col.2")
    assert last_of is not None
    assert last_of.seq == max(q for q in live if q % 3 == 2)


def test_the_active_segments_spare_slots_are_never_read(tmp_path: Path) -> None:
    s = FileStore(tmp_path, fsync=False)
    try:
        for seq in range(1, 38):
            assert s.store(*message(seq)) == seq
        seg = s._index.segments[-1]
        assert len(seg.offs) > seg.count == 37  # spare room after the slots
        answers(s, 37, set())
        for seq in (3, 20, 36):  # removed slots: the reader's other path
            assert s.remove(seq)
        answers(s, 37, {3, 20, 36})
        s.store_run([message(seq) for seq in range(38, 45)])  # a run after single stores
        assert s.store(*message(45)) == 45
        answers(s, 45, {3, 20, 36})
        s.sync()
    finally:
        s.close()
    s = FileStore(tmp_path, fsync=False)  # from the index snapshot written at close
    try:
        answers(s, 45, {3, 20, 36})
        for seq in range(46, 60):
            s.store(*message(seq))
        answers(s, 59, {3, 20, 36})
        assert s.expire_before(T0 + 60) == [q for q in range(1, 60) if q not in {3, 20, 36}]
        assert s.state().messages == 0
    finally:
        s.close()


def test_a_sealed_segment_keeps_no_spare_slots(tmp_path: Path) -> None:
    s = FileStore(tmp_path, segment_slots_max=40, fsync=False)
    try:
        for seq in range(1, 101):
            s.store(*message(seq))
        first, second, active = s._index.segments
        assert (first.count, second.count, active.count) == (40, 40, 20)
        assert (len(second.offs), len(second.tss)) == (40, 40)  # trimmed at its roll
        assert len(active.offs) > 20
        answers(s, 100, set())
    finally:
        s.close()
