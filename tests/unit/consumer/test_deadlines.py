"""`AckDeadlines` against a model: whatever part (in-order queue or heap) an entry went
to, the deadlines that still count come due in (deadline, seq) order, and `earliest` is
the earliest of them."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from brook.jetstream.consumer.deadlines import AckDeadlines


@dataclass
class Timed:
    deadline_ns: int | None


seqs = st.integers(1, 30)
times = st.integers(0, 50)
op = st.one_of(
    st.tuples(st.just("arm"), seqs, times),  # a redelivery, NAK delay or progress
    st.tuples(st.just("run"), times, st.integers(1, 5)),  # first deliveries, one deadline
    st.tuples(st.just("ack"), seqs, st.just(0)),
    st.tuples(st.just("due"), times, st.just(0)),
    st.tuples(st.just("clear"), st.just(0), st.just(0)),
)


@settings(max_examples=400, deadline=None)
@given(st.lists(op, max_size=40))
def test_counting_deadlines_come_due_in_order(
    ops: list[tuple[str, int, int]],
) -> None:
    q = AckDeadlines()
    pending: dict[int, Timed] = {}
    next_seq = 31  # first deliveries come above every other sequence, rising
    for kind, a, b in ops:
        if kind == "arm":
            pending[a] = Timed(b)
            q.add(b, a)
        elif kind == "run":
            add = q.adder(a, next_seq)
            for seq in range(next_seq, next_seq + b):
                pending[seq] = Timed(a)
                add((a, seq))
            next_seq += b
        elif kind == "ack":
            pending.pop(a, None)
        elif kind == "due":
            expected = sorted(
                (p.deadline_ns, s)
                for s, p in pending.items()
                if p.deadline_ns is not None and p.deadline_ns <= a
            )
            got = []
            while (entry := q.pop_due(a)) is not None:
                deadline, seq = entry
                p = pending.get(seq)
                if p is not None and p.deadline_ns == deadline:
                    got.append(entry)
                    p.deadline_ns = None  # queued for redelivery: no deadline
            assert got == expected
        else:
            q.clear()
            pending.clear()
        timed = [p.deadline_ns for p in pending.values() if p.deadline_ns is not None]
        assert q.earliest(pending) == (min(timed) if timed else None)
