"""Stream ingest rules with a manual clock: no sockets, no sleeping."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from brook.jetstream.consumer_index import ConsumerIndex
from brook.jetstream.ingested import Ingested
from brook.jetstream.retention import StreamRetention
from brook.jetstream.stream import Stream
from brook.protocol import headers as hdrs
from tests.support.streams import SECOND, Clock, make, publish, reopen


def test_duplicate_window_is_exact() -> None:
    stream, clock, acks = make(duplicate_window=2 * SECOND)
    publish(stream, "s.a", Nats_Msg_Id="id")
    clock.now += 2 * SECOND - 1
    publish(stream, "s.a", Nats_Msg_Id="id")
    clock.now += 2
    publish(stream, "s.a", Nats_Msg_Id="id")
    assert acks == [
        {"stream": "S", "seq": 1},
        {"stream": "S", "seq": 1, "duplicate": True},
        {"stream": "S", "seq": 2},
    ]


def test_max_age_expiry_returns_time_to_next_expiry() -> None:
    stream, clock, _ = make(max_age=10 * SECOND)
    publish(stream, "s.a")
    clock.now += 4 * SECOND
    publish(stream, "s.b")
    assert stream.expire() == 6 * SECOND
    clock.now += 6 * SECOND
    assert stream.expire() == 4 * SECOND
    state = stream.store.state()
    assert (state.messages, state.first_seq) == (1, 2)
    clock.now += 4 * SECOND
    assert stream.expire() is None
    assert stream.store.state().messages == 0


@pytest.mark.parametrize(("rollup", "left"), [("sub", [2, 4]), ("all", [4])])
def test_rollup(rollup: str, left: list[int]) -> None:
    stream, _, acks = make(allow_rollup_hdrs=True)
    publish(stream, "s.a")
    publish(stream, "s.b")
    publish(stream, "s.a")
    publish(stream, "s.a", Nats_Rollup=rollup)
    assert acks[-1] == {"stream": "S", "seq": 4}
    assert [m.seq for m in _all(stream)] == left


def test_rollup_needs_permission_and_valid_value() -> None:
    stream, _, acks = make()
    publish(stream, "s.a", Nats_Rollup="sub")
    assert acks[-1]["error"]["err_code"] == 10111
    stream2, _, acks2 = make(allow_rollup_hdrs=True)
    publish(stream2, "s.a", Nats_Rollup="bogus")
    assert acks2[-1]["error"]["description"] == 'rollup value invalid: "bogus"'


def test_discard_new_per_subject() -> None:
    stream, _, acks = make(discard="new", max_msgs_per_subject=1, discard_new_per_subject=True)
    publish(stream, "s.a")
    publish(stream, "s.a")
    publish(stream, "s.b")
    assert acks[1]["error"] == {
        "code": 503,
        "err_code": 10077,
        "description": "maximum messages per subject exceeded",
    }
    assert acks[2] == {"stream": "S", "seq": 2}


def test_expected_last_msg_id_and_sealed() -> None:
    stream, _, acks = make()
    publish(stream, "s.a", Nats_Msg_Id="first")
    publish(stream, "s.a", Nats_Expected_Last_Msg_Id="first")
    publish(stream, "s.a", Nats_Expected_Last_Msg_Id="first")
    assert acks[1] == {"stream": "S", "seq": 2}
    assert acks[2]["error"]["description"] == "wrong last msg ID: "
    stream.reconfigure(dataclasses.replace(stream.config, sealed=True))
    publish(stream, "s.a")
    assert acks[-1]["error"]["err_code"] == 10109


def test_max_bytes_discard_old_keeps_newest() -> None:
    stream, _, _ = make(max_bytes=3 * (len("s.a") + 10 + 16))
    for _ in range(5):
        publish(stream, "s.a", b"0123456789")
    state = stream.store.state()
    assert (state.messages, state.first_seq, state.last_seq) == (3, 3, 5)


def test_no_reply_or_no_ack_sends_nothing() -> None:
    stream, _, acks = make(no_ack=True)
    publish(stream, "s.a")
    stream2, _, acks2 = make()
    stream2.ingest(b"s.a", None, None, b"x")
    assert acks == []
    assert acks2 == []
    assert stream.store.state().messages == stream2.store.state().messages == 1


def test_ingest_says_what_it_did() -> None:
    """The engine tells the consumers from `ingest`'s result alone: where the message was
    stored and whether it is there to see; removals went to `on_removed` before it returns."""
    stream, _, acks = make(max_msgs=2, discard="old")
    removed: list[list[int]] = []
    stream.on_removed = removed.append
    header = hdrs.encode([("Nats-Msg-Id", "a")])
    assert stream.ingest(b"s.a", b"r", header, b"x") == Ingested(1, True)
    assert stream.ingest(b"s.a", None, header, b"x") == Ingested(1, False, True)
    refused = stream.ingest(b"s.a", b"r", hdrs.encode([("Nats-Expected-Last-Sequence", "7")]), b"")
    assert (refused.seq, refused.kept, refused.duplicate) == (0, False, False)
    assert refused.error is not None
    assert refused.error.err_code == 10071
    assert stream.ingest(b"s.b", b"r", None, b"x") == Ingested(2, True)
    assert removed == []
    assert stream.ingest(b"s.c", b"r", None, b"x") == Ingested(3, True)
    assert removed == [[1]]
    assert [a.get("seq") for a in acks] == [1, 0, 2, 3]


@pytest.mark.parametrize(
    "name", ["Nats-Expected-Last-Sequence", "Nats-Expected-Last-Subject-Sequence"]
)
def test_expected_sequence_in_other_unicode_digits_is_a_wrong_sequence(name: str) -> None:
    """A value such as "²" is not a sequence (nats-server's parseInt64 reads -1): the publish
    gets 10071 like any other wrong sequence, it does not raise out of the ingest."""
    stream, _, _ = make()
    refused = stream.ingest(b"s.a", b"r", hdrs.encode([(name, "\u00b2")]), b"")
    assert refused.error is not None
    assert refused.error.err_code == 10071
    assert stream.ingest(b"s.a", b"r", None, b"x").seq == 1


def test_purge_reports_to_the_consumers() -> None:
    """STREAM.PURGE goes through the stream, which reports it (`on_purge`) as it reports a
    rollup's purge: the consumers' one path for purges."""
    stream, _, _ = make()
    purges: list[tuple[int, str, int]] = []
    stream.on_purge = lambda result, subject, keep: purges.append((result.purged, subject, keep))
    for subject in ("s.a", "s.b", "s.a", "s.a"):
        publish(stream, subject)
    assert stream.purge("s.a", 0, 1).purged == 2
    assert stream.purge("", 4, 0).purged == 1
    assert purges == [(2, "s.a", 1), (1, "", 0)]
    assert [m.seq for m in _all(stream)] == [4]


def test_interest_stream_says_an_unwanted_message_was_not_kept() -> None:
    stream, _, acks = make(retention="interest")
    stream.retention = StreamRetention(stream, lambda: [], ConsumerIndex())
    assert stream.ingest(b"s.a", b"r", None, b"x") == Ingested(1, False)
    assert acks == [{"stream": "S", "seq": 1}]
    assert stream.store.state().messages == 0


def _all(stream: Stream) -> list[Any]:
    out = []
    msg = stream.store.load_next(">", 0)
    while msg is not None:
        out.append(msg)
        msg = stream.store.load_next(">", msg.seq + 1)
    return out


def test_size_checks_come_right_after_sealed() -> None:
    """nats-server 2.15.1 checks max_msg_size, then header size, before any header rule."""
    stream, _, acks = make(max_msg_size=100)
    publish(stream, "s.a", b"x" * 200, Nats_Expected_Stream="OTHER")
    assert acks[-1]["error"]["err_code"] == 10054
    publish(stream, "s.a", Nats_Expected_Stream="OTHER", X_Big="y" * 70000)
    assert acks[-1]["error"]["err_code"] == 10054
    stream2, _, acks2 = make()
    publish(stream2, "s.a", Nats_Expected_Last_Sequence="7", X_Big="y" * 70000)
    assert acks2[-1]["error"]["err_code"] == 10097
    stream2.reconfigure(dataclasses.replace(stream2.config, sealed=True))
    publish(stream2, "s.a", X_Big="y" * 70000)
    assert acks2[-1]["error"]["err_code"] == 10109


def test_expected_last_msg_id_survives_restart_outside_the_window() -> None:
    stream, clock, acks = make(duplicate_window=SECOND)
    publish(stream, "s.a", Nats_Msg_Id="last-one")
    clock.now += 10 * SECOND  # well past the duplicate window
    restarted = reopen(stream, clock, acks)
    publish(restarted, "s.a", Nats_Expected_Last_Msg_Id="last-one")
    assert acks[-1] == {"stream": "S", "seq": 2}
    publish(restarted, "s.a", Nats_Msg_Id="last-one")  # outside the window: not a duplicate
    assert acks[-1] == {"stream": "S", "seq": 3}


def test_a_restart_finds_the_ids_of_the_window_among_plain_messages() -> None:
    """The window is rebuilt from the messages with a header only (the store names
    them): ids inside it are duplicates after a restart, older ones and plain messages
    between them are not in the way."""
    stream, clock, acks = make(duplicate_window=10 * SECOND)
    publish(stream, "s.a", Nats_Msg_Id="old")
    clock.now += 20 * SECOND
    for i in range(5):
        publish(stream, "s.a")
        publish(stream, "s.b", Nats_Msg_Id=f"id-{i}")
        publish(stream, "s.c", X_Other="not an id")
    restarted = reopen(stream, clock, acks)
    publish(restarted, "s.b", Nats_Msg_Id="id-3")
    assert acks[-1] == {"stream": "S", "seq": 12, "duplicate": True}
    publish(restarted, "s.a", Nats_Msg_Id="old")  # outside the window: stored
    assert acks[-1] == {"stream": "S", "seq": 17}


def test_dedup_ids_are_bounded() -> None:
    from brook.jetstream.dedup import DedupWindow

    clock = Clock()
    window = DedupWindow(lambda: 60 * SECOND, clock, max_ids=3)
    for i in range(5):
        window.remember(f"id-{i}", i + 1, clock.now)
    assert len(window) == 3
    assert window.lookup("id-0") is None
    assert window.lookup("id-4") == 5
