"""The behavioural contract of `MessageStore` (base.py), held against every store kind.

Each test runs once per kind (`make_store` is parametrized in conftest.py). Tests that call
`reopen` check persistence for the file store; for the memory store `reopen` is the
identity, so the same assertions still hold. Expected numbers follow nats-server as the
wire reference and the transcripts record it (js-delete-msg.txt, js-purge-filter-keep.txt).

The last section tests the `str` subject matcher (`filters.py`) against the core's
reference matcher `brook.subjects.matches`.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brook.jetstream.store.base import (
    LostData,
    MessageStore,
    StoredMessage,
    StoreError,
    StreamState,
    SubjectState,
)
from brook.jetstream.store.filters import (
    SubjectFilter,
    compile_filter,
    is_match_all,
    subject_matches,
)
from brook.subjects import matches
from tests.store.conftest import MsgSize

MakeStore = Callable[..., MessageStore]
Reopen = Callable[[MessageStore], MessageStore]

T0 = 1_700_000_000_000_000_000  # a realistic epoch-nanosecond base
HDR = b"NATS/1.0\r\nNats-Msg-Id: abc\r\n\r\n"


def ts(i: int) -> int:
    """A distinct, increasing timestamp for the i-th message of a test."""
    return T0 + i * 1_000_000


def fill(store: MessageStore, subjects: list[str], start: int = 0) -> list[int]:
    """Store one message per subject (data = its index), timestamps ts(start + i)."""
    return [
        store.store(subject, None, b"m%d" % (start + i), ts(start + i))
        for i, subject in enumerate(subjects)
    ]


def snapshot(store: MessageStore) -> tuple[StreamState, list[StoredMessage | None]]:
    """Everything observable: full state and every sequence's load, for reopen checks."""
    state = store.state(deleted_details=True, subjects_filter=">")
    low = max(state.first_seq - 2, 0)
    return state, [store.load(s) for s in range(low, state.last_seq + 3)]


def seqs_of(msgs: list[StoredMessage | None]) -> list[int]:
    return [m.seq for m in msgs if m is not None]


# ---------------------------------------------------------------------- sequences, state


def test_fresh_store_reports_a_never_used_stream(make_store: MakeStore) -> None:
    store = make_store()
    assert store.state() == StreamState(
        messages=0,
        bytes=0,
        first_seq=0,
        first_ts_ns=0,
        last_seq=0,
        last_ts_ns=0,
        num_deleted=0,
        num_subjects=0,
        deleted=None,
        subjects=None,
    )
    assert store.load(0) is None
    assert store.load(1) is None
    assert store.load_next("", 0) is None
    assert store.load_last(">") is None
    assert store.subject_state(">") == SubjectState(0, 0, 0)
    assert store.subject_counts(">") == {}
    assert store.expire_before(ts(100)) == []


def test_sequences_start_at_one_and_grow_by_one(make_store: MakeStore) -> None:
    store = make_store()
    seqs = [store.store("a", None, b"x", ts(i)) for i in range(5)]
    assert seqs == [1, 2, 3, 4, 5]
    st_ = store.state()
    assert (st_.messages, st_.first_seq, st_.last_seq) == (5, 1, 5)
    assert (st_.first_ts_ns, st_.last_ts_ns) == (ts(0), ts(4))
    assert st_.num_deleted == 0
    assert st_.num_subjects == 1


def test_load_returns_exactly_what_was_stored(make_store: MakeStore) -> None:
    store = make_store()
    seq = store.store("orders.new", HDR, b"payload", ts(7))
    assert store.load(seq) == StoredMessage(seq, "orders.new", HDR, b"payload", ts(7))
    seq2 = store.store("orders.old", None, b"p2", ts(8))
    msg = store.load(seq2)
    assert msg is not None
    assert msg.header is None
    assert msg.ts_ns == ts(8)


def test_timestamps_are_stored_as_given_even_when_equal(make_store: MakeStore) -> None:
    store = make_store()
    for _ in range(3):
        store.store("a", None, b"", ts(1))
    assert [m.ts_ns for m in (store.load(1), store.load(2), store.load(3)) if m] == [ts(1)] * 3
    assert store.state().first_ts_ns == store.state().last_ts_ns == ts(1)


@pytest.mark.parametrize("first_seq", [2, 10, 1_000_000])
def test_configured_first_seq(make_store: MakeStore, first_seq: int) -> None:
    store = make_store(first_seq=first_seq)
    st_ = store.state()
    assert (st_.messages, st_.first_seq, st_.last_seq, st_.last_ts_ns) == (
        0,
        first_seq,
        first_seq - 1,
        0,
    )
    assert store.store("a", None, b"1", ts(1)) == first_seq
    assert store.store("a", None, b"2", ts(2)) == first_seq + 1
    st_ = store.state()
    assert (st_.messages, st_.first_seq, st_.last_seq, st_.num_deleted) == (
        2,
        first_seq,
        first_seq + 1,
        0,
    )
    assert store.load(first_seq - 1) is None
    assert store.load(1) is None
    loaded = store.load_next(">", 0)
    assert loaded is not None
    assert loaded.seq == first_seq


def test_configured_first_seq_survives_reopen_before_any_message(
    make_store: MakeStore, reopen: Reopen
) -> None:
    store = reopen(make_store(first_seq=50))
    assert store.state().first_seq == 50
    assert store.store("a", None, b"", ts(1)) == 50


def test_load_of_absent_sequences(make_store: MakeStore) -> None:
    store = make_store()
    fill(store, ["a", "b", "c"])
    store.remove(2)
    for seq in (-1, 0, 2, 4, 5, 10**12):
        assert store.load(seq) is None


# ---------------------------------------------------------------------- load_next / load_last

SUBJECTS = ["a", "a.b", "a.b.c", "a.c", "b.c", "b", "a.b"]  # seqs 1..7


@pytest.mark.parametrize(
    ("filter_subject", "expected"),
    [
        ("", [1, 2, 3, 4, 5, 6, 7]),
        (">", [1, 2, 3, 4, 5, 6, 7]),
        ("a", [1]),
        ("a.b", [2, 7]),
        ("a.*", [2, 4, 7]),
        ("a.>", [2, 3, 4, 7]),
        ("*", [1, 6]),
        ("*.c", [4, 5]),
        ("*.b.*", [3]),
        ("*.*", [2, 4, 5, 7]),
        ("*.>", [2, 3, 4, 5, 7]),
        ("a.b.>", [3]),
        ("a.b.c.>", []),
        ("nope", []),
        ("nope.*", []),
    ],
)
def test_load_next_walks_a_filter(
    make_store: MakeStore, filter_subject: str, expected: list[int]
) -> None:
    store = make_store()
    fill(store, SUBJECTS)
    got: list[int] = []
    seq = 0
    while (msg := store.load_next(filter_subject, seq)) is not None:
        got.append(msg.seq)
        assert subject_matches(filter_subject, msg.subject)
        seq = msg.seq + 1
    assert got == expected
    last = store.load_last(filter_subject)
    assert (last.seq if last else None) == (expected[-1] if expected else None)
    assert store.subject_state(filter_subject) == (
        SubjectState(len(expected), expected[0], expected[-1]) if expected else SubjectState()
    )


def test_load_next_start_positions(make_store: MakeStore) -> None:
    store = make_store()
    fill(store, ["x", "y", "x", "y", "x"])  # x: 1,3,5  y: 2,4
    cases = [(0, 1), (1, 1), (2, 3), (3, 3), (4, 5), (5, 5), (6, None), (100, None)]
    for start, want in cases:
        msg = store.load_next("x", start)
        assert (msg.seq if msg else None) == want, start
    m = store.load_next("y", 5)
    assert m is None
    m = store.load_next(">", 4)
    assert m is not None
    assert m.seq == 4
    m = store.load_next("*", -5)
    assert m is not None
    assert m.seq == 1


def test_load_next_skips_gaps_and_removed(make_store: MakeStore) -> None:
    store = make_store()
    fill(store, ["a", "b", "a", "b", "a", "b"])
    for seq in (2, 3, 4):
        assert store.remove(seq)
    m = store.load_next("", 2)
    assert m is not None
    assert m.seq == 5
    m = store.load_next("b", 2)
    assert m is not None
    assert m.seq == 6
    m = store.load_next("a", 2)
    assert m is not None
    assert m.seq == 5
    m = store.load_next("*", 1)
    assert m is not None
    assert m.seq == 1


def test_load_next_over_a_long_run_of_gaps(make_store: MakeStore) -> None:
    """A purged busy subject leaves thousands of gaps; wildcard and match-all scans must
    still find the next message (memory store switches from probing to its index)."""
    store = make_store()
    store.store("keep.first", None, b"", ts(0))
    fill(store, ["busy"] * 3000, start=1)
    store.store("keep.last", None, b"", ts(4000))
    store.purge(subject="busy")
    for flt in ("", ">", "keep.*", "keep.>", "*.last", "keep.last"):
        m = store.load_next(flt, 2)
        assert m is not None, flt
        assert m.seq == 3002
    assert store.load_next("busy", 0) is None
    st_ = store.state()
    assert (st_.first_seq, st_.last_seq, st_.num_deleted) == (1, 3002, 3000)
    store.remove(1)
    st_ = store.state()
    assert (st_.first_seq, st_.num_deleted, st_.messages) == (3002, 0, 1)


def test_load_last(make_store: MakeStore) -> None:
    store = make_store()
    fill(store, ["a.1", "a.2", "b.1", "a.1", "b.2"])
    cases = {"a.1": 4, "a.2": 2, "a.*": 4, "b.*": 5, "*.1": 4, ">": 5, "": 5, "c": None}
    for flt, want in cases.items():
        m = store.load_last(flt)
        assert (m.seq if m else None) == want, flt
    store.remove(5)  # the last message: load_last must step back over the new gap
    m = store.load_last(">")
    assert m is not None
    assert m.seq == 4
    assert store.load_last("b.2") is None
    store.remove(4)
    m = store.load_last("a.1")
    assert m is not None
    assert m.seq == 1


def test_load_last_over_a_long_run_of_trailing_gaps(make_store: MakeStore) -> None:
    store = make_store()
    store.store("first", None, b"", ts(0))
    fill(store, ["busy"] * 500, start=1)
    store.purge(subject="busy")
    m = store.load_last("")
    assert m is not None
    assert m.seq == 1
    assert store.subject_state(">") == SubjectState(1, 1, 1)


# ---------------------------------------------------------------------- remove


def test_remove_first_advances_first_seq(make_store: MakeStore, msg_size: MsgSize) -> None:
    store = make_store()
    fill(store, ["a", "b", "c"])
    assert store.remove(1) is True
    st_ = store.state(deleted_details=True)
    assert (st_.messages, st_.first_seq, st_.last_seq, st_.num_deleted) == (2, 2, 3, 0)
    assert st_.first_ts_ns == ts(1)
    assert st_.deleted == []
    assert st_.bytes == msg_size("b", None, b"m1") + msg_size("c", None, b"m2")


def test_remove_middle_leaves_a_gap(make_store: MakeStore) -> None:
    """js-delete-msg.txt: 3 messages, delete 2 -> messages 2, num_deleted 1, first 1."""
    store = make_store()
    fill(store, ["md.x", "md.x", "md.x"])
    assert store.remove(2) is True
    assert store.load(2) is None
    assert store.remove(2) is False  # already deleted
    assert store.remove(50) is False  # beyond the end
    st_ = store.state(deleted_details=True)
    assert (st_.messages, st_.first_seq, st_.last_seq) == (2, 1, 3)
    assert (st_.num_deleted, st_.deleted, st_.num_subjects) == (1, [2], 1)


def test_remove_last_keeps_last_seq(make_store: MakeStore) -> None:
    store = make_store()
    fill(store, ["a", "b", "c"])
    assert store.remove(3) is True
    st_ = store.state(deleted_details=True)
    assert (st_.messages, st_.first_seq, st_.last_seq, st_.last_ts_ns) == (2, 1, 3, ts(2))
    assert (st_.num_deleted, st_.deleted) == (1, [3])
    assert store.store("d", None, b"", ts(9)) == 4
    assert store.state(deleted_details=True).deleted == [3]


def test_remove_first_jumps_past_following_gaps(make_store: MakeStore) -> None:
    store = make_store()
    fill(store, ["a"] * 6)
    for seq in (2, 3, 5):
        store.remove(seq)
    assert store.state(deleted_details=True).deleted == [2, 3, 5]
    store.remove(1)
    st_ = store.state(deleted_details=True)
    assert (st_.first_seq, st_.first_ts_ns, st_.num_deleted, st_.deleted) == (4, ts(3), 1, [5])
    store.remove(4)
    st_ = store.state(deleted_details=True)
    assert (st_.first_seq, st_.num_deleted, st_.deleted, st_.messages) == (6, 0, [], 1)


@pytest.mark.parametrize("seq", [-1, 0, 4, 1000])
def test_remove_absent_is_false(make_store: MakeStore, seq: int) -> None:
    store = make_store()
    fill(store, ["a", "b", "c"])
    before = store.state(deleted_details=True)
    assert store.remove(seq) is False
    assert store.state(deleted_details=True) == before


def test_remove_on_empty_store_is_false(make_store: MakeStore) -> None:
    store = make_store()
    assert store.remove(1) is False
    assert store.state().first_seq == 0


def test_remove_everything_one_by_one(make_store: MakeStore) -> None:
    store = make_store()
    fill(store, ["a", "b", "c", "d"])
    for seq in (2, 4, 3, 1):
        assert store.remove(seq, erase=seq % 2 == 0)
    st_ = store.state(deleted_details=True, subjects_filter=">")
    assert (st_.messages, st_.bytes, st_.first_seq, st_.last_seq) == (0, 0, 5, 4)
    assert (st_.first_ts_ns, st_.last_ts_ns) == (0, ts(3))
    assert (st_.num_deleted, st_.deleted, st_.num_subjects, st_.subjects) == (0, [], 0, {})
    assert store.store("e", None, b"", ts(10)) == 5
    st_ = store.state()
    assert (st_.messages, st_.first_seq, st_.last_seq, st_.first_ts_ns) == (1, 5, 5, ts(10))


def test_remove_with_erase_behaves_like_remove(make_store: MakeStore) -> None:
    store = make_store()
    fill(store, ["a", "b", "c"])
    assert store.remove(2, erase=True) is True
    assert store.load(2) is None
    assert store.remove(2, erase=True) is False
    assert store.state().num_deleted == 1


def test_removing_a_subjects_last_message_drops_the_subject(make_store: MakeStore) -> None:
    store = make_store()
    fill(store, ["a", "b", "a"])
    assert store.state().num_subjects == 2
    store.remove(2)
    assert store.state().num_subjects == 1
    assert store.subject_counts(">") == {"a": 2}
    assert store.subject_state("b") == SubjectState()


def test_last_seqs_per_subject(make_store: MakeStore) -> None:
    store = make_store()
    fill(store, ["k.a", "k.b", "k.a", "other", "k.b", "k.c"])
    assert sorted(store.last_seqs(">")) == [3, 4, 5, 6]
    assert sorted(store.last_seqs("k.*")) == [3, 5, 6]
    store.remove(6)
    assert sorted(store.last_seqs("k.*")) == [3, 5]
    assert store.last_seqs("none") == []


# ---------------------------------------------------------------------- purge


def test_full_purge(make_store: MakeStore) -> None:
    store = make_store()
    fill(store, ["a", "b", "c", "a"])
    store.remove(2)
    result = store.purge()
    assert (result.purged, result.removed_seqs) == (3, [1, 3, 4])
    st_ = store.state(deleted_details=True, subjects_filter=">")
    assert (st_.messages, st_.bytes, st_.first_seq, st_.last_seq) == (0, 0, 5, 4)
    assert (st_.first_ts_ns, st_.last_ts_ns, st_.num_deleted) == (0, ts(3), 0)
    assert (st_.num_subjects, st_.deleted, st_.subjects) == (0, [], {})
    for seq in range(0, 6):
        assert store.load(seq) is None
    assert store.load_next(">", 0) is None
    assert store.load_last("a") is None
    # The store continues at last_seq + 1.
    assert store.store("a", None, b"again", ts(20)) == 5
    st_ = store.state()
    assert (st_.messages, st_.first_seq, st_.last_seq) == (1, 5, 5)


@pytest.mark.parametrize("subject", ["", ">"])
def test_purge_with_match_all_filter_is_a_full_purge(make_store: MakeStore, subject: str) -> None:
    store = make_store()
    fill(store, ["a", "b.c"])
    result = store.purge(subject=subject)
    assert (result.purged, result.removed_seqs) == (2, [1, 2])
    st_ = store.state()
    assert (st_.messages, st_.first_seq, st_.last_seq) == (0, 3, 2)


def test_purge_of_an_empty_store(make_store: MakeStore) -> None:
    store = make_store()
    result = store.purge()
    assert (result.purged, result.removed_seqs) == (0, [])
    st_ = store.state()
    assert (st_.first_seq, st_.last_seq) == (0, 0)
    assert store.store("a", None, b"", ts(0)) == 1


def test_purge_of_a_fresh_store_with_first_seq(make_store: MakeStore) -> None:
    store = make_store(first_seq=5)
    assert store.purge().purged == 0
    st_ = store.state()
    assert (st_.first_seq, st_.last_seq) == (5, 4)
    assert store.store("a", None, b"", ts(0)) == 5


def test_purge_by_literal_subject(make_store: MakeStore, msg_size: MsgSize) -> None:
    store = make_store()
    fill(store, ["a", "b", "a", "c", "a"])
    result = store.purge(subject="a")
    assert (result.purged, result.removed_seqs) == (3, [1, 3, 5])
    st_ = store.state(deleted_details=True, subjects_filter=">")
    assert (st_.messages, st_.first_seq, st_.last_seq) == (2, 2, 5)
    assert (st_.num_deleted, st_.deleted) == (2, [3, 5])
    assert st_.subjects == {"b": 1, "c": 1}
    assert st_.num_subjects == 2
    assert st_.bytes == msg_size("b", None, b"m1") + msg_size("c", None, b"m3")
    assert store.purge(subject="a").purged == 0


def test_purge_by_wildcard_subject(make_store: MakeStore) -> None:
    store = make_store()
    fill(store, ["k.a", "k.b", "other", "k.a.deep", "k.c"])
    result = store.purge(subject="k.*")
    assert (result.purged, result.removed_seqs) == (3, [1, 2, 5])
    assert store.subject_counts(">") == {"other": 1, "k.a.deep": 1}
    result = store.purge(subject="k.>")
    assert (result.purged, result.removed_seqs) == (1, [4])
    st_ = store.state(deleted_details=True)
    assert (st_.messages, st_.first_seq, st_.last_seq, st_.deleted) == (1, 3, 5, [4, 5])


def test_purge_matching_nothing(make_store: MakeStore) -> None:
    store = make_store()
    fill(store, ["a", "b"])
    before = store.state(deleted_details=True)
    results = [
        store.purge(subject="zzz"),
        store.purge(subject="a.*"),
        store.purge(up_to_seq=1),
        store.purge(keep=5),
        store.purge(subject="b", keep=1),
    ]
    for result in results:
        assert (result.purged, result.removed_seqs) == (0, [])
    assert store.state(deleted_details=True) == before


def test_purge_up_to_seq(make_store: MakeStore) -> None:
    store = make_store()
    fill(store, ["a", "b", "c", "d", "e", "f"])
    store.remove(4)
    result = store.purge(up_to_seq=5)
    assert (result.purged, result.removed_seqs) == (3, [1, 2, 3])
    st_ = store.state(deleted_details=True)
    assert (st_.messages, st_.first_seq, st_.first_ts_ns, st_.last_seq) == (2, 5, ts(4), 6)
    assert st_.deleted == []
    assert store.purge(up_to_seq=5).purged == 0  # nothing below first_seq any more


def test_purge_up_to_seq_landing_on_a_gap(make_store: MakeStore) -> None:
    store = make_store()
    fill(store, ["a"] * 5)
    store.remove(3)
    result = store.purge(up_to_seq=3)
    assert result.removed_seqs == [1, 2]
    st_ = store.state(deleted_details=True)
    assert (st_.first_seq, st_.num_deleted, st_.deleted) == (4, 0, [])


def test_purge_up_to_seq_past_the_end_keeps_last_seq(make_store: MakeStore) -> None:
    store = make_store()
    fill(store, ["a", "b", "c"])
    result = store.purge(up_to_seq=100)
    assert (result.purged, result.removed_seqs) == (3, [1, 2, 3])
    st_ = store.state()
    assert (st_.messages, st_.first_seq, st_.last_seq) == (0, 4, 3)
    assert store.store("d", None, b"", ts(9)) == 4


def test_purge_keep(make_store: MakeStore) -> None:
    store = make_store()
    fill(store, ["a", "b", "a", "b", "c"])
    result = store.purge(keep=2)
    assert (result.purged, result.removed_seqs) == (3, [1, 2, 3])
    st_ = store.state()
    assert (st_.messages, st_.first_seq, st_.last_seq) == (2, 4, 5)
    assert store.purge(keep=2).purged == 0
    assert store.purge(keep=10).purged == 0


def test_purge_keep_counts_messages_not_sequences(make_store: MakeStore) -> None:
    """With interior gaps, `keep` still leaves `keep` messages (base.py)."""
    store = make_store()
    fill(store, ["a"] * 6)
    store.remove(5)
    store.remove(6)
    result = store.purge(keep=2)
    assert result.removed_seqs == [1, 2]
    assert seqs_of([store.load(s) for s in range(1, 7)]) == [3, 4]


def test_purge_subject_with_keep(make_store: MakeStore) -> None:
    store = make_store()
    fill(store, ["a", "b", "a", "b", "a", "c"])
    result = store.purge(subject="a", keep=1)
    assert (result.purged, result.removed_seqs) == (2, [1, 3])
    assert store.subject_counts(">") == {"a": 1, "b": 2, "c": 1}
    assert store.state().first_seq == 2


def test_purge_wildcard_with_keep_counts_across_the_filter(make_store: MakeStore) -> None:
    """keep applies to the filter as a whole, as nats-server's filtered purge does."""
    store = make_store()
    fill(store, ["k.a", "k.b", "k.a", "k.b", "x"])
    result = store.purge(subject="k.*", keep=1)
    assert result.removed_seqs == [1, 2, 3]
    assert store.subject_counts(">") == {"k.b": 1, "x": 1}


def test_purge_subject_with_up_to_seq(make_store: MakeStore) -> None:
    """The stream's `Nats-Rollup: sub` is exactly this call."""
    store = make_store()
    fill(store, ["a", "b", "a", "b", "a"])
    result = store.purge(subject="a", up_to_seq=5)
    assert (result.purged, result.removed_seqs) == (2, [1, 3])
    assert store.subject_counts(">") == {"b": 2, "a": 1}
    result = store.purge(subject="*", up_to_seq=5)
    assert result.removed_seqs == [2, 4]
    st_ = store.state()
    assert (st_.messages, st_.first_seq, st_.last_seq) == (1, 5, 5)


def test_purge_up_to_seq_and_keep_together_remove_the_intersection(
    make_store: MakeStore,
) -> None:
    store = make_store()
    fill(store, ["a"] * 6)
    assert store.purge(up_to_seq=5, keep=4).removed_seqs == [1, 2]
    assert store.purge(up_to_seq=4, keep=1).removed_seqs == [3]
    assert store.purge(subject="a", up_to_seq=100, keep=2).removed_seqs == [4]


def test_purge_transcript_filter_keep_seq(make_store: MakeStore) -> None:
    """js-purge-filter-keep.txt: pg.a x3, pg.b x2, pg.c x1, then four purges."""
    store = make_store()
    fill(store, ["pg.a", "pg.a", "pg.a", "pg.b", "pg.b", "pg.c"])
    assert store.purge(subject="pg.a", keep=1).purged == 2
    assert store.purge(subject="pg.b").purged == 2
    assert store.purge(up_to_seq=6).purged == 1
    assert store.purge().purged == 1
    st_ = store.state()
    assert (st_.messages, st_.bytes, st_.first_seq, st_.last_seq) == (0, 0, 7, 6)
    assert (st_.first_ts_ns, st_.last_ts_ns) == (0, ts(5))


# ---------------------------------------------------------------------- state details


def test_state_details_only_when_asked(make_store: MakeStore) -> None:
    store = make_store()
    fill(store, ["a.1", "a.2", "b.1", "a.1"])
    store.remove(2)
    plain = store.state()
    assert (plain.deleted, plain.subjects) == (None, None)
    detailed = store.state(deleted_details=True, subjects_filter="a.*")
    assert detailed.deleted == [2]
    assert detailed.subjects == {"a.1": 2}
    assert store.state(subjects_filter=">").subjects == {"a.1": 2, "b.1": 1}
    assert store.state(subjects_filter="").subjects == {"a.1": 2, "b.1": 1}
    assert store.state(subjects_filter="b.1").subjects == {"b.1": 1}
    assert store.state(subjects_filter="c.>").subjects == {}
    assert store.state(subjects_filter="*.1").subjects == {"a.1": 2, "b.1": 1}
    assert store.state(deleted_details=True).subjects is None


def test_num_subjects(make_store: MakeStore) -> None:
    store = make_store()
    fill(store, ["a", "b", "a", "c", "c", "c"])
    assert store.state().num_subjects == 3
    store.purge(subject="c")
    assert store.state().num_subjects == 2


def test_subject_state_and_counts(make_store: MakeStore) -> None:
    store = make_store()
    fill(store, ["o.1", "o.2", "o.1", "p", "o.2", "o.1"])
    assert store.subject_state("o.1") == SubjectState(3, 1, 6)
    assert store.subject_state("o.*") == SubjectState(5, 1, 6)
    assert store.subject_state("p") == SubjectState(1, 4, 4)
    assert store.subject_state(">") == SubjectState(6, 1, 6)
    assert store.subject_state("") == SubjectState(6, 1, 6)
    assert store.subject_state("q") == SubjectState(0, 0, 0)
    store.remove(1)
    store.remove(6)
    assert store.subject_state("o.1") == SubjectState(1, 3, 3)
    assert store.subject_state("o.*") == SubjectState(3, 2, 5)
    assert store.subject_counts("o.*") == {"o.2": 2, "o.1": 1}
    assert store.subject_counts(">") == {"o.2": 2, "o.1": 1, "p": 1}
    assert store.subject_counts("") == {"o.2": 2, "o.1": 1, "p": 1}
    assert store.subject_counts("p") == {"p": 1}
    assert store.subject_counts("x.*") == {}


@pytest.mark.parametrize(
    ("filter_subject", "start", "expected"),
    [
        ("", 0, 4),
        (">", 1, 4),
        (">", 3, 3),  # 3 is a gap: 4, 5, 6
        (">", 6, 1),
        (">", 7, 0),
        (">", 10**9, 0),
        ("o.1", 0, 1),
        ("o.1", 6, 1),
        ("o.1", 7, 0),
        ("o.*", 2, 3),
        ("o.*", 3, 2),
        ("o.2", 0, 2),
        ("*", 0, 1),
        ("*.2", 5, 1),
        ("*.2", 6, 0),
        ("q", 0, 0),
        ("q.>", 0, 0),
    ],
)
def test_num_pending(
    make_store: MakeStore, reopen: Reopen, filter_subject: str, start: int, expected: int
) -> None:
    store = make_store()
    fill(store, ["o.1", "o.2", "o.1", "p", "o.2", "o.1"])
    store.remove(1)
    store.remove(3)  # live: 2 o.2, 4 p, 5 o.2, 6 o.1
    for _ in range(2):
        assert store.num_pending(filter_subject, start) == expected
        store = reopen(store)


def test_num_pending_over_many_messages(make_store: MakeStore) -> None:
    """Large enough that the memory store counts per subject instead of probing."""
    store = make_store()
    fill(store, [f"s.{i % 5}" for i in range(1000)])
    store.purge(subject="s.0")
    assert store.num_pending(">", 0) == 800
    assert store.num_pending(">", 501) == 400
    assert store.num_pending("s.1", 501) == 100
    assert store.num_pending("s.*", 990) == 9
    assert store.num_pending("s.0", 0) == 0


# ---------------------------------------------------------------------- bytes accounting

BIG_HDR = b"NATS/1.0\r\nX: " + b"v" * 100 + b"\r\n\r\n"


@pytest.mark.parametrize(
    ("subject", "header", "data", "memory_bytes", "file_bytes"),
    [
        ("a", None, b"hello", 1 + 5 + 16, 30 + 1 + 5),
        ("a", b"", b"hello", 1 + 5 + 16, 30 + 1 + 5),  # empty header == no header
        ("a", HDR, b"hello", 1 + len(HDR) + 5 + 16, 34 + 1 + len(HDR) + 5),
        ("orders.new", None, b"", 10 + 16, 30 + 10),
        ("orders.new", BIG_HDR, b"", 10 + len(BIG_HDR) + 16, 34 + 10 + len(BIG_HDR)),
        ("é.ü", None, b"xy", 5 + 2 + 16, 30 + 5 + 2),  # UTF-8 length of the subject
        ("md.x", None, b"m1", 4 + 2 + 16, 36),  # js-delete-msg: 2 messages = 72 bytes
    ],
)
def test_bytes_accounting_exact(
    make_store: MakeStore,
    store_kind: str,
    subject: str,
    header: bytes | None,
    data: bytes,
    memory_bytes: int,
    file_bytes: int,
) -> None:
    store = make_store()
    store.store(subject, header, data, ts(0))
    want = memory_bytes if store_kind == "memory" else file_bytes
    assert store.state().bytes == want
    store.store(subject, header, data, ts(1))
    assert store.state().bytes == 2 * want
    store.remove(1)
    assert store.state().bytes == want
    store.purge()
    assert store.state().bytes == 0


def test_bytes_follow_every_kind_of_removal(make_store: MakeStore, msg_size: MsgSize) -> None:
    store = make_store()
    items = [("a", HDR, b"1" * 10), ("b", None, b""), ("a", None, b"22"), ("c", HDR, b"3")]
    for i, (subject, header, data) in enumerate(items):
        store.store(subject, header, data, ts(i))
    sizes = [msg_size(s, h, d) for s, h, d in items]
    assert store.state().bytes == sum(sizes)
    store.remove(2)
    assert store.state().bytes == sizes[0] + sizes[2] + sizes[3]
    store.purge(subject="a", keep=1)
    assert store.state().bytes == sizes[2] + sizes[3]
    store.expire_before(ts(3))
    assert store.state().bytes == sizes[3]


# ---------------------------------------------------------------------- expire_before


def test_expire_before(make_store: MakeStore) -> None:
    store = make_store()
    fill(store, ["a", "b", "c", "d", "e"])
    assert store.expire_before(ts(0)) == []  # nothing strictly older
    assert store.expire_before(ts(2)) == [1, 2]
    st_ = store.state()
    assert (st_.messages, st_.first_seq, st_.first_ts_ns, st_.last_seq) == (3, 3, ts(2), 5)
    assert store.expire_before(ts(2)) == []
    assert store.expire_before(ts(2) + 1) == [3]


def test_expire_before_skips_gaps_and_can_empty_the_store(make_store: MakeStore) -> None:
    store = make_store()
    fill(store, ["a", "b", "c", "d"])
    store.remove(2)
    store.remove(4)
    assert store.expire_before(ts(100)) == [1, 3]
    st_ = store.state(deleted_details=True)
    assert (st_.messages, st_.first_seq, st_.last_seq, st_.last_ts_ns) == (0, 5, 4, ts(3))
    assert (st_.num_deleted, st_.deleted) == (0, [])
    assert store.store("e", None, b"", ts(101)) == 5


# ---------------------------------------------------------------------- payloads


def test_payloads_and_headers_are_byte_exact(make_store: MakeStore, reopen: Reopen) -> None:
    store = make_store()
    binary = bytes(range(256)) * 4
    mib = os.urandom(1024 * 1024)
    weird_hdr = b"NATS/1.0\r\nK: \xc3\xa9\x00\xff\r\nNats-Msg-Id: 1\r\n\r\n"
    items: list[tuple[str, bytes | None, bytes]] = [
        ("empty", None, b""),
        ("empty.hdr", HDR, b""),
        ("bin", None, binary),
        ("bin.hdr", weird_hdr, binary),
        ("crlf", None, b"\r\n\r\nPUB x 1\r\n"),
        ("big", HDR, mib),
        ("big.nohdr", None, mib),
    ]
    for i, (subject, header, data) in enumerate(items):
        assert store.store(subject, header, data, ts(i)) == i + 1
    store.sync()
    for _ in range(2):  # before and after reopen
        for i, (subject, header, data) in enumerate(items):
            assert store.load(i + 1) == StoredMessage(i + 1, subject, header, data, ts(i))
        store = reopen(store)


def test_empty_header_loads_as_none(make_store: MakeStore, reopen: Reopen) -> None:
    store = make_store()
    store.store("a", b"", b"x", ts(0))
    for _ in range(2):
        msg = store.load(1)
        assert msg is not None
        assert msg.header is None
        store = reopen(store)


def test_many_subjects(make_store: MakeStore, reopen: Reopen) -> None:
    store = make_store()
    n = 400
    for rnd in range(3):
        for i in range(n):
            store.store(f"kv.b.k{i}", None, b"v%d" % rnd, ts(rnd * n + i))
    st_ = store.state()
    assert (st_.messages, st_.num_subjects, st_.last_seq) == (3 * n, n, 3 * n)
    counts = store.subject_counts("kv.b.*")
    assert len(counts) == n
    assert set(counts.values()) == {3}
    for i in (0, 7, n - 1):
        last = store.load_last(f"kv.b.k{i}")
        assert last is not None
        assert (last.seq, last.data) == (2 * n + i + 1, b"v2")
    # KV-style per-key purge, keeping the newest revision of every key.
    for i in range(0, n, 2):
        assert store.purge(subject=f"kv.b.k{i}", keep=1).purged == 2
    store = reopen(store)
    st_ = store.state()
    assert (st_.messages, st_.num_subjects) == (3 * n - n, n)
    assert store.subject_state("kv.b.k0") == SubjectState(1, 2 * n + 1, 2 * n + 1)
    assert store.subject_state("kv.b.k1") == SubjectState(3, 2, 2 * n + 2)
    first = store.load_next("kv.b.*", 0)
    assert first is not None
    assert first.subject == "kv.b.k1"


# ---------------------------------------------------------------------- sync, close


def test_sync_concurrent_with_stores(make_store: MakeStore) -> None:
    """sync() may run in a worker thread while the event loop thread keeps storing."""
    store = make_store()
    stop = threading.Event()
    errors: list[BaseException] = []

    def syncer() -> None:
        try:
            while not stop.is_set():
                store.sync()
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=syncer)
    thread.start()
    try:
        for i in range(300):
            assert store.store(f"s.{i % 7}", HDR if i % 3 else None, b"x" * i, ts(i)) == i + 1
    finally:
        stop.set()
        thread.join(timeout=30)
    assert not errors
    store.sync()
    assert store.state().messages == 300


CLOSED_CALLS: list[tuple[str, Callable[[MessageStore], Any]]] = [
    ("store", lambda s: s.store("a", None, b"", ts(9))),
    ("load", lambda s: s.load(1)),
    ("load_next", lambda s: s.load_next(">", 0)),
    ("load_last", lambda s: s.load_last("a")),
    ("remove", lambda s: s.remove(1)),
    ("purge", lambda s: s.purge()),
    ("purge_subject", lambda s: s.purge(subject="a", keep=1)),
    ("state", lambda s: s.state()),
    ("subject_state", lambda s: s.subject_state("a")),
    ("num_pending", lambda s: s.num_pending(">", 0)),
    ("subject_counts", lambda s: s.subject_counts(">")),
    ("expire_before", lambda s: s.expire_before(ts(100))),
    ("sync", lambda s: s.sync()),
]


@pytest.mark.parametrize(("name", "call"), CLOSED_CALLS, ids=[c[0] for c in CLOSED_CALLS])
def test_operations_after_close_raise(
    make_store: MakeStore, name: str, call: Callable[[MessageStore], Any]
) -> None:
    store = make_store()
    fill(store, ["a", "b"])
    store.close()
    store.close()  # idempotent
    with pytest.raises(StoreError):
        call(store)


# ---------------------------------------------------------------------- persistence


def test_reopen_keeps_state_and_messages(make_store: MakeStore, reopen: Reopen) -> None:
    store = make_store()
    for i in range(20):
        store.store(f"p.{i % 3}", HDR if i % 2 else None, b"d%d" % i, ts(i))
    before = snapshot(store)
    store = reopen(store)
    assert snapshot(store) == before
    assert store.store("p.0", None, b"next", ts(50)) == 21


def test_reopen_keeps_deletes_and_purges(make_store: MakeStore, reopen: Reopen) -> None:
    store = make_store()
    fill(store, ["a", "b", "c", "a", "b", "c", "a", "b", "c", "d"])
    store.remove(1)
    store.remove(5)
    store.remove(10, erase=True)
    store = reopen(store)
    st_ = store.state(deleted_details=True)
    assert (st_.first_seq, st_.last_seq, st_.deleted, st_.messages) == (2, 10, [5, 10], 7)
    store.purge(subject="c", keep=1)
    store = reopen(store)
    assert store.subject_counts(">") == {"b": 2, "a": 2, "c": 1}
    store.purge(up_to_seq=4)
    before = snapshot(store)
    store = reopen(store)
    assert snapshot(store) == before
    assert seqs_of(before[1]) == [4, 7, 8, 9]
    assert store.remove(4) is True
    store = reopen(store)
    assert store.state().first_seq == 7


def test_reopen_after_full_purge_keeps_last_seq(make_store: MakeStore, reopen: Reopen) -> None:
    """An empty store must still remember last_seq (and last_ts): sequences are never
    reused, even across a restart."""
    store = make_store()
    fill(store, ["a", "b", "c"])
    store.purge()
    store = reopen(store)
    st_ = store.state()
    assert (st_.messages, st_.first_seq, st_.last_seq, st_.last_ts_ns) == (0, 4, 3, ts(2))
    assert store.store("d", None, b"", ts(3)) == 4
    store = reopen(store)
    st_ = store.state()
    assert (st_.messages, st_.first_seq, st_.last_seq) == (1, 4, 4)


def test_reopen_after_removing_the_last_message(make_store: MakeStore, reopen: Reopen) -> None:
    store = make_store()
    fill(store, ["a", "b", "c"])
    store.remove(3)
    store = reopen(store)
    st_ = store.state(deleted_details=True)
    assert (st_.last_seq, st_.last_ts_ns, st_.deleted) == (3, ts(2), [3])
    assert store.store("d", None, b"", ts(3)) == 4


def test_reopen_after_expiry(make_store: MakeStore, reopen: Reopen) -> None:
    store = make_store()
    fill(store, ["a", "b", "c"])
    assert store.expire_before(ts(2)) == [1, 2]
    store = reopen(store)
    st_ = store.state()
    assert (st_.messages, st_.first_seq, st_.last_seq) == (1, 3, 3)
    assert store.load(1) is None


def test_skip_to_moves_last_seq_past_lost_sequences(
    make_store: MakeStore, reopen: Reopen, store_kind: str
) -> None:
    """Sequences a consumer saw before a crash took them (base.py `skip_to`): never
    handed out again, reported as lost, gaps in the state."""
    store = make_store()
    fill(store, ["a", "b", "c"])
    store.skip_to(2)  # never lowers anything
    assert store.state().last_seq == 3
    assert store.state().lost is None
    store.skip_to(6)
    st_ = store.state(deleted_details=True)
    assert (st_.messages, st_.first_seq, st_.last_seq, st_.last_ts_ns) == (3, 1, 6, ts(2))
    assert (st_.num_deleted, st_.deleted) == (3, [4, 5, 6])
    assert st_.lost == LostData((4, 5, 6), 0)
    assert store.store("d", None, b"", ts(3)) == 7
    store = reopen(store)
    assert store.state().last_seq == 7
    assert store.load(7) is not None
    store.purge()
    store.skip_to(9)
    st_ = store.state()
    assert (st_.messages, st_.first_seq, st_.last_seq) == (0, 10, 9)
    store = reopen(store)
    assert (store.state().first_seq, store.state().last_seq) == (10, 9)
    assert store.store("e", None, b"", ts(4)) == 10
    if store_kind != "memory":  # a reopened file store reports only what its own open found
        assert store.state().lost is None


def test_truncate_takes_the_store_back_to_a_sequence(make_store: MakeStore, reopen: Reopen) -> None:
    """base.py `truncate`: the messages above the sequence are gone, the next message
    takes the sequence after it, and what was removed up to it stays removed, even when
    its removal was recorded after the messages cut (a discard-old limit during a batch's
    commit)."""
    store = make_store()
    fill(store, ["a", "b", "c", "d"])
    store.remove(2)
    fill(store, ["x", "y", "x"], start=4)  # 5, 6, 7: to be cut
    store.remove(1)
    store.purge(subject="c")  # 3
    store.truncate(9)  # nothing above it: nothing changes
    assert store.state().last_seq == 7
    store.truncate(4)
    st_ = store.state(deleted_details=True, subjects_filter=">")
    assert (st_.messages, st_.first_seq, st_.last_seq) == (1, 4, 4)
    assert st_.subjects == {"d": 1}
    assert store.load_last("x") is None
    assert store.store("e", None, b"next", ts(9)) == 5
    store = reopen(store)
    st_ = store.state()
    assert (st_.messages, st_.first_seq, st_.last_seq) == (2, 4, 5)
    assert [store.load(seq) is not None for seq in range(1, 6)] == [False] * 3 + [True] * 2
    assert store.load(5) == StoredMessage(5, "e", None, b"next", ts(9))


@pytest.mark.parametrize("gap", [1, 3, 2000])  # inline records, and a new segment (file)
def test_skip_msgs_leaves_deleted_gaps_that_survive_a_reopen(
    make_store: MakeStore, reopen: Reopen, gap: int
) -> None:
    """A mirror stores its origin's messages at their own sequences (base.py `skip_msgs`,
    nats-server's SkipMsgs): the skipped sequences are gaps, not lost, and stay skipped
    after a reopen; the next message takes the sequence after them."""
    store = make_store()
    fill(store, ["a", "b"])
    store.skip_msgs(1)  # never lowers anything
    assert store.state().last_seq == 2
    store.skip_msgs(2 + gap)
    st_ = store.state(deleted_details=True)
    assert (st_.messages, st_.first_seq, st_.last_seq, st_.lost) == (2, 1, 2 + gap, None)
    assert st_.num_deleted == gap
    assert st_.last_ts_ns == ts(1)
    assert store.last_seq() == st_.last_seq
    assert store.store("c", None, b"", ts(2)) == 3 + gap
    store.skip_msgs(5 + gap)
    assert store.store("d", None, b"", ts(3)) == 6 + gap
    store = reopen(store)
    st_ = store.state(deleted_details=True)
    assert (st_.messages, st_.first_seq, st_.last_seq, st_.lost) == (4, 1, 6 + gap, None)
    assert st_.deleted == [*range(3, 3 + gap), 4 + gap, 5 + gap]
    assert [m.subject for m in store.load_batch(">", 1, 10)] == ["a", "b", "c", "d"]
    assert store.load(3) is None
    store.purge()
    store.skip_msgs(20 + gap)
    assert (store.state().first_seq, store.state().last_seq) == (21 + gap, 20 + gap)
    store = reopen(store)
    assert (store.state().first_seq, store.state().last_seq) == (21 + gap, 20 + gap)
    assert store.store("e", None, b"", ts(4)) == 21 + gap


def test_skip_msgs_of_an_empty_store_moves_its_first_sequence(
    make_store: MakeStore, reopen: Reopen
) -> None:
    """A mirror of an origin whose first message is far along starts there."""
    store = make_store()
    store.skip_msgs(3)
    assert (store.state().messages, store.state().first_seq, store.state().last_seq) == (0, 4, 3)
    assert store.store("a", None, b"", ts(1)) == 4
    store = reopen(store)
    st_ = store.state()
    assert (st_.messages, st_.first_seq, st_.last_seq, st_.num_deleted) == (1, 4, 4, 0)


def test_reopen_with_configured_first_seq_after_messages(
    make_store: MakeStore, reopen: Reopen
) -> None:
    store = make_store(first_seq=100)
    fill(store, ["a", "b"])
    store.remove(100)
    store = reopen(store)
    st_ = store.state()
    assert (st_.messages, st_.first_seq, st_.last_seq) == (1, 101, 101)
    assert store.store("c", None, b"", ts(5)) == 102


# ---------------------------------------------------------------------- filters.py

_TOKENS = st.sampled_from(["a", "b", "c", "ab"])
_SUBJECTS = st.lists(_TOKENS, min_size=1, max_size=4).map(".".join)
_PATTERNS = st.lists(st.sampled_from(["a", "b", "c", "*"]), min_size=1, max_size=4).flatmap(
    lambda toks: st.sampled_from([".".join(toks), ".".join([*toks[:-1], ">"])])
)


@settings(max_examples=300, deadline=None)
@given(pattern=_PATTERNS, subject=_SUBJECTS)
def test_filter_agrees_with_the_core_matcher(pattern: str, subject: str) -> None:
    assert subject_matches(pattern, subject) == matches(pattern.encode(), subject.encode())
    assert SubjectFilter(pattern).matches(subject) == matches(pattern.encode(), subject.encode())


@pytest.mark.parametrize("flt", [None, "", ">"])
def test_match_all_filters(flt: str | None) -> None:
    assert is_match_all(flt)
    compiled = compile_filter(flt)
    assert compiled.match_all
    assert compiled.literal is None
    assert compiled.matches("anything.at.all")


def test_filter_kinds() -> None:
    assert compile_filter("a.b").literal == "a.b"
    assert compile_filter("a.*").literal is None
    assert compile_filter("a.>").literal is None
    assert not compile_filter("a.>").match_all
    assert compile_filter("a.b") is compile_filter("a.b")  # cached
    assert not is_match_all("a")
    assert compile_filter("a*").matches("a*")  # only whole tokens are wildcards
    assert not compile_filter("a*").matches("ab")
    assert compile_filter("é.*").matches("é.ü")


# ---------------------------------------------------------------------- recent_headed


def _naive_recent_headed(store: MessageStore, since_ns: int, most: int) -> list[int]:
    state = store.state()
    newest = [
        m
        for seq in range(state.last_seq, state.first_seq - 1, -1)
        if (m := store.load(seq)) is not None
    ]
    young = [m for m in newest if m.ts_ns >= since_ns][:most]
    return sorted(m.seq for m in young if m.header)


def test_recent_headed_names_the_young_messages_with_a_header(
    make_store: MakeStore, store_harness: Any
) -> None:
    """What a restart's duplicate window is rebuilt from: the newest `most` live messages
    at or after a time, only those with a header, removed ones skipped."""
    store = make_store()
    for i in range(60):
        header = b"NATS/1.0\r\nNats-Msg-Id: %d\r\n\r\n" % i if i % 3 else None
        store.store(f"s.{i % 4}", header, b"x", 1_000 + 10 * (i // 2))
    for i in range(60, 70):  # the newest without a header: none of them is named
        store.store("s.plain", None, b"x", 1_000 + 10 * (i // 2))
    for seq in (4, 5, 31, 59):
        store.remove(seq)
    store = store_harness.reopen(store)
    for since in (0, 1_000, 1_095, 1_100, 1_250, 1_290, 1_300, 1_310, 1_350):
        for most in (0, 1, 2, 7, 30, 100):
            expected = _naive_recent_headed(store, since, most)
            assert store.recent_headed(since, most) == expected, (since, most)
