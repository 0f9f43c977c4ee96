"""Pure planning: range splitting and micro-batch admission, with an injected clock."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from brook_spark.plan import Admission, split_range


@given(
    lo=st.integers(1, 10**12),
    size=st.integers(0, 10_000),
    min_partitions=st.integers(1, 50),
    max_per=st.integers(1, 5_000),
)
def test_split_covers_the_range_exactly_once(
    lo: int, size: int, min_partitions: int, max_per: int
) -> None:
    hi = lo + size
    pieces = split_range(lo, hi, min_partitions=min_partitions, max_records_per_partition=max_per)
    if size == 0:
        assert pieces == []
        return
    assert (pieces[0][0], pieces[-1][1]) == (lo, hi)
    assert all(a[1] == b[0] for a, b in itertools.pairwise(pieces))  # contiguous
    sizes = [b - a for a, b in pieces]
    assert min(sizes) >= 1  # no empty partition
    assert max(sizes) - min(sizes) <= 1  # balanced
    assert max(sizes) <= max_per or len(pieces) == size
    assert len(pieces) == min(size, max(min_partitions, -(-size // max_per)))
    # Deterministic: a replay plans the same pieces.
    assert pieces == split_range(
        lo, hi, min_partitions=min_partitions, max_records_per_partition=max_per
    )


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_max_records_caps_and_offsets_never_go_back() -> None:
    a = Admission(min_records=None, max_delay_s=0, clock=Clock())
    assert a.end(10, 100, max_records=25, available_now=False) == 35
    assert a.end(10, 20, max_records=25, available_now=False) == 20
    assert a.end(10, 100, max_records=None, available_now=False) == 100
    assert a.end(50, 40, max_records=None, available_now=False) == 50


def test_min_records_waits_until_enough_or_the_delay_passed() -> None:
    clock = Clock()
    a = Admission(min_records=100, max_delay_s=60, clock=clock)
    assert a.end(1, 11, max_records=None, available_now=False) == 11  # the first batch fires
    clock.now += 1
    assert a.end(11, 50, max_records=None, available_now=False) == 11  # 39 < 100: wait
    clock.now += 30
    assert a.end(11, 111, max_records=None, available_now=False) == 111  # enough now
    clock.now += 59
    assert a.end(111, 120, max_records=None, available_now=False) == 111
    clock.now += 1  # 60 s since the last batch fired
    assert a.end(111, 120, max_records=None, available_now=False) == 120


def test_available_now_ignores_the_minimum() -> None:
    clock = Clock()
    a = Admission(min_records=100, max_delay_s=3600, clock=clock)
    a.end(1, 2, max_records=None, available_now=False)
    assert a.end(2, 10, max_records=None, available_now=True) == 10
    assert a.end(10, 10, max_records=None, available_now=True) == 10
