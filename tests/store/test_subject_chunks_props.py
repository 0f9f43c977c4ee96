"""The file store's per-subject sequences (`subjects.py`, ADR 0058) against a plain model.

A hypothesis state machine appends (one at a time and in runs, with gaps, so sequences
of one subject interleave with others') and removes (oldest, newest, any) sequences of a
few subjects, with `CHUNK` at 3 so that nearly every step freezes, thaws or empties a
chunk; after every step each subject's `len`, `first`, `last`, `all`, `at_or_after` and
`count_at_or_after` (at every sequence in play) must equal a sorted list's answers.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from brook.jetstream.store.file import subjects as subjects_module
from brook.jetstream.store.file.subjects import SubjectIndex
from tests.store.conftest import chunks_of

NAMES = ["a", "b", "c"]


class SubjectChunksMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.index = SubjectIndex()
        self.model: dict[str, list[int]] = {}
        self.sids: dict[str, int] = {}
        self.next_seq = 1

    def _add(self, name: str, seq: int) -> None:
        self.sids[name] = self.index.add(name, seq)
        self.model.setdefault(name, []).append(seq)

    @rule(name=st.sampled_from(NAMES), gap=st.sampled_from([0, 0, 0, 1, 5, 2**32]))
    def append(self, name: str, gap: int) -> None:
        self.next_seq += gap
        self._add(name, self.next_seq)
        self.next_seq += 1

    @rule(names=st.lists(st.sampled_from(NAMES), min_size=1, max_size=12))
    def append_run(self, names: list[str]) -> None:
        sids = self.index.add_run(names, self.next_seq)
        for name, sid in zip(names, sids, strict=True):
            self.sids[name] = sid
            self.model.setdefault(name, []).append(self.next_seq)
            self.next_seq += 1

    @precondition(lambda self: bool(self.model))
    @rule(data=st.data(), where=st.sampled_from(["first", "last", "any"]))
    def remove(self, data: st.DataObject, where: str) -> None:
        name = data.draw(st.sampled_from(sorted(self.model)))
        seqs = self.model[name]
        i = {"first": 0, "last": len(seqs) - 1}.get(where)
        if i is None:
            i = data.draw(st.integers(0, len(seqs) - 1))
        seq = seqs.pop(i)
        self.index.remove(self.sids[name], seq)
        if not seqs:
            del self.model[name]
            del self.sids[name]

    def _probes(self) -> Iterator[int]:
        seen = sorted({s for seqs in self.model.values() for s in seqs})
        yield 0
        for s in seen:
            yield from (s - 1, s, s + 1)
        yield self.next_seq + 1

    @invariant()
    def agrees(self) -> None:
        assert set(self.index.by_name) == set(self.model)
        for name, seqs in self.model.items():
            entry = self.index._entry(name, self.sids[name])
            assert len(entry) == len(seqs)
            assert (entry.first(), entry.last()) == (seqs[0], seqs[-1])
            assert entry.all() == seqs
            for probe in self._probes():
                after = [s for s in seqs if s >= probe]
                assert entry.at_or_after(probe) == (after[0] if after else None), probe
                assert entry.count_at_or_after(probe) == len(after), probe


@pytest.fixture
def tiny_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    chunks_of(monkeypatch, 3)


TestSubjectChunks = pytest.mark.usefixtures("tiny_chunks")(SubjectChunksMachine.TestCase)
TestSubjectChunks.settings = settings(
    max_examples=150,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


def test_a_long_subject_is_frozen_in_chunks_and_stays_exact() -> None:
    """At the real CHUNK: 100k sequences of one subject, interleaved with another's,
    hold all but the newest 2 * CHUNK at most frozen; removals of the oldest thaw one chunk at a
    time, and the answers stay exact."""
    index = SubjectIndex()
    for seq in range(1, 200_001):
        index.add("ab"[seq % 2], seq)
    entry = index._entry("a", index.by_name["a"])
    assert entry._cold is not None
    assert entry._ncold >= 100_000 - 2 * subjects_module.CHUNK
    packed = sum(len(c.packed or b"") for c in entry._cold)
    assert packed < entry._ncold // 4  # well under a byte a sequence (4 unfrozen)
    assert entry.at_or_after(3) == 4
    assert entry.count_at_or_after(100_001) == 50_000
    for seq in range(2, 40_002, 2):
        index.remove(index.by_name["a"], seq)
    assert entry.first() == 40_002
    assert len(entry) == 80_000
    assert entry.all() == list(range(40_002, 200_001, 2))
    assert sum(c.seqs is not None for c in entry._cold) <= 1
