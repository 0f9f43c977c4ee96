"""Damaged records under a running file store are refused on read, with the error that
`format.decode_message` gives for the same bytes, never delivered.

`Reader._read_run` (file/reader.py) checks each record of a run in place (the delivery
hot path) rather than through `decode_message`; these tests damage a record on disk behind
an open store and compare what `load_batch` and `load` say with what `decode_message` says.
"""

from __future__ import annotations

import zlib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from brook.jetstream.store.base import StoreError
from brook.jetstream.store.file import FileStore
from brook.jetstream.store.file import format as fmt
from brook.jetstream.store.file.reader import CRC_COPY_MAX

T0 = 1_700_000_000_000_000_000
HDR = b"NATS/1.0\r\nk: v\r\n\r\n"
COUNT = 12
# The sequence whose data is made larger than `reader.CRC_COPY_MAX`: its record is checked
# through a memoryview, the others through a copy.
LARGE = 7


def _fill(directory: Path) -> tuple[FileStore, Path, dict[int, bytes]]:
    """A store of COUNT messages, its one segment file and each message's record."""
    store = FileStore(directory, fsync=False)
    records = {}
    for i in range(1, COUNT + 1):
        header = HDR if i % 3 == 0 else b""
        data = b"m%d" % i * (i if i != LARGE else CRC_COPY_MAX)
        seq = store.store(f"s.{i % 4}", header or None, data, T0 + i)
        records[seq] = fmt.encode_message(seq, T0 + i, f"s.{i % 4}".encode(), header, data)
    (segment,) = (directory / "msgs").iterdir()
    return store, segment, records


def _overwrite(segment: Path, at: int, new: bytes) -> None:
    with segment.open("r+b") as f:
        f.seek(at)
        f.write(new)


def _expected_error(seq: int, damaged: bytes) -> str:
    try:
        fmt.decode_message(damaged)
    except fmt.RecordError as exc:
        return f"record of sequence {seq} is corrupt: {exc}"
    return f"slot of sequence {seq} holds another record"


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    victim=st.integers(1, COUNT),
    at=st.floats(0, 1, exclude_max=True),
    xor=st.integers(1, 255),
    start=st.integers(1, COUNT),
)
def test_a_flipped_byte_is_refused_like_decode_message_refuses_it(
    tmp_path_factory: pytest.TempPathFactory, victim: int, at: float, xor: int, start: int
) -> None:
    store, segment, records = _fill(tmp_path_factory.mktemp("s"))
    try:
        record = records[victim]
        offset = segment.read_bytes().index(record)
        i = int(at * len(record))
        damaged = record[:i] + bytes([record[i] ^ xor]) + record[i + 1 :]
        _overwrite(segment, offset, damaged)
        expected = _expected_error(victim, damaged)
        if start <= victim:  # a run that reaches the damaged record stops there
            with pytest.raises(StoreError) as info:
                store.load_batch("", start, COUNT)
            assert str(info.value).endswith(expected)
        with pytest.raises(StoreError) as info:
            store.load(victim)
        assert str(info.value).endswith(expected)
        # The records around it read back as they were stored.
        others = [m.seq for m in store.load_batch("", victim + 1, COUNT)]
        assert others == list(range(victim + 1, COUNT + 1))
    finally:
        store.close()


def test_a_valid_record_of_another_sequence_is_refused(tmp_path: Path) -> None:
    store, segment, records = _fill(tmp_path / "s")
    try:
        record = records[5]
        other = fmt.encode_message(7, T0, b"s.1", b"", b"m5" * 5)  # same length, valid CRC
        assert len(other) == len(record)
        _overwrite(segment, segment.read_bytes().index(record), other)
        with pytest.raises(StoreError, match="slot of sequence 5 holds another record"):
            store.load_batch("", 1, COUNT)
        assert [m.seq for m in store.load_batch("", 1, 4)] == [1, 2, 3, 4]
    finally:
        store.close()


def test_a_valid_crc_over_a_message_without_subject_is_refused(tmp_path: Path) -> None:
    store, segment, records = _fill(tmp_path / "s")
    try:
        record = records[5]
        body = b"x" * (len(record) - fmt.OVERHEAD)
        header = fmt.HEADER.pack(
            fmt.MAGIC, fmt.VERSION, fmt.T_MSG, len(record), 5, T0, 0, 0, 0, 0, len(body)
        )
        crafted = header + body + fmt.CRC_FIELD.pack(zlib.crc32(header + body))
        _overwrite(segment, segment.read_bytes().index(record), crafted)
        with pytest.raises(StoreError, match="sequence 5 is corrupt: MSG without subject"):
            store.load_batch("", 1, COUNT)
    finally:
        store.close()


def test_a_record_cut_short_by_truncation_is_refused(tmp_path: Path) -> None:
    store, segment, records = _fill(tmp_path / "s")
    try:
        size = segment.stat().st_size
        with segment.open("r+b") as f:
            f.truncate(size - 3)
        cut = records[COUNT][:-3]
        with pytest.raises(StoreError) as info:
            store.load_batch("", COUNT - 2, 10)
        assert str(info.value).endswith(_expected_error(COUNT, cut))
        assert [m.seq for m in store.load_batch("", 1, COUNT - 1)] == list(range(1, COUNT))
    finally:
        store.close()


@pytest.mark.parametrize("victim", [LARGE - 1, LARGE])
def test_a_flipped_data_byte_is_refused_in_a_small_and_a_large_record(
    tmp_path: Path, victim: int
) -> None:
    store, segment, records = _fill(tmp_path / "s")
    try:
        record = records[victim]
        assert (len(record) > CRC_COPY_MAX) == (victim == LARGE)
        i = len(record) - fmt.CRC_SIZE - 1  # the last byte of the data
        damaged = record[:i] + bytes([record[i] ^ 1]) + record[i + 1 :]
        _overwrite(segment, segment.read_bytes().index(record), damaged)
        with pytest.raises(StoreError, match=f"sequence {victim} is corrupt: bad CRC"):
            store.load_batch("", 1, COUNT)
        with pytest.raises(StoreError, match=f"sequence {victim} is corrupt: bad CRC"):
            store.load(victim)
        # The records after it, the large one among them or not, read back intact.
        after = store.load_batch("", victim + 1, COUNT)
        assert [(m.seq, m.data) for m in after] == [
            (seq, fmt.decode_message(records[seq]).data) for seq in range(victim + 1, COUNT + 1)
        ]
    finally:
        store.close()
