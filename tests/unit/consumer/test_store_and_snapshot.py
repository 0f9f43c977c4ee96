"""The consumer over a real MemoryStore (StoreSource), deliver policies, persistence."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from brook.jetstream.consumer import (
    AckKind,
    ConsumerSettings,
    ConsumerState,
    DeliverPolicy,
    StoreSource,
    resolve_start_seq,
)
from brook.jetstream.consumer.pending import Pending, pending_runs
from brook.jetstream.store.memory import MemoryStore

from .fakes import S, delivered, delivers

T0 = 1_000 * S


def _store() -> MemoryStore:
    st = MemoryStore()
    for i, subj in enumerate(["o.a", "o.b", "o.a", "x.c", "o.b", "o.a"], start=1):
        st.store(subj, None, b"m", i * S)
    return st


def _consumer(src: StoreSource, start: int, lps: list[int] | None = None) -> ConsumerState:
    cfg = ConsumerSettings(stream="S", name="c")
    return ConsumerState(cfg, src, start_seq=start, last_per_subject_seqs=lps or [])


def test_memory_store_source_with_filters() -> None:
    st = _store()
    src = StoreSource(st, ["o.a", "o.b"])
    c = _consumer(src, 1)
    assert c.num_pending() == 5
    out = c.pull_request("r", T0, batch=10, no_wait=True)
    assert delivered(out) == [1, 2, 3, 5, 6]
    assert [d.pending for d in delivers(out)] == [4, 3, 2, 1, 0]
    st.remove(3)
    c.messages_removed([3])
    assert c.pending_seqs() == [1, 2, 5, 6]
    seq = st.store("o.b", None, b"n", 7 * S)
    assert delivered(c.message_stored(seq, T0)) == []
    assert c.num_pending() == 1
    assert StoreSource(st, [">"]).num_pending(1) == 6


def test_resolve_start_positions() -> None:
    st = _store()
    src = StoreSource(st, ["o.a"])

    def start(policy: DeliverPolicy, **kw: int) -> int:
        return resolve_start_seq(policy, src, stream_first_seq=1, stream_last_seq=6, **kw)

    assert start(DeliverPolicy.ALL) == 1
    assert start(DeliverPolicy.LAST) == 6
    assert start(DeliverPolicy.NEW) == 7
    assert start(DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=4) == 4
    assert start(DeliverPolicy.BY_START_TIME, opt_start_time_ns=2 * S) == 3
    assert start(DeliverPolicy.BY_START_TIME, opt_start_time_ns=99 * S) == 7
    new = _consumer(src, start(DeliverPolicy.NEW))
    assert new.info()["delivered"] == {"consumer_seq": 0, "stream_seq": 6}
    assert new.num_pending() == 0


def test_last_per_subject_then_new_messages() -> None:
    st = _store()
    src = StoreSource(st, ["o.*"])
    c = _consumer(src, 7, lps=[6, 5])
    assert c.info()["delivered"]["stream_seq"] == 4
    assert c.ack_floor == (0, 4)
    assert c.num_pending() == 2
    st.store("o.a", None, b"n", 8 * S)
    out = c.pull_request("r", T0, batch=10, no_wait=True)
    assert delivered(out) == [5, 6, 7]


def test_snapshot_restore_round_trip() -> None:
    st = _store()
    src = StoreSource(st)
    cfg = ConsumerSettings(stream="S", name="c", ack_wait_ns=10 * S)
    c = ConsumerState(cfg, src)
    c.pull_request("r", T0, batch=4)
    c.ack(1, 1, AckKind.ACK, T0)
    c.ack(3, 3, AckKind.ACK, T0)
    assert c.tick(T0 + 10 * S) == []  # 2 and 4 are due; nobody is waiting
    c.pull_request("r", T0 + 10 * S, batch=4)  # redeliveries first, then 5 and 6
    snap = c.snapshot()
    assert snap["delivered"] == {"consumer_seq": 8, "stream_seq": 6}
    # A redelivered message keeps its first consumer sequence (nats-server's Pending).
    # 5 and 6, delivered together for the first time, are one run of two (ADR 0064).
    assert [[*p[:3], *p[5:]] for p in snap["pending"]] == [[2, 2, 2], [4, 4, 2], [5, 7, 1, 2]]
    again = ConsumerState(cfg, src)
    again.restore(snap, T0 + 50 * S)
    assert again.info() == {**c.info(), "num_waiting": 0}
    assert again.next_deadline() == T0 + 60 * S
    again.pull_request("r2", T0 + 50 * S, batch=10, expires_ns=100 * S)
    out = again.tick(T0 + 60 * S)
    assert [(d.stream_seq, d.delivery_count, d.consumer_seq) for d in delivers(out)] == [
        (2, 3, 9),
        (4, 3, 10),
        (5, 2, 11),
        (6, 2, 12),
    ]


def _expand(runs: list[list[int]]) -> dict[int, tuple[int, int, int, int]]:
    """Pending entries (as field tuples) a snapshot's `pending` stands for."""
    out = {}
    for s, c, d, first, last, *count in runs:
        for i in range(count[0] if count else 1):
            out[s + i] = (c + i, d, first, last)
    return out


@given(
    st.lists(
        st.tuples(
            st.integers(1, 3),  # gap to the previous stream sequence
            st.integers(1, 2),  # gap to the previous consumer sequence
            st.integers(1, 2),  # deliveries
            st.integers(0, 1),  # first delivered (a new time or the same as before)
            st.integers(0, 1),  # last delivered, likewise
        ),
        max_size=40,
    )
)
def test_pending_runs_stand_for_every_entry(steps: list[tuple[int, int, int, int, int]]) -> None:
    pending: dict[int, Pending] = {}
    s = c = first = last = 0
    for ds, dc, d, df, dl in steps:
        s, c, first, last = s + ds, c + dc, first + df, last + dl
        pending[s] = Pending(c, d, None, first, last)
    runs = pending_runs(pending)
    assert _expand(runs) == {
        s: (p.consumer_seq, p.deliveries, p.first_delivered_ns, p.last_delivered_ns)
        for s, p in pending.items()
    }
    # Maximal runs: two neighbours never could have been one.
    for a, b in itertools.pairwise(runs):
        n = a[5] if len(a) > 5 else 1
        assert [b[0], b[1], *b[2:5]] != [a[0] + n, a[1] + n, *a[2:5]]


def test_first_deliveries_persist_as_one_run_and_old_entries_still_load() -> None:
    st_ = MemoryStore()
    for i in range(1, 301):
        st_.store("o.a", None, b"m", i * S)
    cfg = ConsumerSettings(stream="S", name="c", ack_wait_ns=10 * S)
    c = ConsumerState(cfg, StoreSource(st_))
    c.pull_request("r", T0, batch=300)
    snap = c.snapshot()
    assert snap["pending"] == [[1, 1, 1, T0, T0, 300]]
    # A file written before runs: one five-number entry per pending message.
    old = {**snap, "pending": [[s, s, 1, T0, T0] for s in range(1, 301)]}
    for data in (snap, old):
        again = ConsumerState(cfg, StoreSource(st_))
        again.restore(data, T0 + S)
        assert again.snapshot() == snap
        assert again.info() == {**c.info(), "num_waiting": 0}
        assert again.next_deadline() == T0 + 11 * S
