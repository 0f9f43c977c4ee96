"""Where each source of a stream resumes (sources.py): nats-server's
`startingSequenceForSources` over the stored headers, newest first, and its `sources.db`
record (`SourcesState`), on a real file store."""

from __future__ import annotations

from pathlib import Path

import pytest

from brook.jetstream.models.sources import ExternalStream, StreamSource
from brook.jetstream.sources import (
    RECORD_FILE,
    Position,
    SourcePositions,
    decode_record,
    encode_record,
)
from brook.jetstream.store.file import FileStore

A = StreamSource("A", filter_subject="a.>")
B = StreamSource("B")
EXT = StreamSource("E", external=ExternalStream("$JS.hub.API", "d"))


def _store(tmp_path: Path) -> FileStore:
    return FileStore(directory=tmp_path / "data")


def _sourced(store: FileStore, value: str, subject: str = "x") -> int:
    return store.store(subject, f"NATS/1.0\r\nNats-Stream-Source: {value}\r\n\r\n".encode(), b"", 1)


def test_the_newest_header_of_each_source_wins(tmp_path: Path) -> None:
    store = _store(tmp_path)
    _sourced(store, "A 4 a.> > a.1 ID")
    _sourced(store, "B 2 > > b.1")
    _sourced(store, "A 9 a.> > a.2 ID")
    store.store("own", None, b"a publish", 1)
    _sourced(store, "C 99 > > c.1")  # no longer a source of this stream
    positions = SourcePositions(tmp_path / RECORD_FILE)
    positions.recover(store, [A, B, StreamSource("N")])
    assert positions.positions == {
        A.iname: Position(9, "ID"),
        B.iname: Position(2),
        "N > >": Position(0),  # never stored anything: from its origin's start
    }


def test_older_header_forms_match_every_source_of_that_name(tmp_path: Path) -> None:
    store = _store(tmp_path)
    _sourced(store, "$JS.ACK.B.JS_SRC_x.1.12.3.1764000000000000000.0")  # a whole ack reply
    _sourced(store, f"{EXT.iname.split(' ')[0]} 7")  # `<name>:<hash(api)> <seq>`, pre-2.10
    _sourced(store, "E:XXXXXXXX 5")  # through another API: another stream named E
    positions = SourcePositions(None)
    positions.recover(store, [B, EXT])
    assert positions.positions == {B.iname: Position(12), EXT.iname: Position(7)}


def test_the_record_survives_a_purge_and_newer_headers_win_over_it(tmp_path: Path) -> None:
    store = _store(tmp_path)
    path = tmp_path / RECORD_FILE
    positions = SourcePositions(path)
    positions.recover(store, [A, B])
    _sourced(store, "A 4 a.> > a.1")
    positions.stored(A.iname, 4, "")
    _sourced(store, "B 6 > > b.1")
    positions.stored(B.iname, 6, "")
    positions.sync(store)  # the group commit writes the record
    assert decode_record(path.read_bytes()) == (3, {A.iname: Position(4), B.iname: Position(6)})
    store.purge()
    _sourced(store, "A 8 a.> > a.2")  # after the record: read from its header
    positions.stored(A.iname, 8, "")
    store.sync()  # the message is durable, the record is not rewritten (a crash now)
    reopened = SourcePositions(path)
    reopened.recover(store, [A, B])
    assert reopened.positions == {A.iname: Position(8), B.iname: Position(6)}


def test_the_record_is_rewritten_only_when_a_position_changed(tmp_path: Path) -> None:
    store = _store(tmp_path)
    path = tmp_path / RECORD_FILE
    positions = SourcePositions(path)
    positions.recover(store, [A])
    positions.sync(store)
    assert decode_record(path.read_bytes()) == (1, {A.iname: Position(0)})
    path.unlink()
    positions.sync(store)
    assert not path.exists()
    positions.stored(A.iname, 3, "I")
    positions.sync(store)
    assert decode_record(path.read_bytes()) == (1, {A.iname: Position(3, "I")})


def test_a_damaged_record_is_ignored_for_the_headers(tmp_path: Path) -> None:
    store = _store(tmp_path)
    _sourced(store, "A 4 a.> > a.1")
    path = tmp_path / RECORD_FILE
    path.write_bytes(encode_record(9, {A.iname: Position(100)})[:-1])
    positions = SourcePositions(path)
    positions.recover(store, [A])
    assert positions.positions == {A.iname: Position(4)}


def test_only_new_sources_are_looked_for_when_the_sources_change(tmp_path: Path) -> None:
    store = _store(tmp_path)
    _sourced(store, "B 5 > > b.1")
    positions = SourcePositions(None)
    positions.recover(store, [A])
    positions.stored(A.iname, 11, "")  # a duplicate: no message says so, memory does
    positions.recover(store, [A, B])
    assert positions.positions == {A.iname: Position(11), B.iname: Position(5)}


@pytest.mark.parametrize(
    "data",
    [b"", b"\x02" + bytes(16), encode_record(1, {"A > >": Position(1)}) + b"x"],
)
def test_records_that_are_not_one(data: bytes) -> None:
    with pytest.raises(ValueError):  # noqa: PT011 - the message is the reason, not checked
        decode_record(data)


def test_the_record_layout_is_nats_server_s() -> None:
    data = encode_record(0x0102, {"A > >": Position(300, "ID")})
    assert data == (
        b"\x01" + (1).to_bytes(8, "little") + (0x0102).to_bytes(8, "little")
        + b"\x05A > >" + b"\xac\x02" + b"\x02ID"
    )  # fmt: skip


def test_positions_found_in_headers_at_open_are_recorded_at_once(tmp_path: Path) -> None:
    """A restart finds a newer position in a header than in the record: written at once,
    as a purge may come before any commit (the crash test found it)."""
    store = _store(tmp_path)
    path = tmp_path / RECORD_FILE
    path.write_bytes(encode_record(1, {A.iname: Position(2)}))
    _sourced(store, "A 7 a.> > a.1")
    positions = SourcePositions(path)
    positions.recover(store, [A])
    assert decode_record(path.read_bytes()) == (2, {A.iname: Position(7)})
    store.purge()
    reopened = SourcePositions(path)
    reopened.recover(store, [A])
    assert reopened.positions == {A.iname: Position(7)}


def test_a_commit_between_a_run_and_its_position_leaves_the_run_to_the_headers(
    tmp_path: Path,
) -> None:
    """The sync thread may write the record after the event loop stored a run and before
    it noted the run's position: the record's stamp is the one noted with the positions,
    so a restart reads the run's headers instead of copying the run again."""
    store = _store(tmp_path)
    path = tmp_path / RECORD_FILE
    positions = SourcePositions(path)
    positions.recover(store, [A])
    _sourced(store, "A 1 a.> > a.1")
    positions.stored(A.iname, 1, "")
    _sourced(store, "A 2 a.> > a.2")  # the next run, stored, its position not noted yet
    _sourced(store, "A 3 a.> > a.3")
    positions.sync(store)  # the commit, meanwhile
    assert decode_record(path.read_bytes()) == (2, {A.iname: Position(1)})
    reopened = SourcePositions(path)  # a crash before the next commit
    reopened.recover(store, [A])
    assert reopened.positions == {A.iname: Position(3)}
