"""Damage and recovery: torn tails, corruption in the middle, damaged meta.json, foreign
files, and `check_store` reporting each, all on real files (storage-format.md section 7).

Every test damages a closed store's files the way a crash or a bad disk would, then checks
two things: `check_store` reports the damage without changing a byte, and opening the store
keeps every valid record and says what it repaired or skipped.
"""

from __future__ import annotations

import json
import re
import shutil
import time
from pathlib import Path

import pytest

from brook.jetstream.store.base import LostData, StoreError
from brook.jetstream.store.check import check_store
from brook.jetstream.store.file import FileStore
from brook.jetstream.store.file import format as fmt
from brook.jetstream.store.file.format import Damage

T0 = 1_700_000_000_000_000_000
DOC = Path(__file__).resolve().parents[2] / "docs" / "storage-format.md"


def seg_files(directory: Path) -> list[Path]:
    return sorted((directory / "msgs").glob("*.seg"))


def records(path: Path) -> list[tuple[int, ...]]:
    """(offset, length, type, seq, ...) of every valid record in a segment file."""
    data = path.read_bytes()
    return [r for r in fmt.scan(data, len(data)) if not isinstance(r, Damage)]


def make_store(directory: Path, n: int = 20, **kw: int) -> None:
    s = FileStore(directory, **kw)  # type: ignore[arg-type]
    for i in range(n):
        hdr = b"NATS/1.0\r\nI: %d\r\n\r\n" % i if i % 2 else None
        s.store(f"rec.{i % 3}", hdr, b"data-%04d" % i, T0 + i)
    s.close()


def tree_bytes(directory: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(directory)): p.read_bytes() for p in directory.rglob("*") if p.is_file()
    }


def assert_messages(s: FileStore, present: set[int], n: int) -> None:
    for seq in range(1, n + 1):
        msg = s.load(seq)
        if seq in present:
            assert msg is not None, seq
            assert msg.data == b"data-%04d" % (seq - 1), seq
        else:
            assert msg is None, seq


# ---------------------------------------------------------------------- the format document


def test_doc_example_matches_the_encoder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = DOC.read_text()
    section = text[text.index("## 9. Example") :]
    hexdump = bytes.fromhex(
        "".join(
            m.group(1) for m in re.finditer(r"^[0-9a-f]{8}  ((?:[0-9a-f]{2} ?)+)$", section, re.M)
        )
    )
    clock = [T0]
    monkeypatch.setattr(time, "time_ns", lambda: clock[0])
    s = FileStore(tmp_path)
    s.store("orders.1", None, b"hi", T0)
    clock[0] = T0 + 1_000_000_000
    s.remove(1)
    s.close()
    assert (tmp_path / "msgs" / "00000000000000000001.seg").read_bytes() == hexdump
    assert len(hexdump) == 162


def test_record_validation_rules() -> None:
    rec = fmt.encode_message(7, T0, b"a.b", b"H", b"data")
    assert fmt.validate(rec, 0, len(rec))[:4] == (0, len(rec), fmt.T_MSG, 7)
    assert fmt.validate(rec, 0, len(rec) - 1) == "incomplete record"
    assert fmt.validate(rec[:20], 0, 20) == "incomplete header"
    bad = bytearray(rec)
    bad[-1] ^= 1
    assert fmt.validate(bytes(bad), 0, len(bad)) == "bad CRC"
    bad = bytearray(rec)
    bad[4] ^= 1
    assert fmt.validate(bytes(bad), 0, len(bad)) == "length fields disagree"
    erased = fmt.erased_image(rec)
    info = fmt.validate(erased, 0, len(erased))
    assert not isinstance(info, str)
    assert info[5] & fmt.F_ERASED
    assert b"data" not in erased
    delete = fmt.encode_delete(9, T0, [(1, 3), (5, 9)])
    assert fmt.decode_ranges(delete, 0, 32) == [(1, 3), (5, 9)]
    with pytest.raises(fmt.RecordError):
        fmt.encode_delete(4, T0, [(1, 5)])  # beyond last_seq


# ---------------------------------------------------------------------- torn tails


@pytest.mark.parametrize("last_is", ["message", "tombstone"])
def test_torn_tail_at_every_byte(tmp_path: Path, last_is: str) -> None:
    """Cut the last record at every byte: earlier records are kept, the rest truncated and
    reported with the right offset and length."""
    src = tmp_path / "src"
    make_store(src, 20)
    if last_is == "tombstone":
        s = FileStore(src)
        s.remove(5)
        s.close()
    seg = seg_files(src)[-1]
    start, length = records(seg)[-1][:2]
    kept = set(range(1, 21)) - ({5} if last_is == "tombstone" else set())
    for cut in range(start + 1, start + length):
        work = tmp_path / f"cut{cut}"
        shutil.copytree(src, work)
        path = work / "msgs" / seg.name
        with open(path, "r+b") as f:
            f.truncate(cut)
        report = check_store(work)
        assert [(f.kind, f.offset, f.length) for f in report.findings] == [
            ("torn_tail", start, cut - start)
        ]
        s = FileStore(work)
        rec = s.recovery_report
        assert [(f.kind, f.offset, f.length) for f in rec.findings] == [
            ("torn_tail", start, cut - start)
        ]
        assert rec.truncated_bytes == cut - start
        assert rec.repaired
        # The torn record is gone: the last message, or the tombstone (message 5 is back).
        expect = kept - {20} if last_is == "message" else kept | {5}
        assert_messages(s, expect, 20)
        s.close()
        assert path.stat().st_size >= start
        assert check_store(work).healthy
        shutil.rmtree(work)


def test_a_torn_message_keeps_its_sequence(tmp_path: Path) -> None:
    """A torn tail that still holds the 16 bytes of its header naming the next sequence
    (storage-format.md 7.6): that message had its sequence before the crash (a consumer
    may have seen it), so the sequence is reported lost and never handed out again, also
    after further restarts. With less of the header left nothing proves it was used."""
    src = tmp_path / "src"
    make_store(src, 20)
    seg = seg_files(src)[-1]
    start, length = records(seg)[-1][:2]
    for cut in range(start + 1, start + length):
        work = tmp_path / f"cut{cut}"
        shutil.copytree(src, work)
        with open(work / "msgs" / seg.name, "r+b") as f:
            f.truncate(cut)
        kept = cut - start >= 16
        checked = check_store(work)
        assert checked.last_seq == (20 if kept else 19)
        assert [str(lost) for lost in checked.lost] == (
            [f"sequence 20 lost (msgs/{seg.name})"] if kept else []
        )
        assert ("sequence 20 lost" in checked.format()) == kept
        s = FileStore(work)
        state = s.state()
        assert (state.messages, state.last_seq) == (19, 20 if kept else 19)
        assert state.lost == (LostData((20,), cut - start) if kept else None)
        assert [str(lost) for lost in s.recovery_report.lost] == (
            [f"sequence 20 lost (msgs/{seg.name})"] if kept else []
        )
        assert s.store("next", None, b"x", T0 + 99) == (21 if kept else 20)
        s.close()
        assert check_store(work).healthy
        s = FileStore(work)
        assert s.recovery_report.clean  # reported once, at the open that found it
        assert s.state().last_seq == (21 if kept else 20)
        assert s.state().lost is None
        assert s.store("more", None, b"y", T0 + 100) == (22 if kept else 21)
        s.close()
        shutil.rmtree(work)


def test_a_torn_message_keeps_its_sequence_across_restarts(tmp_path: Path) -> None:
    """Reopened again before anything is stored, the store still knows the torn
    message's sequence: the segment it rolled to is named after it."""
    make_store(tmp_path, 20)
    seg = seg_files(tmp_path)[-1]
    start, length = records(seg)[-1][:2]
    with open(seg, "r+b") as f:
        f.truncate(start + length // 2)
    FileStore(tmp_path).close()
    assert seg.stat().st_size == start  # the tail was cut once the new segment was durable
    s = FileStore(tmp_path)
    assert s.recovery_report.clean
    assert s.state().last_seq == 20
    assert s.store("next", None, b"x", T0 + 99) == 21
    s.close()


def test_damage_reports_lost_sequences(tmp_path: Path) -> None:
    """Messages whose records are gone, found by the sequence jump over the damage."""
    make_store(tmp_path, 20)
    seg = seg_files(tmp_path)[0]
    recs = records(seg)
    off, length, _rtype, k = recs[10][:4]
    data = bytearray(seg.read_bytes())
    data[off + length - 1] ^= 0xFF
    data[recs[11][0] + 40] ^= 0xFF  # and the one after it: a region of two
    seg.write_bytes(bytes(data))
    s = FileStore(tmp_path)
    report = s.recovery_report
    assert [str(lost) for lost in report.lost] == [f"sequence {k}..{k + 1} lost (msgs/{seg.name})"]
    assert s.state().lost == LostData((k, k + 1), length + recs[11][1])
    assert report.to_dict()["lost"] == [{"file": f"msgs/{seg.name}", "first": k, "last": k + 1}]
    s.close()


def test_torn_tail_of_a_sealed_segment(tmp_path: Path) -> None:
    """A crash can leave an earlier segment short if it was rolled but not yet synced."""
    make_store(tmp_path, 40, segment_bytes_max=600)
    files = seg_files(tmp_path)
    assert len(files) >= 3
    victim = files[1]
    start, length, _t, lost = records(victim)[-1][:4]
    with open(victim, "r+b") as f:
        f.truncate(start + length // 2)
    s = FileStore(tmp_path, segment_bytes_max=600)
    assert [(f.kind, f.file) for f in s.recovery_report.findings] == [
        ("torn_tail", f"msgs/{victim.name}")
    ]
    assert_messages(s, set(range(1, 41)) - {lost}, 40)
    assert s.state().last_seq == 40
    assert s.state().lost == LostData((lost,), length // 2)
    assert s.state().deleted is None
    assert s.state(deleted_details=True).deleted == [lost]
    s.close()
    assert check_store(tmp_path).healthy


# ---------------------------------------------------------------------- corruption


@pytest.mark.parametrize("where", [0, 2, 3, 5, 9, 17, 26, 30, 37, 45, -3])
def test_corrupt_record_in_the_middle_is_skipped(tmp_path: Path, where: int) -> None:
    """Flip one byte inside record k (header field, body or CRC): k is reported and
    skipped, every record after it is kept."""
    make_store(tmp_path, 20)
    seg = seg_files(tmp_path)[0]
    recs = records(seg)
    off, length, rtype, k = recs[10][:4]
    assert rtype == fmt.T_MSG
    data = bytearray(seg.read_bytes())
    data[off + (where if where >= 0 else length + where)] ^= 0xFF
    seg.write_bytes(bytes(data))
    before = tree_bytes(tmp_path)
    report = check_store(tmp_path)
    assert tree_bytes(tmp_path) == before  # the checker changes nothing
    assert [(f.kind, f.offset, f.length) for f in report.findings] == [("corrupt", off, length)]
    assert report.messages == 19
    s = FileStore(tmp_path)
    assert [(f.kind, f.offset, f.length) for f in s.recovery_report.skipped] == [
        ("corrupt", off, length)
    ]
    assert len(s.recovery_report.findings) == 1
    assert_messages(s, set(range(1, 21)) - {k}, 20)
    assert s.state(deleted_details=True).deleted == [k]
    s.store("after", None, b"x", T0 + 100)  # the store goes on appending normally
    s.close()
    s = FileStore(tmp_path)
    assert s.load(21) is not None
    assert s.state().messages == 20
    s.close()


def test_corrupt_preamble_keeps_messages(tmp_path: Path) -> None:
    make_store(tmp_path, 5)
    seg = seg_files(tmp_path)[0]
    data = bytearray(seg.read_bytes())
    data[20] ^= 0x55
    seg.write_bytes(bytes(data))
    s = FileStore(tmp_path)
    assert [f.kind for f in s.recovery_report.findings] == ["corrupt"]
    assert_messages(s, set(range(1, 6)), 5)
    s.close()


def test_record_image_inside_damaged_data_is_not_trusted(tmp_path: Path) -> None:
    """Resynchronising can land on a record image carried inside a message's data; the
    sequence rules reject it instead of inventing message 999999."""
    s = FileStore(tmp_path)
    s.store("a", None, b"one", T0)
    inner = fmt.encode_message(999_999, T0, b"forged", b"", b"evil")
    s.store("b", None, b"prefix" + inner + b"suffix", T0 + 1)
    s.store("c", None, b"three", T0 + 2)
    s.close()
    seg = seg_files(tmp_path)[0]
    off = records(seg)[2][0]
    data = bytearray(seg.read_bytes())
    data[off] ^= 0xFF  # break message 2's magic
    seg.write_bytes(bytes(data))
    s = FileStore(tmp_path)
    kinds = [f.kind for f in s.recovery_report.findings]
    assert "sequence" in kinds
    assert "corrupt" in kinds
    assert s.state().last_seq == 3
    assert s.state().messages == 2
    assert s.load(1) is not None
    assert s.load(2) is None
    assert s.load(3) is not None
    s.close()


def test_out_of_order_record_is_reported_and_ignored(tmp_path: Path) -> None:
    make_store(tmp_path, 5)
    seg = seg_files(tmp_path)[0]
    off, length = records(seg)[2][:2]
    data = seg.read_bytes()
    seg.write_bytes(data + data[off : off + length])  # message 2 again at the end
    report = check_store(tmp_path)
    assert [f.kind for f in report.findings] == ["sequence"]
    s = FileStore(tmp_path)
    assert [f.kind for f in s.recovery_report.findings] == ["sequence"]
    assert s.state().messages == 5
    assert s.state().last_seq == 5
    assert s.store("next", None, b"", T0 + 9) == 6
    s.close()


def test_missing_preamble_is_reported(tmp_path: Path) -> None:
    make_store(tmp_path, 5)
    seg = seg_files(tmp_path)[0]
    seg.write_bytes(seg.read_bytes()[records(seg)[1][0] :])  # drop the STATE preamble
    report = check_store(tmp_path)
    assert [f.kind for f in report.findings] == ["preamble"]
    assert report.messages == 5
    s = FileStore(tmp_path)
    assert_messages(s, set(range(1, 6)), 5)
    s.close()


def test_empty_last_segment_gets_its_preamble(tmp_path: Path) -> None:
    """A crash right after creating a segment file leaves it empty."""
    make_store(tmp_path, 5)
    (tmp_path / "msgs" / f"{6:020d}.seg").touch()
    s = FileStore(tmp_path)
    assert s.recovery_report.clean
    assert s.store("x", None, b"", T0 + 9) == 6
    s.close()
    assert check_store(tmp_path).healthy


# ---------------------------------------------------------------------- meta.json and files


@pytest.mark.parametrize(
    "damage",
    [b"{not json", b"", json.dumps({"format": "other"}).encode(), None],
    ids=["garbage", "empty", "foreign", "missing"],
)
def test_damaged_meta_never_loses_messages(tmp_path: Path, damage: bytes | None) -> None:
    make_store(tmp_path, 10)
    meta = tmp_path / "meta.json"
    if damage is None:
        meta.unlink()
    else:
        meta.write_bytes(damage)
    report = check_store(tmp_path)
    assert [f.kind for f in report.findings] == ["meta"]
    assert report.messages == 10
    s = FileStore(tmp_path)
    assert [f.kind for f in s.recovery_report.findings] == ["meta"]
    assert_messages(s, set(range(1, 11)), 10)
    s.close()
    assert json.loads(meta.read_text())["format"] == "brook.filestore"
    if damage is not None:
        assert (tmp_path / "meta.json.corrupt").read_bytes() == damage
    assert check_store(tmp_path).healthy


def test_meta_with_wrong_first_seq_does_not_hide_messages(tmp_path: Path) -> None:
    make_store(tmp_path, 10)
    meta = tmp_path / "meta.json"
    doc = json.loads(meta.read_text())
    doc["first_seq"] = 1000
    meta.write_text(json.dumps(doc))
    s = FileStore(tmp_path, first_seq=1000)
    assert_messages(s, set(range(1, 11)), 10)
    s.close()


def test_newer_format_version_is_refused(tmp_path: Path) -> None:
    make_store(tmp_path, 1)
    meta = tmp_path / "meta.json"
    doc = json.loads(meta.read_text())
    doc["version"] = 2
    meta.write_text(json.dumps(doc))
    with pytest.raises(StoreError):
        FileStore(tmp_path)
    assert [f.kind for f in check_store(tmp_path).findings] == ["meta"]


def test_stray_files_are_reported_and_left_alone(tmp_path: Path) -> None:
    make_store(tmp_path, 3)
    stray = tmp_path / "msgs" / "notes.txt"
    stray.write_text("hello")
    assert [(f.kind, f.file) for f in check_store(tmp_path).findings] == [
        ("stray_file", "msgs/notes.txt")
    ]
    s = FileStore(tmp_path)
    assert [f.kind for f in s.recovery_report.findings] == ["stray_file"]
    assert s.state().messages == 3
    s.close()
    assert stray.read_text() == "hello"


def test_check_store_on_non_store_paths(tmp_path: Path) -> None:
    assert not check_store(tmp_path / "absent").healthy
    assert [f.kind for f in check_store(tmp_path).findings] == ["meta", "meta"]


def test_healthy_store_checks_clean(tmp_path: Path) -> None:
    make_store(tmp_path, 50, segment_bytes_max=700)
    s = FileStore(tmp_path, segment_bytes_max=700)
    s.remove(3)
    s.purge(subject="rec.1")
    st_ = s.state()
    s.close()
    report = check_store(tmp_path)
    assert report.healthy, report.format()
    assert (report.messages, report.first_seq, report.last_seq, report.num_deleted) == (
        st_.messages,
        st_.first_seq,
        st_.last_seq,
        st_.num_deleted,
    )
    assert report.segments == len(seg_files(tmp_path)) > 1


def test_a_torn_segment_left_with_nothing_live_is_deleted(tmp_path: Path) -> None:
    """The torn record was the segment's only live message: the store rolls away from
    the segment (its name keeps the sequence), and then deletes it instead of cutting it."""
    s = FileStore(tmp_path)
    for i in range(3):
        s.store("a", None, b"x%d" % i, T0 + i)
    for seq in (1, 2, 3):
        s.remove(seq)
    s.store("a", None, b"last", T0 + 3)
    s.close()
    seg = seg_files(tmp_path)[-1]
    start, length = records(seg)[-1][:2]
    with open(seg, "r+b") as f:
        f.truncate(start + length - 1)
    s = FileStore(tmp_path)
    assert not seg.exists()
    assert [f.kind for f in s.recovery_report.findings] == ["torn_tail"]
    state = s.state()
    assert (state.messages, state.first_seq, state.last_seq) == (0, 5, 4)
    assert state.lost == LostData((4,), length - 1)
    s.close()
    s = FileStore(tmp_path)
    assert s.recovery_report.clean
    assert s.store("a", None, b"next", T0 + 9) == 5
    s.close()
    assert check_store(tmp_path).healthy


def test_replay_in_bounded_runs_rebuilds_the_same_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Replay indexes plain records in runs of at most RUN_MAX (bounding the memory of
    opening a big segment); runs split at the bound, by removals and by headers must
    rebuild exactly what the store held before it was closed."""
    from brook.jetstream.store.file import recovery

    monkeypatch.setattr(recovery, "RUN_MAX", 7)
    n = 100
    s = FileStore(tmp_path / "s")
    for i in range(n):
        hdr = b"NATS/1.0\r\nI: %d\r\n\r\n" % i if i % 5 == 0 else None
        s.store(f"rec.{i % 3}.{i // 40}", hdr, b"data-%04d" % i, T0 + i)
    for seq in (3, 20, 21, 22, 64):
        assert s.remove(seq)
    before = (s.state(), [s.subject_state(f"rec.{k}.>") for k in range(3)])
    before_subjects = s.subject_counts(">")
    s.close()
    s = FileStore(tmp_path / "s")
    try:
        assert s.recovery_report.clean
        assert (s.state(), [s.subject_state(f"rec.{k}.>") for k in range(3)]) == before
        assert s.subject_counts(">") == before_subjects
        assert_messages(s, set(range(1, n + 1)) - {3, 20, 21, 22, 64}, n)
        last = s.load_last("rec.1.>")
        assert last is not None
        assert (last.seq, last.subject) == (98, "rec.1.2")
        headed = s.load(41)
        assert headed is not None
        assert headed.header == b"NATS/1.0\r\nI: 40\r\n\r\n"
    finally:
        s.close()
